// Package budget holds kiln's process-wide memory budget: the largest
// number of bytes one tensor (or one artifact's planned storage) may take.
// Every size kiln computes from user data — a shape an ONNX model
// declares or computes, a .npy header, a params file — is checked against
// it with overflow-checked arithmetic before anything is allocated, so a
// 100-byte model cannot make the process die of a Go fatal out-of-memory
// error (which no recover catches); it gets an error naming the node and
// the size instead.
//
// The default is half of the memory available when the process starts
// (MemAvailable of /proc/meminfo, or the cgroup's memory.max when that is
// lower), 4 GiB when neither can be read. The CLI's --max-memory sets it.
// The package has no dependencies in kiln: ir, tensor, the frontend, the
// reference engine and the runtime all use it.
package budget

import (
	"bufio"
	"fmt"
	"math"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// fallback is the budget when the available memory cannot be read.
const fallback = 4 << 30

var limit atomic.Int64

func init() { limit.Store(Default()) }

// Default is the budget kiln starts with: half the available memory.
func Default() int64 {
	avail := memAvailable()
	if cg := cgroupLimit(); cg > 0 && (avail <= 0 || cg < avail) {
		avail = cg
	}
	if avail <= 0 {
		return fallback
	}
	return avail / 2
}

// Limit returns the current budget in bytes.
func Limit() int64 { return limit.Load() }

// SetLimit sets the budget (bytes > 0) and returns the previous one.
func SetLimit(bytes int64) int64 {
	if bytes <= 0 {
		bytes = Default()
	}
	return limit.Swap(bytes)
}

// Check returns an error when n bytes exceed the budget; what names the
// allocation ("tensor float32[1099511627776]").
func Check(what string, n int64) error {
	if n < 0 {
		return fmt.Errorf("%s: size overflows", what)
	}
	if l := Limit(); n > l {
		return fmt.Errorf("%s needs %s, more than the memory budget of %s (--max-memory)", what, Format(n), Format(l))
	}
	return nil
}

// Mul returns a*b for non-negative a and b, or ok=false when the product
// overflows int64.
func Mul(a, b int64) (int64, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	return int64(lo), true
}

// Add returns a+b for non-negative a and b, or ok=false on overflow.
func Add(a, b int64) (int64, bool) {
	if a < 0 || b < 0 || a > math.MaxInt64-b {
		return 0, false
	}
	return a + b, true
}

// Format prints a byte count with a binary unit ("4 TiB", "512 MiB").
func Format(n int64) string {
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	f := float64(n)
	u := 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	if u == 0 {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	s := strconv.FormatFloat(f, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + " " + units[u]
}

// Parse reads a size: plain bytes ("1048576") or a number with a unit
// (KiB, MiB, GiB, TiB; KB, MB, GB, TB as powers of 1000; K, M, G, T as
// binary units).
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) || f*float64(mult) >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: want a positive number of bytes, optionally with a unit (512MiB, 4GiB)", s)
	}
	return int64(f * float64(mult)), nil
}

// memAvailable reads MemAvailable from /proc/meminfo (0 when unknown).
func memAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			if n, ok := Mul(kb, 1024); ok {
				return n
			}
		}
	}
	return 0
}

// cgroupLimit reads the cgroup v2 memory limit (0 when none).
func cgroupLimit() int64 {
	data, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
