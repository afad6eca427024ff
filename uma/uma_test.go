package uma

import (
	"errors"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pattern"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
	tirtransform "github.com/kiln-dev/kiln/tir/transform"
)

func wantErr(t *testing.T, what string, err error, sub string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), sub) {
		t.Errorf("%s: error %v, want one containing %q", what, err, sub)
	}
}

func noErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

func TestRegisterTargetAttr(t *testing.T) {
	b := New("acc", "test")
	noErr(t, "string", b.RegisterTargetAttr("mode", "fast"))
	noErr(t, "int", b.RegisterTargetAttr("dimension", 8))
	noErr(t, "bool", b.RegisterTargetAttr("debug", false))
	wantErr(t, "float default", b.RegisterTargetAttr("scale", 1.5), "want a string, an int or a bool")
	wantErr(t, "slice default", b.RegisterTargetAttr("list", []string{"a"}), "want a string, an int or a bool")
	wantErr(t, "empty name", b.RegisterTargetAttr("", 1), "empty attribute name")
	for _, name := range []string{"host", "keys", "model"} {
		wantErr(t, name, b.RegisterTargetAttr(name, "x"), "is reserved")
	}
	wantErr(t, "twice", b.RegisterTargetAttr("dimension", 4), "already registered")
	r := targets.NewRegistry()
	noErr(t, "Register", b.Register(r))
	tg, err := r.Parse("acc -dimension=16")
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := tg.Int("dimension"); d != 16 {
		t.Errorf("dimension %d, want 16", d)
	}
	if m := tg.Str("mode"); m != "fast" {
		t.Errorf("mode %q, want the default fast", m)
	}
	wantErr(t, "after Register", b.RegisterTargetAttr("late", 1), "after Register")
}

func TestRegisterErrors(t *testing.T) {
	b := New("acc", "test")
	p := pattern.IsOp(op.Add, pattern.Wildcard(), pattern.Wildcard())
	noErr(t, "pattern", b.RegisterPattern("add", p, nil))
	wantErr(t, "pattern twice", b.RegisterPattern("add", p, nil), "already registered")
	wantErr(t, "nil pattern", b.RegisterPattern("x", nil, nil), "needs a name and a pattern")
	pass := func(_ *targets.Target, m *graph.Module) (*graph.Module, error) { return m, nil }
	noErr(t, "graph pass", b.RegisterGraphPass(PrePartitioning, "p", pass))
	wantErr(t, "graph pass twice", b.RegisterGraphPass(PostPartitioning0, "p", pass), "already registered")
	wantErr(t, "graph pass phase", b.RegisterGraphPass(backend.GraphPhase(7), "q", pass), "unknown phase")
	tp := func(_ *targets.Target, f *tir.PrimFunc) (*tir.PrimFunc, error) { return f, nil }
	noErr(t, "tir pass", b.RegisterTIRPass(tirtransform.Phase2, "t", tp))
	wantErr(t, "tir pass twice", b.RegisterTIRPass(tirtransform.Phase3, "t", tp), "already registered")
	wantErr(t, "tir phase 4", b.RegisterTIRPass(tirtransform.Phase(4), "u", tp), "not 0–3")
	wantErr(t, "tir phase -1", b.RegisterTIRPass(tirtransform.Phase(-1), "u", tp), "not 0–3")
	wantErr(t, "codegen llvm", b.RegisterCodegen("llvm", CodegenOptions{}), `language "llvm" is not supported`)
	noErr(t, "codegen c", b.RegisterCodegen("c", CodegenOptions{Includes: []string{"<acc.h>"}}))
	wantErr(t, "codegen twice", b.RegisterCodegen("c", CodegenOptions{}), "already registered")
	wantErr(t, "codegen source path", New("x", "").RegisterCodegen("c", CodegenOptions{Sources: []SourceFile{{Name: "../a.c"}}}), "plain file name")
	wantErr(t, "strategy without compute", b.RegisterOperatorStrategy(op.Add, strategy.Implementation{Name: "s"}), "needs a name and a compute")

	r := targets.NewRegistry()
	noErr(t, "register c", r.Register(targets.C))
	wantErr(t, "name of an existing kind", New("c", "").Register(r), `a target kind "c" already exists`)
	wantErr(t, "bad name", New("9acc", "").Register(r), "kind name")
	noErr(t, "Register", b.Register(r))
	wantErr(t, "Register twice", b.Register(r), "already registered")
	wantErr(t, "same name again", New("acc", "").Register(r), `a target kind "acc" already exists`)
	if k, ok := r.Lookup("acc"); !ok || k != b.Kind() || backend.Of(k).Hooks.RelayToTIR == nil || backend.Of(k).Hooks.TIRToRuntime == nil || backend.Of(k).TIRPasses == nil {
		t.Errorf("registered kind %+v", k)
	}
}

