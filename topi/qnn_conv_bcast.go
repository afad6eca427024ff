package topi

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tir"
)

// The broadcast form of the qnn.conv2d_requantize CPU kernel (AVX-512
// VNNI; on 256-bit vectors, AVX-VNNI and AVX2, see main256): output
// channels in the vector lanes, each pixel's four-channel
// word broadcast, the way a GEMM kernel takes the output channels as its
// columns. The pixel forms (qconvKernel) put pixels in the lanes, so a
// map whose rows do not fill their 32 lanes leaves lanes idle (7x7: 49
// pixels in 64 lanes, 14x14 and 28x28: a seventh idle), and on small maps
// each tile reads the whole weight again. Here the lanes are sixteen
// output channels, always full (the weight's channels are a multiple of
// 16), and a tile's pixels are any MR consecutive output pixels, rows or
// not, each read in place from the padded input planes (the direct
// form's layout, newQConvPlanes: one word per pixel and tap, whatever
// the stride). A tile is MR pixels times up to 48 output channels: MR*NZ
// accumulators (MR up to 8, NZ up to 3), three weight vectors and one
// broadcast per tap, with the weight in OIHW4i16o (the pass
// alter_qconv_layout packs it at compile time) so that a tap's sixteen
// channels are one 64-byte load. Tiles go channel block first, so that
// a block's weight stays in cache while all the pixels pass.
//
// The epilogue requantizes sixteen channels of a pixel per vector
// (per-channel biases and multipliers as vectors), narrows eight pixels'
// vectors to 128 bytes with two pk4, transposes them to eight pixels of
// each channel with two VBMI byte permutations (without VBMI, through a
// buffer) and stores each channel's run of pixels with a masked store:
// the tile's pixels are consecutive in the NCHW output.
//
// resnet18 int8 in the model on Zen 5 (1 thread), against the pixel
// forms (ONNX Runtime's node profile in brackets): 512 -> 512 3x3 on 7x7
// 0.31 against 0.54 ms (0.395); 256 -> 256 on 14x14 0.28 against 0.38
// (0.30); 128 -> 128 on 28x28 0.28 against 0.38 (0.29); 64 -> 64 on
// 56x56 0.32 against 0.37 (0.31).

// QConvBroadcastChoice is target t's choice of the broadcast form for
// the pass alter_qconv_layout, or nil where t's processor has none of
// the form's instruction sets: AVX-512 VNNI (with BW and VL), AVX-VNNI,
// AVX2 (the 256-bit form, qconvBcast256). It takes the form for at least
// 32 output channels. With AVX-512 VNNI (where a block of one group of
// sixteen reads a broadcast per multiplication) it takes it where the
// lanes the pixel forms leave idle outweigh the transposing epilogue:
// reduction K times idle lanes at least qconvBcastGain times the pixels;
// on 256-bit vectors by qconvBcast256Gain (AVX2 only with bounded weight
// pairs). On Zen 5 with mobilenet_v2's 1x1 convolutions the
// broadcast form took 5 % longer with K = 64 on 14x14 (28 idle lanes of
// 224), as long with K = 96, 6 % less with K = 576, and 2.5 % longer
// with K = 144 on 28x28 (16 idle lanes of 800); 13-14 % less on every
// 7x7 map (15 of 64 idle).
func QConvBroadcastChoice(t *targets.Target) func(data, weight, out ir.Shape, attrs ir.Attrs) bool {
	if t == nil {
		return nil
	}
	isa := qconvISAFor(t.Processor().Features)
	if isa != qconvAVX512VNNI && isa != qconvAVXVNNI && isa != qconvAVX2 {
		return nil
	}
	proc := t.Processor()
	return func(data, weight, out ir.Shape, attrs ir.Attrs) bool {
		if len(data) != 4 || len(weight) != 5 || len(out) != 4 || out[1] < 32 || out[1]%16 != 0 {
			return false
		}
		p, err := qconvParamsOf(proc, data, out, weight[2], weight[3], attrs, false)
		if err != nil || newQConvPlanes(p, 0) == nil {
			return false
		}
		if isa != qconvAVX512VNNI {
			return qconvBcast256(p) && qconvBcast256Gain(p, weight)
		}
		// The pixel forms' lanes: tiles of 32 (the direct form's, or the
		// usual form's).
		pix := p.oh * p.ow
		lanes := (pix + 31) / 32 * 32
		if d := qconvDirectFor(p, 32); d != nil {
			lanes = d.tiles() * 32
		}
		k := weight[1] * 4 * weight[2] * weight[3]
		return k*(lanes-pix) >= qconvBcastGain*pix
	}
}

