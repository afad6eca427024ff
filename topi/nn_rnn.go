package topi

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tir"
)

// The ONNX recurrent layers (nn.rnn, nn.gru, nn.lstm) as one extern stage
// each: a hand-written TIR time loop that follows ref/nn_rnn.go step by
// step, in scratch buffers, rounding once when it writes Y, Y_h and Y_c.
// Float64 and half-precision layers compute in float64 as the reference
// does, each row of a matrix-vector product summing its products in the
// reference's order, so that their results are the reference's. Float32
// layers compute in float32: fused multiply-adds, the gates' sigmoid and
// tanh vectorized (kiln_sigmoidf_v, kiln_tanhf; within 3 ulp), as the
// dense kernels and ONNX Runtime do, within the tests' tolerance of the
// reference (an LSTM of 2 layers of 256 units over 128 steps: 4e-7 of the
// output's scale). The input's products of all steps are one product
// before the time loop; each step's recurrent product then streams only
// R. The weights are read in blocks of rows (op.RecurrentPackedShape),
// whose products run in vectors over the rows: as alter_recurrent_layout
// packed constant weights at compile time, or transposed so at every
// call.

func init() {
	for _, k := range []struct {
		o    *op.Op
		kind string
	}{{op.RNN, "rnn"}, {op.GRU, "gru"}, {op.LSTM, "lstm"}} {
		mustAddNN(k.o, strategy.Implementation{Name: k.o.Name + ".generic", PLevel: strategy.PLevelGeneric, Compute: computeRecurrent(k.kind), Schedule: scheduleNN})
	}
}

// nnDefaultActivations lists the activations a layer kind uses per
// direction when the activations attribute is empty (the ONNX defaults).
func nnDefaultActivations(kind string) []string {
	switch kind {
	case "gru":
		return []string{"Sigmoid", "Tanh"}
	case "lstm":
		return []string{"Sigmoid", "Tanh", "Tanh"}
	}
	return []string{"Tanh"}
}

// nnActFn builds an activation expression in the layer's computing type
// (nnRecurrent.adt).
type nnActFn func(x tir.PrimExpr) tir.PrimExpr

// nnActivation builds an ONNX recurrent activation by name, consuming
// alpha and beta values from the lists as the reference does.
func nnActivation(name string, alphas, betas *[]float64, dt ir.DType) (nnActFn, error) {
	take := func(l *[]float64, def float64) float64 {
		if len(*l) == 0 {
			return def
		}
		v := (*l)[0]
		*l = (*l)[1:]
		return v
	}
	num := func(v float64) tir.PrimExpr { return tir.FloatConst(dt, v) }
	zero, one := num(0), num(1)
	exp := func(x tir.PrimExpr) tir.PrimExpr { return tir.NewCall(tir.IntrinExp, x) }
	tanh := func(x tir.PrimExpr) tir.PrimExpr { return tir.NewCall(tir.IntrinTanh, x) }
	switch strings.ToLower(name) {
	case "sigmoid":
		if dt == ir.Float32 {
			return func(x tir.PrimExpr) tir.PrimExpr { return tir.NewCall(tir.IntrinSigmoid, x) }, nil
		}
		return func(x tir.PrimExpr) tir.PrimExpr { return tir.Div(one, tir.Add(one, exp(tir.Sub(zero, x)))) }, nil
	case "tanh":
		return tanh, nil
	case "relu":
		return func(x tir.PrimExpr) tir.PrimExpr { return tir.Max(x, zero) }, nil
	case "affine":
		a, b := take(alphas, 1), take(betas, 0)
		return func(x tir.PrimExpr) tir.PrimExpr { return tir.Add(tir.Mul(num(a), x), num(b)) }, nil
	case "leakyrelu":
		a := take(alphas, 0.01)
		return func(x tir.PrimExpr) tir.PrimExpr { return tir.NewSelect(tir.LT(x, zero), tir.Mul(num(a), x), x) }, nil
	case "thresholdedrelu":
		a := take(alphas, 1)
		return func(x tir.PrimExpr) tir.PrimExpr { return tir.NewSelect(tir.GT(x, num(a)), x, zero) }, nil
	case "scaledtanh":
		a, b := take(alphas, 1), take(betas, 1)
		return func(x tir.PrimExpr) tir.PrimExpr { return tir.Mul(num(a), tanh(tir.Mul(num(b), x))) }, nil
	case "hardsigmoid":
		a, b := take(alphas, 0.2), take(betas, 0.5)
		return func(x tir.PrimExpr) tir.PrimExpr {
			return tir.Max(zero, tir.Min(one, tir.Add(tir.Mul(num(a), x), num(b))))
		}, nil
	case "elu":
		a := take(alphas, 1)
		return func(x tir.PrimExpr) tir.PrimExpr {
			return tir.NewSelect(tir.LT(x, zero), tir.Mul(num(a), tir.Sub(exp(x), one)), x)
		}, nil
	case "softsign":
		return func(x tir.PrimExpr) tir.PrimExpr { return tir.Div(x, tir.Add(one, tir.NewCall(tir.IntrinFabs, x))) }, nil
	case "softplus":
		return func(x tir.PrimExpr) tir.PrimExpr { return tir.NewCall(tir.IntrinLog, tir.Add(one, exp(x))) }, nil
	}
	return nil, fmt.Errorf("unsupported activation %q", name)
}

