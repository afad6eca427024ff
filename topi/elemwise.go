package topi

import (
	"fmt"
	"math"
	"strings"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// Computes of the elementwise operator group (graph/op/elemwise.go): unary
// math, broadcasting binary arithmetic, comparisons and logic, where, cast,
// clip and the primitive activations.
//
// Semantics follow the reference kernels (ref/elemwise.go) exactly:
//   - 16-bit floats (float16, bfloat16) are computed in float32 and
//     rounded once at the end; the reference computes in float64, rounds
//     to float32 and then to the 16-bit type, and for the operations used
//     here (correctly rounded +, -, *, /, fmod and intrinsics) both give
//     the same bits. Where a float32 computation would not (leaky_relu's
//     float64 alpha), the compute runs in float64.
//   - Every conversion of a result to the output dtype goes through
//     ewRefConvert, which reproduces tensor.SetFloat/SetInt: float to integer
//     truncates toward zero, saturates to the int64 range (NaN gives 0)
//     and then wraps to the width of the type; anything to bool is x != 0;
//     integers reach floats through float64 (and 16-bit floats through
//     float32) like the reference's double rounding.
//   - Integer division and remainder never trap: x/0 and x%0 are 0, and a
//     divisor of -1 is handled without dividing (INT_MIN / -1 traps in C).
//   - Integer power, which needs a loop over the exponent's bits, is an
//     extern stage (elemwise_int.go); shifts are multiplications and
//     floor divisions by a power of two built from the shift's bits, since
//     TIR has no shift operator.

func init() {
	// Unary math.
	for o, f := range map[*op.Op]func(tir.PrimExpr) tir.PrimExpr{
		op.Exp: ewIntrin(tir.IntrinExp), op.Log: ewIntrin(tir.IntrinLog), op.Sqrt: ewIntrin(tir.IntrinSqrt),
		op.Sin: ewIntrin(tir.IntrinSin), op.Cos: ewIntrin(tir.IntrinCos), op.Tan: ewIntrin(tir.IntrinTan),
		op.Asin: ewIntrin(tir.IntrinAsin), op.Acos: ewIntrin(tir.IntrinAcos), op.Atan: ewIntrin(tir.IntrinAtan),
		op.Sinh: ewIntrin(tir.IntrinSinh), op.Cosh: ewIntrin(tir.IntrinCosh), op.Tanh: ewIntrin(tir.IntrinTanh),
		op.Erf: ewIntrin(tir.IntrinErf), op.Sigmoid: ewIntrin(tir.IntrinSigmoid),
		op.Asinh: ewIn64(ewAsinhExpr), op.Acosh: ewIn64(ewAcoshExpr), op.Atanh: ewIn64(ewAtanhExpr),
		op.Abs: ewAbsExpr, op.Negative: ewNegExpr, op.Sign: ewSignExpr,
		op.Floor: ewRoundingExpr(tir.IntrinFloor), op.Ceil: ewRoundingExpr(tir.IntrinCeil),
		op.Round:      ewRoundingExpr(tir.IntrinNearbyInt),
		op.LogicalNot: tir.NewNot,
		op.IsNaN:      func(x tir.PrimExpr) tir.PrimExpr { return tir.NewCall(tir.IntrinIsNaN, x) },
		op.Relu:       ewReluExpr,
	} {
		mustAddElemwise(o, strategy.Implementation{Name: ewImplName(o), PLevel: strategy.PLevelGeneric,
			Compute: ewUnaryCompute(f), Schedule: ScheduleInjective})
	}
	mustAddElemwise(op.IsInf, strategy.Implementation{Name: ewImplName(op.IsInf), PLevel: strategy.PLevelGeneric,
		Compute: ewComputeIsInf, Schedule: ScheduleInjective})
	mustAddElemwise(op.LeakyRelu, strategy.Implementation{Name: ewImplName(op.LeakyRelu), PLevel: strategy.PLevelGeneric,
		Compute: ewComputeLeakyRelu, Schedule: ScheduleInjective})

	// Binary arithmetic, comparisons and logic.
	for o, f := range map[*op.Op]func(a, b tir.PrimExpr) tir.PrimExpr{
		op.Add: tir.Add, op.Subtract: tir.Sub, op.Multiply: tir.Mul, op.Divide: ewDivExpr,
		op.Maximum: tir.Max, op.Minimum: tir.Min,
		op.LeftShift: ewLeftShiftExpr, op.RightShift: ewRightShiftExpr,
		op.Equal: tir.EQ, op.Greater: tir.GT, op.GreaterEqual: tir.GE, op.Less: tir.LT, op.LessEqual: tir.LE,
		op.LogicalAnd: tir.And, op.LogicalOr: tir.Or, op.LogicalXor: tir.NE,
		op.PRelu: ewPreluExpr,
	} {
		mustAddElemwise(o, strategy.Implementation{Name: ewImplName(o), PLevel: strategy.PLevelGeneric,
			Compute: ewBinaryCompute(f), Schedule: ScheduleInjective})
	}
	mustAddElemwise(op.Mod, strategy.Implementation{Name: ewImplName(op.Mod), PLevel: strategy.PLevelGeneric,
		Compute: ewComputeMod, Schedule: ScheduleInjective})
	mustAddElemwise(op.Power, strategy.Implementation{Name: ewImplName(op.Power), PLevel: strategy.PLevelGeneric,
		Compute: ewComputePower, Schedule: ScheduleInjective})

	mustAddElemwise(op.Where, strategy.Implementation{Name: ewImplName(op.Where), PLevel: strategy.PLevelGeneric,
		Compute: ewComputeWhere, Schedule: ScheduleInjective})
	mustAddElemwise(op.Cast, strategy.Implementation{Name: ewImplName(op.Cast), PLevel: strategy.PLevelGeneric,
		Compute: ewComputeCast, Schedule: ScheduleInjective})
	mustAddElemwise(op.Clip, strategy.Implementation{Name: ewImplName(op.Clip), PLevel: strategy.PLevelGeneric,
		Compute: ewComputeClip, Schedule: ScheduleInjective})
}

// mustAddElemwise registers impl for o under the "generic" key of
// strategy.Default; a failure is a bug in this package.
func mustAddElemwise(o *op.Op, impl strategy.Implementation) {
	if err := strategy.Default.Add(o, strategy.ForKey("generic"), impl); err != nil {
		panic(err)
	}
}

// ewImplName is the implementation name of op o ("add.generic",
// "nn.relu.generic").
func ewImplName(o *op.Op) string { return o.Name + ".generic" }

// ewStageName turns an op name into a tensor name ("nn.relu" → "T_nn_relu").
func ewStageName(o *op.Op) string { return "T_" + strings.ReplaceAll(o.Name, ".", "_") }

// BroadcastIndices maps the indices idx of an element of an output of
// shape out to the indices of the element of input in that numpy
// broadcasting reads: in's dimensions align with the trailing dimensions
// of out, leading output dimensions that in lacks are dropped, and a
// dimension of size 1 in in is always read at index 0. It panics when in
// does not broadcast to out or len(idx) != len(out) (a bug in the caller:
// type relations guarantee both).
func BroadcastIndices(out ir.Shape, in *te.Tensor, idx []tir.PrimExpr) []tir.PrimExpr {
	return ewBroadcastIdx(out, in.Shape, idx)
}

// ewBroadcastIdx is BroadcastIndices on a shape (also used for buffers of
// extern stages).
func ewBroadcastIdx(out, in ir.Shape, idx []tir.PrimExpr) []tir.PrimExpr {
	if len(idx) != len(out) || len(in) > len(out) {
		panic(fmt.Sprintf("topi.BroadcastIndices: %d indices for output %v, input %v", len(idx), out, in))
	}
	off := len(out) - len(in)
	res := make([]tir.PrimExpr, len(in))
	for d, n := range in {
		switch n {
		case 1:
			res[d] = tir.Idx(0)
		case out[d+off]:
			res[d] = idx[d+off]
		default:
			panic(fmt.Sprintf("topi.BroadcastIndices: input %v does not broadcast to %v", in, out))
		}
	}
	return res
}

// ewCheckBroadcast reports whether every input broadcasts to out, as an
// error naming the op.
func ewCheckBroadcast(c *strategy.Call, out ir.Shape, in []*te.Tensor) error {
	for k, t := range in {
		if len(t.Shape) > len(out) {
			return fmt.Errorf("%s: input %d of shape %v has higher rank than the output %v", c.Op.Name, k, t.Shape, out)
		}
		off := len(out) - len(t.Shape)
		for d, n := range t.Shape {
			if n != 1 && n != out[d+off] {
				return fmt.Errorf("%s: input %d of shape %v does not broadcast to %v", c.Op.Name, k, t.Shape, out)
			}
		}
	}
	return nil
}

// ewIs16 reports whether dt is a 16-bit float, which is computed in float32.
func ewIs16(dt ir.DType) bool { return dt == ir.Float16 || dt == ir.BFloat16 }

// ewWiden returns x converted to the type it is computed in: float32 for
// 16-bit floats, else x itself (the conversion is exact).
func ewWiden(x tir.PrimExpr) tir.PrimExpr {
	if ewIs16(x.Type().DType) {
		return tir.NewCast(tir.Float32T, x)
	}
	return x
}

// ewRefConvert converts v to dtype to the way the reference executor stores
// a computed value (tensor.SetFloat for float values, SetInt for integer
// and bool values): see the comment at the top of this file.
func ewRefConvert(v tir.PrimExpr, to ir.DType) tir.PrimExpr {
	from := v.Type().DType
	switch {
	case from == to:
		return v
	case to == ir.Bool:
		return tir.NE(v, tir.Const(v.Type(), 0))
	case from.IsFloat() && to.IsFloat():
		if from == ir.Float64 && ewIs16(to) {
			v = tir.NewCast(tir.Float32T, v)
		}
		return tir.NewCast(tir.Scalar(to), v)
	case from.IsFloat():
		return tir.NewCast(tir.Scalar(to), ewFloatToInt64(v))
	case to.IsFloat():
		if from.Size() == 8 || ewIs16(to) {
			v = tir.NewCast(tir.Float64T, v)
		}
		if ewIs16(to) {
			v = tir.NewCast(tir.Float32T, v)
		}
		return tir.NewCast(tir.Scalar(to), v)
	}
	return tir.NewCast(tir.Scalar(to), v) // integer or bool to integer: wraps
}

// ewFloatToInt64 converts a float to int64 like the reference: truncation
// toward zero, NaN to 0 and saturation at the int64 bounds. The clamping
// is explicit so that the cast itself is always in range (an out-of-range
// float-to-integer conversion is undefined in C).
func ewFloatToInt64(x tir.PrimExpr) tir.PrimExpr {
	x = ewWiden(x)
	ft := x.Type().DType
	two63 := math.Ldexp(1, 63)
	below := math.Nextafter(two63, 0)
	if ft == ir.Float32 {
		below = float64(math.Nextafter32(float32(two63), 0))
	}
	clamped := tir.Min(tir.Max(x, tir.FloatConst(ft, -two63)), tir.FloatConst(ft, below))
	safe := tir.NewSelect(tir.NewCall(tir.IntrinIsNaN, x), tir.FloatConst(ft, 0), clamped)
	return tir.NewSelect(tir.GE(x, tir.FloatConst(ft, two63)),
		tir.Int64(math.MaxInt64), tir.NewCast(tir.Int64T, safe))
}

// ewMapCompute builds the compute of an op applying f elementwise to its
// (broadcast) inputs; inputs of 16-bit float type are widened first unless
// raw is set, and the result is converted to the output dtype.
func ewMapCompute(c *strategy.Call, in []*te.Tensor, raw bool, f func(xs []tir.PrimExpr) tir.PrimExpr) ([]*te.Tensor, error) {
	ot := c.OutTensor()
	if err := ewCheckBroadcast(c, ot.Shape, in); err != nil {
		return nil, err
	}
	tag := "elemwise"
	for _, t := range in {
		if !t.Shape.Equal(ot.Shape) {
			tag = "broadcast"
		}
	}
	out := te.Compute(ewStageName(c.Op), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		xs := make([]tir.PrimExpr, len(in))
		for k, t := range in {
			xs[k] = t.At(ewBroadcastIdx(ot.Shape, t.Shape, i)...)
			if !raw {
				xs[k] = ewWiden(xs[k])
			}
		}
		return ewRefConvert(f(xs), ot.DType)
	}, te.WithTag(tag))
	return []*te.Tensor{out}, nil
}

