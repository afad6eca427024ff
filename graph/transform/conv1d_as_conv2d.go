package transform

import (
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Conv1DAsConv2D rewrites each nn.conv1d of statically shaped operands
// as an nn.conv2d over a height of 1:
//
//	nn.conv1d(x[N,C,W], w[O,C/g,K], strides [s], padding [l, r],
//	          dilation [d], groups g)
//	→ reshape(nn.conv2d(reshape(x, [N,C,1,W]), reshape(w, [O,C/g,1,K]),
//	          strides [1, s], padding [0, l, 0, r], dilation [1, d],
//	          groups g), [N,O,W'])
//
// so that a 1-D convolution (keyword spotting, audio, sequence models)
// gets the 2-D convolution's schedules (packed, register-blocked,
// vectorised) instead of the direct loop of its own compute. The driver
// runs it after partitioning, so an external target still sees, and may
// take, nn.conv1d (functions of external compilers are left alone). The reshapes keep the row-major data as it is
// (a constant weight becomes a constant of the 4-D shape over the same
// bytes), and a bias and activation follow the output's reshape as they
// followed the conv1d. The values are the same: the height dimension has one row, no
// padding, stride 1 and dilation 1.
func Conv1DAsConv2D(m *graph.Module) (*graph.Module, error) {
	r := newBodyRewriter(func(e graph.Expr) (graph.Expr, error) {
		if _, err := graph.InferExpr(m, e); err != nil {
			return nil, err
		}
		out := conv1dAsConv2d(e)
		if out != e {
			if _, err := inferNew(m, out); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
	return mapModule(m, r.function)
}

// conv1dAsConv2d returns the conv2d form of e when e is an nn.conv1d
// with static shapes and valid attributes, else e.
func conv1dAsConv2d(e graph.Expr) graph.Expr {
	c, ok := e.(*graph.Call)
	if !ok || c.Op != op.Conv1D {
		return e
	}
	xt, ok1 := c.Args[0].Type().(*ir.TensorType)
	wt, ok2 := c.Args[1].Type().(*ir.TensorType)
	ot, ok3 := c.Type().(*ir.TensorType)
	if !ok1 || !ok2 || !ok3 || len(xt.Shape) != 3 || len(wt.Shape) != 3 || len(ot.Shape) != 3 || !static(xt.Shape) || !static(wt.Shape) || !static(ot.Shape) {
		return e
	}
	strides, padBegin, padEnd, dilation, err := op.SpatialAttrs(c.Attrs, 1)
	if err != nil {
		return e
	}
	attrs := c.Attrs.Clone()
	attrs["strides"] = []int64{1, strides[0]}
	attrs["padding"] = []int64{0, padBegin[0], 0, padEnd[0]}
	attrs["dilation"] = []int64{1, dilation[0]}
	reshape := func(x graph.Expr, shape ...int64) graph.Expr {
		return graph.MustCall(op.Reshape, []graph.Expr{x}, ir.Attrs{"newshape": shape})
	}
	x := reshape(c.Args[0], xt.Shape[0], xt.Shape[1], 1, xt.Shape[2])
	wshape := ir.Shape{wt.Shape[0], wt.Shape[1], 1, wt.Shape[2]}
	var w graph.Expr
	if k, ok := c.Args[1].(*graph.Constant); ok {
		// The same bytes under the 4-D shape: the weight stays a
		// constant, which the layout passes repack.
		w = graph.NewConstant(&tensor.Tensor{DType: k.Value.DType, Shape: wshape, Data: k.Value.Data})
	} else {
		w = reshape(c.Args[1], wshape...)
	}
	conv := graph.MustCall(op.Conv2D, []graph.Expr{x, w}, attrs)
	conv.Span = c.Span
	out := graph.MustCall(op.Reshape, []graph.Expr{conv}, ir.Attrs{"newshape": []int64(ot.Shape)})
	out.Span = c.Span
	return out
}

// static reports whether every dimension of s is known.
func static(s ir.Shape) bool {
	for _, d := range s {
		if d < 0 {
			return false
		}
	}
	return true
}
