package transform

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/passconfig"
	"github.com/kiln-dev/kiln/tir"
)

func TestDisableVectorizeSemantics(t *testing.T) { checkSemantics(t, DisableVectorize()) }

func TestDisableVectorize(t *testing.T) {
	f := tir.NewPrimFunc("f")
	a := f.AddBuffer(tir.NewBuffer("A", ir.Int32, ir.Shape{4, 8}, ""))
	i, j := tir.NewVar("i", tir.Int32T), tir.NewVar("j", tir.Int32T)
	f.Body = tir.Loop(i, 4, tir.Parallel, tir.Loop(j, 8, tir.Vectorized, tir.NewStore(a, tir.Bin(tir.OpAdd, i, j), i, j)))
	g := mustRun(t, DisableVectorize(), f)
	want := "for i in T.parallel(4):\n    for j in T.serial(8):\n        A[i, j] = i + j"
	if got := body(g); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(body(f), "T.vectorized(8)") {
		t.Errorf("the pass changed its input:\n%s", body(f))
	}
}

// TestPipelineConfig checks that the pipeline follows its pass config:
// the key adds DisableVectorize, the unroll limit reaches UnrollLoops,
// opt level 1 skips UnrollLoops, a disabled pass is skipped.
func TestPipelineConfig(t *testing.T) {
	names := func(p *Pipeline) string {
		var out []string
		for _, ps := range p.Passes() {
			out = append(out, ps.Name)
		}
		return strings.Join(out, " ")
	}
	p := NewPipeline()
	if got, want := names(p), "FlattenBuffers Simplify SimplifyIndices CollapseLoops UnrollLoops Simplify RemoveNoOp Simplify"; got != want {
		t.Errorf("default passes %q, want %q", got, want)
	}
	cfg := passconfig.New()
	if err := cfg.Set(passconfig.DisableVectorize.Name, "true"); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Disable("RemoveNoOp"); err != nil {
		t.Fatal(err)
	}
	p.Config = cfg
	if got, want := names(p), "FlattenBuffers Simplify SimplifyIndices CollapseLoops DisableVectorize UnrollLoops Simplify Simplify"; got != want {
		t.Errorf("configured passes %q, want %q", got, want)
	}
	if err := cfg.SetOptLevel(1); err != nil {
		t.Fatal(err)
	}
	if got, want := names(p), "FlattenBuffers Simplify SimplifyIndices CollapseLoops DisableVectorize Simplify Simplify"; got != want {
		t.Errorf("opt level 1 passes %q, want %q", got, want)
	}
	if got := strings.Join(p.Names(), " "); got != "FlattenBuffers Simplify SimplifyIndices CollapseLoops DisableVectorize UnrollLoops RemoveNoOp" {
		t.Errorf("Names() = %q", got)
	}

	// The unroll limit: a loop of 4 unrolls at the default, not at 2.
	f := tir.NewPrimFunc("g")
	a := f.AddBuffer(tir.NewBuffer("A", ir.Int32, ir.Shape{4}, ""))
	i := tir.NewVar("i", tir.Int32T)
	f.Body = tir.Loop(i, 4, tir.Unrolled, tir.NewStore(a, i, i))
	for _, tc := range []struct {
		limit    string
		unrolled bool
	}{{"32", true}, {"2", false}} {
		c := passconfig.New()
		if err := c.Set(passconfig.UnrollMaxExtent.Name, tc.limit); err != nil {
			t.Fatal(err)
		}
		q := NewPipeline()
		q.Config = c
		g, err := q.RunFunc(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(body(g), "T.unroll"); got == tc.unrolled {
			t.Errorf("limit %s: loop kept = %v:\n%s", tc.limit, got, body(g))
		}
	}
}
