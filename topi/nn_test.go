package topi

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/interp"
	"github.com/kiln-dev/kiln/tir/transform"
	"github.com/kiln-dev/kiln/topi/topitest"
)

// nnArg describes one argument of an nn test case: a random tensor of
// dtype and shape, or a fixed tensor.
type nnArg struct {
	dt    ir.DType
	shape ir.Shape
	fixed *tensor.Tensor
	// positive makes random float values strictly positive (variances).
	positive bool
}

func nnA(dt ir.DType, s ...int64) nnArg { return nnArg{dt: dt, shape: s} }

func nnPos(dt ir.DType, s ...int64) nnArg { return nnArg{dt: dt, shape: s, positive: true} }

func nnFixed(t *tensor.Tensor) nnArg { return nnArg{fixed: t} }

// nnCase is one differential check of an nn operator.
type nnCase struct {
	name  string
	op    *op.Op
	attrs ir.Attrs
	args  []nnArg
}

func (c nnCase) tensors(rng *rand.Rand) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(c.args))
	for i, a := range c.args {
		switch {
		case a.fixed != nil:
			out[i] = a.fixed
		case a.positive:
			t := tensor.New(a.dt, a.shape)
			for k := 0; k < t.Len(); k++ {
				t.SetFloat(k, 0.1+rng.Float64()*2)
			}
			out[i] = t
		default:
			out[i] = topitest.Rand(rng, a.dt, a.shape)
		}
	}
	return out
}

func runNNCases(t *testing.T, cases []nnCase) {
	t.Helper()
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewSource(int64(1000 + k)))
			err := topitest.Check(topitest.Case{Op: c.op, Attrs: c.attrs, Args: c.tensors(rng)})
			if err != nil {
				t.Fatalf("%s %v: %v", c.op.Name, c.attrs, err)
			}
		})
	}
}

const (
	nnTF16 = ir.Float16
	nnTF32 = ir.Float32
	nnTF64 = ir.Float64
	nnTI8  = ir.Int8
	nnTI32 = ir.Int32
	nnTI64 = ir.Int64
	nnTU8  = ir.Uint8
)

func nnInts(v ...int64) []int64 { return v }

func nnAttrsCeil() ir.Attrs {
	return ir.Attrs{"pool_size": nnInts(2, 2), "strides": nnInts(2, 2), "ceil_mode": true}
}

