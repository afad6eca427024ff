package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/kiln-dev/kiln/internal/escape"

	"github.com/kiln-dev/kiln/partition"
)

// The HTML view (kiln inspect --format html, kiln compile --report-html) is
// one self-contained page: the model's graph drawn as an SVG with a layered
// layout computed here, nodes coloured by the target partitioning gave
// them and regions outlined, followed by the partition report's tables.
// An inline script (htmlview.go; no external file, no network) adds pan,
// zoom, search and a panel with the clicked node's details; without it the
// drawing is still the whole graph.

// Layout sizes of the SVG drawing, in pixels.
const (
	htmlBoxW   = 168
	htmlBoxH   = 46
	htmlGapX   = 22
	htmlGapY   = 54
	htmlMargin = 16
)

// htmlPalette colours the targets in order of first appearance; the host
// is always grey.
var htmlPalette = []string{"#9ecae1", "#fdae6b", "#a1d99b", "#bcbddc", "#fdd0a2", "#c6dbef", "#fc9272"}

const htmlHostColour = "#e5e5e5"

// htmlNode is one box of the drawing.
type htmlNode struct {
	// ID indexes the page's Details (and is the SVG element's "nID").
	ID           int
	X, Y         int
	Label, Sub   string // op (or input name) and type
	Target       string // colour key: target kind, "host", or "" (none)
	Fill         string
	Title        string // tooltip: node name, ONNX node, device, why
	Dashed, Oval bool
	// Heat, with a measured partition, is the node's measured time on
	// its target: HeatW the bar's width (proportional to the slowest
	// node's), HeatFill its colour (white to red by the same share).
	HeatW    int
	HeatFill string
}

// htmlEdge is one edge: a cubic curve from the bottom of one box to the
// top of another.
type htmlEdge struct{ Path string }

// htmlLegend is one colour of the legend.
type htmlLegend struct {
	Target, Fill string
	Count        int
	Regions      int
}

// htmlDetail is what the page's panel shows of one node when it is
// clicked, and what search looks in. The script receives them as JSON
// and only ever sets them as text.
type htmlDetail struct {
	Kind      string            `json:"kind"` // input, node or output
	Name      string            `json:"name"`
	Op        string            `json:"op,omitempty"`
	ONNX      string            `json:"onnx,omitempty"`
	Type      string            `json:"type,omitempty"`
	Target    string            `json:"target,omitempty"`
	Region    string            `json:"region,omitempty"`
	Composite string            `json:"composite,omitempty"`
	Attrs     map[string]string `json:"attrs,omitempty"`
	Args      []string          `json:"args,omitempty"`
	Why       []string          `json:"why,omitempty"`
	Measured  string            `json:"measured,omitempty"`
	ProfileMs float64           `json:"profile_ms,omitempty"`
	// Search is the lower-case text a search matches against: names
	// of the node, its ONNX node, its operator and its arguments.
	Search string `json:"search"`
}

// htmlRegion is the outline of one external region: the box around its
// nodes.
type htmlRegion struct {
	Label      string
	X, Y, W, H int
	Stroke     string
}

// htmlReason is one reason calls stayed on the host, with the nodes it
// kept there.
type htmlReason struct {
	Why   string
	Nodes []htmlLink
}

// htmlLink names a node of the drawing, for a link that selects it.
type htmlLink struct {
	ID   int
	Name string
}

// htmlPage is what the page template draws.
type htmlPage struct {
	Title         string
	Width, Height int
	Nodes         []htmlNode
	Edges         []htmlEdge
	Regions       []htmlRegion
	Legend        []htmlLegend
	Details       []htmlDetail
	Reasons       []htmlReason
	Report        *partition.Report
	// Profiled says the heat bars are a profile's times (--profile),
	// not measured partitioning's.
	Profiled bool
}

// writeHTML prints the model's main function and, when rep is non-nil, the
// partition report as a self-contained HTML page; info's nodes carry
// their targets (describe with a devOf). title heads the page. prof, when
// non-nil, is a profile's time per ONNX node in ms (profileByNode).
func writeHTML(w io.Writer, title string, info *ModelInfo, rep *partition.Report, prof map[string]float64) error {
	page := layoutHTML(info, rep, prof)
	page.Title = title
	page.Report = rep
	var b strings.Builder
	if err := htmlTemplate.Execute(&b, page); err != nil {
		return err
	}
	// html/template escapes markup by context; names from a model may
	// also hold invalid UTF-8 and control bytes, which no HTML or XML
	// parser accepts: they become U+FFFD.
	_, err := io.WriteString(w, escape.ValidText(b.String()))
	return err
}

