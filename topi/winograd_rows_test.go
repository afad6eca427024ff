package topi

import (
	"fmt"
	"math"
	"math/rand"
	"os/exec"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/topi/topitest"
)

// TestWgInputKernelChannels checks the input transform of several
// channel planes (the row-tile form's) against B^T d B computed here in
// float32, in Eval and in its C, bit for bit: planes with gaps between
// them in x and d; rows of 5, 16 and 21 tiles (the vector forms' whole
// groups and masked last groups), one with no column to spare; the
// AVX-512 form (built for Ice Lake, run where the machine has it), the
// AVX2 form and the portable C.
func TestWgInputKernelChannels(t *testing.T) {
	cc, ccErr := exec.LookPath("gcc")
	for _, c := range []struct {
		mcpu    string
		tw, pad int64 // tiles per row; columns past the last tile's
		marchs  []string
	}{
		{"haswell", 5, 3, []string{"-march=haswell", "-march=x86-64"}},
		{"haswell", 21, 0, []string{"-march=haswell", "-march=x86-64"}},
		{"haswell", 16, 1, []string{"-march=haswell"}},
		{"icelake-server", 5, 0, []string{avx512VNNIMarch}},
		{"icelake-server", 21, 2, []string{avx512VNNIMarch, "-march=x86-64"}},
		{"icelake-server", 16, 0, []string{avx512VNNIMarch}},
	} {
		t.Run(fmt.Sprintf("%s_%d", c.mcpu, c.tw), func(t *testing.T) {
			tg := mcpuTarget(t, c.mcpu)
			isa := isaFor(tg.Processor())
			if wgInputVecs[isa.name] == nil {
				t.Fatalf("%s (%s): no vector form", c.mcpu, isa.name)
			}
			th, tw, ch := int64(2), c.tw, int64(3)
			wp := 2*tw + 2 + c.pad
			xcs := (2*th+2)*wp + 3 // a gap after each plane
			dcs := th*tw + 2
			xs := ch * dcs
			k, err := newWgInputKernelChannels(isa, th, tw, wp, xs, ch, xcs, dcs)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := newWgInputKernelChannels(isa, th, tw, wp, xs, ch, xcs, th*tw-1); err == nil {
				t.Error("overlapping channel planes of d accepted")
			}
			rng := rand.New(rand.NewSource(9100 + tw))
			x := make(floatMem, (ch-1)*xcs+(2*th+2)*wp)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			want := wgInputWant(x, th, tw, wp, ch, xcs, dcs, xs)
			got := make(floatMem, len(want))
			for i := range got {
				got[i] = float32(math.NaN())
			}
			if err := k.Eval([]tir.KernelArg{{Mem: got}, {Mem: x}}); err != nil {
				t.Fatal(err)
			}
			wantBits := make([]int64, len(want))
			for i, v := range want {
				if math.IsNaN(float64(v)) {
					wantBits[i] = 0x7fc00000
					if !math.IsNaN(float64(got[i])) {
						t.Fatalf("Eval wrote element %d, a gap", i)
					}
					continue
				}
				wantBits[i] = int64(math.Float32bits(v))
				if math.Float32bits(got[i]) != math.Float32bits(v) {
					t.Fatalf("Eval: element %d is %v, want %v", i, got[i], v)
				}
			}
			if ccErr != nil {
				t.Skip("no gcc for the C half")
			}
			var b strings.Builder
			b.WriteString(cPrelude(k))
			b.WriteString(k.Source())
			bits := make([]int64, len(x))
			for i, f := range x {
				bits[i] = int64(math.Float32bits(f))
			}
			b.WriteString(cArray("xin_bits", "uint32_t", bits))
			fmt.Fprintf(&b, "static float xf[%d], d[%d];\n", len(x), len(want))
			b.WriteString("int main(void) {\n  memcpy(xf, xin_bits, sizeof xf);\n")
			fmt.Fprintf(&b, "  const uint32_t nan = 0x7fc00000u;\n  for (int32_t i = 0; i < %d; ++i) memcpy(&d[i], &nan, 4);\n", len(want))
			fmt.Fprintf(&b, "  %s(d, xf);\n", k.Symbol())
			fmt.Fprintf(&b, "  for (int32_t i = 0; i < %d; ++i) {\n    uint32_t u;\n    memcpy(&u, &d[i], 4);\n    printf(\"%%u\\n\", (unsigned)u);\n  }\n  return 0;\n}\n", len(want))
			runCBuilds(t, cc, b.String(), wantBits, c.marchs...)
		})
	}
}

