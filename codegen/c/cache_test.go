package c

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/tir"
)

func testSource(t *testing.T) *Source {
	t.Helper()
	m, err := tir.NewModule(testFuncs()...)
	if err != nil {
		t.Fatal(err)
	}
	src, err := Generate(m, HostOptions())
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestUnitsPartition checks that the translation units of a split source
// define every function exactly once and the runtime definitions once,
// in the first unit.
func TestUnitsPartition(t *testing.T) {
	src := testSource(t)
	if u := src.Units(4); len(u) != 1 || u[0] != src.Code {
		t.Fatalf("a %d-byte source was split into %d units; want Code alone", len(src.Code), len(u))
	}
	units := src.units(3, 1)
	if len(units) != 3 {
		t.Fatalf("got %d units, want 3", len(units))
	}
	for _, f := range src.Funcs {
		def := "int32_t " + f.Symbol + "(kiln_tensor* args, int32_t num_args) {"
		n := 0
		for _, u := range units {
			n += strings.Count(u, def)
		}
		if n != 1 {
			t.Errorf("%s is defined %d times across the units, want once", f.Symbol, n)
		}
	}
	for i, u := range units {
		got := strings.Count(u, "void kiln_set_last_error(const char* msg) {")
		if want := map[bool]int{true: 1, false: 0}[i == 0]; got != want {
			t.Errorf("unit %d defines kiln_set_last_error %d times, want %d", i, got, want)
		}
	}
	again := src.units(3, 1)
	for i := range units {
		if units[i] != again[i] {
			t.Fatalf("unit %d differs between two splits of one source", i)
		}
	}
}

// TestCacheReuse builds one source twice through a cache: the second
// build compiles nothing and links the same library; a changed flag is a
// miss.
func TestCacheReuse(t *testing.T) {
	src := testSource(t)
	cache, err := OpenCache(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	build := func(extra ...string) (BuildStats, []byte) {
		t.Helper()
		var st BuildStats
		dir := t.TempDir()
		lib, err := Build(src, dir, BuildOptions{ExtraSources: []File{externC}, Jobs: 2, unitBytes: 1, Cache: cache, Stats: &st, ExtraFlags: extra})
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(lib)
		if err != nil {
			t.Fatal(err)
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".o") || unitFile.MatchString(e.Name()) {
				t.Errorf("build directory keeps the intermediate %s", e.Name())
			}
		}
		return st, b
	}
	st1, lib1 := build()
	if st1.Units != 2 || st1.Objects != 5 || st1.Cached != 0 {
		t.Fatalf("first build: %+v, want 2 units, 5 objects (units, table, threads, extern source), none cached", st1)
	}
	st2, lib2 := build()
	if st2.Cached != st2.Objects {
		t.Fatalf("second build: %+v, want every object from the cache", st2)
	}
	if !bytes.Equal(lib1, lib2) {
		t.Fatal("the library linked from cached objects differs from the first build's")
	}
	st3, _ := build("-DKILN_TEST_FLAG=1")
	if st3.Cached != 0 {
		t.Fatalf("a build with another flag took %d objects from the cache, want none", st3.Cached)
	}
	// A damaged entry is a miss, and the build replaces it.
	var damaged int
	filepath.WalkDir(cache.Dir(), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && objName.MatchString(d.Name()) {
			damaged++
			return os.WriteFile(p, []byte("not an object"), 0o600)
		}
		return nil
	})
	if damaged == 0 {
		t.Fatal("the cache holds no objects")
	}
	st4, lib4 := build()
	if st4.Cached != 0 || !bytes.Equal(lib4, lib1) {
		t.Fatalf("after damaging every entry: %+v (library equal: %v); want a full rebuild of the same library", st4, bytes.Equal(lib4, lib1))
	}
	if st5, _ := build(); st5.Cached != st5.Objects {
		t.Fatalf("the rebuild did not repair the cache: %+v", st5)
	}
}

// TestCacheRefusesSharedDir checks that a cache directory other users
// may write is not used.
func TestCacheRefusesSharedDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	if _, err := OpenCache(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := OpenCache(dir)
	if err == nil || !strings.Contains(err.Error(), "writable by other users") {
		t.Fatalf("OpenCache of a world-writable directory: %v, want a refusal", err)
	}
}

// TestCachePrune checks that pruning drops the least recently used
// objects and nothing the cache did not write.
func TestCachePrune(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	c, err := OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	foreign := []string{filepath.Join(dir, "notes.txt"), filepath.Join(dir, "obj", "keep.o"), filepath.Join(dir, "obj", "ab", "ab12.o")}
	for _, p := range foreign {
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, make([]byte, 1000), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src := filepath.Join(t.TempDir(), "x.o")
	if err := os.WriteFile(src, make([]byte, 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	var keys []string
	base := time.Now().Add(-time.Hour)
	for i := range 4 {
		var h KeyHasher
		h.Add(string(rune('a' + i)))
		k := h.Sum()
		keys = append(keys, k)
		c.put(k, src)
		ts := base.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(c.path(k), ts, ts); err != nil {
			t.Fatal(err)
		}
	}
	c.SetLimit(2500) // four 1000-byte objects: drop the oldest until ≤ 1875 bytes
	c.prune()
	for i, k := range keys {
		_, err := os.Stat(c.path(k))
		if kept := err == nil; kept != (i >= 3) {
			t.Errorf("object %d (age rank %d): kept=%v", i, 4-i, kept)
		}
	}
	for _, p := range foreign {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("prune removed %s, which the cache did not write", p)
		}
	}
}
