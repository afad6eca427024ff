package op

import (
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/ir"
)

// Requantize maps an int32 accumulator (of an integer convolution or
// matrix product) to int8 or uint8 with fixed-point arithmetic, the
// requantisation of integer inference engines:
//
//	q   = round_half_even(int64(x) * int64(multiplier) / 2^shift)
//	out = clamp(q + out_zero_point, out_min, out_max)
//
// multiplier (int32) broadcasts to x unidirectionally: a scalar, or one
// per channel shaped to broadcast ([C, 1, 1] against [N, C, H, W]).
// shift is one constant for the call (1 to 62), so that the division is
// a shift. RequantizeParams gives multiplier and shift for real scales.
// out_min and out_max default to out_dtype's range; a narrower range is
// a fused ReLU or clip.
var Requantize = declare(&Op{Name: "qnn.requantize", NumArgs: 2, Pattern: Broadcast,
	Attrs: []AttrSpec{
		{Name: "shift", Kind: ir.AttrInt, Required: true},
		{Name: "out_zero_point", Kind: ir.AttrInt, Default: int64(0)},
		{Name: "out_min", Kind: ir.AttrInt, Default: int64(math.MinInt64)},
		{Name: "out_max", Kind: ir.AttrInt, Default: int64(math.MaxInt64)},
		{Name: "out_dtype", Kind: ir.AttrDType, Required: true},
	},
	Rel: requantizeRel, Doc: "clamp(round_half_even(x * multiplier / 2^shift) + out_zero_point, out_min, out_max)"})

func requantizeRel(args []ir.Type, attrs ir.Attrs) (ir.Type, error) {
	ts, err := Tensors(args)
	if err != nil {
		return nil, err
	}
	if ts[0].DType != ir.Int32 || ts[1].DType != ir.Int32 {
		return nil, fmt.Errorf("x %s and multiplier %s must be int32", ts[0].DType, ts[1].DType)
	}
	s, err := BroadcastShapes(ts[0].Shape, ts[1].Shape)
	if err != nil || !s.Equal(ts[0].Shape) {
		return nil, fmt.Errorf("multiplier shape %v does not broadcast to x's shape %v", ts[1].Shape, ts[0].Shape)
	}
	dt := attrs.DType("out_dtype")
	if dt != ir.Int8 && dt != ir.Uint8 {
		return nil, fmt.Errorf("out_dtype %s: want int8 or uint8", dt)
	}
	if sh := attrs.Int("shift"); sh < 1 || sh > 62 {
		return nil, fmt.Errorf("shift %d: want 1 to 62", sh)
	}
	lo, hi := RequantizeRange(attrs)
	if zp := attrs.Int("out_zero_point"); zp < lo || zp > hi {
		return nil, fmt.Errorf("out_zero_point %d is outside [%d, %d]", zp, lo, hi)
	}
	return ir.NewTensorType(dt, ts[0].Shape), nil
}

// RequantizeRange is a requantize call's output range: out_min and
// out_max within out_dtype's range. An empty range is out_min..out_min.
func RequantizeRange(attrs ir.Attrs) (lo, hi int64) {
	lo, hi = QRange(attrs.DType("out_dtype"))
	lo = max(lo, attrs.Int("out_min"))
	hi = max(min(hi, attrs.Int("out_max")), lo)
	return lo, hi
}

// RequantizeParams returns the int32 multipliers and the one shift that
// represent real positive scales for Requantize: multiplier[i] / 2^shift
// is scales[i] to within one part in 2^31 of the largest scale. It fails
// for a scale that is not positive and finite, or when the largest is
// 2^30 or more.
func RequantizeParams(scales []float64) ([]int64, int64, error) {
	hi := 0.0
	for _, s := range scales {
		if !(s > 0) || math.IsInf(s, 0) {
			return nil, 0, fmt.Errorf("requantization scale %g: want a positive finite number", s)
		}
		hi = math.Max(hi, s)
	}
	if len(scales) == 0 {
		return nil, 0, fmt.Errorf("no requantization scales")
	}
	// The largest multiplier is below 2^31: scale * 2^shift < 2^31.
	_, e := math.Frexp(hi) // hi = f * 2^e, f in [0.5, 1)
	shift := int64(31 - e)
	if shift < 1 {
		return nil, 0, fmt.Errorf("requantization scale %g is too large for a fixed-point multiplier", hi)
	}
	shift = min(shift, 62)
	mult := make([]int64, len(scales))
	for i, s := range scales {
		mult[i] = int64(math.RoundToEven(math.Ldexp(s, int(shift))))
		if mult[i] > math.MaxInt32 { // f rounded up to 1.0
			mult[i] = math.MaxInt32
		}
	}
	return mult, shift, nil
}

