package topi

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tir"
)

// sliceMem is Go memory of one element type for Eval.
type sliceMem[T float32 | int8 | uint8 | int32] []T

func (m sliceMem[T]) Len() int64                  { return int64(len(m)) }
func (m sliceMem[T]) Float(i int64) float64       { return float64(m[i]) }
func (m sliceMem[T]) SetFloat(i int64, v float64) { m[i] = T(v) }

// floatMem, int8Mem and uint8Mem are float32, int8 and uint8 memory.
type (
	floatMem = sliceMem[float32]
	int8Mem  = sliceMem[int8]
	uint8Mem = sliceMem[uint8]
)

// TestKernelsPrefetchNextWeights checks that both convolution
// micro-kernels, given the distance to the next tile's weights, prefetch
// them (in bytes, from an integer address) while reading their own, and
// that without it they do not.
func TestKernelsPrefetchNextWeights(t *testing.T) {
	isa := isaFor(&targets.Processor{Arch: targets.X86_64, Features: []string{"avx2", "fma"}})
	for _, wpf := range []int64{0, 96} {
		k, err := newConvKernel(isa, kernelSpec{mr: 4, ic: 3, koff: []int64{0}, ics: 70, ws: 8, wm: 1, ldv: 70, j: 70, wpf: wpf})
		if err != nil {
			t.Fatal(err)
		}
		b, err := newBcastKernel(isa, bcastSpec{mv: isa.bmv, nc: isa.bnc, ic: 3, koff: []int64{0}, ics: 50, b: 16, bs: 48, ldv: 50, rows: 5, ow: 10, wq: 10, wpf: wpf})
		if err != nil {
			t.Fatal(err)
		}
		for name, src := range map[string]string{"conv": k.src, "broadcast": b.src} {
			want := fmt.Sprintf("__builtin_prefetch((const void*)((uintptr_t)(const void*)wp + %d))", 96*4)
			if wpf == 0 {
				if strings.Contains(src, "__builtin_prefetch") {
					t.Errorf("%s kernel without a distance prefetches", name)
				}
			} else if !strings.Contains(src, want) {
				t.Errorf("%s kernel: no %s in\n%s", name, want, src)
			}
		}
	}
}

// TestKernelsPrefetchNextInput checks the columns kernel's hints for the
// next register tile's input (kernelSpec.xpf): one per cache line of its
// vectors, nr vectors on, in the blocks of whole register tiles only (not
// in a tail block), none without xpf, and none for a depthwise
// kernel's rows (XM > 0), which do not share their input.
func TestKernelsPrefetchNextInput(t *testing.T) {
	hint := func(off int64) string {
		return fmt.Sprintf("__builtin_prefetch((const void*)((uintptr_t)(const void*)xp + %d), 0, 2);", off*4)
	}
	for _, c := range []struct {
		name  string
		p     *targets.Processor
		hints []int64 // elements past xp
	}{
		{"avx512", &targets.Processor{Arch: targets.X86_64, Features: []string{"avx2", "avx512f", "fma"}, VectorRegs: 32}, []int64{48, 64, 80}},
		{"avx2", &targets.Processor{Arch: targets.X86_64, Features: []string{"avx2", "fma"}, VectorRegs: 16}, []int64{24, 40}},
	} {
		isa := isaFor(c.p)
		wide := int64(isa.nr * isa.lanes)
		for _, xpf := range []bool{false, true} {
			// Two whole register tiles and a tail of 5 columns.
			k, err := newConvKernel(isa, kernelSpec{mr: 4, ic: 64, koff: []int64{0}, ics: 400, ws: 8, wm: 1, ldv: 2*wide + 5, j: 2*wide + 5, xpf: xpf})
			if err != nil {
				t.Fatal(err)
			}
			for _, off := range c.hints {
				if n := strings.Count(k.src, hint(off)); xpf && n != 1 || !xpf && n != 0 {
					t.Errorf("%s, xpf %v: %d of %q in\n%s", c.name, xpf, n, hint(off), k.src)
				}
			}
			if n := strings.Count(k.src, "(const void*)xp +"); xpf && n != len(c.hints) || !xpf && n != 0 {
				t.Errorf("%s, xpf %v: %d input hints, want %d", c.name, xpf, n, len(c.hints))
			}
		}
		dw, err := newConvKernel(isa, kernelSpec{mr: 1, nr: isa.dwnr, ic: 1, koff: []int64{0, 1, 2}, xm: 130, ws: 1, wm: 3, ldv: 113, j: 113, xpf: true})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(dw.src, "(const void*)xp +") {
			t.Errorf("%s: the depthwise rows kernel prefetches its input", c.name)
		}
	}
}

