package mcunn

import (
	"fmt"
	"strings"
	"testing"

	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/golden"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
)

// TestLowerGolden pins what the hook makes of a convolution (OIHW4i, a
// scratch buffer) and of a dense layer without a bias: the PrimFunc's TIR
// (the constants lifted into parameters, one call_extern) and the C of
// its call with the argument structs, against testdata/*.txt (rerun with
// -update).
func TestLowerGolden(t *testing.T) {
	i8 := func(shape ...int64) *tensor.Tensor {
		v := tensor.New(ir.Int8, shape)
		for i := 0; i < v.Len(); i++ {
			v.SetInt(i, int64(i%7-3))
		}
		return v
	}
	i32 := func(vals ...int32) *tensor.Tensor {
		v := tensor.New(ir.Int32, ir.Shape{int64(len(vals))})
		copy(v.Int32s(), vals)
		return v
	}
	for _, tc := range []struct {
		name string
		body func(x *graph.Var) (graph.Expr, error)
		x    ir.Shape
	}{
		{"conv", func(x *graph.Var) (graph.Expr, error) {
			return graph.NewCall(op.QConv2DRequantize, []graph.Expr{x, graph.NewConstant(i8(2, 1, 3, 3, 4)), graph.NewConstant(i32(5, -5)), graph.NewConstant(i32(1<<30, 3<<28))},
				ir.Attrs{"padding": []int64{1, 1, 1, 1}, "strides": []int64{2, 2}, "kernel_layout": "OIHW4i", "input_zero_point": int64(-3),
					"shift": int64(38), "out_zero_point": int64(-128), "out_min": int64(-128), "out_dtype": ir.Int8})
		}, ir.Shape{1, 3, 6, 6}},
		{"dense", func(x *graph.Var) (graph.Expr, error) {
			d, err := graph.NewCall(op.QDense, []graph.Expr{x, graph.NewConstant(i8(4, 5))}, ir.Attrs{"input_zero_point": int64(7)})
			if err != nil {
				return nil, err
			}
			m := tensor.New(ir.Int32, ir.Shape{})
			m.Int32s()[0] = 1 << 29
			return graph.NewCall(op.Requantize, []graph.Expr{d, graph.NewConstant(m)}, ir.Attrs{"shift": int64(35), "out_dtype": ir.Int8})
		}, ir.Shape{2, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := graph.NewVar("x", ir.NewTensorType(ir.Int8, tc.x))
			body, err := tc.body(x)
			if err != nil {
				t.Fatal(err)
			}
			fn := graph.NewFunction([]*graph.Var{x}, body, nil)
			if err := graph.InferFunction(nil, fn); err != nil {
				t.Fatal(err)
			}
			lowered, consts, pf, err := Lower("mcunn_"+tc.name, fn)
			if err != nil {
				t.Fatal(err)
			}
			if len(lowered.Params) != 1+len(consts) {
				t.Errorf("%d parameters for %d lifted constants", len(lowered.Params), len(consts))
			}
			var b strings.Builder
			if err := tir.Fprint(&b, pf); err != nil {
				t.Fatal(err)
			}
			m, err := tir.NewModule(pf)
			if err != nil {
				t.Fatal(err)
			}
			opts := cgen.HostOptions()
			opts.Includes = append(opts.Includes, `"kiln_nn.h"`)
			opts.ReplaceCallExtern = replaceCallExtern
			src, err := cgen.Generate(m, opts)
			if err != nil {
				t.Fatal(err)
			}
			var call string
			for _, l := range strings.Split(src.Code, "\n") {
				if strings.Contains(l, "kiln_nn_") && !strings.Contains(l, "#include") {
					call += strings.TrimSpace(l) + "\n"
				}
			}
			if call == "" {
				t.Fatalf("no kiln_nn call in the C:\n%s", src.Code)
			}
			golden.Check(t, tc.name+".txt", fmt.Sprintf("%s\n-- C --\n%s", b.String(), call))
		})
	}
}
