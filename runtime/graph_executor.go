package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	goruntime "runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// TensorInfo describes a graph input or output.
type TensorInfo struct {
	// Name is the node's name.
	Name string
	// Index is the output index within the node (0 for inputs).
	Index  int
	DType  ir.DType
	Shape  ir.Shape
	Device Device
}

// step is one prepared node of the execution plan.
type step struct {
	node int
	// kiln_op: a native function with its prepared C argument block, or a
	// Go PackedFunc with its prepared argument list.
	native *nativeFunc
	block  unsafe.Pointer
	packed PackedFunc
	// owner is the module packed was found in (Fork asks it for an
	// instance of its own).
	owner Module
	args  []*NDArray
	// device_copy
	src, dst *NDArray
	// worker, when set, runs the kernel on its device's pinned thread
	// (SetDeviceCores).
	worker *coreWorker
}

// GraphExecutor runs a graph JSON over the functions of a Module.
//
// Run, SetInput, SetParams, GetOutput and Execute are serialised by a
// mutex: one executor runs one inference at a time and is safe to use from
// several goroutines (use Execute to set inputs, run and read outputs as one
// atomic step). To run inferences in parallel, Fork the executor once per
// concurrent caller: forks share the parameters and the compiled code and
// have memory (and external modules' state) of their own.
type GraphExecutor struct {
	mu      sync.Mutex
	g       *graph
	mod     Module
	storage []*NDArray // one owner per storage_id in use
	views   []*NDArray // one per entry
	steps   []step
	blocks  []unsafe.Pointer // C argument blocks, freed by Close
	// calls is the C array of every step's native call (packCalls; the
	// other steps' entries unused), for runs that make up to maxBatch
	// consecutive native steps in one cgo call (runSteps); nil when there
	// is none. It is in blocks.
	calls    unsafe.Pointer
	inputIdx map[string]int // input name -> position in g.argNodes
	set      []bool         // per input: has a value
	// frozen marks the inputs whose storage is shared with forks
	// (parameters): they no longer change.
	frozen []bool
	// owners maps each storage id to its buffer.
	owners map[int64]*NDArray
	// instances are the module instances made for this executor by Fork
	// (its own, so SetThreads may set their thread count).
	instances []Module
	// threads is the thread count of this executor's runs (SetThreads;
	// 0: each module's own setting), and threadsHere the libraries'
	// per-OS-thread setters that carry it to host kernels.
	threads     int32
	threadsHere []unsafe.Pointer
	closed      bool
	cleanup     goruntime.Cleanup
	workers     map[Device]*coreWorker // SetDeviceCores' pinned threads
	// workersCleanup ends the pinned threads of an executor dropped
	// without Close.
	workersCleanup goruntime.Cleanup
	// instancesCleanup closes the instances of a fork dropped without
	// Close.
	instancesCleanup goruntime.Cleanup
	// home is the OS thread the multi-threaded runs of this executor run
	// on (started at the first; homeCleanup ends it for an executor
	// dropped without Close). See run.
	home        *coreWorker
	homeCleanup goruntime.Cleanup
}

func freeBlocks(blocks []unsafe.Pointer) {
	for _, b := range blocks {
		cFree(b)
	}
}

// NewGraphExecutor validates the graph JSON, allocates storage (one buffer
// per storage_id, as large as its largest entry's end, on the entries' device),
// resolves every kiln_op's func_name in mod (and its imports) and prepares
// the argument arrays of every call. When devices are given, every entry
// must live on one of them, and a graph without device_index runs on
// devices[0]; otherwise on cpu:0.
func NewGraphExecutor(graphJSON []byte, mod Module, devices ...Device) (*GraphExecutor, error) {
	if mod == nil {
		return nil, errors.New("graph executor: nil module")
	}
	g, err := parseGraph(graphJSON, devices)
	if err != nil {
		return nil, err
	}
	e := &GraphExecutor{g: g, mod: mod, inputIdx: map[string]int{}}
	for k, nid := range g.argNodes {
		e.inputIdx[g.nodes[nid].name] = k
	}
	// Resolve functions first: a missing function is the likeliest error.
	fns := make([]resolved, len(g.nodes))
	var missing []string
	for i, n := range g.nodes {
		if n.op != opKiln {
			continue
		}
		f, nf, owner, ok := findFunction(mod, n.funcName, map[Module]bool{})
		if !ok {
			missing = append(missing, fmt.Sprintf("%q (%s)", n.funcName, g.nodeRef(i)))
			continue
		}
		fns[i] = resolved{f: f, nf: nf, owner: owner}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("graph executor: module %s (%s) has no function %s", mod.Name(), mod.Kind(), strings.Join(missing, ", "))
	}
	if err := e.build(fns, nil); err != nil {
		return nil, err
	}
	return e, nil
}

