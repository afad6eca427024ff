package op

import (
	"math"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

func TestRequantizeRel(t *testing.T) {
	i32 := func(s ...int64) ir.Type { return ir.NewTensorType(ir.Int32, s) }
	for _, tc := range []struct {
		name  string
		args  []ir.Type
		attrs ir.Attrs
		want  string // result type, or an error's text
	}{
		{"per channel", []ir.Type{i32(1, 4, 2, 2), i32(4, 1, 1)}, ir.Attrs{"shift": int64(31), "out_dtype": ir.Uint8}, "Tensor[(1, 4, 2, 2), uint8]"},
		{"scalar", []ir.Type{i32(3), i32()}, ir.Attrs{"shift": int64(1), "out_dtype": ir.Int8, "out_zero_point": int64(-128)}, "Tensor[(3,), int8]"},
		{"float x", []ir.Type{ir.NewTensorType(ir.Float32, ir.Shape{3}), i32()}, ir.Attrs{"shift": int64(1), "out_dtype": ir.Int8}, "must be int32"},
		{"wrong broadcast", []ir.Type{i32(1, 4, 2, 2), i32(4)}, ir.Attrs{"shift": int64(1), "out_dtype": ir.Int8}, "does not broadcast"},
		{"multiplier wider than x", []ir.Type{i32(4), i32(2, 4)}, ir.Attrs{"shift": int64(1), "out_dtype": ir.Int8}, "does not broadcast"},
		{"int32 out", []ir.Type{i32(4), i32()}, ir.Attrs{"shift": int64(1), "out_dtype": ir.Int32}, "want int8 or uint8"},
		{"shift 0", []ir.Type{i32(4), i32()}, ir.Attrs{"shift": int64(0), "out_dtype": ir.Int8}, "shift 0"},
		{"shift 63", []ir.Type{i32(4), i32()}, ir.Attrs{"shift": int64(63), "out_dtype": ir.Int8}, "shift 63"},
		{"zero point out of range", []ir.Type{i32(4), i32()}, ir.Attrs{"shift": int64(3), "out_dtype": ir.Uint8, "out_zero_point": int64(-1)}, "outside [0, 255]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs, err := Requantize.MakeAttrs(tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Requantize.Infer(tc.args, attrs)
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v, want %q", err, tc.want)
				}
				return
			}
			if got.String() != tc.want {
				t.Errorf("type %s, want %s", got, tc.want)
			}
		})
	}
}

func TestRequantizeParams(t *testing.T) {
	mult, shift, err := RequantizeParams([]float64{0.5, 0.25, 1e-9})
	if err != nil {
		t.Fatal(err)
	}
	// 0.5 = 2^-1: the largest multiplier is 2^30 at shift 31.
	if shift != 31 || mult[0] != 1<<30 || mult[1] != 1<<29 || mult[2] != 2 {
		t.Errorf("multipliers %v shift %d", mult, shift)
	}
	mult, shift, _ = RequantizeParams([]float64{1e-30})
	if shift != 62 || mult[0] != 0 {
		t.Errorf("a tiny scale: multipliers %v shift %d, want 0 at 62", mult, shift)
	}
	mult, shift, _ = RequantizeParams([]float64{math.Nextafter(1, 0)})
	if shift != 31 || mult[0] != math.MaxInt32 {
		t.Errorf("a scale just below 1: multipliers %v shift %d", mult, shift)
	}
	for _, bad := range [][]float64{nil, {0}, {-1}, {math.Inf(1)}, {math.NaN()}, {1 << 30}} {
		if _, _, err := RequantizeParams(bad); err == nil {
			t.Errorf("scales %v: no error", bad)
		}
	}
	if _, _, err := RequantizeParams([]float64{1<<30 - 1}); err != nil {
		t.Errorf("scale 2^30-1: %v", err)
	}
}

func TestRequantizeValue(t *testing.T) {
	for _, tc := range []struct {
		x, m, shift, zp, lo, hi, want int64
	}{
		{3, 1, 1, 0, -128, 127, 2},    // 1.5 -> 2
		{5, 1, 1, 0, -128, 127, 2},    // 2.5 -> 2 (half to even)
		{-3, 1, 1, 0, -128, 127, -2},  // -1.5 -> -2
		{-5, 1, 1, 0, -128, 127, -2},  // -2.5 -> -2
		{7, 1, 2, 0, -128, 127, 2},    // 1.75 -> 2
		{-7, 1, 2, 0, -128, 127, -2},  // -1.75 -> -2
		{-5, 1, 2, 0, -128, 127, -1},  // -1.25 -> -1
		{1000, 1, 1, 10, 0, 255, 255}, // saturates
		{-1000, 1, 1, 10, 0, 255, 0},
		{math.MaxInt32, math.MaxInt32, 62, 0, -128, 127, 1}, // (2^31-1)^2 / 2^62, just below 1
		{math.MinInt32, math.MaxInt32, 31, 0, -128, 127, -128},
	} {
		if got := RequantizeValue(tc.x, tc.m, tc.shift, tc.zp, tc.lo, tc.hi); got != tc.want {
			t.Errorf("RequantizeValue(%d, %d, %d, %d) = %d, want %d", tc.x, tc.m, tc.shift, tc.zp, got, tc.want)
		}
	}
}

