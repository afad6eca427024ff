package topi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tir"
)

// This file holds kiln's register-blocked convolution micro-kernel: a
// tir.Kernel whose C definition is written with the vector intrinsics of
// the target's processor (AVX-512, AVX2+FMA, AVX, SSE2, NEON, or scalar
// C), with its tile sized from the processor's vector width and register
// count.
//
// The kernel computes MR rows (output channels) of J consecutive
// "virtual columns" of a convolution whose input was laid out so that
// every kernel tap (ic, kh, kw) reads a contiguous run of the input:
//
//	v[m*LDV + j] = sum over ic < IC, k < KK of
//	               x[ic*ICS + KOFF[k] + j] * w[(ic*KK + k)*WS + m]
//
// accumulated in that order (ic outer, k inner), starting from 0, with
// one fused multiply-add per step on FMA targets (multiply, then add,
// elsewhere) — the same arithmetic as the convolution's TE reduction, so
// generated code and the interpreter agree bit for bit. Columns are
// processed NR vectors at a time with MR x NR accumulators held in
// registers, then one vector at a time, then one column at a time, so the
// kernel never reads or writes past column J.

// vecISA is how the kernel's C spells vectors for one instruction set.
type vecISA struct {
	name    string
	guard   string // preprocessor condition under which the vector code compiles
	include string
	typ     string
	lanes   int
	zero    string // expression
	load    string // format with the pointer
	store   string // format with pointer, value
	set1    string // format with the scalar
	fma     string // format with a, b, c: a*b + c
	fused   bool
	mr, nr  int
	dwnr    int // column vectors per register tile of the depthwise kernel (one row)
	// bmv x bnc is the broadcast kernel's register tile (ukernel_bcast.go):
	// channel vectors by columns; 0 where it is not used.
	bmv, bnc int
	regs     int // vector registers
	// bcastSteps is the fewest multiply-adds per output (input channels x
	// taps) for which chooseBroadcast picks the broadcast kernel, and
	// bcastSmallSteps the fewest on small maps (at most bcastSmallMap
	// outputs per channel); bcastOnePass that it then reduces all input
	// channels in one pass (kc = ic) instead of bcastChunk's L1-sized
	// passes. bcastSteps 0: never by default (a tuning record may still
	// select it).
	bcastSteps, bcastSmallSteps int64
	bcastOnePass                bool
	// bcastNoPrefetch: the broadcast kernel does not prefetch the next
	// channel tile's weights (bcastSpec.wpf), and a pass over the column
	// groups may then fill L1 (bcastChunkBudget).
	bcastNoPrefetch bool
	scalarFn        string // scalar multiply-add for the column tail, format a, b, c
	// maskDecl declares mask variable km for the first %d lanes; mload and
	// mstore load and store under it (pointer; pointer, value). Empty
	// when the instruction set has no fault-free masked access.
	maskDecl, mload, mstore string
	maskTable               string // a declaration maskDecl needs
}

