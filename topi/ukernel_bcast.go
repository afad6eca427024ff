package topi

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/tir"
)

// This file holds the second convolution micro-kernel, the "broadcast"
// kernel: output channels in vector lanes and input values broadcast, as
// in the NCHWc kernels of oneDNN and MLAS, but reading kiln's NCHW (phase
// split) planes and the packed weight [OC/B, IC, KH, KW, B] directly.
//
// It computes MV vectors of output channels (MR = MV x lanes rows of V)
// for the valid columns of R output rows only — virtual columns
// r*WQ + c with c < OW — NC columns at a time:
//
//	v[m*LDV + r*WQ + c] = sum over ic < IC, t < len(KOFF) of
//	    w[blk(m) + (ic*len(KOFF) + t)*B + m%B] * x[ic*ICS + KOFF[t] + r*WQ + c]
//
// accumulated in the same order as the TE reduction (ic outer, tap
// inner, from 0), one fused multiply-add per step on FMA targets. Each
// step loads MV weight vectors and broadcasts NC input values for
// MV x NC multiply-adds, so the register tile needs no input vectors and
// no column is computed that the epilogue does not read (the columns-
// in-lanes kernel computes the KW-1 padding columns of every row: 2 of
// 9 on a 7x7 map). The accumulators are written to V's rows (one column
// per lane) after the whole reduction, which is cheap when IC x taps is
// large; plan.useBcast decides.

// bcastSpec sizes one instance of the broadcast kernel.
type bcastSpec struct {
	mv, nc   int // channel vectors, columns per register tile
	ic       int64
	koff     []int64
	ics      int64
	b, bs    int64 // the weight's block (channels) and block stride (elements)
	ldv      int64
	rows, ow int64
	wq       int64 // V's row stride: column (r, c) is V element r*wq + c
	kc       int64 // input channels per pass over the column groups (0: bcastChunk's choice)
	l1d      int64 // the processor's L1d per core (bytes; 0: unknown), for bcastChunkBudget
	// xrs and xcs are the input's row and column strides: column (r, c)
	// reads input element r*xrs + c*xcs. Zero: wq and 1, the virtual
	// columns of a phase-split input, where the two offsets agree.
	xrs, xcs int64
	// wpf, when positive, is the distance in elements from the tile's
	// weights to the next tile's, which the kernel prefetches as it reads
	// its own (kernelSpec.wpf).
	wpf int64
}

// bcastChunkBytes bounds the weights one pass over the column groups
// reads (MR rows x KC input channels x taps), so that they stay in L1
// while every column group of the tile reuses them, next to the input
// lines the groups share: 16 KiB for kernels with several taps, 8 KiB
// for 1x1 kernels, whose passes read an input line per channel for every
// tap's weights. Measured on AVX2 (Zen 3, 32 KiB L1), profile minima:
// 16 KiB took resnet18's convolutions from 45.0 to 43.9 ms in all (its
// 7x7 first convolution 3.10 -> 2.90 ms, in one pass instead of two),
// 24 KiB was 1 % slower again, and 16 KiB for 1x1 kernels slowed
// mobilenet_v2's 7x7 ones from 960 and 320 channels by 15-25 %.
const (
	bcastChunkBytes    = 16384
	bcastChunkBytes1x1 = 8192
)

// bcastChunkL1Reserve is the L1 a pass leaves to the input lines and V
// when the tile prefetches nothing (bcastChunkBudget).
const bcastChunkL1Reserve = 16384

