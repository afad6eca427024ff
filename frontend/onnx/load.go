package onnx

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Options control import.
type Options struct {
	// InputShapes overrides or fixes the shapes of graph inputs (needed when
	// the model has symbolic dims).
	InputShapes map[string]ir.Shape
	// Freeze supplies values for graph inputs that an operator needs at
	// compile time (e.g. a Reshape's shape fed as a graph input). Only inputs
	// actually needed are frozen; Model.Frozen lists them. Names that are
	// initializers are ignored.
	Freeze map[string]*tensor.Tensor
	// KeepQDQ imports QuantizeLinear/DequantizeLinear pairs as they are,
	// computing the operators between them in float (the QDQ model's
	// float emulation), instead of folding the groups into integer
	// operators (foldQDQ), which kiln does by default, as ONNX Runtime
	// does: the integer kernels run the shared models' QDQ forms 1.3-2x
	// faster than their emulation.
	KeepQDQ bool
}

// Model is an imported ONNX model.
type Model struct {
	// Module's main function has one parameter per graph input that is not
	// an initializer, in order; its body is the outputs (a Tuple when there
	// is more than one output, else the single expression).
	Module *graph.Module
	// Inputs are the main function's parameters: name and type.
	Inputs []ValueInfo
	// Outputs are the graph outputs with their inferred types.
	Outputs []ValueInfo
	// Frozen names the inputs whose Options.Freeze value was used.
	Frozen []string
	// Opsets maps domain to imported version ("" is ai.onnx).
	Opsets map[string]int64
	// IRVersion is the model's ONNX IR version.
	IRVersion int64
	// Producer is "producer_name producer_version".
	Producer string
	// ExternalFiles are the files holding the model's external tensor
	// data, as the model names them (relative to its directory), sorted:
	// what a compile depends on besides the model file.
	ExternalFiles []string
}

// ValueInfo is the name and type of a graph input or output.
type ValueInfo struct {
	Name string
	Type *ir.TensorType
}

// trainingDomain holds the training-only operators (gradients, optimizers).
const trainingDomain = "ai.onnx.preview.training"

