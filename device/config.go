package device

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/targets"
)

// DefaultMemoryScope is the memory scope of the configuration's default
// devices (plain device memory).
const DefaultMemoryScope = "global"

// ModuleAttr is the graph.Module.Attrs key the CompilationConfig is stored under.
const ModuleAttr = "compilation_config"

// LabelResolver maps a target label (the part of an on_device "label:id"
// string before the colon) to a Target and the device id the bare label
// means. The target package's label registry satisfies it through a small
// adapter; tests use a map.
type LabelResolver interface {
	Resolve(label string) (*targets.Target, int, error)
}

// CompilationConfig is the single source of truth for the targets of one
// compilation and the default devices. It is built once from the user's
// target list, attached to the module, and read by every later stage:
// passes never construct Targets of their own, they take them from here
// (FindPrimitiveTarget, CanonicalVirtualDevice) or from the VirtualDevice
// PlanDevices recorded for a call (DeviceOf).
type CompilationConfig struct {
	// Host is the target for host-side code (control flow, shape
	// computation, the executor).
	Host *targets.Target
	// Primitives are the targets primitive operators may be compiled for,
	// in the user's order; Host is among them.
	Primitives []*targets.Target
	// DefaultPrimitive is the device of primitive calls no annotation constrains.
	DefaultPrimitive VirtualDevice
	// HostDevice is the device of everything else left unconstrained.
	HostDevice VirtualDevice
	// Labels resolves on_device labels (nil: only the built-in names, see
	// ResolveDevice).
	Labels LabelResolver

	// byType is the canonical target of each device type.
	byType map[targets.DeviceType]*targets.Target
	// ids is the device id of each target (DeviceID).
	ids map[*targets.Target]int
}

// DeviceID is the device id a target runs on when nothing says otherwise:
// its -from_device option when given (UMA's target attribute); else the
// host is 0 of its device type; every other target of a host kind
// (one that generates its own code, such as the second `c` target of a
// big.LITTLE compilation) is numbered in list order after the host's
// device type's 0, or from 0 in another device type; targets of other
// kinds (external codegens) run on their device type's device 0. A label
// and a kind name resolve to their target on this device.
func (c *CompilationConfig) DeviceID(t *targets.Target) int {
	if t == nil {
		return 0
	}
	return c.ids[c.OwnTarget(t)]
}

// NewCompilationConfig builds the configuration from the user's targets
// (host last by convention), an optional explicit host, and the device
// type of primitive calls nothing else constrains (0 means cpu).
//
// Errors: an empty list, a nil target, two targets of one kind, a host
// that conflicts with a listed target of its kind, and a default device
// type with no target. Without an explicit host the last target of device
// type cpu is the host; when there is none, a default `c` target is made
// here (the only place kiln makes a target nobody asked for).
//
// Each device type has one canonical target, used for annotations and
// copies that give only a device type: the host when it has that device
// type, otherwise the first listed target of that type.
func NewCompilationConfig(tgts []*targets.Target, host *targets.Target, defaultDeviceType targets.DeviceType) (*CompilationConfig, error) {
	if len(tgts) == 0 {
		return nil, fmt.Errorf("no targets given")
	}
	byName := map[string]*targets.Target{}
	var prims []*targets.Target
	for i, t := range tgts {
		if t == nil || t.Kind == nil {
			return nil, fmt.Errorf("target %d is nil", i)
		}
		// Targets of one kind are told apart by their labels (Name).
		if prev, dup := byName[t.Name()]; dup {
			return nil, fmt.Errorf("two targets named %q: %q and %q (label targets of one kind: a=%s ..., b=%s ...)", t.Name(), prev.Labelled(), t.Labelled(), t.Kind.Name, t.Kind.Name)
		}
		byName[t.Name()] = t
		if !t.Kind.Host {
			// Partitioning gives regions to kinds (a function's
			// Compiler attribute names the kind), so a second target of
			// an external kind would silently get nothing.
			for _, p := range prims {
				if p.Kind == t.Kind {
					return nil, fmt.Errorf("targets %q and %q are both of the external kind %q: regions are assigned by kind, so list it once (two targets of one kind are for code-generating kinds such as c)", p.Labelled(), t.Labelled(), t.Kind.Name)
				}
			}
		}
		prims = append(prims, t)
	}
	if host == nil {
		for _, t := range prims {
			if t.Kind.DeviceType == targets.CPU {
				host = t
			}
		}
		if host == nil {
			h, err := targets.New(targets.C, nil)
			if err != nil {
				return nil, fmt.Errorf("default host target: %v", err)
			}
			host = h
		}
	}
	if host.Kind == nil {
		return nil, fmt.Errorf("host target has no kind")
	}
	if same, ok := byName[host.Name()]; ok {
		if !sameTarget(same, host) {
			return nil, fmt.Errorf("host target %q conflicts with target %q of the same kind", host.String(), same.String())
		}
		host = same
	} else {
		prims = append(prims, host)
	}
	cfg := &CompilationConfig{
		Host:       host,
		Primitives: prims,
		byType:     map[targets.DeviceType]*targets.Target{},
	}
	for _, t := range prims {
		dt := t.Kind.DeviceType
		if _, ok := cfg.byType[dt]; !ok {
			cfg.byType[dt] = t
		}
	}
	cfg.byType[host.Kind.DeviceType] = host
	cfg.ids = map[*targets.Target]int{}
	next := map[targets.DeviceType]int{host.Kind.DeviceType: 1}
	for _, t := range prims {
		if id, ok := t.Int("from_device"); ok {
			if id < 0 || id >= 1<<20 {
				return nil, fmt.Errorf("target %q: -from_device=%d: want a device id from 0 to %d", t.Labelled(), id, 1<<20-1)
			}
			cfg.ids[t] = int(id)
			continue
		}
		if t == host || !t.Kind.Host {
			continue
		}
		dt := t.Kind.DeviceType
		cfg.ids[t] = next[dt]
		next[dt]++
	}
	if err := cfg.checkDeviceIDs(); err != nil {
		return nil, err
	}
	if defaultDeviceType <= 0 {
		defaultDeviceType = targets.CPU
	}
	def, err := cfg.FindPrimitiveTarget(defaultDeviceType)
	if err != nil {
		return nil, fmt.Errorf("default device: %v", err)
	}
	cfg.DefaultPrimitive = ForTarget(def, cfg.ids[def], DefaultMemoryScope)
	cfg.HostDevice = ForTarget(host, cfg.ids[host], DefaultMemoryScope)
	return cfg, nil
}

