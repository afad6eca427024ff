// Package shared finds ../shared, the folder beside the repository root
// that holds the design documents, the ONNX test suites, the real models
// with their reference outputs and the ONNX Runtime harnesses. Tests of
// every package locate it here, relative to the repository root rather
// than to their own directory.
package shared

import (
	"fmt"
	"os"
	"path/filepath"
)

// Dir returns the path of ../shared beside the repository root (the
// nearest directory above the working directory holding go.mod), or an
// error saying where it was looked for.
func Dir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			s := filepath.Join(filepath.Dir(dir), "shared")
			if st, err := os.Stat(s); err != nil || !st.IsDir() {
				return "", fmt.Errorf("%s not found beside the repository root %s", s, dir)
			}
			return s, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}

// Path is Dir joined with elem.
func Path(elem ...string) (string, error) {
	d, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(append([]string{d}, elem...)...), nil
}
