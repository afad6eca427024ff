package topi

import (
	"math"
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// trReduceDTypes are the dtype families the reductions are checked with.
var trReduceDTypes = []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.Int8, ir.Int32, ir.Int64, ir.Uint8, ir.Uint64, ir.Bool}

func TestTransformReduce(t *testing.T) {
	var cases []trCase
	for _, o := range []*op.Op{op.Sum, op.Mean, op.Max, op.Min, op.Prod} {
		for _, dt := range trReduceDTypes {
			n := dt.String()
			cases = append(cases,
				trCase{"axis1_" + n, o, ir.Attrs{"axis": trI(1)}, []*tensor.Tensor{trR(dt, 3, 4, 2)}},
				trCase{"axes02_keep_" + n, o, ir.Attrs{"axis": trI(0, -1), "keepdims": true}, []*tensor.Tensor{trR(dt, 3, 4, 2)}},
				trCase{"all_" + n, o, ir.Attrs{"axis": trI(0, 1)}, []*tensor.Tensor{trR(dt, 5, 3)}},
			)
		}
		cases = append(cases,
			trCase{"none_reduced", o, ir.Attrs{"axis": trI()}, []*tensor.Tensor{trR(ir.Float32, 2, 3)}},
			trCase{"none_reduced_bool", o, ir.Attrs{"axis": trI(), "keepdims": true}, []*tensor.Tensor{trR(ir.Bool, 3)}},
			trCase{"rank1_keep", o, ir.Attrs{"axis": trI(-1), "keepdims": true}, []*tensor.Tensor{trR(ir.Float32, 7)}},
			trCase{"long_f32", o, ir.Attrs{"axis": trI(1)}, []*tensor.Tensor{trR(ir.Float32, 2, 64)}},
			// Lane-split rows (reduce_lanes.go) with a ragged last chunk for
			// every lane count, and column reductions run outside a
			// vectorised row.
			trCase{"lanes_ragged_f32", o, ir.Attrs{"axis": trI(-1), "keepdims": true}, []*tensor.Tensor{trR(ir.Float32, 3, 2, 101)}},
			trCase{"lanes_f64", o, ir.Attrs{"axis": trI(1)}, []*tensor.Tensor{trR(ir.Float64, 2, 130)}},
			trCase{"columns_f32", o, ir.Attrs{"axis": trI(0)}, []*tensor.Tensor{trR(ir.Float32, 9, 130)}},
			trCase{"columns_mid_f32", o, ir.Attrs{"axis": trI(1), "keepdims": true}, []*tensor.Tensor{trR(ir.Float32, 3, 5, 20)}},
			trCase{"unordered_axes", o, ir.Attrs{"axis": trI(2, 0)}, []*tensor.Tensor{trR(ir.Int32, 2, 3, 4)}},
			trCase{"rank4_hw", o, ir.Attrs{"axis": trI(2, 3), "keepdims": true}, []*tensor.Tensor{trR(ir.Float32, 1, 2, 3, 3)}},
			trCase{"empty_axis_f32", o, ir.Attrs{"axis": trI(1)}, []*tensor.Tensor{trR(ir.Float32, 2, 0)}},
			trCase{"empty_axis_i32", o, ir.Attrs{"axis": trI(0)}, []*tensor.Tensor{trR(ir.Int32, 0, 3)}},
		)
	}
	// Values that wrap int8 sums and products, and large uint8 values.
	wrap := trT(ir.Int8, trS(2, 3), 100, 100, 100, -128, -1, 127)
	big := trT(ir.Uint8, trS(2, 3), 250, 200, 255, 1, 128, 129)
	for _, o := range []*op.Op{op.Sum, op.Mean, op.Prod, op.Max, op.Min} {
		cases = append(cases,
			trCase{"wrap_int8", o, ir.Attrs{"axis": trI(1)}, []*tensor.Tensor{wrap}},
			trCase{"big_uint8", o, ir.Attrs{"axis": trI(1)}, []*tensor.Tensor{big}},
		)
	}
	// NaN propagates through max and min.
	nan := trT(ir.Float32, trS(2, 3), 1, math.NaN(), 3, -1, -2, -3)
	long := trR(ir.Float32, 2, 77)
	long.Float32s()[40] = float32(math.NaN())
	// A NaN among the elements past the last full chunk of lanes (added
	// by the final stage), and a long reduction to a scalar (no rows: the
	// partial and folding stages at the root).
	tail := trR(ir.Float32, 2, 77)
	tail.Float32s()[77+70] = float32(math.NaN())
	cases = append(cases,
		trCase{"nan_tail", op.Max, ir.Attrs{"axis": trI(1)}, []*tensor.Tensor{tail}},
		trCase{"nan_tail", op.Min, ir.Attrs{"axis": trI(1)}, []*tensor.Tensor{tail}},
		trCase{"scalar_lanes", op.Sum, ir.Attrs{"axis": trI(0)}, []*tensor.Tensor{trR(ir.Float32, 203)}},
		trCase{"scalar_lanes", op.Max, ir.Attrs{"axis": trI(0)}, []*tensor.Tensor{trR(ir.Float32, 203)}},
		trCase{"nan_lanes", op.Max, ir.Attrs{"axis": trI(1)}, []*tensor.Tensor{long}},
		trCase{"nan_lanes", op.Min, ir.Attrs{"axis": trI(1)}, []*tensor.Tensor{long}},
		trCase{"nan", op.Max, ir.Attrs{"axis": trI(1)}, []*tensor.Tensor{nan}},
		trCase{"nan", op.Min, ir.Attrs{"axis": trI(1)}, []*tensor.Tensor{nan}},
		trCase{"nan", op.Sum, ir.Attrs{"axis": trI(0)}, []*tensor.Tensor{nan}},
	)
	runTrCases(t, cases)
}

