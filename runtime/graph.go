package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/memplan"
)

// This file parses and validates the graph JSON (format in doc.go).

// Node kinds of the graph JSON.
const (
	opNull       = OpNull
	opKiln       = OpKiln
	opDeviceCopy = OpDeviceCopy
)

// gNode is a validated node.
type gNode struct {
	op       string
	name     string
	funcName string   // kiln_op only
	sources  []string // kiln_op: the model nodes it computes (attribute sources)
	inputs   []int    // entry ids
	first    int      // first output entry
	nout     int
	// inPlace (kiln_op attribute in_place 1): the node's output is its
	// inputs laid end to end in one storage, so it is not called
	// (checkInPlace).
	inPlace bool
}

// gEntry is a validated node output.
type gEntry struct {
	node, index int
	dtype       ir.DType
	shape       ir.Shape
	sid         int64
	offset      int64 // byte offset in the storage
	dev         Device
	nbytes      int64
}

// graph is a validated graph.
type graph struct {
	nodes    []gNode
	entries  []gEntry
	argNodes []int // node ids, in arg_nodes order
	heads    []int // entry ids
}

// decodeStrict decodes one JSON value, rejecting unknown fields and
// trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// nodeRef names a node in errors.
func (g *graph) nodeRef(i int) string { return fmt.Sprintf("node %d (%q)", i, g.nodes[i].name) }

// entryRef names a node output in errors.
func (g *graph) entryRef(e int) string {
	en := g.entries[e]
	return fmt.Sprintf("node %d (%q) output %d", en.node, g.nodes[en.node].name, en.index)
}

// attrInt reads an integer node attribute given as a number or a string.
func attrInt(raw json.RawMessage) (int64, error) {
	var n int64
	if err := json.Unmarshal(raw, &n); err == nil {
		return n, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("want an integer, got %s", raw)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want an integer, got %q", s)
	}
	return n, nil
}

// ValidateGraphJSON parses and validates a graph JSON without a module:
// the checks NewGraphExecutor makes, except function resolution and the
// executor's device list.
func ValidateGraphJSON(data []byte) error {
	_, err := parseGraph(data, nil)
	return err
}

// parseGraph parses and validates the graph JSON. When devices is
// non-empty, every entry must live on one of them.
func parseGraph(data []byte, devices []Device) (*graph, error) {
	jg, err := DecodeGraphJSON(data)
	if err != nil {
		return nil, err
	}
	if len(jg.Nodes) == 0 {
		return nil, errors.New("graph JSON: no nodes")
	}
	g := &graph{nodes: make([]gNode, len(jg.Nodes))}
	jnodes := jg.Nodes
	for i := range jnodes {
		jn := &jnodes[i]
		n := &g.nodes[i]
		n.op, n.name = jn.Op, jn.Name
		if jn.Name == "" {
			return nil, fmt.Errorf("graph JSON: node %d (op %q) has no name", i, jn.Op)
		}
		if err := g.checkNodeKind(i, jn); err != nil {
			return nil, fmt.Errorf("graph JSON: %s: %w", g.nodeRef(i), err)
		}
	}

	// Entries: node_row_ptr[i] is node i's first entry.
	total := 0
	for i := range g.nodes {
		g.nodes[i].first = total
		total += g.nodes[i].nout
	}
	if jg.NodeRowPtr != nil {
		if len(jg.NodeRowPtr) != len(g.nodes)+1 {
			return nil, fmt.Errorf("graph JSON: node_row_ptr has %d elements, want %d (nodes + 1)", len(jg.NodeRowPtr), len(g.nodes)+1)
		}
		for i := range g.nodes {
			lo, hi := jg.NodeRowPtr[i], jg.NodeRowPtr[i+1]
			if lo != int64(g.nodes[i].first) || hi-lo != int64(g.nodes[i].nout) {
				return nil, fmt.Errorf("graph JSON: %s: node_row_ptr gives entries %d..%d, but the node has %d output(s) starting at entry %d", g.nodeRef(i), lo, hi-1, g.nodes[i].nout, g.nodes[i].first)
			}
		}
	}
	g.entries = make([]gEntry, total)
	for i := range g.nodes {
		for k := 0; k < g.nodes[i].nout; k++ {
			g.entries[g.nodes[i].first+k] = gEntry{node: i, index: k}
		}
	}

	// Inputs refer to earlier nodes (the node list is in execution order).
	for i := range g.nodes {
		for k, ref := range jnodes[i].Inputs {
			e, err := g.resolveRef(ref, i)
			if err != nil {
				return nil, fmt.Errorf("graph JSON: %s: input %d: %w", g.nodeRef(i), k, err)
			}
			g.nodes[i].inputs = append(g.nodes[i].inputs, e)
		}
	}

	if err := g.readAttrs(&jg.Attrs, devices); err != nil {
		return nil, err
	}
	if err := g.readArgNodes(jg.ArgNodes); err != nil {
		return nil, err
	}
	if len(jg.Heads) == 0 {
		return nil, errors.New("graph JSON: no heads (graph outputs)")
	}
	for k, ref := range jg.Heads {
		e, err := g.resolveRef(ref, len(g.nodes))
		if err != nil {
			return nil, fmt.Errorf("graph JSON: head %d: %w", k, err)
		}
		g.heads = append(g.heads, e)
	}
	if err := g.checkNodeTypes(); err != nil {
		return nil, err
	}
	if err := g.checkInPlace(); err != nil {
		return nil, err
	}
	if err := g.checkStorage(); err != nil {
		return nil, err
	}
	return g, nil
}

