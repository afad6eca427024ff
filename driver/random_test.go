package driver

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// graphGen builds random, well-typed float32 graphs out of the operators
// real models use, for the differential test of the whole compiler.
type graphGen struct {
	rng  *rand.Rand
	vals []graph.Expr
	ops  []string
}

func (g *graphGen) randTensor(shape ir.Shape, scale float64) *tensor.Tensor {
	t := tensor.New(ir.Float32, shape)
	for i := range t.Float32s() {
		t.Float32s()[i] = float32((g.rng.Float64()*2 - 1) * scale)
	}
	return t
}

func (g *graphGen) call(o *op.Op, args []graph.Expr, attrs ir.Attrs) (graph.Expr, bool) {
	c, err := graph.NewCall(o, args, attrs)
	if err != nil {
		return nil, false
	}
	if _, err := graph.InferExpr(nil, c); err != nil {
		return nil, false // an ill-typed choice: try another
	}
	g.ops = append(g.ops, o.Name)
	return c, true
}

func shapeOf(e graph.Expr) ir.Shape { return e.Type().(*ir.TensorType).Shape }

// step adds one random operator applied to existing values.
func (g *graphGen) step() {
	x := g.vals[g.rng.Intn(len(g.vals))]
	s := shapeOf(x)
	var out graph.Expr
	ok := false
	switch g.rng.Intn(11) {
	case 0:
		unary := []*op.Op{op.Relu, op.Sigmoid, op.Tanh, op.Negative, op.Abs}
		out, ok = g.call(unary[g.rng.Intn(len(unary))], []graph.Expr{x}, nil)
	case 1:
		// binary with a value of the same shape, or a broadcast constant
		bin := []*op.Op{op.Add, op.Multiply, op.Subtract, op.Maximum}
		var y graph.Expr
		for _, v := range g.vals {
			if v != x && shapeOf(v).Equal(s) && g.rng.Intn(2) == 0 {
				y = v
			}
		}
		if y == nil {
			bs := make(ir.Shape, len(s))
			for i := range bs {
				bs[i] = 1
			}
			if len(s) >= 3 {
				bs[1] = s[1] // per-channel
			} else if len(s) > 0 {
				bs[len(s)-1] = s[len(s)-1]
			}
			y = graph.NewConstant(g.randTensor(bs, 1))
		}
		out, ok = g.call(bin[g.rng.Intn(len(bin))], []graph.Expr{x, y}, nil)
	case 2, 3:
		if len(s) != 4 {
			return
		}
		k := []int64{1, 3}[g.rng.Intn(2)]
		pad := k / 2
		stride := int64(1 + g.rng.Intn(2))
		oc := int64(2 + g.rng.Intn(5))
		groups := int64(1)
		if g.rng.Intn(4) == 0 {
			groups, oc = s[1], s[1] // depthwise
		}
		w := graph.NewConstant(g.randTensor(ir.Shape{oc, s[1] / groups, k, k}, 0.5))
		out, ok = g.call(op.Conv2D, []graph.Expr{x, w}, ir.Attrs{
			"strides": []int64{stride, stride}, "padding": []int64{pad, pad, pad, pad}, "groups": groups})
	case 4:
		if len(s) != 4 || s[2] < 2 || s[3] < 2 {
			return
		}
		pool := []*op.Op{op.MaxPool2D, op.AvgPool2D}[g.rng.Intn(2)]
		out, ok = g.call(pool, []graph.Expr{x}, ir.Attrs{"pool_size": []int64{2, 2}, "strides": []int64{2, 2}})
	case 5:
		// flatten then dense
		n := s.NumElements()
		if len(s) == 0 {
			return
		}
		flat, ok2 := g.call(op.Reshape, []graph.Expr{x}, ir.Attrs{"newshape": []int64{s[0], n / s[0]}})
		if !ok2 {
			return
		}
		units := int64(3 + g.rng.Intn(6))
		w := graph.NewConstant(g.randTensor(ir.Shape{units, n / s[0]}, 0.3))
		out, ok = g.call(op.Dense, []graph.Expr{flat, w}, nil)
	case 6:
		perm := g.rng.Perm(len(s))
		axes := make([]int64, len(perm))
		for i, p := range perm {
			axes[i] = int64(p)
		}
		out, ok = g.call(op.Transpose, []graph.Expr{x}, ir.Attrs{"axes": axes})
	case 7:
		if len(s) == 0 {
			return
		}
		ax := int64(g.rng.Intn(len(s)))
		red := []*op.Op{op.Sum, op.Max, op.Mean}[g.rng.Intn(3)]
		out, ok = g.call(red, []graph.Expr{x}, ir.Attrs{"axis": []int64{ax}, "keepdims": g.rng.Intn(2) == 0})
	case 8:
		if len(s) == 0 {
			return
		}
		out, ok = g.call(op.Softmax, []graph.Expr{x}, ir.Attrs{"axis": int64(g.rng.Intn(len(s)))})
	case 9:
		if len(s) == 0 {
			return
		}
		out, ok = g.call(op.Concatenate, []graph.Expr{x, x}, ir.Attrs{"axis": int64(g.rng.Intn(len(s)))})
	case 10:
		out, ok = g.call(op.Clip, []graph.Expr{x}, ir.Attrs{"a_min": -0.5, "a_max": 0.75})
	}
	if ok && shapeOf(out).NumElements() <= 4096 {
		g.vals = append(g.vals, out)
	}
}

