package driver

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/kiln-dev/kiln/device"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/memplan"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/tensor"
)

// execProgram is the executor program of the lowered main function, built
// once by the executor stage: graph.json's value for the graph executor,
// and the typed entries the AOT stage builds its program from (so it
// never parses the program's text tables back).
type execProgram struct {
	graph *runtime.GraphJSON
	// types is every entry's type, in entry order.
	types []*ir.TensorType
	// funcs is each node's compiled function ("" for inputs and copies).
	funcs  []string
	params map[string]*tensor.Tensor
	pools  []MemoryPool
}

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
	// funcs is each node's compiled function ("" for inputs and copies).
	funcs []string
	// pools describes the storage pools planStorage made.
	pools []MemoryPool
	// sources names the model nodes a call computes (nil: none recorded).
	sources func(*graph.Call) []string
	// views are the nodes of calls that move no data once their operands
	// sit in the right bytes (viewOf), and viewKinds their kinds:
	// planStorage may run them in place.
	views     []int
	viewKinds []viewKind
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
// each expression's planned device (nil: everything on cpu:0); sources
// (nil: none) the model nodes each call computes, recorded as the node's
// "sources" attribute for profiles. Constants become parameters named p0, p1, ... and are returned for the
// params file.
func buildGraphJSON(main *graph.Function, callee map[*graph.Call]string, devOf func(graph.Expr) device.VirtualDevice, sources func(*graph.Call) []string) (*execProgram, error) {
	b := &graphBuilder{
		sources: sources,
		devOf:   devOf,
		g:       &runtime.GraphJSON{},
		callee:  callee,
		entries: map[graph.Expr][]entry{},
		params:  map[string]*tensor.Tensor{},
	}
	for _, p := range main.Params {
		tt, ok := p.Type().(*ir.TensorType)
		if !ok {
			return nil, fmt.Errorf("input %%%s is not a tensor", p.Name)
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
		return nil, err
	}
	for _, en := range b.entries[main.Body] {
		b.g.Heads = append(b.g.Heads, []int64{int64(en.node), int64(en.index)})
	}
	for _, r := range append(b.rowStart, len(b.types)) {
		b.g.NodeRowPtr = append(b.g.NodeRowPtr, int64(r))
	}
	if err := b.planStorage(); err != nil {
		return nil, err
	}
	return &execProgram{graph: b.g, types: b.types, funcs: b.funcs, params: b.params, pools: b.pools}, nil
}

// addNode appends a node with the given output types, on device dev, and
// returns its first entry.
func (b *graphBuilder) addNode(n runtime.GraphNode, outs []*ir.TensorType, dev []int64) entry {
	id := len(b.g.Nodes)
	b.g.Nodes = append(b.g.Nodes, n)
	b.funcs = append(b.funcs, "")
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
			attrs := map[string]any{"func_name": name, "num_inputs": len(ins), "num_outputs": len(outs)}
			if b.sources != nil {
				if src := b.sources(x); len(src) > 0 {
					attrs["sources"] = src
				}
			}
			first = b.addNode(runtime.GraphNode{Op: runtime.OpKiln, Name: name, Inputs: ins, Attrs: rawAttrs(attrs)}, outs, b.deviceIndex(x))
			b.funcs[first.node] = name
			if k := viewOf(x); k != notView {
				b.views, b.viewKinds = append(b.views, first.node), append(b.viewKinds, k)
			}
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

// MemoryPool describes one pool of planned memory (package memplan): the
// graph executor's intermediates of one device, or the AOT workspace.
type MemoryPool struct {
	// Device is where the pool lives ("cpu:0").
	Device string
	// Tensors is how many tensors the pool holds.
	Tensors int
	// Bytes is the pool's size; LowerBound the most bytes live at one
	// step (no placement can use less).
	Bytes, LowerBound int64
	// Algorithm names the placement the planner kept.
	Algorithm string
}

// planStorage places the entries with package memplan, the planner the
// AOT executor uses too: inputs, parameters and outputs (which persist
// between runs) get a storage of their own; the intermediates of each
// device share one pool storage, each at the byte offset the planner gave
// it (attrs.storage_offset). An intermediate lives from the node that
// writes it to its last reader.
func (b *graphBuilder) planStorage() error {
	n := len(b.types)
	pinned := make([]bool, n)
	for _, h := range b.g.Heads {
		pinned[b.rowStart[h[0]]+int(h[1])] = true
	}
	// The operands of joins and the results of cuts run in place live
	// inside another entry's bytes (inplace.go).
	alias, rel := b.inPlaceViews(pinned)
	ids := make([]int64, n)
	offsets := make([]int64, n)
	var nextID int64
	// The pooled entries of each device, in device order of appearance;
	// poolOf[k] and local[k] place entry k (poolOf -1: a storage of its own).
	type pool struct {
		dev     [2]int64
		entries []int   // flat entry ids
		steps   [][]int // per node, the pool's entries it touches (local ids)
	}
	var pools []*pool
	byDev := map[[2]int64]int{}
	poolOf := make([]int, n)
	local := make([]int, n)
	for ni, node := range b.g.Nodes {
		for k := b.rowStart[ni]; k < b.rowStart[ni]+numOutputs(b, ni); k++ {
			poolOf[k] = -1
			if alias[k] >= 0 {
				continue
			}
			if node.Op == runtime.OpNull || pinned[k] {
				ids[k] = nextID
				nextID++
				continue
			}
			di := b.g.Attrs.DeviceIndex[k]
			dev := [2]int64{di[0], di[1]}
			pi, ok := byDev[dev]
			if !ok {
				pi = len(pools)
				byDev[dev] = pi
				pools = append(pools, &pool{dev: dev, steps: make([][]int, len(b.g.Nodes))})
			}
			poolOf[k], local[k] = pi, len(pools[pi].entries)
			pools[pi].entries = append(pools[pi].entries, k)
		}
	}
	touch := func(ni, k int) {
		if alias[k] >= 0 {
			k = alias[k]
		}
		if pi := poolOf[k]; pi >= 0 {
			pools[pi].steps[ni] = append(pools[pi].steps[ni], local[k])
		}
	}
	for ni, node := range b.g.Nodes {
		for _, in := range node.Inputs {
			touch(ni, b.rowStart[in[0]]+int(in[1]))
		}
		for k := b.rowStart[ni]; k < b.rowStart[ni]+numOutputs(b, ni); k++ {
			touch(ni, k)
		}
	}
	for _, p := range pools {
		sizes := make([]int64, len(p.entries))
		for i, k := range p.entries {
			sizes[i] = b.types[k].NumBytes()
		}
		ivs, err := memplan.Liveness(sizes, p.steps)
		if err != nil {
			return err
		}
		pl, err := memplan.Plan(ivs)
		if err != nil {
			return err
		}
		for i, k := range p.entries {
			ids[k], offsets[k] = nextID, pl.Offsets[i]
		}
		b.pools = append(b.pools, MemoryPool{
			Device:  runtime.Device{Type: runtime.DeviceType(p.dev[0]), ID: int(p.dev[1])}.String(),
			Tensors: len(p.entries), Bytes: pl.Size, LowerBound: pl.LowerBound, Algorithm: pl.Algorithm,
		})
		nextID++
	}
	for k, a := range alias {
		if a >= 0 {
			ids[k], offsets[k] = ids[a], offsets[a]+rel[k]
		}
	}
	b.g.Attrs.StorageID = ids
	b.g.Attrs.StorageOffset = offsets
	return nil
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
