package graph_test

import (
	"github.com/kiln-dev/kiln/internal/golden"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// attrsOp has one attribute of every kind, so printing and parsing of each
// kind is tested without depending on a real operator's declaration.
var attrsOp = mustRegister(&op.Op{
	Name: "test.attrs", NumArgs: 1, Pattern: op.Opaque, Rel: op.IdentityRel,
	Attrs: []op.AttrSpec{
		{Name: "i", Kind: ir.AttrInt, Default: int64(-3)},
		{Name: "f", Kind: ir.AttrFloat, Default: 0.5},
		{Name: "s", Kind: ir.AttrString, Default: "a \"quoted\" string"},
		{Name: "b", Kind: ir.AttrBool, Default: true},
		{Name: "is", Kind: ir.AttrInts, Default: []int64{1, -2, 3}},
		{Name: "fs", Kind: ir.AttrFloats, Default: []float64{1, 1e-07, math.Inf(-1)}},
		{Name: "ss", Kind: ir.AttrStrings, Default: []string{}},
		{Name: "dt", Kind: ir.AttrDType, Default: ir.Int8},
	},
	Doc: "test op with every attribute kind",
})

// pairOp returns a tuple of two copies of its argument.
var pairOp = mustRegister(&op.Op{
	Name: "test.pair", NumArgs: 1, Pattern: op.Opaque, Doc: "test op with a tuple result",
	Rel: func(args []ir.Type, _ ir.Attrs) (ir.Type, error) {
		return &ir.TupleType{Fields: []ir.Type{args[0], args[0]}}, nil
	},
})

func mustRegister(o *op.Op) *op.Op {
	if err := op.Register(o); err != nil {
		panic(err)
	}
	return o
}

func tt(dt ir.DType, dims ...int64) *ir.TensorType { return ir.NewTensorType(dt, ir.Shape(dims)) }

func call(o *op.Op, attrs ir.Attrs, args ...graph.Expr) *graph.Call {
	return graph.MustCall(o, args, attrs)
}

func typed(t *testing.T, m *graph.Module) *graph.Module {
	t.Helper()
	if err := graph.InferTypes(m); err != nil {
		t.Fatalf("InferTypes: %v", err)
	}
	return m
}

// denseModule is the example of the format documentation.
func denseModule(t *testing.T) *graph.Module {
	x := graph.NewVar("x", tt(ir.Float32, 1, 3))
	w := graph.NewVar("w", tt(ir.Float32, 4, 3))
	d := call(op.Dense, nil, x, w)
	b := graph.NewConstant(tensor.FromFloat32s(ir.Shape{4}, []float32{1, 2, 3, 4}))
	a := call(op.Add, nil, d, b)
	return typed(t, graph.NewModule(graph.NewFunction([]*graph.Var{x, w}, call(op.Relu, nil, a), nil)))
}

// compositeModule has a composite function literal called twice, a
// global function, a tuple result with projections, quoted names and spans.
func compositeModule(t *testing.T) *graph.Module {
	ty := tt(ir.Float32, 2, 2)
	a := graph.NewVar("a", ty)
	b := graph.NewVar("b", ty)
	comp := graph.NewFunction([]*graph.Var{a, b}, call(op.Relu, nil, call(op.Add, nil, a, b)),
		ir.Attrs{graph.AttrComposite: "dnnl.add_relu", graph.AttrPrimitive: true})

	p := graph.NewVar("onnx::Conv_1", ty)
	gbody := call(attrsOp, ir.Attrs{"ss": []string{"x", "y"}, "dt": ir.Float16}, p)
	gbody.Span = "attrs_node"
	helper := graph.NewFunction([]*graph.Var{p}, gbody, ir.Attrs{graph.AttrCompiler: "ccompiler", graph.AttrGlobalSymbol: "helper_0"})

	x := graph.NewVar("input.1", ty)
	y := graph.NewVar("0", ty)
	c1 := graph.NewFuncCall(comp, []graph.Expr{x, y})
	c2 := graph.NewFuncCall(comp, []graph.Expr{c1, y})
	pair := call(pairOp, nil, c2)
	pair.Span = "Pair_7"
	g := graph.NewFuncCall(graph.NewGlobalVar("helper"), []graph.Expr{graph.NewTupleGetItem(pair, 1)})
	body := graph.NewTuple([]graph.Expr{graph.NewTupleGetItem(pair, 0), g})
	m := graph.NewModule(graph.NewFunction([]*graph.Var{x, y}, body, nil))
	if err := m.Add("helper", helper); err != nil {
		t.Fatal(err)
	}
	return typed(t, m)
}

// constantsModule has constants of every dtype and awkward float values.
func constantsModule(t *testing.T) *graph.Module {
	f32 := tensor.FromFloat32s(ir.Shape{8}, []float32{0.1, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.SmallestNonzeroFloat32, math.MaxFloat32, 1.0000001})
	f64 := tensor.New(ir.Float64, ir.Shape{3})
	copy(f64.Float64s(), []float64{0.1, 1e300, -2.5})
	var fields []graph.Expr
	fields = append(fields, graph.NewConstant(f32), graph.NewConstant(f64))
	for _, dt := range []ir.DType{ir.Float16, ir.BFloat16, ir.Int8, ir.Int16, ir.Int32, ir.Int64, ir.Uint8, ir.Uint16, ir.Uint32, ir.Uint64, ir.Bool} {
		c := tensor.New(dt, ir.Shape{2, 2})
		vals := []float64{0, 1, -1.5, 100}
		for i, v := range vals {
			c.SetFloat(i, v)
		}
		if dt == ir.Uint64 {
			c.SetInt(3, -1) // 2^64-1
		}
		if dt == ir.Int64 {
			c.SetInt(3, math.MinInt64)
		}
		fields = append(fields, graph.NewConstant(c))
	}
	fields = append(fields,
		graph.NewConstant(tensor.Scalar(ir.Float32, 3)),
		graph.NewConstant(tensor.New(ir.Float32, ir.Shape{0, 4})),
		graph.NewConstant(tensor.New(ir.Float32, ir.Shape{17})), // above the inline limit
	)
	return typed(t, graph.NewModule(graph.NewFunction(nil, graph.NewTuple(fields), nil)))
}

var goldenCases = []struct {
	name  string
	build func(*testing.T) *graph.Module
	opts  graph.PrintOptions
}{
	{"dense", denseModule, graph.PrintOptions{}},
	{"composite", compositeModule, graph.PrintOptions{ShowSpans: true}},
	{"composite_nospans", compositeModule, graph.PrintOptions{HideTypes: true}},
	{"constants", constantsModule, graph.PrintOptions{}},
	{"constants_all", constantsModule, graph.PrintOptions{InlineAllConstants: true}},
}

func printString(t *testing.T, m *graph.Module, opts graph.PrintOptions) string {
	t.Helper()
	var b strings.Builder
	if err := graph.Print(&b, m, opts); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestGolden compares printed modules with graph/testdata/NAME.txt
// (regenerate with go test ./graph -update) and checks that printing is
// deterministic.
func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			m := c.build(t)
			got := printString(t, m, c.opts)
			if again := printString(t, m, c.opts); again != got {
				t.Fatalf("printing twice differs:\n%s\n---\n%s", got, again)
			}
			path := filepath.Join("testdata", c.name+".txt")
			if *golden.Update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", path, got, want)
			}
		})
	}
}

