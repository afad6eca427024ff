package tensor

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/ir"
)

// npyMagic starts every .npy file.
const npyMagic = "\x93NUMPY"

// npyKinds maps a NumPy type code without its byte-order character
// ("f4", "b1", ...) to a dtype.
var npyKinds = map[string]ir.DType{
	"f2": ir.Float16, "f4": ir.Float32, "f8": ir.Float64,
	"i1": ir.Int8, "i2": ir.Int16, "i4": ir.Int32, "i8": ir.Int64,
	"u1": ir.Uint8, "u2": ir.Uint16, "u4": ir.Uint32, "u8": ir.Uint64,
	"b1": ir.Bool,
}

// npyDescr returns the NumPy descr of a dtype ("<f4", "|u1", ...).
func npyDescr(dt ir.DType) (string, error) {
	for code, d := range npyKinds {
		if d == dt {
			if dt.Size() == 1 {
				return "|" + code, nil
			}
			return "<" + code, nil
		}
	}
	return "", fmt.Errorf("npy: NumPy has no %s type", dt)
}

// ReadNpyFile reads a NumPy .npy file.
func ReadNpyFile(path string) (*Tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := ReadNpy(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ReadNpy reads an array in NumPy's .npy format (versions 1.0, 2.0 and
// 3.0). Little-endian, big-endian and single-byte types of float, int,
// uint and bool are read (big-endian data is converted); Fortran-ordered
// arrays, structured and object dtypes are errors.
func ReadNpy(r io.Reader) (*Tensor, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, fmt.Errorf("npy: reading the preamble: %v", err)
	}
	if string(pre[:6]) != npyMagic {
		return nil, fmt.Errorf("npy: not a .npy file (bad magic)")
	}
	major := pre[6]
	var hlen int
	switch major {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("npy: reading the header length: %v", err)
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("npy: reading the header length: %v", err)
		}
		n := binary.LittleEndian.Uint32(b[:])
		if n > 1<<24 {
			return nil, fmt.Errorf("npy: header length %d is implausible", n)
		}
		hlen = int(n)
	default:
		return nil, fmt.Errorf("npy: unsupported format version %d.%d", major, pre[7])
	}
	header := make([]byte, hlen)
	if _, err := io.ReadFull(r, header); err != nil {
		return nil, fmt.Errorf("npy: reading the header: %v", err)
	}
	descr, fortran, shape, err := parseNpyHeader(string(header))
	if err != nil {
		return nil, fmt.Errorf("npy: header %q: %v", strings.TrimSpace(string(header)), err)
	}
	if fortran {
		return nil, fmt.Errorf("npy: Fortran-ordered arrays are not supported (save with np.ascontiguousarray)")
	}
	if len(descr) != 3 {
		return nil, fmt.Errorf("npy: unsupported dtype %q", descr)
	}
	order, code := descr[0], descr[1:]
	dt, ok := npyKinds[code]
	if !ok {
		return nil, fmt.Errorf("npy: unsupported dtype %q", descr)
	}
	swap := false
	switch order {
	case '<', '|', '=': // '=' is native, which is little-endian on every platform kiln runs on
	case '>':
		swap = dt.Size() > 1
	default:
		return nil, fmt.Errorf("npy: unsupported dtype %q", descr)
	}
	nbytes, err := ir.CheckBytes(dt, shape)
	if err != nil {
		return nil, fmt.Errorf("npy: %v", err)
	}
	// The header's size is only a claim: the data is read in bounded
	// chunks first, so a short file is an error before the tensor is
	// allocated.
	data, err := ReadAtMost(r, nbytes)
	if err != nil {
		return nil, fmt.Errorf("npy: reading %d bytes of %s%v data: %v", nbytes, dt, shape, err)
	}
	t := New(dt, shape)
	copy(t.Data, data)
	if swap {
		es := dt.Size()
		for i := 0; i < len(t.Data); i += es {
			for a, b := i, i+es-1; a < b; a, b = a+1, b-1 {
				t.Data[a], t.Data[b] = t.Data[b], t.Data[a]
			}
		}
	}
	return t, nil
}

// readChunk is the most ReadAtMost allocates before it has seen data.
const readChunk = 16 << 20

