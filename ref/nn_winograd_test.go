package ref

import (
	"math/rand"
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// TestWinogradMatchesConv checks nn.contrib_conv2d_winograd, on a weight
// TransformWinogradWeight made, against nn.conv2d on the original weight:
// even and odd output sizes (partial last tiles), asymmetric and no
// padding, float32 and float64.
func TestWinogradMatchesConv(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	random := func(dt ir.DType, shape ...int64) *tensor.Tensor {
		x := tensor.New(dt, shape)
		for i := 0; i < x.Len(); i++ {
			x.SetFloat(i, rng.Float64()*2-1)
		}
		return x
	}
	for _, c := range []struct {
		name string
		x    ir.Shape
		oc   int64
		pad  []int64
		dt   ir.DType
	}{
		{"same_even", ir.Shape{1, 3, 6, 8}, 16, []int64{1, 1, 1, 1}, ir.Float32},
		{"same_odd_batch2", ir.Shape{2, 4, 7, 5}, 8, []int64{1, 1, 1, 1}, ir.Float32},
		{"valid", ir.Shape{1, 2, 9, 6}, 8, []int64{0, 0, 0, 0}, ir.Float64},
		{"asymmetric", ir.Shape{1, 5, 5, 7}, 16, []int64{2, 0, 1, 3}, ir.Float32},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := random(c.dt, c.x...)
			w := random(c.dt, c.oc, c.x[1], 3, 3)
			u, err := TransformWinogradWeight(w, 8)
			if err != nil {
				t.Fatal(err)
			}
			aw, err := op.Conv2DWinograd.MakeAttrs(ir.Attrs{"padding": c.pad})
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := EvalOp(op.Conv2DWinograd, aw, []*tensor.Tensor{x, u})
			if err != nil {
				t.Fatal(err)
			}
			ac, err := op.Conv2D.MakeAttrs(ir.Attrs{"padding": c.pad})
			if err != nil {
				t.Fatal(err)
			}
			want, _, err := EvalOp(op.Conv2D, ac, []*tensor.Tensor{x, w})
			if err != nil {
				t.Fatal(err)
			}
			if err := tensor.AllClose(got[0], want[0], 1e-5, 1e-5); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := TransformWinogradWeight(random(ir.Float32, 8, 2, 5, 5), 8); err == nil {
		t.Error("a 5x5 weight transformed: want an error")
	}
	if _, err := TransformWinogradWeight(random(ir.Float32, 12, 2, 3, 3), 8); err == nil {
		t.Error("block 8 for 12 channels: want an error")
	}
}
