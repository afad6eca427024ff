package onnx

import (
	"fmt"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Control flow. kiln's graph IR has no control flow, so If is inlined when
// its condition is known at compile time (or turned into a select when both
// branches give the same types), and Loop and Scan are unrolled when their
// trip counts are known.

// maxUnroll bounds the iterations of an unrolled Loop or Scan.
const maxUnroll = 4096

func init() {
	register("If", 1, convertIf)
	register("Loop", 1, convertLoop)
	register("Scan", 8, convertScan8)
	register("Scan", 9, convertScan9)
}

// graphAttr returns a required graph attribute.
func graphAttr(n *Node, name string) (*pb.GraphProto, error) {
	a, ok := n.attr(name)
	if !ok {
		return nil, n.Errorf("attribute %s is missing", name)
	}
	g, ok := a.Graph.(*pb.GraphProto)
	if a.Type != AttrGraph || !ok || g == nil {
		return nil, n.Errorf("attribute %s is not a graph", name)
	}
	return g, nil
}

// graphOp finds a graph operator by name, for the ops control flow is
// rewritten into.
func graphOp(n *Node, name string) (*op.Op, error) {
	o, ok := op.Lookup(name)
	if !ok {
		return nil, n.Errorf("kiln has no %s operator, which %s needs", name, n.OpType)
	}
	return o, nil
}

// scalarBool reads a one-element tensor as a condition.
func scalarBool(n *Node, t *tensor.Tensor, what string) (bool, error) {
	if t.Len() != 1 {
		return false, n.Errorf("%s must hold one element, it has shape %v", what, t.Shape)
	}
	return t.Float(0) != 0, nil
}

// scalarInt reads a one-element integer tensor.
func scalarInt(n *Node, t *tensor.Tensor, what string) (int64, error) {
	if t.Len() != 1 {
		return 0, n.Errorf("%s must hold one element, it has shape %v", what, t.Shape)
	}
	return t.Int(0), nil
}

// convertIf inlines the branch a constant condition selects. With a
// run-time condition both branches are imported and each output becomes
// where(cond, then, else), which needs equal output types.
func convertIf(c *Ctx, n *Node) ([]graph.Expr, error) {
	thenG, err := graphAttr(n, "then_branch")
	if err != nil {
		return nil, err
	}
	elseG, err := graphAttr(n, "else_branch")
	if err != nil {
		return nil, err
	}
	if len(thenG.GetOutput()) != len(elseG.GetOutput()) {
		return nil, n.Errorf("branches have %d and %d outputs", len(thenG.GetOutput()), len(elseG.GetOutput()))
	}
	cond := n.Input(0)
	if cond == nil {
		return nil, n.Errorf("condition input is missing")
	}
	if t, constErr := c.Const(cond, "If condition"); constErr == nil {
		b, err := scalarBool(n, t, "If condition")
		if err != nil {
			return nil, err
		}
		branch := elseG
		if b {
			branch = thenG
		}
		return c.Subgraph(branch, nil)
	} else if err := selectable(c, cond); err != nil {
		return nil, fmt.Errorf("%w; %v", constErr, err)
	}
	where, err := graphOp(n, "where")
	if err != nil {
		return nil, err
	}
	thenOuts, err := c.Subgraph(thenG, nil)
	if err != nil {
		return nil, err
	}
	elseOuts, err := c.Subgraph(elseG, nil)
	if err != nil {
		return nil, err
	}
	outs := make([]graph.Expr, len(thenOuts))
	for i := range thenOuts {
		if !ir.TypeEqual(thenOuts[i].Type(), elseOuts[i].Type()) {
			return nil, n.Errorf("the condition is only known at run time and output %d has type %s in then_branch but %s in else_branch; kiln needs equal types to select between them", i, thenOuts[i].Type(), elseOuts[i].Type())
		}
		if outs[i], err = c.Call(where, []graph.Expr{cond, thenOuts[i], elseOuts[i]}, nil); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// selectable checks that a run-time If condition can drive a select: a
// rank-0 bool tensor (a [1]-shaped one would change the outputs' shapes).
func selectable(c *Ctx, cond graph.Expr) error {
	t, err := c.TensorType(cond)
	if err != nil {
		return err
	}
	if t.DType != ir.Bool || len(t.Shape) != 0 {
		return fmt.Errorf("a run-time condition must be a bool scalar to be turned into a select, it is %s", t)
	}
	return nil
}

// stack joins same-typed tensors along a new axis.
func stack(c *Ctx, n *Node, xs []graph.Expr, axis int64) (graph.Expr, error) {
	reshape, err := graphOp(n, "reshape")
	if err != nil {
		return nil, err
	}
	concat, err := graphOp(n, "concatenate")
	if err != nil {
		return nil, err
	}
	parts := make([]graph.Expr, len(xs))
	for i, x := range xs {
		t, err := c.TensorType(x)
		if err != nil {
			return nil, err
		}
		a := axis
		if a < 0 {
			a += int64(len(t.Shape)) + 1
		}
		if a < 0 || a > int64(len(t.Shape)) {
			return nil, n.Errorf("axis %d out of range for stacking rank-%d tensors", axis, len(t.Shape))
		}
		shape := make([]int64, 0, len(t.Shape)+1)
		shape = append(shape, t.Shape[:a]...)
		shape = append(shape, 1)
		shape = append(shape, t.Shape[a:]...)
		if parts[i], err = c.Call(reshape, []graph.Expr{x}, ir.Attrs{"newshape": shape}); err != nil {
			return nil, err
		}
		axis = a
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	return c.Call(concat, parts, ir.Attrs{"axis": axis})
}

// emptyStack is the result of stacking zero tensors of type t along axis 0.
func emptyStack(c *Ctx, t ir.Type) (graph.Expr, error) {
	x, ok := t.(*ir.TensorType)
	if !ok {
		return nil, c.node.Errorf("scan output is not a tensor (%v)", t)
	}
	return c.Constant(tensor.New(x.DType, append(ir.Shape{0}, x.Shape...))), nil
}

// convertLoop unrolls a Loop whose trip count (or condition, evaluated
// after every iteration) is known at compile time.
func convertLoop(c *Ctx, n *Node) ([]graph.Expr, error) {
	body, err := graphAttr(n, "body")
	if err != nil {
		return nil, err
	}
	var tripCount int64 = -1 // -1: unbounded
	if m := n.Input(0); m != nil {
		t, err := c.Const(m, "Loop trip count M (kiln unrolls loops)")
		if err != nil {
			return nil, err
		}
		if tripCount, err = scalarInt(n, t, "trip count M"); err != nil {
			return nil, err
		}
		if tripCount < 0 {
			tripCount = 0
		}
	}
	keep := true
	if cnd := n.Input(1); cnd != nil {
		t, err := c.Const(cnd, "Loop condition (kiln unrolls loops)")
		if err != nil {
			return nil, err
		}
		if keep, err = scalarBool(n, t, "Loop condition"); err != nil {
			return nil, err
		}
	} else if n.Input(0) == nil {
		return nil, n.Errorf("Loop has neither a trip count nor a condition: it never ends")
	}
	var carried []graph.Expr
	if len(n.Inputs) > 2 {
		carried = append(carried, n.Inputs[2:]...)
	}
	for i, v := range carried {
		if v == nil {
			return nil, n.Errorf("loop-carried input %d is missing", i)
		}
	}
	nc := len(carried)
	if len(body.GetInput()) != 2+nc {
		return nil, n.Errorf("body takes %d inputs, Loop supplies %d (iteration, condition and %d carried values)", len(body.GetInput()), 2+nc, nc)
	}
	ns := len(body.GetOutput()) - 1 - nc
	if ns < 0 {
		return nil, n.Errorf("body has %d outputs, need at least %d (condition and %d carried values)", len(body.GetOutput()), 1+nc, nc)
	}
	scans := make([][]graph.Expr, ns)
	var scanTypes []ir.Type
	iters := int64(0)
	for ; keep && (tripCount < 0 || iters < tripCount); iters++ {
		if iters >= maxUnroll {
			return nil, n.Errorf("loop runs more than %d iterations; kiln unrolls loops and stops there", maxUnroll)
		}
		args := append([]graph.Expr{
			c.Constant(tensor.FromInt64s(ir.Shape{}, []int64{iters})),
			c.Constant(tensor.Scalar(ir.Bool, 1)),
		}, carried...)
		outs, err := c.Subgraph(body, args)
		if err != nil {
			return nil, err
		}
		ct, err := c.Const(outs[0], fmt.Sprintf("the condition computed by the Loop body in iteration %d (kiln unrolls loops)", iters))
		if err != nil {
			return nil, err
		}
		if keep, err = scalarBool(n, ct, "Loop body condition"); err != nil {
			return nil, err
		}
		carried = outs[1 : 1+nc]
		for k := range scans {
			scans[k] = append(scans[k], outs[1+nc+k])
		}
	}
	if iters == 0 && ns > 0 {
		// No iteration ran: import the body once only to learn the types of
		// the scan outputs, which are then empty.
		args := append([]graph.Expr{
			c.Constant(tensor.FromInt64s(ir.Shape{}, []int64{0})),
			c.Constant(tensor.Scalar(ir.Bool, 1)),
		}, carried...)
		outs, err := c.Subgraph(body, args)
		if err != nil {
			return nil, err
		}
		for k := 0; k < ns; k++ {
			scanTypes = append(scanTypes, outs[1+nc+k].Type())
		}
	}
	res := append([]graph.Expr{}, carried...)
	for k := range scans {
		var s graph.Expr
		var err error
		if len(scans[k]) == 0 {
			s, err = emptyStack(c, scanTypes[k])
		} else {
			s, err = stack(c, n, scans[k], 0)
		}
		if err != nil {
			return nil, err
		}
		res = append(res, s)
	}
	return res, nil
}

// scanAxes reads a per-input axis or direction list, defaulting to zeros.
func scanAxes(n *Node, name string, count int) ([]int64, error) {
	v := n.Ints(name, nil)
	if v == nil {
		return make([]int64, count), nil
	}
	if len(v) != count {
		return nil, n.Errorf("attribute %s has %d entries, want %d", name, len(v), count)
	}
	return v, nil
}

// scanSpec describes one Scan: the body and the per-input and per-output
// axes and directions.
type scanSpec struct {
	body             *pb.GraphProto
	inAxes, inDirs   []int64
	outAxes, outDirs []int64
}

// runScan unrolls a Scan over states and scan inputs (axis 0 already
// resolved per input in spec) and returns final states then scan outputs.
func runScan(c *Ctx, n *Node, spec *scanSpec, states, ins []graph.Expr) ([]graph.Expr, error) {
	take, err := graphOp(n, "take")
	if err != nil {
		return nil, err
	}
	ns, ni := len(states), len(ins)
	if len(spec.body.GetInput()) != ns+ni {
		return nil, n.Errorf("body takes %d inputs, Scan supplies %d", len(spec.body.GetInput()), ns+ni)
	}
	nk := len(spec.body.GetOutput()) - ns
	if nk < 0 {
		return nil, n.Errorf("body has %d outputs, fewer than the %d states", len(spec.body.GetOutput()), ns)
	}
	if len(spec.outAxes) == 0 {
		spec.outAxes = make([]int64, nk)
	}
	if len(spec.outDirs) == 0 {
		spec.outDirs = make([]int64, nk)
	}
	if len(spec.outAxes) != nk || len(spec.outDirs) != nk {
		return nil, n.Errorf("scan output axes/directions have %d/%d entries for %d scan outputs", len(spec.outAxes), len(spec.outDirs), nk)
	}
	seqLen := int64(-1)
	axes := make([]int64, ni)
	for j, x := range ins {
		t, err := c.TensorType(x)
		if err != nil {
			return nil, err
		}
		a := spec.inAxes[j]
		if a < 0 {
			a += int64(len(t.Shape))
		}
		if a < 0 || a >= int64(len(t.Shape)) {
			return nil, n.Errorf("scan input %d: axis %d out of range for rank %d", j, spec.inAxes[j], len(t.Shape))
		}
		axes[j] = a
		if seqLen >= 0 && t.Shape[a] != seqLen {
			return nil, n.Errorf("scan inputs have different sequence lengths (%d and %d)", seqLen, t.Shape[a])
		}
		seqLen = t.Shape[a]
	}
	if seqLen <= 0 {
		return nil, n.Errorf("Scan over an empty sequence (or without scan inputs) is unsupported")
	}
	if seqLen > maxUnroll {
		return nil, n.Errorf("sequence length %d exceeds kiln's unroll limit %d", seqLen, maxUnroll)
	}
	scans := make([][]graph.Expr, nk)
	for step := int64(0); step < seqLen; step++ {
		args := append([]graph.Expr{}, states...)
		for j, x := range ins {
			idx := step
			if spec.inDirs[j] != 0 {
				idx = seqLen - 1 - step
			}
			s, err := c.Call(take, []graph.Expr{x, c.Constant(tensor.FromInt64s(ir.Shape{}, []int64{idx}))}, ir.Attrs{"axis": axes[j]})
			if err != nil {
				return nil, err
			}
			args = append(args, s)
		}
		outs, err := c.Subgraph(spec.body, args)
		if err != nil {
			return nil, err
		}
		states = outs[:ns]
		for k := range scans {
			scans[k] = append(scans[k], outs[ns+k])
		}
	}
	res := append([]graph.Expr{}, states...)
	for k, xs := range scans {
		if spec.outDirs[k] != 0 {
			rev := make([]graph.Expr, len(xs))
			for i := range xs {
				rev[i] = xs[len(xs)-1-i]
			}
			xs = rev
		}
		s, err := stack(c, n, xs, spec.outAxes[k])
		if err != nil {
			return nil, err
		}
		res = append(res, s)
	}
	return res, nil
}

// convertScan9 handles Scan from opset 9: no batch axis, per-input axes.
func convertScan9(c *Ctx, n *Node) ([]graph.Expr, error) {
	body, err := graphAttr(n, "body")
	if err != nil {
		return nil, err
	}
	m := n.Int("num_scan_inputs", -1)
	if m < 0 || m > int64(len(n.Inputs)) {
		return nil, n.Errorf("num_scan_inputs %d is invalid for %d inputs", m, len(n.Inputs))
	}
	split := len(n.Inputs) - int(m)
	for i, x := range n.Inputs {
		if x == nil {
			return nil, n.Errorf("input %d is missing", i)
		}
	}
	spec := &scanSpec{body: body}
	if spec.inAxes, err = scanAxes(n, "scan_input_axes", int(m)); err != nil {
		return nil, err
	}
	if spec.inDirs, err = scanAxes(n, "scan_input_directions", int(m)); err != nil {
		return nil, err
	}
	spec.outAxes = n.Ints("scan_output_axes", nil)
	spec.outDirs = n.Ints("scan_output_directions", nil)
	return runScan(c, n, spec, n.Inputs[:split], n.Inputs[split:])
}

// convertScan8 handles Scan-8: every input has a leading batch axis, scan
// inputs are scanned along axis 1, and sequence_lens (when given) must
// cover whole sequences.
func convertScan8(c *Ctx, n *Node) ([]graph.Expr, error) {
	body, err := graphAttr(n, "body")
	if err != nil {
		return nil, err
	}
	take, err := graphOp(n, "take")
	if err != nil {
		return nil, err
	}
	if len(n.Inputs) < 1 {
		return nil, n.Errorf("Scan needs inputs")
	}
	m := n.Int("num_scan_inputs", -1)
	rest := n.Inputs[1:]
	if m < 0 || m > int64(len(rest)) {
		return nil, n.Errorf("num_scan_inputs %d is invalid for %d inputs", m, len(rest))
	}
	for i, x := range rest {
		if x == nil {
			return nil, n.Errorf("input %d is missing", i+1)
		}
	}
	split := len(rest) - int(m)
	dirs, err := scanAxes(n, "directions", int(m))
	if err != nil {
		return nil, err
	}
	var batch int64 = -1
	for _, x := range rest {
		t, err := c.TensorType(x)
		if err != nil {
			return nil, err
		}
		if len(t.Shape) == 0 || (batch >= 0 && t.Shape[0] != batch) {
			return nil, n.Errorf("Scan-8 inputs need a common leading batch dimension")
		}
		batch = t.Shape[0]
	}
	if batch <= 0 {
		return nil, n.Errorf("Scan-8 with an empty batch is unsupported")
	}
	if sl := n.Input(0); sl != nil {
		lens, err := c.Const(sl, "Scan sequence_lens")
		if err != nil {
			return nil, err
		}
		for j := 0; j < int(m); j++ {
			t, _ := c.TensorType(rest[split+j])
			if len(t.Shape) < 2 {
				return nil, n.Errorf("scan input %d needs batch and sequence axes", j)
			}
			for i := 0; i < lens.Len(); i++ {
				if lens.Int(i) != t.Shape[1] {
					return nil, n.Errorf("sequence_lens shorter than the sequence axis are unsupported")
				}
			}
		}
	}
	perBatch := make([][]graph.Expr, batch)
	for b := int64(0); b < batch; b++ {
		idx := c.Constant(tensor.FromInt64s(ir.Shape{}, []int64{b}))
		sliced := make([]graph.Expr, len(rest))
		for i, x := range rest {
			if sliced[i], err = c.Call(take, []graph.Expr{x, idx}, ir.Attrs{"axis": int64(0)}); err != nil {
				return nil, err
			}
		}
		spec := &scanSpec{body: body, inAxes: make([]int64, m), inDirs: dirs}
		if perBatch[b], err = runScan(c, n, spec, sliced[:split], sliced[split:]); err != nil {
			return nil, err
		}
	}
	res := make([]graph.Expr, len(perBatch[0]))
	for k := range res {
		xs := make([]graph.Expr, batch)
		for b := range perBatch {
			xs[b] = perBatch[b][k]
		}
		if res[k], err = stack(c, n, xs, 0); err != nil {
			return nil, err
		}
	}
	return res, nil
}
