package topi

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/tir"
)

// TestQConvBcastKernel: the broadcast form (qnn_conv_bcast.go), built
// for AVX-512 VNNI with VBMI (the byte transposes), for Cascade Lake
// (VNNI without VBMI: the transposes through a buffer), for a plain
// x86-64 (the portable C), in its 256-bit form for AVX-VNNI (Alder Lake)
// and for Haswell with 7-bit weights (vpmaddubsw), and for Haswell with
// 8-bit weights (no vector form: the portable C), and its Eval, give op.RequantizeValue of the
// exact sums plus bias of a plain convolution over the zero-point-padded
// input, for maps whose pixels the tiles of 8, 7 and 6 do or do not
// divide, blocks of three, two and one groups of sixteen channels, stride
// 2 (phase planes), dilation, input channels not a multiple of four,
// int8 data and outputs, per-channel and per-tensor multipliers, shifts
// with and without the tie-free path (multipliers with their low bits
// clear and zero among them) and past 53 (the zero point added after
// the shift).
func TestQConvBcastKernel(t *testing.T) {
	cc := testenv.Tool(t, "gcc")
	for _, tc := range []struct {
		name string
		p    qconvParams
		epi  qconvEpi
		mr   int64
	}{
		{"3x3 on 7x7 64 channels", qconvParams{c: 12, h: 7, w: 7, oc: 64, oh: 7, ow: 7, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, izp: 9},
			qconvEpi{shift: 40, zp: 3, lo: 0, hi: 255, perChannel: true}, 7},
		{"3x3 stride 2 int8 data 112 channels", qconvParams{c: 6, h: 12, w: 11, oc: 112, oh: 6, ow: 6, kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1, dh: 1, dw: 1, izp: -5, signed: true},
			qconvEpi{shift: 36, zp: -4, lo: -128, hi: 127, perChannel: true, signed: true}, 6},
		{"1x1 flat 5 channels 16 per-tensor", qconvParams{c: 5, h: 4, w: 4, oc: 16, oh: 4, ow: 4, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, izp: 200},
			qconvEpi{shift: 20, zp: 7, lo: 5, hi: 250}, 8},
		{"dilated 3x3 80 channels shift 56", qconvParams{c: 8, h: 9, w: 9, oc: 80, oh: 9, ow: 9, kh: 3, kw: 3, sh: 1, sw: 1, ph: 2, pw: 2, dh: 2, dw: 2, izp: 128},
			qconvEpi{shift: 56, zp: 100, lo: 0, hi: 255, perChannel: true}, 7},
		{"5x3 asymmetric 32 channels", qconvParams{c: 4, h: 6, w: 11, oc: 32, oh: 4, ow: 11, kh: 5, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, izp: 0},
			qconvEpi{shift: 40, zp: 0, lo: 0, hi: 255, perChannel: true}, 8},
	} {
		for _, v := range []struct {
			name    string
			isa     qconvISA
			maddubs bool
			marchs  []string
		}{
			{"avx512vnni", qconvAVX512VNNI, false, []string{avx512VNNIMarch, "-march=cascadelake", "-march=x86-64"}},
			{"avxvnni", qconvAVXVNNI, false, []string{avxVNNIMarch, "-march=x86-64"}},
			{"avx2 7-bit", qconvAVX2, true, []string{"-march=haswell"}},
			// 8-bit weights on AVX2: no vector form, the portable C.
			{"avx2 8-bit", qconvAVX2, false, []string{"-march=haswell"}},
		} {
			t.Run(tc.name+"/"+v.name, func(t *testing.T) {
				p, e := tc.p, tc.epi
				p.isa, p.maddubs, p.l1 = v.isa, v.maddubs, 48<<10
				k, err := newQConvBcastKernel(p, &e)
				if err != nil {
					t.Fatal(err)
				}
				wantMR, wantVPG := tc.mr, int64(1)
				if qconvBcast256(p) {
					wantMR, wantVPG = qconvBcastMR(p.oh*p.ow, qconvBcastMRs256(p)), 2
				}
				if k.mr != wantMR || k.vpg() != wantVPG {
					t.Errorf("%d pixels per tile, %d vectors per group, want %d and %d", k.mr, k.vpg(), wantMR, wantVPG)
				}
				if vec := strings.Contains(k.Source(), k.Symbol()+"_dp("); vec != (v.isa != qconvAVX2 || v.maddubs) {
					t.Errorf("vector multiply-adds in the source: %v", vec)
				}
				pk := newQConvPackKernel(p, k.dir)
				rng := rand.New(rand.NewSource(5))
				x, xm, xt := qconvInput(rng, p)
				c4, taps := (p.c+3)/4, p.kh*p.kw
				k4 := c4 * taps
				// OIHW4i16o: word (o, c4, tap) at ((o/16*K4 + k4)*16 + o%16)*4.
				wt := make([]int64, p.oc*k4*4)
				wAt := func(o, c, tap int64) int64 { return ((o/16*k4+c/4*taps+tap)*16+o%16)*4 + c%4 }
				for o := int64(0); o < p.oc; o++ {
					for c := int64(0); c < p.c; c++ {
						for tap := int64(0); tap < taps; tap++ {
							if v.maddubs {
								// 7-bit weights: every pair within vpmaddubsw's bound.
								wt[wAt(o, c, tap)] = int64(rng.Intn(129) - 64)
							} else {
								wt[wAt(o, c, tap)] = int64(rng.Intn(256) - 128)
							}
						}
					}
				}
				bias, mult, wsum := make([]int64, p.oc), make([]int64, p.oc), make([]int64, p.oc)
				for o := range bias {
					bias[o] = int64(rng.Intn(20001) - 10000)
					mult[o] = int64(rng.Int31())
					switch o % 5 {
					case 1: // low bits clear: the exact path with ties
						mult[o] &^= 0xFFFF
					case 3:
						mult[o] = 0
					}
					for c := int64(0); c < p.c; c++ {
						for tap := int64(0); tap < taps; tap++ {
							wsum[o] += wt[wAt(int64(o), c, tap)]
						}
					}
				}
				if !e.perChannel {
					mult = mult[:1]
				}
				want := make([]int64, p.oc*p.oh*p.ow)
				for o := int64(0); o < p.oc; o++ {
					m := mult[0]
					if e.perChannel {
						m = mult[o]
					}
					for oy := int64(0); oy < p.oh; oy++ {
						for ox := int64(0); ox < p.ow; ox++ {
							s := bias[o]
							for c := int64(0); c < p.c; c++ {
								for ky := int64(0); ky < p.kh; ky++ {
									for kx := int64(0); kx < p.kw; kx++ {
										iy, ix := oy*p.sh-p.ph+ky*p.dh, ox*p.sw-p.pw+kx*p.dw
										v := p.izp
										if iy >= 0 && iy < p.h && ix >= 0 && ix < p.w {
											v = x[(c*p.h+iy)*p.w+ix]
										}
										s += (v - p.izp) * wt[wAt(o, c, ky*p.kw+kx)]
									}
								}
							}
							want[(o*p.oh+oy)*p.ow+ox] = op.RequantizeValue(s, m, e.shift, e.zp, e.lo, e.hi)
						}
					}
				}
				ot := "uint8_t"
				if e.signed {
					ot = "int8_t"
				}
				var b strings.Builder
				b.WriteString(cPrelude(pk, k))
				b.WriteString(pk.Source() + k.Source())
				ints := func(name, typ string, v []int64) { b.WriteString(cArray(name, typ, v)) }
				ints("xin", xt, x)
				ints("win", "int8_t", wt)
				ints("wsum", "int32_t", wsum)
				ints("bias", "int32_t", bias)
				ints("mult", "int32_t", mult)
				fmt.Fprintf(&b, "int main(void) {\n  uint8_t* x4 = malloc(%d);\n  %s* out = malloc(%d);\n", k.dir.imageBytes(k.base.c4), ot, len(want))
				fmt.Fprintf(&b, "  for (int32_t u = 0; u < %d; ++u) %s(xin, x4, u);\n", pk.split.calls(), pk.Symbol())
				fmt.Fprintf(&b, "  for (int32_t t = 0; t < %d; ++t) %s(x4, win, wsum, bias, mult, out, t);\n", k.tiles(), k.Symbol())
				fmt.Fprintf(&b, "  for (int32_t i = 0; i < %d; ++i) printf(\"%%d\\n\", (int)out[i]);\n  free(x4);\n  free(out);\n  return 0;\n}\n", len(want))
				runCBuilds(t, cc, b.String(), want, v.marchs...)
				// Eval, on the same data.
				x4 := make(sliceMem[uint8], k.dir.imageBytes(k.base.c4))
				for u := int64(0); u < pk.split.calls(); u++ {
					if err := pk.Eval([]tir.KernelArg{{Mem: xm}, {Mem: x4}, {Int: u}}); err != nil {
						t.Fatal(err)
					}
				}
				out := make(sliceMem[int32], len(want))
				args := []tir.KernelArg{{Mem: x4}, {Mem: conv(make(sliceMem[int8], len(wt)), wt)}, {Mem: conv(make(sliceMem[int32], len(wsum)), wsum)},
					{Mem: conv(make(sliceMem[int32], len(bias)), bias)}, {Mem: conv(make(sliceMem[int32], len(mult)), mult)}, {Mem: out}, {}}
				for tile := int64(0); tile < k.tiles(); tile++ {
					args[6].Int = tile
					if err := k.Eval(args); err != nil {
						t.Fatal(err)
					}
				}
				for i, v := range out {
					if int64(v) != want[i] {
						t.Fatalf("Eval: output %d is %d, want %d", i, v, want[i])
					}
				}
			})
		}
	}
}

