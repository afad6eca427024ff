package mcunn

import (
	"errors"
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
)

// argKind says where one argument of a kernel call comes from.
type argKind uint8

const (
	argImm     argKind = iota // an int32 immediate
	argOperand                // the data pointer of an operand tensor
	argScratch                // the data pointer of the scratch buffer
	argOutput                 // the data pointer of the result
)

// arg is one argument of a kiln_nn call, in the order of its C template
// (see calls.go): the fields of the argument structs, flattened, and the
// tensors' data pointers.
type arg struct {
	kind    argKind
	imm     int64      // argImm
	operand graph.Expr // argOperand
}

// kernel is one kiln_nn call computing an expression: the call's name in
// calls (a kiln_nn function, or a variant of one), its arguments, and
// the scratch buffer it needs in bytes.
type kernel struct {
	call    string
	args    []arg
	scratch int64
	result  *ir.TensorType
}

func (k *kernel) imm(vs ...int64) {
	for _, v := range vs {
		k.args = append(k.args, arg{kind: argImm, imm: v})
	}
}

func (k *kernel) operand(e graph.Expr) { k.args = append(k.args, arg{kind: argOperand, operand: e}) }

// dims appends the kiln_nn_dims of an NCHW shape.
func (k *kernel) dims(shape ir.Shape) {
	k.imm(shape[0], shape[1], shape[2], shape[3])
}

// recognize finds the kiln_nn kernel that computes body, an operator call
// or the body of one of the kind's composites (operands are any
// expressions; zero points and add's factors must be constants), or says
// why there is none.
func recognize(body graph.Expr) (*kernel, error) {
	c, ok := body.(*graph.Call)
	if !ok || c.Op == nil {
		return nil, errors.New("not an operator call")
	}
	rt, err := tensorType(c, "result")
	if err != nil {
		return nil, err
	}
	switch c.Op {
	case op.QConv2DRequantize:
		return convKernel(c, rt)
	case op.MaxPool2D:
		return maxPoolKernel(c, rt)
	case op.QDense:
		return denseKernel(nil, nil, c, rt)
	case op.Add:
		if d, ok := c.Args[0].(*graph.Call); ok && d.Op == op.QDense {
			return denseKernel(nil, c.Args[1], d, rt)
		}
		if d, ok := c.Args[1].(*graph.Call); ok && d.Op == op.QDense {
			return denseKernel(nil, c.Args[0], d, rt)
		}
	case op.Requantize:
		return requantizeKernel(c, rt)
	case op.QSoftmax:
		return softmaxKernel(c, rt)
	}
	return nil, fmt.Errorf("%s is not a kernel of mcunn", graph.Describe(c))
}

// requantizeKernel recognizes the composites that end in qnn.requantize.
func requantizeKernel(rq *graph.Call, rt *ir.TensorType) (*kernel, error) {
	in, ok := rq.Args[0].(*graph.Call)
	if !ok || in.Op == nil {
		return nil, errors.New("qnn.requantize of something that is not an operator call")
	}
	switch in.Op {
	case op.QDense:
		return denseKernel(rq, nil, in, rt)
	case op.Add:
		for i := 0; i < 2; i++ {
			if d, ok := in.Args[i].(*graph.Call); ok && d.Op == op.QDense {
				return denseKernel(rq, in.Args[1-i], d, rt)
			}
		}
		return addKernel(rq, in, rt)
	case op.Sum:
		return avgKernel(rq, in, rt)
	}
	return nil, fmt.Errorf("qnn.requantize of %s is not a kernel of mcunn", in.Op.Name)
}

// tensorType is e's type as a static, non-empty tensor whose size fits
// kiln_nn's 32-bit sizes.
func tensorType(e graph.Expr, what string) (*ir.TensorType, error) {
	tt, ok := e.Type().(*ir.TensorType)
	if !ok {
		return nil, fmt.Errorf("%s: %v is not a tensor", what, e.Type())
	}
	for _, d := range tt.Shape {
		if d <= 0 {
			return nil, fmt.Errorf("%s: shape %v: empty or dynamic tensors are not supported", what, tt.Shape)
		}
	}
	if n := tt.Shape.NumElements(); n > math.MaxInt32 || n < 0 {
		return nil, fmt.Errorf("%s: shape %v has more than 2^31-1 elements (kiln_nn uses 32-bit sizes)", what, tt.Shape)
	}
	return tt, nil
}

