package topi

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/tir"
)

// The depthwise kernel's block form (AVX2, AVX-VNNI, AVX-512 VNNI): eight channels
// per call, one in each lane. The row form (qdwRows) puts a row's output
// columns in the lanes, one channel per call; on small maps that leaves
// lanes idle (a 7x7 map's row fills seven of eight) and pays a row's
// layout, tap loop and requantization for every seven outputs, and on
// large ones a stride splits its rows into phases. The block form lays
// the eight channels' input rows out interleaved and padded, centred, as
// float32 (ring[row][col][lane], exact as in the row form: every product
// and partial sum is an integer below 2^24), in a ring of (KH-1)*DH+1
// rows: eight columns of the eight channels are widened, centred,
// converted and transposed (8x8) at a time. Every output pixel of the
// eight channels is then one vector of multiply-adds over the taps,
// whose weights are vectors of the eight channels' weights, whatever the
// stride. The sums are requantized with a bias and a multiplier per lane
// (KILN_SYMBOL_rq8v), transposed back to eight pixels of each channel and
// narrowed to bytes, eight at a time (the float form's lanes kernel,
// dwconv_lanes.go, does the same with float32 data).
//
// mobilenet_v2 (AVX2, 7-bit weights): the first block form, which
// converted its whole padded planes a value at a time and stored a byte
// per channel at a time (only for outputs narrower than 16 columns),
// took 14x14 and 7x7 outputs 39-56 % below the row form's time and was
// 1-3 % slower on 28x28; the ring form's figures are in
// docs/performance.md.

// qdwBlockMaxRing bounds the block form's ring, which lives on the stack
// of the thread running the kernel.
const qdwBlockMaxRing = 32 << 10

// qdwBlockPlaneWidth: outputs narrower than this take the plane variant
// of the block form, which converts its eight channels' whole padded
// planes (at most qdwBlockMaxRing bytes) a value at a time instead of
// rows eight columns at a time, and stores a byte per channel per pixel
// instead of transposing its sums back; on mobilenet_v2's 7x7 outputs
// (960 channels at stride 1, 576 at stride 2 from 14x14) it took 0.042
// and 0.045 ms where the ring took 0.056 and 0.055, while on 14x14 the
// ring was faster (0.055 against 0.062).
const qdwBlockPlaneWidth = 8

// qdwBlock is the block form's geometry: its ring of input rows, or for
// the plane variant (plane) the padded plane, hp x the ring's columns;
// and its channels per call, the ring's lanes: eight, or sixteen under
// AVX-512 VNNI (qnn_dwconv_block512.go).
type qdwBlock struct {
	ring  lanesRing
	plane bool
	hp    int64
	// split is the calls' blocks of output rows of channel blocks
	// (qdwBlockRows).
	split rowSplit
}

// The ring forms' calls each compute a block of output rows of a block of
// channels, row block first (rowSplit), as the convolution kernel's
// tiles and pack calls go, on maps of at least
// qdwBlockSplitPixels: a static split of the calls among threads then
// gives each thread the rows it wrote (the previous convolution's output)
// and those the next convolution reads, instead of every thread reading
// and writing a share of every row. At 2 threads on a 2-core EPYC,
// mobilenet_v2's first convolution took 0.125 ms where the depthwise
// convolution after it read its output by channels, 0.080 ms where
// nothing did. On smaller maps the rows split worse than the channels:
// rows shorter than a cache line leave lines that two threads write at
// every block's edge, in every channel (mobilenet_v2's 28x28 and 14x14
// layers took 0.044 and 0.032 ms by channels, 0.06 and 0.05 in blocks of
// 7 rows), and a block's first row converts (KH-1)*DH+1-SH input rows
// more than the ring would carry over.
const (
	qdwBlockSplitPixels = 56 * 56
	qdwBlockMinRows     = 7
)

// qdwBlockRows is the output rows per call of a ring form on an oh x ow
// map.
func qdwBlockRows(oh, ow int64) int64 {
	if oh*ow < qdwBlockSplitPixels {
		return oh
	}
	return rowBlocks(oh, qdwBlockMinRows)
}

