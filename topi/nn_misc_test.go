package topi

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/topi/topitest"
)

// nnGroupOps lists every operator declared in graph/op/nn.go and
// graph/op/nn_misc.go.
var nnGroupOps = []*op.Op{
	op.Conv1D, op.Conv2D, op.Conv3D,
	op.Conv1DTranspose, op.Conv2DTranspose, op.Conv3DTranspose,
	op.MaxPool1D, op.MaxPool2D, op.MaxPool3D,
	op.AvgPool1D, op.AvgPool2D, op.AvgPool3D,
	op.MaxPoolWithArgmax, op.MaxUnpool,
	op.GlobalAvgPool2D, op.GlobalMaxPool2D,
	op.BiasAdd, op.BatchNorm, op.InstanceNorm, op.LayerNorm, op.LRN,
	op.Dense, op.MatMul, op.Softmax, op.LogSoftmax, op.Hardmax,
	op.DepthToSpace, op.SpaceToDepth, op.Einsum,
	op.RNN, op.GRU, op.LSTM, op.RoiAlign, op.GridSample,
}

func TestNNEveryOpHasImplementation(t *testing.T) {
	if len(nnGroupOps) != 34 {
		t.Fatalf("nn group lists %d ops, want 34", len(nnGroupOps))
	}
	for _, o := range nnGroupOps {
		call := &strategy.Call{Op: o, Target: topitest.HostTarget()}
		if len(strategy.Default.Candidates(call)) == 0 {
			t.Errorf("%s has no implementation", o.Name)
		}
	}
}

