package onnx

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// nnRun converts one hand-made node (inputs are graph variables, or
// constants when listed in consts; nil is an omitted input) and evaluates
// it with the reference executor.
func nnRun(opType string, opset int64, attrs map[string]*Attr, nout int, consts map[int]bool, ins ...*tensor.Tensor) ([]*tensor.Tensor, error) {
	return domainRun("", opType, opset, attrs, nout, consts, ins...)
}

// msRun is nnRun for an operator of ONNX Runtime's domain (version 1).
func msRun(opType string, attrs map[string]*Attr, consts map[int]bool, ins ...*tensor.Tensor) ([]*tensor.Tensor, error) {
	return domainRun(msDomain, opType, 1, attrs, 1, consts, ins...)
}

func domainRun(domain, opType string, opset int64, attrs map[string]*Attr, nout int, consts map[int]bool, ins ...*tensor.Tensor) ([]*tensor.Tensor, error) {
	n := &Node{Name: "n0", OpType: opType, Opset: opset, Attrs: attrs, NumOutputs: nout}
	if n.Attrs == nil {
		n.Attrs = map[string]*Attr{}
	}
	var params []*graph.Var
	var args []*tensor.Tensor
	for i, in := range ins {
		switch {
		case in == nil:
			n.Inputs = append(n.Inputs, nil)
		case consts[i]:
			n.Inputs = append(n.Inputs, graph.NewConstant(in))
		default:
			v := graph.NewVar(fmt.Sprintf("x%d", i), in.Type())
			params = append(params, v)
			args = append(args, in)
			n.Inputs = append(n.Inputs, v)
		}
	}
	conv, err := lookupConverter(domain, opType, opset)
	if err != nil {
		return nil, err
	}
	outs, err := conv(&Ctx{node: n}, n)
	if err != nil {
		return nil, err
	}
	mod := graph.NewModule(graph.NewFunction(params, graph.NewTuple(outs), nil))
	if err := graph.InferTypes(mod); err != nil {
		return nil, err
	}
	lastModule = mod
	v, err := ref.Run(mod, args)
	if err != nil {
		return nil, err
	}
	return v.Flatten(), nil
}

// lastModule is the module nnRun ran last.
var lastModule *graph.Module

