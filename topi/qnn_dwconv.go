package topi

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// The depthwise qnn.conv2d (groups = input channels = output channels,
// weight OIHW [C, 1, KH, KW] int8 with zero point 0) on the CPU: one call
// of qconvDWKernel per (image, channel), in parallel over the channels.
// A channel's output row is accumulated in int32, tap by tap, over the
// columns whose input is in bounds (a padded tap adds nothing), as plain
// C loops that the C compiler vectorises; qnn.conv2d_requantize then
// requantizes the row before storing bytes.

func init() {
	for _, impl := range []struct {
		o       *op.Op
		compute strategy.ComputeFunc
	}{
		{op.QConv2D, computeQDWConvCPU},
		{op.QConv2DRequantize, computeQDWConvRequantizeCPU},
	} {
		if err := strategy.Default.Add(impl.o, strategy.ForKey("cpu"), strategy.Implementation{
			Name: impl.o.Name + ".depthwise.cpu", PLevel: strategy.PLevelTuned,
			Compute: impl.compute, Schedule: ScheduleInjective, Valid: validQDWConvCPU,
		}); err != nil {
			panic(err)
		}
	}
}

// validQDWConvCPU accepts depthwise convolutions with int8 weights in
// OIHW and zero point 0.
func validQDWConvCPU(c *strategy.Call) bool {
	if c.Target == nil || len(c.ArgTypes) < 2 || c.Attrs.Int("kernel_zero_point") != 0 || c.Attrs.Str("kernel_layout") != "OIHW" {
		return false
	}
	xt, ok1 := c.ArgTypes[0].(*ir.TensorType)
	wt, ok2 := c.ArgTypes[1].(*ir.TensorType)
	ot, ok3 := c.OutType.(*ir.TensorType)
	if !ok1 || !ok2 || !ok3 || wt.DType != ir.Int8 || len(xt.Shape) != 4 || len(wt.Shape) != 4 || ot.Shape.NumElements() == 0 {
		return false
	}
	g := c.Attrs.Int("groups")
	return g > 1 && g == xt.Shape[1] && g == wt.Shape[0] && wt.Shape[1] == 1 && wt.Shape[2]*wt.Shape[3] <= qconvMaxK &&
		xt.Shape.NumElements() <= 1<<31-1 && ot.Shape.NumElements() <= 1<<31-1 && ot.Shape[3] <= 1<<16
}

func computeQDWConvCPU(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	return qdwconvCPU(c, in, nil)
}

func computeQDWConvRequantizeCPU(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	return qdwconvCPU(c, in, newQConvEpi(c, in))
}

func qdwconvCPU(c *strategy.Call, in []*te.Tensor, epi *qconvEpi) ([]*te.Tensor, error) {
	x, w := in[0], in[1]
	ot := c.OutTensor()
	p, err := newQConvParams(c, x, w)
	if err != nil {
		return nil, err
	}
	k := newQDWConvKernel(p, epi)
	inputs := []*te.Tensor{x, w}
	if epi != nil {
		inputs = append(inputs, in[2], in[3])
	}
	n := x.Shape[0]
	return te.Extern(nnName(c), []ir.Shape{ot.Shape}, []ir.DType{ot.DType}, inputs, func(ins, outs []*tir.Buffer) tir.Stmt {
		iv, cv := tir.NewVar("n", tir.Int32T), tir.NewVar("c", tir.Int32T)
		zero := tir.Idx(0)
		args := []tir.PrimExpr{
			tir.AddressOf(tir.NewLoad(ins[0], iv, zero, zero, zero)),
			tir.AddressOf(tir.NewLoad(ins[1], zero, zero, zero, zero)),
		}
		if epi != nil {
			var mi []tir.PrimExpr
			if epi.perChannel {
				mi = []tir.PrimExpr{zero}
			}
			args = append(args, tir.AddressOf(tir.NewLoad(ins[2], zero)), tir.AddressOf(tir.NewLoad(ins[3], mi...)))
		}
		args = append(args, tir.AddressOf(tir.NewLoad(outs[0], iv, zero, zero, zero)), cv)
		// One call per channel, or per block of rows of eight or sixteen
		// channels (block form).
		calls := p.c
		if k.block != nil {
			calls = k.block.split.calls()
		}
		kind := tir.Parallel
		if calls < 2 {
			kind = tir.Serial
		}
		return tir.Loop(iv, n, tir.Serial, tir.Loop(cv, calls, kind, tir.Eval(tir.CallKernel(k, args...))))
	}), nil
}

// qdwconvKernel computes one channel of one image of a depthwise
// qnn.conv2d (or qnn.conv2d_requantize, with epi).
type qdwconvKernel struct {
	p   qconvParams
	epi *qconvEpi
	// fma: the kernel uses the row form's float32 sums, whose x86
	// fused multiply-add needs <immintrin.h> under its own guard.
	fma bool
	// block: the block form (qnn_dwconv_block.go), eight or sixteen channels per
	// call; nil for the row form's one.
	block       *qdwBlock
	symbol, src string
}

