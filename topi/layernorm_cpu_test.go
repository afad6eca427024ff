package topi

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/topi/topitest"
)

// TestLayerNormCPU checks the tuned float32 layer normalisation against
// the reference on rows long enough for the lane-split sums (with and
// without a remainder past the lanes, ranks 2 to 4, gamma and beta
// broadcast from one element), for AVX-512, AVX2 and portable targets,
// and that the default strategy selects it for the last axis only.
func TestLayerNormCPU(t *testing.T) {
	cases := []struct {
		name        string
		x, gamma, b []int64
		attrs       ir.Attrs
	}{
		{"rows_of_96", []int64{1, 7, 5, 96}, []int64{96}, []int64{96}, nil},
		{"rows_of_100", []int64{3, 100}, []int64{100}, []int64{100}, ir.Attrs{"epsilon": 1e-3}},
		{"rows_of_40_broadcast", []int64{2, 3, 40}, []int64{1}, []int64{40}, nil},
		{"rows_of_768", []int64{4, 768}, []int64{768}, []int64{1}, nil},
		{"short_rows", []int64{5, 6}, []int64{6}, []int64{6}, nil},
	}
	for _, mcpu := range []string{"sapphirerapids", "haswell", "x86-64"} {
		tg := mcpuTarget(t, mcpu)
		for k, c := range cases {
			t.Run(mcpu+"/"+c.name, func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(300 + k)))
				args := []*tensor.Tensor{
					topitest.Rand(rng, ir.Float32, c.x), topitest.Rand(rng, ir.Float32, c.gamma), topitest.Rand(rng, ir.Float32, c.b),
				}
				// An offset mean, as activations have: the variance pass
				// must subtract it before squaring.
				for i, v := range args[0].Float32s() {
					args[0].Float32s()[i] = 3 + v
				}
				// The statistics in float64 as the reference's, summed in
				// another order: the float32 results agree to an ulp or so.
				tol := topitest.Tolerance{Rtol: 1e-6, Atol: 1e-6}
				if err := topitest.Check(topitest.Case{Op: op.LayerNorm, Attrs: c.attrs, Args: args, Target: tg, Tol: tol}); err != nil {
					t.Fatal(err)
				}
				impl, f := lowerSelected(t, refCall(t, op.LayerNorm, c.attrs, args, tg))
				if impl.Name != "nn.layer_norm.cpu" {
					t.Fatalf("selected %s, want nn.layer_norm.cpu", impl.Name)
				}
				if got, want := strings.Contains(f.String(), "norm_sum_lanes"), c.x[len(c.x)-1] >= 32; got != want {
					t.Errorf("lane-split sums %v, want %v", got, want)
				}
			})
		}
	}
	// Over more than the last axis: the generic implementation.
	rng := rand.New(rand.NewSource(1))
	args := []*tensor.Tensor{topitest.Rand(rng, ir.Float32, []int64{2, 4, 40}), topitest.Rand(rng, ir.Float32, []int64{4, 40}), topitest.Rand(rng, ir.Float32, []int64{40})}
	attrs := ir.Attrs{"axis": int64(1)}
	if impl, _ := lowerSelected(t, refCall(t, op.LayerNorm, attrs, args, topitest.HostTarget())); impl.Name != "nn.layer_norm.generic" {
		t.Errorf("axis 1 of 3: selected %s, want nn.layer_norm.generic", impl.Name)
	}
}
