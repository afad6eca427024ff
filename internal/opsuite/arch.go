package opsuite

import "runtime"

func isX86() bool { return runtime.GOARCH == "amd64" || runtime.GOARCH == "386" }

// barrierConstraint is the asm operand constraint that keeps a vector
// (or scalar float) in a register on this machine.
func barrierConstraint() string {
	switch runtime.GOARCH {
	case "arm64":
		return `"+w"`
	case "amd64", "386":
		return `"+x"`
	}
	return `"+r"`
}
