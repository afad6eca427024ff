// Package tune holds kiln's tuning records: for each tunable workload (an
// operator implementation with its shapes and attributes, see
// strategy.Workload) on each resolved target (strategy.TargetKey), the
// schedule knobs `kiln tune` measured fastest on a machine. `kiln compile
// --tuning FILE` gives them to the lowering (Records implements
// strategy.Tuning); without records every implementation uses its
// defaults. Records are JSON, one file per machine and target, and may
// come from anyone: Load checks sizes and structure, and an
// implementation checks its knobs' values before using them.
package tune

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/kiln-dev/kiln/strategy"
)

// Version is the records format version Load accepts.
const Version = 1

// MaxFileBytes bounds a records file Load reads.
const MaxFileBytes = 16 << 20

// Record is the measured best knobs of one workload on one target.
type Record struct {
	// Workload is strategy.Workload of the call.
	Workload string `json:"workload"`
	// Target is strategy.TargetKey of the target it was measured for.
	Target string `json:"target"`
	// Knobs are the fastest knobs measured.
	Knobs strategy.Knobs `json:"knobs"`
	// Ms is their median latency; DefaultMs the defaults' (same run).
	Ms        float64 `json:"ms"`
	DefaultMs float64 `json:"default_ms"`
	// Candidates is how many knob settings were measured.
	Candidates int `json:"candidates"`
	// Failed is how many settings failed to compile or run and were
	// skipped (a fault of kiln's, reported when tuning).
	Failed int `json:"failed,omitempty"`
}

// Records is a set of records, at most one per (workload, target).
type Records struct {
	Version int      `json:"version"`
	Records []Record `json:"records"`
}

// New returns an empty set.
func New() *Records { return &Records{Version: Version} }

// Load reads a records file.
func Load(path string) (*Records, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: tuning records larger than %d bytes", path, MaxFileBytes)
	}
	return Parse(data, path)
}

// Parse decodes records (name is used in errors).
func Parse(data []byte, name string) (*Records, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r Records
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: not kiln tuning records: %v", name, err)
	}
	if r.Version != Version {
		return nil, fmt.Errorf("%s: tuning records version %d, want %d", name, r.Version, Version)
	}
	seen := map[[2]string]bool{}
	for i, rec := range r.Records {
		if rec.Workload == "" || rec.Target == "" {
			return nil, fmt.Errorf("%s: record %d lacks its workload or target", name, i)
		}
		k := [2]string{rec.Workload, rec.Target}
		if seen[k] {
			return nil, fmt.Errorf("%s: record %d repeats workload %q on target %q", name, i, rec.Workload, rec.Target)
		}
		seen[k] = true
		if len(rec.Knobs) > 64 {
			return nil, fmt.Errorf("%s: record %d has %d knobs", name, i, len(rec.Knobs))
		}
	}
	return &r, nil
}

// Lookup returns the record of a workload on a target.
func (r *Records) Lookup(workload, target string) (Record, bool) {
	for _, rec := range r.Records {
		if rec.Workload == workload && rec.Target == target {
			return rec, true
		}
	}
	return Record{}, false
}

// Put adds rec, replacing the record of the same workload and target.
func (r *Records) Put(rec Record) {
	for i := range r.Records {
		if r.Records[i].Workload == rec.Workload && r.Records[i].Target == rec.Target {
			r.Records[i] = rec
			return
		}
	}
	r.Records = append(r.Records, rec)
}

// Knobs implements strategy.Tuning: the recorded knobs of the call's
// workload on its target, or nil.
func (r *Records) Knobs(c *strategy.Call, impl strategy.Implementation) strategy.Knobs {
	if rec, ok := r.Lookup(strategy.Workload(c, impl), strategy.TargetKey(c.Target)); ok {
		return rec.Knobs
	}
	return nil
}

// Save writes the records to path (sorted, so that a file does not
// change when nothing in it did), replacing the file only once the new
// one is complete.
func (r *Records) Save(path string) error {
	sort.Slice(r.Records, func(i, j int) bool {
		a, b := r.Records[i], r.Records[j]
		if a.Target != b.Target {
			return a.Target < b.Target
		}
		return a.Workload < b.Workload
	})
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // workloads read "-> Tensor[...]"
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return err
	}
	data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
