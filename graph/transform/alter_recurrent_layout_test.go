package transform

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// recurrentModule builds main(x, h[, c]) computing one layer per weight
// pair in ws (all reading x and the same states), returning their
// results: hidden size hs, dirs directions, seq steps of batch rows of in
// features; W and R are the given constants, the other parameters random
// constants.
func recurrentModule(t *testing.T, o *op.Op, hs, dirs, seq, batch, in int64, attrs ir.Attrs, ws [][2]graph.Expr) *graph.Module {
	t.Helper()
	rng := rand.New(rand.NewSource(3))
	gates := map[*op.Op]int64{op.RNN: 1, op.GRU: 3, op.LSTM: 4}[o]
	x := graph.NewVar("x", ir.NewTensorType(ir.Float32, ir.Shape{seq, batch, in}))
	h := graph.NewVar("h", ir.NewTensorType(ir.Float32, ir.Shape{dirs, batch, hs}))
	params := []*graph.Var{x, h}
	lens := tensor.New(ir.Int32, ir.Shape{batch})
	for i := 0; i < int(batch); i++ {
		lens.SetInt(i, seq-int64(i)%seq)
	}
	a := ir.Attrs{"hidden_size": hs}
	if dirs == 2 {
		a["direction"] = "bidirectional"
	}
	for k, v := range attrs {
		a[k] = v
	}
	var outs []graph.Expr
	for _, w := range ws {
		args := []graph.Expr{x, w[0], w[1], randomConstant(rng, dirs, 2*gates*hs), graph.NewConstant(lens), h}
		if o == op.LSTM {
			if len(params) == 2 {
				params = append(params, graph.NewVar("c", ir.NewTensorType(ir.Float32, ir.Shape{dirs, batch, hs})))
			}
			args = append(args, params[2], randomConstant(rng, dirs, 3*hs))
		}
		full, err := o.MakeAttrs(a)
		if err != nil {
			t.Fatal(err)
		}
		c, err := graph.NewCall(o, args, full)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, c)
	}
	m := graph.NewModule(graph.NewFunction(params, graph.NewTuple(outs), nil))
	if err := graph.InferTypes(m); err != nil {
		t.Fatal(err)
	}
	return m
}

// randomConstant is a float32 constant of shape with values in [-1, 1).
func randomConstant(rng *rand.Rand, shape ...int64) *graph.Constant {
	v := tensor.New(ir.Float32, ir.Shape(shape))
	for i := range v.Float32s() {
		v.Float32s()[i] = float32(rng.Float64()*2 - 1)
	}
	return graph.NewConstant(v)
}

// recurrentCalls lists main's recurrent-layer calls in evaluation order.
func recurrentCalls(m *graph.Module) []*graph.Call {
	var out []*graph.Call
	graph.PostOrder(m.Main().Body, func(e graph.Expr) {
		if c, ok := e.(*graph.Call); ok && (c.Op == op.RNN || c.Op == op.GRU || c.Op == op.LSTM) {
			out = append(out, c)
		}
	})
	return out
}

func TestAlterRecurrentLayout(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	weights := func(dirs, gates, hs, in int64) [2]graph.Expr {
		return [2]graph.Expr{randomConstant(rng, dirs, gates*hs, in), randomConstant(rng, dirs, gates*hs, hs)}
	}
	cases := []struct {
		name         string
		o            *op.Op
		hs, dirs, in int64
		attrs        ir.Attrs
		rb           int64 // 0: not packed
	}{
		{"lstm 16 units", op.LSTM, 16, 1, 5, nil, 16},
		{"gru bidirectional 12 units", op.GRU, 12, 2, 3, nil, 4},
		{"gru linear before reset 8 units", op.GRU, 8, 1, 2, ir.Attrs{"linear_before_reset": true}, 8},
		{"rnn 6 units", op.RNN, 6, 1, 4, nil, 2},
		{"rnn 3 units stays", op.RNN, 3, 1, 4, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gates := map[*op.Op]int64{op.RNN: 1, op.GRU: 3, op.LSTM: 4}[c.o]
			m := recurrentModule(t, c.o, c.hs, c.dirs, 3, 2, c.in, c.attrs, [][2]graph.Expr{weights(c.dirs, gates, c.hs, c.in)})
			before := text(t, m)
			got, err := AlterRecurrentLayout(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := Verify(got); err != nil {
				t.Fatal(err)
			}
			if text(t, m) != before {
				t.Errorf("AlterRecurrentLayout modified its input")
			}
			calls := recurrentCalls(got)
			if len(calls) != 1 {
				t.Fatalf("%d recurrent calls, want 1", len(calls))
			}
			for i, cols := range map[int]int64{1: c.in, 2: c.hs} {
				want := ir.Shape{c.dirs, gates * c.hs, cols}
				if c.rb > 0 {
					want = ir.Shape{c.dirs, gates * c.hs / c.rb, cols, c.rb}
				}
				k, ok := calls[0].Args[i].(*graph.Constant)
				if !ok || !k.Value.Shape.Equal(want) {
					t.Errorf("argument %d is %s, want a constant of shape %v", i, calls[0].Args[i].Type(), want)
				}
			}
			args := randomArgs(t, m, 4)
			sameBits(t, c.name, run(t, got, args), run(t, m, args))
		})
	}
}

