package device

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
)

// Rule places graph calls on a device: the calls whose Span (the ONNX node
// name) is NodeName, or whose operator is OpType (a graph op name such as
// "nn.conv2d"). Exactly one of NodeName and OpType is set. Device is an
// on_device device string, "label" or "label:id".
type Rule struct {
	NodeName string
	OpType   string
	Device   string
	// Line is the rule's line in its placement file (0 when built in
	// code or given as a flag), Column the column (1-based, in bytes) of
	// its device in that line.
	Line, Column int
	// Source says where the rule came from: its placement file's name,
	// or the flag that gave it ("--place"); "" when built in code.
	Source string
}

// Where says where the rule came from, for errors: "FILE:LINE:COLUMN"
// for a rule of a named file, "line L, column C" for one of an unnamed
// text, `--place "RULE"` for a flag's, and the rule itself otherwise.
func (r Rule) Where() string {
	switch {
	case r.Line > 0 && r.Source != "":
		return fmt.Sprintf("%s:%d:%d", r.Source, r.Line, r.Column)
	case r.Line > 0:
		return fmt.Sprintf("line %d, column %d", r.Line, r.Column)
	case r.Source != "":
		return fmt.Sprintf("%s %q", r.Source, r.String())
	}
	return r.String()
}

// String prints the rule in the placement file syntax.
func (r Rule) String() string {
	if r.NodeName != "" {
		return "node:" + r.NodeName + " = " + r.Device
	}
	return "op:" + r.OpType + " = " + r.Device
}

// ParseRules reads a placement file: one rule per line,
//
//	# comment (also after a rule)
//	node:Conv_3 = little:1
//	op:nn.conv2d = big
//
// `node:NAME` matches the call imported from the ONNX node NAME; `op:OP`
// matches every call of graph operator OP. A node rule wins over an op
// rule. Blank lines are ignored. Errors name the line and the column.
func ParseRules(src string) ([]Rule, error) { return ParseRulesNamed("", src) }

// ParseRulesNamed is ParseRules for the file name: its errors, and the
// rules' Where, read "NAME:LINE:COLUMN".
func ParseRulesNamed(name, src string) ([]Rule, error) {
	var rules []Rule
	seen := map[string]int{}
	for i, raw := range strings.Split(src, "\n") {
		n := i + 1
		fail := func(col int, format string, args ...any) error {
			msg := fmt.Sprintf(format, args...)
			if name != "" {
				return fmt.Errorf("%s:%d:%d: %s", name, n, col, msg)
			}
			return fmt.Errorf("placement line %d, column %d: %s", n, col, msg)
		}
		line := raw
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		// col is the 1-based column in raw of the first non-space byte of
		// s, a part of line starting at byte offset off.
		col := func(off int, s string) int { return off + len(s) - len(strings.TrimLeft(s, " \t")) + 1 }
		if strings.TrimSpace(line) == "" {
			continue
		}
		eq := strings.IndexByte(line, '=')
		if eq < 0 {
			return nil, fail(col(0, line), "want `node:NAME = DEVICE` or `op:OP = DEVICE`, got %q", strings.TrimSpace(line))
		}
		lhsRaw, rhsRaw := line[:eq], line[eq+1:]
		lhs, rhs := strings.TrimSpace(lhsRaw), strings.TrimSpace(rhsRaw)
		lhsCol, rhsCol := col(0, lhsRaw), col(eq+1, rhsRaw)
		if rhs == "" {
			rhsCol = eq + 2
		}
		kind, sel, ok := strings.Cut(lhs, ":")
		sel = strings.TrimSpace(sel)
		if !ok || sel == "" {
			return nil, fail(lhsCol, "selector %q must be node:NAME or op:OP", lhs)
		}
		if _, _, _, err := ParseDeviceString(rhs); err != nil {
			return nil, fail(rhsCol, "%v", err)
		}
		r := Rule{Device: rhs, Line: n, Column: rhsCol, Source: name}
		switch strings.TrimSpace(kind) {
		case "node":
			r.NodeName = sel
		case "op":
			if _, known := op.Lookup(sel); !known {
				return nil, fail(lhsCol+strings.Index(lhs, sel), "unknown operator %q", sel)
			}
			r.OpType = sel
		default:
			return nil, fail(lhsCol, "selector %q must be node:NAME or op:OP", lhs)
		}
		key := strings.TrimSpace(kind) + ":" + sel
		if prev, dup := seen[key]; dup {
			return nil, fail(lhsCol, "%s already placed on line %d", key, prev)
		}
		seen[key] = n
		rules = append(rules, r)
	}
	return rules, nil
}

