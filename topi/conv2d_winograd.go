package topi

import (
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// nn.contrib_conv2d_winograd (graph/op/nn_winograd.go): a 3x3 stride-1
// convolution by F(2x2, 3x3) Winograd, with the weight U transformed at
// compile time ([16, OC/B, IC, B]). Output tile (th, tw) covers output
// rows 2*th, 2*th+1 and columns 2*tw, 2*tw+1; TH x TW tiles cover the
// output (the last row or column of tiles half outside it when OH or OW
// is odd). Three stages:
//
//  1. D[n, xi, ic, th*TW + tw] = (B^T d B)[xi/4][xi%4], d the 4x4 tile of
//     the padded input at row 2*th, column 2*tw: per channel plane, one
//     call of the input-transform kernel (ukernel_winograd.go) on the
//     input padded to Hp = 2*TH + 2 rows of Wp = 2*TW + 2 (the direct
//     layout's padding, conv2d_mk.go).
//  2. V[n, oc, r*OWp + c] (OWp = 2*TW; r < 2*TH): the output before the
//     epilogue, A^T M A of M[xi] = sum over ic of U[xi, oc, ic] *
//     D[n, xi, ic, tile]. Per tile of MR channels and R = 2*R2 output
//     rows, computed at the output stage's loops like a packed
//     convolution's V: sixteen calls of a convolution micro-kernel (each
//     a 1x1 convolution of D's plane xi with U's, R2*TW columns, into a
//     local buffer M) and one of the output-transform kernel.
//  3. The output stage reads V and applies the fused epilogue, tiled MR
//     channels by R rows, the rows outside (each row tile's D stays in
//     L2 for every channel tile).
//
// Multiplications: 16 per tile, input and output channel, against 36 for
// the direct convolution's 2x2 outputs.

// wgPlan is the layout and tiling of one Winograd convolution.
type wgPlan struct {
	*convPlan             // rows (R), mr, the V row (wq = OWp) and loop order for scheduleTiles
	th, tw    int64       // tiles
	owp       int64       // V's row length, 2*TW
	r2        int64       // tile rows per V tile (R/2)
	gemm      bcastChoice // the products' kernel (mv 0: the columns kernel)
	// local selects the row-tile form (wgTileLocal): stage 1 runs in
	// each tile of output rows, for every input channel, into a buffer
	// of that tile's transformed input, and the tile has every output
	// channel, sub of them per product call. The whole transformed
	// input never exists.
	local bool
	sub   int64
}

// wgScratchBytes bounds stage 2's local buffer M (one row of the 4x4
// products at a time: 4 x MR x R2*TW floats), on the stack next to the
// V tile: within the C code's stack limit (AOT builds allocate nothing
// else), and for 16 channels up to 64 tiles (a 14x14 map's 49 in one
// tile; two rows of a 56-wide map's).
const wgScratchBytes = 16384

// planWinograd plans a Winograd convolution of an input of xShape with a
// transformed weight of wShape.
func planWinograd(c *strategy.Call, xShape, wShape ir.Shape) (*wgPlan, error) {
	g, err := newConvGeom(c, 3, 3)
	if err != nil {
		return nil, err
	}
	if g.sh != 1 || g.sw != 1 || g.dh != 1 || g.dw != 1 {
		return nil, fmt.Errorf("%s: stride and dilation must be 1", c.Op.Name)
	}
	proc := c.Target.Processor()
	p := &wgPlan{convPlan: &convPlan{g: g, isa: isaFor(proc), l2: proc.L2, nph: 1, npw: 1}}
	p.th, p.tw = ceilDiv(g.oh, 2), ceilDiv(g.ow, 2)
	p.owp = 2 * p.tw
	cp := p.convPlan
	cp.hp, cp.wp = 2*p.th+2, 2*p.tw+2
	cp.hq, cp.wq = cp.hp, cp.wp
	cp.koff = []int64{0}
	oc, ic, block := wShape[1]*wShape[3], wShape[2], wShape[3]
	cp.outC = oc
	cp.mr = cp.isa.columnsMR(block, oc)
	// The products are 1x1 convolutions of IC channels on R2*TW columns:
	// the broadcast kernel where chooseBroadcast would take it for one.
	if t, ok := cp.isa.broadcastFor(oc, oc, ic, block, p.tw, ic); ok {
		p.gemm, cp.mr = t, t.mv*cp.isa.lanes
	}
	// V's rows are OWp apart (the columns kernel's layout, bmv 0 in the
	// plan), its tile (R-1)*OWp + OW columns.
	cp.wq = p.owp
	cp.jtot = 2 * p.th * p.owp
	if t, ok := cp.isa.rowTileGemm(ic, oc, block); ok && wgLocalWorth(proc.L2, ic, oc, p.th*p.tw) {
		p.gemm = t
		p.planLocal(oc)
		return p, nil
	}
	// R: all output rows in one tile when its M and V tile fit their
	// budgets (each product call then has every tile of the map as
	// columns, for each weight it loads); else 2*R2 rows, R2 the most
	// tile rows within the budgets that divides TH (so that V's tiles
	// stay within its 2*TH rows), R under OH (a single tile taller than
	// the output would be cut to it).
	fits := func(r2, rows int64) bool {
		return 4*int64(cp.mr)*r2*p.tw*4 <= wgScratchBytes && int64(cp.mr)*cp.tileCols(rows)*4 <= vTileBytes
	}
	if !fits(1, min(2, g.oh)) {
		// Too wide for the broadcast kernel's channels: the columns
		// kernel's (at most 8; wgFits).
		p.gemm, cp.mr = bcastChoice{}, cp.isa.columnsMR(block, oc)
	}
	if !fits(1, min(2, g.oh)) {
		return nil, fmt.Errorf("%s: a row of %d tiles does not fit the %d-byte scratch", c.Op.Name, p.tw, wgScratchBytes)
	}
	p.r2, cp.rows = 1, min(2, g.oh)
	if fits(p.th, g.oh) {
		p.r2, cp.rows = p.th, g.oh
	} else {
		for r2 := p.th; r2 >= 1; r2-- {
			if p.th%r2 == 0 && 2*r2 < g.oh && fits(r2, 2*r2) {
				p.r2, cp.rows = r2, 2*r2
				break
			}
		}
	}
	// Rows outside: each row tile's D stays in L2 for every channel
	// tile, and with one channel tile the row tiles are the parallel
	// loop.
	cp.rowsOuter = g.oh > cp.rows
	return p, nil
}

// wgLocalCols bounds the tiles (columns of the products) of one row tile
// in the row-tile form.
const wgLocalCols = 32

// wgLocalWorth reports whether a Winograd convolution of ic -> oc
// channels on tiles 2x2 tiles takes the row-tile form: where its whole
// transformed input would take over half of an L2 of l2 bytes (1 MiB
// when unknown) and its transformed weight, which every row tile reads
// again, fits in it. On an Emerald Rapids core (2 MiB L2), minima of
// three in-model profiles, whole -> row tiles: resnet18's 128 -> 128 on
// 28x28 (1.6 MB of transformed input, 1 MB of weight) 1.23-1.28 ->
// 1.07-1.12 ms (AVX2 code 1.83 -> 1.73), its 64 -> 64 on 56x56 (3.2 MB;
// direct on AVX-512 before, 1.60-1.72 ms) 1.19-1.30 (AVX2 2.2-2.5 ->
// 1.70-1.83), googlenet's 64 -> 192 on 56x56 3.90 -> 3.33-3.39 (AVX2
// 5.86 -> 4.90). But where the weight outgrows L2, every row tile reads
// it from L3 (AVX2, resnet18's 256 -> 256 on 14x14, 4 MB: 2.0 -> 2.65),
// and with the input in L2 the whole form is as fast (squeezenet1_1's
// 16 -> 64 on 55x55, 0.8 MB: 0.49 -> 0.65, its 16 input channels too few
// for a row tile's transforms).
func wgLocalWorth(l2, ic, oc, tiles int64) bool {
	if l2 <= 0 {
		l2 = 1 << 20
	}
	const bytes = op.WinogradTile * 4
	return 2*bytes*ic*tiles > l2 && bytes*ic*oc <= l2
}

// rowTileGemm is the row-tile form's products kernel for ic -> oc
// channels in weight blocks of block, and whether there is one: the
// broadcast kernel with whole tiles of channels, whatever the reduction
// (its columns are a row tile's tiles; chooseBroadcast's bound on the
// reduction is the direct convolutions').
func (v vecISA) rowTileGemm(ic, oc, block int64) (bcastChoice, bool) {
	t, ok := v.broadcastFor(oc, oc, math.MaxInt32, block, math.MaxInt32, ic)
	return t, ok && t.tail == 0
}

// WinogradRowTiles reports whether target t runs the Winograd form of an
// ic -> oc convolution with a weight in blocks of block channels by row
// tiles where its transformed input would not stay in L2 (the pass
// alter_conv_layout's transform.ConvLayoutOptions.WinogradRowTiles).
func WinogradRowTiles(t *targets.Target, ic, oc, block int64) bool {
	if t == nil {
		return false
	}
	_, ok := isaFor(t.Processor()).rowTileGemm(ic, oc, block)
	return ok
}

// planLocal sets the row-tile form's tiling: every output channel in one
// tile, sub per product call; R2 the most tile rows that divide TH within
// wgLocalCols tiles (at least one).
func (p *wgPlan) planLocal(oc int64) {
	cp, g := p.convPlan, p.g
	p.local = true
	p.sub = int64(p.gemm.mv * cp.isa.lanes)
	cp.mr = int(ceilDiv(oc, p.sub) * p.sub)
	p.r2 = 1
	for r2 := p.th; r2 > 1; r2-- {
		if p.th%r2 == 0 && (r2 == p.th || 2*r2 < g.oh) && r2*p.tw <= wgLocalCols {
			p.r2 = r2
			break
		}
	}
	cp.rows = min(2*p.r2, g.oh)
	cp.rowsOuter = g.oh > cp.rows
	cp.vGlobal = true
}

// wgFits reports whether the CPU schedule takes a Winograd convolution
// with an output of width ow (its scratch for a row of tiles within
// budget for 8 channels at the least).
func wgFits(ow int64) bool { return 4*8*ceilDiv(ow, 2)*4 <= wgScratchBytes }

// winogradAt is A^T[i][r] of F(2x2, 3x3) as an expression (i in 0..1, r
// in 0..3): [1 1 1 0; 0 1 -1 -1].
func winogradAt(dt ir.DType, i, r tir.PrimExpr) tir.PrimExpr {
	one, zero, neg := tir.FloatConst(dt, 1), tir.FloatConst(dt, 0), tir.FloatConst(dt, -1)
	row0 := tir.IfThenElseExpr(tir.LT(r, tir.Idx(3)), one, zero)
	row1 := tir.IfThenElseExpr(tir.EQ(r, tir.Idx(0)), zero, tir.IfThenElseExpr(tir.EQ(r, tir.Idx(1)), one, neg))
	return tir.IfThenElseExpr(tir.EQ(i, tir.Idx(0)), row0, row1)
}

// winogradBt is B^T[i][r] of F(2x2, 3x3) as an expression (i, r in
// 0..3): [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
func winogradBt(dt ir.DType, i, r tir.PrimExpr) tir.PrimExpr {
	rows := [4][4]float64{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}}
	pick := func(vals [4]float64) tir.PrimExpr {
		e := tir.PrimExpr(tir.FloatConst(dt, vals[3]))
		for k := 2; k >= 0; k-- {
			e = tir.IfThenElseExpr(tir.EQ(r, tir.Idx(int64(k))), tir.FloatConst(dt, vals[k]), e)
		}
		return e
	}
	e := pick(rows[3])
	for k := 2; k >= 0; k-- {
		e = tir.IfThenElseExpr(tir.EQ(i, tir.Idx(int64(k))), pick(rows[k]), e)
	}
	return e
}

