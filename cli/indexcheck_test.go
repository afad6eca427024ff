package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// indexModel is y = OP(data, idx) for a [5] float data constant and a
// run-time int64 index input of shape shape.
func indexModel(t *testing.T, opType string, shape []int64, extra ...string) []byte {
	t.Helper()
	f32 := int32(pb.TensorProto_FLOAT)
	i64 := int32(pb.TensorProto_INT64)
	sp := &pb.TensorShapeProto{}
	for _, d := range shape {
		sp.Dim = append(sp.Dim, &pb.TensorShapeProto_Dimension{Value: &pb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	in := []string{"data", "idx"}
	inits := []*pb.TensorProto{{Name: proto.String("data"), DataType: &f32, Dims: []int64{5}, FloatData: []float32{10, 11, 12, 13, 14}}}
	if len(extra) > 0 {
		in = append(in, "upd")
		inits = append(inits, &pb.TensorProto{Name: proto.String("upd"), DataType: &f32, Dims: shape, FloatData: make([]float32, shape[0])})
	}
	m := &pb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*pb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}},
		Graph: &pb.GraphProto{
			Name:        proto.String("g"),
			Node:        []*pb.NodeProto{{Name: proto.String("n"), OpType: proto.String(opType), Input: in, Output: []string{"y"}}},
			Initializer: inits,
			Input: []*pb.ValueInfoProto{{Name: proto.String("idx"), Type: &pb.TypeProto{Value: &pb.TypeProto_TensorType{
				TensorType: &pb.TypeProto_Tensor{ElemType: &i64, Shape: sp}}}}},
			Output: []*pb.ValueInfoProto{{Name: proto.String("y")}},
		},
	}
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestIndexOutOfRange: an out-of-range run-time index is the same error
// on the reference engine and in compiled code (graph executor and AOT),
// where generated kernels check indices instead of clamping them; a
// negative index in range counts from the end on every engine.
func TestIndexOutOfRange(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		op    string
		extra []string
	}{{"Gather", nil}, {"GatherElements", nil}, {"ScatterElements", []string{"upd"}}} {
		model := filepath.Join(dir, c.op+".onnx")
		if err := os.WriteFile(model, indexModel(t, c.op, []int64{2}, c.extra...), 0o644); err != nil {
			t.Fatal(err)
		}
		bad := filepath.Join(dir, "bad.npy")
		good := filepath.Join(dir, "good.npy")
		if err := tensor.WriteNpyFile(bad, tensor.FromInt64s(ir.Shape{2}, []int64{1, 7})); err != nil {
			t.Fatal(err)
		}
		if err := tensor.WriteNpyFile(good, tensor.FromInt64s(ir.Shape{2}, []int64{-1, 2})); err != nil {
			t.Fatal(err)
		}
		const want = "index 7 out of range [-5, 5)"
		aot := filepath.Join(dir, c.op+".aot")
		if code, _, stderr := kiln("compile", model, "-t", "c", "--executor", "aot", "-o", aot); code != 0 {
			t.Fatalf("%s: AOT compile: exit %d: %s", c.op, code, stderr)
		}
		engines := [][]string{{model}, {model, "-t", "c"}, {aot}}
		var outs []string
		for _, e := range engines {
			code, _, stderr := kiln(append([]string{"run", "--input", bad}, e...)...)
			if code != 1 || !strings.Contains(stderr, want) {
				t.Errorf("%s %v: exit %d: %s; want an error with %q", c.op, e, code, stderr, want)
			}
			code, stdout, stderr := kiln(append([]string{"run", "--input", good}, e...)...)
			if code != 0 {
				t.Errorf("%s %v, in-range indices: exit %d: %s", c.op, e, code, stderr)
			}
			lines := strings.SplitN(stdout, "\n", 3)
			if len(lines) < 2 {
				t.Fatalf("%s %v: output %q", c.op, e, stdout)
			}
			outs = append(outs, lines[1])
		}
		if outs[1] != outs[0] || outs[2] != outs[0] {
			t.Errorf("%s: outputs differ between engines: %q", c.op, outs)
		}
	}
}
