package topi

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// This file holds the tuned CPU convolutions, after TVM's x86
// conv2d_NCHWc and depthwise schedules:
//
//   - nn.contrib_conv2d_packed (a groups-1 conv2d whose weight the
//     alter_conv_layout pass repacked at compile time into blocks of B
//     output channels, [OC/B, IC, KH, KW, B]) computes a blocked result
//     [N, OC/B, OH, OW', B] whose innermost dimension, a block of output
//     channels, is the vector. A register tile of owT output columns x ocT
//     channel blocks is accumulated in a local buffer over the reduction
//     loops (ic, kh, kw), with the columns and blocks unrolled and the
//     block vectorised: per reduction step ocT vector loads of the weight,
//     owT scalar broadcasts of the input and ocT*owT fused multiply-adds.
//     The tile is computed at the tile loop of the group's output stage,
//     which stores it to NCHW with the fused epilogue (bias, relu,
//     residual add) applied on the way; (batch, channel tiles) or, when
//     there are few channel tiles, the output rows are the parallel loop.
//     With an FMA-capable -mcpu the accumulation uses fmaf, which gcc
//     turns into vector fused multiply-adds. Padding is materialised once
//     (a root stage), so the inner loops read without guards; the output
//     width is rounded up to a whole number of tiles (OW'), the padded
//     input covering the extra columns, which the output stage never
//     reads.
//   - depthwise nn.conv2d (groups = channels = output channels) computes
//     one output row at a time at the output stage's row loop, the kernel
//     window outside and the row vectorised, over a materialised padding.
//
// Both are float32 only; everything else uses the generic
// implementations. nn.contrib_conv2d_packed also has a generic
// implementation (any dtype, any target), so the rewritten graph compiles
// wherever nn.conv2d did.

func init() {
	must := func(o *op.Op, key strategy.Key, impl strategy.Implementation) {
		if err := strategy.Default.Add(o, key, impl); err != nil {
			panic(err)
		}
	}
	must(op.Conv2DPacked, strategy.ForKey("generic"), strategy.Implementation{
		Name: "nn.contrib_conv2d_packed.generic", PLevel: strategy.PLevelGeneric,
		Compute: computeConvPackedGeneric, Schedule: scheduleConv,
	})
	must(op.Conv2DPacked, strategy.ForKey("cpu"), strategy.Implementation{
		Name: "nn.contrib_conv2d_packed.cpu", PLevel: strategy.PLevelTuned,
		Compute: computeConvPackedCPU, Schedule: scheduleConvPackedCPU,
		Valid: func(c *strategy.Call) bool { return c.OutTensor().DType == ir.Float32 },
	})
	must(op.Conv2D, strategy.ForKey("cpu"), strategy.Implementation{
		Name: "nn.conv2d.depthwise.cpu", PLevel: strategy.PLevelTuned,
		Compute: computeDepthwiseCPU, Schedule: scheduleDepthwiseCPU,
		Valid: validDepthwiseCPU,
	})
}

// Tags of the stages the CPU convolution schedules look for.
const (
	tagPackedBlock = "conv2d_packed_block"
	tagPackedOut   = "conv2d_packed_nchw"
	tagCPUPad      = "injective,pad,conv_cpu_pad"
	tagDepthwise   = "depthwise_conv2d"
	tagDepthOut    = "depthwise_conv2d_out"
)

// computeConvPackedGeneric is nn.contrib_conv2d_packed as a plain
// convolution reading the packed weight: the portable fallback.
func computeConvPackedGeneric(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x, w := in[0], in[1]
	ot := c.OutTensor()
	win, err := nnNewWindow(c.Attrs, x.Shape, ot.Shape, w.Shape[2:4])
	if err != nil {
		return nil, fmt.Errorf("%s: %v", c.Op.Name, err)
	}
	b := tir.Idx(w.Shape[4])
	acc := nnAcc(ot.DType)
	rc := te.ReduceAxis(x.Shape[1], "rc")
	rk := nnReduceAxes(w.Shape[2:4], "rk")
	out := te.ComputeReduce(nnName(c)+"_acc", ot.Shape, te.Sum, []*te.IterVar{rc, rk[0], rk[1]}, func(i []tir.PrimExpr) tir.PrimExpr {
		hi, hc := win.index(0, i[2], rk[0].Var)
		wi, wc := win.index(1, i[3], rk[1].Var)
		xv := x.At(i[0], rc.Var, hi, wi)
		wv := w.At(tir.FloorDiv(i[1], b), rc.Var, rk[0].Var, rk[1].Var, tir.FloorMod(i[1], b))
		prod := tir.Mul(nnCast(acc, xv), nnCast(acc, wv))
		return nnGuard(nnAnd(append(hc, wc...)), prod, nnZero(acc))
	}, te.WithTag("conv"), te.WithAxisNames("n", "oc", "h", "w"))
	return []*te.Tensor{nnCastStage(out, ot.DType, nnName(c))}, nil
}

