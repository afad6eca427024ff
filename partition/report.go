package partition

import (
	"encoding/json"
	"fmt"
	"github.com/kiln-dev/kiln/internal/escape"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
)

// HostTarget is the Target of report entries left on the host.
const HostTarget = "host"

// Report says where each call of the model went and why.
type Report struct {
	// Nodes has one entry per call, in topological order.
	Nodes []NodeReport `json:"nodes"`
	// Counts is the number of calls per target (HostTarget included).
	Counts map[string]int `json:"counts"`
	// Regions is the number of outlined functions per external target.
	Regions map[string]int `json:"regions"`
	// Measured is what measured partitioning measured and chose (nil for
	// greedy partitioning).
	Measured *Measured `json:"measured,omitempty"`
	// Warnings are what looks odd: an external target that receives
	// nothing (and why), a region measured slower than the host.
	Warnings []string `json:"warnings,omitempty"`
}

// SlowRegions warns about every region whose calls measured slower on
// its target than on the host (from the entries' CostMs).
func (r *Report) SlowRegions() []string {
	type key struct {
		target string
		region int
	}
	on, host := map[key]float64{}, map[key]float64{}
	calls := map[key]int{}
	var order []key
	for _, n := range r.Nodes {
		if n.Region < 0 {
			continue
		}
		k := key{n.Target, n.Region}
		if calls[k] == 0 {
			order = append(order, k)
		}
		calls[k]++
		on[k] += n.CostMs[n.Target]
		host[k] += n.CostMs[HostTarget]
	}
	var out []string
	for _, k := range order {
		if on[k] > 0 && host[k] > 0 && on[k] > host[k] {
			out = append(out, fmt.Sprintf("%s #%d (%d calls) measured %.3f ms per run on %s, where the host took %.3f ms", k.target, k.region, calls[k], on[k], k.target, host[k]))
		}
	}
	return out
}

// Measured is what measured partitioning (driver.CompileMeasured)
// measured: the whole-model candidates and the one compiled.
type Measured struct {
	// Candidates are the assignments measured, in order, with their
	// median latency.
	Candidates []MeasuredCandidate `json:"candidates"`
	// Chosen names the candidate compiled (the fastest).
	Chosen string `json:"chosen"`
	// Cached reports that the choice came from kiln's cache.
	Cached bool `json:"cached,omitempty"`
	// Threads is the runs' thread count; Seconds the time spent.
	Threads int     `json:"threads"`
	Seconds float64 `json:"seconds,omitempty"`
}

// MeasuredCandidate is one measured assignment: "host", a target's name
// (greedy with that target alone), "NAME refined", "greedy", "combined".
type MeasuredCandidate struct {
	Name     string  `json:"name"`
	MedianMs float64 `json:"median_ms"`
}

// AddCosts records measured costs (milliseconds per run by target name,
// then by ONNX node) on the entries of those nodes, shared equally by the
// entries of one node.
func (r *Report) AddCosts(costs map[string]map[string]float64) {
	count := map[string]int{}
	for _, n := range r.Nodes {
		count[n.Node]++
	}
	for i := range r.Nodes {
		n := &r.Nodes[i]
		if n.Node == "" {
			continue
		}
		for t, byNode := range costs {
			if v, ok := byNode[n.Node]; ok {
				if n.CostMs == nil {
					n.CostMs = map[string]float64{}
				}
				n.CostMs[t] = v / float64(count[n.Node])
			}
		}
	}
}