// isaFor chooses the kernel's instruction set and register tile from the
// target's processor: MR x NR accumulators, NR input vectors and one
// broadcast weight fit in its vector registers. On 16 registers with FMA
// that is 4 x 3 (AVX2 on Zen 4 with -mtune=generic, 3x3 convolutions:
// 82–89 % of peak against 62–70 % for 8 x 1; without FMA the product
// needs a register of its own, so 8 x 1). bmv x bnc is the broadcast
// kernel's tile: channel vectors x columns, with the weight vectors and
// one broadcast beside the accumulators (AVX-512: 3 x 9 = 27
// accumulators of 32 registers; 2 x 6 left 17 unused: on Zen 5 kiln
// tune chose 3 x 9 for mobilenet_v2's 7x7 and 14x14 convolutions to 96,
// 320, 960 and 1280 channels, 2 x 6 where there were 64 or 160).
func isaFor(p *targets.Processor) vecISA {
	v := isaTable(p)
	v.regs = p.VectorRegs
	switch {
	case v.bmv == 0:
	case v.name != "avx512" || p.HalfRate512:
		// Multiply-adds bound the kernels (AVX2; AVX-512 in two halves).
		v.bcastSteps, v.bcastSmallSteps = 64, 64
	case !p.FastL2:
		// Full-width AVX-512 whose L2 does not keep up with the one-pass
		// broadcast kernel (Processor.FastL2; Intel's server cores): the
		// broadcast kernel in L1-sized passes from 512 multiply-adds per
		// output (on an Emerald Rapids core kiln tune chose it for
		// each of resnet18's packed, stride-2 3x3 convolutions, 12-37 %
		// faster than with all input channels in one pass or the
		// columns kernel), and from 128 on maps of 7x7 and smaller, as
		// on Zen 5. Without prefetching the next tile's weights, whose
		// lines the passes' own then share L1 with: on an Emerald Rapids
		// core (C harness) resnet18's 512-channel 3x3 convolution on
		// 7x7 took 1.81 ms with the prefetch and 1.53-1.54 without (in
		// passes of 14 input channels), its 64 -> 128 stride-2 one 0.795
		// against 0.746; in the model, minima of three alternating
		// profiles, the sum of resnet18's kernels 27.29 -> 26.72 ms,
		// googlenet's unchanged (21.56 -> 21.55).
		v.bcastSteps, v.bcastSmallSteps, v.bcastNoPrefetch = 512, 128, true
	default:
		// Full-width AVX-512 with a fast L2 (Zen 5): the columns
		// kernel's better load ratio wins unless the reduction is long
		// (resnet18's 3x3
		// convolutions from 128 channels on) or, on 7x7 maps and
		// smaller, where the columns kernel's vectors hold 49 valid
		// columns of 64, from 128 steps (with the 3 x 9 tile,
		// mobilenet_v2's 160 -> 960 and 320 -> 1280 1x1 convolutions on
		// 7x7 took 0.080 and 0.221 ms against the columns kernel's 0.096
		// and 0.275, measured by kiln tune); then in one pass.
		v.bcastSteps, v.bcastSmallSteps, v.bcastOnePass = 1024, 128, true
	}
	return v
}

// bcastColumns is how many columns a broadcast register tile of mv
// channel vectors can have: the accumulators, mv weight vectors, one
// broadcast (and without FMA one product) in the vector registers.
func (v vecISA) bcastColumns(mv int) int {
	free := v.regs - mv - 1
	if !v.fused {
		free--
	}
	return max(free/mv, 0)
}

// isaTable is isaFor without the register count.
func isaTable(p *targets.Processor) vecISA {
	scalarFMA := "((%[1]s) * (%[2]s) + (%[3]s))"
	if p.FMA() {
		scalarFMA = "fmaf(%[1]s, %[2]s, %[3]s)"
	}
	switch p.ISA() {
	case "avx512":
		return vecISA{name: "avx512", guard: "defined(__AVX512F__)", include: "<immintrin.h>", typ: "__m512", lanes: 16, zero: "_mm512_setzero_ps()",
			load: "_mm512_loadu_ps(%s)", store: "_mm512_storeu_ps(%s, %s)", set1: "_mm512_set1_ps(%s)",
			fma: "_mm512_fmadd_ps(%s, %s, %s)", fused: true, mr: 8, nr: 3, dwnr: 6, bmv: 3, bnc: 9, scalarFn: scalarFMA,
			maskDecl: "const __mmask16 km = (__mmask16)((1u << %d) - 1u);", mload: "_mm512_maskz_loadu_ps(km, %s)", mstore: "_mm512_mask_storeu_ps(%s, km, %s)"}
	case "avx2", "avx":
		v := vecISA{name: "avx", guard: "defined(__AVX__)", include: "<immintrin.h>", typ: "__m256", lanes: 8, zero: "_mm256_setzero_ps()",
			load: "_mm256_loadu_ps(%s)", store: "_mm256_storeu_ps(%s, %s)", set1: "_mm256_set1_ps(%s)",
			fma: "_mm256_add_ps(_mm256_mul_ps(%s, %s), %s)", mr: 8, nr: 1, dwnr: 4, bmv: 2, bnc: 5, scalarFn: scalarFMA,
			maskDecl: "const __m256i km = _mm256_loadu_si256((const __m256i*)(kiln_mk_mask8 + 8 - %d));",
			mload:    "_mm256_maskload_ps(%s, km)", mstore: "_mm256_maskstore_ps(%s, km, %s)",
			maskTable: "static const int32_t kiln_mk_mask8[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};"}
		if p.FMA() {
			v.name, v.fma, v.fused = "avx2fma", "_mm256_fmadd_ps(%s, %s, %s)", true
			v.mr, v.nr, v.bnc = 4, 3, 6
			v.guard = "defined(__AVX__) && defined(__FMA__)"
		}
		return v
	case "sse2":
		return vecISA{name: "sse2", guard: "defined(__SSE2__)", include: "<immintrin.h>", typ: "__m128", lanes: 4, zero: "_mm_setzero_ps()",
			load: "_mm_loadu_ps(%s)", store: "_mm_storeu_ps(%s, %s)", set1: "_mm_set1_ps(%s)",
			fma: "_mm_add_ps(_mm_mul_ps(%s, %s), %s)", mr: 8, nr: 1, dwnr: 4, bmv: 2, bnc: 5, scalarFn: scalarFMA}
	case "neon":
		// vfmaq_f32(c, a, b) is c + a*b, fused.
		return vecISA{name: "neon", guard: "defined(__ARM_NEON) && defined(__aarch64__)", include: "<arm_neon.h>", typ: "float32x4_t", lanes: 4, zero: "vdupq_n_f32(0.0f)",
			load: "vld1q_f32(%s)", store: "vst1q_f32(%s, %s)", set1: "vdupq_n_f32(%s)",
			fma: "vfmaq_f32(%[3]s, %[1]s, %[2]s)", fused: true, mr: 8, nr: 3, dwnr: 6, bmv: 4, bnc: 6, scalarFn: scalarFMA}
	}
	return vecISA{name: "scalar", typ: "float", lanes: 1, zero: "0.0f", load: "(*(%s))", store: "*(%s) = (%s)",
		set1: "(%s)", fma: scalarFMA, fused: p.FMA(), mr: 4, nr: 4, dwnr: 4, scalarFn: scalarFMA}
}

