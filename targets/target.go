package targets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/ir"
)

// Target is one configured instance of a Kind. Attrs holds only options
// that were given or have defaults, all validated against the kind; the
// values are int64, bool, string, []string or (for AttrTarget options)
// *Target. Treat a Target as immutable once built: it is shared by the
// stages of a compilation.
type Target struct {
	Kind  *Kind
	Attrs ir.Attrs
	// Host is the target that runs host-side code for this one (nil for a
	// host target itself, or when the host is decided elsewhere).
	Host *Target
	// Label is the name the target has in its compilation's target list
	// ("big" in -t "big=c -mcpu=cortex-a72, little=c"), or "". Two targets
	// of one kind in a compilation are told apart by their labels. It is
	// not part of String (the target string) but of Labelled.
	Label string
}

// New builds a target of kind k from attributes, validating them and
// filling defaults. A "host" attribute (a *Target) becomes Target.Host.
func New(k *Kind, attrs ir.Attrs) (*Target, error) {
	if k == nil {
		return nil, fmt.Errorf("target: nil kind")
	}
	full := ir.Attrs{}
	var host *Target
	for name, v := range attrs {
		o := k.Option(name)
		if o == nil {
			return nil, fmt.Errorf("target %q: unknown option -%s for kind %q", k.Name, name, k.Name)
		}
		if got := valueKind(v); got != o.Kind {
			return nil, fmt.Errorf("target %q: option -%s wants %s, got %s %s", k.Name, name, kindName(o.Kind), kindName(got), formatValueForError(v))
		}
		if tv, ok := v.(*Target); ok && tv == nil {
			return nil, fmt.Errorf("target %q: option -%s is a nil target", k.Name, name)
		}
		if sv, ok := v.(string); ok && !o.allows(sv) {
			return nil, fmt.Errorf("target %q: option -%s is %q, want one of %s", k.Name, name, sv, strings.Join(o.Choices, ", "))
		}
		if name == "host" {
			host = v.(*Target)
			continue
		}
		full[name] = v
	}
	for _, o := range k.AllOptions() {
		if _, ok := full[o.Name]; !ok && o.Default != nil {
			full[o.Name] = o.Default
		}
	}
	t := &Target{Kind: k, Attrs: full, Host: host}
	if err := checkCPU(t); err != nil {
		return nil, fmt.Errorf("target %q: %v", k.Name, err)
	}
	return t, nil
}

func formatValueForError(v any) string {
	if t, ok := v.(*Target); ok {
		if t == nil {
			return "<nil>"
		}
		return strconv.Quote(t.String())
	}
	if ir.KindOf(v) == 0 {
		return fmt.Sprintf("%v (%T)", v, v)
	}
	return ir.FormatAttrValue(v)
}

// Str returns a string attribute or "".
func (t *Target) Str(name string) string { s, _ := t.Attrs[name].(string); return s }

// Int returns an int attribute and whether it is set.
func (t *Target) Int(name string) (int64, bool) { v, ok := t.Attrs[name].(int64); return v, ok }

// Bool returns a bool attribute or false.
func (t *Target) Bool(name string) bool { v, _ := t.Attrs[name].(bool); return v }

// Strings returns a list attribute or nil.
func (t *Target) Strings(name string) []string { v, _ := t.Attrs[name].([]string); return v }

// Target returns a nested-target attribute (an AttrTarget option) or nil.
func (t *Target) Target(name string) *Target { v, _ := t.Attrs[name].(*Target); return v }

// Keys returns the strategy lookup keys: the explicit -keys option or the kind's keys.
func (t *Target) Keys() []string {
	if ks := t.Strings("keys"); ks != nil {
		return ks
	}
	return t.Kind.Keys
}

// DeviceType is the device type of the target's kind.
func (t *Target) DeviceType() DeviceType { return t.Kind.DeviceType }

// Clone returns a copy whose Attrs map may be modified without affecting t
// (attribute values and the host are shared).
func (t *Target) Clone() *Target {
	return &Target{Kind: t.Kind, Attrs: t.Attrs.Clone(), Host: t.Host, Label: t.Label}
}

// WithLabel returns a copy of t labelled l ("" removes the label).
func (t *Target) WithLabel(l string) *Target {
	c := t.Clone()
	c.Label = l
	return c
}

// Labelled prints the target as a target-list element: "LABEL=TARGET"
// when it has a label, else String.
func (t *Target) Labelled() string {
	if t != nil && t.Label != "" {
		return t.Label + "=" + t.String()
	}
	return t.String()
}

// Name is how the target is referred to within its compilation: its
// label, or its kind's name when it has none.
func (t *Target) Name() string {
	if t.Label != "" {
		return t.Label
	}
	return t.Kind.Name
}

