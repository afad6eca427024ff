// Package vanilla is the "vanilla_accelerator" UMA example (after TVM's):
// an accelerator whose one kernel computes a whole 2-D convolution (NCHW,
// stride 1, one group). It shows the three steps of a UMA integration:
//
//   - a pattern with a predicate says which conv2d calls the accelerator
//     takes (the partition report shows the predicate's reasons for the
//     others);
//   - an operator strategy gives conv2d a plain compute named
//     "vanilla_conv2d", and a TIR phase-0 pass replaces its loop nest by a
//     call_extern of vanilla_conv2d_nchw;
//   - the C codegen registration includes the kernel's header and ships
//     its source (vanilla_accelerator.c), compiled into the artifact.
//
// Use it with `kiln compile MODEL -t "vanilla_accelerator, c"`.
package vanilla

import (
	_ "embed" // the kernel's C source and header
	"fmt"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pattern"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
	tirtransform "github.com/kiln-dev/kiln/tir/transform"
	"github.com/kiln-dev/kiln/uma"
)

// Name is the target kind's name.
const Name = "vanilla_accelerator"

// Kernel is the C function the accelerator's convolutions call.
const Kernel = "vanilla_conv2d_nchw"

// stage names the compute the TIR pass looks for.
const stage = "vanilla_conv2d"

//go:embed kernel/vanilla_accelerator.c
var kernelSource []byte

//go:embed kernel/vanilla_accelerator.h
var kernelHeader []byte

