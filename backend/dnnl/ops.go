package dnnl

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
)

// Composite function names dnnl takes (the Composite attribute that
// MergeComposite sets). Each is one oneDNN primitive with the bias as the
// primitive's bias and the rest as post-ops. Composites lists them all;
// the names follow one scheme, "dnnl." + anchor + "_bias" + "_add" +
// "_" + activation, of which these are spelled out.
const (
	CompositeConv2DBias        = "dnnl.conv2d_bias"
	CompositeConv2DRelu        = "dnnl.conv2d_relu"
	CompositeConv2DBiasRelu    = "dnnl.conv2d_bias_relu"
	CompositeConv2DAdd         = "dnnl.conv2d_add"
	CompositeConv2DAddRelu     = "dnnl.conv2d_add_relu"
	CompositeConv2DBiasAdd     = "dnnl.conv2d_bias_add"
	CompositeConv2DBiasAddRelu = "dnnl.conv2d_bias_add_relu"
	CompositeDenseBias         = "dnnl.dense_bias"
	CompositeDenseRelu         = "dnnl.dense_relu"
	CompositeConv2DBiasClip    = "dnnl.conv2d_bias_clip"
	CompositeConv2DClip        = "dnnl.conv2d_clip"
	CompositeDenseBiasRelu     = "dnnl.dense_bias_relu"
	// The hard-swish composites: x * clip(x/6 + 1/2, 0, 1) of the biased
	// anchor, as ONNX exporters write HardSwish (HardSigmoid times its
	// input: MobileNetV3), run as oneDNN's hardswish post-op.
	CompositeConv2DBiasHardSwish = "dnnl.conv2d_bias_hardswish"
	CompositeConv2DHardSwish     = "dnnl.conv2d_hardswish"
	CompositeDenseBiasHardSwish  = "dnnl.dense_bias_hardswish"
	CompositeDenseHardSwish      = "dnnl.dense_hardswish"
	// CompositeConv2DBiasHardSigmoid is a squeeze-excite gate:
	// clip(y*alpha + beta, 0, 1) of the biased convolution.
	CompositeConv2DBiasHardSigmoid = "dnnl.conv2d_bias_hardsigmoid"
	// CompositeConv2DBiasSiLU is y * sigmoid(y) (SiLU, swish) of the
	// biased convolution, as EfficientNet-style models write it.
	CompositeConv2DBiasSiLU = "dnnl.conv2d_bias_silu"
	// CompositeConv2DBiasSigmoid is sigmoid(y) of the biased
	// convolution (a squeeze-excite gate).
	CompositeConv2DBiasSigmoid = "dnnl.conv2d_bias_sigmoid"
)

// Activation is the elementwise tail of a composite, run as the
// primitive's eltwise post-ops.
type Activation int

// The activations a composite may end with.
const (
	// ActNone: no activation.
	ActNone Activation = iota
	// ActRelu: nn.relu(y).
	ActRelu
	// ActClip: clip(y) with any bounds (MobileNet's relu6), which travel
	// as the kernel attributes clip_min and clip_max.
	ActClip
	// ActHardSwish: multiply(y, clip(add(multiply(y, 1/6), 1/2), 0, 1)),
	// either operand order of each multiply and the add.
	ActHardSwish
	// ActHardSigmoid: clip(add(multiply(y, alpha), beta), 0, 1) with
	// scalar constants alpha and beta (ONNX HardSigmoid), run as a
	// linear then a clip post-op; alpha and beta travel as the kernel
	// attributes hs_alpha and hs_beta.
	ActHardSigmoid
	// ActSigmoid: sigmoid(y), oneDNN's logistic.
	ActSigmoid
	// ActSiLU: multiply(y, sigmoid(y)) either order, oneDNN's swish.
	ActSiLU
)

// actNames are the activations' name parts and the ops of their
// patterns, innermost last, for the docs.
var actNames = [...]struct{ name, doc string }{
	ActNone:        {"", "%s"},
	ActRelu:        {"relu", "nn.relu(%s)"},
	ActClip:        {"clip", "clip(%s)"},
	ActHardSwish:   {"hardswish", "multiply(y, clip(add(multiply(y, 1/6), 1/2), 0, 1)) with y = %s"},
	ActHardSigmoid: {"hardsigmoid", "clip(add(multiply(%s, alpha), beta), 0, 1)"},
	ActSigmoid:     {"sigmoid", "sigmoid(%s)"},
	ActSiLU:        {"silu", "multiply(y, sigmoid(y)) with y = %s"},
}