// kernelSpec sizes one instance of the micro-kernel:
//
//	v[m*LDV + j] = sum over ic < IC, t < len(KOFF) of
//	    x[m*XM + ic*ICS + KOFF[t] + j] * w[m*WM + (ic*len(KOFF) + t)*WS]
//
// for m < MR, j < J. A convolution's rows share their input (XM = 0) and
// read a packed weight block (WM = 1, WS = the block); a depthwise
// convolution's rows are channels with their own input plane (XM = the
// plane, IC = 1) and weight (WM = the taps, WS = 1).
type kernelSpec struct {
	mr, nr  int // rows; column vectors per register tile (0: the ISA's)
	ic      int64
	koff    []int64
	ics, xm int64
	ws, wm  int64
	ldv, j  int64
	// wpf, when positive, is the distance in elements from w to the
	// same weight of the next tile's (the next block of channels), which
	// the kernel prefetches as it reads its own: a model's weights come
	// from memory each run, and a late layer's (mobilenet_v2's 160 to
	// 960 channels, 614 KB) took 0.128 ms cold against 0.094 ms warm.
	wpf int64
	// xpf asks the kernel to prefetch, into L2, the input of the next
	// register tile of columns (the same rows, nr vectors further on) as
	// it reads its own (convolutions only: XM = 0). The tile's input rows
	// are an input channel's plane apart, more streams than the
	// processor's prefetchers follow (xPrefetchChannels).
	xpf bool
}

// xPrefetchChannels is the fewest input channels (rows of the input per
// step, xm = 0) for which a convolution's columns kernel prefetches the
// next register tile's input (kernelSpec.xpf): an L2 streamer follows
// about 32 streams, one per 4 KiB page. On an Emerald Rapids core (in
// ResNet-50, minima of six alternating profiles) the 256 -> 64 1x1
// convolution on 56x56 whose input the previous kernel had just written
// took 0.943 ms without and 0.801 with the hints, the same convolution
// where its input was warmer 0.796 and 0.784; in a C harness, its input
// in cache, the hints cost 3 % (0.712 -> 0.731 ms).
const xPrefetchChannels = 32

// convKernel is one instance of the micro-kernel (all sizes constant).
type convKernel struct {
	kernelSpec
	kernelBase
	kk int64
}

// kernelBase is what both convolution micro-kernels (this file's and
// ukernel_bcast.go's) share: the instruction set, the C definition under
// a symbol derived from its text, and the elements each pointer operand
// (v, x, w) must reach.
type kernelBase struct {
	isa                 vecISA
	symbol, src         string
	xSpan, wSpan, vSpan int64
}

// finish checks the spans and writes the C definition source builds,
// named prefix + the instruction set + a hash of the text.
func (k *kernelBase) finish(what, prefix string, source func(sym string) string) error {
	if k.xSpan > math.MaxInt32 || k.wSpan > math.MaxInt32 || k.vSpan > math.MaxInt32 {
		return fmt.Errorf("%s: operands exceed 2^31 elements", what)
	}
	k.symbol, k.src = kernelSymbol(prefix+k.isa.name+"_", source("KILN_SYMBOL"))
	return nil
}