// resolved is the function a kiln_op node calls: a DSO's native function
// or another module's packed one, with the module it came from.
type resolved struct {
	f     PackedFunc
	nf    *nativeFunc
	owner Module
}

// build allocates the executor's storage (taking the buffers of the
// storage ids in shared from there instead) and prepares the argument
// arrays of every step.
func (e *GraphExecutor) build(fns []resolved, shared map[int64]*NDArray) error {
	g := e.g
	e.set = make([]bool, len(g.argNodes))
	e.frozen = make([]bool, len(g.argNodes))
	e.threadsHere = threadSetters(e.mod)
	if err := e.allocate(shared); err != nil {
		e.release()
		return err
	}
	for i, n := range g.nodes {
		switch n.op {
		case opKiln:
			if n.inPlace {
				continue // its inputs were written into its output
			}
			args := make([]*NDArray, 0, len(n.inputs)+n.nout)
			for _, en := range n.inputs {
				args = append(args, e.views[en])
			}
			for _, en := range g.outs(i) {
				args = append(args, e.views[en])
			}
			st := step{node: i, args: args, packed: fns[i].f, native: fns[i].nf, owner: fns[i].owner}
			if st.native != nil {
				var err error
				st.block, err = packArgs(args)
				if err != nil {
					e.release()
					return fmt.Errorf("graph executor: %s: %w", g.nodeRef(i), err)
				}
				e.blocks = append(e.blocks, st.block)
			}
			e.steps = append(e.steps, st)
		case opDeviceCopy:
			e.steps = append(e.steps, step{node: i, src: e.views[n.inputs[0]], dst: e.views[n.first]})
		}
	}
	items := make([]callItem, len(e.steps))
	native := false
	for i, st := range e.steps {
		if st.native != nil {
			items[i] = callItem{fn: st.native.fn, args: st.block, n: int32(len(st.args)), setErr: st.native.setErr, getErr: st.native.getErr}
			native = true
		}
	}
	if native {
		calls, err := packCalls(items)
		if err != nil {
			e.release()
			return fmt.Errorf("graph executor: %w", err)
		}
		e.calls = calls
		e.blocks = append(e.blocks, calls)
	}
	e.cleanup = goruntime.AddCleanup(e, freeBlocks, append([]unsafe.Pointer(nil), e.blocks...))
	return nil
}

// allocate creates the storage buffers and one view per entry; the
// storage ids in shared take the given buffers instead.
func (e *GraphExecutor) allocate(shared map[int64]*NDArray) error {
	type sto struct {
		dev    Device
		nbytes int64
	}
	sizes := map[int64]*sto{}
	var sids []int64
	for _, en := range e.g.entries {
		s := sizes[en.sid]
		if s == nil {
			s = &sto{dev: en.dev}
			sizes[en.sid] = s
			sids = append(sids, en.sid)
		}
		s.nbytes = max(s.nbytes, en.offset+en.nbytes)
	}
	e.owners = map[int64]*NDArray{}
	for _, sid := range sids {
		if a, ok := shared[sid]; ok {
			// Not in e.storage: release leaves a shared buffer to the
			// garbage collector, which frees it once no executor
			// refers to it.
			e.owners[sid] = a
			continue
		}
		s := sizes[sid]
		a, err := Empty(ir.Uint8, ir.Shape{s.nbytes}, s.dev)
		if err != nil {
			return fmt.Errorf("graph executor: storage_id %d (%d bytes on %s): %w", sid, s.nbytes, s.dev, err)
		}
		e.owners[sid] = a
		e.storage = append(e.storage, a)
	}
	e.views = make([]*NDArray, len(e.g.entries))
	for i, en := range e.g.entries {
		v, err := e.owners[en.sid].View(en.dtype, en.shape, en.offset)
		if err != nil {
			return fmt.Errorf("graph executor: %s: %w", e.g.entryRef(i), err)
		}
		e.views[i] = v
	}
	return nil
}

