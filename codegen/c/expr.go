package c

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
)

// Expression semantics (matching tir/interp, the oracle of the tests):
//
//   - Integers: + - * on int32/int64/uint32/uint64 are C's operators (so
//     signed overflow is undefined in C, as in TVM's output; the index
//     arithmetic kiln generates never overflows, and FlattenBuffers uses
//     int64 for large buffers). 8- and 16-bit results are cast back to
//     their type, which wraps (GCC and Clang define the conversion);
//     uint8/uint16 operands are widened to uint32 first so that products
//     cannot overflow int. Div and Mod truncate (C / and %); dividing by
//     zero, or the most negative value by -1, is undefined in C while the
//     interpreter reports an error. FloorDiv/FloorMod use
//     kiln_floordiv_i32/_i64 helpers (floor semantics for negative
//     operands, defined for b == -1).
//   - Floats: float32 and float64 arithmetic is C's (build with
//     -ffp-contract=off, Build's default, for results identical to the
//     interpreter). float16/bfloat16 values are computed in float and
//     every arithmetic result is rounded back to the 16-bit format.
//     Min/Max follow Go's math.Min/Max (NaN propagates, -0 < +0);
//     FloorDiv/FloorMod are computed in double and rounded once.
//   - Casts: float→int goes through kiln_f2i64/kiln_f2u64, which are
//     defined for every input (out of range and NaN give INT64_MIN), so
//     no cast is undefined behaviour; int64→float32 goes through double
//     as the interpreter does; →bool is `!= 0`.
//   - Math intrinsics call the C library with the type's suffix (expf for
//     float32, exp for float64); float16/bfloat16 call the double
//     function and round once. sigmoid is 1/(1+exp(-x)), rsqrt is
//     1/sqrt(x), round is C round (half away from zero) and nearbyint is
//     C nearbyint (half to even under the default rounding mode, which
//     generated code assumes). libm results may differ from Go's math
//     package in the last place.

func (fg *funcGen) expr(e tir.PrimExpr) string {
	if h := fg.g.opts.ExprHook; h != nil {
		if code, ok := h(e, fg.expr); ok {
			return code
		}
	}
	switch x := e.(type) {
	case *tir.IntImm:
		return fg.intLit(x.T.DType, x.Value)
	case *tir.FloatImm:
		return floatLit(x.T.DType, x.Value)
	case *tir.StringImm:
		return cString(x.Value)
	case *tir.Var:
		name, ok := fg.env[x]
		if !ok {
			failf("function %s: variable %s is not defined", fg.f.Name, x.Name)
		}
		return name
	case *tir.Binary:
		return fg.binary(x)
	case *tir.Not:
		return "(!" + fg.expr(x.A) + ")"
	case *tir.Select:
		if h := selectHelper(x); h != "" {
			fg.g.use(h)
			return fmt.Sprintf("%s(%s, %s, %s)", h, strip(fg.expr(x.Cond)), strip(fg.expr(x.True)), strip(fg.expr(x.False)))
		}
		return fmt.Sprintf("(%s ? %s : %s)", fg.expr(x.Cond), fg.expr(x.True), fg.expr(x.False))
	case *tir.Cast:
		if to := x.T.DType; to == ir.Int32 && x.Value.Type().DType == ir.Float32 && nanSafeInt32(x.Value) {
			// The value is 0 for NaN and otherwise clamped within int32
			// (a clip before a cast): C's conversion is defined for it,
			// and it vectorises.
			if c, ok := fg.clampToInt32(x.Value.(*tir.Select)); ok {
				return "((int32_t)" + c + ")"
			}
			return "((int32_t)" + fg.expr(x.Value) + ")"
		}
		return fg.cast(x.T.DType, x.Value.Type().DType, fg.expr(x.Value))
	case *tir.BufferLoad:
		return fg.load(x.Buffer, x.Indices)
	case *tir.Call:
		return fg.call(x)
	}
	failf("function %s: unsupported expression %T", fg.f.Name, e)
	return ""
}