// winogradStages builds stages 2 and 3 on D (any producer of [N, 16, IC,
// TH*TW]) and the transformed weight: V as the sum the op defines, and
// the output reading it.
func (p *wgPlan) winogradStages(c *strategy.Call, d, w *te.Tensor) *te.Tensor {
	return p.stagesOn(c, w, nil, func(n, xi, ic, tile tir.PrimExpr) tir.PrimExpr { return d.At(n, xi, ic, tile) })
}

// winogradStagesLocal builds stages 2 and 3 of the row-tile form on the
// padded input xp itself (flat planes of Hp x Wp, or the input as it is):
// V's definition sums B^T d B over the tile's 4x4 inputs in place of D.
func (p *wgPlan) winogradStagesLocal(c *strategy.Call, xp, w *te.Tensor) *te.Tensor {
	dt := xp.DType
	ra, rb := te.ReduceAxis(4, "r"), te.ReduceAxis(4, "c")
	return p.stagesOn(c, w, []*te.IterVar{ra, rb}, func(n, xi, ic, tile tir.PrimExpr) tir.PrimExpr {
		row := tir.Add(tir.Mul(tir.FloorDiv(tile, tir.Idx(p.tw)), tir.Idx(2)), ra.Var)
		col := tir.Add(tir.Mul(tir.FloorMod(tile, tir.Idx(p.tw)), tir.Idx(2)), rb.Var)
		coef := tir.Mul(winogradBt(dt, tir.FloorDiv(xi, tir.Idx(4)), ra.Var), winogradBt(dt, tir.FloorMod(xi, tir.Idx(4)), rb.Var))
		return tir.Mul(coef, xp.At(p.xpIndex(xp, n, ic, row, col)...))
	})
}

