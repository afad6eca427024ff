package jsonrt

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/tensor"
)

// goKernels is a tiny Go kernel set: "add" (two inputs), "scale" (attr
// factor) and "neg". "neg" declares its output in a private layout
// ("negated": the value is stored negated, so that a consumer which did
// not see the layout would compute wrong numbers); "add" and "scale" undo
// it on the inputs that carry it.
type goKernels struct {
	prepared int
	layouts  []Layout // input layouts seen by Prepare, in order
}

type negated struct{}

func (s *goKernels) Check(g *Graph, id int) error {
	n := &g.Nodes[id]
	want := map[string]int{"add": 2, "scale": 1, "neg": 1}
	arity, ok := want[n.Name]
	if !ok {
		return fmt.Errorf("unknown operator %s", n.Name)
	}
	if len(n.Inputs) != arity {
		return fmt.Errorf("%s takes %d inputs, got %d", n.Name, arity, len(n.Inputs))
	}
	if n.Name == "scale" {
		if _, ok := n.AttrMap()["factor"].(float64); !ok {
			return fmt.Errorf("scale needs a float attribute factor")
		}
	}
	return nil
}

type goKernel struct {
	fn    func(in [][]float32, out []float32)
	signs []float32 // per input: -1 when stored negated
}

func (k *goKernel) Run(args []*runtime.NDArray) error {
	var in [][]float32
	for i, sign := range k.signs {
		t, err := args[i].ToTensor()
		if err != nil {
			return err
		}
		v := t.Float32s()
		for j := range v {
			v[j] *= sign
		}
		in = append(in, v)
	}
	out := tensor.New(ir.Float32, args[len(k.signs)].Shape())
	k.fn(in, out.Float32s())
	return args[len(k.signs)].CopyFrom(out)
}

func (s *goKernels) Prepare(ctx *PrepareContext) (Kernel, error) {
	s.prepared++
	k := &goKernel{}
	for i := range ctx.Node.Inputs {
		l := ctx.InputLayout(i)
		s.layouts = append(s.layouts, l)
		sign := float32(1)
		if _, ok := l.(negated); ok {
			sign = -1
		}
		k.signs = append(k.signs, sign)
	}
	switch ctx.Node.Name {
	case "add":
		k.fn = func(in [][]float32, out []float32) {
			for i := range out {
				out[i] = in[0][i] + in[1][i]
			}
		}
	case "scale":
		f := float32(ctx.Attrs().Float("factor"))
		k.fn = func(in [][]float32, out []float32) {
			for i := range out {
				out[i] = in[0][i] * f
			}
		}
	case "neg":
		// -x stored negated is x itself, unless it must be plain.
		plain := ctx.MustBePlain(0)
		if !plain {
			_, shape := ctx.OutputType(0)
			ctx.SetOutputLayout(0, negated{}, shape.NumElements()*4)
		}
		k.fn = func(in [][]float32, out []float32) {
			for i := range out {
				if plain {
					out[i] = -in[0][i]
				} else {
					out[i] = in[0][i]
				}
			}
		}
	}
	return k, nil
}

func f32(name string, shape ...int64) Node {
	return Node{Op: OpInput, Name: name, Shape: [][]int64{shape}, DType: []string{"float32"}}
}

// kernelNode is a float32 [2, 3] kernel node of operator name on the
// first outputs of nodes in.
func kernelNode(name string, attrs ir.Attrs, in ...int) Node {
	n := Node{Op: OpKernel, Name: name, Shape: [][]int64{{2, 3}}, DType: []string{"float32"}}
	for _, i := range in {
		n.Inputs = append(n.Inputs, Entry{Node: i})
	}
	n.SetAttrs(attrs)
	return n
}

// testGraph computes out0 = scale(neg(x) + c, 0.5), out1 = neg(x), out2 = x.
func testGraph() *Graph {
	k := kernelNode
	c := f32("c", 2, 3)
	c.Op = OpConst
	return &Graph{Symbol: "f", Nodes: []Node{
		f32("x", 2, 3),
		c,
		k("neg", nil, 0),
		k("add", nil, 2, 1),
		k("scale", ir.Attrs{"factor": 0.5}, 3),
		k("neg", nil, 0),
	}, Heads: []Entry{{Node: 4}, {Node: 5}, {Node: 0}}}
}

