package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// testGraph exercises: inputs and a parameter, a two-output op, storage
// shared between entries of different sizes (sid 2: e2, e4, e12; sid 3:
// e3 f32[2,3] and e11 f32[2]), device_copy cpu:0 -> cpu:1 -> ext_dev:0 ->
// cpu:0, a kernel running on ext_dev, a function from an imported library
// (mul_f32) and one from a Go module (negate_f32), and an output on ext_dev.
//
//	e2  = add(x, w)             e3 = relu(e2)
//	e4, e5 = add_sub(e3, x)     e6 = copy(e4) to cpu:1     e7 = relu(e6)
//	e8  = copy(e7) to ext_dev   e9 = add(e8, e8) on ext_dev
//	e10 = copy(e9) to cpu:0     e11 = row_sum(e10)
//	e12 = mul(e5, w)            e13 = negate(e11)
//	outputs: e10, e5, e13, e9, e12
const testGraph = `{
  "nodes": [
    {"op": "null", "name": "x"},
    {"op": "null", "name": "w"},
    {"op": "kiln_op", "name": "add", "inputs": [[0, 0], [1, 0]],
     "attrs": {"func_name": "add_f32", "num_inputs": 2, "num_outputs": 1}},
    {"op": "kiln_op", "name": "relu", "inputs": [[2, 0]],
     "attrs": {"func_name": "relu_f32", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"}},
    {"op": "kiln_op", "name": "addsub", "inputs": [[3, 0], [0, 0, 0]],
     "attrs": {"func_name": "add_sub_f32", "num_inputs": 2, "num_outputs": 2}},
    {"op": "device_copy", "name": "to_cpu1", "inputs": [[4, 0]], "attrs": {"num_inputs": 1, "num_outputs": 1}},
    {"op": "kiln_op", "name": "relu_cpu1", "inputs": [[5, 0]],
     "attrs": {"func_name": "relu_f32", "num_inputs": 1, "num_outputs": 1}},
    {"op": "device_copy", "name": "to_ext", "inputs": [[6, 0]]},
    {"op": "kiln_op", "name": "double_ext", "inputs": [[7, 0], [7, 0]],
     "attrs": {"func_name": "add_f32", "num_inputs": 2, "num_outputs": 1}},
    {"op": "device_copy", "name": "from_ext", "inputs": [[8, 0]], "attrs": {"num_inputs": 1, "num_outputs": 1}},
    {"op": "kiln_op", "name": "rowsum", "inputs": [[9, 0]],
     "attrs": {"func_name": "row_sum_f32", "num_inputs": 1, "num_outputs": 1}},
    {"op": "kiln_op", "name": "mul", "inputs": [[4, 1], [1, 0]],
     "attrs": {"func_name": "mul_f32", "num_inputs": 2, "num_outputs": 1}},
    {"op": "kiln_op", "name": "neg", "inputs": [[10, 0]],
     "attrs": {"func_name": "negate_f32", "num_inputs": 1, "num_outputs": 1}}
  ],
  "arg_nodes": [0, 1],
  "heads": [[9, 0], [4, 1], [12, 0], [8, 0], [11, 0]],
  "node_row_ptr": [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14],
  "attrs": {
    "shape": [[2, 3], [2, 3], [2, 3], [2, 3], [2, 3], [2, 3], [2, 3], [2, 3], [2, 3], [2, 3], [2, 3], [2], [2, 3], [2]],
    "dltype": ["float32", "float32", "float32", "float32", "float32", "float32", "float32",
               "float32", "float32", "float32", "float32", "float32", "float32", "float32"],
    "storage_id": [0, 1, 2, 3, 2, 4, 5, 6, 7, 8, 9, 3, 2, 10],
    "device_index": [[1, 0], [1, 0], [1, 0], [1, 0], [1, 0], [1, 0], [1, 1], [1, 1],
                     [12, 0], [12, 0], [1, 0], [1, 0], [1, 0], [1, 0]]
  }
}`

// testModule is the main library importing the extra library and the Go module.
func testModule(t testing.TB) Module {
	root := loadMain(t)
	root.Import(loadExtra(t))
	root.Import(negateModule())
	return root
}