// xpIndex indexes the padded input xp (flat planes of Hp x Wp, or the
// input itself, 4-D) at row and col of plane (n, c).
func (p *wgPlan) xpIndex(xp *te.Tensor, n, c, row, col tir.PrimExpr) []tir.PrimExpr {
	if len(xp.Shape) == 3 {
		return []tir.PrimExpr{n, c, tir.Add(tir.Mul(row, tir.Idx(p.wp)), col)}
	}
	return []tir.PrimExpr{n, c, row, col}
}

// stagesOn builds V and the output stage with D's element (n, xi, ic,
// tile) as dAt, a sum over extra (with V's own reduce axes).
func (p *wgPlan) stagesOn(c *strategy.Call, w *te.Tensor, extra []*te.IterVar, dAt func(n, xi, ic, tile tir.PrimExpr) tir.PrimExpr) *te.Tensor {
	ot := c.OutTensor()
	dt := ot.DType
	b := tir.Idx(w.Shape[3])
	rc := te.ReduceAxis(w.Shape[2], "ic")
	rx := te.ReduceAxis(op.WinogradTile, "xi")
	owp := tir.Idx(p.owp)
	// V has whole channel tiles; rows past the output channels repeat
	// the last channel (see computeConvPackedCPU).
	oc := ot.Shape[1]
	axes := append([]*te.IterVar{rc, rx}, extra...)
	v := te.ComputeReduce(nnName(c)+"_wg", ir.Shape{ot.Shape[0], p.vChannels(oc), p.jtot}, convSum(targetHasFMA(c.Target)), axes, func(i []tir.PrimExpr) tir.PrimExpr {
		row, col := tir.FloorDiv(i[2], owp), tir.FloorMod(i[2], owp)
		tile := tir.Add(tir.Mul(tir.FloorDiv(row, tir.Idx(2)), tir.Idx(p.tw)), tir.FloorDiv(col, tir.Idx(2)))
		coef := tir.Mul(winogradAt(dt, tir.FloorMod(row, tir.Idx(2)), tir.FloorDiv(rx.Var, tir.Idx(4))),
			winogradAt(dt, tir.FloorMod(col, tir.Idx(2)), tir.FloorMod(rx.Var, tir.Idx(4))))
		ch := i[1]
		if p.vChannels(oc) != oc {
			ch = tir.Min(ch, tir.Idx(oc-1))
		}
		uv := w.At(rx.Var, tir.FloorDiv(ch, b), rc.Var, tir.FloorMod(ch, b))
		return tir.Mul(coef, tir.Mul(uv, dAt(i[0], rx.Var, rc.Var, tile)))
	}, te.WithTag(tagPackedBlock), te.WithAxisNames("n", "oc", "j"))
	return te.Compute(nnName(c), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		return v.At(i[0], i[1], tir.Add(tir.Mul(i[2], owp), i[3]))
	}, te.WithTag(tagPackedOut), te.WithAxisNames("n", "oc", "oh", "ow"))
}

