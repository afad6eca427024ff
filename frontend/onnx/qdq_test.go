package onnx

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// qdqGraph builds x (float) -> Q -> DQ -> Conv(DQ(w), bias float) -> act ->
// Q -> DQ -> y, the form other quantizers write: the activation is kept
// between the convolution and its QuantizeLinear.
func qdqGraph(act string) *pb.ModelProto {
	g := &pb.GraphProto{Name: proto.String("g")}
	init := func(name string, t *tensor.Tensor) string {
		g.Initializer = append(g.Initializer, TensorToProto(t, name))
		return name
	}
	node := func(op string, in []string, out string) {
		g.Node = append(g.Node, &pb.NodeProto{OpType: proto.String(op), Name: proto.String(out), Input: in, Output: []string{out}})
	}
	u8 := func(v float64) *tensor.Tensor { t := tensor.New(ir.Uint8, nil); t.SetFloat(0, v); return t }
	f32 := func(shape ir.Shape, v ...float32) *tensor.Tensor { return tensor.FromFloat32s(shape, v) }
	w := tensor.New(ir.Int8, ir.Shape{2, 2, 1, 1})
	for i, v := range []int8{3, -2, -5, 7} {
		w.Data[i] = byte(v)
	}
	zw := tensor.New(ir.Int8, ir.Shape{2})
	node("QuantizeLinear", []string{"x", init("xs", f32(nil, 0.05)), init("xz", u8(128))}, "xq")
	node("DequantizeLinear", []string{"xq", "xs", "xz"}, "xd")
	node("DequantizeLinear", []string{init("wq", w), init("ws", f32(ir.Shape{2}, 0.1, 0.02)), init("wz", zw)}, "wd")
	g.Node[len(g.Node)-1].Attribute = []*pb.AttributeProto{{Name: proto.String("axis"), Type: pb.AttributeProto_INT.Enum(), I: proto.Int64(0)}}
	node("Conv", []string{"xd", "wd", init("b", f32(ir.Shape{2}, 0.3, -0.01))}, "c")
	last := "c"
	switch act {
	case "Relu":
		node("Relu", []string{"c"}, "a")
		last = "a"
	case "Clip":
		node("Clip", []string{"c", init("lo", f32(nil, -0.2)), init("hi", f32(nil, 0.25))}, "a")
		last = "a"
	}
	node("QuantizeLinear", []string{last, init("ys", f32(nil, 0.01)), init("yz", u8(100))}, "yq")
	node("DequantizeLinear", []string{"yq", "ys", "yz"}, "y")
	vi := func(name string, dims ...int64) *pb.ValueInfoProto {
		sh := &pb.TensorShapeProto{}
		for _, d := range dims {
			sh.Dim = append(sh.Dim, &pb.TensorShapeProto_Dimension{Value: &pb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		return &pb.ValueInfoProto{Name: proto.String(name), Type: &pb.TypeProto{Value: &pb.TypeProto_TensorType{
			TensorType: &pb.TypeProto_Tensor{ElemType: proto.Int32(int32(pb.TensorProto_FLOAT)), Shape: sh}}}}
	}
	g.Input = []*pb.ValueInfoProto{vi("x", 1, 2, 3, 3)}
	g.Output = []*pb.ValueInfoProto{vi("y", 1, 2, 3, 3)}
	return &pb.ModelProto{IrVersion: proto.Int64(8), Graph: g, OpsetImport: []*pb.OperatorSetIdProto{{Version: proto.Int64(13)}}}
}

// TestFoldQDQActivations: Conv -> Relu/Clip -> QuantizeLinear folds into
// QLinearConv followed by Max/Min on the output grid, and the integer
// model agrees with the float-emulated one to within one output step.
func TestFoldQDQActivations(t *testing.T) {
	x := tensor.New(ir.Float32, ir.Shape{1, 2, 3, 3})
	for i := range x.Float32s() {
		x.Float32s()[i] = float32(math.Sin(float64(i))) * 3 // some beyond x's range
	}
	for _, tc := range []struct {
		act  string
		want []string // op types after folding, in order
	}{
		{"", []string{"QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "QLinearConv", "DequantizeLinear"}},
		{"Relu", []string{"QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "QLinearConv", "Max", "DequantizeLinear"}},
		{"Clip", []string{"QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "QLinearConv", "Max", "Min", "DequantizeLinear"}},
	} {
		t.Run("act "+tc.act, func(t *testing.T) {
			mp := qdqGraph(tc.act)
			data, err := proto.Marshal(mp)
			if err != nil {
				t.Fatal(err)
			}
			folded := proto.Clone(mp).(*pb.ModelProto)
			if _, err := foldQDQ(folded.Graph, 13); err != nil {
				t.Fatal(err)
			}
			var ops []string
			for _, n := range folded.Graph.Node {
				ops = append(ops, n.GetOpType())
			}
			if strings.Join(ops, " ") != strings.Join(tc.want, " ") {
				t.Errorf("folded ops %v, want %v", ops, tc.want)
			}
			var vals [2][]float32
			for k, fold := range []bool{false, true} {
				m, err := Load(data, Options{KeepQDQ: !fold})
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.Contains(m.Module.String(), "requantize("); got != fold {
					t.Errorf("fold %v: qnn.requantize used %v", fold, got)
				}
				v, err := ref.Run(m.Module, []*tensor.Tensor{x})
				if err != nil {
					t.Fatal(err)
				}
				vals[k] = v.Flatten()[0].Float32s()
			}
			for i := range vals[0] {
				// The bias is rounded to the accumulator's grid and the
				// requantization to fixed point: at most one output step.
				if d := math.Abs(float64(vals[0][i] - vals[1][i])); d > 0.01+1e-6 {
					t.Errorf("element %d: float-emulated %g, integer %g", i, vals[0][i], vals[1][i])
				}
			}
		})
	}
}

// TestFoldQDQGroups: a depthwise convolution folds (kiln has an integer
// kernel for it); another grouped one stays in float.
func TestFoldQDQGroups(t *testing.T) {
	for _, tc := range []struct {
		name  string
		group int64
		w     ir.Shape
		fold  bool
	}{
		{"depthwise", 2, ir.Shape{2, 1, 1, 1}, true},
		{"grouped", 2, ir.Shape{4, 1, 1, 1}, false}, // 4 outputs from 2 groups: two per group
	} {
		t.Run(tc.name, func(t *testing.T) {
			mp := qdqGraph("")
			for _, init := range mp.Graph.Initializer {
				if init.GetName() == "wq" {
					w := tensor.New(ir.Int8, tc.w)
					*init = *TensorToProto(w, "wq")
				}
				if init.GetName() == "ws" || init.GetName() == "wz" || init.GetName() == "b" {
					n := tc.w[0]
					var v *tensor.Tensor
					switch init.GetName() {
					case "ws":
						v = tensor.New(ir.Float32, ir.Shape{n})
						for i := range v.Float32s() {
							v.Float32s()[i] = 0.1
						}
					case "wz":
						v = tensor.New(ir.Int8, ir.Shape{n})
					default:
						v = tensor.New(ir.Float32, ir.Shape{n})
					}
					*init = *TensorToProto(v, init.GetName())
				}
			}
			for _, n := range mp.Graph.Node {
				if n.GetOpType() == "Conv" {
					n.Attribute = append(n.Attribute, &pb.AttributeProto{Name: proto.String("group"), Type: pb.AttributeProto_INT.Enum(), I: proto.Int64(tc.group)})
				}
			}
			if _, err := foldQDQ(mp.Graph, 13); err != nil {
				t.Fatal(err)
			}
			var folded bool
			for _, n := range mp.Graph.Node {
				folded = folded || n.GetOpType() == "QLinearConv"
			}
			if folded != tc.fold {
				t.Errorf("folded %v, want %v", folded, tc.fold)
			}
		})
	}
}

// TestFoldQDQSoftmax: DQ -> Softmax -> Q folds into QLinearSoftmax, which
// imports as qnn.softmax, within one output step of the float-emulated
// model; Softmax's axis (here the opset-13 default) carries over.
func TestFoldQDQSoftmax(t *testing.T) {
	g := &pb.GraphProto{Name: proto.String("g")}
	init := func(name string, tt *tensor.Tensor) string {
		g.Initializer = append(g.Initializer, TensorToProto(tt, name))
		return name
	}
	node := func(op string, in []string, out string) {
		g.Node = append(g.Node, &pb.NodeProto{OpType: proto.String(op), Name: proto.String(out), Input: in, Output: []string{out}})
	}
	i8 := func(v float64) *tensor.Tensor { tt := tensor.New(ir.Int8, nil); tt.SetFloat(0, v); return tt }
	node("QuantizeLinear", []string{"x", init("xs", tensor.FromFloat32s(nil, []float32{0.05})), init("xz", i8(3))}, "xq")
	node("DequantizeLinear", []string{"xq", "xs", "xz"}, "xd")
	node("Softmax", []string{"xd"}, "p")
	node("QuantizeLinear", []string{"p", init("ys", tensor.FromFloat32s(nil, []float32{1.0 / 256})), init("yz", i8(-128))}, "yq")
	node("DequantizeLinear", []string{"yq", "ys", "yz"}, "y")
	vi := func(name string) *pb.ValueInfoProto {
		sh := &pb.TensorShapeProto{}
		for _, d := range []int64{2, 9} {
			sh.Dim = append(sh.Dim, &pb.TensorShapeProto_Dimension{Value: &pb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		return &pb.ValueInfoProto{Name: proto.String(name), Type: &pb.TypeProto{Value: &pb.TypeProto_TensorType{
			TensorType: &pb.TypeProto_Tensor{ElemType: proto.Int32(int32(pb.TensorProto_FLOAT)), Shape: sh}}}}
	}
	g.Input, g.Output = []*pb.ValueInfoProto{vi("x")}, []*pb.ValueInfoProto{vi("y")}
	mp := &pb.ModelProto{IrVersion: proto.Int64(8), Graph: g, OpsetImport: []*pb.OperatorSetIdProto{{Version: proto.Int64(13)}}}
	data, err := proto.Marshal(mp)
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.New(ir.Float32, ir.Shape{2, 9})
	for i := range x.Float32s() {
		x.Float32s()[i] = float32(i%7)*0.3 - float32(i/9)*2
	}
	var vals [2][]float32
	for k, fold := range []bool{false, true} {
		m, err := Load(data, Options{KeepQDQ: !fold})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(m.Module.String(), "qnn.softmax("); got != fold {
			t.Errorf("fold %v: qnn.softmax used %v\n%s", fold, got, m.Module)
		}
		v, err := ref.Run(m.Module, []*tensor.Tensor{x})
		if err != nil {
			t.Fatal(err)
		}
		vals[k] = v.Flatten()[0].Float32s()
	}
	for i := range vals[0] {
		if d := math.Abs(float64(vals[0][i] - vals[1][i])); d > 1.0/256+1e-6 {
			t.Errorf("element %d: float-emulated %g, integer %g", i, vals[0][i], vals[1][i])
		}
	}
}
