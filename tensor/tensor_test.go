package tensor

import (
	"strings"
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

// FromData copies data of the dtype's Go type and refuses any other type
// or length with an error (FromFloat32s panics instead of padding or
// truncating).
func TestFromData(t *testing.T) {
	x, err := FromData(ir.Int32, ir.Shape{2, 2}, []int32{1, 2, 3, 4})
	if err != nil || x.Int32s()[3] != 4 {
		t.Fatalf("FromData = %v, %v", x, err)
	}
	if b, err := FromData(ir.Bool, ir.Shape{2}, []bool{true, false}); err != nil || b.Data[0] != 1 || b.Data[1] != 0 {
		t.Errorf("bool: %v, %v", b, err)
	}
	if e, err := FromData(ir.Float32, ir.Shape{0}, []float32{}); err != nil || e.Len() != 0 {
		t.Errorf("empty: %v, %v", e, err)
	}
	for _, c := range []struct {
		dt   ir.DType
		data any
		says string
	}{
		{ir.Float32, []float32{1, 2, 3}, "has 4 elements, the data 3"},
		{ir.Float32, []float32{1, 2, 3, 4, 5}, "has 4 elements, the data 5"},
		{ir.Float32, []float64{1, 2, 3, 4}, "element type is not the dtype's"},
		{ir.Float32, []string{"a"}, "want a slice of the dtype's Go type"},
		{ir.Float32, nil, "want a slice of the dtype's Go type"},
	} {
		if _, err := FromData(c.dt, ir.Shape{2, 2}, c.data); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("FromData(%s, %T): %v, want an error saying %q", c.dt, c.data, err, c.says)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("FromFloat32s with too few values did not panic")
		}
	}()
	FromFloat32s(ir.Shape{3}, []float32{1})
}
