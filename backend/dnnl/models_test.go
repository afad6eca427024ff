//go:build cgo && !kiln_nodnnl

package dnnl

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/backend/backendtest"

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

// TestMobileNetV3 checks that MobileNetV3's hard-swish activations (as
// exported: y * clip(y/6 + 1/2, 0, 1)) become hard-swish post-ops of the
// convolutions and the classifier's first dense, that its squeeze-excite
// gates (HardSigmoid) become linear and clip post-ops, and that the
// outputs match.
func TestMobileNetV3(t *testing.T) {
	rep := compileShared(t, "mobilenet_v3_large")
	ops := map[string]int{}
	for _, n := range rep.Nodes {
		if n.Op == "nn.conv2d" || n.Op == "nn.dense" {
			ops[n.Composite]++
		}
	}
	if ops[CompositeConv2DBiasHardSwish] != 20 || ops[CompositeDenseHardSwish] != 1 || ops[CompositeConv2DBiasHardSigmoid] != 8 {
		t.Errorf("anchors by composite %v, want 20 %s, 1 %s and 8 %s (the squeeze-excite gates)", ops,
			CompositeConv2DBiasHardSwish, CompositeDenseHardSwish, CompositeConv2DBiasHardSigmoid)
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

// TestSharedModels compiles every model in ../shared/models with
// "dnnl, c", checks its outputs against the stored reference, and checks
// that no oneDNN primitive took a reference (naive) implementation:
// those are the cliffs of 10-100x (a blocked tensor times a broadcast
// scalar with oneDNN limited to AVX2 took mobilenet_v3_large from 5 to
// 140 ms). TestSharedModelsAVX2 runs it again with oneDNN limited to
// AVX2.
func TestSharedModels(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and runs every shared model (-short)")
	}
	t.Logf("oneDNN ISA: %s", effectiveISA())
	if want := os.Getenv(childISA); want != "" && effectiveISA() != want {
		t.Fatalf("oneDNN uses %s with ONEDNN_MAX_CPU_ISA=%s, want %s", effectiveISA(), os.Getenv("ONEDNN_MAX_CPU_ISA"), want)
	}
	for _, name := range []string{"resnet18", "mobilenet_v2", "squeezenet1_1", "tiny_bert", "mobilenet_v3_large", "googlenet", "lenet", "mlp", "conv1d_kws"} {
		t.Run(name, func(t *testing.T) {
			before := implsCreated.snapshot()
			backendtest.CompileModel(t, registry(t), "dnnl, c", name)
			for k, n := range implsCreated.snapshot() {
				if n > before[k] && strings.Contains(k, " ref") {
					t.Errorf("%s: %d primitive(s) with oneDNN's reference implementation: %s", name, n-before[k], k)
				}
			}
		})
	}
}

// childISA names the ISA a re-executed TestSharedModels must find.
const childISA = "KILN_TEST_DNNL_ISA"

// TestSharedModelsAVX2 re-runs TestSharedModels in a child process with
// ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN reads it once, at its first use), as
// on a machine without AVX-512.
func TestSharedModelsAVX2(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and runs every shared model (-short)")
	}
	if os.Getenv(childISA) != "" {
		t.Skip("in the child process")
	}
	if !cpuHasAVX2() {
		t.Skip("this machine has no AVX2")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestSharedModels$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "ONEDNN_MAX_CPU_ISA=AVX2", childISA+"=avx2")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestSharedModels ") {
		t.Fatalf("TestSharedModels with ONEDNN_MAX_CPU_ISA=AVX2: %v\n%s", err, out)
	}
}

// cpuHasAVX2 reports whether oneDNN can run AVX2 code here.
func cpuHasAVX2() bool {
	return effectiveISA() == "avx2" || effectiveISA() == "avx512"
}
