// Package graph is kiln's high-level dataflow IR, in the spirit of TVM's
// Relay: variables, constants, calls of operators or functions, tuples and
// tuple projections, functions with attributes, and a Module of named
// functions. It is what the ONNX frontend produces, what graph passes and
// partitioning transform, and what lowering consumes.
//
// Expressions form a DAG: a node used twice is the same pointer. Nodes are
// immutable after construction except for their cached checked type, which
// InferTypes fills in.
package graph

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Expr is a graph IR expression.
type Expr interface {
	// Type is the checked type, or nil before inference.
	Type() ir.Type
	setType(ir.Type)
	isExpr()
}

type exprBase struct{ ty ir.Type }

func (e *exprBase) Type() ir.Type     { return e.ty }
func (e *exprBase) setType(t ir.Type) { e.ty = t }
func (*exprBase) isExpr()             {}

// Var is a function parameter. Its annotated type is also its checked type.
type Var struct {
	exprBase
	Name string
}

// NewVar makes a parameter of the given type.
func NewVar(name string, t ir.Type) *Var {
	v := &Var{Name: name}
	v.ty = t
	return v
}

// Constant is a tensor literal.
type Constant struct {
	exprBase
	Value *tensor.Tensor
}

// NewConstant wraps a tensor; its type is the tensor's type.
func NewConstant(t *tensor.Tensor) *Constant {
	c := &Constant{Value: t}
	c.ty = t.Type()
	return c
}

// Call applies an operator (Op set) or a function (Fn set: a *Function or a
// *GlobalVar) to arguments. Attrs are the operator's attributes (complete,
// see op.Op.MakeAttrs); calls of functions carry none.
type Call struct {
	exprBase
	Op    *op.Op
	Fn    Expr
	Args  []Expr
	Attrs ir.Attrs
	// Span names where the call came from (the ONNX node name), for
	// diagnostics and the partition report. It is not part of the semantics.
	Span string
}

// NewCall makes an operator call with attributes completed from the op's
// declaration. It returns an error for unknown or ill-kinded attributes.
func NewCall(o *op.Op, args []Expr, attrs ir.Attrs) (*Call, error) {
	for i, a := range args {
		if a == nil {
			return nil, fmt.Errorf("%s: argument %d is missing", o.Name, i)
		}
	}
	full, err := o.MakeAttrs(attrs)
	if err != nil {
		return nil, err
	}
	return &Call{Op: o, Args: args, Attrs: full}, nil
}

// MustCall is NewCall for attributes known to be valid (compiler-internal
// construction); it panics on error.
func MustCall(o *op.Op, args []Expr, attrs ir.Attrs) *Call {
	c, err := NewCall(o, args, attrs)
	if err != nil {
		panic(err)
	}
	return c
}

// NewFuncCall makes a call of a function or global.
func NewFuncCall(fn Expr, args []Expr) *Call {
	return &Call{Fn: fn, Args: args}
}

// Tuple groups values.
type Tuple struct {
	exprBase
	Fields []Expr
}

// NewTuple makes a tuple.
func NewTuple(fields []Expr) *Tuple { return &Tuple{Fields: fields} }

// TupleGetItem projects field Index out of a tuple-typed expression.
type TupleGetItem struct {
	exprBase
	Tuple Expr
	Index int
}

// NewTupleGetItem makes a projection.
func NewTupleGetItem(t Expr, i int) *TupleGetItem { return &TupleGetItem{Tuple: t, Index: i} }

// GlobalVar refers to a function of the enclosing Module by name.
type GlobalVar struct {
	exprBase
	Name string
}

// NewGlobalVar makes a reference to a module function.
func NewGlobalVar(name string) *GlobalVar { return &GlobalVar{Name: name} }

// Well-known function attribute names.
const (
	AttrComposite              = "Composite"              // string: pattern name of a composite function
	AttrCompiler               = "Compiler"               // string: external codegen that takes the function
	AttrGlobalSymbol           = "global_symbol"          // string: exported symbol name
	AttrPrimitive              = "Primitive"              // bool: a fused primitive function
	AttrPartitionedFromPattern = "PartitionedFromPattern" // string: ops of the matched pattern
	AttrInline                 = "Inline"                 // bool: inline into the caller
)

// Function is a function literal. Attrs carry Composite, Compiler,
// global_symbol, Primitive and similar markers.
type Function struct {
	exprBase
	Params  []*Var
	Body    Expr
	RetType ir.Type // optional annotation; set by inference when nil
	Attrs   ir.Attrs
}

// NewFunction makes a function; attrs may be nil.
func NewFunction(params []*Var, body Expr, attrs ir.Attrs) *Function {
	if attrs == nil {
		attrs = ir.Attrs{}
	}
	return &Function{Params: params, Body: body, Attrs: attrs}
}

// StrAttr returns a string function attribute or "".
func (f *Function) StrAttr(name string) string {
	if v, ok := f.Attrs[name].(string); ok {
		return v
	}
	return ""
}

// BoolAttr returns a bool function attribute or false.
func (f *Function) BoolAttr(name string) bool {
	v, _ := f.Attrs[name].(bool)
	return v
}

// FuncType returns the function's type from its parameters and body type.
func (f *Function) FuncType() *ir.FuncType {
	ps := make([]ir.Type, len(f.Params))
	for i, p := range f.Params {
		ps[i] = p.Type()
	}
	ret := f.RetType
	if ret == nil && f.Body != nil {
		ret = f.Body.Type()
	}
	return &ir.FuncType{Params: ps, Ret: ret}
}

// Describe names an expression for error messages: the op or node kind,
// plus the span when there is one.
func Describe(e Expr) string {
	switch x := e.(type) {
	case *Var:
		return "%" + x.Name
	case *Constant:
		return "constant " + x.Type().String()
	case *Call:
		name := "call"
		if x.Op != nil {
			name = x.Op.Name
		} else if g, ok := x.Fn.(*GlobalVar); ok {
			name = "@" + g.Name
		}
		if x.Span != "" {
			return fmt.Sprintf("%s (node %q)", name, x.Span)
		}
		return name
	case *Tuple:
		return "tuple"
	case *TupleGetItem:
		return fmt.Sprintf("tuple item %d", x.Index)
	case *GlobalVar:
		return "@" + x.Name
	case *Function:
		return "function"
	}
	return fmt.Sprintf("%T", e)
}
