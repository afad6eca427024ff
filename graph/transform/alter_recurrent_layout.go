package transform

import (
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// AlterRecurrentLayout packs the constant weights of the recurrent layers
// (nn.rnn, nn.gru, nn.lstm) at compile time: W and R, when both are
// constants, become their packed form in blocks of op.RecurrentRowBlock
// rows (op.RecurrentPackedShape), the layout in which the CPU schedule
// (topi/nn_rnn.go) reads them. Unpacked, every call transposed both into
// scratch buffers first (2 MB of a 256-unit LSTM's weights per layer and
// call). The products and their order do not change, so neither do the
// results. Hidden sizes that no block of 2 or more rows divides keep
// their weights as they are. A weight shared by several calls is packed
// once.
func AlterRecurrentLayout(m *graph.Module) (*graph.Module, error) {
	done := map[*tensor.Tensor]*graph.Constant{}
	r := newBodyRewriter(func(e graph.Expr) (graph.Expr, error) {
		return alterRecurrent(e, done), nil
	})
	return mapModule(m, r.function)
}

func alterRecurrent(e graph.Expr, done map[*tensor.Tensor]*graph.Constant) graph.Expr {
	c, ok := e.(*graph.Call)
	if !ok || (c.Op != op.RNN && c.Op != op.GRU && c.Op != op.LSTM) || len(c.Args) < 3 {
		return e
	}
	w, wok := c.Args[1].(*graph.Constant)
	r, rok := c.Args[2].(*graph.Constant)
	if !wok || !rok || len(w.Value.Shape) != 3 || len(r.Value.Shape) != 3 {
		return e
	}
	rb := op.RecurrentRowBlock(c.Attrs.Int("hidden_size"))
	if rb < 2 {
		return e
	}
	pack := func(k *graph.Constant) *graph.Constant {
		if p := done[k.Value]; p != nil {
			return p
		}
		t, err := ref.PackRecurrentWeight(k.Value, rb)
		if err != nil {
			return nil
		}
		p := graph.NewConstant(t)
		done[k.Value] = p
		return p
	}
	pw, pr := pack(w), pack(r)
	if pw == nil || pr == nil {
		return e
	}
	args := append([]graph.Expr(nil), c.Args...)
	args[1], args[2] = pw, pr
	nc, err := graph.NewCall(c.Op, args, c.Attrs)
	if err != nil {
		return e
	}
	nc.Span = c.Span
	return nc
}
