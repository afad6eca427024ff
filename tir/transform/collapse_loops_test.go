package transform

import (
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/tirtest"
)

func TestCollapseLoopsSemantics(t *testing.T) { checkSemantics(t, CollapseLoops()) }

// TestCollapseLoopsCases checks which nests merge (an epilogue copying a
// block into rows as wide as its own, three loops into one, a kernel
// call's address) and which do not (a block whose rows are wider than the
// tensor's, an index that also steps with the outer loop, a condition on
// a loop variable, an annotated outer loop), on flat buffers as Phase1
// sees them.
func TestCollapseLoopsCases(t *testing.T) {
	blk := tir.NewBuffer("blk", ir.Float32, ir.Shape{8 * 224}, "")
	out := tir.NewBuffer("out", ir.Float32, ir.Shape{8 * 196}, "")
	bias := tir.NewBuffer("bias", ir.Float32, ir.Shape{8}, "")
	i1, i2, i3 := tir.NewVar("i1", tir.Int32T), tir.NewVar("i2", tir.Int32T), tir.NewVar("i3", tir.Int32T)
	c := func(v int64) tir.PrimExpr { return tir.Idx(v) }
	add := func(a, b tir.PrimExpr) tir.PrimExpr { return tir.Bin(tir.OpAdd, a, b) }
	mul := func(a tir.PrimExpr, k int64) tir.PrimExpr { return tir.Bin(tir.OpMul, a, c(k)) }
	// out[i1*196 + i2*14 + i3] = blk[i1*S + i2*R + i3] + bias[i1]
	epilogue := func(r, s int64, kind tir.ForKind) tir.Stmt {
		v := tir.Bin(tir.OpAdd, tir.NewLoad(blk, add(add(mul(i1, s), mul(i2, r)), i3)), tir.NewLoad(bias, i1))
		return tir.Loop(i1, 8, tir.Serial, tir.Loop(i2, 14, tir.Serial, tir.Loop(i3, 14, kind,
			tir.NewStore(out, v, add(add(mul(i1, 196), mul(i2, 14)), i3)))))
	}
	cond := tir.Loop(i2, 14, tir.Serial, tir.Loop(i3, 14, tir.Serial,
		&tir.IfThenElse{Cond: tir.Bin(tir.OpLT, i3, c(7)), Then: tir.NewStore(out, tir.NewLoad(blk, add(mul(i2, 14), i3)), add(mul(i2, 14), i3))}))
	annotated := tir.Loop(i2, 14, tir.Serial, tir.Loop(i3, 14, tir.Serial, tir.NewStore(out, tir.NewLoad(blk, add(mul(i2, 14), i3)), add(mul(i2, 14), i3))))
	annotated.Annotations = ir.Attrs{"pragma_note": "keep"}
	tests := []struct {
		name string
		in   tir.Stmt
		want string
	}{
		{"block rows as wide as the tensor's", epilogue(14, 196, tir.Vectorized),
			"for i1 in T.serial(8):\n    for i2_i3_fused in T.vectorized(196):\n        out[i1 * 196 + i2_i3_fused] = blk[i1 * 196 + i2_i3_fused] + bias[i1]"},
		{"block rows wider than the tensor's", epilogue(16, 224, tir.Vectorized),
			"for i1 in T.serial(8):\n    for i2 in T.serial(14):\n        for i3 in T.vectorized(14):\n            out[i1 * 196 + i2 * 14 + i3] = blk[i1 * 224 + i2 * 16 + i3] + bias[i1]"},
		{"three loops into one",
			tir.Loop(i1, 8, tir.Serial, tir.Loop(i2, 14, tir.Serial, tir.Loop(i3, 14, tir.Serial,
				tir.NewStore(out, tir.NewLoad(blk, add(add(mul(i1, 196), mul(i2, 14)), i3)), add(add(mul(i1, 196), mul(i2, 14)), i3))))),
			"for i1_i2_i3_fused_fused in T.serial(1568):\n    out[i1_i2_i3_fused_fused] = blk[i1_i2_i3_fused_fused]"},
		{"a condition on the inner variable", cond,
			"for i2 in T.serial(14):\n    for i3 in T.serial(14):\n        if i3 < 7:\n            out[i2 * 14 + i3] = blk[i2 * 14 + i3]"},
		{"an annotated outer loop", annotated, ""},
	}
	for _, tc := range tests {
		got := tir.StmtString(CollapseLoopsStmt(tc.in))
		want := tc.want
		if want == "" {
			want = tir.StmtString(tc.in)
		}
		if got != want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, got, want)
		}
	}
	// The merged epilogue computes what the nest did.
	f := tir.NewPrimFunc("epilogue")
	for _, b := range []*tir.Buffer{blk, bias, out} {
		f.AddBuffer(b)
	}
	f.Body = epilogue(14, 196, tir.Vectorized)
	g := mustRun(t, CollapseLoops(), f)
	if err := tirtest.Equivalent(f, g, 3, 7); err != nil {
		t.Fatal(err)
	}
}
