package ref

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Kernels of the integer (quantized) operators.

func init() {
	register(op.Requantize, requantizeKernel)
	register(op.QConv2D, qconvKernel)
	register(op.QConv2DRequantize, qconvRequantizeKernel)
	register(op.QDense, qdenseKernel)
	register(op.QSoftmax, qsoftmaxKernel)
}

// qsoftmaxKernel computes qnn.softmax row by row along the axis with
// op.QSoftmaxRow.
func qsoftmaxKernel(args []*tensor.Tensor, attrs ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
	ot := out.(*ir.TensorType)
	x, table := args[0], args[1].Int32s()
	ax, err := op.NormAxis(attrs.Int("axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	n := int(x.Shape[ax])
	inner := int(x.Shape[ax+1:].NumElements())
	outer := int(x.Shape[:ax].NumElements())
	res := tensor.New(ot.DType, ot.Shape)
	lo, hi := op.QRange(ot.DType)
	row, q := make([]int64, n), make([]int64, n)
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			for j := range row {
				row[j] = x.Int((o*n+j)*inner + i)
			}
			op.QSoftmaxRow(row, table, attrs.Int("multiplier"), attrs.Int("shift"), attrs.Int("out_zero_point"), lo, hi, q)
			for j, v := range q {
				res.SetInt((o*n+j)*inner+i, v)
			}
		}
	}
	return []*tensor.Tensor{res}, nil
}

// qdenseKernel computes qnn.dense in int64 and wraps to int32 once.
func qdenseKernel(args []*tensor.Tensor, attrs ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
	ot := out.(*ir.TensorType)
	x, w := args[0], args[1]
	izp, kzp := attrs.Int("input_zero_point"), attrs.Int("kernel_zero_point")
	m, n, k := int(x.Shape[0]), int(w.Shape[0]), int(x.Shape[1])
	res := tensor.New(ir.Int32, ot.Shape)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s int64
			for l := 0; l < k; l++ {
				s += (x.Int(i*k+l) - izp) * (w.Int(j*k+l) - kzp)
			}
			res.Int32s()[i*n+j] = int32(s)
		}
	}
	return []*tensor.Tensor{res}, nil
}

// qconvRequantizeKernel is qconvKernel, plus the bias, then
// requantizeKernel's arithmetic, per output channel.
func qconvRequantizeKernel(args []*tensor.Tensor, attrs ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
	ot := out.(*ir.TensorType)
	acc, err := qconvKernel(args[:2], attrs, ir.NewTensorType(ir.Int32, ot.Shape))
	if err != nil {
		return nil, err
	}
	a, bias, m := acc[0].Int32s(), args[2].Int32s(), args[3].Int32s()
	res := tensor.New(ot.DType, ot.Shape)
	shift, zp := attrs.Int("shift"), attrs.Int("out_zero_point")
	lo, hi := op.RequantizeRange(attrs)
	plane := int(ot.Shape[2] * ot.Shape[3])
	oc := int(ot.Shape[1])
	for k := range a {
		o := k / plane % oc
		mult := m[0]
		if len(m) > 1 {
			mult = m[o]
		}
		v := int64(int32(a[k] + bias[o])) // int32 arithmetic, as the sums
		res.SetInt(k, op.RequantizeValue(v, int64(mult), shift, zp, lo, hi))
	}
	return []*tensor.Tensor{res}, nil
}

// qconvKernel computes qnn.conv2d in int64 on the centred operands and
// wraps to int32 once at the end (as the generated code's int32
// arithmetic wraps).
func qconvKernel(args []*tensor.Tensor, attrs ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
	ot := out.(*ir.TensorType)
	x, w := args[0], args[1]
	g, err := spatialGeom(x.Shape, ot.Shape, w.Shape[2:4], attrs)
	if err != nil {
		return nil, err
	}
	g.groups = int(attrs.Int("groups"))
	izp := attrs.Int("input_zero_point")
	xc := make([]int64, x.Len())
	for i := range xc {
		xc[i] = x.Int(i) - izp
	}
	ws, err := op.QConvWeightShape(x.Shape, w.Shape, attrs)
	if err != nil {
		return nil, err
	}
	wc := centredWeight(w, ws, attrs.Str("kernel_layout"), attrs.Int("kernel_zero_point"))
	if b := attrs.Int("kernel_pair_bound"); b != 0 {
		if got := pairBound(wc, ws); got > b {
			return nil, fmt.Errorf("kernel_pair_bound %d: the weight's pairs of input channels reach %d", b, got)
		}
	}
	acc := make([]int64, ot.Shape.NumElements())
	conv3(xc, wc, acc, g)
	res := tensor.New(ir.Int32, ot.Shape)
	for i, v := range acc {
		res.Int32s()[i] = int32(v)
	}
	return []*tensor.Tensor{res}, nil
}

// requantizeKernel computes qnn.requantize with op.RequantizeValue, the
// arithmetic the generated code reproduces.
func requantizeKernel(args []*tensor.Tensor, attrs ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
	ot := out.(*ir.TensorType)
	x, m := args[0], args[1]
	res := tensor.New(ot.DType, ot.Shape)
	shift, zp := attrs.Int("shift"), attrs.Int("out_zero_point")
	lo, hi := op.RequantizeRange(attrs)
	b := newBroadcaster(ot.Shape, m.Shape)
	xs, ms := x.Int32s(), m.Int32s()
	for k := range xs {
		res.SetInt(k, op.RequantizeValue(int64(xs[k]), int64(ms[b.index(k)]), shift, zp, lo, hi))
	}
	return []*tensor.Tensor{res}, nil
}

