package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cgen "github.com/kiln-dev/kiln/codegen/c"
)

// FuzzLoadArtifact loads a compiled artifact whose metadata.json is the
// fuzzed input: LoadArtifact must never panic (its safety net would
// report an internal error) and must refuse any metadata that names a
// file outside the artifact or a file whose content hash differs.
func FuzzLoadArtifact(f *testing.F) {
	dir := filepath.Join(f.TempDir(), "art")
	// Every fuzzing worker process runs this setup: with the objects from
	// a cache the workers share, it takes no C compiler after the first
	// (on a loaded 2-core machine, compiling in every worker used up a
	// 4-second fuzz run before the first input: "context deadline
	// exceeded").
	cache, err := cgen.OpenCache(filepath.Join(os.TempDir(), fmt.Sprintf("kiln-fuzz-cache-%d", os.Getuid())))
	if err != nil {
		f.Fatal(err)
	}
	mlpArtifactCached(f, dir, cache)
	orig, err := os.ReadFile(filepath.Join(dir, "metadata.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(orig)
	f.Add([]byte(strings.Replace(string(orig), `"params": "file"`, `"params": "linked"`, 1)))
	f.Add([]byte(strings.Replace(string(orig), `"executor": "graph"`, `"executor": "aot", "aot": {"module": "m", "binary": "../../bin/sh"}`, 1)))
	f.Add([]byte(`{"executor":"graph","constants":"/etc/passwd","files":{"/etc/passwd":"00"}}`))
	f.Add([]byte(`{"modules":[{"kind":"dso","file":"../x.so"}]}`))
	f.Fuzz(func(t *testing.T, meta []byte) {
		if err := os.WriteFile(filepath.Join(dir, "metadata.json"), meta, 0o644); err != nil {
			t.Fatal(err)
		}
		art, err := LoadArtifact(dir)
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatalf("LoadArtifact panicked: %v", err)
			}
			return
		}
		defer art.Close()
		md := art.Metadata
		for _, rel := range append([]string{md.Constants}, func() []string {
			var fs []string
			for _, m := range md.Modules {
				fs = append(fs, m.File)
			}
			return fs
		}()...) {
			if rel != "" && !filepath.IsLocal(rel) {
				t.Fatalf("loaded an artifact naming %q", rel)
			}
		}
	})
}
