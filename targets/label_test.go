package targets

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestLabels(t *testing.T) {
	r := testRegistry(t)
	static := NewLabelRegistry()
	cpu, _ := r.Parse("c -mcpu=native")
	if err := static.RegisterLabel("cpu", cpu); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		label string
		says  string
	}{
		{"cpu", "already registered"},
		{"", "a label is"},
		{"a:b", "a label is"},
		{"9x", "a label is"},
	} {
		if err := static.RegisterLabel(c.label, cpu); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("RegisterLabel(%q) = %v, want %q", c.label, err, c.says)
		}
	}
	if err := static.RegisterLabel("x", nil); err == nil {
		t.Error("nil target accepted")
	}

	labels := NewLabels(static)
	for _, flag := range []string{
		`little="c -mcpu=cortex-a53"`,
		`big=c -mcpu=cortex-a72`,
		`avx='x86-avx512'`,
		`npu={"kind": "npu", "cores": 2}`,
	} {
		if err := labels.AddFlag(r, flag); err != nil {
			t.Fatalf("AddFlag(%q): %v", flag, err)
		}
	}
	if got, want := labels.Names(), []string{"avx", "big", "cpu", "little", "npu"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	cases := []struct {
		placement string
		target    string
		id        int
	}{
		{"little", "c -mcpu=cortex-a53", 0},
		{"little:0", "c -mcpu=cortex-a53", 0},
		{"big:3", "c -mcpu=cortex-a72", 3},
		{"cpu:1", "c -mcpu=native", 1},
		{"avx", "c -mcpu=skylake-avx512 -tag=x86-avx512", 0},
		{"npu:2147483647", "npu -cores=2", 2147483647},
	}
	for _, c := range cases {
		tg, id, err := labels.Lookup(c.placement)
		if err != nil {
			t.Errorf("Lookup(%q): %v", c.placement, err)
			continue
		}
		if tg.String() != c.target || id != c.id {
			t.Errorf("Lookup(%q) = %s, %d; want %s, %d", c.placement, tg, id, c.target, c.id)
		}
	}
	errCases := []struct {
		placement string
		class     error
		says      string
	}{
		{"medium", ErrUnknownLabel, `"medium" (labels: avx, big, cpu, little, npu)`},
		{"medium:1", ErrUnknownLabel, `"medium"`},
		{"little:", ErrBadDevice, `""`},
		{"little:x", ErrBadDevice, `"x"`},
		{"little:-1", ErrBadDevice, `"-1"`},
		{"little:+1", ErrBadDevice, `"+1"`},
		{"little:1.5", ErrBadDevice, `"1.5"`},
		{"little:2147483648", ErrBadDevice, `"2147483648"`},
		{"little:1:2", ErrBadDevice, `"1:2"`},
		{":1", nil, "a label is"},
		{"", nil, "a label is"},
	}
	for _, c := range errCases {
		_, _, err := labels.Lookup(c.placement)
		if err == nil {
			t.Errorf("Lookup(%q) succeeded", c.placement)
			continue
		}
		if c.class != nil && !errors.Is(err, c.class) {
			t.Errorf("Lookup(%q) error %q is not %v", c.placement, err, c.class)
		}
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("Lookup(%q) error %q does not say %q", c.placement, err, c.says)
		}
	}
	if _, _, err := NewLabels(nil).Lookup("x"); err == nil || !strings.Contains(err.Error(), "none defined") {
		t.Errorf("empty labels: %v", err)
	}
	// Per-compilation labels cannot redefine labels.
	if err := labels.AddFlag(r, "little=c"); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("repeated label: %v", err)
	}
	if err := labels.AddFlag(r, "cpu=c"); err == nil || !strings.Contains(err.Error(), "built-in") {
		t.Errorf("shadowing a static label: %v", err)
	}
	// Reverse lookup.
	if l, ok := labels.LabelOf(cpu); !ok || l != "cpu" {
		t.Errorf("LabelOf(cpu) = %q, %v", l, ok)
	}
	other, _ := r.Parse("c -opt=0")
	if _, ok := labels.LabelOf(other); ok {
		t.Error("LabelOf an unlabelled target")
	}
	// Labels of one compilation do not leak into another.
	if _, ok := NewLabels(static).Target("little"); ok {
		t.Error("per-compilation label leaked")
	}
}

func TestParseLabelFlag(t *testing.T) {
	r := testRegistry(t)
	ok := []struct{ flag, label, target string }{
		{`little="c -mcpu=cortex-a53"`, "little", "c -mcpu=cortex-a53"},
		{`little=c -mcpu=cortex-a53`, "little", "c -mcpu=cortex-a53"},
		{`little='c -mcpu=cortex-a53'`, "little", "c -mcpu=cortex-a53"},
		{` x = c `, "x", "c"},
		{`n="npu -host=\"c -opt=1\""`, "n", `npu -host="c -opt=1"`},
		{`n=npu -host="c -opt=1"`, "n", `npu -host="c -opt=1"`},
		{`j={"kind":"c","cflags":["-O2 -g"]}`, "j", `c -cflags="-O2 -g"`},
	}
	for _, c := range ok {
		label, tg, err := ParseLabelFlag(r, c.flag)
		if err != nil {
			t.Errorf("ParseLabelFlag(%q): %v", c.flag, err)
			continue
		}
		if label != c.label || tg.String() != c.target {
			t.Errorf("ParseLabelFlag(%q) = %q, %s; want %q, %s", c.flag, label, tg, c.label, c.target)
		}
	}
	bad := []struct {
		flag  string
		class error
		says  string
	}{
		{`little`, ErrSyntax, "LABEL=TARGET"},
		{`=c`, nil, "a label is"},
		{`a b=c`, nil, "a label is"},
		{`little=`, ErrEmpty, "little"},
		{`little="c`, ErrUnterminatedQuote, ""},
		{`little=cuda`, ErrUnknownKind, `"cuda"`},
		{`little="c -opt=x"`, ErrBadValue, "-opt"},
	}
	for _, c := range bad {
		_, _, err := ParseLabelFlag(r, c.flag)
		if err == nil {
			t.Errorf("ParseLabelFlag(%q) succeeded", c.flag)
			continue
		}
		if c.class != nil && !errors.Is(err, c.class) {
			t.Errorf("ParseLabelFlag(%q) error %q is not %v", c.flag, err, c.class)
		}
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("ParseLabelFlag(%q) error %q does not say %q", c.flag, err, c.says)
		}
	}
}

func TestPlacement(t *testing.T) {
	for _, c := range []struct {
		label string
		id    int
		s     string
	}{{"a", 0, "a"}, {"a", 3, "a:3"}} {
		if got := FormatPlacement(c.label, c.id); got != c.s {
			t.Errorf("FormatPlacement(%q, %d) = %q", c.label, c.id, got)
		}
		l, id, err := SplitPlacement(c.s)
		if err != nil || l != c.label || id != c.id {
			t.Errorf("SplitPlacement(%q) = %q, %d, %v", c.s, l, id, err)
		}
	}
}
