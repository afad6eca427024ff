package build

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/kiln-dev/kiln/device"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/tensor"
)

// entry identifies one output of one node.
type entry struct{ node, index int }

// graphBuilder walks the lowered main function.
type graphBuilder struct {
	g       *runtime.GraphJSON
	callee  map[*graph.Call]string
	entries map[graph.Expr][]entry
	types   []*ir.TensorType // per entry, in entry order
	params  map[string]*tensor.Tensor
	nparams int
	// ProducerOf[e] is the node index producing entry e (flat order).
	rowStart []int
	// devOf is the planned device of an expression.
	devOf func(graph.Expr) device.VirtualDevice
	ncopy int
}

// deviceIndex is the [device_type, device_id] of e's entries: its planned
// device, cpu:0 for whatever planning left unconstrained.
func (b *graphBuilder) deviceIndex(e graph.Expr) []int64 {
	di := []int64{int64(runtime.CPU), 0}
	if b.devOf == nil {
		return di
	}
	vd := b.devOf(e)
	if vd.DeviceType > 0 {
		di[0] = int64(vd.DeviceType)
	}
	if vd.DeviceID > 0 {
		di[1] = int64(vd.DeviceID)
	}
	return di
}

// buildGraphJSON makes the executor program of main, whose primitive calls
// callee maps to compiled function names (a call of a GlobalVar names its
// function itself; a device copy becomes a device_copy node). devOf gives
// each expression's planned device (nil: everything on cpu:0).
// Constants become parameters named p0, p1, ... and are returned for the
// params file.
func buildGraphJSON(main *graph.Function, callee map[*graph.Call]string, devOf func(graph.Expr) device.VirtualDevice) (*runtime.GraphJSON, map[string]*tensor.Tensor, error) {
	b := &graphBuilder{
		devOf:   devOf,
		g:       &runtime.GraphJSON{},
		callee:  callee,
		entries: map[graph.Expr][]entry{},
		params:  map[string]*tensor.Tensor{},
	}
	for _, p := range main.Params {
		tt, ok := p.Type().(*ir.TensorType)
		if !ok {
			return nil, nil, fmt.Errorf("input %%%s is not a tensor", p.Name)
		}
		b.entries[p] = []entry{b.addNode(runtime.GraphNode{Op: runtime.OpNull, Name: p.Name}, []*ir.TensorType{tt}, b.deviceIndex(p))}
		b.g.ArgNodes = append(b.g.ArgNodes, int64(len(b.g.Nodes)-1))
	}
	var err error
	graph.PostOrder(main.Body, func(e graph.Expr) {
		if err == nil {
			err = b.visit(e)
		}
	})
	if err != nil {
		return nil, nil, err
	}
	for _, en := range b.entries[main.Body] {
		b.g.Heads = append(b.g.Heads, []int64{int64(en.node), int64(en.index)})
	}
	for _, r := range append(b.rowStart, len(b.types)) {
		b.g.NodeRowPtr = append(b.g.NodeRowPtr, int64(r))
	}
	b.planStorage()
	return b.g, b.params, nil
}

// addNode appends a node with the given output types, on device dev, and
// returns its first entry.
func (b *graphBuilder) addNode(n runtime.GraphNode, outs []*ir.TensorType, dev []int64) entry {
	id := len(b.g.Nodes)
	b.g.Nodes = append(b.g.Nodes, n)
	b.rowStart = append(b.rowStart, len(b.types))
	for _, t := range outs {
		b.types = append(b.types, t)
		b.g.Attrs.Shape = append(b.g.Attrs.Shape, append([]int64{}, t.Shape...))
		b.g.Attrs.DLType = append(b.g.Attrs.DLType, t.DType.String())
		b.g.Attrs.DeviceIndex = append(b.g.Attrs.DeviceIndex, dev)
	}
	return entry{node: id}
}

