package ref

import (
	"fmt"
	"math"
	"strings"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Kernels of the ONNX recurrent layers (nn.rnn, nn.gru, nn.lstm), computed
// in float64 step by step exactly as the ONNX operator documentation
// writes the equations.

func init() {
	register(op.RNN, recurrentKernel("rnn"))
	register(op.GRU, recurrentKernel("gru"))
	register(op.LSTM, recurrentKernel("lstm"))
}

type actFn func(float64) float64

// activation builds an ONNX recurrent activation by name; alpha and beta
// are consumed from the lists (in order) by the functions that take them.
func activation(name string, alphas, betas *[]float64) (actFn, error) {
	take := func(l *[]float64, def float64) float64 {
		if len(*l) == 0 {
			return def
		}
		v := (*l)[0]
		*l = (*l)[1:]
		return v
	}
	switch strings.ToLower(name) {
	case "sigmoid":
		return func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }, nil
	case "tanh":
		return math.Tanh, nil
	case "relu":
		return func(x float64) float64 { return math.Max(x, 0) }, nil
	case "affine":
		a, b := take(alphas, 1), take(betas, 0)
		return func(x float64) float64 { return a*x + b }, nil
	case "leakyrelu":
		a := take(alphas, 0.01)
		return func(x float64) float64 {
			if x < 0 {
				return a * x
			}
			return x
		}, nil
	case "thresholdedrelu":
		a := take(alphas, 1)
		return func(x float64) float64 {
			if x > a {
				return x
			}
			return 0
		}, nil
	case "scaledtanh":
		a, b := take(alphas, 1), take(betas, 1)
		return func(x float64) float64 { return a * math.Tanh(b*x) }, nil
	case "hardsigmoid":
		a, b := take(alphas, 0.2), take(betas, 0.5)
		return func(x float64) float64 { return math.Max(0, math.Min(1, a*x+b)) }, nil
	case "elu":
		a := take(alphas, 1)
		return func(x float64) float64 {
			if x < 0 {
				return a * (math.Exp(x) - 1)
			}
			return x
		}, nil
	case "softsign":
		return func(x float64) float64 { return x / (1 + math.Abs(x)) }, nil
	case "softplus":
		return func(x float64) float64 { return math.Log1p(math.Exp(x)) }, nil
	}
	return nil, fmt.Errorf("unsupported activation %q", name)
}

// RecurrentActivations returns the activation names a layer kind uses per
// direction when the activations attribute is empty.
func RecurrentActivations(kind string) []string {
	switch kind {
	case "gru":
		return []string{"Sigmoid", "Tanh"}
	case "lstm":
		return []string{"Sigmoid", "Tanh", "Tanh"}
	}
	return []string{"Tanh"}
}