func newQDWConvKernel(p qconvParams, epi *qconvEpi) *qdwconvKernel {
	k := &qdwconvKernel{p: p, epi: epi}
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	xt := "uint8_t"
	if p.signed {
		xt = "int8_t"
	}
	if epi != nil {
		// The convolution kernel's requantization (sixteen lanes at a
		// time on AVX-512, eight with AVX2), written for this kernel's
		// symbol.
		b.WriteString((&qconvKernel{p: qconvParams{isa: p.isa}, epi: epi}).epilogueHelpers())
	}
	if blk, ok := newQDWBlock(p); ok {
		k.block, k.fma = &blk, true
		b.WriteString(blk.source(p, epi))
		k.symbol, k.src = kernelSymbol("kiln_qdwconv_", b.String())
		return k
	}
	w("/* Depthwise qnn.conv2d: one of %d channels of %dx%d, %dx%d taps (stride %dx%d, pad %dx%d, dilation %dx%d). */\n",
		p.c, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw)
	if epi != nil {
		w("static void KILN_SYMBOL(const %s* restrict x, const int8_t* restrict w, const int32_t* restrict bias, const int32_t* restrict mult, %s* restrict out, int32_t c) {\n", xt, epi.outType())
	} else {
		w("static void KILN_SYMBOL(const %s* restrict x, const int8_t* restrict w, int32_t* restrict out, int32_t c) {\n", xt)
	}
	w("  const %s* restrict s = x + (int64_t)c * %d;\n", xt, p.h*p.w)
	w("  const int8_t* restrict wc = w + (int64_t)c * %d;\n", p.kh*p.kw)
	if epi != nil {
		m := "mult[0]"
		if epi.perChannel {
			m = "mult[c]"
		}
		w("  const int32_t b = bias[c], m = %s;\n", m)
	}
	rows, useRows := newDWRows(p)
	k.fma = useRows && rows.float
	if useRows {
		rows.emit(w)
	} else {
		w("  int32_t acc[%d];\n", p.ow)
		w("  for (int32_t oy = 0; oy < %d; ++oy) {\n", p.oh)
		w("    for (int32_t ox = 0; ox < %d; ++ox) acc[ox] = 0;\n", p.ow)
		w("    for (int32_t ky = 0; ky < %d; ++ky) {\n", p.kh)
		w("      const int32_t iy = oy * %d - %d + ky * %d;\n", p.sh, p.ph, p.dh)
		w("      if ((uint32_t)iy >= %du) continue;\n", p.h)
		w("      const %s* restrict row = s + (int64_t)iy * %d;\n", xt, p.w)
		w("      for (int32_t kx = 0; kx < %d; ++kx) {\n", p.kw)
		w("        const int32_t wv = wc[ky * %d + kx];\n", p.kw)
		w("        const int32_t off = kx * %d - %d;\n", p.dw, p.pw)
		// Columns whose input ix = ox*sw + off lies in [0, W).
		w("        int32_t lo = off < 0 ? (-off + %d) / %d : 0;\n", p.sw-1, p.sw)
		w("        int32_t hi = %d - off <= 0 ? 0 : (%d - off + %d) / %d;\n", p.w, p.w, p.sw-1, p.sw)
		w("        if (hi > %d) hi = %d;\n", p.ow, p.ow)
		w("        for (int32_t ox = lo; ox < hi; ++ox) acc[ox] += ((int32_t)row[ox * %d + off] - (%d)) * wv;\n", p.sw, p.izp)
		w("      }\n    }\n")
	}
	if epi != nil {
		ot := epi.outType()
		w("    %s* restrict d = out + (int64_t)c * %d + oy * %d;\n", ot, p.oh*p.ow, p.ow)
		w("    int32_t ox = 0;\n")
		// Vector code under the ISA's guard (qconvISA.guard), then
		// the values left one at a time.
		if g := p.isa.guard(); g != "" && p.isa != qconvNEONDot && p.isa != qconvNEON {
			w("#if %s\n", g)
			if p.isa == qconvAVX512VNNI {
				w("    for (; ox + 16 <= %d; ox += 16) _mm_storeu_si128((__m128i*)(d + ox), KILN_SYMBOL_rq16(_mm512_loadu_si512((const void*)(acc + ox)), b, m));\n", p.ow)
				w("    if (ox < %d) {\n", p.ow)
				w("      const __mmask16 km = (__mmask16)((1u << (%d - ox)) - 1u);\n", p.ow)
				w("      _mm_mask_storeu_epi8((void*)(d + ox), km, KILN_SYMBOL_rq16(_mm512_maskz_loadu_epi32(km, (const void*)(acc + ox)), b, m));\n")
				w("      ox = %d;\n    }\n", p.ow)
			} else {
				// Eight lanes, narrowed to bytes: the values are within
				// the output type's range, so the saturating packs are
				// exact.
				pack := epi.pack16()
				// bytes8 declares v, acc[ox..ox+7] requantized and
				// narrowed to eight bytes in its low half.
				bytes8 := func() {
					w("      const __m256i q = KILN_SYMBOL_rq8(_mm256_loadu_si256((const __m256i*)(acc + ox)), b, m);\n")
					w("      const __m128i h = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));\n")
					w("      const __m128i v = %s(h, h);\n", pack)
				}
				w("    for (; ox + 8 <= %d; ox += 8) {\n", p.ow)
				bytes8()
				w("      _mm_storel_epi64((__m128i*)(void*)(d + ox), v);\n    }\n")
				if useRows && p.ow%8 != 0 {
					// The row form's sums run to a whole block: the last
					// columns requantize as one too, stored through a
					// buffer, instead of one at a time.
					w("    {\n")
					bytes8()
					w("      unsigned char tmp[16];\n      _mm_storeu_si128((__m128i*)(void*)tmp, v);\n")
					w("      memcpy(d + ox, tmp, %d);\n      ox = %d;\n    }\n", p.ow%8, p.ow)
				}
			}
			w("#endif\n")
		}
		w("    for (; ox < %d; ++ox) d[ox] = (%s)KILN_SYMBOL_rq(acc[ox], b, m);\n", p.ow, ot)
	} else {
		w("    for (int32_t ox = 0; ox < %d; ++ox) out[(int64_t)c * %d + oy * %d + ox] = acc[ox];\n", p.ow, p.oh*p.ow, p.ow)
	}
	w("  }\n}\n")
	k.symbol, k.src = kernelSymbol("kiln_qdwconv_", b.String())
	return k
}