// expected computes testGraph's outputs in Go.
func expected(x, w []float32) [][]float32 {
	n := len(x)
	dbl, diff, mul := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range x {
		s := max(x[i]+w[i], 0)
		diff[i] = s - x[i]
		dbl[i] = 2 * max(s+x[i], 0)
		mul[i] = diff[i] * w[i]
	}
	neg := []float32{-(dbl[0] + dbl[1] + dbl[2]), -(dbl[3] + dbl[4] + dbl[5])}
	return [][]float32{dbl, diff, neg, dbl, mul}
}

var (
	testX = []float32{1, -2, 3, -4, 5, -6}
	testW = []float32{0.5, 4, -3.5, 1, -0.25, 2}
)

func TestGraphExecutorRun(t *testing.T) {
	testenv.Cgo(t)
	mod := testModule(t)
	e, err := NewGraphExecutor([]byte(testGraph), mod)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if len(e.storage) != 11 {
		t.Errorf("%d storage buffers, want 11 (one per storage_id)", len(e.storage))
	}
	if got := e.storage[3].NumBytes(); got != 24 {
		t.Errorf("storage_id 3 has %d bytes, want 24 (its largest entry)", got)
	}
	if e.NumInputs() != 2 || e.NumOutputs() != 5 {
		t.Errorf("NumInputs %d NumOutputs %d", e.NumInputs(), e.NumOutputs())
	}
	if in, ok := e.InputInfo(1); !ok || in.Name != "w" || in.DType != ir.Float32 || !in.Shape.Equal(ir.Shape{2, 3}) || in.Device != CPUDevice(0) {
		t.Errorf("InputInfo(1) = %+v", in)
	}
	if out, ok := e.OutputInfo(1); !ok || out.Name != "addsub" || out.Index != 1 {
		t.Errorf("OutputInfo(1) = %+v", out)
	}
	if out, ok := e.OutputInfo(3); !ok || out.Device != ExtDevice(0) {
		t.Errorf("OutputInfo(3) = %+v", out)
	}
	if _, ok := e.OutputInfo(5); ok {
		t.Error("OutputInfo(5) exists")
	}
	if err := e.Run(); err == nil || !strings.Contains(err.Error(), `input(s) "x", "w" not set`) {
		t.Errorf("Run without inputs: %v", err)
	}
	w := tensor.FromFloat32s(ir.Shape{2, 3}, testW)
	if err := e.SetParams(map[string]*tensor.Tensor{"w": w}); err != nil {
		t.Fatal(err)
	}
	// Run twice with different inputs: shared storage must not leak state.
	for round, x := range [][]float32{testX, {6, 5, -4, 3, -2, 1}} {
		if err := e.SetInput("x", tensor.FromFloat32s(ir.Shape{2, 3}, x)); err != nil {
			t.Fatal(err)
		}
		if err := e.Run(); err != nil {
			t.Fatal(err)
		}
		for i, want := range expected(x, testW) {
			got, err := e.GetOutput(i)
			if err != nil {
				t.Fatal(err)
			}
			checkF32(t, fmt.Sprintf("round %d output %d", round, i), got, want)
		}
	}
	if _, err := e.GetOutput(5); err == nil || !strings.Contains(err.Error(), "output 5 out of range") {
		t.Errorf("GetOutput(5): %v", err)
	}
	// A cancelled context stops the run before its first step; the
	// executor still runs afterwards.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.RunContext(ctx); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "run: stopped before node 2 (\"add\")") {
		t.Errorf("RunContext(cancelled) = %v", err)
	}
	if _, err := e.ExecuteContext(ctx, map[string]*tensor.Tensor{"x": tensor.FromFloat32s(ir.Shape{2, 3}, testX)}); !errors.Is(err, context.Canceled) {
		t.Errorf("ExecuteContext(cancelled) = %v", err)
	}
	if err := e.RunContext(context.Background()); err != nil {
		t.Errorf("run after a cancelled run: %v", err)
	}
	e.Close()
	if err := e.Run(); err != errClosed {
		t.Errorf("Run after Close: %v", err)
	}
	if _, err := e.GetOutput(0); err != errClosed {
		t.Errorf("GetOutput after Close: %v", err)
	}
}

