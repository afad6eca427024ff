package device

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
)

// mapResolver is a fake label registry.
type mapResolver map[string]struct {
	t  *targets.Target
	id int
}

func (m mapResolver) Resolve(label string) (*targets.Target, int, error) {
	e, ok := m[label]
	if !ok {
		return nil, 0, fmt.Errorf("no target registered under label %q", label)
	}
	return e.t, e.id, nil
}

func TestNewCompilationConfig(t *testing.T) {
	c, a := testTargets(t)
	c3, err := targets.New(targets.C, ir.Attrs{"opt": int64(2)})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		tgts  []*targets.Target
		host  *targets.Target
		dt    targets.DeviceType
		err   string // "" for success
		host2 *targets.Target
		def   VirtualDevice
	}{
		{"c only", []*targets.Target{c}, nil, 0, "", c, vd(targets.CPU, 0, c, "global")},
		{"accel then c", []*targets.Target{a, c}, nil, targets.CPU, "", c, vd(targets.CPU, 0, c, "global")},
		{"accel default", []*targets.Target{a, c}, nil, targets.ExtDev, "", c, vd(targets.ExtDev, 0, a, "global")},
		{"explicit host same text", []*targets.Target{a, c}, mustC(t), 0, "", c, vd(targets.CPU, 0, c, "global")},
		{"empty", nil, nil, 0, "no targets", nil, VirtualDevice{}},
		{"two of one kind", []*targets.Target{c, c3}, nil, 0, `two targets named "c"`, nil, VirtualDevice{}},
		{"host conflicts", []*targets.Target{c}, c3, 0, "conflicts", nil, VirtualDevice{}},
		{"no target for default", []*targets.Target{c}, nil, targets.ExtDev, "no target for device type ext_dev", nil, VirtualDevice{}},
		{"nil target", []*targets.Target{nil}, nil, 0, "nil", nil, VirtualDevice{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := NewCompilationConfig(tc.tgts, tc.host, tc.dt)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.host2 {
				t.Fatalf("host = %v, want %v", cfg.Host, tc.host2)
			}
			if cfg.DefaultPrimitive != tc.def {
				t.Fatalf("default = %s, want %s", cfg.DefaultPrimitive, tc.def)
			}
			if cfg.HostDevice != vd(targets.CPU, 0, c, "global") {
				t.Fatalf("host device = %s", cfg.HostDevice)
			}
		})
	}
}

func mustC(t *testing.T) *targets.Target {
	c, _ := testTargets(t)
	return c
}

func TestAcceleratorOnlyGetsDefaultHost(t *testing.T) {
	_, a := testTargets(t)
	cfg, err := NewCompilationConfig([]*targets.Target{a}, nil, targets.ExtDev)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host == nil || cfg.Host.Kind != targets.C || len(cfg.Primitives) != 2 || cfg.Primitives[1] != cfg.Host {
		t.Fatalf("host %v, primitives %v", cfg.Host, cfg.Primitives)
	}
	got, err := cfg.FindPrimitiveTarget(targets.CPU)
	if err != nil || got != cfg.Host {
		t.Fatalf("FindPrimitiveTarget(cpu) = %v, %v", got, err)
	}
}