// nnRecurrent is the static description of one recurrent layer call.
type nnRecurrent struct {
	kind                           string
	dirs, seq, batch, in, hs, gh   int64
	layout                         int64
	direction                      string
	acts                           []nnActFn
	nAct                           int
	clip                           float64
	linearBeforeReset, inputForget bool
	dt                             ir.DType
	// adt is the type the layer computes in (accType): float32 for
	// float32 layers, float64 otherwise, as the reference.
	adt ir.DType
	// fma: the target's processor fuses multiply-add in hardware; without
	// it the float32 products multiply and add (a libm fmaf per product
	// would be slow).
	fma bool
}

func computeRecurrent(kind string) strategy.ComputeFunc {
	return func(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
		if err := nnCheckNonEmpty(c); err != nil {
			return nil, err
		}
		x := in[0]
		nd, err := op.NumDirections(c.Attrs.Str("direction"))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", c.Op.Name, err)
		}
		g := &nnRecurrent{kind: kind, dirs: nd, hs: c.Attrs.Int("hidden_size"), layout: c.Attrs.Int("layout"),
			direction: c.Attrs.Str("direction"), clip: c.Attrs.Float("clip"), dt: x.DType, adt: accType(x.DType),
			fma: c.Target != nil && c.Target.Processor().FMA()}
		g.seq, g.batch, g.in = x.Shape[0], x.Shape[1], x.Shape[2]
		if g.layout == 1 {
			g.seq, g.batch = g.batch, g.seq
		}
		defaults := nnDefaultActivations(kind)
		g.nAct = len(defaults)
		g.gh = int64(map[string]int{"rnn": 1, "gru": 3, "lstm": 4}[kind]) * g.hs
		names := c.Attrs.Strings("activations")
		if len(names) == 0 {
			for d := int64(0); d < nd; d++ {
				names = append(names, defaults...)
			}
		}
		if len(names) != g.nAct*int(nd) {
			return nil, fmt.Errorf("%s: want %d activations, got %v", c.Op.Name, g.nAct*int(nd), names)
		}
		alphas := append([]float64(nil), c.Attrs.Floats("activation_alpha")...)
		betas := append([]float64(nil), c.Attrs.Floats("activation_beta")...)
		for _, nm := range names {
			f, err := nnActivation(nm, &alphas, &betas, g.adt)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", c.Op.Name, err)
			}
			g.acts = append(g.acts, f)
		}
		g.linearBeforeReset = kind == "gru" && c.Attrs.Bool("linear_before_reset")
		g.inputForget = kind == "lstm" && c.Attrs.Bool("input_forget")
		tt := c.OutType.(*ir.TupleType)
		var shapes []ir.Shape
		var dts []ir.DType
		for _, f := range tt.Fields {
			ft := f.(*ir.TensorType)
			shapes = append(shapes, ft.Shape)
			dts = append(dts, ft.DType)
		}
		return te.Extern(nnName(c), shapes, dts, in, g.build), nil
	}
}

