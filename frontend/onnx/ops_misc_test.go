package onnx

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
	"google.golang.org/protobuf/proto"
)

// miscConvert runs the converter of opType at opset on hand-made inputs and
// evaluates its outputs with the reference executor. Inputs listed in consts
// are constants, the others graph variables; a nil input is omitted.
func miscConvert(t *testing.T, opType string, opset int64, attrs map[string]*Attr, consts map[int]bool, ins ...*tensor.Tensor) ([]*tensor.Tensor, error) {
	t.Helper()
	n := &Node{Name: "n0", OpType: opType, Opset: opset, Attrs: attrs, NumOutputs: 1}
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
	mod := graph.NewModule(graph.NewFunction(params, graph.NewTuple(outs), nil))
	if err := graph.InferTypes(mod); err != nil {
		return nil, err
	}
	v, err := ref.Run(mod, args)
	if err != nil {
		return nil, err
	}
	return v.Flatten(), nil
}

func miscInt(v int64) *Attr      { return &Attr{Type: AttrInt, Int: v} }
func miscFloat(v float64) *Attr  { return &Attr{Type: AttrFloat, Float: v} }
func miscStr(v string) *Attr     { return &Attr{Type: AttrString, Str: v} }
func miscIntsA(v ...int64) *Attr { return &Attr{Type: AttrInts, Ints: v} }
func miscTensor(dt ir.DType, shape ir.Shape, v ...float64) *tensor.Tensor {
	t := tensor.New(dt, shape)
	for i, x := range v {
		t.SetFloat(i, x)
	}
	return t
}

// miscAllConst marks inputs 0..9 constant.
var miscAllConst = map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 9: true}

