package topi

import (
	"fmt"
	"strings"
)

// The direct form of the qnn.conv2d CPU kernel (AVX2, AVX-VNNI and
// AVX-512 VNNI, stride 1). The tile kernel's usual form copies, for
// every tile of pixels, the four-channel words each tap reads into a
// local array (xp[k4][pixel]) that its vector loads then read in order;
// on resnet18's 64-channel 3x3 convolutions that copy took 13 % of the
// kernel's time with AVX2 (1.45 against 1.27 ms with the copy left out)
// and a third with AVX-512 VNNI (0.43 against 0.29). With stride 1, the
// words a tap reads for consecutive output pixels of one row are
// consecutive in the input row, so once the input is laid out padded
// (the pack kernel writes the padding's zero-point words around each
// plane, [C/4][Hp][Wp]), every tap of a tile is one run of words the
// kernel loads in place:
//
//	word(c4, oy, ox, ky, kx) = X4p[c4][oy + ky*DH][ox + kx*DW]
//
// A tile is pixels of one output row, or eight columns of two rows
// (pairs); it never runs past a row's end into the next. A row's last
// tile computes the lanes past the row's end from the words that follow
// (the next padded row, or a slack after the last plane) and stores only
// the row's pixels. With a kernel one tap wide (1x1) the
// padded rows are the output rows back to back, and the whole plane is
// one row.
//
// Under AVX-512 VNNI a tile is two vectors of sixteen pixels: 32 of a
// row (or of a flat plane), or sixteen columns of two rows, where they
// compute at most a seventh more lanes than the usual form's tiles of 32
// (choose512). Under AVX2 and AVX-VNNI the direct form is chosen where
// it computes fewer lanes than the usual form's tiles of sixteen pixels,
// or as many (qconvDirectFor):
//   - A plane that is one row (1x1 stride-1 convolutions): tiles of
//     sixteen pixels and four channels, the usual form's, without the
//     copy, where the weight takes at most a quarter of the L1 data
//     cache. On mobilenet_v2 (AVX2, 7-bit weights) the 1x1 convolutions
//     with weights up to 6 KiB took up to a third less time (32 -> 16
//     channels on 112x112 0.22-0.25 -> 0.16-0.17 ms, 96 -> 24 on 56x56
//     0.16-0.18 -> 0.12-0.13, 144 -> 32 on 28x28 0.070 -> 0.062); with a
//     12 KiB weight (192 -> 64 on 14x14) it was up to a third slower,
//     and with 24 to 400 KiB (14x14 and 7x7 maps) up to 18 %: the
//     weight streams through L1 past the input, which the direct form
//     reads from one line per group of four channels, planes apart,
//     where the copy holds the words in consecutive lines; and the
//     copy's share of the time falls as the output channels grow.
//   - Rows of a wider kernel that hold whole vectors (56x56): tiles of
//     eight columns of two rows, sixteen pixels and four channels as
//     before, without the copy.
//   - Rows of a wider kernel where tiles of eight pixels (one vector,
//     eight channels) leave at least an eighth fewer lanes idle: a 7x7
//     map computes 56 lanes against 64, and resnet18's 512-channel 3x3
//     convolutions took 1.62 -> 1.49 ms. Eight-pixel tiles read the
//     weight twice as often per pixel: where they saved fewer lanes, or
//     none (56x56), or on flat planes with large weights (mobilenet_v2's
//     1x1 convolutions of 384 channels and more on 14x14 and 7x7, which
//     save 4 and 12 % of the lanes), they were up to 30 % slower.

