package topi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
)

// TestDWRowsKernelCMatchesEval compiles the depthwise rows kernel for
// AVX-512 and for AVX2 (Haswell), where this machine runs them, and once without the target's flags (the portable
// branch), and requires every output to be bit for bit what Eval
// computes: rows of one vector and of several (two groups of vectors, a
// masked last one), padding wider than a vector's reach on 5x5 taps,
// dilation, a tile starting below the top (y0 > 0) and one whose taps
// pass the bottom, a map narrower than a vector, and stride 2.
func TestDWRowsKernelCMatchesEval(t *testing.T) {
	cc := testenv.CC(t)
	cases := []struct {
		g          convGeom
		h, w, rows int64
		y0         int64
	}{
		{convGeom{kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, oh: 14, ow: 14}, 14, 14, 14, 0},
		{convGeom{kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, oh: 9, ow: 70}, 9, 70, 4, 5},
		{convGeom{kh: 5, kw: 5, sh: 1, sw: 1, ph: 2, pw: 2, dh: 1, dw: 1, oh: 20, ow: 33}, 20, 33, 3, 17},
		{convGeom{kh: 3, kw: 3, sh: 1, sw: 1, ph: 2, pw: 2, dh: 2, dw: 2, oh: 8, ow: 21}, 8, 21, 2, 6},
		{convGeom{kh: 3, kw: 5, sh: 1, sw: 1, ph: 0, pw: 0, dh: 1, dw: 1, oh: 5, ow: 3}, 7, 7, 5, 0},
		// Stride 2 (two loads, the even lanes): a row of one vector and
		// of several, an odd input width, padding on one side only,
		// 5x5 taps, dilation, a tile below the top.
		{convGeom{kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1, dh: 1, dw: 1, oh: 7, ow: 7}, 14, 14, 7, 0},
		{convGeom{kh: 3, kw: 3, sh: 2, sw: 2, ph: 0, pw: 1, dh: 1, dw: 1, oh: 5, ow: 40}, 11, 79, 3, 2},
		{convGeom{kh: 5, kw: 5, sh: 2, sw: 2, ph: 2, pw: 2, dh: 1, dw: 1, oh: 10, ow: 17}, 20, 33, 4, 6},
		{convGeom{kh: 3, kw: 3, sh: 1, sw: 2, ph: 2, pw: 2, dh: 2, dw: 2, oh: 8, ow: 11}, 8, 21, 2, 6},
		// Flat runs (the whole plane, rows as wide as the input's, below
		// 16 columns): 7x7 with 3x3 and 5x5 taps, dilation, padding only
		// below and right, a 1x1 plane, 15 columns, several groups of
		// vectors (14x14: 13 vectors).
		{convGeom{kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, oh: 7, ow: 7}, 7, 7, 7, 0},
		{convGeom{kh: 5, kw: 5, sh: 1, sw: 1, ph: 2, pw: 2, dh: 1, dw: 1, oh: 7, ow: 7}, 7, 7, 7, 0},
		{convGeom{kh: 3, kw: 3, sh: 1, sw: 1, ph: 2, pw: 2, dh: 2, dw: 2, oh: 7, ow: 7}, 7, 7, 7, 0},
		{convGeom{kh: 3, kw: 3, sh: 1, sw: 1, ph: 0, pw: 0, dh: 1, dw: 1, oh: 5, ow: 5}, 7, 5, 5, 0},
		{convGeom{kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, oh: 1, ow: 1}, 1, 1, 1, 0},
		{convGeom{kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, oh: 3, ow: 15}, 3, 15, 3, 0},
		{convGeom{kh: 5, kw: 5, sh: 1, sw: 1, ph: 2, pw: 2, dh: 1, dw: 1, oh: 14, ow: 14}, 14, 14, 14, 0},
		// Rows of exactly one and of just over one AVX2 vector: a flat
		// run of whole vectors (4x8) and a row tile of 9 columns.
		{convGeom{kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, oh: 4, ow: 8}, 4, 8, 4, 0},
		{convGeom{kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, oh: 6, ow: 9}, 6, 9, 2, 3},
		// Stride 2 to at most 8 columns, the whole plane: two rows per
		// vector (the 14x14 -> 7x7 case above too): 5x5 taps, an odd
		// input, an even number of rows, 8 columns, one column,
		// dilation, row stride 1.
		{convGeom{kh: 5, kw: 5, sh: 2, sw: 2, ph: 2, pw: 2, dh: 1, dw: 1, oh: 7, ow: 7}, 14, 14, 7, 0},
		{convGeom{kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1, dh: 1, dw: 1, oh: 7, ow: 7}, 13, 13, 7, 0},
		{convGeom{kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1, dh: 1, dw: 1, oh: 4, ow: 4}, 8, 8, 4, 0},
		{convGeom{kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1, dh: 1, dw: 1, oh: 8, ow: 8}, 16, 16, 8, 0},
		{convGeom{kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1, dh: 1, dw: 1, oh: 1, ow: 1}, 2, 2, 1, 0},
		{convGeom{kh: 3, kw: 3, sh: 2, sw: 2, ph: 2, pw: 2, dh: 2, dw: 2, oh: 5, ow: 5}, 9, 9, 5, 0},
		{convGeom{kh: 3, kw: 3, sh: 1, sw: 2, ph: 1, pw: 1, dh: 1, dw: 1, oh: 6, ow: 5}, 6, 10, 6, 0},
	}
	forX86Builds(t, func(mcpu string, isa vecISA, flags []string, portable bool) {
		if isa.name != "avx512" && isa.name != "avx2fma" {
			return
		}
		flat, pairs := 0, 0
		for i, tc := range cases {
			k, err := newDWRowsKernel(isa, tc.g, tc.h, tc.w, tc.rows)
			if err != nil {
				t.Fatal(err)
			}
			isFlat, isPairs := dwRowsFlat(tc.g, tc.w, tc.rows), dwRowsPairs(tc.g, tc.rows) && isa.lanes == 16
			if (isFlat || isPairs) != strings.Contains(k.Source(), "base + (intptr_t)") {
				t.Fatalf("case %d: flat %v, pairs %v, but the source disagrees", i, isFlat, isPairs)
			}
			if isFlat {
				flat++
			}
			if isPairs {
				pairs++
			}
			t.Run(fmt.Sprintf("%s_portable%v_%d", mcpu, portable, i), func(t *testing.T) {
				outs := make([]int64, k.vSpan)
				for j := range outs {
					outs[j] = int64(j)
				}
				checkKernelCall(t, cc, k, [3]int64{k.vSpan, k.xSpan, k.wSpan}, []int64{tc.y0}, outs, append([]string{"-Wall", "-Wextra", "-Werror"}, flags...), int64(i)+3)
			})
		}
		if want := map[string]int{"avx512": 8, "avx2fma": 0}[isa.name]; flat != 9 || pairs != want {
			t.Errorf("%s: %d flat and %d paired cases, want 9 and %d", isa.name, flat, pairs, want)
		}
	})
}

