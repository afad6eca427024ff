package topi

import (
	"fmt"
	"math"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
)

// The two transforms of the F(2x2, 3x3) Winograd convolution
// (conv2d_winograd.go) as C kernels: the input transform of one channel
// plane into its 16 transformed planes, and the output transform of a
// tile of transformed products into output rows. Both are plain C loops
// over the tiles of a row, which compilers vectorise (stride-2 loads and
// interleaved stores); their arithmetic is adds and subtracts only, in
// the order Eval repeats.

// wgInputKernel writes, for every 4x4 input tile (th, tw) of a padded
// channel plane x (rows wp apart, tile (th, tw) at row 2*th, column
// 2*tw), the 16 values of B^T d B to d[xi*xs + th*tw + tw]; for ch
// channels, channel c's plane at x + c*xcs and its values at d + c*dcs.
type wgInputKernel struct {
	kernelBase
	th, tw, wp, xs int64
	ch, xcs, dcs   int64
}

// newWgInputKernel is the input transform of one channel plane.
func newWgInputKernel(isa vecISA, th, tw, wp, xs int64) (*wgInputKernel, error) {
	return newWgInputKernelChannels(isa, th, tw, wp, xs, 1, 0, 0)
}

// newWgInputKernelChannels is the input transform of ch channel planes,
// xcs elements apart in x, into d's planes at dcs apart (the 16 values of
// each tile xs apart, as for one channel): the row-tile form's transform
// of every input channel's rows for one tile of output rows.
func newWgInputKernelChannels(isa vecISA, th, tw, wp, xs, ch, xcs, dcs int64) (*wgInputKernel, error) {
	if th <= 0 || tw <= 0 || wp < 2*tw+2 || ch <= 0 || (ch > 1 && (dcs < th*tw || xcs < (2*th+1)*wp+2*tw+2)) || xs < (ch-1)*dcs+th*tw {
		return nil, fmt.Errorf("winograd input transform: bad sizes th=%d tw=%d wp=%d xs=%d ch=%d xcs=%d dcs=%d", th, tw, wp, xs, ch, xcs, dcs)
	}
	k := &wgInputKernel{kernelBase: kernelBase{isa: isa}, th: th, tw: tw, wp: wp, xs: xs, ch: ch, xcs: xcs, dcs: dcs}
	k.vSpan = 15*xs + (ch-1)*dcs + th*tw
	k.xSpan = (ch-1)*xcs + (2*th+1)*wp + 2*tw + 2
	if k.vSpan > math.MaxInt32 || k.xSpan > math.MaxInt32 {
		return nil, fmt.Errorf("winograd input transform: operands exceed 2^31 elements")
	}
	if err := k.finish("winograd input transform", "kiln_wg_in_", k.source); err != nil {
		return nil, err
	}
	return k, nil
}

// wgInputRows are B^T d's rows as (a, op, b): row i = d[a] op d[b].
var wgInputRows = [4][3]int{{0, '-', 2}, {1, '+', 2}, {2, '-', 1}, {1, '-', 3}}

func (k *wgInputKernel) source(sym string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("/* winograd F(2x2,3x3) input transform: %d x %d tiles, rows of %d", k.th, k.tw, k.wp)
	if k.ch > 1 {
		p(", %d channels", k.ch)
	}
	p(" */\n")
	p("%sstatic void %s(float* restrict d, const float* restrict x) {\n", noInline, sym)
	if k.ch > 1 {
		p("  for (int32_t c = 0; c < %d; ++c) {\n", k.ch)
		p("  const float* xc = x + (ptrdiff_t)c * %d;\n", k.xcs)
		p("  float* dc = d + (ptrdiff_t)c * %d;\n", k.dcs)
	} else {
		p("  {\n  const float* xc = x;\n  float* dc = d;\n")
	}
	p("  for (int32_t th = 0; th < %d; ++th) {\n", k.th)
	p("    const float* x0 = xc + (ptrdiff_t)th * %d;\n", 2*k.wp)
	p("    float* dp = dc + (ptrdiff_t)th * %d;\n", k.tw)
	vec := wgInputVecs[k.isa.name]
	if vec != nil {
		p("#if %s\n", vec.guard)
		k.vectorTiles(p, vec)
		p("#else\n")
	}
	k.scalarTiles(p)
	if vec != nil {
		p("#endif\n")
	}
	p("  }\n  }\n}\n")
	return b.String()
}

