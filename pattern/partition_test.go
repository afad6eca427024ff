package pattern

import (
	"fmt"
	"github.com/kiln-dev/kiln/internal/golden"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
)

func printFn(t *testing.T, fn *graph.Function, body graph.Expr) string {
	t.Helper()
	out := graph.NewFunction(fn.Params, body, nil)
	if err := graph.InferFunction(nil, out); err != nil {
		t.Fatalf("partitioned function does not type-check: %v", err)
	}
	var b strings.Builder
	if err := graph.Print(&b, graph.NewModule(out), graph.PrintOptions{}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func calls(e graph.Expr) (fns []*graph.Function) {
	graph.PostOrder(e, func(x graph.Expr) {
		if c, ok := x.(*graph.Call); ok {
			if f, ok := c.Fn.(*graph.Function); ok {
				fns = append(fns, f)
			}
		}
	})
	return fns
}

// TestPartitionAddRelu: the add→relu composite, twice in a chain.
func TestPartitionAddRelu(t *testing.T) {
	fn := parseMain(t, `def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) {
  %0 = add(%x, %y) /* span="Add_0" */;
  %1 = nn.relu(%0) /* span="Relu_1" */;
  %2 = add(%1, %y) /* span="Add_2" */;
  %3 = nn.relu(%2) /* span="Relu_3" */;
  multiply(%3, %x)
}`)
	p := IsOp(op.Relu, IsOp(op.Add, Wildcard(), Wildcard()))
	out, rej, err := Partition(p, fn.Body, PartitionOptions{Attrs: ir.Attrs{graph.AttrComposite: "test.add_relu"}})
	if err != nil || len(rej) != 0 {
		t.Fatalf("Partition: %v, rejected %v", err, rej)
	}
	fns := calls(out)
	if len(fns) != 2 {
		t.Fatalf("%d functions, want 2", len(fns))
	}
	for _, f := range fns {
		if f.StrAttr(graph.AttrComposite) != "test.add_relu" || f.StrAttr(graph.AttrPartitionedFromPattern) != "add_nn.relu_" || len(f.Params) != 2 {
			t.Errorf("function attrs %v, %d params", f.Attrs, len(f.Params))
		}
	}
	golden.Check(t, "add_relu.txt", printFn(t, fn, out))
}

// TestPartitionConvBiasOptionalRelu: one pattern matches both forms, and
// the longer match wins where both apply.
func TestPartitionConvBiasOptionalRelu(t *testing.T) {
	fn := parseMain(t, `def @main(%x: Tensor[(1, 4, 8, 8), float32]) {
  %0 = nn.conv2d(%x, constant(float32, [4, 4, 3, 3], ...), padding=[1, 1, 1, 1]);
  %1 = nn.bias_add(%0, constant(float32, [4], ...));
  %2 = nn.relu(%1);
  %3 = nn.conv2d(%2, constant(float32, [4, 4, 3, 3], ...), padding=[1, 1, 1, 1]);
  nn.bias_add(%3, constant(float32, [4], ...))
}`)
	conv := IsOp(op.Conv2D, Wildcard(), IsConstant())
	bias := IsOp(op.BiasAdd, conv, IsConstant())
	p := Optional(bias, func(p Pattern) Pattern { return IsOp(op.Relu, p) })
	out, _, err := Partition(p, fn.Body, PartitionOptions{Attrs: ir.Attrs{graph.AttrComposite: "test.conv_bias_relu"}})
	if err != nil {
		t.Fatal(err)
	}
	var forms []string
	for _, f := range calls(out) {
		forms = append(forms, f.StrAttr(graph.AttrPartitionedFromPattern))
		// The constants matched by IsConstant stay inside: one parameter.
		if len(f.Params) != 1 {
			t.Errorf("%d parameters, want 1 (constants inside)", len(f.Params))
		}
	}
	if got, want := strings.Join(forms, " "), "nn.conv2d_nn.bias_add_nn.relu_ nn.conv2d_nn.bias_add_"; got != want {
		t.Errorf("matched forms %q, want %q", got, want)
	}
	golden.Check(t, "conv_bias_relu.txt", printFn(t, fn, out))
}

// TestPartitionRejections: an intermediate result used outside the match,
// an input depending on the match (cycle) and the check function refuse
// a match, each with its reason.
func TestPartitionRejections(t *testing.T) {
	p := IsOp(op.Relu, IsOp(op.Add, Wildcard(), Wildcard()))
	cases := []struct {
		name, src string
		check     func(*Result) error
		want      string
	}{
		{"used outside", `%0 = add(%x, %y); %1 = nn.relu(%0); multiply(%1, %0)`, nil, "add inside the match is also used outside it"},
		{"check", `%0 = add(%x, %y); nn.relu(%0)`, func(r *Result) error {
			return fmt.Errorf("shape %v too small", r.Root.Type())
		}, "too small"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fn := parseMain(t, `def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) { `+c.src+` }`)
			out, rej, err := Partition(p, fn.Body, PartitionOptions{Check: c.check})
			if err != nil {
				t.Fatal(err)
			}
			if len(calls(out)) != 0 {
				t.Errorf("a refused match was partitioned: %s", graph.ExprString(out))
			}
			if len(rej) != 1 || !strings.Contains(rej[0].Reason, c.want) {
				t.Errorf("rejections %v, want one with %q", rej, c.want)
			}
		})
	}
	// A would-be cycle: the multiply's second input is computed from the
	// match's own add, so outlining multiply(add(...), ·) would make the
	// call depend on itself; the add's use outside the match refuses it.
	fn := parseMain(t, `def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) {
  %0 = add(%x, %y);
  %1 = tanh(%0);
  %2 = nn.relu(%1);
  multiply(%0, %2)
}`)
	q := IsOp(op.Multiply, IsOp(op.Add, Wildcard(), Wildcard()), Wildcard())
	out, rej, err := Partition(q, fn.Body, PartitionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls(out)) != 0 || len(rej) != 1 || !strings.Contains(rej[0].Reason, "used outside") {
		t.Errorf("cycle: rejections %v, output %s", rej, graph.ExprString(out))
	}
}