func run(t *testing.T, m *Module, x *tensor.Tensor) [][]float32 {
	t.Helper()
	f, ok := m.GetFunction("f")
	if !ok {
		t.Fatal("symbol f not found")
	}
	dev := runtime.CPUDevice(0)
	xa, err := runtime.FromTensor(x, dev)
	if err != nil {
		t.Fatal(err)
	}
	args := []*runtime.NDArray{xa}
	for range 3 {
		o, err := runtime.Empty(ir.Float32, ir.Shape{2, 3}, dev)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, o)
	}
	if err := f(args); err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for _, a := range args[1:] {
		v, err := a.ToTensor()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v.Float32s())
	}
	return out
}

// constModule makes testGraph's module over set with its constant c
// bound to 10, 20, ... 60.
func constModule(t *testing.T, set KernelSet) *Module {
	t.Helper()
	m, err := New("kiln_test_json", testGraph(), set)
	if err != nil {
		t.Fatal(err)
	}
	c := tensor.FromFloat32s(ir.Shape{2, 3}, []float32{10, 20, 30, 40, 50, 60})
	if err := m.SetConstants(map[string]*tensor.Tensor{"c": c}); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRunRoundTripAndConstants(t *testing.T) {
	set := &goKernels{}
	m, err := New("kiln_test_json", testGraph(), set)
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.FromFloat32s(ir.Shape{2, 3}, []float32{1, -2, 3, -4, 5, -6})
	c := tensor.FromFloat32s(ir.Shape{2, 3}, []float32{10, 20, 30, 40, 50, 60})
	if err := m.SetConstants(map[string]*tensor.Tensor{"c": c, "unused": x}); err != nil {
		t.Fatal(err)
	}
	want := [][]float32{
		{4.5, 11, 13.5, 22, 22.5, 33},
		{-1, 2, -3, 4, -5, 6},
		{1, -2, 3, -4, 5, -6},
	}
	got := run(t, m, x)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// The add saw neg's private layout on its first input only; the
	// second neg is a graph output, so it had to be plain.
	wantLayouts := []Layout{nil, negated{}, nil, nil, nil}
	if !reflect.DeepEqual(set.layouts, wantLayouts) {
		t.Errorf("input layouts %v, want %v", set.layouts, wantLayouts)
	}

	// Round trip: the saved JSON parses to the same graph and runs the
	// same after constants are set again.
	data, err := m.SaveBinary()
	if err != nil {
		t.Fatal(err)
	}
	g2, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g2, testGraph()) {
		t.Errorf("round trip changed the graph:\n%s", data)
	}
	m2, err := Load("kiln_test_json", data, &goKernels{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.SetConstants(map[string]*tensor.Tensor{"c": c}); err != nil {
		t.Fatal(err)
	}
	if got := run(t, m2, x); !reflect.DeepEqual(got, want) {
		t.Fatalf("reloaded module: got %v, want %v", got, want)
	}
	// A second call reuses the prepared kernels.
	if got := run(t, m2, x); !reflect.DeepEqual(got, want) || m2.set.(*goKernels).prepared != 4 {
		t.Fatalf("second call: got %v, prepared %d times", got, m2.set.(*goKernels).prepared)
	}
}

func TestAttrKinds(t *testing.T) {
	attrs := ir.Attrs{"i": int64(-3), "f": 0.25, "s": "NCHW", "b": true, "is": []int64{}, "fs": []float64{1.5}, "ss": []string{"a"}, "d": ir.Float16}
	n := Node{}
	n.SetAttrs(attrs)
	data, err := json.Marshal(n.Attrs)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]Attr
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	n.Attrs = back
	if got := n.AttrMap(); !reflect.DeepEqual(got, attrs) {
		t.Errorf("attrs %v after the round trip %s, want %v", got, data, attrs)
	}
}

func TestValidationErrors(t *testing.T) {
	good, err := json.Marshal(testGraph())
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(g *Graph)) string {
		g := testGraph()
		f(g)
		data, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	cases := []struct {
		name, json, want string
	}{
		{"unknown field", strings.Replace(string(good), `"heads"`, `"haeds":[],"heads"`, 1), `unknown field "haeds"`},
		{"no symbol", edit(func(g *Graph) { g.Symbol = "" }), "graph has no symbol"},
		{"forward reference", edit(func(g *Graph) { g.Nodes[3].Inputs[0].Node = 4 }), `node 3 (kernel "add"): input 0 refers to node 4, which is not an earlier node`},
		{"bad output index", edit(func(g *Graph) { g.Nodes[3].Inputs[1].Index = 1 }), "refers to output 1 of node 1, which has 1 outputs"},
		{"unknown op", edit(func(g *Graph) { g.Nodes[2].Op = "kernal" }), "unknown node op"},
		{"duplicate name", edit(func(g *Graph) { g.Nodes[1].Name = "x" }), `node 1 (const "x"): name repeats node 0`},
		{"dtype count", edit(func(g *Graph) { g.Nodes[2].DType = nil }), "0 dtypes for 1 shapes"},
		{"bad dtype", edit(func(g *Graph) { g.Nodes[0].DType = []string{"float31"} }), `bad dtype "float31"`},
		{"input with inputs", edit(func(g *Graph) { g.Nodes[1].Inputs = []Entry{{Node: 0}} }), "takes no inputs"},
		{"bad head", edit(func(g *Graph) { g.Heads[1].Node = 9 }), "head 1 [9, 0] names no node output"},
		{"no heads", edit(func(g *Graph) { g.Heads = nil }), "graph has no heads"},
		{"bad attr kind", strings.Replace(string(good), `{"float":0.5}`, `{"double":0.5}`, 1), `unknown kind "double"`},
		{"ill-typed attr", strings.Replace(string(good), `{"float":0.5}`, `{"float":"half"}`, 1), `{"float":"half"}`},
		{"short entry", strings.Replace(string(good), `"inputs":[[2,0,0],[1,0,0]]`, `"inputs":[[2],[1,0,0]]`, 1), "want [node, index, version]"},
		{"kernel set rejects", edit(func(g *Graph) { g.Nodes[4].Name = "conv" }), "node 4 (conv): unknown operator conv"},
		{"kernel set arity", edit(func(g *Graph) { g.Nodes[3].Inputs = g.Nodes[3].Inputs[:1] }), "add takes 2 inputs, got 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load("kiln_test_json", []byte(c.json), &goKernels{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestConstantAndCallErrors(t *testing.T) {
	m, err := New("kiln_test_json", testGraph(), &goKernels{})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := m.GetFunction("f")
	dev := runtime.CPUDevice(0)
	mk := func(s ...int64) *runtime.NDArray {
		a, err := runtime.Empty(ir.Float32, s, dev)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// Running before the constants are set.
	if err := f([]*runtime.NDArray{mk(2, 3), mk(2, 3), mk(2, 3), mk(2, 3)}); err == nil || !strings.Contains(err.Error(), "constants were not set") {
		t.Errorf("got %v", err)
	}
	for _, c := range []struct {
		consts map[string]*tensor.Tensor
		want   string
	}{
		{map[string]*tensor.Tensor{}, `constant "c" is missing`},
		{map[string]*tensor.Tensor{"c": tensor.New(ir.Float32, ir.Shape{3, 2})}, `constant "c" is float32[3, 2], want float32[2, 3]`},
		{map[string]*tensor.Tensor{"c": tensor.New(ir.Int32, ir.Shape{2, 3})}, `constant "c" is int32`},
	} {
		if err := m.SetConstants(c.consts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SetConstants: got %v, want %q", err, c.want)
		}
	}
	if err := m.SetConstants(map[string]*tensor.Tensor{"c": tensor.New(ir.Float32, ir.Shape{2, 3})}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []*runtime.NDArray
		want string
	}{
		{[]*runtime.NDArray{mk(2, 3)}, "got 1 arguments, want 1 inputs and 3 outputs"},
		{[]*runtime.NDArray{mk(3, 2), mk(2, 3), mk(2, 3), mk(2, 3)}, "input 0 (x) is float32[3, 2], want float32[2, 3]"},
		{[]*runtime.NDArray{mk(2, 3), mk(2, 3), mk(6), mk(2, 3)}, "output 1 is float32[6]"},
	} {
		if err := f(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("call: got %v, want %q", err, c.want)
		}
	}
	if _, ok := m.GetFunction("g"); ok {
		t.Errorf("found a function the module does not export")
	}
}

// threadKernels is goKernels with a thread count, as oneDNN's kernel set:
// a changed count makes the module build its kernels again.
type threadKernels struct {
	goKernels
	n int
}

func (s *threadKernels) SetNumThreads(n int) bool {
	changed := n != s.n
	s.n = n
	return changed
}

func TestSetNumThreadsRebuildsKernels(t *testing.T) {
	set := &threadKernels{}
	m := constModule(t, set)
	x := tensor.FromFloat32s(ir.Shape{2, 3}, []float32{1, -2, 3, -4, 5, -6})
	want := run(t, m, x)
	steps := []struct {
		n        int
		prepared int // kernel builds so far (4 kernel nodes per build)
	}{{0, 4}, {1, 8}, {1, 8}, {2, 12}}
	for _, s := range steps {
		if !m.SetNumThreads(s.n) {
			t.Fatalf("SetNumThreads(%d) = false for a thread-pool kernel set", s.n)
		}
		if got := run(t, m, x); !reflect.DeepEqual(got, want) {
			t.Errorf("%d threads: got %v, want %v", s.n, got, want)
		}
		if set.prepared != s.prepared {
			t.Errorf("after SetNumThreads(%d): %d kernel builds, want %d", s.n, set.prepared, s.prepared)
		}
	}
	// A kernel set without a thread pool does not take a count.
	plain, err := New("kiln_test_json", testGraph(), &goKernels{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.SetNumThreads(2) {
		t.Errorf("SetNumThreads on a kernel set without threads = true")
	}
}

// TestIntermediatesShareMemory runs a chain whose intermediates die one
// after another: they share buffers (fewer buffers than intermediates),
// no kernel writes over one of its own inputs, and the result is the
// chain's.
func TestIntermediatesShareMemory(t *testing.T) {
	k := kernelNode
	g := &Graph{Symbol: "f", Nodes: []Node{
		f32("x", 2, 3),
		k("scale", ir.Attrs{"factor": 2.0}, 0),  // 1: 2x
		k("scale", ir.Attrs{"factor": 3.0}, 1),  // 2: 6x
		k("add", nil, 2, 1),                     // 3: 8x
		k("scale", ir.Attrs{"factor": 0.5}, 3),  // 4: 4x
		k("add", nil, 4, 3),                     // 5: 12x
		k("scale", ir.Attrs{"factor": 0.25}, 5), // 6: 3x
		k("add", nil, 6, 6),                     // 7: 6x
		k("neg", nil, 7),                        // 8: -6x
		k("neg", nil, 0),                        // 9: -x, unused
		k("add", nil, 8, 0),                     // 10: -5x
	}, Heads: []Entry{{Node: 10}, {Node: 10}, {Node: 0}}}
	m, err := New("kiln_test_json", g, &goKernels{})
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.New(ir.Float32, ir.Shape{2, 3})
	for i, v := range x.Float32s() {
		x.Float32s()[i] = v + float32(i) - 2.5
	}
	out := run(t, m, x)
	for i, v := range x.Float32s() {
		if out[0][i] != -5*v || out[1][i] != -5*v || out[2][i] != v {
			t.Fatalf("element %d: got %v, %v, %v, want %v, %v, %v", i, out[0][i], out[1][i], out[2][i], -5*v, -5*v, v)
		}
	}
	ptr := func(ent int) unsafe.Pointer {
		p, err := m.bufs[ent].DataPtr()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	distinct := map[unsafe.Pointer]bool{}
	inter := 0
	for id := 1; id < 10; id++ {
		ent := m.entryOf[id][0]
		distinct[ptr(ent)] = true
		inter++
		for _, e := range g.Nodes[id].Inputs {
			if e.Node != 0 && ptr(m.entryOf[e.Node][0]) == ptr(ent) {
				t.Errorf("node %d writes over its input from node %d", id, e.Node)
			}
		}
	}
	if len(distinct) >= inter {
		t.Errorf("%d intermediates in %d buffers, want fewer buffers", inter, len(distinct))
	}
}

// releasingKernels is goKernels whose kernels count their releases, can
// make instances of itself (SetInstancer) and count Close.
type releasingKernels struct {
	goKernels
	live      *int // kernels prepared and not released, over all instances
	instances int
	closed    bool
	failAt    string // Prepare fails on this node
}

type releasingKernel struct {
	Kernel
	live     *int
	released bool
}

func (k *releasingKernel) Release() {
	if !k.released {
		k.released = true
		*k.live--
	}
}

func (s *releasingKernels) Prepare(ctx *PrepareContext) (Kernel, error) {
	if ctx.Node.Name == s.failAt {
		return nil, fmt.Errorf("no kernel for %s", s.failAt)
	}
	k, err := s.goKernels.Prepare(ctx)
	if err != nil {
		return nil, err
	}
	*s.live++
	return &releasingKernel{Kernel: k, live: s.live}, nil
}

func (s *releasingKernels) NewInstance() (KernelSet, error) {
	s.instances++
	return &releasingKernels{live: s.live}, nil
}

func (s *releasingKernels) Close() { s.closed = true }

// TestInstancesAndRelease: an instance computes what its module does with
// kernels of its own; rebuilding kernels releases the old ones, a failed
// build releases those it made, and Close releases all and closes the
// set; a closed module refuses calls.
func TestInstancesAndRelease(t *testing.T) {
	live := 0
	set := &releasingKernels{live: &live}
	m := constModule(t, set)
	x := tensor.FromFloat32s(ir.Shape{2, 3}, []float32{1, -2, 3, -4, 5, -6})
	c := tensor.FromFloat32s(ir.Shape{2, 3}, []float32{10, 20, 30, 40, 50, 60})
	want := run(t, m, x)
	if live != 4 {
		t.Fatalf("%d kernels live after one build, want 4", live)
	}
	if err := m.SetConstants(map[string]*tensor.Tensor{"c": c}); err != nil {
		t.Fatal(err)
	}
	if live != 4 {
		t.Errorf("%d kernels live after a rebuild, want 4 (the old ones released)", live)
	}
	im, err := m.NewInstance()
	if err != nil {
		t.Fatal(err)
	}
	inst := im.(*Module)
	if inst == m || set.instances != 1 {
		t.Fatalf("NewInstance gave the module itself (%d instances)", set.instances)
	}
	if got := run(t, inst, x); !reflect.DeepEqual(got, want) {
		t.Errorf("the instance computes %v, want %v", got, want)
	}
	if live != 8 {
		t.Errorf("%d kernels live with an instance, want 8", live)
	}
	inst.Close()
	if live != 4 || !inst.set.(*releasingKernels).closed {
		t.Errorf("after the instance's Close: %d kernels live (want 4), set closed %v", live, inst.set.(*releasingKernels).closed)
	}
	f, _ := inst.GetFunction("f")
	var args []*runtime.NDArray
	for range 4 {
		a, err := runtime.FromTensor(x, runtime.CPUDevice(0))
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, a)
	}
	if err := f(args); err == nil || !strings.Contains(err.Error(), "the module is closed") {
		t.Errorf("a call of a closed module: %v", err)
	}
	// A build that fails half-way releases what it built.
	mb := constModule(t, &releasingKernels{live: &live, failAt: "scale"})
	if live != 4 {
		t.Errorf("setting constants built kernels (%d live, want 4): kernels are built at the first call", live)
	}
	fb, _ := mb.GetFunction("f")
	if err := fb(args); err == nil || !strings.Contains(err.Error(), "no kernel for scale") {
		t.Fatalf("a failing build: %v", err)
	}
	if live != 4 {
		t.Errorf("%d kernels live after a failed build, want 4", live)
	}
}
