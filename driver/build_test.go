package driver

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

func hostTarget(t testing.TB) *targets.Target {
	tg, err := targets.New(targets.C, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// compileAndCompare compiles a backend-layout model directory, runs
// test_data_set_0 through the artifact and checks the outputs against both
// the reference executor (differential) and the stored expected outputs.
func compileAndCompare(t *testing.T, dir string, rtol, atol float64) {
	t.Helper()
	compileAndCompareWith(t, dir, rtol, atol, Config{Host: hostTarget(t)})
}

// compileAndCompareWith is compileAndCompare with a configuration of the
// caller's (its Out is set here) and returns the compilation's result.
func compileAndCompareWith(t *testing.T, dir string, rtol, atol float64, cfg Config) *Result {
	t.Helper()
	model, err := onnx.LoadFile(filepath.Join(dir, "model.onnx"), onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string]*tensor.Tensor{}
	var args []*tensor.Tensor
	for i, in := range model.Inputs {
		v, _, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", "input_"+itoa(i)+".pb"))
		if err != nil {
			t.Fatal(err)
		}
		inputs[in.Name] = v
		args = append(args, v)
	}
	refOut, err := ref.Run(model.Module, args)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range model.Outputs {
		names = append(names, o.Name)
	}
	cfg.Out = filepath.Join(t.TempDir(), "artifact")
	cfg.Verify = true // every end-to-end test verifies the IR after every stage
	res, err := Compile(model.Module, names, cfg)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	art, err := LoadArtifact(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := art.Run(inputs)
	if err != nil {
		t.Fatal(err)
	}
	want := refOut.Flatten()
	if len(got) != len(want) {
		t.Fatalf("%d outputs, reference has %d", len(got), len(want))
	}
	for i := range got {
		if err := tensor.AllClose(got[i], want[i], 1e-4, 1e-5); err != nil {
			t.Errorf("output %d vs reference executor: %v", i, err)
		}
		exp, _, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", "output_"+itoa(i)+".pb"))
		if err != nil {
			t.Fatal(err)
		}
		if err := tensor.AllClose(got[i], exp, rtol, atol); err != nil {
			t.Errorf("output %d vs PyTorch: %v", i, err)
		}
	}
	return res
}

func itoa(i int) string { return string(rune('0' + i)) }

func TestCompileMLP(t *testing.T) {
	testenv.Cgo(t)
	compileAndCompare(t, filepath.Join("..", "examples", "models", "mlp"), 1e-3, 1e-4)
}

// TestCompileSharedModels compiles every model in ../shared/models.
func TestCompileSharedModels(t *testing.T) {
	testenv.Cgo(t)
	root := filepath.Join(sharedDir(t), "models")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatalf("shared models: %v", err)
	}
	for _, e := range entries {
		name := e.Name()
		if testing.Short() && (name == "resnet18" || name == "mobilenet_v2" || name == "squeezenet1_1") {
			continue
		}
		t.Run(name, func(t *testing.T) { compileAndCompare(t, filepath.Join(root, name), 1e-3, 1e-4) })
	}
}

// TestLinkedParams builds the example MLP with its weights inside the
// library and checks the artifact has no params file and still matches.
func TestLinkedParams(t *testing.T) {
	testenv.Cgo(t)
	dir := filepath.Join("..", "examples", "models", "mlp")
	model, err := onnx.LoadFile(filepath.Join(dir, "model.onnx"), onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", "input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "linked")
	res, err := Compile(model.Module, nil, Config{Host: hostTarget(t), Out: out, LinkParams: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Metadata.Params != "linked" {
		t.Errorf("metadata params = %q", res.Metadata.Params)
	}
	for _, f := range []string{"params.bin", linkedParamsBlob} {
		if _, err := os.Stat(filepath.Join(out, f)); err == nil {
			t.Errorf("%s should not be in a linked-params artifact", f)
		}
	}
	art, err := LoadArtifact(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := art.Run(map[string]*tensor.Tensor{model.Inputs[0].Name: in})
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.AllClose(got[0], want, 1e-3, 1e-4); err != nil {
		t.Error(err)
	}
}

// TestCompileOutlinedReductions compiles tiny_bert for a Haswell (AVX2,
// 16 vector registers), where the matrix products whose epilogue computes
// erf (GELU) keep their reductions in functions of their own
// (topi.transcendentalEpilogue, te.Stage.Outline), and checks the
// outputs against the reference executor and PyTorch's.
func TestCompileOutlinedReductions(t *testing.T) {
	testenv.Cgo(t)
	feats := hostTarget(t).Processor().Features
	if !slices.Contains(feats, "avx2") || !slices.Contains(feats, "fma") {
		t.Skip("this machine cannot run code for a Haswell (no AVX2 and FMA)")
	}
	host, err := targets.Default.Parse("c -mcpu=haswell")
	if err != nil {
		t.Fatal(err)
	}
	res := compileAndCompareWith(t, filepath.Join(sharedDir(t), "models", "tiny_bert"), 1e-3, 1e-4, Config{Host: host})
	src, err := os.ReadFile(filepath.Join(res.Dir, "kiln_lib.c"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "static KILN_NOINLINE void kiln_loop_fused_nn_contrib_matmul_packed_add_divide_erf") {
		t.Error("no outlined reduction in the GELU product")
	}
}