// kernelSymbol names a kernel whose C source src was written with the
// placeholder KILN_SYMBOL: prefix and the hash of the source, and the
// source with the name in place. Kernels of the same text share a name
// (and one definition in the generated C).
func kernelSymbol(prefix, src string) (symbol, named string) {
	h := sha256.Sum256([]byte(src))
	symbol = prefix + hex.EncodeToString(h[:6])
	return symbol, strings.ReplaceAll(src, "KILN_SYMBOL", symbol)
}

// Symbol implements tir.Kernel.
func (k *kernelBase) Symbol() string { return k.symbol }

// Includes implements tir.Kernel: the intrinsics header, included only
// where the vector code compiles (see source).
func (k *kernelBase) Includes() []string {
	if k.isa.include == "" {
		return nil
	}
	return []string{"#if " + k.isa.guard + "\n#include " + k.isa.include + "\n#endif"}
}

// Source implements tir.Kernel.
func (k *kernelBase) Source() string { return k.src }

// operands checks a call's three pointer arguments (v, x, w) against the
// spans and returns their memories and offsets.
func (k *kernelBase) operands(args []tir.KernelArg) (mem [3]tir.KernelMemory, off [3]int64, err error) {
	if len(args) != 3 {
		return mem, off, fmt.Errorf("want 3 pointers, got %d arguments", len(args))
	}
	for i, sp := range [3]int64{k.vSpan, k.xSpan, k.wSpan} {
		if mem[i], off[i], err = args[i].Ptr(sp); err != nil {
			return mem, off, fmt.Errorf("%s: %v", [3]string{"output", "input", "weight"}[i], err)
		}
	}
	return mem, off, nil
}

// madd is one reduction step as the kernels' C performs it, rounded to
// float32: a fused multiply-add, or a multiply then an add.
func (v vecISA) madd(w, x, acc float64) float64 {
	if v.fused {
		return tir.RoundFloat(math.FMA(w, x, acc), ir.Float32)
	}
	return tir.RoundFloat(acc+tir.RoundFloat(w*x, ir.Float32), ir.Float32)
}

// maxTapOffset is the largest tap offset; a negative one is an error.
func maxTapOffset(what string, koff []int64) (int64, error) {
	m := int64(0)
	for _, o := range koff {
		if o < 0 {
			return 0, fmt.Errorf("%s: negative tap offset %d", what, o)
		}
		m = max(m, o)
	}
	return m, nil
}

func newConvKernel(isa vecISA, sp kernelSpec) (*convKernel, error) {
	if sp.mr <= 0 || sp.ic <= 0 || len(sp.koff) == 0 || sp.j <= 0 || (sp.mr > 1 && sp.ldv < sp.j) || sp.ics < 0 || sp.xm < 0 || sp.ws <= 0 || sp.wm < 0 {
		return nil, fmt.Errorf("conv micro-kernel: bad sizes %+v", sp)
	}
	if sp.nr <= 0 {
		sp.nr = isa.nr
	}
	k := &convKernel{kernelSpec: sp, kernelBase: kernelBase{isa: isa}, kk: int64(len(sp.koff))}
	maxOff, err := maxTapOffset("conv micro-kernel", sp.koff)
	if err != nil {
		return nil, err
	}
	mr := int64(sp.mr)
	k.xSpan = (mr-1)*sp.xm + (sp.ic-1)*sp.ics + maxOff + sp.j
	k.wSpan = (mr-1)*sp.wm + (sp.ic*k.kk-1)*sp.ws + 1
	k.vSpan = (mr-1)*sp.ldv + sp.j
	if err := k.finish("conv micro-kernel", "kiln_conv_mk_", k.source); err != nil {
		return nil, err
	}
	return k, nil
}

