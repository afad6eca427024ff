package runtime

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// inPlaceGraph is o = relu(c) where c, marked in_place, is a = x + w and
// r = relu(x) laid end to end in storage 2 (float32[16] each: 64 bytes).
// c names add_f32, which checks that its arguments have equal sizes: were
// it called with two [16] inputs and a [32] output, it would fail.
const inPlaceGraph = `{
  "nodes": [
    {"op": "null", "name": "x"},
    {"op": "null", "name": "w"},
    {"op": "kiln_op", "name": "a", "inputs": [[0, 0], [1, 0]], "attrs": {"func_name": "add_f32", "num_inputs": 2, "num_outputs": 1}},
    {"op": "kiln_op", "name": "r", "inputs": [[0, 0]], "attrs": {"func_name": "relu_f32", "num_inputs": 1, "num_outputs": 1}},
    {"op": "kiln_op", "name": "c", "inputs": [[2, 0], [3, 0]], "attrs": {"func_name": "add_f32", "num_inputs": 2, "num_outputs": 1, "in_place": 1}},
    {"op": "kiln_op", "name": "o", "inputs": [[4, 0]], "attrs": {"func_name": "relu_f32", "num_inputs": 1, "num_outputs": 1}}
  ],
  "arg_nodes": [0, 1],
  "heads": [[5, 0]],
  "attrs": {
    "shape": [[16], [16], [16], [16], [32], [32]],
    "dltype": ["float32", "float32", "float32", "float32", "float32", "float32"],
    "storage_id": [0, 1, 2, 2, 2, 3],
    "storage_offset": [0, 0, 0, 64, 0, 0]
  }
}`

