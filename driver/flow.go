package driver

import (
	"fmt"
	"os"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/device"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/passconfig"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
	tirtransform "github.com/kiln-dev/kiln/tir/transform"
)

// lowered is a compilation after every graph-level step: the planned
// module whose main the executor runs, the TIR of every target, the
// runtime modules the targets' RelayToRuntime hooks built and the
// constants they need.
type lowered struct {
	cfg *device.CompilationConfig
	// mod is the final module: planned, with every primitive call bound.
	mod *graph.Module
	// callee names the compiled function of each call of mod's main that
	// LowerTE lowered (calls of GlobalVars name theirs themselves).
	callee map[*graph.Call]string
	// prims holds the PrimFuncs of every target (RelayToTIR and LowerTE)
	// after the TIR passes.
	prims *tir.Module
	// external are the modules RelayToRuntime hooks returned, by symbol.
	external []externalModule
	// consts are the constants ConstantUpdater hooks asked for.
	consts map[string]*tensor.Tensor
	impls  map[string]string
}

// externalModule is one runtime module a hook built.
type externalModule struct {
	target *targets.Target
	module runtime.Module
	// symbols it provides to the executor (RelayToRuntime), or nil.
	symbols []string
}

// hookEnv is what every hook call of one compilation shares.
type hookEnv struct {
	cfg     *device.CompilationConfig
	labels  *targets.Labels
	scratch string // root of the hooks' scratch directories
	placed  map[*graph.Function]*targets.Target
}

// context makes the HookContext of one hook call for t, with a fresh
// scratch directory.
func (h *hookEnv) context(t *targets.Target) (*backend.HookContext, error) {
	dir, err := os.MkdirTemp(h.scratch, t.Kind.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("build: scratch directory for target %s: %w", t.Kind.Name, err)
	}
	return &backend.HookContext{
		Target: t, Host: h.cfg.Host, ScratchDir: dir, Labels: h.labels,
		PlacedOn: func(fn *graph.Function) *targets.Target { return h.placed[fn] },
	}, nil
}

// compiledFunction is a function a RelayToRuntime hook compiled.
type compiledFunction struct {
	target *targets.Target
	fn     *graph.Function
	symbol string
}

// runRelayToRuntime gives every target with a RelayToRuntime hook the
// functions it still owns (RelayToTIR ran before it), records the
// modules it returns, replaces the calls by calls of the modules'
// symbols and returns what it compiled, for constant updating.
func runRelayToRuntime(env *hookEnv, mod *graph.Module, prims *tir.Module, res *lowered) ([]compiledFunction, error) {
	var out []compiledFunction
	for _, t := range env.cfg.Primitives {
		hooks := backend.Of(t.Kind).Hooks
		if hooks.RelayToRuntime == nil {
			continue
		}
		ctx, err := env.context(t)
		if err != nil {
			return nil, err
		}
		for _, of := range backend.OwnedFunctions(ctx, mod, prims) {
			m, err := hooks.RelayToRuntime(ctx, of.Fn, of.Symbol)
			if err != nil {
				return nil, fmt.Errorf("target %s: RelayToRuntime of @%s: %w", t.Kind.Name, of.Symbol, err)
			}
			if m == nil {
				return nil, fmt.Errorf("target %s: RelayToRuntime of @%s returned no module", t.Kind.Name, of.Symbol)
			}
			if _, err := backend.ReplaceWithSymbol(ctx, mod, of); err != nil {
				return nil, err
			}
			res.external = append(res.external, externalModule{target: t, module: m, symbols: []string{of.Symbol}})
			out = append(out, compiledFunction{target: t, fn: of.Fn, symbol: of.Symbol})
		}
	}
	return out, nil
}

// updateConstants asks the ConstantUpdater of each compiled function's
// target for the constants its runtime module needs and collects them
// in res.consts (a name defined twice, or a nil value, is an error).
func updateConstants(compiled []compiledFunction, res *lowered) error {
	for _, c := range compiled {
		hook := backend.Of(c.target.Kind).Hooks.ConstantUpdater
		if hook == nil {
			continue
		}
		consts, err := hook(c.fn, c.symbol)
		if err != nil {
			return fmt.Errorf("target %s: ConstantUpdater of @%s: %w", c.target.Kind.Name, c.symbol, err)
		}
		for name, v := range consts {
			if _, dup := res.consts[name]; dup {
				return fmt.Errorf("target %s: ConstantUpdater of @%s: constant %q is already defined", c.target.Kind.Name, c.symbol, name)
			}
			if v == nil {
				return fmt.Errorf("target %s: ConstantUpdater of @%s: constant %q is nil", c.target.Kind.Name, c.symbol, name)
			}
			res.consts[name] = v
		}
	}
	return nil
}

// deviceCopyOf returns the device_copy call a call stands for: the call
// itself, or the lone device_copy a fused primitive function wraps.
func deviceCopyOf(c *graph.Call) *graph.Call {
	if c.Op == op.DeviceCopy {
		return c
	}
	fn, ok := c.Fn.(*graph.Function)
	if !ok || len(fn.Params) != 1 {
		return nil
	}
	inner, ok := fn.Body.(*graph.Call)
	if ok && inner.Op == op.DeviceCopy && len(inner.Args) == 1 && inner.Args[0] == fn.Params[0] {
		return inner
	}
	return nil
}

