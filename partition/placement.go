package partition

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/targets"
)

// placement is what on_device annotations (placement rules, package
// device) say about main's calls: the target each placed call must run
// on, keyed by its ONNX node and operator, since partitioning rebuilds
// calls (composites, inlining) and the key survives that.
type placement struct {
	on map[string]placed
	// splits says which composites straddled placements and were split
	// into their operators (warnings of the report).
	splits []string
}

type placed struct {
	target *targets.Target
	device string
}

func placementKey(span, opName string) string { return span + "\x00" + opName }

// placementsOf reads the placements of main: every on_device(x) that
// constrains its body, x a call, places x on the annotation's device,
// resolved by resolve. A device resolve cannot place is an error.
func placementsOf(main *graph.Function, resolve func(string) (*targets.Target, error)) (*placement, error) {
	p := &placement{on: map[string]placed{}}
	var err error
	graph.PostOrder(main.Body, func(e graph.Expr) {
		c, ok := e.(*graph.Call)
		if !ok || c.Op != op.OnDevice || err != nil {
			return
		}
		if c.Attrs.Has("constrain_body") && !c.Attrs.Bool("constrain_body") {
			return // an argument's boundary, not a placement of its producer
		}
		inner, ok := c.Args[0].(*graph.Call)
		if !ok || inner.Op == nil || inner.Op == op.OnDevice || inner.Op == op.DeviceCopy {
			return
		}
		dev := c.Attrs.Str("device")
		t, rerr := resolve(dev)
		if rerr != nil {
			err = fmt.Errorf("partition: on_device %q around %s: %w", dev, graph.Describe(inner), rerr)
			return
		}
		p.on[placementKey(inner.Span, inner.Op.Name)] = placed{target: t, device: dev}
	})
	return p, err
}

// stripExternal returns main without the on_device annotations whose
// device resolves to an external target (a kind with Supports): their
// calls' placement is in p, partitioning enforces it, and the
// annotations would hide a placed convolution from the pattern that
// fuses it with its bias. Annotations of the host and of other devices
// stay for device planning.
func (p *placement) stripExternal(main *graph.Function, resolve func(string) (*targets.Target, error)) *graph.Function {
	changed := false
	body := graph.Rewrite(main.Body, func(e graph.Expr) graph.Expr {
		c, ok := e.(*graph.Call)
		if !ok || c.Op != op.OnDevice {
			return e
		}
		t, err := resolve(c.Attrs.Str("device"))
		if err != nil || t == nil || backend.Of(t.Kind).Supports == nil {
			return e
		}
		changed = true
		return c.Args[0]
	})
	if !changed {
		return main
	}
	nf := graph.NewFunction(main.Params, body, main.Attrs.Clone())
	nf.RetType = main.RetType
	return nf
}

// of returns the placement of call c, if any. For a composite call it is
// the placement its placed operators share; operators placed on
// different targets make split set, saying which are placed where.
func (p *placement) of(c *graph.Call) (v placed, ok bool, split string) {
	if c.Op != nil {
		v, ok = p.on[placementKey(c.Span, c.Op.Name)]
		return v, ok, ""
	}
	f, isFn := c.Fn.(*graph.Function)
	if !isFn {
		return placed{}, false, ""
	}
	var where []string
	mixed := false
	graph.PostOrder(f.Body, func(e graph.Expr) {
		x, isCall := e.(*graph.Call)
		if !isCall || x.Op == nil {
			return
		}
		w, hit := p.on[placementKey(x.Span, x.Op.Name)]
		if !hit {
			return
		}
		where = append(where, fmt.Sprintf("%s (%s) on %q", x.Span, x.Op.Name, w.device))
		if !ok {
			v, ok = w, true
		}
		mixed = mixed || w.target != v.target
	})
	if mixed {
		split = fmt.Sprintf("composite %s straddles placements (%s): split into its operators", compositeName(c), strings.Join(where, ", "))
	}
	return v, ok, split
}

// decider wraps decide (nil: the first able target) so that a placed
// call goes where its placement says: to the placed target when that is
// an external target that takes it, else to the host. A composite whose
// operators are placed on different targets goes to no target, so that
// partitioning splits it into its operators, each then placed on its
// own; the split is recorded for the report's warnings.
func (p *placement) decider(decide Decider) Decider {
	return func(c *graph.Call, able []*targets.Target) (*targets.Target, string) {
		v, ok, split := p.of(c)
		if split != "" {
			if !slices.Contains(p.splits, split) {
				p.splits = append(p.splits, split)
			}
			return nil, split
		}
		if ok {
			for _, t := range able {
				if t == v.target || t.Kind == v.target.Kind {
					return t, ""
				}
			}
			return nil, fmt.Sprintf("placed on %q (%s) by a placement rule", v.device, v.target.Kind.Name)
		}
		if decide != nil {
			return decide(c, able)
		}
		return able[0], ""
	}
}

// check fails when a call placed on an external target did not go to
// it, with the reasons the report gives.
func (p *placement) check(rep *Report) error {
	if len(p.on) == 0 {
		return nil
	}
	for _, n := range rep.Nodes {
		v, ok := p.on[placementKey(n.Node, n.Op)]
		if !ok || backend.Of(v.target.Kind).Supports == nil || n.Target == v.target.Kind.Name {
			continue
		}
		return fmt.Errorf("partition: %s (%s) is placed on %q (%s), which does not take it: %s", n.Node, n.Op, v.device, v.target.Kind.Name, strings.Join(n.Why, "; "))
	}
	return nil
}