// checkNodeKind validates a node's op, input count and attributes.
func (g *graph) checkNodeKind(i int, jn *GraphNode) error {
	n := &g.nodes[i]
	intAttr := func(key string) (int64, bool, error) {
		raw, ok := jn.Attrs[key]
		if !ok {
			return 0, false, nil
		}
		v, err := attrInt(raw)
		if err != nil {
			return 0, true, fmt.Errorf("attribute %s: %w", key, err)
		}
		return v, true, nil
	}
	switch jn.Op {
	case opNull:
		if len(jn.Inputs) != 0 {
			return fmt.Errorf("a null (input) node has %d inputs, want none", len(jn.Inputs))
		}
		n.nout = 1
	case opKiln:
		raw, ok := jn.Attrs["func_name"]
		if !ok {
			return errors.New("kiln_op without attribute func_name")
		}
		if err := json.Unmarshal(raw, &n.funcName); err != nil || n.funcName == "" {
			return fmt.Errorf("attribute func_name must be a non-empty string, got %s", raw)
		}
		if raw, ok := jn.Attrs["sources"]; ok {
			if err := json.Unmarshal(raw, &n.sources); err != nil {
				return fmt.Errorf("attribute sources must be a list of strings: %w", err)
			}
		}
		nin, ok, err := intAttr("num_inputs")
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("kiln_op without attribute num_inputs")
		}
		if nin != int64(len(jn.Inputs)) {
			return fmt.Errorf("num_inputs is %d but the node lists %d inputs", nin, len(jn.Inputs))
		}
		nout, ok, err := intAttr("num_outputs")
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("kiln_op without attribute num_outputs")
		}
		if nout < 1 || nout > 1<<20 {
			return fmt.Errorf("num_outputs is %d, want at least 1", nout)
		}
		n.nout = int(nout)
		inPlace, _, err := intAttr("in_place")
		if err != nil {
			return err
		}
		if inPlace != 0 && inPlace != 1 {
			return fmt.Errorf("in_place is %d, want 0 or 1", inPlace)
		}
		n.inPlace = inPlace == 1
	case opDeviceCopy:
		if len(jn.Inputs) != 1 {
			return fmt.Errorf("device_copy has %d inputs, want 1", len(jn.Inputs))
		}
		for _, key := range []string{"num_inputs", "num_outputs"} {
			v, ok, err := intAttr(key)
			if err != nil {
				return err
			}
			if ok && v != 1 {
				return fmt.Errorf("device_copy has %s %d, want 1", key, v)
			}
		}
		n.nout = 1
	default:
		return fmt.Errorf("unknown op %q (want null, kiln_op or device_copy)", jn.Op)
	}
	return nil
}

// resolveRef turns [node, index(, version)] into an entry id; the node must
// come before node `before`.
func (g *graph) resolveRef(ref []int64, before int) (int, error) {
	if len(ref) != 2 && len(ref) != 3 {
		return 0, fmt.Errorf("entry reference %v: want [node, output] or [node, output, version]", ref)
	}
	nid, idx := ref[0], ref[1]
	if nid < 0 || nid >= int64(len(g.nodes)) {
		return 0, fmt.Errorf("entry reference %v: no node %d", ref, nid)
	}
	if nid >= int64(before) {
		return 0, fmt.Errorf("entry reference %v: node %d (%q) does not come before its user (nodes must be in execution order)", ref, nid, g.nodes[nid].name)
	}
	if idx < 0 || idx >= int64(g.nodes[nid].nout) {
		return 0, fmt.Errorf("entry reference %v: %s has %d output(s)", ref, g.nodeRef(int(nid)), g.nodes[nid].nout)
	}
	return g.nodes[nid].first + int(idx), nil
}