func TestTransformArg(t *testing.T) {
	var cases []trCase
	for _, o := range []*op.Op{op.ArgMax, op.ArgMin} {
		for _, dt := range []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.Int8, ir.Int32, ir.Int64, ir.Uint8, ir.Uint64} {
			for _, last := range []bool{false, true} {
				n := dt.String()
				if last {
					n += "_last"
				}
				// Small integer-valued inputs have many ties.
				cases = append(cases,
					trCase{"axis0_" + n, o, ir.Attrs{"axis": int64(0), "select_last_index": last}, []*tensor.Tensor{trR(dt, 5, 3)}},
					trCase{"axis-1_nokeep_" + n, o, ir.Attrs{"axis": int64(-1), "keepdims": false, "select_last_index": last}, []*tensor.Tensor{trR(dt, 2, 3, 6)}},
				)
			}
		}
		ties := trT(ir.Float32, trS(2, 4), 1, 3, 3, 2, -1, -1, -1, -1)
		nan0 := trT(ir.Float32, trS(3, 3), math.NaN(), 5, 1, 2, math.NaN(), 2, math.Inf(-1), math.Inf(1), math.Inf(1))
		nanAll := trT(ir.Float64, trS(1, 3), math.NaN(), math.NaN(), math.NaN())
		infs := trT(ir.Float32, trS(1, 3), math.Inf(-1), math.Inf(-1), math.Inf(-1))
		infsUp := trT(ir.Float32, trS(1, 3), math.Inf(1), math.Inf(1), math.Inf(1))
		for _, last := range []bool{false, true} {
			a := ir.Attrs{"axis": int64(1), "select_last_index": last}
			cases = append(cases,
				trCase{"ties", o, a, []*tensor.Tensor{ties}},
				trCase{"nan", o, a, []*tensor.Tensor{nan0}},
				trCase{"all_nan", o, a, []*tensor.Tensor{nanAll}},
				trCase{"all_-inf", o, a, []*tensor.Tensor{infs}},
				trCase{"all_+inf", o, a, []*tensor.Tensor{infsUp}},
			)
		}
		cases = append(cases,
			trCase{"rank1_nokeep", o, ir.Attrs{"keepdims": false}, []*tensor.Tensor{trR(ir.Float32, 6)}},
			trCase{"rank1_keep", o, nil, []*tensor.Tensor{trR(ir.Int32, 6)}},
			trCase{"len1", o, ir.Attrs{"axis": int64(1)}, []*tensor.Tensor{trR(ir.Float32, 3, 1)}},
			trCase{"rank4_channel", o, ir.Attrs{"axis": int64(1), "keepdims": false}, []*tensor.Tensor{trR(ir.Float32, 1, 5, 2, 2)}},
		)
	}
	runTrCases(t, cases)
}

