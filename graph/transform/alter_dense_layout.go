package transform

import (
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// AlterDenseLayout prepares constant matrix-product weights at compile
// time, as TVM's AlterOpLayout pre-packs dense weights. A float32
// nn.dense whose weight w[N, K] is a constant, and a float32 nn.matmul
// whose second operand b[K, N] is a constant matrix (no transposes), with
// data of rank >= 2, become nn.contrib_matmul_packed with the weight
// packed in column panels of 16 (8 when 16 does not divide N): the layout
// in which the CPU schedule (topi/dense_cpu.go) reads a register tile's
// columns contiguously. A dense whose N is not a multiple of 8 becomes
// nn.matmul with the weight transposed to [K, N]. The product is the same
// sum over k in the same order, so results do not change. A weight shared
// by several calls is packed once.
func AlterDenseLayout(m *graph.Module) (*graph.Module, error) {
	done := map[denseKey]*graph.Constant{}
	r := newBodyRewriter(func(e graph.Expr) (graph.Expr, error) {
		if _, err := graph.InferExpr(m, e); err != nil {
			return nil, err
		}
		out := alterDense(e, done)
		// Later rewrites read the types of their arguments.
		if _, err := graph.InferExpr(m, out); err != nil {
			return nil, err
		}
		return out, nil
	})
	return mapModule(m, r.function)
}

// denseKey identifies a prepared weight: the constant, and whether it was
// a dense weight (transposed) or a matmul operand.
type denseKey struct {
	w     *tensor.Tensor
	dense bool
}

func alterDense(e graph.Expr, done map[denseKey]*graph.Constant) graph.Expr {
	c, ok := e.(*graph.Call)
	if !ok || (c.Op != op.Dense && c.Op != op.MatMul) || len(c.Args) != 2 {
		return e
	}
	w, ok := c.Args[1].(*graph.Constant)
	if !ok || w.Value.DType != ir.Float32 || len(w.Value.Shape) != 2 {
		return e
	}
	xt, ok := c.Args[0].Type().(*ir.TensorType)
	if !ok || xt.DType != ir.Float32 || len(xt.Shape) < 2 {
		return e
	}
	dense := c.Op == op.Dense
	k, n := w.Value.Shape[0], w.Value.Shape[1]
	if dense {
		k, n = n, k
	} else if c.Attrs.Bool("transpose_a") || c.Attrs.Bool("transpose_b") {
		return e
	}
	if xt.Shape[len(xt.Shape)-1] != k {
		return e
	}
	b := convPackBlock(n) // panels of 16 columns, or 8
	if b == 0 && !dense {
		return e
	}
	key := denseKey{w.Value, dense}
	pw := done[key]
	if pw == nil {
		var t *tensor.Tensor
		var err error
		switch {
		case b == 0:
			t = transpose2D(w.Value)
		case dense:
			t, err = ref.PackTransposedMatMulWeight(w.Value, b)
		default:
			t, err = ref.PackMatMulWeight(w.Value, b)
		}
		if err != nil {
			return e
		}
		pw = graph.NewConstant(t)
		done[key] = pw
	}
	o := op.MatMulPacked
	if b == 0 {
		o = op.MatMul
	}
	nc, err := graph.NewCall(o, []graph.Expr{c.Args[0], pw}, ir.Attrs{})
	if err != nil {
		return e
	}
	nc.Span = c.Span
	return nc
}

// transpose2D returns the transpose of a float32 matrix.
func transpose2D(w *tensor.Tensor) *tensor.Tensor {
	n, k := int(w.Shape[0]), int(w.Shape[1])
	out := tensor.New(ir.Float32, ir.Shape{int64(k), int64(n)})
	src, dst := w.Float32s(), out.Float32s()
	for i := 0; i < n; i++ {
		for j := 0; j < k; j++ {
			dst[j*n+i] = src[i*k+j]
		}
	}
	return out
}
