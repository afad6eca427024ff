package transform

import (
	"github.com/kiln-dev/kiln/internal/golden"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
)

// fuseCases are hand-written graphs with the fused functions FuseOps must
// produce (name hints in evaluation order). The printed result is compared
// with testdata/fuse_NAME.txt.
var fuseCases = []struct {
	name string
	src  string
	want []string
}{
	{
		name: "conv_bias_relu",
		src: `def @main(%x: Tensor[(1, 3, 6, 6), float32], %w: Tensor[(4, 3, 3, 3), float32]) {
  %0 = nn.conv2d(%x, %w, padding=[1, 1]);
  %1 = add(%0, constant(float32, [4, 1, 1], [0.5, -0.25, 1.0, 0.0]));
  %2 = nn.relu(%1);
  multiply(%2, constant(float32, [], [2.0]))
}`,
		// The bias is an argument; the scalar 2.0 is inlined.
		want: []string{"fused_nn_conv2d_add_nn_relu_multiply"},
	},
	{
		name: "diamond",
		src: `def @main(%x: Tensor[(4, 8), float32], %y: Tensor[(8,), float32]) {
  %0 = add(%x, %y);
  %1 = exp(%0);
  %2 = negative(%0);
  %3 = nn.relu(%2);
  subtract(%1, %3)
}`,
		want: []string{"fused_add_exp_negative_nn_relu_subtract"},
	},
	{
		name: "softmax_diamond",
		src: `def @main(%x: Tensor[(4, 8), float32]) {
  %0 = exp(%x);
  %1 = sum(%0, axis=[1], keepdims=true);
  divide(%0, %1)
}`,
		// exp reaches divide through a reduction: no fusion across it.
		want: []string{"fused_exp", "fused_sum", "fused_divide"},
	},
	{
		name: "reduce_after_injective",
		src: `def @main(%x: Tensor[(2, 3, 4), float32]) {
  %0 = transpose(%x, axes=[0, 2, 1]);
  %1 = reshape(%0, newshape=[8, 3]);
  %2 = abs(%1);
  %3 = sum(%2, axis=[1]);
  sqrt(%3)
}`,
		want: []string{"fused_transpose_reshape_abs_sum", "fused_sqrt"},
	},
	{
		name: "reshape_sum",
		src: `def @main(%x: Tensor[(2, 3, 4), float32]) {
  %0 = transpose(%x, axes=[0, 2, 1]);
  %1 = reshape(%0, newshape=[8, 3]);
  max(%1, axis=[1])
}`,
		// Injective ops fuse into the reduction that consumes them.
		want: []string{"fused_transpose_reshape_max"},
	},
	{
		name: "opaque_in_middle",
		src: `def @main(%x: Tensor[(2, 8), float32]) {
  %0 = exp(%x);
  %1 = cumsum(%0, axis=1);
  %2 = nn.relu(%1);
  negative(%2)
}`,
		want: []string{"fused_exp", "fused_cumsum", "fused_nn_relu_negative"},
	},
	{
		name: "tuple_output",
		src: `def @main(%x: Tensor[(2, 6), float32], %y: Tensor[(2, 6), float32]) {
  %0 = add(%x, %y);
  %1 = split(%0, indices=[2], axis=1);
  %2 = %1.0;
  %3 = %1.1;
  %4 = exp(%2);
  %5 = concatenate(%4, %3, axis=1);
  (%5, nn.relu(%0))
}`,
		// add has two consumers that meet only in the outputs tuple, so it
		// stays alone; split, its projections, exp and concatenate fuse.
		want: []string{"fused_add", "fused_split_exp_concatenate", "fused_nn_relu"},
	},
	{
		name: "opaque_tuple",
		src: `def @main(%x: Tensor[(2, 5), float32]) {
  %0 = nn.relu(%x);
  %1 = topk(%0, k=2, axis=1);
  %2 = %1.0;
  %3 = exp(%2);
  (%3, %1.1)
}`,
		// The projections of topk's tuple stay outside the fused
		// functions, which take and return tensors only.
		want: []string{"fused_nn_relu", "fused_topk", "fused_exp"},
	},
	{
		name: "injective_into_concat",
		src: `def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3, 2), float32]) {
  %0 = exp(%x);
  %1 = transpose(%y, axes=[1, 0]);
  %2 = concatenate(%0, %1, axis=0);
  nn.relu(%2)
}`,
		want: []string{"fused_exp_transpose_concatenate_nn_relu"},
	},
	{
		name: "dense_chain",
		src: `def @main(%x: Tensor[(2, 4), float32], %w1: Tensor[(5, 4), float32], %w2: Tensor[(3, 5), float32]) {
  %0 = nn.dense(%x, %w1);
  %1 = nn.relu(%0);
  %2 = nn.dense(%1, %w2);
  %3 = add(%2, constant(float32, [3], [1.0, 2.0, 3.0]));
  nn.softmax(%3)
}`,
		want: []string{"fused_nn_dense_nn_relu", "fused_nn_dense_add", "fused_nn_softmax"},
	},
}