// TestDenseText pins the documented example inline.
func TestDenseText(t *testing.T) {
	want := `def @main(%x: Tensor[(1, 3), float32], %w: Tensor[(4, 3), float32]) -> Tensor[(1, 4), float32] {
  %0 = nn.dense(%x, %w) /* Tensor[(1, 4), float32] */;
  %1 = add(%0, constant(float32, [4], [1.0, 2.0, 3.0, 4.0])) /* Tensor[(1, 4), float32] */;
  nn.relu(%1)
}
`
	if got := denseModule(t).String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestRoundTrip parses every golden case printed with all constants and
// prints it again: the text must be identical, and spans survive.
func TestRoundTrip(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			opts.InlineAllConstants = true
			text := printString(t, c.build(t), opts)
			m, err := graph.Parse(text, graph.ParseOptions{})
			if err != nil {
				t.Fatalf("Parse: %v\n%s", err, text)
			}
			if again := printString(t, m, opts); again != text {
				t.Errorf("round trip differs:\n--- printed\n%s\n--- reparsed\n%s", text, again)
			}
		})
	}
}

// TestRoundTripValues checks that parsed constants hold exactly the
// printed bits (NaN compared as NaN) and that sharing of the composite
// function literal is preserved.
func TestRoundTripValues(t *testing.T) {
	orig := constantsModule(t)
	m, err := graph.Parse(printString(t, orig, graph.PrintOptions{InlineAllConstants: true}), graph.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	of := orig.Main().Body.(*graph.Tuple).Fields
	pf := m.Main().Body.(*graph.Tuple).Fields
	for i := range of {
		a, b := of[i].(*graph.Constant).Value, pf[i].(*graph.Constant).Value
		if a.DType == ir.Float32 {
			for k := 0; k < a.Len(); k++ {
				x, y := a.Float32s()[k], b.Float32s()[k]
				if math.Float32bits(x) != math.Float32bits(y) && !(x != x && y != y) {
					t.Errorf("field %d element %d: %v (%#x) became %v (%#x)", i, k, x, math.Float32bits(x), y, math.Float32bits(y))
				}
			}
			continue
		}
		if !a.Equal(b) {
			t.Errorf("field %d: %v became %v", i, a.Data, b.Data)
		}
	}

	cm, err := graph.Parse(printString(t, compositeModule(t), graph.PrintOptions{ShowSpans: true}), graph.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pair := cm.Main().Body.(*graph.Tuple).Fields[0].(*graph.TupleGetItem).Tuple.(*graph.Call)
	if pair.Span != "Pair_7" {
		t.Errorf("span = %q, want Pair_7", pair.Span)
	}
	c2 := pair.Args[0].(*graph.Call)
	c1 := c2.Args[0].(*graph.Call)
	if c1.Fn != c2.Fn {
		t.Errorf("the composite function literal is no longer shared")
	}
	if f := c1.Fn.(*graph.Function); f.StrAttr(graph.AttrComposite) != "dnnl.add_relu" || !f.BoolAttr(graph.AttrPrimitive) {
		t.Errorf("composite attrs = %v", f.Attrs)
	}
	h := cm.Funcs["helper"].Body.(*graph.Call)
	if got := h.Attrs.Strings("ss"); len(got) != 2 || got[1] != "y" {
		t.Errorf("ss = %v", got)
	}
	if h.Attrs.DType("dt") != ir.Float16 || h.Span != "attrs_node" {
		t.Errorf("dt = %v, span = %q", h.Attrs.DType("dt"), h.Span)
	}
}

func TestExprString(t *testing.T) {
	x := graph.NewVar("x", tt(ir.Float32, 2))
	pair := call(pairOp, nil, x)
	e := call(op.Add, nil, graph.NewTupleGetItem(pair, 0), graph.NewTupleGetItem(pair, 1))
	graph.InferFunction(nil, graph.NewFunction([]*graph.Var{x}, e, nil))
	want := "%0 = test.pair(%x) /* (Tensor[(2,), float32], Tensor[(2,), float32]) */;\n" +
		"%1 = %0.0 /* Tensor[(2,), float32] */;\n" +
		"%2 = %0.1 /* Tensor[(2,), float32] */;\n" +
		"add(%1, %2)"
	if got := graph.ExprString(e); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := graph.ExprString(x); got != "%x" {
		t.Errorf("var prints %q", got)
	}
}
