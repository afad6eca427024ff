package te_test

import (
	"math"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/interp"
)

// ---- computations ----

func addTensors(m, n int64, dt ir.DType) (a, b, c *te.Tensor) {
	a = te.Placeholder("A", dt, ir.Shape{m, n})
	b = te.Placeholder("B", dt, ir.Shape{m, n})
	c = te.Compute("C", ir.Shape{m, n}, func(i []tir.PrimExpr) tir.PrimExpr {
		return tir.Add(a.At(i...), b.At(i...))
	}, te.WithAxisNames("i", "j"))
	return
}

func refAdd(in []*interp.Array) [][]float64 {
	if in[0].DType.IsFloat() {
		a, b := f32s(in[0]), f32s(in[1])
		c := make([]float32, len(a))
		for i := range a {
			c[i] = a[i] + b[i]
		}
		return [][]float64{fromF32(c)}
	}
	a, b := ints(in[0]), ints(in[1])
	c := make([]int64, len(a))
	for i := range a {
		c[i] = a[i] + b[i]
	}
	return [][]float64{fromInts(c)}
}

func matmul(name string, a, b *te.Tensor) *te.Tensor {
	m, kk, n := a.Shape[0], a.Shape[1], b.Shape[1]
	k := te.ReduceAxis(kk, "k")
	return te.ComputeReduce(name, ir.Shape{m, n}, te.Sum, []*te.IterVar{k}, func(i []tir.PrimExpr) tir.PrimExpr {
		return tir.Mul(a.At(i[0], k.Var), b.At(k.Var, i[1]))
	}, te.WithAxisNames("i", "j"))
}

func refMatmul(a, b []float32, m, k, n int) []float32 {
	c := make([]float32, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			acc := float32(0)
			for r := 0; r < k; r++ {
				acc = acc + float32(a[i*k+r]*b[r*n+j])
			}
			c[i*n+j] = acc
		}
	}
	return c
}

// conv2dNCHW builds a padded, strided, dilated int32 convolution.
func conv2dNCHW(n, c, h, w, o, kh, kw, pad, stride, dil int64) (data, weight, padded, out *te.Tensor) {
	data = te.Placeholder("data", i32, ir.Shape{n, c, h, w})
	weight = te.Placeholder("weight", i32, ir.Shape{o, c, kh, kw})
	padded = te.Pad(data, []int64{0, 0, pad, pad}, []int64{0, 0, pad, pad}, tir.Int32(0), "pad")
	oh := (h+2*pad-dil*(kh-1)-1)/stride + 1
	ow := (w+2*pad-dil*(kw-1)-1)/stride + 1
	rc, rh, rw := te.ReduceAxis(c, "rc"), te.ReduceAxis(kh, "rh"), te.ReduceAxis(kw, "rw")
	out = te.ComputeReduce("conv", ir.Shape{n, o, oh, ow}, te.Sum, []*te.IterVar{rc, rh, rw}, func(i []tir.PrimExpr) tir.PrimExpr {
		y := tir.Add(tir.Mul(i[2], idx(stride)), tir.Mul(rh.Var, idx(dil)))
		x := tir.Add(tir.Mul(i[3], idx(stride)), tir.Mul(rw.Var, idx(dil)))
		return tir.Mul(padded.At(i[0], rc.Var, y, x), weight.At(i[1], rc.Var, rh.Var, rw.Var))
	}, te.WithAxisNames("n", "f", "y", "x"))
	return
}

func refConv(in []*interp.Array, n, c, h, w, o, kh, kw, pad, stride, dil int64) []float64 {
	d, wt := ints(in[0]), ints(in[1])
	oh := (h+2*pad-dil*(kh-1)-1)/stride + 1
	ow := (w+2*pad-dil*(kw-1)-1)/stride + 1
	out := make([]int64, n*o*oh*ow)
	for b := int64(0); b < n; b++ {
		for f := int64(0); f < o; f++ {
			for y := int64(0); y < oh; y++ {
				for x := int64(0); x < ow; x++ {
					var acc int64
					for ch := int64(0); ch < c; ch++ {
						for ry := int64(0); ry < kh; ry++ {
							for rx := int64(0); rx < kw; rx++ {
								iy, ix := y*stride+ry*dil-pad, x*stride+rx*dil-pad
								if iy < 0 || iy >= h || ix < 0 || ix >= w {
									continue
								}
								acc += d[((b*c+ch)*h+iy)*w+ix] * wt[((f*c+ch)*kh+ry)*kw+rx]
							}
						}
					}
					out[((b*o+f)*oh+y)*ow+x] = int64(int32(acc))
				}
			}
		}
	}
	return fromInts(out)
}