// bcastChunkBudget is the bytes of weights one pass may read: for kernels
// with several taps, bcastChunkBytes, or, when the tile prefetches no
// next tile's weights into L1 (a convolution of one channel tile, and
// every one where vecISA.bcastNoPrefetch), all of an L1 of l1d bytes but
// bcastChunkL1Reserve if that is more;
// bcastChunkBytes1x1 for 1x1 kernels. On an Emerald Rapids core (48 KiB
// L1d; C harness, one core) resnet18's 64-channel 3x3 convolution on
// 56x56, one channel tile, took 1.41-1.42 ms in passes of 7 input
// channels (16 KiB) and 1.36 in passes of 13 (32 KiB); its 512-channel
// ones on 7x7, eight tiles each prefetching the next, 1.81 in passes of 7
// and 1.87 in passes of 14, whose lines and the prefetched ones together
// outgrow L1.
func bcastChunkBudget(kk, l1d int64, prefetches bool) int64 {
	switch {
	case kk == 1:
		return bcastChunkBytes1x1
	case !prefetches && l1d-bcastChunkL1Reserve > bcastChunkBytes:
		return l1d - bcastChunkL1Reserve
	}
	return bcastChunkBytes
}

// bcastChunk is the input channels per pass: all of them when their
// weights fit in budget bytes (bcastChunkBudget), else as many as fit
// (at least one), in passes of equal size where possible.
func bcastChunk(mr, ic, kk, budget int64) int64 {
	kc := max(budget/(4*mr*kk), 1)
	if kc >= ic {
		return ic
	}
	// Equal chunks where possible: ceil(ic / passes).
	passes := ceilDiv(ic, kc)
	return ceilDiv(ic, passes)
}

// bcastKernel is one instance of the broadcast kernel.
type bcastKernel struct {
	bcastSpec
	kernelBase
	kk int64
}

func newBcastKernel(isa vecISA, sp bcastSpec) (*bcastKernel, error) {
	lanes := int64(isa.lanes)
	if sp.xrs == 0 {
		sp.xrs = sp.wq
	}
	if sp.xcs == 0 {
		sp.xcs = 1
	}
	if isa.lanes < 2 || sp.mv <= 0 || sp.nc <= 0 || sp.ic <= 0 || len(sp.koff) == 0 || sp.rows <= 0 || sp.ow <= 0 || sp.wq < sp.ow ||
		sp.xrs < 0 || sp.xcs <= 0 || sp.b <= 0 || sp.b%lanes != 0 || sp.ics < 0 || sp.ldv < (sp.rows-1)*sp.wq+sp.ow {
		return nil, fmt.Errorf("broadcast conv micro-kernel: bad sizes %+v (%s)", sp, isa.name)
	}
	mr := int64(sp.mv) * lanes
	if mr > sp.b && (mr%sp.b != 0 || sp.bs < sp.ic*int64(len(sp.koff))*sp.b) {
		return nil, fmt.Errorf("broadcast conv micro-kernel: %d channels do not tile blocks of %d", mr, sp.b)
	}
	k := &bcastKernel{bcastSpec: sp, kernelBase: kernelBase{isa: isa}, kk: int64(len(sp.koff))}
	if k.kc <= 0 || k.kc > k.ic {
		k.kc = bcastChunk(mr, k.ic, k.kk, bcastChunkBudget(k.kk, sp.l1d, sp.wpf > 0))
	}
	maxOff, err := maxTapOffset("broadcast conv micro-kernel", sp.koff)
	if err != nil {
		return nil, err
	}
	k.xSpan = (sp.ic-1)*sp.ics + maxOff + (sp.rows-1)*sp.xrs + (sp.ow-1)*sp.xcs + 1
	k.wSpan = k.wOff(sp.mv-1) + (sp.ic*k.kk-1)*sp.b + lanes
	k.vSpan = (mr-1)*sp.ldv + (sp.rows-1)*sp.wq + sp.ow
	if err := k.finish("broadcast conv micro-kernel", "kiln_conv_bk_", k.source); err != nil {
		return nil, err
	}
	return k, nil
}

// wOff is where channel vector i's weights start: its block, then its
// place in the block.
func (k *bcastKernel) wOff(i int) int64 {
	m := int64(i * k.isa.lanes)
	return (m/k.b)*k.bs + m%k.b
}

// wIndex is the weight element of row m at reduction step s (ic*KK + t).
func (k *bcastKernel) wIndex(m, s int64) int64 { return (m/k.b)*k.bs + s*k.b + m%k.b }

