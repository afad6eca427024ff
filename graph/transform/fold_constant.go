package transform

import (
	"strings"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// FoldConstant evaluates, with the reference executor (ref.EvalOp), every
// operator call whose arguments are all constants, and replaces it with its
// value: a Constant, or a Tuple of Constants for an op with several
// outputs. It also replaces a projection of a tuple literal by the field.
//
// Calls are left alone when the op has no reference kernel, when it is a
// random op (name starting with "random."; it must draw anew at each run),
// or when evaluating fails (the error then surfaces at run time, where it
// belongs, instead of failing compilation of code that may never run).
func FoldConstant(m *graph.Module) (*graph.Module, error) {
	r := newBodyRewriter(foldNode)
	return mapModule(m, r.function)
}

// Zero-size tensors (a dimension of 0) are legal ONNX, and their value is
// known at compile time: they hold nothing. Folding makes sure no kernel
// is generated for one: a call whose results have no elements becomes
// empty constants, an argument without elements counts as a constant, and
// concatenate drops operands without elements.

// emptyResult returns the empty constant (or tuple of them) of a call
// whose every result has zero elements.
func emptyResult(x *graph.Call) (graph.Expr, bool) {
	empty := func(t ir.Type) (*graph.Constant, bool) {
		tt, ok := t.(*ir.TensorType)
		if !ok || tt.Shape.NumElements() != 0 {
			return nil, false
		}
		return graph.NewConstant(tensor.New(tt.DType, tt.Shape)), true
	}
	switch t := x.Type().(type) {
	case *ir.TensorType:
		if c, ok := empty(t); ok {
			return c, true
		}
	case *ir.TupleType:
		fs := make([]graph.Expr, len(t.Fields))
		for i, f := range t.Fields {
			c, ok := empty(f)
			if !ok {
				return nil, false
			}
			fs[i] = c
		}
		return graph.NewTuple(fs), len(fs) > 0
	}
	return nil, false
}

// dropEmptyOperands rewrites a concatenate with some operands without
// elements into one of the others (or the single one left).
func dropEmptyOperands(x *graph.Call) (graph.Expr, bool) {
	var keep []graph.Expr
	for _, a := range x.Args {
		if tt, ok := a.Type().(*ir.TensorType); ok && tt.Shape.NumElements() == 0 {
			continue
		}
		keep = append(keep, a)
	}
	if len(keep) == len(x.Args) || len(keep) == 0 {
		return nil, false
	}
	if len(keep) == 1 {
		return keep[0], true
	}
	c, err := graph.NewCall(x.Op, keep, x.Attrs)
	if err != nil {
		return nil, false
	}
	if _, err := graph.InferExpr(nil, c); err != nil {
		return nil, false
	}
	return c, true
}

// foldable reports whether calls of o may be evaluated at compile time.
func foldable(o *op.Op) bool {
	return ref.Has(o) && !strings.HasPrefix(o.Name, "random.")
}

func foldNode(e graph.Expr) (graph.Expr, error) {
	switch x := e.(type) {
	case *graph.Call:
		if x.Op == nil {
			return e, nil
		}
		if empty, ok := emptyResult(x); ok {
			return empty, nil
		}
		if x.Op == op.Concatenate {
			if r, ok := dropEmptyOperands(x); ok {
				return r, nil
			}
		}
		if !foldable(x.Op) {
			return e, nil
		}
		args := make([]*tensor.Tensor, len(x.Args))
		for i, a := range x.Args {
			c, ok := a.(*graph.Constant)
			if !ok {
				// A tensor without elements is known at compile time
				// whatever produces it.
				if tt, isT := a.Type().(*ir.TensorType); isT && tt.Shape.NumElements() == 0 {
					args[i] = tensor.New(tt.DType, tt.Shape)
					continue
				}
				return e, nil
			}
			args[i] = c.Value
		}
		argTypes := make([]ir.Type, len(args))
		for i, a := range args {
			argTypes[i] = a.Type()
		}
		if op.WorkEstimate(x.Op, argTypes, x.Type()) > op.MaxFoldWork {
			return e, nil // too much work for compile time: it runs compiled
		}
		res, out, err := ref.EvalOp(x.Op, x.Attrs, args)
		if err != nil {
			return e, nil
		}
		if _, isTuple := out.(*ir.TupleType); isTuple {
			fs := make([]graph.Expr, len(res))
			for i, t := range res {
				fs[i] = graph.NewConstant(t)
			}
			return graph.NewTuple(fs), nil
		}
		return graph.NewConstant(res[0]), nil
	case *graph.TupleGetItem:
		if t, ok := x.Tuple.(*graph.Tuple); ok && x.Index >= 0 && x.Index < len(t.Fields) {
			return t.Fields[x.Index], nil
		}
	}
	return e, nil
}
