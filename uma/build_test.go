package uma

import (
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pattern"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
	tirtransform "github.com/kiln-dev/kiln/tir/transform"
)

// TestPartitionThenBuildWithHostOnly is UMA's partition-then-build: the
// backend partitions the model itself, and the build lists only the
// host. The build finds the backend's kind from the partitioned
// functions' Compiler attribute (driver.Config.Kinds), runs its hooks
// (its TIR pass sees its PrimFuncs), and the outputs match the
// reference; partitioning does not run again for it.
func TestPartitionThenBuildWithHostOnly(t *testing.T) {
	testenv.Cgo(t)
	b := New("acc_build", "test")
	var lowered []string
	noErr(t, "pattern", b.RegisterPattern("add", pattern.IsOp(op.Add, pattern.Wildcard(), pattern.Wildcard()), nil))
	noErr(t, "tir pass", b.RegisterTIRPass(tirtransform.Phase0, "record", func(_ *targets.Target, f *tir.PrimFunc) (*tir.PrimFunc, error) {
		lowered = append(lowered, f.Name)
		return f, nil
	}))
	r := targets.NewRegistry()
	noErr(t, "Register", b.Register(r))
	mod, err := graph.Parse(`def @main(%x: Tensor[(4), float32], %y: Tensor[(4), float32]) {
  %0 = add(%x, %y);
  %1 = tanh(%0);
  add(%1, %y)
}`, graph.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	part, rep, err := b.Partition(mod, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Counts["acc_build"] != 2 {
		t.Fatalf("partition counts %v, want both adds on acc_build", rep.Counts)
	}
	host, err := targets.New(targets.C, ir.Attrs{"mcpu": "x86-64"})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "art")
	if _, err := driver.Compile(part, nil, driver.Config{Host: host, Out: out, Kinds: r}); err != nil {
		t.Fatalf("building the partitioned module for the host alone: %v", err)
	}
	if len(lowered) == 0 {
		t.Errorf("the backend's TIR pass saw no PrimFunc: its hooks did not run")
	}
	art, err := driver.LoadArtifact(out)
	if err != nil {
		t.Fatal(err)
	}
	defer art.Close()
	ins, args := randomInputs(3, ir.Shape{4}, "x", "y")
	got, err := art.Run(ins)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Run(mod, args)
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.AllClose(got[0], want.Flatten()[0], 1e-5, 1e-6); err != nil {
		t.Errorf("output: %v", err)
	}
	// Without the registry the kind is unknown: the error names it.
	_, err = driver.Compile(part, nil, driver.Config{Host: host, Out: filepath.Join(t.TempDir(), "b")})
	wantErr(t, "unknown kind", err, `external compiler "acc_build"`)
}

// randomInputs makes normal random float32 tensors of one shape, by name
// and in order.
func randomInputs(seed int64, shape ir.Shape, names ...string) (map[string]*tensor.Tensor, []*tensor.Tensor) {
	rng := rand.New(rand.NewSource(seed))
	ins := map[string]*tensor.Tensor{}
	var args []*tensor.Tensor
	for _, n := range names {
		v := tensor.New(ir.Float32, shape)
		for i := range v.Float32s() {
			v.Float32s()[i] = float32(rng.NormFloat64())
		}
		ins[n] = v
		args = append(args, v)
	}
	return ins, args
}
