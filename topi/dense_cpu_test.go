package topi

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/interp"
	"github.com/kiln-dev/kiln/topi/topitest"
)

// TestMatMulCPU checks the register-tiled matmul against the reference on
// the shapes of the real models (scaled down) and on shapes that do not
// divide the tile sizes; topitest.Check runs the generic implementation
// too.
func TestMatMulCPU(t *testing.T) {
	runNNCases(t, []nnCase{
		{"bert_qkv", op.MatMul, nil, []nnArg{nnA(nnTF32, 1, 16, 32), nnA(nnTF32, 32, 96)}},
		{"bert_scores", op.MatMul, nil, []nnArg{nnA(nnTF32, 4, 16, 8), nnA(nnTF32, 4, 8, 16)}},
		{"bert_ffn", op.MatMul, nil, []nnArg{nnA(nnTF32, 16, 64), nnA(nnTF32, 64, 128)}},
		{"classifier_m1", op.MatMul, nil, []nnArg{nnA(nnTF32, 1, 40), nnA(nnTF32, 40, 10)}},
		{"ragged_m_n", op.MatMul, nil, []nnArg{nnA(nnTF32, 7, 13), nnA(nnTF32, 13, 37)}},
		{"ragged_n_over_16", op.MatMul, nil, []nnArg{nnA(nnTF32, 5, 9), nnA(nnTF32, 9, 20)}},
		{"n_mult_8", op.MatMul, nil, []nnArg{nnA(nnTF32, 6, 3), nnA(nnTF32, 3, 24)}},
		{"prime_m", op.MatMul, nil, []nnArg{nnA(nnTF32, 11, 5), nnA(nnTF32, 5, 48)}},
		{"batch_bcast", op.MatMul, nil, []nnArg{nnA(nnTF32, 2, 1, 6, 5), nnA(nnTF32, 3, 5, 16)}},
		{"transpose_a", op.MatMul, ir.Attrs{"transpose_a": true}, []nnArg{nnA(nnTF32, 2, 5, 12), nnA(nnTF32, 5, 33)}},
	})
}

// TestMatMulCPUSelected checks which calls the tuned matmul takes.
func TestMatMulCPUSelected(t *testing.T) {
	f32 := func(s ...int64) ir.Type { return ir.NewTensorType(nnTF32, s) }
	cases := []struct {
		name  string
		attrs ir.Attrs
		a, b  ir.Type
		out   ir.Type
		want  string
	}{
		{"f32_2d", ir.Attrs{}, f32(4, 8), f32(8, 16), f32(4, 16), "nn.matmul.cpu"},
		{"f32_batched", ir.Attrs{}, f32(2, 4, 8), f32(2, 8, 16), f32(2, 4, 16), "nn.matmul.cpu"},
		{"transpose_b", ir.Attrs{"transpose_b": true}, f32(4, 8), f32(16, 8), f32(4, 16), "nn.matmul.generic"},
		{"vector", ir.Attrs{}, f32(8), f32(8, 16), f32(16), "nn.matmul.generic"},
		{"f64", ir.Attrs{}, ir.NewTensorType(nnTF64, ir.Shape{4, 8}), ir.NewTensorType(nnTF64, ir.Shape{8, 16}), ir.NewTensorType(nnTF64, ir.Shape{4, 16}), "nn.matmul.generic"},
	}
	for _, c := range cases {
		attrs, err := op.MatMul.MakeAttrs(c.attrs)
		if err != nil {
			t.Fatal(err)
		}
		call := &strategy.Call{Op: op.MatMul, Attrs: attrs, ArgTypes: []ir.Type{c.a, c.b}, OutType: c.out, Target: topitest.HostTarget()}
		impl, err := strategy.Default.Select(call)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if impl.Name != c.want {
			t.Errorf("%s: selected %s, want %s", c.name, impl.Name, c.want)
		}
	}
}

