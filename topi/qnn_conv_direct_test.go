package topi

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/tir"
)

// TestQConvDirectPortable: the direct form's kernels (qnn_conv_direct.go),
// built with AVX2 (or AVX-512 VNNI) and built for a plain x86-64 (the
// portable C under the guard's #else, as an exported project may be
// built), and their Eval, give the exact int32 sums of a plain
// convolution over the zero-point-padded input, for the tile shapes
// (AVX2: rows of eight pixels, a flat plane in tiles of sixteen, tiles
// of two rows of eight; AVX-512: rows and flat planes in tiles of
// thirty-two, tiles of two rows of sixteen), with stride 1 and with
// stride 2 (the phase planes), with input channels not a
// multiple of four, output channels not a multiple of the register
// block, asymmetric padding and int8 data.
func TestQConvDirectPortable(t *testing.T) {
	cc := testenv.Tool(t, "gcc")
	for _, tc := range []struct {
		name   string
		p      qconvParams
		np     int64 // the tile pixels the direct form should choose
		avx512 bool  // AVX-512 VNNI, else AVX2
	}{
		{"rows 3x3 on 7x7", qconvParams{c: 6, h: 7, w: 7, oc: 11, oh: 7, ow: 7, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 2, dh: 1, dw: 1, izp: 9}, 8, false},
		{"flat 1x1 int8 data", qconvParams{c: 5, h: 9, w: 11, oc: 6, oh: 9, ow: 11, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, izp: -20, signed: true}, 16, false},
		{"pairs 3x3 on 8x16", qconvParams{c: 7, h: 8, w: 16, oc: 9, oh: 8, ow: 16, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, izp: 130}, 16, false},
		{"pairs 3x3 on 6x24 maddubs", qconvParams{c: 4, h: 6, w: 24, oc: 6, oh: 6, ow: 24, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, izp: 3, maddubs: true}, 16, false},
		{"flat 3x1 maddubs", qconvParams{c: 8, h: 6, w: 10, oc: 5, oh: 6, ow: 10, kh: 3, kw: 1, sh: 1, sw: 1, ph: 1, dh: 1, dw: 1, izp: 200, maddubs: true}, 16, false},
		{"pairs 3x3 stride 2 on 16x16", qconvParams{c: 6, h: 16, w: 16, oc: 9, oh: 8, ow: 8, kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1, dh: 1, dw: 1, izp: 17}, 16, false},
		{"flat 1x1 stride 2", qconvParams{c: 5, h: 10, w: 12, oc: 7, oh: 5, ow: 6, kh: 1, kw: 1, sh: 2, sw: 2, dh: 1, dw: 1, izp: 250}, 16, false},
		{"rows of 32 7x7 stride 2 AVX-512", qconvParams{c: 3, h: 20, w: 64, oc: 10, oh: 10, ow: 32, kh: 7, kw: 7, sh: 2, sw: 2, ph: 3, pw: 3, dh: 1, dw: 1, izp: 100}, 32, true},
		{"pairs 3x3 stride 2 AVX-512 int8 data", qconvParams{c: 9, h: 12, w: 28, oc: 12, oh: 6, ow: 14, kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1, dh: 1, dw: 1, izp: -3, signed: true}, 32, true},
		{"rows of 32 AVX-512", qconvParams{c: 6, h: 3, w: 60, oc: 11, oh: 3, ow: 60, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 2, dh: 1, dw: 1, izp: 9}, 32, true},
		{"flat 1x1 AVX-512 int8 data", qconvParams{c: 5, h: 9, w: 11, oc: 10, oh: 9, ow: 11, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, izp: -20, signed: true}, 32, true},
		{"pairs 3x3 on 6x14 AVX-512", qconvParams{c: 7, h: 6, w: 14, oc: 17, oh: 6, ow: 14, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, izp: 130}, 32, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.isa, p.l1 = qconvAVX2, 32<<10
			marchs := []string{"-march=haswell", "-march=x86-64"}
			if tc.avx512 {
				p.isa, marchs = qconvAVX512VNNI, []string{avx512VNNIMarch, "-march=x86-64"}
			}
			k, err := newQConvKernel(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			if k.dir == nil || k.np != tc.np || k.dir.pairs != strings.HasPrefix(tc.name, "pairs") {
				t.Fatalf("direct form %v with %d-pixel tiles (pairs %v), want %d-pixel tiles", k.dir != nil, k.np, k.dir != nil && k.dir.pairs, tc.np)
			}
			pk := newQConvPackKernel(p, k.dir)
			rng := rand.New(rand.NewSource(3))
			x := make([]int64, p.c*p.h*p.w)
			for i := range x {
				if p.signed {
					x[i] = int64(rng.Intn(256) - 128)
				} else {
					x[i] = int64(rng.Intn(256))
				}
			}
			// Weights OIHW4i, 7-bit when the kernel multiplies with
			// vpmaddubsw.
			span := 256
			if p.maddubs {
				span = 129
			}
			wt := make([]int64, p.oc*k.k4*4)
			for i := range wt {
				if c := int64(i%4) + int64(i/4)%k.k4/(p.kh*p.kw)*4; c < p.c {
					wt[i] = int64(rng.Intn(span) - span/2)
				}
			}
			want := make([]int64, p.oc*p.oh*p.ow)
			taps := p.kh * p.kw
			for o := int64(0); o < p.oc; o++ {
				for oy := int64(0); oy < p.oh; oy++ {
					for ox := int64(0); ox < p.ow; ox++ {
						var s int64
						for c := int64(0); c < p.c; c++ {
							for ky := int64(0); ky < p.kh; ky++ {
								for kx := int64(0); kx < p.kw; kx++ {
									iy, ix := oy*p.sh-p.ph+ky*p.dh, ox*p.sw-p.pw+kx*p.dw
									v := p.izp
									if iy >= 0 && iy < p.h && ix >= 0 && ix < p.w {
										v = x[(c*p.h+iy)*p.w+ix]
									}
									s += (v - p.izp) * wt[((o*k.k4)+c/4*taps+ky*p.kw+kx)*4+c%4]
								}
							}
						}
						want[(o*p.oh+oy)*p.ow+ox] = s
					}
				}
			}
			xt := "uint8_t"
			if p.signed {
				xt = "int8_t"
			}
			var b strings.Builder
			b.WriteString(cPrelude(pk, k))
			b.WriteString(pk.Source() + k.Source())
			ints := func(name, typ string, v []int64) { b.WriteString(cArray(name, typ, v)) }
			ints("xin", xt, x)
			ints("win", "int8_t", wt)
			wsum := make([]int64, p.oc)
			for o := range wsum {
				for i := int64(0); i < k.k4*4; i++ {
					wsum[o] += wt[int64(o)*k.k4*4+i]
				}
			}
			ints("wsum", "int32_t", wsum)
			fmt.Fprintf(&b, "int main(void) {\n  uint8_t* x4 = malloc(%d);\n  int32_t* out = malloc(%d);\n", k.dir.imageBytes(k.c4), len(want)*4)
			fmt.Fprintf(&b, "  for (int32_t u = 0; u < %d; ++u) %s(xin, x4, u);\n", pk.split.calls(), pk.Symbol())
			fmt.Fprintf(&b, "  for (int32_t t = 0; t < %d; ++t) %s(x4, win, wsum, out, t);\n", k.tiles, k.Symbol())
			fmt.Fprintf(&b, "  for (int32_t i = 0; i < %d; ++i) printf(\"%%d\\n\", (int)out[i]);\n  free(x4);\n  free(out);\n  return 0;\n}\n", len(want))
			runCBuilds(t, cc, b.String(), want, marchs...)
			// The kernels' Eval (the interpreter's), on the same data.
			var xm tir.KernelMemory = conv(make(sliceMem[uint8], len(x)), x)
			if p.signed {
				xm = conv(make(sliceMem[int8], len(x)), x)
			}
			x4 := make(sliceMem[uint8], k.dir.imageBytes(k.c4))
			for u := int64(0); u < pk.split.calls(); u++ {
				if err := pk.Eval([]tir.KernelArg{{Mem: xm}, {Mem: x4}, {Int: u}}); err != nil {
					t.Fatal(err)
				}
			}
			out := make(sliceMem[int32], len(want))
			wm, sm := conv(make(sliceMem[int8], len(wt)), wt), conv(make(sliceMem[int32], len(wsum)), wsum)
			for tile := int64(0); tile < k.tiles; tile++ {
				if err := k.Eval([]tir.KernelArg{{Mem: x4}, {Mem: wm}, {Mem: sm}, {Mem: out}, {Int: tile}}); err != nil {
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

// conv copies v into m, element by element.
func conv[T int8 | uint8 | int32](m sliceMem[T], v []int64) sliceMem[T] {
	for i, e := range v {
		m[i] = T(e)
	}
	return m
}
