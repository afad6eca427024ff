//go:build cgo && !kiln_nodnnl

package dnnl

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/backend/backendtest"
	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/partition"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

const rtol, atol = 1e-4, 1e-5

func randTensor(rng *rand.Rand, s ...int64) *tensor.Tensor {
	t := tensor.New(ir.Float32, ir.Shape(s))
	for i := range t.Float32s() {
		t.Float32s()[i] = float32(rng.Float64()*2 - 1)
	}
	return t
}

func positive(rng *rand.Rand, s ...int64) *tensor.Tensor {
	t := randTensor(rng, s...)
	for i, v := range t.Float32s() {
		t.Float32s()[i] = v*v + 0.5
	}
	return t
}

func registry(t testing.TB) *targets.Registry {
	t.Helper()
	r := targets.NewRegistry()
	if err := r.Register(targets.C); err != nil {
		t.Fatal(err)
	}
	if err := Register(r); err != nil {
		t.Fatal(err)
	}
	return r
}

// compile builds mod for targets into a fresh directory.
func compile(t testing.TB, mod *graph.Module, tgts string, rep *partition.Report) string {
	t.Helper()
	l, err := registry(t).ParseList(tgts)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "art")
	if _, err := driver.Compile(mod, nil, driver.Config{Host: l.Host, Targets: l.Targets, Out: out, Report: rep, ModuleName: "test"}); err != nil {
		t.Fatal(err)
	}
	return out
}

// runArtifact loads dir (a fresh LoadArtifact) and runs it.
func runArtifact(t testing.TB, dir string, mod *graph.Module, inputs []*tensor.Tensor) []*tensor.Tensor {
	t.Helper()
	art, err := driver.LoadArtifact(dir)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]*tensor.Tensor{}
	for i, p := range mod.Main().Params {
		vals[p.Name] = inputs[i]
	}
	got, err := art.Run(vals)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func checkAgainstRef(t *testing.T, mod *graph.Module, inputs []*tensor.Tensor, got []*tensor.Tensor) {
	t.Helper()
	backendtest.CheckAgainstReference(t, mod, inputs, got, rtol, atol)
}

// offload is main(params) = f(params) with f(params) = body marked for
// dnnl (Compiler, Primitive), as the partitioner outlines it.
func offload(t testing.TB, params []*graph.Var, body graph.Expr) *graph.Module {
	t.Helper()
	f := graph.NewFunction(params, body, ir.Attrs{graph.AttrCompiler: "dnnl", graph.AttrPrimitive: true})
	var outer []*graph.Var
	var args []graph.Expr
	for _, p := range params {
		v := graph.NewVar(p.Name, p.Type())
		outer = append(outer, v)
		args = append(args, v)
	}
	mod := graph.NewModule(graph.NewFunction(outer, graph.NewFuncCall(f, args), nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	return mod
}

func fvar(name string, s ...int64) *graph.Var {
	return graph.NewVar(name, ir.NewTensorType(ir.Float32, ir.Shape(s)))
}

func call(o *op.Op, attrs ir.Attrs, args ...graph.Expr) *graph.Call {
	return graph.MustCall(o, args, attrs)
}

// composite wraps body(params) as a composite function called on args.
func composite(name string, params []*graph.Var, body graph.Expr, args ...graph.Expr) *graph.Call {
	return graph.NewFuncCall(graph.NewFunction(params, body, ir.Attrs{graph.AttrComposite: name}), args)
}

type opCase struct {
	name   string
	build  func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor)
	kernel string // the kernel node Generate must emit
}

func convCase(name string, x, w []int64, attrs ir.Attrs) opCase {
	return opCase{name: name, kernel: "nn.conv2d", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
		xv := fvar("x", x...)
		wc := graph.NewConstant(randTensor(rng, w...))
		return []*graph.Var{xv}, call(op.Conv2D, attrs, xv, wc), []*tensor.Tensor{randTensor(rng, x...)}
	}}
}

