package onnx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// ErrUnsupportedType marks models and tensors that use value types kiln
// does not handle at all: strings, sequences, optionals, maps, sparse
// tensors, complex and 8-/4-bit float types, and training-only operators.
// Errors wrapping it describe what was found; callers (the test-onnx
// command) may treat them as "skipped" rather than "failed".
var ErrUnsupportedType = errors.New("outside kiln's scope")

// maxTensorBytes bounds the size of one tensor decoded from a file, so that
// a corrupt shape cannot make the importer allocate absurd amounts.
const maxTensorBytes = 1 << 36

// onnxDTypes maps ONNX TensorProto.DataType codes to kiln dtypes.
var onnxDTypes = map[int32]ir.DType{
	int32(pb.TensorProto_FLOAT):    ir.Float32,
	int32(pb.TensorProto_UINT8):    ir.Uint8,
	int32(pb.TensorProto_INT8):     ir.Int8,
	int32(pb.TensorProto_UINT16):   ir.Uint16,
	int32(pb.TensorProto_INT16):    ir.Int16,
	int32(pb.TensorProto_INT32):    ir.Int32,
	int32(pb.TensorProto_INT64):    ir.Int64,
	int32(pb.TensorProto_BOOL):     ir.Bool,
	int32(pb.TensorProto_FLOAT16):  ir.Float16,
	int32(pb.TensorProto_DOUBLE):   ir.Float64,
	int32(pb.TensorProto_UINT32):   ir.Uint32,
	int32(pb.TensorProto_UINT64):   ir.Uint64,
	int32(pb.TensorProto_BFLOAT16): ir.BFloat16,
}

// DTypeFromONNX maps an ONNX element type code (TensorProto.DataType, as
// used by elem_type fields and Cast's "to" attribute) to a kiln dtype.
// Strings, complex numbers and 8-/4-bit types give an error wrapping
// ErrUnsupportedType; unknown codes give a plain error.
func DTypeFromONNX(code int32) (ir.DType, error) {
	if dt, ok := onnxDTypes[code]; ok {
		return dt, nil
	}
	switch code {
	case int32(pb.TensorProto_UNDEFINED):
		return ir.Invalid, fmt.Errorf("element type is UNDEFINED")
	case int32(pb.TensorProto_STRING):
		return ir.Invalid, fmt.Errorf("%w: string tensors are unsupported", ErrUnsupportedType)
	}
	if name, ok := pb.TensorProto_DataType_name[code]; ok {
		return ir.Invalid, fmt.Errorf("%w: %s tensors are unsupported", ErrUnsupportedType, name)
	}
	return ir.Invalid, fmt.Errorf("unknown ONNX element type %d", code)
}

// DTypeToONNX maps a kiln dtype to its ONNX element type code (0 for
// ir.Invalid or unknown values).
func DTypeToONNX(dt ir.DType) int32 {
	for code, d := range onnxDTypes {
		if d == dt {
			return code
		}
	}
	return int32(pb.TensorProto_UNDEFINED)
}

// checkedShape validates ONNX dims and returns them as a shape together with
// the element count, refusing negative dims and sizes that overflow or
// exceed maxTensorBytes.
func checkedShape(dims []int64, elemSize int) (ir.Shape, int64, error) {
	shape := make(ir.Shape, len(dims))
	n := int64(1)
	zero := false
	for i, d := range dims {
		if d < 0 {
			return nil, 0, fmt.Errorf("dimension %d is negative (%d)", i, d)
		}
		shape[i] = d
		if d == 0 {
			zero = true
		}
	}
	if zero {
		return shape, 0, nil
	}
	limit := int64(maxTensorBytes / elemSize)
	for _, d := range dims {
		if d > limit || n > limit/d {
			return nil, 0, fmt.Errorf("shape %v is too large", shape)
		}
		n *= d
	}
	return shape, n, nil
}

// TensorFromProto decodes an ONNX TensorProto into a host tensor. It reads
// raw_data or whichever typed field the element type uses. Tensors whose
// data is stored externally need ExternalTensorFromProto instead.
func TensorFromProto(p *pb.TensorProto) (*tensor.Tensor, error) {
	return tensorFromProto(p, "")
}

// ExternalTensorFromProto is TensorFromProto that also resolves external
// data (data_location EXTERNAL), whose "location" is relative to baseDir
// (the directory of the model file).
func ExternalTensorFromProto(p *pb.TensorProto, baseDir string) (*tensor.Tensor, error) {
	return tensorFromProto(p, baseDir)
}