// NodeReport is one call of the report.
type NodeReport struct {
	// Node is the ONNX node the call came from (its span), or "".
	Node string `json:"node,omitempty"`
	// Op is the operator's name.
	Op string `json:"op"`
	// Composite names the composite function the call was merged into
	// (MergeComposite), or "".
	Composite string `json:"composite,omitempty"`
	// Target is the external target's kind name, or HostTarget.
	Target string `json:"target"`
	// Region numbers the call's outlined function within its target
	// (0, 1, ...); -1 on the host.
	Region int `json:"region"`
	// Why says why a call stayed on the host (each target's refusal), or
	// why an offloaded call was kept apart from a neighbouring region.
	Why []string `json:"why,omitempty"`
	// Inputs are the entries (indices in Nodes) whose results the call
	// reads; Bytes is the size of its result (0 for a tuple).
	Inputs []int `json:"inputs,omitempty"`
	Bytes  int64 `json:"bytes,omitempty"`
	// CostMs is, with measured partitioning, the time per run the call
	// took on each target measured ("host" and external targets' names).
	CostMs map[string]float64 `json:"cost_ms,omitempty"`
}

func newReport(fn *graph.Function, ann *Annotation, regions []*Region, refused map[refusalKey][]string) *Report {
	rep := &Report{Counts: map[string]int{}, Regions: map[string]int{}}
	regionOf := map[*graph.Call]int{}
	cut := map[*graph.Call]string{}
	for _, r := range regions {
		k := r.Target.Kind.Name
		for _, c := range r.Calls {
			regionOf[c] = rep.Regions[k]
		}
		for c, why := range r.Cuts {
			cut[c] = why
		}
		rep.Regions[k]++
	}
	// index gives the entry of each call's result; a composite's
	// parameters stand for the call's arguments (params).
	index := map[graph.Expr]int{}
	params := map[graph.Expr]graph.Expr{}
	var inputsOf func(args []graph.Expr) []int
	inputsOf = func(args []graph.Expr) []int {
		var out []int
		for _, a := range args {
			switch x := a.(type) {
			case *graph.Call:
				if i, ok := index[x]; ok {
					out = append(out, i)
				} else {
					out = append(out, inputsOf(x.Args)...) // device copies, on_device
				}
			case *graph.Tuple:
				out = append(out, inputsOf(x.Fields)...)
			case *graph.TupleGetItem:
				out = append(out, inputsOf([]graph.Expr{x.Tuple})...)
			case *graph.Var:
				if o, ok := params[x]; ok {
					out = append(out, inputsOf([]graph.Expr{o})...)
				}
			}
		}
		return out
	}
	bytesOf := func(c *graph.Call) int64 {
		if tt, ok := c.Type().(*ir.TensorType); ok {
			if n, err := tt.Shape.CheckedNumElements(); err == nil && n < 1<<50 {
				return n * int64(tt.DType.Size())
			}
		}
		return 0
	}
	graph.PostOrder(fn.Body, func(e graph.Expr) {
		c, ok := e.(*graph.Call)
		if !ok || c.Op == op.DeviceCopy || c.Op == op.OnDevice {
			return
		}
		n := NodeReport{Node: c.Span, Op: callName(c), Target: HostTarget, Region: -1}
		if t, ok := ann.Target[c]; ok {
			n.Target = t.Kind.Name
			n.Region = regionOf[c]
			if why, ok := cut[c]; ok {
				n.Why = []string{why}
			}
		} else {
			n.Why = append(append([]string(nil), refused[refusalOf(c)]...), ann.Why[c]...)
			if len(n.Why) == 0 {
				n.Why = []string{"no external target takes it"}
			}
		}
		comp := compositeName(c)
		if comp == "" {
			n.Inputs, n.Bytes = inputsOf(c.Args), bytesOf(c)
			index[c] = len(rep.Nodes)
			rep.Counts[n.Target]++
			rep.Nodes = append(rep.Nodes, n)
			return
		}
		// A composite call stands for the operators of its function: one
		// entry each.
		f := c.Fn.(*graph.Function)
		for i, p := range f.Params {
			if i < len(c.Args) {
				params[p] = c.Args[i]
			}
		}
		graph.PostOrder(f.Body, func(e graph.Expr) {
			inner, ok := e.(*graph.Call)
			if !ok || inner.Op == nil {
				return
			}
			m := n
			m.Node, m.Op, m.Composite = inner.Span, inner.Op.Name, comp
			m.Inputs, m.Bytes = inputsOf(inner.Args), bytesOf(inner)
			index[inner] = len(rep.Nodes)
			rep.Counts[m.Target]++
			rep.Nodes = append(rep.Nodes, m)
		})
		if i, ok := index[f.Body]; ok {
			index[c] = i
		}
	})
	return rep
}

