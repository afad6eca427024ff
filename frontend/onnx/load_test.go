package onnx

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// testDomain holds converters the importer tests use, so that they do not
// depend on the default-domain converters of the op-group files.
const testDomain = "kiln.test"

func init() {
	registerDomain(testDomain, "Add", 1, func(c *Ctx, n *Node) ([]graph.Expr, error) {
		r, err := c.Call(op.Add, []graph.Expr{n.Input(0), n.Input(1)}, nil)
		return []graph.Expr{r}, err
	})
	// AddShaped adds to its first input a zero tensor of the shape given (as a constant) by its
	// second input, plus its first input: it needs a compile-time value.
	registerDomain(testDomain, "AddShaped", 1, func(c *Ctx, n *Node) ([]graph.Expr, error) {
		s, err := c.Const(n.Input(1), "shape")
		if err != nil {
			return nil, err
		}
		z := c.Constant(tensor.New(ir.Float32, ir.Shape(s.AsInt64s())))
		r, err := c.Call(op.Add, []graph.Expr{n.Input(0), z}, nil)
		return []graph.Expr{r}, err
	})
	// Late exists only from opset 5 of the test domain (models import 1).
	registerDomain(testDomain, "Late", 5, func(c *Ctx, n *Node) ([]graph.Expr, error) {
		return []graph.Expr{n.Input(0)}, nil
	})
	// Boom is a buggy converter: it panics.
	registerDomain(testDomain, "Boom", 1, func(c *Ctx, n *Node) ([]graph.Expr, error) {
		var xs []graph.Expr
		return []graph.Expr{xs[len(n.Inputs)]}, nil
	})
	// Pair returns two outputs, the second only when asked for.
	registerDomain(testDomain, "Pair", 1, func(c *Ctx, n *Node) ([]graph.Expr, error) {
		return []graph.Expr{n.Input(0)}, nil
	})
}

// Builders for small models.

func dimsOf(dims ...any) *pb.TensorShapeProto {
	sp := &pb.TensorShapeProto{}
	for _, d := range dims {
		dim := &pb.TensorShapeProto_Dimension{}
		switch x := d.(type) {
		case int:
			dim.Value = &pb.TensorShapeProto_Dimension_DimValue{DimValue: int64(x)}
		case string:
			dim.Value = &pb.TensorShapeProto_Dimension_DimParam{DimParam: x}
		case nil:
		}
		sp.Dim = append(sp.Dim, dim)
	}
	return sp
}

func tvi(name string, dt pb.TensorProto_DataType, dims ...any) *pb.ValueInfoProto {
	return &pb.ValueInfoProto{
		Name: proto.String(name),
		Type: &pb.TypeProto{Value: &pb.TypeProto_TensorType{TensorType: &pb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(dt)),
			Shape:    dimsOf(dims...),
		}}},
	}
}

func nd(name, opType string, in, out []string, attrs ...*pb.AttributeProto) *pb.NodeProto {
	return &pb.NodeProto{Name: proto.String(name), OpType: proto.String(opType), Input: in, Output: out, Attribute: attrs}
}

func tnd(name, opType string, in, out []string, attrs ...*pb.AttributeProto) *pb.NodeProto {
	n := nd(name, opType, in, out, attrs...)
	n.Domain = proto.String(testDomain)
	return n
}

func tensorAttr(name string, t *tensor.Tensor) *pb.AttributeProto {
	return &pb.AttributeProto{Name: proto.String(name), Type: pb.AttributeProto_TENSOR.Enum(), T: TensorToProto(t, "")}
}

func graphAttrProto(name string, g *pb.GraphProto) *pb.AttributeProto {
	return &pb.AttributeProto{Name: proto.String(name), Type: pb.AttributeProto_GRAPH.Enum(), G: g}
}

