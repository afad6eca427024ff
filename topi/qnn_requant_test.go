package topi

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/targets"
)

// TestRequantizeAVX2 runs the AVX2 kernels' eight-lane requantization
// (KILN_SYMBOL_rq8: 64-bit products, the biased logical shift AVX2 needs
// for an arithmetic one; without the tie test when the multiplier rules
// ties out, KILN_SYMBOL_rqn) on small and large sums, at the ends of
// int32, on ties of either sign and past the clamp, and requires
// op.RequantizeValue's results bit for bit: rq8's after the saturating
// narrowing its callers apply, the exact rq8vf's likewise, and sat8's
// (the full clamp) as they are.
func TestRequantizeAVX2(t *testing.T) {
	p, err := targets.ResolveCPU("native", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Features, "avx2") {
		t.Skip("this machine has no AVX2")
	}
	cc := testenv.Tool(t, "cc")
	vals := requantSums()
	for _, c := range requantCases {
		t.Run(fmt.Sprintf("shift%d", c.shift), func(t *testing.T) {
			src := requantProgram(qconvAVX2, c, vals)
			// out: rq8, rq8vf's exact form, and sat8 of the exact form; then
			// whether rq8 took rq8n.
			n := len(vals)
			fmt.Fprintf(src, "};\nint main(void) {\n  int32_t out[%d];\n", 3*n+1)
			fmt.Fprintf(src, "  const __m256i bv = _mm256_set1_epi32(%d), mv = _mm256_set1_epi32((int32_t)%dLL);\n", c.bias, c.mult)
			fmt.Fprintf(src, "  for (int i = 0; i < %d; i += 8) {\n", n)
			src.WriteString("    const __m256i v = _mm256_loadu_si256((const __m256i*)(in + i));\n")
			fmt.Fprintf(src, "    _mm256_storeu_si256((__m256i*)(out + i), k_rq8(v, %d, (int32_t)%dLL));\n", c.bias, c.mult)
			fmt.Fprintf(src, "    _mm256_storeu_si256((__m256i*)(out + %d + i), k_rq8vf(v, bv, mv, mv, 0));\n", n)
			fmt.Fprintf(src, "    _mm256_storeu_si256((__m256i*)(out + %d + i), k_sat8(k_rq8vf(v, bv, mv, mv, 0)));\n  }\n", 2*n)
			fast := "0"
			if c.shift >= 33 {
				fast = fmt.Sprintf("k_rqn((int32_t)%dLL)", c.mult)
			}
			fmt.Fprintf(src, "  out[%d] = %s;\n", 3*n, fast)
			src.WriteString("  FILE* f = fopen(\"out.bin\", \"wb\");\n  if (!f || fwrite(out, sizeof out, 1, f) != 1) return 3;\n  return fclose(f) != 0;\n}\n")
			raw := runKernelProgram(t, cc, src.String(), nil, []string{"-O2", "-mavx2", "-std=c11"})
			word := func(i int) int64 { return int64(int32(binary.LittleEndian.Uint32(raw[4*i:]))) }
			// The saturating packs' clamp to the output type.
			tlo, thi := int64(0), int64(255)
			if c.lo < 0 {
				tlo, thi = -128, 127
			}
			sat := func(v int64) int64 { return min(max(v, tlo), thi) }
			for i, v := range vals {
				x := int64(int32(v + c.bias))
				want := op.RequantizeValue(x, c.mult, c.shift, c.zp, c.lo, c.hi)
				for j, name := range []string{"rq8", "rq8vf (exact)", "sat8"} {
					got := word(j*n + i)
					if j < 2 {
						got = sat(got)
					}
					if got != want {
						t.Errorf("%s: sum %d (+ bias %d): %d, want %d", name, v, c.bias, got, want)
					}
				}
			}
			m := uint32(int32(c.mult))
			wantFast := c.shift >= 33 && (m&(1<<(c.shift-32)-1) != 0 || m == 0)
			if got := word(3*n) != 0; got != wantFast {
				t.Errorf("rqn(%d) = %v, want %v", c.mult, got, wantFast)
			}
		})
	}
}