// TestRandomGraphsCompiled compiles random graphs with the C target and
// compares every output with the reference executor on random inputs.
func TestRandomGraphsCompiled(t *testing.T) {
	testenv.Cgo(t)
	n := 24
	if testing.Short() {
		n = 6
	}
	for seed := 1; seed <= n; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			g := &graphGen{rng: rand.New(rand.NewSource(int64(seed)))}
			c := int64(2 + g.rng.Intn(3))
			h := int64(4 + g.rng.Intn(5))
			x := graph.NewVar("x", ir.NewTensorType(ir.Float32, ir.Shape{1, c, h, h}))
			g.vals = []graph.Expr{x}
			for i := 0; i < 8+g.rng.Intn(8); i++ {
				g.step()
			}
			// Outputs: the newest value and one other (a tuple), so that
			// shared intermediates and multiple outputs are exercised.
			last := g.vals[len(g.vals)-1]
			body := last
			if len(g.vals) > 2 {
				other := g.vals[1+g.rng.Intn(len(g.vals)-2)]
				body = graph.NewTuple([]graph.Expr{last, other})
			}
			mod := graph.NewModule(graph.NewFunction([]*graph.Var{x}, body, nil))
			if err := graph.InferTypes(mod); err != nil {
				t.Fatal(err)
			}
			input := g.randTensor(ir.Shape{1, c, h, h}, 2)
			want, err := ref.Run(mod, []*tensor.Tensor{input})
			if err != nil {
				t.Fatalf("reference: %v", err)
			}
			t.Logf("ops: %v", g.ops)
			res, err := Compile(mod, nil, Config{Host: hostTarget(t), Out: filepath.Join(t.TempDir(), "a")})
			if err != nil {
				t.Fatalf("compile %v: %v", g.ops, err)
			}
			art, err := LoadArtifact(res.Dir)
			if err != nil {
				t.Fatal(err)
			}
			got, err := art.Run(map[string]*tensor.Tensor{"x": input})
			if err != nil {
				t.Fatal(err)
			}
			ws := want.Flatten()
			for i := range ws {
				if err := tensor.AllClose(got[i], ws[i], 1e-4, 1e-5); err != nil {
					t.Errorf("ops %v: output %d: %v\n%s", g.ops, i, err, mod)
				}
			}
		})
	}
}