func TestTransformCumSum(t *testing.T) {
	var cases []trCase
	for _, dt := range []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.Int8, ir.Int32, ir.Int64, ir.Uint8, ir.Uint64} {
		for _, excl := range []bool{false, true} {
			for _, rev := range []bool{false, true} {
				n := dt.String()
				if excl {
					n += "_excl"
				}
				if rev {
					n += "_rev"
				}
				a := ir.Attrs{"axis": int64(1), "exclusive": excl, "reverse": rev}
				cases = append(cases, trCase{"axis1_" + n, op.CumSum, a, []*tensor.Tensor{trR(dt, 2, 5, 3)}})
			}
		}
	}
	cases = append(cases,
		trCase{"rank1", op.CumSum, nil, []*tensor.Tensor{trR(ir.Float32, 9)}},
		trCase{"axis_neg", op.CumSum, ir.Attrs{"axis": int64(-1), "exclusive": true}, []*tensor.Tensor{trR(ir.Float32, 3, 4)}},
		trCase{"axis0", op.CumSum, ir.Attrs{"axis": int64(0), "reverse": true}, []*tensor.Tensor{trR(ir.Int32, 4, 3)}},
		trCase{"long_f32", op.CumSum, ir.Attrs{"axis": int64(0)}, []*tensor.Tensor{trR(ir.Float32, 200)}},
		trCase{"wrap_int8", op.CumSum, nil, []*tensor.Tensor{trT(ir.Int8, trS(4), 100, 100, -128, 127)}},
	)
	runTrCases(t, cases)
}

func TestTransformTopK(t *testing.T) {
	var cases []trCase
	for _, dt := range []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.Int8, ir.Int32, ir.Int64, ir.Uint8, ir.Uint64} {
		for _, largest := range []bool{true, false} {
			n := dt.String()
			if !largest {
				n += "_smallest"
			}
			cases = append(cases,
				trCase{"last_axis_" + n, op.TopK, ir.Attrs{"k": int64(3), "largest": largest}, []*tensor.Tensor{trR(dt, 2, 7)}},
				trCase{"axis0_full_" + n, op.TopK, ir.Attrs{"k": int64(5), "axis": int64(0), "largest": largest}, []*tensor.Tensor{trR(dt, 5, 2, 2)}},
			)
		}
	}
	ties := trT(ir.Float32, trS(2, 6), 1, 3, 3, 2, 3, 1, -1, -1, -1, -1, -1, -1)
	cases = append(cases,
		trCase{"ties_largest", op.TopK, ir.Attrs{"k": int64(4)}, []*tensor.Tensor{ties}},
		trCase{"ties_smallest", op.TopK, ir.Attrs{"k": int64(4), "largest": false}, []*tensor.Tensor{ties}},
		trCase{"unsorted_attr", op.TopK, ir.Attrs{"k": int64(2), "sorted": false}, []*tensor.Tensor{trR(ir.Float32, 3, 5)}},
		trCase{"k1", op.TopK, ir.Attrs{"k": int64(1), "axis": int64(1)}, []*tensor.Tensor{trR(ir.Float32, 2, 4, 3)}},
		trCase{"rank1_len1", op.TopK, ir.Attrs{"k": int64(1)}, []*tensor.Tensor{trR(ir.Float32, 1)}},
		trCase{"long_row", op.TopK, ir.Attrs{"k": int64(10)}, []*tensor.Tensor{trR(ir.Float32, 40)}},
	)
	runTrCases(t, cases)
}
