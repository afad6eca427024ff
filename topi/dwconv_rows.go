package topi

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// The depthwise convolution's rows form (AVX-512 and AVX2, column stride
// 1 or 2, any row stride): one channel's V tile of whole output rows,
// compact (V[c, oh*OW + ow], no virtual columns), computed from the input plane
// where it lies. Each output row is a few vectors of columns; a tap's
// input is a masked load of the input row at the tap's offset (with
// column stride 2, two masked loads and the even lanes of the pair, one
// vpermt2ps), whose lanes outside the row (the padding) read zero, and a
// tap on a row outside the input multiplies zero. Without the copy of
// the rows into a padded tile and with V's rows as wide as the output's,
// the fused epilogue runs over the tile's columns as one loop
// (CollapseLoops). mobilenet_v2's 576-channel 14x14
// depthwise convolution took 0.053 ms through the padded tile (222
// virtual columns a channel, then 14 epilogue loops of 14 columns), 0.034
// ms computed by rows with the epilogue in registers (the kernel alone, 1
// thread, Zen 5).
//
// On AVX2 a vector is 8 lanes and a masked load vmaskmovps, which leaves
// the lanes outside its mask unread and zero as AVX-512's masked loads
// do (a load whose mask is empty is the zero vector, a full one a plain
// load). Against the padded tile and the columns kernel, mobilenet_v2's
// stride-1 depthwise layers on an Emerald Rapids core with code for
// AVX2 (1 thread, minima of in-model medians): 384 channels of 14x14
// 0.086 -> 0.042 ms (ONNX Runtime's AVX2 kernels 0.059), 576 of 14x14
// 0.127 -> 0.063 (0.087), 960 of 7x7 0.077 -> 0.035 (0.054), 32 of
// 112x112 0.264 -> 0.221, 144 of 56x56 0.275 -> 0.243; the model 6 %
// faster. With stride 2 the even lanes of two loads take two shuffles
// (vshufps, vpermpd: AVX2 itself, not only AVX with FMA), which pays on
// narrow outputs only (dwRowsAVX2Stride2MaxCols); the paired rows of
// AVX-512 are not written for 8 lanes.

// dwRowsKernel computes rows output rows of one channel: v[r*OW + ox] for
// output row y0 + r, from the channel's H x W input plane x and its
// KH x KW weights w. y0 is the call's fourth argument.
type dwRowsKernel struct {
	kernelBase
	g          convGeom
	h, w, rows int64
}

// dwRowsGroup is the column vectors a row's pass accumulates at once.
const dwRowsGroup = 4

// dwRowsFor reports whether a depthwise convolution takes the rows form:
// a rows kernel for the instruction set (dwRowsISA), column stride 1 or
// 2, non-negative padding, float32, within dwRowsMaxTaps and
// dwRowsMaxLoads.
// On AVX2 it takes those of column stride 1 and, where the processor has
// AVX2 itself, those of stride 2 to at most dwRowsAVX2Stride2MaxCols
// columns. On AVX-512, of the convolutions the lanes form
// applies to, it takes those of column stride 1, and those of stride 2
// except, on Zen 5 (Processor.FastL2), where the output is wider than
// dwRowsStride2MaxCols. On an Emerald Rapids core (1 thread, minima of
// in-model medians) the rows form took mobilenet_v2's 32 channels of
// 112x112 in 0.192 ms against the lanes form's 0.300, 144 of 56x56 in
// 0.228 against 0.313, and 96 from 112x112 to 56x56 (stride 2) in 0.339
// against 0.378; on Zen 5 that stride-2 layer took 0.196 ms by rows
// against 0.151 in lanes (the stride-1 layers were not compared there).
func dwRowsFor(p *convPlan, x ir.Shape, dt ir.DType) bool {
	g := p.g
	if !dwRowsISA(p.isa) || dt != ir.Float32 || len(x) != 4 || !dwRowsGeom(g) || g.oh < 1 || g.ow < 1 {
		return false
	}
	if g.kh > dwRowsMaxTaps || g.kw > dwRowsMaxTaps || g.kh*g.kw > dwRowsMaxTaps || ceilDiv(g.ow, int64(p.isa.lanes))*g.kw*g.sw > dwRowsMaxLoads {
		return false
	}
	if p.isa.lanes == 8 {
		return g.sw == 1 || g.ow <= dwRowsAVX2Stride2MaxCols && p.lanes.name == "avx2fma"
	}
	return g.sw == 1 || g.ow <= dwRowsStride2MaxCols || !p.fastL2 || !dwLanesFor(p, x)
}

