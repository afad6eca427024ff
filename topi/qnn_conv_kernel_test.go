package topi

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/tir"
)

// TestQConvPackSplit checks the pack kernel's division into calls
// (packSplit): the calls, in any order, write every byte of the layout
// (a buffer filled with 0x00 and one filled with 0xAB end the same), and
// the layout is the one a single call per channel group writes.
func TestQConvPackSplit(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    qconvParams
		isa  qconvISA
	}{
		{"flat 1x1", qconvParams{c: 9, h: 40, w: 30, oc: 8, oh: 40, ow: 30, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, izp: 7}, qconvScalar},
		{"flat int8 data", qconvParams{c: 3, h: 64, w: 20, oc: 8, oh: 64, ow: 20, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, izp: -5, signed: true}, qconvScalar},
		{"direct 3x3", qconvParams{c: 6, h: 30, w: 60, oc: 11, oh: 30, ow: 60, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, izp: 9}, qconvAVX512VNNI},
		{"phases 3x3 stride 2", qconvParams{c: 9, h: 40, w: 28, oc: 12, oh: 20, ow: 14, kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1, dh: 1, dw: 1, izp: -3, signed: true}, qconvAVX512VNNI},
		{"phases 7x7 stride 2, 3 channels", qconvParams{c: 3, h: 64, w: 64, oc: 8, oh: 32, ow: 32, kh: 7, kw: 7, sh: 2, sw: 2, ph: 3, pw: 3, dh: 1, dw: 1, izp: 100}, qconvAVX512VNNI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.isa, p.l1 = tc.isa, 32<<10
			k, err := newQConvKernel(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			if (k.dir != nil) != (tc.isa != qconvScalar) {
				t.Fatalf("direct form %v, want %v", k.dir != nil, tc.isa != qconvScalar)
			}
			pk := newQConvPackKernel(p, k.dir)
			calls := pk.split.calls()
			if calls <= pk.split.groups {
				t.Fatalf("%d calls for %d channel groups: the test wants blocks of rows", calls, pk.split.groups)
			}
			size := pk.split.groups * p.h * p.w * 4
			if k.dir != nil {
				size = k.dir.imageBytes(pk.split.groups)
			}
			rng := rand.New(rand.NewSource(5))
			_, xm, _ := qconvInput(rng, p)
			run := func(k *qconvPackKernel, fill uint8, order []int) sliceMem[uint8] {
				out := make(sliceMem[uint8], size)
				for i := range out {
					out[i] = fill
				}
				for _, u := range order {
					if err := k.Eval([]tir.KernelArg{{Mem: xm}, {Mem: out}, {Int: int64(u)}}); err != nil {
						t.Fatal(err)
					}
				}
				return out
			}
			a, b := run(pk, 0, rng.Perm(int(calls))), run(pk, 0xAB, rng.Perm(int(calls)))
			whole := *pk
			whole.split.rowsPer = whole.split.rows
			ref := run(&whole, 0x5C, rng.Perm(int(whole.split.calls())))
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("byte %d of %d is written by no call", i, size)
				}
				if a[i] != ref[i] {
					t.Fatalf("byte %d is %d, one call per channel group writes %d", i, a[i], ref[i])
				}
			}
			if err := pk.Eval([]tir.KernelArg{{Mem: xm}, {Mem: a}, {Int: calls}}); err == nil {
				t.Fatalf("call %d of %d: no error", calls, calls)
			}
		})
	}
}