// withSplit is b with its calls' split: the plane variant's calls take
// whole maps, the ring forms' blocks of qdwBlockRows.
func (b qdwBlock) withSplit(p qconvParams) qdwBlock {
	per := p.oh
	if !b.plane {
		per = qdwBlockRows(p.oh, p.ow)
	}
	b.split = rowSplit{groups: b.blocks(p), rows: p.oh, rowsPer: per}
	return b
}

// newQDWBlock returns the block form for p, or false where it does not
// apply.
func newQDWBlock(p qconvParams) (qdwBlock, bool) {
	// Its C is AVX2 with FMA (it needs no dot product); under AVX-512
	// VNNI the row form's 512-bit rows left mobilenet_v2's 14x14 layers
	// at 3-4 GMAC/s (576 channels: 0.30 ms on Zen 5).
	if !p.isa.hasAVX2() {
		return qdwBlock{}, false
	}
	b := qdwBlock{ring: newLanesRing(p.kh, p.kw, p.dh, p.dw, p.sw, p.ow)}
	if p.isa == qconvAVX512VNNI {
		b.ring.lanes = qdwBlockLanes512
	}
	if p.ph < 0 || p.pw < 0 || p.kh*p.kw > qdwRowsMaxTaps || b.ring.bytes() > qdwBlockMaxRing {
		return qdwBlock{}, false
	}
	if b.ring.lanes == qdwBlockLanes512 {
		return b.withSplit(p), true
	}
	if hp := (p.oh-1)*p.sh + (p.kh-1)*p.dh + 1; p.ow < qdwBlockPlaneWidth && hp*b.ring.wpl*dwLanes*4 <= qdwBlockMaxRing {
		b.plane, b.hp = true, hp
	}
	return b.withSplit(p), true
}

// blocks is the channel blocks of an image: channels in blocks of the
// ring's lanes.
func (b qdwBlock) blocks(p qconvParams) int64 { return (p.c + b.ring.lanes - 1) / b.ring.lanes }

