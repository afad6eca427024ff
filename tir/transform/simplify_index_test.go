package transform

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/tirtest"
)

// TestSimplifyIndicesShuffle checks the rewrites of a channel shuffle's
// flat index f = 784i + 28j + k over i < 58, j < 28, k < 28 (the doc
// comment's examples) and that the function computes the same.
func TestSimplifyIndicesShuffle(t *testing.T) {
	i, j, k := tir.NewVar("i", tir.Int32T), tir.NewVar("j", tir.Int32T), tir.NewVar("k", tir.Int32T)
	flat := tir.Bin(tir.OpAdd, tir.Bin(tir.OpAdd, tir.Bin(tir.OpMul, i, tir.Idx(784)), tir.Bin(tir.OpMul, j, tir.Idx(28))), k)
	for _, c := range []struct {
		e    tir.PrimExpr
		want string
	}{
		{tir.Bin(tir.OpDiv, flat, tir.Idx(784)), "i"},
		{tir.Bin(tir.OpFloorDiv, flat, tir.Idx(784)), "i"},
		{tir.Bin(tir.OpMod, flat, tir.Idx(28)), "k"},
		{tir.Bin(tir.OpDiv, flat, tir.Idx(1568)), "T.truncdiv(i, 2)"},
		{tir.Bin(tir.OpMod, tir.Bin(tir.OpDiv, flat, tir.Idx(28)), tir.Idx(28)), "j"},
		{tir.Bin(tir.OpDiv, flat, tir.Idx(90944)), "0"},
		{tir.Bin(tir.OpMod, flat, tir.Idx(1568)), "T.truncmod(i, 2) * 784 + j * 28 + k"},
		// The multiples of the divisor leave the division; k / 2 stays.
		{tir.Bin(tir.OpDiv, flat, tir.Idx(2)), "i * 392 + j * 14 + T.truncdiv(k, 2)"},
		{tir.Bin(tir.OpMod, tir.Bin(tir.OpDiv, flat, tir.Idx(2)), tir.Idx(14)), "T.truncdiv(k, 2)"},
		{tir.Bin(tir.OpFloorMod, flat, tir.Idx(4)), "k % 4"},
		// Left alone: k % 8 with k up to 27 has nothing to drop.
		{tir.Bin(tir.OpMod, k, tir.Idx(8)), "T.truncmod(k, 8)"},
	} {
		f := tir.NewPrimFunc("shuffle")
		out := f.AddBuffer(tir.NewBuffer("Out", ir.Int32, ir.Shape{58, 28, 28}, ""))
		f.Body = tir.Loop(i, 58, tir.Serial, tir.Loop(j, 28, tir.Serial, tir.Loop(k, 28, tir.Serial, tir.NewStore(out, c.e, i, j, k))))
		g := mustRun(t, SimplifyIndices(), f)
		got := tir.ExprString(g.Body.(*tir.For).Body.(*tir.For).Body.(*tir.For).Body.(*tir.BufferStore).Value)
		if got != c.want {
			t.Errorf("%s: got %s, want %s", tir.ExprString(c.e), got, c.want)
		}
		if err := tirtest.Equivalent(f, g, 1, 1); err != nil {
			t.Errorf("%s: %v", tir.ExprString(c.e), err)
		}
	}
}

// randIndexExpr builds a random index expression over loop variables:
// sums of variables times coefficients (often products of extents),
// constants, and divisions and remainders by constants, nested.
func randIndexExpr(rng *rand.Rand, vars []*tir.Var, strides []int64, depth int) tir.PrimExpr {
	if depth == 0 || rng.Intn(4) == 0 {
		var e tir.PrimExpr = tir.Idx(int64(rng.Intn(5)))
		for n, v := range vars {
			if rng.Intn(3) != 0 {
				c := strides[n]
				if rng.Intn(4) == 0 {
					c = int64(rng.Intn(7) - 2)
				}
				e = tir.Bin(tir.OpAdd, e, tir.Bin(tir.OpMul, v, tir.Idx(c)))
			}
		}
		return e
	}
	sub := randIndexExpr(rng, vars, strides, depth-1)
	div := strides[rng.Intn(len(strides))] * int64(1+rng.Intn(3))
	if rng.Intn(3) == 0 {
		div = int64(1 + rng.Intn(12))
	}
	ops := []tir.BinaryOp{tir.OpDiv, tir.OpMod, tir.OpFloorDiv, tir.OpFloorMod, tir.OpAdd, tir.OpMul}
	op := ops[rng.Intn(len(ops))]
	switch op {
	case tir.OpAdd:
		return tir.Bin(op, sub, randIndexExpr(rng, vars, strides, depth-1))
	case tir.OpMul:
		return tir.Bin(op, sub, tir.Idx(int64(rng.Intn(5))))
	}
	return tir.Bin(op, sub, tir.Idx(div))
}