// qconvBcast256Gain is QConvBroadcastChoice's rule for the 256-bit
// form: a reduction (weight channels x 4 x taps) of at least
// qconvBcast256MinK, and without VNNI a map of at most
// qconvBcastAVX2MaxPix pixels.
func qconvBcast256Gain(p qconvParams, weight ir.Shape) bool {
	if weight[1]*4*weight[2]*weight[3] < qconvBcast256MinK {
		return false
	}
	return p.isa == qconvAVXVNNI || p.oh*p.ow <= qconvBcastAVX2MaxPix
}

// qconvBcast256MinK is the least reduction for which the 256-bit
// broadcast form pays for its transposing epilogue. With AVX-VNNI on an
// Emerald Rapids core (in-model profile minima, 7-bit weights), it took
// the pixel forms' time from 0.94 to 0.74 ms on resnet18's 64-channel 3x3
// convolutions on 56x56, 1.10 to 0.73 on the 256-channel ones on 14x14,
// 0.67 to 0.50 on 256 -> 512 stride 2, and mobilenet_v2's 1x1 ones of
// K = 160 and 960 on 7x7 by 12 and 23 %; with K = 96 on 14x14 it took 16 %
// longer, with K = 16 to 32 40-60 % longer (its epilogue requantizes
// and transposes every sixteen channels of MR pixels).
const qconvBcast256MinK = 128

// qconvBcastAVX2MaxPix is the largest map the 256-bit form takes without
// VNNI, where each multiply-add is three instructions in either form
// (vpmaddubsw, vpmaddwd, vpaddd) and the pixel forms keep their vectors
// busy on larger maps. Measured there (AVX2 code on the Emerald Rapids
// core, in-model profile minima): resnet18's 512-channel 3x3 on 7x7 2.18
// -> 2.01 ms and 256 -> 512 stride 2 1.11 -> 1.07; on 14x14 1.61 -> 1.89,
// on 28x28 1.60 -> 1.66, squeezenet1_1's 3x3 ones on 27x27 and 13x13
// 4-8 % longer.
const qconvBcastAVX2MaxPix = 64

// qconvBcastGain is QConvBroadcastChoice's threshold: the broadcast form
// where K times the pixel forms' idle lanes is at least this many times
// the pixels.
const qconvBcastGain = 14

// qconvBlock is a block of output channels of the broadcast form: nz
// groups of sixteen from group o16.
type qconvBlock struct{ o16, nz int64 }

// qconvBcastKernel is the broadcast form's tile kernel: tile t computes
// block t / ptiles's channels of pixels [g*mr, g*mr + mr), g = t %
// ptiles, of one image.
type qconvBcastKernel struct {
	base        *qconvKernel // p, epi, c4, k4: the requantization's and the dot product's helpers
	dir         *qconvDirect // the padded planes' geometry
	mr          int64        // pixels per tile
	blocks      []qconvBlock
	ptiles      int64 // pixel tiles per block
	symbol, src string
}

// qconvBcastMR picks the pixels per tile among mrs (largest first): the
// least cost of the tiles, counting each tile's weight loads and
// epilogue as one pixel more (AVX-512, of 8, 7 or 6: a map of 49 pixels
// takes 7 tiles of 7, one of 169 22 tiles of 8), the larger on a tie.
func qconvBcastMR(pix int64, mrs []int64) int64 {
	best, cost := mrs[0], int64(-1)
	for _, mr := range mrs {
		if c := (pix + mr - 1) / mr * (mr + 1); cost < 0 || c < cost {
			best, cost = mr, c
		}
	}
	return best
}