// TestAlterRecurrentLayoutValues checks the packed order itself: element
// [d, jb, i, jv] is the weight's row jb*rb + jv, column i.
func TestAlterRecurrentLayoutValues(t *testing.T) {
	w := tensor.New(ir.Float32, ir.Shape{1, 8, 2}) // rows j, columns i: 2j + i
	r := tensor.New(ir.Float32, ir.Shape{1, 8, 2})
	for i := range w.Float32s() {
		w.Float32s()[i] = float32(i)
		r.Float32s()[i] = float32(-i)
	}
	m := recurrentModule(t, op.LSTM, 2, 1, 2, 1, 2, nil, [][2]graph.Expr{{graph.NewConstant(w), graph.NewConstant(r)}})
	got, err := AlterRecurrentLayout(m)
	if err != nil {
		t.Fatal(err)
	}
	pw := recurrentCalls(got)[0].Args[1].(*graph.Constant).Value
	want := []float32{0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15}
	if !pw.Shape.Equal(ir.Shape{1, 4, 2, 2}) || !slices.Equal(pw.Float32s(), want) {
		t.Errorf("packed W %v %v, want [1 4 2 2] %v", pw.Shape, pw.Float32s(), want)
	}
}

// Weights that are not constants stay, and so does R when W is not
// constant; a constant shared by two layers is packed once.
func TestAlterRecurrentLayoutVariableAndShared(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	x := graph.NewVar("x", ir.NewTensorType(ir.Float32, ir.Shape{3, 1, 3}))
	h := graph.NewVar("h", ir.NewTensorType(ir.Float32, ir.Shape{1, 1, 2}))
	wv := graph.NewVar("w", ir.NewTensorType(ir.Float32, ir.Shape{1, 6, 3}))
	full, err := op.GRU.MakeAttrs(ir.Attrs{"hidden_size": int64(2)})
	if err != nil {
		t.Fatal(err)
	}
	lens := tensor.New(ir.Int32, ir.Shape{1})
	lens.SetInt(0, 3)
	b, w, r := randomConstant(rng, 1, 12), randomConstant(rng, 1, 6, 3), randomConstant(rng, 1, 6, 2)
	call := func(w graph.Expr) graph.Expr {
		c, err := graph.NewCall(op.GRU, []graph.Expr{x, w, r, b, graph.NewConstant(lens), h}, full)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	m := graph.NewModule(graph.NewFunction([]*graph.Var{x, h, wv}, graph.NewTuple([]graph.Expr{call(w), call(w), call(wv)}), nil))
	if err := graph.InferTypes(m); err != nil {
		t.Fatal(err)
	}
	got, err := AlterRecurrentLayout(m)
	if err != nil {
		t.Fatal(err)
	}
	calls := recurrentCalls(got)
	if len(calls) != 3 {
		t.Fatalf("%d recurrent calls, want 3", len(calls))
	}
	pw, ok := calls[0].Args[1].(*graph.Constant)
	if !ok || len(pw.Value.Shape) != 4 || calls[1].Args[1] != pw || calls[1].Args[2] != calls[0].Args[2] {
		t.Errorf("shared weights: %s and %s, want one packed constant", calls[0].Args[1].Type(), calls[1].Args[1].Type())
	}
	if calls[2].Args[1] != wv || calls[2].Args[2] != r {
		t.Errorf("a variable W: got W %s, R %s, want both as they were", calls[2].Args[1].Type(), calls[2].Args[2].Type())
	}
	args := randomArgs(t, m, 6)
	sameBits(t, "shared", run(t, got, args), run(t, m, args))
}
