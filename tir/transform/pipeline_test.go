package transform

import (
	"bytes"
	"errors"
	"github.com/kiln-dev/kiln/internal/golden"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/tirtest"
)

func examplesModule(t *testing.T) *tir.Module {
	t.Helper()
	m := &tir.Module{}
	for _, ex := range tirtest.Examples {
		if err := m.Add(ex.Build()); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func names(ps []Pass) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func identity(name string, ph Phase) Pass {
	return Pass{Name: name, Phase: ph, Run: func(f *tir.PrimFunc) (*tir.PrimFunc, error) { return f, nil }}
}

// TestPipelineGolden runs the whole default pipeline on every example with
// verification after each pass, checks the result against the
// interpreter and against testdata/pipeline.tir.
func TestPipelineGolden(t *testing.T) {
	p := NewPipeline()
	p.VerifyEach = true
	in := examplesModule(t)
	out, err := p.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range in.Funcs() {
		if err := tirtest.Equivalent(f, out.Lookup(f.Name), 5, 7); err != nil {
			t.Errorf("pipeline changed %s: %v", f.Name, err)
		}
	}
	got := out.String()
	path := filepath.Join("testdata", "pipeline.tir")
	if *golden.Update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./tir/transform -update)", err)
	}
	if got != string(want) {
		t.Errorf("pipeline output differs from %s:\n%s", path, got)
	}
}

func TestPipelineOrder(t *testing.T) {
	p := NewPipeline()
	for _, pass := range []Pass{identity("A", Phase0), identity("B", Phase2), identity("C", Phase0), identity("D", Phase3), identity("E", Phase1)} {
		if err := p.Register(pass); err != nil {
			t.Fatal(err)
		}
	}
	got := strings.Join(names(p.Passes()), " ")
	want := "A C FlattenBuffers Simplify SimplifyIndices CollapseLoops E UnrollLoops Simplify B RemoveNoOp Simplify D"
	if got != want {
		t.Errorf("order:\n got %s\nwant %s", got, want)
	}
	if err := p.Disable("Simplify"); err != nil {
		t.Fatal(err)
	}
	if err := p.Disable("B"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(p.Passes()), " "); got != "A C FlattenBuffers SimplifyIndices CollapseLoops E UnrollLoops RemoveNoOp D" {
		t.Errorf("after Disable: %s", got)
	}
	if err := p.Disable("Nope"); err == nil {
		t.Errorf("disabling an unknown pass succeeded")
	}
}

// TestBuiltinOrderConstraints checks, like Go's SSA pass table test, that
// the built-in passes respect the orderings later passes rely on.
func TestBuiltinOrderConstraints(t *testing.T) {
	constraints := [][2]string{
		{"FlattenBuffers", "UnrollLoops"}, // unrolled copies index flat buffers
		{"UnrollLoops", "RemoveNoOp"},     // unrolling can leave empty statements
	}
	pos := map[string]int{}
	list := Builtins()
	for i, p := range list {
		if _, seen := pos[p.Name]; !seen {
			pos[p.Name] = i
		}
		if i > 0 && p.Phase < list[i-1].Phase {
			t.Errorf("built-in %s (phase %d) after a phase %d pass", p.Name, p.Phase, list[i-1].Phase)
		}
	}
	for _, c := range constraints {
		a, okA := pos[c[0]]
		b, okB := pos[c[1]]
		if !okA || !okB || a >= b {
			t.Errorf("%s must run before %s", c[0], c[1])
		}
	}
	if last := list[len(list)-1]; last.Name != "Simplify" || last.Phase != Phase3 {
		t.Errorf("the last built-in must be Simplify in phase 3, got %s", last.Name)
	}
}

func TestRegisterErrors(t *testing.T) {
	p := NewPipeline()
	if err := p.Register(identity("Mine", Phase1)); err != nil {
		t.Fatal(err)
	}
	both := identity("Both", Phase0)
	both.RunModule = func(m *tir.Module) (*tir.Module, error) { return m, nil }
	tests := []struct {
		pass Pass
		want string
	}{
		{identity("Mine", Phase2), "already registered"},
		{identity("Simplify", Phase0), "already registered"},
		{identity("", Phase0), "without a name"},
		{identity("Late", Phase(4)), "invalid phase 4"},
		{Pass{Name: "Empty"}, "exactly one of Run and RunModule"},
		{both, "exactly one of Run and RunModule"},
	}
	for _, tc := range tests {
		err := p.Register(tc.pass)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Register(%q): got %v, want %q", tc.pass.Name, err, tc.want)
		}
	}
}