// dwRowsAVX2Stride2MaxCols is the widest output of a stride-2 depthwise
// convolution that takes the rows form on AVX2. Against the other forms
// (mobilenet_v2, code for AVX2 on an Emerald Rapids core, 1 thread,
// minima of in-model medians), 576 channels from 14x14 to 7x7 took 0.040
// ms by rows against 0.067 and 192 from 28x28 to 14x14 0.047 against
// 0.058, but 144 from 56x56 to 28x28 0.126 against 0.105 and 96 from
// 112x112 to 56x56 0.335 against 0.310: on wide rows the two shuffles
// per load cost more than the phase-split copy saves.
const dwRowsAVX2Stride2MaxCols = 16

// dwRowsMaxTaps and dwRowsMaxLoads bound the rows kernel's straight-line
// code: its taps (a flat run is up to 32 vectors times the taps), and
// the loads it writes per output row (column vectors times tap columns
// times the stride). Larger kernels take the columns form, whose loops
// run over the taps.
const (
	dwRowsMaxTaps  = 49
	dwRowsMaxLoads = 1024
)

// dwRowsFlat reports whether the rows kernel computes rows output rows of
// geometry g from an input w columns wide as one flat run of the plane:
// stride 1, output rows as wide as the input's (so that output position
// q of the run reads input position q plus a constant per tap), narrower
// than a vector, and the call covering every output row (so that the
// masks of the padding are known when the kernel is written; chooseRows
// gives a plane of up to maxTileCols outputs one tile). A row per vector
// would leave lanes idle that the flat run fills (a 7x7 plane: 4 vectors
// instead of 7 with 7 of 16 lanes each).
func dwRowsFlat(g convGeom, w, rows int64) bool {
	return g.sh == 1 && g.sw == 1 && w == g.ow && g.ow < 16 && rows == g.oh
}

// dwRowsStride2MaxCols is the widest output of a stride-2 depthwise
// convolution that takes the rows form on Zen 5 where the lanes form
// applies too.
// On Zen 5 (1 thread, mobilenet_v2 in the model) the rows form took
// 0.069 against 0.111 ms for 144 channels to 28x28, 0.028 against 0.040
// for 192 to 14x14 and 0.028 against 0.035 for 576 to 7x7 (ONNX Runtime
// 0.071, 0.034, 0.029), but 0.196 against 0.151 for 96 channels to
// 56x56.
const dwRowsStride2MaxCols = 32

// dwRowsGeom reports whether the rows kernel computes geometry g: a row
// stride, a column stride of 1 or 2, non-negative padding.
func dwRowsGeom(g convGeom) bool {
	return g.sh >= 1 && (g.sw == 1 || g.sw == 2) && g.ph >= 0 && g.pw >= 0
}

// useRows switches the plan to the rows form: V compact, its tiles whole
// rows of it.
func (p *convPlan) useRows() {
	p.rowsForm = true
	p.jtot = p.g.oh * p.g.ow
	p.chooseRows()
}

func newDWRowsKernel(isa vecISA, g convGeom, h, w, rows int64) (*dwRowsKernel, error) {
	if !dwRowsISA(isa) || !dwRowsGeom(g) || rows < 1 || rows > g.oh || h < 1 || w < 1 {
		return nil, fmt.Errorf("depthwise rows kernel: unsupported %+v, %dx%d input, %d rows (%s)", g, h, w, rows, isa.name)
	}
	k := &dwRowsKernel{kernelBase: kernelBase{isa: isa}, g: g, h: h, w: w, rows: rows}
	k.vSpan, k.xSpan, k.wSpan = rows*g.ow, h*w, g.kh*g.kw
	if err := k.finish("depthwise rows kernel", "kiln_dwrows_", k.source); err != nil {
		return nil, err
	}
	return k, nil
}

// dwRowsISA reports whether the rows kernel has vector code for isa:
// AVX-512, or AVX with FMA (vectors of 8 lanes, vmaskmovps, which leaves
// the lanes outside its mask unread and zero), whose column stride 2
// needs AVX2 as well (its guard says so; without AVX2 the portable
// branch runs).
func dwRowsISA(isa vecISA) bool {
	return isa.name == "avx512" && isa.lanes == 16 || isa.name == "avx2fma" && isa.lanes == 8
}

