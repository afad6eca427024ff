package quantize

import (
	"fmt"
	"math"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// qparams is one tensor's quantization: scales (one, or one per index of
// axis) and zero points of the quantized type.
type qparams struct {
	scales []float32
	zps    []int64
	dtype  ir.DType
	axis   int // -1: per tensor
}

// actParams returns the asymmetric parameters of an activation range for
// dt (int8 or uint8): the range is widened to hold 0, which then has an
// exact code.
func actParams(lo, hi float64, dt ir.DType) qparams {
	qmin, qmax := -128.0, 127.0
	if dt == ir.Uint8 {
		qmin, qmax = 0, 255
	}
	lo, hi = math.Min(lo, 0), math.Max(hi, 0)
	scale := float32((hi - lo) / (qmax - qmin))
	if !(scale > 0) || math.IsInf(float64(scale), 0) {
		return qparams{scales: []float32{1}, zps: []int64{int64(math.Max(qmin, 0))}, dtype: dt, axis: -1}
	}
	zp := math.RoundToEven(qmin - lo/float64(scale))
	zp = math.Min(math.Max(zp, qmin), qmax)
	return qparams{scales: []float32{scale}, zps: []int64{int64(zp)}, dtype: dt, axis: -1}
}

// weightParams quantizes a float weight to int8, symmetric in [-qmax,
// qmax] (127, or 64 for reduced range), with one scale per index of axis
// (or one, axis -1). A channel of zeros gets scale 1.
func weightParams(w *tensor.Tensor, axis int, qmax float64) (qparams, *tensor.Tensor) {
	v := w.Float32s()
	outer, n, inner := splitAxis(w.Shape, axis)
	maxAbs := make([]float64, n)
	for o := 0; o < outer; o++ {
		for c := 0; c < n; c++ {
			base := (o*n + c) * inner
			for _, f := range v[base : base+inner] {
				maxAbs[c] = math.Max(maxAbs[c], math.Abs(float64(f)))
			}
		}
	}
	qp := qparams{dtype: ir.Int8, axis: axis, scales: make([]float32, n), zps: make([]int64, n)}
	for c, m := range maxAbs {
		qp.scales[c] = float32(m / qmax)
		if !(qp.scales[c] > 0) || math.IsInf(float64(qp.scales[c]), 0) {
			qp.scales[c] = 1
		}
	}
	q := tensor.New(ir.Int8, w.Shape)
	for o := 0; o < outer; o++ {
		for c := 0; c < n; c++ {
			base := (o*n + c) * inner
			for k, f := range v[base : base+inner] {
				r := math.RoundToEven(float64(f / qp.scales[c]))
				q.Data[base+k] = byte(int8(math.Min(math.Max(r, -qmax), qmax)))
			}
		}
	}
	return qp, q
}

// splitAxis returns the element counts before, along and after axis (axis
// -1: the whole tensor is one channel).
func splitAxis(s ir.Shape, axis int) (outer, n, inner int) {
	if axis < 0 {
		return 1, 1, int(s.NumElements())
	}
	outer, inner = 1, 1
	for i, d := range s {
		switch {
		case i < axis:
			outer *= int(d)
		case i > axis:
			inner *= int(d)
		}
	}
	return outer, int(s[axis]), inner
}

// namer hands out tensor and node names not used in the graph.
type namer struct{ used map[string]bool }

func newNamer(g *pb.GraphProto) *namer {
	u := map[string]bool{}
	for _, n := range g.GetNode() {
		u[n.GetName()] = true
		for _, s := range append(append([]string{}, n.GetInput()...), n.GetOutput()...) {
			u[s] = true
		}
	}
	for _, t := range g.GetInitializer() {
		u[t.GetName()] = true
	}
	for _, v := range append(append(append([]*pb.ValueInfoProto{}, g.GetInput()...), g.GetOutput()...), g.GetValueInfo()...) {
		u[v.GetName()] = true
	}
	return &namer{used: u}
}

func (n *namer) name(base string) string {
	s := base
	for k := 1; n.used[s]; k++ {
		s = base + "_" + strconv.Itoa(k)
	}
	n.used[s] = true
	return s
}

// rewriter builds the QDQ graph.
type rewriter struct {
	x      *index
	names  *namer
	inits  []*pb.TensorProto
	consts []*pb.NodeProto      // DequantizeLinear of weights, first in the graph
	q      map[string][3]string // activation -> its QuantizeLinear's output, scale, zero point
	params map[string]qparams
}

// scalarOrVector makes the scale and zero-point initializers of qp.
func (r *rewriter) paramInits(base string, qp qparams) (scale, zp string) {
	scale, zp = r.names.name(base+"_scale"), r.names.name(base+"_zero_point")
	var st, zt *tensor.Tensor
	shape := ir.Shape{}
	if qp.axis >= 0 {
		shape = ir.Shape{int64(len(qp.scales))}
	}
	st = tensor.New(ir.Float32, shape)
	copy(st.Float32s(), qp.scales)
	zt = tensor.New(qp.dtype, shape)
	for i, z := range qp.zps {
		zt.SetInt(i, z)
	}
	r.inits = append(r.inits, onnx.TensorToProto(st, scale), onnx.TensorToProto(zt, zp))
	return scale, zp
}

// pair returns the QuantizeLinear of src that stands for tensor name;
// dequantize then gives each consumer its own DequantizeLinear of it.
func (r *rewriter) pair(name, src string, qp qparams) []*pb.NodeProto {
	scale, zp := r.paramInits(name, qp)
	q := r.names.name(name + "_quantized")
	r.q[name] = [3]string{q, scale, zp}
	r.params[name] = qp
	return []*pb.NodeProto{
		{OpType: proto.String("QuantizeLinear"), Name: proto.String(r.names.name(name + "_QuantizeLinear")), Input: []string{src, scale, zp}, Output: []string{q}},
	}
}

// dequantize returns a DequantizeLinear of quantized tensor name for one
// consumer and the name of its output. A DequantizeLinear per consumer is
// the form ONNX Runtime's QDQ fusions look for.
func (r *rewriter) dequantize(name string) (*pb.NodeProto, string) {
	q := r.q[name]
	dq := r.names.name(name + "_dequantized")
	return &pb.NodeProto{OpType: proto.String("DequantizeLinear"), Name: proto.String(r.names.name(name + "_DequantizeLinear")), Input: []string{q[0], q[1], q[2]}, Output: []string{dq}}, dq
}

// constant adds an integer initializer and its DequantizeLinear, returning
// the dequantized tensor's name.
func (r *rewriter) constant(base string, q *tensor.Tensor, qp qparams) string {
	scale, zp := r.paramInits(base, qp)
	qn, dq := r.names.name(base+"_quantized"), r.names.name(base+"_dequantized")
	r.inits = append(r.inits, onnx.TensorToProto(q, qn))
	n := &pb.NodeProto{OpType: proto.String("DequantizeLinear"), Name: proto.String(r.names.name(base + "_DequantizeLinear")), Input: []string{qn, scale, zp}, Output: []string{dq}}
	if qp.axis >= 0 {
		n.Attribute = []*pb.AttributeProto{{Name: proto.String("axis"), Type: pb.AttributeProto_INT.Enum(), I: proto.Int64(int64(qp.axis))}}
	}
	r.consts = append(r.consts, n)
	return dq
}

// counts says what a rewrite quantized.
type counts struct {
	acts, weights, biases int
	notes                 []string
}

// rewrite builds the QDQ model from the float model, the plan and the
// activation ranges.
func rewrite(m *Model, p *plan, ranges map[string][2]float64, opts Options) (*pb.ModelProto, counts, error) {
	var c counts
	out := proto.Clone(m.mp).(*pb.ModelProto)
	g := out.Graph
	x := newIndex(g)
	r := &rewriter{x: x, names: newNamer(g), q: map[string][3]string{}, params: map[string]qparams{}}
	dt := opts.activations()

	// Weights and biases: per use, since a bias's scale depends on the
	// node's input; a weight quantized the same way twice is shared.
	slot := map[[2]int]string{} // (node, slot) -> replacement input
	type wkey struct {
		name string
		axis int
	}
	wdone := map[wkey]string{}
	wparams := map[wkey]qparams{}
	for _, wu := range p.weights {
		n := g.Node[wu.node]
		name := n.Input[wu.slot]
		k := wkey{name, wu.axis}
		if _, ok := wdone[k]; !ok {
			w, err := m.weight(name, x.inits)
			if err != nil {
				return nil, c, err
			}
			if w == nil {
				continue
			}
			if wu.axis >= len(w.Shape) {
				continue
			}
			qp, q := weightParams(w, wu.axis, opts.weightMax())
			wdone[k], wparams[k] = r.constant(name, q, qp), qp
			c.weights++
		}
		slot[[2]int{wu.node, wu.slot}] = wdone[k]
	}
	for _, bu := range p.biases {
		n := g.Node[bu.node]
		wname := n.Input[bu.weight.slot]
		wp, ok := wparams[wkey{wname, bu.weight.axis}]
		xr, xok := ranges[n.Input[0]]
		if !ok || !xok {
			continue
		}
		b, err := m.weight(n.Input[bu.slot], x.inits)
		if err != nil {
			return nil, c, err
		}
		if b == nil || len(b.Shape) != 1 || (len(wp.scales) > 1 && int(b.Shape[0]) != len(wp.scales)) {
			continue
		}
		xs := actParams(xr[0], xr[1], dt).scales[0]
		bp := qparams{dtype: ir.Int32, axis: -1, scales: make([]float32, len(wp.scales)), zps: make([]int64, len(wp.scales))}
		if len(wp.scales) > 1 {
			bp.axis = 0
		}
		for i, ws := range wp.scales {
			bp.scales[i] = xs * ws
		}
		q := tensor.New(ir.Int32, b.Shape)
		fits := true
		for i, f := range b.Float32s() {
			s := bp.scales[min(i, len(bp.scales)-1)]
			v := math.RoundToEven(float64(f / s))
			if !(s > 0) || math.Abs(v) > math.MaxInt32 {
				fits = false
				break
			}
			q.Int32s()[i] = int32(v)
		}
		if !fits {
			c.notes = append(c.notes, fmt.Sprintf("node %q: the bias does not fit int32 at scale input × weight; it stays float", n.GetName()))
			continue
		}
		slot[[2]int{bu.node, bu.slot}] = r.constant(n.Input[bu.slot], q, bp)
		c.biases++
	}

	// Activations: a QuantizeLinear after the producer (graph inputs:
	// first), a DequantizeLinear before each consumer.
	var nodes []*pb.NodeProto
	for _, a := range p.acts {
		if x.inputs[a] {
			rg := ranges[a]
			nodes = append(nodes, r.pair(a, a, actParams(rg[0], rg[1], dt))...)
			c.acts++
		}
	}
	var body []*pb.NodeProto
	for i, n := range g.GetNode() {
		if p.dropped[i] {
			o := n.Output[0]
			if _, ok := ranges[o]; ok {
				rg := ranges[o]
				body = append(body, r.pair(o, p.source[o], actParams(rg[0], rg[1], dt))...)
				c.acts++
				continue
			}
			// Not calibrated (not float): the node stays.
		}
		for s, v := range n.GetInput() {
			if rep, ok := slot[[2]int{i, s}]; ok {
				n.Input[s] = rep
			} else if _, ok := r.q[v]; ok {
				dqn, dq := r.dequantize(v)
				body = append(body, dqn)
				n.Input[s] = dq
			}
		}
		body = append(body, n)
		for _, o := range n.GetOutput() {
			if p.actSet[o] && !p.dropped[i] {
				rg := ranges[o]
				body = append(body, r.pair(o, o, actParams(rg[0], rg[1], dt))...)
				c.acts++
			}
		}
	}
	g.Node = append(append(r.consts, nodes...), body...)
	g.Initializer = append(g.Initializer, r.inits...)
	dropUnused(g)
	out.MetadataProps = append(out.MetadataProps, &pb.StringStringEntryProto{
		Key:   proto.String("kiln.quantize"),
		Value: proto.String(fmt.Sprintf("method=%s activations=%s", opts.Method, dt)),
	})
	return out, c, nil
}

// dropUnused removes initializers no node or graph output reads any more
// (the float weights that were quantized).
func dropUnused(g *pb.GraphProto) {
	read := map[string]bool{}
	for _, n := range g.GetNode() {
		for _, v := range n.GetInput() {
			read[v] = true
		}
		for _, a := range n.GetAttribute() {
			markSubgraphReads(a, read)
		}
	}
	for _, o := range g.GetOutput() {
		read[o.GetName()] = true
	}
	kept := g.Initializer[:0]
	dropped := map[string]bool{}
	for _, t := range g.GetInitializer() {
		if read[t.GetName()] {
			kept = append(kept, t)
		} else {
			dropped[t.GetName()] = true
		}
	}
	g.Initializer = kept
	ins := g.Input[:0]
	for _, vi := range g.GetInput() {
		if !dropped[vi.GetName()] {
			ins = append(ins, vi)
		}
	}
	g.Input = ins
}

// markSubgraphReads marks every name a subgraph attribute's nodes read:
// an If or Loop body may read an outer initializer.
func markSubgraphReads(a *pb.AttributeProto, read map[string]bool) {
	gs := append([]*pb.GraphProto{}, a.GetGraphs()...)
	if a.GetG() != nil {
		gs = append(gs, a.GetG())
	}
	for _, g := range gs {
		for _, n := range g.GetNode() {
			for _, v := range n.GetInput() {
				read[v] = true
			}
			for _, b := range n.GetAttribute() {
				markSubgraphReads(b, read)
			}
		}
	}
}