// layoutHTML places the graph's nodes in layers (a node one below its
// deepest argument), orders each layer by the mean position of its
// arguments, routes every edge as a curve, outlines the external regions
// and gathers each node's details for the panel.
func layoutHTML(info *ModelInfo, rep *partition.Report, prof map[string]float64) *htmlPage {
	type box struct {
		node   htmlNode
		detail htmlDetail
		layer  int
		order  float64
		args   []int
		ms     float64 // measured (or profiled) time, or 0
		report *partition.NodeReport
	}
	var boxes []*box
	index := map[string]int{}
	types := map[string]string{}
	add := func(name string, b *box) {
		b.node.ID = len(boxes)
		index[name] = len(boxes)
		boxes = append(boxes, b)
	}
	for _, in := range info.Inputs {
		types["%"+in.Name] = in.Type
		add("%"+in.Name, &box{
			node:   htmlNode{Label: in.Name, Sub: in.Type, Oval: true, Title: "input " + in.Name + ": " + in.Type},
			detail: htmlDetail{Kind: "input", Name: in.Name, Type: in.Type},
		})
	}
	why := reportByNode(rep)
	for _, n := range info.Nodes {
		types[n.Name] = n.Type
		b := &box{node: htmlNode{Label: n.Op, Sub: n.Type}}
		d := &b.detail
		*d = htmlDetail{Kind: "node", Name: n.Name, Op: n.Op, ONNX: n.Span, Type: n.Type}
		consts := 0
		for _, a := range n.Args {
			if i, ok := index[a]; ok {
				b.args = append(b.args, i)
			} else if strings.HasPrefix(a, "constant(") {
				consts++
			}
			if t := types[a]; t != "" {
				d.Args = append(d.Args, a+": "+t)
			} else {
				d.Args = append(d.Args, a)
			}
		}
		if consts > 0 {
			b.node.Label += fmt.Sprintf(" (+%d const)", consts)
		}
		if len(n.Attrs) > 0 {
			// As text: a value JSON cannot hold (NaN) must not break the page.
			d.Attrs = map[string]string{}
			for k, v := range n.Attrs {
				d.Attrs[k] = fmt.Sprint(v)
			}
		}
		tip := []string{n.Name + " = " + n.Op}
		if n.Span != "" {
			tip = append(tip, "ONNX node "+n.Span)
		}
		if n.Type != "" {
			tip = append(tip, n.Type)
		}
		if n.Device != "" {
			b.node.Target, _, _ = strings.Cut(n.Device, " ")
			d.Target = n.Device
			tip = append(tip, "target "+n.Device)
		}
		if r, ok := why[reportKey{n.Span, n.Op}]; ok {
			b.report = &r
			d.Composite, d.Why = r.Composite, r.Why
			if r.Target != partition.HostTarget && r.Region >= 0 {
				d.Region = fmt.Sprintf("%s region %d", r.Target, r.Region)
			}
			if r.Composite != "" {
				tip = append(tip, "composite "+r.Composite)
			}
			if c := r.Costs(); c != "" {
				d.Measured = c
				tip = append(tip, "measured: "+c)
				b.ms = r.CostMs[r.Target]
			}
			if len(r.Why) > 0 {
				tip = append(tip, "why: "+strings.Join(r.Why, "; "))
			}
		}
		if ms, ok := prof[n.Span]; ok && n.Span != "" {
			d.ProfileMs, b.ms = ms, ms
			tip = append(tip, fmt.Sprintf("profiled: %.3f ms per run", ms))
		}
		b.node.Title = strings.Join(tip, "\n")
		add(n.Name, b)
	}
	for i, r := range info.Result {
		name := "output"
		if i < len(info.Outputs) {
			name = info.Outputs[i].Name
		}
		b := &box{node: htmlNode{Label: name, Oval: true, Dashed: true, Title: "output " + name},
			detail: htmlDetail{Kind: "output", Name: name, Args: []string{r}}}
		if i < len(info.Outputs) {
			b.detail.Type = info.Outputs[i].Type
		}
		if j, ok := index[r]; ok {
			b.args = []int{j}
		}
		add("out:"+name, b)
	}
	for _, b := range boxes {
		d := &b.detail
		d.Search = strings.ToLower(strings.Join(append([]string{d.Name, d.Op, d.ONNX, d.Type}, d.Args...), "\n"))
	}

	// Layers: inputs at 0, every other node one below its deepest argument
	// (arguments come before their users in boxes).
	layers := [][]*box{}
	for _, b := range boxes {
		for _, a := range b.args {
			if l := boxes[a].layer + 1; l > b.layer {
				b.layer = l
			}
		}
		for len(layers) <= b.layer {
			layers = append(layers, nil)
		}
		layers[b.layer] = append(layers[b.layer], b)
	}
	// Order each layer by its nodes' mean argument position (barycentre),
	// keeping creation order among equals; then place left to right.
	width := 0
	for li, layer := range layers {
		for i, b := range layer {
			if len(b.args) == 0 {
				b.order = float64(i)
				continue
			}
			s := 0.0
			for _, a := range b.args {
				s += float64(boxes[a].node.X)
			}
			b.order = s / float64(len(b.args))
		}
		sort.SliceStable(layer, func(i, j int) bool { return layer[i].order < layer[j].order })
		for i, b := range layer {
			b.node.X = htmlMargin + i*(htmlBoxW+htmlGapX)
			b.node.Y = htmlMargin + li*(htmlBoxH+htmlGapY)
		}
		if w := len(layer)*(htmlBoxW+htmlGapX) - htmlGapX; w > width {
			width = w
		}
	}
	page := &htmlPage{Width: width + 2*htmlMargin, Height: len(layers)*(htmlBoxH+htmlGapY) - htmlGapY + 2*htmlMargin, Profiled: prof != nil}
	// Time per node: a bar along each box's bottom, its length and
	// redness the node's share of the slowest node's time.
	slowest := 0.0
	for _, b := range boxes {
		slowest = max(slowest, b.ms)
	}
	for _, b := range boxes {
		if b.ms > 0 && slowest > 0 {
			f := b.ms / slowest
			b.node.HeatW = max(2, int(f*float64(htmlBoxW-8)))
			g := int(255 * (1 - f))
			b.node.HeatFill = fmt.Sprintf("#ff%02x%02x", g, g)
		}
	}
	colour := map[string]string{partition.HostTarget: htmlHostColour}
	count := map[string]int{}
	var order []string
	for _, b := range boxes {
		if t := b.node.Target; t != "" {
			if _, ok := colour[t]; !ok {
				colour[t] = htmlPalette[(len(colour)-1)%len(htmlPalette)]
			}
			if count[t] == 0 {
				order = append(order, t)
			}
			count[t]++
			b.node.Fill = colour[t]
		}
		page.Nodes = append(page.Nodes, b.node)
		page.Details = append(page.Details, b.detail)
		for _, a := range b.args {
			from := boxes[a].node
			x0, y0 := from.X+htmlBoxW/2, from.Y+htmlBoxH
			x1, y1 := b.node.X+htmlBoxW/2, b.node.Y
			mid := (y0 + y1) / 2
			page.Edges = append(page.Edges, htmlEdge{Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x0, y0, x0, mid, x1, mid, x1, y1-2)})
		}
	}
	regions := make([]string, len(boxes))
	for i, b := range boxes {
		regions[i] = b.detail.Region
	}
	page.Regions = regionOutlines(page.Nodes, regions)
	// Host fallback, grouped by reason (a node with several reasons is
	// under each), most nodes first.
	byWhy := map[string]*htmlReason{}
	for _, b := range boxes {
		r := b.report
		if r == nil || r.Target != partition.HostTarget {
			continue
		}
		reasons := r.Why
		if len(reasons) == 0 {
			reasons = []string{"no target takes it"}
		}
		for _, w := range reasons {
			g := byWhy[w]
			if g == nil {
				g = &htmlReason{Why: w}
				byWhy[w] = g
			}
			name := b.detail.ONNX
			if name == "" {
				name = b.detail.Name
			}
			g.Nodes = append(g.Nodes, htmlLink{ID: b.node.ID, Name: name + " (" + b.detail.Op + ")"})
		}
	}
	for _, g := range byWhy {
		page.Reasons = append(page.Reasons, *g)
	}
	sort.Slice(page.Reasons, func(i, j int) bool {
		a, b := page.Reasons[i], page.Reasons[j]
		if len(a.Nodes) != len(b.Nodes) {
			return len(a.Nodes) > len(b.Nodes)
		}
		return a.Why < b.Why
	})
	// The host comes last.
	sort.SliceStable(order, func(i, j int) bool { return order[i] != partition.HostTarget && order[j] == partition.HostTarget })
	for _, t := range order {
		l := htmlLegend{Target: t, Fill: colour[t], Count: count[t]}
		if rep != nil {
			l.Regions = rep.Regions[t]
		}
		page.Legend = append(page.Legend, l)
	}
	return page
}