// New builds the backend (not yet registered).
func New() (*uma.Backend, error) {
	b := uma.New(Name, "UMA example: conv2d (NCHW, stride 1, groups 1) as one accelerator kernel call")
	conv := pattern.IsOp(op.Conv2D, pattern.Wildcard(), pattern.Wildcard())
	steps := []error{
		b.RegisterPattern("conv2d", conv, func(m *pattern.Result) error { return Eligible(m.Root.(*graph.Call)) }),
		b.RegisterOperatorStrategy(op.Conv2D, strategy.Implementation{Name: "vanilla.conv2d", Compute: computeConv2D, Schedule: func(*strategy.Call, *te.Schedule, []*te.Tensor, []*te.Tensor) error { return nil }}),
		b.RegisterTIRPass(tirtransform.Phase0, "ReplaceConv2D", replaceConv2D),
		b.RegisterCodegen("c", uma.CodegenOptions{
			Includes:        []string{`"vanilla_accelerator.h"`},
			DeclaredExterns: []string{Kernel},
			Sources: []uma.SourceFile{
				{Name: "vanilla_accelerator.c", Data: kernelSource},
				{Name: "vanilla_accelerator.h", Data: kernelHeader},
			},
		}),
	}
	for _, err := range steps {
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Register builds the backend and registers its target kind in r.
func Register(r *targets.Registry) error {
	b, err := New()
	if err != nil {
		return err
	}
	return b.Register(r)
}

// Eligible reports whether the accelerator takes a conv2d call (nil) or
// why not (kiln's nn.conv2d is NCHW with OIHW weights): float32, stride 1, dilation 1, one
// group, symmetric padding, static shapes.
func Eligible(c *graph.Call) error {
	x, ok1 := c.Args[0].Type().(*ir.TensorType)
	w, ok2 := c.Args[1].Type().(*ir.TensorType)
	if !ok1 || !ok2 || x.DType != ir.Float32 || w.DType != ir.Float32 {
		return fmt.Errorf("only float32 tensors")
	}
	if g := c.Attrs.Int("groups"); g != 1 {
		return fmt.Errorf("groups=%d (the accelerator computes one group)", g)
	}
	strides, pb, pe, dil, err := op.SpatialAttrs(c.Attrs, 2)
	if err != nil {
		return err
	}
	if strides[0] != 1 || strides[1] != 1 {
		return fmt.Errorf("strides %v (the accelerator supports stride 1)", strides)
	}
	if dil[0] != 1 || dil[1] != 1 {
		return fmt.Errorf("dilation %v (the accelerator supports dilation 1)", dil)
	}
	if pb[0] != pe[0] || pb[1] != pe[1] {
		return fmt.Errorf("asymmetric padding %v/%v", pb, pe)
	}
	for _, d := range append(append(ir.Shape{}, x.Shape...), w.Shape...) {
		if d <= 0 {
			return fmt.Errorf("empty or dynamic shape %v, %v", x.Shape, w.Shape)
		}
	}
	return nil
}

// computeConv2D is the accelerator's conv2d compute: a plain reduction
// named "vanilla_conv2d" reading the input through a zero-padding guard.
func computeConv2D(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x, w := in[0], in[1]
	ot := c.OutTensor()
	_, pad, _, _, err := op.SpatialAttrs(c.Attrs, 2)
	if err != nil {
		return nil, err
	}
	ih, iw := x.Shape[2], x.Shape[3]
	rc := te.ReduceAxis(x.Shape[1], "rc")
	ry := te.ReduceAxis(w.Shape[2], "ry")
	rx := te.ReduceAxis(w.Shape[3], "rx")
	out := te.ComputeReduce(stage, ot.Shape, te.Sum, []*te.IterVar{rc, ry, rx}, func(i []tir.PrimExpr) tir.PrimExpr {
		y := tir.Sub(tir.Add(i[2], ry.Var), tir.Idx(pad[0]))
		xx := tir.Sub(tir.Add(i[3], rx.Var), tir.Idx(pad[1]))
		inside := tir.And(tir.And(tir.GE(y, tir.Idx(0)), tir.LT(y, tir.Idx(ih))), tir.And(tir.GE(xx, tir.Idx(0)), tir.LT(xx, tir.Idx(iw))))
		prod := tir.Mul(x.At(i[0], rc.Var, y, xx), w.At(i[1], rc.Var, ry.Var, rx.Var))
		return te.IfThenElse(inside, prod, tir.FloatConst(ir.Float32, 0))
	})
	return []*te.Tensor{out}, nil
}

// replaceConv2D is the phase-0 TIR pass: the loop nest that computes the
// "vanilla_conv2d" buffer becomes one call of the kernel, with the
// buffers' data and the shapes read from the buffers.
func replaceConv2D(_ *targets.Target, f *tir.PrimFunc) (*tir.PrimFunc, error) {
	var failure error
	m := &tir.Mutator{PreStmt: func(s tir.Stmt) tir.Stmt {
		loop, ok := s.(*tir.For)
		if !ok || failure != nil {
			return nil
		}
		out, loads := convNest(loop)
		if out == nil {
			return nil
		}
		if len(loads) != 2 {
			failure = fmt.Errorf("%s: the %s loop nest reads %d buffers, want the input and the weights", f.Name, stage, len(loads))
			return nil
		}
		x, w := loads[0], loads[1]
		if len(x.Shape) != 4 || len(w.Shape) != 4 || len(out.Shape) != 4 {
			failure = fmt.Errorf("%s: %s buffers are not 4-D", f.Name, stage)
			return nil
		}
		n, ic, ih, iw := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
		oc, kh, kw, oh, ow := w.Shape[0], w.Shape[2], w.Shape[3], out.Shape[2], out.Shape[3]
		ph, pw := (oh-ih+kh-1)/2, (ow-iw+kw-1)/2
		args := []tir.PrimExpr{out.Data, x.Data, w.Data}
		for _, v := range []int64{n, ic, ih, iw, oc, kh, kw, ph, pw} {
			args = append(args, tir.Int32(v))
		}
		return tir.Eval(tir.CallExternOf(tir.Void, Kernel, args...))
	}}
	body := m.MutateStmt(f.Body)
	if failure != nil {
		return nil, failure
	}
	return f.WithBody(body), nil
}

// convNest reports whether loop computes the "vanilla_conv2d" buffer: it
// returns that buffer and the other buffers its stores read, in order of
// first use (input, then weights), or nil.
func convNest(loop *tir.For) (*tir.Buffer, []*tir.Buffer) {
	var out *tir.Buffer
	var loads []*tir.Buffer
	seen := map[*tir.Buffer]bool{}
	tir.Visit(loop, func(n tir.Node) bool {
		switch x := n.(type) {
		case *tir.BufferStore:
			if x.Buffer.Name == stage {
				out = x.Buffer
			}
		case *tir.BufferLoad:
			if x.Buffer.Name != stage && !seen[x.Buffer] {
				seen[x.Buffer] = true
				loads = append(loads, x.Buffer)
			}
		}
		return true
	})
	if out == nil {
		return nil, nil
	}
	return out, loads
}
