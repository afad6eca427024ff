package onnx

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Converters of the shape and data-movement operators: Reshape, Flatten,
// Squeeze, Unsqueeze, Transpose, Concat, Split, Slice, Pad, Tile, Expand,
// Gather*, Scatter*. Every shape-determining input is read with c.Const and
// resolved here, so that the graph ops receive concrete attributes.

func init() {
	register("Reshape", 1, convReshape)
	register("Reshape", 5, convReshape)
	register("Flatten", 1, convFlatten)
	register("Squeeze", 1, convSqueeze)
	register("Squeeze", 13, convSqueeze)
	register("Unsqueeze", 1, convUnsqueeze)
	register("Unsqueeze", 13, convUnsqueeze)
	register("Transpose", 1, convTranspose)
	register("Concat", 1, convConcat)
	register("Split", 1, convSplit)
	register("Split", 13, convSplit)
	register("Slice", 1, convSlice)
	register("Slice", 10, convSlice)
	register("Pad", 1, convPad)
	register("Pad", 11, convPad)
	register("Tile", 1, convTile)
	register("Tile", 6, convTile)
	register("Expand", 8, convExpand)
	register("Gather", 1, convGather)
	register("GatherElements", 11, convGatherElements)
	register("GatherND", 11, convGatherND)
	register("Scatter", 9, convScatterElements)
	register("ScatterElements", 11, convScatterElements)
	register("ScatterND", 11, convScatterND)
}

// trSingle wraps a one-output converter result.
func trSingle(e graph.Expr, err error) ([]graph.Expr, error) {
	if err != nil {
		return nil, err
	}
	return []graph.Expr{e}, nil
}

// trInputType returns the tensor type of input i, failing when it is missing.
func trInputType(c *Ctx, n *Node, i int) (*ir.TensorType, error) {
	e := n.Input(i)
	if e == nil {
		return nil, n.Errorf("input %d is missing", i)
	}
	return c.TensorType(e)
}

// trConstInts reads an optional constant integer input: ok is false when the
// input is absent.
func trConstInts(c *Ctx, n *Node, i int, what string) (vals []int64, ok bool, err error) {
	e := n.Input(i)
	if e == nil {
		return nil, false, nil
	}
	t, err := c.Const(e, what)
	if err != nil {
		return nil, false, err
	}
	if !t.DType.IsInteger() {
		return nil, false, n.Errorf("%s must be an integer tensor, got %s", what, t.DType)
	}
	return t.AsInt64s(), true, nil
}

// trReshapeTo reshapes x to shape (x itself when the shape already matches).
func trReshapeTo(c *Ctx, x graph.Expr, shape ir.Shape) (graph.Expr, error) {
	t, err := c.TensorType(x)
	if err != nil {
		return nil, err
	}
	if t.Shape.Equal(shape) {
		return x, nil
	}
	return c.Call(op.Reshape, []graph.Expr{x}, ir.Attrs{"newshape": []int64(shape.Clone())})
}

// ResolveReshape computes the concrete target of an ONNX Reshape of a
// tensor of shape in: 0 copies the input dimension (unless allowZero), -1
// is inferred from the element count.
func ResolveReshape(in ir.Shape, spec []int64, allowZero bool) (ir.Shape, error) {
	out := make(ir.Shape, len(spec))
	infer := -1
	known := int64(1)
	for i, d := range spec {
		switch {
		case d == -1:
			if infer >= 0 {
				return nil, fmt.Errorf("shape %v has more than one -1", spec)
			}
			infer = i
			continue
		case d == 0 && !allowZero:
			if i >= len(in) {
				return nil, fmt.Errorf("shape %v copies dimension %d of a rank-%d input", spec, i, len(in))
			}
			d = in[i]
		case d < 0:
			return nil, fmt.Errorf("shape %v has the invalid dimension %d", spec, d)
		}
		out[i] = d
		known *= d
	}
	total := in.NumElements()
	if infer >= 0 {
		if known == 0 || total%known != 0 {
			return nil, fmt.Errorf("cannot infer the -1 of shape %v for %d elements", spec, total)
		}
		out[infer] = total / known
	} else if known != total {
		return nil, fmt.Errorf("cannot reshape %v (%d elements) to %v", in, total, spec)
	}
	return out, nil
}

