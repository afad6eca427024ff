package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/kiln-dev/kiln/passconfig"
)

// passFlags are the pass-configuration flags of every command that
// compiles: --opt-level, --disable-pass, --pass-config and --no-fuse
// (graph.fuse_ops.disable=true).
type passFlags struct {
	optLevel int
	disabled listFlag
	config   listFlag
	noFuse   bool
}

func (p *passFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&p.optLevel, "opt-level", passconfig.DefaultOptLevel, fmt.Sprintf("optimisation level %d–%d: passes above it are skipped (0: no fusion, only required passes)", passconfig.MinOptLevel, passconfig.MaxOptLevel))
	fs.Var(&p.disabled, "disable-pass", "skip the graph or TIR pass `NAME` (repeatable; --print-pipeline lists them)")
	fs.Var(&p.config, "pass-config", "set a pass option `KEY=VALUE` (repeatable; --pass-config help lists the keys)")
	fs.BoolVar(&p.noFuse, "no-fuse", false, "compile every operator as its own kernel (no operator fusion)")
}

// wantsHelp reports whether --pass-config help was given.
func (p *passFlags) wantsHelp() bool {
	for _, a := range p.config {
		if strings.TrimSpace(a) == "help" {
			return true
		}
	}
	return false
}

// resolve builds the pass config the flags describe. Whether a disabled
// pass exists is checked by the build, which knows the compilation's
// passes.
func (p *passFlags) resolve() (*passconfig.Config, error) {
	c := passconfig.New()
	if err := c.SetOptLevel(p.optLevel); err != nil {
		return nil, fmt.Errorf("--opt-level: %w", err)
	}
	for _, list := range p.disabled {
		for _, name := range strings.Split(list, ",") {
			if err := c.Disable(name); err != nil {
				return nil, fmt.Errorf("--%w", err)
			}
		}
	}
	for _, a := range p.config {
		if err := c.SetAssignment(a); err != nil {
			return nil, fmt.Errorf("--%w", err)
		}
	}
	if p.noFuse {
		if err := c.Set(passconfig.DisableFusion.Name, "true"); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// writePassConfigKeys lists the pass-config keys: name, type, default,
// range and what each does.
func writePassConfigKeys(w io.Writer) {
	for _, k := range passconfig.Keys() {
		rng := ""
		if k.Type == passconfig.Int {
			rng = fmt.Sprintf(" in [%d, %d]", k.Min, k.Max)
		}
		fmt.Fprintf(w, "%-28s %s%s, default %v\n    %s\n", k.Name, k.Type, rng, k.Default, k.Doc)
	}
}
