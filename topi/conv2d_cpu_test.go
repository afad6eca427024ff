package topi

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/interp"
	"github.com/kiln-dev/kiln/tir/transform"
	"github.com/kiln-dev/kiln/topi/topitest"
)

// packedW is a random OIHW weight packed with block b, as the
// alter_conv_layout pass would pack it.
func packedW(t *testing.T, rng *rand.Rand, dt ir.DType, b int64, oihw ...int64) *tensor.Tensor {
	t.Helper()
	w := topitest.Rand(rng, dt, oihw)
	p, err := ref.PackConv2DWeight(w, b)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConv2DPackedCPU checks nn.contrib_conv2d_packed (generic and tuned
// implementations) against the reference on the shapes of the real
// models' convolutions, scaled down, and on shapes that do not divide
// the tiles.
func TestConv2DPackedCPU(t *testing.T) {
	type tc struct {
		name  string
		attrs ir.Attrs
		x     []int64
		b     int64
		w     []int64 // OIHW
		dt    ir.DType
	}
	p1 := nnInts(1, 1, 1, 1)
	cases := []tc{
		{"resnet_3x3", ir.Attrs{"padding": p1}, nnInts(1, 8, 14, 14), 16, nnInts(32, 8, 3, 3), nnTF32},
		{"resnet_3x3_s2", ir.Attrs{"padding": p1, "strides": nnInts(2, 2)}, nnInts(1, 8, 15, 15), 16, nnInts(16, 8, 3, 3), nnTF32},
		{"resnet_stem_7x7", ir.Attrs{"padding": nnInts(3, 3, 3, 3), "strides": nnInts(2, 2)}, nnInts(1, 3, 37, 37), 16, nnInts(16, 3, 7, 7), nnTF32},
		{"resnet_down_1x1_s2", ir.Attrs{"strides": nnInts(2, 2)}, nnInts(1, 16, 14, 14), 16, nnInts(32, 16, 1, 1), nnTF32},
		{"pointwise_1x1", nil, nnInts(1, 24, 7, 7), 16, nnInts(64, 24, 1, 1), nnTF32},
		{"pointwise_block8", nil, nnInts(1, 16, 6, 6), 8, nnInts(24, 16, 1, 1), nnTF32},
		{"wide_row_padded_tiles", ir.Attrs{"padding": p1}, nnInts(2, 4, 5, 37), 16, nnInts(32, 4, 3, 3), nnTF32},
		{"squeeze_stem_odd", ir.Attrs{"strides": nnInts(2, 2)}, nnInts(1, 3, 23, 23), 16, nnInts(16, 3, 3, 3), nnTF32},
		{"prime_width", ir.Attrs{"padding": p1}, nnInts(1, 5, 3, 13), 8, nnInts(16, 5, 3, 3), nnTF32},
		{"asym_pad_dilation", ir.Attrs{"padding": nnInts(2, 0, 1, 3), "dilation": nnInts(2, 1)}, nnInts(1, 3, 9, 20), 8, nnInts(8, 3, 3, 2), nnTF32},
		{"batch2_ocT", ir.Attrs{"padding": p1}, nnInts(2, 3, 4, 4), 8, nnInts(64, 3, 3, 3), nnTF32},
		// Stride phases the taps read only in part (usedPhases): 2 of 3
		// per axis, and one of 2 with a dilation of 2.
		{"phases_2x2_s3", ir.Attrs{"padding": p1, "strides": nnInts(3, 3)}, nnInts(1, 4, 11, 13), 8, nnInts(8, 4, 2, 2), nnTF32},
		{"phases_dilated_s2", ir.Attrs{"padding": nnInts(2, 2, 2, 2), "strides": nnInts(2, 2), "dilation": nnInts(2, 2)}, nnInts(1, 3, 10, 9), 8, nnInts(8, 3, 3, 3), nnTF32},
		// Output channels the broadcast kernel's tile does not divide
		// (16 on AVX2): a last tile of one channel vector, by default
		// (280 = 17*16 + 8) and in the tuning space (40).
		{"channel_tail_3x3", ir.Attrs{"padding": p1}, nnInts(1, 16, 6, 7), 8, nnInts(40, 16, 3, 3), nnTF32},
		{"channel_tail_1x1_batch2", nil, nnInts(2, 72, 4, 5), 8, nnInts(280, 72, 1, 1), nnTF32},
		// Output channels padded to the weight's blocks (the
		// channels attribute): a last tile of the broadcast kernel and
		// the guarded output stage, and the columns kernel.
		{"padded_channels_1x1", ir.Attrs{"channels": int64(255)}, nnInts(1, 72, 5, 6), 16, nnInts(255, 72, 1, 1), nnTF32},
		{"padded_channels_3x3", ir.Attrs{"padding": p1, "channels": int64(13)}, nnInts(1, 4, 6, 6), 8, nnInts(13, 4, 3, 3), nnTF32},
		{"padded_channels_f64", ir.Attrs{"channels": int64(13)}, nnInts(1, 3, 4, 4), 8, nnInts(13, 3, 1, 1), nnTF64},
		// Fewer channels than a block (an image's 3) and a segmentation
		// head's 21 in blocks of 8 (padded when the input is large).
		{"padded_channels_3_3x3", ir.Attrs{"padding": p1, "channels": int64(3)}, nnInts(1, 8, 9, 10), 8, nnInts(3, 8, 3, 3), nnTF32},
		{"padded_channels_21_1x1", ir.Attrs{"channels": int64(21)}, nnInts(1, 32, 7, 9), 8, nnInts(21, 32, 1, 1), nnTF32},
		{"float64_generic", ir.Attrs{"padding": p1}, nnInts(1, 2, 5, 5), 8, nnInts(16, 2, 3, 3), nnTF64},
	}
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewSource(int64(7000 + k)))
			args := []*tensor.Tensor{topitest.Rand(rng, c.dt, c.x), packedW(t, rng, c.dt, c.b, c.w...)}
			if err := topitest.Check(topitest.Case{Op: op.Conv2DPacked, Attrs: c.attrs, Args: args}); err != nil {
				t.Fatal(err)
			}
			// The packed op computes exactly nn.conv2d on the unpacked
			// weight (without the channels that pad its last block).
			w, err := ref.UnpackConv2DWeight(args[1])
			if err != nil {
				t.Fatal(err)
			}
			if w.Shape[0] != c.w[0] {
				inner := int(c.w[1]*c.w[2]*c.w[3]) * c.dt.Size()
				w = &tensor.Tensor{DType: c.dt, Shape: c.w, Data: w.Data[:int(c.w[0])*inner]}
			}
			a1, err := op.Conv2DPacked.MakeAttrs(c.attrs)
			if err != nil {
				t.Fatal(err)
			}
			convAttrs := c.attrs.Clone()
			delete(convAttrs, "channels")
			a2, err := op.Conv2D.MakeAttrs(convAttrs)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := ref.EvalOp(op.Conv2DPacked, a1, args)
			if err != nil {
				t.Fatal(err)
			}
			want, _, err := ref.EvalOp(op.Conv2D, a2, []*tensor.Tensor{args[0], w})
			if err != nil {
				t.Fatal(err)
			}
			if err := tensor.AllClose(got[0], want[0], 0, 0); err != nil {
				t.Fatal(err)
			}
			impl := selectImpl(t, op.Conv2DPacked, c.attrs, args)
			wantImpl := "nn.contrib_conv2d_packed.cpu"
			if c.dt != nnTF32 {
				wantImpl = "nn.contrib_conv2d_packed.generic"
			}
			if want := c.w[0]; got[0].Shape[1] != want {
				t.Errorf("%d output channels, want %d", got[0].Shape[1], want)
			}
			if impl.Name != wantImpl {
				t.Errorf("selected %s, want %s", impl.Name, wantImpl)
			}
		})
	}
}