// scalarTiles writes the loop over a tile row's tiles, one at a time
// (compilers vectorise it with strided loads).
func (k *wgInputKernel) scalarTiles(p func(string, ...any)) {
	p("    for (int32_t t = 0; t < %d; ++t) {\n", k.tw)
	for r := 0; r < 4; r++ {
		for c := 0; c < 4; c++ {
			p("      const float d%d%d = x0[%d + 2 * t];\n", r, c, int64(r)*k.wp+int64(c))
		}
	}
	for i, row := range wgInputRows {
		for c := 0; c < 4; c++ {
			p("      const float t%d%d = d%d%d %c d%d%d;\n", i, c, row[0], c, row[1], row[2], c)
		}
	}
	for i := 0; i < 4; i++ {
		for j, col := range wgInputRows {
			p("      dp[%d + t] = t%d%d %c t%d%d;\n", int64(i*4+j)*k.xs, i, col[0], col[1], i, col[2])
		}
	}
	p("    }\n")
}

// wgInputVec is the input transform's vector form for one instruction
// set: a group of n tiles (n lanes) reads two vectors of each input row
// at the group's first column (A) and two at the next tile's (B, two
// columns on), forms B^T d's rows on them as they are, then takes the
// even and odd lanes of A (the tiles' columns 0 and 1) and of B (2 and 3)
// and forms the columns: the scalar form's operations in its order, on
// n tiles at a time.
type wgInputVec struct {
	guard, typ string
	lanes      int64
	// load, mload (masked, format with the pointer and the first lanes
	// it reads), add, sub, store, mstore (pointer, value, lanes).
	load, mload, add, sub, store, mstore string
	decl                                 string // constants the even and odd lanes take
	even, odd                            string // format with the two vectors
}

// wgInputVecs are the vector forms by vecISA name: AVX-512 (vpermt2ps)
// and AVX2 (shuffle and a 64-bit permute; AVX alone has none).
var wgInputVecs = map[string]*wgInputVec{
	"avx512": {guard: "defined(__AVX512F__)", typ: "__m512", lanes: 16,
		load: "_mm512_loadu_ps(%s)", mload: "_mm512_maskz_loadu_ps((__mmask16)0x%[2]x, %[1]s)",
		add: "_mm512_add_ps(%s, %s)", sub: "_mm512_sub_ps(%s, %s)",
		store: "_mm512_storeu_ps(%s, %s)", mstore: "_mm512_mask_storeu_ps(%[1]s, (__mmask16)0x%[3]x, %[2]s)",
		decl: "const __m512i kev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);\n" +
			"    const __m512i kod = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);",
		even: "_mm512_permutex2var_ps(%s, kev, %s)", odd: "_mm512_permutex2var_ps(%s, kod, %s)"},
	"avx2fma": {guard: "defined(__AVX2__)", typ: "__m256", lanes: 8,
		load: "_mm256_loadu_ps(%s)", mload: "_mm256_maskload_ps(%[1]s, kiln_wg_mask(%[2]d))",
		add: "_mm256_add_ps(%s, %s)", sub: "_mm256_sub_ps(%s, %s)",
		store: "_mm256_storeu_ps(%s, %s)", mstore: "_mm256_maskstore_ps(%[1]s, kiln_wg_mask(%[3]d), %[2]s)",
		even: "_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(%s, %s, 0x88)), 0xD8))",
		odd:  "_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(%s, %s, 0xDD)), 0xD8))"},
}

