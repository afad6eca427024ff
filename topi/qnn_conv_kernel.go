package topi

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/tir"
)

// qconvParams is one qnn.conv2d's geometry for the CPU kernels.
type qconvParams struct {
	c, h, w, oc, oh, ow    int64
	kh, kw, sh, sw, ph, pw int64
	dh, dw                 int64
	izp                    int64 // as given (int8 data: in [-128, 127])
	signed                 bool  // int8 data
	isa                    qconvISA
	// maddubs: the AVX2 kernel multiplies with vpmaddubsw, exact because
	// the weight's kernel_pair_bound is at most 128 (255 * 128 fits a
	// 16-bit pair sum), instead of widening to 16 bits for vpmaddwd.
	maddubs bool
	// l1 is the processor's L1 data cache per core in bytes (32 KiB
	// when the target does not say): qconvDirectFor's bound.
	l1 int64
}

// signedLayout reports whether the kernel's input layout holds int8
// values (NEON's sdot multiplies signed bytes; uint8 data is laid out less
// 128), rather than uint8 (vpdpbusd's unsigned operand; int8 data plus
// 128).
func (p qconvParams) signedLayout() bool { return p.isa == qconvNEONDot || p.isa == qconvNEON }

// flips reports whether the data and the layout differ in sign: the
// layout holds each byte with its top bit flipped (the value moved by
// 128).
func (p qconvParams) flips() bool { return p.signed != p.signedLayout() }

// izpu is the input zero point in the kernel's layout (signedLayout).
func (p qconvParams) izpu() int64 {
	switch {
	case !p.flips():
		return p.izp
	case p.signed:
		return p.izp + 128
	}
	return p.izp - 128
}

// izpWord is a 32-bit word of four input bytes equal to the zero point
// in the kernel's layout: what a padded tap reads.
func (p qconvParams) izpWord() uint32 { return uint32(uint8(int8(p.izpu()))) * 0x01010101 }

// qconvPackKernel lays out one image's input channels in groups of four
// interleaved: x4[y, x, i] = x[4*c4 + i, y, x] (plus 128 for int8 data),
// 0 for channels beyond C; for the direct form (dir), in the padded
// plane (qconvDirect.packSource). A call lays out a block of rows of one
// group (packSplit).
type qconvPackKernel struct {
	p           qconvParams
	dir         *qconvDirect
	split       rowSplit
	symbol, src string
}

// rowSplit is how a kernel's calls divide its work into blocks of rows
// of groups: call u takes rows [r0, r1) of group g = u % groups, r0 =
// u / groups * rowsPer, r1 = min(r0 + rowsPer, rows). The calls go row
// block first, so that a static split of them among threads gives each
// thread about the same rows whatever the kernel: the pack's (groups of
// four channels), the tiles' (which go in row order) and the depthwise
// block forms' (blocks of channels) line up, and each thread reads the
// rows it wrote on its own core.
type rowSplit struct {
	groups, rows, rowsPer int64
}

// qconvPackBytes is the fewest bytes a pack call writes when the rows
// allow: enough that the call's own cost stays small next to its copy.
const qconvPackBytes = 1024

// packSplit is the pack's split: c4s groups of four channels, of rows
// rows of rowBytes bytes (the padded rows of every phase plane for the
// direct form, the input's rows otherwise), in row blocks of at least
// qconvPackBytes (rowBlocks). Split by channel groups (or not at all,
// for one group), a tile read much of its taps from the other core's
// cache: at 2 threads on a 2-core EPYC, mobilenet_v2's first convolution
// (3 channels, one group) took 0.14-0.15 ms in a C harness with its pack
// on one thread, and 0.07-0.08 ms with the pack split by rows.
func packSplit(c4s, rows, rowBytes int64) rowSplit {
	return rowSplit{groups: c4s, rows: rows, rowsPer: rowBlocks(rows, (qconvPackBytes+rowBytes-1)/rowBytes)}
}

// rowBlocks is the rows per block when rows rows are cut into blocks of
// at least minRows: two, four or eight blocks (the most that minRows
// allows), or one. A power of two of blocks, taken first in a parallel
// loop over blocks and groups, gives 2, 4 or 8 threads whole blocks of
// rows (a static split of the loop), which line up with the rows of
// their share of the convolution's tiles.
func rowBlocks(rows, minRows int64) int64 {
	n := int64(8)
	for n > 1 && rows/n < max(minRows, 1) {
		n /= 2
	}
	return (rows + n - 1) / n
}

// calls is the number of calls.
func (s rowSplit) calls() int64 { return (s.rows + s.rowsPer - 1) / s.rowsPer * s.groups }

// rowRange is call u's group and rows [r0, r1).
func (s rowSplit) rowRange(u int64) (g, r0, r1 int64) {
	g, r0 = u%s.groups, u/s.groups*s.rowsPer
	return g, r0, min(r0+s.rowsPer, s.rows)
}

// decl is the C that declares call u's group and rows [r0, r1)
// (rowRange) under the names given.
func (s rowSplit) decl(g, r0, r1 string) string {
	return fmt.Sprintf("  const int32_t %s = u %% %d, %s = u / %d * %d;\n"+
		"  const int32_t %s = %s + %d < %d ? %s + %d : %d;\n", g, s.groups, r0, s.groups, s.rowsPer, r1, r0, s.rowsPer, s.rows, r0, s.rowsPer, s.rows)
}

// packHead is the C that opens a pack kernel of input type xt: its
// signature, and call u's group c4 and rows [r0, r1).
func (s rowSplit) packHead(xt string) string {
	return fmt.Sprintf("static void KILN_SYMBOL(const %s* restrict x, uint8_t* restrict x4, int32_t u) {\n", xt) + s.decl("c4", "r0", "r1")
}

func newQConvPackKernel(p qconvParams, dir *qconvDirect) *qconvPackKernel {
	k := &qconvPackKernel{p: p, dir: dir}
	c4s := (p.c + 3) / 4
	if dir != nil {
		k.split = packSplit(c4s, dir.hp, int64(len(dir.phases))*dir.wp*4)
		k.symbol, k.src = kernelSymbol("kiln_qconv_pack_", dir.packSource(p, k.split))
		return k
	}
	k.split = packSplit(c4s, p.h, p.w*4)
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	xt, flip := p.packTypes()
	plane := p.h * p.w
	w("/* qnn.conv2d input, %d channels of %dx%d, in groups of four. */\n", p.c, p.h, p.w)
	b.WriteString(k.split.packHead(xt))
	w("  uint8_t* restrict d = x4 + (int64_t)c4 * %d;\n", plane*4)
	w("  const %s* s[4];\n  int32_t have = %d - c4 * 4;\n  if (have > 4) have = 4;\n", xt, p.c)
	w("  for (int32_t i = 0; i < 4; ++i) s[i] = x + (int64_t)(c4 * 4 + (i < have ? i : 0)) * %d;\n", plane)
	w("  const int32_t q0 = r0 * %d, q1 = r1 * %d;\n", p.w, p.w)
	w("  if (have == 4) {\n")
	w("    const %s* restrict s0 = s[0] + q0; const %s* restrict s1 = s[1] + q0; const %s* restrict s2 = s[2] + q0; const %s* restrict s3 = s[3] + q0;\n", xt, xt, xt, xt)
	p.interleave4(w, "    ", "d + (int64_t)q0 * 4", "q1 - q0", flip, 1)
	w("    return;\n  }\n")
	w("  for (int32_t q = q0; q < q1; ++q)\n")
	w("    for (int32_t i = 0; i < 4; ++i) d[q * 4 + i] = i < have ? (uint8_t)((uint8_t)s[i][q]%s) : (uint8_t)0;\n", flip)
	w("}\n")
	k.symbol, k.src = kernelSymbol("kiln_qconv_pack_", b.String())
	return k
}

// Symbol implements tir.Kernel.
func (k *qconvPackKernel) Symbol() string { return k.symbol }

// Includes implements tir.Kernel.
func (k *qconvPackKernel) Includes() []string {
	if k.p.isa == qconvAVX512VNNI {
		return []string{k.p.isa.header()}
	}
	return nil
}

// interleave4 writes the C (at indent ind) that lays out n bytes of each
// of s0..s3, every step-th from the first, as n words at dst,
// dst[j*4 + i] = s_i[j*step] with flip applied (packTypes). Under
// AVX-512 VNNI with VBMI, with step 1 or 2, sixteen words take one
// 64-byte vector: four 16-byte loads and one byte permutation (step 1)
// or four 32-byte loads and one two-source byte permutation (step 2),
// the loads and the store of the last vector masked to the bytes it
// owns; elsewhere the loop, which gcc vectorizes with 8-byte shuffles
// (twice the instructions per word) for step 1.
func (p qconvParams) interleave4(w func(string, ...any), ind, dst, n, flip string, step int64) {
	w("%s{\n", ind)
	w("%s  uint8_t* restrict dw = %s;\n", ind, dst)
	w("%s  const int32_t n = %s;\n", ind, n)
	w("%s  int32_t j = 0;\n", ind)
	if p.isa == qconvAVX512VNNI && (step == 1 || step == 2) {
		var ix []string
		for b := 0; b < 64; b++ {
			j, i := b/4, b%4
			if step == 1 {
				ix = append(ix, fmt.Sprint(i*16+j))
			} else {
				ix = append(ix, fmt.Sprint(i*32+2*j))
			}
		}
		w("#if %s && defined(__AVX512VBMI__)\n", p.isa.guard())
		w("%s  static const uint8_t ix[64] __attribute__((aligned(64))) = {%s};\n", ind, strings.Join(ix, ", "))
		w("%s  const __m512i perm = _mm512_load_si512((const void*)ix);\n", ind)
		w("%s  for (; j < n; j += 16) {\n", ind)
		w("%s    const int32_t m = n - j < 16 ? n - j : 16;\n", ind)
		if step == 1 {
			w("%s    const __mmask16 lm = (__mmask16)((1u << m) - 1u);\n", ind)
			w("%s    __m512i v = _mm512_castsi128_si512(_mm_maskz_loadu_epi8(lm, (const void*)(s0 + j)));\n", ind)
			for i := 1; i < 4; i++ {
				w("%s    v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(lm, (const void*)(s%d + j)), %d);\n", ind, i, i)
			}
			w("%s    v = _mm512_permutexvar_epi8(perm, v);\n", ind)
		} else {
			// Bytes 0, 2, ..., 2m-2 of each source: 2m-1 bytes loaded.
			w("%s    const __mmask32 lm = (__mmask32)((1u << (2 * m - 1)) - 1u);\n", ind)
			w("%s    const __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi8(lm, (const void*)(s0 + 2 * j))), _mm256_maskz_loadu_epi8(lm, (const void*)(s1 + 2 * j)), 1);\n", ind)
			w("%s    const __m512i b = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi8(lm, (const void*)(s2 + 2 * j))), _mm256_maskz_loadu_epi8(lm, (const void*)(s3 + 2 * j)), 1);\n", ind)
			w("%s    __m512i v = _mm512_permutex2var_epi8(a, perm, b);\n", ind)
		}
		if flip != "" {
			w("%s    v = _mm512_xor_si512(v, _mm512_set1_epi8((char)0x80));\n", ind)
		}
		w("%s    _mm512_mask_storeu_epi8((void*)(dw + (int64_t)j * 4), m >= 16 ? ~(__mmask64)0 : ((__mmask64)1 << (4 * m)) - 1, v);\n", ind)
		w("%s  }\n", ind)
		w("#endif\n")
	}
	w("%s  for (; j < n; ++j) {\n", ind)
	for i := 0; i < 4; i++ {
		w("%s    dw[j * 4 + %d] = (uint8_t)((uint8_t)s%d[(int64_t)j * %d]%s);\n", ind, i, i, step, flip)
	}
	w("%s  }\n%s}\n", ind, ind)
}