// TestDepthwiseCPU checks the tuned depthwise convolution (mobilenet's
// 3x3 stride 1 and 2) and that other grouped convolutions (a channel
// multiplier included) take the grouped implementation.
func TestDepthwiseCPU(t *testing.T) {
	p1 := nnInts(1, 1, 1, 1)
	cases := []struct {
		name  string
		attrs ir.Attrs
		x, w  []int64
		impl  string
	}{
		{"dw_3x3", ir.Attrs{"groups": int64(8), "padding": p1}, nnInts(1, 8, 12, 12), nnInts(8, 1, 3, 3), "nn.conv2d.depthwise.cpu"},
		{"dw_3x3_s2_odd", ir.Attrs{"groups": int64(5), "padding": p1, "strides": nnInts(2, 2)}, nnInts(2, 5, 9, 11), nnInts(5, 1, 3, 3), "nn.conv2d.depthwise.cpu"},
		{"dw_nopad_dil", ir.Attrs{"groups": int64(3), "dilation": nnInts(1, 2)}, nnInts(1, 3, 6, 19), nnInts(3, 1, 2, 3), "nn.conv2d.depthwise.cpu"},
		{"dw_asym_pad", ir.Attrs{"groups": int64(4), "padding": nnInts(0, 2, 1, 0)}, nnInts(1, 4, 5, 5), nnInts(4, 1, 3, 3), "nn.conv2d.depthwise.cpu"},
		{"dw_1x3_s2x3", ir.Attrs{"groups": int64(3), "padding": p1, "strides": nnInts(2, 3)}, nnInts(1, 3, 7, 14), nnInts(3, 1, 1, 3), "nn.conv2d.depthwise.cpu"},
		{"grouped_not_depthwise", ir.Attrs{"groups": int64(2), "padding": p1}, nnInts(1, 4, 5, 5), nnInts(4, 2, 3, 3), "nn.conv2d.grouped.cpu"},
		{"channel_multiplier", ir.Attrs{"groups": int64(2)}, nnInts(1, 2, 5, 5), nnInts(4, 1, 3, 3), "nn.conv2d.grouped.cpu"},
	}
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewSource(int64(8000 + k)))
			args := []*tensor.Tensor{topitest.Rand(rng, nnTF32, c.x), topitest.Rand(rng, nnTF32, c.w)}
			if err := topitest.Check(topitest.Case{Op: op.Conv2D, Attrs: c.attrs, Args: args}); err != nil {
				t.Fatal(err)
			}
			if impl := selectImpl(t, op.Conv2D, c.attrs, args); impl.Name != c.impl {
				t.Errorf("selected %s, want %s", impl.Name, c.impl)
			}
		})
	}
}

