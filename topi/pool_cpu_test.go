package topi

import (
	"math"
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/topi/topitest"
)

// TestPoolCPU checks the row-wise pooling schedule against the reference
// (topitest.Check runs the generic implementation too) on the pools of
// squeezenet and resnet (scaled down) and on padded, ceil-mode, dilated
// and -inf-holding inputs. (NaN is left out: the reference lets a NaN lose
// every comparison while the generated code propagates it, for the generic
// schedule as well.)
func TestPoolCPU(t *testing.T) {
	negInf := tensor.FromFloat32s(ir.Shape{1, 1, 3, 4}, []float32{1, float32(math.Inf(-1)), 3, 4, -1, -2, -3, -4, 5, 6, 7, float32(math.Inf(-1))})
	runNNCases(t, []nnCase{
		{"squeezenet_max", op.MaxPool2D, ir.Attrs{"pool_size": nnInts(3, 3), "strides": nnInts(2, 2), "ceil_mode": true}, []nnArg{nnA(nnTF32, 1, 3, 13, 13)}},
		{"resnet_max_pad", op.MaxPool2D, ir.Attrs{"pool_size": nnInts(3, 3), "strides": nnInts(2, 2), "padding": nnInts(1, 1)}, []nnArg{nnA(nnTF32, 1, 4, 16, 16)}},
		{"max_batch2", op.MaxPool2D, ir.Attrs{"pool_size": nnInts(2, 2), "strides": nnInts(2, 2)}, []nnArg{nnA(nnTF32, 2, 3, 6, 34)}},
		{"max_dilation", op.MaxPool2D, ir.Attrs{"pool_size": nnInts(2, 2), "dilation": nnInts(2, 1), "padding": nnInts(1, 0, 0, 1)}, []nnArg{nnA(nnTF32, 1, 2, 5, 5)}},
		{"max_neg_inf", op.MaxPool2D, ir.Attrs{"pool_size": nnInts(2, 2)}, []nnArg{nnFixed(negInf)}},
		{"avg_pad_excl", op.AvgPool2D, ir.Attrs{"pool_size": nnInts(3, 3), "strides": nnInts(2, 2), "padding": nnInts(1, 1)}, []nnArg{nnA(nnTF32, 1, 2, 9, 11)}},
		{"avg_ceil_incl", op.AvgPool2D, ir.Attrs{"pool_size": nnInts(3, 2), "strides": nnInts(2, 2), "padding": nnInts(1, 0, 1, 1), "ceil_mode": true, "count_include_pad": true}, []nnArg{nnA(nnTF32, 1, 1, 6, 5)}},
		{"avg_width_1", op.AvgPool2D, ir.Attrs{"pool_size": nnInts(2, 1)}, []nnArg{nnA(nnTF32, 1, 3, 4, 1)}},
		// Global pooling over planes long enough to split into lanes
		// (squeezenet's 13x13, one not a multiple of the lanes, one that is).
		{"global_avg_13x13", op.GlobalAvgPool2D, nil, []nnArg{nnA(nnTF32, 1, 5, 13, 13)}},
		{"global_avg_8x8_batch2", op.GlobalAvgPool2D, nil, []nnArg{nnA(nnTF32, 2, 3, 8, 8)}},
		{"global_max_13x13", op.GlobalMaxPool2D, nil, []nnArg{nnA(nnTF32, 1, 4, 13, 13)}},
		{"global_max_neg_inf", op.GlobalMaxPool2D, nil, []nnArg{nnFixed(tensor.FromFloat32s(ir.Shape{1, 1, 8, 9}, globalNegInf()))}},
	})
}

// globalNegInf is a 72-element plane of -inf but for one value.
func globalNegInf() []float32 {
	v := make([]float32, 72)
	for i := range v {
		v[i] = float32(math.Inf(-1))
	}
	v[50] = -3
	return v
}

func TestPoolCPUSelected(t *testing.T) {
	cases := []struct {
		name string
		o    *op.Op
		in   ir.Shape
		out  ir.Shape
		dt   ir.DType
		want string
	}{
		{"max_f32", op.MaxPool2D, ir.Shape{1, 2, 4, 4}, ir.Shape{1, 2, 3, 3}, nnTF32, "nn.max_pool2d.rows.cpu"},
		{"avg_f32", op.AvgPool2D, ir.Shape{1, 2, 4, 4}, ir.Shape{1, 2, 3, 3}, nnTF32, "nn.avg_pool2d.cpu"},
		{"max_f64", op.MaxPool2D, ir.Shape{1, 2, 4, 4}, ir.Shape{1, 2, 3, 3}, nnTF64, "nn.max_pool2d.generic"},
		{"global_avg_f32", op.GlobalAvgPool2D, ir.Shape{1, 2, 13, 13}, ir.Shape{1, 2, 1, 1}, nnTF32, "nn.global_avg_pool2d.cpu"},
		{"global_max_f32", op.GlobalMaxPool2D, ir.Shape{1, 2, 13, 13}, ir.Shape{1, 2, 1, 1}, nnTF32, "nn.global_max_pool2d.cpu"},
		{"global_avg_small_plane", op.GlobalAvgPool2D, ir.Shape{1, 2, 3, 3}, ir.Shape{1, 2, 1, 1}, nnTF32, "nn.global_avg_pool2d.generic"},
	}
	for _, c := range cases {
		given := ir.Attrs{"pool_size": nnInts(2, 2)}
		if c.o == op.GlobalAvgPool2D || c.o == op.GlobalMaxPool2D {
			given = nil
		}
		attrs, err := c.o.MakeAttrs(given)
		if err != nil {
			t.Fatal(err)
		}
		call := &strategy.Call{Op: c.o, Attrs: attrs, ArgTypes: []ir.Type{ir.NewTensorType(c.dt, c.in)}, OutType: ir.NewTensorType(c.dt, c.out), Target: topitest.HostTarget()}
		impl, err := strategy.Default.Select(call)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if impl.Name != c.want {
			t.Errorf("%s: selected %s, want %s", c.name, impl.Name, c.want)
		}
	}
}