// computeWinogradGeneric is the op as plain TE stages (any float type,
// any target): D as the sum over the tile of B^T d B, then V and the
// output.
func computeWinogradGeneric(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x, w := in[0], in[1]
	p, err := planWinograd(c, x.Shape, w.Shape)
	if err != nil {
		return nil, err
	}
	dt := x.DType
	ra, rb := te.ReduceAxis(4, "r"), te.ReduceAxis(4, "c")
	g := p.g
	h, wd := x.Shape[2], x.Shape[3]
	d := te.ComputeReduce(nnName(c)+"_wg_in", ir.Shape{x.Shape[0], op.WinogradTile, x.Shape[1], p.th * p.tw}, te.Sum, []*te.IterVar{ra, rb}, func(i []tir.PrimExpr) tir.PrimExpr {
		th, tw := tir.FloorDiv(i[3], tir.Idx(p.tw)), tir.FloorMod(i[3], tir.Idx(p.tw))
		r := tir.Sub(tir.Add(tir.Mul(th, tir.Idx(2)), ra.Var), tir.Idx(g.ph))
		col := tir.Sub(tir.Add(tir.Mul(tw, tir.Idx(2)), rb.Var), tir.Idx(g.pw))
		in := tir.And(tir.And(tir.GE(r, tir.Idx(0)), tir.LT(r, tir.Idx(h))), tir.And(tir.GE(col, tir.Idx(0)), tir.LT(col, tir.Idx(wd))))
		xv := nnGuard(in, x.At(i[0], i[2], r, col), nnZero(dt))
		coef := tir.Mul(winogradBt(dt, tir.FloorDiv(i[1], tir.Idx(4)), ra.Var), winogradBt(dt, tir.FloorMod(i[1], tir.Idx(4)), rb.Var))
		return tir.Mul(coef, xv)
	}, te.WithTag("winograd_input"), te.WithAxisNames("n", "xi", "ic", "tile"))
	return []*te.Tensor{p.winogradStages(c, d, w)}, nil
}

