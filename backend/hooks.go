package backend

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
)

// Hooks are a kind's customisations of the compilation flow, held as Go
// function values (never looked up by name). A nil hook means the default
// flow. The build driver (package driver) consults them in the order of
// seed 000 (RelayToTIR, then RelayToRuntime, before the default
// lowering), each kind once, in the order of the compilation's target
// list:
//
//  1. RelayToTIR, once per target, on the whole graph module, after
//     partitioning, device planning and fusion;
//  2. RelayToRuntime, per function the target still owns (see
//     HookContext.Owns; a function RelayToTIR lowered is no longer owned);
//  3. ConstantUpdater, once every RelayToRuntime hook has run, per
//     function RelayToRuntime compiled, to collect the constants its
//     runtime module needs;
//  4. the default lowering (LowerTE) of what remains, the TIR passes,
//     then TIRToRuntime on the PrimFuncs whose "target" attribute names
//     the kind, instead of the default C code generation.
type Hooks struct {
	// RelayToRuntime compiles one partitioned function (its Compiler
	// attribute or placement names the target) straight to a runtime
	// module exporting symbol: the target owns the whole flow, as external
	// code generators do.
	RelayToRuntime func(ctx *HookContext, fn *graph.Function, symbol string) (runtime.Module, error)

	// RelayToTIR is a module pass: it turns the target's functions in mod
	// into PrimFuncs added to prims, and replaces their calls so that the
	// normal flow continues around them. The contract (ReplaceWithPrimFunc
	// implements it; use it):
	//
	//   - find the functions the target owns: module-level functions and
	//     function literals called from mod's functions whose Compiler
	//     attribute is the kind name, or whose FuncAttrTarget placement
	//     resolves to ctx.Target (OwnedFunctions lists them);
	//   - for each, add to prims a PrimFunc named symbol (the function's
	//     global_symbol attribute, else its module name, else a fresh
	//     "<kind>_<n>"), with attributes global_symbol=symbol and
	//     target=<kind name>, taking its inputs' buffers then its outputs'
	//     buffers, in the flattened order of the function's parameters and
	//     result (the calling convention of LowerTE's PrimFuncs);
	//   - rewrite every call of the function, in every function of mod, into
	//     a call of graph.NewGlobalVar(symbol) with the same arguments;
	//   - leave mod.Funcs[symbol] holding the original function (its
	//     signature keeps type inference and verification working) with
	//     attributes global_symbol=symbol and FuncAttrLowered=true, and
	//     remove the function's old module-level name if it differed;
	//   - leave mod type-checked.
	//
	// The driver then recognises a lowered call as a call of a GlobalVar
	// whose name is a PrimFunc of prims (LoweredPrimFunc), binds it to that
	// PrimFunc, and never hands a FuncAttrLowered function to another
	// hook or to LowerTE. Functions the hook leaves alone continue in the
	// default flow (or go to RelayToRuntime).
	RelayToTIR func(ctx *HookContext, mod *graph.Module, prims *tir.Module) error

	// TIRToRuntime builds the target's PrimFuncs (those with attribute
	// target=<kind name>) into a runtime module, replacing the default
	// code generation for them.
	TIRToRuntime func(ctx *HookContext, prims *tir.Module) (runtime.Module, error)

	// ConstantUpdater returns the constants the runtime module built for
	// fn (exported as symbol) needs, under the names that module will look
	// them up by; the driver stores them with the model's parameters.
	ConstantUpdater func(fn *graph.Function, symbol string) (map[string]*tensor.Tensor, error)
}

// Hook names, as HookNames and Describe report them.
const (
	HookRelayToRuntime  = "RelayToRuntime"
	HookRelayToTIR      = "RelayToTIR"
	HookTIRToRuntime    = "TIRToRuntime"
	HookConstantUpdater = "ConstantUpdater"
)

