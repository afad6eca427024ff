package tir

// Visit walks n in pre-order, calling f on every statement and expression.
// When f returns false the children of that node are skipped. Variables are
// visited where they are used as expressions; the variables a For, LetStmt
// or Allocate defines are not visited as children (read them from the node).
func Visit(n Node, f func(Node) bool) {
	if n == nil || !f(n) {
		return
	}
	switch x := n.(type) {
	case *IntImm, *FloatImm, *StringImm, *Var:
	case *Binary:
		Visit(x.A, f)
		Visit(x.B, f)
	case *Not:
		Visit(x.A, f)
	case *Select:
		Visit(x.Cond, f)
		Visit(x.True, f)
		Visit(x.False, f)
	case *Cast:
		Visit(x.Value, f)
	case *BufferLoad:
		for _, i := range x.Indices {
			Visit(i, f)
		}
	case *Call:
		for _, a := range x.Args {
			Visit(a, f)
		}
	case *For:
		Visit(x.Min, f)
		Visit(x.Extent, f)
		Visit(x.Body, f)
	case *BufferStore:
		Visit(x.Value, f)
		for _, i := range x.Indices {
			Visit(i, f)
		}
	case *Allocate:
		Visit(x.Body, f)
	case *IfThenElse:
		Visit(x.Cond, f)
		Visit(x.Then, f)
		if x.Else != nil {
			Visit(x.Else, f)
		}
	case *LetStmt:
		Visit(x.Value, f)
		Visit(x.Body, f)
	case *SeqStmt:
		for _, s := range x.Seq {
			Visit(s, f)
		}
	case *Evaluate:
		Visit(x.Value, f)
	case *AttrStmt:
		Visit(x.Value, f)
		Visit(x.Body, f)
	default:
		panic("tir.Visit: unknown node")
	}
}

// Mutator rewrites a tree bottom-up. Children are rewritten first; a node
// whose children did not change is kept (not copied), otherwise a copy with
// the new children is made; then the post-order callback (Stmt or Expr)
// may replace the node. The pre-order callbacks (PreStmt, PreExpr) run
// before descending: when one returns non-nil, that result replaces the
// node and its children are not visited (use this for passes that need to
// handle a node with context). Any callback may be nil.
//
// A pass that folds every Add of two constants is:
//
//	m := &tir.Mutator{Expr: func(e tir.PrimExpr) tir.PrimExpr {
//		if b, ok := e.(*tir.Binary); ok && b.Op == tir.OpAdd {
//			return tir.Add(b.A, b.B)
//		}
//		return e
//	}}
//	body := m.MutateStmt(f.Body)
type Mutator struct {
	PreStmt func(Stmt) Stmt
	Stmt    func(Stmt) Stmt
	PreExpr func(PrimExpr) PrimExpr
	Expr    func(PrimExpr) PrimExpr
}

// MutateStmt rewrites s with stmt and expr post-order callbacks (either may
// be nil).
func MutateStmt(s Stmt, stmt func(Stmt) Stmt, expr func(PrimExpr) PrimExpr) Stmt {
	return (&Mutator{Stmt: stmt, Expr: expr}).MutateStmt(s)
}

// MutateExpr rewrites e with a post-order callback.
func MutateExpr(e PrimExpr, expr func(PrimExpr) PrimExpr) PrimExpr {
	return (&Mutator{Expr: expr}).MutateExpr(e)
}

// MutateExpr rewrites an expression.
func (m *Mutator) MutateExpr(e PrimExpr) PrimExpr {
	if e == nil {
		return nil
	}
	if m.PreExpr != nil {
		if r := m.PreExpr(e); r != nil {
			return r
		}
	}
	out := e
	switch x := e.(type) {
	case *IntImm, *FloatImm, *StringImm, *Var:
	case *Binary:
		a, b := m.MutateExpr(x.A), m.MutateExpr(x.B)
		if a != x.A || b != x.B {
			out = &Binary{Op: x.Op, A: a, B: b}
		}
	case *Not:
		if a := m.MutateExpr(x.A); a != x.A {
			out = &Not{A: a}
		}
	case *Select:
		c, t, f := m.MutateExpr(x.Cond), m.MutateExpr(x.True), m.MutateExpr(x.False)
		if c != x.Cond || t != x.True || f != x.False {
			out = &Select{Cond: c, True: t, False: f}
		}
	case *Cast:
		if v := m.MutateExpr(x.Value); v != x.Value {
			out = &Cast{T: x.T, Value: v}
		}
	case *BufferLoad:
		if idx, changed := m.mutateExprs(x.Indices); changed {
			out = &BufferLoad{Buffer: x.Buffer, Indices: idx}
		}
	case *Call:
		if args, changed := m.mutateExprs(x.Args); changed {
			out = &Call{T: x.T, Op: x.Op, Extern: x.Extern, Args: args, Kernel: x.Kernel}
		}
	default:
		panic("tir.Mutator: unknown expression")
	}
	if m.Expr != nil {
		out = m.Expr(out)
	}
	return out
}

func (m *Mutator) mutateExprs(es []PrimExpr) ([]PrimExpr, bool) {
	var out []PrimExpr
	for i, e := range es {
		n := m.MutateExpr(e)
		if n != e && out == nil {
			out = append(make([]PrimExpr, 0, len(es)), es[:i]...)
		}
		if out != nil {
			out = append(out, n)
		}
	}
	if out == nil {
		return es, false
	}
	return out, true
}