// RequantizeValue is Requantize on one value: the arithmetic the
// reference engine and the generated code share.
func RequantizeValue(x, multiplier, shift, zp, lo, hi int64) int64 {
	p := x * multiplier
	q := p >> shift
	r := p & (1<<shift - 1)
	half := int64(1) << (shift - 1)
	if r > half || r == half && q&1 == 1 {
		q++
	}
	return min(max(q+zp, lo), hi)
}

// QConv2D is a 2-D convolution of 8-bit integers with int32
// accumulation, the product of quantized operators:
//
//	out[n, o, y, x] = sum over (c, ky, kx) of
//	                  (data[n, c, ...] - input_zero_point) *
//	                  (weight[o, c, ky, kx] - kernel_zero_point)
//
// data (NCHW) and weight are int8 or uint8; padding reads
// input_zero_point, so a padded tap adds nothing. The attributes
// strides, padding, dilation and groups are nn.conv2d's. kernel_layout
// is "OIHW", or "OIHW4i": weight [O, ceil(I/4), KH, KW, 4] holds input
// channel c of (o, ky, kx) at [o, c/4, ky, kx, c%4], zero beyond I, so
// that four input channels of a tap are one 32-bit word (what integer dot
// products take), or "OIHW4i16o" (groups 1, O a multiple of 16): weight
// [O/16, ceil(I/4), KH, KW, 16, 4] holds OIHW4i's word (o, c/4, ky, kx)
// at [o/16, c/4, ky, kx, o%16], so that sixteen output channels' words
// of a tap are one 64-byte vector (the CPU kernels' broadcast form, which
// the pass alter_qconv_layout prepares). (Weights with a zero point per
// channel are computed as int32 convolutions of centred operands
// instead.)
//
// kernel_pair_bound, when not 0, is what the importer knows of a constant
// weight's values: for every output channel, tap and pair of input
// channels (2j, 2j+1), the sum of the pair's positive weights and the
// sum of its negative weights' magnitudes (less kernel_zero_point) are at
// most the bound. A bound of 128 or less lets x86 without VNNI multiply
// uint8 data with vpmaddubsw, whose 16-bit pair sums then cannot
// saturate. The reference executor checks the claim (ref.QPairBound
// computes it).
//
// An optional third argument, kernel sums (int32 [O]), holds every
// output channel's sum of its weight values in the weight's layout: what
// kernels need to subtract input_zero_point's share from uncentred sums,
// computed once at compile time from a constant weight (the pass
// qnn_kernel_sums) instead of on every run. It does not change the
// result; the reference executor ignores it.
var QConv2D = declare(&Op{Name: "qnn.conv2d", NumArgs: -1, MinArgs: 2, Pattern: OutEWiseFusable,
	Attrs: append(convAttrs(2),
		AttrSpec{Name: "input_zero_point", Kind: ir.AttrInt, Default: int64(0)},
		AttrSpec{Name: "kernel_zero_point", Kind: ir.AttrInt, Default: int64(0)},
		AttrSpec{Name: "kernel_layout", Kind: ir.AttrString, Default: "OIHW"},
		AttrSpec{Name: "kernel_pair_bound", Kind: ir.AttrInt, Default: int64(0)}),
	Rel: qconvRel, Doc: "2-D convolution of int8/uint8 with int32 accumulation (NCHW, OIHW)"})

