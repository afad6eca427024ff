package tir

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// Type is the type of a TIR expression or variable. A scalar type is an
// ir.DType with Handle false; a handle (pointer) has Handle true and DType
// naming the element type it points to (Invalid for an opaque pointer).
// The zero Type is Void, the result type of external calls made only for
// their side effects.
type Type struct {
	DType  ir.DType
	Handle bool
}

// Void is the type of an expression that yields no value.
var Void = Type{}

// Scalar returns the scalar type of dtype d.
func Scalar(d ir.DType) Type { return Type{DType: d} }

// HandleOf returns the type of a pointer to elements of dtype d.
func HandleOf(d ir.DType) Type { return Type{DType: d, Handle: true} }

// Common scalar types.
var (
	Int32T   = Scalar(ir.Int32)
	Int64T   = Scalar(ir.Int64)
	Float32T = Scalar(ir.Float32)
	Float64T = Scalar(ir.Float64)
	BoolT    = Scalar(ir.Bool)
)

// IsVoid reports whether t is Void.
func (t Type) IsVoid() bool { return t == Void }

// IsScalar reports whether t is a scalar (non-handle, non-void) type.
func (t Type) IsScalar() bool { return !t.Handle && t.DType != ir.Invalid }

// IsInteger reports whether t is a signed or unsigned integer scalar.
func (t Type) IsInteger() bool { return !t.Handle && t.DType.IsInteger() }

// IsFloat reports whether t is a floating-point scalar.
func (t Type) IsFloat() bool { return !t.Handle && t.DType.IsFloat() }

// IsBool reports whether t is the bool scalar.
func (t Type) IsBool() bool { return !t.Handle && t.DType == ir.Bool }

// String prints "float32", "handle(float32)", "handle" or "void".
func (t Type) String() string {
	switch {
	case t.Handle && t.DType == ir.Invalid:
		return "handle"
	case t.Handle:
		return "handle(" + t.DType.String() + ")"
	case t.DType == ir.Invalid:
		return "void"
	}
	return t.DType.String()
}

// Node is implemented by every TIR expression and statement.
type Node interface{ isNode() }

// PrimExpr is a typed TIR expression. Expressions are immutable once built:
// passes build new nodes instead of editing old ones, so subtrees may be
// shared.
type PrimExpr interface {
	Node
	// Type is the type of the value the expression computes.
	Type() Type
}

// IntImm is an integer (or bool) constant. Value holds the value already
// wrapped to the width of T (unsigned 64-bit values as their bit pattern).
type IntImm struct {
	T     Type
	Value int64
}

// FloatImm is a floating-point constant.
type FloatImm struct {
	T     Type
	Value float64
}

// StringImm is a string constant, used for extern names and string
// arguments of external calls. Its type is a handle to int8 (a C string).
type StringImm struct {
	Value string
}

// Var is a variable: a function parameter, loop variable, let-bound value
// or the data pointer of a buffer. Variables are compared by identity; Name
// is only a hint for printing.
type Var struct {
	Name string
	T    Type
}

// BinaryOp names a binary operation.
type BinaryOp uint8

// Binary operations. Div and Mod on integers follow C (truncate toward
// zero); FloorDiv and FloorMod round toward negative infinity. On floats
// Div is true division, Mod is fmod, FloorDiv is floor(a/b) and FloorMod is
// a - floor(a/b)*b. Comparisons yield bool; And and Or take bools.
const (
	OpAdd BinaryOp = iota + 1
	OpSub
	OpMul
	OpDiv
	OpMod
	OpFloorDiv
	OpFloorMod
	OpMin
	OpMax
	OpEQ
	OpNE
	OpLT
	OpLE
	OpGT
	OpGE
	OpAnd
	OpOr
)

var binaryOpNames = [...]string{
	OpAdd: "add", OpSub: "sub", OpMul: "mul", OpDiv: "div", OpMod: "mod",
	OpFloorDiv: "floordiv", OpFloorMod: "floormod", OpMin: "min", OpMax: "max",
	OpEQ: "eq", OpNE: "ne", OpLT: "lt", OpLE: "le", OpGT: "gt", OpGE: "ge",
	OpAnd: "and", OpOr: "or",
}

// String returns the lower-case name of the operation ("add", "floordiv").
func (op BinaryOp) String() string {
	if int(op) < len(binaryOpNames) && binaryOpNames[op] != "" {
		return binaryOpNames[op]
	}
	return fmt.Sprintf("binaryop(%d)", uint8(op))
}

