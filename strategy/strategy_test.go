package strategy

import (
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
)

func compute(c *Call, in []*te.Tensor) ([]*te.Tensor, error) { return in[:1], nil }

// TestOverlay: an overlay sees its base's implementations, its own win by
// priority (and among equals), and adding to it leaves the base alone.
func TestOverlay(t *testing.T) {
	base := NewRegistry()
	if err := base.Add(op.Add, ForKey("generic"), Implementation{Name: "base.add", PLevel: PLevelGeneric, Compute: compute}); err != nil {
		t.Fatal(err)
	}
	over := NewOverlay(base)
	if err := over.Add(op.Add, ForKey("acc"), Implementation{Name: "acc.add", PLevel: PLevelVendor, Compute: compute}); err != nil {
		t.Fatal(err)
	}
	if err := over.Add(op.Add, ForKey("acc"), Implementation{Name: "acc.add", PLevel: PLevelVendor, Compute: compute}); err == nil {
		t.Error("a second acc.add was accepted")
	}
	k := &targets.Kind{Name: "acc", Keys: []string{"acc"}}
	tg, err := targets.New(k, nil)
	if err != nil {
		t.Fatal(err)
	}
	tt := ir.NewTensorType(ir.Float32, ir.Shape{2})
	call := &Call{Op: op.Add, ArgTypes: []ir.Type{tt, tt}, OutType: tt, Target: tg}
	cands := over.Candidates(call)
	if len(cands) != 2 || cands[0].Name != "acc.add" || cands[1].Name != "base.add" {
		t.Errorf("overlay candidates %v", names(cands))
	}
	if got := base.Candidates(call); len(got) != 1 || got[0].Name != "base.add" {
		t.Errorf("base candidates %v", names(got))
	}
	call.Target = nil
	if impl, err := over.Select(call); err != nil || impl.Name != "base.add" {
		t.Errorf("without the acc key: %q, %v", impl.Name, err)
	}
}

func names(impls []Implementation) []string {
	var out []string
	for _, i := range impls {
		out = append(out, i.Name)
	}
	return out
}
