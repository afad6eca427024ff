// Package partition implements bring-your-own-codegen partitioning
// (seed 002): it decides which calls of a model an external code
// generator takes, groups them into regions and outlines each region into
// a function with a Compiler attribute, which the build then hands to the
// kind's RelayToRuntime or RelayToTIR hook. Everything else falls back to
// the host. It runs after the simplifying graph passes (constant folding,
// simplification) and before layout changes, device planning and fusion:
//
//	graph passes → Partition (Annotate → merge regions → Outline) → PlanDevices → FuseOps → hooks
//
// The three steps are separate functions (Annotate, Regions, Outline) so
// that each can be tested and reported on; Partition runs them in order.
// Every call left on the host gets a reason in the Report.
package partition

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
)

// Options configure Partition.
type Options struct {
	// ModuleName names the model in outlined functions' symbols
	// (kiln_<module>_<compiler>_main_<n>); empty means "default".
	ModuleName string
	// NoMerge keeps every offloaded call in a region of its own (no
	// MergeCompilerRegions).
	NoMerge bool
	// ConstantsAsArgs passes constants to outlined functions as arguments
	// instead of binding them inside the function.
	ConstantsAsArgs bool
	// RequireOffload makes any call left on the host an error (for users
	// who need the whole model offloaded).
	RequireOffload bool
	// Decide, when set, chooses the target of each call that one or more
	// external targets take (measured partitioning); nil gives it to the
	// first in list order (greedy).
	Decide Decider
	// ResolveDevice, when set, makes partitioning follow placement: a
	// call inside on_device(call, device=D) (a placement rule or an
	// annotation) goes to the target D resolves to. Placed on the host
	// (or another target without Supports) it stays out of every
	// external region; placed on an external target it goes there, or
	// Partition fails saying why that target does not take it. Placement
	// wins over Decide.
	ResolveDevice func(device string) (*targets.Target, error)
}

// Decider chooses among the external targets that take a call (able, in
// target-list order, at least one) the one that gets it, or nil and the
// reason to leave it on the host. It must give the same answer for calls
// of the same ONNX node and operator: partitioning may annotate a call
// again after rewriting its neighbourhood.
type Decider func(c *graph.Call, able []*targets.Target) (*targets.Target, string)

// Partition outlines the calls of mod's main that the external targets
// (those whose kind has a Supports predicate) take, and returns the new
// module and the report. Targets without Supports are ignored (the host,
// kinds with their own flow). mod is not modified.
func Partition(mod *graph.Module, tgts []*targets.Target, opts Options) (*graph.Module, *Report, error) {
	if err := graph.InferTypes(mod); err != nil {
		return nil, nil, fmt.Errorf("partition: %w", err)
	}
	mod, err := runGraphPasses(mod, tgts, backend.PrePartitioning)
	if err != nil {
		return nil, nil, err
	}
	main := mod.Main()
	if main == nil {
		return nil, nil, fmt.Errorf("partition: module has no main function")
	}
	measured := opts.Decide != nil
	var place *placement
	if opts.ResolveDevice != nil {
		if place, err = placementsOf(main, opts.ResolveDevice); err != nil {
			return nil, nil, err
		}
		if len(place.on) > 0 {
			opts.Decide = place.decider(opts.Decide)
			main = place.stripExternal(main, opts.ResolveDevice)
			if err := graph.InferFunction(mod, main); err != nil {
				return nil, nil, fmt.Errorf("partition: %w", err)
			}
		}
	}
	main, refused, err := mergeComposites(main, tgts)
	if err != nil {
		return nil, nil, err
	}
	ann := annotate(main, tgts, opts.Decide)
	// A composite no target took goes back to its operators, which are
	// then annotated one by one.
	inlined, err := inlineComposites(main, func(c *graph.Call) bool { return ann.Target[c] != nil })
	if err != nil {
		return nil, nil, fmt.Errorf("partition: %w", err)
	}
	if inlined != main {
		main = inlined
		ann = annotate(main, tgts, opts.Decide)
	}
	var merge func(*targets.Target) bool
	if !opts.NoMerge {
		merge = func(t *targets.Target) bool {
			return backend.Of(t.Kind).Partitioning == nil || !backend.Of(t.Kind).Partitioning.KeepRegionsApart
		}
	}
	main, ann, regions, err := pruneRegions(main, tgts, ann, merge, opts.Decide)
	if err != nil {
		return nil, nil, err
	}
	rep := newReport(main, ann, regions, refused)
	rep.Warnings = append(rep.Warnings, idleTargets(tgts, ann, measured)...)
	if place != nil {
		rep.Warnings = append(rep.Warnings, place.splits...)
		if err := place.check(rep); err != nil {
			return nil, rep, err
		}
	}
	if opts.RequireOffload {
		if err := rep.hostError(); err != nil {
			return nil, rep, err
		}
	}
	if main != mod.Main() {
		mod = mod.ShallowCopy()
		mod.Funcs["main"] = main
	}
	out := mod
	if len(regions) > 0 {
		if out, err = Outline(mod, regions, opts); err != nil {
			return nil, rep, err
		}
	}
	for _, ph := range []backend.GraphPhase{backend.PostPartitioning0, backend.PostPartitioning1} {
		if out, err = runGraphPasses(out, tgts, ph); err != nil {
			return nil, rep, err
		}
	}
	return out, rep, nil
}

