package topi

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
)

// packedCall is a packed 3x3 convolution call (x 1x64x14x14, 64 output
// channels in blocks of 16) for target t.
func packedCall(t *testing.T, tgt string) *strategy.Call {
	t.Helper()
	return packedCallOf(t, tgt, ir.Attrs{"padding": []int64{1, 1, 1, 1}}, ir.Shape{1, 64, 14, 14}, ir.Shape{4, 64, 3, 3, 16}, ir.Shape{1, 64, 14, 14})
}

// packedCallOf is a packed convolution call with attributes attrs on an
// input of shape x, a packed weight of shape w and an output of shape out,
// for target tgt.
func packedCallOf(t *testing.T, tgt string, attrs ir.Attrs, x, w, out ir.Shape) *strategy.Call {
	t.Helper()
	tg, err := targets.Default.Parse(tgt)
	if err != nil {
		t.Fatal(err)
	}
	full, err := op.Conv2DPacked.MakeAttrs(attrs)
	if err != nil {
		t.Fatal(err)
	}
	return &strategy.Call{Op: op.Conv2DPacked, Attrs: full, Target: tg,
		ArgTypes: []ir.Type{ir.NewTensorType(ir.Float32, x), ir.NewTensorType(ir.Float32, w)},
		OutType:  ir.NewTensorType(ir.Float32, out)}
}

// TestConvPackedSpace: the tuning space holds both micro-kernels and
// several rows per tile, every setting in it is accepted, and knobs that
// do not fit (from a hand-edited or foreign records file) are errors
// naming the knob, never a panic or a silent default.
func TestConvPackedSpace(t *testing.T) {
	for _, tgt := range []string{"c -mcpu=haswell", "c -mcpu=skylake-avx512", "c -mcpu=cortex-a72"} {
		c := packedCall(t, tgt)
		space := spaceConvPackedCPU(c)
		kernels, rows := map[int64]bool{}, map[int64]bool{}
		for _, k := range space {
			kernels[k[knobKernel]] = true
			rows[k[knobRows]] = true
			p, err := newPackedPlan(c, c.ArgTensor(0).Shape, c.ArgTensor(1).Shape)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.applyKnobs(k, 64, 64, 16); err != nil {
				t.Errorf("%s: space setting %s refused: %v", tgt, k, err)
			}
		}
		if !kernels[0] || !kernels[1] || len(rows) < 2 {
			t.Errorf("%s: space %v lacks a kernel or row choices", tgt, space)
		}
	}
	c := packedCall(t, "c -mcpu=haswell")
	for _, bad := range []struct {
		k    strategy.Knobs
		want string
	}{
		{strategy.Knobs{"tile": 4}, "unknown knob"},
		{strategy.Knobs{knobKernel: 2}, "kernel=2"},
		{strategy.Knobs{knobKernel: 0, knobMV: 2}, "broadcast kernel only"},
		{strategy.Knobs{knobKernel: 1, knobMV: 4, knobNC: 6}, "does not fit"},
		{strategy.Knobs{knobKernel: 1, knobMV: -1}, "does not fit"},
		{strategy.Knobs{knobKernel: 1, knobMV: 3, knobNC: 4}, "do not tile"},
		{strategy.Knobs{knobKernel: 1, knobKC: 65}, "kc=65"},
		{strategy.Knobs{knobRows: 5}, "rows=5"},
	} {
		p, err := newPackedPlan(c, c.ArgTensor(0).Shape, c.ArgTensor(1).Shape)
		if err != nil {
			t.Fatal(err)
		}
		p.chooseBroadcast(64, 64, 16)
		err = p.applyKnobs(bad.k, 64, 64, 16)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("knobs %s: error %v, want one containing %q", bad.k, err, bad.want)
		}
	}
}

// TestConvPackedSpaceWideMap: on a map too wide for any row tile of the
// broadcast kernel's 48 channels within vTileBytes (mobilenet_v2's
// 16->96 1x1 convolution at 112x112), the space asks for no rows knob
// rather than the one-row fallback, so that every setting is accepted
// (kiln tune stopped on it).
func TestConvPackedSpaceWideMap(t *testing.T) {
	for _, tgt := range []string{"c -mcpu=skylake-avx512", "c -mcpu=znver4", "c -mcpu=haswell"} {
		x := ir.Shape{1, 16, 112, 112}
		c := packedCallOf(t, tgt, nil, x, ir.Shape{6, 16, 1, 1, 16}, ir.Shape{1, 96, 112, 112})
		space := spaceConvPackedCPU(c)
		if len(space) == 0 {
			t.Fatalf("%s: empty space", tgt)
		}
		for _, k := range space {
			p, err := newPackedPlan(c, x, c.ArgTensor(1).Shape)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.applyKnobs(k, 96, 16, 16); err != nil {
				t.Errorf("%s: space setting %s refused: %v", tgt, k, err)
			}
		}
	}
}