func TestNNConv(t *testing.T) {
	runNNCases(t, []nnCase{
		{"conv2d_basic", op.Conv2D, nil, []nnArg{nnA(nnTF32, 1, 2, 5, 5), nnA(nnTF32, 3, 2, 3, 3)}},
		{"conv2d_pad_stride", op.Conv2D, ir.Attrs{"padding": nnInts(1, 1, 1, 1), "strides": nnInts(2, 2)}, []nnArg{nnA(nnTF32, 2, 3, 6, 5), nnA(nnTF32, 4, 3, 3, 3)}},
		{"conv2d_asym_pad", op.Conv2D, ir.Attrs{"padding": nnInts(1, 0, 2, 1), "strides": nnInts(2, 1)}, []nnArg{nnA(nnTF32, 1, 1, 7, 5), nnA(nnTF32, 2, 1, 3, 2)}},
		{"conv2d_dilation", op.Conv2D, ir.Attrs{"dilation": nnInts(2, 1), "padding": nnInts(1, 1)}, []nnArg{nnA(nnTF32, 1, 2, 7, 6), nnA(nnTF32, 2, 2, 3, 3)}},
		{"conv2d_groups", op.Conv2D, ir.Attrs{"groups": int64(2), "padding": nnInts(1, 1)}, []nnArg{nnA(nnTF32, 1, 4, 5, 4), nnA(nnTF32, 6, 2, 3, 3)}},
		{"conv2d_groups4_stride_dil", op.Conv2D, ir.Attrs{"groups": int64(4), "padding": nnInts(2, 1, 1, 2), "strides": nnInts(2, 2), "dilation": nnInts(1, 2)}, []nnArg{nnA(nnTF32, 2, 8, 11, 9), nnA(nnTF32, 12, 2, 3, 3)}},
		{"conv2d_groups_wide", op.Conv2D, ir.Attrs{"groups": int64(2), "padding": nnInts(1, 1, 1, 1)}, []nnArg{nnA(nnTF32, 1, 16, 9, 37), nnA(nnTF32, 32, 8, 3, 3)}},
		{"conv2d_oc6_1x1", op.Conv2D, nil, []nnArg{nnA(nnTF32, 1, 5, 6, 7), nnA(nnTF32, 6, 5, 1, 1)}},
		{"conv2d_depthwise", op.Conv2D, ir.Attrs{"groups": int64(3)}, []nnArg{nnA(nnTF32, 2, 3, 4, 4), nnA(nnTF32, 3, 1, 2, 2)}},
		{"conv2d_f64", op.Conv2D, ir.Attrs{"padding": nnInts(1, 1)}, []nnArg{nnA(nnTF64, 1, 2, 4, 4), nnA(nnTF64, 2, 2, 3, 3)}},
		{"conv2d_f16", op.Conv2D, ir.Attrs{"padding": nnInts(1, 1)}, []nnArg{nnA(nnTF16, 1, 2, 4, 4), nnA(nnTF16, 2, 2, 3, 3)}},
		{"conv2d_bf16", op.Conv2D, ir.Attrs{"strides": nnInts(2, 1)}, []nnArg{nnA(ir.BFloat16, 1, 2, 4, 3), nnA(ir.BFloat16, 2, 2, 2, 2)}},
		{"conv2d_i8_wrap", op.Conv2D, nil, []nnArg{nnA(nnTI8, 1, 3, 4, 4), nnA(nnTI8, 2, 3, 3, 3)}},
		{"conv2d_i32", op.Conv2D, ir.Attrs{"padding": nnInts(1, 1), "strides": nnInts(2, 2)}, []nnArg{nnA(nnTI32, 1, 2, 5, 5), nnA(nnTI32, 2, 2, 3, 3)}},
		{"conv2d_u8", op.Conv2D, nil, []nnArg{nnA(nnTU8, 1, 2, 3, 3), nnA(nnTU8, 1, 2, 2, 2)}},
		{"conv1d", op.Conv1D, ir.Attrs{"padding": nnInts(2, 1), "strides": nnInts(2), "dilation": nnInts(2)}, []nnArg{nnA(nnTF32, 2, 2, 9), nnA(nnTF32, 3, 2, 3)}},
		{"conv1d_groups_i64", op.Conv1D, ir.Attrs{"groups": int64(2)}, []nnArg{nnA(nnTI64, 1, 4, 6), nnA(nnTI64, 2, 2, 3)}},
		{"conv3d", op.Conv3D, ir.Attrs{"padding": nnInts(1, 0, 1, 1, 0, 0), "strides": nnInts(1, 2, 1)}, []nnArg{nnA(nnTF32, 1, 2, 3, 4, 4), nnA(nnTF32, 2, 2, 2, 2, 3)}},
		{"conv3d_groups_dil", op.Conv3D, ir.Attrs{"groups": int64(2), "dilation": nnInts(1, 1, 2)}, []nnArg{nnA(nnTF64, 1, 2, 3, 3, 5), nnA(nnTF64, 2, 1, 2, 2, 2)}},
	})
}

