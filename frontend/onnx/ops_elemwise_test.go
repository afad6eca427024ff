package onnx

import (
	"errors"
	"fmt"
	"github.com/kiln-dev/kiln/internal/testenv"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// ewConvert runs the converter of opType at opset on hand-made inputs and
// evaluates the outputs with the reference executor. Inputs are graph
// variables unless listed in consts (then constants); a nil input is an
// omitted optional input.
func ewConvert(t *testing.T, opType string, opset int64, attrs map[string]*Attr, nout int, consts map[int]bool, ins ...*tensor.Tensor) ([]*tensor.Tensor, error) {
	t.Helper()
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
	conv, err := lookupConverter("", opType, opset)
	if err != nil {
		return nil, err
	}
	outs, err := conv(&Ctx{node: n}, n)
	if err != nil {
		return nil, err
	}
	fields := make([]graph.Expr, 0, len(outs))
	for _, o := range outs {
		if o != nil {
			fields = append(fields, o)
		}
	}
	mod := graph.NewModule(graph.NewFunction(params, graph.NewTuple(fields), nil))
	if err := graph.InferTypes(mod); err != nil {
		return nil, err
	}
	v, err := ref.Run(mod, args)
	if err != nil {
		return nil, err
	}
	return v.Flatten(), nil
}

func ewF32(shape ir.Shape, v ...float32) *tensor.Tensor { return tensor.FromFloat32s(shape, v) }

func ewTyped(dt ir.DType, shape ir.Shape, v ...float64) *tensor.Tensor {
	t := tensor.New(dt, shape)
	for i, x := range v {
		t.SetFloat(i, x)
	}
	return t
}

func ewInt(v int64) *Attr         { return &Attr{Type: AttrInt, Int: v} }
func ewFloat(v float64) *Attr     { return &Attr{Type: AttrFloat, Float: v} }
func ewString(v string) *Attr     { return &Attr{Type: AttrString, Str: v} }
func ewShape(d ...int64) ir.Shape { return ir.Shape(d) }

func TestElemwiseConverters(t *testing.T) {
	inf := math.Inf(1)
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
		{name: "add legacy broadcast axis", op: "Add", opset: 6,
			attrs: map[string]*Attr{"broadcast": ewInt(1), "axis": ewInt(1)},
			ins:   []*tensor.Tensor{ewF32(ewShape(2, 3, 2), 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1), ewF32(ewShape(3), 10, 20, 30)},
			want:  []*tensor.Tensor{ewF32(ewShape(2, 3, 2), 10, 10, 20, 20, 30, 30, 11, 11, 21, 21, 31, 31)}},
		{name: "mul legacy broadcast constant", op: "Mul", opset: 1,
			attrs: map[string]*Attr{"broadcast": ewInt(1), "axis": ewInt(0)}, consts: map[int]bool{1: true},
			ins:  []*tensor.Tensor{ewF32(ewShape(2, 2), 1, 2, 3, 4), ewF32(ewShape(2), 10, 100)},
			want: []*tensor.Tensor{ewF32(ewShape(2, 2), 10, 20, 300, 400)}},
		{name: "pow int base float exponent", op: "Pow", opset: 15,
			ins:  []*tensor.Tensor{ewTyped(ir.Int32, ewShape(3), 2, 3, 4), ewF32(ewShape(3), 3, 0.5, -1)},
			want: []*tensor.Tensor{ewTyped(ir.Int32, ewShape(3), 8, 1, 0)}},
		{name: "pow float base int exponent", op: "Pow", opset: 15,
			ins:  []*tensor.Tensor{ewF32(ewShape(2), 1.5, 2), ewTyped(ir.Int64, ewShape(2), 2, -1)},
			want: []*tensor.Tensor{ewF32(ewShape(2), 2.25, 0.5)}},
		{name: "mod floor", op: "Mod", opset: 13,
			ins:  []*tensor.Tensor{ewTyped(ir.Int32, ewShape(4), -7, 7, -7, 5), ewTyped(ir.Int32, ewShape(4), 3, -3, -3, 0)},
			want: []*tensor.Tensor{ewTyped(ir.Int32, ewShape(4), 2, -2, -1, 0)}},
		{name: "mod fmod", op: "Mod", opset: 13, attrs: map[string]*Attr{"fmod": ewInt(1)},
			ins:  []*tensor.Tensor{ewF32(ewShape(3), -7, 7, 5.5), ewF32(ewShape(3), 3, -3, 2)},
			want: []*tensor.Tensor{ewF32(ewShape(3), -1, 1, 1.5)}},
		{name: "bitshift right", op: "BitShift", opset: 11, attrs: map[string]*Attr{"direction": ewString("RIGHT")},
			ins:  []*tensor.Tensor{ewTyped(ir.Uint8, ewShape(3), 16, 255, 1), ewTyped(ir.Uint8, ewShape(3), 1, 4, 9)},
			want: []*tensor.Tensor{ewTyped(ir.Uint8, ewShape(3), 8, 15, 0)}},
		{name: "clip opset 6 attrs", op: "Clip", opset: 6, attrs: map[string]*Attr{"min": ewFloat(-1), "max": ewFloat(1)},
			ins:  []*tensor.Tensor{ewF32(ewShape(3), -2, 0.5, 3)},
			want: []*tensor.Tensor{ewF32(ewShape(3), -1, 0.5, 1)}},
		{name: "clip runtime max, omitted min", op: "Clip", opset: 13,
			ins:  []*tensor.Tensor{ewF32(ewShape(3), -2, 0.5, 3), nil, ewF32(ewShape(), 0)},
			want: []*tensor.Tensor{ewF32(ewShape(3), -2, 0, 0)}},
		{name: "clip runtime min above constant max", op: "Clip", opset: 13, consts: map[int]bool{2: true},
			ins:  []*tensor.Tensor{ewF32(ewShape(3), -2, 0.5, 3), ewF32(ewShape(), 2), ewF32(ewShape(), 1)},
			want: []*tensor.Tensor{ewF32(ewShape(3), 1, 1, 1)}},
		{name: "clip constant int8 bounds", op: "Clip", opset: 13, consts: map[int]bool{1: true, 2: true},
			ins:  []*tensor.Tensor{ewTyped(ir.Int8, ewShape(3), -100, 5, 100), ewTyped(ir.Int8, ewShape(), -3), ewTyped(ir.Int8, ewShape(), 7)},
			want: []*tensor.Tensor{ewTyped(ir.Int8, ewShape(3), -3, 5, 7)}},
		{name: "clip huge int64 bound", op: "Clip", opset: 13, consts: map[int]bool{2: true},
			ins:  []*tensor.Tensor{tensor.FromInt64s(ewShape(2), []int64{math.MaxInt64, 3}), nil, tensor.FromInt64s(ewShape(), []int64{math.MaxInt64 - 1})},
			want: []*tensor.Tensor{tensor.FromInt64s(ewShape(2), []int64{math.MaxInt64 - 1, 3})}},
		{name: "cast opset 1 string to", op: "Cast", opset: 1, attrs: map[string]*Attr{"to": ewString("INT32")},
			ins:  []*tensor.Tensor{ewF32(ewShape(3), -1.7, 2.9, 300)},
			want: []*tensor.Tensor{ewTyped(ir.Int32, ewShape(3), -1, 2, 300)}},
		{name: "cast to bool", op: "Cast", opset: 13, attrs: map[string]*Attr{"to": ewInt(9)},
			ins:  []*tensor.Tensor{ewF32(ewShape(3), 0, -0.5, float32(inf))},
			want: []*tensor.Tensor{ewTyped(ir.Bool, ewShape(3), 0, 1, 1)}},
		{name: "castlike", op: "CastLike", opset: 15,
			ins:  []*tensor.Tensor{ewF32(ewShape(2), 1.5, -2.5), ewTyped(ir.Int64, ewShape(1), 0)},
			want: []*tensor.Tensor{ewTyped(ir.Int64, ewShape(2), 1, -2)}},
		{name: "dropout mask bool", op: "Dropout", opset: 13, nout: 2,
			ins:  []*tensor.Tensor{ewF32(ewShape(2), 1, 2)},
			want: []*tensor.Tensor{ewF32(ewShape(2), 1, 2), ewTyped(ir.Bool, ewShape(2), 1, 1)}},
		{name: "dropout opset 7 mask dtype", op: "Dropout", opset: 7, nout: 2,
			ins:  []*tensor.Tensor{ewF32(ewShape(2), 1, 2)},
			want: []*tensor.Tensor{ewF32(ewShape(2), 1, 2), ewF32(ewShape(2), 1, 1)}},
		{name: "dropout training ratio 0", op: "Dropout", opset: 13, consts: map[int]bool{1: true, 2: true},
			ins:  []*tensor.Tensor{ewF32(ewShape(2), 1, 2), ewF32(ewShape(), 0), ewTyped(ir.Bool, ewShape(), 1)},
			want: []*tensor.Tensor{ewF32(ewShape(2), 1, 2)}},
		{name: "dropout ratio 0 runtime training mode", op: "Dropout", opset: 13, nout: 2, consts: map[int]bool{1: true},
			ins:  []*tensor.Tensor{ewF32(ewShape(2), 1, 2), ewF32(ewShape(), 0), ewTyped(ir.Bool, ewShape(), 1)},
			want: []*tensor.Tensor{ewF32(ewShape(2), 1, 2), ewTyped(ir.Bool, ewShape(2), 1, 1)}},
		{name: "prelu opset 6 per channel", op: "PRelu", opset: 6,
			ins:  []*tensor.Tensor{ewF32(ewShape(1, 2, 2), -1, 1, -1, 1), ewF32(ewShape(2), 0.5, 0.25)},
			want: []*tensor.Tensor{ewF32(ewShape(1, 2, 2), -0.5, 1, -0.25, 1)}},
		{name: "sum three", op: "Sum", opset: 13,
			ins:  []*tensor.Tensor{ewF32(ewShape(2), 1, 2), ewF32(ewShape(1), 10), ewF32(ewShape(2, 1), 100, 200)},
			want: []*tensor.Tensor{ewF32(ewShape(2, 2), 111, 112, 211, 212)}},
		{name: "mean two", op: "Mean", opset: 13,
			ins:  []*tensor.Tensor{ewF32(ewShape(2), 1, 2), ewF32(ewShape(2), 4, 4)},
			want: []*tensor.Tensor{ewF32(ewShape(2), 2.5, 3)}},
		{name: "min uint64", op: "Min", opset: 13,
			ins:  []*tensor.Tensor{ewTyped(ir.Uint64, ewShape(2), 1<<63, 5), ewTyped(ir.Uint64, ewShape(2), 3, 1<<63)},
			want: []*tensor.Tensor{ewTyped(ir.Uint64, ewShape(2), 3, 5)}},
		{name: "shrink", op: "Shrink", opset: 9, attrs: map[string]*Attr{"lambd": ewFloat(1), "bias": ewFloat(0.5)},
			ins:  []*tensor.Tensor{ewF32(ewShape(5), -2, -1, 0, 1, 3)},
			want: []*tensor.Tensor{ewF32(ewShape(5), -1.5, 0, 0, 0, 2.5)}},
		{name: "thresholded relu", op: "ThresholdedRelu", opset: 10, attrs: map[string]*Attr{"alpha": ewFloat(2)},
			ins:  []*tensor.Tensor{ewF32(ewShape(3), 1, 2, 3)},
			want: []*tensor.Tensor{ewF32(ewShape(3), 0, 0, 3)}},
		{name: "hard sigmoid", op: "HardSigmoid", opset: 6,
			ins:  []*tensor.Tensor{ewF32(ewShape(3), -5, 0, 5)},
			want: []*tensor.Tensor{ewF32(ewShape(3), 0, 0.5, 1)}},
		{name: "softplus no overflow", op: "Softplus", opset: 1,
			ins:  []*tensor.Tensor{ewF32(ewShape(3), 100, 0, -100)},
			want: []*tensor.Tensor{ewF32(ewShape(3), 100, float32(math.Ln2), 0)}},
		{name: "reciprocal", op: "Reciprocal", opset: 13,
			ins:  []*tensor.Tensor{ewF32(ewShape(2), 4, -0.5)},
			want: []*tensor.Tensor{ewF32(ewShape(2), 0.25, -2)}},
		{name: "quantize per axis", op: "QuantizeLinear", opset: 13, consts: map[int]bool{1: true, 2: true},
			ins: []*tensor.Tensor{ewF32(ewShape(1, 2, 2), 2.5, 3.5, -300, 300), ewF32(ewShape(2), 1, 2),
				ewTyped(ir.Int8, ewShape(2), 0, 1)},
			want: []*tensor.Tensor{ewTyped(ir.Int8, ewShape(1, 2, 2), 2, 4, -128, 127)}},
		{name: "quantize default zero point", op: "QuantizeLinear", opset: 10,
			ins:  []*tensor.Tensor{ewF32(ewShape(3), -1, 0.5, 1000), ewF32(ewShape(), 1)},
			want: []*tensor.Tensor{ewTyped(ir.Uint8, ewShape(3), 0, 0, 255)}},
		{name: "dequantize", op: "DequantizeLinear", opset: 13,
			ins:  []*tensor.Tensor{ewTyped(ir.Uint8, ewShape(3), 0, 128, 255), ewF32(ewShape(), 0.5), ewTyped(ir.Uint8, ewShape(), 128)},
			want: []*tensor.Tensor{ewF32(ewShape(3), -64, 0, 63.5)}},
		{name: "dynamic quantize", op: "DynamicQuantizeLinear", opset: 11, nout: 3,
			ins: []*tensor.Tensor{ewF32(ewShape(3), 0, 2.55, 1.275)},
			want: []*tensor.Tensor{ewTyped(ir.Uint8, ewShape(3), 0, 255, 128),
				ewF32(ewShape(), float32(float32(2.55)/255)), ewTyped(ir.Uint8, ewShape(), 0)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nout := tc.nout
			if nout == 0 {
				nout = 1
			}
			got, err := ewConvert(t, tc.op, tc.opset, tc.attrs, nout, tc.consts, tc.ins...)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d outputs, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if !got[i].Equal(tc.want[i]) {
					t.Errorf("output %d: got %v %v, want %v %v", i, got[i].Type(), got[i].AsFloat64s(), tc.want[i].Type(), tc.want[i].AsFloat64s())
				}
			}
		})
	}
}

