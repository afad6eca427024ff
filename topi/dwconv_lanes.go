package topi

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// The depthwise convolution's lanes form (AVX2 with FMA, also on AVX-512
// processors, see avx2Within): eight channels
// per micro-kernel call, one in each lane of a 256-bit vector. The
// columns form (depthwiseTile) puts a row's output columns in the lanes,
// one channel per call, and reads the taps at column offsets of a local
// copy of the tile's input rows, which a strided convolution splits into
// column phases. The lanes form lays eight channels' input rows out
// interleaved and padded (ring[row][col][lane], an 8x8 transpose per
// eight columns) in a ring of (KH-1)*DH+1 rows, so that every output
// pixel of the eight channels is one vector of multiply-adds over the
// taps, whatever the stride (a tap is a whole vector at any column), and
// transposes the sums back into V's rows, eight pixels at a time.
//
// The transposes cost about as much as the multiply-adds, so the form
// pays where the columns form's phase split and long planes cost more:
// measured on AVX2 (Zen 3, 1 thread, mobilenet_v2's layers with their
// bias and clip, the generated library called in a loop) it took 0.24 ->
// 0.15 ms at stride 2 from 112x112 (96 channels), 0.086 -> 0.078 from
// 56x56, 0.029 -> 0.025 from 28x28, and at stride 1 0.18 -> 0.14 ms on
// 112x112 (32 channels), 0.20 -> 0.16 on 56x56 (144); at stride 1 on
// 28x28 and smaller maps it was 17-50 % slower, and at stride 2 from
// 14x14 even. Hence dwLanesMinRow. A ring kept from one row tile's call
// to the next (thread-local) saved nothing measurable over copying each
// tile's few shared rows again.
//
// On AVX-512 (Zen 5, full-width units, 1 thread, mobilenet_v2's layers in
// the model's profile, two runs each) the lanes form's eight lanes still
// beat the columns form's sixteen: 0.275 -> 0.195-0.220 ms at stride 2
// from 112x112, 0.095-0.101 -> 0.069-0.082 from 56x56, 0.040-0.042 ->
// 0.031-0.036 from 28x28, and at stride 1 0.19 -> 0.17-0.18 on 112x112
// (32 channels), 0.23 -> 0.20 on 56x56 (144).

// dwLanes is the number of channels per call of the lanes form.
const dwLanes = 8

// dwLanesMinRow is the least input width times column stride for which
// the lanes form is chosen (see above: stride 1 from 56 columns, stride
// 2 from 28).
const dwLanesMinRow = 56

// dwLanesMaxRing bounds the ring (bytes, on the kernel's stack).
const dwLanesMaxRing = 32 << 10

// dwLanesMaxTaps bounds the taps of the lanes form (the weight vectors
// live on the kernel's stack).
const dwLanesMaxTaps = 64

// dwLanesKernel computes V for eight channels and rows output rows:
//
//	v[c*LDV + r*VROW + ox] = sum over (ky, kx) of
//	    x[c*H*W + iy*W + ix] * w[c*KH*KW + ky*KW + kx]
//
// with iy = (oy0+r)*SH - PH + ky*DH and ix = ox*SW - PW + kx*DW (zero
// outside the input), for c < 8, r < rows, ox < OW, the taps summed in
// order with the instruction set's multiply-add from zero — the
// depthwise TE reduction's arithmetic, bit for bit. Arguments: v, x (the
// first channel's plane), w (the first channel's taps), oy0.
type dwLanesKernel struct {
	kernelBase
	g         convGeom
	h, w      int64 // input
	rows      int64 // output rows per call
	ldv, vrow int64 // V's channel and row strides
	ring      lanesRing
	taps, hw  int64 // KH*KW; H*W
}

// lanesRing is the ring of interleaved input rows of the lanes kernels
// (this file's and the int8 block form's): ns rows, enough for one
// output row's taps, of wpl columns (those the output row's taps read,
// padding included) of lanes lanes (eight, or sixteen for the int8
// block form under AVX-512), float32.
type lanesRing struct {
	ns, wpl, lanes int64
}

// newLanesRing is the ring of a kh x kw kernel with dilation dh x dw
// and column stride sw, for output rows of ow, with dwLanes lanes.
func newLanesRing(kh, kw, dh, dw, sw, ow int64) lanesRing {
	return lanesRing{ns: (kh-1)*dh + 1, wpl: (ow-1)*sw + (kw-1)*dw + 1, lanes: dwLanes}
}

