// Package gokernels is a whole JSON-style BYOC backend written only
// against kiln's helpers (package backend/byoc and runtime/jsonrt): it
// takes float32 relu, sigmoid, tanh and same-shape add calls, serialises
// each partitioned function as a JSON graph and runs it with kernels
// written in Go. A vendor's JSON backend (a library with its own
// runtime) has this shape: a kind, what it takes, how a call becomes a
// node, and the kernels.
package gokernels

import (
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/backend/byoc"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/runtime/jsonrt"
	"github.com/kiln-dev/kiln/targets"
)

// ModuleKind is the runtime module kind of the backend's JSON modules.
const ModuleKind = "gokernels_json"

// funcs are the kernels: elementwise functions of one or two float32s.
var funcs = map[string]func(a, b float32) float32{
	op.Relu.Name:    func(a, _ float32) float32 { return max(a, 0) },
	op.Sigmoid.Name: func(a, _ float32) float32 { return float32(1 / (1 + math.Exp(-float64(a)))) },
	op.Tanh.Name:    func(a, _ float32) float32 { return float32(math.Tanh(float64(a))) },
	op.Add.Name:     func(a, b float32) float32 { return a + b },
}

// Kind is the "gokernels" target kind.
var Kind = &targets.Kind{
	Name:       "gokernels",
	DeviceType: targets.CPU,
	Keys:       []string{"gokernels", "cpu"},
	Doc:        "BYOC example: relu, sigmoid, tanh and add as a JSON graph run by kernels written in Go",
	Flow: &backend.Flow{
		Supports: Supported,
		Hooks:    byoc.JSONHooks(ModuleKind, "gokernels", node, newKernels),
	},
}

// Register adds Kind to r and the loader of its modules to the runtime.
func Register(r *targets.Registry) error {
	if err := runtime.RegisterLoader(jsonrt.NewLoader(ModuleKind, newKernels)); err != nil {
		return err
	}
	return r.Register(Kind)
}

// Supported takes float32 calls of the kernels' operators whose operands
// all have the result's shape.
func Supported(c *graph.Call) error {
	if c.Op == nil || funcs[c.Op.Name] == nil {
		return fmt.Errorf("%s is not relu, sigmoid, tanh or add", graph.Describe(c))
	}
	out, ok := c.Type().(*ir.TensorType)
	if !ok || out.DType != ir.Float32 {
		return fmt.Errorf("%s: float32 tensors only", c.Op.Name)
	}
	for _, a := range c.Args {
		if !a.Type().(*ir.TensorType).Shape.Equal(out.Shape) {
			return fmt.Errorf("%s: broadcasting is not supported", c.Op.Name)
		}
	}
	return nil
}

// node describes a call as a kernel node: the operator's name and its
// arguments (byoc.JSONOp).
func node(c *graph.Call) (string, ir.Attrs, []graph.Expr, error) {
	if err := Supported(c); err != nil {
		return "", nil, nil, err
	}
	return c.Op.Name, nil, c.Args, nil
}

// kernels is the kernel set of one module (jsonrt.KernelSet).
type kernels struct{}

func newKernels() (jsonrt.KernelSet, error) { return kernels{}, nil }

// Check validates a node of a loaded graph (which may come from a
// stranger's artifact): a known kernel, float32, one or two inputs of the
// output's shape.
func (kernels) Check(g *jsonrt.Graph, id int) error {
	n := &g.Nodes[id]
	want := 1
	if n.Name == op.Add.Name {
		want = 2
	}
	if funcs[n.Name] == nil || len(n.Inputs) != want || len(n.Shape) != 1 {
		return fmt.Errorf("gokernels: %q with %d inputs and %d outputs is not a kernel", n.Name, len(n.Inputs), len(n.Shape))
	}
	odt, oshape := g.Type(jsonrt.Entry{Node: id})
	for _, in := range n.Inputs {
		if dt, s := g.Type(in); dt != ir.Float32 || odt != ir.Float32 || !s.Equal(oshape) {
			return fmt.Errorf("gokernels: %s: float32 operands of the output's shape only", n.Name)
		}
	}
	return nil
}

// Prepare returns the node's kernel.
func (kernels) Prepare(ctx *jsonrt.PrepareContext) (jsonrt.Kernel, error) {
	return kernel(funcs[ctx.Node.Name]), nil
}

// kernel applies f elementwise: args are the inputs, then the output.
type kernel func(a, b float32) float32

// Run computes the output.
func (f kernel) Run(args []*runtime.NDArray) error {
	x, err := args[0].ToTensor()
	if err != nil {
		return err
	}
	y := x.Float32s()
	other := y
	if len(args) == 3 {
		t, err := args[1].ToTensor()
		if err != nil {
			return err
		}
		other = t.Float32s()
	}
	for i, v := range y {
		y[i] = f(v, other[i])
	}
	return args[len(args)-1].CopyFrom(x)
}
