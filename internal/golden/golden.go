// Package golden is the golden-file helper of kiln's tests: each IR's
// text printer is checked against files under the package's testdata/,
// which `go test ./PKG -update` rewrites.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// Update is the -update flag the golden tests of a test binary share.
var Update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Check compares got with testdata/name, or writes it there with -update.
func Check(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *Update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (rerun with -update if intended, and review the diff)\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}