// TestGraphExecutorStorageOffset: entries live at the same time share a
// storage at disjoint offsets (as memplan's pools do); the storage is as
// large as its furthest entry's end and the results are unchanged.
func TestGraphExecutorStorageOffset(t *testing.T) {
	testenv.Cgo(t)
	g := mutateGraph(t, func(g map[string]any) {
		gattr(g, "storage_id")[3] = 2 // e3 joins e2, e4, e12 in storage 2 ...
		setOffsets(g, 3, 64)          // ... after them
	})
	e, err := NewGraphExecutor(g, testModule(t))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if len(e.storage) != 11 {
		t.Errorf("%d storage buffers, want 11", len(e.storage))
	}
	if got := e.storage[2].NumBytes(); got != 64+24 {
		t.Errorf("storage_id 2 has %d bytes, want 88 (e3's end)", got)
	}
	if err := e.SetParams(map[string]*tensor.Tensor{"w": tensor.FromFloat32s(ir.Shape{2, 3}, testW)}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetInput("x", tensor.FromFloat32s(ir.Shape{2, 3}, testX)); err != nil {
		t.Fatal(err)
	}
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	for i, want := range expected(testX, testW) {
		got, err := e.GetOutput(i)
		if err != nil {
			t.Fatal(err)
		}
		checkF32(t, fmt.Sprintf("output %d", i), got, want)
	}
}

func TestGraphExecutorDevicesAndMemory(t *testing.T) {
	testenv.Cgo(t)
	mod := testModule(t)
	ext := ExtDevMemory()
	b0, n0 := ext.Stats(0)
	e, err := NewGraphExecutor([]byte(testGraph), mod, CPUDevice(0), CPUDevice(1), ExtDevice(0))
	if err != nil {
		t.Fatal(err)
	}
	if b, n := ext.Stats(0); b != b0+2 || n != n0+48 {
		t.Errorf("ext_dev:0 holds %d blocks / %d bytes, want %d / %d", b, n, b0+2, n0+48)
	}
	e.Close()
	if b, n := ext.Stats(0); b != b0 || n != n0 {
		t.Errorf("after Close ext_dev:0 holds %d blocks / %d bytes, want %d / %d", b, n, b0, n0)
	}
	_, err = NewGraphExecutor([]byte(testGraph), mod, CPUDevice(0), CPUDevice(1))
	if err == nil || !strings.Contains(err.Error(), `node 7 ("to_ext") output 0 is on ext_dev:0, which is not among the executor's devices [cpu:0 cpu:1]`) {
		t.Errorf("device restriction: %v", err)
	}
}

// mutateGraph applies f to a decoded copy of testGraph and re-encodes it.
func mutateGraph(t *testing.T, f func(g map[string]any)) []byte {
	t.Helper()
	var g map[string]any
	if err := json.Unmarshal([]byte(testGraph), &g); err != nil {
		t.Fatal(err)
	}
	f(g)
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func node(g map[string]any, i int) map[string]any { return g["nodes"].([]any)[i].(map[string]any) }
func nattrs(g map[string]any, i int) map[string]any {
	return node(g, i)["attrs"].(map[string]any)
}

// setOffsets gives testGraph a storage_offset table, zero except entry e
// at off.
func setOffsets(g map[string]any, e int, off int64) {
	offs := make([]any, 14)
	for i := range offs {
		offs[i] = 0
	}
	offs[e] = off
	g["attrs"].(map[string]any)["storage_offset"] = offs
}

func gattr(g map[string]any, key string) []any {
	return g["attrs"].(map[string]any)[key].([]any)
}

func TestGraphExecutorValidation(t *testing.T) {
	testenv.Cgo(t)
	mod := testModule(t)
	cases := []struct {
		name string
		json func(t *testing.T) []byte
		want string
	}{
		{"syntax", func(*testing.T) []byte { return []byte(`{"nodes": [`) }, "graph JSON: unexpected EOF"},
		{"trailing data", func(*testing.T) []byte { return []byte(testGraph + "{}") }, "trailing data"},
		{"unknown field", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { g["nodez"] = 1 })
		}, `unknown field "nodez"`},
		{"unknown node field", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { node(g, 3)["input"] = 1 })
		}, `graph JSON: node 3: json: unknown field "input"`},
		{"no nodes", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { g["nodes"] = []any{} })
		}, "no nodes"},
		{"unknown op", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { node(g, 2)["op"] = "conv" })
		}, `node 2 ("add"): unknown op "conv"`},
		{"no name", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { node(g, 2)["name"] = "" })
		}, `node 2 (op "kiln_op") has no name`},
		{"forward reference", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { node(g, 2)["inputs"] = []any{[]any{5, 0}, []any{1, 0}} })
		}, `node 2 ("add"): input 0: entry reference [5 0]: node 5 ("to_cpu1") does not come before its user`},
		{"bad reference", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { node(g, 11)["inputs"] = []any{[]any{4, 2}, []any{1, 0}} })
		}, `node 11 ("mul"): input 0: entry reference [4 2]: node 4 ("addsub") has 2 output(s)`},
		{"short reference", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { node(g, 3)["inputs"] = []any{[]any{2}} })
		}, `node 3 ("relu"): input 0: entry reference [2]: want [node, output]`},
		{"num_inputs", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { nattrs(g, 2)["num_inputs"] = 3 })
		}, `node 2 ("add"): num_inputs is 3 but the node lists 2 inputs`},
		{"num_inputs not a number", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { nattrs(g, 2)["num_inputs"] = "two" })
		}, `node 2 ("add"): attribute num_inputs: want an integer, got "two"`},
		{"no func_name", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { delete(nattrs(g, 2), "func_name") })
		}, `node 2 ("add"): kiln_op without attribute func_name`},
		{"null with inputs", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { node(g, 1)["inputs"] = []any{[]any{0, 0}} })
		}, `node 1 ("w"): a null (input) node has 1 inputs`},
		{"device_copy with two inputs", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { node(g, 5)["inputs"] = []any{[]any{4, 0}, []any{4, 1}} })
		}, `node 5 ("to_cpu1"): device_copy has 2 inputs, want 1`},
		{"node_row_ptr", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { nattrs(g, 4)["num_outputs"] = 1 })
		}, `node 4 ("addsub"): node_row_ptr gives entries 4..5, but the node has 1 output(s)`},
		{"node_row_ptr length", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { g["node_row_ptr"] = []any{0, 1} })
		}, "node_row_ptr has 2 elements, want 14"},
		{"shape count", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) {
				a := g["attrs"].(map[string]any)
				a["shape"] = a["shape"].([]any)[:13]
			})
		}, "attrs.shape has 13 elements, want 14 (one per node output)"},
		{"missing storage_id", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { delete(g["attrs"].(map[string]any), "storage_id") })
		}, "attrs.storage_id is missing"},
		{"bad dtype", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { gattr(g, "dltype")[2] = "float33" })
		}, `node 2 ("add") output 0: unknown dtype "float33"`},
		{"negative dim", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { gattr(g, "shape")[3] = []any{-2, 3} })
		}, `node 3 ("relu") output 0: shape [-2, 3] has a negative dimension`},
		{"unknown device type", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { gattr(g, "device_index")[3] = []any{5, 0} })
		}, `node 3 ("relu") output 0: no DeviceAPI registered for device_type(5)`},
		{"arg_nodes missing an input", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { g["arg_nodes"] = []any{0} })
		}, `node 1 ("w") is an input (null) node missing from arg_nodes`},
		{"arg_nodes lists an op", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { g["arg_nodes"] = []any{0, 1, 2} })
		}, `arg_nodes[2]: node 2 ("add") is a kiln_op, not an input (null) node`},
		{"duplicate input names", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { node(g, 1)["name"] = "x" })
		}, `node 0 ("x") and node 1 ("x") are inputs with the same name`},
		{"no heads", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { g["heads"] = []any{} })
		}, "no heads"},
		{"bad head", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { g["heads"] = []any{[]any{12, 1}} })
		}, `head 0: entry reference [12 1]: node 12 ("neg") has 1 output(s)`},
		{"overlapping storage", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { gattr(g, "storage_id")[3] = 2 })
		}, `storage_id 2 is shared by node 2 ("add") output 0 and node 3 ("relu") output 0, which are live at the same time`},
		{"storage shared with an input", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { gattr(g, "storage_id")[11] = 0 })
		}, `storage_id 0 is shared by node 0 ("x") output 0 and node 10 ("rowsum") output 0, which are live at the same time`},
		{"storage shared with an output", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { gattr(g, "storage_id")[11] = 9 })
		}, `storage_id 9 is shared by node 9 ("from_ext") output 0 and node 10 ("rowsum") output 0`},
		{"storage_offset length", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { g["attrs"].(map[string]any)["storage_offset"] = []any{0} })
		}, "attrs.storage_offset has 1 elements, want 14 (one per node output)"},
		{"unaligned offset", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { setOffsets(g, 3, 8) })
		}, `node 3 ("relu") output 0: storage_offset 8, want a multiple of 64`},
		{"negative offset", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { setOffsets(g, 3, -64) })
		}, `storage_offset -64, want a multiple of 64`},
		{"huge offset", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { setOffsets(g, 3, 1<<62) })
		}, `storage_offset 4611686018427387904, want a multiple of 64 in [0, 2^48]`},
		{"bytes overlap at an offset", func(t *testing.T) []byte {
			// e2 at [64, 88) and e3 at [80, 104) of one storage, both live at node 3.
			return mutateGraph(t, func(g map[string]any) {
				gattr(g, "storage_id")[3] = 2
				setOffsets(g, 2, 64)
				gattr(g, "storage_offset")[3] = 64 // e2's bytes
			})
		}, `storage_id 2 is shared by node 2 ("add") output 0 and node 3 ("relu") output 0, which are live at the same time`},
		{"storage across devices", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { gattr(g, "storage_id")[6] = 2 })
		}, `storage_id 2 is shared by node 2 ("add") output 0 on cpu:0 and node 5 ("to_cpu1") output 0 on cpu:1`},
		{"kiln_op across devices", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { gattr(g, "device_index")[7] = []any{1, 0} })
		}, `node 6 ("relu_cpu1") (func "relu_f32"): node 5 ("to_cpu1") output 0 is on cpu:1 but output 0 is on cpu:0; insert a device_copy`},
		{"device_copy changes shape", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { gattr(g, "shape")[6] = []any{3, 2} })
		}, `node 5 ("to_cpu1"): device_copy from float32[2, 3] to float32[3, 2] changes dtype or shape`},
		{"unknown function", func(t *testing.T) []byte {
			return mutateGraph(t, func(g map[string]any) { nattrs(g, 2)["func_name"] = "add_f64" })
		}, `module libkiln_rt_main.so (dso) has no function "add_f64" (node 2 ("add"))`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := NewGraphExecutor(c.json(t), mod)
			if err == nil {
				e.Close()
				t.Fatalf("no error, want %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error:\n  %v\nwant it to contain\n  %s", err, c.want)
			}
		})
	}
	for name, g := range map[string]string{"testGraph": testGraph, "docGraph": docGraph, "failGraph": failGraph} {
		if err := ValidateGraphJSON([]byte(g)); err != nil {
			t.Errorf("ValidateGraphJSON(%s): %v", name, err)
		}
	}
}

