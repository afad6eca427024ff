//go:build !cgo

package runtime

// This file replaces cgo.go in a kiln built without cgo (CGO_ENABLED=0):
// arrays live in Go memory, and everything that would load or call
// compiled code reports ErrNoCgo. The compiler and the reference engine
// work in such a build; running a compiled artifact needs cgo.

import (
	"errors"
	"fmt"
	"unsafe"
)

// CanRun reports whether this kiln can load and run compiled artifacts
// (it was built with cgo).
const CanRun = false

// ErrNoCgo is the error of every operation that needs compiled code in a
// kiln built without cgo.
var ErrNoCgo = errors.New("this kiln was built without cgo (CGO_ENABLED=0): it compiles models and runs the reference engine, but cannot load or run compiled libraries; build kiln with cgo to run artifacts")

// cAlloc returns zeroed, Alignment-aligned Go memory of at least nbytes
// bytes. The pointer keeps its allocation alive.
func cAlloc(nbytes int64) (unsafe.Pointer, error) {
	if nbytes < 0 {
		return nil, fmt.Errorf("negative allocation size %d", nbytes)
	}
	if nbytes > int64(^uint(0)>>1)-2*Alignment {
		return nil, fmt.Errorf("allocation of %d bytes is too large", nbytes)
	}
	buf := make([]byte, max(nbytes, Alignment)+Alignment)
	p := unsafe.Pointer(&buf[0])
	if r := uintptr(p) % Alignment; r != 0 {
		p = unsafe.Add(p, Alignment-r)
	}
	return p, nil
}

// cFree does nothing: the collector frees Go memory.
func cFree(unsafe.Pointer) {}

func dlOpen(string) (unsafe.Pointer, error) { return nil, ErrNoCgo }

func dlSym(unsafe.Pointer, string) unsafe.Pointer { return nil }

func readRegistry(unsafe.Pointer) (map[string]unsafe.Pointer, error) { return nil, ErrNoCgo }

func callSetNumThreads(unsafe.Pointer, int32) {}

func callPacked(unsafe.Pointer, unsafe.Pointer, int32, unsafe.Pointer, unsafe.Pointer) error {
	return ErrNoCgo
}

func packArgs([]*NDArray) (unsafe.Pointer, error) { return nil, ErrNoCgo }

func packCalls([]callItem) (unsafe.Pointer, error) { return nil, ErrNoCgo }

func callAll(unsafe.Pointer, int, int) (int, error) { return -1, ErrNoCgo }

func pinThread(CoreSet) error { return ErrNoAffinity }

func allowedCores() (CoreSet, error) { return nil, ErrNoAffinity }
