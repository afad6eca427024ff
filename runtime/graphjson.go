package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
)

// GraphJSON is graph.json, the graph executor's program (the format is in
// the package documentation). It is the one definition of the schema: the
// build writes it (driver.Compile) and NewGraphExecutor reads it
// (DecodeGraphJSON, then validation).
type GraphJSON struct {
	// Nodes are the nodes in execution order.
	Nodes []GraphNode `json:"nodes"`
	// ArgNodes are the indices of the input and parameter ("null") nodes.
	ArgNodes []int64 `json:"arg_nodes"`
	// Heads are the program's outputs as [node, output] references.
	Heads [][]int64 `json:"heads"`
	// NodeRowPtr[i] is node i's first entry (its first output's index
	// in the per-entry tables); the last element is the entry count.
	NodeRowPtr []int64 `json:"node_row_ptr"`
	// Attrs are the per-entry tables.
	Attrs GraphAttrs `json:"attrs"`
}

// GraphNode is one node: an input or parameter ("null"), a compiled
// function call ("kiln_op", with attributes func_name, num_inputs and
// num_outputs, and optionally sources) or a copy between devices ("device_copy").
type GraphNode struct {
	Op     string                     `json:"op"`
	Name   string                     `json:"name"`
	Inputs [][]int64                  `json:"inputs,omitempty"`
	Attrs  map[string]json.RawMessage `json:"attrs,omitempty"`
}

// GraphAttrs are the per-entry tables, one element per node output.
type GraphAttrs struct {
	Shape       [][]int64 `json:"shape"`
	DLType      []string  `json:"dltype"`
	StorageID   []int64   `json:"storage_id"`
	DeviceIndex [][]int64 `json:"device_index"`
	// StorageOffset, when present, is each entry's byte offset in its
	// storage (package memplan places a device's intermediates in one
	// pool); absent, every entry starts at its storage's first byte.
	StorageOffset []int64 `json:"storage_offset,omitempty"`
}

// Graph-node op names.
const (
	// OpNull is an input or parameter node.
	OpNull = "null"
	// OpKiln is a call of a compiled function.
	OpKiln = "kiln_op"
	// OpDeviceCopy is a copy between devices.
	OpDeviceCopy = "device_copy"
)

// SetAttr sets node attribute key to v, encoded as JSON.
func (n *GraphNode) SetAttr(key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("graph node %q: attribute %s: %w", n.Name, key, err)
	}
	if n.Attrs == nil {
		n.Attrs = map[string]json.RawMessage{}
	}
	n.Attrs[key] = raw
	return nil
}

// StringAttr returns a string attribute ("" when absent or not a string).
func (n *GraphNode) StringAttr(key string) string {
	var s string
	if raw, ok := n.Attrs[key]; ok && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// Marshal renders the program as indented JSON (attribute keys sorted).
func (g *GraphJSON) Marshal() ([]byte, error) { return json.MarshalIndent(g, "", " ") }

// DecodeGraphJSON reads graph.json strictly: unknown fields, trailing
// data and a missing attrs table are errors, and an error inside a node
// names the node's index. It checks the syntax only; NewGraphExecutor
// (and ValidateGraphJSON) check the program.
func DecodeGraphJSON(data []byte) (*GraphJSON, error) {
	// The same fields, with the nodes and tables kept raw, so that each
	// is decoded on its own and its errors say where they are.
	type fields GraphJSON
	var env struct {
		fields
		Nodes []json.RawMessage `json:"nodes"`
		Attrs json.RawMessage   `json:"attrs"`
	}
	if err := decodeStrict(data, &env); err != nil {
		return nil, fmt.Errorf("graph JSON: %w", err)
	}
	g := GraphJSON(env.fields)
	g.Nodes = make([]GraphNode, len(env.Nodes))
	for i, raw := range env.Nodes {
		if err := decodeStrict(raw, &g.Nodes[i]); err != nil {
			return nil, fmt.Errorf("graph JSON: node %d: %w", i, err)
		}
	}
	if len(env.Attrs) == 0 {
		return nil, errors.New("graph JSON: no attrs")
	}
	if err := decodeStrict(env.Attrs, &g.Attrs); err != nil {
		return nil, fmt.Errorf("graph JSON: attrs: %w", err)
	}
	return &g, nil
}
