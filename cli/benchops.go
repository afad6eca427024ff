package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/internal/opsuite"
	"github.com/kiln-dev/kiln/targets"
)

// OpsReport is what `kiln bench --ops --json` prints.
type OpsReport struct {
	Target  string `json:"target"`
	Threads int    `json:"threads"`
	Runs    int    `json:"runs"`
	// PeakGFLOPs is one core's measured float32 peak for the target's
	// instruction set (0 when it cannot run here); the peak fraction of a
	// multi-thread run divides by threads times this.
	PeakGFLOPs float64    `json:"peak_gflops"`
	Ops        []OpResult `json:"ops"`
}

// OpResult is one workload of the suite.
type OpResult struct {
	Name     string  `json:"name"`
	Kind     string  `json:"kind"`
	Shape    string  `json:"shape"`
	MedianMs float64 `json:"median_ms"`
	MinMs    float64 `json:"min_ms"`
	GFLOPs   float64 `json:"gflops,omitempty"`
	// PeakFraction is GFLOPs over the peak of the threads used.
	PeakFraction float64 `json:"peak_fraction,omitempty"`
	// GBs is the workload's data (inputs, weights, outputs, each once)
	// over the median time.
	GBs float64 `json:"gb_s"`
	// Dir is where the workload's model was saved (--save), for running
	// other engines on it.
	Dir string `json:"dir,omitempty"`
}

// benchOps runs the operator suite (package opsuite) for `kiln bench --ops`.
func benchOps(o benchOpsOptions, stdout, stderr io.Writer) int {
	place, err := o.devs.resolve(o.targets)
	if err != nil {
		return fail(stderr, "bench", err)
	}
	host := place.list.Host
	rep := OpsReport{Target: place.list.String(), Threads: o.threads, Runs: o.runs}
	rep.PeakGFLOPs = measurePeak(host, stderr)
	saveRoot := o.save
	if saveRoot == "" {
		tmp, err := driver.TempDir("", "kiln-ops-")
		if err != nil {
			return fail(stderr, "bench", err)
		}
		defer driver.RemoveTemp(tmp)
		saveRoot = tmp
	}
	cache := o.cache.open(stderr)
	if !o.asJSON {
		fmt.Fprintf(stdout, "operator suite on %q, %d threads, %d runs; peak %.1f GFLOP/s per core\n", rep.Target, o.threads, o.runs, rep.PeakGFLOPs)
		fmt.Fprintf(stdout, "%-28s %-13s %10s %9s %7s %8s\n", "workload", "kind", "median ms", "GFLOP/s", "% peak", "GB/s")
	}
	for _, w := range append(opsuite.Suite(), opsuite.Networks(224, 128)...) {
		if o.filter != "" && !strings.Contains(w.Name, o.filter) && w.Kind != o.filter {
			continue
		}
		r, err := benchWorkload(w, filepath.Join(saveRoot, w.Name), place, cache, o)
		if err != nil {
			return fail(stderr, "bench", fmt.Errorf("%s: %w", w.Name, err))
		}
		if o.save == "" {
			r.Dir = ""
		}
		if w.FLOPs > 0 && rep.PeakGFLOPs > 0 {
			r.PeakFraction = r.GFLOPs / (rep.PeakGFLOPs * float64(o.threads))
		}
		rep.Ops = append(rep.Ops, r)
		if !o.asJSON {
			gf, pk := "-", "-"
			if r.GFLOPs > 0 {
				gf = fmt.Sprintf("%.1f", r.GFLOPs)
			}
			if r.PeakFraction > 0 {
				pk = fmt.Sprintf("%.0f%%", 100*r.PeakFraction)
			}
			fmt.Fprintf(stdout, "%-28s %-13s %10.3f %9s %7s %8.1f\n", r.Name, r.Kind, r.MedianMs, gf, pk, r.GBs)
		}
	}
	if o.asJSON {
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			return fail(stderr, "bench", err)
		}
	}
	return exitOK
}

type benchOpsOptions struct {
	targets, save, filter string
	threads, runs         int
	asJSON                bool
	devs                  *deviceFlags
	cache                 *cacheFlags
}

// measurePeak is one core's peak FLOP/s (in G) for host's processor, or
// 0 with a note when it cannot be measured here (another architecture,
// no compiler).
func measurePeak(host *targets.Target, stderr io.Writer) float64 {
	p := host.Processor()
	if p.Arch != cgen.HostArch() {
		fmt.Fprintf(stderr, "kiln bench: note: the target's processor (%s) is not this machine's architecture; no peak is measured\n", p.Arch)
		return 0
	}
	bo := cgen.BuildOptionsForTarget(host)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v, err := opsuite.Peak(ctx, bo.CC, bo.CPUFlags, p.Lanes(32))
	if err != nil {
		fmt.Fprintf(stderr, "kiln bench: note: no peak measured: %v\n", err)
		return 0
	}
	return v / 1e9
}

// benchWorkload saves w in dir, compiles it for place and times it.
func benchWorkload(w *opsuite.Workload, dir string, place *placement, cache *cgen.Cache, o benchOpsOptions) (OpResult, error) {
	r := OpResult{Name: w.Name, Kind: w.Kind, Shape: w.Shape, Dir: dir}
	if err := w.Save(dir); err != nil {
		return r, err
	}
	var imp importOptions
	model, err := imp.load(filepath.Join(dir, "model.onnx"), nil, nil)
	if err != nil {
		return r, err
	}
	art := filepath.Join(dir, "kiln")
	if _, _, err := compileModel(model, compileOptions{Place: place, Out: art, ModuleName: w.Name, Cache: cache}); err != nil {
		return r, err
	}
	a, err := driver.LoadArtifact(art)
	if err != nil {
		return r, err
	}
	defer a.Close()
	a.Exec.UseThreads(o.threads)
	if err := a.Exec.SetInput("x", w.Input); err != nil {
		return r, err
	}
	// Warm up, then time each run on its own (as the ONNX Runtime harness
	// does: per-call overhead counts on both sides).
	for range benchWarmup {
		if err := a.Exec.Run(); err != nil {
			return r, err
		}
	}
	times := make([]float64, 0, o.runs)
	for range o.runs {
		t0 := time.Now()
		if err := a.Exec.Run(); err != nil {
			return r, err
		}
		times = append(times, float64(time.Since(t0).Nanoseconds())/1e6)
	}
	r.MedianMs, r.MinMs, _, _, _ = latencyStats(times)
	if w.FLOPs > 0 {
		r.GFLOPs = float64(w.FLOPs) / (r.MedianMs * 1e6)
	}
	r.GBs = float64(w.Bytes) / (r.MedianMs * 1e6)
	return r, nil
}
