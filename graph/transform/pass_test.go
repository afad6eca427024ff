package transform

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
)

// The standard pass list satisfies every ordering constraint, and every
// constraint names passes that exist (as the ssa package's test checks).
func TestPassOrder(t *testing.T) {
	passes := Passes(FuseOptions{})
	if err := CheckOrder(passes); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range passes {
		names[p.Name] = true
	}
	for _, c := range passOrder {
		if !names[c.a] || !names[c.b] {
			t.Errorf("constraint %s before %s names an unknown pass", c.a, c.b)
		}
		if c.reason == "" {
			t.Errorf("constraint %s before %s has no reason", c.a, c.b)
		}
	}
	swapped := append([]Pass(nil), passes...)
	swapped[0], swapped[len(swapped)-1] = swapped[len(swapped)-1], swapped[0]
	if err := CheckOrder(swapped); err == nil || !strings.Contains(err.Error(), "must run before") {
		t.Errorf("swapped order accepted: %v", err)
	}
	dup := append(append([]Pass(nil), passes...), passes[0])
	if err := CheckOrder(dup); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("duplicate pass accepted: %v", err)
	}
}

const pipelineSrc = `def @main(%x: Tensor[(1, 3, 4, 4), float32], %w: Tensor[(2, 3, 1, 1), float32]) {
  %0 = nn.conv2d(%x, %w);
  %1 = nn.batch_norm(%0, constant(float32, [2], [1.0, 2.0]), constant(float32, [2], [0.5, -0.5]),
                     negative(constant(float32, [2], [0.1, 0.2])), constant(float32, [2], [1.0, 4.0]));
  %2 = reshape(%1, newshape=[32]);
  %3 = reshape(%2, newshape=[1, 2, 4, 4]);
  nn.relu(%3)
}

def @unused(%y: Tensor[(2,), float32]) {
  exp(%y)
}`

func TestPipeline(t *testing.T) {
	m := parse(t, pipelineSrc)
	var dump strings.Builder
	dir := t.TempDir()
	p := NewPipeline()
	p.Verify, p.Dump, p.DumpDir = true, &dump, dir
	out, err := p.Run(m)
	if err != nil {
		t.Fatal(err)
	}
	// fold_constant makes the batch_norm mean constant, simplify_expr
	// turns batch_norm into multiply+add and removes the reshapes,
	// dead code elimination drops @unused, fusion makes one group.
	if got, want := primitiveNames(out), []string{"fused_nn_conv2d_multiply_add_nn_relu"}; !reflect.DeepEqual(got, want) {
		t.Errorf("fused %q, want %q\n%s", got, want, text(t, out))
	}
	if names := out.Names(); !reflect.DeepEqual(names, []string{"main"}) {
		t.Errorf("functions %v, want only main", names)
	}
	args := randomArgs(t, m, 9)
	relClose(t, "pipeline", run(t, out, args), run(t, m, args), 1e-6)

	var stats []string
	for _, s := range p.Stats {
		stats = append(stats, s.Name)
	}
	if want := []string{"fold_constant", "simplify_expr", "dead_code_elimination", "conv1d_as_conv2d", "conv_transpose_as_conv", "alter_conv_layout", "alter_dense_layout", "alter_recurrent_layout", "qnn_kernel_sums", "alter_qconv_layout", "fuse_ops"}; !reflect.DeepEqual(stats, want) {
		t.Errorf("stats for %v, want %v", stats, want)
	}
	d := dump.String()
	last := -1
	for _, name := range append([]string{"input"}, stats...) {
		i := strings.Index(d, "// after "+name+"\n")
		if i <= last {
			t.Errorf("dump lacks %q in order", name)
		}
		last = i
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.txt"))
	var base []string
	for _, f := range files {
		base = append(base, filepath.Base(f))
	}
	want := []string{"00_input.txt", "01_fold_constant.txt", "02_simplify_expr.txt", "03_dead_code_elimination.txt", "04_conv1d_as_conv2d.txt", "05_conv_transpose_as_conv.txt", "06_alter_conv_layout.txt", "07_alter_dense_layout.txt", "08_alter_recurrent_layout.txt", "09_qnn_kernel_sums.txt", "10_alter_qconv_layout.txt", "11_fuse_ops.txt"}
	if !reflect.DeepEqual(base, want) {
		t.Errorf("dump files %v, want %v", base, want)
	}
	final, err := os.ReadFile(filepath.Join(dir, "11_fuse_ops.txt"))
	if err != nil || string(final) != text(t, out) {
		t.Errorf("11_fuse_ops.txt does not hold the result (%v)", err)
	}
	var v strings.Builder
	if err := p.WriteStats(&v); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(v.String()), "\n"); len(lines) != 12 ||
		!strings.HasPrefix(lines[0], "pass fold_constant") || !strings.HasSuffix(lines[3], "ms") ||
		!strings.HasPrefix(lines[11], "graph passes total") {
		t.Errorf("WriteStats:\n%s", v.String())
	}
}

