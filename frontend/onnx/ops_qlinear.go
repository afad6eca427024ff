package onnx

import (
	"math"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Converters of ONNX Runtime's quantized operators (domain com.microsoft),
// which quantized models in operator form use and which the QDQ folding
// (qdq.go) writes for operators ONNX has no quantized form of:
//
//	QLinearAdd                int32 (a - za)*ka + (b - zb)*kb, requantized
//	QLinearGlobalAveragePool  int32 sum of (x - zx) over the spatial axes,
//	                          requantized by x_scale / (count * y_scale)
//	QLinearConcat             each input requantized to y's scale and zero
//	                          point (as it is when they agree), concatenated
//	QGemm                     int32 (A - za)(B - zb) + C, requantized, or
//	                          scaled to float when y_scale is absent
//
// With constant scales and zero points they compute in integers and end
// in qnn.requantize; otherwise in float, as dequantize, operate, quantize.

// msDomain is ONNX Runtime's operator domain.
const msDomain = "com.microsoft"

func init() {
	registerDomain(msDomain, "QLinearAdd", 1, msQLinearAdd)
	registerDomain(msDomain, "QLinearGlobalAveragePool", 1, msQLinearGlobalAveragePool)
	registerDomain(msDomain, "QLinearConcat", 1, msQLinearConcat)
	registerDomain(msDomain, "QGemm", 1, msQGemm)
	registerDomain(msDomain, "QLinearSoftmax", 1, msQLinearSoftmax)
}

// msQLinearSoftmax imports ONNX Runtime's QLinearSoftmax (X, X_scale,
// x_zero_point, y_scale, y_zero_point; attributes axis and opset, the
// opset whose Softmax it computes). With constant scalar scales and zero
// points it is qnn.softmax (integers only, a 256-entry exp table);
// otherwise dequantize, Softmax, quantize in float. Before opset 13 the
// softmax runs over the dimensions from axis on, flattened.
func msQLinearSoftmax(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x, xs, xz, ys, yz, xt, err := b.unaryQLinear()
	if err != nil {
		return nil, err
	}
	r := len(xt.Shape)
	opset := n.Int("opset", 13)
	defAxis := int64(-1)
	if opset < 13 {
		defAxis = 1
	}
	axis, err := op.NormAxis(n.Int("axis", defAxis), r)
	if err != nil {
		return nil, n.Errorf("axis: %v", err)
	}
	// Before opset 13, the dimensions from axis on form one row.
	shape := xt.Shape
	flat := opset < 13 && axis < r-1
	if flat {
		shape = ir.Shape{xt.Shape[:axis].NumElements(), xt.Shape[axis:].NumElements()}
	}
	ax := int64(axis)
	if flat {
		ax = 1
	}
	if v, ok := constScalars(xs, xz, ys, yz); ok && (xt.DType == ir.Int8 || xt.DType == ir.Uint8) && v[1].DType == xt.DType &&
		(v[3].DType == ir.Int8 || v[3].DType == ir.Uint8) && shape[ax] <= op.QSoftmaxMaxAxis {
		// The input zero point cancels: softmax reads differences.
		if table, mult, shift, err := op.QSoftmaxParams(v[0].Float(0), v[2].Float(0)); err == nil {
			t := tensor.New(ir.Int32, ir.Shape{256})
			copy(t.Int32s(), table)
			in := x
			if flat {
				in = b.reshape(x, shape)
			}
			e := b.call(op.QSoftmax, ir.Attrs{"axis": ax, "multiplier": mult, "shift": shift, "out_zero_point": v[3].Int(0), "out_dtype": v[3].DType}, in, graph.NewConstant(t))
			if flat {
				e = b.reshape(e, xt.Shape)
			}
			return b.done(e)
		}
	}
	f := b.dequantize(x, xs, xz)
	if flat {
		f = b.reshape(f, shape)
	}
	sm := b.call(op.Softmax, ir.Attrs{"axis": ax}, f)
	if flat {
		sm = b.reshape(sm, xt.Shape)
	}
	return b.done(b.quantize(sm, ys, yz, b.dtype(yz)))
}

// addShift is the fixed-point precision of QLinearAdd's input scaling: the
// larger input scale is 2^addShift, the other in proportion, so that
// (a - za) * ka + (b - zb) * kb stays below 2^29.
const addShift = 20

// constScalar returns e's value when it is a constant of one element.
func constScalar(e graph.Expr) (*tensor.Tensor, bool) {
	k, ok := e.(*graph.Constant)
	if !ok || k.Value.Len() != 1 {
		return nil, false
	}
	return k.Value, true
}

// constScalars returns the values of constant one-element exprs, or false
// when one is not.
func constScalars(es ...graph.Expr) ([]*tensor.Tensor, bool) {
	out := make([]*tensor.Tensor, len(es))
	for i, e := range es {
		v, ok := constScalar(e)
		if !ok {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

// dequantize is (x - zp) * scale in scale's float type; zp may be nil.
func (b *builder) dequantize(x, scale, zp graph.Expr) graph.Expr {
	fdt := b.dtype(scale)
	v := b.cast(x, fdt)
	if zp != nil {
		v = b.call(op.Subtract, nil, v, b.cast(zp, fdt))
	}
	return b.call(op.Multiply, nil, v, scale)
}

// requantTo maps an int32 accumulator to zp's type with qnn.requantize at
// real scales (one, or one per element of a vector shaped shape). It
// returns nil when a scale has no fixed-point form.
func (b *builder) requantTo(acc graph.Expr, scales []float64, shape ir.Shape, zp *tensor.Tensor) graph.Expr {
	if zp.DType != ir.Int8 && zp.DType != ir.Uint8 {
		return nil
	}
	mult, shift, err := op.RequantizeParams(scales)
	if err != nil {
		return nil
	}
	if len(mult) == 1 {
		shape = ir.Shape{}
	}
	m := tensor.New(ir.Int32, shape)
	for i, v := range mult {
		m.Int32s()[i] = int32(v)
	}
	return b.call(op.Requantize, ir.Attrs{"shift": shift, "out_zero_point": zp.Int(0), "out_dtype": zp.DType}, acc, graph.NewConstant(m))
}

// intConst is a constant int32 scalar.
func intConst(v int64) graph.Expr {
	t := tensor.New(ir.Int32, ir.Shape{})
	t.Int32s()[0] = int32(v)
	return graph.NewConstant(t)
}

func msQLinearAdd(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	a, as, az, bv, bs, bz, cs, cz := b.in(0), b.in(1), n.Input(2), b.in(3), b.in(4), n.Input(5), b.in(6), n.Input(7)
	if b.err != nil {
		return nil, b.err
	}
	if az == nil || bz == nil || cz == nil {
		return nil, n.Errorf("the zero points are required (they give the quantized types)")
	}
	if v, ok := constScalars(as, az, bs, bz, cs, cz); ok {
		sa, sb := v[0].Float(0), v[2].Float(0)
		smax := math.Max(sa, sb)
		if smax > 0 && v[4].Float(0) > 0 {
			ka := int64(math.RoundToEven(sa / smax * (1 << addShift)))
			kb := int64(math.RoundToEven(sb / smax * (1 << addShift)))
			ta := b.call(op.Multiply, nil, b.centered(a, az, nil), intConst(ka))
			tb := b.call(op.Multiply, nil, b.centered(bv, bz, nil), intConst(kb))
			acc := b.call(op.Add, nil, ta, tb)
			if e := b.requantTo(acc, []float64{smax / (1 << addShift) / v[4].Float(0)}, nil, v[5]); e != nil {
				return b.done(e)
			}
		}
	}
	sum := b.call(op.Add, nil, b.dequantize(a, as, az), b.dequantize(bv, bs, bz))
	return b.done(b.quantize(sum, cs, cz, b.dtype(cz)))
}

// unaryQLinear reads the inputs of a one-input quantized operator (X,
// X_scale, x_zero_point, y_scale, y_zero_point) and X's type; the zero
// points are required, since they give the quantized types.
func (b *builder) unaryQLinear() (x, xs, xz, ys, yz graph.Expr, xt *ir.TensorType, err error) {
	x, xs, xz, ys, yz = b.in(0), b.in(1), b.n.Input(2), b.in(3), b.n.Input(4)
	xt = b.typ(x)
	if b.err != nil {
		return nil, nil, nil, nil, nil, nil, b.err
	}
	if xz == nil || yz == nil {
		return nil, nil, nil, nil, nil, nil, b.n.Errorf("the zero points are required (they give the quantized types)")
	}
	return x, xs, xz, ys, yz, xt, nil
}

func msQLinearGlobalAveragePool(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x, xs, xz, ys, yz, xt, err := b.unaryQLinear()
	if err != nil {
		return nil, err
	}
	r := len(xt.Shape)
	if r < 3 {
		return nil, n.Errorf("input %s must have rank 3 or more", xt)
	}
	axes := spatialAxes(r)
	if n.Int("channels_last", 0) != 0 {
		axes = make([]int64, r-2)
		for i := range axes {
			axes[i] = int64(i + 1)
		}
	}
	count := int64(1)
	for _, a := range axes {
		count *= xt.Shape[a]
	}
	if v, ok := constScalars(xs, xz, ys, yz); ok && count > 0 && count <= 1<<23 && v[2].Float(0) > 0 {
		sum := b.call(op.Sum, ir.Attrs{"axis": axes, "keepdims": true}, b.centered(x, xz, nil))
		if e := b.requantTo(sum, []float64{v[0].Float(0) / float64(count) / v[2].Float(0)}, nil, v[3]); e != nil {
			return b.done(e)
		}
	}
	mean := b.call(op.Mean, ir.Attrs{"axis": axes, "keepdims": true}, b.dequantize(x, xs, xz))
	return b.done(b.quantize(mean, ys, yz, b.dtype(yz)))
}

func msQLinearConcat(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	nin := len(n.Inputs)
	if nin < 5 || (nin-2)%3 != 0 {
		return nil, n.Errorf("want y_scale, y_zero_point and triples of (x, scale, zero point), got %d inputs", nin)
	}
	ys, yz := b.in(0), b.in(1)
	if b.err != nil {
		return nil, b.err
	}
	yv, yconst := constScalars(ys, yz)
	qdt := b.dtype(yz)
	var parts []graph.Expr
	integer := yconst && yv[0].Float(0) > 0
	for i := 2; i < nin; i += 3 {
		x, xs, xz := b.in(i), b.in(i+1), b.in(i+2)
		if b.err != nil {
			return nil, b.err
		}
		if b.dtype(x) != qdt {
			return nil, n.Errorf("input %d has type %s, y_zero_point %s", i, b.dtype(x), qdt)
		}
		parts = append(parts, x)
		if !integer {
			continue
		}
		xv, ok := constScalars(xs, xz)
		if !ok {
			integer = false
			continue
		}
		if xv[0].Float(0) == yv[0].Float(0) && xv[1].Int(0) == yv[1].Int(0) {
			continue // already on y's grid
		}
		e := b.requantTo(b.centered(x, xz, nil), []float64{xv[0].Float(0) / yv[0].Float(0)}, nil, yv[1])
		if e == nil {
			integer = false
			continue
		}
		parts[len(parts)-1] = e
	}
	axis := n.Int("axis", 0)
	if integer {
		return b.done(b.call(op.Concatenate, ir.Attrs{"axis": axis}, parts...))
	}
	parts = parts[:0]
	for i := 2; i < nin; i += 3 {
		parts = append(parts, b.dequantize(b.in(i), b.in(i+1), b.in(i+2)))
	}
	cat := b.call(op.Concatenate, ir.Attrs{"axis": axis}, parts...)
	return b.done(b.quantize(cat, ys, yz, qdt))
}

func msQGemm(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	a, as, az, bm, bs, bz := b.in(0), b.in(1), b.in(2), b.in(3), b.in(4), b.in(5)
	bias, ys, yz := n.Input(6), n.Input(7), n.Input(8)
	at, bt := b.typ(a), b.typ(bm)
	if b.err != nil {
		return nil, b.err
	}
	if len(at.Shape) != 2 || len(bt.Shape) != 2 {
		return nil, n.Errorf("A %s and B %s must be matrices", at, bt)
	}
	if n.Int("transA", 0) != 0 {
		a = b.call(op.Transpose, ir.Attrs{"axes": []int64{1, 0}}, a)
	}
	if n.Int("transB", 0) != 0 {
		if k, ok := bm.(*graph.Constant); ok && k.Value.DType.Size() == 1 {
			// Transposed here, so that the weight stays a constant.
			t := tensor.New(k.Value.DType, ir.Shape{bt.Shape[1], bt.Shape[0]})
			for i := int64(0); i < bt.Shape[0]; i++ {
				for j := int64(0); j < bt.Shape[1]; j++ {
					t.Data[j*bt.Shape[0]+i] = k.Value.Data[i*bt.Shape[1]+j]
				}
			}
			bm = graph.NewConstant(t)
		} else {
			bm = b.call(op.Transpose, ir.Attrs{"axes": []int64{1, 0}}, bm)
		}
	}
	acc := b.integerMatMul(a, az, bm, bz)
	if bias != nil {
		if b.dtype(bias) != ir.Int32 {
			return nil, n.Errorf("C has type %s, want int32", b.dtype(bias))
		}
		acc = b.call(op.Add, nil, acc, bias)
	}
	alpha := n.Float("alpha", 1)
	if ys == nil {
		// Float output: acc * alpha * a_scale * b_scale.
		scale := b.call(op.Multiply, nil, b.call(op.Multiply, nil, as, bs), b.scalarLike(as, alpha))
		return b.done(b.call(op.Multiply, nil, b.cast(acc, b.dtype(as)), scale))
	}
	if yz == nil {
		return nil, n.Errorf("y_scale without y_zero_point")
	}
	if v, ok := constScalars(as, ys, yz); ok && v[1].Float(0) > 0 {
		if k, isConst := bs.(*graph.Constant); isConst {
			scales := make([]float64, k.Value.Len())
			for i := range scales {
				scales[i] = alpha * v[0].Float(0) * k.Value.Float(i) / v[1].Float(0)
			}
			if e := b.requantTo(acc, scales, ir.Shape{int64(len(scales))}, v[2]); e != nil {
				return b.done(e)
			}
		}
	}
	as = b.call(op.Multiply, nil, as, b.scalarLike(as, alpha))
	return b.done(b.requantize(acc, as, bs, ys, yz, nil))
}