// TestRequantizeAVX512 runs the AVX-512 kernels' sixteen-lane
// requantization (KILN_SYMBOL_rq16: in 32-bit lanes from shift 32,
// without the tie test when the multiplier rules ties out; in 64-bit
// lanes below) on requantSums with requantCases, and requires
// op.RequantizeValue's results bit for bit: rq16's, and those of rq16n
// (unclamped) narrowed four vectors at a time by pk4, which must also
// keep the vectors' order.
func TestRequantizeAVX512(t *testing.T) {
	if !hostCPUFlags("avx512f", "avx512bw", "avx512vl", "avx512_vnni") {
		t.Skip("this machine has no AVX-512 VNNI")
	}
	cc := testenv.Tool(t, "cc")
	vals := requantSums()
	n := len(vals)
	for _, c := range requantCases {
		t.Run(fmt.Sprintf("shift%d", c.shift), func(t *testing.T) {
			src := requantProgram(qconvAVX512VNNI, c, vals)
			// out: rq16's bytes, then for each vector i pk4's of the
			// unclamped rq16n at i, i + 16, i + 32 and i + 48 (modulo n).
			fmt.Fprintf(src, "};\nint main(void) {\n  uint8_t out[%d];\n", 5*n)
			fmt.Fprintf(src, "  for (int i = 0; i < %d; i += 16) {\n", n)
			fmt.Fprintf(src, "    _mm_storeu_si128((__m128i*)(void*)(out + i), k_rq16(_mm512_loadu_si512((const void*)(in + i)), %d, (int32_t)%dLL));\n", c.bias, c.mult)
			fmt.Fprintf(src, "    __m512i q[4];\n    for (int j = 0; j < 4; ++j) q[j] = k_rq16n(_mm512_loadu_si512((const void*)(in + (i + 16 * j) %% %d)), %d, (int32_t)%dLL);\n", n, c.bias, c.mult)
			fmt.Fprintf(src, "    _mm512_storeu_si512((void*)(out + %d + 4 * i), k_pk4(q[0], q[1], q[2], q[3]));\n  }\n", n)
			src.WriteString("  FILE* f = fopen(\"out.bin\", \"wb\");\n  if (!f || fwrite(out, sizeof out, 1, f) != 1) return 3;\n  return fclose(f) != 0;\n}\n")
			raw := runKernelProgram(t, cc, src.String(), nil, []string{"-O2", avx512VNNIMarch, "-std=c11", "-Wall", "-Wextra", "-Werror"})
			byteAt := func(i int) int64 {
				if c.lo < 0 {
					return int64(int8(raw[i]))
				}
				return int64(raw[i])
			}
			want := func(i int) int64 {
				return op.RequantizeValue(int64(int32(vals[i]+c.bias)), c.mult, c.shift, c.zp, c.lo, c.hi)
			}
			for i, v := range vals {
				if got := byteAt(i); got != want(i) {
					t.Errorf("rq16: sum %d (+ bias %d): %d, want %d", v, c.bias, got, want(i))
				}
			}
			for i := 0; i < n; i += 16 {
				for j := range 64 {
					k := (i+16*(j/16))%n + j%16
					if got := byteAt(n + 4*i + j); got != want(k) {
						t.Errorf("pk4 of rq16n: vector %d, byte %d: sum %d (+ bias %d): %d, want %d", i/16, j, vals[k], c.bias, got, want(k))
					}
				}
			}
		})
	}
}

// requantProgram starts a C test program of the requantization helpers
// of isa for case c (named k_*, as epilogueHelpers writes them), with the
// sums vals as in[], its initialiser left open.
func requantProgram(isa qconvISA, c requantCase, vals []int64) *strings.Builder {
	k := &qconvKernel{p: qconvParams{isa: isa}, epi: &qconvEpi{shift: c.shift, zp: c.zp, lo: c.lo, hi: c.hi, signed: c.lo < 0}}
	src := &strings.Builder{}
	src.WriteString("#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n#include <immintrin.h>\n")
	src.WriteString(strings.ReplaceAll(k.epilogueHelpers(), "KILN_SYMBOL", "k"))
	fmt.Fprintf(src, "static const int32_t in[%d] = {", len(vals))
	for _, v := range vals {
		fmt.Fprintf(src, "(int32_t)%dLL, ", v)
	}
	return src
}

// requantCase is one requantization of the vector helpers' tests.
type requantCase struct{ shift, mult, zp, lo, hi, bias int64 }

// requantCases are the requantizations the vector helpers' tests run.
var requantCases = []requantCase{
	{10, 512, 0, -128, 127, 0},            // x / 2: every odd sum a tie
	{31, 1 << 30, -128, -128, 127, 0},     // x / 2 again, with a zero point
	{40, 1500000000, 3, -128, 127, 17},    // a typical scale
	{62, math.MaxInt32, 0, 0, 255, -5},    // the largest shift
	{58, math.MinInt32, -7, -128, 127, 2}, // past shift 53: the zero point added to the quotients
	{1, math.MinInt32, 100, -20, 90, 1},   // a negative multiplier, a narrow clamp
	// From shift 32 the quotients fit int32 and are clamped there.
	{32, math.MinInt32, -3, -128, 127, 0}, // 2^62 / 2^32, the largest quotient
	{33, -1500000000, 200, 0, 255, -7},    // negative multiplier, ties of both signs
	{31, math.MinInt32, 0, -128, 127, 0},  // the last shift of the 64-bit clamp
	// Multipliers that rule ties out take rq8n: odd, negative, and
	// with s-33 trailing zeros, the most there may be.
	{33, 1500000001, 5, -128, 127, 0},
	{33, -1499999999, 0, 0, 255, 3},
	{40, 384, 0, -128, 127, 0},
	{40, 1500000128, 0, -128, 127, 0},
	{40, 1500000001, 20, 20, 100, -9}, // a fused ReLU's lower bound and an upper one
	// s-32 trailing zeros: -2^31 * 768 / 2^40 = -1.5 is a tie, so
	// the exact form must be taken.
	{40, 768, 0, -128, 127, 0},
}

// requantSums are the sums the vector helpers' tests requantize: small
// and large, at the ends of int32, a multiple of sixteen.
func requantSums() []int64 {
	var vals []int64
	for _, v := range []int64{0, 1, -1, 3, -3, 5, -5, 1 << 21, -(1 << 21), 1<<22 - 1, -(1<<22 - 1), 1 << 22, -(1 << 22), 1<<22 + 1, -(1<<22 + 1),
		math.MaxInt32, math.MinInt32, math.MinInt32 + 1, 123456789, -123456789, 4194303, -4194301} {
		vals = append(vals, v)
	}
	for len(vals)%16 != 0 {
		vals = append(vals, int64(len(vals))*7919-30000)
	}
	return vals
}