// HookContext is what a hook receives besides its IR.
type HookContext struct {
	// Target is the target instance the hook runs for; read its
	// attributes with Target.Str, Int, Bool and Strings.
	Target *targets.Target
	// Host is the compilation's host target.
	Host *targets.Target
	// ScratchDir is a directory private to this hook call's compilation
	// where the hook may write build outputs; it exists and the driver
	// removes it (or keeps it for inspection) afterwards.
	ScratchDir string
	// Labels resolves FuncAttrTarget placements; nil when the compilation
	// has no labels.
	Labels *targets.Labels
	// PlacedOn reports the target device planning placed the calls of a
	// function on (nil: not placed, or on no target in particular). The
	// build driver sets it, so that a kind with hooks owns what the user
	// placed on it (a placement file, on_device annotations) as well as
	// what partitioning gave it.
	PlacedOn func(fn *graph.Function) *targets.Target
}

// Function attributes the target hooks read and write.
const (
	// FuncAttrTarget places a graph function on a target: a label or
	// "label:device_id" resolved through HookContext.Labels.
	FuncAttrTarget = "Target"
	// FuncAttrLowered marks a module function whose body RelayToTIR has
	// replaced by a PrimFunc of the same name.
	FuncAttrLowered = "LoweredToTIR"
)

// Owns reports whether fn is for this context's target: its Compiler
// attribute is the kind name, its FuncAttrTarget label resolves to a
// target Equal to ctx.Target, or device planning placed it on ctx.Target
// (PlacedOn). Functions already lowered are not owned.
func (ctx *HookContext) Owns(fn *graph.Function) bool {
	if fn == nil || ctx.Target == nil || fn.BoolAttr(FuncAttrLowered) {
		return false
	}
	if fn.StrAttr(graph.AttrCompiler) == ctx.Target.Kind.Name {
		return true
	}
	if place := fn.StrAttr(FuncAttrTarget); place != "" && ctx.Labels != nil {
		if t, _, err := ctx.Labels.Lookup(place); err == nil && t.Equal(ctx.Target) {
			return true
		}
	}
	if ctx.PlacedOn != nil && fn.StrAttr(graph.AttrCompiler) == "" {
		if t := ctx.PlacedOn(fn); t != nil && t.Equal(ctx.Target) {
			return true
		}
	}
	return false
}

// OwnedFunction is a function of a module that a target owns.
type OwnedFunction struct {
	// Name is the module-level name, or "" for a function literal called
	// directly.
	Name string
	// Symbol is the name the lowered code is exported as (see
	// Hooks.RelayToTIR).
	Symbol string
	// Fn is the function.
	Fn *graph.Function
}

// OwnedFunctions lists the functions of mod that ctx's target owns:
// module-level functions in name order, then function literals called
// from the bodies of mod's functions in post order (each literal once).
// Symbols are unique within mod and prims (prims may be nil).
func OwnedFunctions(ctx *HookContext, mod *graph.Module, prims *tir.Module) []OwnedFunction {
	var out []OwnedFunction
	taken := map[string]bool{}
	for _, name := range mod.Names() {
		taken[name] = true
	}
	isTaken := func(s string) bool {
		return taken[s] || (prims != nil && prims.Lookup(s) != nil)
	}
	for _, name := range mod.Names() {
		fn := mod.Funcs[name]
		if name == "main" || !ctx.Owns(fn) {
			continue
		}
		sym := fn.StrAttr(graph.AttrGlobalSymbol)
		if sym == "" {
			sym = name
		}
		taken[sym] = true
		out = append(out, OwnedFunction{Name: name, Symbol: sym, Fn: fn})
	}
	seen := map[*graph.Function]bool{}
	n := 0
	for _, name := range mod.Names() {
		graph.PostOrder(mod.Funcs[name].Body, func(e graph.Expr) {
			call, ok := e.(*graph.Call)
			if !ok {
				return
			}
			fn, ok := call.Fn.(*graph.Function)
			if !ok || seen[fn] || !ctx.Owns(fn) {
				return
			}
			seen[fn] = true
			sym := fn.StrAttr(graph.AttrGlobalSymbol)
			if sym == "" || isTaken(sym) {
				for {
					sym = fmt.Sprintf("%s_%d", ctx.Target.Kind.Name, n)
					n++
					if !isTaken(sym) {
						break
					}
				}
			}
			taken[sym] = true
			out = append(out, OwnedFunction{Symbol: sym, Fn: fn})
		})
	}
	return out
}

