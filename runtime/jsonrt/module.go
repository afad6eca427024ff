package jsonrt

import (
	"fmt"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/tensor"
)

// Layout is a backend's private description of how an intermediate value
// is laid out in memory (oneDNN's blocked formats, for example). nil
// means dense row-major of the entry's dtype and shape, the only layout
// allowed for the graph's inputs, constants and outputs. The base never
// looks inside a Layout; it only passes a producer's choice to the
// consumers.
type Layout any

// KernelSet is a backend's kernels: the typed plug-in point of the JSON
// runtime. A loader makes one KernelSet per module, so it may hold
// per-module state (an engine and a stream).
type KernelSet interface {
	// Check validates kernel node id when a graph is loaded or built: a
	// known operator, its attributes, its number of inputs and its types.
	// Errors should name the operator.
	Check(g *Graph, id int) error
	// Prepare builds kernel node id once the constants are bound (once
	// per module). Nodes are prepared in order, so the layouts of a
	// node's inputs are known.
	Prepare(ctx *PrepareContext) (Kernel, error)
}

// Kernel runs one kernel node.
type Kernel interface {
	// Run computes the node's outputs: args are the inputs then the
	// outputs. Each array's memory holds the value in the layout agreed
	// at Prepare (the array's dtype and shape are the plain ones; a
	// non-nil layout may use more bytes).
	Run(args []*runtime.NDArray) error
}

// Releaser is implemented by a Kernel that holds memory or handles
// outside Go (a oneDNN primitive): Release frees them. The module calls
// it when it replaces its kernels (a new thread count, new constants) and
// when it is closed; the kernel is not run again.
type Releaser interface {
	Release()
}

// SetCloser is implemented by a KernelSet that holds resources of its
// own (a oneDNN stream): Module.Close calls it after releasing the
// kernels.
type SetCloser interface {
	Close()
}

// releaseKernels releases the kernels that hold resources (Releaser).
func releaseKernels(ks []Kernel) {
	for _, k := range ks {
		if r, ok := k.(Releaser); ok {
			r.Release()
		}
	}
}

// ThreadSetter is implemented by a KernelSet whose kernels use a thread
// pool; Module.SetNumThreads forwards to it. It reports whether the
// count changed, in which case the module builds its kernels again before
// the next run (kernels such as oneDNN's fix their work split for the
// thread count they are built with).
type ThreadSetter interface {
	SetNumThreads(n int) (changed bool)
}

// SetInstancer is implemented by a KernelSet that can make the set of
// another instance of its module (Module.NewInstance): one whose kernels
// run at the same time as this set's, sharing with it what they only
// read (weights reordered once). A KernelSet without it keeps its module
// a single instance whose calls are serialised.
type SetInstancer interface {
	NewInstance() (KernelSet, error)
}

// PrepareContext is what KernelSet.Prepare receives for one node.
type PrepareContext struct {
	// Graph is the module's graph and ID the node being prepared.
	Graph *Graph
	ID    int
	// Node is Graph.Nodes[ID].
	Node *Node

	consts     []*runtime.NDArray
	inLayouts  []Layout
	plainOut   []bool
	outLayouts []Layout
	outBytes   []int64
}

// Attrs returns the node's attributes.
func (c *PrepareContext) Attrs() ir.Attrs { return c.Node.AttrMap() }

// InputType returns input i's dtype and shape.
func (c *PrepareContext) InputType(i int) (ir.DType, ir.Shape) {
	return c.Graph.Type(c.Node.Inputs[i])
}

// OutputType returns output j's dtype and shape.
func (c *PrepareContext) OutputType(j int) (ir.DType, ir.Shape) {
	return c.Graph.Type(Entry{Node: c.ID, Index: j})
}

// Const returns input i's value when it is a constant (in plain layout,
// already bound), else nil. A kernel may preprocess it (reorder weights)
// and keep the result; Run still receives the array.
func (c *PrepareContext) Const(i int) *runtime.NDArray { return c.consts[i] }

