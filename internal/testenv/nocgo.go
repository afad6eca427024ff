//go:build !cgo

package testenv

import "errors"

const haveCgo = false

var errNoCgo = errors.New("built with CGO_ENABLED=0: compiled libraries cannot be loaded")
