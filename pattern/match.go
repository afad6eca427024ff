package pattern

import (
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
)

// role says what a matched expression is to the match: part of it
// (inner), an input (leaf), a constant kept inside, or nothing of its own
// (a wrapper pattern's binding, a callee).
type role uint8

const (
	roleNone role = iota
	roleInner
	roleLeaf
	roleConst
)

type binding struct {
	p    Pattern // nil for a dominator path node
	e    graph.Expr
	role role
}

// matcher holds the state of one match attempt: the bindings made so far
// (a trail, so that failed alternatives undo theirs) and the consumers of
// each expression of the enclosing graph (for dominator patterns).
type matcher struct {
	uses  map[graph.Expr][]graph.Expr
	bind  map[Pattern]graph.Expr
	trail []binding
}

func newMatcher(uses map[graph.Expr][]graph.Expr) *matcher {
	return &matcher{uses: uses, bind: map[Pattern]graph.Expr{}}
}

// Uses returns the consumers of each expression under root (each
// consumer listed once per use).
func Uses(root graph.Expr) map[graph.Expr][]graph.Expr {
	uses := map[graph.Expr][]graph.Expr{}
	graph.PostOrder(root, func(e graph.Expr) {
		for _, c := range graph.Children(e) {
			uses[c] = append(uses[c], e)
		}
	})
	return uses
}

func (m *matcher) undo(mark int) {
	for _, b := range m.trail[mark:] {
		if b.p != nil {
			delete(m.bind, b.p)
		}
	}
	m.trail = m.trail[:mark]
}

// match matches p against e; a pattern already bound must meet the same
// expression again.
func (m *matcher) match(p Pattern, e graph.Expr) bool {
	if e == nil {
		return false
	}
	if prev, ok := m.bind[p]; ok {
		return prev == e
	}
	mark := len(m.trail)
	if !p.match(m, e) {
		m.undo(mark)
		return false
	}
	m.bind[p] = e
	m.trail = append(m.trail, binding{p: p, e: e, role: roleOf(p)})
	return true
}

func roleOf(p Pattern) role {
	switch p.(type) {
	case *WildcardPattern, *VarPattern, *ExprPattern:
		return roleLeaf
	case *ConstantPattern:
		return roleConst
	case *CallPattern, *TuplePattern, *TupleGetItemPattern:
		return roleInner
	}
	return roleNone
}

func (*WildcardPattern) match(*matcher, graph.Expr) bool { return true }

func (p *VarPattern) match(_ *matcher, e graph.Expr) bool {
	v, ok := e.(*graph.Var)
	return ok && (p.Name == "" || v.Name == p.Name)
}

func (*ConstantPattern) match(_ *matcher, e graph.Expr) bool {
	_, ok := e.(*graph.Constant)
	return ok
}

func (p *ExprPattern) match(_ *matcher, e graph.Expr) bool { return e == p.Expr }

func (p *CallPattern) match(m *matcher, e graph.Expr) bool {
	c, ok := e.(*graph.Call)
	if !ok {
		return false
	}
	switch {
	case p.Op != nil:
		if c.Op != p.Op {
			return false
		}
	case p.OpKind != nil:
		if c.Op == nil || c.Op.Pattern != *p.OpKind {
			return false
		}
	case p.Fn != nil:
		if c.Op != nil || !m.matchCallee(p.Fn, c.Fn) {
			return false
		}
	}
	if p.AnyArgs {
		return true
	}
	if len(c.Args) != len(p.Args) {
		return false
	}
	mark := len(m.trail)
	if m.matchArgs(p.Args, c.Args) {
		return true
	}
	if commutative(c) {
		m.undo(mark)
		return m.matchArgs([]Pattern{p.Args[1], p.Args[0]}, c.Args)
	}
	return false
}

// commutative reports whether c is a call of add or multiply of two
// arguments, whose patterns also match in swapped order.
func commutative(c *graph.Call) bool {
	return len(c.Args) == 2 && (c.Op == op.Add || c.Op == op.Multiply)
}