// TestQLinearFixedPoint: with constant scales and zero points, QLinearConv
// and QLinearMatMul requantize with qnn.requantize (fixed point, ties to
// even, per channel); with a scale given at run time, in float.
func TestQLinearFixedPoint(t *testing.T) {
	u8 := func(s ir.Shape, v ...float64) *tensor.Tensor { return nnTD(ir.Uint8, s, v...) }
	i8 := func(s ir.Shape, v ...float64) *tensor.Tensor { return nnTD(ir.Int8, s, v...) }
	for _, tc := range []struct {
		name   string
		op     string
		consts map[int]bool
		ins    []*tensor.Tensor
		want   *tensor.Tensor
		fixed  bool
	}{
		{"matmul ties", "QLinearMatMul", map[int]bool{1: true, 2: true, 4: true, 5: true, 6: true, 7: true},
			// 3*0.5 = 1.5 -> 2, 5*0.5 = 2.5 -> 2, 7*0.5 = 3.5 -> 4; + 10
			[]*tensor.Tensor{u8(ir.Shape{3, 1}, 3, 5, 7), nnT(ir.Shape{}, 0.5), u8(ir.Shape{}, 0),
				u8(ir.Shape{1, 1}, 1), nnT(ir.Shape{}, 1), u8(ir.Shape{}, 0), nnT(ir.Shape{}, 1), u8(ir.Shape{}, 10)},
			u8(ir.Shape{3, 1}, 12, 12, 14), true},
		{"matmul run-time scale", "QLinearMatMul", map[int]bool{2: true, 4: true, 5: true, 6: true, 7: true},
			[]*tensor.Tensor{u8(ir.Shape{3, 1}, 3, 5, 7), nnT(ir.Shape{}, 0.5), u8(ir.Shape{}, 0),
				u8(ir.Shape{1, 1}, 1), nnT(ir.Shape{}, 1), u8(ir.Shape{}, 0), nnT(ir.Shape{}, 1), u8(ir.Shape{}, 10)},
			u8(ir.Shape{3, 1}, 12, 12, 14), false},
		{"conv per channel saturating", "QLinearConv", map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true},
			// x - 2 = {1, 3}; scales x 1, w {0.25, 1}, y 1; y's zero point -1.
			[]*tensor.Tensor{u8(ir.Shape{1, 1, 1, 2}, 3, 5), nnT(ir.Shape{}, 1), u8(ir.Shape{}, 2),
				i8(ir.Shape{2, 1, 1, 1}, 2, -100), nnT(ir.Shape{2}, 0.25, 1), i8(ir.Shape{2}, 0, 0),
				nnT(ir.Shape{}, 1), i8(ir.Shape{}, -1), nnTD(ir.Int32, ir.Shape{2}, 2, 0)},
			// channel 0: (2*{1,3} + 2) * 0.25 = {1, 2} -> -1 + = {0, 1};
			// channel 1: -100*{1,3} = {-100, -300} -> -101, -128 (saturated)
			i8(ir.Shape{1, 2, 1, 2}, 0, 1, -101, -128), true},
		{"conv 1-D ties", "QLinearConv", map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true},
			// x - 2 = {1, 3, 5, 7}; channel 0 w {1, 2} at scale 0.5: 7, 13,
			// 19 -> 3.5, 6.5, 9.5 -> 4, 6, 10; channel 1 w {-1, 1}: 2, 2, 2.
			[]*tensor.Tensor{u8(ir.Shape{1, 1, 4}, 3, 5, 7, 9), nnT(ir.Shape{}, 1), u8(ir.Shape{}, 2),
				i8(ir.Shape{2, 1, 2}, 1, 2, -1, 1), nnT(ir.Shape{2}, 0.5, 1), i8(ir.Shape{2}, 0, 0),
				nnT(ir.Shape{}, 1), i8(ir.Shape{}, 0), nnTD(ir.Int32, ir.Shape{2}, 0, 0)},
			i8(ir.Shape{1, 2, 3}, 4, 6, 10, 2, 2, 2), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := nnRun(tc.op, 10, nil, 1, tc.consts, tc.ins...)
			if err != nil {
				t.Fatal(err)
			}
			if !got[0].Equal(tc.want) {
				t.Errorf("got %v, want %v", got[0].Data, tc.want.Data)
			}
			if fixed := strings.Contains(lastModule.String(), "requantize("); fixed != tc.fixed {
				t.Errorf("qnn.requantize used: %v, want %v:\n%s", fixed, tc.fixed, lastModule)
			}
			// Convolutions, 1-D ones too, fuse into the integer kernel's
			// operator.
			if tc.op == "QLinearConv" && !strings.Contains(lastModule.String(), "qnn.conv2d_requantize(") {
				t.Errorf("no qnn.conv2d_requantize:\n%s", lastModule)
			}
			// The constant weight's pair bound: the largest weight
			// magnitude here (one input channel), 100 and 2.
			if want := map[string]string{"conv per channel saturating": "kernel_pair_bound=100", "conv 1-D ties": "kernel_pair_bound=2"}[tc.name]; want != "" && !strings.Contains(lastModule.String(), want) {
				t.Errorf("no %s:\n%s", want, lastModule)
			}
		})
	}
}

func nnT(shape ir.Shape, v ...float64) *tensor.Tensor {
	t := tensor.New(ir.Float32, shape)
	for i, x := range v {
		t.SetFloat(i, x)
	}
	return t
}