// MutateStmt rewrites a statement.
func (m *Mutator) MutateStmt(s Stmt) Stmt {
	if s == nil {
		return nil
	}
	if m.PreStmt != nil {
		if r := m.PreStmt(s); r != nil {
			return r
		}
	}
	out := s
	switch x := s.(type) {
	case *For:
		mn, ext, body := m.MutateExpr(x.Min), m.MutateExpr(x.Extent), m.MutateStmt(x.Body)
		if mn != x.Min || ext != x.Extent || body != x.Body {
			out = &For{Var: x.Var, Min: mn, Extent: ext, Kind: x.Kind, Body: body, Annotations: x.Annotations}
		}
	case *BufferStore:
		v := m.MutateExpr(x.Value)
		idx, changed := m.mutateExprs(x.Indices)
		if v != x.Value || changed {
			out = &BufferStore{Buffer: x.Buffer, Value: v, Indices: idx}
		}
	case *Allocate:
		if body := m.MutateStmt(x.Body); body != x.Body {
			out = &Allocate{Buffer: x.Buffer, Body: body}
		}
	case *IfThenElse:
		c, t, e := m.MutateExpr(x.Cond), m.MutateStmt(x.Then), m.MutateStmt(x.Else)
		if c != x.Cond || t != x.Then || e != x.Else {
			out = &IfThenElse{Cond: c, Then: t, Else: e}
		}
	case *LetStmt:
		v, body := m.MutateExpr(x.Value), m.MutateStmt(x.Body)
		if v != x.Value || body != x.Body {
			out = &LetStmt{Var: x.Var, Value: v, Body: body}
		}
	case *SeqStmt:
		var seq []Stmt
		for i, c := range x.Seq {
			n := m.MutateStmt(c)
			if n != c && seq == nil {
				seq = append(make([]Stmt, 0, len(x.Seq)), x.Seq[:i]...)
			}
			if seq != nil {
				seq = append(seq, n)
			}
		}
		if seq != nil {
			out = &SeqStmt{Seq: seq}
		}
	case *Evaluate:
		if v := m.MutateExpr(x.Value); v != x.Value {
			out = &Evaluate{Value: v}
		}
	case *AttrStmt:
		v, body := m.MutateExpr(x.Value), m.MutateStmt(x.Body)
		if v != x.Value || body != x.Body {
			out = &AttrStmt{Key: x.Key, Value: v, Body: body}
		}
	default:
		panic("tir.Mutator: unknown statement")
	}
	if m.Stmt != nil {
		out = m.Stmt(out)
	}
	return out
}

// Substitute replaces every use of the variables in vmap by the mapped
// expressions (which must have the variables' types). Definitions (loop
// and let variables) are not renamed. The result is not simplified.
func Substitute(s Stmt, vmap map[*Var]PrimExpr) Stmt {
	if len(vmap) == 0 {
		return s
	}
	return (&Mutator{Expr: substFn(vmap)}).MutateStmt(s)
}

// SubstituteExpr is Substitute for an expression.
func SubstituteExpr(e PrimExpr, vmap map[*Var]PrimExpr) PrimExpr {
	if len(vmap) == 0 {
		return e
	}
	return (&Mutator{Expr: substFn(vmap)}).MutateExpr(e)
}

func substFn(vmap map[*Var]PrimExpr) func(PrimExpr) PrimExpr {
	return func(e PrimExpr) PrimExpr {
		if v, ok := e.(*Var); ok {
			if r, ok := vmap[v]; ok {
				return r
			}
		}
		return e
	}
}

// ExprEqual reports whether a and b are structurally equal: same node
// kinds, operators, types and constants, the same variables and buffers
// (by identity).
func ExprEqual(a, b PrimExpr) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	switch x := a.(type) {
	case *IntImm:
		y, ok := b.(*IntImm)
		return ok && x.T == y.T && x.Value == y.Value
	case *FloatImm:
		y, ok := b.(*FloatImm)
		return ok && x.T == y.T && x.Value == y.Value
	case *StringImm:
		y, ok := b.(*StringImm)
		return ok && x.Value == y.Value
	case *Var:
		return false // identity checked above
	case *Binary:
		y, ok := b.(*Binary)
		return ok && x.Op == y.Op && ExprEqual(x.A, y.A) && ExprEqual(x.B, y.B)
	case *Not:
		y, ok := b.(*Not)
		return ok && ExprEqual(x.A, y.A)
	case *Select:
		y, ok := b.(*Select)
		return ok && ExprEqual(x.Cond, y.Cond) && ExprEqual(x.True, y.True) && ExprEqual(x.False, y.False)
	case *Cast:
		y, ok := b.(*Cast)
		return ok && x.T == y.T && ExprEqual(x.Value, y.Value)
	case *BufferLoad:
		y, ok := b.(*BufferLoad)
		return ok && x.Buffer == y.Buffer && exprsEqual(x.Indices, y.Indices)
	case *Call:
		y, ok := b.(*Call)
		return ok && x.T == y.T && x.Op == y.Op && x.Extern == y.Extern && exprsEqual(x.Args, y.Args)
	}
	return false
}

func exprsEqual(a, b []PrimExpr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !ExprEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}
