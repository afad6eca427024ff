package partition

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pattern"
)

// CompositeRejection is a match MergeComposite refused.
type CompositeRejection struct {
	// Composite is the pattern table entry's name.
	Composite string
	pattern.Rejection
}

// MergeComposite wraps the matches of each entry of table, in table order
// (the order is the priority: an expression taken by an earlier entry is
// not matched again), into calls of function literals with the Composite
// attribute set to the entry's name and PartitionedFromPattern to the
// matched operators. It returns the new function and the matches that an
// entry's check refused. fn is not modified; it must be typed.
func MergeComposite(fn *graph.Function, table []pattern.Entry) (*graph.Function, []CompositeRejection, error) {
	body := fn.Body
	var rej []CompositeRejection
	for _, e := range table {
		if e.Name == "" || e.Pattern == nil {
			return nil, nil, fmt.Errorf("merge composite: pattern table entry %q has no name or no pattern", e.Name)
		}
		out, r, err := pattern.Partition(e.Pattern, body, pattern.PartitionOptions{
			Attrs: ir.Attrs{graph.AttrComposite: e.Name},
			Check: e.Check,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("merge composite %s: %w", e.Name, err)
		}
		for _, x := range r {
			rej = append(rej, CompositeRejection{Composite: e.Name, Rejection: x})
		}
		body = out
	}
	if body == fn.Body {
		return fn, rej, nil
	}
	out := &graph.Function{Params: fn.Params, Body: body, RetType: fn.RetType, Attrs: fn.Attrs}
	if err := graph.InferFunction(nil, out); err != nil {
		return nil, nil, fmt.Errorf("merge composite: %w", err)
	}
	return out, rej, nil
}

// inlineComposites replaces the calls of composite functions for which
// keep returns false by the functions' bodies (with the arguments
// substituted): a composite no target took goes back to plain operators,
// which the host compiles and the report explains one by one.
func inlineComposites(fn *graph.Function, keep func(*graph.Call) bool) (*graph.Function, error) {
	changed := false
	body := graph.Rewrite(fn.Body, func(e graph.Expr) graph.Expr {
		c, ok := e.(*graph.Call)
		if !ok {
			return e
		}
		f, ok := c.Fn.(*graph.Function)
		if !ok || f.StrAttr(graph.AttrComposite) == "" || keep(c) {
			return e
		}
		changed = true
		return Inline(f, c.Args)
	})
	if !changed {
		return fn, nil
	}
	out := &graph.Function{Params: fn.Params, Body: body, RetType: fn.RetType, Attrs: fn.Attrs}
	if err := graph.InferFunction(nil, out); err != nil {
		return nil, fmt.Errorf("inlining composites: %w", err)
	}
	return out, nil
}

// Inline returns f's body with its parameters replaced by args (the body
// is copied; f is not modified).
func Inline(f *graph.Function, args []graph.Expr) graph.Expr {
	sub := map[graph.Expr]graph.Expr{}
	for i, p := range f.Params {
		sub[p] = args[i]
	}
	return graph.Rewrite(f.Body, func(e graph.Expr) graph.Expr {
		if r, ok := sub[e]; ok {
			return r
		}
		return e
	})
}