func flatTensorTypes(t ir.Type) ([]*ir.TensorType, error) {
	switch x := t.(type) {
	case *ir.TensorType:
		return []*ir.TensorType{x}, nil
	case *ir.TupleType:
		var out []*ir.TensorType
		for _, f := range x.Fields {
			fs, err := flatTensorTypes(f)
			if err != nil {
				return nil, err
			}
			out = append(out, fs...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("value of type %v cannot be an executor entry", t)
}

func (b *graphBuilder) visit(e graph.Expr) error {
	if _, done := b.entries[e]; done {
		return nil
	}
	switch x := e.(type) {
	case *graph.Var:
		return fmt.Errorf("variable %%%s is not an input of main", x.Name)
	case *graph.Constant:
		name := fmt.Sprintf("p%d", b.nparams)
		b.nparams++
		b.params[name] = x.Value
		b.entries[e] = []entry{b.addNode(runtime.GraphNode{Op: runtime.OpNull, Name: name}, []*ir.TensorType{x.Value.Type()}, b.deviceIndex(x))}
		b.g.ArgNodes = append(b.g.ArgNodes, int64(len(b.g.Nodes)-1))
	case *graph.Tuple:
		var es []entry
		for _, f := range x.Fields {
			es = append(es, b.entries[f]...)
		}
		b.entries[e] = es
	case *graph.TupleGetItem:
		es := b.entries[x.Tuple]
		// Fields may be tuples themselves: find the flat range of field Index.
		tt, ok := x.Tuple.Type().(*ir.TupleType)
		if !ok {
			return fmt.Errorf("tuple item of a non-tuple")
		}
		start := 0
		for i := 0; i < x.Index; i++ {
			fs, err := flatTensorTypes(tt.Fields[i])
			if err != nil {
				return err
			}
			start += len(fs)
		}
		fs, err := flatTensorTypes(tt.Fields[x.Index])
		if err != nil {
			return err
		}
		b.entries[e] = es[start : start+len(fs)]
	case *graph.Function, *graph.GlobalVar:
		// Function literals and global functions are only callees.
	case *graph.Call:
		var ins [][]int64
		for _, a := range x.Args {
			for _, en := range b.entries[a] {
				ins = append(ins, []int64{int64(en.node), int64(en.index)})
			}
		}
		outs, err := flatTensorTypes(x.Type())
		if err != nil {
			return err
		}
		var first entry
		if deviceCopyOf(x) != nil {
			if len(ins) != 1 || len(outs) != 1 {
				return fmt.Errorf("%s: a device copy of a tuple reached the executor", graph.Describe(x))
			}
			name := fmt.Sprintf("device_copy_%d", b.ncopy)
			b.ncopy++
			first = b.addNode(runtime.GraphNode{Op: runtime.OpDeviceCopy, Name: name, Inputs: ins, Attrs: rawAttrs(map[string]any{
				"num_inputs": 1, "num_outputs": 1,
			})}, outs, b.deviceIndex(x))
		} else {
			name, ok := b.callee[x]
			if g, isG := x.Fn.(*graph.GlobalVar); isG && !ok {
				name, ok = g.Name, true
			}
			if !ok {
				return fmt.Errorf("%s has no compiled function", graph.Describe(x))
			}
			first = b.addNode(runtime.GraphNode{Op: runtime.OpKiln, Name: name, Inputs: ins, Attrs: rawAttrs(map[string]any{
				"func_name": name, "num_inputs": len(ins), "num_outputs": len(outs),
			})}, outs, b.deviceIndex(x))
		}
		es := make([]entry, len(outs))
		for i := range outs {
			es[i] = entry{node: first.node, index: i}
		}
		b.entries[e] = es
	default:
		return fmt.Errorf("unexpected %T in main", e)
	}
	return nil
}

// planStorage assigns storage ids: inputs, parameters and outputs get their
// own; intermediate entries reuse a freed storage of at least their size
// (best fit) on the same device once all their readers have run.
func (b *graphBuilder) planStorage() {
	n := len(b.types)
	flat := func(node, idx int) int { return b.rowStart[node] + idx }
	lastUse := make([]int, n)
	for i := range lastUse {
		lastUse[i] = -1
	}
	for ni, node := range b.g.Nodes {
		for _, in := range node.Inputs {
			lastUse[flat(int(in[0]), int(in[1]))] = ni
		}
	}
	pinned := make([]bool, n)
	for _, h := range b.g.Heads {
		pinned[flat(int(h[0]), int(h[1]))] = true
	}
	ids := make([]int64, n)
	var sizes []int64
	var devs [][2]int64 // device of each storage id
	var free []int64    // storage ids available for reuse
	releaseAt := map[int][]int64{}
	for ni, node := range b.g.Nodes {
		for _, sid := range releaseAt[ni] {
			free = append(free, sid)
		}
		for k := b.rowStart[ni]; k < b.rowStart[ni]+numOutputs(b, ni); k++ {
			size := b.types[k].NumBytes()
			di := b.g.Attrs.DeviceIndex[k]
			dev := [2]int64{di[0], di[1]}
			sid := int64(-1)
			if node.Op != "null" && !pinned[k] {
				best := -1
				for fi, f := range free {
					if devs[f] == dev && sizes[f] >= size && (best < 0 || sizes[f] < sizes[free[best]]) {
						best = fi
					}
				}
				if best >= 0 {
					sid = free[best]
					free = append(free[:best], free[best+1:]...)
				}
			}
			if sid < 0 {
				sid = int64(len(sizes))
				sizes = append(sizes, size)
				devs = append(devs, dev)
			}
			ids[k] = sid
			if node.Op != "null" && !pinned[k] {
				if lu := lastUse[k]; lu >= 0 {
					// Released after its last reader ran: available from the node after.
					releaseAt[lu+1] = append(releaseAt[lu+1], sid)
				} else {
					// Never read: reusable once this node has run (not
					// before, or a sibling output could share it).
					releaseAt[ni+1] = append(releaseAt[ni+1], sid)
				}
			}
		}
	}
	b.g.Attrs.StorageID = ids
}

func numOutputs(b *graphBuilder, node int) int {
	end := len(b.types)
	if node+1 < len(b.rowStart) {
		end = b.rowStart[node+1]
	}
	return end - b.rowStart[node]
}

// rawAttrs encodes node attributes (strings and integers) as JSON.
func rawAttrs(kv map[string]any) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(kv))
	for k, v := range kv {
		raw, err := json.Marshal(v)
		if err != nil {
			panic(fmt.Sprintf("graph.json attribute %s: %v", k, err)) // only strings and ints reach here
		}
		out[k] = raw
	}
	return out
}

// sortedParamNames lists parameter names in a stable order (p0, p1, ..., p10).
func sortedParamNames(params map[string]*tensor.Tensor) []string {
	names := make([]string, 0, len(params))
	for n := range params {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if len(names[i]) != len(names[j]) {
			return len(names[i]) < len(names[j])
		}
		return names[i] < names[j]
	})
	return names
}