// source is the block form's C (named KILN_SYMBOL): the kernel of
// qdwconvKernel with the channel block cb as its last argument.
func (b qdwBlock) source(p qconvParams, epi *qconvEpi) string {
	if b.plane {
		return b.planeSource(p, epi)
	}
	if b.ring.lanes == qdwBlockLanes512 {
		return b.source512(p, epi)
	}
	var s strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&s, format, a...) }
	xt, widen := "uint8_t", "_mm256_cvtepu8_epi32"
	if p.signed {
		xt, widen = "int8_t", "_mm256_cvtepi8_epi32"
	}
	ot := "int32_t"
	if epi != nil {
		ot = epi.outType()
	}
	plane, oplane := p.h*p.w, p.oh*p.ow
	w("/* Depthwise qnn.conv2d, block form: eight of %d channels of %dx%d, %dx%d taps (stride %dx%d, pad %dx%d, dilation %dx%d). */\n",
		p.c, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw)
	w("#if %s\n", p.isa.guard())
	writeTranspose8(w, "KILN_SYMBOL_tr8")
	w("#endif\n")
	b.writeHead(w, p, epi, xt, ot)
	w("#if %s\n", p.isa.guard())
	w("  __m256 wv[KK];\n")
	w("  for (int32_t t = 0; t < KK; ++t) wv[t] = _mm256_loadu_ps(wl[t]);\n")
	if epi != nil {
		w("  const __m256i bv = _mm256_loadu_si256((const __m256i*)(const void*)bl), mv = _mm256_loadu_si256((const __m256i*)(const void*)ml);\n")
		epi.writeLaneFast(w, 8)
	}
	w("#endif\n")
	w("  for (int32_t oy = oy0; oy < oy1; ++oy) {\n")
	w("    const float* rp[%d];\n", p.kh)
	// The padding (and the lanes past the last channel) hold zero, the
	// centred zero point.
	if n := b.ring.writeRow(w, "oy", p.kh, p.sh, p.ph, p.dh, p.pw, p.h, p.w); n > 0 {
		w("      const %s* restrict s = x + (int64_t)c0 * %d + (int64_t)iy * %d;\n", xt, plane, p.w)
		w("#if %s\n", p.isa.guard())
		w("      const __m256i zp = _mm256_set1_epi32(%d);\n", p.izp)
		// col(c, t) converts t columns from c of the eight channels
		// into ring columns PW+c...
		col := func(c string, t int64) {
			w("        __m256 q[8];\n")
			w("        for (int32_t i = 0; i < 8; ++i) {\n")
			if t == 8 {
				w("          const __m128i by = i < nc ? _mm_loadl_epi64((const __m128i*)(const void*)(s + (int64_t)i * %d + %s)) : _mm_setzero_si128();\n", plane, c)
			} else {
				// The t bytes assembled in a register from loads of 4, 2
				// and 1: a memcpy of t into a zeroed word on the stack,
				// reloaded whole, could not take its bytes from the
				// smaller stores and waited for them (half of the kernel's
				// time on mobilenet_v2's 14x14 maps).
				w("          uint64_t u = 0;\n")
				w("          if (i < nc) {\n")
				w("            const uint8_t* restrict q = (const uint8_t*)(const void*)(s + (int64_t)i * %d + %s);\n", plane, c)
				for off, rem := int64(0), t; rem > 0; {
					switch {
					case rem >= 4:
						w("            { uint32_t v; memcpy(&v, q + %d, 4); u |= (uint64_t)v << %d; }\n", off, 8*off)
						off, rem = off+4, rem-4
					case rem >= 2:
						w("            { uint16_t v; memcpy(&v, q + %d, 2); u |= (uint64_t)v << %d; }\n", off, 8*off)
						off, rem = off+2, rem-2
					default:
						w("            u |= (uint64_t)q[%d] << %d;\n", off, 8*off)
						off, rem = off+1, rem-1
					}
				}
				w("          }\n")
				w("          const __m128i by = _mm_cvtsi64_si128((long long)u);\n")
			}
			w("          const __m256i v = %s(by);\n", widen)
			w("          q[i] = i < nc ? _mm256_cvtepi32_ps(_mm256_sub_epi32(v, zp)) : _mm256_setzero_ps();\n")
			w("        }\n")
			w("        KILN_SYMBOL_tr8(q);\n")
			w("        for (int32_t i = 0; i < %d; ++i) _mm256_store_ps(d + (int64_t)(%d + %s + i) * 8, q[i]);\n", t, p.pw, c)
		}
		w("      for (int32_t c = 0; c < %d; c += 8) {\n", n/8*8)
		col("c", 8)
		w("      }\n")
		if t := n % 8; t > 0 {
			w("      {\n")
			col(fmt.Sprint(n/8*8), t)
			w("      }\n")
		}
		w("#else\n")
		w("      for (int32_t i = 0; i < 8; ++i)\n")
		w("        for (int32_t c = 0; c < %d; ++c) d[(int64_t)(%d + c) * 8 + i] = i < nc ? (float)((int32_t)s[(int64_t)i * %d + c] - (%d)) : 0.0f;\n", n, p.pw, plane, p.izp)
		w("#endif\n")
	}
	w("    }\n")
	w("    %s* restrict o = out + (int64_t)c0 * %d + (int64_t)oy * %d;\n", ot, oplane, p.ow)
	w("#if %s\n", p.isa.guard())
	forLanesGroups(p.ow, func(from, to string, nb int64) { b.group(w, p, epi, ot, from, to, nb) })
	w("#else\n")
	writeBlockScalarRow(w, p, epi, ot, 8)
	w("#endif\n")
	w("  }\n}\n")
	return s.String()
}

// writeBlockScalarRow writes the block forms' portable C for output row
// oy: each of the nc channels' columns summed over the taps from the
// ring rows rp (lanes channels interleaved) and the weights wl, then
// requantized (with epi) and stored to the row o.
func writeBlockScalarRow(w func(string, ...any), p qconvParams, epi *qconvEpi, ot string, lanes int64) {
	oplane := p.oh * p.ow
	w("    for (int32_t i = 0; i < nc; ++i)\n")
	w("      for (int32_t ox = 0; ox < %d; ++ox) {\n", p.ow)
	w("        float a = 0.0f;\n")
	w("        for (int32_t ky = 0; ky < %d; ++ky)\n", p.kh)
	w("          for (int32_t kx = 0; kx < %d; ++kx) a += rp[ky][(ox * %d + kx * %d) * %d + i] * wl[ky * %d + kx][i];\n", p.kw, p.sw, p.dw, lanes, p.kw)
	if epi != nil {
		w("        o[(int64_t)i * %d + ox] = (%s)KILN_SYMBOL_rq((int32_t)a, bl[i], ml[i]);\n", oplane, ot)
	} else {
		w("        o[(int64_t)i * %d + ox] = (int32_t)a;\n", oplane)
	}
	w("      }\n")
}