// docGraph is the example of the package documentation.
const docGraph = `{
  "nodes": [
    {"op": "null", "name": "x"},
    {"op": "null", "name": "w"},
    {"op": "kiln_op", "name": "fused_conv2d_relu", "inputs": [[0, 0], [1, 0]],
     "attrs": {"func_name": "fused_nn_conv2d_nn_relu", "num_inputs": 2, "num_outputs": 1}},
    {"op": "device_copy", "name": "copy_3", "inputs": [[2, 0]],
     "attrs": {"num_inputs": 1, "num_outputs": 1}}
  ],
  "arg_nodes": [0, 1],
  "heads": [[3, 0]],
  "node_row_ptr": [0, 1, 2, 3, 4],
  "attrs": {
    "shape": [[1, 3, 8, 8], [4, 3, 3, 3], [1, 4, 6, 6], [1, 4, 6, 6]],
    "dltype": ["float32", "float32", "float32", "float32"],
    "storage_id": [0, 1, 2, 3],
    "device_index": [[1, 0], [1, 0], [1, 0], [12, 0]]
  }
}`

func TestGraphExecutorInputErrors(t *testing.T) {
	testenv.Cgo(t)
	e, err := NewGraphExecutor([]byte(testGraph), testModule(t))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cases := []struct {
		name  string
		input string
		t     *tensor.Tensor
		want  string
	}{
		{"shape", "x", tensor.New(ir.Float32, ir.Shape{3, 2}), `input "x": expected float32[2, 3], got float32[3, 2]`},
		{"dtype", "w", tensor.New(ir.Float64, ir.Shape{2, 3}), `input "w": expected float32[2, 3], got float64[2, 3]`},
		{"rank", "x", tensor.New(ir.Float32, ir.Shape{6}), `input "x": expected float32[2, 3], got float32[6]`},
		{"unknown", "y", tensor.New(ir.Float32, ir.Shape{2, 3}), `graph has no input "y" (inputs: x, w)`},
		{"nil", "x", nil, `input "x": nil tensor`},
	}
	for _, c := range cases {
		if err := e.SetInput(c.input, c.t); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// SetParams checks every tensor before copying any.
	good := tensor.FromFloat32s(ir.Shape{2, 3}, testX)
	err = e.SetParams(map[string]*tensor.Tensor{"x": good, "bias": good})
	if err == nil || !strings.Contains(err.Error(), `params: graph has no input "bias"`) {
		t.Errorf("SetParams with an unknown name: %v", err)
	}
	if err := e.Run(); err == nil || !strings.Contains(err.Error(), `"x", "w" not set`) {
		t.Errorf("a failed SetParams set inputs: %v", err)
	}
}

const failGraph = `{
  "nodes": [
    {"op": "null", "name": "a"},
    {"op": "kiln_op", "name": "ok", "inputs": [[0, 0]], "attrs": {"func_name": "relu_f32", "num_inputs": 1, "num_outputs": 1}},
    {"op": "kiln_op", "name": "boom", "inputs": [[1, 0]], "attrs": {"func_name": "FUNC", "num_inputs": 1, "num_outputs": 1}}
  ],
  "arg_nodes": [0],
  "heads": [[2, 0]],
  "attrs": {"shape": [[4], [4], [4]], "dltype": ["float32", "float32", "float32"], "storage_id": [0, 1, 2]}
}`

func TestGraphExecutorKernelErrors(t *testing.T) {
	testenv.Cgo(t)
	mod := testModule(t)
	cases := []struct{ fn, want string }{
		{"always_fail", `run: node 2 ("boom") (func "always_fail"): always_fail (in libkiln_rt_main.so): always_fail: the kernel refused (code 7)`},
		{"fail_silently", `run: node 2 ("boom") (func "fail_silently"): fail_silently (in libkiln_rt_main.so): returned code 3 without an error message`},
		{"add_f32", `run: node 2 ("boom") (func "add_f32"): add_f32 (in libkiln_rt_main.so): add_f32: expected 3 arguments, got 2 (code -1)`},
		{"negate_f32", ""}, // Go module, succeeds
	}
	for _, c := range cases {
		e, err := NewGraphExecutor([]byte(strings.Replace(failGraph, "FUNC", c.fn, 1)), mod)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.SetInput("a", f32(1, -1, 2, -2)); err != nil {
			t.Fatal(err)
		}
		err = e.Run()
		if c.want == "" {
			if err != nil {
				t.Fatalf("%s: %v", c.fn, err)
			}
			out, _ := e.GetOutput(0)
			checkF32(t, c.fn, out, []float32{-1, 0, -2, 0})
		} else if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n  got  %v\n  want %s", c.fn, err, c.want)
		}
		// Run makes the native steps in one C call (callAll); a run that
		// can be cancelled makes them one by one: the same error.
		ctx, cancel := context.WithCancel(context.Background())
		err = e.RunContext(ctx)
		cancel()
		if (err == nil) != (c.want == "") || (err != nil && err.Error() != c.want) {
			t.Errorf("%s, step by step:\n  got  %v\n  want %s", c.fn, err, c.want)
		}
		e.Close()
	}
}