// readAttrs reads the per-entry attribute arrays.
func (g *graph) readAttrs(ja *GraphAttrs, devices []Device) error {
	n := len(g.entries)
	for _, c := range []struct {
		name string
		len  int
		nilp bool
	}{{"shape", len(ja.Shape), ja.Shape == nil}, {"dltype", len(ja.DLType), ja.DLType == nil}, {"storage_id", len(ja.StorageID), ja.StorageID == nil}} {
		if c.nilp {
			return fmt.Errorf("graph JSON: attrs.%s is missing", c.name)
		}
		if c.len != n {
			return fmt.Errorf("graph JSON: attrs.%s has %d elements, want %d (one per node output)", c.name, c.len, n)
		}
	}
	if ja.StorageOffset != nil && len(ja.StorageOffset) != n {
		return fmt.Errorf("graph JSON: attrs.storage_offset has %d elements, want %d (one per node output)", len(ja.StorageOffset), n)
	}
	if ja.DeviceIndex != nil && len(ja.DeviceIndex) != n {
		return fmt.Errorf("graph JSON: attrs.device_index has %d elements, want %d (one per node output)", len(ja.DeviceIndex), n)
	}
	defDev := CPUDevice(0)
	if len(devices) > 0 {
		defDev = devices[0]
	}
	for e := range g.entries {
		en := &g.entries[e]
		dt, err := ir.ParseDType(ja.DLType[e])
		if err != nil {
			return fmt.Errorf("graph JSON: %s: %w", g.entryRef(e), err)
		}
		en.dtype = dt
		en.shape = ir.Shape(ja.Shape[e]).Clone()
		if en.nbytes, err = byteSize(dt, en.shape); err != nil {
			return fmt.Errorf("graph JSON: %s: %w", g.entryRef(e), err)
		}
		en.sid = ja.StorageID[e]
		if en.sid < 0 {
			return fmt.Errorf("graph JSON: %s: negative storage_id %d", g.entryRef(e), en.sid)
		}
		if ja.StorageOffset != nil {
			en.offset = ja.StorageOffset[e]
			if en.offset < 0 || en.offset%storageAlign != 0 || en.offset > maxStorageOffset {
				return fmt.Errorf("graph JSON: %s: storage_offset %d, want a multiple of %d in [0, 2^48]", g.entryRef(e), en.offset, storageAlign)
			}
		}
		en.dev = defDev
		if ja.DeviceIndex != nil {
			di := ja.DeviceIndex[e]
			if len(di) != 2 || di[0] < 0 || di[0] > 1<<30 || di[1] < 0 || di[1] > 1<<20 {
				return fmt.Errorf("graph JSON: %s: device_index %v, want [device_type, device_id]", g.entryRef(e), di)
			}
			en.dev = Device{Type: DeviceType(di[0]), ID: int(di[1])}
		}
		if _, err := checkDevice(en.dev); err != nil {
			return fmt.Errorf("graph JSON: %s: %w", g.entryRef(e), err)
		}
		if len(devices) > 0 && !containsDevice(devices, en.dev) {
			return fmt.Errorf("graph JSON: %s is on %s, which is not among the executor's devices %v", g.entryRef(e), en.dev, devices)
		}
	}
	return nil
}

func containsDevice(ds []Device, d Device) bool {
	for _, x := range ds {
		if x == d {
			return true
		}
	}
	return false
}

// readArgNodes checks that arg_nodes lists exactly the null nodes, whose
// names must be unique.
func (g *graph) readArgNodes(args []int64) error {
	seen := map[int64]bool{}
	for k, a := range args {
		if a < 0 || a >= int64(len(g.nodes)) {
			return fmt.Errorf("graph JSON: arg_nodes[%d] = %d: no such node", k, a)
		}
		if g.nodes[a].op != opNull {
			return fmt.Errorf("graph JSON: arg_nodes[%d]: %s is a %s, not an input (null) node", k, g.nodeRef(int(a)), g.nodes[a].op)
		}
		if seen[a] {
			return fmt.Errorf("graph JSON: arg_nodes lists %s twice", g.nodeRef(int(a)))
		}
		seen[a] = true
		g.argNodes = append(g.argNodes, int(a))
	}
	names := map[string]int{}
	for i, n := range g.nodes {
		if n.op != opNull {
			continue
		}
		if !seen[int64(i)] {
			return fmt.Errorf("graph JSON: %s is an input (null) node missing from arg_nodes", g.nodeRef(i))
		}
		if j, dup := names[n.name]; dup {
			return fmt.Errorf("graph JSON: %s and %s are inputs with the same name", g.nodeRef(j), g.nodeRef(i))
		}
		names[n.name] = i
	}
	return nil
}

