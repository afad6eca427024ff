// Package passconfig holds a compilation's options as data, like TVM's
// PassContext: an optimisation level, the passes to skip, and a map of
// typed, documented keys. The command line fills a Config from
// --opt-level, --disable-pass and --pass-config KEY=VALUE; the build
// driver (package driver) hands it to the stages, and the passes that have
// options read their keys from it. It is a leaf package: the passes of
// every IR can depend on it.
//
// A key is declared once, in this package (the Keys list), with its type,
// default, range and documentation; an unknown key or a value of the wrong
// type is an error that lists what is accepted.
package passconfig

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Type is the type of a key's value.
type Type int

// The value types.
const (
	Bool Type = iota
	Int
	String
)

// String names the type as the documentation does.
func (t Type) String() string {
	switch t {
	case Bool:
		return "bool"
	case Int:
		return "int"
	case String:
		return "string"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Key declares one option: its name ("tir.unroll_max_extent"), value type,
// default, accepted range and what it does.
type Key struct {
	// Name is the key, "<ir>.<pass or area>.<option>".
	Name string
	// Type is the value's type.
	Type Type
	// Default is the value when the key is not set: a bool, int64 or
	// string, as Type says.
	Default any
	// Min and Max bound an Int key's value (inclusive).
	Min, Max int64
	// Doc says what the key does, in one line.
	Doc string
}

// The keys kiln knows. Each pass that has options reads them from the
// Config it is given; docs/ARCHITECTURE.md lists them (generated from Keys
// by a test).
var (
	// FuseMaxDepth bounds the number of operators in one fused function.
	FuseMaxDepth = &Key{Name: "graph.fuse_ops.max_depth", Type: Int, Default: int64(256), Min: 1, Max: 1 << 20,
		Doc: "largest number of operators fuse_ops puts into one fused function"}
	// DisableFusion compiles every operator as its own function.
	DisableFusion = &Key{Name: "graph.fuse_ops.disable", Type: Bool, Default: false,
		Doc: "compile every operator as its own function (what --no-fuse sets; also implied by --opt-level 0)"}
	// UnrollMaxExtent is the largest loop extent UnrollLoops expands.
	UnrollMaxExtent = &Key{Name: "tir.unroll_max_extent", Type: Int, Default: int64(32), Min: 0, Max: 4096,
		Doc: "largest constant extent of an unroll-scheduled loop that UnrollLoops expands (0: none; larger loops keep an unroll pragma)"}
	// DisableVectorize makes every vectorized loop a serial one.
	DisableVectorize = &Key{Name: "tir.disable_vectorize", Type: Bool, Default: false,
		Doc: "turn vectorized loops into serial ones before code generation (no vectorization pragmas)"}
	// FoldQDQ folds a QDQ model's QuantizeLinear/DequantizeLinear groups
	// into integer operators at import (onnx.Options.KeepQDQ is its
	// opposite).
	FoldQDQ = &Key{Name: "import.fold_qdq", Type: Bool, Default: true,
		Doc: "fold a QDQ model's QuantizeLinear/DequantizeLinear groups into integer operators at import (qnn.conv2d_requantize and others, fixed-point requantization); false keeps the pairs and computes the operators between them in float"}
	// DisableAssert is TVM's tir.disable_assert, for target TIR passes.
	DisableAssert = &Key{Name: "tir.disable_assert", Type: Bool, Default: false,
		Doc: "tells target TIR passes (UMA's RegisterTIRPassContext) to leave out the run-time checks they would add; kiln's own argument checks stay (they guard artifacts from strangers)"}
)

// keys is the declaration list, in the order Keys returns it (by name).
var keys = sortedKeys(FuseMaxDepth, DisableFusion, UnrollMaxExtent, DisableVectorize, DisableAssert, FoldQDQ)

func sortedKeys(ks ...*Key) []*Key {
	sort.Slice(ks, func(i, j int) bool { return ks[i].Name < ks[j].Name })
	return ks
}

// Keys returns the known keys, sorted by name.
func Keys() []*Key { return append([]*Key(nil), keys...) }

// Lookup returns the key named name, or nil.
func Lookup(name string) *Key {
	for _, k := range keys {
		if k.Name == name {
			return k
		}
	}
	return nil
}

// Optimisation levels: what --opt-level accepts. Passes declare the
// lowest level at which they run; level 0 runs only the passes later
// stages need and compiles every operator as its own function.
const (
	MinOptLevel     = 0
	MaxOptLevel     = 3
	DefaultOptLevel = 3
)

// Config is one compilation's options. The zero value is not ready: use
// New. A nil *Config reads as the defaults.
type Config struct {
	optLevel int
	disabled map[string]bool
	values   map[string]any
}

// New returns the default configuration: DefaultOptLevel, no pass
// disabled, every key at its default.
func New() *Config {
	return &Config{optLevel: DefaultOptLevel, disabled: map[string]bool{}, values: map[string]any{}}
}

// Clone returns a copy of c (New() for nil) that changes independently.
func (c *Config) Clone() *Config {
	out := New()
	if c == nil {
		return out
	}
	out.optLevel = c.optLevel
	for k, v := range c.disabled {
		out.disabled[k] = v
	}
	for k, v := range c.values {
		out.values[k] = v
	}
	return out
}

// OptLevel returns the optimisation level (DefaultOptLevel for nil).
func (c *Config) OptLevel() int {
	if c == nil {
		return DefaultOptLevel
	}
	return c.optLevel
}

// SetOptLevel sets the optimisation level; it must be within
// [MinOptLevel, MaxOptLevel].
func (c *Config) SetOptLevel(n int) error {
	if n < MinOptLevel || n > MaxOptLevel {
		return fmt.Errorf("opt level %d out of range [%d, %d]", n, MinOptLevel, MaxOptLevel)
	}
	c.optLevel = n
	return nil
}

// Disable asks for the pass named name to be skipped. Whether such a pass
// exists, and may be skipped, is checked by the pipeline that runs the
// passes (build), which knows them; an empty name is an error here.
func (c *Config) Disable(name string) error {
	name = strings.TrimSpace(name)
	if name == "" {
		return fmt.Errorf("disable-pass: empty pass name")
	}
	c.disabled[name] = true
	return nil
}

// Disabled reports whether the pass named name is to be skipped.
func (c *Config) Disabled(name string) bool { return c != nil && c.disabled[name] }

// DisabledPasses lists the passes to skip, sorted.
func (c *Config) DisabledPasses() []string {
	if c == nil {
		return nil
	}
	out := make([]string, 0, len(c.disabled))
	for n := range c.disabled {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Set sets key name from its text value: "true"/"false" (also 1/0) for a
// bool, a decimal integer in the key's range for an int, anything for a
// string. An unknown key is an error that lists the known ones.
func (c *Config) Set(name, value string) error {
	k := Lookup(name)
	if k == nil {
		return fmt.Errorf("pass-config: unknown key %q (known keys: %s)", name, knownNames())
	}
	v, err := k.parse(value)
	if err != nil {
		return err
	}
	c.values[k.Name] = v
	return nil
}

// SetAssignment sets a key from "KEY=VALUE" (the --pass-config form).
func (c *Config) SetAssignment(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("pass-config %q: want KEY=VALUE (known keys: %s)", s, knownNames())
	}
	return c.Set(strings.TrimSpace(name), strings.TrimSpace(value))
}

func (k *Key) parse(value string) (any, error) {
	switch k.Type {
	case Bool:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return nil, fmt.Errorf("pass-config %s=%q: want true or false", k.Name, value)
		}
		return b, nil
	case Int:
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("pass-config %s=%q: want an integer in [%d, %d]", k.Name, value, k.Min, k.Max)
		}
		if n < k.Min || n > k.Max {
			return nil, fmt.Errorf("pass-config %s=%d: out of range [%d, %d]", k.Name, n, k.Min, k.Max)
		}
		return n, nil
	}
	return value, nil
}

func knownNames() string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Name
	}
	return strings.Join(names, ", ")
}