// release frees all memory (used by Close and on construction errors):
// the executor's own storage now, shared storage once no executor
// refers to it any more.
func (e *GraphExecutor) release() {
	e.cleanup.Stop()
	e.stopWorkers()
	e.stopHome()
	freeBlocks(e.blocks)
	e.blocks, e.calls = nil, nil
	for _, s := range e.storage {
		s.Free()
	}
	e.storage, e.views, e.owners = nil, nil, nil
	// The module instances Fork made are this executor's alone.
	e.instancesCleanup.Stop()
	closeModules(e.instances)
	e.instances = nil
	for i := range e.steps {
		e.steps[i].args, e.steps[i].src, e.steps[i].dst = nil, nil, nil
	}
}

// closeModules closes the modules that have a Close method.
func closeModules(ms []Module) {
	for _, m := range ms {
		if c, ok := m.(interface{ Close() }); ok {
			c.Close()
		}
	}
}

// Close frees the executor's memory now; later calls fail. Without Close
// the memory is released when the executor becomes unreachable.
func (e *GraphExecutor) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.closed = true
	e.release()
}

var errClosed = errors.New("graph executor is closed")

// Module returns the module the executor calls into.
func (e *GraphExecutor) Module() Module { return e.mod }

// NumInputs is the number of graph inputs (arg_nodes: inputs and parameters).
func (e *GraphExecutor) NumInputs() int { return len(e.g.argNodes) }

// NumOutputs is the number of graph outputs (heads).
func (e *GraphExecutor) NumOutputs() int { return len(e.g.heads) }

// InputInfo describes input i (in arg_nodes order); ok is false when out of range.
func (e *GraphExecutor) InputInfo(i int) (TensorInfo, bool) {
	if i < 0 || i >= len(e.g.argNodes) {
		return TensorInfo{}, false
	}
	return e.info(e.g.nodes[e.g.argNodes[i]].first), true
}

// OutputInfo describes output i; ok is false when out of range.
func (e *GraphExecutor) OutputInfo(i int) (TensorInfo, bool) {
	if i < 0 || i >= len(e.g.heads) {
		return TensorInfo{}, false
	}
	return e.info(e.g.heads[i]), true
}

func (e *GraphExecutor) info(entry int) TensorInfo {
	en := e.g.entries[entry]
	return TensorInfo{Name: e.g.nodes[en.node].name, Index: en.index, DType: en.dtype, Shape: en.shape.Clone(), Device: en.dev}
}

// SetInput copies t into the named input (or parameter).
func (e *GraphExecutor) SetInput(name string, t *tensor.Tensor) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.setInput(name, t)
}

func (e *GraphExecutor) setInput(name string, t *tensor.Tensor) error {
	if e.closed {
		return errClosed
	}
	k, err := e.checkInput(name, t)
	if err != nil {
		return err
	}
	if err := e.inputView(k).CopyFrom(t); err != nil {
		return fmt.Errorf("input %q: %w", name, err)
	}
	e.set[k] = true
	return nil
}

// checkInput finds an input and checks t's dtype and shape against it.
func (e *GraphExecutor) checkInput(name string, t *tensor.Tensor) (int, error) {
	k, err := e.findInput(name)
	if err != nil {
		return 0, err
	}
	if t == nil {
		return 0, fmt.Errorf("input %q: nil tensor", name)
	}
	return k, e.checkInputValue(k, name, t.DType, t.Shape, int64(len(t.Data)))
}