// convComposite builds a composite of spec around a conv (or dense when
// x is 2-D) with constant weight and bias and a residual parameter.
func anchorComposite(spec string, x, w []int64, attrs ir.Attrs, biasAsAdd bool) opCase {
	return opCase{name: spec, kernel: spec, build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
		cs, _ := compositeSpec(spec)
		xv := fvar("x", x...)
		wc := graph.NewConstant(randTensor(rng, w...))
		p0, p1 := fvar("p0", x...), fvar("p1", w...)
		params := []*graph.Var{p0, p1}
		args := []graph.Expr{xv, wc}
		outer := []*graph.Var{xv}
		inputs := []*tensor.Tensor{randTensor(rng, x...)}
		var e graph.Expr
		if cs.Anchor == op.Conv2D {
			e = call(op.Conv2D, attrs, p0, p1)
		} else {
			e = call(op.Dense, nil, p0, p1)
		}
		if err := graph.InferTypes(graph.NewModule(graph.NewFunction(params, e, nil))); err != nil {
			panic(err)
		}
		oshape := e.Type().(*ir.TensorType).Shape
		if cs.Bias {
			c := oshape[len(oshape)-1]
			if cs.Anchor == op.Conv2D {
				c = oshape[1]
			}
			bshape := []int64{c}
			axis := int64(1)
			if cs.Anchor == op.Dense {
				axis = -1
			}
			if biasAsAdd && cs.Anchor == op.Conv2D {
				bshape = []int64{c, 1, 1}
			}
			pb := fvar("pb", bshape...)
			params = append(params, pb)
			args = append(args, graph.NewConstant(randTensor(rng, bshape...)))
			if biasAsAdd {
				e = call(op.Add, nil, pb, e)
			} else {
				e = call(op.BiasAdd, ir.Attrs{"axis": axis}, e, pb)
			}
		}
		if cs.Add {
			y := fvar("y", oshape...)
			py := fvar("py", oshape...)
			params = append(params, py)
			args = append(args, y)
			outer = append(outer, y)
			inputs = append(inputs, randTensor(rng, oshape...))
			e = call(op.Add, nil, py, e)
		}
		switch cs.Act {
		case ActRelu:
			e = call(op.Relu, nil, e)
		case ActClip:
			// relu6-like bounds that cut both tails of the random data.
			e = call(op.Clip, ir.Attrs{"a_min": -0.5, "a_max": 0.75}, e)
		case ActHardSwish:
			// As exporters write it: y * clip(y * (1/6) + 1/2, 0, 1), the
			// constants in both operand orders.
			scaled := call(op.Multiply, nil, graph.NewConstant(tensor.Scalar(ir.Float32, 1.0/6)), e)
			hs := call(op.Clip, ir.Attrs{"a_min": 0.0, "a_max": 1.0}, call(op.Add, nil, scaled, graph.NewConstant(tensor.Scalar(ir.Float32, 0.5))))
			e = call(op.Multiply, nil, hs, e)
		case ActHardSigmoid:
			// ONNX's default alpha, so that the random data reaches both
			// bounds; the constant first in the multiply.
			scaled := call(op.Multiply, nil, graph.NewConstant(tensor.Scalar(ir.Float32, 2.5)), e)
			e = call(op.Clip, ir.Attrs{"a_min": 0.0, "a_max": 1.0}, call(op.Add, nil, scaled, graph.NewConstant(tensor.Scalar(ir.Float32, 0.5))))
		case ActSigmoid:
			e = call(op.Sigmoid, nil, e)
		case ActSiLU:
			e = call(op.Multiply, nil, call(op.Sigmoid, nil, e), e)
		}
		return outer, composite(spec, params, e, args...), inputs
	}}
}

