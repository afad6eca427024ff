package transform

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/tirtest"
)

func TestVectorTailsSemantics(t *testing.T) {
	checkSemantics(t, VectorTails(512))
	checkSemantics(t, VectorTails(256))
}

// TestVectorTailsCases checks which vectorised loops end with one whole
// vector (an epilogue row of 111 floats on AVX-512 and on AVX2, a loop
// starting above 0, bytes in vectors of 64, a store under a let and a
// condition) and which keep the compiler's remainder (a multiple of the
// lanes, a loop no wider than a vector, an in-place update, a load of
// another stored buffer, a call_extern, a serial loop, no vectors), and
// that every rewritten function computes what the loop did.
func TestVectorTailsCases(t *testing.T) {
	blk := tir.NewBuffer("blk", ir.Float32, ir.Shape{336}, "")
	out := tir.NewBuffer("out", ir.Float32, ir.Shape{336}, "")
	aux := tir.NewBuffer("aux", ir.Float32, ir.Shape{336}, "")
	bias := tir.NewBuffer("bias", ir.Float32, ir.Shape{1}, "")
	q := tir.NewBuffer("q", ir.Int8, ir.Shape{336}, "")
	i := tir.NewVar("i", tir.Int32T)
	c := func(v int64) tir.PrimExpr { return tir.Idx(v) }
	add := func(a, b tir.PrimExpr) tir.PrimExpr { return tir.Bin(tir.OpAdd, a, b) }
	relu := func(n int64, kind tir.ForKind) *tir.For {
		v := tir.Bin(tir.OpMax, add(tir.NewLoad(blk, i), tir.NewLoad(bias, c(0))), tir.Const(tir.Float32T, 0))
		return tir.Loop(i, n, kind, tir.NewStore(out, v, i))
	}
	shifted := tir.NewFor(i, c(3), c(100), tir.Vectorized, tir.NewStore(out, tir.NewLoad(blk, i), i))
	bytes := tir.Loop(i, 100, tir.Vectorized, tir.NewStore(q, tir.NewCast(tir.Scalar(ir.Int8), tir.NewLoad(blk, i)), i))
	x := tir.NewVar("x", tir.Float32T)
	guarded := tir.Loop(i, 111, tir.Vectorized, tir.NewLet(x, tir.NewLoad(blk, i),
		&tir.IfThenElse{Cond: tir.Bin(tir.OpLT, tir.Const(tir.Float32T, 0), x), Then: tir.NewStore(out, x, i), Else: tir.NewStore(out, tir.Const(tir.Float32T, 0), i)}))
	inPlace := tir.Loop(i, 111, tir.Vectorized, tir.NewStore(out, add(tir.NewLoad(out, i), tir.Const(tir.Float32T, 1)), i))
	crossed := tir.Loop(i, 111, tir.Vectorized, tir.Seq(tir.NewStore(aux, tir.NewLoad(blk, i), i), tir.NewStore(out, tir.NewLoad(aux, i), i)))
	extern := tir.Loop(i, 111, tir.Vectorized, tir.NewStore(out, tir.CallExternOf(tir.Float32T, "f", tir.NewLoad(blk, i)), i))
	tests := []struct {
		name string
		bits int
		in   *tir.For
		want string // "" when the loop stays as it is
		run  bool   // whether to compare the function's outputs
	}{
		{"111 floats, AVX-512", 512, relu(111, tir.Vectorized),
			"for i in T.vectorized(96):\n    out[i] = T.max(blk[i] + bias[0], T.float32(0.0))\nfor i_tail in T.vectorized(16):\n    out[i_tail + 95] = T.max(blk[i_tail + 95] + bias[0], T.float32(0.0))", true},
		{"111 floats, AVX2", 256, relu(111, tir.Vectorized),
			"for i in T.vectorized(104):\n    out[i] = T.max(blk[i] + bias[0], T.float32(0.0))\nfor i_tail in T.vectorized(8):\n    out[i_tail + 103] = T.max(blk[i_tail + 103] + bias[0], T.float32(0.0))", true},
		{"from 3", 512, shifted, "", true},
		{"bytes", 512, bytes, "", true},
		{"a let and a condition", 512, guarded, "", true},
		{"a multiple of the lanes", 512, relu(112, tir.Vectorized), "-", false},
		{"one vector or less", 512, relu(16, tir.Vectorized), "-", false},
		{"in place", 512, inPlace, "-", false},
		{"a stored buffer loaded", 512, crossed, "-", false},
		{"call_extern", 512, extern, "-", false},
		{"serial", 512, relu(111, tir.Serial), "-", false},
		{"no vectors", 0, relu(111, tir.Vectorized), "-", false},
	}
	for _, tc := range tests {
		f := tir.NewPrimFunc("f")
		for _, b := range []*tir.Buffer{blk, bias, aux, out, q} {
			f.AddBuffer(b)
		}
		f.Body = tc.in
		g := mustRun(t, VectorTails(tc.bits), f)
		got, before := tir.StmtString(g.Body), tir.StmtString(f.Body)
		switch {
		case tc.want == "-" && got != before:
			t.Errorf("%s: rewritten:\n%s", tc.name, got)
		case tc.want != "-" && got == before:
			t.Errorf("%s: left alone", tc.name)
		case tc.want != "-" && tc.want != "" && got != tc.want:
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, got, tc.want)
		}
		if tc.want != "-" && !strings.Contains(got, "_tail") {
			t.Errorf("%s: no tail loop in\n%s", tc.name, got)
		}
		if tc.run {
			if err := tirtest.Equivalent(f, g, 3, 11); err != nil {
				t.Errorf("%s: %v\nbefore:\n%s\nafter:\n%s", tc.name, err, before, got)
			}
		}
	}
}
