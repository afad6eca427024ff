package topi

import (
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// This file holds the tuned CPU implementation of float32 nn.softmax over
// the last axis (attention scores in transformers). The generic compute
// evaluates exp(x - max) twice per element (once for the sum, once for the
// output) and runs max, sum and output as three passes over the whole
// tensor; here exp(x - max) is computed once per element and stored, and
// every pass is a plain loop nest over rows with the row innermost.

func init() {
	if err := strategy.Default.Add(op.Softmax, strategy.ForKey("cpu"), strategy.Implementation{
		Name: "nn.softmax.cpu", PLevel: strategy.PLevelTuned,
		Compute: computeSoftmaxCPU, Schedule: scheduleSoftmaxCPU, Valid: softmaxCPUValid,
	}); err != nil {
		panic(err)
	}
}

// softmaxCPUValid accepts float32 softmax over the last axis of a tensor
// of rank >= 2.
func softmaxCPUValid(c *strategy.Call) bool { return lastAxisFloat32(c) }

// lastAxisFloat32 reports whether call c has a non-empty float32 output of
// rank >= 2 and an "axis" attribute naming its last axis: the row
// operators (softmax, layer normalisation) the CPU row schedules take.
func lastAxisFloat32(c *strategy.Call) bool {
	ot, ok := c.OutType.(*ir.TensorType)
	if !ok || ot.DType != ir.Float32 || len(ot.Shape) < 2 || ot.Shape.NumElements() == 0 {
		return false
	}
	ax, err := op.NormAxis(c.Attrs.Int("axis"), len(ot.Shape))
	return err == nil && ax == len(ot.Shape)-1
}

// softmaxExpTag marks the stored exponentials of computeSoftmaxCPU.
const softmaxExpTag = "softmax_exp"

func computeSoftmaxCPU(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x := in[0]
	ot := c.OutTensor()
	ax := len(x.Shape) - 1
	rows := x.Shape.Clone()
	rows[ax] = 1
	n, lanes := x.Shape[ax], reduceLanes(c.Target.Processor())
	at := func(t *te.Tensor) func(row []tir.PrimExpr, k tir.PrimExpr) tir.PrimExpr {
		return func(row []tir.PrimExpr, k tir.PrimExpr) tir.PrimExpr {
			idx := append([]tir.PrimExpr(nil), row...)
			idx[ax] = k
			return t.At(idx...)
		}
	}
	m := laneReduce("softmax_max", rows, x.DType, n, lanes, te.Max, "reduce", at(x))
	e := te.Compute("softmax_exp", x.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		return tir.NewCall(tir.IntrinExp, tir.Sub(x.At(i...), m.At(nnKeepIndex(i, ax)...)))
	}, te.WithTag(softmaxExpTag))
	sum := laneReduce("softmax_sum", rows, x.DType, n, lanes, te.Sum, "reduce", at(e))
	out := te.Compute(nnName(c), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		return tir.Div(e.At(i...), sum.At(nnKeepIndex(i, ax)...))
	}, te.WithTag("injective"))
	return []*te.Tensor{out}, nil
}

// scheduleSoftmaxCPU runs the max, the exponentials, the sum and the
// output as loop nests over rows, none fused (fused loops bring
// floordiv/floormod index arithmetic that keeps compilers from
// vectorising). The output (or the fused elementwise
// consumer that is the group's output) keeps its loop nest unfused, with
// the first loop of two or more iterations parallel and the row loop
// vectorised.
func scheduleSoftmaxCPU(c *strategy.Call, s *te.Schedule, outs, anchor []*te.Tensor) error {
	// The row statistics and the exponentials stay at the root (the
	// exponentials have two consumers, which rules out compute_at), each
	// as an unfused loop nest over rows; the exponentials' rows vectorised.
	return scheduleRowsCPU(c, s, outs, anchor, func(cop *te.ComputeOp) (bool, bool) {
		exp := cop.Tag == softmaxExpTag
		return cop.IsReduce() || exp, exp
	})
}

// scheduleRowsCPU schedules a group whose anchor reduces rows (softmax,
// layer normalisation) and whose output has the anchor's shape: the
// stages rowStage keeps (first result) stay at the root as loop nests
// over rows, their first loop of two or more iterations parallel and,
// where rowStage says so (second result), their row vectorised; the
// lane-split partial sums go inside their consumers (scheduleLaneParts);
// the other stages are inlined; the output keeps its loop nest unfused
// (fused loops bring floordiv/floormod index arithmetic that keeps
// compilers from vectorising), its first loop of two or more iterations
// parallel and its row vectorised. Other groups get scheduleNN.
func scheduleRowsCPU(c *strategy.Call, s *te.Schedule, outs, anchor []*te.Tensor, rowStage func(*te.ComputeOp) (keep, vectorize bool)) error {
	if len(outs) != 1 || len(anchor) != 1 || !sameShape(outs[0].Shape, anchor[0].Shape) {
		return scheduleNN(c, s, outs, anchor)
	}
	out := outs[0]
	type row struct {
		st  *te.Stage
		vec bool
	}
	var rows []row
	for _, st := range s.Stages() {
		cop, ok := st.Op().(*te.ComputeOp)
		if !ok || cop.Output == out || cop.Tag == laneTag {
			continue
		}
		if keep, vec := rowStage(cop); keep {
			rows = append(rows, row{st, vec})
			continue
		}
		st.ComputeInline()
	}
	st := s.Stage(out)
	axes := st.Axis()
	r := len(axes)
	parallelFirst(st, axes[:r-1])
	if axes[r-1].Extent >= 2 {
		st.Vectorize(axes[r-1])
	}
	for _, rw := range rows {
		ra := rw.st.Axis()
		parallelFirst(rw.st, ra[:r-1])
		if rw.vec && ra[r-1].Extent >= 2 {
			rw.st.Vectorize(ra[r-1])
		}
	}
	scheduleLaneParts(s)
	return s.Err()
}