// qconvBcastMRs512 is the AVX-512 tile's choice of pixels: MR x NZ
// accumulators (up to 8 x 3), three weight vectors and a broadcast in 32
// registers.
var qconvBcastMRs512 = []int64{8, 7, 6}

// qconvBcast256 reports whether p's broadcast form is the 256-bit one:
// AVX-VNNI, or AVX2 with the weight pairs' bound that lets vpmaddubsw
// sum without saturating (qconvParams.maddubs).
func qconvBcast256(p qconvParams) bool {
	return p.isa == qconvAVXVNNI || (p.isa == qconvAVX2 && p.maddubs)
}

// qconvBcastMRs256 is the 256-bit tile's choice of pixels, for one group
// of sixteen channels (two vectors) in 16 registers: with vpdpbusd, 2 x
// MR accumulators, two weight vectors and a broadcast (MR up to 6);
// vpmaddubsw also needs its product and a vector of ones (MR up to 5).
func qconvBcastMRs256(p qconvParams) []int64 {
	if p.isa == qconvAVXVNNI {
		return []int64{6, 5, 4}
	}
	return []int64{5, 4}
}

// qconvBcastBlocks256 is the 256-bit form's blocks: one group of sixteen
// channels each (two vectors, each broadcast feeding both).
func qconvBcastBlocks256(n16 int64) []qconvBlock {
	bs := make([]qconvBlock, n16)
	for i := range bs {
		bs[i] = qconvBlock{int64(i), 1}
	}
	return bs
}

// qconvBcastBlocks cuts n16 groups of sixteen output channels into
// blocks of three, ending in two blocks of two (or one of two) where
// three does not divide them: a block of one group reads a broadcast per
// multiplication.
func qconvBcastBlocks(n16 int64) []qconvBlock {
	var bs []qconvBlock
	o := int64(0)
	for n16-o > 0 {
		nz := min(int64(3), n16-o)
		if n16-o == 4 {
			nz = 2
		}
		bs = append(bs, qconvBlock{o, nz})
		o += nz
	}
	return bs
}

func newQConvBcastKernel(p qconvParams, epi *qconvEpi) (*qconvBcastKernel, error) {
	if epi == nil || p.oc%16 != 0 {
		return nil, fmt.Errorf("qnn.conv2d broadcast form: wants a requantized output of a multiple of 16 channels, got %d", p.oc)
	}
	base := &qconvKernel{p: p, epi: epi}
	base.c4 = (p.c + 3) / 4
	base.k4 = base.c4 * p.kh * p.kw
	if base.k4*4 > qconvMaxK {
		return nil, fmt.Errorf("qnn.conv2d kernel: reduction of %d does not fit", base.k4*4)
	}
	dir := newQConvPlanes(p, 0)
	if dir == nil {
		return nil, fmt.Errorf("qnn.conv2d broadcast form: no padded layout for input %dx%dx%d, output %dx%d", p.c, p.h, p.w, p.oh, p.ow)
	}
	pix := p.oh * p.ow
	mrs, blocks := qconvBcastMRs512, qconvBcastBlocks(p.oc/16)
	if qconvBcast256(p) {
		mrs, blocks = qconvBcastMRs256(p), qconvBcastBlocks256(p.oc/16)
	}
	k := &qconvBcastKernel{base: base, dir: dir, mr: qconvBcastMR(pix, mrs), blocks: blocks}
	k.ptiles = (pix + k.mr - 1) / k.mr
	k.symbol, k.src = kernelSymbol("kiln_qconv_bc_", k.source())
	return k, nil
}

// vpg is the vectors per group of sixteen channels: 2 on 256-bit vectors
// (qconvBcast256), else 1 (AVX-512, and the portable C).
func (k *qconvBcastKernel) vpg() int64 {
	if qconvBcast256(k.base.p) {
		return 2
	}
	return 1
}