// runGraphPasses runs the graph passes of phase ph of every target's kind,
// in target order, each kind's in registration order, type-checking the
// module after each.
func runGraphPasses(mod *graph.Module, tgts []*targets.Target, ph backend.GraphPhase) (*graph.Module, error) {
	for _, t := range tgts {
		if backend.Of(t.Kind).Partitioning == nil {
			continue
		}
		for _, p := range backend.Of(t.Kind).Partitioning.Passes {
			if p.Phase != ph || p.Run == nil {
				continue
			}
			out, err := p.Run(t, mod)
			if err != nil {
				return nil, fmt.Errorf("partition: target %s: %s graph pass %s: %w", t.Kind.Name, ph, p.Name, err)
			}
			if out == nil || out.Main() == nil {
				return nil, fmt.Errorf("partition: target %s: %s graph pass %s returned no main function", t.Kind.Name, ph, p.Name)
			}
			if err := graph.InferTypes(out); err != nil {
				return nil, fmt.Errorf("partition: target %s: %s graph pass %s left an ill-typed module: %w", t.Kind.Name, ph, p.Name, err)
			}
			mod = out
		}
	}
	return mod, nil
}

// mergeComposites runs MergeComposite with the pattern table of each
// external target, in target order, and returns the matches the tables'
// checks refused, by their root call (refusalOf).
func mergeComposites(main *graph.Function, tgts []*targets.Target) (*graph.Function, map[refusalKey][]string, error) {
	refused := map[refusalKey][]string{}
	for _, t := range tgts {
		if backend.Of(t.Kind).Supports == nil || len(backend.Of(t.Kind).Patterns) == 0 {
			continue
		}
		out, rej, err := MergeComposite(main, backend.Of(t.Kind).Patterns)
		if err != nil {
			return nil, nil, fmt.Errorf("partition: target %s: %w", t.Kind.Name, err)
		}
		for _, r := range rej {
			if c, ok := r.Root.(*graph.Call); ok {
				k := refusalOf(c)
				refused[k] = append(refused[k], fmt.Sprintf("%s: composite %s refused: %s", t.Kind.Name, r.Composite, r.Reason))
			}
		}
		main = out
	}
	return main, refused, nil
}

// refusalKey finds a refused composite's root call again after later
// rewrites: by ONNX node and operator, or, for a call without an ONNX
// node, by the call itself.
type refusalKey struct {
	span, op string
	call     *graph.Call
}

func refusalOf(c *graph.Call) refusalKey {
	if c.Span == "" {
		return refusalKey{call: c}
	}
	return refusalKey{span: c.Span, op: callName(c)}
}

// Annotation is what Annotate decided for each call of a function.
type Annotation struct {
	// Target is the external target a call goes to (absent: the host).
	Target map[*graph.Call]*targets.Target
	// Why says, for a call left on the host, why each external target
	// refused it ("dnnl: float16 is not supported").
	Why map[*graph.Call][]string
	// Able lists, for each call some external target takes, every such
	// target in list order (the report's shadowing warnings read it).
	Able map[*graph.Call][]*targets.Target
}

// Annotate asks each external target, in list order, whether it takes
// each call of fn (operator calls and calls of composite functions); the
// first that does gets it. Calls with a tuple-valued result, and calls of
// non-composite functions, stay on the host.
func Annotate(fn *graph.Function, tgts []*targets.Target) *Annotation {
	return annotate(fn, tgts, nil)
}