func TestNNDenseMatMul(t *testing.T) {
	runNNCases(t, []nnCase{
		{"dense", op.Dense, nil, []nnArg{nnA(nnTF32, 3, 4), nnA(nnTF32, 5, 4)}},
		{"dense_rank3", op.Dense, nil, []nnArg{nnA(nnTF32, 2, 3, 4), nnA(nnTF32, 2, 4)}},
		{"dense_rank1", op.Dense, nil, []nnArg{nnA(nnTF64, 4), nnA(nnTF64, 3, 4)}},
		{"dense_f16", op.Dense, nil, []nnArg{nnA(nnTF16, 2, 6), nnA(nnTF16, 3, 6)}},
		{"dense_i8_wrap", op.Dense, nil, []nnArg{nnA(nnTI8, 2, 8), nnA(nnTI8, 3, 8)}},
		{"dense_u8", op.Dense, nil, []nnArg{nnA(nnTU8, 2, 3), nnA(nnTU8, 2, 3)}},
		{"dense_i64", op.Dense, nil, []nnArg{nnA(nnTI64, 2, 3), nnA(nnTI64, 2, 3)}},
		{"matmul_2d", op.MatMul, nil, []nnArg{nnA(nnTF32, 3, 4), nnA(nnTF32, 4, 5)}},
		{"matmul_batched_bcast", op.MatMul, nil, []nnArg{nnA(nnTF32, 2, 1, 3, 4), nnA(nnTF32, 3, 4, 2)}},
		{"matmul_bcast_one", op.MatMul, nil, []nnArg{nnA(nnTF32, 1, 2, 3), nnA(nnTF32, 4, 3, 2)}},
		{"matmul_vec_mat", op.MatMul, nil, []nnArg{nnA(nnTF32, 4), nnA(nnTF32, 2, 4, 3)}},
		{"matmul_mat_vec", op.MatMul, nil, []nnArg{nnA(nnTF64, 2, 3, 4), nnA(nnTF64, 4)}},
		{"matmul_vec_vec", op.MatMul, nil, []nnArg{nnA(nnTF32, 5), nnA(nnTF32, 5)}},
		{"matmul_ta", op.MatMul, ir.Attrs{"transpose_a": true}, []nnArg{nnA(nnTF32, 2, 4, 3), nnA(nnTF32, 4, 2)}},
		{"matmul_tb", op.MatMul, ir.Attrs{"transpose_b": true}, []nnArg{nnA(nnTF32, 3, 4), nnA(nnTF32, 2, 5, 4)}},
		{"matmul_ta_tb_vec", op.MatMul, ir.Attrs{"transpose_a": true, "transpose_b": true}, []nnArg{nnA(nnTF32, 4, 3), nnA(nnTF32, 4)}},
		{"matmul_f16", op.MatMul, nil, []nnArg{nnA(nnTF16, 2, 5), nnA(nnTF16, 5, 3)}},
		{"matmul_bf16", op.MatMul, nil, []nnArg{nnA(ir.BFloat16, 3, 4), nnA(ir.BFloat16, 4)}},
		{"matmul_i32", op.MatMul, nil, []nnArg{nnA(nnTI32, 2, 2, 3), nnA(nnTI32, 3, 2)}},
		{"matmul_u8_wrap", op.MatMul, nil, []nnArg{nnA(nnTU8, 2, 9), nnA(nnTU8, 9, 2)}},
		{"matmul_packed16", op.MatMulPacked, nil, []nnArg{nnA(nnTF32, 5, 7), nnA(nnTF32, 2, 7, 16)}},
		{"matmul_packed8_batched", op.MatMulPacked, nil, []nnArg{nnA(nnTF32, 2, 12, 9), nnA(nnTF32, 3, 9, 8)}},
		{"matmul_packed_f64", op.MatMulPacked, nil, []nnArg{nnA(nnTF64, 3, 4), nnA(nnTF64, 1, 4, 8)}},
		// One row: several panels per register tile (matmulPanels): 5 of
		// 8 columns, 4 of 16, 7 of 8 (a prime count), a batch of one row.
		{"matmul_packed_row_5x8", op.MatMulPacked, nil, []nnArg{nnA(nnTF32, 1, 40), nnA(nnTF32, 5, 40, 8)}},
		{"matmul_packed_row_4x16", op.MatMulPacked, nil, []nnArg{nnA(nnTF32, 1, 33), nnA(nnTF32, 8, 33, 16)}},
		// Several rows and several panels per register tile
		// (matmulRowPanels): 4 rows x 4 panels of 16 (ConvNeXt's
		// [28, 28, K] x [K, 192] shape, scaled down), 6 rows x 3 panels of
		// 8, 2 batch rows x 2 panels.
		{"matmul_packed_rows_panels", op.MatMulPacked, nil, []nnArg{nnA(nnTF32, 1, 4, 4, 19), nnA(nnTF32, 12, 19, 16)}},
		{"matmul_packed_rows_3x8", op.MatMulPacked, nil, []nnArg{nnA(nnTF32, 6, 11), nnA(nnTF32, 3, 11, 8)}},
		{"matmul_packed_batch_panels", op.MatMulPacked, nil, []nnArg{nnA(nnTF32, 2, 2, 5), nnA(nnTF32, 2, 5, 16)}},
		{"matmul_packed_row_7x8", op.MatMulPacked, nil, []nnArg{nnA(nnTF32, 1, 9), nnA(nnTF32, 7, 9, 8)}},
		{"matmul_packed_row_batch1", op.MatMulPacked, nil, []nnArg{nnA(nnTF32, 1, 1, 20), nnA(nnTF32, 6, 20, 8)}},
	})
}

