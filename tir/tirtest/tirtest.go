// Package tirtest holds example PrimFuncs and helpers for testing TIR
// passes and code generators: every example is a small, typical loop nest
// (elementwise, matmul, guarded padding, scratch allocation, extern
// calls), RandomArgs fills its buffers, and Equivalent runs two functions
// on the same inputs with the interpreter and compares every buffer bit
// for bit.
package tirtest

import (
	"bytes"
	"fmt"
	"github.com/kiln-dev/kiln/targets"
	"math"
	"math/rand"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/interp"
)

// Example is a named constructor of a fresh PrimFunc.
type Example struct {
	Name  string
	Build func() *tir.PrimFunc
}

// Examples lists every example function in a fixed order.
var Examples = []Example{
	{"elementwise_add", ElementwiseAdd},
	{"matmul", Matmul},
	{"relu_scratch", ReluScratch},
	{"maxpool_pad", MaxPoolPad},
	{"int_arith", IntArith},
	{"extern_rows", ExternRows},
	{"redundant", Redundant},
}

func v32(name string) *tir.Var { return tir.NewVar(name, tir.Int32T) }

// ElementwiseAdd is C[i, j] = A[i, j] + B[i, j] over 4x8 float32 buffers.
func ElementwiseAdd() *tir.PrimFunc {
	f := tir.NewPrimFunc("elementwise_add")
	a := f.AddBuffer(tir.NewBuffer("A", ir.Float32, ir.Shape{4, 8}, ""))
	b := f.AddBuffer(tir.NewBuffer("B", ir.Float32, ir.Shape{4, 8}, ""))
	c := f.AddBuffer(tir.NewBuffer("C", ir.Float32, ir.Shape{4, 8}, ""))
	i, j := v32("i"), v32("j")
	f.Body = tir.Loop(i, 4, tir.Parallel, tir.Loop(j, 8, tir.Vectorized,
		tir.NewStore(c, tir.Add(tir.NewLoad(a, i, j), tir.NewLoad(b, i, j)), i, j)))
	return f
}

// Matmul is C = A x B for A 3x4, B 4x5 (float32), with an unrolled
// reduction loop.
func Matmul() *tir.PrimFunc {
	f := tir.NewPrimFunc("matmul")
	a := f.AddBuffer(tir.NewBuffer("A", ir.Float32, ir.Shape{3, 4}, ""))
	b := f.AddBuffer(tir.NewBuffer("B", ir.Float32, ir.Shape{4, 5}, ""))
	c := f.AddBuffer(tir.NewBuffer("C", ir.Float32, ir.Shape{3, 5}, ""))
	i, j, k := v32("i"), v32("j"), v32("k")
	f.Body = tir.Loop(i, 3, tir.Serial, tir.Loop(j, 5, tir.Serial, tir.Seq(
		tir.NewStore(c, tir.Float32(0), i, j),
		tir.Loop(k, 4, tir.Unrolled,
			tir.NewStore(c, tir.Add(tir.NewLoad(c, i, j), tir.Mul(tir.NewLoad(a, i, k), tir.NewLoad(b, k, j))), i, j)),
	)))
	return f
}

// ReluScratch computes a leaky ReLU of a 2x6 buffer into a local scratch
// buffer with an if/else, then doubles it into the output via a let.
func ReluScratch() *tir.PrimFunc {
	f := tir.NewPrimFunc("relu_scratch")
	a := f.AddBuffer(tir.NewBuffer("A", ir.Float32, ir.Shape{2, 6}, ""))
	out := f.AddBuffer(tir.NewBuffer("B", ir.Float32, ir.Shape{2, 6}, ""))
	tmp := tir.NewBuffer("tmp", ir.Float32, ir.Shape{6}, tir.ScopeLocal)
	i, j, j2 := v32("i"), v32("j"), v32("j")
	x := tir.NewVar("x", tir.Float32T)
	f.Body = tir.Loop(i, 2, tir.Serial, &tir.Allocate{Buffer: tmp, Body: tir.Seq(
		tir.Loop(j, 6, tir.Serial, tir.NewLet(x, tir.NewLoad(a, i, j),
			tir.NewIf(tir.GT(x, tir.Float32(0)),
				tir.NewStore(tmp, x, j),
				tir.NewStore(tmp, tir.Mul(x, tir.Float32(0.125)), j)))),
		tir.Loop(j2, 6, tir.Serial,
			tir.NewStore(out, tir.Mul(tir.NewLoad(tmp, j2), tir.Float32(2)), i, j2)),
	)})
	return f
}

