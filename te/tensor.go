package te

import (
	"fmt"
	"math"
	"strconv"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
)

// Tensor is one output of an Operation. Tensors are created by
// Placeholder, Compute, ComputeReduce, Pad and Extern (never as literals):
// each owns a buffer that Tensor.At reads and that lowering turns into a
// function parameter, an allocation or, when inlined, nothing.
type Tensor struct {
	Name       string
	DType      ir.DType
	Shape      ir.Shape
	Op         Operation
	ValueIndex int

	buf *tir.Buffer
}

// At returns a read of t at the given indices: a BufferLoad of the
// tensor's buffer. Indices are converted to int32, the index type of te;
// there must be one per dimension (a wrong count is a bug in the operator
// definition and panics).
func (t *Tensor) At(idx ...tir.PrimExpr) tir.PrimExpr {
	if len(idx) != len(t.Shape) {
		panic(fmt.Sprintf("te: tensor %s has rank %d, read with %d indices", t.Name, len(t.Shape), len(idx)))
	}
	conv := make([]tir.PrimExpr, len(idx))
	for i, e := range idx {
		conv[i] = toIndex(e)
	}
	return tir.NewLoad(t.buf, conv...)
}

// Buffer returns the buffer that reads of t refer to (the function
// parameter when t is an argument of Lower).
func (t *Tensor) Buffer() *tir.Buffer { return t.buf }

// String returns the tensor's name.
func (t *Tensor) String() string { return t.Name }

func toIndex(e tir.PrimExpr) tir.PrimExpr {
	if e.Type() == tir.Int32T {
		return e
	}
	if !e.Type().IsInteger() {
		panic(fmt.Sprintf("te: index %s has non-integer type %s", tir.ExprString(e), e.Type()))
	}
	return tir.NewCast(tir.Int32T, e)
}

func newTensor(name string, dt ir.DType, shape ir.Shape, op Operation, index int, scope string) *Tensor {
	t := &Tensor{Name: name, DType: dt, Shape: shape.Clone(), Op: op, ValueIndex: index}
	t.buf = tir.NewBuffer(name, dt, shape, scope)
	t.buf.Producer = t
	return t
}

// tensorOfBuffer maps a buffer back to the tensor that owns it, so that
// the inputs of a compute can be found from the loads in its body. The
// link is held by the buffer itself: a load keeps its tensor alive for as
// long as the expression holding the load exists.
func tensorOfBuffer(b *tir.Buffer) *Tensor {
	if t, ok := b.Producer.(*Tensor); ok && t.buf == b {
		return t
	}
	return nil
}

// Operation produces tensors: a PlaceholderOp, ComputeOp or ExternOp.
type Operation interface {
	// OpName is the operation's name (the name of its first output).
	OpName() string
	// InputTensors are the tensors the operation reads, in first-use order.
	InputTensors() []*Tensor
	// Outputs are the tensors the operation produces.
	Outputs() []*Tensor
	isOperation()
}

// PlaceholderOp is an input of the computation.
type PlaceholderOp struct {
	Name   string
	Output *Tensor
}

// ComputeOp computes one tensor elementwise over its data-parallel Axis;
// when Reducer is set, the element is the reduction over ReduceAxis of
// Body, otherwise Body itself. Body refers to the axes' Vars.
type ComputeOp struct {
	Name       string
	Axis       []*IterVar
	ReduceAxis []*IterVar
	Reducer    *Reducer
	Body       tir.PrimExpr
	Tag        string
	Output     *Tensor
	inputs     []*Tensor
}

// ExternOp is a stage written directly as TIR: Build receives the buffers
// of Inputs and of the outputs and returns the statement that fills the
// outputs.
type ExternOp struct {
	Name   string
	Inputs []*Tensor
	Build  func(ins, outs []*tir.Buffer) tir.Stmt
	Outs   []*Tensor
}

