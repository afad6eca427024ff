package topi

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tir"
)

// bcastSpecs exercise full register tiles, groups that span rows, rows
// narrower than a tile, a short last group, channel vectors in two
// weight blocks, a 1x1 kernel, input channels in passes (equal, and a
// shorter last one), last blocks of every width below the tile's (stored
// transposed where their columns are consecutive), input columns at
// other offsets than V's (a strided input read in place, compact V), and
// one channel vector more than the instruction set's tile (with fewer
// columns).
func bcastSpecs(isa vecISA) []bcastSpec {
	b := int64(16)
	return []bcastSpec{
		{mv: isa.bmv, nc: isa.bnc, ic: 5, koff: []int64{0, 1, 2, 9, 10, 11, 18, 19, 20}, ics: 81, b: b, bs: 5 * 9 * b, ldv: 61, rows: 7, ow: 7, wq: 9},
		{mv: isa.bmv, nc: isa.bnc, ic: 3, koff: []int64{0}, ics: 50, b: b, bs: 3 * b, ldv: 50, rows: 5, ow: 10, wq: 10, wpf: 1 << 20},
		{mv: isa.bmv, nc: isa.bnc, ic: 2, koff: []int64{0, 4}, ics: 40, b: b, bs: 2 * 2 * b, ldv: 23, rows: 3, ow: 3, wq: 10},
		{mv: 32 / isa.lanes, nc: 3, ic: 2, koff: []int64{0, 1}, ics: 30, b: b, bs: 2*2*b + 5, ldv: 26, rows: 2, ow: 11, wq: 15},
		{mv: isa.bmv, nc: isa.bnc, ic: 7, koff: []int64{0, 1, 2, 9, 10, 11, 18, 19, 20}, ics: 81, b: b, bs: 7 * 9 * b, ldv: 61, rows: 7, ow: 7, wq: 9, kc: 3},
		{mv: isa.bmv, nc: isa.bnc, ic: 12, koff: []int64{0}, ics: 49, b: b, bs: 12 * b, ldv: 49, rows: 7, ow: 7, wq: 7, kc: 4},
		// Consecutive columns with a last block of 4 (in passes) and of
		// 5 columns (with 6 per group: one stored transposed by four, by
		// two and alone), and groups of consecutive columns whose last
		// block spans rows.
		{mv: isa.bmv, nc: 6, ic: 6, koff: []int64{0}, ics: 28, b: b, bs: 6 * b, ldv: 28, rows: 4, ow: 7, wq: 7, kc: 2},
		{mv: isa.bmv, nc: 6, ic: 3, koff: []int64{0}, ics: 23, b: b, bs: 3 * b, ldv: 23, rows: 1, ow: 23, wq: 23},
		{mv: isa.bmv, nc: 4, ic: 2, koff: []int64{0, 1}, ics: 40, b: b, bs: 2 * 2 * b, ldv: 38, rows: 3, ow: 11, wq: 13},
		// Input read where it lies (stride 2: input rows 2 x 12 apart,
		// columns 2 apart) into compact V rows: a 3x3 kernel, and a 1x1
		// in passes.
		{mv: isa.bmv, nc: isa.bnc, ic: 3, koff: []int64{0, 1, 2, 12, 13, 14, 24, 25, 26}, ics: 12 * 9, b: b, bs: 3 * 9 * b, ldv: 20, rows: 4, ow: 5, wq: 5, xrs: 24, xcs: 2},
		{mv: isa.bmv, nc: isa.bnc, ic: 5, koff: []int64{0}, ics: 14 * 14, b: b, bs: 5 * b, ldv: 49, rows: 7, ow: 7, wq: 7, xrs: 28, xcs: 2, kc: 2},
		// One channel vector of six columns in eight passes of 120 input
		// channels (mobilenet_v2's 960 -> 160 on 7x7 as kiln tune tried
		// it on Zen 5, where gcc 12 -O3 warned that the passes' sums
		// might be used uninitialized).
		{mv: 1, nc: 6, ic: 960, koff: []int64{0}, ics: 49, b: b, bs: 960 * b, ldv: 7, rows: 1, ow: 7, wq: 7, kc: 120},
		{mv: isa.bmv + 1, nc: isa.bcastColumns(isa.bmv + 1), ic: 4, koff: []int64{0, 1, 2, 9, 10, 11, 18, 19, 20}, ics: 81, b: int64(isa.lanes), bs: 4*9*int64(isa.lanes) + 3, ldv: 61, rows: 7, ow: 7, wq: 9},
	}
}

