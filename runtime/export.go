package runtime

import (
	"fmt"
	"sort"
	"sync"

	"github.com/kiln-dev/kiln/tensor"
)

// CSourceModule is C source a target's hook produced (TIRToRuntime or
// RelayToRuntime) that the build compiles into the artifact's library
// together with the default code generation, as TVM's CSourceModule: it
// cannot run until it is built, so GetFunction finds nothing.
//
// The code is compiled as its own translation unit against the ABI
// header (#include "kiln/c_runtime_api.h" is on the include path). It
// must export each function of Funcs with kiln's packed signature
// `int32_t NAME(kiln_tensor* args, int32_t num_args)` and must not define
// the library-wide symbols kiln_set_last_error, kiln_get_last_error and
// kiln_set_num_threads (the default code generation defines them; use
// codegen/c's NoRuntimeDefs option when generating with kiln's C
// generator).
type CSourceModule struct {
	ModuleBase
	// Label names the module in reports and in the artifact's file name
	// (letters, digits, '_' and '-').
	Label string
	// Code is the C text.
	Code string
	// Funcs are the packed functions the code exports.
	Funcs []string
	// Unpacked gives, for functions of Funcs that have one, the unpacked
	// form taking one pointer per tensor argument, which the AOT
	// executor calls instead with --unpacked-api.
	Unpacked map[string]UnpackedFunc
	// CFlags are extra compiler flags for the whole library (include
	// paths, defines).
	CFlags []string
	// LDFlags are extra linker arguments (e.g. "-lopenblas").
	LDFlags []string
}

// Name returns the label.
func (m *CSourceModule) Name() string { return m.Label }

// Kind returns "c".
func (m *CSourceModule) Kind() string { return "c" }

// GetFunction finds nothing: the source is compiled by the build first.
func (m *CSourceModule) GetFunction(string) (PackedFunc, bool) { return nil, false }

// Serializable is a module that saves itself as bytes, to be written into
// an artifact and read back by the Loader registered for its Kind (an
// external code generator's JSON graph, for example).
type Serializable interface {
	Module
	// SaveBinary returns the module's serialised form.
	SaveBinary() ([]byte, error)
}

// Loader reads back the modules of one kind that Serializable saved.
type Loader struct {
	// Kind is the module kind it loads (Module.Kind of what it returns).
	Kind string
	// Load makes a module from SaveBinary's bytes.
	Load func(data []byte) (Module, error)
}

// loaders are the registered loaders by kind.
var loaders = struct {
	sync.RWMutex
	m map[string]Loader
}{m: map[string]Loader{}}

// RegisterLoader adds the loader of a module kind. An empty kind, a nil
// Load, the built-in kinds "dso" and "c", and a kind already registered
// are errors.
func RegisterLoader(l Loader) error {
	if l.Kind == "" || l.Load == nil {
		return fmt.Errorf("runtime: a module loader needs a kind and a Load function")
	}
	if l.Kind == "dso" || l.Kind == "c" {
		return fmt.Errorf("runtime: module kind %q is built in", l.Kind)
	}
	loaders.Lock()
	defer loaders.Unlock()
	if _, dup := loaders.m[l.Kind]; dup {
		return fmt.Errorf("runtime: a loader for module kind %q is already registered", l.Kind)
	}
	loaders.m[l.Kind] = l
	return nil
}

// LoadModule reads a saved module of the given kind with its registered
// loader.
func LoadModule(kind string, data []byte) (Module, error) {
	loaders.RLock()
	l, ok := loaders.m[kind]
	loaders.RUnlock()
	if !ok {
		return nil, fmt.Errorf("runtime: no loader for module kind %q (registered: %v): the program must import the package of the backend that produced it (kiln's own: import _ \"github.com/kiln-dev/kiln/backend/NAME\", e.g. backend/dnnl)", kind, LoaderKinds())
	}
	m, err := l.Load(data)
	if err != nil {
		return nil, fmt.Errorf("runtime: loading a %q module: %w", kind, err)
	}
	return m, nil
}

// LoaderKinds lists the kinds with a registered loader, sorted.
func LoaderKinds() []string {
	loaders.RLock()
	defer loaders.RUnlock()
	out := make([]string, 0, len(loaders.m))
	for k := range loaders.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ConstantUser is a module that needs constants the compiler set aside
// for it (a target's ConstantUpdater hook); the artifact loader passes
// them, by the names the hook chose, to every module in the import tree
// that implements it.
type ConstantUser interface {
	Module
	// SetConstants hands the module the compilation's constants; a module
	// takes the ones it needs and reports missing ones as an error.
	SetConstants(consts map[string]*tensor.Tensor) error
}

// SetConstants walks m and its imports and calls SetConstants on every
// ConstantUser.
func SetConstants(m Module, consts map[string]*tensor.Tensor) error {
	return eachModule(m, func(m Module) error {
		if cu, ok := m.(ConstantUser); ok {
			if err := cu.SetConstants(consts); err != nil {
				return fmt.Errorf("module %s: %w", m.Name(), err)
			}
		}
		return nil
	})
}

// UnpackedFunc is the unpacked form of a C source module's function: its
// C symbol and prototype (without the semicolon), e.g.
// "int32_t f_unpacked(float* restrict A, float* restrict B)".
type UnpackedFunc struct {
	Symbol, Decl string
}
