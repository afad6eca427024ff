package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

// mlpDir is the example model shipped in the repository.
var mlpDir = filepath.Join("..", "examples", "models", "mlp")

func kiln(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = Main(args, &o, &e)
	return code, o.String(), e.String()
}

// copyDir copies a test directory tree (small files only).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		err  string
	}{
		{nil, 2, "usage: kiln COMMAND"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"compile", mlpDir, "-t", "c", "--executor", "jit"}, 2, `--executor "jit": want graph or aot`},
		{[]string{"compile", mlpDir, "-t", "c", "--executor", "aot", "--interface-api", "packed"}, 2, `--interface-api "packed": want c`},
		{[]string{"compile", mlpDir, "-t", "c", "--executor", "aot", "--weights", "rom"}, 2, `--weights "rom": want c-array, blob or auto`},
		{[]string{"compile", mlpDir, "-t", "c", "--executor", "aot", "--link-params"}, 2, "--link-params is for --executor graph"},
		{[]string{"compile", mlpDir}, 2, "kiln compile: -t is required"},
		{[]string{"run", "out.so"}, 1, "kiln run: out.so is neither an .onnx model nor a compiled artifact"},
		{[]string{"test-onnx", "--engine", "compiled", "--executor", "jit", mlpDir}, 2, `--executor "jit": want graph or aot`},
		{[]string{"inspect", mlpDir, "--format", "svg"}, 2, `--format "svg"`},
		{[]string{"inspect", "--bogus"}, 2, "flag provided but not defined: -bogus"},
	}
	for _, c := range cases {
		code, _, stderr := kiln(c.args...)
		if code != c.code || !strings.Contains(stderr, c.err) {
			t.Errorf("kiln %v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, stderr, c.code, c.err)
		}
	}
	if code, stdout, _ := kiln("help"); code != 0 || !strings.Contains(stdout, "test-onnx") {
		t.Errorf("kiln help: exit %d, %q", code, stdout)
	}
}

func TestParseArgsInterleaved(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f := fs.String("format", "text", "")
	v := fs.Bool("v", false, "")
	pos, _, ok := parseArgs(fs, []string{"a", "--format", "json", "b", "-v", "--", "-c"})
	if !ok || *f != "json" || !*v || strings.Join(pos, " ") != "a b -c" {
		t.Errorf("pos %q format %q v %v ok %v", pos, *f, *v, ok)
	}
}

