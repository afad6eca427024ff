package driver

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/kiln-dev/kiln/device"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/targets"
)

// twoCPULabels labels the host target "big" and, for this compilation,
// the same target "little": two names for the one c target, whose devices
// differ by id (big = cpu:0, little:1 = cpu:1).
func twoCPULabels(t *testing.T, host *targets.Target) *targets.Labels {
	t.Helper()
	l := targets.NewLabels(nil)
	for _, name := range []string{"big", "little"} {
		if err := l.Add(name, host); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// TestModelSplitAcrossTwoCPUs compiles shared models with parts placed on
// a second CPU device through labels and placement rules: the program
// uses both devices, copies between them, and its outputs match the
// reference executor and PyTorch.
func TestModelSplitAcrossTwoCPUs(t *testing.T) {
	testenv.Cgo(t)
	cases := []struct {
		model string
		rules string
	}{
		// Node rules: the second convolution block and the first dense
		// layer on cpu:1, the rest on the default device.
		{"lenet", "node:/3/Conv = little:1\nnode:/4/Relu = little:1\nnode:/7/Gemm = little:1 # dense + bias\n"},
		// An operator rule: every convolution on cpu:1; pools, concats and
		// activations on cpu:0, so the copies go back and forth.
		{"squeezenet1_1", "op:nn.conv2d = little:1\nop:nn.max_pool2d = big\n"},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			dir := filepath.Join(sharedDir(t), "models", c.model)
			rules, err := device.ParseRules(c.rules)
			if err != nil {
				t.Fatal(err)
			}
			host := hostTarget(t)
			res := compileAndCompareWith(t, dir, 1e-3, 1e-4, Config{Host: host, Labels: twoCPULabels(t, host), Placement: rules})
			if want := []string{"cpu:0", "cpu:1"}; !reflect.DeepEqual(res.Metadata.Devices, want) {
				t.Errorf("devices %v, want %v", res.Metadata.Devices, want)
			}
			g := readGraph(t, res.Dir)
			copies := map[[2]int64]int{}
			for i, n := range g.Nodes {
				if n.Op == "device_copy" {
					di := g.Attrs.DeviceIndex[g.NodeRowPtr[i]]
					copies[[2]int64{di[0], di[1]}]++
				}
			}
			if copies[[2]int64{1, 1}] == 0 || copies[[2]int64{1, 0}] == 0 {
				t.Errorf("device copies by destination %v: want copies to cpu:1 and back to cpu:0", copies)
			}
		})
	}
}

// sharedDir is ../shared beside the repository root.
func sharedDir(t *testing.T) string {
	t.Helper()
	return testenv.Shared(t)
}