// tiles is the number of tile calls per image.
func (k *qconvBcastKernel) tiles() int64 { return int64(len(k.blocks)) * k.ptiles }

// Symbol implements tir.Kernel.
func (k *qconvBcastKernel) Symbol() string { return k.symbol }

// Includes implements tir.Kernel.
func (k *qconvBcastKernel) Includes() []string { return k.base.Includes() }

// Source implements tir.Kernel.
func (k *qconvBcastKernel) Source() string { return k.src }

// nzs is the distinct block sizes, largest first.
func (k *qconvBcastKernel) nzs() []int64 {
	var out []int64
	for nz := int64(3); nz >= 1; nz-- {
		for _, b := range k.blocks {
			if b.nz == nz {
				out = append(out, nz)
				break
			}
		}
	}
	return out
}

func (k *qconvBcastKernel) source() string {
	p, e, d := k.base.p, k.base.epi, k.dir
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	// Without a vector form for the processor (AVX2 whose weight pairs
	// may saturate vpmaddubsw, Arm), only the portable C: the layout pass
	// does not choose the form there (QConvBroadcastChoice).
	guard := ""
	if p.isa == qconvAVX512VNNI || k.vpg() == 2 {
		guard = p.isa.guard()
	}
	b.WriteString(k.base.epilogueHelpers())
	if guard != "" {
		w("#if %s\n", guard)
		b.WriteString(k.base.dotHelper())
		for _, nz := range k.nzs() {
			k.mac(w, nz)
		}
		if p.isa == qconvAVX512VNNI {
			// The byte transposes: output byte c*8 + j (channel c, pixel
			// j) from byte j*16 + c of the two narrowed vectors; the
			// second vector for channels 8 to 15.
			var ix []string
			for h := 0; h < 2; h++ {
				for c := 0; c < 8; c++ {
					for j := 0; j < 8; j++ {
						ix = append(ix, fmt.Sprint(j*16+c+8*h))
					}
				}
			}
			w("static const uint8_t KILN_SYMBOL_tix[128] __attribute__((aligned(64), unused)) = {%s};\n", strings.Join(ix, ", "))
		}
		w("#endif\n")
	}
	w("/* qnn.conv2d broadcast tile: %dx%dx%d input, %d channels of %dx%d (stride %dx%d, pad %dx%d, dilation %dx%d), %d pixels by up to 48 channels per tile. */\n",
		p.c, p.h, p.w, p.oc, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw, k.mr)
	w("static void KILN_SYMBOL(const uint8_t* restrict x4, const int8_t* restrict w, const int32_t* restrict wsum, const int32_t* restrict bias, const int32_t* restrict mult, %s* restrict out, int32_t t) {\n", e.outType())
	w("  enum { K4 = %d, P = %d, MR = %d, PT = %d, NB = %d };\n", k.base.k4, p.oh*p.ow, k.mr, k.ptiles, len(k.blocks))
	d.taps(w, p)
	var bo, bz []int64
	for _, bl := range k.blocks {
		bo, bz = append(bo, bl.o16), append(bz, bl.nz)
	}
	w("  static const int32_t bo[NB] = {%s}, bz[NB] = {%s};\n", joinInts(bo), joinInts(bz))
	w("  const int32_t o16 = bo[t / PT], nz = bz[t / PT], q0 = t %% PT * MR;\n")
	w("  const int32_t np = P - q0 < MR ? P - q0 : MR;\n")
	// po[j]: pixel j's first word in bytes; pixels past the map repeat
	// the last (computed, not stored).
	w("  int32_t po[MR];\n")
	w("  for (int32_t j = 0; j < MR; ++j) {\n")
	w("    const int32_t q = q0 + (j < np ? j : np - 1);\n")
	w("    po[j] = (q / %d * %d + q %% %d) * 4;\n", p.ow, d.wp, p.ow)
	w("  }\n")
	if guard != "" {
		w("#if %s\n", guard)
		if k.vpg() == 2 {
			k.main256(w)
		} else {
			k.main512(w)
		}
		w("#else\n")
	}
	k.mainScalar(w)
	if guard != "" {
		w("#endif\n")
	}
	w("}\n")
	return b.String()
}