// findInput is the position of the input name.
func (e *GraphExecutor) findInput(name string) (int, error) {
	k, ok := e.inputIdx[name]
	if !ok {
		return 0, fmt.Errorf("graph has no input %q (inputs: %s)", name, e.inputNames())
	}
	return k, nil
}

// checkInputValue checks that input k (named name) may take a value of
// dtype dt and shape shape in nbytes bytes.
func (e *GraphExecutor) checkInputValue(k int, name string, dt ir.DType, shape ir.Shape, nbytes int64) error {
	if e.frozen[k] {
		return fmt.Errorf("input %q is a parameter shared with forked executors (Fork): it can no longer change", name)
	}
	v := e.inputView(k)
	if dt != v.dtype || !shape.Equal(v.shape) {
		return fmt.Errorf("input %q: expected %s%v, got %s%v", name, v.dtype, v.shape, dt, shape)
	}
	if nbytes != v.NumBytes() {
		return fmt.Errorf("input %q: tensor holds %d bytes, want %d", name, nbytes, v.NumBytes())
	}
	return nil
}

// inputView is the array of input k.
func (e *GraphExecutor) inputView(k int) *NDArray { return e.views[e.g.nodes[e.g.argNodes[k]].first] }

func (e *GraphExecutor) inputNames() string {
	names := make([]string, len(e.g.argNodes))
	for k, nid := range e.g.argNodes {
		names[k] = e.g.nodes[nid].name
	}
	return strings.Join(names, ", ")
}

// SetParams copies several named tensors (usually the weights) into their
// inputs. Every name must be a graph input; all are checked before any is
// copied.
func (e *GraphExecutor) SetParams(params map[string]*tensor.Tensor) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errClosed
	}
	names := make([]string, 0, len(params))
	for n := range params {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, err := e.checkInput(n, params[n]); err != nil {
			return fmt.Errorf("params: %w", err)
		}
	}
	for _, n := range names {
		if err := e.setInput(n, params[n]); err != nil {
			return fmt.Errorf("params: %w", err)
		}
	}
	return nil
}

// LoadParams reads a params file (see SaveParams) and sets its tensors.
// On an executor none of whose inputs is set yet (a new one, as
// LoadArtifact has), each tensor is read straight into its input's
// buffer: no second copy of the weights. The inputs count as set only
// once the whole file was read and checked, so an error leaves them all
// unset (Run refuses to run); otherwise, as with SetParams, an error
// changes nothing.
func (e *GraphExecutor) LoadParams(r io.Reader) error {
	if ok, err := e.streamParams(r); ok {
		return err
	}
	params, err := ReadParams(r)
	if err != nil {
		return err
	}
	return e.SetParams(params)
}

// streamParams reads the params file r straight into the input buffers
// when no input is set or frozen and every input lives in host memory,
// and returns the outcome; ok is false, nothing having been read, when it
// cannot.
func (e *GraphExecutor) streamParams(r io.Reader) (ok bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return true, errClosed
	}
	for k := range e.set {
		if e.set[k] || e.frozen[k] || e.inputView(k).dev.Type != CPU {
			return false, nil
		}
	}
	var done []int
	err = scanParams(r, func(name string, dt ir.DType, shape ir.Shape, nbytes int64, data io.Reader) error {
		k, err := e.findInput(name)
		if err == nil {
			err = e.checkInputValue(k, name, dt, shape, nbytes)
		}
		if err != nil {
			return fmt.Errorf("params: %w", err)
		}
		p, err := e.inputView(k).dataPtr()
		if err != nil {
			return err
		}
		if nbytes > 0 {
			if _, err := io.ReadFull(data, unsafe.Slice((*byte)(p), nbytes)); err != nil {
				return fmt.Errorf("read params: %q: data: %w", name, eofIsUnexpected(err))
			}
		}
		done = append(done, k)
		return nil
	})
	if err != nil {
		return true, err
	}
	for _, k := range done {
		e.set[k] = true
	}
	return true, nil
}

