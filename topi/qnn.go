package topi

import (
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// Computes of the integer (quantized) operators.

func init() {
	mustAddElemwise(op.Requantize, strategy.Implementation{Name: ewImplName(op.Requantize), PLevel: strategy.PLevelGeneric,
		Compute: requantizeCompute, Schedule: ScheduleInjective})
}

// requantizeCompute is qnn.requantize, elementwise in int64 with the
// shift a constant power of two, so that the C compiler divides by
// shifting. It is op.RequantizeValue written as an expression.
func requantizeCompute(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	shift, zp := c.Attrs.Int("shift"), c.Attrs.Int("out_zero_point")
	lo, hi := op.RequantizeRange(c.Attrs)
	return ewMapCompute(c, in, true, func(xs []tir.PrimExpr) tir.PrimExpr {
		i64 := func(v int64) tir.PrimExpr { return tir.Int64(v) }
		p := tir.Mul(tir.NewCast(tir.Int64T, xs[0]), tir.NewCast(tir.Int64T, xs[1]))
		q := tir.FloorDiv(p, i64(1<<shift))
		r := tir.FloorMod(p, i64(1<<shift))
		half := i64(1 << (shift - 1))
		up := tir.Or(tir.GT(r, half), tir.And(tir.EQ(r, half), tir.EQ(tir.FloorMod(q, i64(2)), i64(1))))
		q = tir.Add(q, tir.NewSelect(up, i64(1), i64(0)))
		return tir.Min(tir.Max(tir.Add(q, i64(zp)), i64(lo)), i64(hi))
	})
}
