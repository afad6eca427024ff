// Package uma is kiln's Universal Modular Accelerator interface (seed 001):
// the small, typed API with which a hardware team integrates an
// accelerator without learning the compiler's internals.
//
// A vendor makes a Backend with New, describes the accelerator through
// its Register* methods — target attributes, patterns of what to offload,
// graph passes per partitioning phase, operator strategies, TIR passes per
// phase, C code generation hooks — and calls Register, which turns the
// registrations into a target kind of kiln's (package targets) whose flow
// (package backend) has:
//
//   - Patterns and Supports for partitioning (package partition):
//     MergeComposite with the registered patterns, AnnotateTarget taking
//     their composites, MergeCompilerRegions unless turned off,
//     PartitionGraph, and the graph passes in their phases;
//   - a RelayToTIR hook lowering each partitioned function with kiln's
//     lowering and the registered operator strategies (ahead of the
//     built-in ones);
//   - TIRPasses adding the registered TIR passes to the pipeline that
//     lowers the accelerator's PrimFuncs (and no other);
//   - a TIRToRuntime hook generating C for those PrimFuncs with the
//     registered includes and ReplaceCallExtern hook, compiled into the
//     artifact's library together with the vendor's C sources.
//
// From then on `kiln compile -t "NAME, c"` offloads to the accelerator
// like to any other target. Backend.Partition runs the partitioning part
// alone, for a vendor who wants to look at what the patterns take.
//
// Where it sits:
//
//	ONNX → graph passes → partition (patterns, PrePartitioning … PostPartitioning1 passes)
//	     → RelayToTIR (uma: lower with the vendor's strategies) → TIR passes (+ vendor phases 0–3)
//	     → TIRToRuntime (uma: C with the vendor's includes / call_extern hook) → kiln_lib.so
package uma

import (
	"fmt"
	"github.com/kiln-dev/kiln/passconfig"
	"strings"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/partition"
	"github.com/kiln-dev/kiln/pattern"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
	tirtransform "github.com/kiln-dev/kiln/tir/transform"
)

// Graph pass phases, as UMA names them (aliases of target's).
const (
	PrePartitioning   = backend.PrePartitioning
	PostPartitioning0 = backend.PostPartitioning0
	PostPartitioning1 = backend.PostPartitioning1
)

// GraphPass is a vendor's module pass: it receives the accelerator's
// target (for its attributes) and the module, and returns the new module
// without modifying its input.
type GraphPass func(t *targets.Target, mod *graph.Module) (*graph.Module, error)

// TIRPass is a vendor's TIR pass: it receives the accelerator's target and
// one of its PrimFuncs and returns the new function (or f unchanged).
type TIRPass func(t *targets.Target, f *tir.PrimFunc) (*tir.PrimFunc, error)

// Predicate accepts a pattern's match (nil) or refuses it with a reason
// the partition report shows.
type Predicate func(m *pattern.Result) error

// SourceFile is a named C file or header a backend ships (the same type
// as backend.SourceFile, so UMA users need no other package).
type SourceFile = backend.SourceFile

// CodegenOptions customise the C generated for the accelerator's
// PrimFuncs.
type CodegenOptions struct {
	// Includes are added to the generated C's include lines, after the
	// standard ones: "<foo.h>" and "\"foo.h\"" as written, a bare name
	// quoted, a line starting with '#' verbatim (a #define, say).
	Includes []string
	// ReplaceCallExtern, when it returns ok, replaces the C of a
	// call_extern: it receives the extern's name and the C text of each
	// argument, and the target (for its attributes).
	ReplaceCallExtern func(t *targets.Target, name string, args []string) (code string, ok bool)
	// DeclaredExterns are extern functions declared by Includes (no
	// prototype is generated for their call_externs).
	DeclaredExterns []string
	// Sources are the vendor's C files and headers (the accelerator's
	// kernels or driver), compiled into the artifact's library; headers
	// among them can be included by name.
	Sources []SourceFile
	// CFlags and LDFlags are extra compiler and linker arguments.
	CFlags, LDFlags []string
	// Funcs are packed functions the Sources define that programs or the
	// vendor's tools look up at run time (runtime.Module GetFunction):
	// they join the library's function table.
	Funcs []string
}