// ReadAtMost reads exactly n bytes of r, growing its buffer only as data
// arrives (in chunks of 16 MiB), so that a header claiming a huge size in
// front of a short file costs no more memory than the file: a short read
// is an error.
func ReadAtMost(r io.Reader, n int64) ([]byte, error) {
	if n <= readChunk {
		buf := make([]byte, n)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	var buf []byte
	for int64(len(buf)) < n {
		k := min(n-int64(len(buf)), readChunk)
		start := len(buf)
		buf = append(buf, make([]byte, k)...)
		if _, err := io.ReadFull(r, buf[start:]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("%v after %d of %d bytes", err, start, n)
		}
	}
	return buf, nil
}

// parseNpyHeader reads the Python dict literal of a .npy header, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }.
func parseNpyHeader(h string) (descr string, fortran bool, shape ir.Shape, err error) {
	s := strings.TrimSpace(h)
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return "", false, nil, fmt.Errorf("not a dict")
	}
	s = strings.TrimSpace(s[1 : len(s)-1])
	seen := map[string]bool{}
	for s != "" {
		key, rest, err := pyString(s)
		if err != nil {
			return "", false, nil, err
		}
		rest = strings.TrimSpace(rest)
		if !strings.HasPrefix(rest, ":") {
			return "", false, nil, fmt.Errorf("missing ':' after %q", key)
		}
		rest = strings.TrimSpace(rest[1:])
		switch key {
		case "descr":
			if descr, rest, err = pyString(rest); err != nil {
				return "", false, nil, err
			}
		case "fortran_order":
			switch {
			case strings.HasPrefix(rest, "False"):
				fortran, rest = false, rest[5:]
			case strings.HasPrefix(rest, "True"):
				fortran, rest = true, rest[4:]
			default:
				return "", false, nil, fmt.Errorf("fortran_order is not True or False")
			}
		case "shape":
			if !strings.HasPrefix(rest, "(") {
				return "", false, nil, fmt.Errorf("shape is not a tuple")
			}
			end := strings.IndexByte(rest, ')')
			if end < 0 {
				return "", false, nil, fmt.Errorf("unterminated shape")
			}
			shape = ir.Shape{}
			for _, f := range strings.Split(rest[1:end], ",") {
				f = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(f), "L"))
				if f == "" {
					continue
				}
				d, err := strconv.ParseInt(f, 10, 64)
				if err != nil || d < 0 {
					return "", false, nil, fmt.Errorf("bad dimension %q", f)
				}
				shape = append(shape, d)
			}
			rest = rest[end+1:]
		default:
			return "", false, nil, fmt.Errorf("unknown key %q", key)
		}
		seen[key] = true
		rest = strings.TrimSpace(rest)
		rest = strings.TrimPrefix(rest, ",")
		s = strings.TrimSpace(rest)
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return "", false, nil, fmt.Errorf("missing key %q", k)
		}
	}
	return descr, fortran, shape, nil
}

// pyString reads a quoted Python string (no escapes) from the start of s.
func pyString(s string) (string, string, error) {
	if s == "" || (s[0] != '\'' && s[0] != '"') {
		return "", "", fmt.Errorf("expected a quoted string at %q", s)
	}
	end := strings.IndexByte(s[1:], s[0])
	if end < 0 {
		return "", "", fmt.Errorf("unterminated string at %q", s)
	}
	return s[1 : 1+end], s[2+end:], nil
}

// WriteNpyFile writes t to path in NumPy's .npy format.
func WriteNpyFile(path string, t *Tensor) error {
	var b bytes.Buffer
	if err := WriteNpy(&b, t); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// WriteNpy writes t in NumPy's .npy format: version 1.0 (2.0 when the
// header does not fit), little-endian, C order, header padded so that the
// data starts at a multiple of 64 bytes. bfloat16 has no NumPy type and is
// an error.
func WriteNpy(w io.Writer, t *Tensor) error {
	descr, err := npyDescr(t.DType)
	if err != nil {
		return err
	}
	var dims strings.Builder
	dims.WriteByte('(')
	for i, d := range t.Shape {
		if i > 0 {
			dims.WriteString(", ")
		}
		dims.WriteString(strconv.FormatInt(d, 10))
	}
	if len(t.Shape) == 1 {
		dims.WriteByte(',')
	}
	dims.WriteByte(')')
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, dims.String())
	major, lenBytes := byte(1), 2
	pad := func() int { return (64 - (len(npyMagic)+2+lenBytes+len(dict)+1)%64) % 64 }
	if len(dict)+1+pad() > 0xffff {
		major, lenBytes = 2, 4
	}
	header := dict + strings.Repeat(" ", pad()) + "\n"
	var pre bytes.Buffer
	pre.WriteString(npyMagic)
	pre.WriteByte(major)
	pre.WriteByte(0)
	if major == 1 {
		binary.Write(&pre, binary.LittleEndian, uint16(len(header)))
	} else {
		binary.Write(&pre, binary.LittleEndian, uint32(len(header)))
	}
	pre.WriteString(header)
	if _, err := w.Write(pre.Bytes()); err != nil {
		return err
	}
	_, err = w.Write(t.Data)
	return err
}
