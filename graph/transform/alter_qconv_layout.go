package transform

import (
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// QConvLayoutChoice reports whether a qnn.conv2d_requantize of data,
// OIHW4i weight and output shapes (NCHW, [O, ceil(I/4), KH, KW, 4],
// NCHW) and attributes should take kernel_layout OIHW4i16o: what a
// target's kernels run faster (topi.QConvBroadcastChoice).
type QConvLayoutChoice func(data, weight, out ir.Shape, attrs ir.Attrs) bool

// AlterQConvLayout rewrites every qnn.conv2d_requantize with groups 1,
// kernel_zero_point 0 and a constant int8 OIHW4i weight of a multiple of
// 16 output channels that want accepts to kernel_layout OIHW4i16o, the
// weight repacked at compile time: sixteen output channels' words of a
// tap side by side, the layout of the CPU kernel's broadcast form
// (topi/qnn_conv_bcast.go: output channels in the vector lanes, each
// pixel's word broadcast). Data and output stay NCHW. A weight shared by
// several convolutions is packed once. In the standard pass list the
// pass changes nothing; the driver gives it the host target's choice.
func AlterQConvLayout(m *graph.Module, want QConvLayoutChoice) (*graph.Module, error) {
	packed := map[*tensor.Tensor]*graph.Constant{}
	r := newBodyRewriter(func(e graph.Expr) (graph.Expr, error) {
		if _, err := graph.InferExpr(m, e); err != nil {
			return nil, err
		}
		out := alterQConv(e, want, packed)
		if out != e {
			// Typed for the consumers' InferExpr.
			if _, err := graph.InferExpr(m, out); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
	return mapModule(m, r.function)
}

func alterQConv(e graph.Expr, want QConvLayoutChoice, packed map[*tensor.Tensor]*graph.Constant) graph.Expr {
	c, ok := e.(*graph.Call)
	if !ok || want == nil || c.Op != op.QConv2DRequantize || len(c.Args) < 4 || c.Attrs.Str("kernel_layout") != "OIHW4i" ||
		c.Attrs.Int("groups") != 1 || c.Attrs.Int("kernel_zero_point") != 0 {
		return e
	}
	w, ok := c.Args[1].(*graph.Constant)
	if !ok || w.Value == nil || w.Value.DType != ir.Int8 || len(w.Value.Shape) != 5 || w.Value.Shape[0]%16 != 0 {
		return e
	}
	xt, ok1 := c.Args[0].Type().(*ir.TensorType)
	ot, ok2 := c.Type().(*ir.TensorType)
	if !ok1 || !ok2 || len(xt.Shape) != 4 || len(ot.Shape) != 4 || !want(xt.Shape, w.Value.Shape, ot.Shape, c.Attrs) {
		return e
	}
	pc := packed[w.Value]
	if pc == nil {
		pw, err := ref.PackOIHW4i16o(w.Value)
		if err != nil {
			return e
		}
		pc = graph.NewConstant(pw)
		packed[w.Value] = pc
	}
	args := append([]graph.Expr{}, c.Args...)
	args[1] = pc
	attrs := c.Attrs.Clone()
	attrs["kernel_layout"] = "OIHW4i16o"
	nc, err := graph.NewCall(c.Op, args, attrs)
	if err != nil {
		return e
	}
	nc.Span = c.Span
	return nc
}