// Source implements tir.Kernel.
func (k *qconvPackKernel) Source() string { return k.src }

// Eval implements tir.Kernel.
func (k *qconvPackKernel) Eval(args []tir.KernelArg) error {
	p := k.p
	if len(args) != 3 {
		return fmt.Errorf("qnn.conv2d pack kernel: want 3 arguments, got %d", len(args))
	}
	plane := p.h * p.w
	xm, xo, err := args[0].Ptr(p.c * plane)
	if err != nil {
		return fmt.Errorf("qnn.conv2d pack kernel: data: %v", err)
	}
	u := args[2].Int
	if u < 0 || u >= k.split.calls() {
		return fmt.Errorf("qnn.conv2d pack kernel: call %d of %d", u, k.split.calls())
	}
	c4, r0, r1 := k.split.rowRange(u)
	if d := k.dir; d != nil {
		c4s := k.split.groups
		dm, do, err := args[1].Ptr(d.imageBytes(c4s))
		if err != nil {
			return fmt.Errorf("qnn.conv2d pack kernel: output: %v", err)
		}
		x := func(c, iy, ix int64) uint8 { return uint8(int64(xm.Float(xo + c*plane + iy*p.w + ix))) }
		for f := range d.phases {
			base := do + (c4*d.planeWords()+int64(f)*d.phaseWords())*4
			for py := r0; py < r1; py++ {
				for px := int64(0); px < d.wp; px++ {
					for i := int64(0); i < 4; i++ {
						dm.SetFloat(base+(py*d.wp+px)*4+i, float64(d.packByte(p, x, c4, f, py, px, i)))
					}
				}
			}
			if r1 < d.hp {
				continue
			}
			for i := d.hp * d.wp * 4; i < d.phaseWords()*4; i++ {
				dm.SetFloat(base+i, 0)
			}
		}
		if c4 == c4s-1 && r1 == d.hp {
			for i := int64(0); i < d.slack*4; i++ {
				dm.SetFloat(do+c4s*d.planeWords()*4+i, 0)
			}
		}
		return nil
	}
	dm, do, err := args[1].Ptr((c4 + 1) * plane * 4)
	if err != nil {
		return fmt.Errorf("qnn.conv2d pack kernel: output: %v", err)
	}
	for q := r0 * p.w; q < r1*p.w; q++ {
		for i := int64(0); i < 4; i++ {
			v := 0.0
			if c := c4*4 + i; c < p.c {
				// The byte the C stores: the value, flipped in its top
				// bit when data and layout differ in sign.
				b := uint8(int64(xm.Float(xo + c*plane + q)))
				if p.flips() {
					b ^= 0x80
				}
				v = float64(b)
			}
			dm.SetFloat(do+(c4*plane+q)*4+i, v)
		}
	}
	return nil
}

// qconvKernel computes one tile of np output pixels of every output
// channel of one image:
//
//	out[o, p] = sum over (c, ky, kx) of (x[c, iy, ix] - izp) * w[o, c, ky, kx]
//
// with padded taps reading izp. The input comes laid out by
// qconvPackKernel and the weight packed OIHW4i, so that a 32-bit word of
// either holds four input channels of one tap. The kernel copies the
// tile's words as xp[(c4, ky, kx)][pixel] (runs of a row at once for
// stride 1), multiplies them with the channel's weight word broadcast
// (vpdpbusd: pixels in lanes, mr channels at a time), and subtracts the
// zero point times the channel's weight sum, computed by the caller.
// Integer sums are exact (K is at most qconvMaxK), so any order gives
// Eval's values.
type qconvKernel struct {
	p          qconvParams
	epi        *qconvEpi // nil: int32 sums out
	c4, k4, np int64
	mr         int64
	tiles      int64
	// w16: the AVX2 kernel reads the weight widened to int16 by the
	// caller (qconvW16) instead of widening each word in every tile, when
	// enough tiles share the widening.
	w16 bool
	// dir: the direct form (qnn_conv_direct.go), which reads the padded
	// input in place instead of copying each tile's taps; nil for the
	// usual form.
	dir         *qconvDirect
	symbol, src string
}

// qconvW16MinTiles is the number of tiles from which the AVX2 kernel
// takes its weight widened once per call (qconvW16): with fewer, the
// widening of the whole weight costs more than the tiles save.
const qconvW16MinTiles = 32

// qconvEpi is the requantization a qnn.conv2d_requantize kernel applies
// to its sums before storing them as 8-bit values: + bias[o], then
// op.RequantizeValue with multiplier mult[o] (or mult[0]).
type qconvEpi struct {
	shift, zp, lo, hi int64
	perChannel        bool // one multiplier per output channel
	signed            bool // int8 output
}

// outType is the C type of the requantized output.
func (e *qconvEpi) outType() string {
	if e.signed {
		return "int8_t"
	}
	return "uint8_t"
}

// pack16 is the SSE intrinsic that narrows two vectors of int16 to the
// output's bytes with saturation (exact for requantized values, which
// lie within the output type's range).
func (e *qconvEpi) pack16() string {
	if e.signed {
		return "_mm_packs_epi16"
	}
	return "_mm_packus_epi16"
}

func newQConvKernel(p qconvParams, epi *qconvEpi) (*qconvKernel, error) {
	k := &qconvKernel{p: p, epi: epi}
	k.c4 = (p.c + 3) / 4
	k.k4 = k.c4 * p.kh * p.kw
	switch p.isa {
	case qconvAVX512VNNI:
		k.np, k.mr = 32, 8
	case qconvNEON:
		k.np, k.mr = 16, 2
	default:
		k.np, k.mr = 16, 4
	}
	k.tiles = (p.oh*p.ow + k.np - 1) / k.np
	if d := qconvDirectFor(p, k.np); d != nil {
		k.dir, k.np, k.tiles = d, d.np, d.tiles()
		if p.isa != qconvAVX512VNNI {
			k.mr = 64 / d.np
		}
	}
	k.w16 = p.isa == qconvAVX2 && !p.maddubs && k.tiles >= qconvW16MinTiles
	if k.k4*4 > qconvMaxK || k.k4*k.np*4 > qconvMaxTile {
		return nil, fmt.Errorf("qnn.conv2d kernel: reduction of %d does not fit", k.k4*4)
	}
	k.symbol, k.src = kernelSymbol("kiln_qconv_", k.source())
	return k, nil
}

// Symbol implements tir.Kernel.
func (k *qconvKernel) Symbol() string { return k.symbol }

// Includes implements tir.Kernel.
func (k *qconvKernel) Includes() []string {
	if h := k.p.isa.header(); h != "" {
		return []string{h, "<string.h>"}
	}
	return []string{"<string.h>"}
}

// Source implements tir.Kernel.
func (k *qconvKernel) Source() string { return k.src }

