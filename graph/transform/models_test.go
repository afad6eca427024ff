package transform

import (
	"fmt"
	"github.com/kiln-dev/kiln/internal/testenv"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/tensor"
)

// loadModel imports a real model and reads its first data set's inputs.
func loadModel(t *testing.T, name string) (*graph.Module, []*tensor.Tensor) {
	t.Helper()
	dir := testenv.SharedPath(t, "models", name)
	path := filepath.Join(dir, "model.onnx")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("model missing: %v", err)
	}
	m, err := onnx.LoadFile(path, onnx.Options{})
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	var args []*tensor.Tensor
	for i := range m.Inputs {
		x, _, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("input_%d.pb", i)))
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, x)
	}
	return m.Module, args
}

// relClose fails unless every element of got is within rtol of want,
// relative to the largest magnitude of want (the output's scale), so that
// elements near zero are judged at the scale of the output.
func relClose(t *testing.T, what string, got, want []*tensor.Tensor, rtol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d outputs, want %d", what, len(got), len(want))
	}
	for i := range got {
		scale := 0.0
		for j := 0; j < want[i].Len(); j++ {
			scale = math.Max(scale, math.Abs(want[i].Float(j)))
		}
		if err := tensor.AllClose(got[i], want[i], rtol, rtol*scale); err != nil {
			t.Errorf("%s: output %d: %v", what, i, err)
		}
	}
}

// opCalls counts operator calls in main and in the functions it calls.
func opCalls(m *graph.Module) int {
	n := 0
	var walk func(e graph.Expr)
	seen := map[*graph.Function]bool{}
	walk = func(root graph.Expr) {
		graph.PostOrder(root, func(e graph.Expr) {
			if c, ok := e.(*graph.Call); ok {
				if c.Op != nil {
					n++
				} else if f, ok := c.Fn.(*graph.Function); ok && !seen[f] {
					seen[f] = true
					walk(f.Body)
				}
			}
		})
	}
	walk(m.Main().Body)
	return n
}

// TestModelsDifferential checks on real models that FuseOps keeps the
// reference executor's outputs bit for bit, that FoldConstant and
// SimplifyExpr keep them within 1e-5 of the output scale, and the whole
// pipeline within 1e-6 of it.
func TestModelsDifferential(t *testing.T) {
	for _, name := range []string{"mlp", "lenet", "conv1d_kws", "tiny_bert", "squeezenet1_1", "mobilenet_v2", "resnet18"} {
		t.Run(name, func(t *testing.T) {
			if testing.Short() && (name == "resnet18" || name == "squeezenet1_1" || name == "mobilenet_v2") {
				t.Skip("large model; runs without -short")
			}
			m, args := loadModel(t, name)
			if err := Verify(m); err != nil {
				t.Fatalf("imported module: %v", err)
			}
			base := run(t, m, args)

			fused, err := FuseOps(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := Verify(fused); err != nil {
				t.Fatal(err)
			}
			if opCalls(fused) != opCalls(m) {
				t.Errorf("FuseOps changed the number of op calls: %d -> %d", opCalls(m), opCalls(fused))
			}
			if len(primitiveNames(fused)) == 0 {
				t.Errorf("no fused functions")
			}
			sameBits(t, "FuseOps", run(t, fused, args), base)

			p := &Pipeline{Passes: []Pass{
				{Name: "fold_constant", Run: FoldConstant},
				{Name: "simplify_expr", Run: SimplifyExpr},
			}, Verify: true}
			simple, err := p.Run(m)
			if err != nil {
				t.Fatal(err)
			}
			simpleOut := run(t, simple, args)
			relClose(t, "FoldConstant+SimplifyExpr", simpleOut, base, 1e-5)

			full := NewPipeline()
			full.Verify = true
			out, err := full.Run(simple)
			if err != nil {
				t.Fatal(err)
			}
			// alter_conv_layout's Winograd weights (G g G^T) are rounded
			// to float32: the rest of the pipeline keeps the bits, that
			// rounding moves outputs by about 1e-8 of their scale.
			relClose(t, "full pipeline vs simplified", run(t, out, args), simpleOut, 1e-6)
			t.Logf("%s: %d op calls, %d after simplification, %d fused functions",
				name, opCalls(m), opCalls(simple), len(primitiveNames(out)))
		})
	}
}