// Run executes the graph once. Every input must have been set.
func (e *GraphExecutor) Run() error { return e.RunContext(context.Background()) }

// RunContext is Run that stops before the next step, with ctx's error, once
// ctx is done (a kernel already running finishes first).
func (e *GraphExecutor) RunContext(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.run(ctx, nil, nil)
}

// StepTime is the time one step of the program (a kernel call or a device
// copy) took, summed over the runs of Profile.
type StepTime struct {
	// Node is the node's name, Func its compiled function ("" for a
	// device copy).
	Node, Func string
	// Sources are the model nodes (ONNX node names) the step computes,
	// when the program records them.
	Sources []string
	// Total is the time summed over the runs.
	Total time.Duration
	// Median is the median of the step's per-run times (Profile; 0 for
	// Inner steps, which their modules report only summed). On a noisy
	// machine a few slow runs move Total/runs; they do not move this.
	Median time.Duration
	// Inner are the steps inside the function, summed over the runs in
	// the order first run, when its module times them (an external
	// region's kernels; see InnerProfiler).
	Inner []StepTime
	// Device is the device the step ran on (a copy's destination), and
	// Cores the cores its thread was pinned to (SetDeviceCores; nil when
	// it ran unpinned on the calling thread).
	Device Device
	Cores  CoreSet
}

// TraceEvent is one step of one run of Trace: a kernel call or device
// copy (Depth 0), or a step inside one (Depth 1, an InnerProfiler's).
type TraceEvent struct {
	// Name is the node's name (Depth 0) or the inner step's; Func the
	// compiled function ("" for copies and inner steps).
	Name, Func string
	// Sources are the model nodes the step computes, when recorded.
	Sources []string
	// Run counts the runs from 0; Depth is 0 or 1.
	Run, Depth int
	// Start is the offset from the first run's start.
	Start, Dur time.Duration
	// Device and Cores are as in StepTime (set at Depth 0).
	Device Device
	Cores  CoreSet
}