func TestNNConvTranspose(t *testing.T) {
	runNNCases(t, []nnCase{
		{"conv2d_t_basic", op.Conv2DTranspose, nil, []nnArg{nnA(nnTF32, 1, 2, 3, 3), nnA(nnTF32, 2, 3, 3, 3)}},
		{"conv2d_t_stride_pad", op.Conv2DTranspose, ir.Attrs{"strides": nnInts(2, 2), "padding": nnInts(1, 1), "output_padding": nnInts(1, 0)}, []nnArg{nnA(nnTF32, 1, 2, 3, 4), nnA(nnTF32, 2, 2, 3, 3)}},
		{"conv2d_t_groups_dil", op.Conv2DTranspose, ir.Attrs{"groups": int64(2), "dilation": nnInts(2, 1), "strides": nnInts(1, 3)}, []nnArg{nnA(nnTF32, 2, 4, 3, 2), nnA(nnTF32, 4, 2, 2, 2)}},
		{"conv2d_t_asym_f64", op.Conv2DTranspose, ir.Attrs{"strides": nnInts(2, 2), "padding": nnInts(0, 1, 1, 0)}, []nnArg{nnA(nnTF64, 1, 1, 3, 3), nnA(nnTF64, 1, 2, 3, 2)}},
		{"conv2d_t_f16", op.Conv2DTranspose, ir.Attrs{"strides": nnInts(2, 2)}, []nnArg{nnA(nnTF16, 1, 2, 2, 2), nnA(nnTF16, 2, 1, 3, 3)}},
		{"conv2d_t_i32", op.Conv2DTranspose, ir.Attrs{"strides": nnInts(2, 1)}, []nnArg{nnA(nnTI32, 1, 2, 2, 3), nnA(nnTI32, 2, 2, 2, 2)}},
		{"conv1d_t", op.Conv1DTranspose, ir.Attrs{"strides": nnInts(3), "padding": nnInts(1, 2), "output_padding": nnInts(2)}, []nnArg{nnA(nnTF32, 2, 2, 4), nnA(nnTF32, 2, 3, 3)}},
		{"conv3d_t", op.Conv3DTranspose, ir.Attrs{"strides": nnInts(2, 1, 2), "padding": nnInts(1, 0, 0, 0, 0, 1)}, []nnArg{nnA(nnTF32, 1, 2, 2, 2, 3), nnA(nnTF32, 2, 2, 2, 2, 2)}},
	})
}

