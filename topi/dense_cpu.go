package topi

import (
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// This file holds the tuned CPU implementation of float32 nn.matmul (and,
// through the alter_dense_layout graph pass, of nn.dense with a constant
// weight, which becomes a matmul with the weight transposed to [K, N]).
//
// The schedule is the classic register-tiled one: the output [..., M, N]
// is cut into tiles of mr rows and nr columns; every tile is accumulated
// in a local (stack, ideally register) buffer over the whole reduction,
// with the k loop outermost, the row loop unrolled and the column loop
// vectorised (b[k, n0:n0+nr] is contiguous, a[m, k] is broadcast), then
// stored once -- through the fused elementwise epilogue when the group has
// one. Batch, row-tile and column-tile loops are fused into one parallel
// loop.

func init() {
	if err := strategy.Default.Add(op.MatMul, strategy.ForKey("cpu"), strategy.Implementation{
		Name: "nn.matmul.cpu", PLevel: strategy.PLevelTuned,
		Compute: computeMatMulCPU, Schedule: scheduleMatMulCPU, Valid: matmulCPUValid,
	}); err != nil {
		panic(err)
	}
	mustAddNN(op.MatMulPacked, strategy.Implementation{Name: "nn.contrib_matmul_packed.generic", PLevel: strategy.PLevelGeneric,
		Compute: func(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
			return matmulPackedCompute(c, in, te.Sum)
		},
		Schedule: scheduleConv})
	if err := strategy.Default.Add(op.MatMulPacked, strategy.ForKey("cpu"), strategy.Implementation{
		Name: "nn.contrib_matmul_packed.cpu", PLevel: strategy.PLevelTuned,
		Compute: func(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
			return matmulPackedCompute(c, in, convSum(targetHasFMA(c.Target)))
		},
		Schedule: scheduleMatMulCPU, Valid: func(c *strategy.Call) bool {
			ot, ok := c.OutType.(*ir.TensorType)
			return ok && ot.DType == ir.Float32 && ot.Shape.NumElements() > 0
		},
	}); err != nil {
		panic(err)
	}
}

// matmulPackedCompute is nn.contrib_matmul_packed: out[..., m, n] = sum
// over k of a[..., m, k] * w[n / B, k, n % B], accumulated with sum.
func matmulPackedCompute(c *strategy.Call, in []*te.Tensor, sum te.Reducer) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	a, w := in[0], in[1]
	ot := c.OutTensor()
	r := len(ot.Shape)
	blk := tir.Idx(w.Shape[2])
	acc := nnAcc(ot.DType)
	k := te.ReduceAxis(w.Shape[1], "k")
	out := te.ComputeReduce("nn_matmul_acc", ot.Shape, sum, []*te.IterVar{k}, func(i []tir.PrimExpr) tir.PrimExpr {
		ai := append(append([]tir.PrimExpr(nil), i[:r-1]...), k.Var)
		n := i[r-1]
		return tir.Mul(nnCast(acc, a.At(ai...)), nnCast(acc, w.At(tir.FloorDiv(n, blk), k.Var, tir.FloorMod(n, blk))))
	}, te.WithTag("matmul"))
	return []*te.Tensor{nnCastStage(out, ot.DType, "nn_matmul")}, nil
}

// computeMatMulCPU is nn.matmul's compute whose multiply-accumulate steps
// are fused multiply-adds when the target has FMA, as in the CPU
// convolutions (one rounding per step; the TIR interpreter computes the
// same fma exactly, so compiled and interpreted results stay identical).
func computeMatMulCPU(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	return matmulCompute(c, in, convSum(targetHasFMA(c.Target)))
}

// matmulCPUValid accepts float32 matmuls of two operands of rank >= 2 whose
// second operand is not transposed (the schedule vectorises over its
// contiguous last dimension).
func matmulCPUValid(c *strategy.Call) bool {
	if len(c.ArgTypes) != 2 {
		return false
	}
	ot, ok := c.OutType.(*ir.TensorType)
	if !ok || ot.DType != ir.Float32 || len(ot.Shape) < 2 || ot.Shape.NumElements() == 0 {
		return false
	}
	for i := range c.ArgTypes {
		t, ok := c.ArgTypes[i].(*ir.TensorType)
		if !ok || t.DType != ir.Float32 || len(t.Shape) < 2 || t.Shape.NumElements() == 0 {
			return false
		}
	}
	return !c.Attrs.Bool("transpose_b")
}

