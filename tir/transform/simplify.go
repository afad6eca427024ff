package transform

import "github.com/kiln-dev/kiln/tir"

// Simplify returns the constant-folding pass. It re-folds every binary
// operation bottom-up with tir.Fold (integer and float constants, x+0,
// x*1, x*0 on integers, x/1, reassociation of constants), folds casts,
// negations, Selects and if_then_else with constant conditions, replaces
// loops of extent 1 by their body, keeps only the taken branch of an if
// with a constant condition, rewrites pow(x, 2) as x*x and pow(x, 3) as
// x*x*x, inlines let bindings of constants and variables, and recombines
// a split index:
// floordiv(y, c)*(c*k) + floormod(y, c)*k is y*k (exact for every integer
// y, by the definition of floor division), which turns the index of a
// fused loop nest back into the fused variable. It does no range
// analysis (SimplifyIndices does) and moves no code.
func Simplify() Pass {
	return Pass{Name: "Simplify", Run: func(f *tir.PrimFunc) (*tir.PrimFunc, error) {
		return f.WithBody(SimplifyStmt(f.Body)), nil
	}}
}

// SimplifyExpr simplifies an expression (see Simplify).
func SimplifyExpr(e tir.PrimExpr) tir.PrimExpr { return tir.MutateExpr(e, simplifyExprNode) }

// SimplifyStmt simplifies a statement (see Simplify).
func SimplifyStmt(s tir.Stmt) tir.Stmt { return tir.MutateStmt(s, simplifyStmtNode, simplifyExprNode) }

// simplifyExprNode simplifies one node whose children are simplified.
func simplifyExprNode(e tir.PrimExpr) tir.PrimExpr {
	switch x := e.(type) {
	case *tir.Binary:
		if x.Op == tir.OpAdd {
			if y, ok := recombineDivMod(x.A, x.B); ok {
				return y
			}
			if y, ok := recombineDivMod(x.B, x.A); ok {
				return y
			}
		}
		return tir.Fold(x.Op, x.A, x.B)
	case *tir.Not:
		return tir.NewNot(x.A)
	case *tir.Cast:
		return tir.NewCast(x.T, x.Value)
	case *tir.Select:
		if c, ok := tir.ConstInt(x.Cond); ok {
			taken, other := x.True, x.False
			if c == 0 {
				taken, other = other, taken
			}
			if !tir.HasSideEffect(other) {
				return taken
			}
		}
		if tir.ExprEqual(x.True, x.False) && !tir.HasSideEffect(x.Cond) {
			return x.True
		}
	case *tir.Call:
		// pow(x, 2) is x*x: both are the correctly rounded square (the
		// float64 square of a float32 is exact), and a multiplication
		// vectorises where a libm call does not. pow(x, 3) is x*x*x
		// (GPT-2's GELU), within 2 ulp of the correctly rounded cube (two
		// roundings, 1.5 ulp at worst).
		if x.Op == tir.IntrinPow {
			if c, ok := x.Args[1].(*tir.FloatImm); ok && (c.Value == 2 || c.Value == 3) && !tir.HasSideEffect(x.Args[0]) {
				sq := tir.Mul(x.Args[0], x.Args[0])
				if c.Value == 3 {
					return tir.Mul(sq, x.Args[0])
				}
				return sq
			}
		}
		if x.Op == tir.IntrinIfThenElse {
			if c, ok := tir.ConstInt(x.Args[0]); ok {
				if c != 0 {
					return x.Args[1]
				}
				return x.Args[2]
			}
		}
	}
	return e
}

// simplifyStmtNode simplifies one statement whose children are simplified.
func simplifyStmtNode(s tir.Stmt) tir.Stmt {
	switch x := s.(type) {
	case *tir.For:
		if n, ok := tir.ConstInt(x.Extent); ok && n == 1 {
			return SimplifyStmt(tir.Substitute(x.Body, map[*tir.Var]tir.PrimExpr{x.Var: x.Min}))
		}
	case *tir.IfThenElse:
		if c, ok := tir.ConstInt(x.Cond); ok {
			switch {
			case c != 0:
				return x.Then
			case x.Else != nil:
				return x.Else
			default:
				return tir.NoOp()
			}
		}
	case *tir.LetStmt:
		switch x.Value.(type) {
		case *tir.IntImm, *tir.FloatImm, *tir.Var:
			return SimplifyStmt(tir.Substitute(x.Body, map[*tir.Var]tir.PrimExpr{x.Var: x.Value}))
		}
	}
	return s
}

// scaled splits e into (base, k) for e = base*k with a constant integer
// k (k = 1 when e is not such a product).
func scaled(e tir.PrimExpr) (tir.PrimExpr, int64) {
	if m, ok := e.(*tir.Binary); ok && m.Op == tir.OpMul {
		if k, ok := tir.ConstInt(m.B); ok {
			return m.A, k
		}
		if k, ok := tir.ConstInt(m.A); ok {
			return m.B, k
		}
	}
	return e, 1
}

// recombineDivMod returns y*k when a is floordiv(y, c)*(c*k) and b is
// floormod(y, c)*k (integers, c != 0, k != 0; the side-effect-free y
// appears in both).
func recombineDivMod(a, b tir.PrimExpr) (tir.PrimExpr, bool) {
	da, ka := scaled(a)
	mb, kb := scaled(b)
	d, ok1 := da.(*tir.Binary)
	m, ok2 := mb.(*tir.Binary)
	if !ok1 || !ok2 || d.Op != tir.OpFloorDiv || m.Op != tir.OpFloorMod || !d.Type().IsInteger() {
		return nil, false
	}
	c1, ok1 := tir.ConstInt(d.B)
	c2, ok2 := tir.ConstInt(m.B)
	if !ok1 || !ok2 || c1 != c2 || c1 == 0 || kb == 0 || ka != c1*kb || ka/c1 != kb {
		return nil, false
	}
	if !tir.ExprEqual(d.A, m.A) || tir.HasSideEffect(d.A) || d.A.Type() != a.Type() {
		return nil, false
	}
	if kb == 1 {
		return d.A, true
	}
	return tir.Fold(tir.OpMul, d.A, tir.IntConst(d.A.Type().DType, kb)), true
}