// InputLayout returns the layout input i is produced in (nil: plain).
func (c *PrepareContext) InputLayout(i int) Layout { return c.inLayouts[i] }

// MustBePlain reports whether output j must be written in plain layout
// (it is an output of the graph).
func (c *PrepareContext) MustBePlain(j int) bool { return c.plainOut[j] }

// SetOutputLayout declares that output j is written in layout l, using
// nbytes bytes (at least the plain size is always allocated). Setting a
// non-nil layout on an output that MustBePlain is an error at the end of
// Prepare.
func (c *PrepareContext) SetOutputLayout(j int, l Layout, nbytes int64) {
	c.outLayouts[j], c.outBytes[j] = l, nbytes
}

// Module is a JSON runtime module: a validated Graph, the backend's
// KernelSet and, once prepared, the kernels, constants and intermediate
// buffers. It exports one packed function, the graph's symbol. Calls
// are serialised by a mutex (the intermediates are shared).
type Module struct {
	runtime.ModuleBase
	kind  string
	graph *Graph
	set   KernelSet

	mu       sync.Mutex
	consts   map[int]*runtime.NDArray // by const node id
	prepared bool
	closed   bool
	kernels  []Kernel           // by node id (nil for input/const)
	entryOf  [][]int            // node id, output index → flat entry
	bufs     []*runtime.NDArray // by entry: preallocated intermediates
	vals     []*runtime.NDArray // scratch for a call
	// profiling records every kernel run in events (InnerProfiler).
	profiling bool
	events    []runtime.InnerEvent
}

// SetProfiling turns recording of kernel runs on (dropping earlier
// records) or off: the module is a runtime.InnerProfiler.
func (m *Module) SetProfiling(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.profiling, m.events = on, nil
}

// InnerEvents returns the kernel runs of function fn (the graph's
// symbol) since recording was turned on.
func (m *Module) InnerEvents(fn string) []runtime.InnerEvent {
	if fn != m.graph.Symbol {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]runtime.InnerEvent(nil), m.events...)
}

