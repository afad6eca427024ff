package driver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	cgen "github.com/kiln-dev/kiln/codegen/c"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/tensor"
)

// mlpArtifact compiles the example MLP into dir/name and returns the
// artifact directory, the model's input name and the input.
func mlpArtifact(t testing.TB, out string, linked bool) (string, *tensor.Tensor) {
	t.Helper()
	return mlpArtifactWith(t, out, Config{LinkParams: linked})
}

// mlpArtifactCached is mlpArtifact with the C objects from cache.
func mlpArtifactCached(t testing.TB, out string, cache *cgen.Cache) (string, *tensor.Tensor) {
	t.Helper()
	return mlpArtifactWith(t, out, Config{Cache: cache})
}

// mlpArtifactWith compiles the mlp example with cfg's options for the
// test host into out.
func mlpArtifactWith(t testing.TB, out string, cfg Config) (string, *tensor.Tensor) {
	t.Helper()
	dir := filepath.Join("..", "examples", "models", "mlp")
	model, err := onnx.LoadFile(filepath.Join(dir, "model.onnx"), onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", "input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host, cfg.Out = hostTarget(t), out
	if _, err := Compile(model.Module, nil, cfg); err != nil {
		t.Fatal(err)
	}
	return model.Inputs[0].Name, in
}

func writeTestFile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReplaceDirRefuses checks every directory compile -o must not
// replace: a directory with a metadata.json but no marker, the working
// directory and its parent (even with a marker), $HOME, a symbolic link
// and a file; each keeps its content, and no temporary directory is left.
func TestReplaceDirRefuses(t *testing.T) {
	root := t.TempDir()
	// Not an artifact, although it has a metadata.json.
	user := filepath.Join(root, "user")
	writeTestFile(t, filepath.Join(user, "metadata.json"), "{}")
	writeTestFile(t, filepath.Join(user, "thesis.tex"), "years of work")
	// The working directory and its parent, both carrying the marker.
	parent := filepath.Join(root, "parent")
	cwd := filepath.Join(parent, "cwd")
	writeTestFile(t, filepath.Join(cwd, MarkerFile), markerText)
	writeTestFile(t, filepath.Join(cwd, "notes"), "x")
	writeTestFile(t, filepath.Join(parent, MarkerFile), markerText)
	t.Chdir(cwd)
	home := filepath.Join(root, "home")
	writeTestFile(t, filepath.Join(home, MarkerFile), markerText)
	writeTestFile(t, filepath.Join(home, ".bashrc"), "x")
	t.Setenv("HOME", home)
	link := filepath.Join(root, "link")
	if err := os.Symlink(user, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "file")
	writeTestFile(t, file, "x")
	for _, c := range []struct{ out, why string }{
		{user, "not a kiln artifact"},
		{".", "current directory"},
		{cwd, "current directory"},
		{"..", "current directory or one of its parents"},
		{home, "home directory"},
		{link, "symbolic link"},
		{file, "not a directory"},
	} {
		tmp, err := newBuildDir(filepath.Join(root, "x"))
		if err != nil {
			t.Fatal(err)
		}
		err = replaceDir(tmp, c.out)
		if err == nil || !strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), "refusing to replace") {
			t.Errorf("replaceDir(%s): %v, want a refusal saying %q", c.out, err, c.why)
		}
		removeTemp(tmp)
	}
	for _, p := range []string{filepath.Join(user, "thesis.tex"), filepath.Join(cwd, "notes"), filepath.Join(home, ".bashrc"), file} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was lost: %v", p, err)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(root, ".kiln-*")); len(m) != 0 {
		t.Errorf("left behind: %v", m)
	}
}

// TestReplacePreviousArtifact compiles twice into one directory (the
// second replaces the first, marker and all) and into an empty
// directory.
func TestReplacePreviousArtifact(t *testing.T) {
	testenv.Cgo(t)
	root := t.TempDir()
	out := filepath.Join(root, "art")
	mlpArtifact(t, out, false)
	if !hasMarker(out) {
		t.Fatal("the artifact has no marker")
	}
	writeTestFile(t, filepath.Join(out, "stale.txt"), "from the first build")
	mlpArtifact(t, out, false)
	if _, err := os.Stat(filepath.Join(out, "stale.txt")); err == nil {
		t.Error("the previous artifact was not replaced")
	}
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	mlpArtifact(t, empty, false)
	if _, err := LoadArtifact(empty); err != nil {
		t.Error(err)
	}
	if m, _ := filepath.Glob(filepath.Join(root, ".kiln-*")); len(m) != 0 {
		t.Errorf("left behind: %v", m)
	}
}

// TestStaleBuildDirs checks what a compile removes of the temporary
// directories an interrupted kiln left beside its output: marked ones
// whose process is gone, never an unmarked one or one of a running
// process.
func TestStaleBuildDirs(t *testing.T) {
	root := t.TempDir()
	dead := filepath.Join(root, ".kiln-build-dead")
	writeTestFile(t, filepath.Join(dead, MarkerFile), markerText)
	writeTestFile(t, filepath.Join(dead, buildPIDFile), "2147483646")
	alive := filepath.Join(root, ".kiln-build-alive")
	writeTestFile(t, filepath.Join(alive, MarkerFile), markerText)
	writeTestFile(t, filepath.Join(alive, buildPIDFile), strconv.Itoa(os.Getpid()))
	unmarked := filepath.Join(root, ".kiln-build-unmarked")
	writeTestFile(t, filepath.Join(unmarked, buildPIDFile), "2147483646")
	old := filepath.Join(root, ".kiln-old-x")
	writeTestFile(t, filepath.Join(old, MarkerFile), markerText)
	defer func(f func(time.Time) time.Duration) { timeSince = f }(timeSince)
	timeSince = func(time.Time) time.Duration { return time.Hour }
	mlpArtifact(t, filepath.Join(root, "art"), false)
	for p, want := range map[string]bool{dead: false, alive: true, unmarked: true, old: false} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
}

