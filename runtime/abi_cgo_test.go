//go:build cgo

package runtime

import "testing"

// TestABIConstants checks the pure-Go dtype codes against the C header.
func TestABIConstants(t *testing.T) {
	if got, want := [5]uint8{abiInt, abiUint, abiFloat, abiBFloat, abiBool}, headerDTypeCodes(); got != want {
		t.Errorf("dtype codes %v, header has %v", got, want)
	}
}