// qconvDirect is the direct form's geometry.
type qconvDirect struct {
	// hp, wp: a phase plane, hp rows of wp words (stride 1: the padded
	// plane, Hp = OH + (KH-1)*DH rows of Wp = OW + (KW-1)*DW words).
	hp, wp int64
	// sh, sw: the stride, and phases the (row, column) phases of the
	// padded input the taps read (stride 1: only (0, 0)). Phase (a, b)'s
	// plane holds the padded input's words (r*sh + a, q*sw + b), so that
	// with any stride a tap reads consecutive words for consecutive
	// output pixels of a row: word(oy, ox) of tap (ky, kx) is word
	// (oy + ky*DH/sh, ox + kx*DW/sw) of phase (ky*DH%sh, kx*DW%sw).
	sh, sw int64
	phases [][2]int64
	rows   int64 // output rows as the tiles see them (1: the plane is one row)
	rl     int64 // their length in pixels
	np     int64 // pixels per tile: AVX2 16 (two vectors, four channels at a time) or 8 (one vector, eight channels); AVX-512 32 (two vectors)
	// pairs: a tile is pc columns of two rows (one vector each), rows rr
	// and rr+1 of an even number of rows, so that a map whose rows hold
	// whole vectors (56x56) is tiled without idle lanes (AVX2), or short
	// rows (14x14) fill the vectors (AVX-512).
	pairs bool
	pc    int64 // with pairs: the columns of each row in a tile (np / 2)
	tpr   int64 // tiles per row (per pair of rows)
	slack int64 // words after the last plane that the tiles may read
	koff  []int64
}

// qconvDirectFor returns the direct form for p, whose usual form has
// tiles of np pixels, or nil where it does not apply or would compute
// more lanes (AVX-512: more than a seventh more, choose512).
func qconvDirectFor(p qconvParams, np int64) *qconvDirect {
	avx512 := p.isa == qconvAVX512VNNI
	if p.isa != qconvAVX2 && p.isa != qconvAVXVNNI && !avx512 {
		return nil
	}
	// A row's last tile reads up to np-1 words past the row; past the
	// last plane, the slack holds them.
	slack := int64(16)
	if avx512 {
		slack = 32
	}
	d := newQConvPlanes(p, slack)
	if d == nil {
		return nil
	}
	usual := (p.oh*p.ow + np - 1) / np * np
	lanes := func(n int64) int64 { return d.rows * ((d.rl + n - 1) / n * n) }
	switch {
	case avx512:
		if !d.choose512(p, lanes, usual) {
			return nil
		}
	case d.rows == 1 && lanes(16) <= usual && p.oc*((p.c+3)/4)*p.kh*p.kw*4 <= p.l1/4:
		d.np = 16
	case d.rows > 1 && lanes(8)*8 <= usual*7:
		d.np = 8
	case d.rows > 1 && d.rows%2 == 0 && lanes(8) <= usual:
		d.np, d.pairs, d.pc = 16, true, 8
	default:
		return nil
	}
	d.tpr = (d.rl + d.np - 1) / d.np
	if d.pairs {
		d.tpr = (d.rl + d.pc - 1) / d.pc
	}
	return d
}

// newQConvPlanes is the padded layout's geometry for p (planes, phases,
// rows and tap offsets; no tiles) with slack words after the last
// plane, or nil where it does not apply: an output cut short of the
// input with stride 1, or planes past 2^31 bytes. Word (oy, ox) of phase
// plane 0 is output pixel (oy, ox)'s first tap; tap t adds koff[t].
func newQConvPlanes(p qconvParams, slack int64) *qconvDirect {
	if p.sh < 1 || p.sw < 1 || p.ph < 0 || p.pw < 0 {
		return nil
	}
	d := &qconvDirect{hp: p.oh + (p.kh-1)*p.dh/p.sh, wp: p.ow + (p.kw-1)*p.dw/p.sw, sh: p.sh, sw: p.sw}
	// With stride 1 the padded plane spans the input and its padding
	// before and after; anything else (an output cut short of the
	// input) keeps the usual form. (With a stride the phase planes hold
	// what the taps read, from coordinates: packByte.)
	if p.sh == 1 && p.sw == 1 && (d.hp < p.h+p.ph || d.wp < p.w+p.pw) {
		return nil
	}
	for ky := int64(0); ky < p.kh; ky++ {
		for kx := int64(0); kx < p.kw; kx++ {
			if ph := [2]int64{ky * p.dh % p.sh, kx * p.dw % p.sw}; d.phase(ph) < 0 {
				d.phases = append(d.phases, ph)
			}
		}
	}
	c4 := (p.c + 3) / 4
	d.slack = slack
	d.rows, d.rl = p.oh, p.ow
	if d.wp == p.ow {
		d.rows, d.rl = 1, p.oh*p.ow
	}
	if c4*(d.planeWords())*4+d.slack*4 > 1<<31-1 {
		return nil
	}
	for ky := int64(0); ky < p.kh; ky++ {
		for kx := int64(0); kx < p.kw; kx++ {
			ph := d.phase([2]int64{ky * p.dh % p.sh, kx * p.dw % p.sw})
			d.koff = append(d.koff, int64(ph)*d.phaseWords()+ky*p.dh/p.sh*d.wp+kx*p.dw/p.sw)
		}
	}
	return d
}

