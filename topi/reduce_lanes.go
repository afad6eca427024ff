package topi

import (
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// This file holds the lane-split form of a reduction over a contiguous
// (last) axis. A plain reduction r = Σ_k f(k) is one chain of dependent
// adds (or max): C compilers must keep its order and cannot vectorise it,
// so a row of n elements costs n times the add latency. Split into L
// partial results,
//
//	part[row, l] = Σ_{ko} f(ko*L + l)      (l < L, ko < floor(n/L))
//	r[row]       = Σ_l part[row, l] + Σ_{t < n mod L} f(L*floor(n/L) + t)
//
// the first stage is a vectorisable loop over l inside the loop over ko
// (L independent accumulators: two vectors of the target), and the second
// adds L numbers. The order of the additions is different from the
// serial one — and it is the order the TIR defines, so generated code
// still equals the interpreter bit for bit; against the reference
// executor the results agree within float rounding as every reduction
// order does. Max and min are exact in any order.

// laneTag marks the partial stage of a lane-split reduction; its last
// data-parallel axis is the lane, and its consumer is the final stage.
const laneTag = "lane_partial"

// reduceLanes is the number of partial results of a lane-split reduction
// for processor p: two vectors of float32, at least 4.
func reduceLanes(p *targets.Processor) int64 {
	return int64(max(4, 2*p.Lanes(32)))
}

// laneReduce declares out[row...] = r over k < n of body(row, k) for a
// reduction along a contiguous axis, lane-split when n is at least twice
// the lane count (else a plain reduction). out has shape rows; body is
// called with indices k < n only. tag is the final stage's tag.
func laneReduce(name string, rows ir.Shape, dt ir.DType, n, lanes int64, r te.Reducer, tag string, body func(row []tir.PrimExpr, k tir.PrimExpr) tir.PrimExpr) *te.Tensor {
	if lanes < 2 || n < 2*lanes {
		k := te.ReduceAxis(n, "k")
		return te.ComputeReduce(name, rows, r, []*te.IterVar{k}, func(i []tir.PrimExpr) tir.PrimExpr {
			return body(i, k.Var)
		}, te.WithTag(tag))
	}
	// The partial stage takes the full chunks of lanes only, so that its
	// loads are contiguous; the rem elements past them join the final
	// stage, which adds them after the lanes (an index clamped in the hot
	// loop made gcc assemble every vector from scalar loads).
	rem := n % lanes
	nfull := n - rem
	ko := te.ReduceAxis(nfull/lanes, "ko")
	pshape := append(rows.Clone(), lanes)
	part := te.ComputeReduce(name+"_lanes", pshape, r, []*te.IterVar{ko}, func(i []tir.PrimExpr) tir.PrimExpr {
		row := i[:len(i)-1]
		return body(row, tir.Add(tir.Mul(ko.Var, tir.Idx(lanes)), i[len(i)-1]))
	}, te.WithTag(laneTag))
	// The L partial results are folded to L/4 by a second vectorised
	// stage before the final, serial sum: its chain of dependent adds is
	// then L/4 + rem long instead of L + rem.
	if folded := lanes / 4; folded >= 2 && lanes%folded == 0 {
		t := te.ReduceAxis(lanes/folded, "t")
		from := part
		part = te.ComputeReduce(name+"_fold", append(rows.Clone(), folded), r, []*te.IterVar{t}, func(i []tir.PrimExpr) tir.PrimExpr {
			row := i[:len(i)-1]
			return from.At(append(append([]tir.PrimExpr(nil), row...), tir.Add(tir.Mul(t.Var, tir.Idx(folded)), i[len(i)-1]))...)
		}, te.WithTag(laneTag))
		lanes = folded
	}
	l := te.ReduceAxis(lanes+rem, "l")
	return te.ComputeReduce(name, rows, r, []*te.IterVar{l}, func(i []tir.PrimExpr) tir.PrimExpr {
		if rem == 0 {
			return part.At(append(append([]tir.PrimExpr(nil), i...), l.Var)...)
		}
		lane := part.At(append(append([]tir.PrimExpr(nil), i...), tir.Min(l.Var, tir.Idx(lanes-1)))...)
		tail := body(i, tir.Add(tir.Idx(nfull), tir.Max(tir.Sub(l.Var, tir.Idx(lanes)), tir.Idx(0))))
		return tir.NewSelect(tir.LT(l.Var, tir.Idx(lanes)), lane, tail)
	}, te.WithTag(tag))
}

// scheduleLaneParts schedules every lane-split partial stage of s: it is
// computed inside the innermost data-parallel loop of its consumer (the
// final stage, whose loops the caller schedules first), with the lane
// loop innermost and vectorised inside the loop over ko, so its L
// accumulators are one small local buffer. A consumer with no
// data-parallel loop (a reduction to a scalar) leaves the partial stage
// at the root, its own row loop parallel when long enough.
func scheduleLaneParts(s *te.Schedule) {
	for _, st := range s.Stages() {
		if !isLanePart(st) {
			continue
		}
		axes := st.Axis()
		lane := axes[len(axes)-1]
		order := append(append([]*te.IterVar(nil), axes[:len(axes)-1]...), st.ReduceAxes()[0], lane)
		// Where it is computed: feeding the fold, inside the fold's last
		// row loop (before the fold's own loops over t and the lanes);
		// feeding the final stage, inside its innermost data loop.
		var at *te.Stage
		var loop *te.IterVar
		if consumer := laneConsumer(s, st); isLanePart(consumer) {
			if caxes := consumer.Axis(); len(caxes) > 1 {
				at, loop = consumer, caxes[len(caxes)-2]
			}
		} else if consumer != nil {
			if leaves := dataLeaves(consumer); len(leaves) > 0 {
				at, loop = consumer, leaves[len(leaves)-1]
			}
		}
		if at != nil && len(axes) > 1 {
			st.ComputeAt(at, loop)
			st.Reorder(order...)
			st.Vectorize(lane)
			continue
		}
		rows := axes[:len(axes)-1]
		st.Reorder(order...)
		if len(rows) > 0 {
			fused := rows[0]
			for _, a := range rows[1:] {
				fused = st.Fuse(fused, a)
			}
			if fused.Extent >= parallelGrain {
				st.Parallel(fused)
			}
		}
		st.Vectorize(lane)
	}
}

// isLanePart reports whether st (nil: no) is a partial stage of a
// lane-split reduction (the partial sums or their fold).
func isLanePart(st *te.Stage) bool {
	if st == nil {
		return false
	}
	cop, ok := st.Op().(*te.ComputeOp)
	return ok && cop.Tag == laneTag
}

// laneConsumer is the stage reading the partial stage st (the fold or the
// final reduction), or nil.
func laneConsumer(s *te.Schedule, st *te.Stage) *te.Stage {
	t := st.Op().Outputs()[0]
	for _, c := range s.Stages() {
		cop, ok := c.Op().(*te.ComputeOp)
		if !ok {
			continue
		}
		for _, in := range cop.InputTensors() {
			if in == t {
				return c
			}
		}
	}
	return nil
}

// dataLeaves are the data-parallel leaf loops of st, outermost first.
func dataLeaves(st *te.Stage) []*te.IterVar {
	var out []*te.IterVar
	for _, lf := range st.Leaves() {
		if lf.Kind == te.DataPar {
			out = append(out, lf)
		}
	}
	return out
}

// outerReduceTag marks a reduction over axes other than the input's last
// (contiguous) one, whose output's last axis walks that contiguous axis:
// a column sum or mean. Reduced with its own loops innermost, every step
// would read a new row (a strided access) and recompute whatever
// per-row value was inlined into it; scheduleOuterReduce instead runs the
// reduce loops outside the output's last axis and vectorises that axis,
// so one pass reads whole rows.
const outerReduceTag = "comm_reduce_outer"

// scheduleOuterReduce orders an outerReduceTag stage as (the other data
// axes fused and parallel, the reduce axes, the last data axis
// vectorised). With the last axis the only data axis, it is split in
// chunks of at most 64 whose outer loop is parallel.
func scheduleOuterReduce(st *te.Stage) {
	axes := st.Axis()
	inner := axes[len(axes)-1]
	var outer *te.IterVar
	if len(axes) > 1 {
		outer = axes[0]
		for _, a := range axes[1 : len(axes)-1] {
			outer = st.Fuse(outer, a)
		}
	} else if inner.Extent > 64 && inner.Extent%64 == 0 {
		outer, inner = st.Split(inner, 64)
	}
	order := []*te.IterVar{}
	if outer != nil {
		order = append(order, outer)
	}
	order = append(order, st.ReduceAxes()...)
	st.Reorder(append(order, inner)...)
	if outer != nil && outer.Extent >= 2 {
		st.Parallel(outer)
	}
	st.Vectorize(inner)
}
