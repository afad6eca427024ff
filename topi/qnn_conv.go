package topi

import (
	"fmt"
	"slices"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// qnn.conv2d, the convolution of 8-bit integers:
//
//   - generic: the convolution of the centred operands in int32, any
//     groups and zero points, on any target (the reference's arithmetic);
//   - cpu: groups 1, weights int8 with zero point 0 (what quantizers
//     write): an extern stage calling qconvKernel once per tile of output
//     pixels, in parallel. The kernel packs the tile's input taps (im2col,
//     four reduction steps per 32-bit lane) and multiplies them with the
//     weights in their own OIHW layout using the target's widest integer
//     dot product (AVX-512 VNNI vpdpbusd, AVX-VNNI, else plain C), then
//     subtracts input_zero_point times each channel's weight sum.

func init() {
	mustAddNN(op.QConv2D, strategy.Implementation{Name: "qnn.conv2d.generic", PLevel: strategy.PLevelGeneric,
		Compute: computeQConv, Schedule: scheduleConv})
	if err := strategy.Default.Add(op.QConv2D, strategy.ForKey("cpu"), strategy.Implementation{
		Name: "qnn.conv2d.cpu", PLevel: strategy.PLevelTuned,
		Compute: computeQConvCPU, Schedule: ScheduleInjective, Valid: validQConvCPU,
	}); err != nil {
		panic(err)
	}
}

// computeQConv is qnn.conv2d on centred int32 operands (computeConv's
// loops; a padded tap reads 0, the centred zero point).
func computeQConv(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	izp, kzp := c.Attrs.Int("input_zero_point"), c.Attrs.Int("kernel_zero_point")
	centre := func(t *te.Tensor, zp int64, name string) *te.Tensor {
		return te.Compute(name, t.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
			return tir.Sub(tir.NewCast(tir.Int32T, t.At(i...)), tir.Int32(zp))
		}, te.WithTag("elemwise"))
	}
	return computeConv(c, []*te.Tensor{centre(in[0], izp, "qconv_data"), centre(in[1], kzp, "qconv_weight")})
}

// qconvMaxK bounds the reduction of the CPU kernel: K * 255 * 128 stays
// below 2^31, so its int32 sums never wrap.
const qconvMaxK = 65793

// qconvMaxTile bounds the kernel's packed tile, which lives on the stack
// of the thread running it: 256 KiB (a reduction of 8192 at 32 pixels).
const qconvMaxTile = 256 << 10

// validQConvCPU accepts what the CPU kernel computes.
func validQConvCPU(c *strategy.Call) bool {
	if c.Target == nil || len(c.ArgTypes) != 2 || c.Attrs.Int("groups") != 1 || c.Attrs.Int("kernel_zero_point") != 0 {
		return false
	}
	xt, ok1 := c.ArgTypes[0].(*ir.TensorType)
	wt, ok2 := c.ArgTypes[1].(*ir.TensorType)
	ot, ok3 := c.OutType.(*ir.TensorType)
	if !ok1 || !ok2 || !ok3 || wt.DType != ir.Int8 || len(xt.Shape) != 4 || len(wt.Shape) != 4 || ot.Shape.NumElements() == 0 {
		return false
	}
	k := wt.Shape[1] * wt.Shape[2] * wt.Shape[3]
	return k > 0 && k <= qconvMaxK && (k+3)/4*4*32 <= qconvMaxTile && xt.Shape.NumElements() <= 1<<31-1 && ot.Shape.NumElements() <= 1<<31-1
}

func computeQConvCPU(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x, w := in[0], in[1]
	ot := c.OutTensor()
	strides, pb, _, dil, err := op.SpatialAttrs(c.Attrs, 2)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", c.Op.Name, err)
	}
	p := qconvParams{
		c: x.Shape[1], h: x.Shape[2], w: x.Shape[3], oc: ot.Shape[1], oh: ot.Shape[2], ow: ot.Shape[3],
		kh: w.Shape[2], kw: w.Shape[3], sh: strides[0], sw: strides[1], ph: pb[0], pw: pb[1], dh: dil[0], dw: dil[1],
		izp: c.Attrs.Int("input_zero_point"), signed: x.DType == ir.Int8, isa: qconvISAFor(c.Target.Processor().Features),
	}
	k, err := newQConvKernel(p)
	if err != nil {
		return nil, err
	}
	rc, rh, rw := te.ReduceAxis(p.c, "rc"), te.ReduceAxis(p.kh, "rh"), te.ReduceAxis(p.kw, "rw")
	wsum := te.ComputeReduce("qconv_wsum", ir.Shape{p.oc}, te.Sum, []*te.IterVar{rc, rh, rw}, func(i []tir.PrimExpr) tir.PrimExpr {
		return tir.NewCast(tir.Int32T, w.At(i[0], rc.Var, rh.Var, rw.Var))
	})
	n := x.Shape[0]
	outs := te.Extern(nnName(c), []ir.Shape{ot.Shape}, []ir.DType{ir.Int32}, []*te.Tensor{x, w, wsum}, func(ins, outs []*tir.Buffer) tir.Stmt {
		iv, tv := tir.NewVar("n", tir.Int32T), tir.NewVar("tile", tir.Int32T)
		zero := tir.Idx(0)
		call := tir.CallKernel(k,
			tir.AddressOf(tir.NewLoad(ins[0], iv, zero, zero, zero)),
			tir.AddressOf(tir.NewLoad(ins[1], zero, zero, zero, zero)),
			tir.AddressOf(tir.NewLoad(ins[2], zero)),
			tir.AddressOf(tir.NewLoad(outs[0], iv, zero, zero, zero)),
			tv)
		kind := tir.Parallel
		if k.tiles < 2 {
			kind = tir.Serial
		}
		return tir.Loop(iv, n, tir.Serial, tir.Loop(tv, k.tiles, kind, tir.Eval(call)))
	})
	return outs, nil
}

// qconvISA is the integer dot product the kernel is written with.
type qconvISA int

const (
	qconvScalar     qconvISA = iota
	qconvAVX512VNNI          // vpdpbusd on 512-bit vectors
	qconvAVXVNNI             // vpdpbusd on 256-bit vectors (VEX)
)

// qconvISAFor picks the widest integer dot product of a processor's
// features.
func qconvISAFor(features []string) qconvISA {
	switch {
	case slices.Contains(features, "avx512vnni") && slices.Contains(features, "avx512bw"):
		return qconvAVX512VNNI
	case slices.Contains(features, "avxvnni"):
		return qconvAVXVNNI
	}
	return qconvScalar
}