func TestOpsAgainstReference(t *testing.T) {
	conv := func(s, p, d []int64, g int64) ir.Attrs {
		return ir.Attrs{"strides": s, "padding": p, "dilation": d, "groups": g}
	}
	cases := []opCase{
		convCase("conv 3x3 pad 1", []int64{1, 8, 10, 10}, []int64{16, 8, 3, 3}, conv([]int64{1, 1}, []int64{1, 1, 1, 1}, []int64{1, 1}, 1)),
		convCase("conv stride 2 asymmetric pad", []int64{2, 3, 15, 13}, []int64{8, 3, 5, 3}, conv([]int64{2, 2}, []int64{2, 1, 1, 0}, []int64{1, 1}, 1)),
		convCase("conv dilation", []int64{1, 4, 12, 12}, []int64{4, 4, 3, 3}, conv([]int64{1, 1}, []int64{2, 2, 2, 2}, []int64{2, 2}, 1)),
		convCase("conv groups", []int64{1, 8, 9, 9}, []int64{12, 4, 3, 3}, conv([]int64{1, 1}, []int64{1, 1, 1, 1}, []int64{1, 1}, 2)),
		convCase("conv depthwise", []int64{1, 16, 14, 14}, []int64{16, 1, 3, 3}, conv([]int64{2, 2}, []int64{1, 1, 1, 1}, []int64{1, 1}, 16)),
		convCase("conv 1x1", []int64{1, 32, 7, 7}, []int64{64, 32, 1, 1}, conv([]int64{1, 1}, []int64{0, 0, 0, 0}, []int64{1, 1}, 1)),
		anchorComposite(CompositeConv2DBias, []int64{1, 8, 10, 10}, []int64{16, 8, 3, 3}, conv([]int64{1, 1}, []int64{1, 1, 1, 1}, []int64{1, 1}, 1), false),
		anchorComposite(CompositeConv2DRelu, []int64{1, 8, 10, 10}, []int64{16, 8, 3, 3}, conv([]int64{2, 2}, []int64{1, 1, 1, 1}, []int64{1, 1}, 1), false),
		anchorComposite(CompositeConv2DBiasRelu, []int64{1, 16, 12, 12}, []int64{16, 1, 3, 3}, conv([]int64{1, 1}, []int64{1, 1, 1, 1}, []int64{1, 1}, 16), true),
		anchorComposite(CompositeConv2DAdd, []int64{1, 8, 10, 10}, []int64{8, 8, 3, 3}, conv([]int64{1, 1}, []int64{1, 1, 1, 1}, []int64{1, 1}, 1), false),
		anchorComposite(CompositeConv2DAddRelu, []int64{1, 8, 10, 10}, []int64{8, 8, 1, 1}, conv([]int64{1, 1}, []int64{0, 0, 0, 0}, []int64{1, 1}, 1), false),
		anchorComposite(CompositeConv2DBiasAdd, []int64{1, 8, 10, 10}, []int64{16, 8, 3, 3}, conv([]int64{1, 1}, []int64{1, 1, 1, 1}, []int64{1, 1}, 1), true),
		anchorComposite(CompositeConv2DBiasAddRelu, []int64{2, 16, 8, 8}, []int64{16, 16, 3, 3}, conv([]int64{1, 1}, []int64{1, 1, 1, 1}, []int64{1, 1}, 1), false),
		anchorComposite(CompositeDenseBias, []int64{4, 32}, []int64{10, 32}, nil, true),
		anchorComposite(CompositeConv2DBiasClip, []int64{1, 16, 12, 12}, []int64{16, 1, 3, 3}, conv([]int64{1, 1}, []int64{1, 1, 1, 1}, []int64{1, 1}, 16), false),
		anchorComposite(CompositeConv2DBiasHardSwish, []int64{1, 8, 10, 10}, []int64{16, 8, 3, 3}, conv([]int64{1, 1}, []int64{1, 1, 1, 1}, []int64{1, 1}, 1), false),
		anchorComposite(CompositeConv2DHardSwish, []int64{1, 16, 12, 12}, []int64{16, 1, 3, 3}, conv([]int64{2, 2}, []int64{1, 1, 1, 1}, []int64{1, 1}, 16), false),
		anchorComposite(CompositeDenseBiasHardSwish, []int64{4, 32}, []int64{24, 32}, nil, true),
		anchorComposite(CompositeDenseHardSwish, []int64{3, 40}, []int64{16, 40}, nil, false),
		anchorComposite(CompositeConv2DBiasHardSigmoid, []int64{1, 8, 10, 10}, []int64{16, 8, 1, 1}, conv([]int64{1, 1}, []int64{0, 0, 0, 0}, []int64{1, 1}, 1), true),
		anchorComposite(CompositeConv2DBiasSigmoid, []int64{1, 8, 5, 5}, []int64{16, 8, 1, 1}, conv([]int64{1, 1}, []int64{0, 0, 0, 0}, []int64{1, 1}, 1), false),
		anchorComposite(CompositeConv2DBiasSiLU, []int64{1, 16, 12, 12}, []int64{16, 1, 3, 3}, conv([]int64{1, 1}, []int64{1, 1, 1, 1}, []int64{1, 1}, 16), false),
		anchorComposite("dnnl.dense_bias_silu", []int64{4, 32}, []int64{24, 32}, nil, true),
		anchorComposite("dnnl.conv2d_silu", []int64{1, 8, 6, 6}, []int64{8, 8, 3, 3}, conv([]int64{1, 1}, []int64{1, 1, 1, 1}, []int64{1, 1}, 1), false),
		anchorComposite("dnnl.dense_bias_sigmoid", []int64{3, 16}, []int64{8, 16}, nil, false),
		anchorComposite(CompositeConv2DClip, []int64{1, 8, 10, 10}, []int64{16, 8, 1, 1}, conv([]int64{1, 1}, []int64{0, 0, 0, 0}, []int64{1, 1}, 1), false),
		anchorComposite(CompositeDenseRelu, []int64{3, 2, 16}, []int64{8, 16}, nil, false),
		anchorComposite(CompositeDenseBiasRelu, []int64{4, 32}, []int64{10, 32}, nil, false),
		{name: "dense", kernel: "nn.dense", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			x, w := fvar("x", 5, 12), fvar("w", 7, 12)
			return []*graph.Var{x, w}, call(op.Dense, nil, x, w), []*tensor.Tensor{randTensor(rng, 5, 12), randTensor(rng, 7, 12)}
		}},
		{name: "matmul batched transposed", kernel: "nn.matmul", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			a, b := fvar("a", 2, 3, 6, 5), fvar("b", 1, 3, 4, 6)
			return []*graph.Var{a, b}, call(op.MatMul, ir.Attrs{"transpose_a": true, "transpose_b": true}, a, b), []*tensor.Tensor{randTensor(rng, 2, 3, 6, 5), randTensor(rng, 1, 3, 4, 6)}
		}},
		{name: "matmul broadcast weight", kernel: "nn.matmul", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			a := fvar("a", 2, 4, 8)
			return []*graph.Var{a}, call(op.MatMul, nil, a, graph.NewConstant(randTensor(rng, 8, 3))), []*tensor.Tensor{randTensor(rng, 2, 4, 8)}
		}},
		// Batch folded into M ([6,1,8] as [6,8]) with a constant
		// transposed weight reordered once at build time.
		{name: "matmul folded transposed constant weight", kernel: "nn.matmul", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			a := fvar("a", 6, 1, 8)
			return []*graph.Var{a}, call(op.MatMul, ir.Attrs{"transpose_b": true}, a, graph.NewConstant(randTensor(rng, 3, 8))), []*tensor.Tensor{randTensor(rng, 6, 1, 8)}
		}},
		{name: "matmul folded variable weight", kernel: "nn.matmul", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			a, b := fvar("a", 2, 3, 4, 8), fvar("b", 1, 1, 8, 5)
			return []*graph.Var{a, b}, call(op.MatMul, nil, a, b), []*tensor.Tensor{randTensor(rng, 2, 3, 4, 8), randTensor(rng, 1, 1, 8, 5)}
		}},
		// Not folded (transposed first operand): a rank-3 product with a
		// constant weight in oneDNN's layout.
		{name: "matmul batched constant weight", kernel: "nn.matmul", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			a := fvar("a", 2, 5, 3)
			return []*graph.Var{a}, call(op.MatMul, ir.Attrs{"transpose_a": true}, a, graph.NewConstant(randTensor(rng, 1, 5, 4))), []*tensor.Tensor{randTensor(rng, 2, 5, 3)}
		}},
		{name: "concatenate three last axis", kernel: "concatenate", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			a, b, c := fvar("a", 3, 2), fvar("b", 3, 5), fvar("c", 3, 1)
			return []*graph.Var{a, b, c}, call(op.Concatenate, ir.Attrs{"axis": int64(-1)}, a, b, c), []*tensor.Tensor{randTensor(rng, 3, 2), randTensor(rng, 3, 5), randTensor(rng, 3, 1)}
		}},
		{name: "concatenate channels", kernel: "concatenate", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			a, b := fvar("a", 1, 3, 4, 4), fvar("b", 1, 5, 4, 4)
			return []*graph.Var{a, b}, call(op.Concatenate, ir.Attrs{"axis": int64(1)}, a, b), []*tensor.Tensor{randTensor(rng, 1, 3, 4, 4), randTensor(rng, 1, 5, 4, 4)}
		}},
		{name: "max pool ceil", kernel: "nn.max_pool2d", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			x := fvar("x", 1, 4, 11, 11)
			return []*graph.Var{x}, call(op.MaxPool2D, ir.Attrs{"pool_size": []int64{3, 3}, "strides": []int64{2, 2}, "padding": []int64{1, 1, 1, 1}, "ceil_mode": true}, x), []*tensor.Tensor{randTensor(rng, 1, 4, 11, 11)}
		}},
		{name: "avg pool exclude pad", kernel: "nn.avg_pool2d", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			x := fvar("x", 2, 3, 9, 8)
			return []*graph.Var{x}, call(op.AvgPool2D, ir.Attrs{"pool_size": []int64{3, 2}, "strides": []int64{2, 1}, "padding": []int64{1, 0, 1, 1}}, x), []*tensor.Tensor{randTensor(rng, 2, 3, 9, 8)}
		}},
		{name: "avg pool include pad", kernel: "nn.avg_pool2d", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			x := fvar("x", 1, 3, 8, 8)
			return []*graph.Var{x}, call(op.AvgPool2D, ir.Attrs{"pool_size": []int64{3, 3}, "strides": []int64{1, 1}, "padding": []int64{1, 1, 1, 1}, "count_include_pad": true}, x), []*tensor.Tensor{randTensor(rng, 1, 3, 8, 8)}
		}},
		{name: "global avg pool", kernel: "nn.global_avg_pool2d", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			x := fvar("x", 2, 16, 7, 7)
			return []*graph.Var{x}, call(op.GlobalAvgPool2D, nil, x), []*tensor.Tensor{randTensor(rng, 2, 16, 7, 7)}
		}},
		{name: "add rank-1 constant to [1, n]", kernel: "add", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			// lenet's Gemm bias: [1, 120] + [120], the operand padded to
			// the output's shape but arriving as plain 1-D data.
			x := fvar("x", 1, 120)
			return []*graph.Var{x}, call(op.Add, nil, x, graph.NewConstant(randTensor(rng, 120))), []*tensor.Tensor{randTensor(rng, 1, 120)}
		}},
		{name: "clip", kernel: "clip", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			x := fvar("x", 2, 8, 5, 5)
			return []*graph.Var{x}, call(op.Clip, ir.Attrs{"a_min": -0.25, "a_max": 0.5}, x), []*tensor.Tensor{randTensor(rng, 2, 8, 5, 5)}
		}},
		{name: "relu", kernel: "nn.relu", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			x := fvar("x", 3, 5, 7)
			return []*graph.Var{x}, call(op.Relu, nil, x), []*tensor.Tensor{randTensor(rng, 3, 5, 7)}
		}},
		{name: "add", kernel: "add", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			x, y := fvar("x", 2, 3, 4), fvar("y", 2, 3, 4)
			return []*graph.Var{x, y}, call(op.Add, nil, x, y), []*tensor.Tensor{randTensor(rng, 2, 3, 4), randTensor(rng, 2, 3, 4)}
		}},
		{name: "add broadcast first", kernel: "add", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			x, y := fvar("x", 4, 1, 1), fvar("y", 2, 4, 5, 5)
			return []*graph.Var{x, y}, call(op.Add, nil, x, y), []*tensor.Tensor{randTensor(rng, 4, 1, 1), randTensor(rng, 2, 4, 5, 5)}
		}},
		{name: "multiply scalar", kernel: "multiply", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			x := fvar("x", 6, 5)
			return []*graph.Var{x}, call(op.Multiply, nil, x, graph.NewConstant(tensor.Scalar(ir.Float32, 1.75))), []*tensor.Tensor{randTensor(rng, 6, 5)}
		}},
		// Scalar constants make add, subtract and multiply an eltwise
		// linear primitive (subtract only from a tensor: binaryOrder).
		{name: "add scalar 4-D", kernel: "add", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			x := fvar("x", 1, 16, 5, 5)
			c := tensor.New(ir.Float32, ir.Shape{1, 1, 1, 1})
			c.Float32s()[0] = 3
			return []*graph.Var{x}, call(op.Add, nil, x, graph.NewConstant(c)), []*tensor.Tensor{randTensor(rng, 1, 16, 5, 5)}
		}},
		{name: "subtract scalar", kernel: "subtract", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			x := fvar("x", 2, 8, 3)
			return []*graph.Var{x}, call(op.Subtract, nil, x, graph.NewConstant(tensor.Scalar(ir.Float32, 0.25))), []*tensor.Tensor{randTensor(rng, 2, 8, 3)}
		}},
		{name: "multiply scalar first", kernel: "multiply", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			x := fvar("x", 6, 5)
			return []*graph.Var{x}, call(op.Multiply, nil, graph.NewConstant(tensor.Scalar(ir.Float32, -0.5)), x), []*tensor.Tensor{randTensor(rng, 6, 5)}
		}},
		{name: "subtract broadcast", kernel: "subtract", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			x, y := fvar("x", 3, 4), fvar("y", 4)
			return []*graph.Var{x, y}, call(op.Subtract, nil, x, y), []*tensor.Tensor{randTensor(rng, 3, 4), randTensor(rng, 4)}
		}},
		{name: "bias_add", kernel: "nn.bias_add", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			x := fvar("x", 2, 6, 3, 3)
			return []*graph.Var{x}, call(op.BiasAdd, ir.Attrs{"axis": int64(1)}, x, graph.NewConstant(randTensor(rng, 6))), []*tensor.Tensor{randTensor(rng, 2, 6, 3, 3)}
		}},
		{name: "batch_norm", kernel: "nn.batch_norm", build: func(rng *rand.Rand) ([]*graph.Var, graph.Expr, []*tensor.Tensor) {
			x := fvar("x", 2, 6, 5, 5)
			c := func() graph.Expr { return graph.NewConstant(randTensor(rng, 6)) }
			v := graph.NewConstant(positive(rng, 6))
			return []*graph.Var{x}, call(op.BatchNorm, ir.Attrs{"epsilon": 1e-3}, x, c(), c(), c(), v), []*tensor.Tensor{randTensor(rng, 2, 6, 5, 5)}
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(i + 1)))
			params, body, inputs := c.build(rng)
			mod := offload(t, params, body)
			// The function's JSON has the expected kernel.
			g, _, err := Generate(mod.Main().Body.(*graph.Call).Fn.(*graph.Function), "f")
			if err != nil {
				t.Fatal(err)
			}
			if last := g.Nodes[len(g.Nodes)-1]; last.Name != c.kernel {
				t.Errorf("kernel %s, want %s", last.Name, c.kernel)
			}
			dir := compile(t, mod, "dnnl, c -mcpu=x86-64", nil)
			checkAgainstRef(t, mod, inputs, runArtifact(t, dir, mod, inputs))
		})
	}
}