func (k *qconvKernel) source() string {
	p := k.p
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	pix := p.oh * p.ow
	w("/* qnn.conv2d tile: %dx%dx%d input, %d channels of %dx%d (stride %dx%d, pad %dx%d, dilation %dx%d), %d pixels per tile. */\n",
		p.c, p.h, p.w, p.oc, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw, k.np)
	wt := "int8_t"
	if k.w16 {
		wt = "int16_t" // widened and reordered by the caller (qconvW16)
	}
	if e := k.epi; e != nil {
		w("static void KILN_SYMBOL(const uint8_t* restrict x4, const %s* restrict w, const int32_t* restrict wsum, const int32_t* restrict bias, const int32_t* restrict mult, %s* restrict out, int32_t t) {\n", wt, e.outType())
	} else {
		w("static void KILN_SYMBOL(const uint8_t* restrict x4, const %s* restrict w, const int32_t* restrict wsum, int32_t* restrict out, int32_t t) {\n", wt)
	}
	w("  enum { K4 = %d, NP = %d, P = %d };\n", k.k4, k.np, pix)
	if k.dir != nil {
		k.dir.tileHeader(w, p)
	} else {
		k.copyTaps(w)
	}
	k.defineQW(w)
	if k.w16 {
		// Channel i of (o, k4) in the widened weight (lanes 0, 2, 1, 3).
		w("#define KILN_QB(o, k4, i) ((int32_t)w[((int64_t)(o) * K4 + (k4)) * 4 + (i) %% 2 * 2 + (i) / 2])\n")
	} else {
		w("#define KILN_QB(o, k4, i) ((int32_t)w[((int64_t)(o) * K4 + (k4)) * 4 + (i)])\n")
	}
	// The vector code only where the compiler targets the instruction set
	// (the target's flags); elsewhere (a build without them, another
	// architecture, a microcontroller building an exported AOT project)
	// the same sums in portable C.
	guard := p.isa.guard()
	var helper string // the x86 kernels' multiply function (KILN_SYMBOL_mac: mainAVX2, mainAVX512)
	if guard != "" {
		w("#if %s\n", guard)
		switch p.isa {
		case qconvAVX512VNNI:
			helper = k.mainAVX512(w)
		case qconvAVXVNNI, qconvAVX2:
			helper = k.mainAVX2(w)
		case qconvNEONDot, qconvNEON:
			k.mainNEON(w)
		}
		w("#else\n")
	}
	k.mainScalar(w)
	if guard != "" {
		w("#endif\n")
	}
	k.undefQW(w)
	w("#undef KILN_QB\n}\n")
	pre := fmt.Sprintf("static inline __attribute__((unused)) int32_t kiln_qw(const int8_t* restrict w, int32_t o, int32_t k4) {\n"+
		"  int32_t v;\n  memcpy(&v, w + ((int64_t)o * %d + k4) * 4, 4);\n  return v;\n}\n", k.k4)
	if k.w16 {
		// Word h (0: channels 0 and 2, 1: channels 1 and 3) of the
		// widened weight of (o, k4).
		pre = fmt.Sprintf("static inline __attribute__((unused)) int32_t kiln_qw(const int16_t* restrict w, int32_t o, int32_t k4, int32_t h) {\n"+
			"  int32_t v;\n  memcpy(&v, w + ((int64_t)o * %d + k4) * 4 + 2 * h, 4);\n  return v;\n}\n", k.k4)
	}
	pre += k.epilogueHelpers()
	if h := k.dotHelper() + helper; h != "" {
		pre += "#if " + guard + "\n" + h + "#endif\n"
	}
	pre = strings.ReplaceAll(pre, "kiln_qw(", "KILN_SYMBOL_w(")
	return pre + strings.ReplaceAll(b.String(), "kiln_qw(", "KILN_SYMBOL_w(")
}

// copyTaps writes the usual form's tile header and copy: xp[k4][pixel],
// the words each four-channel tap k4 reads for the tile's pixels.
func (k *qconvKernel) copyTaps(w func(string, ...any)) {
	p := k.p
	izpw := p.izpWord()
	w("  uint32_t xp[K4 * NP] __attribute__((aligned(64)));\n")
	w("  const int32_t p0 = t * NP;\n")
	w("  const int32_t np = P - p0 < NP ? P - p0 : NP;\n")
	// Copy the taps: for each (c4, ky, kx), the tile's pixels row run by
	// row run.
	w("  for (int32_t c4 = 0; c4 < %d; ++c4)\n", k.c4)
	w("  for (int32_t ky = 0; ky < %d; ++ky)\n", p.kh)
	w("  for (int32_t kx = 0; kx < %d; ++kx) {\n", p.kw)
	w("    uint32_t* restrict d = xp + ((c4 * %d + ky) * %d + kx) * NP;\n", p.kh, p.kw)
	w("    const uint8_t* restrict s = x4 + (int64_t)c4 * %d;\n", p.h*p.w*4)
	w("    int32_t j = 0;\n")
	w("    while (j < np) {\n")
	w("      const int32_t q = p0 + j, oy = q / %d, ox = q %% %d;\n", p.ow, p.ow)
	w("      const int32_t run = %d - ox < np - j ? %d - ox : np - j;\n", p.ow, p.ow)
	w("      const int32_t iy = oy * %d - %d + ky * %d;\n", p.sh, p.ph, p.dh)
	w("      if ((uint32_t)iy >= %du) {\n        for (int32_t r = 0; r < run; ++r) d[j + r] = %du;\n        j += run;\n        continue;\n      }\n", p.h, izpw)
	w("      const uint8_t* restrict row = s + (int64_t)iy * %d;\n", p.w*4)
	w("      const int32_t ix0 = ox * %d - %d + kx * %d;\n", p.sw, p.pw, p.dw)
	if p.sw == 1 {
		// Contiguous: the in-bounds part is one copy.
		w("      int32_t lo = ix0 < 0 ? -ix0 : 0;\n      if (lo > run) lo = run;\n")
		w("      int32_t hi = %d - ix0;\n      if (hi > run) hi = run;\n      if (hi < lo) hi = lo;\n", p.w)
		w("      for (int32_t r = 0; r < lo; ++r) d[j + r] = %du;\n", izpw)
		// Word by word (four bytes each, inlined), which the C compiler
		// turns into vector copies; a call to memcpy per run costs as
		// much as the run.
		w("      { const uint8_t* restrict src = row + (int64_t)(ix0 + lo) * 4; uint32_t* restrict dst = d + j + lo;\n")
		w("        for (int32_t r = 0; r < hi - lo; ++r) { uint32_t v; memcpy(&v, src + r * 4, 4); dst[r] = v; } }\n")
		w("      for (int32_t r = hi; r < run; ++r) d[j + r] = %du;\n", izpw)
	} else {
		// Strided: the in-bounds runs r in [lo, hi) (ix0 + r*SW in
		// [0, W)) copied without a test per word.
		w("      int32_t lo = ix0 < 0 ? (-ix0 + %d) / %d : 0;\n      if (lo > run) lo = run;\n", p.sw-1, p.sw)
		w("      int32_t hi = %d - ix0 <= 0 ? 0 : (%d - ix0 + %d) / %d;\n      if (hi > run) hi = run;\n      if (hi < lo) hi = lo;\n", p.w, p.w, p.sw-1, p.sw)
		w("      for (int32_t r = 0; r < lo; ++r) d[j + r] = %du;\n", izpw)
		w("      { const uint8_t* restrict src = row + (int64_t)ix0 * 4; uint32_t* restrict dst = d + j;\n")
		w("        for (int32_t r = lo; r < hi; ++r) { uint32_t v; memcpy(&v, src + (int64_t)r * %d, 4); dst[r] = v; } }\n", p.sw*4)
		w("      for (int32_t r = hi; r < run; ++r) d[j + r] = %du;\n", izpw)
	}
	w("      j += run;\n    }\n")
	w("    for (; j < NP; ++j) d[j] = 0;\n")
	w("  }\n")
}

// epilogueHelpers defines the requantization: KILN_SYMBOL_rq (one value,
// op.RequantizeValue in C) and, for AVX-512, KILN_SYMBOL_rq16 (sixteen
// lanes: 64-bit products of the even and odd lanes, shifted, rounded half
// to even, clamped, narrowed to bytes).
func (k *qconvKernel) epilogueHelpers() string {
	e := k.epi
	if e == nil {
		return ""
	}
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	mask, half := int64(1)<<e.shift-1, int64(1)<<(e.shift-1)
	w("static inline int32_t KILN_SYMBOL_rq(int32_t v, int32_t b, int32_t m) {\n")
	w("  const int64_t p = (int64_t)(int32_t)((uint32_t)v + (uint32_t)b) * (int64_t)m;\n")
	w("  int64_t q = p >> %d;\n  const int64_t r = p & INT64_C(%d);\n", e.shift, mask)
	w("  q += (int64_t)((r > INT64_C(%d)) | ((r == INT64_C(%d)) & (int)(q & 1)));\n", half, half)
	w("  q += %d;\n  return (int32_t)(q < %d ? %d : q > %d ? %d : q);\n}\n", e.zp, e.lo, e.lo, e.hi, e.hi)
	if g := k.p.isa.guard(); g != "" {
		w("#if %s\n", g)
		b.WriteString(k.vectorEpilogue())
		w("#endif\n")
	}
	return b.String()
}

// vectorEpilogue is the requantization of epilogueHelpers on vectors of
// the kernel's instruction set (none for plain C).
func (k *qconvKernel) vectorEpilogue() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	if k.p.isa.hasAVX2() {
		// Under AVX-512 VNNI too, for the depthwise block form.
		k.vectorEpilogue256(w)
	}
	if k.p.isa == qconvNEONDot || k.p.isa == qconvNEON {
		b.WriteString(k.epilogueNEON())
		return b.String()
	}
	if k.p.isa == qconvAVX512VNNI {
		k.vectorEpilogue512(w)
	}
	return b.String()
}