// TestConvKernelCMatchesEval compiles the micro-kernel's C for every x86
// instruction set this machine runs (and once without the target's
// flags, the portable branch) and requires it to compute exactly what its
// Eval computes, on shapes whose columns exercise the register tile, the
// whole-vector tail, the masked tail and the one-column tail.
func TestConvKernelCMatchesEval(t *testing.T) {
	cc := testenv.CC(t)
	specs := []kernelSpec{
		{mr: 8, ic: 5, koff: []int64{0, 1, 2, 9, 10, 11}, ics: 60, ws: 16, wm: 1, ldv: 41, j: 41},
		{mr: 4, ic: 3, koff: []int64{0}, ics: 70, ws: 8, wm: 1, ldv: 70, j: 70, wpf: 1 << 20}, // prefetching far past the weights
		{mr: 8, ic: 4, koff: []int64{0}, ics: 100, ws: 8, wm: 1, ldv: 100, j: 100, xpf: true}, // and the next tile's input, past the last one's
		{mr: 8, ic: 2, koff: []int64{0, 3}, ics: 12, ws: 8, wm: 1, ldv: 5, j: 5},
		{mr: 1, nr: 6, ic: 1, koff: []int64{0, 1, 2, 7, 8, 9}, xm: 130, ws: 1, wm: 6, ldv: 113, j: 113},
		{mr: 2, ic: 1, koff: []int64{0, 1, 7}, xm: 50, ws: 1, wm: 3, ldv: 40, j: 37},
	}
	// The scalar kernel (a processor without vectors) as it is.
	for i, sp := range specs {
		k, err := newConvKernel(isaFor(&targets.Processor{Arch: targets.X86_64}), sp)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("scalar_%d", i), func(t *testing.T) { checkKernelC(t, cc, k, nil, int64(i)) })
	}
	forX86Builds(t, func(mcpu string, isa vecISA, flags []string, portable bool) {
		for i, sp := range specs {
			if sp.mr > isa.mr && sp.xm == 0 {
				sp.mr = isa.mr
			}
			k, err := newConvKernel(isa, sp)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s_%d_portable=%v", mcpu, i, portable)
			t.Run(name, func(t *testing.T) { checkKernelC(t, cc, k, flags, int64(i)) })
		}
	})
}

