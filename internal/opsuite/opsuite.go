// Package opsuite is kiln's operator micro-benchmark suite: single-operator
// ONNX models with the shapes of common CNN and transformer layers
// (convolutions of every kind, dense and batched matrix products, and the
// data-movement and normalisation operators of transformers), each with
// its arithmetic (FLOPs) and memory traffic, and a measurement of the
// processor's peak FLOP/s. `kiln bench --ops` compiles and times them;
// scripts/bench_ops.sh runs ONNX Runtime on the same models. It sits
// outside the compiler: it only writes models and measures.
package opsuite

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Workload is one single-operator benchmark.
type Workload struct {
	// Name identifies the workload ("conv3x3_64_56").
	Name string
	// Kind is the operator family: conv, depthwise, grouped, conv1x1,
	// pool, dense, batch_matmul, transpose, shuffle, split_concat,
	// softmax, layernorm, gelu.
	Kind string
	// Shape describes the workload in words ("1x64x56x56, 64 3x3 filters").
	Shape string
	// FLOPs counts the multiply-adds as two operations (0 for data
	// movement); Bytes is the data read and written once (input, weights,
	// output).
	FLOPs, Bytes int64
	// Model is the ONNX model (one input, "x"; weights are initializers).
	Model []byte
	// Input is the random input.
	Input *tensor.Tensor
}

// Save writes the workload as DIR/model.onnx and
// DIR/test_data_set_0/input_0.pb (the layout of ../shared/models and of
// the ONNX Runtime harness).
func (w *Workload) Save(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "test_data_set_0"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), w.Model, 0o644); err != nil {
		return err
	}
	return onnx.WriteTensorFile(filepath.Join(dir, "test_data_set_0", "input_0.pb"), w.Input, "x")
}

