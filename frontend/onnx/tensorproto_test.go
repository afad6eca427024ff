package onnx

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// sample builds a 2x3 tensor of dt holding 0, 1, -2, 3, 250, 1 (converted).
func sample(dt ir.DType) *tensor.Tensor {
	t := tensor.New(dt, ir.Shape{2, 3})
	for i, v := range []float64{0, 1, -2, 3, 250, 1} {
		t.SetFloat(i, v)
	}
	return t
}

func TestTensorRawRoundTrip(t *testing.T) {
	for _, dt := range ir.AllDTypes {
		src := sample(dt)
		p := TensorToProto(src, "t_"+dt.String())
		if p.GetName() != "t_"+dt.String() {
			t.Fatalf("%s: name %q", dt, p.GetName())
		}
		// Through the wire format, as a file would be.
		data, err := proto.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var back pb.TensorProto
		if err := proto.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		got, err := TensorFromProto(&back)
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		if !got.Equal(src) {
			t.Errorf("%s: round trip %v != %v", dt, got.Data, src.Data)
		}
	}
}

func TestTensorTypedFields(t *testing.T) {
	dims := []int64{2, 2}
	cases := []struct {
		name string
		p    *pb.TensorProto
		want []float64
	}{
		{"float32", &pb.TensorProto{DataType: proto.Int32(1), FloatData: []float32{1.5, -2, 0, 3}}, []float64{1.5, -2, 0, 3}},
		{"float64", &pb.TensorProto{DataType: proto.Int32(11), DoubleData: []float64{1e300, -2, 0.25, 3}}, []float64{1e300, -2, 0.25, 3}},
		{"int64", &pb.TensorProto{DataType: proto.Int32(7), Int64Data: []int64{-1 << 40, 2, 0, 3}}, []float64{-1 << 40, 2, 0, 3}},
		{"int32", &pb.TensorProto{DataType: proto.Int32(6), Int32Data: []int32{-70000, 2, 0, 3}}, []float64{-70000, 2, 0, 3}},
		{"int16", &pb.TensorProto{DataType: proto.Int32(5), Int32Data: []int32{-300, 2, 0, 3}}, []float64{-300, 2, 0, 3}},
		{"int8", &pb.TensorProto{DataType: proto.Int32(3), Int32Data: []int32{-128, 127, 0, 3}}, []float64{-128, 127, 0, 3}},
		{"uint8", &pb.TensorProto{DataType: proto.Int32(2), Int32Data: []int32{255, 2, 0, 3}}, []float64{255, 2, 0, 3}},
		{"uint16", &pb.TensorProto{DataType: proto.Int32(4), Int32Data: []int32{65535, 2, 0, 3}}, []float64{65535, 2, 0, 3}},
		{"bool", &pb.TensorProto{DataType: proto.Int32(9), Int32Data: []int32{1, 0, 1, 1}}, []float64{1, 0, 1, 1}},
		// float16 bits: 0x3C00 = 1, 0xC000 = -2, 0x3800 = 0.5, 0x7C00 = +inf
		{"float16", &pb.TensorProto{DataType: proto.Int32(10), Int32Data: []int32{0x3C00, 0xC000, 0x3800, 0x7C00}}, []float64{1, -2, 0.5, math.Inf(1)}},
		// bfloat16 bits: 0x3F80 = 1, 0xC000 = -2, 0x3F00 = 0.5, 0x4040 = 3
		{"bfloat16", &pb.TensorProto{DataType: proto.Int32(16), Int32Data: []int32{0x3F80, 0xC000, 0x3F00, 0x4040}}, []float64{1, -2, 0.5, 3}},
		{"uint32", &pb.TensorProto{DataType: proto.Int32(12), Uint64Data: []uint64{4294967295, 2, 0, 3}}, []float64{4294967295, 2, 0, 3}},
		{"uint64", &pb.TensorProto{DataType: proto.Int32(13), Uint64Data: []uint64{1 << 60, 2, 0, 3}}, []float64{1 << 60, 2, 0, 3}},
	}
	for _, tc := range cases {
		tc.p.Dims = dims
		got, err := TensorFromProto(tc.p)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.DType.String() != tc.name || !got.Shape.Equal(ir.Shape{2, 2}) {
			t.Fatalf("%s: got %s", tc.name, got.Type())
		}
		for i, w := range tc.want {
			if g := got.Float(i); g != w {
				t.Errorf("%s[%d] = %v, want %v", tc.name, i, g, w)
			}
		}
		// The typed and raw encodings agree.
		raw, err := TensorFromProto(TensorToProto(got, ""))
		if err != nil || !raw.Equal(got) {
			t.Errorf("%s: raw re-encoding differs (%v)", tc.name, err)
		}
	}
	// Scalars and empty tensors.
	s, err := TensorFromProto(&pb.TensorProto{DataType: proto.Int32(7), Int64Data: []int64{42}})
	if err != nil || len(s.Shape) != 0 || s.Int(0) != 42 {
		t.Fatalf("scalar: %v %v", s, err)
	}
	e, err := TensorFromProto(&pb.TensorProto{DataType: proto.Int32(1), Dims: []int64{0, 5}})
	if err != nil || e.Len() != 0 || !e.Shape.Equal(ir.Shape{0, 5}) {
		t.Fatalf("empty: %v %v", e, err)
	}
	// Raw booleans other than 0/1 are normalised.
	b, err := TensorFromProto(&pb.TensorProto{DataType: proto.Int32(9), Dims: []int64{2}, RawData: []byte{0, 7}})
	if err != nil || b.Data[0] != 0 || b.Data[1] != 1 {
		t.Fatalf("bool raw: %v %v", b, err)
	}
}

