package mcunn

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/backend/backendtest"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// fill makes a tensor of random values over dt's whole range.
func fill(rng *rand.Rand, dt ir.DType, shape ir.Shape) *tensor.Tensor {
	v := tensor.New(dt, shape)
	for i := 0; i < v.Len(); i++ {
		switch dt {
		case ir.Int8:
			v.SetInt(i, int64(rng.Intn(256)-128))
		case ir.Uint8:
			v.SetInt(i, int64(rng.Intn(256)))
		default:
			v.SetInt(i, int64(rng.Intn(40001)-20000))
		}
	}
	return v
}

// multipliers returns a requantization multiplier tensor (n values, or
// one when n is 0) and its shift for scales that spread int32 sums of a
// few thousand over the int8 range.
func multipliers(t *testing.T, rng *rand.Rand, n int64, shape ir.Shape) (*graph.Constant, int64) {
	t.Helper()
	scales := make([]float64, max(n, 1))
	for i := range scales {
		scales[i] = (0.5 + rng.Float64()) / 2000
	}
	mult, shift, err := op.RequantizeParams(scales)
	if err != nil {
		t.Fatal(err)
	}
	m := tensor.New(ir.Int32, shape)
	for i, v := range mult {
		m.Int32s()[i] = int32(v)
	}
	return graph.NewConstant(m), shift
}

