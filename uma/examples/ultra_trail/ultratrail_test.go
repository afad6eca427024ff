package ultratrail

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/backend/backendtest"
	"github.com/kiln-dev/kiln/internal/testenv"
)

// cycles is the simulator's cycle model, computed independently: per
// output tile of d channels, ceil(c*kw/d) weight tiles of d + ol + 2(d-1)
// cycles, plus ol cycles of write-back.
func cycles(c, kw, oc, ol, d int64) int64 {
	ceil := func(a, b int64) int64 { return (a + b - 1) / b }
	return ceil(oc, d) * (ceil(c*kw, d)*(d+ol+2*(d-1)) + ol)
}

// TestConv1dKWS compiles ../shared/models/conv1d_kws with the default
// dimension (8) and with -dimension=16: both conv1d → bias → relu chains
// are offloaded as composites, the dimension reaches the generated C,
// outputs match PyTorch's, and the simulator counts the model's MACs and
// the cycles of its model.
func TestConv1dKWS(t *testing.T) {
	testenv.Cgo(t)
	r := backendtest.Registry(t, Register)
	for _, c := range []struct {
		targets string
		dim     int64
	}{{"ultra_trail, c", 8}, {"ultra_trail -dimension=16, c", 16}} {
		t.Run(c.targets, func(t *testing.T) {
			got := backendtest.CompileModel(t, r, c.targets, "conv1d_kws")
			if got.Report.Counts[Name] != 6 || got.Report.Regions[Name] != 2 {
				t.Errorf("report counts %v regions %v, want 6 operators in 2 regions", got.Report.Counts, got.Report.Regions)
			}
			for _, n := range got.Report.Nodes {
				if n.Target == Name && n.Composite != Name+".conv1d_bias_relu" {
					t.Errorf("%s %s offloaded outside the composite", n.Node, n.Op)
				}
			}
			src := got.Source(t, "ext0_ultra_trail.c")
			if strings.Count(src, Kernel+"(") != 2 {
				t.Errorf("want two %s calls in:\n%s", Kernel, src)
			}
			// conv1d_kws: (1, 16, 128) → conv(32, 16, 3) → conv(32, 32, 3).
			if !strings.Contains(src, Kernel+"(") || !strings.Contains(src, ", 1, 16, 128, 32, 3, 1, "+itoa(c.dim)+");") {
				t.Errorf("the first call does not carry dimension %d:\n%s", c.dim, src)
			}
			s, err := ReadStats(got.Dir)
			if err != nil {
				t.Fatal(err)
			}
			wantMACs := int64(32*128*16*3 + 32*128*32*3)
			wantCycles := cycles(16, 3, 32, 128, c.dim) + cycles(32, 3, 32, 128, c.dim)
			if s.Calls != 2 || s.MACs != wantMACs || s.Cycles != wantCycles || s.Dimension != c.dim {
				t.Errorf("stats %+v, want 2 calls, %d MACs, %d cycles, dimension %d", s, wantMACs, wantCycles, c.dim)
			}
			t.Logf("%s: %s", c.targets, s)
			if again, _ := ReadStats(got.Dir); again.Calls != 0 {
				t.Errorf("ReadStats did not reset the counters: %+v", again)
			}
		})
	}
}

func itoa(v int64) string {
	if v < 10 {
		return string(rune('0' + v))
	}
	return itoa(v/10) + string(rune('0'+v%10))
}