// checkNodeTypes checks device placement: all arguments of a kiln_op on one
// device; a device_copy keeps dtype and shape.
func (g *graph) checkNodeTypes() error {
	for i, n := range g.nodes {
		switch n.op {
		case opKiln:
			dev := g.entries[n.first].dev
			for _, e := range append(append([]int(nil), n.inputs...), g.outs(i)...) {
				if g.entries[e].dev != dev {
					return fmt.Errorf("graph JSON: %s (func %q): %s is on %s but output 0 is on %s; insert a device_copy", g.nodeRef(i), n.funcName, g.entryRef(e), g.entries[e].dev, dev)
				}
			}
		case opDeviceCopy:
			in, out := g.entries[n.inputs[0]], g.entries[n.first]
			if in.dtype != out.dtype || !in.shape.Equal(out.shape) {
				return fmt.Errorf("graph JSON: %s: device_copy from %s%v to %s%v changes dtype or shape", g.nodeRef(i), in.dtype, in.shape, out.dtype, out.shape)
			}
		}
	}
	return nil
}

// checkInPlace checks the nodes marked in_place, which move no data and
// are not called:
//
//   - a join (several inputs, one output): the output's bytes are its
//     inputs' laid end to end, each input at the byte where the previous
//     one ends, read by this node alone and once;
//   - a cut (one input): the outputs' bytes are the input's cut in order,
//     each output at the byte where the previous one ends, none a graph
//     output.
//
// The entries placed inside another share its storage, dtype and device;
// a join's inputs and a cut's input are written by a kiln_op that is not
// in place; a join's output and its inputs are not graph outputs. The
// storage check then treats the placed entries as parts of the other.
func (g *graph) checkInPlace() error {
	readers := make([]int, len(g.entries))
	for _, n := range g.nodes {
		for _, e := range n.inputs {
			readers[e]++
		}
	}
	head := make([]bool, len(g.entries))
	for _, e := range g.heads {
		head[e] = true
	}
	written := func(e int) bool {
		p := g.nodes[g.entries[e].node]
		return p.op == opKiln && !p.inPlace
	}
	for i, n := range g.nodes {
		if !n.inPlace {
			continue
		}
		if len(n.inputs) == 0 {
			return fmt.Errorf("graph JSON: %s: an in_place node needs inputs", g.nodeRef(i))
		}
		whole, parts, what := n.first, n.inputs, "input"
		if len(n.inputs) == 1 {
			whole, parts, what = n.inputs[0], g.outs(i), "output"
		} else if n.nout != 1 {
			return fmt.Errorf("graph JSON: %s: an in_place node with several inputs needs exactly one output", g.nodeRef(i))
		}
		if what == "output" && !written(whole) {
			return fmt.Errorf("graph JSON: %s: in_place input %s is not written by a kernel", g.nodeRef(i), g.entryRef(whole))
		}
		if what == "input" && head[whole] {
			return fmt.Errorf("graph JSON: %s: the output of an in_place node with several inputs cannot be a graph output", g.nodeRef(i))
		}
		w := g.entries[whole]
		at := w.offset
		for k, e := range parts {
			p := g.entries[e]
			switch {
			case head[e]:
				return fmt.Errorf("graph JSON: %s: in_place %s %d (%s) cannot be a graph output", g.nodeRef(i), what, k, g.entryRef(e))
			case what == "input" && !written(e):
				return fmt.Errorf("graph JSON: %s: in_place input %d (%s) is not written by a kernel", g.nodeRef(i), k, g.entryRef(e))
			case what == "input" && readers[e] != 1:
				return fmt.Errorf("graph JSON: %s: in_place input %d (%s) has other readers", g.nodeRef(i), k, g.entryRef(e))
			case p.sid != w.sid || p.dtype != w.dtype || p.dev != w.dev || p.offset != at:
				return fmt.Errorf("graph JSON: %s: in_place %s %d (%s) is not at byte %d of storage %d", g.nodeRef(i), what, k, g.entryRef(e), at, w.sid)
			}
			at += p.nbytes
		}
		if at != w.offset+w.nbytes {
			return fmt.Errorf("graph JSON: %s: in_place %ss hold %d bytes, %s holds %d", g.nodeRef(i), what, at-w.offset, g.entryRef(whole), w.nbytes)
		}
	}
	return nil
}

