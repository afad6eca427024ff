// Package pattern is kiln's dataflow pattern language (seed 002, after
// TVM's dataflow pattern language): patterns over graph IR expressions
// built from wildcards, operator calls, variables, constants, tuples,
// tuple projections, alternatives, optional suffixes, attribute and type
// checks and dominator patterns, with three uses:
//
//   - Match: does an expression have the shape of a pattern, and which
//     sub-expression did each sub-pattern match?
//   - Rewrite: replace every match by what a callback builds from it,
//     until nothing matches any more.
//   - Partition: wrap every (accepted) match into a call of a function
//     literal carrying attributes; MergeComposite (package partition) is
//     Partition with a Composite attribute per pattern of a target's
//     pattern table.
//
// It sits before partitioning in the pipeline:
//
//	graph passes → MergeComposite (patterns) → Annotate → merge regions → Outline → ...
//
// Calls of add and multiply match commutatively: IsOp(op.Add, a, b)
// matches add(x, y) with a on y and b on x when the first order fails.
// A pattern object used twice in one pattern must match the same
// expression both times (IsOp(op.Add, x, x) matches add(e, e) only).
package pattern

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
)

// Pattern is a node of the pattern language. Its String is a stable,
// readable form (used in errors and golden tests).
type Pattern interface {
	String() string
	// match reports whether e matches, recording bindings in m.
	match(m *matcher, e graph.Expr) bool
}

// WildcardPattern matches any expression. (Its field keeps it from being
// zero-sized: distinct wildcards must be distinct pointers.)
type WildcardPattern struct{ _ byte }

// Wildcard returns a pattern matching any expression (TVM's wildcard()).
// Each call returns a new pattern, so two wildcards may match different
// expressions.
func Wildcard() *WildcardPattern { return &WildcardPattern{} }

// String implements Pattern.
func (*WildcardPattern) String() string { return "*" }

// VarPattern matches a function parameter, by name unless Name is "".
type VarPattern struct{ Name string }

// IsVar matches a parameter named name ("" for any parameter).
func IsVar(name string) *VarPattern { return &VarPattern{Name: name} }

// String implements Pattern.
func (p *VarPattern) String() string {
	if p.Name == "" {
		return "var"
	}
	return "%" + p.Name
}

// ConstantPattern matches a tensor constant. A parameter does not match
// until its value is bound into the function as a constant.
type ConstantPattern struct{ _ byte }

// IsConstant matches any constant.
func IsConstant() *ConstantPattern { return &ConstantPattern{} }

// String implements Pattern.
func (*ConstantPattern) String() string { return "const" }

// ExprPattern matches one given expression (pointer identity).
type ExprPattern struct{ Expr graph.Expr }

// IsExpr matches exactly e.
func IsExpr(e graph.Expr) *ExprPattern { return &ExprPattern{Expr: e} }

// String implements Pattern.
func (p *ExprPattern) String() string { return "expr(" + graph.Describe(p.Expr) + ")" }

// CallPattern matches a call. The callee is given by Op (an operator),
// by OpKind (any operator of that fusion pattern, TVM's TOpPattern
// attribute) or by Fn (a pattern the called function literal or global
// must match). Args must match the arguments one to one unless AnyArgs is
// set.
type CallPattern struct {
	Op      *op.Op
	OpKind  *op.Pattern
	Fn      Pattern
	Args    []Pattern
	AnyArgs bool
}

// IsOp matches a call of operator o whose arguments match args (exactly
// len(args) of them). For add and multiply the two arguments also match
// in swapped order.
func IsOp(o *op.Op, args ...Pattern) *CallPattern { return &CallPattern{Op: o, Args: args} }

// IsOpAnyArgs matches a call of operator o with any arguments.
func IsOpAnyArgs(o *op.Op) *CallPattern { return &CallPattern{Op: o, AnyArgs: true} }

// IsOpOfKind matches a call of any operator whose fusion pattern is kind
// (TVM's has_attr({"TOpPattern": kind}) on the callee), with arguments
// matching args.
func IsOpOfKind(kind op.Pattern, args ...Pattern) *CallPattern {
	k := kind
	return &CallPattern{OpKind: &k, Args: args}
}

// IsCall matches a call of a function (a literal or a global) matching
// fn, with arguments matching args.
func IsCall(fn Pattern, args ...Pattern) *CallPattern { return &CallPattern{Fn: fn, Args: args} }

// String implements Pattern.
func (p *CallPattern) String() string {
	var callee string
	switch {
	case p.Op != nil:
		callee = p.Op.Name
	case p.OpKind != nil:
		callee = "op<" + p.OpKind.String() + ">"
	case p.Fn != nil:
		callee = "(" + p.Fn.String() + ")"
	default:
		callee = "call"
	}
	if p.AnyArgs {
		return callee + "(...)"
	}
	return callee + "(" + join(p.Args) + ")"
}

// FunctionPattern matches a function literal whose body matches Body (any
// body when nil); with HasAttr it checks function attributes such as
// Composite.
type FunctionPattern struct{ Body Pattern }

// IsFunction matches a function literal whose body matches body (nil: any
// function).
func IsFunction(body Pattern) *FunctionPattern { return &FunctionPattern{Body: body} }

// String implements Pattern.
func (p *FunctionPattern) String() string {
	if p.Body == nil {
		return "fn"
	}
	return "fn{" + p.Body.String() + "}"
}

