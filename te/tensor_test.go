package te

import (
	"runtime"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
)

// TestLoadKeepsProducer is the regression test for a collector race: the
// tensors a compute reads are found from the loads in its body, after the
// body function has returned and the Go variables holding those tensors
// may be dead. A load must keep its tensor reachable, so a collection in
// that window cannot lose the producer ("reads buffer …, which is not a
// te tensor", seen once in CI on argmin).
func TestLoadKeepsProducer(t *testing.T) {
	load := func() tir.PrimExpr {
		a := Placeholder("a", ir.Float32, ir.Shape{4})
		b := Compute("b", ir.Shape{4}, func(i []tir.PrimExpr) tir.PrimExpr { return a.At(i...) })
		return b.At(tir.Idx(0))
	}()
	runtime.GC()
	runtime.GC()
	ld, ok := load.(*tir.BufferLoad)
	if !ok {
		t.Fatalf("At returned %T, want *tir.BufferLoad", load)
	}
	got := tensorOfBuffer(ld.Buffer)
	if got == nil || got.Name != "b" || got.Buffer() != ld.Buffer {
		t.Fatalf("tensorOfBuffer after GC = %v, want tensor b", got)
	}
	if in := got.Op.InputTensors(); len(in) != 1 || in[0].Name != "a" {
		t.Fatalf("b's inputs = %v, want [a]", in)
	}
	// A buffer that is not a tensor's maps to nothing.
	if tensorOfBuffer(tir.NewBuffer("x", ir.Float32, ir.Shape{4}, "")) != nil {
		t.Fatal("a plain tir buffer mapped to a tensor")
	}
}