func TestNNPool(t *testing.T) {
	runNNCases(t, []nnCase{
		{"max2d", op.MaxPool2D, ir.Attrs{"pool_size": nnInts(2, 2), "strides": nnInts(2, 2)}, []nnArg{nnA(nnTF32, 1, 2, 4, 5)}},
		{"max2d_pad_ceil", op.MaxPool2D, ir.Attrs{"pool_size": nnInts(3, 3), "strides": nnInts(2, 2), "padding": nnInts(1, 1), "ceil_mode": true}, []nnArg{nnA(nnTF32, 1, 2, 6, 5)}},
		{"max2d_f32_dilation_asym", op.MaxPool2D, ir.Attrs{"pool_size": nnInts(3, 2), "strides": nnInts(2, 3), "dilation": nnInts(2, 1), "padding": nnInts(1, 0, 2, 1)}, []nnArg{nnA(nnTF32, 2, 3, 9, 11)}},
		{"max2d_f32_s1_pad", op.MaxPool2D, ir.Attrs{"pool_size": nnInts(3, 3), "padding": nnInts(1, 1, 1, 1)}, []nnArg{nnA(nnTF32, 1, 2, 5, 7)}},
		{"max2d_dilation", op.MaxPool2D, ir.Attrs{"pool_size": nnInts(2, 2), "dilation": nnInts(2, 1), "padding": nnInts(1, 0, 0, 1)}, []nnArg{nnA(nnTF64, 2, 1, 5, 5)}},
		{"max2d_f16", op.MaxPool2D, ir.Attrs{"pool_size": nnInts(2, 3), "padding": nnInts(1, 1)}, []nnArg{nnA(nnTF16, 1, 2, 3, 4)}},
		{"max2d_i8", op.MaxPool2D, ir.Attrs{"pool_size": nnInts(2, 2), "padding": nnInts(1, 1)}, []nnArg{nnA(nnTI8, 1, 2, 3, 3)}},
		{"max2d_u8", op.MaxPool2D, ir.Attrs{"pool_size": nnInts(2, 2)}, []nnArg{nnA(nnTU8, 1, 1, 3, 4)}},
		{"max1d", op.MaxPool1D, ir.Attrs{"pool_size": nnInts(3), "strides": nnInts(2), "padding": nnInts(1), "ceil_mode": true}, []nnArg{nnA(nnTF32, 2, 2, 8)}},
		{"max3d", op.MaxPool3D, ir.Attrs{"pool_size": nnInts(2, 2, 2), "strides": nnInts(1, 2, 2), "padding": nnInts(0, 1, 0, 1, 0, 1)}, []nnArg{nnA(nnTF32, 1, 1, 3, 4, 4)}},
		{"avg2d", op.AvgPool2D, ir.Attrs{"pool_size": nnInts(2, 2), "strides": nnInts(2, 2)}, []nnArg{nnA(nnTF32, 1, 2, 4, 4)}},
		{"avg2d_pad_excl", op.AvgPool2D, ir.Attrs{"pool_size": nnInts(3, 3), "strides": nnInts(2, 2), "padding": nnInts(1, 1)}, []nnArg{nnA(nnTF32, 1, 2, 5, 6)}},
		{"avg2d_pad_incl", op.AvgPool2D, ir.Attrs{"pool_size": nnInts(3, 3), "strides": nnInts(2, 2), "padding": nnInts(1, 1), "count_include_pad": true}, []nnArg{nnA(nnTF32, 1, 2, 5, 6)}},
		{"avg2d_ceil_incl", op.AvgPool2D, ir.Attrs{"pool_size": nnInts(3, 2), "strides": nnInts(2, 2), "padding": nnInts(1, 0, 1, 1), "ceil_mode": true, "count_include_pad": true}, []nnArg{nnA(nnTF64, 1, 1, 6, 5)}},
		{"avg2d_ceil_excl", op.AvgPool2D, ir.Attrs{"pool_size": nnInts(3, 2), "strides": nnInts(2, 2), "padding": nnInts(1, 0, 1, 1), "ceil_mode": true}, []nnArg{nnA(nnTF32, 1, 1, 6, 5)}},
		{"avg2d_dil", op.AvgPool2D, ir.Attrs{"pool_size": nnInts(2, 2), "dilation": nnInts(2, 2), "padding": nnInts(1, 1), "count_include_pad": true}, []nnArg{nnA(nnTF32, 1, 1, 5, 5)}},
		{"avg2d_f16", op.AvgPool2D, ir.Attrs{"pool_size": nnInts(2, 2), "padding": nnInts(1, 1)}, []nnArg{nnA(nnTF16, 1, 2, 3, 3)}},
		{"avg2d_i32", op.AvgPool2D, ir.Attrs{"pool_size": nnInts(2, 2), "padding": nnInts(1, 1)}, []nnArg{nnA(nnTI32, 1, 2, 3, 3)}},
		{"avg2d_bf16_ceil", op.AvgPool2D, nnAttrsCeil(), []nnArg{nnA(ir.BFloat16, 1, 1, 5, 5)}},
		{"avg1d", op.AvgPool1D, ir.Attrs{"pool_size": nnInts(3), "strides": nnInts(2), "padding": nnInts(2, 1)}, []nnArg{nnA(nnTF32, 1, 2, 7)}},
		{"avg3d", op.AvgPool3D, ir.Attrs{"pool_size": nnInts(2, 2, 2), "padding": nnInts(1, 1, 1), "strides": nnInts(2, 2, 2), "count_include_pad": true}, []nnArg{nnA(nnTF32, 1, 1, 3, 3, 3)}},
		{"global_avg", op.GlobalAvgPool2D, nil, []nnArg{nnA(nnTF32, 2, 3, 4, 5)}},
		{"global_avg_f16", op.GlobalAvgPool2D, nil, []nnArg{nnA(nnTF16, 1, 2, 3, 3)}},
		{"global_avg_i32", op.GlobalAvgPool2D, nil, []nnArg{nnA(nnTI32, 1, 2, 3, 3)}},
		{"global_max", op.GlobalMaxPool2D, nil, []nnArg{nnA(nnTF64, 2, 3, 4, 5)}},
		{"global_max_i8", op.GlobalMaxPool2D, nil, []nnArg{nnA(nnTI8, 1, 3, 2, 2)}},
	})
}