func TestNNSoftmax(t *testing.T) {
	ties := tensor.FromFloat32s(ir.Shape{2, 4}, []float32{1, 3, 3, 0, 2, 2, 2, 2})
	big := tensor.FromFloat32s(ir.Shape{1, 3}, []float32{1000, 1001, 999})
	runNNCases(t, []nnCase{
		{"softmax_last", op.Softmax, nil, []nnArg{nnA(nnTF32, 3, 5)}},
		{"softmax_axis0", op.Softmax, ir.Attrs{"axis": int64(0)}, []nnArg{nnA(nnTF32, 3, 2, 2)}},
		{"softmax_mid_neg", op.Softmax, ir.Attrs{"axis": int64(-2)}, []nnArg{nnA(nnTF64, 2, 4, 3)}},
		{"softmax_1d", op.Softmax, nil, []nnArg{nnA(nnTF32, 7)}},
		{"softmax_f16", op.Softmax, nil, []nnArg{nnA(nnTF16, 2, 6)}},
		{"softmax_bf16", op.Softmax, nil, []nnArg{nnA(ir.BFloat16, 2, 5)}},
		{"softmax_large", op.Softmax, nil, []nnArg{nnFixed(big)}},
		{"softmax_long_rows", op.Softmax, nil, []nnArg{nnA(nnTF32, 3, 2, 101)}},
		{"softmax_long_rows_even", op.Softmax, nil, []nnArg{nnA(nnTF32, 4, 128)}},
		{"log_softmax_last", op.LogSoftmax, nil, []nnArg{nnA(nnTF32, 3, 5)}},
		{"log_softmax_axis1", op.LogSoftmax, ir.Attrs{"axis": int64(1)}, []nnArg{nnA(nnTF64, 2, 3, 2)}},
		{"log_softmax_f16", op.LogSoftmax, ir.Attrs{"axis": int64(0)}, []nnArg{nnA(nnTF16, 4, 2)}},
		{"log_softmax_large", op.LogSoftmax, nil, []nnArg{nnFixed(big)}},
		{"hardmax", op.Hardmax, nil, []nnArg{nnA(nnTF32, 3, 5)}},
		{"hardmax_ties", op.Hardmax, nil, []nnArg{nnFixed(ties)}},
		{"hardmax_ties_axis0", op.Hardmax, ir.Attrs{"axis": int64(0)}, []nnArg{nnFixed(ties)}},
		{"hardmax_f64_3d", op.Hardmax, ir.Attrs{"axis": int64(1)}, []nnArg{nnA(nnTF64, 2, 3, 2)}},
		{"hardmax_f16", op.Hardmax, nil, []nnArg{nnA(nnTF16, 2, 3)}},
	})
}

func TestNNDataMovement(t *testing.T) {
	runNNCases(t, []nnCase{
		{"d2s_dcr", op.DepthToSpace, ir.Attrs{"block_size": int64(2)}, []nnArg{nnA(nnTF32, 1, 8, 2, 3)}},
		{"d2s_crd", op.DepthToSpace, ir.Attrs{"block_size": int64(2), "mode": "CRD"}, []nnArg{nnA(nnTF32, 2, 8, 2, 2)}},
		{"d2s_b3_i32", op.DepthToSpace, ir.Attrs{"block_size": int64(3)}, []nnArg{nnA(nnTI32, 1, 9, 1, 2)}},
		{"d2s_bool", op.DepthToSpace, ir.Attrs{"block_size": int64(2), "mode": "CRD"}, []nnArg{nnA(ir.Bool, 1, 4, 2, 2)}},
		{"s2d", op.SpaceToDepth, ir.Attrs{"block_size": int64(2)}, []nnArg{nnA(nnTF32, 1, 2, 4, 6)}},
		{"s2d_b3_u8", op.SpaceToDepth, ir.Attrs{"block_size": int64(3)}, []nnArg{nnA(nnTU8, 2, 1, 3, 6)}},
		{"s2d_f16", op.SpaceToDepth, ir.Attrs{"block_size": int64(1)}, []nnArg{nnA(nnTF16, 1, 2, 2, 2)}},
	})
}

func TestNNEinsum(t *testing.T) {
	eq := func(s string) ir.Attrs { return ir.Attrs{"equation": s} }
	runNNCases(t, []nnCase{
		{"matmul", op.Einsum, eq("ij,jk->ik"), []nnArg{nnA(nnTF32, 2, 3), nnA(nnTF32, 3, 4)}},
		{"batched", op.Einsum, eq("bij,bjk->bik"), []nnArg{nnA(nnTF32, 2, 2, 3), nnA(nnTF32, 2, 3, 2)}},
		{"transpose", op.Einsum, eq("ij->ji"), []nnArg{nnA(nnTF32, 2, 3)}},
		{"diagonal", op.Einsum, eq("ii->i"), []nnArg{nnA(nnTF64, 3, 3)}},
		{"trace", op.Einsum, eq("ii"), []nnArg{nnA(nnTF32, 4, 4)}},
		{"dot", op.Einsum, eq("i,i"), []nnArg{nnA(nnTF32, 5), nnA(nnTF32, 5)}},
		{"sum_all", op.Einsum, eq("ij->"), []nnArg{nnA(nnTF32, 3, 2)}},
		{"outer", op.Einsum, eq("i,j->ij"), []nnArg{nnA(nnTF32, 3), nnA(nnTF32, 2)}},
		{"implicit", op.Einsum, eq("ba,ca"), []nnArg{nnA(nnTF32, 2, 3), nnA(nnTF32, 4, 3)}},
		{"ellipsis_bcast", op.Einsum, eq("...ij,...jk->...ik"), []nnArg{nnA(nnTF32, 2, 1, 3, 4), nnA(nnTF32, 3, 4, 2)}},
		{"ellipsis_implicit", op.Einsum, eq("...j,j"), []nnArg{nnA(nnTF32, 2, 3, 4), nnA(nnTF32, 4)}},
		{"three_operands", op.Einsum, eq("ij,jk,kl->il"), []nnArg{nnA(nnTF32, 2, 3), nnA(nnTF32, 3, 2), nnA(nnTF32, 2, 2)}},
		{"i32", op.Einsum, eq("ij,kj->ik"), []nnArg{nnA(nnTI32, 2, 3), nnA(nnTI32, 2, 3)}},
		{"f16", op.Einsum, eq("ij,jk"), []nnArg{nnA(nnTF16, 2, 4), nnA(nnTF16, 4, 2)}},
	})
}

