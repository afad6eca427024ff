package driver

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

// TestQConv2DDifferential: qnn.conv2d compiled gives the reference
// executor's int32 values exactly, through the CPU kernel (for each
// integer dot product the machine has: AVX-512 VNNI, AVX-VNNI, plain C)
// and through the generic compute (grouped, uint8 weights, a weight zero
// point), over strides, padding, dilation, reductions not a multiple of
// 4, channel counts not a multiple of the register block and partial
// pixel tiles.
func TestQConv2DDifferential(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(9))
	fill := func(dt ir.DType, shape ir.Shape) *tensor.Tensor {
		v := tensor.New(dt, shape)
		for i := 0; i < v.Len(); i++ {
			if dt == ir.Uint8 {
				v.SetInt(i, int64(rng.Intn(256)))
			} else {
				v.SetInt(i, int64(rng.Intn(256)-128))
			}
		}
		return v
	}
	type conv struct {
		name    string
		x, w    ir.DType
		xs, ws  ir.Shape
		attrs   ir.Attrs
		fast    bool     // the CPU kernel takes it
		requant ir.Attrs // qnn.conv2d_requantize's attributes, or nil for qnn.conv2d
	}
	cases := []conv{
		{"3x3 pad 1", ir.Uint8, ir.Int8, ir.Shape{1, 8, 9, 7}, ir.Shape{11, 8, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(128)}, true, nil},
		{"first layer stride 2", ir.Uint8, ir.Int8, ir.Shape{2, 3, 13, 13}, ir.Shape{16, 3, 7, 7}, ir.Attrs{"padding": []int64{3, 3, 2, 2}, "strides": []int64{2, 2}, "input_zero_point": int64(7)}, true, nil},
		{"large map", ir.Int8, ir.Int8, ir.Shape{1, 6, 24, 25}, ir.Shape{5, 6, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(-7)}, true,
			ir.Attrs{"out_zero_point": int64(3), "out_dtype": ir.Int8}}, // 600 pixels: the AVX2 kernel's weight widened once (qconvW16)
		{"int8 data 1x1", ir.Int8, ir.Int8, ir.Shape{1, 20, 6, 6}, ir.Shape{9, 20, 1, 1}, ir.Attrs{"input_zero_point": int64(-5)}, true, nil},
		{"dilation", ir.Uint8, ir.Int8, ir.Shape{1, 4, 10, 10}, ir.Shape{8, 4, 3, 3}, ir.Attrs{"dilation": []int64{2, 2}, "padding": []int64{2, 2, 2, 2}, "input_zero_point": int64(255)}, true, nil},
		{"packed weight, grouped", ir.Uint8, ir.Int8, ir.Shape{1, 8, 5, 5}, ir.Shape{8, 2, 3, 3}, ir.Attrs{"groups": int64(4), "input_zero_point": int64(3), "kernel_layout": "OIHW4i"}, false, nil},
		{"grouped", ir.Uint8, ir.Int8, ir.Shape{1, 8, 5, 5}, ir.Shape{8, 2, 3, 3}, ir.Attrs{"groups": int64(4), "padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(3)}, false, nil},
		{"uint8 weights with zero point", ir.Uint8, ir.Uint8, ir.Shape{1, 3, 5, 5}, ir.Shape{4, 3, 2, 2}, ir.Attrs{"input_zero_point": int64(3), "kernel_zero_point": int64(128)}, false, nil},
		{"requantized uint8", ir.Uint8, ir.Int8, ir.Shape{1, 8, 9, 7}, ir.Shape{11, 8, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(128)}, true,
			ir.Attrs{"out_zero_point": int64(7), "out_dtype": ir.Uint8}},
		{"requantized int8 relu6 per tensor", ir.Int8, ir.Int8, ir.Shape{2, 20, 6, 6}, ir.Shape{9, 20, 1, 1}, ir.Attrs{"input_zero_point": int64(-5)}, true,
			ir.Attrs{"out_zero_point": int64(-100), "out_min": int64(-100), "out_max": int64(60), "out_dtype": ir.Int8, "per_tensor": true}},
		{"depthwise 3x3 stride 2", ir.Uint8, ir.Int8, ir.Shape{1, 6, 11, 9}, ir.Shape{6, 1, 3, 3}, ir.Attrs{"groups": int64(6), "strides": []int64{2, 2}, "padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(100)}, true, nil},
		{"depthwise int8 data 5x5 dilated", ir.Int8, ir.Int8, ir.Shape{2, 4, 9, 9}, ir.Shape{4, 1, 5, 5}, ir.Attrs{"groups": int64(4), "dilation": []int64{2, 1}, "padding": []int64{4, 2, 3, 1}, "input_zero_point": int64(-20)}, true, nil},
		{"depthwise requantized int8 wide rows", ir.Int8, ir.Int8, ir.Shape{2, 3, 5, 21}, ir.Shape{3, 1, 3, 3}, ir.Attrs{"groups": int64(3), "padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(-9)}, true,
			ir.Attrs{"out_zero_point": int64(-2), "out_dtype": ir.Int8}}, // 21 columns: two blocks of eight and a requantized tail of five
		{"depthwise 9x9 plain form", ir.Uint8, ir.Int8, ir.Shape{1, 3, 12, 11}, ir.Shape{3, 1, 9, 9}, ir.Attrs{"groups": int64(3), "padding": []int64{4, 4, 4, 4}, "input_zero_point": int64(9)}, true,
			ir.Attrs{"out_zero_point": int64(5), "out_dtype": ir.Uint8}}, // 81 taps: not the row form (qdwRowsMaxTaps)
		{"depthwise requantized relu6", ir.Uint8, ir.Int8, ir.Shape{1, 5, 7, 7}, ir.Shape{5, 1, 3, 3}, ir.Attrs{"groups": int64(5), "padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(3)}, true,
			ir.Attrs{"out_zero_point": int64(0), "out_max": int64(200), "out_dtype": ir.Uint8}},
		{"requantized generic", ir.Uint8, ir.Int8, ir.Shape{1, 8, 5, 5}, ir.Shape{8, 2, 3, 3}, ir.Attrs{"groups": int64(4), "padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(3)}, false,
			ir.Attrs{"out_zero_point": int64(0), "out_dtype": ir.Uint8}},
		// The direct form (AVX2, AVX-VNNI; stride 1): rows of eight-pixel
		// tiles on maps where they leave fewer idle lanes (7x7, 5 rows of
		// 8), channels not a multiple of four and output channels not of
		// eight; tiles of two rows (8x16); 1x1 convolutions over the
		// flat plane; asymmetric padding; dilation.
		{"direct 3x3 on 7x7", ir.Uint8, ir.Int8, ir.Shape{1, 10, 7, 7}, ir.Shape{11, 10, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(77)}, true, nil},
		{"direct 1x1 flat requantized", ir.Uint8, ir.Int8, ir.Shape{2, 6, 7, 7}, ir.Shape{9, 6, 1, 1}, ir.Attrs{"input_zero_point": int64(200)}, true,
			ir.Attrs{"out_zero_point": int64(5), "out_dtype": ir.Uint8}},
		{"direct asymmetric padding int8 data", ir.Int8, ir.Int8, ir.Shape{1, 5, 7, 7}, ir.Shape{17, 5, 3, 3}, ir.Attrs{"padding": []int64{1, 2, 1, 0}, "input_zero_point": int64(-3)}, true, nil},
		{"direct pairs of rows requantized", ir.Uint8, ir.Int8, ir.Shape{1, 12, 8, 16}, ir.Shape{10, 12, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(90)}, true,
			ir.Attrs{"out_zero_point": int64(2), "out_dtype": ir.Uint8}},
		{"direct dilation 2", ir.Uint8, ir.Int8, ir.Shape{1, 8, 5, 8}, ir.Shape{8, 8, 3, 3}, ir.Attrs{"dilation": []int64{2, 2}, "padding": []int64{2, 2, 2, 2}, "input_zero_point": int64(1)}, true, nil},
		// Stride 2: the direct form reads phase planes (pairs of rows
		// under AVX2; under AVX-512 too for 14 columns).
		{"direct stride 2 requantized", ir.Uint8, ir.Int8, ir.Shape{1, 10, 16, 16}, ir.Shape{12, 10, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "strides": []int64{2, 2}, "input_zero_point": int64(61)}, true,
			ir.Attrs{"out_zero_point": int64(4), "out_dtype": ir.Uint8}},
		{"AVX-512 direct stride 2 int8 data", ir.Int8, ir.Int8, ir.Shape{1, 6, 12, 28}, ir.Shape{9, 6, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "strides": []int64{2, 2}, "input_zero_point": int64(-11)}, true, nil},
		// The AVX-512 direct form's rows of 32 pixels: two tiles a row,
		// the second of 28 pixels; three rows of one partial tile.
		{"AVX-512 direct rows of 32 requantized", ir.Uint8, ir.Int8, ir.Shape{1, 5, 2, 60}, ir.Shape{10, 5, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(33)}, true,
			ir.Attrs{"out_zero_point": int64(-9), "out_dtype": ir.Int8}},
		{"AVX-512 direct rows, partial tiles", ir.Int8, ir.Int8, ir.Shape{1, 9, 3, 30}, ir.Shape{12, 9, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(-60)}, true, nil},
		// 7-bit weights (kernel_pair_bound 128): AVX2 multiplies with
		// vpmaddubsw, at the end of its range (data 255 against pairs of
		// 64 + 64 and -64 - 64).
		{"7-bit weight 3x3", ir.Uint8, ir.Int8, ir.Shape{1, 10, 9, 7}, ir.Shape{13, 10, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(0)}, true, nil},
		{"7-bit weight int8 data requantized", ir.Int8, ir.Int8, ir.Shape{1, 6, 24, 25}, ir.Shape{5, 6, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(-128)}, true,
			ir.Attrs{"out_zero_point": int64(3), "out_dtype": ir.Int8}},
		{"7-bit weight direct requantized int8 out", ir.Uint8, ir.Int8, ir.Shape{1, 9, 7, 7}, ir.Shape{19, 9, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(12)}, true,
			ir.Attrs{"out_zero_point": int64(-4), "out_dtype": ir.Int8}},
		{"7-bit weight direct 3x1 requantized", ir.Int8, ir.Int8, ir.Shape{1, 13, 9, 11}, ir.Shape{10, 13, 3, 1}, ir.Attrs{"padding": []int64{1, 0, 1, 0}, "input_zero_point": int64(-100)}, true,
			ir.Attrs{"out_zero_point": int64(7), "out_dtype": ir.Uint8}},
		// The broadcast form (AVX-512 VNNI; qnn_conv_bcast.go): output
		// channels in the lanes, in blocks of three and two groups of
		// sixteen, on 7x7 maps (direct, stride 2 from phase planes,
		// 1x1 over the flat plane), per-tensor and per-channel.
		{"broadcast 3x3 on 7x7 requantized", ir.Uint8, ir.Int8, ir.Shape{1, 20, 7, 7}, ir.Shape{48, 20, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(77)}, true,
			ir.Attrs{"out_zero_point": int64(5), "out_dtype": ir.Uint8}},
		{"broadcast stride 2 int8 data per tensor", ir.Int8, ir.Int8, ir.Shape{2, 12, 14, 13}, ir.Shape{64, 12, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "strides": []int64{2, 2}, "input_zero_point": int64(-11)}, true,
			ir.Attrs{"out_zero_point": int64(-3), "out_dtype": ir.Int8, "per_tensor": true}},
		{"broadcast 1x1 flat requantized", ir.Uint8, ir.Int8, ir.Shape{1, 64, 7, 7}, ir.Shape{80, 64, 1, 1}, ir.Attrs{"input_zero_point": int64(130)}, true,
			ir.Attrs{"out_zero_point": int64(0), "out_max": int64(180), "out_dtype": ir.Uint8}},
		// The broadcast form on every x86 processor: 7-bit weights (AVX2's
		// vpmaddubsw), a reduction of 144 (the 256-bit form's least is 128).
		{"7-bit weight broadcast 3x3 stride 2 requantized", ir.Uint8, ir.Int8, ir.Shape{1, 16, 14, 13}, ir.Shape{32, 16, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "strides": []int64{2, 2}, "input_zero_point": int64(250)}, true,
			ir.Attrs{"out_zero_point": int64(9), "out_dtype": ir.Uint8}},
		// 120 output channels: padded to 128 for the broadcast form, the
		// result cut back (alter_qconv_layout); per-tensor multiplier.
		{"7-bit weight broadcast 120 channels padded", ir.Uint8, ir.Int8, ir.Shape{1, 16, 7, 7}, ir.Shape{120, 16, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(3)}, true,
			ir.Attrs{"out_zero_point": int64(-7), "out_dtype": ir.Int8, "per_tensor": true}},
	}
	// The cases whose kernel takes the broadcast form under AVX-512 VNNI.
	bcast512 := map[string]bool{"broadcast 3x3 on 7x7 requantized": true, "broadcast stride 2 int8 data per tensor": true, "broadcast 1x1 flat requantized": true,
		"7-bit weight broadcast 3x3 stride 2 requantized": true, "7-bit weight broadcast 120 channels padded": true}
	// Those that take the 256-bit broadcast form: with AVX-VNNI, at least
	// 32 output channels (a multiple of 16) and a reduction of 128; with
	// AVX2 alone, also 7-bit weights.
	bcastVNNI256 := map[string]bool{"broadcast 3x3 on 7x7 requantized": true, "7-bit weight broadcast 3x3 stride 2 requantized": true, "7-bit weight broadcast 120 channels padded": true}
	bcastAVX2 := map[string]bool{"7-bit weight broadcast 3x3 stride 2 requantized": true, "7-bit weight broadcast 120 channels padded": true}
	// The cases whose kernel takes the direct form under AVX-512 VNNI
	// (choose512: flat planes, rows of 32 pixels, pairs of rows of 16,
	// where they compute at most a seventh more lanes than the usual
	// form); under AVX2 and AVX-VNNI, those named direct (and maybe
	// others).
	direct512 := map[string]bool{"int8 data 1x1": true, "requantized int8 relu6 per tensor": true, "direct 1x1 flat requantized": true, "direct pairs of rows requantized": true,
		"7-bit weight direct 3x1 requantized": true, "AVX-512 direct rows of 32 requantized": true, "AVX-512 direct rows, partial tiles": true, "AVX-512 direct stride 2 int8 data": true}
	// AVX-512 VNNI, AVX-VNNI, AVX2 (vpmaddwd) and plain C.
	hosts := []string{"c", "c -mattr=-avx512f", "c -mattr=-avx512f,-avxvnni", "c -mcpu=x86-64"}
	for _, tc := range cases {
		x, w := fill(tc.x, tc.xs), fill(tc.w, tc.ws)
		w7 := strings.HasPrefix(tc.name, "7-bit")
		if w7 {
			for i := 0; i < w.Len(); i++ {
				w.SetInt(i, int64(rng.Intn(129)-64))
			}
			// Output channel 0, input channels 0 and 1 (a pair): 64 + 64
			// at tap 0, -64 - 64 at tap 1.
			khw := int(tc.ws[2] * tc.ws[3])
			w.SetInt(0, 64)
			w.SetInt(khw, 64)
			w.SetInt(1, -64)
			w.SetInt(khw+1, -64)
			for i := 0; i < x.Len(); i += 3 {
				x.Data[i] = 0x7f // the layout's 255 (int8 data is flipped)
				if tc.x == ir.Uint8 {
					x.Data[i] = 0xff
				}
			}
		}
		dw := strings.HasPrefix(tc.name, "depthwise")
		if !dw && (tc.fast || tc.attrs["kernel_layout"] == "OIHW4i") { // the layout the importer gives constant weights
			w, tc.attrs["kernel_layout"] = ref.PackOIHW4i(w), "OIHW4i"
		}
		if w7 {
			bound, err := ref.QPairBound(w, tc.xs[1], true, 0)
			if err != nil || bound != 128 {
				t.Fatalf("%s: kernel_pair_bound %d, %v; want 128", tc.name, bound, err)
			}
			tc.attrs["kernel_pair_bound"] = bound
		}
		in := graph.NewVar("x", x.Type())
		call, err := graph.NewCall(op.QConv2D, []graph.Expr{in, graph.NewConstant(w)}, tc.attrs)
		if err != nil {
			t.Fatal(err)
		}
		if tc.requant != nil {
			// qnn.conv2d_requantize: a bias and multipliers per channel
			// (or one), so that sums land across the output range.
			o := tc.ws[0]
			bias := tensor.New(ir.Int32, ir.Shape{o})
			scales := make([]float64, o)
			for i := range scales {
				bias.Int32s()[i] = int32(rng.Intn(20001) - 10000)
				scales[i] = (0.5 + rng.Float64()) / 2000
			}
			if tc.requant["per_tensor"] != nil {
				scales = scales[:1]
				delete(tc.requant, "per_tensor")
			}
			mult, shift, err := op.RequantizeParams(scales)
			if err != nil {
				t.Fatal(err)
			}
			mshape := ir.Shape{o}
			if len(mult) == 1 {
				mshape = ir.Shape{}
			}
			m := tensor.New(ir.Int32, mshape)
			for i, v := range mult {
				m.Int32s()[i] = int32(v)
			}
			attrs := tc.attrs.Clone()
			for k, v := range tc.requant {
				attrs[k] = v
			}
			attrs["shift"] = shift
			if call, err = graph.NewCall(op.QConv2DRequantize, []graph.Expr{in, graph.NewConstant(w), graph.NewConstant(bias), graph.NewConstant(m)}, attrs); err != nil {
				t.Fatal(err)
			}
		}
		mod, want := refOfCall(t, in, call, x)
		for _, h := range hosts {
			t.Run(tc.name+"/"+h, func(t *testing.T) {
				l, err := targets.ParseList(h)
				if err != nil {
					t.Fatal(err)
				}
				got, src := compileRun(t, mod, l.Host, map[string]*tensor.Tensor{"x": x})
				kernel := "kiln_qconv_"
				if dw {
					kernel = "kiln_qdwconv_"
				}
				if used := strings.Contains(src, kernel); used != tc.fast {
					t.Errorf("the CPU kernel %s used: %v, want %v", kernel, used, tc.fast)
				}
				if strings.Contains(src, "qconv_wsum") {
					t.Error("the constant weight is summed at run time (qnn_kernel_sums gives its sums)")
				}
				feats := l.Host.Processor().Features
				if tc.fast && !dw && strings.Contains(strings.Join(feats, " "), "vnni") != strings.Contains(src, "dpbusd") {
					t.Errorf("features %v, but vpdpbusd used: %v", feats, strings.Contains(src, "dpbusd"))
				}
				fs := strings.Join(feats, " ")
				if avx2 := strings.Contains(fs, "avx2") && !strings.Contains(fs, "vnni"); tc.fast && !dw && avx2 != strings.Contains(src, "_mm256_madd_epi16") {
					t.Errorf("features %v, but the AVX2 vpmaddwd kernel used: %v", feats, !avx2)
				} else if avx2 && tc.name == "large map" && !strings.Contains(src, "KILN_QW2(") {
					t.Error("the AVX2 kernel of a large map does not read the widened weight")
				} else if tc.fast && !dw && (avx2 && w7) != strings.Contains(src, "_mm256_maddubs_epi16") {
					t.Errorf("features %v, 7-bit weight %v, but vpmaddubsw used: %v", feats, w7, strings.Contains(src, "_mm256_maddubs_epi16"))
				}
				isa512 := strings.Contains(fs, "avx512vnni")
				isaAVX2 := strings.Contains(fs, "avx2") && !isa512
				direct := strings.Contains(src, "PLANE = ") && !strings.Contains(src, "broadcast tile")
				vnni256 := strings.Contains(fs, "avxvnni") && !isa512
				plainAVX2 := isaAVX2 && !vnni256
				if bc := strings.Contains(src, "qnn.conv2d broadcast tile"); bc != ((isa512 && bcast512[tc.name]) || (vnni256 && bcastVNNI256[tc.name]) || (plainAVX2 && bcastAVX2[tc.name])) {
					t.Errorf("features %v, but the broadcast form used: %v", feats, bc)
				}
				if isa512 && tc.fast && !dw && !bcast512[tc.name] && direct != direct512[tc.name] {
					t.Errorf("features %v, but the direct form used: %v", feats, direct)
				} else if !isa512 && strings.Contains(tc.name, "direct") && !strings.HasPrefix(tc.name, "AVX-512") && direct != isaAVX2 {
					t.Errorf("features %v, but the direct form used: %v", feats, direct)
				}
				// Up to 64 taps, the block form (AVX2, AVX-VNNI, AVX-512
				// VNNI) or the row form (elsewhere) sums in float32.
				rows, block := strings.Contains(src, "__builtin_convertvector"), strings.Contains(src, "qnn.conv2d, block form")
				if few := tc.ws[2]*tc.ws[3] <= 64; dw && tc.fast && (rows || block) != few {
					t.Errorf("depthwise row form used: %v, block form: %v, want one of them for up to 64 taps", rows, block)
				} else if dw && tc.fast && few && block != strings.Contains(fs, "avx2") {
					t.Errorf("features %v, but the depthwise block form used: %v", feats, block)
				}
				if !got[0].Equal(want.Flatten()[0]) {
					t.Errorf("compiled and reference differ:\n%v\n%v", got[0].Int32s()[:16], want.Flatten()[0].Int32s()[:16])
				}
			})
		}
	}
}

// TestInt8MaxPool: max pooling of uint8 and int8 (quantized models') runs
// through the CPU max pool kernel and gives the reference executor's
// values, with padding, strides, dilation and ceil mode.
func TestInt8MaxPool(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(4))
	for _, dt := range []ir.DType{ir.Uint8, ir.Int8} {
		for _, attrs := range []ir.Attrs{
			{"pool_size": []int64{3, 3}, "strides": []int64{2, 2}, "padding": []int64{1, 1, 1, 1}},
			{"pool_size": []int64{2, 2}, "strides": []int64{2, 2}},
			{"pool_size": []int64{3, 3}, "strides": []int64{2, 2}, "ceil_mode": true},
			{"pool_size": []int64{3, 2}, "dilation": []int64{2, 1}, "padding": []int64{2, 0, 1, 1}},
		} {
			x := tensor.New(dt, ir.Shape{2, 3, 13, 11})
			for i := range x.Data {
				x.Data[i] = byte(rng.Intn(256))
			}
			in := graph.NewVar("x", x.Type())
			call, err := graph.NewCall(op.MaxPool2D, []graph.Expr{in}, attrs)
			if err != nil {
				t.Fatal(err)
			}
			mod, want := refOfCall(t, in, call, x)
			got, src := compileRun(t, mod, hostTarget(t), map[string]*tensor.Tensor{"x": x})
			if !strings.Contains(src, "kiln_maxpool_") {
				t.Errorf("%s %v: the max pool kernel is not used", dt, attrs)
			}
			if !got[0].Equal(want.Flatten()[0]) {
				t.Errorf("%s %v: compiled and reference differ", dt, attrs)
			}
		}
	}
}

// TestQDenseDifferential: qnn.dense compiled gives the reference
// executor's int32 values exactly, through the CPU kernel (int8 weights,
// zero point 0) and the generic compute (a weight zero point), for uint8
// and int8 data, reductions and column counts that are not multiples of
// the vector width or of the kernel's column block.
func TestQDenseDifferential(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(10))
	for _, tc := range []struct {
		m, k, n  int64
		x, w     ir.DType
		izp, kzp int64
		fast     bool
	}{
		{1, 1280, 1000, ir.Uint8, ir.Int8, 128, 0, true},
		{3, 77, 65, ir.Int8, ir.Int8, -7, 0, true},
		{5, 8, 3, ir.Uint8, ir.Int8, 0, 0, true},
		{2, 33, 70, ir.Uint8, ir.Uint8, 10, 128, false},
	} {
		x, w := tensor.New(tc.x, ir.Shape{tc.m, tc.k}), tensor.New(tc.w, ir.Shape{tc.n, tc.k})
		for _, v := range []*tensor.Tensor{x, w} {
			for i := range v.Data {
				v.Data[i] = byte(rng.Intn(256))
			}
		}
		in := graph.NewVar("x", x.Type())
		call, err := graph.NewCall(op.QDense, []graph.Expr{in, graph.NewConstant(w)}, ir.Attrs{"input_zero_point": tc.izp, "kernel_zero_point": tc.kzp})
		if err != nil {
			t.Fatal(err)
		}
		mod, want := refOfCall(t, in, call, x)
		got, src := compileRun(t, mod, hostTarget(t), map[string]*tensor.Tensor{"x": x})
		if used := strings.Contains(src, "kiln_qdense_"); used != tc.fast {
			t.Errorf("%dx%dx%d: the CPU kernel used %v, want %v", tc.m, tc.k, tc.n, used, tc.fast)
		}
		// The constant weight's row sums come from compile time
		// (qnn_kernel_sums), not from a loop in the function.
		if strings.Contains(src, "qdense_wsum") {
			t.Errorf("%dx%dx%d: the weight is summed at run time", tc.m, tc.k, tc.n)
		}
		if !got[0].Equal(want.Flatten()[0]) {
			t.Errorf("%dx%dx%d %s x %s: compiled and reference differ", tc.m, tc.k, tc.n, tc.x, tc.w)
		}
	}
}