// vectorTiles writes the loop over a tile row's tiles in groups of the
// vector's lanes, then the last, smaller group with masked loads and
// stores (a row of wp >= 2*TW + 2 columns: every load stays in its row).
func (k *wgInputKernel) vectorTiles(p func(string, ...any), v *wgInputVec) {
	n := v.lanes
	if v.decl != "" {
		p("    %s\n", v.decl)
	}
	if v.lanes == 8 {
		// kiln_wg_mask(n): the first n of 8 lanes (n in 0..8).
		p("#define kiln_wg_mask(n) _mm256_setr_epi32((n) > 0 ? -1 : 0, (n) > 1 ? -1 : 0, (n) > 2 ? -1 : 0, (n) > 3 ? -1 : 0, (n) > 4 ? -1 : 0, (n) > 5 ? -1 : 0, (n) > 6 ? -1 : 0, (n) > 7 ? -1 : 0)\n")
	}
	group := func(t0 string, tiles int64) {
		// The group reads 2*tiles columns from A's start and from B's
		// (its tiles' columns 0..3), as two vectors each.
		ld := func(ptr string, first int64) string {
			cols := 2*tiles - first // columns of this vector the group needs
			switch {
			case cols >= n:
				return fmt.Sprintf(v.load, ptr)
			case cols <= 0:
				return "" // unused
			}
			if n == 16 {
				return fmt.Sprintf(v.mload, ptr, uint32(1)<<cols-1)
			}
			return fmt.Sprintf(v.mload, ptr, cols)
		}
		for r := int64(0); r < 4; r++ {
			for h := int64(0); h < 2; h++ {
				for ab, off := range [2]int64{0, 2} {
					name := fmt.Sprintf("%c%d%d", "ab"[ab], r, h)
					e := ld(fmt.Sprintf("x0 + %d + 2 * %s", r*k.wp+off+h*n, t0), h*n)
					if e == "" {
						e = "_mm" + map[int64]string{16: "512", 8: "256"}[n] + "_setzero_ps()"
					}
					p("      const %s %s = %s;\n", v.typ, name, e)
				}
			}
		}
		op := func(c byte) string {
			if c == '+' {
				return v.add
			}
			return v.sub
		}
		for i, row := range wgInputRows {
			for _, ab := range []byte{'a', 'b'} {
				for h := 0; h < 2; h++ {
					p("      const %s t%c%d%d = %s;\n", v.typ, ab, i, h, fmt.Sprintf(op(byte(row[1])), fmt.Sprintf("%c%d%d", ab, row[0], h), fmt.Sprintf("%c%d%d", ab, row[2], h)))
				}
			}
			// Columns 0..3 of row i of every tile in the group.
			p("      const %s c%d0 = %s;\n", v.typ, i, fmt.Sprintf(v.even, fmt.Sprintf("ta%d0", i), fmt.Sprintf("ta%d1", i)))
			p("      const %s c%d1 = %s;\n", v.typ, i, fmt.Sprintf(v.odd, fmt.Sprintf("ta%d0", i), fmt.Sprintf("ta%d1", i)))
			p("      const %s c%d2 = %s;\n", v.typ, i, fmt.Sprintf(v.even, fmt.Sprintf("tb%d0", i), fmt.Sprintf("tb%d1", i)))
			p("      const %s c%d3 = %s;\n", v.typ, i, fmt.Sprintf(v.odd, fmt.Sprintf("tb%d0", i), fmt.Sprintf("tb%d1", i)))
			for j, col := range wgInputRows {
				val := fmt.Sprintf(op(byte(col[1])), fmt.Sprintf("c%d%d", i, col[0]), fmt.Sprintf("c%d%d", i, col[2]))
				ptr := fmt.Sprintf("dp + %d + %s", int64(i*4+j)*k.xs, t0)
				if tiles >= n {
					p("      %s;\n", fmt.Sprintf(v.store, ptr, val))
				} else if n == 16 {
					p("      %s;\n", fmt.Sprintf(v.mstore, ptr, val, uint32(1)<<tiles-1))
				} else {
					p("      %s;\n", fmt.Sprintf(v.mstore, ptr, val, tiles))
				}
			}
		}
	}
	if full := k.tw / n; full > 0 {
		p("    for (int32_t t = 0; t < %d; t += %d) {\n", full*n, n)
		group("t", n)
		p("    }\n")
	}
	if rest := k.tw % n; rest > 0 {
		p("    {\n")
		group(fmt.Sprint(k.tw-rest), rest)
		p("    }\n")
	}
	if v.lanes == 8 {
		p("#undef kiln_wg_mask\n")
	}
}

// Eval implements tir.Kernel.
func (k *wgInputKernel) Eval(args []tir.KernelArg) error {
	if len(args) != 2 {
		return fmt.Errorf("winograd input transform: want 2 pointers, got %d arguments", len(args))
	}
	dm, doff, err := args[0].Ptr(k.vSpan)
	if err != nil {
		return fmt.Errorf("output: %v", err)
	}
	xm, xoff, err := args[1].Ptr(k.xSpan)
	if err != nil {
		return fmt.Errorf("input: %v", err)
	}
	apply := func(a float64, op int, b float64) float64 {
		if op == '+' {
			return tir.RoundFloat(a+b, ir.Float32)
		}
		return tir.RoundFloat(a-b, ir.Float32)
	}
	for ch := int64(0); ch < k.ch; ch++ {
		k.evalChannel(dm, xm, doff+ch*k.dcs, xoff+ch*k.xcs, apply)
	}
	return nil
}

