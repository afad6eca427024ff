package cli

import (
	goruntime "runtime"
	"strings"
	"testing"
)

// kiln version says what this kiln is and what it can do here.
func TestVersion(t *testing.T) {
	code, stdout, stderr := kiln("version")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"kiln 0.1.0 (", goruntime.Version(), "runs artifacts: ", "target kinds: c, ", "ccompiler", "this machine: "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("kiln version lacks %q:\n%s", want, stdout)
		}
	}
	if code, _, _ := kiln("version", "extra"); code != exitUsage {
		t.Errorf("kiln version extra: exit %d, want %d", code, exitUsage)
	}
}