// ---- elementwise ----

func TestElementwise(t *testing.T) {
	cases := []struct {
		name  string
		m, n  int64
		dt    ir.DType
		sched func(s *te.Schedule, c *te.Tensor)
		want  []string // loop kinds expected in the printed TIR
	}{
		{"split_vectorize", 6, 16, f32, func(s *te.Schedule, c *te.Tensor) {
			st := s.Stage(c)
			_, ji := st.Split(st.Axis()[1], 4)
			st.Vectorize(ji)
		}, []string{"T.vectorized(4)", "T.serial(4)"}},
		{"fuse_parallel", 6, 16, f32, func(s *te.Schedule, c *te.Tensor) {
			st := s.Stage(c)
			ax := st.Axis()
			st.Parallel(st.Fuse(ax[0], ax[1]))
		}, []string{"T.parallel(96)"}},
		{"fuse_split_parallel_vectorize", 5, 12, f32, func(s *te.Schedule, c *te.Tensor) {
			st := s.Stage(c)
			ax := st.Axis()
			fo, fi := st.Split(st.Fuse(ax[0], ax[1]), 8)
			st.Parallel(fo)
			st.Vectorize(fi)
		}, []string{"T.parallel(8)", "T.vectorized(8)", "i_j_fused_outer * 8 + i_j_fused_inner < 60"}},
		{"split_guard_int", 5, 7, i32, func(s *te.Schedule, c *te.Tensor) {
			st := s.Stage(c)
			ax := st.Axis()
			io, ii := st.Split(ax[0], 2)
			jo, ji := st.Split(ax[1], 3)
			st.Reorder(io, jo, ii, ji)
			st.Unroll(ii)
		}, []string{"i_outer * 2 + i_inner < 5", "j_outer * 3 + j_inner < 7", "T.unroll(2)"}},
		{"reorder_only", 4, 3, i32, func(s *te.Schedule, c *te.Tensor) {
			st := s.Stage(c)
			ax := st.Axis()
			st.Reorder(ax[1], ax[0])
		}, []string{"for j in T.serial(3)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b, c := addTensors(tc.m, tc.n, tc.dt)
			s := te.CreateSchedule(c)
			tc.sched(s, c)
			f := mustLower(t, "add_"+tc.name, []*te.Tensor{a, b, c}, s)
			text := f.String()
			for _, w := range tc.want {
				if !contains(text, w) {
					t.Errorf("lowered TIR lacks %q:\n%s", w, text)
				}
			}
			checkRun(t, f, 2, refAdd)
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestSplitDividingHasNoGuard(t *testing.T) {
	a, b, c := addTensors(8, 12, f32)
	s := te.CreateSchedule(c)
	st := s.Stage(c)
	st.Split(st.Axis()[0], 4)
	st.Split(st.Axis()[1], 6)
	f := mustLower(t, "add", []*te.Tensor{a, b, c}, s)
	if contains(f.String(), "if ") {
		t.Errorf("dividing splits should not be guarded:\n%s", f)
	}
	checkRun(t, f, 2, refAdd)
}

// ---- matmul ----

func TestMatmul(t *testing.T) {
	cases := []struct {
		name    string
		m, k, n int64
		sched   func(s *te.Schedule, c *te.Tensor)
		want    []string
	}{
		{"default", 5, 7, 3, func(*te.Schedule, *te.Tensor) {}, nil},
		{"split_ijk_reorder", 8, 12, 6, func(s *te.Schedule, c *te.Tensor) {
			st := s.Stage(c)
			ax := st.Axis()
			io, ii := st.Split(ax[0], 4)
			jo, ji := st.Split(ax[1], 3)
			ko, ki := st.Split(st.ReduceAxes()[0], 4)
			st.Reorder(io, jo, ko, ii, ki, ji)
			st.Unroll(ki)
			st.Vectorize(ji)
		}, []string{"T.unroll(4)", "T.vectorized(3)", "i_inner_init"}},
		{"register_tile", 12, 16, 8, registerTile, []string{`T.allocate((4, 4), "float32", "local")`, "T.unroll(4)", "T.vectorized(4)"}},
		{"register_tile_ragged", 10, 9, 7, registerTile, []string{`T.allocate((4, 4), "float32", "local")`, "< 10", "< 7", "k_outer * 4 + k_inner < 9"}},
		{"register_tile_outlined", 12, 16, 8, func(s *te.Schedule, c *te.Tensor) {
			sl, ko := registerTileK(s, c)
			sl.Outline(ko)
		}, []string{`for k_outer in T.serial(4, annotations={"kiln.outline": true})`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := te.Placeholder("A", f32, ir.Shape{tc.m, tc.k})
			b := te.Placeholder("B", f32, ir.Shape{tc.k, tc.n})
			c := matmul("C", a, b)
			s := te.CreateSchedule(c)
			tc.sched(s, c)
			f := mustLower(t, "matmul_"+tc.name, []*te.Tensor{a, b, c}, s)
			text := f.String()
			for _, w := range tc.want {
				if !contains(text, w) {
					t.Errorf("lowered TIR lacks %q:\n%s", w, text)
				}
			}
			checkRun(t, f, 2, func(in []*interp.Array) [][]float64 {
				return [][]float64{fromF32(refMatmul(f32s(in[0]), f32s(in[1]), int(tc.m), int(tc.k), int(tc.n)))}
			})
		})
	}
}

// TestOutlineMisuse: only serial or unrolled leaves can be outlined.
func TestOutlineMisuse(t *testing.T) {
	a := te.Placeholder("A", f32, ir.Shape{8, 8})
	b := te.Placeholder("B", f32, ir.Shape{8, 8})
	c := matmul("C", a, b)
	s := te.CreateSchedule(c)
	st := s.Stage(c)
	ax := st.Axis()
	st.Parallel(ax[0])
	st.Outline(ax[0])
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "outline: i is a parallel loop") {
		t.Errorf("outlining a parallel loop: %v", err)
	}
	s = te.CreateSchedule(c)
	st = s.Stage(c)
	ax = st.Axis()
	st.Split(ax[1], 4)
	st.Outline(ax[1])
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "outline") {
		t.Errorf("outlining a split axis: %v", err)
	}
}

// registerTile is the classic CPU matmul schedule: 4x4 output tiles
// accumulated in a local cache computed at the tile loop, reduction split
// and unrolled, the tile's column loop vectorized.
func registerTile(s *te.Schedule, c *te.Tensor) { registerTileK(s, c) }

// registerTileK is registerTile returning the local stage and its outer
// reduction loop.
func registerTileK(s *te.Schedule, c *te.Tensor) (*te.Stage, *te.IterVar) {
	cl := s.CacheWrite(c, "local")
	st := s.Stage(c)
	ax := st.Axis()
	io, ii := st.Split(ax[0], 4)
	jo, ji := st.Split(ax[1], 4)
	st.Reorder(io, jo, ii, ji)
	sl := s.Stage(cl)
	sl.ComputeAt(st, jo)
	lax := sl.Axis()
	ko, ki := sl.Split(sl.ReduceAxes()[0], 4)
	sl.Reorder(ko, ki, lax[0], lax[1])
	sl.Unroll(ki)
	sl.Vectorize(lax[1])
	st.Parallel(io)
	return sl, ko
}

// TestFusedEpilogue is relu(add(matmul, bias)) with the add inlined and
// the matmul computed at the relu's tile loop: the TVM pattern for fused
// epilogues. The matmul's buffer shrinks to one tile.
func TestFusedEpilogue(t *testing.T) {
	const m, k, n = 8, 6, 12
	a := te.Placeholder("A", f32, ir.Shape{m, k})
	w := te.Placeholder("W", f32, ir.Shape{k, n})
	bias := te.Placeholder("bias", f32, ir.Shape{n})
	mm := matmul("mm", a, w)
	add := te.Compute("add", ir.Shape{m, n}, func(i []tir.PrimExpr) tir.PrimExpr {
		return tir.Add(mm.At(i...), bias.At(i[1]))
	})
	relu := te.Compute("relu", ir.Shape{m, n}, func(i []tir.PrimExpr) tir.PrimExpr {
		return tir.Max(add.At(i...), tir.Float32(0))
	}, te.WithAxisNames("i", "j"))
	s := te.CreateSchedule(relu)
	s.AutoInlineInjective()
	sr := s.Stage(relu)
	ax := sr.Axis()
	io, ii := sr.Split(ax[0], 4)
	jo, ji := sr.Split(ax[1], 4)
	sr.Reorder(io, jo, ii, ji)
	sr.Vectorize(ji)
	sm := s.Stage(mm)
	sm.ComputeAt(sr, jo)
	mx := sm.Axis()
	sm.Reorder(sm.ReduceAxes()[0], mx[0], mx[1])
	sm.Vectorize(mx[1])
	f := mustLower(t, "dense_bias_relu", []*te.Tensor{a, w, bias, relu}, s)
	if !contains(f.String(), `T.allocate((4, 4), "float32", "global") as mm`) {
		t.Errorf("matmul should be a 4x4 tile inside the relu loop:\n%s", f)
	}
	checkRun(t, f, 3, func(in []*interp.Array) [][]float64 {
		c := refMatmul(f32s(in[0]), f32s(in[1]), m, k, n)
		bs := f32s(in[2])
		for i := range c {
			v := c[i] + bs[i%n]
			c[i] = float32(math.Max(float64(v), 0))
		}
		return [][]float64{fromF32(c)}
	})
}

// ---- conv2d ----

func TestConv2D(t *testing.T) {
	const n, c, h, w, o, kh, kw, pad, stride, dil = 2, 3, 9, 9, 4, 3, 3, 1, 2, 2
	cases := []struct {
		name  string
		sched func(s *te.Schedule, padded, out *te.Tensor)
		want  []string
	}{
		{"pad_inlined", func(s *te.Schedule, padded, out *te.Tensor) {
			s.Stage(padded).ComputeInline()
		}, []string{"T.if_then_else"}},
		{"pad_root", func(s *te.Schedule, padded, out *te.Tensor) {}, []string{`T.allocate((2, 3, 11, 11), "int32", "global") as pad`}},
		{"pad_at_row", func(s *te.Schedule, padded, out *te.Tensor) {
			so := s.Stage(out)
			s.Stage(padded).ComputeAt(so, so.Axis()[2])
		}, []string{`T.allocate((1, 3, 5, 11), "int32", "global") as pad`}},
		{"pad_at_split_col", func(s *te.Schedule, padded, out *te.Tensor) {
			so := s.Stage(out)
			ax := so.Axis()
			xo, _ := so.Split(ax[3], 3)
			so.Parallel(so.Fuse(ax[0], ax[1]))
			s.Stage(padded).ComputeAt(so, xo)
		}, []string{`T.allocate((1, 3, 5, 9), "int32", "global") as pad`, "T.parallel(8)"}},
		{"auto_inline_split_reduce", func(s *te.Schedule, padded, out *te.Tensor) {
			s.AutoInlineInjective()
			so := s.Stage(out)
			r := so.ReduceAxes()
			rco, rci := so.Split(r[0], 2)
			so.Reorder(rco, r[1], r[2], rci)
		}, []string{"rc_outer * 2 + rc_inner < 3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, weight, padded, out := conv2dNCHW(n, c, h, w, o, kh, kw, pad, stride, dil)
			s := te.CreateSchedule(out)
			tc.sched(s, padded, out)
			f := mustLower(t, "conv_"+tc.name, []*te.Tensor{data, weight, out}, s)
			text := f.String()
			for _, wnt := range tc.want {
				if !contains(text, wnt) {
					t.Errorf("lowered TIR lacks %q:\n%s", wnt, text)
				}
			}
			checkRun(t, f, 2, func(in []*interp.Array) [][]float64 {
				return [][]float64{refConv(in, n, c, h, w, o, kh, kw, pad, stride, dil)}
			})
		})
	}
}

// ---- reductions ----

func TestReductions(t *testing.T) {
	t.Run("sum_keepdims_int", func(t *testing.T) {
		x := te.Placeholder("X", i32, ir.Shape{4, 6, 5})
		r := te.ReduceAxis(6, "r")
		out := te.ComputeReduce("S", ir.Shape{4, 1, 5}, te.Sum, []*te.IterVar{r}, func(i []tir.PrimExpr) tir.PrimExpr {
			return x.At(i[0], r.Var, i[2])
		})
		s := te.CreateSchedule(out)
		st := s.Stage(out)
		ro, ri := st.Split(r, 4) // 6 = 4+2: guarded
		ax := st.Axis()
		st.Reorder(ax[0], ro, ax[1], ri, ax[2])
		st.Vectorize(ax[2])
		f := mustLower(t, "sum_keepdims", []*te.Tensor{x, out}, s)
		if !contains(f.String(), "r_outer * 4 + r_inner < 6") {
			t.Errorf("expected a guard on the split reduce axis:\n%s", f)
		}
		checkRun(t, f, 1, func(in []*interp.Array) [][]float64 {
			xs := ints(in[0])
			o := make([]int64, 4*5)
			for i := 0; i < 4; i++ {
				for k := 0; k < 5; k++ {
					for j := 0; j < 6; j++ {
						o[i*5+k] += xs[(i*6+j)*5+k]
					}
				}
			}
			return [][]float64{fromInts(o)}
		})
	})
	t.Run("max_keepdims_float", func(t *testing.T) {
		x := te.Placeholder("X", f32, ir.Shape{3, 7})
		r := te.ReduceAxis(7, "r")
		out := te.ComputeReduce("M", ir.Shape{3, 1}, te.Max, []*te.IterVar{r}, func(i []tir.PrimExpr) tir.PrimExpr {
			return x.At(i[0], r.Var)
		})
		s := te.CreateSchedule(out)
		f := mustLower(t, "max_keepdims", []*te.Tensor{x, out}, s)
		if !contains(f.String(), "T.float32(-inf)") {
			t.Errorf("max should start at -inf:\n%s", f)
		}
		checkRun(t, f, 1, func(in []*interp.Array) [][]float64 {
			xs := f32s(in[0])
			o := make([]float32, 3)
			for i := range o {
				o[i] = float32(math.Inf(-1))
				for j := 0; j < 7; j++ {
					o[i] = max(o[i], xs[i*7+j])
				}
			}
			return [][]float64{fromF32(o)}
		})
	})
	t.Run("min_prod_scalar", func(t *testing.T) {
		x := te.Placeholder("X", i32, ir.Shape{2, 3})
		r0, r1 := te.ReduceAxis(2, "r0"), te.ReduceAxis(3, "r1")
		mn := te.ComputeReduce("mn", ir.Shape{}, te.Min, []*te.IterVar{r0, r1}, func([]tir.PrimExpr) tir.PrimExpr {
			return x.At(r0.Var, r1.Var)
		})
		q0 := te.ReduceAxis(2, "q0")
		pr := te.ComputeReduce("pr", ir.Shape{3}, te.Prod, []*te.IterVar{q0}, func(i []tir.PrimExpr) tir.PrimExpr {
			return tir.Add(x.At(q0.Var, i[0]), mn.At())
		})
		s := te.CreateSchedule(pr)
		f := mustLower(t, "min_prod", []*te.Tensor{x, pr}, s)
		checkRun(t, f, 1, func(in []*interp.Array) [][]float64 {
			xs := ints(in[0])
			m := xs[0]
			for _, v := range xs {
				m = min(m, v)
			}
			o := make([]int64, 3)
			for j := range o {
				o[j] = (xs[j] + m) * (xs[3+j] + m)
			}
			return [][]float64{fromInts(o)}
		})
	})
}

// ---- extern ----

// TestExternBetweenComputes runs a row-wise prefix sum written as TIR
// loops between two computes.
func TestExternBetweenComputes(t *testing.T) {
	const m, n = 3, 5
	a := te.Placeholder("A", f32, ir.Shape{m, n})
	b := te.Compute("B", ir.Shape{m, n}, func(i []tir.PrimExpr) tir.PrimExpr {
		return tir.Mul(a.At(i...), tir.Float32(2))
	})
	cs := te.Extern("cumsum", []ir.Shape{{m, n}}, []ir.DType{f32}, []*te.Tensor{b}, func(ins, outs []*tir.Buffer) tir.Stmt {
		in, out := ins[0], outs[0]
		r, j := tir.NewVar("r", tir.Int32T), tir.NewVar("j", tir.Int32T)
		return tir.Loop(r, m, tir.Serial, tir.Seq(
			tir.NewStore(out, tir.NewLoad(in, r, tir.Idx(0)), r, tir.Idx(0)),
			tir.NewFor(j, tir.Idx(1), tir.Idx(n-1), tir.Serial,
				tir.NewStore(out, tir.Add(tir.NewLoad(out, r, tir.Sub(j, tir.Idx(1))), tir.NewLoad(in, r, j)), r, j)),
		))
	})[0]
	d := te.Compute("D", ir.Shape{m, n}, func(i []tir.PrimExpr) tir.PrimExpr {
		return tir.Add(cs.At(i...), tir.Float32(1))
	})
	s := te.CreateSchedule(d)
	s.AutoInlineInjective() // B stays: the extern reads it
	f := mustLower(t, "extern_mid", []*te.Tensor{a, d}, s)
	checkRun(t, f, 1, func(in []*interp.Array) [][]float64 {
		xs := f32s(in[0])
		o := make([]float32, m*n)
		for r := 0; r < m; r++ {
			acc := float32(0)
			for j := 0; j < n; j++ {
				acc = acc + xs[r*n+j]*2
				o[r*n+j] = acc + 1
			}
		}
		return [][]float64{fromF32(o)}
	})
}

// TestIntermediateAsArgument passes an intermediate tensor as a parameter
// instead of allocating it.
func TestIntermediateAsArgument(t *testing.T) {
	a, b, c := addTensors(3, 4, i32)
	d := te.Compute("D", ir.Shape{3, 4}, func(i []tir.PrimExpr) tir.PrimExpr {
		return tir.Mul(c.At(i...), tir.Int32(3))
	})
	s := te.CreateSchedule(d)
	f := mustLower(t, "two_outputs", []*te.Tensor{a, b, c, d}, s)
	if contains(f.String(), "allocate") {
		t.Errorf("C is a parameter and must not be allocated:\n%s", f)
	}
	checkRun(t, f, 2, func(in []*interp.Array) [][]float64 {
		cs := refAdd(in)[0]
		ds := make([]float64, len(cs))
		for i, v := range cs {
			ds[i] = v * 3
		}
		return [][]float64{cs, ds}
	})
}

// ---- bound inference ----

// TestComputeAtBounds covers bound inference beyond single reads: a
// stencil whose reads reach below and above the tile (union of regions,
// producer guarded at the tensor edges), a non-affine read that falls
// back to the full extent, and nested compute_at.
func TestComputeAtBounds(t *testing.T) {
	const n = 10
	t.Run("stencil", func(t *testing.T) {
		a := te.Placeholder("A", i32, ir.Shape{n})
		p := te.Compute("P", ir.Shape{n}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Mul(a.At(i...), tir.Int32(3)) })
		c := te.Compute("C", ir.Shape{n}, func(i []tir.PrimExpr) tir.PrimExpr {
			left := te.IfThenElse(tir.GE(i[0], idx(1)), p.At(tir.Sub(i[0], idx(1))), tir.Int32(0))
			right := te.IfThenElse(tir.LT(i[0], idx(n-1)), p.At(tir.Add(i[0], idx(1))), tir.Int32(0))
			return tir.Add(tir.Add(left, p.At(i[0])), right)
		}, te.WithAxisNames("i"))
		s := te.CreateSchedule(c)
		sc := s.Stage(c)
		io, _ := sc.Split(sc.Axis()[0], 4)
		s.Stage(p).ComputeAt(sc, io)
		f := mustLower(t, "stencil", []*te.Tensor{a, c}, s)
		text := f.String()
		for _, w := range []string{`T.allocate((6,), "int32", "global") as P`, "i_outer * 4 + i0 - 1 >= 0", "i_outer * 4 + i0 - 1 < 10"} {
			if !contains(text, w) {
				t.Errorf("lowered TIR lacks %q:\n%s", w, text)
			}
		}
		checkRun(t, f, 1, func(in []*interp.Array) [][]float64 {
			x := ints(in[0])
			o := make([]int64, n)
			for i := range o {
				o[i] = 3 * x[i]
				if i > 0 {
					o[i] += 3 * x[i-1]
				}
				if i < n-1 {
					o[i] += 3 * x[i+1]
				}
			}
			return [][]float64{fromInts(o)}
		})
	})
	t.Run("non_affine_full_extent", func(t *testing.T) {
		a := te.Placeholder("A", i32, ir.Shape{8})
		p := te.Compute("P", ir.Shape{8}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Add(a.At(i...), tir.Int32(5)) })
		c := te.Compute("C", ir.Shape{n}, func(i []tir.PrimExpr) tir.PrimExpr {
			return p.At(tir.FloorMod(tir.Mul(i[0], i[0]), idx(8)))
		})
		s := te.CreateSchedule(c)
		sc := s.Stage(c)
		io, _ := sc.Split(sc.Axis()[0], 4)
		s.Stage(p).ComputeAt(sc, io)
		f := mustLower(t, "gather", []*te.Tensor{a, c}, s)
		if !contains(f.String(), `T.allocate((8,), "int32", "global") as P`) {
			t.Errorf("non-affine reads should fall back to the full extent:\n%s", f)
		}
		checkRun(t, f, 1, func(in []*interp.Array) [][]float64 {
			x := ints(in[0])
			o := make([]int64, n)
			for i := range o {
				o[i] = x[(i*i)%8] + 5
			}
			return [][]float64{fromInts(o)}
		})
	})
	t.Run("nested", func(t *testing.T) {
		a := te.Placeholder("A", i32, ir.Shape{6, 9})
		p1 := te.Compute("P1", ir.Shape{6, 9}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Add(a.At(i...), tir.Int32(1)) })
		p2 := te.Compute("P2", ir.Shape{6, 8}, func(i []tir.PrimExpr) tir.PrimExpr {
			return tir.Mul(p1.At(i[0], i[1]), p1.At(i[0], tir.Add(i[1], idx(1))))
		})
		c := te.Compute("C", ir.Shape{6, 8}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Sub(p2.At(i...), tir.Int32(7)) })
		s := te.CreateSchedule(c)
		sc := s.Stage(c)
		ax := sc.Axis()
		jo, _ := sc.Split(ax[1], 4)
		s.Stage(p2).ComputeAt(sc, jo)
		sp2 := s.Stage(p2)
		s.Stage(p1).ComputeAt(sp2, sp2.Axis()[0])
		f := mustLower(t, "nested", []*te.Tensor{a, c}, s)
		text := f.String()
		for _, w := range []string{`T.allocate((1, 4), "int32", "global") as P2`, `T.allocate((1, 5), "int32", "global") as P1`} {
			if !contains(text, w) {
				t.Errorf("lowered TIR lacks %q:\n%s", w, text)
			}
		}
		checkRun(t, f, 1, func(in []*interp.Array) [][]float64 {
			x := ints(in[0])
			o := make([]int64, 6*8)
			for i := 0; i < 6; i++ {
				for j := 0; j < 8; j++ {
					o[i*8+j] = int64(int32((x[i*9+j]+1)*(x[i*9+j+1]+1) - 7))
				}
			}
			return [][]float64{fromInts(o)}
		})
	})
	t.Run("cache_write_elementwise_scope", func(t *testing.T) {
		a, b, c := addTensors(6, 8, i32)
		s := te.CreateSchedule(c)
		cl := s.CacheWrite(c, "local")
		sc := s.Stage(c)
		ax := sc.Axis()
		jo, ji := sc.Split(ax[1], 4)
		sc.Vectorize(ji)
		s.Stage(cl).ComputeAt(sc, jo)
		f := mustLower(t, "add_cached", []*te.Tensor{a, b, c}, s)
		if !contains(f.String(), `T.allocate((1, 4), "int32", "local") as C_local`) {
			t.Errorf("expected a 1x4 local cache:\n%s", f)
		}
		checkRun(t, f, 2, refAdd)
	})
}