// outs lists node i's entry ids.
func (g *graph) outs(i int) []int {
	r := make([]int, g.nodes[i].nout)
	for k := range r {
		r[k] = g.nodes[i].first + k
	}
	return r
}

// Storage offsets are multiples of storageAlign, the alignment of the
// planner that writes them, and at most maxStorageOffset, so offset+size
// never overflows.
const (
	storageAlign     = memplan.Alignment
	maxStorageOffset = 1 << 48
)

// checkStorage checks that entries sharing a storage_id are on one device
// and that those whose bytes overlap (storage_offset, size) have disjoint
// lifetimes. An entry lives from the node that writes it to its last
// reader; inputs (null nodes) and graph outputs (heads) live for the whole
// run, since they persist between runs. Lifetimes are closed intervals,
// so an operator's output never shares bytes with its inputs.
//
// It sweeps the nodes in order, keeping per storage the entries live at
// that node sorted by offset (they are pairwise disjoint, or an error was
// returned): an entry starting to live is checked against its neighbours
// only, so hostile graphs cost O(entries · live entries) at worst.
func (g *graph) checkStorage() error {
	end := len(g.nodes)
	def := make([]int, len(g.entries))
	last := make([]int, len(g.entries))
	for e, en := range g.entries {
		def[e], last[e] = en.node, en.node
		if g.nodes[en.node].op == opNull {
			def[e], last[e] = -1, end
		}
	}
	for i, n := range g.nodes {
		for _, e := range n.inputs {
			last[e] = max(last[e], i)
		}
	}
	for _, e := range g.heads {
		last[e] = end
	}
	// The entries an in_place node places inside another (checkInPlace)
	// are parts of it: a join's output lives from the first of its
	// inputs, a cut's input until the last reader of its outputs.
	inside := make([]bool, len(g.entries))
	for i, n := range g.nodes {
		switch {
		case !n.inPlace:
		case len(n.inputs) == 1:
			for _, e := range g.outs(i) {
				inside[e] = true
				last[n.inputs[0]] = max(last[n.inputs[0]], last[e])
			}
		default:
			for _, e := range n.inputs {
				inside[e] = true
				def[n.first] = min(def[n.first], def[e])
			}
		}
	}
	order := make([]int, len(g.entries))
	for e := range order {
		order[e] = e
	}
	sort.SliceStable(order, func(a, b int) bool { return def[order[a]] < def[order[b]] })
	devOf := map[int64]int{}  // storage id → first entry (its device)
	live := map[int64][]int{} // storage id → live entries, by offset
	for _, e := range order {
		en := &g.entries[e]
		if o, ok := devOf[en.sid]; !ok {
			devOf[en.sid] = e
		} else if g.entries[o].dev != en.dev {
			return fmt.Errorf("graph JSON: storage_id %d is shared by %s on %s and %s on %s", en.sid, g.entryRef(o), g.entries[o].dev, g.entryRef(e), en.dev)
		}
		if en.nbytes == 0 || inside[e] {
			continue
		}
		// Drop the entries of this storage that died before e starts.
		ls := live[en.sid][:0]
		for _, o := range live[en.sid] {
			if last[o] >= def[e] {
				ls = append(ls, o)
			}
		}
		at := sort.Search(len(ls), func(k int) bool { return g.entries[ls[k]].offset >= en.offset })
		for _, k := range []int{at - 1, at} {
			if k < 0 || k >= len(ls) {
				continue
			}
			o := &g.entries[ls[k]]
			if o.offset < en.offset+en.nbytes && en.offset < o.offset+o.nbytes {
				return fmt.Errorf("graph JSON: storage_id %d is shared by %s and %s, which are live at the same time", en.sid, g.entryRef(ls[k]), g.entryRef(e))
			}
		}
		ls = append(ls, 0)
		copy(ls[at+1:], ls[at:])
		ls[at] = e
		live[en.sid] = ls
	}
	return nil
}
