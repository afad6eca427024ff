package onnx

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// TestQLinearContribOps checks ONNX Runtime's quantized operators against
// values worked out from their float definition, with constant
// parameters (integer arithmetic, qnn.requantize) and with the scales
// given at run time (float).
func TestQLinearContribOps(t *testing.T) {
	u8 := func(s ir.Shape, v ...float64) *tensor.Tensor { return nnTD(ir.Uint8, s, v...) }
	i8 := func(s ir.Shape, v ...float64) *tensor.Tensor { return nnTD(ir.Int8, s, v...) }
	f := func(v float64) *tensor.Tensor { return nnT(ir.Shape{}, v) }
	for _, tc := range []struct {
		name   string
		op     string
		attrs  map[string]*Attr
		scales []int // the inputs that are scales or zero points
		ins    []*tensor.Tensor
		want   *tensor.Tensor
	}{
		{"add broadcast", "QLinearAdd", nil, []int{1, 2, 4, 5, 6, 7},
			// (a-10)*0.5 + (b-0)*0.25 = {0.5+1, 2.5+1, 5+1} -> /0.1: {15, 35, 60} + 3
			[]*tensor.Tensor{u8(ir.Shape{3}, 11, 15, 20), f(0.5), u8(ir.Shape{}, 10), i8(ir.Shape{1}, 4), f(0.25), i8(ir.Shape{}, 0), f(0.1), u8(ir.Shape{}, 3)},
			u8(ir.Shape{3}, 18, 38, 63)},
		{"global average pool", "QLinearGlobalAveragePool", nil, []int{1, 2, 3, 4},
			// mean of (x - 4) = {1, 5}; * 0.5 / 0.25 = {2, 10}; + 1
			[]*tensor.Tensor{u8(ir.Shape{1, 2, 1, 2}, 4, 6, 8, 10), f(0.5), u8(ir.Shape{}, 4), f(0.25), u8(ir.Shape{}, 1)},
			u8(ir.Shape{1, 2, 1, 1}, 3, 11)},
		{"concat", "QLinearConcat", map[string]*Attr{"axis": nnAInt(1)}, []int{0, 1, 3, 4, 6, 7},
			// y scale 0.5 zero point 2: the first input already is; the
			// second: (v - 1) * 1 / 0.5 + 2 = {2, 6}
			[]*tensor.Tensor{f(0.5), u8(ir.Shape{}, 2), u8(ir.Shape{1, 2}, 7, 9), f(0.5), u8(ir.Shape{}, 2), u8(ir.Shape{1, 2}, 1, 3), f(1), u8(ir.Shape{}, 1)},
			u8(ir.Shape{1, 4}, 7, 9, 2, 6)},
		{"gemm transB with bias", "QGemm", map[string]*Attr{"transB": nnAInt(1)}, []int{1, 2, 4, 5, 7, 8},
			// A - 1 = [1 2]; B = [[1 1] [2 -1]]: A B^T = [3 0]; + C [1 -4]
			// = [4 -4]; * 0.5 * 0.5 / 0.25 = [4 -4]; + 100
			[]*tensor.Tensor{u8(ir.Shape{1, 2}, 2, 3), f(0.5), u8(ir.Shape{}, 1), i8(ir.Shape{2, 2}, 1, 1, 2, -1), f(0.5), i8(ir.Shape{}, 0),
				nnTD(ir.Int32, ir.Shape{2}, 1, -4), f(0.25), u8(ir.Shape{}, 100)},
			u8(ir.Shape{1, 2}, 104, 96)},
		{"softmax", "QLinearSoftmax", map[string]*Attr{"opset": nnAInt(13)}, []int{1, 2, 3, 4},
			// {0.5, 1, 0.5}: 0.274, 0.452, 0.274 of 256 = 70, 116, 70
			[]*tensor.Tensor{u8(ir.Shape{1, 3}, 1, 2, 1), f(0.5), u8(ir.Shape{}, 7), f(1.0 / 256), u8(ir.Shape{}, 0)},
			u8(ir.Shape{1, 3}, 70, 116, 70)},
		{"softmax opset 11 flattens from the axis", "QLinearSoftmax", map[string]*Attr{"opset": nnAInt(11), "axis": nnAInt(1)}, []int{1, 2, 3, 4},
			// one row of four equal values: 0.25 each, 64; y's zero point -128
			[]*tensor.Tensor{i8(ir.Shape{1, 2, 2}, 5, 5, 5, 5), f(0.5), i8(ir.Shape{}, 0), f(1.0 / 256), i8(ir.Shape{}, -128)},
			i8(ir.Shape{1, 2, 2}, -64, -64, -64, -64)},
		{"gemm float output", "QGemm", nil, []int{1, 2, 4, 5},
			[]*tensor.Tensor{u8(ir.Shape{1, 2}, 2, 3), f(0.5), u8(ir.Shape{}, 1), i8(ir.Shape{2, 1}, 1, 2), f(0.5), i8(ir.Shape{}, 0)},
			// (1*1 + 2*2) * 0.25
			nnT(ir.Shape{1, 1}, 1.25)},
	} {
		for _, constant := range []bool{true, false} {
			name := tc.name + map[bool]string{true: " integer", false: " float"}[constant]
			t.Run(name, func(t *testing.T) {
				consts := map[int]bool{}
				for _, i := range tc.scales {
					consts[i] = constant || i%3 == 2 && tc.op != "QLinearConcat" // zero points stay constant
				}
				got, err := msRun(tc.op, tc.attrs, consts, tc.ins...)
				if err != nil {
					t.Fatal(err)
				}
				if !got[0].Equal(tc.want) {
					t.Errorf("got %v %v, want %v %v", got[0].Type(), got[0].Data, tc.want.Type(), tc.want.Data)
				}
				marker := "requantize("
				if tc.op == "QLinearSoftmax" {
					marker = "qnn.softmax("
				}
				usesInt := strings.Contains(lastModule.String(), marker)
				if tc.name != "gemm float output" && usesInt != constant {
					t.Errorf("qnn.requantize used: %v\n%s", usesInt, lastModule)
				}
			})
		}
	}
}