// WithHost returns a copy of t whose host is h.
func (t *Target) WithHost(h *Target) *Target {
	c := t.Clone()
	c.Host = h
	return c
}

// Equal reports whether two targets are the same configuration: the same
// kind, the same attributes (defaults included), equal hosts and the same
// label.
func (t *Target) Equal(u *Target) bool {
	if t == nil || u == nil {
		return t == u
	}
	if t.Label != u.Label {
		return false
	}
	return t.SameConfig(u)
}

// SameConfig is Equal without the labels: whether t and u compile alike.
func (t *Target) SameConfig(u *Target) bool {
	if t == nil || u == nil {
		return t == u
	}
	if t.Kind != u.Kind || len(t.Attrs) != len(u.Attrs) || !t.Host.SameConfig(u.Host) {
		return false
	}
	for name, v := range t.Attrs {
		w, ok := u.Attrs[name]
		if !ok || !valueEqual(v, w) {
			return false
		}
	}
	return true
}

func valueEqual(a, b any) bool {
	switch x := a.(type) {
	case *Target:
		y, ok := b.(*Target)
		return ok && x.Equal(y)
	case []string:
		y, ok := b.([]string)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	return valueKind(a) == valueKind(b) && ir.FormatAttrValue(a) == ir.FormatAttrValue(b)
}

// String prints the target in the command-line syntax: the kind name, then
// each non-default attribute as -name=value in sorted order, then the host
// as -host="...". Values that are empty or contain white space, commas,
// quotes, '=', '\' or non-printing characters are written as Go-quoted
// strings. Registry.Parse reads the result back to an Equal target.
func (t *Target) String() string { return t.format(nil) }

// format is String with the words reserved reports (kind and tag names,
// inside a target list) quoted as well.
func (t *Target) format(reserved func(string) bool) string {
	if t == nil {
		return "<nil target>"
	}
	var b strings.Builder
	b.WriteString(t.Kind.Name)
	for _, name := range t.Attrs.Keys() {
		v := t.Attrs[name]
		if o := t.Kind.Option(name); o != nil && o.Default != nil && valueEqual(o.Default, v) {
			continue
		}
		b.WriteString(" -")
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(formatOptionValue(v, reserved))
	}
	if t.Host != nil {
		b.WriteString(" -host=")
		b.WriteString(formatOptionValue(t.Host, reserved))
	}
	return b.String()
}

// needsQuote reports whether s must be quoted to survive the target-string
// syntax as one value or list item.
func needsQuote(s string) bool {
	if s == "" {
		return true
	}
	for _, c := range s {
		if c <= ' ' || c == 0x7f || c > 0x7e || strings.ContainsRune(",\"'=\\{}", c) {
			return true
		}
	}
	return false
}

func quoteIfNeeded(s string, reserved func(string) bool) string {
	if needsQuote(s) || reserved != nil && reserved(s) {
		return strconv.Quote(s)
	}
	return s
}

func formatOptionValue(v any, reserved func(string) bool) string {
	switch x := v.(type) {
	case string:
		return quoteIfNeeded(x, reserved)
	case []string:
		parts := make([]string, len(x))
		for i, s := range x {
			parts[i] = quoteIfNeeded(s, reserved)
		}
		return strings.Join(parts, ",")
	case *Target:
		return quoteIfNeeded(x.format(reserved), reserved)
	}
	return ir.FormatAttrValue(v)
}

// JSON prints the target as a JSON object: "kind" first, then every
// attribute (defaults included) in sorted order, then "host" as a nested
// object. Registry.Parse reads it back to an Equal target.
func (t *Target) JSON() string {
	b, err := t.MarshalJSON()
	if err != nil { // only strings, numbers, bools and nested targets: cannot fail
		panic(err)
	}
	return string(b)
}

// MarshalJSON implements json.Marshaler with the layout of JSON.
func (t *Target) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"kind":`)
	k, _ := json.Marshal(t.Kind.Name)
	b.Write(k)
	write := func(name string, v any) error {
		b.WriteByte(',')
		n, _ := json.Marshal(name)
		b.Write(n)
		b.WriteByte(':')
		var enc []byte
		var err error
		if tv, ok := v.(*Target); ok {
			enc, err = tv.MarshalJSON()
		} else {
			enc, err = json.Marshal(v)
		}
		if err != nil {
			return err
		}
		b.Write(enc)
		return nil
	}
	for _, name := range t.Attrs.Keys() {
		v := t.Attrs[name]
		if s, ok := v.([]string); ok && s == nil {
			v = []string{}
		}
		if err := write(name, v); err != nil {
			return nil, err
		}
	}
	if t.Host != nil {
		if err := write("host", t.Host); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
