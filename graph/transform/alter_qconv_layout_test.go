package transform

import (
	"math/rand"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// qconvRequant is a qnn.conv2d_requantize of x with a random constant
// int8 weight of o output channels (packed OIHW4i unless plain), with
// the given extra attributes.
func qconvRequant(t *testing.T, rng *rand.Rand, x graph.Expr, w *graph.Constant, o int64, extra ir.Attrs) *graph.Call {
	t.Helper()
	bias, mult := tensor.New(ir.Int32, ir.Shape{o}), tensor.New(ir.Int32, ir.Shape{o})
	for i := int64(0); i < o; i++ {
		bias.Int32s()[i] = int32(rng.Intn(2001) - 1000)
		mult.Int32s()[i] = int32(1<<30 + rng.Intn(1<<29))
	}
	attrs := ir.Attrs{"padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(100), "shift": int64(40), "out_zero_point": int64(3), "out_dtype": ir.Uint8, "kernel_layout": "OIHW4i"}
	for k, v := range extra {
		attrs[k] = v
	}
	c, err := graph.NewCall(op.QConv2DRequantize, []graph.Expr{x, w, graph.NewConstant(bias), graph.NewConstant(mult)}, attrs)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// qweight is a random int8 weight [o, ci, k, k], packed OIHW4i.
func qweight(rng *rand.Rand, o, ci, k int64) *graph.Constant {
	w := tensor.New(ir.Int8, ir.Shape{o, ci, k, k})
	for i := 0; i < w.Len(); i++ {
		w.SetInt(i, int64(rng.Intn(256)-128))
	}
	return graph.NewConstant(ref.PackOIHW4i(w))
}

// TestAlterQConvLayout: the pass repacks the weights of the
// convolutions its choice accepts (and only those: not one of 24
// channels, which 16 would pad by a third, a grouped one, one with a
// weight zero point, a qnn.conv2d without requantization, nor anything
// when the choice says no), pads one of 120 channels to 128 and cuts its
// result back with a strided_slice, packs a shared weight once, hands the
// choice the data, OIHW4i weight and output shapes (padded), and leaves
// the reference executor's results bit for bit, with and without the
// weight sums of qnn_kernel_sums among the arguments.
func TestAlterQConvLayout(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	x := graph.NewVar("x", ir.NewTensorType(ir.Uint8, ir.Shape{1, 6, 5, 5}))
	shared := qweight(rng, 32, 6, 3)
	a := qconvRequant(t, rng, x, shared, 32, nil)
	b := qconvRequant(t, rng, a, qweight(rng, 32, 32, 1), 32, ir.Attrs{"padding": []int64{0, 0, 0, 0}, "strides": []int64{2, 2}})
	c := qconvRequant(t, rng, x, shared, 32, ir.Attrs{"out_zero_point": int64(9)})
	odd := qconvRequant(t, rng, x, qweight(rng, 24, 6, 3), 24, nil)
	wg := tensor.New(ir.Int8, ir.Shape{32, 3, 3, 3})
	grouped := qconvRequant(t, rng, x, graph.NewConstant(ref.PackOIHW4i(wg)), 32, ir.Attrs{"groups": int64(2)})
	kzp := qconvRequant(t, rng, x, qweight(rng, 32, 6, 3), 32, ir.Attrs{"kernel_zero_point": int64(1)})
	padded := qconvRequant(t, rng, x, qweight(rng, 120, 6, 3), 120, ir.Attrs{"out_zero_point": int64(0)})
	plain, err := graph.NewCall(op.QConv2D, []graph.Expr{x, qweight(rng, 32, 6, 3)}, ir.Attrs{"kernel_layout": "OIHW4i"})
	if err != nil {
		t.Fatal(err)
	}
	body := graph.NewTuple([]graph.Expr{b, c, odd, grouped, kzp, plain, padded})
	m0 := graph.NewModule(graph.NewFunction([]*graph.Var{x}, body, nil))
	if err := graph.InferTypes(m0); err != nil {
		t.Fatal(err)
	}
	sums, err := QNNKernelSums(m0)
	if err != nil {
		t.Fatal(err)
	}
	xv := tensor.New(ir.Uint8, ir.Shape{1, 6, 5, 5})
	for i := 0; i < xv.Len(); i++ {
		xv.SetInt(i, int64(rng.Intn(256)))
	}
	args := []*tensor.Tensor{xv}
	for _, m := range []*graph.Module{m0, sums} {
		want := run(t, m, args)

		none, err := AlterQConvLayout(m, func(_, _, _ ir.Shape, _ ir.Attrs) bool { return false })
		if err != nil {
			t.Fatal(err)
		}
		var seen []ir.Shape
		out, err := AlterQConvLayout(m, func(data, weight, o ir.Shape, _ ir.Attrs) bool {
			seen = append(seen, data, weight, o)
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		count := func(m *graph.Module) (n int, consts map[*graph.Constant]bool) {
			consts = map[*graph.Constant]bool{}
			graph.PostOrder(m.Main().Body, func(e graph.Expr) {
				if cl, ok := e.(*graph.Call); ok && cl.Op == op.StridedSlice {
					in := cl.Args[0].(*graph.Call)
					if w := in.Args[1].(*graph.Constant).Value.Shape; in.Attrs.Str("kernel_layout") != "OIHW4i16o" || w[0] != 8 || cl.Attrs.Ints("end")[0] != 120 {
						t.Errorf("a cut of %s with weight %v to %v channels", in.Op.Name, w, cl.Attrs.Ints("end"))
					}
				}
				if cl, ok := e.(*graph.Call); ok && cl.Attrs.Has("kernel_layout") && cl.Attrs.Str("kernel_layout") == "OIHW4i16o" {
					n++
					w := cl.Args[1].(*graph.Constant)
					consts[w] = true
					if cl.Op != op.QConv2DRequantize || len(w.Value.Shape) != 6 || w.Value.Shape[4] != 16 || w.Value.Shape[5] != 4 {
						t.Errorf("%s with weight %v in OIHW4i16o", cl.Op.Name, w.Value.Shape)
					}
				}
			})
			return n, consts
		}
		if n, _ := count(none); n != 0 {
			t.Errorf("%d convolutions rewritten though the choice said no", n)
		}
		n, consts := count(out)
		if n != 4 || len(consts) != 3 {
			t.Errorf("%d convolutions rewritten with %d weights, want 4 with 3 (one shared):\n%s", n, len(consts), text(t, out))
		}
		wantSeen := []ir.Shape{{1, 6, 5, 5}, {32, 2, 3, 3, 4}, {1, 32, 5, 5}}
		if len(seen) < 3 || !seen[0].Equal(wantSeen[0]) || !seen[1].Equal(wantSeen[1]) || !seen[2].Equal(wantSeen[2]) {
			t.Errorf("the choice saw %v first, want %v", seen, wantSeen)
		}
		sawPadded := false
		for i := 0; i+2 < len(seen); i += 3 {
			sawPadded = sawPadded || (seen[i+1].Equal(ir.Shape{128, 2, 3, 3, 4}) && seen[i+2].Equal(ir.Shape{1, 128, 5, 5}))
		}
		if !sawPadded {
			t.Errorf("the choice did not see the 120-channel convolution padded to 128: %v", seen)
		}
		sameBits(t, "after the pass", run(t, out, args), want)
	}
}
