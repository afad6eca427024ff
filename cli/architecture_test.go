package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/internal/golden"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/targets"
)

// TestArchitectureDoc keeps the stage lists and the pass-config keys of
// docs/ARCHITECTURE.md equal to what the code has (-update rewrites them).
func TestArchitectureDoc(t *testing.T) {
	testenv.Cgo(t)
	path := filepath.Join("..", "docs", "ARCHITECTURE.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	sections := map[string]string{}
	var order []string
	for _, c := range []struct{ marker, tgts, executor string }{
		{`graph executor, -t "dnnl, cblas, c"`, "dnnl, cblas, c", driver.ExecutorGraph},
		{"AOT executor, -t c", "c", driver.ExecutorAOT},
	} {
		l, err := targets.ParseList(c.tgts)
		if err != nil {
			t.Fatalf("target list %q: %v", c.tgts, err)
		}
		p, err := driver.NewPipeline(driver.Config{Host: l.Host, Targets: l.Targets, Executor: c.executor})
		if err != nil {
			t.Fatal(err)
		}
		sections[c.marker] = "```\n" + p.String() + "```\n"
		order = append(order, c.marker)
	}
	var keys strings.Builder
	writePassConfigKeys(&keys)
	sections["pass-config keys"] = "```\n" + keys.String() + "```\n"
	order = append(order, "pass-config keys")
	for _, marker := range order {
		want := sections[marker]
		begin := "<!-- BEGIN generated: " + marker + " -->\n"
		i := strings.Index(doc, begin)
		j := strings.Index(doc[max(i, 0):], "<!-- END generated -->")
		if i < 0 || j < 0 {
			t.Fatalf("%s lacks the markers %q", path, begin)
		}
		j += i
		if doc[i+len(begin):j] != want {
			if !*golden.Update {
				t.Errorf("%s: the section %q differs from the code (go test ./cli -run TestArchitectureDoc -update):\n%s", path, marker, want)
				continue
			}
			doc = doc[:i+len(begin)] + want + doc[j:]
		}
	}
	if *golden.Update {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
