// Package transform holds the TIR passes and the pipeline that runs them.
//
// A Pass rewrites one PrimFunc (Run) or a whole module (RunModule). A
// Pipeline runs the built-in passes and the passes a target registers, in
// four phases. The phases follow TVM's tir.add_lower_pass phases; in kiln
// they mean:
//
//	Phase0  right after lowering (te → TIR or a target's RelayToTIR hook):
//	        buffers are still multi-dimensional and loop nests are as
//	        scheduled. Passes that recognize loop nests and replace them
//	        with call_extern into an accelerator or library kernel go here.
//	Phase1  after FlattenBuffers and Simplify: every access is 1-D with
//	        folded index arithmetic. Passes that reason about addresses and
//	        memory layout (DMA insertion, scratchpad placement) go here.
//	Phase2  after UnrollLoops and Simplify: the loop structure is final.
//	        Passes that annotate loops or insert pragmas go here.
//	Phase3  after RemoveNoOp and a final Simplify, right before code
//	        generation. Passes here should not leave work for built-ins.
//
// Within a phase the built-in passes of that phase run first, then the
// registered passes in registration order. The built-ins are, in order:
// FlattenBuffers, Simplify, SimplifyIndices, CollapseLoops (Phase1);
// UnrollLoops, Simplify (Phase2);
// RemoveNoOp, Simplify (Phase3).
//
// Passes never modify their input: they return new functions that share
// unchanged subtrees.
package transform

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-dev/kiln/passconfig"
	"github.com/kiln-dev/kiln/tir"
)

// Phase is a pipeline phase; see the package documentation.
type Phase int

// The four phases.
const (
	Phase0 Phase = iota
	Phase1
	Phase2
	Phase3
	numPhases
)

// String returns "phase0" ... "phase3".
func (p Phase) String() string { return fmt.Sprintf("phase%d", int(p)) }

// Pass is one transformation. Exactly one of Run (applied to every
// function of the module) and RunModule must be set.
type Pass struct {
	// Name identifies the pass in dumps, errors and --disable-pass.
	Name string
	// Phase is where the pass runs; see the package documentation.
	Phase Phase
	// Run rewrites one function.
	Run func(*tir.PrimFunc) (*tir.PrimFunc, error)
	// RunModule rewrites the whole module.
	RunModule func(*tir.Module) (*tir.Module, error)
	// OptLevel is the lowest optimisation level (passconfig) at which the
	// pass runs.
	OptLevel int
}

