package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/targets"
)

// TestTargetsCommand checks `kiln targets` in text and JSON: the host
// kind c with its options, the BYOC example kind ccompiler with its hook,
// and the tags.
func TestTargetsCommand(t *testing.T) {
	code, stdout, stderr := kiln("targets")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"c  (device cpu, keys cpu, host)", "hooks: none", "-mcpu    string = native", "-mattr   strings", "-opt     int = 3", "processor of c:",
		"ccompiler  (device cpu, keys ccompiler,cpu)", "hooks: RelayToRuntime",
		"options of every kind:", "-host         target", "-from_device  int",
		"tags:", "x86-avx512      c -mcpu=skylake-avx512",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("kiln targets lacks %q:\n%s", want, stdout)
		}
	}

	code, stdout, stderr = kiln("targets", "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, stderr)
	}
	var got TargetsJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]targets.KindInfo{}
	for _, k := range got.Kinds {
		kinds[k.Name] = k
	}
	c, ok := kinds["c"]
	if !ok || c.DeviceType != "cpu" || !c.Host || len(c.Hooks) != 0 {
		t.Errorf("kind c: %+v (found %v)", c, ok)
	}
	mcpu := false
	for _, o := range c.Options {
		if o.Name == "mcpu" {
			mcpu = o.Kind == "string" && o.Default == "native" && !o.Common
		}
	}
	if !mcpu {
		t.Errorf("kind c: option mcpu (string, default native) missing: %+v", c.Options)
	}
	cc, ok := kinds["ccompiler"]
	if !ok || cc.Host || strings.Join(cc.Hooks, ",") != "RelayToRuntime" {
		t.Errorf("kind ccompiler: %+v (found %v)", cc, ok)
	}
	tags := map[string]string{}
	for _, tg := range got.Tags {
		tags[tg.Name] = tg.Target
	}
	if tags["x86-avx512"] != "c -mcpu=skylake-avx512" || tags["arm-cortex-a53"] != "c -mcpu=cortex-a53" {
		t.Errorf("--json tags: %v", tags)
	}

	if len(got.Processors) != 1 || !got.Processors[0].Native || got.Processors[0].VectorRegs == 0 {
		t.Errorf("--json processors (this machine): %+v", got.Processors)
	}

	// The resolved processor of a given target, with -mattr applied.
	code, stdout, stderr = kiln("targets", "--json", "--cpus", "-t", "c -mcpu=skylake-avx512 -mattr=-avx512f")
	if code != 0 {
		t.Fatalf("-t: exit %d: %s", code, stderr)
	}
	got = TargetsJSON{}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Processors) != 1 {
		t.Fatalf("processors: %+v", got.Processors)
	}
	p := got.Processors[0]
	if p.Name != "skylake-avx512" || p.ISA != "avx2" || p.VectorBits != 256 || p.VectorRegs != 16 || p.Native ||
		strings.Join(p.CFlags, " ") != "-march=skylake-avx512 -mno-avx512bw -mno-avx512cd -mno-avx512dq -mno-avx512f -mno-avx512vl" {
		t.Errorf("skylake-avx512 -avx512f: %+v", p)
	}
	if len(got.CPUs) < 10 || got.CPUs[0].Name != "x86-64" {
		t.Errorf("--cpus: %+v", got.CPUs)
	}
	code, stdout, _ = kiln("targets", "-t", "arm-cortex-a72")
	if code != 0 || !strings.Contains(stdout, "cortex-a72: Arm Cortex-A72, aarch64, 128-bit vectors, 32 vector registers") {
		t.Errorf("-t arm-cortex-a72: exit %d:\n%s", code, stdout)
	}
	if code, _, stderr := kiln("targets", "-t", "c -mcpu=pentium9"); code == 0 || !strings.Contains(stderr, `-mcpu="pentium9": unknown CPU`) {
		t.Errorf("unknown CPU: exit %d, %q", code, stderr)
	}

	if code, _, stderr := kiln("targets", "extra"); code != 2 || !strings.Contains(stderr, "usage") {
		t.Errorf("targets extra: exit %d, %q", code, stderr)
	}
}

// TestParseTargetListKinds: -t takes whole lists (external kinds before
// the host), and a host of another kind than c is refused with a message
// that says so.
func TestParseTargetListKinds(t *testing.T) {
	l, err := parseTargetList("ccompiler, c -mcpu=x86-64")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Targets) != 2 || l.Targets[0].Kind.Name != "ccompiler" || l.Host != l.Targets[1] || l.Host.String() != "c -mcpu=x86-64" {
		t.Errorf("ccompiler, c: %v (host %v)", l.Targets, l.Host)
	}
	if _, err := parseTargetList("ccompiler"); err == nil || !strings.Contains(err.Error(), "no host target") {
		t.Errorf("ccompiler alone: %v", err)
	}

	// A registry with a second host kind: the host must still be c.
	r := targets.NewRegistry()
	if err := r.Register(targets.C); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(&targets.Kind{Name: "otherhost", DeviceType: targets.CPU, Host: true, Doc: "test host kind"}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		in, host, err string
	}{
		{"otherhost, c", "c", ""},
		{"c, otherhost", "", `the host target must be of kind "c" (kiln generates host code as C), got "otherhost"`},
		{"otherhost", "", `got "otherhost"`},
		{"  ", "", "-t: no target given"},
	}
	for _, c := range cases {
		l, err := parseTargetListIn(r, c.in)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.HasPrefix(err.Error(), "-t") {
				t.Errorf("%q: error %v, want one starting with -t and mentioning %q", c.in, err, c.err)
			}
		case err != nil:
			t.Errorf("%q: %v", c.in, err)
		case l.Host.String() != c.host:
			t.Errorf("%q: host %v, want %s", c.in, l.Host, c.host)
		}
	}
}
