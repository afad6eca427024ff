package topi

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// This file holds the tuned CPU schedule of float32 2-D max and average
// pooling (NCHW), with the generic computes. The generic schedule runs the
// window loops innermost and updates the output in memory once per window
// element; here one output row is accumulated in a local buffer with the
// window loops outside the row loop, which is vectorised, then stored
// (through the fused elementwise consumers, if any). The loop nest is not
// fused; the first loop with two or more iterations runs in parallel.

func init() {
	if err := strategy.Default.Add(op.AvgPool2D, strategy.ForKey("cpu"), strategy.Implementation{
		Name: op.AvgPool2D.Name + ".cpu", PLevel: strategy.PLevelTuned,
		Compute: computePool(true), Schedule: schedulePoolCPU, Valid: poolCPUValid,
	}); err != nil {
		panic(err)
	}
	// The rows form (pool_rows.go) first: of two implementations at one
	// level the one registered first is selected.
	if err := strategy.Default.Add(op.MaxPool2D, strategy.ForKey("cpu"), strategy.Implementation{
		Name: op.MaxPool2D.Name + ".rows.cpu", PLevel: strategy.PLevelTuned,
		Compute: computeMaxPoolRows, Schedule: ScheduleInjective, Valid: maxPoolRowsValid,
	}); err != nil {
		panic(err)
	}
	if err := strategy.Default.Add(op.MaxPool2D, strategy.ForKey("cpu"), strategy.Implementation{
		Name: op.MaxPool2D.Name + ".cpu", PLevel: strategy.PLevelTuned,
		Compute: computeMaxPoolCPU, Schedule: scheduleMaxPoolCPU, Valid: maxPoolCPUValid,
	}); err != nil {
		panic(err)
	}
	for _, o := range []struct {
		op  *op.Op
		avg bool
	}{{op.GlobalAvgPool2D, true}, {op.GlobalMaxPool2D, false}} {
		if err := strategy.Default.Add(o.op, strategy.ForKey("cpu"), strategy.Implementation{
			Name: o.op.Name + ".cpu", PLevel: strategy.PLevelTuned,
			Compute: computeGlobalPoolCPU(o.avg), Schedule: scheduleTrReduce, Valid: globalPoolCPUValid,
		}); err != nil {
			panic(err)
		}
	}
}

// Max pooling uses the convolutions' layout (conv2d_mk.go): the input
// padded with -inf and split into stride phases, V[n, c, j] = max over
// the window's taps of X'[n, c, j + KOFF], and the output reading
// V[n, c, oh*Wq + ow]. V is computed a tile of rows at a time at the
// output's row-tile loop from a local copy of the rows of X' it reads
// (conv2d_tile.go), the taps outside and the contiguous columns
// vectorised inside: no bounds tests and no strided loads.

func computeMaxPoolCPU(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x := in[0]
	ot := c.OutTensor()
	k := c.Attrs.Ints("pool_size")
	if len(k) != 2 {
		return nil, fmt.Errorf("%s: pool_size %v, want 2 values", c.Op.Name, k)
	}
	p, err := newConvPlan(c, x.Shape, k[0], k[1], 1)
	if err != nil {
		return nil, err
	}
	rh := te.ReduceAxis(k[0], "kh")
	rw := te.ReduceAxis(k[1], "kw")
	low := te.MinValue(x.DType)
	v := te.ComputeReduce(nnName(c)+"_v", ir.Shape{x.Shape[0], x.Shape[1], p.jtot}, te.Max, []*te.IterVar{rh, rw}, func(i []tir.PrimExpr) tir.PrimExpr {
		return p.padLoad(x, i[0], i[1], i[2], rh.Var, rw.Var, low)
	}, te.WithTag("pool_max"), te.WithAxisNames("n", "c", "j"))
	out := te.Compute(nnName(c), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		return v.At(i[0], i[1], tir.Add(tir.Mul(i[2], tir.Idx(p.wq)), i[3]))
	}, te.WithTag("pool_max_out"), te.WithAxisNames("n", "c", "oh", "ow"))
	return []*te.Tensor{out}, nil
}

func scheduleMaxPoolCPU(c *strategy.Call, s *te.Schedule, outs, anchor []*te.Tensor) error {
	if len(anchor) != 1 {
		return fmt.Errorf("%s: want one anchor output", c.Op.Name)
	}
	vT := anchor[0].Op.InputTensors()[0]
	k := c.Attrs.Ints("pool_size")
	p, err := newConvPlan(c, c.ArgTensor(0).Shape, k[0], k[1], 1)
	if err != nil {
		return err
	}
	x := vT.Op.InputTensors()[0]
	return p.scheduleTiles(s, outs, anchor[0], vT, 1, func(cols int64) te.TensorIntrin {
		return p.localTile(x, te.MinValue(x.DType), cols, maxTile)
	})
}