// bytes is the ring's size.
func (r lanesRing) bytes() int64 { return r.ns * r.wpl * r.lanes * 4 }

// writeDecl writes the kernel's ring (NS rows of WPL columns, its
// constants with KK = taps) and the tags of the rows its slots hold, all
// empty.
func (r lanesRing) writeDecl(p func(string, ...any), taps int64) {
	p("  enum { NS = %d, WPL = %d, KK = %d };\n", r.ns, r.wpl, taps)
	p("  float ring[NS * WPL * %d] __attribute__((aligned(%d)));\n", r.lanes, r.lanes*4)
	p("  int32_t tag[NS];\n")
	p("  for (int32_t i = 0; i < NS; ++i) tag[i] = INT32_MIN;\n")
}

// avx2Within is the AVX2-with-FMA instruction set of a processor that
// has it, AVX-512 processors included (their AVX2 code runs on 256-bit
// vectors with 16 registers), for kernels written for eight lanes; ok is
// false where there is none.
func avx2Within(proc *targets.Processor) (v vecISA, ok bool) {
	if !proc.Has("avx2") || !proc.FMA() {
		return vecISA{}, false
	}
	q := *proc
	q.Features = slices.DeleteFunc(slices.Clone(proc.Features), func(f string) bool { return strings.HasPrefix(f, "avx512") })
	q.VectorBits, q.VectorRegs = 256, 16
	v = isaFor(&q)
	return v, v.name == "avx2fma"
}

// dwLanesFor reports whether the lanes form applies to a depthwise
// convolution of x (float32, NCHW) planned as p: rows of at least
// dwLanesMinRow, or output rows of at most dwLanes columns where the
// columns form's vectors hold twice that (AVX-512), filling at most half
// their lanes. On Zen 5 (1 thread, mobilenet_v2's 7x7 outputs, the
// model's profile, two runs) the lanes form took 0.032-0.049 ms where the
// columns form took 0.045-0.063; on 14x14 outputs it was slower.
func dwLanesFor(p *convPlan, x ir.Shape) bool {
	g := p.g
	narrow := p.isa.lanes >= 2*dwLanes && g.ow <= dwLanes
	if p.lanes.name != "avx2fma" || len(x) != 4 || x[1]%dwLanes != 0 || (x[3]*g.sw < dwLanesMinRow && !narrow) {
		return false
	}
	if g.kh*g.kw > dwLanesMaxTaps || g.ph < 0 || g.pw < 0 || g.oh < 1 || g.ow < 1 {
		return false
	}
	return newLanesRing(g.kh, g.kw, g.dh, g.dw, g.sw, g.ow).bytes() <= dwLanesMaxRing
}

// lanesRows is the lanes form's output rows per V tile: the most that
// divide the map with eight channels' tile within vTileBytes.
func (p *convPlan) lanesRows() int64 {
	for r := p.g.oh; r > 1; r-- {
		if p.g.oh%r == 0 && dwLanes*p.tileCols(r)*4 <= vTileBytes {
			return r
		}
	}
	return 1
}

func newDWLanesKernel(isa vecISA, g convGeom, h, w, rows, ldv, vrow int64) (*dwLanesKernel, error) {
	k := &dwLanesKernel{kernelBase: kernelBase{isa: isa}, g: g, h: h, w: w, rows: rows, ldv: ldv, vrow: vrow,
		ring: newLanesRing(g.kh, g.kw, g.dh, g.dw, g.sw, g.ow), taps: g.kh * g.kw, hw: h * w}
	if rows < 1 || (rows-1)*vrow+g.ow > ldv {
		return nil, fmt.Errorf("depthwise lanes kernel: %d rows of %d columns (row stride %d) exceed the channel stride %d", rows, g.ow, vrow, ldv)
	}
	k.vSpan = (dwLanes-1)*ldv + (rows-1)*vrow + g.ow
	k.xSpan = dwLanes * h * w
	k.wSpan = dwLanes * k.taps
	return k, k.finish("depthwise lanes kernel", "kiln_dwlanes_", k.source)
}

// Includes implements tir.Kernel.
func (k *dwLanesKernel) Includes() []string {
	return append(k.kernelBase.Includes(), "<math.h>", "<stdint.h>", "<string.h>")
}

