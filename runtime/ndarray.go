package runtime

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"unsafe"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// buffer is one device allocation. Several NDArrays (an owner and its
// views) may share it. It is released by an explicit Free of its owner, or
// by a cleanup once no NDArray references it any more.
type buffer struct {
	mu      sync.RWMutex
	ptr     unsafe.Pointer
	nbytes  int64
	dev     Device
	freed   bool
	cleanup goruntime.Cleanup
}

// allocation is what a buffer's cleanup needs; it holds no Go pointer to
// the buffer, so that the buffer can become unreachable.
type allocation struct {
	api DeviceAPI
	dev Device
	ptr unsafe.Pointer
}

func releaseAllocation(a allocation) { _ = a.api.Free(a.dev, a.ptr) }

// newBuffer allocates nbytes on dev.
func newBuffer(dev Device, nbytes int64) (*buffer, error) {
	api, err := checkDevice(dev)
	if err != nil {
		return nil, err
	}
	p, err := api.Alloc(dev, nbytes)
	if err != nil {
		return nil, err
	}
	b := &buffer{ptr: p, nbytes: nbytes, dev: dev}
	b.cleanup = goruntime.AddCleanup(b, releaseAllocation, allocation{api: api, dev: dev, ptr: p})
	return b, nil
}

// free releases the allocation now; later uses of the buffer fail.
func (b *buffer) free() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed {
		return
	}
	b.freed = true
	b.cleanup.Stop()
	if api, err := GetDeviceAPI(b.dev.Type); err == nil {
		_ = api.Free(b.dev, b.ptr)
	}
	b.ptr = nil
}

// errFreed is returned when an NDArray is used after its memory was freed.
var errFreed = errors.New("use of a freed NDArray")

// NDArray is a dense row-major tensor in the memory of one device.
//
// Memory model: the data of every NDArray is allocated by the device's
// DeviceAPI; for the CPU that is C memory (posix_memalign, 64-byte aligned),
// never Go memory. C code may therefore keep and use the pointer freely,
// the kiln_tensor structs that point to it are C memory as well, and no Go
// pointer ever crosses into C, so cgo's pointer checks (GODEBUG=cgocheck=1,
// the default, and GOEXPERIMENT=cgocheck2) hold by construction. Host data
// moves in and out by copying (CopyFrom/CopyTo/FromTensor/ToTensor).
//
// The memory is released by Free, or when the array and all views of it
// have become unreachable. Freeing an array invalidates its views; using a
// freed array returns an error. An NDArray is not safe for concurrent
// mutation; concurrent reads (CopyTo) are fine.
type NDArray struct {
	dtype  ir.DType
	shape  ir.Shape
	dev    Device
	buf    *buffer
	offset int64
	view   bool
}

// Empty allocates a zero-filled array on dev.
func Empty(dt ir.DType, shape ir.Shape, dev Device) (*NDArray, error) {
	nbytes, err := byteSize(dt, shape)
	if err != nil {
		return nil, err
	}
	b, err := newBuffer(dev, nbytes)
	if err != nil {
		return nil, err
	}
	return &NDArray{dtype: dt, shape: shape.Clone(), dev: dev, buf: b}, nil
}

// byteSize validates a dtype and shape and returns the byte count.
func byteSize(dt ir.DType, shape ir.Shape) (int64, error) {
	if _, _, ok := dtypeCode(dt); !ok {
		return 0, fmt.Errorf("unsupported dtype %s", dt)
	}
	// Overflow-checked and within the memory budget (--max-memory).
	return ir.CheckBytes(dt, shape)
}

// FromTensor allocates an array on dev holding a copy of t.
func FromTensor(t *tensor.Tensor, dev Device) (*NDArray, error) {
	a, err := Empty(t.DType, t.Shape, dev)
	if err != nil {
		return nil, err
	}
	if err := a.CopyFrom(t); err != nil {
		a.Free()
		return nil, err
	}
	return a, nil
}

// DType returns the element type.
func (a *NDArray) DType() ir.DType { return a.dtype }

// Shape returns the shape (do not modify it).
func (a *NDArray) Shape() ir.Shape { return a.shape }

// Device returns the device holding the data.
func (a *NDArray) Device() Device { return a.dev }

// NumBytes is the size of the data in bytes.
func (a *NDArray) NumBytes() int64 {
	return a.shape.NumElements() * int64(a.dtype.Size())
}

// IsView reports whether the array is a view of another array's memory.
func (a *NDArray) IsView() bool { return a.view }

// String describes the array, e.g. "NDArray(float32[2, 3] on cpu:0)".
func (a *NDArray) String() string {
	return fmt.Sprintf("NDArray(%s%v on %s)", a.dtype, a.shape, a.dev)
}

