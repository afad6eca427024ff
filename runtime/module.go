package runtime

import (
	"fmt"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"sync"
	"time"
	"unsafe"
)

// PackedFunc is a compiled (or Go) operator: it receives its inputs then its
// outputs, all preallocated, and writes the outputs.
type PackedFunc func(args []*NDArray) error

// Module is a unit of compiled code: a shared library ("dso"), an external
// codegen's JSON runtime module ("json"), .... Modules compose: a module's
// imports are searched after the module itself, so external modules built
// by other code generators join the host library into one artifact.
// Modules are safe to share between goroutines and executors.
type Module interface {
	// Name identifies the module (a library's file name, ...).
	Name() string
	// Kind is the module's format: "dso", "json", ....
	Kind() string
	// GetFunction looks name up in the module, then in its imports
	// (depth first, in import order).
	GetFunction(name string) (PackedFunc, bool)
	// Imports lists the imported modules.
	Imports() []Module
	// Import adds a module to the imports.
	Import(m Module)
}

// LocalModule is implemented by modules that can look a function up in
// themselves only. FindFunction uses it to walk a module DAG visiting each
// module once; module implementations built on ModuleBase should provide it
// and implement GetFunction as FindFunction(self, name).
type LocalModule interface {
	Module
	// GetLocalFunction looks name up in the module itself, not its imports.
	GetLocalFunction(name string) (PackedFunc, bool)
}

// ModuleBase implements the import list of a Module; embed it.
type ModuleBase struct {
	mu      sync.RWMutex
	imports []Module
}

// Imports returns a copy of the import list.
func (b *ModuleBase) Imports() []Module {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return append([]Module(nil), b.imports...)
}

// Import appends m to the import list (nil and repeated modules are ignored).
func (b *ModuleBase) Import(m Module) {
	if m == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, x := range b.imports {
		if x == m {
			return
		}
	}
	b.imports = append(b.imports, m)
}

// FindFunction looks name up in m and then in its imports, depth first,
// visiting every module once (so shared or cyclic imports are harmless).
func FindFunction(m Module, name string) (PackedFunc, bool) {
	f, nf, _, ok := findFunction(m, name, map[Module]bool{})
	if !ok {
		return nil, false
	}
	if nf != nil {
		return nf.packed(), true
	}
	return f, true
}

// findFunction returns the native form too when the function lives in a
// DSO module, so that the graph executor can call it on prepared C arrays,
// and the module it was found in.
func findFunction(m Module, name string, seen map[Module]bool) (PackedFunc, *nativeFunc, Module, bool) {
	if m == nil || seen[m] {
		return nil, nil, nil, false
	}
	seen[m] = true
	switch lm := m.(type) {
	case *DSOModule:
		if nf, ok := lm.native(name); ok {
			return nil, nf, m, true
		}
	case LocalModule:
		if f, ok := lm.GetLocalFunction(name); ok {
			return f, nil, m, true
		}
	default:
		// A module that only offers GetFunction searches its imports itself.
		f, ok := m.GetFunction(name)
		return f, nil, m, ok
	}
	for _, imp := range m.Imports() {
		if f, nf, owner, ok := findFunction(imp, name, seen); ok {
			return f, nf, owner, true
		}
	}
	return nil, nil, nil, false
}

// ThreadSetter is a module with its own thread pool (a DSOModule whose
// library exports kiln_set_num_threads, or an external runtime's module
// such as dnnl's). SetNumThreads reports whether the module took the
// count.
type ThreadSetter interface {
	SetNumThreads(n int) bool
}

// SetNumThreads sets the thread count of every module in m and its
// imports that implements ThreadSetter (n <= 0: the module's default) and
// returns how many took it.
func SetNumThreads(m Module, n int) int {
	count := 0
	eachModule(m, func(m Module) error {
		if d, ok := m.(ThreadSetter); ok && d.SetNumThreads(n) {
			count++
		}
		return nil
	})
	return count
}

