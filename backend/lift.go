package backend

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/tir"
)

// Helpers for RelayToTIR hooks that lower an owned function with kiln's
// own lowering (lower.LowerFunction), which takes operator calls on
// parameters: composites are inlined and constants become parameters
// whose values the calls pass, so they end up among the graph's
// parameters (params.bin) like the host's weights.

// PrepareForLowering inlines the composite functions called in fn and
// lifts its constants into trailing parameters named prefix0, prefix1,
// .... It returns the new function (fn itself when nothing changed) and
// the lifted constants in parameter order; PassConstants then rewrites
// fn's calls.
func PrepareForLowering(fn *graph.Function, prefix string) (*graph.Function, []*graph.Constant, error) {
	body := InlineComposites(fn.Body)
	var consts []*graph.Constant
	params := append([]*graph.Var(nil), fn.Params...)
	lifted := map[*graph.Constant]*graph.Var{}
	graph.PostOrder(body, func(e graph.Expr) {
		if c, ok := e.(*graph.Constant); ok && lifted[c] == nil {
			v := graph.NewVar(fmt.Sprintf("%s%d", prefix, len(consts)), c.Type())
			lifted[c] = v
			consts = append(consts, c)
			params = append(params, v)
		}
	})
	if len(consts) > 0 {
		body = graph.Rewrite(body, func(e graph.Expr) graph.Expr {
			if c, ok := e.(*graph.Constant); ok {
				return lifted[c]
			}
			return e
		})
	}
	if body == fn.Body && len(consts) == 0 {
		return fn, nil, nil
	}
	out := &graph.Function{Params: params, Body: body, Attrs: fn.Attrs.Clone()}
	if err := graph.InferFunction(nil, out); err != nil {
		return nil, nil, err
	}
	return out, consts, nil
}

// InlineComposites replaces every call of a function literal (a composite
// of a pattern) under body by the function's body with its parameters
// bound to the call's arguments.
func InlineComposites(body graph.Expr) graph.Expr {
	return graph.Rewrite(body, func(e graph.Expr) graph.Expr {
		c, ok := e.(*graph.Call)
		if !ok {
			return e
		}
		inner, ok := c.Fn.(*graph.Function)
		if !ok || len(inner.Params) != len(c.Args) {
			return e
		}
		bind := map[graph.Expr]graph.Expr{}
		for i, p := range inner.Params {
			bind[p] = c.Args[i]
		}
		return graph.Rewrite(InlineComposites(inner.Body), func(x graph.Expr) graph.Expr {
			if r, ok := bind[x]; ok {
				return r
			}
			return x
		})
	})
}

// PassConstants rewrites every call of the owned function in mod to pass
// the lifted constants after its arguments, and to call fn (the function
// with the extra parameters) instead; a module-level function is replaced
// under its name.
func PassConstants(mod *graph.Module, of OwnedFunction, fn *graph.Function, consts []*graph.Constant) {
	extra := make([]graph.Expr, len(consts))
	for i, c := range consts {
		extra[i] = c
	}
	for _, name := range mod.Names() {
		if name == of.Name {
			continue
		}
		f := mod.Funcs[name]
		body := graph.Rewrite(f.Body, func(e graph.Expr) graph.Expr {
			call, ok := e.(*graph.Call)
			if !ok || call.Op != nil {
				return e
			}
			callee := call.Fn
			switch g := call.Fn.(type) {
			case *graph.Function:
				if g != of.Fn {
					return e
				}
				callee = fn
			case *graph.GlobalVar:
				if of.Name == "" || g.Name != of.Name {
					return e
				}
			default:
				return e
			}
			nc := graph.NewFuncCall(callee, append(append([]graph.Expr(nil), call.Args...), extra...))
			nc.Span = call.Span
			return nc
		})
		if body != f.Body {
			mod.Funcs[name] = &graph.Function{Params: f.Params, Body: body, RetType: f.RetType, Attrs: f.Attrs}
		}
	}
	if of.Name != "" {
		mod.Funcs[of.Name] = fn
	}
}

// LowerOwnedFunctions is the body of a RelayToTIR hook that lowers each
// function its target owns with its own lowering: for every owned
// function it inlines composites and lifts constants into parameters
// (PrepareForLowering with prefix), calls lower for the PrimFunc, makes
// the calls pass the constants (PassConstants) and replaces them with
// calls of the PrimFunc (ReplaceWithPrimFunc). Errors name the function.
func LowerOwnedFunctions(ctx *HookContext, mod *graph.Module, prims *tir.Module, prefix string, lower func(symbol string, fn *graph.Function) (*tir.PrimFunc, error)) error {
	for _, of := range OwnedFunctions(ctx, mod, prims) {
		fn, consts, err := PrepareForLowering(of.Fn, prefix)
		if err != nil {
			return fmt.Errorf("@%s: %w", of.Symbol, err)
		}
		pf, err := lower(of.Symbol, fn)
		if err != nil {
			return err
		}
		if len(consts) > 0 {
			PassConstants(mod, of, fn, consts)
			of.Fn = fn
		}
		if _, err := ReplaceWithPrimFunc(ctx, mod, of, pf, prims); err != nil {
			return err
		}
	}
	return nil
}
