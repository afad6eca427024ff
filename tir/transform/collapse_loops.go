package transform

import (
	"math"

	"github.com/kiln-dev/kiln/tir"
)

// CollapseLoops returns the pass that merges a serial loop with the loop
// that is its whole body when every access walks one contiguous range:
//
//	for i in 0..N (serial):            for q in 0..N*M (the inner kind):
//	    for j in 0..M:          →          A[c*q + a] = B[d*q + b]
//	        A[c*M*i + c*j + a] = B[d*M*i + d*j + b]
//
// It applies when i and j occur only in buffer indices, each index is
// affine in them with i's coefficient M times j's (the index is then a
// function of i*M + j), both loops start at 0 and have constant extents,
// and the outer loop carries no annotations. The merged loop takes the
// inner loop's kind and annotations.
//
// A fused operator's epilogue is such a nest when it copies a kernel's
// block into rows of a tensor as wide as the block's: mobilenet_v2's
// 14x14 1x1 convolutions applied bias and clip in 14-column loops, which
// the C compiler vectorized one short row at a time (a sixth of the
// kernel's time); as one 196-column loop the epilogue took a tenth of
// that. It runs in Phase1, after FlattenBuffers and the index
// simplification, where every index is a flat affine form.
func CollapseLoops() Pass {
	return Pass{Name: "CollapseLoops", Run: func(f *tir.PrimFunc) (*tir.PrimFunc, error) {
		return f.WithBody(CollapseLoopsStmt(f.Body)), nil
	}}
}

// CollapseLoopsStmt applies CollapseLoops to a statement: inner nests
// first, so three loops whose indices allow it become one.
func CollapseLoopsStmt(s tir.Stmt) tir.Stmt {
	return tir.MutateStmt(s, func(s tir.Stmt) tir.Stmt {
		if f, ok := s.(*tir.For); ok {
			if g := collapse(f); g != nil {
				return g
			}
		}
		return s
	}, nil)
}

// collapse merges outer with its body loop, or returns nil.
func collapse(outer *tir.For) *tir.For {
	inner, ok := outer.Body.(*tir.For)
	if !ok || outer.Kind != tir.Serial || len(outer.Annotations) > 0 || inner.Kind == tir.Parallel {
		return nil
	}
	if outer.Var.T != inner.Var.T || !outer.Var.T.DType.IsInt() {
		return nil
	}
	if lo, ok := tir.ConstInt(outer.Min); !ok || lo != 0 {
		return nil
	}
	if lo, ok := tir.ConstInt(inner.Min); !ok || lo != 0 {
		return nil
	}
	n, ok1 := tir.ConstInt(outer.Extent)
	m, ok2 := tir.ConstInt(inner.Extent)
	if !ok1 || !ok2 || n <= 0 || m <= 0 || n > math.MaxInt32/m {
		return nil
	}
	i, j := outer.Var, inner.Var
	// The inner loop's bounds are constants; i and j may occur only in
	// buffer indices, each a function of i*m + j.
	q := tir.NewVar(i.Name+"_"+j.Name+"_fused", j.T)
	var r indexSimplifier
	ok = true
	rewrite := func(idx []tir.PrimExpr) []tir.PrimExpr {
		out := make([]tir.PrimExpr, len(idx))
		for k, e := range idx {
			out[k] = e
			if !ok || !uses(e, i, j) {
				continue
			}
			a, lin := r.linear(e)
			if !lin {
				ok = false
				continue
			}
			var ci, cj int64
			rest := affine{c: a.c}
			for _, t := range a.terms {
				switch t.atom {
				case tir.PrimExpr(i):
					ci = t.coef
				case tir.PrimExpr(j):
					cj = t.coef
				default:
					if uses(t.atom, i, j) {
						ok = false
					}
					rest.terms = append(rest.terms, t)
				}
			}
			if !ok || ci != cj*m {
				ok = false
				continue
			}
			if cj != 0 {
				rest.terms = append(rest.terms, term{q, cj})
			}
			out[k] = rest.build(e.Type().DType)
		}
		return out
	}
	var m2 *tir.Mutator
	m2 = &tir.Mutator{
		PreExpr: func(e tir.PrimExpr) tir.PrimExpr {
			switch x := e.(type) {
			case *tir.BufferLoad:
				if !anyUses(x.Indices, i, j) {
					return nil
				}
				return &tir.BufferLoad{Buffer: x.Buffer, Indices: rewrite(x.Indices)}
			case *tir.Var:
				if x == i || x == j {
					ok = false
				}
			}
			return nil
		},
		PreStmt: func(s tir.Stmt) tir.Stmt {
			st, isStore := s.(*tir.BufferStore)
			if !isStore || (!anyUses(st.Indices, i, j) && !uses(st.Value, i, j)) {
				return nil
			}
			return &tir.BufferStore{Buffer: st.Buffer, Value: m2.MutateExpr(st.Value), Indices: rewrite(st.Indices)}
		},
	}
	body := m2.MutateStmt(inner.Body)
	if !ok || uses(body, i, j) {
		return nil
	}
	g := tir.NewFor(q, tir.IntConst(q.T.DType, 0), tir.IntConst(q.T.DType, n*m), inner.Kind, body)
	g.Annotations = inner.Annotations
	return g
}

// uses reports whether n refers to variable a or b.
func uses(n tir.Node, a, b *tir.Var) bool {
	found := false
	tir.Visit(n, func(x tir.Node) bool {
		if v, ok := x.(*tir.Var); ok && (v == a || v == b) {
			found = true
		}
		return !found
	})
	return found
}

// anyUses reports whether any of es refers to a or b.
func anyUses(es []tir.PrimExpr, a, b *tir.Var) bool {
	for _, e := range es {
		if uses(e, a, b) {
			return true
		}
	}
	return false
}