func modelBytes(t *testing.T, g *pb.GraphProto, opset int64) []byte {
	t.Helper()
	m := &pb.ModelProto{
		IrVersion:    proto.Int64(8),
		ProducerName: proto.String("kiln-test"),
		Graph:        g,
		OpsetImport: []*pb.OperatorSetIdProto{
			{Domain: proto.String(""), Version: proto.Int64(opset)},
			{Domain: proto.String(testDomain), Version: proto.Int64(1)},
		},
	}
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func f32(vals ...float32) *tensor.Tensor {
	return tensor.FromFloat32s(ir.Shape{int64(len(vals))}, vals)
}

// runModel evaluates an imported model with the reference executor.
func runModel(t *testing.T, m *Model, args ...*tensor.Tensor) []*tensor.Tensor {
	t.Helper()
	v, err := ref.Run(m.Module, args)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return v.Flatten()
}

func TestLoadUnsortedNodes(t *testing.T) {
	// y = (x + c) + x, with the nodes listed consumers first.
	g := &pb.GraphProto{
		Name: proto.String("g"),
		Node: []*pb.NodeProto{
			tnd("second", "Add", []string{"t", "x"}, []string{"y"}),
			tnd("first", "Add", []string{"x", "c"}, []string{"t"}),
			nd("const", "Constant", nil, []string{"c"}, tensorAttr("value", f32(10, 20, 30))),
		},
		Input:  []*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, 3)},
		Output: []*pb.ValueInfoProto{tvi("y", pb.TensorProto_FLOAT, 3)},
	}
	m, err := Load(modelBytes(t, g, 13), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Inputs) != 1 || m.Inputs[0].Name != "x" || !ir.TypeEqual(m.Inputs[0].Type, ir.NewTensorType(ir.Float32, ir.Shape{3})) {
		t.Fatalf("inputs = %+v", m.Inputs)
	}
	if m.Opsets[""] != 13 || m.Opsets[testDomain] != 1 || m.IRVersion != 8 || m.Producer != "kiln-test" {
		t.Fatalf("metadata: %+v %d %q", m.Opsets, m.IRVersion, m.Producer)
	}
	out := runModel(t, m, f32(1, 2, 3))
	want := []float32{12, 24, 36}
	for i, w := range want {
		if got := out[0].Float32s()[i]; got != w {
			t.Fatalf("y[%d] = %v, want %v", i, got, w)
		}
	}
}

func TestLoadInitializersAndMultipleOutputs(t *testing.T) {
	// w is an initializer that is also listed as an input: a constant.
	g := &pb.GraphProto{
		Node: []*pb.NodeProto{
			tnd("a", "Add", []string{"x", "w"}, []string{"y"}),
			nd("id", "Identity", []string{"w"}, []string{"z"}),
		},
		Initializer: []*pb.TensorProto{TensorToProto(f32(1, 1), "w")},
		Input:       []*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, 2), tvi("w", pb.TensorProto_FLOAT, 2)},
		Output:      []*pb.ValueInfoProto{tvi("y", pb.TensorProto_FLOAT, 2), tvi("z", pb.TensorProto_FLOAT, nil), tvi("x", pb.TensorProto_FLOAT, 2)},
	}
	m, err := Load(modelBytes(t, g, 13), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Module.Main().Params) != 1 || len(m.Inputs) != 1 {
		t.Fatalf("want only x as parameter, got %d params", len(m.Module.Main().Params))
	}
	if _, ok := m.Module.Main().Body.(*graph.Tuple); !ok {
		t.Fatalf("body of a 3-output model is %T, want a tuple", m.Module.Main().Body)
	}
	if len(m.Outputs) != 3 || m.Outputs[1].Name != "z" || !m.Outputs[1].Type.Shape.Equal(ir.Shape{2}) {
		t.Fatalf("outputs = %+v", m.Outputs)
	}
	out := runModel(t, m, f32(5, 6))
	if got := out[0].Float32s(); got[0] != 6 || got[1] != 7 {
		t.Fatalf("y = %v", got)
	}
	if got := out[2].Float32s(); got[0] != 5 || got[1] != 6 {
		t.Fatalf("x passthrough = %v", got)
	}
}

