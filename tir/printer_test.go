package tir_test

import (
	"github.com/kiln-dev/kiln/internal/golden"
	"testing"

	"github.com/kiln-dev/kiln/ir"

	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/tirtest"
)

func TestPrintGolden(t *testing.T) {
	for _, ex := range tirtest.Examples {
		t.Run(ex.Name, func(t *testing.T) {
			f := ex.Build()
			got := f.String()
			golden.Check(t, ex.Name+".tir", got)
			if again := ex.Build().String(); again != got {
				t.Errorf("printing is not deterministic:\n%s\nvs\n%s", got, again)
			}
			if err := tir.Verify(f); err != nil {
				t.Errorf("example does not verify: %v", err)
			}
		})
	}
}

// TestPrintConstructs covers syntax the examples do not: scalar and handle
// parameters, strides and scopes, view buffers sharing a data variable,
// loop annotations and non-zero minimums, attribute statements, int64 and
// unsigned constants, parenthesization and name clashes.
func TestPrintConstructs(t *testing.T) {
	f := tir.NewPrimFunc("misc")
	a := f.AddBuffer(&tir.Buffer{Name: "A", DType: ir.Float16, Shape: ir.Shape{2, 3}, Strides: []int64{4, 1},
		Data: tir.NewVar("A", tir.HandleOf(ir.Float16)), Scope: "vanilla.sram"})
	n := f.AddScalar("n", tir.Int64T)
	p := f.AddScalar("p", tir.HandleOf(ir.Invalid))
	flat := &tir.Buffer{Name: "A", DType: ir.Float16, Shape: ir.Shape{8}, Data: a.Data, Scope: "vanilla.sram"}
	i := tir.NewVar("i", tir.Int64T)
	k := tir.NewVar("k", tir.Int32T)
	i32 := tir.NewVar("n", tir.Int32T) // clashes with the parameter n
	loop := tir.NewFor(i, tir.Int64(1), tir.Sub(n, tir.Int64(1)), tir.Serial,
		tir.NewStore(flat, tir.NewCast(tir.Scalar(ir.Float16), tir.Bin(tir.OpMul, tir.Bin(tir.OpAdd, i, tir.Int64(2)), tir.Bin(tir.OpSub, n, tir.Bin(tir.OpSub, i, tir.Int64(1))))), tir.NewCast(tir.Int32T, i)))
	loop.Annotations = ir.Attrs{"pragma_unroll_explicit": int64(0), "note": "x"}
	f.Body = tir.Seq(
		&tir.AttrStmt{Key: "pragma_import_c", Value: tir.Str("vanilla.h"), Body: loop},
		tir.Loop(k, 3, tir.Unrolled, tir.Loop(i32, 2, tir.Serial,
			tir.NewStore(a, tir.NewLoad(a, i32, k), i32, k))),
		tir.Eval(tir.CallExternOf(tir.Int32T, "vanilla_sync", p, tir.IntConst(ir.Uint8, 255), tir.Bool(true),
			tir.NewNot(tir.Bin(tir.OpOr, tir.Bin(tir.OpAnd, tir.Bool(true), tir.Bool(false)), tir.Bool(true))),
			tir.Bin(tir.OpFloorDiv, tir.Float32(1), tir.Float32(-2)), tir.Bin(tir.OpMod, tir.Float32(1), tir.Float32(3)),
			tir.Bin(tir.OpDiv, tir.Float32(1), tir.Bin(tir.OpDiv, tir.Float32(2), tir.Float32(3))),
			tir.Bin(tir.OpSub, tir.Idx(1), tir.Idx(-2)))),
		&tir.SeqStmt{},
	)
	if err := tir.Verify(f); err != nil {
		t.Fatalf("misc does not verify: %v", err)
	}
	golden.Check(t, "misc.tir", f.String())
}
