package cli

import (
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"

	"github.com/kiln-dev/kiln/internal/escape"

	"github.com/kiln-dev/kiln/partition"
)

// The HTML view (kiln inspect --format html, kiln compile --report-html) is
// one self-contained page: the model's graph drawn as an SVG with a layered
// layout computed here (no script, no external file), nodes coloured by the
// target partitioning gave them, followed by the partition report's tables.

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

// htmlPage is what the page template draws.
type htmlPage struct {
	Title         string
	Width, Height int
	Nodes         []htmlNode
	Edges         []htmlEdge
	Legend        []htmlLegend
	Report        *partition.Report
	Host          []partition.NodeReport
}

// writeHTML prints the model's main function and, when rep is non-nil, the
// partition report as a self-contained HTML page; info's nodes carry
// their targets (describe with a devOf). title heads the page.
func writeHTML(w io.Writer, title string, info *ModelInfo, rep *partition.Report) error {
	page := layoutHTML(info, rep)
	page.Title = title
	page.Report = rep
	if rep != nil {
		for _, n := range rep.Nodes {
			if n.Target == partition.HostTarget {
				page.Host = append(page.Host, n)
			}
		}
	}
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
// arguments, and routes every edge as a curve.
func layoutHTML(info *ModelInfo, rep *partition.Report) *htmlPage {
	type box struct {
		node  htmlNode
		layer int
		order float64
		args  []int
		ms    float64 // measured time on its target, or 0
	}
	var boxes []*box
	index := map[string]int{}
	add := func(name string, b *box) {
		index[name] = len(boxes)
		boxes = append(boxes, b)
	}
	for _, in := range info.Inputs {
		add("%"+in.Name, &box{node: htmlNode{Label: in.Name, Sub: in.Type, Oval: true, Title: "input " + in.Name + ": " + in.Type}})
	}
	why := reportByNode(rep)
	for _, n := range info.Nodes {
		b := &box{node: htmlNode{Label: n.Op, Sub: n.Type}}
		consts := 0
		for _, a := range n.Args {
			if i, ok := index[a]; ok {
				b.args = append(b.args, i)
			} else if strings.HasPrefix(a, "constant(") {
				consts++
			}
		}
		if consts > 0 {
			b.node.Label += fmt.Sprintf(" (+%d const)", consts)
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
			tip = append(tip, "target "+n.Device)
		}
		if r, ok := why[reportKey{n.Span, n.Op}]; ok {
			if r.Composite != "" {
				tip = append(tip, "composite "+r.Composite)
			}
			if c := r.Costs(); c != "" {
				tip = append(tip, "measured: "+c)
				b.ms = r.CostMs[r.Target]
			}
			if len(r.Why) > 0 {
				tip = append(tip, "why: "+strings.Join(r.Why, "; "))
			}
		}
		b.node.Title = strings.Join(tip, "\n")
		add(n.Name, b)
	}
	for i, r := range info.Result {
		name := "output"
		if i < len(info.Outputs) {
			name = info.Outputs[i].Name
		}
		b := &box{node: htmlNode{Label: name, Oval: true, Dashed: true, Title: "output " + name}}
		if j, ok := index[r]; ok {
			b.args = []int{j}
		}
		add("out:"+name, b)
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
	page := &htmlPage{Width: width + 2*htmlMargin, Height: len(layers)*(htmlBoxH+htmlGapY) - htmlGapY + 2*htmlMargin}
	// Measured times: a bar along each box's bottom, its length and
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
		for _, a := range b.args {
			from := boxes[a].node
			x0, y0 := from.X+htmlBoxW/2, from.Y+htmlBoxH
			x1, y1 := b.node.X+htmlBoxW/2, b.node.Y
			mid := (y0 + y1) / 2
			page.Edges = append(page.Edges, htmlEdge{Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x0, y0, x0, mid, x1, mid, x1, y1-2)})
		}
	}
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

var htmlTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"add":   func(a, b int) int { return a + b },
	"join":  func(s []string) string { return strings.Join(s, "; ") },
	"where": partition.NodeReport.Where,
	"costs": partition.NodeReport.Costs,
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<title>kiln: {{.Title}}</title>
<style>
body { font-family: Helvetica, Arial, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; font-size: 0.85em; }
td, th { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; border: 1px solid #888; margin-right: 0.3em; vertical-align: middle; }
.graph { overflow: auto; border: 1px solid #ddd; max-height: 80vh; }
svg text { font-size: 11px; }
</style>
</head>
<body>
<h1>kiln: {{.Title}}</h1>
{{- if .Legend}}
<p>{{range .Legend}}<span class="swatch" style="background:{{.Fill}}"></span>{{.Target}}: {{.Count}} node{{if ne .Count 1}}s{{end}}{{if .Regions}} in {{.Regions}} region{{if ne .Regions 1}}s{{end}}{{end}}&#160;&#160; {{end}}</p>
{{- end}}
<div class="graph">
<svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0 0 L10 5 L0 10 z" fill="#777"/></marker></defs>
<g fill="none" stroke="#999" stroke-width="1.2">
{{- range .Edges}}
<path d="{{.Path}}" marker-end="url(#arrow)"/>
{{- end}}
</g>
{{- range .Nodes}}
<g class="node"><title>{{.Title}}</title>
{{- if .Oval}}
<ellipse cx="{{add .X 84}}" cy="{{add .Y 23}}" rx="84" ry="23" fill="{{if .Fill}}{{.Fill}}{{else}}#ffffff{{end}}" stroke="#555"{{if .Dashed}} stroke-dasharray="4 3"{{end}}/>
{{- else}}
<rect x="{{.X}}" y="{{.Y}}" width="168" height="46" rx="4" fill="{{if .Fill}}{{.Fill}}{{else}}#ffffff{{end}}" stroke="#555"/>
{{- end}}
{{- if .HeatW}}
<rect x="{{add .X 4}}" y="{{add .Y 39}}" width="{{.HeatW}}" height="5" fill="{{.HeatFill}}" stroke="#a00" stroke-width="0.5"/>
{{- end}}
<text x="{{add .X 84}}" y="{{add .Y 19}}" text-anchor="middle" font-weight="bold">{{.Label}}</text>
{{- if .Sub}}
<text x="{{add .X 84}}" y="{{add .Y 35}}" text-anchor="middle" fill="#444">{{.Sub}}</text>
{{- end}}
</g>
{{- end}}
</svg>
</div>
{{- with .Report}}
<h2>Partition report</h2>
{{- with .Measured}}
<p>{{.Summary}}. The bar under each node is its measured time on its target, as a share of the slowest node's.</p>
{{- end}}
<table>
<tr><th>target</th><th>nodes</th><th>regions</th></tr>
{{- range $.Legend}}
<tr><td><span class="swatch" style="background:{{.Fill}}"></span>{{.Target}}</td><td>{{index $.Report.Counts .Target}}</td><td>{{index $.Report.Regions .Target}}</td></tr>
{{- end}}
</table>
{{- if $.Host}}
<h2>Left on the host, and why</h2>
<table>
<tr><th>ONNX node</th><th>op</th><th>why</th></tr>
{{- range $.Host}}
<tr><td>{{.Node}}</td><td>{{.Op}}</td><td>{{join .Why}}</td></tr>
{{- end}}
</table>
{{- end}}
<h2>Every node</h2>
<table>
<tr><th>ONNX node</th><th>op</th><th>target</th><th>measured</th><th>notes</th></tr>
{{- range .Nodes}}
<tr><td>{{.Node}}</td><td>{{.Op}}</td><td>{{where .}}</td><td>{{costs .}}</td><td>{{join .Why}}</td></tr>
{{- end}}
</table>
{{- end}}
</body>
</html>
`))
