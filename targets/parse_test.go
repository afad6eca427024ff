package targets

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// testRegistry has a host kind "c", a CPU library kind "dnnl" (not a
// host), an accelerator "npu" with options of every kind, and a tag.
func testRegistry(t *testing.T) *Registry {
	t.Helper()
	r := NewRegistry()
	kinds := []*Kind{
		{Name: "c", DeviceType: CPU, Keys: []string{"cpu"}, Host: true, Options: []Option{
			{Name: "mcpu", Kind: ir.AttrString},
			{Name: "opt", Kind: ir.AttrInt, Default: int64(3)},
			{Name: "cflags", Kind: ir.AttrStrings},
			{Name: "fast", Kind: ir.AttrBool},
		}},
		{Name: "dnnl", DeviceType: CPU, Keys: []string{"dnnl", "cpu"}, Options: []Option{{Name: "layout", Kind: ir.AttrString, Choices: []string{"any", "blocked"}}}},
		{Name: "npu", DeviceType: ExtDev, Keys: []string{"npu"}, Options: []Option{
			{Name: "example_attribute", Kind: ir.AttrInt, Default: int64(0)},
			{Name: "cores", Kind: ir.AttrInt},
			{Name: "name", Kind: ir.AttrString},
			{Name: "modes", Kind: ir.AttrStrings, Default: []string{"a"}},
			{Name: "fast", Kind: ir.AttrBool, Default: true},
			{Name: "fallback", Kind: AttrTarget},
		}},
	}
	for _, k := range kinds {
		if err := r.Register(k); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Tags().Register(Tag{Name: "x86-avx512", Config: "c -mcpu=skylake-avx512"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Tags().Register(Tag{Name: "npu-big", Config: `{"kind": "npu", "cores": 8, "host": {"kind": "c", "mcpu": "native"}}`}); err != nil {
		t.Fatal(err)
	}
	return r
}

// mk builds an expected target.
func mk(t *testing.T, r *Registry, kind string, attrs ir.Attrs, host *Target) *Target {
	t.Helper()
	k, ok := r.Lookup(kind)
	if !ok {
		t.Fatalf("no kind %s", kind)
	}
	tg, err := New(k, attrs)
	if err != nil {
		t.Fatal(err)
	}
	tg.Host = host
	return tg
}

func TestParseValid(t *testing.T) {
	r := testRegistry(t)
	hostNative := mk(t, r, "c", ir.Attrs{"mcpu": "native"}, nil)
	cases := []struct {
		in   string
		want *Target
	}{
		{"c", mk(t, r, "c", nil, nil)},
		{"  c  ", mk(t, r, "c", nil, nil)},
		{"c -mcpu=native -opt=2", mk(t, r, "c", ir.Attrs{"mcpu": "native", "opt": int64(2)}, nil)},
		{"c --mcpu=native", mk(t, r, "c", ir.Attrs{"mcpu": "native"}, nil)},
		{"c -opt=-1", mk(t, r, "c", ir.Attrs{"opt": int64(-1)}, nil)},
		{"c -fast", mk(t, r, "c", ir.Attrs{"fast": true}, nil)},
		{"c -fast=false", mk(t, r, "c", ir.Attrs{"fast": false}, nil)},
		{"c -fast=1", mk(t, r, "c", ir.Attrs{"fast": true}, nil)},
		{"c -fast=0", mk(t, r, "c", ir.Attrs{"fast": false}, nil)},
		{"c\t-mcpu=native\n-opt=1", mk(t, r, "c", ir.Attrs{"mcpu": "native", "opt": int64(1)}, nil)},
		// lists: bare, quoted with spaces and commas, escapes, empty
		{"c -cflags=-O2,-g", mk(t, r, "c", ir.Attrs{"cflags": []string{"-O2", "-g"}}, nil)},
		{`c -cflags="-O2 -g",-DX`, mk(t, r, "c", ir.Attrs{"cflags": []string{"-O2 -g", "-DX"}}, nil)},
		{`c -cflags="-DA=1,2",'-DB="x"'`, mk(t, r, "c", ir.Attrs{"cflags": []string{"-DA=1,2", `-DB="x"`}}, nil)},
		{`c -cflags="a\"b\\c"`, mk(t, r, "c", ir.Attrs{"cflags": []string{`a"b\c`}}, nil)},
		{"c -cflags=-DX=1,-fno-math-errno", mk(t, r, "c", ir.Attrs{"cflags": []string{"-DX=1", "-fno-math-errno"}}, nil)},
		{"c -cflags=", mk(t, r, "c", ir.Attrs{"cflags": []string{}}, nil)},
		{`c -cflags=""`, mk(t, r, "c", ir.Attrs{"cflags": []string{""}}, nil)},
		{`c -cflags=a,`, mk(t, r, "c", ir.Attrs{"cflags": []string{"a", ""}}, nil)},
		{`c -cflags=,a`, mk(t, r, "c", ir.Attrs{"cflags": []string{"", "a"}}, nil)},
		// strings: bare with a comma, quoted, single-quoted, empty
		{"c -model=a,b", mk(t, r, "c", ir.Attrs{"model": "a,b"}, nil)},
		{`c -model="cortex a53"`, mk(t, r, "c", ir.Attrs{"model": "cortex a53"}, nil)},
		{`c -model='it\s'`, mk(t, r, "c", ir.Attrs{"model": `it\s`}, nil)},
		{`c -mcpu=`, mk(t, r, "c", ir.Attrs{"mcpu": ""}, nil)},
		{`c -model="x=y"`, mk(t, r, "c", ir.Attrs{"model": "x=y"}, nil)},
		// common options
		{"c -keys=cpu,arm -libs=m -model=rpi4 -device=arm_cpu -tag=mine", mk(t, r, "c", ir.Attrs{"keys": []string{"cpu", "arm"}, "libs": []string{"m"}, "model": "rpi4", "device": "arm_cpu", "tag": "mine"}, nil)},
		// hosts and nested targets
		{`npu -host="c -mcpu=native"`, mk(t, r, "npu", nil, hostNative)},
		{`npu -host=c`, mk(t, r, "npu", nil, mk(t, r, "c", nil, nil))},
		{`npu -host='{"kind": "c", "mcpu": "native"}'`, mk(t, r, "npu", nil, hostNative)},
		{`npu -host="c -cflags=\"-O2 -g\",-DX"`, mk(t, r, "npu", nil, mk(t, r, "c", ir.Attrs{"cflags": []string{"-O2 -g", "-DX"}}, nil))},
		{`npu -fallback="c -opt=1" -example_attribute=42`, mk(t, r, "npu", ir.Attrs{"fallback": mk(t, r, "c", ir.Attrs{"opt": int64(1)}, nil), "example_attribute": int64(42)}, nil)},
		{`npu -fallback="npu -fallback=\"c -mcpu=haswell\""`, mk(t, r, "npu", ir.Attrs{"fallback": mk(t, r, "npu", ir.Attrs{"fallback": mk(t, r, "c", ir.Attrs{"mcpu": "haswell"}, nil)}, nil)}, nil)},
		// tags
		{"x86-avx512", mk(t, r, "c", ir.Attrs{"mcpu": "skylake-avx512", "tag": "x86-avx512"}, nil)},
		{"x86-avx512 -opt=2", mk(t, r, "c", ir.Attrs{"mcpu": "skylake-avx512", "opt": int64(2), "tag": "x86-avx512"}, nil)},
		{"x86-avx512 -mcpu=icelake-server", mk(t, r, "c", ir.Attrs{"mcpu": "icelake-server", "tag": "x86-avx512"}, nil)},
		{"npu-big", mk(t, r, "npu", ir.Attrs{"cores": int64(8), "tag": "npu-big"}, hostNative)},
		{"npu-big -host=c", mk(t, r, "npu", ir.Attrs{"cores": int64(8), "tag": "npu-big"}, mk(t, r, "c", nil, nil))},
		// JSON
		{`{"kind": "c"}`, mk(t, r, "c", nil, nil)},
		{`{"kind": "c", "mcpu": "native", "keys": ["cpu"], "host": {"kind": "c"}}`, mk(t, r, "c", ir.Attrs{"mcpu": "native", "keys": []string{"cpu"}}, mk(t, r, "c", nil, nil))},
		{`{"kind": "c", "opt": 1, "fast": true, "cflags": ["-O2 -g", "-DX"]}`, mk(t, r, "c", ir.Attrs{"opt": int64(1), "fast": true, "cflags": []string{"-O2 -g", "-DX"}}, nil)},
		{`{"kind": "c", "cflags": []}`, mk(t, r, "c", ir.Attrs{"cflags": []string{}}, nil)},
		{`{"kind": "npu", "host": "c -mcpu=native", "fallback": {"kind": "c"}}`, mk(t, r, "npu", ir.Attrs{"fallback": mk(t, r, "c", nil, nil)}, hostNative)},
		{`{"tag": "x86-avx512", "opt": 0}`, mk(t, r, "c", ir.Attrs{"mcpu": "skylake-avx512", "opt": int64(0), "tag": "x86-avx512"}, nil)},
		{`{"kind": "c", "opt": 1e2}`, nil}, // checked below: 1e2 is not an integer literal
		{"  {\"kind\":\"c\",\"model\":\"\\u00e9\\/\"}  ", mk(t, r, "c", ir.Attrs{"model": "é/"}, nil)},
	}
	for _, c := range cases {
		got, err := r.Parse(c.in)
		if c.want == nil {
			if err == nil {
				t.Errorf("Parse(%q) = %v, want an error", c.in, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if !got.Equal(c.want) {
			t.Errorf("Parse(%q) = %s, want %s", c.in, got, c.want)
		}
		// String and JSON both round-trip.
		back, err := r.Parse(got.String())
		if err != nil {
			t.Errorf("Parse(String() = %q): %v", got.String(), err)
		} else if !back.Equal(got) {
			t.Errorf("String round trip of %q: %q parsed to %s", c.in, got.String(), back)
		}
		back, err = r.Parse(got.JSON())
		if err != nil {
			t.Errorf("Parse(JSON() = %s): %v", got.JSON(), err)
		} else if !back.Equal(got) {
			t.Errorf("JSON round trip of %q: %s parsed to %s", c.in, got.JSON(), back)
		}
	}
}

func TestStringForm(t *testing.T) {
	r := testRegistry(t)
	cases := []struct{ in, str, json string }{
		{"c", "c", `{"kind":"c","opt":3}`},
		{"c -opt=3", "c", `{"kind":"c","opt":3}`},
		{"c -opt=2 -mcpu=native", "c -mcpu=native -opt=2", `{"kind":"c","mcpu":"native","opt":2}`},
		{`c -cflags="-O2 -g",-DX`, `c -cflags="-O2 -g",-DX`, `{"kind":"c","cflags":["-O2 -g","-DX"],"opt":3}`},
		{`c -cflags=`, `c -cflags=`, `{"kind":"c","cflags":[],"opt":3}`},
		{`c -model=a,b`, `c -model="a,b"`, `{"kind":"c","model":"a,b","opt":3}`},
		{`npu -host="c -mcpu=native"`, `npu -host="c -mcpu=native"`, `{"kind":"npu","example_attribute":0,"fast":true,"modes":["a"],"host":{"kind":"c","mcpu":"native","opt":3}}`},
		{`npu -host="c -cflags=\"-O2 -g\""`, `npu -host="c -cflags=\"-O2 -g\""`, ""},
		{"x86-avx512", "c -mcpu=skylake-avx512 -tag=x86-avx512", ""},
		{"npu -fast=false -modes=", "npu -fast=false -modes=", ""},
	}
	for _, c := range cases {
		got, err := r.Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if s := got.String(); s != c.str {
			t.Errorf("Parse(%q).String() = %q, want %q", c.in, s, c.str)
		}
		if c.json != "" && got.JSON() != c.json {
			t.Errorf("Parse(%q).JSON() = %s, want %s", c.in, got.JSON(), c.json)
		}
	}
}

func TestParseErrors(t *testing.T) {
	r := testRegistry(t)
	cases := []struct {
		in    string
		class error
		says  []string // substrings the message must contain
	}{
		{"", ErrEmpty, []string{"empty target string"}},
		{"   ", ErrEmpty, nil},
		{"cuda", ErrUnknownKind, []string{`"cuda"`, "kinds: c, dnnl, npu", "tags: npu-big, x86-avx512"}},
		{"cuda -arch=sm_80", ErrUnknownKind, []string{`"cuda"`}},
		{"-mcpu=x", ErrSyntax, []string{"starts with a kind"}},
		{"c mcpu=x", ErrSyntax, []string{"expected -name=value", `"mcpu=x"`}},
		{"c -=x", ErrSyntax, []string{"bad option name"}},
		{"c -march=x", ErrUnknownOption, []string{"-march", `kind "c"`}},
		{"dnnl -mcpu=x", ErrUnknownOption, []string{"-mcpu", `kind "dnnl"`}},
		{"c -opt=fast", ErrBadValue, []string{"-opt", `kind "c"`, "wants int", `got "fast"`}},
		{"c -opt=1.5", ErrBadValue, []string{"wants int", `"1.5"`}},
		{`c -opt="3"`, ErrBadValue, []string{"wants int"}},
		{"c -opt", ErrBadValue, []string{"-opt", "wants int", "no value"}},
		{"c -mcpu", ErrBadValue, []string{"-mcpu", "wants string", "no value"}},
		{"c -fast=yes", ErrBadValue, []string{"-fast", "wants bool", `"yes"`}},
		{"npu -host=cuda", ErrUnknownKind, []string{"option -host", `"cuda"`}},
		{`npu -fallback="c -opt=x"`, ErrBadValue, []string{"option -fallback", "-opt"}},
		{"c -mcpu=a -mcpu=b", ErrRepeated, []string{"-mcpu"}},
		{"c -opt=1 --opt=2", ErrRepeated, []string{"-opt"}},
		{"x86-avx512 -tag=a -tag=b", ErrRepeated, []string{"-tag"}},
		{`c -mcpu="native`, ErrUnterminatedQuote, []string{`"`}},
		{`c -cflags='-O2`, ErrUnterminatedQuote, nil},
		{`c -cflags="a\"`, ErrUnterminatedQuote, nil},
		{`c -mcpu=a"b"`, ErrSyntax, []string{"quote inside"}},
		{`c -mcpu="a"b`, ErrSyntax, []string{"after the quoted string"}},
		{`c -cflags="a"b,c`, ErrSyntax, []string{"after a quoted item"}},
		{`c -cflags=a"b"`, ErrSyntax, []string{"quote inside"}},
		{`c -mcpu="\q"`, ErrSyntax, []string{"bad escape"}},
		{`{"kind": "c"`, ErrBadJSON, nil},
		{`{"kind": "c"} x`, ErrBadJSON, []string{"after the JSON"}},
		{`{kind: "c"}`, ErrBadJSON, nil},
		{`{"mcpu": "x"}`, ErrBadJSON, []string{`no "kind"`}},
		{`{"kind": 3}`, ErrBadJSON, []string{`"kind" wants a string`, "number 3"}},
		{`{"tag": "nope"}`, ErrBadJSON, []string{"not a registered tag"}},
		{`{"kind": "cuda"}`, ErrUnknownKind, []string{`"cuda"`}},
		{`{"kind": "c", "march": "x"}`, ErrUnknownOption, []string{"-march", `kind "c"`}},
		{`{"kind": "c", "opt": "3"}`, ErrBadValue, []string{"-opt", "wants int", `got string "3"`}},
		{`{"kind": "c", "opt": 2.5}`, ErrBadValue, []string{"wants int", "number 2.5"}},
		{`{"kind": "c", "opt": 1e2}`, ErrBadValue, []string{"number 1e2"}},
		{`{"kind": "c", "mcpu": null}`, ErrBadValue, []string{"wants string", "got null"}},
		{`{"kind": "c", "fast": "true"}`, ErrBadValue, []string{"wants bool"}},
		{`{"kind": "c", "cflags": "-O2"}`, ErrBadValue, []string{"wants strings", `got string "-O2"`}},
		{`{"kind": "c", "cflags": ["-O2", 3]}`, ErrBadValue, []string{"number 3 at index 1"}},
		{`{"kind": "c", "host": 3}`, ErrBadValue, []string{"-host", "wants target"}},
		{`{"kind": "c", "host": {"kind": "nope"}}`, ErrUnknownKind, []string{"option -host", `"nope"`}},
		{`{"kind": "c", "mcpu": "a", "mcpu": "b"}`, ErrRepeated, []string{`key "mcpu"`}},
		{`{"kind": "c", "kind": "c"}`, ErrRepeated, []string{`key "kind"`}},
		{`[1]`, ErrBadJSON, nil},
		{strings.Repeat(`{"kind":"c","host":`, 12) + `{"kind":"c"}` + strings.Repeat("}", 12), ErrSyntax, []string{"nested more than"}},
	}
	for _, c := range cases {
		got, err := r.Parse(c.in)
		if err == nil {
			t.Errorf("Parse(%q) = %s, want an error", c.in, got)
			continue
		}
		if !errors.Is(err, c.class) {
			t.Errorf("Parse(%q) error %q is not %v", c.in, err, c.class)
		}
		for _, s := range c.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("Parse(%q) error %q does not say %q", c.in, err, s)
			}
		}
	}
}

func TestTagRegistry(t *testing.T) {
	r := testRegistry(t)
	for _, c := range []struct {
		tag  Tag
		says string
	}{
		{Tag{Name: "x86-avx512", Config: "c"}, "already registered"},
		{Tag{Name: "c", Config: "c"}, "already a target kind"},
		{Tag{Name: "", Config: "c"}, "a tag name is"},
		{Tag{Name: "bad name", Config: "c"}, "a tag name is"},
		{Tag{Name: "broken", Config: "c -opt=x"}, "wants int"},
	} {
		err := r.Tags().Register(c.tag)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Register(%+v) = %v, want an error saying %q", c.tag, err, c.says)
		}
	}
	// A kind may not take a tag's name; a tag may build on a tag.
	if err := r.Register(&Kind{Name: "x86-avx512"}); err == nil || !strings.Contains(err.Error(), "already a tag") {
		t.Errorf("registering a kind named like a tag: %v", err)
	}
	if err := r.Tags().Register(Tag{Name: "x86-fast", Config: "x86-avx512 -fast"}); err != nil {
		t.Fatal(err)
	}
	got, err := r.Parse("x86-fast")
	if err != nil {
		t.Fatal(err)
	}
	if want := "c -fast=true -mcpu=skylake-avx512 -tag=x86-fast"; got.String() != want {
		t.Errorf("tag of a tag = %q, want %q", got, want)
	}
	var names []string
	for _, tg := range r.Tags().List() {
		names = append(names, tg.Name)
	}
	if want := []string{"npu-big", "x86-avx512", "x86-fast"}; !reflect.DeepEqual(names, want) {
		t.Errorf("tags = %v, want %v", names, want)
	}
	// Tag.Target returns a fresh copy each time.
	tg, _ := r.Tags().Lookup("x86-avx512")
	a := tg.Target()
	a.Attrs["mcpu"] = "changed"
	if tg.Target().Str("mcpu") != "skylake-avx512" {
		t.Error("Tag.Target shares its attributes")
	}
}

func TestDefaultTags(t *testing.T) {
	got, err := Parse("x86-avx512")
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != C || got.Str("mcpu") != "skylake-avx512" || got.Str("tag") != "x86-avx512" {
		t.Errorf("x86-avx512 = %s", got)
	}
}

func TestParseList(t *testing.T) {
	r := testRegistry(t)
	c := func(attrs ir.Attrs) *Target { return mk(t, r, "c", attrs, nil) }
	cases := []struct {
		in        string
		kinds     []string // kinds in order
		hostIndex int
		want      []*Target // when set, the targets without their attached host
	}{
		{"c", []string{"c"}, 0, []*Target{c(nil)}},
		{"dnnl, c -mcpu=native", []string{"dnnl", "c"}, 1, []*Target{mk(t, r, "dnnl", nil, nil), c(ir.Attrs{"mcpu": "native"})}},
		{"dnnl,c", []string{"dnnl", "c"}, 1, nil},
		{"c, dnnl", []string{"c", "dnnl"}, 0, nil},
		{"npu, dnnl, c", []string{"npu", "dnnl", "c"}, 2, nil},
		// commas inside list values and quotes do not split
		{"c -cflags=-O2,-g, dnnl", []string{"c", "dnnl"}, 0, []*Target{c(ir.Attrs{"cflags": []string{"-O2", "-g"}}), mk(t, r, "dnnl", nil, nil)}},
		{`c -cflags="-O2, dnnl",-g`, []string{"c"}, 0, []*Target{c(ir.Attrs{"cflags": []string{"-O2, dnnl", "-g"}})}},
		{`dnnl, c -cflags='a, c'`, []string{"dnnl", "c"}, 1, []*Target{mk(t, r, "dnnl", nil, nil), c(ir.Attrs{"cflags": []string{"a, c"}})}},
		{"c -model=a,b", []string{"c"}, 0, []*Target{c(ir.Attrs{"model": "a,b"})}},
		// a word that merely starts with a kind name does not split
		{"c -cflags=a,cc,dnnl-x", []string{"c"}, 0, []*Target{c(ir.Attrs{"cflags": []string{"a", "cc", "dnnl-x"}})}},
		// a kind-named list item must be quoted to stay in the list
		{`c -libs=a,"dnnl", npu`, []string{"c", "npu"}, 0, []*Target{c(ir.Attrs{"libs": []string{"a", "dnnl"}}), mk(t, r, "npu", nil, nil)}},
		// the ambiguous case: a kind name after a comma starts a target (rule c)
		{"c -libs=a,dnnl, npu", []string{"c", "dnnl", "npu"}, 0, []*Target{c(ir.Attrs{"libs": []string{"a"}}), mk(t, r, "dnnl", nil, nil), mk(t, r, "npu", nil, nil)}},
		{"c -mcpu=native,dnnl", []string{"c", "dnnl"}, 0, []*Target{c(ir.Attrs{"mcpu": "native"}), mk(t, r, "dnnl", nil, nil)}},
		// rule a: a comma right after the first word or a JSON element
		{`{"kind":"dnnl"},c`, []string{"dnnl", "c"}, 1, nil},
		{`x86-avx512,npu`, []string{"c", "npu"}, 0, nil},
		// tags and JSON elements
		{"npu, x86-avx512", []string{"npu", "c"}, 1, nil},
		{`{"kind": "npu", "modes": ["x", "y"]}, {"kind": "c", "cflags": ["a,b", "c"]}`, []string{"npu", "c"}, 1,
			[]*Target{mk(t, r, "npu", ir.Attrs{"modes": []string{"x", "y"}}, nil), c(ir.Attrs{"cflags": []string{"a,b", "c"}})}},
		{`dnnl,{"kind":"c"}`, []string{"dnnl", "c"}, 1, nil},
		// a nested host with a comma-separated value
		{`npu -host="c -cflags=a,dnnl", c`, []string{"npu", "c"}, 1, nil},
	}
	for _, tc := range cases {
		l, err := r.ParseList(tc.in)
		if err != nil {
			t.Errorf("ParseList(%q): %v", tc.in, err)
			continue
		}
		var kinds []string
		for _, tg := range l.Targets {
			kinds = append(kinds, tg.Kind.Name)
		}
		if !reflect.DeepEqual(kinds, tc.kinds) {
			t.Errorf("ParseList(%q) kinds = %v, want %v", tc.in, kinds, tc.kinds)
			continue
		}
		if l.Host != l.Targets[tc.hostIndex] {
			t.Errorf("ParseList(%q) host = %s, want element %d", tc.in, l.Host, tc.hostIndex+1)
		}
		for i, tg := range l.Targets {
			if tg == l.Host {
				continue
			}
			if tg.Host == nil {
				t.Errorf("ParseList(%q): element %d has no host", tc.in, i+1)
			}
		}
		for i, w := range tc.want {
			got := l.Targets[i]
			if got != l.Host && got.Host == l.Host {
				got = got.WithHost(nil)
			}
			if !got.Equal(w) {
				t.Errorf("ParseList(%q)[%d] = %s, want %s", tc.in, i, got, w)
			}
		}
		// The list prints back to an equal list.
		back, err := r.ParseList(l.String())
		if err != nil {
			t.Errorf("ParseList(%q).String() = %q: %v", tc.in, l.String(), err)
			continue
		}
		if len(back.Targets) != len(l.Targets) {
			t.Errorf("round trip of %q: %q has %d targets", tc.in, l.String(), len(back.Targets))
			continue
		}
		for i := range l.Targets {
			if !back.Targets[i].Equal(l.Targets[i]) {
				t.Errorf("round trip of %q: element %d is %s, want %s", tc.in, i+1, back.Targets[i], l.Targets[i])
			}
		}
	}
}

func TestParseListHostAttached(t *testing.T) {
	r := testRegistry(t)
	l, err := r.ParseList(`npu -host="c -opt=1", dnnl, c -mcpu=native`)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.ByKind("npu").Host.String(); got != "c -opt=1" {
		t.Errorf("explicit host replaced: %s", got)
	}
	if l.ByKind("dnnl").Host != l.Host || l.Host.Str("mcpu") != "native" {
		t.Errorf("dnnl host = %v, list host = %v", l.ByKind("dnnl").Host, l.Host)
	}
	if l.ByKind("cuda") != nil {
		t.Error("ByKind of an absent kind")
	}
}

// Seed 004's big.LITTLE case: two targets of one kind, told apart by
// labels, each with its own device id; the label survives printing.
func TestParseListLabelledSameKind(t *testing.T) {
	r := testRegistry(t)
	for _, in := range []string{
		"big=c -mcpu=native -opt=3, dnnl, little=c -opt=1",
		"big=c -mcpu=native -opt=3,dnnl,little=c -opt=1",
	} {
		l, err := r.ParseList(in)
		if err != nil {
			t.Fatalf("ParseList(%q): %v", in, err)
		}
		if len(l.Targets) != 3 {
			t.Fatalf("ParseList(%q): %d targets", in, len(l.Targets))
		}
		big, dnnl, little := l.Targets[0], l.Targets[1], l.Targets[2]
		if big.Label != "big" || little.Label != "little" || dnnl.Label != "" {
			t.Errorf("labels %q %q %q", big.Label, dnnl.Label, little.Label)
		}
		if l.Host != little {
			t.Errorf("host = %s, want the last host-kind target", l.Host.Labelled())
		}
		if big.Equal(little) || big.Name() != "big" || dnnl.Name() != "dnnl" {
			t.Errorf("identity: equal %v, names %q %q", big.Equal(little), big.Name(), dnnl.Name())
		}
		if got, want := l.String(), "big=c -mcpu=native, dnnl, little=c -opt=1"; got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
		back, err := r.ParseList(l.String())
		if err != nil || !back.Targets[0].Equal(big) || !back.Targets[2].Equal(little) {
			t.Errorf("round trip: %v, %v", back, err)
		}
	}
}

func TestParseListErrors(t *testing.T) {
	r := testRegistry(t)
	cases := []struct {
		in    string
		class error
		says  []string
	}{
		{"", ErrEmpty, []string{"empty target list"}},
		{"  ", ErrEmpty, nil},
		{"dnnl,,c", ErrEmpty, []string{"element 2 is empty"}},
		{"dnnl, c,", ErrEmpty, []string{"element 3 is empty"}},
		{", c", ErrEmpty, []string{"element 1 is empty"}},
		{"c, c -mcpu=native", ErrRepeated, []string{"elements 1 and 2", `kind "c"`}},
		{"x86-avx512, c", ErrRepeated, []string{`kind "c"`}},
		// the ambiguous case: dnnl after a comma starts a target
		{"c -libs=a,dnnl, c", ErrRepeated, []string{"elements 1 and 3"}},
		{"dnnl", ErrNoHost, []string{"host kind (c)"}},
		{"npu, dnnl", ErrNoHost, nil},
		{"dnnl, cuda", ErrUnknownKind, []string{"element 2", `"cuda"`}},
		{"dnnl,cuda", ErrUnknownKind, []string{"element 2", `"cuda"`}},
		{`{"kind":"dnnl"},cuda`, ErrUnknownKind, []string{"element 2", `"cuda"`}},
		{"c -cflags=a, b", ErrUnknownKind, []string{"element 2", `"b"`}},
		// no split before -g: it is an option of the same target
		{"c -cflags=a, -g", ErrUnknownOption, []string{"element 1", "-g"}},
		{`dnnl, c -mcpu="x`, ErrUnterminatedQuote, nil},
		{"dnnl, c -opt=x", ErrBadValue, []string{"element 2", "-opt"}},
		{"big=c, big=c -opt=1", ErrRepeated, []string{"elements 1 and 2", `labelled "big"`}},
		{"big=c, c, c -opt=1", ErrRepeated, []string{"elements 2 and 3", "label them"}},
		{"9x=c", ErrSyntax, []string{"element 1 (column 1)", `label "9x"`}},
		{"big=c, little=c -opt=x", ErrBadValue, []string{"element 2 (column 15)", "-opt"}},
		{"c -mcpu=native,dnnl -layout=foo", ErrBadValue, []string{"element 2 (column 16)", "column 6", `option -layout is "foo", want one of any, blocked`}},
	}
	for _, c := range cases {
		l, err := r.ParseList(c.in)
		if err == nil {
			t.Errorf("ParseList(%q) = %v, want an error", c.in, l)
			continue
		}
		if !errors.Is(err, c.class) {
			t.Errorf("ParseList(%q) error %q is not %v", c.in, err, c.class)
		}
		for _, s := range c.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("ParseList(%q) error %q does not say %q", c.in, err, s)
			}
		}
	}
}

func TestNewValidates(t *testing.T) {
	r := testRegistry(t)
	c, _ := r.Lookup("c")
	for _, tc := range []struct {
		attrs ir.Attrs
		says  string
	}{
		{ir.Attrs{"march": "x"}, `unknown option -march for kind "c"`},
		{ir.Attrs{"opt": 3}, "option -opt wants int, got"},
		{ir.Attrs{"mcpu": int64(3)}, "option -mcpu wants string, got int 3"},
		{ir.Attrs{"host": "c"}, "option -host wants target"},
		{ir.Attrs{"host": (*Target)(nil)}, "nil target"},
	} {
		if _, err := New(c, tc.attrs); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("New(c, %v) = %v, want an error saying %q", tc.attrs, err, tc.says)
		}
	}
	k := &Kind{Name: "chooser", Options: []Option{{Name: "layout", Kind: ir.AttrString, Choices: []string{"any", "blocked"}}}}
	if err := r.Register(k); err != nil {
		t.Fatal(err)
	}
	if _, err := New(k, ir.Attrs{"layout": "tiled"}); err == nil || !strings.Contains(err.Error(), `option -layout is "tiled", want one of any, blocked`) {
		t.Errorf("New with a value not among the choices = %v", err)
	}
	if tg, err := New(k, ir.Attrs{"layout": "blocked"}); err != nil || tg.Str("layout") != "blocked" {
		t.Errorf("New with a choice = %v, %v", tg, err)
	}
	h := mk(t, r, "c", nil, nil)
	tg, err := New(c, ir.Attrs{"host": h})
	if err != nil || tg.Host != h || tg.Attrs.Has("host") {
		t.Errorf("New with host = %v, %v", tg, err)
	}
}

