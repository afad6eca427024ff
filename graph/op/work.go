package op

import (
	"math"

	"github.com/kiln-dev/kiln/internal/budget"
	"github.com/kiln-dev/kiln/ir"
)

// MaxFoldWork bounds the work (WorkEstimate) of one operator call that
// constant folding evaluates at compile time. A call above it stays in
// the program and runs compiled: a few hundred bytes of ONNX holding two
// large constant matrices and a MatMul must not keep the compiler busy
// for minutes in the reference kernels.
const MaxFoldWork = 1 << 30

// WorkEstimate is an upper bound on the element operations a call of o
// with argument types args and result type out performs: linear in the
// elements read and written for elementwise, broadcast, injective and
// reduction ops, and for complex ops (convolutions, matrix products,
// opaque ops) the output elements times the largest argument's (each
// output element may read a whole argument). It saturates at MaxInt64.
func WorkEstimate(o *Op, args []ir.Type, out ir.Type) int64 {
	elems := func(t ir.Type) int64 {
		var n int64
		switch x := t.(type) {
		case *ir.TensorType:
			v, err := x.Shape.CheckedNumElements()
			if err != nil {
				return math.MaxInt64
			}
			return v
		case *ir.TupleType:
			for _, f := range x.Fields {
				var ok bool
				if n, ok = budget.Add(n, elemsOf(f)); !ok {
					return math.MaxInt64
				}
			}
		}
		return n
	}
	outN := elems(out)
	var sum, largest int64
	for _, a := range args {
		n := elems(a)
		var ok bool
		if sum, ok = budget.Add(sum, n); !ok {
			return math.MaxInt64
		}
		largest = max(largest, n)
	}
	if o.Pattern < OutEWiseFusable {
		if s, ok := budget.Add(sum, outN); ok {
			return s
		}
		return math.MaxInt64
	}
	if w, ok := budget.Mul(outN, max(largest, 1)); ok {
		return w
	}
	return math.MaxInt64
}

func elemsOf(t ir.Type) int64 {
	if tt, ok := t.(*ir.TensorType); ok {
		if v, err := tt.Shape.CheckedNumElements(); err == nil {
			return v
		}
		return math.MaxInt64
	}
	return 0
}
