package targets

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// hookNames is a Flow that only names its hooks (package backend's Flow
// holds the hooks themselves).
type hookNames []string

func (h hookNames) HookNames() []string { return h }

// exampleKind is package backend's example kind as this package sees it.
func exampleKind() *Kind {
	return &Kind{
		Name:       "example",
		DeviceType: ExtDev,
		Keys:       []string{"example"},
		Options:    []Option{{Name: "example_attribute", Kind: ir.AttrInt, Default: int64(0)}},
		Flow:       hookNames{"RelayToRuntime", "RelayToTIR", "TIRToRuntime", "ConstantUpdater"},
	}
}

func TestDescribe(t *testing.T) {
	r := testRegistry(t)
	if err := r.Register(exampleKind()); err != nil {
		t.Fatal(err)
	}
	infos := Describe(r)
	var names []string
	for _, k := range infos {
		names = append(names, k.Name)
	}
	if want := []string{"c", "dnnl", "example", "npu"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("kinds %v, want %v", names, want)
	}
	c := infos[0]
	if c.DeviceType != "cpu" || !c.Host || !reflect.DeepEqual(c.Keys, []string{"cpu"}) || len(c.Hooks) != 0 {
		t.Errorf("c = %+v", c)
	}
	if o := c.Options[1]; o.Name != "opt" || o.Kind != "int" || o.Default != int64(3) || o.Common {
		t.Errorf("c option 1 = %+v", o)
	}
	if n := len(c.Options); n != 4+len(commonOptions) || !c.Options[4].Common {
		t.Errorf("c has %d options", n)
	}
	ex := infos[2]
	if ex.DeviceType != "ext_dev" || ex.Host || !reflect.DeepEqual(ex.Hooks, []string{"RelayToRuntime", "RelayToTIR", "TIRToRuntime", "ConstantUpdater"}) {
		t.Errorf("example = %+v", ex)
	}
	if o := infos[3].Options[5]; o.Name != "fallback" || o.Kind != "target" {
		t.Errorf("npu option 5 = %+v", o)
	}

	// JSON-encodable, with the documented field names.
	b, err := json.Marshal(infos[:1])
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"name":"c"`, `"device_type":"cpu"`, `"host":true`, `"hooks":[]`, `{"name":"opt","kind":"int","default":3}`, `"name":"host","kind":"target"`} {
		if !strings.Contains(string(b), s) {
			t.Errorf("JSON %s lacks %s", b, s)
		}
	}

	var text strings.Builder
	if err := WriteText(&text, infos, DescribeTags(r)); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, s := range []string{
		"c  (device cpu, keys cpu, host)\n    hooks: none\n",
		"example  (device ext_dev, keys example)\n    hooks: RelayToRuntime, RelayToTIR, TIRToRuntime, ConstantUpdater\n",
		"    -opt ",
		"int = 3",
		"strings = a",
		"bool = true",
		"\noptions of every kind:\n",
		"    -host ",
		"\ntags:\n",
		"x86-avx512  c -mcpu=skylake-avx512",
		`npu -cores=8 -host="c -mcpu=native"`,
	} {
		if !strings.Contains(out, s) {
			t.Errorf("text lacks %q:\n%s", s, out)
		}
	}
	if strings.Count(out, "-keys ") != 1 {
		t.Errorf("common options listed more than once:\n%s", out)
	}
}

func TestRegisterValidation(t *testing.T) {
	cases := []struct {
		k    *Kind
		says string
	}{
		{&Kind{}, "empty name"},
		{&Kind{Name: "a b"}, "a kind name is"},
		{&Kind{Name: "k", Options: []Option{{Name: "x", Kind: ir.AttrInt}, {Name: "x", Kind: ir.AttrInt}}}, "repeated option"},
		{&Kind{Name: "k", Options: []Option{{Name: "keys", Kind: ir.AttrStrings}}}, "reserved"},
		{&Kind{Name: "k", Options: []Option{{Name: "host", Kind: AttrTarget}}}, "reserved"},
		{&Kind{Name: "k", Options: []Option{{Name: "x", Kind: ir.AttrFloat}}}, "unsupported kind float"},
		{&Kind{Name: "k", Options: []Option{{Name: "x", Kind: ir.AttrInt, Default: "3"}}}, "is not a int"},
		{&Kind{Name: "k", Options: []Option{{Name: "x", Kind: AttrTarget, Default: "c"}}}, "cannot have a default"},
		{&Kind{Name: "k", Options: []Option{{Name: "x", Kind: ir.AttrInt, Choices: []string{"1"}}}}, "has choices but is not a string option"},
		{&Kind{Name: "k", Options: []Option{{Name: "x", Kind: ir.AttrString, Default: "c", Choices: []string{"a", "b"}}}}, `default "c" is not one of its choices`},
	}
	for _, c := range cases {
		if err := NewRegistry().Register(c.k); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Register(%+v) = %v, want %q", c.k, err, c.says)
		}
	}
}