// vectorEpilogue512 defines the requantization of sixteen int32 lanes:
// KILN_SYMBOL_q16(v, bv, mv, mvo, fast), a bias and a multiplier per
// lane (mvo: srli_epi64(mv, 32), the odd lanes' multipliers; fast: every
// lane's multiplier rules ties out, KILN_SYMBOL_rqn), the quotients
// clamped to the output's range in the lanes (the int8 depthwise block
// form's); KILN_SYMBOL_q16n, the same without the clamp, for callers
// that narrow with KILN_SYMBOL_pk4; KILN_SYMBOL_rq16(v, b, m), one bias
// and multiplier for all lanes, narrowed to the output's bytes; and
// KILN_SYMBOL_pk4(a, b, c, d), four vectors of q16n's quotients narrowed
// to 64 bytes in order (epiPack512). The 64-bit products of the even and
// odd lanes are rounded half to even, as vectorEpilogue256's rq8v. From
// shift 32 on every quotient fits 32 bits, so the zero point and the
// clamp work on the sixteen 32-bit lanes, and from shift 33 a multiplier
// whose bits below 2^(shift-32) are not all zero leaves no ties, whose
// test the fast path skips; on mobilenet_v2's 1x1 convolutions of 16 and
// 24 channels the requantization took more time than the sums. AVX-512
// shifts 64-bit lanes arithmetically, so no bias makes the products
// nonnegative (AVX2's rsum), and up to shift 53 the zero point joins the
// rounding constant (zp * 2^s + 2^(s-1) + |p| stays below 2^63). Below
// shift 32, in 64-bit lanes, with the tie test.
func (k *qconvKernel) vectorEpilogue512(w func(string, ...any)) {
	e := k.epi
	if e.shift >= 32 {
		// The rounding constants: r rounds half up (the fast path), rb
		// half down before the parity bit; the zero point is in both up
		// to shift 53, else added to the 32-bit quotients (zpAdd).
		zpIn := e.shift <= 53
		r := int64(1) << (e.shift - 1)
		if zpIn {
			r += e.zp << e.shift
		}
		zpAdd := func(q string) string {
			if zpIn || e.zp == 0 {
				return q
			}
			return fmt.Sprintf("_mm512_add_epi32(%s, _mm512_set1_epi32(%d))", q, e.zp)
		}
		// blend: qe holds the even lanes' quotients in their low halves,
		// qo the odd lanes' in their upper halves (shifted by shift - 32).
		blend := func(qe, qo string) string {
			return zpAdd(fmt.Sprintf("_mm512_mask_blend_epi32((__mmask16)0xAAAA, %s, %s)", qe, qo))
		}
		w("static inline __attribute__((unused)) __m512i KILN_SYMBOL_q16n(__m512i v, __m512i bv, __m512i mv, __m512i mvo, int fast) {\n")
		w("  v = _mm512_add_epi32(v, bv);\n")
		w("  const __m512i pe = _mm512_mul_epi32(v, mv), po = _mm512_mul_epi32(_mm512_srli_epi64(v, 32), mvo);\n")
		if e.shift >= 33 {
			w("  if (fast) {\n")
			w("    const __m512i r = _mm512_set1_epi64(INT64_C(%d));\n", r)
			w("    return %s;\n  }\n", blend(fmt.Sprintf("_mm512_srai_epi64(_mm512_add_epi64(pe, r), %d)", e.shift), fmt.Sprintf("_mm512_srai_epi64(_mm512_add_epi64(po, r), %d)", e.shift-32)))
		} else {
			w("  (void)fast;\n")
		}
		// Rounding half to even: floor((p + 2^(s-1) - 1 + b) / 2^s)
		// with b bit s of p.
		w("  const __m512i one = _mm512_set1_epi64(1), rb = _mm512_set1_epi64(INT64_C(%d));\n", r-1)
		w("  const __m512i se = _mm512_add_epi64(_mm512_add_epi64(pe, rb), _mm512_and_si512(_mm512_srli_epi64(pe, %d), one));\n", e.shift)
		w("  const __m512i so = _mm512_add_epi64(_mm512_add_epi64(po, rb), _mm512_and_si512(_mm512_srli_epi64(po, %d), one));\n", e.shift)
		w("  return %s;\n}\n", blend(fmt.Sprintf("_mm512_srai_epi64(se, %d)", e.shift), fmt.Sprintf("_mm512_srai_epi64(so, %d)", e.shift-32)))
		w("static inline __attribute__((unused)) __m512i KILN_SYMBOL_q16(__m512i v, __m512i bv, __m512i mv, __m512i mvo, int fast) {\n")
		w("  return _mm512_min_epi32(_mm512_max_epi32(KILN_SYMBOL_q16n(v, bv, mv, mvo, fast), _mm512_set1_epi32(%d)), _mm512_set1_epi32(%d));\n}\n", e.lo, e.hi)
	} else {
		mask, half := int64(1)<<e.shift-1, int64(1)<<(e.shift-1)
		w("static inline __attribute__((unused)) __m512i KILN_SYMBOL_q16(__m512i v, __m512i bv, __m512i mv, __m512i mvo, int fast) {\n")
		w("  (void)fast;\n")
		w("  v = _mm512_add_epi32(v, bv);\n")
		w("  const __m512i m = _mm512_set1_epi64(INT64_C(%d)), h = _mm512_set1_epi64(INT64_C(%d)), one = _mm512_set1_epi64(1);\n", mask, half)
		w("  const __m512i lo = _mm512_set1_epi64(%d), hi = _mm512_set1_epi64(%d), zp = _mm512_set1_epi64(%d);\n", e.lo, e.hi, e.zp)
		w("  __m512i q[2];\n")
		w("  const __m512i p[2] = {_mm512_mul_epi32(v, mv), _mm512_mul_epi32(_mm512_srli_epi64(v, 32), mvo)};\n")
		w("  for (int i = 0; i < 2; ++i) {\n")
		w("    __m512i t = _mm512_srai_epi64(p[i], %d);\n", e.shift)
		w("    const __m512i r = _mm512_and_si512(p[i], m);\n")
		w("    const __mmask8 up = _mm512_cmpgt_epi64_mask(r, h) | (_mm512_cmpeq_epi64_mask(r, h) & _mm512_test_epi64_mask(t, one));\n")
		w("    t = _mm512_add_epi64(_mm512_mask_add_epi64(t, up, t, one), zp);\n")
		w("    q[i] = _mm512_min_epi64(_mm512_max_epi64(t, lo), hi);\n  }\n")
		w("  return _mm512_mask_blend_epi32((__mmask16)0xAAAA, q[0], _mm512_slli_epi64(q[1], 32));\n}\n")
		// Already clamped: narrowing is exact.
		w("static inline __attribute__((unused)) __m512i KILN_SYMBOL_q16n(__m512i v, __m512i bv, __m512i mv, __m512i mvo, int fast) {\n")
		w("  return KILN_SYMBOL_q16(v, bv, mv, mvo, fast);\n}\n")
	}
	fast := "0"
	if e.shift >= 33 {
		fast = "KILN_SYMBOL_rqn(m)"
	}
	w("static inline __attribute__((unused)) __m128i KILN_SYMBOL_rq16(__m512i v, int32_t b, int32_t m) {\n")
	w("  const __m512i mv = _mm512_set1_epi32(m);\n")
	w("  return _mm512_cvtepi32_epi8(KILN_SYMBOL_q16(v, _mm512_set1_epi32(b), mv, mv, %s));\n}\n", fast)
	w("static inline __attribute__((unused)) __m512i KILN_SYMBOL_rq16n(__m512i v, int32_t b, int32_t m) {\n")
	w("  const __m512i mv = _mm512_set1_epi32(m);\n")
	w("  return KILN_SYMBOL_q16n(v, _mm512_set1_epi32(b), mv, mv, %s);\n}\n", fast)
	k.epiPack512(w)
}

// epiPack512 defines KILN_SYMBOL_pk4(a, b, c, d): the quotients of four
// vectors (q16n's: the zero point added, not clamped) narrowed to bytes,
// a's sixteen first, then b's, c's and d's. Two saturating packs to
// int16 and one to the output type clamp to the type's range (exact:
// each saturation is a clamp to a wider range than the next), which
// interleave the four by 128-bit lane; one permutation of 32-bit words
// puts them in order; the clamp to [lo, hi] where narrower than the type
// is a byte min or max. 3 + 1 instructions where narrowing each vector
// by itself takes a clamp, a max and a two-instruction vpmovdb: on
// mobilenet_v2's 1x1 convolution of 16 to 96 channels, 0.141 against
// 0.153 ms.
func (k *qconvKernel) epiPack512(w func(string, ...any)) {
	e := k.epi
	pack, mx, mn, tlo, thi := "_mm512_packus_epi16", "_mm512_max_epu8", "_mm512_min_epu8", int64(0), int64(255)
	if e.signed {
		pack, mx, mn, tlo, thi = "_mm512_packs_epi16", "_mm512_max_epi8", "_mm512_min_epi8", -128, 127
	}
	w("static inline __attribute__((unused)) __m512i KILN_SYMBOL_pk4(__m512i a, __m512i b, __m512i c, __m512i d) {\n")
	w("  __m512i r = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), %s(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d)));\n", pack)
	if e.lo > tlo {
		w("  r = %s(r, _mm512_set1_epi8((char)%d));\n", mx, e.lo)
	}
	if e.hi < thi {
		w("  r = %s(r, _mm512_set1_epi8((char)%d));\n", mn, e.hi)
	}
	w("  return r;\n}\n")
}