func TestLoadConstantForms(t *testing.T) {
	cases := []struct {
		attr *pb.AttributeProto
		want *tensor.Tensor
	}{
		{&pb.AttributeProto{Name: proto.String("value_float"), Type: pb.AttributeProto_FLOAT.Enum(), F: proto.Float32(2.5)}, tensor.Scalar(ir.Float32, 2.5)},
		{&pb.AttributeProto{Name: proto.String("value_floats"), Type: pb.AttributeProto_FLOATS.Enum(), Floats: []float32{1, 2}}, f32(1, 2)},
		{&pb.AttributeProto{Name: proto.String("value_int"), Type: pb.AttributeProto_INT.Enum(), I: proto.Int64(-4)}, tensor.FromInt64s(ir.Shape{}, []int64{-4})},
		{&pb.AttributeProto{Name: proto.String("value_ints"), Type: pb.AttributeProto_INTS.Enum(), Ints: []int64{3, 4, 5}}, tensor.FromInt64s(ir.Shape{3}, []int64{3, 4, 5})},
		{tensorAttr("value", tensor.FromInt64s(ir.Shape{2, 1}, []int64{7, 8})), tensor.FromInt64s(ir.Shape{2, 1}, []int64{7, 8})},
	}
	for _, tc := range cases {
		g := &pb.GraphProto{
			Node:   []*pb.NodeProto{nd("k", "Constant", nil, []string{"y"}, tc.attr)},
			Output: []*pb.ValueInfoProto{{Name: proto.String("y")}},
		}
		m, err := Load(modelBytes(t, g, 13), Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.attr.GetName(), err)
		}
		k, ok := m.Module.Main().Body.(*graph.Constant)
		if !ok || !k.Value.Equal(tc.want) {
			t.Fatalf("%s: body %s, want %v", tc.attr.GetName(), graph.Describe(m.Module.Main().Body), tc.want)
		}
	}
	// Strings are an unsupported type.
	g := &pb.GraphProto{
		Node:   []*pb.NodeProto{nd("k", "Constant", nil, []string{"y"}, &pb.AttributeProto{Name: proto.String("value_string"), Type: pb.AttributeProto_STRING.Enum(), S: []byte("hi")})},
		Output: []*pb.ValueInfoProto{{Name: proto.String("y")}},
	}
	_, err := Load(modelBytes(t, g, 13), Options{})
	if !errors.Is(err, ErrUnsupportedType) || !strings.Contains(err.Error(), "strings") || !strings.Contains(err.Error(), `node "k"`) {
		t.Fatalf("value_string: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	x := tvi("x", pb.TensorProto_FLOAT, 2)
	y := tvi("y", pb.TensorProto_FLOAT, 2)
	cases := []struct {
		name        string
		g           *pb.GraphProto
		opts        Options
		want        []string
		unsupported bool
	}{
		{
			name: "cycle",
			g: &pb.GraphProto{
				Node: []*pb.NodeProto{
					tnd("a", "Add", []string{"x", "c"}, []string{"b_in"}),
					tnd("b", "Add", []string{"b_in", "x"}, []string{"c"}),
					nd("out", "Identity", []string{"c"}, []string{"y"}),
				},
				Input: []*pb.ValueInfoProto{x}, Output: []*pb.ValueInfoProto{y},
			},
			want: []string{"model has a cycle through nodes", "a", "b"},
		},
		{
			name: "self loop",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{tnd("s", "Add", []string{"x", "y"}, []string{"y"})},
				Input: []*pb.ValueInfoProto{x}, Output: []*pb.ValueInfoProto{y},
			},
			want: []string{"model has a cycle through nodes s"},
		},
		{
			name: "missing producer",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{tnd("X", "Add", []string{"x", "nowhere"}, []string{"y"})},
				Input: []*pb.ValueInfoProto{x}, Output: []*pb.ValueInfoProto{y},
			},
			want: []string{`node X input "nowhere" is not produced by any node, initializer or graph input`},
		},
		{
			name: "missing output",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{nd("i", "Identity", []string{"x"}, []string{"z"})},
				Input: []*pb.ValueInfoProto{x}, Output: []*pb.ValueInfoProto{y},
			},
			want: []string{`graph output "y" is not produced`},
		},
		{
			name: "duplicate output",
			g: &pb.GraphProto{
				Node: []*pb.NodeProto{
					nd("p", "Identity", []string{"x"}, []string{"y"}),
					nd("q", "Identity", []string{"x"}, []string{"y"}),
				},
				Input: []*pb.ValueInfoProto{x}, Output: []*pb.ValueInfoProto{y},
			},
			want: []string{`value "y" is produced by two nodes: p and q`},
		},
		{
			name: "symbolic dim",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{nd("i", "Identity", []string{"x"}, []string{"y"})},
				Input: []*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, "batch", 3)}, Output: []*pb.ValueInfoProto{y},
			},
			want: []string{`graph input "x" has symbolic dimension 0 "batch"`},
		},
		{
			name: "unknown dim",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{nd("i", "Identity", []string{"x"}, []string{"y"})},
				Input: []*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, 3, nil)}, Output: []*pb.ValueInfoProto{y},
			},
			want: []string{`graph input "x" has unknown dimension 1`},
		},
		{
			name: "unsupported op",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{nd("weird", "NoSuchOp", []string{"x"}, []string{"y"})},
				Input: []*pb.ValueInfoProto{x}, Output: []*pb.ValueInfoProto{y},
			},
			want: []string{`node "weird"`, "NoSuchOp", "domain ai.onnx", "opset 13", "operator is not supported"},
		},
		{
			name: "unsupported opset",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{tnd("late", "Late", []string{"x"}, []string{"y"})},
				Input: []*pb.ValueInfoProto{x}, Output: []*pb.ValueInfoProto{y},
			},
			want: []string{`node "late"`, "Late", "domain kiln.test", "opset 1", "operator is supported from opset 5 only"},
		},
		{
			name: "domain not imported",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{{Name: proto.String("m"), OpType: proto.String("Foo"), Domain: proto.String("com.example"), Input: []string{"x"}, Output: []string{"y"}}},
				Input: []*pb.ValueInfoProto{x}, Output: []*pb.ValueInfoProto{y},
			},
			want: []string{`node "m"`, "does not import an opset for domain com.example"},
		},
		{
			name: "output type mismatch",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{nd("i", "Identity", []string{"x"}, []string{"y"})},
				Input: []*pb.ValueInfoProto{x}, Output: []*pb.ValueInfoProto{tvi("y", pb.TensorProto_FLOAT, 3)},
			},
			want: []string{`graph output "y" is declared as Tensor[(3,), float32] but kiln computes Tensor[(2,), float32]`},
		},
		{
			name: "needs constant",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{tnd("r", "AddShaped", []string{"x", "s"}, []string{"y"})},
				Input: []*pb.ValueInfoProto{x, tvi("s", pb.TensorProto_INT64, 1)}, Output: []*pb.ValueInfoProto{y},
			},
			want: []string{`node "r"`, `shape must be a compile-time constant, but it is graph input "s"`},
		},
		{
			name: "sequence input",
			g: &pb.GraphProto{
				Node: []*pb.NodeProto{nd("i", "Identity", []string{"x"}, []string{"y"})},
				Input: []*pb.ValueInfoProto{{Name: proto.String("x"), Type: &pb.TypeProto{Value: &pb.TypeProto_SequenceType{
					SequenceType: &pb.TypeProto_Sequence{ElemType: x.Type}}}}},
				Output: []*pb.ValueInfoProto{y},
			},
			want: []string{`graph input "x" uses sequences`}, unsupported: true,
		},
		{
			name: "optional output",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{nd("i", "Identity", []string{"x"}, []string{"y"})},
				Input: []*pb.ValueInfoProto{x},
				Output: []*pb.ValueInfoProto{{Name: proto.String("y"), Type: &pb.TypeProto{Value: &pb.TypeProto_OptionalType{
					OptionalType: &pb.TypeProto_Optional{ElemType: x.Type}}}}},
			},
			want: []string{`graph output "y" uses optionals`}, unsupported: true,
		},
		{
			name: "string input",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{nd("i", "Identity", []string{"x"}, []string{"y"})},
				Input: []*pb.ValueInfoProto{tvi("x", pb.TensorProto_STRING, 2)}, Output: []*pb.ValueInfoProto{y},
			},
			want: []string{`graph input "x" uses strings`}, unsupported: true,
		},
		{
			name: "training domain",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{{Name: proto.String("opt"), OpType: proto.String("Adam"), Domain: proto.String("ai.onnx.preview.training"), Input: []string{"x"}, Output: []string{"y"}}},
				Input: []*pb.ValueInfoProto{x}, Output: []*pb.ValueInfoProto{y},
			},
			want: []string{"training operators", "ai.onnx.preview.training"}, unsupported: true,
		},
		{
			name: "sequence op",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{nd("sc", "SequenceConstruct", []string{"x"}, []string{"y"})},
				Input: []*pb.ValueInfoProto{x}, Output: []*pb.ValueInfoProto{y},
			},
			want: []string{`node "sc"`, "uses sequences"}, unsupported: true,
		},
		{
			name: "output not computed",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{tnd("p", "Pair", []string{"x"}, []string{"a", "b"})},
				Input: []*pb.ValueInfoProto{x}, Output: []*pb.ValueInfoProto{tvi("b", pb.TensorProto_FLOAT, 2)},
			},
			want: []string{`graph output "b" has no value`, `output 1 of node "p"`},
		},
		{
			name: "converter panic",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{tnd("bug", "Boom", []string{"x"}, []string{"y"})},
				Input: []*pb.ValueInfoProto{x}, Output: []*pb.ValueInfoProto{y},
			},
			want: []string{`node "bug" (Boom, domain kiln.test, opset 1): internal error importing model: converter panicked: runtime error: index out of range`},
		},
		{
			name: "freeze unknown input",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{nd("i", "Identity", []string{"x"}, []string{"y"})},
				Input: []*pb.ValueInfoProto{x}, Output: []*pb.ValueInfoProto{y},
			},
			opts: Options{Freeze: map[string]*tensor.Tensor{"nope": f32(1)}},
			want: []string{`freeze value given for "nope", which is not a graph input`},
		},
		{
			name: "freeze wrong type",
			g: &pb.GraphProto{
				Node:  []*pb.NodeProto{nd("i", "Identity", []string{"x"}, []string{"y"})},
				Input: []*pb.ValueInfoProto{x}, Output: []*pb.ValueInfoProto{y},
			},
			opts: Options{Freeze: map[string]*tensor.Tensor{"x": f32(1, 2, 3)}},
			want: []string{`freeze value for input "x" has type Tensor[(3,), float32], the input has type Tensor[(2,), float32]`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(modelBytes(t, tc.g, 13), tc.opts)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if errors.Is(err, ErrUnsupportedType) != tc.unsupported {
				t.Errorf("errors.Is(err, ErrUnsupportedType) = %v, want %v (%v)", !tc.unsupported, tc.unsupported, err)
			}
			if strings.Contains(err.Error(), "internal error") != (tc.name == "converter panic") {
				t.Errorf("internal error: %v", err)
			}
		})
	}
}

