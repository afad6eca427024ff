package onnx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/internal/shared"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// fuzzFreeze gives every small, statically shaped graph input a frozen
// value of ones, so that fuzzed models reach the compile-time paths (If
// conditions, Loop trip counts, shape inputs) too.
func fuzzFreeze(data []byte) map[string]*tensor.Tensor {
	var mp pb.ModelProto
	if proto.Unmarshal(data, &mp) != nil {
		return nil
	}
	freeze := map[string]*tensor.Tensor{}
	for _, vi := range mp.GetGraph().GetInput() {
		t, err := inputType(vi, nil, false)
		if err != nil || t.Shape.NumElements() > 64 {
			continue
		}
		for _, d := range t.Shape {
			if d > 64 {
				t = nil
				break
			}
		}
		if t == nil {
			continue
		}
		v := tensor.New(t.DType, t.Shape)
		for i := 0; i < v.Len(); i++ {
			v.SetFloat(i, 1)
		}
		freeze[vi.GetName()] = v
	}
	return freeze
}

// structuralVariants derives models that differ from the parsed input in
// graph structure (node order, wiring, outputs), so that fuzzing reaches
// the topological sort, scoping and error paths that byte mutations of a
// protobuf seldom hit. The choices are driven by the input bytes.
func structuralVariants(data []byte) [][]byte {
	var mp pb.ModelProto
	if proto.Unmarshal(data, &mp) != nil || mp.GetGraph() == nil || len(mp.GetGraph().GetNode()) == 0 {
		return nil
	}
	pick := func(i, n int) int {
		if n == 0 {
			return 0
		}
		return int(data[(i*7919)%len(data)]) % n
	}
	var out [][]byte
	variant := func(edit func(g *pb.GraphProto)) {
		c := proto.Clone(&mp).(*pb.ModelProto)
		edit(c.Graph)
		if b, err := proto.Marshal(c); err == nil {
			out = append(out, b)
		}
	}
	nodes := len(mp.Graph.Node)
	variant(func(g *pb.GraphProto) { // reversed node order
		for i, j := 0, len(g.Node)-1; i < j; i, j = i+1, j-1 {
			g.Node[i], g.Node[j] = g.Node[j], g.Node[i]
		}
	})
	variant(func(g *pb.GraphProto) { // rewire an input to another node's output
		a, b := g.Node[pick(1, nodes)], g.Node[pick(2, nodes)]
		if len(a.Input) > 0 && len(b.Output) > 0 {
			a.Input[pick(3, len(a.Input))] = b.Output[pick(4, len(b.Output))]
		}
	})
	variant(func(g *pb.GraphProto) { // drop a node
		k := pick(5, nodes)
		g.Node = append(g.Node[:k], g.Node[k+1:]...)
	})
	variant(func(g *pb.GraphProto) { // expose an intermediate value as an output
		a := g.Node[pick(6, nodes)]
		if len(a.Output) > 0 && len(g.Output) > 0 {
			g.Output[0] = &pb.ValueInfoProto{Name: proto.String(a.Output[0])}
		}
	})
	return out
}

// sharedSeeds lists the files named name in the shared ONNX suites and
// models (../shared, found from the repository root) no larger than max
// bytes, at most 400 of them spread over the suites: the seed corpus of
// the fuzz targets (each seed also runs as a test case in every go test).
func sharedSeeds(f *testing.F, name string, max int64) []string {
	root, err := shared.Dir()
	if err != nil {
		return nil
	}
	var all []string
	for _, pat := range []string{filepath.Join(root, "onnx", "*", "*", name), filepath.Join(root, "onnx", "*", "*", "*", name), filepath.Join(root, "models", "*", name), filepath.Join(root, "models", "*", "*", name)} {
		m, _ := filepath.Glob(pat)
		for _, p := range m {
			if st, err := os.Stat(p); err == nil && st.Size() <= max {
				all = append(all, p)
			}
		}
	}
	if step := len(all)/400 + 1; step > 1 {
		var picked []string
		for i := 0; i < len(all); i += step {
			picked = append(picked, all[i])
		}
		all = picked
	}
	return all
}

// FuzzReadTensorProto checks the .pb tensor reader: no panic, an accepted
// tensor holds exactly its shape's bytes, and writing it back reads back
// equal.
func FuzzReadTensorProto(f *testing.F) {
	for _, p := range sharedSeeds(f, "input_0.pb", 1<<12) {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "t.pb")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		v, name, err := ReadTensorFile(p)
		if err != nil {
			return
		}
		if int64(len(v.Data)) != v.Shape.NumElements()*int64(v.DType.Size()) {
			t.Fatalf("%s%v holds %d bytes", v.DType, v.Shape, len(v.Data))
		}
		q := filepath.Join(dir, "back.pb")
		if err := WriteTensorFile(q, v, name); err != nil {
			t.Fatal(err)
		}
		back, _, err := ReadTensorFile(q)
		if err != nil || !ir.TypeEqual(back.Type(), v.Type()) || string(back.Data) != string(v.Data) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzLoad checks that Load never panics (a recovered panic shows up as an
// "internal error") and that whatever it accepts type-checks, with outputs
// of the types Model reports.
func FuzzLoad(f *testing.F) {
	for _, p := range sharedSeeds(f, "model.onnx", 1<<14) {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		freeze := fuzzFreeze(data)
		for k, in := range append([][]byte{data}, structuralVariants(data)...) {
			checkLoad(t, in, Options{})
			if k == 0 || freeze != nil {
				checkLoad(t, in, Options{Freeze: freeze})
			}
		}
	})
}

// checkLoad loads a model and checks the fuzz property: no panic, and an
// accepted model type-checks with the parameters and outputs it reports.
func checkLoad(t *testing.T, data []byte, opts Options) {
	t.Helper()
	m, err := Load(data, opts)
	if err != nil {
		if strings.Contains(err.Error(), "internal error") {
			t.Fatalf("Load panicked: %v", err)
		}
		return
	}
	if err := graph.InferTypes(m.Module); err != nil {
		t.Fatalf("accepted model does not type-check: %v", err)
	}
	main := m.Module.Main()
	if len(main.Params) != len(m.Inputs) {
		t.Fatalf("%d params, %d inputs", len(main.Params), len(m.Inputs))
	}
	for i, p := range main.Params {
		if p.Name != m.Inputs[i].Name || !ir.TypeEqual(p.Type(), m.Inputs[i].Type) {
			t.Fatalf("param %d is %s %s, input is %+v", i, p.Name, p.Type(), m.Inputs[i])
		}
	}
	outs := []graph.Expr{main.Body}
	if tup, ok := main.Body.(*graph.Tuple); ok && len(m.Outputs) > 1 {
		outs = tup.Fields
	}
	if len(outs) != len(m.Outputs) {
		t.Fatalf("%d outputs in the body, %d reported", len(outs), len(m.Outputs))
	}
	for i, o := range outs {
		if !ir.TypeEqual(o.Type(), m.Outputs[i].Type) {
			t.Fatalf("output %d has type %s, reported %s", i, o.Type(), m.Outputs[i].Type)
		}
	}
}