// phase is the index of phase ph in d.phases, or -1.
func (d *qconvDirect) phase(ph [2]int64) int {
	for i, q := range d.phases {
		if q == ph {
			return i
		}
	}
	return -1
}

// choose512 picks the AVX-512 direct form's tiles, two vectors of
// sixteen pixels: thirty-two pixels of a row (or of the flat plane), or
// sixteen columns of two rows; false where both compute more than a
// seventh more lanes than the usual form's tiles (usual). The usual form
// copies every tile's taps, which on resnet18's 64-channel 3x3
// convolution on 56x56 took a third of the kernel's time (0.43 against
// 0.29 ms without it), so the direct form pays where its idle lanes at
// the rows' ends are at most a seventh more: 56x56 (64 lanes a row either
// way), 28x28 (32 a row), 14x14 (pairs, no more lanes than the usual
// form) and every flat plane, but not 7x7 (32 lanes a row, or 16 with
// pairs, against 64 in all).
func (d *qconvDirect) choose512(p qconvParams, lanes func(int64) int64, usual int64) bool {
	switch rows := lanes(32); {
	case rows*7 <= usual*8 && (d.rows%2 != 0 || rows <= lanes(16)):
		d.np = 32
	case d.rows%2 == 0 && lanes(16)*7 <= usual*8:
		d.np, d.pairs, d.pc = 32, true, 16
	default:
		return false
	}
	return true
}

// phaseWords is the distance of the phase planes (with stride 1, of the
// padded planes) in words. A flat plane's is Hp x Wp rounded up to sixteen words, so that every plane
// starts on a 64-byte line and its tiles of sixteen words load whole
// lines (unaligned, half the loads of mobilenet_v2's 14x14 maps split
// across two lines, and their 1x1 convolutions took 10-30 % longer than
// with the copy). Rows keep Hp x Wp: their tiles start at any word of a
// row anyway, and on resnet18's 7x7 maps the planes of 81 words were
// faster than planes of 96 (1.49 against 1.58 ms), whose equal offsets
// put every plane's tile in the same cache sets.
func (d *qconvDirect) phaseWords() int64 {
	if d.rows > 1 {
		return d.hp * d.wp
	}
	return (d.hp*d.wp + 15) / 16 * 16
}

// planeWords is the distance in words of the groups of four channels:
// their phase planes, phaseWords apart.
func (d *qconvDirect) planeWords() int64 { return int64(len(d.phases)) * d.phaseWords() }

// imageBytes is the bytes of one image's laid-out input: the padded
// planes and the slack.
func (d *qconvDirect) imageBytes(c4 int64) int64 {
	return (c4*d.planeWords() + d.slack) * 4
}

