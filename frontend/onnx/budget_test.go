package onnx

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/internal/budget"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

func i64s(vals ...int64) *tensor.Tensor {
	return tensor.FromInt64s(ir.Shape{int64(len(vals))}, vals)
}

func floatAttr(name string, v float32) *pb.AttributeProto {
	return &pb.AttributeProto{Name: proto.String(name), Type: pb.AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
}

func intAttr(name string, v int64) *pb.AttributeProto {
	return &pb.AttributeProto{Name: proto.String(name), Type: pb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

// TestHugeSizesRefused builds tiny models whose nodes compute enormous
// tensors (the sizes come from constants in the file) and checks each is
// an error naming the node, returned quickly and without allocating the
// tensor: the process must not die of a fatal out-of-memory error.
func TestHugeSizesRefused(t *testing.T) {
	huge := int64(1) << 40
	cases := []struct {
		name  string
		nodes []*pb.NodeProto
		in    []*pb.ValueInfoProto
		want  string
	}{
		{"constant_of_shape", []*pb.NodeProto{
			nd("shape", "Constant", nil, []string{"s"}, tensorAttr("value", i64s(huge))),
			nd("big", "ConstantOfShape", []string{"s"}, []string{"y"}),
		}, nil, "big"},
		{"constant_of_shape_overflow", []*pb.NodeProto{
			nd("shape", "Constant", nil, []string{"s"}, tensorAttr("value", i64s(1<<32, 1<<32, 1<<32))),
			nd("wrap", "ConstantOfShape", []string{"s"}, []string{"y"}),
		}, nil, "wrap"},
		{"expand", []*pb.NodeProto{
			nd("shape", "Constant", nil, []string{"s"}, tensorAttr("value", i64s(huge, 3))),
			nd("grow", "Expand", []string{"x", "s"}, []string{"y"}),
		}, []*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, 3)}, "grow"},
		{"tile", []*pb.NodeProto{
			nd("reps", "Constant", nil, []string{"r"}, tensorAttr("value", i64s(huge))),
			nd("tile", "Tile", []string{"x", "r"}, []string{"y"}),
		}, []*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, 3)}, "tile"},
		{"pad", []*pb.NodeProto{
			nd("pads", "Constant", nil, []string{"p"}, tensorAttr("value", i64s(0, huge))),
			nd("pad", "Pad", []string{"x", "p"}, []string{"y"}),
		}, []*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, 3)}, "pad"},
		{"onehot", []*pb.NodeProto{
			nd("depth", "Constant", nil, []string{"d"}, tensorAttr("value", i64s(huge))),
			nd("vals", "Constant", nil, []string{"v"}, tensorAttr("value", f32(0, 1))),
			nd("onehot", "OneHot", []string{"i", "d", "v"}, []string{"y"}),
		}, []*pb.ValueInfoProto{tvi("i", pb.TensorProto_INT64, 4)}, "onehot"},
		{"resize", []*pb.NodeProto{
			nd("scales", "Constant", nil, []string{"sc"}, tensorAttr("value", tensor.FromFloat32s(ir.Shape{4}, []float32{1, 1, 1e9, 1e9}))),
			nd("resize", "Resize", []string{"x", "", "sc"}, []string{"y"}),
		}, []*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, 1, 1, 2, 2)}, "resize"},
		{"range", []*pb.NodeProto{
			nd("start", "Constant", nil, []string{"a"}, tensorAttr("value", tensor.FromInt64s(ir.Shape{}, []int64{0}))),
			nd("limit", "Constant", nil, []string{"b"}, tensorAttr("value", tensor.FromInt64s(ir.Shape{}, []int64{huge}))),
			nd("delta", "Constant", nil, []string{"c"}, tensorAttr("value", tensor.FromInt64s(ir.Shape{}, []int64{1}))),
			nd("range", "Range", []string{"a", "b", "c"}, []string{"y"}),
		}, nil, "range"},
		{"huge_input", []*pb.NodeProto{nd("relu", "Relu", []string{"x"}, []string{"y"})},
			[]*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, 1<<31, 1<<31)}, "x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := &pb.GraphProto{Name: proto.String("g"), Node: c.nodes, Input: c.in, Output: []*pb.ValueInfoProto{{Name: proto.String("y")}}}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := Load(modelBytes(t, g, 13), Options{})
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatal("loaded without error")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), c.want) || !(strings.Contains(err.Error(), "memory budget") || strings.Contains(err.Error(), "overflow") || strings.Contains(err.Error(), "2^63")) {
				t.Errorf("error %q: want one naming %q and the size", err, c.want)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
			if grew := int64(after.TotalAlloc) - int64(before.TotalAlloc); grew > 64<<20 {
				t.Errorf("allocated %d bytes before refusing", grew)
			}
		})
	}
}