// Backend is an accelerator integration under construction. Make one with
// New, register its parts, then call Register.
type Backend struct {
	// MergeCompilerRegions merges neighbouring offloaded calls into one
	// partitioned function (default true); false gives each composite a
	// function of its own.
	MergeCompilerRegions bool

	name, doc   string
	attrs       []targets.Option
	patterns    []pattern.Entry
	graphPasses []backend.GraphPass
	strategies  *strategy.Registry
	tirPasses   []tirPassEntry
	codegen     *CodegenOptions
	kind        *targets.Kind
}

type tirPassEntry struct {
	phase tirtransform.Phase
	name  string
	run   TIRPassContext
}

// PassContext is what a TIR pass registered with RegisterTIRPassContext
// receives besides the function: the accelerator's target and the
// compilation's pass configuration (TVM's PassContext: opt level,
// disabled passes and keys such as tir.disable_vectorize or
// tir.disable_assert, read with Config.Bool(passconfig.DisableAssert)).
type PassContext struct {
	Target *targets.Target
	Config *passconfig.Config
}

// TIRPassContext is a TIR pass that reads the pass configuration.
type TIRPassContext func(ctx PassContext, f *tir.PrimFunc) (*tir.PrimFunc, error)

// New starts a backend for the target kind name (what users write in -t)
// with a one-line description.
func New(name, doc string) *Backend {
	return &Backend{MergeCompilerRegions: true, name: name, doc: doc, strategies: strategy.NewOverlay(strategy.Default)}
}

// Name is the target kind's name.
func (b *Backend) Name() string { return b.name }

// Kind is the registered target kind, or nil before Register.
func (b *Backend) Kind() *targets.Kind { return b.kind }

// reserved are attribute names every target has.
var reserved = []string{"host", "keys", "model", "tag", "device", "libs"}

func (b *Backend) open(what string) error {
	if b.kind != nil {
		return fmt.Errorf("uma %s: %s after Register", b.name, what)
	}
	return nil
}

// RegisterTargetAttr declares a target attribute with its default, a
// string, an int or a bool; users set it in the target string
// (-t "NAME -dimension=16"). Empty, repeated and reserved names (host,
// keys, model, tag, device, libs) and other default types are errors.
func (b *Backend) RegisterTargetAttr(name string, def any) error {
	if err := b.open("RegisterTargetAttr"); err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("uma %s: RegisterTargetAttr: empty attribute name", b.name)
	}
	for _, r := range reserved {
		if name == r {
			return fmt.Errorf("uma %s: RegisterTargetAttr: %q is reserved (every target has it)", b.name, name)
		}
	}
	for _, o := range b.attrs {
		if o.Name == name {
			return fmt.Errorf("uma %s: RegisterTargetAttr: %q is already registered", b.name, name)
		}
	}
	o := targets.Option{Name: name}
	switch v := def.(type) {
	case string:
		o.Kind, o.Default = ir.AttrString, v
	case int:
		o.Kind, o.Default = ir.AttrInt, int64(v)
	case int64:
		o.Kind, o.Default = ir.AttrInt, v
	case bool:
		o.Kind, o.Default = ir.AttrBool, v
	default:
		return fmt.Errorf("uma %s: RegisterTargetAttr %q: default %v is a %T; want a string, an int or a bool", b.name, name, def, def)
	}
	b.attrs = append(b.attrs, o)
	return nil
}

// RegisterPattern adds a pattern of what the accelerator takes, named
// "<backend>.<name>" in the graph (the Composite attribute). Patterns are
// tried in registration order (the first has priority). predicate, when
// not nil, may refuse a match with a reason.
func (b *Backend) RegisterPattern(name string, p pattern.Pattern, predicate Predicate) error {
	if err := b.open("RegisterPattern"); err != nil {
		return err
	}
	if name == "" || p == nil {
		return fmt.Errorf("uma %s: RegisterPattern: a pattern needs a name and a pattern", b.name)
	}
	full := b.name + "." + name
	for _, e := range b.patterns {
		if e.Name == full {
			return fmt.Errorf("uma %s: RegisterPattern: %q is already registered", b.name, name)
		}
	}
	var check func(*pattern.Result) error
	if predicate != nil {
		check = func(m *pattern.Result) (err error) {
			// A vendor predicate that panics refuses the match, with the
			// panic as the reason, instead of crashing the compiler.
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("predicate of %s panicked: %v", full, p)
				}
			}()
			return predicate(m)
		}
	}
	b.patterns = append(b.patterns, pattern.Entry{Name: full, Pattern: p, Check: check})
	return nil
}

