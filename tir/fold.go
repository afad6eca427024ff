package tir

import (
	"math"

	"github.com/kiln-dev/kiln/ir"
)

// Folding constructors. Add, Sub, Mul, ... check operand types like Bin
// does, then fold constants and apply the local identities that make index
// arithmetic readable: x+0, x-0, x*1, x*0 (integers), x/1, x%1, constant
// operands moved to the right of commutative ops, and (x+c1)+c2 → x+(c1+c2),
// (x*c1)*c2 → x*(c1*c2). Integer folding wraps to the operand width;
// division by a zero constant is left unfolded. Use Bin to build a node
// exactly as written.

// Add returns a + b, folded.
func Add(a, b PrimExpr) PrimExpr { return fold(OpAdd, a, b) }

// Sub returns a - b, folded.
func Sub(a, b PrimExpr) PrimExpr { return fold(OpSub, a, b) }

// Mul returns a * b, folded.
func Mul(a, b PrimExpr) PrimExpr { return fold(OpMul, a, b) }

// Div returns a / b (truncating for integers), folded.
func Div(a, b PrimExpr) PrimExpr { return fold(OpDiv, a, b) }

// Mod returns the C remainder a % b (fmod for floats), folded.
func Mod(a, b PrimExpr) PrimExpr { return fold(OpMod, a, b) }

// FloorDiv returns floor(a / b), folded.
func FloorDiv(a, b PrimExpr) PrimExpr { return fold(OpFloorDiv, a, b) }

// FloorMod returns a - floor(a/b)*b, folded.
func FloorMod(a, b PrimExpr) PrimExpr { return fold(OpFloorMod, a, b) }

// Min returns min(a, b), folded.
func Min(a, b PrimExpr) PrimExpr { return fold(OpMin, a, b) }

// Max returns max(a, b), folded.
func Max(a, b PrimExpr) PrimExpr { return fold(OpMax, a, b) }

// EQ returns a == b, folded.
func EQ(a, b PrimExpr) PrimExpr { return fold(OpEQ, a, b) }

// NE returns a != b, folded.
func NE(a, b PrimExpr) PrimExpr { return fold(OpNE, a, b) }

// LT returns a < b, folded.
func LT(a, b PrimExpr) PrimExpr { return fold(OpLT, a, b) }

// LE returns a <= b, folded.
func LE(a, b PrimExpr) PrimExpr { return fold(OpLE, a, b) }

// GT returns a > b, folded.
func GT(a, b PrimExpr) PrimExpr { return fold(OpGT, a, b) }

// GE returns a >= b, folded.
func GE(a, b PrimExpr) PrimExpr { return fold(OpGE, a, b) }

// And returns a && b, folded.
func And(a, b PrimExpr) PrimExpr { return fold(OpAnd, a, b) }

// Or returns a || b, folded.
func Or(a, b PrimExpr) PrimExpr { return fold(OpOr, a, b) }

// Fold returns op(a, b) after type checks, folding constants and local
// identities; it is what Add, Sub, ... call.
func Fold(op BinaryOp, a, b PrimExpr) PrimExpr { return fold(op, a, b) }

func fold(op BinaryOp, a, b PrimExpr) PrimExpr {
	checkBinary(op, a, b)
	if e, ok := simplifyBinary(op, a, b); ok {
		return e
	}
	return &Binary{Op: op, A: a, B: b}
}

// ConstInt returns the value of an integer or bool constant.
func ConstInt(e PrimExpr) (int64, bool) {
	if c, ok := e.(*IntImm); ok {
		return c.Value, true
	}
	return 0, false
}

// ConstFloat returns the value of a float constant.
func ConstFloat(e PrimExpr) (float64, bool) {
	if c, ok := e.(*FloatImm); ok {
		return c.Value, true
	}
	return 0, false
}

func isInt(e PrimExpr, v int64) bool {
	c, ok := e.(*IntImm)
	return ok && c.Value == v
}

func isFloat(e PrimExpr, v float64) bool {
	c, ok := e.(*FloatImm)
	return ok && c.Value == v
}

