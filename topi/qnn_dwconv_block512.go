package topi

import (
	"fmt"
	"strings"
)

// The depthwise kernel's block form under AVX-512 VNNI: sixteen
// channels per call, one in each lane of a 512-bit vector, otherwise as
// the eight-lane form (qnn_dwconv_block.go): the sixteen channels' input
// rows widened, centred, converted to float32 and transposed (16x16,
// writeTranspose16) into a ring, every output pixel of the sixteen
// channels one vector of multiply-adds over the taps, the sums
// requantized per lane (KILN_SYMBOL_q16), transposed back to sixteen
// pixels of each channel and stored with a byte mask. The eight-lane
// form's AVX2 code ran mobilenet_v2's 576-channel 14x14 layers at 0.104
// ms (Zen 5, the kernel alone); its transposes, requantizations and
// stores each served eight values where these serve sixteen. Rows of
// any width take the ring (no plane variant): a 7x7 map's rows fill
// seven of sixteen lanes of the output vectors, but the sums and the
// input's transposes still serve sixteen channels.

// qdwBlockLanes512 is the channels per call of the AVX-512 block form.
const qdwBlockLanes512 = 16

// source512 is the AVX-512 block form's C (named KILN_SYMBOL): the
// kernel of qdwconvKernel with the channel block cb as its last
// argument.
func (b qdwBlock) source512(p qconvParams, epi *qconvEpi) string {
	const L = qdwBlockLanes512
	var s strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&s, format, a...) }
	xt, widen := "uint8_t", "_mm512_cvtepu8_epi32"
	if p.signed {
		xt, widen = "int8_t", "_mm512_cvtepi8_epi32"
	}
	ot := "int32_t"
	if epi != nil {
		ot = epi.outType()
	}
	plane, oplane := p.h*p.w, p.oh*p.ow
	guard := p.isa.guard()
	w("/* Depthwise qnn.conv2d, block form: sixteen of %d channels of %dx%d, %dx%d taps (stride %dx%d, pad %dx%d, dilation %dx%d). */\n",
		p.c, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw)
	w("#if %s\n", guard)
	writeTranspose16(w, "KILN_SYMBOL_tr16")
	w("#if %s\n", vbmiGuard)
	writeByteTranspose16(w, "KILN_SYMBOL_btr16")
	w("#endif\n")
	w("#endif\n")
	b.writeHead(w, p, epi, xt, ot)
	w("#if %s\n", guard)
	w("  __m512 wv[KK];\n")
	w("  for (int32_t t = 0; t < KK; ++t) wv[t] = _mm512_loadu_ps(wl[t]);\n")
	if epi != nil {
		w("  const __m512i bv = _mm512_loadu_si512((const void*)bl), mv = _mm512_loadu_si512((const void*)ml);\n")
		epi.writeLaneFast(w, L)
	}
	w("#endif\n")
	w("  for (int32_t oy = oy0; oy < oy1; ++oy) {\n")
	w("    const float* rp[%d];\n", p.kh)
	// The padding (and the lanes past the last channel) hold zero, the
	// centred zero point.
	if n := b.ring.writeRow(w, "oy", p.kh, p.sh, p.ph, p.dh, p.pw, p.h, p.w); n > 0 {
		w("      const %s* restrict s = x + (int64_t)c0 * %d + (int64_t)iy * %d;\n", xt, plane, p.w)
		w("#if %s\n", guard)
		w("      const __m512i zp = _mm512_set1_epi32(%d);\n", p.izp)
		// col converts t columns from c of the sixteen channels into
		// ring columns PW+c...
		col := func(c string, t int64) {
			// With VBMI: the sixteen channels' bytes in four vectors,
			// transposed as bytes (16 instructions where the floats'
			// transpose takes 64), each column then widened alone.
			w("#if %s\n", vbmiGuard)
			w("        __m512i r[4];\n")
			for i := int64(0); i < L; i++ {
				ld := fmt.Sprintf("_mm_loadu_si128((const __m128i*)(const void*)(s + (int64_t)%d * %d + %s))", i, plane, c)
				if t < L {
					ld = fmt.Sprintf("_mm_maskz_loadu_epi8((__mmask16)0x%x, (const void*)(s + (int64_t)%d * %d + %s))", 1<<t-1, i, plane, c)
				}
				// Channels past nc read the zero point: zero once centred.
				by := fmt.Sprintf("(%d < nc ? %s : _mm_set1_epi8((char)%d))", i, ld, p.izp)
				if i%4 == 0 {
					w("        r[%d] = _mm512_castsi128_si512%s;\n", i/4, by)
				} else {
					w("        r[%d] = _mm512_inserti32x4(r[%d], %s, %d);\n", i/4, i/4, by, i%4)
				}
			}
			w("        KILN_SYMBOL_btr16(r);\n")
			for j := int64(0); j < t; j++ {
				w("        _mm512_store_ps(d + (int64_t)(%d + %s + %d) * %d, _mm512_cvtepi32_ps(_mm512_sub_epi32(%s(_mm512_extracti32x4_epi32(r[%d], %d)), zp)));\n", p.pw, c, j, L, widen, j/4, j%4)
			}
			w("#else\n")
			w("        __m512 q[%d];\n", L)
			w("        for (int32_t i = 0; i < %d; ++i) {\n", L)
			if t == L {
				w("          const __m128i by = i < nc ? _mm_loadu_si128((const __m128i*)(const void*)(s + (int64_t)i * %d + %s)) : _mm_setzero_si128();\n", plane, c)
			} else {
				w("          const __m128i by = i < nc ? _mm_maskz_loadu_epi8((__mmask16)0x%x, (const void*)(s + (int64_t)i * %d + %s)) : _mm_setzero_si128();\n", 1<<t-1, plane, c)
			}
			w("          q[i] = i < nc ? _mm512_cvtepi32_ps(_mm512_sub_epi32(%s(by), zp)) : _mm512_setzero_ps();\n", widen)
			w("        }\n")
			w("        KILN_SYMBOL_tr16(q);\n")
			w("        for (int32_t i = 0; i < %d; ++i) _mm512_store_ps(d + (int64_t)(%d + %s + i) * %d, q[i]);\n", t, p.pw, c, L)
			w("#endif\n")
		}
		if full := n / L * L; full > 0 {
			w("      for (int32_t c = 0; c < %d; c += %d) {\n", full, L)
			col("c", L)
			w("      }\n")
		}
		if t := n % L; t > 0 {
			w("      {\n")
			col(fmt.Sprint(n/L*L), t)
			w("      }\n")
		}
		w("#else\n")
		w("      for (int32_t i = 0; i < %d; ++i)\n", L)
		w("        for (int32_t c = 0; c < %d; ++c) d[(int64_t)(%d + c) * %d + i] = i < nc ? (float)((int32_t)s[(int64_t)i * %d + c] - (%d)) : 0.0f;\n", n, p.pw, L, plane, p.izp)
		w("#endif\n")
	}
	w("    }\n")
	w("    %s* restrict o = out + (int64_t)c0 * %d + (int64_t)oy * %d;\n", ot, oplane, p.ow)
	w("#if %s\n", guard)
	full := p.ow / L * L
	if full > 0 {
		b.group512(w, p, epi, ot, "0", fmt.Sprint(full), L)
	}
	if t := p.ow - full; t > 0 {
		b.group512(w, p, epi, ot, fmt.Sprint(full), fmt.Sprint(p.ow), t)
	}
	w("#else\n")
	writeBlockScalarRow(w, p, epi, ot, L)
	w("#endif\n")
	w("  }\n}\n")
	return s.String()
}

