package targets

import (
	"fmt"
	"sort"
	"sync"

	"github.com/kiln-dev/kiln/ir"
)

// DeviceType is a DLPack-style device type: ir.DeviceType, kiln's one
// device-type enum.
type DeviceType = ir.DeviceType

// Device types kiln knows (ir.CPU and ir.ExtDev).
const (
	CPU    = ir.CPU
	ExtDev = ir.ExtDev
)

// Option declares one attribute a target kind accepts. Kind is one of
// ir.AttrString, ir.AttrInt, ir.AttrBool, ir.AttrStrings.
type Option struct {
	Name    string
	Kind    ir.AttrKind
	Default any // nil: no default (the attribute is absent unless given)
	Doc     string
	// Choices, for a string option, are the values it accepts (nil:
	// any string); a target with another value is an error that lists
	// them.
	Choices []string
}

// Kind is a registered family of targets.
type Kind struct {
	// Name is what target strings start with ("c", "dnnl").
	Name string
	// DeviceType is where code of this kind runs.
	DeviceType DeviceType
	// Keys are the default keys (generic categories such as "cpu") used to
	// find operator strategies when none is registered for the kind itself.
	Keys []string
	// Options are the attributes the kind accepts besides the common ones.
	Options []Option
	// Doc is a one-line description for `kiln targets`.
	Doc string
	// Host reports that targets of this kind can run host-side code (the
	// graph executor's glue, shape computations). ParseList picks the last
	// such target of a CPU kind as the host. True for "c".
	Host bool
	// Flow is the kind's part in the compilation flow: hooks, partitioning
	// (support predicate, patterns), TIR passes and C code generation, a
	// *backend.Flow (package backend; backend.Of reads it). nil means
	// kiln's default flow everywhere and no offloading.
	Flow Flow
}

// Flow is what a kind plugs into the compilation flow. Package backend
// holds it as typed Go values (backend.Flow implements this interface and
// backend.Of returns it); it is an interface here so that this package,
// which only describes targets, stays a leaf that needs neither the IRs
// nor cgo.
type Flow interface {
	// HookNames lists the flow hooks the kind registers, in flow order
	// ("RelayToRuntime", "RelayToTIR", "TIRToRuntime", "ConstantUpdater").
	HookNames() []string
}

// HookNames lists the hooks the kind registers, in flow order (none
// without a Flow).
func (k *Kind) HookNames() []string {
	if k.Flow == nil {
		return nil
	}
	return k.Flow.HookNames()
}

// AttrTarget is the option kind of a nested target: its value in
// Target.Attrs is a *Target. In a target string it is written as a quoted
// target string (`-fallback="c -mcpu=native"`), in JSON as an object or a
// string. The common option "host" has this kind but is stored in
// Target.Host rather than in Attrs.
const AttrTarget ir.AttrKind = 64

// kindName names an option kind, including AttrTarget.
func kindName(k ir.AttrKind) string {
	if k == AttrTarget {
		return "target"
	}
	return k.String()
}

// valueKind is ir.KindOf extended with *Target values.
func valueKind(v any) ir.AttrKind {
	if _, ok := v.(*Target); ok {
		return AttrTarget
	}
	return ir.KindOf(v)
}

// commonOptions are accepted by every kind.
var commonOptions = []Option{
	{Name: "keys", Kind: ir.AttrStrings, Doc: "strategy lookup keys (default: the kind's keys)"},
	{Name: "model", Kind: ir.AttrString, Doc: "device model name"},
	{Name: "tag", Kind: ir.AttrString, Doc: "tag this target came from"},
	{Name: "device", Kind: ir.AttrString, Doc: "device name"},
	{Name: "libs", Kind: ir.AttrStrings, Doc: "external libraries to link"},
	{Name: "host", Kind: AttrTarget, Doc: "target that runs this target's host-side code (stored in Target.Host)"},
	{Name: "from_device", Kind: ir.AttrInt, Doc: "device id the target's code runs on (default: the host 0, other code-generating targets of its device type 1, 2, ... in list order, others 0)"},
}

// allows reports whether v is one of the option's choices (any value
// when it has none).
func (o *Option) allows(v string) bool {
	if len(o.Choices) == 0 {
		return true
	}
	for _, c := range o.Choices {
		if c == v {
			return true
		}
	}
	return false
}

// Option returns the declaration of an option (common ones included), or nil.
func (k *Kind) Option(name string) *Option {
	for i := range k.Options {
		if k.Options[i].Name == name {
			return &k.Options[i]
		}
	}
	for i := range commonOptions {
		if commonOptions[i].Name == name {
			return &commonOptions[i]
		}
	}
	return nil
}

// AllOptions lists the kind's own options then the common ones.
func (k *Kind) AllOptions() []Option {
	return append(append([]Option{}, k.Options...), commonOptions...)
}

// Registry holds target kinds by name, and the tags (named target
// configurations) defined over them.
type Registry struct {
	mu    sync.RWMutex
	kinds map[string]*Kind
	tags  *TagRegistry
	// unavailable maps a kind this build or machine lacks to why
	// (RegisterUnavailable).
	unavailable map[string]string
}