// evalChannel is Eval's transform of one channel plane.
func (k *wgInputKernel) evalChannel(dm, xm tir.KernelMemory, doff, xoff int64, apply func(a float64, op int, b float64) float64) {
	for th := int64(0); th < k.th; th++ {
		for t := int64(0); t < k.tw; t++ {
			var d, tt [4][4]float64
			for r := int64(0); r < 4; r++ {
				for c := int64(0); c < 4; c++ {
					d[r][c] = xm.Float(xoff + (2*th+r)*k.wp + 2*t + c)
				}
			}
			for i, row := range wgInputRows {
				for c := 0; c < 4; c++ {
					tt[i][c] = apply(d[row[0]][c], row[1], d[row[2]][c])
				}
			}
			for i := 0; i < 4; i++ {
				for j, col := range wgInputRows {
					dm.SetFloat(doff+int64(i*4+j)*k.xs+th*k.tw+t, apply(tt[i][col[0]], col[1], tt[i][col[2]]))
				}
			}
		}
	}
}

// wgOutputKernel is one of the output transform's four passes: pass r
// reads row r of the 4x4 transformed products of mr channels and
// ceil(rows/2) x tw tiles, m[c*xs + ch*cs + tile] (c < 4), forms the
// row's column sums s[j] = (A m_r^T)[j] (s0 = m0 + m1 + m2, s1 = m1 - m2
// - m3) and adds A^T[i][r] * s[j] to output (2*tr + i, 2*tc + j) of a V
// tile, v[ch*ldv + (2*tr + i)*owp + 2*tc + j], for rows below rows and
// columns below ow (the columns past the output are never read). Pass 0
// writes the tiles' first rows, pass 1 their second rows: A^T = [1 1 1
// 0; 0 1 -1 -1], so y0 = (s_0 + s_1) + s_2 and y1 = (s_1 - s_2) - s_3,
// as the direct A^T M A. Four passes hold four of the sixteen products
// at a time (in 16 KiB for 16 channels and 64 tiles).
type wgOutputKernel struct {
	kernelBase
	r                                  int
	mr, rows, r2, tw, owp, ow, ldv, xs int64
}

// wgTerms are, per pass r, the outputs' updates: for i = 0, 1 the
// operation on y_i ('=' write, '+' add, '-' subtract, 0 none).
var wgTerms = [4][2]byte{{'=', 0}, {'+', '='}, {'+', '-'}, {0, '-'}}

func newWgOutputKernel(isa vecISA, r int, mr, rows, tw, owp, ow, ldv int64) (*wgOutputKernel, error) {
	if r < 0 || r > 3 || mr <= 0 || rows <= 0 || tw <= 0 || owp < 2*tw || ow > 2*tw || ow < 2*tw-1 || ldv < (rows-1)*owp+ow {
		return nil, fmt.Errorf("winograd output transform: bad sizes r=%d mr=%d rows=%d tw=%d owp=%d ow=%d ldv=%d", r, mr, rows, tw, owp, ow, ldv)
	}
	k := &wgOutputKernel{kernelBase: kernelBase{isa: isa}, r: r, mr: mr, rows: rows, r2: ceilDiv(rows, 2), tw: tw, owp: owp, ow: ow, ldv: ldv}
	k.xs = mr * k.r2 * tw
	k.vSpan = (mr-1)*ldv + (rows-1)*owp + ow
	k.xSpan = 4 * k.xs
	if k.vSpan > math.MaxInt32 || k.xSpan > math.MaxInt32 {
		return nil, fmt.Errorf("winograd output transform: operands exceed 2^31 elements")
	}
	if err := k.finish("winograd output transform", "kiln_wg_out_", k.source); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *wgOutputKernel) source(sym string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("/* winograd F(2x2,3x3) output transform, pass %d: %d channels x %d rows x %d tiles, %d of %d columns */\n", k.r, k.mr, k.rows, k.tw, k.ow, k.owp)
	if k.tw < 8 {
		// With fewer than eight tiles in a row, gcc 12 -O3 vectorizes
		// the channel loop instead, reading and writing with strides of
		// a channel's tiles through permutes: on a 7x7 output (four
		// tiles) that was twice as slow as without (AVX-512 and AVX2)
		// and took 0.8 s of compile time for one pass. Basic blocks are
		// still vectorized.
		p("#if defined(__GNUC__) && !defined(__clang__)\n__attribute__((optimize(\"no-tree-loop-vectorize\")))\n#endif\n")
	}
	p("%sstatic void %s(float* restrict v, const float* restrict m) {\n", noInline, sym)
	p("  for (int32_t ch = 0; ch < %d; ++ch) {\n", k.mr)
	// Whole tile rows, then (an odd row count) the last one's first row.
	rowLoop := func(from, to int64, second bool) {
		if from >= to || (!second && wgTerms[k.r][0] == 0) {
			return
		}
		p("    for (int32_t tr = %d; tr < %d; ++tr) {\n", from, to)
		p("      const float* mp = m + (ptrdiff_t)ch * %d + (ptrdiff_t)tr * %d;\n", k.r2*k.tw, k.tw)
		p("      float* v0 = v + (ptrdiff_t)ch * %d + (ptrdiff_t)tr * %d;\n", k.ldv, 2*k.owp)
		k.columns(p, second)
		p("    }\n")
	}
	rowLoop(0, k.rows/2, true)
	rowLoop(k.rows/2, k.r2, false)
	p("  }\n}\n")
	return b.String()
}

