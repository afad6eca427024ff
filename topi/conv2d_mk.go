package topi

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// The CPU implementation of nn.contrib_conv2d_packed (a groups-1
// convolution whose weight alter_conv_layout packed at compile time into
// blocks of B output channels, [OC/B, IC, KH, KW, B]):
//
//  1. The input is padded once and, for strides above 1, split into
//     stride phases: X'[n, ic, (ph*sw + pw)*Hq + r, c] =
//     Xpad[n, ic, r*sh + ph, c*sw + pw]. Every kernel tap then reads a
//     contiguous run of an input plane, at a constant offset KOFF(kh, kw)
//     from the output position. A stride-1 convolution without padding
//     reads its input as it is.
//  2. The convolution is computed on "virtual columns" j = oh*Wq + ow of
//     that plane (Wq = the phase plane's width): V[n, oc, j] = sum over
//     (ic, kh, kw) of X'[n, ic, flat j + KOFF] * W. Columns with ow >= OW
//     are computed and never read (the price of contiguous loads: for a
//     3x3 convolution on a 7x7 map, 2 of every 9 columns).
//  3. The group's output stage reads V[n, oc, oh*Wq + ow] and applies the
//     fused epilogue (bias, batch norm, activation, residual add, clip).
//     It is tiled MR output channels by R output rows; the V tile of that
//     block (MR x ((R-1)*Wq + OW) floats, in L1) is computed at the tile
//     loop by the register-blocked micro-kernel (ukernel.go), tensorized
//     in place of V's loops; the epilogue then runs vectorised along the
//     row. (batch, channel tiles) is the parallel loop.
//
// With the broadcast kernel (ukernel_bcast.go), which reads each input
// value as a scalar at an offset from a table, the input is read where it
// lies instead ("direct"): X'' is the input itself, or padded but not
// split into phases, [N, C, Hp*Wp]; output position (r, c) reads
// X''[(r*sh)*Wp + c*sw + KOFF] with KOFF(kh, kw) = kh*dh*Wp + kw*dw, and
// V is compact, V[n, oc, oh*OW + ow]. A strided convolution then copies
// its input once without splitting it (a 1x1 stride-2 one not at all),
// and every column group of V is consecutive (stored transposed).
//
// Everything is sized from the target's processor: the micro-kernel's
// instruction set and MR x NR register tile from its vector width and
// register count, the tile's columns from its vector width.

// convPlan is the layout and tiling of one packed convolution.
type convPlan struct {
	g              convGeom
	hp, wp, hq, wq int64 // padded input, phase plane
	nph, npw       int64 // the row and column phases the taps read (usedPhases)
	jtot           int64 // virtual columns
	koff           []int64
	rows           int64 // output rows per tile (divides oh)
	isa            vecISA
	lanes          vecISA // AVX2 with FMA within isa, for the depthwise lanes form (name "" where there is none)
	mr             int
	bmv, bnc       int   // the broadcast kernel's channel vectors x columns; bmv 0: the columns-in-lanes kernel
	kc             int64 // the broadcast kernel's input channels per pass (0: its default)
	l1d            int64 // the processor's L1d per core (bytes; 0: unknown)
	l2             int64 // the processor's L2 per core (bytes; 0: unknown)
	fastL2         bool  // the processor's L2 feeds full-width AVX-512 kernels (targets.Processor.FastL2)
	// tail is the broadcast kernel's channel vectors in the last channel
	// tile when bmv's do not divide the output channels (0 when they
	// do): V then has whole tiles of channels (vChannels), the last tile
	// calls a kernel of tail channel vectors, and the output stage
	// guards the channels past the last.
	tail int
	// outC is a packed convolution's output channels, which may be
	// fewer than its weight's (op.PackedChannels). No channel tile is
	// larger: the output stage would cut its V tile to them.
	outC int64
	// rowsForm: the depthwise rows form (dwconv_rows.go), compact V.
	rowsForm bool
	// rowsOuter: the row-tile loop runs outside the channel-tile loop
	// (packed convolutions whose input does not stay in L2; see
	// chooseLoopOrder).
	rowsOuter bool
	// vGlobal: the V tile is a global-scope buffer (on the heap, or a
	// workspace of an AOT build) instead of a stack array: the Winograd
	// row-tile form's tiles of every output channel outgrow vTileBytes.
	vGlobal bool
	// ic is the input's channels (per group).
	ic int64
}

// direct reports whether the plan reads its input where it lies, into
// compact V (see above): with the broadcast kernel, where the taps read
// every stride phase. Where they read only some (a 1x1 stride-2
// convolution reads a quarter of its input), a copy of those is smaller
// than the input that every channel tile would read again (resnet18's
// downsampling convolutions: 0.21-0.24 ms with the copy, 0.23-0.28
// without).
func (p *convPlan) direct() bool { return p.bmv > 0 && p.nph == p.g.sh && p.npw == p.g.sw }

// vRow is the distance of V's rows: the output width in the direct
// layout (compact V), the phase plane's width otherwise (virtual columns).
func (p *convPlan) vRow() int64 {
	if p.direct() || p.rowsForm {
		return p.g.ow
	}
	return p.wq
}

// tileCols is the V columns of a tile of r output rows.
func (p *convPlan) tileCols(r int64) int64 { return (r-1)*p.vRow() + p.g.ow }

// rowLen is the row length of the input the computes index: the padded
// width in the direct layout, the phase plane's otherwise.
func (p *convPlan) rowLen() int64 {
	if p.direct() {
		return p.wp
	}
	return p.wq
}

// chooseLoopOrder puts the row tiles outside the channel tiles for the
// columns kernel where the input a channel tile reads (ic planes) is over
// half the L2 and the weight (oc x ic x taps) within half of it: with
// the channel tiles outside, every tile of MR channels read the whole
// input again from L3 (mobilenet_v3_large's 16 -> 64 1x1 convolution on
// 112x112 read its 0.8 MB input 16 times); with the rows outside, a row
// tile's input stays in L1 for every channel tile and the weight in L2
// (that convolution 0.54 -> 0.50 ms, its 16 -> 16 one 0.20 -> 0.17, AVX2).
// The broadcast kernel's long reductions hide the input's stream: with
// the rows outside, resnet18's 64-channel 3x3 convolutions took 0.05-0.1
// ms longer each.
//
// With one channel tile the order is the same either way, and the row
// tiles outside are the parallel loop (with the channel tiles outside,
// squeezenet1_1's and mobilenet_v2's 16- to 48-channel convolutions ran
// on one thread).
func (p *convPlan) chooseLoopOrder(ic, oc, kk int64) {
	if p.g.oh/p.rows >= 2 && oc <= int64(p.mr) {
		p.rowsOuter = true
		return
	}
	if p.l2 <= 0 || p.bmv > 0 || int64(p.mr) >= oc || p.g.oh/p.rows < 2 {
		return
	}
	p.rowsOuter = ic*p.plane()*4 > p.l2/2 && oc*ic*kk*4 <= p.l2/2
}