func selectImpl(t *testing.T, o *op.Op, attrs ir.Attrs, args []*tensor.Tensor) strategy.Implementation {
	t.Helper()
	impl, err := strategy.Default.Select(refCall(t, o, attrs, args, topitest.HostTarget()))
	if err != nil {
		t.Fatal(err)
	}
	return impl
}

// refCall is the call of o with attrs on args for target tg, its output
// type the reference executor's.
func refCall(t *testing.T, o *op.Op, attrs ir.Attrs, args []*tensor.Tensor, tg *targets.Target) *strategy.Call {
	t.Helper()
	full, err := o.MakeAttrs(attrs)
	if err != nil {
		t.Fatal(err)
	}
	_, outType, err := ref.EvalOp(o, full, args)
	if err != nil {
		t.Fatal(err)
	}
	ats := make([]ir.Type, len(args))
	for i, a := range args {
		ats[i] = a.Type()
	}
	return &strategy.Call{Op: o, Attrs: full, ArgTypes: ats, OutType: outType, Target: tg}
}

// TestConvCPUFusedEpilogue lowers the tuned convolutions as the anchor of
// a fused group conv -> add bias -> add residual -> relu, as LowerTE
// does, and checks that the epilogue runs in the convolution's output
// loops (the convolution result never exists as a full tensor) and that
// the result matches the reference.
func TestConvCPUFusedEpilogue(t *testing.T) {
	p1 := nnInts(1, 1, 1, 1)
	cases := []struct {
		name   string
		op     *op.Op
		attrs  ir.Attrs
		x      []int64
		w      []int64
		pack   int64
		allocs []string // allocation that must appear (the tile)
		target string   // the processor (default x86-avx512)
	}{
		{"packed_3x3", op.Conv2DPacked, ir.Attrs{"padding": p1}, nnInts(1, 4, 6, 20), nnInts(32, 4, 3, 3), 16, []string{`T.allocate((1, 8, 130), "float32", "local")`, `T.call_kernel("kiln_conv_mk_avx512_`}, ""},
		{"packed_1x1_s2", op.Conv2DPacked, ir.Attrs{"strides": nnInts(2, 2)}, nnInts(2, 8, 7, 7), nnInts(16, 8, 1, 1), 16, []string{`T.allocate((1, 8, 16), "float32", "local")`, `T.call_kernel("kiln_conv_mk_avx512_`}, ""},
		// The rows form (dwconv_rows.go, AVX-512): compact V, whole rows.
		{"depthwise", op.Conv2D, ir.Attrs{"padding": p1, "groups": int64(6)}, nnInts(1, 6, 5, 9), nnInts(6, 1, 3, 3), 0, []string{`T.allocate((1, 1, 45), "float32", "local")`, `T.call_kernel("kiln_dwrows_avx512_`}, ""},
		// Without padding too (the input is read by coordinates, not in
		// place): 3 rows of 7.
		{"depthwise_valid", op.Conv2D, ir.Attrs{"groups": int64(6)}, nnInts(1, 6, 5, 9), nnInts(6, 1, 3, 3), 0, []string{`T.allocate((1, 1, 21), "float32", "local")`, `T.call_kernel("kiln_dwrows_avx512_`}, ""},
		// The columns form without a rows kernel (AVX without FMA):
		// virtual columns of a padded tile.
		{"depthwise_columns", op.Conv2D, ir.Attrs{"padding": p1, "groups": int64(6)}, nnInts(1, 6, 5, 9), nnInts(6, 1, 3, 3), 0, []string{`T.allocate((1, 1, 53), "float32", "local")`, `T.call_kernel("kiln_conv_mk_avx_`}, "c -mcpu=sandybridge"},
		// The lanes form (dwconv_lanes.go): eight channels per tile, row
		// tiles of 10 rows (V row stride 31), a partial last column group.
		{"depthwise_lanes_s2", op.Conv2D, ir.Attrs{"padding": p1, "groups": int64(16), "strides": nnInts(2, 2)}, nnInts(1, 16, 40, 60), nnInts(16, 1, 3, 3), 0,
			[]string{`T.allocate((1, 8, 309), "float32", "local")`, `T.call_kernel("kiln_dwlanes_avx2fma_`}, "c -mcpu=haswell"},
		// On Zen 5 (AVX-512 with a fast L2) too, its AVX2 code, with
		// stride 2 for outputs wider than dwRowsStride2MaxCols; on other
		// AVX-512 processors the rows form (dwRowsFor).
		{"depthwise_lanes_s2_avx512", op.Conv2D, ir.Attrs{"padding": p1, "groups": int64(16), "strides": nnInts(2, 2)}, nnInts(1, 16, 40, 80), nnInts(16, 1, 3, 3), 0,
			[]string{`T.call_kernel("kiln_dwlanes_avx2fma_`}, "c -mcpu=znver5"},
		{"depthwise_rows_s2_wide_avx512", op.Conv2D, ir.Attrs{"padding": p1, "groups": int64(16), "strides": nnInts(2, 2)}, nnInts(1, 16, 40, 80), nnInts(16, 1, 3, 3), 0,
			[]string{`T.call_kernel("kiln_dwrows_avx512_`}, ""},
		// Narrower stride-2 outputs: the rows form, two loads and the
		// even lanes per tap.
		{"depthwise_rows_s2_avx512", op.Conv2D, ir.Attrs{"padding": p1, "groups": int64(16), "strides": nnInts(2, 2)}, nnInts(1, 16, 40, 60), nnInts(16, 1, 3, 3), 0,
			[]string{`T.call_kernel("kiln_dwrows_avx512_`}, ""},
		// AVX2 takes the rows form for column stride 1 (8 lanes).
		{"depthwise_rows_5x5_avx2", op.Conv2D, ir.Attrs{"padding": nnInts(2, 1, 2, 3), "groups": int64(16), "dilation": nnInts(1, 2)}, nnInts(1, 16, 5, 57), nnInts(16, 1, 5, 5), 0,
			[]string{`T.call_kernel("kiln_dwrows_avx2fma_`}, "c -mcpu=haswell"},
		{"depthwise_rows_avx2", op.Conv2D, ir.Attrs{"padding": p1, "groups": int64(6)}, nnInts(1, 6, 5, 9), nnInts(6, 1, 3, 3), 0, []string{`T.allocate((1, 1, 45), "float32", "local")`, `T.call_kernel("kiln_dwrows_avx2fma_`}, "c -mcpu=haswell"},
	}
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(9000 + k)))
			x := topitest.Rand(rng, nnTF32, c.x)
			w := topitest.Rand(rng, nnTF32, c.w)
			args := []*tensor.Tensor{x, w}
			if c.pack > 0 {
				pw, err := ref.PackConv2DWeight(w, c.pack)
				if err != nil {
					t.Fatal(err)
				}
				args[1] = pw
			}
			attrs, err := c.op.MakeAttrs(c.attrs)
			if err != nil {
				t.Fatal(err)
			}
			conv, outType, err := ref.EvalOp(c.op, attrs, args)
			if err != nil {
				t.Fatal(err)
			}
			ot := outType.(*ir.TensorType)
			bias := topitest.Rand(rng, nnTF32, ir.Shape{ot.Shape[1]})
			res := topitest.Rand(rng, nnTF32, ot.Shape)
			want := tensor.New(nnTF32, ot.Shape)
			plane := int(ot.Shape[2] * ot.Shape[3])
			for i := 0; i < want.Len(); i++ {
				ch := (i / plane) % int(ot.Shape[1])
				v := float32(conv[0].Float(i)) + float32(bias.Float(ch)) + float32(res.Float(i))
				want.SetFloat(i, math.Max(float64(v), 0))
			}

			// A fixed processor, so that the tiles do not depend on the
			// machine running the test.
			tname := c.target
			if tname == "" {
				tname = "x86-avx512"
			}
			tgt, err := targets.Default.Parse(tname)
			if err != nil {
				t.Fatal(err)
			}
			call := &strategy.Call{Op: c.op, Attrs: attrs, ArgTypes: []ir.Type{args[0].Type(), args[1].Type()}, OutType: outType, Target: tgt}
			impl, err := strategy.Default.Select(call)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(impl.Name, ".cpu") {
				t.Fatalf("selected %s, want a tuned cpu implementation", impl.Name)
			}
			phs := []*te.Tensor{
				te.Placeholder("x", nnTF32, args[0].Shape), te.Placeholder("w", nnTF32, args[1].Shape),
				te.Placeholder("bias", nnTF32, bias.Shape), te.Placeholder("res", nnTF32, res.Shape),
			}
			anchor, err := impl.Compute(call, phs[:2])
			if err != nil {
				t.Fatal(err)
			}
			a := anchor[0]
			add := te.Compute("add_bias", a.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
				return tir.Add(a.At(i...), phs[2].At(i[1]))
			})
			add2 := te.Compute("add_res", a.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
				return tir.Add(add.At(i...), phs[3].At(i...))
			})
			out := te.Compute("relu", a.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
				return tir.Max(add2.At(i...), tir.Float32(0))
			})
			f := lowerFused(t, impl, call, phs, out, anchor)
			text := f.String()
			for _, al := range c.allocs {
				if !strings.Contains(text, al) {
					t.Errorf("lowered function lacks %s:\n%s", al, text)
				}
			}
			if n := strings.Count(text, "T.allocate"); n > 2 {
				t.Errorf("%d allocations, want at most the pad and the tile:\n%s", n, text)
			}
			if !strings.Contains(text, "T.parallel") || !strings.Contains(text, "T.vectorized") {
				t.Errorf("want parallel and vectorized loops:\n%s", text)
			}
			p := transform.NewPipeline()
			p.VerifyEach = true
			if f, err = p.RunFunc(f); err != nil {
				t.Fatal(err)
			}
			var iargs []any
			for _, v := range []*tensor.Tensor{args[0], args[1], bias, res} {
				iargs = append(iargs, &interp.Array{DType: v.DType, Data: append([]byte(nil), v.Data...)})
			}
			got := tensor.New(nnTF32, ot.Shape)
			iargs = append(iargs, &interp.Array{DType: got.DType, Data: got.Data})
			if err := interp.Run(f, iargs, nil); err != nil {
				t.Fatal(err)
			}
			if err := tensor.AllClose(got, want, 1e-4, 1e-5); err != nil {
				t.Fatalf("%v\n%s", err, f)
			}
		})
	}
}

