package vanilla

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/backend/backendtest"
	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// convModule is main(x, w) = conv2d(x, w) with the given padding and
// strides.
func convModule(t *testing.T, x, w ir.Shape, pad, stride int64, groups int64) *graph.Module {
	t.Helper()
	xv := graph.NewVar("x", ir.NewTensorType(ir.Float32, x))
	wv := graph.NewVar("w", ir.NewTensorType(ir.Float32, w))
	c, err := graph.NewCall(op.Conv2D, []graph.Expr{xv, wv}, ir.Attrs{"padding": []int64{pad, pad}, "strides": []int64{stride, stride}, "groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{xv, wv}, c, nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	return mod
}

// TestConvMatchesHost offloads convolutions with kernels 3, 5 and 7 and
// several input sizes, with and without padding, and compares the
// accelerator's outputs with the host path's (rtol 1e-5).
func TestConvMatchesHost(t *testing.T) {
	testenv.Cgo(t)
	r := backendtest.Registry(t, Register)
	rng := rand.New(rand.NewSource(1))
	for _, k := range []int64{3, 5, 7} {
		for _, in := range []ir.Shape{{1, 3, 9, 9}, {2, 4, 13, 11}, {1, 8, 20, 16}} {
			for _, pad := range []int64{0, k / 2} {
				name := fmt.Sprintf("k%d_in%v_pad%d", k, in, pad)
				t.Run(name, func(t *testing.T) {
					mod := convModule(t, in, ir.Shape{6, in[1], k, k}, pad, 1, 1)
					ins := backendtest.RandomInputs(rng, mod)
					acc := backendtest.CompileRun(t, r, "vanilla_accelerator, c", mod, ins)
					host := backendtest.CompileRun(t, r, "c", mod, ins)
					if err := tensor.AllClose(acc.Outputs[0], host.Outputs[0], 1e-5, 1e-5); err != nil {
						t.Error(err)
					}
					if acc.Report.Counts["vanilla_accelerator"] != 1 {
						t.Errorf("report %v: the conv2d was not offloaded", acc.Report.Counts)
					}
					src := acc.Source(t, "ext0_vanilla_accelerator.c")
					if !strings.Contains(src, Kernel+"(") || !strings.Contains(src, `#include "vanilla_accelerator.h"`) {
						t.Errorf("generated C lacks the kernel call or its header:\n%s", src)
					}
					_, body, _ := strings.Cut(src, "_main_0_unpacked(")
					body, _, _ = strings.Cut(body, "\n}\n")
					if strings.Contains(body, "for (") {
						t.Errorf("a loop nest is left in the accelerator's function:\n%s", body)
					}
				})
			}
		}
	}
}

// TestEligible checks the predicate's refusals.
func TestEligible(t *testing.T) {
	for _, c := range []struct {
		stride, groups, pad int64
		want                string
	}{
		{1, 1, 1, ""},
		{2, 1, 1, "strides [2 2]"},
		{1, 2, 1, "groups=2"},
	} {
		mod := convModule(t, ir.Shape{1, 4, 8, 8}, ir.Shape{4, 4 / c.groups, 3, 3}, c.pad, c.stride, c.groups)
		err := Eligible(mod.Main().Body.(*graph.Call))
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("stride %d groups %d: %v, want %q", c.stride, c.groups, err, c.want)
		}
	}
}

// TestSqueezeNet compiles ../shared/models/squeezenet1_1 with
// "vanilla_accelerator, c": every stride-1 conv2d is offloaded, the
// stride-2 stem stays on the host with the predicate's reason, and the
// outputs match PyTorch's.
func TestSqueezeNet(t *testing.T) {
	testenv.Cgo(t)
	r := backendtest.Registry(t, Register)
	c := backendtest.CompileModel(t, r, "vanilla_accelerator, c", "squeezenet1_1")
	offloaded := 0
	for _, n := range c.Report.Nodes {
		if n.Op != "nn.conv2d" {
			continue
		}
		if n.Target == Name {
			offloaded++
			continue
		}
		if n.Node != "/features/features.0/Conv" || !strings.Contains(strings.Join(n.Why, "; "), "strides [2 2] (the accelerator supports stride 1)") {
			t.Errorf("%s stayed on the host: %v", n.Node, n.Why)
		}
	}
	if offloaded != 25 {
		t.Errorf("%d conv2d offloaded, want squeezenet1_1's 25 stride-1 convolutions", offloaded)
	}
	if got := strings.Count(c.Source(t, "ext0_vanilla_accelerator.c"), Kernel+"("); got != 25 {
		t.Errorf("%d kernel calls in the generated C, want 25", got)
	}
}

// TestSqueezeNetAOT compiles squeezenet1_1 with the AOT executor: the
// accelerator's calls sit in the generated run function like the host's,
// their scratch buffers in the planned workspace, and the program built
// with cc matches PyTorch's outputs.
func TestSqueezeNetAOT(t *testing.T) {
	r := backendtest.Registry(t, Register)
	c := backendtest.CompileModelExecutor(t, r, "vanilla_accelerator, c", "squeezenet1_1", driver.ExecutorAOT)
	if c.Report.Counts[Name] != 25 {
		t.Errorf("report counts %v, want 25 offloaded convolutions", c.Report.Counts)
	}
	run := c.Source(t, "kiln_test.c")
	if got := strings.Count(run, "if (kiln_test_vanilla_accelerator_main_"); got != 25 {
		t.Errorf("the run function calls the accelerator's functions %d times, want 25", got)
	}
	for _, f := range []string{"kiln_test.c", "kiln_lib.c", "ext0_vanilla_accelerator.c"} {
		if strings.Contains(c.Source(t, f), "malloc(") {
			t.Errorf("%s calls malloc", f)
		}
	}
}
