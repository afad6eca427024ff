package dnnl

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/build"
	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/internal/shared"
	"github.com/kiln-dev/kiln/partition"
	"github.com/kiln-dev/kiln/tensor"
)

// TestResNet18 compiles ../shared/models/resnet18 with "dnnl, c": the
// partition report must show every convolution offloaded, inside a fused
// composite (bias, residual add and relu as oneDNN post-ops), and the
// outputs must match PyTorch's (rtol 1e-3, atol 1e-4, as kiln's
// conformance runs).
func TestResNet18(t *testing.T) {
	rep := compileShared(t, "resnet18")
	convs, composites := 0, map[string]int{}
	for _, n := range rep.Nodes {
		if n.Op != "nn.conv2d" {
			continue
		}
		convs++
		if n.Target != "dnnl" || n.Composite == "" {
			t.Errorf("%s: conv2d on %s (composite %q): %v", n.Node, n.Target, n.Composite, n.Why)
		}
		composites[n.Composite]++
	}
	if convs != 20 {
		t.Errorf("%d convolutions in the report, want resnet18's 20", convs)
	}
	want := map[string]int{CompositeConv2DBiasRelu: 9, CompositeConv2DBiasAddRelu: 8, CompositeConv2DBias: 3}
	if fmt.Sprint(composites) != fmt.Sprint(want) {
		t.Errorf("composites %v, want %v", composites, want)
	}
}

// TestMobileNetV2 checks that MobileNet's conv → bias → clip (relu6)
// chains become dnnl.conv2d_bias_clip composites (clip as a post-op, the
// pattern table's priority putting it before conv2d_bias) and that the
// outputs match.
func TestMobileNetV2(t *testing.T) {
	rep := compileShared(t, "mobilenet_v2")
	clips := 0
	for _, n := range rep.Nodes {
		if n.Op == "clip" {
			clips++
			if n.Target != "dnnl" || n.Composite != CompositeConv2DBiasClip {
				t.Errorf("%s: clip on %s in %q", n.Node, n.Target, n.Composite)
			}
		}
		if n.Op == "nn.conv2d" && (n.Target != "dnnl" || n.Composite == "") {
			t.Errorf("%s: conv2d on %s in %q", n.Node, n.Target, n.Composite)
		}
	}
	if clips != 35 {
		t.Errorf("%d clips, want mobilenet_v2's 35", clips)
	}
}

// compileShared compiles ../shared/models/NAME with "dnnl, c", runs the
// artifact on the stored input and compares with PyTorch's output (rtol
// 1e-3, atol 1e-4), and returns the partition report.
func compileShared(t *testing.T, name string) *partition.Report {
	t.Helper()
	dir, err := shared.Path("models", name)
	if err != nil {
		t.Fatal(err)
	}
	model, err := onnx.LoadFile(filepath.Join(dir, "model.onnx"), onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := registry(t).ParseList("dnnl, c")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "art")
	var rep partition.Report
	if _, err := build.Compile(model.Module, nil, build.Config{Host: l.Host, Targets: l.Targets, Out: out, Report: &rep, ModuleName: name}); err != nil {
		t.Fatal(err)
	}
	art, err := build.LoadArtifact(out)
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", "input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := art.Run(map[string]*tensor.Tensor{model.Inputs[0].Name: in})
	if err != nil {
		t.Fatal(err)
	}
	ref, _, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.AllClose(got[0], ref, 1e-3, 1e-4); err != nil {
		t.Errorf("output: %v", err)
	}
	return &rep
}