func TestMiscConverters(t *testing.T) {
	f32, i64 := ir.Float32, ir.Int64
	scalar := func(dt ir.DType, v float64) *tensor.Tensor { return miscTensor(dt, ir.Shape{}, v) }
	pred := miscTensor(f32, ir.Shape{2, 3}, -1, -2, -3, -4, -5, -6)
	tgt := miscTensor(i64, ir.Shape{2}, 2, 0)
	// log_softmax of [0, ln 2, ln 3] is ln([1, 2, 3]/6).
	logits := miscTensor(f32, ir.Shape{1, 3}, 0, math.Ln2, math.Log(3))
	cases := []struct {
		name   string
		op     string
		opset  int64
		attrs  map[string]*Attr
		consts map[int]bool
		ins    []*tensor.Tensor
		dtype  ir.DType
		shapes []ir.Shape
		want   [][]float64
	}{
		{"nll default mean", "NegativeLogLikelihoodLoss", 13, nil, nil,
			[]*tensor.Tensor{pred, tgt}, f32, []ir.Shape{{}}, [][]float64{{3.5}}},
		{"nll weighted none", "NegativeLogLikelihoodLoss", 12, map[string]*Attr{"reduction": miscStr("none")}, nil,
			[]*tensor.Tensor{pred, tgt, miscTensor(f32, ir.Shape{3}, 1, 2, 3)}, f32, []ir.Shape{{2}}, [][]float64{{9, 4}}},
		{"nll ignore sum", "NegativeLogLikelihoodLoss", 13, map[string]*Attr{"reduction": miscStr("sum"), "ignore_index": miscInt(2)}, nil,
			[]*tensor.Tensor{pred, tgt}, f32, []ir.Shape{{}}, [][]float64{{4}}},
		{"sce with log_prob", "SoftmaxCrossEntropyLoss", 13, map[string]*Attr{"reduction": miscStr("none")}, nil,
			[]*tensor.Tensor{logits, miscTensor(i64, ir.Shape{1}, 1)}, f32, []ir.Shape{{1}, {1, 3}},
			[][]float64{{math.Log(3)}, {math.Log(1.0 / 6), math.Log(2.0 / 6), math.Log(3.0 / 6)}}},
		{"det", "Det", 11, nil, nil, []*tensor.Tensor{miscTensor(f32, ir.Shape{2, 2}, 1, 2, 3, 4)}, f32, []ir.Shape{{}}, [][]float64{{-2}}},

		{"hann periodic", "HannWindow", 17, nil, miscAllConst, []*tensor.Tensor{scalar(ir.Int32, 4)}, f32, []ir.Shape{{4}}, [][]float64{{0, 0.5, 1, 0.5}}},
		{"hann symmetric f64", "HannWindow", 17, map[string]*Attr{"periodic": miscInt(0), "output_datatype": miscInt(11)}, miscAllConst,
			[]*tensor.Tensor{scalar(i64, 5)}, ir.Float64, []ir.Shape{{5}}, [][]float64{{0, 0.5, 1, 0.5, 0}}},
		{"hamming periodic", "HammingWindow", 17, nil, miscAllConst, []*tensor.Tensor{scalar(ir.Int32, 4)}, f32, []ir.Shape{{4}},
			[][]float64{{4.0 / 46, 25.0 / 46, 1, 25.0 / 46}}},
		{"blackman symmetric", "BlackmanWindow", 17, map[string]*Attr{"periodic": miscInt(0)}, miscAllConst, []*tensor.Tensor{scalar(ir.Int32, 3)}, f32, []ir.Shape{{3}},
			[][]float64{{0, 1, 0}}},
		{"window size 1 symmetric", "HannWindow", 17, map[string]*Attr{"periodic": miscInt(0)}, miscAllConst, []*tensor.Tensor{scalar(ir.Int32, 1)}, f32, []ir.Shape{{1}},
			[][]float64{{1}}},
		// ONNX's example: 8 mel bins of a 16-point DFT at 8192 Hz, 0-4096 Hz.
		{"mel weight matrix", "MelWeightMatrix", 17, nil, miscAllConst,
			[]*tensor.Tensor{scalar(ir.Int32, 8), scalar(ir.Int32, 16), scalar(ir.Int32, 8192), scalar(f32, 0), scalar(f32, 4096)}, f32, []ir.Shape{{9, 8}},
			[][]float64{{
				1, 1, 0, 0, 0, 0, 0, 0,
				0, 0, 1, 1, 0, 0, 0, 0,
				0, 0, 0, 0, 1, 0, 0, 0,
				0, 0, 0, 0, 0, 1, 0, 0,
				0, 0, 0, 0, 0, 0, 1, 0,
				0, 0, 0, 0, 0, 0, 0, 1,
				0, 0, 0, 0, 0, 0, 0, 0,
				0, 0, 0, 0, 0, 0, 0, 0,
				0, 0, 0, 0, 0, 0, 0, 0}}},
		{"dft onesided with length", "DFT", 17, map[string]*Attr{"onesided": miscInt(1)}, map[int]bool{1: true},
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 4, 1}, 1, 2, 3, 4), scalar(i64, 2)}, f32, []ir.Shape{{1, 2, 2}}, [][]float64{{3, 0, -1, 0}}},
		// Opset 20: axis is input 2 (default -2, the last signal axis).
		{"dft opset 20 default axis", "DFT", 20, nil, nil,
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 2, 2, 1}, 1, 2, 3, 4)}, f32, []ir.Shape{{1, 2, 2, 2}}, [][]float64{{3, 0, -1, 0, 7, 0, -1, 0}}},
		{"dft opset 20 axis input", "DFT", 20, nil, map[int]bool{2: true},
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 2, 2, 1}, 1, 2, 3, 4), nil, scalar(i64, 1)}, f32, []ir.Shape{{1, 2, 2, 2}}, [][]float64{{4, 0, 6, 0, -2, 0, -2, 0}}},
		{"stft frame_length only", "STFT", 17, nil, map[int]bool{1: true, 3: true},
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 4, 1}, 1, 2, 3, 4), scalar(i64, 2), nil, scalar(i64, 2)}, f32, []ir.Shape{{1, 2, 2, 2}},
			[][]float64{{3, 0, -1, 0, 7, 0, -1, 0}}},
		{"stft window", "STFT", 17, nil, map[int]bool{1: true},
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 4, 1}, 1, 2, 3, 4), scalar(i64, 2), miscTensor(f32, ir.Shape{2}, 1, 0.5)}, f32, []ir.Shape{{1, 2, 2, 2}},
			[][]float64{{2, 0, 0, 0, 5, 0, 1, 0}}},
		// Box 1 overlaps box 0 with IoU 0.9/1.1 > 0.5; box 2 is far away.
		{"nms", "NonMaxSuppression", 11, nil, miscAllConst,
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 3, 4}, 0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, 10, 1, 11), miscTensor(f32, ir.Shape{1, 1, 3}, 0.9, 0.8, 0.7),
				scalar(i64, 3), scalar(f32, 0.5)}, i64, []ir.Shape{{2, 3}}, [][]float64{{0, 0, 0, 0, 0, 2}}},
		{"nms score threshold", "NonMaxSuppression", 11, nil, miscAllConst,
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 3, 4}, 0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, 10, 1, 11), miscTensor(f32, ir.Shape{1, 1, 3}, 0.9, 0.8, 0.7),
				scalar(i64, 3), scalar(f32, 0.5), scalar(f32, 0.75)}, i64, []ir.Shape{{1, 3}}, [][]float64{{0, 0, 0}}},
		// Centre format: boxes at x 0.5 and 0.6 (width 1) overlap with IoU 0.9/1.1.
		{"nms center and two classes", "NonMaxSuppression", 10, map[string]*Attr{"center_point_box": miscInt(1)}, miscAllConst,
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 2, 4}, 0.5, 0.5, 1, 1, 0.6, 0.5, 1, 1), miscTensor(f32, ir.Shape{1, 2, 2}, 0.1, 0.2, 0.4, 0.3),
				scalar(i64, 5), scalar(f32, 0.5)}, i64, []ir.Shape{{2, 3}}, [][]float64{{0, 0, 1, 0, 1, 0}}},
		{"nms no max output", "NonMaxSuppression", 11, nil, miscAllConst,
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 1, 4}, 0, 0, 1, 1), miscTensor(f32, ir.Shape{1, 1, 1}, 0.9)}, i64, []ir.Shape{{0, 3}}, [][]float64{{}}},
		{"tfidf", "TfIdfVectorizer", 9, map[string]*Attr{"mode": miscStr("TF"), "min_gram_length": miscInt(1), "max_gram_length": miscInt(2), "max_skip_count": miscInt(0),
			"ngram_counts": miscIntsA(0, 2), "ngram_indexes": miscIntsA(0, 1, 2), "pool_int64s": miscIntsA(1, 2, 1, 2)}, nil,
			[]*tensor.Tensor{miscTensor(ir.Int32, ir.Shape{1, 4}, 1, 2, 1, 2)}, f32, []ir.Shape{{1, 3}}, [][]float64{{2, 2, 2}}},
		{"bernoulli certain", "Bernoulli", 15, map[string]*Attr{"dtype": miscInt(7), "seed": miscFloat(2)}, nil,
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{4}, 0, 1, 1, 0)}, i64, []ir.Shape{{4}}, [][]float64{{0, 1, 1, 0}}},
		{"multinomial certain", "Multinomial", 7, map[string]*Attr{"sample_size": miscInt(3)}, nil,
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 2}, -100, 100)}, ir.Int32, []ir.Shape{{1, 3}}, [][]float64{{1, 1, 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			outs, err := miscConvert(t, c.op, c.opset, c.attrs, c.consts, c.ins...)
			if err != nil {
				t.Fatal(err)
			}
			if len(outs) != len(c.want) {
				t.Fatalf("%d outputs, want %d", len(outs), len(c.want))
			}
			for k, o := range outs {
				if o.DType != c.dtype || !o.Shape.Equal(c.shapes[k]) {
					t.Fatalf("output %d is %s, want %s%v", k, o.Type(), c.dtype, c.shapes[k])
				}
				for i, w := range c.want[k] {
					if g := o.Float(i); math.Abs(g-w) > 1e-6*(1+math.Abs(w)) {
						t.Fatalf("output %d element %d = %v, want %v (all %v)", k, i, g, w, o.AsFloat64s())
					}
				}
			}
		})
	}
}

