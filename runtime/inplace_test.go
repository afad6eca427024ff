package runtime

import (
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
			`node 4 ("c"): in_place input 1 (node 3 ("r") output 0) is not at byte 64 of the output's storage 2`},
		{"other storage", func(g map[string]any) { gattr(g, "storage_id")[3] = 4 },
			`in_place input 1 (node 3 ("r") output 0) is not at byte 64`},
		{"too small", func(g map[string]any) {
			gattr(g, "shape")[4] = []any{48}
			gattr(g, "shape")[5] = []any{48}
		}, "in_place inputs hold 128 bytes, the output 192"},
		{"input", func(g map[string]any) {
			node(g, 4)["inputs"] = []any{[]any{0, 0}, []any{3, 0}}
		}, `in_place input 0 (node 0 ("x") output 0) is not written by a kernel`},
		{"other reader", func(g map[string]any) {
			node(g, 5)["inputs"] = []any{[]any{4, 0}, []any{2, 0}}
			nattrs(g, 5)["num_inputs"] = 2
		}, `in_place input 0 (node 2 ("a") output 0) has other readers`},
		{"output is a head", func(g map[string]any) { g["heads"] = []any{[]any{4, 0}} },
			`an in_place node's output cannot be a graph output`},
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
