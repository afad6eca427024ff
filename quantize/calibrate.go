package quantize

import (
	"context"
	"fmt"
	"math"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Engine compiles or imports serialized ONNX models for the quantizer: the
// float model with its activations as extra outputs for calibration, and
// the float and quantized models for Compare.
type Engine interface {
	Load(ctx context.Context, model []byte) (Runner, error)
}

// Runner runs one loaded model. Run returns every graph output by name.
type Runner interface {
	Run(ctx context.Context, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error)
	Close() error
}

// Method is how a tensor's range is taken from its calibration values.
type Method int

const (
	// MinMax takes the smallest and largest value seen.
	MinMax Method = iota
	// Percentile drops the Options.Percentile tails at each end: the
	// range holds that share of the values, so rare outliers do not
	// widen every step of the quantization grid.
	Percentile
)

// String names the method as the CLI flag does.
func (m Method) String() string {
	if m == Percentile {
		return "percentile"
	}
	return "minmax"
}

// histBins is the resolution of the percentile histograms.
const histBins = 4096

// stat collects one activation's calibration values.
type stat struct {
	lo, hi float64 // min and max seen (+Inf/-Inf before any)
	hist   []int64 // over [lo, hi] of the first pass, for Percentile
	count  int64
}

// calibrate runs the model on the samples with every planned activation as
// an extra output and returns the range of each float one. Activations
// that are not float32 are dropped from the plan.
func calibrate(ctx context.Context, m *Model, p *plan, eng Engine, samples []map[string]*tensor.Tensor, opts Options) (map[string][2]float64, error) {
	if len(samples) == 0 {
		return nil, fmt.Errorf("no calibration samples")
	}
	probe := proto.Clone(m.mp).(*pb.ModelProto)
	x := newIndex(probe.Graph)
	for _, a := range p.acts {
		if !x.inputs[a] {
			probe.Graph.Output = append(probe.Graph.Output, &pb.ValueInfoProto{Name: proto.String(a)})
		}
	}
	data, err := marshal(probe)
	if err != nil {
		return nil, err
	}
	r, err := eng.Load(ctx, data)
	if err != nil {
		return nil, fmt.Errorf("the model with its activations as outputs: %w", err)
	}
	defer r.Close()
	stats := map[string]*stat{}
	for _, a := range p.acts {
		stats[a] = &stat{lo: math.Inf(1), hi: math.Inf(-1)}
	}
	// values gives one sample's tensor for each activation.
	values := func(s map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
		outs, err := r.Run(ctx, s)
		if err != nil {
			return nil, err
		}
		for _, a := range p.acts {
			if x.inputs[a] {
				outs[a] = s[a]
			}
		}
		return outs, nil
	}
	passes := 1
	if opts.Method == Percentile {
		passes = 2
	}
	for pass := 0; pass < passes; pass++ {
		for k, s := range samples {
			outs, err := values(s)
			if err != nil {
				return nil, fmt.Errorf("calibration sample %d: %w", k, err)
			}
			for _, a := range p.acts {
				t, st := outs[a], stats[a]
				if t == nil || t.DType != ir.Float32 {
					delete(stats, a)
					continue
				}
				if st == nil {
					continue
				}
				if pass == 0 {
					st.observe(t.Float32s())
				} else {
					st.histogram(t.Float32s())
				}
			}
		}
	}
	ranges := map[string][2]float64{}
	var kept []string
	for _, a := range p.acts {
		st := stats[a]
		if st == nil {
			delete(p.actSet, a)
			continue
		}
		kept = append(kept, a)
		lo, hi := st.lo, st.hi
		if opts.Method == Percentile {
			lo, hi = st.percentiles(opts.percentile())
		}
		if math.IsInf(lo, 0) || math.IsInf(hi, 0) { // no finite value seen
			lo, hi = 0, 0
		}
		ranges[a] = [2]float64{lo, hi}
	}
	p.acts = kept
	return ranges, nil
}

// observe widens the range by a tensor's finite values.
func (s *stat) observe(v []float32) {
	for _, f := range v {
		x := float64(f)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		s.lo = math.Min(s.lo, x)
		s.hi = math.Max(s.hi, x)
	}
}

// histogram counts a tensor's finite values over the first pass's range.
func (s *stat) histogram(v []float32) {
	if s.hist == nil {
		s.hist = make([]int64, histBins)
	}
	w := s.hi - s.lo
	for _, f := range v {
		x := float64(f)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		b := 0
		if w > 0 {
			b = int((x - s.lo) / w * histBins)
		}
		s.hist[min(max(b, 0), histBins-1)]++
		s.count++
	}
}

// percentiles returns the values below which (100-pct)% and pct% of the
// counted values lie, at bin edges (the outer edge of the bin holding the
// quantile).
func (s *stat) percentiles(pct float64) (float64, float64) {
	if s.count == 0 || s.hi <= s.lo {
		return s.lo, s.hi
	}
	w := (s.hi - s.lo) / histBins
	tail := int64(math.Floor(float64(s.count) * (100 - pct) / 100))
	lo, hi := s.lo, s.hi
	var acc int64
	for b := 0; b < histBins; b++ {
		if acc+s.hist[b] > tail {
			lo = s.lo + float64(b)*w
			break
		}
		acc += s.hist[b]
	}
	acc = 0
	for b := histBins - 1; b >= 0; b-- {
		if acc+s.hist[b] > tail {
			hi = s.lo + float64(b+1)*w
			break
		}
		acc += s.hist[b]
	}
	return lo, hi
}

// sortedNames lists a map's keys in order.
func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
