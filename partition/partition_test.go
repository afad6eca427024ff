package partition

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

// extTarget makes a target of a test kind "ext" whose codegen takes the
// given operators on float32 tensors.
func extTarget(t *testing.T, name string, ops ...*op.Op) *targets.Target {
	t.Helper()
	k := &targets.Kind{
		Name:       name,
		DeviceType: targets.CPU,
		Keys:       []string{"cpu"},
		Flow: &backend.Flow{Supports: func(c *graph.Call) error {
			for _, o := range ops {
				if c.Op == o {
					if tt, ok := c.Type().(*ir.TensorType); !ok || tt.DType != ir.Float32 {
						return fmt.Errorf("%s: only float32", c.Op.Name)
					}
					return nil
				}
			}
			return fmt.Errorf("%s is not supported", callName(c))
		}},
	}
	r := targets.NewRegistry()
	if err := r.Register(k); err != nil {
		t.Fatal(err)
	}
	tg, err := targets.New(k, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func parse(t *testing.T, src string) *graph.Module {
	t.Helper()
	m, err := graph.Parse(src, graph.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// outlined lists the calls of outlined functions in main, post order.
func outlined(m *graph.Module) []*graph.Function {
	var fns []*graph.Function
	seen := map[*graph.Function]bool{}
	graph.PostOrder(m.Main().Body, func(e graph.Expr) {
		if c, ok := e.(*graph.Call); ok {
			if f := m.Callee(c); f != nil && f.StrAttr(graph.AttrCompiler) != "" && !seen[f] {
				seen[f] = true
				fns = append(fns, f)
			}
		}
	})
	return fns
}

// countCalls counts the calls of each outlined function in main.
func countCalls(m *graph.Module) map[*graph.Function]int {
	n := map[*graph.Function]int{}
	graph.PostOrder(m.Main().Body, func(e graph.Expr) {
		if c, ok := e.(*graph.Call); ok {
			if f := m.Callee(c); f != nil {
				n[f]++
			}
		}
	})
	return n
}

const vec = "Tensor[(4), float32]"

func TestAddReluOneRegion(t *testing.T) {
	m := parse(t, `def @main(%x: `+vec+`, %y: `+vec+`) {
  %0 = add(%x, %y);
  %1 = nn.relu(%0);
  tanh(%1)
}`)
	out, rep, err := Partition(m, []*targets.Target{extTarget(t, "ext", op.Add, op.Relu)}, Options{ModuleName: "net"})
	if err != nil {
		t.Fatal(err)
	}
	fns := outlined(out)
	if len(fns) != 1 {
		t.Fatalf("%d outlined functions:\n%s", len(fns), out)
	}
	f := fns[0]
	if f.StrAttr(graph.AttrCompiler) != "ext" || !f.BoolAttr(graph.AttrPrimitive) || f.StrAttr(graph.AttrGlobalSymbol) != "kiln_net_ext_main_0" || len(f.Params) != 2 {
		t.Errorf("outlined function: %s", graph.ExprString(f))
	}
	if b, ok := f.Body.(*graph.Call); !ok || b.Op != op.Relu || b.Args[0].(*graph.Call).Op != op.Add {
		t.Errorf("body %s", graph.ExprString(f.Body))
	}
	if rep.Counts["ext"] != 2 || rep.Counts[HostTarget] != 1 || rep.Regions["ext"] != 1 {
		t.Errorf("counts %v regions %v", rep.Counts, rep.Regions)
	}
	var host NodeReport
	for _, n := range rep.Nodes {
		if n.Target == HostTarget {
			host = n
		}
	}
	if host.Op != "tanh" || len(host.Why) != 1 || host.Why[0] != "ext: tanh is not supported" {
		t.Errorf("host entry %+v", host)
	}
}

// TestDiamondCycleTwoRegions: a → b (host) → c and a → c directly; merging
// a and c would make the outlined function depend on itself through b.
func TestDiamondCycleTwoRegions(t *testing.T) {
	m := parse(t, `def @main(%x: `+vec+`) {
  %0 = add(%x, %x);
  %1 = tanh(%0);
  multiply(%0, %1)
}`)
	out, rep, err := Partition(m, []*targets.Target{extTarget(t, "ext", op.Add, op.Multiply)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(outlined(out)); n != 2 {
		t.Fatalf("%d regions, want 2:\n%s", n, out)
	}
	cut := false
	for _, n := range rep.Nodes {
		if n.Op == "multiply" && len(n.Why) == 1 && strings.Contains(n.Why[0], "avoid a dependency cycle") {
			cut = true
		}
	}
	if !cut {
		t.Errorf("report does not record the cut: %+v", rep.Nodes)
	}
	// Without the host op in between, the two merge.
	m = parse(t, `def @main(%x: `+vec+`) {
  %0 = add(%x, %x);
  multiply(%0, %0)
}`)
	out, _, err = Partition(m, []*targets.Target{extTarget(t, "ext", op.Add, op.Multiply)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(outlined(out)); n != 1 {
		t.Errorf("%d regions, want 1", n)
	}
	// NoMerge keeps every call alone.
	out, _, err = Partition(m, []*targets.Target{extTarget(t, "ext", op.Add, op.Multiply)}, Options{NoMerge: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(outlined(out)); n != 2 {
		t.Errorf("NoMerge: %d regions, want 2", n)
	}
}

func TestResultUsedThreeTimesComputedOnce(t *testing.T) {
	m := parse(t, `def @main(%x: `+vec+`) {
  %0 = add(%x, %x);
  %1 = tanh(%0);
  %2 = sigmoid(%0);
  %3 = negative(%0);
  (%1, %2, %3)
}`)
	out, _, err := Partition(m, []*targets.Target{extTarget(t, "ext", op.Add)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	calls := countCalls(out)
	fns := outlined(out)
	if len(fns) != 1 || calls[fns[0]] != 1 {
		t.Errorf("outlined %d functions, called %v times:\n%s", len(fns), calls, out)
	}
}

func TestTwoOutputsReturnTuple(t *testing.T) {
	m := parse(t, `def @main(%x: `+vec+`) {
  %0 = add(%x, %x);
  %1 = multiply(%0, %x);
  %2 = tanh(%0);
  %3 = tanh(%1);
  (%2, %3)
}`)
	out, _, err := Partition(m, []*targets.Target{extTarget(t, "ext", op.Add, op.Multiply)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fns := outlined(out)
	if len(fns) != 1 {
		t.Fatalf("%d regions:\n%s", len(fns), out)
	}
	tup, ok := fns[0].Body.(*graph.Tuple)
	if !ok || len(tup.Fields) != 2 {
		t.Fatalf("body is not a pair: %s", graph.ExprString(fns[0].Body))
	}
	if !strings.Contains(out.String(), ".0") || !strings.Contains(out.String(), ".1") {
		t.Errorf("main does not project both outputs:\n%s", out)
	}
}

func TestConstantsBoundOrPassed(t *testing.T) {
	tt := ir.NewTensorType(ir.Float32, ir.Shape{4})
	x := graph.NewVar("x", tt)
	c := graph.NewConstant(tensor.New(ir.Float32, ir.Shape{4}))
	body := graph.MustCall(op.Tanh, []graph.Expr{graph.MustCall(op.Add, []graph.Expr{x, c}, nil)}, nil)
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x}, body, nil))
	ext := extTarget(t, "ext", op.Add)
	for _, asArgs := range []bool{false, true} {
		out, _, err := Partition(mod, []*targets.Target{ext}, Options{ConstantsAsArgs: asArgs})
		if err != nil {
			t.Fatal(err)
		}
		f := outlined(out)[0]
		want := 1
		if asArgs {
			want = 2
		}
		if len(f.Params) != want {
			t.Errorf("ConstantsAsArgs=%v: %d parameters, want %d", asArgs, len(f.Params), want)
		}
	}
}

func TestSanitizedSymbol(t *testing.T) {
	if got := Symbol("my model", "unsanitary-name++", 3); got != "kiln_my_model_unsanitary_name___main_3" {
		t.Errorf("Symbol = %q", got)
	}
	if got := Symbol("", "dnnl", 0); got != "kiln_default_dnnl_main_0" {
		t.Errorf("Symbol = %q", got)
	}
}

func TestRequireOffloadAndReport(t *testing.T) {
	m := parse(t, `def @main(%x: Tensor[(4), float16]) {
  %0 = add(%x, %x);
  nn.relu(%0)
}`)
	ext := extTarget(t, "ext", op.Add, op.Relu)
	_, rep, err := Partition(m, []*targets.Target{ext}, Options{RequireOffload: true})
	if err == nil || !strings.Contains(err.Error(), "full offload required, but 2 call(s) stay on the host") || !strings.Contains(err.Error(), "ext: add: only float32") {
		t.Errorf("got %v", err)
	}
	var text, js bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text.String(), "partition: host 2\n") || !strings.Contains(text.String(), "ext: nn.relu: only float32") {
		t.Errorf("text report:\n%s", text.String())
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Nodes) != 2 || back.Counts[HostTarget] != 2 {
		t.Errorf("JSON report: %v %+v", err, back)
	}
	// No external target at all: everything stays, saying so.
	out, rep, err := Partition(m, nil, Options{})
	if err != nil || out != m || rep.Nodes[0].Why[0] != "no external target in the target list" {
		t.Errorf("no targets: %v %+v", err, rep.Nodes)
	}
}

// TestWarnings: an external target that takes nothing, one shadowed by an
// earlier target, and a Decider's choices, each with the report's
// warning; SlowRegions names a region whose measured costs exceed the
// host's.
func TestWarnings(t *testing.T) {
	src := `def @main(%x: ` + vec + `, %y: ` + vec + `) {
  %0 = add(%x, %y);
  %1 = nn.relu(%0);
  tanh(%1)
}`
	first, second, none := extTarget(t, "first", op.Add, op.Relu), extTarget(t, "second", op.Relu), extTarget(t, "none", op.Multiply)
	_, rep, err := Partition(parse(t, src), []*targets.Target{first, second, none}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"second receives nothing: the 1 call(s) it takes go to first (1), earlier in the target list; list second first or measure (--partition measured)",
		"none receives nothing: it takes none of the model's operators",
	}
	if fmt.Sprint(rep.Warnings) != fmt.Sprint(want) {
		t.Errorf("warnings\n%q\nwant\n%q", rep.Warnings, want)
	}
	// A Decider that keeps everything on the host: the able targets are
	// told so, and the calls say why.
	host := func(c *graph.Call, able []*targets.Target) (*targets.Target, string) { return nil, "measured: host" }
	_, rep, err = Partition(parse(t, src), []*targets.Target{first}, Options{Decide: host})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Warnings) != 1 || rep.Warnings[0] != "first receives nothing: measured partitioning found the 2 call(s) it takes faster on the host" || rep.Counts["first"] != 0 {
		t.Errorf("with a host decider: warnings %q, counts %v", rep.Warnings, rep.Counts)
	}
	for _, n := range rep.Nodes {
		if n.Op != "tanh" && !strings.Contains(strings.Join(n.Why, "; "), "measured: host") {
			t.Errorf("%s: why %q", n.Op, n.Why)
		}
	}
	// The entries link to their inputs.
	if len(rep.Nodes) != 3 || fmt.Sprint(rep.Nodes[1].Inputs) != "[0]" || fmt.Sprint(rep.Nodes[2].Inputs) != "[1]" || rep.Nodes[0].Bytes != 4*4 {
		t.Errorf("inputs and bytes: %+v", rep.Nodes)
	}
	// SlowRegions from measured costs.
	r := &Report{Nodes: []NodeReport{
		{Node: "a", Target: "ext", Region: 0, CostMs: map[string]float64{"ext": 2, HostTarget: 1}},
		{Node: "b", Target: "ext", Region: 0, CostMs: map[string]float64{"ext": 1, HostTarget: 0.5}},
		{Node: "c", Target: "ext", Region: 1, CostMs: map[string]float64{"ext": 1, HostTarget: 3}},
		{Node: "d", Target: HostTarget, Region: -1, CostMs: map[string]float64{HostTarget: 1}},
	}}
	if got := r.SlowRegions(); len(got) != 1 || got[0] != "ext #0 (2 calls) measured 3.000 ms per run on ext, where the host took 1.500 ms" {
		t.Errorf("SlowRegions: %q", got)
	}
}

// Seed 002: partitioned functions are module globals under their global
// names; main calls them by name, and the printer shows them as module
// functions.
func TestOutlinedFunctionsAreModuleGlobals(t *testing.T) {
	m := parse(t, `def @main(%x: `+vec+`, %y: `+vec+`) {
  %0 = add(%x, %y);
  %1 = tanh(%0);
  add(%1, %y)
}`)
	out, _, err := Partition(m, []*targets.Target{extTarget(t, "ext", op.Add)}, Options{ModuleName: "net"})
	if err != nil {
		t.Fatal(err)
	}
	names := out.Names()
	if want := []string{"main", "kiln_net_ext_main_0", "kiln_net_ext_main_1"}; strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("module functions %v, want %v:\n%s", names, want, out)
	}
	calls := 0
	graph.PostOrder(out.Main().Body, func(e graph.Expr) {
		c, ok := e.(*graph.Call)
		if !ok || c.Op != nil {
			return
		}
		g, ok := c.Fn.(*graph.GlobalVar)
		if !ok {
			t.Errorf("main calls %s, want a call by global name", graph.Describe(c))
			return
		}
		calls++
		if f := out.Funcs[g.Name]; f == nil || f.StrAttr(graph.AttrGlobalSymbol) != g.Name || f.StrAttr(graph.AttrCompiler) != "ext" {
			t.Errorf("@%s is not the outlined function of that name", g.Name)
		}
	})
	if calls != 2 {
		t.Errorf("%d calls of outlined functions in main, want 2", calls)
	}
	text := out.String()
	for _, want := range []string{"def @kiln_net_ext_main_0 [Compiler=\"ext\"", "@kiln_net_ext_main_1(%"} {
		if !strings.Contains(text, want) {
			t.Errorf("the printed module lacks %q:\n%s", want, text)
		}
	}
	// A module that already has a function of an outlined one's name.
	m.Funcs["kiln_net_ext_main_0"] = m.Main()
	if _, _, err := Partition(m, []*targets.Target{extTarget(t, "ext", op.Add)}, Options{ModuleName: "net"}); err == nil || !strings.Contains(err.Error(), "already has a function @kiln_net_ext_main_0") {
		t.Errorf("a name clash: %v", err)
	}
}