// rehash records the current content of rel in dir's metadata.json, as
// an attacker who edits an artifact would.
func rehash(t *testing.T, dir, rel string) {
	t.Helper()
	var md map[string]any
	data, err := os.ReadFile(filepath.Join(dir, "metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &md); err != nil {
		t.Fatal(err)
	}
	content, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	md["files"].(map[string]any)[rel] = hex.EncodeToString(sum[:])
	out, _ := json.Marshal(md)
	writeTestFile(t, filepath.Join(dir, "metadata.json"), string(out))
}

// TestArtifactTampering checks LoadArtifact against corrupt, swapped and
// edited artifacts: each is a clean error (no SIGBUS, no wrong answer,
// nothing called outside the library's table).
// TestRelativeArtifactPath loads an artifact by a relative path (the
// confinement check must compare resolved absolute paths).
func TestRelativeArtifactPath(t *testing.T) {
	testenv.Cgo(t)
	root := t.TempDir()
	inName, in := mlpArtifact(t, filepath.Join(root, "base"), false)
	t.Chdir(root)
	for _, p := range []string{"base", filepath.Join(".", "base", "..", "base")} {
		art, err := LoadArtifact(p)
		if err != nil {
			t.Fatalf("LoadArtifact(%q): %v", p, err)
		}
		if _, err := art.Run(map[string]*tensor.Tensor{inName: in}); err != nil {
			t.Errorf("%s: run: %v", p, err)
		}
		art.Close()
	}
}

func TestArtifactTampering(t *testing.T) {
	testenv.Cgo(t)
	root := t.TempDir()
	base := filepath.Join(root, "base")
	inName, in := mlpArtifact(t, base, false)
	if _, err := LoadArtifact(base); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(root, "other")
	mlpArtifact(t, other, true) // no params.bin: a library of another build
	fresh := func(name string) string {
		t.Helper()
		d := filepath.Join(root, name)
		if err := os.CopyFS(d, os.DirFS(base)); err != nil {
			t.Fatal(err)
		}
		return d
	}
	editJSON := func(dir string, edit func(map[string]any)) {
		t.Helper()
		var md map[string]any
		data, _ := os.ReadFile(filepath.Join(dir, "metadata.json"))
		if err := json.Unmarshal(data, &md); err != nil {
			t.Fatal(err)
		}
		edit(md)
		out, _ := json.Marshal(md)
		writeTestFile(t, filepath.Join(dir, "metadata.json"), string(out))
	}
	cases := []struct {
		name   string
		tamper func(dir string)
		want   string
	}{
		{"truncated library", func(d string) {
			p := filepath.Join(d, "kiln_lib.so")
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()/2)
		}, "kiln_lib.so: content hash mismatch"},
		{"swapped library", func(d string) {
			data, _ := os.ReadFile(filepath.Join(other, "kiln_lib.so"))
			os.WriteFile(filepath.Join(d, "kiln_lib.so"), data, 0o644)
		}, "kiln_lib.so: content hash mismatch"},
		{"one byte of params.bin", func(d string) {
			p := filepath.Join(d, "params.bin")
			data, _ := os.ReadFile(p)
			data[len(data)-1] ^= 1
			os.WriteFile(p, data, 0o644)
		}, "params.bin: content hash mismatch"},
		{"no hashes", func(d string) { editJSON(d, func(md map[string]any) { delete(md, "files") }) }, "records no content hash"},
		{"module outside", func(d string) {
			editJSON(d, func(md map[string]any) {
				md["modules"] = []any{map[string]any{"kind": "dso", "file": "../other/kiln_lib.so"}}
			})
		}, "not a relative path inside the artifact"},
		{"absolute constants", func(d string) { editJSON(d, func(md map[string]any) { md["constants"] = "/etc/passwd" }) }, "not a relative path inside the artifact"},
		{"symlink out", func(d string) {
			os.Remove(filepath.Join(d, "params.bin"))
			os.Symlink(filepath.Join(base, "params.bin"), filepath.Join(d, "params.bin"))
		}, "leads outside the artifact"},
		{"graph.json calls system", func(d string) {
			p := filepath.Join(d, "graph.json")
			data, _ := os.ReadFile(p)
			var g map[string]any
			json.Unmarshal(data, &g)
			for _, n := range g["nodes"].([]any) {
				if a, ok := n.(map[string]any)["attrs"].(map[string]any); ok && a["func_name"] != nil {
					a["func_name"] = "system"
				}
			}
			out, _ := json.Marshal(g)
			os.WriteFile(p, out, 0o644)
			rehash(t, d, "graph.json")
		}, `"system"`},
	}
	for _, c := range cases {
		d := fresh(strings.ReplaceAll(c.name, " ", "_"))
		c.tamper(d)
		art, err := LoadArtifact(d)
		if err == nil {
			_, runErr := art.Run(map[string]*tensor.Tensor{inName: in})
			t.Errorf("%s: loaded (run: %v), want an error with %q", c.name, runErr, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// TestLinkParamsOddPath builds with linked parameters into a directory
// whose path holds a comma, a space, quotes and a dollar sign.
func TestLinkParamsOddPath(t *testing.T) {
	testenv.Cgo(t)
	out := filepath.Join(t.TempDir(), `a,b c'd"$e`, "art")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	inName, in := mlpArtifact(t, out, true)
	art, err := LoadArtifact(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := art.Run(map[string]*tensor.Tensor{inName: in}); err != nil {
		t.Fatal(err)
	}
}