// group512 writes the loop over groups of sixteen output columns in
// [from, to) with nb valid columns per group: sixteen accumulators (one
// per column, sixteen channels each), the taps in order, the
// requantization per column, a transpose to sixteen columns per channel,
// and a masked store of nb of them per channel.
func (b qdwBlock) group512(w func(string, ...any), p qconvParams, epi *qconvEpi, ot, from, to string, nb int64) {
	const L = qdwBlockLanes512
	w("    for (int32_t ox = %s; ox < %s; ox += %d) {\n", from, to, L)
	w("      __m512 a[%d];\n", L)
	w("      for (int32_t i = 0; i < %d; ++i) a[i] = _mm512_setzero_ps();\n", L)
	w("      for (int32_t ky = 0; ky < %d; ++ky)\n", p.kh)
	w("        for (int32_t kx = 0; kx < %d; ++kx) {\n", p.kw)
	w("          const float* restrict q = rp[ky] + (int64_t)(ox * %d + kx * %d) * %d;\n", p.sw, p.dw, L)
	w("          const __m512 wt = wv[ky * %d + kx];\n", p.kw)
	w("          for (int32_t i = 0; i < %d; ++i) a[i] = _mm512_fmadd_ps(_mm512_load_ps(q + i * %d), wt, a[i]);\n", nb, p.sw*L)
	w("        }\n")
	mask := fmt.Sprintf("(__mmask16)0x%x", 1<<nb-1)
	if epi != nil {
		// With VBMI: the sixteen columns' requantized channels narrowed
		// to bytes four columns at a time (KILN_SYMBOL_pk4), transposed
		// as bytes, and stored a channel at a time: 16 instructions of
		// packing and 8 of transposing where the floats' transpose and
		// the narrowing take 96.
		w("#if %s\n", vbmiGuard)
		w("      __m512i r[4];\n")
		w("      for (int32_t g = 0; g < 4; ++g) {\n")
		w("        __m512i v[4];\n")
		w("        for (int32_t j = 0; j < 4; ++j) v[j] = KILN_SYMBOL_q16n(_mm512_cvtps_epi32(a[4 * g + j]), bv, mv, mvo, fast);\n")
		w("        r[g] = KILN_SYMBOL_pk4(v[0], v[1], v[2], v[3]);\n")
		w("      }\n")
		w("      KILN_SYMBOL_btr16(r);\n")
		for i := int64(0); i < L; i++ {
			w("      if (%d < nc) _mm_mask_storeu_epi8((void*)(o + (int64_t)%d * %d + ox), %s, _mm512_extracti32x4_epi32(r[%d], %d));\n", i, i, p.oh*p.ow, mask, i/4, i%4)
		}
		w("#else\n")
	}
	// The sums are integers: the conversion is exact.
	w("      for (int32_t i = 0; i < %d; ++i) {\n", L)
	w("        __m512i r = _mm512_cvtps_epi32(a[i]);\n")
	if epi != nil {
		w("        r = KILN_SYMBOL_q16(r, bv, mv, mvo, fast);\n")
	}
	w("        a[i] = _mm512_castsi512_ps(r);\n")
	w("      }\n")
	w("      KILN_SYMBOL_tr16(a);\n")
	w("      for (int32_t i = 0; i < nc; ++i) {\n")
	w("        %s* restrict d = o + (int64_t)i * %d + ox;\n", ot, p.oh*p.ow)
	if epi != nil {
		// Requantized values lie within the output type's range: the
		// truncating narrowing is exact.
		w("        _mm_mask_storeu_epi8((void*)d, %s, _mm512_cvtepi32_epi8(_mm512_castps_si512(a[i])));\n", mask)
	} else {
		w("        _mm512_mask_storeu_epi32((void*)d, %s, _mm512_castps_si512(a[i]));\n", mask)
	}
	w("      }\n")
	if epi != nil {
		w("#endif\n")
	}
	w("    }\n")
}

