// Package ultratrail is the "ultra_trail" UMA example (after TVM's
// UltraTrail): a keyword-spotting accelerator whose systolic array runs
// 1-D convolutions with a fused bias and ReLU. It shows:
//
//   - a composite pattern (conv1d → bias_add → relu) with a predicate;
//   - a target attribute, `dimension` (the array's size, default 8), that
//     reaches the generated code: -t "ultra_trail -dimension=16, c";
//   - an operator strategy and a phase-0 TIR pass that turns the whole
//     composite into one call of the accelerator;
//   - a cycle-counting simulator in C (sim/ultra_trail.c) standing in for
//     the hardware: it computes the results and counts the cycles of a
//     dimension × dimension weight-stationary array, which Stats reads
//     back after a run.
package ultratrail

import (
	_ "embed" // the simulator's C source and header
	"fmt"
	"path/filepath"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pattern"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
	tirtransform "github.com/kiln-dev/kiln/tir/transform"
	"github.com/kiln-dev/kiln/uma"
)

// Name is the target kind's name.
const Name = "ultra_trail"

// Kernel is the accelerator call each composite becomes.
const Kernel = "ultra_trail_conv1d_bias_relu"

// StatsFunc is the simulator's packed function reporting its counters.
const StatsFunc = "ultra_trail_sim_stats"

// stage names the convolution compute the TIR pass looks for.
const stage = "ultra_trail_conv1d"

//go:embed sim/ultra_trail.c
var simSource []byte

//go:embed sim/ultra_trail.h
var simHeader []byte

