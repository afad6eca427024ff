package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/internal/escape"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/partition"
	"github.com/kiln-dev/kiln/tensor"
)

func runInspect(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("inspect", "MODEL.onnx [-t \"TARGETS\"] [--format text|json|dot|html]", stderr)
	targets := fs.String("t", "", "comma-separated target strings, host last: show each node's planned device")
	format := fs.String("format", "text", "output format: text, json, dot or html")
	var shapes, freezes listFlag
	fs.Var(&shapes, "input-shape", "NAME=D1,D2,... fixes an input's shape (repeatable)")
	fs.Var(&freezes, "freeze", "NAME=FILE gives an input's value for compile-time use (repeatable)")
	allConsts := fs.Bool("all-constants", false, "text: print every constant's values")
	spans := fs.Bool("spans", false, "text: show each call's ONNX node name")
	profile := fs.String("profile", "", "html: colour nodes by the time per ONNX node in `FILE`, the output of kiln bench --profile N --json")
	var devs deviceFlags
	devs.register(fs)
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	switch *format {
	case "text", "json", "dot", "html":
	default:
		fmt.Fprintf(stderr, "kiln inspect: --format %q: want text, json, dot or html\n", *format)
		return exitUsage
	}
	var prof map[string]float64
	if *profile != "" {
		if *format != "html" {
			fmt.Fprintf(stderr, "kiln inspect: --profile draws on the html format only (--format html)\n")
			return exitUsage
		}
		var err error
		if prof, err = readProfile(*profile); err != nil {
			return fail(stderr, "inspect", err)
		}
	}
	path, err := modelPath(pos[0])
	if err == errArtifact {
		return fail(stderr, "inspect", fmt.Errorf("%s: %v", pos[0], err))
	}
	if err != nil {
		return fail(stderr, "inspect", err)
	}
	shapeMap, err := parseShapes(shapes)
	if err != nil {
		return fail(stderr, "inspect", err)
	}
	fz, err := parseAssignments("freeze", freezes)
	if err != nil {
		return fail(stderr, "inspect", err)
	}
	vals := map[string]*tensor.Tensor{}
	for _, n := range sortedKeys(fz) {
		t, _, err := ReadTensor(fz[n])
		if err != nil {
			return fail(stderr, "inspect", err)
		}
		vals[n] = t
	}
	model, err := loadWithInputs(path, vals, shapeMap, nil)
	if err != nil {
		return fail(stderr, "inspect", err)
	}
	// With external code generators among the targets, show where
	// partitioning sends each node (the imported graph annotated with the
	// target of every call, preceded by the partition report). Otherwise,
	// with targets or placements, show the planned module: each node with
	// its device, and the device copies planning inserted.
	var devOf func(graph.Expr) string
	var rep *partition.Report
	if *targets != "" || devs.given() {
		ts := targetsOrDefault(*targets)
		place, err := devs.resolve(ts)
		if err != nil {
			return fail(stderr, "inspect", err)
		}
		if rep, devOf, err = partitionView(model.Module, place); err != nil {
			return fail(stderr, "inspect", err)
		}
		if rep != nil {
			writeWarnings(stderr, rep)
		} else {
			planned, err := place.plan(model.Module)
			if err != nil {
				return fail(stderr, "inspect", err)
			}
			m2 := *model
			m2.Module = planned
			model = &m2
			devOf = func(e graph.Expr) string { return deviceNote(planned, e) }
		}
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	switch *format {
	case "text":
		if rep != nil {
			if err := rep.WriteText(w); err != nil {
				return fail(stderr, "inspect", err)
			}
			fmt.Fprintln(w)
		}
		err = graph.Print(w, model.Module, graph.PrintOptions{InlineAllConstants: *allConsts, ShowSpans: *spans, Annotate: devOf})
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		info := describe(model, devOf)
		info.Partition = rep
		err = enc.Encode(info)
	case "dot":
		err = writeDot(w, model, devOf)
	case "html":
		err = writeHTML(w, moduleName(pos[0]), describe(model, devOf), rep, prof)
	}
	if err != nil {
		return fail(stderr, "inspect", err)
	}
	return exitOK
}

// parseShapes reads NAME=D1,D2,... values ("NAME=" alone is a scalar).
func parseShapes(vals []string) (map[string]ir.Shape, error) {
	out := map[string]ir.Shape{}
	for _, v := range vals {
		name, dims, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--input-shape %q: want NAME=D1,D2,...", v)
		}
		s := ir.Shape{}
		for _, d := range strings.Split(dims, ",") {
			if d = strings.TrimSpace(d); d == "" {
				continue
			}
			n, err := strconv.ParseInt(d, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("--input-shape %q: bad dimension %q", v, d)
			}
			s = append(s, n)
		}
		out[name] = s
	}
	return out, nil
}

