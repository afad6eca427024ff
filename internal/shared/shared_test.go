package shared

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDirFindsSeeds(t *testing.T) {
	d, err := Dir()
	if err != nil {
		t.Skip(err) // only a checkout without ../shared
	}
	if _, err := os.Stat(filepath.Join(d, "seeds")); err != nil {
		t.Errorf("%s has no seeds/: %v", d, err)
	}
	p, err := Path("models", "lenet")
	if err != nil || p != filepath.Join(d, "models", "lenet") {
		t.Errorf("Path = %q, %v", p, err)
	}
}
