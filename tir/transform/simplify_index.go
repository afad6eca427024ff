package transform

import (
	"cmp"
	"math"
	"math/bits"
	"slices"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
)

// SimplifyIndices returns the pass that simplifies integer division and
// remainder by constants with the ranges of the loop variables: the index
// arithmetic that reshapes, transposes, concatenations and splits leave
// when fused into one loop nest (ShuffleNet's channel shuffle between a
// Concat and a Split computes every element's source through a flat
// index divided and reduced by each axis' size). In a loop nest over
// i < 58, j < 28, k < 28, with f = 784i + 28j + k:
//
//	f / 784 = i,  f % 28 = k,  f / 1568 = i / 2,  (f / 28) % 28 = j
//
// The rule: a dividend S = g*A + r, where g divides the divisor d = g*q,
// every term of A is an integer and r (the terms whose coefficients g
// does not divide, with the constant's remainder) lies in [0, g) for
// every value of the variables, has S / d = A / q and S % d = g*(A % q)
// + r; q = 1 drops the division, and A within [0, q) drops it too. When
// no such g exists, the terms the divisor divides still leave the
// division: (d*A + r) / d = A + r / d and (d*A + r) % d = r % d for r >= 0
// (a depth-to-space's (3136i + 56j + k) / 2 = 1568i + 28j + k / 2). Only
// int32 and int64 expressions whose every node's range is known and
// within the type (no wrap-around, no negative dividend) are rewritten,
// so the results are equal for every value the variables take. Ranges
// come from loops with constant bounds and from let bindings; comparisons
// are left alone.
func SimplifyIndices() Pass {
	return Pass{Name: "SimplifyIndices", Run: func(f *tir.PrimFunc) (*tir.PrimFunc, error) {
		return f.WithBody(simplifyIndicesStmt(f.Body)), nil
	}}
}

// interval is a closed range of integers.
type interval struct{ lo, hi int64 }

// indexSimplifier holds the ranges of the variables in scope.
type indexSimplifier struct {
	ranges map[*tir.Var]interval
	m      *tir.Mutator
}

func simplifyIndicesStmt(s tir.Stmt) tir.Stmt {
	r := &indexSimplifier{ranges: map[*tir.Var]interval{}}
	r.m = &tir.Mutator{PreStmt: r.scope, Expr: r.expr}
	return r.m.MutateStmt(s)
}

// scope records the range of a loop or let variable while its body is
// rewritten (nil: the mutator descends as usual).
func (r *indexSimplifier) scope(s tir.Stmt) tir.Stmt {
	switch x := s.(type) {
	case *tir.For:
		mn, ok1 := tir.ConstInt(x.Min)
		ext, ok2 := tir.ConstInt(x.Extent)
		if !ok1 || !ok2 || ext < 1 {
			return nil
		}
		hi, ok := addChecked(mn, ext-1)
		if !ok {
			return nil
		}
		body := r.with(x.Var, interval{mn, hi}, x.Body)
		if body == x.Body {
			return x
		}
		return &tir.For{Var: x.Var, Min: x.Min, Extent: x.Extent, Kind: x.Kind, Body: body, Annotations: x.Annotations}
	case *tir.LetStmt:
		v := r.m.MutateExpr(x.Value)
		iv, ok := r.rangeOf(v)
		if !ok {
			return nil
		}
		body := r.with(x.Var, iv, x.Body)
		if v == x.Value && body == x.Body {
			return x
		}
		return &tir.LetStmt{Var: x.Var, Value: v, Body: body}
	}
	return nil
}

func (r *indexSimplifier) with(v *tir.Var, iv interval, body tir.Stmt) tir.Stmt {
	old, had := r.ranges[v]
	r.ranges[v] = iv
	out := r.m.MutateStmt(body)
	if had {
		r.ranges[v] = old
	} else {
		delete(r.ranges, v)
	}
	return out
}

// expr rewrites one division or remainder whose operands are rewritten.
func (r *indexSimplifier) expr(e tir.PrimExpr) tir.PrimExpr {
	b, ok := e.(*tir.Binary)
	if !ok {
		return e
	}
	switch b.Op {
	case tir.OpDiv, tir.OpFloorDiv, tir.OpMod, tir.OpFloorMod:
	default:
		return e
	}
	d := b.Type().DType
	if d != ir.Int32 && d != ir.Int64 {
		return e
	}
	div, ok := tir.ConstInt(b.B)
	if !ok || div < 1 {
		return e
	}
	if out, ok := r.divMod(b.Op, b.A, div, d); ok {
		return out
	}
	return e
}

// term is coef * atom in an affine form.
type term struct {
	atom tir.PrimExpr
	coef int64
}

// affine is sum of terms + c.
type affine struct {
	terms []term
	c     int64
}

