package driver

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/quantize"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// qdqCNN is a small float CNN with every operator the QDQ folding knows:
// conv+relu, max pooling, two branches (1x1 conv+relu, 3x3 conv+clip(0,
// 6)) concatenated, a residual add, global pooling, flatten and a
// classifier.
func qdqCNN(t *testing.T) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(11, 12))
	g := &pb.GraphProto{Name: proto.String("qdq")}
	vi := func(name string, dims ...int64) *pb.ValueInfoProto {
		sh := &pb.TensorShapeProto{}
		for _, d := range dims {
			sh.Dim = append(sh.Dim, &pb.TensorShapeProto_Dimension{Value: &pb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		return &pb.ValueInfoProto{Name: proto.String(name), Type: &pb.TypeProto{Value: &pb.TypeProto_TensorType{
			TensorType: &pb.TypeProto_Tensor{ElemType: proto.Int32(int32(pb.TensorProto_FLOAT)), Shape: sh}}}}
	}
	w := func(name string, scale float64, dims ...int64) string {
		v := tensor.New(ir.Float32, dims)
		for i := range v.Float32s() {
			v.Float32s()[i] = float32((rng.Float64()*2 - 1) * scale)
		}
		g.Initializer = append(g.Initializer, onnx.TensorToProto(v, name))
		return name
	}
	scalar := func(name string, v float32) string {
		g.Initializer = append(g.Initializer, onnx.TensorToProto(tensor.FromFloat32s(ir.Shape{}, []float32{v}), name))
		return name
	}
	node := func(op string, in []string, out string, attrs ...*pb.AttributeProto) string {
		g.Node = append(g.Node, &pb.NodeProto{OpType: proto.String(op), Name: proto.String(out), Input: in, Output: []string{out}, Attribute: attrs})
		return out
	}
	ints := func(name string, v ...int64) *pb.AttributeProto {
		return &pb.AttributeProto{Name: proto.String(name), Type: pb.AttributeProto_INTS.Enum(), Ints: v}
	}
	i1 := func(name string, v int64) *pb.AttributeProto {
		return &pb.AttributeProto{Name: proto.String(name), Type: pb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
	}
	g.Input = append(g.Input, vi("x", 1, 3, 8, 8))
	c1 := node("Conv", []string{"x", w("w1", 0.5, 8, 3, 3, 3), w("b1", 0.2, 8)}, "c1", ints("pads", 1, 1, 1, 1))
	p1 := node("MaxPool", []string{node("Relu", []string{c1}, "r1")}, "p1", ints("kernel_shape", 2, 2), ints("strides", 2, 2))
	a := node("Relu", []string{node("Conv", []string{p1, w("wa", 0.5, 4, 8, 1, 1), w("ba", 0.2, 4)}, "ca")}, "ra")
	cb := node("Conv", []string{p1, w("wb", 0.3, 4, 8, 3, 3), w("bb", 0.2, 4)}, "cb", ints("pads", 1, 1, 1, 1))
	b := node("Clip", []string{cb, scalar("zero", 0), scalar("six", 6)}, "clipb")
	cat := node("Concat", []string{a, b}, "cat", i1("axis", 1))
	sum := node("Add", []string{cat, p1}, "sum")
	flat := node("Flatten", []string{node("GlobalAveragePool", []string{sum}, "gap")}, "flat")
	node("Gemm", []string{flat, w("wf", 0.5, 5, 8), w("bf", 0.1, 5)}, "y", i1("transB", 1))
	g.Output = append(g.Output, vi("y", 1, 5))
	data, err := proto.Marshal(&pb.ModelProto{IrVersion: proto.Int64(8), Graph: g,
		OpsetImport: []*pb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestQDQFold: a QDQ model from kiln's quantizer imports, by default, as
// integer operators ending in qnn.requantize; the result
// stays within a few quantization steps of the float-emulated QDQ model
// (KeepQDQ),
// and the compiled integer model gives the reference executor's values
// bit for bit.
func TestQDQFold(t *testing.T) {
	testenv.Cgo(t)
	ctx := context.Background()
	fm, err := quantize.Parse(qdqCNN(t))
	if err != nil {
		t.Fatal(err)
	}
	cal, err := quantize.Generate(fm, 32, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, act := range []ir.DType{ir.Uint8, ir.Int8} {
		t.Run(act.String(), func(t *testing.T) {
			res, err := quantize.Quantize(ctx, fm, quantize.RefEngine{}, cal, quantize.Options{Activations: act})
			if err != nil {
				t.Fatal(err)
			}
			plain, err := onnx.Load(res.Model, onnx.Options{KeepQDQ: true})
			if err != nil {
				t.Fatal(err)
			}
			folded, err := onnx.Load(res.Model, onnx.Options{})
			if err != nil {
				t.Fatal(err)
			}
			text := folded.Module.String()
			t.Log(text)
			// The three convolutions requantize in one operator; the
			// concat's input on another grid, the add and the pooling
			// requantize on their own; the classifier's output is float.
			if n, m := strings.Count(text, "qnn.conv2d_requantize("), strings.Count(text, "qnn.requantize("); n != 3 || m != 3 {
				t.Errorf("%d qnn.conv2d_requantize and %d qnn.requantize calls, want 3 and 3:\n%s", n, m, text)
			}
			for _, line := range strings.Split(text, "\n") {
				if (strings.Contains(line, "conv2d") || strings.Contains(line, "nn.max_pool2d(")) && !strings.Contains(line, "int") {
					t.Errorf("a float operator is left: %s", line)
				}
			}
			evalIn, err := quantize.Generate(fm, 8, 2)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "a")
			cr, err := Compile(folded.Module, []string{"y"}, Config{Host: hostTarget(t), Out: out, Verify: true})
			if err != nil {
				t.Fatal(err)
			}
			art, err := LoadArtifact(cr.Dir)
			if err != nil {
				t.Fatal(err)
			}
			defer art.Close()
			for k, in := range evalIn {
				x := in["x"]
				pv, err := ref.Run(plain.Module, []*tensor.Tensor{x})
				if err != nil {
					t.Fatal(err)
				}
				fv, err := ref.Run(folded.Module, []*tensor.Tensor{x})
				if err != nil {
					t.Fatal(err)
				}
				p, f := pv.Flatten()[0].Float32s(), fv.Flatten()[0].Float32s()
				scale, diff := 0.0, 0.0
				for i := range p {
					scale = math.Max(scale, math.Abs(float64(p[i])))
					diff = math.Max(diff, math.Abs(float64(p[i]-f[i])))
				}
				if diff > 0.03*scale {
					t.Errorf("input %d: integer and float-emulated QDQ differ by %g (outputs up to %g)", k, diff, scale)
				}
				got, err := art.Run(map[string]*tensor.Tensor{"x": x})
				if err != nil {
					t.Fatal(err)
				}
				if !got[0].Equal(fv.Flatten()[0]) {
					t.Errorf("input %d: compiled %v, reference %v", k, got[0].Float32s(), f)
				}
			}
		})
	}
}
