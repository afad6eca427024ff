package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/backend/dnnl"
	"github.com/kiln-dev/kiln/internal/testenv"
)

// TestPartitionFlags: --partition measured (the default with an external
// target) prints the measured candidates and keeps the choice in the
// cache (a second compile says so); --partition greedy measures nothing;
// --explain says where a node went and why; bad values are usage errors
// naming the flag.
func TestPartitionFlags(t *testing.T) {
	testenv.Cgo(t)
	if !dnnl.Available {
		t.Skip("no oneDNN in this build")
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	out := filepath.Join(t.TempDir(), "a.kiln")
	// The second compile restores the whole artifact from kiln's cache;
	// the third has another artifact (its weights linked into the
	// library), so it compiles, with the measurements from the cache.
	for round, want := range []string{"s):", "from kiln's cache", "from the cache"} {
		code, stdout, stderr := kiln("compile", mlpDir, "-t", "dnnl, c", "-o", out, fmt.Sprintf("--link-params=%v", round == 2))
		if code != 0 || !strings.Contains(stdout, "measured partitioning (1 thread(s)") || !strings.Contains(stdout, want) || !strings.Contains(stdout, "(chosen)") {
			t.Errorf("round %d: exit %d\n%s\n%s", round, code, stdout, stderr)
		}
	}
	code, stdout, stderr := kiln("compile", mlpDir, "-t", "dnnl, c", "-o", out, "--partition", "greedy", "--explain", "/0/Gemm")
	if code != 0 || strings.Contains(stdout, "measured partitioning") || !strings.Contains(stdout, `"/0/Gemm" (nn.dense): dnnl #0`) || !strings.Contains(stdout, "first target in -t that takes it") {
		t.Errorf("greedy: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Odd partitions are warnings on stderr: ccompiler takes the mlp's
	// operators, but they are inside dnnl's composites.
	code, _, stderr = kiln("compile", mlpDir, "-t", "dnnl, ccompiler, c", "-o", out, "--partition", "greedy")
	if code != 0 || !strings.Contains(stderr, "kiln: warning: ccompiler receives nothing: the operators it takes are inside the composites of dnnl (3)") {
		t.Errorf("shadowed ccompiler: exit %d, stderr %q", code, stderr)
	}
	// The HTML report shows the measurement and a time bar per node.
	page := filepath.Join(t.TempDir(), "r.html")
	if code, _, stderr := kiln("compile", mlpDir, "-t", "dnnl, c", "-o", out, "--report-html", page); code != 0 {
		t.Fatalf("--report-html: exit %d: %s", code, stderr)
	}
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), "measured partitioning (1 thread(s), from the cache)") || !strings.Contains(string(b), `stroke="#a00"`) {
		t.Errorf("HTML report without the measurement or time bars: %v", err)
	}
	code, stdout, stderr = kiln("compile", mlpDir, "-t", "dnnl, c", "-o", out, "--explain", "/0/Gemm")
	if code != 0 || !strings.Contains(stdout, `"/0/Gemm" (nn.dense)`) || !strings.Contains(stdout, "measured: dnnl ") {
		t.Errorf("measured --explain: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--partition", "best"}, 2, `--partition "best": want measured or greedy`},
		{[]string{"--partition-threads", "-1"}, 2, "--partition-threads -1"},
		{[]string{"--explain", "no/such/node"}, 1, `--explain "no/such/node": no such ONNX node`},
	} {
		dir := filepath.Join(t.TempDir(), "x.kiln")
		code, _, stderr := kiln(append([]string{"compile", mlpDir, "-t", "dnnl, c", "-o", dir}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.err) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, stderr, c.code, c.err)
		}
		if c.code == 2 {
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("%v: a usage error left %s", c.args, dir)
			}
		}
	}
}