func TestPipelineDisable(t *testing.T) {
	m := parse(t, pipelineSrc)
	p := NewPipeline()
	p.Disabled = map[string]bool{"simplify_expr": true, "dead_code_elimination": true}
	out, err := p.Run(m)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Stats[1].Skipped || !p.Stats[2].Skipped || p.Stats[0].Skipped || p.Stats[3].Skipped {
		t.Errorf("stats %+v", p.Stats)
	}
	if _, ok := out.Funcs["unused"]; !ok {
		t.Errorf("@unused removed although dead code elimination was disabled")
	}
	// Without simplification batch_norm (out-elementwise-fusable) is a
	// second anchor: it cannot join the convolution's group, and it takes
	// no injective consumers (reshape).
	if got, want := primitiveNames(out), []string{"fused_nn_conv2d", "fused_nn_batch_norm", "fused_reshape_reshape_nn_relu"}; !reflect.DeepEqual(got, want) {
		t.Errorf("fused %q, want %q", got, want)
	}
	for _, c := range []struct {
		disabled map[string]bool
		want     string
	}{
		{map[string]bool{"fuse_ops": true}, "required"},
		{map[string]bool{"no_such_pass": true}, "unknown pass"},
	} {
		p := NewPipeline()
		p.Disabled = c.disabled
		if _, err := p.Run(m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("disabling %v: got %v, want an error containing %q", c.disabled, err, c.want)
		}
	}
}

// A pass that breaks the module is caught by verification (or type
// inference) and named in the error.
func TestPipelineCatchesBrokenPass(t *testing.T) {
	m := parse(t, pipelineSrc)
	freeVar := Pass{Name: "introduce_free_var", Run: func(m *graph.Module) (*graph.Module, error) {
		out := m.ShallowCopy()
		f := m.Main()
		stray := graph.NewVar("stray", f.Body.Type())
		out.Funcs["main"] = withBody(f, f.Params, graph.MustCall(op.Add, []graph.Expr{f.Body, stray}, nil))
		return out, nil
	}}
	illTyped := Pass{Name: "ill_typed", Run: func(m *graph.Module) (*graph.Module, error) {
		out := m.ShallowCopy()
		f := m.Main()
		out.Funcs["main"] = withBody(f, f.Params, graph.MustCall(op.Dense, []graph.Expr{f.Body, f.Body}, nil))
		return out, nil
	}}
	failing := Pass{Name: "failing", Run: func(*graph.Module) (*graph.Module, error) {
		return nil, errors.New("boom")
	}}
	for _, c := range []struct {
		pass Pass
		want string
	}{
		{freeVar, "after pass introduce_free_var: verify: @main: %stray: variable is not a parameter"},
		{illTyped, "after pass ill_typed: type inference"},
		{failing, "pass failing: boom"},
	} {
		p := &Pipeline{Passes: []Pass{c.pass}, Verify: true}
		if _, err := p.Run(m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
}
