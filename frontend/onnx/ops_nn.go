package onnx

import (
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Converters of the nn group: convolution, pooling, normalisation.
//
//	Conv                 nn.conv{1,2,3}d (+ nn.bias_add)
//	ConvTranspose        nn.conv{1,2,3}d_transpose (+ nn.bias_add); output_shape
//	                     becomes padding (and extra output_padding when it asks
//	                     for more than the convolution produces)
//	MaxPool              nn.max_pool{1,2,3}d, or nn.max_pool_with_argmax with
//	                     the Indices output
//	AveragePool          nn.avg_pool{1,2,3}d
//	GlobalAveragePool    nn.global_avg_pool2d (4-D) or mean over spatial axes
//	GlobalMaxPool        nn.global_max_pool2d (4-D) or max over spatial axes
//	LpPool, GlobalLpPool (sum of |x|^p over the window)^(1/p), the sum as
//	                     avg_pool(count_include_pad) times the window size
//	MaxUnpool            nn.max_unpool
//	BatchNormalization   nn.batch_norm; in training mode the batch statistics
//	                     are computed with mean and fed to nn.batch_norm
//	InstanceNormalization nn.instance_norm
//	LayerNormalization   nn.layer_norm (Mean/InvStdDev outputs composed)
//	LRN                  nn.lrn
//	MeanVarianceNormalization (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)
//
// auto_pad SAME_UPPER / SAME_LOWER / VALID is resolved here into explicit
// padding from the static input shape.

func init() {
	register("Conv", 1, nnConv)
	register("ConvTranspose", 1, nnConvTranspose)
	register("MaxPool", 1, nnPool(false))
	register("AveragePool", 1, nnPool(true))
	register("GlobalAveragePool", 1, nnGlobalPool(true))
	register("GlobalMaxPool", 1, nnGlobalPool(false))
	register("LpPool", 1, nnLpPool)
	register("GlobalLpPool", 1, nnGlobalLpPool)
	register("MaxUnpool", 9, nnMaxUnpool)
	register("BatchNormalization", 1, nnBatchNorm)
	register("InstanceNormalization", 1, nnInstanceNorm)
	register("LayerNormalization", 17, nnLayerNorm)
	register("LRN", 1, nnLRN)
	register("MeanVarianceNormalization", 9, nnMVN)
}

// spatialRank returns the number of spatial dimensions of an N, C,
// spatial... input, which must be 1 to 3 for the windowed ops.
func (b *builder) spatialRank(x *ir.TensorType, lo, hi int) int {
	if x == nil {
		return 0
	}
	n := len(x.Shape) - 2
	if n < lo || n > hi {
		b.fail("input %s must have %d to %d spatial dimensions", x, lo, hi)
		return 0
	}
	return n
}

// ints returns an ints attribute of length n, or def repeated n times when
// it is absent.
func (b *builder) ints(name string, n int, def int64) []int64 {
	v := b.n.Ints(name, nil)
	if v == nil {
		v = make([]int64, n)
		for i := range v {
			v[i] = def
		}
		return v
	}
	if len(v) != n {
		b.fail("attribute %s %v: want %d values", name, v, n)
		return make([]int64, n)
	}
	return append([]int64(nil), v...)
}

// windowPads resolves pads / auto_pad for a windowed op over spatial sizes
// in, kernel k, strides s and dilations d into [begin..., end...].
func (b *builder) windowPads(in, k, s, d []int64) []int64 {
	n := len(in)
	switch ap := b.n.String("auto_pad", "NOTSET"); ap {
	case "NOTSET", "":
		p := b.n.Ints("pads", nil)
		if p == nil {
			return make([]int64, 2*n)
		}
		if len(p) != 2*n {
			b.fail("pads %v: want %d values", p, 2*n)
			return make([]int64, 2*n)
		}
		for _, v := range p {
			if v < 0 {
				b.fail("pads %v must be non-negative", p)
			}
		}
		return append([]int64(nil), p...)
	case "VALID":
		return make([]int64, 2*n)
	case "SAME_UPPER", "SAME_LOWER":
		p := make([]int64, 2*n)
		for i := 0; i < n; i++ {
			out := (in[i] + s[i] - 1) / s[i]
			total := max((out-1)*s[i]+(k[i]-1)*d[i]+1-in[i], 0)
			small, big := total/2, total-total/2
			if ap == "SAME_UPPER" {
				p[i], p[n+i] = small, big
			} else {
				p[i], p[n+i] = big, small
			}
		}
		return p
	default:
		b.fail("auto_pad %q is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", ap)
		return make([]int64, 2*n)
	}
}

var (
	nnConvOps          = []*op.Op{nil, op.Conv1D, op.Conv2D, op.Conv3D}
	nnConvTransposeOps = []*op.Op{nil, op.Conv1DTranspose, op.Conv2DTranspose, op.Conv3DTranspose}
	nnMaxPoolOps       = []*op.Op{nil, op.MaxPool1D, op.MaxPool2D, op.MaxPool3D}
	nnAvgPoolOps       = []*op.Op{nil, op.AvgPool1D, op.AvgPool2D, op.AvgPool3D}
)

// kernelShape returns kernel_shape, checked against the weight's spatial
// dims when the weight type is known.
func (b *builder) kernelShape(w *ir.TensorType, n int) []int64 {
	if w == nil {
		return b.ints("kernel_shape", n, 1)
	}
	ks := append([]int64(nil), w.Shape[2:]...)
	if v := b.n.Ints("kernel_shape", nil); v != nil && !ir.Shape(v).Equal(ks) {
		b.fail("kernel_shape %v does not match weight %s", v, w)
	}
	return ks
}

// addBias adds an optional 1-D channel bias.
func (b *builder) addBias(y graph.Expr, bias graph.Expr) graph.Expr {
	if bias == nil {
		return y
	}
	return b.call(op.BiasAdd, ir.Attrs{"axis": int64(1)}, y, bias)
}

// convND builds the convolution of a Conv-like node (kernel_shape,
// strides, dilations, pads/auto_pad, group) applied to x and w.
func (b *builder) convND(x, w graph.Expr) graph.Expr {
	xt, wt := b.typ(x), b.typ(w)
	nd := b.spatialRank(xt, 1, 3)
	if b.err != nil {
		return nil
	}
	if len(wt.Shape) != nd+2 {
		b.fail("weight %s must have rank %d", wt, nd+2)
		return nil
	}
	k := b.kernelShape(wt, nd)
	s, d := b.ints("strides", nd, 1), b.ints("dilations", nd, 1)
	pads := b.windowPads(xt.Shape[2:], k, s, d)
	return b.call(nnConvOps[nd], ir.Attrs{"strides": s, "dilation": d, "padding": pads, "groups": b.n.Int("group", 1)}, x, w)
}

func nnConv(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	y := b.convND(b.in(0), b.in(1))
	return b.done(b.addBias(y, n.Input(2)))
}

func nnConvTranspose(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x, w := b.in(0), b.in(1)
	xt, wt := b.typ(x), b.typ(w)
	nd := b.spatialRank(xt, 1, 3)
	if b.err != nil {
		return nil, b.err
	}
	if len(wt.Shape) != nd+2 {
		return nil, n.Errorf("weight %s must have rank %d", wt, nd+2)
	}
	k := b.kernelShape(wt, nd)
	s, d := b.ints("strides", nd, 1), b.ints("dilations", nd, 1)
	outPad := b.ints("output_padding", nd, 0)
	autoPad := n.String("auto_pad", "NOTSET")
	pads := make([]int64, 2*nd)
	outShape := n.Ints("output_shape", nil)
	if len(outShape) == nd+2 {
		outShape = outShape[2:]
	}
	if outShape == nil && (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
		outShape = make([]int64, nd)
		for i := range outShape {
			outShape[i] = xt.Shape[2+i] * s[i]
		}
	}
	switch {
	case outShape != nil:
		if len(outShape) != nd {
			return nil, n.Errorf("output_shape %v: want %d values", outShape, nd)
		}
		for i := 0; i < nd; i++ {
			total := s[i]*(xt.Shape[2+i]-1) + outPad[i] + (k[i]-1)*d[i] + 1 - outShape[i]
			if total < 0 {
				// The requested output is larger: extend at the end.
				outPad[i] -= total
				total = 0
			}
			if autoPad == "SAME_UPPER" {
				pads[i], pads[nd+i] = total/2, total-total/2
			} else {
				pads[i], pads[nd+i] = total-total/2, total/2
			}
		}
	case autoPad == "VALID":
	case autoPad == "NOTSET" || autoPad == "":
		if p := n.Ints("pads", nil); p != nil {
			if len(p) != 2*nd {
				return nil, n.Errorf("pads %v: want %d values", p, 2*nd)
			}
			copy(pads, p)
		}
	default:
		return nil, n.Errorf("auto_pad %q is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", autoPad)
	}
	y := b.call(nnConvTransposeOps[nd], ir.Attrs{"strides": s, "dilation": d, "padding": pads,
		"groups": n.Int("group", 1), "output_padding": outPad}, x, w)
	return b.done(b.addBias(y, n.Input(2)))
}

func nnPool(avg bool) Converter {
	return func(c *Ctx, n *Node) ([]graph.Expr, error) {
		b := &builder{c: c, n: n}
		x := b.in(0)
		xt := b.typ(x)
		nd := b.spatialRank(xt, 1, 3)
		if b.err != nil {
			return nil, b.err
		}
		k := n.Ints("kernel_shape", nil)
		if len(k) != nd {
			return nil, n.Errorf("kernel_shape %v: want %d values", k, nd)
		}
		s, d := b.ints("strides", nd, 1), b.ints("dilations", nd, 1)
		pads := b.windowPads(xt.Shape[2:], k, s, d)
		attrs := ir.Attrs{"pool_size": append([]int64(nil), k...), "strides": s, "dilation": d,
			"padding": pads, "ceil_mode": n.Int("ceil_mode", 0) != 0}
		if avg {
			attrs["count_include_pad"] = n.Int("count_include_pad", 0) != 0
			return b.done(b.call(nnAvgPoolOps[nd], attrs, x))
		}
		if n.NumOutputs > 1 {
			attrs["storage_order"] = n.Int("storage_order", 0)
			t := b.call(op.MaxPoolWithArgmax, attrs, x)
			return b.done(b.item(t, 0), b.item(t, 1))
		}
		return b.done(b.call(nnMaxPoolOps[nd], attrs, x))
	}
}

func spatialAxes(rank int) []int64 {
	axes := make([]int64, 0, rank-2)
	for i := 2; i < rank; i++ {
		axes = append(axes, int64(i))
	}
	return axes
}

func nnGlobalPool(avg bool) Converter {
	return func(c *Ctx, n *Node) ([]graph.Expr, error) {
		b := &builder{c: c, n: n}
		x := b.in(0)
		xt := b.typ(x)
		if b.err != nil {
			return nil, b.err
		}
		if len(xt.Shape) < 3 {
			return nil, n.Errorf("input %s must have rank >= 3", xt)
		}
		if len(xt.Shape) == 4 {
			if avg {
				return b.done(b.call(op.GlobalAvgPool2D, nil, x))
			}
			return b.done(b.call(op.GlobalMaxPool2D, nil, x))
		}
		o := op.Max
		if avg {
			o = op.Mean
		}
		return b.done(b.call(o, ir.Attrs{"axis": spatialAxes(len(xt.Shape)), "keepdims": true}, x))
	}
}

// absPow returns |x|^p (x*x for p = 2).
func (b *builder) absPow(x graph.Expr, dt ir.DType, p int64) graph.Expr {
	if p == 2 {
		return b.call(op.Multiply, nil, x, x)
	}
	return b.call(op.Power, nil, b.call(op.Abs, nil, x), b.scalar(dt, float64(p)))
}

// root returns x^(1/p) (sqrt for p = 2).
func (b *builder) root(x graph.Expr, dt ir.DType, p int64) graph.Expr {
	if p == 2 {
		return b.call(op.Sqrt, nil, x)
	}
	return b.call(op.Power, nil, x, b.scalar(dt, 1/float64(p)))
}

func nnLpPool(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	xt := b.typ(x)
	nd := b.spatialRank(xt, 1, 3)
	if b.err != nil {
		return nil, b.err
	}
	k := n.Ints("kernel_shape", nil)
	if len(k) != nd {
		return nil, n.Errorf("kernel_shape %v: want %d values", k, nd)
	}
	p := n.Int("p", 2)
	if p < 1 {
		return nil, n.Errorf("p %d must be positive", p)
	}
	s, d := b.ints("strides", nd, 1), b.ints("dilations", nd, 1)
	pads := b.windowPads(xt.Shape[2:], k, s, d)
	size := int64(1)
	for _, v := range k {
		size *= v
	}
	attrs := ir.Attrs{"pool_size": append([]int64(nil), k...), "strides": s, "dilation": d,
		"padding": pads, "ceil_mode": n.Int("ceil_mode", 0) != 0, "count_include_pad": true}
	avg := b.call(nnAvgPoolOps[nd], attrs, b.absPow(x, xt.DType, p))
	sum := b.call(op.Multiply, nil, avg, b.scalar(xt.DType, float64(size)))
	return b.done(b.root(sum, xt.DType, p))
}

func nnGlobalLpPool(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	xt := b.typ(x)
	if b.err != nil {
		return nil, b.err
	}
	if len(xt.Shape) < 3 {
		return nil, n.Errorf("input %s must have rank >= 3", xt)
	}
	p := n.Int("p", 2)
	if p < 1 {
		return nil, n.Errorf("p %d must be positive", p)
	}
	sum := b.call(op.Sum, ir.Attrs{"axis": spatialAxes(len(xt.Shape)), "keepdims": true}, b.absPow(x, xt.DType, p))
	return b.done(b.root(sum, xt.DType, p))
}

func nnMaxUnpool(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x, idx := b.in(0), b.in(1)
	xt := b.typ(x)
	nd := b.spatialRank(xt, 1, 3)
	if b.err != nil {
		return nil, b.err
	}
	// The default output is the shape the pooling came from; the indices
	// number its positions. An explicit output_shape pads it at the end.
	k := n.Ints("kernel_shape", nil)
	if len(k) != nd {
		return nil, n.Errorf("kernel_shape %v: want %d values", k, nd)
	}
	s := b.ints("strides", nd, 1)
	p := b.ints("pads", 2*nd, 0)
	inferred := []int64{xt.Shape[0], xt.Shape[1]}
	for i := 0; i < nd; i++ {
		inferred = append(inferred, (xt.Shape[2+i]-1)*s[i]+k[i]-p[i]-p[nd+i])
	}
	attrs := ir.Attrs{"output_shape": inferred}
	if e := n.Input(2); e != nil {
		t, err := c.Const(e, "output_shape")
		if err != nil {
			return nil, err
		}
		os := t.AsInt64s()
		attrs["output_shape"] = os
		fits := len(os) == len(inferred)
		for i := 0; fits && i < len(os); i++ {
			fits = os[i] >= inferred[i]
		}
		if fits {
			attrs["index_shape"] = inferred
		}
	}
	return b.done(b.call(op.MaxUnpool, attrs, x, b.cast(idx, ir.Int64)))
}

func nnBatchNorm(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x, gamma, beta, mean, vr := b.in(0), b.in(1), b.in(2), b.in(3), b.in(4)
	xt := b.typ(x)
	if b.err != nil {
		return nil, b.err
	}
	if n.Opset < 9 && n.Int("spatial", 1) == 0 {
		if gt := b.typ(gamma); gt != nil && len(gt.Shape) != 1 {
			return nil, n.Errorf("spatial=0 (per-activation statistics) is not supported")
		}
	}
	eps := n.Float("epsilon", 1e-5)
	// momentum only updates running statistics in training; is_test and
	// consumed_inputs (old opsets) change nothing in inference.
	n.Float("momentum", 0.9)
	n.Int("is_test", 0)
	n.Ints("consumed_inputs", nil)
	attrs := ir.Attrs{"axis": int64(1), "epsilon": eps}
	training := n.Int("training_mode", 0) != 0
	if n.Opset < 14 && n.NumOutputs > 1 && n.Opset >= 7 {
		training = true // older opsets signal training by requesting the statistics outputs
	}
	if n.Opset < 7 && n.Int("is_test", 0) == 0 && n.NumOutputs > 1 {
		training = true
	}
	if !training {
		return b.done(b.call(op.BatchNorm, attrs, x, gamma, beta, mean, vr))
	}
	if len(xt.Shape) < 2 {
		return nil, n.Errorf("input %s must have rank >= 2", xt)
	}
	axes := []int64{0}
	axes = append(axes, spatialAxes(len(xt.Shape))...)
	bm := b.call(op.Mean, ir.Attrs{"axis": axes, "keepdims": false}, x)
	dev := b.call(op.Subtract, nil, x, b.reshape(bm, channelShape(xt)))
	bv := b.call(op.Mean, ir.Attrs{"axis": axes, "keepdims": false}, b.call(op.Multiply, nil, dev, dev))
	y := b.call(op.BatchNorm, attrs, x, gamma, beta, bm, bv)
	mom := n.Float("momentum", 0.9)
	run := func(old, cur graph.Expr) graph.Expr {
		return b.call(op.Add, nil,
			b.call(op.Multiply, nil, old, b.scalar(xt.DType, mom)),
			b.call(op.Multiply, nil, cur, b.scalar(xt.DType, 1-mom)))
	}
	outs := []graph.Expr{y, run(mean, bm), run(vr, bv), bm, bv}
	return b.done(outs[:min(max(n.NumOutputs, 1), 5)]...)
}

// channelShape is [C, 1, ...] for broadcasting a per-channel value against
// an N, C, spatial... tensor.
func channelShape(xt *ir.TensorType) ir.Shape {
	s := ir.Shape{xt.Shape[1]}
	for i := 2; i < len(xt.Shape); i++ {
		s = append(s, 1)
	}
	return s
}

func nnInstanceNorm(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x, gamma, beta := b.in(0), b.in(1), b.in(2)
	return b.done(b.call(op.InstanceNorm, ir.Attrs{"epsilon": n.Float("epsilon", 1e-5)}, x, gamma, beta))
}

func nnLayerNorm(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x, gamma := b.in(0), b.in(1)
	xt, gt := b.typ(x), b.typ(gamma)
	if b.err != nil {
		return nil, b.err
	}
	beta := n.Input(2)
	if beta == nil {
		beta = c.Constant(tensor.New(gt.DType, gt.Shape))
	}
	axis := n.Int("axis", -1)
	eps := n.Float("epsilon", 1e-5)
	ax, err := op.NormAxis(axis, len(xt.Shape))
	if err != nil {
		return nil, n.Errorf("%v", err)
	}
	y := b.call(op.LayerNorm, ir.Attrs{"axis": int64(ax), "epsilon": eps}, x, gamma, beta)
	if n.NumOutputs <= 1 {
		return b.done(y)
	}
	// Mean and InvStdDev over the normalised axes, kept as size-1 dims.
	var axes []int64
	for i := ax; i < len(xt.Shape); i++ {
		axes = append(axes, int64(i))
	}
	ra := ir.Attrs{"axis": axes, "keepdims": true}
	mean := b.call(op.Mean, ra, x)
	dev := b.call(op.Subtract, nil, x, mean)
	vr := b.call(op.Mean, ra, b.call(op.Multiply, nil, dev, dev))
	inv := b.call(op.Divide, nil, b.scalar(xt.DType, 1),
		b.call(op.Sqrt, nil, b.call(op.Add, nil, vr, b.scalar(xt.DType, eps))))
	return b.done([]graph.Expr{y, mean, inv}[:min(n.NumOutputs, 3)]...)
}

func nnLRN(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	if !n.Has("size") {
		return nil, n.Errorf("attribute size is required")
	}
	return b.done(b.call(op.LRN, ir.Attrs{"size": n.Int("size", 1), "axis": int64(1),
		"alpha": n.Float("alpha", 1e-4), "beta": n.Float("beta", 0.75), "bias": n.Float("bias", 1)}, x))
}

func nnMVN(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	xt := b.typ(x)
	if b.err != nil {
		return nil, b.err
	}
	axes := n.Ints("axes", []int64{0, 2, 3})
	ra := ir.Attrs{"axis": append([]int64(nil), axes...), "keepdims": true}
	mean := b.call(op.Mean, ra, x)
	meanSq := b.call(op.Mean, ra, b.call(op.Multiply, nil, x, x))
	vr := b.call(op.Subtract, nil, meanSq, b.call(op.Multiply, nil, mean, mean))
	std := b.call(op.Add, nil, b.call(op.Sqrt, nil, vr), b.scalar(xt.DType, 1e-9))
	return b.done(b.call(op.Divide, nil, b.call(op.Subtract, nil, x, mean), std))
}
