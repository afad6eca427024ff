package te_test

import (
	"github.com/kiln-dev/kiln/internal/golden"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// TestGolden pins the lowered TIR text of typical schedules
// (te/testdata/*.tir; regenerate with go test ./te -update).
func TestGolden(t *testing.T) {
	cases := []struct {
		name  string
		build func(t *testing.T) *tir.PrimFunc
	}{
		{"add_split_vectorize", func(t *testing.T) *tir.PrimFunc {
			a, b, c := addTensors(6, 10, f32)
			s := te.CreateSchedule(c)
			st := s.Stage(c)
			ax := st.Axis()
			st.Parallel(ax[0])
			_, ji := st.Split(ax[1], 4)
			st.Vectorize(ji)
			return mustLower(t, "add_split_vectorize", []*te.Tensor{a, b, c}, s)
		}},
		{"matmul_register_tile", func(t *testing.T) *tir.PrimFunc {
			a := te.Placeholder("A", f32, ir.Shape{12, 16})
			b := te.Placeholder("B", f32, ir.Shape{16, 8})
			c := matmul("C", a, b)
			s := te.CreateSchedule(c)
			registerTile(s, c)
			return mustLower(t, "matmul_register_tile", []*te.Tensor{a, b, c}, s)
		}},
		{"dense_bias_relu", func(t *testing.T) *tir.PrimFunc {
			a := te.Placeholder("A", f32, ir.Shape{8, 6})
			w := te.Placeholder("W", f32, ir.Shape{6, 8})
			bias := te.Placeholder("bias", f32, ir.Shape{8})
			mm := matmul("mm", a, w)
			relu := te.Compute("relu", ir.Shape{8, 8}, func(i []tir.PrimExpr) tir.PrimExpr {
				return tir.Max(tir.Add(mm.At(i...), bias.At(i[1])), tir.Float32(0))
			}, te.WithAxisNames("i", "j"))
			s := te.CreateSchedule(relu)
			sr := s.Stage(relu)
			ax := sr.Axis()
			io, ii := sr.Split(ax[0], 4)
			jo, ji := sr.Split(ax[1], 4)
			sr.Reorder(io, jo, ii, ji)
			s.Stage(mm).ComputeAt(sr, jo)
			return mustLower(t, "dense_bias_relu", []*te.Tensor{a, w, bias, relu}, s)
		}},
		{"conv_pad_at_row", func(t *testing.T) *tir.PrimFunc {
			data, weight, padded, out := conv2dNCHW(1, 2, 7, 7, 2, 3, 3, 1, 2, 1)
			s := te.CreateSchedule(out)
			so := s.Stage(out)
			s.Stage(padded).ComputeAt(so, so.Axis()[2])
			return mustLower(t, "conv_pad_at_row", []*te.Tensor{data, weight, out}, s)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.build(t).String()
			golden.Check(t, tc.name+".tir", got)
			if again := tc.build(t).String(); again != got {
				t.Errorf("lowering is not deterministic:\n%s\nvs\n%s", got, again)
			}
		})
	}
}

// TestScheduleErrors checks that schedule misuse is reported by Lower as
// an error naming the problem, never as a panic.
func TestScheduleErrors(t *testing.T) {
	type setup struct {
		args []*te.Tensor
		s    *te.Schedule
	}
	// chain: A -> B = A+1 -> C = B*2 (output), plus an unrelated D.
	chain := func() (a, b, c *te.Tensor) {
		a = te.Placeholder("A", f32, ir.Shape{4, 6})
		b = te.Compute("B", ir.Shape{4, 6}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Add(a.At(i...), tir.Float32(1)) })
		c = te.Compute("C", ir.Shape{4, 6}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Mul(b.At(i...), tir.Float32(2)) })
		return
	}
	mm := func() (a, b, c *te.Tensor) {
		a = te.Placeholder("A", f32, ir.Shape{4, 5})
		b = te.Placeholder("B", f32, ir.Shape{5, 3})
		return a, b, matmul("C", a, b)
	}
	cases := []struct {
		name  string
		build func() setup
		want  string
	}{
		{"split_foreign_iv", func() setup {
			a, b, c := chain()
			s := te.CreateSchedule(c)
			s.Stage(c).Split(s.Stage(b).Axis()[0], 2)
			return setup{[]*te.Tensor{a, c}, s}
		}, "stage C: split: iter var i0 is not a leaf of this stage"},
		{"split_factor_zero", func() setup {
			a, _, c := chain()
			s := te.CreateSchedule(c)
			s.Stage(c).Split(s.Stage(c).Axis()[0], 0)
			return setup{[]*te.Tensor{a, c}, s}
		}, "factor 0 must be positive"},
		{"reorder_non_leaf", func() setup {
			a, _, c := chain()
			s := te.CreateSchedule(c)
			st := s.Stage(c)
			ax := st.Axis()
			st.Split(ax[0], 2)
			st.Reorder(ax[1], ax[0])
			return setup{[]*te.Tensor{a, c}, s}
		}, "reorder: iter var i0 is not a leaf"},
		{"reorder_duplicate", func() setup {
			a, _, c := chain()
			s := te.CreateSchedule(c)
			st := s.Stage(c)
			st.Reorder(st.Axis()[0], st.Axis()[0])
			return setup{[]*te.Tensor{a, c}, s}
		}, "appears twice"},
		{"fuse_not_adjacent", func() setup {
			a, b, c := mm()
			s := te.CreateSchedule(c)
			st := s.Stage(c)
			st.Fuse(st.Axis()[0], st.ReduceAxes()[0])
			return setup{[]*te.Tensor{a, b, c}, s}
		}, "must be adjacent leaves"},
		{"fuse_data_with_reduce", func() setup {
			a, b, c := mm()
			s := te.CreateSchedule(c)
			st := s.Stage(c)
			st.Fuse(st.Axis()[1], st.ReduceAxes()[0])
			return setup{[]*te.Tensor{a, b, c}, s}
		}, "cannot fuse a data_par and a reduce iter var"},
		{"compute_at_non_consumer", func() setup {
			a := te.Placeholder("A", f32, ir.Shape{4})
			b := te.Compute("B", ir.Shape{4}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Add(a.At(i...), tir.Float32(1)) })
			c := te.Compute("C", ir.Shape{4}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Mul(b.At(i...), tir.Float32(2)) })
			d := te.Compute("D", ir.Shape{4}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Mul(a.At(i...), tir.Float32(3)) })
			s := te.CreateSchedule(c, d)
			s.Stage(b).ComputeAt(s.Stage(d), s.Stage(d).Axis()[0])
			return setup{[]*te.Tensor{a, c, d}, s}
		}, "compute_at: stage D does not read B (it is not a consumer)"},
		{"compute_at_also_read_elsewhere", func() setup {
			a := te.Placeholder("A", f32, ir.Shape{4})
			b := te.Compute("B", ir.Shape{4}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Add(a.At(i...), tir.Float32(1)) })
			c := te.Compute("C", ir.Shape{4}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Mul(b.At(i...), tir.Float32(2)) })
			d := te.Compute("D", ir.Shape{4}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Mul(b.At(i...), tir.Float32(3)) })
			s := te.CreateSchedule(c, d)
			s.Stage(b).ComputeAt(s.Stage(c), s.Stage(c).Axis()[0])
			return setup{[]*te.Tensor{a, c, d}, s}
		}, "also read by D"},
		{"compute_at_iv_of_other_stage", func() setup {
			a, b, c := chain()
			s := te.CreateSchedule(c)
			s.Stage(b).ComputeAt(s.Stage(c), s.Stage(b).Axis()[0])
			return setup{[]*te.Tensor{a, c}, s}
		}, "compute_at: iter var i0 is not a leaf of this stage"},
		{"compute_at_iv_split_later", func() setup {
			a, b, c := chain()
			s := te.CreateSchedule(c)
			sc := s.Stage(c)
			s.Stage(b).ComputeAt(sc, sc.Axis()[0])
			sc.Split(sc.Axis()[0], 2)
			return setup{[]*te.Tensor{a, c}, s}
		}, "compute_at: i0 is no longer a leaf of stage C"},
		{"compute_at_self", func() setup {
			a, _, c := chain()
			s := te.CreateSchedule(c)
			s.Stage(c).ComputeAt(s.Stage(c), s.Stage(c).Axis()[0])
			return setup{[]*te.Tensor{a, c}, s}
		}, "cannot be computed at itself"},
		{"inline_output", func() setup {
			a, _, c := chain()
			s := te.CreateSchedule(c)
			s.Stage(c).ComputeInline()
			return setup{[]*te.Tensor{a, c}, s}
		}, "compute_inline: the stage is an output"},
		{"inline_reduction", func() setup {
			a, b, c := mm()
			d := te.Compute("D", ir.Shape{4, 3}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Add(c.At(i...), tir.Float32(1)) })
			s := te.CreateSchedule(d)
			s.Stage(c).ComputeInline()
			return setup{[]*te.Tensor{a, b, d}, s}
		}, "reductions cannot be inlined"},
		{"inline_argument", func() setup {
			a, b, c := chain()
			s := te.CreateSchedule(c)
			s.Stage(b).ComputeInline()
			return setup{[]*te.Tensor{a, b, c}, s}
		}, "compute_inline: tensor B is a function argument"},
		{"parallel_reduce_axis", func() setup {
			a, b, c := mm()
			s := te.CreateSchedule(c)
			s.Stage(c).Parallel(s.Stage(c).ReduceAxes()[0])
			return setup{[]*te.Tensor{a, b, c}, s}
		}, "k is a reduce axis and cannot be parallel"},
		{"vectorize_reduce_axis", func() setup {
			a, b, c := mm()
			s := te.CreateSchedule(c)
			s.Stage(c).Vectorize(s.Stage(c).ReduceAxes()[0])
			return setup{[]*te.Tensor{a, b, c}, s}
		}, "k is a reduce axis and cannot be vectorized"},
		{"vectorize_not_innermost", func() setup {
			a, b, c := mm()
			s := te.CreateSchedule(c)
			s.Stage(c).Vectorize(s.Stage(c).Axis()[1])
			return setup{[]*te.Tensor{a, b, c}, s}
		}, "only the innermost loop can be vectorized (innermost is k)"},
		{"annotated_then_split", func() setup {
			a, _, c := chain()
			s := te.CreateSchedule(c)
			st := s.Stage(c)
			st.Unroll(st.Axis()[1])
			st.Split(st.Axis()[1], 2)
			return setup{[]*te.Tensor{a, c}, s}
		}, "marked unroll but is no longer a leaf"},
		{"stage_of_placeholder", func() setup {
			a, _, c := chain()
			s := te.CreateSchedule(c)
			st := s.Stage(a)
			st.Split(nil, 2)
			st.ComputeInline()
			return setup{[]*te.Tensor{a, c}, s}
		}, "tensor A has no stage in this schedule"},
		{"cache_write_placeholder", func() setup {
			a, _, c := chain()
			s := te.CreateSchedule(c)
			s.CacheWrite(a, "local")
			return setup{[]*te.Tensor{a, c}, s}
		}, "tensor A has no stage in this schedule"},
		{"missing_placeholder_argument", func() setup {
			_, _, c := chain()
			return setup{[]*te.Tensor{c}, te.CreateSchedule(c)}
		}, "placeholder A (read by stage B) is not among the arguments"},
		{"missing_output_argument", func() setup {
			a, _, c := chain()
			return setup{[]*te.Tensor{a}, te.CreateSchedule(c)}
		}, "output C is not among the arguments"},
		{"duplicate_argument", func() setup {
			a, _, c := chain()
			return setup{[]*te.Tensor{a, a, c}, te.CreateSchedule(c)}
		}, "listed twice"},
		{"extern_input_inlined", func() setup {
			a, b, _ := chain()
			e := te.Extern("copy", []ir.Shape{{4, 6}}, []ir.DType{f32}, []*te.Tensor{b}, func(ins, outs []*tir.Buffer) tir.Stmt { return tir.NoOp() })[0]
			s := te.CreateSchedule(e)
			s.Stage(b).ComputeInline()
			return setup{[]*te.Tensor{a, e}, s}
		}, "stage B is inlined but read by extern stage copy"},
		{"extern_split", func() setup {
			a, b, _ := chain()
			e := te.Extern("copy", []ir.Shape{{4, 6}}, []ir.DType{f32}, []*te.Tensor{b}, func(ins, outs []*tir.Buffer) tir.Stmt { return tir.NoOp() })[0]
			s := te.CreateSchedule(e)
			s.Stage(e).Split(s.Stage(b).Axis()[0], 2)
			return setup{[]*te.Tensor{a, e}, s}
		}, "extern stages have no loops to schedule"},
		{"extern_build_panics", func() setup {
			a, b, _ := chain()
			e := te.Extern("bad", []ir.Shape{{4, 6}}, []ir.DType{f32}, []*te.Tensor{b}, func(ins, outs []*tir.Buffer) tir.Stmt {
				return tir.NewStore(outs[0], tir.Float32(0), tir.Idx(0)) // wrong rank
			})[0]
			return setup{[]*te.Tensor{a, e}, te.CreateSchedule(e)}
		}, "extern stage bad: build panicked"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			su := tc.build()
			f, err := te.Lower("f", su.args, su.s, te.LowerOptions{})
			if err == nil {
				t.Fatalf("Lower succeeded, want error containing %q:\n%s", tc.want, f)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}
