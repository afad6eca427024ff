package tensor

import (
	"archive/zip"
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxNpzArrays bounds the arrays ReadNpzFile accepts from one archive.
const MaxNpzArrays = 1 << 16

// Named is a tensor with a name, one array of a .npz archive.
type Named struct {
	Name   string
	Tensor *Tensor
}

// ReadNpzFile reads a NumPy .npz archive (numpy.savez, compressed or not):
// one array per member NAME.npy, in the archive's order. Each array is
// read as ReadNpy reads a .npy file, so a member's declared size is
// checked against the memory budget before it is read, and a compressed
// member cannot expand beyond it. Members that are not .npy files, and
// two arrays of one name, are errors.
func ReadNpzFile(path string) ([]Named, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return nil, fmt.Errorf("%s: not a .npz archive: %w", path, err)
	}
	defer zr.Close()
	if len(zr.File) > MaxNpzArrays {
		return nil, fmt.Errorf("%s: %d members, more than the %d arrays kiln reads from one archive", path, len(zr.File), MaxNpzArrays)
	}
	var out []Named
	seen := map[string]bool{}
	for _, f := range zr.File {
		name, ok := strings.CutSuffix(f.Name, ".npy")
		if !ok || name == "" {
			return nil, fmt.Errorf("%s: member %q is not a .npy array", path, f.Name)
		}
		if seen[name] {
			return nil, fmt.Errorf("%s: two arrays named %q", path, name)
		}
		seen[name] = true
		t, err := readNpzMember(f)
		if err != nil {
			return nil, fmt.Errorf("%s: array %q: %w", path, name, err)
		}
		out = append(out, Named{Name: name, Tensor: t})
	}
	return out, nil
}

func readNpzMember(f *zip.File) (*Tensor, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	br := bufio.NewReader(rc)
	t, err := ReadNpy(br)
	if err != nil {
		return nil, err
	}
	// Nothing may follow the array (a member holding more is not one
	// NumPy wrote).
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("npy: data after the array")
	}
	return t, nil
}

// WriteNpzFile writes the arrays to path as an uncompressed .npz archive
// (as numpy.savez does), one member NAME.npy per array, in order. Names
// must be non-empty and distinct.
func WriteNpzFile(path string, arrays []Named) (err error) {
	seen := map[string]bool{}
	for _, a := range arrays {
		if a.Name == "" || seen[a.Name] {
			return fmt.Errorf("npz: array names must be non-empty and distinct (%q)", a.Name)
		}
		seen[a.Name] = true
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	zw := zip.NewWriter(f)
	for _, a := range arrays {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: a.Name + ".npy", Method: zip.Store})
		if err != nil {
			return err
		}
		if err := WriteNpy(w, a.Tensor); err != nil {
			return fmt.Errorf("npz: array %q: %w", a.Name, err)
		}
	}
	return zw.Close()
}
