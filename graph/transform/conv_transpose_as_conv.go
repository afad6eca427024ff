package transform

import (
	"math"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/budget"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// ConvTransposeAsConv rewrites each float nn.conv2d_transpose with a
// constant weight and static shapes as an nn.conv2d, so that transposed
// convolutions (U-Net decoders, segmentation and GAN upsampling) get the
// convolution's schedules instead of the direct loop of their own compute,
// which tests every kernel tap of every output for a stride match.
//
// A strided one with dilation 1 and groups 1 becomes its sub-pixel form
// (subPixel): one convolution to O*sy*sx channels, the s*s output phases,
// interleaved into place (depth to space) and cropped by the padding:
//
//	crop(reshape(transpose(reshape(nn.conv2d(x, V), [N,O,sy,sx,Qy,Qx]),
//	     [0,1,4,2,5,3]), [N,O,sy*Qy,sx*Qx]))
//
// For U-Net's 2x2 stride-2 up-convolution V is a 1x1 kernel and nothing is
// cropped. Any other transposed convolution with groups 1 (stride 1, or a
// dilation) is the convolution of the input with s-1 zeros inserted after
// every value (reshape, nn.pad, reshape) by the kernel flipped and its
// channel axes swapped, padded by dilation*(k-1) - pad at the start and so
// that the output has the transposed convolution's size at the end:
//
//	nn.conv2d(dilate(x, s), W2, padding [...], dilation d)
//	W2[o, c, ky, kx] = w[c, o, kh-1-ky, kw-1-kx]
//
// (exactly the products needed at stride 1, s*s times as many otherwise).
// Sums run over the same products in another order: the values agree
// with the reference within float rounding. A padding larger than
// dilation*(k-1), which the convolution cannot express without cropping,
// groups > 1, and integer or quantized operands keep nn.conv2d_transpose.
// Like conv1d_as_conv2d, the driver runs it after partitioning, so an
// external target still sees, and may take, the transposed convolution.
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
	s, pb, _, dil, err := op.SpatialAttrs(c.Attrs, 2)
	if err != nil || c.Attrs.Int("groups") != 1 {
		return e
	}
	r := &convTranspose{c: c, x: xt.Shape, out: ot.Shape, kh: wt.Shape[2], kw: wt.Shape[3], w: wc.Value.Float32s(), s: s, pb: pb, dil: dil}
	var out graph.Expr
	if dil[0] == 1 && dil[1] == 1 && (s[0] > 1 || s[1] > 1) {
		out = r.subPixel()
	} else {
		out = r.zeroInserted()
	}
	if out == nil {
		return e
	}
	return out
}

// convTranspose is one groups-1 nn.conv2d_transpose being rewritten: its
// input and output shapes (NCHW), kernel size, float32 weight (IOHW),
// strides, padding before and dilation.
type convTranspose struct {
	c          *graph.Call
	x, out     ir.Shape
	kh, kw     int64
	w          []float32
	s, pb, dil []int64
}

// call makes a call that carries the transposed convolution's span.
func (r *convTranspose) call(o *op.Op, x graph.Expr, attrs ir.Attrs) graph.Expr {
	nc := graph.MustCall(o, []graph.Expr{x}, attrs)
	nc.Span = r.c.Span
	return nc
}

func (r *convTranspose) reshape(x graph.Expr, shape ...int64) graph.Expr {
	return r.call(op.Reshape, x, ir.Attrs{"newshape": shape})
}

// conv is the stride-1 nn.conv2d of x by the constant weight wt.
func (r *convTranspose) conv(x graph.Expr, wt *tensor.Tensor, pad, dilation []int64) graph.Expr {
	nc := graph.MustCall(op.Conv2D, []graph.Expr{x, graph.NewConstant(wt)}, ir.Attrs{
		"strides": []int64{1, 1}, "padding": pad, "dilation": dilation, "groups": int64(1)})
	nc.Span = r.c.Span
	return nc
}

// crop slices x (NCHW) to rows [y0, y1) and columns [x0, x1).
func (r *convTranspose) crop(x graph.Expr, n, c, y0, x0, y1, x1 int64) graph.Expr {
	return r.call(op.StridedSlice, x, ir.Attrs{"begin": []int64{0, 0, y0, x0}, "end": []int64{n, c, y1, x1},
		"strides": []int64{1, 1, 1, 1}, "axes": []int64{0, 1, 2, 3}})
}

