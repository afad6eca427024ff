package transform

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// parse reads a module in the text syntax, failing the test on error.
func parse(t *testing.T, src string) *graph.Module {
	t.Helper()
	m, err := graph.Parse(src, graph.ParseOptions{})
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	return m
}

// text prints a module with default options.
func text(t *testing.T, m *graph.Module) string {
	t.Helper()
	var b strings.Builder
	if err := graph.Print(&b, m, graph.PrintOptions{}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// randomArgs makes one random tensor per main parameter: floats uniform
// in [-2, 2), integers in [0, 3), bools fair.
func randomArgs(t *testing.T, m *graph.Module, seed int64) []*tensor.Tensor {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	var args []*tensor.Tensor
	for _, p := range m.Main().Params {
		tt, ok := p.Type().(*ir.TensorType)
		if !ok {
			t.Fatalf("parameter %%%s is not a tensor", p.Name)
		}
		x := tensor.New(tt.DType, tt.Shape)
		for i := 0; i < x.Len(); i++ {
			switch {
			case tt.DType.IsFloat():
				x.SetFloat(i, rng.Float64()*4-2)
			case tt.DType == ir.Bool:
				x.SetInt(i, int64(rng.Intn(2)))
			default:
				x.SetInt(i, int64(rng.Intn(3)))
			}
		}
		args = append(args, x)
	}
	return args
}

// run evaluates main on the reference executor and flattens the result.
func run(t *testing.T, m *graph.Module, args []*tensor.Tensor) []*tensor.Tensor {
	t.Helper()
	v, err := ref.Run(m, args)
	if err != nil {
		t.Fatalf("ref.Run: %v", err)
	}
	return v.Flatten()
}

// sameBits fails unless got and want are bitwise identical tensors.
func sameBits(t *testing.T, what string, got, want []*tensor.Tensor) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d outputs, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !got[i].Equal(want[i]) {
			err := tensor.AllClose(got[i], want[i], 0, 0)
			t.Errorf("%s: output %d differs: %v", what, i, err)
		}
	}
}

// primitiveNames lists the name hints of the primitive functions main
// calls, in evaluation order.
func primitiveNames(m *graph.Module) []string {
	var out []string
	graph.PostOrder(m.Main().Body, func(e graph.Expr) {
		if c, ok := e.(*graph.Call); ok {
			if f, ok := c.Fn.(*graph.Function); ok && f.BoolAttr(graph.AttrPrimitive) {
				out = append(out, f.StrAttr(AttrNameHint))
			}
		}
	})
	return out
}
