package onnx

import (
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Converters of the elementwise operator group.
//
// One converter per op type covers every opset version: the versions differ
// in accepted dtypes (which the graph relations check) and in a few legacy
// attributes handled here — `consumed_inputs` (opset < 6, ignored),
// `broadcast`/`axis` of binary ops before opset 7 (legacy broadcasting,
// see ewLegacyAlign), Clip's min/max attributes before opset 11, Cast's
// string `to` in opset 1, Dropout's `is_test`/mask dtype.
//
// Activations without a graph op are composed (alpha, beta etc. become
// rank-0 constants of the input's dtype):
//
//	Elu             where(x < 0, alpha*(exp(x)-1), x)
//	Selu            gamma * where(x <= 0, alpha*exp(x)-alpha, x)
//	Celu            max(x, 0) + min(alpha*(exp(x/alpha)-1), 0)
//	HardSigmoid     clip(alpha*x + beta, 0, 1)
//	HardSwish       x * clip(x/6 + 1/2, 0, 1)
//	Softplus        max(x, 0) + log(exp(-|x|) + 1)  (log(exp(x)+1) without overflow)
//	Softsign        x / (1 + |x|)
//	ThresholdedRelu where(x > alpha, x, 0)
//	Shrink          where(x < -lambd, x+bias, where(x > lambd, x-bias, 0))
//	Reciprocal      1 / x
//	Sum, Mean, Max, Min (variadic)  chains of add / maximum / minimum (Mean divides by n)
//	QuantizeLinear  cast(clip(round(x/scale) + zp, qmin, qmax))
//	DequantizeLinear (cast(x) - cast(zp)) * scale
//	DynamicQuantizeLinear  scale and zero point from reduce max/min, then QuantizeLinear

func init() {
	for name, o := range map[string]*op.Op{
		"Abs": op.Abs, "Neg": op.Negative, "Sign": op.Sign, "Floor": op.Floor, "Ceil": op.Ceil,
		"Round": op.Round, "Exp": op.Exp, "Log": op.Log, "Sqrt": op.Sqrt, "Sin": op.Sin,
		"Cos": op.Cos, "Tan": op.Tan, "Asin": op.Asin, "Acos": op.Acos, "Atan": op.Atan,
		"Sinh": op.Sinh, "Cosh": op.Cosh, "Tanh": op.Tanh, "Asinh": op.Asinh, "Acosh": op.Acosh,
		"Atanh": op.Atanh, "Erf": op.Erf, "Sigmoid": op.Sigmoid, "Not": op.LogicalNot,
		"IsNaN": op.IsNaN, "Relu": op.Relu,
	} {
		register(name, 1, ewUnary(o))
	}
	for name, o := range map[string]*op.Op{
		"Add": op.Add, "Sub": op.Subtract, "Mul": op.Multiply, "Div": op.Divide,
		"And": op.LogicalAnd, "Or": op.LogicalOr, "Xor": op.LogicalXor,
		"Equal": op.Equal, "Greater": op.Greater, "Less": op.Less,
		"GreaterOrEqual": op.GreaterEqual, "LessOrEqual": op.LessEqual,
	} {
		register(name, 1, ewBinary(o))
	}
	register("Pow", 1, convertPow)
	register("Mod", 10, convertMod)
	register("BitShift", 11, convertBitShift)
	register("IsInf", 10, convertIsInf)
	register("Sum", 1, ewVariadic(op.Add, false))
	register("Mean", 1, ewVariadic(op.Add, true))
	register("Max", 1, ewVariadic(op.Maximum, false))
	register("Min", 1, ewVariadic(op.Minimum, false))
	register("Where", 9, convertWhere)
	register("Cast", 1, convertCast)
	register("CastLike", 15, convertCastLike)
	register("Clip", 1, convertClipAttrs)
	register("Clip", 11, convertClipInputs)
	register("Dropout", 1, convertDropout)
	register("Reciprocal", 1, convertReciprocal)
	register("LeakyRelu", 1, convertLeakyRelu)
	register("PRelu", 1, convertPRelu)
	register("Elu", 1, convertElu)
	register("Selu", 1, convertSelu)
	register("Celu", 12, convertCelu)
	register("HardSigmoid", 1, convertHardSigmoid)
	register("HardSwish", 14, convertHardSwish)
	register("Softplus", 1, convertSoftplus)
	register("Softsign", 1, convertSoftsign)
	register("ThresholdedRelu", 10, convertThresholdedRelu)
	register("Shrink", 9, convertShrink)
	register("QuantizeLinear", 10, convertQuantizeLinear)
	register("DequantizeLinear", 10, convertDequantizeLinear)
	register("DynamicQuantizeLinear", 11, convertDynamicQuantizeLinear)
}

func ewUnary(o *op.Op) Converter {
	return func(c *Ctx, n *Node) ([]graph.Expr, error) {
		b := &builder{c: c, n: n}
		return b.done(b.call(o, nil, b.in(0))) // consumed_inputs (opset < 6) is ignored
	}
}

// ewLegacyAlign implements the binary ops' broadcasting before opset 7:
// with broadcast=1, B's shape is matched against A's starting at `axis`
// (default: aligned to the trailing dimensions, as numpy does). B is
// reshaped with trailing 1s so that numpy broadcasting then does the rest.
// Without broadcast=1 the shapes should be equal; numpy broadcasting is a
// superset, so equal shapes need nothing.
func (b *builder) legacyAlign(x, y graph.Expr) graph.Expr {
	n := b.n
	if b.err != nil || n.Opset >= 7 || n.Int("broadcast", 0) != 1 || !n.Has("axis") {
		return y
	}
	tx, ty := b.typ(x), b.typ(y)
	if b.err != nil {
		return y
	}
	axis := n.Int("axis", 0)
	if axis < 0 {
		axis += int64(tx.Shape.Rank())
	}
	trailing := int64(tx.Shape.Rank()) - axis - int64(ty.Shape.Rank())
	if axis < 0 || trailing < 0 {
		b.err = n.Errorf("legacy broadcast: B of shape %v does not fit A of shape %v at axis %d", ty.Shape, tx.Shape, n.Int("axis", 0))
		return nil
	}
	s := ty.Shape.Clone()
	for ; trailing > 0; trailing-- {
		s = append(s, 1)
	}
	return b.reshape(y, s)
}

// operands returns inputs 0 and 1 with legacy broadcasting applied.
func (b *builder) operands() (graph.Expr, graph.Expr) {
	x, y := b.in(0), b.in(1)
	return x, b.legacyAlign(x, y)
}

func ewBinary(o *op.Op) Converter {
	return func(c *Ctx, n *Node) ([]graph.Expr, error) {
		b := &builder{c: c, n: n}
		x, y := b.operands()
		return b.done(b.call(o, nil, x, y))
	}
}

// convertPow: from opset 12 base and exponent may differ in type; the
// result has the base's type. Mixed types are computed in the float type
// involved (the wider one when both are floats) or, for two integer types,
// in the base's type, then cast to the base's type.
func convertPow(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x, y := b.operands()
	xt, yt := b.dtype(x), b.dtype(y)
	work := xt
	switch {
	case xt.IsFloat() && yt.IsFloat() && yt.Size() > xt.Size():
		work = yt
	case !xt.IsFloat() && yt.IsFloat():
		work = yt
	}
	r := b.call(op.Power, nil, b.cast(x, work), b.cast(y, work))
	return b.done(b.cast(r, xt))
}

func convertMod(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	fmod := n.Int("fmod", 0)
	if fmod != 0 && fmod != 1 {
		return nil, n.Errorf("fmod must be 0 or 1, got %d", fmod)
	}
	return b.done(b.call(op.Mod, ir.Attrs{"fmod": fmod == 1}, b.in(0), b.in(1)))
}

func convertBitShift(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	var o *op.Op
	switch d := n.String("direction", ""); d {
	case "LEFT":
		o = op.LeftShift
	case "RIGHT":
		o = op.RightShift
	default:
		return nil, n.Errorf("direction must be LEFT or RIGHT, got %q", d)
	}
	return b.done(b.call(o, nil, b.in(0), b.in(1)))
}

func convertIsInf(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	attrs := ir.Attrs{
		"detect_positive": n.Int("detect_positive", 1) != 0,
		"detect_negative": n.Int("detect_negative", 1) != 0,
	}
	return b.done(b.call(op.IsInf, attrs, b.in(0)))
}

// ewVariadic folds Sum/Mean/Max/Min over their inputs with a broadcasting
// binary op (before opset 8 the inputs had to have equal shapes, which numpy
// broadcasting accepts too). Mean then divides by the input count.
func ewVariadic(o *op.Op, mean bool) Converter {
	return func(c *Ctx, n *Node) ([]graph.Expr, error) {
		b := &builder{c: c, n: n}
		if len(n.Inputs) == 0 {
			return nil, n.Errorf("needs at least one input")
		}
		acc := b.in(0)
		for i := 1; i < len(n.Inputs); i++ {
			acc = b.call(o, nil, acc, b.in(i))
		}
		if mean && len(n.Inputs) > 1 {
			acc = b.call(op.Divide, nil, acc, b.scalarLike(acc, float64(len(n.Inputs))))
		}
		return b.done(acc)
	}
}

func convertWhere(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	return b.done(b.call(op.Where, nil, b.in(0), b.in(1), b.in(2)))
}

// castTarget reads Cast's `to`: an ONNX element type code, or (opset 1) its
// name as a string. Unsupported element types (strings, ...) give an error
// wrapping ErrUnsupportedType.
func castTarget(n *Node) (ir.DType, error) {
	a, ok := n.attr("to")
	if !ok {
		return ir.Invalid, n.Errorf("attribute to is missing")
	}
	code := a.Int
	if a.Type == AttrString {
		v, ok := pb.TensorProto_DataType_value[a.Str]
		if !ok {
			return ir.Invalid, n.Errorf("unknown element type %q in attribute to", a.Str)
		}
		code = int64(v)
	}
	dt, err := DTypeFromONNX(int32(code))
	if err != nil {
		return ir.Invalid, wrapNodeErr(n, fmt.Errorf("attribute to: %w", err))
	}
	return dt, nil
}

func convertCast(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	dt, err := castTarget(n)
	if err != nil {
		return nil, err
	}
	return b.done(b.cast(b.in(0), dt))
}

func convertCastLike(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x, like := b.in(0), b.in(1)
	return b.done(b.cast(x, b.dtype(like)))
}

// convertClipAttrs handles Clip before opset 11: bounds are the float
// attributes min and max (absent: unbounded).
func convertClipAttrs(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	lo, hi := n.Float("min", math.Inf(-1)), n.Float("max", math.Inf(1))
	return b.done(b.call(op.Clip, ir.Attrs{"a_min": lo, "a_max": hi}, b.in(0)))
}

// convertClipInputs handles Clip from opset 11: the bounds are optional
// inputs. Constant bounds become clip's attributes when they survive the
// trip through float64 exactly; other bounds (computed at run time, or huge
// 64-bit integers) compose maximum and minimum.
func convertClipInputs(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	if b.err != nil {
		return nil, b.err
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	var dynLo, dynHi graph.Expr
	for i, bound := range []*float64{&lo, &hi} {
		e := n.Input(i + 1)
		if e == nil {
			continue
		}
		k, ok := e.(*graph.Constant)
		if ok && k.Value.Len() != 1 {
			return nil, n.Errorf("bound %d must be a scalar, got shape %v", i+1, k.Value.Shape)
		}
		if ok {
			v := k.Value.Float(0)
			exact := true // every value of the other dtypes is a float64
			switch k.Value.DType {
			case ir.Int64:
				exact = math.Abs(v) <= 1<<53
			case ir.Uint64:
				exact = k.Value.Uint(0) <= 1<<53
			}
			if exact {
				*bound = v
				continue
			}
		}
		if i == 0 {
			dynLo = e
		} else {
			dynHi = e
		}
	}
	// Clip is min(max(x, lo), hi): the lower bound applies first, which
	// matters when lo > hi (the result is then hi).
	r := x
	bounded := !math.IsInf(lo, -1) || !math.IsInf(hi, 1)
	switch {
	case dynLo == nil && dynHi == nil && bounded:
		r = b.call(op.Clip, ir.Attrs{"a_min": lo, "a_max": hi}, r)
	case dynLo != nil || dynHi != nil:
		if dynLo != nil {
			r = b.call(op.Maximum, nil, r, dynLo)
		} else if !math.IsInf(lo, -1) {
			r = b.call(op.Clip, ir.Attrs{"a_min": lo, "a_max": math.Inf(1)}, r)
		}
		if dynHi != nil {
			r = b.call(op.Minimum, nil, r, dynHi)
		} else if !math.IsInf(hi, 1) {
			r = b.call(op.Clip, ir.Attrs{"a_min": math.Inf(-1), "a_max": hi}, r)
		}
	}
	return b.done(r) // without bounds Clip is the identity
}

// convertDropout: kiln compiles for inference, where Dropout is the
// identity and its mask is all ones (bool from opset 10, the input's dtype
// before). Before opset 7 is_test is ignored (inference is assumed, as ONNX
// Runtime does). From opset 12 a training_mode input that is true is an
// error unless the ratio is 0 (then Dropout is the identity as well).
func convertDropout(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	xt := b.typ(x)
	if b.err != nil {
		return nil, b.err
	}
	// Inference: the output is the input whatever the ratio, seed or
	// (before opset 7) is_test say; they are read so that they count as
	// known attributes.
	n.Float("ratio", 0.5)
	n.Int("seed", 0)
	n.Int("is_test", 0)
	if tm := n.Input(2); n.Opset >= 12 && tm != nil {
		if err := dropoutInference(c, n, tm); err != nil {
			return nil, err
		}
	}
	outs := []graph.Expr{x}
	if n.NumOutputs > 1 {
		mdt := ir.Bool
		if n.Opset < 10 {
			mdt = xt.DType
		}
		ones := tensor.New(mdt, xt.Shape)
		for i := 0; i < ones.Len(); i++ {
			ones.SetInt(i, 1)
		}
		outs = append(outs, c.Constant(ones))
	}
	return outs, nil
}

// dropoutInference checks that a Dropout with a training_mode input acts as
// the identity: training_mode is known to be false, or the ratio is known
// to be 0. Whichever is a compile-time constant decides.
func dropoutInference(c *Ctx, n *Node, tm graph.Expr) error {
	ratio, ratioKnown := 0.5, true // the default ratio
	if r := n.Input(1); r != nil {
		ratioKnown = false
		if rv, err := c.Const(r, "ratio"); err == nil && rv.Len() == 1 {
			ratio, ratioKnown = rv.Float(0), true
		}
	}
	if ratioKnown && ratio == 0 {
		return nil
	}
	tv, err := c.Const(tm, "training_mode")
	if err != nil {
		return err
	}
	if tv.Len() != 1 {
		return n.Errorf("training_mode must be a scalar, got shape %v", tv.Shape)
	}
	if tv.Int(0) == 0 {
		return nil
	}
	if !ratioKnown {
		_, err := c.Const(n.Input(1), "ratio (training-mode Dropout is supported only with ratio 0)")
		return err
	}
	return n.Errorf("%w: training-mode Dropout (random masking, ratio %g) is a training operation; kiln compiles for inference", ErrUnsupportedType, ratio)
}

func convertReciprocal(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	return b.done(b.call(op.Divide, nil, b.scalarLike(x, 1), x))
}

func convertLeakyRelu(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	return b.done(b.call(op.LeakyRelu, ir.Attrs{"alpha": n.Float("alpha", 0.01)}, b.in(0)))
}

// convertPRelu: from opset 7 the slope broadcasts to x numpy-style. Before,
// a 1-D slope whose length is the channel count (x's dim 1) is per channel,
// so it is reshaped to [C, 1, ...] to broadcast against [N, C, ...].
func convertPRelu(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x, s := b.in(0), b.in(1)
	xt, st := b.typ(x), b.typ(s)
	if b.err != nil {
		return nil, b.err
	}
	if n.Opset < 7 && st.Shape.Rank() == 1 && xt.Shape.Rank() >= 3 && st.Shape[0] == xt.Shape[1] {
		shape := ir.Shape{st.Shape[0]}
		for i := 2; i < xt.Shape.Rank(); i++ {
			shape = append(shape, 1)
		}
		s = b.reshape(s, shape)
	}
	return b.done(b.call(op.PRelu, nil, x, s))
}

func convertElu(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	alpha := n.Float("alpha", 1)
	neg := b.call(op.Multiply, nil, b.scalarLike(x, alpha), b.call(op.Subtract, nil, b.call(op.Exp, nil, x), b.scalarLike(x, 1)))
	return b.done(b.call(op.Where, nil, b.call(op.Less, nil, x, b.scalarLike(x, 0)), neg, x))
}

func convertSelu(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	alpha := n.Float("alpha", 1.67326319217681884765625)
	gamma := n.Float("gamma", 1.05070102214813232421875)
	neg := b.call(op.Subtract, nil, b.call(op.Multiply, nil, b.scalarLike(x, alpha), b.call(op.Exp, nil, x)), b.scalarLike(x, alpha))
	sel := b.call(op.Where, nil, b.call(op.LessEqual, nil, x, b.scalarLike(x, 0)), neg, x)
	return b.done(b.call(op.Multiply, nil, b.scalarLike(x, gamma), sel))
}

func convertCelu(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	alpha := n.Float("alpha", 1)
	e := b.call(op.Exp, nil, b.call(op.Divide, nil, x, b.scalarLike(x, alpha)))
	neg := b.call(op.Minimum, nil, b.call(op.Multiply, nil, b.scalarLike(x, alpha), b.call(op.Subtract, nil, e, b.scalarLike(x, 1))), b.scalarLike(x, 0))
	return b.done(b.call(op.Add, nil, b.call(op.Maximum, nil, x, b.scalarLike(x, 0)), neg))
}

func convertHardSigmoid(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	alpha, beta := n.Float("alpha", 0.2), n.Float("beta", 0.5)
	lin := b.call(op.Add, nil, b.call(op.Multiply, nil, x, b.scalarLike(x, alpha)), b.scalarLike(x, beta))
	return b.done(b.call(op.Clip, ir.Attrs{"a_min": 0.0, "a_max": 1.0}, lin))
}

func convertHardSwish(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	lin := b.call(op.Add, nil, b.call(op.Multiply, nil, x, b.scalarLike(x, 1.0/6)), b.scalarLike(x, 0.5))
	return b.done(b.call(op.Multiply, nil, x, b.call(op.Clip, ir.Attrs{"a_min": 0.0, "a_max": 1.0}, lin)))
}

func convertSoftplus(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	// max(x, 0) + log(1 + exp(-|x|)): the textbook log(exp(x) + 1)
	// overflows to +inf in float32 for x > 88.
	tail := b.call(op.Log, nil, b.call(op.Add, nil, b.call(op.Exp, nil, b.call(op.Negative, nil, b.call(op.Abs, nil, x))), b.scalarLike(x, 1)))
	return b.done(b.call(op.Add, nil, b.call(op.Maximum, nil, x, b.scalarLike(x, 0)), tail))
}

func convertSoftsign(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	return b.done(b.call(op.Divide, nil, x, b.call(op.Add, nil, b.scalarLike(x, 1), b.call(op.Abs, nil, x))))
}

func convertThresholdedRelu(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	alpha := n.Float("alpha", 1)
	return b.done(b.call(op.Where, nil, b.call(op.Greater, nil, x, b.scalarLike(x, alpha)), x, b.scalarLike(x, 0)))
}

func convertShrink(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	lambd, bias := n.Float("lambd", 0.5), n.Float("bias", 0)
	upper := b.call(op.Where, nil, b.call(op.Greater, nil, x, b.scalarLike(x, lambd)),
		b.call(op.Subtract, nil, x, b.scalarLike(x, bias)), b.scalarLike(x, 0))
	return b.done(b.call(op.Where, nil, b.call(op.Less, nil, x, b.scalarLike(x, -lambd)),
		b.call(op.Add, nil, x, b.scalarLike(x, bias)), upper))
}

// quantParam prepares a scale or zero point for broadcasting against x: a
// scalar or one-element tensor stays per-tensor; from opset 13 a 1-D tensor
// of length x.shape[axis] is per-axis and is reshaped to [len, 1, ...].
func (b *builder) quantParam(p graph.Expr, x graph.Expr, what string) graph.Expr {
	pt, xt := b.typ(p), b.typ(x)
	if b.err != nil {
		return nil
	}
	if pt.Shape.NumElements() == 1 && pt.Shape.Rank() <= 1 {
		return b.reshape(p, ir.Shape{})
	}
	if b.n.Opset < 13 || pt.Shape.Rank() != 1 {
		b.err = b.n.Errorf("%s must be a scalar (or 1-D per-axis from opset 13), got shape %v", what, pt.Shape)
		return nil
	}
	axis, err := op.NormAxis(b.n.Int("axis", 1), xt.Shape.Rank())
	if err != nil {
		b.err = b.n.Errorf("%v", err)
		return nil
	}
	if pt.Shape[0] != xt.Shape[axis] {
		b.err = b.n.Errorf("per-axis %s has %d elements, input dimension %d has %d", what, pt.Shape[0], axis, xt.Shape[axis])
		return nil
	}
	shape := ir.Shape{pt.Shape[0]}
	for i := axis + 1; i < xt.Shape.Rank(); i++ {
		shape = append(shape, 1)
	}
	return b.reshape(p, shape)
}

// quantRange is the saturation range of a quantized dtype.
func quantRange(dt ir.DType) (float64, float64, bool) {
	switch dt {
	case ir.Uint8:
		return 0, 255, true
	case ir.Int8:
		return -128, 127, true
	case ir.Uint16:
		return 0, 65535, true
	case ir.Int16:
		return -32768, 32767, true
	}
	return 0, 0, false
}

// quantize is cast(clip(round(x/scale) + zp, qmin, qmax), qdt), computed in
// scale's float type (round halves to even). zp may be nil (zero).
func (b *builder) quantize(x, scale, zp graph.Expr, qdt ir.DType) graph.Expr {
	lo, hi, ok := quantRange(qdt)
	if !ok && b.err == nil {
		b.err = b.n.Errorf("quantized type %s is not supported (uint8, int8, uint16, int16)", qdt)
	}
	fdt := b.dtype(scale)
	q := b.call(op.Round, nil, b.call(op.Divide, nil, b.cast(x, fdt), scale))
	if zp != nil {
		q = b.call(op.Add, nil, q, b.cast(zp, fdt))
	}
	return b.cast(b.call(op.Clip, ir.Attrs{"a_min": lo, "a_max": hi}, q), qdt)
}

func convertQuantizeLinear(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	scale := b.quantParam(b.in(1), x, "y_scale")
	qdt := ir.Uint8
	var zp graph.Expr
	if z := n.Input(2); z != nil {
		qdt = b.dtype(z)
		zp = b.quantParam(z, x, "y_zero_point")
	}
	return b.done(b.quantize(x, scale, zp, qdt))
}

func convertDequantizeLinear(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	scale := b.quantParam(b.in(1), x, "x_scale")
	fdt := b.dtype(scale)
	v := b.cast(x, fdt)
	if z := n.Input(2); z != nil {
		if b.err == nil && b.dtype(z) != b.dtype(x) {
			return nil, n.Errorf("x_zero_point has type %s, x has %s", b.dtype(z), b.dtype(x))
		}
		v = b.call(op.Subtract, nil, v, b.cast(b.quantParam(z, x, "x_zero_point"), fdt))
	}
	return b.done(b.call(op.Multiply, nil, v, scale))
}

// convertDynamicQuantizeLinear computes, for uint8:
//
//	lo = min(min(x), 0); hi = max(max(x), 0); scale = (hi - lo) / 255
//	zp = cast(clip(round(-lo / scale), 0, 255)); y = quantize(x, scale, zp)
func convertDynamicQuantizeLinear(c *Ctx, n *Node) ([]graph.Expr, error) {
	b := &builder{c: c, n: n}
	x := b.in(0)
	xt := b.typ(x)
	if b.err != nil {
		return nil, b.err
	}
	all := make([]int64, xt.Shape.Rank())
	for i := range all {
		all[i] = int64(i)
	}
	red := ir.Attrs{"axis": all, "keepdims": false}
	zero := b.scalarLike(x, 0)
	lo := b.call(op.Minimum, nil, b.call(op.Min, red, x), zero)
	hi := b.call(op.Maximum, nil, b.call(op.Max, red, x), zero)
	scale := b.call(op.Divide, nil, b.call(op.Subtract, nil, hi, lo), b.scalarLike(x, 255))
	zpf := b.call(op.Clip, ir.Attrs{"a_min": 0.0, "a_max": 255.0},
		b.call(op.Round, nil, b.call(op.Divide, nil, b.call(op.Negative, nil, lo), scale)))
	zp := b.cast(zpf, ir.Uint8)
	y := b.quantize(x, scale, zp, ir.Uint8)
	return b.done(y, scale, zp)
}
