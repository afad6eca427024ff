package tir

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
)

// Storage scopes. Targets may use their own scope names (for example
// "vanilla.sram" for an accelerator's scratchpad); code generation decides
// what each scope means.
const (
	ScopeGlobal = "global" // ordinary memory, visible to the whole program
	ScopeLocal  = "local"  // private to the function (a C local array)
)

// Buffer describes a region of memory: element type, static shape,
// optional strides, the storage scope and the handle variable (Data) that
// points at the first element. Kiln shapes are static and the element
// offset is always zero. Several Buffer values may share one Data
// variable (views of the same memory, e.g. after flattening). Buffers are
// compared by identity.
type Buffer struct {
	Name  string
	DType ir.DType
	Shape ir.Shape
	// Strides are element strides per dimension; nil means compact
	// row-major.
	Strides []int64
	Data    *Var
	Scope   string
	// Producer is the object this buffer was created for by a
	// front end of TIR (a te.Tensor for the buffers te creates), so that
	// the producer can be found from a load in an expression; nil
	// otherwise. TIR itself never reads it.
	Producer any
}

// NewBuffer returns a compact row-major buffer with a fresh data variable
// named after it. An empty scope means ScopeGlobal.
func NewBuffer(name string, dt ir.DType, shape ir.Shape, scope string) *Buffer {
	if scope == "" {
		scope = ScopeGlobal
	}
	if !dt.IsNumeric() && dt != ir.Bool {
		panic(fmt.Sprintf("tir.NewBuffer: buffer %s has invalid dtype %s", name, dt))
	}
	return &Buffer{Name: name, DType: dt, Shape: shape.Clone(), Data: NewVar(name, HandleOf(dt)), Scope: scope}
}

// Rank is the number of dimensions.
func (b *Buffer) Rank() int { return len(b.Shape) }

// NumElements is the product of the shape.
func (b *Buffer) NumElements() int64 { return b.Shape.NumElements() }

// ElemStrides returns the strides in elements: Strides when set, else the
// row-major strides of Shape.
func (b *Buffer) ElemStrides() []int64 {
	if b.Strides != nil {
		return b.Strides
	}
	return b.Shape.Strides()
}

// Span is the number of elements from the first to one past the last
// element the buffer can address (NumElements for compact buffers).
func (b *Buffer) Span() int64 {
	if b.NumElements() == 0 {
		return 0
	}
	span := int64(1)
	for i, s := range b.ElemStrides() {
		span += (b.Shape[i] - 1) * s
	}
	return span
}

// NumBytes is the storage size Span occupies.
func (b *Buffer) NumBytes() int64 { return b.Span() * int64(b.DType.Size()) }

// IsCompact reports whether the buffer is row-major without gaps.
func (b *Buffer) IsCompact() bool {
	if b.Strides == nil {
		return true
	}
	rm := b.Shape.Strides()
	for i := range rm {
		if b.Shape[i] != 1 && rm[i] != b.Strides[i] {
			return false
		}
	}
	return true
}

// String returns the buffer's name.
func (b *Buffer) String() string { return b.Name }

// Well-known PrimFunc attribute names.
const (
	AttrGlobalSymbol = "global_symbol" // string: the C symbol name
	AttrNoAlias      = "tir.noalias"   // bool: buffer parameters do not alias
)

// AttrTarget is the key under which the printer shows PrimFunc.Target
// among the attributes.
const AttrTarget = "target"

// PrimFunc is a low-level function: a list of parameters (scalar variables
// and handles), a buffer map giving each buffer parameter its shape (the
// buffer's Data is the parameter variable itself), a body and attributes.
// It returns nothing; results are written to output buffers.
type PrimFunc struct {
	Name      string
	Params    []*Var
	BufferMap map[*Var]*Buffer
	Body      Stmt
	Attrs     ir.Attrs
	// Target is the full target that compiles the function (kind,
	// attributes and label: one of two `c` targets of a big.LITTLE
	// compilation), or nil before lowering assigns one. Printed as the
	// "target" attribute.
	Target *targets.Target
	// PreflattenedBufferMap is BufferMap as it was before buffers were
	// flattened (nil until then): the logical shapes callers pass, which
	// code generators check arguments against. Never modified once set.
	PreflattenedBufferMap map[*Var]*Buffer
}

// NewPrimFunc returns an empty function whose global_symbol is name. Add
// parameters with AddBuffer and AddScalar and set Body.
func NewPrimFunc(name string) *PrimFunc {
	return &PrimFunc{Name: name, BufferMap: map[*Var]*Buffer{}, Body: NoOp(), Attrs: ir.Attrs{AttrGlobalSymbol: name}}
}

// AddBuffer appends a buffer parameter (its Data variable) and returns b.
func (f *PrimFunc) AddBuffer(b *Buffer) *Buffer {
	f.Params = append(f.Params, b.Data)
	f.BufferMap[b.Data] = b
	return b
}

// AddScalar appends a scalar parameter and returns it.
func (f *PrimFunc) AddScalar(name string, t Type) *Var {
	v := NewVar(name, t)
	f.Params = append(f.Params, v)
	return v
}

// Buffers returns the buffer parameters in parameter order.
func (f *PrimFunc) Buffers() []*Buffer {
	var out []*Buffer
	for _, p := range f.Params {
		if b, ok := f.BufferMap[p]; ok {
			out = append(out, b)
		}
	}
	return out
}

// Copy returns a shallow copy whose Params, BufferMap and Attrs may be
// modified without affecting f.
func (f *PrimFunc) Copy() *PrimFunc {
	g := *f
	g.Params = append([]*Var(nil), f.Params...)
	g.BufferMap = make(map[*Var]*Buffer, len(f.BufferMap))
	for k, v := range f.BufferMap {
		g.BufferMap[k] = v
	}
	g.Attrs = f.Attrs.Clone()
	return &g
}

// WithBody returns a copy of f with a new body.
func (f *PrimFunc) WithBody(body Stmt) *PrimFunc {
	g := f.Copy()
	g.Body = body
	return g
}

// Module is an ordered collection of PrimFuncs with unique names.
type Module struct {
	funcs []*PrimFunc
}

// NewModule returns a module holding funcs; names must be unique.
func NewModule(funcs ...*PrimFunc) (*Module, error) {
	m := &Module{}
	for _, f := range funcs {
		if err := m.Add(f); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Add appends f; it is an error if a function of that name exists.
func (m *Module) Add(f *PrimFunc) error {
	if f.Name == "" {
		return fmt.Errorf("tir: function without a name")
	}
	if m.Lookup(f.Name) != nil {
		return fmt.Errorf("tir: module already has a function named %q", f.Name)
	}
	m.funcs = append(m.funcs, f)
	return nil
}

// Lookup returns the function named name, or nil.
func (m *Module) Lookup(name string) *PrimFunc {
	for _, f := range m.funcs {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// Funcs returns the functions in insertion order (a copy of the list).
func (m *Module) Funcs() []*PrimFunc { return append([]*PrimFunc(nil), m.funcs...) }

// Len is the number of functions.
func (m *Module) Len() int { return len(m.funcs) }

// Replace swaps in f for the function of the same name, keeping its
// position; it is an error if there is none.
func (m *Module) Replace(f *PrimFunc) error {
	for i, g := range m.funcs {
		if g.Name == f.Name {
			m.funcs[i] = f
			return nil
		}
	}
	return fmt.Errorf("tir: module has no function named %q", f.Name)
}

// Copy returns a module with the same functions that can be modified
// (Add, Replace) without affecting m.
func (m *Module) Copy() *Module { return &Module{funcs: m.Funcs()} }
