package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/shared"
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
