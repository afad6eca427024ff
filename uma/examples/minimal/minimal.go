// Package minimal is the smallest useful UMA backend: conv2d as a C kernel.
package minimal

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pattern"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/uma"
)

const kernel = `#include <stdint.h>
void minimal_conv2d(float* out, float* in, float* w, int32_t c, int32_t h, int32_t wd, int32_t oc, int32_t k, int32_t pad, int32_t oh, int32_t ow) {
  for (int32_t o = 0; o < oc; ++o) for (int32_t y = 0; y < oh; ++y) for (int32_t x = 0; x < ow; ++x) {
    float acc = 0.0f; /* out[o][y][x]: sum over input channels and taps, stride 1 */
    for (int32_t i = 0; i < c; ++i) for (int32_t ky = 0; ky < k; ++ky) for (int32_t kx = 0; kx < k; ++kx) {
      int32_t iy = y + ky - pad, ix = x + kx - pad; /* zero padding: skip taps outside the input */
      if (iy >= 0 && iy < h && ix >= 0 && ix < wd) acc += in[(i * h + iy) * wd + ix] * w[((o * c + i) * k + ky) * k + kx];
    }
    out[(o * oh + y) * ow + x] = acc;
  }
}
`

// Register adds the "minimal_conv" target kind to r.
func Register(r *targets.Registry) error {
	b := uma.New("minimal_conv", "a conv2d C kernel in under 60 lines")
	eligible := func(m *pattern.Result) error {
		c := m.Root.(*graph.Call)
		s, pb, pe, _, _ := op.SpatialAttrs(c.Attrs, 2) // validated by the importer
		k := c.Args[1].Type().(*ir.TensorType).Shape   // OIHW
		if s[0] != 1 || s[1] != 1 || c.Attrs.Int("groups") != 1 || pb[0] != pb[1] || pb[0] != pe[0] || pe[0] != pe[1] || k[2] != k[3] || c.Args[0].Type().(*ir.TensorType).Shape[0] != 1 {
			return fmt.Errorf("want batch 1, stride 1, one group, square kernel, equal padding")
		}
		return nil
	}
	compute := func(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
		x, w, o, pad := in[0].Shape, in[1].Shape, c.OutTensor().Shape, c.Attrs.Ints("padding")[0]
		return te.Extern("minimal_conv2d", []ir.Shape{o}, []ir.DType{ir.Float32}, in, func(ins, outs []*tir.Buffer) tir.Stmt {
			return tir.Eval(tir.CallExternOf(tir.Void, "minimal_conv2d", outs[0].Data, ins[0].Data, ins[1].Data, tir.Int32(x[1]), tir.Int32(x[2]),
				tir.Int32(x[3]), tir.Int32(w[0]), tir.Int32(w[2]), tir.Int32(pad), tir.Int32(o[2]), tir.Int32(o[3])))
		}), nil
	}
	for _, err := range []error{
		b.RegisterPattern("conv2d", pattern.IsOp(op.Conv2D, pattern.Wildcard(), pattern.Wildcard()), eligible),
		b.RegisterOperatorStrategy(op.Conv2D, strategy.Implementation{Name: "minimal.conv2d", Compute: compute}),
		b.RegisterCodegen("c", uma.CodegenOptions{Sources: []uma.SourceFile{{Name: "minimal_conv.c", Data: []byte(kernel)}}}),
	} {
		if err != nil {
			return err
		}
	}
	return b.Register(r)
}
