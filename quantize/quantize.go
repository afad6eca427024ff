package quantize

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Options configures Quantize. The zero value calibrates with min/max,
// quantizes activations to uint8 and weights per output channel.
type Options struct {
	// Method takes each activation's range from its calibration values.
	Method Method
	// Percentile is the share of values (in percent) a Percentile range
	// holds at each end (0: 99.99).
	Percentile float64
	// Activations is ir.Uint8 (the default, ir.Invalid) or ir.Int8.
	// uint8 activations with int8 weights are what x86's integer dot
	// products (vpmaddubsw, VNNI's vpdpbusd) multiply, and the form ONNX
	// Runtime fuses on x86; microcontroller libraries in CMSIS-NN's style
	// take int8.
	Activations ir.DType
	// PerTensorWeights gives each weight one scale instead of one per
	// output channel. Models of opset before 13 always get this, since
	// DequantizeLinear's axis came in opset 13.
	PerTensorWeights bool
	// ReduceRange quantizes weights to 7 bits ([-64, 64]) instead of 8
	// ([-127, 127]). On x86 without VNNI, kiln then multiplies uint8
	// data with vpmaddubsw, whose 16-bit sums of two products cannot
	// saturate with such weights (255 * 128 < 2^15), instead of widening
	// every byte to 16 bits: integer convolutions run faster there, at the
	// cost of one bit of weight precision. ONNX Runtime's quantizer calls
	// this option reduce_range.
	ReduceRange bool
}

// weightMax is the largest quantized weight magnitude.
func (o Options) weightMax() float64 {
	if o.ReduceRange {
		return 64
	}
	return 127
}

func (o Options) percentile() float64 {
	if o.Percentile == 0 {
		return 99.99
	}
	return o.Percentile
}

func (o Options) activations() ir.DType {
	if o.Activations == ir.Invalid {
		return ir.Uint8
	}
	return o.Activations
}

// check validates the options.
func (o Options) check() error {
	if dt := o.activations(); dt != ir.Int8 && dt != ir.Uint8 {
		return fmt.Errorf("activation type %s: want int8 or uint8", dt)
	}
	if p := o.percentile(); !(p > 50 && p <= 100) {
		return fmt.Errorf("percentile %g: want a value in (50, 100]", p)
	}
	if o.Method != MinMax && o.Method != Percentile {
		return fmt.Errorf("unknown calibration method %d", o.Method)
	}
	return nil
}

// Result is a quantized model and what was quantized.
type Result struct {
	// Model is the serialized QDQ ONNX model.
	Model []byte
	// Activations, Weights and Biases count the tensors quantized.
	Activations, Weights, Biases int
	// Ranges holds each quantized activation's calibrated range.
	Ranges map[string][2]float64
	// Notes says what was left in float, and why.
	Notes []string
}

// Quantize calibrates m on samples (each a value for every input) through
// eng and returns the QDQ model.
func Quantize(ctx context.Context, m *Model, eng Engine, samples []map[string]*tensor.Tensor, opts Options) (*Result, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	for k, s := range samples {
		if err := m.checkSample(s); err != nil {
			return nil, fmt.Errorf("calibration sample %d: %w", k, err)
		}
	}
	perChannel := !opts.PerTensorWeights && m.opset >= 13
	var notes []string
	if !opts.PerTensorWeights && !perChannel {
		notes = append(notes, fmt.Sprintf("the model is opset %d: weights get one scale each (per-channel scales need opset 13)", m.opset))
	}
	p := makePlan(newIndex(m.mp.Graph), perChannel)
	if len(p.acts) == 0 && len(p.weights) == 0 {
		return nil, fmt.Errorf("the model has no operator kiln quantizes (Conv, Gemm, MatMul, Add, Concat, pooling)")
	}
	ranges, err := calibrate(ctx, m, p, eng, samples, opts)
	if err != nil {
		return nil, err
	}
	shareRanges(newIndex(m.mp.Graph), p, ranges)
	mp, c, err := rewrite(m, p, ranges, opts)
	if err != nil {
		return nil, err
	}
	data, err := marshal(mp)
	if err != nil {
		return nil, err
	}
	return &Result{Model: data, Activations: c.acts, Weights: c.weights, Biases: c.biases, Ranges: ranges, Notes: append(notes, c.notes...)}, nil
}

// shareRanges gives the output of max pooling and of data movement the
// range of its input, so that both are quantized alike and an integer
// engine runs the operator on the integers unchanged. (Max pooling
// keeps the largest value; its smallest can only rise, which the shared
// grid still holds.)
func shareRanges(x *index, p *plan, ranges map[string][2]float64) {
	for _, n := range x.g.GetNode() {
		switch n.GetOpType() {
		case "MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze":
		default:
			continue
		}
		if n.GetDomain() != "" || len(n.GetOutput()) == 0 {
			continue
		}
		in, out := in(n, 0), n.Output[0]
		r, ok := ranges[in]
		if _, quantized := ranges[out]; ok && quantized && p.actSet[in] {
			ranges[out] = r
		}
	}
}

// checkSample says whether a sample gives every input a value of its
// declared type and static dimensions.
func (m *Model) checkSample(s map[string]*tensor.Tensor) error {
	for _, in := range m.inputs {
		t := s[in.Name]
		if t == nil {
			return fmt.Errorf("no value for input %q", in.Name)
		}
		if t.DType != in.DType {
			return fmt.Errorf("input %q: got %s, the model wants %s", in.Name, t.DType, in.DType)
		}
		if in.Dims != nil && len(in.Dims) != len(t.Shape) {
			return fmt.Errorf("input %q: got shape %v, the model wants rank %d", in.Name, t.Shape, len(in.Dims))
		}
		for i, d := range in.Dims {
			if d >= 0 && t.Shape[i] != d {
				return fmt.Errorf("input %q: got shape %v, the model wants %v", in.Name, t.Shape, in.Dims)
			}
		}
	}
	return nil
}

// Generate makes n seeded random samples for the model's inputs: floats
// uniform in [-1, 1), integers 0 or 1; a symbolic dimension is 1. Each
// tensor's size is checked against the memory budget first.
func Generate(m *Model, n int, seed uint64) ([]map[string]*tensor.Tensor, error) {
	rng := rand.New(rand.NewPCG(seed, 0x7175616e74))
	out := make([]map[string]*tensor.Tensor, n)
	for k := range out {
		s := map[string]*tensor.Tensor{}
		for _, in := range m.inputs {
			shape := make(ir.Shape, len(in.Dims))
			for i, d := range in.Dims {
				shape[i] = max(d, 1)
			}
			t, err := tensor.NewChecked(in.DType, shape)
			if err != nil {
				return nil, fmt.Errorf("input %q: %w", in.Name, err)
			}
			for i := 0; i < t.Len(); i++ {
				if in.DType.IsFloat() {
					t.SetFloat(i, rng.Float64()*2-1)
				} else {
					t.SetInt(i, int64(rng.IntN(2)))
				}
			}
			s[in.Name] = t
		}
		out[k] = s
	}
	return out, nil
}
