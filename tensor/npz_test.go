package tensor

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// TestNpzRoundTrip writes arrays of several dtypes to a .npz and reads
// them back, in order.
func TestNpzRoundTrip(t *testing.T) {
	a := FromFloat32s(ir.Shape{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	b := FromInt64s(ir.Shape{4}, []int64{-1, 0, 1, 1 << 40})
	c := Scalar(ir.Uint8, 7)
	p := filepath.Join(t.TempDir(), "x.npz")
	in := []Named{{"input", a}, {"ids/0", b}, {"s", c}}
	if err := WriteNpzFile(p, in); err != nil {
		t.Fatal(err)
	}
	got, err := ReadNpzFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in) {
		t.Fatalf("%d arrays, want %d", len(got), len(in))
	}
	for i := range in {
		if got[i].Name != in[i].Name || !got[i].Tensor.Equal(in[i].Tensor) {
			t.Errorf("array %d: %q %v, want %q %v", i, got[i].Name, got[i].Tensor.Shape, in[i].Name, in[i].Tensor.Shape)
		}
	}
	if err := WriteNpzFile(p, []Named{{"a", a}, {"a", b}}); err == nil {
		t.Error("two arrays of one name were written")
	}
}

// writeZip writes members (name → content) with the given method.
func writeZip(t *testing.T, method uint16, members ...[2]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range members {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: m[0], Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(m[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "m.npz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func npzMember(t *testing.T, x *Tensor) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteNpy(&b, x); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestNpzRead reads what numpy.savez_compressed writes (deflated
// members) and refuses archives that are not arrays: another member, a
// duplicate name, data after an array, a size beyond the memory budget,
// and a file that is no zip at all.
func TestNpzRead(t *testing.T) {
	x := FromFloat32s(ir.Shape{3}, []float32{1, 2, 3})
	got, err := ReadNpzFile(writeZip(t, zip.Deflate, [2]string{"x.npy", npzMember(t, x)}))
	if err != nil || len(got) != 1 || got[0].Name != "x" || !got[0].Tensor.Equal(x) {
		t.Fatalf("a deflated member: %v %v", got, err)
	}
	// A header claiming 2^40 floats in a tiny member.
	huge := strings.Replace(npzMember(t, x), "(3,)", "(1099511627776,)", 1)
	for _, c := range []struct {
		path string
		want string
	}{
		{writeZip(t, zip.Store, [2]string{"notes.txt", "hi"}), `member "notes.txt" is not a .npy array`},
		{writeZip(t, zip.Store, [2]string{"x.npy", npzMember(t, x)}, [2]string{"x.npy", npzMember(t, x)}), `two arrays named "x"`},
		{writeZip(t, zip.Store, [2]string{"x.npy", npzMember(t, x) + "junk"}), "data after the array"},
		{writeZip(t, zip.Deflate, [2]string{"x.npy", huge}), "more than the memory budget"},
		{filepath.Join("testdata", "nope.npz"), "not a .npz archive"},
	} {
		if _, err := ReadNpzFile(c.path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.path, err, c.want)
		}
	}
}