// String is the activation's name part ("relu"; "" for ActNone).
func (a Activation) String() string { return actNames[a].name }

// CompositeSpec describes one composite: the operator pattern its
// function body must have. Every composite is an anchor (nn.conv2d or
// nn.dense) followed, innermost first, by an optional bias, an optional
// residual add and an optional activation:
//
//	bias:  nn.bias_add(anchor, b) (axis 1 for conv2d, the last axis for
//	       dense), or add(anchor, b) / add(b, anchor) with b a constant or
//	       parameter of shape [C,1,1] or [1,C,1,1] (conv2d) or [N] or
//	       [1,N] (dense)
//	add:   add(inner, y) or add(y, inner), y of the output's shape
//	act:   see Activation
//
// The operands (data, weight, bias, y) are the composite's parameters or
// constants; the weight of a conv2d may be either (a constant is
// reordered once at load time, which is faster).
type CompositeSpec struct {
	// Name is the Composite attribute ("dnnl.conv2d_bias_relu").
	Name string
	// Doc shows the pattern.
	Doc string
	// Anchor is the operator the composite is built around.
	Anchor *op.Op
	// Bias and Add say which of the two follow the anchor.
	Bias, Add bool
	// Act is the final activation.
	Act Activation
}

// newComposite makes a spec with its name and doc from the scheme.
func newComposite(anchor *op.Op, bias, add bool, act Activation) CompositeSpec {
	name, doc := "dnnl."+anchor.Name[len("nn."):], anchor.Name+"(x, w)"
	if bias {
		name += "_bias"
		doc = "nn.bias_add(" + doc + ", b)"
	}
	if add {
		name += "_add"
		doc = "add(" + doc + ", y)"
	}
	if act != ActNone {
		name += "_" + act.String()
	}
	return CompositeSpec{Name: name, Doc: fmt.Sprintf(actNames[act].doc, doc), Anchor: anchor, Bias: bias, Add: add, Act: act}
}

// Composites lists the composite functions dnnl takes, in the priority
// order a pattern table should try them: a composite whose pattern
// contains another's comes first (SiLU before sigmoid, every biased form
// before the unbiased one), so that the larger match wins.
var Composites = []CompositeSpec{
	newComposite(op.Conv2D, true, false, ActHardSwish),
	newComposite(op.Dense, true, false, ActHardSwish),
	newComposite(op.Conv2D, false, false, ActHardSwish),
	newComposite(op.Dense, false, false, ActHardSwish),
	newComposite(op.Conv2D, true, false, ActSiLU),
	newComposite(op.Dense, true, false, ActSiLU),
	newComposite(op.Conv2D, false, false, ActSiLU),
	newComposite(op.Dense, false, false, ActSiLU),
	newComposite(op.Conv2D, true, false, ActHardSigmoid),
	newComposite(op.Dense, true, false, ActHardSigmoid),
	newComposite(op.Conv2D, true, false, ActSigmoid),
	newComposite(op.Dense, true, false, ActSigmoid),
	newComposite(op.Conv2D, true, true, ActRelu),
	newComposite(op.Conv2D, true, true, ActNone),
	newComposite(op.Conv2D, false, true, ActRelu),
	newComposite(op.Conv2D, true, false, ActRelu),
	newComposite(op.Conv2D, true, false, ActClip),
	newComposite(op.Conv2D, false, true, ActNone),
	newComposite(op.Conv2D, false, false, ActHardSigmoid),
	newComposite(op.Conv2D, false, false, ActSigmoid),
	newComposite(op.Conv2D, true, false, ActNone),
	newComposite(op.Conv2D, false, false, ActRelu),
	newComposite(op.Conv2D, false, false, ActClip),
	newComposite(op.Dense, true, false, ActRelu),
	newComposite(op.Dense, true, false, ActNone),
	newComposite(op.Dense, false, false, ActRelu),
}

// Operators dnnl takes as single calls (float32 only, see Supported).
var Operators = []*op.Op{
	op.Conv2D, op.Dense, op.MatMul, op.MaxPool2D, op.AvgPool2D, op.GlobalAvgPool2D,
	op.Relu, op.Clip, op.Add, op.Subtract, op.Multiply, op.BiasAdd, op.BatchNorm, op.Concatenate,
}

// maxConcatInputs is the most operands a concatenate may have here: a
// kernel step holds at most 8 arguments (KD_MAX_ARGS), one of them the
// destination.
const maxConcatInputs = 7

// heavyOperators are the operators that make a region worth an external
// call (see KeepRegion).
var heavyOperators = []*op.Op{op.Conv2D, op.Dense, op.MatMul, op.MaxPool2D, op.AvgPool2D, op.GlobalAvgPool2D, op.BatchNorm}

