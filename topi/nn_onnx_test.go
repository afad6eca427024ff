package topi

import (
	"fmt"
	"github.com/kiln-dev/kiln/internal/testenv"
	"path/filepath"
	"sort"
	"testing"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/topi/topitest"
)

// nnONNXMaxElems bounds the argument size of a checked call (the TIR
// interpreter is slow).
const nnONNXMaxElems = 40000

// TestNNOnONNXNodeTests imports every ONNX backend node test, evaluates
// its graph with the reference executor and checks every call of an nn
// group operator on its actual argument values with topitest.Check.
func TestNNOnONNXNodeTests(t *testing.T) {
	root := testenv.SharedPath(t, "onnx", "node")
	dirs, err := filepath.Glob(filepath.Join(root, "test_*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no ONNX node tests under %s", root)
	}
	inGroup := map[*op.Op]bool{}
	for _, o := range nnGroupOps {
		inGroup[o] = true
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			calls, err := nnCallsOf(dir, inGroup)
			if err != nil || len(calls) == 0 {
				return // not importable here, or no nn call: nothing to check
			}
			for _, c := range calls {
				t.Logf("checked %s", c.Op.Name)
				if err := topitest.Check(c); err != nil {
					t.Errorf("%s %v: %v", c.Op.Name, c.Attrs, err)
				}
			}
		})
	}
}

// nnCallsOf loads the model of an ONNX node test with its first data set
// and returns a check case for every call of an operator in ops.
func nnCallsOf(dir string, ops map[*op.Op]bool) ([]topitest.Case, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "test_data_set_0", "input_*.pb"))
	sort.Strings(files)
	vals := map[string]*tensor.Tensor{}
	var order []*tensor.Tensor
	for _, f := range files {
		tt, name, err := onnx.ReadTensorFile(f)
		if err != nil {
			return nil, err
		}
		vals[name] = tt
		order = append(order, tt)
	}
	opts := onnx.Options{InputShapes: map[string]ir.Shape{}, Freeze: vals}
	for n, v := range vals {
		opts.InputShapes[n] = v.Shape
	}
	m, err := onnx.LoadFile(filepath.Join(dir, "model.onnx"), opts)
	if err != nil {
		return nil, err
	}
	main := m.Module.Main()
	env := map[graph.Expr]ref.Value{}
	for i, p := range main.Params {
		v := vals[m.Inputs[i].Name]
		if v == nil && i < len(order) {
			v = order[i]
		}
		if v == nil {
			return nil, fmt.Errorf("no value for input %s", m.Inputs[i].Name)
		}
		env[p] = ref.TensorValue(v)
	}
	var cases []topitest.Case
	graph.PostOrder(main.Body, func(e graph.Expr) {
		if err != nil {
			return
		}
		if _, done := env[e]; done {
			return
		}
		switch x := e.(type) {
		case *graph.Constant:
			env[e] = ref.TensorValue(x.Value)
		case *graph.Tuple:
			fs := make([]ref.Value, len(x.Fields))
			for i, f := range x.Fields {
				fs[i] = env[f]
			}
			env[e] = ref.Value{Tuple: fs}
		case *graph.TupleGetItem:
			env[e] = env[x.Tuple].Tuple[x.Index]
		case *graph.Call:
			if x.Op == nil {
				err = fmt.Errorf("function call")
				return
			}
			args := make([]*tensor.Tensor, len(x.Args))
			n := int64(0)
			for i, a := range x.Args {
				if args[i] = env[a].Tensor; args[i] == nil {
					err = fmt.Errorf("tuple argument")
					return
				}
				n += args[i].Shape.NumElements()
			}
			res, out, e2 := ref.EvalOp(x.Op, x.Attrs, args)
			if e2 != nil {
				err = e2
				return
			}
			if _, ok := out.(*ir.TupleType); ok {
				fs := make([]ref.Value, len(res))
				for i, r := range res {
					fs[i] = ref.TensorValue(r)
				}
				env[e] = ref.Value{Tuple: fs}
			} else {
				env[e] = ref.TensorValue(res[0])
			}
			empty := false
			for _, t := range append(append([]*tensor.Tensor(nil), args...), res...) {
				empty = empty || t.Shape.NumElements() == 0
			}
			if ops[x.Op] && n <= nnONNXMaxElems && !empty {
				cases = append(cases, topitest.Case{Op: x.Op, Attrs: x.Attrs, Args: args})
			}
		default:
			err = fmt.Errorf("unsupported expression %T", e)
		}
	})
	return cases, err
}