func TestNNPoolArgmax(t *testing.T) {
	// Ties exercise the first-maximum rule.
	ties := tensor.FromFloat32s(ir.Shape{1, 1, 3, 4}, []float32{1, 3, 3, 0, 2, 3, 1, 3, 0, 0, 3, 3})
	runNNCases(t, []nnCase{
		{"argmax2d", op.MaxPoolWithArgmax, ir.Attrs{"pool_size": nnInts(2, 2), "strides": nnInts(2, 2)}, []nnArg{nnA(nnTF32, 2, 2, 4, 4)}},
		{"argmax2d_pad_order1", op.MaxPoolWithArgmax, ir.Attrs{"pool_size": nnInts(3, 2), "padding": nnInts(1, 1), "storage_order": int64(1)}, []nnArg{nnA(nnTF32, 1, 2, 3, 4)}},
		{"argmax2d_ties", op.MaxPoolWithArgmax, ir.Attrs{"pool_size": nnInts(2, 2)}, []nnArg{nnFixed(ties)}},
		{"argmax2d_ties_order1", op.MaxPoolWithArgmax, ir.Attrs{"pool_size": nnInts(2, 3), "storage_order": int64(1)}, []nnArg{nnFixed(ties)}},
		{"argmax1d_ceil", op.MaxPoolWithArgmax, ir.Attrs{"pool_size": nnInts(2), "strides": nnInts(2), "ceil_mode": true}, []nnArg{nnA(nnTF64, 1, 2, 5)}},
		{"argmax3d_order1_dil", op.MaxPoolWithArgmax, ir.Attrs{"pool_size": nnInts(2, 2, 2), "dilation": nnInts(1, 2, 1), "storage_order": int64(1)}, []nnArg{nnA(nnTF32, 1, 1, 3, 4, 3)}},
		{"argmax2d_i32", op.MaxPoolWithArgmax, ir.Attrs{"pool_size": nnInts(2, 2)}, []nnArg{nnA(nnTI32, 1, 1, 3, 3)}},
	})
}

func TestNNMaxUnpool(t *testing.T) {
	x := tensor.FromFloat32s(ir.Shape{1, 1, 2, 2}, []float32{1, 2, 3, 4})
	idx := tensor.FromInt64s(ir.Shape{1, 1, 2, 2}, []int64{5, 2, 8, 15})
	dup := tensor.FromInt64s(ir.Shape{1, 1, 2, 2}, []int64{0, 0, 7, 7})
	i32idx := tensor.New(ir.Int32, ir.Shape{1, 2, 2})
	for k, v := range []int64{0, 3, 1, 4} {
		i32idx.SetInt(k, v)
	}
	x3 := tensor.FromFloat32s(ir.Shape{1, 2, 2}, []float32{-1, 5, 6, 7})
	runNNCases(t, []nnCase{
		{"unpool", op.MaxUnpool, ir.Attrs{"output_shape": nnInts(1, 1, 4, 4)}, []nnArg{nnFixed(x), nnFixed(idx)}},
		{"unpool_dup", op.MaxUnpool, ir.Attrs{"output_shape": nnInts(1, 1, 3, 3)}, []nnArg{nnFixed(x), nnFixed(dup)}},
		{"unpool_index_shape", op.MaxUnpool, ir.Attrs{"output_shape": nnInts(1, 1, 5, 6), "index_shape": nnInts(1, 1, 4, 4)}, []nnArg{nnFixed(x), nnFixed(idx)}},
		{"unpool_1d_i32", op.MaxUnpool, ir.Attrs{"output_shape": nnInts(1, 2, 3)}, []nnArg{nnFixed(x3), nnFixed(i32idx)}},
	})
}

