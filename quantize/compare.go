package quantize

import (
	"context"
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// OutputReport compares one float output of the quantized model with the
// float model's over all inputs.
type OutputReport struct {
	Name string
	// Rows counts the argmax rows compared (the output's last axis is the
	// class axis); 0 when the output has no axis of 2 or more classes.
	Rows, Agree int
	// MaxAbsErr is the largest absolute difference; MaxAbs the largest
	// absolute value of the float model's output, its scale.
	MaxAbsErr, MaxAbs float64
}

// Top1 is the share of rows whose argmax agrees (NaN without rows).
func (o OutputReport) Top1() float64 {
	if o.Rows == 0 {
		return math.NaN()
	}
	return float64(o.Agree) / float64(o.Rows)
}

// Report is Compare's result.
type Report struct {
	Inputs  int
	Outputs []OutputReport
}

// Compare runs the float model and the quantized one on the same inputs
// through eng and reports, per float output, top-1 agreement and the
// largest error.
func Compare(ctx context.Context, eng Engine, float, quant []byte, inputs []map[string]*tensor.Tensor) (*Report, error) {
	fr, err := eng.Load(ctx, float)
	if err != nil {
		return nil, fmt.Errorf("the float model: %w", err)
	}
	defer fr.Close()
	qr, err := eng.Load(ctx, quant)
	if err != nil {
		return nil, fmt.Errorf("the quantized model: %w", err)
	}
	defer qr.Close()
	rep := &Report{Inputs: len(inputs)}
	byName := map[string]*OutputReport{}
	for k, in := range inputs {
		fo, err := fr.Run(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("input %d, float model: %w", k, err)
		}
		qo, err := qr.Run(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("input %d, quantized model: %w", k, err)
		}
		for _, name := range sortedNames(fo) {
			f, q := fo[name], qo[name]
			if f.DType != ir.Float32 {
				continue
			}
			if q == nil || q.DType != f.DType || !q.Shape.Equal(f.Shape) {
				return nil, fmt.Errorf("input %d: output %q of the quantized model does not match the float model's %s", k, name, f.Type())
			}
			o := byName[name]
			if o == nil {
				rep.Outputs = append(rep.Outputs, OutputReport{Name: name})
				o = &rep.Outputs[len(rep.Outputs)-1]
				byName[name] = o
			}
			o.add(f.Float32s(), q.Float32s(), f.Shape)
		}
	}
	return rep, nil
}

// add folds one output pair into the report.
func (o *OutputReport) add(f, q []float32, shape ir.Shape) {
	for i := range f {
		o.MaxAbs = math.Max(o.MaxAbs, math.Abs(float64(f[i])))
		d := math.Abs(float64(f[i]) - float64(q[i]))
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		o.MaxAbsErr = math.Max(o.MaxAbsErr, d)
	}
	if len(shape) == 0 || shape[len(shape)-1] < 2 {
		return
	}
	c := int(shape[len(shape)-1])
	for r := 0; r+c <= len(f); r += c {
		o.Rows++
		if argmax(f[r:r+c]) == argmax(q[r:r+c]) {
			o.Agree++
		}
	}
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}