// intLit prints an integer constant of dtype d.
func (fg *funcGen) intLit(d ir.DType, v int64) string {
	switch d {
	case ir.Bool:
		if v != 0 {
			return "true"
		}
		return "false"
	case ir.Int32:
		if v == math.MinInt32 {
			return "(-2147483647 - 1)"
		}
		if v < 0 {
			return "(" + strconv.FormatInt(v, 10) + ")"
		}
		return strconv.FormatInt(v, 10)
	case ir.Int64:
		if v == math.MinInt64 {
			return "INT64_MIN"
		}
		return "INT64_C(" + strconv.FormatInt(v, 10) + ")"
	case ir.Uint32:
		return strconv.FormatUint(uint64(uint32(v)), 10) + "u"
	case ir.Uint64:
		return "UINT64_C(" + strconv.FormatUint(uint64(v), 10) + ")"
	case ir.Int8, ir.Int16, ir.Uint8, ir.Uint16:
		return "((" + storageType(d) + ")" + strconv.FormatInt(v, 10) + ")"
	}
	failf("function %s: integer constant of type %s", fg.f.Name, d)
	return ""
}

// FloatLiteral is the C literal of a float constant of dtype d, exact (see
// floatLit): backends that write C of their own use it.
func FloatLiteral(d ir.DType, v float64) string { return floatLit(d, v) }

// floatLit prints a float constant exactly: the shortest decimal that
// reads back as the same value of the type (float32 with an f suffix;
// float16/bfloat16 values are exact floats), NaN and infinities through
// math.h's NAN and INFINITY.
func floatLit(d ir.DType, v float64) string {
	cast := ""
	if d == ir.Float64 {
		cast = "(double)"
	}
	switch {
	case math.IsNaN(v):
		return cast + "NAN"
	case math.IsInf(v, 1):
		return cast + "INFINITY"
	case math.IsInf(v, -1):
		return "(-" + cast + "INFINITY)"
	}
	var s string
	if d == ir.Float64 {
		s = strconv.FormatFloat(v, 'g', -1, 64)
	} else {
		s = strconv.FormatFloat(v, 'g', -1, 32)
	}
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	if d != ir.Float64 {
		s += "f"
	}
	if math.Signbit(v) {
		return "(" + s + ")"
	}
	return s
}

// index prints the element index of b[idx]. Generate runs FlattenBuffers
// first, so every access has one index into a contiguous buffer.
func (fg *funcGen) index(b *tir.Buffer, idx []tir.PrimExpr) string {
	if len(idx) != 1 || (b.Strides != nil && b.Strides[0] != 1) {
		failf("function %s: access to buffer %s is not flat after FlattenBuffers", fg.f.Name, b.Name)
	}
	return strip(fg.expr(idx[0]))
}

func (fg *funcGen) access(b *tir.Buffer, idx []tir.PrimExpr) string {
	name, ok := fg.env[b.Data]
	if !ok {
		failf("function %s: buffer %s is not defined", fg.f.Name, b.Name)
	}
	return name + "[" + fg.index(b, idx) + "]"
}

func (fg *funcGen) load(b *tir.Buffer, idx []tir.PrimExpr) string {
	a := fg.access(b, idx)
	switch b.DType {
	case ir.Float16:
		fg.g.use("kiln_f16_to_f32")
		return "kiln_f16_to_f32(" + a + ")"
	case ir.BFloat16:
		fg.g.use("kiln_bf16_to_f32")
		return "kiln_bf16_to_f32(" + a + ")"
	case ir.Bool:
		return "(" + a + " != 0)"
	}
	return a
}

// storeValue converts a value of dtype d to its storage form.
func (fg *funcGen) storeValue(d ir.DType, v tir.PrimExpr) string {
	s := fg.expr(v)
	switch d {
	case ir.Float16:
		fg.g.use("kiln_f64_to_f16")
		return "kiln_f64_to_f16(" + strip(s) + ")"
	case ir.BFloat16:
		fg.g.use("kiln_f64_to_bf16")
		return "kiln_f64_to_bf16(" + strip(s) + ")"
	case ir.Bool:
		return "(uint8_t)" + s
	}
	return strip(s)
}

// round16 rounds a float computation of a 16-bit float type back to it.
func (fg *funcGen) round16(d ir.DType, s string) string {
	switch d {
	case ir.Float16:
		fg.g.use("kiln_round_f16")
		return "kiln_round_f16(" + strip(s) + ")"
	case ir.BFloat16:
		fg.g.use("kiln_round_bf16")
		return "kiln_round_bf16(" + strip(s) + ")"
	}
	return s
}