// Profile runs the program runs times (inputs must be set) and returns
// the time of each step, in program order, summed over the runs. Timing
// each call adds a clock read per step, so the sum is a little above a
// plain Run's time. Functions of modules that are InnerProfilers report
// their own steps (Inner).
func (e *GraphExecutor) Profile(runs int) ([]StepTime, error) {
	times := make([]time.Duration, len(e.steps)) // one run's
	totals := make([]time.Duration, len(e.steps))
	perRun := make([][]time.Duration, len(e.steps))
	afterRun := func() {
		for i, d := range times {
			totals[i] += d
			perRun[i] = append(perRun[i], d)
			times[i] = 0
		}
	}
	out := make([]StepTime, len(e.steps))
	err := e.recorded(runs, times, nil, afterRun, func(profs []InnerProfiler) {
		for i := range e.steps {
			n := &e.g.nodes[e.steps[i].node]
			dev, cores := e.placeOf(i)
			out[i] = StepTime{Node: n.name, Func: n.funcName, Sources: n.sources, Total: totals[i], Median: medianDuration(perRun[i]), Device: dev, Cores: cores}
			if n.op == opKiln {
				out[i].Inner = sumInner(innerEvents(profs, n.funcName))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// recorded runs the program runs times, under the executor's lock on one
// OS thread, with the module tree's InnerProfilers recording, timing the
// steps into times and trace (either may be nil) and calling afterRun
// (when not nil) after each run; collect reads the profilers before
// recording stops.
func (e *GraphExecutor) recorded(runs int, times []time.Duration, trace *[]stepEvent, afterRun func(), collect func([]InnerProfiler)) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	profs := e.innerProfilers(true)
	defer setProfiling(profs, false)
	for r := 0; r < runs; r++ {
		if err := e.run(context.Background(), times, trace); err != nil {
			return err
		}
		if afterRun != nil {
			afterRun()
		}
	}
	collect(profs)
	return nil
}

// Trace runs the program runs times (inputs must be set) and returns
// every step of every run with its start and duration, the steps inside
// InnerProfilers' functions included, in the order they started.
func (e *GraphExecutor) Trace(runs int) ([]TraceEvent, error) {
	var raw []stepEvent
	var out []TraceEvent
	t0 := time.Now()
	err := e.recorded(runs, nil, &raw, nil, func(profs []InnerProfiler) {
		runOf := func(t time.Time) int {
			// The run a start time falls in: that of the last top-level
			// step that started at or before it.
			k := sort.Search(len(raw), func(i int) bool { return raw[i].start.After(t) })
			if k == 0 {
				return 0
			}
			return raw[k-1].run
		}
		for _, ev := range raw {
			n := &e.g.nodes[e.steps[ev.step].node]
			dev, cores := e.placeOf(ev.step)
			out = append(out, TraceEvent{Name: n.name, Func: n.funcName, Sources: n.sources, Run: ev.run, Start: ev.start.Sub(t0), Dur: ev.dur, Device: dev, Cores: cores})
		}
		seen := map[string]bool{}
		for _, st := range e.steps {
			n := &e.g.nodes[st.node]
			if n.op != opKiln || seen[n.funcName] {
				continue
			}
			seen[n.funcName] = true
			for _, in := range innerEvents(profs, n.funcName) {
				out = append(out, TraceEvent{Name: in.Name, Sources: in.Sources, Run: runOf(in.Start), Depth: 1, Start: in.Start.Sub(t0), Dur: in.Dur})
			}
		}
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Start != out[j].Start {
			return out[i].Start < out[j].Start
		}
		return out[i].Depth < out[j].Depth
	})
	return out, nil
}

// medianDuration is the median of ds (the mean of the middle two for an
// even count), 0 for none; ds is reordered.
func medianDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	m := len(ds) / 2
	if len(ds)%2 == 1 {
		return ds[m]
	}
	return (ds[m-1] + ds[m]) / 2
}

// stepEvent is one step's run, recorded by run for Trace.
type stepEvent struct {
	step, run int
	start     time.Time
	dur       time.Duration
}

// innerProfilers returns the modules of the executor's module tree that
// time their functions' inner steps, with recording set to on.
func (e *GraphExecutor) innerProfilers(on bool) []InnerProfiler {
	var out []InnerProfiler
	eachModule(e.mod, func(m Module) error {
		if p, ok := m.(InnerProfiler); ok {
			out = append(out, p)
		}
		return nil
	})
	setProfiling(out, on)
	return out
}

func setProfiling(profs []InnerProfiler, on bool) {
	for _, p := range profs {
		p.SetProfiling(on)
	}
}

// innerEvents gathers what the profilers recorded for function fn.
func innerEvents(profs []InnerProfiler, fn string) []InnerEvent {
	var out []InnerEvent
	for _, p := range profs {
		out = append(out, p.InnerEvents(fn)...)
	}
	return out
}

// sumInner sums inner events by step (name and sources), in the order
// each first ran.
func sumInner(evs []InnerEvent) []StepTime {
	var out []StepTime
	index := map[string]int{}
	for _, ev := range evs {
		k := ev.Name + "\x00" + strings.Join(ev.Sources, "\x00") + "\x00" + strconv.Itoa(ev.Index)
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, StepTime{Node: ev.Name, Sources: ev.Sources})
		}
		out[i].Total += ev.Dur
	}
	return out
}

// run executes every step, checking ctx before each (when it can be
// cancelled); with times (one per step) it adds each step's duration,
// with trace it appends each step's start and duration.
func (e *GraphExecutor) run(ctx context.Context, times []time.Duration, trace *[]stepEvent) error {
	if e.closed {
		return errClosed
	}
	// Kernels run parallel loops on a team of worker threads per calling
	// OS thread (kiln's pool, or OpenMP's with dnnl regions), whose
	// workers stay awake (spinning, with OMP_WAIT_POLICY=active) after
	// the loop: runs on whatever
	// thread called them would leave a team awake on each, competing
	// for the cores with the team at work (two busy workers on one core,
	// seen as mobilenet_v2 at 2 threads taking 8-11 ms instead of 5).
	// So multi-threaded runs of an executor run on its own home thread,
	// one handoff per run (about 25 µs of wake-ups in a VM). A run at one
	// thread starts no team: it runs on the calling thread, without the
	// handoff, and a home thread left from earlier runs ends, taking its
	// team with it.
	if e.threads == 1 {
		e.stopHome()
		goruntime.LockOSThread()
		defer goruntime.UnlockOSThread()
		return e.runHere(ctx, times, trace)
	}
	if e.home == nil {
		w, err := startCoreWorker(nil)
		if err != nil {
			return err
		}
		e.home = w
		e.homeCleanup = goruntime.AddCleanup(e, (*coreWorker).stop, w)
	}
	return e.home.run(func() error { return e.runHere(ctx, times, trace) })
}

// stopHome ends the home thread, if any.
func (e *GraphExecutor) stopHome() {
	e.homeCleanup.Stop()
	if e.home != nil {
		e.home.stop()
		e.home = nil
	}
}

// runHere is run on the calling thread, which stays the same OS thread
// throughout (the home thread, or one locked by run): the thread count
// SetThreads gives is per OS thread in the libraries (runSteps).
func (e *GraphExecutor) runHere(ctx context.Context, times []time.Duration, trace *[]stepEvent) error {
	var unset []string
	for k, ok := range e.set {
		if !ok {
			unset = append(unset, fmt.Sprintf("%q", e.g.nodes[e.g.argNodes[k]].name))
		}
	}
	if len(unset) > 0 {
		return fmt.Errorf("run: input(s) %s not set", strings.Join(unset, ", "))
	}
	for start := 0; start < len(e.steps); {
		// A segment: the consecutive steps that run on one pinned thread
		// (SetDeviceCores; a device copy runs with its destination's
		// kernels), handed over in one piece; unpinned steps run here.
		w := e.steps[start].worker
		end := start + 1
		for end < len(e.steps) && e.steps[end].worker == w {
			end++
		}
		var err error
		if w != nil {
			first := start
			err = w.run(func() error { return e.runSteps(ctx, first, end, times, trace) })
		} else {
			err = e.runSteps(ctx, start, end, times, trace)
		}
		if err != nil {
			return err
		}
		start = end
	}
	// The argument blocks hold raw pointers to the storage: keep the
	// executor alive until the last kernel has returned.
	goruntime.KeepAlive(e)
	return nil
}

// GetOutput copies output i into a new host tensor.
func (e *GraphExecutor) GetOutput(i int) (*tensor.Tensor, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.getOutput(i)
}

func (e *GraphExecutor) getOutput(i int) (*tensor.Tensor, error) {
	if e.closed {
		return nil, errClosed
	}
	if i < 0 || i >= len(e.g.heads) {
		return nil, fmt.Errorf("output %d out of range (graph has %d outputs)", i, len(e.g.heads))
	}
	t, err := e.views[e.g.heads[i]].ToTensor()
	if err != nil {
		return nil, fmt.Errorf("output %d (%s): %w", i, e.g.entryRef(e.g.heads[i]), err)
	}
	return t, nil
}

// Execute sets the given inputs, runs the graph and returns all outputs,
// holding the executor's lock throughout, so concurrent callers each get
// the outputs of their own inputs.
func (e *GraphExecutor) Execute(inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	return e.ExecuteContext(context.Background(), inputs)
}

// ExecuteContext is Execute that stops between steps once ctx is done.
func (e *GraphExecutor) ExecuteContext(ctx context.Context, inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	names := make([]string, 0, len(inputs))
	for n := range inputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := e.setInput(n, inputs[n]); err != nil {
			return nil, err
		}
	}
	if err := e.run(ctx, nil, nil); err != nil {
		return nil, err
	}
	outs := make([]*tensor.Tensor, len(e.g.heads))
	for i := range outs {
		t, err := e.getOutput(i)
		if err != nil {
			return nil, err
		}
		outs[i] = t
	}
	return outs, nil
}

