package driver

import (
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/tensor"
)

// concatModule is conv(concat(conv(x, w1), conv(x, w2), axis), w3), as
// in squeezenet's fire modules, with 8 output channels per convolution on
// a 1x4x6x6 input; with extraUse, the first convolution's result is an
// output as well.
func concatModule(t *testing.T, axis int64, extraUse bool) *graph.Module {
	t.Helper()
	rng := rand.New(rand.NewSource(3))
	weight := func(in int64) graph.Expr {
		v := make([]float32, 8*in*3*3)
		for i := range v {
			v[i] = rng.Float32() - 0.5
		}
		return graph.NewConstant(tensor.FromFloat32s(ir.Shape{8, in, 3, 3}, v))
	}
	call := func(o *op.Op, args []graph.Expr, attrs ir.Attrs) graph.Expr {
		c, err := graph.NewCall(o, args, attrs)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	x := graph.NewVar("x", ir.NewTensorType(ir.Float32, ir.Shape{1, 4, 6, 6}))
	pad := ir.Attrs{"padding": []int64{1, 1, 1, 1}}
	a := call(op.Conv2D, []graph.Expr{x, weight(4)}, pad)
	b := call(op.Conv2D, []graph.Expr{x, weight(4)}, pad)
	in := int64(16)
	if axis != 1 && axis != -3 {
		in = 8
	}
	var body graph.Expr = call(op.Conv2D, []graph.Expr{call(op.Concatenate, []graph.Expr{a, b}, ir.Attrs{"axis": axis}), weight(in)}, pad)
	if extraUse {
		body = graph.NewTuple([]graph.Expr{body, a})
	}
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x}, body, nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	return mod
}

// compileViews compiles mod for the host, verifying the IR after every
// stage, loads the artifact and returns it with the names of the nodes
// its program runs in place.
func compileViews(t *testing.T, mod *graph.Module) (*Artifact, []string) {
	t.Helper()
	res, err := Compile(mod, nil, Config{Host: hostTarget(t), Out: filepath.Join(t.TempDir(), "a"), Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(res.Dir, "graph.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g runtime.GraphJSON
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	var inPlace []string
	for _, node := range g.Nodes {
		if string(node.Attrs["in_place"]) == "1" {
			inPlace = append(inPlace, node.Name)
		}
	}
	art, err := LoadArtifact(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return art, inPlace
}

// TestConcatInPlace: the graph executor runs a concatenation along the
// channels in place (its arguments' kernels write into its result, the
// node is marked in_place and not called) and the outputs match the
// reference executor; along the width (not contiguous runs), or with an
// argument that is also an output, it is called as before.
func TestConcatInPlace(t *testing.T) {
	testenv.Cgo(t)
	for _, c := range []struct {
		name     string
		axis     int64
		extraUse bool
		inPlace  int
	}{
		{"channels", 1, false, 1},
		{"negative axis", -3, false, 1},
		{"width", 3, false, 0},
		{"argument is an output", 1, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			mod := concatModule(t, c.axis, c.extraUse)
			in := make([]float32, 4*6*6)
			for i := range in {
				in[i] = float32(i%13) - 6
			}
			x := tensor.FromFloat32s(ir.Shape{1, 4, 6, 6}, in)
			want, err := ref.Run(mod, []*tensor.Tensor{x})
			if err != nil {
				t.Fatal(err)
			}
			art, inPlace := compileViews(t, mod)
			if len(inPlace) != c.inPlace {
				t.Fatalf("in place: %v, want %d node(s)", inPlace, c.inPlace)
			}
			got, err := art.Run(map[string]*tensor.Tensor{"x": x})
			if err != nil {
				t.Fatal(err)
			}
			steps, err := art.Exec.Profile(1)
			if err != nil {
				t.Fatal(err)
			}
			if want := 4 - c.inPlace; len(steps) != want {
				t.Errorf("%d steps run, want %d (three convolutions, and the concatenation unless in place)", len(steps), want)
			}
			for i, w := range want.Flatten() {
				if err := tensor.AllClose(got[i], w, 1e-4, 1e-5); err != nil {
					t.Errorf("output %d: %v", i, err)
				}
			}
		})
	}
}

// TestCutInPlace: a reshape and a channel split between kernels run in
// place (their results are their argument's bytes), and the outputs match
// the reference executor.
func TestCutInPlace(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(5))
	weight := func(out, in int64) graph.Expr {
		v := make([]float32, out*in*9)
		for i := range v {
			v[i] = rng.Float32() - 0.5
		}
		return graph.NewConstant(tensor.FromFloat32s(ir.Shape{out, in, 3, 3}, v))
	}
	call := func(o *op.Op, args []graph.Expr, attrs ir.Attrs) graph.Expr {
		c, err := graph.NewCall(o, args, attrs)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	pad := ir.Attrs{"padding": []int64{1, 1, 1, 1}}
	x := graph.NewVar("x", ir.NewTensorType(ir.Float32, ir.Shape{1, 4, 8, 8}))
	a := call(op.Conv2D, []graph.Expr{x, weight(8, 4)}, pad)
	// The reshape: [1, 8, 8, 8] -> [1, 16, 4, 8].
	r := call(op.Reshape, []graph.Expr{a}, ir.Attrs{"newshape": []int64{1, 16, 4, 8}})
	b := call(op.Conv2D, []graph.Expr{r, weight(8, 16)}, pad)
	// The split: 8 channels into 4 and 4.
	s := call(op.Split, []graph.Expr{b}, ir.Attrs{"indices": []int64{4}, "axis": int64(1)})
	o0 := call(op.Conv2D, []graph.Expr{graph.NewTupleGetItem(s, 0), weight(4, 4)}, pad)
	o1 := call(op.Conv2D, []graph.Expr{graph.NewTupleGetItem(s, 1), weight(4, 4)}, pad)
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x}, graph.NewTuple([]graph.Expr{o0, o1}), nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	in := make([]float32, 4*8*8)
	for i := range in {
		in[i] = float32(i%11) - 5
	}
	xv := tensor.FromFloat32s(ir.Shape{1, 4, 8, 8}, in)
	want, err := ref.Run(mod, []*tensor.Tensor{xv})
	if err != nil {
		t.Fatal(err)
	}
	art, inPlace := compileViews(t, mod)
	if len(inPlace) != 2 {
		t.Fatalf("in place: %v, want the reshape and the split", inPlace)
	}
	got, err := art.Run(map[string]*tensor.Tensor{"x": xv})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want.Flatten() {
		if err := tensor.AllClose(got[i], w, 1e-4, 1e-5); err != nil {
			t.Errorf("output %d: %v", i, err)
		}
	}
}
