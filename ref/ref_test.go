package ref

import (
	"context"
	"errors"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// TestRunContextCancelled: a cancelled context stops the interpreter
// before its first node.
func TestRunContextCancelled(t *testing.T) {
	m, err := graph.Parse(`def @main(%x: Tensor[(2), float32]) -> Tensor[(2), float32] {
  %0 = add(%x, %x);
  nn.relu(%0)
}`, graph.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.FromFloat32s(ir.Shape{2}, []float32{-1, 2})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunContext(ctx, m, []*tensor.Tensor{x}); !errors.Is(err, context.Canceled) {
		t.Errorf("RunContext(cancelled) = %v", err)
	}
	v, err := RunContext(context.Background(), m, []*tensor.Tensor{x})
	if err != nil || v.Tensor.Float32s()[1] != 4 {
		t.Errorf("RunContext = %v, %v", v, err)
	}
}
