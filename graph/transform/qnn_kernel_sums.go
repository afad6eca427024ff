package transform

import (
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// QNNKernelSums gives every qnn.conv2d (groups 1), qnn.conv2d_requantize
// (groups 1) and qnn.dense call whose weight is a constant its kernel
// sums, computed here: each output channel's sum of its weight values,
// as an int32 [O] constant argument (graph/op: the optional last
// argument of those operators). The CPU kernels multiply uncentred data
// with the weight and subtract input_zero_point times these sums; without
// the argument they sum the weight on every run (mobilenet_v2's int8
// classifier, 1280 -> 1000: 0.196 ms with the sums per run, 0.080 without,
// AVX2). A weight shared by several calls is summed once. Calls that
// already have sums, depthwise and grouped convolutions (whose kernels
// centre the data instead) and calls with a computed weight are left
// alone.
//
// It runs after partitioning (external targets see the operators as the
// model gave them) and before fusion.
func QNNKernelSums(m *graph.Module) (*graph.Module, error) {
	sums := map[*tensor.Tensor]*graph.Constant{}
	r := newBodyRewriter(func(e graph.Expr) (graph.Expr, error) {
		return kernelSums(e, sums)
	})
	return mapModule(m, r.function)
}

// kernelSums is e with its kernel sums when it is a call QNNKernelSums
// rewrites, else e.
func kernelSums(e graph.Expr, sums map[*tensor.Tensor]*graph.Constant) (graph.Expr, error) {
	c, ok := e.(*graph.Call)
	if !ok {
		return e, nil
	}
	var n int
	switch c.Op {
	case op.QConv2D:
		n = 2
	case op.QConv2DRequantize:
		n = 4
	case op.QDense:
		n = 2
	default:
		return e, nil
	}
	if len(c.Args) != n || (c.Op != op.QDense && c.Attrs.Int("groups") != 1) {
		return e, nil
	}
	w, ok := c.Args[1].(*graph.Constant)
	if !ok || w.Value == nil || len(w.Value.Shape) == 0 || (w.Value.DType != ir.Int8 && w.Value.DType != ir.Uint8) {
		return e, nil
	}
	s, ok := sums[w.Value]
	if !ok {
		s = graph.NewConstant(weightSums(w.Value))
		sums[w.Value] = s
	}
	args := append(append([]graph.Expr{}, c.Args...), s)
	nc, err := graph.NewCall(c.Op, args, c.Attrs.Clone())
	if err != nil {
		return nil, err
	}
	// The call's ONNX node, for profiles and the report.
	nc.Span = c.Span
	return nc, nil
}

// weightSums is the int32 sum of every output channel's weights in w
// (int8 or uint8): of every first-axis slice, or for a 6-D OIHW4i16o
// weight ([O/16, C4, KH, KW, 16, 4]) of every index of the fifth axis
// within a slice; wrapping as int32 arithmetic does.
func weightSums(w *tensor.Tensor) *tensor.Tensor {
	o, lanes := w.Shape[0], int64(1)
	if len(w.Shape) == 6 {
		lanes = w.Shape[4]
	}
	out := tensor.New(ir.Int32, ir.Shape{o * lanes})
	if o*lanes == 0 {
		return out
	}
	// Element j of slice i belongs to channel i*lanes + (j/inner)%lanes,
	// with inner the elements after the channel axis.
	per, inner := w.Len()/int(o), 1
	if lanes > 1 {
		inner = int(w.Shape[5])
	}
	s := out.Int32s()
	sums := make([]int64, o*lanes)
	for i := 0; i < int(o); i++ {
		for j := 0; j < per; j++ {
			sums[int64(i)*lanes+int64(j/inner)%lanes] += w.Int(i*per + j)
		}
	}
	for i, t := range sums {
		s[i] = int32(t)
	}
	return out
}
