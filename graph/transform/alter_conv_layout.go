package transform

import (
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// AlterConvLayout rewrites every float32 nn.conv2d with groups 1 and a
// constant weight whose output channels are a multiple of 8 (or become
// one with at most an eighth more, zero channels that no output reads:
// convPadBlock) into nn.contrib_conv2d_packed with the weight repacked,
// at compile time, into blocks of 16 output channels (8 when 16 does not
// divide them): the layout in which the CPU schedule (topi/conv2d_cpu.go)
// vectorises over output channels, as TVM's AlterOpLayout prepares
// conv2d_NCHWc. Data and
// output stay NCHW, so nothing else in the graph changes. A weight shared
// by several convolutions is packed once.
func AlterConvLayout(m *graph.Module) (*graph.Module, error) {
	return AlterConvLayoutWith(m, ConvLayoutOptions{})
}

// ConvLayoutOptions are the target's say in AlterConvLayout.
type ConvLayoutOptions struct {
	// WinogradMaxBytes, when positive, keeps a 3x3 convolution direct
	// unless the Winograd form's transformed weight (16 planes of OC x
	// IC) and, for fewer than 128 output channels, its transformed input
	// (16 planes of the output's 2x2 tiles) fit in it (winogradFits): the
	// host processor's L2 where the direct kernels run near the
	// multiply-add rate and the Winograd form's planes would stream from
	// L3 (topi.WinogradMaxBytes).
	WinogradMaxBytes int64
	// WinogradRowTiles, when set, reports whether the target runs the
	// Winograd form of an ic -> oc convolution with its weight in blocks
	// of block channels by tiles of output rows, transforming each
	// tile's input as it goes (topi.WinogradRowTiles): its transformed
	// input is then never whole, and WinogradMaxBytes bounds only its
	// transformed weight.
	WinogradRowTiles func(ic, oc, block int64) bool
	// PadBlock, when set, is the block to which a convolution's oc
	// output channels, which a block of 16 does not divide, are padded
	// with zero channels (0: none, the usual blocks of 8): steps
	// multiply-adds per output, outputs outputs per channel. The target
	// answers where a wider block lets its vector kernels put output
	// channels in the lanes (topi.ConvPadBlock; squeezenet1_1's 512 ->
	// 1000 classifier as 1008 channels in blocks of 16 on AVX-512).
	PadBlock func(steps, oc, outputs int64) int64
}

// AlterConvLayoutWith is AlterConvLayout with the target's options.
func AlterConvLayoutWith(m *graph.Module, opts ConvLayoutOptions) (*graph.Module, error) {
	packed := map[packKey]*graph.Constant{}
	r := newBodyRewriter(func(e graph.Expr) (graph.Expr, error) {
		if _, err := graph.InferExpr(m, e); err != nil {
			return nil, err
		}
		out := alterConv(e, packed, opts)
		if out != e {
			if _, err := graph.InferExpr(m, out); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
	return mapModule(m, r.function)
}

type packKey struct {
	w        *tensor.Tensor
	b        int64
	winograd bool
}

// convPackBlock is the output-channel block of a packed weight for oc
// output channels (and the panel width of a packed matrix-product weight
// with oc columns): 16, or 8 when 16 does not divide oc, or 0 when the
// operator is left alone.
func convPackBlock(oc int64) int64 {
	switch {
	case oc%16 == 0:
		return 16
	case oc%8 == 0:
		return 8
	}
	return 0
}

// convPadBlock is the block of a packed weight whose oc output channels
// no block divides, padded with zero channels to a multiple of 8 (a
// detection head's 255 channels: 256 in blocks of 16; a segmentation
// head's 21: 24 in blocks of 8; an image's 3: one block of 8); 0 for a
// single channel, which is left alone. Unpacked, such a convolution runs
// one output channel per register tile and reads its whole input once per
// output channel. Measured on AVX2 (1 and 2 threads, medians of 30):
// 256 -> 255 on 13x13 0.96 ms unpacked against ORT's 0.50; 32 -> 21 1x1
// on 28x28 0.038 -> 0.016 ms padded, on 224x224 (the 6.4 MB input read 21
// times) 5.2 -> 1.8 ms; 16 -> 10 3x3 on 112x112 0.81 -> 0.52; 64 -> 3 3x3
// equal at 1 thread and 18-32 % faster at 2; 64 -> 2 3x3 equal at 1
// thread, 35 % faster at 2; one channel 5-10 % slower padded.
func convPadBlock(oc int64) int64 {
	if oc < 2 {
		return 0
	}
	return convPackBlock((oc + 7) / 8 * 8)
}

// wideBlock is opts.PadBlock's block for convolution c with an OIHW
// weight of shape w, when its output's type is known and the block is a
// multiple of 8 (0 otherwise).
func wideBlock(c *graph.Call, w ir.Shape, padBlock func(steps, oc, outputs int64) int64) int64 {
	out, ok := c.Type().(*ir.TensorType)
	if padBlock == nil || !ok || len(out.Shape) != 4 {
		return 0
	}
	if b := padBlock(w[1]*w[2]*w[3], w[0], out.Shape[2]*out.Shape[3]); b > 0 && b%8 == 0 {
		return b
	}
	return 0
}

// useWinograd reports whether a convolution (groups 1, float32, a
// constant OIHW weight of wShape on an input of xShape) runs as
// nn.contrib_conv2d_winograd: 3x3, stride and dilation 1, with enough
// input and output channels that the products (16 per 2x2 outputs and
// channel pair, against 36) outweigh the transforms, at least half as
// many output channels as input channels, and an output of at most
// op.WinogradMaxWidth columns.
func useWinograd(c *graph.Call, xShape, wShape ir.Shape) bool {
	if wShape[2] != 3 || wShape[3] != 3 || wShape[0] < winogradMinChannels || wShape[1] < winogradMinChannels {
		return false
	}
	// The input transform and its 16 planes per input channel are paid
	// per input channel and shared by the output channels: a convolution
	// to fewer than half its input channels spends more moving them than
	// the products save (DenseNet's 128 -> 32 on 56x56: 2.6-2.8 ms each
	// against ORT's 1.3 on Zen 5; the network 21.5-26.4 -> 18.4-20.5 ms
	// direct, and equal either way in AVX2 code).
	if 2*wShape[0] < wShape[1] {
		return false
	}
	s, pb, pe, d, err := op.SpatialAttrs(c.Attrs, 2)
	if err != nil || s[0] != 1 || s[1] != 1 || d[0] != 1 || d[1] != 1 {
		return false
	}
	ow := op.WindowOutDim(xShape[3], 3, 1, 1, pb[1], pe[1], false)
	oh := op.WindowOutDim(xShape[2], 3, 1, 1, pb[0], pe[0], false)
	return oh >= 2 && ow >= 2 && ow <= op.WinogradMaxWidth
}

// winogradFits reports whether the Winograd form of a 3x3 stride-1
// convolution c of wShape on xShape keeps its transformed weight
// (16 x OC x IC floats) within limit bytes, and its transformed input
// (16 x IC x tiles floats, tiles the 2x2 tiles of the output) too unless
// at least winogradReuseChannels output channels reuse each of its
// values or it runs by row tiles (rowTiles: its transformed input is
// never whole); true when limit is not positive. On an Emerald Rapids core
// (2 MiB L2), minima of in-model medians, direct against Winograd:
// resnet18's 64 -> 64 on 56x56 (3.2 MB of transformed input) 1.72-1.92
// ms against 1.92-2.21; 256 -> 256 on 14x14 (4 MB of transformed
// weight) 1.69-1.78 against 1.97-2.03; 512 -> 512 on 7x7 (16 MB)
// 2.20-2.29 against 2.27-2.33; googlenet's 144 -> 288 and 160 -> 320 on
// 14x14 and 192 -> 384 on 7x7 (2.6-4.7 MB) 0.10-0.14 ms faster direct;
// but resnet18's 128 -> 128 on 28x28 (1.6 and 1 MB) 1.65-1.70 against
// 1.30-1.33, and googlenet's 64 -> 192 on 56x56 (3.2 MB of input, read
// by 192 channels) 4.81 against 4.25.
func winogradFits(c *graph.Call, xShape, wShape ir.Shape, limit int64, rowTiles bool) bool {
	if limit <= 0 {
		return true
	}
	_, pb, pe, _, err := op.SpatialAttrs(c.Attrs, 2)
	if err != nil {
		return false
	}
	oh := op.WindowOutDim(xShape[2], 3, 1, 1, pb[0], pe[0], false)
	ow := op.WindowOutDim(xShape[3], 3, 1, 1, pb[1], pe[1], false)
	const planes, f32 = 16, 4
	// The operands are within the memory budget, so these byte counts
	// (16 x 4 times an input's or a weight's element count, at most)
	// cannot overflow.
	tiles := ((oh + 1) / 2) * ((ow + 1) / 2)
	ic, oc := wShape[1], wShape[0]
	return planes*f32*oc*ic <= limit && (planes*f32*ic*tiles <= limit || oc >= winogradReuseChannels || rowTiles)
}

// winogradReuseChannels is the fewest output channels for which a
// Winograd convolution's transformed input may outgrow
// ConvLayoutOptions.WinogradMaxBytes (winogradFits).
const winogradReuseChannels = 128

// winogradMinChannels is the fewest input and output channels for which
// a 3x3 convolution runs as a Winograd one.
const winogradMinChannels = 16

// packedWeight is the packed (or Winograd-transformed) constant for key,
// made once per weight; nil when it cannot be made (over the memory
// budget).
func packedWeight(packed map[packKey]*graph.Constant, key packKey) *graph.Constant {
	if pc := packed[key]; pc != nil {
		return pc
	}
	pack := ref.PackConv2DWeight
	if key.winograd {
		pack = ref.TransformWinogradWeight
	}
	pw, err := pack(key.w, key.b)
	if err != nil {
		return nil
	}
	pc := graph.NewConstant(pw)
	packed[key] = pc
	return pc
}

func alterConv(e graph.Expr, packed map[packKey]*graph.Constant, opts ConvLayoutOptions) graph.Expr {
	c, ok := e.(*graph.Call)
	if !ok || c.Op != op.Conv2D || len(c.Args) != 2 {
		return e
	}
	w, ok := c.Args[1].(*graph.Constant)
	if !ok || w.Value.DType != ir.Float32 || len(w.Value.Shape) != 4 {
		return e
	}
	xt, ok := c.Args[0].Type().(*ir.TensorType)
	if !ok || xt.DType != ir.Float32 || len(xt.Shape) != 4 {
		return e
	}
	if g, ok := c.Attrs["groups"].(int64); !ok || g != 1 {
		return e
	}
	oc := w.Value.Shape[0]
	b := convPackBlock(oc)
	padded := false
	if b == 0 {
		b, padded = convPadBlock(oc), true
		if b == 0 {
			return e
		}
	}
	attrs := ir.Attrs{}
	for _, name := range []string{"strides", "padding", "dilation"} {
		if v, ok := c.Attrs[name]; ok {
			attrs[name] = v
		}
	}
	winograd := !padded && useWinograd(c, xt.Shape, w.Value.Shape) && winogradFits(c, xt.Shape, w.Value.Shape, opts.WinogradMaxBytes,
		opts.WinogradRowTiles != nil && opts.WinogradRowTiles(w.Value.Shape[1], oc, b))
	if !winograd && oc%16 != 0 {
		if pb := wideBlock(c, w.Value.Shape, opts.PadBlock); pb > b {
			b, padded = pb, true
		}
	}
	pc := packedWeight(packed, packKey{w.Value, b, winograd})
	if pc == nil && winograd {
		// The transformed weight (16/9 of the weight) over the memory
		// budget: packed instead.
		winograd = false
		pc = packedWeight(packed, packKey{w.Value, b, false})
	}
	if pc == nil {
		return e
	}
	o := op.Conv2DPacked
	switch {
	case winograd:
		o = op.Conv2DWinograd
	case padded:
		attrs["channels"] = oc
	}
	nc, err := graph.NewCall(o, []graph.Expr{c.Args[0], pc}, attrs)
	if err != nil {
		return e
	}
	nc.Span = c.Span
	return nc
}