// evenLanes is the even lanes of vectors lo and hi, in order: with 16
// lanes one vpermt2ps; with 8 (AVX2) the even lanes of each 128-bit half
// (vshufps, lo's and hi's alternating by pairs), the pairs then in order
// (vpermpd).
func (k *dwRowsKernel) evenLanes(lo, hi string) string {
	if k.lanes() == 16 {
		return fmt.Sprintf("_mm512_permutex2var_ps(%s, ev, %s)", lo, hi)
	}
	return fmt.Sprintf("_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(%s, %s, 0x88)), 0xD8))", lo, hi)
}

// lanes is the kernel's vector width in floats.
func (k *dwRowsKernel) lanes() int64 { return int64(k.isa.lanes) }

// loadMask is the lanes of the input vector that tap column kx reads
// for the output columns from c0, inside the input row (and inside the
// output row): with stride 1 the column vector at c0; with stride 2 the
// half-th of the two vectors whose even lanes the kernel keeps
// (half 0: input columns 2*c0 + kx*DW - PW on; half 1: a vector further).
func (k *dwRowsKernel) loadMask(c0, kx, half int64) uint32 {
	var m uint32
	l := k.lanes()
	for j := int64(0); j < l; j++ {
		q := half*l + j // the lane among the stride's inputs
		if q%k.g.sw != 0 {
			continue
		}
		l := q / k.g.sw
		ix := (c0+l)*k.g.sw + kx*k.g.dw - k.g.pw
		if c0+l < k.g.ow && ix >= 0 && ix < k.w {
			m |= 1 << j
		}
	}
	return m
}

// firstLanes is the mask of the first n of a vector's sixteen lanes (none
// for n <= 0, all from 16).
func firstLanes(n int64) uint32 {
	return uint32(1)<<min(max(n, 0), 16) - 1
}

// source writes the C definition (named sym).
func (k *dwRowsKernel) source(sym string) string {
	g, isa := k.g, k.isa
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("/* depthwise rows kernel: %d rows of %d columns from %dx%d, %dx%d taps (dilation %dx%d, pad %dx%d), %s */\n",
		k.rows, g.ow, k.h, k.w, g.kh, g.kw, g.dh, g.dw, g.ph, g.pw, isa.name)
	p("%sstatic void %s(float* restrict v, const float* restrict x, const float* restrict w, int32_t y0) {\n", noInline, sym)
	guard := isa.guard
	if k.lanes() == 8 && g.sw == 2 {
		guard += " && defined(__AVX2__)" // vpermpd
	}
	p("#if %s\n", guard)
	switch {
	case dwRowsFlat(g, k.w, k.rows):
		k.flatSource(p)
	case k.lanes() == 16 && dwRowsPairs(g, k.rows):
		k.pairsSource(p)
	default:
		k.rowSource(p)
	}
	p("#else\n")
	fma := fmt.Sprintf(isa.scalarFn, fmt.Sprintf("w[ky * %d + kx]", g.kw), "xv", "a")
	p("  for (int32_t r = 0; r < %d; ++r) {\n", k.rows)
	p("    for (int32_t ox = 0; ox < %d; ++ox) {\n", g.ow)
	p("      float a = 0.0f;\n")
	p("      for (int32_t ky = 0; ky < %d; ++ky) {\n", g.kh)
	p("        for (int32_t kx = 0; kx < %d; ++kx) {\n", g.kw)
	p("          const int32_t iy = (y0 + r) * %d - %d + ky * %d, ix = ox * %d - %d + kx * %d;\n", g.sh, g.ph, g.dh, g.sw, g.pw, g.dw)
	p("          const float xv = (iy >= 0 && iy < %d && ix >= 0 && ix < %d) ? x[(int64_t)iy * %d + ix] : 0.0f;\n", k.h, k.w, k.w)
	p("          a = %s;\n", fma)
	p("        }\n      }\n")
	p("      v[(int64_t)r * %d + ox] = a;\n", g.ow)
	p("    }\n  }\n")
	p("#endif\n}\n")
	return b.String()
}

