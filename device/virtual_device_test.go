package device

import (
	"testing"

	"github.com/kiln-dev/kiln/targets"
)

// testAccel is an accelerator kind for tests (not registered anywhere).
var testAccel = &targets.Kind{Name: "test_accel", DeviceType: targets.ExtDev, Keys: []string{"test_accel"}}

// testTargets returns a fresh c target and a test accelerator target.
func testTargets(t *testing.T) (*targets.Target, *targets.Target) {
	t.Helper()
	c, err := targets.New(targets.C, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := targets.New(testAccel, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, a
}

func vd(dt targets.DeviceType, id int, tg *targets.Target, scope string) VirtualDevice {
	return VirtualDevice{DeviceType: dt, DeviceID: id, Target: tg, MemoryScope: scope}
}

func TestJoin(t *testing.T) {
	c, a := testTargets(t)
	c2, _ := testTargets(t) // another pointer, same target text
	u := FullyUnconstrained()
	cases := []struct {
		name string
		a, b VirtualDevice
		want VirtualDevice
		ok   bool
	}{
		{"both unconstrained", u, u, u, true},
		{"unconstrained left", u, vd(targets.CPU, 1, c, "global"), vd(targets.CPU, 1, c, "global"), true},
		{"unconstrained right", vd(targets.CPU, 1, nil, ""), u, vd(targets.CPU, 1, nil, ""), true},
		{"fieldwise merge", vd(targets.CPU, -1, nil, "global"), vd(-1, 2, c, ""), vd(targets.CPU, 2, c, "global"), true},
		{"same target text", vd(targets.CPU, 0, c, ""), vd(targets.CPU, 0, c2, ""), vd(targets.CPU, 0, c, ""), true},
		{"device type conflict", vd(targets.CPU, 0, nil, ""), vd(targets.ExtDev, 0, nil, ""), VirtualDevice{}, false},
		{"device id conflict", vd(targets.CPU, 0, nil, ""), vd(targets.CPU, 1, nil, ""), VirtualDevice{}, false},
		{"target conflict", vd(-1, -1, c, ""), vd(-1, -1, a, ""), VirtualDevice{}, false},
		{"scope conflict", vd(-1, -1, nil, "global"), vd(-1, -1, nil, "shared"), VirtualDevice{}, false},
		{"target vs device type", vd(targets.ExtDev, -1, nil, ""), vd(-1, -1, c, ""), VirtualDevice{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Join(tc.a, tc.b)
			if ok != tc.ok {
				t.Fatalf("Join(%s, %s) ok = %v, want %v", tc.a, tc.b, ok, tc.ok)
			}
			if ok && got != tc.want {
				t.Fatalf("Join(%s, %s) = %s, want %s", tc.a, tc.b, got, tc.want)
			}
			if ok { // join is commutative up to which of two equal targets is kept
				back, ok2 := Join(tc.b, tc.a)
				if !ok2 || !back.Equal(got) {
					t.Fatalf("Join not commutative: %s vs %s", back, got)
				}
			}
		})
	}
}

func TestDefault(t *testing.T) {
	c, a := testTargets(t)
	u := FullyUnconstrained()
	def := vd(targets.CPU, 0, c, "global")
	cases := []struct {
		name    string
		a, b    VirtualDevice
		want    VirtualDevice
		full    bool
		printed string
	}{
		{"unconstrained takes all", u, def, def, true, "VirtualDevice(cpu:0, target=c, scope=global)"},
		{"keeps own id", vd(targets.CPU, 3, nil, ""), def, vd(targets.CPU, 3, c, "global"), true, "VirtualDevice(cpu:3, target=c, scope=global)"},
		{"other device type: no target", vd(targets.ExtDev, -1, nil, ""), def, vd(targets.ExtDev, 0, nil, "global"), false, "VirtualDevice(ext_dev:0, scope=global)"},
		{"keeps own target", vd(-1, -1, a, ""), vd(-1, 1, c, "x"), vd(-1, 1, a, "x"), false, "VirtualDevice(?:1, target=test_accel, scope=x)"},
		{"target brings device type", u, vd(-1, -1, a, ""), vd(targets.ExtDev, -1, a, ""), false, "VirtualDevice(ext_dev:?, target=test_accel)"},
		{"nothing to fill", def, u, def, true, "VirtualDevice(cpu:0, target=c, scope=global)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Default(tc.a, tc.b)
			if got != tc.want {
				t.Fatalf("Default(%s, %s) = %s, want %s", tc.a, tc.b, got, tc.want)
			}
			if got.IsFullyConstrained() != tc.full {
				t.Fatalf("IsFullyConstrained(%s) = %v", got, !tc.full)
			}
			if s := got.String(); s != tc.printed {
				t.Fatalf("String = %q, want %q", s, tc.printed)
			}
		})
	}
	if !u.IsFullyUnconstrained() || u.String() != "VirtualDevice(?)" {
		t.Fatalf("FullyUnconstrained = %s", u)
	}
	if (VirtualDevice{}).IsFullyUnconstrained() {
		t.Fatal("the zero VirtualDevice constrains the device id; it must not count as unconstrained")
	}
}
