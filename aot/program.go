package aot

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/memplan"
	"github.com/kiln-dev/kiln/tensor"
)

// Tensor is one value of a program: a model input or output, or an
// intermediate (temporary) tensor.
type Tensor struct {
	Name  string
	DType ir.DType
	Shape ir.Shape
}

// Bytes is the tensor's size in bytes.
func (t Tensor) Bytes() int64 { return t.Shape.NumElements() * int64(t.DType.Size()) }

// RefKind says where a call argument lives.
type RefKind int

// The places a call argument can live.
const (
	// RefInput is a model input (the caller's buffer).
	RefInput RefKind = iota
	// RefOutput is a model output (the caller's buffer).
	RefOutput
	// RefConstant is a constant (the constants pool).
	RefConstant
	// RefTemp is an intermediate tensor or a kernel's workspace (the
	// workspace pool).
	RefTemp
)

// Ref is one call argument: a kind and an index into the program's
// Inputs, Outputs, Constants or Temps.
type Ref struct {
	Kind  RefKind
	Index int
}

// Call is one kernel call of the run function.
type Call struct {
	// Func is the packed function's symbol.
	Func string
	// Args are the arguments in the function's parameter order: inputs,
	// outputs, then workspaces.
	Args []Ref
	// UnpackedDecl, when set, is the C prototype of Func's unpacked form
	// (codegen/c FuncInfo.UnpackedDecl), which the run function then calls
	// with raw pointers instead of the packed form.
	UnpackedDecl string
	// Unpacked names that unpacked function.
	Unpacked string
}

// Copy copies one value into a model output after the calls: outputs
// that are inputs, constants, or the same value as an earlier output.
type Copy struct {
	From   Ref
	Output int
}

// Program is what the run function does.
type Program struct {
	// Module names the model; C identifiers are kiln_<Module>_*. It must
	// be a C identifier (see Identifier).
	Module    string
	Inputs    []Tensor
	Outputs   []Tensor
	Constants []*tensor.Tensor
	Temps     []Tensor
	Calls     []Call
	Copies    []Copy
}

// Check verifies that every reference is in range and that every output
// is written (by a call or a copy).
func (p *Program) Check() error {
	if p.Module == "" || Identifier(p.Module) != p.Module {
		return fmt.Errorf("aot: module name %q is not a C identifier", p.Module)
	}
	written := make([]bool, len(p.Outputs))
	check := func(r Ref, where string) error {
		n := map[RefKind]int{RefInput: len(p.Inputs), RefOutput: len(p.Outputs), RefConstant: len(p.Constants), RefTemp: len(p.Temps)}[r.Kind]
		if r.Index < 0 || r.Index >= n {
			return fmt.Errorf("aot: %s: reference %+v out of range", where, r)
		}
		if r.Kind == RefOutput {
			written[r.Index] = true
		}
		return nil
	}
	for i, c := range p.Calls {
		for _, a := range c.Args {
			if err := check(a, fmt.Sprintf("call %d (%s)", i, c.Func)); err != nil {
				return err
			}
		}
	}
	for _, c := range p.Copies {
		if err := check(c.From, "copy"); err != nil {
			return err
		}
		if err := check(Ref{RefOutput, c.Output}, "copy"); err != nil {
			return err
		}
	}
	for i, w := range written {
		if !w {
			return fmt.Errorf("aot: output %d (%s) is never written", i, p.Outputs[i].Name)
		}
	}
	return nil
}

// Intervals are the temps' live ranges (memplan.Liveness): the calls in
// order, then one last step for the copies into the outputs.
func (p *Program) Intervals() ([]memplan.Interval, error) {
	sizes := make([]int64, len(p.Temps))
	for i, t := range p.Temps {
		sizes[i] = t.Bytes()
	}
	steps := make([][]int, 0, len(p.Calls)+1)
	for _, c := range p.Calls {
		var touched []int
		for _, a := range c.Args {
			if a.Kind == RefTemp {
				touched = append(touched, a.Index)
			}
		}
		steps = append(steps, touched)
	}
	var copied []int
	for _, c := range p.Copies {
		if c.From.Kind == RefTemp {
			copied = append(copied, c.From.Index)
		}
	}
	steps = append(steps, copied)
	return memplan.Liveness(sizes, steps)
}

// Identifier turns s into a C identifier: characters other than letters,
// digits and '_' become '_', and a leading digit (or an empty name) gets
// a '_' in front.
func Identifier(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == "" || out[0] >= '0' && out[0] <= '9' {
		out = "_" + out
	}
	return out
}