func TestNNRoiAlign(t *testing.T) {
	rois := tensor.FromFloat32s(ir.Shape{3, 4}, []float32{0, 0, 5, 4, 1.5, 0.5, 3.2, 6.9, 2, 2, 2.4, 2.3})
	rois64 := tensor.New(ir.Float64, ir.Shape{2, 4})
	for k, v := range []float64{-1, 0.5, 9, 3, 0.2, 0.3, 4.4, 5.1} {
		rois64.SetFloat(k, v)
	}
	idx := tensor.FromInt64s(ir.Shape{3}, []int64{0, 1, 1})
	idx32 := tensor.New(ir.Int32, ir.Shape{2})
	idx32.SetInt(1, 1)
	runNNCases(t, []nnCase{
		{"avg_adaptive", op.RoiAlign, ir.Attrs{"pooled_size": nnInts(2, 2)}, []nnArg{nnA(nnTF32, 2, 2, 6, 7), nnFixed(rois), nnFixed(idx)}},
		{"avg_ratio2_scale", op.RoiAlign, ir.Attrs{"pooled_size": nnInts(3, 2), "sampling_ratio": int64(2), "spatial_scale": 0.5}, []nnArg{nnA(nnTF32, 2, 1, 6, 7), nnFixed(rois), nnFixed(idx)}},
		{"avg_aligned", op.RoiAlign, ir.Attrs{"pooled_size": nnInts(2, 3), "aligned": true}, []nnArg{nnA(nnTF32, 2, 2, 5, 5), nnFixed(rois), nnFixed(idx)}},
		{"max_adaptive", op.RoiAlign, ir.Attrs{"pooled_size": nnInts(2, 2), "mode": "max"}, []nnArg{nnA(nnTF32, 2, 2, 6, 7), nnFixed(rois), nnFixed(idx)}},
		{"max_ratio1_aligned", op.RoiAlign, ir.Attrs{"pooled_size": nnInts(2, 2), "mode": "max", "sampling_ratio": int64(1), "aligned": true}, []nnArg{nnA(nnTF32, 2, 1, 4, 4), nnFixed(rois), nnFixed(idx)}},
		{"f64_outside", op.RoiAlign, ir.Attrs{"pooled_size": nnInts(2, 2), "sampling_ratio": int64(2)}, []nnArg{nnA(nnTF64, 2, 1, 4, 6), nnFixed(rois64), nnFixed(idx32)}},
	})
}

func TestNNGridSample(t *testing.T) {
	var cases []nnCase
	for _, m := range []string{"bilinear", "nearest", "bicubic"} {
		for _, p := range []string{"zeros", "border", "reflection"} {
			for _, a := range []bool{false, true} {
				name := m + "_" + p
				if a {
					name += "_align"
				}
				cases = append(cases, nnCase{name, op.GridSample, ir.Attrs{"method": m, "padding_mode": p, "align_corners": a},
					[]nnArg{nnA(nnTF32, 1, 2, 3, 4), nnA(nnTF32, 1, 3, 2, 2)}})
			}
		}
	}
	cases = append(cases,
		nnCase{"f64_batch2", op.GridSample, nil, []nnArg{nnA(nnTF64, 2, 1, 4, 3), nnA(nnTF64, 2, 2, 3, 2)}},
		nnCase{"f16_bicubic", op.GridSample, ir.Attrs{"method": "bicubic", "padding_mode": "border"}, []nnArg{nnA(nnTF16, 1, 1, 3, 3), nnA(nnTF16, 1, 2, 2, 2)}},
		nnCase{"single_column_reflect", op.GridSample, ir.Attrs{"padding_mode": "reflection", "align_corners": true}, []nnArg{nnA(nnTF32, 1, 1, 3, 1), nnA(nnTF32, 1, 2, 2, 2)}},
	)
	runNNCases(t, cases)
}