// packSource is the pack kernel's C for the padded layout: plane c4 of
// X4p with the zero point's words around the input (with a stride, its
// phase planes), and after the last plane the slack, zero.
func (d *qconvDirect) packSource(p qconvParams, split rowSplit) string {
	if d.sh != 1 || d.sw != 1 {
		return d.phasePackSource(p, split)
	}
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	xt, flip := p.packTypes()
	c4 := (p.c + 3) / 4
	plane := p.h * p.w
	w("/* qnn.conv2d input, %d channels of %dx%d, in groups of four, padded to %dx%d. */\n", p.c, p.h, p.w, d.hp, d.wp)
	b.WriteString(split.packHead(xt))
	w("  const uint32_t z = %du;\n", p.izpWord())
	w("  uint8_t* restrict d = x4 + (int64_t)c4 * %d;\n", d.planeWords()*4)
	w("  const %s* s[4];\n  int32_t have = %d - c4 * 4;\n  if (have > 4) have = 4;\n", xt, p.c)
	w("  for (int32_t i = 0; i < 4; ++i) s[i] = x + (int64_t)(c4 * 4 + (i < have ? i : 0)) * %d;\n", plane)
	w("  for (int32_t py = r0; py < r1; ++py) {\n")
	w("    uint8_t* restrict r = d + (int64_t)py * %d;\n", d.wp*4)
	w("    const int32_t iy = py - %d;\n", p.ph)
	w("    if ((uint32_t)iy >= %du) {\n", p.h)
	w("      for (int32_t px = 0; px < %d; ++px) memcpy(r + px * 4, &z, 4);\n      continue;\n    }\n", d.wp)
	w("    for (int32_t px = 0; px < %d; ++px) memcpy(r + px * 4, &z, 4);\n", p.pw)
	w("    uint8_t* restrict ri = r + %d;\n", p.pw*4)
	w("    const int64_t o = (int64_t)iy * %d;\n", p.w)
	w("    if (have == 4) {\n")
	w("      const %s* restrict s0 = s[0] + o; const %s* restrict s1 = s[1] + o; const %s* restrict s2 = s[2] + o; const %s* restrict s3 = s[3] + o;\n", xt, xt, xt, xt)
	p.interleave4(w, "      ", "ri", fmt.Sprint(p.w), flip, 1)
	w("    } else {\n")
	w("      for (int32_t ix = 0; ix < %d; ++ix)\n", p.w)
	w("        for (int32_t i = 0; i < 4; ++i) ri[ix * 4 + i] = i < have ? (uint8_t)((uint8_t)s[i][o + ix]%s) : (uint8_t)0;\n", flip)
	w("    }\n")
	w("    for (int32_t px = %d; px < %d; ++px) memcpy(r + px * 4, &z, 4);\n", p.pw+p.w, d.wp)
	w("  }\n")
	if gap := d.planeWords() - d.hp*d.wp; gap > 0 {
		w("  if (r1 == %d) memset(d + %d, 0, %d);\n", d.hp, d.hp*d.wp*4, gap*4)
	}
	w("  if (c4 == %d && r1 == %d) memset(x4 + %d, 0, %d);\n", c4-1, d.hp, c4*d.planeWords()*4, d.slack*4)
	w("}\n")
	return b.String()
}

// packTypes is the pack kernels' C type of the input's values and the
// C that flips a value's top bit into the layout (empty when data and
// layout agree in sign).
func (p qconvParams) packTypes() (xt, flip string) {
	xt = "uint8_t"
	if p.signed {
		xt = "int8_t"
	}
	if p.flips() {
		flip = " ^ 0x80u"
	}
	return xt, flip
}