// IsCompare reports whether op is a comparison (result bool).
func (op BinaryOp) IsCompare() bool { return op >= OpEQ && op <= OpGE }

// IsLogical reports whether op is And or Or.
func (op BinaryOp) IsLogical() bool { return op == OpAnd || op == OpOr }

// IsCommutative reports whether op(a, b) == op(b, a).
func (op BinaryOp) IsCommutative() bool {
	switch op {
	case OpAdd, OpMul, OpMin, OpMax, OpEQ, OpNE, OpAnd, OpOr:
		return true
	}
	return false
}

// Binary is a binary operation. Both operands have the same scalar type.
type Binary struct {
	Op   BinaryOp
	A, B PrimExpr
}

// Not is logical negation of a bool.
type Not struct {
	A PrimExpr
}

// Select is a conditional value. Unlike the if_then_else intrinsic both
// True and False are evaluated, so they must be safe to evaluate.
type Select struct {
	Cond        PrimExpr
	True, False PrimExpr
}

// Cast converts a scalar to another scalar type with C semantics
// (float→int truncates, int→narrower int wraps, nonzero→bool is true).
type Cast struct {
	T     Type
	Value PrimExpr
}

// BufferLoad reads one element of a buffer. It has one index per buffer
// dimension.
type BufferLoad struct {
	Buffer  *Buffer
	Indices []PrimExpr
}

// Call calls an intrinsic (Op) or, when Op is CallExtern, the external C
// function named Extern. T is the result type (Void allowed for externs).
// Kernel, set only with CallExtern, is a function kiln defines itself (see
// Kernel); Extern is then its symbol.
type Call struct {
	T      Type
	Op     Intrinsic
	Extern string
	Args   []PrimExpr
	Kernel Kernel
}

func (*IntImm) isNode()     {}
func (*FloatImm) isNode()   {}
func (*StringImm) isNode()  {}
func (*Var) isNode()        {}
func (*Binary) isNode()     {}
func (*Not) isNode()        {}
func (*Select) isNode()     {}
func (*Cast) isNode()       {}
func (*BufferLoad) isNode() {}
func (*Call) isNode()       {}

// Type implements PrimExpr.
func (e *IntImm) Type() Type { return e.T }

// Type implements PrimExpr.
func (e *FloatImm) Type() Type { return e.T }

// Type implements PrimExpr: a handle to int8 (char*).
func (e *StringImm) Type() Type { return HandleOf(ir.Int8) }

// Type implements PrimExpr.
func (e *Var) Type() Type { return e.T }

// Type implements PrimExpr: bool for comparisons and logic, else the
// operand type.
func (e *Binary) Type() Type {
	if e.Op.IsCompare() || e.Op.IsLogical() {
		return BoolT
	}
	return e.A.Type()
}

// Type implements PrimExpr.
func (e *Not) Type() Type { return BoolT }

// Type implements PrimExpr.
func (e *Select) Type() Type { return e.True.Type() }

// Type implements PrimExpr.
func (e *Cast) Type() Type { return e.T }

// Type implements PrimExpr: the buffer's element type.
func (e *BufferLoad) Type() Type { return Scalar(e.Buffer.DType) }

// Type implements PrimExpr.
func (e *Call) Type() Type { return e.T }

// String returns the variable's name.
func (v *Var) String() string { return v.Name }

// NewVar returns a fresh variable.
func NewVar(name string, t Type) *Var { return &Var{Name: name, T: t} }

// IntConst returns an integer (or bool) constant of dtype d, wrapping v to
// the width of d.
func IntConst(d ir.DType, v int64) *IntImm {
	if !d.IsInteger() && d != ir.Bool {
		panic(fmt.Sprintf("tir.IntConst: dtype %s is not an integer type", d))
	}
	return &IntImm{T: Scalar(d), Value: wrapInt(v, d)}
}

// Int32 returns an int32 constant.
func Int32(v int64) *IntImm { return IntConst(ir.Int32, v) }

// Int64 returns an int64 constant.
func Int64(v int64) *IntImm { return IntConst(ir.Int64, v) }

// Bool returns a bool constant.
func Bool(b bool) *IntImm {
	if b {
		return IntConst(ir.Bool, 1)
	}
	return IntConst(ir.Bool, 0)
}

// FloatConst returns a floating-point constant of dtype d, rounded to d.
func FloatConst(d ir.DType, v float64) *FloatImm {
	if !d.IsFloat() {
		panic(fmt.Sprintf("tir.FloatConst: dtype %s is not a float type", d))
	}
	return &FloatImm{T: Scalar(d), Value: roundFloat(v, d)}
}

