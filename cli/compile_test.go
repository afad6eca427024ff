package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

func TestParseTargetList(t *testing.T) {
	l, err := parseTargetList("c -opt=2")
	if err != nil || l.Host.Kind.Name != "c" || l.Host.String() != "c -opt=2" || len(l.Targets) != 1 {
		t.Errorf("c -opt=2: %v, %v", l, err)
	}
	for in, want := range map[string]string{
		"":        "no target given",
		"tpu9, c": `unknown target kind "tpu9"`,
		"c, c":    `both of kind "c"`,
		"c -x=1":  "unknown option -x",
	} {
		if _, err := parseTargetList(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseTargetList(%q): %v, want %q", in, err, want)
		}
	}
}

// TestCompileAndRunMLP compiles the example MLP through Main, checks the
// artifact directory, runs it on the example input and compares with the
// reference outputs; then runs it with wrong inputs.
func TestCompileAndRunMLP(t *testing.T) {
	testenv.Cgo(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "mlp.kiln")
	code, stdout, stderr := kiln("compile", filepath.Join(mlpDir, "model.onnx"), "-t", "c", "-o", out, "-v")
	if code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	for _, w := range []string{"compiled ", `for "c"`, "kernels, executor graph, 1 input, 1 output", "artifact: " + out, "  link  ", "pass "} {
		if !strings.Contains(stdout, w) {
			t.Errorf("compile output lacks %q:\n%s", w, stdout)
		}
	}
	for _, f := range []string{"metadata.json", "graph.json", "params.bin", "kiln_lib.so", "kiln_lib.c"} {
		if !isFile(filepath.Join(out, f)) {
			t.Errorf("artifact lacks %s", f)
		}
	}
	var md driver.Metadata
	data, _ := os.ReadFile(filepath.Join(out, "metadata.json"))
	if err := json.Unmarshal(data, &md); err != nil {
		t.Fatal(err)
	}
	if md.Target != "c" || len(md.Inputs) != 1 || md.Inputs[0].Name != "input" || md.Outputs[0].Name != "output" || md.Kernels < 1 {
		t.Errorf("metadata %+v", md)
	}

	in := filepath.Join(mlpDir, "test_data_set_0", "input_0.pb")
	want, _, err := onnx.ReadTensorFile(filepath.Join(mlpDir, "test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	res := filepath.Join(dir, "res")
	code, stdout, stderr = kiln("run", out, "--input", "input="+in, "--output-dir", res)
	if code != 0 {
		t.Fatalf("run artifact: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "output: Tensor[(4, 10), float32]") || !strings.Contains(stdout, "compiled engine: load ") {
		t.Errorf("run artifact stdout: %s", stdout)
	}
	got, err := tensor.ReadNpyFile(filepath.Join(res, "output.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.AllClose(got, want, 1e-3, 1e-5); err != nil {
		t.Errorf("artifact output: %v", err)
	}

	// --engine compiled on the model file compiles to a temporary directory.
	code, stdout, stderr = kiln("run", mlpDir, "--engine", "compiled", "--input", in, "--output-dir", res, "--output-format", "pb")
	if code != 0 || !strings.Contains(stdout, "compiled engine: load ") {
		t.Fatalf("run --engine compiled: exit %d: %s %s", code, stdout, stderr)
	}
	back, _, err := onnx.ReadTensorFile(filepath.Join(res, "output.pb"))
	if err != nil || tensor.AllClose(back, want, 1e-3, 1e-5) != nil {
		t.Errorf("run --engine compiled output: %v", err)
	}

	// Wrong inputs for the artifact: one-line errors, exit 1.
	wrongShape := filepath.Join(dir, "s.npy")
	tensor.WriteNpyFile(wrongShape, tensor.New(ir.Float32, ir.Shape{4, 783}))
	wrongType := filepath.Join(dir, "d.npy")
	tensor.WriteNpyFile(wrongType, tensor.New(ir.Int64, ir.Shape{4, 784}))
	cases := []struct {
		args []string
		err  string
	}{
		{[]string{"run", out}, "kiln run: missing input input: float32[4, 784]; give it with --input input=FILE"},
		{[]string{"run", out, "--input", "nope=" + wrongShape}, `kiln run: the model has no input "nope" (inputs: input)`},
		{[]string{"run", out, "--input", "input=" + wrongShape}, `kiln run: input "input": got Tensor[(4, 783), float32], the model wants input: float32[4, 784] (dimension 1 differs)`},
		{[]string{"run", out, "--input", "input=" + wrongType}, `kiln run: input "input": got Tensor[(4, 784), int64], the model wants input: float32[4, 784]`},
		{[]string{"run", out, "--input", in, "--input", in}, "the model has only 1 inputs"},
	}
	for _, c := range cases {
		code, _, stderr := kiln(c.args...)
		if code != 1 || !strings.Contains(stderr, c.err) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("kiln %v: exit %d, stderr %q; want exit 1 and one line with %q", c.args[2:], code, stderr, c.err)
		}
	}
	if code, _, stderr := kiln("run", out, "--engine", "ref", "--input", in); code != 2 || !strings.Contains(stderr, "runs only with --engine compiled") {
		t.Errorf("artifact with --engine ref: exit %d %q", code, stderr)
	}

	// bench on the artifact: one JSON object with numeric fields.
	code, stdout, stderr = kiln("bench", out, "--runs", "3", "--json")
	if code != 0 {
		t.Fatalf("bench: exit %d: %s", code, stderr)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || strings.Count(strings.TrimSpace(stdout), "\n") != 0 {
		t.Fatalf("bench --json output %q: %v", stdout, err)
	}
	for _, k := range []string{"median_ms", "min_ms", "mean_ms", "p90_ms", "runs", "threads", "compile_s"} {
		if _, ok := rep[k].(float64); !ok {
			t.Errorf("bench --json: %s is %v, want a number", k, rep[k])
		}
	}
	if rep["runs"] != 3.0 || rep["threads"] != 1.0 || rep["compile_s"] != 0.0 || rep["target"] != "c" || rep["model"] != out {
		t.Errorf("bench --json: %v", rep)
	}
}

// TestBenchModel compiles a model file first (compile_s > 0) and prints a
// human-readable line without --json.
func TestBenchModel(t *testing.T) {
	testenv.Cgo(t)
	code, stdout, stderr := kiln("bench", mlpDir, "--runs", "2", "--threads", "2", "--json")
	if code != 0 {
		t.Fatalf("bench: exit %d: %s", code, stderr)
	}
	var rep BenchReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.CompileS <= 0 || rep.Runs != 2 || rep.Threads != 2 || rep.Inputs != "random" || rep.MinMs > rep.MedianMs || rep.MedianMs > rep.MaxMs {
		t.Errorf("bench report %+v", rep)
	}
	if stderr != "" {
		t.Errorf("bench --json wrote to stderr: %q", stderr)
	}
	code, stdout, stderr = kiln("bench", mlpDir, "--runs", "2", "--input", filepath.Join(mlpDir, "test_data_set_0", "input_0.pb"))
	if code != 0 || !strings.Contains(stdout, "median ") || !strings.Contains(stdout, "(files inputs)") || !strings.Contains(stderr, "  link  ") {
		t.Errorf("bench: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// --profile: the slowest kernels, each with a positive time, sorted,
	// shares summing to at most 1.
	code, stdout, stderr = kiln("bench", mlpDir, "--runs", "3", "--profile", "2", "--json")
	if code != 0 {
		t.Fatalf("bench --profile: exit %d: %s", code, stderr)
	}
	rep = BenchReport{}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	share := 0.0
	for i, k := range rep.Profile {
		share += k.Share
		if k.MeanMs <= 0 || k.MedianMs <= 0 || k.Func == "" || len(k.Sources) == 0 || i > 0 && k.MedianMs > rep.Profile[i-1].MedianMs {
			t.Errorf("profile entry %d: %+v (want times, slowest median first, a function and the model nodes)", i, k)
		}
	}
	if len(rep.Profile) != 2 || share <= 0 || share > 1+1e-9 {
		t.Errorf("profile %+v (shares sum to %v)", rep.Profile, share)
	}
	// --trace: a Chrome trace of 3 runs, every kernel call in each.
	trace := filepath.Join(t.TempDir(), "trace.json")
	if code, stdout, stderr := kiln("bench", mlpDir, "--runs", "1", "--trace", trace); code != 0 || !strings.Contains(stdout, "trace of 3 runs") {
		t.Fatalf("bench --trace: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var tr struct {
		TraceEvents []struct {
			Name, Ph string
			TS, Dur  float64
			Args     map[string]any
		}
	}
	if data, err := os.ReadFile(trace); err != nil || json.Unmarshal(data, &tr) != nil {
		t.Fatalf("trace file: %v\n%s", err, data)
	}
	runs := map[float64]int{}
	for _, ev := range tr.TraceEvents {
		if ev.Ph != "X" || ev.Name == "" || ev.Dur < 0 || ev.Args["sources"] == nil {
			t.Errorf("trace event %+v", ev)
		}
		runs[ev.Args["run"].(float64)]++
	}
	if len(runs) != 3 || runs[0] == 0 || runs[0] != runs[2] {
		t.Errorf("trace events per run %v, want 3 runs of the same steps", runs)
	}
	if code, _, stderr := kiln("bench", mlpDir, "--runs", "1", "--profile", "-1"); code != 2 || !strings.Contains(stderr, "--profile -1") {
		t.Errorf("bench --profile -1: exit %d, %q", code, stderr)
	}
}

// TestCompileErrorsLeaveNoArtifact checks one-line errors and that a
// failed compile writes nothing.
func TestCompileErrorsLeaveNoArtifact(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	notArtifact := filepath.Join(dir, "mine")
	os.MkdirAll(notArtifact, 0o755)
	os.WriteFile(filepath.Join(notArtifact, "keep.txt"), []byte("x"), 0o644)
	cases := []struct {
		args []string
		err  string
	}{
		{[]string{"-o", filepath.Join(file, "out")}, "kiln compile: "},
		{[]string{"-o", notArtifact}, "not a kiln artifact (it has no .kiln-artifact file)"},
		{[]string{"-o", filepath.Join(dir, "x"), "-t", "tpu9, c"}, `unknown target kind "tpu9"`},
		{[]string{"-o", filepath.Join(dir, "x"), "--freeze", "input=" + filepath.Join(dir, "none.npy")}, "no such file"},
	}
	for _, c := range cases {
		args := append([]string{"compile", mlpDir, "-t", "c"}, c.args...)
		code, _, stderr := kiln(args...)
		if code != 1 || !strings.Contains(stderr, c.err) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("kiln %v: exit %d, stderr %q; want exit 1 and one line with %q", c.args, code, stderr, c.err)
		}
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "file mine" {
		t.Errorf("after failed compiles the directory holds %v", names)
	}
	if ents, _ := os.ReadDir(notArtifact); len(ents) != 1 {
		t.Errorf("the user's directory was changed: %v", ents)
	}
}

// TestTestONNXCompiled runs three small node tests with the compiled
// engine, one with a corrupted expected output.
func TestTestONNXCompiled(t *testing.T) {
	testenv.Cgo(t)
	node := filepath.Join(sharedRoot(t), "onnx", "node")
	suite := t.TempDir()
	for _, n := range []string{"test_add", "test_relu", "test_matmul_2d"} {
		copyDir(t, filepath.Join(node, n), filepath.Join(suite, n))
	}
	bad := filepath.Join(suite, "test_relu", "test_data_set_0", "output_0.pb")
	want, name, err := onnx.ReadTensorFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	want.Float32s()[0] += 1
	if err := onnx.WriteTensorFile(bad, want, name); err != nil {
		t.Fatal(err)
	}
	tmpBefore := kilnTempDirs(t)
	code, stdout, stderr := kiln("test-onnx", "--engine", "compiled", "-t", "c", "-v", suite)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 1 || len(lines) != 4 ||
		!strings.HasPrefix(lines[0], "PASS test_add  [load ") || !strings.Contains(lines[0], ", compile ") ||
		!strings.HasPrefix(lines[1], "PASS test_matmul_2d") ||
		!strings.HasPrefix(lines[2], "FAIL test_relu output 0 (y): 1 of 60 elements differ") ||
		lines[3] != "2 passed, 1 failed" {
		t.Errorf("exit %d, output:\n%s\n%s", code, stdout, stderr)
	}
	if after := kilnTempDirs(t); after != tmpBefore {
		t.Errorf("temporary directories left behind: %d before, %d after", tmpBefore, after)
	}
}

// kilnTempDirs counts kiln-test-* directories in the temporary directory.
func kilnTempDirs(t *testing.T) int {
	m, err := filepath.Glob(filepath.Join(os.TempDir(), "kiln-test-*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestCompilerFailure: when the C compiler fails, compile exits 1, prints
// the compiler's diagnostics under the error, and leaves no artifact.
func TestCompilerFailure(t *testing.T) {
	dir := t.TempDir()
	cc := filepath.Join(dir, "badcc")
	script := "#!/bin/sh\necho 'kiln_lib.c:12:3: error: boom' >&2\necho 'second line' >&2\nexit 1\n"
	if err := os.WriteFile(cc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CC", cc)
	out := filepath.Join(dir, "m.kiln")
	code, _, stderr := kiln("compile", filepath.Join(mlpDir, "model.onnx"), "-t", "c", "-o", out)
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, stderr)
	}
	for _, want := range []string{"kiln_lib.c with " + cc + " failed (exit status 1):\n", "\n    kiln_lib.c:12:3: error: boom\n    second line\n"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "kept") {
		t.Errorf("stderr claims something was kept:\n%s", stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("artifact %s exists after a failed compile (%v)", out, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left behind in %s: %v", dir, entries)
	}
}

// TestCompileCache compiles one model three times: the second compile
// takes every object from kiln's cache (the test run's own, see
// TestMain) and --no-cache takes none.
func TestCompileCache(t *testing.T) {
	testenv.Cgo(t)
	dir := t.TempDir()
	var libs [][]byte
	for i, c := range []struct {
		flags []string
		want  string
	}{
		{nil, ""},
		{nil, "3 objects (3 from the cache)"}, // the unit, the registry, the threads
		{[]string{"--no-cache"}, "(0 from the cache)"},
	} {
		out := filepath.Join(dir, fmt.Sprintf("m%d.kiln", i))
		args := append([]string{"compile", filepath.Join(mlpDir, "model.onnx"), "-t", "c", "-o", out, "-v"}, c.flags...)
		code, stdout, stderr := kiln(args...)
		if code != 0 {
			t.Fatalf("compile %v: exit %d: %s", c.flags, code, stderr)
		}
		if !strings.Contains(stdout, "C build: ") || !strings.Contains(stdout, c.want) {
			t.Errorf("compile %d %v: output lacks %q:\n%s", i, c.flags, c.want, stdout)
		}
		lib, err := os.ReadFile(filepath.Join(out, "kiln_lib.so"))
		if err != nil {
			t.Fatal(err)
		}
		libs = append(libs, lib)
	}
	if !bytes.Equal(libs[0], libs[1]) {
		t.Error("the library built from cached objects differs from the first one")
	}
}

// Compiling over an existing artifact replaces it, and says so; the
// first compile does not.
func TestCompileSaysItReplaced(t *testing.T) {
	out := filepath.Join(t.TempDir(), "mlp.kiln")
	for i, want := range []string{"artifact: " + out + "\n", "artifact: " + out + " (replaced the artifact that was there)\n"} {
		code, stdout, stderr := kiln("compile", filepath.Join(mlpDir, "model.onnx"), "-t", "c", "-o", out)
		if code != 0 {
			t.Fatalf("compile %d: exit %d: %s", i+1, code, stderr)
		}
		if !strings.Contains(stdout, want) {
			t.Errorf("compile %d does not say %q:\n%s", i+1, want, stdout)
		}
	}
}

// An artifact of another model is replaced only with --force, and the
// error says how; the model's name and hash are in the metadata.
func TestCompileForce(t *testing.T) {
	out := filepath.Join(t.TempDir(), "model.kiln")
	lenet := filepath.Join("..", "examples", "models", "lenet", "model.onnx")
	if code, _, stderr := kiln("compile", filepath.Join(mlpDir, "model.onnx"), "-t", "c", "-o", out); code != 0 {
		t.Fatalf("compile mlp: exit %d: %s", code, stderr)
	}
	md, err := driver.ReadMetadata(out)
	if err != nil {
		t.Fatal(err)
	}
	if md.Source == nil || md.Source.Model != "model.onnx" || len(md.Source.SHA256) != 64 {
		t.Errorf("metadata source %+v, want model.onnx and its SHA-256", md.Source)
	}
	code, _, stderr := kiln("compile", lenet, "-t", "c", "-o", out)
	if code == 0 || !strings.Contains(stderr, "holds an artifact of another model (compiled from model.onnx, sha256 "+md.Source.SHA256[:12]+")") || !strings.Contains(stderr, "--force") {
		t.Errorf("compiling lenet over mlp's artifact: exit %d: %s", code, stderr)
	}
	if _, err := driver.ReadMetadata(out); err != nil {
		t.Fatalf("the refused compile touched the artifact: %v", err)
	}
	code, stdout, stderr := kiln("compile", lenet, "-t", "c", "-o", out, "--force")
	if code != 0 || !strings.Contains(stdout, "(replaced the artifact that was there)") {
		t.Errorf("compile --force: exit %d: %s%s", code, stdout, stderr)
	}
}

// kiln run --json prints one JSON object (engine, times, outputs with
// their values and files) on both engines, and the values match the
// expected outputs.
func TestRunJSON(t *testing.T) {
	testenv.Cgo(t)
	want, _, err := ReadTensor(filepath.Join(mlpDir, "test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, engine := range []string{"ref", "compiled"} {
		dir := t.TempDir()
		code, stdout, stderr := kiln("run", filepath.Join(mlpDir, "model.onnx"), "--engine", engine, "-t", "c", "--json", "--output-dir", dir,
			"--input", filepath.Join(mlpDir, "test_data_set_0", "input_0.pb"))
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", engine, code, stderr)
		}
		var rep RunJSON
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("%s: stdout is not one JSON object: %v\n%s", engine, err, stdout)
		}
		if len(rep.Outputs) != 1 || rep.TimesMs["run"] <= 0 || rep.Outputs[0].File == "" || !strings.Contains(rep.Engine, map[string]string{"ref": "reference", "compiled": "compiled"}[engine]) {
			t.Fatalf("%s: %+v", engine, rep)
		}
		got := tensor.New(want.DType, want.Shape)
		if len(rep.Outputs[0].Values) != got.Len() {
			t.Fatalf("%s: %d values, want %d", engine, len(rep.Outputs[0].Values), got.Len())
		}
		for i, v := range rep.Outputs[0].Values {
			got.Float32s()[i] = float32(v.(float64))
		}
		if err := tensor.AllClose(got, want, 1e-3, 1e-4); err != nil {
			t.Errorf("%s: %v", engine, err)
		}
	}
}

// TestRunNpz: a bare --input FILE.npz binds each array by name, NAME=FILE
// takes the array of that name, --output-format npz writes every output
// into DIR/outputs.npz, and the outputs match the expected ones; an array
// named after no input is an error that says so.
func TestRunNpz(t *testing.T) {
	in, inName, err := ReadTensor(filepath.Join(mlpDir, "test_data_set_0", "input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := ReadTensor(filepath.Join(mlpDir, "test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	inputs := filepath.Join(dir, "inputs.npz")
	if err := tensor.WriteNpzFile(inputs, []tensor.Named{{Name: inName, Tensor: in}}); err != nil {
		t.Fatal(err)
	}
	two := filepath.Join(dir, "two.npz")
	if err := tensor.WriteNpzFile(two, []tensor.Named{{Name: "other", Tensor: want}, {Name: inName, Tensor: in}}); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(mlpDir, "model.onnx")
	for _, input := range []string{inputs, inName + "=" + two} {
		out := t.TempDir()
		code, stdout, stderr := kiln("run", model, "--input", input, "--output-dir", out, "--output-format", "npz")
		if code != 0 {
			t.Fatalf("--input %s: exit %d: %s", input, code, stderr)
		}
		if !strings.Contains(stdout, "outputs.npz (array ") {
			t.Errorf("--input %s: the output does not say where it went:\n%s", input, stdout)
		}
		got, err := tensor.ReadNpzFile(filepath.Join(out, "outputs.npz"))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("outputs.npz holds %d arrays, want 1", len(got))
		}
		if err := tensor.AllClose(got[0].Tensor, want, 1e-3, 1e-4); err != nil {
			t.Errorf("--input %s: %v", input, err)
		}
	}
	if code, _, stderr := kiln("run", model, "--input", two); code == 0 || !strings.Contains(stderr, `array "other": the model has no input of that name`) {
		t.Errorf("an archive with a stray array: exit %d: %s", code, stderr)
	}
}