// computeWinogradCPU is the op with stage 1 as kernel calls on the padded
// input (stages 2 and 3 are tensorized by scheduleWinogradCPU).
func computeWinogradCPU(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x, w := in[0], in[1]
	p, err := planWinograd(c, x.Shape, w.Shape)
	if err != nil {
		return nil, err
	}
	xp := p.padded(x, nnZero(x.DType))
	if p.local {
		return []*te.Tensor{p.winogradStagesLocal(c, xp, w)}, nil
	}
	n, ic := x.Shape[0], x.Shape[1]
	t := p.th * p.tw
	k, err := newWgInputKernel(p.isa, p.th, p.tw, p.wp, ic*t)
	if err != nil {
		return nil, err
	}
	d := te.Extern(nnName(c)+"_wg_in", []ir.Shape{{n, op.WinogradTile, ic, t}}, []ir.DType{x.DType}, []*te.Tensor{xp}, func(ins, outs []*tir.Buffer) tir.Stmt {
		xb, db := ins[0], outs[0]
		nv, cv := tir.NewVar("n", tir.Int32T), tir.NewVar("c", tir.Int32T)
		xi := p.xpIndex(xp, nv, cv, tir.Idx(0), tir.Idx(0))
		call := tir.Eval(tir.CallKernel(k, tir.AddressOf(tir.NewLoad(db, nv, tir.Idx(0), cv, tir.Idx(0))), tir.AddressOf(tir.NewLoad(xb, xi...))))
		return tir.Loop(nv, n, tir.Serial, tir.Loop(cv, ic, tir.Parallel, call))
	})[0]
	return []*te.Tensor{p.winogradStages(c, d, w)}, nil
}

