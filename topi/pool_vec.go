package topi

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
)

// The vector forms of the rows kernel (pool_rows.go) for float32 planes
// on AVX-512: every output vector is the max of one masked load per tap,
// the masks fixed when the kernel is written, lanes outside the plane
// reading the lowest value. Where a plane's rows are narrow the rows
// form's passes over row buffers of a vector or two, and its scalar
// tails, cost more than the taps themselves (googlenet's 3x3 stride-1
// pools on 14x14 took 0.096 ms for 512 channels against 0.031 for ONNX
// Runtime's blocked kernel, C harness on one Emerald Rapids core), so:
//
//   - the flat form (poolVecFlat) takes stride-1 pools whose output rows
//     are as wide as the input's: output position q of the plane reads
//     input position q plus a constant per tap, so the whole plane is one
//     run of vectors with no row tails (14x14: 0.031 ms; 28x28, 192
//     channels: 0.043-0.048 against 0.086);
//   - the direct form (poolVecDirect) takes outputs at most
//     poolVecDirectMaxCols wide, stride 1 or 2: per output row and
//     column vector, the max over the window's rows of each tap column's
//     loads, then (stride 2) the even lanes of two such vectors for each
//     tap column (28 -> 14, 480 channels: 0.067 against 0.095; 55 -> 27,
//     128 channels: 0.071 against 0.089; 14 -> 7 by 2x2: 0.018 against
//     0.053).
//
// Wider stride-2 outputs keep the rows form, whose separable passes load
// less: resnet18's 112 -> 56 took 0.161 ms direct against 0.141.
//
// The plain max (vmaxps) decides, and the plane is checked as the rows
// form checks it: a NaN in the plane makes the sum of its values NaN
// (four accumulators, so that the adds do not wait on each other), and
// an output of -0 may be the plain max's wrong sign; either calls the
// rows form, which pools the plane again and gives the exact max.

// poolVecForm is which vector form a rows kernel has, if any.
type poolVecForm int

const (
	poolVecNone poolVecForm = iota
	poolVecFlat
	poolVecDirect
)

func (f poolVecForm) String() string {
	switch f {
	case poolVecFlat:
		return "flat"
	case poolVecDirect:
		return "direct"
	}
	return "none"
}

// poolVecFlatMaxLoads bounds the flat form's loads (output vectors times
// taps): each is one instruction of straight-line code (28x28 by 3x3:
// 441).
const poolVecFlatMaxLoads = 1024

// poolVecDirectMaxCols is the widest output the direct form takes.
const poolVecDirectMaxCols = 32

// poolVecFor chooses the vector form of geometry r on processor p: none
// without full AVX-512 or for 8-bit planes.
func poolVecFor(p *targets.Processor, r *maxPoolRows) poolVecForm {
	if r.dt != ir.Float32 || isaTable(p).name != "avx512" {
		return poolVecNone
	}
	return r.vecForm()
}

// vecForm is the vector form for r's geometry on AVX-512.
func (r *maxPoolRows) vecForm() poolVecForm {
	if r.flatFits() {
		return poolVecFlat
	}
	if (r.sw == 1 || r.sw == 2) && r.ow <= poolVecDirectMaxCols {
		return poolVecDirect
	}
	return poolVecNone
}

// flatFits reports whether the flat form computes r: stride 1, output rows
// as wide as the input's, within poolVecFlatMaxLoads.
func (r *maxPoolRows) flatFits() bool {
	return r.sh == 1 && r.sw == 1 && r.ow == r.w && ceilDiv(r.oh*r.ow, 16)*r.kh*r.kw <= poolVecFlatMaxLoads
}

// vecSource writes the vector form's kernel sym, which calls the rows
// form (rows) for the exact max and where AVX-512 is not compiled in.
func (r *maxPoolRows) vecSource(p func(string, ...any), sym, rows string) {
	p("static void %s(const float* restrict x, float* restrict y) {\n", sym)
	p("#if defined(__AVX512F__)\n")
	p("  const __m512 lo = _mm512_set1_ps(-INFINITY);\n")
	p("  const __m512i nz = _mm512_set1_epi32((int)0x80000000);\n")
	p("  __mmask16 bad = 0;\n")
	if r.vec == poolVecFlat {
		r.flatVecSource(p)
	} else {
		r.directVecSource(p)
	}
	// The NaN check over the whole plane (a value no window reads can
	// only raise a false alarm).
	n := r.h * r.w
	p("  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;\n")
	p("  for (int64_t i = 0; i + 64 <= %d; i += 64) {\n", n)
	for a := 0; a < 4; a++ {
		p("    s%d = _mm512_add_ps(s%d, _mm512_loadu_ps(x + i + %d));\n", a, a, 16*a)
	}
	p("  }\n")
	for i := n / 64 * 64; i < n; i += 16 {
		a := (i / 16) % 4
		p("  s%d = _mm512_add_ps(s%d, _mm512_maskz_loadu_ps((__mmask16)0x%x, x + %d));\n", a, a, firstLanes(n-i), i)
	}
	p("  const __m512 s = _mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3));\n")
	p("  bad |= _mm512_cmp_ps_mask(s, s, _CMP_UNORD_Q);\n")
	p("  if (bad) %s(x, y);\n", rows)
	p("#else\n  %s(x, y);\n#endif\n}\n", rows)
}

// storeCheck writes the store of output vector a under mask m at y + off
// and the -0 check of its lanes.
func storeCheck(p func(string, ...any), indent, y string, off int64, m uint32) {
	p("%s_mm512_mask_storeu_ps(%s + %d, (__mmask16)0x%x, a);\n", indent, y, off, m)
	p("%sbad |= _mm512_mask_cmpeq_epi32_mask((__mmask16)0x%x, _mm512_castps_si512(a), nz);\n", indent, m)
}