// divMod simplifies a (op) div, or reports false.
func (r *indexSimplifier) divMod(op tir.BinaryOp, a tir.PrimExpr, div int64, d ir.DType) (tir.PrimExpr, bool) {
	if iv, ok := r.rangeOf(a); !ok || iv.lo < 0 {
		return nil, false
	}
	s, ok := r.linear(a)
	if !ok {
		return nil, false
	}
	isDiv := op == tir.OpDiv || op == tir.OpFloorDiv
	// Candidate g: the divisor itself, then the coefficients that divide
	// it, largest first.
	cands := []int64{div}
	for _, t := range s.terms {
		if c := abs64(t.coef); c > 1 && c < div && div%c == 0 {
			cands = append(cands, c)
		}
	}
	slices.SortFunc(cands, func(a, b int64) int { return cmp.Compare(b, a) })
	for _, g := range cands {
		high, low := s.split(g)
		lr, ok := r.affineRange(low)
		if !ok || lr.lo < 0 || lr.hi >= g {
			continue
		}
		q := div / g
		hr, ok := r.affineRange(high)
		if !ok || hr.lo < 0 {
			continue
		}
		// S = g*A + low with A = high >= 0 and 0 <= low < g.
		A := high.build(d)
		if isDiv {
			if q == 1 {
				return A, true
			}
			if hr.hi < q {
				return tir.IntConst(d, 0), true
			}
			inner := tir.Fold(op, A, tir.IntConst(d, q))
			if sub, ok := r.divMod(op, A, q, d); ok {
				inner = sub
			}
			return inner, true
		}
		var rem tir.PrimExpr
		switch {
		case q == 1:
			rem = tir.IntConst(d, 0)
		case hr.hi < q:
			rem = A
		default:
			rem = tir.Fold(op, A, tir.IntConst(d, q))
			if sub, ok := r.divMod(op, A, q, d); ok {
				rem = sub
			}
		}
		out := tir.Fold(tir.OpAdd, tir.Fold(tir.OpMul, rem, tir.IntConst(d, g)), low.build(d))
		return out, true
	}
	// Floor division distributes over a multiple of the divisor: S = d*A
	// + r with r >= 0 (of any size) has S / d = A + r / d and S % d = r %
	// d, which takes the multiple out of the division.
	high, low := s.split(div)
	if len(high.terms) == 0 && high.c == 0 {
		return nil, false
	}
	if lr, ok := r.affineRange(low); !ok || lr.lo < 0 {
		return nil, false
	}
	rest := tir.Fold(op, low.build(d), tir.IntConst(d, div))
	if isDiv {
		return tir.Fold(tir.OpAdd, high.build(d), rest), true
	}
	return rest, true
}

// split writes a as g*high + low: high holds the terms whose coefficients
// g divides (divided by g) and floor(c / g), low the other terms and c's
// remainder in [0, g).
func (a affine) split(g int64) (high, low affine) {
	for _, t := range a.terms {
		if t.coef%g == 0 {
			high.terms = append(high.terms, term{t.atom, t.coef / g})
		} else {
			low.terms = append(low.terms, t)
		}
	}
	high.c = floorDiv(a.c, g)
	low.c = a.c - high.c*g
	return high, low
}

// linear writes e as an affine form over atoms (every subexpression that
// is not a sum, a difference or a product with a constant).
func (r *indexSimplifier) linear(e tir.PrimExpr) (affine, bool) {
	if c, ok := tir.ConstInt(e); ok {
		return affine{c: c}, true
	}
	if b, ok := e.(*tir.Binary); ok {
		switch b.Op {
		case tir.OpAdd, tir.OpSub:
			x, ok1 := r.linear(b.A)
			y, ok2 := r.linear(b.B)
			if !ok1 || !ok2 {
				return affine{}, false
			}
			if b.Op == tir.OpSub {
				if y, ok2 = y.scale(-1); !ok2 {
					return affine{}, false
				}
			}
			return x.plus(y)
		case tir.OpMul:
			k, ok := tir.ConstInt(b.B)
			x := b.A
			if !ok {
				k, ok = tir.ConstInt(b.A)
				x = b.B
			}
			if ok {
				l, ok := r.linear(x)
				if !ok {
					return affine{}, false
				}
				return l.scale(k)
			}
		}
	}
	return affine{terms: []term{{e, 1}}}, true
}

func (a affine) scale(k int64) (affine, bool) {
	out := affine{c: 0}
	var ok bool
	if out.c, ok = mulChecked(a.c, k); !ok {
		return affine{}, false
	}
	for _, t := range a.terms {
		c, ok := mulChecked(t.coef, k)
		if !ok {
			return affine{}, false
		}
		if c != 0 {
			out.terms = append(out.terms, term{t.atom, c})
		}
	}
	return out, true
}

func (a affine) plus(b affine) (affine, bool) {
	c, ok := addChecked(a.c, b.c)
	if !ok {
		return affine{}, false
	}
	out := affine{terms: append([]term(nil), a.terms...), c: c}
	for _, t := range b.terms {
		merged := false
		for i := range out.terms {
			if tir.ExprEqual(out.terms[i].atom, t.atom) {
				if out.terms[i].coef, ok = addChecked(out.terms[i].coef, t.coef); !ok {
					return affine{}, false
				}
				merged = true
				break
			}
		}
		if !merged {
			out.terms = append(out.terms, t)
		}
	}
	kept := out.terms[:0]
	for _, t := range out.terms {
		if t.coef != 0 {
			kept = append(kept, t)
		}
	}
	out.terms = kept
	return out, true
}

