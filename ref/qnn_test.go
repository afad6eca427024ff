package ref

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// TestQPairBound: the pair bound of a weight is the largest sum of a pair
// of input channels' positive weights or negative magnitudes, read
// through the packed layout and less the zero point, and the reference
// executor refuses a qnn.conv2d whose kernel_pair_bound its weight
// exceeds.
func TestQPairBound(t *testing.T) {
	// [O=2, I=3, 1, 2]: input channels 0 and 1 pair, channel 2 is alone.
	w := tensor.New(ir.Int8, ir.Shape{2, 3, 1, 2})
	for i, v := range []int64{
		10, -20, // o0 c0
		30, -5, // o0 c1
		-40, 1, // o0 c2
		-64, 64, // o1 c0
		-64, 63, // o1 c1
		0, 0, // o1 c2
	} {
		w.SetInt(i, v)
	}
	for _, tc := range []struct {
		name   string
		w      *tensor.Tensor
		packed bool
		kzp    int64
		want   int64
	}{
		{"OIHW", w, false, 0, 128},
		{"OIHW4i", PackOIHW4i(w), true, 0, 128},
		// Less 1: o1 c0/c1 tap 0 is -65 - 65.
		{"zero point", w, false, 1, 130},
	} {
		got, err := QPairBound(tc.w, 3, tc.packed, tc.kzp)
		if err != nil || got != tc.want {
			t.Errorf("%s: bound %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	// A claim below the weight's bound is refused.
	x := tensor.New(ir.Uint8, ir.Shape{1, 3, 2, 2})
	in := graph.NewVar("x", x.Type())
	for _, bound := range []int64{128, 127} {
		call, err := graph.NewCall(op.QConv2D, []graph.Expr{in, graph.NewConstant(w)}, ir.Attrs{"kernel_pair_bound": bound})
		if err != nil {
			t.Fatal(err)
		}
		mod := graph.NewModule(graph.NewFunction([]*graph.Var{in}, call, nil))
		if err := graph.InferTypes(mod); err != nil {
			t.Fatal(err)
		}
		_, err = Run(mod, []*tensor.Tensor{x})
		if bound == 128 && err != nil {
			t.Errorf("bound 128: %v", err)
		}
		if bound == 127 && (err == nil || !strings.Contains(err.Error(), "kernel_pair_bound 127")) {
			t.Errorf("bound 127: got %v, want the claim refused", err)
		}
	}
}