func mustCall(t *testing.T, o *op.Op, attrs ir.Attrs, args ...graph.Expr) *graph.Call {
	t.Helper()
	c, err := graph.NewCall(o, args, attrs)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// check compiles main(params) = body for "mcunn, c", runs it on random
// inputs and compares with the reference executor bit for bit; every
// call must land on mcunn, and the C must call each of the kiln_nn
// functions in calls.
func check(t *testing.T, rng *rand.Rand, params []*graph.Var, body graph.Expr, calls ...string) {
	t.Helper()
	mod := graph.NewModule(graph.NewFunction(params, body, nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	var ins []*tensor.Tensor
	for _, p := range params {
		tt := p.Type().(*ir.TensorType)
		ins = append(ins, fill(rng, tt.DType, tt.Shape))
	}
	r := backendtest.Registry(t, Register)
	c := backendtest.CompileRun(t, r, "mcunn, c", mod, ins)
	want, err := ref.Run(mod, ins)
	if err != nil {
		t.Fatal(err)
	}
	if ws := want.Flatten(); len(ws) != 1 || !c.Outputs[0].Equal(ws[0]) {
		t.Errorf("mcunn and the reference executor differ")
	}
	for _, n := range c.Report.Nodes {
		if n.Target != Name {
			t.Errorf("%s stayed on %s: %v", n.Op, n.Target, n.Why)
		}
	}
	src := c.Source(t, "kiln_lib.c")
	for _, name := range calls {
		if !strings.Contains(src, name+"(&(const ") {
			t.Errorf("the C does not call %s with argument structs", name)
		}
	}
}

func TestConv(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(1))
	cases := []struct {
		name   string
		xs, ws ir.Shape
		attrs  ir.Attrs
		pack   bool // OIHW4i, as the importer lays out constant weights
		perT   bool // one multiplier
		call   string
	}{
		{"3x3 pad 1 packed", ir.Shape{1, 6, 9, 7}, ir.Shape{5, 6, 3, 3}, ir.Attrs{"padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(-3)}, true, false, "kiln_nn_conv_s8"},
		{"stride 2 asymmetric padding, dilated", ir.Shape{2, 3, 13, 12}, ir.Shape{4, 3, 3, 2}, ir.Attrs{"padding": []int64{2, 1, 0, 3}, "strides": []int64{2, 2}, "dilation": []int64{2, 1}, "input_zero_point": int64(100)}, false, true, "kiln_nn_conv_s8"},
		{"grouped with a kernel zero point", ir.Shape{1, 8, 5, 5}, ir.Shape{6, 4, 3, 3}, ir.Attrs{"groups": int64(2), "padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(5), "kernel_zero_point": int64(-7)}, false, false, "kiln_nn_conv_s8"},
		{"relu range", ir.Shape{1, 4, 6, 6}, ir.Shape{8, 4, 1, 1}, ir.Attrs{"input_zero_point": int64(-128), "out_min": int64(-20), "out_max": int64(90)}, true, false, "kiln_nn_conv_s8"},
		{"depthwise", ir.Shape{1, 5, 7, 7}, ir.Shape{5, 1, 3, 3}, ir.Attrs{"groups": int64(5), "padding": []int64{1, 1, 1, 1}, "input_zero_point": int64(3)}, false, false, "kiln_nn_depthwise_conv_s8"},
		{"depthwise multiplier 2 stride 2", ir.Shape{2, 3, 9, 8}, ir.Shape{6, 1, 5, 3}, ir.Attrs{"groups": int64(3), "strides": []int64{2, 2}, "padding": []int64{2, 1, 2, 1}, "input_zero_point": int64(-9), "kernel_zero_point": int64(2)}, false, true, "kiln_nn_depthwise_conv_s8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.ws[0]
			w := fill(rng, ir.Int8, tc.ws)
			attrs := ir.Attrs{"out_dtype": ir.Int8, "out_zero_point": int64(-10)}
			for k, v := range tc.attrs {
				attrs[k] = v
			}
			if tc.pack {
				w, attrs["kernel_layout"] = ref.PackOIHW4i(w), "OIHW4i"
			}
			n, mshape := o, ir.Shape{o}
			if tc.perT {
				n, mshape = 0, ir.Shape{}
			}
			m, shift := multipliers(t, rng, n, mshape)
			attrs["shift"] = shift
			bias := tensor.New(ir.Int32, ir.Shape{o})
			for i := range bias.Int32s() {
				bias.Int32s()[i] = int32(rng.Intn(20001) - 10000)
			}
			x := graph.NewVar("x", ir.NewTensorType(ir.Int8, tc.xs))
			body := mustCall(t, op.QConv2DRequantize, attrs, x, graph.NewConstant(w), graph.NewConstant(bias), m)
			check(t, rng, []*graph.Var{x}, body, tc.call)
		})
	}
}

func TestMaxPool(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(2))
	x := graph.NewVar("x", ir.NewTensorType(ir.Int8, ir.Shape{2, 3, 11, 10}))
	body := mustCall(t, op.MaxPool2D, ir.Attrs{"pool_size": []int64{3, 2}, "strides": []int64{2, 2}, "padding": []int64{1, 0, 1, 1}, "ceil_mode": true}, x)
	check(t, rng, []*graph.Var{x}, body, "kiln_nn_max_pool_s8")
}

func TestDense(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(3))
	for _, tc := range []struct {
		name          string
		bias, requant bool
		perT          bool
		call          string
	}{
		{"bias requantize", true, true, false, "kiln_nn_fully_connected_s8"},
		{"requantize one multiplier", false, true, true, "kiln_nn_fully_connected_s8"},
		{"bias int32 result", true, false, false, "kiln_nn_fully_connected_s8_s32"},
		{"int32 result", false, false, false, "kiln_nn_fully_connected_s8_s32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const m, k, n = 3, 37, 11
			x := graph.NewVar("x", ir.NewTensorType(ir.Int8, ir.Shape{m, k}))
			w := graph.NewConstant(fill(rng, ir.Int8, ir.Shape{n, k}))
			var y graph.Expr = mustCall(t, op.QDense, ir.Attrs{"input_zero_point": int64(-128), "kernel_zero_point": int64(3)}, x, w)
			if tc.bias {
				y = mustCall(t, op.Add, nil, y, graph.NewConstant(fill(rng, ir.Int32, ir.Shape{n})))
			}
			if tc.requant {
				cnt, shape := int64(n), ir.Shape{n}
				if tc.perT {
					cnt, shape = 0, ir.Shape{}
				}
				mult, shift := multipliers(t, rng, cnt, shape)
				y = mustCall(t, op.Requantize, ir.Attrs{"shift": shift, "out_zero_point": int64(5), "out_dtype": ir.Int8}, y, mult)
			}
			check(t, rng, []*graph.Var{x}, y, tc.call)
		})
	}
}

// centeredOf is cast(x, int32) - zp, as the importer writes it.
func centeredOf(t *testing.T, x graph.Expr, zp int32) graph.Expr {
	z := tensor.New(ir.Int32, ir.Shape{})
	z.Int32s()[0] = zp
	return mustCall(t, op.Subtract, nil, mustCall(t, op.Cast, ir.Attrs{"dtype": ir.Int32}, x), graph.NewConstant(z))
}

func scalar(v int32) *graph.Constant {
	s := tensor.New(ir.Int32, ir.Shape{})
	s.Int32s()[0] = v
	return graph.NewConstant(s)
}

func TestAdd(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(4))
	shape := ir.Shape{1, 4, 5, 6}
	a := graph.NewVar("a", ir.NewTensorType(ir.Int8, shape))
	b := graph.NewVar("b", ir.NewTensorType(ir.Int8, shape))
	ta := mustCall(t, op.Multiply, nil, centeredOf(t, a, -3), scalar(1<<20))
	tb := mustCall(t, op.Multiply, nil, scalar(700000), centeredOf(t, b, 17))
	mult, shift := multipliers(t, rng, 0, ir.Shape{})
	shift += 20 // the factors' 2^20
	body := mustCall(t, op.Requantize, ir.Attrs{"shift": shift, "out_zero_point": int64(-1), "out_min": int64(-1), "out_dtype": ir.Int8}, mustCall(t, op.Add, nil, ta, tb), mult)
	check(t, rng, []*graph.Var{a, b}, body, "kiln_nn_add_s8")
}

func TestGlobalAvgPool(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(5))
	for _, tc := range []struct {
		name  string
		shape ir.Shape
		axes  []int64
	}{
		{"NCHW", ir.Shape{2, 6, 5, 7}, []int64{2, 3}},
		{"NCW negative axis", ir.Shape{1, 8, 30}, []int64{-1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := graph.NewVar("x", ir.NewTensorType(ir.Int8, tc.shape))
			sum := mustCall(t, op.Sum, ir.Attrs{"axis": tc.axes, "keepdims": true}, centeredOf(t, x, 9))
			mult, shift := multipliers(t, rng, 0, ir.Shape{})
			body := mustCall(t, op.Requantize, ir.Attrs{"shift": shift, "out_zero_point": int64(2), "out_dtype": ir.Int8}, sum, mult)
			check(t, rng, []*graph.Var{x}, body, "kiln_nn_global_avg_pool_s8")
		})
	}
}

