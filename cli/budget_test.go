package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/budget"
)

// TestMaxMemory: --max-memory is the budget every size is checked
// against, on the reference and the compiled engine, and holds for one
// command only.
func TestMaxMemory(t *testing.T) {
	before := budget.Limit()
	in := filepath.Join(mlpDir, "test_data_set_0", "input_0.pb")
	for _, args := range [][]string{
		{"run", mlpDir, "--input", in},
		{"run", mlpDir, "-t", "c", "--input", in},
		{"compile", mlpDir, "-t", "c", "-o", filepath.Join(t.TempDir(), "a")},
	} {
		code, _, stderr := kiln(append(args, "--max-memory", "1KiB")...)
		if code != 1 || !strings.Contains(stderr, "more than the memory budget of 1 KiB (--max-memory)") {
			t.Errorf("%v with 1 KiB: exit %d: %s", args, code, stderr)
		}
		if code, _, stderr := kiln(append(args, "--max-memory", "256MiB")...); code != 0 {
			t.Errorf("%v with 256 MiB: exit %d: %s", args, code, stderr)
		}
	}
	if code, _, stderr := kiln("run", mlpDir, "--input", in, "--max-memory", "lots"); code != exitUsage || !strings.Contains(stderr, "max-memory") {
		t.Errorf("bad size: exit %d: %s", code, stderr)
	}
	if budget.Limit() != before {
		t.Errorf("the budget stayed %d after the commands", budget.Limit())
	}
}