// ewUnaryCompute is the compute of a one-argument op computing f(x).
func ewUnaryCompute(f func(x tir.PrimExpr) tir.PrimExpr) strategy.ComputeFunc {
	return func(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
		return ewMapCompute(c, in, false, func(xs []tir.PrimExpr) tir.PrimExpr { return f(xs[0]) })
	}
}

// ewBinaryCompute is the compute of a broadcasting op computing f(a, b).
func ewBinaryCompute(f func(a, b tir.PrimExpr) tir.PrimExpr) strategy.ComputeFunc {
	return func(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
		return ewMapCompute(c, in, false, func(xs []tir.PrimExpr) tir.PrimExpr { return f(xs[0], xs[1]) })
	}
}

func ewZero(x tir.PrimExpr) tir.PrimExpr { return tir.Const(x.Type(), 0) }
func ewOne(x tir.PrimExpr) tir.PrimExpr  { return tir.Const(x.Type(), 1) }

// ewIntrin applies a float math intrinsic.
func ewIntrin(fn tir.Intrinsic) func(tir.PrimExpr) tir.PrimExpr {
	return func(x tir.PrimExpr) tir.PrimExpr { return tir.NewCall(fn, x) }
}

// ewIn64 evaluates f in float64 (for functions without an intrinsic, whose
// formula would lose accuracy in float32); the result is rounded once.
func ewIn64(f func(tir.PrimExpr) tir.PrimExpr) func(tir.PrimExpr) tir.PrimExpr {
	return func(x tir.PrimExpr) tir.PrimExpr { return f(tir.NewCast(tir.Float64T, x)) }
}

