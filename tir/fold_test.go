package tir

import (
	"math"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

func TestFoldConstructors(t *testing.T) {
	i := NewVar("i", Int32T)
	j := NewVar("j", Int32T)
	x := NewVar("x", Float32T)
	c := NewVar("c", BoolT)
	i8 := func(v int64) PrimExpr { return IntConst(ir.Int8, v) }
	u8 := func(v int64) PrimExpr { return IntConst(ir.Uint8, v) }
	tests := []struct {
		name string
		got  PrimExpr
		want string
	}{
		{"const add", Add(Idx(2), Idx(3)), "5"},
		{"const mul", Mul(Idx(6), Idx(7)), "42"},
		{"truncdiv neg", Div(Idx(-7), Idx(2)), "-3"},
		{"truncmod neg", Mod(Idx(-7), Idx(2)), "-1"},
		{"floordiv neg", FloorDiv(Idx(-7), Idx(2)), "-4"},
		{"floormod neg", FloorMod(Idx(-7), Idx(2)), "1"},
		{"floormod neg divisor", FloorMod(Idx(7), Idx(-2)), "-1"},
		{"div by zero kept", Div(Idx(1), Idx(0)), "T.truncdiv(1, 0)"},
		{"int8 wraps", Add(i8(100), i8(100)), "T.int8(-56)"},
		{"uint8 wraps", Sub(u8(1), u8(2)), "T.uint8(255)"},
		{"uint8 div", Div(u8(250), u8(7)), "T.uint8(35)"},
		{"int32 overflow wraps", Mul(Idx(1<<20), Idx(1<<12)), "0"},
		{"x+0", Add(i, Idx(0)), "i"},
		{"0+x", Add(Idx(0), i), "i"},
		{"x-0", Sub(i, Idx(0)), "i"},
		{"x*1", Mul(i, Idx(1)), "i"},
		{"1*x", Mul(Idx(1), i), "i"},
		{"x*0", Mul(i, Idx(0)), "0"},
		{"x/1", Div(i, Idx(1)), "i"},
		{"x floordiv 1", FloorDiv(i, Idx(1)), "i"},
		{"x floormod 1", FloorMod(i, Idx(1)), "0"},
		{"x-x", Sub(i, i), "0"},
		{"const left", Add(Idx(3), i), "i + 3"},
		{"const left mul", Mul(Idx(3), i), "i * 3"},
		{"reassoc add", Add(Add(i, Idx(3)), Idx(4)), "i + 7"},
		{"reassoc sub", Sub(Add(i, Idx(3)), Idx(3)), "i"},
		{"reassoc sub add", Add(Sub(i, Idx(5)), Idx(2)), "i + -3"},
		{"reassoc mul", Mul(Mul(i, Idx(3)), Idx(4)), "i * 12"},
		{"index expr", Add(Mul(i, Idx(8)), j), "i * 8 + j"},
		{"floor quotient and remainder", Add(Mul(FloorDiv(i, Idx(13)), Idx(13)), FloorMod(i, Idx(13))), "i"},
		{"trunc quotient and remainder", Add(Mul(Div(i, Idx(7)), Idx(7)), Mod(i, Idx(7))), "i"},
		{"quotient and remainder in a sum", Add(Add(Mul(j, Idx(169)), Mul(FloorDiv(i, Idx(13)), Idx(13))), FloorMod(i, Idx(13))), "j * 169 + i"},
		{"mixed division kinds kept", Add(Mul(Div(i, Idx(7)), Idx(7)), FloorMod(i, Idx(7))), "T.truncdiv(i, 7) * 7 + i % 7"},
		{"other divisor kept", Add(Mul(FloorDiv(i, Idx(7)), Idx(7)), FloorMod(i, Idx(5))), "i // 7 * 7 + i % 5"},
		{"min same", Min(i, i), "i"},
		{"max const", Max(Idx(3), Idx(9)), "9"},
		{"compare const", LT(Idx(3), Idx(4)), "True"},
		{"compare var", GE(i, Idx(0)), "i >= 0"},
		{"and true", And(c, Bool(true)), "c"},
		{"and false", And(Bool(false), c), "False"},
		{"or false", Or(c, Bool(false)), "c"},
		{"or true", Or(c, Bool(true)), "True"},
		{"not const", NewNot(Bool(true)), "False"},
		{"not not", NewNot(NewNot(c)), "c"},
		{"float const", Add(Float32(0.1), Float32(0.2)), "T.float32(0.30000001192092896)"},
		{"float x*1", Mul(x, Float32(1)), "x"},
		{"float x+0 kept", Add(x, Float32(0)), "x + T.float32(0.0)"},
		{"float x*0 kept", Mul(x, Float32(0)), "x * T.float32(0.0)"},
		{"float floordiv", FloorDiv(Float32(-7), Float32(2)), "T.float32(-4.0)"},
		{"float min", Min(Float32(1), Float32(-2)), "T.float32(-2.0)"},
		{"cast int", NewCast(Scalar(ir.Int8), Idx(300)), "T.int8(44)"},
		{"cast float to int", NewCast(Int32T, Float32(-2.75)), "-2"},
		{"cast int to float", NewCast(Float32T, Idx(3)), "T.float32(3.0)"},
		{"cast to bool", NewCast(BoolT, Float32(0.5)), "True"},
		{"cast same type", NewCast(Int32T, i), "i"},
		{"cast nan not folded", NewCast(Int32T, Float32(math.NaN())), `T.Cast("int32", T.float32(nan))`},
		{"bin not folded", Bin(OpAdd, Idx(1), Idx(2)), "1 + 2"},
	}
	for _, tc := range tests {
		if got := ExprString(tc.got); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestFoldSideEffects(t *testing.T) {
	call := CallExternOf(Int32T, "tick")
	if got := ExprString(Mul(call, Idx(0))); got != `T.call_extern("int32", "tick") * 0` {
		t.Errorf("x*0 with side effect folded: %s", got)
	}
	b := CallExternOf(BoolT, "flag")
	if got := ExprString(And(b, Bool(false))); got != `T.call_extern("bool", "flag") and False` {
		t.Errorf("and false with side effect folded: %s", got)
	}
}

func TestConstructorsPanicOnMisuse(t *testing.T) {
	i := NewVar("i", Int32T)
	x := NewVar("x", Float32T)
	b := NewBuffer("A", ir.Float32, ir.Shape{2, 3}, "")
	cases := map[string]func(){
		"mixed types":     func() { Add(i, x) },
		"and on ints":     func() { And(i, i) },
		"arith on bool":   func() { Add(Bool(true), Bool(false)) },
		"select cond":     func() { NewSelect(i, x, x) },
		"load rank":       func() { NewLoad(b, i) },
		"load float idx":  func() { NewLoad(b, i, x) },
		"store dtype":     func() { NewStore(b, i, i, i) },
		"exp of int":      func() { NewCall(IntrinExp, i) },
		"pow arity":       func() { NewCall(IntrinPow, x) },
		"for bound type":  func() { NewFor(i, Int64(0), Int64(3), Serial, NoOp()) },
		"let type":        func() { NewLet(i, x, NoOp()) },
		"if cond":         func() { NewIf(i, NoOp(), nil) },
		"extern no name":  func() { CallExternOf(Void, "") },
		"intconst float":  func() { IntConst(ir.Float32, 1) },
		"address_of expr": func() { NewCall(IntrinAddressOf, i) },
	}
	for name, fn := range cases {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: expected panic", name)
				}
			}()
			fn()
		}()
	}
}

