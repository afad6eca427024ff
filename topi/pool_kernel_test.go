package topi

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
)

// TestMaxPoolKernelMatchesEval compiles the max pool kernel (squeezenet's
// 3x3 stride-2 taps over a phase-split tile) and requires its C to give
// Eval's bits on tiles of plain values (the fast path) and on tiles that
// hold -0 beside +0, NaN, +Inf beside NaN, and -Inf (the values whose
// rules the fast path would get wrong, and one it gets right).
func TestMaxPoolKernelMatchesEval(t *testing.T) {
	cc := testenv.CC(t)
	const wq, rows = 8, 3 // one phase plane: 3 rows of 8 columns
	plane := int64(4 * rows * wq)
	koff := []int64{0, 24, 1, 48, 72, 49, 8, 32, 9} // the 3x3 taps over 4 phase planes
	k, err := newMaxPoolKernel(koff, plane, 2*wq-1, ir.Float32)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	negZero := math.Float32frombits(0x80000000)
	tiles := map[string]func(x []float32){
		"plain": func([]float32) {},
		"signed_zero": func(x []float32) {
			x[0], x[24], x[1], x[48], x[72], x[49], x[8], x[32], x[9] = negZero, negZero, 0, -1, -2, -3, -4, negZero, -5
		},
		"nan":     func(x []float32) { x[3] = nan },
		"inf_nan": func(x []float32) { x[4], x[28] = nan, inf },
		"neg_inf": func(x []float32) { x[5], x[29] = float32(math.Inf(-1)), float32(math.Inf(-1)) },
	}
	for name, set := range tiles {
		x := make(floatMem, plane)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		set(x)
		want := make(floatMem, k.cols)
		if err := k.Eval([]tir.KernelArg{{Mem: want}, {Mem: x}}); err != nil {
			t.Fatal(err)
		}
		for _, flags := range [][]string{nil, {"-march=native"}} {
			t.Run(fmt.Sprintf("%s%v", name, flags), func(t *testing.T) {
				got := runMaxPoolKernel(t, cc, k, x, flags)
				for j := range want {
					g, w := got[j], want[j]
					if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
						t.Fatalf("v[%d] = %g (%#x), Eval %g (%#x)", j, g, math.Float32bits(g), w, math.Float32bits(w))
					}
				}
			})
		}
	}
}

// runMaxPoolKernel compiles k into a program with the code generator's
// float flags and returns what it computes on tile x.
func runMaxPoolKernel(t *testing.T, cc string, k *maxPoolKernel, x []float32, flags []string) []float32 {
	t.Helper()
	src := kernelProgram(k, fmt.Sprintf(`
int main(void) {
  static float t[%d], v[%d];
  FILE* f = fopen("in.bin", "rb");
  if (!f || fread(t, sizeof t, 1, f) != 1) return 2;
  fclose(f);
  %s(v, t);
  f = fopen("out.bin", "wb");
  if (!f || fwrite(v, sizeof v, 1, f) != 1) return 3;
  return fclose(f) != 0;
}
`, k.plane, k.cols, k.Symbol()))
	var in []byte
	for _, v := range x {
		in = binary.LittleEndian.AppendUint32(in, math.Float32bits(v))
	}
	raw := runKernelProgram(t, cc, src, in, append([]string{"-O3", "-fno-trapping-math"}, flags...))
	out := make([]float32, k.cols)
	for j := range out {
		out[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
	}
	return out
}

// kernelProgram is a C program of k's includes, its definition and main.
func kernelProgram(k tir.Kernel, main string) string {
	var src strings.Builder
	src.WriteString("#include <stdint.h>\n#include <stddef.h>\n#include <stdio.h>\n")
	for _, inc := range k.Includes() {
		if strings.HasPrefix(inc, "#") { // a guarded include, as codegen/c writes it
			src.WriteString(inc + "\n")
			continue
		}
		src.WriteString("#include " + inc + "\n")
	}
	src.WriteString(k.Source())
	src.WriteString(main)
	return src.String()
}
