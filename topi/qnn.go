package topi

import (
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// Computes of the integer (quantized) operators.

func init() {
	mustAddElemwise(op.Requantize, strategy.Implementation{Name: ewImplName(op.Requantize), PLevel: strategy.PLevelGeneric,
		Compute: requantizeCompute, Schedule: ScheduleInjective})
}

// requantExpr is op.RequantizeValue of int32 expressions x and m written
// as an expression, in int64 with the shift a constant power of two, so
// that the C compiler divides by shifting. The result is the clamped
// int64 value. qnn.requantize's relation gives int32 operands and a shift
// of 1 to 62.
//
// Rounding half to even, p / 2^s is floor((p + 2^(s-1) - 1 + b) / 2^s)
// with b bit s of p (the parity of floor(p / 2^s)). For a product of two
// int32 values (|p| <= 2^62) that sum plus 2^62 lies in [0, 2^64), so the
// floor is a logical shift of it as uint64, less 2^(62-s): the C
// compiler vectorises that with AVX2, which has no 64-bit arithmetic
// shift, in fewer operations than a remainder, compares and a select.
func requantExpr(x, m tir.PrimExpr, shift, zp, lo, hi int64) tir.PrimExpr {
	i64 := func(v int64) tir.PrimExpr { return tir.Int64(v) }
	u64 := func(v int64) tir.PrimExpr { return tir.IntConst(ir.Uint64, v) }
	// The casts to int32 are no-ops on the relation's operands; they hold
	// the product within 2^62, which the biased shift needs.
	p := tir.Mul(tir.NewCast(tir.Int64T, tir.NewCast(tir.Int32T, x)), tir.NewCast(tir.Int64T, tir.NewCast(tir.Int32T, m)))
	pu := tir.NewCast(tir.Scalar(ir.Uint64), p)
	b := tir.FloorMod(tir.FloorDiv(pu, u64(1<<shift)), u64(2))
	sum := tir.Add(tir.Add(pu, u64(roundBias(shift))), b)
	q := tir.Add(tir.NewCast(tir.Int64T, tir.FloorDiv(sum, u64(1<<shift))), i64(zp-1<<(62-shift)))
	return tir.Min(tir.Max(q, i64(lo)), i64(hi))
}

// roundBias is the constant added to a product before its biased logical
// shift by s (see requantExpr): 2^62, which makes it non-negative, plus
// 2^(s-1) - 1, which with the parity bit rounds half to even.
func roundBias(s int64) int64 { return 1<<62 + 1<<(s-1) - 1 }

// requantizeCompute is qnn.requantize, elementwise.
func requantizeCompute(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	shift, zp := c.Attrs.Int("shift"), c.Attrs.Int("out_zero_point")
	lo, hi := op.RequantizeRange(c.Attrs)
	return ewMapCompute(c, in, true, func(xs []tir.PrimExpr) tir.PrimExpr {
		return requantExpr(xs[0], xs[1], shift, zp, lo, hi)
	})
}

// computeQConvRequantize is qnn.conv2d_requantize as its parts: the
// generic convolution, then the bias and requantization elementwise.
func computeQConvRequantize(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	ot := c.OutTensor()
	conv := *c
	conv.Op, conv.OutType = op.QConv2D, ir.NewTensorType(ir.Int32, ot.Shape)
	acc, err := computeQConv(&conv, in[:2])
	if err != nil {
		return nil, err
	}
	return []*te.Tensor{qconvEpilogue(c, acc[0], in[2], in[3])}, nil
}

// qconvEpilogue adds the per-channel bias to int32 sums [N, O, H, W] and
// requantizes them to the call's output type.
func qconvEpilogue(c *strategy.Call, acc, bias, mult *te.Tensor) *te.Tensor {
	ot := c.OutTensor()
	shift, zp := c.Attrs.Int("shift"), c.Attrs.Int("out_zero_point")
	lo, hi := op.RequantizeRange(c.Attrs)
	return te.Compute(nnName(c), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		var m tir.PrimExpr
		if len(mult.Shape) == 0 {
			m = mult.At()
		} else {
			m = mult.At(i[1])
		}
		// The sum wraps at 32 bits, as the reference's does.
		s := tir.NewCast(tir.Int32T, tir.Add(tir.NewCast(tir.Int64T, acc.At(i...)), tir.NewCast(tir.Int64T, bias.At(i[1]))))
		return tir.NewCast(tir.Scalar(ot.DType), requantExpr(s, m, shift, zp, lo, hi))
	}, te.WithTag("elemwise"))
}