// int8Tensor is tensorType, of int8.
func int8Tensor(e graph.Expr, what string) (*ir.TensorType, error) {
	tt, err := tensorType(e, what)
	if err != nil {
		return nil, err
	}
	if tt.DType != ir.Int8 {
		return nil, fmt.Errorf("%s is %s: kiln_nn takes int8 (quantize activations as int8)", what, tt.DType)
	}
	return tt, nil
}

// quant appends a kiln_nn_quant_params of a requantization with
// multiplier m over channels channels (scalar, or one per channel) and
// then checks the output type; attrs are qnn.requantize's.
func (k *kernel) quant(m graph.Expr, channels int64, attrs ir.Attrs) error {
	mt, err := tensorType(m, "multiplier")
	if err != nil {
		return err
	}
	if mt.DType != ir.Int32 {
		return fmt.Errorf("multiplier is %s, want int32", mt.DType)
	}
	perChannel := int64(0)
	if n := mt.Shape.NumElements(); n != 1 {
		if n != channels {
			return fmt.Errorf("multiplier of shape %v: want one, or one per output channel (%d)", mt.Shape, channels)
		}
		perChannel = 1
	}
	if attrs.DType("out_dtype") != ir.Int8 {
		return fmt.Errorf("requantization to %s: kiln_nn writes int8", attrs.DType("out_dtype"))
	}
	k.operand(m)
	k.imm(perChannel, attrs.Int("shift"))
	return nil
}

// activation returns output_offset and the clamp range of a requantization.
func activation(attrs ir.Attrs) (zp, lo, hi int64) {
	lo, hi = op.RequantizeRange(attrs)
	return attrs.Int("out_zero_point"), lo, hi
}

// spatial returns the (h, w) pair of a 2-D attribute, and for padding the
// top and left values.
func spatial(attrs ir.Attrs, name string) (int64, int64) {
	v := attrs.Ints(name)
	return v[0], v[1]
}

// windowFits checks that the input coordinates a window computes in
// int32 (out * stride - pad + tap * dilation, for the padding of either
// side) cannot overflow: kiln_nn's loops use 32-bit indices.
func windowFits(in, out, k, stride, pad, dil int64) error {
	if span := (out-1)*stride + (k-1)*dil + pad + in; span > math.MaxInt32 || pad > math.MaxInt32-in {
		return fmt.Errorf("a window of %d taps (stride %d, dilation %d, padding %d) over %d values reaches past 32-bit indices", k, stride, dil, pad, in)
	}
	return nil
}

// fits32 checks that values fit kiln_nn's int32 fields.
func fits32(what string, vs ...int64) error {
	for _, v := range vs {
		if v < math.MinInt32 || v > math.MaxInt32 {
			return fmt.Errorf("%s %d does not fit 32 bits", what, v)
		}
	}
	return nil
}