// Apply runs the pass on every function of m (or on m for a module pass)
// and returns the new module. Errors name the pass and the function.
func (p Pass) Apply(m *tir.Module) (*tir.Module, error) {
	if p.RunModule != nil {
		out, err := p.RunModule(m)
		if err != nil {
			return nil, fmt.Errorf("tir pass %s: %w", p.Name, err)
		}
		return out, nil
	}
	out := m.Copy()
	for _, f := range m.Funcs() {
		g, err := p.Run(f)
		if err != nil {
			return nil, fmt.Errorf("tir pass %s on function %s: %w", p.Name, f.Name, err)
		}
		if g.Name != f.Name {
			return nil, fmt.Errorf("tir pass %s renamed function %s to %s", p.Name, f.Name, g.Name)
		}
		if err := out.Replace(g); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Builtins returns the built-in passes with their phases, in order, for
// the default configuration.
func Builtins() []Pass { return BuiltinsFor(nil) }

// BuiltinsFor returns the built-in passes with their phases, in order, as
// cfg configures them: SimplifyIndices runs from opt level 1,
// UnrollLoops expands loops up to passconfig.UnrollMaxExtent and runs
// from opt level 2, and
// passconfig.DisableVectorize adds DisableVectorize before it.
func BuiltinsFor(cfg *passconfig.Config) []Pass {
	set := func(p Pass, ph Phase) Pass { p.Phase = ph; return p }
	unroll := set(UnrollLoops(cfg.Int(passconfig.UnrollMaxExtent)), Phase2)
	unroll.OptLevel = 2
	indices := set(SimplifyIndices(), Phase1)
	indices.OptLevel = 1
	collapseLoops := set(CollapseLoops(), Phase1)
	collapseLoops.OptLevel = 1
	out := []Pass{
		set(FlattenBuffers(), Phase1),
		set(Simplify(), Phase1),
		indices,
		collapseLoops,
	}
	if cfg.Bool(passconfig.DisableVectorize) {
		out = append(out, set(DisableVectorize(), Phase2))
	}
	return append(out,
		unroll,
		set(Simplify(), Phase2),
		set(RemoveNoOp(), Phase3),
		set(Simplify(), Phase3),
	)
}

// Pipeline runs the built-in and registered passes phase by phase. The
// zero value runs the built-ins without verification or dumps;
// NewPipeline also honours KILN_TIR_VERIFY.
type Pipeline struct {
	// VerifyEach runs tir.Verify on the input and after every pass and
	// fails naming the pass that broke an invariant. Tests turn it on;
	// NewPipeline turns it on when the environment variable
	// KILN_TIR_VERIFY is set to a non-empty value other than "0".
	VerifyEach bool
	// Dump, when not nil, receives the module text before the first pass
	// and after every pass, each preceded by a "# after <pass>" line.
	Dump io.Writer
	// DumpDir, when not empty, receives one file per step:
	// 00_input.tir, 01_phase1_FlattenBuffers.tir, ...
	DumpDir string
	// Config configures the built-in passes and skips the passes below
	// its opt level or disabled in it; nil is the default configuration.
	Config *passconfig.Config

	user     []Pass
	disabled map[string]bool
}

// NewPipeline returns a pipeline with only the built-in passes.
func NewPipeline() *Pipeline {
	v := os.Getenv("KILN_TIR_VERIFY")
	return &Pipeline{VerifyEach: v != "" && v != "0", disabled: map[string]bool{}}
}

// Register adds a pass to its phase, after the passes already registered
// there. Names must be unique among built-in and registered passes.
func (p *Pipeline) Register(pass Pass) error {
	if pass.Name == "" {
		return fmt.Errorf("tir pipeline: pass without a name")
	}
	if pass.Phase < Phase0 || pass.Phase >= numPhases {
		return fmt.Errorf("tir pipeline: pass %s has invalid phase %d (want 0..3)", pass.Name, int(pass.Phase))
	}
	if (pass.Run == nil) == (pass.RunModule == nil) {
		return fmt.Errorf("tir pipeline: pass %s must set exactly one of Run and RunModule", pass.Name)
	}
	if p.known(pass.Name) {
		return fmt.Errorf("tir pipeline: a pass named %s is already registered", pass.Name)
	}
	p.user = append(p.user, pass)
	return nil
}

func (p *Pipeline) known(name string) bool {
	for _, b := range BuiltinsFor(p.Config) {
		if b.Name == name {
			return true
		}
	}
	for _, u := range p.user {
		if u.Name == name {
			return true
		}
	}
	return false
}

// Disable skips every pass with this name (built-in or registered).
func (p *Pipeline) Disable(name string) error {
	if !p.known(name) {
		return fmt.Errorf("tir pipeline: no pass named %s", name)
	}
	if p.disabled == nil {
		p.disabled = map[string]bool{}
	}
	p.disabled[name] = true
	return nil
}

// Names lists the names of the passes the pipeline knows (built-in and
// registered), each once, in pipeline order, whether or not they run.
func (p *Pipeline) Names() []string {
	var out []string
	seen := map[string]bool{}
	for ph := Phase0; ph < numPhases; ph++ {
		for _, list := range [][]Pass{BuiltinsFor(p.Config), p.user} {
			for _, pass := range list {
				if pass.Phase == ph && !seen[pass.Name] {
					seen[pass.Name] = true
					out = append(out, pass.Name)
				}
			}
		}
	}
	return out
}

// Passes returns the passes Run will execute, in order: those not disabled
// (Disable or the Config) and not above the Config's opt level.
func (p *Pipeline) Passes() []Pass {
	var out []Pass
	builtins := BuiltinsFor(p.Config)
	level := p.Config.OptLevel()
	for ph := Phase0; ph < numPhases; ph++ {
		for _, list := range [][]Pass{builtins, p.user} {
			for _, pass := range list {
				if pass.Phase == ph && !p.disabled[pass.Name] && !p.Config.Disabled(pass.Name) && pass.OptLevel <= level {
					out = append(out, pass)
				}
			}
		}
	}
	return out
}

// Run executes the pipeline on m and returns the transformed module.
func (p *Pipeline) Run(m *tir.Module) (*tir.Module, error) {
	if p.DumpDir != "" {
		if err := os.MkdirAll(p.DumpDir, 0o755); err != nil {
			return nil, fmt.Errorf("tir pipeline: %w", err)
		}
	}
	if err := p.check(m, "input", 0); err != nil {
		return nil, err
	}
	for i, pass := range p.Passes() {
		out, err := pass.Apply(m)
		if err != nil {
			return nil, err
		}
		m = out
		if err := p.check(m, pass.Phase.String()+"_"+pass.Name, i+1); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// RunFunc runs the pipeline on a module holding only f.
func (p *Pipeline) RunFunc(f *tir.PrimFunc) (*tir.PrimFunc, error) {
	m, err := tir.NewModule(f)
	if err != nil {
		return nil, err
	}
	out, err := p.Run(m)
	if err != nil {
		return nil, err
	}
	return out.Lookup(f.Name), nil
}

// check verifies and dumps m after step `step` (named what).
func (p *Pipeline) check(m *tir.Module, what string, step int) error {
	if p.VerifyEach {
		if err := tir.VerifyModule(m); err != nil {
			if step == 0 {
				return fmt.Errorf("tir pipeline: input does not verify: %w", err)
			}
			return fmt.Errorf("tir pipeline: IR does not verify after pass %s: %w", what[strings.IndexByte(what, '_')+1:], err)
		}
	}
	if p.Dump == nil && p.DumpDir == "" {
		return nil
	}
	text := m.String()
	if p.Dump != nil {
		if _, err := fmt.Fprintf(p.Dump, "# after %s\n%s\n", what, text); err != nil {
			return fmt.Errorf("tir pipeline: dump: %w", err)
		}
	}
	if p.DumpDir != "" {
		name := filepath.Join(p.DumpDir, fmt.Sprintf("%02d_%s.tir", step, what))
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			return fmt.Errorf("tir pipeline: dump: %w", err)
		}
	}
	return nil
}