// ModelInfo is the JSON description `kiln inspect --format json` prints.
type ModelInfo struct {
	Inputs  []ValueJSON       `json:"inputs"`
	Outputs []ValueJSON       `json:"outputs"`
	Frozen  []string          `json:"frozen,omitempty"`
	Opsets  map[string]int64  `json:"opsets,omitempty"`
	Ops     map[string]int    `json:"op_counts"`
	Nodes   []NodeJSON        `json:"nodes"`
	Result  []string          `json:"result"`
	Extra   map[string]string `json:"functions,omitempty"`
	// Partition is the partition report when inspect was given external
	// targets (each node's "device" then names its target).
	Partition *partition.Report `json:"partition,omitempty"`
}

// ValueJSON is a named, typed graph input or output.
type ValueJSON struct {
	Name  string  `json:"name"`
	Type  string  `json:"type"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
}

// NodeJSON is one bound node of the main function, named as the text
// printer names it (%0, %1, ...). Args refer to nodes by name, to inputs
// as %input and to constants as `constant(dtype, [shape])`.
type NodeJSON struct {
	Name  string         `json:"name"`
	Op    string         `json:"op"`
	Attrs map[string]any `json:"attrs,omitempty"`
	Args  []string       `json:"args"`
	Type  string         `json:"type,omitempty"`
	Span  string         `json:"span,omitempty"`
	// Device is where device planning put the node ("cpu:1 c"), when
	// inspect was given targets or placements.
	Device string `json:"device,omitempty"`
}

// Describe builds the JSON description of an imported model.
func Describe(m *onnx.Model) *ModelInfo { return describe(m, nil) }

// describe is Describe with each node's device from devOf (nil: none).
func describe(m *onnx.Model, devOf func(graph.Expr) string) *ModelInfo {
	info := &ModelInfo{Frozen: m.Frozen, Opsets: m.Opsets, Ops: map[string]int{}, Nodes: []NodeJSON{}}
	for _, v := range m.Inputs {
		info.Inputs = append(info.Inputs, valueJSON(v))
	}
	for _, v := range m.Outputs {
		info.Outputs = append(info.Outputs, valueJSON(v))
	}
	main := m.Module.Main()
	names := map[graph.Expr]string{}
	ref := func(e graph.Expr) string {
		switch x := e.(type) {
		case *graph.Var:
			return "%" + x.Name
		case *graph.Constant:
			return fmt.Sprintf("constant(%s, %v)", x.Value.DType, x.Value.Shape)
		case *graph.GlobalVar:
			return "@" + x.Name
		}
		if n, ok := names[e]; ok {
			return n
		}
		return "?"
	}
	graph.PostOrder(main.Body, func(e graph.Expr) {
		var n NodeJSON
		switch x := e.(type) {
		case *graph.Call:
			switch {
			case x.Op != nil:
				n.Op = x.Op.Name
				if len(x.Attrs) > 0 {
					n.Attrs = map[string]any{}
					for k, v := range x.Attrs {
						n.Attrs[k] = attrJSON(v)
					}
				}
			case x.Fn != nil:
				n.Op = "call " + ref(x.Fn)
			}
			n.Span = x.Span
			for _, a := range x.Args {
				n.Args = append(n.Args, ref(a))
			}
		case *graph.Tuple:
			n.Op = "tuple"
			for _, f := range x.Fields {
				n.Args = append(n.Args, ref(f))
			}
		case *graph.TupleGetItem:
			n.Op = "tuple_get_item." + strconv.Itoa(x.Index)
			n.Args = []string{ref(x.Tuple)}
		default:
			return
		}
		if n.Args == nil {
			n.Args = []string{}
		}
		n.Name = "%" + strconv.Itoa(len(info.Nodes))
		if devOf != nil {
			n.Device = devOf(e)
		}
		names[e] = n.Name
		if t := e.Type(); t != nil {
			n.Type = t.String()
		}
		info.Ops[n.Op]++
		info.Nodes = append(info.Nodes, n)
	})
	if t, ok := main.Body.(*graph.Tuple); ok && len(m.Outputs) > 1 {
		for _, f := range t.Fields {
			info.Result = append(info.Result, ref(f))
		}
	} else {
		info.Result = []string{ref(main.Body)}
	}
	for _, name := range m.Module.Names() {
		if name != "main" {
			if info.Extra == nil {
				info.Extra = map[string]string{}
			}
			info.Extra[name] = m.Module.Funcs[name].FuncType().String()
		}
	}
	return info
}

func valueJSON(v onnx.ValueInfo) ValueJSON {
	shape := []int64(v.Type.Shape)
	if shape == nil {
		shape = []int64{}
	}
	return ValueJSON{Name: v.Name, Type: v.Type.String(), DType: v.Type.DType.String(), Shape: shape}
}

// attrJSON converts an attribute value for encoding/json: dtypes as their
// names, non-finite floats as "nan", "inf" and "-inf".
func attrJSON(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return ir.FormatFloat(x)
		}
	case []float64:
		out := make([]any, len(x))
		for i, f := range x {
			out[i] = attrJSON(f)
		}
		return out
	case ir.DType:
		return x.String()
	}
	return v
}

// writeDot prints the main function as a Graphviz digraph: inputs as
// ellipses, calls as boxes labelled with the op, constants folded into
// their consumer's label; with devOf, each node's device is in its label
// and nodes are filled with one colour per device.
func writeDot(w io.Writer, m *onnx.Model, devOf func(graph.Expr) string) error {
	info := describe(m, devOf)
	palette := []string{"#dbe9f6", "#fde2c8", "#d9f0d3", "#f3d9f0", "#fff3b0", "#e0e0e0"}
	colour := map[string]string{}
	fmt.Fprintln(w, "digraph kiln {")
	fmt.Fprintln(w, "  rankdir=TB;")
	fmt.Fprintln(w, "  node [fontname=\"Helvetica\", fontsize=10];")
	// IDs are Go-quoted (injective, and a valid DOT string); labels are
	// escaped for reading.
	id := func(ref string) string { return strconv.Quote(ref) }
	for _, in := range info.Inputs {
		fmt.Fprintf(w, "  %s [shape=ellipse, label=%s];\n", id("%"+in.Name), escape.DOT(in.Name+"\n"+in.Type))
	}
	for _, n := range info.Nodes {
		label := n.Op
		consts := 0
		for _, a := range n.Args {
			if strings.HasPrefix(a, "constant(") {
				consts++
			}
		}
		if consts > 0 {
			label += fmt.Sprintf(" (+%d const)", consts)
		}
		if n.Type != "" {
			label += "\n" + n.Type
		}
		style := ""
		if n.Device != "" {
			dev, _, _ := strings.Cut(n.Device, " ")
			label += "\n@" + dev
			c, ok := colour[dev]
			if !ok {
				c = palette[len(colour)%len(palette)]
				colour[dev] = c
			}
			style = fmt.Sprintf(", style=filled, fillcolor=%q", c)
		}
		fmt.Fprintf(w, "  %s [shape=box, label=%s%s];\n", id(n.Name), escape.DOT(label), style)
		for _, a := range n.Args {
			if !strings.HasPrefix(a, "constant(") {
				fmt.Fprintf(w, "  %s -> %s;\n", id(a), id(n.Name))
			}
		}
	}
	for i, r := range info.Result {
		name := "output"
		if i < len(info.Outputs) {
			name = info.Outputs[i].Name
		}
		out := id("out:" + name)
		fmt.Fprintf(w, "  %s [shape=ellipse, style=dashed, label=%s];\n", out, escape.DOT(name))
		fmt.Fprintf(w, "  %s -> %s;\n", id(r), out)
	}
	_, err := fmt.Fprintln(w, "}")
	return err
}