func TestIntrinsicTable(t *testing.T) {
	x := NewVar("x", Float32T)
	for op := Intrinsic(1); op < numIntrinsics; op++ {
		info := op.Info()
		got, ok := LookupIntrinsic(info.Name)
		if !ok || got != op {
			t.Errorf("LookupIntrinsic(%q) = %v, %v", info.Name, got, ok)
		}
		switch info.Kind {
		case KindFloatUnary:
			if info.Unary == nil || NewCall(op, x).Type() != Float32T {
				t.Errorf("%s: bad unary entry", info.Name)
			}
		case KindFloatBinary:
			if info.Binary == nil || NewCall(op, x, x).Type() != Float32T {
				t.Errorf("%s: bad binary entry", info.Name)
			}
		case KindFloatTernary:
			if info.Ternary == nil || NewCall(op, x, x, x).Type() != Float32T {
				t.Errorf("%s: bad ternary entry", info.Name)
			}
		case KindFloatPred:
			if info.Pred == nil || NewCall(op, x).Type() != BoolT {
				t.Errorf("%s: bad predicate entry", info.Name)
			}
		case KindSpecial:
		default:
			t.Errorf("%s: no kind", info.Name)
		}
	}
	if got := intrinsics[IntrinSigmoid].Unary(0); got != 0.5 {
		t.Errorf("sigmoid(0) = %v", got)
	}
	if got := intrinsics[IntrinRound].Unary(2.5); got != 3 {
		t.Errorf("round(2.5) = %v, want 3 (half away from zero)", got)
	}
	if got := intrinsics[IntrinNearbyInt].Unary(2.5); got != 2 {
		t.Errorf("nearbyint(2.5) = %v, want 2 (half to even)", got)
	}
}

func TestRoundFloat(t *testing.T) {
	tests := []struct {
		d    ir.DType
		in   float64
		want float64
	}{
		{ir.Float16, 1.0 + 1.0/2048, 1.0},            // tie to even
		{ir.Float16, 1.0 + 3.0/2048, 1.0 + 2.0/1024}, // tie to even (up)
		{ir.Float16, 65504, 65504},                   // max finite
		{ir.Float16, 65520, math.Inf(1)},             // overflow
		{ir.Float16, 1e-8, 0},                        // underflow below half the smallest subnormal
		{ir.Float16, 6e-8, math.Ldexp(1, -24)},       // smallest subnormal
		{ir.BFloat16, 1.0 + 1.0/256, 1.0},            // tie to even
		{ir.BFloat16, 3.14159, 3.140625},             // 8 significant bits
		{ir.Float32, 0.1, float64(float32(0.1))},     // float32
		{ir.Float64, 0.1, 0.1},                       // identity
		{ir.Float16, -2.5, -2.5},                     // exact negative
		{ir.BFloat16, math.Inf(-1), math.Inf(-1)},    // inf stays
	}
	for _, tc := range tests {
		if got := RoundFloat(tc.in, tc.d); got != tc.want {
			t.Errorf("RoundFloat(%v, %s) = %v, want %v", tc.in, tc.d, got, tc.want)
		}
	}
}

func TestFoldCollectsConstants(t *testing.T) {
	i, j, k := NewVar("i", Int32T), NewVar("j", Int32T), NewVar("k", Int32T)
	tests := []struct {
		got  PrimExpr
		want string
	}{
		{Add(Mul(i, Idx(9)), Sub(Add(Mul(j, Idx(2)), k), Idx(1))), "i * 9 + j * 2 + k - 1"},
		{Add(i, Add(j, Idx(3))), "i + j + 3"},
		{Add(Add(i, Idx(2)), Add(j, Idx(3))), "i + 2 + j + 3"},
		{Add(Idx(4), Add(j, Idx(3))), "j + 7"},
	}
	for _, tc := range tests {
		if got := ExprString(tc.got); got != tc.want {
			t.Errorf("got %s, want %s", got, tc.want)
		}
	}
}
