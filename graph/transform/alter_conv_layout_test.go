package transform

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// convWeight is a random OIHW constant.
func convWeight(rng *rand.Rand, dt ir.DType, shape ...int64) *graph.Constant {
	w := tensor.New(dt, shape)
	for i := 0; i < w.Len(); i++ {
		w.SetFloat(i, rng.Float64()*2-1)
	}
	return graph.NewConstant(w)
}

// countOps counts the calls of each op in main.
func countOps(m *graph.Module) map[*op.Op]int {
	n := map[*op.Op]int{}
	graph.PostOrder(m.Main().Body, func(e graph.Expr) {
		if c, ok := e.(*graph.Call); ok && c.Op != nil {
			n[c.Op]++
		}
	})
	return n
}

func TestAlterConvLayout(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	pad := ir.Attrs{"padding": []int64{1, 1, 1, 1}}
	cases := []struct {
		name   string
		xShape ir.Shape
		dt     ir.DType
		build  func(x *graph.Var) graph.Expr
		packed int     // nn.contrib_conv2d_packed calls after the pass
		conv   int     // nn.conv2d calls left
		wShape []int64 // shape of the first packed weight
	}{
		{"block16_with_epilogue", ir.Shape{1, 3, 6, 6}, ir.Float32, func(x *graph.Var) graph.Expr {
			c := graph.MustCall(op.Conv2D, []graph.Expr{x, convWeight(rng, ir.Float32, 32, 3, 3, 3)}, pad)
			return graph.MustCall(op.Relu, []graph.Expr{c}, nil)
		}, 1, 0, []int64{2, 3, 3, 3, 16}},
		{"block8_strided_chain", ir.Shape{2, 4, 7, 7}, ir.Float32, func(x *graph.Var) graph.Expr {
			c := graph.MustCall(op.Conv2D, []graph.Expr{x, convWeight(rng, ir.Float32, 24, 4, 1, 1)}, ir.Attrs{"strides": []int64{2, 2}})
			return graph.MustCall(op.Conv2D, []graph.Expr{c, convWeight(rng, ir.Float32, 16, 24, 3, 2)}, pad)
		}, 2, 0, []int64{3, 4, 1, 1, 8}},
		{"shared_weight_packed_once", ir.Shape{1, 16, 4, 4}, ir.Float32, func(x *graph.Var) graph.Expr {
			w := convWeight(rng, ir.Float32, 16, 16, 1, 1)
			c := graph.MustCall(op.Conv2D, []graph.Expr{x, w}, pad)
			return graph.MustCall(op.Conv2D, []graph.Expr{c, w}, pad)
		}, 2, 0, []int64{1, 16, 1, 1, 16}},
		// Output channels no block divides are padded to a multiple of
		// 8: 6 to 8, 255 (a detection head) to 256 in blocks of 16, the
		// output keeping its channels; 21 (a segmentation head) to 24,
		// 3 (an image) to 8; a single channel is left.
		{"odd_channels_padded", ir.Shape{1, 2, 5, 5}, ir.Float32, func(x *graph.Var) graph.Expr {
			return graph.MustCall(op.Conv2D, []graph.Expr{x, convWeight(rng, ir.Float32, 6, 2, 3, 3)}, nil)
		}, 1, 0, []int64{1, 2, 3, 3, 8}},
		{"padded_channels", ir.Shape{1, 2, 3, 3}, ir.Float32, func(x *graph.Var) graph.Expr {
			return graph.MustCall(op.Conv2D, []graph.Expr{x, convWeight(rng, ir.Float32, 255, 2, 1, 1)}, nil)
		}, 1, 0, []int64{16, 2, 1, 1, 16}},
		{"segmentation_head_padded", ir.Shape{1, 8, 5, 5}, ir.Float32, func(x *graph.Var) graph.Expr {
			return graph.MustCall(op.Conv2D, []graph.Expr{x, convWeight(rng, ir.Float32, 21, 8, 1, 1)}, nil)
		}, 1, 0, []int64{3, 8, 1, 1, 8}},
		{"three_channels_padded", ir.Shape{1, 8, 6, 6}, ir.Float32, func(x *graph.Var) graph.Expr {
			return graph.MustCall(op.Conv2D, []graph.Expr{x, convWeight(rng, ir.Float32, 3, 8, 3, 3)}, pad)
		}, 1, 0, []int64{1, 8, 3, 3, 8}},
		{"one_channel_stays", ir.Shape{1, 2, 5, 5}, ir.Float32, func(x *graph.Var) graph.Expr {
			return graph.MustCall(op.Conv2D, []graph.Expr{x, convWeight(rng, ir.Float32, 1, 2, 3, 3)}, nil)
		}, 0, 1, nil},
		// 3x3 stride-1 convolutions with 16 channels and more: Winograd
		// (their weight transformed, [16, OC/B, IC, B]); strided or
		// with fewer channels: packed.
		{"winograd_3x3", ir.Shape{1, 16, 6, 6}, ir.Float32, func(x *graph.Var) graph.Expr {
			return graph.MustCall(op.Conv2D, []graph.Expr{x, convWeight(rng, ir.Float32, 32, 16, 3, 3)}, pad)
		}, 0, 0, nil},
		// To fewer than half the input channels (DenseNet's 128 -> 32):
		// packed, not Winograd.
		{"channel_reducing_3x3_packed", ir.Shape{1, 64, 6, 6}, ir.Float32, func(x *graph.Var) graph.Expr {
			return graph.MustCall(op.Conv2D, []graph.Expr{x, convWeight(rng, ir.Float32, 16, 64, 3, 3)}, pad)
		}, 1, 0, []int64{1, 64, 3, 3, 16}},
		{"strided_3x3_packed", ir.Shape{1, 16, 6, 6}, ir.Float32, func(x *graph.Var) graph.Expr {
			return graph.MustCall(op.Conv2D, []graph.Expr{x, convWeight(rng, ir.Float32, 32, 16, 3, 3)}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "strides": []int64{2, 2}})
		}, 1, 0, []int64{2, 16, 3, 3, 16}},
		{"depthwise_stays", ir.Shape{1, 16, 5, 5}, ir.Float32, func(x *graph.Var) graph.Expr {
			return graph.MustCall(op.Conv2D, []graph.Expr{x, convWeight(rng, ir.Float32, 16, 1, 3, 3)}, ir.Attrs{"groups": int64(16)})
		}, 0, 1, nil},
		{"float64_stays", ir.Shape{1, 2, 5, 5}, ir.Float64, func(x *graph.Var) graph.Expr {
			return graph.MustCall(op.Conv2D, []graph.Expr{x, convWeight(rng, ir.Float64, 16, 2, 3, 3)}, nil)
		}, 0, 1, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := graph.NewVar("x", ir.NewTensorType(c.dt, c.xShape))
			m := graph.NewModule(graph.NewFunction([]*graph.Var{x}, c.build(x), nil))
			if err := graph.InferTypes(m); err != nil {
				t.Fatal(err)
			}
			out, err := AlterConvLayout(m)
			if err != nil {
				t.Fatal(err)
			}
			n := countOps(out)
			if c.name == "winograd_3x3" {
				var u ir.Shape
				graph.PostOrder(out.Main().Body, func(e graph.Expr) {
					if cl, ok := e.(*graph.Call); ok && cl.Op == op.Conv2DWinograd {
						u = cl.Args[1].(*graph.Constant).Value.Shape
					}
				})
				if n[op.Conv2DWinograd] != 1 || !u.Equal(ir.Shape{16, 2, 16, 16}) {
					t.Fatalf("%d winograd calls, weight %v; want 1 with [16 2 16 16]:\n%s", n[op.Conv2DWinograd], u, text(t, out))
				}
			}
			if n[op.Conv2DPacked] != c.packed || n[op.Conv2D] != c.conv {
				t.Fatalf("%d packed and %d conv2d calls, want %d and %d:\n%s", n[op.Conv2DPacked], n[op.Conv2D], c.packed, c.conv, text(t, out))
			}
			consts := map[*graph.Constant]bool{}
			var first ir.Shape
			graph.PostOrder(out.Main().Body, func(e graph.Expr) {
				if cl, ok := e.(*graph.Call); ok && cl.Op == op.Conv2DPacked {
					w := cl.Args[1].(*graph.Constant)
					consts[w] = true
					if first == nil {
						first = w.Value.Shape
					}
				}
			})
			if c.wShape != nil && !first.Equal(c.wShape) {
				t.Errorf("packed weight shape %v, want %v", first, c.wShape)
			}
			if c.name == "shared_weight_packed_once" && len(consts) != 1 {
				t.Errorf("%d packed constants, want 1 shared", len(consts))
			}
			args := randomArgs(t, m, 5)
			if c.name == "winograd_3x3" {
				// The transformed weight rounds G g G^T to float32: the
				// same convolution up to that rounding (relative to the
				// outputs' scale, about 3 here, not to each output), not
				// bit for bit.
				if err := tensor.AllClose(run(t, out, args)[0], run(t, m, args)[0], 1e-5, 1e-5); err != nil {
					t.Fatal(err)
				}
				return
			}
			sameBits(t, c.name, run(t, out, args), run(t, m, args))
		})
	}
}

