package pattern

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// parseMain parses a module and returns its main function.
func parseMain(t *testing.T, src string) *graph.Function {
	t.Helper()
	mod, err := graph.Parse(src, graph.ParseOptions{ZeroElided: true})
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	return mod.Main()
}

// body is the main body of a module with float32 parameters %x [1,4,8,8],
// %w [4,4,3,3], %b [4], %y [1,4,8,8] and the given bindings and result.
func body(t *testing.T, lines string) graph.Expr {
	t.Helper()
	src := `def @main(%x: Tensor[(1, 4, 8, 8), float32], %w: Tensor[(4, 4, 3, 3), float32], %b: Tensor[(4,), float32], %y: Tensor[(1, 4, 8, 8), float32], %i: Tensor[(1, 4, 8, 8), int32]) {
` + lines + "\n}"
	return parseMain(t, src).Body
}

func TestMatch(t *testing.T) {
	x, y := Wildcard(), Wildcard()
	same := Wildcard()
	conv := IsOp(op.Conv2D, Wildcard(), Wildcard())
	convBias := IsOp(op.BiasAdd, conv, Wildcard())
	convBiasOptRelu := Optional(convBias, func(p Pattern) Pattern { return IsOp(op.Relu, p) })
	composite := IsCall(HasAttr(IsFunction(nil), ir.Attrs{"Composite": "dnnl.add_relu"}), Wildcard(), Wildcard())
	cases := []struct {
		name string
		p    Pattern
		src  string
		want bool
	}{
		{"wildcard", Wildcard(), `%x`, true},
		{"op", IsOp(op.Add, x, y), `add(%x, %y)`, true},
		{"wrong op", IsOp(op.Subtract, Wildcard(), Wildcard()), `add(%x, %y)`, false},
		{"arity", IsOp(op.Add, Wildcard()), `add(%x, %y)`, false},
		{"any args", IsOpAnyArgs(op.Concatenate), `concatenate(%x, %y, %x, axis=1)`, true},
		{"var by name", IsOp(op.Add, IsVar("x"), IsVar("y")), `add(%x, %y)`, true},
		{"var wrong name", IsOp(op.Add, IsVar("y"), IsVar("y")), `add(%x, %x)`, false},
		{"any var", IsOp(op.Relu, IsVar("")), `nn.relu(%y)`, true},
		{"same pattern twice, same expr", IsOp(op.Multiply, same, same), `multiply(%x, %x)`, true},
		{"same pattern twice, other exprs", IsOp(op.Multiply, same, same), `multiply(%x, %y)`, false},
		{"constant", IsOp(op.Add, Wildcard(), IsConstant()), `add(%x, constant(float32, [], [1.0]))`, true},
		{"constant is not a var", IsOp(op.Add, Wildcard(), IsConstant()), `add(%x, %y)`, false},
		// add and multiply are commutative: the constant is first here.
		{"commutative add", IsOp(op.Add, IsOp(op.Relu, Wildcard()), IsConstant()), `%0 = nn.relu(%x); add(constant(float32, [], [1.0]), %0)`, true},
		{"commutative multiply", IsOp(op.Multiply, IsVar("y"), IsVar("x")), `multiply(%x, %y)`, true},
		{"subtract is not commutative", IsOp(op.Subtract, IsVar("y"), IsVar("x")), `subtract(%x, %y)`, false},
		{"alt first", Alt(IsOp(op.Relu, Wildcard()), IsOp(op.Sigmoid, Wildcard())), `nn.relu(%x)`, true},
		{"alt second", Alt(IsOp(op.Relu, Wildcard()), IsOp(op.Sigmoid, Wildcard())), `sigmoid(%x)`, true},
		{"alt none", Alt(IsOp(op.Relu, Wildcard()), IsOp(op.Sigmoid, Wildcard())), `tanh(%x)`, false},
		{"conv bias relu", convBiasOptRelu, `%0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]); %1 = nn.bias_add(%0, %b); nn.relu(%1)`, true},
		{"conv bias without relu", convBiasOptRelu, `%0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]); nn.bias_add(%0, %b)`, true},
		{"conv without bias", convBiasOptRelu, `%0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]); nn.relu(%0)`, false},
		{"call attr", HasAttr(conv, ir.Attrs{"strides": []int{2, 2}}), `nn.conv2d(%x, %w, strides=[2, 2])`, true},
		{"call attr differs", HasAttr(conv, ir.Attrs{"strides": []int{2, 2}}), `nn.conv2d(%x, %w)`, false},
		{"kernel size", HasAttr(IsOpAnyArgs(op.MaxPool2D), ir.Attrs{"pool_size": []int64{3, 3}}), `nn.max_pool2d(%x, pool_size=[3, 3])`, true},
		{"groups int", HasAttr(conv, ir.Attrs{"groups": 1}), `nn.conv2d(%x, %w, padding=[1, 1, 1, 1])`, true},
		{"missing attr", HasAttr(IsOp(op.Relu, Wildcard()), ir.Attrs{"alpha": 1}), `nn.relu(%x)`, false},
		{"op kind elemwise", IsOpOfKind(op.ElemWise, Wildcard()), `nn.relu(%x)`, true},
		{"op kind not elemwise", IsOpOfKind(op.ElemWise, Wildcard(), Wildcard()), `nn.conv2d(%x, %w)`, false},
		{"function attr", composite, `%0 = fn [Composite="dnnl.add_relu"] (%a: Tensor[(1, 4, 8, 8), float32], %c: Tensor[(1, 4, 8, 8), float32]) { %1 = add(%a, %c); nn.relu(%1) }; %0(%x, %y)`, true},
		{"function attr differs", composite, `%0 = fn [Composite="dnnl.conv2d"] (%a: Tensor[(1, 4, 8, 8), float32], %c: Tensor[(1, 4, 8, 8), float32]) { %1 = add(%a, %c); nn.relu(%1) }; %0(%x, %y)`, false},
		{"function body", IsCall(IsFunction(IsOp(op.Relu, IsOp(op.Add, Wildcard(), Wildcard()))), Wildcard(), Wildcard()), `%0 = fn (%a: Tensor[(1, 4, 8, 8), float32], %c: Tensor[(1, 4, 8, 8), float32]) { %1 = add(%a, %c); nn.relu(%1) }; %0(%x, %y)`, true},
		{"dtype", HasDType(Wildcard(), ir.Float32), `nn.relu(%x)`, true},
		{"dtype differs", HasDType(Wildcard(), ir.Float32), `nn.relu(%i)`, false},
		{"shape", HasShape(IsOp(op.Relu, Wildcard()), 1, 4, 8, 8), `nn.relu(%x)`, true},
		{"shape differs", HasShape(IsOp(op.Relu, Wildcard()), 1, 4, 8), `nn.relu(%x)`, false},
		{"type", HasType(Wildcard(), &ir.TensorType{DType: ir.Int32, Shape: ir.Shape{1, 4, 8, 8}}), `%i`, true},
		{"tuple", IsTuple(IsVar("x"), IsVar("y")), `(%x, %y)`, true},
		{"tuple arity", IsTuple(IsVar("x")), `(%x, %y)`, false},
		{"tuple any arity", IsTupleAnyArity(), `(%x, %y, %x)`, true},
		{"tuple get item", IsTupleGetItem(IsTuple(Wildcard(), Wildcard()), 1), `%0 = (%x, %y); %0.1`, true},
		{"tuple get item index differs", IsTupleGetItem(IsTuple(Wildcard(), Wildcard()), 0), `%0 = (%x, %y); %0.1`, false},
		{"tuple get item any index", IsTupleGetItem(Wildcard(), -1), `%0 = (%x, %y); %0.1`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := body(t, c.src)
			_, got := Match(c.p, e)
			if got != c.want {
				t.Errorf("Match(%s, %s) = %v, want %v", c.p, graph.ExprString(e), got, c.want)
			}
		})
	}
}

