package ref

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// The reference kernel of nn.contrib_conv2d_winograd computes the
// F(2x2, 3x3) Winograd algorithm the op defines (graph/op/nn_winograd.go)
// in float64 and rounds each output once: the transformed weight cannot
// be turned back into the convolution's exactly (G g G^T rounds), so the
// reference is the op's own arithmetic, which equals the convolution's up
// to that rounding.

func init() {
	register(op.Conv2DWinograd, conv2DWinogradKernel)
}

// winogradG is G of F(2x2, 3x3).
var winogradG = [4][3]float64{{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}}

// TransformWinogradWeight transforms a 3x3 OIHW float weight into the
// [16, O/b, I, b] layout of nn.contrib_conv2d_winograd: element
// [xi, oc/b, ic, oc%b] = (G g G^T)[xi/4][xi%4], g = w[oc, ic]. b must
// divide the output channels.
func TransformWinogradWeight(w *tensor.Tensor, b int64) (*tensor.Tensor, error) {
	if len(w.Shape) != 4 || w.Shape[2] != 3 || w.Shape[3] != 3 || b <= 0 || w.Shape[0]%b != 0 || !w.DType.IsFloat() {
		return nil, fmt.Errorf("cannot transform weight %s (%s) for Winograd with block %d", w.Shape, w.DType, b)
	}
	oc, ic := w.Shape[0], w.Shape[1]
	// 16/9 of the weight's size: checked against the memory budget.
	out, err := tensor.NewChecked(w.DType, op.WinogradWeightShape(w.Shape, b))
	if err != nil {
		return nil, err
	}
	// Float32 weights are read and written as such: resnet18-sized
	// weights took 295 ms through the generic element access, 246 ms
	// so, in a test (most of the rest is faulting in the new tensor).
	var src, dst []float32
	if w.DType == ir.Float32 {
		src, dst = w.Float32s(), out.Float32s()
	}
	// Block by block and input channel by input channel, so that each of
	// the 16 planes gets whole runs of b values (measured within noise of
	// output channel order: 330 against 347 ms with fresh weights).
	nb := oc / b
	splitWork(int(nb), 16*oc*ic, func(lo, hi int) {
		for ob := int64(lo); ob < int64(hi); ob++ {
			transformWinogradBlock(w, out, src, dst, ob, nb, ic, b)
		}
	})
	return out, nil
}

// transformWinogradBlock writes output-channel block ob of
// TransformWinogradWeight's result out (dst: its float32s, or nil) from
// w (src: its float32s, or nil).
func transformWinogradBlock(w, out *tensor.Tensor, src, dst []float32, ob, nb, ic, b int64) {
	for c := int64(0); c < ic; c++ {
		for ov := int64(0); ov < b; ov++ {
			o := ob*b + ov
			var g [3][3]float64
			base := int((o*ic + c) * 9)
			for k := range 9 {
				if src != nil {
					g[k/3][k%3] = float64(src[base+k])
				} else {
					g[k/3][k%3] = w.Float(base + k)
				}
			}
			u := winogradWeightTile(&g)
			for xi := range int64(16) {
				at := int(((xi*nb+ob)*ic+c)*b + ov)
				if dst != nil {
					dst[at] = float32(u[xi])
				} else {
					out.SetFloat(at, u[xi])
				}
			}
		}
	}
}

// winogradWeightTile is G g G^T of a 3x3 kernel g, row by row: (G g)
// first (4x3), then (G g) G^T (4x4).
func winogradWeightTile(g *[3][3]float64) (u [16]float64) {
	var gg [4][3]float64
	for i := range 4 {
		for j := range 3 {
			for k := range 3 {
				gg[i][j] += winogradG[i][k] * g[k][j]
			}
		}
	}
	for i := range 4 {
		for j := range 4 {
			v := 0.0
			for k := range 3 {
				v += gg[i][k] * winogradG[j][k]
			}
			u[i*4+j] = v
		}
	}
	return u
}

// winogradInput is B^T d B of a 4x4 tile d.
func winogradInput(d *[4][4]float64) (v [4][4]float64) {
	var t [4][4]float64
	for j := range 4 {
		t[0][j] = d[0][j] - d[2][j]
		t[1][j] = d[1][j] + d[2][j]
		t[2][j] = d[2][j] - d[1][j]
		t[3][j] = d[1][j] - d[3][j]
	}
	for i := range 4 {
		v[i][0] = t[i][0] - t[i][2]
		v[i][1] = t[i][1] + t[i][2]
		v[i][2] = t[i][2] - t[i][1]
		v[i][3] = t[i][1] - t[i][3]
	}
	return v
}

// winogradOutput is A^T m A of a 4x4 tile m: the 2x2 outputs.
func winogradOutput(m *[4][4]float64) (y [2][2]float64) {
	var s [4][2]float64
	for i := range 4 {
		s[i][0] = m[i][0] + m[i][1] + m[i][2]
		s[i][1] = m[i][1] - m[i][2] - m[i][3]
	}
	for j := range 2 {
		y[0][j] = s[0][j] + s[1][j] + s[2][j]
		y[1][j] = s[1][j] - s[2][j] - s[3][j]
	}
	return y
}

func conv2DWinogradKernel(args []*tensor.Tensor, attrs ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
	ot := out.(*ir.TensorType)
	x, w := args[0], args[1]
	_, pb, _, _, err := op.SpatialAttrs(attrs, 2)
	if err != nil {
		return nil, err
	}
	n, ic, h, wd := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	oc, oh, ow := ot.Shape[1], ot.Shape[2], ot.Shape[3]
	b := w.Shape[3]
	th, tw := (oh+1)/2, (ow+1)/2
	res := tensor.New(ot.DType, ot.Shape)
	// The transformed input of every tile and channel: [ic][tile][16].
	v := make([][4][4]float64, ic*th*tw)
	m := make([]float64, 16)
	for bi := int64(0); bi < n; bi++ {
		for c := int64(0); c < ic; c++ {
			for ty := int64(0); ty < th; ty++ {
				for tx := int64(0); tx < tw; tx++ {
					var d [4][4]float64
					for i := range int64(4) {
						for j := range int64(4) {
							r, col := 2*ty+i-pb[0], 2*tx+j-pb[1]
							if r >= 0 && r < h && col >= 0 && col < wd {
								d[i][j] = x.Float(int(((bi*ic+c)*h+r)*wd + col))
							}
						}
					}
					v[(c*th+ty)*tw+tx] = winogradInput(&d)
				}
			}
		}
		for o := int64(0); o < oc; o++ {
			for t := int64(0); t < th*tw; t++ {
				clear(m)
				for c := int64(0); c < ic; c++ {
					vt := &v[c*th*tw+t]
					for xi := int64(0); xi < 16; xi++ {
						m[xi] += w.Float(int(((xi*(oc/b)+o/b)*ic+c)*b+o%b)) * vt[xi/4][xi%4]
					}
				}
				var mm [4][4]float64
				for xi := range 16 {
					mm[xi/4][xi%4] = m[xi]
				}
				y := winogradOutput(&mm)
				ty, tx := t/tw, t%tw
				for i := range int64(2) {
					for j := range int64(2) {
						r, col := 2*ty+i, 2*tx+j
						if r < oh && col < ow {
							res.SetFloat(int(((bi*oc+o)*oh+r)*ow+col), y[i][j])
						}
					}
				}
			}
		}
	}
	return []*tensor.Tensor{res}, nil
}
