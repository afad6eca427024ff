package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/backend/dnnl"
	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/internal/opsuite"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// TestOpSuiteMatchesReference saves every workload of the operator suite
// with the reference interpreter's output and runs them through the
// compiled engine (test-onnx): the suite measures only code that
// computes the right thing.
func TestOpSuiteMatchesReference(t *testing.T) {
	testenv.Cgo(t)
	dirs := saveWithReference(t, opsuite.Suite())
	args := append([]string{"test-onnx", "--engine", "compiled", "-t", "c"}, dirs...)
	code, stdout, stderr := kiln(args...)
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("%d passed, 0 failed", len(dirs))) {
		t.Fatalf("test-onnx on the operator suite: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestBenchOps runs one workload of the suite and checks the report.
func TestBenchOps(t *testing.T) {
	testenv.Cgo(t)
	code, stdout, stderr := kiln("bench", "--ops", "--filter", "conv1x1_256_256", "--runs", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep OpsReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if len(rep.Ops) != 1 || rep.Ops[0].Name != "conv1x1_256_256_14" || rep.Ops[0].MedianMs <= 0 || rep.Ops[0].GFLOPs <= 0 || rep.Ops[0].GBs <= 0 {
		t.Fatalf("report %+v", rep)
	}
	if rep.PeakGFLOPs <= 0 || rep.Ops[0].PeakFraction <= 0 {
		t.Errorf("no peak measured: %+v (stderr %s)", rep, stderr)
	}
	for _, bad := range [][]string{{"bench", "--ops", "model.onnx"}, {"bench", "m.onnx", "--filter", "x"}} {
		if code, _, _ := kiln(bad...); code != exitUsage {
			t.Errorf("kiln %v: exit %d, want usage error %d", bad, code, exitUsage)
		}
	}
}

// TestNetworksMatchReference runs the networks of the suite (ResNet-50,
// ShuffleNet v2, EfficientNet, RegNet, DenseNet, YOLO, ViT and GPT-2
// styles, at 64x64 and 32 tokens) through the compiled engine on the
// host target and on oneDNN with the host, against the reference
// interpreter's outputs: architectures beyond the shared models compile
// and compute right, whatever fusions and layouts they meet.
func TestNetworksMatchReference(t *testing.T) {
	testenv.Cgo(t)
	dirs := saveWithReference(t, opsuite.Networks(64, 32))
	tgts := []string{"c"}
	if dnnl.Available {
		tgts = append(tgts, "dnnl, c")
	}
	for _, tl := range tgts {
		args := append([]string{"test-onnx", "--engine", "compiled", "-t", tl}, dirs...)
		code, stdout, stderr := kiln(args...)
		if code != 0 || !strings.Contains(stdout, fmt.Sprintf("%d passed, 0 failed", len(dirs))) {
			t.Errorf("test-onnx -t %q on the networks: exit %d\n%s\n%s", tl, code, stdout, stderr)
		}
	}
}

// saveWithReference saves each workload in a directory of its own with
// the reference interpreter's output as test_data_set_0/output_0.pb (the
// layout test-onnx reads) and returns the directories.
func saveWithReference(t *testing.T, ws []*opsuite.Workload) []string {
	t.Helper()
	root := t.TempDir()
	var dirs []string
	for _, w := range ws {
		dir := filepath.Join(root, w.Name)
		if err := w.Save(dir); err != nil {
			t.Fatal(err)
		}
		m, err := onnx.Load(w.Model, onnx.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := ref.Run(m.Module, []*tensor.Tensor{w.Input})
		if err != nil {
			t.Fatalf("%s: reference: %v", w.Name, err)
		}
		if err := onnx.WriteTensorFile(filepath.Join(dir, "test_data_set_0", "output_0.pb"), res.Flatten()[0], "y"); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	return dirs
}
