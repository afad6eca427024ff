//go:build cgo

package c

import (
	"encoding/binary"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/codegen/c/internal/dl"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/interp"
)

// erfInputs are float32 values covering every piece of kiln_erff: both
// sides of 1 and 4 (where the pieces change) and of 3.92 (where erf
// starts to round to 1), a dense sweep of [-5, 5], tiny and subnormal
// values, huge values, signed zeros, infinities and NaN, and random bit
// patterns.
func erfInputs() []float32 {
	var xs []float32
	for _, c := range []float32{1, 4, 3.92, 0.5, 2} {
		b := math.Float32bits(c)
		for d := uint32(0); d < 2000; d++ {
			xs = append(xs, math.Float32frombits(b-d), math.Float32frombits(b+d))
		}
	}
	for i := 0; i <= 100000; i++ {
		xs = append(xs, float32(-5+10*float64(i)/100000))
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 1e-30, -1e-30, 1e-10, 1e30, -1e30, math.MaxFloat32, -math.MaxFloat32)
	rng := rand.New(rand.NewSource(11))
	for i := 0; i < 100000; i++ {
		xs = append(xs, math.Float32frombits(rng.Uint32()))
	}
	n := len(xs)
	for i := 0; i < n; i++ {
		xs = append(xs, -xs[i])
	}
	return xs
}

// TestErfF32 checks the generated float32 erf (kiln_erff, a polynomial
// evaluation without libm so that GELU loops vectorise) against the
// interpreter on erfInputs: at most 1 ulp apart, with NaN, ±inf and ±0
// exact. (The same check on every float32, run once outside the test
// suite, found no input more than 1 ulp from the correctly rounded erf.)
func TestErfF32(t *testing.T) {
	xs := erfInputs()
	n := int64(len(xs))
	f := tir.NewPrimFunc("erf_f32")
	x := f.AddBuffer(tir.NewBuffer("X", ir.Float32, ir.Shape{n}, ""))
	out := f.AddBuffer(tir.NewBuffer("Out", ir.Float32, ir.Shape{n}, ""))
	i := v32("i")
	f.Body = tir.Loop(i, n, tir.Serial, tir.NewStore(out, tir.NewCall(tir.IntrinErf, tir.NewLoad(x, i)), i))
	src := generate(t, HostOptions(), f)
	if !strings.Contains(src.Code, "kiln_erff(") {
		t.Fatal("float32 erf is not emitted as kiln_erff")
	}
	path, err := Build(src, t.TempDir(), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lib, err := dl.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()

	in := interp.NewArray(ir.Float32, n)
	for k, v := range xs {
		binary.LittleEndian.PutUint32(in.Data[4*k:], math.Float32bits(v))
	}
	want := interp.NewArray(ir.Float32, n)
	if err := interp.Run(f, []any{in, want}, nil); err != nil {
		t.Fatal(err)
	}
	tensors := tensorsFor(src.Funcs[0], []any{in, interp.NewArray(ir.Float32, n)})
	if st, err := lib.Call(src.Funcs[0].Symbol, tensors, -1); err != nil || st != 0 {
		msg, _ := lib.LastError()
		t.Fatalf("status %d, %v, %s", st, err, msg)
	}
	off := 0
	for k, v := range xs {
		w := math.Float32frombits(binary.LittleEndian.Uint32(want.Data[4*k:]))
		g := math.Float32frombits(binary.LittleEndian.Uint32(tensors[1].Data[4*k:]))
		exact := v == 0 || math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)
		d := ulpDiff(ir.Float32, float64(w), float64(g))
		if d > 1 || (exact && d != 0) {
			t.Fatalf("erf(%g = %#x): C %g (%#x), interpreter %g (%#x): %d ulp apart",
				v, math.Float32bits(v), g, math.Float32bits(g), w, math.Float32bits(w), d)
		}
		if d == 1 {
			off++
		}
	}
	t.Logf("%d inputs, %d one ulp apart", len(xs), off)
}