var cOps = map[tir.BinaryOp]string{
	tir.OpAdd: "+", tir.OpSub: "-", tir.OpMul: "*", tir.OpDiv: "/", tir.OpMod: "%",
	tir.OpEQ: "==", tir.OpNE: "!=", tir.OpLT: "<", tir.OpLE: "<=", tir.OpGT: ">", tir.OpGE: ">=",
	tir.OpAnd: "&&", tir.OpOr: "||",
}

func (fg *funcGen) binary(x *tir.Binary) string {
	d := x.A.Type().DType
	if x.Op.IsCompare() {
		if v, ok := trivialCompare(x); ok {
			// Always true or false for the type's range: fold to avoid
			// -Wtype-limits, keeping the operands' evaluation.
			return fmt.Sprintf("((void)%s, (void)%s, %t)", fg.expr(x.A), fg.expr(x.B), v)
		}
	}
	a, b := fg.expr(x.A), fg.expr(x.B)
	if x.Op.IsCompare() || x.Op.IsLogical() {
		return "(" + a + " " + cOps[x.Op] + " " + b + ")"
	}
	if d.IsFloat() {
		if call, ok := fg.minMaxConst(x, d, a, b); ok {
			return call
		}
		return fg.floatBinary(x.Op, d, a, b)
	}
	if (x.Op == tir.OpFloorDiv || x.Op == tir.OpFloorMod) && d.IsInt() && d.Size() >= 4 && fg.nonNegative(x.A) {
		if c, ok := tir.ConstInt(x.B); ok && c > 0 {
			// Floor and truncating division agree on a non-negative
			// dividend and a positive divisor: plain C division, which
			// compilers vectorise (the helpers' sign branches they do
			// not).
			return fg.intBinary(map[tir.BinaryOp]tir.BinaryOp{tir.OpFloorDiv: tir.OpDiv, tir.OpFloorMod: tir.OpMod}[x.Op], d, a, b)
		}
	}
	if (x.Op == tir.OpFloorDiv || x.Op == tir.OpFloorMod) && d.IsInt() && d.Size() >= 4 {
		if c, ok := tir.ConstInt(x.B); ok && c > 1 && c&(c-1) == 0 {
			// Floor division and modulo by a power of two 2^k are an
			// arithmetic right shift by k and a mask of the low k bits,
			// for either sign of the dividend (gcc and clang shift signed
			// values arithmetically; two's complement makes the mask the
			// floor remainder). Both vectorise, where the helpers' sign
			// branches do not.
			if x.Op == tir.OpFloorDiv {
				return fmt.Sprintf("(%s >> %d)", a, bits.TrailingZeros64(uint64(c)))
			}
			return "(" + a + " & " + fg.intLit(d, c-1) + ")"
		}
	}
	return fg.intBinary(x.Op, d, a, b)
}

// nanSafeInt32 says whether float expression e is select(isnan(v), c,
// clamp) with c a constant and clamp a min and a max with constant bounds
// (in either order), all within int32's range: never NaN, never out of
// range for a conversion to int32.
func nanSafeInt32(e tir.PrimExpr) bool {
	sel, ok := e.(*tir.Select)
	if !ok {
		return false
	}
	cond, ok := sel.Cond.(*tir.Call)
	if !ok || cond.Op != tir.IntrinIsNaN {
		return false
	}
	inRange := func(e tir.PrimExpr) bool {
		f, ok := e.(*tir.FloatImm)
		return ok && f.Value > -2147483648 && f.Value < 2147483647
	}
	outer, ok := sel.False.(*tir.Binary)
	if !inRange(sel.True) || !ok || (outer.Op != tir.OpMin && outer.Op != tir.OpMax) {
		return false
	}
	inner, ok := outer.A.(*tir.Binary)
	if !ok || (inner.Op != tir.OpMin && inner.Op != tir.OpMax) || inner.Op == outer.Op {
		return false
	}
	return inRange(outer.B) && inRange(inner.B)
}

