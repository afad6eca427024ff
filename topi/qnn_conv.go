package topi

import (
	"fmt"
	"slices"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// qnn.conv2d, the convolution of 8-bit integers:
//
//   - generic: the convolution of the centred operands in int32, any
//     groups and zero points, on any target (the reference's arithmetic);
//   - cpu: groups 1, weights int8 with zero point 0 (what quantizers
//     write) packed OIHW4i (the importer packs constant weights). The
//     input is first laid out channels in fours (qconvPackKernel, per
//     image, in blocks of rows, in parallel); then qconvKernel runs once per
//     tile of output pixels, in parallel: it copies the tile's taps (one
//     32-bit word holds four input channels of a pixel) and multiplies
//     them with the weight words using the target's widest integer dot
//     product (AVX-512 VNNI vpdpbusd, AVX-VNNI; AVX2 vpmaddubsw when the
//     weight's kernel_pair_bound rules out saturation (7-bit weights, as
//     kiln quantize --reduce-range writes), else vpmaddwd on the bytes
//     widened to 16 bits; Arm sdot, or NEON's widening multiply without
//     it; else plain C), then
//     subtracts input_zero_point times each channel's weight sum.

func init() {
	mustAddNN(op.QConv2D, strategy.Implementation{Name: "qnn.conv2d.generic", PLevel: strategy.PLevelGeneric,
		Compute: computeQConv, Schedule: scheduleConv})
	mustAddNN(op.QConv2DRequantize, strategy.Implementation{Name: "qnn.conv2d_requantize.generic", PLevel: strategy.PLevelGeneric,
		Compute: computeQConvRequantize, Schedule: scheduleConv})
	for _, impl := range []struct {
		o *op.Op
		strategy.Implementation
	}{
		{op.QConv2D, strategy.Implementation{Name: "qnn.conv2d.cpu", PLevel: strategy.PLevelTuned,
			Compute: computeQConvCPU, Schedule: ScheduleInjective, Valid: validQConvCPU}},
		{op.QConv2DRequantize, strategy.Implementation{Name: "qnn.conv2d_requantize.cpu", PLevel: strategy.PLevelTuned,
			Compute: computeQConvRequantizeCPU, Schedule: ScheduleInjective, Valid: validQConvCPU}},
	} {
		if err := strategy.Default.Add(impl.o, strategy.ForKey("cpu"), impl.Implementation); err != nil {
			panic(err)
		}
	}
}

// computeQConv is qnn.conv2d on centred int32 operands (computeConv's
// loops; a padded tap reads 0, the centred zero point). A packed weight
// (OIHW4i, OIHW4i16o) is read through its layout.
func computeQConv(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	izp, kzp := c.Attrs.Int("input_zero_point"), c.Attrs.Int("kernel_zero_point")
	x, w := in[0], in[1]
	ws, err := op.QConvWeightShape(x.Shape, w.Shape, c.Attrs)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", c.Op.Name, err)
	}
	xc := te.Compute("qconv_data", x.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		return tir.Sub(tir.NewCast(tir.Int32T, x.At(i...)), tir.Int32(izp))
	}, te.WithTag("elemwise"))
	wc := te.Compute("qconv_weight", ws, func(i []tir.PrimExpr) tir.PrimExpr {
		var v tir.PrimExpr
		switch len(w.Shape) {
		case 5: // OIHW4i
			v = w.At(i[0], tir.FloorDiv(i[1], tir.Idx(4)), i[2], i[3], tir.FloorMod(i[1], tir.Idx(4)))
		case 6: // OIHW4i16o
			v = w.At(tir.FloorDiv(i[0], tir.Idx(16)), tir.FloorDiv(i[1], tir.Idx(4)), i[2], i[3], tir.FloorMod(i[0], tir.Idx(16)), tir.FloorMod(i[1], tir.Idx(4)))
		default:
			v = w.At(i...)
		}
		return tir.Sub(tir.NewCast(tir.Int32T, v), tir.Int32(kzp))
	}, te.WithTag("elemwise"))
	return computeConv(c, []*te.Tensor{xc, wc})
}

// qconvMaxK bounds the reduction of the CPU kernel: K * 255 * 128 stays
// below 2^31, so its int32 sums never wrap.
const qconvMaxK = 65793

// qconvMaxTile bounds the kernel's packed tile, which lives on the stack
// of the thread running it: 256 KiB (a reduction of 8192 at 32 pixels).
const qconvMaxTile = 256 << 10

