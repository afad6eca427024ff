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
// for an arithmetic one) on small and large sums, at the ends of int32,
// on ties of either sign and past the clamp, and requires
// op.RequantizeValue's results bit for bit.
func TestRequantizeAVX2(t *testing.T) {
	p, err := targets.ResolveCPU("native", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Features, "avx2") {
		t.Skip("this machine has no AVX2")
	}
	cc := testenv.Tool(t, "cc")
	var vals []int64
	for _, v := range []int64{0, 1, -1, 3, -3, 5, -5, 1 << 21, -(1 << 21), 1<<22 - 1, -(1<<22 - 1), 1 << 22, -(1 << 22), 1<<22 + 1, -(1<<22 + 1),
		math.MaxInt32, math.MinInt32, math.MinInt32 + 1, 123456789, -123456789, 4194303, -4194301} {
		vals = append(vals, v)
	}
	for len(vals)%8 != 0 {
		vals = append(vals, int64(len(vals))*7919-30000)
	}
	for _, c := range []struct{ shift, mult, zp, lo, hi, bias int64 }{
		{10, 512, 0, -128, 127, 0},          // x / 2: every odd sum a tie
		{31, 1 << 30, -128, -128, 127, 0},   // x / 2 again, with a zero point
		{40, 1500000000, 3, -128, 127, 17},  // a typical scale
		{62, math.MaxInt32, 0, 0, 255, -5},  // the largest shift
		{1, math.MinInt32, 100, -20, 90, 1}, // a negative multiplier, a narrow clamp
		// From shift 32 the quotients fit int32 and are clamped there.
		{32, math.MinInt32, -3, -128, 127, 0}, // 2^62 / 2^32, the largest quotient
		{33, -1500000000, 200, 0, 255, -7},    // negative multiplier, ties of both signs
		{31, math.MinInt32, 0, -128, 127, 0},  // the last shift of the 64-bit clamp
	} {
		t.Run(fmt.Sprintf("shift%d", c.shift), func(t *testing.T) {
			k := &qconvKernel{p: qconvParams{isa: qconvAVX2}, epi: &qconvEpi{shift: c.shift, zp: c.zp, lo: c.lo, hi: c.hi}}
			var src strings.Builder
			src.WriteString("#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n#include <immintrin.h>\n")
			src.WriteString(strings.ReplaceAll(k.epilogueHelpers(), "KILN_SYMBOL", "k"))
			fmt.Fprintf(&src, "static const int32_t in[%d] = {", len(vals))
			for _, v := range vals {
				fmt.Fprintf(&src, "(int32_t)%dLL, ", v)
			}
			fmt.Fprintf(&src, "};\nint main(void) {\n  int32_t out[%d];\n", len(vals))
			fmt.Fprintf(&src, "  for (int i = 0; i < %d; i += 8) _mm256_storeu_si256((__m256i*)(out + i), k_rq8(_mm256_loadu_si256((const __m256i*)(in + i)), %d, (int32_t)%dLL));\n", len(vals), c.bias, c.mult)
			src.WriteString("  FILE* f = fopen(\"out.bin\", \"wb\");\n  if (!f || fwrite(out, sizeof out, 1, f) != 1) return 3;\n  return fclose(f) != 0;\n}\n")
			raw := runKernelProgram(t, cc, src.String(), nil, []string{"-O2", "-mavx2", "-std=c11"})
			for i, v := range vals {
				x := int64(int32(v + c.bias))
				want := op.RequantizeValue(x, c.mult, c.shift, c.zp, c.lo, c.hi)
				if got := int64(int32(binary.LittleEndian.Uint32(raw[4*i:]))); got != want {
					t.Errorf("sum %d (+ bias %d): %d, want %d", v, c.bias, got, want)
				}
			}
		})
	}
}