func TestVerifyEachNamesBrokenPass(t *testing.T) {
	p := NewPipeline()
	p.VerifyEach = true
	// A buggy target pass that stores an int into a float buffer.
	bad := Pass{Name: "BuggyTargetPass", Phase: Phase1, Run: func(f *tir.PrimFunc) (*tir.PrimFunc, error) {
		b := f.Buffers()[0]
		return f.WithBody(tir.Seq(f.Body, &tir.BufferStore{Buffer: b, Value: tir.Idx(1), Indices: []tir.PrimExpr{tir.Idx(0)}})), nil
	}}
	if err := p.Register(bad); err != nil {
		t.Fatal(err)
	}
	_, err := p.RunFunc(tirtest.ElementwiseAdd())
	if err == nil || !strings.Contains(err.Error(), "after pass BuggyTargetPass") || !strings.Contains(err.Error(), "value 1 has type int32") {
		t.Errorf("got %v", err)
	}
	// Without VerifyEach the broken IR goes through.
	p.VerifyEach = false
	if _, err := p.RunFunc(tirtest.ElementwiseAdd()); err != nil {
		t.Errorf("without verification: %v", err)
	}
}

func TestPassErrorNamesPassAndFunction(t *testing.T) {
	p := NewPipeline()
	boom := errors.New("unsupported loop nest")
	if err := p.Register(Pass{Name: "Picky", Phase: Phase0, Run: func(f *tir.PrimFunc) (*tir.PrimFunc, error) { return nil, boom }}); err != nil {
		t.Fatal(err)
	}
	_, err := p.RunFunc(tirtest.Matmul())
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "tir pass Picky on function matmul") {
		t.Errorf("got %v", err)
	}
}

func TestDump(t *testing.T) {
	p := NewPipeline()
	var buf bytes.Buffer
	p.Dump = &buf
	p.DumpDir = t.TempDir()
	if _, err := p.RunFunc(tirtest.Matmul()); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	for _, want := range []string{"# after input\n@T.prim_func", "# after phase1_FlattenBuffers", "# after phase3_Simplify", "C[i * 5 + j] = C[i * 5 + j] + A[i * 4] * B[j]"} {
		if !strings.Contains(text, want) {
			t.Errorf("dump lacks %q", want)
		}
	}
	entries, err := os.ReadDir(p.DumpDir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	want := "00_input.tir 01_phase1_FlattenBuffers.tir 02_phase1_Simplify.tir 03_phase1_SimplifyIndices.tir 04_phase1_CollapseLoops.tir 05_phase2_UnrollLoops.tir 06_phase2_Simplify.tir 07_phase3_RemoveNoOp.tir 08_phase3_Simplify.tir"
	if got := strings.Join(files, " "); got != want {
		t.Errorf("dump files:\n got %s\nwant %s", got, want)
	}
	first, _ := os.ReadFile(filepath.Join(p.DumpDir, "00_input.tir"))
	if !strings.Contains(string(first), "C: T.Buffer((3, 5), \"float32\")") {
		t.Errorf("input dump:\n%s", first)
	}
}

func TestModulePass(t *testing.T) {
	p := NewPipeline()
	tag := Pass{Name: "TagTarget", Phase: Phase3, RunModule: func(m *tir.Module) (*tir.Module, error) {
		out := m.Copy()
		for _, f := range m.Funcs() {
			g := f.Copy()
			g.Attrs["tag"] = "vanilla"
			if err := out.Replace(g); err != nil {
				return nil, err
			}
		}
		return out, nil
	}}
	if err := p.Register(tag); err != nil {
		t.Fatal(err)
	}
	in := examplesModule(t)
	out, err := p.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range out.Funcs() {
		if f.Attrs["tag"] != "vanilla" {
			t.Errorf("%s: tag attr %v", f.Name, f.Attrs["tag"])
		}
	}
	if in.Lookup("matmul").Attrs.Has("tag") {
		t.Errorf("module pass modified its input")
	}
}

// TestDifferentialCatchesWrongPass makes sure the oracle used by the pass
// tests is not vacuous: a pass that turns + into - must be detected.
func TestDifferentialCatchesWrongPass(t *testing.T) {
	wrong := func(f *tir.PrimFunc) *tir.PrimFunc {
		return f.WithBody(tir.MutateStmt(f.Body, nil, func(e tir.PrimExpr) tir.PrimExpr {
			if b, ok := e.(*tir.Binary); ok && b.Op == tir.OpAdd && b.A.Type().IsFloat() {
				return &tir.Binary{Op: tir.OpSub, A: b.A, B: b.B}
			}
			return e
		}))
	}
	for _, ex := range []tirtest.Example{{Name: "add", Build: tirtest.ElementwiseAdd}, {Name: "matmul", Build: tirtest.Matmul}} {
		f := ex.Build()
		if err := tirtest.Equivalent(f, wrong(f), 2, 3); err == nil {
			t.Errorf("%s: wrong pass not detected", ex.Name)
		}
	}
}