func TestMatMulTiles(t *testing.T) {
	for _, c := range []struct {
		m, n   int64
		wide   bool
		mr, nr int64
	}{
		{64, 384, true, 8, 32}, {64, 384, false, 4, 16}, {1, 2, true, 1, 2}, {7, 37, true, 1, 16},
		{12, 24, true, 6, 8}, {12, 24, false, 4, 8}, {9, 32, true, 3, 16}, {10, 1000, false, 2, 8},
	} {
		if got := matmulTileRows(c.m, c.wide); got != c.mr {
			t.Errorf("rows(%d, wide=%v) = %d, want %d", c.m, c.wide, got, c.mr)
		}
		if got := matmulTileCols(c.n, c.wide); got != c.nr {
			t.Errorf("cols(%d, wide=%v) = %d, want %d", c.n, c.wide, got, c.nr)
		}
	}
}

// TestMatMulPanels: a single-row packed product's register tile spans the
// most panels, up to 64 columns, that divide the panel count.
func TestMatMulPanels(t *testing.T) {
	for _, c := range []struct{ npanels, panel, want int64 }{
		{125, 8, 5}, {80, 16, 4}, {7, 8, 7}, {13, 16, 1}, {2, 64, 1}, {3, 8, 3}, {64, 8, 8}, {1, 8, 1},
	} {
		if got := matmulPanels(c.npanels, c.panel); got != c.want {
			t.Errorf("matmulPanels(%d, %d) = %d, want %d", c.npanels, c.panel, got, c.want)
		}
	}
}

// TestMatMulRowPanels: a register tile of several rows spans the most
// panels, up to 64 columns, that divide the panel count and keep its
// accumulator vectors within three quarters of the registers.
func TestMatMulRowPanels(t *testing.T) {
	for _, c := range []struct {
		mcpu               string
		mr, npanels, panel int64
		want               int64
	}{
		{"sapphirerapids", 4, 12, 16, 4}, // 16 of 24 accumulators
		{"sapphirerapids", 8, 12, 16, 3}, // 24
		{"sapphirerapids", 8, 8, 16, 2},  // 3 does not divide 8
		{"sapphirerapids", 6, 5, 16, 1},  // 5 panels: 5 x 6 > 24
		{"sapphirerapids", 3, 6, 8, 6},   // panels of 8 are half a vector
		{"haswell", 4, 12, 16, 1},        // 8 of 12 (two vectors per panel)
		{"haswell", 2, 12, 16, 3},
		{"haswell", 3, 12, 8, 4},
	} {
		tg := mcpuTarget(t, c.mcpu)
		if got := matmulRowPanels(tg, c.mr, c.npanels, c.panel); got != c.want {
			t.Errorf("%s: %d rows, %d panels of %d: %d per tile, want %d", c.mcpu, c.mr, c.npanels, c.panel, got, c.want)
		}
	}
}

func TestMatMulWideVectors(t *testing.T) {
	for _, c := range []struct {
		mcpu string
		want bool
	}{{"x86-64", false}, {"x86-64-v3", false}, {"x86-64-v4", true}, {"skylake-avx512", true}, {"icelake-server", true}, {"haswell", false}} {
		tg := mcpuTarget(t, c.mcpu)
		if got := matmulWideVectors(tg); got != c.want {
			t.Errorf("mcpu=%s: wide %v, want %v", c.mcpu, got, c.want)
		}
	}
}

// TestMatMulCPUNarrow checks the 4 x 16 tiles used without AVX-512.
func TestMatMulCPUNarrow(t *testing.T) {
	tg := mcpuTarget(t, "x86-64")
	rng := rand.New(rand.NewSource(7))
	for _, c := range []struct{ a, b ir.Shape }{
		{ir.Shape{1, 16, 32}, ir.Shape{32, 96}},
		{ir.Shape{4, 12, 8}, ir.Shape{4, 8, 20}},
		{ir.Shape{7, 13}, ir.Shape{13, 37}},
	} {
		args := []*tensor.Tensor{topitest.Rand(rng, nnTF32, c.a), topitest.Rand(rng, nnTF32, c.b)}
		if err := topitest.Check(topitest.Case{Op: op.MatMul, Args: args, Target: tg}); err != nil {
			t.Errorf("%v x %v: %v", c.a, c.b, err)
		}
	}
}

