package topi

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// qnn.softmax (op.QSoftmax): the axis maximum, the table's exp values
// summed in int64, then one rounded division per element, the
// arithmetic of op.QSoftmaxRow.

func init() {
	mustAddNN(op.QSoftmax, strategy.Implementation{Name: "qnn.softmax.generic", PLevel: strategy.PLevelGeneric,
		Compute: computeQSoftmax, Schedule: scheduleNN})
}

func computeQSoftmax(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x, table := in[0], in[1]
	ot := c.OutTensor()
	ax, err := op.NormAxis(c.Attrs.Int("axis"), len(x.Shape))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", c.Op.Name, err)
	}
	mult, shift, zp := c.Attrs.Int("multiplier"), c.Attrs.Int("shift"), c.Attrs.Int("out_zero_point")
	xv := func(idx []tir.PrimExpr) tir.PrimExpr { return tir.NewCast(tir.Int32T, x.At(idx...)) }
	m := nnAxisReduce("qsoftmax_max", x, ax, te.Max, xv)
	// e is the clamped table value of an element, in int64.
	e := func(idx []tir.PrimExpr) tir.PrimExpr {
		d := tir.Sub(m.At(nnKeepIndex(idx, ax)...), xv(idx))
		v := tir.NewCast(tir.Int64T, table.At(d))
		return tir.Min(tir.Max(v, tir.Int64(0)), tir.Int64(op.QSoftmaxTableMax))
	}
	sum := nnAxisReduce("qsoftmax_sum", x, ax, te.Sum, e)
	lo, hi := op.QRange(ot.DType)
	out := te.Compute(nnName(c), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		den := tir.Mul(sum.At(nnKeepIndex(i, ax)...), tir.Int64(1<<shift))
		// The division by max(den, 1), so that no arm divides by 0; a
		// sum of 0 selects 0 below.
		safe := tir.Max(den, tir.Int64(1))
		num := tir.Mul(e(i), tir.Int64(mult))
		q := tir.Div(num, safe)
		r2 := tir.Mul(tir.Sub(num, tir.Mul(q, safe)), tir.Int64(2))
		up := tir.Or(tir.GT(r2, safe), tir.And(tir.EQ(r2, safe), tir.EQ(tir.FloorMod(q, tir.Int64(2)), tir.Int64(1))))
		q = tir.Add(q, tir.NewSelect(up, tir.Int64(1), tir.Int64(0)))
		q = tir.NewSelect(tir.GT(den, tir.Int64(0)), q, tir.Int64(0))
		v := tir.Min(tir.Max(tir.Add(q, tir.Int64(zp)), tir.Int64(lo)), tir.Int64(hi))
		return tir.NewCast(tir.Scalar(ot.DType), v)
	}, te.WithTag("injective"))
	return []*te.Tensor{out}, nil
}
