package onnx

import (
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// The folds of foldQDQ, one per operator family.

// mkNode makes a node named like the one it replaces.
func mkNode(like *pb.NodeProto, opType, domain string, in []string, out string, attrs []*pb.AttributeProto) *pb.NodeProto {
	n := &pb.NodeProto{OpType: proto.String(opType), Name: proto.String(like.GetName()), Input: in, Output: []string{out}, Attribute: attrs}
	if domain != "" {
		n.Domain = proto.String(domain)
	}
	return n
}

// complete says whether every parameter is present with a zero point.
func complete(ps ...*qparam) bool {
	for _, p := range ps {
		if p == nil || p.z == nil {
			return false
		}
	}
	return true
}

// finish removes the folded Q and activation and returns the nodes: the
// quantized op writing the Q's output, or an intermediate followed by Max
// and Min with the activation's bounds on the output grid.
func (f *qdqFolder) finish(op *pb.NodeProto, qi, ai int, qp *qparam, lo, hi float64) []*pb.NodeProto {
	f.removed[qi] = true
	out := f.g.Node[qi].Output[0]
	if ai < 0 {
		op.Output = []string{out}
		return []*pb.NodeProto{op}
	}
	f.removed[ai] = true
	nodes := []*pb.NodeProto{op}
	cur := f.fresh(out + "_unclamped")
	op.Output = []string{cur}
	qmin, qmax := -128.0, 127.0
	if qp.z.DType == ir.Uint8 {
		qmin, qmax = 0, 255
	}
	bound := func(v float64) *tensor.Tensor {
		q := math.RoundToEven(v/qp.s.Float(0)) + float64(qp.z.Int(0))
		t := tensor.New(qp.z.DType, nil)
		t.SetInt(0, int64(math.Min(math.Max(q, qmin), qmax)))
		return t
	}
	act := f.g.Node[ai]
	steps := []struct {
		op  string
		v   float64
		use bool
	}{{"Max", lo, !math.IsInf(lo, -1)}, {"Min", hi, !math.IsInf(hi, 1)}}
	for k, st := range steps {
		if !st.use {
			continue
		}
		next := out
		if k == 0 && steps[1].use {
			next = f.fresh(out + "_clamped_low")
		}
		nodes = append(nodes, mkNode(act, st.op, "", []string{cur, f.constant(act.GetName()+"_"+st.op, bound(st.v))}, next, nil))
		cur = next
	}
	if cur != out { // neither bound applies: Clip(-inf, inf)
		nodes = append(nodes, mkNode(act, "Identity", "", []string{cur}, out, nil))
	}
	return nodes
}

// bias returns the int32 bias input of a Conv or Gemm whose input scale
// is xs and weight scales ws: a DequantizeLinear of int32 at that scale,
// or a float constant quantized to it. ok is false when there is none
// usable; "" with ok when the node has no bias.
func (f *qdqFolder) bias(name string, xs float64, ws *tensor.Tensor, n int64) (string, bool) {
	if name == "" {
		return "", true
	}
	scale := func(c int) float64 { return float64(float32(xs) * float32(ws.Float(min(c, ws.Len()-1)))) }
	if p := f.dq(name); p != nil {
		q := f.konst(p.q)
		if q == nil || q.DType != ir.Int32 || len(q.Shape) != 1 || q.Shape[0] != n || (p.z != nil && p.z.Int(0) != 0) {
			return "", false
		}
		for c := 0; c < int(n); c++ {
			want := scale(c)
			if math.Abs(p.s.Float(min(c, p.s.Len()-1))-want) > 1e-6*want {
				return "", false
			}
		}
		return p.q, true
	}
	b := f.konst(name)
	if b == nil || b.DType != ir.Float32 || len(b.Shape) != 1 || b.Shape[0] != n {
		return "", false
	}
	q := tensor.New(ir.Int32, b.Shape)
	for c := 0; c < int(n); c++ {
		v := math.RoundToEven(b.Float(c) / scale(c))
		if !(math.Abs(v) <= math.MaxInt32) {
			return "", false
		}
		q.Int32s()[c] = int32(v)
	}
	return f.constant(name+"_int32", q), true
}

// foldProduct folds Conv, MatMul and Add between DequantizeLinear and
// QuantizeLinear.
func (f *qdqFolder) foldProduct(i int, n *pb.NodeProto) ([]*pb.NodeProto, error) {
	if len(n.GetInput()) < 2 {
		return nil, nil
	}
	x, w := f.dq(n.Input[0]), f.dq(n.Input[1])
	qi, qp, ai, lo, hi := f.tail(n, true)
	if qi < 0 || !complete(x, w, qp) || !x.perTensor() {
		return nil, nil
	}
	switch n.GetOpType() {
	case "Conv":
		wt := f.konst(w.q)
		// Grouped convolutions other than depthwise ones stay in float
		// until kiln has an integer kernel for them: the generic int32
		// compute is many times slower than the float grouped kernel.
		if g := attrI(n, "group", 1); g != 1 && (wt == nil || len(wt.Shape) < 2 || wt.Shape[0] != g || wt.Shape[1] != 1) {
			return nil, nil
		}
		if wt == nil || len(wt.Shape) < 3 || !(w.perTensor() || w.axis == 0 && int64(w.s.Len()) == wt.Shape[0]) {
			return nil, nil
		}
		in := []string{x.q, x.scale, x.zero, w.q, w.scale, w.zero, qp.scale, qp.zero}
		if len(n.Input) > 2 && n.Input[2] != "" {
			b, ok := f.bias(n.Input[2], x.s.Float(0), w.s, wt.Shape[0])
			if !ok {
				return nil, nil
			}
			in = append(in, b)
		}
		return f.finish(mkNode(n, "QLinearConv", "", in, "", n.Attribute), qi, ai, qp, lo, hi), nil
	case "MatMul":
		if wt := f.konst(w.q); !w.perTensor() && (wt == nil || len(wt.Shape) != 2 || (w.axis != 1 && w.axis != -1)) {
			return nil, nil
		}
		in := []string{x.q, x.scale, x.zero, w.q, w.scale, w.zero, qp.scale, qp.zero}
		return f.finish(mkNode(n, "QLinearMatMul", "", in, "", nil), qi, ai, qp, lo, hi), nil
	default: // Add
		if !w.perTensor() {
			return nil, nil
		}
		in := []string{x.q, x.scale, x.zero, w.q, w.scale, w.zero, qp.scale, qp.zero}
		return f.finish(mkNode(n, "QLinearAdd", msDomain, in, "", nil), qi, ai, qp, lo, hi), nil
	}
}

// foldGemm folds a Gemm with quantized inputs into QGemm, with a
// quantized output when a QuantizeLinear follows and a float one
// otherwise.
func (f *qdqFolder) foldGemm(i int, n *pb.NodeProto) ([]*pb.NodeProto, error) {
	if len(n.GetInput()) < 2 || attrF(n, "beta", 1) != 1 && len(n.Input) > 2 && n.Input[2] != "" {
		return nil, nil
	}
	x, w := f.dq(n.Input[0]), f.dq(n.Input[1])
	if !complete(x, w) || !x.perTensor() {
		return nil, nil
	}
	wt := f.konst(w.q)
	if wt == nil || len(wt.Shape) != 2 {
		return nil, nil
	}
	nAxis := int64(1)
	if attrI(n, "transB", 0) != 0 {
		nAxis = 0
	}
	if !w.perTensor() && (w.axis != nAxis || int64(w.s.Len()) != wt.Shape[nAxis]) {
		return nil, nil
	}
	bias := ""
	if len(n.Input) > 2 && n.Input[2] != "" {
		var ok bool
		if bias, ok = f.bias(n.Input[2], x.s.Float(0)*attrF(n, "alpha", 1), w.s, wt.Shape[nAxis]); !ok {
			return nil, nil
		}
	}
	var attrs []*pb.AttributeProto
	for _, a := range n.GetAttribute() {
		if a.GetName() != "beta" {
			attrs = append(attrs, a)
		}
	}
	in := []string{x.q, x.scale, x.zero, w.q, w.scale, w.zero, bias}
	qi, qp, ai, lo, hi := f.tail(n, true)
	if qi >= 0 && complete(qp) {
		in = append(in, qp.scale, qp.zero)
		return f.finish(mkNode(n, "QGemm", msDomain, in, "", attrs), qi, ai, qp, lo, hi), nil
	}
	if bias == "" {
		in = in[:6]
	}
	return []*pb.NodeProto{mkNode(n, "QGemm", msDomain, in, n.Output[0], attrs)}, nil
}

// foldAggregate folds GlobalAveragePool, Concat and Softmax.
func (f *qdqFolder) foldAggregate(i int, n *pb.NodeProto) ([]*pb.NodeProto, error) {
	qi, qp, _, _, _ := f.tail(n, false)
	if qi < 0 || !complete(qp) || len(n.GetInput()) == 0 {
		return nil, nil
	}
	var xs []*qparam
	for _, in := range n.Input {
		x := f.dq(in)
		if !complete(x) || !x.perTensor() || x.z.DType != qp.z.DType {
			return nil, nil
		}
		xs = append(xs, x)
	}
	switch n.GetOpType() {
	case "GlobalAveragePool":
		x := xs[0]
		in := []string{x.q, x.scale, x.zero, qp.scale, qp.zero}
		return f.finish(mkNode(n, "QLinearGlobalAveragePool", msDomain, in, "", nil), qi, -1, qp, 0, 0), nil
	case "Softmax":
		// QLinearSoftmax takes the axis and the opset whose Softmax
		// semantics apply (before 13: over the dimensions from axis on,
		// flattened; default axis 1).
		x := xs[0]
		attrs := []*pb.AttributeProto{{Name: proto.String("opset"), Type: pb.AttributeProto_INT.Enum(), I: proto.Int64(f.opset)}}
		for _, a := range n.Attribute {
			if a.GetName() == "axis" {
				attrs = append(attrs, a)
			}
		}
		in := []string{x.q, x.scale, x.zero, qp.scale, qp.zero}
		return f.finish(mkNode(n, "QLinearSoftmax", msDomain, in, "", attrs), qi, -1, qp, 0, 0), nil
	}
	in := []string{qp.scale, qp.zero}
	for _, x := range xs {
		in = append(in, x.q, x.scale, x.zero)
	}
	return f.finish(mkNode(n, "QLinearConcat", msDomain, in, "", n.Attribute), qi, -1, qp, 0, 0), nil
}

// foldMove runs max pooling and data movement on the integers when the
// input and output are quantized alike: then Q(op(DQ(x))) is op(x).
func (f *qdqFolder) foldMove(i int, n *pb.NodeProto) ([]*pb.NodeProto, error) {
	if len(n.GetInput()) == 0 || len(n.GetOutput()) != 1 {
		return nil, nil
	}
	x := f.dq(n.Input[0])
	qi, qp, _, _, _ := f.tail(n, false)
	if qi < 0 || x == nil || !x.same(qp) {
		return nil, nil
	}
	in := append([]string{x.q}, n.Input[1:]...)
	return f.finish(mkNode(n, n.GetOpType(), "", in, "", n.Attribute), qi, -1, qp, 0, 0), nil
}