// planPacked plans a packed convolution of an input of xShape with a
// packed weight of wShape: the micro-kernel (chooseBroadcast, or the
// call's tuning knobs) and with it the layout. Compute and schedule both
// call it, so that they agree.
func planPacked(c *strategy.Call, xShape, wShape ir.Shape) (*convPlan, error) {
	p, err := newPackedPlan(c, xShape, wShape)
	if err != nil {
		return nil, err
	}
	oc, ic, block := wShape[0]*wShape[4], wShape[1], wShape[4]
	p.chooseBroadcast(oc, ic, block)
	if err := p.applyKnobs(c.Knobs, oc, ic, block); err != nil {
		return nil, fmt.Errorf("%s: tuning knobs %s: %v", c.Op.Name, c.Knobs, err)
	}
	p.chooseLoopOrder(xShape[1], oc, int64(len(p.koff)))
	if p.direct() {
		p.jtot = p.tileCols(p.g.oh)
		p.koff = p.unsplit().tapOffsets(p.hp) // kh*dh*Wp + kw*dw
	}
	return p, nil
}

// newPackedPlan is the plan of a packed convolution with the columns
// kernel, before the choice of micro-kernel.
func newPackedPlan(c *strategy.Call, xShape, wShape ir.Shape) (*convPlan, error) {
	p, err := newConvPlan(c, xShape, wShape[2], wShape[3], wShape[4])
	if err != nil {
		return nil, err
	}
	if p.outC, err = op.PackedChannels(c.Attrs, wShape); err != nil {
		return nil, fmt.Errorf("%s: %v", c.Op.Name, err)
	}
	if mr := p.isa.columnsMR(wShape[4], p.outC); mr != p.mr {
		p.mr = mr
		p.chooseRows()
	}
	return p, nil
}

// newConvPlan plans a convolution of an input of xShape with a kh x kw
// kernel; the micro-kernel's rows divide block (the packed weight's
// block; 1 for a depthwise convolution, one channel per call).
func newConvPlan(c *strategy.Call, xShape ir.Shape, kh, kw, block int64) (*convPlan, error) {
	g, err := newConvGeom(c, kh, kw)
	if err != nil {
		return nil, err
	}
	proc := c.Target.Processor()
	p := &convPlan{g: g, isa: isaFor(proc), l1d: proc.L1D, l2: proc.L2, fastL2: proc.FastL2}
	p.lanes, _ = avx2Within(proc)
	p.mr = p.isa.columnsMR(block, block)
	p.ic = xShape[1]
	h, wd := xShape[2], xShape[3]
	needH := (g.oh-1)*g.sh + (g.kh-1)*g.dh + 1
	needW := (g.ow-1)*g.sw + (g.kw-1)*g.dw + 1
	p.hp = g.ph + h + max(needH-g.ph-h, 0)
	p.wp = g.pw + wd + max(needW-g.pw-wd, 0)
	p.hq, p.wq = ceilDiv(p.hp, g.sh), ceilDiv(p.wp, g.sw)
	p.nph, p.npw = usedPhases(g.sh, g.kh, g.dh), usedPhases(g.sw, g.kw, g.dw)
	p.jtot = (g.oh-1)*p.wq + g.ow
	p.koff = p.tapOffsets(p.hq)
	p.chooseRows()
	return p, nil
}

// usedPhases is how many of a stride s's phases the taps of a kernel of k
// taps with dilation d read, when those are phases 0, 1, ...: all of them
// are then laid out in X' and no others. A 1x1 stride-2 convolution reads
// only phase (0, 0): X' with all four planes copied the whole input for a
// quarter of it (resnet18's downsampling convolutions). Otherwise s.
func usedPhases(s, k, d int64) int64 {
	// The taps' phases (i*d) mod s repeat after s taps; no allocation
	// follows the stride, which comes from the model.
	seen := map[int64]bool{}
	for i := int64(0); i < min(k, s); i++ {
		seen[(i%s)*(d%s)%s] = true
	}
	for ph := range seen {
		if ph >= int64(len(seen)) {
			return s
		}
	}
	return int64(len(seen))
}

// tapOffsets lists KOFF(kh, kw), tap by tap, in X' whose phase planes
// have hq rows (the whole input's, or a tile's local copy's).
func (p *convPlan) tapOffsets(hq int64) []int64 {
	g := p.g
	koff := make([]int64, 0, g.kh*g.kw)
	for kh := int64(0); kh < g.kh; kh++ {
		for kw := int64(0); kw < g.kw; kw++ {
			rh, rw := kh*g.dh, kw*g.dw
			phase := (rh%g.sh)*p.npw + rw%g.sw
			koff = append(koff, phase*hq*p.wq+(rh/g.sh)*p.wq+rw/g.sw)
		}
	}
	return koff
}

// columnsMR is the columns kernel's rows for weight blocks of block and
// at most limit output channels: the instruction set's MR, halved until
// it divides the block and is within the limit (a tile of more channels
// than the output has would be cut to them, and no micro-kernel call
// could compute it).
func (v vecISA) columnsMR(block, limit int64) int {
	mr := v.mr
	for mr > 1 && (block%int64(mr) != 0 || int64(mr) > limit) {
		mr /= 2
	}
	return mr
}

// vTileBytes bounds the V tile (MR rows x the tile's columns), which
// lives on the stack: in L1, and within the stack budget of AOT builds.
const vTileBytes = 16384

// maxTileCols is the most V columns chooseRows gives a tile: 32 vectors,
// within vTileBytes for MR rows.
func (p *convPlan) maxTileCols() int64 {
	return min(int64(32*p.isa.lanes), vTileBytes/4/int64(max(p.mr, 1)))
}

// chooseRows sets the output rows per tile: whole rows dividing the
// map, a few register tiles' worth of columns, so that the tile stays
// in L1 and the epilogue runs over whole rows. Short reductions with the
// columns kernel may take fewer rows (shortTileRows).
func (p *convPlan) chooseRows() {
	g := p.g
	maxCols := p.maxTileCols()
	p.rows = 1
	for r := g.oh; r >= 1; r-- {
		if g.oh%r == 0 && p.tileCols(r) <= maxCols {
			p.rows = r
			break
		}
	}
	if r := p.shortTileRows(); r > 0 {
		p.rows = r
	}
}

