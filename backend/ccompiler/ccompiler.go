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
	"math"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/escape"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/targets"
)

// Kind is the "ccompiler" target kind.
var Kind = &targets.Kind{
	Name:       "ccompiler",
	DeviceType: targets.CPU,
	Keys:       []string{"ccompiler", "cpu"},
	Doc:        "BYOC example: add, subtract and multiply generated as C source (seed 002)",
	Flow: &backend.Flow{
		Hooks:    backend.Hooks{RelayToRuntime: relayToRuntime},
		Supports: Supported,
	},
}

// Register adds Kind to r.
func Register(r *targets.Registry) error { return r.Register(Kind) }

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

// relayToRuntime generates the C source of one partitioned function.
func relayToRuntime(_ *backend.HookContext, fn *graph.Function, symbol string) (runtime.Module, error) {
	code, decl, err := generate(fn, symbol)
	if err != nil {
		return nil, err
	}
	return &runtime.CSourceModule{Label: "ccompiler_" + symbol, Code: code, Funcs: []string{symbol},
		Unpacked: map[string]runtime.UnpackedFunc{symbol: {Symbol: symbol + "_unpacked", Decl: decl}}}, nil
}

// gen is the state of one function's generation.
type gen struct {
	fn     *graph.Function
	sym    string
	names  map[graph.Expr]string
	consts strings.Builder
	body   strings.Builder
	temps  []string // heap temporaries to free
	n      int
	// unpackedDecl is the prototype of SYMBOL_unpacked, once generated.
	unpackedDecl string
}

// Generate returns the C translation unit of fn exported as symbol:
// SYMBOL_body (the computation over raw pointers, temporaries on the
// heap), SYMBOL_unpacked (inputs then outputs as float pointers) and
// SYMBOL (the packed entry point, which checks its arguments).
func Generate(fn *graph.Function, symbol string) (string, error) {
	code, _, err := generate(fn, symbol)
	return code, err
}

// generate is Generate that also returns the unpacked function's
// prototype.
func generate(fn *graph.Function, symbol string) (code, unpackedDecl string, err error) {
	if !escape.IsCIdent(symbol) {
		return "", "", fmt.Errorf("ccompiler: symbol %q is not a C identifier", symbol)
	}
	g := &gen{fn: fn, sym: symbol, names: map[graph.Expr]string{}}
	code, err = g.generate()
	return code, g.unpackedDecl, err
}

// generate writes the translation unit (see Generate).
func (g *gen) generate() (string, error) {
	fn, symbol := g.fn, g.sym
	var params []string
	for i, p := range fn.Params {
		tt, ok := p.Type().(*ir.TensorType)
		if !ok || tt.DType != ir.Float32 {
			return "", fmt.Errorf("ccompiler: @%s parameter %%%s is %v, want a float32 tensor", symbol, p.Name, p.Type())
		}
		name := "in" + strconv.Itoa(i)
		g.names[p] = name
		params = append(params, "const float* restrict "+name)
	}
	outs, err := outputs(fn.Body)
	if err != nil {
		return "", fmt.Errorf("ccompiler: @%s: %w", symbol, err)
	}
	outName := map[graph.Expr]string{}
	for i, o := range outs {
		outName[o] = "out" + strconv.Itoa(i)
		params = append(params, "float* restrict out"+strconv.Itoa(i))
	}
	var genErr error
	graph.PostOrder(fn.Body, func(e graph.Expr) {
		if genErr != nil {
			return
		}
		genErr = g.node(e, outName)
	})
	if genErr != nil {
		return "", fmt.Errorf("ccompiler: @%s: %w", symbol, genErr)
	}
	// An output that is an input or a constant (no op computed it) is copied.
	for _, o := range outs {
		if src := g.names[o]; src != outName[o] {
			fmt.Fprintf(&g.body, "  memcpy(%s, %s, %d * sizeof(float));\n", outName[o], src, numel(o))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "/* Generated by kiln backend/ccompiler for %s. */\n", symbol)
	b.WriteString("#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n#include \"kiln/c_runtime_api.h\"\n\n")
	b.WriteString(g.consts.String())
	fmt.Fprintf(&b, "static int32_t %s_body(%s) {\n", symbol, strings.Join(params, ", "))
	b.WriteString(g.body.String())
	for i := len(g.temps) - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "  free(%s);\n", g.temps[i])
	}
	b.WriteString("  return 0;\n}\n\n")
	// Unpacked wrapper.
	var uparams, uargs []string
	for i := range fn.Params {
		uparams = append(uparams, fmt.Sprintf("float* in%d", i))
		uargs = append(uargs, fmt.Sprintf("in%d", i))
	}
	for i := range outs {
		uparams = append(uparams, fmt.Sprintf("float* out%d", i))
		uargs = append(uargs, fmt.Sprintf("out%d", i))
	}
	g.unpackedDecl = fmt.Sprintf("int32_t %s_unpacked(%s)", symbol, strings.Join(uparams, ", "))
	fmt.Fprintf(&b, "%s;\n", g.unpackedDecl)
	fmt.Fprintf(&b, "int32_t %s_unpacked(%s) {\n  return %s_body(%s);\n}\n\n", symbol, strings.Join(uparams, ", "), symbol, strings.Join(uargs, ", "))
	// Packed entry point.
	all := make([]graph.Expr, 0, len(fn.Params)+len(outs))
	for _, p := range fn.Params {
		all = append(all, p)
	}
	all = append(all, outs...)
	fmt.Fprintf(&b, "int32_t %s(kiln_tensor* args, int32_t num_args);\n", symbol)
	fmt.Fprintf(&b, "int32_t %s(kiln_tensor* args, int32_t num_args) {\n", symbol)
	fmt.Fprintf(&b, "  if (num_args != %d) { kiln_set_last_error(\"%s: expected %d arguments\"); return -1; }\n", len(all), symbol, len(all))
	for i, e := range all {
		tt := e.Type().(*ir.TensorType)
		fmt.Fprintf(&b, "  if (args[%d].dtype_code != KILN_FLOAT || args[%d].dtype_bits != 32 || args[%d].ndim != %d", i, i, i, len(tt.Shape))
		for d, n := range tt.Shape {
			fmt.Fprintf(&b, " || args[%d].shape[%d] != %d", i, d, n)
		}
		fmt.Fprintf(&b, ") { kiln_set_last_error(\"%s: argument %d must be float32%s\"); return -1; }\n", symbol, i, shapeText(tt.Shape))
	}
	fmt.Fprintf(&b, "  return %s_unpacked(", symbol)
	for i := range all {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(float*)args[%d].data", i)
	}
	b.WriteString(");\n}\n")
	return b.String(), nil
}

