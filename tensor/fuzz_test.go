package tensor

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// FuzzReadNpy checks the .npy reader: no panic, no allocation beyond the
// memory budget (the reader checks sizes before allocating), an accepted
// array holds exactly its shape's bytes, and writing it back reads back
// equal.
func FuzzReadNpy(f *testing.F) {
	for _, t := range []*Tensor{
		FromFloat32s(ir.Shape{2, 3}, []float32{1, 2, 3, 4, 5, 6}),
		FromInt64s(ir.Shape{}, []int64{7}),
		New(ir.Bool, ir.Shape{4}),
		New(ir.Float16, ir.Shape{0, 2}),
		New(ir.Uint8, ir.Shape{3, 1, 2}),
	} {
		var b bytes.Buffer
		if err := WriteNpy(&b, t); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Add(npyBytes(1, "{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", make([]byte, 16)))
	f.Add(npyBytes(2, "{'descr': '<i4', 'fortran_order': False, 'shape': (1099511627776,), }", nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ReadNpy(bytes.NewReader(data))
		if err != nil {
			return
		}
		if int64(len(v.Data)) != v.Shape.NumElements()*int64(v.DType.Size()) {
			t.Fatalf("%s%v holds %d bytes", v.DType, v.Shape, len(v.Data))
		}
		var b bytes.Buffer
		if err := WriteNpy(&b, v); err != nil {
			t.Fatal(err)
		}
		back, err := ReadNpy(&b)
		if err != nil || !back.Equal(v) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzReadNpzFile checks that ReadNpzFile never panics, and that what it
// accepts writes back and reads again the same.
func FuzzReadNpzFile(f *testing.F) {
	dir := f.TempDir()
	seed := filepath.Join(dir, "seed.npz")
	if err := WriteNpzFile(seed, []Named{{"x", FromFloat32s(ir.Shape{2}, []float32{1, 2})}, {"y", New(ir.Int32, ir.Shape{})}}); err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile(seed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		// One directory per worker process (f.TempDir), reused: a fuzz
		// call must be cheap.
		p := filepath.Join(dir, "f.npz")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		arrays, err := ReadNpzFile(p)
		if err != nil {
			return
		}
		q := filepath.Join(dir, "back.npz")
		if err := WriteNpzFile(q, arrays); err != nil {
			t.Fatalf("write back: %v", err)
		}
		back, err := ReadNpzFile(q)
		if err != nil || len(back) != len(arrays) {
			t.Fatalf("read back: %d arrays, %v", len(back), err)
		}
		for i := range back {
			if back[i].Name != arrays[i].Name || !back[i].Tensor.Equal(arrays[i].Tensor) {
				t.Fatalf("array %d changed in the round trip", i)
			}
		}
	})
}