// shortReduction is the most multiply-adds per output (input channels x
// taps) for which shortTileRows applies, and shortTileCols the fewest
// columns it gives a tile.
const (
	shortReduction = 128
	shortTileCols  = 96
)

// shortTileRows is the output rows per tile for a convolution with the
// columns kernel whose reduction is short (at most shortReduction
// multiply-adds per output), or 0 to keep p.rows: the fewest rows
// (dividing the map) whose columns fill at least two of the kernel's
// register tiles and shortTileCols, and whose vectors hold as large a
// share of valid columns as p.rows' do.
//
// With a short reduction the epilogue (V read back, a residual read, the
// output written, mostly beyond L2) costs about as much as the products;
// in small tiles it alternates with them, and the processor overlaps the
// one's memory traffic with the other's multiply-adds. On an Emerald
// Rapids core (in-model profiles, minima of three): resnet50's 64 -> 256
// and 128 -> 512 1x1 convolutions on 56x56 and 28x28 (tiles of 2 and 4
// rows instead of 8 and 14) 0.80-0.98 -> 0.72-0.88 ms each; in a C
// harness 52 convolutions of the shared models and the operator suite's
// networks 0.70-1.08 of their time (mobilenet_v2's
// 16 -> 96 on 112x112 0.52 -> 0.37 ms), AVX2 code 0.91-1.02. Two
// register tiles at least keep the kernel's last, partial one at most a
// third of the work: on 13x13 and 27x27 maps one row (13 columns) or
// three (81) made squeezenet1_1's 1x1 convolutions up to 50 % slower;
// on AVX2 (24-column register tiles) tiles of 56 columns made some of
// mobilenet_v2's 7-24 % slower, hence shortTileCols. And a tile whose
// last vector holds fewer valid columns loses more than the epilogue
// gains: on 14x14 maps 7 rows (98 columns, 7 vectors for 6.1) made
// mobilenet_v2's and mobilenet_v3_large's 1x1 convolutions 7-10 % slower
// than 14 (196 columns in 13 vectors).
func (p *convPlan) shortTileRows() int64 {
	if p.bmv > 0 || p.mr < 2 || p.rowsForm || p.ic*int64(len(p.koff)) > shortReduction {
		return 0
	}
	lanes := int64(p.isa.lanes)
	// fill is the share of the tile's vector lanes that hold output
	// columns (the virtual columns between rows hold none).
	fill := func(r int64) float64 {
		cols := p.tileCols(r)
		return float64(r*p.g.ow) / float64(ceilDiv(cols, lanes)*lanes)
	}
	least, want := max(2*int64(p.isa.nr)*lanes, shortTileCols), fill(p.rows)
	for r := int64(1); r < p.rows; r++ {
		if p.g.oh%r == 0 && p.tileCols(r) >= least && fill(r) >= want {
			return r
		}
	}
	return 0
}

// chooseBroadcast decides between the two micro-kernels of a packed
// convolution with oc output and ic input channels (weight blocks of
// block): the broadcast kernel (ukernel_bcast.go) computes no padding
// columns and loads no input vectors, but writes its accumulators one
// lane at a time, which pays off once every output takes enough
// multiply-adds (ic x taps). Its register tile is the instruction set's
// (bmv x bnc) when its channels tile the output channels, else one more
// channel vector with as many columns as the registers leave (24
// channels on AVX2: 3 x 4), else fewer channel vectors — but not one:
// a single channel vector loads one input per multiply-add (7 loads for
// 6 on AVX2, where squeezenet's 512→1000 classifier took 3.1 ms against
// 2.1 ms with the columns kernel). It is the default only where the
// processor's multiply-adds, not its loads, bound the kernels: on AVX2
// and on AVX-512 whose 512-bit operations run in two halves (Zen 4)
// from 64 multiply-adds per output (vecISA.bcastSteps). Where they run at
// full width with a fast L2 (Zen 5, Processor.FastL2) the columns kernel,
// with 11 loads per 24 multiply-adds against the broadcast kernel's 8
// per 12, was faster on 16 of squeezenet's 18 convolutions in kiln tune
// (by up to 3x: its 1x1 and short 3x3 reductions), the broadcast kernel
// with all input channels in one pass on resnet18's 3x3 convolutions
// from 128 channels (by up to 23 %) and on mobilenet_v2's 7x7 maps from
// 576 channels: there it is chosen from 1024 multiply-adds per output,
// 128 on maps of at most bcastSmallMap outputs, in one pass. Full-width
// AVX-512 without a fast L2 (Intel's server cores) chooses it from 512,
// 128 on such maps, in L1-sized passes (isaFor).
func (p *convPlan) chooseBroadcast(oc, ic, block int64) {
	if t, ok := p.isa.broadcastFor(oc, p.outC, ic*int64(len(p.koff)), block, p.g.oh*p.g.ow, ic); ok {
		p.bmv, p.bnc, p.tail, p.kc, p.mr = t.mv, t.nc, t.tail, t.kc, t.mv*p.isa.lanes
		p.chooseRows()
	}
}

// bcastChoice is the broadcast kernel's register tile, last channel
// tile and input channels per pass (0: bcastChunk's) as broadcastFor
// chooses them.
type bcastChoice struct {
	mv, nc, tail int
	kc           int64
}

// broadcastFor decides whether a convolution takes the broadcast kernel
// (chooseBroadcast's rule): oc weight channels (outC of them outputs) in
// blocks of block, steps multiply-adds per output, outputs outputs per
// channel, ic input channels.
func (v vecISA) broadcastFor(oc, outC, steps, block, outputs, ic int64) (bcastChoice, bool) {
	if v.bcastSteps == 0 || block%int64(v.lanes) != 0 {
		return bcastChoice{}, false
	}
	least := v.bcastSteps
	if outputs <= bcastSmallMap {
		least = v.bcastSmallSteps
	}
	if steps < least {
		return bcastChoice{}, false
	}
	mv, nc, tail := v.bcastTile(oc, block)
	if mv <= 1 || int64(mv*v.lanes) > outC {
		return bcastChoice{}, false
	}
	t := bcastChoice{mv: mv, nc: nc, tail: tail}
	if v.bcastOnePass {
		t.kc = ic
	}
	return t, true
}

