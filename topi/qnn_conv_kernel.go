package topi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/tir"
)

// qconvParams is one qnn.conv2d's geometry for the CPU kernel.
type qconvParams struct {
	c, h, w, oc, oh, ow    int64
	kh, kw, sh, sw, ph, pw int64
	dh, dw                 int64
	izp                    int64 // as given (int8 data: in [-128, 127])
	signed                 bool  // int8 data, packed as uint8 by adding 128
	isa                    qconvISA
}

// qconvKernel computes one tile of np output pixels of every output
// channel of one image:
//
//	out[o, p] = sum over k = (c, ky, kx) of (x[c, iy, ix] - izp) * w[o, k]
//
// with padded taps reading izp. It packs the tile's taps as
// xp[k/4][pixel][k%4] (uint8; int8 data plus 128), so that one 32-bit
// lane holds four reduction steps of one pixel, multiplies them with
// four weights of a channel broadcast from the OIHW weight (vpdpbusd:
// pixels in lanes, mr channels at a time), and subtracts the zero point
// times the channel's weight sum, computed by the caller. Integer sums
// are exact (K is at most qconvMaxK), so any order gives Eval's values.
type qconvKernel struct {
	p           qconvParams
	k, k4, np   int64
	mr          int64
	tiles       int64
	symbol, src string
}

func newQConvKernel(p qconvParams) (*qconvKernel, error) {
	k := &qconvKernel{p: p}
	k.k = p.c * p.kh * p.kw
	k.k4 = (k.k + 3) / 4
	switch p.isa {
	case qconvAVX512VNNI:
		k.np, k.mr = 32, 8
	case qconvAVXVNNI:
		k.np, k.mr = 16, 4
	default:
		k.np, k.mr = 16, 4
	}
	pix := p.oh * p.ow
	k.tiles = (pix + k.np - 1) / k.np
	if k.k > qconvMaxK || k.k4*k.np*4 > qconvMaxTile {
		return nil, fmt.Errorf("qnn.conv2d kernel: reduction of %d does not fit", k.k)
	}
	src := k.source("KILN_SYMBOL")
	h := sha256.Sum256([]byte(src))
	k.symbol = "kiln_qconv_" + hex.EncodeToString(h[:6])
	k.src = strings.ReplaceAll(src, "KILN_SYMBOL", k.symbol)
	return k, nil
}

// Symbol implements tir.Kernel.
func (k *qconvKernel) Symbol() string { return k.symbol }

// Includes implements tir.Kernel.
func (k *qconvKernel) Includes() []string {
	if k.p.isa == qconvScalar {
		return []string{"<string.h>"}
	}
	return []string{"<immintrin.h>", "<string.h>"}
}

// Source implements tir.Kernel.
func (k *qconvKernel) Source() string { return k.src }

