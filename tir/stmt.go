package tir

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// Stmt is a TIR statement. Like expressions, statements are immutable once
// built and may be shared.
type Stmt interface {
	Node
	isStmt()
}

// ForKind says how a loop's iterations may be executed.
type ForKind uint8

// Loop kinds. Code generation emits a plain loop for Serial, an OpenMP-style
// parallel loop for Parallel and a vectorization pragma for Vectorized;
// UnrollLoops expands small Unrolled loops (larger ones get an unroll
// pragma).
const (
	Serial ForKind = iota
	Parallel
	Vectorized
	Unrolled
)

var forKindNames = [...]string{Serial: "serial", Parallel: "parallel", Vectorized: "vectorized", Unrolled: "unroll"}

// String returns "serial", "parallel", "vectorized" or "unroll".
func (k ForKind) String() string {
	if int(k) < len(forKindNames) {
		return forKindNames[k]
	}
	return fmt.Sprintf("forkind(%d)", uint8(k))
}

// AnnOutline is the For annotation (bool true) asking code generation to
// emit the loop as a function of its own that is not inlined, called where
// the loop stood (te.Stage.Outline). Interpreters ignore it.
const AnnOutline = "kiln.outline"

// For runs Body for Var = Min, Min+1, ..., Min+Extent-1. Min and Extent
// have the type of Var, an integer. Annotations carry hints for later
// passes and code generation (e.g. "pragma_unroll_explicit"); nil means
// none.
type For struct {
	Var         *Var
	Min, Extent PrimExpr
	Kind        ForKind
	Body        Stmt
	Annotations ir.Attrs
}

// BufferStore writes Value to Buffer[Indices...].
type BufferStore struct {
	Buffer  *Buffer
	Value   PrimExpr
	Indices []PrimExpr
}

// Allocate allocates storage for Buffer (in Buffer.Scope) for the duration
// of Body; Buffer.Data is defined inside Body.
type Allocate struct {
	Buffer *Buffer
	Body   Stmt
}

// IfThenElse runs Then when Cond is true and Else (which may be nil)
// otherwise.
type IfThenElse struct {
	Cond PrimExpr
	Then Stmt
	Else Stmt
}

// LetStmt binds Var to Value inside Body.
type LetStmt struct {
	Var   *Var
	Value PrimExpr
	Body  Stmt
}

// SeqStmt runs statements in order.
type SeqStmt struct {
	Seq []Stmt
}

// Evaluate evaluates an expression for its effect (usually a call_extern).
// Evaluate of a constant is the no-op statement.
type Evaluate struct {
	Value PrimExpr
}

// AttrStmt attaches a keyed hint to Body (e.g. "pragma_import_c",
// "device_scope"). Value may be a StringImm.
type AttrStmt struct {
	Key   string
	Value PrimExpr
	Body  Stmt
}

func (*For) isNode()         {}
func (*BufferStore) isNode() {}
func (*Allocate) isNode()    {}
func (*IfThenElse) isNode()  {}
func (*LetStmt) isNode()     {}
func (*SeqStmt) isNode()     {}
func (*Evaluate) isNode()    {}
func (*AttrStmt) isNode()    {}

func (*For) isStmt()         {}
func (*BufferStore) isStmt() {}
func (*Allocate) isStmt()    {}
func (*IfThenElse) isStmt()  {}
func (*LetStmt) isStmt()     {}
func (*SeqStmt) isStmt()     {}
func (*Evaluate) isStmt()    {}
func (*AttrStmt) isStmt()    {}

// NewFor builds a loop; min and extent must have the loop variable's
// integer type.
func NewFor(v *Var, min, extent PrimExpr, kind ForKind, body Stmt) *For {
	if !v.T.IsInteger() {
		panic(fmt.Sprintf("tir.For: loop variable %s has type %s", v.Name, v.T))
	}
	if min.Type() != v.T || extent.Type() != v.T {
		panic(fmt.Sprintf("tir.For: loop %s of type %s has bounds of type %s, %s", v.Name, v.T, min.Type(), extent.Type()))
	}
	return &For{Var: v, Min: min, Extent: extent, Kind: kind, Body: body}
}

// Loop is a shorthand for a loop from 0 with a constant extent of the
// loop variable's type.
func Loop(v *Var, extent int64, kind ForKind, body Stmt) *For {
	return NewFor(v, IntConst(v.T.DType, 0), IntConst(v.T.DType, extent), kind, body)
}

// NewStore builds b[indices...] = value; value must have b's dtype.
func NewStore(b *Buffer, value PrimExpr, indices ...PrimExpr) *BufferStore {
	checkIndices("BufferStore", b, indices)
	if value.Type() != Scalar(b.DType) {
		panic(fmt.Sprintf("tir.BufferStore: storing %s into %s buffer %s", value.Type(), b.DType, b.Name))
	}
	return &BufferStore{Buffer: b, Value: value, Indices: indices}
}

// NewIf builds an if statement; els may be nil.
func NewIf(cond PrimExpr, then, els Stmt) *IfThenElse {
	if !cond.Type().IsBool() {
		panic(fmt.Sprintf("tir.IfThenElse: condition has type %s", cond.Type()))
	}
	return &IfThenElse{Cond: cond, Then: then, Else: els}
}

// NewLet builds a let statement; value must have v's type.
func NewLet(v *Var, value PrimExpr, body Stmt) *LetStmt {
	if value.Type() != v.T {
		panic(fmt.Sprintf("tir.LetStmt: binding %s of type %s to %s", v.Name, v.T, value.Type()))
	}
	return &LetStmt{Var: v, Value: value, Body: body}
}

// Seq builds a sequence, flattening nested SeqStmts and dropping nil
// statements; a single statement is returned as is.
func Seq(stmts ...Stmt) Stmt {
	var out []Stmt
	for _, s := range stmts {
		switch x := s.(type) {
		case nil:
		case *SeqStmt:
			out = append(out, x.Seq...)
		default:
			out = append(out, s)
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return &SeqStmt{Seq: out}
}

// Eval wraps an expression in an Evaluate statement.
func Eval(e PrimExpr) *Evaluate { return &Evaluate{Value: e} }

// NoOp returns the statement that does nothing (Evaluate(0)).
func NoOp() Stmt { return &Evaluate{Value: Int32(0)} }

// IsNoOp reports whether s certainly does nothing: Evaluate of a constant
// or an empty sequence.
func IsNoOp(s Stmt) bool {
	switch x := s.(type) {
	case nil:
		return true
	case *Evaluate:
		switch x.Value.(type) {
		case *IntImm, *FloatImm, *StringImm:
			return true
		}
	case *SeqStmt:
		for _, c := range x.Seq {
			if !IsNoOp(c) {
				return false
			}
		}
		return true
	}
	return false
}
