// Package backend holds what a target kind plugs into kiln's compilation
// flow, as typed Go values: the flow hooks (RelayToRuntime, RelayToTIR,
// TIRToRuntime, ConstantUpdater), its part in partitioning (support
// predicate, composite patterns, graph passes per phase), the TIR passes
// it adds, and what it adds to the default C code generation. A kind
// (package targets) carries its Flow; the build driver (package driver)
// reads it with Of and calls the hooks where the pipeline runs them
// (`kiln compile --print-pipeline` shows where).
//
// The backends kiln ships live below this folder, one package each, and
// register their kinds themselves (Register functions): ccompiler (C
// source external codegen), dnnl (JSON codegen and oneDNN runtime, cgo
// behind a build tag), cblas (RelayToTIR into BLAS calls). Package uma
// builds a Flow from a vendor's registrations.
package backend

import (
	"fmt"
	"github.com/kiln-dev/kiln/passconfig"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/pattern"
	"github.com/kiln-dev/kiln/targets"
	tirtransform "github.com/kiln-dev/kiln/tir/transform"
)

// Flow is a kind's part in the compilation flow; the zero value is kiln's
// default flow with nothing offloaded. Set it as the kind's
// targets.Kind.Flow.
type Flow struct {
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
	// pipeline that lowers the PrimFuncs of target t (a target of the
	// kind), each in its phase after the built-ins of that phase, under
	// the compilation's pass configuration pc (its keys, such as
	// tir.disable_vectorize and tir.disable_assert; nil means the
	// defaults). Other PrimFuncs never see them.
	TIRPasses func(t *targets.Target, pc *passconfig.Config) []tirtransform.Pass
	// Unmeasured says that timing the kind's code on the compiling
	// machine tells nothing about the machine it is for (a
	// microcontroller's kernels compiled for the host only to check
	// them): measured partitioning is skipped for a compilation that
	// lists the kind, and partitioning is greedy.
	Unmeasured bool
	// OpenMP says that the kind's runtime modules run OpenMP parallel
	// regions (oneDNN's primitives run on libgomp). A compilation that
	// gives the kind functions then runs the host library's parallel
	// loops on OpenMP teams as well, instead of kiln's own thread pool:
	// threads of two pools, each spinning while it waits for work,
	// would take the cores from each other between the two kinds' kernels.
	OpenMP bool
}

// noFlow is the flow of kinds without one.
var noFlow = &Flow{}

// Of returns k's flow: its Flow when that is a *Flow, else an empty one
// (kiln's default flow). It never returns nil.
func Of(k *targets.Kind) *Flow {
	if k != nil {
		if f, ok := k.Flow.(*Flow); ok && f != nil {
			return f
		}
	}
	return noFlow
}

// HookNames lists the hooks the flow registers, in flow order.
func (f *Flow) HookNames() []string {
	var out []string
	if f.Hooks.RelayToTIR != nil {
		out = append(out, HookRelayToTIR)
	}
	if f.Hooks.RelayToRuntime != nil {
		out = append(out, HookRelayToRuntime)
	}
	if f.Hooks.ConstantUpdater != nil {
		out = append(out, HookConstantUpdater)
	}
	if f.Hooks.TIRToRuntime != nil {
		out = append(out, HookTIRToRuntime)
	}
	return out
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
	Run   func(t *targets.Target, mod *graph.Module) (*graph.Module, error)
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