// call runs a kiln_op step's function.
func (st *step) call() error {
	if st.native != nil {
		return st.native.call(st.block, len(st.args))
	}
	return st.packed(st.args)
}

// stepDevice is the device step i runs on: its first output's (a
// kernel's outputs share a device; a copy's output is its destination).
func (e *GraphExecutor) stepDevice(i int) Device {
	return e.g.entries[e.g.nodes[e.steps[i].node].first].dev
}

// placeOf returns the device step i runs on and the cores of its pinned
// thread, if any.
func (e *GraphExecutor) placeOf(i int) (Device, CoreSet) {
	if w := e.steps[i].worker; w != nil {
		return e.stepDevice(i), w.cores
	}
	return e.stepDevice(i), nil
}

// runSteps runs steps [start, end) in order (see run).
func (e *GraphExecutor) runSteps(ctx context.Context, start, end int, times []time.Duration, trace *[]stepEvent) error {
	// The thread count is per OS thread in the libraries: set it on the
	// one that runs these steps (0 restores the library's own setting).
	for _, f := range e.threadsHere {
		callSetNumThreads(f, e.threads)
	}
	// Without times, trace or a context that can stop the run, up to
	// maxBatch consecutive native steps are one cgo call (callAll). A cgo
	// call of more than 20 µs loses its P to the Go scheduler's monitor,
	// and with GOMAXPROCS 1 (a process confined to one core) the
	// hand-offs on the same core took tiny_bert's 40 kernels from 0.52 to
	// 0.66-1.25 ms a run; a batch makes one hand-off.
	batch := times == nil && trace == nil && ctx.Done() == nil && e.calls != nil
	for i := start; i < end; {
		if !batch || e.steps[i].native == nil {
			if err := e.runStep(ctx, i, times, trace); err != nil {
				return err
			}
			i++
			continue
		}
		j := i + 1
		for j < end && j-i < maxBatch && e.steps[j].native != nil {
			j++
		}
		if k, err := callAll(e.calls, i, j); err != nil {
			return e.stepError(k, e.steps[k].native.wrap(err))
		}
		i = j
	}
	return nil
}

