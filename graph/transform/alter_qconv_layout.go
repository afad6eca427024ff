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
// kernel_zero_point 0 and a constant int8 OIHW4i weight that want
// accepts to kernel_layout OIHW4i16o, the
// weight repacked at compile time: sixteen output channels' words of a
// tap side by side, the layout of the CPU kernel's broadcast form
// (topi/qnn_conv_bcast.go: output channels in the vector lanes, each
// pixel's word broadcast). Data and output stay NCHW. A weight shared by
// several convolutions is packed once. Output channels not a multiple of
// 16 are padded to one where that adds at most an eighth
// (qconvPadWorth): the weight, bias, multipliers and weight sums with
// zeros, and a strided_slice cuts the result back. In the standard pass list the
// pass changes nothing; the driver gives it the host target's choice.
func AlterQConvLayout(m *graph.Module, want QConvLayoutChoice) (*graph.Module, error) {
	packed := map[*tensor.Tensor]*graph.Constant{}
	r := newBodyRewriter(func(e graph.Expr) (graph.Expr, error) {
		if _, err := graph.InferExpr(m, e); err != nil {
			return nil, err
		}
		out, cut := alterQConv(e, want, packed)
		if out == e {
			return e, nil
		}
		// Typed for the consumers' InferExpr (and the cut's).
		if _, err := graph.InferExpr(m, out); err != nil {
			return nil, err
		}
		if cut == 0 {
			return out, nil
		}
		sl, err := graph.NewCall(op.StridedSlice, []graph.Expr{out}, ir.Attrs{"begin": []int64{0}, "end": []int64{cut}, "strides": []int64{1}, "axes": []int64{1}})
		if err != nil {
			return nil, err
		}
		sl.Span = out.(*graph.Call).Span
		if _, err := graph.InferExpr(m, sl); err != nil {
			return nil, err
		}
		return sl, nil
	})
	return mapModule(m, r.function)
}

// alterQConv is e rewritten, or e; cut, when not 0, is the output
// channels the caller cuts the rewritten call's result back to.
func alterQConv(e graph.Expr, want QConvLayoutChoice, packed map[*tensor.Tensor]*graph.Constant) (graph.Expr, int64) {
	c, ok := e.(*graph.Call)
	if !ok || want == nil || c.Op != op.QConv2DRequantize || len(c.Args) < 4 || c.Attrs.Str("kernel_layout") != "OIHW4i" ||
		c.Attrs.Int("groups") != 1 || c.Attrs.Int("kernel_zero_point") != 0 {
		return e, 0
	}
	w, ok := c.Args[1].(*graph.Constant)
	if !ok || w.Value == nil || w.Value.DType != ir.Int8 || len(w.Value.Shape) != 5 {
		return e, 0
	}
	xt, ok1 := c.Args[0].Type().(*ir.TensorType)
	ot, ok2 := c.Type().(*ir.TensorType)
	if !ok1 || !ok2 || len(xt.Shape) != 4 || len(ot.Shape) != 4 {
		return e, 0
	}
	// O not a multiple of 16: the channels padded to one (zero weights,
	// biases, multipliers and sums), and the result cut back to O.
	o := w.Value.Shape[0]
	o16 := (o + 15) / 16 * 16
	if o16 != o && !qconvPadWorth(o, o16) {
		return e, 0
	}
	ws, os := w.Value.Shape.Clone(), ot.Shape.Clone()
	ws[0], os[1] = o16, o16
	if !want(xt.Shape, ws, os, c.Attrs) {
		return e, 0
	}
	args := append([]graph.Expr{}, c.Args...)
	if o16 != o {
		// The bias, the multipliers (one per channel, or one) and the
		// weight sums (qnn_kernel_sums) after them.
		for i := 2; i < len(args); i++ {
			k, ok := args[i].(*graph.Constant)
			if !ok || k.Value == nil || len(k.Value.Shape) > 1 {
				return e, 0
			}
			if i == 3 && (len(k.Value.Shape) == 0 || k.Value.Shape[0] == 1) {
				continue
			}
			if len(k.Value.Shape) != 1 || k.Value.Shape[0] != o {
				return e, 0
			}
			args[i] = graph.NewConstant(padFirstAxis(k.Value, o16))
		}
	}
	pc := packed[w.Value]
	if pc == nil {
		pw, err := ref.PackOIHW4i16o(padFirstAxis(w.Value, o16))
		if err != nil {
			return e, 0
		}
		pc = graph.NewConstant(pw)
		packed[w.Value] = pc
	}
	args[1] = pc
	attrs := c.Attrs.Clone()
	attrs["kernel_layout"] = "OIHW4i16o"
	nc, err := graph.NewCall(c.Op, args, attrs)
	if err != nil {
		return e, 0
	}
	nc.Span = c.Span
	if o16 == o {
		return nc, 0
	}
	return nc, o
}

// qconvPadWorth reports whether a convolution of o output channels may
// compute o16 (o rounded up to 16) for the broadcast form: at least 32
// channels, at most an eighth more (squeezenet1_1's classifier: 1000 ->
// 1008).
func qconvPadWorth(o, o16 int64) bool { return o >= 32 && o16*8 <= o*9 }

// padFirstAxis is t with its first axis grown to n, the new elements
// zero (t itself when it has n already).
func padFirstAxis(t *tensor.Tensor, n int64) *tensor.Tensor {
	if t.Shape[0] == n {
		return t
	}
	s := t.Shape.Clone()
	s[0] = n
	out := tensor.New(t.DType, s)
	copy(out.Data, t.Data)
	return out
}
