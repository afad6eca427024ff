package quantize

import (
	"context"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// RefEngine runs models with kiln's reference engine: slow, for small
// models and tests.
type RefEngine struct{}

// Load imports a model.
func (RefEngine) Load(_ context.Context, data []byte) (Runner, error) {
	m, err := onnx.Load(data, onnx.Options{})
	if err != nil {
		return nil, err
	}
	return refRunner{m}, nil
}

type refRunner struct{ m *onnx.Model }

func (r refRunner) Run(ctx context.Context, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	argv := make([]*tensor.Tensor, len(r.m.Inputs))
	for i, in := range r.m.Inputs {
		argv[i] = inputs[in.Name]
	}
	res, err := ref.RunContext(ctx, r.m.Module, argv)
	if err != nil {
		return nil, err
	}
	outs := res.Flatten()
	m := make(map[string]*tensor.Tensor, len(outs))
	for i, o := range r.m.Outputs {
		if i < len(outs) {
			m[o.Name] = outs[i]
		}
	}
	return m, nil
}

func (refRunner) Close() error { return nil }