// mac writes KILN_SYMBOL_macNZ: the sums of MR pixels by nz groups of
// sixteen channels (weight from wb, the block's first group), each group
// vpg vectors, into buf[j*nz*vpg + v], the accumulators in registers (a
// function of its own, as mainAVX512's: in one loop nest with the
// epilogue gcc keeps copies on the stack).
func (k *qconvBcastKernel) mac(w func(string, ...any), nz int64) {
	p := k.base.p
	vt, zero, load, set1 := "__m512i", "_mm512_setzero_si512()", "_mm512_loadu_si512((const void*)(wk + %d))", "_mm512_set1_epi32"
	if k.vpg() == 2 {
		vt, zero, load, set1 = "__m256i", "_mm256_setzero_si256()", "_mm256_loadu_si256((const __m256i*)(const void*)(wk + %d))", "_mm256_set1_epi32"
	}
	nv := nz * k.vpg()
	w("static __attribute__((noinline)) void KILN_SYMBOL_mac%d(const uint8_t* restrict x4, const int8_t* restrict wb, const int32_t* restrict po, %s* restrict buf) {\n", nz, vt)
	w("  enum { K4 = %d };\n", k.base.k4)
	k.dir.taps(w, p)
	for j := int64(0); j < k.mr; j++ {
		w("  const int64_t q%d = po[%d];\n", j, j)
	}
	for j := int64(0); j < k.mr; j++ {
		var as []string
		for v := int64(0); v < nv; v++ {
			as = append(as, fmt.Sprintf("a%d_%d = %s", j, v, zero))
		}
		w("  %s %s;\n", vt, strings.Join(as, ", "))
	}
	w("  for (int32_t c4 = 0; c4 < %d; ++c4)\n", k.base.c4)
	w("  for (int32_t tap = 0; tap < KK; ++tap) {\n")
	w("    const uint8_t* xk = x4 + ((int64_t)c4 * PLANE + koff[tap]) * 4;\n")
	w("    const int8_t* wk = wb + ((int64_t)c4 * KK + tap) * 64;\n")
	for v := int64(0); v < nv; v++ {
		// Group z's sixteen channels are 64 bytes; a 256-bit vector
		// holds eight of them.
		z, h := v/k.vpg(), v%k.vpg()
		w("    const %s w%d = "+load+";\n", vt, v, z*k.base.k4*64+h*64/k.vpg())
	}
	for j := int64(0); j < k.mr; j++ {
		w("    { int32_t v; memcpy(&v, xk + q%d, 4); const %s b = %s(v);", j, vt, set1)
		for v := int64(0); v < nv; v++ {
			w(" a%d_%d = KILN_SYMBOL_dp(a%d_%d, b, w%d);", j, v, j, v, v)
		}
		w(" }\n")
	}
	w("  }\n")
	for j := int64(0); j < k.mr; j++ {
		for v := int64(0); v < nv; v++ {
			w("  buf[%d] = a%d_%d;", j*nv+v, j, v)
		}
		w("\n")
	}
	w("}\n")
}