// TestUsedPhases checks which stride phases X' lays out: the prefix the
// taps read, or all of them when the taps skip one.
func TestUsedPhases(t *testing.T) {
	for _, c := range []struct{ s, k, d, want int64 }{
		{1, 3, 1, 1}, {2, 1, 1, 1}, {2, 3, 1, 2}, {3, 2, 1, 2}, {2, 3, 2, 1}, {3, 2, 2, 3}, {4, 3, 2, 4}, {2, 7, 1, 2},
	} {
		if got := usedPhases(c.s, c.k, c.d); got != c.want {
			t.Errorf("usedPhases(stride %d, %d taps, dilation %d) = %d, want %d", c.s, c.k, c.d, got, c.want)
		}
	}
}

// TestConvRowsOuter checks the loop order with the row tiles outside the
// channel tiles (chooseLoopOrder) on a Zen 3 target (512 KiB L2): a 1x1
// convolution of 16 channels on 96x96 (a 576 KiB input, the columns
// kernel) takes it and computes what the reference does; a long reduction
// (the broadcast kernel) and a small input do not take it.
func TestConvRowsOuter(t *testing.T) {
	tg := mcpuTarget(t, "znver3")
	plan := func(x, w ir.Shape) *convPlan {
		t.Helper()
		return packedPlan(t, "znver3", x, w, nil)
	}
	if p := plan(ir.Shape{1, 16, 96, 96}, ir.Shape{2, 16, 1, 1, 8}); !p.rowsOuter || p.bmv != 0 {
		t.Errorf("16-channel 1x1 on 96x96: rowsOuter %v, broadcast %v; want the columns kernel, rows outside", p.rowsOuter, p.bmv > 0)
	}
	if p := plan(ir.Shape{1, 64, 60, 60}, ir.Shape{4, 64, 3, 3, 16}); p.rowsOuter {
		t.Errorf("64-channel 3x3 on 60x60 (the broadcast kernel): rows outside")
	}
	if p := plan(ir.Shape{1, 16, 20, 20}, ir.Shape{2, 16, 1, 1, 8}); p.rowsOuter {
		t.Errorf("16-channel 1x1 on 20x20 (25 KiB): rows outside")
	}
	rng := rand.New(rand.NewSource(7100))
	args := []*tensor.Tensor{topitest.Rand(rng, nnTF32, nnInts(1, 16, 96, 96)), packedW(t, rng, nnTF32, 8, 16, 16, 1, 1)}
	if err := topitest.Check(topitest.Case{Op: op.Conv2DPacked, Args: args, Target: tg}); err != nil {
		t.Fatal(err)
	}
}