func (m *matcher) matchArgs(ps []Pattern, args []graph.Expr) bool {
	for i, a := range args {
		if !m.match(ps[i], a) {
			return false
		}
	}
	return true
}

// matchCallee matches the callee of a function call. The callee is not a
// dataflow input, so what it binds has no role in the match.
func (m *matcher) matchCallee(p Pattern, fn graph.Expr) bool {
	mark := len(m.trail)
	if !m.match(p, fn) {
		return false
	}
	for i := mark; i < len(m.trail); i++ {
		m.trail[i].role = roleNone
	}
	return true
}

func (p *FunctionPattern) match(_ *matcher, e graph.Expr) bool {
	f, ok := e.(*graph.Function)
	if !ok {
		return false
	}
	if p.Body == nil {
		return true
	}
	// The body is another scope: match it on its own.
	return newMatcher(Uses(f.Body)).match(p.Body, f.Body)
}

func (p *TuplePattern) match(m *matcher, e graph.Expr) bool {
	t, ok := e.(*graph.Tuple)
	if !ok {
		return false
	}
	if p.AnyArity {
		return true
	}
	return len(t.Fields) == len(p.Fields) && m.matchArgs(p.Fields, t.Fields)
}

func (p *TupleGetItemPattern) match(m *matcher, e graph.Expr) bool {
	t, ok := e.(*graph.TupleGetItem)
	if !ok || (p.Index >= 0 && t.Index != p.Index) {
		return false
	}
	return m.match(p.Tuple, t.Tuple)
}

func (p *AltPattern) match(m *matcher, e graph.Expr) bool {
	for _, a := range p.Alts {
		mark := len(m.trail)
		if m.match(a, e) {
			return true
		}
		m.undo(mark)
	}
	return false
}

func (p *AttrPattern) match(m *matcher, e graph.Expr) bool {
	var have ir.Attrs
	switch x := e.(type) {
	case *graph.Call:
		have = x.Attrs
		if f, ok := x.Fn.(*graph.Function); ok {
			have = f.Attrs
		}
	case *graph.Function:
		have = x.Attrs
	default:
		return false
	}
	for k, want := range p.Attrs {
		got, ok := have[k]
		if !ok || !attrValueEqual(got, want) {
			return false
		}
	}
	return m.match(p.P, e)
}

// attrValueEqual compares attribute values as printed, after widening Go
// ints and float32s in a pattern to the IR's int64 and float64.
func attrValueEqual(got, want any) bool {
	return ir.FormatAttrValue(normalize(got)) == ir.FormatAttrValue(normalize(want))
}

func normalize(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case float32:
		return float64(x)
	case []int:
		out := make([]int64, len(x))
		for i, d := range x {
			out[i] = int64(d)
		}
		return out
	case []float32:
		out := make([]float64, len(x))
		for i, d := range x {
			out[i] = float64(d)
		}
		return out
	case op.Pattern:
		return int64(x)
	}
	return v
}

func (p *TypePattern) match(m *matcher, e graph.Expr) bool {
	t := e.Type()
	if t == nil {
		return false
	}
	if p.Type != nil && !ir.TypeEqual(p.Type, t) {
		return false
	}
	if p.DType != nil || p.Shape != nil {
		tt, ok := t.(*ir.TensorType)
		if !ok || (p.DType != nil && tt.DType != *p.DType) || (p.Shape != nil && !tt.Shape.Equal(p.Shape)) {
			return false
		}
	}
	return m.match(p.P, e)
}

// match of a dominator pattern: the child matches, every input of the
// child leads through path expressions to the one parent, and no path
// expression is used outside the matched region.
func (p *DominatorPattern) match(m *matcher, e graph.Expr) bool {
	if !m.match(p.Child, e) {
		return false
	}
	path := map[graph.Expr]bool{}
	if !m.matchesPath(p, e, path) {
		return false
	}
	if m.uses != nil {
		for n := range path {
			for _, u := range m.uses[n] {
				if u != e && !path[u] {
					return false
				}
			}
		}
	}
	for n := range path {
		m.trail = append(m.trail, binding{e: n, role: roleInner})
	}
	// The child's own argument patterns bound its inputs as leaves; they
	// are path or parent expressions, that is, part of the match.
	return true
}

