package driver

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/passconfig"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/topi"
)

// TestAlterConvLayoutTargets: the graph pass list limits Winograd's
// planes to the L2 of a full-width AVX-512 processor without a fast L2,
// not on Zen 5, Zen 4 or AVX2, and applies a CPU device's limit too. Its
// transformed input counts only where some such target would not run
// the convolution by row tiles: resnet18's 64 -> 64 3x3 on 56x56 (3.2
// MB of transformed input) is Winograd on Sapphire Rapids, 64 -> 40 (a
// weight in blocks of 8, no broadcast kernel there) stays direct.
func TestAlterConvLayoutTargets(t *testing.T) {
	tgt := func(s string) *targets.Target { return hostTargetOf(t, s) }
	spr, zen5, zen4, haswell := tgt("c -mcpu=sapphirerapids"), tgt("c -mcpu=znver5"), tgt("c -mcpu=znver4"), tgt("c -mcpu=haswell")
	if got, want := topi.WinogradMaxBytes(spr), spr.Processor().L2; got != want || got <= 0 {
		t.Errorf("Sapphire Rapids: limit %d, want its L2 %d", got, want)
	}
	for _, c := range []*targets.Target{zen5, zen4, haswell, tgt("c -mcpu=sapphirerapids -mattr=-avx512f")} {
		if got := topi.WinogradMaxBytes(c); got != 0 {
			t.Errorf("%s: limit %d, want none", c, got)
		}
	}
	rng := rand.New(rand.NewSource(4))
	module := func(oc int64) *graph.Module {
		w := tensor.New(ir.Float32, ir.Shape{oc, 64, 3, 3})
		for i := range w.Float32s() {
			w.Float32s()[i] = rng.Float32() - 0.5
		}
		x := graph.NewVar("x", ir.NewTensorType(ir.Float32, ir.Shape{1, 64, 56, 56}))
		call, err := graph.NewCall(op.Conv2D, []graph.Expr{x, graph.NewConstant(w)}, ir.Attrs{"padding": []int64{1, 1, 1, 1}})
		if err != nil {
			t.Fatal(err)
		}
		return oneCallModule(t, x, call)
	}
	mod, mod40 := module(64), module(40)
	for _, tc := range []struct {
		name string
		host *targets.Target
		tgts []*targets.Target
		mod  *graph.Module
		want *op.Op
	}{
		{"Sapphire Rapids host", spr, nil, mod, op.Conv2DWinograd},
		{"Sapphire Rapids host, 40 channels", spr, nil, mod40, op.Conv2DPacked},
		{"Zen 5 host", zen5, nil, mod, op.Conv2DWinograd},
		{"Zen 5 host, 40 channels", zen5, nil, mod40, op.Conv2DWinograd},
		{"Haswell host", haswell, nil, mod, op.Conv2DWinograd},
		{"a Sapphire Rapids device, 40 channels", zen5, []*targets.Target{zen5, spr}, mod40, op.Conv2DPacked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := runGraphPass(t, "alter_conv_layout", tc.host, tc.tgts, tc.mod)
			if got := out.Main().Body.(*graph.Call).Op; got != tc.want {
				t.Errorf("operator %v, want %v", got, tc.want)
			}
		})
	}
}

// oneCallModule is the typed module of one function of x whose body is
// call.
func oneCallModule(t *testing.T, x *graph.Var, call *graph.Call) *graph.Module {
	t.Helper()
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x}, call, nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	return mod
}

// hostTargetOf is the host target of the target list s.
func hostTargetOf(t *testing.T, s string) *targets.Target {
	t.Helper()
	l, err := targets.ParseList(s)
	if err != nil {
		t.Fatal(err)
	}
	return l.Host
}

