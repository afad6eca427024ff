package device

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/graph/transform"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

// planEnv is a compilation configuration for tests: "test_accel, c", c
// the default device and the host.
type planEnv struct {
	cfg     *CompilationConfig
	c, a    *targets.Target
	cpu0    VirtualDevice
	cpu1    VirtualDevice
	accel0  VirtualDevice
	resolve mapResolver
}

func newPlanEnv(t *testing.T) *planEnv {
	t.Helper()
	c, a := testTargets(t)
	cfg, err := NewCompilationConfig([]*targets.Target{a, c}, nil, targets.CPU)
	if err != nil {
		t.Fatal(err)
	}
	return &planEnv{cfg: cfg, c: c, a: a,
		cpu0: vd(targets.CPU, 0, c, "global"), cpu1: vd(targets.CPU, 1, c, "global"),
		accel0: vd(targets.ExtDev, 0, a, "global")}
}

// parse reads a module and attaches the configuration.
func (env *planEnv) parse(t *testing.T, src string) *graph.Module {
	t.Helper()
	mod, err := graph.Parse(src, graph.ParseOptions{})
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	env.cfg.Attach(mod)
	return mod
}

// plan parses and plans a module and checks PlanDevices is idempotent.
func (env *planEnv) plan(t *testing.T, src string) (*graph.Module, *graph.Module) {
	t.Helper()
	in := env.parse(t, src)
	out, err := PlanDevices(in)
	if err != nil {
		t.Fatalf("PlanDevices: %v", err)
	}
	again, err := PlanDevices(out)
	if err != nil {
		t.Fatalf("PlanDevices of its own output: %v", err)
	}
	if a, b := printed(t, out), printed(t, again); a != b {
		t.Fatalf("PlanDevices is not idempotent:\nfirst:\n%s\nsecond:\n%s", a, b)
	}
	// The printed form parses back and plans to the same text.
	reparsed := env.parse(t, printed(t, out))
	re, err := PlanDevices(reparsed)
	if err != nil {
		t.Fatalf("PlanDevices of the reparsed output: %v", err)
	}
	if a, b := printed(t, out), printed(t, re); a != b {
		t.Fatalf("planning the reparsed output changed it:\nfirst:\n%s\nsecond:\n%s", a, b)
	}
	return in, out
}

