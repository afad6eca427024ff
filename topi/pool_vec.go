package topi

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
)

// The vector forms of the rows kernel (pool_rows.go) for float32 planes
// on AVX-512 and AVX2: every output vector is the max of one masked load
// per tap, the masks fixed when the kernel is written, lanes outside the
// plane reading the lowest value. Where a plane's rows are narrow the rows
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
//   - the direct form (poolVecDirect, AVX-512 only) takes outputs at
//     most poolVecDirectMaxCols wide, stride 1 or 2: per output row and
//     column vector, the max over the window's rows of each tap column's
//     loads, then (stride 2) the even lanes of two such vectors for each
//     tap column (28 -> 14, 480 channels: 0.067 against 0.095; 55 -> 27,
//     128 channels: 0.071 against 0.089; 14 -> 7 by 2x2: 0.018 against
//     0.053).
//
// Wider stride-2 outputs keep the rows form, whose separable passes load
// less: resnet18's 112 -> 56 took 0.161 ms direct against 0.141, and
// googlenet's 56 -> 28 (192 channels), at the bound, 0.113 against 0.109.
//
// The flat form for AVX2 has vectors of 8 lanes and loads that leave
// lanes out as vmaskmovps and a blend.
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
	poolVecBytes
)

func (f poolVecForm) String() string {
	switch f {
	case poolVecFlat:
		return "flat"
	case poolVecDirect:
		return "direct"
	case poolVecBytes:
		return "bytes"
	}
	return "none"
}

// poolVecFlatMaxLoads bounds the flat form's loads (output vectors times
// taps): each is one instruction of straight-line code (28x28 by 3x3:
// 441 on AVX-512, 882 on AVX2). It bounds the direct form's loads per
// window row too (column vectors times tap columns times the stride).
const poolVecFlatMaxLoads = 1024

// poolVecDirectMaxCols is the widest output the direct form takes.
const poolVecDirectMaxCols = 32

// poolVecFor chooses the vector form of geometry r on processor p and its
// vector width (lanes): for float32 planes none without AVX2; for 8-bit
// ones the bytes form with AVX-512BW where it fits, else none.
func poolVecFor(p *targets.Processor, r *maxPoolRows) (poolVecForm, int64) {
	if r.dt == ir.Uint8 || r.dt == ir.Int8 {
		if p.Arch == targets.X86_64 && p.Has("avx512bw") && r.bytesFits() {
			return poolVecBytes, 64
		}
		return poolVecNone, 0
	}
	if r.dt != ir.Float32 {
		return poolVecNone, 0
	}
	var lanes int64
	switch {
	case isaTable(p).name == "avx512":
		lanes = 16
	case p.Arch == targets.X86_64 && p.Has("avx2"):
		lanes = 8
	default:
		return poolVecNone, 0
	}
	return r.vecForm(lanes), lanes
}

// vecForm is the vector form for r's geometry with vectors of lanes
// floats. AVX2 takes only the flat form: its direct form loads each
// partial vector with vmaskmovps and a blend, and took longer than the
// rows form for every 3x3 stride-2 pool measured (C harness, Emerald
// Rapids core, code for Haswell): squeezenet1_1's 27 -> 13 0.061 against
// 0.038 ms, 55 -> 27 0.116 against 0.079, googlenet's 56 -> 28 0.177
// against 0.112, 28 -> 14 0.124 against 0.089 (its 2x2 pool from 14x14
// was faster, 0.028 against 0.062; its flat pools 0.058 against 0.092 on
// 28x28 and 0.045 against 0.112 on 14x14).
func (r *maxPoolRows) vecForm(lanes int64) poolVecForm {
	if r.flatFits(lanes) {
		return poolVecFlat
	}
	// At most 2 column vectors x 2 loads x KW (< 2^31): no overflow.
	if lanes == 16 && (r.sw == 1 || r.sw == 2) && r.ow <= poolVecDirectMaxCols && ceilDiv(r.ow, lanes)*r.kw*r.sw <= poolVecFlatMaxLoads {
		return poolVecDirect
	}
	return poolVecNone
}