// vectorEpilogue256 writes the requantization on 256-bit vectors (AVX2;
// AVX-VNNI and AVX-512 VNNI processors have AVX2): rq8v, rq8vf, rq8 and
// sat8 with their helpers.
func (k *qconvKernel) vectorEpilogue256(w func(string, ...any)) {
	e := k.epi
	// Rounding half to even, p / 2^s is floor((p + 2^(s-1) - 1 +
	// b) / 2^s) with b bit s of p (the parity of floor(p / 2^s)).
	// AVX2 has no 64-bit arithmetic shift: for |p| <= 2^62 (products
	// of two int32) that sum plus 2^62 (roundBias, as requantExpr)
	// lies in [0, 2^64), so _rsum returns it for a logical shift,
	// and 2^(62-s) leaves with the zero point in one constant.
	w("static inline __m256i KILN_SYMBOL_rsum(__m256i p) {\n")
	w("  const __m256i b = _mm256_and_si256(_mm256_srli_epi64(p, %d), _mm256_set1_epi64x(1));\n", e.shift)
	w("  return _mm256_add_epi64(_mm256_add_epi64(p, _mm256_set1_epi64x(INT64_C(%d))), b);\n}\n", roundBias(e.shift))
	zpb := e.zp - int64(1)<<(62-e.shift)
	// rq8v: a bias and a multiplier per lane (the depthwise block
	// form's eight channels); rq8: one of each for all lanes; rq8vf:
	// rq8v, or rq8n when the caller found its multipliers free of
	// ties (rqn), given the odd lanes' multipliers too.
	w("static inline __m256i KILN_SYMBOL_rq8v(__m256i v, __m256i bv, __m256i mv);\n")
	if e.shift >= 32 {
		k.tieFree(w, zpb)
	}
	fast := "0"
	w("static inline __attribute__((unused)) __m256i KILN_SYMBOL_rq8vf(__m256i v, __m256i bv, __m256i mv, __m256i mvo, int fast) {\n")
	if e.shift >= 33 {
		fast = "KILN_SYMBOL_rqn(m)"
		w("  if (fast) return KILN_SYMBOL_rq8n(v, bv, mv, mvo);\n")
	} else {
		w("  (void)mvo; (void)fast;\n")
	}
	w("  return KILN_SYMBOL_rq8v(v, bv, mv);\n}\n")
	w("static inline __attribute__((unused)) __m256i KILN_SYMBOL_rq8(__m256i v, int32_t b, int32_t m) {\n")
	w("  const __m256i mv = _mm256_set1_epi32(m);\n")
	w("  return KILN_SYMBOL_rq8vf(v, _mm256_set1_epi32(b), mv, mv, %s);\n}\n", fast)
	w("static inline __m256i KILN_SYMBOL_rq8v(__m256i v, __m256i bv, __m256i mv) {\n")
	w("  v = _mm256_add_epi32(v, bv);\n")
	w("  const __m256i pe = _mm256_mul_epi32(v, mv), po = _mm256_mul_epi32(_mm256_srli_epi64(v, 32), _mm256_srli_epi64(mv, 32));\n")
	if e.shift >= 32 {
		// From shift 32 on, |p| / 2^s <= 2^62 / 2^32: every quotient
		// fits int32, so the zero point and the clamp work on the
		// eight 32-bit lanes at once. The odd lanes' quotients are
		// shifted by s - 32, straight into the upper halves the
		// blend takes; the bias leaves modulo 2^32.
		w("  const __m256i qe = _mm256_srli_epi64(KILN_SYMBOL_rsum(pe), %d), qo = _mm256_srli_epi64(KILN_SYMBOL_rsum(po), %d);\n", e.shift, e.shift-32)
		w("  return KILN_SYMBOL_clamp8(_mm256_add_epi32(_mm256_blend_epi32(qe, qo, 0xAA), _mm256_set1_epi32((int32_t)%dU)));\n}\n", uint32(zpb))
		return
	}
	// Below shift 32 a quotient can pass int32: the zero point and
	// the clamp work on the 64-bit lanes.
	w("  const __m256i z = _mm256_set1_epi64x(INT64_C(%d)), lo = _mm256_set1_epi64x(%d), hi = _mm256_set1_epi64x(%d);\n", zpb, e.lo, e.hi)
	w("  __m256i qe = _mm256_add_epi64(_mm256_srli_epi64(KILN_SYMBOL_rsum(pe), %d), z), qo = _mm256_add_epi64(_mm256_srli_epi64(KILN_SYMBOL_rsum(po), %d), z);\n", e.shift, e.shift)
	w("  qe = _mm256_blendv_epi8(_mm256_blendv_epi8(qe, lo, _mm256_cmpgt_epi64(lo, qe)), hi, _mm256_cmpgt_epi64(qe, hi));\n")
	w("  qo = _mm256_blendv_epi8(_mm256_blendv_epi8(qo, lo, _mm256_cmpgt_epi64(lo, qo)), hi, _mm256_cmpgt_epi64(qo, hi));\n")
	w("  return _mm256_blend_epi32(qe, _mm256_slli_epi64(qo, 32), 0xAA);\n}\n")
	// Already within [lo, hi].
	w("static inline __attribute__((unused)) __m256i KILN_SYMBOL_sat8(__m256i q) { return q; }\n")
}

// tieFree writes, for shifts from 32 on, the AVX2 requantization's
// helpers on 32-bit lanes:
//
//   - KILN_SYMBOL_clamp8 clamps to [lo, hi] where a bound is narrower
//     than the output type's range: the callers narrow with saturating
//     packs, which apply the type's own limits;
//   - KILN_SYMBOL_sat8 clamps to all of [lo, hi], for callers that store
//     without saturation;
//
// and, from shift 33 on, the requantization without the tie test:
//
//   - KILN_SYMBOL_rqn(m) reports whether multiplier m rules ties out: m
//     has a set bit below bit s-32 (or is 0). A product p of such an m
//     and an int32 sum (whose trailing zeros number at most 31) then has
//     at most s-2 trailing zeros, so p / 2^s is never a tie (p mod 2^s =
//     2^(s-1) would take s-1), and rounding half to even is rounding
//     half up, floor((p + 2^(s-1)) / 2^s): op.RequantizeValue's result
//     without the parity bit's three operations per half.
//   - KILN_SYMBOL_rq8n(v, bv, mv, mvo) is that rounding for eight lanes,
//     with the odd lanes' multipliers mvo (mv itself when every lane has
//     the same).
//
// Quantizers' multipliers (31 significant bits, scales that are no power
// of two) pass rqn with probability 1 - 2^-(s-32) each; a multiplier
// that does not (a scale of 2^-k) takes the exact rq8v.
func (k *qconvKernel) tieFree(w func(string, ...any), zpb int64) {
	e := k.epi
	tlo, thi := int64(0), int64(255)
	if e.signed {
		tlo, thi = -128, 127
	}
	w("static inline __m256i KILN_SYMBOL_clamp8(__m256i q) {\n")
	if e.lo > tlo {
		w("  q = _mm256_max_epi32(q, _mm256_set1_epi32(%d));\n", e.lo)
	}
	if e.hi < thi {
		w("  q = _mm256_min_epi32(q, _mm256_set1_epi32(%d));\n", e.hi)
	}
	w("  return q;\n}\n")
	w("static inline __attribute__((unused)) __m256i KILN_SYMBOL_sat8(__m256i q) {\n")
	w("  return _mm256_min_epi32(_mm256_max_epi32(q, _mm256_set1_epi32(%d)), _mm256_set1_epi32(%d));\n}\n", e.lo, e.hi)
	if e.shift < 33 {
		return
	}
	w("static inline __attribute__((unused)) int KILN_SYMBOL_rqn(int32_t m) { return ((uint32_t)m & %dU) != 0U || m == 0; }\n", uint32(1)<<(e.shift-32)-1)
	// floor((p + 2^(s-1)) / 2^s) by a logical shift of p + 2^(s-1) +
	// 2^62 (in [0, 2^64) as in rsum), 2^(62-s) leaving with the zero
	// point (zpb).
	w("static inline __m256i KILN_SYMBOL_rq8n(__m256i v, __m256i bv, __m256i mv, __m256i mvo) {\n")
	w("  v = _mm256_add_epi32(v, bv);\n")
	w("  const __m256i r = _mm256_set1_epi64x(INT64_C(%d));\n", int64(1)<<62+int64(1)<<(e.shift-1))
	w("  const __m256i qe = _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epi32(v, mv), r), %d);\n", e.shift)
	w("  const __m256i qo = _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(v, 32), mvo), r), %d);\n", e.shift-32)
	w("  return KILN_SYMBOL_clamp8(_mm256_add_epi32(_mm256_blend_epi32(qe, qo, 0xAA), _mm256_set1_epi32((int32_t)%dU)));\n}\n", uint32(zpb))
}

// foldedBias is the x86 stores' bias of output channel o: bias[o] less
// the zero point's share of the sums, izp times the weight sum, modulo
// 2^32 like every step of the sum, so that the requantization's one
// addition applies both.
func (k *qconvKernel) foldedBias(o string) string {
	return fmt.Sprintf("(int32_t)((uint32_t)bias[%s] - (uint32_t)(%d * wsum[%s]))", o, k.p.izpu(), o)
}

// multExpr is the multiplier of output channel o in the kernel's C.
func (k *qconvKernel) multExpr(o string) string {
	if k.epi.perChannel {
		return "mult[" + o + "]"
	}
	return "mult[0]"
}

// emitScalar stores one output value v (the sum less the zero-point
// term) of channel o at pixel offset j of the tile.
func (k *qconvKernel) emitScalar(o, j, v string) string {
	if k.epi == nil {
		return fmt.Sprintf("out[(int64_t)(%s) * P + p0 + %s] = %s;", o, j, v)
	}
	return fmt.Sprintf("out[(int64_t)(%s) * P + p0 + %s] = KILN_SYMBOL_rq(%s, bias[%s], %s);", o, j, v, o, k.multExpr(o))
}

// mainScalar is the portable C: one channel, one pixel at a time.
func (k *qconvKernel) mainScalar(w func(string, ...any)) {
	w("  for (int32_t o = 0; o < %d; ++o) {\n", k.p.oc)
	w("    int32_t acc[NP];\n    for (int32_t j = 0; j < NP; ++j) acc[j] = 0;\n")
	xt := "uint8_t"
	if k.p.signedLayout() {
		xt = "int8_t"
	}
	k.kLoop(w, "    ")
	w("      const int32_t b0 = KILN_QB(o, k4, 0), b1 = KILN_QB(o, k4, 1), b2 = KILN_QB(o, k4, 2), b3 = KILN_QB(o, k4, 3);\n")
	// lane is lane j's word in the input: consecutive, or (tiles of two
	// rows) eight of each row.
	lane := "xk + j * 4"
	if k.dir != nil && k.dir.pairs {
		lane = fmt.Sprintf("xk + (j / %d * %d + j %% %d) * 4", k.dir.pc, k.dir.wp, k.dir.pc)
	}
	w("      for (int32_t j = 0; j < NP; ++j) {\n")
	w("        %s aa[4];\n        memcpy(aa, %s, 4);\n", xt, lane)
	w("        acc[j] += (int32_t)aa[0] * b0 + (int32_t)aa[1] * b1 + (int32_t)aa[2] * b2 + (int32_t)aa[3] * b3;\n      }\n")
	w("    }\n")
	w("    const int32_t comp = %d * wsum[o];\n", k.p.izpu())
	w("    for (int32_t j = 0; j < np; ++j) %s\n", k.emitScalar("o", "j", "(int32_t)((uint32_t)acc[j] - (uint32_t)comp)"))
	if k.dir != nil && k.dir.pairs {
		w("    for (int32_t j = 0; j < np; ++j) %s\n", k.emitScalar("o", fmt.Sprintf("%d + j", k.dir.rl), fmt.Sprintf("(int32_t)((uint32_t)acc[%d + j] - (uint32_t)comp)", k.dir.pc)))
	}
	w("  }\n")
}

