package topi

import (
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
)

// This file holds the CPU schedule of a transpose that moves the input's
// contiguous last axis (NCHW <-> NHWC around ConvNeXt's LayerNorm and MLP,
// [tokens, features] -> [features, tokens]). Written row by row, such a
// transpose reads one element per input row for every output element: an
// output row of 3136 elements touched 3136 input lines, and the input was
// streamed through L1 once per output row (ConvNeXt's [56x56, 96] ->
// [96, 56x56] took 0.34 ms on an Emerald Rapids core). Here the output is
// written in T x T tiles of its last axis (a) and of the axis that walks
// the input's last axis (b): a tile reads T input lines and writes T
// output lines, which all stay in L1 while the tile's T^2 elements move,
// the output rows vectorised (T consecutive elements each).

func init() {
	if err := strategy.Default.Add(op.Transpose, strategy.ForKey("cpu"), strategy.Implementation{
		Name: "transpose.cpu", PLevel: strategy.PLevelTuned,
		Compute: trGuard(computeTranspose), Schedule: scheduleTransposeCPU, Valid: transposeCPUValid,
	}); err != nil {
		panic(err)
	}
}

// transposeTile returns, for an output of shape out and the permutation
// perm, the tiled axes — a, the output's last, and b, the output axis that
// walks the input's last — and the tile edge: 16 or 8 elements, whichever
// divides both (16 first); tile 0 when the transpose keeps the last axis
// in place or neither divides them.
func transposeTile(out ir.Shape, perm []int) (a, b int, tile int64) {
	r := len(out)
	if r < 2 || len(perm) != r || perm[r-1] == r-1 {
		return 0, 0, 0
	}
	a = r - 1
	for o, p := range perm {
		if p == r-1 {
			b = o
		}
	}
	for _, t := range []int64{16, 8} {
		if out[a]%t == 0 && out[b]%t == 0 {
			return a, b, t
		}
	}
	return 0, 0, 0
}

// transposeCPUValid accepts transposes that move the input's last axis
// with both tiled axes a multiple of 8 (transposeTile).
func transposeCPUValid(c *strategy.Call) bool {
	ot, ok := c.OutType.(*ir.TensorType)
	if !ok || ot.Shape.NumElements() == 0 {
		return false
	}
	perm, err := op.TransposeAxes(c.Attrs.Ints("axes"), len(ot.Shape))
	if err != nil {
		return false
	}
	_, _, t := transposeTile(ot.Shape, perm)
	return t > 0
}

// scheduleTransposeCPU tiles the group's output (the transpose or the
// elementwise consumer it is inlined into, of the same shape) as the file
// comment says: loops over the other axes, then the tiles of b and a,
// then the tile's b rows and its a elements, vectorised; the first loop
// with two or more iterations runs in parallel. A group of another
// structure gets the injective schedule.
func scheduleTransposeCPU(c *strategy.Call, s *te.Schedule, outs, anchor []*te.Tensor) error {
	ot := c.OutTensor()
	perm, err := op.TransposeAxes(c.Attrs.Ints("axes"), len(ot.Shape))
	if err != nil || len(outs) != 1 || !sameShape(outs[0].Shape, ot.Shape) {
		return ScheduleInjective(c, s, outs, anchor)
	}
	ai, bi, t := transposeTile(ot.Shape, perm)
	if t == 0 {
		return ScheduleInjective(c, s, outs, anchor)
	}
	inlineExceptCostlyBroadcasts(s, outs)
	st := s.Stage(outs[0])
	axes := st.Axis()
	ao, aIn := st.Split(axes[ai], t)
	bo, bIn := st.Split(axes[bi], t)
	var order []*te.IterVar
	for k, a := range axes {
		if k != ai && k != bi {
			order = append(order, a)
		}
	}
	order = append(order, bo, ao, bIn, aIn)
	st.Reorder(order...)
	st.Vectorize(aIn)
	parallelFirst(st, order[:len(order)-2])
	return s.Err()
}
