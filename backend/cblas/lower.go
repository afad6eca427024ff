package cblas

import (
	"fmt"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
)

// relayToTIR is the kind's RelayToTIR hook: every function the target
// owns becomes a PrimFunc of sgemm calls and elementwise loops (see
// Lower), and its calls become calls of that PrimFunc. Constants of a
// function are lifted into parameters first, and its calls pass them as
// arguments, so that they become graph parameters (params.bin) like the
// host's weights.
func relayToTIR(ctx *backend.HookContext, mod *graph.Module, prims *tir.Module) error {
	return backend.LowerOwnedFunctions(ctx, mod, prims, "cblas_const", func(symbol string, fn *graph.Function) (*tir.PrimFunc, error) {
		if err := check(fn); err != nil {
			return nil, fmt.Errorf("@%s: %w", symbol, err)
		}
		return Lower(symbol, fn)
	})
}

// check reports whether the hook can lower a prepared function (composites
// inlined, constants lifted into parameters).
func check(fn *graph.Function) error {
	for _, p := range fn.Params {
		if err := checkTensor(p.Type()); err != nil {
			return fmt.Errorf("parameter %%%s: %w", p.Name, err)
		}
	}
	return checkFunction(fn)
}

// gemm is the geometry of one matrix product as a (batch of) row-major
// cblas_sgemm calls: C[m, n] = op(A)[m, k] * op(B)[k, n].
type gemm struct {
	// batch is the output's batch shape; aBatch and bBatch are the
	// operands' batch shapes (right-aligned to batch, 1 where they
	// broadcast). All empty when one call does the whole product.
	batch, aBatch, bBatch ir.Shape
	m, n, k               int64
	transA, transB        bool
	lda, ldb, ldc         int64
	// aMat, bMat, cMat are the numbers of trailing dimensions of A, B
	// and C that form one matrix (the rest index the batch).
	aMat, bMat, cMat int
}

// gemmOf computes the sgemm geometry of an nn.dense or nn.matmul call.
func gemmOf(c *graph.Call) (*gemm, error) {
	at, ok1 := c.Args[0].Type().(*ir.TensorType)
	bt, ok2 := c.Args[1].Type().(*ir.TensorType)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("operands must be tensors")
	}
	a, b := at.Shape, bt.Shape
	if c.Op == op.Dense {
		// x[..., K] * w[N, K]^T: one product with M = the leading size.
		if len(a) < 1 || len(b) != 2 || a[len(a)-1] != b[1] {
			return nil, fmt.Errorf("operand shapes %v and %v", a, b)
		}
		k := b[1]
		m := a.NumElements() / k
		return &gemm{m: m, n: b[0], k: k, transB: true, lda: k, ldb: k, ldc: b[0], aMat: len(a), bMat: 2, cMat: len(a)}, nil
	}
	ta, _ := c.Attrs["transpose_a"].(bool)
	tb, _ := c.Attrs["transpose_b"].(bool)
	batch, m, k, n, out, err := op.MatMulShapes(a, b, ta, tb)
	if err != nil {
		return nil, err
	}
	g := &gemm{batch: batch, m: m, n: n, k: k, ldc: n, cMat: len(out) - len(batch)}
	if len(a) == 1 {
		g.aMat, g.lda = 1, k
	} else {
		g.aMat, g.aBatch, g.transA = 2, a[:len(a)-2].Clone(), ta
		g.lda = k
		if ta {
			g.lda = m
		}
	}
	if len(b) == 1 {
		// A vector is a [k, 1] column.
		g.bMat, g.ldb = 1, 1
	} else {
		g.bMat, g.bBatch, g.transB = 2, b[:len(b)-2].Clone(), tb
		g.ldb = n
		if tb {
			g.ldb = k
		}
	}
	// With one right-hand matrix and A not transposed, A's batch rows are
	// consecutive rows of one tall matrix: one call does every batch.
	if g.bBatch.NumElements() == 1 && !g.transA && g.aMat == 2 {
		g.m *= g.batch.NumElements()
		g.batch, g.aBatch, g.bBatch = nil, nil, nil
		g.aMat, g.bMat, g.cMat = len(a), len(b), len(out)
	}
	return g, nil
}

// elementwise reports whether the hook lowers op as a loop over its
// output (whose operands may share the output's buffer).
func elementwise(o *op.Op) bool {
	switch o {
	case op.Add, op.Subtract, op.Multiply, op.BiasAdd, op.Relu:
		return true
	}
	return false
}

// lowering is the state of Lower for one function.
type lowering struct {
	name  string
	buf   map[graph.Expr]*tir.Buffer
	stmts []tir.Stmt
	temps []*tir.Buffer
}