// New makes a module of the given kind (runtime.Module Kind, the key of
// its runtime.Loader) over g, checking every kernel node with set.
func New(kind string, g *Graph, set KernelSet) (*Module, error) {
	if kind == "" || set == nil {
		return nil, fmt.Errorf("jsonrt: a module needs a kind and a kernel set")
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	for i := range g.Nodes {
		if g.Nodes[i].Op != OpKernel {
			continue
		}
		if err := set.Check(g, i); err != nil {
			return nil, fmt.Errorf("jsonrt: %s: node %d (%s): %w", g.Symbol, i, g.Nodes[i].Name, err)
		}
	}
	m := &Module{kind: kind, graph: g, set: set}
	n := 0
	m.entryOf = make([][]int, len(g.Nodes))
	for i := range g.Nodes {
		m.entryOf[i] = make([]int, len(g.Nodes[i].Shape))
		for k := range m.entryOf[i] {
			m.entryOf[i][k] = n
			n++
		}
	}
	return m, nil
}

// Load parses data (SaveBinary's output) into a module of the given kind.
func Load(kind string, data []byte, set KernelSet) (*Module, error) {
	g, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return New(kind, g, set)
}

// NewLoader returns the runtime.Loader of a backend's JSON modules:
// newSet makes the KernelSet of each loaded module.
func NewLoader(kind string, newSet func() (KernelSet, error)) runtime.Loader {
	return runtime.Loader{Kind: kind, Load: func(data []byte) (runtime.Module, error) {
		set, err := newSet()
		if err != nil {
			return nil, err
		}
		return Load(kind, data, set)
	}}
}

// Graph returns the module's graph.
func (m *Module) Graph() *Graph { return m.graph }

// KernelSet returns the module's kernel set.
func (m *Module) KernelSet() KernelSet { return m.set }

// Name returns the symbol.
func (m *Module) Name() string { return m.graph.Symbol }

// Kind returns the module kind.
func (m *Module) Kind() string { return m.kind }

// SaveBinary returns the graph's JSON (constants are not included; the
// build stores them from the backend's ConstantUpdater).
func (m *Module) SaveBinary() ([]byte, error) { return m.graph.Marshal() }

// GetFunction looks the symbol up, then the imports.
func (m *Module) GetFunction(name string) (runtime.PackedFunc, bool) {
	return runtime.FindFunction(m, name)
}

// SetNumThreads forwards the thread count to the kernel set when it has
// a thread pool (ThreadSetter) and reports whether it did. n <= 0 means
// the pool's default.
func (m *Module) SetNumThreads(n int) bool {
	ts, ok := m.set.(ThreadSetter)
	if !ok {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if ts.SetNumThreads(n) {
		m.prepared = false
	}
	return true
}

// NewInstance returns a module over the same graph and constants with
// kernels and intermediates of its own, when the kernel set can make
// another instance of itself (SetInstancer): the graph executor's forks
// call the two at the same time. Otherwise it returns m itself, whose
// calls stay serialised.
func (m *Module) NewInstance() (runtime.Module, error) {
	si, ok := m.set.(SetInstancer)
	if !ok {
		return m, nil
	}
	set, err := si.NewInstance()
	if err != nil {
		return nil, fmt.Errorf("jsonrt: %s: %w", m.graph.Symbol, err)
	}
	m.mu.Lock()
	consts := m.consts
	m.mu.Unlock()
	// The constants are shared: no kernel writes them, and SetConstants
	// replaces the map instead of changing it.
	return &Module{kind: m.kind, graph: m.graph, set: set, consts: consts, entryOf: m.entryOf}, nil
}

// Close releases the module's kernels and its kernel set's resources;
// later calls of its function fail. The graph executor closes the module
// instances it made for a fork (NewInstance) with the fork; a module
// loaded from an artifact lives as long as the process.
func (m *Module) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	releaseKernels(m.kernels)
	m.kernels, m.bufs, m.vals, m.prepared = nil, nil, nil, false
	if c, ok := m.set.(SetCloser); ok {
		c.Close()
	}
}

// SetConstants binds every const node by name. A missing constant, or
// one whose dtype or shape differs from the node's, is an error naming
// it. Constants are copied into the module; the kernels are built (again,
// when constants are set a second time) at the next call, on the thread
// count the module has then: a module that is never called (the one a
// graph executor's forks make instances of) builds nothing.
func (m *Module) SetConstants(consts map[string]*tensor.Tensor) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	bound := map[int]*runtime.NDArray{}
	for _, id := range m.graph.Consts() {
		n := &m.graph.Nodes[id]
		v, ok := consts[n.Name]
		if !ok {
			return fmt.Errorf("jsonrt: %s: constant %q is missing", m.graph.Symbol, n.Name)
		}
		dt, shape := m.graph.Type(Entry{Node: id})
		if v.DType != dt || !v.Shape.Equal(shape) {
			return fmt.Errorf("jsonrt: %s: constant %q is %s%v, want %s%v", m.graph.Symbol, n.Name, v.DType, v.Shape, dt, shape)
		}
		a, err := runtime.FromTensor(v, runtime.CPUDevice(0))
		if err != nil {
			return fmt.Errorf("jsonrt: %s: constant %q: %w", m.graph.Symbol, n.Name, err)
		}
		bound[id] = a
	}
	m.consts = bound
	m.prepared = false
	return nil
}