// nnSeqLens is an int32 sequence_lens tensor.
func nnSeqLens(v ...int64) *tensor.Tensor {
	t := tensor.New(ir.Int32, ir.Shape{int64(len(v))})
	for i, x := range v {
		t.SetInt(i, x)
	}
	return t
}

// nnRecurrentCase builds a recurrent-layer case: gates per direction,
// layout, sequence lengths and extra attributes.
func nnRecurrentCase(name string, o *op.Op, dt ir.DType, seq, batch, in, hs int64, dirs int64, layout int64, lens []int64, attrs ir.Attrs) nnCase {
	gates := map[*op.Op]int64{op.RNN: 1, op.GRU: 3, op.LSTM: 4}[o]
	a := ir.Attrs{"hidden_size": hs, "layout": layout}
	for k, v := range attrs {
		a[k] = v
	}
	x := nnA(dt, seq, batch, in)
	state := nnA(dt, dirs, batch, hs)
	if layout == 1 {
		x = nnA(dt, batch, seq, in)
		state = nnA(dt, batch, dirs, hs)
	}
	args := []nnArg{x, nnA(dt, dirs, gates*hs, in), nnA(dt, dirs, gates*hs, hs), nnA(dt, dirs, 2*gates*hs), nnFixed(nnSeqLens(lens...)), state}
	if o == op.LSTM {
		args = append(args, state, nnA(dt, dirs, 3*hs))
	}
	return nnCase{name, o, a, args}
}

func TestNNRecurrent(t *testing.T) {
	bidi := ir.Attrs{"direction": "bidirectional"}
	rev := ir.Attrs{"direction": "reverse"}
	runNNCases(t, []nnCase{
		nnRecurrentCase("rnn", op.RNN, nnTF32, 3, 2, 3, 4, 1, 0, []int64{3, 3}, nil),
		nnRecurrentCase("rnn_reverse_lens", op.RNN, nnTF32, 4, 3, 2, 3, 1, 0, []int64{4, 2, 0}, rev),
		nnRecurrentCase("rnn_bidi_layout1", op.RNN, nnTF64, 3, 2, 2, 3, 2, 1, []int64{2, 3}, bidi),
		nnRecurrentCase("rnn_relu_clip", op.RNN, nnTF32, 3, 1, 2, 3, 1, 0, []int64{3}, ir.Attrs{"activations": []string{"Relu"}, "clip": 0.5}),
		nnRecurrentCase("rnn_acts_bidi", op.RNN, nnTF32, 2, 2, 2, 2, 2, 0, []int64{2, 1}, ir.Attrs{"direction": "bidirectional",
			"activations": []string{"Affine", "ScaledTanh"}, "activation_alpha": []float64{0.5, 2}, "activation_beta": []float64{0.1, 0.7}}),
		nnRecurrentCase("rnn_more_acts", op.RNN, nnTF32, 2, 1, 2, 2, 2, 0, []int64{2}, ir.Attrs{"direction": "bidirectional",
			"activations": []string{"LeakyRelu", "HardSigmoid"}, "activation_alpha": []float64{0.2}, "activation_beta": []float64{}}),
		nnRecurrentCase("rnn_elu_softsign", op.RNN, nnTF64, 2, 1, 2, 2, 2, 0, []int64{2}, ir.Attrs{"direction": "bidirectional",
			"activations": []string{"Elu", "Softsign"}}),
		nnRecurrentCase("rnn_softplus_thresh", op.RNN, nnTF64, 2, 1, 2, 2, 2, 0, []int64{2}, ir.Attrs{"direction": "bidirectional",
			"activations": []string{"Softplus", "ThresholdedRelu"}, "activation_alpha": []float64{0.3}}),
		nnRecurrentCase("rnn_f16", op.RNN, nnTF16, 2, 2, 2, 2, 1, 0, []int64{2, 1}, nil),
		nnRecurrentCase("gru", op.GRU, nnTF32, 3, 2, 3, 3, 1, 0, []int64{3, 2}, nil),
		nnRecurrentCase("gru_lbr_bidi", op.GRU, nnTF32, 3, 2, 2, 3, 2, 0, []int64{1, 3}, ir.Attrs{"direction": "bidirectional", "linear_before_reset": true}),
		nnRecurrentCase("gru_reverse_layout1_clip", op.GRU, nnTF64, 3, 2, 2, 2, 1, 1, []int64{3, 2}, ir.Attrs{"direction": "reverse", "clip": 0.8}),
		nnRecurrentCase("lstm", op.LSTM, nnTF32, 3, 2, 3, 3, 1, 0, []int64{3, 2}, nil),
		nnRecurrentCase("lstm_bidi_layout1", op.LSTM, nnTF32, 3, 2, 2, 2, 2, 1, []int64{3, 1}, bidi),
		nnRecurrentCase("lstm_input_forget_rev", op.LSTM, nnTF64, 2, 1, 2, 3, 1, 0, []int64{2}, ir.Attrs{"direction": "reverse", "input_forget": true}),
		// Blocks of 16 rows in groups of 4, the input's products of 4 and
		// of 2 steps at a time, and a shorter sequence in the batch.
		nnRecurrentCase("lstm_blocks_bidi", op.LSTM, nnTF32, 8, 2, 5, 16, 2, 0, []int64{8, 5}, bidi),
		nnRecurrentCase("gru_blocks_steps2", op.GRU, nnTF32, 6, 1, 3, 8, 1, 0, []int64{6}, nil),
		nnRecurrentCase("lstm_blocks_f64", op.LSTM, nnTF64, 4, 1, 3, 8, 1, 0, []int64{4}, nil),
		nnRecurrentCase("lstm_acts_clip", op.LSTM, nnTF32, 2, 2, 2, 2, 1, 0, []int64{2, 2}, ir.Attrs{"clip": 1.0,
			"activations": []string{"HardSigmoid", "Relu", "Softsign"}}),
	})
}

