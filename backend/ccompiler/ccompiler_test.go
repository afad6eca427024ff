package ccompiler

import (
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/backend/backendtest"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/partition"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

func randTensor(rng *rand.Rand, s ir.Shape) *tensor.Tensor {
	t := tensor.New(ir.Float32, s)
	for i := range t.Float32s() {
		t.Float32s()[i] = float32(rng.Float64()*4 - 2)
	}
	return t
}

// compileAndCheck partitions and compiles mod for "ccompiler, c", runs it
// and compares every output with the reference executor; it returns the
// partition report and the artifact directory.
func compileAndCheck(t *testing.T, mod *graph.Module, inputs []*tensor.Tensor) (*partition.Report, string) {
	t.Helper()
	r := backendtest.Registry(t, func(r *targets.Registry) error { return r.Register(Kind) })
	c := backendtest.CompileRun(t, r, "ccompiler, c -mcpu=x86-64", mod, inputs)
	backendtest.CheckAgainstReference(t, mod, inputs, c.Outputs, 1e-5, 1e-6)
	return &c.Report, c.Dir
}

func TestElementwiseChains(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(1))
	cases := []struct {
		name   string
		shapes []ir.Shape // of x, y
	}{
		{"rank1", []ir.Shape{{7}, {7}}},
		{"rank2", []ir.Shape{{3, 5}, {3, 5}}},
		{"rank3 broadcast", []ir.Shape{{2, 3, 4}, {3, 1}}},
		{"rank4 broadcast", []ir.Shape{{2, 1, 3, 4}, {1, 5, 1, 4}}},
		{"scalar", []ir.Shape{{2, 3}, {}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := graph.NewVar("x", ir.NewTensorType(ir.Float32, c.shapes[0]))
			y := graph.NewVar("y", ir.NewTensorType(ir.Float32, c.shapes[1]))
			k := graph.NewConstant(randTensor(rng, c.shapes[1]))
			// ((x + y) * k - x) on ccompiler, then tanh on the host, then
			// multiply by y on ccompiler again.
			s := graph.MustCall(op.Subtract, []graph.Expr{graph.MustCall(op.Multiply, []graph.Expr{graph.MustCall(op.Add, []graph.Expr{x, y}, nil), k}, nil), x}, nil)
			body := graph.MustCall(op.Multiply, []graph.Expr{graph.MustCall(op.Tanh, []graph.Expr{s}, nil), y}, nil)
			mod := graph.NewModule(graph.NewFunction([]*graph.Var{x, y}, body, nil))
			if err := graph.InferTypes(mod); err != nil {
				t.Fatal(err)
			}
			rep, _ := compileAndCheck(t, mod, []*tensor.Tensor{randTensor(rng, c.shapes[0]), randTensor(rng, c.shapes[1])})
			if rep.Counts["ccompiler"] != 4 || rep.Counts[partition.HostTarget] != 1 || rep.Regions["ccompiler"] != 2 {
				t.Errorf("report counts %v regions %v", rep.Counts, rep.Regions)
			}
		})
	}
}

func TestTwoOutputsAndSource(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(2))
	tt := ir.NewTensorType(ir.Float32, ir.Shape{4, 4})
	x := graph.NewVar("x", tt)
	a := graph.MustCall(op.Add, []graph.Expr{x, x}, nil)
	m := graph.MustCall(op.Multiply, []graph.Expr{a, x}, nil)
	body := graph.NewTuple([]graph.Expr{graph.MustCall(op.Tanh, []graph.Expr{a}, nil), graph.MustCall(op.Sigmoid, []graph.Expr{m}, nil)})
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x}, body, nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	_, dir := compileAndCheck(t, mod, []*tensor.Tensor{randTensor(rng, tt.Shape)})
	src, err := os.ReadFile(filepath.Join(dir, "kiln_lib.c"))
	if err != nil {
		t.Fatal(err)
	}
	// The generated source went into the library as its own unit.
	matches, _ := filepath.Glob(filepath.Join(dir, "ext*_ccompiler_*.c"))
	if len(matches) != 1 {
		t.Fatalf("ccompiler sources in the artifact: %v", matches)
	}
	gen, _ := os.ReadFile(matches[0])
	for _, want := range []string{"kiln_test_ccompiler_main_0_body(", "kiln_test_ccompiler_main_0_unpacked(", "int32_t kiln_test_ccompiler_main_0(kiln_tensor* args", "float* restrict out1"} {
		if !strings.Contains(string(gen), want) {
			t.Errorf("generated C lacks %q", want)
		}
	}
	if strings.Contains(string(src), "kiln_test_ccompiler_main_0_body") {
		t.Errorf("the default codegen also compiled the ccompiler function")
	}
}

func TestSupported(t *testing.T) {
	f32 := graph.NewVar("a", ir.NewTensorType(ir.Float32, ir.Shape{2}))
	i32 := graph.NewVar("b", ir.NewTensorType(ir.Int32, ir.Shape{2}))
	for _, c := range []struct {
		call *graph.Call
		want string
	}{
		{graph.MustCall(op.Add, []graph.Expr{f32, f32}, nil), ""},
		{graph.MustCall(op.Relu, []graph.Expr{f32}, nil), "nn.relu is not supported"},
		{graph.MustCall(op.Add, []graph.Expr{i32, i32}, nil), "argument 0 is Tensor[(2,), int32], want float32"},
	} {
		if err := graph.InferTypes(graph.NewModule(graph.NewFunction(nil, c.call, nil))); err != nil && c.want == "" {
			t.Fatal(err)
		}
		err := Supported(c.call)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Supported(%s) = %v, want %q", c.call.Op.Name, err, c.want)
		}
	}
}
