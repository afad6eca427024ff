package driver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/backend"
	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/device"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/transform"
	"github.com/kiln-dev/kiln/lower"
	"github.com/kiln-dev/kiln/partition"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
)

// A Stage is one named step of a compilation: a typed function over the
// compile state. The stages of one compilation form its Pipeline, built
// from the targets and options (NewPipeline), printed by `kiln compile
// --print-pipeline`, and run in order by Compile, which times each one,
// records the sizes of the IR it leaves, verifies that IR (Config.Verify)
// and writes it out (Config.DumpDir).
type Stage struct {
	// Name is the stage's name ("graph-passes").
	Name string
	// Doc says in one line what the stage does.
	Doc string
	// Steps are the passes or target hooks that run inside the stage, in
	// order ("fold_constant", "dnnl.RelayToRuntime").
	Steps []string
	// Run performs the stage.
	Run func(ctx context.Context, s *state) error
}

// Pipeline is the ordered stage list of one compilation.
type Pipeline struct {
	Stages []Stage
}

// String prints the pipeline one stage per line, numbered as the dump
// files are, with the steps that run inside each.
func (p *Pipeline) String() string {
	var b strings.Builder
	for i, st := range p.Stages {
		fmt.Fprintf(&b, "%02d %-16s %s\n", i+1, st.Name, st.Doc)
		if len(st.Steps) > 0 {
			fmt.Fprintf(&b, "   %-16s %s\n", "", strings.Join(st.Steps, " → "))
		}
	}
	return b.String()
}

// StageStats is what Compile records of one stage: its wall time and the
// size of the IR it left.
type StageStats struct {
	Name string
	Time time.Duration
	// GraphCalls counts the operator and function calls of main (0 once
	// the graph is no longer the stage's output).
	GraphCalls int
	// PrimFuncs counts the TIR functions.
	PrimFuncs int
	// CBytes is the size of the generated C.
	CBytes int
}

// state is one compilation in progress: what the stages read and write.
type state struct {
	cfg         Config
	outputNames []string
	scratch     string // the hooks' scratch root
	tmp         string // the artifact being written
	res         *Result

	mod *graph.Module // the graph: imported, then after each graph stage
	// planned says mod's device plan is current (from the plan-devices
	// stage on), so --verify checks it (device.VerifyPlan).
	planned bool
	ccfg    *device.CompilationConfig
	// implied are the targets added for Compiler attributes of an
	// already partitioned module (Config.Kinds): hooks only.
	implied []*targets.Target
	report  *partition.Report
	env     *hookEnv
	low     *lowered

	prog   *execProgram
	gjText []byte // prog.graph as graph.json

	src       *cgen.Source
	others    []targetSource // the C of the other code-generating CPU targets
	bopts     cgen.BuildOptions
	hookMods  []externalModule
	paramsBin []byte // the weights encoded, for LinkParams (linked into the library)
	// paramsHash is the SHA-256 of params.bin when the link stage wrote
	// it (beside the C compiler), "" when packaging is to write it.
	paramsHash string
	aot        *aotBuild
}