// rowSource writes the vector branch computing row by row: each output
// row a few vectors of columns.
func (k *dwRowsKernel) rowSource(p func(string, ...any)) {
	g, isa, l := k.g, k.isa, k.lanes()
	p("  const %s z = %s;\n", isa.typ, isa.zero)
	if g.sw == 2 && l == 16 {
		// The even lanes of two vectors: every second input column.
		p("  const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);\n")
	}
	p("  for (int32_t r = 0; r < %d; ++r) {\n", k.rows)
	p("    const int32_t y = y0 + r;\n")
	p("    float* restrict vr = v + (int64_t)r * %d;\n", g.ow)
	nv := ceilDiv(g.ow, l)
	for v0 := int64(0); v0 < nv; v0 += dwRowsGroup {
		v1 := min(v0+dwRowsGroup, nv)
		p("    {\n")
		for i := v0; i < v1; i++ {
			p("      %s a%d = z;\n", isa.typ, i-v0)
		}
		p("      for (int32_t ky = 0; ky < %d; ++ky) {\n", g.kh)
		p("        const int32_t iy = y * %d - %d + ky * %d;\n", g.sh, g.ph, g.dh)
		p("        const float* restrict wk = w + ky * %d;\n", g.kw)
		p("        if (iy < 0 || iy >= %d) {\n", k.h)
		// A tap on a row outside the input multiplies zero, as the
		// padded input's does (a NaN or infinite weight gives NaN).
		for kx := int64(0); kx < g.kw; kx++ {
			for i := v0; i < v1; i++ {
				a := fmt.Sprintf("a%d", i-v0)
				p("          %s = %s;\n", a, fmt.Sprintf(isa.fma, fmt.Sprintf(isa.set1, fmt.Sprintf("wk[%d]", kx)), "z", a))
			}
		}
		p("          continue;\n        }\n")
		// The row's address as an integer: a tap left of the row's start
		// (its lanes masked off) is no pointer before the array.
		p("        const uintptr_t row = (uintptr_t)(const void*)(x + (int64_t)iy * %d);\n", k.w)
		for kx := int64(0); kx < g.kw; kx++ {
			for i := v0; i < v1; i++ {
				a := fmt.Sprintf("a%d", i-v0)
				off := i*l*g.sw + kx*g.dw - g.pw
				ld := maskzLoad(l, k.loadMask(i*l, kx, 0), fmt.Sprintf("row + (intptr_t)(%d)", off*4))
				if g.sw == 2 {
					hi := maskzLoad(l, k.loadMask(i*l, kx, 1), fmt.Sprintf("row + (intptr_t)(%d)", (off+l)*4))
					ld = k.evenLanes(ld, hi)
				}
				p("        %s = %s;\n", a, fmt.Sprintf(isa.fma, fmt.Sprintf(isa.set1, fmt.Sprintf("wk[%d]", kx)), ld, a))
			}
		}
		p("      }\n")
		for i := v0; i < v1; i++ {
			p("      %s\n", maskStore(l, fmt.Sprintf("vr + %d", i*l), firstLanes(g.ow-i*l), fmt.Sprintf("a%d", i-v0)))
		}
		p("    }\n")
	}
	p("  }\n")
}

// flatSource writes the vector branch of a flat run (dwRowsFlat): the
// plane's OH x OW outputs as consecutive vectors, each tap one masked
// load at a constant offset, its lanes outside the input (padding rows
// and columns, and lanes past the plane) reading zero. The call is the
// whole plane, y0 is 0.
func (k *dwRowsKernel) flatSource(p func(string, ...any)) {
	g, isa, l := k.g, k.isa, k.lanes()
	n := g.oh * g.ow
	nv := ceilDiv(n, l)
	p("  (void)y0;\n")
	p("  const uintptr_t base = (uintptr_t)(const void*)x;\n")
	for v0 := int64(0); v0 < nv; v0 += dwRowsGroup {
		v1 := min(v0+dwRowsGroup, nv)
		p("  {\n")
		for i := v0; i < v1; i++ {
			p("    %s a%d = %s;\n", isa.typ, i-v0, isa.zero)
		}
		for ky := int64(0); ky < g.kh; ky++ {
			for kx := int64(0); kx < g.kw; kx++ {
				wv := fmt.Sprintf(isa.set1, fmt.Sprintf("w[%d]", ky*g.kw+kx))
				for i := v0; i < v1; i++ {
					off := l*i + (ky*g.dh-g.ph)*k.w + kx*g.dw - g.pw
					ld := maskzLoad(l, k.flatMask(i, ky, kx), fmt.Sprintf("base + (intptr_t)(%d)", off*4))
					a := fmt.Sprintf("a%d", i-v0)
					p("    %s = %s;\n", a, fmt.Sprintf(isa.fma, wv, ld, a))
				}
			}
		}
		for i := v0; i < v1; i++ {
			p("    %s\n", maskStore(l, fmt.Sprintf("v + %d", l*i), firstLanes(n-l*i), fmt.Sprintf("a%d", i-v0)))
		}
		p("  }\n")
	}
}

