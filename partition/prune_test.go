package partition

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/targets"
)

// TestKeepRegionPrunes: a kind whose KeepRegion refuses regions of a
// single call. The lone composite's region goes back to the host as its
// operators, the lone multiply's too, each with the refusal as its
// reason; the two-call region is outlined.
func TestKeepRegionPrunes(t *testing.T) {
	mod := parse(t, `def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) {
  %0 = add(%x, %y) /* span="Add_0" */;
  %1 = nn.relu(%0) /* span="Relu_1" */;
  %2 = tanh(%1) /* span="Tanh_2" */;
  %3 = multiply(%2, %x) /* span="Mul_3" */;
  %4 = tanh(%3) /* span="Tanh_4" */;
  %5 = add(%4, %y) /* span="Add_5" */;
  %6 = nn.relu(%5) /* span="Relu_6" */;
  multiply(%6, %x) /* span="Mul_7" */
}`)
	tg := compositeTarget(t, nil)
	kind := *tg.Kind
	flow := *backend.Of(&kind)
	kind.Flow = &flow
	var asked []int
	flow.KeepRegion = func(calls []*graph.Call) error {
		asked = append(asked, len(calls))
		if len(calls) < 2 {
			return fmt.Errorf("fewer than 2 calls")
		}
		return nil
	}
	tg, err := targets.New(&kind, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, rep, err := Partition(mod, []*targets.Target{tg}, Options{ModuleName: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if fns := outlined(out); len(fns) != 1 {
		t.Fatalf("%d outlined functions, want 1:\n%s", len(fns), graph.ExprString(out.Main().Body))
	}
	// Outside the region no composite is left: Add_0 and Relu_1 are
	// plain operator calls again.
	graph.PostOrder(out.Main().Body, func(e graph.Expr) {
		if c, ok := e.(*graph.Call); ok {
			if f, ok := c.Fn.(*graph.Function); ok && f.StrAttr(graph.AttrComposite) != "" {
				t.Errorf("composite %s left in main", f.StrAttr(graph.AttrComposite))
			}
		}
	})
	const pruned = "fuse: region of 1 call(s) left to the host: fewer than 2 calls"
	want := map[string]string{
		"Add_0": "host " + pruned + "; fuse: add is not supported", "Relu_1": "host " + pruned + "; fuse: nn.relu is not supported", "Tanh_2": "host fuse: tanh is not supported",
		"Mul_3": "host " + pruned, "Tanh_4": "host fuse: tanh is not supported",
		"Add_5": "fuse ", "Relu_6": "fuse ", "Mul_7": "fuse ",
	}
	for _, n := range rep.Nodes {
		got := n.Target + " " + strings.Join(n.Why, "; ")
		if got != want[n.Node] {
			t.Errorf("%s: %q, want %q", n.Node, got, want[n.Node])
		}
	}
	if len(rep.Nodes) != len(want) || rep.Counts["fuse"] != 3 || rep.Regions["fuse"] != 1 {
		t.Errorf("report: %d nodes, counts %v, regions %v", len(rep.Nodes), rep.Counts, rep.Regions)
	}
	// First round: three regions (1, 1, 2 calls); second round: the kept
	// one alone.
	if fmt.Sprint(asked) != "[1 1 2 2]" {
		t.Errorf("KeepRegion saw regions of %v calls, want [1 1 2 2]", asked)
	}
}
