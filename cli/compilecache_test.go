package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// TestCompileFlagRoles: every flag of kiln compile says how it bears on
// the artifact cache, and every listed flag exists.
func TestCompileFlagRoles(t *testing.T) {
	_, _, stderr := kiln("compile", "-h")
	names := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(stderr, -1)
	if len(names) < 20 {
		t.Fatalf("found %d flags in compile's usage:\n%s", len(names), stderr)
	}
	seen := map[string]bool{}
	for _, m := range names {
		seen[m[1]] = true
		if _, ok := compileFlagRoles[m[1]]; !ok {
			t.Errorf("compile flag -%s has no role in compileFlagRoles", m[1])
		}
	}
	for name := range compileFlagRoles {
		if !seen[name] {
			t.Errorf("compileFlagRoles lists -%s, which compile does not have", name)
		}
	}
}

// externalModel writes y = x + w to dir/name, with the float32[2]
// initializer w in dir/w.bin (external data), and returns the model's
// path.
func externalModel(t *testing.T, dir, name string, w ...float32) string {
	t.Helper()
	f32 := int32(pb.TensorProto_FLOAT)
	vi := func(n string) *pb.ValueInfoProto {
		return &pb.ValueInfoProto{Name: proto.String(n), Type: &pb.TypeProto{Value: &pb.TypeProto_TensorType{TensorType: &pb.TypeProto_Tensor{
			ElemType: &f32, Shape: &pb.TensorShapeProto{Dim: []*pb.TensorShapeProto_Dimension{{Value: &pb.TensorShapeProto_Dimension_DimValue{DimValue: 2}}}}}}}}
	}
	m := &pb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*pb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}},
		Graph: &pb.GraphProto{
			Name: proto.String("g"),
			Node: []*pb.NodeProto{{Name: proto.String("add"), OpType: proto.String("Add"), Input: []string{"x", "w"}, Output: []string{"y"}}},
			Initializer: []*pb.TensorProto{{
				Name: proto.String("w"), DataType: &f32, Dims: []int64{2},
				DataLocation: pb.TensorProto_EXTERNAL.Enum(),
				ExternalData: []*pb.StringStringEntryProto{{Key: proto.String("location"), Value: proto.String("w.bin")}},
			}},
			Input:  []*pb.ValueInfoProto{vi("x")},
			Output: []*pb.ValueInfoProto{vi("y")},
		},
	}
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "w.bin"), tensor.FromFloat32s(ir.Shape{2}, w).Data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCompileFromArtifactCache: a recompile of an unchanged model with
// the same options restores the cached artifact, which is the same as
// the compiled one and runs; changing the model's external data, an
// option, or the model's name compiles again, as do -v and --no-cache.
func TestCompileFromArtifactCache(t *testing.T) {
	testenv.CC(t)
	testenv.Cgo(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	model := externalModel(t, dir, "m.onnx", 1, 2)
	out := filepath.Join(dir, "m.kiln")
	x := filepath.Join(dir, "x.npy")
	if err := tensor.WriteNpyFile(x, tensor.FromFloat32s(ir.Shape{2}, []float32{10, 20})); err != nil {
		t.Fatal(err)
	}
	const fromCache = "from kiln's cache"
	compile := func(wantCached bool, args ...string) {
		t.Helper()
		code, stdout, stderr := kiln(append([]string{"compile", model, "-t", "c", "-o", out, "--quiet"}, args...)...)
		if code != 0 {
			t.Fatalf("compile %v: exit %d: %s", args, code, stderr)
		}
		if got := strings.Contains(stdout, fromCache); got != wantCached {
			t.Fatalf("compile %v: from the cache %v, want %v:\n%s", args, got, wantCached, stdout)
		}
	}
	run := func(want ...float32) {
		t.Helper()
		res := filepath.Join(t.TempDir(), "res")
		if code, _, stderr := kiln("run", out, "--input", "x="+x, "--output-dir", res); code != 0 {
			t.Fatalf("run: exit %d: %s", code, stderr)
		}
		y, _, err := ReadTensor(filepath.Join(res, "y.npy"))
		if err != nil {
			t.Fatal(err)
		}
		if got := y.Float32s(); got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("y = %v, want %v", got, want)
		}
	}
	compile(false)
	first, err := driver.ReadMetadata(out)
	if err != nil {
		t.Fatal(err)
	}
	compile(true)
	second, err := driver.ReadMetadata(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Files) == 0 || !equalMaps(first.Files, second.Files) {
		t.Fatalf("the restored artifact's files differ: %v against %v", second.Files, first.Files)
	}
	run(11, 22)

	// The external data changes: compile again, and the result uses it.
	externalModel(t, dir, "m.onnx", 5, 6)
	compile(false)
	run(15, 26)
	compile(true)

	compile(false, "--opt-level", "1")
	compile(true, "--opt-level", "1")
	compile(true)
	compile(false, "-v")
	compile(false, "--no-cache")

	// The same model under another name has other symbols.
	renamed := filepath.Join(dir, "n.onnx")
	data, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(renamed, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := kiln("compile", renamed, "-t", "c", "-o", filepath.Join(dir, "n.kiln"), "--quiet"); code != 0 || strings.Contains(stdout, fromCache) {
		t.Fatalf("renamed model: exit %d, from the cache %v: %s", code, strings.Contains(stdout, fromCache), stderr)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
