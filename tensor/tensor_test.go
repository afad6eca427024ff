package tensor

import (
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// TestAdopt checks that Adopt takes an aligned slice as the tensor's data
// (no copy), copies an unaligned one, and checks the size.
func TestAdopt(t *testing.T) {
	buf := make([]byte, 17)
	for i := range buf {
		buf[i] = byte(i)
	}
	a, err := Adopt(ir.Float32, ir.Shape{2, 2}, buf[:16])
	if err != nil {
		t.Fatal(err)
	}
	if &a.Data[0] != &buf[0] || len(a.Data) != 16 || cap(a.Data) != 16 {
		t.Errorf("an aligned slice was copied (or kept its capacity)")
	}
	u, err := Adopt(ir.Float32, ir.Shape{4}, buf[1:17])
	if err != nil {
		t.Fatal(err)
	}
	if &u.Data[0] == &buf[1] || u.Data[0] != 1 || u.Data[15] != 16 {
		t.Errorf("an unaligned slice was adopted, or copied wrongly: %v", u.Data)
	}
	if _, err := Adopt(ir.Float32, ir.Shape{5}, buf[:16]); err == nil {
		t.Errorf("Adopt with too few bytes succeeded")
	}
}