func qconvRel(args []ir.Type, attrs ir.Attrs) (ir.Type, error) {
	if len(args) > 3 {
		return nil, fmt.Errorf("want data, weight and optional kernel sums, got %d arguments", len(args))
	}
	ts, err := Tensors(args)
	if err != nil {
		return nil, err
	}
	if len(ts) == 3 {
		if err := checkKernelSums(ts[2], ts[1]); err != nil {
			return nil, err
		}
	}
	if err := checkQOperands(ts, attrs); err != nil {
		return nil, err
	}
	if b := attrs.Int("kernel_pair_bound"); b < 0 || b > 512 {
		return nil, fmt.Errorf("kernel_pair_bound %d: want 0 (unknown) to 512", b)
	}
	ws, err := QConvWeightShape(ts[0].Shape, ts[1].Shape, attrs)
	if err != nil {
		return nil, err
	}
	// The shape rule is nn.conv2d's, on int32 stand-ins.
	as := []ir.Type{ir.NewTensorType(ir.Int32, ts[0].Shape), ir.NewTensorType(ir.Int32, ws)}
	return convRel(2)(as, attrs)
}

// checkKernelSums checks an integer product's optional kernel sums
// against its weight: int32, one per output channel (the weight's first
// dimension, or the first times the fifth for a 6-D OIHW4i16o weight).
func checkKernelSums(sums, weight *ir.TensorType) error {
	if len(weight.Shape) == 0 {
		return fmt.Errorf("kernel sums %s: weight %s has no output channels", sums, weight)
	}
	o := weight.Shape[0]
	if len(weight.Shape) == 6 {
		o *= weight.Shape[4]
	}
	if sums.DType != ir.Int32 || !sums.Shape.Equal(ir.Shape{o}) {
		return fmt.Errorf("kernel sums %s: want int32 [%d] (one per output channel of weight %s)", sums, o, weight)
	}
	return nil
}

// checkQOperands checks the data and weight of an integer product
// (qnn.conv2d, qnn.dense): int8 or uint8, and input_zero_point and
// kernel_zero_point within their types.
func checkQOperands(ts []*ir.TensorType, attrs ir.Attrs) error {
	for i, what := range []string{"data", "weight"} {
		if dt := ts[i].DType; dt != ir.Int8 && dt != ir.Uint8 {
			return fmt.Errorf("%s type %s: want int8 or uint8", what, dt)
		}
	}
	for i, name := range []string{"input_zero_point", "kernel_zero_point"} {
		v, dt := attrs.Int(name), ts[i].DType
		if lo, hi := QRange(dt); v < lo || v > hi {
			return fmt.Errorf("%s %d is outside %s", name, v, dt)
		}
	}
	return nil
}

// QConvWeightShape is a qnn.conv2d weight's shape in OIHW: its own for
// "OIHW", the unpacked one for "OIHW4i" and "OIHW4i16o" (the input
// channels per group taken from the data).
func QConvWeightShape(data, weight ir.Shape, attrs ir.Attrs) (ir.Shape, error) {
	switch l := attrs.Str("kernel_layout"); l {
	case "OIHW":
		return weight, nil
	case "OIHW4i":
		g := attrs.Int("groups")
		if len(data) != 4 || len(weight) != 5 || weight[4] != 4 || g < 1 || data[1]%g != 0 {
			return nil, fmt.Errorf("kernel_layout OIHW4i: weight %v must be [O, ceil(I/4), KH, KW, 4] for data %v", weight, data)
		}
		ci := data[1] / g
		if weight[1] != (ci+3)/4 {
			return nil, fmt.Errorf("kernel_layout OIHW4i: weight %v holds %d groups of 4 input channels, data %v with %d groups needs %d", weight, weight[1], data, g, (ci+3)/4)
		}
		return ir.Shape{weight[0], ci, weight[2], weight[3]}, nil
	case "OIHW4i16o":
		if g := attrs.Int("groups"); g != 1 {
			return nil, fmt.Errorf("kernel_layout OIHW4i16o: groups %d, want 1", g)
		}
		if len(data) != 4 || len(weight) != 6 || weight[4] != 16 || weight[5] != 4 {
			return nil, fmt.Errorf("kernel_layout OIHW4i16o: weight %v must be [O/16, ceil(I/4), KH, KW, 16, 4] for data %v", weight, data)
		}
		if weight[1] != (data[1]+3)/4 {
			return nil, fmt.Errorf("kernel_layout OIHW4i16o: weight %v holds %d groups of 4 input channels, data %v needs %d", weight, weight[1], data, (data[1]+3)/4)
		}
		return ir.Shape{weight[0] * 16, data[1], weight[2], weight[3]}, nil
	default:
		return nil, fmt.Errorf("kernel_layout %q: want OIHW, OIHW4i or OIHW4i16o", l)
	}
}