// annotate is Annotate with decide choosing among the targets that take a
// call (nil: the first).
func annotate(fn *graph.Function, tgts []*targets.Target, decide Decider) *Annotation {
	ann := &Annotation{Target: map[*graph.Call]*targets.Target{}, Why: map[*graph.Call][]string{}, Able: map[*graph.Call][]*targets.Target{}}
	var ext []*targets.Target
	for _, t := range tgts {
		if backend.Of(t.Kind).Supports != nil {
			ext = append(ext, t)
		}
	}
	graph.PostOrder(fn.Body, func(e graph.Expr) {
		c, ok := e.(*graph.Call)
		if !ok {
			return
		}
		if len(ext) == 0 {
			ann.Why[c] = []string{"no external target in the target list"}
			return
		}
		if f, isFn := c.Fn.(*graph.Function); isFn && f.StrAttr(graph.AttrComposite) == "" {
			ann.Why[c] = []string{"call of a function that is not a composite"}
			return
		}
		if _, isTuple := c.Type().(*ir.TupleType); isTuple {
			ann.Why[c] = []string{"tuple-valued result"}
			return
		}
		var why []string
		var able []*targets.Target
		for _, t := range ext {
			if comp := compositeName(c); comp != "" {
				if prefix, _, _ := strings.Cut(comp, "."); prefix != t.Kind.Name {
					why = append(why, fmt.Sprintf("%s: composite %s is for %s", t.Kind.Name, comp, prefix))
					continue
				}
			}
			if err := backend.Of(t.Kind).Supports(c); err != nil {
				why = append(why, t.Kind.Name+": "+err.Error())
				continue
			}
			able = append(able, t)
		}
		if len(able) > 0 {
			ann.Able[c] = able
			t, reason := able[0], ""
			if decide != nil {
				t, reason = decide(c, able)
			}
			if t != nil {
				ann.Target[c] = t
				return
			}
			why = append(why, reason)
		}
		ann.Why[c] = why
	})
	return ann
}

// compositeName is the Composite attribute of a call's function, or "".
func compositeName(c *graph.Call) string {
	if f, ok := c.Fn.(*graph.Function); ok {
		return f.StrAttr(graph.AttrComposite)
	}
	return ""
}

// callName names a call in reports: its operator or composite.
func callName(c *graph.Call) string {
	if c.Op != nil {
		return c.Op.Name
	}
	if comp := compositeName(c); comp != "" {
		return comp
	}
	return "call"
}

// idleTargets warns about each external target that receives no call:
// shadowed by targets before it in the list (it takes calls, but they go
// to those first), found slower by measured partitioning (measured), or
// taking none of the model's calls.
func idleTargets(tgts []*targets.Target, ann *Annotation, measured bool) []string {
	got := map[*targets.Target]int{}
	for _, t := range ann.Target {
		got[t]++
	}
	var out []string
	for _, t := range tgts {
		if backend.Of(t.Kind).Supports == nil || got[t] > 0 {
			continue
		}
		takers := map[string]int{}
		able := 0
		for c, ts := range ann.Able {
			if !slices.Contains(ts, t) {
				continue
			}
			able++
			if other := ann.Target[c]; other != nil {
				takers[other.Kind.Name]++
			}
		}
		if able == 0 {
			// Operators it takes may sit inside other targets' composites.
			inside := map[string]int{}
			for c, other := range ann.Target {
				f, ok := c.Fn.(*graph.Function)
				if !ok || other == t {
					continue
				}
				graph.PostOrder(f.Body, func(e graph.Expr) {
					if in, ok := e.(*graph.Call); ok && in.Op != nil && backend.Of(t.Kind).Supports(in) == nil {
						inside[other.Kind.Name]++
					}
				})
			}
			if len(inside) == 0 {
				out = append(out, fmt.Sprintf("%s receives nothing: it takes none of the model's operators", t.Kind.Name))
				continue
			}
			out = append(out, fmt.Sprintf("%s receives nothing: the operators it takes are inside the composites of %s (composite patterns are matched before single operators are assigned); measure (--partition measured) to compare", t.Kind.Name, strings.Join(countList(inside), ", ")))
			continue
		}
		by := countList(takers)
		if measured {
			where := "the host"
			if len(by) > 0 {
				where = strings.Join(by, ", ") + " and the host"
			}
			out = append(out, fmt.Sprintf("%s receives nothing: measured partitioning found the %d call(s) it takes faster on %s", t.Kind.Name, able, where))
			continue
		}
		if len(by) == 0 {
			out = append(out, fmt.Sprintf("%s receives nothing: the %d call(s) it takes stay on the host", t.Kind.Name, able))
			continue
		}
		out = append(out, fmt.Sprintf("%s receives nothing: the %d call(s) it takes go to %s, earlier in the target list; list %s first or measure (--partition measured)", t.Kind.Name, able, strings.Join(by, ", "), t.Kind.Name))
	}
	return out
}

// countList is "name (count)" per entry of counts, sorted.
func countList(counts map[string]int) []string {
	out := make([]string, 0, len(counts))
	for k, n := range counts {
		out = append(out, fmt.Sprintf("%s (%d)", k, n))
	}
	sort.Strings(out)
	return out
}
