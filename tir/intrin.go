package tir

import (
	"fmt"
	"math"
)

// Intrinsic identifies the operation of a Call: a math function known to
// the compiler, one of the special forms (if_then_else, address_of), or
// CallExtern, a call to an external C function named in Call.Extern.
type Intrinsic uint8

// The intrinsics. Math intrinsics take and return floats of one type
// (isnan/isinf/isfinite return bool). Round rounds half away from zero (C
// round); NearbyInt rounds half to even (C nearbyint).
const (
	CallExtern       Intrinsic = iota + 1 // call_extern: result type given, any args
	IntrinIfThenElse                      // if_then_else(cond, a, b): evaluates only the chosen branch
	IntrinAddressOf                       // address_of(buf[i...]): pointer to one element
	IntrinExp
	IntrinExp2
	IntrinLog
	IntrinLog2
	IntrinLog10
	IntrinSqrt
	IntrinRsqrt
	IntrinTanh
	IntrinSigmoid
	IntrinFabs
	IntrinFloor
	IntrinCeil
	IntrinRound
	IntrinNearbyInt
	IntrinTrunc
	IntrinErf
	IntrinSin
	IntrinCos
	IntrinTan
	IntrinAsin
	IntrinAcos
	IntrinAtan
	IntrinSinh
	IntrinCosh
	IntrinPow
	IntrinAtan2
	IntrinFma
	IntrinIsNaN
	IntrinIsInf
	IntrinIsFinite
	// IntrinCheckIndex is check_index(i, n): the index i (an integer)
	// normalised into [0, n) — i + n for a negative i — when -n <= i < n;
	// otherwise the kernel fails with "index i out of range [-n, n)" (as
	// the reference engine does) and the expression is 0, a safe address.
	IntrinCheckIndex
	numIntrinsics
)

// IntrinsicKind classifies intrinsics by signature.
type IntrinsicKind uint8

// Intrinsic signatures.
const (
	KindSpecial      IntrinsicKind = iota + 1 // call_extern, if_then_else, address_of, check_index
	KindFloatUnary                            // f(x float) float
	KindFloatBinary                           // f(x, y float) float
	KindFloatTernary                          // f(x, y, z float) float
	KindFloatPred                             // f(x float) bool
)

// IntrinsicInfo describes one intrinsic: its printed name, signature and,
// for math intrinsics, its reference semantics in float64 (used by the
// interpreter and by constant folding).
type IntrinsicInfo struct {
	Name    string
	Kind    IntrinsicKind
	Unary   func(x float64) float64
	Binary  func(x, y float64) float64
	Ternary func(x, y, z float64) float64
	Pred    func(x float64) bool
}

var intrinsics = [numIntrinsics]IntrinsicInfo{
	CallExtern:       {Name: "call_extern", Kind: KindSpecial},
	IntrinIfThenElse: {Name: "if_then_else", Kind: KindSpecial},
	IntrinAddressOf:  {Name: "address_of", Kind: KindSpecial},
	IntrinExp:        {Name: "exp", Kind: KindFloatUnary, Unary: math.Exp},
	IntrinExp2:       {Name: "exp2", Kind: KindFloatUnary, Unary: math.Exp2},
	IntrinLog:        {Name: "log", Kind: KindFloatUnary, Unary: math.Log},
	IntrinLog2:       {Name: "log2", Kind: KindFloatUnary, Unary: math.Log2},
	IntrinLog10:      {Name: "log10", Kind: KindFloatUnary, Unary: math.Log10},
	IntrinSqrt:       {Name: "sqrt", Kind: KindFloatUnary, Unary: math.Sqrt},
	IntrinRsqrt:      {Name: "rsqrt", Kind: KindFloatUnary, Unary: func(x float64) float64 { return 1 / math.Sqrt(x) }},
	IntrinTanh:       {Name: "tanh", Kind: KindFloatUnary, Unary: math.Tanh},
	IntrinSigmoid:    {Name: "sigmoid", Kind: KindFloatUnary, Unary: func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }},
	IntrinFabs:       {Name: "fabs", Kind: KindFloatUnary, Unary: math.Abs},
	IntrinFloor:      {Name: "floor", Kind: KindFloatUnary, Unary: math.Floor},
	IntrinCeil:       {Name: "ceil", Kind: KindFloatUnary, Unary: math.Ceil},
	IntrinRound:      {Name: "round", Kind: KindFloatUnary, Unary: math.Round},
	IntrinNearbyInt:  {Name: "nearbyint", Kind: KindFloatUnary, Unary: math.RoundToEven},
	IntrinTrunc:      {Name: "trunc", Kind: KindFloatUnary, Unary: math.Trunc},
	IntrinErf:        {Name: "erf", Kind: KindFloatUnary, Unary: math.Erf},
	IntrinSin:        {Name: "sin", Kind: KindFloatUnary, Unary: math.Sin},
	IntrinCos:        {Name: "cos", Kind: KindFloatUnary, Unary: math.Cos},
	IntrinTan:        {Name: "tan", Kind: KindFloatUnary, Unary: math.Tan},
	IntrinAsin:       {Name: "asin", Kind: KindFloatUnary, Unary: math.Asin},
	IntrinAcos:       {Name: "acos", Kind: KindFloatUnary, Unary: math.Acos},
	IntrinAtan:       {Name: "atan", Kind: KindFloatUnary, Unary: math.Atan},
	IntrinSinh:       {Name: "sinh", Kind: KindFloatUnary, Unary: math.Sinh},
	IntrinCosh:       {Name: "cosh", Kind: KindFloatUnary, Unary: math.Cosh},
	IntrinPow:        {Name: "pow", Kind: KindFloatBinary, Binary: math.Pow},
	IntrinAtan2:      {Name: "atan2", Kind: KindFloatBinary, Binary: math.Atan2},
	IntrinFma:        {Name: "fma", Kind: KindFloatTernary, Ternary: math.FMA},
	IntrinIsNaN:      {Name: "isnan", Kind: KindFloatPred, Pred: math.IsNaN},
	IntrinIsInf:      {Name: "isinf", Kind: KindFloatPred, Pred: func(x float64) bool { return math.IsInf(x, 0) }},
	IntrinIsFinite:   {Name: "isfinite", Kind: KindFloatPred, Pred: func(x float64) bool { return !math.IsInf(x, 0) && !math.IsNaN(x) }},
	IntrinCheckIndex: {Name: "check_index", Kind: KindSpecial},
}

