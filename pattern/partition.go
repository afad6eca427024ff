package pattern

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
)

// PartitionOptions configure Partition.
type PartitionOptions struct {
	// Attrs are set on every function Partition creates (Composite, for
	// MergeComposite); PartitionedFromPattern is added.
	Attrs ir.Attrs
	// Check accepts a match (nil) or rejects it with the reason; nil
	// accepts every match.
	Check func(r *Result) error
}

// Rejection is a match Partition did not turn into a function, and why.
type Rejection struct {
	// Root is the expression the match was rooted at.
	Root graph.Expr
	// Reason is the check function's error or the structural reason
	// (an intermediate result used outside the match).
	Reason string
}

// Partition wraps every match of p under root into a call of a function
// literal whose parameters are the match's inputs and whose body is the
// matched expressions (constants matched by IsConstant stay inside). It
// looks for matches from the outputs towards the inputs, so a longer
// match rooted later wins over a shorter one inside it; matches do not
// overlap. A match is refused when an intermediate expression is used
// outside it (the value would be lost; this also excludes inputs that
// depend on the match, which would make a cycle) or when opts.Check
// rejects it. root must be typed. It returns the new expression (typed)
// and the refused matches.
func Partition(p Pattern, root graph.Expr, opts PartitionOptions) (graph.Expr, []Rejection, error) {
	nodes := graph.Nodes(root)
	uses := Uses(root)
	grouped := map[graph.Expr]bool{}
	groups := map[graph.Expr]*Result{}
	var rejected []Rejection
	for i := len(nodes) - 1; i >= 0; i-- {
		e := nodes[i]
		if grouped[e] {
			continue
		}
		m := newMatcher(uses)
		if !m.match(p, e) {
			continue
		}
		r := m.result(e)
		if len(r.Inner) == 0 {
			continue
		}
		if overlaps(r, grouped) {
			continue
		}
		if why := structural(r, uses); why != "" {
			rejected = append(rejected, Rejection{Root: e, Reason: why})
			continue
		}
		if opts.Check != nil {
			if err := opts.Check(r); err != nil {
				rejected = append(rejected, Rejection{Root: e, Reason: err.Error()})
				continue
			}
		}
		for _, x := range r.Inner {
			grouped[x] = true
		}
		groups[e] = r
	}
	if len(groups) == 0 {
		return root, rejected, nil
	}
	i := 0
	out := graph.Rewrite(root, func(rebuilt graph.Expr) graph.Expr {
		orig := nodes[i]
		i++
		r, ok := groups[orig]
		if !ok {
			return rebuilt
		}
		return outlineMatch(r, rebuilt, opts.Attrs)
	})
	if err := typeNew(out); err != nil {
		return nil, nil, fmt.Errorf("pattern partition: %w", err)
	}
	return out, rejected, nil
}

// overlaps reports whether a match's expressions are already grouped.
func overlaps(r *Result, grouped map[graph.Expr]bool) bool {
	for _, x := range r.Inner {
		if grouped[x] {
			return true
		}
	}
	return false
}

// structural returns why a match cannot become a function, or "".
func structural(r *Result, uses map[graph.Expr][]graph.Expr) string {
	inner := map[graph.Expr]bool{}
	for _, x := range r.Inner {
		inner[x] = true
	}
	for _, x := range r.Inner {
		if x == r.Root {
			continue
		}
		for _, u := range uses[x] {
			if !inner[u] {
				return fmt.Sprintf("%s inside the match is also used outside it", graph.Describe(x))
			}
		}
	}
	// An input computed from one of the match's expressions (which would
	// make the new call depend on itself) always passes through a use of
	// that expression outside the match, so the check above covers
	// cycles too.
	return ""
}

// outlineMatch builds the call replacing a match. rebuilt is the root
// with its inputs already rewritten: the call's arguments are taken from
// it, the function body from the original expressions.
func outlineMatch(r *Result, rebuilt graph.Expr, attrs ir.Attrs) graph.Expr {
	params := make([]*graph.Var, len(r.Inputs))
	paramOf := map[graph.Expr]*graph.Var{}
	for k, in := range r.Inputs {
		params[k] = graph.NewVar(fmt.Sprintf("p%d", k), in.Type())
		paramOf[in] = params[k]
	}
	// The function body: the inner expressions over the parameters.
	body := substitute(r.Root, paramOf)
	fnAttrs := attrs.Clone()
	if fnAttrs == nil {
		fnAttrs = ir.Attrs{}
	}
	fnAttrs[graph.AttrPartitionedFromPattern] = fromPattern(r)
	fn := graph.NewFunction(params, body, fnAttrs)
	args := rebuiltInputs(r, rebuilt)
	call := graph.NewFuncCall(fn, args)
	if c, ok := r.Root.(*graph.Call); ok {
		call.Span = c.Span
	}
	return call
}

