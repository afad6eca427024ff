package dnnl

import (
	"fmt"

	"github.com/kiln-dev/kiln/backend/byoc"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/runtime/jsonrt"
	"github.com/kiln-dev/kiln/tensor"
)

// Generate serialises a partitioned function as the JSON graph dnnl's
// runtime runs, exported as symbol, and returns the constants it refers
// to by name (SYMBOL_const_N, numbered in the order they are met): the
// shared JSON serializer (byoc.SerializeJSON) with dnnl's description of
// a call. Operator calls and composite calls become kernel nodes named
// after the operator or the composite, with the operator's (or the
// composite's anchor's) attributes. Anything Supported would refuse is an
// error naming it.
func Generate(fn *graph.Function, symbol string) (*jsonrt.Graph, map[string]*tensor.Tensor, error) {
	return byoc.SerializeJSON(fn, symbol, "dnnl", kernelNode)
}

// constantUpdater returns the constants Generate names for fn.
func constantUpdater(fn *graph.Function, symbol string) (map[string]*tensor.Tensor, error) {
	_, consts, err := Generate(fn, symbol)
	return consts, err
}

// kernelNode describes one call as a dnnl kernel node (byoc.JSONOp).
func kernelNode(x *graph.Call) (string, ir.Attrs, []graph.Expr, error) {
	if err := Supported(x); err != nil {
		return "", nil, nil, err
	}
	if x.Op != nil {
		return x.Op.Name, x.Attrs, x.Args, nil
	}
	fn := x.Fn.(*graph.Function)
	spec, _ := compositeSpec(fn.StrAttr(graph.AttrComposite))
	m, err := matchComposite(spec, fn)
	if err != nil {
		return "", nil, nil, err
	}
	// The composite's parameters stand for the call's arguments.
	operands := make([]graph.Expr, len(m.operands))
	for i, o := range m.operands {
		if operands[i] = byoc.Operand(x, o); operands[i] == o {
			if v, ok := o.(*graph.Var); ok {
				return "", nil, nil, fmt.Errorf("%s: %%%s is not a parameter of the composite", spec.Name, v.Name)
			}
		}
	}
	return spec.Name, m.attrs, operands, nil
}