func TestNNNorm(t *testing.T) {
	runNNCases(t, []nnCase{
		{"bias_add", op.BiasAdd, nil, []nnArg{nnA(nnTF32, 2, 3, 4), nnA(nnTF32, 3)}},
		{"bias_add_neg_axis", op.BiasAdd, ir.Attrs{"axis": int64(-1)}, []nnArg{nnA(nnTF32, 2, 5), nnA(nnTF32, 5)}},
		{"bias_add_1d", op.BiasAdd, ir.Attrs{"axis": int64(0)}, []nnArg{nnA(nnTF64, 4), nnA(nnTF64, 4)}},
		{"bias_add_f16", op.BiasAdd, nil, []nnArg{nnA(nnTF16, 2, 3, 2), nnA(nnTF16, 3)}},
		{"bias_add_i8", op.BiasAdd, nil, []nnArg{nnA(nnTI8, 2, 3), nnA(nnTI8, 3)}},
		{"bias_add_u8", op.BiasAdd, nil, []nnArg{nnA(nnTU8, 2, 3), nnA(nnTU8, 3)}},
		{"batch_norm", op.BatchNorm, nil, []nnArg{nnA(nnTF32, 2, 3, 2, 2), nnA(nnTF32, 3), nnA(nnTF32, 3), nnA(nnTF32, 3), nnPos(nnTF32, 3)}},
		{"batch_norm_axis_eps", op.BatchNorm, ir.Attrs{"axis": int64(-1), "epsilon": 1e-3}, []nnArg{nnA(nnTF64, 2, 4), nnA(nnTF64, 4), nnA(nnTF64, 4), nnA(nnTF64, 4), nnPos(nnTF64, 4)}},
		{"batch_norm_f16", op.BatchNorm, nil, []nnArg{nnA(nnTF16, 1, 2, 3), nnA(nnTF16, 2), nnA(nnTF16, 2), nnA(nnTF16, 2), nnPos(nnTF16, 2)}},
		{"instance_norm", op.InstanceNorm, nil, []nnArg{nnA(nnTF32, 2, 3, 4, 3), nnA(nnTF32, 3), nnA(nnTF32, 3)}},
		{"instance_norm_1d_eps", op.InstanceNorm, ir.Attrs{"epsilon": 0.1}, []nnArg{nnA(nnTF64, 1, 2, 5), nnA(nnTF64, 2), nnA(nnTF64, 2)}},
		{"instance_norm_3d_f16", op.InstanceNorm, nil, []nnArg{nnA(nnTF16, 1, 2, 2, 2, 3), nnA(nnTF16, 2), nnA(nnTF16, 2)}},
		{"layer_norm_last", op.LayerNorm, nil, []nnArg{nnA(nnTF32, 3, 6), nnA(nnTF32, 6), nnA(nnTF32, 6)}},
		{"layer_norm_axis1_bcast", op.LayerNorm, ir.Attrs{"axis": int64(1)}, []nnArg{nnA(nnTF32, 2, 3, 4), nnA(nnTF32, 1, 4), nnA(nnTF32, 3, 1)}},
		{"layer_norm_axis0", op.LayerNorm, ir.Attrs{"axis": int64(0), "epsilon": 1e-2}, []nnArg{nnA(nnTF64, 2, 3), nnA(nnTF64, 2, 3), nnA(nnTF64, 3)}},
		{"layer_norm_1d_f16", op.LayerNorm, nil, []nnArg{nnA(nnTF16, 8), nnA(nnTF16, 8), nnA(nnTF16, 1)}},
		{"layer_norm_bf16", op.LayerNorm, nil, []nnArg{nnA(ir.BFloat16, 2, 4), nnA(ir.BFloat16, 4), nnA(ir.BFloat16, 4)}},
		{"layer_norm_neg2", op.LayerNorm, ir.Attrs{"axis": int64(-2)}, []nnArg{nnA(nnTF32, 2, 2, 3, 2), nnA(nnTF32, 3, 2), nnA(nnTF32, 2)}},
		{"lrn", op.LRN, ir.Attrs{"size": int64(3)}, []nnArg{nnA(nnTF32, 1, 5, 2, 2)}},
		{"lrn_even_axis", op.LRN, ir.Attrs{"size": int64(4), "axis": int64(-1), "alpha": 0.5, "beta": 0.6, "bias": 2.0}, []nnArg{nnA(nnTF64, 2, 6)}},
		{"lrn_f16", op.LRN, ir.Attrs{"size": int64(2)}, []nnArg{nnA(nnTF16, 1, 3, 2)}},
	})
}