// flatFits reports whether the flat form computes r: stride 1, output rows
// as wide as the input's, within poolVecFlatMaxLoads (each factor
// bounded first: a window's height alone may be near 2^31).
func (r *maxPoolRows) flatFits(lanes int64) bool {
	if r.sh != 1 || r.sw != 1 || r.ow != r.w || r.kh > poolVecFlatMaxLoads || r.kw > poolVecFlatMaxLoads {
		return false
	}
	return ceilDiv(r.oh*r.ow, lanes)*r.kh*r.kw <= poolVecFlatMaxLoads // at most 2^28 * 2^20
}

// bytesFits reports whether the bytes form computes r: column stride 1 or
// 2, an output row's columns (every stride-th lane from the first) within
// poolVecBytesMaxVecs vectors of 64 bytes, and at most
// poolVecBytesMaxTaps tap columns (one masked load each per vector and
// window row, straight-line code).
func (r *maxPoolRows) bytesFits() bool {
	if r.sw != 1 && r.sw != 2 || r.ow > 64*poolVecBytesMaxVecs || r.kw > poolVecBytesMaxTaps {
		return false
	}
	return r.bytesVecs() <= poolVecBytesMaxVecs
}

// bytesVecs is the bytes form's vectors per output row.
func (r *maxPoolRows) bytesVecs() int64 { return ceilDiv((r.ow-1)*r.sw+1, 64) }

// poolVecBytesMaxVecs and poolVecBytesMaxTaps bound the bytes form's
// vectors per output row and tap columns.
const (
	poolVecBytesMaxVecs = 4
	poolVecBytesMaxTaps = 64
)

// bytesMask is the lanes of the bytes form's load of vector v for tap
// column kx: lane j holds output column (64v + j) / SW (64v + j a
// multiple of SW) and reads input column 64v + j + kx*DW - PW, inside the
// row.
func (r *maxPoolRows) bytesMask(v, kx int64) uint64 {
	var m uint64
	for j := int64(0); j < 64; j++ {
		q := 64*v + j
		ix := q + kx*r.dw - r.pw
		if q%r.sw == 0 && q/r.sw < r.ow && ix >= 0 && ix < r.w {
			m |= 1 << j
		}
	}
	return m
}

// bytesVecSource writes the bytes form (AVX-512BW, 8-bit planes): for
// each output row and each vector of 64 lanes along it, the max over the
// window's rows inside the plane (k0 <= k < k1, as the rows form finds
// them) of one masked load per tap column, the lanes outside the row the
// lowest value; with stride 2 the even lanes taken by narrowing the
// 16-bit lanes (vpmovwb); a masked store per vector. An output row whose
// window holds no row of the plane gets the lowest value, as in the rows
// form. Integer max is exact: no check. squeezenet1_1's 8-bit pools were
// the rows form's scalar column passes (27 -> 13, 256 channels: 0.044 ms,
// 0.017 in vectors; ONNX Runtime 0.014).
func (r *maxPoolRows) bytesVecSource(p func(string, ...any), sym, rows string) {
	typ, low := r.cType()
	mx := "_mm512_max_epu8"
	if r.dt == ir.Int8 {
		mx = "_mm512_max_epi8"
	}
	nv := r.bytesVecs()
	p("static void %s(const %s* restrict x, %s* restrict y) {\n", sym, typ, typ)
	p("#if defined(__AVX512BW__)\n")
	p("  (void)%s; /* the rows form: where AVX-512BW is not compiled in */\n", rows)
	p("  const __m512i lo = _mm512_set1_epi8((char)%s);\n", low)
	p("  for (int32_t oh = 0; oh < %d; ++oh) {\n", r.oh)
	r.writeWindowRows(p)
	for v := int64(0); v < nv; v++ {
		p("    __m512i a%d = lo;\n", v)
	}
	p("    for (int32_t k = k0; k < k1; ++k) {\n")
	p("      const uintptr_t row = (uintptr_t)(const void*)(x + (ptrdiff_t)(r0 + k * %d) * %d);\n", r.dh, r.w)
	for v := int64(0); v < nv; v++ {
		for kx := int64(0); kx < r.kw; kx++ {
			if m := r.bytesMask(v, kx); m != 0 {
				p("      a%d = %s(a%d, _mm512_mask_loadu_epi8(lo, (__mmask64)0x%xULL, (const void*)(row + (intptr_t)(%d))));\n", v, mx, v, m, 64*v+kx*r.dw-r.pw)
			}
		}
	}
	p("    }\n")
	per := 64 / r.sw // output columns per vector
	for v := int64(0); v < nv; v++ {
		out := fmt.Sprintf("a%d", v)
		if r.sw == 2 {
			out = fmt.Sprintf("_mm512_castsi256_si512(_mm512_cvtepi16_epi8(a%d))", v)
		}
		n := min(r.ow-v*per, per)
		om := ^uint64(0)
		if n < 64 {
			om = uint64(1)<<n - 1
		}
		p("    _mm512_mask_storeu_epi8((void*)(y + (ptrdiff_t)oh * %d + %d), (__mmask64)0x%xULL, %s);\n", r.ow, v*per, om, out)
	}
	p("  }\n")
	p("#else\n  %s(x, y);\n#endif\n}\n", rows)
}