// TestRefused: what kiln_nn cannot compute stays on the host, with the
// reason in the partition report.
func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(t *testing.T) *graph.Call
		why  string
	}{
		{"uint8 max pool", func(t *testing.T) *graph.Call {
			x := graph.NewVar("x", ir.NewTensorType(ir.Uint8, ir.Shape{1, 2, 4, 4}))
			return mustCall(t, op.MaxPool2D, ir.Attrs{"pool_size": []int64{2, 2}}, x)
		}, "kiln_nn takes int8"},
		{"float max pool", func(t *testing.T) *graph.Call {
			x := graph.NewVar("x", ir.NewTensorType(ir.Float32, ir.Shape{1, 2, 4, 4}))
			return mustCall(t, op.MaxPool2D, ir.Attrs{"pool_size": []int64{2, 2}}, x)
		}, "kiln_nn takes int8"},
		{"padding past 32-bit indices", func(t *testing.T) *graph.Call {
			x := graph.NewVar("x", ir.NewTensorType(ir.Int8, ir.Shape{1, 1, 4, 4}))
			return mustCall(t, op.MaxPool2D, ir.Attrs{"pool_size": []int64{2, 2}, "padding": []int64{0, 1<<31 - 8, 0, 0}, "strides": []int64{1, 1 << 30}}, x)
		}, "32-bit indices"},
		{"relu", func(t *testing.T) *graph.Call {
			x := graph.NewVar("x", ir.NewTensorType(ir.Int8, ir.Shape{4}))
			return mustCall(t, op.Relu, nil, x)
		}, "nn.relu is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.call(t)
			params := graph.FreeVars(c)
			if err := graph.InferTypes(graph.NewModule(graph.NewFunction(params, c, nil))); err != nil {
				t.Fatal(err)
			}
			if err := Supported(c); err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("Supported: %v, want %q", err, tc.why)
			}
		})
	}
}

func TestSoftmax(t *testing.T) {
	testenv.Cgo(t)
	rng := rand.New(rand.NewSource(6))
	table, mult, shift, err := op.QSoftmaxParams(0.07, 1.0/256)
	if err != nil {
		t.Fatal(err)
	}
	tab := tensor.New(ir.Int32, ir.Shape{256})
	copy(tab.Int32s(), table)
	x := graph.NewVar("x", ir.NewTensorType(ir.Int8, ir.Shape{3, 2, 37}))
	body := mustCall(t, op.QSoftmax, ir.Attrs{"multiplier": mult, "shift": shift, "out_zero_point": int64(-128), "out_dtype": ir.Int8}, x, graph.NewConstant(tab))
	check(t, rng, []*graph.Var{x}, body, "kiln_nn_softmax_s8")
}
