package byoc

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

func parseFn(t *testing.T, src string) *graph.Function {
	t.Helper()
	mod, err := graph.Parse(src, graph.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return mod.Main()
}

// The C base writes the entry points around the backend's C, copies an
// output no call computed, keeps constants exact, and refuses what it
// cannot represent with the backend's name and the function's symbol.
func TestCSource(t *testing.T) {
	fn := parseFn(t, `def @main(%x: Tensor[(2), float32]) {
  %0 = negative(%x);
  (%0, %x)
}`)
	neg := func(w *CWriter, c *graph.Call, out string, args []string) error {
		w.Line("for (int i = 0; i < %d; ++i) %s[i] = -%s[i];", Numel(c), out, args[0])
		return nil
	}
	m, err := CSource(fn, "f", "mine", neg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"static int32_t f_body(const float* restrict in0, float* restrict out0, float* restrict out1)", "out0[i] = -in0[i];",
		"memcpy(out1, in0, 2 * sizeof(float));", "int32_t f_unpacked(float* in0, float* out0, float* out1)", "if (num_args != 3)"} {
		if !strings.Contains(m.Code, want) {
			t.Errorf("the C lacks %q:\n%s", want, m.Code)
		}
	}
	if u := m.Unpacked["f"]; u.Symbol != "f_unpacked" || !strings.HasPrefix(u.Decl, "int32_t f_unpacked(") || m.Label != "mine_f" {
		t.Errorf("module %q unpacked %v", m.Label, m.Unpacked)
	}
	for _, c := range []struct{ src, symbol, says string }{
		{`def @main(%x: Tensor[(2), int32]) { negative(%x) }`, "f", "mine: @f: parameter %x is Tensor[(2,), int32], want a float32 tensor"},
		{`def @main(%x: Tensor[(2), float32]) { negative(%x) }`, "f-g", `mine: symbol "f-g" is not a C identifier`},
	} {
		if _, err := CSource(parseFn(t, c.src), c.symbol, "mine", neg); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want an error saying %q", c.src, err, c.says)
		}
	}
}

// The JSON base names inputs, constants and kernels as the backend says
// and refuses a call the backend refuses, naming it.
func TestSerializeJSON(t *testing.T) {
	x := graph.NewVar("x", &ir.TensorType{DType: ir.Float32, Shape: ir.Shape{2}})
	add, err := graph.NewCall(op.Add, []graph.Expr{x, graph.NewConstant(tensor.FromFloat32s(ir.Shape{2}, []float32{1, 2}))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	neg, err := graph.NewCall(op.Negative, []graph.Expr{add}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fn := graph.NewFunction([]*graph.Var{x}, neg, nil)
	if err := graph.InferTypes(graph.NewModule(fn)); err != nil {
		t.Fatal(err)
	}
	names := func(c *graph.Call) (string, ir.Attrs, []graph.Expr, error) {
		return "my." + c.Op.Name, ir.Attrs{"k": int64(1)}, c.Args, nil
	}
	g, consts, err := SerializeJSON(fn, "f", "mine", names)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range g.Nodes {
		got = append(got, n.Op+":"+n.Name)
	}
	if want := "input:x const:f_const_0 kernel:my.add kernel:my.negative"; strings.Join(got, " ") != want || len(consts) != 1 || consts["f_const_0"] == nil || len(g.Heads) != 1 {
		t.Errorf("nodes %v consts %v heads %v, want %s", got, consts, g.Heads, want)
	}
	refuse := func(c *graph.Call) (string, ir.Attrs, []graph.Expr, error) {
		return "", nil, nil, fmt.Errorf("no %s here", c.Op.Name)
	}
	if _, _, err := SerializeJSON(fn, "f", "mine", refuse); err == nil || !strings.Contains(err.Error(), "mine: @f:") || !strings.Contains(err.Error(), "no negative here") {
		t.Errorf("a refused call: %v", err)
	}
}