// NewPipeline builds the stage list of a compilation with configuration
// cfg: the graph passes (with partitioning when an external code
// generator is among the targets, and device planning before fusion),
// the target hooks of the targets that have them, lowering and the TIR
// passes, then code generation, linking and packaging for the chosen
// executor.
func NewPipeline(cfg Config) (*Pipeline, error) {
	tgts := cfg.Targets
	if len(tgts) == 0 {
		tgts = []*targets.Target{cfg.Host}
	}
	var ext, r2rt, r2tir, cu, t2rt, tirp, tirk []string
	for _, t := range tgts {
		k := t.Kind
		if backend.Of(k).Supports != nil {
			ext = append(ext, k.Name)
		}
		if backend.Of(k).Hooks.RelayToRuntime != nil {
			r2rt = append(r2rt, k.Name+".RelayToRuntime")
		}
		if backend.Of(k).Hooks.ConstantUpdater != nil {
			cu = append(cu, k.Name+".ConstantUpdater")
		}
		if backend.Of(k).Hooks.RelayToTIR != nil {
			r2tir = append(r2tir, k.Name+".RelayToTIR")
		}
		if backend.Of(k).Hooks.TIRToRuntime != nil {
			t2rt = append(t2rt, k.Name+".TIRToRuntime")
		}
		if backend.Of(k).TIRPasses != nil {
			tirk = append(tirk, k.Name+".TIRPasses")
		}
	}
	var part *transform.Pass
	if len(ext) > 0 {
		part = &transform.Pass{Name: "partition", Required: true}
	}
	gp := graphPasses(cfg.PassConfig, part, cfg.Host, tgts)
	if err := checkDisabled(cfg.PassConfig, gp, tgts); err != nil {
		return nil, err
	}
	var graphSteps []string
	for _, p := range gp {
		if !skipPass(cfg.PassConfig, p) {
			graphSteps = append(graphSteps, p.Name)
		}
	}
	for _, p := range newTIRPipeline(cfg.PassConfig, 0).Passes() {
		tirp = append(tirp, p.Name)
	}
	p := &Pipeline{Stages: []Stage{
		{Name: "prepare", Doc: "placement rules, the targets' devices and the compilation config (device.Prepare)", Run: stagePrepare},
		{Name: "graph-passes", Doc: "graph optimisation, partitioning for external code generators, device planning, fusion", Steps: graphSteps, Run: stageGraphPasses},
		{Name: "plan-devices", Doc: "the program's outputs and the device of every fused call (device.PlanDevices)", Run: stagePlan},
		{Name: "target-hooks", Doc: "the targets' graph-level hooks in the seeds' order: RelayToTIR, RelayToRuntime, then constant updating, each kind once, in target-list order", Steps: append(append(r2tir, r2rt...), cu...), Run: stageTargetHooks},
		{Name: "lower", Doc: "every remaining primitive function to TIR for its planned target (LowerTE)", Run: stageLower},
		{Name: "tir-passes", Doc: "the TIR pass pipeline, plus the passes target kinds add for their PrimFuncs", Steps: append(tirp, tirk...), Run: stageTIRPasses},
	}}
	switch cfg.Executor {
	case "", ExecutorGraph:
		p.Stages = append(p.Stages,
			Stage{Name: "executor", Doc: "the graph executor's program (graph.json) and parameters", Run: stageExecutor},
			Stage{Name: "codegen", Doc: "C for the host's PrimFuncs; TIRToRuntime hooks for their targets'", Steps: t2rt, Run: stageCodegen},
			Stage{Name: "link", Doc: "one shared library of the generated C and every C source module (the C compiler)", Run: stageLink},
			Stage{Name: "package", Doc: "metadata.json with content hashes, the artifact published atomically", Run: stagePackage})
	case ExecutorAOT:
		p.Stages = append(p.Stages,
			Stage{Name: "lift-workspaces", Doc: "scratch buffers lifted into parameters, for static memory planning", Run: stageLiftWorkspaces},
			Stage{Name: "executor", Doc: "the program's calls, in graph.json form, as the AOT program reads them", Run: stageExecutor},
			Stage{Name: "codegen", Doc: "the AOT C project: host C, C source modules, memory plan, run function, Makefile", Steps: t2rt, Run: stageAOTCodegen},
			Stage{Name: "link", Doc: "the project's test program (the C compiler, -Werror)", Run: stageAOTLink},
			Stage{Name: "package", Doc: "metadata.json with content hashes, the artifact published atomically", Run: stagePackage})
	default:
		return nil, fmt.Errorf("build: unknown executor %q (want %s or %s)", cfg.Executor, ExecutorGraph, ExecutorAOT)
	}
	return p, nil
}