// phasePackSource is packSource with a stride: each phase plane's words
// (r, q) are the padded input's (r*SH + a, q*SW + b), the zero point's
// word where that is padding or past it.
func (d *qconvDirect) phasePackSource(p qconvParams, split rowSplit) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	xt, flip := p.packTypes()
	c4 := (p.c + 3) / 4
	plane := p.h * p.w
	as, bs := make([]int64, len(d.phases)), make([]int64, len(d.phases))
	for i, ph := range d.phases {
		as[i], bs[i] = ph[0], ph[1]
	}
	w("/* qnn.conv2d input, %d channels of %dx%d, in groups of four, padded, in %d phase planes of %dx%d (stride %dx%d). */\n", p.c, p.h, p.w, len(d.phases), d.hp, d.wp, d.sh, d.sw)
	b.WriteString(split.packHead(xt))
	w("  static const int32_t pa[%d] = {%s}, pb[%d] = {%s};\n", len(as), joinInts(as), len(bs), joinInts(bs))
	w("  const uint32_t z = %du;\n", p.izpWord())
	w("  const %s* s[4];\n  int32_t have = %d - c4 * 4;\n  if (have > 4) have = 4;\n", xt, p.c)
	w("  for (int32_t i = 0; i < 4; ++i) s[i] = x + (int64_t)(c4 * 4 + (i < have ? i : 0)) * %d;\n", plane)
	w("  for (int32_t f = 0; f < %d; ++f) {\n", len(d.phases))
	w("    uint8_t* restrict d = x4 + (int64_t)c4 * %d + (int64_t)f * %d;\n", d.planeWords()*4, d.phaseWords()*4)
	// The columns q whose input column ix = q*SW + b - PW lies in [0, W):
	// [qlo, qhi).
	w("    const int32_t b = pb[f];\n")
	w("    int32_t qlo = b >= %d ? 0 : (%d - b + %d) / %d;\n", p.pw, p.pw, d.sw-1, d.sw)
	w("    int32_t qhi = (%d - b + %d) / %d;\n", p.w+p.pw, d.sw-1, d.sw)
	w("    if (qhi > %d) qhi = %d;\n    if (qlo > qhi) qlo = qhi;\n", d.wp, d.wp)
	w("    for (int32_t r = r0; r < r1; ++r) {\n")
	w("      uint8_t* restrict row = d + (int64_t)r * %d;\n", d.wp*4)
	w("      const int32_t iy = r * %d + pa[f] - %d;\n", d.sh, p.ph)
	w("      if ((uint32_t)iy >= %du) {\n", p.h)
	w("        for (int32_t q = 0; q < %d; ++q) memcpy(row + q * 4, &z, 4);\n        continue;\n      }\n", d.wp)
	w("      for (int32_t q = 0; q < qlo; ++q) memcpy(row + q * 4, &z, 4);\n")
	// o: the input word of column qlo, within the row when qlo < qhi.
	w("      const int64_t o = (int64_t)iy * %d + (int64_t)qlo * %d + b - %d;\n", p.w, d.sw, p.pw)
	w("      if (have == 4 && qlo < qhi) {\n")
	w("        const %s* restrict s0 = s[0] + o; const %s* restrict s1 = s[1] + o; const %s* restrict s2 = s[2] + o; const %s* restrict s3 = s[3] + o;\n", xt, xt, xt, xt)
	p.interleave4(w, "        ", "row + (int64_t)qlo * 4", "qhi - qlo", flip, d.sw)
	w("      } else {\n")
	w("        for (int32_t q = qlo; q < qhi; ++q)\n")
	w("          for (int32_t i = 0; i < 4; ++i) row[q * 4 + i] = i < have ? (uint8_t)((uint8_t)s[i][o + (int64_t)(q - qlo) * %d]%s) : (uint8_t)0;\n", d.sw, flip)
	w("      }\n")
	w("      for (int32_t q = qhi; q < %d; ++q) memcpy(row + q * 4, &z, 4);\n", d.wp)
	w("    }\n")
	if gap := d.phaseWords() - d.hp*d.wp; gap > 0 {
		w("    if (r1 == %d) memset(d + %d, 0, %d);\n", d.hp, d.hp*d.wp*4, gap*4)
	}
	w("  }\n")
	w("  if (c4 == %d && r1 == %d) memset(x4 + %d, 0, %d);\n", c4-1, d.hp, c4*d.planeWords()*4, d.slack*4)
	w("}\n")
	return b.String()
}

