package cli

import (
	"html/template"
	"strings"

	"github.com/kiln-dev/kiln/partition"
)

// htmlTemplate is the page of the HTML view (see html.go). Everything a
// model names reaches the page through html/template, which escapes it
// for its context (text, attribute, or the script's JSON data), and the
// script sets it only as text (textContent), never as markup.
var htmlTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"add":   func(a, b int) int { return a + b },
	"sub":   func(a, b int) int { return a - b },
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
.graph { overflow: auto; border: 1px solid #ddd; height: 75vh; position: relative; cursor: grab; }
.graph.live { overflow: hidden; }
.tools { margin: 0.5em 0; display: flex; gap: 0.5em; align-items: center; }
.tools input { width: 22em; padding: 0.2em; }
svg text { font-size: 11px; pointer-events: none; }
.node { cursor: pointer; }
.node.match rect, .node.match ellipse { stroke: #e6550d; stroke-width: 3; }
.node.sel rect, .node.sel ellipse { stroke: #08519c; stroke-width: 4; }
.region text { font-size: 12px; font-weight: bold; }
#panel { position: fixed; right: 1.5em; top: 1.5em; width: 24em; max-height: 85vh; overflow: auto; background: #fff; border: 1px solid #888; box-shadow: 0 2px 8px #0003; padding: 0.6em 0.9em; font-size: 0.85em; }
#panel[hidden] { display: none; }
#panel h3 { margin: 0 0 0.4em 0; font-size: 1.05em; word-break: break-all; }
#panel dt { font-weight: bold; margin-top: 0.4em; }
#panel dd { margin: 0 0 0 0.8em; word-break: break-all; }
#panel button { float: right; }
</style>
</head>
<body>
<h1>kiln: {{.Title}}</h1>
{{- if .Legend}}
<p>{{range .Legend}}<span class="swatch" style="background:{{.Fill}}"></span>{{.Target}}: {{.Count}} node{{if ne .Count 1}}s{{end}}{{if .Regions}} in {{.Regions}} region{{if ne .Regions 1}}s{{end}}{{end}}&#160;&#160; {{end}}</p>
{{- end}}
<div class="tools">
<input id="search" type="search" placeholder="search a node, ONNX node, operator or tensor" aria-label="search"/>
<span id="status"></span>
<button id="zoom-in" type="button">+</button><button id="zoom-out" type="button">&#8722;</button><button id="fit" type="button">fit</button>
<span>drag to pan, wheel to zoom, click a node for its details</span>
</div>
<div class="graph" id="graph-box">
<svg id="graph" xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" data-w="{{.Width}}" data-h="{{.Height}}">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0 0 L10 5 L0 10 z" fill="#777"/></marker></defs>
{{- range .Regions}}
<g class="region"><rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" rx="8" fill="none" stroke="{{.Stroke}}" stroke-width="2" stroke-dasharray="7 4"/><text x="{{add .X 4}}" y="{{sub .Y 3}}" fill="{{.Stroke}}">{{.Label}}</text></g>
{{- end}}
<g fill="none" stroke="#999" stroke-width="1.2">
{{- range .Edges}}
<path d="{{.Path}}" marker-end="url(#arrow)"/>
{{- end}}
</g>
{{- range .Nodes}}
<g class="node" id="n{{.ID}}" data-id="{{.ID}}"><title>{{.Title}}</title>
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
<div id="panel" hidden="hidden"><button id="panel-close" type="button">close</button><h3 id="panel-title"></h3><dl id="panel-body"></dl></div>
{{- if .Profiled}}
<p>The bar under each node is its time per run in the profile given, as a share of the slowest node's.</p>
{{- end}}
{{- if .Reasons}}
<h2>Left on the host, by reason</h2>
<table>
<tr><th>reason</th><th>nodes</th><th></th></tr>
{{- range .Reasons}}
<tr><td>{{.Why}}</td><td>{{len .Nodes}}</td><td>{{range $i, $n := .Nodes}}{{if $i}}, {{end}}<a href="#node={{$n.ID}}" data-node="{{$n.ID}}">{{$n.Name}}</a>{{end}}</td></tr>
{{- end}}
</table>
{{- end}}
{{- with .Report}}
<h2>Partition report</h2>
{{- with .Measured}}
<p>{{.Summary}}.{{if not $.Profiled}} The bar under each node is its measured time on its target, as a share of the slowest node's.{{end}}</p>
{{- end}}
<table>
<tr><th>target</th><th>nodes</th><th>regions</th></tr>
{{- range $.Legend}}
<tr><td><span class="swatch" style="background:{{.Fill}}"></span>{{.Target}}</td><td>{{index $.Report.Counts .Target}}</td><td>{{index $.Report.Regions .Target}}</td></tr>
{{- end}}
</table>
<h2>Every node</h2>
<table>
<tr><th>ONNX node</th><th>op</th><th>target</th><th>measured</th><th>notes</th></tr>
{{- range .Nodes}}
<tr><td>{{.Node}}</td><td>{{.Op}}</td><td>{{where .}}</td><td>{{costs .}}</td><td>{{join .Why}}</td></tr>
{{- end}}
</table>
{{- end}}
<script>
// No less-than sign or ampersand in this script: the page stays
// well-formed XML (tests parse it so).
"use strict";
(function () {
  const nodes = {{.Details}};
  const svg = document.getElementById("graph");
  const holder = document.getElementById("graph-box");
  const full = { w: Number(svg.dataset.w), h: Number(svg.dataset.h) };
  let vb = { x: 0, y: 0, w: full.w, h: full.h };
  function setView(x, y, w, h) {
    vb = { x: x, y: y, w: w, h: h };
    svg.setAttribute("viewBox", x + " " + y + " " + w + " " + h);
  }
  function rect() { return svg.getBoundingClientRect(); }
  // The drawing fills the box; the view starts at scale 1, top left.
  holder.classList.add("live");
  svg.setAttribute("width", "100%");
  svg.setAttribute("height", "100%");
  const r0 = rect();
  setView(0, 0, r0.width || 800, r0.height || 600);

  function toGraph(cx, cy) {
    const r = rect();
    return { x: vb.x + (cx - r.left) / r.width * vb.w, y: vb.y + (cy - r.top) / r.height * vb.h };
  }
  function zoom(f, at) {
    const p = at || { x: vb.x + vb.w / 2, y: vb.y + vb.h / 2 };
    setView(p.x - (p.x - vb.x) * f, p.y - (p.y - vb.y) * f, vb.w * f, vb.h * f);
  }
  svg.addEventListener("wheel", function (e) {
    e.preventDefault();
    zoom(e.deltaY > 0 ? 1.15 : 1 / 1.15, toGraph(e.clientX, e.clientY));
  }, { passive: false });
  let drag = null;
  svg.addEventListener("mousedown", function (e) {
    drag = { x: e.clientX, y: e.clientY, vx: vb.x, vy: vb.y, moved: false };
  });
  window.addEventListener("mousemove", function (e) {
    if (!drag) return;
    const r = rect();
    if (Math.abs(e.clientX - drag.x) + Math.abs(e.clientY - drag.y) > 3) drag.moved = true;
    if (drag.moved) setView(drag.vx - (e.clientX - drag.x) / r.width * vb.w, drag.vy - (e.clientY - drag.y) / r.height * vb.h, vb.w, vb.h);
  });
  window.addEventListener("mouseup", function () { setTimeout(function () { drag = null; }, 0); });
  document.getElementById("zoom-in").onclick = function () { zoom(1 / 1.4); };
  document.getElementById("zoom-out").onclick = function () { zoom(1.4); };
  document.getElementById("fit").onclick = function () {
    const r = rect();
    const s = Math.max(full.w / r.width, full.h / r.height);
    setView(0, 0, r.width * s, r.height * s);
  };

  function el(id) { return document.getElementById("n" + id); }
  function centre(id) {
    const b = el(id).getBBox();
    setView(b.x + b.width / 2 - vb.w / 2, b.y + b.height / 2 - vb.h / 2, vb.w, vb.h);
  }
  const panel = document.getElementById("panel");
  const body = document.getElementById("panel-body");
  function row(term, value) {
    if (value === undefined || value === "" || value === 0) return;
    const dt = document.createElement("dt");
    dt.textContent = term;
    body.appendChild(dt);
    for (const v of [].concat(value)) {
      const dd = document.createElement("dd");
      dd.textContent = v;
      body.appendChild(dd);
    }
  }
  function select(id) {
    const d = nodes[id];
    if (!d) return;
    for (const s of document.querySelectorAll(".node.sel")) s.classList.remove("sel");
    el(id).classList.add("sel");
    document.getElementById("panel-title").textContent = d.kind === "node" ? d.name + " = " + d.op : d.kind + " " + d.name;
    body.textContent = "";
    row("ONNX node", d.onnx);
    row("type", d.type);
    row("target", d.target);
    row("region", d.region);
    row("composite", d.composite);
    row("attributes", Object.keys(d.attrs || {}).sort().map(function (k) { return k + " = " + d.attrs[k]; }));
    row(d.kind === "output" ? "value" : "inputs", d.args);
    row("why", d.why);
    row("measured", d.measured);
    if (d.profile_ms) row("profiled", d.profile_ms.toFixed(3) + " ms per run");
    panel.hidden = false;
  }
  document.getElementById("panel-close").onclick = function () {
    panel.hidden = true;
    for (const s of document.querySelectorAll(".node.sel")) s.classList.remove("sel");
  };
  for (const g of document.querySelectorAll(".node")) {
    g.addEventListener("click", function () {
      if (drag ? drag.moved : false) return;
      select(Number(g.dataset.id));
    });
  }

  const input = document.getElementById("search");
  const status = document.getElementById("status");
  let matches = [], at = -1;
  function search(q) {
    q = q.trim().toLowerCase();
    for (const m of document.querySelectorAll(".node.match")) m.classList.remove("match");
    matches = [];
    at = -1;
    if (q !== "") {
      nodes.forEach(function (d, i) { if (d.search.indexOf(q) >= 0) matches.push(i); });
      for (const i of matches) el(i).classList.add("match");
    }
    status.textContent = q === "" ? "" : matches.length + " match" + (matches.length === 1 ? "" : "es");
    next();
  }
  function next() {
    if (matches.length === 0) return;
    at = (at + 1) % matches.length;
    centre(matches[at]);
    select(matches[at]);
  }
  input.addEventListener("input", function () { search(input.value); });
  input.addEventListener("keydown", function (e) { if (e.key === "Enter") next(); });
  function show(id) {
    holder.scrollIntoView();
    centre(id);
    select(id);
  }
  for (const a of document.querySelectorAll("a[data-node]")) {
    a.addEventListener("click", function (e) {
      e.preventDefault();
      show(Number(a.dataset.node));
    });
  }
  // An address may name a search (#search=conv) or a node (#node=12),
  // when the page opens and when the fragment changes.
  function fromAddress() {
    const h = decodeURIComponent(location.hash.slice(1));
    if (h.startsWith("search=")) {
      input.value = h.slice(7);
      search(input.value);
    } else if (h.startsWith("node=")) {
      if (nodes[Number(h.slice(5))]) show(Number(h.slice(5)));
    }
  }
  window.addEventListener("hashchange", fromAddress);
  fromAddress();
})();
</script>
</body>
</html>
`))
