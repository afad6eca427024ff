package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/frontend/onnx/pb"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/passconfig"
	"github.com/kiln-dev/kiln/tensor"
)

// ReadTensor reads a tensor file, choosing the format by extension: .npy
// (NumPy), .pb (ONNX TensorProto) or .npz (NumPy's archive, which must
// then hold one array). It returns the tensor and the name stored in the
// file ("" for .npy and unnamed TensorProtos).
func ReadTensor(path string) (*tensor.Tensor, string, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npy":
		t, err := tensor.ReadNpyFile(path)
		return t, "", err
	case ".pb":
		return onnx.ReadTensorFile(path)
	case ".npz":
		return readNpzArray(path, "")
	}
	return nil, "", fmt.Errorf("%s: unknown tensor file type (want .npy, .pb or .npz)", path)
}

// readNpzArray reads the one array of a .npz archive or, when it holds
// several and name is not empty, the one named name.
func readNpzArray(path, name string) (*tensor.Tensor, string, error) {
	arrays, err := tensor.ReadNpzFile(path)
	if err != nil {
		return nil, "", err
	}
	if len(arrays) == 1 {
		return arrays[0].Tensor, arrays[0].Name, nil
	}
	if name == "" {
		return nil, "", fmt.Errorf("%s holds %d arrays, not one (give it as a bare --input FILE.npz to bind each array to the input of its name)", path, len(arrays))
	}
	for _, a := range arrays {
		if a.Name == name {
			return a.Tensor, a.Name, nil
		}
	}
	return nil, "", fmt.Errorf("%s holds %d arrays and none named %q", path, len(arrays), name)
}

// isNpz reports whether path names a .npz archive.
func isNpz(path string) bool { return strings.EqualFold(filepath.Ext(path), ".npz") }

// WriteTensor writes t to dir/NAME.EXT with format "npy" or "pb"; the
// file name is name with characters unsafe in file names replaced by '_'.
// It returns the path written.
func WriteTensor(dir, name string, t *tensor.Tensor, format string) (string, error) {
	return writeTensorAs(dir, safeFileName(name), name, t, format)
}

// writeTensorAs writes t to dir/base.EXT, naming it name in a .pb file.
func writeTensorAs(dir, base, name string, t *tensor.Tensor, format string) (string, error) {
	switch format {
	case "npy":
		p := filepath.Join(dir, base+".npy")
		return p, tensor.WriteNpyFile(p, t)
	case "pb":
		p := filepath.Join(dir, base+".pb")
		return p, onnx.WriteTensorFile(p, t, name)
	}
	return "", fmt.Errorf("unknown output format %q (want npy or pb)", format)
}

// outputFileNames are the file names (without extension) of a model's
// outputs: safeFileName of each name, made unique ignoring case (so that
// "a/b" and "a_b", or "Y" and "y" on a case-insensitive file system, are
// written to two files) by a suffix _2, _3, ... in the outputs' order.
func outputFileNames(names []string) []string {
	taken := map[string]bool{}
	out := make([]string, len(names))
	for i, n := range names {
		base := safeFileName(n)
		f := base
		for k := 2; taken[strings.ToLower(f)]; k++ {
			f = fmt.Sprintf("%s_%d", base, k)
		}
		taken[strings.ToLower(f)] = true
		out[i] = f
	}
	return out
}

func safeFileName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 || strings.Trim(b.String(), ".") == "" {
		return "output"
	}
	return b.String()
}

// DeclaredInput is a graph input (not an initializer) as the model file
// declares it, before import: its name, element type (Invalid when not a
// tensor of a known type) and dims (-1 for a symbolic or unknown
// dimension; nil when the rank is unknown).
type DeclaredInput struct {
	Name  string
	DType ir.DType
	Dims  []int64
}

// String prints e.g. "x: float32[N, 3]".
func (d DeclaredInput) String() string {
	if d.Dims == nil {
		return fmt.Sprintf("%s: %s[?]", d.Name, d.DType)
	}
	parts := make([]string, len(d.Dims))
	for i, v := range d.Dims {
		if v < 0 {
			parts[i] = "?"
		} else {
			parts[i] = fmt.Sprint(v)
		}
	}
	return fmt.Sprintf("%s: %s[%s]", d.Name, d.DType, strings.Join(parts, ", "))
}

// Check reports whether t fits the declaration: same dtype, same rank and
// the same size in every static dimension.
func (d DeclaredInput) Check(t *tensor.Tensor) error {
	if d.DType != ir.Invalid && t.DType != d.DType {
		return fmt.Errorf("input %q: got %s, the model wants %s", d.Name, t.Type(), d)
	}
	if d.Dims == nil {
		return nil
	}
	if len(d.Dims) != len(t.Shape) {
		return fmt.Errorf("input %q: got %s (rank %d), the model wants %s (rank %d)", d.Name, t.Type(), len(t.Shape), d, len(d.Dims))
	}
	for i, v := range d.Dims {
		if v >= 0 && v != t.Shape[i] {
			return fmt.Errorf("input %q: got %s, the model wants %s (dimension %d differs)", d.Name, t.Type(), d, i)
		}
	}
	return nil
}

// ModelInputs reads the non-initializer graph inputs of an ONNX model file
// in declaration order, without importing the model. Callers use it to
// match input files to inputs before choosing import options.
func ModelInputs(path string) ([]DeclaredInput, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var mp pb.ModelProto
	if err := proto.Unmarshal(data, &mp); err != nil {
		return nil, fmt.Errorf("%s: not an ONNX model: %v", path, err)
	}
	if err := onnx.CheckStructure(&mp); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	g := mp.GetGraph()
	inits := map[string]bool{}
	for _, t := range g.GetInitializer() {
		inits[t.GetName()] = true
	}
	var out []DeclaredInput
	for _, vi := range g.GetInput() {
		if inits[vi.GetName()] {
			continue
		}
		d := DeclaredInput{Name: vi.GetName()}
		if tt := vi.GetType().GetTensorType(); tt != nil {
			d.DType, _ = onnx.DTypeFromONNX(tt.GetElemType())
			if sp := tt.GetShape(); sp != nil {
				d.Dims = make([]int64, len(sp.GetDim()))
				for i, dim := range sp.GetDim() {
					if v, ok := dim.GetValue().(*pb.TensorShapeProto_Dimension_DimValue); ok {
						d.Dims[i] = v.DimValue
					} else {
						d.Dims[i] = -1
					}
				}
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// loadWithInputs imports an ONNX model with the given input values: their
// shapes fix the input shapes, and every one may be frozen when an
// operator needs its value at compile time. shapes adds shapes for inputs
// without values. pc (nil: the defaults) gives the import options among
// the pass configuration (import.fold_qdq, on by default).
func loadWithInputs(path string, vals map[string]*tensor.Tensor, shapes map[string]ir.Shape, pc *passconfig.Config) (*onnx.Model, error) {
	opts := onnx.Options{KeepQDQ: pc != nil && !pc.Bool(passconfig.FoldQDQ)}
	if len(vals)+len(shapes) > 0 {
		opts.InputShapes = map[string]ir.Shape{}
		opts.Freeze = map[string]*tensor.Tensor{}
	}
	for n, s := range shapes {
		opts.InputShapes[n] = s
	}
	for n, t := range vals {
		opts.InputShapes[n] = t.Shape
		opts.Freeze[n] = t
	}
	return onnx.LoadFile(path, opts)
}

// writeFileAtomic writes path through write: into a temporary file beside
// it, renamed over path only when write and the close succeed, so a failed
// write leaves no partial file.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err := write(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