// TestMemoryBudgetOption checks that the budget is what refuses: a small
// model passes under the default and fails under a 1 KiB budget.
func TestMemoryBudgetOption(t *testing.T) {
	g := &pb.GraphProto{Name: proto.String("g"),
		Node: []*pb.NodeProto{
			nd("shape", "Constant", nil, []string{"s"}, tensorAttr("value", i64s(64, 64))),
			nd("fill", "ConstantOfShape", []string{"s"}, []string{"y"}),
		},
		Output: []*pb.ValueInfoProto{{Name: proto.String("y")}}}
	if _, err := Load(modelBytes(t, g, 13), Options{}); err != nil {
		t.Fatal(err)
	}
	prev := budget.SetLimit(1024)
	defer budget.SetLimit(prev)
	_, err := Load(modelBytes(t, g, 13), Options{})
	if err == nil || !strings.Contains(err.Error(), "fill") || !strings.Contains(err.Error(), "more than the memory budget of 1 KiB") {
		t.Errorf("under a 1 KiB budget: %v", err)
	}
}

// TestNestedLoopsBounded: two nested Loops of 4096 trips each (a few
// hundred bytes) would unroll to 16M operators; the import stops at
// MaxImportCalls with an error naming the loop, in seconds.
func TestNestedLoopsBounded(t *testing.T) {
	inner := &pb.GraphProto{
		Name: proto.String("inner"),
		Node: []*pb.NodeProto{
			nd("icond", "Identity", []string{"ic_in"}, []string{"ic_out"}),
			nd("iadd", "Add", []string{"ia_in", "x"}, []string{"ia_out"}),
		},
		Input:  []*pb.ValueInfoProto{tvi("ii", pb.TensorProto_INT64), tvi("ic_in", pb.TensorProto_BOOL), tvi("ia_in", pb.TensorProto_FLOAT, 2)},
		Output: []*pb.ValueInfoProto{{Name: proto.String("ic_out")}, {Name: proto.String("ia_out")}},
	}
	outer := &pb.GraphProto{
		Name: proto.String("outer"),
		Node: []*pb.NodeProto{
			nd("ocond", "Identity", []string{"oc_in"}, []string{"oc_out"}),
			nd("inner_loop", "Loop", []string{"M", "", "oa_in"}, []string{"oa_out"}, graphAttrProto("body", inner)),
		},
		Input:  []*pb.ValueInfoProto{tvi("oi", pb.TensorProto_INT64), tvi("oc_in", pb.TensorProto_BOOL), tvi("oa_in", pb.TensorProto_FLOAT, 2)},
		Output: []*pb.ValueInfoProto{{Name: proto.String("oc_out")}, {Name: proto.String("oa_out")}},
	}
	g := &pb.GraphProto{
		Name: proto.String("g"),
		Node: []*pb.NodeProto{
			nd("outer_loop", "Loop", []string{"M", "", "zero"}, []string{"acc"}, graphAttrProto("body", outer)),
		},
		Initializer: []*pb.TensorProto{
			TensorToProto(tensor.FromInt64s(ir.Shape{}, []int64{4096}), "M"),
			TensorToProto(f32(0, 0), "zero"),
		},
		Input:  []*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, 2)},
		Output: []*pb.ValueInfoProto{tvi("acc", pb.TensorProto_FLOAT, 2)},
	}
	data := modelBytes(t, g, 13)
	start := time.Now()
	_, err := Load(data, Options{})
	if err == nil || !strings.Contains(err.Error(), "more than 200000 operators") || !strings.Contains(err.Error(), "loop") {
		t.Errorf("a %d-byte model of nested loops: %v", len(data), err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestStrictAttributesAndOpsets: a wrong-typed attribute, an attribute
// the operator does not define and an opset newer than kiln implements
// are errors naming the node, attribute or opset (ONNX Runtime rejects
// these models; reading them with defaults would give wrong answers).
func TestStrictAttributesAndOpsets(t *testing.T) {
	x := []*pb.ValueInfoProto{tvi("a", pb.TensorProto_FLOAT, 2, 2), tvi("b", pb.TensorProto_FLOAT, 2, 2)}
	out := []*pb.ValueInfoProto{{Name: proto.String("y")}}
	cases := []struct {
		name  string
		node  *pb.NodeProto
		opset int64
		want  string
	}{
		{"gemm alpha as INT", nd("gemm", "Gemm", []string{"a", "b"}, []string{"y"}, intAttr("alpha", 2)), 13, `node "gemm" (Gemm`},
		{"softmax axis as FLOAT", nd("sm", "Softmax", []string{"a"}, []string{"y"}, floatAttr("axis", 1)), 13, `attribute "axis" is FLOAT, want INT`},
		{"unknown attribute", nd("relu", "Relu", []string{"a"}, []string{"y"}, intAttr("alpah", 1)), 13, `attribute "alpah" is not one kiln's Relu converter`},
		{"opset too new", nd("relu", "Relu", []string{"a"}, []string{"y"}), MaxOpset + 1, "kiln implements the operators up to opset"},
	}
	for _, c := range cases {
		g := &pb.GraphProto{Name: proto.String("g"), Node: []*pb.NodeProto{c.node}, Input: x, Output: out}
		_, err := Load(modelBytes(t, g, c.opset), Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	g := &pb.GraphProto{Name: proto.String("g"), Node: []*pb.NodeProto{nd("gemm", "Gemm", []string{"a", "b"}, []string{"y"}, intAttr("alpha", 2))}, Input: x, Output: out}
	if _, err := Load(modelBytes(t, g, 13), Options{}); err == nil || !strings.Contains(err.Error(), `attribute "alpha" is INT, want FLOAT`) {
		t.Errorf("gemm alpha: %v", err)
	}
}

// TestBadAttributeValues: attribute values out of their range are errors
// naming the node.
func TestBadAttributeValues(t *testing.T) {
	x := []*pb.ValueInfoProto{tvi("a", pb.TensorProto_FLOAT, 1, 1, 4, 4)}
	ints := func(name string, v ...int64) *pb.AttributeProto {
		return &pb.AttributeProto{Name: proto.String(name), Type: pb.AttributeProto_INTS.Enum(), Ints: v}
	}
	cases := []struct {
		name  string
		node  *pb.NodeProto
		opset int64
		outs  int
		want  string
	}{
		{"split num_outputs 0", nd("split", "Split", []string{"a"}, nil, intAttr("num_outputs", 0), intAttr("axis", 2)), 18, 0, `num_outputs is 0`},
		{"softmax axis out of range", nd("sm", "Softmax", []string{"a"}, []string{"y"}, intAttr("axis", 7)), 13, 1, `node "sm"`},
		{"concat axis out of range", nd("cat", "Concat", []string{"a", "a"}, []string{"y"}, intAttr("axis", -9)), 13, 1, `node "cat"`},
		{"maxpool negative pads", nd("pool", "MaxPool", []string{"a"}, []string{"y"}, ints("kernel_shape", 2, 2), ints("pads", -1, -1, 0, 0)), 13, 1, `node "pool"`},
		{"conv negative stride", nd("conv", "Conv", []string{"a", "w"}, []string{"y"}, ints("strides", -1, 1)), 13, 1, `node "conv"`},
	}
	for _, c := range cases {
		var outs []*pb.ValueInfoProto
		for i := 0; i < c.outs; i++ {
			outs = append(outs, &pb.ValueInfoProto{Name: proto.String("y")})
		}
		if c.outs == 0 {
			c.node.Output = []string{"y"}
			outs = []*pb.ValueInfoProto{{Name: proto.String("y")}}
		}
		g := &pb.GraphProto{Name: proto.String("g"), Node: []*pb.NodeProto{c.node}, Input: x, Output: outs,
			Initializer: []*pb.TensorProto{TensorToProto(tensor.New(ir.Float32, ir.Shape{1, 1, 2, 2}), "w")}}
		_, err := Load(modelBytes(t, g, c.opset), Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
}

// TestSplitNumOutputs: opset 18's num_outputs splits into chunks of
// ceil(dim/k) with a smaller last one.
func TestSplitNumOutputs(t *testing.T) {
	g := &pb.GraphProto{Name: proto.String("g"),
		Node:   []*pb.NodeProto{nd("split", "Split", []string{"a"}, []string{"p", "q", "r"}, intAttr("num_outputs", 3))},
		Input:  []*pb.ValueInfoProto{tvi("a", pb.TensorProto_FLOAT, 7)},
		Output: []*pb.ValueInfoProto{{Name: proto.String("p")}, {Name: proto.String("q")}, {Name: proto.String("r")}}}
	m, err := Load(modelBytes(t, g, 18), Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := runModel(t, m, f32(1, 2, 3, 4, 5, 6, 7))
	if len(out) != 3 || out[0].Len() != 3 || out[1].Len() != 3 || out[2].Len() != 1 || out[2].Float32s()[0] != 7 {
		t.Errorf("split = %v", out)
	}
}

// TestHugeConstantMatMulNotFolded: a MatMul of two constant 8192x8192
// matrices (a 2^39-operation fold) stays in the program instead of
// keeping the importer busy for minutes.
func TestHugeConstantMatMulNotFolded(t *testing.T) {
	n := int64(8192)
	g := &pb.GraphProto{Name: proto.String("g"),
		Node: []*pb.NodeProto{
			nd("shape", "Constant", nil, []string{"s"}, tensorAttr("value", i64s(n, n))),
			nd("a", "ConstantOfShape", []string{"s"}, []string{"ma"}),
			nd("mm", "MatMul", []string{"ma", "ma"}, []string{"y"}),
		},
		Output: []*pb.ValueInfoProto{{Name: proto.String("y")}}}
	start := time.Now()
	m, err := Load(modelBytes(t, g, 13), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("import took %v", d)
	}
	if !strings.Contains(m.Module.String(), "matmul") {
		t.Errorf("the MatMul was folded:\n%.400s", m.Module.String())
	}
}