func TestParamsFile(t *testing.T) {
	testenv.Cgo(t)
	params := map[string]*tensor.Tensor{
		"w":      tensor.FromFloat32s(ir.Shape{2, 3}, testW),
		"bias":   tensor.FromInt64s(ir.Shape{3}, []int64{-1, 1 << 40, 7}),
		"scalar": tensor.Scalar(ir.Float16, 1.5),
		"empty":  tensor.New(ir.Uint8, ir.Shape{0, 4}),
		"flag":   tensor.Scalar(ir.Bool, 1),
	}
	var buf bytes.Buffer
	if err := SaveParams(&buf, params); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	if string(raw[:8]) != "KILNPRM1" || raw[8] != 5 {
		t.Errorf("header % x", raw[:16])
	}
	got, err := ReadParams(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(params) {
		t.Fatalf("read %d tensors, want %d", len(got), len(params))
	}
	for n, p := range params {
		if !got[n].Equal(p) {
			t.Errorf("%s: read %v %v, want %v %v", n, got[n].Shape, got[n].Data, p.Shape, p.Data)
		}
	}
	// Writing is deterministic.
	var again bytes.Buffer
	SaveParams(&again, got)
	if !bytes.Equal(again.Bytes(), raw) {
		t.Error("SaveParams output is not deterministic")
	}

	corrupt := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), raw...)) }
	bad := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "header: unexpected EOF"},
		{"magic", corrupt(func(b []byte) []byte { b[0] = 'X'; return b }), "bad magic"},
		{"truncated", raw[:len(raw)-3], "unexpected EOF"},
		{"count too high", corrupt(func(b []byte) []byte { b[8] = 6; return b }), "tensor 5: name: unexpected EOF"},
		// "bias" is first (sorted): name at 16, dtype "int64" at 24, rank at 33.
		{"bad dtype", corrupt(func(b []byte) []byte { copy(b[28:33], "int65"); return b }), `"bias": unknown dtype "int65"`},
		{"huge rank", corrupt(func(b []byte) []byte { b[36] = 1; return b }), `"bias": rank 16777217 exceeds 64`},
		{"size mismatch", corrupt(func(b []byte) []byte { b[45] = 25; return b }), `"bias": 25 bytes of data for int64[3], want 24`},
		{"huge name", corrupt(func(b []byte) []byte { b[19] = 1; return b }), "string length 16777220 exceeds 65536"},
	}
	for _, c := range bad {
		if _, err := ReadParams(bytes.NewReader(c.data)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}

	// LoadParams into an executor.
	e, err := NewGraphExecutor([]byte(testGraph), testModule(t))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.LoadParams(bytes.NewReader(raw)); err == nil || !strings.Contains(err.Error(), `graph has no input "bias"`) {
		t.Errorf("LoadParams with foreign tensors: %v", err)
	}
	buf.Reset()
	SaveParams(&buf, map[string]*tensor.Tensor{"w": params["w"]})
	if err := e.LoadParams(&buf); err != nil {
		t.Fatal(err)
	}
	outs, err := e.Execute(map[string]*tensor.Tensor{"x": tensor.FromFloat32s(ir.Shape{2, 3}, testX)})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range expected(testX, testW) {
		checkF32(t, fmt.Sprintf("output %d", i), outs[i], want)
	}
}