// prepare builds the kernels and allocates the intermediates (m.mu held).
func (m *Module) prepare() (err error) {
	g := m.graph
	if len(g.Consts()) > 0 && m.consts == nil {
		return fmt.Errorf("jsonrt: %s: constants were not set", g.Symbol)
	}
	isHead := map[Entry]bool{}
	for _, h := range g.Heads {
		isHead[Entry{Node: h.Node, Index: h.Index}] = true
	}
	nEntries := 0
	for _, e := range m.entryOf {
		nEntries += len(e)
	}
	layouts := make([]Layout, nEntries)
	kernels := make([]Kernel, len(g.Nodes))
	defer func() {
		if err != nil {
			releaseKernels(kernels) // the ones built before the error
		}
	}()
	bufs := make([]*runtime.NDArray, nEntries)
	// Intermediates share memory: an entry's buffer returns to the pool
	// after its last consumer, and later outputs take the smallest free
	// buffer that fits (never one of their own node's inputs), so the
	// working set stays in cache instead of growing with the graph.
	lastUse := make([]int, nEntries)
	for i := range lastUse {
		lastUse[i] = -1
	}
	for id := range g.Nodes {
		for _, e := range g.Nodes[id].Inputs {
			lastUse[m.entryOf[e.Node][e.Index]] = id
		}
	}
	var pool bufferPool
	raws := make([]*runtime.NDArray, nEntries)
	for id := range g.Nodes {
		n := &g.Nodes[id]
		if n.Op == OpConst {
			bufs[m.entryOf[id][0]] = m.consts[id]
		}
		if n.Op != OpKernel {
			continue
		}
		ctx := &PrepareContext{Graph: g, ID: id, Node: n,
			consts:     make([]*runtime.NDArray, len(n.Inputs)),
			inLayouts:  make([]Layout, len(n.Inputs)),
			plainOut:   make([]bool, len(n.Shape)),
			outLayouts: make([]Layout, len(n.Shape)),
			outBytes:   make([]int64, len(n.Shape)),
		}
		for i, e := range n.Inputs {
			if g.Nodes[e.Node].Op == OpConst {
				ctx.consts[i] = m.consts[e.Node]
			}
			ctx.inLayouts[i] = layouts[m.entryOf[e.Node][e.Index]]
		}
		for j := range n.Shape {
			ctx.plainOut[j] = isHead[Entry{Node: id, Index: j}]
		}
		k, err := m.set.Prepare(ctx)
		if err != nil {
			return fmt.Errorf("jsonrt: %s: node %d (%s): %w", g.Symbol, id, n.Name, err)
		}
		kernels[id] = k
		for j := range n.Shape {
			if ctx.plainOut[j] && ctx.outLayouts[j] != nil {
				return fmt.Errorf("jsonrt: %s: node %d (%s): output %d is a graph output but the kernel chose a non-plain layout", g.Symbol, id, n.Name, j)
			}
			ent := m.entryOf[id][j]
			layouts[ent] = ctx.outLayouts[j]
			if ctx.plainOut[j] {
				// A graph output is written straight into the caller's
				// array (see call).
				continue
			}
			dt, shape := g.Type(Entry{Node: id, Index: j})
			plain := shape.NumElements() * int64(dt.Size())
			raw, err := pool.take(max(plain, ctx.outBytes[j], 1))
			if err != nil {
				return fmt.Errorf("jsonrt: %s: node %d (%s): %w", g.Symbol, id, n.Name, err)
			}
			raws[ent] = raw
			if bufs[ent], err = raw.View(dt, shape, 0); err != nil {
				return err
			}
		}
		// Only now, with this node's outputs placed, do its inputs (and
		// its unused outputs) give their memory back.
		for _, e := range n.Inputs {
			if ent := m.entryOf[e.Node][e.Index]; lastUse[ent] == id && raws[ent] != nil {
				pool.put(raws[ent])
				raws[ent] = nil
			}
		}
		for _, ent := range m.entryOf[id] {
			if lastUse[ent] == -1 && raws[ent] != nil {
				pool.put(raws[ent])
				raws[ent] = nil
			}
		}
	}
	releaseKernels(m.kernels)
	m.kernels, m.bufs = kernels, bufs
	m.vals = make([]*runtime.NDArray, nEntries)
	m.prepared = true
	return nil
}

// GetLocalFunction returns the packed function of the graph's symbol:
// inputs (one per input node, in order) then outputs (one per head).
func (m *Module) GetLocalFunction(name string) (runtime.PackedFunc, bool) {
	if name != m.graph.Symbol {
		return nil, false
	}
	return m.call, true
}