func TestMiscRandomConverters(t *testing.T) {
	// RandomNormal/Uniform fold into constants; the same seed gives the same
	// values and the *Like forms take shape and dtype from their input.
	conv := func(op string, attrs map[string]*Attr, ins ...*tensor.Tensor) []graph.Expr {
		t.Helper()
		n := &Node{Name: "r", OpType: op, Opset: 17, Attrs: attrs}
		for _, in := range ins {
			n.Inputs = append(n.Inputs, graph.NewVar("x", in.Type()))
		}
		c, err := lookupConverter("", op, 17)
		if err != nil {
			t.Fatal(err)
		}
		outs, err := c(&Ctx{node: n}, n)
		if err != nil {
			t.Fatal(err)
		}
		return outs
	}
	a := conv("RandomNormal", map[string]*Attr{"shape": miscIntsA(2, 3), "seed": miscFloat(1)})[0]
	b := conv("RandomNormal", map[string]*Attr{"shape": miscIntsA(2, 3), "seed": miscFloat(1)})[0]
	ka, ok1 := a.(*graph.Constant)
	kb, ok2 := b.(*graph.Constant)
	if !ok1 || !ok2 || !ka.Value.Equal(kb.Value) || !ka.Value.Shape.Equal(ir.Shape{2, 3}) || ka.Value.DType != ir.Float32 {
		t.Fatalf("RandomNormal: want equal float32[2,3] constants, got %v and %v", a.Type(), b.Type())
	}
	u := conv("RandomUniformLike", map[string]*Attr{"low": miscFloat(5), "high": miscFloat(6)}, miscTensor(ir.Float64, ir.Shape{4}))[0]
	ku, ok := u.(*graph.Constant)
	if !ok || ku.Value.DType != ir.Float64 || !ku.Value.Shape.Equal(ir.Shape{4}) {
		t.Fatalf("RandomUniformLike: got %v", u.Type())
	}
	for _, v := range ku.Value.Float64s() {
		if v < 5 || v >= 6 {
			t.Fatalf("RandomUniformLike sample %v outside [5, 6)", v)
		}
	}
}