// poolVec writes the vector forms' C for vectors of lanes floats: 16
// (AVX-512) or 8 (AVX2).
type poolVec struct {
	lanes int64
	p     func(string, ...any)
}

func (v poolVec) avx512() bool { return v.lanes == 16 }

// full is the mask of all lanes.
func (v poolVec) full() uint32 { return firstLanes(v.lanes) }

// maskVec is an AVX2 lane mask as a vector: -1 in the lanes of m.
func maskVec(m uint32) string {
	var b strings.Builder
	b.WriteString("_mm256_setr_epi32(")
	for l := 0; l < 8; l++ {
		if l > 0 {
			b.WriteString(", ")
		}
		if m&(1<<l) != 0 {
			b.WriteString("-1")
		} else {
			b.WriteString("0")
		}
	}
	b.WriteString(")")
	return b.String()
}

// load is the vector at integer address addr, the lanes outside m the
// lowest value (lo); the lanes outside m are not read.
func (v poolVec) load(m uint32, addr string) string {
	if v.avx512() {
		return fmt.Sprintf("_mm512_mask_loadu_ps(lo, (__mmask16)0x%x, (const void*)(%s))", m, addr)
	}
	if m == v.full() {
		return fmt.Sprintf("_mm256_loadu_ps((const float*)(%s))", addr)
	}
	return fmt.Sprintf("_mm256_blend_ps(lo, _mm256_maskload_ps((const float*)(%s), %s), 0x%x)", addr, maskVec(m), m)
}

// maskzLoad is the vector of lanes floats (16: AVX-512, 8: AVX2) at
// address addr with the lanes outside m zero and unread: a masked load
// (AVX2: vmaskmovps), a plain one for every lane, zero for none (AVX2).
func maskzLoad(lanes int64, m uint32, addr string) string {
	if lanes == 16 {
		return fmt.Sprintf("_mm512_maskz_loadu_ps((__mmask16)0x%x, (const void*)(%s))", m, addr)
	}
	switch m &= firstLanes(8); m {
	case 0:
		return "_mm256_setzero_ps()"
	case firstLanes(8):
		return fmt.Sprintf("_mm256_loadu_ps((const float*)(%s))", addr)
	}
	return fmt.Sprintf("_mm256_maskload_ps((const float*)(%s), %s)", addr, maskVec(m))
}

// maskStore is the statement storing the lanes m of vector a (of lanes
// floats, as maskzLoad's) at ptr.
func maskStore(lanes int64, ptr string, m uint32, a string) string {
	if lanes == 16 {
		return fmt.Sprintf("_mm512_mask_storeu_ps(%s, (__mmask16)0x%x, %s);", ptr, m, a)
	}
	if m&firstLanes(8) == firstLanes(8) {
		return fmt.Sprintf("_mm256_storeu_ps(%s, %s);", ptr, a)
	}
	return fmt.Sprintf("_mm256_maskstore_ps(%s, %s, %s);", ptr, maskVec(m), a)
}

// loadFirst is the vector at ptr with its first n lanes read and the
// others zero (n > 0).
func (v poolVec) loadFirst(n int64, ptr string) string {
	return maskzLoad(v.lanes, firstLanes(min(n, v.lanes)), ptr)
}