func TestLoadMalformed(t *testing.T) {
	g := &pb.GraphProto{
		Node:   []*pb.NodeProto{nd("i", "Identity", []string{"x"}, []string{"y"})},
		Input:  []*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, 2)},
		Output: []*pb.ValueInfoProto{tvi("y", pb.TensorProto_FLOAT, 2)},
	}
	data := modelBytes(t, g, 13)
	if _, err := Load(data, Options{}); err != nil {
		t.Fatalf("intact model: %v", err)
	}
	for _, cut := range []int{len(data) - 1, len(data) / 2, 3} {
		_, err := Load(data[:cut], Options{})
		if err == nil || !strings.Contains(err.Error(), "not an ONNX model") {
			t.Errorf("truncated to %d bytes: err = %v, want 'not an ONNX model'", cut, err)
		}
	}
	if _, err := Load(nil, Options{}); err == nil || !strings.Contains(err.Error(), "model has no graph") {
		t.Errorf("empty file: %v", err)
	}
	// A corrupt initializer (too few bytes) is an error naming it.
	bad := TensorToProto(f32(1, 2), "w")
	bad.RawData = bad.RawData[:5]
	g.Initializer = []*pb.TensorProto{bad}
	if _, err := Load(modelBytes(t, g, 13), Options{}); err == nil || !strings.Contains(err.Error(), `initializer "w"`) {
		t.Errorf("corrupt initializer: %v", err)
	}
}