// runGraphPass runs graph pass name of the compilation's pass list for
// host and tgts on mod.
func runGraphPass(t *testing.T, name string, host *targets.Target, tgts []*targets.Target, mod *graph.Module) *graph.Module {
	t.Helper()
	for _, p := range graphPasses(passconfig.New(), nil, host, tgts) {
		if p.Name == name {
			out, err := p.Run(mod)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatalf("no graph pass %s", name)
	return nil
}

// TestConvPadBlock: on a target with 16-lane vectors, a convolution whose
// output channels 16 does not divide (an odd multiple of 8) and whose
// reduction takes the broadcast kernel is padded to a multiple of 16 in
// blocks of 16 (squeezenet1_1's 512 -> 1000 classifier), where every CPU
// target of the compilation agrees; with 8-lane vectors, a short
// reduction or a padding of more than 1/32 of the channels it keeps
// blocks of 8. Compiled for this machine, the padded convolution gives
// the reference executor's values.
func TestConvPadBlock(t *testing.T) {
	tgt := func(s string) *targets.Target { return hostTargetOf(t, s) }
	spr, haswell := tgt("c -mcpu=sapphirerapids"), tgt("c -mcpu=haswell")
	rng := rand.New(rand.NewSource(5))
	module := func(oc, ic, hw int64) (*graph.Module, *graph.Var) {
		w := tensor.New(ir.Float32, ir.Shape{oc, ic, 1, 1})
		for i := range w.Float32s() {
			w.Float32s()[i] = rng.Float32() - 0.5
		}
		x := graph.NewVar("x", ir.NewTensorType(ir.Float32, ir.Shape{1, ic, hw, hw}))
		call, err := graph.NewCall(op.Conv2D, []graph.Expr{x, graph.NewConstant(w)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return oneCallModule(t, x, call), x
	}
	classifier, _ := module(520, 128, 5)
	for _, tc := range []struct {
		name     string
		host     *targets.Target
		tgts     []*targets.Target
		mod      *graph.Module
		block    int64
		channels int64 // the channels attribute, 0 when not padded
	}{
		{"Sapphire Rapids, 128 -> 520", spr, nil, classifier, 16, 520},
		{"Haswell, 128 -> 520", haswell, nil, classifier, 8, 0},
		{"Sapphire Rapids with a Haswell device", spr, []*targets.Target{spr, haswell}, classifier, 8, 0},
		{"Sapphire Rapids, a short reduction", spr, nil, func() *graph.Module { m, _ := module(520, 64, 13); return m }(), 8, 0},
		{"Sapphire Rapids, 40 channels", spr, nil, func() *graph.Module { m, _ := module(40, 128, 5); return m }(), 8, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := runGraphPass(t, "alter_conv_layout", tc.host, tc.tgts, tc.mod)
			c := out.Main().Body.(*graph.Call)
			if c.Op != op.Conv2DPacked {
				t.Fatalf("operator %v, want %v", c.Op, op.Conv2DPacked)
			}
			w := c.Args[1].(*graph.Constant).Value.Shape
			ch, _ := c.Attrs["channels"].(int64)
			oc := tc.mod.Main().Body.(*graph.Call).Args[1].(*graph.Constant).Value.Shape[0]
			if w[4] != tc.block || ch != tc.channels || w[0]*w[4] != (oc+tc.block-1)/tc.block*tc.block {
				t.Errorf("weight %v, channels %d; want blocks of %d, channels %d", w, ch, tc.block, tc.channels)
			}
		})
	}
	testenv.Cgo(t)
	mod, in := module(520, 128, 5)
	x := tensor.New(ir.Float32, ir.Shape{1, 128, 5, 5})
	for i := range x.Float32s() {
		x.Float32s()[i] = rng.Float32()*2 - 1
	}
	want, err := ref.Run(mod, []*tensor.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	host := tgt("c")
	got, src := compileRun(t, mod, host, map[string]*tensor.Tensor{in.Name: x})
	if err := tensor.AllClose(got[0], want.Flatten()[0], 1e-4, 1e-5); err != nil {
		t.Fatal(err)
	}
	padded := topi.ConvPadBlock(host, 128, 520, 25) == 16
	if padded != strings.Contains(src, "{33, 128, 1, 1, 16}") {
		t.Errorf("padded to 528 channels: %v, but the C's weight shape differs", padded)
	}
	if padded && !strings.Contains(src, "kiln_conv_bk_") {
		t.Error("the padded convolution does not take the broadcast kernel")
	}
}
