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
// when the host and every other CPU target of the compilation take it:
// AVX-512 VNNI, AVX-VNNI, and AVX2 where the weight's pairs are bounded
// (7-bit weights, kernel_pair_bound 128). It leaves the weight in OIHW4i
// when the host or a second CPU target does not (its device might run
// the convolution, whose broadcast form would there be portable C): AVX2
// with 8-bit weights, a reduction below the 256-bit form's least (a 1x1
// kernel of 20 channels).
func TestAlterQConvLayoutTargets(t *testing.T) {
	tgt := func(s string) *targets.Target { return hostTargetOf(t, s) }
	vnni, avxvnni, haswell := tgt("c -mcpu=icelake-server"), tgt("c -mcpu=alderlake"), tgt("c -mcpu=haswell")
	rng := rand.New(rand.NewSource(2))
	// conv is the module of one convolution of a k x k weight with
	// values in [-r, r), its pairs' bound recorded when bound.
	conv := func(k int64, r int, bound bool) *graph.Module {
		w := tensor.New(ir.Int8, ir.Shape{48, 20, k, k})
		for i := 0; i < w.Len(); i++ {
			w.SetInt(i, int64(rng.Intn(2*r)-r))
		}
		bias, mult := tensor.New(ir.Int32, ir.Shape{48}), tensor.New(ir.Int32, ir.Shape{48})
		for i := range mult.Int32s() {
			mult.Int32s()[i] = 1 << 30
		}
		attrs := ir.Attrs{"padding": []int64{(k - 1) / 2, (k - 1) / 2, (k - 1) / 2, (k - 1) / 2}, "kernel_layout": "OIHW4i", "shift": int64(40), "out_dtype": ir.Uint8}
		if bound {
			attrs["kernel_pair_bound"] = int64(2 * r)
		}
		x := graph.NewVar("x", ir.NewTensorType(ir.Uint8, ir.Shape{1, 20, 7, 7}))
		call, err := graph.NewCall(op.QConv2DRequantize, []graph.Expr{x, graph.NewConstant(ref.PackOIHW4i(w)), graph.NewConstant(bias), graph.NewConstant(mult)}, attrs)
		if err != nil {
			t.Fatal(err)
		}
		return oneCallModule(t, x, call)
	}
	q8, q7, q7x1 := conv(3, 128, false), conv(3, 64, true), conv(1, 64, true)
	for _, tc := range []struct {
		name string
		host *targets.Target
		tgts []*targets.Target
		mod  *graph.Module
		want string
	}{
		{"VNNI host", vnni, nil, q8, "OIHW4i16o"},
		{"VNNI host and device", vnni, []*targets.Target{vnni, vnni}, q8, "OIHW4i16o"},
		{"AVX-VNNI host", avxvnni, nil, q8, "OIHW4i16o"},
		{"AVX-VNNI host, 1x1", avxvnni, nil, q7x1, "OIHW4i"},
		{"Haswell host", haswell, nil, q8, "OIHW4i"},
		{"Haswell host, 7-bit weights", haswell, nil, q7, "OIHW4i16o"},
		{"a Haswell device", vnni, []*targets.Target{vnni, haswell}, q8, "OIHW4i"},
		{"a Haswell device, 7-bit weights", vnni, []*targets.Target{vnni, haswell}, q7, "OIHW4i16o"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := runGraphPass(t, "alter_qconv_layout", tc.host, tc.tgts, tc.mod)
			if got := out.Main().Body.(*graph.Call).Attrs.Str("kernel_layout"); got != tc.want {
				t.Errorf("kernel_layout %q, want %q", got, tc.want)
			}
		})
	}
}
