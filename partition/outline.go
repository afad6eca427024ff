package partition

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
)

// Sanitize turns s into a C identifier fragment: every character other
// than a letter, digit or '_' becomes '_' ("unsanitary-name++" →
// "unsanitary_name__").
func Sanitize(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Symbol is the global symbol of the n-th outlined function of a module
// for a compiler: kiln_<module>_<compiler>_main_<n>, sanitised.
func Symbol(module, compiler string, n int) string {
	if module == "" {
		module = "default"
	}
	return fmt.Sprintf("kiln_%s_%s_main_%d", Sanitize(module), Sanitize(compiler), n)
}

// Outline replaces each region of mod's main by a call of a module
// global (seed 002: partitioned functions are module functions under
// their global names, which passes, printers and the external codegen
// see as such) holding the region's calls, named and with attributes
// Compiler=<kind>, Primitive=true and global_symbol=Symbol(...). The function's parameters
// are the values the region reads from outside (constants are bound
// inside unless opts.ConstantsAsArgs); its result is the region's one
// output, or a tuple of its outputs (values used outside the region, or
// results of main), each computed once however many consumers it has.
func Outline(mod *graph.Module, regions []*Region, opts Options) (*graph.Module, error) {
	main := mod.Main()
	globals := map[string]*graph.Function{} // the outlined functions by global symbol
	member := map[*graph.Call]*Region{}
	for _, r := range regions {
		for _, c := range r.Calls {
			member[c] = r
		}
	}
	parents := map[graph.Expr][]graph.Expr{}
	graph.PostOrder(main.Body, func(e graph.Expr) {
		for _, ch := range children(e) {
			parents[ch] = append(parents[ch], e)
		}
	})
	// internal reports whether a tuple node lives inside region r: every
	// consumer is a call of r.
	internal := func(e graph.Expr, r *Region) bool {
		ps := parents[e]
		if len(ps) == 0 {
			return false
		}
		for _, p := range ps {
			if c, ok := p.(*graph.Call); !ok || member[c] != r {
				return false
			}
		}
		return true
	}
	type outlined struct {
		call    *graph.Call
		outputs map[*graph.Call]int
		n       int
	}
	done := map[*Region]*outlined{}
	memo := map[graph.Expr]graph.Expr{}
	counter := map[string]int{}
	var rebuild func(e graph.Expr) (graph.Expr, error)
	var outline func(r *Region) (*outlined, error)

	outline = func(r *Region) (*outlined, error) {
		if o, ok := done[r]; ok {
			return o, nil
		}
		var params []*graph.Var
		var args []graph.Expr
		inputs := map[graph.Expr]*graph.Var{}
		input := func(e graph.Expr) (graph.Expr, error) {
			if v, ok := inputs[e]; ok {
				return v, nil
			}
			ne, err := rebuild(e)
			if err != nil {
				return nil, err
			}
			v := graph.NewVar(fmt.Sprintf("%s_i%d", Sanitize(r.Target.Kind.Name), len(params)), e.Type())
			inputs[e] = v
			params = append(params, v)
			args = append(args, ne)
			return v, nil
		}
		inner := map[graph.Expr]graph.Expr{}
		var clone func(e graph.Expr) (graph.Expr, error)
		clone = func(e graph.Expr) (graph.Expr, error) {
			if x, ok := inner[e]; ok {
				return x, nil
			}
			var out graph.Expr
			var err error
			switch x := e.(type) {
			case *graph.Call:
				if member[x] != r {
					out, err = input(e)
					break
				}
				nargs := make([]graph.Expr, len(x.Args))
				for i, a := range x.Args {
					if nargs[i], err = clone(a); err != nil {
						return nil, err
					}
				}
				nc := *x
				nc.Args = nargs
				out = &nc
			case *graph.Constant:
				if opts.ConstantsAsArgs {
					out, err = input(e)
				} else {
					out = x
				}
			case *graph.Tuple:
				if !internal(x, r) {
					out, err = input(e)
					break
				}
				fs := make([]graph.Expr, len(x.Fields))
				for i, f := range x.Fields {
					if fs[i], err = clone(f); err != nil {
						return nil, err
					}
				}
				out = graph.NewTuple(fs)
			default:
				out, err = input(e)
			}
			if err != nil {
				return nil, err
			}
			inner[e] = out
			return out, nil
		}
		o := &outlined{outputs: map[*graph.Call]int{}}
		var results []graph.Expr
		for _, c := range r.Calls {
			if !isOutput(c, main.Body, parents, member, internal) {
				continue
			}
			b, err := clone(c)
			if err != nil {
				return nil, err
			}
			o.outputs[c] = len(results)
			results = append(results, b)
		}
		if len(results) == 0 {
			return nil, fmt.Errorf("partition: a %s region has no output", r.Target.Kind.Name)
		}
		body := results[0]
		if len(results) > 1 {
			body = graph.NewTuple(results)
		}
		comp := r.Target.Kind.Name
		sym := Symbol(opts.ModuleName, comp, counter[comp])
		counter[comp]++
		fn := graph.NewFunction(params, body, ir.Attrs{
			graph.AttrCompiler:     comp,
			graph.AttrPrimitive:    true,
			graph.AttrGlobalSymbol: sym,
		})
		if pass := backend.Of(r.Target.Kind).PartitionPass; pass != nil {
			var err error
			if fn, err = runPartitionPass(pass, fn); err != nil {
				return nil, fmt.Errorf("partition: %s: the %s partition pass: %w", sym, comp, err)
			}
		}
		if _, taken := mod.Funcs[sym]; taken || globals[sym] != nil {
			return nil, fmt.Errorf("partition: the module already has a function @%s", sym)
		}
		globals[sym] = fn
		o.call = graph.NewFuncCall(graph.NewGlobalVar(sym), args)
		o.n = len(results)
		done[r] = o
		return o, nil
	}

	rebuild = func(e graph.Expr) (graph.Expr, error) {
		if x, ok := memo[e]; ok {
			return x, nil
		}
		var out graph.Expr
		switch x := e.(type) {
		case *graph.Call:
			if r := member[x]; r != nil {
				o, err := outline(r)
				if err != nil {
					return nil, err
				}
				idx, ok := o.outputs[x]
				if !ok {
					return nil, fmt.Errorf("partition: internal error: %s is used outside its region but is not an output", describe(x))
				}
				out = o.call
				if o.n > 1 {
					out = graph.NewTupleGetItem(o.call, idx)
				}
				break
			}
			nargs := make([]graph.Expr, len(x.Args))
			changed := false
			for i, a := range x.Args {
				na, err := rebuild(a)
				if err != nil {
					return nil, err
				}
				nargs[i] = na
				changed = changed || na != a
			}
			if !changed {
				out = x
				break
			}
			nc := *x
			nc.Args = nargs
			out = &nc
		case *graph.Tuple:
			fs := make([]graph.Expr, len(x.Fields))
			changed := false
			for i, f := range x.Fields {
				nf, err := rebuild(f)
				if err != nil {
					return nil, err
				}
				fs[i] = nf
				changed = changed || nf != f
			}
			out = x
			if changed {
				out = graph.NewTuple(fs)
			}
		case *graph.TupleGetItem:
			nt, err := rebuild(x.Tuple)
			if err != nil {
				return nil, err
			}
			out = x
			if nt != x.Tuple {
				out = graph.NewTupleGetItem(nt, x.Index)
			}
		default:
			out = e
		}
		memo[e] = out
		return out, nil
	}

	body, err := rebuild(main.Body)
	if err != nil {
		return nil, err
	}
	nm := graph.NewFunction(main.Params, body, main.Attrs.Clone())
	out := mod.ShallowCopy()
	out.Funcs["main"] = nm
	for sym, fn := range globals {
		out.Funcs[sym] = fn
	}
	if err := graph.InferTypes(out); err != nil {
		return nil, fmt.Errorf("partition: the partitioned module does not type-check: %w", err)
	}
	return out, nil
}

// isOutput reports whether a region call's value is needed outside the
// region: it is main's result (or in it), or some consumer is not a call
// of the region (nor a tuple internal to the region).
func isOutput(c *graph.Call, root graph.Expr, parents map[graph.Expr][]graph.Expr, member map[*graph.Call]*Region, internal func(graph.Expr, *Region) bool) bool {
	if graph.Expr(c) == root {
		return true
	}
	r := member[c]
	for _, p := range parents[c] {
		if pc, ok := p.(*graph.Call); ok && member[pc] == r {
			continue
		}
		if t, ok := p.(*graph.Tuple); ok && internal(t, r) {
			continue
		}
		return true
	}
	return false
}

// children lists the direct sub-expressions of e that are values.
func children(e graph.Expr) []graph.Expr {
	switch x := e.(type) {
	case *graph.Call:
		return x.Args
	case *graph.Tuple:
		return x.Fields
	case *graph.TupleGetItem:
		return []graph.Expr{x.Tuple}
	}
	return nil
}

// runPartitionPass runs a kind's PartitionPass on an outlined function
// and checks that the result still fits its calls: same parameter and
// result types, and the Compiler, Primitive and global_symbol
// attributes kept.
func runPartitionPass(pass func(*graph.Function) (*graph.Function, error), fn *graph.Function) (*graph.Function, error) {
	if err := graph.InferFunction(nil, fn); err != nil {
		return nil, err
	}
	want := fn.FuncType()
	out, err := pass(fn)
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, fmt.Errorf("returned no function")
	}
	if err := graph.InferFunction(nil, out); err != nil {
		return nil, fmt.Errorf("returned an ill-typed function: %w", err)
	}
	if !ir.TypeEqual(out.FuncType(), want) {
		return nil, fmt.Errorf("changed the function's type from %s to %s", want, out.FuncType())
	}
	for _, k := range []string{graph.AttrCompiler, graph.AttrPrimitive, graph.AttrGlobalSymbol} {
		v, ok := out.Attrs[k]
		if !ok {
			return nil, fmt.Errorf("dropped the %s attribute", k)
		}
		if !(ir.Attrs{k: v}).Equal(ir.Attrs{k: fn.Attrs[k]}) {
			return nil, fmt.Errorf("changed the %s attribute", k)
		}
	}
	return out, nil
}
