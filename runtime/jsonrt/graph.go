// Package jsonrt is the JSON runtime base of kiln's external code
// generators (seed 002's "codegen for your own representation", after
// TVM's JSON runtime). An external backend's RelayToRuntime hook
// serialises the partitioned function it owns as a JSON Graph of input,
// const and kernel nodes; this package parses and validates that graph,
// binds the constants by name when the artifact loader hands them over
// (runtime.ConstantUser), and runs the kernel nodes in order with the
// backend's typed KernelSet. The backend supplies only the kernels
// (backend/dnnl: oneDNN primitives).
//
// It sits at the end of the external branch of the pipeline:
//
//	partition → build: RelayToRuntime (backend codegen → Graph) → artifact modules/*.json
//	LoadArtifact → runtime.LoadModule (the backend's Loader → jsonrt.Load) → SetConstants → Run
//
// # Format
//
//	{
//	  "symbol": "kiln_m_dnnl_main_0",
//	  "nodes": [
//	    {"op": "input", "name": "x", "shape": [[1, 3, 8, 8]], "dtype": ["float32"]},
//	    {"op": "const", "name": "kiln_m_dnnl_main_0_const_0", "shape": [[4, 3, 3, 3]], "dtype": ["float32"]},
//	    {"op": "kernel", "name": "dnnl.conv2d_bias_relu", "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]],
//	     "attrs": {"strides": {"ints": [1, 1]}, "groups": {"int": 1}},
//	     "shape": [[1, 4, 6, 6]], "dtype": ["float32"]}
//	  ],
//	  "heads": [[3, 0, 0]]
//	}
//
// Rules (Validate checks them, errors name the node):
//
//   - nodes are in execution order; an input [node, index, version]
//     names an output of an earlier node (the version is ignored and may
//     be omitted);
//   - "input" nodes have no inputs and one output; they are the packed
//     function's inputs in node order. "const" nodes have no inputs and
//     one output; their value is bound by name (SetConstants). "kernel"
//     nodes have at least one output; name is the kernel's operator (a
//     graph operator such as "nn.conv2d" or a composite such as
//     "dnnl.conv2d_bias_relu"), checked by the KernelSet;
//   - shape and dtype list one entry per output (kiln dtype names);
//   - input and const names are unique; attrs are typed: each value is an
//     object with exactly one key naming its kind (int, float, string,
//     bool, ints, floats, strings, dtype);
//   - heads are the outputs of the packed function, in order, after the
//     inputs: symbol(inputs..., outputs...);
//   - unknown fields are errors.
package jsonrt

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// Node kinds.
const (
	OpInput  = "input"
	OpConst  = "const"
	OpKernel = "kernel"
)

// Entry names one output of a node: [node, index, version].
type Entry struct {
	Node, Index, Version int
}

// MarshalJSON writes [node, index, version].
func (e Entry) MarshalJSON() ([]byte, error) {
	return json.Marshal([3]int{e.Node, e.Index, e.Version})
}

// UnmarshalJSON reads [node, index] or [node, index, version].
func (e *Entry) UnmarshalJSON(data []byte) error {
	var v []int
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("entry %s: want [node, index, version]", data)
	}
	if len(v) < 2 || len(v) > 3 {
		return fmt.Errorf("entry %s: want [node, index, version]", data)
	}
	e.Node, e.Index = v[0], v[1]
	if len(v) == 3 {
		e.Version = v[2]
	}
	return nil
}

// Attr is one typed attribute value, written as {"<kind>": value}.
type Attr struct {
	Value any // a value of one of the ir.AttrKind Go types
}

// MarshalJSON writes {"kind": value}.
func (a Attr) MarshalJSON() ([]byte, error) {
	k := ir.KindOf(a.Value)
	if k == 0 {
		return nil, fmt.Errorf("attribute value %v (%T) has no attribute kind", a.Value, a.Value)
	}
	v := a.Value
	if d, ok := v.(ir.DType); ok {
		v = d.String()
	}
	return json.Marshal(map[string]any{k.String(): v})
}

// UnmarshalJSON reads {"kind": value}.
func (a *Attr) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || len(m) != 1 {
		return fmt.Errorf("attribute %s: want an object with one key naming the kind", data)
	}
	for k, raw := range m {
		var err error
		switch k {
		case "int":
			var v int64
			err = strict(raw, &v)
			a.Value = v
		case "float":
			var v float64
			err = strict(raw, &v)
			a.Value = v
		case "string":
			var v string
			err = strict(raw, &v)
			a.Value = v
		case "bool":
			var v bool
			err = strict(raw, &v)
			a.Value = v
		case "ints":
			v := []int64{}
			err = strict(raw, &v)
			a.Value = v
		case "floats":
			v := []float64{}
			err = strict(raw, &v)
			a.Value = v
		case "strings":
			v := []string{}
			err = strict(raw, &v)
			a.Value = v
		case "dtype":
			var s string
			if err = strict(raw, &s); err == nil {
				a.Value, err = ir.ParseDType(s)
			}
		default:
			return fmt.Errorf("attribute %s: unknown kind %q", data, k)
		}
		if err != nil {
			return fmt.Errorf("attribute %s: %v", data, err)
		}
	}
	return nil
}