// packedPlan is the plan of a float32 packed convolution of an input of
// shape x with a packed weight of shape w (attrs: nil or the op's
// attributes to set) for -mcpu mcpu.
func packedPlan(t *testing.T, mcpu string, x, w ir.Shape, attrs ir.Attrs) *convPlan {
	t.Helper()
	full, err := op.Conv2DPacked.MakeAttrs(attrs)
	if err != nil {
		t.Fatal(err)
	}
	c := refCall(t, op.Conv2DPacked, full, []*tensor.Tensor{tensor.New(nnTF32, x), tensor.New(nnTF32, w)}, mcpuTarget(t, mcpu))
	p, err := planPacked(c, x, w)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestShortTileRows checks the rows per tile of short reductions with the
// columns kernel (shortTileRows) on Sapphire Rapids (48-column register
// tiles) and Haswell (24): the fewest rows of at least 96 columns where
// their vectors are as full as the default tile's; longer reductions,
// small maps and a last vector fuller by default keep the default; and
// the result matches the reference.
func TestShortTileRows(t *testing.T) {
	s2 := ir.Attrs{"strides": nnInts(2, 2)}
	for _, c := range []struct {
		name       string
		mcpu       string
		x, w       ir.Shape
		attrs      ir.Attrs
		rows, defs int64 // want, and the default rule's
	}{
		{"64_to_256_on_56", "sapphirerapids", ir.Shape{1, 64, 56, 56}, ir.Shape{16, 64, 1, 1, 16}, nil, 2, 8},
		{"128_to_512_on_28", "sapphirerapids", ir.Shape{1, 128, 28, 28}, ir.Shape{32, 128, 1, 1, 16}, nil, 4, 14},
		{"16_to_96_on_112", "sapphirerapids", ir.Shape{1, 16, 112, 112}, ir.Shape{6, 16, 1, 1, 16}, nil, 1, 4},
		{"stem_3x3_s2", "sapphirerapids", ir.Shape{1, 8, 224, 224}, ir.Shape{4, 8, 3, 3, 16}, s2, 1, 3},
		{"long_reduction", "sapphirerapids", ir.Shape{1, 256, 56, 56}, ir.Shape{4, 256, 1, 1, 16}, nil, 8, 8},
		{"14x14_last_vector", "sapphirerapids", ir.Shape{1, 40, 14, 14}, ir.Shape{15, 40, 1, 1, 16}, nil, 14, 14},
		{"13x13", "sapphirerapids", ir.Shape{1, 48, 13, 13}, ir.Shape{12, 48, 1, 1, 16}, nil, 13, 13},
		{"avx2_16_to_96_on_56", "haswell", ir.Shape{1, 16, 56, 56}, ir.Shape{12, 16, 1, 1, 8}, nil, 2, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := packedPlan(t, c.mcpu, c.x, c.w, c.attrs)
			if p.bmv != 0 {
				t.Fatalf("the broadcast kernel; want the columns kernel")
			}
			if p.rows != c.rows {
				t.Errorf("rows %d, want %d", p.rows, c.rows)
			}
			saved := p.ic
			p.ic = shortReduction + 1 // a long reduction: the default rule
			p.chooseRows()
			if p.rows != c.defs {
				t.Errorf("default rows %d, want %d", p.rows, c.defs)
			}
			p.ic = saved
		})
	}
	rng := rand.New(rand.NewSource(7200))
	args := []*tensor.Tensor{topitest.Rand(rng, nnTF32, nnInts(1, 24, 28, 28)), packedW(t, rng, nnTF32, 16, 48, 24, 1, 1)}
	if err := topitest.Check(topitest.Case{Op: op.Conv2DPacked, Args: args, Target: mcpuTarget(t, "sapphirerapids")}); err != nil {
		t.Fatal(err)
	}
}