// columns lists the V offsets of the tile's valid columns, row by row.
func (k *bcastKernel) columns() []int64 { return k.offsets(k.wq, 1) }

// xcolumns lists the input offsets of the same columns.
func (k *bcastKernel) xcolumns() []int64 { return k.offsets(k.xrs, k.xcs) }

func (k *bcastKernel) offsets(rs, cs int64) []int64 {
	cols := make([]int64, 0, k.rows*k.ow)
	for r := int64(0); r < k.rows; r++ {
		for c := int64(0); c < k.ow; c++ {
			cols = append(cols, r*rs+c*cs)
		}
	}
	return cols
}

// sameOffsets reports whether the input and V offsets of the columns are
// the same (a phase-split input): the kernel then keeps one table.
func (k *bcastKernel) sameOffsets() bool { return k.xrs == k.wq && k.xcs == 1 }

// source writes the C definition (named sym): the columns in groups of
// NC, listed in a table, in one register-tiled loop nest that reads each
// group's column offsets; the last columns, fewer than NC, in a block of
// their own with as many accumulators as columns (a 7x7 map's 49 columns
// in groups of 6 left one column in a ninth group, 9 % more
// multiply-adds than the outputs need).
func (k *bcastKernel) source(sym string) string {
	isa := k.isa
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	cols, xcols := k.columns(), k.xcolumns()
	same := k.sameOffsets()
	full := len(cols) / k.nc
	tail, xtail := cols[full*k.nc:], xcols[full*k.nc:]
	groups := full
	if len(tail) > 0 {
		groups++
	}
	p("/* broadcast conv micro-kernel: %d rows x %d columns (%d rows of %d), %d input channels x %d taps, %s */\n",
		k.mv*isa.lanes, len(cols), k.rows, k.ow, k.ic, k.kk, isa.name)
	p("%sstatic void %s(float* restrict v, const float* restrict x, const float* restrict w) {\n", noInline, sym)
	p("  static const int32_t koff[%d] = {%s};\n", k.kk, joinInts(k.koff))
	p("#if %s\n", isa.guard)
	if full > 0 {
		// gcol: the groups' input offsets; vcol: their V offsets, where
		// those differ.
		p("  static const int32_t gcol[%d] = {%s};\n", full*k.nc, joinInts(xcols[:full*k.nc]))
		if !same {
			p("  static const int32_t vcol[%d] = {%s};\n", full*k.nc, joinInts(cols[:full*k.nc]))
		}
	}
	chunked := k.kc < k.ic
	if chunked {
		// Input channels in passes of KC over all column groups, the
		// partial sums kept lanes-wise in s between passes (the same
		// additions in the same order as one pass).
		// s starts at zero and every pass reads it: reading it only from
		// the second pass on (c0 == 0 ? zero : s[i]) is the same
		// arithmetic, but gcc 12 then warns that s may be used
		// uninitialized (-Werror: kiln tune stopped on such a candidate).
		p("  %s s[%d];\n", isa.typ, groups*k.mv*k.nc)
		p("  for (int32_t i = 0; i < %d; ++i) s[i] = %s;\n", groups*k.mv*k.nc, isa.zero)
		p("  for (int32_t c0 = 0; c0 < %d; c0 += %d) {\n", k.ic, k.kc)
		p("  const int32_t c1 = c0 + %d < %d ? c0 + %d : %d;\n", k.kc, k.ic, k.kc, k.ic)
	}
	if full > 0 {
		p("  for (int32_t g = 0; g < %d; ++g) {\n", full)
		p("    const int32_t* co = gcol + g * %d;\n", k.nc)
		for n := 0; n < k.nc; n++ {
			p("    const int32_t o%d = co[%d];\n", n, n)
		}
		q := func(n int) string { return fmt.Sprintf("o%d", n) }
		if !same {
			q = func(n int) string { return fmt.Sprintf("vcol[g * %d + %d]", k.nc, n) }
		}
		k.group(p, k.nc, "g", chunked, groupsContiguous(cols[:full*k.nc], k.nc), q)
		p("  }\n")
	}
	if len(tail) > 0 {
		// do { } while (0): a pass's continue ends the block.
		p("  do {\n")
		for n := range tail {
			p("    const int32_t o%d = %d;\n", n, xtail[n])
		}
		contiguous := groupsContiguous(tail, len(tail))
		k.group(p, len(tail), fmt.Sprint(full), chunked, contiguous, func(n int) string { return fmt.Sprint(tail[n]) })
		p("  } while (0);\n")
	}
	if chunked {
		p("  }\n")
	}
	p("#else\n")
	p("  static const int32_t col[%d] = {%s};\n", len(cols), joinInts(cols))
	xcol := "col[j]"
	if !same {
		p("  static const int32_t xcol[%d] = {%s};\n", len(xcols), joinInts(xcols))
		xcol = "xcol[j]"
	}
	writePortable(p, isa, int64(k.mv*isa.lanes), int64(len(cols)), "col[j]",
		fmt.Sprintf("(m / %d) * %d + (c * %d + t) * %d + m %% %d", k.b, k.bs, k.kk, k.b, k.b),
		fmt.Sprintf("c * %d + koff[t] + %s", k.ics, xcol), k.ic, k.kk, k.ldv)
	p("#endif\n}\n")
	return b.String()
}

