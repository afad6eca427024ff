package topi

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/tir"
)

// The depthwise kernel's block form (AVX2 and AVX-VNNI): eight channels
// per call, one in each lane. The row form (qdwRows) puts a row's output
// columns in the lanes, one channel per call; on small maps that leaves
// lanes idle (a 7x7 map's row fills seven of eight) and pays a row's
// layout, tap loop and requantization for every seven outputs, which made
// mobilenet_v2's int8 depthwise layers about a third of its time. The
// block form lays the eight channels' planes out interleaved and padded,
// centred, as float32 (buf[y][x][lane], exact as in the row form: every
// product and partial sum is an integer below 2^24), so that every
// output pixel of the eight channels is one vector of multiply-adds over
// the taps, whose weights are vectors of the eight channels' weights. The
// sums are requantized with a bias and a multiplier per lane
// (KILN_SYMBOL_rq8v) and stored a channel at a time.
//
// It applies to outputs narrower than qdwBlockMaxWidth whose interleaved
// input planes fit qdwBlockMaxBuffer, with at most qdwRowsMaxTaps taps.
// mobilenet_v2 (AVX2, 7-bit weights), per layer: 14x14 and 7x7 outputs
// 39-56 % less time (960 channels on 7x7 0.21 -> 0.093-0.096 ms, 576 on
// 14x14 0.37-0.38 -> 0.22, 192 at stride 2 from 28x28 0.20 -> 0.12);
// 28x28 outputs were 1-3 % slower (the row form's rows of 28 fill
// their vectors but for four lanes, and the block form stores a byte
// per channel at a time), so wider outputs keep the row form.

// qdwBlockMaxWidth bounds the output width of the block form.
const qdwBlockMaxWidth = 16

// qdwBlockMaxBuffer bounds the block form's interleaved planes, which
// live on the stack of the thread running the kernel.
const qdwBlockMaxBuffer = 32 << 10

// qdwBlock is the block form's geometry: the padded plane, Hp x Wp.
type qdwBlock struct {
	hp, wp int64
}

// newQDWBlock returns the block form for p, or false where it does not
// apply.
func newQDWBlock(p qconvParams) (qdwBlock, bool) {
	if p.isa != qconvAVX2 && p.isa != qconvAVXVNNI {
		return qdwBlock{}, false
	}
	b := qdwBlock{hp: (p.oh-1)*p.sh + (p.kh-1)*p.dh + 1, wp: (p.ow-1)*p.sw + (p.kw-1)*p.dw + 1}
	if p.ow >= qdwBlockMaxWidth || p.ph < 0 || p.pw < 0 || p.kh*p.kw > qdwRowsMaxTaps || b.hp*b.wp*8*4 > qdwBlockMaxBuffer {
		return qdwBlock{}, false
	}
	return b, true
}

// blocks is the calls per image: channels in eights.
func (b qdwBlock) blocks(p qconvParams) int64 { return (p.c + 7) / 8 }

// source is the block form's C (named KILN_SYMBOL): the kernel of
// qdwconvKernel with the channel block cb as its last argument.
func (b qdwBlock) source(p qconvParams, epi *qconvEpi) string {
	var s strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&s, format, a...) }
	xt := "uint8_t"
	if p.signed {
		xt = "int8_t"
	}
	ot := "int32_t"
	if epi != nil {
		ot = map[bool]string{true: "int8_t", false: "uint8_t"}[epi.signed]
	}
	taps := p.kh * p.kw
	w("/* Depthwise qnn.conv2d, block form: eight of %d channels of %dx%d, %dx%d taps (stride %dx%d, pad %dx%d, dilation %dx%d). */\n",
		p.c, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw)
	if epi != nil {
		w("static void KILN_SYMBOL(const %s* restrict x, const int8_t* restrict w, const int32_t* restrict bias, const int32_t* restrict mult, %s* restrict out, int32_t cb) {\n", xt, ot)
	} else {
		w("static void KILN_SYMBOL(const %s* restrict x, const int8_t* restrict w, %s* restrict out, int32_t cb) {\n", xt, ot)
	}
	w("  typedef float v8sf __attribute__((vector_size(32)));\n")
	w("  typedef int32_t v8si __attribute__((vector_size(32)));\n")
	w("  enum { HP = %d, WP = %d, KK = %d };\n", b.hp, b.wp, taps)
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
	w("      for (int32_t ix = 0; ix < %d; ++ix) d[ix * 8] = (float)((int32_t)s[iy * %d + ix] - (%d));\n", min(p.w, b.wp-p.pw), p.w, p.izp)
	w("    }\n  }\n")
	w("  v8sf wv[KK];\n")
	w("  for (int32_t t = 0; t < KK; ++t) {\n")
	w("    float l[8];\n")
	w("    for (int32_t i = 0; i < 8; ++i) l[i] = i < nc ? (float)w[(int64_t)(c0 + i) * KK + t] : 0.0f;\n")
	w("    memcpy(&wv[t], l, sizeof l);\n  }\n")
	if epi != nil {
		w("  int32_t bl[8], ml[8];\n")
		w("  for (int32_t i = 0; i < 8; ++i) {\n")
		w("    const int32_t c = c0 + (i < nc ? i : 0);\n")
		if epi.perChannel {
			w("    bl[i] = bias[c];\n    ml[i] = mult[c];\n  }\n")
		} else {
			w("    bl[i] = bias[c];\n    ml[i] = mult[0];\n  }\n")
		}
		w("#if %s\n", p.isa.guard())
		w("  __m256i bv, mv;\n  memcpy(&bv, bl, sizeof bl);\n  memcpy(&mv, ml, sizeof ml);\n")
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
		w("    q = KILN_SYMBOL_rq8v(q, bv, mv);\n")
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

// evalBlock is the block form's Eval: the channels of block cb, each as
// the row form's kernel computes it (evalChannel).
func (k *qdwconvKernel) evalBlock(args []tir.KernelArg, cb int64) error {
	for c := cb * 8; c < min(cb*8+8, k.p.c); c++ {
		if err := k.evalChannel(args, c); err != nil {
			return err
		}
	}
	return nil
}