func nnTD(dt ir.DType, shape ir.Shape, v ...float64) *tensor.Tensor {
	t := tensor.New(dt, shape)
	for i, x := range v {
		t.SetFloat(i, x)
	}
	return t
}

func nnSeq(shape ir.Shape) *tensor.Tensor {
	t := tensor.New(ir.Float32, shape)
	for i := 0; i < t.Len(); i++ {
		t.SetFloat(i, float64(i+1))
	}
	return t
}

func nnAInts(v ...int64) *Attr     { return &Attr{Type: AttrInts, Ints: v} }
func nnAInt(v int64) *Attr         { return &Attr{Type: AttrInt, Int: v} }
func nnAFloat(v float64) *Attr     { return &Attr{Type: AttrFloat, Float: v} }
func nnAString(v string) *Attr     { return &Attr{Type: AttrString, Str: v} }
func nnAStrings(v ...string) *Attr { return &Attr{Type: AttrStrings, Strings: v} }

func TestNNConverters(t *testing.T) {
	x33 := nnSeq(ir.Shape{1, 1, 3, 3})
	ones33 := nnT(ir.Shape{1, 1, 3, 3}, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	cases := []struct {
		name   string
		op     string
		opset  int64
		attrs  map[string]*Attr
		nout   int
		consts map[int]bool
		ins    []*tensor.Tensor
		want   []*tensor.Tensor
	}{
		{"conv same_upper stride 2 bias", "Conv", 11, map[string]*Attr{"auto_pad": nnAString("SAME_UPPER"), "strides": nnAInts(2, 2)}, 1, nil,
			// out 2x2, total pad 2 per dim split 1/1: windows centred at 0 and 2
			[]*tensor.Tensor{x33, ones33, nnT(ir.Shape{1}, 100)},
			[]*tensor.Tensor{nnT(ir.Shape{1, 1, 2, 2}, 112, 116, 124, 128)}},
		{"conv same_lower even kernel", "Conv", 11, map[string]*Attr{"auto_pad": nnAString("SAME_LOWER")}, 1, nil,
			// 2x2 kernel, total pad 1 goes to the beginning
			[]*tensor.Tensor{x33, nnT(ir.Shape{1, 1, 2, 2}, 1, 1, 1, 1)},
			[]*tensor.Tensor{nnT(ir.Shape{1, 1, 3, 3}, 1, 3, 5, 5, 12, 16, 11, 24, 28)}},
		{"conv valid", "Conv", 1, map[string]*Attr{"auto_pad": nnAString("VALID"), "pads": nnAInts(5, 5, 5, 5)}, 1, nil,
			[]*tensor.Tensor{x33, ones33}, []*tensor.Tensor{nnT(ir.Shape{1, 1, 1, 1}, 45)}},
		{"conv_transpose output_shape", "ConvTranspose", 11, map[string]*Attr{"strides": nnAInts(2), "output_shape": nnAInts(6)}, 1, nil,
			// natural size 5 (pads 0), one more zero at the end
			[]*tensor.Tensor{nnT(ir.Shape{1, 1, 3}, 1, 2, 3), nnT(ir.Shape{1, 1, 1}, 1)},
			[]*tensor.Tensor{nnT(ir.Shape{1, 1, 6}, 1, 0, 2, 0, 3, 0)}},
		{"maxpool indices", "MaxPool", 12, map[string]*Attr{"kernel_shape": nnAInts(2, 2), "strides": nnAInts(2, 2), "ceil_mode": nnAInt(1)}, 2, nil,
			[]*tensor.Tensor{x33},
			[]*tensor.Tensor{nnT(ir.Shape{1, 1, 2, 2}, 5, 6, 8, 9), tensor.FromInt64s(ir.Shape{1, 1, 2, 2}, []int64{4, 5, 7, 8})}},
		{"averagepool same_upper", "AveragePool", 11, map[string]*Attr{"kernel_shape": nnAInts(2, 2), "auto_pad": nnAString("SAME_UPPER")}, 1, nil,
			[]*tensor.Tensor{x33}, []*tensor.Tensor{nnT(ir.Shape{1, 1, 3, 3}, 3, 4, 4.5, 6, 7, 7.5, 7.5, 8.5, 9)}},
		{"globalaveragepool 3d input", "GlobalAveragePool", 1, nil, 1, nil,
			[]*tensor.Tensor{nnSeq(ir.Shape{1, 2, 2})}, []*tensor.Tensor{nnT(ir.Shape{1, 2, 1}, 1.5, 3.5)}},
		{"lppool p2", "LpPool", 11, map[string]*Attr{"kernel_shape": nnAInts(2)}, 1, nil,
			[]*tensor.Tensor{nnT(ir.Shape{1, 1, 3}, 3, 4, 0)}, []*tensor.Tensor{nnT(ir.Shape{1, 1, 2}, 5, 4)}},
		{"globallppool p1", "GlobalLpPool", 2, map[string]*Attr{"p": nnAInt(1)}, 1, nil,
			[]*tensor.Tensor{nnT(ir.Shape{1, 1, 3}, 3, -4, 1)}, []*tensor.Tensor{nnT(ir.Shape{1, 1, 1}, 8)}},
		{"batchnorm training outputs", "BatchNormalization", 15, map[string]*Attr{"training_mode": nnAInt(1), "epsilon": nnAFloat(0), "momentum": nnAFloat(0.5)}, 3, nil,
			[]*tensor.Tensor{nnT(ir.Shape{2, 1}, 1, 3), nnT(ir.Shape{1}, 1), nnT(ir.Shape{1}, 0), nnT(ir.Shape{1}, 0), nnT(ir.Shape{1}, 1)},
			// batch mean 2, var 1
			[]*tensor.Tensor{nnT(ir.Shape{2, 1}, -1, 1), nnT(ir.Shape{1}, 1), nnT(ir.Shape{1}, 1)}},
		{"batchnorm opset 6 is_test", "BatchNormalization", 6, map[string]*Attr{"is_test": nnAInt(1), "spatial": nnAInt(1), "epsilon": nnAFloat(0)}, 1, nil,
			[]*tensor.Tensor{nnT(ir.Shape{1, 2}, 1, 3), nnT(ir.Shape{2}, 1, 2), nnT(ir.Shape{2}, 0, 1), nnT(ir.Shape{2}, 1, 1), nnT(ir.Shape{2}, 1, 4)},
			[]*tensor.Tensor{nnT(ir.Shape{1, 2}, 0, 3)}},
		{"layernorm with stats", "LayerNormalization", 17, map[string]*Attr{"epsilon": nnAFloat(0)}, 3, nil,
			[]*tensor.Tensor{nnT(ir.Shape{1, 2}, 1, 3), nnT(ir.Shape{2}, 1, 1), nil},
			[]*tensor.Tensor{nnT(ir.Shape{1, 2}, -1, 1), nnT(ir.Shape{1, 1}, 2), nnT(ir.Shape{1, 1}, 1)}},
		{"gemm all attributes", "Gemm", 13, map[string]*Attr{"alpha": nnAFloat(2), "beta": nnAFloat(0.5), "transA": nnAInt(1), "transB": nnAInt(1)}, 1, nil,
			[]*tensor.Tensor{nnT(ir.Shape{2, 1}, 1, 2), nnT(ir.Shape{1, 2}, 3, 4), nnT(ir.Shape{1}, 10)},
			[]*tensor.Tensor{nnT(ir.Shape{1, 1}, 27)}},
		{"gemm constant B no C", "Gemm", 11, nil, 1, map[int]bool{1: true},
			[]*tensor.Tensor{nnT(ir.Shape{1, 2}, 1, 2), nnT(ir.Shape{2, 2}, 1, 2, 3, 4)},
			[]*tensor.Tensor{nnT(ir.Shape{1, 2}, 7, 10)}},
		{"softmax opset 11 coerces to 2-D", "Softmax", 11, map[string]*Attr{"axis": nnAInt(1)}, 1, nil,
			// all four values of each batch row share one softmax
			[]*tensor.Tensor{nnT(ir.Shape{1, 2, 2}, 0, 0, 0, 0)},
			[]*tensor.Tensor{nnT(ir.Shape{1, 2, 2}, 0.25, 0.25, 0.25, 0.25)}},
		{"softmax opset 13 per axis", "Softmax", 13, map[string]*Attr{"axis": nnAInt(1)}, 1, nil,
			[]*tensor.Tensor{nnT(ir.Shape{1, 2, 2}, 0, 0, 0, 0)},
			[]*tensor.Tensor{nnT(ir.Shape{1, 2, 2}, 0.5, 0.5, 0.5, 0.5)}},
		{"hardmax opset 11 default axis", "Hardmax", 11, nil, 1, nil,
			[]*tensor.Tensor{nnT(ir.Shape{1, 2, 2}, 0, 5, 7, 1)},
			[]*tensor.Tensor{nnT(ir.Shape{1, 2, 2}, 0, 0, 1, 0)}},
		{"matmulinteger zero points", "MatMulInteger", 10, nil, 1, nil,
			[]*tensor.Tensor{nnTD(ir.Uint8, ir.Shape{1, 2}, 3, 4), nnTD(ir.Uint8, ir.Shape{2, 1}, 2, 5), nnTD(ir.Uint8, ir.Shape{}, 1), nnTD(ir.Uint8, ir.Shape{}, 2)},
			[]*tensor.Tensor{nnTD(ir.Int32, ir.Shape{1, 1}, 2*0+3*3)}},
		{"qlinearmatmul", "QLinearMatMul", 10, nil, 1, nil,
			[]*tensor.Tensor{nnTD(ir.Uint8, ir.Shape{1, 1}, 10), nnT(ir.Shape{}, 0.5), nnTD(ir.Uint8, ir.Shape{}, 0),
				nnTD(ir.Uint8, ir.Shape{1, 1}, 4), nnT(ir.Shape{}, 0.25), nnTD(ir.Uint8, ir.Shape{}, 0),
				nnT(ir.Shape{}, 0.1), nnTD(ir.Uint8, ir.Shape{}, 100)},
			// real product 5 * 1 = 5 -> 5 / 0.1 = 50, + 100
			[]*tensor.Tensor{nnTD(ir.Uint8, ir.Shape{1, 1}, 150)}},
		{"convinteger", "ConvInteger", 10, nil, 1, nil,
			[]*tensor.Tensor{nnTD(ir.Uint8, ir.Shape{1, 1, 1, 2}, 5, 7), nnTD(ir.Uint8, ir.Shape{1, 1, 1, 1}, 2), nnTD(ir.Uint8, ir.Shape{}, 5)},
			[]*tensor.Tensor{nnTD(ir.Int32, ir.Shape{1, 1, 1, 2}, 0, 4)}},
		{"lstm defaults fill optional inputs", "LSTM", 7, map[string]*Attr{"hidden_size": nnAInt(1)}, 3, nil,
			[]*tensor.Tensor{nnT(ir.Shape{1, 1, 1}, 1), nnT(ir.Shape{1, 4, 1}, 0, 0, 0, 0), nnT(ir.Shape{1, 4, 1}, 0, 0, 0, 0)},
			// all gates 0.5 (sigmoid 0) and candidate tanh(0) = 0
			[]*tensor.Tensor{nnT(ir.Shape{1, 1, 1, 1}, 0), nnT(ir.Shape{1, 1, 1}, 0), nnT(ir.Shape{1, 1, 1}, 0)}},
		{"rnn relu activation", "RNN", 7, map[string]*Attr{"hidden_size": nnAInt(1), "activations": nnAStrings("Relu")}, 2, nil,
			[]*tensor.Tensor{nnT(ir.Shape{1, 1, 1}, -2), nnT(ir.Shape{1, 1, 1}, 1), nnT(ir.Shape{1, 1, 1}, 1)},
			[]*tensor.Tensor{nnT(ir.Shape{1, 1, 1, 1}, 0), nnT(ir.Shape{1, 1, 1}, 0)}},
		{"depthtospace CRD", "DepthToSpace", 11, map[string]*Attr{"blocksize": nnAInt(2), "mode": nnAString("CRD")}, 1, nil,
			[]*tensor.Tensor{nnSeq(ir.Shape{1, 4, 1, 1})}, []*tensor.Tensor{nnT(ir.Shape{1, 1, 2, 2}, 1, 2, 3, 4)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := nnRun(c.op, c.opset, c.attrs, c.nout, c.consts, c.ins...)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("%d outputs, want %d", len(got), len(c.want))
			}
			for i := range got {
				if !ir.TypeEqual(got[i].Type(), c.want[i].Type()) {
					t.Fatalf("output %d: %s, want %s", i, got[i].Type(), c.want[i].Type())
				}
				for k := 0; k < got[i].Len(); k++ {
					if g, w := got[i].Float(k), c.want[i].Float(k); math.Abs(g-w) > 1e-5*(1+math.Abs(w)) {
						t.Fatalf("output %d: got %v, want %v", i, got[i].AsFloat64s(), c.want[i].AsFloat64s())
					}
				}
			}
		})
	}
}