// Symbol implements tir.Kernel.
func (k *qdwconvKernel) Symbol() string { return k.symbol }

// Includes implements tir.Kernel.
func (k *qdwconvKernel) Includes() []string {
	inc := []string{"<string.h>"}
	if h := k.p.isa.header(); h != "" {
		inc = append(inc, h)
	}
	if k.fma {
		inc = append(inc, "#if "+fmaGuard+"\n#include <immintrin.h>\n#endif")
	}
	return inc
}

// Source implements tir.Kernel.
func (k *qdwconvKernel) Source() string { return k.src }

// Eval implements tir.Kernel.
func (k *qdwconvKernel) Eval(args []tir.KernelArg) error {
	nargs := 4
	if k.epi != nil {
		nargs = 6
	}
	if len(args) != nargs {
		return fmt.Errorf("depthwise qnn.conv2d kernel: want %d arguments, got %d", nargs, len(args))
	}
	if k.block != nil {
		return k.evalBlock(args, args[nargs-1].Int)
	}
	c := args[nargs-1].Int
	if c < 0 || c >= k.p.c {
		return fmt.Errorf("depthwise qnn.conv2d kernel: channel %d of %d", c, k.p.c)
	}
	return k.evalChannel(args, c, 0, k.p.oh)
}

// evalChannel computes output rows [oy0, oy1) of channel c of one image,
// as the row form's call for c does for all rows.
func (k *qdwconvKernel) evalChannel(args []tir.KernelArg, c, oy0, oy1 int64) error {
	p, nargs := k.p, len(args)
	xm, xo, err := args[0].Ptr(p.c * p.h * p.w)
	if err != nil {
		return fmt.Errorf("depthwise qnn.conv2d kernel: data: %v", err)
	}
	wm, wo, err := args[1].Ptr(p.c * p.kh * p.kw)
	if err != nil {
		return fmt.Errorf("depthwise qnn.conv2d kernel: weight: %v", err)
	}
	om, oo, err := args[nargs-2].Ptr(p.c * p.oh * p.ow)
	if err != nil {
		return fmt.Errorf("depthwise qnn.conv2d kernel: output: %v", err)
	}
	var bias, mult int64
	if k.epi != nil {
		bm, bo, err := args[2].Ptr(p.c)
		if err != nil {
			return fmt.Errorf("depthwise qnn.conv2d kernel: bias: %v", err)
		}
		mi, nm := int64(0), int64(1)
		if k.epi.perChannel {
			mi, nm = c, p.c
		}
		mm, mo, err := args[3].Ptr(nm)
		if err != nil {
			return fmt.Errorf("depthwise qnn.conv2d kernel: multiplier: %v", err)
		}
		bias, mult = int64(bm.Float(bo+c)), int64(mm.Float(mo+mi))
	}
	for oy := oy0; oy < oy1; oy++ {
		for ox := int64(0); ox < p.ow; ox++ {
			var acc int64
			for ky := int64(0); ky < p.kh; ky++ {
				for kx := int64(0); kx < p.kw; kx++ {
					iy, ix := oy*p.sh-p.ph+ky*p.dh, ox*p.sw-p.pw+kx*p.dw
					if iy < 0 || iy >= p.h || ix < 0 || ix >= p.w {
						continue
					}
					acc += (int64(xm.Float(xo+(c*p.h+iy)*p.w+ix)) - p.izp) * int64(wm.Float(wo+c*p.kh*p.kw+ky*p.kw+kx))
				}
			}
			v := int64(int32(acc))
			if e := k.epi; e != nil {
				v = op.RequantizeValue(int64(int32(v+bias)), mult, e.shift, e.zp, e.lo, e.hi)
			}
			om.SetFloat(oo+(c*p.oh+oy)*p.ow+ox, float64(v))
		}
	}
	return nil
}