// inputFor returns a distinct input per worker and iteration.
func inputFor(g, i int) []float32 {
	x := make([]float32, 6)
	for k := range x {
		x[k] = float32((g*31+i*7+k*5)%23) - 11
	}
	return x
}

func TestGraphExecutorConcurrency(t *testing.T) {
	testenv.Cgo(t)
	mod := testModule(t)
	const workers, iters = 8, 40
	w := tensor.FromFloat32s(ir.Shape{2, 3}, testW)

	t.Run("one executor, Execute", func(t *testing.T) {
		e, err := NewGraphExecutor([]byte(testGraph), mod)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if err := e.SetParams(map[string]*tensor.Tensor{"w": w}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for g := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range iters {
					x := inputFor(g, i)
					outs, err := e.Execute(map[string]*tensor.Tensor{"x": tensor.FromFloat32s(ir.Shape{2, 3}, x)})
					if err != nil {
						errs <- err
						return
					}
					if err := compareOutputs(outs, expected(x, testW)); err != nil {
						errs <- fmt.Errorf("worker %d iteration %d: %w", g, i, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("one executor, separate calls", func(t *testing.T) {
		// All goroutines bind the same input, so whatever interleaving the
		// mutex allows, every output read is that input's result.
		e, err := NewGraphExecutor([]byte(testGraph), mod)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		e.SetParams(map[string]*tensor.Tensor{"w": w})
		x := tensor.FromFloat32s(ir.Shape{2, 3}, testX)
		want := expected(testX, testW)
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range iters {
					if err := e.SetInput("x", x); err != nil {
						errs <- err
						return
					}
					if err := e.Run(); err != nil {
						errs <- err
						return
					}
					out, err := e.GetOutput(4)
					if err != nil {
						errs <- err
						return
					}
					if err := compareOutputs([]*tensor.Tensor{out}, want[4:]); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("executors sharing a module", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for g := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e, err := NewGraphExecutor([]byte(testGraph), mod)
				if err != nil {
					errs <- err
					return
				}
				defer e.Close()
				if err := e.SetParams(map[string]*tensor.Tensor{"w": w}); err != nil {
					errs <- err
					return
				}
				for i := range iters {
					x := inputFor(g, i)
					if err := e.SetInput("x", tensor.FromFloat32s(ir.Shape{2, 3}, x)); err != nil {
						errs <- err
						return
					}
					if err := e.Run(); err != nil {
						errs <- err
						return
					}
					outs := make([]*tensor.Tensor, e.NumOutputs())
					for k := range outs {
						if outs[k], err = e.GetOutput(k); err != nil {
							errs <- err
							return
						}
					}
					if err := compareOutputs(outs, expected(x, testW)); err != nil {
						errs <- fmt.Errorf("executor %d iteration %d: %w", g, i, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

func compareOutputs(got []*tensor.Tensor, want [][]float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d outputs, want %d", len(got), len(want))
	}
	for i := range want {
		g := got[i].Float32s()
		if len(g) != len(want[i]) {
			return fmt.Errorf("output %d: %v, want %v", i, g, want[i])
		}
		for k := range g {
			if g[k] != want[i][k] {
				return fmt.Errorf("output %d: %v, want %v", i, g, want[i])
			}
		}
	}
	return nil
}

// TestGraphExecutorProfile: Profile runs the program, times every step
// (kernel calls and device copies) in program order, and leaves the same
// outputs as Run.
func TestGraphExecutorProfile(t *testing.T) {
	testenv.Cgo(t)
	e, err := NewGraphExecutor([]byte(testGraph), testModule(t))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Profile(1); err == nil {
		t.Error("Profile without inputs succeeded")
	}
	if err := e.SetParams(map[string]*tensor.Tensor{"w": tensor.FromFloat32s(ir.Shape{2, 3}, testW)}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetInput("x", tensor.FromFloat32s(ir.Shape{2, 3}, testX)); err != nil {
		t.Fatal(err)
	}
	steps, err := e.Profile(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != len(e.steps) {
		t.Fatalf("%d step times for %d steps", len(steps), len(e.steps))
	}
	kernels := 0
	for i, s := range steps {
		// The median of three runs is one of them: above zero and at
		// most their sum.
		if s.Total <= 0 || s.Median <= 0 || s.Median > s.Total || s.Node != e.g.nodes[e.steps[i].node].name {
			t.Errorf("step %d: %+v", i, s)
		}
		if s.Func != "" {
			kernels++
		}
	}
	if kernels == 0 {
		t.Error("no kernel steps named their function")
	}
	for i, want := range expected(testX, testW) {
		got, err := e.GetOutput(i)
		if err != nil {
			t.Fatal(err)
		}
		checkF32(t, fmt.Sprintf("output %d after Profile", i), got, want)
	}
}

// TestMedianDuration: the middle value (odd counts), the mean of the
// middle two (even), 0 for none, whatever the order.
func TestMedianDuration(t *testing.T) {
	for _, c := range []struct {
		ds   []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{[]time.Duration{7}, 7},
		{[]time.Duration{9, 1, 5}, 5},
		{[]time.Duration{100, 2, 4, 1}, 3},
		{[]time.Duration{3, 3, 1000, 3, 2}, 3},
	} {
		if got := medianDuration(append([]time.Duration(nil), c.ds...)); got != c.want {
			t.Errorf("medianDuration(%v) = %v, want %v", c.ds, got, c.want)
		}
	}
}
