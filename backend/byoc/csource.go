// Package byoc holds the reusable halves of a bring-your-own-codegen
// backend (seed 002), so that a third party writes only what is its own:
//
//   - C source style (CSource, CSourceHooks): the base walks a partitioned
//     function, names its parameters, outputs, constants (static const
//     arrays) and temporaries (heap buffers), and writes the three entry
//     points — SYMBOL_body, SYMBOL_unpacked over raw pointers (the AOT
//     executor calls it with --unpacked-api) and the packed SYMBOL, which
//     checks its arguments — around the C the backend emits per operator
//     call. backend/ccompiler is such a backend.
//   - JSON style (SerializeJSON, JSONHooks): the base serialises a
//     partitioned function as a runtime/jsonrt graph (inputs, constants by
//     name, kernel nodes, heads) around the node name and attributes the
//     backend gives per call, and the hooks hand the graph to a
//     jsonrt.Module over the backend's kernels and the constants to the
//     build. backend/dnnl serialises with it; backend/examples/gokernels
//     is a whole JSON backend in under 150 lines.
//
// Both sit at the end of the pipeline's external branch: partition →
// build: RelayToRuntime (+ ConstantUpdater) → the artifact's library or
// modules.
package byoc

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/backend"
	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/internal/escape"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/runtime"
)

// COp emits the C of one operator call: it writes statements computing
// the call's float32 result into the buffer named out from the buffers
// named args (one per argument, each a flat row-major float array of its
// argument's shape) with w.Line.
type COp func(w *CWriter, c *graph.Call, out string, args []string) error

// CWriter collects the C of a function's body.
type CWriter struct {
	body strings.Builder
}

// Line appends one line (indented) of the body, formatted as by
// fmt.Sprintf.
func (w *CWriter) Line(format string, args ...any) {
	w.body.WriteString("  ")
	fmt.Fprintf(&w.body, format, args...)
	w.body.WriteString("\n")
}

// Numel is the number of elements of a tensor-typed expression.
func Numel(e graph.Expr) int64 { return e.Type().(*ir.TensorType).Shape.NumElements() }

// CSourceHooks returns the RelayToRuntime hook of a C-source backend:
// every partitioned function becomes a C source module (CSource) labelled
// label_SYMBOL.
func CSourceHooks(label string, op COp) backend.Hooks {
	return backend.Hooks{RelayToRuntime: func(_ *backend.HookContext, fn *graph.Function, symbol string) (runtime.Module, error) {
		return CSource(fn, symbol, label, op)
	}}
}

// CSource generates the C translation unit of fn exported as symbol, with
// op emitting each operator call (see the package documentation). The
// function's parameters, results and constants must be float32 tensors;
// its result a tensor or a flat tuple of them. label names the backend in
// errors and the module.
func CSource(fn *graph.Function, symbol, label string, op COp) (*runtime.CSourceModule, error) {
	if !escape.IsCIdent(symbol) {
		return nil, fmt.Errorf("%s: symbol %q is not a C identifier", label, symbol)
	}
	g := &cfunc{sym: symbol, op: op, names: map[graph.Expr]string{}}
	code, decl, err := g.generate(fn)
	if err != nil {
		return nil, fmt.Errorf("%s: @%s: %w", label, symbol, err)
	}
	return &runtime.CSourceModule{Label: label + "_" + symbol, Code: code, Funcs: []string{symbol},
		Unpacked: map[string]runtime.UnpackedFunc{symbol: {Symbol: symbol + "_unpacked", Decl: decl}}}, nil
}

// cfunc is the state of one function's generation.
type cfunc struct {
	sym    string
	op     COp
	names  map[graph.Expr]string
	consts strings.Builder
	w      CWriter
	temps  []string // heap temporaries to free
	n      int
}

func isF32(t ir.Type) bool {
	tt, ok := t.(*ir.TensorType)
	return ok && tt.DType == ir.Float32
}