func TestElemwiseConverterErrors(t *testing.T) {
	cases := []struct {
		name   string
		op     string
		opset  int64
		attrs  map[string]*Attr
		consts map[int]bool
		ins    []*tensor.Tensor
		want   string
	}{
		{name: "add dtype mismatch", op: "Add", opset: 14,
			ins: []*tensor.Tensor{ewF32(ewShape(2), 1, 2), ewTyped(ir.Int32, ewShape(2), 1, 2)}, want: "dtype mismatch"},
		{name: "add shapes", op: "Add", opset: 14,
			ins: []*tensor.Tensor{ewF32(ewShape(2), 1, 2), ewF32(ewShape(3), 1, 2, 3)}, want: "cannot broadcast"},
		{name: "bitshift direction", op: "BitShift", opset: 11, attrs: map[string]*Attr{"direction": ewString("UP")},
			ins: []*tensor.Tensor{ewTyped(ir.Uint8, ewShape(1), 1), ewTyped(ir.Uint8, ewShape(1), 1)}, want: "direction"},
		{name: "cast to string", op: "Cast", opset: 13, attrs: map[string]*Attr{"to": ewInt(8)},
			ins: []*tensor.Tensor{ewF32(ewShape(1), 1)}, want: "unsupported"},
		{name: "dropout training", op: "Dropout", opset: 13, consts: map[int]bool{2: true},
			ins: []*tensor.Tensor{ewF32(ewShape(1), 1), nil, ewTyped(ir.Bool, ewShape(), 1)}, want: "training-mode"},
		{name: "dropout runtime training mode", op: "Dropout", opset: 13,
			ins: []*tensor.Tensor{ewF32(ewShape(1), 1), nil, ewTyped(ir.Bool, ewShape(), 1)}, want: "training_mode must be a compile-time constant"},
		{name: "legacy axis too large", op: "Add", opset: 6, attrs: map[string]*Attr{"broadcast": ewInt(1), "axis": ewInt(2)},
			ins: []*tensor.Tensor{ewF32(ewShape(2, 2), 1, 2, 3, 4), ewF32(ewShape(2), 1, 2)}, want: "legacy broadcast"},
		{name: "exp on ints", op: "Exp", opset: 13,
			ins: []*tensor.Tensor{ewTyped(ir.Int32, ewShape(1), 1)}, want: "floating-point"},
		{name: "mod before opset 10", op: "Mod", opset: 9,
			ins: []*tensor.Tensor{ewF32(ewShape(1), 1), ewF32(ewShape(1), 1)}, want: "supported from opset 10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ewConvert(t, tc.op, tc.opset, tc.attrs, 1, tc.consts, tc.ins...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
	_, err := ewConvert(t, "Cast", 13, map[string]*Attr{"to": ewInt(8)}, 1, nil, ewF32(ewShape(1), 1))
	if !errors.Is(err, ErrUnsupportedType) {
		t.Errorf("string cast: %v does not wrap ErrUnsupportedType", err)
	}
}

// ewBackendPrefixes selects the ONNX backend tests of the elementwise group.
var ewBackendPrefixes = []string{
	"abs", "acos", "acosh", "add", "and", "asin", "asinh", "atan", "atanh", "bitshift", "cast", "castlike",
	"ceil", "celu", "clip", "cos", "cosh", "div", "dropout", "elu", "equal", "erf", "exp", "floor",
	"greater", "hardsigmoid", "hardswish", "isinf", "isnan", "leakyrelu", "less", "log", "max", "mean",
	"min", "mod", "mul", "neg", "not", "or", "pow", "prelu", "reciprocal", "relu", "round", "selu",
	"shrink", "sigmoid", "sign", "sin", "sinh", "softplus", "softsign", "sqrt", "sub", "sum", "tan",
	"tanh", "thresholdedrelu", "where", "xor", "quantizelinear", "dequantizelinear", "dynamicquantizelinear",
}

// ewNotMine are tests that match a prefix above but belong to other groups.
var ewNotMine = []string{"test_training_dropout"}

func ewIsMine(name string) bool {
	for _, p := range ewNotMine {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	for _, p := range ewBackendPrefixes {
		rest, ok := strings.CutPrefix(name, "test_"+p)
		if ok && (rest == "" || rest[0] == '_' || (rest[0] >= '0' && rest[0] <= '9')) {
			return true
		}
	}
	return false
}

// ewBF16Truncated lists the tests whose float32→bfloat16 expected output
// was generated by truncation (ONNX 1.12's test generator; the Cast spec
// does not state the rounding, see onnx/onnx#3876, and ONNX Runtime rounds
// to nearest even).
var ewBF16Truncated = map[string]bool{
	"test_cast_FLOAT_to_BFLOAT16": true, "test_castlike_FLOAT_to_BFLOAT16": true,
	"test_castlike_FLOAT_to_BFLOAT16_expanded": true,
}

// ewRunBackendTest imports one backend test and checks every data set with
// the reference executor (rtol 1e-3, atol 1e-5; NaN matches NaN).
func ewRunBackendTest(dir string) error {
	m, err := LoadFile(filepath.Join(dir, "model.onnx"), Options{})
	if err != nil {
		return err
	}
	sets, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	if len(sets) == 0 {
		return fmt.Errorf("no data sets")
	}
	for _, set := range sets {
		args := make([]*tensor.Tensor, len(m.Inputs))
		override := map[string]ir.Shape{}
		for i := range args {
			t, _, err := ReadTensorFile(filepath.Join(set, fmt.Sprintf("input_%d.pb", i)))
			if err != nil {
				return err
			}
			// ONNX 1.12 stores bfloat16 test data as uint16 bit patterns.
			if t.DType == ir.Uint16 && m.Inputs[i].Type.DType == ir.BFloat16 {
				t.DType = ir.BFloat16
			}
			if !t.Shape.Equal(m.Inputs[i].Type.Shape) {
				override[m.Inputs[i].Name] = t.Shape
			}
			args[i] = t
		}
		mod := m.Module
		if len(override) > 0 {
			// The data disagrees with the declared shape (test_castlike_*'s
			// "like" input): import again with the data's shapes.
			m2, err := LoadFile(filepath.Join(dir, "model.onnx"), Options{InputShapes: override})
			if err != nil {
				return err
			}
			mod = m2.Module
		}
		v, err := ref.Run(mod, args)
		if err != nil {
			return err
		}
		got := v.Flatten()
		for i := range got {
			want, _, err := ReadTensorFile(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)))
			if err != nil {
				return err
			}
			if want.DType == ir.Uint16 && got[i].DType == ir.BFloat16 {
				want.DType = ir.BFloat16
				if ewBF16Truncated[filepath.Base(dir)] {
					// The data truncates; kiln (like ONNX Runtime and
					// later ONNX releases) rounds to nearest even. Check
					// against the rounded input instead.
					for j := 0; j < want.Len(); j++ {
						want.SetFloat(j, args[0].Float(j))
					}
				}
			}
			if err := ewClose(got[i], want); err != nil {
				return fmt.Errorf("%s output %d: %v", filepath.Base(set), i, err)
			}
		}
	}
	return nil
}

func ewClose(got, want *tensor.Tensor) error {
	if got.DType != want.DType || !got.Shape.Equal(want.Shape) {
		return fmt.Errorf("got %s, want %s", got.Type(), want.Type())
	}
	for i := 0; i < got.Len(); i++ {
		if !want.DType.IsFloat() {
			if got.Int(i) != want.Int(i) {
				return fmt.Errorf("element %d: got %d, want %d", i, got.Int(i), want.Int(i))
			}
			continue
		}
		g, w := got.Float(i), want.Float(i)
		if math.IsNaN(g) && math.IsNaN(w) || g == w {
			continue
		}
		if math.Abs(g-w) > 1e-5+1e-3*math.Abs(w) || math.IsNaN(g) || math.IsNaN(w) {
			return fmt.Errorf("element %d: got %g, want %g", i, g, w)
		}
	}
	return nil
}

// TestElemwiseONNXBackend runs the ONNX node tests of the elementwise group
// through the importer and the reference executor. Tests of unsupported
// value types (string casts) must fail with ErrUnsupportedType.
func TestElemwiseONNXBackend(t *testing.T) {
	root := testenv.SharedPath(t, "onnx", "node")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && ewIsMine(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) < 200 {
		t.Fatalf("found only %d elementwise tests in %s", len(names), root)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			err := ewRunBackendTest(filepath.Join(root, name))
			if strings.Contains(name, "STRING") {
				if !errors.Is(err, ErrUnsupportedType) {
					t.Fatalf("want an unsupported-type error, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