// Lower builds the PrimFunc of one cblas function (its body a dataflow of
// nn.dense, nn.matmul and the elementwise operators of checkFunction over
// its parameters, with no constants and no nested functions): buffers for
// the parameters then for the flattened results, one cblas_sgemm call per
// product (a loop nest of them over broadcast batch dimensions) and a
// loop nest per elementwise operator. An elementwise operator writes into
// the buffer of its single-use operand of the same shape, so a fused tail
// (bias add, relu) updates the product's result in place; other
// intermediates are allocated in the function.
func Lower(name string, fn *graph.Function) (*tir.PrimFunc, error) {
	if err := checkFunction(fn); err != nil {
		return nil, fmt.Errorf("@%s: %w", name, err)
	}
	pf := tir.NewPrimFunc(name)
	l := &lowering{name: name, buf: map[graph.Expr]*tir.Buffer{}}
	for i, p := range fn.Params {
		tt, ok := p.Type().(*ir.TensorType)
		if !ok {
			return nil, fmt.Errorf("@%s: parameter %%%s is not a tensor", name, p.Name)
		}
		if err := checkTensor(tt); err != nil {
			return nil, fmt.Errorf("@%s: parameter %%%s: %w", name, p.Name, err)
		}
		l.buf[p] = pf.AddBuffer(tir.NewBuffer(fmt.Sprintf("p%d", i), tt.DType, tt.Shape, tir.ScopeGlobal))
	}
	outs := []graph.Expr{fn.Body}
	if t, ok := fn.Body.(*graph.Tuple); ok {
		outs = t.Fields
	}
	// Destinations: outputs first, then (consumers before producers) the
	// in-place operands of elementwise operators, then temporaries.
	dest := map[graph.Expr]*tir.Buffer{}
	type copyOut struct {
		from graph.Expr
		to   *tir.Buffer
	}
	var copies []copyOut
	for i, o := range outs {
		tt := o.Type().(*ir.TensorType)
		ob := pf.AddBuffer(tir.NewBuffer(fmt.Sprintf("out%d", i), tt.DType, tt.Shape, tir.ScopeGlobal))
		if _, isCall := o.(*graph.Call); isCall && dest[o] == nil {
			dest[o] = ob
		} else {
			copies = append(copies, copyOut{o, ob})
		}
	}
	nodes := graph.Nodes(fn.Body)
	uses := map[graph.Expr]int{}
	for _, o := range outs {
		uses[o]++
	}
	for _, e := range nodes {
		if c, ok := e.(*graph.Call); ok {
			for _, a := range c.Args {
				uses[a]++
			}
		}
	}
	for i := len(nodes) - 1; i >= 0; i-- {
		c, ok := nodes[i].(*graph.Call)
		if !ok || dest[c] == nil || !elementwise(c.Op) {
			continue
		}
		shape := c.Type().(*ir.TensorType).Shape
		for _, a := range c.Args {
			if _, isCall := a.(*graph.Call); isCall && dest[a] == nil && uses[a] == 1 && a.Type().(*ir.TensorType).Shape.Equal(shape) {
				dest[a] = dest[c]
				break
			}
		}
	}
	for _, e := range nodes {
		c, ok := e.(*graph.Call)
		if !ok {
			continue
		}
		if dest[c] == nil {
			tt := c.Type().(*ir.TensorType)
			t := tir.NewBuffer(fmt.Sprintf("t%d", len(l.temps)), tt.DType, tt.Shape, tir.ScopeGlobal)
			l.temps = append(l.temps, t)
			dest[c] = t
		}
		l.buf[c] = dest[c]
		var err error
		if elementwise(c.Op) {
			err = l.elementwise(c)
		} else {
			err = l.gemm(c)
		}
		if err != nil {
			return nil, fmt.Errorf("@%s: %s: %w", name, graph.Describe(c), err)
		}
	}
	for _, cp := range copies {
		src := l.buf[cp.from]
		if src == nil {
			return nil, fmt.Errorf("@%s: result %s has no value", name, graph.Describe(cp.from))
		}
		l.stmts = append(l.stmts, loopNest(cp.to.Shape, func(idx []tir.PrimExpr) tir.Stmt {
			return tir.NewStore(cp.to, tir.NewLoad(src, idx...), idx...)
		}))
	}
	body := tir.Seq(l.stmts...)
	for i := len(l.temps) - 1; i >= 0; i-- {
		body = &tir.Allocate{Buffer: l.temps[i], Body: body}
	}
	pf.Body = body
	if err := tir.Verify(pf); err != nil {
		return nil, fmt.Errorf("cblas: @%s: %w", name, err)
	}
	return pf, nil
}

// loopNest builds serial loops over shape around body(indices).
func loopNest(shape ir.Shape, body func(idx []tir.PrimExpr) tir.Stmt) tir.Stmt {
	vars := make([]*tir.Var, len(shape))
	idx := make([]tir.PrimExpr, len(shape))
	for d := range shape {
		vars[d] = tir.NewVar(fmt.Sprintf("i%d", d), tir.Int32T)
		idx[d] = vars[d]
	}
	s := body(idx)
	for d := len(shape) - 1; d >= 0; d-- {
		s = tir.Loop(vars[d], shape[d], tir.Serial, s)
	}
	return s
}

