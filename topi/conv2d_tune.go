package topi

import (
	"fmt"

	"github.com/kiln-dev/kiln/strategy"
)

// The packed convolution's knobs (strategy.Knobs, from tuning records):
//
//	kernel  0: the columns-in-lanes micro-kernel (ukernel.go),
//	        1: the broadcast micro-kernel (ukernel_bcast.go)
//	mv, nc  the broadcast kernel's register tile: channel vectors x columns
//	kc      the broadcast kernel's input channels per pass (default: all of
//	        them where vecISA.bcastOnePass, else bcastChunk)
//	rows    output rows per tile (dividing the output height)
//
// Absent knobs keep the defaults (chooseBroadcast, bcastChunk,
// chooseRows). Values are checked as strictly as the defaults are chosen:
// the register tile must fit the registers and tile the output channels,
// the V tile must stay within vTileBytes.

// Knob names of the packed convolution.
const (
	knobKernel = "kernel"
	knobMV     = "mv"
	knobNC     = "nc"
	knobKC     = "kc"
	knobRows   = "rows"
)

// applyKnobs overrides the plan's default choices with k (nil: none) for
// a convolution of oc output and ic input channels in weight blocks of
// block.
func (p *convPlan) applyKnobs(k strategy.Knobs, oc, ic, block int64) error {
	if len(k) == 0 {
		return nil
	}
	for name := range k {
		switch name {
		case knobKernel, knobMV, knobNC, knobKC, knobRows:
		default:
			return fmt.Errorf("unknown knob %q", name)
		}
	}
	switch kern := k.Get(knobKernel, boolInt(p.bmv > 0)); kern {
	case 0:
		p.bmv, p.bnc, p.kc, p.tail = 0, 0, 0, 0
		p.mr = p.isa.columnsMR(block, p.outC)
		for _, n := range []string{knobMV, knobNC, knobKC} {
			if _, ok := k[n]; ok {
				return fmt.Errorf("%s applies to the broadcast kernel only", n)
			}
		}
	case 1:
		lanes := int64(p.isa.lanes)
		if p.isa.bmv == 0 || block%lanes != 0 {
			return fmt.Errorf("no broadcast kernel for %s with weight blocks of %d", p.isa.name, block)
		}
		defMV, defNC := p.bmv, p.bnc
		if defMV == 0 {
			defMV, defNC, _ = p.isa.bcastTile(oc, block)
		}
		mv, nc := k.Get(knobMV, int64(defMV)), k.Get(knobNC, int64(defNC))
		if mv < 1 || nc < 1 || mv > 64 || nc > 64 || int(nc) > p.isa.bcastColumns(int(mv)) {
			return fmt.Errorf("register tile %dx%d does not fit %d %s registers", mv, nc, p.isa.regs, p.isa.name)
		}
		tail, ok := p.isa.channelTiles(int(mv), oc, block)
		if !ok || mv*lanes > p.outC {
			return fmt.Errorf("%d channel vectors do not tile %d output channels in blocks of %d", mv, oc, block)
		}
		p.bmv, p.bnc, p.tail, p.mr = int(mv), int(nc), tail, int(mv*lanes)
		p.kc = k.Get(knobKC, p.kc)
		if p.kc < 0 || p.kc > ic {
			return fmt.Errorf("kc=%d outside 0..%d input channels", p.kc, ic)
		}
	default:
		return fmt.Errorf("kernel=%d, want 0 (columns) or 1 (broadcast)", kern)
	}
	p.chooseRows()
	if r, ok := k[knobRows]; ok {
		if !p.validRows(r) {
			return fmt.Errorf("rows=%d: not a divisor of %d output rows whose tile fits %d bytes", r, p.g.oh, vTileBytes)
		}
		p.rows = r
	}
	return nil
}

// validRows reports whether r rows per tile divide the output height and
// keep the V tile within vTileBytes.
func (p *convPlan) validRows(r int64) bool {
	return r >= 1 && r <= p.g.oh && p.g.oh%r == 0 && p.tileCols(r)*int64(p.mr)*4 <= vTileBytes
}

// rowChoices are the rows per tile a tuner tries: the default and the
// nearest valid choices below and above it; none when the default is not
// a valid choice itself (chooseRows falls back to one row when no tile
// fits vTileBytes: the knob could not ask for it).
func (p *convPlan) rowChoices() []int64 {
	if !p.validRows(p.rows) {
		return nil
	}
	var valid []int64
	for r := int64(1); r <= p.g.oh; r++ {
		if p.validRows(r) {
			valid = append(valid, r)
		}
	}
	out := []int64{p.rows}
	for i, r := range valid {
		if r == p.rows {
			if i > 0 {
				out = append(out, valid[i-1])
			}
			if i+1 < len(valid) {
				out = append(out, valid[i+1])
			}
		}
	}
	return out
}

// spaceConvPackedCPU lists the knob settings kiln tune measures for a
// packed convolution: the columns kernel and every broadcast register
// tile (bcastTiles) that covers the output channels (channelTiles, with a
// smaller last tile or without), each with one pass over the input channels or the
// default passes, each at the default rows per tile and its neighbours.
func spaceConvPackedCPU(c *strategy.Call) []strategy.Knobs {
	x, w := c.ArgTensor(0), c.ArgTensor(1)
	if len(x.Shape) != 4 || len(w.Shape) != 5 {
		return nil
	}
	oc, ic, block := w.Shape[0]*w.Shape[4], w.Shape[1], w.Shape[4]
	var space []strategy.Knobs
	add := func(base strategy.Knobs) {
		p, err := newPackedPlan(c, x.Shape, w.Shape)
		if err != nil || p.applyKnobs(base, oc, ic, block) != nil {
			return
		}
		rows := p.rowChoices()
		if len(rows) == 0 {
			space = append(space, base)
			return
		}
		for _, r := range rows {
			k := strategy.Knobs{knobRows: r}
			for n, v := range base {
				k[n] = v
			}
			space = append(space, k)
		}
	}
	add(strategy.Knobs{knobKernel: 0})
	p, err := newPackedPlan(c, x.Shape, w.Shape)
	if err != nil || p.isa.bmv == 0 || block%int64(p.isa.lanes) != 0 {
		return space
	}
	kk := int64(len(p.koff))
	for _, t := range p.isa.bcastTiles() {
		mv, nc := t[0], t[1]
		if _, ok := p.isa.channelTiles(mv, oc, block); !ok {
			continue
		}
		add(strategy.Knobs{knobKernel: 1, knobMV: int64(mv), knobNC: int64(nc), knobKC: ic})
		mr := int64(mv * p.isa.lanes)
		small := bcastChunk(mr, ic, kk, bcastChunkBudget(kk, 0, true))
		if small < ic {
			add(strategy.Knobs{knobKernel: 1, knobMV: int64(mv), knobNC: int64(nc), knobKC: small})
		}
		if l1 := bcastChunk(mr, ic, kk, bcastChunkBudget(kk, p.l1d, false)); l1 < ic && l1 != small {
			add(strategy.Knobs{knobKernel: 1, knobMV: int64(mv), knobNC: int64(nc), knobKC: l1})
		}
	}
	return space
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
