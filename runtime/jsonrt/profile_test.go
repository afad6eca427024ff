package jsonrt

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/tensor"
)

// execGraph calls the module's function f on input x, its three outputs
// the program's outputs; the node records the model nodes it computes.
const execGraph = `{
  "nodes": [
    {"op": "null", "name": "x"},
    {"op": "kiln_op", "name": "region", "inputs": [[0, 0]],
     "attrs": {"func_name": "f", "num_inputs": 1, "num_outputs": 3, "sources": ["Neg_1", "Add_2"]}}
  ],
  "arg_nodes": [0],
  "heads": [[1, 0], [1, 1], [1, 2]],
  "attrs": {
    "shape": [[2, 3], [2, 3], [2, 3], [2, 3]],
    "dltype": ["float32", "float32", "float32", "float32"],
    "storage_id": [0, 1, 2, 3]
  }
}`

// TestProfileAndTraceInsideModule: the graph executor's Profile reports
// the JSON module's kernels under the step that called its function, each
// kernel node separately (two "neg" nodes), with their sources; Trace
// gives every kernel of every run, inside its caller's interval; and
// recording stops afterwards.
func TestProfileAndTraceInsideModule(t *testing.T) {
	g := testGraph()
	for i := range g.Nodes {
		if g.Nodes[i].Op == OpKernel {
			g.Nodes[i].Sources = []string{fmt.Sprintf("node_%d", i)}
		}
	}
	m, err := New("kiln_test_json", g, &goKernels{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetConstants(map[string]*tensor.Tensor{"c": tensor.FromFloat32s(ir.Shape{2, 3}, make([]float32, 6))}); err != nil {
		t.Fatal(err)
	}
	e, err := runtime.NewGraphExecutor([]byte(execGraph), m)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.SetInput("x", tensor.FromFloat32s(ir.Shape{2, 3}, []float32{1, 2, 3, 4, 5, 6})); err != nil {
		t.Fatal(err)
	}
	steps, err := e.Profile(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 1 || !reflect.DeepEqual(steps[0].Sources, []string{"Neg_1", "Add_2"}) {
		t.Fatalf("steps %+v, want the region with its sources", steps)
	}
	var names []string
	for _, in := range steps[0].Inner {
		names = append(names, fmt.Sprintf("%s %v", in.Node, in.Sources))
		if in.Total <= 0 || in.Total > steps[0].Total {
			t.Errorf("inner %s: %v, outside (0, %v]", in.Node, in.Total, steps[0].Total)
		}
	}
	want := []string{"neg [node_2]", "add [node_3]", "scale [node_4]", "neg [node_5]"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("inner steps %v, want %v", names, want)
	}
	evs, err := e.Trace(2)
	if err != nil {
		t.Fatal(err)
	}
	var outer []runtime.TraceEvent
	inner := map[int]int{}
	for _, ev := range evs {
		if ev.Depth == 0 {
			outer = append(outer, ev)
			continue
		}
		inner[ev.Run]++
		o := outer[len(outer)-1]
		if ev.Run != o.Run || ev.Start < o.Start || ev.Start+ev.Dur > o.Start+o.Dur {
			t.Errorf("inner %s (run %d, %v+%v) outside its call (run %d, %v+%v)", ev.Name, ev.Run, ev.Start, ev.Dur, o.Run, o.Start, o.Dur)
		}
	}
	if len(outer) != 2 || inner[0] != 4 || inner[1] != 4 {
		t.Errorf("%d calls, inner steps per run %v; want 2 calls of 4", len(outer), inner)
	}
	// Recording is off again: a plain run records nothing.
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	if n := len(m.InnerEvents("f")); n != 0 {
		t.Errorf("%d events recorded after Profile and Trace", n)
	}
}