// broadcastLoad reads operand b at output indices idx under NumPy
// broadcasting (b right-aligned, index 0 on its size-1 dimensions).
func broadcastLoad(b *tir.Buffer, idx []tir.PrimExpr) tir.PrimExpr {
	off := len(idx) - b.Rank()
	bi := make([]tir.PrimExpr, b.Rank())
	for j := range bi {
		if b.Shape[j] == 1 {
			bi[j] = tir.Idx(0)
		} else {
			bi[j] = idx[off+j]
		}
	}
	return tir.NewLoad(b, bi...)
}

// elementwise emits the loop nest of an elementwise operator.
func (l *lowering) elementwise(c *graph.Call) error {
	out := l.buf[c]
	args := make([]*tir.Buffer, len(c.Args))
	for i, a := range c.Args {
		if args[i] = l.buf[a]; args[i] == nil {
			return fmt.Errorf("argument %d has no value", i)
		}
	}
	var stmtErr error
	s := loopNest(out.Shape, func(idx []tir.PrimExpr) tir.Stmt {
		var v tir.PrimExpr
		switch c.Op {
		case op.Relu:
			v = tir.Max(broadcastLoad(args[0], idx), tir.Float32(0))
		case op.Add:
			v = tir.Add(broadcastLoad(args[0], idx), broadcastLoad(args[1], idx))
		case op.Subtract:
			v = tir.Sub(broadcastLoad(args[0], idx), broadcastLoad(args[1], idx))
		case op.Multiply:
			v = tir.Mul(broadcastLoad(args[0], idx), broadcastLoad(args[1], idx))
		case op.BiasAdd:
			axis, ok := c.Attrs["axis"].(int64)
			if !ok {
				axis = 1 // the operator's default
			}
			given := axis
			if axis < 0 {
				axis += int64(len(idx))
			}
			if axis < 0 || axis >= int64(len(idx)) || args[1].Rank() != 1 {
				stmtErr = fmt.Errorf("bias of shape %v on axis %d of %v", args[1].Shape, given, out.Shape)
				return tir.NoOp()
			}
			v = tir.Add(broadcastLoad(args[0], idx), tir.NewLoad(args[1], idx[axis]))
		default:
			stmtErr = fmt.Errorf("not an elementwise operator")
			return tir.NoOp()
		}
		return tir.NewStore(out, v, idx...)
	})
	if stmtErr != nil {
		return stmtErr
	}
	l.stmts = append(l.stmts, s)
	return nil
}

// gemm emits the cblas_sgemm call(s) of nn.dense or nn.matmul.
func (l *lowering) gemm(c *graph.Call) error {
	g, err := gemmOf(c)
	if err != nil {
		return err
	}
	a, b, out := l.buf[c.Args[0]], l.buf[c.Args[1]], l.buf[c]
	if a == nil || b == nil {
		return fmt.Errorf("operand has no value")
	}
	vars := make([]*tir.Var, len(g.batch))
	for d := range vars {
		vars[d] = tir.NewVar(fmt.Sprintf("b%d", d), tir.Int32T)
	}
	// ptr is the address of the first element of the matrix of buffer buf
	// (batch shape bs, mat trailing matrix dimensions) for the current
	// batch indices.
	ptr := func(buf *tir.Buffer, bs ir.Shape, mat int) tir.PrimExpr {
		if len(vars) == 0 {
			return buf.Data
		}
		var idx []tir.PrimExpr
		off := len(vars) - len(bs)
		for j, n := range bs {
			if n == 1 {
				idx = append(idx, tir.Idx(0))
			} else {
				idx = append(idx, vars[off+j])
			}
		}
		for i := 0; i < mat; i++ {
			idx = append(idx, tir.Idx(0))
		}
		return tir.AddressOf(tir.NewLoad(buf, idx...))
	}
	transFlag := func(t bool) int64 {
		if t {
			return trans
		}
		return noTrans
	}
	var s tir.Stmt = tir.Eval(tir.CallExternOf(tir.Void, "cblas_sgemm",
		tir.Int32(rowMajor), tir.Int32(transFlag(g.transA)), tir.Int32(transFlag(g.transB)),
		tir.Int32(g.m), tir.Int32(g.n), tir.Int32(g.k),
		tir.Float32(1), ptr(a, g.aBatch, g.aMat), tir.Int32(g.lda),
		ptr(b, g.bBatch, g.bMat), tir.Int32(g.ldb),
		tir.Float32(0), ptr(out, g.batch, g.cMat), tir.Int32(g.ldc)))
	for d := len(vars) - 1; d >= 0; d-- {
		s = tir.Loop(vars[d], g.batch[d], tir.Serial, s)
	}
	l.stmts = append(l.stmts, s)
	return nil
}