func TestFuseOpsGolden(t *testing.T) {
	for _, c := range fuseCases {
		t.Run(c.name, func(t *testing.T) {
			m := parse(t, c.src)
			fused, err := FuseOps(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := Verify(fused); err != nil {
				t.Fatalf("%v\n%s", err, text(t, fused))
			}
			if got := primitiveNames(fused); !reflect.DeepEqual(got, c.want) {
				t.Errorf("fused functions %q, want %q\n%s", got, c.want, text(t, fused))
			}
			out := text(t, fused)
			golden.Check(t, "fuse_"+c.name+".txt", out)
			// The printed module parses back (attributes included).
			if back := parse(t, out); text(t, back) != out {
				t.Errorf("printed module does not round-trip")
			}
			for seed := int64(1); seed <= 3; seed++ {
				args := randomArgs(t, m, seed)
				sameBits(t, "fused vs original", run(t, fused, args), run(t, m, args))
			}
			// The input module is unchanged.
			if before := text(t, parse(t, c.src)); text(t, m) != before {
				t.Errorf("FuseOps modified its input")
			}
		})
	}
}

func TestFuseOpsScalarConstantInlined(t *testing.T) {
	m := parse(t, fuseCases[0].src)
	fused, err := FuseOps(m)
	if err != nil {
		t.Fatal(err)
	}
	var fn *graph.Function
	var args []graph.Expr
	graph.PostOrder(fused.Main().Body, func(e graph.Expr) {
		if c, ok := e.(*graph.Call); ok {
			if f, ok := c.Fn.(*graph.Function); ok {
				fn, args = f, c.Args
			}
		}
	})
	if fn == nil {
		t.Fatal("no fused function")
	}
	// x, w and the [4,1,1] bias are arguments; the scalar is not.
	if len(fn.Params) != 3 || len(args) != 3 {
		t.Fatalf("fused function has %d params, call %d args; want 3", len(fn.Params), len(args))
	}
	if _, ok := args[2].(*graph.Constant); !ok {
		t.Errorf("third argument is %s, want the bias constant", graph.Describe(args[2]))
	}
	inner := 0
	graph.PostOrder(fn.Body, func(e graph.Expr) {
		if c, ok := e.(*graph.Constant); ok && c.Value.Len() == 1 && c.Value.Float(0) == 2 {
			inner++
		}
	})
	if inner != 1 {
		t.Errorf("scalar constant inlined %d times, want 1", inner)
	}
	if !fn.BoolAttr(graph.AttrPrimitive) {
		t.Errorf("fused function is not Primitive")
	}
}

func TestFuseOpsDisabled(t *testing.T) {
	m := parse(t, fuseCases[0].src)
	fused, err := FuseOpsWith(m, FuseOptions{Disable: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fused_nn_conv2d", "fused_add", "fused_nn_relu", "fused_multiply"}
	if got := primitiveNames(fused); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	args := randomArgs(t, m, 7)
	sameBits(t, "unfused", run(t, fused, args), run(t, m, args))
}

func TestFuseOpsMaxDepth(t *testing.T) {
	var b strings.Builder
	b.WriteString("def @main(%x: Tensor[(4,), float32]) {\n  %0 = nn.relu(%x);\n")
	for i := 1; i < 10; i++ {
		b.WriteString("  %" + strconv.Itoa(i) + " = negative(%" + strconv.Itoa(i-1) + ");\n")
	}
	b.WriteString("  exp(%9)\n}")
	m := parse(t, b.String())
	cases := []struct {
		depth int
		sizes []int // ops per fused function
	}{
		{0, []int{11}},
		{256, []int{11}},
		{4, []int{4, 4, 3}},
		{1, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
	}
	for _, c := range cases {
		fused, err := FuseOpsWith(m, FuseOptions{MaxDepth: c.depth})
		if err != nil {
			t.Fatal(err)
		}
		var sizes []int
		graph.PostOrder(fused.Main().Body, func(e graph.Expr) {
			if c, ok := e.(*graph.Call); ok && c.Fn != nil {
				sizes = append(sizes, len(graph.Nodes(c.Fn.(*graph.Function).Body))-1) // minus the parameter
			}
		})
		if !reflect.DeepEqual(sizes, c.sizes) {
			t.Errorf("MaxDepth %d: group sizes %v, want %v (%q)", c.depth, sizes, c.sizes, primitiveNames(fused))
		}
		args := randomArgs(t, m, 3)
		sameBits(t, "depth-limited", run(t, fused, args), run(t, m, args))
	}
}

// External and composite functions are left alone; a primitive function
// is not fused again.
func TestFuseOpsLeavesMarkedFunctionsAlone(t *testing.T) {
	src := `def @main(%x: Tensor[(2, 2), float32]) {
  %0 = fn [Composite="dnnl.add_relu"] (%a: Tensor[(2, 2), float32]) {
    %1 = add(%a, %a);
    nn.relu(%1)
  };
  %2 = %0(%x);
  %3 = @ext(%2);
  %4 = exp(%3);
  negative(%4)
}

def @ext [Compiler="ccompiler", global_symbol="ext_0"] (%y: Tensor[(2, 2), float32]) {
  %0 = exp(%y);
  nn.relu(%0)
}`
	m := parse(t, src)
	fused, err := FuseOps(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(fused); err != nil {
		t.Fatal(err)
	}
	if fused.Funcs["ext"] != m.Funcs["ext"] {
		t.Errorf("@ext was rewritten")
	}
	if got, want := primitiveNames(fused), []string{"fused_exp_negative"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q\n%s", got, want, text(t, fused))
	}
	composites := func(m *graph.Module) []*graph.Function {
		var out []*graph.Function
		graph.PostOrder(m.Main().Body, func(e graph.Expr) {
			if c, ok := e.(*graph.Call); ok {
				if f, ok := c.Fn.(*graph.Function); ok && f.StrAttr(graph.AttrComposite) != "" {
					out = append(out, f)
				}
			}
		})
		return out
	}
	before, after := composites(m), composites(fused)
	if len(before) != 1 || len(after) != 1 || before[0] != after[0] {
		t.Errorf("composite function was rebuilt or lost: %d before, %d after", len(before), len(after))
	}
	again, err := FuseOps(fused)
	if err != nil {
		t.Fatal(err)
	}
	if text(t, again) != text(t, fused) {
		t.Errorf("FuseOps is not idempotent:\n%s\nvs\n%s", text(t, again), text(t, fused))
	}
	args := randomArgs(t, m, 5)
	sameBits(t, "with external function", run(t, fused, args), run(t, m, args))
}

// Bodies without operator calls come through unchanged.
func TestFuseOpsTrivialBodies(t *testing.T) {
	for _, src := range []string{
		`def @main(%x: Tensor[(2,), float32]) { %x }`,
		`def @main() { constant(float32, [2], [1.0, 2.0]) }`,
		`def @main(%x: Tensor[(2,), float32]) { (%x, constant(float32, [], [1.0]), %x) }`,
	} {
		m := parse(t, src)
		fused, err := FuseOps(m)
		if err != nil {
			t.Fatal(err)
		}
		if text(t, fused) != text(t, m) {
			t.Errorf("got\n%s\nwant\n%s", text(t, fused), text(t, m))
		}
	}
}