// TestDWRowsKernelRejects checks that the kernel refuses what it does not
// compute: a column stride past 2, AVX without FMA, more rows than the
// map.
func TestDWRowsKernelRejects(t *testing.T) {
	avx512, avx2 := vecISA{name: "avx512", lanes: 16}, vecISA{name: "avx2fma", lanes: 8}
	g := convGeom{kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, oh: 4, ow: 4}
	strided := g
	strided.sh, strided.sw = 3, 3
	halved := g
	halved.sh, halved.sw, halved.oh, halved.ow = 2, 2, 2, 2
	for name, tc := range map[string]struct {
		isa  vecISA
		g    convGeom
		rows int64
	}{
		"stride 3": {avx512, strided, 2}, "avx": {vecISA{name: "avx", lanes: 8}, g, 2},
		"rows past the map": {avx512, g, 5},
	} {
		if _, err := newDWRowsKernel(tc.isa, tc.g, 4, 4, tc.rows); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, isa := range map[string]vecISA{"avx512": avx512, "avx2": avx2} {
		if _, err := newDWRowsKernel(isa, g, 4, 4, 2); err != nil {
			t.Errorf("%s, stride 1: %v", name, err)
		}
	}
	for name, isa := range map[string]vecISA{"avx512": avx512, "avx2": avx2} {
		if _, err := newDWRowsKernel(isa, halved, 4, 4, 2); err != nil {
			t.Errorf("%s, stride 2: %v", name, err)
		}
	}
}

// TestDWRowsChoice: which depthwise convolutions take the rows form
// follows the target's processor: on AVX-512 every one of column stride 1
// (a narrow plane as one flat run), and those of stride 2 except, on Zen 5
// (Processor.FastL2), outputs wider than dwRowsStride2MaxCols, which keep
// the lanes form; on AVX2 every one of column stride 1, and of stride 2
// those to at most dwRowsAVX2Stride2MaxCols columns; none with more
// than dwRowsMaxTaps taps or dwRowsMaxLoads loads per output row.
func TestDWRowsChoice(t *testing.T) {
	for _, c := range []struct {
		mcpu          string
		ch, in, out   int64
		stride        int64
		rows, flatRun bool
		k             int64 // kernel size (0: 3)
	}{
		{"sapphirerapids", 32, 112, 112, 1, true, false, 0},
		{"znver5", 32, 112, 112, 1, true, false, 0},
		{"sapphirerapids", 96, 112, 56, 2, true, false, 0},
		{"znver5", 96, 112, 56, 2, false, false, 0},
		{"znver5", 144, 56, 28, 2, true, false, 0},
		{"znver5", 960, 7, 7, 1, true, true, 0},
		{"sapphirerapids", 576, 14, 14, 1, true, true, 0},
		{"haswell", 32, 112, 112, 1, true, false, 0},
		{"haswell", 576, 14, 14, 1, true, true, 0},
		{"haswell", 960, 7, 7, 1, true, true, 5},
		{"haswell", 96, 112, 56, 2, false, false, 0},
		{"haswell", 192, 28, 14, 2, true, false, 0},
		{"haswell", 576, 14, 7, 2, true, false, 0},
		{"haswell", 576, 34, 17, 2, false, false, 0},
		{"sandybridge", 576, 14, 14, 1, false, false, 0},
		{"sapphirerapids", 960, 7, 7, 1, true, true, 7},
		{"sapphirerapids", 960, 7, 7, 1, false, false, 9},
		{"sapphirerapids", 4, 5456, 5456, 1, true, false, 0},
		{"sapphirerapids", 4, 5472, 5472, 1, false, false, 0},
		{"haswell", 4, 2728, 2728, 1, true, false, 0},
		{"haswell", 4, 2736, 2736, 1, false, false, 0},
	} {
		k := c.k
		if k == 0 {
			k = 3
		}
		tg, err := targets.Default.Parse("c -mcpu=" + c.mcpu)
		if err != nil {
			t.Fatal(err)
		}
		pad := (k - 1) / 2
		attrs, err := op.Conv2D.MakeAttrs(ir.Attrs{"padding": []int64{pad, pad, pad, pad}, "strides": []int64{c.stride, c.stride}, "groups": c.ch})
		if err != nil {
			t.Fatal(err)
		}
		x := ir.Shape{1, c.ch, c.in, c.in}
		call := &strategy.Call{Op: op.Conv2D, Attrs: attrs, Target: tg,
			ArgTypes: []ir.Type{ir.NewTensorType(ir.Float32, x), ir.NewTensorType(ir.Float32, ir.Shape{c.ch, 1, k, k})},
			OutType:  ir.NewTensorType(ir.Float32, ir.Shape{1, c.ch, c.out, c.out})}
		p, err := newConvPlan(call, x, k, k, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := dwRowsFor(p, x, ir.Float32); got != c.rows {
			t.Errorf("%s: %d channels %dx%d stride %d: rows form %v, want %v", c.mcpu, c.ch, c.in, c.in, c.stride, got, c.rows)
			continue
		}
		if !c.rows {
			continue
		}
		p.useRows()
		if got := dwRowsFlat(p.g, c.in, p.rows); got != c.flatRun {
			t.Errorf("%s: %d channels %dx%d stride %d: flat run %v (rows %d), want %v", c.mcpu, c.ch, c.in, c.in, c.stride, got, p.rows, c.flatRun)
		}
	}
}
