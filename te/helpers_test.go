package te_test

import (
	"math"
	"math/rand"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/interp"
	"github.com/kiln-dev/kiln/tir/tirtest"
	"github.com/kiln-dev/kiln/tir/transform"
)

// refFunc computes the expected outputs (flattened row-major, as float64)
// from the inputs. Float references compute in float32 with the same
// summation order as the schedules, so results agree to rounding.
type refFunc func(in []*interp.Array) [][]float64

// relTol is the float tolerance: |got-want| <= relTol*max(|want|, 1).
// Schedules here keep each reduction's order (a split reduce axis still
// runs k = 0, 1, ... in sequence), so float results are in fact
// bit-identical to the float32 references; the tolerance only admits the
// last-bit differences a reassociating schedule could introduce.
const relTol = 1e-5

// mustLower lowers s and fails the test on error or a verification
// failure.
func mustLower(t *testing.T, name string, args []*te.Tensor, s *te.Schedule) *tir.PrimFunc {
	t.Helper()
	f, err := te.Lower(name, args, s, te.LowerOptions{})
	if err != nil {
		t.Fatalf("Lower: %v", err)
	}
	if err := tir.Verify(f); err != nil {
		t.Fatalf("lowered function does not verify: %v\n%s", err, f)
	}
	return f
}

// checkRun lowers the function through the TIR pipeline, checks the
// pipeline preserves its meaning, and compares the interpreted outputs
// (the parameters after the first nIn) with ref on several random inputs.
func checkRun(t *testing.T, f *tir.PrimFunc, nIn int, ref refFunc) {
	t.Helper()
	p := transform.NewPipeline()
	p.VerifyEach = true
	g, err := p.RunFunc(f)
	if err != nil {
		t.Fatalf("pipeline: %v\n%s", err, f)
	}
	if err := tirtest.Equivalent(f, g, 2, 7); err != nil {
		t.Fatalf("pipeline changed the meaning: %v\n%s", err, f)
	}
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 3; trial++ {
		args := tirtest.RandomArgs(g, rng)
		ins := make([]*interp.Array, nIn)
		for i := range ins {
			ins[i] = args[i].(*interp.Array).Clone()
		}
		if err := interp.Run(g, args, &interp.Options{Externs: tirtest.Externs}); err != nil {
			t.Fatalf("interp: %v\n%s", err, f)
		}
		want := ref(ins)
		bufs := g.Buffers()
		for o, w := range want {
			arr := args[nIn+o].(*interp.Array)
			b := bufs[nIn+o]
			if int64(len(w)) != arr.Len() {
				t.Fatalf("output %s: reference has %d elements, buffer %d", b.Name, len(w), arr.Len())
			}
			for k, wv := range w {
				gv := arr.Float(int64(k))
				ok := gv == wv
				if !ok && b.DType.IsFloat() {
					ok = math.Abs(gv-wv) <= relTol*math.Max(math.Abs(wv), 1)
				}
				if !ok {
					t.Fatalf("trial %d: output %s element %d: got %v, want %v\n%s", trial, b.Name, k, gv, wv, f)
				}
			}
		}
	}
}

func f32s(a *interp.Array) []float32 {
	out := make([]float32, a.Len())
	for i := range out {
		out[i] = float32(a.Float(int64(i)))
	}
	return out
}

func ints(a *interp.Array) []int64 {
	out := make([]int64, a.Len())
	for i := range out {
		out[i] = a.Int(int64(i))
	}
	return out
}

func fromF32(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

func fromInts(xs []int64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

var (
	f32 = ir.Float32
	i32 = ir.Int32
)

func idx(v int64) tir.PrimExpr { return tir.Idx(v) }
