package ref

import (
	"bytes"
	"math/rand"
	"runtime"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// TestWeightTransformsSplit checks that the compile-time weight
// transforms give the same bytes whether they run in one piece or split
// over goroutines (uneven pieces: 10 blocks over 3 and 4), on weights
// large enough to be split, and that the packed weight unpacks to the
// original.
func TestWeightTransformsSplit(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	w := tensor.New(ir.Float32, ir.Shape{160, 200, 3, 3})
	for i, n := 0, w.Len(); i < n; i++ {
		w.SetFloat(i, rng.Float64()*2-1)
	}
	if 16*160*200 < minParallelWork {
		t.Fatal("the weight is too small to be split")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tr := range []struct {
		name string
		fn   func(*tensor.Tensor, int64) (*tensor.Tensor, error)
	}{{"winograd", TransformWinogradWeight}, {"packed", PackConv2DWeight}} {
		var want []byte
		for _, procs := range []int{1, 3, 4} {
			runtime.GOMAXPROCS(procs)
			got, err := tr.fn(w, 16)
			if err != nil {
				t.Fatal(err)
			}
			if want == nil {
				want = got.Data
				continue
			}
			if !bytes.Equal(got.Data, want) {
				t.Errorf("%s with GOMAXPROCS=%d differs from one piece", tr.name, procs)
			}
		}
		if tr.name == "packed" {
			p, err := tensor.FromBytes(ir.Float32, ir.Shape{10, 200, 3, 3, 16}, want)
			if err != nil {
				t.Fatal(err)
			}
			back, err := UnpackConv2DWeight(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back.Data, w.Data) {
				t.Error("the packed weight does not unpack to the original")
			}
		}
	}
}
