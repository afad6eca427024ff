package topi

import (
	"fmt"
	"strings"
)

// The Arm NEON forms of the integer convolution's tile kernel (AArch64).
// The input is laid out as signed bytes (signedLayout), four channels of
// a pixel per 32-bit word, sixteen pixels per tile in four q registers:
//
//   - with dot products (qconvNEONDot, -mcpu=cortex-a76, neoverse-n1,
//     ...): vdotq_s32 adds the four-channel products of each pixel with
//     the broadcast weight word, four channels of outputs at a time;
//   - without (qconvNEON, cortex-a53, cortex-a72): vmull_s8 multiplies
//     the bytes of two pixels with the weight word into 16-bit products
//     (exact: at most 128 * 128) and vpadalq_s16 adds their pairs into
//     32-bit lanes, two per pixel, which a pairwise add folds at the end;
//     two channels at a time.
//
// The sums less the zero-point term are requantized four lanes at a time
// (epilogueNEON) and narrowed to bytes.

// mainNEON writes the tile's channel loop for the NEON ISAs.
func (k *qconvKernel) mainNEON(w func(string, ...any)) {
	mr, dot := k.mr, k.p.isa == qconvNEONDot
	acc := func(m, i int64, half string) string { return fmt.Sprintf("a%d_%d%s", m, i, half) }
	block := func(n int64, o string) {
		// Accumulators: per channel and x vector, one (dot) or two
		// (pixels 0-1 and 2-3) int32x4.
		for m := int64(0); m < n; m++ {
			for i := int64(0); i < 4; i++ {
				if dot {
					w("    int32x4_t %s = vdupq_n_s32(0);\n", acc(m, i, ""))
				} else {
					w("    int32x4_t %s = vdupq_n_s32(0), %s = vdupq_n_s32(0);\n", acc(m, i, "l"), acc(m, i, "h"))
				}
			}
		}
		w("    for (int32_t k4 = 0; k4 < K4; ++k4) {\n")
		w("      const int8_t* xs = (const int8_t*)(const void*)(xp + k4 * NP);\n")
		for i := int64(0); i < 4; i++ {
			w("      const int8x16_t x%d = vld1q_s8(xs + %d);\n", i, 16*i)
		}
		for m := int64(0); m < n; m++ {
			w("      { const int8x16_t b = vreinterpretq_s8_s32(vdupq_n_s32(KILN_QW(%s + %d, k4)));\n", o, m)
			for i := int64(0); i < 4; i++ {
				if dot {
					w("        %s = vdotq_s32(%s, x%d, b);\n", acc(m, i, ""), acc(m, i, ""), i)
				} else {
					w("        %s = vpadalq_s16(%s, vmull_s8(vget_low_s8(x%d), vget_low_s8(b)));\n", acc(m, i, "l"), acc(m, i, "l"), i)
					w("        %s = vpadalq_s16(%s, vmull_high_s8(x%d, b));\n", acc(m, i, "h"), acc(m, i, "h"), i)
				}
			}
			w("      }\n")
		}
		w("    }\n")
		for m := int64(0); m < n; m++ {
			ch := fmt.Sprintf("%s + %d", o, m)
			w("    { const int32x4_t c = vdupq_n_s32(%d * wsum[%s]);\n", k.p.izpu(), ch)
			var vs []string
			for i := int64(0); i < 4; i++ {
				v := acc(m, i, "")
				if !dot {
					v = fmt.Sprintf("vpaddq_s32(%s, %s)", acc(m, i, "l"), acc(m, i, "h"))
				}
				vs = append(vs, fmt.Sprintf("vsubq_s32(%s, c)", v))
			}
			k.storeNEON(w, ch, vs)
			w("    }\n")
		}
	}
	w("  int32_t o = 0;\n")
	w("  for (; o + %d <= %d; o += %d) {\n", mr, k.p.oc, mr)
	block(mr, "o")
	w("  }\n")
	w("  for (; o < %d; ++o) {\n", k.p.oc)
	block(1, "o")
	w("  }\n")
}

