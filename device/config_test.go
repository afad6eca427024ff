package device

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/target"
)

// mapResolver is a fake label registry.
type mapResolver map[string]struct {
	t  *target.Target
	id int
}

func (m mapResolver) Resolve(label string) (*target.Target, int, error) {
	e, ok := m[label]
	if !ok {
		return nil, 0, fmt.Errorf("no target registered under label %q", label)
	}
	return e.t, e.id, nil
}

func TestNewCompilationConfig(t *testing.T) {
	c, a := testTargets(t)
	c3, err := target.New(target.C, ir.Attrs{"opt": int64(2)})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		targets []*target.Target
		host    *target.Target
		dt      target.DeviceType
		err     string // "" for success
		host2   *target.Target
		def     VirtualDevice
	}{
		{"c only", []*target.Target{c}, nil, 0, "", c, vd(target.CPU, 0, c, "global")},
		{"accel then c", []*target.Target{a, c}, nil, target.CPU, "", c, vd(target.CPU, 0, c, "global")},
		{"accel default", []*target.Target{a, c}, nil, target.ExtDev, "", c, vd(target.ExtDev, 0, a, "global")},
		{"explicit host same text", []*target.Target{a, c}, mustC(t), 0, "", c, vd(target.CPU, 0, c, "global")},
		{"empty", nil, nil, 0, "no targets", nil, VirtualDevice{}},
		{"two of one kind", []*target.Target{c, c3}, nil, 0, `two targets of kind "c"`, nil, VirtualDevice{}},
		{"host conflicts", []*target.Target{c}, c3, 0, "conflicts", nil, VirtualDevice{}},
		{"no target for default", []*target.Target{c}, nil, target.ExtDev, "no target for device type ext_dev", nil, VirtualDevice{}},
		{"nil target", []*target.Target{nil}, nil, 0, "nil", nil, VirtualDevice{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := NewCompilationConfig(tc.targets, tc.host, tc.dt)
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
			if cfg.HostDevice != vd(target.CPU, 0, c, "global") {
				t.Fatalf("host device = %s", cfg.HostDevice)
			}
		})
	}
}

func mustC(t *testing.T) *target.Target {
	c, _ := testTargets(t)
	return c
}

func TestAcceleratorOnlyGetsDefaultHost(t *testing.T) {
	_, a := testTargets(t)
	cfg, err := NewCompilationConfig([]*target.Target{a}, nil, target.ExtDev)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host == nil || cfg.Host.Kind != target.C || len(cfg.Primitives) != 2 || cfg.Primitives[1] != cfg.Host {
		t.Fatalf("host %v, primitives %v", cfg.Host, cfg.Primitives)
	}
	got, err := cfg.FindPrimitiveTarget(target.CPU)
	if err != nil || got != cfg.Host {
		t.Fatalf("FindPrimitiveTarget(cpu) = %v, %v", got, err)
	}
}

func TestCanonicalAndResolve(t *testing.T) {
	c, a := testTargets(t)
	cfg, err := NewCompilationConfig([]*target.Target{a, c}, nil, target.CPU)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := target.New(&target.Kind{Name: "other", DeviceType: target.ExtDev}, nil)
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
		{"big", vd(target.CPU, 0, c, ""), ""},
		{"little", vd(target.CPU, 1, c, ""), ""}, // canonicalised to the config's own c
		{"little:3", vd(target.CPU, 3, c, ""), ""},
		{"npu:1", vd(target.ExtDev, 1, a, ""), ""},
		{"cpu:2", vd(target.CPU, 2, c, ""), ""},      // device type name
		{"ext_dev", vd(target.ExtDev, 0, a, ""), ""}, // device type name
		{"test_accel:4", vd(target.ExtDev, 4, a, ""), ""},
		{"c", vd(target.CPU, 0, c, ""), ""},
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
	got, err := cfg.CanonicalVirtualDevice(vd(target.ExtDev, 2, nil, ""))
	if err != nil || got != vd(target.ExtDev, 2, a, "") {
		t.Fatalf("canonical = %s, %v", got, err)
	}
	if _, err := cfg.CanonicalVirtualDevice(vd(target.DeviceType(4), 0, nil, "")); err == nil {
		t.Fatal("device type with no target accepted")
	}
	if _, err := cfg.CanonicalVirtualDevice(vd(target.CPU, 0, a, "")); err == nil {
		t.Fatal("cpu device with an ext_dev target accepted")
	}
}

func TestAttachFromModule(t *testing.T) {
	c, _ := testTargets(t)
	cfg, err := NewCompilationConfig([]*target.Target{c}, nil, 0)
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
	if got := deviceType(1<<32 + 1); got == target.CPU {
		t.Errorf("deviceType(2^32+1) = %v", got)
	}
	if got := deviceType(12); got != target.ExtDev {
		t.Errorf("deviceType(12) = %v", got)
	}
	if got := deviceType(-7); got != 0 {
		t.Errorf("deviceType(-7) = %v, want 0 (unconstrained)", got)
	}
}