// validQConvCPU accepts what the CPU kernel computes.
func validQConvCPU(c *strategy.Call) bool {
	if c.Target == nil || len(c.ArgTypes) < 2 || c.Attrs.Int("groups") != 1 || c.Attrs.Int("kernel_zero_point") != 0 {
		return false
	}
	xt, ok1 := c.ArgTypes[0].(*ir.TensorType)
	wt, ok2 := c.ArgTypes[1].(*ir.TensorType)
	ot, ok3 := c.OutType.(*ir.TensorType)
	if !ok1 || !ok2 || !ok3 || wt.DType != ir.Int8 || len(xt.Shape) != 4 || ot.Shape.NumElements() == 0 {
		return false
	}
	switch l := c.Attrs.Str("kernel_layout"); {
	case l == "OIHW4i" && len(wt.Shape) == 5:
	case l == "OIHW4i16o" && len(wt.Shape) == 6 && c.Op == op.QConv2DRequantize:
		// The broadcast form (qnn_conv_bcast.go), which requantizes.
	default:
		return false
	}
	k := wt.Shape[1] * 4 * wt.Shape[2] * wt.Shape[3]
	return k > 0 && k <= qconvMaxK && k*32 <= qconvMaxTile && xt.Shape.NumElements() <= 1<<31-1 && ot.Shape.NumElements() <= 1<<31-1
}

func computeQConvCPU(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	return qconvCPU(c, in, nil)
}

// computeQConvRequantizeCPU is qnn.conv2d_requantize through the CPU
// kernel, requantizing in registers.
func computeQConvRequantizeCPU(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	return qconvCPU(c, in, newQConvEpi(c, in))
}

// newQConvEpi is a qnn.conv2d_requantize call's requantization.
func newQConvEpi(c *strategy.Call, in []*te.Tensor) *qconvEpi {
	lo, hi := op.RequantizeRange(c.Attrs)
	return &qconvEpi{shift: c.Attrs.Int("shift"), zp: c.Attrs.Int("out_zero_point"), lo: lo, hi: hi,
		perChannel: len(in[3].Shape) == 1, signed: c.OutTensor().DType == ir.Int8}
}

// newQConvParams reads a qnn.conv2d call's geometry for the CPU kernels.
func newQConvParams(c *strategy.Call, x, w *te.Tensor) (qconvParams, error) {
	p, err := qconvParamsOf(c.Target.Processor(), x.Shape, c.OutTensor().Shape, w.Shape[2], w.Shape[3], c.Attrs, x.DType == ir.Int8)
	if err != nil {
		return qconvParams{}, fmt.Errorf("%s: %v", c.Op.Name, err)
	}
	return p, nil
}

// qconvParamsOf is the CPU kernels' view of a qnn.conv2d of data and out
// shapes (NCHW), a KH x KW kernel and attributes attrs on processor
// proc; signed: int8 data.
func qconvParamsOf(proc *targets.Processor, data, out ir.Shape, kh, kw int64, attrs ir.Attrs, signed bool) (qconvParams, error) {
	strides, pb, _, dil, err := op.SpatialAttrs(attrs, 2)
	if err != nil {
		return qconvParams{}, err
	}
	isa, bound := qconvISAFor(proc.Features), attrs.Int("kernel_pair_bound")
	l1 := proc.L1D
	if l1 <= 0 {
		l1 = 32 << 10
	}
	return qconvParams{
		c: data[1], h: data[2], w: data[3], oc: out[1], oh: out[2], ow: out[3],
		kh: kh, kw: kw, sh: strides[0], sw: strides[1], ph: pb[0], pw: pb[1], dh: dil[0], dw: dil[1],
		izp: attrs.Int("input_zero_point"), signed: signed, isa: isa,
		maddubs: isa == qconvAVX2 && bound > 0 && bound <= 128, l1: l1,
	}, nil
}