// parallelRows is the least number of (batch, channel tile) iterations
// the packed convolution runs in parallel; below it the output rows are
// the parallel loop.
const parallelRows = 4

// targetHasFMA reports whether C code for t may use fused multiply-add:
// its resolved processor (-mcpu, -mattr) has vector FMA. Without it (the
// portable default) fmaf would be a library call.
func targetHasFMA(t *targets.Target) bool { return t.Processor().FMA() }

// convSum is the reducer of the CPU convolutions: a sum whose
// multiply-accumulate steps become fused multiply-adds when fma is set.
func convSum(fma bool) te.Reducer {
	if !fma {
		return te.Sum
	}
	r := te.Sum
	r.Combine = func(acc, x tir.PrimExpr) tir.PrimExpr {
		if m, ok := x.(*tir.Binary); ok && m.Op == tir.OpMul && m.A.Type().IsFloat() {
			return tir.NewCall(tir.IntrinFma, m.A, m.B, acc)
		}
		return tir.Add(acc, x)
	}
	return r
}

// convGeom is the geometry of a 2-D convolution: kernel, strides,
// dilation, begin padding, output size.
type convGeom struct {
	kh, kw, sh, sw, dh, dw, ph, pw, oh, ow int64
}

func newConvGeom(c *strategy.Call, kh, kw int64) (convGeom, error) {
	s, pb, _, d, err := op.SpatialAttrs(c.Attrs, 2)
	if err != nil {
		return convGeom{}, fmt.Errorf("%s: %v", c.Op.Name, err)
	}
	ot := c.OutTensor()
	return convGeom{kh: kh, kw: kw, sh: s[0], sw: s[1], dh: d[0], dw: d[1], ph: pb[0], pw: pb[1], oh: ot.Shape[2], ow: ot.Shape[3]}, nil
}

// padInput returns x padded for a convolution of geometry g computing
// owp output columns: begin padding as the attributes say, end padding
// as far as the windows reach (never negative). Without any padding x is
// returned itself.
func padInput(x *te.Tensor, g convGeom, owp int64) *te.Tensor {
	h, w := x.Shape[2], x.Shape[3]
	needH := (g.oh-1)*g.sh + (g.kh-1)*g.dh + 1
	needW := (owp-1)*g.sw + (g.kw-1)*g.dw + 1
	eh, ew := max(needH-g.ph-h, 0), max(needW-g.pw-w, 0)
	if g.ph == 0 && g.pw == 0 && eh == 0 && ew == 0 {
		return x
	}
	p := te.Pad(x, []int64{0, 0, g.ph, g.pw}, []int64{0, 0, eh, ew}, nnZero(x.DType), "conv_pad")
	// Re-tag the pad so the schedules can find it.
	pop := p.Op.(*te.ComputeOp)
	pop.Tag = tagCPUPad
	return p
}

// packedTile chooses the register tile of the packed convolution: owT
// output columns (the padded width owp is a multiple of it) and ocT
// blocks of output channels (dividing ocb).
func packedTile(ow, ocb int64) (owT, ocT, owp int64) {
	owT, owp = ow, ow
	if ow > 16 {
		// The tile width in [8, 16] that pads the row least, the wider on
		// ties.
		owp = -1
		for t := int64(16); t >= 8; t-- {
			p := (ow + t - 1) / t * t
			if owp < 0 || p < owp {
				owT, owp = t, p
			}
		}
	}
	ocT = 1
	for t := int64(4); t >= 2; t-- {
		if ocb%t == 0 && t*owT <= 28 {
			ocT = t
			break
		}
	}
	return owT, ocT, owp
}

