package onnx

import (
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
)

// Converters of reductions (Reduce*, ArgMax/ArgMin), scans (CumSum), TopK,
// Trilu, ReverseSequence and OneHot. ReduceL1/L2/LogSum/LogSumExp/SumSquare
// are compositions of sum/max with elementwise ops.

func init() {
	for _, name := range []string{"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
		"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"} {
		register(name, 1, convReduce)
	}
	register("ReduceSum", 13, convReduce)
	register("ArgMax", 1, convArg(op.ArgMax))
	register("ArgMin", 1, convArg(op.ArgMin))
	register("CumSum", 11, convCumSum)
	register("TopK", 1, convTopK)
	register("TopK", 10, convTopK)
	register("Trilu", 14, convTrilu)
	register("ReverseSequence", 10, convReverseSequence)
	register("OneHot", 9, convOneHot)
}

// trReduceAxes resolves the axes of a Reduce* node: the attribute (or, for
// ReduceSum from opset 13 and the others from 18, the input), all axes when none are given, and
// ok=false for a no-op (noop_with_empty_axes with empty axes).
func trReduceAxes(c *Ctx, n *Node, rank int) (axes []int64, ok bool, err error) {
	given := false
	if (n.OpType == "ReduceSum" && n.Opset >= 13) || n.Opset >= 18 {
		if axes, given, err = trConstInts(c, n, 1, "axes"); err != nil {
			return nil, false, err
		}
	} else {
		axes, given = n.Ints("axes", nil), n.Has("axes")
	}
	if !given || len(axes) == 0 {
		if n.Int("noop_with_empty_axes", 0) != 0 {
			return nil, false, nil
		}
		axes = make([]int64, rank)
		for i := range axes {
			axes[i] = int64(i)
		}
	}
	norm, err := op.ReduceAxes(axes, rank)
	if err != nil {
		return nil, false, n.Errorf("%v", err)
	}
	out := make([]int64, len(norm))
	for i, a := range norm {
		out[i] = int64(a)
	}
	return out, true, nil
}

func convReduce(c *Ctx, n *Node) ([]graph.Expr, error) {
	x := n.Input(0)
	xt, err := trInputType(c, n, 0)
	if err != nil {
		return nil, err
	}
	keep := n.Int("keepdims", 1) != 0 // read even when the node is a no-op
	axes, ok, err := trReduceAxes(c, n, len(xt.Shape))
	if err != nil {
		return nil, err
	}
	if !ok {
		return []graph.Expr{x}, nil
	}
	attrs := ir.Attrs{"axis": axes, "keepdims": keep}
	unary := func(o *op.Op, e graph.Expr) (graph.Expr, error) { return c.Call(o, []graph.Expr{e}, nil) }
	square := func(e graph.Expr) (graph.Expr, error) { return c.Call(op.Multiply, []graph.Expr{e, e}, nil) }
	var e graph.Expr
	switch n.OpType {
	case "ReduceSum":
		e, err = c.Call(op.Sum, []graph.Expr{x}, attrs)
	case "ReduceMean":
		e, err = c.Call(op.Mean, []graph.Expr{x}, attrs)
	case "ReduceMax":
		e, err = c.Call(op.Max, []graph.Expr{x}, attrs)
	case "ReduceMin":
		e, err = c.Call(op.Min, []graph.Expr{x}, attrs)
	case "ReduceProd":
		e, err = c.Call(op.Prod, []graph.Expr{x}, attrs)
	case "ReduceL1":
		if e, err = unary(op.Abs, x); err == nil {
			e, err = c.Call(op.Sum, []graph.Expr{e}, attrs)
		}
	case "ReduceSumSquare":
		if e, err = square(x); err == nil {
			e, err = c.Call(op.Sum, []graph.Expr{e}, attrs)
		}
	case "ReduceL2":
		if e, err = square(x); err == nil {
			if e, err = c.Call(op.Sum, []graph.Expr{e}, attrs); err == nil {
				e, err = unary(op.Sqrt, e)
			}
		}
	case "ReduceLogSum":
		if e, err = c.Call(op.Sum, []graph.Expr{x}, attrs); err == nil {
			e, err = unary(op.Log, e)
		}
	case "ReduceLogSumExp":
		e, err = trLogSumExp(c, x, axes, keep)
	default:
		return nil, n.Errorf("unknown reduction")
	}
	return trSingle(e, err)
}

// trLogSumExp computes log(sum(exp(x - m))) + m with m the maximum over the
// axes, which does not overflow for large inputs.
func trLogSumExp(c *Ctx, x graph.Expr, axes []int64, keep bool) (graph.Expr, error) {
	m, err := c.Call(op.Max, []graph.Expr{x}, ir.Attrs{"axis": axes, "keepdims": true})
	if err != nil {
		return nil, err
	}
	d, err := c.Call(op.Subtract, []graph.Expr{x, m}, nil)
	if err != nil {
		return nil, err
	}
	if d, err = c.Call(op.Exp, []graph.Expr{d}, nil); err != nil {
		return nil, err
	}
	if d, err = c.Call(op.Sum, []graph.Expr{d}, ir.Attrs{"axis": axes, "keepdims": keep}); err != nil {
		return nil, err
	}
	if d, err = c.Call(op.Log, []graph.Expr{d}, nil); err != nil {
		return nil, err
	}
	if !keep {
		dt, err := c.TensorType(d)
		if err != nil {
			return nil, err
		}
		if m, err = trReshapeTo(c, m, dt.Shape); err != nil {
			return nil, err
		}
	}
	return c.Call(op.Add, []graph.Expr{d, m}, nil)
}