// mainAVX512 is the AVX-512 VNNI block: 8 channels x 32 pixels in 16
// accumulators, then one channel at a time. As in mainAVX2, the
// multiplications are a function of their own, KILN_SYMBOL_mac
// (returned, for the source's prelude), that leaves the sums of a chunk
// of channels in a buffer, which the kernel then stores channel by
// channel: in one loop nest with the requantization gcc 12 kept copies
// of the accumulators on the stack inside the multiply loop (resnet18's
// 64-channel 3x3 convolution 0.61 against 0.39 ms, with dotHelper's
// instruction in both).
func (k *qconvKernel) mainAVX512(kw func(string, ...any)) string {
	mr := k.mr
	var hb strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&hb, format, a...) }
	k.macHeader(w, "__m512i")
	// x1: the second vector's words, sixteen words on or (pairs) the
	// next row's.
	x1 := "64"
	if d := k.dir; d != nil && d.pairs {
		x1 = fmt.Sprint(d.wp * 4)
	}
	w("  int32_t o = o0;\n")
	w("  for (; o + %d <= o1; o += %d) {\n", mr, mr)
	for m := int64(0); m < mr; m++ {
		w("    __m512i a%d0 = _mm512_setzero_si512(), a%d1 = _mm512_setzero_si512();\n", m, m)
	}
	loads := func() {
		k.kLoop(w, "    ")
		w("      const __m512i x0 = _mm512_loadu_si512((const void*)xk), x1 = _mm512_loadu_si512((const void*)(xk + %s));\n", x1)
	}
	loads()
	for m := int64(0); m < mr; m++ {
		w("      { const __m512i b = _mm512_set1_epi32(KILN_QW(o + %d, k4)); a%d0 = KILN_SYMBOL_dp(a%d0, x0, b); a%d1 = KILN_SYMBOL_dp(a%d1, x1, b); }\n", m, m, m, m, m)
	}
	w("    }\n")
	for m := int64(0); m < mr; m++ {
		w("    buf[((int64_t)o + %d - o0) * 2] = a%d0; buf[((int64_t)o + %d - o0) * 2 + 1] = a%d1;\n", m, m, m, m)
	}
	w("  }\n")
	w("  for (; o < o1; ++o) {\n")
	w("    __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();\n")
	loads()
	w("      const __m512i b = _mm512_set1_epi32(KILN_QW(o, k4));\n")
	w("      a0 = KILN_SYMBOL_dp(a0, x0, b); a1 = KILN_SYMBOL_dp(a1, x1, b);\n    }\n")
	w("    buf[((int64_t)o - o0) * 2] = a0; buf[((int64_t)o - o0) * 2 + 1] = a1;\n")
	w("  }\n")
	k.undefQW(w)
	w("}\n")
	// The kernel: chunks of channels whose sums fill at most 16 KiB.
	ch := max(16384/128/mr*mr, mr)
	kw("  const __mmask16 m0 = np >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << np) - 1u);\n")
	if k.dir != nil && k.dir.pairs {
		// The second vector is the next row's np columns.
		kw("  const __mmask16 m1 = m0;\n")
	} else {
		kw("  const __mmask16 m1 = np >= 32 ? (__mmask16)0xffff : np <= 16 ? (__mmask16)0 : (__mmask16)((1u << (np - 16)) - 1u);\n")
	}
	src := "(const uint8_t*)(const void*)xp"
	if k.dir != nil {
		src = "xd"
	}
	kw("  __m512i buf[%d];\n", ch*2)
	kw("  for (int32_t o0 = 0; o0 < %d; o0 += %d) {\n", k.p.oc, ch)
	kw("    const int32_t o1 = o0 + %d < %d ? o0 + %d : %d;\n", ch, k.p.oc, ch, k.p.oc)
	kw("    KILN_SYMBOL_mac(%s, w, o0, o1, buf);\n", src)
	kw("    int32_t o = o0;\n")
	k.storePairs512(kw)
	kw("    for (; o < o1; ++o) {\n")
	kw("      const __m512i s0 = buf[(o - o0) * 2], s1 = buf[(o - o0) * 2 + 1];\n")
	k.store512(kw, "o", "s")
	kw("    }\n  }\n")
	return hb.String()
}

// dotHelper defines KILN_SYMBOL_dp(acc, x, b), acc plus the four-byte
// dot products of x's unsigned and b's signed bytes in each 32-bit lane
// (vpdpbusd), for the VNNI kernels, and with vpmaddubsw for AVX2 where
// the weight's pairs are bounded (qconvParams.maddubs; "" for the
// others). Under GNU C the VNNI one is
// the instruction in an asm statement: gcc 12 compiles the intrinsic
// with a register copy of the accumulator after every instruction, and
// with many accumulators in a loop it spilled some to the stack on each
// step (0.61 against 0.39 ms for resnet18's 64-channel 3x3 convolution
// with AVX-512 VNNI).
func (k *qconvKernel) dotHelper() string {
	var vt, asm, cons, intr string
	switch k.p.isa {
	case qconvAVX512VNNI:
		vt, asm, cons, intr = "__m512i", "vpdpbusd", "v", "_mm512_dpbusd_epi32"
	case qconvAVXVNNI:
		// {vex}: the AVX-VNNI encoding, not AVX512-VL's EVEX one.
		vt, asm, cons, intr = "__m256i", "%{vex%} vpdpbusd", "x", "_mm256_dpbusd_avx_epi32"
	case qconvAVX2:
		if !k.p.maddubs {
			return ""
		}
		// The pairs' bound rules out saturation: vpmaddubsw's 16-bit
		// pair sums are exact, vpmaddwd by ones adds them in pairs. In
		// asm for the same reason as vpdpbusd: with the intrinsics gcc
		// 12 kept the broadcast form's ten accumulators on the stack.
		return "static inline __attribute__((unused)) __m256i KILN_SYMBOL_dp(__m256i acc, __m256i x, __m256i b) {\n" +
			"#if defined(__GNUC__)\n  __m256i t;\n" +
			"  __asm__(\"vpmaddubsw %[b], %[x], %[t]\\n\\tvpmaddwd %[one], %[t], %[t]\\n\\tvpaddd %[t], %[acc], %[acc]\"\n" +
			"          : [acc] \"+x\"(acc), [t] \"=&x\"(t) : [x] \"x\"(x), [b] \"x\"(b), [one] \"x\"(_mm256_set1_epi16(1)));\n  return acc;\n" +
			"#else\n  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x, b), _mm256_set1_epi16(1)));\n#endif\n}\n"
	default:
		return ""
	}
	return fmt.Sprintf("static inline __attribute__((unused)) %s KILN_SYMBOL_dp(%s acc, %s x, %s b) {\n"+
		"#if defined(__GNUC__)\n  __asm__(\"%s %%2, %%1, %%0\" : \"+%s\"(acc) : \"%s\"(x), \"%s\"(b));\n  return acc;\n"+
		"#else\n  return %s(acc, x, b);\n#endif\n}\n", vt, vt, vt, vt, asm, cons, cons, cons, intr)
}

// store512 stores the two accumulator vectors acc0, acc1 of channel o:
// the sums less the zero-point term, as int32, or requantized to bytes.
func (k *qconvKernel) store512(w func(string, ...any), o, acc string) {
	second := k.second512()
	if k.epi == nil {
		w("    { const __m512i c = _mm512_set1_epi32(%d * wsum[%s]);\n", k.p.izpu(), o)
		w("      int32_t* d = out + (int64_t)(%s) * P + p0;\n", o)
		w("      _mm512_mask_storeu_epi32(d, m0, _mm512_sub_epi32(%s0, c)); _mm512_mask_storeu_epi32(d + %d, m1, _mm512_sub_epi32(%s1, c)); }\n", acc, second, acc)
		return
	}
	w("    { const int32_t b = %s, mm = %s;\n", k.foldedBias(o), k.multExpr(o))
	w("      void* d = (void*)(out + (int64_t)(%s) * P + p0);\n", o)
	w("      _mm_mask_storeu_epi8(d, m0, KILN_SYMBOL_rq16(%s0, b, mm));\n", acc)
	w("      _mm_mask_storeu_epi8((char*)d + %d, m1, KILN_SYMBOL_rq16(%s1, b, mm)); }\n", second, acc)
}

// second512 is the output offset of a channel's second accumulator
// vector in the AVX-512 kernel: sixteen pixels on, or (pairs) the next
// row's first.
func (k *qconvKernel) second512() int64 {
	if k.dir != nil && k.dir.pairs {
		return k.dir.rl
	}
	return 16
}

// storePairs512 writes the loop that requantizes channels o and o + 1
// of buf together while two remain, narrowing their four vectors with
// one KILN_SYMBOL_pk4 (nothing when the kernel stores int32 sums).
func (k *qconvKernel) storePairs512(w func(string, ...any)) {
	if k.epi == nil {
		return
	}
	second := k.second512()
	w("    for (; o + 2 <= o1; o += 2) {\n")
	w("      const int32_t ba = %s, ma = %s, bb = %s, mb = %s;\n", k.foldedBias("o"), k.multExpr("o"), k.foldedBias("o + 1"), k.multExpr("o + 1"))
	w("      const __m512i r = KILN_SYMBOL_pk4(KILN_SYMBOL_rq16n(buf[(o - o0) * 2], ba, ma), KILN_SYMBOL_rq16n(buf[(o - o0) * 2 + 1], ba, ma),\n")
	w("          KILN_SYMBOL_rq16n(buf[(o + 1 - o0) * 2], bb, mb), KILN_SYMBOL_rq16n(buf[(o + 1 - o0) * 2 + 1], bb, mb));\n")
	w("      uint8_t* d = (uint8_t*)(void*)(out + (int64_t)o * P + p0);\n")
	if second == 16 {
		w("      const __mmask32 mk = (__mmask32)m0 | ((__mmask32)m1 << 16);\n")
		w("      _mm256_mask_storeu_epi8((void*)d, mk, _mm512_castsi512_si256(r));\n")
		w("      _mm256_mask_storeu_epi8((void*)(d + P), mk, _mm512_extracti64x4_epi64(r, 1));\n")
	} else {
		w("      _mm_mask_storeu_epi8((void*)d, m0, _mm512_castsi512_si128(r));\n")
		w("      _mm_mask_storeu_epi8((void*)(d + %d), m1, _mm512_extracti32x4_epi32(r, 1));\n", second)
		w("      _mm_mask_storeu_epi8((void*)(d + P), m0, _mm512_extracti32x4_epi32(r, 2));\n")
		w("      _mm_mask_storeu_epi8((void*)(d + P + %d), m1, _mm512_extracti32x4_epi32(r, 3));\n", second)
	}
	w("    }\n")
}

