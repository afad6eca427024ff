package topi

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// Computes of the shape and data-movement operators (graph/op/transform.go).
// They only move elements, so every dtype works unchanged.
//
// Index arguments (take, gather_*, scatter_*, reverse_sequence) are read at
// run time. Negative indices wrap like the reference executor (i < 0 means
// i + dim). Where the reference reports an out-of-range index as an error,
// a compiled kernel cannot fail per element: it clamps the index into the
// valid range instead, so it never reads or writes out of bounds.

func init() {
	mustAddTransform(op.Reshape, "reshape.generic", computeReshape, ScheduleInjective)
	mustAddTransform(op.Transpose, "transpose.generic", computeTranspose, ScheduleInjective)
	mustAddTransform(op.Concatenate, "concatenate.generic", computeConcatenate, ScheduleInjective)
	mustAddTransform(op.Split, "split.generic", computeSplit, ScheduleInjective)
	mustAddTransform(op.StridedSlice, "strided_slice.generic", computeStridedSlice, ScheduleInjective)
	mustAddTransform(op.Take, "take.generic", computeTake, ScheduleInjective)
	mustAddTransform(op.GatherElements, "gather_elements.generic", computeGatherElements, ScheduleInjective)
	mustAddTransform(op.GatherND, "gather_nd.generic", computeGatherND, ScheduleInjective)
	mustAddTransform(op.Pad, "nn.pad.generic", computePad, ScheduleInjective)
	mustAddTransform(op.Tile, "tile.generic", computeTile, ScheduleInjective)
	mustAddTransform(op.BroadcastTo, "broadcast_to.generic", computeBroadcastTo, ScheduleInjective)
	mustAddTransform(op.OneHot, "one_hot.generic", computeOneHot, ScheduleInjective)
	mustAddTransform(op.Trilu, "trilu.generic", computeTrilu, ScheduleInjective)
	mustAddTransform(op.ReverseSequence, "reverse_sequence.generic", computeReverseSequence, ScheduleInjective)
}

// mustAddTransform registers a generic implementation of a transform-group
// operator in strategy.Default. The compute is wrapped by trGuard. A
// failure is a programming error in this package.
func mustAddTransform(o *op.Op, name string, compute strategy.ComputeFunc, sched strategy.ScheduleFunc) {
	impl := strategy.Implementation{Name: name, PLevel: strategy.PLevelGeneric, Compute: trGuard(compute), Schedule: sched}
	if err := strategy.Default.Add(o, strategy.ForKey("generic"), impl); err != nil {
		panic(err)
	}
}

// trGuard handles calls whose outputs are all empty (te cannot declare a
// compute stage with a zero-sized dimension; an extern stage that does
// nothing produces them) and turns a panic of the tensor-expression
// constructors into an error naming the operator.
func trGuard(f strategy.ComputeFunc) strategy.ComputeFunc {
	return func(c *strategy.Call, in []*te.Tensor) (outs []*te.Tensor, err error) {
		defer func() {
			if r := recover(); r != nil {
				outs, err = nil, fmt.Errorf("%s: %v", c.Op.Name, r)
			}
		}()
		types := trOutTypes(c)
		empty := true
		for _, t := range types {
			empty = empty && t.Shape.NumElements() == 0
		}
		if empty {
			shapes := make([]ir.Shape, len(types))
			dts := make([]ir.DType, len(types))
			for i, t := range types {
				shapes[i], dts[i] = t.Shape, t.DType
			}
			return trEmpty(trName(c), shapes, dts), nil
		}
		return f(c, in)
	}
}

// trEmpty declares outputs without elements: an extern stage that does
// nothing.
func trEmpty(name string, shapes []ir.Shape, dts []ir.DType) []*te.Tensor {
	return te.Extern(name, shapes, dts, nil, func(_, _ []*tir.Buffer) tir.Stmt { return tir.NoOp() })
}

// trOutTypes lists the output tensor types of a call.
func trOutTypes(c *strategy.Call) []*ir.TensorType {
	switch t := c.OutType.(type) {
	case *ir.TensorType:
		return []*ir.TensorType{t}
	case *ir.TupleType:
		out := make([]*ir.TensorType, len(t.Fields))
		for i, f := range t.Fields {
			out[i] = f.(*ir.TensorType)
		}
		return out
	}
	return nil
}

// trName derives a stage name from the op name ("nn.pad" -> "nn_pad").
func trName(c *strategy.Call) string {
	b := []byte(c.Op.Name)
	for i, ch := range b {
		if ch == '.' {
			b[i] = '_'
		}
	}
	return string(b)
}

