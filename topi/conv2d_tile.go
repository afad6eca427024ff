package topi

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// Per-channel operators on the convolutions' layout (depthwise
// convolution, max pooling) do not materialise X' for the whole tensor:
// X' of a whole layer is written once and read back once (for a stride-2
// depthwise convolution on a 112x112 map, 4.8 MB each way, out of every
// cache), where a channel's output tile needs only a few rows of it. Their
// V stage reads the input itself (padLoad, the definition), and its
// TensorIntrin (localTile) copies the rows of X' one tile of output rows
// reads into a local buffer, in L1, then computes the tile from there.

// phaseRows is the loop nest that writes rows [r0, r0+nr) of every phase
// plane of X' for one channel (see phased): per row and phase plane, a
// run of pad values, a copy of an input row (stride sw) and pad values
// again, with the runs' bounds known at compile time; rows outside the
// input are all pad. load reads the input channel at (row, col); store
// writes phase plane ph*sw+pw, local row r, column col of X'. h and w are
// the input's height and width.
func (p *convPlan) phaseRows(h, w int64, pad, r0 tir.PrimExpr, nr int64,
	load func(row, col tir.PrimExpr) tir.PrimExpr,
	store func(plane int64, r, col, v tir.PrimExpr) tir.Stmt) tir.Stmt {
	g := p.g
	// Columns [lo[pw], hi[pw]) of column phase pw read the input; the
	// others are padding.
	lo := make([]int64, p.npw)
	hi := make([]int64, p.npw)
	for pw := int64(0); pw < p.npw; pw++ {
		lo[pw], hi[pw] = p.wq, p.wq
		for c := int64(0); c < p.wq; c++ {
			src := c*g.sw + pw - g.pw
			if src >= 0 && src < w && lo[pw] == p.wq {
				lo[pw] = c
			}
			if src >= w && hi[pw] == p.wq {
				hi[pw] = c
			}
		}
		hi[pw] = max(hi[pw], lo[pw])
	}
	// With a column stride, the column range every phase reads is copied
	// in one loop that stores all phases: its loads are then one
	// interleaved group, which compilers vectorise with permutes (a loop
	// per phase reads with a stride and stays scalar).
	common0, common1 := int64(0), p.wq
	for pw := range lo {
		common0, common1 = max(common0, lo[pw]), min(common1, hi[pw])
	}
	if p.npw == 1 || common1 <= common0 {
		common0, common1 = p.wq, p.wq // no shared range: a loop per phase
	}
	// One loop over the local rows, each writing its row of every phase
	// plane: the input rows are then read in order (a loop per row phase
	// read every other row, then went back for the rest, which a
	// stride-2 depthwise convolution's input, streamed from L3, paid for
	// in stalls).
	r := tir.NewVar("r", tir.Int32T)
	var phases []tir.Stmt
	for ph := int64(0); ph < p.nph; ph++ {
		row := tir.Sub(tir.Add(tir.Mul(tir.Add(r0, r), tir.Idx(g.sh)), tir.Idx(ph)), tir.Idx(g.ph))
		col := func(c tir.PrimExpr, pw int64) tir.PrimExpr {
			return tir.Add(tir.Mul(c, tir.Idx(g.sw)), tir.Idx(pw-g.pw))
		}
		fill := func(plane, from, to int64) tir.Stmt {
			if to <= from {
				return nil
			}
			c := tir.NewVar("c", tir.Int32T)
			return tir.Loop(c, to-from, tir.Serial, store(plane, r, tir.Add(c, tir.Idx(from)), pad))
		}
		// copyCols copies columns [from, to) of the column phases pws in
		// one loop.
		copyCols := func(from, to int64, pws ...int64) tir.Stmt {
			if to <= from {
				return nil
			}
			c := tir.NewVar("c", tir.Int32T)
			kind := tir.Serial
			if g.sw == 1 {
				kind = tir.Vectorized
			}
			cc := tir.Add(c, tir.Idx(from))
			body := make([]tir.Stmt, len(pws))
			for i, pw := range pws {
				body[i] = store(ph*p.npw+pw, r, cc, load(row, col(cc, pw)))
			}
			return tir.Loop(c, to-from, kind, tir.Seq(body...))
		}
		var runs, zeros []tir.Stmt
		add := func(list *[]tir.Stmt, s tir.Stmt) {
			if s != nil {
				*list = append(*list, s)
			}
		}
		for pw := int64(0); pw < p.npw; pw++ {
			plane := ph*p.npw + pw
			add(&runs, fill(plane, 0, lo[pw]))
			add(&runs, copyCols(lo[pw], min(hi[pw], common0), pw))
			add(&zeros, fill(plane, 0, p.wq))
		}
		all := make([]int64, p.npw)
		for pw := range all {
			all[pw] = int64(pw)
		}
		add(&runs, copyCols(common0, common1, all...))
		for pw := int64(0); pw < p.npw; pw++ {
			add(&runs, copyCols(max(lo[pw], common1), hi[pw], pw))
			add(&runs, fill(ph*p.npw+pw, hi[pw], p.wq))
		}
		rowIn := tir.And(tir.GE(row, tir.Idx(0)), tir.LT(row, tir.Idx(h)))
		phases = append(phases, tir.NewIf(rowIn, tir.Seq(runs...), tir.Seq(zeros...)))
	}
	return tir.Loop(r, nr, tir.Serial, tir.Seq(phases...))
}