// flatVecSource writes the flat form: the plane's OH x OW outputs as
// consecutive vectors, each tap one masked load at a constant offset
// from the plane (through an integer address: a tap above the plane is
// no pointer before the array).
func (r *maxPoolRows) flatVecSource(p func(string, ...any)) {
	n := r.oh * r.ow
	p("  const uintptr_t base = (uintptr_t)(const void*)x;\n")
	for i := int64(0); i < ceilDiv(n, 16); i++ {
		p("  {\n")
		first := true
		for ky := int64(0); ky < r.kh; ky++ {
			for kx := int64(0); kx < r.kw; kx++ {
				m := r.flatMask(i, ky, kx)
				if m == 0 {
					continue
				}
				off := 16*i + (ky*r.dh-r.ph)*r.w + kx*r.dw - r.pw
				ld := fmt.Sprintf("_mm512_mask_loadu_ps(lo, (__mmask16)0x%x, (const void*)(base + (intptr_t)(%d)))", m, off*4)
				if first {
					p("    __m512 a = %s;\n", ld)
					first = false
				} else {
					p("    a = _mm512_max_ps(%s, a);\n", ld)
				}
			}
		}
		if first {
			p("    const __m512 a = lo;\n") // every tap is padding
		}
		storeCheck(p, "    ", "y", 16*i, firstLanes(n-16*i))
		p("  }\n")
	}
}

// flatMask is the lanes of the flat form's vector i whose tap (ky, kx)
// reads inside the plane: output position q = 16i + lane, row q / OW and
// column q % OW.
func (r *maxPoolRows) flatMask(i, ky, kx int64) uint32 {
	var m uint32
	for l := int64(0); l < 16; l++ {
		q := 16*i + l
		if q >= r.oh*r.ow {
			break
		}
		iy, ix := q/r.ow-r.ph+ky*r.dh, q%r.ow-r.pw+kx*r.dw
		if iy >= 0 && iy < r.h && ix >= 0 && ix < r.w {
			m |= 1 << l
		}
	}
	return m
}

// directVecSource writes the direct form: for each output row, the
// window's rows inside the plane (k0 <= k < k1, as the rows form finds
// them); for each column vector and tap column the max over those rows
// of a masked load (two for stride 2: the vectors whose even lanes are
// the tap's inputs), then the max over the tap columns.
func (r *maxPoolRows) directVecSource(p func(string, ...any)) {
	if r.sw == 2 {
		p("  const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);\n")
	}
	p("  for (int32_t oh = 0; oh < %d; ++oh) {\n", r.oh)
	p("    const int32_t r0 = oh * %d - %d;\n", r.sh, r.ph)
	p("    const int32_t k0 = r0 < 0 ? (-r0 + %d) / %d : 0;\n", r.dh-1, r.dh)
	p("    const int32_t kn = r0 < %d ? (%d - r0 + %d) / %d : 0;\n", r.h, r.h, r.dh-1, r.dh)
	p("    const int32_t k1 = kn < %d ? kn : %d;\n", r.kh, r.kh)
	p("    float* restrict o = y + (ptrdiff_t)oh * %d;\n", r.ow)
	for c0 := int64(0); c0 < r.ow; c0 += 16 {
		p("    {\n")
		for kx := int64(0); kx < r.kw; kx++ {
			for h := int64(0); h < r.sw; h++ {
				p("      __m512 m%d_%d = lo;\n", kx, h)
			}
		}
		p("      for (int32_t k = k0; k < k1; ++k) {\n")
		p("        const uintptr_t row = (uintptr_t)(const void*)(x + (ptrdiff_t)(r0 + k * %d) * %d);\n", r.dh, r.w)
		for kx := int64(0); kx < r.kw; kx++ {
			for h := int64(0); h < r.sw; h++ {
				off := c0*r.sw + kx*r.dw - r.pw + 16*h
				p("        m%d_%d = _mm512_max_ps(_mm512_mask_loadu_ps(lo, (__mmask16)0x%x, (const void*)(row + (intptr_t)(%d))), m%d_%d);\n",
					kx, h, r.directMask(c0, kx, h), off*4, kx, h)
			}
		}
		p("      }\n")
		for kx := int64(0); kx < r.kw; kx++ {
			e := fmt.Sprintf("m%d_0", kx)
			if r.sw == 2 {
				e = fmt.Sprintf("_mm512_permutex2var_ps(m%d_0, ev, m%d_1)", kx, kx)
			}
			if kx == 0 {
				p("      __m512 a = %s;\n", e)
			} else {
				p("      a = _mm512_max_ps(%s, a);\n", e)
			}
		}
		storeCheck(p, "      ", "o", c0, firstLanes(r.ow-c0))
		p("    }\n")
	}
	p("  }\n")
}

// directMask is the lanes of the direct form's load h (of SW) for tap
// column kx and the output columns from c0 that read inside the row:
// with stride 2 the input columns from 2*c0 + kx*DW - PW + 16h, whose
// even lanes are the outputs'.
func (r *maxPoolRows) directMask(c0, kx, h int64) uint32 {
	var m uint32
	for j := int64(0); j < 16; j++ {
		q := 16*h + j
		if q%r.sw != 0 {
			continue
		}
		l := q / r.sw
		ix := (c0+l)*r.sw + kx*r.dw - r.pw
		if c0+l < r.ow && ix >= 0 && ix < r.w {
			m |= 1 << j
		}
	}
	return m
}