// trOne wraps a single output.
func trOne(t *te.Tensor) ([]*te.Tensor, error) { return []*te.Tensor{t}, nil }

// trRavel is the row-major flat index of coordinates c in shape.
func trRavel(c []tir.PrimExpr, shape ir.Shape) tir.PrimExpr {
	var flat tir.PrimExpr = tir.Idx(0)
	for d, s := range shape.Strides() {
		flat = tir.Add(flat, tir.Mul(c[d], tir.Idx(s)))
	}
	return flat
}

// trUnravel returns the coordinates in shape of the row-major flat index.
func trUnravel(flat tir.PrimExpr, shape ir.Shape) []tir.PrimExpr {
	strides := shape.Strides()
	c := make([]tir.PrimExpr, len(shape))
	for d := range shape {
		v := tir.FloorDiv(flat, tir.Idx(strides[d]))
		if d > 0 {
			v = tir.FloorMod(v, tir.Idx(shape[d]))
		}
		c[d] = v
	}
	return c
}

// trNormIndex turns a run-time index of any integer (or float) type into an
// int32 index in [0, n): negative values count from the end like the
// reference executor, and a value out of [-n, n) makes the kernel fail
// with the reference executor's message ("index 7 out of range [-5, 5)")
// through the check_index intrinsic (which reads element 0 meanwhile).
func trNormIndex(e tir.PrimExpr, n int64) tir.PrimExpr {
	i := tir.NewCall(tir.IntrinCheckIndex, tir.NewCast(tir.Int64T, e), tir.Int64(n))
	return tir.NewCast(tir.Int32T, i)
}

// trWrapNegative converts an index to int64 and adds n when it is
// negative. Unsigned types narrower than 64 bits are never negative (the
// test is left out: C compilers reject the always-false comparison);
// uint64 is read as int64 like the reference's Int.
func trWrapNegative(e tir.PrimExpr, n int64) tir.PrimExpr {
	i := tir.NewCast(tir.Int64T, e)
	if dt := e.Type().DType; dt.IsUint() && dt.Size() < 8 {
		return i
	}
	return tir.NewSelect(tir.LT(i, tir.Int64(0)), tir.Add(i, tir.Int64(n)), i)
}

// trZero is the zero of dtype dt (false for bool).
func trZero(dt ir.DType) tir.PrimExpr { return tir.Const(tir.Scalar(dt), 0) }

func computeReshape(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x := in[0]
	shape := c.OutTensor().Shape
	return trOne(te.Compute(trName(c), shape, func(i []tir.PrimExpr) tir.PrimExpr {
		if shape.Equal(x.Shape) {
			return x.At(i...)
		}
		return x.At(trUnravel(trRavel(i, shape), x.Shape)...)
	}, te.WithTag("injective")))
}