// main256 is the 256-bit tile (AVX-VNNI, or AVX2 with bounded weight
// pairs): the sums (KILN_SYMBOL_mac1), then per eight channels the
// requantization (rq8vf), the narrowing of eight pixels' vectors (MR of
// them, the last repeated) to bytes with packs, a byte shuffle and two
// unpacks that leave each channel's eight pixels in a 64-bit word, and a
// store of the tile's pixels of each channel (consecutive in the NCHW
// output).
func (k *qconvBcastKernel) main256(w func(string, ...any)) {
	e := k.base.epi
	pack := "_mm256_packus_epi16"
	if e.signed {
		pack = "_mm256_packs_epi16"
	}
	w("  __m256i buf[MR * 2];\n")
	w("  if (nz != 1) return;\n")
	w("  KILN_SYMBOL_mac1(x4, w + (int64_t)o16 * K4 * 64, po, buf);\n")
	w("  for (int32_t h = 0; h < 2; ++h) {\n")
	w("    const int32_t o = o16 * 16 + h * 8;\n")
	k.laneConstants(w, 256)
	w("    __m256i r[8];\n")
	w("    for (int32_t j = 0; j < MR; ++j) r[j] = KILN_SYMBOL_rq8vf(buf[j * 2 + h], bv, mv, mvo, fast);\n")
	w("    for (int32_t j = MR; j < 8; ++j) r[j] = r[MR - 1];\n")
	// Within each 128-bit lane, lo holds pixels 0-3 of four channels
	// (byte 4j + c), hi pixels 4-7; the shuffle makes it byte 4c + j,
	// and the unpacks join the two halves of each channel: one 64-bit
	// word per channel, in the order 0, 1, 4, 5, 2, 3, 6, 7.
	w("    const __m256i lo = %s(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));\n", pack)
	w("    const __m256i hi = %s(_mm256_packs_epi32(r[4], r[5]), _mm256_packs_epi32(r[6], r[7]));\n", pack)
	w("    const __m256i tix = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);\n")
	w("    const __m256i tl = _mm256_shuffle_epi8(lo, tix), th = _mm256_shuffle_epi8(hi, tix);\n")
	w("    uint64_t cw[8];\n")
	w("    _mm256_storeu_si256((__m256i*)(void*)cw, _mm256_unpacklo_epi32(tl, th));\n")
	w("    _mm256_storeu_si256((__m256i*)(void*)(cw + 4), _mm256_unpackhi_epi32(tl, th));\n")
	w("    uint8_t* restrict d = (uint8_t*)(void*)out + (int64_t)o * P + q0;\n")
	w("    static const int8_t ch[8] = {0, 1, 4, 5, 2, 3, 6, 7};\n")
	w("    if (np == MR) {\n")
	w("      for (int32_t i = 0; i < 8; ++i) memcpy(d + (int64_t)ch[i] * P, &cw[i], MR);\n")
	w("    } else {\n")
	w("      for (int32_t i = 0; i < 8; ++i) memcpy(d + (int64_t)ch[i] * P, &cw[i], (size_t)np);\n")
	w("    }\n")
	w("  }\n")
}

// main512 is the AVX-512 tile: the sums (KILN_SYMBOL_macNZ), then per
// group of sixteen channels the requantization, narrowing, transpose and
// stores.
func (k *qconvBcastKernel) main512(w func(string, ...any)) {
	w("  __m512i buf[MR * 3];\n")
	w("  const int8_t* restrict wb = w + (int64_t)o16 * K4 * 64;\n")
	w("  switch (nz) {\n")
	for _, nz := range k.nzs() {
		w("  case %d: KILN_SYMBOL_mac%d(x4, wb, po, buf); break;\n", nz, nz)
	}
	w("  default: return;\n  }\n")
	w("  for (int32_t z = 0; z < nz; ++z) {\n")
	w("    const int32_t o = (o16 + z) * 16;\n")
	k.laneConstants(w, 512)
	w("    __m512i r[8];\n")
	w("    for (int32_t j = 0; j < MR; ++j) r[j] = KILN_SYMBOL_q16n(buf[j * nz + z], bv, mv, mvo, fast);\n")
	w("    for (int32_t j = MR; j < 8; ++j) r[j] = r[MR - 1];\n")
	w("    const __m512i lo = KILN_SYMBOL_pk4(r[0], r[1], r[2], r[3]), hi = KILN_SYMBOL_pk4(r[4], r[5], r[6], r[7]);\n")
	w("    uint8_t* restrict d = (uint8_t*)(void*)out + (int64_t)o * P + q0;\n")
	w("#if defined(__AVX512VBMI__)\n")
	w("    const __mmask16 m = (__mmask16)((1u << np) - 1u);\n")
	w("    const __m512i t0 = _mm512_permutex2var_epi8(lo, _mm512_load_si512((const void*)KILN_SYMBOL_tix), hi);\n")
	w("    const __m512i t1 = _mm512_permutex2var_epi8(lo, _mm512_load_si512((const void*)(KILN_SYMBOL_tix + 64)), hi);\n")
	for h := 0; h < 2; h++ {
		for l := 0; l < 4; l++ {
			c := h*8 + l*2
			w("    { const __m128i x = _mm512_extracti32x4_epi32(t%d, %d);\n", h, l)
			w("      _mm_mask_storeu_epi8((void*)(d + (int64_t)%d * P), m, x);\n", c)
			w("      _mm_mask_storeu_epi8((void*)(d + (int64_t)%d * P), m, _mm_srli_si128(x, 8)); }\n", c+1)
		}
	}
	w("#else\n")
	w("    uint8_t tb[128] __attribute__((aligned(64)));\n")
	w("    _mm512_store_si512((void*)tb, lo);\n    _mm512_store_si512((void*)(tb + 64), hi);\n")
	w("    for (int32_t c = 0; c < 16; ++c)\n")
	w("      for (int32_t j = 0; j < np; ++j) d[(int64_t)c * P + j] = tb[j * 16 + c];\n")
	w("#endif\n")
	w("  }\n")
}

