package device

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
)

// TestVerifyPlan: a planned module verifies; the same module after a
// rewrite that drops its device_copy (the subtract then reads the add's
// cpu:1 value on cpu:0), that rebuilds a node without planning again, or
// whose copy's attributes disagree with its argument, does not.
func TestVerifyPlan(t *testing.T) {
	env := newPlanEnv(t)
	for _, src := range []string{annotated, viaCopy} {
		_, out := env.plan(t, src)
		if err := VerifyPlan(out); err != nil {
			t.Fatalf("planned module: %v", err)
		}
	}
	_, out := env.plan(t, annotated)
	if err := VerifyPlan(env.parse(t, annotated)); err != nil {
		t.Errorf("an unplanned module: %v", err)
	}

	// Bypass the copy: sub(copy(add), z) becomes sub(add, z), the new
	// call keeps a planned device under the old node's key.
	cp := calls(out, "main", op.DeviceCopy)[0]
	sub := calls(out, "main", op.Subtract)[0]
	bypass, err := graph.NewCall(sub.Op, []graph.Expr{cp.Args[0], sub.Args[1]}, sub.Attrs)
	if err != nil {
		t.Fatal(err)
	}
	checkVerifyFails(t, out, sub, bypass, "without a device_copy")

	// A rebuilt node the plan does not know.
	rebuilt, err := graph.NewCall(sub.Op, append([]graph.Expr(nil), sub.Args...), sub.Attrs)
	if err != nil {
		t.Fatal(err)
	}
	checkVerifyFails(t, out, sub, rebuilt, "has no planned device")
}

// checkVerifyFails replaces old by new in main (new takes old's planned
// device unless want is about a missing one) and checks VerifyPlan fails
// mentioning want.
func checkVerifyFails(t *testing.T, planned *graph.Module, old, new *graph.Call, want string) {
	t.Helper()
	devices := map[graph.Expr]VirtualDevice{}
	for e, vd := range PlanOf(planned).devices {
		devices[e] = vd
	}
	if !strings.Contains(want, "no planned device") {
		devices[new] = devices[old]
	}
	main := planned.Main()
	body := graph.Expr(new)
	if main.Body != graph.Expr(old) {
		t.Fatalf("the test expects %s to be main's result", graph.Describe(old))
	}
	mod := planned.ShallowCopy()
	mod.Funcs["main"] = graph.NewFunction(main.Params, body, main.Attrs)
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	mod.Attrs[PlanAttr] = &Plan{devices: devices}
	err := VerifyPlan(mod)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("VerifyPlan = %v, want an error containing %q", err, want)
	}
}
