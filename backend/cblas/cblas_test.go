package cblas

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/backend/backendtest"
	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/shared"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/partition"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

// Tolerances against the reference executor: sgemm accumulates in float32
// in its own order, so values near zero need an absolute bound too.
const rtol, atol = 1e-5, 1e-5

func f32(s ...int64) *ir.TensorType { return ir.NewTensorType(ir.Float32, ir.Shape(s)) }

func randTensor(rng *rand.Rand, s ir.Shape) *tensor.Tensor {
	t := tensor.New(ir.Float32, s)
	for i := range t.Float32s() {
		t.Float32s()[i] = float32(rng.Float64()*2 - 1)
	}
	return t
}

func call(o *op.Op, attrs ir.Attrs, args ...graph.Expr) *graph.Call {
	return graph.MustCall(o, args, attrs)
}

// parseTargets parses "cblas, c" in a registry of the test's own.
func parseTargets(t *testing.T) *targets.TargetList {
	t.Helper()
	r := targets.NewRegistry()
	for _, k := range []*targets.Kind{targets.C, Kind} {
		if err := r.Register(k); err != nil {
			t.Fatal(err)
		}
	}
	l, err := r.ParseList("cblas, c -mcpu=x86-64")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// owned returns main(params...) = f(params...) where f, with body
// build(f's params), is a primitive function literal for compiler cblas.
func owned(t *testing.T, types []*ir.TensorType, build func(ps []graph.Expr) graph.Expr) *graph.Module {
	t.Helper()
	var fps, mps []*graph.Var
	var fargs, margs []graph.Expr
	for i, tt := range types {
		fp, mp := graph.NewVar("a"+string(rune('0'+i)), tt), graph.NewVar("x"+string(rune('0'+i)), tt)
		fps, mps = append(fps, fp), append(mps, mp)
		fargs, margs = append(fargs, fp), append(margs, mp)
	}
	f := graph.NewFunction(fps, build(fargs), ir.Attrs{graph.AttrCompiler: Name, graph.AttrPrimitive: true})
	mod := graph.NewModule(graph.NewFunction(mps, graph.NewFuncCall(f, margs), nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	return mod
}

// compileRun compiles mod for "cblas, c" into a fresh directory, loads the
// artifact from it and checks every output against the reference
// executor. It returns the directory and the partition report.
func compileRun(t *testing.T, mod *graph.Module, inputs []*tensor.Tensor) (string, *partition.Report) {
	t.Helper()
	r := backendtest.Registry(t, Register)
	c := backendtest.CompileRun(t, r, "cblas, c -mcpu=x86-64", mod, inputs)
	backendtest.CheckAgainstReference(t, mod, inputs, c.Outputs, rtol, atol)
	return c.Dir, &c.Report
}

// inputsFor makes random inputs for main's parameters.
func inputsFor(rng *rand.Rand, mod *graph.Module) []*tensor.Tensor {
	var ins []*tensor.Tensor
	for _, p := range mod.Main().Params {
		ins = append(ins, randTensor(rng, p.Type().(*ir.TensorType).Shape))
	}
	return ins
}

// librarySource reads the artifact's generated C.
func librarySource(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(dir, "kiln_lib.c"))
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

func TestDense(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(1))
	cases := []struct {
		name     string
		x        *ir.TensorType
		n        int64
		constW   bool
		tail     string // "", "bias", "bias_relu", "bias_add_op"
		sgemmsIn int    // cblas_sgemm calls expected in the C
	}{
		{"one row", f32(1, 8), 5, false, "", 1},
		{"non-square", f32(7, 16), 3, false, "", 1},
		{"constant weight", f32(4, 6), 9, true, "", 1},
		{"bias", f32(3, 10), 4, true, "bias", 1},
		{"bias relu one row", f32(1, 12), 7, true, "bias_relu", 1},
		{"bias relu non-square", f32(9, 5), 2, false, "bias_relu", 1},
		{"bias_add op", f32(6, 4), 3, true, "bias_add_op", 1},
		{"rank-3 input", f32(2, 3, 8), 4, true, "bias_relu", 1},
		{"vector input", f32(8), 3, false, "bias", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := c.x.Shape[len(c.x.Shape)-1]
			types := []*ir.TensorType{c.x}
			if !c.constW {
				types = append(types, f32(c.n, k))
			}
			w := graph.NewConstant(randTensor(rng, ir.Shape{c.n, k}))
			b := graph.NewConstant(randTensor(rng, ir.Shape{c.n}))
			mod := owned(t, types, func(ps []graph.Expr) graph.Expr {
				var wt graph.Expr = w
				if !c.constW {
					wt = ps[1]
				}
				var y graph.Expr = call(op.Dense, nil, ps[0], wt)
				switch c.tail {
				case "bias":
					y = call(op.Add, nil, y, b)
				case "bias_relu":
					y = call(op.Relu, nil, call(op.Add, nil, y, b))
				case "bias_add_op":
					y = call(op.BiasAdd, ir.Attrs{"axis": int64(-1)}, y, b)
				}
				return y
			})
			dir, _ := compileRun(t, mod, inputsFor(rng, mod))
			src := librarySource(t, dir)
			if n := strings.Count(src, "cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans"); n != c.sgemmsIn {
				t.Errorf("%d sgemm calls in the C, want %d", n, c.sgemmsIn)
			}
			if !strings.Contains(src, "#include <cblas.h>") {
				t.Errorf("kiln_lib.c does not include cblas.h")
			}
		})
	}
}

func TestMatMul(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(2))
	cases := []struct {
		name   string
		a, b   *ir.TensorType
		ta, tb bool
		relu   bool
		// loops is whether the sgemm runs in a batch loop (else one call).
		loops bool
	}{
		{"2-D non-square", f32(4, 6), f32(6, 3), false, false, false, false},
		{"2-D one row", f32(1, 7), f32(7, 5), false, false, true, false},
		{"2-D square", f32(8, 8), f32(8, 8), false, false, false, false},
		{"transpose a", f32(6, 4), f32(6, 3), true, false, false, false},
		{"transpose b", f32(4, 6), f32(3, 6), false, true, false, false},
		{"transpose both", f32(6, 4), f32(3, 6), true, true, true, false},
		{"batched", f32(2, 3, 4, 5), f32(2, 3, 5, 6), false, false, false, true},
		{"batched one row", f32(3, 1, 5), f32(3, 5, 2), false, false, true, true},
		{"batch broadcast", f32(2, 1, 4, 5), f32(3, 5, 2), false, false, false, true},
		{"batch times matrix (folded)", f32(2, 3, 4, 5), f32(5, 6), false, false, false, false},
		{"batch transposed a times matrix", f32(2, 5, 4), f32(5, 3), true, false, false, true},
		{"batch times transposed b", f32(3, 4, 5), f32(3, 6, 5), false, true, false, true},
		{"vector times batch", f32(5), f32(2, 5, 3), false, false, false, true},
		{"matrix times vector", f32(3, 5), f32(5), false, false, true, false},
		{"vector times vector", f32(5), f32(5), false, false, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mod := owned(t, []*ir.TensorType{c.a, c.b}, func(ps []graph.Expr) graph.Expr {
				var y graph.Expr = call(op.MatMul, ir.Attrs{"transpose_a": c.ta, "transpose_b": c.tb}, ps[0], ps[1])
				if c.relu {
					y = call(op.Relu, nil, y)
				}
				return y
			})
			dir, _ := compileRun(t, mod, inputsFor(rng, mod))
			src := librarySource(t, dir)
			if n := strings.Count(src, "cblas_sgemm("); n != 1 {
				t.Errorf("%d sgemm calls in the C, want 1", n)
			}
			// A batch loop passes element addresses; one call passes the
			// buffers themselves.
			i := strings.Index(src, "cblas_sgemm(")
			stmt := src[i : i+strings.Index(src[i:], ";")]
			if got := strings.Contains(stmt, "&"); got != c.loops {
				t.Errorf("sgemm in a batch loop = %v, want %v: %s", got, c.loops, stmt)
			}
		})
	}
}

