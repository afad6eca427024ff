package transform

import (
	"github.com/kiln-dev/kiln/tir"
)

// VectorTails returns the pass that ends a vectorised loop with one whole
// vector instead of the C compiler's remainder:
//
//	for i in lo..lo+N (vectorized):        for i in lo..lo+N-N%L (vectorized):
//	    body(i)                      →         body(i)
//	                                       for t in 0..L (vectorized):
//	                                           body(lo+N-L+t)
//
// where L is the vector's lanes for the body's narrowest stored element
// (vectorBits / its bits) and N a constant larger than L and not a
// multiple of it. The last vector recomputes up to L-1 iterations the
// first loop did, which is the same computation when every iteration
// writes values that depend only on what no iteration writes: the body
// stores (under lets and conditions) to buffers it never loads, and calls
// only math intrinsics and if_then_else. Any other loop is left alone.
//
// GCC (12) vectorises a loop of constant extent with whole vectors and
// finishes it one element at a time; it does not mask the rest. A fused
// epilogue over rows of 111 columns (squeezenet1_1's first convolution,
// AVX-512) stored 6 vectors and 15 scalars a row, and the kernel took
// 0.43 ms against 0.40 with rows padded to 112 columns (C harness, one
// Emerald Rapids core). Loops narrower than a vector keep the compiler's
// code. vectorBits 0 (a target without vectors, or unknown) disables
// the pass.
//
// The driver registers it for every CPU target's functions, in Phase2,
// after UnrollLoops and before the last Simplify, which folds the tail's
// indices.
func VectorTails(vectorBits int) Pass {
	return Pass{Name: "VectorTails", Phase: Phase2, OptLevel: 2, Run: func(f *tir.PrimFunc) (*tir.PrimFunc, error) {
		if vectorBits <= 0 {
			return f, nil
		}
		return f.WithBody(tir.MutateStmt(f.Body, func(s tir.Stmt) tir.Stmt {
			if x, ok := s.(*tir.For); ok {
				if y := vectorTail(x, int64(vectorBits)); y != nil {
					return y
				}
			}
			return s
		}, nil)), nil
	}}
}

// vectorTail rewrites x as VectorTails describes, or returns nil.
func vectorTail(x *tir.For, vectorBits int64) tir.Stmt {
	if x.Kind != tir.Vectorized || len(x.Annotations) > 0 || !x.Var.T.DType.IsInt() {
		return nil
	}
	lo, ok1 := tir.ConstInt(x.Min)
	n, ok2 := tir.ConstInt(x.Extent)
	if !ok1 || !ok2 {
		return nil
	}
	bits := recomputableStoreBits(x.Body)
	if bits <= 0 {
		return nil
	}
	lanes := vectorBits / bits
	if lanes < 2 || n <= lanes || n%lanes == 0 {
		return nil
	}
	dt := x.Var.T.DType
	head := tir.NewFor(x.Var, x.Min, tir.IntConst(dt, n-n%lanes), tir.Vectorized, x.Body)
	t := tir.NewVar(x.Var.Name+"_tail", x.Var.T)
	body := tir.Substitute(x.Body, map[*tir.Var]tir.PrimExpr{x.Var: tir.Add(t, tir.IntConst(dt, lo+n-lanes))})
	return tir.Seq(head, tir.NewFor(t, tir.IntConst(dt, 0), tir.IntConst(dt, lanes), tir.Vectorized, body))
}

// recomputableStoreBits is the bits of the narrowest element body stores
// when running any of its iterations again gives what they gave (see
// VectorTails), else 0.
func recomputableStoreBits(body tir.Stmt) int64 {
	stored := map[*tir.Var]bool{}
	var exprs []tir.PrimExpr
	var bits int64
	ok := true
	var walk func(s tir.Stmt)
	walk = func(s tir.Stmt) {
		switch s := s.(type) {
		case *tir.BufferStore:
			stored[s.Buffer.Data] = true
			b := int64(8 * s.Buffer.DType.Size())
			if b <= 0 {
				ok = false
			}
			if bits == 0 || b < bits {
				bits = b
			}
			exprs = append(exprs, s.Value)
			exprs = append(exprs, s.Indices...)
		case *tir.SeqStmt:
			for _, t := range s.Seq {
				walk(t)
			}
		case *tir.LetStmt:
			exprs = append(exprs, s.Value)
			walk(s.Body)
		case *tir.IfThenElse:
			exprs = append(exprs, s.Cond)
			walk(s.Then)
			if s.Else != nil {
				walk(s.Else)
			}
		default:
			ok = false
		}
	}
	walk(body)
	if !ok || bits == 0 {
		return 0
	}
	for _, e := range exprs {
		tir.Visit(e, func(n tir.Node) bool {
			switch n := n.(type) {
			case *tir.BufferLoad:
				if stored[n.Buffer.Data] {
					ok = false
				}
			case *tir.Call:
				if n.Kernel != nil || n.Op == tir.CallExtern || n.Op == tir.IntrinAddressOf || n.Op == tir.IntrinCheckIndex {
					ok = false
				}
			}
			return ok
		})
		if !ok {
			return 0
		}
	}
	return bits
}
