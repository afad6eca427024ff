package quantize

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// mb builds small ONNX models for the tests.
type mb struct {
	rng   *rand.Rand
	g     *pb.GraphProto
	opset int64
}

func newMB(opset int64) *mb {
	return &mb{rng: rand.New(rand.NewPCG(7, 8)), g: &pb.GraphProto{Name: proto.String("t")}, opset: opset}
}

func (b *mb) input(name string, dims ...int64) string {
	b.g.Input = append(b.g.Input, vi(name, dims))
	return name
}

func vi(name string, dims []int64) *pb.ValueInfoProto {
	sh := &pb.TensorShapeProto{}
	for _, d := range dims {
		sh.Dim = append(sh.Dim, &pb.TensorShapeProto_Dimension{Value: &pb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	return &pb.ValueInfoProto{Name: proto.String(name), Type: &pb.TypeProto{Value: &pb.TypeProto_TensorType{
		TensorType: &pb.TypeProto_Tensor{ElemType: proto.Int32(int32(pb.TensorProto_FLOAT)), Shape: sh}}}}
}

// weight adds a random float initializer, values in [-scale, scale).
func (b *mb) weight(name string, scale float64, dims ...int64) string {
	t := tensor.New(ir.Float32, dims)
	for i := range t.Float32s() {
		t.Float32s()[i] = float32((b.rng.Float64()*2 - 1) * scale)
	}
	b.g.Initializer = append(b.g.Initializer, onnx.TensorToProto(t, name))
	return name
}

func (b *mb) scalar(name string, v float32) string {
	b.g.Initializer = append(b.g.Initializer, onnx.TensorToProto(tensor.FromFloat32s(ir.Shape{}, []float32{v}), name))
	return name
}

func (b *mb) node(op string, ins []string, out string, attrs ...*pb.AttributeProto) string {
	b.g.Node = append(b.g.Node, &pb.NodeProto{OpType: proto.String(op), Name: proto.String(out + "_node"), Input: ins, Output: []string{out}, Attribute: attrs})
	return out
}

func ints(name string, v ...int64) *pb.AttributeProto {
	return &pb.AttributeProto{Name: proto.String(name), Type: pb.AttributeProto_INTS.Enum(), Ints: v}
}

func intAttr(name string, v int64) *pb.AttributeProto {
	return &pb.AttributeProto{Name: proto.String(name), Type: pb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

func (b *mb) output(name string, dims ...int64) {
	b.g.Output = append(b.g.Output, vi(name, dims))
}

func (b *mb) model(t *testing.T) *Model {
	t.Helper()
	mp := &pb.ModelProto{IrVersion: proto.Int64(8), Graph: b.g,
		OpsetImport: []*pb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(b.opset)}}}
	data, err := proto.Marshal(mp)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// smallCNN is conv+relu, max pool, a 1x1 conv with a residual add, a
// Clip(0, 6) given by Constant nodes, global pooling and a classifier
// whose weight passes through an Identity.
func smallCNN(opset int64) *mb {
	b := newMB(opset)
	x := b.input("x", 1, 3, 8, 8)
	c1 := b.node("Conv", []string{x, b.weight("w1", 0.5, 8, 3, 3, 3), b.weight("b1", 0.2, 8)}, "c1", ints("pads", 1, 1, 1, 1))
	r1 := b.node("Relu", []string{c1}, "r1")
	p1 := b.node("MaxPool", []string{r1}, "p1", ints("kernel_shape", 2, 2), ints("strides", 2, 2))
	c2 := b.node("Conv", []string{p1, b.weight("w2", 0.5, 8, 8, 1, 1), b.weight("b2", 0.2, 8)}, "c2")
	a := b.node("Add", []string{c2, p1}, "a")
	lo := b.node("Constant", nil, "lo", &pb.AttributeProto{Name: proto.String("value"), Type: pb.AttributeProto_TENSOR.Enum(),
		T: onnx.TensorToProto(tensor.FromFloat32s(ir.Shape{}, []float32{0}), "")})
	clip := b.node("Clip", []string{a, lo, b.scalar("hi", 6)}, "clip")
	gap := b.node("GlobalAveragePool", []string{clip}, "gap")
	flat := b.node("Flatten", []string{gap}, "flat")
	w3 := b.node("Identity", []string{b.weight("w3raw", 0.5, 10, 8)}, "w3")
	b.node("Gemm", []string{flat, w3, b.weight("b3", 0.1, 10)}, "y", intAttr("transB", 1))
	b.output("y", 1, 10)
	return b
}

func opCounts(t *testing.T, data []byte) map[string]int {
	t.Helper()
	var mp pb.ModelProto
	if err := proto.Unmarshal(data, &mp); err != nil {
		t.Fatal(err)
	}
	c := map[string]int{}
	for _, n := range mp.Graph.Node {
		c[n.GetOpType()]++
	}
	return c
}

func TestQuantizeSmallCNN(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"minmax uint8", Options{}},
		{"minmax int8", Options{Activations: ir.Int8}},
		{"percentile", Options{Method: Percentile, Percentile: 99.9}},
		{"per tensor", Options{PerTensorWeights: true}},
		{"reduced range", Options{ReduceRange: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := smallCNN(13).model(t)
			cal, err := Generate(m, 32, 1)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Quantize(ctx, m, RefEngine{}, cal, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.Weights != 3 || res.Biases != 3 {
				t.Errorf("quantized %d weights and %d biases, want 3 and 3", res.Weights, res.Biases)
			}
			// x, r1 (c1's quantized), p1, c2, clip (a's), gap, flat.
			if res.Activations != 7 {
				t.Errorf("quantized %d activations, want 7 (ranges %v)", res.Activations, res.Ranges)
			}
			ops := opCounts(t, res.Model)
			if ops["Relu"] != 0 || ops["Clip"] != 0 {
				t.Errorf("Relu and Clip(0, 6) should be computed by the quantization's clamp, ops %v", ops)
			}
			if ops["QuantizeLinear"] != 7 || ops["Conv"] != 2 || ops["Gemm"] != 1 || ops["Add"] != 1 {
				t.Errorf("ops %v", ops)
			}
			// The weights' largest magnitude: 127, or 64 in reduced range.
			var mp pb.ModelProto
			if err := proto.Unmarshal(res.Model, &mp); err != nil {
				t.Fatal(err)
			}
			wmax := 0
			for _, in := range mp.Graph.Initializer {
				if in.GetDataType() == int32(pb.TensorProto_INT8) && len(in.GetDims()) >= 2 { // not a zero point
					for _, b := range in.GetRawData() {
						wmax = max(wmax, int(math.Abs(float64(int8(b)))))
					}
				}
			}
			if want := int(tc.opts.weightMax()); wmax != want {
				t.Errorf("int8 weights reach %d, want %d", wmax, want)
			}
			if r := res.Ranges["r1"]; r[0] != 0 || !(r[1] > 0) {
				t.Errorf("the relu's range %v should start at 0", r)
			}
			float, err := m.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			evalIn, err := Generate(m, 16, 2)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Compare(ctx, RefEngine{}, float, res.Model, evalIn)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Outputs) != 1 || rep.Outputs[0].Rows != 16 {
				t.Fatalf("report %+v", rep)
			}
			o := rep.Outputs[0]
			// 8-bit steps through five quantized layers: the error is a few
			// percent of the output's scale, and never zero.
			if !(o.MaxAbsErr > 0) || o.MaxAbsErr > 0.05*o.MaxAbs {
				t.Errorf("max abs error %g of outputs up to %g", o.MaxAbsErr, o.MaxAbs)
			}
			if o.Agree < 14 {
				t.Errorf("top-1 agreement %d/%d", o.Agree, o.Rows)
			}
		})
	}
}

// TestWeightParams checks symmetric per-channel weight quantization: each
// weight rounded (half to even) to its channel's grid of max|w|/127.
func TestWeightParams(t *testing.T) {
	w := tensor.FromFloat32s(ir.Shape{3, 2, 2}, []float32{
		1, -0.5, 0.25, 0.127,
		0, 0, 0, 0,
		-254, 127, 1, -1})
	qp, q := weightParams(w, 0, 127)
	want := []float32{1.0 / 127, 1, 2}
	for c := range want {
		if math.Abs(float64(qp.scales[c]-want[c])) > 1e-7 {
			t.Errorf("channel %d: scale %g, want %g", c, qp.scales[c], want[c])
		}
	}
	got := make([]int8, len(q.Data))
	for i, b := range q.Data {
		got[i] = int8(b)
	}
	wantQ := []int8{127, -64, 32, 16, 0, 0, 0, 0, -127, 64, 0, 0}
	for i := range wantQ {
		// -0.5*127 = -63.5 rounds to even -64; 0.25*127 = 31.75 -> 32;
		// 127/2 = 63.5 -> 64; 1/2 and -1/2 round to even 0.
		if got[i] != wantQ[i] {
			t.Fatalf("quantized %v, want %v", got, wantQ)
		}
	}
	// Reduced range: the grid of max|w|/64.
	_, q = weightParams(w, 0, 64)
	wantQ = []int8{64, -32, 16, 8, 0, 0, 0, 0, -64, 32, 0, 0}
	for i := range wantQ {
		if int8(q.Data[i]) != wantQ[i] {
			t.Fatalf("reduced range: quantized %v, want %v", q.Data, wantQ)
		}
	}
	qp, _ = weightParams(w, -1, 127)
	if len(qp.scales) != 1 || qp.scales[0] != 2 {
		t.Errorf("per tensor: scales %v, want [2]", qp.scales)
	}
}

func TestActParams(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		dt     ir.DType
		scale  float32
		zp     int64
	}{
		{0, 6, ir.Int8, 6.0 / 255, -128},
		{0, 6, ir.Uint8, 6.0 / 255, 0},
		{-1, 3, ir.Uint8, 4.0 / 255, 64},  // 1/(4/255) = 63.75
		{2, 4, ir.Uint8, 4.0 / 255, 0},    // widened to hold 0
		{-3, -1, ir.Int8, 3.0 / 255, 127}, // widened to hold 0
		{0, 0, ir.Int8, 1, 0},             // nothing seen
		{-1e-45, 0, ir.Uint8, 1, 0},       // a scale that underflows
		{-2.55, 0, ir.Int8, float32(2.55 / 255), 127},
	} {
		qp := actParams(tc.lo, tc.hi, tc.dt)
		if math.Abs(float64(qp.scales[0]-tc.scale)) > 1e-7 || qp.zps[0] != tc.zp {
			t.Errorf("range [%g, %g] %s: scale %g zero point %d, want %g %d", tc.lo, tc.hi, tc.dt, qp.scales[0], qp.zps[0], tc.scale, tc.zp)
		}
	}
}

func TestPercentile(t *testing.T) {
	s := &stat{lo: math.Inf(1), hi: math.Inf(-1)}
	v := make([]float32, 10000)
	for i := range v {
		v[i] = float32(i%100) / 100 // [0, 0.99]
	}
	v[0] = 1000 // one outlier
	s.observe(v)
	s.histogram(v)
	lo, hi := s.percentiles(99.9)
	if lo != 0 || hi > 1.3 || hi < 0.99 {
		t.Errorf("99.9th percentile range [%g, %g], want [0, about 1]", lo, hi)
	}
	lo, hi = s.percentiles(100)
	if lo != 0 || hi != 1000 {
		t.Errorf("100th percentile range [%g, %g], want [0, 1000]", lo, hi)
	}
}

func TestPlanFusion(t *testing.T) {
	b := newMB(13)
	x := b.input("x", 2, 4)
	m1 := b.node("MatMul", []string{x, b.weight("w", 1, 4, 3)}, "m1")
	a1 := b.node("Add", []string{m1, b.weight("bias", 1, 3)}, "a1")
	c1 := b.node("Clip", []string{a1, b.scalar("lo", -1), b.scalar("hi", 1)}, "c1")
	m2 := b.node("MatMul", []string{c1, b.weight("w2", 1, 3, 3)}, "m2")
	b.node("Softmax", []string{m2}, "y")
	b.output("y", 2, 3)
	b.output("m2", 2, 3)
	m := b.model(t)
	p := makePlan(newIndex(m.mp.Graph), true)
	// The bias add and the clip of [-1, 1] stay in float behind the first
	// MatMul (a clamp that does not start at 0 is not a quantization
	// range's); the clip's output is quantized; m2 is a graph output.
	want := []string{"x", "c1"}
	if strings.Join(p.acts, ",") != strings.Join(want, ",") {
		t.Errorf("activations %v, want %v", p.acts, want)
	}
	if len(p.dropped) != 0 || len(p.weights) != 2 || len(p.biases) != 0 {
		t.Errorf("dropped %v weights %v biases %v", p.dropped, p.weights, p.biases)
	}
	cal, err := Generate(m, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Quantize(context.Background(), m, RefEngine{}, cal, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ops := opCounts(t, res.Model)
	if ops["Clip"] != 1 || ops["Add"] != 1 || ops["QuantizeLinear"] != 2 || ops["DequantizeLinear"] != 4 {
		t.Errorf("ops %v", ops)
	}
}

func TestQuantizeErrors(t *testing.T) {
	ctx := context.Background()
	mp := &pb.ModelProto{IrVersion: proto.Int64(4), Graph: smallCNN(9).g,
		OpsetImport: []*pb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(9)}}}
	data, _ := proto.Marshal(mp)
	if _, err := Parse(data); err == nil || !strings.Contains(err.Error(), "opset 9") {
		t.Errorf("opset 9: %v", err)
	}
	if _, err := Parse([]byte("not a model")); err == nil {
		t.Error("garbage parsed")
	}
	m := smallCNN(13).model(t)
	if _, err := Quantize(ctx, m, RefEngine{}, nil, Options{}); err == nil || !strings.Contains(err.Error(), "no calibration samples") {
		t.Errorf("no samples: %v", err)
	}
	bad := map[string]*tensor.Tensor{"x": tensor.New(ir.Float32, ir.Shape{1, 3, 4, 4})}
	if _, err := Quantize(ctx, m, RefEngine{}, []map[string]*tensor.Tensor{bad}, Options{}); err == nil || !strings.Contains(err.Error(), `input "x"`) {
		t.Errorf("wrong shape: %v", err)
	}
	if _, err := Quantize(ctx, m, RefEngine{}, []map[string]*tensor.Tensor{{}}, Options{}); err == nil || !strings.Contains(err.Error(), `no value for input "x"`) {
		t.Errorf("missing input: %v", err)
	}
	if _, err := Quantize(ctx, m, RefEngine{}, nil, Options{Activations: ir.Int32}); err == nil || !strings.Contains(err.Error(), "int32") {
		t.Errorf("int32 activations: %v", err)
	}
	// A model with nothing kiln quantizes.
	b := newMB(13)
	b.node("Softmax", []string{b.input("x", 2, 3)}, "y")
	b.output("y", 2, 3)
	cal, _ := Generate(b.model(t), 1, 1)
	if _, err := Quantize(ctx, b.model(t), RefEngine{}, cal, Options{}); err == nil || !strings.Contains(err.Error(), "no operator") {
		t.Errorf("nothing to quantize: %v", err)
	}
}

// TestOpset12PerTensor: before opset 13 weights get one scale, with a note.
func TestOpset12PerTensor(t *testing.T) {
	b := smallCNN(12)
	// Clip takes its bounds as inputs from opset 11, so the model is valid.
	m := b.model(t)
	cal, _ := Generate(m, 2, 1)
	res, err := Quantize(context.Background(), m, RefEngine{}, cal, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "opset 12") {
		t.Errorf("notes %v", res.Notes)
	}
	var mp pb.ModelProto
	proto.Unmarshal(res.Model, &mp)
	for _, n := range mp.Graph.Node {
		for _, a := range n.Attribute {
			if a.GetName() == "axis" {
				t.Errorf("node %s has an axis at opset 12", n.GetName())
			}
		}
	}
}

// TestPlanSoftmax: a Softmax between quantized nodes gets its input and
// output quantized, so that the import's QDQ folding can compute it in
// integers (qnn.softmax).
func TestPlanSoftmax(t *testing.T) {
	b := newMB(13)
	x := b.input("x", 2, 4)
	m := b.node("MatMul", []string{x, b.weight("w", 1, 4, 3)}, "m")
	s := b.node("Softmax", []string{m}, "s")
	b.node("MatMul", []string{s, b.weight("w2", 1, 3, 3)}, "y")
	b.output("y", 2, 3)
	p := makePlan(newIndex(b.model(t).mp.Graph), true)
	if want := "x,m,s"; strings.Join(p.acts, ",") != want {
		t.Errorf("activations %v, want %s", p.acts, want)
	}
}
