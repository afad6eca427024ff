package op

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// This file declares the Winograd convolution that alter_conv_layout
// (graph/transform/alter_conv_layout.go) introduces for 3x3 stride-1
// convolutions with constant weights, as TVM's
// contrib_conv2d_winograd_without_weight_transform: the weight is
// transformed once, at compile time.
//
// Winograd's F(2x2, 3x3) computes each 2x2 output tile from a 4x4 input
// tile d (the tile's rows 2*th-pt.. and columns 2*tw-pl.. of the input,
// zero outside it) as Y = A^T [sum over ic of (G g G^T) ⊙ (B^T d B)] A,
// 16 multiplications per tile and input channel instead of 36, with
//
//	B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
//	G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//	A^T = [1 1 1 0; 0 1 -1 -1]

// WinogradTile is the number of elements of a transformed tile (4x4):
// the weight's and the transformed input's leading axis.
const WinogradTile = 16

// Conv2DWinograd is a 3x3 stride-1 convolution (groups 1, no dilation)
// of NCHW data with a Winograd-transformed weight: weight[xi, ocb, ic, ocv]
// holds (G g G^T)[xi/4][xi%4] of the OIHW weight g[ocb*B + ocv, ic],
// where B = weight.shape[3] is the output-channel block. The output is
// NCHW with ocb*B channels. Attributes as nn.conv2d (strides and
// dilation must be 1), without groups.
var Conv2DWinograd = declare(&Op{
	Name:    "nn.contrib_conv2d_winograd",
	NumArgs: 2,
	Attrs:   conv2DWindowAttrs(),
	Pattern: OutEWiseFusable,
	Rel:     conv2DWinogradRel,
	Doc:     "3x3 stride-1 2-D convolution, F(2x2, 3x3) Winograd (NCHW data, weight transformed as [16, OC/B, I, B])",
})

func conv2DWinogradRel(args []ir.Type, attrs ir.Attrs) (ir.Type, error) {
	ts, err := Tensors(args)
	if err != nil {
		return nil, err
	}
	x, w := ts[0], ts[1]
	dt, err := SameDType(x, w)
	if err != nil {
		return nil, err
	}
	if !dt.IsFloat() {
		return nil, fmt.Errorf("data type %s is not a float type", dt)
	}
	if err := checkNCSpatial(x, 2, "data"); err != nil {
		return nil, err
	}
	if len(w.Shape) != 4 || w.Shape[0] != WinogradTile {
		return nil, fmt.Errorf("transformed weight must have shape [16, OC blocks, IC, block], got %s", w)
	}
	if w.Shape[2] != x.Shape[1] {
		return nil, fmt.Errorf("transformed weight %s has %d input channels, data %s has %d", w, w.Shape[2], x, x.Shape[1])
	}
	strides, pb, pe, dil, err := SpatialAttrs(attrs, 2)
	if err != nil {
		return nil, err
	}
	out := ir.Shape{x.Shape[0], w.Shape[1] * w.Shape[3]}
	for i := 0; i < 2; i++ {
		if strides[i] != 1 || dil[i] != 1 {
			return nil, fmt.Errorf("strides %v and dilation %v: a Winograd convolution has stride and dilation 1", strides, dil)
		}
		d := WindowOutDim(x.Shape[2+i], 3, 1, 1, pb[i], pe[i], false)
		if d < 1 {
			return nil, fmt.Errorf("a 3x3 kernel does not fit data %v with padding %v", x.Shape[2:], attrs.Ints("padding"))
		}
		out = append(out, d)
	}
	return ir.NewTensorType(dt, out), nil
}

// WinogradMaxWidth is the widest output alter_conv_layout turns into a
// Winograd convolution: the CPU schedule's scratch holds at least a row
// of tiles (16 transformed products x 16 channels x OW/2 tiles, 64 KiB;
// topi/conv2d_winograd.go).
const WinogradMaxWidth = 128

// WinogradWeightShape is the shape of the transformed form of a 3x3 OIHW
// weight of shape w with output-channel block b (b must divide w[0]).
func WinogradWeightShape(w ir.Shape, b int64) ir.Shape {
	return ir.Shape{WinogradTile, w[0] / b, w[1], b}
}
