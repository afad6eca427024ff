package aot

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/internal/golden"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// toy is out = relu(x + c) with a second output that repeats x: a
// constant, a temporary, two packed calls and two copies.
func toy() *Program {
	c := tensor.New(ir.Float32, ir.Shape{4})
	copy(c.Float32s(), []float32{1, -2, 3, -4})
	vec := ir.Shape{4}
	return &Program{
		Module:    "toy",
		Inputs:    []Tensor{{Name: "x", DType: ir.Float32, Shape: vec}},
		Outputs:   []Tensor{{Name: "y", DType: ir.Float32, Shape: vec}, {Name: "x copy", DType: ir.Float32, Shape: vec}},
		Constants: []*tensor.Tensor{c},
		Temps:     []Tensor{{Name: "sum", DType: ir.Float32, Shape: vec}},
		Calls: []Call{
			{Func: "toy_add", Args: []Ref{{RefInput, 0}, {RefConstant, 0}, {RefTemp, 0}}},
			{Func: "toy_relu", Args: []Ref{{RefTemp, 0}, {RefOutput, 0}}},
		},
		Copies: []Copy{{From: Ref{RefInput, 0}, Output: 1}},
	}
}

// toyKernels are the packed functions the toy program calls.
const toyKernels = `#include <stdint.h>
#include "kiln/c_runtime_api.h"
int32_t toy_add(kiln_tensor* a, int32_t n) {
  if (n != 3 || a[0].shape[0] != 4 || a[1].dtype_code != KILN_FLOAT) return -1;
  for (int i = 0; i < 4; ++i) ((float*)a[2].data)[i] = ((float*)a[0].data)[i] + ((float*)a[1].data)[i];
  return 0;
}
int32_t toy_relu(kiln_tensor* a, int32_t n) {
  if (n != 2) return -1;
  for (int i = 0; i < 4; ++i) { float v = ((float*)a[0].data)[i]; ((float*)a[1].data)[i] = v > 0 ? v : 0; }
  return 0;
}
void kiln_set_last_error(const char* msg) { (void)msg; }
const char* kiln_get_last_error(void) { return ""; }
`

// TestGenerateGolden checks the generated files against testdata/ and
// builds and runs the project with cc and hand-written kernels.
func TestGenerateGolden(t *testing.T) {
	g, err := Generate(toy(), Options{ConstantsAsCArray: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"kiln_toy.h", "kiln_toy.c", "kiln_toy_constants.c", "main.c", "Makefile"} {
		golden.Check(t, "toy/"+f, string(g.Files[f]))
	}
	if g.Plan.Size != 64 || g.ConstantsBytes != 16 {
		t.Errorf("workspace %d, constants %d; want 64 and 16", g.Plan.Size, g.ConstantsBytes)
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Fatal("no C compiler:", err)
	}
	dir := t.TempDir()
	for name, data := range g.Files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kernels.c"), []byte(toyKernels), 0o644); err != nil {
		t.Fatal(err)
	}
	inc, err := filepath.Abs("../runtime/include")
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{}, CFlags...), "-Werror", "-I"+inc, "-I.", "-o", "toy", "kiln_toy.c", "kiln_toy_constants.c", "main.c", "kernels.c")
	cmd := exec.Command(cc, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	x := tensor.New(ir.Float32, ir.Shape{4})
	copy(x.Float32s(), []float32{0.5, 0.5, -5, 5})
	if err := os.WriteFile(filepath.Join(dir, "x.bin"), x.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	run := exec.Command("./toy", "x.bin", "y.bin", "xc.bin")
	run.Dir = dir
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("toy: %v\n%s", err, out)
	}
	for name, want := range map[string][]float32{"y.bin": {1.5, 0, 0, 1}, "xc.bin": {0.5, 0.5, -5, 5}} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := tensor.FromBytes(ir.Float32, ir.Shape{4}, raw)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range want {
			if got.Float32s()[i] != v {
				t.Errorf("%s = %v, want %v", name, got.Float32s(), want)
				break
			}
		}
	}
}

// TestCheck rejects out-of-range references and unwritten outputs.
func TestCheck(t *testing.T) {
	p := toy()
	p.Calls[1].Args[1] = Ref{RefOutput, 5}
	if err := p.Check(); err == nil {
		t.Error("an output index out of range was accepted")
	}
	p = toy()
	p.Copies = nil
	if err := p.Check(); err == nil {
		t.Error("an output nobody writes was accepted")
	}
	p = toy()
	p.Module = "9 bad"
	if err := p.Check(); err == nil {
		t.Error("a module name that is not a C identifier was accepted")
	}
}
