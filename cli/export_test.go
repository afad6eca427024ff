package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/shared"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/tensor"
)

// tool finds a program the AOT tests need; without it the test is skipped,
// unless KILN_TEST_STRICT=1 (scripts/test.sh installs the tools and
// sets it), where it fails.
func tool(t *testing.T, name string) string {
	t.Helper()
	return testenv.Tool(t, name) // scripts/lib.sh need_cross installs the cross tools
}

// TestExportCProject compiles lenet with the AOT executor, exports the C
// project with the weights as a C array, builds it with make and a plain
// cc, runs it on the stored input and compares with PyTorch's output (also
// under ASan and UBSan); then cross-compiles the same sources for a
// Cortex-M4 warning-free, links an image for QEMU's mps2-an386, reports
// the sizes, runs it under qemu-system-arm and compares again.
func TestExportCProject(t *testing.T) {
	model, err := shared.Path("models", "lenet")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	art := filepath.Join(dir, "lenet.kiln")
	code, stdout, stderr := kiln("compile", model, "-t", "c", "--executor", "aot", "--weights", "blob", "-o", art)
	if code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "AOT: workspace 23552 bytes") || !strings.Contains(stdout, "liveness lower bound 23552 bytes, 1.000x") {
		t.Errorf("compile output lacks the workspace report:\n%s", stdout)
	}
	proj := filepath.Join(dir, "lenet_c")
	if code, _, stderr := kiln("export", art, "--format", "c-project", "--weights", "c-array", "-o", proj); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	for _, f := range []string{"Makefile", "README.md", "main.c", "kiln_lenet.c", "kiln_lenet.h", "kiln_lenet_constants.c", "kiln_lib.c", "include/kiln/c_runtime_api.h"} {
		if _, err := os.Stat(filepath.Join(proj, f)); err != nil {
			t.Errorf("project lacks %s", f)
		}
	}
	if _, err := os.Stat(filepath.Join(proj, "kiln_lenet_constants.bin")); err == nil {
		t.Error("the binary pool is still there after --weights c-array")
	}
	for _, f := range []string{"kiln_lenet.c", "kiln_lib.c", "kiln_lenet_constants.c"} {
		b, _ := os.ReadFile(filepath.Join(proj, f))
		if strings.Contains(string(b), "malloc(") {
			t.Errorf("%s calls malloc", f)
		}
	}

	make := tool(t, "make")
	run := inDir(t, proj)
	run(make, "CC=cc")
	in, _, err := ReadTensor(filepath.Join(model, "test_data_set_0", "input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "in.bin"), in.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	run("./kiln_lenet", "in.bin", "out.bin")
	raw := checkProgramOutput(t, model, filepath.Join(proj, "out.bin"), "exported project's output")

	// The same project under AddressSanitizer and UndefinedBehaviorSanitizer.
	run(make, "clean")
	run(make, "CC=cc", "CFLAGS=-O1 -g -std=c11 -Wall -Wextra -ffp-contract=off -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer")
	run("./kiln_lenet", "in.bin", "out_asan.bin")
	raw2, err := os.ReadFile(filepath.Join(proj, "out_asan.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if string(raw2) != string(raw) {
		t.Error("the sanitized build computes different outputs")
	}

	gcc := tool(t, "arm-none-eabi-gcc")
	size := tool(t, "arm-none-eabi-size")
	flags := []string{"-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16", "-O2", "-std=c11", "-ffp-contract=off",
		"-Wall", "-Wextra", "-Werror", "-DKILN_NO_THREADS", "-Iinclude", "-I."}
	srcs := []string{"kiln_lenet.c", "kiln_lib.c", "kiln_lenet_constants.c"}
	run(gcc, append(append(flags, "-c"), srcs...)...)
	objs := run(size, "kiln_lenet.o", "kiln_lib.o", "kiln_lenet_constants.o")
	run(make, "m4")
	elf := run(size, "kiln_lenet_m4.elf")
	t.Logf("Cortex-M4 objects:\n%s\nlinked for mps2-an386 with newlib (rdimon) and main.c:\n%s", objs, elf)
	if !strings.Contains(elf, "kiln_lenet_m4.elf") {
		t.Errorf("no size for the linked image:\n%s", elf)
	}

	// Run the image on an emulated Cortex-M4 and compare with PyTorch.
	tool(t, "qemu-system-arm")
	run(make, "qemu", "ARGS=in.bin out_m4.bin")
	checkProgramOutput(t, model, filepath.Join(proj, "out_m4.bin"), "Cortex-M4 (QEMU) output")
}

// inDir returns a function that runs a program in dir and returns its
// combined output, failing the test when it fails.
func inDir(t *testing.T, dir string) func(name string, args ...string) string {
	return func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}

// TestExportErrors: a graph artifact, an existing directory and a bad
// format are refused.
func TestExportErrors(t *testing.T) {
	testenv.Cgo(t)
	dir := t.TempDir()
	art := filepath.Join(dir, "mlp.kiln")
	if code, _, stderr := kiln("compile", filepath.Join(mlpDir, "model.onnx"), "-t", "c", "-o", art); code != 0 {
		t.Fatalf("compile: %s", stderr)
	}
	if code, _, stderr := kiln("export", art, "--format", "c-project", "-o", filepath.Join(dir, "p")); code != 1 || !strings.Contains(stderr, "--executor aot") {
		t.Errorf("graph artifact: exit %d, %q", code, stderr)
	}
	if code, _, stderr := kiln("export", art, "--format", "zip"); code != 2 || !strings.Contains(stderr, "want c-project") {
		t.Errorf("bad format: exit %d, %q", code, stderr)
	}
	aotArt := filepath.Join(dir, "mlp_aot.kiln")
	if code, _, stderr := kiln("compile", filepath.Join(mlpDir, "model.onnx"), "-t", "c", "--executor", "aot", "-o", aotArt); code != 0 {
		t.Fatalf("compile aot: %s", stderr)
	}
	if code, _, stderr := kiln("export", aotArt, "--format", "c-project", "-o", dir); code != 1 || !strings.Contains(stderr, "already exists") {
		t.Errorf("existing directory: exit %d, %q", code, stderr)
	}
	if code, _, stderr := kiln("compile", filepath.Join(mlpDir, "model.onnx"), "-t", "c", "--unpacked-api", "-o", filepath.Join(dir, "x.kiln")); code != 2 || !strings.Contains(stderr, "--executor aot") {
		t.Errorf("--unpacked-api without aot: exit %d, %q", code, stderr)
	}
}

// checkProgramOutput compares the raw float output an AOT program wrote to
// outBin with the model's reference output (test_data_set_0/output_0.pb)
// and returns the raw bytes.
func checkProgramOutput(t *testing.T, model, outBin, what string) []byte {
	t.Helper()
	raw, err := os.ReadFile(outBin)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := ReadTensor(filepath.Join(model, "test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tensor.FromBytes(want.DType, want.Shape, raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.AllClose(got, want, 1e-3, 1e-4); err != nil {
		t.Errorf("%s: %v", what, err)
	}
	return raw
}
