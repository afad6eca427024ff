// Package strategy is kiln's table of operator implementations. For each
// graph operator and each target (by kind, or by a generic key such as
// "cpu" or "generic"), one or more Implementations pair a tensor-expression
// compute with a schedule and a priority level. LowerTE asks the table for
// the best valid implementation of every call in a fused primitive function;
// backends (and UMA vendors) add their own at a higher priority.
package strategy

import (
	"fmt"
	"sort"
	"sync"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
)

// Call describes one operator call being lowered.
type Call struct {
	Op       *op.Op
	Attrs    ir.Attrs
	ArgTypes []ir.Type
	OutType  ir.Type // a TensorType, or a TupleType for multi-output ops
	Target   *targets.Target
	// Knobs are the schedule choices tuning records give this call (see
	// Tuning); nil means the implementation's defaults.
	Knobs Knobs
}

// OutTensor returns the output type of a single-output call.
func (c *Call) OutTensor() *ir.TensorType { return c.OutType.(*ir.TensorType) }

// ArgTensor returns the type of tensor argument i.
func (c *Call) ArgTensor(i int) *ir.TensorType { return c.ArgTypes[i].(*ir.TensorType) }

// ComputeFunc declares the computation of a call on its input tensors and
// returns one tensor per output.
type ComputeFunc func(c *Call, inputs []*te.Tensor) ([]*te.Tensor, error)

// ScheduleFunc schedules a fused group whose anchor is this call. outs are
// the group's output tensors (which may be elementwise consumers of the
// anchor's outputs); anchor are the anchor call's own output tensors.
type ScheduleFunc func(c *Call, s *te.Schedule, outs, anchor []*te.Tensor) error

// Implementation is one way of computing an operator.
type Implementation struct {
	Name     string
	PLevel   int
	Compute  ComputeFunc
	Schedule ScheduleFunc
	// Valid reports whether the implementation applies to a call (nil: always).
	Valid func(c *Call) bool
	// Space lists the knob settings a tuner measures for a call (nil:
	// the implementation has no knobs). The schedule reads them from
	// Call.Knobs and uses its defaults for knobs that are absent or do not
	// apply.
	Space func(c *Call) []Knobs
}

// Default priority levels.
const (
	PLevelGeneric = 5  // portable fallback
	PLevelTuned   = 10 // the built-in optimised implementations
	PLevelVendor  = 11 // UMA and backend registrations take precedence
)

// Key selects which targets an implementation applies to: either a kind
// (only targets of that kind) or a generic key matched against
// Target.Keys() and the universal key "generic".
type Key struct {
	Kind    *targets.Kind
	Generic string
}

// ForKind is the key of one target kind.
func ForKind(k *targets.Kind) Key { return Key{Kind: k} }

// ForKey is a generic key such as "cpu" or "generic".
func ForKey(s string) Key { return Key{Generic: s} }

// Registry maps (op, key) to implementations.
type Registry struct {
	mu    sync.RWMutex
	impls map[*op.Op]map[Key][]Implementation
	base  *Registry
}

// NewRegistry makes an empty registry.
func NewRegistry() *Registry { return &Registry{impls: map[*op.Op]map[Key][]Implementation{}} }

// NewOverlay makes an empty registry layered over base: its candidates
// are its own implementations and base's, by priority (its own first
// among equals). Adding to it leaves base untouched, so a backend can
// keep its implementations out of the shared table.
func NewOverlay(base *Registry) *Registry {
	r := NewRegistry()
	r.base = base
	return r
}

// Add registers an implementation. A second implementation with the same
// name for the same op and key is an error.
func (r *Registry) Add(o *op.Op, key Key, impl Implementation) error {
	if impl.Compute == nil || impl.Name == "" {
		return fmt.Errorf("strategy for %s: implementation needs a name and a compute", o.Name)
	}
	if (key.Kind == nil) == (key.Generic == "") {
		return fmt.Errorf("strategy for %s: key must name exactly one of a kind or a generic key", o.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.impls[o]
	if m == nil {
		m = map[Key][]Implementation{}
		r.impls[o] = m
	}
	for _, e := range m[key] {
		if e.Name == impl.Name {
			return fmt.Errorf("strategy for %s: implementation %q already registered", o.Name, impl.Name)
		}
	}
	m[key] = append(m[key], impl)
	return nil
}

// Candidates lists the implementations that apply to the call's target, in
// order of decreasing priority (ties: kind-specific first, then key order).
func (r *Registry) Candidates(c *Call) []Implementation {
	r.mu.RLock()
	defer r.mu.RUnlock()
	m := r.impls[c.Op]
	var keys []Key
	if c.Target != nil {
		keys = append(keys, ForKind(c.Target.Kind))
		for _, k := range c.Target.Keys() {
			keys = append(keys, ForKey(k))
		}
	}
	keys = append(keys, ForKey("generic"))
	var out []Implementation
	for _, k := range keys {
		out = append(out, m[k]...)
	}
	if r.base != nil {
		out = append(out, r.base.Candidates(c)...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].PLevel > out[j].PLevel })
	return out
}

// Select returns the highest-priority valid implementation.
func (r *Registry) Select(c *Call) (Implementation, error) {
	for _, impl := range r.Candidates(c) {
		if impl.Valid == nil || impl.Valid(c) {
			return impl, nil
		}
	}
	tgt := "no target"
	if c.Target != nil {
		tgt = c.Target.String()
	}
	return Implementation{}, fmt.Errorf("no implementation of %s for target %q", c.Op.Name, tgt)
}

// Default holds kiln's built-in implementations (package topi registers them).
var Default = NewRegistry()
