package onnx

import (
	"fmt"
	"sort"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// AttrType is the kind of an ONNX node attribute.
type AttrType int

// ONNX attribute kinds (the subset kiln reads).
const (
	AttrUndefined AttrType = iota
	AttrFloat
	AttrInt
	AttrString
	AttrTensor
	AttrGraph
	AttrFloats
	AttrInts
	AttrStrings
)

// String names the attribute kind as ONNX does ("INT", "FLOATS").
func (t AttrType) String() string {
	names := [...]string{"UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH", "FLOATS", "INTS", "STRINGS"}
	if int(t) < len(names) {
		return names[t]
	}
	return fmt.Sprintf("AttrType(%d)", int(t))
}

// Attr is one decoded ONNX node attribute.
type Attr struct {
	Type    AttrType
	Int     int64
	Float   float64
	Str     string
	Ints    []int64
	Floats  []float64
	Strings []string
	Tensor  *tensor.Tensor
	Graph   any // *pb.GraphProto for control-flow bodies
}

// Node is an ONNX node as converters see it: its inputs already translated
// to graph expressions, its attributes decoded.
type Node struct {
	Name   string
	OpType string
	Domain string
	// Opset is the model's opset version for the node's domain.
	Opset int64
	// Inputs holds one expression per ONNX input; an omitted optional input
	// ("" in the model) is nil.
	Inputs []graph.Expr
	// InputNames are the ONNX value names of the inputs.
	InputNames []string
	// NumOutputs is the number of outputs the node declares.
	NumOutputs int
	// Attrs are the node's attributes by name.
	Attrs map[string]*Attr

	read    map[string]bool // attributes the converter read
	attrErr error           // the first wrong-typed attribute read
}

// Input returns input i or nil when it is absent or omitted.
func (n *Node) Input(i int) graph.Expr {
	if i < len(n.Inputs) {
		return n.Inputs[i]
	}
	return nil
}

// Has reports whether attribute name is present (which counts as reading
// it, see Unread).
func (n *Node) Has(name string) bool {
	_, ok := n.attr(name)
	return ok
}

// attr returns attribute name and marks it read.
func (n *Node) attr(name string) (*Attr, bool) {
	a, ok := n.Attrs[name]
	if ok {
		if n.read == nil {
			n.read = map[string]bool{}
		}
		n.read[name] = true
	}
	return a, ok
}

// typed returns attribute name when it is present with type want. An
// attribute of another type (Gemm's alpha given as an INT) is recorded as
// the node's error — ONNX Runtime rejects such a model, and reading it as
// the zero value would give wrong answers silently — and typed reports
// false, so the accessor returns its default until the converter driver
// returns the error.
func (n *Node) typed(name string, want AttrType) (*Attr, bool) {
	a, ok := n.attr(name)
	if !ok {
		return nil, false
	}
	if a.Type != want {
		if n.attrErr == nil {
			n.attrErr = fmt.Errorf("attribute %q is %s, want %s", name, a.Type, want)
		}
		return nil, false
	}
	return a, true
}

// AttrErr returns the first attribute error the accessors recorded.
func (n *Node) AttrErr() error { return n.attrErr }

// Unread returns the node's attributes no converter read, sorted.
func (n *Node) Unread() []string {
	var out []string
	for name := range n.Attrs {
		if !n.read[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Int returns an int attribute or def.
func (n *Node) Int(name string, def int64) int64 {
	if a, ok := n.typed(name, AttrInt); ok {
		return a.Int
	}
	return def
}

// Float returns a float attribute or def.
func (n *Node) Float(name string, def float64) float64 {
	if a, ok := n.typed(name, AttrFloat); ok {
		return a.Float
	}
	return def
}

// String returns a string attribute or def.
func (n *Node) String(name string, def string) string {
	if a, ok := n.typed(name, AttrString); ok {
		return a.Str
	}
	return def
}

// Ints returns an ints attribute or def.
func (n *Node) Ints(name string, def []int64) []int64 {
	if a, ok := n.typed(name, AttrInts); ok {
		return a.Ints
	}
	return def
}

// Floats returns a floats attribute or def.
func (n *Node) Floats(name string, def []float64) []float64 {
	if a, ok := n.typed(name, AttrFloats); ok {
		return a.Floats
	}
	return def
}

// Strings returns a strings attribute or def.
func (n *Node) Strings(name string, def []string) []string {
	if a, ok := n.typed(name, AttrStrings); ok {
		return a.Strings
	}
	return def
}

// Tensor returns a tensor attribute or nil.
func (n *Node) Tensor(name string) *tensor.Tensor {
	if a, ok := n.typed(name, AttrTensor); ok {
		return a.Tensor
	}
	return nil
}

// Errorf makes an error that names the node, its op type, domain and opset.
// A %w verb in format wraps its argument as fmt.Errorf does.
func (n *Node) Errorf(format string, args ...any) error {
	dom := n.Domain
	if dom == "" {
		dom = "ai.onnx"
	}
	return fmt.Errorf("node %q (%s, domain %s, opset %d): %w", n.Name, n.OpType, dom, n.Opset, fmt.Errorf(format, args...))
}

// Converter translates one ONNX node into graph expressions, one per node
// output (an unused trailing optional output may be returned as nil).
type Converter func(c *Ctx, n *Node) ([]graph.Expr, error)

// versioned is a converter valid from an opset version on.
type versioned struct {
	since int64
	conv  Converter
}

// converters maps "domain/OpType" to converters sorted by since-version.
var converters = map[string][]versioned{}

func convKey(domain, opType string) string {
	if domain == "ai.onnx" {
		domain = ""
	}
	return domain + "/" + opType
}

// register adds a converter for an op type of the default domain, valid from
// opset `since` until the next registration of the same op. A duplicate
// (op, since) pair is a bug in this package.
func register(opType string, since int64, c Converter) { registerDomain("", opType, since, c) }

func registerDomain(domain, opType string, since int64, c Converter) {
	k := convKey(domain, opType)
	for _, v := range converters[k] {
		if v.since == since {
			panic(fmt.Sprintf("onnx: converter %s since %d registered twice", k, since))
		}
	}
	converters[k] = append(converters[k], versioned{since, c})
	sort.Slice(converters[k], func(i, j int) bool { return converters[k][i].since < converters[k][j].since })
}

// lookupConverter finds the converter for an op at an opset version.
func lookupConverter(domain, opType string, opset int64) (Converter, error) {
	vs, ok := converters[convKey(domain, opType)]
	if !ok {
		return nil, fmt.Errorf("operator is not supported")
	}
	var best Converter
	for _, v := range vs {
		if v.since <= opset {
			best = v.conv
		}
	}
	if best == nil {
		return nil, fmt.Errorf("operator is supported from opset %d only", vs[0].since)
	}
	return best, nil
}

// SupportedOps lists "OpType (since N)" for the default domain, for documentation.
func SupportedOps() []string {
	var out []string
	for k, vs := range converters {
		for _, v := range vs {
			out = append(out, fmt.Sprintf("%s (since %d)", k, v.since))
		}
	}
	sort.Strings(out)
	return out
}

// Ctx is what a converter uses to build graph IR. It types every call as it
// is made and folds calls whose arguments are all constants, using the
// reference executor.
type Ctx struct {
	node *Node
	// freeze supplies values for graph inputs whose value an operator needs
	// at compile time (a Reshape's shape given as a graph input); nil means
	// none may be frozen.
	freeze func(v *graph.Var) (*tensor.Tensor, bool)
	// NoFold disables constant folding (for tests of the importer itself).
	NoFold bool
	// imp and scope are the import in progress, for subgraphs (Subgraph).
	imp   *importer
	scope *scope
}

// Call builds an operator call, infers its type and folds it when every
// argument is a constant. Errors name the current node.
func (c *Ctx) Call(o *op.Op, args []graph.Expr, attrs ir.Attrs) (graph.Expr, error) {
	if c.imp != nil {
		if c.imp.calls++; c.imp.calls > MaxImportCalls {
			return nil, c.node.Errorf("the model expands to more than %d operators (unrolled loops, inlined functions); kiln stops there", MaxImportCalls)
		}
	}
	call, err := graph.NewCall(o, args, attrs)
	if err != nil {
		return nil, c.node.Errorf("%v", err)
	}
	call.Span = c.node.Name
	if _, err := graph.InferExpr(nil, call); err != nil {
		return nil, c.node.Errorf("%v", err)
	}
	if c.NoFold || !ref.Has(o) {
		return call, nil
	}
	vals := make([]*tensor.Tensor, len(args))
	for i, a := range args {
		k, ok := a.(*graph.Constant)
		if !ok {
			return call, nil
		}
		vals[i] = k.Value
	}
	argTypes := make([]ir.Type, len(vals))
	for i, v := range vals {
		argTypes[i] = v.Type()
	}
	work := op.WorkEstimate(o, argTypes, call.Type())
	if work > op.MaxFoldWork {
		return call, nil // too much work to evaluate while importing
	}
	if c.imp != nil {
		// Unrolled loops fold call after call: the import's total is
		// bounded too; past it, calls stay in the program.
		if c.imp.foldWork+work > MaxImportFoldWork {
			return call, nil
		}
		c.imp.foldWork += work
	}
	res, _, err := ref.EvalOp(o, call.Attrs, vals)
	if err != nil {
		return nil, c.node.Errorf("folding constants: %v", err)
	}
	if len(res) == 1 {
		if _, isTuple := call.Type().(*ir.TupleType); !isTuple {
			return graph.NewConstant(res[0]), nil
		}
	}
	fields := make([]graph.Expr, len(res))
	for i, r := range res {
		fields[i] = graph.NewConstant(r)
	}
	t := graph.NewTuple(fields)
	if _, err := graph.InferExpr(nil, t); err != nil {
		return nil, err
	}
	return t, nil
}

// Item projects output i of a tuple-valued expression, folding projections
// of literal tuples.
func (c *Ctx) Item(e graph.Expr, i int) (graph.Expr, error) {
	if t, ok := e.(*graph.Tuple); ok {
		return t.Fields[i], nil
	}
	g := graph.NewTupleGetItem(e, i)
	if _, err := graph.InferExpr(nil, g); err != nil {
		return nil, c.node.Errorf("%v", err)
	}
	return g, nil
}

// Const returns the value of e when it is a compile-time constant. A graph
// input is frozen to its supplied value when the importer was given one
// (see Options.Freeze). Otherwise it is an error naming the node and what.
func (c *Ctx) Const(e graph.Expr, what string) (*tensor.Tensor, error) {
	switch x := e.(type) {
	case *graph.Constant:
		return x.Value, nil
	case *graph.Var:
		if c.freeze != nil {
			if t, ok := c.freeze(x); ok {
				return t, nil
			}
		}
		return nil, c.node.Errorf("%s must be a compile-time constant, but it is graph input %q (kiln needs static shapes; give its value with --freeze %s=FILE)", what, x.Name, x.Name)
	case nil:
		return nil, c.node.Errorf("%s is missing", what)
	}
	if c.imp != nil {
		if t, ok := c.imp.evalFrozen(e); ok {
			return t, nil
		}
	}
	return nil, c.node.Errorf("%s must be a compile-time constant, but it is computed at run time by %s", what, graph.Describe(e))
}

// TensorType returns the type of a tensor-valued expression.
func (c *Ctx) TensorType(e graph.Expr) (*ir.TensorType, error) {
	t, err := ir.AsTensor(e.Type())
	if err != nil {
		return nil, c.node.Errorf("%v", err)
	}
	return t, nil
}

// Constant wraps a tensor as a graph constant.
func (c *Ctx) Constant(t *tensor.Tensor) graph.Expr { return graph.NewConstant(t) }