// vbmiGuard is the preprocessor condition of AVX-512 VBMI's byte
// permutations (Ice Lake, Zen 4 and later; not Skylake-SP or Cascade
// Lake, whose kernels keep the float transposes).
const vbmiGuard = "defined(__AVX512VBMI__)"

// writeByteTranspose16 writes the C of NAME(__m512i r[4]) (AVX-512
// VBMI), which transposes in place the 16x16 matrix of bytes whose row i
// is 128-bit lane i % 4 of r[i / 4]: eight two-source byte permutations.
// The first four gather columns 0-7 (a[0]) and 8-15 (a[1]) of rows 0-7,
// and b[0], b[1] the same of rows 8-15, column-major eight rows at a
// time; the last four take four columns each from one a and one b.
func writeByteTranspose16(p func(string, ...any), name string) {
	var ia [2][64]int
	for j := range 2 {
		for pos := range 64 {
			cl, r := pos/8, pos%8
			src := (r%4)*16 + 8*j + cl
			if r >= 4 {
				src += 64
			}
			ia[j][pos] = src
		}
	}
	var ib [2][64]int
	for h := range 2 {
		for pos := range 64 {
			rr, c := pos/16, pos%16
			col := (4*h + rr) * 8
			if c < 8 {
				ib[h][pos] = col + c
			} else {
				ib[h][pos] = 64 + col + c - 8
			}
		}
	}
	p("static inline void %s(__m512i r[4]) {\n", name)
	p("  static const uint8_t ia[2][64] __attribute__((aligned(64))) = {{%s}, {%s}};\n", joinInts(ia[0][:]), joinInts(ia[1][:]))
	p("  static const uint8_t ib[2][64] __attribute__((aligned(64))) = {{%s}, {%s}};\n", joinInts(ib[0][:]), joinInts(ib[1][:]))
	p("  const __m512i ia0 = _mm512_load_si512((const void*)ia[0]), ia1 = _mm512_load_si512((const void*)ia[1]);\n")
	p("  const __m512i ib0 = _mm512_load_si512((const void*)ib[0]), ib1 = _mm512_load_si512((const void*)ib[1]);\n")
	p("  const __m512i a0 = _mm512_permutex2var_epi8(r[0], ia0, r[1]), a1 = _mm512_permutex2var_epi8(r[0], ia1, r[1]);\n")
	p("  const __m512i b0 = _mm512_permutex2var_epi8(r[2], ia0, r[3]), b1 = _mm512_permutex2var_epi8(r[2], ia1, r[3]);\n")
	p("  r[0] = _mm512_permutex2var_epi8(a0, ib0, b0);\n")
	p("  r[1] = _mm512_permutex2var_epi8(a0, ib1, b0);\n")
	p("  r[2] = _mm512_permutex2var_epi8(a1, ib0, b1);\n")
	p("  r[3] = _mm512_permutex2var_epi8(a1, ib1, b1);\n")
	p("}\n")
}