func mutateInPlace(t *testing.T, f func(g map[string]any)) []byte {
	t.Helper()
	var g map[string]any
	if err := json.Unmarshal([]byte(inPlaceGraph), &g); err != nil {
		t.Fatal(err)
	}
	f(g)
	data, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestInPlaceNode: an in_place node is not called and its output is its
// inputs' bytes; a node whose layout does not make that true is refused
// when the program is loaded, naming the node and what is wrong.
func TestInPlaceNode(t *testing.T) {
	testenv.Cgo(t)
	mod := testModule(t)
	x, w := make([]float32, 16), make([]float32, 16)
	for i := range x {
		x[i], w[i] = float32(i)-8, 0.5
	}
	e, err := NewGraphExecutor([]byte(inPlaceGraph), mod)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.SetInput("x", tensor.FromFloat32s(ir.Shape{16}, x)); err != nil {
		t.Fatal(err)
	}
	if err := e.SetInput("w", tensor.FromFloat32s(ir.Shape{16}, w)); err != nil {
		t.Fatal(err)
	}
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	got, err := e.GetOutput(0)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 32)
	for i := range x {
		want[i] = max(x[i]+w[i], 0)
		want[16+i] = max(x[i], 0)
	}
	checkF32(t, "output", got, want)

	for _, c := range []struct {
		name string
		edit func(g map[string]any)
		want string
	}{
		{"gap", func(g map[string]any) { gattr(g, "storage_offset")[3] = 128 },
			`node 4 ("c"): in_place input 1 (node 3 ("r") output 0) is not at byte 64 of storage 2`},
		{"other storage", func(g map[string]any) { gattr(g, "storage_id")[3] = 4 },
			`in_place input 1 (node 3 ("r") output 0) is not at byte 64`},
		{"too small", func(g map[string]any) {
			gattr(g, "shape")[4] = []any{48}
			gattr(g, "shape")[5] = []any{48}
		}, `in_place inputs hold 128 bytes, node 4 ("c") output 0 holds 192`},
		{"input", func(g map[string]any) {
			node(g, 4)["inputs"] = []any{[]any{0, 0}, []any{3, 0}}
		}, `in_place input 0 (node 0 ("x") output 0) is not written by a kernel`},
		{"other reader", func(g map[string]any) {
			node(g, 5)["inputs"] = []any{[]any{4, 0}, []any{2, 0}}
			nattrs(g, 5)["num_inputs"] = 2
		}, `in_place input 0 (node 2 ("a") output 0) has other readers`},
		{"output is a head", func(g map[string]any) { g["heads"] = []any{[]any{4, 0}} },
			"the output of an in_place node with several inputs cannot be a graph output"},
		{"bad value", func(g map[string]any) { nattrs(g, 4)["in_place"] = 2 }, "in_place is 2, want 0 or 1"},
		// Without the mark, the same layout is two live entries sharing
		// bytes.
		{"not marked", func(g map[string]any) { delete(nattrs(g, 4), "in_place") }, "which are live at the same time"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewGraphExecutor(mutateInPlace(t, c.edit), mod)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// cutGraph is s0, s1 = the halves of r = x + w (float32[32]), marked
// in_place (add_f32 again: called, it would fail), then o0 = relu(s0) and
// o1 = s1 + s1 as outputs.
const cutGraph = `{
  "nodes": [
    {"op": "null", "name": "x"},
    {"op": "null", "name": "w"},
    {"op": "kiln_op", "name": "r", "inputs": [[0, 0], [1, 0]], "attrs": {"func_name": "add_f32", "num_inputs": 2, "num_outputs": 1}},
    {"op": "kiln_op", "name": "s", "inputs": [[2, 0]], "attrs": {"func_name": "add_f32", "num_inputs": 1, "num_outputs": 2, "in_place": 1}},
    {"op": "kiln_op", "name": "o0", "inputs": [[3, 0]], "attrs": {"func_name": "relu_f32", "num_inputs": 1, "num_outputs": 1}},
    {"op": "kiln_op", "name": "o1", "inputs": [[3, 1], [3, 1]], "attrs": {"func_name": "add_f32", "num_inputs": 2, "num_outputs": 1}}
  ],
  "arg_nodes": [0, 1],
  "heads": [[4, 0], [5, 0]],
  "attrs": {
    "shape": [[32], [32], [32], [16], [16], [16], [16]],
    "dltype": ["float32", "float32", "float32", "float32", "float32", "float32", "float32"],
    "storage_id": [0, 1, 2, 2, 2, 3, 4],
    "storage_offset": [0, 0, 0, 0, 64, 0, 0]
  }
}`

// TestInPlaceCut: a cut in place (one input, its outputs its bytes in
// order) is not called and its outputs read the input; bad layouts are
// refused.
func TestInPlaceCut(t *testing.T) {
	testenv.Cgo(t)
	mod := testModule(t)
	x, w := make([]float32, 32), make([]float32, 32)
	for i := range x {
		x[i], w[i] = float32(i)-16, 0.25
	}
	e, err := NewGraphExecutor([]byte(cutGraph), mod)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.SetInput("x", tensor.FromFloat32s(ir.Shape{32}, x)); err != nil {
		t.Fatal(err)
	}
	if err := e.SetInput("w", tensor.FromFloat32s(ir.Shape{32}, w)); err != nil {
		t.Fatal(err)
	}
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	want0, want1 := make([]float32, 16), make([]float32, 16)
	for i := range want0 {
		want0[i] = max(x[i]+w[i], 0)
		want1[i] = 2 * (x[16+i] + w[16+i])
	}
	for k, want := range [][]float32{want0, want1} {
		got, err := e.GetOutput(k)
		if err != nil {
			t.Fatal(err)
		}
		checkF32(t, "output", got, want)
	}
	edit := func(f func(g map[string]any)) []byte {
		var g map[string]any
		if err := json.Unmarshal([]byte(cutGraph), &g); err != nil {
			t.Fatal(err)
		}
		f(g)
		data, _ := json.Marshal(g)
		return data
	}
	for _, c := range []struct {
		name string
		edit func(g map[string]any)
		want string
	}{
		{"overlap", func(g map[string]any) { gattr(g, "storage_offset")[4] = 0 },
			`in_place output 1 (node 3 ("s") output 1) is not at byte 64 of storage 2`},
		{"output is a head", func(g map[string]any) { g["heads"] = []any{[]any{3, 1}} },
			`in_place output 1 (node 3 ("s") output 1) cannot be a graph output`},
		{"input from a graph input", func(g map[string]any) { node(g, 3)["inputs"] = []any{[]any{0, 0}} },
			`in_place input node 0 ("x") output 0 is not written by a kernel`},
		{"too short", func(g map[string]any) {
			gattr(g, "shape")[4] = []any{8}
			gattr(g, "shape")[6] = []any{8}
		}, `in_place outputs hold 96 bytes, node 2 ("r") output 0 holds 128`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewGraphExecutor(edit(c.edit), mod)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// TestLoadParamsStreaming: LoadParams on a new executor reads the
// weights straight into their buffers and sets them only once the whole
// file was read; on an executor with inputs already set it goes through
// SetParams, so an error changes nothing.
func TestLoadParamsStreaming(t *testing.T) {
	testenv.Cgo(t)
	file := func(params map[string]*tensor.Tensor) *bytes.Reader {
		var buf bytes.Buffer
		if err := SaveParams(&buf, params); err != nil {
			t.Fatal(err)
		}
		return bytes.NewReader(buf.Bytes())
	}
	w := tensor.FromFloat32s(ir.Shape{2, 3}, testW)
	other := tensor.FromFloat32s(ir.Shape{2, 3}, []float32{9, 9, 9, 9, 9, 9})
	x := tensor.FromFloat32s(ir.Shape{2, 3}, testX)
	// "w" comes before "zz" in the file: it is read into its buffer, then
	// the foreign tensor fails the load, and w stays unset.
	e, err := NewGraphExecutor([]byte(testGraph), testModule(t))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.LoadParams(file(map[string]*tensor.Tensor{"w": w, "zz": w})); err == nil || !strings.Contains(err.Error(), `graph has no input "zz"`) {
		t.Fatalf("LoadParams with a foreign tensor: %v", err)
	}
	if _, err := e.Execute(map[string]*tensor.Tensor{"x": x}); err == nil || !strings.Contains(err.Error(), `"w"`) {
		t.Fatalf("run after a failed load: %v, want an error naming the unset input w", err)
	}
	// x is set now: the next loads take the SetParams path.
	if err := e.LoadParams(file(map[string]*tensor.Tensor{"w": w})); err != nil {
		t.Fatal(err)
	}
	if err := e.LoadParams(file(map[string]*tensor.Tensor{"w": other, "zz": w})); err == nil {
		t.Fatal("a foreign tensor was accepted")
	}
	outs, err := e.Execute(map[string]*tensor.Tensor{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range expected(testX, testW) {
		checkF32(t, "output", outs[i], want) // w unchanged by the failed load
	}
	// A short file fails on a new executor too, and sets nothing.
	e2, err := NewGraphExecutor([]byte(testGraph), testModule(t))
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	var buf bytes.Buffer
	SaveParams(&buf, map[string]*tensor.Tensor{"w": w})
	short := buf.Bytes()[:buf.Len()-4]
	if err := e2.LoadParams(bytes.NewReader(short)); err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Fatalf("short file: %v", err)
	}
	if _, err := e2.Execute(map[string]*tensor.Tensor{"x": x}); err == nil {
		t.Fatal("ran with weights from a short file")
	}
}