// regionOutlines returns the box around the nodes of each region (by
// name; "" is none), in order of first appearance, drawn a few pixels
// outside the nodes in a darker shade of the first node's fill.
func regionOutlines(nodes []htmlNode, regions []string) []htmlRegion {
	const pad = 7
	var out []htmlRegion
	at := map[string]int{}
	for i, n := range nodes {
		name := regions[i]
		if name == "" {
			continue
		}
		k, ok := at[name]
		if !ok {
			k = len(out)
			at[name] = k
			out = append(out, htmlRegion{Label: name, X: n.X - pad, Y: n.Y - pad, W: htmlBoxW + 2*pad, H: htmlBoxH + 2*pad, Stroke: darker(n.Fill)})
			continue
		}
		r := &out[k]
		x1, y1 := max(r.X+r.W, n.X+htmlBoxW+pad), max(r.Y+r.H, n.Y+htmlBoxH+pad)
		r.X, r.Y = min(r.X, n.X-pad), min(r.Y, n.Y-pad)
		r.W, r.H = x1-r.X, y1-r.Y
	}
	return out
}

// darker returns a #rrggbb colour at 55 % of its brightness (grey for
// anything else).
func darker(c string) string {
	var r, g, b int
	if _, err := fmt.Sscanf(c, "#%02x%02x%02x", &r, &g, &b); err != nil {
		return "#666666"
	}
	return fmt.Sprintf("#%02x%02x%02x", r*55/100, g*55/100, b*55/100)
}