// matmulRowAxis is the output axis a register tile spans several of: the
// row axis (second to last), or, when it has extent 1, the last batch axis
// with a larger extent (a [B, 1, K] x [K, N] product then reuses each
// loaded row of the weight for several batch rows).
func matmulRowAxis(shape ir.Shape) int {
	r := len(shape)
	if shape[r-2] > 1 {
		return r - 2
	}
	for d := r - 3; d >= 0; d-- {
		if shape[d] > 1 {
			return d
		}
	}
	return r - 2
}

// matmulTileRows picks the rows of a register tile: the largest of
// 8 (4 without wide vectors), 6, 4, 3, 2 that divides m (1 when none does).
func matmulTileRows(m int64, wide bool) int64 {
	for _, f := range []int64{8, 6, 4, 3, 2} {
		if (wide || f <= 4) && m%f == 0 {
			return f
		}
	}
	return 1
}

// matmulTileCols picks the columns of a register tile: 32 (wide vectors
// only, and n >= 64) or 16 when they divide n, n itself when it is at most
// 16, 8 when that divides n, and 16 (with a ragged last tile) otherwise.
func matmulTileCols(n int64, wide bool) int64 {
	switch {
	case wide && n%32 == 0 && n >= 64:
		return 32
	case n%16 == 0:
		return 16
	case n <= 16:
		return n
	case n%8 == 0:
		return 8
	}
	return 16
}

// matmulWideVectors reports whether the target's processor has 512-bit
// vectors and 32 vector registers (AVX-512), for which the register tile
// is 8 x 32; other targets get 4 x 16 so that the accumulators fit in 16
// registers.
func matmulWideVectors(t *targets.Target) bool {
	p := t.Processor()
	return p.VectorBits >= 512 && p.VectorRegs >= 32
}

// scheduleMatMulCPU is the register-tiled schedule described above. It
// falls back to the generic schedule for groups it does not handle (more
// than one output, or an epilogue whose shape differs from the product's).
func scheduleMatMulCPU(c *strategy.Call, s *te.Schedule, outs, anchor []*te.Tensor) error {
	if len(anchor) != 1 || len(outs) != 1 {
		return scheduleConv(c, s, outs, anchor)
	}
	mm, out := anchor[0], outs[0]
	mmOp, ok := mm.Op.(*te.ComputeOp)
	if !ok || !mmOp.IsReduce() || len(mm.Shape) < 2 || !sameShape(mm.Shape, out.Shape) {
		return scheduleConv(c, s, outs, anchor)
	}
	if _, ok := out.Op.(*te.ComputeOp); !ok {
		return scheduleConv(c, s, outs, anchor)
	}
	s.AutoInlineInjective()
	var acc *te.Stage
	st := s.Stage(out)
	if out == mm {
		acc = s.Stage(s.CacheWrite(mm, tir.ScopeLocal))
		st = s.Stage(out)
	} else {
		acc = s.Stage(mm)
		acc.SetScope(tir.ScopeLocal)
	}
	r := len(mm.Shape)
	row := matmulRowAxis(mm.Shape)
	wide := matmulWideVectors(c.Target)
	mr, nr := matmulTileRows(mm.Shape[row], wide), matmulTileCols(mm.Shape[r-1], wide)
	panel, panels := int64(0), int64(1)
	if c.Op == op.MatMulPacked {
		// One register tile's columns are one panel of the packed weight:
		// contiguous along k; with one row, several panels (matmulPanels).
		ws := c.ArgTypes[1].(*ir.TensorType).Shape
		panel = ws[2]
		nr = panel
		if mr == 1 && mm.Shape[row] == 1 {
			panels = matmulPanels(ws[0], panel)
		} else {
			panels = matmulRowPanels(c.Target, mr, ws[0], panel)
		}
		nr = panels * panel
	}
	axes := st.Axis()
	mo, mi := st.Split(axes[row], mr)
	no, ni := st.Split(axes[r-1], nr)
	var order []*te.IterVar
	for d := 0; d < r-1; d++ {
		if d != row {
			order = append(order, axes[d])
		}
	}
	order = append(order, mo, no, mi)
	if panels > 1 {
		pi, bi := st.Split(ni, panel)
		order = append(order, pi, bi)
		ni = bi
	} else {
		order = append(order, ni)
	}
	st.Reorder(order...)
	// The first loop with two or more iterations runs in parallel. Loops
	// are not fused: the floordiv/floormod index arithmetic fusion brings
	// keeps compilers from vectorising the tile loops.
	parallelFirst(st, order[:len(order)-2])
	if nr > 1 {
		st.Vectorize(ni)
	}
	acc.ComputeAt(st, no)
	if c.Target.Processor().VectorRegs == 16 && transcendentalEpilogue(out, mm) {
		// The reduction in a function of its own (see
		// transcendentalEpilogue).
		acc.Outline(acc.ReduceAxes()[0])
	}
	aAxes := acc.Axis()
	var aOrder []*te.IterVar
	aOrder = append(aOrder, acc.ReduceAxes()...)
	for d := 0; d < r-1; d++ {
		if d != row {
			aOrder = append(aOrder, aAxes[d])
		}
	}
	if panels > 1 {
		// One accumulator vector per panel, each its own chain of
		// multiply-adds along k.
		ap, ab := acc.Split(aAxes[r-1], panel)
		aOrder = append(aOrder, aAxes[row], ap, ab)
		acc.Reorder(aOrder...)
		acc.Unroll(aAxes[row])
		acc.Unroll(ap)
		acc.Vectorize(ab)
		return s.Err()
	}
	aOrder = append(aOrder, aAxes[row], aAxes[r-1])
	acc.Reorder(aOrder...)
	acc.Unroll(aAxes[row])
	if nr > 1 {
		acc.Vectorize(aAxes[r-1])
	}
	return s.Err()
}

