package onnx

import (
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// builder builds the chain of calls that converts one node, keeping the
// first error so that a converter's compositions read as formulas: once a
// step fails, every later step returns nil and done reports the error.
type builder struct {
	c   *Ctx
	n   *Node
	err error
}

// fail records an error naming the node (the first one wins).
func (b *builder) fail(format string, args ...any) {
	if b.err == nil {
		b.err = b.n.Errorf(format, args...)
	}
}

// in returns required input i.
func (b *builder) in(i int) graph.Expr {
	if b.err != nil {
		return nil
	}
	x := b.n.Input(i)
	if x == nil {
		b.fail("input %d is missing", i)
	}
	return x
}

// call applies o to args (none nil unless an earlier step failed).
func (b *builder) call(o *op.Op, attrs ir.Attrs, args ...graph.Expr) graph.Expr {
	if b.err != nil {
		return nil
	}
	e, err := b.c.Call(o, args, attrs)
	if err != nil {
		b.err = err
		return nil
	}
	return e
}

// item projects field i of a tuple-valued expression.
func (b *builder) item(e graph.Expr, i int) graph.Expr {
	if b.err != nil {
		return nil
	}
	r, err := b.c.Item(e, i)
	if err != nil {
		b.err = err
	}
	return r
}

// typ returns e's tensor type (nil after an error).
func (b *builder) typ(e graph.Expr) *ir.TensorType {
	if b.err != nil {
		return nil
	}
	t, err := b.c.TensorType(e)
	if err != nil {
		b.err = err
		return nil
	}
	return t
}

// dtype returns e's element type (Invalid after an error).
func (b *builder) dtype(e graph.Expr) ir.DType {
	t := b.typ(e)
	if t == nil {
		return ir.Invalid
	}
	return t.DType
}

// scalar is a rank-0 constant of dtype dt.
func (b *builder) scalar(dt ir.DType, v float64) graph.Expr {
	if b.err != nil {
		return nil
	}
	return b.c.Constant(tensor.Scalar(dt, v))
}

// scalarLike is a rank-0 constant of e's dtype.
func (b *builder) scalarLike(e graph.Expr, v float64) graph.Expr { return b.scalar(b.dtype(e), v) }

// cast converts e to dt unless it already has that dtype.
func (b *builder) cast(e graph.Expr, dt ir.DType) graph.Expr {
	if t := b.typ(e); t == nil || t.DType == dt {
		return e
	}
	return b.call(op.Cast, ir.Attrs{"dtype": dt}, e)
}

// reshape gives e a new shape unless it already has it.
func (b *builder) reshape(e graph.Expr, s ir.Shape) graph.Expr {
	if t := b.typ(e); t == nil || t.Shape.Equal(s) {
		return e
	}
	return b.call(op.Reshape, ir.Attrs{"newshape": []int64(s.Clone())}, e)
}

// done returns the outputs or the first error.
func (b *builder) done(outs ...graph.Expr) ([]graph.Expr, error) {
	if b.err != nil {
		return nil, b.err
	}
	return outs, nil
}
