// Package mcunn is kiln's microcontroller backend for quantized models:
// target kind "mcunn", whose RelayToTIR hook maps int8 operators onto
// kiln_nn, a small int8 kernel library that kiln ships as C source (its
// own code, in the style of CMSIS-NN's API: argument structs and scratch
// buffers sized at compile time). It is seed 000's worked example of a
// target hook (TVM's "cmsisnn" kind) in kiln's shape.
//
// It sits in the pipeline's external branch, like package cblas:
//
//	partition (Patterns, Supported) → build: RelayToTIR (this package) →
//	TIR passes → lift-workspaces (AOT) → codegen/c (+ kiln_nn.c)
//
// Partitioning gives the kind, each as a function of its own
// (KeepRegionsApart): qnn.conv2d_requantize (group 1, grouped and
// depthwise), the integer matrix product qnn.dense with an optional int32
// bias and requantization (composites "mcunn.dense*"), int8 max pooling,
// the integer global average (sum then requantize, "mcunn.global_avg_pool"),
// the integer add of two quantized tensors ("mcunn.add") and the integer
// softmax qnn.softmax along the last axis, all of
// int8 (signed) tensors in NCHW; everything else stays on the host, and
// the partition report says why. The hook lowers each function to a
// PrimFunc whose body is one call_extern of a kiln_nn kernel; a kernel's
// scratch buffer is a tir.Allocate of the size kiln_nn's _get_buffer_size
// gives, which the AOT executor's static memory planner places in its
// workspace (LiftWorkspaces). The C code generation prints each call with
// its argument structs as compound literals (CCodegen.ReplaceCallExtern)
// and compiles kiln_nn.c into the library or the AOT project, where the
// same sources build for a Cortex-M with arm-none-eabi-gcc.
//
// The kernels compute kiln's quantized operators bit for bit (int32 sums
// that wrap, op.RequantizeValue's rounding), so a model partitioned for
// mcunn gives the host engine's outputs exactly.
package mcunn

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pattern"
	"github.com/kiln-dev/kiln/targets"
)

// Name is the target kind's name; functions with Compiler="mcunn" are
// this backend's.
const Name = "mcunn"

// Kind is the "mcunn" target kind. Importing the package registers it
// in targets.Default.
var Kind = &targets.Kind{
	Name:       Name,
	DeviceType: targets.CPU,
	Keys:       []string{Name, "cpu"},
	Doc:        "int8 conv, depthwise, dense, pooling, add and softmax as calls of kiln_nn, kiln's C int8 kernel library for microcontrollers",
	Flow: &backend.Flow{
		Hooks:        backend.Hooks{RelayToTIR: relayToTIR},
		Supports:     Supported,
		Patterns:     Patterns,
		Partitioning: &backend.Partitioning{KeepRegionsApart: true},
		// Its kernels are for a microcontroller: timing them here says
		// nothing about it.
		Unmeasured: true,
		CCodegen: &backend.CCodegen{
			Includes:          []string{`"kiln_nn.h"`},
			ReplaceCallExtern: replaceCallExtern,
			Sources:           Sources(),
		},
	},
}

// Register adds Kind to r.
func Register(r *targets.Registry) error { return r.Register(Kind) }

func init() {
	if err := Register(targets.Default); err != nil {
		panic(err) // another kind named mcunn: a programming error
	}
}

// Patterns is the kind's pattern table: the integer matrix product with
// its bias and requantization, the integer add of two quantized tensors
// and the integer global average, as the ONNX importer writes them. Each
// entry's check asks Supported about the composite the match would
// become, so a match kiln_nn cannot run (uint8, shapes) stays operators.
var Patterns = compositePatterns()

func compositePatterns() []pattern.Entry {
	w := pattern.Wildcard
	dense := func() pattern.Pattern { return pattern.IsOp(op.QDense, w(), w()) }
	// centered is cast(x, int32) minus an optional constant zero point.
	centered := func() pattern.Pattern {
		return pattern.Alt(pattern.IsOp(op.Subtract, pattern.IsOp(op.Cast, w()), pattern.IsConstant()), pattern.IsOp(op.Cast, w()))
	}
	scaled := func() pattern.Pattern { return pattern.IsOp(op.Multiply, centered(), pattern.IsConstant()) }
	table := []struct {
		name string
		p    pattern.Pattern
	}{
		{"dense_bias_requantize", pattern.IsOp(op.Requantize, pattern.IsOp(op.Add, dense(), w()), w())},
		{"dense_requantize", pattern.IsOp(op.Requantize, dense(), w())},
		{"dense_bias", pattern.IsOp(op.Add, dense(), w())},
		{"add", pattern.IsOp(op.Requantize, pattern.IsOp(op.Add, scaled(), scaled()), w())},
		{"global_avg_pool", pattern.IsOp(op.Requantize, pattern.IsOp(op.Sum, centered()), w())},
	}
	out := make([]pattern.Entry, len(table))
	for i, e := range table {
		name := Name + "." + e.name
		out[i] = pattern.Entry{Name: name, Pattern: e.p, Check: func(r *pattern.Result) error {
			c, err := r.Outline(ir.Attrs{graph.AttrComposite: name})
			if err != nil {
				return err
			}
			return Supported(c)
		}}
	}
	return out
}

// Supported reports whether mcunn takes a call (nil) or why not: a call
// of one of its composites, or of qnn.conv2d_requantize, nn.max_pool2d,
// qnn.dense or qnn.softmax, that a kiln_nn kernel computes (see the
// package doc).
func Supported(c *graph.Call) error {
	if c == nil {
		return errors.New("no call")
	}
	if fn, ok := c.Fn.(*graph.Function); ok {
		if comp := fn.StrAttr(graph.AttrComposite); !strings.HasPrefix(comp, Name+".") {
			return fmt.Errorf("call of a function that is not a %s.* composite", Name)
		}
		_, err := recognize(fn.Body)
		return err
	}
	if c.Op == nil {
		return errors.New("call of a function value")
	}
	switch c.Op {
	case op.QConv2DRequantize, op.MaxPool2D, op.QDense, op.QSoftmax:
	default:
		return fmt.Errorf("%s is not supported (mcunn takes qnn.conv2d_requantize, nn.max_pool2d, qnn.dense, qnn.softmax and its composites)", c.Op.Name)
	}
	_, err := recognize(c)
	return err
}