func printed(t *testing.T, m *graph.Module) string {
	t.Helper()
	var b strings.Builder
	if err := graph.Print(&b, m, graph.PrintOptions{HideTypes: true, InlineAllConstants: true}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// calls returns main's operator calls of o, in post order.
func calls(m *graph.Module, fn string, o *op.Op) []*graph.Call {
	var out []*graph.Call
	graph.PostOrder(m.Funcs[fn].Body, func(e graph.Expr) {
		if c, ok := e.(*graph.Call); ok && c.Op == o {
			out = append(out, c)
		}
	})
	return out
}

// countOps counts operator calls of o in every function of m.
func countOps(m *graph.Module, o *op.Op) int {
	n := 0
	for _, name := range m.Names() {
		n += len(calls(m, name, o))
	}
	return n
}

func checkDevice(t *testing.T, m *graph.Module, e graph.Expr, want VirtualDevice) {
	t.Helper()
	if got := DeviceOf(m, e); got != want {
		t.Errorf("device of %s = %s, want %s", graph.Describe(e), got, want)
	}
}

const twoByTwo = "Tensor[(2, 2), float32]"

func TestPlanNoAnnotations(t *testing.T) {
	env := newPlanEnv(t)
	_, out := env.plan(t, `def @main(%a: `+twoByTwo+`, %b: `+twoByTwo+`) {
  %0 = add(%a, %b);
  %1 = multiply(%0, constant(float32, [], [2.0]));
  (subtract(%1, %b), %0)
}`)
	if n := countOps(out, op.DeviceCopy); n != 0 {
		t.Fatalf("%d copies inserted:\n%s", n, printed(t, out))
	}
	main := out.Main()
	for _, p := range main.Params {
		checkDevice(t, out, p, env.cpu0)
	}
	graph.PostOrder(main.Body, func(e graph.Expr) { checkDevice(t, out, e, env.cpu0) })
	want := `def @main [param_device_ids=[0, 0], param_device_types=[1, 1], result_device_id=0, result_device_type=1] (%a: Tensor[(2, 2), float32], %b: Tensor[(2, 2), float32]) -> (Tensor[(2, 2), float32], Tensor[(2, 2), float32]) {
  %0 = add(%a, %b);
  %1 = multiply(%0, constant(float32, [], [2.0]));
  %2 = subtract(%1, %b);
  (%2, %0)
}
`
	if got := printed(t, out); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

// annotated is on_device(add(a, b), cpu:1) feeding a subtract on the
// default device; viaCopy is the same with an explicit device_copy.
const (
	annotated = `def @main(%a: ` + twoByTwo + `, %b: ` + twoByTwo + `, %c: ` + twoByTwo + `) {
  %0 = add(%a, %b);
  %1 = on_device(%0, device="cpu:1");
  subtract(%1, %c)
}`
	viaCopy = `def @main(%a: ` + twoByTwo + `, %b: ` + twoByTwo + `, %c: ` + twoByTwo + `) {
  %0 = add(%a, %b);
  %1 = device_copy(%0, src_device_type=1, src_device_id=1, dst_device_type=1, dst_device_id=0);
  subtract(%1, %c)
}`
	plannedCopy = `def @main [param_device_ids=[1, 1, 0], param_device_types=[1, 1, 1], result_device_id=0, result_device_type=1] (%a: Tensor[(2, 2), float32], %b: Tensor[(2, 2), float32], %c: Tensor[(2, 2), float32]) -> Tensor[(2, 2), float32] {
  %0 = add(%a, %b);
  %1 = device_copy(%0, dst_device_id=0, dst_device_type=1, src_device_id=1, src_device_type=1);
  subtract(%1, %c)
}
`
)

func TestPlanOnDeviceInsertsOneCopy(t *testing.T) {
	env := newPlanEnv(t)
	for _, src := range []string{annotated, viaCopy} {
		_, out := env.plan(t, src)
		if got := printed(t, out); got != plannedCopy {
			t.Fatalf("got:\n%s\nwant:\n%s", got, plannedCopy)
		}
		if countOps(out, op.OnDevice) != 0 || countOps(out, op.DeviceCopy) != 1 {
			t.Fatalf("want no on_device and one device_copy:\n%s", printed(t, out))
		}
		checkDevice(t, out, calls(out, "main", op.Add)[0], env.cpu1)
		checkDevice(t, out, calls(out, "main", op.DeviceCopy)[0], env.cpu0)
		checkDevice(t, out, calls(out, "main", op.Subtract)[0], env.cpu0)
		ps := out.Main().Params
		checkDevice(t, out, ps[0], env.cpu1)
		checkDevice(t, out, ps[2], env.cpu0)
	}
}

func TestPlanSharedCopy(t *testing.T) {
	// Two consumers on the default device share one copy; a consumer on
	// the producer's device reads the value directly.
	env := newPlanEnv(t)
	_, out := env.plan(t, `def @main(%a: `+twoByTwo+`, %b: `+twoByTwo+`, %c: `+twoByTwo+`) {
  %0 = add(%a, %b);
  %1 = on_device(%0, device="cpu:1");
  %2 = on_device(%0, device="cpu:1");
  %3 = subtract(%1, %c);
  %4 = multiply(%2, %c);
  %5 = negative(%0);
  %6 = on_device(%5, device="cpu:1");
  (%3, %4, %6)
}`)
	copies := calls(out, "main", op.DeviceCopy)
	if len(copies) != 2 {
		t.Fatalf("want 2 copies (add and negative to cpu:0):\n%s", printed(t, out))
	}
	if copies[0].Args[0] != calls(out, "main", op.Add)[0] || copies[1].Args[0] != calls(out, "main", op.Negative)[0] {
		t.Fatalf("copies of the wrong values:\n%s", printed(t, out))
	}
	checkDevice(t, out, calls(out, "main", op.Negative)[0], env.cpu1)
}

func TestPlanExtDevice(t *testing.T) {
	// A label resolved through the resolver puts the op on the accelerator;
	// its constant operand is duplicated, not copied.
	env := newPlanEnv(t)
	env.cfg.Labels = mapResolver{"npu": {env.a, 0}}
	_, out := env.plan(t, `def @main(%a: `+twoByTwo+`) {
  %0 = add(%a, constant(float32, [], [1.0]));
  %1 = on_device(%0, device="npu");
  multiply(%1, constant(float32, [], [1.0]))
}`)
	want := `def @main [param_device_ids=[0], param_device_types=[12], result_device_id=0, result_device_type=1] (%a: Tensor[(2, 2), float32]) -> Tensor[(2, 2), float32] {
  %0 = add(%a, constant(float32, [], [1.0]));
  %1 = device_copy(%0, dst_device_id=0, dst_device_type=1, src_device_id=0, src_device_type=12);
  multiply(%1, constant(float32, [], [1.0]))
}
`
	if got := printed(t, out); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	add := calls(out, "main", op.Add)[0]
	checkDevice(t, out, add, env.accel0)
	checkDevice(t, out, add.Args[1], env.accel0)
	mul := calls(out, "main", op.Multiply)[0]
	checkDevice(t, out, mul.Args[1], env.cpu0)
	if DeviceOf(out, add).Target != env.a {
		t.Fatalf("add lowered for %v, want the accelerator", DeviceOf(out, add).Target)
	}
}

func TestPlanSharedConstantDuplicated(t *testing.T) {
	// One constant node used on two devices becomes two nodes.
	env := newPlanEnv(t)
	in := env.parse(t, `def @main(%a: `+twoByTwo+`) {
  %0 = add(%a, %a);
  %1 = on_device(%0, device="cpu:1");
  multiply(%1, %a)
}`)
	// Rebuild with one shared constant in place of %a's second uses.
	k := graph.NewConstant(tensor.FromFloat32s(ir.Shape{}, []float32{3}))
	main := in.Main()
	body := graph.Rewrite(main.Body, func(e graph.Expr) graph.Expr {
		if c, ok := e.(*graph.Call); ok && (c.Op == op.Add || c.Op == op.Multiply) {
			return &graph.Call{Op: c.Op, Args: []graph.Expr{c.Args[0], k}, Attrs: c.Attrs}
		}
		return e
	})
	in.Funcs["main"] = graph.NewFunction(main.Params, body, nil)
	out, err := PlanDevices(in)
	if err != nil {
		t.Fatal(err)
	}
	add, mul := calls(out, "main", op.Add)[0], calls(out, "main", op.Multiply)[0]
	if add.Args[1] == mul.Args[1] {
		t.Fatalf("constant shared across devices:\n%s", printed(t, out))
	}
	checkDevice(t, out, add.Args[1], env.cpu1)
	checkDevice(t, out, mul.Args[1], env.cpu0)
	if countOps(out, op.DeviceCopy) != 1 {
		t.Fatalf("want one copy:\n%s", printed(t, out))
	}
}

func TestPlanThroughFunctionParams(t *testing.T) {
	// @f's parameter is constrained to the accelerator by an annotation
	// inside @f; the constraint flows to main's add and parameters. @f's
	// result is unconstrained, so the copy lands inside @f.
	env := newPlanEnv(t)
	env.cfg.Labels = mapResolver{"npu": {env.a, 0}}
	_, out := env.plan(t, `def @main(%a: `+twoByTwo+`, %b: `+twoByTwo+`, %c: `+twoByTwo+`) {
  %0 = add(%a, %b);
  %1 = @f(%0);
  subtract(%1, %c)
}
def @f(%p: `+twoByTwo+`) {
  %0 = negative(%p);
  on_device(%0, device="npu")
}`)
	want := `def @main [param_device_ids=[0, 0, 0], param_device_types=[12, 12, 1], result_device_id=0, result_device_type=1] (%a: Tensor[(2, 2), float32], %b: Tensor[(2, 2), float32], %c: Tensor[(2, 2), float32]) -> Tensor[(2, 2), float32] {
  %0 = add(%a, %b);
  %1 = @f(%0);
  subtract(%1, %c)
}

def @f [param_device_ids=[0], param_device_types=[12], result_device_id=0, result_device_type=1] (%p: Tensor[(2, 2), float32]) -> Tensor[(2, 2), float32] {
  %0 = negative(%p);
  device_copy(%0, dst_device_id=0, dst_device_type=1, src_device_id=0, src_device_type=12)
}
`
	if got := printed(t, out); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	checkDevice(t, out, calls(out, "main", op.Add)[0], env.accel0)
	checkDevice(t, out, calls(out, "f", op.Negative)[0], env.accel0)
	checkDevice(t, out, calls(out, "main", op.Subtract)[0], env.cpu0)
}

func TestPlanFunctionAttrsConstrain(t *testing.T) {
	// Recorded parameter devices of a callee act as constraints.
	env := newPlanEnv(t)
	_, out := env.plan(t, `def @main(%a: `+twoByTwo+`) {
  %0 = negative(%a);
  @g(%0)
}
def @g [param_device_types=[1], param_device_ids=[1], result_device_type=1, result_device_id=1] (%p: `+twoByTwo+`) {
  abs(%p)
}`)
	checkDevice(t, out, calls(out, "main", op.Negative)[0], env.cpu1)
	checkDevice(t, out, calls(out, "g", op.Abs)[0], env.cpu1)
	if countOps(out, op.DeviceCopy) != 0 {
		t.Fatalf("no copy needed:\n%s", printed(t, out))
	}
}

func TestPlanTupleProjectionCopy(t *testing.T) {
	env := newPlanEnv(t)
	_, out := env.plan(t, `def @main(%x: Tensor[(4, 2), float32], %c: `+twoByTwo+`) {
  %0 = split(%x, indices=[2]);
  %1 = on_device(%0, device="cpu:1");
  %2 = %1.0;
  %3 = %1.1;
  %4 = subtract(%2, %c);
  add(%4, %3)
}`)
	want := `def @main [param_device_ids=[1, 0], param_device_types=[1, 1], result_device_id=0, result_device_type=1] (%x: Tensor[(4, 2), float32], %c: Tensor[(2, 2), float32]) -> Tensor[(2, 2), float32] {
  %0 = split(%x, axis=0, indices=[2]);
  %1 = %0.0;
  %2 = device_copy(%1, dst_device_id=0, dst_device_type=1, src_device_id=1, src_device_type=1);
  %3 = subtract(%2, %c);
  %4 = %0.1;
  %5 = device_copy(%4, dst_device_id=0, dst_device_type=1, src_device_id=1, src_device_type=1);
  add(%3, %5)
}
`
	if got := printed(t, out); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	checkDevice(t, out, calls(out, "main", op.Split)[0], env.cpu1)
	for _, cp := range calls(out, "main", op.DeviceCopy) {
		if _, ok := cp.Args[0].(*graph.TupleGetItem); !ok {
			t.Fatalf("copy of %s, want of a projection", graph.Describe(cp.Args[0]))
		}
		checkDevice(t, out, cp.Args[0], env.cpu1)
	}
}

func TestPlanTupleResultCopiedFieldwise(t *testing.T) {
	// A tuple-valued crossing at the function result copies field by field.
	env := newPlanEnv(t)
	_, out := env.plan(t, `def @main(%x: Tensor[(4, 2), float32]) {
  %0 = split(%x, indices=[2]);
  on_device(%0, device="cpu:1")
}`)
	want := `def @main [param_device_ids=[1], param_device_types=[1], result_device_id=0, result_device_type=1] (%x: Tensor[(4, 2), float32]) -> (Tensor[(2, 2), float32], Tensor[(2, 2), float32]) {
  %0 = split(%x, axis=0, indices=[2]);
  %1 = %0.0;
  %2 = device_copy(%1, dst_device_id=0, dst_device_type=1, src_device_id=1, src_device_type=1);
  %3 = %0.1;
  %4 = device_copy(%3, dst_device_id=0, dst_device_type=1, src_device_id=1, src_device_type=1);
  (%2, %4)
}
`
	if got := printed(t, out); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestPlanErrors(t *testing.T) {
	env := newPlanEnv(t)
	env.cfg.Labels = mapResolver{"npu": {env.a, 0}}
	cases := []struct {
		name, src, err string
	}{
		{"conflict", `def @main(%a: ` + twoByTwo + `) {
  %0 = on_device(%a, device="cpu:1");
  %1 = on_device(%a, device="cpu:2");
  add(%0, %1)
}`, "on_device: conflicting devices VirtualDevice(cpu:1, target=c) and VirtualDevice(cpu:2, target=c)"},
		{"conflict through result", `def @main(%a: ` + twoByTwo + `) {
  %0 = on_device(%a, device="npu", constrain_result=true);
  %1 = negative(%0);
  on_device(%1, device="cpu", constrain_result=true)
}`, "conflicting devices"},
		{"unknown label", `def @main(%a: ` + twoByTwo + `) {
  on_device(%a, device="gpu:0")
}`, `no target registered under label "gpu"`},
		{"device type without target", `def @main(%a: ` + twoByTwo + `) {
  device_copy(%a, src_device_type=1, dst_device_type=2)
}`, "no target for device type device_type(2)"},
		{"label disagrees with device_type", `def @main(%a: ` + twoByTwo + `) {
  on_device(%a, device="npu", device_type=1)
}`, "device_type is cpu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PlanDevices(env.parse(t, tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want one containing %q", err, tc.err)
			}
		})
	}
	bare, err := graph.Parse(annotated, graph.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PlanDevices(bare); err == nil || !strings.Contains(err.Error(), "compilation configuration") {
		t.Fatalf("module without a configuration: err = %v", err)
	}
}

func TestPlanAfterFuseOps(t *testing.T) {
	// FuseOps wraps the lone on_device in a primitive function; planning
	// sees through it and gives the same placement.
	env := newPlanEnv(t)
	fused, err := transform.FuseOps(env.parse(t, annotated))
	if err != nil {
		t.Fatal(err)
	}
	out, err := PlanDevices(fused)
	if err != nil {
		t.Fatal(err)
	}
	copies := calls(out, "main", op.DeviceCopy)
	if len(copies) != 1 || countOps(out, op.OnDevice) != 0 {
		t.Fatalf("want one bare device_copy:\n%s", printed(t, out))
	}
	src := copies[0].Args[0]
	checkDevice(t, out, src, env.cpu1)
	checkDevice(t, out, copies[0], env.cpu0)
	if c, ok := src.(*graph.Call); !ok || c.Fn == nil {
		t.Fatalf("copy source %s, want the fused add call", graph.Describe(src))
	}
}

// TestPlanDifferential runs the reference executor before and after
// planning: values must be identical, bit for bit.
func TestPlanDifferential(t *testing.T) {
	env := newPlanEnv(t)
	env.cfg.Labels = mapResolver{"npu": {env.a, 0}}
	srcs := []string{annotated, viaCopy,
		`def @main(%a: ` + twoByTwo + `, %b: ` + twoByTwo + `) {
  %0 = add(%a, constant(float32, [2, 2], [1.0, -2.0, 0.5, 3.0]));
  %1 = on_device(%0, device="npu");
  %2 = exp(%1);
  %3 = on_device(%2, device="cpu:1", constrain_result=true);
  %4 = multiply(%3, %b);
  %5 = on_device(%4, device="c:1");
  %6 = sqrt(%5);
  (%6, negative(%1), %3)
}`,
		`def @main(%a: ` + twoByTwo + `, %b: ` + twoByTwo + `) {
  %0 = @h(%a, %b);
  %1 = on_device(%0, device="cpu:1");
  tanh(%1)
}
def @h(%x: ` + twoByTwo + `, %y: ` + twoByTwo + `) {
  %0 = maximum(%x, %y);
  %1 = on_device(%0, device="npu");
  divide(%1, constant(float32, [], [4.0]))
}`,
	}
	rng := rand.New(rand.NewSource(7))
	for i, src := range srcs {
		in, out := env.plan(t, src)
		if countOps(out, op.OnDevice) != 0 {
			t.Fatalf("graph %d: on_device left:\n%s", i, printed(t, out))
		}
		args := make([]*tensor.Tensor, len(in.Main().Params))
		for j := range args {
			vals := make([]float32, 4)
			for k := range vals {
				vals[k] = rng.Float32()*4 - 2
			}
			args[j] = tensor.FromFloat32s(ir.Shape{2, 2}, vals)
		}
		want, err := ref.Run(in, args)
		if err != nil {
			t.Fatalf("graph %d before planning: %v", i, err)
		}
		got, err := ref.Run(out, args)
		if err != nil {
			t.Fatalf("graph %d after planning: %v", i, err)
		}
		w, g := want.Flatten(), got.Flatten()
		if len(w) != len(g) {
			t.Fatalf("graph %d: %d outputs, want %d", i, len(g), len(w))
		}
		for k := range w {
			if err := tensor.AllClose(g[k], w[k], 0, 0); err != nil {
				t.Fatalf("graph %d output %d: %v", i, k, err)
			}
		}
	}
}
