package topi

import (
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// This file holds the portable computes of the nn group's matrix,
// softmax, data-movement, einsum and vision operators
// (graph/op/nn_misc.go), following ref/nn_misc.go.

func init() {
	mustAddNN(op.Dense, strategy.Implementation{Name: "nn.dense.generic", PLevel: strategy.PLevelGeneric, Compute: computeDense, Schedule: scheduleConv})
	mustAddNN(op.MatMul, strategy.Implementation{Name: "nn.matmul.generic", PLevel: strategy.PLevelGeneric, Compute: computeMatMul, Schedule: scheduleConv})
	mustAddNN(op.Softmax, strategy.Implementation{Name: "nn.softmax.generic", PLevel: strategy.PLevelGeneric, Compute: computeSoftmax(false), Schedule: scheduleNN})
	mustAddNN(op.LogSoftmax, strategy.Implementation{Name: "nn.log_softmax.generic", PLevel: strategy.PLevelGeneric, Compute: computeSoftmax(true), Schedule: scheduleNN})
	mustAddNN(op.Hardmax, strategy.Implementation{Name: "nn.hardmax.generic", PLevel: strategy.PLevelGeneric, Compute: computeHardmax, Schedule: scheduleNN})
	mustAddNN(op.DepthToSpace, strategy.Implementation{Name: "nn.depth_to_space.generic", PLevel: strategy.PLevelGeneric, Compute: computeDepthToSpace, Schedule: ScheduleInjective})
	mustAddNN(op.SpaceToDepth, strategy.Implementation{Name: "nn.space_to_depth.generic", PLevel: strategy.PLevelGeneric, Compute: computeSpaceToDepth, Schedule: ScheduleInjective})
	mustAddNN(op.Einsum, strategy.Implementation{Name: "einsum.generic", PLevel: strategy.PLevelGeneric, Compute: computeEinsum, Schedule: scheduleNN})
	mustAddNN(op.RoiAlign, strategy.Implementation{Name: "vision.roi_align.generic", PLevel: strategy.PLevelGeneric, Compute: computeRoiAlign, Schedule: scheduleNN})
	mustAddNN(op.GridSample, strategy.Implementation{Name: "image.grid_sample.generic", PLevel: strategy.PLevelGeneric, Compute: computeGridSample, Schedule: scheduleNN})
}

func computeDense(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x, w := in[0], in[1]
	ot := c.OutTensor()
	acc := nnAcc(ot.DType)
	r := len(ot.Shape) - 1
	k := te.ReduceAxis(w.Shape[1], "k")
	out := te.ComputeReduce("nn_dense_acc", ot.Shape, te.Sum, []*te.IterVar{k}, func(i []tir.PrimExpr) tir.PrimExpr {
		xi := append(append([]tir.PrimExpr(nil), i[:r]...), k.Var)
		return tir.Mul(nnCast(acc, x.At(xi...)), nnCast(acc, w.At(i[r], k.Var)))
	}, te.WithTag("dense"))
	return []*te.Tensor{nnCastStage(out, ot.DType, "nn_dense")}, nil
}

func computeMatMul(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	return matmulCompute(c, in, te.Sum)
}

// matmulCompute is nn.matmul's compute with the given sum reducer (the
// CPU implementation's accumulates with fused multiply-adds when the
// target has them, see computeMatMulCPU).
func matmulCompute(c *strategy.Call, in []*te.Tensor, sum te.Reducer) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	a, b := in[0], in[1]
	ot := c.OutTensor()
	ta, tb := c.Attrs.Bool("transpose_a"), c.Attrs.Bool("transpose_b")
	batch, _, kk, _, _, err := op.MatMulShapes(a.Shape, b.Shape, ta, tb)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", c.Op.Name, err)
	}
	aVec, bVec := len(a.Shape) == 1, len(b.Shape) == 1
	nb := len(batch)
	acc := nnAcc(ot.DType)
	k := te.ReduceAxis(kk, "k")
	// batchIndex indexes the leading dimensions of an operand broadcast
	// against the output's batch indices.
	batchIndex := func(s ir.Shape, i []tir.PrimExpr) []tir.PrimExpr {
		lead := s[:len(s)-2]
		off := nb - len(lead)
		idx := make([]tir.PrimExpr, len(lead))
		for d := range lead {
			if lead[d] == 1 {
				idx[d] = tir.Idx(0)
			} else {
				idx[d] = i[off+d]
			}
		}
		return idx
	}
	out := te.ComputeReduce("nn_matmul_acc", ot.Shape, sum, []*te.IterVar{k}, func(i []tir.PrimExpr) tir.PrimExpr {
		p := nb
		var ai, bi []tir.PrimExpr
		if aVec {
			ai = []tir.PrimExpr{k.Var}
		} else {
			m := i[p]
			p++
			ai = batchIndex(a.Shape, i)
			if ta {
				ai = append(ai, k.Var, m)
			} else {
				ai = append(ai, m, k.Var)
			}
		}
		if bVec {
			bi = []tir.PrimExpr{k.Var}
		} else {
			n := i[p]
			bi = batchIndex(b.Shape, i)
			if tb {
				bi = append(bi, n, k.Var)
			} else {
				bi = append(bi, k.Var, n)
			}
		}
		return tir.Mul(nnCast(acc, a.At(ai...)), nnCast(acc, b.At(bi...)))
	}, te.WithTag("matmul"))
	return []*te.Tensor{nnCastStage(out, ot.DType, "nn_matmul")}, nil
}

