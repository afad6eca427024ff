package strategy

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
)

// Knobs are named integer schedule choices of one implementation for one
// call (tile sizes, which micro-kernel, ...). Each implementation with a
// Space documents its knobs and checks their values itself: knobs come
// from files (tuning records) and may be anything.
type Knobs map[string]int64

// String formats the knobs sorted by name: "mv=2 nc=6".
func (k Knobs) String() string {
	names := make([]string, 0, len(k))
	for n := range k {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%d", n, k[n])
	}
	return strings.Join(parts, " ")
}

// Get returns knob name, or def when it is absent.
func (k Knobs) Get(name string, def int64) int64 {
	if v, ok := k[name]; ok {
		return v
	}
	return def
}

// Tuning gives calls their knobs while a model is lowered: package tune's
// records (kiln compile --tuning), or the tuner's own choice while it
// measures a candidate.
type Tuning interface {
	// Knobs returns the knobs for call c lowered with implementation impl
	// (which has a Space), or nil for the implementation's defaults.
	Knobs(c *Call, impl Implementation) Knobs
}

// TuningObserver is a Tuning that also learns where each tunable call
// went: lowering calls Lowered, after Knobs, with the symbol of the
// primitive function the call is lowered into (the Func of the graph
// executor's profile steps that run it). kiln tune --measure model uses it
// to find a workload's kernels in a profile of the whole model.
type TuningObserver interface {
	Tuning
	Lowered(c *Call, impl Implementation, function string)
}

// Workload identifies a call for tuning: the implementation, the operator,
// its argument and result types and its attributes (in the graph IR's
// syntax) — everything its schedule depends on except the target (see
// TargetKey).
func Workload(c *Call, impl Implementation) string {
	var b strings.Builder
	b.WriteString(impl.Name + " " + c.Op.Name + " ")
	b.WriteString((&ir.FuncType{Params: c.ArgTypes, Ret: c.OutType}).String())
	for _, n := range c.Attrs.Keys() {
		b.WriteString(" " + n + "=" + ir.FormatAttrValue(c.Attrs[n]))
	}
	return b.String()
}

// TargetKey identifies the code a target generates for tuning: its kind
// and its resolved processor (name, instruction set, vector registers,
// caches and every feature), so that records measured for one processor
// are never applied to another.
func TargetKey(t *targets.Target) string {
	if t == nil {
		return ""
	}
	p := t.Processor()
	return t.Kind.Name + " " + p.String() + " [" + strings.Join(p.Features, ",") + "]"
}