// mcpuTarget is the C target for the processor mcpu names.
func mcpuTarget(t testing.TB, mcpu string) *targets.Target {
	t.Helper()
	tg, err := targets.New(targets.C, ir.Attrs{"mcpu": mcpu})
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// TestMatMulOutlinedReduction checks where the packed product's reduction
// is outlined (te.Stage.Outline): with an epilogue computing tanh on a
// processor of 16 vector registers, not with a bias-only epilogue nor on
// AVX-512; and that the fused result matches the reference either way.
func TestMatMulOutlinedReduction(t *testing.T) {
	rng := rand.New(rand.NewSource(77))
	a := topitest.Rand(rng, nnTF32, ir.Shape{8, 32})
	w := topitest.Rand(rng, nnTF32, ir.Shape{32, 48})
	bias := topitest.Rand(rng, nnTF32, ir.Shape{48})
	pw, err := ref.PackMatMulWeight(w, 16)
	if err != nil {
		t.Fatal(err)
	}
	mmAttrs, err := op.MatMul.MakeAttrs(nil)
	if err != nil {
		t.Fatal(err)
	}
	mm, _, err := ref.EvalOp(op.MatMul, mmAttrs, []*tensor.Tensor{a, w})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mcpu    string
		tanh    bool
		outline bool
	}{
		{"haswell", true, true}, {"haswell", false, false}, {"sapphirerapids", true, false}, {"x86-64", true, true},
	} {
		t.Run(fmt.Sprintf("%s_tanh=%v", c.mcpu, c.tanh), func(t *testing.T) {
			call := refCall(t, op.MatMulPacked, nil, []*tensor.Tensor{a, pw}, mcpuTarget(t, c.mcpu))
			impl, err := strategy.Default.Select(call)
			if err != nil {
				t.Fatal(err)
			}
			phs := []*te.Tensor{te.Placeholder("a", nnTF32, a.Shape), te.Placeholder("w", nnTF32, pw.Shape), te.Placeholder("bias", nnTF32, bias.Shape)}
			anchor, err := impl.Compute(call, phs[:2])
			if err != nil {
				t.Fatal(err)
			}
			out := te.Compute("epilogue", anchor[0].Shape, func(i []tir.PrimExpr) tir.PrimExpr {
				v := tir.Add(anchor[0].At(i...), phs[2].At(i[1]))
				if c.tanh {
					v = tir.Mul(v, tir.NewCall(tir.IntrinTanh, v))
				}
				return v
			})
			f := lowerFused(t, impl, call, phs, out, anchor)
			if got := strings.Contains(f.String(), tir.AnnOutline); got != c.outline {
				t.Errorf("outlined %v, want %v:\n%s", got, c.outline, f)
			}
			got := tensor.New(nnTF32, mm[0].Shape)
			var iargs []any
			for _, v := range []*tensor.Tensor{a, pw, bias, got} {
				iargs = append(iargs, &interp.Array{DType: v.DType, Data: v.Data})
			}
			if err := interp.Run(f, iargs, nil); err != nil {
				t.Fatal(err)
			}
			want := tensor.New(nnTF32, mm[0].Shape)
			for i := 0; i < want.Len(); i++ {
				v := float32(mm[0].Float(i)) + float32(bias.Float(i%48))
				if c.tanh {
					v *= float32(math.Tanh(float64(v)))
				}
				want.SetFloat(i, float64(v))
			}
			if err := tensor.AllClose(got, want, 1e-5, 1e-5); err != nil {
				t.Fatal(err)
			}
		})
	}
}