// Node is one node of a Graph.
type Node struct {
	// Op is OpInput, OpConst or OpKernel.
	Op string `json:"op"`
	// Name is the input's or constant's name, or the kernel's operator.
	Name string `json:"name"`
	// Inputs are the kernel's operands.
	Inputs []Entry `json:"inputs,omitempty"`
	// Attrs are the kernel's attributes.
	Attrs map[string]Attr `json:"attrs,omitempty"`
	// Shape and DType give each output's type.
	Shape [][]int64 `json:"shape"`
	DType []string  `json:"dtype"`
	// Sources are the model nodes (ONNX node names) a kernel computes,
	// for profiles; optional.
	Sources []string `json:"sources,omitempty"`
}

// AttrMap returns the node's attributes as ir.Attrs.
func (n *Node) AttrMap() ir.Attrs {
	out := ir.Attrs{}
	for k, v := range n.Attrs {
		out[k] = v.Value
	}
	return out
}

// SetAttrs stores attrs as the node's typed attributes.
func (n *Node) SetAttrs(attrs ir.Attrs) {
	if len(attrs) == 0 {
		n.Attrs = nil
		return
	}
	n.Attrs = map[string]Attr{}
	for k, v := range attrs {
		n.Attrs[k] = Attr{Value: v}
	}
}

// Graph is a serialised external function: its nodes and outputs.
type Graph struct {
	// Symbol is the packed function the module exports.
	Symbol string `json:"symbol"`
	// Nodes in execution order.
	Nodes []Node `json:"nodes"`
	// Heads are the function's outputs.
	Heads []Entry `json:"heads"`
}

// Type returns the dtype and shape of an entry (valid graphs only).
func (g *Graph) Type(e Entry) (ir.DType, ir.Shape) {
	n := &g.Nodes[e.Node]
	dt, _ := ir.ParseDType(n.DType[e.Index])
	return dt, ir.Shape(n.Shape[e.Index]).Clone()
}

// Inputs lists the ids of the input nodes, in argument order.
func (g *Graph) Inputs() []int { return g.nodesOf(OpInput) }

// Consts lists the ids of the const nodes.
func (g *Graph) Consts() []int { return g.nodesOf(OpConst) }

func (g *Graph) nodesOf(op string) []int {
	var out []int
	for i := range g.Nodes {
		if g.Nodes[i].Op == op {
			out = append(out, i)
		}
	}
	return out
}

// Marshal returns the graph's JSON.
func (g *Graph) Marshal() ([]byte, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return json.MarshalIndent(g, "", " ")
}

// Parse reads and validates a graph.
func Parse(data []byte) (*Graph, error) {
	g := &Graph{}
	if err := strict(data, g); err != nil {
		return nil, fmt.Errorf("jsonrt: %w", err)
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return g, nil
}

func strict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

// Validate checks the format rules of the package documentation.
func (g *Graph) Validate() error {
	if g.Symbol == "" {
		return fmt.Errorf("jsonrt: graph has no symbol")
	}
	names := map[string]int{}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		where := func(format string, args ...any) error {
			return fmt.Errorf("jsonrt: %s: node %d (%s %q): %s", g.Symbol, i, n.Op, n.Name, fmt.Sprintf(format, args...))
		}
		switch n.Op {
		case OpInput, OpConst:
			if len(n.Inputs) != 0 || len(n.Attrs) != 0 {
				return where("an %s node takes no inputs or attributes", n.Op)
			}
			if len(n.Shape) != 1 {
				return where("has %d outputs, want 1", len(n.Shape))
			}
			if n.Name == "" {
				return where("has no name")
			}
			if j, dup := names[n.Name]; dup {
				return where("name repeats node %d", j)
			}
			names[n.Name] = i
		case OpKernel:
			if n.Name == "" {
				return where("kernel has no operator name")
			}
			if len(n.Shape) == 0 {
				return where("kernel has no outputs")
			}
		default:
			return where("unknown node op (want input, const or kernel)")
		}
		if len(n.DType) != len(n.Shape) {
			return where("%d dtypes for %d shapes", len(n.DType), len(n.Shape))
		}
		for k, s := range n.DType {
			dt, err := ir.ParseDType(s)
			if err != nil || dt.Size() == 0 {
				return where("output %d: bad dtype %q", k, s)
			}
			for _, d := range n.Shape[k] {
				if d < 0 {
					return where("output %d: negative dimension in %v", k, n.Shape[k])
				}
			}
		}
		for k, e := range n.Inputs {
			if e.Node < 0 || e.Node >= i {
				return where("input %d refers to node %d, which is not an earlier node", k, e.Node)
			}
			if e.Index < 0 || e.Index >= len(g.Nodes[e.Node].Shape) {
				return where("input %d refers to output %d of node %d, which has %d outputs", k, e.Index, e.Node, len(g.Nodes[e.Node].Shape))
			}
		}
	}
	if len(g.Heads) == 0 {
		return fmt.Errorf("jsonrt: %s: graph has no heads", g.Symbol)
	}
	for k, e := range g.Heads {
		if e.Node < 0 || e.Node >= len(g.Nodes) || e.Index < 0 || e.Index >= len(g.Nodes[e.Node].Shape) {
			return fmt.Errorf("jsonrt: %s: head %d [%d, %d] names no node output", g.Symbol, k, e.Node, e.Index)
		}
	}
	return nil
}
