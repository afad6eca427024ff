package op

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// This file declares the layout-altered convolution that the
// alter_conv_layout graph pass (graph/transform/alter_conv_layout.go)
// introduces for convolutions with constant weights, as TVM's
// AlterOpLayout does for x86: the weight is repacked once, at compile
// time, so that a block of output channels is contiguous and a CPU
// schedule can vectorise over it.

// Conv2DPacked is a 2-D convolution (groups 1) of NCHW data with a weight
// packed by output-channel blocks: weight[ocb, ic, kh, kw, ocv] holds the
// OIHW weight element [ocb*B + ocv, ic, kh, kw], where B = weight.shape[4]
// is the block size. The output is NCHW with ocb*B channels, or with
// channels (an attribute; 0: ocb*B) when the last block is padded: the
// weight's channels from channels on are zeros that no output reads
// (alter_conv_layout pads channel counts that no block divides).
// Attributes otherwise as nn.conv2d (strides, padding, dilation), without
// groups.
var Conv2DPacked = declare(&Op{
	Name:    "nn.contrib_conv2d_packed",
	NumArgs: 2,
	Attrs: append(conv2DWindowAttrs(),
		AttrSpec{Name: "channels", Kind: ir.AttrInt, Default: int64(0)}),
	Pattern: OutEWiseFusable,
	Rel:     conv2DPackedRel,
	Doc:     "2-D convolution (NCHW data, weight packed as [OC/B, I, H, W, B])",
})

// conv2DWindowAttrs are the window attributes of the layout-altered 2-D
// convolutions: nn.conv2d's strides, padding and dilation, without groups.
func conv2DWindowAttrs() []AttrSpec {
	return []AttrSpec{
		{Name: "strides", Kind: ir.AttrInts, Default: ones(2)},
		{Name: "padding", Kind: ir.AttrInts, Default: make([]int64, 4)},
		{Name: "dilation", Kind: ir.AttrInts, Default: ones(2)},
	}
}

func conv2DPackedRel(args []ir.Type, attrs ir.Attrs) (ir.Type, error) {
	ts, err := Tensors(args)
	if err != nil {
		return nil, err
	}
	x, w := ts[0], ts[1]
	dt, err := SameDType(x, w)
	if err != nil {
		return nil, err
	}
	if !dt.IsNumeric() {
		return nil, fmt.Errorf("data type %s is not numeric", dt)
	}
	if err := checkNCSpatial(x, 2, "data"); err != nil {
		return nil, err
	}
	if len(w.Shape) != 5 {
		return nil, fmt.Errorf("packed weight must have rank 5 (OC blocks, IC, KH, KW, block), got %s", w)
	}
	if w.Shape[1] != x.Shape[1] {
		return nil, fmt.Errorf("packed weight %s has %d input channels, data %s has %d", w, w.Shape[1], x, x.Shape[1])
	}
	strides, pb, pe, dil, err := SpatialAttrs(attrs, 2)
	if err != nil {
		return nil, err
	}
	oc, err := PackedChannels(attrs, w.Shape)
	if err != nil {
		return nil, err
	}
	out := ir.Shape{x.Shape[0], oc}
	for i := 0; i < 2; i++ {
		d := WindowOutDim(x.Shape[2+i], w.Shape[2+i], strides[i], dil[i], pb[i], pe[i], false)
		if d < 1 {
			return nil, fmt.Errorf("kernel %v (dilation %v) does not fit data %v with padding %v", w.Shape[2:4], dil, x.Shape[2:], attrs.Ints("padding"))
		}
		out = append(out, d)
	}
	return ir.NewTensorType(dt, out), nil
}

// PackedChannels is the output channels of nn.contrib_conv2d_packed with
// attrs and a packed weight of shape w: the attribute channels, within
// the weight's last block, or all the weight's channels when it is 0.
func PackedChannels(attrs ir.Attrs, w ir.Shape) (int64, error) {
	all := w[0] * w[4]
	oc, _ := attrs["channels"].(int64)
	switch {
	case oc == 0:
		return all, nil
	case oc < 0 || oc > all || oc <= all-w[4]:
		return 0, fmt.Errorf("channels=%d: the packed weight %s holds %d channels in blocks of %d, want more than %d and at most %d", oc, w, all, w[4], all-w[4], all)
	}
	return oc, nil
}

// PackConv2DWeightShape is the shape of the packed form of an OIHW weight
// of shape w with output-channel block b; a last block that b does not
// fill is padded.
func PackConv2DWeightShape(w ir.Shape, b int64) ir.Shape {
	return ir.Shape{(w[0] + b - 1) / b, w[1], w[2], w[3], b}
}

// MatMulPacked is the matrix product a[..., M, K] x b[K, N] with b, a
// constant, packed in column panels: weight[nb, k, v] holds b[k, nb*B + v],
// where B = weight.shape[2] is the panel width. A CPU schedule then reads
// each panel of B columns contiguously along k (unpacked, the columns of
// one register tile lie a whole row of b apart, and every row maps to the
// same few cache sets when the row is a multiple of 4 KiB). The output is
// [..., M, nb*B]. The alter_dense_layout pass introduces it for nn.matmul
// and nn.dense with constant weights.
var MatMulPacked = declare(&Op{
	Name:    "nn.contrib_matmul_packed",
	NumArgs: 2,
	Pattern: OutEWiseFusable,
	Rel:     matmulPackedRel,
	Doc:     "matrix product a[..., M, K] x b with b packed as [N/B, K, B]",
})

func matmulPackedRel(args []ir.Type, _ ir.Attrs) (ir.Type, error) {
	ts, err := Tensors(args)
	if err != nil {
		return nil, err
	}
	a, w := ts[0], ts[1]
	dt, err := SameDType(a, w)
	if err != nil {
		return nil, err
	}
	if !dt.IsFloat() {
		return nil, fmt.Errorf("data type %s is not a float type", dt)
	}
	if len(a.Shape) < 2 {
		return nil, fmt.Errorf("data must have rank >= 2, got %s", a)
	}
	if len(w.Shape) != 3 {
		return nil, fmt.Errorf("packed weight must have rank 3 (column panels, K, panel width), got %s", w)
	}
	if k := a.Shape[len(a.Shape)-1]; w.Shape[1] != k {
		return nil, fmt.Errorf("packed weight %s has %d rows, data %s has %d columns", w, w.Shape[1], a, k)
	}
	out := a.Shape.Clone()
	out[len(out)-1] = w.Shape[0] * w.Shape[2]
	return ir.NewTensorType(dt, out), nil
}
