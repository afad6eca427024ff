package onnx

import (
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/tensor"
)

// foldQDQ rewrites a QDQ model's node groups into quantized operators
// before conversion, so that the groups compute in integers:
//
//	DQ -> Conv -> [Relu|Clip] -> Q         QLinearConv [then Max/Min]
//	DQ -> MatMul -> [Relu|Clip] -> Q       QLinearMatMul
//	DQ -> Gemm -> [Relu|Clip] -> Q         QGemm (com.microsoft)
//	DQ -> Gemm (float output)              QGemm without y_scale
//	DQ -> Add -> [Relu|Clip] -> Q          QLinearAdd (com.microsoft)
//	DQ -> GlobalAveragePool -> Q           QLinearGlobalAveragePool
//	DQ -> Concat -> Q                      QLinearConcat
//	DQ -> MaxPool|Reshape|Flatten|Transpose|Squeeze|Unsqueeze -> Q
//	      with equal scale and zero point  the operator on the integers
//
// DQ is DequantizeLinear and Q QuantizeLinear with constant scales and
// zero points (per tensor; a weight's may be per channel). The operator's
// result must have the Q (or the activation) as its only reader and not
// be a graph output; the activation likewise. Relu and Clip become Max
// and Min with their bounds quantized, which is exact: QuantizeLinear is
// monotonic and maps 0 to the zero point. A Conv or Gemm bias given in
// float is quantized to int32 at input scale × weight scale. Groups that
// do not match stay as they are and compute in float. It reports whether
// it used com.microsoft operators.
func foldQDQ(g *pb.GraphProto, opset int64) (usedMS bool, err error) {
	f := newQDQFolder(g)
	f.opset = opset
	var out []*pb.NodeProto
	for i, n := range g.GetNode() {
		if f.removed[i] {
			continue
		}
		rep, err := f.fold(i, n)
		if err != nil {
			return false, err
		}
		if rep == nil {
			out = append(out, n)
			continue
		}
		out = append(out, rep...)
		for _, r := range rep {
			usedMS = usedMS || r.GetDomain() == msDomain
		}
	}
	g.Node = out
	g.Initializer = append(g.Initializer, f.inits...)
	return usedMS, nil
}

// qparam is a DequantizeLinear's or QuantizeLinear's constant parameters.
type qparam struct {
	q           string // the quantized tensor (a DQ's input)
	scale, zero string // their names
	s           *tensor.Tensor
	z           *tensor.Tensor // nil: absent (uint8 zero)
	axis        int64
}

func (p *qparam) perTensor() bool { return p.s.Len() == 1 && (p.z == nil || p.z.Len() == 1) }

// same says whether two per-tensor parameters are equal.
func (p *qparam) same(o *qparam) bool {
	if !p.perTensor() || !o.perTensor() || p.s.Float(0) != o.s.Float(0) {
		return false
	}
	pz, oz := p.z, o.z
	if pz == nil || oz == nil {
		return pz == nil && oz == nil
	}
	return pz.DType == oz.DType && pz.Int(0) == oz.Int(0)
}

type qdqFolder struct {
	g         *pb.GraphProto
	protos    map[string]*pb.TensorProto // initializers and Constant nodes' values, by name
	consts    map[string]*tensor.Tensor  // the ones decoded (konst), nil for those that fail
	producer  map[string]int
	consumers map[string]int
	reader    map[string]int // tensor -> the first node reading it
	outputs   map[string]bool
	removed   map[int]bool
	inits     []*pb.TensorProto
	names     map[string]bool
	opset     int64 // the model's default-domain opset
}