// group writes one column group's reduction and stores: nc columns at
// input offsets o0..o(nc-1) and V offsets q(0)..q(nc-1) (C expressions),
// group number g (an expression) for the pass's partial sums. contiguous
// says whether the columns are consecutive in V: 1 yes, 0 no, -1 known
// only at run time. (A transposed store reads only some of the offsets.)
func (k *bcastKernel) group(p func(string, ...any), nc int, g string, chunked bool, contiguous int, q func(n int) string) {
	isa := k.isa
	acc := func(i, n int) string { return fmt.Sprintf("a%d_%d", i, n) }
	slot := func(i, n int) string { return fmt.Sprintf("s[%s * %d + %d]", g, k.mv*k.nc, i*k.nc+n) }
	for i := 0; i < k.mv; i++ {
		for n := 0; n < nc; n++ {
			if chunked {
				p("    %s %s = %s;\n", isa.typ, acc(i, n), slot(i, n))
			} else {
				p("    %s %s = %s;\n", isa.typ, acc(i, n), isa.zero)
			}
		}
	}
	if chunked {
		p("    for (int32_t c = c0; c < c1; ++c) {\n")
	} else {
		p("    for (int32_t c = 0; c < %d; ++c) {\n", k.ic)
	}
	p("      const float* xc = x + (ptrdiff_t)c * %d;\n", k.ics)
	p("      const float* wc = w + (ptrdiff_t)c * %d;\n", k.kk*k.b)
	// Unrolled twice, not fully: with every tap unrolled, gcc interleaves
	// the channel loop and spills accumulators (AVX2 3x3: 54 % of peak
	// instead of 87 %).
	p("#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC unroll 2\n#endif\n")
	p("      for (int32_t t = 0; t < %d; ++t) {\n", k.kk)
	p("        const float* xp = xc + koff[t];\n")
	p("        const float* wp = wc + t * %d;\n", k.b)
	for i := 0; i < k.mv; i++ {
		p("        const %s w%d = %s;\n", isa.typ, i, fmt.Sprintf(isa.load, fmt.Sprintf("wp + %d", k.wOff(i))))
	}
	if k.wpf > 0 {
		offs := make([]int64, k.mv)
		for i := range offs {
			offs[i] = k.wOff(i) + k.wpf
		}
		writePrefetch(p, offs...)
	}
	for n := 0; n < nc; n++ {
		p("        { const %s b = %s;\n", isa.typ, fmt.Sprintf(isa.set1, fmt.Sprintf("xp[o%d]", n)))
		for i := 0; i < k.mv; i++ {
			p("          %s = %s;\n", acc(i, n), fmt.Sprintf(isa.fma, fmt.Sprintf("w%d", i), "b", acc(i, n)))
		}
		p("        }\n")
	}
	p("      }\n    }\n")
	if chunked {
		p("    if (c1 < %d) {\n", k.ic)
		for i := 0; i < k.mv; i++ {
			for n := 0; n < nc; n++ {
				p("      %s = %s;\n", slot(i, n), acc(i, n))
			}
		}
		p("      continue;\n    }\n")
	}
	// The V offsets, read only now: live across the reduction they took
	// general registers its addresses need.
	for n := 0; n < nc; n++ {
		p("    const int32_t q%d = %s;\n    (void)q%d;\n", n, q(n), n)
	}
	scatter := func() {
		p("    { float lane[%d];\n", isa.lanes)
		for i := 0; i < k.mv; i++ {
			for n := 0; n < nc; n++ {
				k.laneStore(p, acc, i, n)
			}
		}
		p("    }\n")
	}
	if !k.transposes() || nc < 2 || contiguous == 0 {
		scatter()
		return
	}
	if contiguous < 0 {
		p("    if (q%d - q0 == %d) {\n", nc-1, nc-1)
	}
	k.transposedStore(p, nc, acc)
	if contiguous < 0 {
		p("    } else {\n")
		scatter()
		p("    }\n")
	}
}