// DataPtr returns the device address of the first element. It is valid
// until the array is freed; callers must keep the array alive while they
// use it (runtime.KeepAlive).
func (a *NDArray) DataPtr() (unsafe.Pointer, error) { return a.dataPtr() }

func (a *NDArray) dataPtr() (unsafe.Pointer, error) {
	a.buf.mu.RLock()
	defer a.buf.mu.RUnlock()
	if a.buf.freed {
		return nil, errFreed
	}
	return unsafe.Add(a.buf.ptr, a.offset), nil
}

// View returns an array of another dtype and shape over the same memory,
// starting byte offset bytes into a. It must fit inside a's buffer. The
// view keeps the memory alive; freeing a (or any owner) invalidates it.
func (a *NDArray) View(dt ir.DType, shape ir.Shape, offset int64) (*NDArray, error) {
	nbytes, err := byteSize(dt, shape)
	if err != nil {
		return nil, err
	}
	if offset < 0 || a.offset+offset+nbytes > a.buf.nbytes {
		return nil, fmt.Errorf("view %s%v at offset %d does not fit in %d bytes", dt, shape, offset, a.buf.nbytes-a.offset)
	}
	return &NDArray{dtype: dt, shape: shape.Clone(), dev: a.dev, buf: a.buf, offset: a.offset + offset, view: true}, nil
}

// checkSame verifies that a host tensor matches the array's dtype and shape.
func (a *NDArray) checkSame(t *tensor.Tensor) error {
	if t.DType != a.dtype || !t.Shape.Equal(a.shape) {
		return fmt.Errorf("expected %s%v, got %s%v", a.dtype, a.shape, t.DType, t.Shape)
	}
	if int64(len(t.Data)) != a.NumBytes() {
		return fmt.Errorf("tensor %s%v holds %d bytes, want %d", t.DType, t.Shape, len(t.Data), a.NumBytes())
	}
	return nil
}

// CopyFrom copies a host tensor of the same dtype and shape into the array.
func (a *NDArray) CopyFrom(t *tensor.Tensor) error {
	if err := a.checkSame(t); err != nil {
		return err
	}
	a.buf.mu.RLock()
	defer a.buf.mu.RUnlock()
	if a.buf.freed {
		return errFreed
	}
	api, err := checkDevice(a.dev)
	if err != nil {
		return err
	}
	return api.CopyToDevice(unsafe.Add(a.buf.ptr, a.offset), a.dev, t.Data)
}

// CopyTo copies the array into a host tensor of the same dtype and shape.
func (a *NDArray) CopyTo(t *tensor.Tensor) error {
	if err := a.checkSame(t); err != nil {
		return err
	}
	a.buf.mu.RLock()
	defer a.buf.mu.RUnlock()
	if a.buf.freed {
		return errFreed
	}
	api, err := checkDevice(a.dev)
	if err != nil {
		return err
	}
	return api.CopyFromDevice(t.Data, unsafe.Add(a.buf.ptr, a.offset), a.dev)
}

// ToTensor copies the array into a new host tensor.
func (a *NDArray) ToTensor() (*tensor.Tensor, error) {
	t := tensor.New(a.dtype, a.shape)
	if err := a.CopyTo(t); err != nil {
		return nil, err
	}
	return t, nil
}

// CopyFromArray copies src (same dtype and shape, any device) into a,
// through the DeviceAPIs of both devices.
func (a *NDArray) CopyFromArray(src *NDArray) error {
	if src.dtype != a.dtype || !src.shape.Equal(a.shape) {
		return fmt.Errorf("copy %s%v on %s into %s%v on %s: dtype or shape differs", src.dtype, src.shape, src.dev, a.dtype, a.shape, a.dev)
	}
	if src.buf == a.buf && src.offset == a.offset {
		return nil
	}
	// Lock in a fixed order so two opposite copies cannot deadlock.
	first, second := a.buf, src.buf
	if uintptr(unsafe.Pointer(first)) > uintptr(unsafe.Pointer(second)) {
		first, second = second, first
	}
	first.mu.RLock()
	defer first.mu.RUnlock()
	if second != first {
		second.mu.RLock()
		defer second.mu.RUnlock()
	}
	if a.buf.freed || src.buf.freed {
		return errFreed
	}
	return copyDeviceMemory(unsafe.Add(a.buf.ptr, a.offset), a.dev, unsafe.Add(src.buf.ptr, src.offset), src.dev, a.NumBytes())
}

// Free releases the array's memory now (idempotent). Free on a view does
// nothing; freeing the owner frees the memory of all its views.
func (a *NDArray) Free() {
	if a.view {
		return
	}
	a.buf.free()
}