// Valid reports whether op is a known intrinsic.
func (op Intrinsic) Valid() bool { return op > 0 && op < numIntrinsics }

// Info returns the description of op. It panics for an invalid op.
func (op Intrinsic) Info() IntrinsicInfo {
	if !op.Valid() {
		panic(fmt.Sprintf("tir: invalid intrinsic %d", op))
	}
	return intrinsics[op]
}

// String returns the intrinsic's name ("exp", "call_extern").
func (op Intrinsic) String() string {
	if !op.Valid() {
		return fmt.Sprintf("intrinsic(%d)", uint8(op))
	}
	return intrinsics[op].Name
}

// LookupIntrinsic finds an intrinsic by name.
func LookupIntrinsic(name string) (Intrinsic, bool) {
	for i := Intrinsic(1); i < numIntrinsics; i++ {
		if intrinsics[i].Name == name {
			return i, true
		}
	}
	return 0, false
}

// NewCall calls a math intrinsic or if_then_else/address_of, computing the
// result type from the arguments. Use CallExternOf for external functions.
func NewCall(op Intrinsic, args ...PrimExpr) *Call {
	t, err := callType(op, args)
	if err != nil {
		panic("tir." + err.Error())
	}
	return &Call{T: t, Op: op, Args: args}
}

// callType checks the arguments of an intrinsic call and returns its result
// type. For call_extern any arguments are accepted and Void is returned.
func callType(op Intrinsic, args []PrimExpr) (Type, error) {
	if !op.Valid() {
		return Void, fmt.Errorf("invalid intrinsic %d", op)
	}
	info := intrinsics[op]
	bad := func(msg string, a ...any) (Type, error) {
		return Void, fmt.Errorf("%s: %s", info.Name, fmt.Sprintf(msg, a...))
	}
	switch op {
	case CallExtern:
		return Void, nil
	case IntrinIfThenElse:
		if len(args) != 3 {
			return bad("want 3 args, got %d", len(args))
		}
		if !args[0].Type().IsBool() {
			return bad("condition must be bool, got %s", args[0].Type())
		}
		if args[1].Type() != args[2].Type() {
			return bad("branch types differ: %s vs %s", args[1].Type(), args[2].Type())
		}
		return args[1].Type(), nil
	case IntrinAddressOf:
		if len(args) != 1 {
			return bad("want 1 arg, got %d", len(args))
		}
		ld, ok := args[0].(*BufferLoad)
		if !ok {
			return bad("argument must be a BufferLoad, got %T", args[0])
		}
		return HandleOf(ld.Buffer.DType), nil
	case IntrinCheckIndex:
		if len(args) != 2 {
			return bad("want 2 args, got %d", len(args))
		}
		for _, a := range args {
			if a.Type() != Int64T {
				return bad("arguments must be int64, got %s", a.Type())
			}
		}
		return Int64T, nil
	}
	want := map[IntrinsicKind]int{KindFloatUnary: 1, KindFloatPred: 1, KindFloatBinary: 2, KindFloatTernary: 3}[info.Kind]
	if len(args) != want {
		return bad("want %d args, got %d", want, len(args))
	}
	t := args[0].Type()
	for _, a := range args {
		if !a.Type().IsFloat() || a.Type() != t {
			return bad("arguments must be floats of one type, got %s and %s", t, a.Type())
		}
	}
	if info.Kind == KindFloatPred {
		return BoolT, nil
	}
	return t, nil
}

// CallExternOf calls the external C function name with result type t
// (Void for a call made for its effect, wrapped in Evaluate).
func CallExternOf(t Type, name string, args ...PrimExpr) *Call {
	if name == "" {
		panic("tir.call_extern: empty function name")
	}
	return &Call{T: t, Op: CallExtern, Extern: name, Args: args}
}

// IfThenElseExpr returns if_then_else(cond, a, b), which evaluates only the
// selected branch (use it to guard out-of-bounds loads, e.g. padding).
func IfThenElseExpr(cond, a, b PrimExpr) *Call { return NewCall(IntrinIfThenElse, cond, a, b) }

// AddressOf returns a pointer to the element that load reads.
func AddressOf(load *BufferLoad) *Call { return NewCall(IntrinAddressOf, load) }

// HasSideEffect reports whether evaluating e may have an effect besides
// computing its value (it contains a call_extern).
func HasSideEffect(e PrimExpr) bool {
	found := false
	Visit(e, func(n Node) bool {
		if c, ok := n.(*Call); ok && c.Op == CallExtern {
			found = true
		}
		return !found
	})
	return found
}
