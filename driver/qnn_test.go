package driver

import (
	"math"
	"math/rand"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// TestRequantizeDifferential: qnn.requantize compiled to C gives the
// reference executor's values bit for bit, per channel and per tensor,
// int8 and uint8, with ties, saturation, a fused clamp and accumulators
// at the ends of int32.
func TestRequantizeDifferential(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(5))
	const c = 6
	x := tensor.New(ir.Int32, ir.Shape{2, c, 3, 5})
	xs := x.Int32s()
	for i := range xs {
		switch i % 7 {
		case 0:
			xs[i] = int32(rng.Intn(9)-4) * 1024 // multiples of 2^10: exact ties below
		case 1:
			xs[i] = []int32{math.MaxInt32, math.MinInt32, -1, 1}[rng.Intn(4)]
		default:
			xs[i] = int32(rng.Intn(1<<20) - 1<<19)
		}
	}
	for _, tc := range []struct {
		name   string
		scales []float64
		attrs  ir.Attrs
	}{
		{"per channel uint8", []float64{0.5 / 1024, 3.0 / 1024, 1e-3, 2e-4, 0.07, 1.5 / 1024}, ir.Attrs{"out_zero_point": int64(128), "out_dtype": ir.Uint8}},
		{"per tensor int8", []float64{1.0 / 2048}, ir.Attrs{"out_zero_point": int64(-3), "out_dtype": ir.Int8}},
		{"fused relu6", []float64{1e-3, 2e-3, 3e-3, 4e-3, 5e-3, 6e-3}, ir.Attrs{"out_zero_point": int64(-128), "out_min": int64(-128), "out_max": int64(20), "out_dtype": ir.Int8}},
		{"large scale", []float64{3.5}, ir.Attrs{"out_dtype": ir.Uint8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mult, shift, err := op.RequantizeParams(tc.scales)
			if err != nil {
				t.Fatal(err)
			}
			shape := ir.Shape{}
			if len(mult) > 1 {
				shape = ir.Shape{c, 1, 1}
			}
			m := tensor.New(ir.Int32, shape)
			for i, v := range mult {
				m.Int32s()[i] = int32(v)
			}
			attrs := ir.Attrs{"shift": shift}
			for k, v := range tc.attrs {
				attrs[k] = v
			}
			in := graph.NewVar("x", x.Type())
			call, err := graph.NewCall(op.Requantize, []graph.Expr{in, graph.NewConstant(m)}, attrs)
			if err != nil {
				t.Fatal(err)
			}
			mod, want := refOfCall(t, in, call, x)
			got, _ := compileRun(t, mod, hostTarget(t), map[string]*tensor.Tensor{"x": x})
			w := want.Flatten()[0]
			if !got[0].Equal(w) {
				t.Fatalf("compiled %v\nreference %v", got[0].Data[:40], w.Data[:40])
			}
			// The reference is round(x * scale) + zero point, clamped, to
			// within one step for scales that a 31-bit multiplier rounds.
			lo, hi := op.RequantizeRange(call.Attrs) // with the defaults filled in
			zp := call.Attrs.Int("out_zero_point")
			for i, v := range xs {
				ch := 0
				if len(mult) > 1 {
					ch = (i / 15) % c
				}
				real := math.RoundToEven(float64(v)*tc.scales[ch]) + float64(zp)
				exp := int64(math.Min(math.Max(real, float64(lo)), float64(hi)))
				if d := w.Int(i) - exp; d < -1 || d > 1 {
					t.Fatalf("element %d: x %d scale %g: got %d, want %d", i, v, tc.scales[ch], w.Int(i), exp)
				}
			}
		})
	}
}

// TestRequantizeShifts: qnn.requantize compiled to C gives the reference
// executor's values for multipliers and shifts at their ends (shift 1
// and 62, multipliers of either sign up to -2^31, products up to 2^62),
// which the generated code's biased logical shift must floor exactly.
func TestRequantizeShifts(t *testing.T) {
	testenv.Cgo(t)
	vals := []int32{math.MaxInt32, math.MinInt32, math.MinInt32 + 1, -1, 0, 1, 2, 3, -2, -3, 1 << 30, -(1 << 30), 12345, -12345, 255, -256}
	x := tensor.New(ir.Int32, ir.Shape{int64(len(vals))})
	copy(x.Int32s(), vals)
	for _, tc := range []struct {
		m     int32
		shift int64
	}{
		{math.MinInt32, 62}, {math.MaxInt32, 62}, {1, 1}, {-1, 1}, {3, 2}, {1 << 30, 31}, {-(1 << 30) + 1, 40}, {math.MinInt32, 32},
	} {
		m := tensor.New(ir.Int32, ir.Shape{})
		m.Int32s()[0] = tc.m
		in := graph.NewVar("x", x.Type())
		call, err := graph.NewCall(op.Requantize, []graph.Expr{in, graph.NewConstant(m)},
			ir.Attrs{"shift": tc.shift, "out_zero_point": int64(-3), "out_dtype": ir.Int8})
		if err != nil {
			t.Fatal(err)
		}
		mod, want := refOfCall(t, in, call, x)
		got, _ := compileRun(t, mod, hostTarget(t), map[string]*tensor.Tensor{"x": x})
		if w := want.Flatten()[0]; !got[0].Equal(w) {
			t.Errorf("multiplier %d shift %d: compiled %v, reference %v", tc.m, tc.shift, got[0].Data, w.Data)
		}
	}
}
