package partition

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pattern"
	"github.com/kiln-dev/kiln/targets"
)

// compositeTarget is a kind "fuse" whose pattern table merges add→relu
// into "fuse.add_relu" (refused by the check when the add's operands
// differ in shape) and which takes those composites and plain
// multiplies, except composites on int32 (refused by Supports).
func compositeTarget(t *testing.T, pass func(*graph.Function) (*graph.Function, error)) *targets.Target {
	t.Helper()
	add := pattern.IsOp(op.Add, pattern.Wildcard(), pattern.Wildcard())
	k := &targets.Kind{
		Name:       "fuse",
		DeviceType: targets.CPU,
		Keys:       []string{"cpu"},
		Flow: &backend.Flow{Patterns: []pattern.Entry{{
			Name:    "fuse.add_relu",
			Pattern: pattern.IsOp(op.Relu, add),
			Check: func(r *pattern.Result) error {
				c := r.Get(add).(*graph.Call)
				if !ir.TypeEqual(c.Args[0].Type(), c.Args[1].Type()) {
					return fmt.Errorf("broadcasting add")
				}
				return nil
			},
		}}, Supports: func(c *graph.Call) error {
			if c.Op == op.Multiply {
				return nil
			}
			if compositeName(c) == "fuse.add_relu" {
				if c.Type().(*ir.TensorType).DType != ir.Float32 {
					return fmt.Errorf("composite on %s", c.Type().(*ir.TensorType).DType)
				}
				return nil
			}
			return fmt.Errorf("%s is not supported", callName(c))
		}, PartitionPass: pass},
	}
	tg, err := targets.New(k, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func TestMergeCompositeInPartition(t *testing.T) {
	mod := parse(t, `def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32], %b: Tensor[(3,), float32], %i: Tensor[(2, 3), int32]) {
  %0 = add(%x, %y) /* span="Add_0" */;
  %1 = nn.relu(%0) /* span="Relu_1" */;
  %2 = multiply(%1, %x) /* span="Mul_2" */;
  %3 = add(%2, %b) /* span="Add_3" */;
  %4 = nn.relu(%3) /* span="Relu_4" */;
  %5 = add(%i, %i) /* span="Add_5" */;
  %6 = nn.relu(%5) /* span="Relu_6" */;
  (%4, %6)
}`)
	out, rep, err := Partition(mod, []*targets.Target{compositeTarget(t, nil)}, Options{ModuleName: "m"})
	if err != nil {
		t.Fatal(err)
	}
	fns := outlined(out)
	if len(fns) != 1 {
		t.Fatalf("%d outlined functions, want 1:\n%s", len(fns), graph.ExprString(out.Main().Body))
	}
	// Inside the region: a call of the composite and the multiply.
	var comps []string
	graph.PostOrder(fns[0].Body, func(e graph.Expr) {
		if c, ok := e.(*graph.Call); ok {
			if f, ok := c.Fn.(*graph.Function); ok {
				comps = append(comps, f.StrAttr(graph.AttrComposite)+"/"+f.StrAttr(graph.AttrPartitionedFromPattern))
			}
		}
	})
	if got := strings.Join(comps, " "); got != "fuse.add_relu/add_nn.relu_" {
		t.Errorf("composites in the region: %q", got)
	}
	want := map[string]string{
		"Add_0": "fuse fuse.add_relu", "Relu_1": "fuse fuse.add_relu", "Mul_2": "fuse ",
		"Add_3": "host ", "Relu_4": "host ", "Add_5": "host ", "Relu_6": "host ",
	}
	why := map[string]string{}
	for _, n := range rep.Nodes {
		if got := n.Target + " " + n.Composite; got != want[n.Node] {
			t.Errorf("%s: %q, want %q", n.Node, got, want[n.Node])
		}
		why[n.Node] = strings.Join(n.Why, "; ")
	}
	if len(rep.Nodes) != len(want) || rep.Counts["fuse"] != 3 || rep.Counts[HostTarget] != 4 {
		t.Errorf("report: %d nodes, counts %v", len(rep.Nodes), rep.Counts)
	}
	// The broadcasting add was refused by the pattern's check; the int32
	// composite by Supports, after which its operators were inlined back
	// and refused one by one.
	if !strings.Contains(why["Relu_4"], "composite fuse.add_relu refused: broadcasting add") {
		t.Errorf("Relu_4: %q", why["Relu_4"])
	}
	if !strings.Contains(why["Add_5"], "fuse: add is not supported") || !strings.Contains(why["Relu_6"], "nn.relu is not supported") {
		t.Errorf("Add_5: %q, Relu_6: %q", why["Add_5"], why["Relu_6"])
	}
}

func TestPartitionPass(t *testing.T) {
	src := `def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) {
  %0 = multiply(%x, %y);
  %1 = multiply(%0, %0);
  nn.relu(%1)
}`
	ran := 0
	// A pass that marks the function with an attribute: it must see
	// every partition, and what it returns is used.
	mark := func(fn *graph.Function) (*graph.Function, error) {
		ran++
		attrs := fn.Attrs.Clone()
		attrs["optimised"] = true
		return &graph.Function{Params: fn.Params, Body: fn.Body, Attrs: attrs}, nil
	}
	out, _, err := Partition(parse(t, src), []*targets.Target{compositeTarget(t, mark)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fns := outlined(out)
	if ran != 1 || len(fns) != 1 || !fns[0].BoolAttr("optimised") {
		t.Errorf("pass ran %d times, functions %d", ran, len(fns))
	}
	bad := []struct {
		name string
		pass func(*graph.Function) (*graph.Function, error)
		want string
	}{
		{"error", func(*graph.Function) (*graph.Function, error) { return nil, fmt.Errorf("no luck") }, "no luck"},
		{"type change", func(fn *graph.Function) (*graph.Function, error) {
			return &graph.Function{Params: fn.Params[:1], Body: fn.Params[0], Attrs: fn.Attrs}, nil
		}, "changed the function's type"},
		{"attribute dropped", func(fn *graph.Function) (*graph.Function, error) {
			return &graph.Function{Params: fn.Params, Body: fn.Body, Attrs: ir.Attrs{}}, nil
		}, "dropped the Compiler attribute"},
	}
	for _, c := range bad {
		_, _, err := Partition(parse(t, src), []*targets.Target{compositeTarget(t, c.pass)}, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "fuse partition pass") {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}