func computeConvPackedCPU(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x, w := in[0], in[1]
	ot := c.OutTensor()
	g, err := newConvGeom(c, w.Shape[2], w.Shape[3])
	if err != nil {
		return nil, err
	}
	ocb, b := w.Shape[0], w.Shape[4]
	_, _, owp := packedTile(g.ow, ocb)
	xp := padInput(x, g, owp)
	rc := te.ReduceAxis(x.Shape[1], "ic")
	rh := te.ReduceAxis(g.kh, "kh")
	rw := te.ReduceAxis(g.kw, "kw")
	blk := te.ComputeReduce(nnName(c)+"_block", ir.Shape{x.Shape[0], ocb, g.oh, owp, b}, convSum(targetHasFMA(c.Target)), []*te.IterVar{rc, rh, rw}, func(i []tir.PrimExpr) tir.PrimExpr {
		hi := tir.Add(tir.Mul(i[2], tir.Idx(g.sh)), tir.Mul(rh.Var, tir.Idx(g.dh)))
		wi := tir.Add(tir.Mul(i[3], tir.Idx(g.sw)), tir.Mul(rw.Var, tir.Idx(g.dw)))
		if xp == x {
			// Unpadded: the padded width never exceeds the input here.
			hi = tir.Sub(hi, tir.Idx(g.ph))
			wi = tir.Sub(wi, tir.Idx(g.pw))
		}
		return tir.Mul(xp.At(i[0], rc.Var, hi, wi), w.At(i[1], rc.Var, rh.Var, rw.Var, i[4]))
	}, te.WithTag(tagPackedBlock), te.WithAxisNames("n", "ocb", "oh", "ow", "ocv"))
	bb := tir.Idx(b)
	out := te.Compute(nnName(c), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		return blk.At(i[0], tir.FloorDiv(i[1], bb), i[2], i[3], tir.FloorMod(i[1], bb))
	}, te.WithTag(tagPackedOut), te.WithAxisNames("n", "oc", "oh", "ow"))
	return []*te.Tensor{out}, nil
}

// stageByTag returns the stages whose compute op has the given tag.
func stageByTag(s *te.Schedule, tag string) []*te.Stage {
	var out []*te.Stage
	for _, st := range s.Stages() {
		if c, ok := st.Op().(*te.ComputeOp); ok && c.Tag == tag {
			out = append(out, st)
		}
	}
	return out
}

// schedulePad computes a materialised padding at root, its leading axes
// fused into a parallel loop.
func schedulePad(s *te.Schedule) {
	for _, st := range stageByTag(s, tagCPUPad) {
		st.ComputeRoot()
		nnParallelOuter(st, nnParallelWork)
	}
}

// epilogueStage returns the stage that stores the convolution's NCHW
// result: the only output of the group when it has the anchor's shape and
// every other compute stage (except the pad and the given reduction) is
// inlined, or nil when the group has another structure.
func epilogueStage(s *te.Schedule, outs []*te.Tensor, anchor *te.Tensor, red *te.Stage) *te.Stage {
	if len(outs) != 1 || !outs[0].Shape.Equal(anchor.Shape) {
		return nil
	}
	o := s.Stage(outs[0])
	for _, st := range s.Stages() {
		c, ok := st.Op().(*te.ComputeOp)
		if !ok {
			return nil
		}
		if st == o || st == red || c.Tag == tagCPUPad {
			continue
		}
		if c.IsReduce() {
			return nil
		}
	}
	return o
}

func scheduleConvPackedCPU(c *strategy.Call, s *te.Schedule, outs, anchor []*te.Tensor) error {
	if len(anchor) != 1 {
		return fmt.Errorf("%s: want one anchor output", c.Op.Name)
	}
	blkT := anchor[0].Op.InputTensors()[0]
	s.AutoInlineInjective()
	schedulePad(s)
	bs := s.Stage(blkT)
	b := blkT.Shape[4]
	owT, ocT, _ := packedTile(c.OutTensor().Shape[3], blkT.Shape[1])
	o := epilogueStage(s, outs, anchor[0], bs)
	if o == nil {
		// Unusual group: the blocked result at root, tiled the same way;
		// the other outputs get the injective treatment.
		ax := bs.Axis()
		ocO, ocI := bs.Split(ax[1], ocT)
		owO, owI := bs.Split(ax[3], owT)
		bs.Reorder(ax[0], ocO, ax[2], owO, ocI, owI, ax[4])
		f := bs.Fuse(bs.Fuse(ax[0], ocO), ax[2])
		bs.Parallel(f)
		tileBlock(bs, ocI, owI, ax[4])
		for _, t := range outs {
			if _, ok := t.Op.(*te.ComputeOp); ok && t != blkT {
				flattenParallel(s.Stage(t))
			}
		}
		return s.Err()
	}
	ax := o.Axis()
	ocO, ocI := o.Split(ax[1], b*ocT)
	owO, owI := o.Split(ax[3], owT)
	// The tile is stored column by column with the channels vectorised:
	// contiguous reads of the tile (and of per-channel epilogue operands),
	// strided stores. (Vectorising the columns instead needs a strided
	// gather from the tile, which gcc does not vectorise.)
	// The parallel loop is never fused with a loop that the inner loops'
	// indices need: the floordiv/floormod that would recover them inside
	// the vectorised loops keep gcc from vectorising them cleanly (it
	// if-converts the rounding branches into masked gathers). With enough
	// channel tiles the loop over (batch, channel tiles) is parallel and
	// the rows serial inside, so a tile's weights stay in cache across
	// the rows; with few channel tiles (small weights) the rows are the
	// parallel loop.
	if ax[0].Extent*ocO.Extent >= parallelRows {
		o.Reorder(ax[0], ocO, ax[2], owO, owI, ocI)
		o.Parallel(o.Fuse(ax[0], ocO))
	} else {
		o.Reorder(ax[0], ax[2], ocO, owO, owI, ocI)
		o.Parallel(o.Fuse(ax[0], ax[2]))
	}
	o.Vectorize(ocI)
	bs.ComputeAt(o, owO)
	bs.SetScope(tir.ScopeLocal)
	bax := bs.Axis()
	tileBlock(bs, bax[1], bax[3], bax[4])
	return s.Err()
}

