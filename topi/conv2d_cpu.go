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
		Space: spaceConvPackedCPU,
	})
	must(op.Conv2DWinograd, strategy.ForKey("generic"), strategy.Implementation{
		Name: "nn.contrib_conv2d_winograd.generic", PLevel: strategy.PLevelGeneric,
		Compute: computeWinogradGeneric, Schedule: scheduleConv,
	})
	must(op.Conv2DWinograd, strategy.ForKey("cpu"), strategy.Implementation{
		Name: "nn.contrib_conv2d_winograd.cpu", PLevel: strategy.PLevelTuned,
		Compute: computeWinogradCPU, Schedule: scheduleWinogradCPU,
		Valid: func(c *strategy.Call) bool {
			return c.OutTensor().DType == ir.Float32 && len(c.OutTensor().Shape) == 4 && wgFits(c.OutTensor().Shape[3])
		},
	})
	must(op.Conv2D, strategy.ForKey("cpu"), strategy.Implementation{
		Name: "nn.conv2d.grouped.cpu", PLevel: strategy.PLevelTuned,
		Compute: computeGroupedCPU, Schedule: scheduleGroupedCPU,
		Valid: validGroupedCPU,
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
		if _, ok := st.Op().(*te.ExternOp); ok {
			continue // at root: a padding stage
		}
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

// validGroupedCPU accepts the float32 2-D convolutions the packed and
// depthwise implementations do not take: grouped convolutions (groups
// dividing both channel counts) and groups-1 convolutions whose weight
// was not packed (not constant, or output channels not a multiple of 8).
func validGroupedCPU(c *strategy.Call) bool {
	if c.OutTensor().DType != ir.Float32 || len(c.ArgTypes) != 2 || validDepthwiseCPU(c) {
		return false
	}
	x, w := c.ArgTensor(0), c.ArgTensor(1)
	if len(x.Shape) != 4 || len(w.Shape) != 4 || x.DType != ir.Float32 || w.DType != ir.Float32 {
		return false
	}
	g, ok := c.Attrs["groups"].(int64)
	return ok && g >= 1 && w.Shape[0]%g == 0 && x.Shape[1] == g*w.Shape[1]
}