// TestPrefetchInput checks which packed convolutions' columns kernels
// prefetch the next register tile's input (convPlan.prefetchInput): those
// of at least xPrefetchChannels input channels whose input outgrows half
// the processor's L2, and then that the convolution still computes what
// the reference does.
func TestPrefetchInput(t *testing.T) {
	for _, c := range []struct {
		name string
		mcpu string
		x, w ir.Shape
		want bool
	}{
		{"256_to_64_on_56", "sapphirerapids", ir.Shape{1, 256, 56, 56}, ir.Shape{4, 256, 1, 1, 16}, true},  // 3.2 MB, L2 2 MiB
		{"256_to_64_on_28", "sapphirerapids", ir.Shape{1, 256, 28, 28}, ir.Shape{4, 256, 1, 1, 16}, false}, // 0.8 MB
		{"16_to_96_on_112", "sapphirerapids", ir.Shape{1, 16, 112, 112}, ir.Shape{6, 16, 1, 1, 16}, false}, // few rows
		{"haswell_48_to_64_on_56", "haswell", ir.Shape{1, 48, 56, 56}, ir.Shape{8, 48, 1, 1, 8}, true},     // 0.6 MB, L2 256 KiB
		{"haswell_32_to_32_on_14", "haswell", ir.Shape{1, 32, 14, 14}, ir.Shape{4, 32, 1, 1, 8}, false},    // 25 KB
	} {
		t.Run(c.name, func(t *testing.T) {
			p := packedPlan(t, c.mcpu, c.x, c.w, nil)
			if p.bmv != 0 {
				t.Fatalf("the broadcast kernel; want the columns kernel")
			}
			if got := p.prefetchInput(te.Placeholder("x", nnTF32, c.x), c.x[1]); got != c.want {
				t.Errorf("prefetchInput %v, want %v", got, c.want)
			}
			// A padded or phase-split copy (3-D), written just before.
			if p.prefetchInput(te.Placeholder("x", nnTF32, ir.Shape{c.x[0], c.x[1], c.x[2] * c.x[3]}), c.x[1]) {
				t.Errorf("prefetchInput of a copy")
			}
		})
	}
	p := packedPlan(t, "sapphirerapids", ir.Shape{1, 256, 56, 56}, ir.Shape{4, 256, 1, 1, 16}, nil)
	if p.l2 = 0; p.prefetchInput(te.Placeholder("x", nnTF32, ir.Shape{1, 256, 56, 56}), 256) {
		t.Errorf("prefetchInput without a known L2")
	}
	// A convolution that prefetches (48 channels of 44x44: 372 KB over
	// Haswell's 256 KiB L2; 44 columns a row, so that tiles of whole
	// register tiles end inside rows) against the reference.
	rng := rand.New(rand.NewSource(7300))
	x, w := nnInts(1, 48, 44, 44), packedW(t, rng, nnTF32, 8, 16, 48, 1, 1)
	if p := packedPlan(t, "haswell", ir.Shape(x), w.Shape, nil); !p.prefetchInput(te.Placeholder("x", nnTF32, ir.Shape(x)), 48) {
		t.Fatalf("the checked convolution does not prefetch")
	}
	args := []*tensor.Tensor{topitest.Rand(rng, nnTF32, x), w}
	if err := topitest.Check(topitest.Case{Op: op.Conv2DPacked, Args: args, Target: mcpuTarget(t, "haswell")}); err != nil {
		t.Fatal(err)
	}
}

