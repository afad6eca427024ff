package transform

import (
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/tirtest"
)

func TestSimplifySemantics(t *testing.T) { checkSemantics(t, Simplify()) }

func TestSimplifyRedundant(t *testing.T) {
	g := mustRun(t, Simplify(), tirtest.Redundant())
	want := `for z in T.serial(0):
    B[z] = T.float32(1.0)
for i in T.serial(8):
    T.evaluate(0)
    B[i] = A[i]
    T.evaluate(0)
for e in T.serial(4):
    pass
B[7] = B[7] + T.float32(0.5)`
	if got := body(g); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestSimplifyCases(t *testing.T) {
	a := tir.NewBuffer("A", ir.Int32, ir.Shape{16}, "")
	i := tir.NewVar("i", tir.Int32T)
	x := tir.NewVar("x", tir.Int32T)
	c := tir.NewVar("c", tir.BoolT)
	one := tir.Idx(1)
	tests := []struct {
		name string
		in   tir.Stmt
		want string
	}{
		{"nested fold", tir.NewStore(a, tir.Bin(tir.OpAdd, tir.Bin(tir.OpMul, tir.Bin(tir.OpAdd, i, tir.Idx(0)), tir.Idx(4)), tir.Bin(tir.OpSub, tir.Idx(5), tir.Idx(2))), i),
			"A[i] = i * 4 + 3"},
		{"reassociate", tir.NewStore(a, one, tir.Bin(tir.OpAdd, tir.Bin(tir.OpAdd, i, tir.Idx(2)), tir.Idx(3))),
			"A[i + 5] = 1"},
		{"select const", tir.NewStore(a, tir.NewSelect(tir.Bin(tir.OpLT, tir.Idx(1), tir.Idx(2)), i, tir.Idx(9)), i),
			"A[i] = i"},
		{"select same branches", tir.NewStore(a, tir.NewSelect(c, i, i), i),
			"A[i] = i"},
		{"if_then_else const", tir.NewStore(a, tir.IfThenElseExpr(tir.Bool(false), tir.NewLoad(a, tir.Idx(99)), tir.Idx(0)), i),
			"A[i] = 0"},
		{"cast fold", tir.NewStore(a, &tir.Cast{T: tir.Int32T, Value: tir.Bin(tir.OpMul, tir.Int64(3), tir.Int64(5))}, i),
			"A[i] = 15"},
		{"not fold", tir.NewIf(&tir.Not{A: tir.Bin(tir.OpGT, tir.Idx(2), tir.Idx(3))}, tir.NewStore(a, one, i), nil),
			"A[i] = 1"},
		{"if false with else", tir.NewIf(tir.Bin(tir.OpEQ, tir.Idx(2), tir.Idx(3)), tir.NewStore(a, one, i), tir.NewStore(a, tir.Idx(2), i)),
			"A[i] = 2"},
		{"if false no else", tir.NewIf(tir.Bool(false), tir.NewStore(a, one, i), nil),
			"T.evaluate(0)"},
		{"extent one loop", tir.NewFor(x, tir.Idx(3), tir.Idx(1), tir.Serial, tir.NewStore(a, x, tir.Bin(tir.OpMul, x, tir.Idx(2)))),
			"A[6] = 3"},
		{"let const inlined", tir.NewLet(x, tir.Bin(tir.OpAdd, tir.Idx(2), tir.Idx(2)), tir.NewStore(a, x, tir.Bin(tir.OpAdd, x, i))),
			"A[i + 4] = 4"},
		{"let expr kept", tir.NewLet(x, tir.NewLoad(a, i), tir.NewStore(a, tir.Bin(tir.OpMul, x, one), i)),
			"with T.let(A[i]) as x:\n    A[i] = x"},
		{"and/or", tir.NewIf(tir.Bin(tir.OpOr, tir.Bin(tir.OpAnd, c, tir.Bool(true)), tir.Bool(false)), tir.NewStore(a, one, i), nil),
			"if c:\n    A[i] = 1"},
		{"x - x", tir.NewStore(a, tir.Bin(tir.OpSub, tir.NewLoad(a, i), tir.NewLoad(a, i)), i),
			"A[i] = 0"},
		{"div by zero kept", tir.NewStore(a, tir.Bin(tir.OpDiv, one, tir.Idx(0)), i),
			"A[i] = T.truncdiv(1, 0)"},
	}
	for _, tc := range tests {
		got := tir.StmtString(SimplifyStmt(tc.in))
		if got != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}

// TestSimplifyPowSquare: pow(x, 2) becomes x*x, pow(x, 3) x*x*x; other
// exponents and operands with side effects stay calls.
func TestSimplifyPowSquare(t *testing.T) {
	x := tir.NewVar("x", tir.Float32T)
	two := tir.FloatConst(ir.Float32, 2)
	if got := SimplifyExpr(tir.NewCall(tir.IntrinPow, x, two)); !tir.ExprEqual(got, tir.Mul(x, x)) {
		t.Errorf("pow(x, 2) -> %v, want x*x", got)
	}
	three := tir.FloatConst(ir.Float32, 3)
	if got := SimplifyExpr(tir.NewCall(tir.IntrinPow, x, three)); !tir.ExprEqual(got, tir.Mul(tir.Mul(x, x), x)) {
		t.Errorf("pow(x, 3) -> %v, want x*x*x", got)
	}
	four := tir.FloatConst(ir.Float32, 4)
	if got := SimplifyExpr(tir.NewCall(tir.IntrinPow, x, four)); !tir.ExprEqual(got, tir.NewCall(tir.IntrinPow, x, four)) {
		t.Errorf("pow(x, 4) -> %v, want it unchanged", got)
	}
	ext := tir.CallExternOf(tir.Float32T, "next_value")
	if got := SimplifyExpr(tir.NewCall(tir.IntrinPow, ext, two)); !tir.ExprEqual(got, tir.NewCall(tir.IntrinPow, ext, two)) {
		t.Errorf("pow(call_extern, 2) -> %v: the call would run twice", got)
	}
}

// TestSimplifyRecombinesSplitIndex: the flattened index of a fused
// [960, 7, 7] loop, floordiv(floordiv(f, 7), 7)*49 +
// floormod(floordiv(f, 7), 7)*7 + floormod(f, 7), is f again; pieces that
// do not match (another divisor, another variable, a wrong scale) stay.
func TestSimplifyRecombinesSplitIndex(t *testing.T) {
	f := tir.NewVar("f", tir.Int32T)
	g := tir.NewVar("g", tir.Int32T)
	fd := func(a tir.PrimExpr, c int64) tir.PrimExpr { return tir.Bin(tir.OpFloorDiv, a, tir.Idx(c)) }
	fm := func(a tir.PrimExpr, c int64) tir.PrimExpr { return tir.Bin(tir.OpFloorMod, a, tir.Idx(c)) }
	mul := func(a tir.PrimExpr, c int64) tir.PrimExpr { return tir.Bin(tir.OpMul, a, tir.Idx(c)) }
	add := func(a, b tir.PrimExpr) tir.PrimExpr { return tir.Bin(tir.OpAdd, a, b) }
	cases := []struct {
		in   tir.PrimExpr
		want string
	}{
		{add(add(mul(fd(fd(f, 7), 7), 49), mul(fm(fd(f, 7), 7), 7)), fm(f, 7)), "f"},
		{add(fm(f, 5), mul(fd(f, 5), 5)), "f"},
		{add(mul(fd(f, 4), 12), mul(fm(f, 4), 3)), "f * 3"},
		{add(mul(fd(f, 4), 8), fm(f, 4)), "f // 4 * 8 + f % 4"},
		{add(mul(fd(f, 4), 4), fm(g, 4)), "f // 4 * 4 + g % 4"},
		{add(mul(fd(f, 4), 4), fm(f, 3)), "f // 4 * 4 + f % 3"},
	}
	for _, c := range cases {
		if got := tir.ExprString(SimplifyExpr(c.in)); got != c.want {
			t.Errorf("%s: got %s, want %s", tir.ExprString(c.in), got, c.want)
		}
	}
}