// laneConstants declares, for the channels from o on in a vector of
// bits (256 or 512), the epilogue's per-lane constants: bv, the bias less
// the zero point's share modulo 2^32 (foldedBias); mv and mvo, the
// multipliers of the lanes and of the odd lanes; and fast, whether every
// lane's multiplier rules ties out (KILN_SYMBOL_rqn: a bit below
// 2^(shift-32) set, or 0).
func (k *qconvBcastKernel) laneConstants(w func(string, ...any), bits int) {
	p, e := k.base.p, k.base.epi
	vt, pre, load := "__m512i", "_mm512", "_mm512_loadu_si512((const void*)(%s + o))"
	if bits == 256 {
		vt, pre, load = "__m256i", "_mm256", "_mm256_loadu_si256((const __m256i*)(const void*)(%s + o))"
	}
	ld := func(name string) string { return fmt.Sprintf(load, name) }
	w("    const %s bv = %s_sub_epi32(%s, %s_mullo_epi32(%s_set1_epi32(%d), %s));\n", vt, pre, ld("bias"), pre, pre, p.izpu(), ld("wsum"))
	if e.perChannel {
		w("    const %s mv = %s;\n", vt, ld("mult"))
	} else {
		w("    const %s mv = %s_set1_epi32(mult[0]);\n", vt, pre)
	}
	w("    const %s mvo = %s_srli_epi64(mv, 32);\n", vt, pre)
	if e.shift < 33 {
		w("    const int fast = 0;\n")
		return
	}
	low := int64(1)<<(e.shift-32) - 1
	if bits == 512 {
		w("    const int fast = (__mmask16)(_mm512_test_epi32_mask(mv, _mm512_set1_epi32(%d)) | _mm512_cmpeq_epi32_mask(mv, _mm512_setzero_si512())) == (__mmask16)0xFFFF;\n", low)
		return
	}
	w("    const __m256i z0 = _mm256_setzero_si256();\n")
	w("    const int fast = _mm256_movemask_epi8(_mm256_or_si256(_mm256_andnot_si256(_mm256_cmpeq_epi32(_mm256_and_si256(mv, _mm256_set1_epi32(%d)), z0), _mm256_set1_epi32(-1)), _mm256_cmpeq_epi32(mv, z0))) == -1;\n", low)
}