func convArg(o *op.Op) Converter {
	return func(c *Ctx, n *Node) ([]graph.Expr, error) {
		return trSingle(c.Call(o, []graph.Expr{n.Input(0)}, ir.Attrs{
			"axis":              n.Int("axis", 0),
			"keepdims":          n.Int("keepdims", 1) != 0,
			"select_last_index": n.Int("select_last_index", 0) != 0,
		}))
	}
}

// trScalarInt reads a constant one-element integer input.
func trScalarInt(c *Ctx, n *Node, i int, what string) (int64, bool, error) {
	v, ok, err := trConstInts(c, n, i, what)
	if err != nil || !ok {
		return 0, ok, err
	}
	if len(v) != 1 {
		return 0, false, n.Errorf("%s must hold one value, got %d", what, len(v))
	}
	return v[0], true, nil
}

func convCumSum(c *Ctx, n *Node) ([]graph.Expr, error) {
	axis, ok, err := trScalarInt(c, n, 1, "axis")
	if err != nil || !ok {
		return nil, trOrMissing(n, err, "axis")
	}
	return trSingle(c.Call(op.CumSum, []graph.Expr{n.Input(0)}, ir.Attrs{
		"axis": axis, "exclusive": n.Int("exclusive", 0) != 0, "reverse": n.Int("reverse", 0) != 0,
	}))
}

func convTopK(c *Ctx, n *Node) ([]graph.Expr, error) {
	k := n.Int("k", -1)
	if n.Opset >= 10 {
		var ok bool
		var err error
		if k, ok, err = trScalarInt(c, n, 1, "K"); err != nil || !ok {
			return nil, trOrMissing(n, err, "K")
		}
	} else if !n.Has("k") {
		return nil, n.Errorf("the k attribute is missing")
	}
	t, err := c.Call(op.TopK, []graph.Expr{n.Input(0)}, ir.Attrs{
		"k": k, "axis": n.Int("axis", -1),
		"largest": n.Int("largest", 1) != 0, "sorted": n.Int("sorted", 1) != 0,
	})
	if err != nil {
		return nil, err
	}
	v, err := c.Item(t, 0)
	if err != nil {
		return nil, err
	}
	i, err := c.Item(t, 1)
	if err != nil {
		return nil, err
	}
	return []graph.Expr{v, i}, nil
}

func convTrilu(c *Ctx, n *Node) ([]graph.Expr, error) {
	k, _, err := trScalarInt(c, n, 1, "k")
	if err != nil {
		return nil, err
	}
	return trSingle(c.Call(op.Trilu, []graph.Expr{n.Input(0)}, ir.Attrs{"upper": n.Int("upper", 1) != 0, "k": k}))
}

func convReverseSequence(c *Ctx, n *Node) ([]graph.Expr, error) {
	return trSingle(c.Call(op.ReverseSequence, []graph.Expr{n.Input(0), n.Input(1)}, ir.Attrs{
		"seq_axis": n.Int("time_axis", 0), "batch_axis": n.Int("batch_axis", 1),
	}))
}

func convOneHot(c *Ctx, n *Node) ([]graph.Expr, error) {
	dt, err := c.Const(n.Input(1), "depth")
	if err != nil {
		return nil, err
	}
	if dt.Len() != 1 {
		return nil, n.Errorf("depth must hold one value, got %v", dt.Shape)
	}
	depth := int64(dt.Float(0)) // depth may be given as a float tensor
	vals := n.Input(2)
	vt, err := trInputType(c, n, 2)
	if err != nil {
		return nil, err
	}
	if vt.Shape.NumElements() != 2 {
		return nil, n.Errorf("values must hold [off_value, on_value], got %s", vt)
	}
	if vals, err = trReshapeTo(c, vals, ir.Shape{2}); err != nil {
		return nil, err
	}
	pick := func(i int64) (graph.Expr, error) {
		e, err := c.Call(op.StridedSlice, []graph.Expr{vals}, ir.Attrs{
			"begin": []int64{i}, "end": []int64{i + 1}, "strides": []int64{1}, "axes": []int64{0}})
		if err != nil {
			return nil, err
		}
		return trReshapeTo(c, e, ir.Shape{})
	}
	off, err := pick(0)
	if err != nil {
		return nil, err
	}
	on, err := pick(1)
	if err != nil {
		return nil, err
	}
	return trSingle(c.Call(op.OneHot, []graph.Expr{n.Input(0), on, off}, ir.Attrs{"depth": depth, "axis": n.Int("axis", -1)}))
}