// nnAxisReduce reduces x over axis with r of body(index of x) into a
// tensor of x's shape with that dimension 1.
func nnAxisReduce(name string, x *te.Tensor, axis int, r te.Reducer, body func(idx []tir.PrimExpr) tir.PrimExpr) *te.Tensor {
	shape := x.Shape.Clone()
	shape[axis] = 1
	k := te.ReduceAxis(x.Shape[axis], "k")
	return te.ComputeReduce(name, shape, r, []*te.IterVar{k}, func(i []tir.PrimExpr) tir.PrimExpr {
		idx := append([]tir.PrimExpr(nil), i...)
		idx[axis] = k.Var
		return body(idx)
	}, te.WithTag("reduce"))
}

// nnKeepIndex is i with dimension axis replaced by 0.
func nnKeepIndex(i []tir.PrimExpr, axis int) []tir.PrimExpr {
	idx := append([]tir.PrimExpr(nil), i...)
	idx[axis] = tir.Idx(0)
	return idx
}

func computeSoftmax(logOut bool) strategy.ComputeFunc {
	return func(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
		if err := nnCheckNonEmpty(c); err != nil {
			return nil, err
		}
		x := in[0]
		ot := c.OutTensor()
		ax, err := op.NormAxis(c.Attrs.Int("axis"), len(x.Shape))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", c.Op.Name, err)
		}
		acc := nnFloatAcc(ot.DType)
		xv := func(idx []tir.PrimExpr) tir.PrimExpr { return nnCast(acc, x.At(idx...)) }
		m := nnAxisReduce("softmax_max", x, ax, te.Max, xv)
		sum := nnAxisReduce("softmax_sum", x, ax, te.Sum, func(idx []tir.PrimExpr) tir.PrimExpr {
			return tir.NewCall(tir.IntrinExp, tir.Sub(xv(idx), m.At(nnKeepIndex(idx, ax)...)))
		})
		out := te.Compute(nnName(c), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
			ki := nnKeepIndex(i, ax)
			d := tir.Sub(xv(i), m.At(ki...))
			if logOut {
				return nnOut(ot.DType, tir.Sub(d, tir.NewCall(tir.IntrinLog, sum.At(ki...))))
			}
			return nnOut(ot.DType, tir.Div(tir.NewCall(tir.IntrinExp, d), sum.At(ki...)))
		}, te.WithTag("injective"))
		return []*te.Tensor{out}, nil
	}
}