// zeroInserted is the convolution of the input with s-1 zeros inserted
// after every value, by the flipped kernel (ConvTransposeAsConv's doc
// comment); nil when the padding exceeds dilation*(k-1) or the weight is
// over the memory budget.
func (r *convTranspose) zeroInserted() graph.Expr {
	n, ci, h, w := r.x[0], r.x[1], r.x[2], r.x[3]
	o, kh, kw, s, dil := r.out[1], r.kh, r.kw, r.s, r.dil
	// Padding of the zero-inserted input: before, dil*(k-1) - pb; after,
	// whatever makes the output size, less the s-1 zeros the insertion
	// leaves after the last value.
	k := []int64{kh, kw}
	in := []int64{h, w}
	var before, after [2]int64
	for i := range 2 {
		span, ok1 := budget.Mul(dil[i], k[i]-1)
		size, ok2 := budget.Mul(in[i], s[i])
		if !ok1 || !ok2 || size > math.MaxInt64/2 || r.out[2+i] > math.MaxInt64/4 {
			return nil // sizes from a hostile model: left alone
		}
		before[i] = span - r.pb[i]
		after[i] = r.out[2+i] + span - before[i] - size
		if before[i] < 0 || after[i] < -(s[i]-1) {
			return nil
		}
	}
	w2, err := tensor.NewChecked(ir.Float32, ir.Shape{o, ci, kh, kw})
	if err != nil {
		return nil
	}
	d := w2.Float32s()
	for cc := range ci {
		for oo := range o {
			for ky := range kh {
				for kx := range kw {
					d[((oo*ci+cc)*kh+ky)*kw+kx] = r.w[((cc*o+oo)*kh+(kh-1-ky))*kw+(kw-1-kx)]
				}
			}
		}
	}
	x := r.c.Args[0]
	if s[0] > 1 || s[1] > 1 {
		// dilate: [N,C,H,1,W,1] padded to [N,C,H,sh,W,sw].
		pad := r.call(op.Pad, r.reshape(x, n, ci, h, 1, w, 1), ir.Attrs{
			"pad_width": []int64{0, 0, 0, 0, 0, 0, 0, s[0] - 1, 0, 0, 0, s[1] - 1}})
		x = r.reshape(pad, n, ci, h*s[0], w*s[1])
	}
	// A negative padding after is the end of the trailing zeros the
	// insertion left; cropping them is a slice.
	if after[0] < 0 || after[1] < 0 {
		x = r.crop(x, n, ci, 0, 0, h*s[0]+min(after[0], 0), w*s[1]+min(after[1], 0))
		after[0], after[1] = max(after[0], 0), max(after[1], 0)
	}
	return r.conv(x, w2, []int64{before[0], before[1], after[0], after[1]}, dil)
}

// subPixel is the sub-pixel form of a strided transposed convolution
// (dilation 1; nil when the padding would crop the input or the weight is
// over the memory budget). Per axis, output o = s*q + r - pad reads input
// q - m through tap r + s*m (m < k' = ceil(k/s)): one convolution of the
// input, padded by k'-1 before and to q's range after, by a kernel of k'
// taps gives the s*s phases r of every q as O*s*s channels, and depth to
// space with a crop of the padding gives the output. It multiplies
// (s*k')^2 / k^2 times the products the outputs need: none more for k a
// multiple of s (U-Net's k2 s2, DCGAN's k4 s2), 16/9 for k3 s2.
func (r *convTranspose) subPixel() graph.Expr {
	n, ci, h, w := r.x[0], r.x[1], r.x[2], r.x[3]
	o, oh, ow := r.out[1], r.out[2], r.out[3]
	kh, kw, pb := r.kh, r.kw, r.pb
	sy, sx := r.s[0], r.s[1]
	// A stride beyond the padded output (only a hostile model has one)
	// is left alone, and so are phase counts whose product overflows.
	if oh+pb[0] > math.MaxInt64/4 || ow+pb[1] > math.MaxInt64/4 || oh+pb[0] < 0 || ow+pb[1] < 0 || sy > oh+pb[0] || sx > ow+pb[1] {
		return nil
	}
	phases, ok1 := budget.Mul(o, sy)
	phases, ok2 := budget.Mul(phases, sx)
	if !ok1 || !ok2 {
		return nil
	}
	ky, kx := (kh+sy-1)/sy, (kw+sx-1)/sx
	qy, qx := (oh+pb[0]+sy-1)/sy, (ow+pb[1]+sx-1)/sx
	if qy < h || qx < w {
		return nil
	}
	// s*s*k'*k' taps per channel pair: a stride far above the kernel size
	// makes it many times the weight's size, hence the budget.
	v, err := tensor.NewChecked(ir.Float32, ir.Shape{phases, ci, ky, kx})
	if err != nil {
		return nil
	}
	d := v.Float32s()
	for oo := range o {
		for ry := range sy {
			for rx := range sx {
				for cc := range ci {
					for my := range ky {
						for mx := range kx {
							ty, tx := ry+sy*(ky-1-my), rx+sx*(kx-1-mx)
							if ty >= kh || tx >= kw {
								continue
							}
							d[((((oo*sy+ry)*sx+rx)*ci+cc)*ky+my)*kx+mx] = r.w[((cc*o+oo)*kh+ty)*kw+tx]
						}
					}
				}
			}
		}
	}
	z := r.conv(r.c.Args[0], v, []int64{ky - 1, kx - 1, qy - h, qx - w}, []int64{1, 1})
	t := r.call(op.Transpose, r.reshape(z, n, o, sy, sx, qy, qx), ir.Attrs{"axes": []int64{0, 1, 4, 2, 5, 3}})
	out := r.reshape(t, n, o, sy*qy, sx*qx)
	if pb[0] != 0 || pb[1] != 0 || sy*qy != oh || sx*qx != ow {
		out = r.crop(out, n, o, pb[0], pb[1], pb[0]+oh, pb[1]+ow)
	}
	return out
}
