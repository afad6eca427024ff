package runtime

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Params file format (all integers little-endian):
//
//	magic   [8]byte  "KILNPRM1"
//	count   uint64   number of tensors
//	count times, sorted by name:
//	  nameLen  uint32, name  [nameLen]byte (UTF-8)
//	  dtypeLen uint32, dtype [dtypeLen]byte (kiln's dtype name, e.g. "float32")
//	  ndim     uint32, dims  [ndim]int64
//	  nbytes   uint64, data  [nbytes]byte (row-major, little-endian elements)
//
// nbytes must equal the product of dims times the dtype's size.
const paramsMagic = "KILNPRM1"

// Limits that keep a corrupt params file from causing huge allocations.
const (
	maxParamName = 1 << 16
	maxParamRank = 64
)

// SaveParams writes named tensors in the params file format.
func SaveParams(w io.Writer, params map[string]*tensor.Tensor) error {
	names := make([]string, 0, len(params))
	for n := range params {
		names = append(names, n)
	}
	sort.Strings(names)
	bw := bufio.NewWriter(w)
	bw.WriteString(paramsMagic)
	le := binary.LittleEndian
	var b8 [8]byte
	put32 := func(v uint32) { le.PutUint32(b8[:4], v); bw.Write(b8[:4]) }
	put64 := func(v uint64) { le.PutUint64(b8[:], v); bw.Write(b8[:]) }
	put64(uint64(len(names)))
	for _, n := range names {
		t := params[n]
		if t == nil {
			return fmt.Errorf("save params: %q is nil", n)
		}
		if len(n) > maxParamName {
			return fmt.Errorf("save params: name %.40q... is longer than %d bytes", n, maxParamName)
		}
		if want, err := byteSize(t.DType, t.Shape); err != nil || want != int64(len(t.Data)) {
			return fmt.Errorf("save params: %q: %s%v with %d bytes of data is not a valid tensor", n, t.DType, t.Shape, len(t.Data))
		}
		if len(t.Shape) > maxParamRank {
			return fmt.Errorf("save params: %q: rank %d exceeds %d", n, len(t.Shape), maxParamRank)
		}
		put32(uint32(len(n)))
		bw.WriteString(n)
		ds := t.DType.String()
		put32(uint32(len(ds)))
		bw.WriteString(ds)
		put32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			put64(uint64(d))
		}
		put64(uint64(len(t.Data)))
		bw.Write(t.Data)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("save params: %w", err)
	}
	return nil
}

// ReadParams reads a params file written by SaveParams.
func ReadParams(r io.Reader) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	err := scanParams(r, func(name string, dt ir.DType, shape ir.Shape, nbytes int64, data io.Reader) error {
		t, err := readTensorData(data, dt, shape, nbytes)
		if err != nil {
			return fmt.Errorf("read params: %q: data: %w", name, err)
		}
		out[name] = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanParams reads a params file's tensors in order, checking each
// header (name, dtype, rank, shape, size) as ReadParams does, and hands
// each to each, which must read exactly nbytes of its data from data; an
// error each returns ends the scan and is returned as it is.
func scanParams(r io.Reader, each func(name string, dt ir.DType, shape ir.Shape, nbytes int64, data io.Reader) error) error {
	br := bufio.NewReader(r)
	fail := func(format string, a ...any) error {
		return fmt.Errorf("read params: "+format, a...)
	}
	var magic [8]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil {
		return fail("header: %w", eofIsUnexpected(err))
	}
	if string(magic[:]) != paramsMagic {
		return fail("bad magic %q (want %q): not a kiln params file", magic[:], paramsMagic)
	}
	le := binary.LittleEndian
	var b8 [8]byte
	get32 := func() (uint32, error) {
		_, err := io.ReadFull(br, b8[:4])
		return le.Uint32(b8[:4]), eofIsUnexpected(err)
	}
	get64 := func() (uint64, error) {
		_, err := io.ReadFull(br, b8[:])
		return le.Uint64(b8[:]), eofIsUnexpected(err)
	}
	getString := func(limit uint32) (string, error) {
		n, err := get32()
		if err != nil {
			return "", err
		}
		if n > limit {
			return "", fmt.Errorf("string length %d exceeds %d", n, limit)
		}
		buf := make([]byte, n)
		_, err = io.ReadFull(br, buf)
		return string(buf), eofIsUnexpected(err)
	}
	count, err := get64()
	if err != nil {
		return fail("count: %w", err)
	}
	seen := map[string]bool{}
	for i := uint64(0); i < count; i++ {
		name, err := getString(maxParamName)
		if err != nil {
			return fail("tensor %d: name: %w", i, err)
		}
		if seen[name] {
			return fail("tensor %d: %q appears twice", i, name)
		}
		seen[name] = true
		dts, err := getString(64)
		if err != nil {
			return fail("%q: dtype: %w", name, err)
		}
		dt, err := ir.ParseDType(dts)
		if err != nil {
			return fail("%q: %w", name, err)
		}
		ndim, err := get32()
		if err != nil {
			return fail("%q: rank: %w", name, err)
		}
		if ndim > maxParamRank {
			return fail("%q: rank %d exceeds %d", name, ndim, maxParamRank)
		}
		shape := make(ir.Shape, ndim)
		for k := range shape {
			d, err := get64()
			if err != nil {
				return fail("%q: shape: %w", name, err)
			}
			shape[k] = int64(d)
		}
		want, err := byteSize(dt, shape)
		if err != nil {
			return fail("%q: %w", name, err)
		}
		nbytes, err := get64()
		if err != nil {
			return fail("%q: size: %w", name, err)
		}
		if nbytes != uint64(want) {
			return fail("%q: %d bytes of data for %s%v, want %d", name, nbytes, dt, shape, want)
		}
		if err := each(name, dt, shape, want, br); err != nil {
			return err
		}
	}
	return nil
}

// readTensorData reads nbytes of tensor data. Large tensors are read
// before the tensor is allocated, so a truncated file claiming a huge size
// fails on the short read instead of on the allocation.
func readTensorData(r io.Reader, dt ir.DType, shape ir.Shape, nbytes int64) (*tensor.Tensor, error) {
	if nbytes <= 64<<20 {
		t := tensor.New(dt, shape)
		_, err := io.ReadFull(r, t.Data)
		return t, eofIsUnexpected(err)
	}
	raw, err := io.ReadAll(io.LimitReader(r, nbytes))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) != nbytes {
		return nil, io.ErrUnexpectedEOF
	}
	return tensor.FromBytes(dt, shape, raw)
}

func eofIsUnexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