// ConvPadBlock is the block to which target t would have a packed
// convolution's oc output channels padded with zero channels (0: none):
// where its vectors are wider than the blocks of 8 that oc allows
// (AVX-512: 16 lanes, oc an odd multiple of 8), the padding adds at most
// 1/maxTailShare of the channels, and its broadcast kernel, which holds
// output channels in the lanes, takes the convolution in blocks of its
// vector width (steps multiply-adds per output, outputs outputs per
// channel; broadcastFor). Otherwise the columns kernel runs it in blocks
// of 8, with up to 4 % of its lanes idle on a 13x13 map: on an Emerald
// Rapids core squeezenet1_1's 512 -> 1000 classifier took 1.31 ms so
// (in-model, minima of three profiles) and 1.20 as 1008 channels with
// the broadcast kernel. With AVX2 it was as fast either way (2.18 and
// 2.23 ms: 8 lanes divide 1000 and the kernel's last tile takes the odd
// vector).
func ConvPadBlock(t *targets.Target, steps, oc, outputs int64) int64 {
	if t == nil {
		return 0
	}
	v := isaFor(t.Processor())
	lanes := int64(v.lanes)
	if lanes <= 8 || oc%lanes == 0 {
		return 0
	}
	padded := ceilDiv(oc, lanes) * lanes
	if (padded-oc)*maxTailShare > oc {
		return 0
	}
	if _, ok := v.broadcastFor(padded, oc, steps, lanes, outputs, 0); !ok {
		return 0
	}
	return lanes
}

// bcastTile is the broadcast kernel's register tile (channel vectors x
// columns) for oc output channels in weight blocks of block, as
// chooseBroadcast describes, and the channel vectors of its last tile
// when it does not divide the channels (0 when it does): a tile of more
// than one channel vector that divides them, else the instruction set's
// tile with a smaller last one holding at most 1/maxTailShare of the
// channels (squeezenet1_1's 1000 channels: 62 tiles of 16 and one of 8
// on AVX2), else one channel vector; 0, 0, 0 when
// none tiles them.
func (v vecISA) bcastTile(oc, block int64) (mv, nc, tail int) {
	tiles := v.bcastTiles()
	for _, t := range tiles {
		if tl, ok := v.channelTiles(t[0], oc, block); ok && tl == 0 && t[0] > 1 {
			return t[0], t[1], 0
		}
	}
	if tl, ok := v.channelTiles(v.bmv, oc, block); ok && v.bmv > 1 && int64(tl*v.lanes)*maxTailShare <= oc {
		return v.bmv, v.bnc, tl
	}
	for _, t := range tiles {
		if tl, ok := v.channelTiles(t[0], oc, block); ok && tl == 0 {
			return t[0], t[1], 0
		}
	}
	return 0, 0, 0
}

// maxTailShare bounds the share of the output channels in a last,
// smaller broadcast tile by default (1/maxTailShare): its kernel has fewer
// multiply-adds per load (one channel vector on AVX2: 6 per 7 loads, not
// 12 per 8). squeezenet1_1's 512 -> 1000 classifier, 8 of 1000 channels
// in it: 2.48 -> 2.00 ms against the columns kernel; mobilenet_v3_large's
// 80 -> 200 (8 of 200) and 120 -> 40 (8 of 40) convolutions were 4-8 %
// slower than with the columns kernel (AVX2).
const maxTailShare = 32

// tailColumns is the columns of the broadcast kernel's last channel tile
// of tail channel vectors (bcastTiles' columns for it).
func (v vecISA) tailColumns(tail int) int {
	return min(v.bnc, v.bcastColumns(tail))
}

// bcastTiles lists the broadcast kernel's register tiles (channel
// vectors, columns) in order of preference: the instruction set's, one
// more channel vector with the columns the registers leave (when at least
// 3), then fewer channel vectors, from two on with more columns
// (fewerColumns; one channel vector loads a value per multiply-add
// whatever its columns).
func (v vecISA) bcastTiles() [][2]int {
	tiles := [][2]int{{v.bmv, v.bnc}}
	if nc := v.bcastColumns(v.bmv + 1); nc >= 3 {
		tiles = append(tiles, [2]int{v.bmv + 1, nc})
	}
	for mv := v.bmv - 1; mv >= 1; mv-- {
		nc := v.bnc
		if mv > 1 {
			nc = v.fewerColumns(mv)
		}
		tiles = append(tiles, [2]int{mv, nc})
	}
	return tiles
}

// fewerColumns is the columns of a broadcast tile of mv channel vectors,
// fewer than the instruction set's: as many as the registers hold, up to
// the instruction set's tile's accumulators (bmv x bnc), and at least its
// columns. With the columns of the full tile, two channel vectors on
// AVX-512 were 18 accumulators whose 11 loads per 18 multiply-adds held
// the kernel back: DenseNet's 128 -> 32 3x3 convolution on 56x56 took
// 1.93 ms with 9 columns and 1.49 with 12 (C harness, an Emerald Rapids
// core; the model 25.7 -> 22.7 ms).
func (v vecISA) fewerColumns(mv int) int {
	return max(v.bnc, min(v.bcastColumns(mv), v.bmv*v.bnc/mv))
}

// channelTiles reports whether tiles of mv channel vectors cover oc
// output channels in weight blocks of block (a multiple of the vector
// width, dividing oc): each within one block, or spanning whole blocks
// with at least one whole tile. tail is the channel vectors of the last tile when the tiles do not
// divide the channels, 0 when they do.
func (v vecISA) channelTiles(mv int, oc, block int64) (tail int, ok bool) {
	lanes := int64(v.lanes)
	mr := int64(mv) * lanes
	switch {
	case mv < 1 || block%lanes != 0 || oc%block != 0:
		return 0, false
	case mr <= block && block%mr == 0:
		return 0, true
	case mr%block == 0 && mr <= oc:
		return int(oc % mr / lanes), true
	}
	return 0, false
}

// vChannels is V's channels for oc output channels: whole tiles of the
// micro-kernel's rows.
func (p *convPlan) vChannels(oc int64) int64 {
	return ceilDiv(oc, int64(p.mr)) * int64(p.mr)
}

// plane is the size of one channel's plane of X': its nph x npw phase
// planes of Hq x Wq (in the direct layout, its one plane of Hp x Wp).
func (p *convPlan) plane() int64 {
	if p.direct() {
		return p.hp * p.wp
	}
	return p.nph * p.npw * p.hq * p.wq
}