// MaxPoolPad is a 1-D max pool (window 3, stride 2, padding 1) over a 2x9
// float32 input, guarding padded reads with if_then_else, plus exp of the
// result into a second output.
func MaxPoolPad() *tir.PrimFunc {
	f := tir.NewPrimFunc("maxpool_pad")
	in := f.AddBuffer(tir.NewBuffer("X", ir.Float32, ir.Shape{2, 9}, ""))
	out := f.AddBuffer(tir.NewBuffer("Y", ir.Float32, ir.Shape{2, 5}, ""))
	ex := f.AddBuffer(tir.NewBuffer("E", ir.Float32, ir.Shape{2, 5}, ""))
	n, o, k := v32("n"), v32("o"), v32("k")
	pos := tir.Sub(tir.Add(tir.Mul(o, tir.Idx(2)), k), tir.Idx(1))
	inBounds := tir.And(tir.GE(pos, tir.Idx(0)), tir.LT(pos, tir.Idx(9)))
	val := tir.IfThenElseExpr(inBounds, tir.NewLoad(in, n, pos), tir.Float32(math.Inf(-1)))
	f.Body = tir.Loop(n, 2, tir.Serial, tir.Loop(o, 5, tir.Serial, tir.Seq(
		tir.NewStore(out, tir.Float32(math.Inf(-1)), n, o),
		tir.Loop(k, 3, tir.Serial, tir.NewStore(out, tir.Max(tir.NewLoad(out, n, o), val), n, o)),
		tir.NewStore(ex, tir.NewCall(tir.IntrinExp, tir.NewLoad(out, n, o)), n, o),
	)))
	return f
}

// IntArith exercises integer semantics: truncating and floor division and
// modulo of negative values, casts, Select and Min on an int32 buffer,
// with a 3-D output indexed through a row offset.
func IntArith() *tir.PrimFunc {
	f := tir.NewPrimFunc("int_arith")
	a := f.AddBuffer(tir.NewBuffer("A", ir.Int32, ir.Shape{12}, ""))
	out := f.AddBuffer(tir.NewBuffer("Out", ir.Int32, ir.Shape{2, 3, 4}, ""))
	fl := f.AddBuffer(tir.NewBuffer("F", ir.Float32, ir.Shape{12}, ""))
	i := v32("i")
	x := tir.Sub(tir.NewLoad(a, i), tir.Idx(7))
	q := tir.Bin(tir.OpAdd, tir.Bin(tir.OpDiv, x, tir.Idx(3)), tir.Bin(tir.OpMod, x, tir.Idx(3)))
	r := tir.Bin(tir.OpAdd, tir.Bin(tir.OpFloorDiv, x, tir.Idx(3)), tir.Bin(tir.OpFloorMod, x, tir.Idx(3)))
	sel := tir.NewSelect(tir.Bin(tir.OpLT, x, tir.Idx(0)), tir.Min(q, r), tir.Bin(tir.OpMul, q, tir.Idx(1)))
	f.Body = tir.Loop(i, 12, tir.Serial, tir.Seq(
		tir.NewStore(out, sel, tir.FloorDiv(i, tir.Idx(6)), tir.FloorMod(tir.FloorDiv(i, tir.Idx(2)), tir.Idx(3)), tir.Bin(tir.OpAdd, tir.FloorMod(i, tir.Idx(2)), tir.Idx(0))),
		tir.NewStore(fl, tir.NewCast(tir.Float32T, tir.NewCast(tir.Scalar(ir.Int8), tir.Bin(tir.OpMul, x, tir.Idx(37)))), i),
	))
	return f
}

// ExternRows calls the external kernel "vadd_f32(dst, a, b, n)" once per
// row of 3x4 float32 buffers, passing row pointers with address_of, then
// scales the result in TIR.
func ExternRows() *tir.PrimFunc {
	f := tir.NewPrimFunc("extern_rows")
	a := f.AddBuffer(tir.NewBuffer("A", ir.Float32, ir.Shape{3, 4}, ""))
	b := f.AddBuffer(tir.NewBuffer("B", ir.Float32, ir.Shape{3, 4}, ""))
	c := f.AddBuffer(tir.NewBuffer("C", ir.Float32, ir.Shape{3, 4}, ""))
	r, j := v32("r"), v32("j")
	row := func(buf *tir.Buffer) tir.PrimExpr { return tir.AddressOf(tir.NewLoad(buf, r, tir.Idx(0))) }
	f.Body = tir.Loop(r, 3, tir.Serial, tir.Seq(
		tir.Eval(tir.CallExternOf(tir.Void, "vadd_f32", row(c), row(a), row(b), tir.Idx(4))),
		tir.Loop(j, 4, tir.Serial, tir.NewStore(c, tir.Mul(tir.NewLoad(c, r, j), tir.Float32(3)), r, j)),
	))
	f.Target = hostTarget()
	return f
}