func computeHardmax(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x := in[0]
	ot := c.OutTensor()
	ax, err := op.NormAxis(c.Attrs.Int("axis"), len(x.Shape))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", c.Op.Name, err)
	}
	m := nnAxisReduce("hardmax_max", x, ax, te.Max, func(idx []tir.PrimExpr) tir.PrimExpr { return x.At(idx...) })
	size := x.Shape[ax]
	first := nnAxisReduce("hardmax_first", x, ax, te.Min, func(idx []tir.PrimExpr) tir.PrimExpr {
		return tir.NewSelect(tir.EQ(x.At(idx...), m.At(nnKeepIndex(idx, ax)...)), idx[ax], tir.Idx(size))
	})
	out := te.Compute(nnName(c), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		return tir.NewSelect(tir.EQ(i[ax], first.At(nnKeepIndex(i, ax)...)), nnFConst(ot.DType, 1), nnFConst(ot.DType, 0))
	}, te.WithTag("injective"))
	return []*te.Tensor{out}, nil
}

func computeDepthToSpace(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x := in[0]
	ot := c.OutTensor()
	b := c.Attrs.Int("block_size")
	crd := c.Attrs.Str("mode") == "CRD"
	co := ot.Shape[1]
	bi := tir.Idx(b)
	out := te.Compute(nnName(c), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		y, r := tir.FloorDiv(i[2], bi), tir.FloorMod(i[2], bi)
		xx, s := tir.FloorDiv(i[3], bi), tir.FloorMod(i[3], bi)
		ic := tir.Add(tir.Mul(tir.Add(tir.Mul(r, bi), s), tir.Idx(co)), i[1])
		if crd {
			ic = tir.Add(tir.Mul(i[1], tir.Idx(b*b)), tir.Add(tir.Mul(r, bi), s))
		}
		return x.At(i[0], ic, y, xx)
	}, te.WithTag("injective"))
	return []*te.Tensor{out}, nil
}

func computeSpaceToDepth(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x := in[0]
	ot := c.OutTensor()
	b := c.Attrs.Int("block_size")
	ch := x.Shape[1]
	bi := tir.Idx(b)
	out := te.Compute(nnName(c), ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		// oc = (r*b + s)*C + ic
		ic := tir.FloorMod(i[1], tir.Idx(ch))
		rs := tir.FloorDiv(i[1], tir.Idx(ch))
		r, s := tir.FloorDiv(rs, bi), tir.FloorMod(rs, bi)
		return x.At(i[0], ic, tir.Add(tir.Mul(i[2], bi), r), tir.Add(tir.Mul(i[3], bi), s))
	}, te.WithTag("injective"))
	return []*te.Tensor{out}, nil
}

