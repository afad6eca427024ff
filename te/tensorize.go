package te

import (
	"fmt"

	"github.com/kiln-dev/kiln/tir"
)

// TensorIntrin builds the statement that replaces a tensorized loop nest
// (see Stage.Tensorize): typically one call of a micro-kernel
// (tir.CallKernel) that computes the whole tile, reduction and
// initialisation included.
type TensorIntrin func(ctx *TensorizeContext) (tir.Stmt, error)

// TensorizeContext tells a TensorIntrin where its tile is.
type TensorizeContext struct {
	// Out is the buffer the stage writes (its region buffer when it is
	// computed at another stage's loop).
	Out *tir.Buffer
	// OutIndex is the index in Out of the tile's first element.
	OutIndex []tir.PrimExpr
	// Axis holds, per data-parallel axis of the stage, its global value at
	// the tile's first element.
	Axis []tir.PrimExpr
	// Extent holds, per data-parallel axis, how many of its values the
	// tile covers.
	Extent []int64
	l      *lowerer
}

// Load returns a load of input tensor t at the given global indices, in
// the buffer t is materialised in (with a compute_at region's offset
// applied); wrap it in tir.AddressOf to pass a pointer to a kernel.
func (c *TensorizeContext) Load(t *Tensor, idx ...tir.PrimExpr) (*tir.BufferLoad, error) {
	if t == nil || t.buf == nil || len(idx) != len(t.Shape) {
		return nil, fmt.Errorf("tensorize: load of %v with %d indices", t, len(idx))
	}
	ld, ok := c.l.rewriteLoads(tir.NewLoad(t.buf, idx...)).(*tir.BufferLoad)
	if !ok {
		return nil, fmt.Errorf("tensorize: load of %s was rewritten into a non-load", t.Name)
	}
	return ld, nil
}

// Tensorize replaces the loop nest of the stage from leaf iv inward — the
// data-parallel loops below it and the whole reduction, with the
// initialisation — by the statement f builds. Every leaf inside iv must be
// derived from one axis without a split or fuse that needs a bound guard,
// and no stage may be computed at those loops. The stage must be a
// ComputeOp.
func (st *Stage) Tensorize(iv *IterVar, f TensorIntrin) {
	if !st.checkLeaf("tensorize", iv) {
		return
	}
	if _, ok := st.op.(*ComputeOp); !ok {
		st.errorf("tensorize: stage %s is not a compute stage", st.Name())
		return
	}
	if f == nil {
		st.errorf("tensorize: nil intrinsic")
		return
	}
	st.tensorizeIV, st.tensorize = iv, f
}

// tensorizeState is what emitCompute knows when it hands a tile to a
// TensorIntrin.
type tensorizeState struct {
	vars          map[*IterVar]*tir.Var
	ext           map[*IterVar]int64
	local, global []tir.PrimExpr
	out           *tir.Buffer
	atPos         map[int][]attached
	guarded       bool
}

// tensorized builds the statement replacing the leaves of st from top
// inward.
func (l *lowerer) tensorized(st *Stage, op *ComputeOp, top int, ts tensorizeState) (tir.Stmt, error) {
	name := st.Name()
	if ts.guarded {
		return nil, fmt.Errorf("tensorize %s: the stage needs bound guards (a split that does not divide its axis)", name)
	}
	for p := range ts.atPos {
		if p >= top {
			return nil, fmt.Errorf("tensorize %s: a stage is computed inside the tensorized loops", name)
		}
	}
	for _, lf := range st.leaves[:top] {
		if lf.Kind == Reduce {
			return nil, fmt.Errorf("tensorize %s: reduction loop %s is outside the tensorized loops", name, lf.Name)
		}
	}
	// The root axis of every leaf derived by splits; leaves from a fuse
	// cannot be attributed to one axis.
	root := map[*IterVar]*IterVar{}
	for _, ax := range op.Axis {
		root[ax] = ax
	}
	for _, r := range op.ReduceAxis {
		root[r] = r
	}
	for _, rel := range st.rels {
		switch r := rel.(type) {
		case *splitRel:
			root[r.outer], root[r.inner] = root[r.parent], root[r.parent]
		case *fuseRel:
			root[r.fused] = nil
		}
	}
	inner := map[*IterVar]int64{}
	zero := map[*tir.Var]tir.PrimExpr{}
	for _, lf := range st.leaves[top:] {
		rt := root[lf]
		if rt == nil {
			return nil, fmt.Errorf("tensorize %s: loop %s inside the tensorized loops is a fused loop", name, lf.Name)
		}
		if _, ok := inner[rt]; !ok {
			inner[rt] = 1
		}
		inner[rt] *= ts.ext[lf]
		if v, ok := ts.vars[lf]; ok {
			zero[v] = tir.Idx(0)
		}
	}
	ctx := &TensorizeContext{Out: ts.out, l: l}
	for d, ax := range op.Axis {
		ctx.OutIndex = append(ctx.OutIndex, l.z.canon(tir.SubstituteExpr(ts.local[d], zero)))
		ctx.Axis = append(ctx.Axis, l.z.canon(tir.SubstituteExpr(ts.global[d], zero)))
		e, ok := inner[ax]
		if !ok {
			e = 1
		}
		ctx.Extent = append(ctx.Extent, e)
	}
	s, err := st.tensorize(ctx)
	if err != nil {
		return nil, fmt.Errorf("tensorize %s: %w", name, err)
	}
	if s == nil {
		return nil, fmt.Errorf("tensorize %s: the intrinsic built no statement", name)
	}
	return s, nil
}