// TestBcastKernelCMatchesEval compiles the broadcast micro-kernel for
// every x86 instruction set this machine runs, and once without the
// target's flags (the portable branch), and requires the valid columns
// to be exactly what Eval computes.
func TestBcastKernelCMatchesEval(t *testing.T) {
	cc := testenv.CC(t)
	forX86Builds(t, func(mcpu string, isa vecISA, flags []string, portable bool) {
		for i, sp := range bcastSpecs(isa) {
			k, err := newBcastKernel(isa, sp)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(fmt.Sprintf("%s_%d_portable=%v", mcpu, i, portable), func(t *testing.T) {
				checkKernelSpans(t, cc, k, [3]int64{k.vSpan, k.xSpan, k.wSpan}, bcastOuts(k), flags, int64(i))
			})
		}
	})
}

// TestBcastKernelCompilesForEveryISA compiles every broadcast kernel of
// bcastSpecs for each x86 processor kiln has tables for, whether or not
// this machine runs it, with the optimisation and warning flags of a
// generated library (-O3 -Werror): a warning there fails a user's
// compile, and the run tests above compile the vector branch only for
// instruction sets this machine has.
func TestBcastKernelCompilesForEveryISA(t *testing.T) {
	cc := testenv.CC(t)
	for _, mcpu := range []string{"x86-64", "sandybridge", "haswell", "skylake-avx512", "znver4", "znver5"} {
		p, err := targets.ResolveCPU(mcpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		isa := isaFor(p)
		var src strings.Builder
		var ks []tir.Kernel
		for _, sp := range bcastSpecs(isa) {
			k, err := newBcastKernel(isa, sp)
			if err != nil {
				t.Fatal(err)
			}
			ks = append(ks, k)
		}
		src.WriteString(cPrelude(ks...))
		// An exported table of the kernels: gcc compiles (and warns
		// about) only the static functions something uses.
		seen := map[string]bool{}
		var syms []string
		for _, k := range ks {
			if !seen[k.Symbol()] {
				seen[k.Symbol()] = true
				syms = append(syms, k.Symbol())
				src.WriteString(k.(*bcastKernel).src)
			}
		}
		fmt.Fprintf(&src, "void (*const kernels[])(float* restrict, const float* restrict, const float* restrict) = {%s};\n", strings.Join(syms, ", "))
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "k.c"), []byte(src.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"-std=c99", "-O3", "-fPIC", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off", "-c", "k.c", "-o", "k.o"}, p.CFlags()...)
		cmd := exec.Command(cc, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", mcpu, err, out)
		}
	}
}

// TestBcastKernelNEON cross-compiles the broadcast kernel for 64-bit Arm
// and runs it under qemu-user.
func TestBcastKernelNEON(t *testing.T) {
	cc := testenv.Tool(t, "aarch64-linux-gnu-gcc")
	qemu := testenv.Tool(t, "qemu-aarch64")
	p, err := targets.ResolveCPU("cortex-a72", nil)
	if err != nil {
		t.Fatal(err)
	}
	isa := isaFor(p)
	for i, sp := range bcastSpecs(isa) {
		k, err := newBcastKernel(isa, sp)
		if err != nil {
			t.Fatal(err)
		}
		flags := append(p.CFlags(), "-static")
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			checkKernelSpans(t, cc, k, [3]int64{k.vSpan, k.xSpan, k.wSpan}, bcastOuts(k), flags, int64(i), qemu)
		})
	}
}

// bcastOuts lists the V elements the kernel writes.
func bcastOuts(k *bcastKernel) []int64 {
	var outs []int64
	for m := int64(0); m < int64(k.mv*k.isa.lanes); m++ {
		for _, j := range k.columns() {
			outs = append(outs, m*k.ldv+j)
		}
	}
	return outs
}