// storeNEON stores channel o's sixteen values (four int32x4 C
// expressions): as int32, or requantized and narrowed to bytes; a
// partial tile goes through a buffer.
func (k *qconvKernel) storeNEON(w func(string, ...any), o string, vs []string) {
	if e := k.epi; e != nil {
		ot := e.outType()
		w("      const int32_t b = bias[%s], mm = %s;\n", o, k.multExpr(o))
		for i, v := range vs {
			w("      const int32x4_t q%d = KILN_SYMBOL_rq4(%s, b, mm);\n", i, v)
		}
		w("      const int16x8_t h0 = vcombine_s16(vmovn_s32(q0), vmovn_s32(q1)), h1 = vcombine_s16(vmovn_s32(q2), vmovn_s32(q3));\n")
		w("      %s tmp[16];\n", ot)
		if e.signed {
			w("      vst1q_s8(tmp, vcombine_s8(vmovn_s16(h0), vmovn_s16(h1)));\n")
		} else {
			w("      vst1q_u8(tmp, vcombine_u8(vmovn_u16(vreinterpretq_u16_s16(h0)), vmovn_u16(vreinterpretq_u16_s16(h1))));\n")
		}
		w("      memcpy(out + (int64_t)(%s) * P + p0, tmp, (size_t)np);\n", o)
		return
	}
	w("      int32_t tmp[16];\n")
	for i, v := range vs {
		w("      vst1q_s32(tmp + %d, %s);\n", 4*i, v)
	}
	w("      memcpy(out + (int64_t)(%s) * P + p0, tmp, (size_t)np * sizeof(int32_t));\n", o)
}

// epilogueNEON is KILN_SYMBOL_rq4: op.RequantizeValue on four lanes (the
// bias added with wrap-around, 64-bit products of two lanes at a time,
// an arithmetic shift, rounding half to even, the zero point, the
// clamp), the values within the output type's range.
func (k *qconvKernel) epilogueNEON() string {
	e := k.epi
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("static inline int64x2_t KILN_SYMBOL_rq64(int64x2_t p) {\n")
	w("  int64x2_t q = vshlq_s64(p, vdupq_n_s64(-%d));\n", e.shift)
	w("  const int64x2_t r = vandq_s64(p, vdupq_n_s64(INT64_C(%d))), h = vdupq_n_s64(INT64_C(%d));\n", int64(1)<<e.shift-1, int64(1)<<(e.shift-1))
	w("  const uint64x2_t up = vorrq_u64(vcgtq_s64(r, h), vandq_u64(vceqq_s64(r, h), vtstq_s64(q, vdupq_n_s64(1))));\n")
	w("  q = vaddq_s64(vsubq_s64(q, vreinterpretq_s64_u64(up)), vdupq_n_s64(%d));\n", e.zp)
	w("  const int64x2_t lo = vdupq_n_s64(%d), hi = vdupq_n_s64(%d);\n", e.lo, e.hi)
	w("  q = vbslq_s64(vcgtq_s64(lo, q), lo, q);\n")
	w("  return vbslq_s64(vcgtq_s64(q, hi), hi, q);\n}\n")
	w("static inline int32x4_t KILN_SYMBOL_rq4(int32x4_t v, int32_t b, int32_t m) {\n")
	w("  v = vaddq_s32(v, vdupq_n_s32(b));\n")
	w("  const int64x2_t p0 = vmull_s32(vget_low_s32(v), vdup_n_s32(m)), p1 = vmull_high_s32(v, vdupq_n_s32(m));\n")
	w("  return vcombine_s32(vmovn_s64(KILN_SYMBOL_rq64(p0)), vmovn_s64(KILN_SYMBOL_rq64(p1)));\n}\n")
	return b.String()
}
