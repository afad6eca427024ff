package dnnl

import (
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pattern"
)

// Patterns is dnnl's pattern table for MergeComposite, one entry per
// composite of Composites, in the same (priority) order: the anchor
// (nn.conv2d or nn.dense of any two inputs), then the bias (nn.bias_add,
// or add, of any input), the residual add (either operand order) and
// the activation (see Activation) as the composite asks. Each entry's check asks Supported about
// the composite call the match would become, so a match oneDNN cannot
// run here (another dtype, a bias of the wrong shape) is refused with
// the reason and its operators are partitioned one by one.
var Patterns = compositePatterns()

func compositePatterns() []pattern.Entry {
	out := make([]pattern.Entry, 0, len(Composites))
	for _, spec := range Composites {
		name := spec.Name
		var p pattern.Pattern = pattern.IsOp(spec.Anchor, pattern.Wildcard(), pattern.Wildcard())
		if spec.Bias {
			p = pattern.Alt(pattern.IsOp(op.BiasAdd, p, pattern.Wildcard()), pattern.IsOp(op.Add, p, pattern.Wildcard()))
		}
		if spec.Add {
			p = pattern.IsOp(op.Add, p, pattern.Wildcard())
		}
		p = actPattern(spec.Act, p)
		out = append(out, pattern.Entry{Name: name, Pattern: p, Check: func(r *pattern.Result) error {
			c, err := r.Outline(ir.Attrs{graph.AttrComposite: name})
			if err != nil {
				return err
			}
			return Supported(c)
		}})
	}
	return out
}

// actPattern wraps p in activation a's operators. A pattern that uses p
// twice (hard-swish, SiLU) must meet the same expression both times.
func actPattern(a Activation, p pattern.Pattern) pattern.Pattern {
	hardSigmoid := func(p pattern.Pattern) pattern.Pattern {
		return pattern.IsOp(op.Clip, pattern.IsOp(op.Add, pattern.IsOp(op.Multiply, p, pattern.IsConstant()), pattern.IsConstant()))
	}
	switch a {
	case ActRelu:
		return pattern.IsOp(op.Relu, p)
	case ActClip:
		return pattern.IsOp(op.Clip, p)
	case ActHardSwish:
		return pattern.IsOp(op.Multiply, p, hardSigmoid(p))
	case ActHardSigmoid:
		return hardSigmoid(p)
	case ActSigmoid:
		return pattern.IsOp(op.Sigmoid, p)
	case ActSiLU:
		return pattern.IsOp(op.Multiply, p, pattern.IsOp(op.Sigmoid, p))
	}
	return p
}
