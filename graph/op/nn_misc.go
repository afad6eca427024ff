package op

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kiln-dev/kiln/ir"
)

// This file declares the matrix, softmax, data-movement, recurrent and
// vision operators of the "nn" group.

// Dense is a fully connected layer without bias: x[..., K] times w[N, K]
// transposed gives [..., N] (Relay's nn.dense).
var Dense = declare(&Op{Name: "nn.dense", NumArgs: 2, Pattern: OutEWiseFusable, Rel: denseRel, Doc: "x[..., K] * w[N, K]^T"})

// MatMul is a matrix product with numpy semantics (ONNX MatMul): 1-D
// operands are promoted to a matrix and the added dimension removed again,
// leading (batch) dimensions broadcast. transpose_a / transpose_b swap the
// last two dimensions of an operand of rank >= 2 first.
var MatMul = declare(&Op{Name: "nn.matmul", NumArgs: 2,
	Attrs: []AttrSpec{
		{Name: "transpose_a", Kind: ir.AttrBool, Default: false},
		{Name: "transpose_b", Kind: ir.AttrBool, Default: false},
	},
	Pattern: OutEWiseFusable, Rel: matmulRel, Doc: "numpy matmul with broadcast batch dimensions"})

// Softmax is exp(x) / sum(exp(x)) along axis.
var Softmax = declare(&Op{Name: "nn.softmax", NumArgs: 1,
	Attrs:   []AttrSpec{{Name: "axis", Kind: ir.AttrInt, Default: int64(-1)}},
	Pattern: OutEWiseFusable, Rel: floatIdentityRel, Doc: "softmax along axis"})

// LogSoftmax is x - log(sum(exp(x))) along axis.
var LogSoftmax = declare(&Op{Name: "nn.log_softmax", NumArgs: 1,
	Attrs:   []AttrSpec{{Name: "axis", Kind: ir.AttrInt, Default: int64(-1)}},
	Pattern: OutEWiseFusable, Rel: floatIdentityRel, Doc: "log of softmax along axis"})

// Hardmax is 1 at the first maximum along axis and 0 elsewhere.
var Hardmax = declare(&Op{Name: "nn.hardmax", NumArgs: 1,
	Attrs:   []AttrSpec{{Name: "axis", Kind: ir.AttrInt, Default: int64(-1)}},
	Pattern: Opaque, Rel: floatIdentityRel, Doc: "one-hot of the first maximum along axis"})

// DepthToSpace moves channel blocks of an NCHW tensor into block_size x
// block_size spatial blocks; mode "DCR" (depth-column-row) or "CRD".
var DepthToSpace = declare(&Op{Name: "nn.depth_to_space", NumArgs: 1,
	Attrs: []AttrSpec{
		{Name: "block_size", Kind: ir.AttrInt, Required: true},
		{Name: "mode", Kind: ir.AttrString, Default: "DCR"},
	},
	Pattern: Injective, Rel: depthToSpaceRel, Doc: "rearrange channels into spatial blocks"})

// SpaceToDepth moves block_size x block_size spatial blocks of an NCHW
// tensor into channels (the inverse of DepthToSpace in DCR mode).
var SpaceToDepth = declare(&Op{Name: "nn.space_to_depth", NumArgs: 1,
	Attrs:   []AttrSpec{{Name: "block_size", Kind: ir.AttrInt, Required: true}},
	Pattern: Injective, Rel: spaceToDepthRel, Doc: "rearrange spatial blocks into channels"})

// Einsum is Einstein summation over its operands by equation (numpy
// notation with "..." and an optional "->" output).
var Einsum = declare(&Op{Name: "einsum", NumArgs: -1, MinArgs: 1,
	Attrs:   []AttrSpec{{Name: "equation", Kind: ir.AttrString, Required: true}},
	Pattern: Opaque, Rel: einsumRel, Doc: "Einstein summation"})

