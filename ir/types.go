package ir

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/internal/budget"
)

// Shape is a static tensor shape. Every dimension is known and non-negative;
// a scalar has an empty shape.
type Shape []int64

// NumElements returns the product of the dimensions (1 for a scalar).
func (s Shape) NumElements() int64 {
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}

// CheckedNumElements returns the product of the dimensions, or an error
// when a dimension is negative or the product overflows int64 (where
// NumElements would silently wrap). A shape with a zero dimension has no
// elements however large the others are (a fuzzed .pb of 61 dimensions
// of 48 and one of 0 had overflowed before reaching the 0).
func (s Shape) CheckedNumElements() (int64, error) {
	for _, d := range s {
		if d < 0 {
			return 0, fmt.Errorf("shape %v has a negative dimension", s)
		}
	}
	if slices.Contains(s, 0) {
		return 0, nil
	}
	n := int64(1)
	for _, d := range s {
		var ok bool
		if n, ok = budget.Mul(n, d); !ok {
			return 0, fmt.Errorf("shape %v has more than 2^63 elements", s)
		}
	}
	return n, nil
}

// CheckBytes returns the bytes a tensor of dtype dt and shape s takes, or
// an error when that size overflows or exceeds the memory budget
// (internal/budget): what every size computed from user data goes
// through before it is allocated.
func CheckBytes(dt DType, s Shape) (int64, error) {
	n, err := s.CheckedNumElements()
	if err != nil {
		return 0, err
	}
	size := int64(dt.Size())
	if size < 1 {
		size = 1
	}
	b, ok := budget.Mul(n, size)
	if !ok {
		return 0, fmt.Errorf("tensor %s%v: its size in bytes overflows", dt, s)
	}
	if err := budget.Check(fmt.Sprintf("tensor %s%v", dt, s), b); err != nil {
		return 0, err
	}
	return b, nil
}

// Rank is the number of dimensions.
func (s Shape) Rank() int { return len(s) }

// Equal reports whether two shapes have the same dimensions.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// Clone returns a copy that shares no storage with s.
func (s Shape) Clone() Shape {
	if s == nil {
		return Shape{}
	}
	return append(Shape{}, s...)
}

// Strides returns the row-major element strides of s.
func (s Shape) Strides() []int64 {
	st := make([]int64, len(s))
	acc := int64(1)
	for i := len(s) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= s[i]
	}
	return st
}

// String prints the shape as "[2, 3]".
func (s Shape) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	b.WriteByte(']')
	return b.String()
}

// Type is the type of a graph IR value: a TensorType, TupleType or FuncType.
type Type interface {
	// String prints the type in the graph IR text syntax.
	String() string
	isType()
}

// TensorType is a tensor with a static shape and an element type.
type TensorType struct {
	DType DType
	Shape Shape
}

// TupleType is a fixed-arity tuple of types.
type TupleType struct {
	Fields []Type
}

// FuncType is the type of a function value.
type FuncType struct {
	Params []Type
	Ret    Type
}

func (*TensorType) isType() {}
func (*TupleType) isType()  {}
func (*FuncType) isType()   {}

// NewTensorType returns a tensor type; the shape is copied.
func NewTensorType(dt DType, shape Shape) *TensorType {
	return &TensorType{DType: dt, Shape: shape.Clone()}
}

// String prints e.g. "Tensor[(1, 3), float32]".
func (t *TensorType) String() string {
	var b strings.Builder
	b.WriteString("Tensor[(")
	for i, d := range t.Shape {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	if len(t.Shape) == 1 {
		b.WriteByte(',')
	}
	b.WriteString("), ")
	b.WriteString(t.DType.String())
	b.WriteByte(']')
	return b.String()
}

// NumBytes is the size of one tensor of this type.
func (t *TensorType) NumBytes() int64 { return t.Shape.NumElements() * int64(t.DType.Size()) }

// String prints e.g. "(Tensor[(1,), float32], Tensor[(2,), int64])".
func (t *TupleType) String() string {
	var b strings.Builder
	b.WriteByte('(')
	for i, f := range t.Fields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.String())
	}
	if len(t.Fields) == 1 {
		b.WriteByte(',')
	}
	b.WriteByte(')')
	return b.String()
}

// String prints e.g. "fn (Tensor[(1,), float32]) -> Tensor[(1,), float32]".
func (t *FuncType) String() string {
	var b strings.Builder
	b.WriteString("fn (")
	for i, p := range t.Params {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.String())
	}
	b.WriteString(") -> ")
	if t.Ret != nil {
		b.WriteString(t.Ret.String())
	} else {
		b.WriteString("?")
	}
	return b.String()
}

// TypeEqual reports structural equality of two types (nil equals nil).
func TypeEqual(a, b Type) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case *TensorType:
		y, ok := b.(*TensorType)
		return ok && x.DType == y.DType && x.Shape.Equal(y.Shape)
	case *TupleType:
		y, ok := b.(*TupleType)
		if !ok || len(x.Fields) != len(y.Fields) {
			return false
		}
		for i := range x.Fields {
			if !TypeEqual(x.Fields[i], y.Fields[i]) {
				return false
			}
		}
		return true
	case *FuncType:
		y, ok := b.(*FuncType)
		if !ok || len(x.Params) != len(y.Params) || !TypeEqual(x.Ret, y.Ret) {
			return false
		}
		for i := range x.Params {
			if !TypeEqual(x.Params[i], y.Params[i]) {
				return false
			}
		}
		return true
	}
	panic(fmt.Sprintf("ir.TypeEqual: unknown type %T", a))
}

// AsTensor returns t as a tensor type or an error naming what it is instead.
func AsTensor(t Type) (*TensorType, error) {
	if tt, ok := t.(*TensorType); ok {
		return tt, nil
	}
	if t == nil {
		return nil, fmt.Errorf("expected a tensor, got an untyped value")
	}
	return nil, fmt.Errorf("expected a tensor, got %s", t)
}