func TestQConv2DRel(t *testing.T) {
	tt := func(dt ir.DType, s ...int64) ir.Type { return ir.NewTensorType(dt, s) }
	for _, tc := range []struct {
		name  string
		args  []ir.Type
		attrs ir.Attrs
		want  string
	}{
		{"uint8 x int8", []ir.Type{tt(ir.Uint8, 1, 3, 8, 8), tt(ir.Int8, 4, 3, 3, 3)}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(255)}, "Tensor[(1, 4, 8, 8), int32]"},
		{"int8 x uint8 strided", []ir.Type{tt(ir.Int8, 1, 2, 9, 9), tt(ir.Uint8, 6, 1, 3, 3)}, ir.Attrs{"strides": []int64{2, 2}, "groups": int64(2), "input_zero_point": int64(-128), "kernel_zero_point": int64(255)}, "Tensor[(1, 6, 4, 4), int32]"},
		{"float data", []ir.Type{tt(ir.Float32, 1, 3, 8, 8), tt(ir.Int8, 4, 3, 3, 3)}, nil, "data type float32"},
		{"int32 weight", []ir.Type{tt(ir.Uint8, 1, 3, 8, 8), tt(ir.Int32, 4, 3, 3, 3)}, nil, "weight type int32"},
		{"input zero point out of uint8", []ir.Type{tt(ir.Uint8, 1, 3, 8, 8), tt(ir.Int8, 4, 3, 3, 3)}, ir.Attrs{"input_zero_point": int64(-1)}, "input_zero_point -1"},
		{"kernel zero point out of int8", []ir.Type{tt(ir.Uint8, 1, 3, 8, 8), tt(ir.Int8, 4, 3, 3, 3)}, ir.Attrs{"kernel_zero_point": int64(128)}, "kernel_zero_point 128"},
		{"channels", []ir.Type{tt(ir.Uint8, 1, 3, 8, 8), tt(ir.Int8, 4, 2, 3, 3)}, nil, "input channels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs, err := QConv2D.MakeAttrs(tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := QConv2D.Infer(tc.args, attrs)
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v, want %q", err, tc.want)
				}
				return
			}
			if got.String() != tc.want {
				t.Errorf("type %s, want %s", got, tc.want)
			}
		})
	}
}

func TestQConv2DRequantizeRel(t *testing.T) {
	tt := func(dt ir.DType, s ...int64) ir.Type { return ir.NewTensorType(dt, s) }
	x, w := tt(ir.Uint8, 1, 6, 8, 8), tt(ir.Int8, 4, 2, 3, 3, 4) // 6 channels packed in 2 words
	base := ir.Attrs{"padding": []int64{1, 1, 1, 1}, "kernel_layout": "OIHW4i", "shift": int64(31), "out_dtype": ir.Uint8}
	for _, tc := range []struct {
		name string
		args []ir.Type
		set  ir.Attrs
		want string
	}{
		{"per channel", []ir.Type{x, w, tt(ir.Int32, 4), tt(ir.Int32, 4)}, nil, "Tensor[(1, 4, 8, 8), uint8]"},
		{"per tensor int8", []ir.Type{x, w, tt(ir.Int32, 4), tt(ir.Int32)}, ir.Attrs{"out_dtype": ir.Int8, "out_zero_point": int64(-3)}, "Tensor[(1, 4, 8, 8), int8]"},
		{"bias length", []ir.Type{x, w, tt(ir.Int32, 3), tt(ir.Int32)}, nil, "bias"},
		{"bias type", []ir.Type{x, w, tt(ir.Float32, 4), tt(ir.Int32)}, nil, "bias"},
		{"multiplier shape", []ir.Type{x, w, tt(ir.Int32, 4), tt(ir.Int32, 4, 1, 1)}, nil, "multiplier"},
		{"packed channels", []ir.Type{x, tt(ir.Int8, 4, 1, 3, 3, 4), tt(ir.Int32, 4), tt(ir.Int32)}, nil, "groups of 4 input channels"},
		{"layout", []ir.Type{x, w, tt(ir.Int32, 4), tt(ir.Int32)}, ir.Attrs{"kernel_layout": "NHWC"}, `kernel_layout "NHWC"`},
		{"shift", []ir.Type{x, w, tt(ir.Int32, 4), tt(ir.Int32)}, ir.Attrs{"shift": int64(0)}, "shift 0"},
		// OIHW4i16o: 32 channels in two groups of sixteen; kernel sums
		// one per channel (not per group).
		{"OIHW4i16o", []ir.Type{x, tt(ir.Int8, 2, 2, 3, 3, 16, 4), tt(ir.Int32, 32), tt(ir.Int32, 32), tt(ir.Int32, 32)}, ir.Attrs{"kernel_layout": "OIHW4i16o"}, "Tensor[(1, 32, 8, 8), uint8]"},
		{"OIHW4i16o sums per group", []ir.Type{x, tt(ir.Int8, 2, 2, 3, 3, 16, 4), tt(ir.Int32, 32), tt(ir.Int32, 32), tt(ir.Int32, 2)}, ir.Attrs{"kernel_layout": "OIHW4i16o"}, "kernel sums"},
		{"OIHW4i16o block", []ir.Type{x, tt(ir.Int8, 4, 2, 3, 3, 8, 4), tt(ir.Int32, 32), tt(ir.Int32, 32)}, ir.Attrs{"kernel_layout": "OIHW4i16o"}, "[O/16, ceil(I/4), KH, KW, 16, 4]"},
		{"OIHW4i16o words", []ir.Type{x, tt(ir.Int8, 2, 1, 3, 3, 16, 4), tt(ir.Int32, 32), tt(ir.Int32, 32)}, ir.Attrs{"kernel_layout": "OIHW4i16o"}, "groups of 4 input channels"},
		{"OIHW4i16o grouped", []ir.Type{tt(ir.Uint8, 1, 8, 8, 8), tt(ir.Int8, 2, 1, 3, 3, 16, 4), tt(ir.Int32, 32), tt(ir.Int32, 32)}, ir.Attrs{"kernel_layout": "OIHW4i16o", "groups": int64(2)}, "groups 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			given := base.Clone()
			for k, v := range tc.set {
				given[k] = v
			}
			attrs, err := QConv2DRequantize.MakeAttrs(given)
			if err != nil {
				t.Fatal(err)
			}
			got, err := QConv2DRequantize.Infer(tc.args, attrs)
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v, want %q", err, tc.want)
				}
				return
			}
			if got.String() != tc.want {
				t.Errorf("type %s, want %s", got, tc.want)
			}
		})
	}
}

