// Package lower turns the graph IR into loop-level IR. LowerTE takes the
// main function after FuseOps, and for each distinct fused primitive
// function builds the tensor-expression computation of its operators (the
// implementation the strategy table selects for the target), schedules it
// with the implementation of its anchor operator, and lowers it to a
// tir.PrimFunc. It sits between graph passes (graph/transform) and the TIR
// pipeline and code generation (tir/transform, codegen/c).
package lower

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/graph/transform"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/topi"
)

// Result is what LowerTE produces.
type Result struct {
	// Prims holds one PrimFunc per distinct primitive function.
	Prims *tir.Module
	// Callee maps each call of a primitive function in main to the name of
	// the PrimFunc that implements it.
	Callee map[*graph.Call]string
	// Impls records, per PrimFunc, the implementations chosen for its ops
	// ("nn.conv2d=conv2d.generic, add=add.generic"), for reports.
	Impls map[string]string
}

// Options configure LowerTE.
type Options struct {
	// Target is the target primitive functions are lowered for.
	Target *targets.Target
	// TargetOf, when set, gives the target of each call (device planning's
	// choice); a nil result means Target.
	TargetOf func(*graph.Call) *targets.Target
	// Registry is the strategy table (strategy.Default when nil).
	Registry *strategy.Registry
	// Prims, when set, is the module the PrimFuncs are added to (a
	// RelayToTIR hook's output, say); new names avoid the ones in it.
	Prims *tir.Module
	// Skip reports calls LowerTE must leave alone (for example functions an
	// external codegen takes); nil skips none.
	Skip func(*graph.Call) bool
	// Tuning, when set, gives tunable calls their knobs (kiln compile
	// --tuning); nil keeps every implementation's defaults.
	Tuning strategy.Tuning
}

