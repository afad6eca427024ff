package topi

import (
	"math"
	"slices"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// Computes of the reductions, index reductions, cumsum and topk
// (graph/op/transform_reduce.go).
//
// Accumulation types: float16/bfloat16/float32 sums and products
// accumulate in float32, float64 in float64; integers and bools in int64
// (wrapping, then converted to the output type like the reference's
// SetInt). Max and min of floats compare in the input type (exact, NaN
// propagates as in the reference).

func init() {
	mustAddTransform(op.Sum, "sum.generic", computeTrReduce("sum"), scheduleTrReduce)
	mustAddTransform(op.Mean, "mean.generic", computeTrReduce("mean"), scheduleTrReduce)
	mustAddTransform(op.Max, "max.generic", computeTrReduce("max"), scheduleTrReduce)
	mustAddTransform(op.Min, "min.generic", computeTrReduce("min"), scheduleTrReduce)
	mustAddTransform(op.Prod, "prod.generic", computeTrReduce("prod"), scheduleTrReduce)
	mustAddTransform(op.ArgMax, "argmax.generic", computeTrArg(true), scheduleTrReduce)
	mustAddTransform(op.ArgMin, "argmin.generic", computeTrArg(false), scheduleTrReduce)
	mustAddTransform(op.CumSum, "cumsum.generic", computeCumSum, ScheduleInjective)
	mustAddTransform(op.TopK, "topk.generic", computeTopK, ScheduleInjective)
}

// scheduleTrReduce is ScheduleReduce applied to the anchor and also to the
// reduction stages the anchor is computed from (a reduction in a wider
// accumulator type followed by a cast or a division, or argmax's two
// passes), so those loops are fused and parallel too.
func scheduleTrReduce(c *strategy.Call, s *te.Schedule, outs, anchor []*te.Tensor) error {
	all := append([]*te.Tensor(nil), anchor...)
	seen := map[te.Operation]bool{}
	var walk func(t *te.Tensor)
	walk = func(t *te.Tensor) {
		co, ok := t.Op.(*te.ComputeOp)
		if !ok || seen[co] {
			return
		}
		seen[co] = true
		for _, p := range co.InputTensors() {
			if pc, ok := p.Op.(*te.ComputeOp); ok && pc.IsReduce() && !seen[pc] {
				seen[pc] = true
				all = append(all, p)
				continue // do not look past another reduction
			}
			walk(p)
		}
	}
	for _, a := range anchor {
		walk(a)
	}
	return ScheduleReduce(c, s, outs, all)
}

// trAccType is the type sums and products of dt accumulate in.
func trAccType(dt ir.DType) ir.DType {
	switch {
	case dt == ir.Float64:
		return ir.Float64
	case dt.IsFloat():
		return ir.Float32
	}
	return ir.Int64
}

// trReduceIndex maps output coordinates of a reduction over axes (with or
// without kept dimensions) plus the reduce variables to input coordinates.
func trReduceIndex(rank int, axes []int, keepdims bool, out []tir.PrimExpr, rv []tir.PrimExpr) []tir.PrimExpr {
	idx := make([]tir.PrimExpr, rank)
	red := make([]int, rank)
	for d := range red {
		red[d] = -1
	}
	for k, a := range axes {
		red[a] = k
	}
	j := 0
	for d := 0; d < rank; d++ {
		switch {
		case red[d] >= 0:
			idx[d] = rv[red[d]]
			if keepdims {
				j++
			}
		default:
			idx[d] = out[j]
			j++
		}
	}
	return idx
}

// computeTrReduce is the compute of sum, mean, max, min and prod.
func computeTrReduce(kind string) strategy.ComputeFunc {
	return func(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
		x := in[0]
		dt := x.DType
		axes, err := op.ReduceAxes(c.Attrs.Ints("axis"), len(x.Shape))
		if err != nil {
			return nil, err
		}
		keep := c.Attrs.Bool("keepdims")
		shape := c.OutTensor().Shape
		name := trName(c)
		count := int64(1)
		for _, a := range axes {
			count *= x.Shape[a]
		}
		if count == 0 {
			// An empty reduction: the reference's initial accumulator.
			return trOne(te.Compute(name, shape, func([]tir.PrimExpr) tir.PrimExpr {
				return tir.Const(tir.Scalar(dt), trEmptyReduce(kind, dt))
			}, te.WithTag("injective")))
		}
		if len(axes) == 0 {
			// Nothing reduced: every kind is the identity.
			return trOne(te.Compute(name, shape, func(i []tir.PrimExpr) tir.PrimExpr {
				return x.At(i...)
			}, te.WithTag("injective")))
		}
		acc := trAccType(dt)
		if (kind == "max" || kind == "min") && dt.IsFloat() {
			acc = dt
		}
		var r te.Reducer
		switch kind {
		case "sum", "mean":
			r = te.Sum
		case "prod":
			r = te.Prod
		case "max":
			r = te.Max
		case "min":
			r = te.Min
		}
		var red *te.Tensor
		if last := len(x.Shape) - 1; len(axes) == 1 && axes[0] == last && acc.IsFloat() && kind != "prod" && c.Target != nil {
			// Along the contiguous axis: lane-split (reduce_lanes.go).
			red = laneReduce(name+"_red", shape, acc, x.Shape[last], reduceLanes(c.Target.Processor()), r, "comm_reduce",
				func(row []tir.PrimExpr, k tir.PrimExpr) tir.PrimExpr {
					return tir.NewCast(tir.Scalar(acc), x.At(trReduceIndex(len(x.Shape), axes, keep, row, []tir.PrimExpr{k})...))
				})
		} else {
			tag := "comm_reduce"
			if !slices.Contains(axes, len(x.Shape)-1) && shape[len(shape)-1] >= 4 {
				// The output's last axis walks the input's contiguous
				// axis: ScheduleReduce runs the reduction outside it and
				// vectorises it.
				tag = outerReduceTag
			}
			rax := make([]*te.IterVar, len(axes))
			rv := make([]tir.PrimExpr, len(axes))
			for k, a := range axes {
				rax[k] = te.ReduceAxis(x.Shape[a], "r"+string(rune('0'+k)))
				rv[k] = rax[k].Var
			}
			red = te.ComputeReduce(name+"_red", shape, r, rax, func(i []tir.PrimExpr) tir.PrimExpr {
				return tir.NewCast(tir.Scalar(acc), x.At(trReduceIndex(len(x.Shape), axes, keep, i, rv)...))
			}, te.WithTag(tag))
		}
		if kind != "mean" && acc == dt {
			return trOne(red)
		}
		return trOne(te.Compute(name, shape, func(i []tir.PrimExpr) tir.PrimExpr {
			v := red.At(i...)
			if kind == "mean" {
				v = tir.Div(v, tir.Const(tir.Scalar(acc), float64(count)))
			}
			return tir.NewCast(tir.Scalar(dt), v)
		}, te.WithTag("injective")))
	}
}

// trEmptyReduce is the reference's result of reducing no elements.
func trEmptyReduce(kind string, dt ir.DType) float64 {
	switch {
	case kind == "prod":
		return 1
	case kind == "mean" && dt.IsFloat():
		return math.NaN()
	case kind == "max" && dt.IsFloat():
		return math.Inf(-1)
	case kind == "min" && dt.IsFloat():
		return math.Inf(1)
	}
	return 0
}

// computeTrArg is argmax/argmin in two passes over the axis: the extreme
// value (ignoring NaN, as the reference's strict comparisons do), then the
// first (or, with select_last_index, last) index holding it. Values compare
// as the reference does: floats in their type, integers as float64. A NaN
// first element wins, as in the reference, whose comparisons with it all
// fail.
func computeTrArg(isMax bool) strategy.ComputeFunc {
	return func(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
		x := in[0]
		axis, err := op.NormAxis(c.Attrs.Int("axis"), len(x.Shape))
		if err != nil {
			return nil, err
		}
		keep := c.Attrs.Bool("keepdims")
		last := c.Attrs.Bool("select_last_index")
		shape := c.OutTensor().Shape
		name := trName(c)
		dim := x.Shape[axis]
		cmp := x.DType
		if !cmp.IsFloat() {
			cmp = ir.Float64
		}
		val := func(i []tir.PrimExpr, r tir.PrimExpr) tir.PrimExpr {
			return tir.NewCast(tir.Scalar(cmp), x.At(trReduceIndex(len(x.Shape), []int{axis}, keep, i, []tir.PrimExpr{r})...))
		}
		better := tir.GT
		ext := te.Reducer{Name: "argmax_value", Identity: te.MinValue}
		if !isMax {
			better = tir.LT
			ext = te.Reducer{Name: "argmin_value", Identity: te.MaxValue}
		}
		ext.Combine = func(acc, v tir.PrimExpr) tir.PrimExpr { return tir.NewSelect(better(v, acc), v, acc) }
		r1 := te.ReduceAxis(dim, "r")
		best := te.ComputeReduce(name+"_value", shape, ext, []*te.IterVar{r1}, func(i []tir.PrimExpr) tir.PrimExpr {
			return val(i, r1.Var)
		}, te.WithTag("comm_reduce"))
		r2 := te.ReduceAxis(dim, "r")
		pick, miss := te.Min, tir.Int64(dim)
		if last {
			pick, miss = te.Max, tir.Int64(-1)
		}
		return trOne(te.ComputeReduce(name, shape, pick, []*te.IterVar{r2}, func(i []tir.PrimExpr) tir.PrimExpr {
			ri := tir.NewCast(tir.Int64T, r2.Var)
			v := tir.NewSelect(tir.EQ(val(i, r2.Var), best.At(i...)), ri, miss)
			if cmp.IsFloat() && x.DType.IsFloat() {
				first := tir.NewSelect(tir.EQ(r2.Var, tir.Idx(0)), tir.Int64(0), miss)
				v = tir.NewSelect(tir.NewCall(tir.IntrinIsNaN, val(i, tir.Idx(0))), first, v)
			}
			return v
		}, te.WithTag("comm_reduce")))
	}
}

// trRows builds, for a buffer of shape with a distinguished axis, a loop
// nest over every other dimension; body gets a function that returns the
// full coordinates for a given position along the axis.
func trRows(shape ir.Shape, axis int, body func(at func(p tir.PrimExpr) []tir.PrimExpr) tir.Stmt) tir.Stmt {
	outer := append(append(ir.Shape{}, shape[:axis]...), shape[axis+1:]...)
	return trLoops("o", outer, func(o []tir.PrimExpr) tir.Stmt {
		return body(func(p tir.PrimExpr) []tir.PrimExpr {
			idx := append(append([]tir.PrimExpr(nil), o[:axis]...), p)
			return append(idx, o[axis:]...)
		})
	})
}

// computeCumSum is a te.Extern: per row along axis a serial scan with a
// float64 (floats) or int64 (integers) accumulator, like the reference.
func computeCumSum(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x := in[0]
	axis, err := op.NormAxis(c.Attrs.Int("axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	excl, rev := c.Attrs.Bool("exclusive"), c.Attrs.Bool("reverse")
	dt := x.DType
	acc := ir.Int64
	if dt.IsFloat() {
		acc = ir.Float64
	}
	dim := x.Shape[axis]
	return te.Extern(trName(c), []ir.Shape{x.Shape}, []ir.DType{dt}, in, func(ins, outs []*tir.Buffer) tir.Stmt {
		src, dst := ins[0], outs[0]
		return trRows(x.Shape, axis, func(at func(tir.PrimExpr) []tir.PrimExpr) tir.Stmt {
			sum := tir.NewBuffer("cumsum_acc", acc, ir.Shape{1}, tir.ScopeLocal)
			s := tir.NewVar("s", tir.Int32T)
			var i tir.PrimExpr = s
			if rev {
				i = tir.Sub(tir.Idx(dim-1), s)
			}
			zero := tir.Idx(0)
			cur := tir.NewLoad(sum, zero)
			write := tir.NewStore(dst, tir.NewCast(tir.Scalar(dt), tir.NewLoad(sum, zero)), at(i)...)
			add := tir.NewStore(sum, tir.Add(cur, tir.NewCast(tir.Scalar(acc), tir.NewLoad(src, at(i)...))), zero)
			step := tir.Seq(add, write)
			if excl {
				step = tir.Seq(write, add)
			}
			return &tir.Allocate{Buffer: sum, Body: tir.Seq(
				tir.NewStore(sum, tir.Const(tir.Scalar(acc), 0), zero),
				tir.Loop(s, dim, tir.Serial, step),
			)}
		})
	}), nil
}

// computeTopK is a te.Extern: per row along axis a stable insertion sort
// of the positions (ties keep the smaller index first, as the reference's
// stable sort), then the first k are written out. Values compare as in the
// reference: floats in their type, integers as float64. With NaN in a row
// the order is unspecified (the reference's sort has no defined order
// there either).
func computeTopK(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x := in[0]
	axis, err := op.NormAxis(c.Attrs.Int("axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	k := c.Attrs.Int("k")
	largest := c.Attrs.Bool("largest")
	dim := x.Shape[axis]
	oshape := x.Shape.Clone()
	oshape[axis] = k
	cmp := x.DType
	if !cmp.IsFloat() {
		cmp = ir.Float64
	}
	return te.Extern(trName(c), []ir.Shape{oshape, oshape}, []ir.DType{x.DType, ir.Int64}, in, func(ins, outs []*tir.Buffer) tir.Stmt {
		src, vals, idxs := ins[0], outs[0], outs[1]
		// Loop over the rows of the output; the same outer coordinates
		// address the input row.
		return trRows(oshape, axis, func(at func(tir.PrimExpr) []tir.PrimExpr) tir.Stmt {
			ord := tir.NewBuffer("topk_order", ir.Int32, ir.Shape{dim}, tir.ScopeLocal)
			value := func(p tir.PrimExpr) tir.PrimExpr {
				return tir.NewCast(tir.Scalar(cmp), tir.NewLoad(src, at(p)...))
			}
			i0 := tir.NewVar("i", tir.Int32T)
			initOrd := tir.Loop(i0, dim, tir.Serial, tir.NewStore(ord, i0, i0))
			// for i in 1..dim-1: for j = i down to 1: swap ord[j-1], ord[j]
			// when ord[j] must come first.
			i1, jj := tir.NewVar("i", tir.Int32T), tir.NewVar("jj", tir.Int32T)
			a, b := tir.NewVar("a", tir.Int32T), tir.NewVar("b", tir.Int32T)
			j := tir.Sub(i1, jj)
			jm := tir.Sub(j, tir.Idx(1))
			before := tir.GT(value(a), value(b))
			if !largest {
				before = tir.LT(value(a), value(b))
			}
			swap := tir.NewLet(a, tir.NewLoad(ord, j), tir.NewLet(b, tir.NewLoad(ord, jm),
				tir.NewIf(before, tir.Seq(tir.NewStore(ord, a, jm), tir.NewStore(ord, b, j)), nil)))
			sort := tir.NewFor(i1, tir.Idx(1), tir.Idx(dim-1), tir.Serial,
				tir.NewFor(jj, tir.Idx(0), i1, tir.Serial, swap))
			p := tir.NewVar("p", tir.Int32T)
			pos := tir.NewLoad(ord, p)
			write := tir.Loop(p, k, tir.Serial, tir.Seq(
				tir.NewStore(vals, tir.NewLoad(src, at(pos)...), at(p)...),
				tir.NewStore(idxs, tir.NewCast(tir.Int64T, pos), at(p)...),
			))
			return &tir.Allocate{Buffer: ord, Body: tir.Seq(initOrd, sort, write)}
		})
	}), nil
}