// run runs the stages on s, checking ctx before each, recording their
// statistics, verifying and dumping the IR after each as cfg asks.
func (p *Pipeline) run(ctx context.Context, s *state) error {
	for i, st := range p.Stages {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("build: %s: %w", st.Name, err)
		}
		t0 := time.Now()
		if err := st.Run(ctx, s); err != nil {
			return err
		}
		stats := StageStats{Name: st.Name, Time: time.Since(t0)}
		s.measure(&stats)
		s.res.Stages = append(s.res.Stages, stats)
		if w := s.cfg.Progress; w != nil {
			fmt.Fprintf(w, "  %-22s %v\n", st.Name, stats.Time.Round(time.Microsecond))
		}
		if s.cfg.Verify {
			if err := s.verify(); err != nil {
				return fmt.Errorf("build: verifying after stage %s: %w", st.Name, err)
			}
		}
		if s.cfg.DumpDir != "" && (s.cfg.DumpAfter == "" || s.cfg.DumpAfter == st.Name) {
			if err := s.dump(i+1, st.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// StageNames lists the names of the stages pipelines may have, for
// checking --dump-after.
func StageNames() []string {
	return []string{"prepare", "graph-passes", "plan-devices", "target-hooks", "lower", "tir-passes", "lift-workspaces", "executor", "codegen", "link", "package"}
}

// measure fills the IR sizes of stats from the state.
func (s *state) measure(stats *StageStats) {
	if s.src != nil {
		stats.CBytes = len(s.src.Code)
	}
	for _, o := range s.others {
		stats.CBytes += len(o.src.Code)
	}
	if s.low != nil && s.low.prims != nil {
		stats.PrimFuncs = s.low.prims.Len()
	}
	if s.mod != nil && s.mod.Main() != nil {
		graph.PostOrder(s.mod.Main().Body, func(e graph.Expr) {
			if _, ok := e.(*graph.Call); ok {
				stats.GraphCalls++
			}
		})
	}
}

// verify checks the IR the state holds: the graph (types, well-formed
// functions, devices), the TIR functions.
func (s *state) verify() error {
	if s.mod != nil {
		if err := transform.Verify(s.mod); err != nil {
			return err
		}
		if s.planned {
			if err := device.VerifyPlan(s.mod); err != nil {
				return err
			}
		}
	}
	if s.low != nil && s.low.prims != nil {
		if err := tir.VerifyModule(s.low.prims); err != nil {
			return err
		}
	}
	return nil
}

// dump writes the IR after stage n to cfg.DumpDir/NN-name.txt: the graph
// module, the TIR module once there is one, and the generated C once
// there is some.
func (s *state) dump(n int, name string) error {
	if err := os.MkdirAll(s.cfg.DumpDir, 0o755); err != nil {
		return fmt.Errorf("build: --dump-dir: %w", err)
	}
	var b strings.Builder
	switch {
	case s.src != nil:
		b.WriteString(s.src.Code)
		for _, o := range s.others {
			fmt.Fprintf(&b, "\n/* ---- target %s ---- */\n", strings.ReplaceAll(o.target.Labelled(), "*/", "* /"))
			b.WriteString(o.src.Code)
		}
	case s.low != nil && s.low.prims != nil && s.low.prims.Len() > 0 && name != "target-hooks":
		b.WriteString(s.low.prims.String())
	case s.mod != nil:
		b.WriteString(s.mod.String())
	}
	p := filepath.Join(s.cfg.DumpDir, fmt.Sprintf("%02d-%s.txt", n, name))
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("build: --dump-dir: %w", err)
	}
	return nil
}

// stagePrepare applies the placement rules and builds the compilation
// config.
func stagePrepare(_ context.Context, s *state) error {
	tgts := s.cfg.Targets
	if len(tgts) == 0 {
		tgts = []*targets.Target{s.cfg.Host}
	}
	implied, err := impliedTargets(s.mod, tgts, s.cfg.Host, s.cfg.Kinds)
	if err != nil {
		return err
	}
	s.implied = implied
	tgts = append(append([]*targets.Target{}, tgts...), implied...)
	prepared, ccfg, err := device.Prepare(s.mod, device.Spec{Targets: tgts, Host: s.cfg.Host, Labels: s.cfg.Labels, Rules: s.cfg.Placement})
	if err != nil {
		return err
	}
	if ccfg.Host.Kind != targets.C {
		return fmt.Errorf("build: the host target must be of kind \"c\", not %q", ccfg.Host.Kind.Name)
	}
	s.mod, s.ccfg = prepared, ccfg
	return nil
}

// impliedTargets returns a target (default options, host attached) for
// each kind that a function of mod names in its Compiler attribute when
// no target of tgts has that kind, looked up in kinds (nil:
// targets.Default), in the order the functions appear. A name no
// registry knows is left to the hooks stage, whose error names it.
func impliedTargets(mod *graph.Module, tgts []*targets.Target, host *targets.Target, kinds *targets.Registry) ([]*targets.Target, error) {
	if kinds == nil {
		kinds = targets.Default
	}
	have := map[string]bool{}
	for _, t := range tgts {
		have[t.Kind.Name] = true
	}
	var out []*targets.Target
	add := func(f *graph.Function) error {
		name := f.StrAttr(graph.AttrCompiler)
		if name == "" || have[name] {
			return nil
		}
		have[name] = true
		k, ok := kinds.Lookup(name)
		if !ok {
			return nil
		}
		t, err := targets.New(k, nil)
		if err != nil {
			return fmt.Errorf("build: the target of kind %q that a partitioned function names: %w", name, err)
		}
		out = append(out, t.WithHost(host))
		return nil
	}
	for _, name := range mod.Names() {
		f := mod.Funcs[name]
		if err := add(f); err != nil {
			return nil, err
		}
		var err error
		graph.PostOrder(f.Body, func(e graph.Expr) {
			if c, ok := e.(*graph.Call); ok && err == nil {
				if fn, ok := c.Fn.(*graph.Function); ok {
					err = add(fn)
				}
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// stageGraphPasses runs the graph pass list, partitioning included.
func stageGraphPasses(_ context.Context, s *state) error {
	var part *transform.Pass
	var listed []*targets.Target
	for _, t := range s.ccfg.Primitives {
		if !slices.Contains(s.implied, t) {
			listed = append(listed, t)
		}
	}
	if HasExternal(listed) {
		part = &transform.Pass{Name: "partition", Required: true, Run: func(m *graph.Module) (*graph.Module, error) {
			out, rep, err := partition.Partition(m, listed, partition.Options{ResolveDevice: s.ccfg.ResolveTarget, ModuleName: s.cfg.ModuleName, RequireOffload: s.cfg.RequireOffload, Decide: s.cfg.Decide})
			s.report = rep
			return out, err
		}}
	}
	p := transform.NewPipeline()
	p.Passes = graphPasses(s.cfg.PassConfig, part, s.cfg.Host, s.cfg.Targets)
	p.Disabled = map[string]bool{}
	for _, ps := range p.Passes {
		p.Disabled[ps.Name] = skipPass(s.cfg.PassConfig, ps)
	}
	p.Dump = s.cfg.DumpGraph
	fused, err := p.Run(s.mod)
	s.res.GraphPasses = append([]transform.PassStat(nil), p.Stats...)
	if err != nil {
		return fmt.Errorf("graph passes: %w", err)
	}
	if s.cfg.Report != nil && s.report != nil {
		*s.cfg.Report = *s.report
	}
	s.mod = fused
	return nil
}

// stagePlan computes the program's outputs and plans the devices of the
// fused calls: the side table says where each fused call runs (FuseOps
// rebuilt every node), which is what hooks and LowerTE need.
func stagePlan(_ context.Context, s *state) error {
	main, err := computeOutputs(s.mod.Main())
	if err != nil {
		return err
	}
	fused := s.mod.ShallowCopy()
	fused.Funcs["main"] = main
	planned, err := device.PlanDevices(fused)
	if err != nil {
		return err
	}
	s.mod, s.planned = planned, true
	return nil
}

// stageTargetHooks runs the RelayToTIR hooks, then the RelayToRuntime
// hooks, then the ConstantUpdater hooks of the functions RelayToRuntime
// compiled, and plans again when they rebuilt calls.
func stageTargetHooks(_ context.Context, s *state) error {
	ccfg := s.ccfg
	s.env = &hookEnv{cfg: ccfg, labels: s.cfg.Labels, scratch: s.scratch, placed: map[*graph.Function]*targets.Target{}}
	planned := s.mod
	graph.PostOrder(planned.Main().Body, func(e graph.Expr) {
		if c, ok := e.(*graph.Call); ok {
			if fn := planned.Callee(c); fn != nil {
				if t := device.DeviceOf(planned, c).Target; t != nil && t.Kind != ccfg.Host.Kind {
					s.env.placed[fn] = t
				}
			}
		}
	})
	work := planned.ShallowCopy()
	prims := &tir.Module{}
	res := &lowered{cfg: ccfg, consts: map[string]*tensor.Tensor{}, prims: prims}
	// The seeds' order (000): RelayToTIR for every target, then
	// RelayToRuntime on the functions still owned, then constant
	// updating; TIRToRuntime comes at code generation.
	for _, t := range ccfg.Primitives {
		hook := backend.Of(t.Kind).Hooks.RelayToTIR
		if hook == nil {
			continue
		}
		ctx, err := s.env.context(t)
		if err != nil {
			return err
		}
		if err := hook(ctx, work, prims); err != nil {
			return fmt.Errorf("target %s: RelayToTIR: %w", t.Kind.Name, err)
		}
		if work.Main() == nil {
			return fmt.Errorf("target %s: RelayToTIR removed main", t.Kind.Name)
		}
		if err := graph.InferTypes(work); err != nil {
			return fmt.Errorf("target %s: RelayToTIR left an ill-typed module: %w", t.Kind.Name, err)
		}
	}
	compiled, err := runRelayToRuntime(s.env, work, prims, res)
	if err != nil {
		return err
	}
	if err := updateConstants(compiled, res); err != nil {
		return err
	}
	if len(res.external) > 0 || prims.Len() > 0 {
		// The hooks rebuilt calls; plan again (planning is idempotent) so
		// that the side table covers the final nodes.
		var err error
		if work, err = device.PlanDevices(work); err != nil {
			return fmt.Errorf("after the target hooks: %w", err)
		}
	}
	res.mod = work
	s.mod, s.low = work, res
	return nil
}

// stageLower lowers every remaining primitive call with LowerTE and
// checks that every call of main has code.
func stageLower(_ context.Context, s *state) error {
	work, res := s.mod, s.low
	lres, err := lower.LowerTE(work.Main(), lower.Options{
		Target:   s.ccfg.Host,
		TargetOf: func(c *graph.Call) *targets.Target { return device.DeviceOf(work, c).Target },
		Prims:    res.prims,
		Skip:     func(c *graph.Call) bool { return deviceCopyOf(c) != nil },
		Tuning:   s.cfg.Tuning,
	})
	if err != nil {
		return err
	}
	res.callee, res.impls = lres.Callee, lres.Impls
	return checkBound(work, res)
}

// stageTIRPasses runs the TIR passes.
func stageTIRPasses(_ context.Context, s *state) error {
	if s.low.prims.Len() == 0 {
		return nil
	}
	out, err := runTIRPasses(s.ccfg, s.cfg.PassConfig, s.low.prims)
	if err != nil {
		return err
	}
	s.low.prims = out
	return nil
}

// stageLiftWorkspaces lifts the PrimFuncs' scratch buffers into
// parameters (AOT: the executor plans them).
func stageLiftWorkspaces(_ context.Context, s *state) error {
	prims, err := liftWorkspaces(s.low.prims)
	if err != nil {
		return fmt.Errorf("TIR passes: %w", err)
	}
	s.low.prims = prims
	return nil
}

// stageExecutor builds the graph executor's program and parameters.
func stageExecutor(_ context.Context, s *state) error {
	s.res.Impls = s.low.impls
	main := s.low.mod.Main()
	prog, err := buildGraphJSON(main, s.low.callee, func(e graph.Expr) device.VirtualDevice { return device.DeviceOf(s.low.mod, e) },
		func(c *graph.Call) []string { return graph.Sources(s.low.mod, c) })
	if err != nil {
		return fmt.Errorf("graph executor: %w", err)
	}
	text, err := prog.graph.Marshal()
	if err != nil {
		return err
	}
	if err := runtime.ValidateGraphJSON(text); err != nil {
		return fmt.Errorf("internal error: the generated graph program is invalid: %w", err)
	}
	s.prog, s.gjText = prog, text
	s.res.Memory = prog.pools
	s.res.Metadata = Metadata{Kiln: Version, Target: targetListString(s.low.cfg), Devices: devicesOf(prog.graph), Source: s.cfg.Source}
	return nil
}

// runsOpenMP reports whether a kind that built one of the modules runs
// OpenMP parallel regions (backend.Flow.OpenMP): the host library's
// parallel loops then run on OpenMP teams too.
func runsOpenMP(mods ...[]externalModule) bool {
	for _, ms := range mods {
		for _, m := range ms {
			if m.target != nil && backend.Of(m.target.Kind).OpenMP {
				return true
			}
		}
	}
	return false
}

// stageCodegen hands the PrimFuncs of kinds with TIRToRuntime to their
// hooks and generates C for the rest.
func stageCodegen(_ context.Context, s *state) error {
	env := &hookEnv{cfg: s.low.cfg, labels: s.cfg.Labels, scratch: s.scratch}
	defPrims, hookMods, err := codegenTargets(env, s.low.prims)
	if err != nil {
		return err
	}
	copts := cgen.HostOptions()
	copts.NoPipeline = true
	copts.AllowEmpty = true
	copts.ThreadPool = !runsOpenMP(s.low.external, hookMods)
	applyCCodegen(s.low.cfg, &copts, nil)
	hostPrims, others, err := splitByTarget(s.low.cfg, defPrims)
	if err != nil {
		return err
	}
	src, err := cgen.Generate(hostPrims, copts)
	if err != nil {
		return fmt.Errorf("C codegen: %w", err)
	}
	for i := range others {
		o := copts
		o.NoRuntimeDefs = true
		if others[i].src, err = cgen.Generate(others[i].prims, o); err != nil {
			return fmt.Errorf("C codegen for target %s: %w", others[i].target.Labelled(), err)
		}
	}
	s.src, s.others, s.hookMods = src, others, hookMods
	return nil
}
