//go:build !unix

package onnx

import "os"

// readModelFile returns the bytes of the file at path (read into memory)
// and a function that releases them.
func readModelFile(path string) ([]byte, func(), error) {
	data, err := os.ReadFile(path)
	return data, func() {}, err
}
