package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestStrictFails runs this package's helper test in a child process with
// a requirement that cannot be met: with KILN_TEST_STRICT=1 it must fail
// naming the requirement, without it skip with the same reason.
func TestStrictFails(t *testing.T) {
	if os.Getenv("KILN_TESTENV_CHILD") == "1" {
		t.Setenv("PATH", "")
		Tool(t, "kiln-no-such-tool")
		t.Fatal("Tool returned for a missing program")
	}
	for _, strict := range []string{"1", "0"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStrictFails$", "-test.v")
		cmd.Env = append(os.Environ(), "KILN_TESTENV_CHILD=1", "KILN_TEST_STRICT="+strict)
		out, err := cmd.CombinedOutput()
		text := string(out)
		if !strings.Contains(text, "this test needs kiln-no-such-tool") {
			t.Errorf("strict=%s: output lacks the reason:\n%s", strict, text)
		}
		if failed := err != nil; failed != (strict == "1") {
			t.Errorf("strict=%s: failed = %v:\n%s", strict, failed, text)
		}
	}
}

func TestShared(t *testing.T) {
	dir := Shared(t)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Errorf("Shared() = %q: %v", dir, err)
	}
}