// convKernel maps qnn.conv2d_requantize (int8 data, weight and output)
// to kiln_nn_depthwise_conv_s8 (one group per input channel, OIHW) or
// kiln_nn_conv_s8 (any groups; OIHW or OIHW4i).
func convKernel(c *graph.Call, rt *ir.TensorType) (*kernel, error) {
	xt, err := int8Tensor(c.Args[0], "data")
	if err != nil {
		return nil, err
	}
	wt, err := int8Tensor(c.Args[1], "weight")
	if err != nil {
		return nil, err
	}
	if _, err := tensorType(c.Args[2], "bias"); err != nil {
		return nil, err
	}
	if len(xt.Shape) != 4 || len(rt.Shape) != 4 {
		return nil, fmt.Errorf("data %v: want NCHW", xt.Shape)
	}
	a := c.Attrs
	ws, err := op.QConvWeightShape(xt.Shape, wt.Shape, a)
	if err != nil {
		return nil, err
	}
	groups := a.Int("groups")
	sh, sw := spatial(a, "strides")
	ph, pw := spatial(a, "padding")
	dh, dw := spatial(a, "dilation")
	if err := fits32("attribute", sh, sw, ph, pw, dh, dw, groups); err != nil {
		return nil, err
	}
	if err := windowFits(xt.Shape[2], rt.Shape[2], ws[2], sh, ph, dh); err != nil {
		return nil, err
	}
	if err := windowFits(xt.Shape[3], rt.Shape[3], ws[3], sw, pw, dw); err != nil {
		return nil, err
	}
	zp, lo, hi := activation(a)
	block := int64(1)
	if a.Str("kernel_layout") == "OIHW4i" {
		block = 4
	}
	o := rt.Shape[1]
	k := &kernel{result: rt}
	depthwise := groups > 1 && groups == xt.Shape[1] && block == 1 && ws[1] == 1
	if depthwise {
		k.call = "kiln_nn_depthwise_conv_s8"
	} else {
		k.call = "kiln_nn_conv_s8"
		colBytes := (ws[1] + block - 1) / block * block * ws[2] * ws[3] * 2
		if colBytes > math.MaxInt32 {
			return nil, fmt.Errorf("weight %v: its im2col column (%d bytes) does not fit kiln_nn's 32-bit sizes", ws, colBytes)
		}
		k.scratch = colBytes
		k.args = append(k.args, arg{kind: argScratch})
		k.imm(colBytes)
	}
	k.imm(-a.Int("input_zero_point"), -a.Int("kernel_zero_point"), zp, sh, sw, ph, pw, dh, dw, groups, lo, hi)
	if err := k.quant(c.Args[3], o, a); err != nil {
		return nil, err
	}
	k.dims(xt.Shape)
	k.operand(c.Args[0])
	k.dims(ws)
	if !depthwise {
		k.imm(block)
	}
	k.operand(c.Args[1])
	k.operand(c.Args[2])
	k.dims(rt.Shape)
	k.args = append(k.args, arg{kind: argOutput})
	return k, nil
}

// maxPoolKernel maps int8 nn.max_pool2d to kiln_nn_max_pool_s8.
func maxPoolKernel(c *graph.Call, rt *ir.TensorType) (*kernel, error) {
	xt, err := int8Tensor(c.Args[0], "data")
	if err != nil {
		return nil, err
	}
	if len(xt.Shape) != 4 {
		return nil, fmt.Errorf("data %v: want NCHW", xt.Shape)
	}
	a := c.Attrs
	kh, kw := spatial(a, "pool_size")
	sh, sw := spatial(a, "strides")
	ph, pw := spatial(a, "padding")
	dh, dw := spatial(a, "dilation")
	if err := fits32("attribute", kh, kw, sh, sw, ph, pw, dh, dw); err != nil {
		return nil, err
	}
	if err := windowFits(xt.Shape[2], rt.Shape[2], kh, sh, ph, dh); err != nil {
		return nil, err
	}
	if err := windowFits(xt.Shape[3], rt.Shape[3], kw, sw, pw, dw); err != nil {
		return nil, err
	}
	k := &kernel{call: "kiln_nn_max_pool_s8", result: rt}
	k.imm(kh, kw, sh, sw, ph, pw, dh, dw)
	k.dims(xt.Shape)
	k.operand(c.Args[0])
	k.dims(rt.Shape)
	k.args = append(k.args, arg{kind: argOutput})
	return k, nil
}