func TestQDenseRel(t *testing.T) {
	tt := func(dt ir.DType, s ...int64) ir.Type { return ir.NewTensorType(dt, s) }
	for _, tc := range []struct {
		args  []ir.Type
		attrs ir.Attrs
		want  string
	}{
		{[]ir.Type{tt(ir.Uint8, 3, 8), tt(ir.Int8, 5, 8)}, ir.Attrs{"input_zero_point": int64(128)}, "Tensor[(3, 5), int32]"},
		{[]ir.Type{tt(ir.Int8, 3, 8), tt(ir.Uint8, 5, 8)}, ir.Attrs{"input_zero_point": int64(-1), "kernel_zero_point": int64(255)}, "Tensor[(3, 5), int32]"},
		{[]ir.Type{tt(ir.Uint8, 3, 8), tt(ir.Int8, 5, 7)}, nil, "reduction"},
		{[]ir.Type{tt(ir.Uint8, 2, 3, 8), tt(ir.Int8, 5, 8)}, nil, "want a matrix"},
		{[]ir.Type{tt(ir.Int32, 3, 8), tt(ir.Int8, 5, 8)}, nil, "data type int32"},
		{[]ir.Type{tt(ir.Uint8, 3, 8), tt(ir.Int8, 5, 8)}, ir.Attrs{"input_zero_point": int64(256)}, "input_zero_point 256"},
		{[]ir.Type{tt(ir.Uint8, 3, 8), tt(ir.Int8, 5, 8)}, ir.Attrs{"kernel_zero_point": int64(128)}, "kernel_zero_point 128"},
	} {
		attrs, err := QDense.MakeAttrs(tc.attrs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := QDense.Infer(tc.args, attrs)
		if err != nil {
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
			}
			continue
		}
		if got.String() != tc.want {
			t.Errorf("%v: type %s, want %s", tc.args, got, tc.want)
		}
	}
}

func TestQSoftmaxRow(t *testing.T) {
	table, mult, shift, err := QSoftmaxParams(1, 1.0/256)
	if err != nil {
		t.Fatal(err)
	}
	if table[0] != 1<<24 || mult != 1<<31-1 && mult != 256<<shift {
		t.Fatalf("table[0] %d, multiplier %d shift %d", table[0], mult, shift)
	}
	for _, tc := range []struct {
		x, want []int64
	}{
		{[]int64{5, 5}, []int64{0, 0}},              // 0.5 each: 128 - 128
		{[]int64{10, 0}, []int64{127, -128}},        // 0.99995 -> 256, clamped; 4.5e-5 -> 0
		{[]int64{-1, 0, 1}, []int64{-105, -65, 42}}, // 0.090, 0.245, 0.665 of 256: 23, 63, 170
	} {
		out := make([]int64, len(tc.x))
		QSoftmaxRow(tc.x, table, mult, shift, -128, -128, 127, out)
		for i := range out {
			if out[i] != tc.want[i] {
				t.Errorf("softmax of %v: %v, want %v", tc.x, out, tc.want)
				break
			}
		}
	}
	if _, _, _, err := QSoftmaxParams(0, 1); err == nil {
		t.Error("a zero input scale was accepted")
	}
	if _, _, _, err := QSoftmaxParams(1, 1e-12); err == nil {
		t.Error("an output scale without a 31-bit inverse was accepted")
	}
}
