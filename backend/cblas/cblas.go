// Package cblas is an external backend that hands matrix products to a
// BLAS library: the nn.dense and nn.matmul calls partitioning gives to
// target kind "cblas" become calls of cblas_sgemm (OpenBLAS; Debian's
// libopenblas-dev) inside host TIR. Its RelayToTIR hook lowers each owned
// function to a PrimFunc whose body is one call_extern of cblas_sgemm per
// matrix product (a loop of them for broadcast batches), followed by TIR
// loops for an elementwise tail fused into the same function (bias add,
// relu). Because the result is an ordinary PrimFunc of the host library,
// kiln's graph executor plans its buffers like any other kernel's, and
// the function goes through the TIR passes and the default C code
// generation, which Flow.CCodegen extends with <cblas.h> and -lopenblas.
//
// It sits in the pipeline's external branch:
//
//	partition (Supported) → build: RelayToTIR (this package) → TIR passes → codegen/c → kiln_lib.so
//
// What it takes (Supported, for the partitioner): nn.dense and nn.matmul
// (with transposes, 1-D operands and broadcast batch dimensions) of
// float32 tensors with non-empty static shapes whose sizes fit BLAS's
// 32-bit integers, and calls of composite functions named "cblas.*" whose
// bodies it can lower. Other data types are rejected because
// cblas_sgemm is the single-precision routine (double, half and integer
// products would need other routines or conversions). Inside an owned
// function the hook also lowers add, subtract, multiply (NumPy
// broadcasting), nn.bias_add and nn.relu of float32 tensors, tuples of
// results and constants (passed to the PrimFunc as parameters, so they
// become graph parameters); anything else is an error naming the
// operator.
package cblas

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
)

// Name is the target kind's name; functions with Compiler="cblas" are
// this backend's.
const Name = "cblas"

// Kind is the "cblas" target kind. Register it into a registry (it is not
// registered into targets.Default by this package).
var Kind = &targets.Kind{
	Name:       Name,
	DeviceType: targets.CPU,
	Keys:       []string{"cblas", "cpu"},
	Doc:        "dense and matmul as cblas_sgemm calls (OpenBLAS) in host TIR",
	Flow: &backend.Flow{
		Hooks:    backend.Hooks{RelayToTIR: relayToTIR},
		Supports: Supported,
		CCodegen: &backend.CCodegen{
			Includes:          []string{"<cblas.h>"},
			DeclaredExterns:   []string{"cblas_sgemm"},
			ReplaceCallExtern: replaceCallExtern,
			LDFlags:           []string{"-lopenblas"},
		},
	},
}

// Register adds Kind to r.
func Register(r *targets.Registry) error { return r.Register(Kind) }

// Importing the package registers Kind in targets.Default.
func init() {
	if err := Register(targets.Default); err != nil {
		panic(err) // another kind named cblas: a programming error
	}
}

// CBLAS enumeration values (cblas.h), passed to cblas_sgemm as integers
// in TIR and printed by name in the C.
const (
	rowMajor = 101
	noTrans  = 111
	trans    = 112
)

var enumNames = map[int64]string{rowMajor: "CblasRowMajor", noTrans: "CblasNoTrans", trans: "CblasTrans"}

// replaceCallExtern prints the order and transpose arguments of
// cblas_sgemm as the header's enumerators, so that the C reads like
// hand-written BLAS code (and passes enum-typed arguments).
func replaceCallExtern(name string, args []string) (string, bool) {
	if name != "cblas_sgemm" || len(args) != 14 {
		return "", false
	}
	out := append([]string(nil), args...)
	for i := 0; i < 3; i++ {
		v, err := strconv.ParseInt(strings.Trim(args[i], "() "), 10, 64)
		if err != nil || enumNames[v] == "" {
			return "", false
		}
		out[i] = enumNames[v]
	}
	return "cblas_sgemm(" + strings.Join(out, ", ") + ")", true
}

// Supported reports whether cblas takes an operator call (nil) or why
// not. It takes nn.dense and nn.matmul of float32 tensors with static,
// non-empty shapes whose dimensions fit a 32-bit BLAS integer, and calls
// of "cblas.*" composite functions whose bodies the hook can lower.
func Supported(c *graph.Call) error {
	if c == nil {
		return fmt.Errorf("no call")
	}
	if fn, ok := c.Fn.(*graph.Function); ok {
		comp := fn.StrAttr(graph.AttrComposite)
		if !strings.HasPrefix(comp, Name+".") {
			return fmt.Errorf("call of a function that is not a %s.* composite", Name)
		}
		return checkFunction(fn)
	}
	if c.Op != op.Dense && c.Op != op.MatMul {
		return fmt.Errorf("%s is not supported (cblas takes nn.dense and nn.matmul)", opName(c))
	}
	return checkCall(c)
}

func opName(c *graph.Call) string {
	if c.Op != nil {
		return c.Op.Name
	}
	return "function call"
}

// checkCall checks the operand and result types of a call the hook can
// lower (a matrix product or an elementwise tail operator).
func checkCall(c *graph.Call) error {
	switch c.Op {
	case op.Dense, op.MatMul, op.Add, op.Subtract, op.Multiply, op.BiasAdd, op.Relu:
	default:
		return fmt.Errorf("%s is not supported inside a cblas function (dense, matmul, add, subtract, multiply, nn.bias_add, nn.relu)", opName(c))
	}
	for i, a := range c.Args {
		if err := checkTensor(a.Type()); err != nil {
			return fmt.Errorf("%s: argument %d: %w", c.Op.Name, i, err)
		}
	}
	if err := checkTensor(c.Type()); err != nil {
		return fmt.Errorf("%s: result: %w", c.Op.Name, err)
	}
	if c.Op == op.MatMul || c.Op == op.Dense {
		if _, err := gemmOf(c); err != nil {
			return fmt.Errorf("%s: %w", c.Op.Name, err)
		}
	}
	return nil
}

// checkTensor accepts a float32 tensor type with a non-empty shape whose
// dimensions and size fit a 32-bit integer.
func checkTensor(t ir.Type) error {
	tt, ok := t.(*ir.TensorType)
	if !ok {
		return fmt.Errorf("%v is not a tensor", t)
	}
	if tt.DType != ir.Float32 {
		return fmt.Errorf("%s is not supported: cblas_sgemm is single precision (float32) only", tt.DType)
	}
	for _, d := range tt.Shape {
		if d <= 0 {
			return fmt.Errorf("shape %v: empty or dynamic tensors are not supported", tt.Shape)
		}
	}
	if tt.Shape.NumElements() > math.MaxInt32 {
		return fmt.Errorf("shape %v has more than 2^31-1 elements (BLAS uses 32-bit sizes)", tt.Shape)
	}
	return nil
}

// checkFunction checks that the hook can lower fn's body.
func checkFunction(fn *graph.Function) error {
	var err error
	graph.PostOrder(fn.Body, func(e graph.Expr) {
		if err != nil {
			return
		}
		switch x := e.(type) {
		case *graph.Var, *graph.Constant:
			err = checkTensor(e.Type())
		case *graph.Tuple:
			if e != fn.Body {
				err = fmt.Errorf("tuples are supported only as the function's result")
			}
		case *graph.Call:
			if inner, ok := x.Fn.(*graph.Function); ok {
				err = checkFunction(inner)
				return
			}
			if x.Op == nil {
				err = fmt.Errorf("call of %s is not supported", graph.Describe(x))
				return
			}
			err = checkCall(x)
		default:
			err = fmt.Errorf("%s is not supported inside a cblas function", graph.Describe(e))
		}
	})
	return err
}