// groupsContiguous says whether the V columns of every group of nc in
// cols are consecutive: 1 all groups, 0 none, -1 some (the kernel then
// tests each group's at run time). It is known when the kernel is
// written, so a kernel whose groups are all consecutive (or none is)
// holds only the one store that runs: on AVX-512 the lane-by-lane form
// was 90 % of a 1x1 kernel's compile time (0.31 of 0.35 s).
func groupsContiguous(cols []int64, nc int) int {
	all, none := true, true
	for g := 0; g+nc <= len(cols); g += nc {
		ok := true
		for n := 1; n < nc; n++ {
			ok = ok && cols[g+n] == cols[g]+int64(n)
		}
		all, none = all && ok, none && !ok
	}
	switch {
	case all:
		return 1
	case none:
		return 0
	}
	return -1
}

// transposes reports whether the kernel stores a group of consecutive
// columns by transposing its accumulators in registers (AVX: 8 lanes of
// 256 bits, AVX-512: 16 of 512, both as 128-bit blocks of four).
// Elsewhere each accumulator goes to V one lane at a time.
func (k *bcastKernel) transposes() bool { return k.isa.typ == "__m256" || k.isa.typ == "__m512" }

// block is the C expression of 128-bit block b of the register r.
func (k *bcastKernel) block(r string, b int) string {
	switch {
	case b == 0 && k.isa.typ == "__m512":
		return fmt.Sprintf("_mm512_castps512_ps128(%s)", r)
	case b == 0:
		return fmt.Sprintf("_mm256_castps256_ps128(%s)", r)
	case k.isa.typ == "__m512":
		return fmt.Sprintf("_mm512_extractf32x4_ps(%s, %d)", r, b)
	}
	return fmt.Sprintf("_mm256_extractf128_ps(%s, %d)", r, b)
}

