package driver

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/shared"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/partition"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/runtime/jsonrt"
	"github.com/kiln-dev/kiln/targets"
)

// Two fake external backends with known costs: each takes float32 relu
// calls and runs each, correctly, in Go; slowKind then waits slowDelay,
// freeKind does not. Their modules are JSON graphs run by package jsonrt.
const (
	slowKind   = "kiln_test_slow"
	freeKind   = "kiln_test_free"
	brokenKind = "kiln_test_broken" // its kernels fail at run time
	flakyKind  = "kiln_test_flaky"  // its kernels fail from their 11th run
	slowDelay  = 3 * time.Millisecond
	broken     = -1 // the delay that marks brokenKind's kernels
	flaky      = -2 // the delay that marks flakyKind's kernels
)

// fakeKinds are the fake backends by the delay of their kernels.
var fakeKinds = map[string]time.Duration{slowKind: slowDelay, freeKind: 0, brokenKind: broken, flakyKind: flaky}

var registerFakeLoaders = sync.OnceValue(func() error {
	for kind, delay := range fakeKinds {
		if err := runtime.RegisterLoader(jsonrt.NewLoader(kind, func() (jsonrt.KernelSet, error) { return fakeKernels{delay}, nil })); err != nil {
			return err
		}
	}
	return nil
})

type fakeKernels struct{ delay time.Duration }

func (fakeKernels) Check(g *jsonrt.Graph, id int) error {
	if g.Nodes[id].Name != op.Relu.Name {
		return fmt.Errorf("only relu")
	}
	return nil
}

func (s fakeKernels) Prepare(ctx *jsonrt.PrepareContext) (jsonrt.Kernel, error) {
	return &fakeRelu{delay: s.delay}, nil
}

type fakeRelu struct {
	delay time.Duration
	runs  int
}

func (k *fakeRelu) Run(args []*runtime.NDArray) error {
	k.runs++
	if k.delay == broken || k.delay == flaky && k.runs > 10 {
		return fmt.Errorf("this backend is broken")
	}
	in, err := args[0].ToTensor()
	if err != nil {
		return err
	}
	v := in.Float32s()
	for i := range v {
		v[i] = max(v[i], 0)
	}
	if err := args[1].CopyFrom(in); err != nil {
		return err
	}
	if k.delay > 0 {
		time.Sleep(k.delay)
	}
	return nil
}