// value returns the key's value in c, or its default; it panics when k is
// not of type t, which is a programming error in the pass reading it.
func (c *Config) value(k *Key, t Type) any {
	if k.Type != t {
		panic(fmt.Sprintf("passconfig: key %s is a %s, read as a %s", k.Name, k.Type, t))
	}
	if c != nil {
		if v, ok := c.values[k.Name]; ok {
			return v
		}
	}
	return k.Default
}

// Bool returns the value of a Bool key.
func (c *Config) Bool(k *Key) bool { return c.value(k, Bool).(bool) }

// Int returns the value of an Int key.
func (c *Config) Int(k *Key) int64 { return c.value(k, Int).(int64) }

// Str returns the value of a String key.
func (c *Config) Str(k *Key) string { return c.value(k, String).(string) }

// String prints the configuration canonically: the opt level, the
// disabled passes, then every key set to a value other than its default,
// sorted ("opt_level=3 disable=simplify_expr tir.unroll_max_extent=8").
func (c *Config) String() string {
	parts := []string{fmt.Sprintf("opt_level=%d", c.OptLevel())}
	for _, n := range c.DisabledPasses() {
		parts = append(parts, "disable="+n)
	}
	for _, k := range keys {
		if c == nil {
			break
		}
		if v, ok := c.values[k.Name]; ok && v != k.Default {
			parts = append(parts, fmt.Sprintf("%s=%v", k.Name, v))
		}
	}
	return strings.Join(parts, " ")
}