func (k *qconvKernel) source(sym string) string {
	p := k.p
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	xt := "uint8_t"
	if p.signed {
		xt = "int8_t"
	}
	izpu := p.izp
	if p.signed {
		izpu += 128
	}
	pix := p.oh * p.ow
	w("/* qnn.conv2d tile: %dx%dx%d input, %d channels of %dx%d (stride %dx%d, pad %dx%d, dilation %dx%d), %d pixels per tile. */\n",
		p.c, p.h, p.w, p.oc, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw, k.np)
	w("static void %s(const %s* restrict x, const int8_t* restrict w, const int32_t* restrict wsum, int32_t* restrict out, int32_t t) {\n", sym, xt)
	w("  enum { K = %d, K4 = %d, NP = %d, P = %d };\n", k.k, k.k4, k.np, pix)
	w("  uint8_t xp[K4 * NP * 4] __attribute__((aligned(64)));\n")
	w("  int32_t iy0[NP], ix0[NP];\n")
	w("  const int32_t p0 = t * NP;\n")
	w("  const int32_t np = P - p0 < NP ? P - p0 : NP;\n")
	w("  for (int32_t j = 0; j < NP; ++j) {\n")
	w("    const int32_t q = p0 + (j < np ? j : 0);\n")
	w("    iy0[j] = (q / %d) * %d - %d;\n    ix0[j] = (q %% %d) * %d - %d;\n  }\n", p.ow, p.sh, p.ph, p.ow, p.sw, p.pw)
	// Packing: one reduction step k (c, ky, kx) for every pixel of the tile.
	w("  for (int32_t k = 0; k < K4 * 4; ++k) {\n")
	w("    uint8_t* restrict d = xp + (k >> 2) * NP * 4 + (k & 3);\n")
	w("    if (k >= K) {\n      for (int32_t j = 0; j < NP; ++j) d[j * 4] = 0;\n      continue;\n    }\n")
	w("    const int32_t c = k / %d, ky = (k / %d) %% %d, kx = k %% %d;\n", p.kh*p.kw, p.kw, p.kh, p.kw)
	w("    const %s* restrict s = x + (int64_t)c * %d;\n", xt, p.h*p.w)
	w("    const int32_t dy = ky * %d, dx = kx * %d;\n", p.dh, p.dw)
	w("    for (int32_t j = 0; j < NP; ++j) {\n")
	w("      const int32_t iy = iy0[j] + dy, ix = ix0[j] + dx;\n")
	conv := "(uint8_t)s[iy * %d + ix]"
	if p.signed {
		conv = "(uint8_t)((uint8_t)s[iy * %d + ix] ^ 0x80u)"
	}
	w("      d[j * 4] = ((uint32_t)iy < %du && (uint32_t)ix < %du) ? "+conv+" : (uint8_t)%d;\n", p.h, p.w, p.w, izpu)
	w("    }\n  }\n")
	full := k.k / 4
	w("  /* The channel block's weights, four steps per 32-bit word; the\n     last word of a reduction not a multiple of 4 is zero-padded. */\n")
	if full == k.k4 {
		w("#define KILN_QW(o, k4) kiln_qw_%s(w, (o), (k4))\n", sym)
	} else {
		w("#define KILN_QW(o, k4) ((k4) < %d ? kiln_qw_%s(w, (o), (k4)) : kiln_qwt_%s(w, (o)))\n", full, sym, sym)
	}
	switch p.isa {
	case qconvAVX512VNNI:
		k.mainAVX512(w, full, izpu, sym)
	case qconvAVXVNNI:
		k.mainAVX2(w, full, izpu, sym)
	default:
		k.mainScalar(w, full, izpu)
	}
	w("#undef KILN_QW\n}\n")
	pre := fmt.Sprintf("static inline int32_t kiln_qw_%s(const int8_t* restrict w, int32_t o, int32_t k4) {\n"+
		"  int32_t v;\n  memcpy(&v, w + (int64_t)o * %d + k4 * 4, 4);\n  return v;\n}\n", sym, k.k)
	if full != k.k4 {
		pre += fmt.Sprintf("static inline int32_t kiln_qwt_%s(const int8_t* restrict w, int32_t o) {\n"+
			"  int32_t v = 0;\n  memcpy(&v, w + (int64_t)o * %d + %d, %d);\n  return v;\n}\n", sym, k.k, full*4, k.k-full*4)
	}
	return pre + b.String()
}

// mainScalar is the portable C: one channel, one pixel at a time.
func (k *qconvKernel) mainScalar(w func(string, ...any), full, izpu int64) {
	w("  for (int32_t o = 0; o < %d; ++o) {\n", k.p.oc)
	w("    int32_t acc[NP];\n    for (int32_t j = 0; j < NP; ++j) acc[j] = 0;\n")
	w("    for (int32_t k4 = 0; k4 < K4; ++k4) {\n")
	w("      const int32_t b = KILN_QW(o, k4);\n")
	w("      const int8_t* bb = (const int8_t*)&b;\n")
	w("      const uint8_t* a = xp + k4 * NP * 4;\n")
	w("      for (int32_t j = 0; j < NP; ++j)\n")
	w("        acc[j] += (int32_t)a[j * 4] * bb[0] + (int32_t)a[j * 4 + 1] * bb[1] + (int32_t)a[j * 4 + 2] * bb[2] + (int32_t)a[j * 4 + 3] * bb[3];\n")
	w("    }\n")
	w("    const int32_t comp = %d * wsum[o];\n", izpu)
	w("    for (int32_t j = 0; j < np; ++j) out[(int64_t)o * P + p0 + j] = acc[j] - comp;\n  }\n")
	_ = full
}