func (*PlaceholderOp) isOperation() {}
func (*ComputeOp) isOperation()     {}
func (*ExternOp) isOperation()      {}

// OpName implements Operation.
func (o *PlaceholderOp) OpName() string { return o.Name }

// OpName implements Operation.
func (o *ComputeOp) OpName() string { return o.Name }

// OpName implements Operation.
func (o *ExternOp) OpName() string { return o.Name }

// InputTensors implements Operation: none.
func (o *PlaceholderOp) InputTensors() []*Tensor { return nil }

// InputTensors implements Operation: the tensors Body reads.
func (o *ComputeOp) InputTensors() []*Tensor { return o.inputs }

// InputTensors implements Operation.
func (o *ExternOp) InputTensors() []*Tensor { return o.Inputs }

// Outputs implements Operation.
func (o *PlaceholderOp) Outputs() []*Tensor { return []*Tensor{o.Output} }

// Outputs implements Operation.
func (o *ComputeOp) Outputs() []*Tensor { return []*Tensor{o.Output} }

// Outputs implements Operation.
func (o *ExternOp) Outputs() []*Tensor { return o.Outs }

// IsReduce reports whether the op is a reduction.
func (o *ComputeOp) IsReduce() bool { return o.Reducer != nil }

// IterKind says whether an iteration variable is data-parallel or a
// reduction.
type IterKind uint8

// Iteration kinds.
const (
	DataPar IterKind = iota // a data-parallel axis of the output
	Reduce                  // a reduction axis
)

// String returns "data_par" or "reduce".
func (k IterKind) String() string {
	if k == Reduce {
		return "reduce"
	}
	return "data_par"
}

// IterVar is an iteration variable: an axis of a compute (its Var appears
// in the body) or a loop created by a schedule (Split, Fuse). Extent is
// the nominal trip count; lowering recomputes it for stages whose region
// is narrowed by ComputeAt.
type IterVar struct {
	Var    *tir.Var
	Extent int64
	Kind   IterKind
	Name   string
}

// String returns the iter var's name.
func (iv *IterVar) String() string { return iv.Name }

func newIterVar(name string, extent int64, kind IterKind) *IterVar {
	return &IterVar{Var: tir.NewVar(name, tir.Int32T), Extent: extent, Kind: kind, Name: name}
}

// ReduceAxis returns a reduction axis over [0, extent).
func ReduceAxis(extent int64, name string) *IterVar {
	if extent <= 0 {
		panic(fmt.Sprintf("te.ReduceAxis %s: extent %d must be positive", name, extent))
	}
	return newIterVar(name, extent, Reduce)
}

// Reducer is a commutative, associative reduction: Combine(acc, x) folds
// x into the accumulator, which starts at Identity(dtype).
type Reducer struct {
	Name     string
	Identity func(dt ir.DType) tir.PrimExpr
	Combine  func(acc, x tir.PrimExpr) tir.PrimExpr
}

// The common reducers.
var (
	Sum  = Reducer{Name: "sum", Identity: func(dt ir.DType) tir.PrimExpr { return tir.Const(tir.Scalar(dt), 0) }, Combine: tir.Add}
	Prod = Reducer{Name: "prod", Identity: func(dt ir.DType) tir.PrimExpr { return tir.Const(tir.Scalar(dt), 1) }, Combine: tir.Mul}
	Max  = Reducer{Name: "max", Identity: MinValue, Combine: tir.Max}
	Min  = Reducer{Name: "min", Identity: MaxValue, Combine: tir.Min}
)

// MinValue returns the lowest value of dt (-inf for floats).
func MinValue(dt ir.DType) tir.PrimExpr {
	switch {
	case dt.IsFloat():
		return tir.FloatConst(dt, math.Inf(-1))
	case dt.IsUint(), dt == ir.Bool:
		return tir.IntConst(dt, 0)
	}
	return tir.IntConst(dt, -1<<(uint(dt.Size())*8-1))
}