func computeTranspose(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x := in[0]
	perm, err := op.TransposeAxes(c.Attrs.Ints("axes"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	return trOne(te.Compute(trName(c), c.OutTensor().Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		idx := make([]tir.PrimExpr, len(perm))
		for o, p := range perm {
			idx[p] = i[o]
		}
		return x.At(idx...)
	}, te.WithTag("injective")))
}

func computeConcatenate(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	shape := c.OutTensor().Shape
	axis, err := op.NormAxis(c.Attrs.Int("axis"), len(shape))
	if err != nil {
		return nil, err
	}
	type part struct {
		t     *te.Tensor
		start int64
	}
	var parts []part
	off := int64(0)
	for _, t := range in {
		if t.Shape[axis] > 0 {
			parts = append(parts, part{t, off})
		}
		off += t.Shape[axis]
	}
	return trOne(te.Compute(trName(c), shape, func(i []tir.PrimExpr) tir.PrimExpr {
		read := func(p part) tir.PrimExpr {
			idx := append([]tir.PrimExpr(nil), i...)
			idx[axis] = tir.Sub(i[axis], tir.Idx(p.start))
			return p.t.At(idx...)
		}
		// Last part first, then wrap each earlier one around it.
		v := read(parts[len(parts)-1])
		for k := len(parts) - 2; k >= 0; k-- {
			end := parts[k+1].start
			v = te.IfThenElse(tir.LT(i[axis], tir.Idx(end)), read(parts[k]), v)
		}
		return v
	}, te.WithTag("injective")))
}

func computeSplit(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x := in[0]
	axis, err := op.NormAxis(c.Attrs.Int("axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	var outs []*te.Tensor
	start := int64(0)
	for k, ft := range trOutTypes(c) {
		s := start
		start += ft.Shape[axis]
		if ft.Shape.NumElements() == 0 {
			outs = append(outs, trEmpty(fmt.Sprintf("%s_%d", trName(c), k), []ir.Shape{ft.Shape}, []ir.DType{ft.DType})...)
			continue
		}
		outs = append(outs, te.Compute(fmt.Sprintf("%s_%d", trName(c), k), ft.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
			idx := append([]tir.PrimExpr(nil), i...)
			idx[axis] = tir.Add(i[axis], tir.Idx(s))
			return x.At(idx...)
		}, te.WithTag("injective")))
	}
	return outs, nil
}

func computeStridedSlice(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x := in[0]
	rank := len(x.Shape)
	begin := make([]int64, rank)
	step := make([]int64, rank)
	for i := range step {
		step[i] = 1
	}
	b, st, ax := c.Attrs.Ints("begin"), c.Attrs.Ints("strides"), c.Attrs.Ints("axes")
	for i := range ax {
		a, err := op.NormAxis(ax[i], rank)
		if err != nil {
			return nil, err
		}
		begin[a], step[a] = b[i], st[i]
	}
	return trOne(te.Compute(trName(c), c.OutTensor().Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		idx := make([]tir.PrimExpr, rank)
		for d := range idx {
			idx[d] = tir.Add(tir.Idx(begin[d]), tir.Mul(i[d], tir.Idx(step[d])))
		}
		return x.At(idx...)
	}, te.WithTag("injective")))
}

func computeTake(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x, ind := in[0], in[1]
	axis, err := op.NormAxis(c.Attrs.Int("axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	ri := len(ind.Shape)
	return trOne(te.Compute(trName(c), c.OutTensor().Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		idx := make([]tir.PrimExpr, 0, len(x.Shape))
		idx = append(idx, i[:axis]...)
		idx = append(idx, trNormIndex(ind.At(i[axis:axis+ri]...), x.Shape[axis]))
		idx = append(idx, i[axis+ri:]...)
		return x.At(idx...)
	}, te.WithTag("injective")))
}

// trClampOffAxis clamps coordinate i along dimension d of data when the
// index tensor is larger there (the reference reports an error instead).
func trClampOffAxis(i tir.PrimExpr, idxDim, dataDim int64) tir.PrimExpr {
	if idxDim > dataDim {
		return tir.Min(i, tir.Idx(dataDim-1))
	}
	return i
}

func computeGatherElements(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x, ind := in[0], in[1]
	axis, err := op.NormAxis(c.Attrs.Int("axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	return trOne(te.Compute(trName(c), c.OutTensor().Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		idx := make([]tir.PrimExpr, len(i))
		for d := range i {
			idx[d] = trClampOffAxis(i[d], ind.Shape[d], x.Shape[d])
		}
		idx[axis] = trNormIndex(ind.At(i...), x.Shape[axis])
		return x.At(idx...)
	}, te.WithTag("injective")))
}

func computeGatherND(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x, ind := in[0], in[1]
	bd := int(c.Attrs.Int("batch_dims"))
	ri := len(ind.Shape)
	L := int(ind.Shape[ri-1])
	return trOne(te.Compute(trName(c), c.OutTensor().Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		idx := make([]tir.PrimExpr, 0, len(x.Shape))
		idx = append(idx, i[:bd]...)
		for l := 0; l < L; l++ {
			tuple := append(append([]tir.PrimExpr(nil), i[:ri-1]...), tir.Idx(int64(l)))
			idx = append(idx, trNormIndex(ind.At(tuple...), x.Shape[bd+l]))
		}
		idx = append(idx, i[ri-1:]...)
		return x.At(idx...)
	}, te.WithTag("injective")))
}