// TestAlterConvLayoutPadBlock: ConvLayoutOptions.PadBlock, asked with
// the convolution's multiply-adds per output, output channels and
// outputs per channel, pads output channels that 16 does not divide to
// its block (the output keeping its channels, bit for bit the same
// values); a convolution that is Winograd's keeps its blocks of 8.
func TestAlterConvLayoutPadBlock(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	var asked [][3]int64
	opts := ConvLayoutOptions{PadBlock: func(steps, oc, outputs int64) int64 {
		asked = append(asked, [3]int64{steps, oc, outputs})
		return 16
	}}
	x := graph.NewVar("x", ir.NewTensorType(ir.Float32, ir.Shape{1, 16, 5, 6}))
	c := graph.MustCall(op.Conv2D, []graph.Expr{x, convWeight(rng, ir.Float32, 24, 16, 1, 1)}, nil)
	wg := graph.MustCall(op.Conv2D, []graph.Expr{c, convWeight(rng, ir.Float32, 24, 24, 3, 3)}, ir.Attrs{"padding": []int64{1, 1, 1, 1}})
	m := graph.NewModule(graph.NewFunction([]*graph.Var{x}, wg, nil))
	if err := graph.InferTypes(m); err != nil {
		t.Fatal(err)
	}
	out, err := AlterConvLayoutWith(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := [][3]int64{{16, 24, 30}}; fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Errorf("PadBlock asked %v, want %v", asked, want)
	}
	n := countOps(out)
	if n[op.Conv2DPacked] != 1 || n[op.Conv2DWinograd] != 1 {
		t.Fatalf("%d packed and %d Winograd calls, want 1 and 1:\n%s", n[op.Conv2DPacked], n[op.Conv2DWinograd], text(t, out))
	}
	graph.PostOrder(out.Main().Body, func(e graph.Expr) {
		if cl, ok := e.(*graph.Call); ok && cl.Op == op.Conv2DPacked {
			if w := cl.Args[1].(*graph.Constant).Value.Shape; !w.Equal(ir.Shape{2, 16, 1, 1, 16}) || cl.Attrs["channels"] != int64(24) {
				t.Errorf("packed weight %v, channels %v; want [2 16 1 1 16], 24", w, cl.Attrs["channels"])
			}
		}
	})
	args := randomArgs(t, m, 7)
	// The Winograd convolution rounds its transformed weight: close, not
	// bit for bit.
	if err := tensor.AllClose(run(t, out, args)[0], run(t, m, args)[0], 1e-5, 1e-5); err != nil {
		t.Fatal(err)
	}
}