// tileRows checks a V tile's extents (one batch, MR channels, cols
// columns) and returns its output rows R = (cols - OW)/OWp + 1: an even
// number, or all the output's; what names the tile in errors.
func (p *wgPlan) tileRows(ctx *te.TensorizeContext, cols int64, what string) (int64, error) {
	mr := int64(p.mr)
	if len(ctx.Extent) != 3 || ctx.Extent[0] != 1 || ctx.Extent[1] != mr || ctx.Extent[2] != cols || (cols-p.g.ow)%p.owp != 0 {
		return 0, fmt.Errorf("%s: extents %v, want [1 %d %d]", what, ctx.Extent, mr, cols)
	}
	rows := (cols-p.g.ow)/p.owp + 1
	if rows%2 != 0 && rows != p.g.oh {
		return 0, fmt.Errorf("%s: %d rows, want an even number or all %d", what, rows, p.g.oh)
	}
	return rows, nil
}

// outputPass is the call of output pass r (wgOutputKernel) from M's
// products of mr channels into the V tile at vl.
func (p *wgPlan) outputPass(r int, mr, rows, ldv int64, vl *tir.BufferLoad, m *tir.Buffer) (tir.Stmt, error) {
	k, err := newWgOutputKernel(p.isa, r, mr, rows, p.tw, p.owp, p.g.ow, ldv)
	if err != nil {
		return nil, err
	}
	return tir.Eval(tir.CallKernel(k, tir.AddressOf(vl), tir.AddressOf(tir.NewLoad(m, tir.Idx(0), tir.Idx(0), tir.Idx(0))))), nil
}