// simplifyBinary applies constant folding and local identities to op(a, b),
// whose types have been checked. It reports false when nothing applies.
func simplifyBinary(op BinaryOp, a, b PrimExpr) (PrimExpr, bool) {
	t := a.Type()
	// Both constant.
	if ca, ok := a.(*IntImm); ok {
		if cb, ok := b.(*IntImm); ok {
			v, ok := IntBinary(op, t.DType, ca.Value, cb.Value)
			if !ok {
				return nil, false
			}
			if op.IsCompare() || op.IsLogical() {
				return Bool(v != 0), true
			}
			return IntConst(t.DType, v), true
		}
	}
	if ca, ok := a.(*FloatImm); ok {
		if cb, ok := b.(*FloatImm); ok {
			v := FloatBinary(op, t.DType, ca.Value, cb.Value)
			if op.IsCompare() {
				return Bool(v != 0), true
			}
			return FloatConst(t.DType, v), true
		}
	}
	switch {
	case t.IsBool():
		return simplifyBool(op, a, b)
	case t.IsFloat():
		if (op == OpMul && isFloat(b, 1)) || (op == OpDiv && isFloat(b, 1)) {
			return a, true
		}
		if op == OpMul && isFloat(a, 1) {
			return b, true
		}
		return nil, false
	case t.IsInteger():
		return simplifyInt(op, a, b)
	}
	return nil, false
}

func simplifyBool(op BinaryOp, a, b PrimExpr) (PrimExpr, bool) {
	if _, ok := a.(*IntImm); ok && op.IsLogical() {
		a, b = b, a
	}
	cb, ok := b.(*IntImm)
	if !ok {
		return nil, false
	}
	switch {
	case op == OpAnd && cb.Value != 0, op == OpOr && cb.Value == 0:
		return a, true
	case op == OpAnd && !HasSideEffect(a):
		return Bool(false), true
	case op == OpOr && !HasSideEffect(a):
		return Bool(true), true
	}
	return nil, false
}

func simplifyInt(op BinaryOp, a, b PrimExpr) (PrimExpr, bool) {
	d := a.Type().DType
	// Constants to the right of commutative arithmetic.
	swapped := false
	if _, ok := a.(*IntImm); ok && (op == OpAdd || op == OpMul || op == OpMin || op == OpMax) {
		a, b, swapped = b, a, true
	}
	cb, bConst := b.(*IntImm)
	switch op {
	case OpAdd:
		if isInt(b, 0) {
			return a, true
		}
		// x + (y + z) → (x + y) + z and x + (y - z) → (x + y) - z: sums
		// lean left so constants collect at the right.
		if y, ok := b.(*Binary); ok && (y.Op == OpAdd || y.Op == OpSub) {
			if _, aConst := a.(*IntImm); !aConst {
				return Fold(y.Op, Add(a, y.A), y.B), true
			}
		}
		// (x / c) * c + x % c → x, also at the right of a sum (an
		// index flattened from the quotient and remainder).
		if x, ok := divModSum(a, b); ok {
			return x, true
		}
		if s, ok := a.(*Binary); ok && s.Op == OpAdd {
			if x, ok := divModSum(s.B, b); ok {
				return Add(s.A, x), true
			}
		}
		if bConst {
			// (x + c1) + c2 and (x - c1) + c2.
			if x, ok := a.(*Binary); ok {
				if c1, ok := x.B.(*IntImm); ok && (x.Op == OpAdd || x.Op == OpSub) {
					c := c1.Value
					if x.Op == OpSub {
						c = -c
					}
					return Add(x.A, IntConst(d, c+cb.Value)), true
				}
			}
		}
	case OpSub:
		if isInt(b, 0) {
			return a, true
		}
		if bConst && !d.IsUint() {
			if x, ok := a.(*Binary); ok {
				if c1, ok := x.B.(*IntImm); ok && (x.Op == OpAdd || x.Op == OpSub) {
					c := c1.Value
					if x.Op == OpSub {
						c = -c
					}
					return Add(x.A, IntConst(d, c-cb.Value)), true
				}
			}
		}
		if ExprEqual(a, b) && !HasSideEffect(a) {
			return IntConst(d, 0), true
		}
	case OpMul:
		if isInt(b, 1) {
			return a, true
		}
		if isInt(b, 0) && !HasSideEffect(a) {
			return IntConst(d, 0), true
		}
		if bConst {
			if x, ok := a.(*Binary); ok && x.Op == OpMul {
				if c1, ok := x.B.(*IntImm); ok {
					return Mul(x.A, IntConst(d, c1.Value*cb.Value)), true
				}
			}
		}
	case OpDiv, OpFloorDiv:
		if isInt(b, 1) {
			return a, true
		}
	case OpMod, OpFloorMod:
		if isInt(b, 1) && !HasSideEffect(a) {
			return IntConst(d, 0), true
		}
	case OpMin, OpMax:
		if ExprEqual(a, b) {
			return a, true
		}
	}
	if swapped {
		return &Binary{Op: op, A: a, B: b}, true
	}
	return nil, false
}