// clampToInt32 writes a nanSafeInt32 select, select(isnan(v), n,
// clip(v)) or with the clip's result as isnan's operand, as one helper:
// the bounds' comparisons without NaN rules of their own (the operand to
// an int32 conversion, where the sign of a zero does not matter), and a
// NaN test only where the comparisons would not give n for a NaN anyway
// (a uint8 quantization's clip to [0, 255] with n = 0 needs none). An
// int8 model's input QuantizeLinear (3x224x224) took 0.045 ms in a C
// harness with the general helpers (five comparisons per vector), 0.038
// ms with this (gcc 12 still compares and blends rather than using
// vmaxps and vminps).
func (fg *funcGen) clampToInt32(sel *tir.Select) (string, bool) {
	outer := sel.False.(*tir.Binary)
	inner := outer.A.(*tir.Binary)
	v := inner.A
	if arg := sel.Cond.(*tir.Call).Args; len(arg) != 1 || (!tir.ExprEqual(arg[0], sel.False) && !tir.ExprEqual(arg[0], v)) {
		return "", false
	}
	n, _ := tir.ConstFloat(sel.True)
	b1, _ := tir.ConstFloat(inner.B)
	b2, _ := tir.ConstFloat(outer.B)
	// What the comparisons give for a NaN v: the inner bound, then the
	// outer comparison of the two bounds.
	name, nan := "kiln_clamp", min(b1, b2)
	if inner.Op == tir.OpMin {
		name, nan = "kiln_clampr", max(b1, b2)
	}
	args := strip(fg.expr(v)) + ", " + floatLit(ir.Float32, b1) + ", " + floatLit(ir.Float32, b2)
	if nan != n {
		name += "_n"
		args += ", " + floatLit(ir.Float32, n)
	}
	name += "_f32"
	fg.g.use(name)
	return name + "(" + args + ")", true
}

// nonNegative reports whether integer expression e is never negative:
// non-negative constants, loop variables starting at a non-negative
// constant, and sums, products, minima, maxima, quotients and remainders
// (by positive constants) of such. (Wrapping could make a sum negative,
// but signed overflow is undefined behaviour in the generated C, so the C
// compiler assumes it away already.)
func (fg *funcGen) nonNegative(e tir.PrimExpr) bool {
	switch x := e.(type) {
	case *tir.IntImm:
		return x.Value >= 0
	case *tir.Var:
		return fg.nonNeg[x]
	case *tir.Binary:
		switch x.Op {
		case tir.OpAdd, tir.OpMul, tir.OpMin, tir.OpMax:
			return fg.nonNegative(x.A) && fg.nonNegative(x.B)
		case tir.OpFloorDiv, tir.OpFloorMod, tir.OpDiv, tir.OpMod:
			c, ok := tir.ConstInt(x.B)
			return ok && c > 0 && fg.nonNegative(x.A)
		}
	}
	return false
}

// trivialCompare folds comparisons against the limits of the operand
// type (x >= 0 for unsigned x, ...), which C compilers warn about.
func trivialCompare(x *tir.Binary) (bool, bool) {
	d := x.A.Type().DType
	if !d.IsInteger() {
		return false, false
	}
	lo, hi := typeRange(d)
	op := x.Op
	c, ok := tir.ConstInt(x.B)
	if !ok {
		if c, ok = tir.ConstInt(x.A); !ok {
			return false, false
		}
		// Mirror c OP x into x OP' c.
		op = map[tir.BinaryOp]tir.BinaryOp{tir.OpLT: tir.OpGT, tir.OpLE: tir.OpGE, tir.OpGT: tir.OpLT, tir.OpGE: tir.OpLE, tir.OpEQ: tir.OpEQ, tir.OpNE: tir.OpNE}[op]
	}
	eq := func(a, b int64) bool {
		if d == ir.Uint64 {
			return uint64(a) == uint64(b)
		}
		return a == b
	}
	switch {
	case op == tir.OpGE && eq(c, lo), op == tir.OpLE && eq(c, hi):
		return true, true
	case op == tir.OpLT && eq(c, lo), op == tir.OpGT && eq(c, hi):
		return false, true
	}
	return false, false
}

// typeRange is the smallest and largest value of integer dtype d (for
// uint64 the largest is the bit pattern -1).
func typeRange(d ir.DType) (int64, int64) {
	bits := uint(d.Size() * 8)
	if d.IsUint() {
		if bits == 64 {
			return 0, -1
		}
		return 0, int64(1)<<bits - 1
	}
	return -(int64(1) << (bits - 1)), int64(1)<<(bits-1) - 1
}

