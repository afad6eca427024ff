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
			rep.Counts[n.Target]++
			rep.Nodes = append(rep.Nodes, n)
			return
		}
		// A composite call stands for the operators of its function: one
		// entry each.
		graph.PostOrder(c.Fn.(*graph.Function).Body, func(e graph.Expr) {
			inner, ok := e.(*graph.Call)
			if !ok || inner.Op == nil {
				return
			}
			m := n
			m.Node, m.Op, m.Composite = inner.Span, inner.Op.Name, comp
			rep.Counts[m.Target]++
			rep.Nodes = append(rep.Nodes, m)
		})
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
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, n := range r.Nodes {
		node := escape.Printable(n.Node) // no control bytes from a model reach the terminal
		if node == "" {
			node = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", node, n.Op, n.Where(), escape.Printable(strings.Join(n.Why, "; ")))
	}
	return tw.Flush()
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
