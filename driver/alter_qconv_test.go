package driver

import (
	"math/rand"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

// TestAlterQConvLayoutTargets: the graph pass list repacks an int8
// convolution that the broadcast form takes (48 channels of 3x3 on 7x7)
// when the host and every other CPU target of the compilation have
// AVX-512 VNNI, and leaves it in OIHW4i when the host lacks it or a
// second CPU target does (its device might run the convolution, whose
// broadcast form would there be portable C).
func TestAlterQConvLayoutTargets(t *testing.T) {
	tgt := func(s string) *targets.Target { return hostTargetOf(t, s) }
	vnni, haswell := tgt("c -mcpu=icelake-server"), tgt("c -mcpu=haswell")
	rng := rand.New(rand.NewSource(2))
	w := tensor.New(ir.Int8, ir.Shape{48, 20, 3, 3})
	for i := 0; i < w.Len(); i++ {
		w.SetInt(i, int64(rng.Intn(256)-128))
	}
	bias, mult := tensor.New(ir.Int32, ir.Shape{48}), tensor.New(ir.Int32, ir.Shape{48})
	for i := range mult.Int32s() {
		mult.Int32s()[i] = 1 << 30
	}
	x := graph.NewVar("x", ir.NewTensorType(ir.Uint8, ir.Shape{1, 20, 7, 7}))
	call, err := graph.NewCall(op.QConv2DRequantize, []graph.Expr{x, graph.NewConstant(ref.PackOIHW4i(w)), graph.NewConstant(bias), graph.NewConstant(mult)},
		ir.Attrs{"padding": []int64{1, 1, 1, 1}, "kernel_layout": "OIHW4i", "shift": int64(40), "out_dtype": ir.Uint8})
	if err != nil {
		t.Fatal(err)
	}
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x}, call, nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		host *targets.Target
		tgts []*targets.Target
		want string
	}{
		{"VNNI host", vnni, nil, "OIHW4i16o"},
		{"VNNI host and device", vnni, []*targets.Target{vnni, vnni}, "OIHW4i16o"},
		{"Haswell host", haswell, nil, "OIHW4i"},
		{"a Haswell device", vnni, []*targets.Target{vnni, haswell}, "OIHW4i"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := runGraphPass(t, "alter_qconv_layout", tc.host, tc.tgts, mod)
			if got := out.Main().Body.(*graph.Call).Attrs.Str("kernel_layout"); got != tc.want {
				t.Errorf("kernel_layout %q, want %q", got, tc.want)
			}
		})
	}
}