// TestBcastKernelRefusesBadSizes: sizes that would read or write out of
// place are errors, and the register tile fits each processor's
// registers.
func TestBcastKernelRefusesBadSizes(t *testing.T) {
	p, err := targets.ResolveCPU("haswell", nil)
	if err != nil {
		t.Fatal(err)
	}
	isa := isaFor(p)
	good := bcastSpec{mv: 2, nc: 6, ic: 2, koff: []int64{0}, ics: 16, b: 16, bs: 32, ldv: 16, rows: 2, ow: 7, wq: 8}
	if _, err := newBcastKernel(isa, good); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*bcastSpec){
		"negative tap":        func(s *bcastSpec) { s.koff = []int64{-1} },
		"rows overlap":        func(s *bcastSpec) { s.ldv = 10 },
		"row wider than wq":   func(s *bcastSpec) { s.ow = 9 },
		"block not lanes":     func(s *bcastSpec) { s.b = 12 },
		"blocks overlap":      func(s *bcastSpec) { s.mv, s.b, s.bs = 2, 8, 8 },
		"no columns per tile": func(s *bcastSpec) { s.nc = 0 },
	} {
		sp := good
		mut(&sp)
		if _, err := newBcastKernel(isa, sp); err == nil {
			t.Errorf("%s: accepted %+v", name, sp)
		}
	}
	if _, err := newBcastKernel(isaFor(&targets.Processor{Arch: targets.X86_64}), good); err == nil {
		t.Error("scalar instruction set accepted")
	}
	for _, mcpu := range []string{"skylake-avx512", "haswell", "sandybridge", "x86-64", "cortex-a72"} {
		p, err := targets.ResolveCPU(mcpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		v := isaFor(p)
		regs := v.bmv*v.bnc + v.bmv + 1
		if !v.fused {
			regs++ // the product before the add
		}
		if v.bmv == 0 || regs > p.VectorRegs {
			t.Errorf("%s: broadcast tile %dx%d needs %d of %d registers", mcpu, v.bmv, v.bnc, regs, p.VectorRegs)
		}
		k, err := newBcastKernel(v, bcastSpecs(v)[0])
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(k.Source(), "#pragma GCC unroll 2") {
			t.Errorf("%s: tap loop not limited to 2x unrolling", mcpu)
		}
	}
}

