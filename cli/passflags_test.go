package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/tensor"
)

// TestPassFlags checks the pass-configuration flags of the commands that
// compile: errors name the flag and list what is accepted, help lists the
// keys, the printed pipeline follows the level, and a compile with them
// gives the same outputs.
func TestPassFlags(t *testing.T) {
	testenv.Cgo(t)
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"compile", mlpDir, "-t", "c", "--pass-config", "tir.bogus=1"}, 2, `kiln compile: --pass-config: unknown key "tir.bogus" (known keys: graph.fuse_ops.disable,`},
		{[]string{"compile", mlpDir, "-t", "c", "--pass-config", "tir.unroll_max_extent=-1"}, 2, "out of range [0, 4096]"},
		{[]string{"compile", mlpDir, "-t", "c", "--opt-level", "4"}, 2, "--opt-level: opt level 4 out of range [0, 3]"},
		{[]string{"compile", mlpDir, "-t", "c", "--disable-pass", "fold_constants", "--print-pipeline"}, 1, "--disable-pass fold_constants: no such pass in this compilation (passes: fold_constant,"},
		{[]string{"compile", mlpDir, "-t", "c", "--disable-pass", "fuse_ops", "-o", filepath.Join(t.TempDir(), "a")}, 1, "--disable-pass fuse_ops: the pass is required"},
		{[]string{"bench", mlpDir, "--pass-config", "x"}, 2, "kiln bench: --pass-config \"x\": want KEY=VALUE"},
		{[]string{"test-onnx", "--opt-level", "-1", mlpDir}, 2, "kiln test-onnx: --opt-level: opt level -1 out of range"},
		{[]string{"run", mlpDir, "--engine", "compiled", "--pass-config", "graph.fuse_ops.max_depth=0"}, 2, "kiln run: --pass-config graph.fuse_ops.max_depth=0: out of range [1, 1048576]"},
	} {
		code, _, stderr := kiln(c.args...)
		if code != c.code || !strings.Contains(stderr, c.err) {
			t.Errorf("kiln %v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, stderr, c.code, c.err)
		}
	}
	code, stdout, stderr := kiln("compile", mlpDir, "-t", "c", "--pass-config", "help")
	if code != 0 || !strings.Contains(stdout, "tir.unroll_max_extent        int in [0, 4096], default 32") {
		t.Errorf("--pass-config help: exit %d, %q %q", code, stdout, stderr)
	}
	code, stdout, stderr = kiln("compile", mlpDir, "-t", "c", "--opt-level", "0", "--disable-pass", "Simplify,RemoveNoOp", "--print-pipeline")
	if code != 0 || !strings.Contains(stdout, "plan_devices → fuse_ops\n") || strings.Contains(stdout, "fold_constant") ||
		!strings.Contains(stdout, "FlattenBuffers\n") {
		t.Errorf("--opt-level 0 --print-pipeline: exit %d, %q %q", code, stdout, stderr)
	}
	out := filepath.Join(t.TempDir(), "mlp.kiln")
	if code, stdout, stderr := kiln("compile", mlpDir, "-t", "c", "-o", out, "--opt-level", "1", "--pass-config", "tir.disable_vectorize=true", "-v"); code != 0 ||
		!strings.Contains(stdout, "simplify_expr") || !strings.Contains(stdout, "skipped") {
		t.Fatalf("compile at opt level 1: exit %d\n%s%s", code, stdout, stderr)
	}
	checkMLPOutputs(t, out)
}

// checkMLPOutputs runs the compiled MLP artifact at dir on the stored
// input and compares its output with the stored one.
func checkMLPOutputs(t *testing.T, dir string) {
	t.Helper()
	outDir := t.TempDir()
	code, _, stderr := kiln("run", dir, "--input", filepath.Join(mlpDir, "test_data_set_0", "input_0.pb"), "--output-dir", outDir)
	if code != 0 {
		t.Fatalf("kiln run %s: exit %d: %s", dir, code, stderr)
	}
	got, err := tensor.ReadNpyFile(filepath.Join(outDir, "output.npy"))
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := onnx.ReadTensorFile(filepath.Join(mlpDir, "test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.AllClose(got, want, 1e-3, 1e-5); err != nil {
		t.Errorf("%s: output: %v", dir, err)
	}
}
