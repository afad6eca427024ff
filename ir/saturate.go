package ir

import "math"

// SaturateUint64 converts a float to uint64, saturating at 0 and
// MaxUint64 (NaN gives 0). The reference executor's and the kernels'
// integer clip bounds both use it, so they agree.
func SaturateUint64(v float64) uint64 {
	switch {
	case math.IsNaN(v) || v <= 0:
		return 0
	case v >= 1.8446744073709551615e19:
		return math.MaxUint64
	}
	return uint64(v)
}

// SaturateInt64 converts a float to int64, saturating at MinInt64 and
// MaxInt64 (NaN gives 0).
func SaturateInt64(v float64) int64 {
	switch {
	case math.IsNaN(v):
		return 0
	case v >= 9.223372036854775807e18:
		return math.MaxInt64
	case v <= -9.223372036854775808e18:
		return math.MinInt64
	}
	return int64(v)
}