// LowerTE lowers every call of a Primitive function literal in main.
func LowerTE(main *graph.Function, opts Options) (*Result, error) {
	reg := opts.Registry
	if reg == nil {
		reg = strategy.Default
	}
	prims := opts.Prims
	if prims == nil {
		prims = &tir.Module{}
	}
	res := &Result{Prims: prims, Callee: map[*graph.Call]string{}, Impls: map[string]string{}}
	byKey := map[string]string{}
	used := map[string]int{}
	var err error
	graph.PostOrder(main.Body, func(e graph.Expr) {
		if err != nil {
			return
		}
		call, ok := e.(*graph.Call)
		if !ok {
			return
		}
		if opts.Skip != nil && opts.Skip(call) {
			return
		}
		if call.Op != nil {
			err = fmt.Errorf("%s is not inside a primitive function; run FuseOps before LowerTE", graph.Describe(call))
			return
		}
		fn, ok := call.Fn.(*graph.Function)
		if !ok || !fn.BoolAttr(graph.AttrPrimitive) || fn.StrAttr(graph.AttrCompiler) != "" {
			return
		}
		tgt := opts.Target
		if opts.TargetOf != nil {
			if t := opts.TargetOf(call); t != nil {
				tgt = t
			}
		}
		if tgt == nil {
			err = fmt.Errorf("%s: no target to lower it for", graph.Describe(call))
			return
		}
		key := tgt.Labelled() + "\n" + graph.ExprString(fn)
		if name, seen := byKey[key]; seen {
			res.Callee[call] = name
			return
		}
		hint := fn.StrAttr(transform.AttrNameHint)
		if hint == "" {
			hint = "fused"
		}
		name := hint
		for {
			if n := used[hint]; n > 0 {
				name = fmt.Sprintf("%s_%d", hint, n)
			}
			used[hint]++
			if prims.Lookup(name) == nil {
				break
			}
		}
		var pf *tir.PrimFunc
		var impls string
		pf, impls, err = lowerFunction(name, fn, tgt, reg, opts.Tuning)
		if err != nil {
			err = fmt.Errorf("lowering %s (%s): %w", name, describeOps(fn), err)
			return
		}
		pf.Target = tgt
		if err = res.Prims.Add(pf); err != nil {
			return
		}
		byKey[key] = name
		res.Callee[call] = name
		res.Impls[name] = impls
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// describeOps names the ops of a function and the ONNX nodes they came from.
func describeOps(fn *graph.Function) string {
	var parts []string
	graph.PostOrder(fn.Body, func(e graph.Expr) {
		if c, ok := e.(*graph.Call); ok && c.Op != nil {
			parts = append(parts, graph.Describe(c))
		}
	})
	return strings.Join(parts, ", ")
}

// lowerFunction builds and schedules the TE computation of one primitive
// function and lowers it.
func lowerFunction(name string, fn *graph.Function, tgt *targets.Target, reg *strategy.Registry, tuning strategy.Tuning) (*tir.PrimFunc, string, error) {
	env := map[graph.Expr][]*te.Tensor{}
	var params []*te.Tensor
	for i, p := range fn.Params {
		tt, ok := p.Type().(*ir.TensorType)
		if !ok {
			return nil, "", fmt.Errorf("parameter %%%s is not a tensor", p.Name)
		}
		ph := te.Placeholder(fmt.Sprintf("p%d", i), tt.DType, tt.Shape)
		params = append(params, ph)
		env[p] = []*te.Tensor{ph}
	}
	type anchorInfo struct {
		call *strategy.Call
		impl strategy.Implementation
		outs []*te.Tensor
		pat  op.Pattern
	}
	var anchor *anchorInfo
	var chosen []string
	var err error
	graph.PostOrder(fn.Body, func(e graph.Expr) {
		if err != nil {
			return
		}
		if _, done := env[e]; done {
			return
		}
		switch x := e.(type) {
		case *graph.Constant:
			env[e] = []*te.Tensor{constTensor(x)}
		case *graph.Tuple:
			var ts []*te.Tensor
			for _, f := range x.Fields {
				ts = append(ts, env[f]...)
			}
			env[e] = ts
		case *graph.TupleGetItem:
			ts := env[x.Tuple]
			if x.Index >= len(ts) {
				err = fmt.Errorf("tuple item %d of %d", x.Index, len(ts))
				return
			}
			env[e] = ts[x.Index : x.Index+1]
		case *graph.Call:
			if x.Op == nil {
				err = fmt.Errorf("nested function calls inside a primitive function are not supported")
				return
			}
			args := make([]ir.Type, len(x.Args))
			var ins []*te.Tensor
			for i, a := range x.Args {
				args[i] = a.Type()
				ts := env[a]
				if len(ts) != 1 {
					err = fmt.Errorf("%s: argument %d is not a single tensor", graph.Describe(x), i)
					return
				}
				ins = append(ins, ts[0])
			}
			sc := &strategy.Call{Op: x.Op, Attrs: x.Attrs, ArgTypes: args, OutType: x.Type(), Target: tgt}
			impl, serr := reg.Select(sc)
			if serr != nil {
				err = fmt.Errorf("%s: %v", graph.Describe(x), serr)
				return
			}
			if tuning != nil && impl.Space != nil {
				sc.Knobs = tuning.Knobs(sc, impl)
				if o, ok := tuning.(strategy.TuningObserver); ok {
					o.Lowered(sc, impl, name)
				}
			}
			outs, cerr := impl.Compute(sc, ins)
			if cerr != nil {
				err = fmt.Errorf("%s: %s: %v", graph.Describe(x), impl.Name, cerr)
				return
			}
			env[e] = outs
			chosen = append(chosen, x.Op.Name+"="+impl.Name)
			// The anchor is the op with the highest pattern (the first one
			// on ties), as in TVM: it decides the group's schedule.
			if anchor == nil || x.Op.Pattern > anchor.pat {
				anchor = &anchorInfo{call: sc, impl: impl, outs: outs, pat: x.Op.Pattern}
			}
		default:
			err = fmt.Errorf("unexpected %T inside a primitive function", e)
		}
	})
	if err != nil {
		return nil, "", err
	}
	outs := dedupOutputs(env[fn.Body], params)
	s := te.CreateSchedule(outs...)
	switch {
	case anchor != nil && anchor.impl.Schedule != nil:
		err = anchor.impl.Schedule(anchor.call, s, outs, anchor.outs)
	default:
		err = topi.ScheduleInjective(nil, s, outs, nil)
	}
	if err != nil {
		return nil, "", fmt.Errorf("schedule: %v", err)
	}
	pf, err := te.Lower(name, append(append([]*te.Tensor{}, params...), outs...), s, te.LowerOptions{})
	if err != nil {
		return nil, "", err
	}
	return pf, strings.Join(chosen, ", "), nil
}

// dedupOutputs makes sure every output is a distinct computed tensor: an
// output that repeats another, or that is a parameter itself, gets a copy.
func dedupOutputs(outs, params []*te.Tensor) []*te.Tensor {
	seen := map[*te.Tensor]bool{}
	for _, p := range params {
		seen[p] = true
	}
	res := make([]*te.Tensor, len(outs))
	for i, o := range outs {
		if seen[o] {
			src := o
			o = te.Compute(fmt.Sprintf("copy%d", i), src.Shape, func(idx []tir.PrimExpr) tir.PrimExpr { return src.At(idx...) })
		}
		seen[o] = true
		res[i] = o
	}
	return res
}

// constTensor turns an inlined (single-element) constant into a compute
// that every consumer can inline.
func constTensor(c *graph.Constant) *te.Tensor {
	v := c.Value
	var val tir.PrimExpr
	switch {
	case v.DType.IsFloat():
		val = tir.FloatConst(v.DType, v.Float(0))
	default:
		val = tir.IntConst(v.DType, v.Int(0))
	}
	return te.Compute("const", v.Shape, func([]tir.PrimExpr) tir.PrimExpr { return val })
}

// LowerFunction lowers one graph function (its body a dataflow of operator
// calls, such as a fused primitive function or a partitioned function) to
// a PrimFunc named name for target t, with the operator strategies of reg
// (strategy.Default when nil), exactly as LowerTE lowers each primitive
// function. Target hooks use it to reuse kiln's lowering for what they
// do not replace (for example after rewriting the function's operators).
func LowerFunction(name string, fn *graph.Function, t *targets.Target, reg *strategy.Registry) (*tir.PrimFunc, error) {
	if reg == nil {
		reg = strategy.Default
	}
	if t == nil {
		return nil, fmt.Errorf("lowering %s: no target", name)
	}
	pf, _, err := lowerFunction(name, fn, t, reg, nil)
	if err != nil {
		return nil, fmt.Errorf("lowering %s (%s): %w", name, describeOps(fn), err)
	}
	pf.Target = t
	return pf, nil
}