// splitX widens the AVX2 kernel's input vectors (eight pixels of four
// uint8 channels each) into 16-bit lanes: xe holds channels 0 and 2 of
// each pixel, xo channels 1 and 3.
func (k *qconvKernel) splitX(w func(string, ...any), xs ...string) {
	for _, x := range xs {
		w("      const __m256i %se = _mm256_and_si256(%s, _mm256_set1_epi16(0xff)), %so = _mm256_srli_epi16(%s, 8);\n", x, x, x, x)
	}
}

// weight256 is the C declaring the broadcast weight of channel o at k4:
// b, the word of four int8 channels (VNNI), or be and bo, its channels
// 0 and 2 and its channels 1 and 3 as int16 (AVX2, from the widened
// weight).
func (k *qconvKernel) weight256(o string) string {
	if !k.w16 {
		return fmt.Sprintf("const __m256i b = _mm256_set1_epi32(KILN_QW(%s, k4));", o)
	}
	return fmt.Sprintf("const __m256i be = _mm256_set1_epi32(KILN_QW2(%s, k4, 0)), bo = _mm256_set1_epi32(KILN_QW2(%s, k4, 1));", o, o)
}

// dot256 is the C statement acc += the four-channel dot products of the
// pixels of x with the broadcast weight (weight256): one vpdpbusd with
// AVX-VNNI; without it, vpmaddubsw and vpmaddwd by ones when the weight's
// pairs are bounded (maddubs), else two vpmaddwd of the 16-bit halves
// (splitX) with the weight's, widened by the caller (w16) or here, exact
// where vpmaddubsw's 16-bit pair sums would saturate.
func (k *qconvKernel) dot256(acc, x, b string) string {
	switch {
	case k.p.isa != qconvAVX2:
		return fmt.Sprintf("%s = KILN_SYMBOL_dp(%s, %s, %s);", acc, acc, x, b)
	case k.p.maddubs:
		return fmt.Sprintf("%s = _mm256_add_epi32(%s, _mm256_madd_epi16(_mm256_maddubs_epi16(%s, %s), ones16));", acc, acc, x, b)
	case k.w16:
		return fmt.Sprintf("%s = _mm256_add_epi32(%s, _mm256_add_epi32(_mm256_madd_epi16(%se, %se), _mm256_madd_epi16(%so, %so)));", acc, acc, x, b, x, b)
	}
	// The weight word's bytes sign-extended in place.
	return fmt.Sprintf("%s = _mm256_add_epi32(%s, _mm256_add_epi32(_mm256_madd_epi16(%se, _mm256_srai_epi16(_mm256_slli_epi16(%s, 8), 8)), _mm256_madd_epi16(%so, _mm256_srai_epi16(%s, 8))));", acc, acc, x, b, x, b)
}

// mainAVX2 is the AVX-VNNI (or AVX2) block: 4 channels x 16 pixels in 8
// ymm accumulators (the direct form's eight-pixel tiles: 8 channels x 8
// pixels); a partial tile is stored through a buffer.
//
// With requantization the multiplications are a function of their own,
// KILN_SYMBOL_mac (returned, for the source's prelude), kept out of line:
// it computes the sums of a chunk of channels into a buffer, and the
// kernel then requantizes and stores them channel by channel. Written in
// one loop nest, the epilogue decided the multiply loop's registers: gcc
// 12 held its constants across the loop, and a change to the
// requantization made resnet18's eight-channel kernels spill
// accumulators there (docs/performance.md, 2026-11-27).
func (k *qconvKernel) mainAVX2(kw func(string, ...any)) string {
	mr, izpu := k.mr, k.p.izpu()
	// w writes to the kernel, or to the multiply function while it is
	// written.
	w := kw
	// nv: the tile's vectors of eight pixels (one for the direct form's
	// eight-pixel tiles, else two).
	nv := k.np / 8
	// pairs: x1 is the next row's eight pixels (qconvDirect.pairs), and
	// the second vector's results go to that row.
	pairs := k.dir != nil && k.dir.pairs
	store := func(ind, acc, o string) {
		if pairs {
			k.storePairs(w, ind, acc, o)
			return
		}
		if e := k.epi; e != nil {
			// The requantized values (within the output type's range,
			// so the saturating packs are exact) narrowed to bytes in
			// pixel order: packs_epi32 interleaves the two vectors'
			// halves, the permute puts them back in order.
			pack := e.pack16()
			w("%s{ const int32_t b = %s, mm = %s;\n", ind, k.foldedBias(o), k.multExpr(o))
			w("%s  void* d = (void*)(out + (int64_t)(%s) * P + p0);\n", ind, o)
			if nv == 1 {
				w("%s  const __m256i r = KILN_SYMBOL_rq8(%s0, b, mm);\n", ind, acc)
				w("%s  const __m128i h = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));\n", ind)
				w("%s  const __m128i q = %s(h, h);\n", ind, pack)
				w("%s  if (np == NP) _mm_storel_epi64((__m128i*)d, q);\n", ind)
			} else {
				w("%s  const __m256i h = _mm256_permute4x64_epi64(_mm256_packs_epi32(KILN_SYMBOL_rq8(%s0, b, mm), KILN_SYMBOL_rq8(%s1, b, mm)), 0xD8);\n", ind, acc, acc)
				w("%s  const __m128i q = %s(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));\n", ind, pack)
				w("%s  if (np == NP) _mm_storeu_si128((__m128i*)d, q);\n", ind)
			}
			w("%s  else { unsigned char tmp[16]; _mm_storeu_si128((__m128i*)(void*)tmp, q); memcpy(d, tmp, (size_t)np); } }\n", ind)
			return
		}
		dst := "out + (int64_t)(" + o + ") * P + p0"
		if nv == 1 {
			w("%sif (np == NP) _mm256_storeu_si256((__m256i*)(%s), %s0);\n", ind, dst, acc)
			w("%selse { int32_t tmp[8]; _mm256_storeu_si256((__m256i*)tmp, %s0); for (int32_t j = 0; j < np; ++j) (%s)[j] = tmp[j]; }\n", ind, acc, dst)
			return
		}
		w("%sif (np == NP) { _mm256_storeu_si256((__m256i*)(%s), %s0); _mm256_storeu_si256((__m256i*)(%s + 8), %s1); }\n", ind, dst, acc, dst, acc)
		w("%selse { int32_t tmp[16]; _mm256_storeu_si256((__m256i*)tmp, %s0); _mm256_storeu_si256((__m256i*)(tmp + 8), %s1); for (int32_t j = 0; j < np; ++j) (%s)[j] = tmp[j]; }\n", ind, acc, acc, dst)
	}
	// loads declares the tile's input vectors x0 (and x1) for k4.
	loads := func(ind string) {
		w("%sconst __m256i x0 = _mm256_loadu_si256((const __m256i*)(const void*)xk);\n", ind)
		xs := []string{"x0"}
		if nv == 2 {
			off := "32"
			if pairs {
				off = fmt.Sprint(k.dir.wp * 4)
			}
			w("%sconst __m256i x1 = _mm256_loadu_si256((const __m256i*)(const void*)(xk + %s));\n", ind, off)
			xs = append(xs, "x1")
		}
		if k.p.isa == qconvAVX2 && !k.p.maddubs {
			k.splitX(w, xs...)
		}
	}
	// dots is the statements adding channel o's products to its
	// accumulators acc0 (and acc1).
	dots := func(acc, o string) string {
		st := k.weight256(o) + " " + k.dot256(acc+"0", "x0", "b")
		if nv == 2 {
			st += " " + k.dot256(acc+"1", "x1", "b")
		}
		return st
	}
	zero := func(ind, acc string) {
		if nv == 2 {
			w("%s__m256i %s0 = _mm256_setzero_si256(), %s1 = _mm256_setzero_si256();\n", ind, acc, acc)
		} else {
			w("%s__m256i %s0 = _mm256_setzero_si256();\n", ind, acc)
		}
	}
	// comp subtracts the zero point's share from channel o's int32 sums
	// (a requantizing store folds it into the bias: foldedBias).
	comp := func(ind, acc, o string) {
		w("%sconst __m256i c = _mm256_set1_epi32(%d * wsum[%s]); %s0 = _mm256_sub_epi32(%s0, c);", ind, izpu, o, acc, acc)
		if nv == 2 {
			w(" %s1 = _mm256_sub_epi32(%s1, c);", acc, acc)
		}
		w("\n")
	}
	// keep is what the group loops do with channel o's sums acc:
	// subtract the zero point's share and store them as int32, or (the
	// multiply function) leave them in the chunk's buffer.
	keep := func(ind, acc, o string) {
		w("%s{\n", ind)
		comp(ind+"  ", acc, o)
		store(ind+"  ", acc, o)
		w("%s}\n", ind)
	}
	o1 := fmt.Sprint(k.p.oc)
	var hb strings.Builder
	if k.epi != nil {
		w = func(format string, a ...any) { fmt.Fprintf(&hb, format, a...) }
		k.macHeader(w, "__m256i")
		o1 = "o1"
		keep = func(ind, acc, o string) {
			w("%s_mm256_store_si256(buf + ((int64_t)(%s) - o0) * %d, %s0);\n", ind, o, nv, acc)
			if nv == 2 {
				w("%s_mm256_store_si256(buf + ((int64_t)(%s) - o0) * 2 + 1, %s1);\n", ind, o, acc)
			}
		}
	}
	if k.p.maddubs {
		w("  const __m256i ones16 = _mm256_set1_epi16(1);\n")
	}
	if k.epi != nil {
		w("  int32_t o = o0;\n")
	} else {
		w("  int32_t o = 0;\n")
	}
	w("  for (; o + %d <= %s; o += %d) {\n", mr, o1, mr)
	for m := int64(0); m < mr; m++ {
		zero("    ", fmt.Sprintf("a%d", m))
	}
	k.kLoop(w, "    ")
	loads("      ")
	for m := int64(0); m < mr; m++ {
		w("      { %s }\n", dots(fmt.Sprintf("a%d", m), fmt.Sprintf("o + %d", m)))
		if k.p.maddubs {
			// An empty asm holding the channel's accumulators in
			// registers: without it gcc (-march=znver3) computes all
			// channels' products first and spills accumulators to the
			// stack, which halved the kernel's speed.
			if nv == 2 {
				w("      __asm__(\"\" : \"+x\"(a%d0), \"+x\"(a%d1));\n", m, m)
			} else {
				w("      __asm__(\"\" : \"+x\"(a%d0));\n", m)
			}
		}
	}
	w("    }\n")
	for m := int64(0); m < mr; m++ {
		keep("    ", fmt.Sprintf("a%d", m), fmt.Sprintf("o + %d", m))
	}
	w("  }\n")
	w("  for (; o < %s; ++o) {\n", o1)
	zero("    ", "a")
	k.kLoop(w, "    ")
	loads("      ")
	w("      { %s }\n    }\n", dots("a", "o"))
	keep("    ", "a", "o")
	w("  }\n")
	if k.epi == nil {
		return ""
	}
	k.undefQW(w)
	w("}\n")
	// The kernel: chunks of channels whose sums fill at most 16 KiB.
	w = kw
	ch := max(16384/(32*nv)/mr*mr, mr)
	src := "xd"
	if k.dir == nil {
		src = "(const uint8_t*)(const void*)xp"
	}
	w("  __m256i buf[%d];\n", ch*nv)
	w("  for (int32_t o0 = 0; o0 < %d; o0 += %d) {\n", k.p.oc, ch)
	w("    const int32_t o1 = o0 + %d < %d ? o0 + %d : %d;\n", ch, k.p.oc, ch, k.p.oc)
	w("    KILN_SYMBOL_mac(%s, w, o0, o1, buf);\n", src)
	w("    for (int32_t o = o0; o < o1; ++o) {\n")
	w("      const __m256i s0 = buf[(o - o0) * %d]", nv)
	if nv == 2 {
		w(", s1 = buf[(o - o0) * 2 + 1]")
	}
	w(";\n")
	store("      ", "s", "o")
	w("    }\n  }\n")
	return hb.String()
}

