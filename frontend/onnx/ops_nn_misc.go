package onnx

import (
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// Converters of the nn group: matrix products, softmax family, data
// movement, einsum, recurrent layers, vision ops and the integer /
// quantized convolution and matmul.
//
//	Gemm            nn.dense (transB, or constant B transposed at import) or
//	                nn.matmul with transposes, then * alpha, + beta * C
//	MatMul          nn.matmul
//	Softmax, LogSoftmax, Hardmax
//	                nn.softmax / nn.log_softmax / nn.hardmax; before opset 13
//	                the input is coerced to 2-D at axis (reshape around the op)
//	DepthToSpace, SpaceToDepth   nn.depth_to_space / nn.space_to_depth
//	Einsum          einsum
//	RNN, GRU, LSTM  nn.rnn / nn.gru / nn.lstm with absent optional inputs
//	                supplied as zeros (sequence_lens: the full length)
//	RoiAlign        vision.roi_align;  GridSample  image.grid_sample
//	MatMulInteger, ConvInteger   int32 nn.matmul / conv of (x - zero point)
//	QLinearMatMul, QLinearConv   the same, then scaled by
//	                x_scale*w_scale/y_scale, rounded, offset by y_zero_point,
//	                clipped to the output type's range and cast

func init() {
	register("Gemm", 1, nnGemm)
	register("MatMul", 1, nnMatMul)
	register("Softmax", 1, nnSoftmax(op.Softmax))
	register("LogSoftmax", 1, nnSoftmax(op.LogSoftmax))
	register("Hardmax", 1, nnSoftmax(op.Hardmax))
	register("DepthToSpace", 1, nnDepthToSpace)
	register("SpaceToDepth", 1, nnSpaceToDepth)
	register("Einsum", 12, nnEinsum)
	register("RNN", 1, nnRecurrent(op.RNN, 1))
	register("GRU", 1, nnRecurrent(op.GRU, 3))
	register("LSTM", 1, nnRecurrent(op.LSTM, 4))
	register("RoiAlign", 10, nnRoiAlign)
	register("GridSample", 16, nnGridSample)
	register("MatMulInteger", 10, nnMatMulInteger)
	register("ConvInteger", 10, nnConvInteger)
	register("QLinearMatMul", 10, nnQLinearMatMul)
	register("QLinearConv", 10, nnQLinearConv)
}

func nnGemm(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	a, bm := b.in(0), b.in(1)
	at, bt := b.typ(a), b.typ(bm)
	if b.err != nil {
		return nil, b.err
	}
	if len(at.Shape) != 2 || len(bt.Shape) != 2 {
		return nil, n.Errorf("A %s and B %s must be matrices", at, bt)
	}
	transA, transB := n.Int("transA", 0) != 0, n.Int("transB", 0) != 0
	n.Int("broadcast", 0) // opset < 7: C is broadcast as from opset 7 on
	alpha, beta := n.Float("alpha", 1), n.Float("beta", 1)
	_, isConst := bm.(*graph.Constant)
	var y graph.Expr
	switch {
	case !transA && transB:
		y = b.call(op.Dense, nil, a, bm)
	case !transA && isConst:
		y = b.call(op.Dense, nil, a, b.call(op.Transpose, ir.Attrs{"axes": []int64{1, 0}}, bm))
	default:
		y = b.call(op.MatMul, ir.Attrs{"transpose_a": transA, "transpose_b": transB}, a, bm)
	}
	if alpha != 1 {
		y = b.call(op.Multiply, nil, y, b.scalar(at.DType, alpha))
	}
	if cc := n.Input(2); cc != nil && beta != 0 {
		if beta != 1 {
			cc = b.call(op.Multiply, nil, cc, b.scalar(at.DType, beta))
		}
		y = b.call(op.Add, nil, y, cc)
	}
	return b.done(y)
}

func nnMatMul(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	return b.done(b.call(op.MatMul, nil, b.in(0), b.in(1)))
}

func nnSoftmax(o *op.Op) Converter {
	return func(c *Ctx, n *Node) ([]graph.Expr, error) {
		b := &builder{c: c, n: n}
		x := b.in(0)
		xt := b.typ(x)
		if b.err != nil {
			return nil, b.err
		}
		if n.Opset >= 13 {
			return b.done(b.call(o, ir.Attrs{"axis": n.Int("axis", -1)}, x))
		}
		rank := len(xt.Shape)
		ax, err := op.NormAxis(n.Int("axis", 1), max(rank, 1))
		if err != nil {
			return nil, n.Errorf("%v", err)
		}
		if rank == 0 {
			return nil, n.Errorf("input must not be a scalar")
		}
		if ax == rank-1 {
			return b.done(b.call(o, ir.Attrs{"axis": int64(-1)}, x))
		}
		rows := xt.Shape[:ax].NumElements()
		cols := xt.Shape[ax:].NumElements()
		y := b.call(o, ir.Attrs{"axis": int64(1)}, b.reshape(x, ir.Shape{rows, cols}))
		return b.done(b.reshape(y, xt.Shape))
	}
}

func nnDepthToSpace(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	if !n.Has("blocksize") {
		return nil, n.Errorf("attribute blocksize is required")
	}
	return b.done(b.call(op.DepthToSpace, ir.Attrs{"block_size": n.Int("blocksize", 1), "mode": n.String("mode", "DCR")}, b.in(0)))
}

func nnSpaceToDepth(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	if !n.Has("blocksize") {
		return nil, n.Errorf("attribute blocksize is required")
	}
	return b.done(b.call(op.SpaceToDepth, ir.Attrs{"block_size": n.Int("blocksize", 1)}, b.in(0)))
}

func nnEinsum(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	if !n.Has("equation") {
		return nil, n.Errorf("attribute equation is required")
	}
	args := make([]graph.Expr, len(n.Inputs))
	for i := range args {
		args[i] = b.in(i)
	}
	return b.done(b.call(op.Einsum, ir.Attrs{"equation": n.String("equation", "")}, args...))
}

func nnRecurrent(o *op.Op, gates int64) Converter {
	lstm := o == op.LSTM
	return func(c *Ctx, n *Node) ([]graph.Expr, error) {
		b := &builder{c: c, n: n}
		x, w, r := b.in(0), b.in(1), b.in(2)
		xt, rt := b.typ(x), b.typ(r)
		if b.err != nil {
			return nil, b.err
		}
		if len(xt.Shape) != 3 || len(rt.Shape) != 3 {
			return nil, n.Errorf("X %s and R %s must be 3-D", xt, rt)
		}
		hs := n.Int("hidden_size", rt.Shape[2])
		dir := n.String("direction", "forward")
		nd, err := op.NumDirections(dir)
		if err != nil {
			return nil, n.Errorf("%v", err)
		}
		layout := n.Int("layout", 0)
		batch, seq := xt.Shape[1], xt.Shape[0]
		if layout == 1 {
			batch, seq = seq, batch
		}
		dt := xt.DType
		zeros := func(s ir.Shape) graph.Expr { return c.Constant(tensor.New(dt, s)) }
		opt := func(i int, def func() graph.Expr) graph.Expr {
			if e := n.Input(i); e != nil {
				return e
			}
			return def()
		}
		stateShape := ir.Shape{nd, batch, hs}
		if layout == 1 {
			stateShape = ir.Shape{batch, nd, hs}
		}
		bias := opt(3, func() graph.Expr { return zeros(ir.Shape{nd, 2 * gates * hs}) })
		seqLens := opt(4, func() graph.Expr {
			t := tensor.New(ir.Int32, ir.Shape{batch})
			for i := 0; i < int(batch); i++ {
				t.SetInt(i, seq)
			}
			return c.Constant(t)
		})
		args := []graph.Expr{x, w, r, bias, b.cast(seqLens, ir.Int32), opt(5, func() graph.Expr { return zeros(stateShape) })}
		if lstm {
			args = append(args, opt(6, func() graph.Expr { return zeros(stateShape) }),
				opt(7, func() graph.Expr { return zeros(ir.Shape{nd, 3 * hs}) }))
		}
		attrs := ir.Attrs{"hidden_size": hs, "direction": dir, "layout": layout}
		if v := n.Strings("activations", nil); v != nil {
			attrs["activations"] = v
		}
		if v := n.Floats("activation_alpha", nil); v != nil {
			attrs["activation_alpha"] = v
		}
		if v := n.Floats("activation_beta", nil); v != nil {
			attrs["activation_beta"] = v
		}
		if n.Has("clip") {
			attrs["clip"] = n.Float("clip", 0)
		}
		switch {
		case o == op.GRU:
			attrs["linear_before_reset"] = n.Int("linear_before_reset", 0) != 0
		case lstm:
			attrs["input_forget"] = n.Int("input_forget", 0) != 0
		}
		t := b.call(o, attrs, args...)
		outs := []graph.Expr{b.item(t, 0), b.item(t, 1)}
		if lstm {
			outs = append(outs, b.item(t, 2))
		}
		return b.done(outs[:min(max(n.NumOutputs, 1), len(outs))]...)
	}
}

func nnRoiAlign(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x, rois, idx := b.in(0), b.in(1), b.in(2)
	ctm := "output_half_pixel"
	if n.Opset >= 16 {
		ctm = n.String("coordinate_transformation_mode", "half_pixel")
	}
	if ctm != "half_pixel" && ctm != "output_half_pixel" {
		return nil, n.Errorf("coordinate_transformation_mode %q must be half_pixel or output_half_pixel", ctm)
	}
	return b.done(b.call(op.RoiAlign, ir.Attrs{
		"pooled_size":    []int64{n.Int("output_height", 1), n.Int("output_width", 1)},
		"spatial_scale":  n.Float("spatial_scale", 1),
		"sampling_ratio": n.Int("sampling_ratio", 0),
		"mode":           n.String("mode", "avg"),
		"aligned":        ctm == "half_pixel",
	}, x, rois, idx))
}

func nnGridSample(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	return b.done(b.call(op.GridSample, ir.Attrs{
		"method":        n.String("mode", "bilinear"),
		"padding_mode":  n.String("padding_mode", "zeros"),
		"align_corners": n.Int("align_corners", 0) != 0,
	}, b.in(0), b.in(1)))
}

// centered returns int32(x) - int32(zp) (x alone when zp is absent); a
// zero point of more than one element is reshaped to zpShape first unless
// zpShape is nil (it then broadcasts as it is).
func (b *builder) centered(x, zp graph.Expr, zpShape ir.Shape) graph.Expr {
	x32 := b.cast(x, ir.Int32)
	if zp == nil {
		return x32
	}
	if t := b.typ(zp); t != nil && zpShape != nil && t.Shape.NumElements() > 1 {
		zp = b.reshape(zp, zpShape)
	}
	return b.call(op.Subtract, nil, x32, b.cast(zp, ir.Int32))
}

// perRow is the shape that broadcasts a per-row (dimension -2) vector of
// size m against a matrix operand of rank r.
func perRow(m int64, r int) ir.Shape {
	if r < 2 {
		return ir.Shape{m}
	}
	return ir.Shape{m, 1}
}

func (b *builder) integerMatMul(a, azp, bm, bzp graph.Expr) graph.Expr {
	at := b.typ(a)
	if b.err != nil {
		return nil
	}
	if e := b.qdense(a, azp, bm, bzp); e != nil {
		return e
	}
	m := int64(1)
	if len(at.Shape) >= 2 {
		m = at.Shape[len(at.Shape)-2]
	}
	ac := b.centered(a, azp, perRow(m, len(at.Shape)))
	bc := b.centered(bm, bzp, nil)
	return b.call(op.MatMul, nil, ac, bc)
}

func nnMatMulInteger(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	return b.done(b.integerMatMul(b.in(0), n.Input(2), b.in(1), n.Input(3)))
}

// perChannel is [ch, 1, ...] of rank r-1: it broadcasts a per-channel
// vector against axis 1 of a rank-r tensor, or (called with the weight's
// rank + 1) against axis 0 of a convolution weight.
func perChannel(ch int64, r int) ir.Shape {
	s := ir.Shape{ch}
	for i := 1; i < r-1; i++ {
		s = append(s, 1)
	}
	return s
}

func (b *builder) integerConv(x, xzp, w, wzp graph.Expr) graph.Expr {
	wt := b.typ(w)
	if b.err != nil {
		return nil
	}
	if len(wt.Shape) < 3 {
		b.fail("the weight %s must have rank 3 or more (O, I, spatial...)", wt)
		return nil
	}
	if e := b.qconv2d(x, xzp, w, wzp); e != nil {
		return e
	}
	xc := b.centered(x, xzp, nil)
	wc := b.centered(w, wzp, perChannel(wt.Shape[0], len(wt.Shape)+1))
	return b.convND(xc, wc)
}

// uniformZeroPoint returns the value of a constant zero point whose
// elements are all equal (0 when there is none); false otherwise.
func uniformZeroPoint(e graph.Expr) (int64, bool) {
	if e == nil {
		return 0, true
	}
	k, ok := e.(*graph.Constant)
	if !ok || k.Value.Len() == 0 {
		return 0, false
	}
	v := k.Value.Int(0)
	for i := 1; i < k.Value.Len(); i++ {
		if k.Value.Int(i) != v {
			return 0, false
		}
	}
	return v, true
}

// qdense is integerMatMul as qnn.dense, for 8-bit operands whose second
// is a constant matrix [K, N] and whose zero points are constants, one
// each: the leading dimensions of a are flattened into rows, and the
// weight is stored transposed ([N, K], a row per output column). It
// returns nil otherwise.
func (b *builder) qdense(a, azp, bm, bzp graph.Expr) graph.Expr {
	at, bt := b.typ(a), b.typ(bm)
	k, isConst := bm.(*graph.Constant)
	if at == nil || bt == nil || !isConst || len(bt.Shape) != 2 || len(at.Shape) == 0 {
		return nil
	}
	is8 := func(dt ir.DType) bool { return dt == ir.Int8 || dt == ir.Uint8 }
	kd, n := bt.Shape[0], bt.Shape[1]
	if !is8(at.DType) || !is8(bt.DType) || at.Shape[len(at.Shape)-1] != kd {
		return nil
	}
	izp, ok1 := uniformZeroPoint(azp)
	kzp, ok2 := uniformZeroPoint(bzp)
	if !ok1 || !ok2 {
		return nil
	}
	rows := at.Shape[:len(at.Shape)-1].NumElements()
	wt := tensor.New(bt.DType, ir.Shape{n, kd})
	for i := int64(0); i < kd; i++ {
		for j := int64(0); j < n; j++ {
			wt.Data[j*kd+i] = k.Value.Data[i*n+j]
		}
	}
	d := b.call(op.QDense, ir.Attrs{"input_zero_point": izp, "kernel_zero_point": kzp},
		b.reshape(a, ir.Shape{rows, kd}), graph.NewConstant(wt))
	return b.reshape(d, append(at.Shape[:len(at.Shape)-1:len(at.Shape)-1], n))
}

// qconv2d is integerConv as qnn.conv2d, for 1-D and 2-D convolutions of
// 8-bit operands whose zero points are constants, one for the input and
// one for all of the weight's channels. A 1-D convolution is the 2-D one
// of height 1 between reshapes (NCW as NC1W, OIW as OI1W), so that it
// runs through the same kernels. It returns nil otherwise.
func (b *builder) qconv2d(x, xzp, w, wzp graph.Expr) graph.Expr {
	xt, wt := b.typ(x), b.typ(w)
	if xt == nil || wt == nil {
		return nil
	}
	if len(xt.Shape) == 3 && len(wt.Shape) == 3 {
		return b.qconv1d(x, xzp, w, wzp, xt, wt)
	}
	if len(xt.Shape) != 4 || len(wt.Shape) != 4 {
		return nil
	}
	izp, kzp, ok := qconvZeroPoints(xt, wt, xzp, wzp)
	if !ok {
		return nil
	}
	k := b.kernelShape(wt, 2)
	s, d := b.ints("strides", 2, 1), b.ints("dilations", 2, 1)
	pads := b.windowPads(xt.Shape[2:], k, s, d)
	if b.err != nil {
		return nil
	}
	attrs := ir.Attrs{"strides": s, "dilation": d, "padding": pads, "groups": b.n.Int("group", 1),
		"input_zero_point": izp, "kernel_zero_point": kzp}
	if k, ok := w.(*graph.Constant); ok && b.n.Int("group", 1) == 1 {
		// Four input channels of a tap in one 32-bit word, the operand of
		// integer dot products (vpdpbusd, sdot): packed once, here.
		w, attrs["kernel_layout"] = graph.NewConstant(ref.PackOIHW4i(k.Value)), "OIHW4i"
		b.pairBound(w, wt.Shape[1], attrs)
	}
	return b.call(op.QConv2D, attrs, x, w)
}

// pairBound records a constant qnn.conv2d weight's kernel_pair_bound in
// attrs (what lets x86 kernels without VNNI multiply with vpmaddubsw).
func (b *builder) pairBound(w graph.Expr, ci int64, attrs ir.Attrs) {
	k, ok := w.(*graph.Constant)
	if !ok || b.err != nil {
		return
	}
	bound, err := ref.QPairBound(k.Value, ci, attrs["kernel_layout"] == "OIHW4i", attrs["kernel_zero_point"].(int64))
	if err != nil {
		b.fail("%v", err)
		return
	}
	attrs["kernel_pair_bound"] = bound
}

// qconv1d is qconv2d for a 1-D convolution: qnn.conv2d of height 1
// between reshapes, with the attributes of the width.
func (b *builder) qconv1d(x, xzp, w, wzp graph.Expr, xt, wt *ir.TensorType) graph.Expr {
	izp, kzp, ok := qconvZeroPoints(xt, wt, xzp, wzp)
	if !ok {
		return nil
	}
	k := b.kernelShape(wt, 1)
	s, d := b.ints("strides", 1, 1), b.ints("dilations", 1, 1)
	pads := b.windowPads(xt.Shape[2:], k, s, d)
	if b.err != nil {
		return nil
	}
	group := b.n.Int("group", 1)
	attrs := ir.Attrs{"strides": []int64{1, s[0]}, "dilation": []int64{1, d[0]}, "padding": []int64{0, pads[0], 0, pads[1]},
		"groups": group, "input_zero_point": izp, "kernel_zero_point": kzp}
	o, i := wt.Shape[0], wt.Shape[1]
	if kc, ok := w.(*graph.Constant); ok {
		w4 := kc.Value.Reshape(ir.Shape{o, i, 1, k[0]})
		if group == 1 {
			w4, attrs["kernel_layout"] = ref.PackOIHW4i(w4), "OIHW4i"
		}
		w = graph.NewConstant(w4)
		if group == 1 {
			b.pairBound(w, i, attrs)
		}
	} else {
		w = b.reshape(w, ir.Shape{o, i, 1, k[0]})
	}
	c := b.call(op.QConv2D, attrs, b.reshape(x, ir.Shape{xt.Shape[0], xt.Shape[1], 1, xt.Shape[2]}), w)
	ct := b.typ(c)
	if ct == nil {
		return nil
	}
	return b.reshape(c, ir.Shape{ct.Shape[0], ct.Shape[1], ct.Shape[3]})
}

// qconvZeroPoints returns the zero points of an integer convolution
// that qnn.conv2d computes: 8-bit operands, a constant zero point for
// the input and one for all of the weight's channels.
func qconvZeroPoints(xt, wt *ir.TensorType, xzp, wzp graph.Expr) (izp, kzp int64, ok bool) {
	is8 := func(dt ir.DType) bool { return dt == ir.Int8 || dt == ir.Uint8 }
	if !is8(xt.DType) || !is8(wt.DType) {
		return 0, 0, false
	}
	izp, ok1 := uniformZeroPoint(xzp)
	kzp, ok2 := uniformZeroPoint(wzp)
	return izp, kzp, ok1 && ok2
}

func nnConvInteger(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	return b.done(b.integerConv(b.in(0), n.Input(2), b.in(1), n.Input(3)))
}

// requantize maps an int32 accumulator to the output type of yzp:
// clip(round(acc * scale) + yzp) with scale = xs * ws / ys. With constant
// scales and zero point this is qnn.requantize, fixed-point arithmetic
// (fixedRequantize); otherwise it is computed in float.
func (b *builder) requantize(acc, xs, ws, ys, yzp graph.Expr, wsShape ir.Shape) graph.Expr {
	yt, xst := b.typ(yzp), b.typ(xs)
	if b.err != nil {
		return nil
	}
	if e := b.fixedRequantize(acc, xs, ws, ys, yzp, wsShape); e != nil {
		return e
	}
	ft := xst.DType
	if wst := b.typ(ws); wst != nil && wst.Shape.NumElements() > 1 {
		ws = b.reshape(ws, wsShape)
	}
	scale := b.call(op.Divide, nil, b.call(op.Multiply, nil, xs, ws), ys)
	v := b.call(op.Round, nil, b.call(op.Multiply, nil, b.cast(acc, ft), scale))
	v = b.call(op.Add, nil, v, b.cast(yzp, ft))
	lo, hi := 0.0, 255.0
	switch yt.DType {
	case ir.Int8:
		lo, hi = -128, 127
	case ir.Uint8:
	default:
		b.fail("output zero point type %s must be int8 or uint8", yt.DType)
		return nil
	}
	v = b.call(op.Clip, ir.Attrs{"a_min": lo, "a_max": hi}, v)
	return b.cast(v, yt.DType)
}

// fixedRequantize is requantize as qnn.requantize when x's and y's scales
// are constant scalars, w's scale a constant scalar or vector and y's
// zero point a constant scalar: the real scale of each channel becomes an
// int32 multiplier and one shift (op.RequantizeParams). It returns nil
// when they are not, or a scale has no fixed-point form.
func (b *builder) fixedRequantize(acc, xs, ws, ys, yzp graph.Expr, wsShape ir.Shape) graph.Expr {
	consts := make([]*tensor.Tensor, 4)
	for i, e := range []graph.Expr{xs, ws, ys, yzp} {
		k, ok := e.(*graph.Constant)
		if !ok || (i != 1 && k.Value.Len() != 1) {
			return nil
		}
		consts[i] = k.Value
	}
	at := b.typ(acc)
	if at == nil || at.DType != ir.Int32 {
		return nil
	}
	x, y, w := consts[0].Float(0), consts[2].Float(0), consts[1]
	scales := make([]float64, w.Len())
	for i := range scales {
		scales[i] = x * w.Float(i) / y
	}
	mult, shift, err := op.RequantizeParams(scales)
	if err != nil {
		return nil
	}
	shape := ir.Shape{}
	if len(mult) > 1 {
		shape = w.Shape
		if wsShape != nil {
			shape = wsShape
		}
	}
	m := tensor.New(ir.Int32, shape)
	for i, v := range mult {
		m.Int32s()[i] = int32(v)
	}
	return b.call(op.Requantize, ir.Attrs{"shift": shift, "out_zero_point": consts[3].Int(0), "out_dtype": consts[3].DType},
		acc, graph.NewConstant(m))
}

func nnQLinearMatMul(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	a, as, azp, bm, bs, bzp, ys, yzp := b.in(0), b.in(1), b.in(2), b.in(3), b.in(4), b.in(5), b.in(6), b.in(7)
	acc := b.integerMatMul(a, azp, bm, bzp)
	at := b.typ(a)
	if b.err != nil {
		return nil, b.err
	}
	if t := b.typ(as); t != nil && t.Shape.NumElements() > 1 && len(at.Shape) >= 2 {
		as = b.reshape(as, perRow(at.Shape[len(at.Shape)-2], len(at.Shape)))
	}
	return b.done(b.requantize(acc, as, bs, ys, yzp, nil))
}

func nnQLinearConv(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x, xs, xzp, w, ws, wzp, ys, yzp := b.in(0), b.in(1), b.in(2), b.in(3), b.in(4), b.in(5), b.in(6), b.in(7)
	conv := b.integerConv(x, xzp, w, wzp)
	acc := b.addBias(conv, n.Input(8))
	wt := b.typ(w)
	if b.err != nil {
		return nil, b.err
	}
	out := b.requantize(acc, xs, ws, ys, yzp, perChannel(wt.Shape[0], len(wt.Shape)))
	if fused := b.fuseConvRequantize(conv, n.Input(8), out); fused != nil {
		out = fused
	}
	return b.done(out)
}

// fuseConvRequantize returns qnn.conv2d_requantize for a qnn.conv2d, its
// constant int32 bias (or none) and the qnn.requantize of their sum, so
// that a kernel requantizes in registers; nil when they are not that.
func (b *builder) fuseConvRequantize(conv, bias, req graph.Expr) graph.Expr {
	// A 1-D convolution is reshape(qnn.conv2d): fuse the inner call and
	// reshape its result back.
	var back ir.Shape
	if r, ok := conv.(*graph.Call); ok && r.Op == op.Reshape {
		if inner, ok := r.Args[0].(*graph.Call); ok && inner.Op == op.QConv2D {
			if t := b.typ(conv); t != nil {
				back, conv = t.Shape, inner
			}
		}
	}
	cc, ok1 := conv.(*graph.Call)
	rc, ok2 := req.(*graph.Call)
	if !ok1 || !ok2 || cc.Op != op.QConv2D || rc.Op != op.Requantize || b.err != nil {
		return nil
	}
	m, ok := rc.Args[1].(*graph.Constant)
	ct := b.typ(conv)
	if !ok || ct == nil {
		return nil
	}
	o := ct.Shape[1]
	if m.Value.Len() > 1 {
		m = graph.NewConstant(m.Value.Reshape(ir.Shape{o}))
	} else {
		m = graph.NewConstant(m.Value.Reshape(ir.Shape{}))
	}
	var bv *tensor.Tensor
	switch k := bias.(type) {
	case nil:
		bv = tensor.New(ir.Int32, ir.Shape{o})
	case *graph.Constant:
		if k.Value.DType != ir.Int32 || k.Value.Len() != int(o) {
			return nil
		}
		bv = k.Value.Reshape(ir.Shape{o})
	default:
		return nil
	}
	attrs := cc.Attrs.Clone()
	for k, v := range rc.Attrs {
		attrs[k] = v
	}
	out := b.call(op.QConv2DRequantize, attrs, cc.Args[0], cc.Args[1], graph.NewConstant(bv), m)
	if back != nil {
		out = b.reshape(out, back)
	}
	return out
}