// inPlace reports whether X' is the input itself (no padding, stride 1).
func (p *convPlan) inPlace(xShape ir.Shape) bool {
	g := p.g
	return g.sh == 1 && g.sw == 1 && p.hp == xShape[2] && p.wp == xShape[3] && g.ph == 0 && g.pw == 0
}

// padLoad is X'[n, c, j + KOFF(rh, rw)] read from x itself: the padded
// input's element at the tap's position, or pad outside the input. V's
// column j is output row j / vRow, column j % vRow (in the depthwise rows
// form V is compact, so even an input without padding is read by
// coordinates).
func (p *convPlan) padLoad(x *te.Tensor, n, c, j, rh, rw, pad tir.PrimExpr) tir.PrimExpr {
	g := p.g
	if p.inPlace(x.Shape) && !p.rowsForm {
		return x.At(p.xIndex(x, n, c, tir.Add(j, p.tapOffset(rh, rw)))...)
	}
	wq := tir.Idx(p.vRow())
	row := tir.Sub(tir.Add(tir.Mul(tir.FloorDiv(j, wq), tir.Idx(g.sh)), tir.Mul(rh, tir.Idx(g.dh))), tir.Idx(g.ph))
	col := tir.Sub(tir.Add(tir.Mul(tir.FloorMod(j, wq), tir.Idx(g.sw)), tir.Mul(rw, tir.Idx(g.dw))), tir.Idx(g.pw))
	cond := nnAnd([]tir.PrimExpr{
		tir.GE(row, tir.Idx(0)), tir.LT(row, tir.Idx(x.Shape[2])),
		tir.GE(col, tir.Idx(0)), tir.LT(col, tir.Idx(x.Shape[3])),
	})
	return nnGuard(cond, x.At(n, c, row, col), pad)
}

// localTileBytes bounds the local copy of X' a tile reads (a stack array,
// like the V tile: see vTileBytes).
const localTileBytes = 16384

// tileBody computes one channel's V tile of cols virtual columns into
// ctx's output from xb, the local copy of X' for the tile's rows, whose
// tap offsets are koff and whose phase planes hold plane elements in all.
type tileBody func(ctx *te.TensorizeContext, xb *tir.Buffer, koff []int64, plane, cols int64) (tir.Stmt, error)

// localTile returns the TensorIntrin of a per-channel V stage tiled by
// output rows: it copies the rows of X' the tile reads from x (padding
// with pad) into a local buffer and runs body on it. It returns nil — V's
// own loops then read x through padLoad — when that copy would not fit in
// localTileBytes.
func (p *convPlan) localTile(x *te.Tensor, pad tir.PrimExpr, cols int64, body tileBody) te.TensorIntrin {
	g := p.g
	rows := (cols-g.ow)/p.wq + 1
	hl := rows + (g.kh-1)*g.dh/g.sh
	lplane := p.nph * p.npw * hl * p.wq
	if lplane*int64(x.DType.Size()) > localTileBytes {
		return nil
	}
	return func(ctx *te.TensorizeContext) (tir.Stmt, error) {
		if len(ctx.Extent) != 3 || ctx.Extent[0] != 1 || ctx.Extent[1] != 1 || ctx.Extent[2] != cols {
			return nil, fmt.Errorf("channel tile: extents %v, want [1 1 %d]", ctx.Extent, cols)
		}
		n0, c0, j0 := ctx.Axis[0], ctx.Axis[1], ctx.Axis[2]
		koff := p.tapOffsets(hl)
		buf := tir.NewBuffer(x.Name+"_tile", x.DType, ir.Shape{lplane}, tir.ScopeLocal)
		// The tile starts at output row j0 / Wq; its phase rows are the
		// same rows of every phase plane.
		oh0 := tir.FloorDiv(j0, tir.Idx(p.wq))
		var lerr error
		cp := p.phaseRows(x.Shape[2], x.Shape[3], pad, oh0, hl,
			func(row, col tir.PrimExpr) tir.PrimExpr {
				ld, err := ctx.Load(x, n0, c0, row, col)
				if err != nil {
					lerr = err
					return pad
				}
				return ld
			},
			func(plane int64, r, col, v tir.PrimExpr) tir.Stmt {
				return tir.NewStore(buf, v, tir.Add(tir.Add(tir.Mul(r, tir.Idx(p.wq)), col), tir.Idx(plane*hl*p.wq)))
			})
		if lerr != nil {
			return nil, lerr
		}
		st, err := body(ctx, buf, koff, lplane, cols)
		if err != nil {
			return nil, err
		}
		return &tir.Allocate{Buffer: buf, Body: tir.Seq(cp, st)}, nil
	}
}

// maxTile is the tileBody of max pooling: one call of the max pool
// kernel (pool_kernel.go) per tile.
func maxTile(ctx *te.TensorizeContext, xb *tir.Buffer, koff []int64, plane, cols int64) (tir.Stmt, error) {
	k, err := newMaxPoolKernel(koff, plane, cols, xb.DType)
	if err != nil {
		return nil, err
	}
	vl := tir.NewLoad(ctx.Out, ctx.OutIndex...)
	return tir.Eval(tir.CallKernel(k, tir.AddressOf(vl), tir.AddressOf(tir.NewLoad(xb, tir.Idx(0))))), nil
}