func newQDQFolder(g *pb.GraphProto) *qdqFolder {
	f := &qdqFolder{g: g, protos: map[string]*pb.TensorProto{}, consts: map[string]*tensor.Tensor{}, producer: map[string]int{}, consumers: map[string]int{}, reader: map[string]int{},
		outputs: map[string]bool{}, removed: map[int]bool{}, names: map[string]bool{}}
	for _, t := range g.GetInitializer() {
		f.names[t.GetName()] = true
		if t.GetDataLocation() != pb.TensorProto_EXTERNAL {
			f.protos[t.GetName()] = t
		}
	}
	for _, o := range g.GetOutput() {
		f.outputs[o.GetName()] = true
	}
	for i, n := range g.GetNode() {
		for _, o := range n.GetOutput() {
			f.producer[o] = i
			f.names[o] = true
		}
		for _, in := range n.GetInput() {
			f.consumers[in]++
			f.names[in] = true
			if _, seen := f.reader[in]; !seen {
				f.reader[in] = i
			}
		}
		if n.GetOpType() == "Constant" && n.GetDomain() == "" && len(n.GetOutput()) == 1 {
			for _, a := range n.GetAttribute() {
				if a.GetName() == "value" && a.GetT() != nil && a.GetT().GetDataLocation() != pb.TensorProto_EXTERNAL {
					f.protos[n.Output[0]] = a.GetT()
				}
			}
		}
		for _, a := range n.GetAttribute() { // names a subgraph reads count as read
			countSubgraphReads(a, f.consumers)
		}
	}
	return f
}

func countSubgraphReads(a *pb.AttributeProto, reads map[string]int) {
	gs := append([]*pb.GraphProto{}, a.GetGraphs()...)
	if a.GetG() != nil {
		gs = append(gs, a.GetG())
	}
	for _, g := range gs {
		for _, n := range g.GetNode() {
			for _, in := range n.GetInput() {
				reads[in]++
			}
			for _, b := range n.GetAttribute() {
				countSubgraphReads(b, reads)
			}
		}
	}
}

// konst returns a constant's value, decoding it the first time it is
// asked for (only scales, zero points, quantized weights and biases are:
// a model's float weights are never decoded here); nil when name is not
// a constant or does not decode.
func (f *qdqFolder) konst(name string) *tensor.Tensor {
	if v, ok := f.consts[name]; ok {
		return v
	}
	var v *tensor.Tensor
	if p := f.protos[name]; p != nil {
		if t, err := TensorFromProto(p); err == nil {
			v = t
		}
	}
	f.consts[name] = v
	return v
}

// node returns the node producing a tensor if it is an op of the default
// domain (nil otherwise).
func (f *qdqFolder) node(t, opType string) (int, *pb.NodeProto) {
	i, ok := f.producer[t]
	if !ok || f.removed[i] {
		return -1, nil
	}
	n := f.g.Node[i]
	if n.GetOpType() != opType || normDomain(n.GetDomain()) != "" {
		return -1, nil
	}
	return i, n
}

// params reads the constant parameters of a Q or DQ node.
func (f *qdqFolder) params(n *pb.NodeProto) *qparam {
	in := n.GetInput()
	if len(in) < 2 {
		return nil
	}
	p := &qparam{q: in[0], scale: in[1], s: f.konst(in[1]), axis: attrI(n, "axis", 1)}
	if p.s == nil || p.s.Len() == 0 || !p.s.DType.IsFloat() {
		return nil
	}
	for k := 0; k < p.s.Len(); k++ {
		if v := p.s.Float(k); !(v > 0) || math.IsInf(v, 0) {
			return nil
		}
	}
	if len(in) > 2 && in[2] != "" {
		p.zero, p.z = in[2], f.konst(in[2])
		if p.z == nil || (p.z.Len() != p.s.Len() && p.z.Len() != 1) {
			return nil
		}
	}
	return p
}

// dq returns the parameters of the DequantizeLinear producing t.
func (f *qdqFolder) dq(t string) *qparam {
	_, n := f.node(t, "DequantizeLinear")
	if n == nil {
		return nil
	}
	return f.params(n)
}

// soleReader returns the only node reading t (which is not a graph
// output), or -1.
func (f *qdqFolder) soleReader(t string) int {
	if f.outputs[t] || f.consumers[t] != 1 {
		return -1
	}
	if i, ok := f.reader[t]; ok {
		return i
	}
	return -1 // read by a subgraph only
}

