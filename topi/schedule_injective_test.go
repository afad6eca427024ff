package topi

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/topi/topitest"
)

// TestScheduleInjectiveKeepsCostlyBroadcast checks the decomposed layer
// norm tail x / sqrt(v + eps): the sqrt of the [rows, 1] operand stays at
// the root (computed once per row) while the cheap add is inlined, for
// rows of 32 (kept) and rows of 8 (too short to keep: inlined), and the
// result matches a direct computation either way.
func TestScheduleInjectiveKeepsCostlyBroadcast(t *testing.T) {
	for _, c := range []struct {
		cols int64
		kept bool
	}{{32, true}, {8, false}} {
		xs, vs := ir.Shape{4, c.cols}, ir.Shape{4, 1}
		impl := strategy.Implementation{Name: "layer_norm_tail", Compute: func(_ *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
			x, v := in[0], in[1]
			add := te.Compute("var_eps", vs, func(i []tir.PrimExpr) tir.PrimExpr {
				return tir.Add(v.At(i...), tir.FloatConst(ir.Float32, 1e-5))
			})
			sq := te.Compute("std_dev", vs, func(i []tir.PrimExpr) tir.PrimExpr { return tir.NewCall(tir.IntrinSqrt, add.At(i...)) })
			out := te.Compute("normed", xs, func(i []tir.PrimExpr) tir.PrimExpr {
				return tir.Div(x.At(i...), sq.At(i[0], tir.Idx(0)))
			})
			return []*te.Tensor{out}, nil
		}, Schedule: ScheduleInjective}
		call := &strategy.Call{Op: op.Divide, ArgTypes: []ir.Type{ir.NewTensorType(nnTF32, xs), ir.NewTensorType(nnTF32, vs)},
			OutType: ir.NewTensorType(nnTF32, xs), Target: topitest.HostTarget()}
		f, err := topitest.Lower(call, impl)
		if err != nil {
			t.Fatal(err)
		}
		text := f.String()
		if got := strings.Contains(text, "std_dev"); got != c.kept {
			t.Errorf("cols %d: std_dev buffer present %v, want %v:\n%s", c.cols, got, c.kept, text)
		}
		if strings.Contains(text, "var_eps") {
			t.Errorf("cols %d: var_eps was not inlined:\n%s", c.cols, text)
		}
		rng := rand.New(rand.NewSource(3))
		x := topitest.Rand(rng, nnTF32, xs)
		v := topitest.Rand(rng, nnTF32, vs)
		for i, f := range v.Float32s() {
			v.Float32s()[i] = float32(math.Abs(float64(f))) + 0.5
		}
		outs, err := topitest.Run(call, impl, []*tensor.Tensor{x, v})
		if err != nil {
			t.Fatal(err)
		}
		got := outs[0].Float32s()
		for r := 0; r < 4; r++ {
			d := float32(math.Sqrt(float64(v.Float32s()[r] + 1e-5)))
			for k := 0; k < int(c.cols); k++ {
				want := x.Float32s()[r*int(c.cols)+k] / d
				if g := got[r*int(c.cols)+k]; math.Abs(float64(g-want)) > 1e-6*math.Abs(float64(want))+1e-7 {
					t.Fatalf("cols %d: [%d,%d] = %v, want %v", c.cols, r, k, g, want)
				}
			}
		}
	}
}

