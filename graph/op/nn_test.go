package op

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

func f32(s ...int64) *ir.TensorType { return ir.NewTensorType(ir.Float32, s) }

func TestWindowOutDim(t *testing.T) {
	cases := []struct {
		in, k, s, d, pb, pe int64
		ceil                bool
		want                int64
	}{
		{5, 3, 1, 1, 0, 0, false, 3},
		{5, 3, 1, 1, 1, 1, false, 5},
		{7, 3, 2, 1, 0, 0, false, 3},
		{4, 3, 2, 1, 0, 0, false, 1}, // (4-3)/2+1
		{4, 3, 2, 1, 0, 0, true, 2},  // ceil((4-3)/2)+1
		{5, 2, 2, 1, 0, 0, true, 3},  // last window starts at 4 < 5
		{4, 2, 2, 1, 1, 0, true, 3},  // ceil((5-2)/2)+1 = 3; start (3-1)*2=4 >= 4+1? no
		{3, 2, 2, 1, 1, 1, true, 2},  // ceil(3/2)+1=3, start 4 >= 3+1 drops it
		{7, 3, 1, 2, 0, 0, false, 3}, // effective kernel 5
		{2, 3, 1, 1, 0, 0, false, 0}, // does not fit
	}
	for _, c := range cases {
		if got := WindowOutDim(c.in, c.k, c.s, c.d, c.pb, c.pe, c.ceil); got != c.want {
			t.Errorf("WindowOutDim(%+v) = %d, want %d", c, got, c.want)
		}
	}
}