// MaxValue returns the highest value of dt (+inf for floats).
func MaxValue(dt ir.DType) tir.PrimExpr {
	switch {
	case dt.IsFloat():
		return tir.FloatConst(dt, math.Inf(1))
	case dt == ir.Bool:
		return tir.IntConst(dt, 1)
	case dt.IsUint():
		return tir.IntConst(dt, -1) // all bits set, wrapped to the width
	}
	return tir.IntConst(dt, 1<<(uint(dt.Size())*8-1)-1)
}

// Placeholder declares an input tensor.
func Placeholder(name string, dt ir.DType, shape ir.Shape) *Tensor {
	op := &PlaceholderOp{Name: name}
	op.Output = newTensor(name, dt, shape, op, 0, "")
	return op.Output
}

// ComputeOption adjusts a Compute or ComputeReduce.
type ComputeOption func(*computeConfig)

type computeConfig struct {
	tag   string
	names []string
}

// WithTag records a tag on the op (e.g. "injective", "conv2d_nchw") for
// schedules that dispatch on it.
func WithTag(tag string) ComputeOption { return func(c *computeConfig) { c.tag = tag } }

// WithAxisNames names the data-parallel axes (default i0, i1, ...); the
// names appear as loop variables in the lowered TIR.
func WithAxisNames(names ...string) ComputeOption {
	return func(c *computeConfig) { c.names = names }
}

func makeAxes(shape ir.Shape, cfg *computeConfig) []*IterVar {
	axes := make([]*IterVar, len(shape))
	for d, n := range shape {
		name := "i" + strconv.Itoa(d)
		if d < len(cfg.names) && cfg.names[d] != "" {
			name = cfg.names[d]
		}
		axes[d] = newIterVar(name, n, DataPar)
	}
	return axes
}

func axisVars(axes []*IterVar) []tir.PrimExpr {
	out := make([]tir.PrimExpr, len(axes))
	for i, a := range axes {
		out[i] = a.Var
	}
	return out
}

// Compute declares out[i...] = body(i) over shape; i are the data-parallel
// axis variables (int32).
func Compute(name string, shape ir.Shape, body func(i []tir.PrimExpr) tir.PrimExpr, opts ...ComputeOption) *Tensor {
	return newCompute(name, shape, nil, nil, body, opts)
}

// ComputeReduce declares out[i...] = r.Combine over axes of body(i), where
// body refers to the Vars of axes (created with ReduceAxis).
func ComputeReduce(name string, shape ir.Shape, r Reducer, axes []*IterVar, body func(i []tir.PrimExpr) tir.PrimExpr, opts ...ComputeOption) *Tensor {
	for _, a := range axes {
		if a.Kind != Reduce {
			panic(fmt.Sprintf("te.ComputeReduce %s: axis %s is not a reduce axis", name, a.Name))
		}
	}
	rr := r
	return newCompute(name, shape, &rr, axes, body, opts)
}

func newCompute(name string, shape ir.Shape, r *Reducer, raxes []*IterVar, body func(i []tir.PrimExpr) tir.PrimExpr, opts []ComputeOption) *Tensor {
	cfg := &computeConfig{}
	for _, o := range opts {
		o(cfg)
	}
	for _, d := range shape {
		if d <= 0 {
			panic(fmt.Sprintf("te.Compute %s: shape %s has a non-positive dimension", name, shape))
		}
	}
	axes := makeAxes(shape, cfg)
	e := body(axisVars(axes))
	if e == nil || !e.Type().IsScalar() {
		panic(fmt.Sprintf("te.Compute %s: body must be a scalar expression", name))
	}
	op := &ComputeOp{Name: name, Axis: axes, ReduceAxis: append([]*IterVar(nil), raxes...), Reducer: r, Body: e, Tag: cfg.tag}
	op.inputs = readTensors(e)
	op.Output = newTensor(name, e.Type().DType, shape, op, 0, "")
	return op.Output
}

