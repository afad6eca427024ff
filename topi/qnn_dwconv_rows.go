package topi

import "fmt"

// The depthwise kernel's accumulation by rows (qdwRows): for each output
// row, the KH input rows it reads are first laid out as int16 values less
// the input zero point, with zeros for the padding, each split into its
// stride's phases (phase p holds the columns p, p + SW, p + 2*SW, ...).
// Then every tap of a block of eight output columns reads eight
// consecutive values of one phase, whatever the stride and dilation, and
// the block's sums stay in a vector register across the taps (GCC/Clang
// generic vectors: AVX2, AVX-512, NEON, or scalar code where there are no
// vectors). The per-tap loop over the columns that the plain form runs
// (bounds per tap, sums stored and reloaded at every tap) took twice as
// long on mobilenet_v2's depthwise convolutions.
//
// Where the target has vector units (x86 AVX2 and up, Arm NEON) the rows
// hold float32 and the sums are float32 multiply-adds, exactly the
// integer sums: a centred value is at most 255 in magnitude and a weight
// 128, so every product and every partial sum over at most
// qdwRowsMaxTaps taps is an integer below 2^24 in magnitude, which
// float32 represents exactly and which each operation therefore gives
// exactly; the block converts to int32 without loss. One (fused)
// multiply-add per tap and eight columns replaces a widening load, a
// 32-bit multiply and an add: mobilenet_v2's depthwise layers took three
// times as long in int8 as in float before.

// qdwRowsMaxBuffer bounds the row buffer, which lives on the stack of
// the thread running the kernel.
const qdwRowsMaxBuffer = 32 << 10

// qdwRowsMaxTaps bounds the taps, whose broadcast weights the kernel
// keeps in an array of vectors (and, with 64 * 255 * 128 < 2^24, keeps
// the float form's sums exact).
const qdwRowsMaxTaps = 64

// fmaGuard is the preprocessor condition of the row form's x86 fused
// multiply-add (and of the header it needs, qdwconvKernel.Includes).
const fmaGuard = "defined(__FMA__) && defined(__AVX2__)"

// qdwRows is the geometry of the row form.
type qdwRows struct {
	p qconvParams
	// owv is the output width rounded up to the block of eight; l is the
	// length of a phase: owv plus the furthest tap's offset.
	owv, l int64
	// float: the rows and sums are float32 (vector targets), else int16
	// rows and int32 sums.
	float bool
}

// newDWRows returns the row form for p, or false where its buffers would
// be too large.
func newDWRows(p qconvParams) (qdwRows, bool) {
	r := qdwRows{p: p, owv: (p.ow + 7) / 8 * 8, float: p.isa != qconvScalar}
	r.l = r.owv + (p.kw-1)*p.dw/p.sw + 1
	// (The padding bound keeps every input row index above INT32_MIN,
	// the mark of an empty slot.)
	if p.kh*p.kw > qdwRowsMaxTaps || r.slots()*p.sw*r.l*r.elem() > qdwRowsMaxBuffer || p.ph >= 1<<30 {
		return qdwRows{}, false
	}
	return r, true
}

// slots is the number of laid-out input rows the kernel keeps: the rows
// one window spans, (KH-1)*DH + 1.
func (r qdwRows) slots() int64 { return (r.p.kh-1)*r.p.dh + 1 }

// elem is the size of a row element in bytes.
func (r qdwRows) elem() int64 {
	if r.float {
		return 4
	}
	return 2
}