// macHeader opens the x86 kernels' multiply function (mainAVX2,
// mainAVX512; vt: the buffer's vector type): the sums of channels
// [o0, o1) of the tile whose words start at src (the tile's copy xp, or
// the direct form's xd), into buf, the tile's vectors per channel.
func (k *qconvKernel) macHeader(w func(string, ...any), vt string) {
	wt := "int8_t"
	if k.w16 {
		wt = "int16_t"
	}
	w("static __attribute__((noinline)) void KILN_SYMBOL_mac(const uint8_t* restrict src, const %s* restrict w, int32_t o0, int32_t o1, %s* restrict buf) {\n", wt, vt)
	w("  enum { K4 = %d, NP = %d };\n", k.k4, k.np)
	if d := k.dir; d != nil {
		d.taps(w, k.p)
		w("  const uint8_t* restrict xd = src;\n")
	} else {
		w("  const uint32_t* restrict xp = (const uint32_t*)(const void*)src;\n")
	}
	k.defineQW(w)
}

// defineQW defines the kernel's weight-word macro over its parameter w:
// KILN_QW(o, k4), or KILN_QW2(o, k4, h) for the widened weight (w16).
func (k *qconvKernel) defineQW(w func(string, ...any)) {
	if k.w16 {
		w("#define KILN_QW2(o, k4, h) kiln_qw(w, (o), (k4), (h))\n")
	} else {
		w("#define KILN_QW(o, k4) kiln_qw(w, (o), (k4))\n")
	}
}

// undefQW ends defineQW's macro.
func (k *qconvKernel) undefQW(w func(string, ...any)) {
	if k.w16 {
		w("#undef KILN_QW2\n")
	} else {
		w("#undef KILN_QW\n")
	}
}

// storePairs stores channel o's results of a tile of two rows
// (qconvDirect.pairs): acc0 to row rr's np pixels at p0, acc1 to row
// rr+1's at p0 + RL.
func (k *qconvKernel) storePairs(w func(string, ...any), ind, acc, o string) {
	rl := k.dir.rl
	if e := k.epi; e != nil {
		pack := e.pack16()
		w("%s{ const int32_t b = %s, mm = %s;\n", ind, k.foldedBias(o), k.multExpr(o))
		w("%s  unsigned char* d = (unsigned char*)(void*)(out + (int64_t)(%s) * P + p0);\n", ind, o)
		// The packs interleave the two vectors' 128-bit halves: the
		// permute puts row rr's eight values in the low half.
		w("%s  const __m256i h = _mm256_permute4x64_epi64(_mm256_packs_epi32(KILN_SYMBOL_rq8(%s0, b, mm), KILN_SYMBOL_rq8(%s1, b, mm)), 0xD8);\n", ind, acc, acc)
		w("%s  const __m128i q = %s(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));\n", ind, pack)
		w("%s  if (np == 8) {\n", ind)
		w("%s    _mm_storel_epi64((__m128i*)(void*)d, q);\n", ind)
		w("%s    _mm_storel_epi64((__m128i*)(void*)(d + %d), _mm_srli_si128(q, 8));\n", ind, rl)
		w("%s  } else {\n", ind)
		w("%s    unsigned char tmp[16];\n    _mm_storeu_si128((__m128i*)(void*)tmp, q);\n", ind)
		w("%s    memcpy(d, tmp, (size_t)np);\n", ind)
		w("%s    memcpy(d + %d, tmp + 8, (size_t)np);\n", ind, rl)
		w("%s  } }\n", ind)
		return
	}
	dst := "out + (int64_t)(" + o + ") * P + p0"
	w("%s{ int32_t tmp[16];\n", ind)
	w("%s  _mm256_storeu_si256((__m256i*)tmp, %s0); _mm256_storeu_si256((__m256i*)(tmp + 8), %s1);\n", ind, acc, acc)
	w("%s  for (int32_t j = 0; j < np; ++j) (%s)[j] = tmp[j];\n", ind, dst)
	w("%s  for (int32_t j = 0; j < np; ++j) (%s)[%d + j] = tmp[8 + j]; }\n", ind, dst, rl)
}

// wlane is where input channel i of a weight word lies: in place, or for
// the AVX2 kernel's widened weight (qconvW16) at 0, 2, 1, 3.
func (k *qconvKernel) wlane(i int64) int64 {
	if k.w16 {
		return i%2*2 + i/2
	}
	return i
}

// Eval implements tir.Kernel: the tile's sums of (x - izp) * w, exact,
// from the laid-out input and the packed weight.
func (k *qconvKernel) Eval(args []tir.KernelArg) error {
	p := k.p
	nargs := 5
	if k.epi != nil {
		nargs = 7
	}
	if len(args) != nargs {
		return fmt.Errorf("qnn.conv2d kernel: want %d arguments, got %d", nargs, len(args))
	}
	outArg, tArg := args[3], args[4]
	var bm, mm tir.KernelMemory
	var bo, mo int64
	if k.epi != nil {
		outArg, tArg = args[5], args[6]
		var err error
		if bm, bo, err = args[3].Ptr(k.p.oc); err != nil {
			return fmt.Errorf("qnn.conv2d kernel: bias: %v", err)
		}
		nm := int64(1)
		if k.epi.perChannel {
			nm = k.p.oc
		}
		if mm, mo, err = args[4].Ptr(nm); err != nil {
			return fmt.Errorf("qnn.conv2d kernel: multiplier: %v", err)
		}
	}
	xlen := k.c4 * p.h * p.w * 4
	if k.dir != nil {
		xlen = k.dir.imageBytes(k.c4)
	}
	xm, xo, err := args[0].Ptr(xlen)
	if err != nil {
		return fmt.Errorf("qnn.conv2d kernel: data: %v", err)
	}
	wm, wo, err := args[1].Ptr(p.oc * k.k4 * 4)
	if err != nil {
		return fmt.Errorf("qnn.conv2d kernel: weight: %v", err)
	}
	pix := p.oh * p.ow
	om, oo, err := outArg.Ptr(p.oc * pix)
	if err != nil {
		return fmt.Errorf("qnn.conv2d kernel: output: %v", err)
	}
	t, izpu := tArg.Int, p.izpu()
	for j := int64(0); j < k.np; j++ {
		// The output position of lane j, and whether the tile stores it.
		q, ok := t*k.np+j, t*k.np+j < pix
		if k.dir != nil {
			q, ok = k.dir.lane(t, j)
		}
		if !ok {
			continue
		}
		oy, ox := q/p.ow, q%p.ow
		for o := int64(0); o < p.oc; o++ {
			var acc int64
			for c4 := int64(0); c4 < k.c4; c4++ {
				for ky := int64(0); ky < p.kh; ky++ {
					for kx := int64(0); kx < p.kw; kx++ {
						// The word's offset in the layout: the padded
						// plane's (direct form), or the input's, whose
						// padding reads the zero point (adds nothing).
						var at int64
						if d := k.dir; d != nil {
							at = (c4*d.planeWords() + d.koff[ky*p.kw+kx] + oy*d.wp + ox) * 4
						} else {
							iy, ix := oy*p.sh-p.ph+ky*p.dh, ox*p.sw-p.pw+kx*p.dw
							if iy < 0 || iy >= p.h || ix < 0 || ix >= p.w {
								continue
							}
							at = ((c4*p.h+iy)*p.w + ix) * 4
						}
						for i := int64(0); i < 4; i++ {
							xv := int64(xm.Float(xo + at + i))
							if p.signedLayout() {
								xv = int64(int8(uint8(xv)))
							}
							wv := int64(wm.Float(wo + ((o*k.k4+(c4*p.kh+ky)*p.kw+kx)*4 + k.wlane(i))))
							acc += (xv - izpu) * wv
						}
					}
				}
			}
			v := int64(int32(acc))
			if e := k.epi; e != nil {
				mi := int64(0)
				if e.perChannel {
					mi = o
				}
				v = int64(int32(v + int64(bm.Float(bo+o))))
				v = op.RequantizeValue(v, int64(mm.Float(mo+mi)), e.shift, e.zp, e.lo, e.hi)
			}
			om.SetFloat(oo+o*pix+q, float64(v))
		}
	}
	return nil
}