// centredWeight is a qnn.conv2d weight in OIHW (shape ws) less its zero
// point kzp, read from the weight's kernel_layout (OIHW, or packed
// OIHW4i or OIHW4i16o).
func centredWeight(w *tensor.Tensor, ws ir.Shape, layout string, kzp int64) []int64 {
	wc := make([]int64, ws.NumElements())
	ci, khw := ws[1], ws[2]*ws[3]
	c4 := (ci + 3) / 4
	for i := range wc {
		j := int64(i)
		o, c, t := j/(ci*khw), j/khw%ci, j%khw
		switch layout {
		case "OIHW4i": // [o, c/4, t, c%4]
			j = ((o*c4+c/4)*khw+t)*4 + c%4
		case "OIHW4i16o": // [o/16, c/4, t, o%16, c%4]
			j = (((o/16*c4+c/4)*khw+t)*16+o%16)*4 + c%4
		}
		wc[i] = w.Int(int(j)) - kzp
	}
	return wc
}

// pairBound is the largest, over output channels, taps and pairs of input
// channels (2j, 2j+1) of a centred OIHW weight, of the pair's sum of
// positive weights and its sum of negative weights' magnitudes: qnn.conv2d's
// kernel_pair_bound.
func pairBound(wc []int64, ws ir.Shape) int64 {
	ci, khw := ws[1], ws[2]*ws[3]
	var bound int64
	for o := int64(0); o < ws[0]; o++ {
		for c := int64(0); c < ci; c += 2 {
			for t := int64(0); t < khw; t++ {
				var pos, neg int64
				for d := c; d < min(c+2, ci); d++ {
					v := wc[(o*ci+d)*khw+t]
					if v > 0 {
						pos += v
					} else {
						neg -= v
					}
				}
				bound = max(bound, pos, neg)
			}
		}
	}
	return bound
}

// QPairBound is the kernel_pair_bound of a constant qnn.conv2d weight
// w with zero point kzp, OIHW or packed OIHW4i (input channels per group
// ci): the least bound its values meet, at least 1.
func QPairBound(w *tensor.Tensor, ci int64, packed bool, kzp int64) (int64, error) {
	ws := w.Shape
	if packed {
		if len(ws) != 5 {
			return 0, fmt.Errorf("kernel_layout OIHW4i: weight %v is not [O, I/4, KH, KW, 4]", ws)
		}
		ws = ir.Shape{ws[0], ci, ws[2], ws[3]}
	}
	if len(ws) != 4 {
		return 0, fmt.Errorf("weight %v is not OIHW", ws)
	}
	layout := "OIHW"
	if packed {
		layout = "OIHW4i"
	}
	return max(pairBound(centredWeight(w, ws, layout, kzp), ws), 1), nil
}

// PackOIHW4i lays out an OIHW weight for qnn.conv2d's kernel_layout
// "OIHW4i", [O, ceil(I/4), KH, KW, 4]: input
// channel c of (o, ky, kx) at [o, c/4, ky, kx, c%4], zeros beyond I.
func PackOIHW4i(w *tensor.Tensor) *tensor.Tensor {
	o, ci, kh, kw := w.Shape[0], w.Shape[1], w.Shape[2], w.Shape[3]
	c4 := (ci + 3) / 4
	out := tensor.New(w.DType, ir.Shape{o, c4, kh, kw, 4})
	es := w.DType.Size()
	for oo := int64(0); oo < o; oo++ {
		for c := int64(0); c < ci; c++ {
			for t := int64(0); t < kh*kw; t++ {
				src := ((oo*ci+c)*kh*kw + t) * int64(es)
				dst := (((oo*c4+c/4)*kh*kw+t)*4 + c%4) * int64(es)
				copy(out.Data[dst:dst+int64(es)], w.Data[src:src+int64(es)])
			}
		}
	}
	return out
}

// PackOIHW4i16o lays out an OIHW4i weight w ([O, ceil(I/4), KH, KW, 4],
// O a multiple of 16) for qnn.conv2d's kernel_layout "OIHW4i16o",
// [O/16, ceil(I/4), KH, KW, 16, 4]: word (o, c4, ky, kx) at
// [o/16, c4, ky, kx, o%16].
func PackOIHW4i16o(w *tensor.Tensor) (*tensor.Tensor, error) {
	if len(w.Shape) != 5 || w.Shape[4] != 4 || w.Shape[0]%16 != 0 {
		return nil, fmt.Errorf("kernel_layout OIHW4i16o: weight %v is not [16k, I/4, KH, KW, 4]", w.Shape)
	}
	o, k4 := w.Shape[0], w.Shape[1]*w.Shape[2]*w.Shape[3]
	out := tensor.New(w.DType, ir.Shape{o / 16, w.Shape[1], w.Shape[2], w.Shape[3], 16, 4})
	word := 4 * int64(w.DType.Size())
	for oo := int64(0); oo < o; oo++ {
		for k := int64(0); k < k4; k++ {
			src := (oo*k4 + k) * word
			dst := ((oo/16*k4+k)*16 + oo%16) * word
			copy(out.Data[dst:dst+word], w.Data[src:src+word])
		}
	}
	return out, nil
}