// TestQConvBcastShape checks the tile and block choices.
func TestQConvBcastShape(t *testing.T) {
	for pix, want := range map[int64]int64{49: 7, 196: 7, 3136: 8, 784: 8, 64: 8, 169: 8, 36: 6, 25: 7, 1: 6} {
		if got := qconvBcastMR(pix, qconvBcastMRs512); got != want {
			t.Errorf("qconvBcastMR(%d) = %d, want %d", pix, got, want)
		}
	}
	vnni, avx2 := qconvBcastMRs256(qconvParams{isa: qconvAVXVNNI}), qconvBcastMRs256(qconvParams{isa: qconvAVX2, maddubs: true})
	for pix, want := range map[int64][2]int64{49: {5, 5}, 36: {6, 4}, 16: {4, 4}, 81: {6, 5}, 44: {5, 5}, 3136: {6, 5}, 196: {6, 5}} {
		if got := [2]int64{qconvBcastMR(pix, vnni), qconvBcastMR(pix, avx2)}; got != want {
			t.Errorf("256-bit qconvBcastMR(%d) = %v (AVX-VNNI, AVX2), want %v", pix, got, want)
		}
	}
	if got := fmt.Sprint(qconvBcastBlocks256(3)); got != "[{0 1} {1 1} {2 1}]" {
		t.Errorf("qconvBcastBlocks256(3) = %s", got)
	}
	for n16, want := range map[int64]string{1: "[{0 1}]", 2: "[{0 2}]", 3: "[{0 3}]", 4: "[{0 2} {2 2}]", 5: "[{0 3} {3 2}]", 7: "[{0 3} {3 2} {5 2}]", 32: "[{0 3} {3 3} {6 3} {9 3} {12 3} {15 3} {18 3} {21 3} {24 3} {27 3} {30 2}]"} {
		if got := fmt.Sprint(qconvBcastBlocks(n16)); got != want {
			t.Errorf("qconvBcastBlocks(%d) = %s, want %s", n16, got, want)
		}
	}
}
