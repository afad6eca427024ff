package ref

import (
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Kernels of the integer (quantized) operators.

func init() {
	register(op.Requantize, requantizeKernel)
	register(op.QConv2D, qconvKernel)
}

// qconvKernel computes qnn.conv2d in int64 on the centred operands and
// wraps to int32 once at the end (as the generated code's int32
// arithmetic wraps).
func qconvKernel(args []*tensor.Tensor, attrs ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
	ot := out.(*ir.TensorType)
	x, w := args[0], args[1]
	g, err := spatialGeom(x.Shape, ot.Shape, w.Shape[2:], attrs)
	if err != nil {
		return nil, err
	}
	g.groups = int(attrs.Int("groups"))
	izp := attrs.Int("input_zero_point")
	xc := make([]int64, x.Len())
	for i := range xc {
		xc[i] = x.Int(i) - izp
	}
	kzp := attrs.Int("kernel_zero_point")
	wc := make([]int64, w.Len())
	for i := range wc {
		wc[i] = w.Int(i) - kzp
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
