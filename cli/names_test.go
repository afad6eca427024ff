package cli

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/tensor"
	"google.golang.org/protobuf/proto"
)

// Hostile strings for every name field of a model: each tries to end a C
// comment or string, expand a Make variable, run a shell command or open
// an HTML tag. Every one of them, if it escaped, would create a file
// named pwned in the working directory.
const (
	hostileInput  = `x */ int pwn = system("touch pwned"); /*`
	hostileInit   = "$(touch pwned)`touch pwned`\\"
	hostileNode   = "<script>alert(1)</script>\"\n\xff\xfe"
	hostileOutput = "`touch pwned`#%s\n??/\r*/"
	hostileDoc    = "*/ #include \"/etc/passwd\"\n$(touch pwned) <script>"
)

// hostileModel is y1 = x + w, y2 = x * w, y3 = relu(y1) with names from
// the hostile set; y1 and y2 are named "a/b" and "a_b", which map to one
// C identifier and one file name.
func hostileModel(t *testing.T) []byte {
	t.Helper()
	f32 := int32(pb.TensorProto_FLOAT)
	vi := func(name string) *pb.ValueInfoProto {
		return &pb.ValueInfoProto{Name: proto.String(name), DocString: proto.String(hostileDoc), Type: &pb.TypeProto{Value: &pb.TypeProto_TensorType{
			TensorType: &pb.TypeProto_Tensor{ElemType: &f32, Shape: &pb.TensorShapeProto{Dim: []*pb.TensorShapeProto_Dimension{
				{Value: &pb.TensorShapeProto_Dimension_DimValue{DimValue: 2}},
				{Value: &pb.TensorShapeProto_Dimension_DimValue{DimValue: 3}}}}}}}}
	}
	m := &pb.ModelProto{
		IrVersion:    proto.Int64(8),
		ProducerName: proto.String(hostileDoc),
		DocString:    proto.String(hostileDoc),
		OpsetImport:  []*pb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}},
		Graph: &pb.GraphProto{
			Name:      proto.String(hostileNode),
			DocString: proto.String(hostileDoc),
			Node: []*pb.NodeProto{
				{Name: proto.String(hostileNode), DocString: proto.String(hostileDoc), OpType: proto.String("Add"), Input: []string{hostileInput, hostileInit}, Output: []string{"a/b"}},
				{Name: proto.String(hostileDoc), OpType: proto.String("Mul"), Input: []string{hostileInput, hostileInit}, Output: []string{"a_b"}},
				{Name: proto.String(hostileOutput), OpType: proto.String("Relu"), Input: []string{"a/b"}, Output: []string{hostileOutput}},
			},
			Initializer: []*pb.TensorProto{{Name: proto.String(hostileInit), DocString: proto.String(hostileDoc), DataType: &f32, Dims: []int64{2, 3},
				FloatData: []float32{1, -2, 3, -4, 5, -6}}},
			Input:  []*pb.ValueInfoProto{vi(hostileInput)},
			Output: []*pb.ValueInfoProto{vi("a/b"), vi("a_b"), vi(hostileOutput)},
		},
	}
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestHostileNames compiles and runs a model whose names hold C, JSON,
// Make, shell and HTML metacharacters through every path that generates
// code — the graph executor's C (-t c), the AOT executor (its program,
// and the exported C project built with make), C-source BYOC (-t
// "ccompiler, c") — and every report format. The builds must succeed,
// every path must give the reference engine's outputs in three distinct
// files, and nothing may run: no file named pwned appears in the working
// directory or beside the model.
func TestHostileNames(t *testing.T) {
	testenv.Cgo(t)
	work := t.TempDir()
	t.Chdir(work)
	modelDir := filepath.Join(work, `m$(touch pwned)'"`)
	if err := os.Mkdir(modelDir, 0o755); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(modelDir, "model.onnx")
	if err := os.WriteFile(model, hostileModel(t), 0o644); err != nil {
		t.Fatal(err)
	}
	x := tensor.FromFloat32s([]int64{2, 3}, []float32{0.5, 1, -1.5, 2, -2.5, 3})
	in := filepath.Join(work, "x.npy")
	if err := tensor.WriteNpyFile(in, x); err != nil {
		t.Fatal(err)
	}
	outputs := func(dir string) []*tensor.Tensor {
		t.Helper()
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if len(names) != 3 {
			t.Fatalf("%s holds %v, want 3 distinct output files", dir, names)
		}
		var ts []*tensor.Tensor
		for _, f := range []string{"a_b.npy", "a_b_2.npy", "_touch_pwned___s_______.npy"} {
			v, err := tensor.ReadNpyFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatalf("%v (files %v)", err, names)
			}
			ts = append(ts, v)
		}
		return ts
	}
	noPwned := func(when string) {
		t.Helper()
		for _, d := range []string{work, modelDir} {
			if _, err := os.Stat(filepath.Join(d, "pwned")); err == nil {
				t.Fatalf("%s: a command from a model name ran (%s/pwned exists)", when, d)
			}
		}
	}
	run := func(what string, args ...string) string {
		t.Helper()
		code, stdout, stderr := kiln(args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", what, code, stderr)
		}
		noPwned(what)
		return stdout
	}

	refDir := filepath.Join(work, "ref")
	run("reference run", "run", model, "--input", in, "--output-dir", refDir)
	want := outputs(refDir)
	if a, b := want[0].Float32s(), want[1].Float32s(); a[0] != 1.5 || b[0] != 0.5 {
		t.Fatalf("reference outputs %v %v: a/b and a_b were mixed up", a, b)
	}
	check := func(what, dir string) {
		t.Helper()
		got := outputs(dir)
		for i := range want {
			if err := tensor.AllClose(got[i], want[i], 0, 0); err != nil {
				t.Errorf("%s: output %d: %v", what, i, err)
			}
		}
	}

	for _, tc := range []struct{ name, targets, executor string }{
		{"graph-c", "c", "graph"},
		{"aot", "c", "aot"},
		{"byoc-ccompiler", "ccompiler, c", "graph"},
	} {
		art := filepath.Join(work, "art, $x 'q' "+tc.name)
		run(tc.name+" compile", "compile", model, "-t", tc.targets, "--executor", tc.executor, "-o", art)
		out := filepath.Join(work, "out-"+tc.name)
		run(tc.name+" run", "run", art, "--input", in, "--output-dir", out)
		check(tc.name, out)
		if tc.executor != "aot" {
			continue
		}
		// The exported project, built by its own Makefile and run.
		proj := filepath.Join(work, "proj $(touch pwned)")
		run("export", "export", art, "--format", "c-project", "-o", proj)
		mk := exec.Command(tool(t, "make"), "-s", "CFLAGS=-O1 -std=c11 -Wall -Wextra -Werror")
		mk.Dir = proj
		if out, err := mk.CombinedOutput(); err != nil {
			t.Fatalf("make: %v\n%s", err, out)
		}
		noPwned("make")
		bins, _ := filepath.Glob(filepath.Join(proj, "kiln_*"))
		var bin string
		for _, b := range bins {
			if st, err := os.Stat(b); err == nil && st.Mode()&0o111 != 0 && !st.IsDir() {
				bin = b
			}
		}
		if bin == "" {
			t.Fatalf("make built no program in %s (%v)", proj, bins)
		}
		raw := filepath.Join(work, "x.bin")
		if err := os.WriteFile(raw, x.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{raw}
		for i := range want {
			args = append(args, filepath.Join(work, "y"+string(rune('0'+i))+".bin"))
		}
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", bin, err, out)
		}
		noPwned("project program")
		for i := range want {
			data, err := os.ReadFile(args[1+i])
			if err != nil || string(data) != string(want[i].Data) {
				t.Errorf("project output %d differs from the reference (%v)", i, err)
			}
		}
		readme, err := os.ReadFile(filepath.Join(proj, "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(readme), "<script>") || !strings.Contains(string(readme), `| a\_b |`) {
			t.Errorf("README.md has unescaped names:\n%s", readme)
		}
	}

	// Reports: JSON and HTML parse; DOT labels stay in their strings.
	var js any
	if err := json.Unmarshal([]byte(run("inspect json", "inspect", model, "--format", "json")), &js); err != nil {
		t.Errorf("inspect --format json: %v", err)
	}
	page := run("inspect html", "inspect", model, "--format", "html", "-t", "ccompiler, c")
	if strings.Contains(page, "<script>alert") {
		t.Error("HTML report holds a raw <script> from a name")
	}
	dec := xml.NewDecoder(strings.NewReader(page))
	dec.Strict, dec.AutoClose, dec.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Errorf("HTML report does not parse: %v", err)
			}
			break
		}
	}
	dot := run("inspect dot", "inspect", model, "--format", "dot")
	for _, line := range strings.Split(dot, "\n") {
		if strings.Count(strings.ReplaceAll(line, `\"`, ""), `"`)%2 != 0 {
			t.Errorf("DOT line with an unbalanced quote: %s", line)
		}
	}
}