// mainScalar is the portable C: one channel, one pixel at a time.
func (k *qconvBcastKernel) mainScalar(w func(string, ...any)) {
	p := k.base.p
	xt := "uint8_t"
	if p.signedLayout() {
		xt = "int8_t"
	}
	w("  for (int32_t c = 0; c < nz * 16; ++c) {\n")
	w("    const int32_t o = o16 * 16 + c;\n")
	w("    const int8_t* restrict wo = w + ((int64_t)o16 * K4 * 16 + c / 16 * K4 * 16 + c %% 16) * 4;\n")
	w("    for (int32_t j = 0; j < np; ++j) {\n")
	w("      int32_t acc = 0;\n")
	w("      for (int32_t c4 = 0; c4 < %d; ++c4)\n", k.base.c4)
	w("      for (int32_t tap = 0; tap < KK; ++tap) {\n")
	w("        const %s* xk = (const %s*)(const void*)(x4 + ((int64_t)c4 * PLANE + koff[tap]) * 4 + po[j]);\n", xt, xt)
	w("        const int8_t* wk = wo + ((int64_t)c4 * KK + tap) * 64;\n")
	w("        for (int32_t i = 0; i < 4; ++i) acc += (int32_t)xk[i] * (int32_t)wk[i];\n")
	w("      }\n")
	w("      out[(int64_t)o * P + q0 + j] = KILN_SYMBOL_rq(acc, %s, %s);\n", k.base.foldedBias("o"), k.base.multExpr("o"))
	w("    }\n  }\n")
}

// Eval implements tir.Kernel: tile t's outputs from the arguments
// (x4, w, wsum, bias, mult, out, t) by the definition, as
// qconvKernel.Eval.
func (k *qconvBcastKernel) Eval(args []tir.KernelArg) error {
	p, e, d := k.base.p, k.base.epi, k.dir
	if len(args) != 7 {
		return fmt.Errorf("qnn.conv2d broadcast kernel: want 7 arguments, got %d", len(args))
	}
	xm, xo, err := args[0].Ptr(d.imageBytes(k.base.c4))
	if err != nil {
		return fmt.Errorf("qnn.conv2d broadcast kernel: data: %v", err)
	}
	wm, wo, err := args[1].Ptr(p.oc * k.base.k4 * 4)
	if err != nil {
		return fmt.Errorf("qnn.conv2d broadcast kernel: weight: %v", err)
	}
	bm, bo, err := args[3].Ptr(p.oc)
	if err != nil {
		return fmt.Errorf("qnn.conv2d broadcast kernel: bias: %v", err)
	}
	nm := int64(1)
	if e.perChannel {
		nm = p.oc
	}
	mm, mo, err := args[4].Ptr(nm)
	if err != nil {
		return fmt.Errorf("qnn.conv2d broadcast kernel: multiplier: %v", err)
	}
	pix := p.oh * p.ow
	om, oo, err := args[5].Ptr(p.oc * pix)
	if err != nil {
		return fmt.Errorf("qnn.conv2d broadcast kernel: output: %v", err)
	}
	t := args[6].Int
	if t < 0 || t >= k.tiles() {
		return fmt.Errorf("qnn.conv2d broadcast kernel: tile %d of %d", t, k.tiles())
	}
	bl, q0 := k.blocks[t/k.ptiles], t%k.ptiles*k.mr
	izpu := p.izpu()
	for q := q0; q < min(q0+k.mr, pix); q++ {
		oy, ox := q/p.ow, q%p.ow
		for o := bl.o16 * 16; o < (bl.o16+bl.nz)*16; o++ {
			var acc int64
			for c4 := int64(0); c4 < k.base.c4; c4++ {
				for tap := int64(0); tap < p.kh*p.kw; tap++ {
					at := (c4*d.planeWords() + d.koff[tap] + oy*d.wp + ox) * 4
					k4 := c4*p.kh*p.kw + tap
					for i := int64(0); i < 4; i++ {
						xv := int64(xm.Float(xo + at + i))
						if p.signedLayout() {
							xv = int64(int8(uint8(xv)))
						}
						wv := int64(wm.Float(wo + ((o/16*k.base.k4+k4)*16+o%16)*4 + i))
						acc += (xv - izpu) * wv
					}
				}
			}
			mi := int64(0)
			if e.perChannel {
				mi = o
			}
			v := int64(int32(int64(int32(acc)) + int64(bm.Float(bo+o))))
			om.SetFloat(oo+o*pix+q, float64(op.RequantizeValue(v, int64(mm.Float(mo+mi)), e.shift, e.zp, e.lo, e.hi)))
		}
	}
	return nil
}