func rnnAttrs(extra ...AttrSpec) []AttrSpec {
	return append([]AttrSpec{
		{Name: "hidden_size", Kind: ir.AttrInt, Required: true},
		{Name: "direction", Kind: ir.AttrString, Default: "forward"},
		{Name: "activations", Kind: ir.AttrStrings, Default: []string{}},
		{Name: "activation_alpha", Kind: ir.AttrFloats, Default: []float64{}},
		{Name: "activation_beta", Kind: ir.AttrFloats, Default: []float64{}},
		{Name: "clip", Kind: ir.AttrFloat, Default: 0.0},
		{Name: "layout", Kind: ir.AttrInt, Default: int64(0)},
	}, extra...)
}

// The recurrent layers follow ONNX RNN, GRU and LSTM exactly, with every
// optional input present (the frontend supplies zeros and full sequence
// lengths): (X, W, R, B, sequence_lens, initial_h[, initial_c, P]). X is
// [seq, batch, input] (layout 0) or [batch, seq, input] (layout 1). The
// result is the tuple (Y, Y_h[, Y_c]). An empty activations list means the
// ONNX defaults; clip 0 means no clipping. W and R may instead be packed
// in blocks of rows (RecurrentPackedShape; 4-D), as
// alter_recurrent_layout packs constant weights.
var (
	// RNN is the simple recurrent layer (one gate, default activation Tanh).
	RNN = declare(&Op{Name: "nn.rnn", NumArgs: 6, Attrs: rnnAttrs(), Pattern: Opaque, Rel: recurrentRel(1, false), Doc: "ONNX RNN layer"})
	// GRU is the gated recurrent unit layer (gates z, r, h).
	GRU = declare(&Op{Name: "nn.gru", NumArgs: 6,
		Attrs:   rnnAttrs(AttrSpec{Name: "linear_before_reset", Kind: ir.AttrBool, Default: false}),
		Pattern: Opaque, Rel: recurrentRel(3, false), Doc: "ONNX GRU layer"})
	// LSTM is the long short-term memory layer (gates i, o, f, c; peepholes P).
	LSTM = declare(&Op{Name: "nn.lstm", NumArgs: 8,
		Attrs:   rnnAttrs(AttrSpec{Name: "input_forget", Kind: ir.AttrBool, Default: false}),
		Pattern: Opaque, Rel: recurrentRel(4, true), Doc: "ONNX LSTM layer"})
)

// RoiAlign pools each region of interest (rois [R, 4] as x1, y1, x2, y2 in
// input coordinates times spatial_scale, with batch_indices [R]) of an
// NCHW tensor into pooled_size bins by bilinear sampling, averaging
// ("avg") or taking the maximum ("max") of sampling_ratio^2 samples per
// bin (adaptive when 0). aligned shifts coordinates by half a pixel.
var RoiAlign = declare(&Op{Name: "vision.roi_align", NumArgs: 3,
	Attrs: []AttrSpec{
		{Name: "pooled_size", Kind: ir.AttrInts, Required: true},
		{Name: "spatial_scale", Kind: ir.AttrFloat, Default: 1.0},
		{Name: "sampling_ratio", Kind: ir.AttrInt, Default: int64(0)},
		{Name: "mode", Kind: ir.AttrString, Default: "avg"},
		{Name: "aligned", Kind: ir.AttrBool, Default: false},
	},
	Pattern: Opaque, Rel: roiAlignRel, Doc: "region-of-interest align"})

// GridSample samples an NCHW tensor at the normalised (x, y) locations of
// grid [N, Hout, Wout, 2], with method "bilinear", "nearest" or "bicubic",
// padding_mode "zeros", "border" or "reflection" and align_corners.
var GridSample = declare(&Op{Name: "image.grid_sample", NumArgs: 2,
	Attrs: []AttrSpec{
		{Name: "method", Kind: ir.AttrString, Default: "bilinear"},
		{Name: "padding_mode", Kind: ir.AttrString, Default: "zeros"},
		{Name: "align_corners", Kind: ir.AttrBool, Default: false},
	},
	Pattern: Opaque, Rel: gridSampleRel, Doc: "sample a tensor at grid locations"})

