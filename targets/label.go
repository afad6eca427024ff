package targets

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// ErrUnknownLabel is wrapped by Lookup errors for labels that are not
// registered.
var ErrUnknownLabel = errors.New("unknown target label")

// ErrBadDevice is wrapped by errors for malformed "label:device_id"
// placements.
var ErrBadDevice = errors.New("bad device id")

// LabelRegistry names targets with labels ("little" -> c
// -mcpu=cortex-a53), so that placements can say "little" or "little:1"
// instead of repeating a target. Labels registered here are static: built
// into the compiler (e.g. at init). Per-compilation labels go in a Labels
// value layered on top.
type LabelRegistry struct {
	mu     sync.RWMutex
	labels map[string]*Target
}

// NewLabelRegistry makes an empty label registry.
func NewLabelRegistry() *LabelRegistry { return &LabelRegistry{labels: map[string]*Target{}} }

// DefaultLabels holds kiln's built-in (static) labels; empty unless a
// backend registers some.
var DefaultLabels = NewLabelRegistry()

func checkLabel(label string) error {
	if !validName(label) {
		return fmt.Errorf("target label %q: a label is letters, digits, '_', '-' and '.', starting with a letter", label)
	}
	return nil
}

// RegisterLabel names t. An ill-formed label, a nil target and a label
// registered before are errors.
func (r *LabelRegistry) RegisterLabel(label string, t *Target) error {
	if err := checkLabel(label); err != nil {
		return err
	}
	if t == nil {
		return fmt.Errorf("target label %q: nil target", label)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.labels[label]; dup {
		return fmt.Errorf("target label %q is already registered", label)
	}
	r.labels[label] = t
	return nil
}

// Lookup returns the target a label names.
func (r *LabelRegistry) Lookup(label string) (*Target, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.labels[label]
	return t, ok
}

// Names lists the labels in sorted order.
func (r *LabelRegistry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.labels))
	for l := range r.labels {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

// Labels is the set of labels of one compilation: the static labels of a
// LabelRegistry plus labels added for this compilation (from
// --target-label flags). A per-compilation label may not reuse a static
// label's name, so a label always means one target.
type Labels struct {
	static *LabelRegistry
	own    map[string]*Target
}

// NewLabels makes a compilation's label set on top of static (nil: no
// static labels).
func NewLabels(static *LabelRegistry) *Labels {
	if static == nil {
		static = NewLabelRegistry()
	}
	return &Labels{static: static, own: map[string]*Target{}}
}

// Add names t for this compilation. An ill-formed label, a nil target and
// a label already defined (here or statically) are errors.
func (l *Labels) Add(label string, t *Target) error {
	if err := checkLabel(label); err != nil {
		return err
	}
	if t == nil {
		return fmt.Errorf("target label %q: nil target", label)
	}
	if _, dup := l.own[label]; dup {
		return fmt.Errorf("target label %q given twice", label)
	}
	if _, dup := l.static.Lookup(label); dup {
		return fmt.Errorf("target label %q is a built-in label", label)
	}
	l.own[label] = t
	return nil
}

// AddFlag parses one --target-label flag value (see ParseLabelFlag)
// against r and adds the label.
func (l *Labels) AddFlag(r *Registry, flag string) error {
	label, t, err := ParseLabelFlag(r, flag)
	if err != nil {
		return err
	}
	return l.Add(label, t)
}

// Names lists every label (static and per-compilation) in sorted order.
func (l *Labels) Names() []string {
	names := l.static.Names()
	for n := range l.own {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Target returns the target a bare label names.
func (l *Labels) Target(label string) (*Target, bool) {
	if t, ok := l.own[label]; ok {
		return t, true
	}
	return l.static.Lookup(label)
}

// Lookup resolves a placement "label" or "label:device_id" to its target
// and device id (0 when absent). The device id is a decimal integer in
// [0, 2^31). Unknown labels wrap ErrUnknownLabel, malformed ids
// ErrBadDevice.
func (l *Labels) Lookup(placement string) (*Target, int, error) {
	label, id, err := SplitPlacement(placement)
	if err != nil {
		return nil, 0, err
	}
	t, ok := l.Target(label)
	if !ok {
		known := strings.Join(l.Names(), ", ")
		if known == "" {
			known = "none defined"
		}
		return nil, 0, fmt.Errorf("placement %q: %w %q (labels: %s)", placement, ErrUnknownLabel, label, known)
	}
	return t, id, nil
}

// LabelOf returns a label naming a target Equal to t (the first in sorted
// order), for printing placements.
func (l *Labels) LabelOf(t *Target) (string, bool) {
	for _, n := range l.Names() {
		if u, _ := l.Target(n); u.Equal(t) {
			return n, true
		}
	}
	return "", false
}

// SplitPlacement splits "label" or "label:device_id" without resolving the
// label.
func SplitPlacement(placement string) (string, int, error) {
	label, idText, hasID := strings.Cut(placement, ":")
	if err := checkLabel(label); err != nil {
		return "", 0, fmt.Errorf("placement %q: %w", placement, err)
	}
	if !hasID {
		return label, 0, nil
	}
	id, err := strconv.ParseInt(idText, 10, 32)
	if err != nil || id < 0 || strings.HasPrefix(idText, "+") {
		return "", 0, fmt.Errorf("placement %q: %w %q: want a non-negative decimal integer", placement, ErrBadDevice, idText)
	}
	return label, int(id), nil
}

// FormatPlacement is the inverse of SplitPlacement: "label" for device 0,
// else "label:id".
func FormatPlacement(label string, id int) string {
	if id == 0 {
		return label
	}
	return label + ":" + strconv.Itoa(id)
}

// ParseLabelFlag reads the value of a --target-label flag: LABEL=TARGET,
// where TARGET is anything Registry.Parse accepts (a target string, a tag
// or a JSON object), optionally wrapped in one pair of quotes as it is
// when the shell did not remove them:
//
//	little="c -mcpu=cortex-a53"
//	little=c -mcpu=cortex-a53      (the shell removed the quotes)
//	big=arm-cortex-a72
//	npu={"kind": "c", "opt": 2}
func ParseLabelFlag(r *Registry, flag string) (string, *Target, error) {
	label, spec, ok := strings.Cut(flag, "=")
	label = strings.TrimSpace(label)
	if !ok {
		return "", nil, fmt.Errorf("--target-label %q: %w: want LABEL=TARGET", flag, ErrSyntax)
	}
	if err := checkLabel(label); err != nil {
		return "", nil, fmt.Errorf("--target-label %q: %w", flag, err)
	}
	spec = strings.TrimSpace(spec)
	if spec != "" && (spec[0] == '"' || spec[0] == '\'') {
		if n, err := quotedLen(spec); err == nil && n == len(spec) {
			s, _, err := readQuoted(spec)
			if err != nil {
				return "", nil, fmt.Errorf("--target-label %q: %w", flag, err)
			}
			spec = s
		} else if err != nil {
			return "", nil, fmt.Errorf("--target-label %q: %w", flag, err)
		}
	}
	t, err := r.Parse(spec)
	if err != nil {
		return "", nil, fmt.Errorf("--target-label %s: %w", label, err)
	}
	return label, t, nil
}