// ReplaceWithPrimFunc carries out the RelayToTIR contract for one owned
// function: it names pf of.Symbol (setting its global_symbol and, unless
// set, its target attribute to the kind name), adds it to prims, rewrites
// every call of of.Fn in mod into a call of @Symbol, installs the
// FuncAttrLowered stub as mod.Funcs[Symbol] and re-infers types. It
// returns the number of calls rewritten.
func ReplaceWithPrimFunc(ctx *HookContext, mod *graph.Module, of OwnedFunction, pf *tir.PrimFunc, prims *tir.Module) (int, error) {
	if err := checkSymbol(ctx, mod, of); err != nil {
		return 0, err
	}
	pf = pf.Copy()
	pf.Name = of.Symbol
	pf.Attrs[tir.AttrGlobalSymbol] = of.Symbol
	if pf.Target == nil {
		pf.Target = ctx.Target
	}
	if err := prims.Add(pf); err != nil {
		return 0, fmt.Errorf("target %s: %w", ctx.Target.Kind.Name, err)
	}
	return ReplaceWithSymbol(ctx, mod, of)
}

func checkSymbol(ctx *HookContext, mod *graph.Module, of OwnedFunction) error {
	if of.Symbol == "" || of.Symbol == "main" {
		return fmt.Errorf("target %s: cannot lower a function to symbol %q", ctx.Target.Kind.Name, of.Symbol)
	}
	if old, ok := mod.Funcs[of.Symbol]; ok && old != of.Fn {
		return fmt.Errorf("target %s: module already has a function @%s", ctx.Target.Kind.Name, of.Symbol)
	}
	return nil
}

// ReplaceWithSymbol rewrites every call of the owned function in mod into
// a call of @Symbol with the same arguments, installs the FuncAttrLowered
// stub as mod.Funcs[Symbol] (the original function, keeping its signature
// for type inference) and re-infers types. The symbol is then provided
// by compiled code: a PrimFunc (ReplaceWithPrimFunc) or a runtime module
// a RelayToRuntime hook built. It returns the number of calls rewritten.
func ReplaceWithSymbol(ctx *HookContext, mod *graph.Module, of OwnedFunction) (int, error) {
	if err := checkSymbol(ctx, mod, of); err != nil {
		return 0, err
	}
	calls := 0
	rewrite := func(e graph.Expr) graph.Expr {
		call, ok := e.(*graph.Call)
		if !ok || call.Op != nil {
			return e
		}
		match := call.Fn == graph.Expr(of.Fn)
		if g, isG := call.Fn.(*graph.GlobalVar); isG && of.Name != "" && g.Name == of.Name {
			match = true
		}
		if !match {
			return e
		}
		calls++
		nc := graph.NewFuncCall(graph.NewGlobalVar(of.Symbol), call.Args)
		nc.Span = call.Span
		return nc
	}
	names := mod.Names()
	for _, name := range names {
		if name == of.Name {
			continue
		}
		f := mod.Funcs[name]
		body := graph.Rewrite(f.Body, rewrite)
		if body != f.Body {
			mod.Funcs[name] = &graph.Function{Params: f.Params, Body: body, RetType: f.RetType, Attrs: f.Attrs}
		}
	}
	stub := &graph.Function{Params: of.Fn.Params, Body: of.Fn.Body, RetType: of.Fn.RetType, Attrs: of.Fn.Attrs.Clone()}
	stub.Attrs[graph.AttrGlobalSymbol] = of.Symbol
	stub.Attrs[FuncAttrLowered] = true
	if of.Name != "" {
		delete(mod.Funcs, of.Name)
	}
	mod.Funcs[of.Symbol] = stub
	if err := graph.InferTypes(mod); err != nil {
		return calls, fmt.Errorf("target %s: after lowering @%s: %w", ctx.Target.Kind.Name, of.Symbol, err)
	}
	return calls, nil
}

// LoweredPrimFunc returns the PrimFunc a call was lowered to by a
// RelayToTIR hook: the call's callee is a GlobalVar naming a PrimFunc of
// prims.
func LoweredPrimFunc(call *graph.Call, prims *tir.Module) (*tir.PrimFunc, bool) {
	g, ok := call.Fn.(*graph.GlobalVar)
	if !ok || prims == nil {
		return nil, false
	}
	pf := prims.Lookup(g.Name)
	return pf, pf != nil
}