// tail finds the QuantizeLinear after node i's output, through an
// optional Relu or constant Clip: the Q's index and parameters, the
// activation's index (-1 without one) and its bounds.
func (f *qdqFolder) tail(n *pb.NodeProto, allowAct bool) (qi int, qp *qparam, ai int, lo, hi float64) {
	lo, hi = math.Inf(-1), math.Inf(1)
	ai = -1
	if len(n.GetOutput()) != 1 {
		return -1, nil, -1, lo, hi
	}
	r := f.soleReader(n.Output[0])
	if r < 0 {
		return -1, nil, -1, lo, hi
	}
	rn := f.g.Node[r]
	if allowAct && normDomain(rn.GetDomain()) == "" {
		switch rn.GetOpType() {
		case "Relu":
			ai, lo = r, 0
		case "Clip":
			ok := true
			lo, hi, ok = f.clipBounds(rn)
			if ok {
				ai = r
			}
		}
		if ai >= 0 {
			if r = f.soleReader(rn.Output[0]); r < 0 {
				return -1, nil, -1, lo, hi
			}
			rn = f.g.Node[r]
		}
	}
	if rn.GetOpType() != "QuantizeLinear" || normDomain(rn.GetDomain()) != "" || rn.Input[0] != f.lastOut(n, ai) {
		return -1, nil, -1, lo, hi
	}
	qp = f.params(rn)
	if qp == nil || !qp.perTensor() {
		return -1, nil, -1, lo, hi
	}
	return r, qp, ai, lo, hi
}

func (f *qdqFolder) lastOut(n *pb.NodeProto, ai int) string {
	if ai >= 0 {
		return f.g.Node[ai].Output[0]
	}
	return n.Output[0]
}

// clipBounds reads a Clip's constant bounds (attributes before opset 11).
func (f *qdqFolder) clipBounds(n *pb.NodeProto) (float64, float64, bool) {
	lo, hi := math.Inf(-1), math.Inf(1)
	if len(n.GetInput()) == 1 {
		return attrF(n, "min", lo), attrF(n, "max", hi), true
	}
	for k, b := range []*float64{&lo, &hi} {
		if k+1 >= len(n.Input) || n.Input[k+1] == "" {
			continue
		}
		v := f.konst(n.Input[k+1])
		if v == nil || v.Len() != 1 || !v.DType.IsFloat() {
			return 0, 0, false
		}
		*b = v.Float(0)
	}
	return lo, hi, true
}

func attrI(n *pb.NodeProto, name string, def int64) int64 {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a.GetI()
		}
	}
	return def
}

func attrF(n *pb.NodeProto, name string, def float64) float64 {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return float64(a.GetF())
		}
	}
	return def
}

// fresh returns a tensor name not used in the graph.
func (f *qdqFolder) fresh(base string) string {
	s := base
	for k := 1; f.names[s]; k++ {
		s = fmt.Sprintf("%s_%d", base, k)
	}
	f.names[s] = true
	return s
}

// constant adds an initializer and returns its name.
func (f *qdqFolder) constant(base string, t *tensor.Tensor) string {
	name := f.fresh(base)
	f.inits = append(f.inits, TensorToProto(t, name))
	f.consts[name] = t
	return name
}

// fold returns the nodes replacing node i, or nil to keep it.
func (f *qdqFolder) fold(i int, n *pb.NodeProto) ([]*pb.NodeProto, error) {
	if normDomain(n.GetDomain()) != "" {
		return nil, nil
	}
	switch n.GetOpType() {
	case "Conv", "MatMul", "Add":
		return f.foldProduct(i, n)
	case "Gemm":
		return f.foldGemm(i, n)
	case "GlobalAveragePool", "Concat", "Softmax":
		return f.foldAggregate(i, n)
	case "MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze":
		return f.foldMove(i, n)
	}
	return nil, nil
}
