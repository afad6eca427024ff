package topi

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// qnn.dense, the matrix product of 8-bit integers:
//
//   - generic: the product of the centred operands in int32;
//   - cpu: int8 weights with zero point 0. Each output is one dot product
//     of a data row with a weight row (both contiguous), written as the
//     plain C loop that C compilers turn into integer dot products
//     (vpdpbusd with VNNI, vpmaddwd otherwise); the input zero point
//     times each column's weight sum is subtracted after. Calls run per
//     data row and block of 64 columns, the blocks in parallel.

func init() {
	mustAddNN(op.QDense, strategy.Implementation{Name: "qnn.dense.generic", PLevel: strategy.PLevelGeneric,
		Compute: computeQDense, Schedule: scheduleNN})
	if err := strategy.Default.Add(op.QDense, strategy.ForKey("cpu"), strategy.Implementation{
		Name: "qnn.dense.cpu", PLevel: strategy.PLevelTuned,
		Compute: computeQDenseCPU, Schedule: ScheduleInjective, Valid: validQDenseCPU,
	}); err != nil {
		panic(err)
	}
}

// qdenseBlock is the columns one kernel call computes.
const qdenseBlock = 64

func computeQDense(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x, w := in[0], in[1]
	ot := c.OutTensor()
	izp, kzp := c.Attrs.Int("input_zero_point"), c.Attrs.Int("kernel_zero_point")
	rk := te.ReduceAxis(x.Shape[1], "rk")
	out := te.ComputeReduce(nnName(c), ot.Shape, te.Sum, []*te.IterVar{rk}, func(i []tir.PrimExpr) tir.PrimExpr {
		a := tir.Sub(tir.NewCast(tir.Int32T, x.At(i[0], rk.Var)), tir.Int32(izp))
		b := tir.Sub(tir.NewCast(tir.Int32T, w.At(i[1], rk.Var)), tir.Int32(kzp))
		return tir.Mul(a, b)
	})
	return []*te.Tensor{out}, nil
}

func validQDenseCPU(c *strategy.Call) bool {
	if c.Target == nil || (len(c.ArgTypes) != 2 && len(c.ArgTypes) != 3) || c.Attrs.Int("kernel_zero_point") != 0 {
		return false
	}
	xt, ok1 := c.ArgTypes[0].(*ir.TensorType)
	wt, ok2 := c.ArgTypes[1].(*ir.TensorType)
	if !ok1 || !ok2 || wt.DType != ir.Int8 || len(xt.Shape) != 2 || len(wt.Shape) != 2 {
		return false
	}
	k := xt.Shape[1]
	return k > 0 && k <= qconvMaxK && xt.Shape[0] > 0 && wt.Shape[0] > 0 &&
		xt.Shape.NumElements() <= 1<<31-1 && wt.Shape.NumElements() <= 1<<31-1 && xt.Shape[0]*wt.Shape[0] <= 1<<31-1
}

func computeQDenseCPU(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x, w := in[0], in[1]
	ot := c.OutTensor()
	m, k, n := x.Shape[0], x.Shape[1], w.Shape[0]
	kern := newQDenseKernel(k, n, c.Attrs.Int("input_zero_point"), x.DType == ir.Int8)
	// The weight's row sums: the call's kernel sums (computed at compile
	// time), or summed here on every run.
	var wsum *te.Tensor
	if len(in) > 2 {
		wsum = in[2]
	} else {
		rk := te.ReduceAxis(k, "rk")
		wsum = te.ComputeReduce("qdense_wsum", ir.Shape{n}, te.Sum, []*te.IterVar{rk}, func(i []tir.PrimExpr) tir.PrimExpr {
			return tir.NewCast(tir.Int32T, w.At(i[0], rk.Var))
		})
	}
	blocks := (n + qdenseBlock - 1) / qdenseBlock
	return te.Extern(nnName(c), []ir.Shape{ot.Shape}, []ir.DType{ir.Int32}, []*te.Tensor{x, w, wsum}, func(ins, outs []*tir.Buffer) tir.Stmt {
		mv, bv := tir.NewVar("m", tir.Int32T), tir.NewVar("nb", tir.Int32T)
		zero := tir.Idx(0)
		call := tir.CallKernel(kern,
			tir.AddressOf(tir.NewLoad(ins[0], mv, zero)),
			tir.AddressOf(tir.NewLoad(ins[1], zero, zero)),
			tir.AddressOf(tir.NewLoad(ins[2], zero)),
			tir.AddressOf(tir.NewLoad(outs[0], mv, zero)),
			bv)
		kind := tir.Parallel
		if blocks < 2 {
			kind = tir.Serial
		}
		return tir.Loop(mv, m, tir.Serial, tir.Loop(bv, blocks, kind, tir.Eval(call)))
	}), nil
}