// transposedStore writes the accumulators of nc consecutive columns
// starting at V offset q0 to V's rows: four columns at a time as a 4 x 4
// transpose within each 128-bit block (unpack and shuffle; block b of
// result l is row 4b+l's four columns), then two as a 2 x 4 transpose
// (one row's pair per 64-bit store), then a last single column lane by
// lane. Storing lane by lane cost two operations per element (a 1x1
// convolution over 160 input channels on a 7x7 map spent 4 % of its
// time there).
func (k *bcastKernel) transposedStore(p func(string, ...any), nc int, acc func(i, n int) string) {
	typ, pre := k.isa.typ, "_mm256"
	if typ == "__m512" {
		pre = "_mm512"
	}
	blocks := k.isa.lanes / 4
	row := func(i, r int) string { return fmt.Sprintf("vp + %d", int64(i*k.isa.lanes+r)*k.ldv) }
	for i := 0; i < k.mv; i++ {
		n := 0
		for ; n+4 <= nc; n += 4 {
			a, b, c, d := acc(i, n), acc(i, n+1), acc(i, n+2), acc(i, n+3)
			p("    { float* vp = v + q%d;\n", n)
			p("      const %s t0 = %s_unpacklo_ps(%s, %s), t1 = %s_unpackhi_ps(%s, %s);\n", typ, pre, a, b, pre, a, b)
			p("      const %s t2 = %s_unpacklo_ps(%s, %s), t3 = %s_unpackhi_ps(%s, %s);\n", typ, pre, c, d, pre, c, d)
			p("      const %s r0 = %s_shuffle_ps(t0, t2, 0x44), r1 = %s_shuffle_ps(t0, t2, 0xEE);\n", typ, pre, pre)
			p("      const %s r2 = %s_shuffle_ps(t1, t3, 0x44), r3 = %s_shuffle_ps(t1, t3, 0xEE);\n", typ, pre, pre)
			for l, r := range []string{"r0", "r1", "r2", "r3"} {
				for bl := 0; bl < blocks; bl++ {
					p("      _mm_storeu_ps(%s, %s);\n", row(i, 4*bl+l), k.block(r, bl))
				}
			}
			p("    }\n")
		}
		if n+2 <= nc {
			a, b := acc(i, n), acc(i, n+1)
			p("    { float* vp = v + q%d;\n", n)
			p("      const %s t0 = %s_unpacklo_ps(%s, %s), t1 = %s_unpackhi_ps(%s, %s);\n", typ, pre, a, b, pre, a, b)
			// Block b of t0 holds rows 4b and 4b+1 (a pair each), of t1
			// rows 4b+2 and 4b+3.
			for bl := 0; bl < blocks; bl++ {
				for h, t := range []string{"t0", "t1"} {
					p("      { const __m128 h = %s;\n", k.block(t, bl))
					p("        _mm_storel_pi((__m64*)(%s), h);\n", row(i, 4*bl+2*h))
					p("        _mm_storeh_pi((__m64*)(%s), h); }\n", row(i, 4*bl+2*h+1))
				}
			}
			p("    }\n")
			n += 2
		}
		if n < nc {
			p("    { float lane[%d];\n", k.isa.lanes)
			k.laneStore(p, acc, i, n)
			p("    }\n")
		}
	}
}

// laneStore writes accumulator (i, n), column n of channel vector i, to
// V one lane per row, through the array lane in scope.
func (k *bcastKernel) laneStore(p func(string, ...any), acc func(i, n int) string, i, n int) {
	lanes := k.isa.lanes
	p("      %s;\n", fmt.Sprintf(k.isa.store, "lane", acc(i, n)))
	p("      for (int32_t l = 0; l < %d; ++l) v[(ptrdiff_t)(%d + l) * %d + q%d] = lane[l];\n", lanes, i*lanes, k.ldv, n)
}

// Eval implements tir.Kernel: the same sums in the same order, rounded
// to float32 after every operation.
func (k *bcastKernel) Eval(args []tir.KernelArg) error {
	mem, off, err := k.operands(args)
	if err != nil {
		return err
	}
	vm, xm, wm := mem[0], mem[1], mem[2]
	cols, xcols := k.columns(), k.xcolumns()
	for m := int64(0); m < int64(k.mv*k.isa.lanes); m++ {
		for i, j := range cols {
			acc := 0.0
			for c := int64(0); c < k.ic; c++ {
				for t := int64(0); t < k.kk; t++ {
					xv := xm.Float(off[1] + c*k.ics + k.koff[t] + xcols[i])
					wv := wm.Float(off[2] + k.wIndex(m, c*k.kk+t))
					acc = k.isa.madd(wv, xv, acc)
				}
			}
			vm.SetFloat(off[0]+m*k.ldv+j, acc)
		}
	}
	return nil
}

// joinInts writes integers as a C initializer list.
func joinInts[T int | int64](v []T) string {
	var b strings.Builder
	for i, x := range v {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, x)
	}
	return b.String()
}
