package ref

import (
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Kernels of the integer (quantized) operators.

func init() {
	register(op.Requantize, requantizeKernel)
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
