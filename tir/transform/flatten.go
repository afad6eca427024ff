package transform

import (
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
)

// FlattenBuffers returns the pass that turns every multi-dimensional (or
// strided, or 0-dimensional) buffer into a 1-D buffer over the same data
// variable, the shape of which is the original buffer's span, and rewrites
// each access A[i, j, k] into A[i*s0 + j*s1 + k*s2] with the buffer's
// element strides (row-major unless given). Buffer parameters in the
// buffer map and allocations are replaced as well, so afterwards every
// buffer is 1-D, which is what the C code generator expects. Indices of
// mixed integer types, or int32 indices into buffers of 2^31 or more
// elements, are computed in int64.
func FlattenBuffers() Pass {
	return Pass{Name: "FlattenBuffers", Run: func(f *tir.PrimFunc) (*tir.PrimFunc, error) {
		fl := &flattener{flat: map[*tir.Buffer]*tir.Buffer{}}
		g := f.WithBody(tir.MutateStmt(f.Body, fl.stmt, fl.expr))
		if g.PreflattenedBufferMap == nil {
			g.PreflattenedBufferMap = make(map[*tir.Var]*tir.Buffer, len(f.BufferMap))
			for k, b := range f.BufferMap {
				g.PreflattenedBufferMap[k] = b
			}
		}
		for k, b := range g.BufferMap {
			g.BufferMap[k] = fl.buffer(b)
		}
		return g, nil
	}}
}

type flattener struct {
	flat map[*tir.Buffer]*tir.Buffer
}

func isFlat(b *tir.Buffer) bool {
	return len(b.Shape) == 1 && (b.Strides == nil || b.Strides[0] == 1)
}

func (fl *flattener) buffer(b *tir.Buffer) *tir.Buffer {
	if isFlat(b) {
		return b
	}
	if nb, ok := fl.flat[b]; ok {
		return nb
	}
	nb := &tir.Buffer{Name: b.Name, DType: b.DType, Shape: ir.Shape{b.Span()}, Data: b.Data, Scope: b.Scope}
	fl.flat[b] = nb
	return nb
}

// index computes the flat index of b[idx...].
func (fl *flattener) index(b *tir.Buffer, idx []tir.PrimExpr) []tir.PrimExpr {
	if isFlat(b) {
		return idx
	}
	t := tir.Int32T
	if len(idx) > 0 {
		t = idx[0].Type()
	}
	for _, e := range idx {
		if e.Type() != t || b.Span() > math.MaxInt32 {
			t = tir.Int64T
		}
	}
	var sum tir.PrimExpr = tir.IntConst(t.DType, 0)
	for k, s := range b.ElemStrides() {
		sum = tir.Add(sum, tir.Mul(tir.NewCast(t, idx[k]), tir.IntConst(t.DType, s)))
	}
	return []tir.PrimExpr{sum}
}

func (fl *flattener) expr(e tir.PrimExpr) tir.PrimExpr {
	if ld, ok := e.(*tir.BufferLoad); ok && !isFlat(ld.Buffer) {
		return &tir.BufferLoad{Buffer: fl.buffer(ld.Buffer), Indices: fl.index(ld.Buffer, ld.Indices)}
	}
	return e
}

func (fl *flattener) stmt(s tir.Stmt) tir.Stmt {
	switch x := s.(type) {
	case *tir.BufferStore:
		if !isFlat(x.Buffer) {
			return &tir.BufferStore{Buffer: fl.buffer(x.Buffer), Value: x.Value, Indices: fl.index(x.Buffer, x.Indices)}
		}
	case *tir.Allocate:
		if !isFlat(x.Buffer) {
			return &tir.Allocate{Buffer: fl.buffer(x.Buffer), Body: x.Body}
		}
	}
	return s
}