// TestQConvPackC: the pack kernels' C (the usual form's rows and the
// direct form's padded planes), built for AVX-512 VNNI with VBMI (whose
// interleave4 takes sixteen pixels per vector, the last masked), for
// Cascade Lake (no VBMI) and for a plain x86-64, write the layout their
// Eval writes, and nothing else: stride 1 and the phase planes of
// stride 2 (every second byte), row blocks whose pixels sixteen do or do not divide,
// channels not a multiple of four, int8 data (the top bit flipped).
func TestQConvPackC(t *testing.T) {
	cc := testenv.Tool(t, "gcc")
	for _, tc := range []struct {
		name   string
		p      qconvParams
		direct bool
	}{
		{"usual 7x7", qconvParams{c: 10, h: 7, w: 7, oc: 8, oh: 7, ow: 7, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, izp: 7}, false},
		{"usual int8 data 13x40", qconvParams{c: 7, h: 13, w: 40, oc: 8, oh: 13, ow: 40, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, izp: -5, signed: true}, false},
		{"direct 60 columns", qconvParams{c: 6, h: 9, w: 60, oc: 11, oh: 9, ow: 60, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, izp: 9}, true},
		{"direct flat int8 data", qconvParams{c: 5, h: 9, w: 11, oc: 10, oh: 9, ow: 11, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, izp: -20, signed: true}, true},
		{"phases stride 2 int8 data", qconvParams{c: 9, h: 12, w: 45, oc: 12, oh: 6, ow: 23, kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1, dh: 1, dw: 1, izp: -3, signed: true}, true},
		{"phases 7x7 stride 2, 3 channels", qconvParams{c: 3, h: 40, w: 40, oc: 8, oh: 20, ow: 20, kh: 7, kw: 7, sh: 2, sw: 2, ph: 3, pw: 3, dh: 1, dw: 1, izp: 100}, true},
		{"phases 1x1 stride 2", qconvParams{c: 8, h: 14, w: 14, oc: 16, oh: 7, ow: 7, kh: 1, kw: 1, sh: 2, sw: 2, dh: 1, dw: 1, izp: 4}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.isa, p.l1 = qconvAVX512VNNI, 32<<10
			var dir *qconvDirect
			size := (p.c + 3) / 4 * p.h * p.w * 4
			if tc.direct {
				if dir = newQConvPlanes(p, 32); dir == nil {
					t.Fatal("no padded layout")
				}
				size = dir.imageBytes((p.c + 3) / 4)
			}
			pk := newQConvPackKernel(p, dir)
			x, xm, xt := qconvInput(rand.New(rand.NewSource(8)), p)
			out := make(sliceMem[uint8], size)
			for u := int64(0); u < pk.split.calls(); u++ {
				if err := pk.Eval([]tir.KernelArg{{Mem: xm}, {Mem: out}, {Int: u}}); err != nil {
					t.Fatal(err)
				}
			}
			want := make([]int64, size)
			for i, v := range out {
				want[i] = int64(v)
			}
			var b strings.Builder
			b.WriteString(cPrelude(pk))
			b.WriteString(pk.Source())
			b.WriteString(cArray("xin", xt, x))
			fmt.Fprintf(&b, "int main(void) {\n  uint8_t* x4 = malloc(%d);\n  memset(x4, 0xAB, %d);\n", size, size)
			// The calls last first: a call that wrote past its rows would
			// overwrite a neighbour's, already written.
			fmt.Fprintf(&b, "  for (int32_t u = %d; u >= 0; --u) %s(xin, x4, u);\n", pk.split.calls()-1, pk.Symbol())
			fmt.Fprintf(&b, "  for (int32_t i = 0; i < %d; ++i) printf(\"%%d\\n\", (int)x4[i]);\n  free(x4);\n  return 0;\n}\n", size)
			runCBuilds(t, cc, b.String(), want, avx512VNNIMarch, "-march=cascadelake", "-march=x86-64")
		})
	}
}

// qconvInput is a random input image for p: its values (int8 when
// p.signed, else uint8), the interpreter's memory holding them and
// their C type.
func qconvInput(rng *rand.Rand, p qconvParams) (x []int64, xm tir.KernelMemory, ctype string) {
	x = make([]int64, p.c*p.h*p.w)
	for i := range x {
		x[i] = int64(rng.Intn(256))
		if p.signed {
			x[i] -= 128
		}
	}
	if p.signed {
		return x, conv(make(sliceMem[int8], len(x)), x), "int8_t"
	}
	return x, conv(make(sliceMem[uint8], len(x)), x), "uint8_t"
}