// TestTwoOutputsAndHostOps: a cblas function returning a tuple (two
// products of one input, one with an elementwise tail, and a product fed
// by another), used by host operators.
func TestTwoOutputsAndHostOps(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(3))
	x := graph.NewVar("x", f32(5, 8))
	a := graph.NewVar("a", f32(5, 8))
	wq := graph.NewConstant(randTensor(rng, ir.Shape{6, 8}))
	wk := graph.NewConstant(randTensor(rng, ir.Shape{6, 8}))
	bq := graph.NewConstant(randTensor(rng, ir.Shape{6}))
	q := call(op.Add, nil, call(op.Dense, nil, a, wq), bq)
	k := call(op.Dense, nil, a, wk)
	scores := call(op.MatMul, ir.Attrs{"transpose_b": true}, q, k)
	f := graph.NewFunction([]*graph.Var{a}, graph.NewTuple([]graph.Expr{q, scores, q}), ir.Attrs{graph.AttrCompiler: Name, graph.AttrPrimitive: true})
	res := graph.NewFuncCall(f, []graph.Expr{call(op.Tanh, nil, x)})
	body := graph.NewTuple([]graph.Expr{
		call(op.Sigmoid, nil, graph.NewTupleGetItem(res, 0)),
		call(op.Exp, nil, graph.NewTupleGetItem(res, 1)),
		graph.NewTupleGetItem(res, 2),
	})
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x}, body, nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	dir, _ := compileRun(t, mod, inputsFor(rng, mod))
	if n := strings.Count(librarySource(t, dir), "cblas_sgemm("); n != 3 {
		t.Errorf("%d sgemm calls, want 3", n)
	}
}

