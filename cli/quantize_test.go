package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/internal/testenv"
	krt "github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/tensor"
)

func TestQuantizeCommand(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(mlpDir, "model.onnx")
	out := filepath.Join(dir, "q.onnx")
	code, stdout, stderr := kiln("quantize", model, "-o", out, "--samples", "4", "--eval", "8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// The mlp's three Gemms: weights and biases quantized; its input, the
	// two ReLUs' outputs and the logits Softmax reads are the activations.
	if !strings.Contains(stdout, "3 weights (int8, one scale per output channel), 3 biases (int32), 4 activations (uint8, minmax over 4 generated inputs (seed 1))") {
		t.Errorf("stdout: %s", stdout)
	}
	if !strings.Contains(stdout, "accuracy against the float model on 8 random inputs (seed 2):") || !strings.Contains(stdout, `"output": top-1 agreement `) {
		t.Errorf("stdout: %s", stdout)
	}
	m, err := onnx.LoadFile(out, onnx.Options{})
	if err != nil {
		t.Fatalf("the written model does not import: %v", err)
	}
	if len(m.Outputs) != 1 || m.Outputs[0].Name != "output" {
		t.Errorf("outputs %+v", m.Outputs)
	}

	// Calibration from the ONNX test-data layout; int8, percentile.
	code, stdout, stderr = kiln("quantize", mlpDir+"/model.onnx", "-o", out, "--calibrate", mlpDir, "--method", "percentile", "--activation-type", "int8", "--eval", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "(int8, percentile over 1 samples from "+mlpDir+")") || strings.Contains(stdout, "accuracy") {
		t.Errorf("stdout: %s", stdout)
	}
}

func TestQuantizeErrors(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.onnx")
	data, err := os.ReadFile(filepath.Join(mlpDir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(model, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "q.onnx")
	empty := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{model}, 2, "usage: kiln quantize"},
		{[]string{model, "-o", model}, 1, "is the model itself"},
		{[]string{model, "-o", out, "--method", "kl"}, 2, `--method "kl": want minmax or percentile`},
		{[]string{model, "-o", out, "--activation-type", "int4"}, 2, `--activation-type "int4"`},
		{[]string{model, "-o", out, "--samples", "0"}, 2, "--samples must be 1 or more"},
		{[]string{model, "-o", out, "--percentile", "20"}, 2, "--percentile in (50, 100]"},
		{[]string{model, "-o", out, "-t", "nosuch"}, 2, "-t:"},
		{[]string{model, "-o", out, "--calibrate", empty}, 1, "no samples"},
		{[]string{model, "-o", out, "--calibrate", filepath.Join(dir, "missing")}, 1, "--calibrate"},
		{[]string{filepath.Join(dir, "none.onnx"), "-o", out}, 1, "none.onnx"},
	} {
		code, _, stderr := kiln(append([]string{"quantize"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.err) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.err)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed quantize left %s: %v", out, err)
	}
	if got, _ := os.ReadFile(model); string(got) != string(data) {
		t.Error("the model was changed")
	}
}

// TestQuantizedFoldFlag: a QDQ model compiles into integer kernels by
// default (qnn.requantize in the program), --pass-config
// import.fold_qdq=false keeps its float emulation, and the outputs stay
// within a few quantization steps of each other.
func TestQuantizedFoldFlag(t *testing.T) {
	testenv.Cgo(t)
	dir := t.TempDir()
	q := filepath.Join(dir, "q.onnx")
	if code, _, stderr := kiln("quantize", filepath.Join(mlpDir, "model.onnx"), "-o", q, "--eval", "0"); code != 0 {
		t.Fatalf("quantize: %s", stderr)
	}
	in := filepath.Join(mlpDir, "test_data_set_0", "input_0.pb")
	outs := map[bool]*tensor.Tensor{}
	for _, fold := range []bool{false, true} {
		art := filepath.Join(dir, fmt.Sprintf("a%v", fold))
		args := []string{"compile", q, "-t", "c", "-o", art, "--quiet"}
		if !fold {
			args = append(args, "--pass-config", "import.fold_qdq=false")
		}
		if code, _, stderr := kiln(args...); code != 0 {
			t.Fatalf("compile %v: %s", fold, stderr)
		}
		g, err := os.ReadFile(filepath.Join(art, "graph.json"))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(g), "qnn_requantize"); got != fold {
			t.Errorf("fold %v: integer kernels in the program: %v", fold, got)
		}
		od := filepath.Join(dir, fmt.Sprintf("o%v", fold))
		if code, _, stderr := kiln("run", art, "--input", in, "--output-dir", od); code != 0 {
			t.Fatalf("run %v: %s", fold, stderr)
		}
		v, err := tensor.ReadNpyFile(filepath.Join(od, "output.npy"))
		if err != nil {
			t.Fatal(err)
		}
		outs[fold] = v
	}
	a, b := outs[false].Float32s(), outs[true].Float32s()
	scale, diff := 0.0, 0.0
	for i := range a {
		scale = math.Max(scale, math.Abs(float64(a[i])))
		diff = math.Max(diff, math.Abs(float64(a[i]-b[i])))
	}
	if !(scale > 0) || diff > 0.05*scale {
		t.Errorf("integer and float-emulated outputs differ by %g (values up to %g)", diff, scale)
	}
}

// TestQuantizedKernelsKeepSources: every kernel of a compiled quantized
// model (the importer's folded integer operators and the passes after
// it) still names the ONNX nodes it came from, which profiles, traces
// and the partition report show.
func TestQuantizedKernelsKeepSources(t *testing.T) {
	testenv.Cgo(t)
	dir := t.TempDir()
	for _, name := range []string{"mlp", "lenet"} {
		q := filepath.Join(dir, name+".onnx")
		model := filepath.Join("..", "examples", "models", name, "model.onnx")
		if code, _, stderr := kiln("quantize", model, "-o", q, "--eval", "0"); code != 0 {
			t.Fatalf("%s: quantize: %s", name, stderr)
		}
		art := filepath.Join(dir, name)
		if code, _, stderr := kiln("compile", q, "-t", "c", "-o", art, "--quiet"); code != 0 {
			t.Fatalf("%s: compile: %s", name, stderr)
		}
		data, err := os.ReadFile(filepath.Join(art, "graph.json"))
		if err != nil {
			t.Fatal(err)
		}
		g, err := krt.DecodeGraphJSON(data)
		if err != nil {
			t.Fatal(err)
		}
		kernels := 0
		for _, n := range g.Nodes {
			if n.Op != krt.OpKiln {
				continue
			}
			kernels++
			var sources []string
			if raw, ok := n.Attrs["sources"]; ok {
				if err := json.Unmarshal(raw, &sources); err != nil {
					t.Fatalf("%s: kernel %s: sources: %v", name, n.Name, err)
				}
			}
			if len(sources) == 0 {
				t.Errorf("%s: kernel %s names no ONNX node", name, n.Name)
			}
		}
		if kernels == 0 {
			t.Errorf("%s: no kernels in graph.json", name)
		}
	}
}