// TuplePattern matches a tuple: field by field, or any tuple when
// AnyArity is set.
type TuplePattern struct {
	Fields   []Pattern
	AnyArity bool
}

// IsTuple matches a tuple of exactly len(fields) fields matching fields.
func IsTuple(fields ...Pattern) *TuplePattern { return &TuplePattern{Fields: fields} }

// IsTupleAnyArity matches any tuple.
func IsTupleAnyArity() *TuplePattern { return &TuplePattern{AnyArity: true} }

// String implements Pattern.
func (p *TuplePattern) String() string {
	if p.AnyArity {
		return "(...)"
	}
	return "(" + join(p.Fields) + ")"
}

// TupleGetItemPattern matches a tuple projection of a value matching
// Tuple, at Index or at any index when Index is negative.
type TupleGetItemPattern struct {
	Tuple Pattern
	Index int
}

// IsTupleGetItem matches t.index (index < 0: any index).
func IsTupleGetItem(t Pattern, index int) *TupleGetItemPattern {
	return &TupleGetItemPattern{Tuple: t, Index: index}
}

// String implements Pattern.
func (p *TupleGetItemPattern) String() string {
	if p.Index < 0 {
		return p.Tuple.String() + ".*"
	}
	return fmt.Sprintf("%s.%d", p.Tuple, p.Index)
}

// AltPattern matches when any of its alternatives does, tried in order.
type AltPattern struct{ Alts []Pattern }

// Alt matches what any of alts matches; the first alternative that
// matches wins.
func Alt(alts ...Pattern) *AltPattern { return &AltPattern{Alts: alts} }

// String implements Pattern.
func (p *AltPattern) String() string {
	parts := make([]string, len(p.Alts))
	for i, a := range p.Alts {
		parts[i] = a.String()
	}
	return "(" + strings.Join(parts, " | ") + ")"
}

// Optional matches wrap(p) or p alone: an optional suffix such as a relu
// after a convolution (TVM's p.optional(wrap)). The longer form is tried
// first.
func Optional(p Pattern, wrap func(Pattern) Pattern) *AltPattern {
	return Alt(wrap(p), p)
}

// AttrPattern matches what P matches when the matched expression carries
// the attributes Attrs: call attributes for an operator call (data_layout,
// strides, ...), function attributes for a function literal or a call of
// one (Composite, Compiler, ...). Values compare as printed, so an int
// matches an int64 of the same value.
type AttrPattern struct {
	P     Pattern
	Attrs ir.Attrs
}

// HasAttr matches what p matches and requires attrs (see AttrPattern).
// Go ints and float32s in attrs are stored widened to int64 and float64.
func HasAttr(p Pattern, attrs ir.Attrs) *AttrPattern {
	norm := ir.Attrs{}
	for k, v := range attrs {
		norm[k] = normalize(v)
	}
	return &AttrPattern{P: p, Attrs: norm}
}

// String implements Pattern.
func (p *AttrPattern) String() string { return p.P.String() + "{" + p.Attrs.String() + "}" }

// TypePattern matches what P matches when the expression's checked type
// is a tensor type with DType (unless nil) and Shape (unless nil), or is
// equal to Type (unless nil).
type TypePattern struct {
	P     Pattern
	Type  ir.Type
	DType *ir.DType
	Shape ir.Shape
}

// HasType matches what p matches when its type equals t.
func HasType(p Pattern, t ir.Type) *TypePattern { return &TypePattern{P: p, Type: t} }

// HasDType matches what p matches when it is a tensor of dtype d.
func HasDType(p Pattern, d ir.DType) *TypePattern { return &TypePattern{P: p, DType: &d} }

// HasShape matches what p matches when it is a tensor of the given shape.
func HasShape(p Pattern, shape ...int64) *TypePattern {
	return &TypePattern{P: p, Shape: append(ir.Shape{}, shape...)}
}

// String implements Pattern.
func (p *TypePattern) String() string {
	var parts []string
	if p.Type != nil {
		parts = append(parts, "type="+p.Type.String())
	}
	if p.DType != nil {
		parts = append(parts, "dtype="+p.DType.String())
	}
	if p.Shape != nil {
		parts = append(parts, fmt.Sprintf("shape=%v", []int64(p.Shape)))
	}
	return p.P.String() + "<" + strings.Join(parts, ", ") + ">"
}

// DominatorPattern matches a Child whose inputs, followed upwards through
// any number of expressions matching Path, all lead to one expression
// matching Parent, and whose path expressions are used only inside that
// region (TVM's dominates(parent, path, child)): the diamond
// conv2d → (elementwise paths) → add, for example.
type DominatorPattern struct {
	Parent, Path, Child Pattern
}

// Dominates builds a DominatorPattern.
func Dominates(parent, path, child Pattern) *DominatorPattern {
	return &DominatorPattern{Parent: parent, Path: path, Child: child}
}

// String implements Pattern.
func (p *DominatorPattern) String() string {
	return fmt.Sprintf("dominates(%s, %s, %s)", p.Parent, p.Path, p.Child)
}

func join(ps []Pattern) string {
	parts := make([]string, len(ps))
	for i, a := range ps {
		parts[i] = a.String()
	}
	return strings.Join(parts, ", ")
}