// Float32 returns a float32 constant.
func Float32(v float64) *FloatImm { return FloatConst(ir.Float32, v) }

// Const returns a constant of scalar type t holding v (truncated for
// integer types, v != 0 for bool).
func Const(t Type, v float64) PrimExpr {
	switch {
	case t.IsFloat():
		return FloatConst(t.DType, v)
	case t.IsBool():
		return Bool(v != 0)
	case t.IsInteger():
		return IntConst(t.DType, int64(v))
	}
	panic(fmt.Sprintf("tir.Const: no constants of type %s", t))
}

// Str returns a string constant.
func Str(s string) *StringImm { return &StringImm{Value: s} }

// Bin builds a binary node without folding. Operands must have the same
// scalar type; And and Or need bools; arithmetic needs numeric types.
func Bin(op BinaryOp, a, b PrimExpr) *Binary {
	checkBinary(op, a, b)
	return &Binary{Op: op, A: a, B: b}
}

func checkBinary(op BinaryOp, a, b PrimExpr) {
	if err := binaryErr(op, a.Type(), b.Type()); err != nil {
		panic("tir." + err.Error())
	}
}

// binaryErr reports why op cannot be applied to operands of types ta, tb.
func binaryErr(op BinaryOp, ta, tb Type) error {
	if op < OpAdd || op > OpOr {
		return fmt.Errorf("invalid binary op %d", op)
	}
	switch {
	case ta != tb:
		return fmt.Errorf("%s: operand types differ: %s vs %s", op, ta, tb)
	case !ta.IsScalar():
		return fmt.Errorf("%s: operands must be scalars, got %s", op, ta)
	case op.IsLogical() && !ta.IsBool():
		return fmt.Errorf("%s: operands must be bool, got %s", op, ta)
	case !op.IsLogical() && !op.IsCompare() && ta.IsBool():
		return fmt.Errorf("%s: arithmetic on bool", op)
	}
	return nil
}

// NewNot builds logical negation of a bool expression (folding constants).
func NewNot(a PrimExpr) PrimExpr {
	if !a.Type().IsBool() {
		panic(fmt.Sprintf("tir.Not: operand must be bool, got %s", a.Type()))
	}
	if c, ok := a.(*IntImm); ok {
		return Bool(c.Value == 0)
	}
	if n, ok := a.(*Not); ok {
		return n.A
	}
	return &Not{A: a}
}

// NewSelect builds Select(cond, t, f); cond must be bool and t, f agree.
func NewSelect(cond, t, f PrimExpr) *Select {
	if !cond.Type().IsBool() {
		panic(fmt.Sprintf("tir.Select: condition must be bool, got %s", cond.Type()))
	}
	if t.Type() != f.Type() {
		panic(fmt.Sprintf("tir.Select: branch types differ: %s vs %s", t.Type(), f.Type()))
	}
	return &Select{Cond: cond, True: t, False: f}
}

// NewCast converts v to scalar type t; a cast to v's own type returns v and
// constants are folded.
func NewCast(t Type, v PrimExpr) PrimExpr {
	if !t.IsScalar() || !v.Type().IsScalar() {
		panic(fmt.Sprintf("tir.Cast: cannot cast %s to %s", v.Type(), t))
	}
	if v.Type() == t {
		return v
	}
	if c, ok := foldCast(t, v); ok {
		return c
	}
	return &Cast{T: t, Value: v}
}

// NewLoad builds b[indices...]; the number of indices must equal b's rank
// and every index must be an integer.
func NewLoad(b *Buffer, indices ...PrimExpr) *BufferLoad {
	checkIndices("BufferLoad", b, indices)
	return &BufferLoad{Buffer: b, Indices: indices}
}

func checkIndices(what string, b *Buffer, indices []PrimExpr) {
	if len(indices) != len(b.Shape) {
		panic(fmt.Sprintf("tir.%s: buffer %s has %d dims, got %d indices", what, b.Name, len(b.Shape), len(indices)))
	}
	for i, ix := range indices {
		if !ix.Type().IsInteger() {
			panic(fmt.Sprintf("tir.%s: index %d of buffer %s has type %s", what, i, b.Name, ix.Type()))
		}
	}
}

// Idx converts an int to the int32 constant used for loop bounds and
// indices; it is a shorthand for Int32.
func Idx(v int64) *IntImm { return Int32(v) }