// emit writes the C that opens the loop over output rows and leaves the
// row's sums in acc[0, OW).
func (r qdwRows) emit(w func(string, ...any)) {
	p := r.p
	xt := "uint8_t"
	if p.signed {
		xt = "int8_t"
	}
	// et: a row element; vt, its vector of eight (the sums); st, the
	// scalar type the weights are broadcast from.
	et, vt, st := "int16_t", "v8si", "int32_t"
	w("  typedef int32_t v8si __attribute__((vector_size(32)));\n")
	if r.float {
		et, vt, st = "float", "v8sf", "float"
		w("  typedef float v8sf __attribute__((vector_size(32)));\n")
	} else {
		w("  typedef int16_t v8hi __attribute__((vector_size(16)));\n")
	}
	w("  enum { L = %d, NS = %d };\n", r.l, r.slots())
	w("  %s rb[NS * %d * L] __attribute__((aligned(32)));\n", et, p.sw)
	// Slot s holds input row tag[s] (s = iy mod NS): the NS rows a
	// window spans map to distinct slots, so a row laid out for one
	// output row serves the next ones that read it.
	w("  int32_t tag[NS], slot[%d];\n", p.kh)
	w("  for (int32_t i = 0; i < NS; ++i) tag[i] = INT32_MIN;\n")
	w("  int32_t acc[%d] __attribute__((aligned(32)));\n", r.owv)
	w("  %s wv[%d];\n", vt, p.kh*p.kw)
	w("  for (int32_t t = 0; t < %d; ++t) wv[t] = (%s){0, 0, 0, 0, 0, 0, 0, 0} + (%s)wc[t];\n", p.kh*p.kw, vt, st)
	w("  for (int32_t oy = 0; oy < %d; ++oy) {\n", p.oh)
	// The rows, centred and padded, phase by phase: phase q's element i
	// is input column i*SW + q - PW.
	w("    for (int32_t ky = 0; ky < %d; ++ky) {\n", p.kh)
	w("      const int32_t iy = oy * %d - %d + ky * %d;\n", p.sh, p.ph, p.dh)
	w("      const int32_t sl = (iy %% NS + NS) %% NS;\n")
	w("      slot[ky] = sl;\n")
	w("      if (tag[sl] == iy) continue;\n")
	w("      tag[sl] = iy;\n")
	w("      %s* restrict r = rb + sl * %d * L;\n", et, p.sw)
	w("      if ((uint32_t)iy >= %du) {\n", p.h)
	w("        for (int32_t i = 0; i < %d * L; ++i) r[i] = 0;\n", p.sw)
	w("        continue;\n      }\n")
	w("      const %s* restrict row = s + (int64_t)iy * %d;\n", xt, p.w)
	w("      for (int32_t q = 0; q < %d; ++q) {\n", p.sw)
	w("        %s* restrict rq = r + q * L;\n", et)
	// Elements i in [lo, hi) read the row: 0 <= i*SW + q - PW < W.
	w("        int32_t lo = (%d - q + %d) / %d;\n", p.pw, p.sw-1, p.sw)
	w("        if (lo < 0) lo = 0;\n        if (lo > L) lo = L;\n")
	w("        int32_t hi = (%d - q + %d) / %d;\n", p.w+p.pw, p.sw-1, p.sw)
	w("        if (hi > L) hi = L;\n        if (hi < lo) hi = lo;\n")
	w("        for (int32_t i = 0; i < lo; ++i) rq[i] = 0;\n")
	w("        for (int32_t i = lo; i < hi; ++i) rq[i] = (%s)((int32_t)row[i * %d + q - %d] - (%d));\n", et, p.sw, p.pw, p.izp)
	w("        for (int32_t i = hi; i < L; ++i) rq[i] = 0;\n")
	w("      }\n    }\n")
	// Blocks of eight output columns, every tap summed in a register.
	w("    for (int32_t ox = 0; ox < %d; ox += 8) {\n", r.owv)
	w("      %s a = {0, 0, 0, 0, 0, 0, 0, 0};\n", vt)
	w("      for (int32_t ky = 0; ky < %d; ++ky)\n", p.kh)
	w("        for (int32_t kx = 0; kx < %d; ++kx) {\n", p.kw)
	src := fmt.Sprintf("rb + (slot[ky] * %d + kx * %d %% %d) * L + ox + kx * %d / %d", p.sw, p.dw, p.sw, p.dw, p.sw)
	if r.float {
		// A fused multiply-add where the target has one (x86 FMA; the
		// result is the same, exactly), else a multiply and an add.
		w("          v8sf h;\n          memcpy(&h, %s, sizeof h);\n", src)
		w("#if %s\n", fmaGuard)
		w("          a = (v8sf)_mm256_fmadd_ps((__m256)h, (__m256)wv[ky * %d + kx], (__m256)a);\n", p.kw)
		w("#else\n")
		w("          a += h * wv[ky * %d + kx];\n", p.kw)
		w("#endif\n")
	} else {
		w("          v8hi h;\n          memcpy(&h, %s, sizeof h);\n", src)
		w("          a += __builtin_convertvector(h, v8si) * wv[ky * %d + kx];\n", p.kw)
	}
	w("        }\n")
	if r.float {
		w("      const v8si ai = __builtin_convertvector(a, v8si);\n")
		w("      memcpy(acc + ox, &ai, sizeof ai);\n")
	} else {
		w("      memcpy(acc + ox, &a, sizeof a);\n")
	}
	w("    }\n")
}
