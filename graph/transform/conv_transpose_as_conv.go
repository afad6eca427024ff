package transform

import (
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// ConvTransposeAsConv rewrites each float nn.conv2d_transpose with a
// constant weight and static shapes as an nn.conv2d, so that transposed
// convolutions (U-Net decoders, segmentation and GAN upsampling) get the
// convolution's schedules instead of the direct loop of their own compute,
// which tests every kernel tap of every output for a stride match.
//
// A kernel equal to its stride without padding (U-Net's 2x2 stride-2
// up-convolution) writes each input pixel's k*k outputs apart from every
// other's: it becomes a 1x1 convolution to O*kh*kw channels whose result
// is interleaved into place (depth to space):
//
//	reshape(transpose(reshape(nn.conv2d(x, W1), [N,O,kh,kw,H,W]),
//	        [0,1,4,2,5,3]), [N,O,H*kh,W*kw])
//	W1[(o*kh+dy)*kw+dx, c, 0, 0] = w[c, o, dy, dx]
//
// Any other transposed convolution (groups 1) is the convolution of the
// input with s-1 zeros inserted after every value (reshape, nn.pad,
// reshape) by the kernel flipped and its channel axes swapped, padded by
// dilation*(k-1) - pad at the start and so that the output has the
// transposed convolution's size at the end:
//
//	nn.conv2d(dilate(x, s), W2, padding [...], dilation d)
//	W2[o, c, ky, kx] = w[c, o, kh-1-ky, kw-1-kx]
//
// (a factor s*s more multiplications than the nonzero inputs need, on the
// fast path). Sums run over the same products in another order: the
// values agree with the reference within float rounding. A padding larger
// than dilation*(k-1), which the convolution cannot express without
// cropping, groups > 1 in the general form, and integer or quantized
// operands keep nn.conv2d_transpose. Like conv1d_as_conv2d, the driver runs
// it after partitioning, so an external target still sees, and may take,
// the transposed convolution.
func ConvTransposeAsConv(m *graph.Module) (*graph.Module, error) {
	r := newBodyRewriter(func(e graph.Expr) (graph.Expr, error) {
		if _, err := graph.InferExpr(m, e); err != nil {
			return nil, err
		}
		out := convTransposeAsConv(e)
		if out != e {
			if _, err := inferNew(m, out); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
	return mapModule(m, r.function)
}

func convTransposeAsConv(e graph.Expr) graph.Expr {
	c, ok := e.(*graph.Call)
	if !ok || c.Op != op.Conv2DTranspose {
		return e
	}
	xt, ok1 := c.Args[0].Type().(*ir.TensorType)
	wt, ok2 := c.Args[1].Type().(*ir.TensorType)
	ot, ok3 := c.Type().(*ir.TensorType)
	wc, ok4 := c.Args[1].(*graph.Constant)
	if !ok1 || !ok2 || !ok3 || !ok4 || len(xt.Shape) != 4 || len(wt.Shape) != 4 || !static(xt.Shape) || !static(wt.Shape) || !static(ot.Shape) {
		return e
	}
	if xt.DType != ir.Float32 || wc.Value.DType != ir.Float32 {
		return e
	}
	s, pb, pe, dil, err := op.SpatialAttrs(c.Attrs, 2)
	if err != nil {
		return e
	}
	opad := c.Attrs.Ints("output_padding")
	g := c.Attrs.Int("groups")
	if len(opad) != 2 || g < 1 {
		return e
	}
	n, ci, h, w := xt.Shape[0], xt.Shape[1], xt.Shape[2], xt.Shape[3]
	o, kh, kw := ot.Shape[1], wt.Shape[2], wt.Shape[3]
	og := wt.Shape[1] // output channels per group
	wv := wc.Value.Float32s()
	reshape := func(x graph.Expr, shape ...int64) graph.Expr {
		return graph.MustCall(op.Reshape, []graph.Expr{x}, ir.Attrs{"newshape": shape})
	}
	spanned := func(x *graph.Call) *graph.Call { x.Span = c.Span; return x }
	conv := func(x graph.Expr, wt *tensor.Tensor, pad, dilation []int64) *graph.Call {
		return spanned(graph.MustCall(op.Conv2D, []graph.Expr{x, graph.NewConstant(wt)}, ir.Attrs{
			"strides": []int64{1, 1}, "padding": pad, "dilation": dilation, "groups": int64(1)}))
	}
	if g == 1 && s[0] == kh && s[1] == kw && dil[0] == 1 && dil[1] == 1 &&
		pb[0] == 0 && pb[1] == 0 && pe[0] == 0 && pe[1] == 0 && opad[0] == 0 && opad[1] == 0 {
		w1 := tensor.New(ir.Float32, ir.Shape{o * kh * kw, ci, 1, 1})
		d := w1.Float32s()
		for cc := range ci {
			for oo := range o {
				for dy := range kh {
					for dx := range kw {
						d[((oo*kh+dy)*kw+dx)*ci+cc] = wv[((cc*o+oo)*kh+dy)*kw+dx]
					}
				}
			}
		}
		z := conv(c.Args[0], w1, []int64{0, 0, 0, 0}, []int64{1, 1})
		t := spanned(graph.MustCall(op.Transpose, []graph.Expr{reshape(z, n, o, kh, kw, h, w)}, ir.Attrs{"axes": []int64{0, 1, 4, 2, 5, 3}}))
		return spanned(reshape(t, n, o, h*kh, w*kw).(*graph.Call))
	}
	if g != 1 {
		return e
	}
	// Padding of the zero-inserted input: before, dil*(k-1) - pb; after,
	// whatever makes the output size, less the s-1 zeros the insertion
	// leaves after the last value.
	k := []int64{kh, kw}
	in := []int64{h, w}
	out := []int64{ot.Shape[2], ot.Shape[3]}
	var before, after [2]int64
	for i := range 2 {
		before[i] = dil[i]*(k[i]-1) - pb[i]
		after[i] = out[i] + dil[i]*(k[i]-1) - before[i] - in[i]*s[i]
		if before[i] < 0 || after[i] < -(s[i]-1) {
			return e
		}
	}
	x := c.Args[0]
	if s[0] > 1 || s[1] > 1 {
		// dilate: [N,C,H,1,W,1] padded to [N,C,H,sh,W,sw].
		pad := spanned(graph.MustCall(op.Pad, []graph.Expr{reshape(x, n, ci, h, 1, w, 1)}, ir.Attrs{
			"pad_width": []int64{0, 0, 0, 0, 0, 0, 0, s[0] - 1, 0, 0, 0, s[1] - 1}}))
		x = reshape(pad, n, ci, h*s[0], w*s[1])
	}
	// A negative padding after is the end of the trailing zeros the
	// insertion left; cropping them is a slice.
	if after[0] < 0 || after[1] < 0 {
		x = spanned(graph.MustCall(op.StridedSlice, []graph.Expr{x}, ir.Attrs{
			"begin": []int64{0, 0, 0, 0}, "end": []int64{n, ci, h*s[0] + min(after[0], 0), w*s[1] + min(after[1], 0)},
			"strides": []int64{1, 1, 1, 1}, "axes": []int64{0, 1, 2, 3}}))
		after[0], after[1] = max(after[0], 0), max(after[1], 0)
	}
	w2 := tensor.New(ir.Float32, ir.Shape{og, ci, kh, kw})
	d := w2.Float32s()
	for cc := range ci {
		for oo := range og {
			for ky := range kh {
				for kx := range kw {
					d[((oo*ci+cc)*kh+ky)*kw+kx] = wv[((cc*og+oo)*kh+(kh-1-ky))*kw+(kw-1-kx)]
				}
			}
		}
	}
	return conv(x, w2, []int64{before[0], before[1], after[0], after[1]}, dil)
}