func tensorFromProto(p *pb.TensorProto, baseDir string) (*tensor.Tensor, error) {
	return convertTensorProto(p, baseDir, false)
}

// initializerTensor is tensorFromProto for an initializer of a model the
// importer decoded itself: the tensor adopts the decoded raw data
// instead of copying it (for resnet18, 45 MB less to copy and fault in).
func initializerTensor(p *pb.TensorProto, baseDir string) (*tensor.Tensor, error) {
	return convertTensorProto(p, baseDir, true)
}

func convertTensorProto(p *pb.TensorProto, baseDir string, adopt bool) (t *tensor.Tensor, err error) {
	if p == nil {
		return nil, fmt.Errorf("tensor is missing")
	}
	defer func() {
		if err != nil && p.GetName() != "" {
			err = fmt.Errorf("tensor %q: %w", p.GetName(), err)
		}
	}()
	dt, err := DTypeFromONNX(p.GetDataType())
	if err != nil {
		return nil, err
	}
	if p.Segment != nil {
		return nil, fmt.Errorf("segmented tensors are unsupported")
	}
	shape, n, err := checkedShape(p.GetDims(), dt.Size())
	if err != nil {
		return nil, err
	}
	if p.GetDataLocation() == pb.TensorProto_EXTERNAL {
		raw, err := readExternal(p, baseDir)
		if err != nil {
			return nil, err
		}
		return rawTensor(dt, shape, n, raw, true)
	}
	if p.RawData != nil {
		return rawTensor(dt, shape, n, p.RawData, adopt)
	}
	var have int
	switch dt {
	case ir.Float32:
		have = len(p.FloatData)
	case ir.Float64:
		have = len(p.DoubleData)
	case ir.Int64:
		have = len(p.Int64Data)
	case ir.Uint32, ir.Uint64:
		have = len(p.Uint64Data)
	default:
		have = len(p.Int32Data)
	}
	if int64(have) != n {
		return nil, fmt.Errorf("%s%v needs %d elements, the tensor holds %d in the field for its type", dt, shape, n, have)
	}
	t = tensor.New(dt, shape)
	switch dt {
	case ir.Float32:
		for i, v := range p.FloatData {
			binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(v))
		}
	case ir.Float64:
		for i, v := range p.DoubleData {
			binary.LittleEndian.PutUint64(t.Data[8*i:], math.Float64bits(v))
		}
	case ir.Int64:
		for i, v := range p.Int64Data {
			binary.LittleEndian.PutUint64(t.Data[8*i:], uint64(v))
		}
	case ir.Uint32, ir.Uint64:
		for i, v := range p.Uint64Data {
			if dt == ir.Uint32 {
				binary.LittleEndian.PutUint32(t.Data[4*i:], uint32(v))
			} else {
				binary.LittleEndian.PutUint64(t.Data[8*i:], v)
			}
		}
	case ir.Float16, ir.BFloat16, ir.Int16, ir.Uint16:
		for i, v := range p.Int32Data {
			binary.LittleEndian.PutUint16(t.Data[2*i:], uint16(v))
		}
	case ir.Int8, ir.Uint8:
		for i, v := range p.Int32Data {
			t.Data[i] = byte(v)
		}
	case ir.Bool:
		for i, v := range p.Int32Data {
			if v != 0 {
				t.Data[i] = 1
			}
		}
	case ir.Int32:
		for i, v := range p.Int32Data {
			binary.LittleEndian.PutUint32(t.Data[4*i:], uint32(v))
		}
	default:
		return nil, fmt.Errorf("%w: %s tensors are unsupported", ErrUnsupportedType, dt)
	}
	return t, nil
}

// rawTensor builds a tensor from little-endian bytes, checking the length
// and normalising booleans to 0/1.
func rawTensor(dt ir.DType, shape ir.Shape, n int64, raw []byte, adopt bool) (*tensor.Tensor, error) {
	if want := n * int64(dt.Size()); int64(len(raw)) != want {
		return nil, fmt.Errorf("%s%v needs %d bytes of raw data, got %d", dt, shape, want, len(raw))
	}
	fromBytes := tensor.FromBytes
	if adopt {
		fromBytes = tensor.Adopt
	}
	t, err := fromBytes(dt, shape, raw)
	if err != nil {
		return nil, err
	}
	if dt == ir.Bool {
		for i, b := range t.Data {
			if b != 0 {
				t.Data[i] = 1
			}
		}
	}
	return t, nil
}