// QConv2DRequantize is qnn.conv2d, plus a per-channel int32 bias, then
// qnn.requantize: one operator, so that a kernel requantizes its tile in
// registers instead of writing the int32 sums out and reading them back.
//
//	out = requantize(qnn.conv2d(data, weight) + bias[o], multiplier)
//
// bias is int32 [O]; multiplier is int32 [O] or a scalar. The attributes
// are qnn.conv2d's and qnn.requantize's (shift, out_zero_point, out_min,
// out_max, out_dtype), with the same meaning. An optional fifth
// argument is qnn.conv2d's kernel sums.
var QConv2DRequantize = declare(&Op{Name: "qnn.conv2d_requantize", NumArgs: -1, MinArgs: 4, Pattern: OutEWiseFusable,
	Attrs: append(append([]AttrSpec{}, QConv2D.Attrs...), Requantize.Attrs...),
	Rel:   qconvRequantizeRel, Doc: "requantize(qnn.conv2d(data, weight) + bias, multiplier)"})

func qconvRequantizeRel(args []ir.Type, attrs ir.Attrs) (ir.Type, error) {
	if len(args) > 5 {
		return nil, fmt.Errorf("want data, weight, bias, multiplier and optional kernel sums, got %d arguments", len(args))
	}
	ts, err := Tensors(args)
	if err != nil {
		return nil, err
	}
	if len(ts) == 5 {
		if err := checkKernelSums(ts[4], ts[1]); err != nil {
			return nil, err
		}
	}
	acc, err := qconvRel(args[:2], attrs)
	if err != nil {
		return nil, err
	}
	o := acc.(*ir.TensorType).Shape[1]
	if ts[2].DType != ir.Int32 || !ts[2].Shape.Equal(ir.Shape{o}) {
		return nil, fmt.Errorf("bias %s: want int32 [%d]", ts[2], o)
	}
	if m := ts[3]; m.DType != ir.Int32 || !(len(m.Shape) == 0 || m.Shape.Equal(ir.Shape{o})) {
		return nil, fmt.Errorf("multiplier %s: want int32 [%d] or a scalar", m, o)
	}
	// qnn.requantize's checks, on the accumulator and a multiplier that
	// broadcasts to it.
	return requantizeRel([]ir.Type{acc, ir.NewTensorType(ir.Int32, ir.Shape{})}, attrs)
}

// QDense is a matrix product of 8-bit integers with int32 sums, the
// product of quantized matrix operators:
//
//	out[m, n] = sum over k of (data[m, k] - input_zero_point) *
//	                          (weight[n, k] - kernel_zero_point)
//
// data [M, K] and weight [N, K] (a row per output column, as nn.dense)
// are int8 or uint8. An optional third argument holds the kernel sums
// (int32 [N], each weight row's sum), as qnn.conv2d's.
var QDense = declare(&Op{Name: "qnn.dense", NumArgs: -1, MinArgs: 2, Pattern: OutEWiseFusable,
	Attrs: []AttrSpec{
		{Name: "input_zero_point", Kind: ir.AttrInt, Default: int64(0)},
		{Name: "kernel_zero_point", Kind: ir.AttrInt, Default: int64(0)},
	},
	Rel: qdenseRel, Doc: "int8/uint8 matrix product with int32 sums (data [M, K], weight [N, K])"})

func qdenseRel(args []ir.Type, attrs ir.Attrs) (ir.Type, error) {
	if len(args) > 3 {
		return nil, fmt.Errorf("want data, weight and optional kernel sums, got %d arguments", len(args))
	}
	ts, err := Tensors(args)
	if err != nil {
		return nil, err
	}
	if len(ts) == 3 {
		if err := checkKernelSums(ts[2], ts[1]); err != nil {
			return nil, err
		}
	}
	if err := checkQOperands(ts, attrs); err != nil {
		return nil, err
	}
	for i, what := range []string{"data", "weight"} {
		if len(ts[i].Shape) != 2 {
			return nil, fmt.Errorf("%s %s: want a matrix", what, ts[i])
		}
	}
	if ts[0].Shape[1] != ts[1].Shape[1] {
		return nil, fmt.Errorf("data %s and weight %s differ in their reduction (K)", ts[0], ts[1])
	}
	return ir.NewTensorType(ir.Int32, ir.Shape{ts[0].Shape[0], ts[1].Shape[0]}), nil
}
