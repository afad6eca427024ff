package tune

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/strategy"
)

// TestRecordsRoundTrip: Put replaces a workload's record on the same
// target, Save writes sorted JSON that Load reads back unchanged.
func TestRecordsRoundTrip(t *testing.T) {
	r := New()
	r.Put(Record{Workload: "w2", Target: "t", Knobs: strategy.Knobs{"rows": 2}, Ms: 1, DefaultMs: 2, Candidates: 3})
	r.Put(Record{Workload: "w1", Target: "t", Knobs: strategy.Knobs{}, Ms: 1, DefaultMs: 1, Candidates: 1})
	r.Put(Record{Workload: "w2", Target: "t", Knobs: strategy.Knobs{"rows": 4}, Ms: 0.5, DefaultMs: 2, Candidates: 4})
	r.Put(Record{Workload: "w2", Target: "u", Knobs: strategy.Knobs{"rows": 1}, Ms: 3, DefaultMs: 3, Candidates: 1})
	path := filepath.Join(t.TempDir(), "records.json")
	if err := r.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Records) != 3 || got.Records[0].Workload != "w1" {
		t.Fatalf("records %+v", got.Records)
	}
	if rec, ok := got.Lookup("w2", "t"); !ok || rec.Knobs["rows"] != 4 || rec.Candidates != 4 {
		t.Errorf("w2 on t: %+v, %v", rec, ok)
	}
	if _, ok := got.Lookup("w2", "v"); ok {
		t.Error("a record for another target applied")
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("Save left %d files", len(ents))
	}
}

// TestLoadRefusesBadRecords: files that are not records, of another
// version, with duplicate or anonymous records, or too large are errors.
func TestLoadRefusesBadRecords(t *testing.T) {
	for name, c := range map[string]struct{ data, want string }{
		"not json":     {"{", "not kiln tuning records"},
		"unknown":      {`{"version":1,"records":[],"extra":1}`, "not kiln tuning records"},
		"version":      {`{"version":7,"records":[]}`, "version 7"},
		"duplicate":    {`{"version":1,"records":[{"workload":"w","target":"t"},{"workload":"w","target":"t"}]}`, "repeats"},
		"anonymous":    {`{"version":1,"records":[{"workload":"","target":"t"}]}`, "lacks"},
		"knob type":    {`{"version":1,"records":[{"workload":"w","target":"t","knobs":{"rows":"x"}}]}`, "not kiln tuning records"},
		"huge integer": {`{"version":1,"records":[{"workload":"w","target":"t","knobs":{"rows":1e99}}]}`, "not kiln tuning records"},
	} {
		if _, err := Parse([]byte(c.data), name); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
		}
	}
	path := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(path, make([]byte, MaxFileBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: %v", err)
	}
}