// packByte is the pack kernel's Eval in the padded layout: the byte at
// word (py, px) of phase f's plane of group c4, channel i.
func (d *qconvDirect) packByte(p qconvParams, x func(c, iy, ix int64) uint8, c4 int64, f int, py, px, i int64) uint8 {
	iy, ix := py*d.sh+d.phases[f][0]-p.ph, px*d.sw+d.phases[f][1]-p.pw
	if iy < 0 || iy >= p.h || ix < 0 || ix >= p.w {
		return uint8(int8(p.izpu()))
	}
	c := c4*4 + i
	if c >= p.c {
		return 0
	}
	b := x(c, iy, ix)
	if p.flips() {
		b ^= 0x80
	}
	return b
}

// tiles is the direct form's tiles per image.
func (d *qconvDirect) tiles() int64 {
	if d.pairs {
		return d.rows / 2 * d.tpr
	}
	return d.rows * d.tpr
}

// lane is the output position of lane j of tile t, and whether the tile
// stores it: tileHeader's geometry, for Eval.
func (d *qconvDirect) lane(t, j int64) (int64, bool) {
	if d.pairs {
		r, c := t/d.tpr*2+j/d.pc, t%d.tpr*d.pc+j%d.pc
		return r*d.rl + c, c < d.rl
	}
	c := t%d.tpr*d.np + j
	return t/d.tpr*d.rl + c, c < d.rl
}

// tileHeader is the C opening the direct form's tile t: its output
// position p0, its pixels np, and xd, the first word its first tap reads.
func (d *qconvDirect) tileHeader(w func(string, ...any), p qconvParams) {
	d.taps(w, p)
	if d.pairs {
		// Rows rr and rr+1, pc columns each: np is the columns in the
		// row.
		w("  const int32_t rr = t / %d * 2, c0 = (t %% %d) * %d;\n", d.tpr, d.tpr, d.pc)
		w("  const int32_t p0 = rr * %d + c0;\n", d.rl)
		w("  const int32_t np = %d - c0 < %d ? %d - c0 : %d;\n", d.rl, d.pc, d.rl, d.pc)
	} else {
		w("  const int32_t rr = t / %d, c0 = (t %% %d) * NP;\n", d.tpr, d.tpr)
		w("  const int32_t p0 = rr * %d + c0;\n", d.rl)
		w("  const int32_t np = %d - c0 < NP ? %d - c0 : NP;\n", d.rl, d.rl)
	}
	w("  const uint8_t* restrict xd = x4 + ((int64_t)rr * %d + c0) * 4;\n", d.wp)
}

// taps declares the tap table kLoop reads: KK taps, PLANE words per
// channel group's plane, and koff, each tap's offset in words (unused in
// a kernel whose multiplications are a function of their own).
func (d *qconvDirect) taps(w func(string, ...any), p qconvParams) {
	w("  enum { KK = %d, PLANE = %d };\n", p.kh*p.kw, d.planeWords())
	w("  static const int32_t __attribute__((unused)) koff[KK] = {%s};\n", joinInts(d.koff))
}

// kLoop opens the reduction loop of a kernel form: k4 runs over the
// reduction's four-channel words, and xk is the first of the tile's
// words for k4 (in xp, or in place). The caller writes the body and its
// closing brace.
func (k *qconvKernel) kLoop(w func(string, ...any), ind string) {
	if k.dir == nil {
		w("%sfor (int32_t k4 = 0; k4 < K4; ++k4) {\n", ind)
		w("%s  const uint8_t* xk = (const uint8_t*)(const void*)(xp + k4 * NP);\n", ind)
		return
	}
	w("%sfor (int32_t c4 = 0; c4 < %d; ++c4)\n", ind, k.c4)
	w("%sfor (int32_t tap = 0; tap < KK; ++tap) {\n", ind)
	w("%s  const int32_t k4 = c4 * KK + tap;\n", ind)
	w("%s  const uint8_t* xk = xd + ((int64_t)c4 * PLANE + koff[tap]) * 4;\n", ind)
}