// TestChainKeepsBlockedLayouts runs a small network in one dnnl function:
// conv+bias+relu → conv+bias+residual+relu → concatenate of both → max
// pool → relu → add →
// global pool → two outputs, with intermediates in oneDNN's layouts; it
// reloads the artifact twice (fresh LoadArtifact: the saved JSON and
// constants.bin path) and checks the artifact holds the dnnl module.
func TestChainKeepsBlockedLayouts(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	x := fvar("x", 1, 16, 12, 12)
	attrs := ir.Attrs{"strides": []int64{1, 1}, "padding": []int64{1, 1, 1, 1}, "dilation": []int64{1, 1}, "groups": int64(1)}
	convBiasRelu := func(in graph.Expr, res graph.Expr) graph.Expr {
		p0, p1, p2 := fvar("p0", 1, 16, 12, 12), fvar("p1", 16, 16, 3, 3), fvar("p2", 16)
		e := call(op.BiasAdd, ir.Attrs{"axis": int64(1)}, call(op.Conv2D, attrs, p0, p1), p2)
		params := []*graph.Var{p0, p1, p2}
		args := []graph.Expr{in, graph.NewConstant(randTensor(rng, 16, 16, 3, 3)), graph.NewConstant(randTensor(rng, 16))}
		name := CompositeConv2DBiasRelu
		if res != nil {
			py := fvar("py", 1, 16, 12, 12)
			e = call(op.Add, nil, e, py)
			params = append(params, py)
			args = append(args, res)
			name = CompositeConv2DBiasAddRelu
		}
		return composite(name, params, call(op.Relu, nil, e), args...)
	}
	a := convBiasRelu(x, nil)
	b := convBiasRelu(a, a)
	cat := call(op.Concatenate, ir.Attrs{"axis": int64(1)}, a, b)
	p := call(op.MaxPool2D, ir.Attrs{"pool_size": []int64{2, 2}, "strides": []int64{2, 2}}, cat)
	r := call(op.Relu, nil, p)
	s := call(op.Add, nil, r, p)
	g := call(op.GlobalAvgPool2D, nil, s)
	mod := offload(t, []*graph.Var{x}, graph.NewTuple([]graph.Expr{g, s}))
	inputs := []*tensor.Tensor{randTensor(rng, 1, 16, 12, 12)}
	// Both activation layouts: oneDNN's pick, and channel blocks (the
	// convolutions carry the kernel attribute layout).
	for _, layout := range []string{"", LayoutBlocked} {
		tgt, want := "dnnl, c -mcpu=x86-64", `"layout"`
		if layout != "" {
			tgt, want = "dnnl -layout="+layout+", c -mcpu=x86-64", `"`+layout+`"`
		}
		dir := compile(t, mod, tgt, nil)
		for range 2 {
			checkAgainstRef(t, mod, inputs, runArtifact(t, dir, mod, inputs))
		}
		mods, _ := filepath.Glob(filepath.Join(dir, "modules", "*."+ModuleKind))
		if len(mods) != 1 {
			t.Fatalf("dnnl modules in the artifact: %v", mods)
		}
		data, err := os.ReadFile(mods[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"dnnl.conv2d_bias_relu"`, `"dnnl.conv2d_bias_add_relu"`, `"concatenate"`, `"nn.global_avg_pool2d"`, `"op": "const"`} {
			if !strings.Contains(string(data), want) {
				t.Errorf("the saved graph lacks %s", want)
			}
		}
		if strings.Contains(string(data), want) != (layout != "") {
			t.Errorf("-t %q: the saved graph has %s: %v", tgt, want, layout != "")
		}
	}
	if err := checkOp(CompositeConv2DRelu, ir.Attrs{"layout": "tiled"}, nil, &ir.TensorType{DType: ir.Float32}); err == nil || !strings.Contains(err.Error(), `attribute layout is tiled, want "any" or "blocked"`) {
		t.Errorf("a bad layout attribute: %v", err)
	}
}

// TestPartitionedModel lets partitioning choose: convolutions, relu and
// pooling go to dnnl, tanh (unsupported) stays on the host.
func TestPartitionedModel(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	x := fvar("x", 1, 3, 16, 16)
	attrs := ir.Attrs{"strides": []int64{2, 2}, "padding": []int64{1, 1, 1, 1}}
	c1 := call(op.Conv2D, attrs, x, graph.NewConstant(randTensor(rng, 8, 3, 3, 3)))
	r1 := call(op.Relu, nil, call(op.BiasAdd, nil, c1, graph.NewConstant(randTensor(rng, 8))))
	h := call(op.Tanh, nil, r1)
	c2 := call(op.Conv2D, ir.Attrs{"groups": int64(8)}, h, graph.NewConstant(randTensor(rng, 8, 1, 1, 1)))
	out := call(op.GlobalAvgPool2D, nil, call(op.Add, nil, c2, r1))
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x}, out, nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	var rep partition.Report
	inputs := []*tensor.Tensor{randTensor(rng, 1, 3, 16, 16)}
	dir := compile(t, mod, "dnnl, c -mcpu=x86-64", &rep)
	checkAgainstRef(t, mod, inputs, runArtifact(t, dir, mod, inputs))
	if rep.Counts["dnnl"] != 6 || rep.Counts[partition.HostTarget] != 1 {
		t.Errorf("report counts %v, want 6 on dnnl and 1 on the host", rep.Counts)
	}
}

func TestSupported(t *testing.T) {
	f32 := fvar("a", 1, 4, 8, 8)
	i32 := graph.NewVar("b", ir.NewTensorType(ir.Int32, ir.Shape{2}))
	w := fvar("w", 4, 4, 3, 3)
	v := fvar("v", 8)
	p0, p1 := fvar("p0", 1, 4, 8, 8), fvar("p1", 4, 4, 3, 3)
	for _, c := range []struct {
		call *graph.Call
		want string
	}{
		{call(op.Conv2D, nil, f32, w), ""},
		{call(op.Relu, nil, i32), "operand 0 is int32, only float32 is supported"},
		{call(op.Tanh, nil, f32), "tanh is not supported"},
		{call(op.Subtract, nil, v, fvar("m", 3, 8)), "one must have the result's shape [3, 8] (subtract: the first)"},
		{call(op.MatMul, nil, v, fvar("m", 8, 3)), "rank >= 2 needed"},
		{call(op.Concatenate, ir.Attrs{"axis": int64(0)}, v, v, v, v, v, v, v, v), "8 operands"},
		{call(op.Concatenate, ir.Attrs{"axis": int64(0)}, v, v), ""},
		{call(op.MatMul, nil, fvar("m", 1, 2, 8), fvar("n", 3, 8, 2)), "batch dimension 0 of the first operand"},
		{call(op.AvgPool2D, ir.Attrs{"pool_size": []int64{3, 3}, "strides": []int64{2, 2}, "ceil_mode": true, "count_include_pad": true}, f32), "ceil_mode with count_include_pad"},
		{call(op.BatchNorm, ir.Attrs{"axis": int64(3)}, f32, v, v, v, v), "oneDNN normalises axis 1"},
		{composite(CompositeConv2DBiasRelu, []*graph.Var{p0, p1}, call(op.Relu, nil, call(op.Conv2D, nil, p0, p1)), f32, w), "want nn.bias_add or add for the bias, found nn.conv2d"},
		{composite("dnnl.softmax_magic", []*graph.Var{p0}, call(op.Relu, nil, p0), f32), "composite dnnl.softmax_magic is not supported"},
		{composite(CompositeConv2DRelu, []*graph.Var{p0, p1}, call(op.Relu, nil, call(op.Conv2D, nil, p0, p1)), f32, w), ""},
	} {
		mod := graph.NewModule(graph.NewFunction(nil, c.call, nil))
		if err := graph.InferTypes(mod); err != nil {
			t.Fatal(err)
		}
		err := Supported(c.call)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Supported(%s) = %v, want %q", graph.Describe(c.call), err, c.want)
		}
	}
}

func TestCompositesAreDocumented(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Composites {
		if !strings.HasPrefix(c.Name, "dnnl.") || c.Doc == "" || seen[c.Name] || (c.Anchor != op.Conv2D && c.Anchor != op.Dense) {
			t.Errorf("composite %+v", c)
		}
		seen[c.Name] = true
	}
	if len(seen) != 26 {
		t.Errorf("%d composites, want 26", len(seen))
	}
}

// BenchmarkResNetConv times a resnet18-sized convolution with bias and
// relu (1x64x56x56, 3x3, 64 filters, padding 1) on dnnl against kiln's
// default C path (-t c). It reports; it asserts only correctness.
func BenchmarkResNetConv(b *testing.B) {
	rng := rand.New(rand.NewSource(3))
	x := fvar("x", 1, 64, 56, 56)
	attrs := ir.Attrs{"strides": []int64{1, 1}, "padding": []int64{1, 1, 1, 1}}
	w := graph.NewConstant(randTensor(rng, 64, 64, 3, 3))
	bias := graph.NewConstant(randTensor(rng, 64))
	body := call(op.Relu, nil, call(op.BiasAdd, nil, call(op.Conv2D, attrs, x, w), bias))
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x}, body, nil))
	if err := graph.InferTypes(mod); err != nil {
		b.Fatal(err)
	}
	inputs := map[string]*tensor.Tensor{"x": randTensor(rng, 1, 64, 56, 56)}
	var first []*tensor.Tensor
	for _, c := range []struct{ name, tgts string }{{"dnnl", "dnnl, c"}, {"c", "c"}} {
		dir := compile(b, mod, c.tgts, nil)
		art, err := driver.LoadArtifact(dir)
		if err != nil {
			b.Fatal(err)
		}
		got, err := art.Run(inputs)
		if err != nil {
			b.Fatal(err)
		}
		if first == nil {
			first = got
		} else if err := tensor.AllClose(got[0], first[0], rtol, 1e-4); err != nil {
			b.Fatalf("dnnl and c differ: %v", err)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := art.Run(inputs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestKeepRegion: a region of elementwise operators alone goes back to
// the host; one with a matmul, pooling or a composite stays.
func TestKeepRegion(t *testing.T) {
	x, y := fvar("x", 2, 8), fvar("y", 2, 8)
	add := call(op.Add, nil, x, y)
	relu := call(op.Relu, nil, add)
	mm := call(op.MatMul, nil, relu, fvar("w", 8, 4))
	p0, p1 := fvar("p0", 2, 8), fvar("p1", 2, 8)
	comp := composite("dnnl.add_relu_test", []*graph.Var{p0, p1}, call(op.Relu, nil, call(op.Add, nil, p0, p1)), x, y)
	if err := KeepRegion([]*graph.Call{add, relu}); err == nil || !strings.Contains(err.Error(), "only elementwise operators") {
		t.Errorf("add + relu region: %v, want a refusal naming elementwise operators", err)
	}
	if err := KeepRegion([]*graph.Call{add, relu, mm}); err != nil {
		t.Errorf("region with a matmul refused: %v", err)
	}
	if err := KeepRegion([]*graph.Call{comp}); err != nil {
		t.Errorf("region with a composite refused: %v", err)
	}
}

// TestConcatOfBlockedInputs concatenates convolution outputs (oneDNN's
// blocked layouts) along channels, at offsets on a block boundary (16 +
// 16: a reorder per input into its part of the output) and inside one
// (12 + 20: the concat primitive), and as the function's output and in
// the middle of it.
func TestConcatOfBlockedInputs(t *testing.T) {
	attrs := ir.Attrs{"strides": []int64{1, 1}, "padding": []int64{1, 1, 1, 1}, "dilation": []int64{1, 1}, "groups": int64(1)}
	for _, c := range []struct{ a, b int64 }{{16, 16}, {12, 20}, {8, 24}} {
		t.Run(fmt.Sprintf("%d+%d", c.a, c.b), func(t *testing.T) {
			rng := rand.New(rand.NewSource(c.a))
			x := fvar("x", 1, 16, 9, 9)
			conv := func(oc int64) graph.Expr {
				return call(op.Conv2D, attrs, x, graph.NewConstant(randTensor(rng, oc, 16, 3, 3)))
			}
			cat := call(op.Concatenate, ir.Attrs{"axis": int64(1)}, conv(c.a), conv(c.b))
			for _, body := range []graph.Expr{cat, call(op.Relu, nil, cat)} {
				mod := offload(t, []*graph.Var{x}, body)
				inputs := []*tensor.Tensor{randTensor(rng, 1, 16, 9, 9)}
				dir := compile(t, mod, "dnnl, c -mcpu=x86-64", nil)
				checkAgainstRef(t, mod, inputs, runArtifact(t, dir, mod, inputs))
			}
		})
	}
}

// TestProfileShowsKernelsInsideRegion: the graph executor's profile of a
// dnnl region lists each oneDNN kernel of the region with the model node
// it computes (conv → relu → add of two model nodes named in the graph).
func TestProfileShowsKernelsInsideRegion(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	x := fvar("x", 1, 8, 6, 6)
	attrs := ir.Attrs{"strides": []int64{1, 1}, "padding": []int64{1, 1, 1, 1}, "dilation": []int64{1, 1}, "groups": int64(1)}
	conv := call(op.Conv2D, attrs, x, graph.NewConstant(randTensor(rng, 8, 8, 3, 3)))
	conv.Span = "conv_node"
	relu := call(op.Relu, nil, conv)
	relu.Span = "relu_node"
	add := call(op.Add, nil, relu, x)
	add.Span = "add_node"
	mod := offload(t, []*graph.Var{x}, add)
	dir := compile(t, mod, "dnnl, c -mcpu=x86-64", nil)
	art, err := driver.LoadArtifact(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer art.Close()
	if err := art.Exec.SetInput("x", randTensor(rng, 1, 8, 6, 6)); err != nil {
		t.Fatal(err)
	}
	steps, err := art.Exec.Profile(2)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range steps {
		for _, in := range s.Inner {
			got = append(got, fmt.Sprintf("%s %v", in.Node, in.Sources))
			if in.Total <= 0 {
				t.Errorf("inner step %s: no time", in.Node)
			}
		}
	}
	want := []string{"nn.conv2d [conv_node]", "nn.relu [relu_node]", "add [add_node]"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("inner steps %q, want %q", got, want)
	}
}

// TestCompositeOrder checks that the spelled-out composite names are in
// the table and that a composite whose pattern contains another's is
// tried first.
func TestCompositeOrder(t *testing.T) {
	seen := map[string]int{}
	for i, c := range Composites {
		seen[c.Name] = i
	}
	for _, n := range []string{CompositeConv2DBias, CompositeConv2DRelu, CompositeConv2DBiasRelu, CompositeConv2DAdd, CompositeConv2DAddRelu,
		CompositeConv2DBiasAdd, CompositeConv2DBiasAddRelu, CompositeDenseBias, CompositeDenseRelu, CompositeConv2DBiasClip, CompositeConv2DClip,
		CompositeDenseBiasRelu, CompositeConv2DBiasHardSwish, CompositeConv2DHardSwish, CompositeDenseBiasHardSwish, CompositeDenseHardSwish,
		CompositeConv2DBiasHardSigmoid, CompositeConv2DBiasSiLU, CompositeConv2DBiasSigmoid} {
		if _, ok := seen[n]; !ok {
			t.Errorf("%s is not in Composites", n)
		}
	}
	// Larger patterns first: SiLU contains sigmoid, hard-swish contains
	// hard-sigmoid, and every biased or residual form contains the bare
	// anchor's.
	before := [][2]string{
		{"dnnl.conv2d_bias_silu", "dnnl.conv2d_bias_sigmoid"}, {"dnnl.conv2d_silu", "dnnl.conv2d_sigmoid"},
		{"dnnl.conv2d_bias_hardswish", "dnnl.conv2d_bias_hardsigmoid"}, {"dnnl.conv2d_hardswish", "dnnl.conv2d_hardsigmoid"},
		{"dnnl.conv2d_bias_sigmoid", "dnnl.conv2d_bias"}, {"dnnl.conv2d_bias_add_relu", "dnnl.conv2d_bias_add"},
		{"dnnl.conv2d_bias_relu", "dnnl.conv2d_bias"}, {"dnnl.dense_bias_silu", "dnnl.dense_bias"}, {"dnnl.dense_bias_relu", "dnnl.dense_bias"},
	}
	for _, p := range before {
		a, okA := seen[p[0]]
		b, okB := seen[p[1]]
		if !okA || !okB || a > b {
			t.Errorf("%s (at %d, listed %v) must come before %s (at %d, listed %v)", p[0], a, okA, p[1], b, okB)
		}
	}
}

// TestSqueezeExciteSiLU partitions an EfficientNet-style block as an
// exporter writes it (SiLU as x * sigmoid(x), the squeeze-excite gate a
// sigmoid, the gate multiplied into the wide tensor): the SiLUs and the
// gate become post-ops of their convolutions, and the outputs match.
func TestSqueezeExciteSiLU(t *testing.T) {
	rng := rand.New(rand.NewSource(13))
	x := fvar("x", 1, 16, 10, 10)
	convBias := func(in graph.Expr, attrs ir.Attrs, w ...int64) graph.Expr {
		c := call(op.Conv2D, attrs, in, graph.NewConstant(randTensor(rng, w...)))
		return call(op.Add, nil, c, graph.NewConstant(randTensor(rng, w[0], 1, 1)))
	}
	silu := func(e graph.Expr) graph.Expr { return call(op.Multiply, nil, e, call(op.Sigmoid, nil, e)) }
	dw := silu(convBias(x, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "groups": int64(16)}, 16, 1, 3, 3))
	s := silu(convBias(call(op.GlobalAvgPool2D, nil, dw), nil, 4, 16, 1, 1))
	gate := call(op.Sigmoid, nil, convBias(s, nil, 16, 4, 1, 1))
	out := convBias(call(op.Multiply, nil, dw, gate), nil, 8, 16, 1, 1)
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x}, out, nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	var rep partition.Report
	inputs := []*tensor.Tensor{randTensor(rng, 1, 16, 10, 10)}
	dir := compile(t, mod, "dnnl, c -mcpu=x86-64", &rep)
	checkAgainstRef(t, mod, inputs, runArtifact(t, dir, mod, inputs))
	anchors := map[string]int{}
	for _, n := range rep.Nodes {
		if n.Op == "nn.conv2d" {
			anchors[n.Composite]++
		}
	}
	if anchors[CompositeConv2DBiasSiLU] != 2 || anchors[CompositeConv2DBiasSigmoid] != 1 || anchors[CompositeConv2DBias] != 1 {
		t.Errorf("convolutions by composite %v, want 2 %s, 1 %s and 1 %s", anchors, CompositeConv2DBiasSiLU, CompositeConv2DBiasSigmoid, CompositeConv2DBias)
	}
	if rep.Counts[partition.HostTarget] != 0 {
		t.Errorf("report counts %v, want everything on dnnl", rep.Counts)
	}
}
