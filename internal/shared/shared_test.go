package shared

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDirFindsSeeds(t *testing.T) {
	d, err := Dir()
	if err != nil {
		// This package's tests cannot use internal/testenv (it imports
		// this package); the same rule, by hand.
		if os.Getenv("KILN_TEST_STRICT") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if _, err := os.Stat(filepath.Join(d, "seeds")); err != nil {
		t.Errorf("%s has no seeds/: %v", d, err)
	}
	p, err := Path("models", "lenet")
	if err != nil || p != filepath.Join(d, "models", "lenet") {
		t.Errorf("Path = %q, %v", p, err)
	}
}