func recurrentKernel(kind string) Kernel {
	return func(args []*tensor.Tensor, attrs ir.Attrs, out ir.Type) ([]*tensor.Tensor, error) {
		tt := out.(*ir.TupleType)
		x := args[0]
		hs := int(attrs.Int("hidden_size"))
		nd, err := op.NumDirections(attrs.Str("direction"))
		if err != nil {
			return nil, err
		}
		dirs := int(nd)
		layout := attrs.Int("layout")
		seq, batch, in := int(x.Shape[0]), int(x.Shape[1]), int(x.Shape[2])
		if layout == 1 {
			seq, batch = batch, seq
		}
		nAct := len(RecurrentActivations(kind))
		names := attrs.Strings("activations")
		if len(names) == 0 {
			for d := 0; d < dirs; d++ {
				names = append(names, RecurrentActivations(kind)...)
			}
		}
		if len(names) != nAct*dirs {
			return nil, fmt.Errorf("want %d activations, got %v", nAct*dirs, names)
		}
		alphas := append([]float64(nil), attrs.Floats("activation_alpha")...)
		betas := append([]float64(nil), attrs.Floats("activation_beta")...)
		acts := make([]actFn, len(names))
		for i, nm := range names {
			if acts[i], err = activation(nm, &alphas, &betas); err != nil {
				return nil, err
			}
		}
		clip := attrs.Float("clip")
		clipf := func(v float64) float64 {
			if clip > 0 {
				return math.Max(-clip, math.Min(clip, v))
			}
			return v
		}
		xs, ws, rs, bs := floats(x), unpackRecurrent(args[1]), unpackRecurrent(args[2]), floats(args[3])
		seqLens := args[4].AsInt64s()
		h0 := floats(args[5])
		var c0, ps []float64
		if kind == "lstm" {
			c0, ps = floats(args[6]), floats(args[7])
		}
		gates := map[string]int{"rnn": 1, "gru": 3, "lstm": 4}[kind]
		gh := gates * hs
		y := make([]float64, tt.Fields[0].(*ir.TensorType).Shape.NumElements())
		yh := make([]float64, dirs*batch*hs)
		yc := make([]float64, dirs*batch*hs)
		xAt := func(t, b int) []float64 {
			if layout == 1 {
				return xs[(b*seq+t)*in : (b*seq+t+1)*in]
			}
			return xs[(t*batch+b)*in : (t*batch+b+1)*in]
		}
		stateIdx := func(d, b int) int { // offset of [d, b, :] in Y_h / initial_h
			if layout == 1 {
				return (b*dirs + d) * hs
			}
			return (d*batch + b) * hs
		}
		yIdx := func(t, d, b int) int {
			if layout == 1 {
				return ((b*seq+t)*dirs + d) * hs
			}
			return ((t*dirs+d)*batch + b) * hs
		}
		linearBeforeReset := kind == "gru" && attrs.Bool("linear_before_reset")
		inputForget := kind == "lstm" && attrs.Bool("input_forget")
		for d := 0; d < dirs; d++ {
			reverse := attrs.Str("direction") == "reverse" || d == 1
			W := ws[d*gh*in : (d+1)*gh*in]
			R := rs[d*gh*hs : (d+1)*gh*hs]
			Wb := bs[d*2*gh : d*2*gh+gh]
			Rb := bs[d*2*gh+gh : (d+1)*2*gh]
			f := acts[d*nAct]
			var g, hAct actFn
			if nAct > 1 {
				g = acts[d*nAct+1]
			}
			if nAct > 2 {
				hAct = acts[d*nAct+2]
			}
			for b := 0; b < batch; b++ {
				L := int(seqLens[b])
				if L < 0 || L > seq {
					return nil, fmt.Errorf("sequence_lens[%d] = %d out of range [0, %d]", b, L, seq)
				}
				H := append([]float64(nil), h0[stateIdx(d, b):stateIdx(d, b)+hs]...)
				var C []float64
				if kind == "lstm" {
					C = append([]float64(nil), c0[stateIdx(d, b):stateIdx(d, b)+hs]...)
				}
				xw := make([]float64, gh) // X*W^T + Wb
				hr := make([]float64, gh) // H*R^T + Rb
				for step := 0; step < L; step++ {
					t := step
					if reverse {
						t = L - 1 - step
					}
					xt := xAt(t, b)
					for j := 0; j < gh; j++ {
						s := Wb[j]
						for i, v := range xt {
							s += v * W[j*in+i]
						}
						xw[j] = s
						s = Rb[j]
						for i, v := range H {
							s += v * R[j*hs+i]
						}
						hr[j] = s
					}
					nh := make([]float64, hs)
					switch kind {
					case "rnn":
						for j := 0; j < hs; j++ {
							nh[j] = f(clipf(xw[j] + hr[j]))
						}
					case "gru":
						// gate order z, r, h
						z, r := make([]float64, hs), make([]float64, hs)
						for j := 0; j < hs; j++ {
							z[j] = f(clipf(xw[j] + hr[j]))
							r[j] = f(clipf(xw[hs+j] + hr[hs+j]))
						}
						for j := 0; j < hs; j++ {
							var hh float64
							if linearBeforeReset {
								hh = g(clipf(xw[2*hs+j] + r[j]*hr[2*hs+j]))
							} else {
								s := Rb[2*hs+j]
								for i := 0; i < hs; i++ {
									s += r[i] * H[i] * R[(2*hs+j)*hs+i]
								}
								hh = g(clipf(xw[2*hs+j] + s))
							}
							nh[j] = (1-z[j])*hh + z[j]*H[j]
						}
					case "lstm":
						// gate order i, o, f, c; peepholes P = [Pi, Po, Pf]
						P := ps[d*3*hs : (d+1)*3*hs]
						nc := make([]float64, hs)
						for j := 0; j < hs; j++ {
							ig := f(clipf(xw[j] + hr[j] + P[j]*C[j]))
							fg := f(clipf(xw[2*hs+j] + hr[2*hs+j] + P[2*hs+j]*C[j]))
							if inputForget {
								fg = 1 - ig
							}
							cg := g(clipf(xw[3*hs+j] + hr[3*hs+j]))
							nc[j] = fg*C[j] + ig*cg
							og := f(clipf(xw[hs+j] + hr[hs+j] + P[hs+j]*nc[j]))
							nh[j] = og * hAct(nc[j])
						}
						C = nc
					}
					H = nh
					copy(y[yIdx(t, d, b):], H)
				}
				copy(yh[stateIdx(d, b):], H)
				if kind == "lstm" {
					copy(yc[stateIdx(d, b):], C)
				}
			}
		}
		res := []*tensor.Tensor{
			fromFloats(tt.Fields[0].(*ir.TensorType), y),
			fromFloats(tt.Fields[1].(*ir.TensorType), yh),
		}
		if kind == "lstm" {
			res = append(res, fromFloats(tt.Fields[2].(*ir.TensorType), yc))
		}
		return res, nil
	}
}

