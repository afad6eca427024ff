package quantize

import (
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// maxModelBytes is the largest model protobuf can serialize (2 GiB less
// one byte).
const maxModelBytes = 1<<31 - 1

// Input is one graph input of a model: its name, element type and
// dimensions (-1 for a symbolic one).
type Input struct {
	Name  string
	DType ir.DType
	Dims  []int64
}

// Model is a float ONNX model read for quantisation. Its external data is
// read into its initializers, and constants computed by Constant nodes, or
// passed through Identity nodes, are initializers too.
type Model struct {
	mp      *pb.ModelProto
	opset   int64
	inputs  []Input
	weights map[string]*tensor.Tensor // decoded float initializers
}

// LoadFile reads an ONNX model file; external data is resolved beside it.
func LoadFile(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := parse(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Parse reads a serialized ONNX model with no external data.
func Parse(data []byte) (*Model, error) { return parse(data, "") }

func parse(data []byte, baseDir string) (*Model, error) {
	mp := &pb.ModelProto{}
	if err := proto.Unmarshal(data, mp); err != nil {
		return nil, fmt.Errorf("not an ONNX model: %v", err)
	}
	if err := onnx.CheckStructure(mp); err != nil {
		return nil, err
	}
	m := &Model{mp: mp, weights: map[string]*tensor.Tensor{}}
	for _, o := range mp.GetOpsetImport() {
		if d := o.GetDomain(); d == "" || d == "ai.onnx" {
			m.opset = o.GetVersion()
		}
	}
	if m.opset < 10 {
		return nil, fmt.Errorf("the model imports opset %d of the default domain; QuantizeLinear with int8 needs opset 10 or later", m.opset)
	}
	g := mp.GetGraph()
	if g == nil {
		return nil, fmt.Errorf("the model has no graph")
	}
	for i, t := range g.GetInitializer() {
		if t.GetDataLocation() != pb.TensorProto_EXTERNAL {
			continue
		}
		v, err := onnx.ExternalTensorFromProto(t, baseDir)
		if err != nil {
			return nil, fmt.Errorf("initializer %q: %w", t.GetName(), err)
		}
		g.Initializer[i] = onnx.TensorToProto(v, t.GetName())
	}
	if err := m.foldConstants(); err != nil {
		return nil, err
	}
	inits := map[string]bool{}
	for _, t := range g.GetInitializer() {
		inits[t.GetName()] = true
	}
	for _, vi := range g.GetInput() {
		if inits[vi.GetName()] {
			continue
		}
		in := Input{Name: vi.GetName()}
		if tt := vi.GetType().GetTensorType(); tt != nil {
			in.DType, _ = onnx.DTypeFromONNX(tt.GetElemType())
			for _, d := range tt.GetShape().GetDim() {
				v, ok := d.GetValue().(*pb.TensorShapeProto_Dimension_DimValue)
				if !ok || v.DimValue < 0 {
					in.Dims = append(in.Dims, -1)
				} else {
					in.Dims = append(in.Dims, v.DimValue)
				}
			}
		}
		if in.DType == ir.Invalid {
			return nil, fmt.Errorf("graph input %q has no tensor element type", in.Name)
		}
		m.inputs = append(m.inputs, in)
	}
	return m, nil
}

// Inputs lists the model's graph inputs that are not initializers.
func (m *Model) Inputs() []Input {
	out := make([]Input, len(m.inputs))
	for i, in := range m.inputs {
		out[i] = Input{Name: in.Name, DType: in.DType, Dims: append([]int64(nil), in.Dims...)}
	}
	return out
}

// Bytes serializes the model (after constant folding), as the float model
// Compare measures against.
func (m *Model) Bytes() ([]byte, error) { return marshal(m.mp) }

func marshal(mp *pb.ModelProto) ([]byte, error) {
	if n := proto.Size(mp); n > maxModelBytes {
		return nil, fmt.Errorf("the model would be %d bytes, over protobuf's 2 GiB limit", n)
	}
	return proto.Marshal(mp)
}

// foldConstants turns Constant nodes with a tensor value, and Identity
// nodes of an initializer, into initializers, so that weights reached
// either way are seen as weights. Graph outputs keep their nodes.
func (m *Model) foldConstants() error {
	g := m.mp.Graph
	inits := map[string]*pb.TensorProto{}
	for _, t := range g.GetInitializer() {
		inits[t.GetName()] = t
	}
	outputs := map[string]bool{}
	for _, o := range g.GetOutput() {
		outputs[o.GetName()] = true
	}
	kept := g.Node[:0]
	for _, n := range g.GetNode() {
		if len(n.GetOutput()) == 1 && !outputs[n.Output[0]] && inits[n.Output[0]] == nil && n.GetDomain() == "" {
			var t *pb.TensorProto
			switch n.GetOpType() {
			case "Constant":
				for _, a := range n.GetAttribute() {
					if a.GetName() == "value" && a.GetT() != nil && len(n.GetAttribute()) == 1 {
						t = proto.Clone(a.GetT()).(*pb.TensorProto)
					}
				}
			case "Identity":
				if len(n.GetInput()) == 1 {
					if src := inits[n.Input[0]]; src != nil {
						t = proto.Clone(src).(*pb.TensorProto)
					}
				}
			}
			if t != nil && t.GetDataLocation() != pb.TensorProto_EXTERNAL {
				t.Name = proto.String(n.Output[0])
				g.Initializer = append(g.Initializer, t)
				inits[n.Output[0]] = t
				continue
			}
		}
		kept = append(kept, n)
	}
	g.Node = kept
	return nil
}

// weight decodes a float32 initializer (nil when name is not one).
func (m *Model) weight(name string, inits map[string]*pb.TensorProto) (*tensor.Tensor, error) {
	if w, ok := m.weights[name]; ok {
		return w, nil
	}
	p := inits[name]
	if p == nil || p.GetDataType() != int32(pb.TensorProto_FLOAT) {
		return nil, nil
	}
	w, err := onnx.TensorFromProto(p)
	if err != nil {
		return nil, fmt.Errorf("initializer %q: %w", name, err)
	}
	m.weights[name] = w
	return w, nil
}
