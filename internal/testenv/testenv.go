// Package testenv says what a test needs from the machine it runs on —
// ../shared beside the repository, a C compiler, cgo, a tool — and acts
// when it is missing: the test is skipped with the reason, or, under
// KILN_TEST_STRICT=1 (set by scripts/test.sh, hence by CI), it fails with
// the reason, so that CI never passes by skipping what it should run.
//
// The one deliberate exception is cgo in the cgo-free run of test.sh
// (CGO_ENABLED=0 with KILN_TEST_NOCGO=1): tests that load compiled
// libraries skip there, saying so.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/internal/shared"
)

// Strict reports whether a missing requirement fails the test
// (KILN_TEST_STRICT=1) instead of skipping it.
func Strict() bool { return os.Getenv("KILN_TEST_STRICT") == "1" }

// missing skips or fails t (Strict) because it needs what and err says
// why that is not there.
func missing(t testing.TB, what string, err error) {
	t.Helper()
	if Strict() {
		t.Fatalf("this test needs %s: %v (KILN_TEST_STRICT=1: a missing requirement is a failure)", what, err)
	}
	t.Skipf("skipped: this test needs %s: %v", what, err)
}

// Shared returns ../shared beside the repository root (package shared),
// or skips or fails t when it is not there.
func Shared(t testing.TB) string {
	t.Helper()
	dir, err := shared.Dir()
	if err != nil {
		missing(t, "../shared (the test suites and models)", err)
	}
	return dir
}

// SharedPath returns a path under ../shared that must exist, or skips or
// fails t.
func SharedPath(t testing.TB, elem ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{Shared(t)}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		missing(t, p, err)
	}
	return p
}

// CC returns the C compiler ($CC, else cc) when it can be found, or skips
// or fails t.
func CC(t testing.TB) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	p, err := exec.LookPath(cc)
	if err != nil {
		missing(t, "a C compiler ("+cc+")", err)
	}
	return p
}

// Tool returns the path of a program (make, sh, qemu-arm, ...), or skips
// or fails t.
func Tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, name, err)
	}
	return p
}

// HaveCgo reports whether this build has cgo: whether the runtime can load
// compiled libraries.
func HaveCgo() bool { return haveCgo }

// Cgo skips or fails t when this build has no cgo (the test loads or runs
// a compiled library). In the deliberate cgo-free run (KILN_TEST_NOCGO=1)
// it skips even under Strict.
func Cgo(t testing.TB) {
	t.Helper()
	if haveCgo {
		return
	}
	err := errNoCgo
	if os.Getenv("KILN_TEST_NOCGO") == "1" {
		t.Skipf("skipped: this test needs cgo: %v", err)
	}
	missing(t, "cgo", err)
}

// Need skips or fails t (Strict) when err is not nil: the test needs what,
// and err says why it is not there.
func Need(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		missing(t, what, err)
	}
}