// fakeRegistry registers "c" and the two fake backends.
func fakeRegistry(t *testing.T) *targets.Registry {
	t.Helper()
	if err := registerFakeLoaders(); err != nil {
		t.Fatal(err)
	}
	r := targets.NewRegistry()
	kinds := []*targets.Kind{targets.C}
	for name, delay := range fakeKinds {
		kinds = append(kinds, &targets.Kind{Name: name, DeviceType: targets.CPU, Keys: []string{"cpu"}, Flow: &backend.Flow{
			Supports: func(c *graph.Call) error {
				if c.Op != op.Relu {
					return fmt.Errorf("only relu")
				}
				if tt, ok := c.Type().(*ir.TensorType); !ok || tt.DType != ir.Float32 {
					return fmt.Errorf("only float32")
				}
				return nil
			},
			Hooks: backend.Hooks{RelayToRuntime: fakeRelayToRuntime(name, delay)},
		}})
	}
	for _, k := range kinds {
		if err := r.Register(k); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// fakeRelayToRuntime serialises a function of relu calls as a JSON graph
// of module kind kind.
func fakeRelayToRuntime(kind string, delay time.Duration) func(*backend.HookContext, *graph.Function, string) (runtime.Module, error) {
	return func(_ *backend.HookContext, fn *graph.Function, symbol string) (runtime.Module, error) {
		g := &jsonrt.Graph{Symbol: symbol}
		entry := map[graph.Expr]jsonrt.Entry{}
		add := func(n jsonrt.Node, tt *ir.TensorType) jsonrt.Entry {
			n.Shape, n.DType = [][]int64{append([]int64{}, tt.Shape...)}, []string{tt.DType.String()}
			g.Nodes = append(g.Nodes, n)
			return jsonrt.Entry{Node: len(g.Nodes) - 1}
		}
		for i, p := range fn.Params {
			entry[p] = add(jsonrt.Node{Op: jsonrt.OpInput, Name: fmt.Sprintf("in%d", i)}, p.Type().(*ir.TensorType))
		}
		var err error
		graph.PostOrder(fn.Body, func(e graph.Expr) {
			c, ok := e.(*graph.Call)
			if !ok || err != nil {
				return
			}
			in, ok := entry[c.Args[0]]
			if !ok || c.Op != op.Relu {
				err = fmt.Errorf("%s: not a relu of a parameter or relu", graph.Describe(c))
				return
			}
			entry[c] = add(jsonrt.Node{Op: jsonrt.OpKernel, Name: op.Relu.Name, Inputs: []jsonrt.Entry{in}, Sources: graph.Sources(nil, c)}, c.Type().(*ir.TensorType))
		})
		if err != nil {
			return nil, err
		}
		var heads []graph.Expr
		if t, ok := fn.Body.(*graph.Tuple); ok {
			heads = t.Fields
		} else {
			heads = []graph.Expr{fn.Body}
		}
		for _, h := range heads {
			g.Heads = append(g.Heads, entry[h])
		}
		return jsonrt.New(kind, g, fakeKernels{delay})
	}
}

// TestMeasuredPartitioningAvoidsASlowBackend compiles two shared models
// with a backend that takes every relu but costs 3 ms per call, alone
// (-t "slow, c") and listed before another that takes the same calls at
// no extra cost (-t "slow, free, c"): measured partitioning must give the
// slow backend nothing (every candidate that gives it something is slower
// by tens of milliseconds), record the measurement in the report with
// each relu's measured costs, and take the choice from its cache the
// second time. Greedy partitioning gives the slow backend every relu.
func TestMeasuredPartitioningAvoidsASlowBackend(t *testing.T) {
	testenv.Cgo(t)
	if testing.Short() {
		t.Skip("compiles and runs shared models (-short)")
	}
	r := fakeRegistry(t)
	cache := t.TempDir()
	for _, c := range []struct{ model, tgts string }{
		{"squeezenet1_1", slowKind + ", c -mcpu=x86-64"},
		{"lenet", slowKind + ", " + freeKind + ", c -mcpu=x86-64"},
	} {
		t.Run(c.model, func(t *testing.T) {
			l, err := r.ParseList(c.tgts)
			if err != nil {
				t.Fatal(err)
			}
			dir, err := shared.Path("models", c.model)
			if err != nil {
				t.Skip(err)
			}
			m, err := onnx.LoadFile(filepath.Join(dir, "model.onnx"), onnx.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var greedy partition.Report
			if _, err := Compile(m.Module, nil, Config{Host: l.Host, Targets: l.Targets, Out: filepath.Join(t.TempDir(), "g"), Report: &greedy}); err != nil {
				t.Fatal(err)
			}
			if greedy.Counts[slowKind] == 0 {
				t.Fatalf("greedy partitioning gave the slow backend nothing: %v", greedy.Counts)
			}
			for round, wantCached := range []bool{false, true} {
				var rep partition.Report
				cfg := Config{Host: l.Host, Targets: l.Targets, Out: filepath.Join(t.TempDir(), "m"), Report: &rep}
				if _, err := CompileMeasured(t.Context(), m.Module, nil, cfg, MeasureOptions{Runs: 3, CacheDir: cache}); err != nil {
					t.Fatal(err)
				}
				if rep.Measured == nil || rep.Measured.Cached != wantCached {
					t.Fatalf("round %d: measurement %+v, want cached=%v", round, rep.Measured, wantCached)
				}
				if rep.Counts[slowKind] != 0 {
					t.Errorf("round %d: %s; the slow backend got %d calls", round, rep.Measured.Summary(), rep.Counts[slowKind])
				}
				names := map[string]bool{}
				for _, cand := range rep.Measured.Candidates {
					names[cand.Name] = true
				}
				if !names[partition.HostTarget] || !names[slowKind] || len(l.Targets) > 2 && !names["greedy"] {
					t.Errorf("round %d: candidates %s, want host, %s (and greedy with two backends)", round, rep.Measured.Summary(), slowKind)
				}
				relus := 0
				for _, n := range rep.Nodes {
					if n.Op != op.Relu.Name {
						continue
					}
					relus++
					if n.CostMs[slowKind] < float64(slowDelay.Milliseconds())*0.9 || n.CostMs[partition.HostTarget] <= 0 {
						t.Errorf("round %d: %s: measured costs %v, want the slow backend's %v and the host's", round, n.Node, n.CostMs, slowDelay)
					}
					if n.Target == partition.HostTarget && !strings.Contains(strings.Join(n.Why, "; "), "measured partitioning") {
						t.Errorf("round %d: %s on the host because %q", round, n.Node, n.Why)
					}
				}
				if relus == 0 {
					t.Errorf("round %d: no relu in the report", round)
				}
			}
		})
	}
}

// TestRefine checks the refinement on a chain a → b → c → d → (e → f)
// the target took, from known costs: b alone is cheaper on the host, but
// by less than the two conversions moving it would add, so it stays; d is
// much cheaper on the host and moves; the composite (e, f) moves whole.
func TestRefine(t *testing.T) {
	tgt := &targets.Target{Kind: &targets.Kind{Name: "ext"}}
	node := func(name, comp string, in ...int) partition.NodeReport {
		return partition.NodeReport{Node: name, Op: "op", Composite: comp, Target: "ext", Inputs: in, Bytes: 1 << 20}
	}
	only := &candidate{name: "ext", def: tgt}
	only.rep.Nodes = []partition.NodeReport{
		node("a", ""), node("b", "", 0), node("c", "", 1), node("d", "", 2),
		node("e", "x.comp", 3), node("f", "x.comp", 4),
	}
	// 1 MiB at copyBandwidth: 0.21 ms per crossing.
	host := map[string]float64{"a": 5, "b": 0.9, "c": 5, "d": 0.1, "e": 0.1, "f": 0.1}
	ext := map[string]float64{"a": 1, "b": 1, "c": 1, "d": 2, "e": 1, "f": 1}
	r := refine(only, tgt, host, ext)
	if r == nil {
		t.Fatal("no refined candidate")
	}
	want := map[string]string{"a": "ext", "b": "ext", "c": "ext", "d": "host", "e": "host", "f": "host"}
	for k, v := range want {
		if r.spans[k] != v {
			t.Errorf("%s on %s, want %s (all: %v)", k, r.spans[k], v, r.spans)
		}
	}
	// Nothing to move: no candidate.
	if r := refine(only, tgt, map[string]float64{"a": 9, "b": 9, "c": 9, "d": 9, "e": 9, "f": 9}, ext); r != nil {
		t.Errorf("refined %v where the target wins everywhere", r.spans)
	}
}

// TestMeasuredPartitioningSurvivesABrokenBackend: a backend whose kernels
// fail at run time is left out of the measurement with a warning that
// says why; the model compiles for the candidates that ran, and the
// choice is not cached.
func TestMeasuredPartitioningSurvivesABrokenBackend(t *testing.T) {
	testenv.Cgo(t)
	for _, kind := range []string{brokenKind, flakyKind} {
		t.Run(kind, func(t *testing.T) { survives(t, kind) })
	}
}

// survives checks that kind, whose kernels fail when they run (from the
// start, or only in the timed rounds), is left out of the measurement.
func survives(t *testing.T, kind string) {
	r := fakeRegistry(t)
	l, err := r.ParseList(kind + ", c -mcpu=x86-64")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := shared.Path("models", "lenet")
	if err != nil {
		t.Skip(err)
	}
	m, err := onnx.LoadFile(filepath.Join(dir, "model.onnx"), onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	for round := 0; round < 2; round++ {
		var rep partition.Report
		cfg := Config{Host: l.Host, Targets: l.Targets, Out: filepath.Join(t.TempDir(), "m"), Report: &rep}
		// 3 warm-up and 4 profiled runs, then the flaky kernels fail in
		// the fourth timed round.
		if _, err := CompileMeasured(t.Context(), m.Module, nil, cfg, MeasureOptions{Runs: 4, CacheDir: cache}); err != nil {
			t.Fatal(err)
		}
		if rep.Measured == nil || rep.Measured.Cached || rep.Measured.Chosen == kind {
			t.Fatalf("round %d: measurement %+v, counts %v", round, rep.Measured, rep.Counts)
		}
		for _, c := range rep.Measured.Candidates {
			if c.Name == kind {
				t.Errorf("round %d: the failing candidate was measured: %+v", round, rep.Measured.Candidates)
			}
		}
		// The broken kernels fail everywhere, so every candidate with
		// one is out. The flaky ones fail only in the timed rounds of
		// the candidate that ran them longest (its profile ran too): the
		// refined candidate, timed after fewer runs, may stay and win.
		if kind == brokenKind && (rep.Measured.Chosen != partition.HostTarget || rep.Counts[kind] != 0) {
			t.Errorf("round %d: measurement %+v, counts %v", round, rep.Measured, rep.Counts)
		}
		if w := strings.Join(rep.Warnings, "\n"); !strings.Contains(w, `left out candidate "`+kind+`"`) || !strings.Contains(w, "this backend is broken") {
			t.Errorf("round %d: warnings %q", round, rep.Warnings)
		}
	}
}

// TestFastestBreaksTiesBySimplicity: the simplest candidate within the
// noise margin of the fastest wins; a clearly faster one wins outright.
func TestFastestBreaksTiesBySimplicity(t *testing.T) {
	cands := func(ms ...float64) []*candidate {
		var out []*candidate
		for i, m := range ms {
			out = append(out, &candidate{name: fmt.Sprint(i), median: m})
		}
		return out
	}
	for _, c := range []struct {
		ms   []float64
		want string
	}{
		{[]float64{1.020, 1.014, 1.5}, "0"}, // a tie: the host
		{[]float64{1.2, 1.0, 0.99}, "1"},    // the target alone, within 3 % of refined
		{[]float64{1.2, 1.1, 0.9}, "2"},     // clearly faster
		{[]float64{0.5}, "0"},
	} {
		if got := fastest(cands(c.ms...)); got.name != c.want {
			t.Errorf("fastest(%v) = candidate %s, want %s", c.ms, got.name, c.want)
		}
	}
}
