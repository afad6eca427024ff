package runtime

// The parts of the runtime's interface to C that need no cgo: buffer
// alignment, views of memory and the ABI's dtype codes. cgo.go holds the
// rest (C memory, dlopen, calls); nocgo.go replaces it in a build without
// cgo, where buffers live in Go memory and compiled libraries cannot load.

import (
	"unsafe"

	"github.com/kiln-dev/kiln/ir"
)

// Alignment is the byte alignment of every buffer the runtime allocates
// (the ABI promises 64-byte aligned data when kiln allocated it).
const Alignment = 64

// bytesAt views n bytes of C memory at p as a Go slice (for copies only).
func bytesAt(p unsafe.Pointer, n int64) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

// maxRegistry bounds the entries read from a library's function table (a
// table without its terminator must not run the reader off the end
// forever).
const maxRegistry = 1 << 20

// The ABI's dtype codes (kiln_dtype_code in kiln/c_runtime_api.h;
// TestABIConstants checks them against the header in a cgo build).
const (
	abiInt    uint8 = 0
	abiUint   uint8 = 1
	abiFloat  uint8 = 2
	abiBFloat uint8 = 4
	abiBool   uint8 = 6
)

// dtypeCode maps a kiln dtype to the ABI's (code, bits) pair.
func dtypeCode(dt ir.DType) (code, bits uint8, ok bool) {
	switch dt {
	case ir.Float16, ir.Float32, ir.Float64:
		return abiFloat, uint8(dt.Size() * 8), true
	case ir.BFloat16:
		return abiBFloat, 16, true
	case ir.Int8, ir.Int16, ir.Int32, ir.Int64:
		return abiInt, uint8(dt.Size() * 8), true
	case ir.Uint8, ir.Uint16, ir.Uint32, ir.Uint64:
		return abiUint, uint8(dt.Size() * 8), true
	case ir.Bool:
		return abiBool, 8, true
	}
	return 0, 0, false
}
