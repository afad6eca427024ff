package op

import (
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/ir"
)

// QSoftmax is the softmax of an 8-bit tensor along axis, in integers only
// (as microcontroller libraries compute it), with exp read from a table:
//
//	d[i]   = max over j of x[j] - x[i]                  (0 to 255)
//	e[i]   = clamp(table[d[i]], 0, 2^30)
//	s      = sum over j of e[j]                         (int64)
//	q[i]   = round_half_even(e[i] * multiplier / (s * 2^shift)), 0 when s is 0
//	out[i] = clamp(q[i] + out_zero_point, out_dtype's range)
//
// table is int32 [256]; QSoftmaxParams fills it with 2^24 * exp(-x_scale
// * d) and gives multiplier / 2^shift = 1 / y_scale. The clamp of the
// table's values bounds every product and sum (the axis has at most 2^16
// elements), so the result is defined for any table.
var QSoftmax = declare(&Op{Name: "qnn.softmax", NumArgs: 2, Pattern: OutEWiseFusable,
	Attrs: []AttrSpec{
		{Name: "axis", Kind: ir.AttrInt, Default: int64(-1)},
		{Name: "multiplier", Kind: ir.AttrInt, Required: true},
		{Name: "shift", Kind: ir.AttrInt, Required: true},
		{Name: "out_zero_point", Kind: ir.AttrInt, Default: int64(0)},
		{Name: "out_dtype", Kind: ir.AttrDType, Required: true},
	},
	Rel: qsoftmaxRel, Doc: "softmax of int8/uint8 in integers: a 256-entry exp table, an int64 sum, a rounded division"})

// QSoftmax's limits: the table's values, the axis length, the
// multiplier and the shift (see QSoftmax).
const (
	QSoftmaxTableMax = 1 << 30
	QSoftmaxMaxAxis  = 1 << 16
	QSoftmaxMaxShift = 16
	qsoftmaxTableOne = 1 << 24
)

func qsoftmaxRel(args []ir.Type, attrs ir.Attrs) (ir.Type, error) {
	ts, err := Tensors(args)
	if err != nil {
		return nil, err
	}
	x, table := ts[0], ts[1]
	if x.DType != ir.Int8 && x.DType != ir.Uint8 {
		return nil, fmt.Errorf("data type %s: want int8 or uint8", x.DType)
	}
	if table.DType != ir.Int32 || !table.Shape.Equal(ir.Shape{256}) {
		return nil, fmt.Errorf("table %s: want int32 [256]", table)
	}
	ax, err := NormAxis(attrs.Int("axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	if n := x.Shape[ax]; n > QSoftmaxMaxAxis {
		return nil, fmt.Errorf("axis %d has %d elements: at most %d", ax, n, QSoftmaxMaxAxis)
	}
	if m := attrs.Int("multiplier"); m < 1 || m > math.MaxInt32 {
		return nil, fmt.Errorf("multiplier %d: want 1 to 2^31-1", m)
	}
	if s := attrs.Int("shift"); s < 0 || s > QSoftmaxMaxShift {
		return nil, fmt.Errorf("shift %d: want 0 to %d", s, QSoftmaxMaxShift)
	}
	dt := attrs.DType("out_dtype")
	if dt != ir.Int8 && dt != ir.Uint8 {
		return nil, fmt.Errorf("out_dtype %s: want int8 or uint8", dt)
	}
	lo, hi := QRange(dt)
	if zp := attrs.Int("out_zero_point"); zp < lo || zp > hi {
		return nil, fmt.Errorf("out_zero_point %d is outside %s", zp, dt)
	}
	return ir.NewTensorType(dt, x.Shape), nil
}

// QRange is the range of an 8-bit quantized type: 0 to 255 for uint8,
// else -128 to 127.
func QRange(dt ir.DType) (int64, int64) {
	if dt == ir.Uint8 {
		return 0, 255
	}
	return -128, 127
}

// QSoftmaxParams returns qnn.softmax's table, multiplier and shift for
// real input and output scales: table[d] = round(2^24 * exp(-xScale *
// d)), multiplier / 2^shift = 1 / yScale with as many bits as fit. It
// fails for a scale that is not positive and finite, or a yScale too
// small for a 31-bit multiplier.
func QSoftmaxParams(xScale, yScale float64) ([]int32, int64, int64, error) {
	for _, s := range []float64{xScale, yScale} {
		if !(s > 0) || math.IsInf(s, 0) {
			return nil, 0, 0, fmt.Errorf("softmax scale %g: want a positive finite number", s)
		}
	}
	table := make([]int32, 256)
	for d := range table {
		table[d] = int32(math.RoundToEven(qsoftmaxTableOne * math.Exp(-xScale*float64(d))))
	}
	for shift := int64(QSoftmaxMaxShift); shift >= 0; shift-- {
		if m := math.RoundToEven(math.Ldexp(1/yScale, int(shift))); m >= 1 && m <= math.MaxInt32 {
			return table, int64(m), shift, nil
		}
	}
	return nil, 0, 0, fmt.Errorf("softmax output scale %g has no 31-bit fixed-point inverse", yScale)
}

// QSoftmaxRow computes qnn.softmax on one row of values (the axis), the
// arithmetic the reference engine and the generated code share; lo and
// hi are the output type's range.
func QSoftmaxRow(x []int64, table []int32, multiplier, shift, zp, lo, hi int64, out []int64) {
	if len(x) == 0 {
		return
	}
	m := x[0]
	for _, v := range x {
		m = max(m, v)
	}
	e := func(v int64) int64 {
		return min(max(int64(table[(m-v)&255]), 0), QSoftmaxTableMax)
	}
	var s int64
	for _, v := range x {
		s += e(v)
	}
	den := s << shift
	for i, v := range x {
		q := int64(0)
		if den > 0 {
			num := e(v) * multiplier
			q = num / den
			if r := num - q*den; 2*r > den || 2*r == den && q&1 == 1 {
				q++
			}
		}
		out[i] = min(max(q+zp, lo), hi)
	}
}