// bcastSmallMap is the most outputs per channel (7x7 = 49 and smaller)
// for which vecISA.bcastSmallSteps applies.
const bcastSmallMap = 64

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// phased returns X' (see above): the padded, phase-split input, or x
// itself when there is neither padding nor stride. It is written as TIR:
// per batch, channel (the parallel loop) and phase, each row is
// either all padding or a run of zeros, a copy of the input row (with
// stride sw) and zeros again, with the bounds of the three runs known at
// compile time, so no element tests a bound.
//
// X' is [N, C, sh*sw*Hq*Wq], each plane flat, so that the computes index
// it with j + KOFF directly; pad is the value of the padding.
func (p *convPlan) phased(x *te.Tensor, pad tir.PrimExpr) *te.Tensor {
	if p.inPlace(x.Shape) {
		return x
	}
	n, ch := x.Shape[0], x.Shape[1]
	shape := ir.Shape{n, ch, p.plane()}
	return te.Extern("conv_pad", []ir.Shape{shape}, []ir.DType{x.DType}, []*te.Tensor{x}, func(ins, outs []*tir.Buffer) tir.Stmt {
		xb, ob := ins[0], outs[0]
		nv, cv := tir.NewVar("n", tir.Int32T), tir.NewVar("c", tir.Int32T)
		// Per row phase ph and phase row r, the input row is read once
		// for all sw column phases (while it is in L1).
		body := p.phaseRows(x.Shape[2], x.Shape[3], pad, tir.Idx(0), p.hq,
			func(row, col tir.PrimExpr) tir.PrimExpr { return tir.NewLoad(xb, nv, cv, row, col) },
			func(plane int64, r, col, v tir.PrimExpr) tir.Stmt {
				return tir.NewStore(ob, v, nv, cv, tir.Add(tir.Mul(tir.Add(tir.Idx(plane*p.hq), r), tir.Idx(p.wq)), col))
			})
		return tir.Loop(nv, n, tir.Serial, tir.Loop(cv, ch, tir.Parallel, body))
	})[0]
}

// unsplit is the plan's layout without stride phases, one phase plane of
// Hp x Wp: the input of the direct layout (see above).
func (p *convPlan) unsplit() *convPlan {
	q := *p
	q.g.sh, q.g.sw, q.nph, q.npw, q.hq, q.wq = 1, 1, 1, 1, p.hp, p.wp
	return &q
}

// padded returns the input of the direct layout: padded with pad to
// Hp x Wp, each plane flat, or x itself without padding (phased on the
// unsplit layout).
func (p *convPlan) padded(x *te.Tensor, pad tir.PrimExpr) *te.Tensor {
	return p.unsplit().phased(x, pad)
}

// xIndex indexes X' (or the input itself, 4-D) at flat position flat of
// plane (n, c).
func (p *convPlan) xIndex(xp *te.Tensor, n, c, flat tir.PrimExpr) []tir.PrimExpr {
	if len(xp.Shape) == 3 {
		return []tir.PrimExpr{n, c, flat}
	}
	wq := tir.Idx(p.rowLen())
	return []tir.PrimExpr{n, c, tir.FloorDiv(flat, wq), tir.FloorMod(flat, wq)}
}

// tapOffset is KOFF(kh, kw) as an expression of the reduce variables.
func (p *convPlan) tapOffset(rh, rw tir.PrimExpr) tir.PrimExpr {
	g := p.g
	dh, dw := tir.Mul(rh, tir.Idx(g.dh)), tir.Mul(rw, tir.Idx(g.dw))
	phase := tir.Add(tir.Mul(tir.FloorMod(dh, tir.Idx(g.sh)), tir.Idx(p.npw)), tir.FloorMod(dw, tir.Idx(g.sw)))
	return tir.Add(tir.Add(tir.Mul(phase, tir.Idx(p.hq*p.wq)), tir.Mul(tir.FloorDiv(dh, tir.Idx(g.sh)), tir.Idx(p.wq))), tir.FloorDiv(dw, tir.Idx(g.sw)))
}

func computeConvPackedCPU(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x, w := in[0], in[1]
	ot := c.OutTensor()
	p, err := planPacked(c, x.Shape, w.Shape)
	if err != nil {
		return nil, err
	}
	g := p.g
	rc := te.ReduceAxis(x.Shape[1], "ic")
	rh := te.ReduceAxis(g.kh, "kh")
	rw := te.ReduceAxis(g.kw, "kw")
	b := tir.Idx(w.Shape[4])
	var xp *te.Tensor
	var xFlat func(j tir.PrimExpr) tir.PrimExpr
	if p.direct() {
		xp = p.padded(x, nnZero(x.DType))
		ow := tir.Idx(g.ow)
		xFlat = func(j tir.PrimExpr) tir.PrimExpr {
			pos := tir.Add(tir.Mul(tir.FloorDiv(j, ow), tir.Idx(g.sh*p.wp)), tir.Mul(tir.FloorMod(j, ow), tir.Idx(g.sw)))
			return tir.Add(pos, tir.Add(tir.Mul(rh.Var, tir.Idx(g.dh*p.wp)), tir.Mul(rw.Var, tir.Idx(g.dw))))
		}
	} else {
		xp = p.phased(x, nnZero(x.DType))
		xFlat = func(j tir.PrimExpr) tir.PrimExpr { return tir.Add(j, p.tapOffset(rh.Var, rw.Var)) }
	}
	// V has whole channel tiles of the weight's channels (which may pad
	// the output's: op.PackedChannels); its rows past them (a last tile
	// of p.tail channel vectors computes none of them) repeat the last
	// channel's weights, so that V's definition reads within the weight.
	oc := w.Shape[0] * w.Shape[4]
	v := te.ComputeReduce(nnName(c)+"_block", ir.Shape{x.Shape[0], p.vChannels(oc), p.jtot}, convSum(targetHasFMA(c.Target)), []*te.IterVar{rc, rh, rw}, func(i []tir.PrimExpr) tir.PrimExpr {
		xv := xp.At(p.xIndex(xp, i[0], rc.Var, xFlat(i[2]))...)
		ch := i[1]
		if p.vChannels(oc) != oc {
			ch = tir.Min(ch, tir.Idx(oc-1))
		}
		wv := w.At(tir.FloorDiv(ch, b), rc.Var, rh.Var, rw.Var, tir.FloorMod(ch, b))
		return tir.Mul(xv, wv)
	}, te.WithTag(tagPackedBlock), te.WithAxisNames("n", "oc", "j"))
	out := te.Compute(nnName(c), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		return v.At(i[0], i[1], tir.Add(tir.Mul(i[2], tir.Idx(p.vRow())), i[3]))
	}, te.WithTag(tagPackedOut), te.WithAxisNames("n", "oc", "oh", "ow"))
	return []*te.Tensor{out}, nil
}

