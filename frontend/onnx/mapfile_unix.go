//go:build unix

package onnx

import (
	"os"
	"syscall"
)

// readModelFile returns the bytes of the file at path and a function that
// releases them. A regular file is mapped read-only rather than read: the
// importer copies what it keeps out of the buffer (protobuf decoding
// copies every field), and reading a 45 MB model into fresh memory cost
// a sixth of a cached compile of resnet18 (the copy and its page faults).
// Anything else (a pipe, an empty file) is read as usual.
func readModelFile(path string) ([]byte, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	if !st.Mode().IsRegular() || size <= 0 || int64(int(size)) != size {
		data, err := os.ReadFile(path)
		return data, func() {}, err
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		data, err := os.ReadFile(path)
		return data, func() {}, err
	}
	return data, func() { syscall.Munmap(data) }, nil
}