func computeEinsum(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	ot := c.OutTensor()
	shapes := make([]ir.Shape, len(in))
	for i, t := range in {
		shapes[i] = t.Shape
	}
	spec, err := op.ParseEinsum(c.Attrs.Str("equation"), shapes)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", c.Op.Name, err)
	}
	acc := nnAcc(ot.DType)
	outPos := map[int]int{}
	for d, l := range spec.Output {
		outPos[l] = d
	}
	var raxes []*te.IterVar
	rvar := map[int]*te.IterVar{}
	for _, l := range spec.Labels[len(spec.Output):] {
		iv := te.ReduceAxis(spec.Sizes[l], fmt.Sprintf("r%d", len(raxes)))
		raxes = append(raxes, iv)
		rvar[l] = iv
	}
	body := func(i []tir.PrimExpr) tir.PrimExpr {
		var prod tir.PrimExpr
		for k, t := range in {
			idx := make([]tir.PrimExpr, len(t.Shape))
			for d, l := range spec.Inputs[k] {
				switch {
				case t.Shape[d] == 1:
					idx[d] = tir.Idx(0) // size 1 (possibly broadcast)
				case rvar[l] != nil:
					idx[d] = rvar[l].Var
				default:
					idx[d] = i[outPos[l]]
				}
			}
			v := nnCast(acc, t.At(idx...))
			if prod == nil {
				prod = v
			} else {
				prod = tir.Mul(prod, v)
			}
		}
		return prod
	}
	// A scalar result is accumulated in a one-element tensor first.
	shape := ot.Shape
	scalar := len(shape) == 0
	if scalar {
		shape = ir.Shape{1}
	}
	wrap := func(i []tir.PrimExpr) tir.PrimExpr {
		if scalar {
			return body(nil)
		}
		return body(i)
	}
	var res *te.Tensor
	if len(raxes) == 0 {
		res = te.Compute("einsum_acc", shape, wrap, te.WithTag("injective"))
	} else {
		res = te.ComputeReduce("einsum_acc", shape, te.Sum, raxes, wrap, te.WithTag("einsum"))
	}
	out := te.Compute("einsum", ot.Shape, func(i []tir.PrimExpr) tir.PrimExpr {
		if scalar {
			return nnOut(ot.DType, res.At(tir.Idx(0)))
		}
		return nnOut(ot.DType, res.At(i...))
	}, te.WithTag("injective"))
	return []*te.Tensor{out}, nil
}

// nnLet binds value to a fresh variable named name inside the statement
// body builds.
func nnLet(name string, value tir.PrimExpr, body func(v tir.PrimExpr) tir.Stmt) tir.Stmt {
	v := tir.NewVar(name, value.Type())
	return tir.NewLet(v, value, body(v))
}

// nnF64 is a float64 constant.
func nnF64(v float64) tir.PrimExpr { return tir.FloatConst(ir.Float64, v) }

// nnToF64 converts e to float64.
func nnToF64(e tir.PrimExpr) tir.PrimExpr { return nnCast(ir.Float64, e) }

// nnToI32 converts e to int32 (truncating floats).
func nnToI32(e tir.PrimExpr) tir.PrimExpr { return nnCast(ir.Int32, e) }

func computeRoiAlign(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x := in[0]
	ot := c.OutTensor()
	n, ch, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	ps := c.Attrs.Ints("pooled_size")
	ph, pw := ps[0], ps[1]
	scale := c.Attrs.Float("spatial_scale")
	ratio := c.Attrs.Int("sampling_ratio")
	aligned := c.Attrs.Bool("aligned")
	isMax := c.Attrs.Str("mode") == "max"
	offset := 0.0
	if aligned {
		offset = 0.5
	}
	out := te.Extern("vision_roi_align", []ir.Shape{ot.Shape}, []ir.DType{ot.DType}, in, func(ins, outs []*tir.Buffer) tir.Stmt {
		xb, rb, ib, ob := ins[0], ins[1], ins[2], outs[0]
		accBuf := tir.NewBuffer("roi_acc", ir.Float64, ir.Shape{1}, "local")
		accAt := tir.NewLoad(accBuf, tir.Idx(0))
		setAcc := func(v tir.PrimExpr) tir.Stmt { return tir.NewStore(accBuf, v, tir.Idx(0)) }
		r := tir.NewVar("r", tir.Int32T)
		coord := func(k int64) tir.PrimExpr {
			return tir.Sub(tir.Mul(nnToF64(tir.NewLoad(rb, r, tir.Idx(k))), nnF64(scale)), nnF64(offset))
		}
		body := nnLet("b", nnToI32(tir.NewLoad(ib, r)), func(b tir.PrimExpr) tir.Stmt {
			inner := nnLet("sw", coord(0), func(sw tir.PrimExpr) tir.Stmt {
				return nnLet("sh", coord(1), func(sh tir.PrimExpr) tir.Stmt {
					rw := tir.Sub(coord(2), sw)
					rh := tir.Sub(coord(3), sh)
					if !aligned {
						rw, rh = tir.Max(rw, nnF64(1)), tir.Max(rh, nnF64(1))
					}
					return nnLet("bh", tir.Div(rh, nnF64(float64(ph))), func(bh tir.PrimExpr) tir.Stmt {
						return nnLet("bw", tir.Div(rw, nnF64(float64(pw))), func(bw tir.PrimExpr) tir.Stmt {
							var gh, gw tir.PrimExpr = tir.Idx(ratio), tir.Idx(ratio)
							if ratio <= 0 {
								gh = nnToI32(tir.NewCall(tir.IntrinCeil, bh))
								gw = nnToI32(tir.NewCall(tir.IntrinCeil, bw))
							}
							return nnLet("gh", gh, func(gh tir.PrimExpr) tir.Stmt {
								return nnLet("gw", gw, func(gw tir.PrimExpr) tir.Stmt {
									return roiBins(xb, ob, r, b, sh, sw, bh, bw, gh, gw, accAt, setAcc, ch, h, w, ph, pw, isMax)
								})
							})
						})
					})
				})
			})
			// A batch index out of range yields zeros instead of a read
			// out of bounds (the reference reports an error).
			valid := tir.And(tir.GE(b, tir.Idx(0)), tir.LT(b, tir.Idx(n)))
			zero := nnLoopNest(ir.Shape{ch, ph, pw}, "z", func(i []tir.PrimExpr) tir.Stmt {
				return tir.NewStore(ob, nnZero(ot.DType), r, i[0], i[1], i[2])
			})
			return tir.NewIf(valid, inner, zero)
		})
		return &tir.Allocate{Buffer: accBuf, Body: tir.Loop(r, ot.Shape[0], tir.Serial, body)}
	})
	return out, nil
}

