package onnx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
)

// TestLoadFileKinds: LoadFile reads a model from a regular file (mapped),
// and an empty file or a directory is an error, not a crash.
func TestLoadFileKinds(t *testing.T) {
	dir := t.TempDir()
	data, err := proto.Marshal(&pb.ModelProto{IrVersion: proto.Int64(8)})
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "nograph.onnx")
	if err := os.WriteFile(model, data, 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.onnx")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, says string }{
		{model, "model has no graph"},
		{empty, "model has no graph"},
		{dir, "directory"},
	} {
		if _, err := LoadFile(c.path, Options{}); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("LoadFile(%s) = %v, want an error saying %q", filepath.Base(c.path), err, c.says)
		}
	}
}