// New builds the backend (not yet registered).
func New() (*uma.Backend, error) {
	b := uma.New(Name, "UMA example: conv1d+bias+relu on a simulated systolic array (cycle counts)")
	// One accelerator call per composite: each becomes a function of its
	// own, which the TIR pass turns into one call.
	b.MergeCompilerRegions = false
	conv := pattern.IsOp(op.Conv1D, pattern.Wildcard(), pattern.Wildcard())
	composite := pattern.IsOp(op.Relu, pattern.IsOp(op.BiasAdd, conv, pattern.Wildcard()))
	for _, err := range []error{
		b.RegisterTargetAttr("dimension", 8),
		b.RegisterPattern("conv1d_bias_relu", composite, func(m *pattern.Result) error { return Eligible(m.Get(conv).(*graph.Call)) }),
		b.RegisterOperatorStrategy(op.Conv1D, strategy.Implementation{Name: "ultra_trail.conv1d", Compute: computeConv1D, Schedule: func(*strategy.Call, *te.Schedule, []*te.Tensor, []*te.Tensor) error { return nil }}),
		b.RegisterTIRPass(tirtransform.Phase0, "OffloadConv1DBiasRelu", offload),
		b.RegisterCodegen("c", uma.CodegenOptions{
			Includes:        []string{`"ultra_trail.h"`},
			DeclaredExterns: []string{Kernel},
			Sources:         []uma.SourceFile{{Name: "ultra_trail.c", Data: simSource}, {Name: "ultra_trail.h", Data: simHeader}},
			Funcs:           []string{StatsFunc},
		}),
	} {
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

// Eligible reports whether the array takes a conv1d (nil) or why not:
// float32, stride 1, dilation 1, one group, symmetric padding, static
// non-empty shapes.
func Eligible(c *graph.Call) error {
	x, ok1 := c.Args[0].Type().(*ir.TensorType)
	w, ok2 := c.Args[1].Type().(*ir.TensorType)
	if !ok1 || !ok2 || x.DType != ir.Float32 || w.DType != ir.Float32 {
		return fmt.Errorf("only float32 tensors")
	}
	if g := c.Attrs.Int("groups"); g != 1 {
		return fmt.Errorf("groups=%d (the array computes one group)", g)
	}
	strides, pb, pe, dil, err := op.SpatialAttrs(c.Attrs, 1)
	if err != nil {
		return err
	}
	if strides[0] != 1 || dil[0] != 1 {
		return fmt.Errorf("strides %v, dilation %v (the array supports 1 and 1)", strides, dil)
	}
	if pb[0] != pe[0] {
		return fmt.Errorf("asymmetric padding %v/%v", pb, pe)
	}
	for _, d := range append(append(ir.Shape{}, x.Shape...), w.Shape...) {
		if d <= 0 {
			return fmt.Errorf("empty or dynamic shape %v, %v", x.Shape, w.Shape)
		}
	}
	return nil
}

// computeConv1D is the array's conv1d compute: a plain reduction named
// "ultra_trail_conv1d".
func computeConv1D(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	x, w := in[0], in[1]
	_, pad, _, _, err := op.SpatialAttrs(c.Attrs, 1)
	if err != nil {
		return nil, err
	}
	l := x.Shape[2]
	rc := te.ReduceAxis(x.Shape[1], "rc")
	rk := te.ReduceAxis(w.Shape[2], "rk")
	out := te.ComputeReduce(stage, c.OutTensor().Shape, te.Sum, []*te.IterVar{rc, rk}, func(i []tir.PrimExpr) tir.PrimExpr {
		pos := tir.Sub(tir.Add(i[2], rk.Var), tir.Idx(pad[0]))
		inside := tir.And(tir.GE(pos, tir.Idx(0)), tir.LT(pos, tir.Idx(l)))
		return te.IfThenElse(inside, tir.Mul(x.At(i[0], rc.Var, pos), w.At(i[1], rc.Var, rk.Var)), tir.FloatConst(ir.Float32, 0))
	})
	return []*te.Tensor{out}, nil
}

// offload is the phase-0 TIR pass: a PrimFunc computing the
// "ultra_trail_conv1d" stage followed by its bias/ReLU epilogue becomes
// one call of the accelerator, with the target's dimension.
func offload(t *targets.Target, f *tir.PrimFunc) (*tir.PrimFunc, error) {
	var conv, out *tir.Buffer
	written := map[*tir.Buffer]bool{}
	var loads []*tir.Buffer
	tir.Visit(f.Body, func(n tir.Node) bool {
		switch x := n.(type) {
		case *tir.BufferStore:
			written[x.Buffer] = true
			out = x.Buffer // the last stage writes the result
			if x.Buffer.Name == stage {
				conv = x.Buffer
			}
		case *tir.BufferLoad:
			loads = append(loads, x.Buffer)
		}
		return true
	})
	if conv == nil {
		return f, nil
	}
	var reads []*tir.Buffer
	seen := map[*tir.Buffer]bool{}
	for _, b := range loads {
		if !written[b] && !seen[b] {
			seen[b] = true
			reads = append(reads, b)
		}
	}
	// Reads in order of first use: the input and the weights (the
	// convolution), then the bias (the epilogue).
	if out == nil || len(reads) != 3 || len(reads[0].Shape) != 3 || len(reads[1].Shape) != 3 || len(reads[2].Shape) != 1 {
		return nil, fmt.Errorf("%s: not a conv1d → bias_add → relu function:\n%s", f.Name, f)
	}
	x, w, b := reads[0], reads[1], reads[2]
	n, c, l := x.Shape[0], x.Shape[1], x.Shape[2]
	oc, kw, ol := w.Shape[0], w.Shape[2], conv.Shape[2]
	pad := (ol - l + kw - 1) / 2
	dim, _ := t.Int("dimension")
	if dim < 1 {
		return nil, fmt.Errorf("target %s: dimension %d must be positive", t, dim)
	}
	args := []tir.PrimExpr{out.Data, x.Data, w.Data, b.Data}
	for _, v := range []int64{n, c, l, oc, kw, pad, dim} {
		args = append(args, tir.Int32(v))
	}
	return f.WithBody(tir.Eval(tir.CallExternOf(tir.Void, Kernel, args...))), nil
}

// Stats are the simulator's counters since the last read.
type Stats struct {
	// Calls is the number of accelerator calls.
	Calls int64
	// MACs is the number of multiply-accumulates they did.
	MACs int64
	// Cycles is the simulated cycle count.
	Cycles int64
	// Dimension is the array size of the last call.
	Dimension int64
}

// Utilization is MACs over the array's peak (Dimension² per cycle).
func (s Stats) Utilization() float64 {
	if s.Cycles == 0 || s.Dimension == 0 {
		return 0
	}
	return float64(s.MACs) / float64(s.Cycles*s.Dimension*s.Dimension)
}

// String summarises the counters.
func (s Stats) String() string {
	return fmt.Sprintf("%d calls, %d MACs in %d cycles on a %dx%d array (%.1f%% of peak; a scalar CPU at one MAC per cycle needs %.1fx the cycles)",
		s.Calls, s.MACs, s.Cycles, s.Dimension, s.Dimension, 100*s.Utilization(), float64(s.MACs)/float64(max(s.Cycles, 1)))
}

// ReadStats reads (and resets) the simulator's counters in the library
// of the artifact in dir, as loaded by the process (the dynamic loader
// shares one copy of the library, and so of the counters, between
// driver.LoadArtifact and this call).
func ReadStats(dir string) (Stats, error) {
	lib, err := runtime.LoadLibrary(filepath.Join(dir, "kiln_lib.so"))
	if err != nil {
		return Stats{}, err
	}
	f, ok := lib.GetFunction(StatsFunc)
	if !ok {
		return Stats{}, fmt.Errorf("the library has no %s: was the model compiled with %s?", StatsFunc, Name)
	}
	a, err := runtime.Empty(ir.Int64, ir.Shape{4}, runtime.CPUDevice(0))
	if err != nil {
		return Stats{}, err
	}
	defer a.Free()
	if err := f([]*runtime.NDArray{a}); err != nil {
		return Stats{}, err
	}
	v := tensor.New(ir.Int64, ir.Shape{4})
	if err := a.CopyTo(v); err != nil {
		return Stats{}, err
	}
	s := v.Int64s()
	return Stats{Calls: s[0], MACs: s[1], Cycles: s[2], Dimension: s[3]}, nil
}