// roiBins emits the loops over channels and bins of one region of
// interest (see ref's roiAlignKernel).
func roiBins(xb, ob *tir.Buffer, r *tir.Var, b, sh, sw, bh, bw, gh, gw, accAt tir.PrimExpr, setAcc func(tir.PrimExpr) tir.Stmt,
	ch, h, w, ph, pw int64, isMax bool) tir.Stmt {
	dt := ob.DType
	count := tir.Max(nnToF64(tir.Mul(gh, gw)), nnF64(1))
	return nnLoopNest(ir.Shape{ch, ph, pw}, "o", func(i []tir.PrimExpr) tir.Stmt {
		c, py, px := i[0], i[1], i[2]
		iy, ix := tir.NewVar("iy", tir.Int32T), tir.NewVar("ix", tir.Int32T)
		y := tir.Add(tir.Add(sh, tir.Mul(nnToF64(py), bh)), tir.Div(tir.Mul(tir.Add(nnToF64(iy), nnF64(0.5)), bh), nnToF64(gh)))
		x := tir.Add(tir.Add(sw, tir.Mul(nnToF64(px), bw)), tir.Div(tir.Mul(tir.Add(nnToF64(ix), nnF64(0.5)), bw), nnToF64(gw)))
		sample := nnLet("y", y, func(yv tir.PrimExpr) tir.Stmt {
			return nnLet("x", x, func(xv tir.PrimExpr) tir.Stmt {
				ok := tir.NewNot(tir.Or(tir.Or(tir.LT(yv, nnF64(-1)), tir.GT(yv, nnF64(float64(h)))),
					tir.Or(tir.LT(xv, nnF64(-1)), tir.GT(xv, nnF64(float64(w))))))
				taps := nnLet("y0", tir.Max(yv, nnF64(0)), func(y0 tir.PrimExpr) tir.Stmt {
					return nnLet("x0", tir.Max(xv, nnF64(0)), func(x0 tir.PrimExpr) tir.Stmt {
						return nnLet("yl", nnToI32(y0), func(yl tir.PrimExpr) tir.Stmt {
							return nnLet("xl", nnToI32(x0), func(xl tir.PrimExpr) tir.Stmt {
								yTop := tir.GE(yl, tir.Idx(h-1))
								xTop := tir.GE(xl, tir.Idx(w-1))
								ylo := tir.NewSelect(yTop, tir.Idx(h-1), yl)
								yhi := tir.NewSelect(yTop, tir.Idx(h-1), tir.Add(yl, tir.Idx(1)))
								yy := tir.NewSelect(yTop, nnF64(float64(h-1)), y0)
								xlo := tir.NewSelect(xTop, tir.Idx(w-1), xl)
								xhi := tir.NewSelect(xTop, tir.Idx(w-1), tir.Add(xl, tir.Idx(1)))
								xx := tir.NewSelect(xTop, nnF64(float64(w-1)), x0)
								return nnLet("ly", tir.Sub(yy, nnToF64(ylo)), func(ly tir.PrimExpr) tir.Stmt {
									return nnLet("lx", tir.Sub(xx, nnToF64(xlo)), func(lx tir.PrimExpr) tir.Stmt {
										hy, hx := tir.Sub(nnF64(1), ly), tir.Sub(nnF64(1), lx)
										p := func(yi, xi tir.PrimExpr) tir.PrimExpr { return nnToF64(tir.NewLoad(xb, b, c, yi, xi)) }
										t := []tir.PrimExpr{
											tir.Mul(tir.Mul(hy, hx), p(ylo, xlo)),
											tir.Mul(tir.Mul(hy, lx), p(ylo, xhi)),
											tir.Mul(tir.Mul(ly, hx), p(yhi, xlo)),
											tir.Mul(tir.Mul(ly, lx), p(yhi, xhi)),
										}
										if isMax {
											v := tir.Max(tir.Max(t[0], t[1]), tir.Max(t[2], t[3]))
											return setAcc(tir.Max(accAt, v))
										}
										a := accAt
										for _, tv := range t {
											a = tir.Add(a, tv)
										}
										return setAcc(a)
									})
								})
							})
						})
					})
				})
				var miss tir.Stmt
				if isMax {
					miss = setAcc(tir.Max(accAt, nnF64(0)))
				}
				return tir.NewIf(ok, taps, miss)
			})
		})
		loops := tir.NewFor(iy, tir.Idx(0), gh, tir.Serial, tir.NewFor(ix, tir.Idx(0), gw, tir.Serial, sample))
		init := nnF64(0)
		if isMax {
			init = tir.FloatConst(ir.Float64, math.Inf(-1))
		}
		var final tir.PrimExpr = tir.Div(accAt, count)
		if isMax {
			final = tir.NewSelect(tir.EQ(tir.Mul(gh, gw), tir.Idx(0)), nnF64(0), accAt)
		}
		return tir.Seq(setAcc(init), loops, tir.NewStore(ob, nnOut(dt, final), r, c, py, px))
	})
}