func (fg *funcGen) intBinary(op tir.BinaryOp, d ir.DType, a, b string) string {
	st := storageType(d)
	narrow := d.Size() < 4
	switch op {
	case tir.OpAdd, tir.OpSub, tir.OpMul, tir.OpDiv, tir.OpMod:
		o := cOps[op]
		switch {
		case narrow && d.IsUint() && (op == tir.OpAdd || op == tir.OpSub || op == tir.OpMul):
			return fmt.Sprintf("((%s)((uint32_t)%s %s (uint32_t)%s))", st, a, o, b)
		case narrow:
			return fmt.Sprintf("((%s)(%s %s %s))", st, a, o, b)
		}
		return "(" + a + " " + o + " " + b + ")"
	case tir.OpFloorDiv, tir.OpFloorMod:
		if d.IsUint() {
			o := map[tir.BinaryOp]string{tir.OpFloorDiv: "/", tir.OpFloorMod: "%"}[op]
			if narrow {
				return fmt.Sprintf("((%s)(%s %s %s))", st, a, o, b)
			}
			return "(" + a + " " + o + " " + b + ")"
		}
		fn := map[tir.BinaryOp]string{tir.OpFloorDiv: "kiln_floordiv_", tir.OpFloorMod: "kiln_floormod_"}[op]
		if d == ir.Int64 {
			fn += "i64"
		} else {
			fn += "i32"
		}
		fg.g.use(fn)
		call := fn + "(" + strip(a) + ", " + strip(b) + ")"
		if narrow {
			return "((" + st + ")" + call + ")"
		}
		return call
	case tir.OpMin, tir.OpMax:
		fn := map[tir.BinaryOp]string{tir.OpMin: "kiln_min_", tir.OpMax: "kiln_max_"}[op]
		switch d {
		case ir.Int64:
			fn += "i64"
		case ir.Uint64:
			fn += "u64"
		case ir.Uint32:
			fn += "u32"
		default:
			fn += "i32"
		}
		fg.g.use(fn)
		call := fn + "(" + strip(a) + ", " + strip(b) + ")"
		if narrow {
			return "((" + st + ")" + call + ")"
		}
		return call
	}
	failf("function %s: integer operation %s", fg.f.Name, op)
	return ""
}

func (fg *funcGen) floatBinary(op tir.BinaryOp, d ir.DType, a, b string) string {
	suffix := mathSuffix(d)
	switch op {
	case tir.OpAdd, tir.OpSub, tir.OpMul, tir.OpDiv:
		return fg.round16(d, "("+a+" "+cOps[op]+" "+b+")")
	case tir.OpMod:
		// fmod is exact: no rounding needed.
		return "fmod" + suffix + "(" + strip(a) + ", " + strip(b) + ")"
	case tir.OpFloorDiv, tir.OpFloorMod:
		fn := map[tir.BinaryOp]string{tir.OpFloorDiv: "kiln_floordiv_f64", tir.OpFloorMod: "kiln_floormod_f64"}[op]
		fg.g.use(fn)
		call := fn + "(" + strip(a) + ", " + strip(b) + ")"
		switch d {
		case ir.Float32:
			return "((float)" + call + ")"
		case ir.Float64:
			return call
		}
		return fg.round16(d, call)
	case tir.OpMin, tir.OpMax:
		fn := map[tir.BinaryOp]string{tir.OpMin: "kiln_min_", tir.OpMax: "kiln_max_"}[op]
		if d == ir.Float64 {
			fn += "f64"
		} else {
			fn += "f32" // exact for float16/bfloat16 values too
		}
		fg.g.use(fn)
		return fn + "(" + strip(a) + ", " + strip(b) + ")"
	}
	failf("function %s: float operation %s", fg.f.Name, op)
	return ""
}

// minMaxConst writes a float32/float64 min or max with a constant
// operand c for which the general helper's zero and infinity rules
// reduce to one comparison (ReLU's max(x, 0), clip bounds): c finite,
// and not -0 for max nor +0 for min (max(+0, -0) is +0) — then the result is
// NaN for a NaN operand and the plain comparison's pick otherwise,
// which is what the general helper gives, in two selects that stay
// cheap in the scalar tail of a vectorised loop.
func (fg *funcGen) minMaxConst(x *tir.Binary, d ir.DType, a, b string) (string, bool) {
	if (x.Op != tir.OpMin && x.Op != tir.OpMax) || (d != ir.Float32 && d != ir.Float64) {
		return "", false
	}
	// The operands commute: the constant goes second.
	c, ok := tir.ConstFloat(x.B)
	if !ok {
		if c, ok = tir.ConstFloat(x.A); !ok {
			return "", false
		}
		a, b = b, a
	}
	if math.IsInf(c, 0) || math.IsNaN(c) || (c == 0 && math.Signbit(c) != (x.Op == tir.OpMin)) {
		return "", false
	}
	name := map[tir.BinaryOp]string{tir.OpMin: "kiln_minc_", tir.OpMax: "kiln_maxc_"}[x.Op]
	if d == ir.Float64 {
		name += "f64"
	} else {
		name += "f32"
	}
	fg.g.use(name)
	return name + "(" + strip(a) + ", " + strip(b) + ")", true
}

