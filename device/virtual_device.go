// Package device implements kiln's multi-target device handling, after
// TVM's "improved multi-target handling" design: a VirtualDevice (device
// type, device id, Target, memory scope) per expression, the
// CompilationConfig that is the single source of the compilation's targets
// and default devices, device planning (PlanDevices) and an ONNX placement
// helper (Place) that turns a user's placement file into on_device
// annotations.
//
// Where it sits in the pipeline: the build (package driver) applies the
// user's placement (Prepare, Place) right after import, plans devices
// after the graph passes and partitioning and before fusion (so that no
// fused function mixes devices, device_copy being opaque to fusion), and
// plans the fused module again for the side table the target hooks,
// LowerTE and the executor codegen read:
//
//	frontend → Place → graph passes → partition → PlanDevices → FuseOps → PlanDevices → hooks, LowerTE → executor codegen
//
// PlanDevices accepts fused input (FuseOps wraps a lone on_device or
// device_copy call in its own primitive function; PlanDevices sees through
// such wrappers) and its side table (DeviceOf) is keyed by the nodes of its
// output, so a pass that rebuilds nodes must be followed by planning again
// (planning is idempotent).
//
// Targets: no stage invents a Target. The CLI builds one CompilationConfig
// from the user's target list (NewCompilationConfig), attaches it to the
// module (Attach), and every later stage takes targets from it (FromModule,
// FindPrimitiveTarget, CanonicalVirtualDevice) or from the VirtualDevice
// PlanDevices recorded for a call (DeviceOf).
package device

import (
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/targets"
)

// Unconstrained field values of a VirtualDevice.
const (
	// NoDeviceType is an unconstrained VirtualDevice.DeviceType.
	NoDeviceType targets.DeviceType = -1
	// NoDeviceID is an unconstrained VirtualDevice.DeviceID.
	NoDeviceID = -1
)

// VirtualDevice says where a value lives and what computes it: a device
// (type and id), the Target code for it is compiled with, and a memory
// scope. Each field may be unconstrained (NoDeviceType, NoDeviceID, nil,
// ""). Note that the Go zero value is NOT unconstrained (its device type 0
// is invalid and its id 0 is a constraint): start from FullyUnconstrained.
type VirtualDevice struct {
	DeviceType  targets.DeviceType
	DeviceID    int
	Target      *targets.Target
	MemoryScope string
}

// FullyUnconstrained returns the VirtualDevice with every field unconstrained.
func FullyUnconstrained() VirtualDevice {
	return VirtualDevice{DeviceType: NoDeviceType, DeviceID: NoDeviceID}
}

// ForTarget returns the VirtualDevice of target t with the given device id
// and memory scope (device type from t's kind).
func ForTarget(t *targets.Target, id int, scope string) VirtualDevice {
	return VirtualDevice{DeviceType: t.Kind.DeviceType, DeviceID: id, Target: t, MemoryScope: scope}
}

// IsFullyUnconstrained reports whether no field is constrained.
func (v VirtualDevice) IsFullyUnconstrained() bool {
	return v.DeviceType <= 0 && v.DeviceID < 0 && v.Target == nil && v.MemoryScope == ""
}

// IsFullyConstrained reports whether every field is constrained.
func (v VirtualDevice) IsFullyConstrained() bool {
	return v.DeviceType > 0 && v.DeviceID >= 0 && v.Target != nil && v.MemoryScope != ""
}

// SameDevice reports whether v and w name the same device (type and id),
// whatever their targets and scopes.
func (v VirtualDevice) SameDevice(w VirtualDevice) bool {
	return v.DeviceType == w.DeviceType && v.DeviceID == w.DeviceID
}

// Equal reports whether v and w are the same virtual device: equal fields,
// targets compared by identity or, failing that, by their printed form.
func (v VirtualDevice) Equal(w VirtualDevice) bool {
	return v.DeviceType == w.DeviceType && v.DeviceID == w.DeviceID &&
		sameTarget(v.Target, w.Target) && v.MemoryScope == w.MemoryScope
}

// sameTarget compares targets by identity, then by kind, printed form and
// label.
func sameTarget(a, b *targets.Target) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return a.Kind == b.Kind && a.Label == b.Label && a.String() == b.String()
}

// String prints `VirtualDevice(cpu:1, target=c, scope=global)`, leaving
// out unconstrained fields; an unconstrained device type or id prints "?".
// The fully unconstrained device prints `VirtualDevice(?)`.
func (v VirtualDevice) String() string {
	if v.IsFullyUnconstrained() {
		return "VirtualDevice(?)"
	}
	var b strings.Builder
	b.WriteString("VirtualDevice(")
	b.WriteString(v.DeviceName())
	if v.Target != nil {
		b.WriteString(", target=")
		b.WriteString(v.Target.String())
	}
	if v.MemoryScope != "" {
		b.WriteString(", scope=")
		b.WriteString(v.MemoryScope)
	}
	b.WriteByte(')')
	return b.String()
}

// DeviceName prints just the device, "cpu:1" ("?" for unconstrained parts).
func (v VirtualDevice) DeviceName() string {
	dt, id := "?", "?"
	if v.DeviceType > 0 {
		dt = v.DeviceType.String()
	}
	if v.DeviceID >= 0 {
		id = strconv.Itoa(v.DeviceID)
	}
	return dt + ":" + id
}

// Join returns the VirtualDevice constrained by both a and b: field by
// field, an unconstrained field takes the other's value and two
// constrained fields must be equal. It returns false on a conflict,
// including a target whose device type disagrees with the joined device
// type.
func Join(a, b VirtualDevice) (VirtualDevice, bool) {
	out := a
	switch {
	case b.DeviceType <= 0:
	case a.DeviceType <= 0:
		out.DeviceType = b.DeviceType
	case a.DeviceType != b.DeviceType:
		return VirtualDevice{}, false
	}
	switch {
	case b.DeviceID < 0:
	case a.DeviceID < 0:
		out.DeviceID = b.DeviceID
	case a.DeviceID != b.DeviceID:
		return VirtualDevice{}, false
	}
	switch {
	case b.Target == nil:
	case a.Target == nil:
		out.Target = b.Target
	case !sameTarget(a.Target, b.Target):
		return VirtualDevice{}, false
	}
	switch {
	case b.MemoryScope == "":
	case a.MemoryScope == "":
		out.MemoryScope = b.MemoryScope
	case a.MemoryScope != b.MemoryScope:
		return VirtualDevice{}, false
	}
	if out.Target != nil && out.DeviceType > 0 && out.Target.Kind.DeviceType != out.DeviceType {
		return VirtualDevice{}, false
	}
	return out, true
}

// Default returns a with its unconstrained fields filled from b. b's
// target is taken only when its device type matches the result's device
// type (a target for another kind of device would be wrong, not a default).
func Default(a, b VirtualDevice) VirtualDevice {
	out := a
	if out.DeviceType <= 0 {
		out.DeviceType = b.DeviceType
	}
	if out.DeviceID < 0 {
		out.DeviceID = b.DeviceID
	}
	if out.Target == nil && b.Target != nil && (out.DeviceType <= 0 || b.Target.Kind.DeviceType == out.DeviceType) {
		out.Target = b.Target
		if out.DeviceType <= 0 {
			out.DeviceType = b.Target.Kind.DeviceType
		}
	}
	if out.MemoryScope == "" {
		out.MemoryScope = b.MemoryScope
	}
	return out
}