// group writes the loop over groups of eight output columns in
// [from, to) with nb valid columns per group: eight accumulators (one per
// column, eight channels each), the taps in order, the requantization per
// column, a transpose to eight columns per channel, and a store of nb of
// them per channel.
func (b qdwBlock) group(w func(string, ...any), p qconvParams, epi *qconvEpi, ot, from, to string, nb int64) {
	writeLanesTaps(w, from, to, p.kh, p.kw, p.sw, p.dw, nb, fmaGuard)
	// The sums are integers: the conversion is exact.
	w("      for (int32_t i = 0; i < 8; ++i) {\n")
	w("        __m256i r = _mm256_cvtps_epi32(a[i]);\n")
	if epi != nil {
		w("        r = KILN_SYMBOL_rq8vf(r, bv, mv, mvo, fast);\n")
	}
	w("        a[i] = _mm256_castsi256_ps(r);\n")
	w("      }\n")
	w("      KILN_SYMBOL_tr8(a);\n")
	w("      for (int32_t i = 0; i < nc; ++i) {\n")
	w("        %s* restrict d = o + (int64_t)i * %d + ox;\n", ot, p.oh*p.ow)
	w("        const __m256i r = _mm256_castps_si256(a[i]);\n")
	if epi != nil {
		// The values are within the output type's range: the
		// saturating packs are exact.
		pack := epi.pack16()
		w("        const __m128i h = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));\n")
		w("        const __m128i v = %s(h, h);\n", pack)
		if nb == 8 {
			w("        _mm_storel_epi64((__m128i*)(void*)d, v);\n")
		} else {
			w("        const uint64_t u = (uint64_t)_mm_cvtsi128_si64(v);\n")
			w("        memcpy(d, &u, %d);\n", nb)
		}
	} else if nb == 8 {
		w("        _mm256_storeu_si256((__m256i*)(void*)d, r);\n")
	} else {
		w("        _mm256_maskstore_epi32((int*)(void*)d, _mm256_setr_epi32(%s), r);\n", laneMask(nb))
	}
	w("      }\n")
	w("    }\n")
}