func computePad(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x := in[0]
	pw := c.Attrs.Ints("pad_width")
	mode := c.Attrs.Str("pad_mode")
	var fill tir.PrimExpr
	if len(in) == 2 {
		fill = in[1].At()
	} else {
		fill = tir.Const(tir.Scalar(x.DType), c.Attrs.Float("pad_value"))
	}
	return trOne(te.Compute(trName(c), c.OutTensor().Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		var inside tir.PrimExpr = tir.Bool(true)
		idx := make([]tir.PrimExpr, len(i))
		for d := range i {
			n, before, after := x.Shape[d], pw[2*d], pw[2*d+1]
			j := tir.Sub(i[d], tir.Idx(before))
			if before == 0 && after == 0 {
				idx[d] = j
				continue
			}
			switch mode {
			case "constant":
				if before > 0 {
					inside = tir.And(inside, tir.GE(j, tir.Idx(0)))
				}
				if after > 0 {
					inside = tir.And(inside, tir.LT(j, tir.Idx(n)))
				}
			case "edge":
				j = tir.Min(tir.Max(j, tir.Idx(0)), tir.Idx(n-1))
			case "reflect":
				if n == 1 {
					j = tir.Idx(0)
				} else {
					// The relation keeps both pads below n, so one
					// reflection at each end is the reference's
					// periodic reflection.
					j = tir.NewSelect(tir.LT(j, tir.Idx(0)), tir.Sub(tir.Idx(0), j), j)
					j = tir.NewSelect(tir.GE(j, tir.Idx(n)), tir.Sub(tir.Idx(2*(n-1)), j), j)
				}
			default:
				panic(fmt.Sprintf("unknown pad_mode %q", mode))
			}
			idx[d] = j
		}
		if cv, ok := tir.ConstInt(inside); ok && cv != 0 {
			return x.At(idx...)
		}
		return te.IfThenElse(inside, x.At(idx...), fill)
	}, te.WithTag("injective,pad")))
}

func computeTile(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x := in[0]
	return trOne(te.Compute(trName(c), c.OutTensor().Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		idx := make([]tir.PrimExpr, len(i))
		for d := range i {
			idx[d] = tir.FloorMod(i[d], tir.Idx(x.Shape[d]))
		}
		return x.At(idx...)
	}, te.WithTag("injective")))
}

func computeBroadcastTo(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x := in[0]
	shape := c.OutTensor().Shape
	off := len(shape) - len(x.Shape)
	return trOne(te.Compute(trName(c), shape, func(i []tir.PrimExpr) tir.PrimExpr {
		idx := make([]tir.PrimExpr, len(x.Shape))
		for d := range idx {
			if x.Shape[d] == 1 {
				idx[d] = tir.Idx(0)
			} else {
				idx[d] = i[off+d]
			}
		}
		return x.At(idx...)
	}, te.WithTag("broadcast")))
}

func computeOneHot(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	ind, on, off := in[0], in[1], in[2]
	shape := c.OutTensor().Shape
	depth := c.Attrs.Int("depth")
	axis, err := op.NormAxis(c.Attrs.Int("axis"), len(shape))
	if err != nil {
		return nil, err
	}
	return trOne(te.Compute(trName(c), shape, func(i []tir.PrimExpr) tir.PrimExpr {
		ic := append(append([]tir.PrimExpr(nil), i[:axis]...), i[axis+1:]...)
		v := trWrapNegative(ind.At(ic...), depth) // float indices truncate
		hit := tir.EQ(v, tir.NewCast(tir.Int64T, i[axis]))
		return tir.NewSelect(hit, on.At(), off.At())
	}, te.WithTag("injective")))
}

func computeTrilu(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x := in[0]
	upper, k := c.Attrs.Bool("upper"), c.Attrs.Int("k")
	r := len(x.Shape)
	return trOne(te.Compute(trName(c), x.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		diff := tir.Sub(i[r-1], i[r-2])
		keep := tir.LE(diff, tir.Idx(k))
		if upper {
			keep = tir.GE(diff, tir.Idx(k))
		}
		return tir.NewSelect(keep, x.At(i...), trZero(x.DType))
	}, te.WithTag("injective")))
}

func computeReverseSequence(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x, sl := in[0], in[1]
	sa, err := op.NormAxis(c.Attrs.Int("seq_axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	ba, err := op.NormAxis(c.Attrs.Int("batch_axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	dim := x.Shape[sa]
	return trOne(te.Compute(trName(c), x.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		// Lengths outside [0, dim] are errors in the reference; clamp.
		n := tir.NewCast(tir.Int64T, sl.At(i[ba]))
		n = tir.NewCast(tir.Int32T, tir.Min(tir.Max(n, tir.Int64(0)), tir.Int64(dim)))
		idx := append([]tir.PrimExpr(nil), i...)
		idx[sa] = tir.NewSelect(tir.LT(i[sa], n), tir.Sub(tir.Sub(n, tir.Idx(1)), i[sa]), i[sa])
		return x.At(idx...)
	}, te.WithTag("injective")))
}