// dwRowsPairs reports whether the rows kernel computes the rows output
// rows of geometry g two to a vector: column stride 2 with outputs of at
// most 8 columns (the 2 x OW - 1 input columns a row's taps read fit one
// vector) and the call covering every output row (so that which input
// rows lie in the padding is known when the kernel is written). One row
// per vector would fill at most half its lanes (a 7x7 output: 7 of 16).
func dwRowsPairs(g convGeom, rows int64) bool {
	return g.sw == 2 && g.ow <= 8 && rows == g.oh
}

// pairsSource writes the vector branch for dwRowsPairs: output rows r and
// r+1 in lanes [0, OW) and [OW, 2 x OW) of one vector, consecutive in V.
// A tap loads the 16 input columns from its offset in each of the two
// input rows (masked: the even lanes inside the row, none for a row in
// the padding) and takes the even lanes of each with one vpermt2ps. The
// call is the whole plane, y0 is 0.
func (k *dwRowsKernel) pairsSource(p func(string, ...any)) {
	g, isa := k.g, k.isa
	p("  (void)y0;\n")
	p("  const uintptr_t base = (uintptr_t)(const void*)x;\n")
	idx := make([]string, 16)
	for l := int64(0); l < 16; l++ {
		switch {
		case l < g.ow:
			idx[l] = fmt.Sprint(2 * l)
		case l < 2*g.ow:
			idx[l] = fmt.Sprint(16 + 2*(l-g.ow))
		default:
			idx[l] = "0"
		}
	}
	p("  const __m512i ev = _mm512_setr_epi32(%s);\n", strings.Join(idx, ", "))
	// load is the masked load of input row iy for tap column kx, or ""
	// when the row lies in the padding (its lanes all zero).
	load := func(iy, kx int64) string {
		if iy < 0 || iy >= k.h {
			return ""
		}
		var m uint32
		for j := int64(0); j < 16; j++ {
			ix := j + kx*g.dw - g.pw
			if j%2 == 0 && j/2 < g.ow && ix >= 0 && ix < k.w {
				m |= 1 << j
			}
		}
		off := iy*k.w + kx*g.dw - g.pw
		return fmt.Sprintf("_mm512_maskz_loadu_ps((__mmask16)0x%x, (const void*)(base + (intptr_t)(%d)))", m, off*4)
	}
	for r := int64(0); r < g.oh; r += 2 {
		two := r+1 < g.oh
		p("  {\n    __m512 a = _mm512_setzero_ps();\n")
		for ky := int64(0); ky < g.kh; ky++ {
			for kx := int64(0); kx < g.kw; kx++ {
				lo := load(r*g.sh-g.ph+ky*g.dh, kx)
				hi := ""
				if two {
					hi = load((r+1)*g.sh-g.ph+ky*g.dh, kx)
				}
				if lo == "" {
					lo = "_mm512_setzero_ps()"
				}
				if hi == "" {
					hi = "_mm512_setzero_ps()"
				}
				v := fmt.Sprintf("_mm512_permutex2var_ps(%s, ev, %s)", lo, hi)
				p("    a = %s;\n", fmt.Sprintf(isa.fma, fmt.Sprintf(isa.set1, fmt.Sprintf("w[%d]", ky*g.kw+kx)), v, "a"))
			}
		}
		n := g.ow
		if two {
			n = 2 * g.ow
		}
		p("    _mm512_mask_storeu_ps(v + %d, (__mmask16)0x%x, a);\n  }\n", r*g.ow, firstLanes(n))
	}
}