// denseKernel maps qnn.dense of int8 operands, with an optional int32
// bias (one per output column) and an optional requantization rq, to
// kiln_nn_fully_connected_s8 (or its _s32 form without requantization).
func denseKernel(rq *graph.Call, bias graph.Expr, d *graph.Call, rt *ir.TensorType) (*kernel, error) {
	xt, err := int8Tensor(d.Args[0], "data")
	if err != nil {
		return nil, err
	}
	wt, err := int8Tensor(d.Args[1], "weight")
	if err != nil {
		return nil, err
	}
	m, kdim, n := xt.Shape[0], xt.Shape[1], wt.Shape[0]
	if bias != nil {
		bt, err := tensorType(bias, "bias")
		if err != nil {
			return nil, err
		}
		if bt.DType != ir.Int32 || bt.Shape.NumElements() != n || bt.Shape[len(bt.Shape)-1] != n {
			return nil, fmt.Errorf("bias %v: want int32 with one value per output column (%d)", bt, n)
		}
	}
	k := &kernel{result: rt}
	zp, lo, hi := int64(0), int64(math.MinInt32), int64(math.MaxInt32)
	if rq != nil {
		zp, lo, hi = activation(rq.Attrs)
		if mt, ok := rq.Args[1].Type().(*ir.TensorType); ok && mt.Shape.NumElements() == n && mt.Shape[len(mt.Shape)-1] != n {
			return nil, fmt.Errorf("multiplier %v: want one, or one per output column (%d)", mt.Shape, n)
		}
	}
	k.imm(-d.Attrs.Int("input_zero_point"), -d.Attrs.Int("kernel_zero_point"), zp, lo, hi)
	switch {
	case rq != nil:
		k.call = "kiln_nn_fully_connected_s8"
		if err := k.quant(rq.Args[1], n, rq.Attrs); err != nil {
			return nil, err
		}
	default:
		k.call = "kiln_nn_fully_connected_s8_s32"
	}
	if bias == nil {
		k.call += "_nobias"
	}
	k.imm(m, kdim)
	k.operand(d.Args[0])
	k.imm(n)
	k.operand(d.Args[1])
	if bias != nil {
		k.operand(bias)
	}
	k.args = append(k.args, arg{kind: argOutput})
	return k, nil
}

// centered matches cast(x, int32) minus an optional constant scalar zero
// point, returning x and the offset to add (minus the zero point).
func centered(e graph.Expr) (graph.Expr, int64, error) {
	var zp int64
	if s, ok := e.(*graph.Call); ok && s.Op == op.Subtract {
		v, err := scalarConst(s.Args[1], "zero point")
		if err != nil {
			return nil, 0, err
		}
		zp, e = v, s.Args[0]
	}
	c, ok := e.(*graph.Call)
	if !ok || c.Op != op.Cast {
		return nil, 0, fmt.Errorf("%s: want cast(x, int32) minus a zero point", graph.Describe(e))
	}
	if tt, ok := c.Type().(*ir.TensorType); !ok || tt.DType != ir.Int32 {
		return nil, 0, fmt.Errorf("%s: want a cast to int32", graph.Describe(c))
	}
	if zp < -128 || zp > 127 {
		return nil, 0, fmt.Errorf("zero point %d is outside int8", zp)
	}
	return c.Args[0], -zp, nil
}

// scalarConst is the value of a one-element integer constant.
func scalarConst(e graph.Expr, what string) (int64, error) {
	k, ok := e.(*graph.Constant)
	if !ok || k.Value.Len() != 1 || !k.Value.DType.IsInt() {
		return 0, fmt.Errorf("%s must be a constant integer scalar", what)
	}
	return k.Value.Int(0), nil
}

