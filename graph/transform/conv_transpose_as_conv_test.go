package transform

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/tensor"
)

// TestConvTransposeAsConv rewrites transposed convolutions of every kind
// the pass takes — strided ones in the sub-pixel form (kernel equal to,
// a multiple of, or smaller than the stride, padding, asymmetric padding
// and output padding), stride 1 and dilations with the zero-inserted input
// (the zeros' tail cropped) — and checks on the reference executor that
// the values stay; a padding larger than dilation*(k-1) and groups > 1
// stay transposed convolutions.
func TestConvTransposeAsConv(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	cases := []struct {
		name                 string
		c, o, h, w, kh, kw   int64
		attrs                string
		rewritten, depthToSp bool
	}{
		{"k2 s2 (U-Net)", 3, 4, 5, 6, 2, 2, "strides=[2, 2]", true, true},
		{"k3 s3", 2, 3, 4, 3, 3, 3, "strides=[3, 3]", true, true},
		{"k4 s2 p1 (DCGAN)", 3, 2, 5, 4, 4, 4, "strides=[2, 2], padding=[1, 1, 1, 1]", true, true},
		{"k3 s2 p1 op1", 2, 3, 4, 5, 3, 3, "strides=[2, 2], padding=[1, 1, 1, 1], output_padding=[1, 1]", true, true},
		{"k3 s2 p1", 2, 3, 4, 5, 3, 3, "strides=[2, 2], padding=[1, 1, 1, 1]", true, true},
		{"k5 s3 asymmetric padding", 2, 2, 4, 3, 5, 5, "strides=[3, 3], padding=[2, 1, 0, 3], output_padding=[1, 2]", true, true},
		{"k3 s1 p1", 3, 3, 5, 5, 3, 3, "padding=[1, 1, 1, 1]", true, false},
		{"k3 s2 dilation 2, asymmetric padding", 2, 2, 4, 4, 3, 3, "strides=[2, 2], padding=[0, 1, 2, 0], dilation=[2, 2]", true, false},
		{"k2 s3 dilation 2 (zeros cropped)", 2, 2, 3, 4, 2, 2, "strides=[3, 3], padding=[0, 0, 1, 1], dilation=[2, 2]", true, false},
		{"k2 s3", 2, 2, 3, 4, 2, 2, "strides=[3, 3]", true, true},
		{"k1x3 s(1, 2)", 2, 2, 3, 4, 1, 3, "strides=[1, 2], padding=[0, 1, 0, 1]", true, true},
		{"padding beyond the kernel", 2, 2, 5, 5, 2, 2, "padding=[2, 2, 2, 2]", false, false},
		{"groups", 4, 2, 3, 3, 3, 3, "strides=[2, 2], groups=2", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			og := c.o
			if strings.Contains(c.attrs, "groups=2") {
				og = c.o / 2
			}
			vals := make([]string, c.c*og*c.kh*c.kw)
			for i := range vals {
				vals[i] = fmt.Sprintf("%.4f", rng.Float64()*2-1)
			}
			src := fmt.Sprintf(`def @main(%%x: Tensor[(1, %d, %d, %d), float32]) {
  %%0 = nn.conv2d_transpose(%%x, constant(float32, [%d, %d, %d, %d], [%s]), %s);
  nn.relu(%%0)
}`, c.c, c.h, c.w, c.c, og, c.kh, c.kw, strings.Join(vals, ", "), c.attrs)
			m := parse(t, src)
			got, err := ConvTransposeAsConv(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := Verify(got); err != nil {
				t.Fatal(err)
			}
			var transposed, conv, trans int
			graph.PostOrder(got.Main().Body, func(e graph.Expr) {
				if call, ok := e.(*graph.Call); ok {
					switch call.Op {
					case op.Conv2DTranspose:
						transposed++
					case op.Conv2D:
						conv++
					case op.Transpose:
						trans++
					}
				}
			})
			if c.rewritten != (transposed == 0 && conv == 1) || c.rewritten == (transposed == 1) || c.depthToSp != (trans == 1) {
				t.Fatalf("after the pass: %d conv2d_transpose, %d conv2d, %d transpose (want rewritten %v, depth to space %v):\n%s",
					transposed, conv, trans, c.rewritten, c.depthToSp, text(t, got))
			}
			args := randomArgs(t, m, 5)
			want, have := run(t, m, args), run(t, got, args)
			for i := range want {
				if err := tensor.AllClose(have[i], want[i], 1e-5, 1e-5); err != nil || !have[i].Shape.Equal(want[i].Shape) {
					t.Errorf("output %d: %v (shape %v, want %v)", i, err, have[i].Shape, want[i].Shape)
				}
			}
		})
	}
}

// TestConvTransposeAsConvHostile checks that a stride far above the
// kernel size, whose sub-pixel weight (s*s phases of every channel pair:
// 512 x 8 x 2000^2 values here) would be far over the memory budget while
// the output is not, leaves the transposed convolution as it is instead
// of allocating.
func TestConvTransposeAsConvHostile(t *testing.T) {
	vals := make([]string, 512*8)
	for i := range vals {
		vals[i] = "0.5"
	}
	m := parse(t, fmt.Sprintf(`def @main(%%x: Tensor[(1, 512, 2, 2), float32]) {
  nn.conv2d_transpose(%%x, constant(float32, [512, 8, 1, 1], [%s]), strides=[2000, 2000])
}`, strings.Join(vals, ", ")))
	got, err := ConvTransposeAsConv(m)
	if err != nil {
		t.Fatal(err)
	}
	if n := countOps(got)[op.Conv2DTranspose]; n != 1 {
		t.Errorf("%d transposed convolutions left, want 1", n)
	}
}