func (k *dwLanesKernel) source(sym string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	g := k.g
	p("/* Depthwise convolution, lanes form: 8 channels of %dx%d, %dx%d taps (stride %dx%d, pad %dx%d, dilation %dx%d) to %d rows of %d, V strides %d and %d. */\n",
		k.h, k.w, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, k.rows, g.ow, k.ldv, k.vrow)
	p("#if %s\n", k.isa.guard)
	writeTranspose8(p, sym+"_tr8")
	p("#endif\n")
	p("%sstatic void %s(float* restrict v, const float* restrict x, const float* restrict w, int32_t oy0) {\n", noInline, sym)
	k.ring.writeDecl(p, k.taps)
	p("#if %s\n", k.isa.guard)
	p("  __m256 wv[KK];\n")
	p("  for (int32_t t = 0; t < KK; ++t) {\n")
	p("    float l[8];\n")
	p("    for (int32_t i = 0; i < 8; ++i) l[i] = w[i * KK + t];\n")
	p("    wv[t] = _mm256_loadu_ps(l);\n  }\n")
	p("#endif\n")
	p("  for (int32_t r = 0; r < %d; ++r) {\n", k.rows)
	p("    const float* rp[%d];\n", g.kh)
	if n := k.ring.writeRow(p, "(oy0 + r)", g.kh, g.sh, g.ph, g.dh, g.pw, k.h, k.w); n > 0 {
		p("      const float* restrict s = x + (int64_t)iy * %d;\n", k.w)
		p("      int32_t c = 0;\n")
		p("#if %s\n", k.isa.guard)
		p("      for (; c + 8 <= %d; c += 8) {\n", n)
		p("        __m256 q[8];\n")
		p("        for (int32_t i = 0; i < 8; ++i) q[i] = _mm256_loadu_ps(s + (int64_t)i * %d + c);\n", k.hw)
		p("        %s_tr8(q);\n", sym)
		p("        for (int32_t i = 0; i < 8; ++i) _mm256_store_ps(d + (int64_t)(%d + c + i) * 8, q[i]);\n", g.pw)
		p("      }\n")
		if t := n % 8; t > 0 {
			// The last columns: masked loads (no access past the row),
			// the same transpose, and a store per valid column.
			p("      {\n")
			p("        const __m256i km = _mm256_setr_epi32(%s);\n", laneMask(t))
			p("        __m256 q[8];\n")
			p("        for (int32_t i = 0; i < 8; ++i) q[i] = _mm256_maskload_ps(s + (int64_t)i * %d + c, km);\n", k.hw)
			p("        %s_tr8(q);\n", sym)
			p("        for (int32_t i = 0; i < %d; ++i) _mm256_store_ps(d + (int64_t)(%d + c + i) * 8, q[i]);\n", t, g.pw)
			p("        c += %d;\n", t)
			p("      }\n")
		}
		p("#endif\n")
		p("      for (; c < %d; ++c)\n", n)
		p("        for (int32_t i = 0; i < 8; ++i) d[(int64_t)(%d + c) * 8 + i] = s[(int64_t)i * %d + c];\n", g.pw, k.hw)
	}
	p("    }\n")
	p("    float* restrict vr = v + (int64_t)r * %d;\n", k.vrow)
	p("#if %s\n", k.isa.guard)
	forLanesGroups(g.ow, func(from, to string, nb int64) { k.lanesGroup(p, sym, from, to, nb) })
	p("#else\n")
	p("    for (int32_t c = 0; c < 8; ++c)\n")
	p("      for (int32_t ox = 0; ox < %d; ++ox) {\n", g.ow)
	p("        float a = 0.0f;\n")
	p("        for (int32_t ky = 0; ky < %d; ++ky)\n", g.kh)
	p("          for (int32_t kx = 0; kx < %d; ++kx)\n", g.kw)
	p("            a = fmaf(rp[ky][(ox * %d + kx * %d) * 8 + c], w[c * KK + ky * %d + kx], a);\n", g.sw, g.dw, g.kw)
	p("        vr[(int64_t)c * %d + ox] = a;\n", k.ldv)
	p("      }\n")
	p("#endif\n")
	p("  }\n}\n")
	return b.String()
}