// divModSum matches q + r with q = (x / c) * c and r = x % c (truncating
// or floor division alike, c a non-zero constant) and returns x: the
// identity holds for every integer x, and |q| <= |x| cannot wrap.
func divModSum(q, r PrimExpr) (PrimExpr, bool) {
	m, ok := q.(*Binary)
	if !ok || m.Op != OpMul {
		return nil, false
	}
	dv, ok := m.A.(*Binary)
	rm, ok2 := r.(*Binary)
	if !ok || !ok2 {
		return nil, false
	}
	pair := (dv.Op == OpDiv && rm.Op == OpMod) || (dv.Op == OpFloorDiv && rm.Op == OpFloorMod)
	c, ok := m.B.(*IntImm)
	if !pair || !ok || c.Value == 0 || !ExprEqual(dv.B, m.B) || !ExprEqual(rm.B, m.B) ||
		!ExprEqual(dv.A, rm.A) || HasSideEffect(dv.A) {
		return nil, false
	}
	return dv.A, true
}

// WrapInt wraps v to the width of integer dtype d (bool: 0 or 1). Unsigned
// 64-bit values are kept as their bit pattern.
func WrapInt(v int64, d ir.DType) int64 { return wrapInt(v, d) }

func wrapInt(v int64, d ir.DType) int64 {
	switch d {
	case ir.Int8:
		return int64(int8(v))
	case ir.Int16:
		return int64(int16(v))
	case ir.Int32:
		return int64(int32(v))
	case ir.Uint8:
		return int64(uint8(v))
	case ir.Uint16:
		return int64(uint16(v))
	case ir.Uint32:
		return int64(uint32(v))
	case ir.Bool:
		if v != 0 {
			return 1
		}
		return 0
	}
	return v
}

// RoundFloat rounds v to the nearest value representable in float dtype d
// (round half to even, overflow to infinity).
func RoundFloat(v float64, d ir.DType) float64 { return roundFloat(v, d) }

func roundFloat(v float64, d ir.DType) float64 {
	switch d {
	case ir.Float32:
		return float64(float32(v))
	case ir.Float16:
		return roundFormat(v, 11, -14, 15)
	case ir.BFloat16:
		return roundFormat(v, 8, -126, 127)
	}
	return v
}

// roundFormat rounds x to a binary format with p significand bits and
// exponents emin..emax (subnormals below 2^emin).
func roundFormat(x float64, p, emin, emax int) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	a := math.Abs(x)
	_, e := math.Frexp(a)
	exp := e - 1
	if exp < emin {
		exp = emin
	}
	q := math.Ldexp(1, exp-(p-1))
	r := math.RoundToEven(a/q) * q
	maxFinite := (2 - math.Ldexp(1, -(p-1))) * math.Ldexp(1, emax)
	if r > maxFinite {
		r = math.Inf(1)
	}
	return math.Copysign(r, x)
}