func TestMiscConverterErrors(t *testing.T) {
	f32 := ir.Float32
	scalar := func(dt ir.DType, v float64) *tensor.Tensor { return miscTensor(dt, ir.Shape{}, v) }
	cases := []struct {
		name   string
		op     string
		opset  int64
		attrs  map[string]*Attr
		consts map[int]bool
		ins    []*tensor.Tensor
		err    string
	}{
		{"window size not constant", "HannWindow", 17, nil, nil, []*tensor.Tensor{scalar(ir.Int32, 4)}, "compile-time constant"},
		{"window size negative", "HannWindow", 17, nil, miscAllConst, []*tensor.Tensor{scalar(ir.Int32, -1)}, "out of range"},
		{"nms boxes not constant", "NonMaxSuppression", 11, nil, map[int]bool{1: true},
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 1, 4}), miscTensor(f32, ir.Shape{1, 1, 1})}, "compile-time constant"},
		{"nms bad scores", "NonMaxSuppression", 11, nil, miscAllConst,
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 2, 4}), miscTensor(f32, ir.Shape{1, 1, 3})}, "scores must be"},
		{"nll bad reduction", "NegativeLogLikelihoodLoss", 13, map[string]*Attr{"reduction": miscStr("avg")}, nil,
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{2, 3}), miscTensor(ir.Int64, ir.Shape{2})}, "reduction"},
		{"nll target out of range", "NegativeLogLikelihoodLoss", 13, nil, nil,
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 3}), miscTensor(ir.Int64, ir.Shape{1}, 7)}, "out of range"},
		{"dft length zero", "DFT", 17, nil, map[int]bool{1: true},
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 4, 1}), scalar(ir.Int64, 0)}, "dft_length"},
		{"dft onesided complex", "DFT", 17, map[string]*Attr{"onesided": miscInt(1)}, nil,
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 4, 2})}, "real signal"},
		{"stft no window or length", "STFT", 17, nil, map[int]bool{1: true},
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 4, 1}), scalar(ir.Int64, 1)}, "window or a frame_length"},
		{"stft window mismatch", "STFT", 17, nil, map[int]bool{1: true, 3: true},
			[]*tensor.Tensor{miscTensor(f32, ir.Shape{1, 4, 1}), scalar(ir.Int64, 1), miscTensor(f32, ir.Shape{3}), scalar(ir.Int64, 2)}, "does not match"},
		{"mel upper below lower", "MelWeightMatrix", 17, nil, miscAllConst,
			[]*tensor.Tensor{scalar(ir.Int32, 8), scalar(ir.Int32, 16), scalar(ir.Int32, 8192), scalar(f32, 100), scalar(f32, 50)}, "lower_edge_hertz"},
		{"mel beyond nyquist", "MelWeightMatrix", 17, nil, miscAllConst,
			[]*tensor.Tensor{scalar(ir.Int32, 8), scalar(ir.Int32, 16), scalar(ir.Int32, 8192), scalar(f32, 0), scalar(f32, 20000)}, "beyond"},
		{"det of vector", "Det", 11, nil, nil, []*tensor.Tensor{miscTensor(f32, ir.Shape{3})}, "square"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := miscConvert(t, c.op, c.opset, c.attrs, c.consts, c.ins...)
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("got error %v, want one containing %q", err, c.err)
			}
		})
	}
	// String pools are an unsupported value type, not a plain failure.
	n := &Node{Name: "tf", OpType: "TfIdfVectorizer", Opset: 9, Inputs: []graph.Expr{graph.NewVar("x", ir.NewTensorType(ir.Int64, ir.Shape{3}))},
		Attrs: map[string]*Attr{"pool_strings": {Type: AttrStrings, Strings: []string{"a"}}}}
	if _, err := convertTfIdf(&Ctx{node: n}, n); !errors.Is(err, ErrUnsupportedType) {
		t.Fatalf("pool_strings: got %v, want ErrUnsupportedType", err)
	}
}

