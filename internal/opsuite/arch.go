package opsuite

import "runtime"

// barrierConstraint is a C macro body: the asm operand that keeps the
// vector (or scalar float) v in a register on this machine.
func barrierConstraint() string {
	switch runtime.GOARCH {
	case "arm64":
		return `"+w"(v)`
	case "amd64", "386":
		return `"+x"(v)`
	}
	return `"+r"(v)`
}