// Place puts every call a rule matches on the rule's device by
// annotating both of its boundaries, so that the call runs there and
// PlanDevices copies values in and out as needed:
//
//   - each non-constant argument a becomes
//     on_device(a, d, constrain_body=false, constrain_result=true): the
//     argument must be available on d, wherever it is computed;
//   - the call's result c becomes on_device(c, d): computed on d, consumed
//     anywhere (a multi-output call is annotated through its tuple
//     projections).
//
// It works on main and the other non-primitive module functions, so run it
// right after import, before fusion and partitioning. A node rule that
// matches no call, an unknown op, an invalid device string and a placed
// multi-output call used as a whole tuple are errors; the labels
// themselves are resolved later, by PlanDevices. The input module is not
// modified (only its cached types are filled in).
func Place(mod *graph.Module, rules []Rule) (*graph.Module, error) {
	byNode := map[string]Rule{}
	byOp := map[string]Rule{}
	for _, r := range rules {
		if _, _, _, err := ParseDeviceString(r.Device); err != nil {
			return nil, fmt.Errorf("placement rule %s: %v", r, err)
		}
		switch {
		case r.NodeName != "" && r.OpType == "":
			byNode[r.NodeName] = r
		case r.OpType != "" && r.NodeName == "":
			if _, known := op.Lookup(r.OpType); !known {
				return nil, fmt.Errorf("placement rule %s: unknown operator %q", r, r.OpType)
			}
			byOp[r.OpType] = r
		default:
			return nil, fmt.Errorf("placement rule %+v: set exactly one of NodeName and OpType", r)
		}
	}
	matched := map[string]bool{}
	ruleFor := func(c *graph.Call) (Rule, bool) {
		if c.Op == op.OnDevice || c.Op == op.DeviceCopy {
			return Rule{}, false
		}
		if r, ok := byNode[c.Span]; ok && c.Span != "" {
			matched[c.Span] = true
			return r, true
		}
		if c.Op != nil {
			r, ok := byOp[c.Op.Name]
			return r, ok
		}
		return Rule{}, false
	}
	if err := graph.InferTypes(mod); err != nil {
		return nil, fmt.Errorf("placement: %v", err)
	}
	out := mod.ShallowCopy()
	for _, name := range mod.Names() {
		f := mod.Funcs[name]
		if isPrimitiveFunc(f) || f.StrAttr(graph.AttrComposite) != "" {
			continue
		}
		memo := map[graph.Expr]graph.Expr{}
		tuples := map[graph.Expr]Rule{} // placed tuple-valued calls (original nodes)
		placedTuple := map[graph.Expr]bool{}
		graph.PostOrder(f.Body, func(e graph.Expr) {
			ne := rebuild(e, memo)
			switch x := e.(type) {
			case *graph.Call:
				if r, ok := ruleFor(x); ok {
					ne = annotateArgs(ne.(*graph.Call), r)
					if _, isTuple := x.Type().(*ir.TupleType); isTuple {
						tuples[x] = r
					} else {
						ne = annotate(ne, r)
					}
				}
			case *graph.TupleGetItem:
				if r, ok := tuples[x.Tuple]; ok {
					placedTuple[x.Tuple] = true
					ne = annotate(ne, r)
				}
			}
			memo[e] = ne
		})
		for _, e := range graph.Nodes(f.Body) { // deterministic order for the error
			if r, ok := tuples[e]; ok && !placedTuple[e] {
				return nil, fmt.Errorf("@%s: placement rule %s: %s is used as a whole tuple; place its projections' consumers instead", name, r, graph.Describe(e))
			}
		}
		if body := memo[f.Body]; body != f.Body {
			nf := graph.NewFunction(f.Params, body, f.Attrs.Clone())
			nf.RetType = f.RetType
			out.Funcs[name] = nf
		}
	}
	for n := range byNode {
		if !matched[n] {
			return nil, fmt.Errorf("placement rule at %s: no node named %q", byNode[n].Where(), n)
		}
	}
	if err := graph.InferTypes(out); err != nil {
		return nil, fmt.Errorf("placement: %v", err)
	}
	return out, nil
}

// rebuild returns e with its children replaced by their memo entries,
// copying e only when one changed.
func rebuild(e graph.Expr, memo map[graph.Expr]graph.Expr) graph.Expr {
	m := func(x graph.Expr) graph.Expr {
		if r, ok := memo[x]; ok {
			return r
		}
		return x
	}
	switch x := e.(type) {
	case *graph.Call:
		args := make([]graph.Expr, len(x.Args))
		changed := false
		for i, a := range x.Args {
			args[i] = m(a)
			changed = changed || args[i] != a
		}
		if !changed {
			return e
		}
		return &graph.Call{Op: x.Op, Fn: x.Fn, Args: args, Attrs: x.Attrs, Span: x.Span}
	case *graph.Tuple:
		fs := make([]graph.Expr, len(x.Fields))
		changed := false
		for i, f := range x.Fields {
			fs[i] = m(f)
			changed = changed || fs[i] != f
		}
		if !changed {
			return e
		}
		return graph.NewTuple(fs)
	case *graph.TupleGetItem:
		if t := m(x.Tuple); t != x.Tuple {
			return graph.NewTupleGetItem(t, x.Index)
		}
	}
	return e
}

// annotateArgs returns c with each non-constant argument wrapped in an
// on_device that puts only the argument's result on r's device.
func annotateArgs(c *graph.Call, r Rule) *graph.Call {
	args := make([]graph.Expr, len(c.Args))
	for i, a := range c.Args {
		args[i] = a
		if _, isConst := a.(*graph.Constant); !isConst {
			args[i] = graph.MustCall(op.OnDevice, []graph.Expr{a}, ir.Attrs{
				"device": r.Device, "constrain_body": false, "constrain_result": true})
		}
	}
	return &graph.Call{Op: c.Op, Fn: c.Fn, Args: args, Attrs: c.Attrs, Span: c.Span}
}

// annotate wraps e in on_device(e, device=r.Device).
func annotate(e graph.Expr, r Rule) graph.Expr {
	return graph.MustCall(op.OnDevice, []graph.Expr{e}, ir.Attrs{"device": r.Device})
}