// RegisterGraphPass adds a graph pass to a partitioning phase
// (PrePartitioning, PostPartitioning0, PostPartitioning1); within a phase
// passes run in registration order.
func (b *Backend) RegisterGraphPass(phase backend.GraphPhase, name string, pass GraphPass) error {
	if err := b.open("RegisterGraphPass"); err != nil {
		return err
	}
	if phase < PrePartitioning || phase > PostPartitioning1 {
		return fmt.Errorf("uma %s: RegisterGraphPass %q: unknown phase %d (want PrePartitioning, PostPartitioning0 or PostPartitioning1)", b.name, name, int(phase))
	}
	if name == "" || pass == nil {
		return fmt.Errorf("uma %s: RegisterGraphPass: a pass needs a name and a function", b.name)
	}
	for _, p := range b.graphPasses {
		if p.Name == name {
			return fmt.Errorf("uma %s: RegisterGraphPass: %q is already registered", b.name, name)
		}
	}
	b.graphPasses = append(b.graphPasses, backend.GraphPass{Name: name, Phase: phase, Run: pass})
	return nil
}

// RegisterOperatorStrategy adds an implementation (compute and schedule)
// of an operator, used when lowering the accelerator's functions. A zero
// PLevel means strategy.PLevelVendor, above every built-in one.
func (b *Backend) RegisterOperatorStrategy(o *op.Op, impl strategy.Implementation) error {
	if err := b.open("RegisterOperatorStrategy"); err != nil {
		return err
	}
	if o == nil {
		return fmt.Errorf("uma %s: RegisterOperatorStrategy: no operator", b.name)
	}
	if impl.PLevel == 0 {
		impl.PLevel = strategy.PLevelVendor
	}
	if err := b.strategies.Add(o, strategy.ForKey(b.name), impl); err != nil {
		return fmt.Errorf("uma %s: RegisterOperatorStrategy: %w", b.name, err)
	}
	return nil
}

// RegisterTIRPass adds a TIR pass to phase 0–3 of the pipeline that lowers
// the accelerator's PrimFuncs (see package tir/transform for what each
// phase means); within a phase passes run in registration order, after
// the built-in passes of that phase.
func (b *Backend) RegisterTIRPass(phase tirtransform.Phase, name string, pass TIRPass) error {
	if pass == nil {
		return fmt.Errorf("uma %s: RegisterTIRPass: a pass needs a name and a function", b.name)
	}
	return b.registerTIRPass("RegisterTIRPass", phase, name, func(ctx PassContext, f *tir.PrimFunc) (*tir.PrimFunc, error) { return pass(ctx.Target, f) })
}

// RegisterTIRPassContext is RegisterTIRPass for a pass that reads the
// compilation's pass configuration (PassContext).
func (b *Backend) RegisterTIRPassContext(phase tirtransform.Phase, name string, pass TIRPassContext) error {
	return b.registerTIRPass("RegisterTIRPassContext", phase, name, pass)
}

func (b *Backend) registerTIRPass(api string, phase tirtransform.Phase, name string, pass TIRPassContext) error {
	if err := b.open(api); err != nil {
		return err
	}
	if phase < tirtransform.Phase0 || phase > tirtransform.Phase3 {
		return fmt.Errorf("uma %s: %s %q: phase %d is not 0–3", b.name, api, name, int(phase))
	}
	if name == "" || pass == nil {
		return fmt.Errorf("uma %s: %s: a pass needs a name and a function", b.name, api)
	}
	full := b.name + "." + name
	for _, p := range b.tirPasses {
		if p.name == full {
			return fmt.Errorf("uma %s: %s: %q is already registered", b.name, api, name)
		}
	}
	for _, p := range tirtransform.Builtins() {
		if p.Name == full {
			return fmt.Errorf("uma %s: %s: %q is a built-in pass", b.name, api, name)
		}
	}
	b.tirPasses = append(b.tirPasses, tirPassEntry{phase: phase, name: full, run: pass})
	return nil
}