func denseRel(args []ir.Type, _ ir.Attrs) (ir.Type, error) {
	ts, err := Tensors(args)
	if err != nil {
		return nil, err
	}
	x, w := ts[0], ts[1]
	dt, err := SameDType(x, w)
	if err != nil {
		return nil, err
	}
	if !dt.IsNumeric() {
		return nil, fmt.Errorf("data type %s is not numeric", dt)
	}
	if len(x.Shape) < 1 || len(w.Shape) != 2 {
		return nil, fmt.Errorf("want x of rank >= 1 and 2-D weight, got %s and %s", x, w)
	}
	k := x.Shape[len(x.Shape)-1]
	if w.Shape[1] != k {
		return nil, fmt.Errorf("reduction sizes differ: x %s, weight %s", x, w)
	}
	out := append(x.Shape[:len(x.Shape)-1].Clone(), w.Shape[0])
	return ir.NewTensorType(dt, out), nil
}

// MatMulShapes computes a numpy matmul's geometry: the broadcast batch
// shape, M, K, N, and the output shape. 1-D operands are handled as numpy
// does; transposes apply to operands of rank >= 2.
func MatMulShapes(a, b ir.Shape, ta, tb bool) (batch ir.Shape, m, k, n int64, out ir.Shape, err error) {
	if len(a) == 0 || len(b) == 0 {
		return nil, 0, 0, 0, nil, fmt.Errorf("matmul of a scalar (%v, %v)", a, b)
	}
	aVec, bVec := len(a) == 1, len(b) == 1
	am, ak := int64(1), a[len(a)-1]
	if !aVec {
		am, ak = a[len(a)-2], a[len(a)-1]
		if ta {
			am, ak = ak, am
		}
	}
	bk, bn := b[0], int64(1)
	if !bVec {
		bk, bn = b[len(b)-2], b[len(b)-1]
		if tb {
			bk, bn = bn, bk
		}
	}
	if ak != bk {
		return nil, 0, 0, 0, nil, fmt.Errorf("reduction sizes differ: %v and %v", a, b)
	}
	var ab, bb ir.Shape
	if !aVec {
		ab = a[:len(a)-2]
	}
	if !bVec {
		bb = b[:len(b)-2]
	}
	batch, err = BroadcastShapes(ab, bb)
	if err != nil {
		return nil, 0, 0, 0, nil, err
	}
	out = batch.Clone()
	if !aVec {
		out = append(out, am)
	}
	if !bVec {
		out = append(out, bn)
	}
	return batch, am, ak, bn, out, nil
}

func matmulRel(args []ir.Type, attrs ir.Attrs) (ir.Type, error) {
	ts, err := Tensors(args)
	if err != nil {
		return nil, err
	}
	dt, err := SameDType(ts[0], ts[1])
	if err != nil {
		return nil, err
	}
	if !dt.IsNumeric() {
		return nil, fmt.Errorf("data type %s is not numeric", dt)
	}
	_, _, _, _, out, err := MatMulShapes(ts[0].Shape, ts[1].Shape, attrs.Bool("transpose_a"), attrs.Bool("transpose_b"))
	if err != nil {
		return nil, err
	}
	return ir.NewTensorType(dt, out), nil
}

func depthToSpaceRel(args []ir.Type, attrs ir.Attrs) (ir.Type, error) {
	ts, err := Tensors(args)
	if err != nil {
		return nil, err
	}
	x := ts[0]
	b := attrs.Int("block_size")
	if m := attrs.Str("mode"); m != "DCR" && m != "CRD" {
		return nil, fmt.Errorf("mode %q must be DCR or CRD", m)
	}
	if len(x.Shape) != 4 || b < 1 || x.Shape[1]%(b*b) != 0 {
		return nil, fmt.Errorf("data %s must be NCHW with C divisible by block_size^2 (block_size %d)", x, b)
	}
	return ir.NewTensorType(x.DType, ir.Shape{x.Shape[0], x.Shape[1] / (b * b), x.Shape[2] * b, x.Shape[3] * b}), nil
}

func spaceToDepthRel(args []ir.Type, attrs ir.Attrs) (ir.Type, error) {
	ts, err := Tensors(args)
	if err != nil {
		return nil, err
	}
	x := ts[0]
	b := attrs.Int("block_size")
	if len(x.Shape) != 4 || b < 1 || x.Shape[2]%b != 0 || x.Shape[3]%b != 0 {
		return nil, fmt.Errorf("data %s must be NCHW with H and W divisible by block_size %d", x, b)
	}
	return ir.NewTensorType(x.DType, ir.Shape{x.Shape[0], x.Shape[1] * b * b, x.Shape[2] / b, x.Shape[3] / b}), nil
}

