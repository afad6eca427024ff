package interp

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
)

// Value is a run-time value: an integer or bool (I), a float (F), a
// pointer into an Array (Mem, Off in elements of Mem.DType) or a string
// constant (S), according to T.
type Value struct {
	T   tir.Type
	I   int64
	F   float64
	Mem *Array
	Off int64
	S   string
}

// Float returns the value as a float64 (integers converted).
func (v Value) Float() float64 {
	if v.T.IsFloat() {
		return v.F
	}
	_, f := tir.CastConst(v.T.DType, ir.Float64, v.I, 0)
	return f
}

// Extern implements an external function for call_extern. It receives the
// evaluated arguments (buffers arrive as pointer Values) and returns the
// result (ignored for Void calls).
type Extern func(args []Value) (Value, error)

// Options configures Run.
type Options struct {
	// Externs maps call_extern names to Go implementations.
	Externs map[string]Extern
}

// Run executes f. args has one entry per parameter: an *Array for a buffer
// or handle parameter (with the buffer's dtype and at least its span of
// elements), and for scalar parameters an int, int64, float64, bool or
// Value. Outputs are written into the arrays.
func Run(f *tir.PrimFunc, args []any, opts *Options) (err error) {
	if len(args) != len(f.Params) {
		return fmt.Errorf("interp: %s takes %d arguments, got %d", f.Name, len(f.Params), len(args))
	}
	m := &machine{env: map[*tir.Var]Value{}}
	if opts != nil {
		m.externs = opts.Externs
	}
	for i, p := range f.Params {
		v, err := bindArg(f, p, args[i])
		if err != nil {
			return fmt.Errorf("interp: %s: %w", f.Name, err)
		}
		m.env[p] = v
	}
	defer func() {
		if r := recover(); r != nil {
			re, ok := r.(runError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("interp: %s: %w", f.Name, re.err)
		}
	}()
	m.stmt(f.Body)
	return nil
}

func bindArg(f *tir.PrimFunc, p *tir.Var, a any) (Value, error) {
	if p.T.Handle {
		arr, ok := a.(*Array)
		if !ok {
			return Value{}, fmt.Errorf("parameter %s wants an *Array, got %T", p.Name, a)
		}
		if b, ok := f.BufferMap[p]; ok {
			if arr.DType != b.DType {
				return Value{}, fmt.Errorf("buffer %s holds %s, got a %s array", b.Name, b.DType, arr.DType)
			}
			if arr.Len() < b.Span() {
				return Value{}, fmt.Errorf("buffer %s needs %d elements, got %d", b.Name, b.Span(), arr.Len())
			}
		}
		return Value{T: p.T, Mem: arr}, nil
	}
	t := p.T
	switch x := a.(type) {
	case Value:
		return x, nil
	case int:
		return scalar(t, int64(x), float64(x)), nil
	case int64:
		return scalar(t, x, float64(x)), nil
	case float64:
		if !t.IsFloat() {
			return Value{}, fmt.Errorf("parameter %s of type %s got a float64", p.Name, t)
		}
		return scalar(t, 0, x), nil
	case bool:
		var i int64
		if x {
			i = 1
		}
		return scalar(t, i, float64(i)), nil
	}
	return Value{}, fmt.Errorf("parameter %s of type %s: unsupported argument %T", p.Name, t, a)
}

func scalar(t tir.Type, i int64, f float64) Value {
	if t.IsFloat() {
		return Value{T: t, F: tir.RoundFloat(f, t.DType)}
	}
	return Value{T: t, I: tir.WrapInt(i, t.DType)}
}

type machine struct {
	env     map[*tir.Var]Value
	externs map[string]Extern
}

// bind sets x to v and returns a function restoring the previous binding.
func (m *machine) bind(x *tir.Var, v Value) func() {
	old, had := m.env[x]
	m.env[x] = v
	return func() {
		if had {
			m.env[x] = old
		} else {
			delete(m.env, x)
		}
	}
}

func (m *machine) stmt(s tir.Stmt) {
	switch x := s.(type) {
	case *tir.SeqStmt:
		for _, c := range x.Seq {
			m.stmt(c)
		}
	case *tir.For:
		lo := m.expr(x.Min).I
		n := m.expr(x.Extent).I
		dt := x.Var.T.DType
		for k := int64(0); k < n; k++ {
			restore := m.bind(x.Var, Value{T: x.Var.T, I: tir.WrapInt(lo+k, dt)})
			m.stmt(x.Body)
			restore()
		}
	case *tir.BufferStore:
		v := m.expr(x.Value)
		mem, off := m.address(x.Buffer, x.Indices)
		if v.T.IsFloat() {
			mem.SetFloat(off, v.F)
		} else {
			mem.SetInt(off, v.I)
		}
	case *tir.Allocate:
		b := x.Buffer
		mem := NewArray(b.DType, b.Span())
		for i := range mem.Data {
			mem.Data[i] = 0xFF
		}
		restore := m.bind(b.Data, Value{T: b.Data.T, Mem: mem})
		m.stmt(x.Body)
		restore()
	case *tir.IfThenElse:
		if m.expr(x.Cond).I != 0 {
			m.stmt(x.Then)
		} else if x.Else != nil {
			m.stmt(x.Else)
		}
	case *tir.LetStmt:
		restore := m.bind(x.Var, m.expr(x.Value))
		m.stmt(x.Body)
		restore()
	case *tir.Evaluate:
		m.expr(x.Value)
	case *tir.AttrStmt:
		m.expr(x.Value)
		m.stmt(x.Body)
	default:
		fail("unknown statement %T", s)
	}
}

// address computes the array and element offset of b[idx...], checking
// bounds per dimension and against the array.
func (m *machine) address(b *tir.Buffer, idx []tir.PrimExpr) (*Array, int64) {
	base, ok := m.env[b.Data]
	if !ok {
		fail("buffer %s: data variable %s is not bound", b.Name, b.Data.Name)
	}
	if base.Mem == nil {
		fail("buffer %s: data variable %s is a null pointer", b.Name, b.Data.Name)
	}
	if len(idx) != len(b.Shape) {
		fail("buffer %s: %d indices for %d dimensions", b.Name, len(idx), len(b.Shape))
	}
	strides := b.ElemStrides()
	off := base.Off
	for i, e := range idx {
		v := m.expr(e)
		if v.I < 0 || v.I >= b.Shape[i] {
			fail("buffer %s: index %d out of bounds for dimension %d of size %d", b.Name, v.I, i, b.Shape[i])
		}
		off += v.I * strides[i]
	}
	if base.Mem.DType != b.DType {
		fail("buffer %s of %s accesses %s memory", b.Name, b.DType, base.Mem.DType)
	}
	if off < 0 || off >= base.Mem.Len() {
		fail("buffer %s: element %d outside its memory of %d elements", b.Name, off, base.Mem.Len())
	}
	return base.Mem, off
}

func boolVal(b bool) Value {
	if b {
		return Value{T: tir.BoolT, I: 1}
	}
	return Value{T: tir.BoolT}
}

func (m *machine) expr(e tir.PrimExpr) Value {
	switch x := e.(type) {
	case *tir.IntImm:
		return Value{T: x.T, I: x.Value}
	case *tir.FloatImm:
		return Value{T: x.T, F: x.Value}
	case *tir.StringImm:
		return Value{T: x.Type(), S: x.Value}
	case *tir.Var:
		v, ok := m.env[x]
		if !ok {
			fail("variable %s is not bound", x.Name)
		}
		return v
	case *tir.Binary:
		a := m.expr(x.A)
		switch x.Op {
		case tir.OpAnd:
			if a.I == 0 {
				return boolVal(false)
			}
			return boolVal(m.expr(x.B).I != 0)
		case tir.OpOr:
			if a.I != 0 {
				return boolVal(true)
			}
			return boolVal(m.expr(x.B).I != 0)
		}
		b := m.expr(x.B)
		t := a.T
		if t.IsFloat() {
			r := tir.FloatBinary(x.Op, t.DType, a.F, b.F)
			if x.Op.IsCompare() {
				return boolVal(r != 0)
			}
			return Value{T: t, F: r}
		}
		r, ok := tir.IntBinary(x.Op, t.DType, a.I, b.I)
		if !ok {
			fail("integer division by zero in %s", tir.ExprString(x))
		}
		if x.Op.IsCompare() {
			return boolVal(r != 0)
		}
		return Value{T: t, I: r}
	case *tir.Not:
		return boolVal(m.expr(x.A).I == 0)
	case *tir.Select:
		c, a, b := m.expr(x.Cond), m.expr(x.True), m.expr(x.False)
		if c.I != 0 {
			return a
		}
		return b
	case *tir.Cast:
		v := m.expr(x.Value)
		i, f := tir.CastConst(v.T.DType, x.T.DType, v.I, v.F)
		return Value{T: x.T, I: i, F: f}
	case *tir.BufferLoad:
		mem, off := m.address(x.Buffer, x.Indices)
		t := tir.Scalar(x.Buffer.DType)
		if t.IsFloat() {
			return Value{T: t, F: mem.loadFloat(off)}
		}
		return Value{T: t, I: mem.loadInt(off)}
	case *tir.Call:
		return m.call(x)
	}
	fail("unknown expression %T", e)
	return Value{}
}

func (m *machine) call(c *tir.Call) Value {
	switch c.Op {
	case tir.IntrinIfThenElse:
		if m.expr(c.Args[0]).I != 0 {
			return m.expr(c.Args[1])
		}
		return m.expr(c.Args[2])
	case tir.IntrinCheckIndex:
		i, n := m.expr(c.Args[0]).I, m.expr(c.Args[1]).I
		if i < -n || i >= n {
			fail("index %d out of range [%d, %d)", i, -n, n)
		}
		if i < 0 {
			i += n
		}
		return Value{T: c.T, I: i}
	case tir.IntrinAddressOf:
		ld := c.Args[0].(*tir.BufferLoad)
		mem, off := m.address(ld.Buffer, ld.Indices)
		return Value{T: c.T, Mem: mem, Off: off}
	case tir.CallExtern:
		if c.Kernel != nil {
			args := make([]tir.KernelArg, len(c.Args))
			for i, a := range c.Args {
				v := m.expr(a)
				args[i] = tir.KernelArg{Off: v.Off, Int: v.I, Float: v.F}
				if v.Mem != nil {
					args[i].Mem = v.Mem
				}
			}
			if err := c.Kernel.Eval(args); err != nil {
				fail("kernel %s: %v", c.Extern, err)
			}
			return Value{T: c.T}
		}
		fn, ok := m.externs[c.Extern]
		if !ok {
			fail("call_extern: no implementation of %q", c.Extern)
		}
		args := make([]Value, len(c.Args))
		for i, a := range c.Args {
			args[i] = m.expr(a)
		}
		r, err := fn(args)
		if err != nil {
			fail("call_extern %s: %v", c.Extern, err)
		}
		r.T = c.T
		return r
	}
	info := c.Op.Info()
	args := make([]float64, len(c.Args))
	for i, a := range c.Args {
		args[i] = m.expr(a).F
	}
	d := c.Args[0].Type().DType
	switch info.Kind {
	case tir.KindFloatUnary:
		return Value{T: c.T, F: tir.RoundFloat(info.Unary(args[0]), d)}
	case tir.KindFloatBinary:
		return Value{T: c.T, F: tir.RoundFloat(info.Binary(args[0], args[1]), d)}
	case tir.KindFloatTernary:
		return Value{T: c.T, F: tir.RoundFloat(info.Ternary(args[0], args[1], args[2]), d)}
	case tir.KindFloatPred:
		return boolVal(info.Pred(args[0]))
	}
	fail("intrinsic %s not supported", c.Op)
	return Value{}
}