// convTile is the TensorIntrin of the V stage: one micro-kernel call per
// tile of mr channels x cols virtual columns, written into a buffer whose
// rows are ldv apart.
func (p *convPlan) convTile(xp, w *te.Tensor, ic int64, cols int64) te.TensorIntrin {
	return func(ctx *te.TensorizeContext) (tir.Stmt, error) {
		if len(ctx.Extent) != 3 || ctx.Extent[0] != 1 || ctx.Extent[1] != int64(p.mr) || ctx.Extent[2] != cols {
			return nil, fmt.Errorf("conv tile: extents %v, want [1 %d %d]", ctx.Extent, p.mr, cols)
		}
		ldv := ctx.Out.Shape[len(ctx.Out.Shape)-1]
		ics := p.plane()
		var k, tk tir.Kernel // tk: the last channel tile's (p.tail)
		var err error
		xStart := ctx.Axis[2]
		if p.bmv > 0 {
			g := p.g
			sp := bcastSpec{mv: p.bmv, nc: p.bnc, ic: ic, koff: p.koff, ics: ics,
				b: w.Shape[4], bs: ic * int64(len(p.koff)) * w.Shape[4], ldv: ldv, kc: p.kc, l1d: p.l1d, rows: (cols-g.ow)/p.vRow() + 1, ow: g.ow, wq: p.vRow()}
			if ch := int64(p.bmv * p.isa.lanes); ch%sp.b == 0 && w.Shape[0]*w.Shape[4] > ch && !p.isa.bcastNoPrefetch {
				// The next tile's weights: whole blocks further on. With
				// one tile there are none: the addresses past the weights
				// would fill L1 with lines nothing reads (resnet18's
				// 64-channel 3x3 convolutions prefetched four per step).
				sp.wpf = ch / sp.b * sp.bs
			}
			if p.direct() {
				// The input where it lies; the tile starts at output row
				// j0 / OW, input row that * SH.
				sp.xrs, sp.xcs = g.sh*p.wp, g.sw
				xStart = tir.Mul(tir.FloorDiv(ctx.Axis[2], tir.Idx(g.ow)), tir.Idx(g.sh*p.wp))
			}
			k, err = newBcastKernel(p.isa, sp)
			if err == nil && p.tail > 0 {
				// The last tile: tail channel vectors.
				sp.mv, sp.nc = p.tail, p.isa.tailColumns(p.tail)
				tk, err = newBcastKernel(p.isa, sp)
			}
		} else {
			var wpf int64
			if w.Shape[0] > 1 {
				wpf = w.Shape[1] * w.Shape[2] * w.Shape[3] * w.Shape[4] // the next block's
			}
			k, err = newConvKernel(p.isa, kernelSpec{mr: p.mr, ic: ic, koff: p.koff, ics: ics, ws: w.Shape[4], wm: 1, ldv: ldv, j: cols, wpf: wpf, xpf: p.prefetchInput(xp, ic)})
		}
		if err != nil {
			return nil, err
		}
		n0, oc0 := ctx.Axis[0], ctx.Axis[1]
		b := tir.Idx(w.Shape[4])
		xl, err := ctx.Load(xp, p.xIndex(xp, n0, tir.Idx(0), xStart)...)
		if err != nil {
			return nil, err
		}
		wl, err := ctx.Load(w, tir.FloorDiv(oc0, b), tir.Idx(0), tir.Idx(0), tir.Idx(0), tir.FloorMod(oc0, b))
		if err != nil {
			return nil, err
		}
		vl := tir.NewLoad(ctx.Out, ctx.OutIndex...)
		return tileCall(k, tk, oc0, int64(p.mr), w.Shape[0]*w.Shape[4], vl, xl, wl), nil
	}
}

// prefetchInput reports whether the columns kernel of a convolution of
// ic input channels (per group) reading xp prefetches the next register
// tile's input (kernelSpec.xpf): where its rows are more streams than
// the processor's prefetchers follow (xPrefetchChannels), the input does
// not stay in L2 (over half of it, as for chooseLoopOrder) and the kernel
// reads it where it lies (xp 4-D), so that it comes from L3 or memory. A
// padded or phase-split copy (xp 3-D) has just been written by the same
// function, and where the input stays in L2 the hints only cost:
// squeezenet1_1's 1x1 convolutions from 128 to 512 channels on 13x13 to
// 55x55 maps took 5-9 % longer with them (C harness).
//
// The broadcast kernel has no such hints. Prefetching the next pass's
// input in it took ResNet-50's 512 -> 128 1x1 convolution on 28x28 from
// 0.82 to 0.72 ms with AVX-512 code (16 passes of 32 channels), but with
// AVX2 code (2 passes of 128) its 256 -> 128 one on 56x56 from 3.3 to
// 4.4 ms and three others by 8-36 % (Emerald Rapids, in-model profiles).
func (p *convPlan) prefetchInput(xp *te.Tensor, ic int64) bool {
	return len(xp.Shape) == 4 && ic >= xPrefetchChannels && p.l2 > 0 && ic*p.plane()*4 > p.l2/2
}

// tileCall is a channel tile's micro-kernel call k(&v, &x, &w) for the
// tile of mr channels at oc0, or, with a last tile's kernel tk, the call
// of k or of tk by whether the tile's channels end within oc.
func tileCall(k, tk tir.Kernel, oc0 tir.PrimExpr, mr, oc int64, v, x, w *tir.BufferLoad) tir.Stmt {
	call := func(k tir.Kernel) tir.Stmt {
		return tir.Eval(tir.CallKernel(k, tir.AddressOf(v), tir.AddressOf(x), tir.AddressOf(w)))
	}
	if tk == nil {
		return call(k)
	}
	return tir.NewIf(tir.LE(tir.Add(oc0, tir.Idx(mr)), tir.Idx(oc)), call(k), call(tk))
}

func scheduleConvPackedCPU(c *strategy.Call, s *te.Schedule, outs, anchor []*te.Tensor) error {
	if len(anchor) != 1 {
		return fmt.Errorf("%s: want one anchor output", c.Op.Name)
	}
	vT := anchor[0].Op.InputTensors()[0]
	var xp, w *te.Tensor
	for _, t := range vT.Op.InputTensors() {
		switch len(t.Shape) {
		case 3, 4:
			xp = t
		case 5:
			w = t
		}
	}
	if xp == nil || w == nil {
		return fmt.Errorf("%s: unexpected convolution structure", c.Op.Name)
	}
	p, err := planPacked(c, c.ArgTensor(0).Shape, w.Shape)
	if err != nil {
		return err
	}
	ic := w.Shape[1]
	return p.scheduleTiles(s, outs, anchor[0], vT, int64(p.mr), func(cols int64) te.TensorIntrin { return p.convTile(xp, w, ic, cols) })
}