// readTensors lists the tensors whose buffers e loads, in first-use order.
// Loads of buffers that are not tensors are ignored here (Lower reports
// them).
func readTensors(e tir.PrimExpr) []*Tensor {
	var out []*Tensor
	seen := map[*tir.Buffer]bool{}
	tir.Visit(e, func(n tir.Node) bool {
		if ld, ok := n.(*tir.BufferLoad); ok && !seen[ld.Buffer] {
			seen[ld.Buffer] = true
			if t := tensorOfBuffer(ld.Buffer); t != nil {
				out = append(out, t)
			}
		}
		return true
	})
	return out
}

// IfThenElse returns cond ? a : b evaluating only the chosen branch (the
// tir if_then_else intrinsic), so a guarded read is never performed out of
// bounds.
func IfThenElse(cond, a, b tir.PrimExpr) tir.PrimExpr { return tir.IfThenElseExpr(cond, a, b) }

// Pad returns t padded with before[d] elements before and after[d]
// elements after each dimension d, filled with value (which must have t's
// dtype). Reads of t are guarded, so the pad is safe to inline.
func Pad(t *Tensor, before, after []int64, value tir.PrimExpr, name string) *Tensor {
	if len(before) != len(t.Shape) || len(after) != len(t.Shape) {
		panic(fmt.Sprintf("te.Pad %s: %d/%d pad widths for rank %d", name, len(before), len(after), len(t.Shape)))
	}
	if value.Type() != tir.Scalar(t.DType) {
		panic(fmt.Sprintf("te.Pad %s: pad value has type %s, tensor %s", name, value.Type(), t.DType))
	}
	shape := make(ir.Shape, len(t.Shape))
	for d := range shape {
		if before[d] < 0 || after[d] < 0 {
			panic(fmt.Sprintf("te.Pad %s: negative pad width", name))
		}
		shape[d] = t.Shape[d] + before[d] + after[d]
	}
	return Compute(name, shape, func(i []tir.PrimExpr) tir.PrimExpr {
		var cond tir.PrimExpr = tir.Bool(true)
		idx := make([]tir.PrimExpr, len(i))
		for d := range i {
			idx[d] = tir.Sub(i[d], tir.Idx(before[d]))
			if before[d] > 0 {
				cond = tir.And(cond, tir.GE(i[d], tir.Idx(before[d])))
			}
			if after[d] > 0 {
				cond = tir.And(cond, tir.LT(i[d], tir.Idx(before[d]+t.Shape[d])))
			}
		}
		if c, ok := tir.ConstInt(cond); ok && c != 0 {
			return t.At(idx...)
		}
		return IfThenElse(cond, t.At(idx...), value)
	}, WithTag("injective,pad"))
}

// Extern declares a stage written directly in TIR. It produces one tensor
// per outShapes entry; build receives the buffers of inputs and of the
// outputs (in order) and returns the statement that computes the outputs
// (it is called by Lower). Extern stages cannot be inlined, split or
// computed at another stage.
func Extern(name string, outShapes []ir.Shape, outDTypes []ir.DType, inputs []*Tensor, build func(ins, outs []*tir.Buffer) tir.Stmt) []*Tensor {
	if len(outShapes) != len(outDTypes) || len(outShapes) == 0 {
		panic(fmt.Sprintf("te.Extern %s: %d shapes and %d dtypes", name, len(outShapes), len(outDTypes)))
	}
	op := &ExternOp{Name: name, Inputs: append([]*Tensor(nil), inputs...), Build: build}
	for k := range outShapes {
		n := name
		if len(outShapes) > 1 {
			n = name + "_" + strconv.Itoa(k)
		}
		op.Outs = append(op.Outs, newTensor(n, outDTypes[k], outShapes[k], op, k, ""))
	}
	return append([]*Tensor(nil), op.Outs...)
}
