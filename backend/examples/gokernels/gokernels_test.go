package gokernels

import (
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/partition"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

// TestEndToEnd compiles a function with the example backend and the host:
// the backend takes the relu/sigmoid/add chain, the host the exp and the
// broadcasting add it refuses, the artifact loads through the backend's
// registered loader, and the outputs match the reference executor.
func TestEndToEnd(t *testing.T) {
	testenv.Cgo(t)
	r := targets.NewRegistry()
	if err := r.Register(targets.C); err != nil {
		t.Fatal(err)
	}
	if err := Register(r); err != nil {
		t.Fatal(err)
	}
	mod, err := graph.Parse(`def @main(%x: Tensor[(2, 8), float32], %b: Tensor[(8), float32]) {
  %0 = nn.relu(%x);
  %1 = sigmoid(%0);
  %2 = add(%1, %x);
  %3 = exp(%2);
  %4 = add(%3, %b);
  tanh(%4)
}`, graph.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := r.ParseList("gokernels, c")
	if err != nil {
		t.Fatal(err)
	}
	var rep partition.Report
	out := filepath.Join(t.TempDir(), "art")
	if _, err := driver.Compile(mod, nil, driver.Config{Host: l.Host, Targets: l.Targets, Out: out, Report: &rep}); err != nil {
		t.Fatal(err)
	}
	if rep.Counts["gokernels"] != 4 || rep.Counts[partition.HostTarget] != 2 {
		t.Errorf("partition counts %v, want 4 calls on gokernels (relu, sigmoid, add, tanh) and 2 on the host", rep.Counts)
	}
	rng := rand.New(rand.NewSource(11))
	x, b := tensor.New(ir.Float32, ir.Shape{2, 8}), tensor.New(ir.Float32, ir.Shape{8})
	for _, v := range []*tensor.Tensor{x, b} {
		for i := range v.Float32s() {
			v.Float32s()[i] = float32(rng.NormFloat64())
		}
	}
	want, err := ref.Run(mod, []*tensor.Tensor{x, b})
	if err != nil {
		t.Fatal(err)
	}
	art, err := driver.LoadArtifact(out)
	if err != nil {
		t.Fatal(err)
	}
	defer art.Close()
	got, err := art.Run(map[string]*tensor.Tensor{"x": x, "b": b})
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.AllClose(got[0], want.Flatten()[0], 1e-5, 1e-6); err != nil {
		t.Error(err)
	}
}