// flatMask is the lanes of a flat run's vector i whose tap (ky, kx)
// reads inside the input.
func (k *dwRowsKernel) flatMask(i, ky, kx int64) uint32 {
	g := k.g
	return flatLanes(k.lanes(), i, g.oh, g.ow, k.h, k.w, ky*g.dh-g.ph, kx*g.dw-g.pw)
}

// flatLanes is the mask of the lanes of vector i (of lanes elements) of a
// flat run over an oh x ow output plane whose input, dy rows and dx
// columns from the output's position, lies inside the h x w input:
// output position q = lanes*i + lane, row q / ow and column q % ow.
func flatLanes(lanes, i, oh, ow, h, w, dy, dx int64) uint32 {
	var m uint32
	for l := int64(0); l < lanes; l++ {
		q := lanes*i + l
		if q >= oh*ow {
			break
		}
		iy, ix := q/ow+dy, q%ow+dx
		if iy >= 0 && iy < h && ix >= 0 && ix < w {
			m |= 1 << l
		}
	}
	return m
}

// Eval implements tir.Kernel: the same sums in the same order (taps row
// by row, from 0, zero outside the input), rounded to float32 after
// every operation.
func (k *dwRowsKernel) Eval(args []tir.KernelArg) error {
	if len(args) != 4 {
		return fmt.Errorf("depthwise rows kernel: want 3 pointers and a row, got %d arguments", len(args))
	}
	mem, off, err := k.operands(args[:3])
	if err != nil {
		return err
	}
	g := k.g
	y0 := args[3].Int
	vm, xm, wm := mem[0], mem[1], mem[2]
	for r := int64(0); r < k.rows; r++ {
		for ox := int64(0); ox < g.ow; ox++ {
			acc := 0.0
			for ky := int64(0); ky < g.kh; ky++ {
				for kx := int64(0); kx < g.kw; kx++ {
					iy, ix := (y0+r)*g.sh-g.ph+ky*g.dh, ox*g.sw-g.pw+kx*g.dw
					xv := 0.0
					if iy >= 0 && iy < k.h && ix >= 0 && ix < k.w {
						xv = xm.Float(off[1] + iy*k.w + ix)
					}
					acc = k.isa.madd(wm.Float(off[2]+ky*g.kw+kx), xv, acc)
				}
			}
			vm.SetFloat(off[0]+r*g.ow+ox, acc)
		}
	}
	return nil
}

// rowsTile is the TensorIntrin of the rows form's V stage: one kernel
// call per channel tile of cols = rows x OW columns, reading the input
// plane where it lies.
func (p *convPlan) rowsTile(x, w *te.Tensor, cols int64) te.TensorIntrin {
	g := p.g
	if cols%g.ow != 0 {
		return nil
	}
	return func(ctx *te.TensorizeContext) (tir.Stmt, error) {
		if len(ctx.Extent) != 3 || ctx.Extent[0] != 1 || ctx.Extent[1] != 1 || ctx.Extent[2] != cols {
			return nil, fmt.Errorf("depthwise rows tile: extents %v, want [1 1 %d]", ctx.Extent, cols)
		}
		k, err := newDWRowsKernel(p.isa, g, x.Shape[2], x.Shape[3], cols/g.ow)
		if err != nil {
			return nil, err
		}
		return channelRowsCall(ctx, k, x, w, tir.FloorDiv(ctx.Axis[2], tir.Idx(g.ow)))
	}
}

// channelRowsCall is a depthwise kernel's call for ctx's tile: k(&V
// tile, &x[n, c, 0, 0], &w[c, 0, 0, 0], row), row the tile's first
// output row.
func channelRowsCall(ctx *te.TensorizeContext, k tir.Kernel, x, w *te.Tensor, row tir.PrimExpr) (tir.Stmt, error) {
	n0, c0 := ctx.Axis[0], ctx.Axis[1]
	xl, err := ctx.Load(x, n0, c0, tir.Idx(0), tir.Idx(0))
	if err != nil {
		return nil, err
	}
	wl, err := ctx.Load(w, c0, tir.Idx(0), tir.Idx(0), tir.Idx(0))
	if err != nil {
		return nil, err
	}
	vl := tir.NewLoad(ctx.Out, ctx.OutIndex...)
	return tir.Eval(tir.CallKernel(k, tir.AddressOf(vl), tir.AddressOf(xl), tir.AddressOf(wl), row)), nil
}