// qdenseKernel computes one block of columns of one data row.
type qdenseKernel struct {
	k, n, izp   int64
	signed      bool
	symbol, src string
}

func newQDenseKernel(k, n, izp int64, signed bool) *qdenseKernel {
	q := &qdenseKernel{k: k, n: n, izp: izp, signed: signed}
	xt := "uint8_t"
	if signed {
		xt = "int8_t"
	}
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("/* qnn.dense: a row of %d values against a block of %d of %d weight rows. */\n", k, qdenseBlock, n)
	w("static void KILN_SYMBOL(const %s* restrict x, const int8_t* restrict w, const int32_t* restrict wsum, int32_t* restrict out, int32_t nb) {\n", xt)
	w("  const int32_t n0 = nb * %d, n1 = n0 + %d < %d ? n0 + %d : %d;\n", qdenseBlock, qdenseBlock, n, qdenseBlock, n)
	w("  for (int32_t j = n0; j < n1; ++j) {\n")
	w("    const int8_t* restrict wr = w + (int64_t)j * %d;\n", k)
	w("    int32_t s = 0;\n")
	w("    for (int32_t l = 0; l < %d; ++l) s += (int32_t)x[l] * (int32_t)wr[l];\n", k)
	// The difference fits int32 (it is the sum of (x - izp) * w); the
	// operands may not both, so it wraps in unsigned arithmetic.
	w("    out[j] = (int32_t)((uint32_t)s - (uint32_t)(%d * wsum[j]));\n  }\n}\n", izp)
	q.symbol, q.src = kernelSymbol("kiln_qdense_", b.String())
	return q
}

// Symbol implements tir.Kernel.
func (q *qdenseKernel) Symbol() string { return q.symbol }

// Includes implements tir.Kernel.
func (q *qdenseKernel) Includes() []string { return nil }

// Source implements tir.Kernel.
func (q *qdenseKernel) Source() string { return q.src }

// Eval implements tir.Kernel: the block's sums of (x - izp) * w, exact.
func (q *qdenseKernel) Eval(args []tir.KernelArg) error {
	if len(args) != 5 {
		return fmt.Errorf("qnn.dense kernel: want 5 arguments, got %d", len(args))
	}
	xm, xo, err := args[0].Ptr(q.k)
	if err != nil {
		return fmt.Errorf("qnn.dense kernel: data: %v", err)
	}
	wm, wo, err := args[1].Ptr(q.n * q.k)
	if err != nil {
		return fmt.Errorf("qnn.dense kernel: weight: %v", err)
	}
	om, oo, err := args[3].Ptr(q.n)
	if err != nil {
		return fmt.Errorf("qnn.dense kernel: output: %v", err)
	}
	n0 := args[4].Int * qdenseBlock
	for j := n0; j < min(n0+qdenseBlock, q.n); j++ {
		var s int64
		for l := int64(0); l < q.k; l++ {
			s += (int64(xm.Float(xo+l)) - q.izp) * int64(wm.Float(wo+j*q.k+l))
		}
		om.SetFloat(oo+j, float64(int32(s)))
	}
	return nil
}