// lanesGroup writes the loop over groups of eight output columns in
// [from, to) with nb valid columns per group: eight accumulators (one per
// column, eight channels each), the taps in order, then a transpose to
// eight channels' runs of columns and a store of nb of them per channel.
func (k *dwLanesKernel) lanesGroup(p func(string, ...any), sym, from, to string, nb int64) {
	g := k.g
	writeLanesTaps(p, from, to, g.kh, g.kw, g.sw, g.dw, nb, "")
	p("      %s_tr8(a);\n", sym)
	if nb == 8 {
		p("      for (int32_t c = 0; c < 8; ++c) _mm256_storeu_ps(vr + (int64_t)c * %d + ox, a[c]);\n", k.ldv)
	} else {
		p("      const __m256i km = _mm256_setr_epi32(%s);\n", laneMask(nb))
		p("      for (int32_t c = 0; c < 8; ++c) _mm256_maskstore_ps(vr + (int64_t)c * %d + ox, km, a[c]);\n", k.ldv)
	}
	p("    }\n")
}

// laneMask is the eight int32 lanes of a mask of the first n.
func laneMask(n int64) string {
	l := make([]string, 8)
	for i := range l {
		l[i] = "0"
		if int64(i) < n {
			l[i] = "-1"
		}
	}
	return strings.Join(l, ", ")
}

// Eval implements tir.Kernel: the sums as the C computes them.
func (k *dwLanesKernel) Eval(args []tir.KernelArg) error {
	if len(args) != 4 {
		return fmt.Errorf("depthwise lanes kernel: want 3 pointers and a row, got %d arguments", len(args))
	}
	mem, off, err := k.operands(args[:3])
	if err != nil {
		return fmt.Errorf("depthwise lanes kernel: %v", err)
	}
	g := k.g
	oy0 := args[3].Int
	if oy0 < 0 || oy0+k.rows > g.oh {
		return fmt.Errorf("depthwise lanes kernel: rows %d to %d outside the output's %d", oy0, oy0+k.rows, g.oh)
	}
	vm, xm, wm := mem[0], mem[1], mem[2]
	for c := int64(0); c < dwLanes; c++ {
		for r := int64(0); r < k.rows; r++ {
			for ox := int64(0); ox < g.ow; ox++ {
				acc := 0.0
				for ky := int64(0); ky < g.kh; ky++ {
					iy := (oy0+r)*g.sh - g.ph + ky*g.dh
					for kx := int64(0); kx < g.kw; kx++ {
						ix := ox*g.sw - g.pw + kx*g.dw
						xv := 0.0
						if iy >= 0 && iy < k.h && ix >= 0 && ix < k.w {
							xv = xm.Float(off[1] + c*k.hw + iy*k.w + ix)
						}
						acc = k.isa.madd(wm.Float(off[2]+c*k.taps+ky*g.kw+kx), xv, acc)
					}
				}
				vm.SetFloat(off[0]+c*k.ldv+r*k.vrow+ox, acc)
			}
		}
	}
	return nil
}

// lanesTile is the TensorIntrin of the depthwise V stage in the lanes
// form: eight channels' cols virtual columns per call.
func (p *convPlan) lanesTile(x, w *te.Tensor, cols int64) te.TensorIntrin {
	g := p.g
	rows := (cols-g.ow)/p.wq + 1
	return func(ctx *te.TensorizeContext) (tir.Stmt, error) {
		if len(ctx.Extent) != 3 || ctx.Extent[0] != 1 || ctx.Extent[1] != dwLanes || ctx.Extent[2] != cols {
			return nil, fmt.Errorf("depthwise lanes tile: extents %v, want [1 %d %d]", ctx.Extent, dwLanes, cols)
		}
		k, err := newDWLanesKernel(p.lanes, g, x.Shape[2], x.Shape[3], rows, ctx.Out.Shape[len(ctx.Out.Shape)-1], p.wq)
		if err != nil {
			return nil, err
		}
		return channelRowsCall(ctx, k, x, w, tir.FloorDiv(ctx.Axis[2], tir.Idx(p.wq)))
	}
}

// writeTranspose8 writes the C of NAME(__m256 r[8]) (AVX), which
// transposes the 8x8 matrix of floats whose rows are r[0..7] in place:
// unpacks, shuffles and 128-bit permutes, 24 in all. The depthwise lanes
// kernels move eight channels between their planes and the lanes with
// it (integer vectors pass as their bits).
func writeTranspose8(p func(string, ...any), name string) {
	p("static inline void %s(__m256 r[8]) {\n", name)
	p("  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);\n")
	p("  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);\n")
	p("  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);\n")
	p("  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);\n")
	p("  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);\n")
	p("  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);\n")
	p("  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);\n")
	p("  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);\n")
	p("  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20); r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);\n")
	p("  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20); r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);\n")
	p("  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31); r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);\n")
	p("  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31); r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);\n}\n")
}