// avgKernel maps requantize(sum(centered(x)) over the spatial axes) to
// kiln_nn_global_avg_pool_s8.
func avgKernel(rq, sum *graph.Call, rt *ir.TensorType) (*kernel, error) {
	x, off, err := centered(sum.Args[0])
	if err != nil {
		return nil, err
	}
	xt, err := int8Tensor(x, "data")
	if err != nil {
		return nil, err
	}
	r := len(xt.Shape)
	axes := sum.Attrs.Ints("axis")
	if r < 3 || r > 4 || len(axes) != r-2 {
		return nil, fmt.Errorf("sum over axes %v of %v: want the spatial axes of NCW or NCHW", axes, xt.Shape)
	}
	for i, ax := range axes {
		if ax != int64(i+2) && ax != int64(i+2-r) {
			return nil, fmt.Errorf("sum over axes %v of %v: want the spatial axes of NCW or NCHW", axes, xt.Shape)
		}
	}
	zp, lo, hi := activation(rq.Attrs)
	k := &kernel{call: "kiln_nn_global_avg_pool_s8", result: rt}
	k.imm(off, zp, lo, hi)
	if err := k.quant(rq.Args[1], -1, rq.Attrs); err != nil {
		return nil, err
	}
	h := int64(1) // NCW is NC1W
	if r == 4 {
		h = xt.Shape[2]
	}
	k.imm(xt.Shape[0], xt.Shape[1], h, xt.Shape[r-1])
	k.operand(x)
	k.args = append(k.args, arg{kind: argOutput})
	return k, nil
}

// addKernel maps requantize(centered(a) * ka + centered(b) * kb) of two
// int8 tensors of one shape to kiln_nn_add_s8.
func addKernel(rq, add *graph.Call, rt *ir.TensorType) (*kernel, error) {
	var xs [2]graph.Expr
	var offs, mults [2]int64
	for i := 0; i < 2; i++ {
		mul, ok := add.Args[i].(*graph.Call)
		if !ok || mul.Op != op.Multiply {
			return nil, fmt.Errorf("add operand %d: want centered(x) * constant", i)
		}
		j := 0
		if _, ok := mul.Args[0].(*graph.Constant); ok {
			j = 1
		}
		v, err := scalarConst(mul.Args[1-j], "add's factor")
		if err != nil {
			return nil, err
		}
		if err := fits32("add's factor", v); err != nil {
			return nil, err
		}
		x, off, err := centered(mul.Args[j])
		if err != nil {
			return nil, err
		}
		if _, err := int8Tensor(x, fmt.Sprintf("add operand %d", i)); err != nil {
			return nil, err
		}
		xs[i], offs[i], mults[i] = x, off, v
	}
	if !xs[0].Type().(*ir.TensorType).Shape.Equal(rt.Shape) || !xs[1].Type().(*ir.TensorType).Shape.Equal(rt.Shape) {
		return nil, fmt.Errorf("add of %v and %v: kiln_nn adds tensors of one shape (no broadcasting)", xs[0].Type(), xs[1].Type())
	}
	zp, lo, hi := activation(rq.Attrs)
	k := &kernel{call: "kiln_nn_add_s8", result: rt}
	k.imm(offs[0], mults[0], offs[1], mults[1], zp, lo, hi)
	if err := k.quant(rq.Args[1], -1, rq.Attrs); err != nil {
		return nil, err
	}
	k.imm(rt.Shape.NumElements())
	k.operand(xs[0])
	k.operand(xs[1])
	k.args = append(k.args, arg{kind: argOutput})
	return k, nil
}

// softmaxKernel maps qnn.softmax of int8 along the last axis to
// kiln_nn_softmax_s8.
func softmaxKernel(c *graph.Call, rt *ir.TensorType) (*kernel, error) {
	xt, err := int8Tensor(c.Args[0], "data")
	if err != nil {
		return nil, err
	}
	if rt.DType != ir.Int8 {
		return nil, fmt.Errorf("result is %s: kiln_nn writes int8", rt.DType)
	}
	r := len(xt.Shape)
	if ax := c.Attrs.Int("axis"); r == 0 || ax != -1 && ax != int64(r-1) {
		return nil, fmt.Errorf("softmax along axis %d of %v: kiln_nn takes the last axis", ax, xt.Shape)
	}
	cols := xt.Shape[r-1]
	zp := c.Attrs.Int("out_zero_point")
	k := &kernel{call: "kiln_nn_softmax_s8", result: rt}
	k.imm(c.Attrs.Int("multiplier"), c.Attrs.Int("shift"), zp, -128, 127)
	k.operand(c.Args[1])
	k.imm(xt.Shape.NumElements()/cols, cols)
	k.operand(c.Args[0])
	k.args = append(k.args, arg{kind: argOutput})
	return k, nil
}