// tileBlock orders the loops of the blocked reduction for the register
// tile: batch and row (extent 1 in a tile), the reduction, then the
// channel blocks and columns unrolled and the block vectorised.
func tileBlock(bs *te.Stage, ocb, ow, ocv *te.IterVar) {
	leaves := bs.Leaves()
	red := bs.ReduceAxes()
	var rest []*te.IterVar
	for _, l := range leaves {
		if l != ocb && l != ow && l != ocv && l.Kind != te.Reduce {
			rest = append(rest, l)
		}
	}
	order := append(append(rest, red...), ocb, ow, ocv)
	bs.Reorder(order...)
	bs.Unroll(ocb)
	bs.Unroll(ow)
	bs.Vectorize(ocv)
}

// validDepthwiseCPU accepts float32 2-D convolutions with one input and
// one output channel per group.
func validDepthwiseCPU(c *strategy.Call) bool {
	if c.OutTensor().DType != ir.Float32 || len(c.ArgTypes) != 2 {
		return false
	}
	x, w := c.ArgTensor(0), c.ArgTensor(1)
	if len(x.Shape) != 4 || len(w.Shape) != 4 {
		return false
	}
	g, ok := c.Attrs["groups"].(int64)
	return ok && g > 1 && g == x.Shape[1] && g == w.Shape[0] && w.Shape[1] == 1
}

func computeDepthwiseCPU(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x, w := in[0], in[1]
	ot := c.OutTensor()
	g, err := newConvGeom(c, w.Shape[2], w.Shape[3])
	if err != nil {
		return nil, err
	}
	xp := padInput(x, g, g.ow)
	rh := te.ReduceAxis(g.kh, "kh")
	rw := te.ReduceAxis(g.kw, "kw")
	conv := te.ComputeReduce(nnName(c)+"_dw", ot.Shape, convSum(targetHasFMA(c.Target)), []*te.IterVar{rh, rw}, func(i []tir.PrimExpr) tir.PrimExpr {
		hi := tir.Add(tir.Mul(i[2], tir.Idx(g.sh)), tir.Mul(rh.Var, tir.Idx(g.dh)))
		wi := tir.Add(tir.Mul(i[3], tir.Idx(g.sw)), tir.Mul(rw.Var, tir.Idx(g.dw)))
		if xp == x {
			hi = tir.Sub(hi, tir.Idx(g.ph))
			wi = tir.Sub(wi, tir.Idx(g.pw))
		}
		return tir.Mul(xp.At(i[0], i[1], hi, wi), w.At(i[1], tir.Idx(0), rh.Var, rw.Var))
	}, te.WithTag(tagDepthwise), te.WithAxisNames("n", "c", "oh", "ow"))
	out := te.Compute(nnName(c), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		return conv.At(i...)
	}, te.WithTag(tagDepthOut), te.WithAxisNames("n", "c", "oh", "ow"))
	return []*te.Tensor{out}, nil
}

func scheduleDepthwiseCPU(c *strategy.Call, s *te.Schedule, outs, anchor []*te.Tensor) error {
	if len(anchor) != 1 {
		return fmt.Errorf("%s: want one anchor output", c.Op.Name)
	}
	convT := anchor[0].Op.InputTensors()[0]
	s.AutoInlineInjective()
	schedulePad(s)
	cs := s.Stage(convT)
	o := epilogueStage(s, outs, anchor[0], cs)
	if o == nil {
		nnParallelOuter(cs, nnParallelWork)
		for _, t := range outs {
			if _, ok := t.Op.(*te.ComputeOp); ok && t != convT {
				flattenParallel(s.Stage(t))
			}
		}
		return s.Err()
	}
	// Parallel over (batch, channel), rows serial inside (see the packed
	// schedule for why the rows are not fused into the parallel loop).
	ax := o.Axis()
	o.Parallel(o.Fuse(ax[0], ax[1]))
	o.Vectorize(ax[3])
	cs.ComputeAt(o, ax[2])
	cs.SetScope(tir.ScopeLocal)
	cax := cs.Axis()
	red := cs.ReduceAxes()
	cs.Reorder(append(append(cax[:3:3], red...), cax[3])...)
	cs.Vectorize(cax[3])
	return s.Err()
}
