package ir

import (
	"strings"
	"testing"
)

// TestCheckedNumElements: the element count of a shape, an error for a
// negative dimension or an overflowing product, and 0 for any shape with
// a zero dimension, however large the product of the others (which
// overflowed before the zero was reached: a fuzzed tensor file).
func TestCheckedNumElements(t *testing.T) {
	many := make(Shape, 61)
	for i := range many {
		many[i] = 48
	}
	cases := []struct {
		name  string
		shape Shape
		want  int64
		err   string
	}{
		{"scalar", Shape{}, 1, ""},
		{"matrix", Shape{3, 4}, 12, ""},
		{"zero", Shape{3, 0, 4}, 0, ""},
		{"zero after an overflowing product", append(many.Clone(), 0), 0, ""},
		{"zero before an overflowing product", append(Shape{0}, many...), 0, ""},
		{"overflow", many, 0, "more than 2^63 elements"},
		{"negative", Shape{2, -1}, 0, "negative dimension"},
		{"negative beside a zero", Shape{0, -1}, 0, "negative dimension"},
	}
	for _, c := range cases {
		n, err := c.shape.CheckedNumElements()
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: got %d, %v; want an error containing %q", c.name, n, err, c.err)
		case c.err == "" && (err != nil || n != c.want):
			t.Errorf("%s: got %d, %v; want %d", c.name, n, err, c.want)
		}
	}
	if _, err := CheckBytes(Float32, append(many.Clone(), 0)); err != nil {
		t.Errorf("CheckBytes of an empty shape: %v", err)
	}
}
