//go:build !cgo || kiln_nodnnl

package dnnl

import (
	"errors"

	"github.com/kiln-dev/kiln/runtime/jsonrt"
)

// Available reports whether the oneDNN kernels can run: false in a build
// without cgo or with the build tag kiln_nodnnl, where Register adds
// nothing and the package only generates code.
var Available = false

// Unavailable says why Available is false.
func Unavailable() error { return errUnavailable }

// errUnavailable is what asking for kernels says in such a build.
var errUnavailable = errors.New("dnnl: this kiln was built without oneDNN (no cgo, or the build tag kiln_nodnnl)")

func newKernelSet() (jsonrt.KernelSet, error) { return nil, errUnavailable }

// RegisterLoader does nothing in a build without oneDNN and returns the
// reason.
func RegisterLoader() error { return errUnavailable }
