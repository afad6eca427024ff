package tir

import "fmt"

// Kernel is a function kiln defines itself, in C, that TIR calls for its
// effect: a target-specific micro-kernel such as the register-blocked
// tile of a convolution, written with the vector intrinsics of the
// target's processor. Schedules build the call with CallKernel; the C
// code generator emits each distinct kernel's definition once per
// translation unit (before the functions calling it) and the interpreter
// runs Eval, the kernel's reference semantics, so a function calling a
// kernel stays checkable against the reference executor. A kernel's
// arithmetic must equal Eval's bit for bit (the same operations in the
// same order), as generated code equals the interpreter elsewhere.
type Kernel interface {
	// Symbol is the kernel's C name: a valid C identifier, the same only
	// for kernels with the same Source.
	Symbol() string
	// Includes are the headers Source needs ("<immintrin.h>").
	Includes() []string
	// Source is the C definition of a static function named Symbol.
	Source() string
	// Eval runs the kernel on interpreter memory: args are the call's
	// evaluated arguments in order.
	Eval(args []KernelArg) error
}

// KernelArg is one evaluated argument of a kernel call: a pointer (Mem
// and the element offset Off into it) or a scalar (Int or Float).
type KernelArg struct {
	Mem   KernelMemory
	Off   int64
	Int   int64
	Float float64
}

// KernelMemory is the interpreter's memory behind a pointer argument:
// elements of one dtype, read as float64 and written with rounding to the
// dtype.
type KernelMemory interface {
	Len() int64
	Float(i int64) float64
	SetFloat(i int64, v float64)
}

// Ptr returns the memory and offset of a pointer argument, failing when
// the argument is not a pointer or n elements from Off are out of range.
func (a KernelArg) Ptr(n int64) (KernelMemory, int64, error) {
	if a.Mem == nil {
		return nil, 0, fmt.Errorf("argument is not a pointer")
	}
	if a.Off < 0 || n < 0 || a.Off+n > a.Mem.Len() {
		return nil, 0, fmt.Errorf("%d elements at offset %d out of range [0, %d)", n, a.Off, a.Mem.Len())
	}
	return a.Mem, a.Off, nil
}

// CallKernel calls kernel k with args for its effect (wrap it in
// Evaluate).
func CallKernel(k Kernel, args ...PrimExpr) *Call {
	if k == nil || k.Symbol() == "" {
		panic("tir.CallKernel: nil kernel or empty symbol")
	}
	return &Call{T: Void, Op: CallExtern, Extern: k.Symbol(), Args: args, Kernel: k}
}
