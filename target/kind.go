package target

import (
	"fmt"
	"sort"
	"sync"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pattern"
	tirtransform "github.com/kiln-dev/kiln/tir/transform"
)

// DeviceType is a DLPack-style device type: ir.DeviceType, kiln's one
// device-type enum.
type DeviceType = ir.DeviceType

// Device types kiln knows (ir.CPU and ir.ExtDev).
const (
	CPU    = ir.CPU
	ExtDev = ir.ExtDev
)

// Option declares one attribute a target kind accepts. Kind is one of
// ir.AttrString, ir.AttrInt, ir.AttrBool, ir.AttrStrings.
type Option struct {
	Name    string
	Kind    ir.AttrKind
	Default any // nil: no default (the attribute is absent unless given)
	Doc     string
}

// Kind is a registered family of targets.
type Kind struct {
	// Name is what target strings start with ("c", "dnnl").
	Name string
	// DeviceType is where code of this kind runs.
	DeviceType DeviceType
	// Keys are the default keys (generic categories such as "cpu") used to
	// find operator strategies when none is registered for the kind itself.
	Keys []string
	// Options are the attributes the kind accepts besides the common ones.
	Options []Option
	// Doc is a one-line description for `kiln targets`.
	Doc string
	// Host reports that targets of this kind can run host-side code (the
	// graph executor's glue, shape computations). ParseList picks the last
	// such target of a CPU kind as the host. True for "c".
	Host bool
	// Hooks are the kind's customisations of the compilation flow; the zero
	// value uses kiln's default flow everywhere.
	Hooks Hooks
	// CCodegen customises kiln's default C code generation for the kind's
	// PrimFuncs (when it has no TIRToRuntime hook); nil means none.
	CCodegen *CCodegen
	// Supports is the kind's per-operator support predicate for
	// partitioning (package partition): nil when the kind's external
	// code generator takes the call (an operator call, or a call of a
	// composite function), else an error saying why not (the partition
	// report shows it). A nil Supports takes nothing: the kind is not an
	// external code generator.
	Supports func(call *graph.Call) error
	// Patterns is the kind's pattern table for MergeComposite, which
	// partitioning runs before asking Supports: each match becomes a
	// call of a function with Composite set to the entry's name
	// ("<kind>.<name>"), which Supports then sees as one call. The order
	// is the priority.
	Patterns []pattern.Entry
	// PartitionPass, when set, runs on each function partitioned for the
	// kind (the per-target optimisation of PartitionGraph) and returns
	// the function to use; it must keep the parameters' and result's
	// types.
	PartitionPass func(fn *graph.Function) (*graph.Function, error)
	// KeepRegion, when set, is asked about each of the kind's regions
	// after MergeCompilerRegions (calls in topological order); an error
	// sends the region's calls back to the host, composites as their
	// operators, with the error as the reason in the partition report.
	// A kind uses it to leave regions that do not pay for an external
	// call, such as a lone elementwise operator that the host would fuse
	// into a neighbouring kernel (TVM's subgraph pruning).
	KeepRegion func(calls []*graph.Call) error
	// Partitioning adds the kind's graph passes around partitioning and
	// may keep its regions apart (UMA's partitioner); nil means neither.
	Partitioning *Partitioning
	// TIRPasses, when set, returns the passes the build adds to the TIR
	// pipeline that lowers the kind's PrimFuncs (those with attribute
	// target=<kind name>) for target t, each in its phase after the
	// built-ins of that phase. Other PrimFuncs never see them.
	TIRPasses func(t *Target) []tirtransform.Pass
}

// GraphPhase is when partitioning runs a kind's graph pass.
type GraphPhase int

// The graph pass phases, in the order partitioning runs them.
const (
	// PrePartitioning runs on the whole module before MergeComposite.
	PrePartitioning GraphPhase = iota
	// PostPartitioning0 runs right after PartitionGraph, on the module
	// with the partitioned functions outlined.
	PostPartitioning0
	// PostPartitioning1 runs after every kind's PostPartitioning0 passes,
	// on the re-typed module: the last graph-level step before the build
	// hands the kind its functions.
	PostPartitioning1
)

// String names the phase as UMA does ("PrePartitioning", ...).
func (p GraphPhase) String() string {
	switch p {
	case PrePartitioning:
		return "PrePartitioning"
	case PostPartitioning0:
		return "PostPartitioning0"
	case PostPartitioning1:
		return "PostPartitioning1"
	}
	return fmt.Sprintf("GraphPhase(%d)", int(p))
}