// KeepRegion is dnnl's region filter: a region must contain a
// convolution, dense, matmul, pooling or batch-norm (every composite has
// one). A region of elementwise operators alone (add, subtract,
// multiply, relu, clip, bias_add) goes back to the host, where it fuses
// into a neighbouring kernel instead of costing an external call and
// splitting the host's fused kernels.
func KeepRegion(calls []*graph.Call) error {
	for _, c := range calls {
		if c.Op == nil {
			return nil // a composite
		}
		for _, h := range heavyOperators {
			if c.Op == h {
				return nil
			}
		}
	}
	return fmt.Errorf("only elementwise operators (no convolution, dense, matmul, pooling or batch-norm), which the host fuses with their neighbours")
}

func compositeSpec(name string) (*CompositeSpec, bool) {
	for i := range Composites {
		if Composites[i].Name == name {
			return &Composites[i], true
		}
	}
	return nil, false
}

func operator(name string) (*op.Op, bool) {
	for _, o := range Operators {
		if o.Name == name {
			return o, true
		}
	}
	return nil, false
}

// Supported says whether dnnl takes a call: nil for an operator of
// Operators or a call of a composite of Composites whose types and
// attributes oneDNN handles here, else an error saying why not
// (partition's report shows it). Requirements: float32 everywhere;
// nn.conv2d on 4-D NCHW data (any strides, padding, dilation, groups);
// nn.dense with a 2-D weight; nn.matmul on operands of rank >= 2 whose
// batch dimensions match the output's (the weight's may be 1); pooling
// on 4-D data, except average pooling whose ceil_mode adds padding that
// count_include_pad would count; elementwise operators where one operand
// has the output's shape and the other broadcasts to it (subtract: the
// first); nn.batch_norm on the channel axis 1 of a 2-D to 5-D tensor;
// concatenate of 1 to 7 non-empty operands.
func Supported(call *graph.Call) error {
	if call.Op != nil {
		if _, ok := operator(call.Op.Name); !ok {
			return fmt.Errorf("%s is not supported", call.Op.Name)
		}
		ins, out, err := callTypes(call.Args, call)
		if err != nil {
			return fmt.Errorf("%s: %w", call.Op.Name, err)
		}
		if err := checkOp(call.Op.Name, call.Attrs, ins, out); err != nil {
			return fmt.Errorf("%s: %w", call.Op.Name, err)
		}
		return nil
	}
	fn, ok := call.Fn.(*graph.Function)
	if !ok {
		return fmt.Errorf("call of %s is not supported", graph.Describe(call.Fn))
	}
	name := fn.StrAttr(graph.AttrComposite)
	spec, ok := compositeSpec(name)
	if !ok {
		if name == "" {
			return fmt.Errorf("call of a function that is not a composite")
		}
		return fmt.Errorf("composite %s is not supported", name)
	}
	m, err := matchComposite(spec, fn)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	ins, out, err := callTypes(m.operands, call)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := checkOp(name, m.attrs, ins, out); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// callTypes returns the tensor types of args and of call's result.
func callTypes(args []graph.Expr, call *graph.Call) ([]*ir.TensorType, *ir.TensorType, error) {
	var ins []*ir.TensorType
	for i, a := range args {
		tt, ok := a.Type().(*ir.TensorType)
		if !ok {
			return nil, nil, fmt.Errorf("argument %d is %v, not a tensor", i, a.Type())
		}
		ins = append(ins, tt)
	}
	out, ok := call.Type().(*ir.TensorType)
	if !ok {
		return nil, nil, fmt.Errorf("result is %v, not a tensor", call.Type())
	}
	return ins, out, nil
}

// compositeMatch is a composite function taken apart: the anchor call's
// attributes and the kernel's operands (data, weight, then the bias and
// the residual when the spec has them), as expressions of the body.
type compositeMatch struct {
	attrs    ir.Attrs
	operands []graph.Expr
}

// matchComposite checks that fn's body has spec's pattern and returns
// its parts.
func matchComposite(spec *CompositeSpec, fn *graph.Function) (*compositeMatch, error) {
	e := fn.Body
	var bias, sum graph.Expr
	isCall := func(e graph.Expr, o *op.Op) (*graph.Call, bool) {
		c, ok := e.(*graph.Call)
		return c, ok && c.Op == o
	}
	actAttrs, e, err := matchActivation(spec.Act, e)
	if err != nil {
		return nil, err
	}
	if spec.Add {
		c, ok := isCall(e, op.Add)
		if !ok {
			return nil, fmt.Errorf("want add for the residual, found %s", graph.Describe(e))
		}
		inner, other, err := splitChain(c, spec.Anchor)
		if err != nil {
			return nil, err
		}
		e, sum = inner, other
	}
	if spec.Bias {
		c, ok := e.(*graph.Call)
		switch {
		case ok && c.Op == op.BiasAdd:
			e, bias = c.Args[0], c.Args[1]
		case ok && c.Op == op.Add:
			inner, other, err := splitChain(c, spec.Anchor)
			if err != nil {
				return nil, err
			}
			e, bias = inner, other
		default:
			return nil, fmt.Errorf("want nn.bias_add or add for the bias, found %s", graph.Describe(e))
		}
	}
	anchor, ok := isCall(e, spec.Anchor)
	if !ok {
		return nil, fmt.Errorf("want %s, found %s", spec.Anchor.Name, graph.Describe(e))
	}
	m := &compositeMatch{attrs: anchor.Attrs.Clone(), operands: []graph.Expr{anchor.Args[0], anchor.Args[1]}}
	for k, v := range actAttrs {
		m.attrs[k] = v
	}
	if bias != nil {
		m.operands = append(m.operands, bias)
	}
	if sum != nil {
		m.operands = append(m.operands, sum)
	}
	for i, o := range m.operands {
		switch o.(type) {
		case *graph.Var, *graph.Constant:
		default:
			return nil, fmt.Errorf("operand %d is %s, want a parameter or a constant", i, graph.Describe(o))
		}
	}
	return m, nil
}

// matchActivation checks that e is activation a of some y and returns
// y and the kernel attributes the activation carries (clip_min and
// clip_max, hs_alpha and hs_beta).
func matchActivation(a Activation, e graph.Expr) (ir.Attrs, graph.Expr, error) {
	is := func(e graph.Expr, o *op.Op) (*graph.Call, error) {
		c, ok := e.(*graph.Call)
		if !ok || c.Op != o {
			return nil, fmt.Errorf("body is %s, want %s", graph.Describe(e), o.Name)
		}
		return c, nil
	}
	switch a {
	case ActRelu:
		c, err := is(e, op.Relu)
		if err != nil {
			return nil, nil, err
		}
		return nil, c.Args[0], nil
	case ActClip:
		c, err := is(e, op.Clip)
		if err != nil {
			return nil, nil, err
		}
		return ir.Attrs{"clip_min": c.Attrs.Float("a_min"), "clip_max": c.Attrs.Float("a_max")}, c.Args[0], nil
	case ActHardSwish:
		y, err := hardSwishInput(e)
		return nil, y, err
	case ActHardSigmoid:
		y, alpha, beta, err := hardSigmoidInput(e)
		if err != nil {
			return nil, nil, err
		}
		return ir.Attrs{"hs_alpha": alpha, "hs_beta": beta}, y, nil
	case ActSigmoid:
		c, err := is(e, op.Sigmoid)
		if err != nil {
			return nil, nil, err
		}
		return nil, c.Args[0], nil
	case ActSiLU:
		mul, err := is(e, op.Multiply)
		if err != nil {
			return nil, nil, err
		}
		for k := 0; k < 2; k++ {
			if s, ok := mul.Args[1-k].(*graph.Call); ok && s.Op == op.Sigmoid && s.Args[0] == mul.Args[k] {
				return nil, mul.Args[k], nil
			}
		}
		return nil, nil, fmt.Errorf("%s is not y * sigmoid(y) (SiLU)", graph.Describe(e))
	}
	return nil, e, nil
}

// hardSigmoidInput returns y, alpha and beta when e is clip(add(
// multiply(y, alpha), beta), 0, 1) (either operand order of the multiply
// and the add) with float32 scalar constants alpha and beta.
func hardSigmoidInput(e graph.Expr) (y graph.Expr, alpha, beta float64, err error) {
	clip, ok := e.(*graph.Call)
	if !ok || clip.Op != op.Clip || clip.Attrs.Float("a_min") != 0 || clip.Attrs.Float("a_max") != 1 {
		return nil, 0, 0, fmt.Errorf("body is %s, want clip(..., 0, 1) (hard-sigmoid)", graph.Describe(e))
	}
	add, ok := clip.Args[0].(*graph.Call)
	if ok && add.Op == op.Add {
		for j := 0; j < 2; j++ {
			scaled, ok := add.Args[j].(*graph.Call)
			b, okb := scalarValue(add.Args[1-j])
			if !ok || scaled.Op != op.Multiply || !okb {
				continue
			}
			for k := 0; k < 2; k++ {
				if a, ok := scalarValue(scaled.Args[1-k]); ok {
					return scaled.Args[k], a, b, nil
				}
			}
		}
	}
	return nil, 0, 0, fmt.Errorf("%s is not clip(y * alpha + beta, 0, 1) (hard-sigmoid)", graph.Describe(e))
}

// scalarValue returns the value of a float32 constant of one element.
func scalarValue(e graph.Expr) (float64, bool) {
	c, ok := e.(*graph.Constant)
	if !ok || c.Value.DType != ir.Float32 || c.Value.Len() != 1 {
		return 0, false
	}
	return float64(c.Value.Float32s()[0]), true
}

// hardSwishInput returns y when e is multiply(y, h) (either order) with h
// the hard-sigmoid of y (hardSigmoidInput) with alpha = 1/6 and beta =
// 1/2 as float32 rounds them: y * hard_sigmoid(y), which is hard-swish.
func hardSwishInput(e graph.Expr) (graph.Expr, error) {
	mul, ok := e.(*graph.Call)
	if !ok || mul.Op != op.Multiply {
		return nil, fmt.Errorf("body is %s, want multiply (hard-swish)", graph.Describe(e))
	}
	for k := 0; k < 2; k++ {
		y := mul.Args[k]
		if x, alpha, beta, err := hardSigmoidInput(mul.Args[1-k]); err == nil && x == y && float32(alpha) == float32(1.0/6) && float32(beta) == 0.5 {
			return y, nil
		}
	}
	return nil, fmt.Errorf("%s is not y * clip(y/6 + 1/2, 0, 1) (hard-swish)", graph.Describe(e))
}

// splitChain tells which argument of an add leads to the anchor.
func splitChain(c *graph.Call, anchor *op.Op) (chain, other graph.Expr, err error) {
	if leadsTo(c.Args[0], anchor) {
		return c.Args[0], c.Args[1], nil
	}
	if leadsTo(c.Args[1], anchor) {
		return c.Args[1], c.Args[0], nil
	}
	return nil, nil, fmt.Errorf("neither operand of add comes from %s", anchor.Name)
}

// leadsTo reports whether e is a call chain (through bias_add and add)
// ending at a call of anchor.
func leadsTo(e graph.Expr, anchor *op.Op) bool {
	c, ok := e.(*graph.Call)
	if !ok {
		return false
	}
	switch c.Op {
	case anchor:
		return true
	case op.BiasAdd:
		return leadsTo(c.Args[0], anchor)
	case op.Add:
		return leadsTo(c.Args[0], anchor) || leadsTo(c.Args[1], anchor)
	}
	return false
}

// attrLayout is the kernel attribute that carries the target's -layout
// on a convolution.
const attrLayout = "layout"

// layoutAttr reads a convolution's layout attribute (LayoutAny when
// absent); another value is an error (the attribute comes from the
// artifact, which may come from anyone).
func layoutAttr(a ir.Attrs) (string, error) {
	v, ok := a[attrLayout]
	if !ok {
		return LayoutAny, nil
	}
	if s, ok := v.(string); ok && (s == LayoutAny || s == LayoutBlocked) {
		return s, nil
	}
	return "", fmt.Errorf("attribute layout is %v, want %q or %q", v, LayoutAny, LayoutBlocked)
}

// checkConcat accepts a concatenate of 1 to maxConcatInputs non-empty
// operands of rank 1 to 12 along a valid axis.
func checkConcat(attrs ir.Attrs, ins []*ir.TensorType, out *ir.TensorType) error {
	if len(ins) == 0 || len(ins) > maxConcatInputs {
		return fmt.Errorf("%d operands; oneDNN's concatenate here takes 1 to %d", len(ins), maxConcatInputs)
	}
	r := len(out.Shape)
	if r == 0 || r > 12 {
		return fmt.Errorf("rank %d: oneDNN takes ranks 1 to 12", r)
	}
	if _, err := concatAxis(attrs, r); err != nil {
		return err
	}
	for i, t := range ins {
		if t.Shape.NumElements() == 0 {
			return fmt.Errorf("operand %d %v is empty", i, t.Shape)
		}
	}
	return nil
}

// concatAxis is concatenate's axis attribute normalised to [0, r).
func concatAxis(attrs ir.Attrs, r int) (int, error) {
	ax, err := attrInt(attrs, "axis")
	if err != nil {
		return 0, err
	}
	if ax < 0 {
		ax += int64(r)
	}
	if ax < 0 || ax >= int64(r) {
		return 0, fmt.Errorf("axis %d is outside rank %d", ax, r)
	}
	return int(ax), nil
}

// checkOp is the one place that decides what the kernels handle; the
// partitioning predicate (Supported) and the runtime's kernel check
// (kernelSet.Check) both use it. name is an operator or composite name,
// ins the kernel's operand types (composites: data, weight, bias?,
// residual?), out its result type.
func checkOp(name string, attrs ir.Attrs, ins []*ir.TensorType, out *ir.TensorType) error {
	for i, t := range ins {
		if t.DType != ir.Float32 {
			return fmt.Errorf("operand %d is %s, only float32 is supported", i, t.DType)
		}
	}
	if out.DType != ir.Float32 {
		return fmt.Errorf("result is %s, only float32 is supported", out.DType)
	}
	if _, err := layoutAttr(attrs); err != nil {
		return err
	}
	if spec, ok := compositeSpec(name); ok {
		want := 2
		if spec.Bias {
			want++
		}
		if spec.Add {
			want++
		}
		if len(ins) != want {
			return fmt.Errorf("takes %d operands, got %d", want, len(ins))
		}
		if err := checkAnchor(spec.Anchor, attrs, ins[:2], out); err != nil {
			return err
		}
		k := 2
		if spec.Bias {
			c := out.Shape[len(out.Shape)-1]
			ok := false
			if spec.Anchor == op.Conv2D {
				c = out.Shape[1]
				ok = shapeIs(ins[k].Shape, c) || shapeIs(ins[k].Shape, c, 1, 1) || shapeIs(ins[k].Shape, 1, c, 1, 1)
			} else {
				ok = shapeIs(ins[k].Shape, c) || shapeIs(ins[k].Shape, 1, c)
			}
			if !ok {
				return fmt.Errorf("bias %v does not run along the %d output channels", ins[k].Shape, c)
			}
			k++
		}
		if spec.Add && !ins[k].Shape.Equal(out.Shape) {
			return fmt.Errorf("residual %v must have the output's shape %v", ins[k].Shape, out.Shape)
		}
		return nil
	}
	o, ok := operator(name)
	if !ok {
		return fmt.Errorf("operator %s is not supported", name)
	}
	if o.NumArgs >= 0 && len(ins) != o.NumArgs {
		return fmt.Errorf("takes %d operands, got %d", o.NumArgs, len(ins))
	}
	switch o {
	case op.Conv2D, op.Dense:
		return checkAnchor(o, attrs, ins, out)
	case op.MatMul:
		if _, err := attrBools(attrs, "transpose_a", "transpose_b"); err != nil {
			return err
		}
		a, b := ins[0].Shape, ins[1].Shape
		if len(a) < 2 || len(b) < 2 {
			return fmt.Errorf("operands %v and %v: rank >= 2 needed (1-D matmul stays on the host)", a, b)
		}
		r := len(out.Shape)
		if r > 12 {
			return fmt.Errorf("rank %d is above oneDNN's 12", r)
		}
		pa, pb := padShape(a, r), padShape(b, r)
		for d := 0; d < r-2; d++ {
			if pa[d] != out.Shape[d] {
				return fmt.Errorf("batch dimension %d of the first operand (%v) broadcasts; only the second may", d, a)
			}
			if pb[d] != out.Shape[d] && pb[d] != 1 {
				return fmt.Errorf("batch dimension %d of %v does not match %v", d, b, out.Shape)
			}
		}
		return nil
	case op.MaxPool2D, op.AvgPool2D:
		p, err := poolParams(o, attrs, ins[0].Shape, out.Shape)
		if err != nil {
			return err
		}
		if o == op.AvgPool2D && p.includePad && (p.padR[0] != p.attrPadR[0] || p.padR[1] != p.attrPadR[1]) {
			return fmt.Errorf("ceil_mode with count_include_pad pads beyond the given padding, which oneDNN would count")
		}
		return nil
	case op.GlobalAvgPool2D:
		if len(ins[0].Shape) != 4 {
			return fmt.Errorf("data %v is not 4-D NCHW", ins[0].Shape)
		}
		return nil
	case op.Relu:
		return nil
	case op.Concatenate:
		return checkConcat(attrs, ins, out)
	case op.Clip:
		lo, err := attrFloat(attrs, "a_min")
		if err != nil {
			return err
		}
		hi, err := attrFloat(attrs, "a_max")
		if err != nil {
			return err
		}
		if !(lo <= hi) {
			return fmt.Errorf("clip bounds [%g, %g] are empty", lo, hi)
		}
		return nil
	case op.Add, op.Subtract, op.Multiply:
		_, err := binaryOrder(o, ins[0].Shape, ins[1].Shape, out.Shape)
		return err
	case op.BiasAdd:
		ax, err := attrInt(attrs, "axis")
		if err != nil {
			return err
		}
		r := int64(len(ins[0].Shape))
		if ax < 0 {
			ax += r
		}
		if ax < 0 || ax >= r || !shapeIs(ins[1].Shape, ins[0].Shape[ax]) {
			return fmt.Errorf("bias %v does not match axis %d of %v", ins[1].Shape, ax, ins[0].Shape)
		}
		return nil
	case op.BatchNorm:
		ax, err := attrInt(attrs, "axis")
		if err != nil {
			return err
		}
		if _, err := attrFloat(attrs, "epsilon"); err != nil {
			return err
		}
		r := len(ins[0].Shape)
		if r < 2 || r > 5 || (ax != 1 && ax != 1-int64(r)) {
			return fmt.Errorf("data %v with axis %d: oneDNN normalises axis 1 of a 2-D to 5-D tensor", ins[0].Shape, ax)
		}
		for i := 1; i < 5; i++ {
			if !shapeIs(ins[i].Shape, ins[0].Shape[1]) {
				return fmt.Errorf("parameter %d is %v, want [%d]", i, ins[i].Shape, ins[0].Shape[1])
			}
		}
		return nil
	}
	return fmt.Errorf("operator %s is not supported", name)
}

// checkAnchor checks nn.conv2d (data, weight) or nn.dense (x, w).
func checkAnchor(o *op.Op, attrs ir.Attrs, ins []*ir.TensorType, out *ir.TensorType) error {
	if o == op.Dense {
		if len(ins[0].Shape) < 1 || len(ins[1].Shape) != 2 {
			return fmt.Errorf("dense of %v and %v: want x of rank >= 1 and a 2-D weight", ins[0].Shape, ins[1].Shape)
		}
		return nil
	}
	_, err := convParams(attrs, ins[0].Shape, ins[1].Shape, out.Shape)
	return err
}

// conv is a 2-D convolution's geometry.
type conv struct {
	groups                    int64
	strides, dilation         [2]int64 // dilation as in the IR (1: none)
	padL, padR                [2]int64
	src, weight, dst, biasDim []int64
}

func convParams(attrs ir.Attrs, x, w, out ir.Shape) (*conv, error) {
	if len(x) != 4 || len(w) != 4 || len(out) != 4 {
		return nil, fmt.Errorf("conv2d of %v and %v: want 4-D NCHW data and OIHW weight", x, w)
	}
	strides, err := attrInts(attrs, "strides", 2)
	if err != nil {
		return nil, err
	}
	dil, err := attrInts(attrs, "dilation", 2)
	if err != nil {
		return nil, err
	}
	pad, err := attrs4(attrs, "padding")
	if err != nil {
		return nil, err
	}
	g, err := attrInt(attrs, "groups")
	if err != nil {
		return nil, err
	}
	if g < 1 || x[1]%g != 0 || w[0]%g != 0 || x[1]/g != w[1] {
		return nil, fmt.Errorf("groups %d do not fit data %v and weight %v", g, x, w)
	}
	c := &conv{groups: g, src: x, dst: out, biasDim: []int64{w[0]}}
	copy(c.strides[:], strides)
	copy(c.dilation[:], dil)
	c.padL = [2]int64{pad[0], pad[1]}
	c.padR = [2]int64{pad[2], pad[3]}
	for i := range 2 {
		if c.strides[i] < 1 || c.dilation[i] < 1 || c.padL[i] < 0 || c.padR[i] < 0 {
			return nil, fmt.Errorf("strides %v, dilation %v, padding %v out of range", strides, dil, pad)
		}
	}
	if g == 1 {
		c.weight = []int64(w)
	} else {
		c.weight = []int64{g, w[0] / g, w[1], w[2], w[3]}
	}
	return c, nil
}

// pool is a 2-D pooling's geometry.
type pool struct {
	max, includePad      bool
	kernel, strides, dil [2]int64
	padL, padR, attrPadR [2]int64
	src, dst             []int64
}

func poolParams(o *op.Op, attrs ir.Attrs, x, out ir.Shape) (*pool, error) {
	if len(x) != 4 || len(out) != 4 {
		return nil, fmt.Errorf("data %v is not 4-D NCHW", x)
	}
	k, err := attrInts(attrs, "pool_size", 2)
	if err != nil {
		return nil, err
	}
	s, err := attrInts(attrs, "strides", 2)
	if err != nil {
		return nil, err
	}
	d, err := attrInts(attrs, "dilation", 2)
	if err != nil {
		return nil, err
	}
	pad, err := attrs4(attrs, "padding")
	if err != nil {
		return nil, err
	}
	p := &pool{max: o == op.MaxPool2D, src: x, dst: out}
	if o == op.AvgPool2D {
		b, err := attrBools(attrs, "count_include_pad")
		if err != nil {
			return nil, err
		}
		p.includePad = b[0]
	}
	for i := range 2 {
		p.kernel[i], p.strides[i], p.dil[i] = k[i], s[i], d[i]
		p.padL[i], p.attrPadR[i] = pad[i], pad[i+2]
		if k[i] < 1 || s[i] < 1 || d[i] < 1 || pad[i] < 0 || pad[i+2] < 0 {
			return nil, fmt.Errorf("pool_size %v, strides %v, dilation %v, padding %v out of range", k, s, d, pad)
		}
		// The right padding that makes oneDNN's output size the IR's
		// (more than given under ceil_mode, less when floor drops a tail).
		extent := (k[i]-1)*d[i] + 1
		p.padR[i] = (out[2+i]-1)*s[i] + extent - x[2+i] - pad[i]
		if p.padR[i] < 0 {
			p.padR[i] = 0
			if (x[2+i]+pad[i]-extent)/s[i]+1 != out[2+i] {
				return nil, fmt.Errorf("output %v does not follow from data %v", out, x)
			}
		}
		if p.padR[i] >= extent || pad[i] >= extent {
			return nil, fmt.Errorf("padding %v is not smaller than the window %v", pad, k)
		}
	}
	return p, nil
}

// binaryOrder says which operand of an elementwise call is oneDNN's
// src0 (it must have the output's shape; the other broadcasts):
// swapped is true when that is the second (add and multiply only).
func binaryOrder(o *op.Op, a, b, out ir.Shape) (swapped bool, err error) {
	if len(out) > 12 {
		return false, fmt.Errorf("rank %d is above oneDNN's 12", len(out))
	}
	bcast := func(s ir.Shape) bool {
		p := padShape(s, len(out))
		for i := range p {
			if p[i] != out[i] && p[i] != 1 {
				return false
			}
		}
		return len(s) <= len(out)
	}
	switch {
	case a.Equal(out) && bcast(b):
		return false, nil
	case b.Equal(out) && bcast(a) && o != op.Subtract:
		return true, nil
	}
	return false, fmt.Errorf("operands %v and %v: one must have the result's shape %v (subtract: the first)", a, b, out)
}

func padShape(s ir.Shape, r int) []int64 {
	p := make([]int64, r)
	for i := range p {
		p[i] = 1
	}
	copy(p[r-len(s):], s)
	return p
}

func shapeIs(s ir.Shape, dims ...int64) bool { return s.Equal(ir.Shape(dims)) }

func attrInt(a ir.Attrs, name string) (int64, error) {
	v, ok := a[name].(int64)
	if !ok {
		return 0, fmt.Errorf("attribute %s: want an int, got %v", name, a[name])
	}
	return v, nil
}

func attrFloat(a ir.Attrs, name string) (float64, error) {
	v, ok := a[name].(float64)
	if !ok {
		return 0, fmt.Errorf("attribute %s: want a float, got %v", name, a[name])
	}
	return v, nil
}

func attrInts(a ir.Attrs, name string, n int) ([]int64, error) {
	v, ok := a[name].([]int64)
	if !ok || len(v) != n {
		return nil, fmt.Errorf("attribute %s: want %d ints, got %v", name, n, a[name])
	}
	return v, nil
}

// attrs4 reads a 2-D padding: 4 values [top, left, bottom, right], or 2
// applied at both ends.
func attrs4(a ir.Attrs, name string) ([]int64, error) {
	v, ok := a[name].([]int64)
	switch {
	case ok && len(v) == 4:
		return v, nil
	case ok && len(v) == 2:
		return []int64{v[0], v[1], v[0], v[1]}, nil
	}
	return nil, fmt.Errorf("attribute %s: want 2 or 4 ints, got %v", name, a[name])
}

func attrBools(a ir.Attrs, names ...string) ([]bool, error) {
	var out []bool
	for _, n := range names {
		v, ok := a[n].(bool)
		if !ok {
			return nil, fmt.Errorf("attribute %s: want a bool, got %v", n, a[n])
		}
		out = append(out, v)
	}
	return out, nil
}