// writeTranspose16 writes the C of NAME(__m512 r[16]) (AVX-512F), which
// transposes the 16x16 matrix of floats whose rows are r[0..15] in
// place: unpacks and shuffles within 128-bit lanes, then two rounds of
// 128-bit lane shuffles, 64 in all.
func writeTranspose16(p func(string, ...any), name string) {
	p("static inline void %s(__m512 r[16]) {\n", name)
	p("  __m512 t[16], u[16];\n")
	p("  for (int k = 0; k < 8; ++k) {\n")
	p("    t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);\n")
	p("    t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);\n  }\n")
	// u[4k+j], lane l: column 4l+j of rows 4k..4k+3.
	p("  for (int k = 0; k < 4; ++k) {\n")
	p("    u[4 * k] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);\n")
	p("    u[4 * k + 1] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);\n")
	p("    u[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);\n")
	p("    u[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);\n  }\n")
	// Column 4l+j gathers lane l of u[j], u[4+j], u[8+j], u[12+j].
	p("  for (int j = 0; j < 4; ++j) {\n")
	p("    const __m512 v = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), x = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);\n")
	p("    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88), x2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);\n")
	p("    r[j] = _mm512_shuffle_f32x4(v, v2, 0x88);\n")
	p("    r[4 + j] = _mm512_shuffle_f32x4(x, x2, 0x88);\n")
	p("    r[8 + j] = _mm512_shuffle_f32x4(v, v2, 0xDD);\n")
	p("    r[12 + j] = _mm512_shuffle_f32x4(x, x2, 0xDD);\n  }\n}\n")
}
