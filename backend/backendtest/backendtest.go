// Package backendtest holds helpers for testing backends (BYOC code
// generators, UMA accelerators): a registry with the host kind and the
// backend, compiling a graph module for a target string into an artifact
// and running it (graph or AOT executor), checking outputs against the
// reference executor, and compiling the models of ../shared against their
// reference outputs. kiln's backend and UMA example tests use it; a
// vendor's tests can too.
package backendtest

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/internal/shared"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/partition"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

// Registry makes a registry holding kind "c" and the kinds the register
// functions add.
func Registry(t testing.TB, register ...func(*targets.Registry) error) *targets.Registry {
	t.Helper()
	r := targets.NewRegistry()
	if err := r.Register(targets.C); err != nil {
		t.Fatal(err)
	}
	for _, f := range register {
		if err := f(r); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// Compiled is an artifact a test built and ran.
type Compiled struct {
	// Dir is the artifact directory.
	Dir string
	// Outputs are the run's outputs, flattened.
	Outputs []*tensor.Tensor
	// Report is the partition report (empty without external targets).
	Report partition.Report
}

// CompileRun compiles mod for targets (parsed in r) into a fresh
// directory, loads the artifact and runs it on inputs (one per main
// parameter, in order).
func CompileRun(t testing.TB, r *targets.Registry, tgts string, mod *graph.Module, inputs []*tensor.Tensor) *Compiled {
	t.Helper()
	return compileRun(t, r, tgts, driver.ExecutorGraph, mod, inputs)
}

func compileRun(t testing.TB, r *targets.Registry, tgts, executor string, mod *graph.Module, inputs []*tensor.Tensor) *Compiled {
	t.Helper()
	l, err := r.ParseList(tgts)
	if err != nil {
		t.Fatal(err)
	}
	c := &Compiled{Dir: filepath.Join(t.TempDir(), "art")}
	if _, err := driver.Compile(mod, nil, driver.Config{Host: l.Host, Targets: l.Targets, Out: c.Dir, Report: &c.Report, ModuleName: "test", Executor: executor, Verify: true}); err != nil {
		t.Fatalf("compiling for %q: %v", tgts, err)
	}
	art, err := driver.LoadArtifact(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]*tensor.Tensor{}
	for i, p := range mod.Main().Params {
		vals[p.Name] = inputs[i]
	}
	if c.Outputs, err = art.Run(vals); err != nil {
		t.Fatalf("running the %q artifact: %v", tgts, err)
	}
	return c
}

// Source reads a file of the artifact (the generated C, say).
func (c *Compiled) Source(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// CheckAgainstReference runs mod on inputs with the reference executor
// and compares every output with got within rtol and atol.
func CheckAgainstReference(t testing.TB, mod *graph.Module, inputs, got []*tensor.Tensor, rtol, atol float64) {
	t.Helper()
	want, err := ref.Run(mod, inputs)
	if err != nil {
		t.Fatal(err)
	}
	ws := want.Flatten()
	if len(got) != len(ws) {
		t.Fatalf("%d outputs, want %d", len(got), len(ws))
	}
	for i := range got {
		if err := tensor.AllClose(got[i], ws[i], rtol, atol); err != nil {
			t.Errorf("output %d: %v", i, err)
		}
	}
}

// RandomInputs makes uniform [-1, 1) inputs for main's parameters.
func RandomInputs(rng *rand.Rand, mod *graph.Module) []*tensor.Tensor {
	var ins []*tensor.Tensor
	for _, p := range mod.Main().Params {
		tt := p.Type().(*ir.TensorType)
		v := tensor.New(tt.DType, tt.Shape)
		for i := range v.Float32s() {
			v.Float32s()[i] = rng.Float32()*2 - 1
		}
		ins = append(ins, v)
	}
	return ins
}

// CompileModel compiles ../shared/models/NAME for targets (parsed in r),
// runs it on the stored inputs of test_data_set_0 and compares every
// output with the stored reference (PyTorch's) within rtol 1e-3, atol
// 1e-4, as kiln's conformance runs do.
func CompileModel(t testing.TB, r *targets.Registry, tgts, name string) *Compiled {
	t.Helper()
	return CompileModelExecutor(t, r, tgts, name, driver.ExecutorGraph)
}

// CompileModelExecutor is CompileModel with the given executor
// (driver.ExecutorGraph or driver.ExecutorAOT: the C project's program).
func CompileModelExecutor(t testing.TB, r *targets.Registry, tgts, name, executor string) *Compiled {
	t.Helper()
	dir, err := shared.Path("models", name)
	if err != nil {
		t.Fatal(err)
	}
	model, err := onnx.LoadFile(filepath.Join(dir, "model.onnx"), onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var inputs []*tensor.Tensor
	for i := range model.Inputs {
		in, _, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("input_%d.pb", i)))
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, in)
	}
	c := compileRun(t, r, tgts, executor, model.Module, inputs)
	for i, got := range c.Outputs {
		want, _, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("output_%d.pb", i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := tensor.AllClose(got, want, 1e-3, 1e-4); err != nil {
			t.Errorf("%s output %d: %v", name, i, err)
		}
	}
	return c
}