// writeRow writes the start of a lanes kernel's loop over the taps' rows
// for output row oy (a C expression), for a kernel of kh rows (stride sh,
// padding ph, dilation dh) on an input of h rows: each input row's slot
// in the ring, rp[ky] pointing at it (d), nothing more when the slot
// holds the row already, zeros when the row is padding, and else the
// zeros of the row's pw padding columns and of the columns past the
// input's w. It returns how many input columns the caller copies into d
// from column pw, before it closes the loop.
func (r lanesRing) writeRow(p func(string, ...any), oy string, kh, sh, ph, dh, pw, h, w int64) int64 {
	p("    for (int32_t ky = 0; ky < %d; ++ky) {\n", kh)
	p("      const int32_t iy = %s * %d - %d + ky * %d;\n", oy, sh, ph, dh)
	p("      const int32_t sl = (int32_t)(((int64_t)iy %% NS + NS) %% NS);\n")
	p("      float* restrict d = ring + (int64_t)sl * WPL * %d;\n", r.lanes)
	p("      rp[ky] = d;\n")
	p("      if (tag[sl] == iy) continue;\n")
	p("      tag[sl] = iy;\n")
	p("      if (iy < 0 || iy >= %d) {\n        memset(d, 0, sizeof(float) * WPL * %d);\n        continue;\n      }\n", h, r.lanes)
	n := min(r.wpl-pw, w)
	if pw > 0 {
		p("      memset(d, 0, sizeof(float) * %d * %d);\n", min(pw, r.wpl), r.lanes)
	}
	if end := pw + max(n, 0); end < r.wpl {
		p("      memset(d + %d * %d, 0, sizeof(float) * %d * %d);\n", end, r.lanes, r.wpl-end, r.lanes)
	}
	return n
}

// forLanesGroups calls group for a lanes kernel's output row of ow
// columns: whole groups of eight, then the partial last group.
func forLanesGroups(ow int64, group func(from, to string, nb int64)) {
	full := ow / 8 * 8
	group("0", fmt.Sprint(full), 8)
	if t := ow - full; t > 0 {
		group(fmt.Sprint(full), fmt.Sprint(ow), t)
	}
}

// writeLanesTaps opens a lanes kernel's loop over groups of eight output
// columns ox in [from, to) (C expressions) and writes the group's sums
// over the taps (kh x kw, dilation dw, column stride sw) for its nb
// valid columns: the accumulators a[i] of column ox + i, from the ring
// rows rp[ky] and the weight vectors wv. The multiply-adds are fused, or
// under guard (when not empty) fused where it holds and a multiply and
// an add elsewhere. The caller finishes the group and closes the loop.
func writeLanesTaps(p func(string, ...any), from, to string, kh, kw, sw, dw, nb int64, guard string) {
	p("    for (int32_t ox = %s; ox < %s; ox += 8) {\n", from, to)
	p("      __m256 a[8];\n")
	p("      for (int32_t i = 0; i < 8; ++i) a[i] = _mm256_setzero_ps();\n")
	p("      for (int32_t ky = 0; ky < %d; ++ky)\n", kh)
	p("        for (int32_t kx = 0; kx < %d; ++kx) {\n", kw)
	p("          const float* restrict q = rp[ky] + (int64_t)(ox * %d + kx * %d) * 8;\n", sw, dw)
	p("          const __m256 wt = wv[ky * %d + kx];\n", kw)
	fused := fmt.Sprintf("          for (int32_t i = 0; i < %d; ++i) a[i] = _mm256_fmadd_ps(_mm256_load_ps(q + i * %d), wt, a[i]);\n", nb, sw*8)
	if guard == "" {
		p("%s", fused)
	} else {
		p("#if %s\n", guard)
		p("%s", fused)
		p("#else\n")
		p("          for (int32_t i = 0; i < %d; ++i) a[i] = _mm256_add_ps(_mm256_mul_ps(_mm256_load_ps(q + i * %d), wt), a[i]);\n", nb, sw*8)
		p("#endif\n")
	}
	p("        }\n")
}