// unpackRecurrent returns a recurrent layer's weight W or R as float64
// values in the ONNX order [D, G*H, C]: as they are for a 3-D weight, and
// for one packed in blocks of rows, [D, G*H/rb, C, rb]
// (op.RecurrentPackedShape), element [d, jb, c, jv] at [d, jb*rb + jv, c].
func unpackRecurrent(w *tensor.Tensor) []float64 {
	v := floats(w)
	if len(w.Shape) != 4 {
		return v
	}
	rows, c, rb := int(w.Shape[1]*w.Shape[3]), int(w.Shape[2]), int(w.Shape[3])
	out := make([]float64, len(v))
	for d := 0; d < int(w.Shape[0]); d++ {
		base := d * rows * c
		for j := 0; j < rows; j++ {
			for i := 0; i < c; i++ {
				out[base+j*c+i] = v[base+packedRecurrentIndex(j, i, c, rb)]
			}
		}
	}
	return out
}

// packedRecurrentIndex is where row j, column i of one direction of a
// recurrent weight with c columns lies in its packed form in blocks of rb
// rows (op.RecurrentPackedShape), from the direction's start.
func packedRecurrentIndex(j, i, c, rb int) int { return ((j/rb)*c+i)*rb + j%rb }

// PackRecurrentWeight packs a recurrent layer's W [D, G*H, I] or R
// [D, G*H, H] in blocks of rb rows (op.RecurrentPackedShape): element
// [d, jb, c, jv] of the result is w's [d, jb*rb + jv, c].
func PackRecurrentWeight(w *tensor.Tensor, rb int64) (*tensor.Tensor, error) {
	if len(w.Shape) != 3 || rb < 2 || w.Shape[1]%rb != 0 {
		return nil, fmt.Errorf("cannot pack recurrent weight %s in blocks of %d rows", w.Shape, rb)
	}
	out := tensor.New(w.DType, op.RecurrentPackedShape(w.Shape, rb))
	rows, c, b := int(w.Shape[1]), int(w.Shape[2]), int(rb)
	for d := 0; d < int(w.Shape[0]); d++ {
		base := d * rows * c
		for j := 0; j < rows; j++ {
			for i := 0; i < c; i++ {
				out.CopyElem(base+packedRecurrentIndex(j, i, c, b), w, base+j*c+i)
			}
		}
	}
	return out, nil
}
