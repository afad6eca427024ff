package transform

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

func TestQNNKernelSums(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{
			name: "dense: the sum of every weight row",
			src: `def @main(%x: Tensor[(2, 3), uint8]) {
  qnn.dense(%x, constant(int8, [2, 3], [1, -2, 3, -128, 127, 5]), input_zero_point=7)
}`,
			want: `def @main(%x: Tensor[(2, 3), uint8]) {
  qnn.dense(%x, constant(int8, [2, 3], [1, -2, 3, -128, 127, 5]), constant(int32, [2], [2, 4]), input_zero_point=7)
}`,
		},
		{
			name: "convolution, four input channels to a word",
			src: `def @main(%x: Tensor[(1, 3, 2, 2), uint8]) {
  qnn.conv2d(%x, constant(int8, [2, 1, 1, 1, 4], [1, 2, 3, 0, -4, -5, 6, 0]), input_zero_point=128, kernel_layout="OIHW4i")
}`,
			want: `def @main(%x: Tensor[(1, 3, 2, 2), uint8]) {
  qnn.conv2d(%x, constant(int8, [2, 1, 1, 1, 4], [1, 2, 3, 0, -4, -5, 6, 0]), constant(int32, [2], [6, -3]), input_zero_point=128, kernel_layout="OIHW4i")
}`,
		},
		{
			name: "depthwise convolutions and computed weights stay",
			src: `def @main(%x: Tensor[(1, 2, 2, 2), uint8], %w: Tensor[(2, 3), int8]) {
  %0 = qnn.conv2d(%x, constant(int8, [2, 1, 1, 1], [3, 4]), groups=2);
  %1 = qnn.dense(%w, %w);
  (%0, %1)
}`,
			want: `def @main(%x: Tensor[(1, 2, 2, 2), uint8], %w: Tensor[(2, 3), int8]) {
  %0 = qnn.conv2d(%x, constant(int8, [2, 1, 1, 1], [3, 4]), groups=2);
  %1 = qnn.dense(%w, %w);
  (%0, %1)
}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := parse(t, c.src)
			got, err := QNNKernelSums(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := Verify(got); err != nil {
				t.Fatal(err)
			}
			if g, w := text(t, got), text(t, parse(t, c.want)); g != w {
				t.Errorf("got\n%s\nwant\n%s", g, w)
			}
			if text(t, m) != text(t, parse(t, c.src)) {
				t.Errorf("QNNKernelSums modified its input")
			}
			args := randomArgs(t, m, 3)
			sameBits(t, c.name, run(t, got, args), run(t, m, args))
		})
	}
}

// A weight shared by two calls is summed once: both calls read the same
// constant.
func TestQNNKernelSumsShared(t *testing.T) {
	m := parse(t, `def @main(%x: Tensor[(2, 2), uint8]) {
  %0 = constant(int8, [2, 2], [1, 2, 3, 4]);
  %1 = qnn.dense(%x, %0, input_zero_point=1);
  %2 = qnn.dense(%x, %0, input_zero_point=2);
  (%1, %2)
}`)
	got, err := QNNKernelSums(m)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(text(t, got), "constant(int32, [2], [3, 7])"); n != 2 {
		t.Fatalf("%d calls with the sums [3, 7], want 2:\n%s", n, text(t, got))
	}
	var sums []graph.Expr
	graph.PostOrder(got.Main().Body, func(e graph.Expr) {
		if c, ok := e.(*graph.Call); ok && c.Op == op.QDense {
			sums = append(sums, c.Args[2])
		}
	})
	if len(sums) != 2 || sums[0] != sums[1] {
		t.Errorf("the two calls' sums are %d distinct constants, want one shared", len(sums))
	}
}

// Kernel sums must be int32, one per output channel.
func TestQNNKernelSumsType(t *testing.T) {
	for _, src := range []string{
		`def @main(%x: Tensor[(2, 3), uint8]) {
  qnn.dense(%x, constant(int8, [2, 3], [1, 2, 3, 4, 5, 6]), constant(int32, [3], [1, 2, 3]))
}`,
		`def @main(%x: Tensor[(1, 3, 2, 2), uint8]) {
  qnn.conv2d(%x, constant(int8, [2, 3, 1, 1], [1, 2, 3, 4, 5, 6]), constant(int8, [2], [6, 15]))
}`,
	} {
		m, err := graph.Parse(src, graph.ParseOptions{})
		if err == nil {
			err = Verify(m)
		}
		if err == nil || !strings.Contains(err.Error(), "kernel sums") {
			t.Errorf("%s: error %v, want one about the kernel sums", src, err)
		}
	}
}

// The rewritten call keeps its span (the ONNX node it came from), which
// profiles and the partition report name kernels by.
func TestQNNKernelSumsSpan(t *testing.T) {
	m := parse(t, `def @main(%x: Tensor[(2, 3), uint8]) {
  qnn.dense(%x, constant(int8, [2, 3], [1, -2, 3, -128, 127, 5]), input_zero_point=7) /* span="fc1/Gemm" */
}`)
	if m.Main().Body.(*graph.Call).Span != "fc1/Gemm" {
		t.Fatal("the parser dropped the span")
	}
	got, err := QNNKernelSums(m)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := got.Main().Body.(*graph.Call)
	if !ok || len(c.Args) != 3 {
		t.Fatalf("want the dense call with its sums, got %T", got.Main().Body)
	}
	if c.Span != "fc1/Gemm" {
		t.Errorf("span %q, want %q", c.Span, "fc1/Gemm")
	}
}

// TestWeightSumsBlocked: the sums of an OIHW4i16o weight are per output
// channel (sixteen per first-axis slice), those of the OIHW4i weight it
// was packed from; a weight whose channels sixteen do not divide is not
// packed.
func TestWeightSumsBlocked(t *testing.T) {
	w := tensor.New(ir.Int8, ir.Shape{32, 2, 3, 3, 4})
	for i := 0; i < w.Len(); i++ {
		w.SetInt(i, int64(i*37%256-128))
	}
	pw, err := ref.PackOIHW4i16o(w)
	if err != nil {
		t.Fatal(err)
	}
	if !pw.Shape.Equal(ir.Shape{2, 2, 3, 3, 16, 4}) {
		t.Fatalf("packed shape %v", pw.Shape)
	}
	if got, want := weightSums(pw), weightSums(w); !got.Equal(want) {
		t.Errorf("sums %v, want %v", got.Int32s(), want.Int32s())
	}
	if _, err := ref.PackOIHW4i16o(tensor.New(ir.Int8, ir.Shape{24, 2, 3, 3, 4})); err == nil {
		t.Error("24 channels packed in groups of sixteen")
	}
}