// TestWinogradCPU checks nn.contrib_conv2d_winograd (generic and CPU
// implementations) against the reference: even and odd maps (half tiles),
// padding on some sides only, both product kernels (the broadcast kernel
// from 64 input channels on AVX2), a smaller last channel tile, batch 2.
func TestWinogradCPU(t *testing.T) {
	p1 := nnInts(1, 1, 1, 1)
	for k, c := range []struct {
		name  string
		attrs ir.Attrs
		x     []int64
		b     int64
		oc    int64
	}{
		{"even", ir.Attrs{"padding": p1}, nnInts(1, 8, 8, 8), 16, 16},
		{"odd_block8", ir.Attrs{"padding": p1}, nnInts(1, 5, 7, 9), 8, 24},
		{"broadcast_batch2", ir.Attrs{"padding": p1}, nnInts(2, 64, 6, 6), 16, 32},
		{"asymmetric", ir.Attrs{"padding": nnInts(0, 2, 1, 0)}, nnInts(1, 4, 6, 5), 8, 8},
		{"valid", nil, nnInts(1, 3, 9, 10), 8, 16},
		{"channel_tail", ir.Attrs{"padding": p1}, nnInts(1, 64, 4, 4), 8, 280},
		{"float64_generic", ir.Attrs{"padding": p1}, nnInts(1, 3, 5, 4), 8, 8},
		// A row of 100 tiles is too wide for 16 channels' scratch: the
		// columns kernel's channels.
		{"wide_columns", ir.Attrs{"padding": p1}, nnInts(1, 64, 3, 200), 16, 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewSource(int64(7300 + k)))
			dt, want := nnTF32, "nn.contrib_conv2d_winograd.cpu"
			if strings.HasPrefix(c.name, "float64") {
				dt, want = nnTF64, "nn.contrib_conv2d_winograd.generic"
			}
			w := topitest.Rand(rng, dt, nnInts(c.oc, c.x[1], 3, 3))
			u, err := ref.TransformWinogradWeight(w, c.b)
			if err != nil {
				t.Fatal(err)
			}
			args := []*tensor.Tensor{topitest.Rand(rng, dt, c.x), u}
			// F(2x2, 3x3) in float32 rounds the transformed inputs (sums
			// of four inputs), weights and products: its error is a few
			// 1e-6 of the outputs' scale, not of each output. With 64
			// channels of values in [-1, 1] that scale is about 8 and the
			// largest error 1.5e-5 (the direct sums' about 1e-6); near-zero
			// outputs then exceed DefaultTolerance's 1e-5.
			tol := topitest.Tolerance{Rtol: 1e-4, Atol: 5e-5}
			if err := topitest.Check(topitest.Case{Op: op.Conv2DWinograd, Attrs: c.attrs, Args: args, Tol: tol}); err != nil {
				t.Fatal(err)
			}
			if impl := selectImpl(t, op.Conv2DWinograd, c.attrs, args); impl.Name != want {
				t.Errorf("selected %s, want %s", impl.Name, want)
			}
		})
	}
}