// TestAlterConvLayoutInPipeline checks the pass's place in the standard
// pipeline: the packed convolution is fused with its epilogue.
func TestAlterConvLayoutInPipeline(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	x := graph.NewVar("x", ir.NewTensorType(ir.Float32, ir.Shape{1, 3, 6, 6}))
	c := graph.MustCall(op.Conv2D, []graph.Expr{x, convWeight(rng, ir.Float32, 16, 3, 3, 3)}, ir.Attrs{"padding": []int64{1, 1, 1, 1}})
	r := graph.MustCall(op.Relu, []graph.Expr{c}, nil)
	m := graph.NewModule(graph.NewFunction([]*graph.Var{x}, r, nil))
	p := NewPipeline()
	p.Verify = true
	out, err := p.Run(m)
	if err != nil {
		t.Fatal(err)
	}
	if got := primitiveNames(out); len(got) != 1 || got[0] != "fused_nn_contrib_conv2d_packed_nn_relu" {
		t.Errorf("fused %q, want one fused_nn_contrib_conv2d_packed_nn_relu", got)
	}
	args := randomArgs(t, m, 6)
	sameBits(t, "pipeline", run(t, out, args), run(t, m, args))
}

// TestPackConv2DWeightRoundTrip checks the packing helpers the pass uses,
// for float32 (a typed path) and float64 (element by element).
func TestPackConv2DWeightRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for _, dt := range []ir.DType{ir.Float32, ir.Float64} {
		w := convWeight(rng, dt, 24, 2, 3, 1).Value
		p, err := ref.PackConv2DWeight(w, 8)
		if err != nil {
			t.Fatal(err)
		}
		// Element [oc=13, ic=1, kh=2, kw=0] sits at [1, 1, 2, 0, 5].
		if got, want := p.Float(((1*2+1)*3+2)*8+5), w.Float(((13*2+1)*3+2)*1); got != want {
			t.Errorf("%s: packed element %v, want %v", dt, got, want)
		}
		back, err := ref.UnpackConv2DWeight(p)
		if err != nil {
			t.Fatal(err)
		}
		if !back.Equal(w) {
			t.Errorf("%s: unpack(pack(w)) != w", dt)
		}
		// Blocks of 16 pad the 24 channels to 32 with zeros.
		p, err = ref.PackConv2DWeight(w, 16)
		if err != nil {
			t.Fatal(err)
		}
		if want := (ir.Shape{2, 2, 3, 1, 16}); !p.Shape.Equal(want) {
			t.Fatalf("%s: packed shape %v, want %v", dt, p.Shape, want)
		}
		back, err = ref.UnpackConv2DWeight(p)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < back.Len(); i++ {
			want := 0.0
			if i < w.Len() {
				want = w.Float(i)
			}
			if back.Float(i) != want {
				t.Fatalf("%s: padded unpacked element %d = %v, want %v", dt, i, back.Float(i), want)
			}
		}
	}
}

