package opsuite

import (
	"fmt"
	"math"
	"math/rand/v2"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Networks returns whole networks in the styles of architectures beyond
// the shared models (kind "network"), with random weights: a ResNet-50
// bottleneck stack with unfolded batch normalisation, ShuffleNet v2
// (channel split and shuffle), EfficientNet (SiLU, squeeze-excite, 5x5
// depthwise), RegNet (grouped convolutions), DenseNet (concatenation
// chains, average pooling), a YOLO-style feature pyramid (LeakyRelu,
// nearest upsampling, a 255-channel head), ConvNeXt (7x7 depthwise,
// channels-last LayerNorm between permutes, patchify stem), a U-Net
// (transposed convolutions, skip concatenations, a bilinear upsampling
// head), a style-transfer network (InstanceNormalization, 9x9
// convolutions, k3 s2 transposed convolutions with output padding), a
// two-layer LSTM, a ViT encoder and a GPT-2
// decoder (tanh GELU, causal mask). Images are size x size (a multiple
// of 32), token sequences seq long; the benchmark takes 224 and 128,
// tests smaller ones. Each network is built in its framework's export
// style, so that what kiln recognises (fusions, layouts, views) is
// exercised as a user's model would.
func Networks(size, seq int64) []*Workload {
	rng := rand.New(rand.NewPCG(3, 4))
	return []*Workload{
		resnet50Net(rng, size),
		shufflenetNet(rng, size),
		efficientnetNet(rng, size),
		regnetNet(rng, size),
		densenetNet(rng, size),
		yoloNet(rng, size),
		convnextNet(rng, size),
		unetNet(rng, size),
		styleNet(rng, size),
		vitNet(rng, seq),
		gpt2Net(rng, seq),
		lstmNet(rng, seq),
	}
}

// net builds a network node by node, tracking every value's shape, the
// multiply-adds and the weights' bytes.
type net struct {
	*builder
	shapes map[string][]int64
	macs   int64
	wbytes int64
	n      int
}

func newNet(rng *rand.Rand, shape ...int64) *net {
	return &net{builder: newBuilder(rng, "x", shape), shapes: map[string][]int64{"x": shape}}
}

// fresh is a new value name.
func (n *net) fresh(p string) string {
	n.n++
	return fmt.Sprintf("%s%d", p, n.n)
}

// op adds one node with one output of the given shape.
func (n *net) op(op string, in []string, shape []int64, attrs ...*pb.AttributeProto) string {
	out := n.fresh("t")
	n.node(op, in, out, attrs...)
	n.shapes[out] = shape
	return out
}

// param adds an initializer of the given shape with values from f.
func (n *net) param(shape []int64, f func() float32) string {
	name := n.fresh("w")
	t := tensor.New(ir.Float32, ir.Shape(shape))
	v := t.Float32s()
	for i := range v {
		v[i] = f()
	}
	n.inits = append(n.inits, onnx.TensorToProto(t, name))
	n.wbytes += 4 * int64(len(v))
	return name
}

// weights is a layer's weight with unit-variance outputs for a fan-in.
func (n *net) weights(fan int64, shape ...int64) string {
	s := 1 / math.Sqrt(float64(max(fan, 1)))
	return n.param(shape, func() float32 { return float32(n.rng.NormFloat64() * s) })
}

func (n *net) uniform(lo, hi float32, shape ...int64) string {
	return n.param(shape, func() float32 { return lo + (hi-lo)*n.rng.Float32() })
}

// conv is a convolution with bias (bn false) or without bias followed by
// an unfolded BatchNormalization (bn true); padding k/2.
func (n *net) conv(x string, oc, k, s, g int64, bn bool) string {
	return n.convPad(x, oc, k, s, g, k/2, bn)
}

// convPad is conv with padding p on every side.
func (n *net) convPad(x string, oc, k, s, g, p int64, bn bool) string {
	in := n.shapes[x]
	c, h, w := in[1], in[2], in[3]
	oh, ow := (h+2*p-k)/s+1, (w+2*p-k)/s+1
	args := []string{x, n.weights(c/g*k*k, oc, c/g, k, k)}
	if !bn {
		args = append(args, n.weights(1, oc))
	}
	n.macs += oc * oh * ow * c / g * k * k
	y := n.op("Conv", args, []int64{1, oc, oh, ow}, ints("kernel_shape", k, k), ints("strides", s, s), ints("pads", p, p, p, p), intAttr("group", g))
	if bn {
		y = n.bn(y)
	}
	return y
}

// bn is an inference BatchNormalization over axis 1.
func (n *net) bn(x string) string {
	c := n.shapes[x][1]
	return n.op("BatchNormalization", []string{x, n.uniform(0.5, 1.5, c), n.uniform(-0.2, 0.2, c), n.uniform(-0.2, 0.2, c), n.uniform(0.5, 2, c)}, n.shapes[x])
}

// act applies an activation the way exporters write it: "relu",
// "silu" (Sigmoid and Mul, PyTorch's export), "hswish" (HardSwish),
// "leaky" (LeakyRelu 0.1), "sigmoid".
func (n *net) act(kind, x string) string {
	s := n.shapes[x]
	switch kind {
	case "relu":
		return n.op("Relu", []string{x}, s)
	case "silu":
		return n.op("Mul", []string{x, n.op("Sigmoid", []string{x}, s)}, s)
	case "hswish":
		return n.op("HardSwish", []string{x}, s)
	case "leaky":
		return n.op("LeakyRelu", []string{x}, s, floatAttr("alpha", 0.1))
	case "sigmoid":
		return n.op("Sigmoid", []string{x}, s)
	}
	panic("unknown activation " + kind) // callers pass the names above
}

func (n *net) add(a, b string) string { return n.op("Add", []string{a, b}, n.shapes[a]) }

// concat joins values along the channels.
func (n *net) concat(xs ...string) string {
	s := append([]int64(nil), n.shapes[xs[0]]...)
	s[1] = 0
	for _, x := range xs {
		s[1] += n.shapes[x][1]
	}
	return n.op("Concat", xs, s, intAttr("axis", 1))
}

func (n *net) pool(op string, x string, k, s, p int64) string {
	in := n.shapes[x]
	oh, ow := (in[2]+2*p-k)/s+1, (in[3]+2*p-k)/s+1
	return n.op(op, []string{x}, []int64{1, in[1], oh, ow}, ints("kernel_shape", k, k), ints("strides", s, s), ints("pads", p, p, p, p))
}

func (n *net) gap(x string) string {
	return n.op("GlobalAveragePool", []string{x}, []int64{1, n.shapes[x][1], 1, 1})
}

// classifier is Flatten and Gemm to classes.
func (n *net) classifier(x string, classes int64) string {
	c := n.shapes[x][1]
	f := n.op("Flatten", []string{x}, []int64{1, c}, intAttr("axis", 1))
	n.macs += c * classes
	return n.op("Gemm", []string{f, n.weights(c, classes, c), n.weights(1, classes)}, []int64{1, classes}, intAttr("transB", 1))
}

// reshape is Reshape to a constant shape.
func (n *net) reshape(x string, shape ...int64) string {
	return n.op("Reshape", []string{x, n.constInts(n.fresh("s"), shape...)}, shape)
}

func (n *net) transpose(x string, perm ...int64) string {
	in := n.shapes[x]
	s := make([]int64, len(perm))
	for i, p := range perm {
		s[i] = in[p]
	}
	return n.op("Transpose", []string{x}, s, ints("perm", perm...))
}

// split divides the channels into two equal halves (Split with a split
// input, opset 13 and later).
func (n *net) split(x string) (string, string) {
	s := append([]int64(nil), n.shapes[x]...)
	s[1] /= 2
	a, b := n.fresh("t"), n.fresh("t")
	n.node("Split", []string{x, n.constInts(n.fresh("s"), s[1], s[1])}, a, intAttr("axis", 1)).Output = []string{a, b}
	n.shapes[a], n.shapes[b] = s, s
	return a, b
}

// shuffle is ShuffleNet's channel shuffle of two groups.
func (n *net) shuffle(x string) string {
	s := n.shapes[x]
	r := n.reshape(x, 1, 2, s[1]/2, s[2], s[3])
	return n.reshape(n.transpose(r, 0, 2, 1, 3, 4), s...)
}

// matmul multiplies the last axis of x by a [k, m] weight, plus bias.
func (n *net) matmul(x string, m int64) string {
	s := append([]int64(nil), n.shapes[x]...)
	k := s[len(s)-1]
	rows := int64(1)
	for _, d := range s[:len(s)-1] {
		rows *= d
	}
	n.macs += rows * k * m
	s[len(s)-1] = m
	y := n.op("MatMul", []string{x, n.weights(k, k, m)}, s)
	return n.op("Add", []string{y, n.weights(1, m)}, s)
}

func (n *net) layerNorm(x string) string {
	d := n.shapes[x][len(n.shapes[x])-1]
	return n.op("LayerNormalization", []string{x, n.uniform(0.5, 1.5, d), n.uniform(-0.2, 0.2, d)}, n.shapes[x], intAttr("axis", -1))
}

func (n *net) scalarConst(v float32) string { return n.scalar(n.fresh("c"), v) }

// finishNet closes the network with output y (the last value renamed).
func (n *net) finishNet(name, desc, y string) *Workload {
	last := n.nodes[len(n.nodes)-1]
	if last.Output[0] != y {
		panic("the network's output must be its last node's") // builders below end so
	}
	last.Output[0] = "y"
	s := n.shapes[y]
	outBytes := int64(4)
	for _, d := range s {
		outBytes *= d
	}
	return n.finish(name, "network", desc, s, 2*n.macs, 4*int64(len(n.in.Float32s()))+n.wbytes+outBytes)
}

func floatAttr(name string, v float32) *pb.AttributeProto {
	return &pb.AttributeProto{Name: proto.String(name), Type: pb.AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
}

// bottleneck is a residual bottleneck block with unfolded batch
// normalisation: 1x1 to mid channels, 3x3 (stride s, groups g), 1x1 to
// out, ReLUs, and a strided 1x1 projection shortcut when the shape
// changes (ResNet's blocks with g = 1, RegNet's with grouped 3x3).
func (n *net) bottleneck(x string, mid, out, s, g int64) string {
	short := x
	if s != 1 || n.shapes[x][1] != out {
		short = n.conv(x, out, 1, s, 1, true)
	}
	y := n.act("relu", n.conv(x, mid, 1, 1, 1, true))
	y = n.act("relu", n.conv(y, mid, 3, s, g, true))
	y = n.conv(y, out, 1, 1, 1, true)
	return n.act("relu", n.add(y, short))
}

// resnet50Net is ResNet-50's stem and first two stages (bottleneck blocks
// with unfolded batch normalisation, a strided projection shortcut) and
// its classifier.
func resnet50Net(rng *rand.Rand, size int64) *Workload {
	n := newNet(rng, 1, 3, size, size)
	x := n.act("relu", n.conv("x", 64, 7, 2, 1, true))
	x = n.pool("MaxPool", x, 3, 2, 1)
	for range 3 {
		x = n.bottleneck(x, 64, 256, 1, 1)
	}
	x = n.bottleneck(x, 128, 512, 2, 1)
	x = n.bottleneck(x, 128, 512, 1, 1)
	y := n.classifier(n.gap(x), 1000)
	return n.finishNet("net_resnet50", fmt.Sprintf("1x3x%dx%d, stem and stages 1-2 of ResNet-50, batch norm unfolded", size, size), y)
}

// shufflenetNet is ShuffleNet v2 1.0x's stem, stages 2 and 3 (shortened)
// and head.
func shufflenetNet(rng *rand.Rand, size int64) *Workload {
	n := newNet(rng, 1, 3, size, size)
	x := n.act("relu", n.conv("x", 24, 3, 2, 1, false))
	x = n.pool("MaxPool", x, 3, 2, 1)
	branch := func(x string, c, s int64) string {
		y := n.act("relu", n.conv(x, c, 1, 1, 1, false))
		y = n.conv(y, c, 3, s, c, false)
		return n.act("relu", n.conv(y, c, 1, 1, 1, false))
	}
	down := func(x string, out int64) string {
		c := out / 2
		l := n.conv(x, n.shapes[x][1], 3, 2, n.shapes[x][1], false)
		l = n.act("relu", n.conv(l, c, 1, 1, 1, false))
		return n.shuffle(n.concat(l, branch(x, c, 2)))
	}
	unit := func(x string) string {
		a, b := n.split(x)
		return n.shuffle(n.concat(a, branch(b, n.shapes[b][1], 1)))
	}
	x = down(x, 116)
	for range 3 {
		x = unit(x)
	}
	x = down(x, 232)
	x = unit(x)
	x = n.act("relu", n.conv(x, 1024, 1, 1, 1, false))
	y := n.classifier(n.gap(x), 1000)
	return n.finishNet("net_shufflenet_v2", fmt.Sprintf("1x3x%dx%d, ShuffleNet v2 stages 2-3 (shortened)", size, size), y)
}

// efficientnetNet is EfficientNet-B0's stem and first four stages:
// MBConv blocks with SiLU, squeeze-excite and 3x3 and 5x5 depthwise
// convolutions.
func efficientnetNet(rng *rand.Rand, size int64) *Workload {
	n := newNet(rng, 1, 3, size, size)
	x := n.act("silu", n.conv("x", 32, 3, 2, 1, false))
	mbconv := func(x string, expand, k, s, out int64) string {
		in := n.shapes[x][1]
		y := x
		if expand != 1 {
			y = n.act("silu", n.conv(y, in*expand, 1, 1, 1, false))
		}
		c := n.shapes[y][1]
		y = n.act("silu", n.conv(y, c, k, s, c, false))
		se := n.act("silu", n.conv(n.gap(y), max(1, in/4), 1, 1, 1, false))
		se = n.act("sigmoid", n.conv(se, c, 1, 1, 1, false))
		y = n.op("Mul", []string{y, se}, n.shapes[y])
		y = n.conv(y, out, 1, 1, 1, false)
		if s == 1 && in == out {
			y = n.add(y, x)
		}
		return y
	}
	x = mbconv(x, 1, 3, 1, 16)
	x = mbconv(x, 6, 3, 2, 24)
	x = mbconv(x, 6, 3, 1, 24)
	x = mbconv(x, 6, 5, 2, 40)
	x = mbconv(x, 6, 5, 1, 40)
	x = mbconv(x, 6, 3, 2, 80)
	x = n.act("silu", n.conv(x, 1280, 1, 1, 1, false))
	y := n.classifier(n.gap(x), 1000)
	return n.finishNet("net_efficientnet", fmt.Sprintf("1x3x%dx%d, EfficientNet-B0 stages 1-4 (shortened)", size, size), y)
}

// regnetNet is a RegNetX-style network: bottleneck blocks whose 3x3
// convolutions are grouped (group width 8 and 16), batch norm unfolded.
func regnetNet(rng *rand.Rand, size int64) *Workload {
	n := newNet(rng, 1, 3, size, size)
	x := n.act("relu", n.conv("x", 32, 3, 2, 1, true))
	block := func(x string, w, s, gw int64) string { return n.bottleneck(x, w, w, s, w/gw) }
	x = block(x, 32, 2, 8)
	x = block(x, 64, 2, 8)
	x = block(x, 64, 1, 8)
	x = block(x, 160, 2, 16)
	x = block(x, 160, 1, 16)
	x = block(x, 384, 2, 16)
	y := n.classifier(n.gap(x), 1000)
	return n.finishNet("net_regnet", fmt.Sprintf("1x3x%dx%d, RegNetX-style grouped bottlenecks", size, size), y)
}

// densenetNet is DenseNet-121's stem, first dense block (six layers), a
// transition and a shortened second block: chains of Concat with
// pre-activation batch normalisation.
func densenetNet(rng *rand.Rand, size int64) *Workload {
	n := newNet(rng, 1, 3, size, size)
	x := n.act("relu", n.conv("x", 64, 7, 2, 1, true))
	x = n.pool("MaxPool", x, 3, 2, 1)
	dense := func(x string, layers int) string {
		for range layers {
			y := n.conv(n.act("relu", n.bn(x)), 128, 1, 1, 1, false)
			y = n.conv(n.act("relu", n.bn(y)), 32, 3, 1, 1, false)
			x = n.concat(x, y)
		}
		return x
	}
	x = dense(x, 6)
	x = n.conv(n.act("relu", n.bn(x)), n.shapes[x][1]/2, 1, 1, 1, false)
	x = n.pool("AveragePool", x, 2, 2, 0)
	x = dense(x, 4)
	x = n.act("relu", n.bn(x))
	y := n.classifier(n.gap(x), 1000)
	return n.finishNet("net_densenet", fmt.Sprintf("1x3x%dx%d, DenseNet-121 block 1, a transition and 4 layers of block 2", size, size), y)
}

// yoloNet is a YOLO-style detector: a LeakyRelu backbone down to stride
// 32, a feature pyramid that upsamples (Resize, nearest) and
// concatenates, and a 255-channel head (3 anchors of 85) at stride 16.
func yoloNet(rng *rand.Rand, size int64) *Workload {
	n := newNet(rng, 1, 3, size, size)
	cbl := func(x string, oc, k, s int64) string { return n.act("leaky", n.conv(x, oc, k, s, 1, true)) }
	x := cbl("x", 16, 3, 1)
	for _, c := range []int64{32, 64, 128} {
		x = cbl(x, c, 3, 2)
		x = cbl(x, c, 3, 1)
	}
	c16 := cbl(x, 256, 3, 2) // stride 16
	x = cbl(c16, 512, 3, 2)  // stride 32
	x = cbl(x, 256, 1, 1)
	up := cbl(x, 128, 1, 1)
	s := n.shapes[up]
	scale := []float32{1, 1, 2, 2}
	scales := n.param([]int64{4}, func() float32 { v := scale[0]; scale = scale[1:]; return v })
	// PyTorch's export of nn.Upsample(scale_factor=2).
	up = n.op("Resize", []string{up, "", scales}, []int64{1, s[1], 2 * s[2], 2 * s[3]}, stringAttr("mode", "nearest"),
		stringAttr("coordinate_transformation_mode", "asymmetric"), stringAttr("nearest_mode", "floor"))
	x = cbl(n.concat(up, c16), 256, 3, 1)
	y := n.conv(x, 255, 1, 1, 1, false)
	return n.finishNet("net_yolo_fpn", fmt.Sprintf("1x3x%dx%d, LeakyRelu backbone, upsample and concat, 255-channel head", size, size), y)
}

// convnextNet is ConvNeXt-T's patchify stem and first two stages
// (shortened) as timm exports it: 7x7 depthwise convolutions, LayerNorm
// over the channels between permutes to channels-last and back, pointwise
// layers as MatMul, GELU (erf), a layer scale, and 2x2 stride-2
// downsampling after a channels-first LayerNorm.
func convnextNet(rng *rand.Rand, size int64) *Workload {
	n := newNet(rng, 1, 3, size, size)
	lnCF := func(x string) string { // LayerNorm2d: permute, normalise, permute back
		return n.transpose(n.layerNorm(n.transpose(x, 0, 2, 3, 1)), 0, 3, 1, 2)
	}
	gelu := func(h string) string {
		s := n.shapes[h]
		e := n.op("Erf", []string{n.op("Div", []string{h, n.scalarConst(1.4142135)}, s)}, s)
		return n.op("Mul", []string{n.op("Mul", []string{h, n.op("Add", []string{e, n.scalarConst(1)}, s)}, s), n.scalarConst(0.5)}, s)
	}
	block := func(x string) string {
		c := n.shapes[x][1]
		y := n.convPad(x, c, 7, 1, c, 3, false)
		y = n.layerNorm(n.transpose(y, 0, 2, 3, 1))
		y = n.matmul(gelu(n.matmul(y, 4*c)), c)
		y = n.op("Mul", []string{y, n.uniform(0.05, 0.2, c)}, n.shapes[y])
		return n.add(x, n.transpose(y, 0, 3, 1, 2))
	}
	x := lnCF(n.convPad("x", 96, 4, 4, 1, 0, false))
	for range 2 {
		x = block(x)
	}
	x = n.convPad(lnCF(x), 192, 2, 2, 1, 0, false)
	for range 2 {
		x = block(x)
	}
	g := n.gap(x)
	g = n.op("Flatten", []string{g}, []int64{1, 192}, intAttr("axis", 1))
	g = n.layerNorm(g)
	n.macs += 192 * 1000
	y := n.op("Gemm", []string{g, n.weights(192, 1000, 192), n.weights(1, 1000)}, []int64{1, 1000}, intAttr("transB", 1))
	return n.finishNet("net_convnext", fmt.Sprintf("1x3x%dx%d, ConvNeXt-T stem and stages 1-2 (shortened)", size, size), y)
}

// unetNet is a small U-Net for segmentation: two encoder levels of 3x3
// convolutions and max pooling, a bottleneck, a decoder of 2x2 stride-2
// transposed convolutions concatenated with the skips, and a head that
// upsamples bilinearly (half-pixel, as torchvision's segmentation heads)
// to the input's size before a 1x1 convolution to 21 classes.
func unetNet(rng *rand.Rand, size int64) *Workload {
	n := newNet(rng, 1, 3, size, size)
	cbr := func(x string, oc int64) string { return n.act("relu", n.conv(x, oc, 3, 1, 1, true)) }
	up := func(x string, oc int64) string {
		in := n.shapes[x]
		n.macs += in[1] * oc * 4 * in[2] * in[3]
		return n.op("ConvTranspose", []string{x, n.weights(in[1]*4, in[1], oc, 2, 2), n.weights(1, oc)},
			[]int64{1, oc, 2 * in[2], 2 * in[3]}, ints("kernel_shape", 2, 2), ints("strides", 2, 2))
	}
	x := n.pool("MaxPool", cbr("x", 16), 2, 2, 0) // size/2
	e1 := cbr(cbr(x, 32), 32)
	x = n.pool("MaxPool", e1, 2, 2, 0) // size/4
	e2 := cbr(cbr(x, 64), 64)
	x = n.pool("MaxPool", e2, 2, 2, 0) // size/8
	x = cbr(cbr(x, 128), 128)
	x = cbr(cbr(n.concat(up(x, 64), e2), 64), 64)
	x = cbr(cbr(n.concat(up(x, 32), e1), 32), 32)
	s := n.shapes[x]
	scale := []float32{1, 1, 2, 2}
	scales := n.param([]int64{4}, func() float32 { v := scale[0]; scale = scale[1:]; return v })
	x = n.op("Resize", []string{x, "", scales}, []int64{1, s[1], 2 * s[2], 2 * s[3]}, stringAttr("mode", "linear"))
	y := n.conv(x, 21, 1, 1, 1, false)
	return n.finishNet("net_unet", fmt.Sprintf("1x3x%dx%d, a two-level U-Net with transposed convolutions and a bilinear head", size, size), y)
}

func stringAttr(name, v string) *pb.AttributeProto {
	return &pb.AttributeProto{Name: proto.String(name), Type: pb.AttributeProto_STRING.Enum(), S: []byte(v)}
}

// attention is multi-head self-attention over x [1, seq, d] as PyTorch
// exports it (MatMul and Add projections, Reshape and Transpose to
// heads, scaled scores, Softmax), with an additive mask when mask is
// not "".
func (n *net) attention(x string, heads int64, mask string) string {
	s := n.shapes[x]
	seq, d := s[1], s[2]
	hd := d / heads
	split := func(t string) string { return n.transpose(n.reshape(t, 1, seq, heads, hd), 0, 2, 1, 3) }
	q, k, v := split(n.matmul(x, d)), split(n.matmul(x, d)), split(n.matmul(x, d))
	kt := n.transpose(k, 0, 1, 3, 2)
	n.macs += 2 * heads * seq * seq * hd
	sc := n.op("MatMul", []string{q, kt}, []int64{1, heads, seq, seq})
	sc = n.op("Mul", []string{sc, n.scalarConst(float32(1 / math.Sqrt(float64(hd))))}, n.shapes[sc])
	if mask != "" {
		sc = n.op("Add", []string{sc, mask}, n.shapes[sc])
	}
	p := n.op("Softmax", []string{sc}, n.shapes[sc], intAttr("axis", -1))
	o := n.op("MatMul", []string{p, v}, []int64{1, heads, seq, hd})
	o = n.reshape(n.transpose(o, 0, 2, 1, 3), 1, seq, d)
	return n.matmul(o, d)
}

// vitNet is two ViT-Tiny encoder blocks (pre-LayerNorm, 3 heads of 64,
// an MLP of 768 with GELU in its erf form) on seq embedded tokens.
func vitNet(rng *rand.Rand, seq int64) *Workload {
	const d = 192
	n := newNet(rng, 1, seq, d)
	x := "x"
	for range 2 {
		x = n.add(x, n.attention(n.layerNorm(x), 3, ""))
		h := n.matmul(n.layerNorm(x), 4*d)
		e := n.op("Erf", []string{n.op("Div", []string{h, n.scalarConst(1.4142135)}, n.shapes[h])}, n.shapes[h])
		g := n.op("Mul", []string{n.op("Mul", []string{h, n.op("Add", []string{e, n.scalarConst(1)}, n.shapes[h])}, n.shapes[h]), n.scalarConst(0.5)}, n.shapes[h])
		x = n.add(x, n.matmul(g, d))
	}
	y := n.layerNorm(x)
	return n.finishNet("net_vit", fmt.Sprintf("1x%dx%d tokens, two ViT-Tiny encoder blocks", seq, d), y)
}

// gpt2Net is two GPT-2-style decoder blocks (4 heads of 64, a causal
// additive mask, an MLP of 1024 with GELU in its tanh form using Pow).
func gpt2Net(rng *rand.Rand, seq int64) *Workload {
	const d = 256
	n := newNet(rng, 1, seq, d)
	mask := n.fresh("mask")
	mt := tensor.New(ir.Float32, ir.Shape{1, 1, seq, seq})
	mv := mt.Float32s()
	for i := range seq {
		for j := i + 1; j < seq; j++ {
			mv[i*seq+j] = -10000
		}
	}
	n.inits = append(n.inits, onnx.TensorToProto(mt, mask))
	x := "x"
	for range 2 {
		x = n.add(x, n.attention(n.layerNorm(x), 4, mask))
		h := n.matmul(n.layerNorm(x), 4*d)
		s := n.shapes[h]
		cube := n.op("Pow", []string{h, n.scalarConst(3)}, s)
		in := n.op("Add", []string{h, n.op("Mul", []string{cube, n.scalarConst(0.044715)}, s)}, s)
		t := n.op("Tanh", []string{n.op("Mul", []string{in, n.scalarConst(0.7978846)}, s)}, s)
		g := n.op("Mul", []string{n.op("Mul", []string{h, n.scalarConst(0.5)}, s), n.op("Add", []string{t, n.scalarConst(1)}, s)}, s)
		x = n.add(x, n.matmul(g, d))
	}
	y := n.layerNorm(x)
	return n.finishNet("net_gpt2", fmt.Sprintf("1x%dx%d tokens, two GPT-2-style decoder blocks with a causal mask", seq, d), y)
}

// lstmNet is a speech-style recogniser: two stacked LSTM layers (80
// features in, 256 hidden, ONNX's LSTM operator as PyTorch exports it)
// over seq frames and a projection to 32 classes per frame.
func lstmNet(rng *rand.Rand, seq int64) *Workload {
	const feat, hid, classes = 80, 256, 32
	n := newNet(rng, seq, 1, feat)
	x := "x"
	in := int64(feat)
	for range 2 {
		w := n.weights(in, 1, 4*hid, in)
		r := n.weights(hid, 1, 4*hid, hid)
		b := n.weights(hid, 1, 8*hid)
		n.macs += seq * 4 * hid * (in + hid)
		y := n.op("LSTM", []string{x, w, r, b}, []int64{seq, 1, 1, hid}, intAttr("hidden_size", hid))
		x = n.reshape(y, seq, 1, hid)
		in = hid
	}
	x = n.reshape(x, seq, hid)
	n.macs += seq * hid * classes
	y := n.op("MatMul", []string{x, n.weights(hid, hid, classes)}, []int64{seq, classes})
	return n.finishNet("net_lstm", fmt.Sprintf("%d frames of %d features, two LSTM layers of %d", seq, feat, hid), y)
}

// styleNet is a fast style-transfer network (Johnson et al.): 9x9 and
// strided 3x3 convolutions with InstanceNormalization and ReLU, two
// residual blocks, two 3x3 stride-2 transposed convolutions with output
// padding back to the input's size, and a 9x9 convolution to 3 channels.
func styleNet(rng *rand.Rand, size int64) *Workload {
	n := newNet(rng, 1, 3, size, size)
	in := func(x string) string {
		c := n.shapes[x][1]
		return n.op("InstanceNormalization", []string{x, n.uniform(0.5, 1.5, c), n.uniform(-0.2, 0.2, c)}, n.shapes[x])
	}
	cir := func(x string, oc, k, s int64) string { return n.act("relu", in(n.conv(x, oc, k, s, 1, false))) }
	up := func(x string, oc int64) string {
		s := n.shapes[x]
		n.macs += s[1] * oc * 9 * s[2] * s[3]
		y := n.op("ConvTranspose", []string{x, n.weights(s[1]*9, s[1], oc, 3, 3), n.weights(1, oc)},
			[]int64{1, oc, 2 * s[2], 2 * s[3]}, ints("kernel_shape", 3, 3), ints("strides", 2, 2),
			ints("pads", 1, 1, 1, 1), ints("output_padding", 1, 1))
		return n.act("relu", in(y))
	}
	x := cir("x", 32, 9, 1)
	x = cir(x, 64, 3, 2)
	x = cir(x, 128, 3, 2)
	for range 2 {
		y := in(n.conv(cir(x, 128, 3, 1), 128, 3, 1, 1, false))
		x = n.add(x, y)
	}
	x = up(up(x, 64), 32)
	y := n.conv(x, 3, 9, 1, 1, false)
	return n.finishNet("net_style", fmt.Sprintf("1x3x%dx%d, a fast style-transfer network with instance normalisation", size, size), y)
}
