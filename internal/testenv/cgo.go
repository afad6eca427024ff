//go:build cgo

package testenv

const haveCgo = true

var errNoCgo error