// TestNNErrors checks that unsupported calls are reported as errors.
func TestNNErrors(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	c := nnRecurrentCase("bad_act", op.RNN, nnTF32, 2, 1, 2, 2, 1, 0, []int64{2}, ir.Attrs{"activations": []string{"Bogus"}})
	if err := topitest.Check(topitest.Case{Op: c.op, Attrs: c.attrs, Args: c.tensors(rng)}); err == nil {
		t.Error("unknown activation accepted")
	}
	attrs, err := op.Conv2D.MakeAttrs(nil)
	if err != nil {
		t.Fatal(err)
	}
	empty := ir.NewTensorType(nnTF32, ir.Shape{0, 1, 3, 3})
	call := &strategy.Call{Op: op.Conv2D, Attrs: attrs, ArgTypes: []ir.Type{empty, ir.NewTensorType(nnTF32, ir.Shape{1, 1, 1, 1})},
		OutType: ir.NewTensorType(nnTF32, ir.Shape{0, 1, 3, 3}), Target: topitest.HostTarget()}
	if _, err := topitest.Lower(call, strategy.Default.Candidates(call)[0]); err == nil {
		t.Error("empty tensor accepted")
	}
}

// TestNNRecurrentFMA: a float32 layer's products are fused multiply-adds
// where the target's processor has them, a multiply and an add where it
// has not (x86-64 without FMA, where fmaf would be a libm call per
// product), and float64 layers never fuse them (the reference's order
// and rounding).
func TestNNRecurrentFMA(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for _, c := range []struct {
		mcpu string
		dt   ir.DType
		fma  bool
	}{
		{"haswell", nnTF32, true},
		{"x86-64", nnTF32, false},
		{"haswell", nnTF64, false},
	} {
		nc := nnRecurrentCase("lstm", op.LSTM, c.dt, 4, 1, 3, 8, 1, 0, []int64{4}, nil)
		_, f := lowerSelected(t, refCall(t, nc.op, nc.attrs, nc.tensors(rng), mcpuTarget(t, c.mcpu)))
		if got := strings.Contains(f.String(), "fma("); got != c.fma {
			t.Errorf("%s, %s: fused multiply-adds %v, want %v", c.mcpu, c.dt, got, c.fma)
		}
	}
}

