package dnnl

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/runtime/jsonrt"
	"github.com/kiln-dev/kiln/tensor"
)

// Generate serialises a partitioned function as the JSON graph dnnl's
// runtime runs, exported as symbol, and returns the constants it refers
// to by name (SYMBOL_const_N, numbered in the order they are met). The
// function's parameters become input nodes in order; operator calls and
// composite calls become kernel nodes named after the operator or the
// composite, with the operator's (or the composite's anchor's)
// attributes; the result (a tensor or a flat tuple of tensors) gives
// the heads. Anything Supported would refuse is an error naming it.
func Generate(fn *graph.Function, symbol string) (*jsonrt.Graph, map[string]*tensor.Tensor, error) {
	c := &codegen{g: &jsonrt.Graph{Symbol: symbol}, consts: map[string]*tensor.Tensor{}, entries: map[graph.Expr]jsonrt.Entry{}}
	names := map[string]bool{}
	for i, p := range fn.Params {
		tt, ok := p.Type().(*ir.TensorType)
		if !ok {
			return nil, nil, fmt.Errorf("dnnl: @%s: parameter %%%s is %v, want a tensor", symbol, p.Name, p.Type())
		}
		name := p.Name
		if name == "" || names[name] {
			name = fmt.Sprintf("%s_in%d", symbol, i)
		}
		names[name] = true
		c.entries[p] = c.add(jsonrt.Node{Op: jsonrt.OpInput, Name: name}, tt)
	}
	var heads []graph.Expr
	if t, ok := fn.Body.(*graph.Tuple); ok {
		heads = t.Fields
	} else {
		heads = []graph.Expr{fn.Body}
	}
	for _, h := range heads {
		e, err := c.visit(h)
		if err != nil {
			return nil, nil, fmt.Errorf("dnnl: @%s: %w", symbol, err)
		}
		c.g.Heads = append(c.g.Heads, e)
	}
	if err := c.g.Validate(); err != nil {
		return nil, nil, err
	}
	return c.g, c.consts, nil
}

// constantUpdater returns the constants Generate names for fn.
func constantUpdater(fn *graph.Function, symbol string) (map[string]*tensor.Tensor, error) {
	_, consts, err := Generate(fn, symbol)
	return consts, err
}

type codegen struct {
	g       *jsonrt.Graph
	consts  map[string]*tensor.Tensor
	entries map[graph.Expr]jsonrt.Entry
}

func (c *codegen) add(n jsonrt.Node, tt *ir.TensorType) jsonrt.Entry {
	n.Shape = [][]int64{append([]int64{}, tt.Shape...)}
	n.DType = []string{tt.DType.String()}
	c.g.Nodes = append(c.g.Nodes, n)
	return jsonrt.Entry{Node: len(c.g.Nodes) - 1}
}

// visit returns the entry computing e, adding the nodes it needs.
func (c *codegen) visit(e graph.Expr) (jsonrt.Entry, error) {
	if ent, ok := c.entries[e]; ok {
		return ent, nil
	}
	var ent jsonrt.Entry
	switch x := e.(type) {
	case *graph.Constant:
		name := fmt.Sprintf("%s_const_%d", c.g.Symbol, len(c.consts))
		c.consts[name] = x.Value
		ent = c.add(jsonrt.Node{Op: jsonrt.OpConst, Name: name}, x.Value.Type())
	case *graph.Call:
		var err error
		if ent, err = c.call(x); err != nil {
			return ent, err
		}
	case *graph.Var:
		return ent, fmt.Errorf("%%%s is not a parameter of the function", x.Name)
	default:
		return ent, fmt.Errorf("%s is not supported inside a dnnl function (operator calls, composite calls, constants and a result tuple only)", graph.Describe(e))
	}
	c.entries[e] = ent
	return ent, nil
}

func (c *codegen) call(x *graph.Call) (jsonrt.Entry, error) {
	if err := Supported(x); err != nil {
		return jsonrt.Entry{}, fmt.Errorf("%s: %w", graph.Describe(x), err)
	}
	out := x.Type().(*ir.TensorType)
	node := jsonrt.Node{Op: jsonrt.OpKernel, Sources: graph.Sources(nil, x)}
	var operands []graph.Expr
	if x.Op != nil {
		node.Name = x.Op.Name
		node.SetAttrs(x.Attrs)
		operands = x.Args
	} else {
		fn := x.Fn.(*graph.Function)
		spec, _ := compositeSpec(fn.StrAttr(graph.AttrComposite))
		m, err := matchComposite(spec, fn)
		if err != nil {
			return jsonrt.Entry{}, err
		}
		node.Name = spec.Name
		node.SetAttrs(m.attrs)
		// The composite's parameters stand for the call's arguments.
		for _, o := range m.operands {
			if v, ok := o.(*graph.Var); ok {
				k := paramIndex(fn, v)
				if k < 0 {
					return jsonrt.Entry{}, fmt.Errorf("%s: %%%s is not a parameter of the composite", spec.Name, v.Name)
				}
				o = x.Args[k]
			}
			operands = append(operands, o)
		}
	}
	for _, a := range operands {
		ent, err := c.visit(a)
		if err != nil {
			return jsonrt.Entry{}, err
		}
		node.Inputs = append(node.Inputs, ent)
	}
	return c.add(node, out), nil
}

func paramIndex(fn *graph.Function, v *graph.Var) int {
	for i, p := range fn.Params {
		if p == v {
			return i
		}
	}
	return -1
}