// miscNodeTests are the ONNX node tests of the misc group that kiln must
// pass. The Bernoulli tests are not listed: their expected outputs come from
// numpy's random generator, which kiln's deterministic generator does not
// reproduce.
var miscNodeTests = []string{
	"test_nllloss_*", "test_sce_*", "test_hannwindow", "test_hannwindow_symmetric", "test_hammingwindow",
	"test_hammingwindow_symmetric", "test_blackmanwindow", "test_blackmanwindow_symmetric", "test_melweightmatrix",
	"test_dft*", "test_stft*", "test_det_*", "test_nonmaxsuppression_*", "test_tfidfvectorizer_*",
}

// miscReadPB reads a TensorProto file.
func miscReadPB(path string) (string, *tensor.Tensor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	var p pb.TensorProto
	if err := proto.Unmarshal(b, &p); err != nil {
		return "", nil, err
	}
	t, err := TensorFromProto(&p)
	return p.GetName(), t, err
}

// miscRunNodeTest imports one ONNX node test (freezing inputs on demand),
// runs every data set with the reference executor and compares outputs with
// ONNX's tolerance (rtol 1e-3, atol 1e-7).
func miscRunNodeTest(dir string) error {
	sets, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	sort.Strings(sets)
	for _, ds := range sets {
		ins, _ := filepath.Glob(filepath.Join(ds, "input_*.pb"))
		sort.Strings(ins)
		byName := map[string]*tensor.Tensor{}
		var order []*tensor.Tensor
		for _, f := range ins {
			name, t, err := miscReadPB(f)
			if err != nil {
				return err
			}
			byName[name] = t
			order = append(order, t)
		}
		m, err := LoadFile(filepath.Join(dir, "model.onnx"), Options{Freeze: byName})
		if err != nil {
			return err
		}
		args := make([]*tensor.Tensor, len(m.Inputs))
		for i, in := range m.Inputs {
			if args[i] = byName[in.Name]; args[i] == nil && i < len(order) {
				args[i] = order[i]
			}
		}
		v, err := ref.Run(m.Module, args)
		if err != nil {
			return err
		}
		got := v.Flatten()
		outs, _ := filepath.Glob(filepath.Join(ds, "output_*.pb"))
		sort.Strings(outs)
		if len(got) != len(outs) {
			return fmt.Errorf("%d outputs, want %d", len(got), len(outs))
		}
		for i, f := range outs {
			_, want, err := miscReadPB(f)
			if err != nil {
				return err
			}
			if !ir.TypeEqual(got[i].Type(), want.Type()) {
				return fmt.Errorf("output %d is %s, want %s", i, got[i].Type(), want.Type())
			}
			for k := 0; k < want.Len(); k++ {
				g, w := got[i].Float(k), want.Float(k)
				if !(math.Abs(g-w) <= 1e-7+1e-3*math.Abs(w)) && !(math.IsNaN(g) && math.IsNaN(w)) {
					return fmt.Errorf("%s output %d element %d = %v, want %v", filepath.Base(ds), i, k, g, w)
				}
			}
		}
	}
	return nil
}

func TestMiscONNXNodeTests(t *testing.T) {
	root := testenv.SharedPath(t, "onnx", "node")
	var dirs []string
	for _, pat := range miscNodeTests {
		ms, _ := filepath.Glob(filepath.Join(root, pat))
		for _, d := range ms {
			// The *_expanded forms test other groups' primitive ops.
			if !strings.HasSuffix(d, "_expanded") {
				dirs = append(dirs, d)
			}
		}
	}
	if len(dirs) < 80 {
		t.Fatalf("found only %d misc node tests", len(dirs))
	}
	for _, d := range dirs {
		t.Run(filepath.Base(d), func(t *testing.T) {
			if err := miscRunNodeTest(d); err != nil {
				t.Fatal(err)
			}
		})
	}
}