func convReshape(c *Ctx, n *Node) ([]graph.Expr, error) {
	xt, err := trInputType(c, n, 0)
	if err != nil {
		return nil, err
	}
	spec := n.Ints("shape", nil)
	if n.Opset >= 5 {
		s, ok, err := trConstInts(c, n, 1, "shape")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, n.Errorf("the shape input is missing")
		}
		spec = s
	} else if !n.Has("shape") {
		return nil, n.Errorf("the shape attribute is missing")
	}
	shape, err := ResolveReshape(xt.Shape, spec, n.Int("allowzero", 0) != 0)
	if err != nil {
		return nil, n.Errorf("%v", err)
	}
	return trSingle(trReshapeTo(c, n.Input(0), shape))
}

func convFlatten(c *Ctx, n *Node) ([]graph.Expr, error) {
	xt, err := trInputType(c, n, 0)
	if err != nil {
		return nil, err
	}
	r := len(xt.Shape)
	axis := n.Int("axis", 1)
	if axis < 0 {
		axis += int64(r)
	}
	if axis < 0 || axis > int64(r) {
		return nil, n.Errorf("axis %d out of range for rank %d", n.Int("axis", 1), r)
	}
	shape := ir.Shape{xt.Shape[:axis].NumElements(), xt.Shape[axis:].NumElements()}
	return trSingle(trReshapeTo(c, n.Input(0), shape))
}

// trAxesArg reads the axes of Squeeze/Unsqueeze: an attribute before opset
// 13, an optional input from 13.
func trAxesArg(c *Ctx, n *Node) ([]int64, bool, error) {
	if n.Opset >= 13 {
		return trConstInts(c, n, 1, "axes")
	}
	if !n.Has("axes") {
		return nil, false, nil
	}
	return n.Ints("axes", nil), true, nil
}

func convSqueeze(c *Ctx, n *Node) ([]graph.Expr, error) {
	xt, err := trInputType(c, n, 0)
	if err != nil {
		return nil, err
	}
	axes, given, err := trAxesArg(c, n)
	if err != nil {
		return nil, err
	}
	drop := make([]bool, len(xt.Shape))
	if !given {
		for i, d := range xt.Shape {
			drop[i] = d == 1
		}
	}
	for _, a := range axes {
		ax, err := op.NormAxis(a, len(xt.Shape))
		if err != nil {
			return nil, n.Errorf("%v", err)
		}
		if xt.Shape[ax] != 1 {
			return nil, n.Errorf("cannot squeeze axis %d of size %d", ax, xt.Shape[ax])
		}
		drop[ax] = true
	}
	shape := ir.Shape{}
	for i, d := range xt.Shape {
		if !drop[i] {
			shape = append(shape, d)
		}
	}
	return trSingle(trReshapeTo(c, n.Input(0), shape))
}

func convUnsqueeze(c *Ctx, n *Node) ([]graph.Expr, error) {
	xt, err := trInputType(c, n, 0)
	if err != nil {
		return nil, err
	}
	axes, given, err := trAxesArg(c, n)
	if err != nil {
		return nil, err
	}
	if !given {
		return nil, n.Errorf("axes are missing")
	}
	r := len(xt.Shape) + len(axes)
	ins := make([]bool, r)
	for _, a := range axes {
		ax, err := op.NormAxis(a, r)
		if err != nil {
			return nil, n.Errorf("%v", err)
		}
		if ins[ax] {
			return nil, n.Errorf("axis %d repeated in %v", ax, axes)
		}
		ins[ax] = true
	}
	shape := make(ir.Shape, r)
	j := 0
	for i := range shape {
		if ins[i] {
			shape[i] = 1
		} else {
			shape[i] = xt.Shape[j]
			j++
		}
	}
	return trSingle(trReshapeTo(c, n.Input(0), shape))
}

func convTranspose(c *Ctx, n *Node) ([]graph.Expr, error) {
	return trSingle(c.Call(op.Transpose, []graph.Expr{n.Input(0)}, ir.Attrs{"axes": n.Ints("perm", []int64{})}))
}

