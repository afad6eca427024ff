package ref

import (
	"math"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Kernels of the elementwise operator group.
//
// Arithmetic style: floating-point operands are computed in float64 and
// rounded to the output dtype at store; signed integers and bool in int64,
// wrapping (two's complement) at store; unsigned integers in uint64 where
// the result differs from the int64 computation (division, remainder,
// comparison, max/min, shifts), else in int64 with the same wrap.
//
// Integer division or remainder by zero does not trap: it yields 0, a
// defined value chosen so that the reference never panics on user data.

func init() {
	// Unary math.
	register(op.Abs, unaryKernelU(math.Abs, func(x int64) int64 {
		if x < 0 {
			return -x
		}
		return x
	}, func(x uint64) uint64 { return x }))
	register(op.Negative, unaryKernel(func(x float64) float64 { return -x }, func(x int64) int64 { return -x }))
	register(op.Sign, unaryKernelU(fsign, func(x int64) int64 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return 0
	}, func(x uint64) uint64 {
		if x != 0 {
			return 1
		}
		return 0
	}))
	ident := func(x int64) int64 { return x }
	register(op.Floor, unaryKernel(math.Floor, ident))
	register(op.Ceil, unaryKernel(math.Ceil, ident))
	register(op.Round, unaryKernel(math.RoundToEven, ident))
	register(op.Exp, unaryKernel(math.Exp, nil))
	register(op.Log, unaryKernel(math.Log, nil))
	register(op.Sqrt, unaryKernel(math.Sqrt, nil))
	register(op.Sin, unaryKernel(math.Sin, nil))
	register(op.Cos, unaryKernel(math.Cos, nil))
	register(op.Tan, unaryKernel(math.Tan, nil))
	register(op.Asin, unaryKernel(math.Asin, nil))
	register(op.Acos, unaryKernel(math.Acos, nil))
	register(op.Atan, unaryKernel(math.Atan, nil))
	register(op.Sinh, unaryKernel(math.Sinh, nil))
	register(op.Cosh, unaryKernel(math.Cosh, nil))
	register(op.Tanh, unaryKernel(math.Tanh, nil))
	register(op.Asinh, unaryKernel(math.Asinh, nil))
	register(op.Acosh, unaryKernel(math.Acosh, nil))
	register(op.Atanh, unaryKernel(math.Atanh, nil))
	register(op.Erf, unaryKernel(math.Erf, nil))
	register(op.Sigmoid, unaryKernel(func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }, nil))
	register(op.LogicalNot, unaryKernel(nil, func(x int64) int64 { return b2i(x == 0) }))
	register(op.IsNaN, unaryKernel(func(x float64) float64 { return b2f(math.IsNaN(x)) }, nil))
	register(op.IsInf, isInfKernel)

	// Binary arithmetic.
	register(op.Add, binaryKernel(func(a, b float64) float64 { return a + b }, func(a, b int64) int64 { return a + b }))
	register(op.Subtract, binaryKernel(func(a, b float64) float64 { return a - b }, func(a, b int64) int64 { return a - b }))
	register(op.Multiply, binaryKernel(func(a, b float64) float64 { return a * b }, func(a, b int64) int64 { return a * b }))
	register(op.Divide, binaryKernelU(func(a, b float64) float64 { return a / b }, func(a, b int64) int64 {
		if b == 0 {
			return 0 // defined result instead of a trap
		}
		return a / b // Go truncates toward zero, like C and ONNX Runtime
	}, func(a, b uint64) uint64 {
		if b == 0 {
			return 0
		}
		return a / b
	}))
	register(op.Power, binaryKernelU(math.Pow, intPow, func(a, b uint64) uint64 { return uint64(intPow(int64(a), int64(b&math.MaxInt64))) }))
	register(op.Maximum, binaryKernelU(math.Max, func(a, b int64) int64 { return max(a, b) }, func(a, b uint64) uint64 { return max(a, b) }))
	register(op.Minimum, binaryKernelU(math.Min, func(a, b int64) int64 { return min(a, b) }, func(a, b uint64) uint64 { return min(a, b) }))
	register(op.Mod, modKernel)
	register(op.LeftShift, binaryKernelU(nil, func(a, b int64) int64 {
		if b < 0 || b >= 64 {
			return 0
		}
		return a << uint(b)
	}, func(a, b uint64) uint64 {
		if b >= 64 {
			return 0
		}
		return a << b
	}))
	register(op.RightShift, binaryKernelU(nil, func(a, b int64) int64 {
		if b < 0 || b >= 64 {
			if a < 0 {
				return -1
			}
			return 0
		}
		return a >> uint(b)
	}, func(a, b uint64) uint64 {
		if b >= 64 {
			return 0
		}
		return a >> b
	}))

	// Comparisons and logic.
	register(op.Equal, compareKernel(func(a, b float64) bool { return a == b }, func(a, b int64) bool { return a == b }, nil))
	register(op.Greater, compareKernel(func(a, b float64) bool { return a > b }, func(a, b int64) bool { return a > b }, func(a, b uint64) bool { return a > b }))
	register(op.GreaterEqual, compareKernel(func(a, b float64) bool { return a >= b }, func(a, b int64) bool { return a >= b }, func(a, b uint64) bool { return a >= b }))
	register(op.Less, compareKernel(func(a, b float64) bool { return a < b }, func(a, b int64) bool { return a < b }, func(a, b uint64) bool { return a < b }))
	register(op.LessEqual, compareKernel(func(a, b float64) bool { return a <= b }, func(a, b int64) bool { return a <= b }, func(a, b uint64) bool { return a <= b }))
	register(op.LogicalAnd, binaryKernel(nil, func(a, b int64) int64 { return b2i(a != 0 && b != 0) }))
	register(op.LogicalOr, binaryKernel(nil, func(a, b int64) int64 { return b2i(a != 0 || b != 0) }))
	register(op.LogicalXor, binaryKernel(nil, func(a, b int64) int64 { return b2i((a != 0) != (b != 0)) }))

	register(op.Where, whereKernel)
	register(op.Cast, castKernel)
	register(op.Clip, clipKernel)

	// Activations.
	register(op.Relu, unaryKernelU(func(x float64) float64 { return math.Max(x, 0) }, func(x int64) int64 { return max(x, 0) }, func(x uint64) uint64 { return x }))
	register(op.LeakyRelu, leakyReluKernel)
	register(op.PRelu, binaryKernelU(func(x, s float64) float64 {
		if x < 0 {
			return s * x
		}
		return x
	}, func(x, s int64) int64 {
		if x < 0 {
			return s * x
		}
		return x
	}, func(x, _ uint64) uint64 { return x }))
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func fsign(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return x // 0, -0 and NaN are their own sign
}