// transcendentalEpilogue reports whether the elementwise stages from the
// product mm to the group's output out compute an exponential, tanh, erf,
// logarithm, power or trigonometric function. Where the target has 16
// vector registers (AVX2), such an epilogue and the product's reduction in
// one C function outgrow the registers: in net_gpt2's 256 -> 1024 product
// with its tanh GELU, gcc kept the weight pointer of the reduction's
// innermost loop on the stack (a load and a store per step), and the
// function took 1.10-1.41 ms in a C harness, 1.08-1.09 with the reduction
// outlined (te.Stage.Outline). With a short epilogue (bias, residual add)
// outlining cost 5-11 %, and with 32 vector registers (AVX-512) 2 % on the
// GELU product, so only the two together outline.
func transcendentalEpilogue(out, mm *te.Tensor) bool {
	seen := map[*te.Tensor]bool{}
	var walk func(t *te.Tensor) bool
	walk = func(t *te.Tensor) bool {
		if t == mm || seen[t] {
			return false
		}
		seen[t] = true
		c, ok := t.Op.(*te.ComputeOp)
		if !ok {
			return false
		}
		if callsMath(c.Body, transcendental) {
			return true
		}
		for _, in := range c.InputTensors() {
			if walk(in) {
				return true
			}
		}
		return false
	}
	return walk(out)
}

// transcendental reports whether intrinsic op is a function computed by a
// polynomial or series in kiln's C (exp, tanh, erf, ...): one of
// costlyMath but the square roots, which are one instruction.
func transcendental(op tir.Intrinsic) bool {
	return costlyMath[op] && op != tir.IntrinSqrt && op != tir.IntrinRsqrt
}

// matmulPanels is how many column panels of width panel (of npanels) one
// register tile of a single-row packed product spans: the most, up to 64
// columns, that divide the panels. With one panel per tile the row's
// product is one accumulator vector whose multiply-adds along k wait on
// each other (mobilenet_v2's 1280 -> 1000 classifier in panels of 8:
// 1280 dependent multiply-adds per panel); with several, one chain per
// panel overlaps them. Each column's sum keeps its order along k.
func matmulPanels(npanels, panel int64) int64 {
	return panelsUpTo(npanels, max(64/panel, 1))
}

// panelsUpTo is the most panels, at most k, that divide npanels.
func panelsUpTo(npanels, k int64) int64 {
	for ; k > 1; k-- {
		if npanels%k == 0 {
			return k
		}
	}
	return 1
}

// matmulRowPanels is how many column panels of width panel (of npanels)
// one register tile of mr rows spans: the most, up to 64 columns, that
// divide the panels and keep the tile's accumulator vectors within
// matmulMaxAccumulators of the target's registers. With one panel per
// tile, 4 rows of 16 columns were 4 accumulator vectors on AVX-512, each
// waiting on its own last multiply-add: ConvNeXt's [784, 768] x [768,
// 192] product took 2.57 ms (C harness, one Emerald Rapids core), at
// half the multiply-add rate.
func matmulRowPanels(t *targets.Target, mr, npanels, panel int64) int64 {
	p := t.Processor()
	lanes := int64(p.VectorBits / 32)
	if lanes < 1 || mr < 1 {
		return 1
	}
	vecs := max(panel/lanes, 1)
	return panelsUpTo(npanels, min(max(64/panel, 1), matmulMaxAccumulators(p.VectorRegs)/(mr*vecs)))
}

// matmulMaxAccumulators is the most accumulator vectors of a register
// tile with regs vector registers: three quarters of them, the rest for
// the weight's vectors and the broadcast row values.
func matmulMaxAccumulators(regs int) int64 {
	return int64(regs) * 3 / 4
}

// sameShape reports whether two shapes are equal.
func sameShape(a, b ir.Shape) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
