package cli

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/backend/dnnl"
	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/partition"
	krt "github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/tensor"
)

func TestDeviceFlagErrors(t *testing.T) {
	lenet := filepath.Join(sharedRoot(t), "models", "lenet")
	placeFile := filepath.Join(t.TempDir(), "place.txt")
	if err := os.WriteFile(placeFile, []byte("# rules\nop:nn.conv2d = little:1\nnode:/3/Conv big\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "x.kiln")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-t", "c", "--target-label", "little"}, `--target-label "little"`},
		{[]string{"-t", "c", "--target-label", "little=cuda"}, `unknown target kind "cuda"`},
		{[]string{"-t", "c", "--target-label", "9x=c"}, "9x"},
		{[]string{"-t", "c", "--target-label", "l=c", "--target-label", "l=c"}, `target label "l" given twice`},
		{[]string{"-t", "c", "--place", "op:nn.conv2d = nowhere:1"}, `unknown label "nowhere"`},
		{[]string{"-t", "c", "--place", "op:nn.frob = cpu"}, `unknown operator "nn.frob"`},
		{[]string{"-t", "c", "--place", "node:/nope = cpu:1"}, `no node named "/nope"`},
		{[]string{"-t", "c", "--place", "op:nn.relu = cpu", "--place", "op:nn.relu = cpu:1"}, "op:nn.relu is placed twice"},
		{[]string{"-t", "c", "--target-label", "little=c", "--placement", placeFile}, "place.txt:3:1: want `node:NAME = DEVICE`"},
		{[]string{"-t", "c", "--placement", filepath.Join(t.TempDir(), "missing.txt")}, "--placement"},
		{[]string{"-t", "c", "--target-label", "little=c -mcpu=x86-64", "--place", "op:nn.relu = little"}, "not among the compilation targets"},
	}
	for _, c := range cases {
		args := append([]string{"compile", lenet, "-o", out}, c.args...)
		code, _, stderr := kiln(args...)
		if code != 1 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("kiln %v: exit %d, stderr %q; want exit 1 and one line mentioning %q", c.args, code, stderr, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Fatalf("kiln %v left %s", c.args, out)
		}
	}
}