func (m *Module) call(args []*runtime.NDArray) error {
	g := m.graph
	ins := g.Inputs()
	if len(args) != len(ins)+len(g.Heads) {
		return fmt.Errorf("%s: got %d arguments, want %d inputs and %d outputs", g.Symbol, len(args), len(ins), len(g.Heads))
	}
	check := func(k int, e Entry, what string) error {
		a := args[k]
		if a == nil {
			return fmt.Errorf("%s: %s is nil", g.Symbol, what)
		}
		dt, shape := g.Type(e)
		if a.DType() != dt || !a.Shape().Equal(shape) {
			return fmt.Errorf("%s: %s is %s%v, want %s%v", g.Symbol, what, a.DType(), a.Shape(), dt, shape)
		}
		if a.Device().Type != runtime.CPU {
			return fmt.Errorf("%s: %s is on %s, want a CPU device", g.Symbol, what, a.Device())
		}
		return nil
	}
	for k, id := range ins {
		if err := check(k, Entry{Node: id}, fmt.Sprintf("input %d (%s)", k, g.Nodes[id].Name)); err != nil {
			return err
		}
	}
	for k, h := range g.Heads {
		if err := check(len(ins)+k, h, fmt.Sprintf("output %d", k)); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("%s: the module is closed", g.Symbol)
	}
	if !m.prepared {
		if err := m.prepare(); err != nil {
			return err
		}
	}
	vals := m.vals
	copy(vals, m.bufs)
	for k, id := range ins {
		vals[m.entryOf[id][0]] = args[k]
	}
	// A head computed by a kernel is written straight into the output
	// array (its first occurrence); the others are copied afterwards.
	direct := make([]bool, len(g.Heads))
	written := map[int]bool{}
	for k, h := range g.Heads {
		ent := m.entryOf[h.Node][h.Index]
		if g.Nodes[h.Node].Op == OpKernel && !written[ent] {
			vals[ent] = args[len(ins)+k]
			written[ent], direct[k] = true, true
		}
	}
	run := func() error {
		var kargs []*runtime.NDArray
		for id := range g.Nodes {
			k := m.kernels[id]
			if k == nil {
				continue
			}
			n := &g.Nodes[id]
			kargs = kargs[:0]
			for _, e := range n.Inputs {
				kargs = append(kargs, vals[m.entryOf[e.Node][e.Index]])
			}
			for _, ent := range m.entryOf[id] {
				kargs = append(kargs, vals[ent])
			}
			var t0 time.Time
			if m.profiling {
				t0 = time.Now()
			}
			if err := k.Run(kargs); err != nil {
				return fmt.Errorf("%s: node %d (%s): %w", g.Symbol, id, n.Name, err)
			}
			if m.profiling {
				m.events = append(m.events, runtime.InnerEvent{Name: n.Name, Index: id, Sources: n.Sources, Start: t0, Dur: time.Since(t0)})
			}
		}
		return nil
	}
	if err := run(); err != nil {
		return err
	}
	for k, h := range g.Heads {
		if !direct[k] {
			if err := args[len(ins)+k].CopyFromArray(vals[m.entryOf[h.Node][h.Index]]); err != nil {
				return fmt.Errorf("%s: output %d: %w", g.Symbol, k, err)
			}
		}
	}
	return nil
}

// bufferPool hands out byte buffers for intermediates, reusing those
// returned to it.
type bufferPool struct {
	free []*runtime.NDArray
}

// take returns the smallest free buffer of at least n bytes, or a new
// one.
func (p *bufferPool) take(n int64) (*runtime.NDArray, error) {
	best := -1
	for i, b := range p.free {
		if c := b.Shape()[0]; c >= n && (best < 0 || c < p.free[best].Shape()[0]) {
			best = i
		}
	}
	if best < 0 {
		return runtime.Empty(ir.Uint8, ir.Shape{n}, runtime.CPUDevice(0))
	}
	b := p.free[best]
	p.free = append(p.free[:best], p.free[best+1:]...)
	return b, nil
}

// put returns a buffer to the pool.
func (p *bufferPool) put(b *runtime.NDArray) { p.free = append(p.free, b) }