type reportKey struct{ node, op string }

// reportByNode indexes the report's entries by ONNX node and operator (the
// first entry of each pair).
func reportByNode(rep *partition.Report) map[reportKey]partition.NodeReport {
	out := map[reportKey]partition.NodeReport{}
	if rep == nil {
		return out
	}
	for _, n := range rep.Nodes {
		k := reportKey{n.Node, n.Op}
		if _, ok := out[k]; !ok {
			out[k] = n
		}
	}
	return out
}

// readProfile reads the output of kiln bench --profile N --json and
// returns the time per run of each ONNX node, in ms: a kernel's time is
// shared evenly by the nodes it computes, and an external region's is
// taken from its own steps when it lists them.
func readProfile(path string) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxProfileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	if len(data) > maxProfileBytes {
		return nil, fmt.Errorf("--profile %s: larger than %d MiB, not a profile", path, maxProfileBytes>>20)
	}
	var rep BenchReport
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("--profile %s: not the JSON of kiln bench --json: %w", path, err)
	}
	if len(rep.Profile) == 0 {
		return nil, fmt.Errorf("--profile %s: it has no profile (run kiln bench with --profile N --json)", path)
	}
	out := map[string]float64{}
	var walk func(ks []KernelTime)
	walk = func(ks []KernelTime) {
		for _, k := range ks {
			if len(k.Inner) > 0 {
				walk(k.Inner)
				continue
			}
			if len(k.Sources) == 0 || !(k.MeanMs >= 0) {
				continue
			}
			for _, s := range k.Sources {
				out[s] += k.MeanMs / float64(len(k.Sources))
			}
		}
	}
	walk(rep.Profile)
	return out, nil
}

// maxProfileBytes bounds the profile file inspect reads.
const maxProfileBytes = 64 << 20
