package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/backend/ccompiler"
	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/internal/shared"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/partition"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

// compileAOTModel compiles ../shared/models/NAME with the AOT executor for
// targets, runs the project's program (built with plain cc) on the stored
// inputs and compares with PyTorch's outputs (rtol 1e-3, atol 1e-4).
func compileAOTModel(t *testing.T, r *targets.Registry, tgts, name string, opts AOTOptions) (string, *Result) {
	t.Helper()
	dir, err := shared.Path("models", name)
	if err != nil {
		t.Fatal(err)
	}
	model, err := onnx.LoadFile(filepath.Join(dir, "model.onnx"), onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := r.ParseList(tgts)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), name+".kiln")
	var names []string
	for _, o := range model.Outputs {
		names = append(names, o.Name)
	}
	res, err := Compile(model.Module, names, Config{Host: l.Host, Targets: l.Targets, Out: out, ModuleName: name, Executor: ExecutorAOT, AOT: opts})
	if err != nil {
		t.Fatal(err)
	}
	art, err := LoadArtifact(out)
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string]*tensor.Tensor{}
	for i, in := range model.Inputs {
		v, _, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("input_%d.pb", i)))
		if err != nil {
			t.Fatal(err)
		}
		inputs[in.Name] = v
	}
	got, err := art.Run(inputs)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		want, _, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("output_%d.pb", i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := tensor.AllClose(g, want, 1e-3, 1e-4); err != nil {
			t.Errorf("%s output %d: %v", name, i, err)
		}
	}
	return out, res
}

// TestAOTModels compiles every shared model for the host with the AOT
// executor: outputs match PyTorch's, no generated file calls malloc, and
// the workspace is within 1.1x of the liveness lower bound.
func TestAOTModels(t *testing.T) {
	r := targets.NewRegistry()
	if err := r.Register(targets.C); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"conv1d_kws", "lenet", "mlp", "mobilenet_v2", "resnet18", "squeezenet1_1", "tiny_bert"} {
		t.Run(name, func(t *testing.T) {
			dir, res := compileAOTModel(t, r, "c", name, AOTOptions{})
			a := res.Metadata.AOT
			if a == nil || a.WorkspaceBytes < a.LowerBound || float64(a.WorkspaceBytes) > 1.1*float64(a.LowerBound) {
				t.Errorf("workspace %+v: not within 1.1x of the lower bound", a)
			}
			t.Logf("%s: workspace %d bytes (%s), lower bound %d (%.3fx), constants %d bytes, %d kernels",
				name, a.WorkspaceBytes, a.Algorithm, a.LowerBound, float64(a.WorkspaceBytes)/float64(max(a.LowerBound, 1)), a.ConstantsBytes, res.Metadata.Kernels)
			srcs, _ := filepath.Glob(filepath.Join(dir, "*.c"))
			for _, s := range srcs {
				b, err := os.ReadFile(s)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(b), "malloc(") || strings.Contains(string(b), "free(") {
					t.Errorf("%s allocates memory", filepath.Base(s))
				}
			}
		})
	}
}

// TestAOTUnpackedAPI: with UnpackedAPI the run function calls the host
// kernels' unpacked forms (raw pointers), and the results are the same.
func TestAOTUnpackedAPI(t *testing.T) {
	r := targets.NewRegistry()
	if err := r.Register(targets.C); err != nil {
		t.Fatal(err)
	}
	blob := false
	dir, res := compileAOTModel(t, r, "c", "lenet", AOTOptions{UnpackedAPI: true, ConstantsAsCArray: &blob})
	src, err := os.ReadFile(filepath.Join(dir, "kiln_lenet.c"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(src), "_unpacked("); n < 2*res.Metadata.Kernels || strings.Contains(string(src), "kiln_tensor args[") {
		t.Errorf("%d unpacked references for %d kernels (declarations and calls), or packed calls left:\n%s", n, res.Metadata.Kernels, src)
	}
	if _, err := os.Stat(filepath.Join(dir, "kiln_lenet_constants.bin")); err != nil {
		t.Errorf("ConstantsAsCArray=false wrote no binary pool: %v", err)
	}
}

// TestAOTExternalTwoOutputs: a ccompiler region with two outputs (add and
// multiply both used on the host) is called once from the run function
// with both output buffers, and the results match the reference.
func TestAOTExternalTwoOutputs(t *testing.T) {
	r := targets.NewRegistry()
	for _, reg := range []func(*targets.Registry) error{func(r *targets.Registry) error { return r.Register(targets.C) }, ccompiler.Register} {
		if err := reg(r); err != nil {
			t.Fatal(err)
		}
	}
	mod, err := graph.Parse(`def @main(%x: Tensor[(2, 3), float32]) {
  %0 = add(%x, %x);
  %1 = multiply(%0, %x);
  %2 = tanh(%0);
  %3 = tanh(%1);
  (%2, %3)
}`, graph.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := r.ParseList("ccompiler, c")
	if err != nil {
		t.Fatal(err)
	}
	for _, unpacked := range []bool{false, true} {
		aotExternalTwoOutputs(t, mod, l, unpacked)
	}
}

// aotExternalTwoOutputs is TestAOTExternalTwoOutputs with or without the
// unpacked API (with it, the external C module's unpacked form is called).
func aotExternalTwoOutputs(t *testing.T, mod *graph.Module, l *targets.TargetList, unpacked bool) {
	out := filepath.Join(t.TempDir(), "two.kiln")
	var rep partition.Report
	if _, err := Compile(mod, nil, Config{Host: l.Host, Targets: l.Targets, Out: out, ModuleName: "two", Executor: ExecutorAOT, Report: &rep, AOT: AOTOptions{UnpackedAPI: unpacked}}); err != nil {
		t.Fatal(err)
	}
	if rep.Regions["ccompiler"] != 1 || rep.Counts["ccompiler"] != 2 {
		t.Fatalf("partition: regions %v counts %v, want one region of two calls", rep.Regions, rep.Counts)
	}
	src, err := os.ReadFile(filepath.Join(out, "kiln_two.c"))
	if err != nil {
		t.Fatal(err)
	}
	call := "if (kiln_two_ccompiler_main_0(args, 3)"
	if unpacked {
		call = "if (kiln_two_ccompiler_main_0_unpacked("
	}
	if n := strings.Count(string(src), call); n != 1 {
		t.Errorf("unpacked=%v: the two-output region is called %d times as %q, want once:\n%s", unpacked, n, call, src)
	}
	x := tensor.New(ir.Float32, ir.Shape{2, 3})
	copy(x.Float32s(), []float32{-1, -0.5, 0, 0.25, 0.5, 1})
	want, err := ref.Run(mod, []*tensor.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	art, err := LoadArtifact(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := art.Run(map[string]*tensor.Tensor{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want.Flatten() {
		if err := tensor.AllClose(got[i], w, 1e-6, 1e-6); err != nil {
			t.Errorf("output %d: %v", i, err)
		}
	}
}
