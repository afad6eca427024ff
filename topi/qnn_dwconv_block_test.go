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

// TestQDWBlockPortable: the depthwise kernel's block form
// (qnn_dwconv_block.go), its ring and its plane variant, built with AVX2
// (and its sixteen-lane form built with AVX-512 VNNI,
// qnn_dwconv_block512.go) and built for a plain x86-64 (the portable C under its guards, as an
// exported project may be built), gives a plain depthwise convolution's
// values exactly: int32 sums, and requantized bytes with a bias and a
// multiplier per channel, over channel counts that leave a partial block
// or none, stride 2, dilation, asymmetric padding, rows that end in a
// partial group of eight columns and maps whose calls take blocks of
// rows; and so does its Eval.
func TestQDWBlockPortable(t *testing.T) {
	cc := testenv.Tool(t, "gcc")
	for _, tc := range []struct {
		name string
		p    qconvParams
		epi  *qconvEpi
	}{
		{"7x7 requantized, 13 channels", qconvParams{c: 13, h: 7, w: 7, oc: 13, oh: 7, ow: 7, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, izp: 100},
			&qconvEpi{shift: 36, zp: 3, lo: 0, hi: 255, perChannel: true}},
		{"stride 2 int8 data, int32 sums", qconvParams{c: 8, h: 11, w: 9, oc: 8, oh: 6, ow: 5, kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1, dh: 1, dw: 1, izp: -7, signed: true}, nil},
		{"dilated 5x3, asymmetric padding, int8 out", qconvParams{c: 5, h: 9, w: 10, oc: 5, oh: 9, ow: 9, kh: 5, kw: 3, sh: 1, sw: 1, ph: 4, pw: 1, dh: 2, dw: 1, izp: 40},
			&qconvEpi{shift: 33, zp: -5, lo: -128, hi: 127, signed: true}},
		{"30 columns requantized, 16 channels", qconvParams{c: 16, h: 6, w: 30, oc: 16, oh: 6, ow: 30, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, izp: 128},
			&qconvEpi{shift: 35, zp: 2, lo: 0, hi: 255, perChannel: true}},
		{"stride 2 from 37 columns, int8 data, int32 sums, 11 channels", qconvParams{c: 11, h: 9, w: 37, oc: 11, oh: 5, ow: 19, kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1, dh: 1, dw: 1, izp: 5, signed: true}, nil},
		// Rows ending in 7 and 3 columns: the tail's bytes loaded as 4, 2
		// and 1.
		{"15 columns requantized, 9 channels", qconvParams{c: 9, h: 5, w: 15, oc: 9, oh: 5, ow: 15, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, izp: 77},
			&qconvEpi{shift: 34, zp: 1, lo: 0, hi: 255, perChannel: true}},
		{"11 columns int8 data, int32 sums", qconvParams{c: 8, h: 4, w: 11, oc: 8, oh: 4, ow: 11, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, izp: -3, signed: true}, nil},
		// Sixteen channels per call under AVX-512 VNNI: a whole block
		// and a partial one, rows of a whole group of sixteen columns and
		// a partial one, short rows, per-tensor and per-channel
		// multipliers on both sides of shift 33, and shift 31's 64-bit
		// lanes.
		{"AVX-512 37 columns requantized, 20 channels", qconvParams{c: 20, h: 6, w: 37, oc: 20, oh: 6, ow: 37, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, izp: 128, isa: qconvAVX512VNNI},
			&qconvEpi{shift: 35, zp: 2, lo: 0, hi: 255, perChannel: true}},
		{"AVX-512 7x7 int8 out, 32 channels, shift 32", qconvParams{c: 32, h: 7, w: 7, oc: 32, oh: 7, ow: 7, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, izp: 3, isa: qconvAVX512VNNI},
			&qconvEpi{shift: 32, zp: -5, lo: -128, hi: 127, signed: true, perChannel: true}},
		{"AVX-512 stride 2 from 35 columns, int8 data, int32 sums, 19 channels", qconvParams{c: 19, h: 9, w: 35, oc: 19, oh: 5, ow: 18, kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1, dh: 1, dw: 1, izp: -9, signed: true, isa: qconvAVX512VNNI}, nil},
		{"AVX-512 dilated 5x3 per tensor, shift 31", qconvParams{c: 17, h: 9, w: 18, oc: 17, oh: 9, ow: 17, kh: 5, kw: 3, sh: 1, sw: 1, ph: 4, pw: 1, dh: 2, dw: 1, izp: 40, isa: qconvAVX512VNNI},
			&qconvEpi{shift: 31, zp: 7, lo: 0, hi: 200}},
		// Maps of 16 rows and more: calls of blocks of rows (qdwBlockRows),
		// whose rings start empty at any row, with dilation and stride.
		{"row blocks 60x56 requantized, 9 channels", qconvParams{c: 9, h: 60, w: 56, oc: 9, oh: 60, ow: 56, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, izp: 90},
			&qconvEpi{shift: 35, zp: 2, lo: 0, hi: 255, perChannel: true}},
		{"AVX-512 row blocks dilated 5x3 on 70x49, 17 channels", qconvParams{c: 17, h: 70, w: 50, oc: 17, oh: 70, ow: 49, kh: 5, kw: 3, sh: 1, sw: 1, ph: 4, pw: 1, dh: 2, dw: 1, izp: 40, isa: qconvAVX512VNNI},
			&qconvEpi{shift: 35, zp: 7, lo: 0, hi: 255, perChannel: true}},
		{"AVX-512 row blocks stride 2 from 113x121, int32 sums, 3 channels", qconvParams{c: 3, h: 113, w: 121, oc: 3, oh: 57, ow: 61, kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1, dh: 1, dw: 1, izp: -9, signed: true, isa: qconvAVX512VNNI}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			avx512 := p.isa == qconvAVX512VNNI
			// Cascade Lake: AVX-512 VNNI without VBMI's byte
			// permutations, so the float transposes.
			marchs := []string{avx512VNNIMarch, "-march=cascadelake", "-march=x86-64"}
			if !avx512 {
				p.isa, marchs = qconvAVX2, []string{"-march=haswell", "-march=x86-64"}
			}
			k := newQDWConvKernel(p, tc.epi)
			if k.block == nil {
				t.Fatal("the block form is not used")
			}
			if plane := p.ow < qdwBlockPlaneWidth && !avx512; k.block.plane != plane {
				t.Fatalf("plane variant: %v, want %v", k.block.plane, plane)
			}
			if lanes := map[bool]int64{true: 16, false: 8}[avx512]; k.block.ring.lanes != lanes {
				t.Fatalf("%d channels per call, want %d", k.block.ring.lanes, lanes)
			}
			if split := k.block.split.calls() > k.block.blocks(p); split != strings.Contains(tc.name, "row blocks") {
				t.Fatalf("%d calls for %d channel blocks of %d rows", k.block.split.calls(), k.block.blocks(p), p.oh)
			}
			rng := rand.New(rand.NewSource(11))
			x := make([]int64, p.c*p.h*p.w)
			for i := range x {
				if p.signed {
					x[i] = int64(rng.Intn(256) - 128)
				} else {
					x[i] = int64(rng.Intn(256))
				}
			}
			taps := p.kh * p.kw
			wt := make([]int64, p.c*taps)
			for i := range wt {
				wt[i] = int64(rng.Intn(256) - 128)
			}
			bias, mult := make([]int64, p.c), make([]int64, p.c)
			for i := range bias {
				bias[i] = int64(rng.Intn(20001) - 10000)
				mult[i] = int64(1<<30 + rng.Intn(1<<29))
			}
			if tc.epi != nil && !tc.epi.perChannel {
				mult = mult[:1]
			}
			want := make([]int64, p.c*p.oh*p.ow)
			for c := int64(0); c < p.c; c++ {
				for oy := int64(0); oy < p.oh; oy++ {
					for ox := int64(0); ox < p.ow; ox++ {
						var s int64
						for ky := int64(0); ky < p.kh; ky++ {
							for kx := int64(0); kx < p.kw; kx++ {
								iy, ix := oy*p.sh-p.ph+ky*p.dh, ox*p.sw-p.pw+kx*p.dw
								if iy >= 0 && iy < p.h && ix >= 0 && ix < p.w {
									s += (x[(c*p.h+iy)*p.w+ix] - p.izp) * wt[c*taps+ky*p.kw+kx]
								}
							}
						}
						v := int64(int32(s))
						if e := tc.epi; e != nil {
							m := mult[0]
							if e.perChannel {
								m = mult[c]
							}
							v = op.RequantizeValue(int64(int32(v+bias[c])), m, e.shift, e.zp, e.lo, e.hi)
						}
						want[(c*p.oh+oy)*p.ow+ox] = v
					}
				}
			}
			xt, ot := "uint8_t", "int32_t"
			if p.signed {
				xt = "int8_t"
			}
			if tc.epi != nil {
				ot = map[bool]string{true: "int8_t", false: "uint8_t"}[tc.epi.signed]
			}
			var b strings.Builder
			b.WriteString(cPrelude(k))
			b.WriteString(k.Source())
			ints := func(name, typ string, v []int64) { b.WriteString(cArray(name, typ, v)) }
			ints("xin", xt, x)
			ints("win", "int8_t", wt)
			if tc.epi != nil {
				ints("bin", "int32_t", bias)
				ints("min", "int32_t", mult)
			}
			fmt.Fprintf(&b, "static %s out[%d];\nint main(void) {\n", ot, len(want))
			call := "xin, win, out, u"
			if tc.epi != nil {
				call = "xin, win, bin, min, out, u"
			}
			// The calls in reverse: each stands alone.
			fmt.Fprintf(&b, "  for (int32_t u = %d; u >= 0; --u) %s(%s);\n", k.block.split.calls()-1, k.Symbol(), call)
			fmt.Fprintf(&b, "  for (int32_t i = 0; i < %d; ++i) printf(\"%%d\\n\", (int)out[i]);\n  return 0;\n}\n", len(want))
			runCBuilds(t, cc, b.String(), want, marchs...)
			// The kernel's Eval (the interpreter's), on the same data.
			var xm tir.KernelMemory = conv(make(sliceMem[uint8], len(x)), x)
			if p.signed {
				xm = conv(make(sliceMem[int8], len(x)), x)
			}
			om := make(sliceMem[int32], len(want))
			args := []tir.KernelArg{{Mem: xm}, {Mem: conv(make(sliceMem[int8], len(wt)), wt)}}
			if tc.epi != nil {
				args = append(args, tir.KernelArg{Mem: conv(make(sliceMem[int32], len(bias)), bias)}, tir.KernelArg{Mem: conv(make(sliceMem[int32], len(mult)), mult)})
			}
			args = append(args, tir.KernelArg{Mem: om}, tir.KernelArg{})
			for u := k.block.split.calls() - 1; u >= 0; u-- {
				args[len(args)-1].Int = u
				if err := k.Eval(args); err != nil {
					t.Fatal(err)
				}
			}
			for i, v := range om {
				if int64(v) != want[i] {
					t.Fatalf("Eval: output %d is %d, want %d", i, v, want[i])
				}
			}
			args[len(args)-1].Int = k.block.split.calls()
			if err := k.Eval(args); err == nil {
				t.Fatalf("call %d of %d: no error", k.block.split.calls(), k.block.split.calls())
			}
		})
	}
}
