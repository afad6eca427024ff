package transform

import (
	"strings"
	"testing"
)

func TestAlterDenseLayout(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{
			name: "constant weight becomes a transposed matmul",
			src: `def @main(%x: Tensor[(2, 3), float32]) {
  nn.dense(%x, constant(float32, [2, 3], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))
}`,
			want: `def @main(%x: Tensor[(2, 3), float32]) {
  nn.matmul(%x, constant(float32, [3, 2], [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]))
}`,
		},
		{
			name: "rank 3 data",
			src: `def @main(%x: Tensor[(2, 2, 2), float32]) {
  nn.dense(%x, constant(float32, [1, 2], [0.5, -1.0]))
}`,
			want: `def @main(%x: Tensor[(2, 2, 2), float32]) {
  nn.matmul(%x, constant(float32, [2, 1], [0.5, -1.0]))
}`,
		},
		{
			name: "dense with 8 outputs becomes a packed matmul",
			src: `def @main(%x: Tensor[(2, 3), float32]) {
  nn.dense(%x, constant(float32, [8, 3], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0]))
}`,
			want: `def @main(%x: Tensor[(2, 3), float32]) {
  nn.contrib_matmul_packed(%x, constant(float32, [1, 3, 8], [0.0, 3.0, 6.0, 9.0, 12.0, 15.0, 18.0, 21.0, 1.0, 4.0, 7.0, 10.0, 13.0, 16.0, 19.0, 22.0, 2.0, 5.0, 8.0, 11.0, 14.0, 17.0, 20.0, 23.0]))
}`,
		},
		{
			name: "matmul by a constant: one panel of 16",
			src: `def @main(%x: Tensor[(2, 2, 3), float32]) {
  nn.matmul(%x, constant(float32, [3, 16], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0, 34.0, 35.0, 36.0, 37.0, 38.0, 39.0, 40.0, 41.0, 42.0, 43.0, 44.0, 45.0, 46.0, 47.0]))
}`,
			want: `def @main(%x: Tensor[(2, 2, 3), float32]) {
  nn.contrib_matmul_packed(%x, constant(float32, [1, 3, 16], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0, 34.0, 35.0, 36.0, 37.0, 38.0, 39.0, 40.0, 41.0, 42.0, 43.0, 44.0, 45.0, 46.0, 47.0]))
}`,
		},
		{
			name: "matmul by a constant: three panels of 8",
			src: `def @main(%x: Tensor[(1, 2), float32]) {
  nn.matmul(%x, constant(float32, [2, 24], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0, 34.0, 35.0, 36.0, 37.0, 38.0, 39.0, 40.0, 41.0, 42.0, 43.0, 44.0, 45.0, 46.0, 47.0]))
}`,
			want: `def @main(%x: Tensor[(1, 2), float32]) {
  nn.contrib_matmul_packed(%x, constant(float32, [3, 2, 8], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 32.0, 33.0, 34.0, 35.0, 36.0, 37.0, 38.0, 39.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 40.0, 41.0, 42.0, 43.0, 44.0, 45.0, 46.0, 47.0]))
}`,
		},
		{
			name: "matmul with transpose_b or ragged columns stays",
			src: `def @main(%x: Tensor[(1, 2), float32]) {
  %0 = nn.matmul(%x, constant(float32, [5, 2], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]), transpose_b=true);
  %1 = nn.matmul(%x, constant(float32, [2, 5], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]));
  (%0, %1)
}`,
			want: `def @main(%x: Tensor[(1, 2), float32]) {
  %0 = nn.matmul(%x, constant(float32, [5, 2], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]), transpose_b=true);
  %1 = nn.matmul(%x, constant(float32, [2, 5], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]));
  (%0, %1)
}`,
		},
		{
			name: "variable weight stays",
			src: `def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(4, 3), float32]) {
  nn.dense(%x, %w)
}`,
			want: `def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(4, 3), float32]) {
  nn.dense(%x, %w)
}`,
		},
		{
			name: "rank 1 data stays",
			src: `def @main(%x: Tensor[(3,), float32]) {
  nn.dense(%x, constant(float32, [1, 3], [1.0, 2.0, 3.0]))
}`,
			want: `def @main(%x: Tensor[(3,), float32]) {
  nn.dense(%x, constant(float32, [1, 3], [1.0, 2.0, 3.0]))
}`,
		},
		{
			name: "float64 stays",
			src: `def @main(%x: Tensor[(1, 2), float64]) {
  nn.dense(%x, constant(float64, [1, 2], [1.0, 2.0]))
}`,
			want: `def @main(%x: Tensor[(1, 2), float64]) {
  nn.dense(%x, constant(float64, [1, 2], [1.0, 2.0]))
}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := parse(t, c.src)
			got, err := AlterDenseLayout(m)
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
				t.Errorf("AlterDenseLayout modified its input")
			}
			args := randomArgs(t, m, 3)
			sameBits(t, c.name, run(t, got, args), run(t, m, args))
		})
	}
}

// Chained dense calls are both rewritten.
func TestAlterDenseLayoutShared(t *testing.T) {
	m := parse(t, `def @main(%x: Tensor[(2, 2), float32]) {
  %0 = nn.dense(%x, constant(float32, [2, 2], [1.0, 2.0, 3.0, 4.0]));
  nn.dense(%0, constant(float32, [2, 2], [1.0, 2.0, 3.0, 4.0]))
}`)
	got, err := AlterDenseLayout(m)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(text(t, got), "nn.matmul"); n != 2 {
		t.Fatalf("%d matmuls, want 2:\n%s", n, text(t, got))
	}
	args := randomArgs(t, m, 5)
	sameBits(t, "shared", run(t, got, args), run(t, m, args))
}