func TestEqual(t *testing.T) {
	r := testRegistry(t)
	p := func(s string) *Target {
		tg, err := r.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	cases := []struct {
		a, b string
		eq   bool
	}{
		{"c", "c -opt=3", true},
		{"c", "c -opt=2", false},
		{"c", "dnnl", false},
		{"c -cflags=a,b", "c -cflags=a,b", true},
		{"c -cflags=a,b", "c -cflags=b,a", false},
		{"c -cflags=", "c", false},
		{`npu -host=c`, `npu -host="c -opt=3"`, true},
		{`npu -host=c`, `npu -host="c -opt=1"`, false},
		{`npu -host=c`, `npu`, false},
		{`npu -fallback=c`, `npu -fallback=dnnl`, false},
	}
	for _, c := range cases {
		if got := p(c.a).Equal(p(c.b)); got != c.eq {
			t.Errorf("Equal(%q, %q) = %v, want %v", c.a, c.b, got, c.eq)
		}
	}
	var nilT *Target
	if !nilT.Equal(nil) || nilT.Equal(p("c")) || p("c").Equal(nil) {
		t.Error("Equal with nil")
	}
}

func TestDefaultRegistryCompat(t *testing.T) {
	// The syntax codegen/c's tests use keeps working against Default.
	tg, err := Default.Parse("c -mcpu=native -opt=2 -cflags=-DX=1,-fno-math-errno")
	if err != nil {
		t.Fatal(err)
	}
	if tg.Kind != C || tg.Str("mcpu") != "native" || !reflect.DeepEqual(tg.Strings("cflags"), []string{"-DX=1", "-fno-math-errno"}) {
		t.Errorf("got %s", tg)
	}
	if n, ok := tg.Int("opt"); !ok || n != 2 {
		t.Errorf("opt = %d, %v", n, ok)
	}
	if !reflect.DeepEqual(tg.Keys(), []string{"cpu"}) || tg.DeviceType() != CPU || !C.Host {
		t.Errorf("keys %v device %v host %v", tg.Keys(), tg.DeviceType(), C.Host)
	}
}

func TestTargetListStringQuotesKindNames(t *testing.T) {
	r := testRegistry(t)
	l, err := r.ParseList(`c -model="npu" -libs=a,"dnnl", npu`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.String(), `c -libs=a,"dnnl" -model="npu", npu`; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	// Outside a list no quoting is needed.
	if got, want := l.Targets[0].String(), `c -libs=a,dnnl -model=npu`; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestErrorColumns: errors in target strings and lists say where: the
// element's column in the list and the option's column in the target.
func TestErrorColumns(t *testing.T) {
	r := testRegistry(t)
	for _, c := range []struct{ list, want string }{
		{"c -mcpu=native -opt=abc", `target list element 1 (column 1): target "c -mcpu=native -opt=abc": column 16: `},
		{"dnnl,   c -bogus=1", `target list element 2 (column 9): target "c -bogus=1": column 3: unknown option -bogus`},
		{`c -mcpu="x`, "column 9: unterminated quote"},
		{"c mcpu=x", `column 3: target syntax error: expected -name=value`},
	} {
		if _, err := r.ParseList(c.list); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseList(%q) = %v, want an error containing %q", c.list, err, c.want)
		}
	}
}