// wgTile is the TensorIntrin of stage 2: for a tile of MR channels and
// cols V columns (R = (cols - OW)/OWp + 1 rows from row r0), sixteen
// product-kernel calls into M, then the output transform into V.
func (p *wgPlan) wgTile(d, w *te.Tensor, cols int64) te.TensorIntrin {
	return func(ctx *te.TensorizeContext) (tir.Stmt, error) {
		mr := int64(p.mr)
		rows, err := p.tileRows(ctx, cols, "winograd tile")
		if err != nil {
			return nil, err
		}
		n := ceilDiv(rows, 2) * p.tw // tiles (M's columns)
		ic, t, b := w.Shape[2], p.th*p.tw, w.Shape[3]
		ocb := w.Shape[1]
		gemm := func(mv, nc int) (tir.Kernel, error) {
			if p.gemm.mv == 0 {
				return newConvKernel(p.isa, kernelSpec{mr: p.mr, ic: ic, koff: []int64{0}, ics: t, ws: b, wm: 1, ldv: n, j: n})
			}
			return newBcastKernel(p.isa, bcastSpec{mv: mv, nc: nc, ic: ic, koff: []int64{0}, ics: t, b: b, bs: ic * b,
				ldv: n, kc: p.gemm.kc, rows: 1, ow: n, wq: n})
		}
		k, err := gemm(p.gemm.mv, p.gemm.nc)
		if err != nil {
			return nil, err
		}
		var tk tir.Kernel // the last channel tile's (p.gemm.tail)
		if p.gemm.tail > 0 {
			if tk, err = gemm(p.gemm.tail, p.isa.tailColumns(p.gemm.tail)); err != nil {
				return nil, err
			}
		}
		ldv := ctx.Out.Shape[len(ctx.Out.Shape)-1]
		n0, oc0, j0 := ctx.Axis[0], ctx.Axis[1], ctx.Axis[2]
		tile0 := tir.Mul(tir.FloorDiv(j0, tir.Idx(2*p.owp)), tir.Idx(p.tw))
		m := tir.NewBuffer(ctx.Out.Name+"_m", ir.Float32, ir.Shape{4, mr, n}, tir.ScopeLocal)
		vl := tir.NewLoad(ctx.Out, ctx.OutIndex...)
		var calls []tir.Stmt
		for xi := int64(0); xi < op.WinogradTile; xi++ {
			dl, err := ctx.Load(d, n0, tir.Idx(xi), tir.Idx(0), tile0)
			if err != nil {
				return nil, err
			}
			wl, err := ctx.Load(w, tir.Idx(xi), tir.FloorDiv(oc0, tir.Idx(b)), tir.Idx(0), tir.FloorMod(oc0, tir.Idx(b)))
			if err != nil {
				return nil, err
			}
			ml := tir.NewLoad(m, tir.Idx(xi%4), tir.Idx(0), tir.Idx(0))
			calls = append(calls, tileCall(k, tk, oc0, mr, ocb*b, ml, dl, wl))
			if xi%4 == 3 {
				// Row xi/4 of every tile's products: its output pass.
				pass, err := p.outputPass(int(xi/4), mr, rows, ldv, vl, m)
				if err != nil {
					return nil, err
				}
				calls = append(calls, pass)
			}
		}
		return &tir.Allocate{Buffer: m, Body: tir.Seq(calls...)}, nil
	}
}

// wgTileLocal is the TensorIntrin of the row-tile form: for a tile of
// cols V columns (R rows from row r0) and every output channel, the
// input transform of the tile rows' input, every input channel, into a
// buffer D [16, IC, n] (n the tile's 2x2 tiles), then per xi the
// products of each sub channels into M, and the output transform per
// four of them, as wgTile. D and M are global-scope buffers: on the heap
// in a library, workspaces in an AOT build.
func (p *wgPlan) wgTileLocal(xp, w *te.Tensor, cols int64) te.TensorIntrin {
	return func(ctx *te.TensorizeContext) (tir.Stmt, error) {
		mr := int64(p.mr)
		rows, err := p.tileRows(ctx, cols, "winograd row tile")
		if err != nil {
			return nil, err
		}
		r2 := ceilDiv(rows, 2)
		n := r2 * p.tw
		ic, b := w.Shape[2], w.Shape[3]
		in, err := newWgInputKernelChannels(p.isa, r2, p.tw, p.wp, ic*n, ic, p.hp*p.wp, n)
		if err != nil {
			return nil, err
		}
		k, err := newBcastKernel(p.isa, bcastSpec{mv: p.gemm.mv, nc: p.gemm.nc, ic: ic, koff: []int64{0}, ics: n, b: b, bs: ic * b,
			ldv: n, kc: p.gemm.kc, rows: 1, ow: n, wq: n})
		if err != nil {
			return nil, err
		}
		ldv := ctx.Out.Shape[len(ctx.Out.Shape)-1]
		n0, oc0, j0 := ctx.Axis[0], ctx.Axis[1], ctx.Axis[2]
		// The tile's first padded input row: its first tile row's.
		row0 := tir.Mul(tir.FloorDiv(j0, tir.Idx(2*p.owp)), tir.Idx(2))
		xl, err := ctx.Load(xp, p.xpIndex(xp, n0, tir.Idx(0), row0, tir.Idx(0))...)
		if err != nil {
			return nil, err
		}
		db := tir.NewBuffer(ctx.Out.Name+"_d", ir.Float32, ir.Shape{op.WinogradTile, ic, n}, tir.ScopeGlobal)
		m := tir.NewBuffer(ctx.Out.Name+"_m", ir.Float32, ir.Shape{4, mr, n}, tir.ScopeGlobal)
		vl := tir.NewLoad(ctx.Out, ctx.OutIndex...)
		calls := []tir.Stmt{tir.Eval(tir.CallKernel(in, tir.AddressOf(tir.NewLoad(db, tir.Idx(0), tir.Idx(0), tir.Idx(0))), tir.AddressOf(xl)))}
		for xi := int64(0); xi < op.WinogradTile; xi++ {
			for s := int64(0); s < mr; s += p.sub {
				ch := tir.Add(oc0, tir.Idx(s))
				wl, err := ctx.Load(w, tir.Idx(xi), tir.FloorDiv(ch, tir.Idx(b)), tir.Idx(0), tir.FloorMod(ch, tir.Idx(b)))
				if err != nil {
					return nil, err
				}
				ml := tir.NewLoad(m, tir.Idx(xi%4), tir.Idx(s), tir.Idx(0))
				dl := tir.NewLoad(db, tir.Idx(xi), tir.Idx(0), tir.Idx(0))
				calls = append(calls, tir.Eval(tir.CallKernel(k, tir.AddressOf(ml), tir.AddressOf(dl), tir.AddressOf(wl))))
			}
			if xi%4 == 3 {
				// Row xi/4 of every tile's products: its output pass.
				pass, err := p.outputPass(int(xi/4), mr, rows, ldv, vl, m)
				if err != nil {
					return nil, err
				}
				calls = append(calls, pass)
			}
		}
		return &tir.Allocate{Buffer: db, Body: &tir.Allocate{Buffer: m, Body: tir.Seq(calls...)}}, nil
	}
}

