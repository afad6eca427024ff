package ir

import (
	"math"
	"testing"
)

func TestSaturate(t *testing.T) {
	for _, c := range []struct {
		v float64
		i int64
		u uint64
	}{
		{math.NaN(), 0, 0},
		{-1e30, math.MinInt64, 0},
		{-3, -3, 0},
		{7, 7, 7},
		{1e19, math.MaxInt64, 10000000000000000000},
		{1e30, math.MaxInt64, math.MaxUint64},
		{math.Inf(1), math.MaxInt64, math.MaxUint64},
	} {
		if got := SaturateInt64(c.v); got != c.i {
			t.Errorf("SaturateInt64(%v) = %d, want %d", c.v, got, c.i)
		}
		if got := SaturateUint64(c.v); got != c.u {
			t.Errorf("SaturateUint64(%v) = %d, want %d", c.v, got, c.u)
		}
	}
}
