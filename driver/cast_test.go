package driver

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

// compileRun compiles mod for host, verifying the IR after every stage,
// runs it on inputs and returns its outputs and its generated C.
func compileRun(t *testing.T, mod *graph.Module, host *targets.Target, inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, string) {
	t.Helper()
	res, err := Compile(mod, nil, Config{Host: host, Out: filepath.Join(t.TempDir(), "a"), Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(res.Dir, "kiln_lib.c"))
	if err != nil {
		t.Fatal(err)
	}
	art, err := LoadArtifact(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer art.Close()
	got, err := art.Run(inputs)
	if err != nil {
		t.Fatal(err)
	}
	return got, string(src)
}

// refOfCall returns the module main(in) = call, typed, and the reference
// executor's result on x.
func refOfCall(t *testing.T, in *graph.Var, call *graph.Call, x *tensor.Tensor) (*graph.Module, ref.Value) {
	t.Helper()
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{in}, call, nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	want, err := ref.Run(mod, []*tensor.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	return mod, want
}

// TestClampedCast: a cast to a narrow integer of a clip with bounds within
// int32 (QuantizeLinear's tail) converts directly, and gives the
// reference executor's values for NaN, infinities, fractions of either
// sign and values past the bounds; a clip beyond int32 keeps the
// saturating conversion.
func TestClampedCast(t *testing.T) {
	testenv.Cgo(t)
	vals := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), -0.7, 0.7, -1.5, 2.5, 127.9, 128.2, -128.9, -129, 255.5, 256, 1e6, -1e6, 3e9, -3e9, 0, -0}
	for len(vals) < 32 {
		vals = append(vals, float32(len(vals))*37.3-500)
	}
	x := tensor.FromFloat32s(ir.Shape{int64(len(vals))}, vals)
	for _, tc := range []struct {
		lo, hi float64
		to     ir.DType
		direct bool
	}{
		{0, 255, ir.Uint8, true},
		{-128, 127, ir.Int8, true},
		{-300, 300, ir.Uint8, true}, // wraps, as the int64 path does
		{-40000, 40000, ir.Int16, true},
		{-2e9, 2e9, ir.Int32, true},
		{-1e10, 1e10, ir.Int32, false},
		{0, 255, ir.Int64, false},
	} {
		in := graph.NewVar("x", x.Type())
		clip, err := graph.NewCall(op.Clip, []graph.Expr{in}, ir.Attrs{"a_min": tc.lo, "a_max": tc.hi})
		if err != nil {
			t.Fatal(err)
		}
		cast, err := graph.NewCall(op.Cast, []graph.Expr{clip}, ir.Attrs{"dtype": tc.to})
		if err != nil {
			t.Fatal(err)
		}
		mod := graph.NewModule(graph.NewFunction([]*graph.Var{in}, cast, nil))
		if err := graph.InferTypes(mod); err != nil {
			t.Fatal(err)
		}
		want, err := ref.Run(mod, []*tensor.Tensor{x})
		if err != nil {
			t.Fatal(err)
		}
		got, src := compileRun(t, mod, hostTarget(t), map[string]*tensor.Tensor{"x": x})
		if direct := !strings.Contains(src, "kiln_f2i64("); direct != tc.direct {
			t.Errorf("clip [%g, %g] to %s: direct conversion %v, want %v", tc.lo, tc.hi, tc.to, direct, tc.direct)
		}
		if !got[0].Equal(want.Flatten()[0]) {
			t.Errorf("clip [%g, %g] to %s: compiled %v, reference %v", tc.lo, tc.hi, tc.to, got[0].Data, want.Flatten()[0].Data)
		}
	}
}