// TestNNScheduleFusedConsumer schedules convolutions and dense as anchors
// of a fused group whose output is an elementwise consumer (relu), as
// LowerTE does, and checks the result against the reference followed by
// relu.
func TestNNScheduleFusedConsumer(t *testing.T) {
	cases := []nnCase{
		{"conv2d_relu", op.Conv2D, ir.Attrs{"padding": nnInts(1, 1), "strides": nnInts(2, 2)}, []nnArg{nnA(nnTF32, 1, 3, 5, 5), nnA(nnTF32, 4, 3, 3, 3)}},
		{"conv2d_f16_relu", op.Conv2D, ir.Attrs{"padding": nnInts(1, 1)}, []nnArg{nnA(nnTF16, 1, 2, 3, 3), nnA(nnTF16, 2, 2, 3, 3)}},
		{"dense_relu", op.Dense, nil, []nnArg{nnA(nnTF32, 3, 5), nnA(nnTF32, 4, 5)}},
		{"matmul_relu", op.MatMul, nil, []nnArg{nnA(nnTF64, 2, 3, 5), nnA(nnTF64, 5, 2)}},
		{"max_pool_relu", op.MaxPool2D, ir.Attrs{"pool_size": nnInts(2, 2)}, []nnArg{nnA(nnTF32, 1, 2, 3, 3)}},
	}
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(500 + k)))
			args := c.tensors(rng)
			attrs, err := c.op.MakeAttrs(c.attrs)
			if err != nil {
				t.Fatal(err)
			}
			want, outType, err := ref.EvalOp(c.op, attrs, args)
			if err != nil {
				t.Fatal(err)
			}
			relu := want[0]
			for i := 0; i < relu.Len(); i++ {
				relu.SetFloat(i, math.Max(relu.Float(i), 0))
			}
			argTypes := make([]ir.Type, len(args))
			phs := make([]*te.Tensor, len(args))
			for i, a := range args {
				argTypes[i] = a.Type()
				phs[i] = te.Placeholder(fmt.Sprintf("arg%d", i), a.DType, a.Shape)
			}
			call := &strategy.Call{Op: c.op, Attrs: attrs, ArgTypes: argTypes, OutType: outType, Target: topitest.HostTarget()}
			impl, err := strategy.Default.Select(call)
			if err != nil {
				t.Fatal(err)
			}
			anchor, err := impl.Compute(call, phs)
			if err != nil {
				t.Fatal(err)
			}
			a := anchor[0]
			out := te.Compute("relu", a.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
				return tir.Max(a.At(i...), tir.Const(tir.Scalar(a.DType), 0))
			})
			f := lowerFused(t, impl, call, phs, out, anchor)
			p := transform.NewPipeline()
			p.VerifyEach = true
			if f, err = p.RunFunc(f); err != nil {
				t.Fatal(err)
			}
			var iargs []any
			for _, x := range args {
				iargs = append(iargs, &interp.Array{DType: x.DType, Data: append([]byte(nil), x.Data...)})
			}
			got := tensor.New(out.DType, out.Shape)
			iargs = append(iargs, &interp.Array{DType: got.DType, Data: got.Data})
			if err := interp.Run(f, iargs, nil); err != nil {
				t.Fatal(err)
			}
			if err := tensor.AllClose(got, relu, 1e-4, 1e-5); err != nil {
				t.Fatalf("%v\n%s", err, f)
			}
		})
	}
}