// columns writes the loops over a tile row's tiles: whole tiles, then
// (odd widths) the last tile's first column; second: the tiles' second
// output row exists.
func (k *wgOutputKernel) columns(p func(string, ...any), second bool) {
	terms := wgTerms[k.r]
	loop := func(from, to string, both bool) {
		p("      for (int32_t t = %s; t < %s; ++t) {\n", from, to)
		for c := 0; c < 4; c++ {
			if both || c != 3 {
				p("        const float m%d = mp[%d + t];\n", c, int64(c)*k.xs)
			}
		}
		p("        const float s0 = m0 + m1 + m2;\n")
		if both {
			p("        const float s1 = m1 - m2 - m3;\n")
		}
		for i, op := range terms {
			if op == 0 || (i == 1 && !second) {
				continue
			}
			row := fmt.Sprintf("v0[%d + 2 * t", int64(i)*k.owp)
			for j := 0; j < 2; j++ {
				if j == 1 && !both {
					continue
				}
				dst := fmt.Sprintf("%s + %d]", row, j)
				if op == '=' {
					p("        %s = s%d;\n", dst, j)
				} else {
					p("        %s = %s %c s%d;\n", dst, dst, op, j)
				}
			}
		}
		p("      }\n")
	}
	loop("0", fmt.Sprint(k.ow/2), true)
	if k.ow%2 == 1 {
		loop(fmt.Sprint(k.ow/2), fmt.Sprint(k.tw), false)
	}
}

// Eval implements tir.Kernel.
func (k *wgOutputKernel) Eval(args []tir.KernelArg) error {
	if len(args) != 2 {
		return fmt.Errorf("winograd output transform: want 2 pointers, got %d arguments", len(args))
	}
	vm, voff, err := args[0].Ptr(k.vSpan)
	if err != nil {
		return fmt.Errorf("output: %v", err)
	}
	mm, moff, err := args[1].Ptr(k.xSpan)
	if err != nil {
		return fmt.Errorf("products: %v", err)
	}
	f := func(v float64) float64 { return tir.RoundFloat(v, ir.Float32) }
	for ch := int64(0); ch < k.mr; ch++ {
		for tr := int64(0); tr < k.r2; tr++ {
			for t := int64(0); t < k.tw; t++ {
				var m [4]float64
				for c := int64(0); c < 4; c++ {
					m[c] = mm.Float(moff + c*k.xs + ch*k.r2*k.tw + tr*k.tw + t)
				}
				s := [2]float64{f(f(m[0]+m[1]) + m[2]), f(f(m[1]-m[2]) - m[3])}
				for i, op := range wgTerms[k.r] {
					if op == 0 || 2*tr+int64(i) >= k.rows {
						continue
					}
					for j := int64(0); j < 2; j++ {
						if 2*t+j >= k.ow {
							continue
						}
						at := voff + ch*k.ldv + (2*tr+int64(i))*k.owp + 2*t + j
						switch op {
						case '=':
							vm.SetFloat(at, s[j])
						case '+':
							vm.SetFloat(at, f(vm.Float(at)+s[j]))
						case '-':
							vm.SetFloat(at, f(vm.Float(at)-s[j]))
						}
					}
				}
			}
		}
	}
	return nil
}