// intPow is a**b in wrapping int64 arithmetic. A negative exponent gives the
// truncated value of the real power: 1 for a == 1, ±1 for a == -1 and 0
// otherwise (including 0**-n, where the real power is infinite).
func intPow(a, b int64) int64 {
	if b < 0 {
		switch a {
		case 1:
			return 1
		case -1:
			if b%2 == 0 {
				return 1
			}
			return -1
		}
		return 0
	}
	r := int64(1)
	for b > 0 {
		if b&1 == 1 {
			r *= a
		}
		a *= a
		b >>= 1
	}
	return r
}

// BroadcastIndex maps a flat index of the output shape to the flat index of
// an input with shape in broadcast against out.
func BroadcastIndex(out, in ir.Shape, outStrides, inStrides []int64, flat int) int {
	off := len(out) - len(in)
	idx := 0
	rem := int64(flat)
	for d := range out {
		c := rem / outStrides[d]
		rem %= outStrides[d]
		if d >= off && in[d-off] != 1 {
			idx += int(c * inStrides[d-off])
		}
	}
	return idx
}

// broadcaster maps output flat indices to the flat index of one input. The
// map is computed once per call with an odometer over the output shape
// (no divisions per element); an input that already has the output's shape
// maps to itself and needs no table.
type broadcaster struct {
	idx []int // nil: identity
}

func newBroadcaster(out, in ir.Shape) *broadcaster {
	if out.Equal(in) {
		return &broadcaster{}
	}
	n := int(out.NumElements())
	idx := make([]int, n)
	if in.NumElements() == 1 || n == 0 {
		return &broadcaster{idx: idx} // all zeros
	}
	// Effective input strides aligned to the output's dimensions: 0 where
	// the input is broadcast (missing or size-1 dimension).
	rank := len(out)
	st := make([]int, rank)
	inSt := in.Strides()
	off := rank - len(in)
	for d := off; d < rank; d++ {
		if in[d-off] != 1 {
			st[d] = int(inSt[d-off])
		}
	}
	ctr := make([]int64, rank)
	cur := 0
	for k := 0; k < n; k++ {
		idx[k] = cur
		for d := rank - 1; d >= 0; d-- {
			ctr[d]++
			cur += st[d]
			if ctr[d] < out[d] {
				break
			}
			cur -= st[d] * int(ctr[d])
			ctr[d] = 0
		}
	}
	return &broadcaster{idx: idx}
}

