package onnx

import (
	"container/heap"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// maxSubgraphDepth bounds the nesting of control-flow bodies.
const maxSubgraphDepth = 64

// importer holds the state of one model import.
type importer struct {
	opsets  map[string]int64
	opts    Options
	baseDir string
	// mainInputs are the main graph's parameters, the only values that
	// Options.Freeze may supply.
	mainInputs map[*graph.Var]bool
	frozen     []string
	frozenSet  map[string]bool
	depth      int
	// freeUses caches the outer-scope names each subgraph refers to.
	freeUses map[*pb.GraphProto][]string
	// functions holds "domain/name" of the model-local functions.
	functions map[string]bool
	// foldWork sums the work (op.WorkEstimate) of the calls folded so
	// far, bounded by MaxImportFoldWork.
	foldWork int64
	// calls counts the operator calls built so far (Ctx.Call): unrolled
	// loops and inlined functions multiply a file's nodes, and the total
	// is bounded by MaxImportCalls.
	calls int
	// external holds the locations of the external tensor data read
	// (Model.ExternalFiles).
	external map[string]bool
}

// MaxImportCalls bounds the operator calls one import may build. Loops
// and Scans are unrolled (at most 4096 iterations each) and nesting
// multiplies them: a few hundred bytes of ONNX could otherwise ask for
// millions of operators and gigabytes of graph. Real models stay far
// below (the seven shared models: under 500 each).
const MaxImportCalls = 200_000

// MaxImportFoldWork bounds the total work (op.WorkEstimate) constant
// folding spends during one import; calls beyond it are left in the
// program (and run compiled).
const MaxImportFoldWork = 1 << 32

// scope maps ONNX value names to graph expressions. Subgraphs (If branches,
// Loop and Scan bodies) get a child scope, so they see the names of the
// enclosing graphs.
type scope struct {
	parent *scope
	vals   map[string]graph.Expr
	// missing records outputs a converter did not compute, with the reason.
	missing map[string]string
}

func newScope(parent *scope) *scope {
	return &scope{parent: parent, vals: map[string]graph.Expr{}, missing: map[string]string{}}
}

// lookup resolves a name through the scope chain. ok is false when the name
// is unknown; a non-empty reason means it is known but has no value.
func (s *scope) lookup(name string) (e graph.Expr, reason string, ok bool) {
	for sc := s; sc != nil; sc = sc.parent {
		if e, ok := sc.vals[name]; ok {
			return e, "", true
		}
		if r, ok := sc.missing[name]; ok {
			return nil, r, true
		}
	}
	return nil, "", false
}

// has reports whether a name is visible.
func (s *scope) has(name string) bool {
	_, _, ok := s.lookup(name)
	return ok
}

// freeze implements Ctx.freeze: it supplies Options.Freeze values for main
// graph inputs and records which were used.
func (imp *importer) freeze(v *graph.Var) (*tensor.Tensor, bool) {
	if !imp.mainInputs[v] {
		return nil, false
	}
	t, ok := imp.opts.Freeze[v.Name]
	if !ok || t == nil {
		return nil, false
	}
	if !imp.frozenSet[v.Name] {
		imp.frozenSet[v.Name] = true
		imp.frozen = append(imp.frozen, v.Name)
	}
	return t, true
}

// importGraph converts a graph in a child scope of parent. args bind the
// graph's declared inputs in order (for the main graph they are already in
// parent, and args is nil). It returns one expression per graph output.
func (imp *importer) importGraph(g *pb.GraphProto, parent *scope, args []graph.Expr) ([]graph.Expr, error) {
	imp.depth++
	defer func() { imp.depth-- }()
	if imp.depth > maxSubgraphDepth {
		return nil, fmt.Errorf("subgraphs are nested more than %d deep", maxSubgraphDepth)
	}
	sc := parent
	if args != nil {
		sc = newScope(parent)
	}
	if args != nil {
		if len(args) != len(g.GetInput()) {
			return nil, fmt.Errorf("graph %q declares %d inputs but is given %d values", g.GetName(), len(g.GetInput()), len(args))
		}
		for i, vi := range g.GetInput() {
			if vi.GetName() == "" {
				return nil, fmt.Errorf("graph %q input %d has an empty name", g.GetName(), i)
			}
			sc.vals[vi.GetName()] = args[i]
		}
	}
	for _, t := range g.GetInitializer() {
		name := t.GetName()
		if name == "" {
			return nil, fmt.Errorf("graph %q has an initializer without a name", g.GetName())
		}
		if _, dup := sc.vals[name]; dup {
			// An initializer that is also a main-graph input is not a
			// parameter, so this is a real duplicate.
			return nil, fmt.Errorf("initializer %q is defined twice", name)
		}
		imp.noteExternal(t)
		v, err := initializerTensor(t, imp.baseDir)
		if err != nil {
			return nil, fmt.Errorf("initializer %q: %w", name, err)
		}
		sc.vals[name] = graph.NewConstant(v)
	}
	if len(g.GetSparseInitializer()) > 0 {
		return nil, fmt.Errorf("%w: graph %q uses sparse tensors (sparse initializers)", ErrUnsupportedType, g.GetName())
	}
	order, err := imp.topoSort(g, sc)
	if err != nil {
		return nil, err
	}
	for _, i := range order {
		if err := imp.convertNode(sc, g.GetNode()[i]); err != nil {
			return nil, err
		}
	}
	outs := make([]graph.Expr, len(g.GetOutput()))
	for i, vi := range g.GetOutput() {
		name := vi.GetName()
		e, reason, ok := sc.lookup(name)
		switch {
		case !ok:
			return nil, fmt.Errorf("graph output %q is not produced by any node, initializer or graph input", name)
		case e == nil:
			return nil, fmt.Errorf("graph output %q has no value: %s", name, reason)
		}
		outs[i] = e
	}
	return outs, nil
}

// nodeLabel names a node for messages: its name, or its index and op type.
func nodeLabel(i int, n *pb.NodeProto) string {
	if n.GetName() != "" {
		return n.GetName()
	}
	return fmt.Sprintf("#%d (%s)", i, n.GetOpType())
}

// freeNames lists the names a subgraph uses that it does not define itself
// (they come from enclosing scopes), including those of nested subgraphs.
func (imp *importer) freeNames(g *pb.GraphProto) []string {
	if imp.freeUses == nil {
		imp.freeUses = map[*pb.GraphProto][]string{}
	}
	if f, ok := imp.freeUses[g]; ok {
		return f
	}
	imp.freeUses[g] = nil // guards against (impossible) self-reference
	defined := map[string]bool{}
	for _, vi := range g.GetInput() {
		defined[vi.GetName()] = true
	}
	for _, t := range g.GetInitializer() {
		defined[t.GetName()] = true
	}
	for _, n := range g.GetNode() {
		for _, o := range n.GetOutput() {
			defined[o] = true
		}
	}
	var free []string
	seen := map[string]bool{}
	use := func(name string) {
		if name != "" && !defined[name] && !seen[name] {
			seen[name] = true
			free = append(free, name)
		}
	}
	for _, n := range g.GetNode() {
		for _, in := range n.GetInput() {
			use(in)
		}
		for _, sub := range subgraphs(n) {
			for _, name := range imp.freeNames(sub) {
				use(name)
			}
		}
	}
	for _, o := range g.GetOutput() {
		use(o.GetName())
	}
	imp.freeUses[g] = free
	return free
}

// subgraphs returns the graph-valued attributes of a node.
func subgraphs(n *pb.NodeProto) []*pb.GraphProto {
	var out []*pb.GraphProto
	for _, a := range n.GetAttribute() {
		if a.G != nil {
			out = append(out, a.G)
		}
		out = append(out, a.GetGraphs()...)
	}
	return out
}

// intHeap is a min-heap of node indices, so that the topological order
// keeps the file order wherever the dependencies allow.
type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// topoSort orders a graph's nodes so that every node follows the producers
// of its inputs (and of the outer names its subgraphs use). It reports
// duplicate outputs, inputs nobody produces and cycles.
func (imp *importer) topoSort(g *pb.GraphProto, sc *scope) ([]int, error) {
	nodes := g.GetNode()
	producer := map[string]int{}
	for i, n := range nodes {
		for _, o := range n.GetOutput() {
			if o == "" {
				continue
			}
			if j, dup := producer[o]; dup {
				if j == i {
					return nil, fmt.Errorf("node %s lists output %q twice", nodeLabel(i, n), o)
				}
				return nil, fmt.Errorf("value %q is produced by two nodes: %s and %s", o, nodeLabel(j, nodes[j]), nodeLabel(i, n))
			}
			if _, local := sc.vals[o]; local {
				return nil, fmt.Errorf("node %s output %q has the same name as a graph input or initializer", nodeLabel(i, n), o)
			}
			producer[o] = i
		}
	}
	deps := make([][]int, len(nodes))  // deps[i]: producers node i waits for
	users := make([][]int, len(nodes)) // users[j]: nodes waiting for j
	indeg := make([]int, len(nodes))
	for i, n := range nodes {
		need := func(name, how string) error {
			if name == "" {
				return nil
			}
			if j, ok := producer[name]; ok {
				deps[i] = append(deps[i], j)
				users[j] = append(users[j], i)
				indeg[i]++
				return nil
			}
			if sc.has(name) {
				return nil
			}
			return fmt.Errorf("node %s %s %q is not produced by any node, initializer or graph input", nodeLabel(i, n), how, name)
		}
		for _, in := range n.GetInput() {
			if err := need(in, "input"); err != nil {
				return nil, err
			}
		}
		for _, sub := range subgraphs(n) {
			for _, name := range imp.freeNames(sub) {
				if err := need(name, "subgraph "+fmt.Sprintf("%q", sub.GetName())+" uses"); err != nil {
					return nil, err
				}
			}
		}
	}
	h := &intHeap{}
	for i := range nodes {
		if indeg[i] == 0 {
			*h = append(*h, i)
		}
	}
	heap.Init(h)
	order := make([]int, 0, len(nodes))
	for h.Len() > 0 {
		i := heap.Pop(h).(int)
		order = append(order, i)
		for _, u := range users[i] {
			indeg[u]--
			if indeg[u] == 0 {
				heap.Push(h, u)
			}
		}
	}
	if len(order) == len(nodes) {
		return order, nil
	}
	// Every node left waits on another node left: walk dependencies until a
	// node repeats, which closes a cycle.
	start := -1
	for i := range nodes {
		if indeg[i] > 0 {
			start = i
			break
		}
	}
	pos := map[int]int{}
	var path []int
	for cur := start; ; {
		if p, seen := pos[cur]; seen {
			path = path[p:]
			break
		}
		pos[cur] = len(path)
		path = append(path, cur)
		next := -1
		for _, d := range deps[cur] {
			if indeg[d] > 0 {
				next = d
				break
			}
		}
		if next < 0 { // cannot happen; report what is left
			break
		}
		cur = next
	}
	names := make([]string, len(path))
	for k, i := range path {
		// path follows dependencies backwards; print in dataflow order.
		names[len(path)-1-k] = nodeLabel(i, nodes[i])
	}
	return nil, fmt.Errorf("model has a cycle through nodes %s", strings.Join(names, ", "))
}

// wrapNodeErr makes sure an error names the node, keeping it unwrappable.
func wrapNodeErr(n *Node, err error) error {
	if strings.Contains(err.Error(), fmt.Sprintf("node %q", n.Name)) {
		return err
	}
	dom := n.Domain
	if dom == "" {
		dom = "ai.onnx"
	}
	return fmt.Errorf("node %q (%s, domain %s, opset %d): %w", n.Name, n.OpType, dom, n.Opset, err)
}

// sequenceOps are operators whose inputs or outputs are sequences or
// optionals; kiln reports them as unsupported value types.
var sequenceOps = map[string]string{
	"SequenceConstruct": "sequences", "SequenceEmpty": "sequences", "SequenceAt": "sequences",
	"SequenceInsert": "sequences", "SequenceErase": "sequences", "SequenceLength": "sequences",
	"SequenceMap": "sequences", "ConcatFromSequence": "sequences", "SplitToSequence": "sequences",
	"Optional": "optionals", "OptionalHasElement": "optionals", "OptionalGetElement": "optionals",
}

// convertNode translates one node and binds its outputs in sc.
func (imp *importer) convertNode(sc *scope, np *pb.NodeProto) (err error) {
	n := &Node{
		Name:       np.GetName(),
		OpType:     np.GetOpType(),
		Domain:     normDomain(np.GetDomain()),
		InputNames: np.GetInput(),
		NumOutputs: len(np.GetOutput()),
	}
	if n.Domain == trainingDomain {
		return fmt.Errorf("%w: node %q (%s) uses training operators (domain %s)", ErrUnsupportedType, n.Name, n.OpType, trainingDomain)
	}
	opset, ok := imp.opsets[n.Domain]
	if !ok {
		dom := n.Domain
		if dom == "" {
			dom = "ai.onnx"
		}
		return n.Errorf("the model does not import an opset for domain %s", dom)
	}
	n.Opset = opset
	n.Inputs = make([]graph.Expr, len(np.GetInput()))
	for i, name := range np.GetInput() {
		if name == "" {
			continue
		}
		e, reason, ok := sc.lookup(name)
		switch {
		case !ok:
			return n.Errorf("input %q is not produced by any node, initializer or graph input", name)
		case e == nil:
			return n.Errorf("input %q has no value: %s", name, reason)
		}
		n.Inputs[i] = e
	}
	n.Attrs = map[string]*Attr{}
	for _, a := range np.GetAttribute() {
		at, err := imp.decodeAttr(a)
		if err != nil {
			return wrapNodeErr(n, fmt.Errorf("attribute %q: %w", a.GetName(), err))
		}
		n.Attrs[a.GetName()] = at
	}
	conv, err := lookupConverter(n.Domain, n.OpType, n.Opset)
	if err != nil {
		if what, ok := sequenceOps[n.OpType]; ok && n.Domain == "" {
			return wrapNodeErr(n, fmt.Errorf("%w: the model uses %s", ErrUnsupportedType, what))
		}
		if imp.functions[convKey(n.Domain, n.OpType)] {
			return n.Errorf("the operator is a model-local function, which kiln does not inline yet")
		}
		return n.Errorf("%v", err)
	}
	c := &Ctx{node: n, freeze: imp.freeze, imp: imp, scope: sc}
	outs, err := callConverter(conv, c, n)
	if err != nil {
		return wrapNodeErr(n, err)
	}
	for i, name := range np.GetOutput() {
		if name == "" {
			continue
		}
		if i >= len(outs) || outs[i] == nil {
			sc.missing[name] = fmt.Sprintf("it is output %d of node %q (%s), which kiln's converter does not compute", i, n.Name, n.OpType)
			continue
		}
		e := outs[i]
		if e.Type() == nil {
			if _, err := graph.InferExpr(nil, e); err != nil {
				return n.Errorf("output %d: %v", i, err)
			}
		}
		sc.vals[name] = e
	}
	return nil
}

// callConverter runs a converter, turning a panic into an error that names
// the node (a converter bug, but the user gets a message, not a crash).
func callConverter(conv Converter, c *Ctx, n *Node) (outs []graph.Expr, err error) {
	defer func() {
		if r := recover(); r != nil {
			outs = nil
			if ae, ok := r.(*tensor.AllocError); ok {
				err = n.Errorf("%v", ae.Err)
				return
			}
			err = n.Errorf("internal error importing model: converter panicked: %v (at %s)", r, panicSite())
		}
	}()
	outs, err = conv(c, n)
	if err != nil {
		return nil, err
	}
	if err := n.AttrErr(); err != nil {
		return nil, n.Errorf("%v", err)
	}
	if unread := n.Unread(); len(unread) > 0 {
		return nil, n.Errorf("attribute %s is not one kiln's %s converter (opset %d) reads: unknown to ONNX or unsupported by kiln", strings.Join(quoteAll(unread), ", "), n.OpType, n.Opset)
	}
	return outs, nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// decodeAttr turns an AttributeProto into an Attr. Tensor attributes are
// decoded; graph attributes stay *pb.GraphProto in Attr.Graph. Kinds no
// converter reads (tensor lists, sparse tensors, type protos) are kept as
// AttrUndefined so that converters can still see that they are present.
func (imp *importer) decodeAttr(a *pb.AttributeProto) (*Attr, error) {
	if a.GetRefAttrName() != "" {
		return nil, fmt.Errorf("refers to function attribute %q, which is only valid inside a function", a.GetRefAttrName())
	}
	typ := a.GetType()
	if typ == pb.AttributeProto_UNDEFINED {
		typ = guessAttrType(a)
	}
	switch typ {
	case pb.AttributeProto_FLOAT:
		return &Attr{Type: AttrFloat, Float: float64(a.GetF())}, nil
	case pb.AttributeProto_INT:
		return &Attr{Type: AttrInt, Int: a.GetI()}, nil
	case pb.AttributeProto_STRING:
		return &Attr{Type: AttrString, Str: string(a.GetS())}, nil
	case pb.AttributeProto_TENSOR:
		imp.noteExternal(a.GetT())
		t, err := tensorFromProto(a.GetT(), imp.baseDir)
		if err != nil {
			return nil, err
		}
		return &Attr{Type: AttrTensor, Tensor: t}, nil
	case pb.AttributeProto_GRAPH:
		if a.G == nil {
			return nil, errors.New("graph attribute has no graph")
		}
		return &Attr{Type: AttrGraph, Graph: a.G}, nil
	case pb.AttributeProto_FLOATS:
		fs := make([]float64, len(a.GetFloats()))
		for i, f := range a.GetFloats() {
			fs[i] = float64(f)
		}
		return &Attr{Type: AttrFloats, Floats: fs}, nil
	case pb.AttributeProto_INTS:
		return &Attr{Type: AttrInts, Ints: append([]int64{}, a.GetInts()...)}, nil
	case pb.AttributeProto_STRINGS:
		ss := make([]string, len(a.GetStrings()))
		for i, s := range a.GetStrings() {
			ss[i] = string(s)
		}
		return &Attr{Type: AttrStrings, Strings: ss}, nil
	}
	return &Attr{Type: AttrUndefined}, nil
}

// guessAttrType infers the kind of an attribute written before IR version 2,
// when the type field did not exist.
func guessAttrType(a *pb.AttributeProto) pb.AttributeProto_AttributeType {
	switch {
	case a.F != nil:
		return pb.AttributeProto_FLOAT
	case a.I != nil:
		return pb.AttributeProto_INT
	case a.S != nil:
		return pb.AttributeProto_STRING
	case a.T != nil:
		return pb.AttributeProto_TENSOR
	case a.G != nil:
		return pb.AttributeProto_GRAPH
	case len(a.Floats) > 0:
		return pb.AttributeProto_FLOATS
	case len(a.Ints) > 0:
		return pb.AttributeProto_INTS
	case len(a.Strings) > 0:
		return pb.AttributeProto_STRINGS
	}
	return pb.AttributeProto_UNDEFINED
}

// Subgraph imports a graph attribute of the current node (an If branch, a
// Loop or Scan body) with args bound to its declared inputs. The body sees
// every value of the enclosing graphs by name. It returns one expression
// per graph output.
func (c *Ctx) Subgraph(g *pb.GraphProto, args []graph.Expr) ([]graph.Expr, error) {
	if c.imp == nil || c.scope == nil {
		return nil, c.node.Errorf("subgraphs can only be imported while loading a model")
	}
	if args == nil {
		args = []graph.Expr{}
	}
	outs, err := c.imp.importGraph(g, c.scope, args)
	if err != nil {
		return nil, wrapNodeErr(c.node, fmt.Errorf("in subgraph %q: %w", g.GetName(), err))
	}
	return outs, nil
}

// evalFrozen computes a run-time expression at compile time when every
// graph input it depends on has an Options.Freeze value (for example a
// Loop trip count derived from frozen inputs). The inputs used are
// recorded as frozen.
func (imp *importer) evalFrozen(e graph.Expr) (*tensor.Tensor, bool) {
	if len(imp.opts.Freeze) == 0 {
		return nil, false
	}
	vars := graph.FreeVars(e)
	if len(vars) == 0 {
		return nil, false
	}
	vals := make([]*tensor.Tensor, len(vars))
	for i, v := range vars {
		t, ok := imp.opts.Freeze[v.Name]
		if !imp.mainInputs[v] || !ok || t == nil {
			return nil, false
		}
		vals[i] = t
	}
	res, err := ref.RunFunction(nil, graph.NewFunction(vars, e, nil), vals)
	if err != nil || res.Tensor == nil {
		return nil, false
	}
	for _, v := range vars {
		imp.freeze(v)
	}
	return res.Tensor, true
}

// noteExternal records the file holding p's data when it is external
// (Model.ExternalFiles).
func (imp *importer) noteExternal(p *pb.TensorProto) {
	if p.GetDataLocation() != pb.TensorProto_EXTERNAL || imp.external == nil {
		return
	}
	for _, kv := range p.GetExternalData() {
		if kv.GetKey() == "location" {
			imp.external[kv.GetValue()] = true
		}
	}
}
