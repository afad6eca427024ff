package driver

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeArtifact writes a minimal artifact (metadata.json recording the
// hash of a library and a subdirectory's file) into a new directory.
func fakeArtifact(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "include"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kiln_lib.so"), []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "include", "kiln.h"), []byte("/* header */"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeMarker(dir); err != nil {
		t.Fatal(err)
	}
	md := Metadata{Kiln: Version, Executor: ExecutorGraph, Target: "c", Kernels: 3}
	if err := recordHashes(dir, &md, "kiln_lib.so", "include/kiln.h"); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "metadata.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestArtifactCacheRoundTrip(t *testing.T) {
	c, err := OpenArtifactCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k := NewArtifactKey()
	k.Add("model", "m.onnx")
	key := k.Sum()
	out := filepath.Join(t.TempDir(), "m.kiln")
	if _, ok, err := c.Restore(key, out); ok || err != nil {
		t.Fatalf("empty cache: ok %v err %v", ok, err)
	}
	if _, ok := c.Record(key); ok {
		t.Fatal("empty cache has a record")
	}
	art := fakeArtifact(t, "library one")
	rec := &ArtifactRecord{Report: "partition: host 3\n", Warnings: []string{"w"}, Took: time.Second}
	c.Store(key, art, rec.Encode())
	data, ok := c.Record(key)
	if !ok {
		t.Fatal("stored entry has no record")
	}
	got, err := DecodeArtifactRecord(data)
	if err != nil || got.Report != rec.Report || len(got.Warnings) != 1 || got.Took != time.Second {
		t.Fatalf("record %+v, %v", got, err)
	}
	md, ok, err := c.Restore(key, out)
	if !ok || err != nil || md.Kernels != 3 {
		t.Fatalf("restore: ok %v err %v md %+v", ok, err, md)
	}
	for _, f := range []string{"kiln_lib.so", "include/kiln.h", "metadata.json", MarkerFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("restored artifact lacks %s: %v", f, err)
		}
	}
	if st, err := os.Stat(filepath.Join(out, "kiln_lib.so")); err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Errorf("library lost its execute bit: %v %v", st.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(out, buildPIDFile)); err == nil {
		t.Error("restored artifact holds the build's PID file")
	}
	// A restore replaces an artifact, never another directory.
	if _, ok, err := c.Restore(key, out); !ok || err != nil {
		t.Fatalf("restore over an artifact: ok %v err %v", ok, err)
	}
	user := filepath.Join(t.TempDir(), "mine")
	if err := os.MkdirAll(user, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(user, "notes.txt"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Restore(key, user); err == nil || !strings.Contains(err.Error(), "refusing to replace") {
		t.Fatalf("restore over a user's directory: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(user, "notes.txt")); err != nil || string(b) != "keep" {
		t.Fatalf("user's file: %q %v", b, err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(user), ".kiln-build-*"))
	if len(leftovers) != 0 {
		t.Fatalf("build directories left: %v", leftovers)
	}
}

// TestArtifactCacheDamaged: an entry whose files do not match their
// recorded hashes, or that holds a symbolic link, is a miss that writes
// nothing, and it is dropped so that the next compile stores a good one.
func TestArtifactCacheDamaged(t *testing.T) {
	for _, damage := range []string{"edit", "symlink", "no metadata"} {
		t.Run(damage, func(t *testing.T) {
			c, err := OpenArtifactCache(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			k := NewArtifactKey()
			k.Add(damage)
			key := k.Sum()
			c.Store(key, fakeArtifact(t, "library"), nil)
			files := filepath.Join(c.entry(key), entryFiles)
			switch damage {
			case "edit":
				err = os.WriteFile(filepath.Join(files, "kiln_lib.so"), []byte("LIBRARY"), 0o755)
			case "symlink":
				err = os.Symlink("/etc/passwd", filepath.Join(files, "extra"))
			case "no metadata":
				err = os.Remove(filepath.Join(files, "metadata.json"))
			}
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "m.kiln")
			if _, ok, err := c.Restore(key, out); ok || err != nil {
				t.Fatalf("damaged entry restored: ok %v err %v", ok, err)
			}
			if _, err := os.Lstat(out); err == nil {
				t.Fatal("a miss wrote the artifact")
			}
			if _, err := os.Lstat(c.entry(key)); err == nil {
				t.Fatal("the damaged entry is still there")
			}
			leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".kiln-build-*"))
			if len(leftovers) != 0 {
				t.Fatalf("build directories left: %v", leftovers)
			}
		})
	}
}

// TestArtifactCachePrune: above its limit the cache drops its least
// recently used entries, and nothing it did not write.
func TestArtifactCachePrune(t *testing.T) {
	c, err := OpenArtifactCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(c.dir, "ab", "not-a-key")
	if err := os.MkdirAll(foreign, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(foreign, "big"), make([]byte, 1<<16), 0o600); err != nil {
		t.Fatal(err)
	}
	art := fakeArtifact(t, strings.Repeat("x", 4000))
	var keys []string
	for i, name := range []string{"old", "middle", "new"} {
		k := NewArtifactKey()
		k.Add(name)
		keys = append(keys, k.Sum())
		c.Store(keys[i], art, nil)
		when := time.Now().Add(time.Duration(i-3) * time.Hour)
		if err := os.Chtimes(c.entry(keys[i]), when, when); err != nil {
			t.Fatal(err)
		}
	}
	// Four entries of ~4.3 KB are above 12000 bytes; pruning stops at
	// three quarters of it, two entries.
	c.SetLimit(12000)
	k := NewArtifactKey()
	k.Add("newest")
	c.Store(k.Sum(), art, nil)
	for i, want := range []bool{false, false, true} {
		_, err := os.Stat(c.entry(keys[i]))
		if (err == nil) != want {
			t.Errorf("entry %d present %v, want %v", i, err == nil, want)
		}
	}
	if _, err := os.Stat(c.entry(k.Sum())); err != nil {
		t.Errorf("the newest entry was dropped: %v", err)
	}
	if _, err := os.Stat(filepath.Join(foreign, "big")); err != nil {
		t.Errorf("a file the cache did not write was removed: %v", err)
	}
}

// TestArtifactKeyParts: keys differ when any part does, including where
// one part ends and the next begins.
func TestArtifactKeyParts(t *testing.T) {
	sum := func(parts ...string) string {
		k := NewArtifactKey()
		k.Add(parts...)
		return k.Sum()
	}
	if sum("ab", "c") == sum("a", "bc") || sum("a") == sum("b") || sum("a") != sum("a") {
		t.Fatal("key parts are not length-prefixed")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	keyOf := func() string {
		k := NewArtifactKey()
		if err := k.AddFile("tuning", p); err != nil {
			t.Fatal(err)
		}
		return k.Sum()
	}
	os.WriteFile(p, []byte("one"), 0o644)
	a := keyOf()
	os.WriteFile(p, []byte("two"), 0o644)
	if keyOf() == a {
		t.Fatal("a file's content is not part of the key")
	}
	rec := &ArtifactRecord{}
	if err := rec.AddFile(dir, "f"); err != nil {
		t.Fatal(err)
	}
	if !rec.Unchanged(dir) {
		t.Fatal("unchanged file reported changed")
	}
	os.WriteFile(p, []byte("three"), 0o644)
	if rec.Unchanged(dir) {
		t.Fatal("changed file reported unchanged")
	}
	if rec.AddFile(dir, "../f") == nil {
		t.Fatal("a path outside the directory was hashed")
	}
}
