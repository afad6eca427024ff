package topi

import (
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/topi/topitest"
)

// TestTransposeCPU checks the tiled transposes against the reference
// (NCHW <-> NHWC, a 2-D transpose, a 3-D rotation, bytes, tiles of 16 and
// of 8) and which implementation the default strategy selects: the tiled
// one only where the last axis moves and both tiled axes are multiples of
// 8.
func TestTransposeCPU(t *testing.T) {
	cases := []struct {
		name  string
		dt    ir.DType
		shape []int64
		axes  []int64
		tile  int64 // 0: the generic implementation
	}{
		{"nhwc_to_nchw", ir.Float32, []int64{1, 7, 24, 16}, []int64{0, 3, 1, 2}, 8},
		{"nchw_to_nhwc", ir.Float32, []int64{2, 32, 3, 16}, []int64{0, 2, 3, 1}, 16},
		{"matrix", ir.Float32, []int64{40, 24}, []int64{1, 0}, 8},
		{"rotate3", ir.Float32, []int64{16, 8, 32}, []int64{2, 0, 1}, 8},
		{"rotate3_ragged", ir.Float32, []int64{16, 5, 32}, []int64{2, 0, 1}, 0},
		{"bytes", ir.Uint8, []int64{3, 48, 64}, []int64{0, 2, 1}, 16},
		{"last_axis_stays", ir.Float32, []int64{4, 16, 8}, []int64{1, 0, 2}, 0},
		{"ragged", ir.Float32, []int64{12, 20}, []int64{1, 0}, 0},
	}
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(400 + k)))
			args := []*tensor.Tensor{topitest.Rand(rng, c.dt, c.shape)}
			attrs := ir.Attrs{"axes": c.axes}
			if err := topitest.Check(topitest.Case{Op: op.Transpose, Attrs: attrs, Args: args, Tol: topitest.Tolerance{Atol: 1e-30}}); err != nil {
				t.Fatal(err)
			}
			impl, f := lowerSelected(t, refCall(t, op.Transpose, attrs, args, topitest.HostTarget()))
			want := "transpose.generic"
			if c.tile > 0 {
				want = "transpose.cpu"
			}
			if impl.Name != want {
				t.Fatalf("selected %s, want %s", impl.Name, want)
			}
			if c.tile > 0 && !strings.Contains(f.String(), "_inner in T.vectorized("+strconv.FormatInt(c.tile, 10)+")") {
				t.Errorf("no loops over tiles of %d:\n%s", c.tile, f)
			}
		})
	}
}