// IntBinary evaluates op on integer (or bool) operands of dtype d: the
// result of arithmetic wrapped to d, or 0/1 for comparisons and logic. It
// reports false on division by zero.
func IntBinary(op BinaryOp, d ir.DType, a, b int64) (int64, bool) {
	b2i := func(c bool) int64 {
		if c {
			return 1
		}
		return 0
	}
	if d.IsUint() || d == ir.Bool {
		x, y := uint64(a), uint64(b)
		var r uint64
		switch op {
		case OpAdd:
			r = x + y
		case OpSub:
			r = x - y
		case OpMul:
			r = x * y
		case OpDiv, OpFloorDiv:
			if y == 0 {
				return 0, false
			}
			r = x / y
		case OpMod, OpFloorMod:
			if y == 0 {
				return 0, false
			}
			r = x % y
		case OpMin:
			r = min(x, y)
		case OpMax:
			r = max(x, y)
		case OpEQ:
			return b2i(x == y), true
		case OpNE:
			return b2i(x != y), true
		case OpLT:
			return b2i(x < y), true
		case OpLE:
			return b2i(x <= y), true
		case OpGT:
			return b2i(x > y), true
		case OpGE:
			return b2i(x >= y), true
		case OpAnd:
			return b2i(x != 0 && y != 0), true
		case OpOr:
			return b2i(x != 0 || y != 0), true
		}
		return wrapInt(int64(r), d), true
	}
	var r int64
	switch op {
	case OpAdd:
		r = a + b
	case OpSub:
		r = a - b
	case OpMul:
		r = a * b
	case OpDiv:
		if b == 0 {
			return 0, false
		}
		r = a / b
	case OpMod:
		if b == 0 {
			return 0, false
		}
		r = a % b
	case OpFloorDiv:
		if b == 0 {
			return 0, false
		}
		r = a / b
		if a%b != 0 && (a < 0) != (b < 0) {
			r--
		}
	case OpFloorMod:
		if b == 0 {
			return 0, false
		}
		r = a % b
		if r != 0 && (r < 0) != (b < 0) {
			r += b
		}
	case OpMin:
		r = min(a, b)
	case OpMax:
		r = max(a, b)
	case OpEQ:
		return b2i(a == b), true
	case OpNE:
		return b2i(a != b), true
	case OpLT:
		return b2i(a < b), true
	case OpLE:
		return b2i(a <= b), true
	case OpGT:
		return b2i(a > b), true
	case OpGE:
		return b2i(a >= b), true
	case OpAnd:
		return b2i(a != 0 && b != 0), true
	case OpOr:
		return b2i(a != 0 || b != 0), true
	}
	return wrapInt(r, d), true
}

// FloatBinary evaluates op on float operands of dtype d: arithmetic rounded
// to d, or 1/0 for comparisons. Min and Max propagate NaN.
func FloatBinary(op BinaryOp, d ir.DType, a, b float64) float64 {
	b2f := func(c bool) float64 {
		if c {
			return 1
		}
		return 0
	}
	var r float64
	switch op {
	case OpAdd:
		r = a + b
	case OpSub:
		r = a - b
	case OpMul:
		r = a * b
	case OpDiv:
		r = a / b
	case OpMod:
		r = math.Mod(a, b)
	case OpFloorDiv:
		r = math.Floor(a / b)
	case OpFloorMod:
		r = a - math.Floor(a/b)*b
	case OpMin:
		r = math.Min(a, b)
	case OpMax:
		r = math.Max(a, b)
	case OpEQ:
		return b2f(a == b)
	case OpNE:
		return b2f(a != b)
	case OpLT:
		return b2f(a < b)
	case OpLE:
		return b2f(a <= b)
	case OpGT:
		return b2f(a > b)
	case OpGE:
		return b2f(a >= b)
	default:
		panic("tir.FloatBinary: invalid op " + op.String())
	}
	return roundFloat(r, d)
}

// CastConst converts a constant between scalar dtypes with C semantics
// (float→int truncates toward zero, int→int wraps, nonzero→bool is 1).
// The source value is f when from is a float type and i otherwise; the
// result is returned as the integer or the float according to to.
func CastConst(from, to ir.DType, i int64, f float64) (int64, float64) {
	if to.IsFloat() {
		switch {
		case from.IsFloat():
			return 0, roundFloat(f, to)
		case from == ir.Uint64:
			return 0, roundFloat(float64(uint64(i)), to)
		default:
			return 0, roundFloat(float64(i), to)
		}
	}
	if from.IsFloat() {
		switch {
		case to == ir.Bool && f != 0:
			return 1, 0
		case to == ir.Bool:
			return 0, 0
		case to.IsUint() && f >= 0:
			return wrapInt(int64(uint64(f)), to), 0
		}
		return wrapInt(int64(f), to), 0
	}
	return wrapInt(i, to), 0
}

func foldCast(t Type, v PrimExpr) (PrimExpr, bool) {
	from := v.Type().DType
	switch c := v.(type) {
	case *IntImm:
		i, f := CastConst(from, t.DType, c.Value, 0)
		if t.IsFloat() {
			return FloatConst(t.DType, f), true
		}
		return IntConst(t.DType, i), true
	case *FloatImm:
		if !t.IsFloat() && (math.IsNaN(c.Value) || math.Abs(c.Value) >= 1<<63) {
			return nil, false // undefined in C; leave to run time
		}
		i, f := CastConst(from, t.DType, 0, c.Value)
		if t.IsFloat() {
			return FloatConst(t.DType, f), true
		}
		return IntConst(t.DType, i), true
	}
	return nil, false
}