// EinsumSpec is a parsed einsum equation bound to operand shapes. Labels
// are small integers; the dimensions covered by "..." get labels of their
// own. Inputs[i][d] is the label of dimension d of operand i.
type EinsumSpec struct {
	Inputs [][]int
	Output []int
	// Sizes maps each label to its extent.
	Sizes map[int]int64
	// Labels lists every label (output labels first, then summed ones).
	Labels []int
}

// ParseEinsum parses an einsum equation against operand shapes.
func ParseEinsum(eq string, shapes []ir.Shape) (*EinsumSpec, error) {
	eq = strings.ReplaceAll(eq, " ", "")
	lhs, rhs, explicit := strings.Cut(eq, "->")
	terms := strings.Split(lhs, ",")
	if len(terms) != len(shapes) {
		return nil, fmt.Errorf("equation %q has %d operands, got %d", eq, len(terms), len(shapes))
	}
	const ellBase = 1000 // labels of ellipsis dimensions: ellBase + position from the right
	spec := &EinsumSpec{Sizes: map[int]int64{}}
	ellRank := 0
	count := map[int]int{}
	for i, term := range terms {
		rank := len(shapes[i])
		pre, post, hasEll := strings.Cut(term, "...")
		if !hasEll {
			pre, post = term, ""
		}
		nExplicit := len(pre) + len(post)
		er := 0
		if hasEll {
			er = rank - nExplicit
		}
		if er < 0 || (!hasEll && nExplicit != rank) {
			return nil, fmt.Errorf("term %q does not match operand %d of shape %v", term, i, shapes[i])
		}
		ellRank = max(ellRank, er)
		var labels []int
		for _, r := range pre {
			labels = append(labels, int(r))
		}
		for j := 0; j < er; j++ {
			labels = append(labels, ellBase+er-1-j)
		}
		for _, r := range post {
			labels = append(labels, int(r))
		}
		for d, l := range labels {
			if l < ellBase && !isLetter(rune(l)) {
				return nil, fmt.Errorf("bad label %q in equation %q", rune(l), eq)
			}
			sz := shapes[i][d]
			if old, ok := spec.Sizes[l]; ok && old != sz {
				if l >= ellBase && (old == 1 || sz == 1) {
					spec.Sizes[l] = max(old, sz)
				} else {
					return nil, fmt.Errorf("label %s has sizes %d and %d", labelName(l), old, sz)
				}
			} else if !ok {
				spec.Sizes[l] = sz
			}
			if l < ellBase {
				count[l]++
			}
		}
		spec.Inputs = append(spec.Inputs, labels)
	}
	var ell []int
	for j := ellRank - 1; j >= 0; j-- {
		ell = append(ell, ellBase+j)
	}
	if explicit {
		pre, post, hasEll := strings.Cut(rhs, "...")
		if !hasEll {
			pre, post = rhs, ""
		}
		seen := map[int]bool{}
		add := func(s string) error {
			for _, r := range s {
				l := int(r)
				if _, ok := count[l]; !ok || seen[l] {
					return fmt.Errorf("output label %q of %q is unknown or repeated", r, eq)
				}
				seen[l] = true
				spec.Output = append(spec.Output, l)
			}
			return nil
		}
		if err := add(pre); err != nil {
			return nil, err
		}
		if hasEll {
			spec.Output = append(spec.Output, ell...)
		}
		if err := add(post); err != nil {
			return nil, err
		}
	} else {
		spec.Output = append(spec.Output, ell...)
		var once []int
		for l, c := range count {
			if c == 1 {
				once = append(once, l)
			}
		}
		sort.Ints(once)
		spec.Output = append(spec.Output, once...)
	}
	inOut := map[int]bool{}
	spec.Labels = append(spec.Labels, spec.Output...)
	for _, l := range spec.Output {
		inOut[l] = true
	}
	var rest []int
	for l := range spec.Sizes {
		if !inOut[l] {
			rest = append(rest, l)
		}
	}
	sort.Ints(rest)
	spec.Labels = append(spec.Labels, rest...)
	return spec, nil
}