// TestModuleLevelFunction: a cblas function that is a module function
// called through a GlobalVar, with a constant weight lifted into a
// graph parameter.
func TestModuleLevelFunction(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(4))
	a := graph.NewVar("a", f32(3, 4))
	w := graph.NewConstant(randTensor(rng, ir.Shape{2, 4}))
	f := graph.NewFunction([]*graph.Var{a}, call(op.Relu, nil, call(op.Dense, nil, a, w)), ir.Attrs{graph.AttrCompiler: Name})
	x := graph.NewVar("x", f32(3, 4))
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x}, call(op.Negative, nil, graph.NewFuncCall(graph.NewGlobalVar("gemm_fn"), []graph.Expr{x})), nil))
	if err := mod.Add("gemm_fn", f); err != nil {
		t.Fatal(err)
	}
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	dir, _ := compileRun(t, mod, inputsFor(rng, mod))
	if !strings.Contains(librarySource(t, dir), "cblas_sgemm(") {
		t.Errorf("no sgemm call in the library")
	}
}

// TestPartitionedModel compiles an unannotated model: partitioning gives
// cblas the products (Supported), the rest stays on the host.
func TestPartitionedModel(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(5))
	x := graph.NewVar("x", f32(4, 10))
	h := call(op.Relu, nil, call(op.Add, nil, call(op.Dense, nil, x, graph.NewConstant(randTensor(rng, ir.Shape{16, 10}))), graph.NewConstant(randTensor(rng, ir.Shape{16}))))
	y := call(op.MatMul, nil, h, graph.NewConstant(randTensor(rng, ir.Shape{16, 3})))
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x}, call(op.Softmax, nil, y), nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	dir, rep := compileRun(t, mod, inputsFor(rng, mod))
	if rep.Counts[Name] != 2 || rep.Regions[Name] != 2 {
		t.Errorf("report counts %v regions %v, want 2 products in 2 regions", rep.Counts, rep.Regions)
	}
	if n := strings.Count(librarySource(t, dir), "cblas_sgemm("); n != 2 {
		t.Errorf("%d sgemm calls, want 2", n)
	}
}

// TestArtifactReloads compiles a model with cblas, then loads the
// artifact directory twice (as a separate process would) and runs it:
// the library links OpenBLAS and the lifted weights come from params.bin.
func TestArtifactReloads(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(6))
	w := graph.NewConstant(randTensor(rng, ir.Shape{5, 7}))
	b := graph.NewConstant(randTensor(rng, ir.Shape{5}))
	mod := owned(t, []*ir.TensorType{f32(2, 7)}, func(ps []graph.Expr) graph.Expr {
		return call(op.Relu, nil, call(op.Add, nil, call(op.Dense, nil, ps[0], w), b))
	})
	in := inputsFor(rng, mod)
	dir, _ := compileRun(t, mod, in)
	want, err := ref.Run(mod, in)
	if err != nil {
		t.Fatal(err)
	}
	for run := 0; run < 2; run++ {
		art, err := driver.LoadArtifact(dir)
		if err != nil {
			t.Fatal(err)
		}
		got, err := art.Run(map[string]*tensor.Tensor{"x0": in[0]})
		if err != nil {
			t.Fatal(err)
		}
		if err := tensor.AllClose(got[0], want.Flatten()[0], rtol, atol); err != nil {
			t.Errorf("load %d: %v", run, err)
		}
	}
	for _, f := range []string{"params.bin", "kiln_lib.so", "graph.json", "metadata.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("artifact lacks %s: %v", f, err)
		}
	}
}

// TestSharedModels compiles the shared models that have matrix products
// with "cblas, c" and compares with the outputs stored beside them
// (PyTorch's): backendtest.CompileModel's check, then again with the
// tighter absolute tolerance (1e-5) kept for cblas.
func TestSharedModels(t *testing.T) {
	testenv.Cgo(t)
	for _, name := range []string{"mlp", "tiny_bert"} {
		t.Run(name, func(t *testing.T) {
			c := backendtest.CompileModel(t, backendtest.Registry(t, Register), "cblas, c -mcpu=x86-64", name)
			if c.Report.Counts[Name] == 0 {
				t.Errorf("no call offloaded to cblas: %v", c.Report.Counts)
			}
			dir, err := shared.Path("models", name)
			if err != nil {
				t.Fatal(err)
			}
			for i := range c.Outputs {
				want, _, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("output_%d.pb", i)))
				if err != nil {
					t.Fatal(err)
				}
				if err := tensor.AllClose(c.Outputs[i], want, 1e-3, 1e-5); err != nil {
					t.Errorf("output %d: %v", i, err)
				}
			}
		})
	}
}

