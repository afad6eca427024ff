package topi

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tir"
)

// TestDWLanesPortable: the depthwise lanes kernel (dwconv_lanes.go),
// built with AVX2 and built for a plain x86-64 (the portable C under its
// guards), gives the bits of its Eval, and its Eval gives a plain
// depthwise convolution's sums (the taps in order, multiply-adds fused),
// over row tiles that start inside the map, strides, dilation,
// asymmetric padding, input rows shorter than a vector and output rows
// with a partial group of eight.
func TestDWLanesPortable(t *testing.T) {
	cc := testenv.Tool(t, "gcc")
	proc, err := targets.ResolveCPU("haswell", nil)
	if err != nil {
		t.Fatal(err)
	}
	isa := isaFor(proc)
	for _, tc := range []struct {
		name       string
		g          convGeom
		h, w, rows int64
	}{
		{"3x3 stride 2, 19 columns", convGeom{kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1, ph: 1, pw: 1, oh: 6, ow: 10}, 11, 19, 3},
		{"3x3 stride 1, 5 columns", convGeom{kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, ph: 1, pw: 1, oh: 4, ow: 5}, 4, 5, 2},
		{"5x5 dilated, asymmetric padding", convGeom{kh: 5, kw: 3, sh: 1, sw: 2, dh: 2, dw: 1, ph: 3, pw: 2, oh: 7, ow: 9}, 9, 17, 7},
		{"2x3 stride 3x1, no padding", convGeom{kh: 2, kw: 3, sh: 3, sw: 1, dh: 1, dw: 2, ph: 0, pw: 0, oh: 4, ow: 12}, 11, 16, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.g
			vrow := g.ow + 3
			ldv := (tc.rows-1)*vrow + g.ow + 5
			k, err := newDWLanesKernel(isa, g, tc.h, tc.w, tc.rows, ldv, vrow)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewSource(21))
			x := make(floatMem, dwLanes*tc.h*tc.w)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			taps := g.kh * g.kw
			w := make(floatMem, dwLanes*taps)
			for i := range w {
				w[i] = float32(rng.NormFloat64())
			}
			tiles := g.oh / tc.rows
			// The plain convolution, tile by tile in V's layout; padding
			// elements of V stay NaN.
			want := make([]float32, tiles*ldv*dwLanes)
			got := make(floatMem, len(want))
			for i := range want {
				want[i], got[i] = float32(math.NaN()), float32(math.NaN())
			}
			for tile := int64(0); tile < tiles; tile++ {
				for c := int64(0); c < dwLanes; c++ {
					for r := int64(0); r < tc.rows; r++ {
						oy := tile*tc.rows + r
						for ox := int64(0); ox < g.ow; ox++ {
							acc := 0.0
							for ky := int64(0); ky < g.kh; ky++ {
								for kx := int64(0); kx < g.kw; kx++ {
									iy, ix := oy*g.sh-g.ph+ky*g.dh, ox*g.sw-g.pw+kx*g.dw
									xv := 0.0
									if iy >= 0 && iy < tc.h && ix >= 0 && ix < tc.w {
										xv = float64(x[(c*tc.h+iy)*tc.w+ix])
									}
									acc = float64(float32(math.FMA(xv, float64(w[c*taps+ky*g.kw+kx]), acc)))
								}
							}
							want[tile*dwLanes*ldv+c*ldv+r*vrow+ox] = float32(acc)
						}
					}
				}
				if err := k.Eval([]tir.KernelArg{{Mem: got, Off: tile * dwLanes * ldv}, {Mem: x}, {Mem: w}, {Int: tile * tc.rows}}); err != nil {
					t.Fatal(err)
				}
			}
			wantBits := make([]int64, len(want))
			for i, v := range want {
				wantBits[i] = int64(math.Float32bits(v))
				if gb := math.Float32bits(got[i]); gb != uint32(wantBits[i]) && !(math.IsNaN(float64(v)) && math.IsNaN(float64(got[i]))) {
					t.Fatalf("Eval: element %d is %v, want %v", i, got[i], v)
				}
			}
			var b strings.Builder
			b.WriteString(cPrelude(k))
			b.WriteString(k.Source())
			floats := func(name string, v []float32) {
				bits := make([]int64, len(v))
				for i, f := range v {
					bits[i] = int64(math.Float32bits(f))
				}
				b.WriteString(cArray(name+"_bits", "uint32_t", bits))
			}
			floats("xin", x)
			floats("win", w)
			fmt.Fprintf(&b, "static float xf[%d], wf[%d], v[%d];\n", len(x), len(w), len(want))
			b.WriteString("int main(void) {\n")
			b.WriteString("  memcpy(xf, xin_bits, sizeof xf);\n  memcpy(wf, win_bits, sizeof wf);\n")
			fmt.Fprintf(&b, "  const uint32_t nan = 0x7fc00000u;\n  for (int32_t i = 0; i < %d; ++i) memcpy(&v[i], &nan, 4);\n", len(want))
			fmt.Fprintf(&b, "  for (int32_t t = 0; t < %d; ++t) %s(v + t * %d, xf, wf, t * %d);\n", tiles, k.Symbol(), dwLanes*ldv, tc.rows)
			fmt.Fprintf(&b, "  for (int32_t i = 0; i < %d; ++i) {\n    uint32_t u;\n    memcpy(&u, &v[i], 4);\n    printf(\"%%u\\n\", (unsigned)u);\n  }\n  return 0;\n}\n", len(want))
			// NaN padding prints as the quiet NaN the program stored.
			for i, v := range want {
				if math.IsNaN(float64(v)) {
					wantBits[i] = 0x7fc00000
				}
			}
			runCVariants(t, cc, b.String(), wantBits)
		})
	}
}