func (g *cfunc) generate(fn *graph.Function) (code, unpackedDecl string, err error) {
	var params, uparams, uargs []string
	for i, p := range fn.Params {
		if !isF32(p.Type()) {
			return "", "", fmt.Errorf("parameter %%%s is %v, want a float32 tensor", p.Name, p.Type())
		}
		name := "in" + strconv.Itoa(i)
		g.names[p] = name
		params = append(params, "const float* restrict "+name)
		uparams, uargs = append(uparams, "float* "+name), append(uargs, name)
	}
	outs := []graph.Expr{fn.Body}
	if t, ok := fn.Body.(*graph.Tuple); ok {
		outs = t.Fields
	}
	outName := map[graph.Expr]string{}
	for i, o := range outs {
		if !isF32(o.Type()) {
			return "", "", fmt.Errorf("result %d is %v, want a float32 tensor (a flat tuple of them for several)", i, o.Type())
		}
		name := "out" + strconv.Itoa(i)
		if _, dup := outName[o]; !dup {
			outName[o] = name
		}
		params = append(params, "float* restrict "+name)
		uparams, uargs = append(uparams, "float* "+name), append(uargs, name)
	}
	graph.PostOrder(fn.Body, func(e graph.Expr) {
		if err == nil {
			err = g.node(e, outName)
		}
	})
	if err != nil {
		return "", "", err
	}
	// An output no operator computed into (an input, a constant, or a
	// value given twice) is copied.
	for i, o := range outs {
		if dst := "out" + strconv.Itoa(i); g.names[o] != dst {
			g.w.Line("memcpy(%s, %s, %d * sizeof(float));", dst, g.names[o], Numel(o))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "/* Generated by kiln for %s. */\n", g.sym)
	b.WriteString("#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n#include \"kiln/c_runtime_api.h\"\n\n")
	b.WriteString(g.consts.String())
	fmt.Fprintf(&b, "static int32_t %s_body(%s) {\n%s", g.sym, strings.Join(params, ", "), g.w.body.String())
	for i := len(g.temps) - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "  free(%s);\n", g.temps[i])
	}
	b.WriteString("  return 0;\n}\n\n")
	unpackedDecl = fmt.Sprintf("int32_t %s_unpacked(%s)", g.sym, strings.Join(uparams, ", "))
	fmt.Fprintf(&b, "%s;\n%s {\n  return %s_body(%s);\n}\n\n", unpackedDecl, unpackedDecl, g.sym, strings.Join(uargs, ", "))
	all := append(append([]graph.Expr{}, paramExprs(fn)...), outs...)
	fmt.Fprintf(&b, "int32_t %s(kiln_tensor* args, int32_t num_args);\n", g.sym)
	fmt.Fprintf(&b, "int32_t %s(kiln_tensor* args, int32_t num_args) {\n", g.sym)
	fmt.Fprintf(&b, "  if (num_args != %d) { kiln_set_last_error(\"%s: expected %d arguments\"); return -1; }\n", len(all), g.sym, len(all))
	var call []string
	for i, e := range all {
		s := e.Type().(*ir.TensorType).Shape
		fmt.Fprintf(&b, "  if (args[%d].dtype_code != KILN_FLOAT || args[%d].dtype_bits != 32 || args[%d].ndim != %d", i, i, i, len(s))
		for d, n := range s {
			fmt.Fprintf(&b, " || args[%d].shape[%d] != %d", i, d, n)
		}
		fmt.Fprintf(&b, ") { kiln_set_last_error(\"%s: argument %d must be float32%s\"); return -1; }\n", g.sym, i, shapeText(s))
		call = append(call, fmt.Sprintf("(float*)args[%d].data", i))
	}
	fmt.Fprintf(&b, "  return %s_unpacked(%s);\n}\n", g.sym, strings.Join(call, ", "))
	return b.String(), unpackedDecl, nil
}

func paramExprs(fn *graph.Function) []graph.Expr {
	out := make([]graph.Expr, len(fn.Params))
	for i, p := range fn.Params {
		out[i] = p
	}
	return out
}

// node names one expression of the body, emitting constants and calls.
func (g *cfunc) node(e graph.Expr, outName map[graph.Expr]string) error {
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
		lits := make([]string, max(len(vals), 1))
		lits[0] = "0"
		for i, v := range vals {
			lits[i] = cgen.FloatLiteral(ir.Float32, float64(v))
		}
		fmt.Fprintf(&g.consts, "static const float %s[%d] = {%s};\n\n", name, len(lits), strings.Join(lits, ", "))
		g.names[e] = name
		return nil
	case *graph.Call:
		if !isF32(x.Type()) {
			return fmt.Errorf("%s: result %v, want a float32 tensor", graph.Describe(x), x.Type())
		}
		out, isOut := outName[x]
		if !isOut {
			out = fmt.Sprintf("t%d", g.n)
			g.n++
			g.w.Line("float* %s = (float*)malloc(%d * sizeof(float));", out, max(Numel(x), 1))
			g.w.Line("if (%s == NULL) { kiln_set_last_error(\"%s: out of memory\"); return -1; }", out, g.sym)
			g.temps = append(g.temps, out)
		}
		args := make([]string, len(x.Args))
		for i, a := range x.Args {
			if args[i] = g.names[a]; args[i] == "" {
				return fmt.Errorf("%s: argument %d is not a tensor the function computes", graph.Describe(x), i)
			}
		}
		if err := g.op(&g.w, x, out, args); err != nil {
			return fmt.Errorf("%s: %w", graph.Describe(x), err)
		}
		g.names[e] = out
		return nil
	}
	return fmt.Errorf("%s is not supported in a C source function (operator calls, constants and a result tuple only)", graph.Describe(e))
}

func shapeText(s ir.Shape) string {
	parts := make([]string, len(s))
	for i, n := range s {
		parts[i] = strconv.FormatInt(n, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