// mainAVX512 is the AVX-512 VNNI block: 8 channels x 32 pixels in 16
// accumulators, then one channel at a time.
func (k *qconvKernel) mainAVX512(w func(string, ...any), full, izpu int64, sym string) {
	mr := k.mr
	w("  int32_t o = 0;\n")
	w("  for (; o + %d <= %d; o += %d) {\n", mr, k.p.oc, mr)
	for m := int64(0); m < mr; m++ {
		w("    __m512i a%d0 = _mm512_setzero_si512(), a%d1 = _mm512_setzero_si512();\n", m, m)
	}
	w("    for (int32_t k4 = 0; k4 < K4; ++k4) {\n")
	w("      const __m512i x0 = _mm512_load_si512((const void*)(xp + k4 * NP * 4)), x1 = _mm512_load_si512((const void*)(xp + k4 * NP * 4 + 64));\n")
	for m := int64(0); m < mr; m++ {
		w("      { const __m512i b = _mm512_set1_epi32(KILN_QW(o + %d, k4)); a%d0 = _mm512_dpbusd_epi32(a%d0, x0, b); a%d1 = _mm512_dpbusd_epi32(a%d1, x1, b); }\n", m, m, m, m, m)
	}
	w("    }\n")
	w("    const __mmask16 m0 = np >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << np) - 1u);\n")
	w("    const __mmask16 m1 = np >= 32 ? (__mmask16)0xffff : np <= 16 ? (__mmask16)0 : (__mmask16)((1u << (np - 16)) - 1u);\n")
	for m := int64(0); m < mr; m++ {
		w("    { const __m512i c = _mm512_set1_epi32(%d * wsum[o + %d]); int32_t* d = out + (int64_t)(o + %d) * P + p0;\n", izpu, m, m)
		w("      _mm512_mask_storeu_epi32(d, m0, _mm512_sub_epi32(a%d0, c)); _mm512_mask_storeu_epi32(d + 16, m1, _mm512_sub_epi32(a%d1, c)); }\n", m, m)
	}
	w("  }\n")
	w("  for (; o < %d; ++o) {\n", k.p.oc)
	w("    __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();\n")
	w("    for (int32_t k4 = 0; k4 < K4; ++k4) {\n")
	w("      const __m512i b = _mm512_set1_epi32(KILN_QW(o, k4));\n")
	w("      a0 = _mm512_dpbusd_epi32(a0, _mm512_load_si512((const void*)(xp + k4 * NP * 4)), b);\n")
	w("      a1 = _mm512_dpbusd_epi32(a1, _mm512_load_si512((const void*)(xp + k4 * NP * 4 + 64)), b);\n    }\n")
	w("    const __mmask16 m0 = np >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << np) - 1u);\n")
	w("    const __mmask16 m1 = np >= 32 ? (__mmask16)0xffff : np <= 16 ? (__mmask16)0 : (__mmask16)((1u << (np - 16)) - 1u);\n")
	w("    const __m512i c = _mm512_set1_epi32(%d * wsum[o]); int32_t* d = out + (int64_t)o * P + p0;\n", izpu)
	w("    _mm512_mask_storeu_epi32(d, m0, _mm512_sub_epi32(a0, c)); _mm512_mask_storeu_epi32(d + 16, m1, _mm512_sub_epi32(a1, c));\n  }\n")
	_, _ = full, sym
}