// poolCPUValid accepts float32 pooling of 4-D (NCHW) tensors.
// maxPoolCPUValid accepts what poolCPUValid does, and 8-bit integers
// (quantized models' max pooling).
func maxPoolCPUValid(c *strategy.Call) bool {
	ot, ok := c.OutType.(*ir.TensorType)
	if ok && (ot.DType == ir.Uint8 || ot.DType == ir.Int8) {
		return len(ot.Shape) == 4 && ot.Shape.NumElements() > 0
	}
	return poolCPUValid(c)
}

func poolCPUValid(c *strategy.Call) bool {
	ot, ok := c.OutType.(*ir.TensorType)
	return ok && ot.DType == ir.Float32 && len(ot.Shape) == 4 && ot.Shape.NumElements() > 0
}

// schedulePoolCPU is the row-wise schedule described above; groups it does
// not handle get the generic schedule.
func schedulePoolCPU(c *strategy.Call, s *te.Schedule, outs, anchor []*te.Tensor) error {
	if len(outs) != 1 || len(anchor) != 1 || !sameShape(outs[0].Shape, anchor[0].Shape) {
		return scheduleNN(c, s, outs, anchor)
	}
	out := outs[0]
	if _, ok := out.Op.(*te.ComputeOp); !ok {
		return scheduleNN(c, s, outs, anchor)
	}
	var red *te.Tensor
	for _, st := range s.Stages() {
		cop, ok := st.Op().(*te.ComputeOp)
		if !ok {
			continue
		}
		if cop.IsReduce() {
			if red != nil {
				return scheduleNN(c, s, outs, anchor)
			}
			red = cop.Output
		}
	}
	if red == nil || !sameShape(red.Shape, out.Shape) {
		return scheduleNN(c, s, outs, anchor)
	}
	for _, st := range s.Stages() {
		cop, ok := st.Op().(*te.ComputeOp)
		if ok && !cop.IsReduce() && cop.Output != out {
			st.ComputeInline()
		}
	}
	var acc *te.Stage
	if red == out {
		acc = s.Stage(s.CacheWrite(red, tir.ScopeLocal))
	} else {
		acc = s.Stage(red)
		acc.SetScope(tir.ScopeLocal)
	}
	st := s.Stage(out)
	axes := st.Axis()
	parallelFirst(st, axes[:3])
	if axes[3].Extent >= 2 {
		st.Vectorize(axes[3])
	}
	acc.ComputeAt(st, axes[2])
	aAxes := acc.Axis()
	acc.Reorder(append(append([]*te.IterVar{}, aAxes[:3]...), append(acc.ReduceAxes(), aAxes[3])...)...)
	if aAxes[3].Extent >= 2 {
		acc.Vectorize(aAxes[3])
	}
	return s.Err()
}

// Global pooling reduces each channel's plane, a contiguous run of H*W
// elements: as one serial chain it costs H*W add latencies per channel
// (1000 channels of 13x13: 0.11 ms on a Zen 5 core, against 0.035 ms in
// ONNX Runtime). The CPU implementation reduces the plane lane-split
// (reduce_lanes.go), vectorised, with the reduction's schedule.

// globalPoolCPUValid accepts float32 global pooling of a 4-D (NCHW)
// tensor whose planes are long enough to split into lanes (the generic
// implementation takes the others).
func globalPoolCPUValid(c *strategy.Call) bool {
	if !poolCPUValid(c) || c.Target == nil || len(c.ArgTypes) != 1 {
		return false
	}
	xt, ok := c.ArgTypes[0].(*ir.TensorType)
	return ok && len(xt.Shape) == 4 && xt.Shape[2]*xt.Shape[3] >= 2*reduceLanes(c.Target.Processor())
}

// computeGlobalPoolCPU is global average (avg) or max pooling of a plane
// flattened to one contiguous axis and reduced lane-split.
func computeGlobalPoolCPU(avg bool) strategy.ComputeFunc {
	return func(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
		if err := nnCheckNonEmpty(c); err != nil {
			return nil, err
		}
		x := in[0]
		ot := c.OutTensor()
		h, w := x.Shape[2], x.Shape[3]
		r := te.Max
		if avg {
			r = te.Sum
		}
		red := laneReduce(nnName(c)+"_red", ot.Shape, x.DType, h*w, reduceLanes(c.Target.Processor()), r, "comm_reduce",
			func(row []tir.PrimExpr, k tir.PrimExpr) tir.PrimExpr {
				return x.At(row[0], row[1], tir.FloorDiv(k, tir.Idx(w)), tir.FloorMod(k, tir.Idx(w)))
			})
		if !avg {
			return []*te.Tensor{red}, nil
		}
		n := float64(h * w)
		return []*te.Tensor{te.Compute(nnName(c), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
			return tir.Div(red.At(i...), nnFConst(x.DType, n))
		}, te.WithTag("injective"))}, nil
	}
}
