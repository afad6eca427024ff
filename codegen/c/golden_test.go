package c

import (
	"github.com/kiln-dev/kiln/internal/golden"
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/tirtest"
)

// TestGolden compares the generated C of every tirtest example with
// testdata/NAME.c (regenerate with go test -update).
func TestGolden(t *testing.T) {
	for _, ex := range tirtest.Examples {
		t.Run(ex.Name, func(t *testing.T) {
			m, err := tir.NewModule(ex.Build())
			if err != nil {
				t.Fatal(err)
			}
			src, err := Generate(m, HostOptions())
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", ex.Name+".c")
			if *golden.Update {
				if err := os.WriteFile(path, []byte(src.Code), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if string(want) != src.Code {
				t.Errorf("generated C for %s differs from %s (run go test -update and review the diff):\n%s", ex.Name, path, src.Code)
			}
			// Deterministic: a second run gives the same text.
			src2, err := Generate(m, HostOptions())
			if err != nil {
				t.Fatal(err)
			}
			if src2.Code != src.Code {
				t.Errorf("Generate is not deterministic for %s", ex.Name)
			}
		})
	}
}