// substitute copies the expressions under root, replacing those in
// paramOf by their parameters (whose subgraphs are not copied).
func substitute(root graph.Expr, paramOf map[graph.Expr]*graph.Var) graph.Expr {
	memo := map[graph.Expr]graph.Expr{}
	var visit func(graph.Expr) graph.Expr
	visit = func(e graph.Expr) graph.Expr {
		if v, ok := paramOf[e]; ok {
			return v
		}
		if r, ok := memo[e]; ok {
			return r
		}
		var out graph.Expr = e
		switch x := e.(type) {
		case *graph.Call:
			args := make([]graph.Expr, len(x.Args))
			for i, a := range x.Args {
				args[i] = visit(a)
			}
			out = &graph.Call{Op: x.Op, Fn: x.Fn, Args: args, Attrs: x.Attrs, Span: x.Span}
		case *graph.Tuple:
			fs := make([]graph.Expr, len(x.Fields))
			for i, f := range x.Fields {
				fs[i] = visit(f)
			}
			out = graph.NewTuple(fs)
		case *graph.TupleGetItem:
			out = graph.NewTupleGetItem(visit(x.Tuple), x.Index)
		}
		memo[e] = out
		return out
	}
	return visit(root)
}

// rebuiltInputs finds the rewritten version of each input of r under
// rebuilt (the root with rewritten children): it walks the original and
// the rebuilt expressions in step.
func rebuiltInputs(r *Result, rebuilt graph.Expr) []graph.Expr {
	want := map[graph.Expr]int{}
	for k, in := range r.Inputs {
		want[in] = k
	}
	out := make([]graph.Expr, len(r.Inputs))
	found := make([]bool, len(r.Inputs))
	seen := map[graph.Expr]bool{}
	var walk func(orig, now graph.Expr)
	walk = func(orig, now graph.Expr) {
		if k, ok := want[orig]; ok {
			if !found[k] {
				out[k], found[k] = now, true
			}
			return
		}
		if seen[orig] {
			return
		}
		seen[orig] = true
		oc, nc := dataInputs(orig), dataInputs(now)
		for i := range oc {
			if i < len(nc) {
				walk(oc[i], nc[i])
			}
		}
	}
	walk(r.Root, rebuilt)
	for k := range out {
		if !found[k] {
			out[k] = r.Inputs[k]
		}
	}
	return out
}

// fromPattern is the PartitionedFromPattern attribute: the matched
// operators in post order, each followed by "_" (TVM's form, e.g.
// "nn.conv2d_nn.bias_add_nn.relu_").
func fromPattern(r *Result) string {
	var b strings.Builder
	for _, e := range r.Inner {
		switch x := e.(type) {
		case *graph.Call:
			if x.Op != nil {
				b.WriteString(x.Op.Name)
			} else {
				b.WriteString("Call")
			}
		case *graph.Tuple:
			b.WriteString("Tuple")
		case *graph.TupleGetItem:
			fmt.Fprintf(&b, "TupleGetItem%d", x.Index)
		}
		b.WriteByte('_')
	}
	return b.String()
}

// Outline returns the call Partition would make of the match, with the
// match's own inputs as arguments and attrs (plus PartitionedFromPattern)
// on the function, typed. Check functions use it to ask a target whether
// it takes the composite call before the graph changes.
func (r *Result) Outline(attrs ir.Attrs) (*graph.Call, error) {
	c := outlineMatch(r, r.Root, attrs).(*graph.Call)
	if err := typeNew(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Entry is one row of a pattern table (a target kind's composites): the
// Composite name given to the functions made of its matches, the
// pattern, and an optional check that can refuse a match.
type Entry struct {
	// Name is the Composite attribute, "<kind>.<name>" ("dnnl.conv2d_bias_relu").
	Name string
	// Pattern is what to match.
	Pattern Pattern
	// Check accepts a match (nil) or refuses it with the reason; nil
	// accepts every match.
	Check func(r *Result) error
}