// mainAVX2 is the AVX-VNNI block: 4 channels x 16 pixels in 8 ymm
// accumulators; a partial tile is stored through a buffer.
func (k *qconvKernel) mainAVX2(w func(string, ...any), full, izpu int64, sym string) {
	mr := k.mr
	store := func(ind, acc, dst string) {
		w("%sif (np == NP) { _mm256_storeu_si256((__m256i*)(%s), %s0); _mm256_storeu_si256((__m256i*)(%s + 8), %s1); }\n", ind, dst, acc, dst, acc)
		w("%selse { int32_t tmp[16]; _mm256_storeu_si256((__m256i*)tmp, %s0); _mm256_storeu_si256((__m256i*)(tmp + 8), %s1); for (int32_t j = 0; j < np; ++j) (%s)[j] = tmp[j]; }\n", ind, acc, acc, dst)
	}
	w("  int32_t o = 0;\n")
	w("  for (; o + %d <= %d; o += %d) {\n", mr, k.p.oc, mr)
	for m := int64(0); m < mr; m++ {
		w("    __m256i a%d0 = _mm256_setzero_si256(), a%d1 = _mm256_setzero_si256();\n", m, m)
	}
	w("    for (int32_t k4 = 0; k4 < K4; ++k4) {\n")
	w("      const __m256i x0 = _mm256_load_si256((const __m256i*)(xp + k4 * NP * 4)), x1 = _mm256_load_si256((const __m256i*)(xp + k4 * NP * 4 + 32));\n")
	for m := int64(0); m < mr; m++ {
		w("      { const __m256i b = _mm256_set1_epi32(KILN_QW(o + %d, k4)); a%d0 = _mm256_dpbusd_avx_epi32(a%d0, x0, b); a%d1 = _mm256_dpbusd_avx_epi32(a%d1, x1, b); }\n", m, m, m, m, m)
	}
	w("    }\n")
	for m := int64(0); m < mr; m++ {
		w("    { const __m256i c = _mm256_set1_epi32(%d * wsum[o + %d]); a%d0 = _mm256_sub_epi32(a%d0, c); a%d1 = _mm256_sub_epi32(a%d1, c);\n", izpu, m, m, m, m, m)
		store("      ", fmt.Sprintf("a%d", m), fmt.Sprintf("out + (int64_t)(o + %d) * P + p0", m))
		w("    }\n")
	}
	w("  }\n")
	w("  for (; o < %d; ++o) {\n", k.p.oc)
	w("    __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();\n")
	w("    for (int32_t k4 = 0; k4 < K4; ++k4) {\n")
	w("      const __m256i b = _mm256_set1_epi32(KILN_QW(o, k4));\n")
	w("      a0 = _mm256_dpbusd_avx_epi32(a0, _mm256_load_si256((const __m256i*)(xp + k4 * NP * 4)), b);\n")
	w("      a1 = _mm256_dpbusd_avx_epi32(a1, _mm256_load_si256((const __m256i*)(xp + k4 * NP * 4 + 32)), b);\n    }\n")
	w("    const __m256i c = _mm256_set1_epi32(%d * wsum[o]); a0 = _mm256_sub_epi32(a0, c); a1 = _mm256_sub_epi32(a1, c);\n", izpu)
	store("    ", "a", "out + (int64_t)o * P + p0")
	w("  }\n")
	_, _ = full, sym
}

// Eval implements tir.Kernel: the tile's sums of (x - izp) * w, exact.
func (k *qconvKernel) Eval(args []tir.KernelArg) error {
	p := k.p
	if len(args) != 5 {
		return fmt.Errorf("qnn.conv2d kernel: want 5 arguments, got %d", len(args))
	}
	xm, xo, err := args[0].Ptr(p.c * p.h * p.w)
	if err != nil {
		return fmt.Errorf("qnn.conv2d kernel: data: %v", err)
	}
	wm, wo, err := args[1].Ptr(p.oc * k.k)
	if err != nil {
		return fmt.Errorf("qnn.conv2d kernel: weight: %v", err)
	}
	pix := p.oh * p.ow
	om, oo, err := args[3].Ptr(p.oc * pix)
	if err != nil {
		return fmt.Errorf("qnn.conv2d kernel: output: %v", err)
	}
	t := args[4].Int
	for j := int64(0); j < k.np; j++ {
		q := t*k.np + j
		if q >= pix {
			break
		}
		oy, ox := q/p.ow, q%p.ow
		for o := int64(0); o < p.oc; o++ {
			var acc int64
			for c := int64(0); c < p.c; c++ {
				for ky := int64(0); ky < p.kh; ky++ {
					for kx := int64(0); kx < p.kw; kx++ {
						iy, ix := oy*p.sh-p.ph+ky*p.dh, ox*p.sw-p.pw+kx*p.dw
						if iy < 0 || iy >= p.h || ix < 0 || ix >= p.w {
							continue
						}
						xv := int64(xm.Float(xo + (c*p.h+iy)*p.w + ix))
						wv := int64(wm.Float(wo + o*k.k + (c*p.kh+ky)*p.kw + kx))
						acc += (xv - p.izp) * wv
					}
				}
			}
			om.SetFloat(oo+o*pix+q, float64(int32(acc)))
		}
	}
	return nil
}