func ewF64(v float64) tir.PrimExpr { return tir.FloatConst(ir.Float64, v) }

func ewLogOf(x tir.PrimExpr) tir.PrimExpr  { return tir.NewCall(tir.IntrinLog, x) }
func ewSqrtOf(x tir.PrimExpr) tir.PrimExpr { return tir.NewCall(tir.IntrinSqrt, x) }
func ewFabsOf(x tir.PrimExpr) tir.PrimExpr { return tir.NewCall(tir.IntrinFabs, x) }

// ewAsinhExpr is asinh in float64: x for |x| < 2^-28, log(2|x|) for
// |x| > 2^28, else log(|x| + sqrt(x²+1)), with x's sign.
func ewAsinhExpr(x tir.PrimExpr) tir.PrimExpr {
	ax := ewFabsOf(x)
	mid := ewLogOf(tir.Add(ax, ewSqrtOf(tir.Add(tir.Mul(ax, ax), ewF64(1)))))
	big := tir.Add(ewLogOf(ax), ewF64(math.Ln2))
	r := tir.NewSelect(tir.GT(ax, ewF64(1<<28)), big, mid)
	r = tir.NewSelect(tir.LT(x, ewF64(0)), tir.Mul(r, ewF64(-1)), r)
	return tir.NewSelect(tir.LT(ax, ewF64(math.Ldexp(1, -28))), x, r)
}