// mathSuffix is the C math library suffix for computing in dtype d
// ("f" for float32, "" for float64 and for the 16-bit types, which are
// computed in double and rounded).
func mathSuffix(d ir.DType) string {
	if d == ir.Float32 {
		return "f"
	}
	return ""
}

// cast converts the C value s of dtype from to dtype to.
func (fg *funcGen) cast(to, from ir.DType, s string) string {
	if to == from {
		return s
	}
	switch {
	case to == ir.Bool:
		return "(" + s + " != 0)"
	case from == ir.Bool:
		if to.IsFloat() {
			return "(" + valueType(to) + ")" + s
		}
		return "((" + storageType(to) + ")" + s + ")"
	case to.IsFloat() && from.IsFloat():
		switch to {
		case ir.Float32:
			if from == ir.Float64 {
				return "((float)" + s + ")"
			}
			return s // 16-bit values are exact floats
		case ir.Float64:
			return "((double)" + s + ")"
		}
		return fg.round16(to, s)
	case to.IsFloat():
		src := s
		if from.Size() == 8 && to != ir.Float64 {
			// Round through double as the interpreter does.
			src = "(double)" + s
		}
		switch to {
		case ir.Float32:
			return "((float)" + src + ")"
		case ir.Float64:
			return "((double)" + s + ")"
		}
		return fg.round16(to, "(double)"+s)
	case from.IsFloat():
		st := storageType(to)
		if to.IsUint() {
			fg.g.use("kiln_f2u64")
			if to == ir.Uint64 {
				return "kiln_f2u64(" + strip(s) + ")"
			}
			return "((" + st + ")kiln_f2u64(" + strip(s) + "))"
		}
		fg.g.use("kiln_f2i64")
		if to == ir.Int64 {
			return "kiln_f2i64(" + strip(s) + ")"
		}
		return "((" + st + ")kiln_f2i64(" + strip(s) + "))"
	}
	return "((" + storageType(to) + ")" + s + ")"
}

func (fg *funcGen) call(c *tir.Call) string {
	switch c.Op {
	case tir.CallExtern:
		return fg.callExtern(c)
	case tir.IntrinIfThenElse:
		return fmt.Sprintf("(%s ? %s : %s)", fg.expr(c.Args[0]), fg.expr(c.Args[1]), fg.expr(c.Args[2]))
	case tir.IntrinCheckIndex:
		fg.g.use("kiln_check_index")
		return fmt.Sprintf("kiln_check_index(%s, %s, %s)", strip(fg.expr(c.Args[0])), strip(fg.expr(c.Args[1])), fg.ierrRef())
	case tir.IntrinAddressOf:
		ld, ok := c.Args[0].(*tir.BufferLoad)
		if !ok {
			failf("function %s: address_of needs a buffer load, got %T", fg.f.Name, c.Args[0])
		}
		return "(&" + fg.access(ld.Buffer, ld.Indices) + ")"
	}
	if !c.Op.Valid() {
		failf("function %s: invalid intrinsic %d", fg.f.Name, c.Op)
	}
	info := c.Op.Info()
	d := c.Args[0].Type().DType
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		e := fg.expr(a)
		args[i] = strip(e)
		if d != ir.Float32 && d != ir.Float64 {
			args[i] = "(double)" + e
		}
	}
	if info.Kind == tir.KindFloatPred {
		return "(" + info.Name + "(" + args[0] + ") != 0)"
	}
	sfx := mathSuffix(d)
	one := "1.0"
	if sfx == "f" {
		one = "1.0f"
	}
	var s string
	switch c.Op {
	case tir.IntrinSigmoid:
		if d == ir.Float32 {
			// In double (no overflow of exp(-x), 1 ulp), or in float32 at
			// twice the lanes in vectorized loops (3 ulp).
			name := "kiln_sigmoidf"
			if fg.vector > 0 {
				name = "kiln_sigmoidf_v"
			}
			fg.g.use(name)
			s = name + "(" + args[0] + ")"
			break
		}
		s = fmt.Sprintf("(%s / (%s + exp(-%s)))", one, one, paren(args[0]))
	case tir.IntrinRsqrt:
		s = fmt.Sprintf("(%s / sqrt%s(%s))", one, sfx, args[0])
	default:
		name := info.Name + sfx
		// Vectorisable replacements of libm calls, within 1 ulp as they
		// are: erf and tanh always, exp where the loop is vectorized (elsewhere
		// glibc's expf is faster).
		switch {
		case c.Op == tir.IntrinErf && d == ir.Float32:
			name = "kiln_erff"
		case c.Op == tir.IntrinTanh && d == ir.Float32:
			name = "kiln_tanhf"
		case c.Op == tir.IntrinExp && d == ir.Float32 && fg.vector > 0:
			name = "kiln_expf"
		}
		if strings.HasPrefix(name, "kiln_") {
			fg.g.use(name)
		}
		s = name + "(" + strings.Join(args, ", ") + ")"
	}
	if d == ir.Float16 || d == ir.BFloat16 {
		return fg.round16(d, s)
	}
	return s
}