// qconvCPU builds the CPU kernel's stages: the weight sums (unless the
// call has them), the input in channel groups of four and the tiles;
// with epi, in[2] and in[3] are the bias and the multipliers.
func qconvCPU(c *strategy.Call, in []*te.Tensor, epi *qconvEpi) ([]*te.Tensor, error) {
	x, w := in[0], in[1]
	ot := c.OutTensor()
	p, err := newQConvParams(c, x, w)
	if err != nil {
		return nil, err
	}
	// The tile kernel: the broadcast form for an OIHW4i16o weight, else
	// the usual or the direct form; dir is the padded layout they read
	// (nil: the input's own rows).
	var (
		kern  tir.Kernel
		tiles int64
		dir   *qconvDirect
		wk    = w
	)
	if len(w.Shape) == 6 {
		bk, err := newQConvBcastKernel(p, epi)
		if err != nil {
			return nil, err
		}
		kern, tiles, dir = bk, bk.tiles(), bk.dir
	} else {
		k, err := newQConvKernel(p, epi)
		if err != nil {
			return nil, err
		}
		kern, tiles, dir = k, k.tiles, k.dir
		if k.w16 {
			wk = qconvW16(w, k)
		}
	}
	c4 := (p.c + 3) / 4
	// The weight's sums per output channel: the call's kernel sums (the
	// last argument, computed at compile time: qnn_kernel_sums), or
	// summed here, on every run.
	nargs := 2
	if epi != nil {
		nargs = 4
	}
	var wsum *te.Tensor
	if len(in) > nargs {
		wsum = in[nargs]
	} else {
		rc, rh, rw, ri := te.ReduceAxis(c4, "rc"), te.ReduceAxis(p.kh, "rh"), te.ReduceAxis(p.kw, "rw"), te.ReduceAxis(4, "ri")
		wsum = te.ComputeReduce("qconv_wsum", ir.Shape{p.oc}, te.Sum, []*te.IterVar{rc, rh, rw, ri}, func(i []tir.PrimExpr) tir.PrimExpr {
			if len(w.Shape) == 6 {
				return tir.NewCast(tir.Int32T, w.At(tir.FloorDiv(i[0], tir.Idx(16)), rc.Var, rh.Var, rw.Var, tir.FloorMod(i[0], tir.Idx(16)), ri.Var))
			}
			return tir.NewCast(tir.Int32T, w.At(i[0], rc.Var, rh.Var, rw.Var, ri.Var))
		})
	}
	n := x.Shape[0]
	// The input, channels in fours: X4[n, c/4, y, x, c%4] as uint8 (int8
	// data plus 128), channels beyond C zero; for the direct form, each
	// image's padded planes and slack as bytes.
	pk := newQConvPackKernel(p, dir)
	x4Shape := ir.Shape{n, c4, p.h, p.w, 4}
	if dir != nil {
		x4Shape = ir.Shape{n, dir.imageBytes(c4)}
	}
	// x4At is the address of image iv's layout.
	x4At := func(b *tir.Buffer, iv tir.PrimExpr) tir.PrimExpr {
		idx := zeros(len(x4Shape))
		idx[0] = iv
		return tir.AddressOf(tir.NewLoad(b, idx...))
	}
	x4 := te.Extern("qconv_nc4hw4", []ir.Shape{x4Shape}, []ir.DType{ir.Uint8}, []*te.Tensor{x}, func(ins, outs []*tir.Buffer) tir.Stmt {
		iv, uv := tir.NewVar("n", tir.Int32T), tir.NewVar("u", tir.Int32T)
		zero := tir.Idx(0)
		call := tir.CallKernel(pk,
			tir.AddressOf(tir.NewLoad(ins[0], iv, zero, zero, zero)),
			x4At(outs[0], iv),
			uv)
		calls := pk.split.calls()
		kind := tir.Parallel
		if calls < 2 {
			kind = tir.Serial
		}
		return tir.Loop(iv, n, tir.Serial, tir.Loop(uv, calls, kind, tir.Eval(call)))
	})[0]
	inputs := []*te.Tensor{x4, wk, wsum}
	if epi != nil {
		inputs = append(inputs, in[2], in[3])
	}
	outs := te.Extern(nnName(c), []ir.Shape{ot.Shape}, []ir.DType{ot.DType}, inputs, func(ins, outs []*tir.Buffer) tir.Stmt {
		iv, tv := tir.NewVar("n", tir.Int32T), tir.NewVar("tile", tir.Int32T)
		zero := tir.Idx(0)
		args := []tir.PrimExpr{
			x4At(ins[0], iv),
			tir.AddressOf(tir.NewLoad(ins[1], zeros(len(ins[1].Shape))...)),
			tir.AddressOf(tir.NewLoad(ins[2], zero)),
		}
		if epi != nil {
			var mi []tir.PrimExpr
			if epi.perChannel {
				mi = []tir.PrimExpr{zero}
			}
			args = append(args, tir.AddressOf(tir.NewLoad(ins[3], zero)), tir.AddressOf(tir.NewLoad(ins[4], mi...)))
		}
		args = append(args, tir.AddressOf(tir.NewLoad(outs[0], iv, zero, zero, zero)), tv)
		call := tir.CallKernel(kern, args...)
		kind := tir.Parallel
		if tiles < 2 {
			kind = tir.Serial
		}
		return tir.Loop(iv, n, tir.Serial, tir.Loop(tv, tiles, kind, tir.Eval(call)))
	})
	return outs, nil
}