// hostError is the error of RequireOffload: the calls left on the host.
func (r *Report) hostError() error {
	var left []string
	for _, n := range r.Nodes {
		if n.Target == HostTarget {
			name := n.Op
			if n.Node != "" {
				name = n.Node + " (" + n.Op + ")"
			}
			left = append(left, name+": "+strings.Join(n.Why, "; "))
		}
	}
	if len(left) == 0 {
		return nil
	}
	const max = 5
	more := ""
	if len(left) > max {
		more = fmt.Sprintf(" and %d more", len(left)-max)
		left = left[:max]
	}
	return fmt.Errorf("partition: full offload required, but %d call(s) stay on the host: %s%s", r.Counts[HostTarget], strings.Join(left, "; "), more)
}

// WriteText prints the report: counts per target, then one line per call.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	targets := make([]string, 0, len(r.Counts))
	for t := range r.Counts {
		targets = append(targets, t)
	}
	sort.Strings(targets)
	b.WriteString("partition:")
	for _, t := range targets {
		fmt.Fprintf(&b, " %s %d", t, r.Counts[t])
		if n := r.Regions[t]; n == 1 {
			b.WriteString(" (1 region)")
		} else if n > 1 {
			fmt.Fprintf(&b, " (%d regions)", n)
		}
		b.WriteByte(',')
	}
	if _, err := io.WriteString(w, strings.TrimSuffix(b.String(), ",")+"\n"); err != nil {
		return err
	}
	if r.Measured != nil {
		if _, err := io.WriteString(w, r.Measured.Summary()+"\n"); err != nil {
			return err
		}
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, n := range r.Nodes {
		node := escape.Printable(n.Node) // no control bytes from a model reach the terminal
		if node == "" {
			node = "-"
		}
		notes := n.Why
		if c := n.Costs(); c != "" {
			notes = append([]string{c}, notes...)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", node, n.Op, n.Where(), escape.Printable(strings.Join(notes, "; ")))
	}
	return tw.Flush()
}

// Summary is one line on the measurement: each candidate's median
// latency, the chosen one marked.
func (m *Measured) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "measured partitioning (%d thread(s)", m.Threads)
	if m.Cached {
		b.WriteString(", from the cache")
	} else if m.Seconds > 0 {
		fmt.Fprintf(&b, ", %.1f s", m.Seconds)
	}
	b.WriteString("):")
	for i, c := range m.Candidates {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s %.3f ms", c.Name, c.MedianMs)
		if c.Name == m.Chosen {
			b.WriteString(" (chosen)")
		}
	}
	return b.String()
}

// Costs is the entry's measured times as the text report prints them
// ("dnnl 0.080 ms, host 0.120 ms"), or "".
func (n NodeReport) Costs() string {
	if len(n.CostMs) == 0 {
		return ""
	}
	keys := make([]string, 0, len(n.CostMs))
	for k := range n.CostMs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.3f ms", k, n.CostMs[k])
	}
	return strings.Join(parts, ", ")
}

// Where is the entry's place as the text report prints it: the target,
// its region number when offloaded, and the composite it belongs to, as in
// "dnnl #3 (dnnl.conv2d_bias_relu)".
func (n NodeReport) Where() string {
	where := n.Target
	if n.Region >= 0 {
		where = fmt.Sprintf("%s #%d", n.Target, n.Region)
	}
	if n.Composite != "" {
		where += " (" + n.Composite + ")"
	}
	return where
}

// WriteJSON prints the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