func TestQLinearContribErrors(t *testing.T) {
	u8 := func(s ir.Shape, v ...float64) *tensor.Tensor { return nnTD(ir.Uint8, s, v...) }
	f := func(v float64) *tensor.Tensor { return nnT(ir.Shape{}, v) }
	for _, tc := range []struct {
		op   string
		ins  []*tensor.Tensor
		want string
	}{
		{"QLinearConcat", []*tensor.Tensor{f(1), u8(ir.Shape{}, 0), u8(ir.Shape{1})}, "triples"},
		{"QLinearConcat", []*tensor.Tensor{f(1), u8(ir.Shape{}, 0), nnTD(ir.Int8, ir.Shape{1}, 1), f(1), nnTD(ir.Int8, ir.Shape{}, 0)}, "has type int8"},
		{"QLinearGlobalAveragePool", []*tensor.Tensor{u8(ir.Shape{4}), f(1), u8(ir.Shape{}, 0), f(1), u8(ir.Shape{}, 0)}, "rank 3 or more"},
		{"QGemm", []*tensor.Tensor{u8(ir.Shape{1, 2, 1}), f(1), u8(ir.Shape{}, 0), u8(ir.Shape{2, 1}), f(1), u8(ir.Shape{}, 0)}, "must be matrices"},
		{"QGemm", []*tensor.Tensor{u8(ir.Shape{1, 2}), f(1), u8(ir.Shape{}, 0), u8(ir.Shape{2, 1}), f(1), u8(ir.Shape{}, 0), nnT(ir.Shape{1}, 1)}, "want int32"},
		{"QGemm", []*tensor.Tensor{u8(ir.Shape{1, 2}), f(1), u8(ir.Shape{}, 0), u8(ir.Shape{2, 1}), f(1), u8(ir.Shape{}, 0), nil, f(1)}, "without y_zero_point"},
		{"QLinearAdd", []*tensor.Tensor{u8(ir.Shape{1}), f(1), nil, u8(ir.Shape{1}), f(1), nil, f(1), nil}, "zero points are required"},
	} {
		_, err := msRun(tc.op, nil, nil, tc.ins...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.op, err, tc.want)
		}
	}
}

// TestQGemmConstantWeight: a QGemm or QLinearMatMul whose B is a constant
// 8-bit matrix computes as qnn.dense, with the values of the float
// definition.
func TestQGemmConstantWeight(t *testing.T) {
	u8 := func(s ir.Shape, v ...float64) *tensor.Tensor { return nnTD(ir.Uint8, s, v...) }
	i8 := func(s ir.Shape, v ...float64) *tensor.Tensor { return nnTD(ir.Int8, s, v...) }
	f := func(v float64) *tensor.Tensor { return nnT(ir.Shape{}, v) }
	// As "gemm transB with bias" above: [104, 96].
	got, err := msRun("QGemm", map[string]*Attr{"transB": nnAInt(1)}, map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true},
		u8(ir.Shape{1, 2}, 2, 3), f(0.5), u8(ir.Shape{}, 1), i8(ir.Shape{2, 2}, 1, 1, 2, -1), f(0.5), i8(ir.Shape{}, 0),
		nnTD(ir.Int32, ir.Shape{2}, 1, -4), f(0.25), u8(ir.Shape{}, 100))
	if err != nil {
		t.Fatal(err)
	}
	if want := u8(ir.Shape{1, 2}, 104, 96); !got[0].Equal(want) {
		t.Errorf("QGemm: got %v, want %v", got[0].Data, want.Data)
	}
	if !strings.Contains(lastModule.String(), "qnn.dense(") {
		t.Errorf("QGemm with a constant B: no qnn.dense:\n%s", lastModule)
	}
	// QLinearMatMul of a [2, 1, 2] by a constant [2, 3]: rows flattened.
	got, err = nnRun("QLinearMatMul", 10, nil, 1, map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true},
		u8(ir.Shape{2, 1, 2}, 1, 2, 3, 4), f(1), u8(ir.Shape{}, 0), i8(ir.Shape{2, 3}, 1, 0, -1, 0, 1, 1), f(1), i8(ir.Shape{}, 0), f(1), u8(ir.Shape{}, 10))
	if err != nil {
		t.Fatal(err)
	}
	// [1 2] -> [1, 2, 1]; [3 4] -> [3, 4, 1]; + 10
	if want := u8(ir.Shape{2, 1, 3}, 11, 12, 11, 13, 14, 11); !got[0].Equal(want) {
		t.Errorf("QLinearMatMul: got %v, want %v", got[0].Data, want.Data)
	}
	if !strings.Contains(lastModule.String(), "qnn.dense(") {
		t.Errorf("QLinearMatMul with a constant B: no qnn.dense:\n%s", lastModule)
	}
}