// TestNNRecurrentPacked: a layer whose W and R come packed in blocks of
// rows (op.RecurrentPackedShape, as alter_recurrent_layout packs constant
// weights) reads them where they lie, without the per-call transposes
// into scratch buffers, and computes bit for bit what it computes from
// the ONNX layout; the reference evaluates both forms alike.
func TestNNRecurrentPacked(t *testing.T) {
	bidi := ir.Attrs{"direction": "bidirectional"}
	cases := []nnCase{
		nnRecurrentCase("lstm_blocks_bidi", op.LSTM, nnTF32, 8, 2, 5, 16, 2, 0, []int64{8, 5}, bidi),
		nnRecurrentCase("gru_reset_steps2", op.GRU, nnTF32, 6, 1, 3, 8, 1, 0, []int64{6}, nil),
		nnRecurrentCase("gru_lbr_layout1", op.GRU, nnTF32, 3, 2, 2, 6, 1, 1, []int64{3, 2}, ir.Attrs{"linear_before_reset": true}),
		nnRecurrentCase("rnn_rev", op.RNN, nnTF32, 4, 3, 2, 4, 1, 0, []int64{4, 2, 0}, ir.Attrs{"direction": "reverse"}),
		nnRecurrentCase("lstm_f64", op.LSTM, nnTF64, 4, 1, 3, 8, 1, 0, []int64{4}, nil),
	}
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(2000 + k)))
			args := c.tensors(rng)
			rb := op.RecurrentRowBlock(c.attrs.Int("hidden_size"))
			packed := append([]*tensor.Tensor(nil), args...)
			for _, i := range []int{1, 2} {
				p, err := ref.PackRecurrentWeight(args[i], rb)
				if err != nil {
					t.Fatal(err)
				}
				packed[i] = p
			}
			if err := topitest.Check(topitest.Case{Op: c.op, Attrs: c.attrs, Args: packed}); err != nil {
				t.Fatalf("packed: %v", err)
			}
			var outs [2][]*tensor.Tensor
			for i, a := range [][]*tensor.Tensor{args, packed} {
				call := refCall(t, c.op, c.attrs, a, topitest.HostTarget())
				impl, f := lowerSelected(t, call)
				if got, want := strings.Contains(f.String(), "rnn_wt"), i == 0; got != want {
					t.Errorf("form %d: transposed weights in scratch %v, want %v", i, got, want)
				}
				var err error
				if outs[i], err = topitest.Run(call, impl, a); err != nil {
					t.Fatal(err)
				}
			}
			for i := range outs[0] {
				if !outs[0][i].Equal(outs[1][i]) {
					t.Errorf("output %d: packed weights give %v, want %v", i, outs[1][i], outs[0][i])
				}
			}
			full, err := c.op.MakeAttrs(c.attrs)
			if err != nil {
				t.Fatal(err)
			}
			want, _, err := ref.EvalOp(c.op, full, args)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := ref.EvalOp(c.op, full, packed)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if !got[i].Equal(want[i]) {
					t.Errorf("reference output %d differs with packed weights", i)
				}
			}
		})
	}
}

// lowerFused schedules the fused group out (anchor: impl's outputs for
// call, computed on placeholders phs) as LowerTE does and lowers it.
func lowerFused(t *testing.T, impl strategy.Implementation, call *strategy.Call, phs []*te.Tensor, out *te.Tensor, anchor []*te.Tensor) *tir.PrimFunc {
	t.Helper()
	s := te.CreateSchedule(out)
	if err := impl.Schedule(call, s, []*te.Tensor{out}, anchor); err != nil {
		t.Fatal(err)
	}
	f, err := te.Lower("fused", append(phs, out), s, te.LowerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// lowerSelected returns the implementation the default strategy selects
// for call and its lowered PrimFunc.
func lowerSelected(t *testing.T, call *strategy.Call) (strategy.Implementation, *tir.PrimFunc) {
	t.Helper()
	impl, err := strategy.Default.Select(call)
	if err != nil {
		t.Fatal(err)
	}
	f, err := topitest.Lower(call, impl)
	if err != nil {
		t.Fatal(err)
	}
	return impl, f
}
