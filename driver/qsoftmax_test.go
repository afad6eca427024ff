package driver

import (
	"math/rand"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

// TestQSoftmaxDifferential: qnn.softmax compiled gives the reference
// executor's values bit for bit, along any axis, for int8 and uint8, with
// a table from QSoftmaxParams and with hostile tables (negative and huge
// entries, all zero: a zero sum gives the zero point).
func TestQSoftmaxDifferential(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(11))
	good, mult, shift, err := op.QSoftmaxParams(0.1, 1.0/256)
	if err != nil {
		t.Fatal(err)
	}
	hostile := make([]int32, 256)
	for i := range hostile {
		hostile[i] = int32(rng.Uint32())
	}
	for _, tc := range []struct {
		name  string
		dt    ir.DType
		shape ir.Shape
		axis  int64
		table []int32
		zp    int64
	}{
		{"int8 last axis", ir.Int8, ir.Shape{3, 12}, -1, good, -128},
		{"uint8 middle axis", ir.Uint8, ir.Shape{2, 7, 5}, 1, good, 0},
		{"first axis", ir.Int8, ir.Shape{9, 4}, 0, good, -100},
		{"hostile table", ir.Int8, ir.Shape{4, 33}, -1, hostile, 3},
		{"zero table", ir.Uint8, ir.Shape{2, 6}, -1, make([]int32, 256), 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := tensor.New(tc.dt, tc.shape)
			for i := 0; i < x.Len(); i++ {
				if tc.dt == ir.Uint8 {
					x.SetInt(i, int64(rng.Intn(256)))
				} else {
					x.SetInt(i, int64(rng.Intn(256)-128))
				}
			}
			tab := tensor.New(ir.Int32, ir.Shape{256})
			copy(tab.Int32s(), tc.table)
			in := graph.NewVar("x", x.Type())
			outDT := ir.Int8
			if tc.zp >= 0 && tc.dt == ir.Uint8 {
				outDT = ir.Uint8
			}
			call, err := graph.NewCall(op.QSoftmax, []graph.Expr{in, graph.NewConstant(tab)},
				ir.Attrs{"axis": tc.axis, "multiplier": mult, "shift": shift, "out_zero_point": tc.zp, "out_dtype": outDT})
			if err != nil {
				t.Fatal(err)
			}
			mod, want := refOfCall(t, in, call, x)
			l, err := targets.ParseList("c")
			if err != nil {
				t.Fatal(err)
			}
			got, _ := compileRun(t, mod, l.Host, map[string]*tensor.Tensor{"x": x})
			if !got[0].Equal(want.Flatten()[0]) {
				t.Errorf("compiled and reference differ:\n%v\n%v", got[0].Data, want.Flatten()[0].Data)
			}
		})
	}
}