// matchesPath checks that every dataflow input of e matches the parent or
// matches the path and, recursively, satisfies the same.
func (m *matcher) matchesPath(p *DominatorPattern, e graph.Expr, path map[graph.Expr]bool) bool {
	for _, in := range dataInputs(e) {
		if path[in] {
			continue
		}
		mark := len(m.trail)
		if m.match(p.Parent, in) {
			continue
		}
		m.undo(mark)
		// Each path expression matches the path pattern on its own: the
		// path pattern describes one step and is reused for every step.
		if !newMatcher(nil).match(p.Path, in) {
			return false
		}
		path[in] = true
		if !m.matchesPath(p, in, path) {
			return false
		}
	}
	return true
}

// dataInputs are e's dataflow inputs (a call's arguments, not its callee).
func dataInputs(e graph.Expr) []graph.Expr {
	if c, ok := e.(*graph.Call); ok {
		return c.Args
	}
	return graph.Children(e)
}

// Result is one match: the expression it is rooted at and what each
// sub-pattern matched.
type Result struct {
	// Root is the matched expression.
	Root graph.Expr
	bind map[Pattern]graph.Expr
	// Inner are the matched expressions that are part of the match
	// (calls, tuples, projections, dominator paths), Root included, in
	// post order.
	Inner []graph.Expr
	// Inputs are the expressions matched as inputs (by wildcards,
	// variables and IsExpr) that are not also inner, in first-match
	// order.
	Inputs []graph.Expr
	// Constants are constants matched by IsConstant (kept inside a
	// partitioned function).
	Constants []*graph.Constant
}

// Get returns the expression p matched, or nil.
func (r *Result) Get(p Pattern) graph.Expr { return r.bind[p] }

// Match matches p against e (which must be typed for type patterns). For
// dominator patterns the uses of expressions are taken from e's own
// subgraph; Matcher takes them from an enclosing graph.
func Match(p Pattern, e graph.Expr) (*Result, bool) {
	return NewMatcher(e).Match(p, e)
}

// Matcher matches patterns against the expressions of one graph.
type Matcher struct {
	uses map[graph.Expr][]graph.Expr
}

// NewMatcher returns a matcher for expressions under root.
func NewMatcher(root graph.Expr) *Matcher { return &Matcher{uses: Uses(root)} }

// Match matches p against e, an expression under the matcher's root.
func (mm *Matcher) Match(p Pattern, e graph.Expr) (*Result, bool) {
	m := newMatcher(mm.uses)
	if !m.match(p, e) {
		return nil, false
	}
	return m.result(e), true
}

func (m *matcher) result(root graph.Expr) *Result {
	r := &Result{Root: root, bind: map[Pattern]graph.Expr{}}
	inner := map[graph.Expr]bool{}
	for _, b := range m.trail {
		if b.p != nil {
			r.bind[b.p] = b.e
		}
		if b.role == roleInner {
			inner[b.e] = true
		}
	}
	seen := map[graph.Expr]bool{}
	for _, b := range m.trail {
		if seen[b.e] || inner[b.e] {
			continue
		}
		switch b.role {
		case roleLeaf:
			seen[b.e] = true
			r.Inputs = append(r.Inputs, b.e)
		case roleConst:
			seen[b.e] = true
			r.Constants = append(r.Constants, b.e.(*graph.Constant))
		}
	}
	// Inner in post order: walk down from the root through inner nodes.
	visited := map[graph.Expr]bool{}
	var walk func(graph.Expr)
	walk = func(e graph.Expr) {
		if visited[e] || !inner[e] {
			return
		}
		visited[e] = true
		for _, c := range dataInputs(e) {
			walk(c)
		}
		r.Inner = append(r.Inner, e)
	}
	walk(root)
	return r
}