// pre is the prefix of the intrinsics on the vector type.
func (v poolVec) pre() string {
	if v.avx512() {
		return "_mm512"
	}
	return "_mm256"
}

// max is the plain max of two vectors.
func (v poolVec) max(a, b string) string { return fmt.Sprintf("%s_max_ps(%s, %s)", v.pre(), a, b) }

// typ is the vector type.
func (v poolVec) typ() string {
	if v.avx512() {
		return "__m512"
	}
	return "__m256"
}

// storeCheck writes the store of output vector a under mask m at ptr and
// the -0 check of its lanes (the lanes outside m hold the lowest value or
// values of the plane's other outputs, never a wrong -0).
func (v poolVec) storeCheck(indent, ptr string, m uint32) {
	p := v.p
	p("%s%s\n", indent, maskStore(v.lanes, ptr, m, "a"))
	if v.avx512() {
		p("%sbad |= _mm512_mask_cmpeq_epi32_mask((__mmask16)0x%x, _mm512_castps_si512(a), nz);\n", indent, m)
		return
	}
	p("%sbadv = _mm256_or_si256(badv, _mm256_cmpeq_epi32(_mm256_castps_si256(a), nz));\n", indent)
}

// vecSource writes the vector form's kernel sym, which calls the rows
// form (rows) for the exact max and where the vector code is not
// compiled in.
func (r *maxPoolRows) vecSource(p func(string, ...any), sym, rows string) {
	if r.vec == poolVecBytes {
		r.bytesVecSource(p, sym, rows)
		return
	}
	v := poolVec{lanes: r.vlanes, p: p}
	p("static void %s(const float* restrict x, float* restrict y) {\n", sym)
	if v.avx512() {
		p("#if defined(__AVX512F__)\n")
		p("  const __m512 lo = _mm512_set1_ps(-INFINITY);\n")
		p("  const __m512i nz = _mm512_set1_epi32((int)0x80000000);\n")
		p("  __mmask16 bad = 0;\n")
	} else {
		p("#if defined(__AVX2__)\n")
		p("  const __m256 lo = _mm256_set1_ps(-INFINITY);\n")
		p("  const __m256i nz = _mm256_set1_epi32((int)0x80000000);\n")
		p("  __m256i badv = _mm256_setzero_si256();\n")
	}
	if r.vec == poolVecFlat {
		r.flatVecSource(v)
	} else {
		r.directVecSource(v)
	}
	// The NaN check over the whole plane (a value no window reads can
	// only raise a false alarm).
	n, l, pre := r.h*r.w, v.lanes, v.pre()
	p("  %s s0 = %s_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;\n", v.typ(), pre)
	p("  for (int64_t i = 0; i + %d <= %d; i += %d) {\n", 4*l, n, 4*l)
	for a := int64(0); a < 4; a++ {
		p("    s%d = %s_add_ps(s%d, %s_loadu_ps(x + i + %d));\n", a, pre, a, pre, l*a)
	}
	p("  }\n")
	for i := n / (4 * l) * (4 * l); i < n; i += l {
		a := (i / l) % 4
		p("  s%d = %s_add_ps(s%d, %s);\n", a, pre, a, v.loadFirst(n-i, fmt.Sprintf("x + %d", i)))
	}
	p("  const %s s = %s_add_ps(%s_add_ps(s0, s1), %s_add_ps(s2, s3));\n", v.typ(), pre, pre, pre)
	if v.avx512() {
		p("  bad |= _mm512_cmp_ps_mask(s, s, _CMP_UNORD_Q);\n")
		p("  if (bad) %s(x, y);\n", rows)
	} else {
		p("  if (!_mm256_testz_si256(badv, badv) || _mm256_movemask_ps(_mm256_cmp_ps(s, s, _CMP_UNORD_Q)) != 0) %s(x, y);\n", rows)
	}
	p("#else\n  %s(x, y);\n#endif\n}\n", rows)
}