func TestLoadInputShapesAndFreeze(t *testing.T) {
	g := &pb.GraphProto{
		Node:   []*pb.NodeProto{tnd("r", "AddShaped", []string{"x", "s"}, []string{"y"})},
		Input:  []*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, "n"), tvi("s", pb.TensorProto_INT64, 1), tvi("unused", pb.TensorProto_FLOAT, 1)},
		Output: []*pb.ValueInfoProto{tvi("y", pb.TensorProto_FLOAT, 4)},
	}
	s := tensor.FromInt64s(ir.Shape{1}, []int64{4})
	m, err := Load(modelBytes(t, g, 13), Options{
		InputShapes: map[string]ir.Shape{"x": {4}},
		Freeze:      map[string]*tensor.Tensor{"s": s, "unused": f32(0)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Frozen) != 1 || m.Frozen[0] != "s" {
		t.Fatalf("Frozen = %v, want [s]", m.Frozen)
	}
	if !m.Inputs[0].Type.Shape.Equal(ir.Shape{4}) {
		t.Fatalf("x type %s", m.Inputs[0].Type)
	}
	out := runModel(t, m, f32(1, 2, 3, 4), s, f32(0))
	if got := out[0].Float32s(); len(got) != 4 || got[3] != 4 {
		t.Fatalf("y = %v", got)
	}
}

func TestLoadIfConstantCondition(t *testing.T) {
	// The branches refer to the outer values x and k by name.
	branch := func(name string, val float32) *pb.GraphProto {
		return &pb.GraphProto{
			Name: proto.String(name),
			Node: []*pb.NodeProto{
				nd(name+"_c", "Constant", nil, []string{name + "_v"}, tensorAttr("value", f32(val, val))),
				tnd(name+"_add", "Add", []string{"k", name + "_v"}, []string{name + "_out"}),
			},
			Output: []*pb.ValueInfoProto{{Name: proto.String(name + "_out")}},
		}
	}
	for _, tc := range []struct {
		cond bool
		want float32
	}{{true, 1 + 3 + 100}, {false, 1 + 3 + 200}} {
		condT := tensor.Scalar(ir.Bool, 0)
		if tc.cond {
			condT = tensor.Scalar(ir.Bool, 1)
		}
		g := &pb.GraphProto{
			Node: []*pb.NodeProto{
				// listed before the producer of k, which the branches use
				nd("if", "If", []string{"c"}, []string{"y"}, graphAttrProto("then_branch", branch("then", 100)), graphAttrProto("else_branch", branch("else", 200))),
				tnd("mk", "Add", []string{"x", "three"}, []string{"k"}),
			},
			Initializer: []*pb.TensorProto{TensorToProto(f32(3, 3), "three")},
			Input:       []*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, 2), tvi("c", pb.TensorProto_BOOL)},
			Output:      []*pb.ValueInfoProto{tvi("y", pb.TensorProto_FLOAT, 2)},
		}
		m, err := Load(modelBytes(t, g, 13), Options{Freeze: map[string]*tensor.Tensor{"c": condT}})
		if err != nil {
			t.Fatal(err)
		}
		out := runModel(t, m, f32(1, 1), condT)
		if got := out[0].Float32s()[0]; got != tc.want {
			t.Errorf("cond %v: y = %v, want %v", tc.cond, got, tc.want)
		}
		// Without a frozen value the condition is run-time: a select.
		m, err = Load(modelBytes(t, g, 13), Options{})
		if err != nil {
			t.Fatal(err)
		}
		out = runModel(t, m, f32(1, 1), condT)
		if got := out[0].Float32s()[1]; got != tc.want {
			t.Errorf("run-time cond %v: y = %v, want %v", tc.cond, got, tc.want)
		}
	}
}

