package mcunn

import (
	"fmt"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
)

// relayToTIR is the kind's RelayToTIR hook: each function the target owns
// (one composite or operator, KeepRegionsApart) becomes a PrimFunc that
// calls one kiln_nn kernel. The constants the kernel reads through a
// pointer (weights, biases, multipliers) are lifted into parameters that
// the function's calls pass, so they become graph parameters or the AOT
// project's constants; zero points and factors become immediates.
func relayToTIR(ctx *backend.HookContext, mod *graph.Module, prims *tir.Module) error {
	for _, of := range backend.OwnedFunctions(ctx, mod, prims) {
		fn, consts, pf, err := Lower(of.Symbol, of.Fn)
		if err != nil {
			return err
		}
		if len(consts) > 0 {
			backend.PassConstants(mod, of, fn, consts)
			of.Fn = fn
		}
		if _, err := backend.ReplaceWithPrimFunc(ctx, mod, of, pf, prims); err != nil {
			return err
		}
	}
	return nil
}

// Lower builds the PrimFunc named name of one mcunn function: its body
// (composites inlined) must be a kernel of recognize over the function's
// parameters and constants. It returns the function with the kernel's
// constant operands lifted into trailing parameters (fn itself when there
// are none), those constants, and the PrimFunc, whose buffers are the
// parameters in order and then the result; the kernel's scratch buffer is
// an allocation in its body.
func Lower(name string, fn *graph.Function) (*graph.Function, []*graph.Constant, *tir.PrimFunc, error) {
	body := backend.InlineComposites(fn.Body)
	if body != fn.Body {
		if err := graph.InferFunction(nil, &graph.Function{Params: fn.Params, Body: body}); err != nil {
			return nil, nil, nil, fmt.Errorf("@%s: %w", name, err)
		}
	}
	k, err := recognize(body)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("@%s: %w", name, err)
	}
	if n, ok := templateArgs(k.call); !ok || n != len(k.args) {
		return nil, nil, nil, fmt.Errorf("@%s: kiln_nn call %s with %d arguments has no C template", name, k.call, len(k.args))
	}
	params := append([]*graph.Var(nil), fn.Params...)
	var consts []*graph.Constant
	lifted := map[graph.Expr]*graph.Var{}
	isParam := map[graph.Expr]bool{}
	for _, p := range fn.Params {
		isParam[p] = true
	}
	for _, a := range k.args {
		if a.kind != argOperand || isParam[a.operand] || lifted[a.operand] != nil {
			continue
		}
		c, ok := a.operand.(*graph.Constant)
		if !ok {
			return nil, nil, nil, fmt.Errorf("@%s: operand %s is computed inside the function; kiln_nn kernels take parameters and constants", name, graph.Describe(a.operand))
		}
		v := graph.NewVar(fmt.Sprintf("mcunn_const%d", len(consts)), c.Type())
		lifted[c] = v
		consts = append(consts, c)
		params = append(params, v)
	}
	out := fn
	if len(consts) > 0 {
		nb := graph.Rewrite(body, func(e graph.Expr) graph.Expr {
			if v, ok := lifted[e]; ok {
				return v
			}
			return e
		})
		out = &graph.Function{Params: params, Body: nb, Attrs: fn.Attrs.Clone()}
		if err := graph.InferFunction(nil, out); err != nil {
			return nil, nil, nil, fmt.Errorf("@%s: %w", name, err)
		}
	}

	pf := tir.NewPrimFunc(name)
	buf := map[graph.Expr]*tir.Buffer{}
	for i, p := range params {
		tt, ok := p.Type().(*ir.TensorType)
		if !ok {
			return nil, nil, nil, fmt.Errorf("@%s: parameter %%%s is not a tensor", name, p.Name)
		}
		buf[p] = pf.AddBuffer(tir.NewBuffer(fmt.Sprintf("p%d", i), tt.DType, tt.Shape, tir.ScopeGlobal))
	}
	for c, v := range lifted {
		buf[c] = buf[v]
	}
	res := pf.AddBuffer(tir.NewBuffer("out0", k.result.DType, k.result.Shape, tir.ScopeGlobal))
	var scratch *tir.Buffer
	if k.scratch > 0 {
		scratch = tir.NewBuffer("scratch", ir.Int8, ir.Shape{k.scratch}, tir.ScopeGlobal)
	}
	args := make([]tir.PrimExpr, len(k.args))
	for i, a := range k.args {
		switch a.kind {
		case argImm:
			args[i] = tir.Int32(a.imm)
		case argOperand:
			args[i] = buf[a.operand].Data
		case argScratch:
			args[i] = scratch.Data
		case argOutput:
			args[i] = res.Data
		}
	}
	var s tir.Stmt = tir.Eval(tir.CallExternOf(tir.Void, k.call, args...))
	if scratch != nil {
		s = &tir.Allocate{Buffer: scratch, Body: s}
	}
	pf.Body = s
	if err := tir.Verify(pf); err != nil {
		return nil, nil, nil, fmt.Errorf("mcunn: @%s: %w", name, err)
	}
	return out, consts, pf, nil
}