// forX86Builds calls check for each x86 processor kiln has a kernel
// variant for, with its instruction set and C flags: once with the
// target's flags when this machine runs its features, and once without
// them (flags nil: the portable branch).
func forX86Builds(t *testing.T, check func(mcpu string, isa vecISA, flags []string, portable bool)) {
	t.Helper()
	host, err := targets.ResolveCPU("native", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, mcpu := range []string{"x86-64", "sandybridge", "haswell", "skylake-avx512"} {
		p, err := targets.ResolveCPU(mcpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		runnable := host.Arch == targets.X86_64
		for _, f := range p.Features {
			runnable = runnable && host.Has(f)
		}
		for _, portable := range []bool{false, true} {
			if !runnable && !portable {
				t.Logf("%s: this machine lacks its features; checking only the portable branch", mcpu)
				continue
			}
			flags := p.CFlags()
			if portable {
				flags = nil
			}
			check(mcpu, isaFor(p), flags, portable)
		}
	}
}

func checkKernelC(t *testing.T, cc string, k *convKernel, flags []string, seed int64, runner ...string) {
	var outs []int64
	for m := int64(0); m < int64(k.mr); m++ {
		for j := int64(0); j < k.j; j++ {
			outs = append(outs, m*k.ldv+j)
		}
	}
	checkKernelSpans(t, cc, k, [3]int64{k.vSpan, k.xSpan, k.wSpan}, outs, flags, seed, runner...)
}

// checkKernelSpans compiles kernel k (arguments v, x, w of the given
// spans) as a program, runs it on random x and w and requires the
// elements outs of v to be bit for bit those of k's Eval.
func checkKernelSpans(t *testing.T, cc string, k tir.Kernel, spans [3]int64, outs []int64, flags []string, seed int64, runner ...string) {
	checkKernelCall(t, cc, k, spans, nil, outs, flags, seed, runner...)
}

// checkKernelCall is checkKernelSpans for a kernel whose call takes the
// integer arguments ints after its three pointers.
func checkKernelCall(t *testing.T, cc string, k tir.Kernel, spans [3]int64, ints []int64, outs []int64, flags []string, seed int64, runner ...string) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	x := make(floatMem, spans[1])
	w := make(floatMem, spans[2])
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	want := make(floatMem, spans[0])
	args := []tir.KernelArg{{Mem: want}, {Mem: x}, {Mem: w}}
	call := ""
	for _, v := range ints {
		args = append(args, tir.KernelArg{Int: v})
		call += fmt.Sprintf(", %d", v)
	}
	if err := k.Eval(args); err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	src.WriteString("#include <stdint.h>\n#include <stddef.h>\n#include <stdio.h>\n#include <math.h>\n")
	for _, inc := range k.Includes() {
		src.WriteString(inc + "\n")
	}
	src.WriteString(k.Source())
	fmt.Fprintf(&src, `
int main(void) {
  static float x[%d], w[%d], v[%d];
  FILE* f = fopen("in.bin", "rb");
  if (!f || fread(x, sizeof x, 1, f) != 1 || fread(w, sizeof w, 1, f) != 1) return 2;
  fclose(f);
  %s(v, x, w%s);
  f = fopen("out.bin", "wb");
  if (!f || fwrite(v, sizeof v, 1, f) != 1) return 3;
  return fclose(f) != 0;
}
`, spans[1], spans[2], spans[0], k.Symbol(), call)
	var in []byte
	for _, v := range append(append(floatMem(nil), x...), w...) {
		in = binary.LittleEndian.AppendUint32(in, math.Float32bits(v))
	}
	raw := runKernelProgram(t, cc, src.String(), in, append([]string{"-O2"}, flags...), runner...)
	if int64(len(raw)) != 4*spans[0] {
		t.Fatalf("%d output bytes, want %d", len(raw), 4*spans[0])
	}
	for _, i := range outs {
		got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		if math.Float32bits(got) != math.Float32bits(want[i]) {
			t.Fatalf("v[%d] = %g, Eval %g (%s)", i, got, want[i], k.Symbol())
		}
	}
}

// runKernelProgram compiles src, a C program that reads in.bin and
// writes out.bin in its working directory, with the code generator's
// warning and float flags and then flags, runs it (under runner, if
// given) on in and returns what it wrote.
func runKernelProgram(t *testing.T, cc, src string, in []byte, flags []string, runner ...string) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "k.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.bin"), in, 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-std=c99", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off"}, flags...)
	args = append(args, "k.c", "-o", "k", "-lm")
	cmd := exec.Command(cc, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", cc, args, err, out)
	}
	run := exec.Command("./k")
	if len(runner) > 0 {
		run = exec.Command(runner[0], append(runner[1:], "./k")...)
	}
	run.Dir = dir
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "out.bin"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestConvKernelNEON cross-compiles the micro-kernel for 64-bit Arm
// processors (NEON intrinsics) and runs it under qemu-user: the same
// bits as Eval.
func TestConvKernelNEON(t *testing.T) {
	cc := testenv.Tool(t, "aarch64-linux-gnu-gcc")
	qemu := testenv.Tool(t, "qemu-aarch64")
	specs := []kernelSpec{
		{mr: 8, ic: 5, koff: []int64{0, 1, 2, 9, 10, 11}, ics: 60, ws: 16, wm: 1, ldv: 41, j: 41},
		{mr: 8, ic: 3, koff: []int64{0}, ics: 70, ws: 8, wm: 1, ldv: 70, j: 70},
		{mr: 1, nr: 6, ic: 1, koff: []int64{0, 1, 2, 7, 8, 9}, xm: 130, ws: 1, wm: 6, ldv: 113, j: 113},
	}
	for _, mcpu := range []string{"cortex-a53", "cortex-a72", "neoverse-n1"} {
		p, err := targets.ResolveCPU(mcpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		isa := isaFor(p)
		if isa.name != "neon" {
			t.Fatalf("%s: isa %s", mcpu, isa.name)
		}
		for i, sp := range specs {
			k, err := newConvKernel(isa, sp)
			if err != nil {
				t.Fatal(err)
			}
			flags := append(p.CFlags(), "-static")
			t.Run(fmt.Sprintf("%s_%d", mcpu, i), func(t *testing.T) { checkKernelC(t, cc, k, flags, int64(i), qemu) })
		}
	}
}

// TestIsaForProcessors pins the register tile per instruction set: the
// accumulators, the column vectors and a broadcast fit in the registers.
func TestIsaForProcessors(t *testing.T) {
	for _, c := range []struct {
		mcpu, isa     string
		lanes, mr, nr int
	}{
		{"skylake-avx512", "avx512", 16, 8, 3},
		{"znver4", "avx512", 16, 8, 3},
		{"haswell", "avx2fma", 8, 4, 3},
		{"sandybridge", "avx", 8, 8, 1},
		{"x86-64", "sse2", 4, 8, 1},
		{"cortex-a72", "neon", 4, 8, 3},
	} {
		p, err := targets.ResolveCPU(c.mcpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		v := isaFor(p)
		if v.name != c.isa || v.lanes != c.lanes || v.mr != c.mr || v.nr != c.nr {
			t.Errorf("%s: %s %d lanes %dx%d, want %s %d lanes %dx%d", c.mcpu, v.name, v.lanes, v.mr, v.nr, c.isa, c.lanes, c.mr, c.nr)
		}
		if v.mr*v.nr+v.nr+1 > p.VectorRegs {
			t.Errorf("%s: a %dx%d tile needs more than %d registers", c.mcpu, v.mr, v.nr, p.VectorRegs)
		}
	}
	// Bad specs are refused.
	if _, err := newConvKernel(isaFor(&targets.Processor{}), kernelSpec{mr: 2, ic: 1, koff: []int64{-1}, ws: 1, ldv: 4, j: 4}); err == nil {
		t.Error("negative tap offset accepted")
	}
	if _, err := newConvKernel(isaFor(&targets.Processor{}), kernelSpec{mr: 2, ic: 1, koff: []int64{0}, ws: 1, ldv: 2, j: 4}); err == nil {
		t.Error("rows overlapping (ldv < j) accepted")
	}
}
