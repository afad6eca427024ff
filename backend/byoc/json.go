package byoc

import (
	"fmt"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/runtime/jsonrt"
	"github.com/kiln-dev/kiln/tensor"
)

// JSONOp describes one call of a partitioned function as a kernel node:
// the node's name (the operator or composite the backend's kernels know),
// its attributes and the expressions whose values are its inputs, in
// order (for an operator call, usually its arguments; for a composite
// call, the operands inside the composite, with the composite's
// parameters standing for the call's arguments as Operand resolves them).
// An error refuses the call.
type JSONOp func(c *graph.Call) (name string, attrs ir.Attrs, operands []graph.Expr, err error)

// Operand maps an expression inside a composite call's function to the
// value it stands for outside: a parameter of the composite is the call's
// argument at that position; anything else is returned as it is.
func Operand(c *graph.Call, e graph.Expr) graph.Expr {
	fn, ok := c.Fn.(*graph.Function)
	v, isVar := e.(*graph.Var)
	if !ok || !isVar {
		return e
	}
	for i, p := range fn.Params {
		if p == v && i < len(c.Args) {
			return c.Args[i]
		}
	}
	return e
}

// SerializeJSON serialises a partitioned function as the JSON graph a
// jsonrt module runs, exported as symbol, and returns the constants it
// refers to by name (SYMBOL_const_N, numbered in the order they are met).
// The function's parameters become input nodes in order; each call
// becomes the kernel node op describes; the result (a tensor or a flat
// tuple of tensors) gives the heads. label names the backend in errors.
func SerializeJSON(fn *graph.Function, symbol, label string, op JSONOp) (*jsonrt.Graph, map[string]*tensor.Tensor, error) {
	s := &serializer{g: &jsonrt.Graph{Symbol: symbol}, op: op, consts: map[string]*tensor.Tensor{}, entries: map[graph.Expr]jsonrt.Entry{}}
	names := map[string]bool{}
	for i, p := range fn.Params {
		tt, ok := p.Type().(*ir.TensorType)
		if !ok {
			return nil, nil, fmt.Errorf("%s: @%s: parameter %%%s is %v, want a tensor", label, symbol, p.Name, p.Type())
		}
		name := p.Name
		if name == "" || names[name] {
			name = fmt.Sprintf("%s_in%d", symbol, i)
		}
		names[name] = true
		s.entries[p] = s.add(jsonrt.Node{Op: jsonrt.OpInput, Name: name}, tt)
	}
	heads := []graph.Expr{fn.Body}
	if t, ok := fn.Body.(*graph.Tuple); ok {
		heads = t.Fields
	}
	for _, h := range heads {
		e, err := s.visit(h)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: @%s: %w", label, symbol, err)
		}
		s.g.Heads = append(s.g.Heads, e)
	}
	if err := s.g.Validate(); err != nil {
		return nil, nil, err
	}
	return s.g, s.consts, nil
}

// JSONHooks returns the hooks of a JSON backend: RelayToRuntime
// serialises each partitioned function (SerializeJSON) into a jsonrt
// module of moduleKind over a kernel set from newSet, and
// ConstantUpdater hands the function's constants to the build by name.
// Register jsonrt.NewLoader(moduleKind, newSet) with runtime.RegisterLoader
// so that artifacts load.
func JSONHooks(moduleKind, label string, op JSONOp, newSet func() (jsonrt.KernelSet, error)) backend.Hooks {
	return backend.Hooks{
		RelayToRuntime: func(_ *backend.HookContext, fn *graph.Function, symbol string) (runtime.Module, error) {
			g, _, err := SerializeJSON(fn, symbol, label, op)
			if err != nil {
				return nil, err
			}
			set, err := newSet()
			if err != nil {
				return nil, err
			}
			return jsonrt.New(moduleKind, g, set)
		},
		ConstantUpdater: func(fn *graph.Function, symbol string) (map[string]*tensor.Tensor, error) {
			_, consts, err := SerializeJSON(fn, symbol, label, op)
			return consts, err
		},
	}
}

type serializer struct {
	g       *jsonrt.Graph
	op      JSONOp
	consts  map[string]*tensor.Tensor
	entries map[graph.Expr]jsonrt.Entry
}

func (s *serializer) add(n jsonrt.Node, tt *ir.TensorType) jsonrt.Entry {
	n.Shape = [][]int64{append([]int64{}, tt.Shape...)}
	n.DType = []string{tt.DType.String()}
	s.g.Nodes = append(s.g.Nodes, n)
	return jsonrt.Entry{Node: len(s.g.Nodes) - 1}
}

// visit returns the entry computing e, adding the nodes it needs.
func (s *serializer) visit(e graph.Expr) (jsonrt.Entry, error) {
	if ent, ok := s.entries[e]; ok {
		return ent, nil
	}
	var ent jsonrt.Entry
	switch x := e.(type) {
	case *graph.Constant:
		name := fmt.Sprintf("%s_const_%d", s.g.Symbol, len(s.consts))
		s.consts[name] = x.Value
		ent = s.add(jsonrt.Node{Op: jsonrt.OpConst, Name: name}, x.Value.Type())
	case *graph.Call:
		out, ok := x.Type().(*ir.TensorType)
		if !ok {
			return ent, fmt.Errorf("%s: result %v, want a tensor", graph.Describe(x), x.Type())
		}
		name, attrs, operands, err := s.op(x)
		if err != nil {
			return ent, fmt.Errorf("%s: %w", graph.Describe(x), err)
		}
		node := jsonrt.Node{Op: jsonrt.OpKernel, Name: name, Sources: graph.Sources(nil, x)}
		node.SetAttrs(attrs)
		for _, o := range operands {
			in, err := s.visit(o)
			if err != nil {
				return ent, err
			}
			node.Inputs = append(node.Inputs, in)
		}
		ent = s.add(node, out)
	case *graph.Var:
		return ent, fmt.Errorf("%%%s is not a parameter of the function", x.Name)
	default:
		return ent, fmt.Errorf("%s is not supported in a JSON function (operator calls, composite calls, constants and a result tuple only)", graph.Describe(e))
	}
	s.entries[e] = ent
	return ent, nil
}