// TestConvPadBlock: ConvPadBlock pads an odd multiple of 8 output
// channels to 16 where the target's 16-lane broadcast kernel takes the
// convolution (squeezenet1_1's 512 -> 1000 classifier on 13x13 on
// Sapphire Rapids), not with 8 lanes (Haswell), not where the columns
// kernel keeps it (a fast L2, a short reduction), not where 16 divides the
// channels or the padding would add more than 1/32 of them.
func TestConvPadBlock(t *testing.T) {
	for _, c := range []struct {
		mcpu               string
		steps, oc, outputs int64
		want               int64
	}{
		{"sapphirerapids", 512, 1000, 169, 16},
		{"haswell", 512, 1000, 169, 0},
		{"znver5", 512, 1000, 169, 0},
		{"sapphirerapids", 256, 1000, 169, 0},
		{"sapphirerapids", 512, 1008, 169, 0},
		{"sapphirerapids", 512, 200, 169, 0},
		{"sapphirerapids", 128, 520, 49, 16},
	} {
		tg := mcpuTarget(t, c.mcpu)
		if got := ConvPadBlock(tg, c.steps, c.oc, c.outputs); got != c.want {
			t.Errorf("%s: %d steps, %d channels, %d outputs: block %d, want %d", c.mcpu, c.steps, c.oc, c.outputs, got, c.want)
		}
	}
	if got := ConvPadBlock(nil, 512, 1000, 169); got != 0 {
		t.Errorf("no target: block %d, want 0", got)
	}
}