func isLetter(r rune) bool { return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') }

func labelName(l int) string {
	if l >= 1000 {
		return fmt.Sprintf("...[%d]", l-1000)
	}
	return string(rune(l))
}

func einsumRel(args []ir.Type, attrs ir.Attrs) (ir.Type, error) {
	ts, err := Tensors(args)
	if err != nil {
		return nil, err
	}
	dt, err := SameDType(ts...)
	if err != nil {
		return nil, err
	}
	shapes := make([]ir.Shape, len(ts))
	for i, t := range ts {
		shapes[i] = t.Shape
	}
	spec, err := ParseEinsum(attrs.Str("equation"), shapes)
	if err != nil {
		return nil, err
	}
	out := ir.Shape{}
	for _, l := range spec.Output {
		out = append(out, spec.Sizes[l])
	}
	return ir.NewTensorType(dt, out), nil
}

// NumDirections returns 2 for "bidirectional", 1 for "forward" and
// "reverse", and an error otherwise.
func NumDirections(direction string) (int64, error) {
	switch direction {
	case "forward", "reverse":
		return 1, nil
	case "bidirectional":
		return 2, nil
	}
	return 0, fmt.Errorf("direction %q must be forward, reverse or bidirectional", direction)
}

func recurrentRel(gates int64, lstm bool) TypeRel {
	return func(args []ir.Type, attrs ir.Attrs) (ir.Type, error) {
		ts, err := Tensors(args)
		if err != nil {
			return nil, err
		}
		x := ts[0]
		if !x.DType.IsFloat() {
			return nil, fmt.Errorf("data type %s is not a float type", x.DType)
		}
		h := attrs.Int("hidden_size")
		d, err := NumDirections(attrs.Str("direction"))
		if err != nil {
			return nil, err
		}
		layout := attrs.Int("layout")
		if len(x.Shape) != 3 || (layout != 0 && layout != 1) || h < 1 {
			return nil, fmt.Errorf("X %s must be 3-D, layout 0 or 1 (got %d), hidden_size positive", x, layout)
		}
		seq, batch, in := x.Shape[0], x.Shape[1], x.Shape[2]
		if layout == 1 {
			seq, batch = batch, seq
		}
		want := []struct {
			name  string
			shape ir.Shape
			dt    ir.DType
		}{
			{"W", ir.Shape{d, gates * h, in}, x.DType},
			{"R", ir.Shape{d, gates * h, h}, x.DType},
			{"B", ir.Shape{d, 2 * gates * h}, x.DType},
			{"sequence_lens", ir.Shape{batch}, ir.Int32},
			{"initial_h", ir.Shape{d, batch, h}, x.DType},
		}
		if layout == 1 {
			want[4].shape = ir.Shape{batch, d, h}
		}
		if lstm {
			want = append(want, want[4])
			want[5].name = "initial_c"
			want = append(want, struct {
				name  string
				shape ir.Shape
				dt    ir.DType
			}{"P", ir.Shape{d, 3 * h}, x.DType})
		}
		// W and R may come packed in blocks of rows
		// (RecurrentPackedShape), both in the same blocks.
		if wp, rp := ts[1].Shape, ts[2].Shape; len(wp) == 4 || len(rp) == 4 {
			rb := int64(0)
			if len(wp) == 4 && len(rp) == 4 && wp[3] == rp[3] {
				rb = wp[3]
			}
			if rb < 2 || h%rb != 0 {
				return nil, fmt.Errorf("packed W %s and R %s must have the same row block, at least 2 and dividing hidden_size %d", ts[1], ts[2], h)
			}
			want[0].shape = RecurrentPackedShape(want[0].shape, rb)
			want[1].shape = RecurrentPackedShape(want[1].shape, rb)
		}
		for i, w := range want {
			t := ts[i+1]
			if t.DType != w.dt || !t.Shape.Equal(w.shape) {
				return nil, fmt.Errorf("%s is %s, want %s", w.name, t, ir.NewTensorType(w.dt, w.shape))
			}
		}
		y := ir.Shape{seq, d, batch, h}
		yh := ir.Shape{d, batch, h}
		if layout == 1 {
			y = ir.Shape{batch, seq, d, h}
			yh = ir.Shape{batch, d, h}
		}
		fields := []ir.Type{ir.NewTensorType(x.DType, y), ir.NewTensorType(x.DType, yh)}
		if lstm {
			fields = append(fields, ir.NewTensorType(x.DType, yh))
		}
		return &ir.TupleType{Fields: fields}, nil
	}
}

// RecurrentRowBlock is the block of rows in which the recurrent layers'
// weights of hidden size hs are packed (RecurrentPackedShape) and in
// which the CPU schedule computes their products (topi/nn_rnn.go): the
// largest of 16, 8, 4 and 2 that divides hs, or 1 when none does (the
// weights are then not packed).
func RecurrentRowBlock(hs int64) int64 {
	for _, b := range []int64{16, 8, 4, 2} {
		if hs%b == 0 {
			return b
		}
	}
	return 1
}

// RecurrentPackedShape is the shape of a recurrent layer's W [D, G*H, I]
// or R [D, G*H, H] packed in blocks of rb rows: [D, G*H/rb, I, rb], where
// element [d, jb, i, jv] is the unpacked [d, jb*rb + jv, i]. A block's rb
// rows for one column i are then one contiguous vector, which the CPU
// schedule reads as it streams the block's columns. alter_recurrent_layout
// packs constant weights so at compile time; nn.rnn, nn.gru and nn.lstm
// accept either form (the same rb for W and R, dividing hidden_size).
func RecurrentPackedShape(w ir.Shape, rb int64) ir.Shape {
	return ir.Shape{w[0], w[1] / rb, w[2], rb}
}

func roiAlignRel(args []ir.Type, attrs ir.Attrs) (ir.Type, error) {
	ts, err := Tensors(args)
	if err != nil {
		return nil, err
	}
	x, rois, idx := ts[0], ts[1], ts[2]
	if !x.DType.IsFloat() || len(x.Shape) != 4 {
		return nil, fmt.Errorf("data %s must be a 4-D float tensor", x)
	}
	if rois.DType != x.DType || len(rois.Shape) != 2 || rois.Shape[1] != 4 {
		return nil, fmt.Errorf("rois %s must be [R, 4] of the data's dtype", rois)
	}
	if !idx.DType.IsInteger() || len(idx.Shape) != 1 || idx.Shape[0] != rois.Shape[0] {
		return nil, fmt.Errorf("batch_indices %s must be integers [%d]", idx, rois.Shape[0])
	}
	ps := attrs.Ints("pooled_size")
	if len(ps) != 2 || ps[0] < 1 || ps[1] < 1 {
		return nil, fmt.Errorf("pooled_size %v must be two positive values", ps)
	}
	if m := attrs.Str("mode"); m != "avg" && m != "max" {
		return nil, fmt.Errorf("mode %q must be avg or max", m)
	}
	return ir.NewTensorType(x.DType, ir.Shape{rois.Shape[0], x.Shape[1], ps[0], ps[1]}), nil
}

func gridSampleRel(args []ir.Type, attrs ir.Attrs) (ir.Type, error) {
	ts, err := Tensors(args)
	if err != nil {
		return nil, err
	}
	x, g := ts[0], ts[1]
	if !x.DType.IsFloat() || len(x.Shape) != 4 {
		return nil, fmt.Errorf("data %s must be a 4-D float tensor", x)
	}
	if !g.DType.IsFloat() || len(g.Shape) != 4 || g.Shape[0] != x.Shape[0] || g.Shape[3] != 2 {
		return nil, fmt.Errorf("grid %s must be [N, H_out, W_out, 2] with N = %d", g, x.Shape[0])
	}
	switch attrs.Str("method") {
	case "bilinear", "nearest", "bicubic":
	default:
		return nil, fmt.Errorf("method %q must be bilinear, nearest or bicubic", attrs.Str("method"))
	}
	switch attrs.Str("padding_mode") {
	case "zeros", "border", "reflection":
	default:
		return nil, fmt.Errorf("padding_mode %q must be zeros, border or reflection", attrs.Str("padding_mode"))
	}
	return ir.NewTensorType(x.DType, ir.Shape{x.Shape[0], x.Shape[1], g.Shape[1], g.Shape[2]}), nil
}
