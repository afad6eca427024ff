// Package tensor is kiln's host tensor: an element type, a static shape and
// little-endian row-major bytes. The reference executor computes on it, the
// frontend turns ONNX initializers into it, and the runtime copies it to and
// from devices. It also reads and writes NumPy .npy files.
package tensor

import (
	"fmt"
	"unsafe"

	"github.com/kiln-dev/kiln/ir"
)

// Tensor is a dense row-major tensor in host memory. Data always holds
// exactly Shape.NumElements()*DType.Size() bytes and is 8-byte aligned, so
// the typed views (Float32s, Int64s, ...) are safe.
type Tensor struct {
	DType ir.DType
	Shape ir.Shape
	Data  []byte
}

// alignedBytes allocates n zero bytes aligned to 8.
func alignedBytes(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
}

// New allocates a zero tensor. A tensor whose size overflows or exceeds
// the memory budget (ir.CheckBytes) is never allocated: New panics with
// an *AllocError, which kiln's public entries (the ONNX importer's
// converters, the reference engine) turn into an error; code that sizes
// a tensor from user data before any type check uses NewChecked.
func New(dt ir.DType, shape ir.Shape) *Tensor {
	t, err := NewChecked(dt, shape)
	if err != nil {
		panic(&AllocError{Err: err})
	}
	return t
}

// NewChecked allocates a zero tensor, or returns an error when its size
// overflows or exceeds the memory budget.
func NewChecked(dt ir.DType, shape ir.Shape) (*Tensor, error) {
	if _, err := ir.CheckBytes(dt, shape); err != nil {
		return nil, err
	}
	n := shape.NumElements()
	return &Tensor{DType: dt, Shape: shape.Clone(), Data: alignedBytes(int(n) * dt.Size())}, nil
}

// AllocError is the panic value of New for a tensor that must not be
// allocated; Err says why.
type AllocError struct{ Err error }

// Error returns the reason.
func (e *AllocError) Error() string { return e.Err.Error() }

// Unwrap returns the reason.
func (e *AllocError) Unwrap() error { return e.Err }

// FromBytes builds a tensor from raw little-endian bytes (copied). It fails
// when the byte count does not match the shape.
func FromBytes(dt ir.DType, shape ir.Shape, raw []byte) (*Tensor, error) {
	want, err := ir.CheckBytes(dt, shape)
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) != want {
		return nil, fmt.Errorf("tensor %s%v needs %d bytes, got %d", dt, shape, want, len(raw))
	}
	t := New(dt, shape)
	copy(t.Data, raw)
	return t, nil
}

// Adopt is FromBytes without the copy: the tensor takes raw as its data
// when raw is 8-byte aligned (as Go's allocator places any slice of 8
// bytes or more), and copies it otherwise. The caller gives raw up: it
// must not use it afterwards. The ONNX importer adopts the weights the
// protobuf decoder just allocated instead of copying them.
func Adopt(dt ir.DType, shape ir.Shape, raw []byte) (*Tensor, error) {
	want, err := ir.CheckBytes(dt, shape)
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) != want {
		return nil, fmt.Errorf("tensor %s%v needs %d bytes, got %d", dt, shape, want, len(raw))
	}
	if len(raw) == 0 || uintptr(unsafe.Pointer(&raw[0]))%8 != 0 {
		return FromBytes(dt, shape, raw)
	}
	return &Tensor{DType: dt, Shape: shape.Clone(), Data: raw[:len(raw):len(raw)]}, nil
}

// Type returns the tensor's type.
func (t *Tensor) Type() *ir.TensorType { return ir.NewTensorType(t.DType, t.Shape) }

// Len is the number of elements.
func (t *Tensor) Len() int { return int(t.Shape.NumElements()) }

// Clone deep-copies the tensor.
func (t *Tensor) Clone() *Tensor {
	c := New(t.DType, t.Shape)
	copy(c.Data, t.Data)
	return c
}

// Reshape returns a tensor sharing t's data with a new shape of the same size.
func (t *Tensor) Reshape(shape ir.Shape) *Tensor {
	if shape.NumElements() != t.Shape.NumElements() {
		panic(fmt.Sprintf("tensor.Reshape: %v to %v", t.Shape, shape))
	}
	return &Tensor{DType: t.DType, Shape: shape.Clone(), Data: t.Data}
}