// TestMatchBindings checks what each sub-pattern matched, inputs and
// inner expressions, including through a commutative swap.
func TestMatchBindings(t *testing.T) {
	x, c := Wildcard(), IsConstant()
	relu := IsOp(op.Relu, x)
	p := IsOp(op.Add, relu, c)
	e := body(t, `%0 = nn.relu(%x); add(constant(float32, [], [2.0]), %0)`)
	r, ok := Match(p, e)
	if !ok {
		t.Fatalf("no match")
	}
	add := e.(*graph.Call)
	if r.Get(p) != e || r.Get(relu) != add.Args[1] || r.Get(c) != add.Args[0] {
		t.Errorf("bindings: p=%v relu=%v c=%v", r.Get(p), r.Get(relu), r.Get(c))
	}
	if v, ok := r.Get(x).(*graph.Var); !ok || v.Name != "x" {
		t.Errorf("x bound to %v", r.Get(x))
	}
	if len(r.Inputs) != 1 || r.Inputs[0] != r.Get(x) || len(r.Constants) != 1 || len(r.Inner) != 2 || r.Inner[1] != e {
		t.Errorf("inputs %v, constants %v, inner %v", r.Inputs, r.Constants, r.Inner)
	}
	if r.Get(Wildcard()) != nil {
		t.Errorf("an unused pattern is bound")
	}
}

