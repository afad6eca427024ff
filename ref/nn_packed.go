package ref

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// The reference kernel of nn.contrib_conv2d_packed unpacks the weight to
// OIHW and runs the nn.conv2d kernel, so that the packed op has exactly
// the semantics (and the float32 summation order) of the convolution it
// replaces.

func init() {
	register(op.Conv2DPacked, conv2DPackedKernel)
}

// PackConv2DWeight repacks an OIHW weight into the [ceil(O/b), I, H, W, b]
// layout of nn.contrib_conv2d_packed; the channels of a last block past O
// are zeros.
func PackConv2DWeight(w *tensor.Tensor, b int64) (*tensor.Tensor, error) {
	if len(w.Shape) != 4 || b <= 0 {
		return nil, fmt.Errorf("cannot pack weight %s with block %d", w.Shape, b)
	}
	out, err := tensor.NewChecked(w.DType, op.PackConv2DWeightShape(w.Shape, b))
	if err != nil {
		return nil, err
	}
	inner := int(w.Shape[1] * w.Shape[2] * w.Shape[3])
	bb := int(b)
	if w.DType == ir.Float32 {
		// Typed, not an element copy per call: 1.3 against 7.6 ms for
		// 2.4 million weights (resnet18 has 11 million).
		dst, src := out.Float32s(), w.Float32s()
		splitWork(int(w.Shape[0]), int64(out.Len()), func(lo, hi int) { packBlocked(dst, src, lo, hi, inner, bb) })
		return out, nil
	}
	for oc := 0; oc < int(w.Shape[0]); oc++ {
		ocb, ocv := oc/bb, oc%bb
		for r := 0; r < inner; r++ {
			out.CopyElem((ocb*inner+r)*bb+ocv, w, oc*inner+r)
		}
	}
	return out, nil
}

// packBlocked writes rows lo to hi of src, rows of inner elements, into
// dst as [oc/bb, inner, bb]: row o's element r goes to ((o/bb)*inner +
// r)*bb + o%bb.
func packBlocked[T any](dst, src []T, lo, hi, inner, bb int) {
	for o := lo; o < hi; o++ {
		row := src[o*inner : (o+1)*inner]
		d := dst[(o/bb)*inner*bb+o%bb:]
		for r, v := range row {
			d[r*bb] = v
		}
	}
}

// UnpackConv2DWeight turns a packed [O/b, I, H, W, b] weight back into
// OIHW.
func UnpackConv2DWeight(p *tensor.Tensor) (*tensor.Tensor, error) {
	if len(p.Shape) != 5 {
		return nil, fmt.Errorf("packed weight %s must have rank 5", p.Shape)
	}
	bb := int(p.Shape[4])
	out := tensor.New(p.DType, ir.Shape{p.Shape[0] * p.Shape[4], p.Shape[1], p.Shape[2], p.Shape[3]})
	inner := int(p.Shape[1] * p.Shape[2] * p.Shape[3])
	for oc := 0; oc < int(out.Shape[0]); oc++ {
		ocb, ocv := oc/bb, oc%bb
		for r := 0; r < inner; r++ {
			out.CopyElem(oc*inner+r, p, (ocb*inner+r)*bb+ocv)
		}
	}
	return out, nil
}

func conv2DPackedKernel(args []*tensor.Tensor, attrs ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
	w, err := UnpackConv2DWeight(args[1])
	if err != nil {
		return nil, err
	}
	oc, err := op.PackedChannels(attrs, args[1].Shape)
	if err != nil {
		return nil, err
	}
	if oc < w.Shape[0] {
		// The padded channels' rows are not part of the convolution.
		shape := w.Shape.Clone()
		shape[0] = oc
		w = &tensor.Tensor{DType: w.DType, Shape: shape, Data: w.Data[:int(oc*w.Shape[1]*w.Shape[2]*w.Shape[3])*w.DType.Size()]}
	}
	a := attrs.Clone()
	a["groups"] = int64(1)
	delete(a, "channels")
	return convKernel([]*tensor.Tensor{args[0], w}, a, out)
}

func init() {
	register(op.MatMulPacked, matmulPackedKernel)
}

// PackMatMulWeight packs a [K, N] matrix into the [N/b, K, b] column
// panels of nn.contrib_matmul_packed. b must divide N.
func PackMatMulWeight(w *tensor.Tensor, b int64) (*tensor.Tensor, error) {
	if len(w.Shape) != 2 || b <= 0 || w.Shape[1]%b != 0 {
		return nil, fmt.Errorf("cannot pack matrix %s in panels of %d columns", w.Shape, b)
	}
	n := int(w.Shape[1])
	return packPanels(w, w.Shape[0], w.Shape[1], b, func(r, c int) int { return r*n + c }), nil
}

// PackTransposedMatMulWeight packs the transpose of an [N, K] matrix (a
// dense weight) into the [N/b, K, b] panels directly.
func PackTransposedMatMulWeight(w *tensor.Tensor, b int64) (*tensor.Tensor, error) {
	if len(w.Shape) != 2 || b <= 0 || w.Shape[0]%b != 0 {
		return nil, fmt.Errorf("cannot pack matrix %s (transposed) in panels of %d columns", w.Shape, b)
	}
	k := int(w.Shape[1])
	return packPanels(w, w.Shape[1], w.Shape[0], b, func(r, c int) int { return c*k + r }), nil
}

// packPanels builds the [n/b, k, b] panels of the k x n matrix whose
// element (r, c) is w's element at(r, c).
func packPanels(w *tensor.Tensor, k, n, b int64, at func(r, c int) int) *tensor.Tensor {
	out := tensor.New(w.DType, ir.Shape{n / b, k, b})
	kk, bb := int(k), int(b)
	for r := 0; r < kk; r++ {
		for c := 0; c < int(n); c++ {
			out.CopyElem(((c/bb)*kk+r)*bb+c%bb, w, at(r, c))
		}
	}
	return out
}

// UnpackMatMulWeight turns [N/b, K, b] panels back into the [K, N] matrix.
func UnpackMatMulWeight(p *tensor.Tensor) (*tensor.Tensor, error) {
	if len(p.Shape) != 3 {
		return nil, fmt.Errorf("packed matrix %s must have rank 3", p.Shape)
	}
	k, bb := int(p.Shape[1]), int(p.Shape[2])
	n := int(p.Shape[0]) * bb
	out := tensor.New(p.DType, ir.Shape{p.Shape[1], int64(n)})
	for r := 0; r < k; r++ {
		for c := 0; c < n; c++ {
			out.CopyElem(r*n+c, p, ((c/bb)*k+r)*bb+c%bb)
		}
	}
	return out, nil
}

// matmulPackedKernel unpacks the weight and runs nn.matmul's kernel: the
// same sums in the same order as the product it replaces.
func matmulPackedKernel(args []*tensor.Tensor, _ ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
	w, err := UnpackMatMulWeight(args[1])
	if err != nil {
		return nil, err
	}
	return matmulKernel([]*tensor.Tensor{args[0], w}, ir.Attrs{"transpose_a": false, "transpose_b": false}, out)
}
