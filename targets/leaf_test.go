package targets

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestLeaf: package targets imports only the standard library and package
// ir (and kiln's internal helpers), so that every stage can depend on it
// and it builds without cgo. The flow a kind plugs in lives in package
// backend.
func TestLeaf(t *testing.T) {
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, f := range files {
		name := f.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			std := !strings.Contains(strings.SplitN(p, "/", 2)[0], ".")
			if p == "C" || !std && p != "github.com/kiln-dev/kiln/ir" && !strings.HasPrefix(p, "github.com/kiln-dev/kiln/internal/") {
				t.Errorf("%s imports %q: package targets must stay a leaf (the standard library, ir and internal helpers only)", name, p)
			}
		}
	}
	if n == 0 {
		t.Fatal("no source files found")
	}
}
