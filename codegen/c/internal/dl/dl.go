//go:build cgo

package dl

/*
#cgo CFLAGS: -I${SRCDIR}/../../../../runtime/include
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "kiln/c_runtime_api.h"

static int32_t kiln_dl_call(void* fn, kiln_tensor* args, int32_t n) {
	return ((kiln_packed_func)fn)(args, n);
}
static const char* kiln_dl_last_error(void* fn) {
	return ((const char* (*)(void))fn)();
}
static void kiln_dl_set_threads(void* fn, int32_t n) {
	((void (*)(int32_t))fn)(n);
}
static int32_t kiln_dl_thread_count(void* fn) {
	return ((int32_t (*)(void))fn)();
}
static void* kiln_dl_alloc(size_t n) {
	void* p = NULL;
	if (n == 0) n = 1;
	if (posix_memalign(&p, 64, n) != 0) return NULL;
	memset(p, 0, n);
	return p;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Lib is a loaded shared library.
type Lib struct {
	h unsafe.Pointer
}

// Open loads the library at path (RTLD_NOW | RTLD_LOCAL).
func Open(path string) (*Lib, error) {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	h := C.dlopen(cs, C.RTLD_NOW|C.RTLD_LOCAL)
	if h == nil {
		return nil, fmt.Errorf("dlopen %s: %s", path, C.GoString(C.dlerror()))
	}
	return &Lib{h: h}, nil
}

// Close unloads the library.
func (l *Lib) Close() error {
	if l.h == nil {
		return nil
	}
	if C.dlclose(l.h) != 0 {
		return fmt.Errorf("dlclose: %s", C.GoString(C.dlerror()))
	}
	l.h = nil
	return nil
}

func (l *Lib) sym(name string) (unsafe.Pointer, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	p := C.dlsym(l.h, cs)
	if p == nil {
		return nil, fmt.Errorf("dlsym %s: symbol not found", name)
	}
	return p, nil
}

// Tensor is one argument of a packed call. Data is copied into 64-byte
// aligned C memory before the call and copied back afterwards; a nil
// Data passes a NULL data pointer.
type Tensor struct {
	Data  []byte
	Shape []int64
	Code  uint8 // kiln_dtype_code
	Bits  uint8
	Lanes uint16 // 0 means 1
}

// Call invokes the packed function symbol with args and returns its
// status. num overrides the argument count passed when >= 0.
func (l *Lib) Call(symbol string, args []Tensor, num int) (int32, error) {
	fn, err := l.sym(symbol)
	if err != nil {
		return 0, err
	}
	n := len(args)
	cargs := unsafe.Slice((*C.kiln_tensor)(C.kiln_dl_alloc(C.size_t(unsafe.Sizeof(C.kiln_tensor{})*uintptr(max(n, 1))))), max(n, 1))
	defer C.free(unsafe.Pointer(&cargs[0]))
	var frees []unsafe.Pointer
	defer func() {
		for _, p := range frees {
			C.free(p)
		}
	}()
	for i, a := range args {
		var data, shape unsafe.Pointer
		if a.Data != nil {
			data = C.kiln_dl_alloc(C.size_t(len(a.Data)))
			frees = append(frees, data)
			if len(a.Data) > 0 {
				C.memcpy(data, unsafe.Pointer(&a.Data[0]), C.size_t(len(a.Data)))
			}
		}
		if a.Shape != nil {
			shape = C.kiln_dl_alloc(C.size_t(8 * len(a.Shape)))
			frees = append(frees, shape)
			for k, d := range a.Shape {
				*(*C.int64_t)(unsafe.Add(shape, 8*k)) = C.int64_t(d)
			}
		}
		lanes := a.Lanes
		if lanes == 0 {
			lanes = 1
		}
		cargs[i] = C.kiln_tensor{data: data, shape: (*C.int64_t)(shape), ndim: C.int32_t(len(a.Shape)),
			dtype_code: C.uint8_t(a.Code), dtype_bits: C.uint8_t(a.Bits), dtype_lanes: C.uint16_t(lanes),
			device_type: C.KILN_DEVICE_CPU}
	}
	if num < 0 {
		num = n
	}
	st := C.kiln_dl_call(fn, &cargs[0], C.int32_t(num))
	for i, a := range args {
		if a.Data != nil && len(a.Data) > 0 {
			C.memcpy(unsafe.Pointer(&a.Data[0]), cargs[i].data, C.size_t(len(a.Data)))
		}
	}
	return int32(st), nil
}

// LastError returns kiln_get_last_error() of the library.
func (l *Lib) LastError() (string, error) {
	fn, err := l.sym("kiln_get_last_error")
	if err != nil {
		return "", err
	}
	return C.GoString(C.kiln_dl_last_error(fn)), nil
}

// SetNumThreads calls kiln_set_num_threads(n).
func (l *Lib) SetNumThreads(n int) error {
	fn, err := l.sym("kiln_set_num_threads")
	if err != nil {
		return err
	}
	C.kiln_dl_set_threads(fn, C.int32_t(n))
	return nil
}

// SetNumThreadsHere calls kiln_set_num_threads_here(n): the count of the
// calling OS thread (lock the goroutine to it).
func (l *Lib) SetNumThreadsHere(n int) error {
	fn, err := l.sym("kiln_set_num_threads_here")
	if err != nil {
		return err
	}
	C.kiln_dl_set_threads(fn, C.int32_t(n))
	return nil
}

// ThreadCount calls kiln_thread_count(): the thread count parallel loops
// started on the calling OS thread use (libraries built with OpenMP).
func (l *Lib) ThreadCount() (int, error) {
	fn, err := l.sym("kiln_thread_count")
	if err != nil {
		return 0, err
	}
	return int(C.kiln_dl_thread_count(fn)), nil
}