// planeSource is the plane variant's C: the eight channels' whole padded
// planes converted a value at a time, each output pixel requantized and
// stored a byte per channel.
func (b qdwBlock) planeSource(p qconvParams, epi *qconvEpi) string {
	var s strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&s, format, a...) }
	xt := "uint8_t"
	if p.signed {
		xt = "int8_t"
	}
	ot := "int32_t"
	if epi != nil {
		ot = epi.outType()
	}
	taps := p.kh * p.kw
	w("/* Depthwise qnn.conv2d, block form (whole planes): eight of %d channels of %dx%d, %dx%d taps (stride %dx%d, pad %dx%d, dilation %dx%d). */\n",
		p.c, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw)
	if epi != nil {
		w("static void KILN_SYMBOL(const %s* restrict x, const int8_t* restrict w, const int32_t* restrict bias, const int32_t* restrict mult, %s* restrict out, int32_t cb) {\n", xt, ot)
	} else {
		w("static void KILN_SYMBOL(const %s* restrict x, const int8_t* restrict w, %s* restrict out, int32_t cb) {\n", xt, ot)
	}
	w("  typedef float v8sf __attribute__((vector_size(32)));\n")
	w("  typedef int32_t v8si __attribute__((vector_size(32)));\n")
	w("  enum { HP = %d, WP = %d, KK = %d };\n", b.hp, b.ring.wpl, taps)
	w("  float buf[HP * WP * 8] __attribute__((aligned(32)));\n")
	w("  const int32_t c0 = cb * 8, nc = %d - c0 < 8 ? %d - c0 : 8;\n", p.c, p.c)
	// The padding (and the lanes past the last channel) hold zero, the
	// centred zero point.
	w("  memset(buf, 0, sizeof buf);\n")
	w("  for (int32_t i = 0; i < nc; ++i) {\n")
	w("    const %s* restrict s = x + (int64_t)(c0 + i) * %d;\n", xt, p.h*p.w)
	// Input rows and columns inside the padded plane: iy + PH < HP.
	w("    for (int32_t iy = 0; iy < %d; ++iy) {\n", min(p.h, b.hp-p.ph))
	w("      float* restrict d = buf + ((int64_t)(iy + %d) * WP + %d) * 8 + i;\n", p.ph, p.pw)
	w("      for (int32_t ix = 0; ix < %d; ++ix) d[ix * 8] = (float)((int32_t)s[iy * %d + ix] - (%d));\n", min(p.w, b.ring.wpl-p.pw), p.w, p.izp)
	w("    }\n  }\n")
	w("  v8sf wv[KK];\n")
	w("  for (int32_t t = 0; t < KK; ++t) {\n")
	w("    float l[8];\n")
	w("    for (int32_t i = 0; i < 8; ++i) l[i] = i < nc ? (float)w[(int64_t)(c0 + i) * KK + t] : 0.0f;\n")
	w("    memcpy(&wv[t], l, sizeof l);\n  }\n")
	if epi != nil {
		epi.writeLaneParams(w, 8)
		w("#if %s\n", p.isa.guard())
		w("  __m256i bv, mv;\n  memcpy(&bv, bl, sizeof bl);\n  memcpy(&mv, ml, sizeof ml);\n")
		epi.writeLaneFast(w, 8)
		w("#endif\n")
	}
	w("  for (int32_t oy = 0; oy < %d; ++oy)\n", p.oh)
	w("  for (int32_t ox = 0; ox < %d; ++ox) {\n", p.ow)
	w("    const float* restrict src = buf + ((int64_t)oy * %d * WP + (int64_t)ox * %d) * 8;\n", p.sh, p.sw)
	w("    v8sf a = {0, 0, 0, 0, 0, 0, 0, 0};\n")
	w("    for (int32_t ky = 0; ky < %d; ++ky)\n", p.kh)
	w("      for (int32_t kx = 0; kx < %d; ++kx) {\n", p.kw)
	w("        v8sf h;\n")
	w("        memcpy(&h, src + ((int64_t)ky * %d * WP + kx * %d) * 8, sizeof h);\n", p.dh, p.dw)
	w("#if %s\n", fmaGuard)
	w("        a = (v8sf)_mm256_fmadd_ps((__m256)h, (__m256)wv[ky * %d + kx], (__m256)a);\n", p.kw)
	w("#else\n")
	w("        a += h * wv[ky * %d + kx];\n", p.kw)
	w("#endif\n")
	w("      }\n")
	w("    const v8si ai = __builtin_convertvector(a, v8si);\n")
	w("    int32_t r[8];\n")
	if epi != nil {
		w("#if %s\n", p.isa.guard())
		w("    __m256i q;\n    memcpy(&q, &ai, sizeof q);\n")
		// Stored a byte at a time without saturation: clamped in full.
		w("    q = KILN_SYMBOL_sat8(KILN_SYMBOL_rq8vf(q, bv, mv, mvo, fast));\n")
		w("    memcpy(r, &q, sizeof r);\n")
		w("#else\n")
		w("    memcpy(r, &ai, sizeof r);\n")
		w("    for (int32_t i = 0; i < 8; ++i) r[i] = KILN_SYMBOL_rq(r[i], bl[i], ml[i]);\n")
		w("#endif\n")
	} else {
		w("    memcpy(r, &ai, sizeof r);\n")
	}
	w("    %s* restrict d = out + (int64_t)c0 * %d + oy * %d + ox;\n", ot, p.oh*p.ow, p.ow)
	w("    for (int32_t i = 0; i < nc; ++i) d[(int64_t)i * %d] = (%s)r[i];\n", p.oh*p.ow, ot)
	w("  }\n}\n")
	return s.String()
}