// ewAcoshExpr is acosh in float64: log(x + sqrt((x-1)(x+1))), log(2x) for
// x > 2^28; NaN for x < 1.
func ewAcoshExpr(x tir.PrimExpr) tir.PrimExpr {
	mid := ewLogOf(tir.Add(x, ewSqrtOf(tir.Mul(tir.Sub(x, ewF64(1)), tir.Add(x, ewF64(1))))))
	big := tir.Add(ewLogOf(x), ewF64(math.Ln2))
	r := tir.NewSelect(tir.GT(x, ewF64(1<<28)), big, mid)
	return tir.NewSelect(tir.LT(x, ewF64(1)), ewF64(math.NaN()), r)
}

// ewAtanhExpr is atanh in float64: x for |x| < 2^-28, else
// 0.5*log((1+x)/(1-x)) (±inf at ±1, NaN beyond).
func ewAtanhExpr(x tir.PrimExpr) tir.PrimExpr {
	r := tir.Mul(ewF64(0.5), ewLogOf(tir.Div(tir.Add(ewF64(1), x), tir.Sub(ewF64(1), x))))
	return tir.NewSelect(tir.LT(ewFabsOf(x), ewF64(math.Ldexp(1, -28))), x, r)
}

func ewAbsExpr(x tir.PrimExpr) tir.PrimExpr {
	switch dt := x.Type().DType; {
	case dt.IsFloat():
		return ewFabsOf(x)
	case dt.IsUint():
		return x
	}
	return tir.NewSelect(tir.LT(x, ewZero(x)), tir.Sub(ewZero(x), x), x)
}

func ewNegExpr(x tir.PrimExpr) tir.PrimExpr {
	if x.Type().IsFloat() {
		return tir.Mul(x, tir.Const(x.Type(), -1)) // -0 for +0, like -x
	}
	return tir.Sub(ewZero(x), x) // wraps, for unsigned too
}

// ewSignExpr is 1, -1 or x itself (0, -0, NaN); 0 or 1 for unsigned.
func ewSignExpr(x tir.PrimExpr) tir.PrimExpr {
	if x.Type().DType.IsUint() {
		return tir.NewSelect(tir.NE(x, ewZero(x)), ewOne(x), ewZero(x))
	}
	return tir.NewSelect(tir.GT(x, ewZero(x)), ewOne(x),
		tir.NewSelect(tir.LT(x, ewZero(x)), tir.Const(x.Type(), -1), x))
}

