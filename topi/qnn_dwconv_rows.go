package topi

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

// qdwRowsMaxBuffer bounds the row buffer, which lives on the stack of
// the thread running the kernel.
const qdwRowsMaxBuffer = 32 << 10

// qdwRowsMaxTaps bounds the taps, whose broadcast weights the kernel
// keeps in an array of vectors.
const qdwRowsMaxTaps = 64

// qdwRows is the geometry of the row form.
type qdwRows struct {
	p qconvParams
	// owv is the output width rounded up to the block of eight; l is the
	// length of a phase: owv plus the furthest tap's offset.
	owv, l int64
}

// newDWRows returns the row form for p, or false where its buffers would
// be too large.
func newDWRows(p qconvParams) (qdwRows, bool) {
	r := qdwRows{p: p, owv: (p.ow + 7) / 8 * 8}
	r.l = r.owv + (p.kw-1)*p.dw/p.sw + 1
	if p.kh*p.kw > qdwRowsMaxTaps || p.kh*p.sw*r.l*2 > qdwRowsMaxBuffer {
		return qdwRows{}, false
	}
	return r, true
}

// emit writes the C that opens the loop over output rows and leaves the
// row's sums in acc[0, OW).
func (r qdwRows) emit(w func(string, ...any)) {
	p := r.p
	xt := "uint8_t"
	if p.signed {
		xt = "int8_t"
	}
	w("  typedef int32_t v8si __attribute__((vector_size(32)));\n")
	w("  typedef int16_t v8hi __attribute__((vector_size(16)));\n")
	w("  enum { L = %d };\n", r.l)
	w("  int16_t rb[%d * L] __attribute__((aligned(32)));\n", p.kh*p.sw)
	w("  int32_t acc[%d] __attribute__((aligned(32)));\n", r.owv)
	w("  v8si wv[%d];\n", p.kh*p.kw)
	w("  for (int32_t t = 0; t < %d; ++t) wv[t] = (v8si){0, 0, 0, 0, 0, 0, 0, 0} + (int32_t)wc[t];\n", p.kh*p.kw)
	w("  for (int32_t oy = 0; oy < %d; ++oy) {\n", p.oh)
	// The rows, centred and padded, phase by phase: phase q's element i
	// is input column i*SW + q - PW.
	w("    for (int32_t ky = 0; ky < %d; ++ky) {\n", p.kh)
	w("      int16_t* restrict r = rb + ky * %d * L;\n", p.sw)
	w("      const int32_t iy = oy * %d - %d + ky * %d;\n", p.sh, p.ph, p.dh)
	w("      if ((uint32_t)iy >= %du) {\n", p.h)
	w("        for (int32_t i = 0; i < %d * L; ++i) r[i] = 0;\n", p.sw)
	w("        continue;\n      }\n")
	w("      const %s* restrict row = s + (int64_t)iy * %d;\n", xt, p.w)
	w("      for (int32_t q = 0; q < %d; ++q) {\n", p.sw)
	w("        int16_t* restrict rq = r + q * L;\n")
	// Elements i in [lo, hi) read the row: 0 <= i*SW + q - PW < W.
	w("        int32_t lo = (%d - q + %d) / %d;\n", p.pw, p.sw-1, p.sw)
	w("        if (lo < 0) lo = 0;\n        if (lo > L) lo = L;\n")
	w("        int32_t hi = (%d - q + %d) / %d;\n", p.w+p.pw, p.sw-1, p.sw)
	w("        if (hi > L) hi = L;\n        if (hi < lo) hi = lo;\n")
	w("        for (int32_t i = 0; i < lo; ++i) rq[i] = 0;\n")
	w("        for (int32_t i = lo; i < hi; ++i) rq[i] = (int16_t)((int32_t)row[i * %d + q - %d] - (%d));\n", p.sw, p.pw, p.izp)
	w("        for (int32_t i = hi; i < L; ++i) rq[i] = 0;\n")
	w("      }\n    }\n")
	// Blocks of eight output columns, every tap summed in a register.
	w("    for (int32_t ox = 0; ox < %d; ox += 8) {\n", r.owv)
	w("      v8si a = {0, 0, 0, 0, 0, 0, 0, 0};\n")
	w("      for (int32_t ky = 0; ky < %d; ++ky)\n", p.kh)
	w("        for (int32_t kx = 0; kx < %d; ++kx) {\n", p.kw)
	w("          v8hi h;\n")
	w("          memcpy(&h, rb + (ky * %d + kx * %d %% %d) * L + ox + kx * %d / %d, sizeof h);\n", p.sw, p.dw, p.sw, p.dw, p.sw)
	w("          a += __builtin_convertvector(h, v8si) * wv[ky * %d + kx];\n", p.kw)
	w("        }\n")
	w("      memcpy(acc + ox, &a, sizeof a);\n")
	w("    }\n")
}