// FindPrimitiveTarget returns the canonical target of a device type (see
// NewCompilationConfig), or an error naming the device type when no target
// has it.
func (c *CompilationConfig) FindPrimitiveTarget(dt targets.DeviceType) (*targets.Target, error) {
	if t, ok := c.byType[dt]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("no target for device type %s among %s", dt, c.targetList())
}

// targetList prints the targets for error messages.
func (c *CompilationConfig) targetList() string {
	parts := make([]string, len(c.Primitives))
	for i, t := range c.Primitives {
		parts[i] = strconv.Quote(t.Labelled())
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// OwnTarget returns the configuration's own target equal to t (the same
// pointer, or the same kind, printed form and label), or nil. An
// unlabelled t (a --target-label target, say) also matches the one
// target it compiles like when exactly one does.
func (c *CompilationConfig) OwnTarget(t *targets.Target) *targets.Target {
	for _, p := range c.Primitives {
		if p == t {
			return p
		}
	}
	for _, p := range c.Primitives {
		if sameTarget(p, t) {
			return p
		}
	}
	if t.Label != "" {
		return nil
	}
	var like *targets.Target
	for _, p := range c.Primitives {
		if p.Kind == t.Kind && p.String() == t.String() {
			if like != nil {
				return nil
			}
			like = p
		}
	}
	return like
}

// CanonicalVirtualDevice completes vd from the configuration: a missing
// device type comes from the target, a missing target from the target
// whose own device vd is (DeviceID), else the device type's canonical
// target, and a target given from elsewhere is replaced
// by the configuration's identical target. Unconstrained id and scope stay
// unconstrained. It fails for a device type with no target and for a
// target not among the configuration's.
func (c *CompilationConfig) CanonicalVirtualDevice(vd VirtualDevice) (VirtualDevice, error) {
	if vd.Target != nil {
		own := c.OwnTarget(vd.Target)
		if own == nil {
			return vd, fmt.Errorf("target %q is not among the compilation targets %s", vd.Target.String(), c.targetList())
		}
		vd.Target = own
		if vd.DeviceType <= 0 {
			vd.DeviceType = own.Kind.DeviceType
		} else if vd.DeviceType != own.Kind.DeviceType {
			return vd, fmt.Errorf("target %q runs on %s, not %s", own.String(), own.Kind.DeviceType, vd.DeviceType)
		}
		return vd, nil
	}
	if vd.DeviceType <= 0 {
		return vd, nil
	}
	if t := c.deviceTarget(vd.DeviceType, vd.DeviceID); t != nil {
		vd.Target = t
		return vd, nil
	}
	t, err := c.FindPrimitiveTarget(vd.DeviceType)
	if err != nil {
		return vd, err
	}
	vd.Target = t
	return vd, nil
}

// checkDeviceIDs refuses two code-generating targets on one device: a
// device runs one target's code (external targets share their device
// with the code-generating one there).
func (c *CompilationConfig) checkDeviceIDs() error {
	type dev struct {
		dt targets.DeviceType
		id int
	}
	seen := map[dev]*targets.Target{}
	for _, t := range c.Primitives {
		if !t.Kind.Host {
			continue
		}
		d := dev{t.Kind.DeviceType, c.ids[t]}
		if prev, dup := seen[d]; dup {
			return fmt.Errorf("targets %q and %q both run on %s:%d: give one another -from_device", prev.Labelled(), t.Labelled(), d.dt, d.id)
		}
		seen[d] = t
	}
	return nil
}

// deviceTarget returns the code-generating target (of a host kind) whose
// device is dt:id (the big core's cpu:1), or nil. Device copies name only
// devices: this maps their ends back to the targets placements put there.
func (c *CompilationConfig) deviceTarget(dt targets.DeviceType, id int) *targets.Target {
	if id < 0 {
		return nil
	}
	for _, t := range c.Primitives {
		if t.Kind.Host && t.Kind.DeviceType == dt && c.ids[t] == id {
			return t
		}
	}
	return nil
}

// ParseDeviceString splits an on_device device string "label" or
// "label:id" (id a non-negative integer). hasID reports whether an id was
// written.
func ParseDeviceString(s string) (label string, id int, hasID bool, err error) {
	s = strings.TrimSpace(s)
	label, idText, hasID := strings.Cut(s, ":")
	label = strings.TrimSpace(label)
	if label == "" {
		return "", 0, false, fmt.Errorf("device %q has an empty label", s)
	}
	if strings.ContainsAny(label, " \t") {
		return "", 0, false, fmt.Errorf("device %q: label contains white space", s)
	}
	if !hasID {
		return label, 0, false, nil
	}
	n, perr := strconv.Atoi(strings.TrimSpace(idText))
	if perr != nil || n < 0 {
		return "", 0, false, fmt.Errorf("device %q: device id %q is not a non-negative integer", s, idText)
	}
	return label, n, true, nil
}

// ResolveDevice turns an on_device device string, "label" or "label:id",
// into a canonical VirtualDevice. The label is looked up with Labels
// first (when set); failing that, the built-in names are a label of a
// target of the configuration ("little" in -t "big=c ..., little=c ..."),
// a target kind name ("c") or a device type name ("cpu", "ext_dev"), each
// meaning its target on that target's device (DeviceID).
// An explicit id overrides the label's id. The resolved target must be one
// of the configuration's targets.
func (c *CompilationConfig) ResolveDevice(s string) (VirtualDevice, error) {
	label, id, hasID, err := ParseDeviceString(s)
	if err != nil {
		return VirtualDevice{}, err
	}
	var t *targets.Target
	baseID := 0
	var labelErr error
	if c.Labels != nil {
		t, baseID, labelErr = c.Labels.Resolve(label)
		if labelErr != nil {
			t = nil
		}
	}
	if t == nil {
		t = c.builtinLabel(label)
		baseID = c.DeviceID(t)
	}
	if t == nil {
		if labelErr != nil && !errors.Is(labelErr, targets.ErrUnknownLabel) {
			return VirtualDevice{}, fmt.Errorf("device %q: %v", s, labelErr)
		}
		return VirtualDevice{}, fmt.Errorf("device %q: unknown label %q (not a registered label, target kind or device type of %s)", s, label, c.targetList())
	}
	if !hasID {
		id = baseID
	}
	vd, err := c.CanonicalVirtualDevice(VirtualDevice{DeviceType: NoDeviceType, DeviceID: id, Target: t})
	if err != nil {
		return VirtualDevice{}, fmt.Errorf("device %q: %v", s, err)
	}
	return vd, nil
}

// builtinLabel resolves a target's label, a kind name (its unlabelled
// target, else its first) or a device type name, or returns nil.
func (c *CompilationConfig) builtinLabel(label string) *targets.Target {
	for _, t := range c.Primitives {
		if t.Label == label {
			return t
		}
	}
	for _, t := range c.Primitives {
		if t.Label == "" && t.Kind.Name == label {
			return t
		}
	}
	for _, t := range c.Primitives {
		if t.Kind.Name == label {
			return t
		}
	}
	for dt, t := range c.byType {
		if dt.String() == label {
			return t
		}
	}
	return nil
}

// Attach stores the configuration on the module (Attrs[ModuleAttr]). It
// modifies mod's attribute map: call it when setting the module up, before
// the passes run.
func (c *CompilationConfig) Attach(mod *graph.Module) {
	if mod.Attrs == nil {
		mod.Attrs = map[string]any{}
	}
	mod.Attrs[ModuleAttr] = c
}

// FromModule returns the configuration attached to the module, or an error
// when there is none.
func FromModule(mod *graph.Module) (*CompilationConfig, error) {
	c, ok := mod.Attrs[ModuleAttr].(*CompilationConfig)
	if !ok || c == nil {
		return nil, fmt.Errorf("module has no compilation configuration (device.CompilationConfig.Attach)")
	}
	return c, nil
}

// ResolveTarget is the target of ResolveDevice(s): what partitioning's
// placement (partition.Options.ResolveDevice) asks.
func (c *CompilationConfig) ResolveTarget(s string) (*targets.Target, error) {
	vd, err := c.ResolveDevice(s)
	return vd.Target, err
}
