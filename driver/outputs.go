package driver

import (
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/graph/transform"
	"github.com/kiln-dev/kiln/ir"
)

// computeOutputs makes every output of main the result of a kernel. An
// output that is a model input or a constant (a model folded entirely at
// import, or an Identity of an input) gets a copy kernel: the graph executor
// gives outputs their own storage, distinct from inputs and parameters, and
// a library always has at least one function.
func computeOutputs(main *graph.Function) (*graph.Function, error) {
	wrap := func(e graph.Expr) graph.Expr {
		switch e.(type) {
		case *graph.Var, *graph.Constant:
		default:
			return e
		}
		tt, ok := e.Type().(*ir.TensorType)
		if !ok {
			return e
		}
		p := graph.NewVar("p0", tt)
		body := graph.MustCall(op.Reshape, []graph.Expr{p}, ir.Attrs{"newshape": []int64(tt.Shape.Clone())})
		fn := graph.NewFunction([]*graph.Var{p}, body, ir.Attrs{graph.AttrPrimitive: true, transform.AttrNameHint: "copy_output"})
		return graph.NewFuncCall(fn, []graph.Expr{e})
	}
	var body graph.Expr
	if t, ok := main.Body.(*graph.Tuple); ok {
		fields := make([]graph.Expr, len(t.Fields))
		changed := false
		for i, f := range t.Fields {
			fields[i] = wrap(f)
			changed = changed || fields[i] != f
		}
		if !changed {
			return main, nil
		}
		body = graph.NewTuple(fields)
	} else {
		body = wrap(main.Body)
		if body == main.Body {
			return main, nil
		}
	}
	fn := graph.NewFunction(main.Params, body, main.Attrs)
	if err := graph.InferFunction(nil, fn); err != nil {
		return nil, err
	}
	return fn, nil
}