// TestIsConstantAfterBinding: a weight passed as a parameter is not a
// constant; once the parameter is bound to its value it is.
func TestIsConstantAfterBinding(t *testing.T) {
	p := IsOp(op.Conv2D, Wildcard(), IsConstant())
	fn := parseMain(t, `def @main(%x: Tensor[(1, 4, 8, 8), float32], %w: Tensor[(4, 4, 3, 3), float32]) { nn.conv2d(%x, %w) }`)
	if _, ok := Match(p, fn.Body); ok {
		t.Fatalf("is_constant matched a parameter")
	}
	w := fn.Params[1]
	val := tensor.New(ir.Float32, ir.Shape{4, 4, 3, 3})
	bound := graph.Rewrite(fn.Body, func(e graph.Expr) graph.Expr {
		if e == graph.Expr(w) {
			return graph.NewConstant(val)
		}
		return e
	})
	if err := typeNew(bound); err != nil {
		t.Fatal(err)
	}
	r, ok := Match(p, bound)
	if !ok {
		t.Fatalf("is_constant did not match the bound weight: %s", graph.ExprString(bound))
	}
	if len(r.Constants) != 1 || r.Constants[0].Value != val {
		t.Errorf("constants %v", r.Constants)
	}
}

func TestDominator(t *testing.T) {
	conv := IsOp(op.Conv2D, Wildcard(), Wildcard())
	path := IsOpOfKind(op.ElemWise, Wildcard())
	child := IsOp(op.Add, Wildcard(), Wildcard())
	diamond := Dominates(conv, path, child)
	cases := []struct {
		name, src string
		want      bool
		inner     int
	}{
		{"diamond", `%0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]); %1 = nn.relu(%0); %2 = sigmoid(%1); add(%2, %0)`, true, 4},
		{"two paths", `%0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]); %1 = nn.relu(%0); %2 = tanh(%0); add(%1, %2)`, true, 4},
		{"direct", `%0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]); add(%0, %0)`, true, 2},
		{"two parents", `%0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]); %1 = nn.conv2d(%y, %w, padding=[1, 1, 1, 1]); %2 = nn.relu(%0); add(%2, %1)`, false, 0},
		{"path not elemwise", `%0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]); %1 = nn.max_pool2d(%0, pool_size=[1, 1]); add(%1, %0)`, false, 0},
		{"path used outside", `%0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]); %1 = nn.relu(%0); %2 = add(%1, %0); (%2, %1)`, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := body(t, c.src)
			root := e
			if tup, ok := e.(*graph.Tuple); ok {
				root = tup.Fields[0]
			}
			r, ok := NewMatcher(e).Match(diamond, root)
			if ok != c.want {
				t.Fatalf("match = %v, want %v", ok, c.want)
			}
			if ok && len(r.Inner) != c.inner {
				t.Errorf("inner %d expressions, want %d", len(r.Inner), c.inner)
			}
		})
	}
}