func scheduleWinogradCPU(c *strategy.Call, s *te.Schedule, outs, anchor []*te.Tensor) error {
	if len(anchor) != 1 {
		return fmt.Errorf("%s: want one anchor output", c.Op.Name)
	}
	vT := anchor[0].Op.InputTensors()[0]
	// d is D, or in the row-tile form the padded input.
	var d, w *te.Tensor
	for _, t := range vT.Op.InputTensors() {
		if t.Shape.Equal(c.ArgTensor(1).Shape) && w == nil {
			w = t
		} else {
			d = t
		}
	}
	if d == nil || w == nil {
		return fmt.Errorf("%s: unexpected winograd structure", c.Op.Name)
	}
	p, err := planWinograd(c, c.ArgTensor(0).Shape, w.Shape)
	if err != nil {
		return err
	}
	return p.scheduleTiles(s, outs, anchor[0], vT, int64(p.mr), func(cols int64) te.TensorIntrin {
		if p.local {
			return p.wgTileLocal(d, w, cols)
		}
		return p.wgTile(d, w, cols)
	})
}

// WinogradMaxBytes is target t's limit on the Winograd form's transformed
// input and transformed weight for the pass alter_conv_layout
// (transform.ConvLayoutOptions): its processor's L2 on full-width
// AVX-512 without Processor.FastL2 (Intel's server cores), where the
// direct broadcast kernel in L1-sized passes runs near the multiply-add
// rate and a Winograd convolution whose planes outgrow L2 spends more
// streaming them from L3 than its 16 products per 36 save; 0 (no limit)
// elsewhere: on AVX2, on AVX-512 in two halves and on Zen 5 the Winograd
// form was faster on every 3x3 convolution of resnet18.
func WinogradMaxBytes(t *targets.Target) int64 {
	if t == nil {
		return 0
	}
	p := t.Processor()
	if p.L2 <= 0 || p.HalfRate512 || p.FastL2 || isaFor(p).name != "avx512" {
		return 0
	}
	return p.L2
}
