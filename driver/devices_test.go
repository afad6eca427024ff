package driver

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	cgen "github.com/kiln-dev/kiln/codegen/c"
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

// TestBigLittleSplit is seed 004's headline case: two targets of one kind,
// told apart by labels ("big" and "little", as -t "big=c ..., little=c
// ..." gives them), the convolutions of resnet18 placed on big. Each
// PrimFunc carries its full target; big's functions are compiled in their
// own translation unit with big's processor flags; the program runs on
// cpu:0 (little, the host) and cpu:1 (big) and matches the reference.
func TestBigLittleSplit(t *testing.T) {
	testenv.Cgo(t)
	model := "resnet18"
	if testing.Short() {
		model = "lenet"
	}
	// Processor flags that every machine of the architecture runs; on
	// x86-64 the two differ in AVX-512 (big has it when the machine has
	// it, little never), so the two units are compiled differently.
	little := "little=c -opt=2"
	if cgen.HostArch() == targets.X86_64 {
		little = "little=c -mattr=-avx512f"
	}
	l, err := targets.ParseList("big=c, " + little)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := device.ParseRules("op:nn.conv2d = big\n")
	if err != nil {
		t.Fatal(err)
	}
	dump := t.TempDir()
	res := compileAndCompareWith(t, filepath.Join(sharedDir(t), "models", model), 1e-3, 1e-4, Config{Host: l.Host, Targets: l.Targets, Placement: rules, DumpDir: dump})
	// The PrimFuncs as the TIR printer shows them after the TIR passes:
	// T.func_attr({"global_symbol": NAME, "target": TARGET}).
	tirText, err := os.ReadFile(filepath.Join(dump, "06-tir-passes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var prims []string
	for _, m := range regexp.MustCompile(`"global_symbol": "([^"]+)", "target": "((?:[^"\\]|\\.)*)"`).FindAllSubmatch(tirText, -1) {
		target, err := strconv.Unquote(`"` + string(m[2]) + `"`)
		if err != nil {
			t.Fatal(err)
		}
		prims = append(prims, string(m[1])+" "+target)
	}
	if len(prims) == 0 {
		t.Fatal("no PrimFunc with a target in the TIR dump")
	}
	if want := []string{"cpu:0", "cpu:1"}; !reflect.DeepEqual(res.Metadata.Devices, want) {
		t.Errorf("devices %v, want %v", res.Metadata.Devices, want)
	}
	if want := "big=c, " + little; res.Metadata.Target != want {
		t.Errorf("metadata target %q, want %q", res.Metadata.Target, want)
	}
	bigC, err := os.ReadFile(filepath.Join(res.Dir, "kiln_target0_big.c"))
	if err != nil {
		t.Fatal(err)
	}
	libC, err := os.ReadFile(filepath.Join(res.Dir, "kiln_lib.c"))
	if err != nil {
		t.Fatal(err)
	}
	convs := 0
	for _, p := range prims {
		name, target, _ := strings.Cut(p, " ")
		isConv := strings.Contains(name, "conv2d")
		onBig := strings.HasPrefix(target, "big=c")
		if isConv != onBig || (!onBig && target != little) || (onBig && !strings.HasPrefix(target, "big=c -host=")) {
			t.Errorf("PrimFunc %s has target %q", name, target)
		}
		in := libC
		if onBig {
			convs++
			in = bigC
		}
		if !bytes.Contains(in, []byte("int32_t "+name+"(")) {
			t.Errorf("PrimFunc %s (%s) is not defined in its target's C file", name, target)
		}
	}
	if convs == 0 {
		t.Error("no convolution was lowered for big")
	}
}