// GraphPass is a module pass a kind runs during partitioning. Run
// receives the kind's target instance (for its attributes) and returns
// the new module; it must not modify its input.
type GraphPass struct {
	Name  string
	Phase GraphPhase
	Run   func(t *Target, mod *graph.Module) (*graph.Module, error)
}

// Partitioning is a kind's part in partitioning besides Supports and
// Patterns.
type Partitioning struct {
	// Passes run in their phase, in slice order, each kind's in the
	// order of the compilation's target list.
	Passes []GraphPass
	// KeepRegionsApart skips MergeCompilerRegions for the kind: each
	// offloaded call (or composite) becomes a function of its own.
	KeepRegionsApart bool
}

// CCodegen is what a kind adds to the default C code generation of its
// PrimFuncs: headers and prototypes for the externs its functions call,
// custom C for some extern calls, kernel sources compiled into the
// library and the flags to compile and link them. The build merges the
// CCodegen of every target of a compilation into the one library.
type CCodegen struct {
	// Includes are headers for the generated C (codegen/c Options.Includes
	// syntax: "<cblas.h>", "\"kernel.h\"", or a line starting with '#').
	Includes []string
	// DeclaredExterns are extern functions whose prototypes come from
	// Includes (no prototype is generated for them).
	DeclaredExterns []string
	// ReplaceCallExtern, when it returns ok, replaces the C of a
	// call_extern (the extern's name and the C text of its arguments).
	ReplaceCallExtern func(name string, args []string) (code string, ok bool)
	// Sources are C files (and headers) written next to the generated
	// source; the .c files are compiled into the library.
	Sources []SourceFile
	// CFlags are extra compiler flags; LDFlags extra linker arguments
	// ("-lopenblas").
	CFlags, LDFlags []string
	// Funcs are packed functions the Sources define that the runtime may
	// look up by name (GetFunction): they join the library's function
	// table, the only place the runtime finds functions.
	Funcs []string
}

// SourceFile is a named file of C source or header text.
type SourceFile struct {
	Name string
	Data []byte
}

// AttrTarget is the option kind of a nested target: its value in
// Target.Attrs is a *Target. In a target string it is written as a quoted
// target string (`-fallback="c -mcpu=native"`), in JSON as an object or a
// string. The common option "host" has this kind but is stored in
// Target.Host rather than in Attrs.
const AttrTarget ir.AttrKind = 64

// kindName names an option kind, including AttrTarget.
func kindName(k ir.AttrKind) string {
	if k == AttrTarget {
		return "target"
	}
	return k.String()
}

// valueKind is ir.KindOf extended with *Target values.
func valueKind(v any) ir.AttrKind {
	if _, ok := v.(*Target); ok {
		return AttrTarget
	}
	return ir.KindOf(v)
}

// commonOptions are accepted by every kind.
var commonOptions = []Option{
	{Name: "keys", Kind: ir.AttrStrings, Doc: "strategy lookup keys (default: the kind's keys)"},
	{Name: "model", Kind: ir.AttrString, Doc: "device model name"},
	{Name: "tag", Kind: ir.AttrString, Doc: "tag this target came from"},
	{Name: "device", Kind: ir.AttrString, Doc: "device name"},
	{Name: "libs", Kind: ir.AttrStrings, Doc: "external libraries to link"},
	{Name: "host", Kind: AttrTarget, Doc: "target that runs this target's host-side code (stored in Target.Host)"},
}

// Option returns the declaration of an option (common ones included), or nil.
func (k *Kind) Option(name string) *Option {
	for i := range k.Options {
		if k.Options[i].Name == name {
			return &k.Options[i]
		}
	}
	for i := range commonOptions {
		if commonOptions[i].Name == name {
			return &commonOptions[i]
		}
	}
	return nil
}

// AllOptions lists the kind's own options then the common ones.
func (k *Kind) AllOptions() []Option {
	return append(append([]Option{}, k.Options...), commonOptions...)
}

// Registry holds target kinds by name, and the tags (named target
// configurations) defined over them.
type Registry struct {
	mu    sync.RWMutex
	kinds map[string]*Kind
	tags  *TagRegistry
}

// NewRegistry makes an empty registry (with an empty tag registry).
func NewRegistry() *Registry {
	r := &Registry{kinds: map[string]*Kind{}}
	r.tags = &TagRegistry{kinds: r, tags: map[string]*Tag{}}
	return r
}