func TestRewrite(t *testing.T) {
	// relu(relu(x)) → relu(x), to a fixed point: four relus become one.
	inner := IsOp(op.Relu, Wildcard())
	p := IsOp(op.Relu, inner)
	e := body(t, `%0 = nn.relu(%x); %1 = nn.relu(%0); %2 = nn.relu(%1); %3 = nn.relu(%2); add(%3, %y)`)
	out, err := Rewrite(e, Callback{Pattern: p, Rewrite: func(r *Result) (graph.Expr, error) { return r.Get(inner), nil }})
	if err != nil {
		t.Fatal(err)
	}
	add, ok := out.(*graph.Call)
	if !ok || add.Op != op.Add {
		t.Fatalf("rewrite: %s", graph.ExprString(out))
	}
	if r, ok := add.Args[0].(*graph.Call); !ok || r.Op != op.Relu || r.Args[0].(*graph.Var).Name != "x" {
		t.Errorf("rewrite: %s, want add(nn.relu(%%x), %%y)", graph.ExprString(out))
	}
	if n := countOps(out, op.Relu); n != 1 {
		t.Errorf("%d relus left, want 1: %s", n, graph.ExprString(out))
	}
	// A replacement that matches again forever (swapping the operands of
	// an add) is an error.
	a, b := Wildcard(), Wildcard()
	_, err = Rewrite(e, Callback{Pattern: IsOp(op.Add, a, b), Rewrite: func(r *Result) (graph.Expr, error) {
		return graph.MustCall(op.Add, []graph.Expr{r.Get(b), r.Get(a)}, nil), nil
	}})
	if err == nil || !strings.Contains(err.Error(), "fixed point") {
		t.Errorf("growing rewrite: %v", err)
	}
	// A callback error names the expression and pattern.
	_, err = Rewrite(e, Callback{Pattern: IsOp(op.Relu, Wildcard()), Rewrite: func(*Result) (graph.Expr, error) { return nil, errBoom }})
	if err == nil || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "nn.relu(*)") {
		t.Errorf("callback error: %v", err)
	}
}

type boom struct{}

func (boom) Error() string { return "boom" }

var errBoom error = boom{}

func countOps(e graph.Expr, o *op.Op) int {
	n := 0
	graph.PostOrder(e, func(x graph.Expr) {
		if c, ok := x.(*graph.Call); ok && c.Op == o {
			n++
		}
	})
	return n
}

func TestPatternString(t *testing.T) {
	conv := IsOp(op.Conv2D, Wildcard(), IsConstant())
	p := Optional(HasAttr(IsOp(op.BiasAdd, conv, IsVar("b")), ir.Attrs{"axis": 1}), func(p Pattern) Pattern { return IsOp(op.Relu, p) })
	want := "(nn.relu(nn.bias_add(nn.conv2d(*, const), %b){axis=1}) | nn.bias_add(nn.conv2d(*, const), %b){axis=1})"
	if got := p.String(); got != want {
		t.Errorf("String:\n got %s\nwant %s", got, want)
	}
	d := Dominates(conv, IsOpOfKind(op.ElemWise, Wildcard()), HasDType(IsTupleGetItem(IsTupleAnyArity(), -1), ir.Float32))
	want = "dominates(nn.conv2d(*, const), op<elemwise>(*), (...).*<dtype=float32>)"
	if got := d.String(); got != want {
		t.Errorf("String:\n got %s\nwant %s", got, want)
	}
}