func TestRunMLP(t *testing.T) {
	out := t.TempDir()
	// The input as .npy, bound by name; the output written as .npy.
	in, _, err := onnx.ReadTensorFile(filepath.Join(mlpDir, "test_data_set_0", "input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	npy := filepath.Join(out, "x.npy")
	if err := tensor.WriteNpyFile(npy, in); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := kiln("run", filepath.Join(mlpDir, "model.onnx"), "--input", "input="+npy, "--output-dir", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "output: Tensor[(4, 10), float32]") || !strings.Contains(stdout, "reference engine: import") {
		t.Errorf("stdout: %s", stdout)
	}
	got, err := tensor.ReadNpyFile(filepath.Join(out, "output.npy"))
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := onnx.ReadTensorFile(filepath.Join(mlpDir, "test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.AllClose(got, want, 1e-3, 1e-5); err != nil {
		t.Errorf("written output: %v", err)
	}
	// A bare FILE binds in order; .pb output format.
	code, _, stderr = kiln("run", mlpDir, "--input", filepath.Join(mlpDir, "test_data_set_0", "input_0.pb"), "--output-dir", out, "--output-format", "pb")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	back, name, err := onnx.ReadTensorFile(filepath.Join(out, "output.pb"))
	if err != nil || name != "output" || tensor.AllClose(back, want, 1e-3, 1e-5) != nil {
		t.Errorf("output.pb: name %q err %v", name, err)
	}
}

func TestRunInputErrors(t *testing.T) {
	dir := t.TempDir()
	wrongShape := filepath.Join(dir, "s.npy")
	tensor.WriteNpyFile(wrongShape, tensor.New(ir.Float32, ir.Shape{4, 783}))
	wrongType := filepath.Join(dir, "d.npy")
	tensor.WriteNpyFile(wrongType, tensor.New(ir.Int64, ir.Shape{4, 784}))
	model := filepath.Join(mlpDir, "model.onnx")
	cases := []struct {
		args []string
		err  string
	}{
		{[]string{"run", model}, "kiln run: missing input input: float32[4, 784]; give it with --input input=FILE"},
		{[]string{"run", model, "--input", "nope=" + wrongShape}, `kiln run: the model has no input "nope" (inputs: input)`},
		{[]string{"run", model, "--input", "input=" + wrongShape}, `kiln run: input "input": got Tensor[(4, 783), float32], the model wants input: float32[4, 784] (dimension 1 differs)`},
		{[]string{"run", model, "--input", "input=" + wrongType}, `kiln run: input "input": got Tensor[(4, 784), int64], the model wants input: float32[4, 784]`},
		{[]string{"run", model, "--input", "input=" + filepath.Join(dir, "missing.npy")}, "no such file"},
		{[]string{"run", model, "--input", "input=x.txt"}, "unknown tensor file type"},
	}
	for _, c := range cases {
		code, _, stderr := kiln(c.args...)
		if code != 1 || !strings.Contains(stderr, c.err) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("kiln %v: exit %d, stderr %q; want exit 1 and one line with %q", c.args[2:], code, stderr, c.err)
		}
	}
}

func TestInspect(t *testing.T) {
	code, stdout, stderr := kiln("inspect", mlpDir)
	if code != 0 || !strings.HasPrefix(stdout, "def @main(%input: Tensor[(4, 784), float32]) -> Tensor[(4, 10), float32] {\n  %0 = nn.dense(%input, constant(float32, [256, 784], ...))") {
		t.Errorf("text: exit %d %s %s", code, stderr, stdout)
	}
	code, stdout, stderr = kiln("inspect", "--format", "json", filepath.Join(mlpDir, "model.onnx"))
	if code != 0 {
		t.Fatalf("json: exit %d %s", code, stderr)
	}
	var info ModelInfo
	if err := json.Unmarshal([]byte(stdout), &info); err != nil {
		t.Fatal(err)
	}
	if len(info.Inputs) != 1 || info.Inputs[0].Name != "input" || info.Outputs[0].Type != "Tensor[(4, 10), float32]" {
		t.Errorf("inputs %+v outputs %+v", info.Inputs, info.Outputs)
	}
	if info.Ops["nn.dense"] != 3 || len(info.Nodes) != 9 || info.Result[0] != "%8" {
		t.Errorf("ops %v, %d nodes, result %v", info.Ops, len(info.Nodes), info.Result)
	}
	n0 := info.Nodes[0]
	if n0.Name != "%0" || n0.Op != "nn.dense" || n0.Args[0] != "%input" || n0.Args[1] != "constant(float32, [256, 784])" {
		t.Errorf("node 0: %+v", n0)
	}
	if sm := info.Nodes[8]; sm.Op != "nn.softmax" || sm.Attrs["axis"] != float64(1) {
		t.Errorf("node 8: %+v", sm)
	}
	code, stdout, _ = kiln("inspect", mlpDir, "--format", "dot")
	if code != 0 || !strings.HasPrefix(stdout, "digraph kiln {") || !strings.Contains(stdout, `"%input" -> "%0";`) {
		t.Errorf("dot: exit %d %s", code, stdout)
	}
}

// TestTestONNX runs a passing test, a test whose expected output was
// altered, a timeout and a directory of tests; lines come in sorted order.
func TestTestONNX(t *testing.T) {
	suite := t.TempDir()
	copyDir(t, mlpDir, filepath.Join(suite, "test_b_good"))
	copyDir(t, mlpDir, filepath.Join(suite, "test_a_bad"))
	bad := filepath.Join(suite, "test_a_bad", "test_data_set_0", "output_0.pb")
	want, name, err := onnx.ReadTensorFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	want.Float32s()[13] += 0.5
	if err := onnx.WriteTensorFile(bad, want, name); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(suite, "not_a_test"), 0o755)

	code, stdout, _ := kiln("test-onnx", "-j", "2", suite)
	wantOut := "FAIL test_a_bad output 0 (output): 1 of 40 elements differ beyond rtol=0.001, atol=1e-05; worst at [1, 3]"
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 1 || len(lines) != 3 || !strings.HasPrefix(lines[0], wantOut) || lines[1] != "PASS test_b_good" || lines[2] != "1 passed, 1 failed" {
		t.Errorf("exit %d, output:\n%s", code, stdout)
	}

	code, stdout, _ = kiln("test-onnx", "--timeout", "1ns", filepath.Join(suite, "test_b_good"))
	if code != 1 || stdout != "FAIL test_b_good timeout (1ns)\n0 passed, 1 failed\n" {
		t.Errorf("timeout: exit %d, %q", code, stdout)
	}

	code, stdout, _ = kiln("test-onnx", "-v", filepath.Join(suite, "test_b_good"))
	if code != 0 || !strings.HasPrefix(stdout, "PASS test_b_good  [load ") {
		t.Errorf("-v: exit %d, %q", code, stdout)
	}
	if code, _, stderr := kiln("test-onnx", filepath.Join(suite, "not_a_test")); code != 2 || !strings.Contains(stderr, "holds no test directories") {
		t.Errorf("empty dir: exit %d, %q", code, stderr)
	}
}

func TestRunWithLimitRecoversPanics(t *testing.T) {
	// A test directory that does not exist fails cleanly; a nil config
	// timeout would fire at once, so give it time.
	r := runWithLimit(filepath.Join(t.TempDir(), "missing"), TestConfig{Timeout: time.Minute})
	if r.Status != statusFail || !strings.Contains(r.Reason, "no such file") {
		t.Errorf("missing dir: %+v", r)
	}
	if site := func() (s string) {
		defer func() { recover(); s = panicSite() }()
		panic("boom")
	}(); !strings.Contains(site, "cli.TestRunWithLimitRecoversPanics") || !strings.Contains(site, "cli_test.go:") {
		t.Errorf("panic site %q does not name the panicking function", site)
	}
}

func TestBindInputs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, tensorName string, v float32) string {
		p := filepath.Join(dir, name)
		if err := onnx.WriteTensorFile(p, tensor.FromFloat32s(ir.Shape{1}, []float32{v}), tensorName); err != nil {
			t.Fatal(err)
		}
		return p
	}
	decl := []DeclaredInput{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	// input_0 names c; the unnamed one binds to the first unbound input.
	vals, err := bindInputs([]string{write("input_0.pb", "c", 3), write("input_1.pb", "", 1)}, decl)
	if err != nil {
		t.Fatal(err)
	}
	if vals["c"].Float32s()[0] != 3 || vals["a"].Float32s()[0] != 1 || vals["b"] != nil {
		t.Errorf("bound %v", vals)
	}
	if _, err := bindInputs([]string{write("i0.pb", "", 1), write("i1.pb", "", 1), write("i2.pb", "", 1), write("i3.pb", "", 1)}, decl); err == nil {
		t.Errorf("four files for three inputs bound without error")
	}
}

// TestRunWithLimitCancels gives a compiled test less time than its
// compile takes (at several limits, to stop it in different stages, the C
// compiler included): the result is a timeout, the test stopped well
// within the grace period, and no temporary file is left. A limit the
// machine is fast enough to beat gives a PASS, which is fine, but the
// shortest must time out.
func TestRunWithLimitCancels(t *testing.T) {
	testenv.Cgo(t)
	l, err := targets.ParseList("c")
	if err != nil {
		t.Fatal(err)
	}
	for i, limit := range []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond} {
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		start := time.Now()
		r := runWithLimit(mlpDir, TestConfig{Timeout: limit, Targets: l, RTol: 1e-3, ATol: 1e-5})
		switch {
		case r.Status == statusPass && i > 0:
			t.Logf("%v: the test finished in time", limit)
		case r.Status != statusFail || r.Reason != "timeout ("+limit.String()+")":
			t.Errorf("%v: result %s %q, want a timeout", limit, r.Status, r.Reason)
		}
		if d := time.Since(start); d > limit+timeoutGrace/2 {
			t.Errorf("%v: the timed-out test took %v to stop", limit, d)
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("%v: temporary files left: %v", limit, left)
		}
	}
}