func TestLoadLoopUnrolled(t *testing.T) {
	// for i < 3: acc = acc + x; scan out acc. Result acc = 3x, scans x,2x,3x.
	body := &pb.GraphProto{
		Name: proto.String("body"),
		Node: []*pb.NodeProto{
			nd("cid", "Identity", []string{"cond_in"}, []string{"cond_out"}),
			tnd("acc", "Add", []string{"acc_in", "x"}, []string{"acc_out"}),
			nd("sid", "Identity", []string{"acc_out"}, []string{"scan"}),
		},
		Input:  []*pb.ValueInfoProto{tvi("i", pb.TensorProto_INT64), tvi("cond_in", pb.TensorProto_BOOL), tvi("acc_in", pb.TensorProto_FLOAT, 2)},
		Output: []*pb.ValueInfoProto{{Name: proto.String("cond_out")}, {Name: proto.String("acc_out")}, {Name: proto.String("scan")}},
	}
	g := &pb.GraphProto{
		Node: []*pb.NodeProto{
			nd("loop", "Loop", []string{"M", "", "zero"}, []string{"acc", "scans"}, graphAttrProto("body", body)),
		},
		Initializer: []*pb.TensorProto{
			TensorToProto(tensor.FromInt64s(ir.Shape{}, []int64{3}), "M"),
			TensorToProto(f32(0, 0), "zero"),
		},
		Input:  []*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, 2)},
		Output: []*pb.ValueInfoProto{tvi("acc", pb.TensorProto_FLOAT, 2), tvi("scans", pb.TensorProto_FLOAT, 3, 2)},
	}
	m, err := Load(modelBytes(t, g, 13), Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := runModel(t, m, f32(1, 10))
	if got := out[0].Float32s(); got[0] != 3 || got[1] != 30 {
		t.Fatalf("acc = %v", got)
	}
	want := []float32{1, 10, 2, 20, 3, 30}
	for i, w := range want {
		if got := out[1].Float32s()[i]; got != w {
			t.Fatalf("scans = %v, want %v", out[1].Float32s(), want)
		}
	}
}