// TestBcastTile: the instruction set's tile when its channels tile the
// output channels, one more channel vector with fewer columns (within
// the registers) when only that tiles them, then the instruction set's
// tile with a smaller last tile of few channels, then fewer channel
// vectors (two with more columns), one channel vector last.
func TestBcastTile(t *testing.T) {
	for _, c := range []struct {
		mcpu                    string
		oc, block               int64
		wantMV, wantN, wantTail int
	}{
		{"haswell", 64, 16, 2, 6, 0},
		{"haswell", 24, 8, 3, 4, 0},
		{"haswell", 40, 8, 1, 6, 0},
		{"haswell", 200, 8, 1, 6, 0},
		{"haswell", 1000, 8, 2, 6, 1},
		{"haswell", 8, 8, 1, 6, 0},
		// AVX-512's tile is 3 x 9 (27 of 32 registers), then 4 x 6, then
		// 2 x 13 (fewerColumns), then one channel vector of 9.
		{"skylake-avx512", 64, 16, 4, 6, 0},
		{"skylake-avx512", 48, 16, 3, 9, 0},
		{"skylake-avx512", 96, 16, 3, 9, 0},
		{"skylake-avx512", 160, 16, 2, 13, 0},
		{"skylake-avx512", 32, 16, 2, 13, 0},
		{"skylake-avx512", 80, 16, 1, 9, 0},
		{"skylake-avx512", 1040, 16, 3, 9, 2},
		{"skylake-avx512", 16, 16, 1, 9, 0},
		{"skylake-avx512", 24, 8, 0, 0, 0},
	} {
		p, err := targets.ResolveCPU(c.mcpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		v := isaFor(p)
		mv, nc, tail := v.bcastTile(c.oc, c.block)
		if mv != c.wantMV || nc != c.wantN || tail != c.wantTail {
			t.Errorf("%s: %d channels in blocks of %d: tile %dx%d (last tile %d), want %dx%d (%d)", c.mcpu, c.oc, c.block, mv, nc, tail, c.wantMV, c.wantN, c.wantTail)
		}
		if regs := mv*nc + mv + 1; mv > 0 && regs > p.VectorRegs {
			t.Errorf("%s: tile %dx%d needs %d of %d registers", c.mcpu, mv, nc, regs, p.VectorRegs)
		}
	}
}

// TestBroadcastRuleByProcessor: which convolutions take the broadcast
// kernel, and in how many passes, follows the target's processor, not
// the compiling machine: on Zen 5 (Processor.FastL2) a 3x3 convolution
// from 64 channels (576 steps) keeps the columns kernel and one from 128
// takes the broadcast kernel in one pass; on an Intel server core both
// take it in L1-sized passes; a 1x1 from 256 channels on 13x13 keeps the
// columns kernel on both; on AVX2 it takes the broadcast kernel. Intel's
// server cores alone do not prefetch the next tile's weights.
func TestBroadcastRuleByProcessor(t *testing.T) {
	for _, c := range []struct {
		mcpu          string
		steps, outs   int64
		want, onePass bool
	}{
		{"znver5", 576, 784, false, false},
		{"znver5", 1152, 196, true, true},
		{"znver5", 160, 49, true, true},
		{"sapphirerapids", 576, 784, true, false},
		{"sapphirerapids", 1152, 196, true, false},
		{"icelake-server", 576, 784, true, false},
		{"sapphirerapids", 256, 169, false, false},
		{"znver5", 256, 169, false, false},
		{"sapphirerapids", 160, 49, true, false},
		{"haswell", 256, 169, true, false},
		{"znver4", 256, 169, true, false},
	} {
		p, err := targets.ResolveCPU(c.mcpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		v := isaFor(p)
		ic := c.steps
		if c.steps%9 == 0 && c.steps > 512 {
			ic = c.steps / 9
		}
		got, ok := v.broadcastFor(128, 128, c.steps, 16, c.outs, ic)
		if ok != c.want {
			t.Errorf("%s: %d steps, %d outputs: broadcast %v, want %v", c.mcpu, c.steps, c.outs, ok, c.want)
			continue
		}
		if ok && (got.kc == ic) != c.onePass {
			t.Errorf("%s: %d steps, %d outputs: input channels per pass %d of %d, want one pass %v", c.mcpu, c.steps, c.outs, got.kc, ic, c.onePass)
		}
	}
	// The next tile's weights are prefetched except on full-width
	// AVX-512 without a fast L2 (Intel's server cores).
	for mcpu, want := range map[string]bool{"sapphirerapids": true, "icelake-server": true, "znver5": false, "znver4": false, "haswell": false} {
		p, err := targets.ResolveCPU(mcpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := isaFor(p).bcastNoPrefetch; got != want {
			t.Errorf("%s: no next-tile prefetch %v, want %v", mcpu, got, want)
		}
	}
}

// TestBcastChunkBudget checks the input channels per pass: an L1 of 48
// KiB holds 13 of resnet18's 64-channel 3x3 passes (one channel tile,
// nothing prefetched) and 7 when the tile prefetches the next one's
// weights; an L1 of 32 KiB or an unknown one keeps 16 KiB (7); a 1x1
// kernel 8 KiB.
func TestBcastChunkBudget(t *testing.T) {
	for _, c := range []struct {
		kk, l1d    int64
		prefetches bool
		want       int64 // bytes
	}{
		{9, 48 << 10, false, 32 << 10},
		{9, 48 << 10, true, 16 << 10},
		{9, 32 << 10, false, 16 << 10},
		{9, 0, false, 16 << 10},
		{1, 48 << 10, false, 8 << 10},
	} {
		if got := bcastChunkBudget(c.kk, c.l1d, c.prefetches); got != c.want {
			t.Errorf("bcastChunkBudget(%d taps, L1 %d, prefetches %v) = %d, want %d", c.kk, c.l1d, c.prefetches, got, c.want)
		}
	}
	proc, err := targets.ResolveCPU("sapphirerapids", nil)
	if err != nil {
		t.Fatal(err)
	}
	isa := isaFor(proc)
	koff := []int64{0, 1, 2, 58, 59, 60, 116, 117, 118}
	for _, c := range []struct {
		wpf  int64
		want int64
	}{{0, 13}, {64 * 9 * 64, 7}} {
		sp := bcastSpec{mv: 4, nc: 6, ic: 64, koff: koff, ics: 58 * 58, b: 16, bs: 64 * 9 * 16, ldv: 56, rows: 1, ow: 56, wq: 56, l1d: 48 << 10, wpf: c.wpf}
		k, err := newBcastKernel(isa, sp)
		if err != nil {
			t.Fatal(err)
		}
		if k.kc != c.want {
			t.Errorf("prefetch distance %d: %d input channels per pass, want %d", c.wpf, k.kc, c.want)
		}
	}
}