// outputs flattens the function's result into its tensor outputs.
func outputs(body graph.Expr) ([]graph.Expr, error) {
	if t, ok := body.(*graph.Tuple); ok {
		var out []graph.Expr
		for _, f := range t.Fields {
			if _, nested := f.(*graph.Tuple); nested {
				return nil, fmt.Errorf("nested tuple results are not supported")
			}
			out = append(out, f)
		}
		return out, nil
	}
	return []graph.Expr{body}, nil
}

func numel(e graph.Expr) int64 { return e.Type().(*ir.TensorType).Shape.NumElements() }

func shapeText(s ir.Shape) string {
	parts := make([]string, len(s))
	for i, n := range s {
		parts[i] = strconv.FormatInt(n, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// node emits the C of one expression of the body.
func (g *gen) node(e graph.Expr, outName map[graph.Expr]string) error {
	switch x := e.(type) {
	case *graph.Var, *graph.Tuple:
		return nil
	case *graph.Constant:
		if x.Value.DType != ir.Float32 {
			return fmt.Errorf("constant of dtype %s, want float32", x.Value.DType)
		}
		name := fmt.Sprintf("%s_const%d", g.sym, g.n)
		g.n++
		vals := x.Value.Float32s()
		fmt.Fprintf(&g.consts, "static const float %s[%d] = {", name, max(len(vals), 1))
		for i, v := range vals {
			if i > 0 {
				g.consts.WriteString(", ")
			}
			g.consts.WriteString(floatLit(v))
		}
		if len(vals) == 0 {
			g.consts.WriteString("0")
		}
		g.consts.WriteString("};\n\n")
		g.names[e] = name
		return nil
	case *graph.Call:
		sym, ok := binary[x.Op]
		if !ok || x.Op == nil || len(x.Args) != 2 {
			return fmt.Errorf("%s is not supported", opName(x))
		}
		out, isOut := outName[e]
		if !isOut {
			out = fmt.Sprintf("t%d", g.n)
			g.n++
			fmt.Fprintf(&g.body, "  float* %s = (float*)malloc(%d * sizeof(float));\n", out, max(numel(e), 1))
			fmt.Fprintf(&g.body, "  if (%s == NULL) { kiln_set_last_error(\"%s: out of memory\"); return -1; }\n", out, g.sym)
			g.temps = append(g.temps, out)
		}
		g.names[e] = out
		oshape := e.Type().(*ir.TensorType).Shape
		a, b := x.Args[0], x.Args[1]
		as, bs := a.Type().(*ir.TensorType).Shape, b.Type().(*ir.TensorType).Shape
		n := oshape.NumElements()
		if as.Equal(oshape) && bs.Equal(oshape) {
			fmt.Fprintf(&g.body, "  for (int64_t i = 0; i < %d; ++i) %s[i] = %s[i] %s %s[i];\n", n, out, g.names[a], sym, g.names[b])
			return nil
		}
		// Broadcasting: decompose the flat output index and add each
		// dimension's contribution to the operands' offsets (stride 0 on
		// broadcast dimensions).
		fmt.Fprintf(&g.body, "  for (int64_t i = 0; i < %d; ++i) {\n    int64_t r = i, ia = 0, ib = 0, k;\n", n)
		astr, bstr := bcastStrides(as, oshape), bcastStrides(bs, oshape)
		for d := len(oshape) - 1; d >= 0; d-- {
			fmt.Fprintf(&g.body, "    k = r %% %d; r /= %d;", oshape[d], oshape[d])
			if astr[d] != 0 {
				fmt.Fprintf(&g.body, " ia += k * %d;", astr[d])
			}
			if bstr[d] != 0 {
				fmt.Fprintf(&g.body, " ib += k * %d;", bstr[d])
			}
			g.body.WriteString("\n")
		}
		fmt.Fprintf(&g.body, "    (void)k; (void)r;\n    %s[i] = %s[ia] %s %s[ib];\n  }\n", out, g.names[a], sym, g.names[b])
		return nil
	}
	return fmt.Errorf("unexpected %T", e)
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

// floatLit prints a float32 exactly (hex float for non-integers).
func floatLit(v float32) string {
	f := float64(v)
	switch {
	case math.IsNaN(f):
		return "NAN"
	case math.IsInf(f, 1):
		return "INFINITY"
	case math.IsInf(f, -1):
		return "(-INFINITY)"
	}
	return strconv.FormatFloat(f, 'x', -1, 32) + "f"
}