func TestSupported(t *testing.T) {
	v := func(tt *ir.TensorType) *graph.Var { return graph.NewVar("v", tt) }
	f64 := ir.NewTensorType(ir.Float64, ir.Shape{2, 3})
	i32 := ir.NewTensorType(ir.Int32, ir.Shape{3, 2})
	compArgs := []*graph.Var{v(f32(2, 3)), v(f32(4, 3))}
	comp := func(name string, body graph.Expr) *graph.Call {
		fn := graph.NewFunction(compArgs, body, ir.Attrs{graph.AttrComposite: name})
		return graph.NewFuncCall(fn, []graph.Expr{v(f32(2, 3)), v(f32(4, 3))})
	}
	for _, c := range []struct {
		name string
		call *graph.Call
		want string // "" for supported, else part of the reason
	}{
		{"dense", call(op.Dense, nil, v(f32(2, 3)), v(f32(4, 3))), ""},
		{"matmul batched", call(op.MatMul, nil, v(f32(2, 2, 3)), v(f32(3, 4))), ""},
		{"matmul float64", call(op.MatMul, nil, v(f64), v(ir.NewTensorType(ir.Float64, ir.Shape{3, 2}))), "float64 is not supported: cblas_sgemm is single precision"},
		{"matmul int32", call(op.MatMul, nil, v(i32), v(ir.NewTensorType(ir.Int32, ir.Shape{2, 3}))), "int32 is not supported"},
		{"empty", call(op.Dense, nil, v(f32(0, 3)), v(f32(4, 3))), "empty or dynamic"},
		{"conv2d", call(op.Relu, nil, v(f32(2))), "nn.relu is not supported (cblas takes nn.dense and nn.matmul)"},
		{"composite dense relu", comp("cblas.dense_relu", call(op.Relu, nil, call(op.Dense, nil, compArgs[0], compArgs[1]))), ""},
		{"composite of another target", comp("dnnl.dense", call(op.Dense, nil, compArgs[0], compArgs[1])), "not a cblas.* composite"},
		{"composite with tanh", comp("cblas.dense_tanh", call(op.Tanh, nil, call(op.Dense, nil, compArgs[0], compArgs[1]))), "tanh is not supported inside a cblas function"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mod := graph.NewModule(graph.NewFunction(nil, c.call, nil))
			if err := graph.InferTypes(mod); err != nil {
				t.Fatal(err)
			}
			err := Supported(c.call)
			if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
				t.Errorf("Supported = %v, want %q", err, c.want)
			}
		})
	}
}

// TestUnsupportedInOwnedFunction: an owned function with an operator the
// hook cannot lower fails the build with an error naming it.
func TestUnsupportedInOwnedFunction(t *testing.T) {
	mod := owned(t, []*ir.TensorType{f32(2, 3), f32(4, 3)}, func(ps []graph.Expr) graph.Expr {
		return call(op.Tanh, nil, call(op.Dense, nil, ps[0], ps[1]))
	})
	l := parseTargets(t)
	_, err := driver.Compile(mod, nil, driver.Config{Host: l.Host, Targets: l.Targets, Out: filepath.Join(t.TempDir(), "art")})
	if err == nil || !strings.Contains(err.Error(), "tanh is not supported inside a cblas function") || !strings.Contains(err.Error(), "target cblas") {
		t.Errorf("got %v, want an error naming tanh and the target", err)
	}
}

func TestReplaceCallExtern(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
		ok   bool
	}{
		{"cblas_sgemm", []string{"101", "111", "112", "2", "3", "4", "1.0f", "a", "4", "b", "4", "0.0f", "c", "3"}, "cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 2, 3, 4, 1.0f, a, 4, b, 4, 0.0f, c, 3)", true},
		{"cblas_sgemm", []string{"7", "111", "112", "2", "3", "4", "1.0f", "a", "4", "b", "4", "0.0f", "c", "3"}, "", false},
		{"other", []string{"101"}, "", false},
	} {
		got, ok := replaceCallExtern(c.name, c.args)
		if got != c.want || ok != c.ok {
			t.Errorf("replaceCallExtern(%s, %v) = %q, %v", c.name, c.args, got, c.ok)
		}
	}
}