func TestTensorFromProtoErrors(t *testing.T) {
	cases := []struct {
		name        string
		p           *pb.TensorProto
		want        string
		unsupported bool
	}{
		{"nil", nil, "tensor is missing", false},
		{"string", &pb.TensorProto{DataType: proto.Int32(8), Dims: []int64{1}, StringData: [][]byte{[]byte("a")}}, "string tensors are unsupported", true},
		{"complex", &pb.TensorProto{DataType: proto.Int32(14), Dims: []int64{1}, FloatData: []float32{1, 2}}, "COMPLEX64 tensors are unsupported", true},
		{"float8", &pb.TensorProto{DataType: proto.Int32(17), Dims: []int64{1}, RawData: []byte{1}}, "FLOAT8E4M3FN tensors are unsupported", true},
		{"undefined", &pb.TensorProto{Dims: []int64{1}, RawData: []byte{1}}, "UNDEFINED", false},
		{"unknown type", &pb.TensorProto{DataType: proto.Int32(99), Dims: []int64{1}}, "unknown ONNX element type 99", false},
		{"negative dim", &pb.TensorProto{DataType: proto.Int32(1), Dims: []int64{2, -1}}, "dimension 1 is negative", false},
		{"huge", &pb.TensorProto{DataType: proto.Int32(1), Dims: []int64{1 << 40, 1 << 40}}, "too large", false},
		{"overflow to zero", &pb.TensorProto{DataType: proto.Int32(7), Dims: []int64{1 << 32, 1 << 32}}, "too large", false},
		{"short raw", &pb.TensorProto{DataType: proto.Int32(1), Dims: []int64{2}, RawData: []byte{1, 2, 3}}, "needs 8 bytes of raw data, got 3", false},
		{"few typed", &pb.TensorProto{Name: proto.String("w"), DataType: proto.Int32(1), Dims: []int64{3}, FloatData: []float32{1}}, `tensor "w": float32[3] needs 3 elements`, false},
		{"wrong field", &pb.TensorProto{DataType: proto.Int32(1), Dims: []int64{1}, Int64Data: []int64{1}}, "needs 1 elements, the tensor holds 0", false},
		{"segment", &pb.TensorProto{DataType: proto.Int32(1), Dims: []int64{1}, Segment: &pb.TensorProto_Segment{}, FloatData: []float32{1}}, "segmented", false},
		{"external", &pb.TensorProto{DataType: proto.Int32(1), Dims: []int64{1}, DataLocation: pb.TensorProto_EXTERNAL.Enum()}, "external file", false},
	}
	for _, tc := range cases {
		_, err := TensorFromProto(tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
			continue
		}
		if errors.Is(err, ErrUnsupportedType) != tc.unsupported {
			t.Errorf("%s: unsupported = %v, want %v", tc.name, !tc.unsupported, tc.unsupported)
		}
	}
}

