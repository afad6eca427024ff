package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/shared"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/tune"
)

// TestTuneRecordsCompileAndMatch runs kiln tune on lenet (its packed
// convolution is tunable), checks the records and that a second run
// resumes from them, then forces every knob setting the tuner may record
// (the records file edited, as users may) and requires the compiled model
// to still match its reference output (kiln test-onnx --tuning).
func TestTuneRecordsCompileAndMatch(t *testing.T) {
	testenv.Cgo(t)
	model, err := shared.Path("models", "lenet")
	if err != nil {
		t.Fatal(err)
	}
	recPath := filepath.Join(t.TempDir(), "records.json")
	code, stdout, stderr := kiln("tune", model, "-t", "c", "-o", recPath, "--runs", "2")
	if code != 0 {
		t.Fatalf("tune: exit %d: %s", code, stderr)
	}
	// lenet's two convolutions (6 output channels padded to a block of 8,
	// and 16).
	if !strings.Contains(stdout, "tuned 2 of 2 workloads") {
		t.Errorf("tune output: %s", stdout)
	}
	recs := lenetRecords(t, recPath)
	if code, _, stderr := kiln("tune", model, "-t", "c", "-o", recPath, "--runs", "2"); code != 0 || !strings.Contains(stderr, "2 already recorded") {
		t.Errorf("second tune did not resume (exit %d): %s", code, stderr)
	}
	// The second convolution (6 input channels, which kc=2 divides).
	rec := recs.Records[0]
	if !strings.Contains(rec.Workload, "Tensor[(1, 6, 14, 14), float32]") {
		rec = recs.Records[1]
	}
	if !strings.Contains(rec.Workload, "Tensor[(1, 6, 14, 14), float32]") {
		t.Fatalf("no record of the second convolution: %+v", recs.Records)
	}
	for _, k := range []strategy.Knobs{{"kernel": 0}, {"kernel": 1}, {"kernel": 1, "kc": 2}, {"kernel": 0, "rows": 2}} {
		rec.Knobs = k
		recs.Put(rec)
		if err := recs.Save(recPath); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := kiln("test-onnx", "--engine", "compiled", "-t", "c", "--tuning", recPath, model)
		if code != 0 || !strings.Contains(stdout, "1 passed") {
			t.Errorf("knobs %s: exit %d: %s%s", k, code, stdout, stderr)
		}
	}
	// Knobs that do not fit are an error naming them, not a crash.
	rec.Knobs = strategy.Knobs{"kernel": 1, "mv": 9, "nc": 9}
	recs.Put(rec)
	if err := recs.Save(recPath); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := kiln("compile", model, "-t", "c", "--tuning", recPath, "-o", filepath.Join(t.TempDir(), "a")); code == 0 || !strings.Contains(stderr, "mv=9") {
		t.Errorf("bad knobs: exit %d: %s", code, stderr)
	}
}

// TestTuneInModel runs kiln tune --measure model on lenet: every
// candidate is the whole model, timed by its convolution kernels' medians
// inside it. Both workloads get records whose best is no slower than
// their defaults, and the records compile to a model that still matches
// its reference output. A bad --measure is a usage error.
func TestTuneInModel(t *testing.T) {
	testenv.Cgo(t)
	model, err := shared.Path("models", "lenet")
	if err != nil {
		t.Fatal(err)
	}
	recPath := filepath.Join(t.TempDir(), "records.json")
	code, stdout, stderr := kiln("tune", model, "-t", "c", "-o", recPath, "--runs", "3", "--measure", "model")
	if code != 0 {
		t.Fatalf("tune: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "tuned 2 of 2 workloads") || !strings.Contains(stdout, "measured inside the model") {
		t.Errorf("tune output: %s", stdout)
	}
	for _, r := range lenetRecords(t, recPath).Records {
		if r.Failed != 0 {
			t.Fatalf("a candidate failed: %+v", r)
		}
	}
	code, stdout, stderr = kiln("test-onnx", "--engine", "compiled", "-t", "c", "--tuning", recPath, model)
	if code != 0 || !strings.Contains(stdout, "1 passed") {
		t.Errorf("tuned model: exit %d: %s%s", code, stdout, stderr)
	}
	if code, _, stderr := kiln("tune", model, "-o", recPath, "--measure", "kernel"); code != exitUsage || !strings.Contains(stderr, `--measure "kernel"`) {
		t.Errorf("bad --measure: exit %d: %s", code, stderr)
	}
}

// lenetRecords loads kiln tune's records of lenet and requires one for
// each of its two convolutions, each from at least three candidates with
// a best time no slower than its defaults'.
func lenetRecords(t *testing.T, path string) *tune.Records {
	t.Helper()
	recs, err := tune.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs.Records) != 2 {
		t.Fatalf("records %+v", recs.Records)
	}
	for _, r := range recs.Records {
		if r.Candidates < 3 || r.Ms <= 0 || r.Ms > r.DefaultMs {
			t.Fatalf("records %+v", recs.Records)
		}
	}
	return recs
}