// TestComputeAtDivMod covers bound inference through floordiv/floormod:
// an upsampling read (i/2) and a fused, split consumer whose reads divide
// the fused index by a non-multiple of the split factor.
func TestComputeAtDivMod(t *testing.T) {
	t.Run("upsample", func(t *testing.T) {
		a := te.Placeholder("A", i32, ir.Shape{4, 4})
		p := te.Compute("P", ir.Shape{4, 4}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Mul(a.At(i...), tir.Int32(2)) })
		c := te.Compute("C", ir.Shape{8, 8}, func(i []tir.PrimExpr) tir.PrimExpr {
			return p.At(tir.FloorDiv(i[0], idx(2)), tir.FloorDiv(i[1], idx(2)))
		}, te.WithAxisNames("i", "j"))
		s := te.CreateSchedule(c)
		sc := s.Stage(c)
		jo, _ := sc.Split(sc.Axis()[1], 4)
		s.Stage(p).ComputeAt(sc, jo)
		f := mustLower(t, "upsample", []*te.Tensor{a, c}, s)
		if !contains(f.String(), `T.allocate((1, 2), "int32", "global") as P`) {
			t.Errorf("expected a 1x2 region of P:\n%s", f)
		}
		checkRun(t, f, 1, func(in []*interp.Array) [][]float64 {
			x := ints(in[0])
			o := make([]int64, 64)
			for i := 0; i < 8; i++ {
				for j := 0; j < 8; j++ {
					o[i*8+j] = 2 * x[(i/2)*4+j/2]
				}
			}
			return [][]float64{fromInts(o)}
		})
	})
	t.Run("fused_split_consumer", func(t *testing.T) {
		a := te.Placeholder("A", i32, ir.Shape{3, 5})
		p := te.Compute("P", ir.Shape{3, 5}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Sub(a.At(i...), tir.Int32(4)) })
		c := te.Compute("C", ir.Shape{3, 5}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Mul(p.At(i...), p.At(i...)) })
		s := te.CreateSchedule(c)
		sc := s.Stage(c)
		ax := sc.Axis()
		fo, _ := sc.Split(sc.Fuse(ax[0], ax[1]), 4)
		s.Stage(p).ComputeAt(sc, fo)
		f := mustLower(t, "fused_consumer", []*te.Tensor{a, c}, s)
		if !contains(f.String(), `T.allocate((2, 5), "int32", "global") as P`) {
			t.Errorf("expected a 2x5 region of P:\n%s", f)
		}
		checkRun(t, f, 1, func(in []*interp.Array) [][]float64 {
			x := ints(in[0])
			o := make([]int64, 15)
			for i := range o {
				o[i] = (x[i] - 4) * (x[i] - 4)
			}
			return [][]float64{fromInts(o)}
		})
	})
	t.Run("scope_and_compute_root", func(t *testing.T) {
		a := te.Placeholder("A", i32, ir.Shape{4})
		p := te.Compute("P", ir.Shape{4}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Add(a.At(i...), tir.Int32(1)) })
		c := te.Compute("C", ir.Shape{4}, func(i []tir.PrimExpr) tir.PrimExpr { return tir.Add(p.At(i...), p.At(i...)) })
		s := te.CreateSchedule(c)
		sp := s.Stage(p)
		sp.ComputeAt(s.Stage(c), s.Stage(c).Axis()[0])
		sp.ComputeRoot()
		sp.SetScope("local")
		f := mustLower(t, "scoped", []*te.Tensor{a, c}, s)
		if !contains(f.String(), `T.allocate((4,), "int32", "local") as P`) {
			t.Errorf("expected a root local P:\n%s", f)
		}
		checkRun(t, f, 1, func(in []*interp.Array) [][]float64 {
			x := ints(in[0])
			o := make([]int64, 4)
			for i := range o {
				o[i] = 2 * (x[i] + 1)
			}
			return [][]float64{fromInts(o)}
		})
	})
}
