package runtime

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// loaderTestRuns numbers the runs of TestRegisterLoaderErrors: loaders
// are registered for the whole process, so each run (go test -count=N)
// registers a kind of its own.
var loaderTestRuns atomic.Int64

func TestRegisterLoaderErrors(t *testing.T) {
	load := func([]byte) (Module, error) { return nil, nil }
	kind := fmt.Sprintf("kiln_export_test_%d", loaderTestRuns.Add(1))
	if err := RegisterLoader(Loader{Kind: kind, Load: load}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		l    Loader
		want string
	}{
		{Loader{Kind: kind, Load: load}, fmt.Sprintf("%q is already registered", kind)},
		{Loader{Kind: "", Load: load}, "needs a kind"},
		{Loader{Kind: "x"}, "needs a kind and a Load"},
		{Loader{Kind: "dso", Load: load}, `"dso" is built in`},
		{Loader{Kind: "c", Load: load}, `"c" is built in`},
	} {
		err := RegisterLoader(c.l)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("RegisterLoader(%q): got %v, want %q", c.l.Kind, err, c.want)
		}
	}
	if _, err := LoadModule("no_such_kind", nil); err == nil || !strings.Contains(err.Error(), `no loader for module kind "no_such_kind"`) || !strings.Contains(err.Error(), kind) {
		t.Errorf("LoadModule of an unknown kind: %v", err)
	}
	m := &CSourceModule{Label: "x", Code: "int f;"}
	if _, ok := m.GetFunction("f"); ok || m.Kind() != "c" || m.Name() != "x" {
		t.Errorf("CSourceModule: kind %q name %q", m.Kind(), m.Name())
	}
}