// qconvW16 is the AVX2 kernel's weight: the OIHW4i words widened to
// int16 once per call, each word's channels in the order 0, 2, 1, 3, so
// that the kernel broadcasts two 32-bit words (channels 0 and 2, then 1
// and 3) straight into vpmaddwd instead of sign-extending every word in
// every tile.
func qconvW16(w *te.Tensor, k *qconvKernel) *te.Tensor {
	p := k.p
	taps := p.kh * p.kw
	return te.Compute("qconv_w16", ir.Shape{p.oc, k.k4, 4}, func(i []tir.PrimExpr) tir.PrimExpr {
		t := tir.FloorMod(i[1], tir.Idx(taps))
		lane := tir.Add(tir.Mul(tir.FloorMod(i[2], tir.Idx(2)), tir.Idx(2)), tir.FloorDiv(i[2], tir.Idx(2)))
		return tir.NewCast(tir.Scalar(ir.Int16), w.At(i[0], tir.FloorDiv(i[1], tir.Idx(taps)), tir.FloorDiv(t, tir.Idx(p.kw)), tir.FloorMod(t, tir.Idx(p.kw)), lane))
	}, te.WithTag("injective"))
}

// zeros is n zero indices.
func zeros(n int) []tir.PrimExpr {
	z := make([]tir.PrimExpr, n)
	for i := range z {
		z[i] = tir.Idx(0)
	}
	return z
}

// qconvISA is the integer dot product the kernel is written with.
type qconvISA int

const (
	qconvScalar     qconvISA = iota
	qconvAVX512VNNI          // vpdpbusd on 512-bit vectors
	qconvAVXVNNI             // vpdpbusd on 256-bit vectors (VEX)
	qconvAVX2                // vpmaddwd on 16-bit halves (AVX2 without VNNI; exact, unlike vpmaddubsw's saturating sums)
	qconvNEONDot             // Arm sdot (vdotq_s32) on signed bytes
	qconvNEON                // Arm NEON without dot products: smull of bytes, pairwise accumulation
)

// header is the C include of the ISA's intrinsics, under its guard (""
// for plain C).
func (isa qconvISA) header() string {
	h := "<immintrin.h>"
	switch isa {
	case qconvScalar:
		return ""
	case qconvNEONDot, qconvNEON:
		h = "<arm_neon.h>"
	}
	return "#if " + isa.guard() + "\n#include " + h + "\n#endif"
}

// guard is the preprocessor condition under which the ISA's intrinsics
// compile: the C compiler targets the instruction set ("" for plain C).
func (isa qconvISA) guard() string {
	switch isa {
	case qconvAVX512VNNI:
		return "defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)"
	case qconvAVXVNNI:
		return "defined(__AVXVNNI__) && defined(__AVX2__)"
	case qconvAVX2:
		return "defined(__AVX2__)"
	case qconvNEONDot:
		return "defined(__ARM_FEATURE_DOTPROD) && defined(__aarch64__)"
	case qconvNEON:
		return "defined(__ARM_NEON) && defined(__aarch64__)"
	}
	return ""
}

// hasAVX2 reports whether every processor of the instruction set has
// AVX2 with FMA (the x86 ones: the 256-bit requantization and the
// depthwise block form run there).
func (isa qconvISA) hasAVX2() bool {
	return isa == qconvAVX2 || isa == qconvAVXVNNI || isa == qconvAVX512VNNI
}

// qconvISAFor picks the widest integer dot product of a processor's
// features.
func qconvISAFor(features []string) qconvISA {
	switch {
	case slices.Contains(features, "avx512vnni") && slices.Contains(features, "avx512bw") && slices.Contains(features, "avx512vl"):
		return qconvAVX512VNNI
	case slices.Contains(features, "avxvnni"):
		return qconvAVXVNNI
	case slices.Contains(features, "avx2"):
		return qconvAVX2
	case slices.Contains(features, "dotprod"):
		return qconvNEONDot
	case slices.Contains(features, "neon"):
		return qconvNEON
	}
	return qconvScalar
}