// source writes the C definition (named sym).
func (k *convKernel) source(sym string) string {
	isa := k.isa
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("/* conv micro-kernel: %d rows x %d columns, %d input channels x %d taps, %s */\n", k.mr, k.j, k.ic, k.kk, isa.name)
	p("%sstatic void %s(float* restrict v, const float* restrict x, const float* restrict w) {\n", noInline, sym)
	p("  static const int32_t koff[%d] = {", k.kk)
	for i, o := range k.koff {
		if i > 0 {
			b.WriteString(", ")
		}
		p("%d", o)
	}
	p("};\n")
	if isa.guard != "" {
		// The vector code only where the compiler targets the processor's
		// instruction set (the target's flags); elsewhere — a build
		// without them, another architecture, a microcontroller — the
		// same arithmetic in portable C.
		p("#if %s\n", isa.guard)
	}
	p("  int32_t j = 0;\n")
	// block emits a column loop of nv vectors (nv = 0: one scalar column);
	// with part > 0 its last vector covers only part lanes, masked.
	block := func(nv, part int, cond, step string) {
		// wide: a block of whole register tiles, whose next tile's input
		// the kernel may prefetch (xpf).
		wide := nv > 0 && nv == k.nr && part == 0
		typ, zero, set1, fma := isa.typ, isa.zero, isa.set1, isa.fma
		load := func(n int, ptr string) string {
			if part > 0 && n == nv-1 {
				return fmt.Sprintf(isa.mload, ptr)
			}
			return fmt.Sprintf(isa.load, ptr)
		}
		store := func(n int, ptr, val string) string {
			if part > 0 && n == nv-1 {
				return fmt.Sprintf(isa.mstore, ptr, val)
			}
			return fmt.Sprintf(isa.store, ptr, val)
		}
		if nv == 0 {
			typ, zero, set1, fma = "float", "0.0f", "(%s)", isa.scalarFn
			load = func(_ int, ptr string) string { return "(*(" + ptr + "))" }
			store = func(_ int, ptr, val string) string { return "*(" + ptr + ") = (" + val + ")" }
			nv = 1
		}
		p("  for (; %s; j += %s) {\n", cond, step)
		if part > 0 {
			if isa.maskTable != "" {
				p("    %s\n", isa.maskTable)
			}
			p("    "+isa.maskDecl+"\n", part)
		}
		for m := 0; m < k.mr; m++ {
			for n := 0; n < nv; n++ {
				p("    %s a%d_%d = %s;\n", typ, m, n, zero)
			}
		}
		p("    for (int32_t c = 0; c < %d; ++c) {\n", k.ic)
		p("      const float* xc = x + (ptrdiff_t)c * %d + j;\n", k.ics)
		p("      const float* wc = w + (ptrdiff_t)c * %d;\n", k.kk*k.ws)
		p("      for (int32_t t = 0; t < %d; ++t) {\n", k.kk)
		p("        const float* xp = xc + koff[t];\n")
		p("        const float* wp = wc + t * %d;\n", k.ws)
		if k.wpf > 0 && nv > 0 {
			writePrefetch(p, k.wpf)
		}
		if k.xpf && k.xm == 0 && wide {
			// The next register tile's input, into L2: one hint per
			// cache line of its nr vectors in this row.
			span := int64(nv * isa.lanes)
			var offs []int64
			for off := int64(0); off < span; off += 16 {
				offs = append(offs, span+off)
			}
			writeHints(p, "xp", ", 0, 2", offs...)
		}
		if k.xm == 0 {
			for n := 0; n < nv; n++ {
				p("        %s x%d = %s;\n", typ, n, load(n, fmt.Sprintf("xp + %d", n*isa.lanes)))
			}
		}
		for m := 0; m < k.mr; m++ {
			p("        %s b%d = %s;\n", typ, m, fmt.Sprintf(set1, fmt.Sprintf("wp[%d]", int64(m)*k.wm)))
			for n := 0; n < nv; n++ {
				acc := fmt.Sprintf("a%d_%d", m, n)
				xv := fmt.Sprintf("x%d", n)
				if k.xm != 0 {
					xv = load(n, fmt.Sprintf("xp + %d", int64(m)*k.xm+int64(n*isa.lanes)))
				}
				p("        %s = %s;\n", acc, fmt.Sprintf(fma, fmt.Sprintf("b%d", m), xv, acc))
			}
		}
		p("      }\n    }\n")
		for m := 0; m < k.mr; m++ {
			for n := 0; n < nv; n++ {
				p("    %s;\n", store(n, fmt.Sprintf("v + %d + j + %d", int64(m)*k.ldv, n*isa.lanes), fmt.Sprintf("a%d_%d", m, n)))
			}
		}
		p("  }\n")
	}
	lanes, nr := int64(isa.lanes), int64(k.nr)
	wide := nr * lanes
	if k.j >= wide {
		block(k.nr, 0, fmt.Sprintf("j + %d <= %d", wide, k.j), fmt.Sprint(wide))
	}
	// The tail, J known: whole vectors, then the last part lanes masked
	// (or one column at a time without masked access).
	rem := k.j % wide
	full, part := int(rem/lanes), int(rem%lanes)
	if lanes == 1 {
		full, part = 0, int(rem)
	}
	switch {
	case part > 0 && isa.maskDecl != "":
		block(full+1, part, fmt.Sprintf("j < %d", k.j), fmt.Sprint(rem))
	default:
		if full > 0 {
			block(full, 0, fmt.Sprintf("j + %d <= %d", int64(full)*lanes, k.j), fmt.Sprint(int64(full)*lanes))
		}
		if part > 0 {
			block(0, 0, fmt.Sprintf("j < %d", k.j), "1")
		}
	}
	if isa.guard != "" {
		p("#else\n")
		k.portable(p)
		p("#endif\n")
	}
	p("}\n")
	return b.String()
}

