package device

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/targets"
)

// labelsResolver adapts a compilation's targets.Labels to LabelResolver.
type labelsResolver struct{ l *targets.Labels }

// Resolve looks a bare label up (its device id is 0).
func (r labelsResolver) Resolve(label string) (*targets.Target, int, error) {
	return r.l.Lookup(label)
}

// ResolverFor returns a LabelResolver over a compilation's labels, or nil
// when l is nil.
func ResolverFor(l *targets.Labels) LabelResolver {
	if l == nil {
		return nil
	}
	return labelsResolver{l}
}

// Spec is what a user says about the targets and devices of one
// compilation: the -t list, the --target-label labels and the placement
// rules.
type Spec struct {
	// Targets are the primitive targets in the user's order.
	Targets []*targets.Target
	// Host is the host target; nil picks it as NewCompilationConfig does.
	Host *targets.Target
	// Labels are the compilation's target labels (nil: none).
	Labels *targets.Labels
	// Rules place ONNX nodes or operators on devices (see Place).
	Rules []Rule
}

// Prepare makes the CompilationConfig of spec, applies its placement rules
// to mod (Place) and attaches the configuration to the result, which is
// then ready for the graph passes and PlanDevices. Every label a rule
// names is checked here, so a typo fails before any work is done. mod is
// not modified.
func Prepare(mod *graph.Module, spec Spec) (*graph.Module, *CompilationConfig, error) {
	cfg, err := NewCompilationConfig(spec.Targets, spec.Host, 0)
	if err != nil {
		return nil, nil, err
	}
	cfg.Labels = ResolverFor(spec.Labels)
	if spec.Labels != nil {
		for _, t := range cfg.Primitives {
			if other, ok := spec.Labels.Target(t.Label); ok && t.Label != "" {
				return nil, nil, fmt.Errorf("target label %q names %q in the target list and %q as a separate label: one label, one target", t.Label, t.String(), other.String())
			}
		}
	}
	for _, r := range spec.Rules {
		if _, err := cfg.ResolveDevice(r.Device); err != nil {
			return nil, nil, fmt.Errorf("placement rule at %s: %v", r.Where(), err)
		}
	}
	out := mod
	if len(spec.Rules) > 0 {
		if out, err = Place(mod, spec.Rules); err != nil {
			return nil, nil, err
		}
	} else {
		out = mod.ShallowCopy()
	}
	cfg.Attach(out)
	return out, cfg, nil
}