// RegisterUnavailable records that the kind name exists but is not
// available in this process, and why (a backend whose library could not be
// loaded): asking for it is then an error that says so, not merely an
// unknown kind. Registering the kind later wins.
func (r *Registry) RegisterUnavailable(name, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unavailable == nil {
		r.unavailable = map[string]string{}
	}
	r.unavailable[name] = why
}

// NewRegistry makes an empty registry (with an empty tag registry).
func NewRegistry() *Registry {
	r := &Registry{kinds: map[string]*Kind{}}
	r.tags = &TagRegistry{kinds: r, tags: map[string]*Tag{}}
	return r
}

// Tags returns the registry's tags.
func (r *Registry) Tags() *TagRegistry { return r.tags }

// validName reports whether s can name a kind, tag or label: a letter, then
// letters, digits, '_', '-' or '.'.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// Register adds a kind. A duplicate name, an empty name or an ill-declared
// option is an error.
func (r *Registry) Register(k *Kind) error {
	if k.Name == "" {
		return fmt.Errorf("target kind with an empty name")
	}
	seen := map[string]bool{}
	for _, o := range k.Options {
		if o.Name == "" || seen[o.Name] {
			return fmt.Errorf("target kind %q: empty or repeated option name %q", k.Name, o.Name)
		}
		seen[o.Name] = true
		for _, c := range commonOptions {
			if c.Name == o.Name {
				return fmt.Errorf("target kind %q: option %q is reserved", k.Name, o.Name)
			}
		}
		switch o.Kind {
		case ir.AttrString, ir.AttrInt, ir.AttrBool, ir.AttrStrings:
		case AttrTarget:
			if o.Default != nil {
				return fmt.Errorf("target kind %q: option %q of kind target cannot have a default", k.Name, o.Name)
			}
		default:
			return fmt.Errorf("target kind %q: option %q has unsupported kind %s", k.Name, o.Name, kindName(o.Kind))
		}
		if o.Default != nil && ir.KindOf(o.Default) != o.Kind {
			return fmt.Errorf("target kind %q: option %q default %v is not a %s", k.Name, o.Name, o.Default, o.Kind)
		}
		if len(o.Choices) > 0 && o.Kind != ir.AttrString {
			return fmt.Errorf("target kind %q: option %q has choices but is not a string option", k.Name, o.Name)
		}
		if d, ok := o.Default.(string); ok && len(o.Choices) > 0 && !o.allows(d) {
			return fmt.Errorf("target kind %q: option %q default %q is not one of its choices", k.Name, o.Name, d)
		}
	}
	if !validName(k.Name) {
		return fmt.Errorf("target kind %q: a kind name is letters, digits, '_', '-' and '.', starting with a letter", k.Name)
	}
	if _, isTag := r.Tags().Lookup(k.Name); isTag {
		return fmt.Errorf("target kind %q: the name is already a tag", k.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.kinds[k.Name]; dup {
		return fmt.Errorf("target kind %q is already registered", k.Name)
	}
	r.kinds[k.Name] = k
	return nil
}

// Lookup finds a kind by name.
func (r *Registry) Lookup(name string) (*Kind, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k, ok := r.kinds[name]
	return k, ok
}

// Kinds lists the registered kinds sorted by name.
func (r *Registry) Kinds() []*Kind {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Kind, 0, len(r.kinds))
	for _, k := range r.kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Default is the registry kiln's built-in kinds live in and the CLI parses
// against. Backends register their kinds into it (or into their own registry
// for tests).
var Default = NewRegistry()

// C is the host C target kind: generated C compiled by the system compiler.
var C = mustRegister(&Kind{
	Name:       "c",
	DeviceType: CPU,
	Keys:       []string{"cpu"},
	Doc:        "host code generated as C and built with the system C compiler",
	Host:       true,
	Options: []Option{
		{Name: "mcpu", Kind: ir.AttrString, Default: "native", Doc: "CPU to generate code for: native (this machine, probed) or a known CPU (`kiln targets --cpus`; x86-64 for a portable artifact)"},
		{Name: "mattr", Kind: ir.AttrStrings, Doc: "CPU features added (+f) or removed (-f), e.g. -mattr=-avx512f"},
		{Name: "opt", Kind: ir.AttrInt, Default: int64(3), Doc: "C optimisation level (-O)"},
		{Name: "cflags", Kind: ir.AttrStrings, Doc: "extra C compiler flags"},
		{Name: "cc", Kind: ir.AttrString, Doc: "C compiler to use (default $CC or cc)"},
	},
})

// Built-in tags of the Default registry.
func init() {
	for _, t := range []Tag{
		{Name: "x86-avx512", Config: "c -mcpu=skylake-avx512", Doc: "x86-64 with AVX-512 (Skylake-SP and later)"},
		{Name: "x86-avx2", Config: "c -mcpu=haswell", Doc: "x86-64 with AVX2 and FMA (Haswell and later)"},
		{Name: "arm-cortex-a53", Config: "c -mcpu=cortex-a53", Doc: "64-bit Arm Cortex-A53 (a LITTLE core)"},
		{Name: "arm-cortex-a72", Config: "c -mcpu=cortex-a72", Doc: "64-bit Arm Cortex-A72 (a big core)"},
	} {
		if err := Default.Tags().Register(t); err != nil {
			panic(err)
		}
	}
}

func mustRegister(k *Kind) *Kind {
	if err := Default.Register(k); err != nil {
		panic(err)
	}
	return k
}