func view[T any](t *Tensor, want ir.DType) []T {
	if t.DType != want {
		panic(fmt.Sprintf("tensor: %s view of a %s tensor", want, t.DType))
	}
	if len(t.Data) == 0 {
		return []T{}
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(&t.Data[0])), len(t.Data)/int(unsafe.Sizeof(z)))
}

// Float32s views a float32 tensor's data.
func (t *Tensor) Float32s() []float32 { return view[float32](t, ir.Float32) }

// Float64s views a float64 tensor's data.
func (t *Tensor) Float64s() []float64 { return view[float64](t, ir.Float64) }

// Int32s views an int32 tensor's data.
func (t *Tensor) Int32s() []int32 { return view[int32](t, ir.Int32) }

// Int64s views an int64 tensor's data.
func (t *Tensor) Int64s() []int64 { return view[int64](t, ir.Int64) }

// Float returns element i (flat index) converted to float64, for any dtype.
func (t *Tensor) Float(i int) float64 {
	p := unsafe.Pointer(&t.Data[i*t.DType.Size()])
	switch t.DType {
	case ir.Float32:
		return float64(*(*float32)(p))
	case ir.Float64:
		return *(*float64)(p)
	case ir.Float16:
		return float64(F16ToF32(*(*uint16)(p)))
	case ir.BFloat16:
		return float64(BF16ToF32(*(*uint16)(p)))
	case ir.Int8:
		return float64(*(*int8)(p))
	case ir.Int16:
		return float64(*(*int16)(p))
	case ir.Int32:
		return float64(*(*int32)(p))
	case ir.Int64:
		return float64(*(*int64)(p))
	case ir.Uint8, ir.Bool:
		return float64(*(*uint8)(p))
	case ir.Uint16:
		return float64(*(*uint16)(p))
	case ir.Uint32:
		return float64(*(*uint32)(p))
	case ir.Uint64:
		return float64(*(*uint64)(p))
	}
	panic("tensor.Float: bad dtype " + t.DType.String())
}

// Int returns element i as int64 (floats truncate toward zero, uint64 wraps).
func (t *Tensor) Int(i int) int64 {
	p := unsafe.Pointer(&t.Data[i*t.DType.Size()])
	switch t.DType {
	case ir.Int8:
		return int64(*(*int8)(p))
	case ir.Int16:
		return int64(*(*int16)(p))
	case ir.Int32:
		return int64(*(*int32)(p))
	case ir.Int64:
		return *(*int64)(p)
	case ir.Uint8, ir.Bool:
		return int64(*(*uint8)(p))
	case ir.Uint16:
		return int64(*(*uint16)(p))
	case ir.Uint32:
		return int64(*(*uint32)(p))
	case ir.Uint64:
		return int64(*(*uint64)(p))
	}
	return int64(t.Float(i))
}

// SetFloat stores v at flat index i, converting to the tensor's dtype the way
// a C cast would (integers truncate toward zero; out of range saturates to
// the type's bounds so the result is deterministic; bool is v != 0).
func (t *Tensor) SetFloat(i int, v float64) {
	p := unsafe.Pointer(&t.Data[i*t.DType.Size()])
	switch t.DType {
	case ir.Float32:
		*(*float32)(p) = float32(v)
	case ir.Float64:
		*(*float64)(p) = v
	case ir.Float16:
		*(*uint16)(p) = F32ToF16(float32(v))
	case ir.BFloat16:
		*(*uint16)(p) = F32ToBF16(float32(v))
	case ir.Bool:
		if v != 0 {
			*(*uint8)(p) = 1
		} else {
			*(*uint8)(p) = 0
		}
	default:
		t.SetInt(i, ir.SaturateInt64(v))
	}
}

// SetInt stores v at flat index i; integer types wrap (two's complement),
// float types convert, bool is v != 0.
func (t *Tensor) SetInt(i int, v int64) {
	p := unsafe.Pointer(&t.Data[i*t.DType.Size()])
	switch t.DType {
	case ir.Int8:
		*(*int8)(p) = int8(v)
	case ir.Int16:
		*(*int16)(p) = int16(v)
	case ir.Int32:
		*(*int32)(p) = int32(v)
	case ir.Int64:
		*(*int64)(p) = v
	case ir.Uint8:
		*(*uint8)(p) = uint8(v)
	case ir.Uint16:
		*(*uint16)(p) = uint16(v)
	case ir.Uint32:
		*(*uint32)(p) = uint32(v)
	case ir.Uint64:
		*(*uint64)(p) = uint64(v)
	case ir.Bool:
		if v != 0 {
			*(*uint8)(p) = 1
		} else {
			*(*uint8)(p) = 0
		}
	default:
		t.SetFloat(i, float64(v))
	}
}

