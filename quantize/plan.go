package quantize

import (
	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/frontend/onnx/pb"
)

// index is a graph's use-def view: who makes each tensor and who reads it.
type index struct {
	g         *pb.GraphProto
	inits     map[string]*pb.TensorProto
	producer  map[string]int   // tensor -> node index
	consumers map[string][]int // tensor -> node indices reading it
	outputs   map[string]bool  // graph outputs
	inputs    map[string]bool  // graph inputs that are not initializers
}

func newIndex(g *pb.GraphProto) *index {
	x := &index{g: g, inits: map[string]*pb.TensorProto{}, producer: map[string]int{},
		consumers: map[string][]int{}, outputs: map[string]bool{}, inputs: map[string]bool{}}
	for _, t := range g.GetInitializer() {
		x.inits[t.GetName()] = t
	}
	for _, vi := range g.GetInput() {
		if x.inits[vi.GetName()] == nil {
			x.inputs[vi.GetName()] = true
		}
	}
	for _, o := range g.GetOutput() {
		x.outputs[o.GetName()] = true
	}
	for i, n := range g.GetNode() {
		for _, o := range n.GetOutput() {
			if o != "" {
				x.producer[o] = i
			}
		}
		seen := map[string]bool{}
		for _, in := range n.GetInput() {
			if in != "" && !seen[in] {
				seen[in] = true
				x.consumers[in] = append(x.consumers[in], i)
			}
		}
	}
	return x
}

// isConst says whether a tensor is an initializer.
func (x *index) isConst(name string) bool { return x.inits[name] != nil }

// isActivation says whether a tensor is computed at run time: a graph
// input or a node's output.
func (x *index) isActivation(name string) bool {
	if name == "" || x.isConst(name) {
		return false
	}
	_, made := x.producer[name]
	return made || x.inputs[name]
}

// weightUse is a weight input of a quantized node: node's input slot
// reads a float initializer, quantized with one scale per index of axis
// (-1: one scale for the tensor).
type weightUse struct {
	node, slot, axis int
}

// biasUse is a bias input of a quantized node, quantized to int32 with
// the scale of the node's input activation times its weight's scale.
type biasUse struct {
	node, slot int
	weight     weightUse
}

// plan is what a model's quantisation changes: the activations that get
// a QuantizeLinear/DequantizeLinear pair, and the weights and biases that
// become integer initializers.
type plan struct {
	acts    []string // in the order they are first seen
	actSet  map[string]bool
	weights []weightUse
	biases  []biasUse
	// dropped holds Relu and Clip(0, max) nodes that go: the pair of
	// their output reads their input (source), and the QuantizeLinear's
	// saturation at the range's 0 computes them, as ONNX Runtime's
	// quantizer leaves Conv+Relu.
	dropped map[int]bool
	source  map[string]string
}

func (p *plan) addAct(x *index, name string) {
	if !x.isActivation(name) || x.outputs[name] || p.actSet[name] {
		return
	}
	p.actSet[name] = true
	p.acts = append(p.acts, name)
}

// attrInt reads an integer attribute of a node.
func attrInt(n *pb.NodeProto, name string, def int64) int64 {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a.GetI()
		}
	}
	return def
}

// attrFloat reads a float attribute of a node.
func attrFloat(n *pb.NodeProto, name string, def float32) float32 {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a.GetF()
		}
	}
	return def
}

// in returns a node's input slot, "" when absent.
func in(n *pb.NodeProto, slot int) string {
	if slot < len(n.GetInput()) {
		return n.Input[slot]
	}
	return ""
}

// fusedActivation says whether node i is a Relu, or a Clip with constant
// bounds: an activation an integer engine applies as its clamp.
func (x *index) fusedActivation(i int) bool {
	n := x.g.Node[i]
	if n.GetDomain() != "" {
		return false
	}
	switch n.GetOpType() {
	case "Relu":
		return true
	case "Clip":
		for s := 1; s < len(n.GetInput()); s++ {
			if b := n.Input[s]; b != "" && !x.isConst(b) {
				return false
			}
		}
		return true
	}
	return false
}

// clampsAtZero says whether node i (a fused activation) is Relu or a
// Clip whose lower bound is 0: a quantization range that starts at 0
// computes it.
func (x *index) clampsAtZero(i int) bool {
	n := x.g.Node[i]
	if n.GetOpType() == "Relu" {
		return true
	}
	if len(n.GetInput()) < 2 || n.Input[1] == "" { // opset 6-10: an attribute
		return len(n.GetInput()) == 1 && attrFloat(n, "min", -1) == 0
	}
	t := x.inits[n.Input[1]]
	if t == nil || t.GetDataType() != int32(pb.TensorProto_FLOAT) || len(t.GetDims()) != 0 {
		return false
	}
	v, err := onnx.TensorFromProto(t)
	return err == nil && v.Float32s()[0] == 0
}

// soleConsumer returns the only node reading a tensor that is not a graph
// output (-1 otherwise).
func (x *index) soleConsumer(name string) int {
	if x.outputs[name] || len(x.consumers[name]) != 1 {
		return -1
	}
	return x.consumers[name][0]
}

// rank returns an initializer's rank (-1 when name is not one).
func (x *index) rank(name string) int {
	t := x.inits[name]
	if t == nil {
		return -1
	}
	return len(t.GetDims())
}