// accType is the type in which a recurrent layer multiplies and adds
// weights of type dt: float32 for float32, float64 otherwise.
func accType(dt ir.DType) ir.DType {
	if dt == ir.Float32 {
		return ir.Float32
	}
	return ir.Float64
}

// rnnParallelMACs is the size (multiply-adds) from which a recurrent
// step's matrix-vector product runs its row blocks on the threads.
const rnnParallelMACs = 1 << 15

// nnScratch is a scratch vector allocated around the layer's loops.
type nnScratch struct{ buf *tir.Buffer }

func newScratch(name string, dt ir.DType, n int64) nnScratch {
	return nnScratch{tir.NewBuffer(name, dt, ir.Shape{n}, "global")}
}

func (s nnScratch) at(i tir.PrimExpr) tir.PrimExpr { return tir.NewLoad(s.buf, i) }

func (s nnScratch) set(i, v tir.PrimExpr) tir.Stmt { return tir.NewStore(s.buf, v, i) }

// loop is a serial loop over [0, n) with a fresh int32 variable.
func (g *nnRecurrent) loop(name string, n int64, body func(i tir.PrimExpr) tir.Stmt) tir.Stmt {
	v := tir.NewVar(name, tir.Int32T)
	return tir.Loop(v, n, tir.Serial, body(v))
}

// vloop is loop with independent iterations, vectorized: the gates of
// the hidden units, each of which reads and writes only its own.
func (g *nnRecurrent) vloop(name string, n int64, body func(i tir.PrimExpr) tir.Stmt) tir.Stmt {
	v := tir.NewVar(name, tir.Int32T)
	return tir.Loop(v, n, tir.Vectorized, body(v))
}

func (g *nnRecurrent) clipped(v tir.PrimExpr) tir.PrimExpr {
	if g.clip > 0 {
		return tir.Max(tir.FloatConst(g.adt, -g.clip), tir.Min(tir.FloatConst(g.adt, g.clip), v))
	}
	return v
}