// TestStrategyPLevel: a vendor strategy gets PLevelVendor by default, is
// chosen for the backend's targets and stays out of strategy.Default.
func TestStrategyPLevel(t *testing.T) {
	b := New("acc", "test")
	compute := func(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) { return in[:1], nil }
	noErr(t, "strategy", b.RegisterOperatorStrategy(op.Add, strategy.Implementation{Name: "acc.add", Compute: compute}))
	r := targets.NewRegistry()
	noErr(t, "Register", b.Register(r))
	tg, _ := b.Target()
	tt := ir.NewTensorType(ir.Float32, ir.Shape{4})
	call := &strategy.Call{Op: op.Add, ArgTypes: []ir.Type{tt, tt}, OutType: tt, Target: tg}
	impl, err := b.strategies.Select(call)
	if err != nil || impl.Name != "acc.add" || impl.PLevel != strategy.PLevelVendor {
		t.Errorf("selected %q (plevel %d), %v", impl.Name, impl.PLevel, err)
	}
	if len(b.strategies.Candidates(call)) < 2 {
		t.Errorf("the overlay does not fall back to the built-in implementations")
	}
	for _, c := range strategy.Default.Candidates(call) {
		if c.Name == "acc.add" {
			t.Errorf("the vendor strategy leaked into strategy.Default")
		}
	}
}

// TestPartitionPhases runs Partition on add → relu → add with an add
// pattern: graph passes run in phase order, in registration order within
// a phase; MergeCompilerRegions decides between one and two functions;
// params are bound first; a panicking predicate refuses with a reason.
func TestPartitionPhases(t *testing.T) {
	src := `def @main(%x: Tensor[(4), float32], %y: Tensor[(4), float32]) {
  %0 = add(%x, %y);
  %1 = add(%0, %y);
  %2 = nn.relu(%1);
  tanh(%2)
}`
	for _, merge := range []bool{true, false} {
		var order []string
		b := New("acc", "test")
		b.MergeCompilerRegions = merge
		noErr(t, "pattern", b.RegisterPattern("add", pattern.IsOp(op.Add, pattern.Wildcard(), pattern.Wildcard()), nil))
		record := func(name string) GraphPass {
			return func(_ *targets.Target, m *graph.Module) (*graph.Module, error) {
				order = append(order, name)
				return m, nil
			}
		}
		noErr(t, "p1", b.RegisterGraphPass(PostPartitioning1, "post1", record("post1")))
		noErr(t, "p0", b.RegisterGraphPass(PostPartitioning0, "post0", record("post0")))
		noErr(t, "pre a", b.RegisterGraphPass(PrePartitioning, "preA", record("preA")))
		noErr(t, "pre b", b.RegisterGraphPass(PrePartitioning, "preB", record("preB")))
		noErr(t, "Register", b.Register(targets.NewRegistry()))
		mod, err := graph.Parse(src, graph.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out, rep, err := b.Partition(mod, map[string]*tensor.Tensor{"y": tensor.New(ir.Float32, ir.Shape{4})})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(order, ","); got != "preA,preB,post0,post1" {
			t.Errorf("pass order %s", got)
		}
		want := 1
		if !merge {
			want = 2
		}
		if rep.Regions["acc"] != want || rep.Counts["acc"] != 2 || rep.Counts["host"] != 2 {
			t.Errorf("merge=%v: regions %v counts %v, want %d regions", merge, rep.Regions, rep.Counts, want)
		}
		if len(out.Main().Params) != 1 {
			t.Errorf("y was not bound: main has %d parameters", len(out.Main().Params))
		}
	}

	b := New("acc", "test")
	noErr(t, "pattern", b.RegisterPattern("add", pattern.IsOp(op.Add, pattern.Wildcard(), pattern.Wildcard()), func(*pattern.Result) error { panic("boom") }))
	noErr(t, "failing pass", b.RegisterGraphPass(PostPartitioning0, "fail", func(*targets.Target, *graph.Module) (*graph.Module, error) { return nil, errors.New("no memory left") }))
	noErr(t, "Register", b.Register(targets.NewRegistry()))
	mod, _ := graph.Parse(src, graph.ParseOptions{})
	_, rep, err := b.Partition(mod, nil)
	wantErr(t, "failing pass", err, "target acc: PostPartitioning0 graph pass fail: no memory left")
	if rep == nil || rep.Counts["acc"] != 0 || !strings.Contains(strings.Join(rep.Nodes[0].Why, ";"), "predicate of acc.add panicked: boom") {
		t.Errorf("panicking predicate: report %+v", rep)
	}
	_, _, err = b.Partition(mod, map[string]*tensor.Tensor{"z": tensor.New(ir.Float32, ir.Shape{4})})
	wantErr(t, "unknown param", err, `main has no parameter "z"`)
	_, _, err = New("other", "").Partition(mod, nil)
	wantErr(t, "unregistered", err, "not registered")
}