// Tags returns the registry's tags.
func (r *Registry) Tags() *TagRegistry { return r.tags }

// validName reports whether s can name a kind, tag or label: a letter, then
// letters, digits, '_', '-' or '.'.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// Register adds a kind. A duplicate name, an empty name or an ill-declared
// option is an error.
func (r *Registry) Register(k *Kind) error {
	if k.Name == "" {
		return fmt.Errorf("target kind with an empty name")
	}
	seen := map[string]bool{}
	for _, o := range k.Options {
		if o.Name == "" || seen[o.Name] {
			return fmt.Errorf("target kind %q: empty or repeated option name %q", k.Name, o.Name)
		}
		seen[o.Name] = true
		for _, c := range commonOptions {
			if c.Name == o.Name {
				return fmt.Errorf("target kind %q: option %q is reserved", k.Name, o.Name)
			}
		}
		switch o.Kind {
		case ir.AttrString, ir.AttrInt, ir.AttrBool, ir.AttrStrings:
		case AttrTarget:
			if o.Default != nil {
				return fmt.Errorf("target kind %q: option %q of kind target cannot have a default", k.Name, o.Name)
			}
		default:
			return fmt.Errorf("target kind %q: option %q has unsupported kind %s", k.Name, o.Name, kindName(o.Kind))
		}
		if o.Default != nil && ir.KindOf(o.Default) != o.Kind {
			return fmt.Errorf("target kind %q: option %q default %v is not a %s", k.Name, o.Name, o.Default, o.Kind)
		}
	}
	if !validName(k.Name) {
		return fmt.Errorf("target kind %q: a kind name is letters, digits, '_', '-' and '.', starting with a letter", k.Name)
	}
	if _, isTag := r.Tags().Lookup(k.Name); isTag {
		return fmt.Errorf("target kind %q: the name is already a tag", k.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.kinds[k.Name]; dup {
		return fmt.Errorf("target kind %q is already registered", k.Name)
	}
	r.kinds[k.Name] = k
	return nil
}

// Lookup finds a kind by name.
func (r *Registry) Lookup(name string) (*Kind, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k, ok := r.kinds[name]
	return k, ok
}

// Kinds lists the registered kinds sorted by name.
func (r *Registry) Kinds() []*Kind {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Kind, 0, len(r.kinds))
	for _, k := range r.kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Default is the registry kiln's built-in kinds live in and the CLI parses
// against. Backends register their kinds into it (or into their own registry
// for tests).
var Default = NewRegistry()

// C is the host C target kind: generated C compiled by the system compiler.
var C = mustRegister(&Kind{
	Name:       "c",
	DeviceType: CPU,
	Keys:       []string{"cpu"},
	Doc:        "host code generated as C and built with the system C compiler",
	Host:       true,
	Options: []Option{
		{Name: "mcpu", Kind: ir.AttrString, Default: "native", Doc: "CPU to tune for, passed as -march (default native: this machine; use -mcpu=x86-64 for a portable artifact)"},
		{Name: "opt", Kind: ir.AttrInt, Default: int64(3), Doc: "C optimisation level (-O)"},
		{Name: "cflags", Kind: ir.AttrStrings, Doc: "extra C compiler flags"},
		{Name: "cc", Kind: ir.AttrString, Doc: "C compiler to use (default $CC or cc)"},
	},
})

// Built-in tags of the Default registry.
func init() {
	for _, t := range []Tag{
		{Name: "x86-avx512", Config: "c -mcpu=skylake-avx512", Doc: "x86-64 with AVX-512 (Skylake-SP and later)"},
		{Name: "x86-avx2", Config: "c -mcpu=haswell", Doc: "x86-64 with AVX2 and FMA (Haswell and later)"},
		{Name: "arm-cortex-a53", Config: "c -mcpu=cortex-a53", Doc: "64-bit Arm Cortex-A53 (a LITTLE core)"},
		{Name: "arm-cortex-a72", Config: "c -mcpu=cortex-a72", Doc: "64-bit Arm Cortex-A72 (a big core)"},
	} {
		if err := Default.Tags().Register(t); err != nil {
			panic(err)
		}
	}
}

func mustRegister(k *Kind) *Kind {
	if err := Default.Register(k); err != nil {
		panic(err)
	}
	return k
}
