//go:build cgo && !kiln_nodnnl

package dnnl

import (
	"fmt"
	"github.com/kiln-dev/kiln/backend/backendtest"
	"testing"

	"github.com/kiln-dev/kiln/partition"
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
// artifact on the stored inputs, compares with PyTorch's outputs (rtol
// 1e-3, atol 1e-4) and returns the partition report.
func compileShared(t *testing.T, name string) *partition.Report {
	t.Helper()
	c := backendtest.CompileModel(t, registry(t), "dnnl, c", name)
	return &c.Report
}