// TestAlterConvLayoutWinogradLimit: with ConvLayoutOptions.WinogradMaxBytes
// a 3x3 stride-1 convolution stays Winograd only while its transformed
// weight (16 x 4 x OC x IC bytes) fits the limit, and its transformed
// input (16 x 4 x IC x 2x2 tiles) too unless it has at least
// winogradReuseChannels output channels or the target runs it by row
// tiles (ConvLayoutOptions.WinogradRowTiles); without a limit every one
// is Winograd.
func TestAlterConvLayoutWinogradLimit(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	pad := ir.Attrs{"padding": []int64{1, 1, 1, 1}}
	for _, c := range []struct {
		name  string
		x     ir.Shape
		oc    int64
		limit int64
		want  bool // Winograd with the limit
		rows  bool // the target runs it by row tiles
	}{
		// U 32 KiB, D 64 x 16 x 64 tiles = 64 KiB: both fit.
		{"both_fit", ir.Shape{1, 16, 16, 16}, 32, 64 << 10, true, false},
		// D 64 x 16 x 81 tiles = 81 KiB, 32 output channels: direct.
		{"input_too_big", ir.Shape{1, 16, 18, 18}, 32, 64 << 10, false, false},
		// U 64 x 128 x 16 = 128 KiB: direct.
		{"weight_too_big", ir.Shape{1, 16, 8, 8}, 128, 64 << 10, false, false},
		// D 64 x 16 x 169 tiles = 169 KiB read by 128 output channels,
		// U 128 KiB: Winograd; by 120 (U 120 KiB): direct.
		{"input_reused", ir.Shape{1, 16, 26, 26}, 128, 128 << 10, true, false},
		{"input_not_reused_enough", ir.Shape{1, 16, 26, 26}, 120, 128 << 10, false, false},
		// By row tiles the transformed input is never whole: only U
		// counts (32 KiB), not D's 81 KiB.
		{"input_by_row_tiles", ir.Shape{1, 16, 18, 18}, 32, 64 << 10, true, true},
		{"weight_too_big_by_row_tiles", ir.Shape{1, 16, 8, 8}, 128, 64 << 10, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := graph.NewVar("x", ir.NewTensorType(ir.Float32, c.x))
			m := graph.NewModule(graph.NewFunction([]*graph.Var{x},
				graph.MustCall(op.Conv2D, []graph.Expr{x, convWeight(rng, ir.Float32, c.oc, c.x[1], 3, 3)}, pad), nil))
			if err := graph.InferTypes(m); err != nil {
				t.Fatal(err)
			}
			for _, lim := range []int64{c.limit, 0} {
				opts := ConvLayoutOptions{WinogradMaxBytes: lim}
				if c.rows {
					opts.WinogradRowTiles = func(ic, oc, block int64) bool {
						if ic != c.x[1] || oc != c.oc || block != 16 {
							t.Errorf("WinogradRowTiles(%d, %d, %d), want (%d, %d, 16)", ic, oc, block, c.x[1], c.oc)
						}
						return true
					}
				}
				out, err := AlterConvLayoutWith(m, opts)
				if err != nil {
					t.Fatal(err)
				}
				want := c.want || lim == 0
				n := countOps(out)
				if got := n[op.Conv2DWinograd] == 1; got != want || n[op.Conv2DWinograd]+n[op.Conv2DPacked] != 1 {
					t.Errorf("limit %d: %d Winograd, %d packed; want Winograd %v", lim, n[op.Conv2DWinograd], n[op.Conv2DPacked], want)
				}
			}
		})
	}
}
