package budget

import (
	"math"
	"strings"
	"testing"
)

func TestMulAdd(t *testing.T) {
	if n, ok := Mul(1<<31, 1<<31); !ok || n != 1<<62 {
		t.Errorf("Mul: %d %v", n, ok)
	}
	for _, c := range [][2]int64{{1 << 32, 1 << 32}, {math.MaxInt64, 2}, {-1, 1}} {
		if _, ok := Mul(c[0], c[1]); ok {
			t.Errorf("Mul(%d, %d) did not report overflow", c[0], c[1])
		}
	}
	if _, ok := Add(math.MaxInt64, 1); ok {
		t.Error("Add overflow not reported")
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]int64{"1048576": 1 << 20, "512MiB": 512 << 20, "4GiB": 4 << 30, "1.5 GiB": 3 << 29, "2G": 2 << 30, "1MB": 1e6} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "0", "1e30GiB", "NaN"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q): no error", bad)
		}
	}
	if got := Format(4 << 40); got != "4 TiB" {
		t.Errorf("Format = %q", got)
	}
}

func TestCheck(t *testing.T) {
	prev := SetLimit(1 << 20)
	defer SetLimit(prev)
	if err := Check("x", 1<<20); err != nil {
		t.Error(err)
	}
	err := Check("tensor float32[1000000]", 4e6)
	if err == nil || !strings.Contains(err.Error(), "tensor float32[1000000] needs 3.8 MiB, more than the memory budget of 1 MiB") {
		t.Errorf("Check: %v", err)
	}
	if Default() <= 0 {
		t.Error("no default budget")
	}
}