func convConcat(c *Ctx, n *Node) ([]graph.Expr, error) {
	var args []graph.Expr
	for _, e := range n.Inputs {
		if e != nil {
			args = append(args, e)
		}
	}
	if len(args) == 0 {
		return nil, n.Errorf("no inputs")
	}
	if len(args) == 1 {
		return []graph.Expr{args[0]}, nil
	}
	def := int64(1) // Concat-1 defaulted to axis 1; from 4 it is required
	if n.Opset >= 4 && !n.Has("axis") {
		return nil, n.Errorf("the axis attribute is missing")
	}
	return trSingle(c.Call(op.Concatenate, args, ir.Attrs{"axis": n.Int("axis", def)}))
}

func convSplit(c *Ctx, n *Node) ([]graph.Expr, error) {
	xt, err := trInputType(c, n, 0)
	if err != nil {
		return nil, err
	}
	axis, err := op.NormAxis(n.Int("axis", 0), len(xt.Shape))
	if err != nil {
		return nil, n.Errorf("%v", err)
	}
	dim := xt.Shape[axis]
	sizes, given := n.Ints("split", nil), n.Has("split")
	if n.Opset >= 13 || (n.Opset < 2 && n.Input(1) != nil) {
		if sizes, given, err = trConstInts(c, n, 1, "split"); err != nil {
			return nil, err
		}
	}
	if n.Opset >= 18 && n.Has("num_outputs") {
		if given {
			return nil, n.Errorf("both the split input and the num_outputs attribute are given")
		}
		k := n.Int("num_outputs", 0)
		if k < 1 || k != int64(n.NumOutputs) {
			return nil, n.Errorf("num_outputs is %d, want the node's %d outputs (at least 1)", k, n.NumOutputs)
		}
		// Chunks of ceil(dim/k), the last one smaller.
		chunk := (dim + k - 1) / k
		if last := dim - chunk*(k-1); chunk == 0 || last <= 0 {
			return nil, n.Errorf("axis %d of size %d cannot be split into %d non-empty parts", axis, dim, k)
		}
		sizes = make([]int64, k)
		for i := range sizes {
			sizes[i] = chunk
		}
		sizes[k-1] = dim - chunk*(k-1)
		given = true
	}
	if !given || len(sizes) == 0 {
		k := int64(n.NumOutputs)
		if k < 1 {
			return nil, n.Errorf("no outputs")
		}
		if dim%k != 0 {
			return nil, n.Errorf("axis %d of size %d does not split into %d equal parts", axis, dim, k)
		}
		sizes = make([]int64, k)
		for i := range sizes {
			sizes[i] = dim / k
		}
	}
	if len(sizes) != n.NumOutputs {
		return nil, n.Errorf("split %v has %d parts but the node has %d outputs", sizes, len(sizes), n.NumOutputs)
	}
	indices := make([]int64, 0, len(sizes)-1)
	sum := int64(0)
	for i, s := range sizes {
		if s < 0 {
			return nil, n.Errorf("negative split size in %v", sizes)
		}
		sum += s
		if i < len(sizes)-1 {
			indices = append(indices, sum)
		}
	}
	if sum != dim {
		return nil, n.Errorf("split %v does not add up to axis %d of size %d", sizes, axis, dim)
	}
	if len(sizes) == 1 {
		return []graph.Expr{n.Input(0)}, nil
	}
	t, err := c.Call(op.Split, []graph.Expr{n.Input(0)}, ir.Attrs{"indices": indices, "axis": int64(axis)})
	if err != nil {
		return nil, err
	}
	outs := make([]graph.Expr, len(sizes))
	for i := range outs {
		if outs[i], err = c.Item(t, i); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// ResolveSlice turns ONNX/numpy slice parameters of one axis of size dim
// (negative values count from the end, out-of-range values clamp) into the
// absolute begin and end of strided_slice.
func ResolveSlice(start, end, step, dim int64) (int64, int64) {
	if start < 0 {
		start += dim
	}
	if end < 0 {
		end += dim
	}
	if step > 0 {
		return min(max(start, 0), dim), min(max(end, 0), dim)
	}
	return min(max(start, -1), dim-1), min(max(end, -1), dim-1)
}

// trSliceAxes builds a strided_slice of x; starts/ends/steps are per entry
// of axes (already checked to have equal lengths).
func trSliceAxes(c *Ctx, n *Node, x graph.Expr, starts, ends, axes, steps []int64) (graph.Expr, error) {
	xt, err := c.TensorType(x)
	if err != nil {
		return nil, err
	}
	r := len(xt.Shape)
	begin := make([]int64, len(axes))
	end := make([]int64, len(axes))
	norm := make([]int64, len(axes))
	trivial := true
	for i, a := range axes {
		ax, err := op.NormAxis(a, r)
		if err != nil {
			return nil, n.Errorf("%v", err)
		}
		if steps[i] == 0 {
			return nil, n.Errorf("step 0 on axis %d", ax)
		}
		norm[i] = int64(ax)
		begin[i], end[i] = ResolveSlice(starts[i], ends[i], steps[i], xt.Shape[ax])
		if begin[i] != 0 || end[i] != xt.Shape[ax] || steps[i] != 1 {
			trivial = false
		}
	}
	if trivial {
		return x, nil
	}
	return c.Call(op.StridedSlice, []graph.Expr{x}, ir.Attrs{"begin": begin, "end": end, "strides": steps, "axes": norm})
}

func convSlice(c *Ctx, n *Node) ([]graph.Expr, error) {
	var starts, ends, axes, steps []int64
	var err error
	if n.Opset < 10 {
		starts, ends, axes = n.Ints("starts", nil), n.Ints("ends", nil), n.Ints("axes", nil)
	} else {
		var ok bool
		if starts, ok, err = trConstInts(c, n, 1, "starts"); err != nil || !ok {
			return nil, trOrMissing(n, err, "starts")
		}
		if ends, ok, err = trConstInts(c, n, 2, "ends"); err != nil || !ok {
			return nil, trOrMissing(n, err, "ends")
		}
		if axes, _, err = trConstInts(c, n, 3, "axes"); err != nil {
			return nil, err
		}
		if steps, _, err = trConstInts(c, n, 4, "steps"); err != nil {
			return nil, err
		}
	}
	if axes == nil {
		axes = make([]int64, len(starts))
		for i := range axes {
			axes[i] = int64(i)
		}
	}
	if steps == nil {
		steps = make([]int64, len(starts))
		for i := range steps {
			steps[i] = 1
		}
	}
	if len(ends) != len(starts) || len(axes) != len(starts) || len(steps) != len(starts) {
		return nil, n.Errorf("starts %v, ends %v, axes %v and steps %v differ in length", starts, ends, axes, steps)
	}
	return trSingle(trSliceAxes(c, n, n.Input(0), starts, ends, axes, steps))
}

// trOrMissing returns err, or a "missing" error when err is nil.
func trOrMissing(n *Node, err error, what string) error {
	if err != nil {
		return err
	}
	return n.Errorf("the %s input is missing", what)
}

func convPad(c *Ctx, n *Node) ([]graph.Expr, error) {
	xt, err := trInputType(c, n, 0)
	if err != nil {
		return nil, err
	}
	r := len(xt.Shape)
	mode := n.String("mode", "constant")
	var pads []int64
	var value graph.Expr
	attrs := ir.Attrs{"pad_mode": mode}
	switch {
	case n.Opset >= 11:
		var ok bool
		if pads, ok, err = trConstInts(c, n, 1, "pads"); err != nil || !ok {
			return nil, trOrMissing(n, err, "pads")
		}
		if v := n.Input(2); v != nil {
			vt, err := c.TensorType(v)
			if err != nil {
				return nil, err
			}
			if vt.Shape.NumElements() != 1 {
				return nil, n.Errorf("constant_value must hold one element, got %s", vt)
			}
			if value, err = trReshapeTo(c, v, ir.Shape{}); err != nil {
				return nil, err
			}
		}
	case n.Opset >= 2:
		pads = n.Ints("pads", nil)
		attrs["pad_value"] = n.Float("value", 0)
	default:
		pads = n.Ints("paddings", nil)
		attrs["pad_value"] = n.Float("value", 0)
	}
	if n.Input(3) != nil {
		return nil, n.Errorf("the axes input (opset 18) is not supported")
	}
	if len(pads) != 2*r {
		return nil, n.Errorf("pads %v need %d entries for rank %d", pads, 2*r, r)
	}
	if mode != "constant" && mode != "edge" && mode != "reflect" {
		return nil, n.Errorf("unsupported mode %q", mode)
	}
	// Negative pads crop: slice first, then pad by the positive amounts.
	x := n.Input(0)
	width := make([]int64, 2*r)
	var starts, ends, axes, steps []int64
	for i := 0; i < r; i++ {
		b, e := pads[i], pads[r+i]
		if b < 0 || e < 0 {
			starts = append(starts, -min(b, 0))
			ends = append(ends, xt.Shape[i]+min(e, 0))
			axes = append(axes, int64(i))
			steps = append(steps, 1)
		}
		width[2*i], width[2*i+1] = max(b, 0), max(e, 0)
	}
	if len(axes) > 0 {
		if x, err = trSliceAxes(c, n, x, starts, ends, axes, steps); err != nil {
			return nil, err
		}
	}
	attrs["pad_width"] = width
	args := []graph.Expr{x}
	if value != nil {
		args = append(args, value)
	}
	return trSingle(c.Call(op.Pad, args, attrs))
}

func convTile(c *Ctx, n *Node) ([]graph.Expr, error) {
	xt, err := trInputType(c, n, 0)
	if err != nil {
		return nil, err
	}
	var reps []int64
	if n.Opset >= 6 {
		var ok bool
		if reps, ok, err = trConstInts(c, n, 1, "repeats"); err != nil || !ok {
			return nil, trOrMissing(n, err, "repeats")
		}
	} else {
		// Tile-1: a scalar count of tiles along one axis.
		tiles, ok, err := trConstInts(c, n, 1, "tiles")
		if err != nil || !ok || len(tiles) != 1 {
			return nil, trOrMissing(n, err, "tiles")
		}
		axis, ok, err := trConstInts(c, n, 2, "axis")
		if err != nil || !ok || len(axis) != 1 {
			return nil, trOrMissing(n, err, "axis")
		}
		ax, err := op.NormAxis(axis[0], len(xt.Shape))
		if err != nil {
			return nil, n.Errorf("%v", err)
		}
		reps = make([]int64, len(xt.Shape))
		for i := range reps {
			reps[i] = 1
		}
		reps[ax] = tiles[0]
	}
	return trSingle(c.Call(op.Tile, []graph.Expr{n.Input(0)}, ir.Attrs{"reps": reps}))
}

func convExpand(c *Ctx, n *Node) ([]graph.Expr, error) {
	xt, err := trInputType(c, n, 0)
	if err != nil {
		return nil, err
	}
	shape, ok, err := trConstInts(c, n, 1, "shape")
	if err != nil || !ok {
		return nil, trOrMissing(n, err, "shape")
	}
	out, err := op.BroadcastShapes(xt.Shape, ir.Shape(shape))
	if err != nil {
		return nil, n.Errorf("%v", err)
	}
	if out.Equal(xt.Shape) {
		return []graph.Expr{n.Input(0)}, nil
	}
	return trSingle(c.Call(op.BroadcastTo, []graph.Expr{n.Input(0)}, ir.Attrs{"shape": []int64(out)}))
}

func convGather(c *Ctx, n *Node) ([]graph.Expr, error) {
	return trSingle(c.Call(op.Take, []graph.Expr{n.Input(0), n.Input(1)}, ir.Attrs{"axis": n.Int("axis", 0)}))
}

func convGatherElements(c *Ctx, n *Node) ([]graph.Expr, error) {
	return trSingle(c.Call(op.GatherElements, []graph.Expr{n.Input(0), n.Input(1)}, ir.Attrs{"axis": n.Int("axis", 0)}))
}

func convGatherND(c *Ctx, n *Node) ([]graph.Expr, error) {
	return trSingle(c.Call(op.GatherND, []graph.Expr{n.Input(0), n.Input(1)}, ir.Attrs{"batch_dims": n.Int("batch_dims", 0)}))
}

func convScatterElements(c *Ctx, n *Node) ([]graph.Expr, error) {
	return trSingle(c.Call(op.ScatterElements, []graph.Expr{n.Input(0), n.Input(1), n.Input(2)},
		ir.Attrs{"axis": n.Int("axis", 0), "reduction": n.String("reduction", "none")}))
}

func convScatterND(c *Ctx, n *Node) ([]graph.Expr, error) {
	return trSingle(c.Call(op.ScatterND, []graph.Expr{n.Input(0), n.Input(1), n.Input(2)},
		ir.Attrs{"reduction": n.String("reduction", "none")}))
}

// trScalarConst makes a rank-0 constant of dtype dt.
func trScalarConst(c *Ctx, dt ir.DType, v float64) graph.Expr {
	return c.Constant(tensor.Scalar(dt, v))
}