// TestCompileWithPlacement splits lenet between cpu:0 and cpu:1 from the
// command line, runs the artifact and compares with PyTorch's outputs.
func TestCompileWithPlacement(t *testing.T) {
	testenv.Cgo(t)
	lenet := filepath.Join(sharedRoot(t), "models", "lenet")
	out := filepath.Join(t.TempDir(), "lenet.kiln")
	placeFile := filepath.Join(t.TempDir(), "place.txt")
	if err := os.WriteFile(placeFile, []byte("node:/3/Conv = little:1  # second conv block\nnode:/4/Relu = little:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := kiln("compile", lenet, "-t", "c -mcpu=x86-64", "-o", out,
		"--target-label", "big=c -mcpu=x86-64", "--target-label", `little="c -mcpu=x86-64"`,
		"--placement", placeFile, "--place", "op:nn.dense = big")
	if code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	var md driver.Metadata
	data, err := os.ReadFile(filepath.Join(out, "metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &md); err != nil {
		t.Fatal(err)
	}
	if strings.Join(md.Devices, ",") != "cpu:0,cpu:1" {
		t.Errorf("devices %v (compile said %s)", md.Devices, stdout)
	}
	runLeNet(t, lenet, out)
}

// TestRunAndBenchWithPlacement puts lenet's convolutions on a second CPU
// device from `kiln run --engine compiled` and `kiln bench`: run's outputs
// match PyTorch's, and bench compiles more kernels than without the
// placement (the convolutions no longer fuse with their neighbours on
// cpu:0). A bad label fails before compiling.
func TestRunAndBenchWithPlacement(t *testing.T) {
	testenv.Cgo(t)
	lenet := filepath.Join(sharedRoot(t), "models", "lenet")
	place := []string{"--target-label", "big=c", "--target-label", "little=c", "--place", "op:nn.conv2d = little:1"}

	runLeNet(t, lenet, append([]string{lenet, "--engine", "compiled"}, place...)...)

	bench := func(extra ...string) BenchReport {
		t.Helper()
		code, stdout, stderr := kiln(append([]string{"bench", lenet, "--runs", "2", "--json"}, extra...)...)
		if code != 0 {
			t.Fatalf("bench %v: exit %d: %s", extra, code, stderr)
		}
		var r BenchReport
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("bench %v: %v\n%s", extra, err, stdout)
		}
		return r
	}
	plain, placed := bench(), bench(place...)
	if placed.Runs != 2 || placed.MedianMs <= 0 || placed.Kernels <= plain.Kernels {
		t.Errorf("bench with placement: %+v; without: %d kernels", placed, plain.Kernels)
	}

	for _, cmd := range [][]string{
		{"run", lenet, "--engine", "compiled", "--input", filepath.Join(lenet, "test_data_set_0", "input_0.pb")},
		{"bench", lenet, "--runs", "1"},
	} {
		code, _, stderr := kiln(append(cmd, "--place", "op:nn.conv2d = little:1")...)
		if code != 1 || !strings.Contains(stderr, `unknown label "little"`) || strings.Contains(stderr, "  link  ") {
			t.Errorf("%s with an unknown label: exit %d, %q", cmd[0], code, stderr)
		}
	}
}

func TestInspectShowsDevices(t *testing.T) {
	lenet := filepath.Join(sharedRoot(t), "models", "lenet")
	args := []string{"inspect", lenet, "-t", "c", "--target-label", "little=c", "--place", "node:/3/Conv = little:1"}
	code, stdout, stderr := kiln(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"device_copy(%3, dst_device_id=1", "/* cpu:1 c */", "nn.relu(%7) /* Tensor[(1, 16, 10, 10), float32] */ /* cpu:0 c */"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, stderr = kiln(append(args, "--format", "json")...)
	if code != 0 {
		t.Fatalf("json: exit %d: %s", code, stderr)
	}
	var info ModelInfo
	if err := json.Unmarshal([]byte(stdout), &info); err != nil {
		t.Fatal(err)
	}
	devs := map[string]int{}
	for _, n := range info.Nodes {
		devs[n.Op+"@"+n.Device]++
	}
	if devs["device_copy@cpu:1 c"] != 1 || devs["device_copy@cpu:0 c"] != 1 || devs["nn.conv2d@cpu:1 c"] != 1 || devs["nn.conv2d@cpu:0 c"] != 1 {
		t.Errorf("devices per op: %v", devs)
	}
	code, stdout, _ = kiln(append(args, "--format", "dot")...)
	if code != 0 || !strings.Contains(stdout, `\n@cpu:1"`) || !strings.Contains(stdout, "fillcolor") {
		t.Errorf("dot: exit %d:\n%s", code, stdout)
	}
	// Without targets or placements nothing is planned.
	if _, stdout, _ := kiln("inspect", lenet); strings.Contains(stdout, "cpu:0") {
		t.Errorf("plain inspect shows devices")
	}
}

// sharedRoot is ../shared beside the repository root.
func sharedRoot(t *testing.T) string {
	t.Helper()
	return testenv.Shared(t)
}

// TestCompileCcompilerReport compiles the MLP with the ccompiler backend:
// the partition report is printed (summary; per node with -v; JSON with
// --report-json) and the artifact's outputs match PyTorch.
func TestCompileCcompilerReport(t *testing.T) {
	testenv.Cgo(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "mlp.kiln")
	rj := filepath.Join(dir, "report.json")
	// Greedy: the report must show ccompiler's regions (measured
	// partitioning may find the host faster on this small model).
	code, stdout, stderr := kiln("compile", filepath.Join(mlpDir, "model.onnx"), "-t", "ccompiler, c -mcpu=x86-64", "--partition", "greedy", "-o", out, "-v", "--report-json", rj)
	if code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "partition: ccompiler 3 (3 regions), host 6") || !strings.Contains(stdout, "ccompiler #0") || !strings.Contains(stdout, "ccompiler: nn.relu is not supported (add, subtract, multiply only)") {
		t.Errorf("compile output lacks the partition report:\n%s", stdout)
	}
	data, err := os.ReadFile(rj)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Counts map[string]int `json:"counts"`
	}
	if err := json.Unmarshal(data, &rep); err != nil || rep.Counts["ccompiler"] != 3 {
		t.Errorf("report JSON %v: %s", err, data)
	}
	outDir := t.TempDir()
	code, _, stderr = kiln("run", out, "--input", filepath.Join(mlpDir, "test_data_set_0", "input_0.pb"), "--output-dir", outDir, "--output-format", "pb")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	got, _, err := ReadTensor(filepath.Join(outDir, "output.pb"))
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := ReadTensor(filepath.Join(mlpDir, "test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.AllClose(got, want, 1e-3, 1e-4); err != nil {
		t.Error(err)
	}
	// Full offload required: the relus stay on the host, so it fails.
	code, _, stderr = kiln("compile", filepath.Join(mlpDir, "model.onnx"), "-t", "ccompiler, c", "-o", filepath.Join(dir, "x.kiln"), "--require-offload")
	if code != 1 || !strings.Contains(stderr, "full offload required") {
		t.Errorf("--require-offload: exit %d, %q", code, stderr)
	}
}

func TestInspectShowsPartition(t *testing.T) {
	args := []string{"inspect", filepath.Join(mlpDir, "model.onnx"), "-t", "ccompiler, c"}
	code, stdout, stderr := kiln(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"partition: ccompiler 3 (3 regions), host 6", "/1/Relu     nn.relu     host          ccompiler: nn.relu is not supported", "/* ccompiler #1 */"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, stderr = kiln(append(args, "--format", "json")...)
	if code != 0 {
		t.Fatalf("json: exit %d: %s", code, stderr)
	}
	var info ModelInfo
	if err := json.Unmarshal([]byte(stdout), &info); err != nil {
		t.Fatal(err)
	}
	if info.Partition == nil || info.Partition.Counts["ccompiler"] != 3 || info.Nodes[1].Device != "ccompiler #0" || info.Nodes[0].Device != "host" {
		t.Errorf("json partition %+v, nodes %+v", info.Partition, info.Nodes[:2])
	}
	code, stdout, _ = kiln(append(args, "--format", "dot")...)
	if code != 0 || !strings.Contains(stdout, `\n@ccompiler"`) {
		t.Errorf("dot: exit %d:\n%s", code, stdout)
	}
}

// TestHTMLReport checks inspect --format html and compile --report-html:
// one well-formed, self-contained page whose SVG has a box per input, node
// and output, filled with the colour of its target, with the regions
// outlined, and whose tables say why each host node stayed there. The
// page's script is tested in a browser (TestHTMLViewInBrowser).
func TestHTMLReport(t *testing.T) {
	model := filepath.Join(mlpDir, "model.onnx")
	code, page, stderr := kiln("inspect", model, "-t", "ccompiler, c", "--format", "html")
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "report.html")
	// Greedy: the page must show ccompiler's regions (measured
	// partitioning may find the host faster on this small model).
	code, _, stderr = kiln("compile", model, "-t", "ccompiler, c", "--partition", "greedy", "-o", filepath.Join(dir, "m.kiln"), "--report-html", file)
	if code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for name, page := range map[string]string{"inspect": page, "compile": string(b)} {
		checkHTMLReport(t, name, page)
	}
}

func checkHTMLReport(t *testing.T, name, page string) {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(page))
	fills := map[string]int{}
	nodes := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed: %v", name, err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		for _, a := range se.Attr {
			if (a.Name.Local == "src" || a.Name.Local == "href") && !strings.HasPrefix(a.Value, "#") {
				t.Errorf("%s: refers to another file: <%s %s=%q>", name, se.Name.Local, a.Name.Local, a.Value)
			}
			if a.Name.Local == "class" && a.Value == "node" {
				nodes++
			}
			if se.Name.Local == "rect" && a.Name.Local == "fill" {
				fills[a.Value]++
			}
		}
	}
	// The MLP: one input, nine calls (3 dense, 3 add, 2 relu, softmax), one
	// output; ccompiler takes the three adds.
	if nodes != 11 {
		t.Errorf("%s: %d node boxes, want 11", name, nodes)
	}
	if fills[htmlPalette[0]] != 3 || fills[htmlHostColour] != 6 {
		t.Errorf("%s: fills %v, want 3 %s (ccompiler) and 6 %s (host)", name, fills, htmlPalette[0], htmlHostColour)
	}
	for _, want := range []string{
		// The host fallback grouped by reason, each node a link that selects it.
		`<tr><td>ccompiler: nn.relu is not supported (add, subtract, multiply only)</td><td>2</td><td><a href="#node=3" data-node="3">/1/Relu (nn.relu)</a>, <a href="#node=6" data-node="6">/3/Relu (nn.relu)</a></td></tr>`,
		"<td>ccompiler #1</td>",
		// The regions outlined.
		`<text x="`, `>ccompiler region 1</text>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("%s: page lacks %q", name, want)
		}
	}
}

// TestPlacementBeatsPartitioning: a placement rule that puts a node on
// the host keeps it out of dnnl's regions (the report says why), one that
// puts a node on dnnl offloads it whole (the convolution with its bias
// and relu, as one composite), one that puts a node dnnl does not take
// on dnnl fails naming the node and the reason, a composite straddling
// two placements is split with a warning, and the placed artifacts match
// PyTorch's outputs.
func TestPlacementBeatsPartitioning(t *testing.T) {
	testenv.Cgo(t)
	if !dnnl.Available {
		t.Skip("no oneDNN in this build")
	}
	lenet := filepath.Join(sharedRoot(t), "models", "lenet")
	reportFor := func(tl string, places ...string) *partition.Report {
		t.Helper()
		dir := t.TempDir()
		rj := filepath.Join(dir, "report.json")
		art := filepath.Join(dir, "a")
		args := []string{"compile", lenet, "-t", tl, "--partition", "greedy", "--report-json", rj, "-o", art}
		for _, p := range places {
			args = append(args, "--place", p)
		}
		code, _, stderr := kiln(args...)
		if code != 0 {
			t.Fatalf("--place %q: exit %d: %s", places, code, stderr)
		}
		runLeNet(t, lenet, art)
		data, err := os.ReadFile(rj)
		if err != nil {
			t.Fatal(err)
		}
		var rep partition.Report
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatal(err)
		}
		return &rep
	}
	report := func(place string) *partition.Report { return reportFor("dnnl, c", place) }
	rep := report("node:/3/Conv = c")
	for _, n := range rep.Nodes {
		if n.Node == "/3/Conv" && (n.Target != partition.HostTarget || !strings.Contains(strings.Join(n.Why, ";"), "by a placement rule")) {
			t.Errorf("placed on the host: %s %s went to %s (%v)", n.Node, n.Op, n.Target, n.Why)
		}
		if n.Node == "/0/Conv" && n.Target != "dnnl" {
			t.Errorf("unplaced %s %s went to %s", n.Node, n.Op, n.Target)
		}
	}
	rep = report("node:/3/Conv = dnnl")
	for _, n := range rep.Nodes {
		if n.Node == "/3/Conv" && (n.Target != "dnnl" || n.Composite != "dnnl.conv2d_bias_relu") {
			t.Errorf("placed on dnnl: %s %s went to %s in %q", n.Node, n.Op, n.Target, n.Composite)
		}
	}
	// A composite whose operators are placed on two targets (dnnl's dense
	// with its bias add, the add placed on ccompiler) is split into its
	// operators, each going where it is placed, and a warning says so.
	rep = reportFor("dnnl, ccompiler, c", "op:nn.dense = dnnl", "op:add = ccompiler")
	for _, n := range rep.Nodes {
		if (n.Op == "nn.dense" && n.Target != "dnnl") || (n.Op == "add" && n.Target != "ccompiler") {
			t.Errorf("straddling placements: %s %s went to %s in %q", n.Node, n.Op, n.Target, n.Composite)
		}
	}
	if w := strings.Join(rep.Warnings, "\n"); !strings.Contains(w, `composite dnnl.dense_bias_relu straddles placements (/7/Gemm (nn.dense) on "dnnl", /7/Gemm (add) on "ccompiler"): split into its operators`) {
		t.Errorf("no warning for the split composite: %s", w)
	}
	// kiln inspect shows the plan compile uses.
	if code, stdout, stderr := kiln("inspect", lenet, "-t", "dnnl, c", "--place", "node:/3/Conv = c"); code != 0 ||
		!regexp.MustCompile(`/3/Conv +nn.conv2d +host +placed on "c" \(c\) by a placement rule`).MatchString(stdout) {
		t.Errorf("inspect --place: exit %d, %s\n%s", code, stderr, stdout)
	}
	code, _, stderr := kiln("compile", lenet, "-t", "dnnl, c", "--partition", "greedy", "--place", "node:/6/Flatten = dnnl", "-o", filepath.Join(t.TempDir(), "b"))
	if code != 1 || !strings.Contains(stderr, `/6/Flatten (reshape) is placed on "dnnl" (dnnl), which does not take it: dnnl: reshape is not supported`) {
		t.Errorf("placing a reshape on dnnl: exit %d, %s", code, stderr)
	}
}

// runLeNet runs `kiln run ARGS` (a model or artifact and its flags) on
// lenet's stored input and compares the output with PyTorch's (rtol
// 1e-3, atol 1e-4).
func runLeNet(t *testing.T, lenet string, args ...string) {
	t.Helper()
	outDir := t.TempDir()
	args = append(append([]string{"run"}, args...), "--input", filepath.Join(lenet, "test_data_set_0", "input_0.pb"), "--output-dir", outDir, "--output-format", "pb")
	if code, _, stderr := kiln(args...); code != 0 {
		t.Fatalf("kiln %v: exit %d: %s", args, code, stderr)
	}
	files, err := filepath.Glob(filepath.Join(outDir, "*.pb"))
	if err != nil || len(files) != 1 {
		t.Fatalf("run wrote %v (%v), want one output", files, err)
	}
	got, _, err := ReadTensor(files[0])
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := ReadTensor(filepath.Join(lenet, "test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.AllClose(got, want, 1e-3, 1e-4); err != nil {
		t.Errorf("kiln %v: the output differs from PyTorch's: %v", args, err)
	}
}

// TestBigLittleCLI is seed 004's big.LITTLE case from the command line:
// two labelled `c` targets in -t, a placement on the label, and kiln run
// and bench with each device pinned to its own core. A bare label means
// the target's own device (big is cpu:1, not cpu:0).
func TestBigLittleCLI(t *testing.T) {
	testenv.Cgo(t)
	lenet := filepath.Join(sharedRoot(t), "models", "lenet")
	art := filepath.Join(t.TempDir(), "a")
	tl := "big=c -opt=3, little=c -opt=2"
	code, _, stderr := kiln("compile", lenet, "-t", tl, "--place", "op:nn.conv2d = big", "-o", art)
	if code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	md, err := os.ReadFile(filepath.Join(art, "metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"target": "big=c, little=c -opt=2"`, `"cpu:1"`} {
		if !strings.Contains(string(md), want) {
			t.Errorf("metadata.json lacks %s:\n%s", want, md)
		}
	}
	runLeNet(t, lenet, art)
	avail, err := krt.AvailableCores()
	if err != nil || len(avail) < 2 {
		t.Logf("cores %v (%v): --devices is not exercised", avail, err)
		return
	}
	c0, c1 := strconv.Itoa(avail[0]), strconv.Itoa(avail[1])
	cores := "cpu:0=" + c0 + ",cpu:1=" + c1
	code, _, stderr = kiln("run", "--devices", "cpu:0="+c0+",cpu:1="+c0, art)
	if code == 0 || !strings.Contains(stderr, "core "+c0+" is in both cpu:0 and cpu:1") {
		t.Errorf("a core in two devices: exit %d: %s", code, stderr)
	}
	runLeNet(t, lenet, "--devices", cores, art)
	code, stdout, stderr := kiln("bench", "--devices", cores, "--runs", "2", "--profile", "20", art)
	if code != 0 {
		t.Fatalf("bench --devices: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "conv2d") || !strings.Contains(stdout, "on cpu:1 (cores "+c1+")") || !strings.Contains(stdout, "on cpu:0 (cores "+c0+")") {
		t.Errorf("the profile does not say which cores ran what:\n%s", stdout)
	}
	for _, line := range strings.Split(stdout, "\n") {
		if strings.Contains(line, "conv2d") && !strings.Contains(line, "on cpu:1") {
			t.Errorf("a convolution not on big's device: %s", line)
		}
	}
	code, _, stderr = kiln("bench", "--devices", "cpu:7=0", art)
	if code == 0 || !strings.Contains(stderr, "cpu:7 is not a device of this program") {
		t.Errorf("an unknown device: exit %d: %s", code, stderr)
	}
}