func TestLoadScan9(t *testing.T) {
	// Running sum over the rows of x (axis 0), scanned in reverse.
	body := &pb.GraphProto{
		Name: proto.String("body"),
		Node: []*pb.NodeProto{
			tnd("add", "Add", []string{"s_in", "row"}, []string{"s_out"}),
			nd("id", "Identity", []string{"s_out"}, []string{"o"}),
		},
		Input:  []*pb.ValueInfoProto{tvi("s_in", pb.TensorProto_FLOAT, 2), tvi("row", pb.TensorProto_FLOAT, 2)},
		Output: []*pb.ValueInfoProto{{Name: proto.String("s_out")}, {Name: proto.String("o")}},
	}
	g := &pb.GraphProto{
		Node: []*pb.NodeProto{
			nd("scan", "Scan", []string{"init", "x"}, []string{"final", "partial"},
				graphAttrProto("body", body),
				&pb.AttributeProto{Name: proto.String("num_scan_inputs"), Type: pb.AttributeProto_INT.Enum(), I: proto.Int64(1)},
				&pb.AttributeProto{Name: proto.String("scan_input_directions"), Type: pb.AttributeProto_INTS.Enum(), Ints: []int64{1}}),
		},
		Input:  []*pb.ValueInfoProto{tvi("init", pb.TensorProto_FLOAT, 2), tvi("x", pb.TensorProto_FLOAT, 3, 2)},
		Output: []*pb.ValueInfoProto{tvi("final", pb.TensorProto_FLOAT, 2), tvi("partial", pb.TensorProto_FLOAT, 3, 2)},
	}
	m, err := Load(modelBytes(t, g, 11), Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.FromFloat32s(ir.Shape{3, 2}, []float32{1, 2, 3, 4, 5, 6})
	out := runModel(t, m, f32(0, 0), x)
	if got := out[0].Float32s(); got[0] != 9 || got[1] != 12 {
		t.Fatalf("final = %v", got)
	}
	want := []float32{5, 6, 8, 10, 9, 12} // rows 2, 2+1, 2+1+0
	for i, w := range want {
		if got := out[1].Float32s()[i]; got != w {
			t.Fatalf("partial = %v, want %v", out[1].Float32s(), want)
		}
	}
}

func TestLoadModelFunctionAndOpsets(t *testing.T) {
	g := &pb.GraphProto{
		Node:   []*pb.NodeProto{{Name: proto.String("call"), OpType: proto.String("MyFn"), Domain: proto.String("local"), Input: []string{"x"}, Output: []string{"y"}}},
		Input:  []*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, 2)},
		Output: []*pb.ValueInfoProto{tvi("y", pb.TensorProto_FLOAT, 2)},
	}
	m := &pb.ModelProto{
		IrVersion: proto.Int64(8),
		Graph:     g,
		OpsetImport: []*pb.OperatorSetIdProto{
			{Domain: proto.String("ai.onnx"), Version: proto.Int64(15)},
			{Domain: proto.String("local"), Version: proto.Int64(1)},
		},
		Functions: []*pb.FunctionProto{{Name: proto.String("MyFn"), Domain: proto.String("local"), Input: []string{"a"}, Output: []string{"b"},
			Node: []*pb.NodeProto{nd("", "Identity", []string{"a"}, []string{"b"})}}},
	}
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Load(data, Options{})
	if err == nil || !strings.Contains(err.Error(), `node "call" (MyFn, domain local, opset 1): the operator is a model-local function`) {
		t.Fatalf("err = %v", err)
	}
	// "ai.onnx" is the default domain: an Identity model loads with opset 15.
	g.Node = []*pb.NodeProto{nd("i", "Identity", []string{"x"}, []string{"y"})}
	data, _ = proto.Marshal(m)
	got, err := Load(data, Options{})
	if err != nil || got.Opsets[""] != 15 {
		t.Fatalf("load: %v, opsets %v", err, got)
	}
}