// isFloatConst says whether name is a float32 initializer.
func (x *index) isFloatConst(name string) bool {
	t := x.inits[name]
	return t != nil && t.GetDataType() == int32(pb.TensorProto_FLOAT)
}

// makePlan chooses what to quantize. perChannel allows weight scales per
// output channel (DequantizeLinear's axis needs opset 13).
func makePlan(x *index, perChannel bool) *plan {
	p := &plan{actSet: map[string]bool{}, dropped: map[int]bool{}, source: map[string]string{}}
	fused := map[string]bool{} // outputs kept in float ahead of a fused tail
	axis := func(a int) int {
		if perChannel {
			return a
		}
		return -1
	}
	// tail marks the output of a product node whose sole consumer applies
	// a bias or an activation in the node's epilogue; the tail's output is
	// quantized instead.
	tail := func(i int, bias bool) {
		out := x.g.Node[i].GetOutput()[0]
		c := x.soleConsumer(out)
		if c < 0 {
			p.addAct(x, out)
			return
		}
		cn := x.g.Node[c]
		if bias && cn.GetOpType() == "Add" && cn.GetDomain() == "" && len(cn.Input) == 2 {
			other := cn.Input[0]
			if other == out {
				other = cn.Input[1]
			}
			if x.isFloatConst(other) && x.rank(other) == 1 {
				fused[out] = true
				i, out = c, cn.Output[0]
				if c = x.soleConsumer(out); c < 0 {
					p.addAct(x, out)
					return
				}
			}
		}
		if x.fusedActivation(c) {
			fused[out] = true
			if r := x.g.Node[c].Output[0]; x.clampsAtZero(c) && !x.outputs[r] {
				p.dropped[c] = true
				p.source[r] = out
				p.addAct(x, r)
			}
			return // else the activation's own rule quantizes its output
		}
		p.addAct(x, out)
	}
	for i, n := range x.g.GetNode() {
		if n.GetDomain() != "" || len(n.GetOutput()) == 0 {
			continue
		}
		switch n.GetOpType() {
		case "Conv":
			w := in(n, 1)
			if !x.isActivation(in(n, 0)) || !x.isFloatConst(w) || x.rank(w) < 3 {
				continue
			}
			p.addAct(x, in(n, 0))
			wu := weightUse{node: i, slot: 1, axis: axis(0)}
			p.weights = append(p.weights, wu)
			if b := in(n, 2); x.isFloatConst(b) && x.rank(b) == 1 {
				p.biases = append(p.biases, biasUse{node: i, slot: 2, weight: wu})
			}
			tail(i, false)
		case "Gemm":
			w := in(n, 1)
			if attrInt(n, "transA", 0) != 0 || !x.isActivation(in(n, 0)) || !x.isFloatConst(w) || x.rank(w) != 2 {
				continue
			}
			p.addAct(x, in(n, 0))
			a := 1
			if attrInt(n, "transB", 0) != 0 {
				a = 0
			}
			wu := weightUse{node: i, slot: 1, axis: axis(a)}
			p.weights = append(p.weights, wu)
			if b := in(n, 2); x.isFloatConst(b) && x.rank(b) == 1 && attrFloat(n, "alpha", 1) == 1 && attrFloat(n, "beta", 1) == 1 {
				p.biases = append(p.biases, biasUse{node: i, slot: 2, weight: wu})
			}
			tail(i, false)
		case "MatMul":
			a, b := in(n, 0), in(n, 1)
			if !x.isActivation(a) {
				continue
			}
			switch {
			case x.isFloatConst(b) && x.rank(b) == 2:
				p.weights = append(p.weights, weightUse{node: i, slot: 1, axis: axis(1)})
			case x.isActivation(b):
				p.addAct(x, b)
			default:
				continue
			}
			p.addAct(x, a)
			tail(i, true)
		case "Add", "Concat":
			all := len(n.GetInput()) > 0
			for _, v := range n.GetInput() {
				all = all && x.isActivation(v)
			}
			if !all {
				continue
			}
			for _, v := range n.GetInput() {
				if !fused[v] {
					p.addAct(x, v)
				}
			}
			tail(i, false)
		case "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze":
			// Data movement stays in integers only after a quantized tensor.
			if v := in(n, 0); p.actSet[v] {
				p.addAct(x, n.Output[0])
			}
		case "Softmax":
			// Integer engines compute it from the quantized input with an
			// exp table (qnn.softmax); its output's calibrated range
			// starts at 0. A graph output stays float, and then so does
			// the input (a lone DequantizeLinear gains nothing).
			if v := in(n, 0); x.isActivation(v) && !x.outputs[n.Output[0]] {
				if !fused[v] {
					p.addAct(x, v)
				}
				p.addAct(x, n.Output[0])
			}
		case "MaxPool", "AveragePool", "GlobalAveragePool", "Relu", "Clip":
			v := in(n, 0)
			if !x.isActivation(v) || len(n.GetOutput()) > 1 && n.Output[1] != "" {
				continue
			}
			if n.GetOpType() == "Clip" && !x.fusedActivation(i) || p.dropped[i] {
				continue
			}
			if !fused[v] {
				p.addAct(x, v)
			}
			p.addAct(x, n.Output[0])
		}
	}
	return p
}
