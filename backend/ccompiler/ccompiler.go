// Package ccompiler is the C-source external code generator of seed 002
// (TVM's "ccompiler" example): partitioning gives it the add, subtract and
// multiply calls of a model (float32, any rank, NumPy broadcasting), and
// its RelayToRuntime hook turns each partitioned function into C source —
// a body function computing the function, an unpacked wrapper over raw
// pointers and the packed entry point the executor calls — which the build
// compiles into the artifact's library (a runtime.CSourceModule).
// Constants of the function are emitted as static const arrays.
//
// It sits at the end of the pipeline's external branch:
//
//	partition (Supports) → build: RelayToRuntime (this package) → kiln_lib.so
package ccompiler

import (
	"fmt"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/backend/byoc"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
)

// Kind is the "ccompiler" target kind.
var Kind = &targets.Kind{
	Name:       "ccompiler",
	DeviceType: targets.CPU,
	Keys:       []string{"ccompiler", "cpu"},
	Doc:        "BYOC example: add, subtract and multiply generated as C source (seed 002)",
	Flow: &backend.Flow{
		Hooks:    byoc.CSourceHooks("ccompiler", emit),
		Supports: Supported,
	},
}

// Register adds Kind to r. Importing the package registers it in
// targets.Default.
func Register(r *targets.Registry) error { return r.Register(Kind) }

func init() {
	if err := Register(targets.Default); err != nil {
		panic(err) // another kind named ccompiler: a programming error
	}
}

// binary maps the supported operators to their C operator.
var binary = map[*op.Op]string{op.Add: "+", op.Subtract: "-", op.Multiply: "*"}

// Supported says whether ccompiler takes a call: add, subtract or
// multiply of float32 tensors.
func Supported(c *graph.Call) error {
	if _, ok := binary[c.Op]; !ok || c.Op == nil {
		return fmt.Errorf("%s is not supported (add, subtract, multiply only)", opName(c))
	}
	for i, a := range c.Args {
		tt, ok := a.Type().(*ir.TensorType)
		if !ok || tt.DType != ir.Float32 {
			return fmt.Errorf("%s: argument %d is %v, want float32", c.Op.Name, i, a.Type())
		}
	}
	return nil
}

func opName(c *graph.Call) string {
	if c.Op != nil {
		return c.Op.Name
	}
	return "function call"
}

// Generate returns the C translation unit of fn exported as symbol (the
// shared C-source base, byoc.CSource, with ccompiler's operators):
// SYMBOL_body (the computation over raw pointers, temporaries on the
// heap), SYMBOL_unpacked (inputs then outputs as float pointers) and
// SYMBOL (the packed entry point, which checks its arguments).
func Generate(fn *graph.Function, symbol string) (string, error) {
	m, err := byoc.CSource(fn, symbol, "ccompiler", emit)
	if err != nil {
		return "", err
	}
	return m.Code, nil
}

// emit writes the C of one add, subtract or multiply (byoc.COp).
func emit(w *byoc.CWriter, x *graph.Call, out string, args []string) error {
	sym, ok := binary[x.Op]
	if !ok || x.Op == nil || len(x.Args) != 2 {
		return fmt.Errorf("%s is not supported", opName(x))
	}
	oshape := x.Type().(*ir.TensorType).Shape
	as, bs := x.Args[0].Type().(*ir.TensorType).Shape, x.Args[1].Type().(*ir.TensorType).Shape
	n := oshape.NumElements()
	if as.Equal(oshape) && bs.Equal(oshape) {
		w.Line("for (int64_t i = 0; i < %d; ++i) %s[i] = %s[i] %s %s[i];", n, out, args[0], sym, args[1])
		return nil
	}
	// Broadcasting: decompose the flat output index and add each
	// dimension's contribution to the operands' offsets (stride 0 on
	// broadcast dimensions).
	w.Line("for (int64_t i = 0; i < %d; ++i) {", n)
	w.Line("  int64_t r = i, ia = 0, ib = 0, k;")
	astr, bstr := bcastStrides(as, oshape), bcastStrides(bs, oshape)
	for d := len(oshape) - 1; d >= 0; d-- {
		line := fmt.Sprintf("  k = r %% %d; r /= %d;", oshape[d], oshape[d])
		if astr[d] != 0 {
			line += fmt.Sprintf(" ia += k * %d;", astr[d])
		}
		if bstr[d] != 0 {
			line += fmt.Sprintf(" ib += k * %d;", bstr[d])
		}
		w.Line("%s", line)
	}
	w.Line("  (void)k; (void)r;")
	w.Line("  %s[i] = %s[ia] %s %s[ib];", out, args[0], sym, args[1])
	w.Line("}")
	return nil
}

// bcastStrides gives the element strides of an operand of shape s read at
// output index positions of shape out (right-aligned, 0 where s
// broadcasts).
func bcastStrides(s, out ir.Shape) []int64 {
	st := make([]int64, len(out))
	stride := int64(1)
	for i := len(s) - 1; i >= 0; i-- {
		d := len(out) - len(s) + i
		if s[i] != 1 {
			st[d] = stride
		}
		stride *= s[i]
	}
	return st
}
