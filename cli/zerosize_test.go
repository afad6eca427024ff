package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
	"google.golang.org/protobuf/proto"
)

// zeroSizeModel has a [0, 3] input: y1 = relu(x) + x ([0, 3]), y2 =
// x @ w ([0, 4]), y3 = concat(x, c) ([2, 3]), y4 = reduce_sum(x, 0) ([3],
// zeros), y5 = softmax(x) ([0, 3]).
func zeroSizeModel(t *testing.T) []byte {
	t.Helper()
	f32 := int32(pb.TensorProto_FLOAT)
	vi := func(name string, dims ...int64) *pb.ValueInfoProto {
		sp := &pb.TensorShapeProto{}
		for _, d := range dims {
			sp.Dim = append(sp.Dim, &pb.TensorShapeProto_Dimension{Value: &pb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		return &pb.ValueInfoProto{Name: proto.String(name), Type: &pb.TypeProto{Value: &pb.TypeProto_TensorType{
			TensorType: &pb.TypeProto_Tensor{ElemType: &f32, Shape: sp}}}}
	}
	nd := func(name, op string, in, out []string, attrs ...*pb.AttributeProto) *pb.NodeProto {
		return &pb.NodeProto{Name: proto.String(name), OpType: proto.String(op), Input: in, Output: out, Attribute: attrs}
	}
	ints := func(name string, v ...int64) *pb.AttributeProto {
		return &pb.AttributeProto{Name: proto.String(name), Type: pb.AttributeProto_INTS.Enum(), Ints: v}
	}
	intA := func(name string, v int64) *pb.AttributeProto {
		return &pb.AttributeProto{Name: proto.String(name), Type: pb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
	}
	m := &pb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*pb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}},
		Graph: &pb.GraphProto{
			Name: proto.String("zero"),
			Node: []*pb.NodeProto{
				nd("relu", "Relu", []string{"x"}, []string{"r"}),
				nd("add", "Add", []string{"r", "x"}, []string{"y1"}),
				nd("mm", "MatMul", []string{"x", "w"}, []string{"y2"}),
				nd("cat", "Concat", []string{"x", "c"}, []string{"y3"}, intA("axis", 0)),
				nd("sum", "ReduceSum", []string{"x", "axes"}, []string{"y4"}, intA("keepdims", 0)),
				nd("sm", "Softmax", []string{"x"}, []string{"y5"}, intA("axis", 1)),
			},
			Initializer: []*pb.TensorProto{
				{Name: proto.String("w"), DataType: &f32, Dims: []int64{3, 4}, FloatData: make([]float32, 12)},
				{Name: proto.String("c"), DataType: &f32, Dims: []int64{2, 3}, FloatData: []float32{1, 2, 3, 4, 5, 6}},
				{Name: proto.String("axes"), DataType: proto.Int32(int32(pb.TensorProto_INT64)), Dims: []int64{1}, Int64Data: []int64{0}},
			},
			Input:  []*pb.ValueInfoProto{vi("x", 0, 3)},
			Output: []*pb.ValueInfoProto{vi("y1", 0, 3), vi("y2", 0, 4), vi("y3", 2, 3), vi("y4", 3), vi("y5", 0, 3)},
		},
	}
	_ = ints
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestZeroSizeTensors: tensors with a zero dimension are legal ONNX; the
// compiled engine (graph executor and AOT) must build and run them and
// agree with the reference engine.
func TestZeroSizeTensors(t *testing.T) {
	testenv.Cgo(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "zero.onnx")
	if err := os.WriteFile(model, zeroSizeModel(t), 0o644); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "x.npy")
	if err := tensor.WriteNpyFile(in, tensor.New(ir.Float32, ir.Shape{0, 3})); err != nil {
		t.Fatal(err)
	}
	read := func(d string) []*tensor.Tensor {
		t.Helper()
		var out []*tensor.Tensor
		for _, n := range []string{"y1", "y2", "y3", "y4", "y5"} {
			v, err := tensor.ReadNpyFile(filepath.Join(d, n+".npy"))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		return out
	}
	ref := filepath.Join(dir, "ref")
	if code, _, stderr := kiln("run", model, "--input", in, "--output-dir", ref); code != 0 {
		t.Fatalf("reference: exit %d: %s", code, stderr)
	}
	want := read(ref)
	if want[2].Float32s()[5] != 6 || len(want[3].Float32s()) != 3 {
		t.Fatalf("reference outputs %v", want)
	}
	for _, args := range [][]string{{"-t", "c"}, {"-t", "c", "--executor", "aot"}} {
		art := filepath.Join(dir, "art-"+args[len(args)-1])
		if code, _, stderr := kiln(append([]string{"compile", model, "-o", art}, args...)...); code != 0 {
			t.Fatalf("%v: compile: exit %d: %s", args, code, stderr)
		}
		out := filepath.Join(dir, "out-"+args[len(args)-1])
		if code, _, stderr := kiln("run", art, "--input", in, "--output-dir", out); code != 0 {
			t.Fatalf("%v: run: exit %d: %s", args, code, stderr)
		}
		got := read(out)
		for i := range want {
			if err := tensor.AllClose(got[i], want[i], 0, 0); err != nil {
				t.Errorf("%v: output y%d: %v", args, i+1, err)
			}
		}
	}
}