// Suite returns the workloads, in a fixed order, with inputs and weights
// drawn from a fixed seed.
func Suite() []*Workload {
	rng := rand.New(rand.NewPCG(1, 2))
	var ws []*Workload
	conv := func(name, kind string, c, h, oc, k, s, g int64) {
		p := k / 2
		oh := (h+2*p-k)/s + 1
		b := newBuilder(rng, "x", []int64{1, c, h, h})
		w := b.weight("w", oc, c/g, k, k)
		bias := b.weight("b", oc)
		b.node("Conv", []string{"x", w, bias}, "y", ints("kernel_shape", k, k), ints("strides", s, s), ints("pads", p, p, p, p), intAttr("group", g))
		desc := fmt.Sprintf("1x%dx%dx%d, %d %dx%d filters, stride %d", c, h, h, oc, k, k, s)
		if g > 1 {
			desc += fmt.Sprintf(", %d groups", g)
		}
		ws = append(ws, b.finish(name, kind, desc, []int64{1, oc, oh, oh},
			2*oc*oh*oh*(c/g)*k*k, 4*(c*h*h+oc*(c/g)*k*k+oc*oh*oh)))
	}
	conv("conv3x3_64_56", "conv", 64, 56, 64, 3, 1, 1)
	conv("conv3x3_128_28", "conv", 128, 28, 128, 3, 1, 1)
	conv("conv3x3_s2_64_56", "conv", 64, 56, 128, 3, 2, 1)
	conv("conv7x7_s2_3_224", "conv", 3, 224, 64, 7, 2, 1)
	conv("conv1x1_24_144_56", "conv1x1", 24, 56, 144, 1, 1, 1)
	conv("conv1x1_160_960_7", "conv1x1", 160, 7, 960, 1, 1, 1)
	conv("conv1x1_256_256_14", "conv1x1", 256, 14, 256, 1, 1, 1)
	// Output channels no register tile divides: a classifier's 1000, a
	// detection head's 255 (YOLO: 3 anchors x 85).
	conv("conv1x1_512_1000_13", "conv1x1", 512, 13, 1000, 1, 1, 1)
	conv("conv1x1_256_255_13", "conv1x1", 256, 13, 255, 1, 1, 1)
	conv("depthwise3x3_144_56", "depthwise", 144, 56, 144, 3, 1, 144)
	conv("depthwise3x3_s2_144_56", "depthwise", 144, 56, 144, 3, 2, 144)
	conv("grouped3x3_128_28_g8", "grouped", 128, 28, 128, 3, 1, 8)
	conv("grouped3x3_s2_96_56_g4", "grouped", 96, 56, 96, 3, 2, 4)

	maxPool := func(name string, c, h, k, s, p, ceil int64) {
		oh := (h + 2*p - k + s - 1) / s
		if ceil == 0 {
			oh = (h+2*p-k)/s + 1
		} else {
			oh++
		}
		b := newBuilder(rng, "x", []int64{1, c, h, h})
		b.node("MaxPool", []string{"x"}, "y", ints("kernel_shape", k, k), ints("strides", s, s), ints("pads", p, p, p, p), intAttr("ceil_mode", ceil))
		desc := fmt.Sprintf("1x%dx%dx%d, %dx%d window, stride %d, pad %d", c, h, h, k, k, s, p)
		if ceil != 0 {
			desc += ", ceil mode"
		}
		ws = append(ws, b.finish(name, "pool", desc, []int64{1, c, oh, oh}, 0, 4*(c*h*h+c*oh*oh)))
	}
	maxPool("maxpool3x3_s2_64_111", 64, 111, 3, 2, 0, 1)
	maxPool("maxpool3x3_s2_p1_64_112", 64, 112, 3, 2, 1, 0)
	{ // global average pooling before a classifier
		b := newBuilder(rng, "x", []int64{1, 1000, 13, 13})
		b.node("GlobalAveragePool", []string{"x"}, "y")
		ws = append(ws, b.finish("global_avgpool_1000_13", "pool", "1x1000x13x13", []int64{1, 1000, 1, 1}, 0, 4*(1000*13*13+1000)))
	}

	{ // dense: a transformer's feed-forward layer
		const m, k, n = 128, 256, 1024
		b := newBuilder(rng, "x", []int64{m, k})
		w := b.weight("w", k, n)
		bias := b.weight("b", n)
		b.node("MatMul", []string{"x", w}, "t")
		b.node("Add", []string{"t", bias}, "y")
		ws = append(ws, b.finish("dense_128x256x1024", "dense", "128x256 times 256x1024, plus bias", []int64{m, n}, 2*m*k*n, 4*(m*k+k*n+m*n)))
	}
	{ // batched matmul: attention scores
		const h, s, d = 4, 128, 64
		b := newBuilder(rng, "x", []int64{h, s, d})
		w := b.weight("kt", h, d, s)
		b.node("MatMul", []string{"x", w}, "y")
		ws = append(ws, b.finish("batch_matmul_4x128x64x128", "batch_matmul", "4 x (128x64 times 64x128)", []int64{h, s, s}, 2*h*s*d*s, 4*(2*h*s*d+h*s*s)))
	}
	{ // transpose: splitting attention heads
		b := newBuilder(rng, "x", []int64{1, 128, 12, 64})
		b.node("Transpose", []string{"x"}, "y", ints("perm", 0, 2, 1, 3))
		n := int64(128 * 12 * 64)
		ws = append(ws, b.finish("transpose_0213_128x12x64", "transpose", "1x128x12x64, perm 0,2,1,3", []int64{1, 12, 128, 64}, 0, 8*n))
	}
	{ // channel shuffle (ShuffleNet): Reshape, Transpose, Reshape
		const c, hw = 232, 14
		b := newBuilder(rng, "x", []int64{1, c, hw, hw})
		s1 := b.constInts("s1", 1, 2, c/2, hw, hw)
		s2 := b.constInts("s2", 1, c, hw, hw)
		b.node("Reshape", []string{"x", s1}, "r")
		b.node("Transpose", []string{"r"}, "t", ints("perm", 0, 2, 1, 3, 4))
		b.node("Reshape", []string{"t", s2}, "y")
		n := int64(c * hw * hw)
		ws = append(ws, b.finish("channel_shuffle_232_14", "shuffle", "1x232x14x14, 2 groups", []int64{1, c, hw, hw}, 0, 8*n))
	}
	{ // split and concat in the other order
		const c, hw = 256, 28
		b := newBuilder(rng, "x", []int64{1, c, hw, hw})
		b.node("Split", []string{"x"}, "a", intAttr("axis", 1), intAttr("num_outputs", 2)).Output = []string{"a", "bb"}
		b.node("Concat", []string{"bb", "a"}, "y", intAttr("axis", 1))
		n := int64(c * hw * hw)
		ws = append(ws, b.finish("split_concat_256_28", "split_concat", "1x256x28x28 split in 2 along channels, concatenated swapped", []int64{1, c, hw, hw}, 0, 8*n))
	}
	{ // softmax over attention scores
		b := newBuilder(rng, "x", []int64{1, 12, 128, 128})
		b.node("Softmax", []string{"x"}, "y", intAttr("axis", -1))
		n := int64(12 * 128 * 128)
		ws = append(ws, b.finish("softmax_12x128x128", "softmax", "1x12x128x128, last axis", []int64{1, 12, 128, 128}, 0, 8*n))
	}
	{ // layer normalisation
		const s, d = 128, 768
		b := newBuilder(rng, "x", []int64{1, s, d})
		g := b.weight("g", d)
		be := b.weight("be", d)
		b.node("LayerNormalization", []string{"x", g, be}, "y", intAttr("axis", -1))
		ws = append(ws, b.finish("layernorm_128x768", "layernorm", "1x128x768, last axis", []int64{1, s, d}, 0, 8*s*d))
	}
	{ // GELU as exported by PyTorch: x * 0.5 * (1 + erf(x / sqrt(2)))
		const s, d = 128, 3072
		b := newBuilder(rng, "x", []int64{1, s, d})
		r2 := b.scalar("r2", 1.4142135)
		one := b.scalar("one", 1)
		half := b.scalar("half", 0.5)
		b.node("Div", []string{"x", r2}, "d")
		b.node("Erf", []string{"d"}, "e")
		b.node("Add", []string{"e", one}, "a")
		b.node("Mul", []string{"x", "a"}, "m")
		b.node("Mul", []string{"m", half}, "y")
		ws = append(ws, b.finish("gelu_128x3072", "gelu", "1x128x3072, erf form", []int64{1, s, d}, 0, 8*s*d))
	}
	return ws
}