// wgInputWant is B^T d B of every tile of ch planes of x (as
// TestWgInputKernelChannels lays them out) in float32, NaN where the
// transform writes nothing.
func wgInputWant(x []float32, th, tw, wp, ch, xcs, dcs, xs int64) []float32 {
	want := make([]float32, 16*xs)
	for i := range want {
		want[i] = float32(math.NaN())
	}
	bt := [4][4]float32{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}}
	// pair is a row of B^T times v: two nonzero entries, one sum.
	pair := func(row, v [4]float32) float32 {
		var s float32
		first := true
		for m := 0; m < 4; m++ {
			if row[m] == 0 {
				continue
			}
			if first {
				s, first = row[m]*v[m], false
			} else {
				s += row[m] * v[m]
			}
		}
		return s
	}
	for c := int64(0); c < ch; c++ {
		for r := int64(0); r < th; r++ {
			for q := int64(0); q < tw; q++ {
				var d, tt [4][4]float32
				for i := int64(0); i < 4; i++ {
					for j := int64(0); j < 4; j++ {
						d[i][j] = x[c*xcs+(2*r+i)*wp+2*q+j]
					}
				}
				for i := 0; i < 4; i++ {
					for j := 0; j < 4; j++ {
						tt[i][j] = pair(bt[i], [4]float32{d[0][j], d[1][j], d[2][j], d[3][j]})
					}
				}
				for i := int64(0); i < 4; i++ {
					for j := int64(0); j < 4; j++ {
						want[(i*4+j)*xs+c*dcs+r*tw+q] = pair(bt[j], tt[i])
					}
				}
			}
		}
	}
	return want
}

// TestWinogradRowTiles checks the Winograd row-tile form (wgTileLocal)
// against the reference: which convolutions take it (wgLocalWorth, on a
// Sapphire Rapids target's 2 MiB L2 and a Haswell one's 256 KiB), and
// what they compute, with several row tiles, tiles of several tile rows,
// odd output sizes (half tiles), batch 2 and the input used in place.
// The interpreter takes minutes for a map that outgrows 1 MiB, so the
// AVX-512 case checks the plan only (TestCompileSharedModels runs
// resnet18's row tiles on AVX-512 machines).
func TestWinogradRowTiles(t *testing.T) {
	p1 := nnInts(1, 1, 1, 1)
	for k, c := range []struct {
		name   string
		mcpu   string
		attrs  ir.Attrs
		x      []int64
		oc     int64
		local  bool
		r2     int64
		groups int64 // product calls per xi
		run    bool  // check against the reference
	}{
		// 64 -> 64 on 40x40 (1.6 MB of transformed input): row tiles
		// of one tile row (20 tiles), 64 channels per call.
		{"avx512_wide", "sapphirerapids", ir.Attrs{"padding": p1}, nnInts(1, 64, 40, 40), 64, true, 1, 1, false},
		// 18x18 with 32 channels on Haswell (162 KiB): tile rows of 9
		// tiles, three per row tile; 32 output channels in two calls.
		{"haswell_batch2", "haswell", ir.Attrs{"padding": p1}, nnInts(2, 32, 18, 18), 32, true, 3, 2, true},
		// 17 x 19 outputs: half tiles at the bottom and the right.
		{"haswell_odd", "haswell", ir.Attrs{"padding": p1}, nnInts(1, 32, 17, 19), 32, true, 3, 2, true},
		// No padding, even output: the input itself, 4-D.
		{"haswell_in_place", "haswell", nil, nnInts(1, 32, 20, 20), 16, true, 3, 1, true},
		// A weight over the L2 (16 x 32 x 160 floats on Haswell): the
		// whole form.
		{"haswell_big_weight", "haswell", ir.Attrs{"padding": p1}, nnInts(1, 32, 18, 18), 160, false, 0, 0, false},
		// A small input: the whole form.
		{"avx512_small", "sapphirerapids", ir.Attrs{"padding": p1}, nnInts(1, 64, 8, 8), 64, false, 0, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tg := mcpuTarget(t, c.mcpu)
			rng := rand.New(rand.NewSource(int64(9200 + k)))
			w := topitest.Rand(rng, nnTF32, nnInts(c.oc, c.x[1], 3, 3))
			u, err := ref.TransformWinogradWeight(w, 16)
			if err != nil {
				t.Fatal(err)
			}
			args := []*tensor.Tensor{topitest.Rand(rng, nnTF32, c.x), u}
			call := refCall(t, op.Conv2DWinograd, c.attrs, args, tg)
			p, err := planWinograd(call, args[0].Shape, args[1].Shape)
			if err != nil {
				t.Fatal(err)
			}
			if p.local != c.local {
				t.Fatalf("row-tile form %v, want %v", p.local, c.local)
			}
			if c.local && (p.r2 != c.r2 || int64(p.mr)/p.sub != c.groups || int64(p.mr) != c.oc) {
				t.Errorf("R2 %d, %d channels in calls of %d; want R2 %d, %d calls of all %d", p.r2, p.mr, p.sub, c.r2, c.groups, c.oc)
			}
			if !c.run {
				return
			}
			tol := topitest.Tolerance{Rtol: 1e-4, Atol: 5e-5} // see TestWinogradCPU
			if err := topitest.Check(topitest.Case{Op: op.Conv2DWinograd, Attrs: c.attrs, Args: args, Tol: tol, Target: tg}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