// Uint returns element i of an unsigned tensor as uint64 (other dtypes via Int).
func (t *Tensor) Uint(i int) uint64 {
	if t.DType == ir.Uint64 {
		return *(*uint64)(unsafe.Pointer(&t.Data[i*8]))
	}
	return uint64(t.Int(i))
}

// CopyElem copies element j of src into element i of t; both must share a dtype.
func (t *Tensor) CopyElem(i int, src *Tensor, j int) {
	es := t.DType.Size()
	copy(t.Data[i*es:(i+1)*es], src.Data[j*es:(j+1)*es])
}

// Scalar builds a rank-0 tensor holding v converted to dt.
func Scalar(dt ir.DType, v float64) *Tensor {
	t := New(dt, ir.Shape{})
	t.SetFloat(0, v)
	return t
}

// FromFloat32s builds a float32 tensor from values (copied).
//
// It panics when vals does not hold exactly one value per element (a
// programming error); data from users goes through FromData, which
// returns an error instead.
func FromFloat32s(shape ir.Shape, vals []float32) *Tensor {
	t, err := FromData(ir.Float32, shape, vals)
	if err != nil {
		panic(err)
	}
	return t
}

// FromData builds a tensor of dtype dt and shape from data (copied): a
// slice of the dtype's Go type ([]float32 for float32, []float64,
// []int32, []int64, []int8, []uint8, and []bool for bool) with exactly
// one value per element. Another slice type, another length, or a size
// the memory budget refuses is an error naming the dtype and shape.
func FromData(dt ir.DType, shape ir.Shape, data any) (*Tensor, error) {
	t, err := NewChecked(dt, shape)
	if err != nil {
		return nil, err
	}
	n := t.Len()
	var got int
	switch v := data.(type) {
	case []float32:
		got = fill(t, dt, ir.Float32, v, n)
	case []float64:
		got = fill(t, dt, ir.Float64, v, n)
	case []int32:
		got = fill(t, dt, ir.Int32, v, n)
	case []int64:
		got = fill(t, dt, ir.Int64, v, n)
	case []int8:
		got = fill(t, dt, ir.Int8, v, n)
	case []uint8:
		got = fill(t, dt, ir.Uint8, v, n)
	case []bool:
		got = fill(t, dt, ir.Bool, v, n)
	default:
		return nil, fmt.Errorf("tensor: %s%v from %T: want a slice of the dtype's Go type", dt, shape, data)
	}
	switch got {
	case -1:
		return nil, fmt.Errorf("tensor: %s%v from %T: the slice's element type is not the dtype's", dt, shape, data)
	case n:
		return t, nil
	}
	return nil, fmt.Errorf("tensor: %s%v has %d elements, the data %d", dt, shape, n, got)
}

// fill copies vals into t when its dtype is want and vals has n values;
// it returns len(vals), or -1 for a dtype mismatch.
func fill[T any](t *Tensor, dt, want ir.DType, vals []T, n int) int {
	if dt != want {
		return -1
	}
	if len(vals) == n && n > 0 {
		copy(view[T](t, want), vals)
	}
	return len(vals)
}

// FromInt64s builds an int64 tensor from values (copied).
// It panics when vals does not hold exactly one value per element (a
// programming error; see FromData).
func FromInt64s(shape ir.Shape, vals []int64) *Tensor {
	t, err := FromData(ir.Int64, shape, vals)
	if err != nil {
		panic(err)
	}
	return t
}

// AsInt64s returns all elements converted to int64 (for shape-like tensors).
func (t *Tensor) AsInt64s() []int64 {
	out := make([]int64, t.Len())
	for i := range out {
		out[i] = t.Int(i)
	}
	return out
}

// AsFloat64s returns all elements converted to float64.
func (t *Tensor) AsFloat64s() []float64 {
	out := make([]float64, t.Len())
	for i := range out {
		out[i] = t.Float(i)
	}
	return out
}

// Equal reports bitwise equality of type and data.
func (t *Tensor) Equal(o *Tensor) bool {
	if t.DType != o.DType || !t.Shape.Equal(o.Shape) || len(t.Data) != len(o.Data) {
		return false
	}
	for i := range t.Data {
		if t.Data[i] != o.Data[i] {
			return false
		}
	}
	return true
}