// ewRoundingExpr applies a rounding intrinsic to floats; integers are
// already integral.
func ewRoundingExpr(fn tir.Intrinsic) func(tir.PrimExpr) tir.PrimExpr {
	return func(x tir.PrimExpr) tir.PrimExpr {
		if x.Type().IsFloat() {
			return tir.NewCall(fn, x)
		}
		return x
	}
}

func ewReluExpr(x tir.PrimExpr) tir.PrimExpr {
	if x.Type().DType.IsUint() {
		return x
	}
	return tir.Max(x, ewZero(x)) // NaN stays NaN
}

// ewPreluExpr is x < 0 ? s*x : x (unsigned: x).
func ewPreluExpr(x, s tir.PrimExpr) tir.PrimExpr {
	if x.Type().DType.IsUint() {
		return x
	}
	return tir.NewSelect(tir.LT(x, ewZero(x)), tir.Mul(s, x), x)
}

// ewSafeDivisor is b with 0 and (signed) -1 replaced by 1, so that a division
// by it never traps; the callers select the right result for those cases.
func ewSafeDivisor(b tir.PrimExpr) tir.PrimExpr {
	bad := tir.EQ(b, ewZero(b))
	if b.Type().DType.IsInt() {
		bad = tir.Or(bad, tir.EQ(b, tir.Const(b.Type(), -1)))
	}
	return tir.NewSelect(bad, ewOne(b), b)
}

// ewDivExpr is a / b; on integers truncating, with x/0 = 0 and x/-1 = -x.
func ewDivExpr(a, b tir.PrimExpr) tir.PrimExpr {
	if a.Type().IsFloat() {
		return tir.Div(a, b)
	}
	q := tir.Div(a, ewSafeDivisor(b))
	if a.Type().DType.IsInt() {
		q = tir.NewSelect(tir.EQ(b, tir.Const(b.Type(), -1)), tir.Sub(ewZero(a), a), q)
	}
	return tir.NewSelect(tir.EQ(b, ewZero(b)), ewZero(a), q)
}

// ewComputeMod: fmod=true is C's fmod / truncated remainder (sign of a),
// fmod=false the floor modulo (sign of b); an integer x mod 0 (and x mod
// -1) is 0.
func ewComputeMod(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	fmod := c.Attrs.Bool("fmod")
	return ewMapCompute(c, in, false, func(xs []tir.PrimExpr) tir.PrimExpr {
		a, b := xs[0], xs[1]
		if a.Type().IsFloat() {
			r := tir.Mod(a, b)
			if fmod {
				return r
			}
			fix := tir.And(tir.NE(r, ewZero(r)), tir.NE(tir.LT(r, ewZero(r)), tir.LT(b, ewZero(b))))
			return tir.NewSelect(fix, tir.Add(r, b), r)
		}
		// A divisor of 0 or -1 becomes 1, whose remainder 0 is the result.
		if fmod || a.Type().DType.IsUint() {
			return tir.Mod(a, ewSafeDivisor(b))
		}
		return tir.FloorMod(a, ewSafeDivisor(b))
	})
}

func ewComputeIsInf(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	pos, neg := c.Attrs.Bool("detect_positive"), c.Attrs.Bool("detect_negative")
	return ewMapCompute(c, in, false, func(xs []tir.PrimExpr) tir.PrimExpr {
		x := xs[0]
		switch {
		case pos && neg:
			return tir.NewCall(tir.IntrinIsInf, x)
		case pos:
			return tir.EQ(x, tir.Const(x.Type(), math.Inf(1)))
		case neg:
			return tir.EQ(x, tir.Const(x.Type(), math.Inf(-1)))
		}
		return tir.Bool(false)
	})
}

// ewComputeLeakyRelu is x < 0 ? alpha*x : x. The reference multiplies by the
// float64 alpha; float32 agrees within tolerance, but for 16-bit floats a
// float32 product could round to a different 16-bit value, so they are
// computed in float64.
func ewComputeLeakyRelu(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	alpha := c.Attrs.Float("alpha")
	wide := ewIs16(in[0].DType)
	return ewMapCompute(c, in, false, func(xs []tir.PrimExpr) tir.PrimExpr {
		x := xs[0]
		if wide {
			x = tir.NewCast(tir.Float64T, x)
		}
		return tir.NewSelect(tir.LT(x, ewZero(x)), tir.Mul(x, tir.Const(x.Type(), alpha)), x)
	})
}