func TestCanonicalAndResolve(t *testing.T) {
	c, a := testTargets(t)
	cfg, err := NewCompilationConfig([]*targets.Target{a, c}, nil, targets.CPU)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := targets.New(&targets.Kind{Name: "other", DeviceType: targets.ExtDev}, nil)
	cText, _ := testTargets(t) // same text as c, another pointer
	cfg.Labels = mapResolver{
		"big":     {c, 0},
		"little":  {cText, 1},
		"npu":     {a, 0},
		"foreign": {other, 0},
	}
	cases := []struct {
		in   string
		want VirtualDevice
		err  string
	}{
		{"big", vd(targets.CPU, 0, c, ""), ""},
		{"little", vd(targets.CPU, 1, c, ""), ""}, // canonicalised to the config's own c
		{"little:3", vd(targets.CPU, 3, c, ""), ""},
		{"npu:1", vd(targets.ExtDev, 1, a, ""), ""},
		{"cpu:2", vd(targets.CPU, 2, c, ""), ""},      // device type name
		{"ext_dev", vd(targets.ExtDev, 0, a, ""), ""}, // device type name
		{"test_accel:4", vd(targets.ExtDev, 4, a, ""), ""},
		{"c", vd(targets.CPU, 0, c, ""), ""},
		{"bogus", VirtualDevice{}, `no target registered under label "bogus"`},
		{"foreign", VirtualDevice{}, "not among the compilation targets"},
		{"big:-1", VirtualDevice{}, "not a non-negative integer"},
		{"big:x", VirtualDevice{}, "not a non-negative integer"},
		{":1", VirtualDevice{}, "empty label"},
	}
	for _, tc := range cases {
		got, err := cfg.ResolveDevice(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ResolveDevice(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ResolveDevice(%q) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	// Without a resolver, unknown labels are reported as such.
	cfg.Labels = nil
	if _, err := cfg.ResolveDevice("big"); err == nil || !strings.Contains(err.Error(), `unknown label "big"`) {
		t.Fatalf("err = %v", err)
	}
	// Canonicalisation fills targets from device types and rejects unknown ones.
	got, err := cfg.CanonicalVirtualDevice(vd(targets.ExtDev, 2, nil, ""))
	if err != nil || got != vd(targets.ExtDev, 2, a, "") {
		t.Fatalf("canonical = %s, %v", got, err)
	}
	if _, err := cfg.CanonicalVirtualDevice(vd(targets.DeviceType(4), 0, nil, "")); err == nil {
		t.Fatal("device type with no target accepted")
	}
	if _, err := cfg.CanonicalVirtualDevice(vd(targets.CPU, 0, a, "")); err == nil {
		t.Fatal("cpu device with an ext_dev target accepted")
	}
}

func TestAttachFromModule(t *testing.T) {
	c, _ := testTargets(t)
	cfg, err := NewCompilationConfig([]*targets.Target{c}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	mod := graph.NewModule(graph.NewFunction(nil, graph.NewTuple(nil), nil))
	if _, err := FromModule(mod); err == nil {
		t.Fatal("FromModule of a bare module succeeded")
	}
	cfg.Attach(mod)
	got, err := FromModule(mod)
	if err != nil || got != cfg {
		t.Fatalf("FromModule = %v, %v", got, err)
	}
}

// TestDeviceTypeAttrRange: a device type from an attribute beyond int32
// must not wrap onto a real one (2^32+1 would be cpu).
func TestDeviceTypeAttrRange(t *testing.T) {
	if got := deviceType(1<<32 + 1); got == targets.CPU {
		t.Errorf("deviceType(2^32+1) = %v", got)
	}
	if got := deviceType(12); got != targets.ExtDev {
		t.Errorf("deviceType(12) = %v", got)
	}
	if got := deviceType(-7); got != 0 {
		t.Errorf("deviceType(-7) = %v, want 0 (unconstrained)", got)
	}
}

// Two targets of one kind (seed 004's big.LITTLE) are told apart by their
// labels; a bare label means the target's own device, not device 0.
func TestSameKindTargetsByLabel(t *testing.T) {
	l, err := targets.ParseList("big=c -opt=2, ext=c -opt=0, little=c -opt=1")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := NewCompilationConfig(l.Targets, l.Host, 0)
	if err != nil {
		t.Fatal(err)
	}
	big, ext, little := l.Targets[0], l.Targets[1], l.Targets[2]
	if cfg.Host != little || cfg.DeviceID(little) != 0 || cfg.DeviceID(big) != 1 || cfg.DeviceID(ext) != 2 {
		t.Errorf("host %s, ids big %d ext %d little %d; want little host, 1 2 0", cfg.Host.Labelled(), cfg.DeviceID(big), cfg.DeviceID(ext), cfg.DeviceID(little))
	}
	for _, c := range []struct {
		dev string
		t   *targets.Target
		id  int
	}{{"big", big, 1}, {"big:4", big, 4}, {"little", little, 0}, {"little:2", little, 2}, {"ext", ext, 2}, {"cpu", little, 0}, {"c", big, 1}} {
		vd, err := cfg.ResolveDevice(c.dev)
		if err != nil {
			t.Errorf("ResolveDevice(%q): %v", c.dev, err)
			continue
		}
		if vd.Target != c.t || vd.DeviceID != c.id || vd.DeviceType != targets.CPU {
			t.Errorf("ResolveDevice(%q) = %s, want %s on cpu:%d", c.dev, vd, c.t.Labelled(), c.id)
		}
	}
	if _, err := cfg.ResolveDevice("medium"); err == nil || !strings.Contains(err.Error(), `"big=c -opt=2`) {
		t.Errorf("unknown label: %v, want an error listing the labelled targets", err)
	}
	if _, err := NewCompilationConfig([]*targets.Target{big, big.WithLabel("big")}, nil, 0); err == nil || !strings.Contains(err.Error(), `two targets named "big"`) {
		t.Errorf("a label twice: %v", err)
	}
}

// -from_device (a target attribute of every kind, as UMA's targets have
// it) sets a target's device id; two code-generating targets on one
// device are refused.
func TestFromDevice(t *testing.T) {
	l, err := targets.ParseList("big=c -from_device=3, little=c")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := NewCompilationConfig(l.Targets, l.Host, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DeviceID(l.Targets[0]) != 3 {
		t.Errorf("big on device %d, want 3", cfg.DeviceID(l.Targets[0]))
	}
	if vd, err := cfg.CanonicalVirtualDevice(VirtualDevice{DeviceType: targets.CPU, DeviceID: 3}); err != nil || vd.Target != l.Targets[0] {
		t.Errorf("cpu:3 resolves to %v (%v), want big", vd, err)
	}
	for _, c := range []struct{ list, says string }{
		{"a=c -from_device=0, b=c", `both run on cpu:0`},
		{"a=c -from_device=-1, b=c", "want a device id from 0"},
	} {
		l, err := targets.ParseList(c.list)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewCompilationConfig(l.Targets, l.Host, 0); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want an error saying %q", c.list, err, c.says)
		}
	}
}

// Two targets of an external kind are refused: regions go to kinds.
func TestTwoTargetsOfAnExternalKind(t *testing.T) {
	ext := &targets.Kind{Name: "ext1", DeviceType: targets.CPU}
	a, err := targets.New(ext, nil)
	if err != nil {
		t.Fatal(err)
	}
	host, err := targets.New(targets.C, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewCompilationConfig([]*targets.Target{a.WithLabel("a"), a.WithLabel("b"), host}, host, 0)
	if err == nil || !strings.Contains(err.Error(), `both of the external kind "ext1"`) {
		t.Errorf("two ext1 targets: %v", err)
	}
}