// Redundant is full of what Simplify and RemoveNoOp remove: x*1, x+0,
// constant conditions, zero-extent and empty loops, an extent-1 loop,
// and constant arithmetic.
func Redundant() *tir.PrimFunc {
	f := tir.NewPrimFunc("redundant")
	a := f.AddBuffer(tir.NewBuffer("A", ir.Float32, ir.Shape{8}, ""))
	b := f.AddBuffer(tir.NewBuffer("B", ir.Float32, ir.Shape{8}, ""))
	i, z, e, one := v32("i"), v32("z"), v32("e"), v32("one")
	idx := tir.Bin(tir.OpAdd, tir.Bin(tir.OpMul, i, tir.Idx(1)), tir.Bin(tir.OpMul, tir.Idx(2), tir.Idx(0)))
	f.Body = tir.Seq(
		tir.Loop(z, 0, tir.Serial, tir.NewStore(b, tir.Float32(1), z)),
		tir.Loop(i, 8, tir.Serial, tir.Seq(
			tir.NewIf(tir.Bin(tir.OpLT, tir.Idx(3), tir.Bin(tir.OpAdd, tir.Idx(1), tir.Idx(1))),
				tir.NewStore(b, tir.Float32(-1), i), nil),
			tir.NewStore(b, tir.Bin(tir.OpMul, tir.NewLoad(a, idx), tir.Float32(1)), idx),
			tir.Eval(tir.Idx(0)),
		)),
		tir.Loop(e, 4, tir.Serial, tir.Seq()),
		tir.Loop(one, 1, tir.Serial, tir.NewStore(b, tir.Bin(tir.OpAdd, tir.NewLoad(b, tir.Bin(tir.OpAdd, one, tir.Idx(7))), tir.Float32(0.5)), tir.Bin(tir.OpAdd, one, tir.Idx(7)))),
	)
	return f
}

// Externs are Go implementations of the external functions the examples
// call.
var Externs = map[string]interp.Extern{
	"vadd_f32": func(args []interp.Value) (interp.Value, error) {
		if len(args) != 4 {
			return interp.Value{}, fmt.Errorf("vadd_f32 takes 4 arguments, got %d", len(args))
		}
		dst, a, b, n := args[0], args[1], args[2], args[3].I
		for k := int64(0); k < n; k++ {
			dst.Mem.SetFloat(dst.Off+k, float64(float32(a.Mem.Float(a.Off+k))+float32(b.Mem.Float(b.Off+k))))
		}
		return interp.Value{}, nil
	},
}

// RandomArgs returns arguments for f: each buffer parameter gets an array
// of its span filled with random values (floats in [-4, 4), integers in
// [-20, 20), bools 0/1); scalar integer parameters get 3.
func RandomArgs(f *tir.PrimFunc, rng *rand.Rand) []any {
	args := make([]any, len(f.Params))
	for i, p := range f.Params {
		b, ok := f.BufferMap[p]
		if !ok {
			args[i] = int64(3)
			continue
		}
		arr := interp.NewArray(b.DType, b.Span())
		for k := int64(0); k < arr.Len(); k++ {
			switch {
			case b.DType.IsFloat():
				arr.SetFloat(k, rng.Float64()*8-4)
			case b.DType == ir.Bool:
				arr.SetInt(k, int64(rng.Intn(2)))
			default:
				arr.SetInt(k, int64(rng.Intn(40)-20))
			}
		}
		args[i] = arr
	}
	return args
}

func cloneArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if arr, ok := a.(*interp.Array); ok {
			out[i] = arr.Clone()
		} else {
			out[i] = a
		}
	}
	return out
}

// Equivalent runs before and after (which must have the same parameter
// list shape) on `trials` sets of random inputs and reports the first
// difference in any buffer, byte for byte, or an execution error.
func Equivalent(before, after *tir.PrimFunc, trials int, seed int64) error {
	if len(before.Params) != len(after.Params) {
		return fmt.Errorf("parameter counts differ: %d vs %d", len(before.Params), len(after.Params))
	}
	rng := rand.New(rand.NewSource(seed))
	opts := &interp.Options{Externs: Externs}
	for t := 0; t < trials; t++ {
		args := RandomArgs(before, rng)
		a1, a2 := cloneArgs(args), cloneArgs(args)
		if err := interp.Run(before, a1, opts); err != nil {
			return fmt.Errorf("before: %w", err)
		}
		if err := interp.Run(after, a2, opts); err != nil {
			return fmt.Errorf("after: %w", err)
		}
		for i := range a1 {
			x, ok := a1[i].(*interp.Array)
			if !ok {
				continue
			}
			y := a2[i].(*interp.Array)
			if !bytes.Equal(x.Data, y.Data) {
				for k := int64(0); k < x.Len(); k++ {
					if x.Float(k) != y.Float(k) && !(math.IsNaN(x.Float(k)) && math.IsNaN(y.Float(k))) {
						return fmt.Errorf("trial %d: parameter %s element %d: before %v, after %v", t, before.Params[i].Name, k, x.Float(k), y.Float(k))
					}
				}
				return fmt.Errorf("trial %d: parameter %s differs bitwise", t, before.Params[i].Name)
			}
		}
	}
	return nil
}

// hostTarget is the default `c` target the helpers' functions carry.
func hostTarget() *targets.Target {
	t, err := targets.New(targets.C, nil)
	if err != nil {
		panic(err) // the c kind's defaults are valid
	}
	return t
}