// ewComputeWhere selects x where cond is true and y elsewhere; the values
// are copied, never converted.
func ewComputeWhere(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	return ewMapCompute(c, in, true, func(xs []tir.PrimExpr) tir.PrimExpr {
		return tir.NewSelect(xs[0], xs[1], xs[2])
	})
}

// ewComputeCast converts to the dtype attribute with the reference's
// conversion rules (ewRefConvert).
func ewComputeCast(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if to := c.OutTensor().DType; to.IsInteger() && to.Size() <= 4 && in[0].DType == ir.Float32 && ewClampedToInt32(in[0]) {
		// The input is a float clamped within int32 (QuantizeLinear's
		// clip; a clip before a cast): truncating through int32 gives the
		// int64 path's value, NaN 0 as there, and the C conversion
		// vectorises (codegen/c's nanSafeInt32).
		return ewMapCompute(c, in, true, func(xs []tir.PrimExpr) tir.PrimExpr {
			safe := tir.NewSelect(tir.NewCall(tir.IntrinIsNaN, xs[0]), tir.Float32(0), xs[0])
			return tir.NewCast(tir.Int32T, safe)
		})
	}
	return ewMapCompute(c, in, true, func(xs []tir.PrimExpr) tir.PrimExpr { return xs[0] })
}

// ewClampedToInt32 says whether tensor t is computed as a min and a max
// with constant bounds (in either order) within int32's range: its values
// are in that range, or NaN.
func ewClampedToInt32(t *te.Tensor) bool {
	op, ok := t.Op.(*te.ComputeOp)
	if !ok || op.IsReduce() {
		return false
	}
	outer, ok := op.Body.(*tir.Binary)
	if !ok || (outer.Op != tir.OpMin && outer.Op != tir.OpMax) {
		return false
	}
	inner, ok := outer.A.(*tir.Binary)
	if !ok || (inner.Op != tir.OpMin && inner.Op != tir.OpMax) || inner.Op == outer.Op {
		return false
	}
	in := func(e tir.PrimExpr) bool {
		f, ok := e.(*tir.FloatImm)
		return ok && f.Value > -2147483648 && f.Value < 2147483647
	}
	return in(outer.B) && in(inner.B)
}

// ewComputeClip clamps into [a_min, a_max]. Floats: min(max(x, lo), hi)
// (NaN stays; lo > hi gives hi; a zero bound clamps -0 to +0), as max
// and min, which compile to compare-and-select without branches (the
// selects x < lo ? lo : x did not: the scalar tails of vectorised loops
// branched on every element). Integers: the bounds are rounded
// inward and saturated to the int64 range (uint64 for uint64), and the
// clamp is done in a type that holds them.
func ewComputeClip(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	lo, hi := c.Attrs.Float("a_min"), c.Attrs.Float("a_max")
	dt := in[0].DType
	return ewMapCompute(c, in, false, func(xs []tir.PrimExpr) tir.PrimExpr {
		x := xs[0]
		if x.Type().IsFloat() {
			return tir.Min(tir.Max(x, tir.Const(x.Type(), lo)), tir.Const(x.Type(), hi))
		}
		if dt == ir.Uint64 {
			l, h := tir.IntConst(ir.Uint64, int64(ir.SaturateUint64(math.Ceil(lo)))), tir.IntConst(ir.Uint64, int64(ir.SaturateUint64(math.Floor(hi))))
			return tir.Min(tir.Max(x, l), h)
		}
		il, ih := ir.SaturateInt64(math.Ceil(lo)), ir.SaturateInt64(math.Floor(hi))
		tmin, tmax := ewIntRange(dt)
		if il < tmin || il > tmax || ih < tmin || ih > tmax {
			x = tir.NewCast(tir.Int64T, x) // clamp in int64, wrap at the end
		}
		return tir.Min(tir.Max(x, tir.IntConst(x.Type().DType, il)), tir.IntConst(x.Type().DType, ih))
	})
}

// ewIntRange is the value range of a signed or (non-64-bit) unsigned integer
// type, as int64.
func ewIntRange(dt ir.DType) (int64, int64) {
	bits := uint(dt.Size() * 8)
	if dt.IsUint() {
		return 0, int64(uint64(1)<<bits - 1)
	}
	return -1 << (bits - 1), 1<<(bits-1) - 1
}