// scheduleTiles schedules a group whose anchor reads V (see above): the
// output stage tiled mr output channels by p.rows rows ((batch, channel
// tiles) parallel, the rows vectorised), V computed at the row-tile loop
// into a local buffer by the TensorIntrin tile(cols) builds — or, when
// tile or the intrin it builds is nil, by V's own loops with its taps
// unrolled outside the vectorised columns. A group with another structure computes V at root,
// whole rows per call, and gives its other outputs the injective
// schedule.
func (p *convPlan) scheduleTiles(s *te.Schedule, outs []*te.Tensor, anchor, vT *te.Tensor, mr int64, tile func(cols int64) te.TensorIntrin) error {
	s.AutoInlineInjective()
	vs := s.Stage(vT)
	o := epilogueStage(s, outs, anchor, vs)
	if o == nil {
		ax := vs.Axis()
		outer := ax[0]
		inner := ax[2]
		if mr > 1 {
			ocO, ocI := vs.Split(ax[1], mr)
			vs.Reorder(ax[0], ocO, ocI, ax[2])
			outer, inner = vs.Fuse(ax[0], ocO), ocI
		} else {
			outer = vs.Fuse(ax[0], ax[1])
		}
		vs.Parallel(outer)
		if ti := tileOf(tile, p.jtot); ti != nil {
			vs.Tensorize(inner, ti)
		} else {
			p.tapsOutside(vs)
		}
		for _, t := range outs {
			if _, ok := t.Op.(*te.ComputeOp); ok && t != vT {
				flattenParallel(s.Stage(t))
			}
		}
		return s.Err()
	}
	ax := o.Axis()
	ocO, ocI := ax[1], ax[1]
	if mr > 1 {
		ocO, ocI = o.Split(ax[1], mr)
	}
	ohO, ohI := o.Split(ax[2], p.rows)
	// V is computed at the inner of the two tile loops; the outer one,
	// fused with the batch, runs in parallel.
	outer, at := ocO, ohO
	switch {
	case p.rowsOuter && mr > 1:
		o.Reorder(ax[0], ohO, ocO, ocI, ohI, ax[3])
		outer, at = ohO, ocO
	case mr > 1:
		o.Reorder(ax[0], ocO, ohO, ocI, ohI, ax[3])
	default:
		o.Reorder(ax[0], ocO, ohO, ohI, ax[3])
	}
	// Both tile loops run in parallel: resnet18's Winograd layers have
	// 7 row tiles on 56x56 (the outer loop), which 2 threads split 4/3.
	par := o.Fuse(o.Fuse(ax[0], outer), at)
	o.Parallel(par)
	o.Vectorize(ax[3])
	vs.ComputeAt(o, par)
	if p.vGlobal {
		vs.SetScope(tir.ScopeGlobal)
	} else {
		vs.SetScope(tir.ScopeLocal)
	}
	if ti := tileOf(tile, p.tileCols(p.rows)); ti != nil {
		vs.Tensorize(vs.Axis()[0], ti)
	} else {
		p.tapsOutside(vs)
	}
	return s.Err()
}

// tileOf is tile(cols), or nil without tile.
func tileOf(tile func(cols int64) te.TensorIntrin, cols int64) te.TensorIntrin {
	if tile == nil {
		return nil
	}
	return tile(cols)
}

// tapsOutside orders V's loops for a schedule without a micro-kernel:
// the taps (unrolled when there are at most 25, so that each is one
// contiguous loop) outside the vectorised columns.
func (p *convPlan) tapsOutside(vs *te.Stage) {
	j, red := vs.Axis()[2], vs.ReduceAxes()
	var order []*te.IterVar
	for _, l := range vs.Leaves() {
		if l != j && l.Kind != te.Reduce {
			order = append(order, l)
		}
	}
	vs.Reorder(append(append(order, red...), j)...)
	if int64(len(p.koff)) <= 25 {
		for _, r := range red {
			vs.Unroll(r)
		}
	}
	vs.Vectorize(j)
}

// The depthwise convolution (groups = input channels = output channels)
// uses the same layout: V[n, c, j] = sum over (kh, kw) of
// X'[n, c, flat j + KOFF] * W[c, 0, kh, kw], one channel per micro-kernel
// call (rows do not share inputs), with more column vectors per register
// tile since each accumulator needs its own input load.

func computeDepthwiseCPU(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x, w := in[0], in[1]
	ot := c.OutTensor()
	p, err := newConvPlan(c, x.Shape, w.Shape[2], w.Shape[3], 1)
	if err != nil {
		return nil, err
	}
	g := p.g
	if dwRowsFor(p, x.Shape, x.DType) {
		p.useRows()
	}
	rh := te.ReduceAxis(g.kh, "kh")
	rw := te.ReduceAxis(g.kw, "kw")
	zero := nnZero(x.DType)
	v := te.ComputeReduce(nnName(c)+"_dw", ir.Shape{x.Shape[0], ot.Shape[1], p.jtot}, convSum(targetHasFMA(c.Target)), []*te.IterVar{rh, rw}, func(i []tir.PrimExpr) tir.PrimExpr {
		return tir.Mul(p.padLoad(x, i[0], i[1], i[2], rh.Var, rw.Var, zero), w.At(i[1], tir.Idx(0), rh.Var, rw.Var))
	}, te.WithTag(tagDepthwise), te.WithAxisNames("n", "c", "j"))
	out := te.Compute(nnName(c), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		return v.At(i[0], i[1], tir.Add(tir.Mul(i[2], tir.Idx(p.vRow())), i[3]))
	}, te.WithTag(tagDepthOut), te.WithAxisNames("n", "c", "oh", "ow"))
	return []*te.Tensor{out}, nil
}

// depthwiseTile is the TensorIntrin of the depthwise V stage: one
// channel's cols virtual columns per call of the micro-kernel, on the
// tile's rows of X' copied locally (localTile).
func (p *convPlan) depthwiseTile(x, w *te.Tensor, cols int64) te.TensorIntrin {
	return p.localTile(x, nnZero(x.DType), cols, func(ctx *te.TensorizeContext, xb *tir.Buffer, koff []int64, plane, cols int64) (tir.Stmt, error) {
		k, err := newConvKernel(p.isa, kernelSpec{mr: 1, nr: p.isa.dwnr, ic: 1, koff: koff, xm: plane,
			ws: 1, wm: int64(len(koff)), ldv: ctx.Out.Shape[len(ctx.Out.Shape)-1], j: cols})
		if err != nil {
			return nil, err
		}
		if k.xSpan > plane {
			return nil, fmt.Errorf("depthwise tile: the kernel reads %d elements of a %d-element tile", k.xSpan, plane)
		}
		wl, err := ctx.Load(w, ctx.Axis[1], tir.Idx(0), tir.Idx(0), tir.Idx(0))
		if err != nil {
			return nil, err
		}
		vl := tir.NewLoad(ctx.Out, ctx.OutIndex...)
		return tir.Eval(tir.CallKernel(k, tir.AddressOf(vl), tir.AddressOf(tir.NewLoad(xb, tir.Idx(0))), tir.AddressOf(wl))), nil
	})
}