// eachModule calls f on m and every module it imports, directly or not,
// once each (shared or cyclic imports are harmless), depth first in
// import order, and stops at f's first error.
func eachModule(m Module, f func(Module) error) error {
	seen := map[Module]bool{}
	var walk func(Module) error
	walk = func(m Module) error {
		if m == nil || seen[m] {
			return nil
		}
		seen[m] = true
		if err := f(m); err != nil {
			return err
		}
		for _, imp := range m.Imports() {
			if err := walk(imp); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(m)
}

// DSOModule is a shared library of packed functions compiled from kiln's C
// code (see runtime/include/kiln/c_runtime_api.h), loaded with dlopen.
// Libraries stay loaded for the lifetime of the process: PackedFuncs and
// executors hold raw function pointers into them, and dlclose under a
// running executor would be fatal, so there is no Close.
type DSOModule struct {
	ModuleBase
	path       string
	handle     unsafe.Pointer
	setErr     unsafe.Pointer // kiln_set_last_error, or nil
	getErr     unsafe.Pointer // kiln_get_last_error, or nil
	setThreads unsafe.Pointer // kiln_set_num_threads, or nil
	// setThreadsHere is kiln_set_num_threads_here (the calling OS
	// thread's count), or nil in libraries built before it existed.
	setThreadsHere unsafe.Pointer

	// registry is the library's function table (RegistrySymbol): the
	// only functions GetFunction finds.
	registry map[string]unsafe.Pointer

	mu    sync.Mutex
	funcs map[string]*nativeFunc
}

// RegistrySymbol is the function table every kiln library exports (see
// kiln_func_entry in c_runtime_api.h). A library's packed functions are
// found through it only: a name from a graph program is never passed to
// dlsym, so it cannot reach any other symbol of the process (system,
// exit, ...) or of the libraries the library links.
const RegistrySymbol = "kiln_func_registry"

// LoadLibrary loads a shared library produced by kiln (or written by hand
// against the C ABI) as a "dso" Module.
func LoadLibrary(path string) (Module, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("load library %s: %w", path, err)
	}
	h, err := dlOpen(abs)
	if err != nil {
		return nil, fmt.Errorf("load library %s: %w", path, err)
	}
	table := dlSym(h, RegistrySymbol)
	if table == nil {
		return nil, fmt.Errorf("load library %s: it exports no %s function table (not a library kiln built; rebuild it)", path, RegistrySymbol)
	}
	reg, err := readRegistry(table)
	if err != nil {
		return nil, fmt.Errorf("load library %s: %w", path, err)
	}
	return &DSOModule{
		path:           abs,
		handle:         h,
		registry:       reg,
		setErr:         dlSym(h, "kiln_set_last_error"),
		getErr:         dlSym(h, "kiln_get_last_error"),
		setThreads:     dlSym(h, "kiln_set_num_threads"),
		setThreadsHere: dlSym(h, "kiln_set_num_threads_here"),
		funcs:          map[string]*nativeFunc{},
	}, nil
}

// Name returns the library's file name.
func (d *DSOModule) Name() string { return filepath.Base(d.path) }

// Path returns the library's absolute path.
func (d *DSOModule) Path() string { return d.path }

// Kind returns "dso".
func (d *DSOModule) Kind() string { return "dso" }

// GetFunction looks up an exported packed function, then the imports.
func (d *DSOModule) GetFunction(name string) (PackedFunc, bool) { return FindFunction(d, name) }

// GetLocalFunction looks up an exported packed function of this library.
func (d *DSOModule) GetLocalFunction(name string) (PackedFunc, bool) {
	nf, ok := d.native(name)
	if !ok {
		return nil, false
	}
	return nf.packed(), true
}

// SetNumThreads calls the library's kiln_set_num_threads and reports
// whether the library exports it.
func (d *DSOModule) SetNumThreads(n int) bool {
	if d.setThreads == nil {
		return false
	}
	if n < 0 {
		n = 0
	}
	callSetNumThreads(d.setThreads, int32(min(n, 1<<30)))
	return true
}

// threadSetters returns the per-OS-thread thread-count setters of the
// libraries in m's module tree.
func threadSetters(m Module) []unsafe.Pointer {
	var out []unsafe.Pointer
	eachModule(m, func(m Module) error {
		if d, ok := m.(*DSOModule); ok && d.setThreadsHere != nil {
			out = append(out, d.setThreadsHere)
		}
		return nil
	})
	return out
}

// Funcs returns the names in the library's function table, sorted.
func (d *DSOModule) Funcs() []string {
	out := make([]string, 0, len(d.registry))
	for n := range d.registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// native looks a packed function up in this library's function table
// (cached).
func (d *DSOModule) native(name string) (*nativeFunc, bool) {
	p, ok := d.registry[name]
	if !ok {
		return nil, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if nf, ok := d.funcs[name]; ok {
		return nf, true
	}
	nf := &nativeFunc{name: name, lib: d.Name(), fn: p, setErr: d.setErr, getErr: d.getErr}
	d.funcs[name] = nf
	return nf, true
}

// nativeFunc is a packed function pointer in a loaded library.
type nativeFunc struct {
	name, lib          string
	fn, setErr, getErr unsafe.Pointer
}

// call invokes the function on a C kiln_tensor array of n entries.
func (f *nativeFunc) call(args unsafe.Pointer, n int) error {
	if err := callPacked(f.fn, args, int32(n), f.setErr, f.getErr); err != nil {
		return f.wrap(err)
	}
	return nil
}

// wrap names the function and its library in an error of its call.
func (f *nativeFunc) wrap(err error) error { return fmt.Errorf("%s (in %s): %w", f.name, f.lib, err) }

// callItem is one call of a batch made by callAll: a native function, its
// C argument block of n entries and its library's error functions.
type callItem struct {
	fn, args       unsafe.Pointer
	n              int32
	setErr, getErr unsafe.Pointer
}

// packed wraps the function as a PackedFunc that packs its arguments into
// a fresh C array per call.
func (f *nativeFunc) packed() PackedFunc {
	return func(args []*NDArray) error {
		for i, a := range args {
			if a == nil {
				return fmt.Errorf("%s: argument %d is nil", f.name, i)
			}
		}
		block, err := packArgs(args)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		defer cFree(block)
		err = f.call(block, len(args))
		// The block holds raw data pointers: keep the arrays (and so their
		// buffers) alive until the C call has returned.
		goruntime.KeepAlive(args)
		return err
	}
}

// InnerProfiler is implemented by modules whose functions run steps of
// their own (a JSON runtime module's kernels, each one or more oneDNN
// primitives): GraphExecutor.Profile and Trace turn recording on, and
// report those steps under the step that called the function.
type InnerProfiler interface {
	// SetProfiling turns recording of inner steps on (dropping what was
	// recorded before) or off.
	SetProfiling(on bool)
	// InnerEvents returns the inner steps function fn ran since
	// recording was turned on, in the order they ran (none for a
	// function of another module).
	InnerEvents(fn string) []InnerEvent
}

// InnerEvent is one run of one inner step.
type InnerEvent struct {
	// Name is the step's name (a JSON kernel node's operator or
	// composite); Index tells apart steps of one name (its node id).
	Name  string
	Index int
	// Sources are the model nodes the step computes, when recorded.
	Sources []string
	// Start is when it started, Dur how long it took.
	Start time.Time
	Dur   time.Duration
}
