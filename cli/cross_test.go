package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/shared"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/tensor"
)

// TestCrossCompiledArmModel compiles mobilenet_v2 (packed, depthwise and
// strided convolutions) for a Cortex-A72 with the AOT executor — NEON
// micro-kernels, built by the aarch64 cross compiler — runs the program
// under qemu-user and compares its output with PyTorch's.
func TestCrossCompiledArmModel(t *testing.T) {
	if testing.Short() {
		t.Skip("emulates a 64-bit Arm core (seconds); skipped with -short")
	}
	tool(t, "aarch64-linux-gnu-gcc")
	qemu := tool(t, "qemu-aarch64")
	model, err := shared.Path("models", "mobilenet_v2")
	if err != nil {
		t.Fatal(err)
	}
	art := filepath.Join(t.TempDir(), "mnv2")
	code, _, stderr := kiln("compile", model, "-t", "c -mcpu=cortex-a72", "--executor", "aot", "-o", art)
	if code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	lib, err := os.ReadFile(filepath.Join(art, "kiln_lib.c"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lib), "vfmaq_f32(") || strings.Contains(string(lib), "_mm512") {
		t.Error("the generated C does not use the NEON micro-kernels")
	}
	in, _, err := ReadTensor(filepath.Join(model, "test_data_set_0", "input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(art, "in.bin"), in.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(qemu, "-L", "/usr/aarch64-linux-gnu", "./kiln_mobilenet_v2", "in.bin", "out.bin")
	cmd.Dir = art
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("qemu-aarch64: %v\n%s", err, out)
	}
	checkProgramOutput(t, model, filepath.Join(art, "out.bin"), "Cortex-A72 build under qemu")
}

// TestCrossCompiledArmInt8 compiles squeezenet1_1 quantized to int8 (uint8
// activations) for a Cortex-A76 (sdot) and a Cortex-A72 (NEON without dot
// products) with the AOT executor, runs both under qemu-aarch64 and
// requires the host engine's output byte for byte: the integer kernels'
// NEON forms compute kiln's arithmetic exactly.
func TestCrossCompiledArmInt8(t *testing.T) {
	if testing.Short() {
		t.Skip("emulates a 64-bit Arm core (seconds); skipped with -short")
	}
	testenv.Cgo(t)
	tool(t, "aarch64-linux-gnu-gcc")
	qemu := tool(t, "qemu-aarch64")
	model, err := shared.Path("models", "squeezenet1_1")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	q := filepath.Join(dir, "q.onnx")
	if code, _, stderr := kiln("quantize", filepath.Join(model, "model.onnx"), "-o", q, "--samples", "8", "--eval", "0"); code != 0 {
		t.Fatalf("quantize: %s", stderr)
	}
	fold := []string{"--pass-config", "import.fold_qdq=true"}
	inPB := filepath.Join(model, "test_data_set_0", "input_0.pb")
	host := filepath.Join(dir, "host.kiln")
	if code, _, stderr := kiln(append([]string{"compile", q, "-t", "c", "-o", host, "--quiet"}, fold...)...); code != 0 {
		t.Fatalf("compile -t c: %s", stderr)
	}
	if code, _, stderr := kiln("run", host, "--input", inPB, "--output-dir", filepath.Join(dir, "host_out")); code != 0 {
		t.Fatalf("run: %s", stderr)
	}
	want, err := tensor.ReadNpyFile(filepath.Join(dir, "host_out", "output.npy"))
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := ReadTensor(inPB)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ mcpu, intrinsic string }{{"cortex-a76", "vdotq_s32("}, {"cortex-a72", "vmull_s8("}} {
		t.Run(c.mcpu, func(t *testing.T) {
			art := filepath.Join(dir, c.mcpu)
			if code, _, stderr := kiln(append([]string{"compile", q, "-t", "c -mcpu=" + c.mcpu, "--executor", "aot", "-o", art}, fold...)...); code != 0 {
				t.Fatalf("compile: %s", stderr)
			}
			lib, err := os.ReadFile(filepath.Join(art, "kiln_lib.c"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(lib), c.intrinsic) {
				t.Errorf("the integer convolutions do not use %s", c.intrinsic)
			}
			if err := os.WriteFile(filepath.Join(art, "in.bin"), in.Data, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(qemu, "-L", "/usr/aarch64-linux-gnu", "./kiln_q", "in.bin", "out.bin")
			cmd.Dir = art
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("qemu-aarch64: %v\n%s", err, out)
			}
			got, err := os.ReadFile(filepath.Join(art, "out.bin"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Data) {
				t.Error("the Arm build's output differs from the host engine's")
			}
		})
	}
}