// paren wraps s in parentheses unless it is an identifier, a call or
// already parenthesized.
func paren(s string) string {
	if strip(s) != s || isCIdent(s) {
		return s
	}
	return "(" + s + ")"
}

func (fg *funcGen) callExtern(c *tir.Call) string {
	if !isCIdent(c.Extern) {
		failf("function %s: call_extern name %q is not a valid C identifier", fg.f.Name, c.Extern)
	}
	args := make([]string, len(c.Args))
	types := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = strip(fg.expr(a))
		types[i] = cType(a.Type())
		if _, ok := a.(*tir.StringImm); ok {
			types[i] = "const char*"
		}
	}
	if c.Kernel != nil {
		fg.g.useKernel(c.Kernel)
		return c.Extern + "(" + strings.Join(args, ", ") + ")"
	}
	if h := fg.g.opts.ReplaceCallExtern; h != nil {
		if code, ok := h(c.Extern, args); ok {
			return "(" + code + ")"
		}
	}
	if !fg.g.declared[c.Extern] && !libcNames[c.Extern] {
		d := &externDecl{ret: cType(c.T), args: types}
		if old, ok := fg.g.externs[c.Extern]; ok {
			if old.ret != d.ret || strings.Join(old.args, ",") != strings.Join(d.args, ",") {
				failf("function %s: call_extern %s is called with different signatures: %s(%s) and %s(%s)",
					fg.f.Name, c.Extern, old.ret, strings.Join(old.args, ", "), d.ret, strings.Join(d.args, ", "))
			}
		} else {
			fg.g.externs[c.Extern] = d
		}
	}
	return c.Extern + "(" + strings.Join(args, ", ") + ")"
}

// selectHelper names the helper that prints a float Select as a call
// (kiln_sel_f32/_f64: both values computed, then one chosen), or "" for
// C's ?: operator. TIR evaluates both arms of a Select, and an arm that
// loads memory (the clamped load of a lane-split reduction's last
// chunk) must be seen by the C compiler as loaded unconditionally: under
// ?: gcc 12 makes it a masked load or gives up vectorising the loop. The
// call form is used only when an arm loads and no arm divides by a
// value that is not a constant other than 0 and -1 or calls anything,
// so that evaluating both arms can neither trap nor cost more than the
// loads.
func selectHelper(x *tir.Select) string {
	var h string
	switch x.Type().DType {
	case ir.Float32:
		h = "kiln_sel_f32"
	case ir.Float64:
		h = "kiln_sel_f64"
	default:
		return ""
	}
	loads, safe := false, true
	check := func(n tir.Node) bool {
		switch y := n.(type) {
		case *tir.BufferLoad:
			loads = true
		case *tir.Call:
			safe = false
		case *tir.Binary:
			switch y.Op {
			case tir.OpDiv, tir.OpMod, tir.OpFloorDiv, tir.OpFloorMod:
				if d, ok := tir.ConstInt(y.B); y.B.Type().DType.IsInteger() && (!ok || d == 0 || d == -1) {
					safe = false
				}
			}
		}
		return safe
	}
	tir.Visit(x.True, check)
	tir.Visit(x.False, check)
	if !loads || !safe {
		return ""
	}
	return h
}
