//go:build cgo

package c

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/interp"
)

// mathInputs are float32 values for checking a math helper: 2000
// neighbours on each side of every value in edges (where the helper's
// pieces change or its result starts to round to a constant), a sweep of
// 100001 values over [lo, hi], tiny, subnormal and huge values, signed
// zeros, infinities, NaN and random bit patterns, and all their negatives.
func mathInputs(edges []float32, lo, hi float64) []float32 {
	var xs []float32
	for _, c := range edges {
		b := math.Float32bits(c)
		for d := uint32(0); d < 2000; d++ {
			xs = append(xs, math.Float32frombits(b-d), math.Float32frombits(b+d))
		}
	}
	for i := 0; i <= 100000; i++ {
		xs = append(xs, float32(lo+(hi-lo)*float64(i)/100000))
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

// TestMathHelpersF32 checks the float32 math helpers the generated code
// uses instead of libm so that loops vectorise — kiln_erff for every
// float32 erf, kiln_expf for exp inside vectorized loops, kiln_sigmoidf
// for float32 sigmoid outside them and kiln_sigmoidf_v inside, kiln_tanhf
// for every float32 tanh — against the interpreter: at most 1 ulp apart
// (3 for kiln_sigmoidf_v), with NaN, ±inf and ±0 exact, with and without
// fused multiply-add. (The same check of kiln_erff, kiln_expf, kiln_tanhf
// and kiln_sigmoidf_v on every float32, run once outside the test suite
// in both forms, found no input further from the correctly rounded
// result.)
func TestMathHelpersF32(t *testing.T) {
	cases := []struct {
		op     tir.Intrinsic
		kind   tir.ForKind
		helper string
		ulp    int64
		inputs []float32
	}{
		{tir.IntrinErf, tir.Serial, "kiln_erff", 1, mathInputs([]float32{1, 4, 3.92, 0.5, 2}, -5, 5)},
		{tir.IntrinExp, tir.Vectorized, "kiln_expf", 1, mathInputs([]float32{128, 88.72284, 87.33655, 103.97208, 0.34657359, 1}, -110, 100)},
		{tir.IntrinSigmoid, tir.Serial, "kiln_sigmoidf", 1, mathInputs([]float32{128, 88.72284, 87.33655, 103.97208, 17}, -110, 100)},
		{tir.IntrinSigmoid, tir.Vectorized, "kiln_sigmoidf_v", 3, mathInputs([]float32{128, 104, 88.72284, 87.33655, 103.97208, 17}, -110, 100)},
		{tir.IntrinTanh, tir.Vectorized, "kiln_tanhf", 1, mathInputs([]float32{9.1, 9.01, 0.625, 0x1p-12, 0.55, 1}, -12, 12)},
	}
	// The helpers use fused multiply-add where the processor has it:
	// both forms are checked when this machine can run the fused one.
	variants := map[string][]string{"portable": nil}
	if native, err := targets.ResolveCPU("native", nil); err == nil && native.Arch == HostArch() && native.FMA() {
		if fma, err := targets.ResolveCPU("haswell", nil); err == nil && HostArch() == targets.X86_64 {
			variants["fma"] = fma.CFlags()
		} else if HostArch() == targets.AArch64 {
			variants["fma"] = native.CFlags()
		}
	}
	for name, flags := range variants {
		for _, c := range cases {
			t.Run(name+"/"+c.op.Info().Name, func(t *testing.T) {
				checkMathHelper(t, c.op, c.kind, c.helper, c.ulp, c.inputs, flags)
			})
		}
	}
}

// checkMathHelper compiles Out[i] = op(X[i]) as a loop of the given kind,
// checks that the source calls helper, runs it on xs and compares with
// the interpreter.
func checkMathHelper(t *testing.T, op tir.Intrinsic, kind tir.ForKind, helper string, ulp int64, xs []float32, cpuFlags []string) {
	n := int64(len(xs))
	f := tir.NewPrimFunc("math_f32")
	x := f.AddBuffer(tir.NewBuffer("X", ir.Float32, ir.Shape{n}, ""))
	out := f.AddBuffer(tir.NewBuffer("Out", ir.Float32, ir.Shape{n}, ""))
	i := v32("i")
	f.Body = tir.Loop(i, n, kind, tir.NewStore(out, tir.NewCall(op, tir.NewLoad(x, i)), i))
	src := generate(t, HostOptions(), f)
	if !strings.Contains(src.Code, helper+"(") {
		t.Fatalf("%s is not emitted as %s", op.Info().Name, helper)
	}
	lib := openLib(t, src, BuildOptions{CPUFlags: cpuFlags})

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
		if d > ulp || (exact && d != 0) {
			t.Fatalf("%s(%g = %#x): C %g (%#x), interpreter %g (%#x): %d ulp apart",
				op.Info().Name, v, math.Float32bits(v), g, math.Float32bits(g), w, math.Float32bits(w), d)
		}
		if d > 0 {
			off++
		}
	}
	t.Logf("%d inputs, %d not bit-identical", len(xs), off)
}

// TestMinMaxHelpers checks the branch-free float min/max helpers in a
// vectorized loop against the interpreter (Go's math.Min/Max) on every
// pair of signed zeros, infinities, NaN, equal and ordinary values: the
// same bits (any NaN for NaN).
func TestMinMaxHelpers(t *testing.T) {
	negZero := math.Copysign(0, -1)
	vals := []float64{0, negZero, 1, -1, 2.5, -2.5, math.Inf(1), math.Inf(-1), math.NaN(), 1e-40, -1e-40, math.MaxFloat32}
	for _, dt := range []ir.DType{ir.Float32, ir.Float64} {
		for _, op := range []string{"min", "max"} {
			n := int64(len(vals) * len(vals))
			f := tir.NewPrimFunc("minmax")
			x := f.AddBuffer(tir.NewBuffer("X", dt, ir.Shape{n}, ""))
			y := f.AddBuffer(tir.NewBuffer("Y", dt, ir.Shape{n}, ""))
			out := f.AddBuffer(tir.NewBuffer("Out", dt, ir.Shape{n}, ""))
			i := v32("i")
			a, b := tir.NewLoad(x, i), tir.NewLoad(y, i)
			e := tir.Max(a, b)
			if op == "min" {
				e = tir.Min(a, b)
			}
			f.Body = tir.Loop(i, n, tir.Vectorized, tir.NewStore(out, e, i))
			src := generate(t, HostOptions(), f)
			if !strings.Contains(src.Code, "kiln_"+op+"_f") {
				t.Fatalf("%s %s does not use the helper", dt, op)
			}
			lib := openLib(t, src, BuildOptions{})
			xa, ya := interp.NewArray(dt, n), interp.NewArray(dt, n)
			for p, u := range vals {
				for q, v := range vals {
					xa.SetFloat(int64(p*len(vals)+q), u)
					ya.SetFloat(int64(p*len(vals)+q), v)
				}
			}
			want := interp.NewArray(dt, n)
			if err := interp.Run(f, []any{xa, ya, want}, nil); err != nil {
				t.Fatal(err)
			}
			tensors := tensorsFor(src.Funcs[0], []any{xa, ya, interp.NewArray(dt, n)})
			if st, err := lib.Call(src.Funcs[0].Symbol, tensors, -1); err != nil || st != 0 {
				t.Fatalf("status %d, %v", st, err)
			}
			sameFloats(t, &interp.Array{DType: dt, Data: tensors[2].Data}, want, func(k int64) string {
				return fmt.Sprintf("%s %s(%g, %g)", dt, op, xa.Float(k), ya.Float(k))
			})
		}
	}
}

// TestMinMaxConstHelpers: min and max with a constant operand use the
// one-comparison helpers where they agree with the general rules (a
// finite constant, not -0 for max nor +0 for min) and give the
// interpreter's bits (any NaN for NaN) on every special value, with the
// constant on either side.
func TestMinMaxConstHelpers(t *testing.T) {
	negZero := math.Copysign(0, -1)
	vals := []float64{0, negZero, 1, -1, 2.5, -2.5, 6, math.Inf(1), math.Inf(-1), math.NaN(), 1e-40, -1e-40, math.MaxFloat32}
	consts := []float64{0, negZero, 6, -1, 1e-40, math.Inf(1), math.Inf(-1)}
	for _, dt := range []ir.DType{ir.Float32, ir.Float64} {
		for _, op := range []string{"min", "max"} {
			for _, c := range consts {
				for _, constFirst := range []bool{false, true} {
					n := int64(len(vals))
					f := tir.NewPrimFunc("minmaxc")
					x := f.AddBuffer(tir.NewBuffer("X", dt, ir.Shape{n}, ""))
					out := f.AddBuffer(tir.NewBuffer("Out", dt, ir.Shape{n}, ""))
					i := v32("i")
					a, b := tir.PrimExpr(tir.NewLoad(x, i)), tir.PrimExpr(tir.FloatConst(dt, c))
					if constFirst {
						a, b = b, a
					}
					e := tir.Max(a, b)
					if op == "min" {
						e = tir.Min(a, b)
					}
					f.Body = tir.Loop(i, n, tir.Vectorized, tir.NewStore(out, e, i))
					src := generate(t, HostOptions(), f)
					fast := !math.IsInf(c, 0) && (c != 0 || math.Signbit(c) == (op == "min"))
					if got := strings.Contains(src.Code, "kiln_"+op+"c_f"); got != fast {
						t.Fatalf("%s %s(x, %g): one-comparison helper used %v, want %v", dt, op, c, got, fast)
					}
					lib := openLib(t, src, BuildOptions{})
					xa := interp.NewArray(dt, n)
					for k, v := range vals {
						xa.SetFloat(int64(k), v)
					}
					want := interp.NewArray(dt, n)
					if err := interp.Run(f, []any{xa, want}, nil); err != nil {
						t.Fatal(err)
					}
					tensors := tensorsFor(src.Funcs[0], []any{xa, interp.NewArray(dt, n)})
					if st, err := lib.Call(src.Funcs[0].Symbol, tensors, -1); err != nil || st != 0 {
						t.Fatalf("status %d, %v", st, err)
					}
					sameFloats(t, &interp.Array{DType: dt, Data: tensors[1].Data}, want, func(k int64) string {
						return fmt.Sprintf("%s %s(%g, const %g, const first %v)", dt, op, xa.Float(k), c, constFirst)
					})
				}
			}
		}
	}
}

// sameFloats requires got to hold want's bits element by element (any
// NaN for NaN); what names element k in a failure.
func sameFloats(t *testing.T, got, want *interp.Array, what func(k int64) string) {
	t.Helper()
	for k := int64(0); k < want.Len(); k++ {
		g, w := got.Float(k), want.Float(k)
		if math.IsNaN(w) != math.IsNaN(g) || !math.IsNaN(w) && math.Float64bits(g) != math.Float64bits(w) {
			t.Errorf("%s: C %g, interpreter %g", what(k), g, w)
		}
	}
}

// TestSelectHelper: a float Select whose arm loads memory is printed as
// a kiln_sel call (both arms evaluated, as TIR defines, so that the C
// compiler sees an unconditional load), and gives the interpreter's
// values on a clamped last-chunk load; a Select that could trap (an arm
// divides by a variable) or loads nothing keeps C's ?: operator.
func TestSelectHelper(t *testing.T) {
	const n = 10
	f := tir.NewPrimFunc("sel")
	x := f.AddBuffer(tir.NewBuffer("X", ir.Float32, ir.Shape{n}, ""))
	out := f.AddBuffer(tir.NewBuffer("Out", ir.Float32, ir.Shape{16}, ""))
	i := v32("i")
	ld := tir.NewLoad(x, tir.Min(i, tir.Idx(n-1)))
	e := tir.NewSelect(tir.LT(i, tir.Idx(n)), ld, tir.FloatConst(ir.Float32, 0))
	f.Body = tir.Loop(i, 16, tir.Vectorized, tir.NewStore(out, e, i))
	src := generate(t, HostOptions(), f)
	if !strings.Contains(src.Code, "kiln_sel_f32(") {
		t.Fatalf("a loading Select is not printed with kiln_sel_f32:\n%s", src.Code)
	}
	lib := openLib(t, src, BuildOptions{})
	xa := interp.NewArray(ir.Float32, n)
	for k := int64(0); k < n; k++ {
		xa.SetFloat(k, float64(k)+0.5)
	}
	want := interp.NewArray(ir.Float32, 16)
	if err := interp.Run(f, []any{xa, want}, nil); err != nil {
		t.Fatal(err)
	}
	tensors := tensorsFor(src.Funcs[0], []any{xa, interp.NewArray(ir.Float32, 16)})
	if st, err := lib.Call(src.Funcs[0].Symbol, tensors, -1); err != nil || st != 0 {
		t.Fatalf("status %d, %v", st, err)
	}
	sameFloats(t, &interp.Array{DType: ir.Float32, Data: tensors[1].Data}, want, func(k int64) string { return fmt.Sprintf("out[%d]", k) })

	d := v32("d")
	for name, sel := range map[string]*tir.Select{
		"variable divisor": tir.NewSelect(tir.LT(i, tir.Idx(n)), tir.NewLoad(x, tir.Div(i, d)), tir.FloatConst(ir.Float32, 0)),
		"no load":          tir.NewSelect(tir.LT(i, tir.Idx(n)), tir.FloatConst(ir.Float32, 1), tir.FloatConst(ir.Float32, 0)),
		"int":              tir.NewSelect(tir.LT(i, tir.Idx(n)), tir.NewCast(tir.Int32T, tir.NewLoad(x, i)), tir.Idx(0)),
	} {
		if h := selectHelper(sel); h != "" {
			t.Errorf("%s: printed with %s, want ?:", name, h)
		}
	}
	if h := selectHelper(tir.NewSelect(tir.LT(i, tir.Idx(n)), tir.NewLoad(x, tir.FloorDiv(i, tir.Idx(3))), tir.FloatConst(ir.Float32, 0))); h != "kiln_sel_f32" {
		t.Errorf("constant divisor: got %q, want kiln_sel_f32", h)
	}
}