func scheduleDepthwiseCPU(c *strategy.Call, s *te.Schedule, outs, anchor []*te.Tensor) error {
	if len(anchor) != 1 {
		return fmt.Errorf("%s: want one anchor output", c.Op.Name)
	}
	vT := anchor[0].Op.InputTensors()[0]
	ins := vT.Op.InputTensors()
	var x, w *te.Tensor
	for _, t := range ins {
		if t.Shape.Equal(c.ArgTensor(1).Shape) && w == nil {
			w = t
		} else {
			x = t
		}
	}
	if x == nil || w == nil {
		return fmt.Errorf("%s: unexpected depthwise structure", c.Op.Name)
	}
	p, err := newConvPlan(c, c.ArgTensor(0).Shape, w.Shape[2], w.Shape[3], 1)
	if err != nil {
		return err
	}
	if dwRowsFor(p, x.Shape, x.DType) {
		p.useRows()
		return p.scheduleTiles(s, outs, anchor[0], vT, 1, func(cols int64) te.TensorIntrin { return p.rowsTile(x, w, cols) })
	}
	if dwLanesFor(p, x.Shape) {
		// Eight channels per tile (dwconv_lanes.go); with one channel
		// tile, the row tiles are the parallel loop.
		p.mr, p.rows = dwLanes, p.lanesRows()
		p.rowsOuter = x.Shape[1] <= dwLanes && p.g.oh/p.rows >= 2
		return p.scheduleTiles(s, outs, anchor[0], vT, dwLanes, func(cols int64) te.TensorIntrin { return p.lanesTile(x, w, cols) })
	}
	return p.scheduleTiles(s, outs, anchor[0], vT, 1, func(cols int64) te.TensorIntrin { return p.depthwiseTile(x, w, cols) })
}

// Grouped convolutions (and groups-1 convolutions with an unpacked OIHW
// weight) use the packed convolution's layout and micro-kernel with the
// weight read in place: a tile of MR output channels lies in one group
// (MR divides the group's output channels), reads that group's input
// channels, and broadcasts each row's weight from W[oc, ic, kh, kw]
// (rows ICg*KH*KW apart).

func computeGroupedCPU(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x, w := in[0], in[1]
	ot := c.OutTensor()
	groups := c.Attrs["groups"].(int64)
	ocg, icg := w.Shape[0]/groups, w.Shape[1]
	p, err := newConvPlan(c, x.Shape, w.Shape[2], w.Shape[3], ocg)
	if err != nil {
		return nil, err
	}
	xp := p.phased(x, nnZero(x.DType))
	rc := te.ReduceAxis(icg, "ic")
	rh := te.ReduceAxis(p.g.kh, "kh")
	rw := te.ReduceAxis(p.g.kw, "kw")
	v := te.ComputeReduce(nnName(c)+"_block", ir.Shape{x.Shape[0], ot.Shape[1], p.jtot}, convSum(targetHasFMA(c.Target)), []*te.IterVar{rc, rh, rw}, func(i []tir.PrimExpr) tir.PrimExpr {
		ic := tir.Add(tir.Mul(tir.FloorDiv(i[1], tir.Idx(ocg)), tir.Idx(icg)), rc.Var)
		xv := xp.At(p.xIndex(xp, i[0], ic, tir.Add(i[2], p.tapOffset(rh.Var, rw.Var)))...)
		return tir.Mul(xv, w.At(i[1], rc.Var, rh.Var, rw.Var))
	}, te.WithTag(tagPackedBlock), te.WithAxisNames("n", "oc", "j"))
	out := te.Compute(nnName(c), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		return v.At(i[0], i[1], tir.Add(tir.Mul(i[2], tir.Idx(p.wq)), i[3]))
	}, te.WithTag(tagPackedOut), te.WithAxisNames("n", "oc", "oh", "ow"))
	return []*te.Tensor{out}, nil
}

// groupedTile is the TensorIntrin of the grouped V stage.
func (p *convPlan) groupedTile(xp, w *te.Tensor, ocg int64, cols int64) te.TensorIntrin {
	icg := w.Shape[1]
	kk := int64(len(p.koff))
	return func(ctx *te.TensorizeContext) (tir.Stmt, error) {
		if len(ctx.Extent) != 3 || ctx.Extent[0] != 1 || ctx.Extent[1] != int64(p.mr) || ctx.Extent[2] != cols {
			return nil, fmt.Errorf("grouped conv tile: extents %v, want [1 %d %d]", ctx.Extent, p.mr, cols)
		}
		k, err := newConvKernel(p.isa, kernelSpec{mr: p.mr, ic: icg, koff: p.koff, ics: p.plane(),
			ws: 1, wm: icg * kk, ldv: ctx.Out.Shape[len(ctx.Out.Shape)-1], j: cols})
		if err != nil {
			return nil, err
		}
		n0, oc0, j0 := ctx.Axis[0], ctx.Axis[1], ctx.Axis[2]
		ic0 := tir.Mul(tir.FloorDiv(oc0, tir.Idx(ocg)), tir.Idx(icg))
		xl, err := ctx.Load(xp, p.xIndex(xp, n0, ic0, j0)...)
		if err != nil {
			return nil, err
		}
		wl, err := ctx.Load(w, oc0, tir.Idx(0), tir.Idx(0), tir.Idx(0))
		if err != nil {
			return nil, err
		}
		vl := tir.NewLoad(ctx.Out, ctx.OutIndex...)
		return tir.Eval(tir.CallKernel(k, tir.AddressOf(vl), tir.AddressOf(xl), tir.AddressOf(wl))), nil
	}
}

func scheduleGroupedCPU(c *strategy.Call, s *te.Schedule, outs, anchor []*te.Tensor) error {
	if len(anchor) != 1 {
		return fmt.Errorf("%s: want one anchor output", c.Op.Name)
	}
	vT := anchor[0].Op.InputTensors()[0]
	wShape := c.ArgTensor(1).Shape
	// V's body reads the (phased) input, then the weight.
	ins := vT.Op.InputTensors()
	if len(ins) != 2 || !ins[1].Shape.Equal(wShape) {
		return fmt.Errorf("%s: unexpected convolution structure", c.Op.Name)
	}
	xp, w := ins[0], ins[1]
	groups := c.Attrs["groups"].(int64)
	ocg := wShape[0] / groups
	p, err := newConvPlan(c, c.ArgTensor(0).Shape, wShape[2], wShape[3], ocg)
	if err != nil {
		return err
	}
	return p.scheduleTiles(s, outs, anchor[0], vT, int64(p.mr), func(cols int64) te.TensorIntrin { return p.groupedTile(xp, w, ocg, cols) })
}
