package transform

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/interp"
	"github.com/kiln-dev/kiln/tir/tirtest"
)

// scratchCopy doubles A into B through a global scratch buffer inside a
// loop, next to a local one.
func scratchCopy() *tir.PrimFunc {
	f := tir.NewPrimFunc("scratch_copy")
	a := f.AddBuffer(tir.NewBuffer("A", ir.Float32, ir.Shape{3, 4}, ""))
	b := f.AddBuffer(tir.NewBuffer("B", ir.Float32, ir.Shape{3, 4}, ""))
	g := tir.NewBuffer("g", ir.Float32, ir.Shape{4}, tir.ScopeGlobal)
	l := tir.NewBuffer("l", ir.Float32, ir.Shape{1}, tir.ScopeLocal)
	i, j, k := tir.NewVar("i", tir.Int32T), tir.NewVar("j", tir.Int32T), tir.NewVar("k", tir.Int32T)
	f.Body = tir.Loop(i, 3, tir.Serial, &tir.Allocate{Buffer: g, Body: tir.Seq(
		tir.Loop(j, 4, tir.Serial, tir.NewStore(g, tir.Mul(tir.NewLoad(a, i, j), tir.Float32(2)), j)),
		tir.Loop(k, 4, tir.Serial, &tir.Allocate{Buffer: l, Body: tir.Seq(
			tir.NewStore(l, tir.NewLoad(g, k), tir.Int32(0)),
			tir.NewStore(b, tir.NewLoad(l, tir.Int32(0)), i, k))}),
	)})
	return f
}

// TestLiftWorkspaces: the global scratch becomes a trailing parameter
// (counted in AttrWorkspaces), the local one stays, and the function
// computes the same output whatever the workspace holds.
func TestLiftWorkspaces(t *testing.T) {
	f := scratchCopy()
	g, err := LiftWorkspaces().Run(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Params) != 3 || g.BufferMap[g.Params[2]].Name != "g" || g.Attrs[AttrWorkspaces] != int64(1) {
		t.Fatalf("params %v attrs %v", g.Params, g.Attrs)
	}
	text := g.String()
	if strings.Contains(text, "as g:") || !strings.Contains(text, "as l:") {
		t.Errorf("allocations after lifting:\n%s", text)
	}
	rng := rand.New(rand.NewSource(3))
	args := tirtest.RandomArgs(f, rng)
	if err := interp.Run(f, args, nil); err != nil {
		t.Fatal(err)
	}
	args2 := tirtest.RandomArgs(g, rng)
	args2[0] = args[0]
	if err := interp.Run(g, args2, nil); err != nil {
		t.Fatal(err)
	}
	want, got := args[1].(*interp.Array), args2[1].(*interp.Array)
	for k := int64(0); k < want.Len(); k++ {
		if want.Float(k) != got.Float(k) {
			t.Fatalf("B[%d] = %v, want %v", k, got.Float(k), want.Float(k))
		}
	}
	// A function without global allocations is returned as is.
	h := tirtest.ReluScratch()
	if out, _ := LiftWorkspaces().Run(h); out != h {
		t.Error("ReluScratch (local scratch only) was changed")
	}
}
