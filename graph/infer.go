package graph

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// InferExpr computes and caches the type of e from its children's types,
// which must already be known (as they are when building bottom-up). For
// calls of *GlobalVar it needs mod (may be nil otherwise).
func InferExpr(mod *Module, e Expr) (ir.Type, error) {
	if t := e.Type(); t != nil {
		return t, nil
	}
	var t ir.Type
	switch x := e.(type) {
	case *Var:
		return nil, fmt.Errorf("variable %%%s has no type", x.Name)
	case *Constant:
		t = x.Value.Type()
	case *Tuple:
		fs := make([]ir.Type, len(x.Fields))
		for i, f := range x.Fields {
			if fs[i] = f.Type(); fs[i] == nil {
				return nil, fmt.Errorf("tuple field %d is untyped", i)
			}
		}
		t = &ir.TupleType{Fields: fs}
	case *TupleGetItem:
		tt, ok := x.Tuple.Type().(*ir.TupleType)
		if !ok {
			return nil, fmt.Errorf("tuple item %d of a non-tuple %v", x.Index, x.Tuple.Type())
		}
		if x.Index < 0 || x.Index >= len(tt.Fields) {
			return nil, fmt.Errorf("tuple index %d out of range for %s", x.Index, tt)
		}
		t = tt.Fields[x.Index]
	case *GlobalVar:
		if mod == nil {
			return nil, fmt.Errorf("@%s used without a module", x.Name)
		}
		f, err := mod.Lookup(x)
		if err != nil {
			return nil, err
		}
		if f.Type() == nil {
			if err := InferFunction(mod, f); err != nil {
				return nil, err
			}
		}
		t = f.Type()
	case *Function:
		if err := InferFunction(mod, x); err != nil {
			return nil, err
		}
		return x.Type(), nil
	case *Call:
		args := make([]ir.Type, len(x.Args))
		for i, a := range x.Args {
			if args[i] = a.Type(); args[i] == nil {
				return nil, fmt.Errorf("%s: argument %d is untyped", Describe(x), i)
			}
		}
		if x.Op != nil {
			rt, err := x.Op.Infer(args, x.Attrs)
			if err == nil {
				// A result the process could never hold is refused here,
				// before anything is allocated for it.
				if err = CheckTypeSize(rt); err != nil {
					err = fmt.Errorf("%s: %v", x.Op.Name, err)
				}
			}
			if err != nil {
				if x.Span != "" {
					return nil, fmt.Errorf("node %q: %v", x.Span, err)
				}
				return nil, err
			}
			t = rt
		} else {
			var ft *ir.FuncType
			switch f := x.Fn.(type) {
			case *Function:
				if err := InferFunction(mod, f); err != nil {
					return nil, err
				}
				ft = f.FuncType()
			default:
				ftt, ok := f.Type().(*ir.FuncType)
				if !ok {
					return nil, fmt.Errorf("call of a non-function %s", Describe(f))
				}
				ft = ftt
			}
			if len(ft.Params) != len(args) {
				return nil, fmt.Errorf("%s: want %d arguments, got %d", Describe(x), len(ft.Params), len(args))
			}
			for i := range args {
				if !ir.TypeEqual(ft.Params[i], args[i]) {
					return nil, fmt.Errorf("%s: argument %d has type %s, want %s", Describe(x), i, args[i], ft.Params[i])
				}
			}
			t = ft.Ret
		}
	default:
		return nil, fmt.Errorf("unknown expression %T", e)
	}
	e.setType(t)
	return t, nil
}

// InferFunction types a function's body bottom-up and sets the function's type.
func InferFunction(mod *Module, f *Function) error {
	for _, p := range f.Params {
		if p.Type() == nil {
			return fmt.Errorf("parameter %%%s has no type", p.Name)
		}
		if err := CheckTypeSize(p.Type()); err != nil {
			return fmt.Errorf("parameter %%%s: %v", p.Name, err)
		}
	}
	var err error
	PostOrder(f.Body, func(e Expr) {
		if err == nil {
			_, err = InferExpr(mod, e)
		}
	})
	if err != nil {
		return err
	}
	if f.RetType != nil && !ir.TypeEqual(f.RetType, f.Body.Type()) {
		return fmt.Errorf("function body has type %s, annotated %s", f.Body.Type(), f.RetType)
	}
	f.setType(f.FuncType())
	return nil
}

// InferTypes types every function of the module.
func InferTypes(mod *Module) error {
	for _, name := range mod.Names() {
		if err := InferFunction(mod, mod.Funcs[name]); err != nil {
			return fmt.Errorf("@%s: %v", name, err)
		}
	}
	return nil
}

// ClearTypes forgets cached types under root (not of Vars or Constants) so
// that InferTypes recomputes them after a rewrite that changed attributes in place.
func ClearTypes(root Expr) {
	PostOrder(root, func(e Expr) {
		switch e.(type) {
		case *Var, *Constant:
		default:
			e.setType(nil)
		}
	})
}

// CheckTypeSize checks that every tensor of type t has a size that
// neither overflows nor exceeds the memory budget (ir.CheckBytes).
func CheckTypeSize(t ir.Type) error {
	switch x := t.(type) {
	case *ir.TensorType:
		_, err := ir.CheckBytes(x.DType, x.Shape)
		return err
	case *ir.TupleType:
		for _, f := range x.Fields {
			if err := CheckTypeSize(f); err != nil {
				return err
			}
		}
	}
	return nil
}