// LoadFile reads and imports an ONNX model file. External tensor data is
// resolved relative to the file's directory.
func LoadFile(path string, opts Options) (*Model, error) {
	data, release, err := readModelFile(path)
	if err != nil {
		return nil, err
	}
	defer release()
	m, err := load(data, opts, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Load imports a serialized ONNX model (a ModelProto) into graph IR.
func Load(data []byte, opts Options) (*Model, error) {
	return load(data, opts, "")
}

func load(data []byte, opts Options, baseDir string) (m *Model, err error) {
	defer func() {
		if r := recover(); r != nil {
			m = nil
			err = fmt.Errorf("internal error importing model: %v (at %s)", r, panicSite())
		}
	}()
	var mp pb.ModelProto
	if err := proto.Unmarshal(data, &mp); err != nil {
		return nil, fmt.Errorf("not an ONNX model: %v", err)
	}
	return importModel(&mp, opts, baseDir)
}

// importModel turns a parsed ModelProto into a Model.
func importModel(mp *pb.ModelProto, opts Options, baseDir string) (*Model, error) {
	g := mp.GetGraph()
	if g == nil {
		return nil, fmt.Errorf("model has no graph")
	}
	opsets, err := readOpsets(mp)
	if err != nil {
		return nil, err
	}
	if !opts.KeepQDQ && opsets[""] >= 10 {
		usedMS, err := foldQDQ(g, opsets[""])
		if err != nil {
			return nil, err
		}
		if usedMS && opsets[msDomain] < 1 {
			opsets[msDomain] = 1
		}
	}
	producer := strings.TrimSpace(mp.GetProducerName() + " " + mp.GetProducerVersion())
	imp := &importer{
		opsets:     opsets,
		opts:       opts,
		baseDir:    baseDir,
		mainInputs: map[*graph.Var]bool{},
		frozenSet:  map[string]bool{},
		functions:  map[string]bool{},
		external:   map[string]bool{},
	}
	for _, f := range mp.GetFunctions() {
		imp.functions[convKey(normDomain(f.GetDomain()), f.GetName())] = true
	}

	// Graph-level types first, so models using sequences or strings are
	// recognised before any node is looked at.
	initNames := map[string]bool{}
	for _, t := range g.GetInitializer() {
		initNames[t.GetName()] = true
	}
	if len(g.GetSparseInitializer()) > 0 {
		return nil, fmt.Errorf("%w: the model uses sparse tensors (sparse initializers)", ErrUnsupportedType)
	}
	var inputs []ValueInfo
	seenInput := map[string]bool{}
	for _, vi := range g.GetInput() {
		name := vi.GetName()
		if name == "" {
			return nil, fmt.Errorf("graph has an input with an empty name")
		}
		if seenInput[name] {
			return nil, fmt.Errorf("graph input %q is declared twice", name)
		}
		seenInput[name] = true
		if initNames[name] {
			continue // an initializer with an overridable default: a constant
		}
		t, err := inputType(vi, opts.InputShapes[name], opts.InputShapes != nil && opts.InputShapes[name] != nil)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, ValueInfo{Name: name, Type: t})
	}
	for name := range opts.InputShapes {
		if !seenInput[name] && !initNames[name] {
			return nil, fmt.Errorf("input shape given for %q, which is not a graph input", name)
		}
	}
	declaredOut := make([]*ir.TensorType, len(g.GetOutput()))
	for i, vi := range g.GetOutput() {
		if vi.GetName() == "" {
			return nil, fmt.Errorf("graph output %d has an empty name", i)
		}
		t, err := outputType(vi)
		if err != nil {
			return nil, err
		}
		declaredOut[i] = t
	}
	if len(declaredOut) == 0 {
		return nil, fmt.Errorf("graph has no outputs")
	}
	for _, np := range g.GetNode() {
		if normDomain(np.GetDomain()) == trainingDomain {
			return nil, fmt.Errorf("%w: node %q (%s) uses training operators (domain %s)", ErrUnsupportedType, np.GetName(), np.GetOpType(), trainingDomain)
		}
	}

	// Parameters and frozen values.
	root := newScope(nil)
	params := make([]*graph.Var, len(inputs))
	for i, in := range inputs {
		v := graph.NewVar(in.Name, in.Type)
		params[i] = v
		imp.mainInputs[v] = true
		root.vals[in.Name] = v
	}
	for name, t := range opts.Freeze {
		if initNames[name] {
			continue
		}
		var it *ir.TensorType
		for _, in := range inputs {
			if in.Name == name {
				it = in.Type
			}
		}
		if it == nil {
			return nil, fmt.Errorf("freeze value given for %q, which is not a graph input", name)
		}
		if t == nil || !ir.TypeEqual(t.Type(), it) {
			got := "nothing"
			if t != nil {
				got = t.Type().String()
			}
			return nil, fmt.Errorf("freeze value for input %q has type %s, the input has type %s", name, got, it)
		}
	}

	outs, err := imp.importGraph(g, root, nil)
	if err != nil {
		return nil, err
	}

	var body graph.Expr
	if len(outs) == 1 {
		body = outs[0]
	} else {
		body = graph.NewTuple(outs)
	}
	mod := graph.NewModule(graph.NewFunction(params, body, nil))
	if err := graph.InferTypes(mod); err != nil {
		return nil, fmt.Errorf("type inference: %v", err)
	}
	outputs := make([]ValueInfo, len(outs))
	for i, o := range outs {
		name := g.GetOutput()[i].GetName()
		t, err := ir.AsTensor(o.Type())
		if err != nil {
			return nil, fmt.Errorf("graph output %q: %v", name, err)
		}
		if d := declaredOut[i]; d != nil {
			// Overridden input shapes may legitimately change output shapes,
			// so then only the element type is checked.
			if len(opts.InputShapes) > 0 && d.DType == t.DType {
				d = t
			}
			if !ir.TypeEqual(d, t) {
				return nil, fmt.Errorf("graph output %q is declared as %s but kiln computes %s", name, d, t)
			}
		}
		outputs[i] = ValueInfo{Name: name, Type: t}
	}
	return &Model{
		Module:        mod,
		Inputs:        inputs,
		Outputs:       outputs,
		Frozen:        imp.frozen,
		Opsets:        opsets,
		IRVersion:     mp.GetIrVersion(),
		Producer:      producer,
		ExternalFiles: slices.Sorted(maps.Keys(imp.external)),
	}, nil
}

// normDomain maps the spellings of the default domain to "".
func normDomain(d string) string {
	if d == "ai.onnx" {
		return ""
	}
	return d
}

// MaxOpset is the newest ai.onnx operator set kiln implements: its
// converters follow every operator's definition up to this version. A
// model importing a newer one is refused rather than read with older
// semantics.
const MaxOpset = 20

// readOpsets collects the model's operator-set imports.
func readOpsets(mp *pb.ModelProto) (map[string]int64, error) {
	opsets := map[string]int64{}
	for _, o := range mp.GetOpsetImport() {
		d := normDomain(o.GetDomain())
		v := o.GetVersion()
		if v < 1 {
			return nil, fmt.Errorf("opset import for domain %q has invalid version %d", o.GetDomain(), v)
		}
		if old, ok := opsets[d]; !ok || v > old {
			opsets[d] = v
		}
	}
	if v := opsets[""]; v > MaxOpset {
		return nil, fmt.Errorf("the model imports ai.onnx opset %d; kiln implements the operators up to opset %d (export the model for opset %d or lower)", v, MaxOpset, MaxOpset)
	}
	if _, ok := opsets[""]; !ok && len(mp.GetOpsetImport()) == 0 {
		// IR versions before 3 had no opset imports and meant opset 1.
		opsets[""] = 1
	}
	return opsets, nil
}

// unsupportedKind describes a non-tensor TypeProto ("uses sequences"), or
// returns "" for a tensor type.
func unsupportedKind(tp *pb.TypeProto) string {
	switch {
	case tp.GetSequenceType() != nil:
		return "sequences"
	case tp.GetOptionalType() != nil:
		return "optionals"
	case tp.GetMapType() != nil:
		return "maps"
	case tp.GetSparseTensorType() != nil:
		return "sparse tensors"
	case tp.GetOpaqueType() != nil:
		return "opaque values"
	}
	return ""
}

// elemType reads the element type of a tensor TypeProto.
func elemType(what string, tt *pb.TypeProto_Tensor) (ir.DType, error) {
	dt, err := DTypeFromONNX(tt.GetElemType())
	if err != nil {
		if errors.Is(err, ErrUnsupportedType) {
			if tt.GetElemType() == int32(pb.TensorProto_STRING) {
				return ir.Invalid, fmt.Errorf("%w: %s uses strings", ErrUnsupportedType, what)
			}
			return ir.Invalid, fmt.Errorf("%s: %w", what, err)
		}
		return ir.Invalid, fmt.Errorf("%s: %v", what, err)
	}
	return dt, nil
}

// inputType resolves the type of a graph input, taking the shape from
// override when given (whatever the declaration says: some models declare
// shapes their own test data contradicts) and from the declaration otherwise.
func inputType(vi *pb.ValueInfoProto, override ir.Shape, hasOverride bool) (*ir.TensorType, error) {
	name := vi.GetName()
	what := fmt.Sprintf("graph input %q", name)
	tp := vi.GetType()
	if tp == nil {
		return nil, fmt.Errorf("%s has no type", what)
	}
	if k := unsupportedKind(tp); k != "" {
		return nil, fmt.Errorf("%w: %s uses %s", ErrUnsupportedType, what, k)
	}
	tt := tp.GetTensorType()
	if tt == nil {
		return nil, fmt.Errorf("%s has no tensor type", what)
	}
	dt, err := elemType(what, tt)
	if err != nil {
		return nil, err
	}
	sp := tt.GetShape()
	if hasOverride {
		for i, d := range override {
			if d < 0 {
				return nil, fmt.Errorf("input shape for %q: dimension %d is negative", name, i)
			}
		}
		return ir.NewTensorType(dt, override), nil
	}
	if sp == nil {
		return nil, fmt.Errorf("%s has an unknown rank; give its shape (--input-shape %s=...)", what, name)
	}
	shape := make(ir.Shape, len(sp.GetDim()))
	for i, d := range sp.GetDim() {
		switch v := d.GetValue().(type) {
		case *pb.TensorShapeProto_Dimension_DimValue:
			if v.DimValue < 0 {
				return nil, fmt.Errorf("%s: dimension %d is negative (%d)", what, i, v.DimValue)
			}
			shape[i] = v.DimValue
		case *pb.TensorShapeProto_Dimension_DimParam:
			return nil, fmt.Errorf("%s has symbolic dimension %d %q; give its shape (--input-shape %s=...)", what, i, v.DimParam, name)
		default:
			return nil, fmt.Errorf("%s has unknown dimension %d; give its shape (--input-shape %s=...)", what, i, name)
		}
	}
	return ir.NewTensorType(dt, shape), nil
}

// outputType reads a graph output's declared type: nil when it is not fully
// known (missing type, unknown rank or a symbolic/unknown dimension).
func outputType(vi *pb.ValueInfoProto) (*ir.TensorType, error) {
	what := fmt.Sprintf("graph output %q", vi.GetName())
	tp := vi.GetType()
	if tp == nil {
		return nil, nil
	}
	if k := unsupportedKind(tp); k != "" {
		return nil, fmt.Errorf("%w: %s uses %s", ErrUnsupportedType, what, k)
	}
	tt := tp.GetTensorType()
	if tt == nil || tt.GetElemType() == 0 {
		return nil, nil
	}
	dt, err := elemType(what, tt)
	if err != nil {
		return nil, err
	}
	sp := tt.GetShape()
	if sp == nil {
		return nil, nil
	}
	shape := make(ir.Shape, len(sp.GetDim()))
	for i, d := range sp.GetDim() {
		v, ok := d.GetValue().(*pb.TensorShapeProto_Dimension_DimValue)
		if !ok || v.DimValue < 0 {
			return nil, nil
		}
		shape[i] = v.DimValue
	}
	return ir.NewTensorType(dt, shape), nil
}

// panicSite names the function and line where the panic being recovered
// was raised: the first frame below the runtime's panic machinery. It is
// called from a deferred recover.
func panicSite() string {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "runtime.") {
			return fmt.Sprintf("%s %s:%d", f.Function, filepath.Base(f.File), f.Line)
		}
		if !more {
			return "unknown location"
		}
	}
}