func (b *broadcaster) index(k int) int {
	if b.idx == nil {
		return k
	}
	return b.idx[k]
}

// binaryKernel builds a broadcasting kernel from float and int formulas; the
// float one is used for float dtypes (computed in float64), the int one for
// integer and bool dtypes. The result has the output type's dtype.
func binaryKernel(f func(a, b float64) float64, i func(a, b int64) int64) Kernel {
	return binaryKernelU(f, i, nil)
}

// binaryKernelU is binaryKernel with a third formula for unsigned operands,
// computed in uint64; when u is nil unsigned operands use the int formula.
func binaryKernelU(f func(a, b float64) float64, i func(a, b int64) int64, u func(a, b uint64) uint64) Kernel {
	return func(args []*tensor.Tensor, _ ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
		ot := out.(*ir.TensorType)
		a, b := args[0], args[1]
		res := tensor.New(ot.DType, ot.Shape)
		ba, bb := newBroadcaster(ot.Shape, a.Shape), newBroadcaster(ot.Shape, b.Shape)
		if a.DType == ir.Float32 && ot.DType == ir.Float32 {
			// Typed loop for the common case; same arithmetic as below.
			av, bv, rv := a.Float32s(), b.Float32s(), res.Float32s()
			for k := range rv {
				rv[k] = float32(f(float64(av[ba.index(k)]), float64(bv[bb.index(k)])))
			}
			return []*tensor.Tensor{res}, nil
		}
		for k := 0; k < res.Len(); k++ {
			ia, ib := ba.index(k), bb.index(k)
			switch {
			case a.DType.IsFloat():
				res.SetFloat(k, f(a.Float(ia), b.Float(ib)))
			case a.DType.IsUint() && u != nil:
				res.SetInt(k, int64(u(a.Uint(ia), b.Uint(ib))))
			default:
				res.SetInt(k, i(a.Int(ia), b.Int(ib)))
			}
		}
		return []*tensor.Tensor{res}, nil
	}
}

// compareKernel builds a broadcasting kernel with a bool result from float,
// int and (optionally) unsigned predicates.
func compareKernel(f func(a, b float64) bool, i func(a, b int64) bool, u func(a, b uint64) bool) Kernel {
	return func(args []*tensor.Tensor, _ ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
		ot := out.(*ir.TensorType)
		a, b := args[0], args[1]
		res := tensor.New(ot.DType, ot.Shape)
		ba, bb := newBroadcaster(ot.Shape, a.Shape), newBroadcaster(ot.Shape, b.Shape)
		for k := 0; k < res.Len(); k++ {
			ia, ib := ba.index(k), bb.index(k)
			var r bool
			switch {
			case a.DType.IsFloat():
				r = f(a.Float(ia), b.Float(ib))
			case a.DType.IsUint() && u != nil:
				r = u(a.Uint(ia), b.Uint(ib))
			default:
				r = i(a.Int(ia), b.Int(ib))
			}
			res.SetInt(k, b2i(r))
		}
		return []*tensor.Tensor{res}, nil
	}
}

// unaryKernel builds an elementwise kernel from float and int formulas. A
// nil int formula computes integer inputs through the float one.
func unaryKernel(f func(x float64) float64, i func(x int64) int64) Kernel {
	return unaryKernelU(f, i, nil)
}

// unaryKernelU is unaryKernel with a formula for unsigned inputs computed in
// uint64; when u is nil unsigned inputs use the int (or float) formula.
func unaryKernelU(f func(x float64) float64, i func(x int64) int64, u func(x uint64) uint64) Kernel {
	return func(args []*tensor.Tensor, _ ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
		ot := out.(*ir.TensorType)
		x := args[0]
		res := tensor.New(ot.DType, ot.Shape)
		if x.DType == ir.Float32 && ot.DType == ir.Float32 {
			// Typed loop for the common case; same arithmetic as below.
			xv, rv := x.Float32s(), res.Float32s()
			for k := range rv {
				rv[k] = float32(f(float64(xv[k])))
			}
			return []*tensor.Tensor{res}, nil
		}
		for k := 0; k < res.Len(); k++ {
			switch {
			case x.DType.IsFloat() || i == nil:
				res.SetFloat(k, f(x.Float(k)))
			case x.DType.IsUint() && u != nil:
				res.SetInt(k, int64(u(x.Uint(k))))
			default:
				res.SetInt(k, i(x.Int(k)))
			}
		}
		return []*tensor.Tensor{res}, nil
	}
}