// readExternal reads the bytes of an externally stored tensor.
func readExternal(p *pb.TensorProto, baseDir string) ([]byte, error) {
	if baseDir == "" {
		return nil, fmt.Errorf("tensor data is stored in an external file, which needs the model's directory (load the model with LoadFile)")
	}
	var loc string
	offset, length := int64(0), int64(-1)
	for _, kv := range p.ExternalData {
		var err error
		switch kv.GetKey() {
		case "location":
			loc = kv.GetValue()
		case "offset":
			offset, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		case "length":
			length, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		}
		if err != nil {
			return nil, fmt.Errorf("external data %s: %v", kv.GetKey(), err)
		}
	}
	if loc == "" {
		return nil, fmt.Errorf("external data has no location")
	}
	if filepath.IsAbs(loc) || !filepath.IsLocal(loc) {
		return nil, fmt.Errorf("external data location %q must be a relative path inside the model's directory", loc)
	}
	if offset < 0 {
		return nil, fmt.Errorf("external data offset %d is negative", offset)
	}
	// OpenInRoot follows symbolic links only while they stay inside the
	// model's directory.
	f, err := os.OpenInRoot(baseDir, loc)
	if err != nil {
		return nil, fmt.Errorf("external data %q: %v (it must be a file inside the model's directory)", loc, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("external data: %v", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("external data %q is not a regular file", loc)
	}
	if offset > st.Size() {
		return nil, fmt.Errorf("external data %q: offset %d exceeds the file size %d", loc, offset, st.Size())
	}
	if length < 0 {
		length = st.Size() - offset
	}
	if length > st.Size()-offset {
		return nil, fmt.Errorf("external data %q: offset %d + length %d exceeds the file size %d", loc, offset, length, st.Size())
	}
	buf := make([]byte, length)
	if _, err := f.ReadAt(buf, offset); err != nil {
		return nil, fmt.Errorf("external data %q: %v", loc, err)
	}
	return buf, nil
}

// TensorToProto encodes a host tensor as an ONNX TensorProto with raw_data.
func TensorToProto(t *tensor.Tensor, name string) *pb.TensorProto {
	p := &pb.TensorProto{
		Dims:     append([]int64{}, t.Shape...),
		DataType: proto.Int32(DTypeToONNX(t.DType)),
		RawData:  append([]byte{}, t.Data...),
	}
	if name != "" {
		p.Name = proto.String(name)
	}
	return p
}

// ReadTensorFile reads a serialized TensorProto (.pb file, as in the ONNX
// backend tests) and returns the tensor and its name ("" when unnamed).
func ReadTensorFile(path string) (*tensor.Tensor, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	var p pb.TensorProto
	if err := proto.Unmarshal(data, &p); err != nil {
		return nil, "", fmt.Errorf("%s: not an ONNX tensor file: %v", path, err)
	}
	t, err := tensorFromProto(&p, filepath.Dir(path))
	if err != nil {
		if looksLikeContainer(data) {
			return nil, "", fmt.Errorf("%s: %w: the file holds a sequence, map or optional value, not a tensor", path, ErrUnsupportedType)
		}
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return t, p.GetName(), nil
}

// WriteTensorFile writes t as a serialized TensorProto named name.
func WriteTensorFile(path string, t *tensor.Tensor, name string) error {
	data, err := proto.Marshal(TensorToProto(t, name))
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// looksLikeContainer reports whether bytes that failed to decode as a
// TensorProto have the layout of ONNX's SequenceProto, MapProto or
// OptionalProto (onnx-data.proto): a printable name in field 1, a small
// type code in field 2, and otherwise only fields 3 to 7.
func looksLikeContainer(data []byte) bool {
	sawType := false
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return false
		}
		data = data[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(data)
			if m < 0 || !utf8.Valid(v) {
				return false
			}
			for _, r := range string(v) {
				if !unicode.IsPrint(r) {
					return false
				}
			}
		case num == 2 && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(data)
			if m < 0 || v > 5 {
				return false
			}
			sawType = true
		case num >= 3 && num <= 7:
		default:
			return false
		}
		m := protowire.ConsumeFieldValue(num, typ, data)
		if m < 0 {
			return false
		}
		data = data[m:]
	}
	return sawType
}