// builder assembles a one-input graph.
type builder struct {
	rng   *rand.Rand
	in    *tensor.Tensor
	nodes []*pb.NodeProto
	inits []*pb.TensorProto
}

func newBuilder(rng *rand.Rand, name string, shape []int64) *builder {
	return &builder{rng: rng, in: randomTensor(rng, shape)}
}

func randomTensor(rng *rand.Rand, shape []int64) *tensor.Tensor {
	t := tensor.New(ir.Float32, ir.Shape(shape))
	f := t.Float32s()
	for i := range f {
		f[i] = float32(rng.NormFloat64())
	}
	return t
}

// weight adds a random initializer scaled like a trained layer's (unit
// variance of the outputs).
func (b *builder) weight(name string, shape ...int64) string {
	t := randomTensor(b.rng, shape)
	fan := int64(1)
	for _, d := range shape[1:] {
		fan *= d
	}
	scale := float32(1)
	if len(shape) > 1 {
		scale = 1 / float32(max(1, fan))
	}
	f := t.Float32s()
	for i := range f {
		f[i] *= scale
	}
	b.inits = append(b.inits, onnx.TensorToProto(t, name))
	return name
}

func (b *builder) scalar(name string, v float32) string {
	t := tensor.New(ir.Float32, ir.Shape{})
	t.Float32s()[0] = v
	b.inits = append(b.inits, onnx.TensorToProto(t, name))
	return name
}

func (b *builder) constInts(name string, v ...int64) string {
	t := tensor.New(ir.Int64, ir.Shape{int64(len(v))})
	copy(t.Int64s(), v)
	b.inits = append(b.inits, onnx.TensorToProto(t, name))
	return name
}

func (b *builder) node(op string, in []string, out string, attrs ...*pb.AttributeProto) *pb.NodeProto {
	n := &pb.NodeProto{Name: proto.String(fmt.Sprintf("%s_%d", op, len(b.nodes))), OpType: proto.String(op), Input: in, Output: []string{out}, Attribute: attrs}
	b.nodes = append(b.nodes, n)
	return n
}

func valueInfo(name string, shape []int64) *pb.ValueInfoProto {
	dims := make([]*pb.TensorShapeProto_Dimension, len(shape))
	for i, d := range shape {
		dims[i] = &pb.TensorShapeProto_Dimension{Value: &pb.TensorShapeProto_Dimension_DimValue{DimValue: d}}
	}
	return &pb.ValueInfoProto{Name: proto.String(name), Type: &pb.TypeProto{Value: &pb.TypeProto_TensorType{TensorType: &pb.TypeProto_Tensor{
		ElemType: proto.Int32(int32(pb.TensorProto_FLOAT)), Shape: &pb.TensorShapeProto{Dim: dims}}}}}
}

func (b *builder) finish(name, kind, desc string, outShape []int64, flops, bytes int64) *Workload {
	m := &pb.ModelProto{
		IrVersion:    proto.Int64(8),
		ProducerName: proto.String("kiln opsuite"),
		OpsetImport:  []*pb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(18)}},
		Graph: &pb.GraphProto{
			Name:        proto.String(name),
			Node:        b.nodes,
			Initializer: b.inits,
			Input:       []*pb.ValueInfoProto{valueInfo("x", b.in.Shape)},
			Output:      []*pb.ValueInfoProto{valueInfo("y", outShape)},
		},
	}
	data, err := proto.Marshal(m)
	if err != nil {
		panic(err) // a well-formed message built here always marshals
	}
	return &Workload{Name: name, Kind: kind, Shape: desc, FLOPs: flops, Bytes: bytes, Model: data, Input: b.in}
}

func ints(name string, v ...int64) *pb.AttributeProto {
	return &pb.AttributeProto{Name: proto.String(name), Type: pb.AttributeProto_INTS.Enum(), Ints: v}
}

func intAttr(name string, v int64) *pb.AttributeProto {
	return &pb.AttributeProto{Name: proto.String(name), Type: pb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}
