// Package ref is kiln's reference executor: a pure-Go interpreter of the
// graph IR, written to be obviously correct rather than fast. Every compiled
// path is tested against it, and the ONNX frontend uses it to fold constant
// subgraphs at import time.
//
// Each operator has one Kernel, registered against the *op.Op it implements.
// Kernels receive the already-inferred output type, so they never repeat
// shape logic beyond what computing needs.
package ref

import (
	"context"
	"fmt"
	"sync"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Kernel computes one operator call. out is the call's checked type (a
// TensorType, or a TupleType for multi-output ops); the kernel returns one
// tensor per output (one for a tensor type, one per field for a tuple).
type Kernel func(args []*tensor.Tensor, attrs ir.Attrs, out ir.Type) ([]*tensor.Tensor, error)

var (
	kernelsMu sync.RWMutex
	kernels   = map[*op.Op]Kernel{}
)

// Register installs the kernel of an operator. A second kernel for the same
// operator is an error.
func Register(o *op.Op, k Kernel) error {
	kernelsMu.Lock()
	defer kernelsMu.Unlock()
	if _, dup := kernels[o]; dup {
		return fmt.Errorf("ref.Register: %s already has a kernel", o.Name)
	}
	kernels[o] = k
	return nil
}

// register installs a built-in kernel at initialisation; a duplicate is a bug.
func register(o *op.Op, k Kernel) {
	if err := Register(o, k); err != nil {
		panic(err)
	}
}

// Has reports whether o has a reference kernel.
func Has(o *op.Op) bool {
	kernelsMu.RLock()
	defer kernelsMu.RUnlock()
	_, ok := kernels[o]
	return ok
}

// Value is a runtime value: a tensor or a tuple of values.
type Value struct {
	Tensor *tensor.Tensor
	Tuple  []Value
}

// TensorValue wraps a tensor.
func TensorValue(t *tensor.Tensor) Value { return Value{Tensor: t} }

// Flatten lists the tensors of a value in order (a tuple's fields depth-first).
func (v Value) Flatten() []*tensor.Tensor {
	if v.Tensor != nil {
		return []*tensor.Tensor{v.Tensor}
	}
	var out []*tensor.Tensor
	for _, f := range v.Tuple {
		out = append(out, f.Flatten()...)
	}
	return out
}

// EvalOp runs one operator on tensors. The call is type-checked first, so
// ill-typed inputs give an error rather than a kernel panic.
func EvalOp(o *op.Op, attrs ir.Attrs, args []*tensor.Tensor) (res []*tensor.Tensor, out ir.Type, err error) {
	defer recoverKernel(o.Name, &err)
	kernelsMu.RLock()
	k, ok := kernels[o]
	kernelsMu.RUnlock()
	if !ok {
		return nil, nil, fmt.Errorf("reference executor has no kernel for %s", o.Name)
	}
	ts := make([]ir.Type, len(args))
	for i, a := range args {
		ts[i] = a.Type()
	}
	out, err = o.Infer(ts, attrs)
	if err == nil {
		err = graph.CheckTypeSize(out)
	}
	if err != nil {
		return nil, nil, err
	}
	res, err = k(args, attrs, out)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", o.Name, err)
	}
	if err := checkResult(o, out, res); err != nil {
		return nil, nil, err
	}
	return res, out, nil
}

func checkResult(o *op.Op, out ir.Type, res []*tensor.Tensor) error {
	var want []ir.Type
	switch t := out.(type) {
	case *ir.TensorType:
		want = []ir.Type{t}
	case *ir.TupleType:
		want = t.Fields
	}
	if len(res) != len(want) {
		return fmt.Errorf("%s kernel returned %d tensors, type says %d", o.Name, len(res), len(want))
	}
	for i := range res {
		if !ir.TypeEqual(res[i].Type(), want[i]) {
			return fmt.Errorf("%s kernel output %d is %s, type says %s", o.Name, i, res[i].Type(), want[i])
		}
	}
	return nil
}

// Run evaluates the module's main function on the given arguments (one per
// parameter, in order) and returns its result.
func Run(mod *graph.Module, args []*tensor.Tensor) (Value, error) {
	return RunFunctionContext(context.Background(), mod, mod.Main(), args)
}

// RunContext is Run that stops, with ctx's error, before the next node
// once ctx is done.
func RunContext(ctx context.Context, mod *graph.Module, args []*tensor.Tensor) (Value, error) {
	return RunFunctionContext(ctx, mod, mod.Main(), args)
}

// RunFunction evaluates f on the arguments. A tensor too large for the
// memory budget is an error; so is a kernel's panic (an internal error).
func RunFunction(mod *graph.Module, f *graph.Function, args []*tensor.Tensor) (Value, error) {
	return RunFunctionContext(context.Background(), mod, f, args)
}