func isInfKernel(args []*tensor.Tensor, attrs ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
	pos, neg := attrs.Bool("detect_positive"), attrs.Bool("detect_negative")
	return unaryKernel(func(x float64) float64 {
		return b2f((pos && math.IsInf(x, 1)) || (neg && math.IsInf(x, -1)))
	}, nil)(args, attrs, out)
}

func leakyReluKernel(args []*tensor.Tensor, attrs ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
	alpha := attrs.Float("alpha")
	return unaryKernel(func(x float64) float64 {
		if x < 0 {
			return alpha * x
		}
		return x
	}, nil)(args, attrs, out)
}

// modKernel: fmod=true is C's fmod (sign of the dividend), fmod=false the
// floor modulo (sign of the divisor). An integer remainder by 0 is 0.
func modKernel(args []*tensor.Tensor, attrs ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
	if attrs.Bool("fmod") {
		return binaryKernelU(math.Mod, func(a, b int64) int64 {
			if b == 0 {
				return 0
			}
			return a % b
		}, umod)(args, attrs, out)
	}
	return binaryKernelU(func(a, b float64) float64 {
		r := math.Mod(a, b)
		if r != 0 && (r < 0) != (b < 0) {
			r += b
		}
		return r
	}, func(a, b int64) int64 {
		if b == 0 {
			return 0
		}
		r := a % b
		if r != 0 && (r < 0) != (b < 0) {
			r += b
		}
		return r
	}, umod)(args, attrs, out)
}

func umod(a, b uint64) uint64 {
	if b == 0 {
		return 0
	}
	return a % b
}

func whereKernel(args []*tensor.Tensor, _ ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
	ot := out.(*ir.TensorType)
	c, x, y := args[0], args[1], args[2]
	res := tensor.New(ot.DType, ot.Shape)
	bc, bx, by := newBroadcaster(ot.Shape, c.Shape), newBroadcaster(ot.Shape, x.Shape), newBroadcaster(ot.Shape, y.Shape)
	for k := 0; k < res.Len(); k++ {
		if c.Int(bc.index(k)) != 0 {
			res.CopyElem(k, x, bx.index(k))
		} else {
			res.CopyElem(k, y, by.index(k))
		}
	}
	return []*tensor.Tensor{res}, nil
}

func castKernel(args []*tensor.Tensor, _ ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
	ot := out.(*ir.TensorType)
	x := args[0]
	res := tensor.New(ot.DType, ot.Shape)
	if x.DType == ot.DType {
		copy(res.Data, x.Data)
		return []*tensor.Tensor{res}, nil
	}
	for k := 0; k < res.Len(); k++ {
		switch {
		case x.DType.IsFloat():
			res.SetFloat(k, x.Float(k))
		case x.DType == ir.Uint64 && ot.DType.IsFloat():
			res.SetFloat(k, float64(x.Uint(k)))
		default:
			res.SetInt(k, x.Int(k))
		}
	}
	return []*tensor.Tensor{res}, nil
}

// clipKernel clamps in float64 for float inputs; for integers the bounds are
// rounded inward and saturated to the int64 (uint64 for uint64 inputs)
// range, and the clamp is exact.
func clipKernel(args []*tensor.Tensor, attrs ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
	lo, hi := attrs.Float("a_min"), attrs.Float("a_max")
	ot := out.(*ir.TensorType)
	x := args[0]
	res := tensor.New(ot.DType, ot.Shape)
	if x.DType.IsFloat() {
		for k := 0; k < res.Len(); k++ {
			v := x.Float(k)
			if v < lo {
				v = lo
			}
			if v > hi {
				v = hi
			}
			res.SetFloat(k, v)
		}
		return []*tensor.Tensor{res}, nil
	}
	ilo, ihi := ir.SaturateInt64(math.Ceil(lo)), ir.SaturateInt64(math.Floor(hi))
	ulo, uhi := ir.SaturateUint64(math.Ceil(lo)), ir.SaturateUint64(math.Floor(hi))
	for k := 0; k < res.Len(); k++ {
		if x.DType == ir.Uint64 {
			res.SetInt(k, int64(min(max(x.Uint(k), ulo), uhi)))
			continue
		}
		res.SetInt(k, min(max(x.Int(k), ilo), ihi))
	}
	return []*tensor.Tensor{res}, nil
}