// maxBatch bounds the steps of one callAll: a cgo call of more than 10
// ms loses its P to the Go scheduler's monitor even where other Ps are
// idle, and at 2 threads resnet18's whole run in one call (14 ms) took
// 15.2-15.6 ms against 12.9-14.9 step by step.
const maxBatch = 8

// runStep runs step i (see run), checking ctx first when it can be
// cancelled.
func (e *GraphExecutor) runStep(ctx context.Context, i int, times []time.Duration, trace *[]stepEvent) error {
	var t0 time.Time
	st := &e.steps[i]
	if done := ctx.Done(); done != nil {
		select {
		case <-done:
			return fmt.Errorf("run: stopped before %s: %w", e.g.nodeRef(st.node), ctx.Err())
		default:
		}
	}
	var err error
	if times != nil || trace != nil {
		t0 = time.Now()
	}
	switch {
	case st.native != nil, st.packed != nil:
		err = st.call()
	default:
		err = st.dst.CopyFromArray(st.src)
	}
	if times != nil {
		times[i] += time.Since(t0)
	}
	if trace != nil {
		run := 0
		if k := len(*trace); k > 0 {
			run = (*trace)[k-1].run
			if i == 0 {
				run++
			}
		}
		*trace = append(*trace, stepEvent{step: i, run: run, start: t0, dur: time.Since(t0)})
	}
	if err != nil {
		return e.stepError(i, err)
	}
	return nil
}

// stepError is the error of a run whose step i failed with err: the
// step's node, and the function a kiln_op node calls.
func (e *GraphExecutor) stepError(i int, err error) error {
	st := &e.steps[i]
	if n := &e.g.nodes[st.node]; n.op == opKiln {
		return fmt.Errorf("run: %s (func %q): %w", e.g.nodeRef(st.node), n.funcName, err)
	}
	return fmt.Errorf("run: %s: %w", e.g.nodeRef(st.node), err)
}
