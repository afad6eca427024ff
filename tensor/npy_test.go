package tensor

import (
	"bytes"
	"encoding/binary"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// npyBytes builds a .npy file the way NumPy lays it out.
func npyBytes(major byte, header string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString("\x93NUMPY")
	b.WriteByte(major)
	b.WriteByte(0)
	if major == 1 {
		binary.Write(&b, binary.LittleEndian, uint16(len(header)))
	} else {
		binary.Write(&b, binary.LittleEndian, uint32(len(header)))
	}
	b.WriteString(header)
	b.Write(data)
	return b.Bytes()
}

func f32bytes(vals ...float32) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, vals)
	return b.Bytes()
}

func TestWriteNpyLayout(t *testing.T) {
	x := FromFloat32s(ir.Shape{2, 3}, []float32{0, 1, 2, 3, 4, 5})
	var b bytes.Buffer
	if err := WriteNpy(&b, x); err != nil {
		t.Fatal(err)
	}
	dict := "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
	header := dict + strings.Repeat(" ", 128-10-len(dict)-1) + "\n"
	want := npyBytes(1, header, f32bytes(0, 1, 2, 3, 4, 5))
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("got\n%q\nwant\n%q", b.Bytes(), want)
	}
	for _, c := range []struct {
		shape ir.Shape
		dt    ir.DType
		want  string
	}{
		{ir.Shape{}, ir.Float64, "'descr': '<f8', 'fortran_order': False, 'shape': (), }"},
		{ir.Shape{7}, ir.Uint8, "'descr': '|u1', 'fortran_order': False, 'shape': (7,), }"},
		{ir.Shape{1, 0, 2}, ir.Bool, "'descr': '|b1', 'fortran_order': False, 'shape': (1, 0, 2), }"},
	} {
		var b bytes.Buffer
		if err := WriteNpy(&b, New(c.dt, c.shape)); err != nil {
			t.Fatal(err)
		}
		hl := int(binary.LittleEndian.Uint16(b.Bytes()[8:10]))
		if (10+hl)%64 != 0 || !strings.Contains(b.String(), c.want) {
			t.Errorf("%s%v: header %q (data at %d)", c.dt, c.shape, b.Bytes()[:10+hl], 10+hl)
		}
	}
}

func TestNpyRoundTripAllDTypes(t *testing.T) {
	dir := t.TempDir()
	for _, dt := range ir.AllDTypes {
		src := New(dt, ir.Shape{2, 3})
		for i := 0; i < src.Len(); i++ {
			src.SetFloat(i, float64(i)*1.5-2)
		}
		path := filepath.Join(dir, dt.String()+".npy")
		err := WriteNpyFile(path, src)
		if dt == ir.BFloat16 {
			if err == nil || !strings.Contains(err.Error(), "no bfloat16") {
				t.Errorf("bfloat16: err = %v, want an error", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		got, err := ReadNpyFile(path)
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		if !got.Equal(src) {
			t.Errorf("%s: read %v, wrote %v", dt, got.Data, src.Data)
		}
	}
}

func TestReadNpyVariants(t *testing.T) {
	le := f32bytes(1.5, -2)
	be := []byte{0x3f, 0xc0, 0, 0, 0xc0, 0, 0, 0} // 1.5, -2 big-endian
	cases := []struct {
		name string
		file []byte
	}{
		{"v1", npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }   \n", le)},
		{"v2", npyBytes(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", le)},
		{"v3 key order and quotes", npyBytes(3, `{"shape": (2,), "fortran_order": False, "descr": "<f4"}`+"\n", le)},
		{"big-endian", npyBytes(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n", be)},
		{"native", npyBytes(1, "{'descr': '=f4', 'fortran_order': False, 'shape': (2L,), }\n", le)},
	}
	for _, c := range cases {
		got, err := ReadNpy(bytes.NewReader(c.file))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got.DType != ir.Float32 || !got.Shape.Equal(ir.Shape{2}) || got.Float32s()[0] != 1.5 || got.Float32s()[1] != -2 {
			t.Errorf("%s: got %s %v", c.name, got.Type(), got.Float32s())
		}
	}
	// Big-endian integers are converted too.
	be64 := npyBytes(1, "{'descr': '>i8', 'fortran_order': False, 'shape': (), }\n", []byte{0, 0, 0, 0, 0, 0, 1, 2})
	got, err := ReadNpy(bytes.NewReader(be64))
	if err != nil || got.Int64s()[0] != 258 {
		t.Errorf(">i8: %v %v", got, err)
	}
}

func TestReadNpyErrors(t *testing.T) {
	hdr := func(descr, fortran, shape string) string {
		return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }\n"
	}
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"magic", []byte("PK\x03\x04 not npy at all"), "bad magic"},
		{"short", []byte("\x93NU"), "preamble"},
		{"version", npyBytes(1, "", nil)[:6:6], "preamble"},
		{"version 4", append([]byte("\x93NUMPY\x04\x00"), 0, 0), "version 4.0"},
		{"fortran", npyBytes(1, hdr("<f4", "True", "(2, 2)"), f32bytes(1, 2, 3, 4)), "Fortran"},
		{"complex", npyBytes(1, hdr("<c8", "False", "(1,)"), make([]byte, 8)), `unsupported dtype "<c8"`},
		{"object", npyBytes(1, hdr("|O", "False", "(1,)"), make([]byte, 8)), `unsupported dtype "|O"`},
		{"truncated data", npyBytes(1, hdr("<f4", "False", "(3,)"), f32bytes(1)), "reading 12 bytes"},
		{"missing key", npyBytes(1, "{'descr': '<f4', 'shape': (1,), }\n", f32bytes(1)), `missing key "fortran_order"`},
		{"bad dim", npyBytes(1, hdr("<f4", "False", "(-1,)"), nil), "bad dimension"},
		{"not a dict", npyBytes(1, "[1, 2]\n", nil), "not a dict"},
	}
	for _, c := range cases {
		_, err := ReadNpy(bytes.NewReader(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
}

func TestNpyFloat16Values(t *testing.T) {
	src := New(ir.Float16, ir.Shape{3})
	for i, v := range []float64{0.5, -65504, math.Inf(1)} {
		src.SetFloat(i, v)
	}
	var b bytes.Buffer
	if err := WriteNpy(&b, src); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "'<f2'") {
		t.Errorf("float16 descr missing in %q", b.String()[:64])
	}
	got, err := ReadNpy(&b)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{0.5, -65504, math.Inf(1)} {
		if got.Float(i) != want {
			t.Errorf("element %d = %v, want %v", i, got.Float(i), want)
		}
	}
}

// TestNpyHugeHeader: a short file whose header claims an enormous or
// overflowing shape is an error, without allocating what it claims.
func TestNpyHugeHeader(t *testing.T) {
	for _, shape := range []string{"(1099511627776,)", "(4294967296, 4294967296, 4294967296)", "(1000000,)"} {
		h := "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }"
		h += strings.Repeat(" ", 117-len(h)) + "\n"
		file := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), 0)
		file = append(append(file, h...), 1, 2, 3, 4)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := ReadNpy(bytes.NewReader(file))
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("%s: read without error", shape)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
			t.Errorf("%s: allocated %d bytes for a %d-byte file", shape, grew, len(file))
		}
	}
}