// RunFunctionContext is RunFunction that stops, with ctx's error, before
// the next node once ctx is done.
func RunFunctionContext(ctx context.Context, mod *graph.Module, f *graph.Function, args []*tensor.Tensor) (v Value, err error) {
	defer recoverKernel("reference executor", &err)
	if len(args) != len(f.Params) {
		return Value{}, fmt.Errorf("function takes %d inputs, got %d", len(f.Params), len(args))
	}
	vals := make([]Value, len(args))
	for i, p := range f.Params {
		pt, ok := p.Type().(*ir.TensorType)
		if !ok {
			return Value{}, fmt.Errorf("parameter %%%s is not a tensor", p.Name)
		}
		if args[i] == nil {
			return Value{}, fmt.Errorf("input %q is missing", p.Name)
		}
		if !ir.TypeEqual(pt, args[i].Type()) {
			return Value{}, fmt.Errorf("input %q: got %s, want %s", p.Name, args[i].Type(), pt)
		}
		vals[i] = TensorValue(args[i])
	}
	return callFunction(ctx, mod, f, vals)
}

func callFunction(ctx context.Context, mod *graph.Module, f *graph.Function, args []Value) (Value, error) {
	env := make(map[graph.Expr]Value, 64)
	for i, p := range f.Params {
		env[p] = args[i]
	}
	var err error
	graph.PostOrder(f.Body, func(e graph.Expr) {
		if err != nil {
			return
		}
		if _, done := env[e]; done {
			return
		}
		if ctx.Done() != nil {
			if err = ctx.Err(); err != nil {
				return
			}
		}
		var v Value
		v, err = evalNode(ctx, mod, e, env)
		if err == nil {
			env[e] = v
		}
	})
	if err != nil {
		return Value{}, err
	}
	return env[f.Body], nil
}

func evalNode(ctx context.Context, mod *graph.Module, e graph.Expr, env map[graph.Expr]Value) (Value, error) {
	switch x := e.(type) {
	case *graph.Var:
		return Value{}, fmt.Errorf("unbound variable %%%s", x.Name)
	case *graph.Constant:
		return TensorValue(x.Value), nil
	case *graph.Tuple:
		fs := make([]Value, len(x.Fields))
		for i, f := range x.Fields {
			fs[i] = env[f]
		}
		return Value{Tuple: fs}, nil
	case *graph.TupleGetItem:
		t := env[x.Tuple]
		if x.Index >= len(t.Tuple) {
			return Value{}, fmt.Errorf("tuple index %d out of range", x.Index)
		}
		return t.Tuple[x.Index], nil
	case *graph.GlobalVar, *graph.Function:
		return Value{}, nil // functions are only called, never materialised
	case *graph.Call:
		args := make([]Value, len(x.Args))
		for i, a := range x.Args {
			args[i] = env[a]
		}
		if x.Op != nil {
			ts := make([]*tensor.Tensor, len(args))
			for i, a := range args {
				if a.Tensor == nil {
					return Value{}, fmt.Errorf("%s: argument %d is not a tensor", graph.Describe(x), i)
				}
				ts[i] = a.Tensor
			}
			res, out, err := EvalOp(x.Op, x.Attrs, ts)
			if err != nil {
				if x.Span != "" {
					return Value{}, fmt.Errorf("node %q: %v", x.Span, err)
				}
				return Value{}, err
			}
			if _, isTuple := out.(*ir.TupleType); isTuple {
				fs := make([]Value, len(res))
				for i, r := range res {
					fs[i] = TensorValue(r)
				}
				return Value{Tuple: fs}, nil
			}
			return TensorValue(res[0]), nil
		}
		var fn *graph.Function
		switch f := x.Fn.(type) {
		case *graph.Function:
			fn = f
		case *graph.GlobalVar:
			var err error
			if fn, err = mod.Lookup(f); err != nil {
				return Value{}, err
			}
		default:
			return Value{}, fmt.Errorf("call of unsupported callee %T", x.Fn)
		}
		return callFunction(ctx, mod, fn, args)
	}
	return Value{}, fmt.Errorf("reference executor: unknown expression %T", e)
}

// recoverKernel turns a panic below a public entry into *err: a tensor
// the memory budget refuses (tensor.AllocError) is an ordinary error, any
// other panic an internal error with where it happened.
func recoverKernel(where string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	if ae, ok := r.(*tensor.AllocError); ok {
		*err = fmt.Errorf("%s: %w", where, ae.Err)
		return
	}
	*err = fmt.Errorf("%s: internal error: %v (please report this with the model)", where, r)
}
