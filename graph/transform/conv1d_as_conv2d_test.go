package transform

import (
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/tensor"
)

// TestConv1DAsConv2D rewrites 1-D convolutions (parameter and constant
// weights, strides, asymmetric and single-value padding, dilation,
// groups) and checks on the reference executor that the values stay.
func TestConv1DAsConv2D(t *testing.T) {
	cases := []struct{ name, src string }{
		{"parameter weight", `def @main(%x: Tensor[(2, 4, 9), float32], %w: Tensor[(6, 2, 3), float32]) {
  %0 = nn.conv1d(%x, %w, strides=[2], padding=[1, 2], dilation=[2], groups=2);
  nn.relu(%0)
}`},
		{"constant weight", `def @main(%x: Tensor[(1, 2, 5), float32]) {
  nn.conv1d(%x, constant(float32, [2, 1, 2], [0.5, -1.0, 2.0, 0.25]), padding=[1], groups=2)
}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := parse(t, c.src)
			got, err := Conv1DAsConv2D(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := Verify(got); err != nil {
				t.Fatal(err)
			}
			var conv1d, conv2d int
			graph.PostOrder(got.Main().Body, func(e graph.Expr) {
				if call, ok := e.(*graph.Call); ok {
					switch call.Op {
					case op.Conv1D:
						conv1d++
					case op.Conv2D:
						conv2d++
						if _, w := call.Args[1].(*graph.Constant); !w && len(m.Main().Params) == 1 {
							t.Errorf("the constant weight became %s, want a constant", graph.Describe(call.Args[1]))
						}
					}
				}
			})
			if conv1d != 0 || conv2d != 1 {
				t.Fatalf("after the pass: %d conv1d, %d conv2d, want 0 and 1:\n%s", conv1d, conv2d, text(t, got))
			}
			args := randomArgs(t, m, 5)
			want, have := run(t, m, args), run(t, got, args)
			for i := range want {
				if err := tensor.AllClose(have[i], want[i], 1e-6, 1e-6); err != nil || !have[i].Shape.Equal(want[i].Shape) {
					t.Errorf("output %d: %v (shape %v, want %v)", i, err, have[i].Shape, want[i].Shape)
				}
			}
		})
	}
}