// nnReflect reflects x into [lo, hi] as the reference's gsReflect does
// (lo and hi are constants).
func nnReflect(x tir.PrimExpr, lo, hi float64) tir.PrimExpr {
	rng := hi - lo
	if rng <= 0 {
		return nnF64(lo)
	}
	side := func(dx tir.PrimExpr, near, far float64, towardHi bool) tir.PrimExpr {
		n := tir.NewCall(tir.IntrinFloor, tir.Div(dx, nnF64(rng)))
		r := tir.Sub(dx, tir.Mul(n, nnF64(rng)))
		even := tir.EQ(tir.FloorMod(nnCast(ir.Int64, n), tir.Int64(2)), tir.Int64(0))
		if towardHi {
			return tir.NewSelect(even, tir.Add(nnF64(near), r), tir.Sub(nnF64(far), r))
		}
		return tir.NewSelect(even, tir.Sub(nnF64(near), r), tir.Add(nnF64(far), r))
	}
	below := side(tir.Sub(nnF64(lo), x), lo, hi, true)
	above := side(tir.Sub(x, nnF64(hi)), hi, lo, false)
	return tir.NewSelect(tir.LT(x, nnF64(lo)), below, tir.NewSelect(tir.GT(x, nnF64(hi)), above, x))
}

// nnCubic returns the four bicubic (a = -0.75) weights for fraction t.
func nnCubic(t tir.PrimExpr) [4]tir.PrimExpr {
	a := nnF64(-0.75)
	one, two := nnF64(1), nnF64(2)
	x := tir.NewCall(tir.IntrinFabs, t)
	far := func(z tir.PrimExpr) tir.PrimExpr { // ((a*z - 5a)*z + 8a)*z - 4a
		return tir.Sub(tir.Mul(tir.Add(tir.Mul(tir.Sub(tir.Mul(a, z), tir.Mul(nnF64(5), a)), z), tir.Mul(nnF64(8), a)), z), tir.Mul(nnF64(4), a))
	}
	near := func(z tir.PrimExpr) tir.PrimExpr { // ((a+2)*z - (a+3))*z*z + 1
		return tir.Add(tir.Mul(tir.Mul(tir.Sub(tir.Mul(tir.Add(a, two), z), tir.Add(a, nnF64(3))), z), z), one)
	}
	return [4]tir.PrimExpr{far(tir.Add(x, one)), near(x), near(tir.Sub(one, x)), far(tir.Sub(two, x))}
}

