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
//	part[row, l] = Σ_{ko} f(ko*L + l)      (l < L, ko < ceil(n/L))
//	r[row]       = Σ_l part[row, l]
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
// the lane count (else a plain reduction). out has shape rows; body must
// not read out of bounds for k < n (indices past n are clamped to n-1 and
// their values replaced by the reducer's identity). tag is the final
// stage's tag.
func laneReduce(name string, rows ir.Shape, dt ir.DType, n, lanes int64, r te.Reducer, tag string, body func(row []tir.PrimExpr, k tir.PrimExpr) tir.PrimExpr) *te.Tensor {
	if lanes < 2 || n < 2*lanes {
		k := te.ReduceAxis(n, "k")
		return te.ComputeReduce(name, rows, r, []*te.IterVar{k}, func(i []tir.PrimExpr) tir.PrimExpr {
			return body(i, k.Var)
		}, te.WithTag(tag))
	}
	ko := te.ReduceAxis((n+lanes-1)/lanes, "ko")
	pshape := append(rows.Clone(), lanes)
	part := te.ComputeReduce(name+"_lanes", pshape, r, []*te.IterVar{ko}, func(i []tir.PrimExpr) tir.PrimExpr {
		row := i[:len(i)-1]
		k := tir.Add(tir.Mul(ko.Var, tir.Idx(lanes)), i[len(i)-1])
		if n%lanes == 0 {
			return body(row, k)
		}
		in := tir.LT(k, tir.Idx(n))
		v := body(row, tir.Min(k, tir.Idx(n-1)))
		return tir.NewSelect(in, v, r.Identity(dt))
	}, te.WithTag(laneTag))
	l := te.ReduceAxis(lanes, "l")
	return te.ComputeReduce(name, rows, r, []*te.IterVar{l}, func(i []tir.PrimExpr) tir.PrimExpr {
		return part.At(append(append([]tir.PrimExpr(nil), i...), l.Var)...)
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
		cop, ok := st.Op().(*te.ComputeOp)
		if !ok || cop.Tag != laneTag {
			continue
		}
		axes := st.Axis()
		lane := axes[len(axes)-1]
		ko := st.ReduceAxes()[0]
		consumer := laneConsumer(s, st)
		if consumer != nil {
			if leaves := dataLeaves(consumer); len(leaves) > 0 && len(axes) > 1 {
				st.ComputeAt(consumer, leaves[len(leaves)-1])
				st.Reorder(append(append([]*te.IterVar(nil), axes[:len(axes)-1]...), ko, lane)...)
				st.Vectorize(lane)
				continue
			}
		}
		rows := axes[:len(axes)-1]
		order := append(append([]*te.IterVar(nil), rows...), ko, lane)
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

// laneConsumer is the stage reading the partial stage st (the final
// reduction), or nil.
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