// build writes the affine form as an expression of dtype d.
func (a affine) build(d ir.DType) tir.PrimExpr {
	var out tir.PrimExpr
	for _, t := range a.terms {
		x := t.atom
		if t.coef != 1 {
			x = tir.Fold(tir.OpMul, x, tir.IntConst(d, t.coef))
		}
		if out == nil {
			out = x
		} else {
			out = tir.Fold(tir.OpAdd, out, x)
		}
	}
	if out == nil {
		return tir.IntConst(d, a.c)
	}
	if a.c != 0 {
		out = tir.Fold(tir.OpAdd, out, tir.IntConst(d, a.c))
	}
	return out
}

// affineRange is the range of an affine form (false if an atom's range is
// unknown or a bound overflows).
func (r *indexSimplifier) affineRange(a affine) (interval, bool) {
	out := interval{a.c, a.c}
	for _, t := range a.terms {
		iv, ok := r.rangeOf(t.atom)
		if !ok {
			return interval{}, false
		}
		if iv, ok = iv.mulConst(t.coef); !ok {
			return interval{}, false
		}
		if out, ok = out.add(iv); !ok {
			return interval{}, false
		}
	}
	return out, true
}

// rangeOf is the range of an int32 or int64 expression over the
// variables in scope; false when unknown or when a node's range leaves
// its type (the expression might wrap).
func (r *indexSimplifier) rangeOf(e tir.PrimExpr) (interval, bool) {
	d := e.Type().DType
	if d != ir.Int32 && d != ir.Int64 {
		return interval{}, false
	}
	iv, ok := r.rangeNode(e)
	if !ok {
		return interval{}, false
	}
	if d == ir.Int32 && (iv.lo < math.MinInt32 || iv.hi > math.MaxInt32) {
		return interval{}, false
	}
	return iv, true
}

func (r *indexSimplifier) rangeNode(e tir.PrimExpr) (interval, bool) {
	if c, ok := tir.ConstInt(e); ok {
		return interval{c, c}, true
	}
	switch x := e.(type) {
	case *tir.Var:
		iv, ok := r.ranges[x]
		return iv, ok
	case *tir.Binary:
		a, ok1 := r.rangeOf(x.A)
		if !ok1 {
			return interval{}, false
		}
		if x.Op == tir.OpAdd || x.Op == tir.OpSub || x.Op == tir.OpMin || x.Op == tir.OpMax {
			b, ok := r.rangeOf(x.B)
			if !ok {
				return interval{}, false
			}
			switch x.Op {
			case tir.OpAdd:
				return a.add(b)
			case tir.OpSub:
				nb, ok := b.mulConst(-1)
				if !ok {
					return interval{}, false
				}
				return a.add(nb)
			case tir.OpMin:
				return interval{min(a.lo, b.lo), min(a.hi, b.hi)}, true
			default:
				return interval{max(a.lo, b.lo), max(a.hi, b.hi)}, true
			}
		}
		k, ok := tir.ConstInt(x.B)
		if !ok {
			if x.Op == tir.OpMul {
				if k, ok := tir.ConstInt(x.A); ok {
					b, ok := r.rangeOf(x.B)
					if !ok {
						return interval{}, false
					}
					return b.mulConst(k)
				}
			}
			return interval{}, false
		}
		switch x.Op {
		case tir.OpMul:
			return a.mulConst(k)
		case tir.OpDiv, tir.OpFloorDiv:
			if k < 1 || (x.Op == tir.OpDiv && a.lo < 0) {
				return interval{}, false
			}
			return interval{floorDiv(a.lo, k), floorDiv(a.hi, k)}, true
		case tir.OpMod, tir.OpFloorMod:
			if k < 1 || (x.Op == tir.OpMod && a.lo < 0) {
				return interval{}, false
			}
			if a.lo >= 0 && a.hi < k {
				return a, true
			}
			return interval{0, k - 1}, true
		}
	}
	return interval{}, false
}

func (a interval) add(b interval) (interval, bool) {
	lo, ok1 := addChecked(a.lo, b.lo)
	hi, ok2 := addChecked(a.hi, b.hi)
	return interval{lo, hi}, ok1 && ok2
}

func (a interval) mulConst(k int64) (interval, bool) {
	lo, ok1 := mulChecked(a.lo, k)
	hi, ok2 := mulChecked(a.hi, k)
	if k < 0 {
		lo, hi = hi, lo
	}
	return interval{lo, hi}, ok1 && ok2
}

func addChecked(a, b int64) (int64, bool) {
	s := a + b
	return s, (s > a) == (b > 0)
}

func mulChecked(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	hi, lo := bits.Mul64(uint64(abs64(a)), uint64(abs64(b)))
	if hi != 0 || lo > math.MaxInt64 || a == math.MinInt64 || b == math.MinInt64 {
		return 0, false
	}
	return a * b, true
}

func abs64(a int64) int64 {
	if a < 0 {
		return -a
	}
	return a
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
