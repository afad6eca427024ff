package te_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/interp"
)

// rowKernel computes n columns of one row of a matmul,
// c[j] = sum over r < k of a[r] * b[r*ldb + j], in the reduction's order:
// the reference semantics a tensorized matmul tile calls.
type rowKernel struct{ n, k, ldb int64 }

func (r *rowKernel) Symbol() string     { return fmt.Sprintf("row_%d_%d_%d", r.n, r.k, r.ldb) }
func (r *rowKernel) Includes() []string { return nil }
func (r *rowKernel) Source() string {
	return "static void " + r.Symbol() + "(float* c, const float* a, const float* b) {}"
}
func (r *rowKernel) Eval(args []tir.KernelArg) error {
	cm, co, err := args[0].Ptr(r.n)
	if err != nil {
		return err
	}
	am, ao, err := args[1].Ptr(r.k)
	if err != nil {
		return err
	}
	bm, bo, err := args[2].Ptr((r.k-1)*r.ldb + r.n)
	if err != nil {
		return err
	}
	for j := int64(0); j < r.n; j++ {
		acc := float32(0)
		for x := int64(0); x < r.k; x++ {
			acc = acc + float32(am.Float(ao+x))*float32(bm.Float(bo+x*r.ldb+j))
		}
		cm.SetFloat(co+j, float64(acc))
	}
	return nil
}

// TestTensorize replaces a matmul's column tile (and its reduction) by a
// kernel call and checks the result against the reference, also when the
// tile is computed at another stage's loop into a local buffer.
func TestTensorize(t *testing.T) {
	const m, k, n = 3, 5, 8
	for _, at := range []bool{false, true} {
		t.Run(fmt.Sprintf("compute_at=%v", at), func(t *testing.T) {
			a := te.Placeholder("A", f32, ir.Shape{m, k})
			b := te.Placeholder("B", f32, ir.Shape{k, n})
			c := matmul("C", a, b)
			out := c
			if at {
				out = te.Compute("D", c.Shape, func(i []tir.PrimExpr) tir.PrimExpr { return c.At(i...) })
			}
			s := te.CreateSchedule(out)
			st := s.Stage(c)
			intrin := func(ctx *te.TensorizeContext) (tir.Stmt, error) {
				if len(ctx.Extent) != 2 || ctx.Extent[0] != 1 || ctx.Extent[1] != 4 {
					return nil, fmt.Errorf("extents %v", ctx.Extent)
				}
				al, err := ctx.Load(a, ctx.Axis[0], tir.Idx(0))
				if err != nil {
					return nil, err
				}
				bl, err := ctx.Load(b, tir.Idx(0), ctx.Axis[1])
				if err != nil {
					return nil, err
				}
				cl := tir.NewLoad(ctx.Out, ctx.OutIndex...)
				return tir.Eval(tir.CallKernel(&rowKernel{n: 4, k: k, ldb: n}, tir.AddressOf(cl), tir.AddressOf(al), tir.AddressOf(bl))), nil
			}
			if at {
				o := s.Stage(out)
				ax := o.Axis()
				jo, _ := o.Split(ax[1], 4)
				st.ComputeAt(o, jo)
				st.SetScope(tir.ScopeLocal)
				st.Tensorize(st.Axis()[0], intrin)
			} else {
				ax := st.Axis()
				_, ji := st.Split(ax[1], 4)
				st.Tensorize(ji, intrin)
			}
			f := mustLower(t, "tensorized", []*te.Tensor{a, b, out}, s)
			text := f.String()
			if !strings.Contains(text, `T.call_kernel("row_4_5_8"`) || strings.Contains(text, "k in") {
				t.Errorf("want one kernel call per tile and no reduction loop:\n%s", text)
			}
			checkRun(t, f, 2, func(in []*interp.Array) [][]float64 {
				return [][]float64{fromF32(refMatmul(f32s(in[0]), f32s(in[1]), m, k, n))}
			})
		})
	}
}

// TestTensorizeErrors: loops the intrinsic cannot take are refused with
// a message naming the stage.
func TestTensorizeErrors(t *testing.T) {
	noop := func(*te.TensorizeContext) (tir.Stmt, error) { return tir.Eval(tir.Idx(0)), nil }
	cases := []struct {
		name  string
		sched func(st *te.Stage)
		want  string
	}{
		{"reduction_outside", func(st *te.Stage) {
			ax := st.Axis()
			st.Reorder(ax[0], st.ReduceAxes()[0], ax[1])
			st.Tensorize(ax[1], noop)
		}, "reduction loop k is outside the tensorized loops"},
		{"fused_inside", func(st *te.Stage) {
			ax := st.Axis()
			st.Tensorize(st.Fuse(ax[0], ax[1]), noop)
		}, "is a fused loop"},
		{"guarded", func(st *te.Stage) {
			ax := st.Axis()
			_, ji := st.Split(ax[1], 3)
			st.Tensorize(ji, noop)
		}, "needs bound guards"},
		{"nil_statement", func(st *te.Stage) {
			st.Tensorize(st.Axis()[0], func(*te.TensorizeContext) (tir.Stmt, error) { return nil, nil })
		}, "built no statement"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := te.Placeholder("A", f32, ir.Shape{3, 5})
			b := te.Placeholder("B", f32, ir.Shape{5, 8})
			cc := matmul("C", a, b)
			s := te.CreateSchedule(cc)
			c.sched(s.Stage(cc))
			_, err := te.Lower("f", []*te.Tensor{a, b, cc}, s, te.LowerOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "tensorize C") {
				t.Errorf("err %v, want %q", err, c.want)
			}
		})
	}
}
