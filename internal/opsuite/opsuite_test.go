package opsuite

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/frontend/onnx"
)

// TestSuiteModels checks that every workload is a valid model kiln
// imports with the declared input, that names are unique, and that
// Save writes the harness layout.
func TestSuiteModels(t *testing.T) {
	seen := map[string]bool{}
	kinds := map[string]bool{}
	for _, w := range append(Suite(), Networks(224, 128)...) {
		if seen[w.Name] {
			t.Errorf("workload %s appears twice", w.Name)
		}
		seen[w.Name], kinds[w.Kind] = true, true
		m, err := onnx.Load(w.Model, onnx.Options{})
		if err != nil {
			t.Errorf("%s: %v", w.Name, err)
			continue
		}
		if len(m.Inputs) != 1 || m.Inputs[0].Name != "x" || !slices.Equal(m.Inputs[0].Type.Shape, w.Input.Shape) {
			t.Errorf("%s: inputs %+v, want x of shape %v", w.Name, m.Inputs, w.Input.Shape)
		}
		if w.Bytes <= 0 {
			t.Errorf("%s: %d bytes of traffic", w.Name, w.Bytes)
		}
	}
	for _, k := range []string{"conv", "depthwise", "grouped", "conv1x1", "dense", "batch_matmul", "transpose", "shuffle", "split_concat", "softmax", "layernorm", "gelu", "network"} {
		if !kinds[k] {
			t.Errorf("no workload of kind %s", k)
		}
	}
	dir := t.TempDir()
	w := Suite()[0]
	if err := w.Save(dir); err != nil {
		t.Fatal(err)
	}
	in, name, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", "input_0.pb"))
	if err != nil || name != "x" || !slices.Equal(in.Data, w.Input.Data) {
		t.Fatalf("saved input: %v, name %q, equal %v", err, name, err == nil && slices.Equal(in.Data, w.Input.Data))
	}
}
