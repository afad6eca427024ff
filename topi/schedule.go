package topi

import (
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// parallelGrain is the least number of outer iterations worth running in
// parallel; below it the loop stays serial.
const parallelGrain = 4

// parallelMinOuter is the fewest iterations of an injective stage's
// parallel loop when the loops inside it can be fused into it: a static
// split of them among threads is then within a few per cent of even.
const parallelMinOuter = 16

// vectorWidth is the inner split factor used for vectorisable loops (16
// float32 lanes = one AVX-512 register; compilers narrow it as needed).
const vectorWidth = 16

// ScheduleInjective is the generic schedule of a group of injective and
// elementwise computations: every non-output injective stage is inlined, and
// each output stage gets flattenParallel.
//
// One exception to inlining: a small stage (at most 1/vectorWidth of the
// largest output) whose body calls a costly math function (sqrt, exp,
// ...) stays at the root. It is typically a broadcast operand, such as
// sqrt(variance + eps) in a decomposed layer norm; inlined, it would be
// recomputed for every element of the output, and the call (with its
// errno path) would keep the output loop from vectorising.
func ScheduleInjective(_ *strategy.Call, s *te.Schedule, outs, _ []*te.Tensor) error {
	inlineExceptCostlyBroadcasts(s, outs)
	for _, o := range outs {
		if _, ok := o.Op.(*te.ComputeOp); !ok {
			continue
		}
		flattenParallel(s.Stage(o))
	}
	return s.Err()
}

// parallelFirst makes the first of axes with two or more iterations the
// stage's parallel loop (none when all have one).
func parallelFirst(st *te.Stage, axes []*te.IterVar) {
	for _, a := range axes {
		if a.Extent >= 2 {
			st.Parallel(a)
			return
		}
	}
}

// flattenParallel schedules an injective output stage. When the last axis
// has at least vectorWidth/2 iterations the loop nest stays unfused: the
// last axis is vectorised (split into an inner loop of vectorWidth first
// when it is a multiple of it), and the first loop with two or more
// iterations runs in parallel. Fusing would bring floordiv/floormod index
// arithmetic into the inner loop, which costs more than the short vectors
// it avoids. Otherwise (short rows) all data-parallel axes are fused, a
// vectorised inner loop is split off when the extent allows and the rest
// is parallelised. A stage writing bytes first fuses rows shorter than
// byteMinRow with the axis before them, and splits off vectorised loops
// of byteMinRow instead of vectorWidth.
func flattenParallel(st *te.Stage) {
	axes := st.Axis()
	if len(axes) == 0 || len(st.ReduceAxes()) > 0 {
		return
	}
	vw := int64(vectorWidth)
	if writesBytes(st) {
		// Bytes: vectorised loops of at least byteMinRow iterations, and
		// rows shorter than that fused with the axis before them (see
		// byteMinRow).
		vw = byteMinRow
		if len(axes) >= 2 && axes[len(axes)-1].Extent < byteMinRow {
			fused := st.Fuse(axes[len(axes)-2], axes[len(axes)-1])
			axes = append(axes[:len(axes)-2:len(axes)-2], fused)
		}
	}
	if last := axes[len(axes)-1]; len(axes) >= 2 && last.Extent >= vectorWidth/2 {
		total := int64(1)
		for _, a := range axes {
			total *= a.Extent
		}
		loops := axes[: len(axes)-1 : len(axes)-1]
		if last.Extent%vw == 0 {
			outer, inner := st.Split(last, vw)
			st.Vectorize(inner)
			loops = append(loops, outer)
		} else {
			st.Vectorize(last)
		}
		if total < parallelGrain*vectorWidth {
			return
		}
		for k, a := range loops {
			if a.Extent < 2 {
				continue
			}
			// A short first loop (an image's three channels) is fused
			// with the loops inside it until there are iterations
			// enough to share evenly among threads: split three ways,
			// two threads did two channels and one; an int8 model's
			// input quantization on 3x224x224 took 0.09 ms at 2 threads
			// against 0.06 at 1.
			for _, b := range loops[k+1:] {
				if a.Extent >= parallelMinOuter {
					break
				}
				a = st.Fuse(a, b)
			}
			st.Parallel(a)
			break
		}
		return
	}
	fused := axes[0]
	for _, a := range axes[1:] {
		fused = st.Fuse(fused, a)
	}
	if fused.Extent >= 2*vw && fused.Extent%vw == 0 {
		outer, inner := st.Split(fused, vw)
		st.Vectorize(inner)
		if outer.Extent >= parallelGrain {
			st.Parallel(outer)
		}
		return
	}
	if fused.Extent >= parallelGrain*vectorWidth {
		st.Parallel(fused)
	}
}

// byteMinRow is the fewest iterations of an injective stage's vectorised
// loop when it writes bytes: a 256-bit vector holds 32 of them, and gcc
// does not vectorise a loop of fewer iterations that also widens them to
// 64 bits (an int8 requantization's products: mobilenet_v2's int8
// residual adds ran scalar on rows of 28, 14 and 7 and on the 16-column
// pieces a split made of them). Shorter rows are fused with the axis
// before them; the outputs' rows are contiguous, so the fused loop
// indexes them without division.
const byteMinRow = 32

// writesBytes reports whether st's output holds 8-bit elements.
func writesBytes(st *te.Stage) bool {
	co, ok := st.Op().(*te.ComputeOp)
	return ok && len(co.Outputs()) > 0 && co.Outputs()[0].DType.Size() == 1
}

// ScheduleReduce is the generic schedule of a group whose anchor is a
// reduction: injective producers are inlined, the reduction's data-parallel
// axes are fused and run in parallel, and injective consumers (outputs other
// than the reduction) get the injective treatment.
func ScheduleReduce(_ *strategy.Call, s *te.Schedule, outs, anchor []*te.Tensor) error {
	s.AutoInlineInjective()
	for _, a := range anchor {
		st := s.Stage(a)
		if co, ok := a.Op.(*te.ComputeOp); ok && co.Tag == laneTag {
			continue // scheduled with its consumer below
		}
		if co, ok := a.Op.(*te.ComputeOp); ok && co.Tag == outerReduceTag {
			scheduleOuterReduce(st)
			continue
		}
		axes := st.Axis()
		if len(axes) == 0 {
			continue
		}
		fused := axes[0]
		for _, ax := range axes[1:] {
			fused = st.Fuse(fused, ax)
		}
		if fused.Extent >= parallelGrain {
			st.Parallel(fused)
		}
	}
	for _, o := range outs {
		if isIn(o, anchor) {
			continue
		}
		if _, ok := o.Op.(*te.ComputeOp); ok {
			flattenParallel(s.Stage(o))
		}
	}
	scheduleLaneParts(s)
	return s.Err()
}

func isIn(t *te.Tensor, ts []*te.Tensor) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// inlineExceptCostlyBroadcasts inlines every injective stage as
// AutoInlineInjective does, except small stages with costly math calls
// (see ScheduleInjective), which stay at the root.
func inlineExceptCostlyBroadcasts(s *te.Schedule, outs []*te.Tensor) {
	isOut := map[te.Operation]bool{}
	var outElems int64
	for _, o := range outs {
		isOut[o.Op] = true
		outElems = max(outElems, o.Shape.NumElements())
	}
	externIn := map[te.Operation]bool{}
	for _, st := range s.Stages() {
		if ex, ok := st.Op().(*te.ExternOp); ok {
			for _, t := range ex.Inputs {
				externIn[t.Op] = true
			}
		}
	}
	for _, st := range s.Stages() {
		c, ok := st.Op().(*te.ComputeOp)
		if !ok || c.IsReduce() || isOut[c] || externIn[c] {
			continue
		}
		if c.Output.Shape.NumElements()*vectorWidth <= outElems && callsCostlyMath(c.Body) {
			continue
		}
		st.ComputeInline()
	}
}

// costlyMath lists the math intrinsics worth computing once rather than
// per element of a broadcast.
var costlyMath = map[tir.Intrinsic]bool{
	tir.IntrinExp: true, tir.IntrinExp2: true, tir.IntrinLog: true, tir.IntrinLog2: true, tir.IntrinLog10: true,
	tir.IntrinSqrt: true, tir.IntrinRsqrt: true, tir.IntrinTanh: true, tir.IntrinSigmoid: true, tir.IntrinErf: true,
	tir.IntrinSin: true, tir.IntrinCos: true, tir.IntrinTan: true, tir.IntrinAsin: true, tir.IntrinAcos: true,
	tir.IntrinAtan: true, tir.IntrinSinh: true, tir.IntrinCosh: true, tir.IntrinPow: true, tir.IntrinAtan2: true,
}

// callsCostlyMath reports whether e calls one of costlyMath.
func callsCostlyMath(e tir.PrimExpr) bool {
	return callsMath(e, func(op tir.Intrinsic) bool { return costlyMath[op] })
}

// callsMath reports whether e calls an intrinsic that which accepts.
func callsMath(e tir.PrimExpr, which func(tir.Intrinsic) bool) bool {
	found := false
	tir.Visit(e, func(n tir.Node) bool {
		if c, ok := n.(*tir.Call); ok && which(c.Op) {
			found = true
		}
		return !found
	})
	return found
}