// flatVecSource writes the flat form: the plane's OH x OW outputs as
// consecutive vectors, each tap one masked load at a constant offset
// from the plane (through an integer address: a tap above the plane is
// no pointer before the array).
func (r *maxPoolRows) flatVecSource(v poolVec) {
	p, l := v.p, v.lanes
	n := r.oh * r.ow
	p("  const uintptr_t base = (uintptr_t)(const void*)x;\n")
	for i := int64(0); i < ceilDiv(n, l); i++ {
		p("  {\n")
		first := true
		for ky := int64(0); ky < r.kh; ky++ {
			for kx := int64(0); kx < r.kw; kx++ {
				m := r.flatMask(l, i, ky, kx)
				if m == 0 {
					continue
				}
				off := l*i + (ky*r.dh-r.ph)*r.w + kx*r.dw - r.pw
				ld := v.load(m, fmt.Sprintf("base + (intptr_t)(%d)", off*4))
				if first {
					p("    %s a = %s;\n", v.typ(), ld)
					first = false
				} else {
					p("    a = %s;\n", v.max(ld, "a"))
				}
			}
		}
		if first {
			p("    const %s a = lo;\n", v.typ()) // every tap is padding
		}
		v.storeCheck("    ", fmt.Sprintf("y + %d", l*i), firstLanes(min(n-l*i, l)))
		p("  }\n")
	}
}

// flatMask is the lanes of the flat form's vector i (of lanes floats)
// whose tap (ky, kx) reads inside the plane.
func (r *maxPoolRows) flatMask(lanes, i, ky, kx int64) uint32 {
	return flatLanes(lanes, i, r.oh, r.ow, r.h, r.w, ky*r.dh-r.ph, kx*r.dw-r.pw)
}

// directVecSource writes the direct form (AVX-512): for each output row, the
// window's rows inside the plane (k0 <= k < k1, as the rows form finds
// them); for each column vector and tap column the max over those rows
// of a masked load (two for stride 2: the vectors whose even lanes are
// the tap's inputs), then the max over the tap columns.
func (r *maxPoolRows) directVecSource(v poolVec) {
	p, l := v.p, v.lanes
	if r.sw == 2 {
		p("  const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);\n")
	}
	p("  for (int32_t oh = 0; oh < %d; ++oh) {\n", r.oh)
	r.writeWindowRows(p)
	p("    float* restrict o = y + (ptrdiff_t)oh * %d;\n", r.ow)
	for c0 := int64(0); c0 < r.ow; c0 += l {
		p("    {\n")
		for kx := int64(0); kx < r.kw; kx++ {
			for h := int64(0); h < r.sw; h++ {
				p("      %s m%d_%d = lo;\n", v.typ(), kx, h)
			}
		}
		p("      for (int32_t k = k0; k < k1; ++k) {\n")
		p("        const uintptr_t row = (uintptr_t)(const void*)(x + (ptrdiff_t)(r0 + k * %d) * %d);\n", r.dh, r.w)
		for kx := int64(0); kx < r.kw; kx++ {
			for h := int64(0); h < r.sw; h++ {
				off := c0*r.sw + kx*r.dw - r.pw + l*h
				m := fmt.Sprintf("m%d_%d", kx, h)
				ld := v.load(r.directMask(l, c0, kx, h), fmt.Sprintf("row + (intptr_t)(%d)", off*4))
				p("        %s = %s;\n", m, v.max(ld, m))
			}
		}
		p("      }\n")
		for kx := int64(0); kx < r.kw; kx++ {
			e := fmt.Sprintf("m%d_0", kx)
			if r.sw == 2 {
				e = fmt.Sprintf("_mm512_permutex2var_ps(m%d_0, ev, m%d_1)", kx, kx)
			}
			if kx == 0 {
				p("      %s a = %s;\n", v.typ(), e)
			} else {
				p("      a = %s;\n", v.max(e, "a"))
			}
		}
		v.storeCheck("      ", fmt.Sprintf("o + %d", c0), firstLanes(min(r.ow-c0, l)))
		p("    }\n")
	}
	p("  }\n")
}

// directMask is the lanes of the direct form's load h (of SW) for tap
// column kx and the output columns from c0 that read inside the row:
// with stride 2 the input columns from 2*c0 + kx*DW - PW + lanes*h,
// whose even lanes are the outputs'.
func (r *maxPoolRows) directMask(lanes, c0, kx, h int64) uint32 {
	var m uint32
	for j := int64(0); j < lanes; j++ {
		q := lanes*h + j
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