func TestNNRelations(t *testing.T) {
	cases := []struct {
		name  string
		op    *Op
		args  []ir.Type
		attrs ir.Attrs
		want  string // type string, or "error: substring"
	}{
		{"conv2d basic", Conv2D, []ir.Type{f32(1, 3, 32, 32), f32(8, 3, 3, 3)}, nil, "Tensor[(1, 8, 30, 30), float32]"},
		{"conv2d pad stride", Conv2D, []ir.Type{f32(1, 3, 32, 32), f32(8, 3, 3, 3)},
			ir.Attrs{"padding": []int64{1, 1, 1, 1}, "strides": []int64{2, 2}}, "Tensor[(1, 8, 16, 16), float32]"},
		{"conv2d asym pad", Conv2D, []ir.Type{f32(1, 1, 7, 5), f32(1, 1, 3, 3)},
			ir.Attrs{"padding": []int64{1, 0, 1, 0}, "strides": []int64{2, 2}}, "Tensor[(1, 1, 4, 2), float32]"},
		{"conv2d dilation", Conv2D, []ir.Type{f32(1, 1, 7, 7), f32(1, 1, 3, 3)},
			ir.Attrs{"dilation": []int64{2, 2}}, "Tensor[(1, 1, 3, 3), float32]"},
		{"conv2d depthwise", Conv2D, []ir.Type{f32(2, 4, 5, 5), f32(4, 1, 3, 3)},
			ir.Attrs{"groups": int64(4)}, "Tensor[(2, 4, 3, 3), float32]"},
		{"conv1d", Conv1D, []ir.Type{f32(1, 2, 10), f32(3, 2, 4)}, nil, "Tensor[(1, 3, 7), float32]"},
		{"conv3d", Conv3D, []ir.Type{f32(1, 2, 4, 5, 6), f32(3, 2, 2, 2, 2)}, nil, "Tensor[(1, 3, 3, 4, 5), float32]"},
		{"conv bad groups", Conv2D, []ir.Type{f32(1, 3, 5, 5), f32(4, 1, 3, 3)}, ir.Attrs{"groups": int64(2)}, "error: groups 2 must divide"},
		{"conv channel mismatch", Conv2D, []ir.Type{f32(1, 3, 5, 5), f32(4, 2, 3, 3)}, nil, "error: input channels per group"},
		{"conv kernel too big", Conv2D, []ir.Type{f32(1, 1, 2, 2), f32(1, 1, 3, 3)}, nil, "error: does not fit"},
		{"conv wrong rank", Conv2D, []ir.Type{f32(1, 1, 5), f32(1, 1, 3)}, nil, "error: must have rank 4"},
		{"conv dtype mismatch", Conv2D, []ir.Type{f32(1, 1, 5, 5), ir.NewTensorType(ir.Float64, ir.Shape{1, 1, 3, 3})}, nil, "error: dtype mismatch"},
		{"conv bad padding len", Conv2D, []ir.Type{f32(1, 1, 5, 5), f32(1, 1, 3, 3)}, ir.Attrs{"padding": []int64{1, 1, 1}}, "error: padding"},
		{"conv2d_packed", Conv2DPacked, []ir.Type{f32(1, 3, 5, 5), f32(2, 3, 3, 3, 8)}, nil, "Tensor[(1, 16, 3, 3), float32]"},
		{"conv2d_packed padded", Conv2DPacked, []ir.Type{f32(1, 3, 5, 5), f32(2, 3, 3, 3, 8)}, ir.Attrs{"channels": int64(13)}, "Tensor[(1, 13, 3, 3), float32]"},
		{"conv2d_packed channels past the weight", Conv2DPacked, []ir.Type{f32(1, 3, 5, 5), f32(2, 3, 3, 3, 8)}, ir.Attrs{"channels": int64(17)}, "error: channels=17"},
		{"conv2d_packed a padding block", Conv2DPacked, []ir.Type{f32(1, 3, 5, 5), f32(2, 3, 3, 3, 8)}, ir.Attrs{"channels": int64(8)}, "error: want more than 8"},
		{"conv_transpose", Conv2DTranspose, []ir.Type{f32(1, 1, 3, 3), f32(1, 2, 3, 3)}, nil, "Tensor[(1, 2, 5, 5), float32]"},
		{"conv_transpose stride outpad", Conv2DTranspose, []ir.Type{f32(1, 1, 3, 3), f32(1, 2, 3, 3)},
			ir.Attrs{"strides": []int64{3, 2}, "output_padding": []int64{1, 1}}, "Tensor[(1, 2, 10, 8), float32]"},
		{"conv_transpose pads", Conv2DTranspose, []ir.Type{f32(1, 1, 3, 3), f32(1, 2, 3, 3)},
			ir.Attrs{"strides": []int64{3, 2}, "padding": []int64{1, 2, 1, 2}}, "Tensor[(1, 2, 7, 3), float32]"},
		{"conv_transpose groups", Conv2DTranspose, []ir.Type{f32(1, 4, 3, 3), f32(4, 2, 3, 3)}, ir.Attrs{"groups": int64(2)}, "Tensor[(1, 4, 5, 5), float32]"},
		{"max_pool2d", MaxPool2D, []ir.Type{f32(1, 3, 32, 32)}, ir.Attrs{"pool_size": []int64{2, 2}, "strides": []int64{2, 2}}, "Tensor[(1, 3, 16, 16), float32]"},
		{"max_pool2d ceil", MaxPool2D, []ir.Type{f32(1, 1, 4, 4)}, ir.Attrs{"pool_size": []int64{3, 3}, "strides": []int64{2, 2}, "ceil_mode": true}, "Tensor[(1, 1, 2, 2), float32]"},
		{"avg_pool1d", AvgPool1D, []ir.Type{f32(1, 3, 32)}, ir.Attrs{"pool_size": []int64{2}}, "Tensor[(1, 3, 31), float32]"},
		{"pool missing size", MaxPool2D, []ir.Type{f32(1, 3, 32, 32)}, ir.Attrs{"pool_size": []int64{2}}, "error: pool_size"},
		{"argmax pool", MaxPoolWithArgmax, []ir.Type{f32(1, 1, 5, 5)}, ir.Attrs{"pool_size": []int64{2, 2}, "strides": []int64{2, 2}},
			"(Tensor[(1, 1, 2, 2), float32], Tensor[(1, 1, 2, 2), int64])"},
		{"global avg", GlobalAvgPool2D, []ir.Type{f32(2, 3, 7, 7)}, nil, "Tensor[(2, 3, 1, 1), float32]"},
		{"bias_add", BiasAdd, []ir.Type{f32(2, 3, 4), f32(3)}, nil, "Tensor[(2, 3, 4), float32]"},
		{"bias_add bad", BiasAdd, []ir.Type{f32(2, 3, 4), f32(4)}, nil, "error: bias"},
		{"batch_norm", BatchNorm, []ir.Type{f32(2, 3, 4, 5), f32(3), f32(3), f32(3), f32(3)}, nil, "Tensor[(2, 3, 4, 5), float32]"},
		{"batch_norm bad param", BatchNorm, []ir.Type{f32(2, 3, 4, 5), f32(3), f32(4), f32(3), f32(3)}, nil, "error: beta"},
		{"layer_norm", LayerNorm, []ir.Type{f32(2, 3, 4), f32(3, 4), f32(4)}, ir.Attrs{"axis": int64(1)}, "Tensor[(2, 3, 4), float32]"},
		{"layer_norm bad gamma", LayerNorm, []ir.Type{f32(2, 3, 4), f32(3), f32(4)}, ir.Attrs{"axis": int64(1)}, "error: gamma"},
		{"dense", Dense, []ir.Type{f32(4, 3), f32(5, 3)}, nil, "Tensor[(4, 5), float32]"},
		{"dense mismatch", Dense, []ir.Type{f32(4, 3), f32(5, 4)}, nil, "error: reduction sizes"},
		{"matmul 2d", MatMul, []ir.Type{f32(3, 4), f32(4, 5)}, nil, "Tensor[(3, 5), float32]"},
		{"matmul broadcast", MatMul, []ir.Type{f32(2, 1, 3, 4), f32(5, 4, 6)}, nil, "Tensor[(2, 5, 3, 6), float32]"},
		{"matmul vec mat", MatMul, []ir.Type{f32(4), f32(2, 4, 5)}, nil, "Tensor[(2, 5), float32]"},
		{"matmul mat vec", MatMul, []ir.Type{f32(3, 4), f32(4)}, nil, "Tensor[(3,), float32]"},
		{"matmul vec vec", MatMul, []ir.Type{f32(4), f32(4)}, nil, "Tensor[(), float32]"},
		{"matmul transposes", MatMul, []ir.Type{f32(4, 3), f32(5, 4)}, ir.Attrs{"transpose_a": true, "transpose_b": true}, "Tensor[(3, 5), float32]"},
		{"matmul mismatch", MatMul, []ir.Type{f32(3, 4), f32(5, 6)}, nil, "error: reduction sizes"},
		{"softmax int", Softmax, []ir.Type{ir.NewTensorType(ir.Int32, ir.Shape{3})}, nil, "error: not a float"},
		{"softmax axis", Softmax, []ir.Type{f32(3, 4)}, ir.Attrs{"axis": int64(2)}, "error: axis 2 out of range"},
		{"depth_to_space", DepthToSpace, []ir.Type{f32(1, 8, 2, 3)}, ir.Attrs{"block_size": int64(2)}, "Tensor[(1, 2, 4, 6), float32]"},
		{"space_to_depth", SpaceToDepth, []ir.Type{f32(1, 2, 4, 6)}, ir.Attrs{"block_size": int64(2)}, "Tensor[(1, 8, 2, 3), float32]"},
		{"space_to_depth bad", SpaceToDepth, []ir.Type{f32(1, 2, 5, 6)}, ir.Attrs{"block_size": int64(2)}, "error: divisible"},
		{"einsum matmul", Einsum, []ir.Type{f32(5, 2, 3), f32(5, 3, 4)}, ir.Attrs{"equation": "bij,bjk->bik"}, "Tensor[(5, 2, 4), float32]"},
		{"einsum implicit", Einsum, []ir.Type{f32(3, 4), f32(4, 5)}, ir.Attrs{"equation": "ij,jk"}, "Tensor[(3, 5), float32]"},
		{"einsum ellipsis diag", Einsum, []ir.Type{f32(3, 5, 5)}, ir.Attrs{"equation": "...ii->...i"}, "Tensor[(3, 5), float32]"},
		{"einsum inner", Einsum, []ir.Type{f32(5), f32(5)}, ir.Attrs{"equation": "i,i"}, "Tensor[(), float32]"},
		{"einsum size clash", Einsum, []ir.Type{f32(3, 4), f32(5, 6)}, ir.Attrs{"equation": "ij,jk->ik"}, "error: label j"},
		{"lstm", LSTM, []ir.Type{f32(2, 3, 4), f32(1, 20, 4), f32(1, 20, 5), f32(1, 40), ir.NewTensorType(ir.Int32, ir.Shape{3}), f32(1, 3, 5), f32(1, 3, 5), f32(1, 15)},
			ir.Attrs{"hidden_size": int64(5)}, "(Tensor[(2, 1, 3, 5), float32], Tensor[(1, 3, 5), float32], Tensor[(1, 3, 5), float32])"},
		{"lstm packed", LSTM, []ir.Type{f32(2, 3, 4), f32(1, 8, 4, 2), f32(1, 8, 4, 2), f32(1, 32), ir.NewTensorType(ir.Int32, ir.Shape{3}), f32(1, 3, 4), f32(1, 3, 4), f32(1, 12)},
			ir.Attrs{"hidden_size": int64(4)}, "(Tensor[(2, 1, 3, 4), float32], Tensor[(1, 3, 4), float32], Tensor[(1, 3, 4), float32])"},
		{"lstm packed W only", LSTM, []ir.Type{f32(2, 3, 4), f32(1, 8, 4, 2), f32(1, 16, 4), f32(1, 32), ir.NewTensorType(ir.Int32, ir.Shape{3}), f32(1, 3, 4), f32(1, 3, 4), f32(1, 12)},
			ir.Attrs{"hidden_size": int64(4)}, "error: same row block"},
		{"gru packed blocks differ", GRU, []ir.Type{f32(2, 3, 4), f32(1, 6, 4, 2), f32(1, 3, 4, 4), f32(1, 24), ir.NewTensorType(ir.Int32, ir.Shape{3}), f32(1, 3, 4)},
			ir.Attrs{"hidden_size": int64(4)}, "error: same row block"},
		{"lstm packed block not dividing", LSTM, []ir.Type{f32(2, 3, 4), f32(1, 6, 4, 4), f32(1, 6, 6, 4), f32(1, 48), ir.NewTensorType(ir.Int32, ir.Shape{3}), f32(1, 3, 6), f32(1, 3, 6), f32(1, 18)},
			ir.Attrs{"hidden_size": int64(6)}, "error: same row block"},
		{"rnn packed 3 rows", RNN, []ir.Type{f32(2, 3, 4), f32(1, 2, 4, 3), f32(1, 2, 6, 3), f32(1, 12), ir.NewTensorType(ir.Int32, ir.Shape{3}), f32(1, 3, 6)},
			ir.Attrs{"hidden_size": int64(6)}, "(Tensor[(2, 1, 3, 6), float32], Tensor[(1, 3, 6), float32])"},
		{"rnn packed wrong rows", RNN, []ir.Type{f32(2, 3, 4), f32(1, 3, 4, 2), f32(1, 2, 4, 2), f32(1, 8), ir.NewTensorType(ir.Int32, ir.Shape{3}), f32(1, 3, 4)},
			ir.Attrs{"hidden_size": int64(4)}, "error: W is"},
		{"gru bad W", GRU, []ir.Type{f32(2, 3, 4), f32(1, 12, 4), f32(1, 15, 5), f32(1, 30), ir.NewTensorType(ir.Int32, ir.Shape{3}), f32(1, 3, 5)},
			ir.Attrs{"hidden_size": int64(5)}, "error: W is"},
		{"rnn layout1 bidi", RNN, []ir.Type{f32(3, 2, 4), f32(2, 5, 4), f32(2, 5, 5), f32(2, 10), ir.NewTensorType(ir.Int32, ir.Shape{3}), f32(3, 2, 5)},
			ir.Attrs{"hidden_size": int64(5), "direction": "bidirectional", "layout": int64(1)}, "(Tensor[(3, 2, 2, 5), float32], Tensor[(3, 2, 5), float32])"},
		{"roi_align", RoiAlign, []ir.Type{f32(1, 2, 10, 10), f32(3, 4), ir.NewTensorType(ir.Int64, ir.Shape{3})}, ir.Attrs{"pooled_size": []int64{5, 4}}, "Tensor[(3, 2, 5, 4), float32]"},
		{"grid_sample", GridSample, []ir.Type{f32(1, 2, 4, 4), f32(1, 6, 5, 2)}, nil, "Tensor[(1, 2, 6, 5), float32]"},
		{"max_unpool", MaxUnpool, []ir.Type{f32(1, 1, 2, 2), ir.NewTensorType(ir.Int64, ir.Shape{1, 1, 2, 2})}, ir.Attrs{"output_shape": []int64{1, 1, 4, 4}}, "Tensor[(1, 1, 4, 4), float32]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			attrs, err := c.op.MakeAttrs(c.attrs)
			if err != nil {
				t.Fatalf("MakeAttrs: %v", err)
			}
			got, err := c.op.Infer(c.args, attrs)
			if want, isErr := strings.CutPrefix(c.want, "error: "); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("got %v, %v; want error containing %q", got, err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got.String() != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
}
