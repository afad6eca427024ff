package runtime

import (
	"fmt"
	goruntime "runtime"
	"slices"
)

// Instancer is implemented by a module whose calls share mutable state
// (a JSON runtime module's intermediates and prepared kernels), which it
// serialises. NewInstance returns a module computing the same functions
// with state of its own, sharing what it only reads (constants, reordered
// weights), so that two executors can call them at the same time. A
// module without shared state need not implement it: forks call it
// directly. An instance with a Close method (resources outside Go) is
// closed with the fork that owns it.
type Instancer interface {
	Module
	NewInstance() (Module, error)
}

// Fork returns an executor that runs the same program over the same
// compiled code, with memory of its own for everything but the
// parameters, for a caller that runs inferences at the same time as e.
// inputs names the inputs the fork's callers set per run; every other
// input of the program (the parameters, usually the weights) must be set
// on e, and its buffer is shared: from then on it is frozen in e and in
// every fork (SetInput and SetParams refuse it), so no run can see it
// change. Modules that serialise their calls (Instancer) get an instance
// per fork; the others are shared. The fork starts with e's thread count
// (SetThreads) and without pinned devices (SetDeviceCores).
//
// The shared buffers live until e and every fork are closed or
// unreachable, in any order.
func (e *GraphExecutor) Fork(inputs []string) (*GraphExecutor, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errClosed
	}
	g := e.g
	live := make([]bool, len(g.argNodes))
	for _, name := range inputs {
		k, ok := e.inputIdx[name]
		if !ok {
			return nil, fmt.Errorf("fork: graph has no input %q (inputs: %s)", name, e.inputNames())
		}
		live[k] = true
	}
	// A parameter is shared only when its buffer holds nothing else:
	// then no kernel of any executor writes it.
	users := map[int64]int{}
	for _, en := range g.entries {
		users[en.sid]++
	}
	shared := map[int64]*NDArray{}
	var sharedInputs []int
	for k, nid := range g.argNodes {
		if live[k] {
			continue
		}
		name := g.nodes[nid].name
		if !e.set[k] {
			return nil, fmt.Errorf("fork: parameter %q is not set (set it, or name it among the fork's inputs)", name)
		}
		sid := g.entries[g.nodes[nid].first].sid
		if users[sid] != 1 {
			return nil, fmt.Errorf("fork: parameter %q shares storage_id %d with other tensors, so forks cannot share it", name, sid)
		}
		shared[sid] = e.owners[sid]
		sharedInputs = append(sharedInputs, k)
	}
	// Each module that serialises its calls gets one instance for the
	// fork; the fork's steps call their functions in it.
	inst := map[Module]Module{}
	fns := make([]resolved, len(g.nodes))
	for _, st := range e.steps {
		n := &g.nodes[st.node]
		if n.op != opKiln {
			continue
		}
		r := resolved{f: st.packed, nf: st.native, owner: st.owner}
		if im, ok := st.owner.(Instancer); ok && st.native == nil {
			m, ok := inst[st.owner]
			if !ok {
				var err error
				if m, err = im.NewInstance(); err != nil {
					return nil, fmt.Errorf("fork: module %s (%s): %w", st.owner.Name(), st.owner.Kind(), err)
				}
				inst[st.owner] = m
			}
			f, _, _, ok := findFunction(m, n.funcName, map[Module]bool{})
			if !ok {
				return nil, fmt.Errorf("fork: an instance of module %s has no function %q (%s)", st.owner.Name(), n.funcName, g.nodeRef(st.node))
			}
			r.f, r.owner = f, m
		}
		fns[st.node] = r
	}
	f := &GraphExecutor{g: g, mod: e.mod, inputIdx: e.inputIdx, threads: e.threads}
	for owner, m := range inst {
		if m != owner {
			f.instances = append(f.instances, m)
		}
	}
	if err := f.build(fns, shared); err != nil {
		closeModules(f.instances)
		return nil, fmt.Errorf("fork: %w", err)
	}
	if len(f.instances) > 0 {
		// A fork dropped without Close still releases its instances
		// (a oneDNN instance holds its primitives and stream).
		f.instancesCleanup = goruntime.AddCleanup(f, closeModules, slices.Clone(f.instances))
	}
	for _, k := range sharedInputs {
		e.frozen[k], f.frozen[k], f.set[k] = true, true, true
	}
	// e gives up ownership of the shared buffers: whichever executor
	// goes last leaves them to the garbage collector.
	e.storage = slices.DeleteFunc(e.storage, func(a *NDArray) bool {
		for _, s := range shared {
			if s == a {
				return true
			}
		}
		return false
	})
	if n := int(f.threads); n > 0 {
		for _, m := range f.instances {
			SetNumThreads(m, n)
		}
	}
	return f, nil
}

// SetThreads sets the number of threads this executor's runs use (n <= 0:
// each module's own setting, see SetNumThreads): host kernels take it
// through a per-OS-thread setting of their library made at each run, and
// the module instances of a fork take it directly. Modules shared with
// other executors keep their own setting, so executors of one program can
// run side by side with different counts when they are forks.
func (e *GraphExecutor) SetThreads(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.threads = int32(max(0, min(n, 1<<20)))
	for _, m := range e.instances {
		SetNumThreads(m, int(e.threads))
	}
}

// UseThreads is SetThreads(n) together with SetNumThreads(e.Module(), n):
// the count of a process that runs this executor alone (kiln run and
// bench), reaching the modules shared with other executors too. It
// returns how many modules took the count.
func (e *GraphExecutor) UseThreads(n int) int {
	e.SetThreads(n)
	return SetNumThreads(e.mod, n)
}