// RegisterCodegen sets the code generation options for language lang;
// kiln generates C, so lang must be "c". Registering twice is an error.
func (b *Backend) RegisterCodegen(lang string, opts CodegenOptions) error {
	if err := b.open("RegisterCodegen"); err != nil {
		return err
	}
	if lang != "c" {
		return fmt.Errorf("uma %s: RegisterCodegen: language %q is not supported (kiln generates \"c\")", b.name, lang)
	}
	if b.codegen != nil {
		return fmt.Errorf("uma %s: RegisterCodegen: \"c\" is already registered", b.name)
	}
	for _, f := range opts.Sources {
		if f.Name == "" || strings.ContainsAny(f.Name, "/\\") {
			return fmt.Errorf("uma %s: RegisterCodegen: source file name %q must be a plain file name", b.name, f.Name)
		}
	}
	o := opts
	b.codegen = &o
	return nil
}

// Register creates the backend's target kind from its registrations and
// adds it to r (targets.Default for the kiln command). Registering a
// backend twice, or under the name of an existing kind such as "c", is an
// error; after Register the backend cannot change.
func (b *Backend) Register(r *targets.Registry) error {
	if b.kind != nil {
		return fmt.Errorf("uma %s: already registered", b.name)
	}
	if r == nil {
		return fmt.Errorf("uma %s: Register: no registry", b.name)
	}
	if _, dup := r.Lookup(b.name); dup {
		return fmt.Errorf("uma %s: a target kind %q already exists", b.name, b.name)
	}
	k := b.newKind()
	if err := r.Register(k); err != nil {
		return fmt.Errorf("uma %s: %w", b.name, err)
	}
	b.kind = k
	return nil
}

// Target returns a target of the backend's kind with default attributes
// (Register first).
func (b *Backend) Target() (*targets.Target, error) {
	if b.kind == nil {
		return nil, fmt.Errorf("uma %s: not registered", b.name)
	}
	return targets.New(b.kind, nil)
}

// Partition binds params (values of main's parameters, by name) into
// mod and runs the backend's partitioning: PrePartitioning passes,
// MergeComposite with the patterns, AnnotateTarget, MergeCompilerRegions
// (when enabled), PartitionGraph, then the PostPartitioning0 and
// PostPartitioning1 passes. It returns the partitioned module and the
// partition report. mod is not modified.
func (b *Backend) Partition(mod *graph.Module, params map[string]*tensor.Tensor) (*graph.Module, *partition.Report, error) {
	t, err := b.Target()
	if err != nil {
		return nil, nil, err
	}
	bound, err := bindParams(mod, params)
	if err != nil {
		return nil, nil, fmt.Errorf("uma %s: %w", b.name, err)
	}
	return partition.Partition(bound, []*targets.Target{t}, partition.Options{ModuleName: "default"})
}

// bindParams replaces main's parameters named in params by constants.
func bindParams(mod *graph.Module, params map[string]*tensor.Tensor) (*graph.Module, error) {
	if len(params) == 0 {
		return mod, nil
	}
	main := mod.Main()
	if main == nil {
		return nil, fmt.Errorf("module has no main function")
	}
	sub := map[graph.Expr]graph.Expr{}
	var keep []*graph.Var
	used := map[string]bool{}
	for _, p := range main.Params {
		v, ok := params[p.Name]
		if !ok {
			keep = append(keep, p)
			continue
		}
		if want, ok := p.Type().(*ir.TensorType); ok && (want.DType != v.DType || !want.Shape.Equal(v.Shape)) {
			return nil, fmt.Errorf("parameter %q is %v, but its value is %s %v", p.Name, want, v.DType, v.Shape)
		}
		sub[p] = graph.NewConstant(v)
		used[p.Name] = true
	}
	for name := range params {
		if !used[name] {
			return nil, fmt.Errorf("main has no parameter %q", name)
		}
	}
	body := graph.Rewrite(main.Body, func(e graph.Expr) graph.Expr {
		if r, ok := sub[e]; ok {
			return r
		}
		return e
	})
	out := mod.ShallowCopy()
	out.Funcs["main"] = &graph.Function{Params: keep, Body: body, Attrs: main.Attrs}
	if err := graph.InferTypes(out); err != nil {
		return nil, err
	}
	return out, nil
}
