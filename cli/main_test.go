package cli

import (
	"fmt"
	"os"
	"testing"
)

// TestMain points kiln's cache ($XDG_CACHE_HOME/kiln) at a directory of
// the test run's own, removed at its end: tests neither read objects a
// user's compiles left nor leave their own behind.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kiln-cli-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CACHE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