// portable writes the kernel as plain C loops: the same operations in
// the same order as the vector code.
func (k *convKernel) portable(p func(string, ...any)) {
	writePortable(p, k.isa, int64(k.mr), k.j, "j", fmt.Sprintf("m * %d + (c * %d + t) * %d", k.wm, k.kk, k.ws),
		fmt.Sprintf("m * %d + c * %d + koff[t] + j", k.xm, k.ics), k.ic, k.kk, k.ldv)
}

// writePortable writes a micro-kernel's portable branch: for rows m < mr
// and j < n, v[m*ldv + col] = the sum over c < ic, t < kk of
// w[wIdx] * x[xIdx] (C expressions of m, j, c, t), accumulated from 0 in
// that order with the instruction set's scalar multiply-add.
func writePortable(p func(string, ...any), isa vecISA, mr, n int64, col, wIdx, xIdx string, ic, kk, ldv int64) {
	fma := fmt.Sprintf(isa.scalarFn, "w["+wIdx+"]", "x["+xIdx+"]", "a")
	p("  for (int32_t m = 0; m < %d; ++m) {\n", mr)
	p("    for (int32_t j = 0; j < %d; ++j) {\n", n)
	p("      float a = 0.0f;\n")
	p("      for (int32_t c = 0; c < %d; ++c) {\n", ic)
	p("        for (int32_t t = 0; t < %d; ++t) {\n", kk)
	p("          a = %s;\n", fma)
	p("        }\n      }\n")
	p("      v[m * %d + %s] = a;\n", ldv, col)
	p("    }\n  }\n")
}

// Eval implements tir.Kernel: the same sums in the same order, rounded
// to float32 after every operation.
func (k *convKernel) Eval(args []tir.KernelArg) error {
	mem, off, err := k.operands(args)
	if err != nil {
		return err
	}
	vm, xm, wm := mem[0], mem[1], mem[2]
	for m := int64(0); m < int64(k.mr); m++ {
		for j := int64(0); j < k.j; j++ {
			acc := 0.0
			for c := int64(0); c < k.ic; c++ {
				for t := int64(0); t < k.kk; t++ {
					xv := xm.Float(off[1] + m*k.xm + c*k.ics + k.koff[t] + j)
					wv := wm.Float(off[2] + m*k.wm + (c*k.kk+t)*k.ws)
					acc = k.isa.madd(wv, xv, acc)
				}
			}
			vm.SetFloat(off[0]+m*k.ldv+j, acc)
		}
	}
	return nil
}

// writePrefetch writes the prefetch hints of the float weights at wp +
// each of offs (elements), for the next tile's weights. A hint never
// faults: the last tile's points past the weights, and its address is
// computed as an integer, not a pointer.
func writePrefetch(p func(string, ...any), offs ...int64) {
	writeHints(p, "wp", "", offs...)
}

// writeHints writes prefetch hints of the floats at pointer ptr + each of
// offs (elements), with __builtin_prefetch's further arguments args ("":
// the defaults; ", 0, 2": a read into L2), as writePrefetch describes.
func writeHints(p func(string, ...any), ptr, args string, offs ...int64) {
	p("#if defined(__GNUC__)\n")
	for _, o := range offs {
		p("        __builtin_prefetch((const void*)((uintptr_t)(const void*)%s + %d)%s);\n", ptr, o*4, args)
	}
	p("#endif\n")
}

// noInline precedes a micro-kernel's definition: kept out of line, its
// register tile is allocated on its own. Inlined into the loop nest that
// calls it, gcc kept the epilogue's constants in vector registers across
// the call and spilled accumulators to the stack inside the reduction
// loop (mobilenet_v2's 320->1280 1x1 convolution at 39 instead of 66
// GFLOP/s on AVX2); a call per tile costs nothing next to the tile.
const noInline = "#if defined(__GNUC__)\n__attribute__((noinline))\n#endif\n"
