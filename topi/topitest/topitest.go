// Package topitest checks operator implementations differentially: it
// lowers an implementation's compute and schedule to TIR, runs the TIR
// pipeline with verification, interprets the result on given inputs and
// compares it with the reference executor's kernel on the same inputs.
package topitest

import (
	"fmt"
	"math/rand"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/interp"
	"github.com/kiln-dev/kiln/tir/transform"
)

// Tolerance bounds float differences: |got-want| <= Atol + Rtol*|want|.
// Integer and bool outputs are always compared exactly.
type Tolerance struct{ Rtol, Atol float64 }

// DefaultTolerance allows for float32 computation in TIR against the
// reference executor's float64 computation rounded once at the end.
var DefaultTolerance = Tolerance{Rtol: 1e-4, Atol: 1e-5}

// HostTarget is the default target implementations are selected for.
func HostTarget() *targets.Target {
	t, err := targets.New(targets.C, nil)
	if err != nil {
		panic(err)
	}
	return t
}

// Case is one operator call to check.
type Case struct {
	Op    *op.Op
	Attrs ir.Attrs
	Args  []*tensor.Tensor
	// Tol overrides DefaultTolerance when non-zero.
	Tol Tolerance
	// Target overrides HostTarget when non-nil.
	Target *targets.Target
	// Registry overrides strategy.Default when non-nil.
	Registry *strategy.Registry
}

// Check runs every implementation that applies to the case (not only the
// selected one), with its defaults and with every knob setting of its
// tuning space, and returns an error describing the first mismatch.
func Check(c Case) error {
	attrs, err := c.Op.MakeAttrs(c.Attrs)
	if err != nil {
		return err
	}
	want, outType, err := ref.EvalOp(c.Op, attrs, c.Args)
	if err != nil {
		return fmt.Errorf("reference: %v", err)
	}
	tgt := c.Target
	if tgt == nil {
		tgt = HostTarget()
	}
	reg := c.Registry
	if reg == nil {
		reg = strategy.Default
	}
	argTypes := make([]ir.Type, len(c.Args))
	for i, a := range c.Args {
		argTypes[i] = a.Type()
	}
	call := &strategy.Call{Op: c.Op, Attrs: attrs, ArgTypes: argTypes, OutType: outType, Target: tgt}
	impls := reg.Candidates(call)
	n := 0
	for _, impl := range impls {
		if impl.Valid != nil && !impl.Valid(call) {
			continue
		}
		n++
		tol := c.Tol
		if tol == (Tolerance{}) {
			tol = DefaultTolerance
		}
		// The defaults, then every knob setting a tuner may choose.
		knobs := []strategy.Knobs{nil}
		if impl.Space != nil {
			knobs = append(knobs, impl.Space(call)...)
		}
		for _, k := range knobs {
			kc := *call
			kc.Knobs = k
			got, err := Run(&kc, impl, c.Args)
			if err != nil {
				return fmt.Errorf("%s (knobs %q): %v", impl.Name, k.String(), err)
			}
			for i := range want {
				if err := tensor.AllClose(got[i], want[i], tol.Rtol, tol.Atol); err != nil {
					return fmt.Errorf("%s (knobs %q): output %d: %v", impl.Name, k.String(), i, err)
				}
			}
		}
	}
	if n == 0 {
		return fmt.Errorf("no implementation of %s applies to %s", c.Op.Name, tgt)
	}
	return nil
}

// Lower builds the PrimFunc of one implementation for a call: placeholders
// for the arguments, the compute, a schedule, te.Lower and the TIR pipeline
// with verification after every pass.
func Lower(call *strategy.Call, impl strategy.Implementation) (*tir.PrimFunc, error) {
	phs := make([]*te.Tensor, len(call.ArgTypes))
	for i, a := range call.ArgTypes {
		tt := a.(*ir.TensorType)
		phs[i] = te.Placeholder(fmt.Sprintf("arg%d", i), tt.DType, tt.Shape)
	}
	outs, err := impl.Compute(call, phs)
	if err != nil {
		return nil, fmt.Errorf("compute: %v", err)
	}
	s := te.CreateSchedule(outs...)
	if impl.Schedule != nil {
		if err := impl.Schedule(call, s, outs, outs); err != nil {
			return nil, fmt.Errorf("schedule: %v", err)
		}
	}
	f, err := te.Lower("check_"+sanitize(call.Op.Name), append(phs, outs...), s, te.LowerOptions{})
	if err != nil {
		return nil, fmt.Errorf("lower: %v", err)
	}
	p := transform.NewPipeline()
	p.VerifyEach = true
	return p.RunFunc(f)
}

// Run lowers the implementation and interprets it on args, returning the outputs.
func Run(call *strategy.Call, impl strategy.Implementation, args []*tensor.Tensor) ([]*tensor.Tensor, error) {
	f, err := Lower(call, impl)
	if err != nil {
		return nil, err
	}
	var outTypes []*ir.TensorType
	switch t := call.OutType.(type) {
	case *ir.TensorType:
		outTypes = []*ir.TensorType{t}
	case *ir.TupleType:
		for _, ft := range t.Fields {
			outTypes = append(outTypes, ft.(*ir.TensorType))
		}
	}
	iargs := make([]any, 0, len(args)+len(outTypes))
	for _, a := range args {
		iargs = append(iargs, &interp.Array{DType: a.DType, Data: append([]byte(nil), a.Data...)})
	}
	outs := make([]*tensor.Tensor, len(outTypes))
	for i, ot := range outTypes {
		outs[i] = tensor.New(ot.DType, ot.Shape)
		iargs = append(iargs, &interp.Array{DType: ot.DType, Data: outs[i].Data})
	}
	if err := interp.Run(f, iargs, nil); err != nil {
		return nil, fmt.Errorf("interpret: %v", err)
	}
	return outs, nil
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

// Rand makes a tensor of random values suited to dt: floats uniform in
// [-2, 2), signed ints in [-5, 5], unsigned in [0, 9], bools fair.
func Rand(rng *rand.Rand, dt ir.DType, shape ir.Shape) *tensor.Tensor {
	t := tensor.New(dt, shape)
	for i := 0; i < t.Len(); i++ {
		switch {
		case dt.IsFloat():
			t.SetFloat(i, rng.Float64()*4-2)
		case dt.IsInt():
			t.SetInt(i, int64(rng.Intn(11)-5))
		case dt.IsUint():
			t.SetInt(i, int64(rng.Intn(10)))
		default:
			t.SetInt(i, int64(rng.Intn(2)))
		}
	}
	return t
}