// TestLoadExternalFiles: Model.ExternalFiles lists the files holding
// external data (initializers and tensor attributes), once each, sorted.
func TestLoadExternalFiles(t *testing.T) {
	dir := t.TempDir()
	ext := func(name, file string) *pb.TensorProto {
		return &pb.TensorProto{
			Name: proto.String(name), DataType: proto.Int32(1), Dims: []int64{2},
			DataLocation: pb.TensorProto_EXTERNAL.Enum(),
			ExternalData: []*pb.StringStringEntryProto{{Key: proto.String("location"), Value: proto.String(file)}},
		}
	}
	for _, f := range []string{"w.bin", "b.bin"} {
		if err := os.WriteFile(filepath.Join(dir, f), f32(1, 2).Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := nd("c", "Constant", nil, []string{"b"})
	c.Attribute = []*pb.AttributeProto{{Name: proto.String("value"), Type: pb.AttributeProto_TENSOR.Enum(), T: ext("b", "b.bin")}}
	g := &pb.GraphProto{
		Node: []*pb.NodeProto{
			c,
			nd("a", "Add", []string{"x", "w"}, []string{"y0"}),
			nd("a2", "Add", []string{"y0", "w2"}, []string{"y1"}),
			nd("a3", "Add", []string{"y1", "b"}, []string{"y"}),
		},
		Initializer: []*pb.TensorProto{ext("w", "w.bin"), ext("w2", "w.bin")},
		Input:       []*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, 2)},
		Output:      []*pb.ValueInfoProto{tvi("y", pb.TensorProto_FLOAT, 2)},
	}
	path := filepath.Join(dir, "m.onnx")
	if err := os.WriteFile(path, modelBytes(t, g, 13), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := LoadFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.ExternalFiles, ","); got != "b.bin,w.bin" {
		t.Fatalf("ExternalFiles = %q, want b.bin,w.bin", got)
	}
	if got := runModel(t, m, f32(10, 20))[0].Float32s(); got[0] != 13 || got[1] != 26 {
		t.Fatalf("y = %v, want [13 26]", got)
	}
	m2, err := Load(modelBytes(t, &pb.GraphProto{
		Node:   []*pb.NodeProto{nd("a", "Relu", []string{"x"}, []string{"y"})},
		Input:  []*pb.ValueInfoProto{tvi("x", pb.TensorProto_FLOAT, 2)},
		Output: []*pb.ValueInfoProto{tvi("y", pb.TensorProto_FLOAT, 2)},
	}, 13), Options{})
	if err != nil || m2.ExternalFiles != nil {
		t.Fatalf("a model without external data: %v %v", m2.ExternalFiles, err)
	}
}