// TestSimplifyIndicesRandom compares SimplifyIndices against the
// interpreter on random index arithmetic in loop nests (some of it
// negative, which the pass must leave alone), and on Simplify's random
// expressions with loads, lets, casts and selects.
func TestSimplifyIndicesRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	changed := 0
	for n := 0; n < 400; n++ {
		nv := 1 + rng.Intn(3)
		f := tir.NewPrimFunc(fmt.Sprintf("idx_%d", n))
		shape := make(ir.Shape, nv)
		vars := make([]*tir.Var, nv)
		strides := make([]int64, nv)
		for a := range nv {
			shape[a] = int64(1 + rng.Intn(9))
			vars[a] = tir.NewVar(fmt.Sprintf("v%d", a), tir.Int32T)
		}
		s := int64(1)
		for a := nv - 1; a >= 0; a-- {
			strides[a] = s
			s *= shape[a]
		}
		out := f.AddBuffer(tir.NewBuffer("Out", ir.Int32, shape, ""))
		idx := make([]tir.PrimExpr, nv)
		for a, v := range vars {
			idx[a] = v
		}
		e := randIndexExpr(rng, vars, strides, 3)
		var st tir.Stmt = tir.NewStore(out, e, idx...)
		for a := nv - 1; a >= 0; a-- {
			st = tir.Loop(vars[a], shape[a], tir.Serial, st)
		}
		f.Body = st
		g := mustRun(t, SimplifyIndices(), f)
		if err := tirtest.Equivalent(f, g, 1, int64(n)); err != nil {
			t.Fatalf("SimplifyIndices changed %s:\n%v\nbefore: %s\nafter:  %s", f.Name, err, tir.ExprString(e), body(g))
		}
		if tir.ExprString(e) != body(g) {
			changed++
		}
	}
	if changed < 100 {
		t.Errorf("only %d of 400 random index expressions simplified", changed)
	}
	for _, d := range []ir.DType{ir.Int32, ir.Int64, ir.Int8} {
		for n := 0; n < 150; n++ {
			f := tir.NewPrimFunc(fmt.Sprintf("rand_%s_%d", d, n))
			out := f.AddBuffer(tir.NewBuffer("Out", d, ir.Shape{6, 5}, ""))
			in := f.AddBuffer(tir.NewBuffer("In", d, ir.Shape{6}, ""))
			i, j := tir.NewVar("i", tir.Int32T), tir.NewVar("j", tir.Int32T)
			x := tir.NewVar("x", tir.Scalar(d))
			leaves := []tir.PrimExpr{x, tir.NewLoad(in, i), &tir.Cast{T: tir.Scalar(d), Value: j}, i, j}
			if d != ir.Int32 {
				leaves = leaves[:3]
			}
			e := randIntExpr(rng, d, leaves, 4)
			f.Body = tir.Loop(i, 6, tir.Serial, tir.Loop(j, 5, tir.Serial,
				tir.NewLet(x, &tir.Cast{T: tir.Scalar(d), Value: tir.Bin(tir.OpSub, tir.Bin(tir.OpMul, i, tir.Idx(37)), tir.Idx(100))},
					tir.NewStore(out, e, i, j))))
			g := mustRun(t, SimplifyIndices(), f)
			if err := tirtest.Equivalent(f, g, 2, int64(n)); err != nil {
				t.Fatalf("SimplifyIndices changed %s:\n%v\nbefore: %s\nafter:  %s", f.Name, err, tir.ExprString(e), body(g))
			}
		}
	}
}