// checkBound makes sure every call of main has compiled code: a
// LowerTE function, a hook's PrimFunc or a RelayToRuntime symbol, or is
// a device copy. A function an external compiler was meant to take
// (Compiler attribute) but no hook took is an error naming the compiler.
func checkBound(mod *graph.Module, res *lowered) error {
	ext := map[string]bool{}
	for _, m := range res.external {
		for _, s := range m.symbols {
			ext[s] = true
		}
	}
	var err error
	graph.PostOrder(mod.Main().Body, func(e graph.Expr) {
		c, ok := e.(*graph.Call)
		if !ok || err != nil {
			return
		}
		if _, ok := res.callee[c]; ok || deviceCopyOf(c) != nil {
			return
		}
		switch fn := c.Fn.(type) {
		case *graph.GlobalVar:
			if ext[fn.Name] {
				return
			}
			if _, ok := backend.LoweredPrimFunc(c, res.prims); ok {
				return
			}
			if g := mod.Funcs[fn.Name]; g != nil && g.StrAttr(graph.AttrCompiler) != "" {
				comp := g.StrAttr(graph.AttrCompiler)
				err = fmt.Errorf("call of @%s: function for external compiler %q: no target of kind %q with a RelayToTIR or RelayToRuntime hook took it (targets: %v)", fn.Name, comp, comp, targetNames(res.cfg))
				return
			}
			err = fmt.Errorf("call of @%s: no target produced code for it", fn.Name)
		case *graph.Function:
			if comp := fn.StrAttr(graph.AttrCompiler); comp != "" {
				err = fmt.Errorf("%s: function for external compiler %q: no target of kind %q with a RelayToTIR or RelayToRuntime hook took it (targets: %v)", graph.Describe(c), comp, comp, targetNames(res.cfg))
				return
			}
			err = fmt.Errorf("%s was not lowered", graph.Describe(c))
		default:
			err = fmt.Errorf("%s is not inside a primitive function", graph.Describe(c))
		}
	})
	return err
}

// funcTarget returns the compilation's target that compiles f: the
// configuration's own target f.Target is (CompilationConfig.OwnTarget),
// or nil for a function without a target (the host's). A target that is
// not among the compilation's is an error naming the function.
func funcTarget(cfg *device.CompilationConfig, f *tir.PrimFunc) (*targets.Target, error) {
	if f.Target == nil {
		return nil, nil
	}
	if t := cfg.OwnTarget(f.Target); t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("PrimFunc %s is for target %q, which is not among the compilation's targets %v", f.Name, f.Target.Labelled(), targetNames(cfg))
}

func targetNames(cfg *device.CompilationConfig) []string {
	out := make([]string, len(cfg.Primitives))
	for i, t := range cfg.Primitives {
		out[i] = t.String()
	}
	return out
}

// runTIRPasses runs the TIR pipeline: the built-in passes on every
// PrimFunc, plus, on the PrimFuncs of a target whose kind has TIRPasses,
// the passes the kind adds for that target.
func runTIRPasses(cfg *device.CompilationConfig, pc *passconfig.Config, prims *tir.Module) (*tir.Module, error) {
	groups := map[*targets.Target]*tir.Module{}
	rest := &tir.Module{}
	for _, f := range prims.Funcs() {
		owner, err := funcTarget(cfg, f)
		if err != nil {
			return nil, err
		}
		if owner != nil && backend.Of(owner.Kind).TIRPasses == nil {
			owner = nil
		}
		g := rest
		if owner != nil {
			if g = groups[owner]; g == nil {
				g = &tir.Module{}
				groups[owner] = g
			}
		}
		if err := g.Add(f); err != nil {
			return nil, err
		}
	}
	if len(groups) == 0 {
		out, err := newTIRPipeline(pc, vectorBits(cfg.Host)).Run(prims)
		if err != nil {
			return nil, fmt.Errorf("TIR passes: %w", err)
		}
		return out, nil
	}
	out := &tir.Module{}
	run := func(p *tirtransform.Pipeline, m *tir.Module, who string) error {
		if m.Len() == 0 {
			return nil
		}
		done, err := p.Run(m)
		if err != nil {
			return fmt.Errorf("TIR passes%s: %w", who, err)
		}
		for _, f := range done.Funcs() {
			if err := out.Add(f); err != nil {
				return err
			}
		}
		return nil
	}
	if err := run(newTIRPipeline(pc, vectorBits(cfg.Host)), rest, ""); err != nil {
		return nil, err
	}
	for _, t := range cfg.Primitives {
		g := groups[t]
		if g == nil {
			continue
		}
		p := newTIRPipeline(pc, vectorBits(t))
		for _, pass := range backend.Of(t.Kind).TIRPasses(t, pc) {
			if err := p.Register(pass); err != nil {
				return nil, fmt.Errorf("target %s: %w", t.Kind.Name, err)
			}
		}
		if err := run(p, g, " of target "+t.Kind.Name); err != nil {
			return nil, err
		}
	}
	return out, nil
}