func TestTensorFiles(t *testing.T) {
	dir := t.TempDir()
	src := sample(ir.Int32)
	path := filepath.Join(dir, "input_0.pb")
	if err := WriteTensorFile(path, src, "x"); err != nil {
		t.Fatal(err)
	}
	got, name, err := ReadTensorFile(path)
	if err != nil || name != "x" || !got.Equal(src) {
		t.Fatalf("read back %v %q %v", got, name, err)
	}
	// External data next to the tensor file.
	if err := os.WriteFile(filepath.Join(dir, "w.bin"), append([]byte{9, 9, 9, 9}, f32(1.5, 2.5).Data...), 0o644); err != nil {
		t.Fatal(err)
	}
	ext := &pb.TensorProto{
		Name: proto.String("w"), DataType: proto.Int32(1), Dims: []int64{2},
		DataLocation: pb.TensorProto_EXTERNAL.Enum(),
		ExternalData: []*pb.StringStringEntryProto{
			{Key: proto.String("location"), Value: proto.String("w.bin")},
			{Key: proto.String("offset"), Value: proto.String("4")},
			{Key: proto.String("length"), Value: proto.String("8")},
		},
	}
	data, _ := proto.Marshal(ext)
	if err := os.WriteFile(filepath.Join(dir, "ext.pb"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	w, _, err := ReadTensorFile(filepath.Join(dir, "ext.pb"))
	if err != nil || !w.Equal(f32(1.5, 2.5)) {
		t.Fatalf("external: %v %v", w, err)
	}
	ext.ExternalData[0].Value = proto.String("../escape.bin")
	if _, err := ExternalTensorFromProto(ext, dir); err == nil || !strings.Contains(err.Error(), "inside the model's directory") {
		t.Fatalf("escaping location: %v", err)
	}
	// A symbolic link inside the directory that leads out of it is
	// refused; one that stays inside is followed.
	outside := filepath.Join(t.TempDir(), "secret.bin")
	if err := os.WriteFile(outside, f32(7, 8).Data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link_out.bin")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("w.bin", filepath.Join(dir, "link_in.bin")); err != nil {
		t.Fatal(err)
	}
	ext.ExternalData[0].Value = proto.String("link_out.bin")
	ext.ExternalData[1].Value = proto.String("0")
	if _, err := ExternalTensorFromProto(ext, dir); err == nil || !strings.Contains(err.Error(), "inside the model's directory") {
		t.Fatalf("symlink leaving the directory: %v", err)
	}
	ext.ExternalData[0].Value = proto.String("link_in.bin")
	ext.ExternalData[1].Value = proto.String("4")
	if w, err := ExternalTensorFromProto(ext, dir); err != nil || !w.Equal(f32(1.5, 2.5)) {
		t.Fatalf("symlink inside the directory: %v %v", w, err)
	}
	// offset + length overflowing int64 is an error, not a huge allocation.
	ext.ExternalData[1].Value = proto.String("4611686018427387904")
	ext.ExternalData[2].Value = proto.String("4611686018427387904")
	if _, err := ExternalTensorFromProto(ext, dir); err == nil || !strings.Contains(err.Error(), "exceeds the file size") {
		t.Fatalf("overflowing offset+length: %v", err)
	}
	ext.ExternalData[1].Value = proto.String("4")
	ext.ExternalData[2].Value = proto.String("9223372036854775807")
	if _, err := ExternalTensorFromProto(ext, dir); err == nil || !strings.Contains(err.Error(), "exceeds the file size") {
		t.Fatalf("huge length: %v", err)
	}
	ext.ExternalData[2].Value = proto.String("8")
	// A sequence value file (onnx-data.proto SequenceProto: name, elem_type).
	seq := []byte{0x0a, 0x03, 's', 'e', 'q', 0x10, 0x01}
	if err := os.WriteFile(filepath.Join(dir, "seq.pb"), seq, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadTensorFile(filepath.Join(dir, "seq.pb")); !errors.Is(err, ErrUnsupportedType) || !strings.Contains(err.Error(), "sequence") {
		t.Fatalf("sequence file: %v", err)
	}
	// Garbage is an error, not a panic.
	if err := os.WriteFile(filepath.Join(dir, "bad.pb"), []byte{0xff, 0xff, 0xff}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadTensorFile(filepath.Join(dir, "bad.pb")); err == nil {
		t.Fatal("garbage file read without error")
	}
}

func TestDTypeMapping(t *testing.T) {
	for _, dt := range ir.AllDTypes {
		code := DTypeToONNX(dt)
		back, err := DTypeFromONNX(code)
		if err != nil || back != dt {
			t.Errorf("%s -> %d -> %s (%v)", dt, code, back, err)
		}
	}
	if DTypeToONNX(ir.Invalid) != 0 {
		t.Error("invalid dtype maps to a code")
	}
}