func TestNNConverterErrors(t *testing.T) {
	cases := []struct {
		name  string
		op    string
		opset int64
		attrs map[string]*Attr
		ins   []*tensor.Tensor
		want  string
	}{
		{"conv 0-d spatial", "Conv", 11, nil, []*tensor.Tensor{nnT(ir.Shape{1, 3}), nnT(ir.Shape{1, 3})}, "spatial dimensions"},
		{"conv bad auto_pad", "Conv", 11, map[string]*Attr{"auto_pad": nnAString("SAME")}, []*tensor.Tensor{nnT(ir.Shape{1, 1, 3}), nnT(ir.Shape{1, 1, 1})}, "auto_pad"},
		{"conv bad strides", "Conv", 11, map[string]*Attr{"strides": nnAInts(1, 1)}, []*tensor.Tensor{nnT(ir.Shape{1, 1, 3}), nnT(ir.Shape{1, 1, 1})}, "strides"},
		{"conv kernel_shape mismatch", "Conv", 11, map[string]*Attr{"kernel_shape": nnAInts(2)}, []*tensor.Tensor{nnT(ir.Shape{1, 1, 3}), nnT(ir.Shape{1, 1, 1})}, "kernel_shape"},
		{"maxpool no kernel", "MaxPool", 11, nil, []*tensor.Tensor{nnT(ir.Shape{1, 1, 3})}, "kernel_shape"},
		{"lrn without size", "LRN", 1, nil, []*tensor.Tensor{nnT(ir.Shape{1, 1, 3})}, "size"},
		{"rnn bad direction", "RNN", 7, map[string]*Attr{"direction": nnAString("sideways")},
			[]*tensor.Tensor{nnT(ir.Shape{1, 1, 1}), nnT(ir.Shape{1, 1, 1}), nnT(ir.Shape{1, 1, 1})}, "direction"},
		{"gemm vector", "Gemm", 11, nil, []*tensor.Tensor{nnT(ir.Shape{2}), nnT(ir.Shape{2, 2})}, "matrices"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := nnRun(c.op, c.opset, c.attrs, 1, nil, c.ins...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
			if !strings.Contains(err.Error(), `node "n0"`) {
				t.Errorf("error %q does not name the node", err)
			}
		})
	}
}
