package topi

import (
	"fmt"
	"math"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// Max pooling by rows: one kernel call per channel plane that reads the
// input where it lies. For each output row it takes the max of the
// window's input rows into a row buffer (one vectorised pass, every tap
// in registers), then the max of each output column's taps along that
// buffer (vectorised too; a stride of 2 costs gcc a few permutes). The
// buffer holds the left and right padding as the lowest value, which
// every max ignores; padding rows are left out of the row pass. Every
// input row is read once per output row that needs it, from L1, and
// nothing is copied first: the tile form (pool_cpu.go) copied every
// output row's input rows, split into stride phases one element at a
// time, which cost squeezenet1_1's first pool (64 x 111 x 111, 3x3
// stride 2) 0.5-0.6 ms on an AVX2 core against ONNX Runtime's 0.1.
//
// Floats follow math.Max (the interpreter's rules, as the tile form's
// kernel does): +Inf wins over everything, then NaN, and +0 over -0.
// Over a set of values that is order-free (the max is a join), so the
// separable order of the rows form gives the same bits. Only NaN and -0
// make the plain max a > b ? a : b differ from it (+Inf only matters
// beside a NaN), so a plane is first pooled with the plain max and then
// checked: without a NaN among the taps, the plain max has the exact
// max's value, and its bits too unless that value is zero, where the
// plain max may give -0 although a tap is +0 (it never gives +0 when the
// exact max is -0: +0 comes from a tap). NaN is found by summing the
// rows the windows read, column by column, as they are first read (one
// vector add per eight or sixteen values: a NaN makes its column's sum
// NaN; +Inf beside -Inf does too, a false alarm that costs only time),
// -0 by looking at the outputs. A plane with either is pooled again with
// the exact max. The check is a third of the plain pool's instructions;
// a scan for NaN and -0 before each output row (two compares per value
// and a reduction per row), which this replaced, was two thirds:
// squeezenet1_1's first pool (64 x 111 x 111, 3x3 stride 2) took 0.104
// -0.114 ms with the scan, 0.079-0.094 with the check and 0.057-0.064
// with neither (C harness, AVX-512, one core).

// poolRowsMaxBuffer bounds the row buffer, which lives on the stack of
// the thread running the kernel: the bound of the convolutions' stack
// tiles (vTileBytes, localTileBytes), within the stack budget of AOT
// builds.
const poolRowsMaxBuffer = 16 << 10

// maxPoolRows is the geometry of one channel plane's max pooling.
type maxPoolRows struct {
	h, w, oh, ow   int64
	kh, kw         int64
	sh, sw, dh, dw int64
	ph, pw         int64
	wp             int64 // the row buffer: pw + w, or the last window's reach
	dt             ir.DType
	vec            poolVecForm // the vector form (pool_vec.go), if any
	vlanes         int64       // its vector width in elements
}

// newMaxPoolRows returns the rows form of a 2-D max pool of an NCHW input
// of xShape, or false where it does not apply: other types, planes or
// rows beyond 32-bit indexing, or a row buffer over poolRowsMaxBuffer.
func newMaxPoolRows(c *strategy.Call, xShape ir.Shape, dt ir.DType) (*maxPoolRows, bool) {
	if dt != ir.Float32 && dt != ir.Uint8 && dt != ir.Int8 || len(xShape) != 4 {
		return nil, false
	}
	k := c.Attrs.Ints("pool_size")
	if len(k) != 2 {
		return nil, false
	}
	g, err := newConvGeom(c, k[0], k[1])
	if err != nil {
		return nil, false
	}
	r := &maxPoolRows{h: xShape[2], w: xShape[3], oh: g.oh, ow: g.ow, kh: g.kh, kw: g.kw,
		sh: g.sh, sw: g.sw, dh: g.dh, dw: g.dw, ph: g.ph, pw: g.pw, dt: dt}
	if !r.fit() {
		return nil, false
	}
	r.vec, r.vlanes = poolVecFor(c.Target.Processor(), r)
	return r, true
}

// fit checks that the geometry's sizes and offsets fit the kernel's
// 32-bit indexing and its row buffer the stack bound, and sizes the
// buffer.
func (r *maxPoolRows) fit() bool {
	for _, v := range []int64{r.h, r.w, r.oh, r.ow, r.kh, r.kw, r.sh, r.sw, r.dh, r.dw} {
		if v <= 0 || v > math.MaxInt32 {
			return false
		}
	}
	if r.ph < 0 || r.pw < 0 || r.ph > math.MaxInt32 || r.pw > math.MaxInt32 || r.h > math.MaxInt32/r.w || r.oh > math.MaxInt32/r.ow {
		return false
	}
	// The last window's reach, in 64-bit arithmetic from bounded factors.
	reach := (r.ow-1)*r.sw + (r.kw-1)*r.dw + 1
	if reach > math.MaxInt32 || (r.oh-1)*r.sh > math.MaxInt32-r.ph || (r.kh-1)*r.dh > math.MaxInt32-r.h || r.h+r.ph+r.dh > math.MaxInt32 {
		return false
	}
	r.wp = max(r.pw+r.w, reach)
	stack := r.wp
	if r.dt == ir.Float32 {
		stack += r.w // the column sums of the NaN check
	}
	return stack*int64(r.dt.Size()) <= poolRowsMaxBuffer
}

// maxPoolRowsValid accepts the max pools the rows form computes.
func maxPoolRowsValid(c *strategy.Call) bool {
	if !maxPoolCPUValid(c) || len(c.ArgTypes) != 1 {
		return false
	}
	xt, ok := c.ArgTypes[0].(*ir.TensorType)
	if !ok {
		return false
	}
	_, ok = newMaxPoolRows(c, xt.Shape, xt.DType)
	return ok && xt.Shape[0]*xt.Shape[1] <= math.MaxInt32
}

// computeMaxPoolRows is the rows form: a loop over images and channels
// (in parallel) calling the kernel on each plane.
func computeMaxPoolRows(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x := in[0]
	r, ok := newMaxPoolRows(c, x.Shape, x.DType)
	if !ok {
		return nil, fmt.Errorf("%s: the rows form does not apply to input %v", c.Op.Name, x.Shape)
	}
	k := newMaxPoolRowsKernel(r)
	ot := c.OutTensor()
	return te.Extern(nnName(c), []ir.Shape{ot.Shape}, []ir.DType{ot.DType}, []*te.Tensor{x}, func(ins, outs []*tir.Buffer) tir.Stmt {
		nv, cv := tir.NewVar("n", tir.Int32T), tir.NewVar("c", tir.Int32T)
		zero := tir.Idx(0)
		call := tir.Eval(tir.CallKernel(k,
			tir.AddressOf(tir.NewLoad(ins[0], nv, cv, zero, zero)),
			tir.AddressOf(tir.NewLoad(outs[0], nv, cv, zero, zero))))
		kind := tir.Parallel
		if x.Shape[1] < 2 {
			kind = tir.Serial
		}
		return tir.Loop(nv, x.Shape[0], tir.Serial, tir.Loop(cv, x.Shape[1], kind, call))
	}), nil
}

// maxPoolRowsKernel is the rows form's kernel for one channel plane:
// (const T* x, T* y), x the H x W input plane and y the OH x OW output.
type maxPoolRowsKernel struct {
	r           *maxPoolRows
	symbol, src string
}

func newMaxPoolRowsKernel(r *maxPoolRows) *maxPoolRowsKernel {
	k := &maxPoolRowsKernel{r: r}
	k.symbol, k.src = kernelSymbol("kiln_maxpool_rows_", k.source("KILN_SYMBOL"))
	return k
}

// Symbol implements tir.Kernel.
func (k *maxPoolRowsKernel) Symbol() string { return k.symbol }

// Includes implements tir.Kernel.
func (k *maxPoolRowsKernel) Includes() []string {
	if k.r.vec != poolVecNone {
		return []string{"<math.h>", "<string.h>", "#if defined(__AVX512F__) || defined(__AVX2__)\n#include <immintrin.h>\n#endif"}
	}
	return []string{"<math.h>", "<string.h>"}
}

// Source implements tir.Kernel.
func (k *maxPoolRowsKernel) Source() string { return k.src }

// cType and low are the element's C type and the identity of its max.
func (r *maxPoolRows) cType() (typ, low string) {
	switch r.dt {
	case ir.Uint8:
		return "uint8_t", "0"
	case ir.Int8:
		return "int8_t", "(-128)"
	}
	return "float", "(-INFINITY)"
}

func (k *maxPoolRowsKernel) source(sym string) string {
	r := k.r
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	typ, low := r.cType()
	isFloat := r.dt == ir.Float32
	p("/* Max pooling by rows, one %s channel: %dx%d -> %dx%d, %dx%d taps, stride %dx%d, dilation %dx%d, padding %dx%d; vector form %s (%d lanes). */\n",
		typ, r.h, r.w, r.oh, r.ow, r.kh, r.kw, r.sh, r.sw, r.dh, r.dw, r.ph, r.pw, r.vec, r.vlanes)
	if isFloat {
		writeExactMax(p, sym)
		// The column sums of rows [0, n) of x into sum: NaN where a
		// column holds a NaN (or both infinities).
		p("static inline void %s_sum(float* restrict sum, const float* restrict x, int32_t n) {\n", sym)
		p("  for (int32_t r = 0; r < n; ++r) {\n")
		p("    const float* restrict xr = x + (ptrdiff_t)r * %d;\n", r.w)
		p("    for (int32_t j = 0; j < %d; ++j) sum[j] += xr[j];\n  }\n}\n", r.w)
	}
	// With a vector form, the rows form is its fallback under its own
	// name.
	rows := sym
	if r.vec != poolVecNone {
		rows = sym + "_rows"
	}
	p("static void %s(const %s* restrict x, %s* restrict y) {\n", rows, typ, typ)
	p("  %s vm[%d];\n", typ, r.wp)
	if r.pw > 0 {
		p("  for (int32_t j = 0; j < %d; ++j) vm[j] = %s;\n", r.pw, low)
	}
	if r.wp > r.pw+r.w {
		p("  for (int32_t j = %d; j < %d; ++j) vm[j] = %s;\n", r.pw+r.w, r.wp, low)
	}
	if isFloat {
		// odd: pooling again with the exact max; scanned: the rows
		// summed so far.
		p("  uint32_t odd = 0;\n  int32_t scanned = 0;\n")
		p("  float sum[%d];\n  for (int32_t j = 0; j < %d; ++j) sum[j] = 0.0f;\nagain:\n", r.w, r.w)
	}
	p("  for (int32_t oh = 0; oh < %d; ++oh) {\n", r.oh)
	r.writeWindowRows(p)
	p("    %s* restrict o = y + (ptrdiff_t)oh * %d;\n", typ, r.ow)
	p("    if (k0 >= k1) {\n      for (int32_t j = 0; j < %d; ++j) o[j] = %s;\n      continue;\n    }\n", r.ow, low)
	p("    const %s* restrict x0 = x + (ptrdiff_t)(r0 + k0 * %d) * %d;\n", typ, r.dh, r.w)
	if isFloat {
		p("    const int32_t last = r0 + (k1 - 1) * %d + 1;\n", r.dh)
		p("    if (odd == 0 && last > scanned) {\n")
		if r.dh == 1 {
			// Later windows start no earlier: rows before this one's
			// first are never read.
			p("      const int32_t first = r0 + k0 > scanned ? r0 + k0 : scanned;\n")
		} else {
			// Dilated windows interleave: a row this window skips may be
			// the next one's.
			p("      const int32_t first = scanned;\n")
		}
		p("      %s_sum(sum, x + (ptrdiff_t)first * %d, last - first);\n", sym, r.w)
		p("      scanned = last;\n    }\n")
		p("    if (odd == 0) {\n")
	}
	fast := func(a, m string) string { return fmt.Sprintf("%s > %s ? %s : %s", a, m, a, m) }
	k.rowsPass(p, typ, fast)
	if isFloat {
		p("    } else {\n")
		k.rowsPass(p, typ, func(a, m string) string { return fmt.Sprintf("%s_max(%s, %s)", sym, m, a) })
		p("    }\n")
	}
	p("  }\n")
	if isFloat {
		p("  if (odd == 0) {\n")
		p("    uint32_t bad = 0;\n")
		p("    for (int32_t j = 0; j < %d; ++j) bad |= (uint32_t)(sum[j] != sum[j]);\n", r.w)
		p("    for (int32_t j = 0; j < %d; ++j) {\n", r.oh*r.ow)
		p("      uint32_t u;\n      memcpy(&u, y + j, sizeof u);\n")
		p("      bad |= (uint32_t)(u == 0x80000000u);\n    }\n")
		p("    if (bad) {\n      odd = 1;\n      goto again;\n    }\n  }\n")
	}
	p("}\n")
	if r.vec != poolVecNone {
		r.vecSource(p, sym, rows)
	}
	return b.String()
}

// writeWindowRows writes, in the loop over output rows oh, the window's
// first row r0 (padding counted) and the taps k0 <= k < k1 that read
// rows r0 + k*DH inside [0, H): the bounds of the rows form and of the
// vector forms (pool_vec.go) alike.
func (r *maxPoolRows) writeWindowRows(p func(string, ...any)) {
	p("    const int32_t r0 = oh * %d - %d;\n", r.sh, r.ph)
	p("    const int32_t k0 = r0 < 0 ? (-r0 + %d) / %d : 0;\n", r.dh-1, r.dh)
	p("    const int32_t kn = r0 < %d ? (%d - r0 + %d) / %d : 0;\n", r.h, r.h, r.dh-1, r.dh)
	p("    const int32_t k1 = kn < %d ? kn : %d;\n", r.kh, r.kh)
}

// rowsPass writes one output row's two passes with the max max(a, m):
// the window's rows into vm (all KH taps in one loop when none is
// padding), then each output column's taps along vm.
func (k *maxPoolRowsKernel) rowsPass(p func(string, ...any), typ string, mx func(a, m string) string) {
	r := k.r
	rowStride := r.dh * r.w
	p("      if (k1 - k0 == %d) {\n", r.kh)
	p("        for (int32_t j = 0; j < %d; ++j) {\n", r.w)
	p("          %s m = x0[j];\n", typ)
	for t := int64(1); t < r.kh; t++ {
		p("          m = %s;\n", mx(fmt.Sprintf("x0[j + %d]", t*rowStride), "m"))
	}
	p("          vm[%d + j] = m;\n        }\n", r.pw)
	p("      } else {\n")
	p("        for (int32_t j = 0; j < %d; ++j) vm[%d + j] = x0[j];\n", r.w, r.pw)
	p("        for (int32_t k = 1; k < k1 - k0; ++k) {\n")
	p("          const %s* restrict xk = x0 + (ptrdiff_t)k * %d;\n", typ, rowStride)
	p("          for (int32_t j = 0; j < %d; ++j) vm[%d + j] = %s;\n", r.w, r.pw, mx("xk[j]", fmt.Sprintf("vm[%d + j]", r.pw)))
	p("        }\n      }\n")
	p("      for (int32_t j = 0; j < %d; ++j) {\n", r.ow)
	p("        const %s* v = vm + j * %d;\n", typ, r.sw)
	p("        %s m = v[0];\n", typ)
	for t := int64(1); t < r.kw; t++ {
		p("        m = %s;\n", mx(fmt.Sprintf("v[%d]", t*r.dw), "m"))
	}
	p("        o[j] = m;\n      }\n")
}

// Eval implements tir.Kernel: for every output, math.Max from the lowest
// value over the window's taps inside the plane.
func (k *maxPoolRowsKernel) Eval(args []tir.KernelArg) error {
	r := k.r
	if len(args) != 2 {
		return fmt.Errorf("max pool rows kernel: want 2 pointers, got %d arguments", len(args))
	}
	xm, xoff, err := args[0].Ptr(r.h * r.w)
	if err != nil {
		return fmt.Errorf("max pool rows kernel: input: %v", err)
	}
	ym, yoff, err := args[1].Ptr(r.oh * r.ow)
	if err != nil {
		return fmt.Errorf("max pool rows kernel: output: %v", err)
	}
	low := math.Inf(-1)
	switch r.dt {
	case ir.Uint8:
		low = 0
	case ir.Int8:
		low = -128
	}
	for oh := int64(0); oh < r.oh; oh++ {
		for ow := int64(0); ow < r.ow; ow++ {
			m := low
			for i := int64(0); i < r.kh; i++ {
				row := oh*r.sh - r.ph + i*r.dh
				if row < 0 || row >= r.h {
					continue
				}
				for j := int64(0); j < r.kw; j++ {
					col := ow*r.sw - r.pw + j*r.dw
					if col < 0 || col >= r.w {
						continue
					}
					m = math.Max(m, xm.Float(xoff+row*r.w+col)) // integers: exact in float64
				}
			}
			ym.SetFloat(yoff+oh*r.ow+ow, m)
		}
	}
	return nil
}