func computeGridSample(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
	if err := nnCheckNonEmpty(c); err != nil {
		return nil, err
	}
	x := in[0]
	ot := c.OutTensor()
	n, ch, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	ho, wo := ot.Shape[2], ot.Shape[3]
	align := c.Attrs.Bool("align_corners")
	method, pad := c.Attrs.Str("method"), c.Attrs.Str("padding_mode")
	xMin, xMax, yMin, yMax := -0.5, float64(w)-0.5, -0.5, float64(h)-0.5
	if align {
		xMin, xMax, yMin, yMax = 0, float64(w-1), 0, float64(h-1)
	}
	denorm := func(v tir.PrimExpr, size int64) tir.PrimExpr {
		if align {
			return tir.Mul(tir.Div(tir.Add(v, nnF64(1)), nnF64(2)), nnF64(float64(size-1)))
		}
		return tir.Div(tir.Sub(tir.Mul(tir.Add(v, nnF64(1)), nnF64(float64(size))), nnF64(1)), nnF64(2))
	}
	clampI := func(v tir.PrimExpr, hi int64) tir.PrimExpr { return tir.Min(tir.Max(v, tir.Idx(0)), tir.Idx(hi)) }
	out := te.Extern("image_grid_sample", []ir.Shape{ot.Shape}, []ir.DType{ot.DType}, in, func(ins, outs []*tir.Buffer) tir.Stmt {
		xb, gb, ob := ins[0], ins[1], outs[0]
		// pixel reads plane (b, c) at integer (row, col) with the padding mode.
		pixel := func(b, cc, row, col tir.PrimExpr) tir.PrimExpr {
			switch pad {
			case "zeros":
				in := tir.And(tir.And(tir.GE(row, tir.Idx(0)), tir.LT(row, tir.Idx(h))), tir.And(tir.GE(col, tir.Idx(0)), tir.LT(col, tir.Idx(w))))
				return te.IfThenElse(in, nnToF64(tir.NewLoad(xb, b, cc, row, col)), nnF64(0))
			case "border":
				return nnToF64(tir.NewLoad(xb, b, cc, clampI(row, h-1), clampI(col, w-1)))
			}
			col = clampI(nnToI32(nnReflect(nnToF64(col), xMin, xMax)), w-1)
			row = clampI(nnToI32(nnReflect(nnToF64(row), yMin, yMax)), h-1)
			return nnToF64(tir.NewLoad(xb, b, cc, row, col))
		}
		return nnLoopNest(ir.Shape{n, ho, wo}, "g", func(i []tir.PrimExpr) tir.Stmt {
			b, oy, ox := i[0], i[1], i[2]
			fx := denorm(nnToF64(tir.NewLoad(gb, b, oy, ox, tir.Idx(0))), w)
			fy := denorm(nnToF64(tir.NewLoad(gb, b, oy, ox, tir.Idx(1))), h)
			return nnLet("fx0", fx, func(fx tir.PrimExpr) tir.Stmt {
				return nnLet("fy0", fy, func(fy tir.PrimExpr) tir.Stmt {
					if method == "nearest" {
						fx, fy = tir.NewCall(tir.IntrinNearbyInt, fx), tir.NewCall(tir.IntrinNearbyInt, fy)
					}
					outside := tir.Or(tir.Or(tir.LT(fx, nnF64(xMin)), tir.GT(fx, nnF64(xMax))), tir.Or(tir.LT(fy, nnF64(yMin)), tir.GT(fy, nnF64(yMax))))
					switch pad {
					case "border":
						fx = tir.NewSelect(outside, tir.Min(tir.Max(fx, nnF64(0)), nnF64(float64(w-1))), fx)
						fy = tir.NewSelect(outside, tir.Min(tir.Max(fy, nnF64(0)), nnF64(float64(h-1))), fy)
					case "reflection":
						fx = tir.NewSelect(outside, nnReflect(fx, xMin, xMax), fx)
						fy = tir.NewSelect(outside, nnReflect(fy, yMin, yMax), fy)
					}
					return nnLet("fx", fx, func(fx tir.PrimExpr) tir.Stmt {
						return nnLet("fy", fy, func(fy tir.PrimExpr) tir.Stmt {
							return nnLoopNest(ir.Shape{ch}, "c", func(ci []tir.PrimExpr) tir.Stmt {
								cc := ci[0]
								var v tir.PrimExpr
								switch method {
								case "nearest":
									v = pixel(b, cc, nnToI32(tir.NewCall(tir.IntrinNearbyInt, fy)), nnToI32(tir.NewCall(tir.IntrinNearbyInt, fx)))
								case "bilinear":
									flx, fly := tir.NewCall(tir.IntrinFloor, fx), tir.NewCall(tir.IntrinFloor, fy)
									x1, y1 := nnToI32(flx), nnToI32(fly)
									dx1, dy1 := tir.Sub(fx, flx), tir.Sub(fy, fly)
									dx2, dy2 := tir.Sub(nnF64(1), dx1), tir.Sub(nnF64(1), dy1)
									x2, y2 := tir.Add(x1, tir.Idx(1)), tir.Add(y1, tir.Idx(1))
									top := tir.Add(tir.Mul(dx2, pixel(b, cc, y1, x1)), tir.Mul(dx1, pixel(b, cc, y1, x2)))
									bot := tir.Add(tir.Mul(dx2, pixel(b, cc, y2, x1)), tir.Mul(dx1, pixel(b, cc, y2, x2)))
									v = tir.Add(tir.Mul(dy2, top), tir.Mul(dy1, bot))
								default: // bicubic
									flx, fly := tir.NewCall(tir.IntrinFloor, fx), tir.NewCall(tir.IntrinFloor, fy)
									x0, y0 := tir.Sub(nnToI32(flx), tir.Idx(1)), tir.Sub(nnToI32(fly), tir.Idx(1))
									cx := nnCubic(tir.Sub(fx, flx))
									cy := nnCubic(tir.Sub(fy, fly))
									v = nnF64(0)
									for a := 0; a < 4; a++ {
										var row tir.PrimExpr = nnF64(0)
										for bb := 0; bb < 4; bb++ {
											row = tir.Add(row, tir.Mul(cx[bb], pixel(b, cc, tir.Add(y0, tir.Idx(int64(a))), tir.Add(x0, tir.Idx(int64(bb))))))
										}
										v = tir.Add(v, tir.Mul(cy[a], row))
									}
								}
								return tir.NewStore(ob, nnOut(ot.DType, v), b, cc, oy, ox)
							})
						})
					})
				})
			})
		})
	})
	return out, nil
}