// evalBlock is the block form's Eval: call u's rows of the channels of
// its block (split), each as the row form's kernel computes them
// (evalChannel).
func (k *qdwconvKernel) evalBlock(args []tir.KernelArg, u int64) error {
	b := k.block
	if u < 0 || u >= b.split.calls() {
		return fmt.Errorf("depthwise qnn.conv2d kernel: call %d of %d", u, b.split.calls())
	}
	cb, oy0, oy1 := b.split.rowRange(u)
	n := b.ring.lanes
	for c := cb * n; c < min(cb*n+n, k.p.c); c++ {
		if err := k.evalChannel(args, c, oy0, oy1); err != nil {
			return err
		}
	}
	return nil
}

// writeHead writes the ring forms' function head for lanes channels
// per call (the ring's): its signature (x of C type xt, out of ot, the
// call u), the call's channel block cb and output rows [oy0, oy1)
// (split), the ring, the block's channels c0 and nc, their weights
// as float32 lanes wl[KK][lanes] and, with epi, their bias and
// multiplier lanes.
func (b qdwBlock) writeHead(w func(string, ...any), p qconvParams, epi *qconvEpi, xt, ot string) {
	n := b.ring.lanes
	if epi != nil {
		w("static void KILN_SYMBOL(const %s* restrict x, const int8_t* restrict w, const int32_t* restrict bias, const int32_t* restrict mult, %s* restrict out, int32_t u) {\n", xt, ot)
	} else {
		w("static void KILN_SYMBOL(const %s* restrict x, const int8_t* restrict w, %s* restrict out, int32_t u) {\n", xt, ot)
	}
	w("%s", b.split.decl("cb", "oy0", "oy1"))
	b.ring.writeDecl(w, p.kh*p.kw)
	if p.c%n == 0 {
		// Every block is whole: the loops over its channels unroll.
		w("  const int32_t c0 = cb * %d, nc = %d;\n", n, n)
	} else {
		w("  const int32_t c0 = cb * %d, nc = %d - c0 < %d ? %d - c0 : %d;\n", n, p.c, n, p.c, n)
	}
	w("  float wl[KK][%d];\n", n)
	w("  for (int32_t t = 0; t < KK; ++t)\n")
	w("    for (int32_t i = 0; i < %d; ++i) wl[t][i] = i < nc ? (float)w[(int64_t)(c0 + i) * KK + t] : 0.0f;\n", n)
	if epi != nil {
		epi.writeLaneParams(w, n)
	}
}

// writeLaneFast writes, after writeLaneParams and the vectors bv and mv
// (of lanes 8 or 16), the odd lanes' multipliers mvo and whether every
// lane's multiplier rules ties out (fast: KILN_SYMBOL_rqn), for
// KILN_SYMBOL_rq8vf or KILN_SYMBOL_q16.
func (e *qconvEpi) writeLaneFast(w func(string, ...any), lanes int64) {
	if lanes == 16 {
		w("  const __m512i mvo = _mm512_srli_epi64(mv, 32);\n")
	} else {
		w("  const __m256i mvo = _mm256_srli_epi64(mv, 32);\n")
	}
	if e.shift < 33 {
		w("  const int fast = 0;\n")
		return
	}
	w("  int fast = 1;\n  for (int32_t i = 0; i < %d; ++i) fast &= KILN_SYMBOL_rqn(ml[i]);\n", lanes)
}

// writeLaneParams writes the block form's bias and multiplier per lane,
// bl[lanes] and ml[lanes], for the channels c0 + i (the last channel's
// for lanes past nc).
func (e *qconvEpi) writeLaneParams(w func(string, ...any), lanes int64) {
	m := "mult[0]"
	if e.perChannel {
		m = "mult[c]"
	}
	w("  int32_t bl[%d], ml[%d];\n", lanes, lanes)
	w("  for (int32_t i = 0; i < %d; ++i) {\n", lanes)
	w("    const int32_t c = c0 + (i < nc ? i : 0);\n")
	w("    bl[i] = bias[c];\n    ml[i] = %s;\n  }\n", m)
}