// TestScheduleInjectiveByteRows: an injective stage writing bytes in rows
// shorter than byteMinRow fuses its last two axes into the vectorised
// loop, without splitting it into pieces shorter than byteMinRow (uint8
// [3, 14, 14]: one loop of 196; [2, 28, 28]: 784, not 49 x 16), and
// computes the same values; a float32 output keeps its rows of 14.
func TestScheduleInjectiveByteRows(t *testing.T) {
	for _, c := range []struct {
		shape ir.Shape
		dt    ir.DType
		loop  string
	}{
		{ir.Shape{3, 14, 14}, ir.Uint8, "T.vectorized(196)"},
		{ir.Shape{2, 28, 28}, ir.Int8, "T.vectorized(784)"},
		{ir.Shape{3, 14, 14}, nnTF32, "T.vectorized(14)"},
	} {
		shape, dt := c.shape, c.dt
		impl := strategy.Implementation{Name: "byte_rows", Compute: func(_ *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
			x := in[0]
			out := te.Compute("scaled", shape, func(i []tir.PrimExpr) tir.PrimExpr {
				// (x - 3) * 5 + 7 through int64, as a requantization's
				// product is.
				v := tir.Add(tir.Mul(tir.Sub(tir.NewCast(tir.Scalar(ir.Int64), x.At(i...)), tir.IntConst(ir.Int64, 3)), tir.IntConst(ir.Int64, 5)), tir.IntConst(ir.Int64, 7))
				return tir.NewCast(tir.Scalar(dt), v)
			})
			return []*te.Tensor{out}, nil
		}, Schedule: ScheduleInjective}
		call := &strategy.Call{Op: op.Add, ArgTypes: []ir.Type{ir.NewTensorType(ir.Uint8, shape)},
			OutType: ir.NewTensorType(dt, shape), Target: topitest.HostTarget()}
		f, err := topitest.Lower(call, impl)
		if err != nil {
			t.Fatal(err)
		}
		if text := f.String(); !strings.Contains(text, c.loop) {
			t.Errorf("%s %v: want %s:\n%s", dt, shape, c.loop, text)
		}
		x := tensor.New(ir.Uint8, shape)
		for i := range x.Data {
			x.Data[i] = byte(i * 7)
		}
		outs, err := topitest.Run(call, impl, []*tensor.Tensor{x})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < x.Len(); i++ {
			v := (int64(x.Data[i])-3)*5 + 7
			want := float64(v)
			switch dt {
			case ir.Uint8:
				want = float64(uint8(v))
			case ir.Int8:
				want = float64(int8(v))
			}
			if g := outs[0].Float(i); g != want {
				t.Fatalf("%s %v: element %d is %v, want %v", dt, shape, i, g, want)
			}
		}
	}
}

// TestScheduleInjectiveShortOuter: an injective stage whose first loop
// is short (an image's three channels) fuses it with the next into its
// parallel loop, so that threads share the work evenly; a first loop of
// 16 or more stays the parallel loop alone. The values are those of a
// direct computation either way.
func TestScheduleInjectiveShortOuter(t *testing.T) {
	for _, c := range []struct {
		shape ir.Shape
		loop  string
	}{
		{ir.Shape{1, 3, 40, 64}, "T.parallel(120)"},
		{ir.Shape{1, 16, 40, 64}, "T.parallel(16)"},
	} {
		shape := c.shape
		impl := strategy.Implementation{Name: "short_outer", Compute: func(_ *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
			x := in[0]
			return []*te.Tensor{te.Compute("scaled", shape, func(i []tir.PrimExpr) tir.PrimExpr {
				return tir.Add(tir.Mul(x.At(i...), tir.FloatConst(nnTF32, 3)), tir.FloatConst(nnTF32, 1))
			})}, nil
		}, Schedule: ScheduleInjective}
		call := &strategy.Call{Op: op.Add, ArgTypes: []ir.Type{ir.NewTensorType(nnTF32, shape)},
			OutType: ir.NewTensorType(nnTF32, shape), Target: topitest.HostTarget()}
		f, err := topitest.Lower(call, impl)
		if err != nil {
			t.Fatal(err)
		}
		if text := f.String(); !strings.Contains(text, c.loop) {
			t.Errorf("%v: want %s:\n%s", shape, c.loop, text)
		}
		rng := rand.New(rand.NewSource(4))
		x := topitest.Rand(rng, nnTF32, shape)
		outs, err := topitest.Run(call, impl, []*tensor.Tensor{x})
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range x.Float32s() {
			if g, want := outs[0].Float32s()[i], v*3+1; g != want {
				t.Fatalf("%v: element %d is %v, want %v", shape, i, g, want)
			}
		}
	}
}
