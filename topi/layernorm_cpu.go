package topi

import (
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// This file holds the tuned CPU implementation of float32 nn.layer_norm
// over the last axis (transformers' and ConvNeXt's normalisation over the
// features of a token or pixel). It computes what the generic
// implementation does — the row's mean and variance in float64, then
// (x - mean) * inv * gamma + beta in float64, rounded once — but its two
// row sums are lane-split (reduce_lanes.go): the generic plain reductions
// are one chain of dependent float64 additions per row, which no compiler
// may reorder or vectorise (ConvNeXt's 3136 rows of 96 features took
// 0.47 ms on an Emerald Rapids core against ONNX Runtime's 0.21). The
// mean and the inverse deviation are one value per row, computed before
// the output pass, which runs over rows with the row vectorised.

func init() {
	if err := strategy.Default.Add(op.LayerNorm, strategy.ForKey("cpu"), strategy.Implementation{
		Name: "nn.layer_norm.cpu", PLevel: strategy.PLevelTuned,
		Compute: computeLayerNormCPU, Schedule: scheduleLayerNormCPU, Valid: layerNormCPUValid,
	}); err != nil {
		panic(err)
	}
}

// layerNormCPUValid accepts float32 layer normalisation over the last
// axis only of a tensor of rank >= 2.
func layerNormCPUValid(c *strategy.Call) bool { return lastAxisFloat32(c) }

// layerNormStatTag marks the per-row statistics of computeLayerNormCPU,
// which stay at the root of the schedule.
const layerNormStatTag = "layer_norm_stat"

func computeLayerNormCPU(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x, gamma, beta := in[0], in[1], in[2]
	ot := c.OutTensor()
	ax := len(x.Shape) - 1
	rows := x.Shape.Clone()
	rows[ax] = 1
	n := x.Shape[ax]
	// Two vectors of float64 partial sums.
	lanes := int64(max(4, 2*c.Target.Processor().Lanes(64)))
	at := func(row []tir.PrimExpr, k tir.PrimExpr) tir.PrimExpr {
		idx := append([]tir.PrimExpr(nil), row...)
		idx[ax] = k
		return nnCast(ir.Float64, x.At(idx...))
	}
	nf := tir.FloatConst(ir.Float64, float64(n))
	sum := laneReduce("norm_sum", rows, ir.Float64, n, lanes, te.Sum, "reduce", at)
	mean := te.Compute("norm_mean", rows, func(i []tir.PrimExpr) tir.PrimExpr {
		return tir.Div(sum.At(i...), nf)
	}, te.WithTag(layerNormStatTag))
	sq := laneReduce("norm_sqsum", rows, ir.Float64, n, lanes, te.Sum, "reduce", func(row []tir.PrimExpr, k tir.PrimExpr) tir.PrimExpr {
		d := tir.Sub(at(row, k), mean.At(row...))
		return tir.Mul(d, d)
	})
	eps := tir.FloatConst(ir.Float64, c.Attrs.Float("epsilon"))
	inv := te.Compute("norm_inv", rows, func(i []tir.PrimExpr) tir.PrimExpr {
		v := tir.Add(tir.Div(sq.At(i...), nf), eps)
		return tir.Div(tir.FloatConst(ir.Float64, 1), tir.NewCall(tir.IntrinSqrt, v))
	}, te.WithTag(layerNormStatTag))
	out := te.Compute(nnName(c), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		si := nnKeepIndex(i, ax)
		v := tir.Mul(tir.Sub(nnCast(ir.Float64, x.At(i...)), mean.At(si...)), inv.At(si...))
		v = tir.Add(tir.Mul(v, nnCast(ir.Float64, nnBroadcastTail(gamma, i, ax))), nnCast(ir.Float64, nnBroadcastTail(beta, i, ax)))
		return nnOut(ot.DType, v)
	}, te.WithTag("injective"))
	return []*te.Tensor{out}, nil
}

// scheduleLayerNormCPU runs the two row sums and the per-row mean and
// inverse deviation as loop nests over rows at the root and the output
// (or the fused elementwise consumer that is the group's output) as a loop
// nest over rows, the row vectorised (scheduleRowsCPU).
func scheduleLayerNormCPU(c *strategy.Call, s *te.Schedule, outs, anchor []*te.Tensor) error {
	return scheduleRowsCPU(c, s, outs, anchor, func(cop *te.ComputeOp) (bool, bool) {
		return cop.IsReduce() || cop.Tag == layerNormStatTag, false
	})
}