// build emits the whole layer.
func (g *nnRecurrent) build(ins, outs []*tir.Buffer) tir.Stmt {
	X, W, R, B, lens, H0 := ins[0], ins[1], ins[2], ins[3], ins[4], ins[5]
	Y, Yh := outs[0], outs[1]
	var C0, P, Yc *tir.Buffer
	lstm := g.kind == "lstm"
	if lstm {
		C0, P, Yc = ins[6], ins[7], outs[2]
	}
	hs, gh := g.hs, g.gh
	adt := g.adt
	toA := func(e tir.PrimExpr) tir.PrimExpr { return nnCast(adt, e) }
	H, Cs := newScratch("rnn_h", adt, hs), newScratch("rnn_c", adt, hs)
	NH, NC := newScratch("rnn_nh", adt, hs), newScratch("rnn_nc", adt, hs)
	HR := newScratch("rnn_hr", adt, gh)
	// The weights of one direction in blocks of rj rows, each block
	// transposed, in their own type (half the bytes of float64 for float32,
	// which the steps stream from cache): WT[((j/rj)*in + i)*rj + j%rj] =
	// W[d, j, i], RT likewise from R with hs columns, so that the products
	// below read each block's rows for one i as one contiguous vector and
	// the block's columns one after the other. Weights that
	// alter_recurrent_layout packed at compile time are in that layout
	// already (op.RecurrentPackedShape) and are read where they lie; others
	// are transposed into WT and RT at every call.
	packed := len(W.Shape) == 4
	rj := op.RecurrentRowBlock(hs)
	if packed {
		rj = W.Shape[3]
	}
	blocked := func(j, i tir.PrimExpr, cols int64) tir.PrimExpr {
		return tir.Add(tir.Mul(tir.Add(tir.Mul(tir.Div(j, tir.Idx(rj)), tir.Idx(cols)), i), tir.Idx(rj)), tir.Mod(j, tir.Idx(rj)))
	}
	WT := nnScratch{tir.NewBuffer("rnn_wt", W.DType, ir.Shape{g.in * gh}, "global")}
	// XA holds the input's products of every step (project below), in
	// the products' type.
	XA := newScratch("rnn_xa", adt, g.seq*gh)
	RT := nnScratch{tir.NewBuffer("rnn_rt", R.DType, ir.Shape{hs * gh}, "global")}
	Z, RG := newScratch("rnn_z", adt, hs), newScratch("rnn_r", adt, hs)
	state := func(d int64, b, j tir.PrimExpr) []tir.PrimExpr { // index into [d, b, h] / [b, d, h]
		if g.layout == 1 {
			return []tir.PrimExpr{b, tir.Idx(d), j}
		}
		return []tir.PrimExpr{tir.Idx(d), b, j}
	}
	xAt := func(t, b, i tir.PrimExpr) tir.PrimExpr {
		if g.layout == 1 {
			return toA(tir.NewLoad(X, b, t, i))
		}
		return toA(tir.NewLoad(X, t, b, i))
	}
	yIdx := func(t tir.PrimExpr, d int64, b, j tir.PrimExpr) []tir.PrimExpr {
		if g.layout == 1 {
			return []tir.PrimExpr{b, t, tir.Idx(d), j}
		}
		return []tir.PrimExpr{t, tir.Idx(d), b, j}
	}
	out := func(v tir.PrimExpr) tir.PrimExpr { return nnOut(g.dt, v) }

	zeroY := nnLoopNest(Y.Shape, "yz", func(i []tir.PrimExpr) tir.Stmt { return tir.NewStore(Y, nnZero(g.dt), i...) })
	var dirStmts []tir.Stmt
	for d := int64(0); d < g.dirs; d++ {
		reverse := g.direction == "reverse" || d == 1
		f := g.acts[int(d)*g.nAct]
		var gAct, hAct nnActFn
		if g.nAct > 1 {
			gAct = g.acts[int(d)*g.nAct+1]
		}
		if g.nAct > 2 {
			hAct = g.acts[int(d)*g.nAct+2]
		}
		wb := func(j tir.PrimExpr) tir.PrimExpr { return toA(tir.NewLoad(B, tir.Idx(d), j)) }
		rb := func(j tir.PrimExpr) tir.PrimExpr { return toA(tir.NewLoad(B, tir.Idx(d), tir.Add(j, tir.Idx(gh)))) }
		off := func(j tir.PrimExpr, k int64) tir.PrimExpr { return tir.Add(j, tir.Idx(k*hs)) }
		// wAt and rAt read the weight element of block jb, column i and
		// row k of the block, from WT and RT or from the packed weights.
		wAt := func(jb, i, k tir.PrimExpr) tir.PrimExpr {
			return WT.at(tir.Add(tir.Mul(tir.Add(tir.Mul(jb, tir.Idx(g.in)), i), tir.Idx(rj)), k))
		}
		rAt := func(jb, i, k tir.PrimExpr) tir.PrimExpr {
			return RT.at(tir.Add(tir.Mul(tir.Add(tir.Mul(jb, tir.Idx(hs)), i), tir.Idx(rj)), k))
		}
		if packed {
			wAt = func(jb, i, k tir.PrimExpr) tir.PrimExpr { return tir.NewLoad(W, tir.Idx(d), jb, i, k) }
			rAt = func(jb, i, k tir.PrimExpr) tir.PrimExpr { return tir.NewLoad(R, tir.Idx(d), jb, i, k) }
		}
		var transpose tir.Stmt = tir.NoOp()
		if !packed {
			transpose = tir.Seq(
				g.loop("j", gh, func(j tir.PrimExpr) tir.Stmt {
					return g.loop("i", g.in, func(i tir.PrimExpr) tir.Stmt {
						return WT.set(blocked(j, i, g.in), tir.NewLoad(W, tir.Idx(d), j, i))
					})
				}),
				g.loop("j", gh, func(j tir.PrimExpr) tir.Stmt {
					return g.loop("i", hs, func(i tir.PrimExpr) tir.Stmt {
						return RT.set(blocked(j, i, hs), tir.NewLoad(R, tir.Idx(d), j, i))
					})
				}))
		}
		// products computes, for each r in [0, reps) and j in [0, m),
		// init(r, j) + sum over i in [0, n) of v(r, i) * W'(off + j, i) and
		// hands it to done(r, j, value): blocks of rj rows of j held in a
		// local array (registers) while i runs over [0, n) inside, in
		// order, so that every row sums its products in the order of i as
		// the reference's dot product does, and the rows of a block are
		// one vector operation. grp blocks run together: their grp
		// independent chains of additions hide the addition's latency,
		// which one block's single chain waited on. Float32 weights
		// multiply-add in float32 (fused, as the dense kernels do), other
		// types in float64 as the reference does. T(jb, i, k) reads
		// W'(jb*rj + k, i) (wAt, rAt).
		products := func(reps, n, m, off int64, init func(r, j tir.PrimExpr) tir.PrimExpr, v func(r, i tir.PrimExpr) tir.PrimExpr, T func(jb, i, k tir.PrimExpr) tir.PrimExpr,
			done func(r, j, val tir.PrimExpr) tir.Stmt) tir.Stmt {
			nb := m / rj
			// rt repetitions (time steps) at a time share each load of
			// the weights (4 of them, with up to 4 blocks: 16 vector
			// accumulators); one repetition takes up to 8 blocks.
			rt := int64(1)
			for _, c := range []int64{4, 2} {
				if reps%c == 0 {
					rt = c
					break
				}
			}
			grp := int64(1)
			for _, c := range []int64{8, 4, 2} {
				if nb%c == 0 && c*rt <= 16 {
					grp = c
					break
				}
			}
			tile := grp * rj
			blk := tir.NewBuffer("rnn_acc", adt, ir.Shape{rt * tile}, "global")
			at := func(k tir.PrimExpr) tir.PrimExpr { return tir.NewLoad(blk, k) }
			// Groups run on the threads when the products are large
			// enough to pay for a parallel region (each writes its own
			// rows).
			kind := tir.Serial
			if nb/grp >= 2 && reps*n*m >= rnnParallelMACs {
				kind = tir.Parallel
			}
			jgv := tir.NewVar("jg", tir.Int32T)
			return tir.Loop(jgv, nb/grp, kind, func(jg tir.PrimExpr) tir.Stmt {
				j0 := tir.Mul(jg, tir.Idx(tile))
				// one computes repetitions r0 .. r0+rt-1.
				one := func(r0 tir.PrimExpr) tir.Stmt {
					rep := func(q int64) tir.PrimExpr { return tir.Add(r0, tir.Idx(q)) }
					var inits, dones []tir.Stmt
					for q := int64(0); q < rt; q++ {
						k1, k3 := tir.NewVar("k", tir.Int32T), tir.NewVar("k", tir.Int32T)
						inits = append(inits, tir.Loop(k1, tile, tir.Vectorized, tir.NewStore(blk, nnCast(adt, init(rep(q), tir.Add(j0, k1))), tir.Add(tir.Idx(q*tile), k1))))
						dones = append(dones, tir.Loop(k3, tile, tir.Vectorized, done(rep(q), tir.Add(j0, k3), at(tir.Add(tir.Idx(q*tile), k3)))))
					}
					k2, gv := tir.NewVar("k", tir.Int32T), tir.NewVar("g", tir.Int32T)
					sums := g.loop("i", n, func(i tir.PrimExpr) tir.Stmt {
						jb := tir.Add(tir.Mul(jg, tir.Idx(grp)), gv)
						t := T(tir.Add(jb, tir.Idx(off/rj)), i, k2)
						var vis []tir.PrimExpr
						var inner func(q int64) tir.Stmt
						inner = func(q int64) tir.Stmt {
							if q < rt {
								return nnLet("v", nnCast(adt, v(rep(q), i)), func(vi tir.PrimExpr) tir.Stmt {
									vis = append(vis, vi)
									return inner(q + 1)
								})
							}
							var stores []tir.Stmt
							for q, vi := range vis {
								bi := tir.Add(tir.Add(tir.Idx(int64(q)*tile), tir.Mul(gv, tir.Idx(rj))), k2)
								var sum tir.PrimExpr
								switch {
								case adt == ir.Float32 && g.fma:
									sum = tir.NewCall(tir.IntrinFma, vi, t, at(bi))
								case adt == ir.Float32:
									sum = tir.Add(at(bi), tir.Mul(vi, t))
								default:
									sum = tir.Add(at(bi), tir.Mul(vi, nnToF64(t)))
								}
								stores = append(stores, tir.NewStore(blk, sum, bi))
							}
							return tir.Loop(gv, grp, tir.Unrolled, tir.Loop(k2, rj, tir.Vectorized, tir.Seq(stores...)))
						}
						return inner(0)
					})
					return tir.Seq(append(append(inits, sums), dones...)...)
				}
				var body tir.Stmt
				if reps == 1 {
					body = one(tir.Idx(0))
				} else {
					body = g.loop("r", reps/rt, func(r tir.PrimExpr) tir.Stmt { return one(tir.Mul(r, tir.Idx(rt))) })
				}
				return &tir.Allocate{Buffer: blk, Body: body}
			}(jgv))
		}
		// The input's products of every time step at once, before the
		// steps (XA[t, j] = W x_t + Wb): W is read once per step's row
		// group from cache instead of beside R at every step (with
		// R, 2 MB per step for 1024 x 256 each, which L2 did not hold).
		project := func(b tir.PrimExpr) tir.Stmt {
			return products(g.seq, g.in, gh, 0, func(_, j tir.PrimExpr) tir.PrimExpr { return wb(j) },
				func(t, i tir.PrimExpr) tir.PrimExpr { return xAt(t, b, i) }, wAt,
				func(t, j, val tir.PrimExpr) tir.Stmt {
					return XA.set(tir.Add(tir.Mul(t, tir.Idx(gh)), j), val)
				})
		}
		// acc[j] = init(j) + sum over i of v(i) * T(off + j, i), j in [0, m).
		accumulate := func(acc nnScratch, n, m, off int64, init func(j tir.PrimExpr) tir.PrimExpr, v func(i tir.PrimExpr) tir.PrimExpr, T func(jb, i, k tir.PrimExpr) tir.PrimExpr) tir.Stmt {
			return products(1, n, m, off, func(_, j tir.PrimExpr) tir.PrimExpr { return init(j) },
				func(_, i tir.PrimExpr) tir.PrimExpr { return v(i) }, T,
				func(_, j, val tir.PrimExpr) tir.Stmt { return acc.set(j, nnCast(acc.buf.DType, val)) })
		}
		perBatch := g.loop("b", g.batch, func(b tir.PrimExpr) tir.Stmt {
			L := tir.NewVar("len", tir.Int32T)
			lenVal := tir.Min(tir.Max(nnToI32(tir.NewLoad(lens, b)), tir.Idx(0)), tir.Idx(g.seq))
			initH := g.loop("j", hs, func(j tir.PrimExpr) tir.Stmt {
				s := H.set(j, toA(tir.NewLoad(H0, state(d, b, j)...)))
				if lstm {
					s = tir.Seq(s, Cs.set(j, toA(tir.NewLoad(C0, state(d, b, j)...))))
				}
				return s
			})
			step := g.loop("step", g.seq, func(step tir.PrimExpr) tir.Stmt {
				t := tir.NewVar("t", tir.Int32T)
				tv := step
				if reverse {
					tv = tir.Sub(tir.Sub(L, tir.Idx(1)), step)
				}
				// The step's input products, read where project wrote them.
				xw := func(j tir.PrimExpr) tir.PrimExpr { return XA.at(tir.Add(tir.Mul(t, tir.Idx(gh)), j)) }
				proj := accumulate(HR, hs, gh, 0, rb, H.at, rAt)
				var gates tir.Stmt
				switch g.kind {
				case "rnn":
					gates = g.vloop("j", hs, func(j tir.PrimExpr) tir.Stmt {
						return NH.set(j, f(g.clipped(tir.Add(xw(j), HR.at(j)))))
					})
				case "gru":
					zr := g.vloop("j", hs, func(j tir.PrimExpr) tir.Stmt {
						return tir.Seq(
							Z.set(j, f(g.clipped(tir.Add(xw(j), HR.at(j))))),
							RG.set(j, f(g.clipped(tir.Add(xw(off(j, 1)), HR.at(off(j, 1)))))),
						)
					})
					var reset tir.Stmt = tir.NoOp()
					if !g.linearBeforeReset {
						// NH[j] first accumulates the reset-gated recurrence.
						reset = accumulate(NH, hs, hs, 2*hs, func(j tir.PrimExpr) tir.PrimExpr { return rb(off(j, 2)) },
							func(i tir.PrimExpr) tir.PrimExpr { return tir.Mul(RG.at(i), H.at(i)) }, rAt)
					}
					hh := g.vloop("j", hs, func(j tir.PrimExpr) tir.Stmt {
						var cand tir.Stmt
						if g.linearBeforeReset {
							cand = NH.set(j, gAct(g.clipped(tir.Add(xw(off(j, 2)), tir.Mul(RG.at(j), HR.at(off(j, 2)))))))
						} else {
							cand = NH.set(j, gAct(g.clipped(tir.Add(xw(off(j, 2)), NH.at(j)))))
						}
						z := Z.at(j)
						return tir.Seq(cand, NH.set(j, tir.Add(tir.Mul(tir.Sub(tir.FloatConst(adt, 1), z), NH.at(j)), tir.Mul(z, H.at(j)))))
					})
					gates = tir.Seq(zr, reset, hh)
				case "lstm":
					pAt := func(j tir.PrimExpr, k int64) tir.PrimExpr { return toA(tir.NewLoad(P, tir.Idx(d), off(j, k))) }
					gates = g.vloop("j", hs, func(j tir.PrimExpr) tir.Stmt {
						cj := Cs.at(j)
						ig := f(g.clipped(tir.Add(tir.Add(xw(j), HR.at(j)), tir.Mul(pAt(j, 0), cj))))
						return nnLet("ig", ig, func(ig tir.PrimExpr) tir.Stmt {
							fg := f(g.clipped(tir.Add(tir.Add(xw(off(j, 2)), HR.at(off(j, 2))), tir.Mul(pAt(j, 2), cj))))
							if g.inputForget {
								fg = tir.Sub(tir.FloatConst(adt, 1), ig)
							}
							cg := gAct(g.clipped(tir.Add(xw(off(j, 3)), HR.at(off(j, 3)))))
							return tir.Seq(
								NC.set(j, tir.Add(tir.Mul(fg, cj), tir.Mul(ig, cg))),
								nnLet("og", f(g.clipped(tir.Add(tir.Add(xw(off(j, 1)), HR.at(off(j, 1))), tir.Mul(pAt(j, 1), NC.at(j))))), func(og tir.PrimExpr) tir.Stmt {
									return NH.set(j, tir.Mul(og, hAct(NC.at(j))))
								}),
							)
						})
					})
				}
				commit := g.vloop("j", hs, func(j tir.PrimExpr) tir.Stmt {
					s := tir.Seq(H.set(j, NH.at(j)), tir.NewStore(Y, out(NH.at(j)), yIdx(t, d, b, j)...))
					if lstm {
						s = tir.Seq(s, Cs.set(j, NC.at(j)))
					}
					return s
				})
				return tir.NewIf(tir.LT(step, L), tir.NewLet(t, tv, tir.Seq(proj, gates, commit)), nil)
			})
			final := g.loop("j", hs, func(j tir.PrimExpr) tir.Stmt {
				var s tir.Stmt = tir.NewStore(Yh, out(H.at(j)), state(d, b, j)...)
				if lstm {
					s = tir.Seq(s, tir.NewStore(Yc, out(Cs.at(j)), state(d, b, j)...))
				}
				return s
			})
			return tir.NewLet(L, lenVal, tir.Seq(project(b), initH, step, final))
		})
		dirStmts = append(dirStmts, transpose, perBatch)
	}
	body := tir.Seq(append([]tir.Stmt{zeroY}, dirStmts...)...)
	scratch := []nnScratch{H, Cs, NH, NC, HR, Z, RG}
	if !packed {
		scratch = append(scratch, WT, RT)
	}
	scratch = append(scratch, XA)
	for _, s := range scratch {
		body = &tir.Allocate{Buffer: s.buf, Body: body}
	}
	return body
}
