package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	cgen "github.com/kiln-dev/kiln/codegen/c"

	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/tune"
)

// kiln tune MODEL -t TARGET -o records.json [--budget 10m]: compiles the
// model once to find its tunable workloads (calls whose implementation
// has a knob space, strategy.Implementation.Space), then for each one not
// yet in the records measures the defaults and every knob setting of its
// space as a one-operator model on this machine, and records the fastest
// (package tune). The records file is written after every workload, so
// an interrupted or budget-limited run resumes where it stopped. With
// --measure model a candidate is the whole model compiled with the
// setting, and its time the medians, inside the model, of the kernels the
// workload was lowered into (strategy.TuningObserver names them).

// tuneWorkload is one distinct tunable call of the model.
type tuneWorkload struct {
	key   string
	call  strategy.Call
	impl  strategy.Implementation
	count int
	// funcs are the primitive functions the workload's calls were
	// lowered into (the profile steps' Func).
	funcs map[string]bool
}

// tuneRecorder is the strategy.Tuning of the discovery compile: it notes
// every tunable call and gives it its defaults.
type tuneRecorder struct {
	target string
	seen   map[string]*tuneWorkload
	order  []*tuneWorkload
}

func (r *tuneRecorder) Knobs(c *strategy.Call, impl strategy.Implementation) strategy.Knobs {
	key := strategy.Workload(c, impl)
	if w, ok := r.seen[key]; ok {
		w.count++
		return nil
	}
	r.target = strategy.TargetKey(c.Target)
	w := &tuneWorkload{key: key, call: *c, impl: impl, count: 1, funcs: map[string]bool{}}
	r.seen[key] = w
	r.order = append(r.order, w)
	return nil
}

// Lowered implements strategy.TuningObserver: it notes the function each
// workload's calls went into.
func (r *tuneRecorder) Lowered(c *strategy.Call, impl strategy.Implementation, function string) {
	if w, ok := r.seen[strategy.Workload(c, impl)]; ok {
		w.funcs[function] = true
	}
}

// forcedKnobs is the strategy.Tuning of a candidate's compile: knobs for
// one workload, defaults for everything else.
type forcedKnobs struct {
	key   string
	knobs strategy.Knobs
}

func (f forcedKnobs) Knobs(c *strategy.Call, impl strategy.Implementation) strategy.Knobs {
	if strategy.Workload(c, impl) == f.key {
		return f.knobs
	}
	return nil
}

func runTune(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tune", "MODEL.onnx -t TARGET -o RECORDS.json [--budget 10m] [--runs N] [--threads N]", stderr)
	targets := fs.String("t", "", "the target to tune for (default \"c\")")
	out := fs.String("o", "", "the tuning records file to write; existing records in it are kept, and workloads already recorded for the target are not measured again")
	budget := fs.Duration("budget", 10*time.Minute, "stop measuring after this long (the records so far are written)")
	quiet := fs.Bool("quiet", false, "no progress on stderr (one line redrawn on a terminal, a line per workload elsewhere)")
	runs := fs.Int("runs", 20, "timed runs per candidate (after at least 2 warm-up runs and 20 ms); the median counts")
	threads := fs.Int("threads", 1, "threads the measured operators use")
	measure := fs.String("measure", "op", "how a candidate is timed: \"op\" (the workload alone, as a one-operator model) or \"model\" (the whole model compiled with the candidate; the medians of the workload's kernels inside it, between the model's other kernels)")
	var imp importOptions
	imp.register(fs)
	var devs deviceFlags
	devs.register(fs)
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 || *out == "" {
		fs.Usage()
		return exitUsage
	}
	if *runs < 1 || *threads < 1 || *budget <= 0 {
		fmt.Fprintln(stderr, "kiln tune: --runs, --threads and --budget must be positive")
		return exitUsage
	}
	if *measure != "op" && *measure != "model" {
		fmt.Fprintf(stderr, "kiln tune: --measure %q: want \"op\" or \"model\"\n", *measure)
		return exitUsage
	}
	path, err := modelPath(pos[0])
	if err != nil {
		return fail(stderr, "tune", err)
	}
	ts := targetsOrDefault(*targets)
	place, err := devs.resolve(ts)
	if err != nil {
		return fail(stderr, "tune", err)
	}
	recs := tune.New()
	if _, err := os.Stat(*out); err == nil {
		if recs, err = tune.Load(*out); err != nil {
			return fail(stderr, "tune", err)
		}
	}
	model, err := imp.load(path, nil, nil)
	if err != nil {
		return fail(stderr, "tune", err)
	}
	tmp, err := driver.TempDir("", "kiln-tune-")
	if err != nil {
		return fail(stderr, "tune", err)
	}
	defer driver.RemoveTemp(tmp)
	// An interrupt ends the process (HandleSignals removes the temporary
	// directories); the records are on disk after every workload.
	ctx := context.Background()

	// Discovery: the model's tunable workloads, in the order they run.
	rec := &tuneRecorder{seen: map[string]*tuneWorkload{}}
	if _, _, err := compileModel(model, compileOptions{Ctx: ctx, Place: place, Out: filepath.Join(tmp, "model"), ModuleName: moduleName(pos[0]), Tuning: rec}); err != nil {
		return fail(stderr, "tune", err)
	}
	var todo []*tuneWorkload
	for _, w := range rec.order {
		if _, done := recs.Lookup(w.key, rec.target); !done {
			todo = append(todo, w)
		}
	}
	fmt.Fprintf(stderr, "kiln tune: %s: %d tunable workloads, %d already recorded for this target; budget %v\n",
		pos[0], len(rec.order), len(rec.order)-len(todo), *budget)
	deadline := time.Now().Add(*budget)
	m := &tuneMeasurer{ctx: ctx, place: place, dir: tmp, runs: *runs, threads: *threads}
	if *measure == "model" {
		m.model, m.moduleName = model, moduleName(pos[0])
		// Candidates differ from each other in one workload's kernels:
		// a private object cache compiles the rest once.
		if m.objects, err = cgen.OpenCache(filepath.Join(tmp, "objects")); err != nil {
			return fail(stderr, "tune", err)
		}
	}
	prog := newProgress(stderr, "tuning "+moduleName(pos[0]), *quiet)
	defer prog.Close()
	var failed []error
	for i, w := range todo {
		if time.Now().After(deadline) {
			prog.Close()
			fmt.Fprintf(stderr, "kiln tune: budget spent: %d workloads left (run again to resume)\n", len(todo)-i)
			break
		}
		// The defaults are measured first and again last, and the lower
		// counts: a workload's first measurement was still up to 2.6x
		// slower than the same settings measured later.
		cands := append([]strategy.Knobs{nil}, w.impl.Space(&w.call)...)
		cands = append(cands, nil)
		best := tune.Record{Workload: w.key, Target: rec.target}
		for j, k := range cands {
			if j > 0 && time.Now().After(deadline) {
				break
			}
			ms, err := m.measure(w, k)
			if err != nil {
				err = fmt.Errorf("%s with knobs %q: %w", w.key, k.String(), err)
				if k == nil {
					// The defaults are what a compile without records
					// uses: if they fail, so would the model.
					return fail(stderr, "tune", err)
				}
				// A setting of the space that fails is kiln's fault, but
				// the other settings still count: go on, and say so at
				// the end.
				failed = append(failed, err)
				best.Failed++
				continue
			}
			best.Candidates++
			if k == nil && (best.DefaultMs == 0 || ms < best.DefaultMs) {
				best.DefaultMs = ms
			}
			if best.Ms == 0 || ms < best.Ms {
				best.Ms, best.Knobs = ms, k
			}
			prog.Status(fmt.Sprintf("[%d/%d] %s x%d: %d/%d candidates, best %.4f ms (defaults %.4f ms)",
				i+1, len(todo), w.call.Op.Name, w.count, j+1, len(cands), best.Ms, best.DefaultMs))
		}
		skipped := ""
		if best.Failed > 0 {
			skipped = fmt.Sprintf(", %d failed", best.Failed)
		}
		prog.Set(fmt.Sprintf("[%d/%d] %s x%d: %d candidates%s, best %.4f ms (defaults %.4f ms)",
			i+1, len(todo), w.call.Op.Name, w.count, len(cands), skipped, best.Ms, best.DefaultMs))
		if best.Knobs == nil {
			best.Knobs = strategy.Knobs{} // the defaults won: recorded, so not measured again
		}
		recs.Put(best)
		if err := recs.Save(*out); err != nil {
			return fail(stderr, "tune", err)
		}
	}
	if err := recs.Save(*out); err != nil {
		return fail(stderr, "tune", err)
	}
	prog.Close()
	for _, err := range failed {
		fmt.Fprintf(stderr, "kiln tune: warning: a candidate failed and was skipped (please report it): %s\n", oneLine(err.Error()))
		printCompilerOutput(stderr, err)
	}
	var gain, base float64
	for _, w := range rec.order {
		if r, ok := recs.Lookup(w.key, rec.target); ok && r.DefaultMs > 0 {
			gain += float64(w.count) * (r.DefaultMs - r.Ms)
			base += float64(w.count) * r.DefaultMs
		}
	}
	how := "measured one operator at a time"
	if *measure == "model" {
		how = "measured inside the model"
	}
	fmt.Fprintf(stdout, "tuned %d of %d workloads of %s for %q: %.3f ms of %.3f ms in them saved per run (%s); records in %s\n",
		countRecorded(recs, rec), len(rec.order), pos[0], place.list.String(), gain, base, how, *out)
	return exitOK
}

// countRecorded counts the model's workloads that have records.
func countRecorded(recs *tune.Records, rec *tuneRecorder) int {
	n := 0
	for _, w := range rec.order {
		if _, ok := recs.Lookup(w.key, rec.target); ok {
			n++
		}
	}
	return n
}

// tuneMeasurer compiles and times one-operator models.
// tuneWarmup is the least time a candidate runs before it is timed.
const tuneWarmup = 20 * time.Millisecond

type tuneMeasurer struct {
	ctx     context.Context
	place   *placement
	dir     string
	runs    int
	threads int
	n       int
	// model, when set, is measured whole (--measure model), its
	// candidates compiled with objects as their cache.
	model      *onnx.Model
	moduleName string
	objects    *cgen.Cache
}

// measure compiles w's call alone (every argument an input) with knobs k
// (nil: the defaults) and returns its median latency in milliseconds, or
// with a model, measureInModel's.
func (m *tuneMeasurer) measure(w *tuneWorkload, k strategy.Knobs) (float64, error) {
	if m.model != nil {
		return m.measureInModel(w, k)
	}
	c := w.call
	params := make([]*graph.Var, len(c.ArgTypes))
	args := make([]graph.Expr, len(c.ArgTypes))
	for i, t := range c.ArgTypes {
		if _, ok := t.(*ir.TensorType); !ok {
			return 0, errors.New("an argument is not a tensor")
		}
		params[i] = graph.NewVar(fmt.Sprintf("in%d", i), t)
		args[i] = params[i]
	}
	call, err := graph.NewCall(c.Op, args, c.Attrs)
	if err != nil {
		return 0, err
	}
	mod := graph.NewModule(graph.NewFunction(params, call, nil))
	art, done, err := m.candidate(func(dir string) error {
		_, err := driver.CompileContext(m.ctx, mod, []string{"out"}, driver.Config{
			Host: m.place.list.Host, Targets: m.place.list.Targets, Labels: m.place.labels,
			Out: dir, ModuleName: "tune", Tuning: forcedKnobs{key: w.key, knobs: k},
		})
		return err
	})
	if err != nil {
		return 0, err
	}
	defer done()
	times := make([]float64, 0, m.runs)
	for i := 0; i < m.runs; i++ {
		t0 := time.Now()
		if err := art.Exec.Run(); err != nil {
			return 0, err
		}
		times = append(times, float64(time.Since(t0).Nanoseconds())/1e6)
	}
	sort.Float64s(times)
	return times[len(times)/2], nil
}

// candidate compiles a candidate into a directory of its own (compile
// writes the artifact there) and loads it (load); done closes it and
// removes the directory.
func (m *tuneMeasurer) candidate(compile func(dir string) error) (art *driver.Artifact, done func(), err error) {
	m.n++
	dir := filepath.Join(m.dir, fmt.Sprintf("cand%d", m.n))
	if err := compile(dir); err != nil {
		driver.RemoveTemp(dir)
		return nil, nil, err
	}
	if art, err = m.load(dir); err != nil {
		driver.RemoveTemp(dir)
		return nil, nil, err
	}
	return art, func() { art.Close(); driver.RemoveTemp(dir) }, nil
}

// load loads a candidate's artifact, gives it random inputs and the
// measured thread count, and warms it up.
func (m *tuneMeasurer) load(dir string) (*driver.Artifact, error) {
	art, err := driver.LoadArtifact(dir)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			art.Close()
		}
	}()
	if art.Exec == nil {
		return nil, errors.New("the candidate has no graph executor")
	}
	decl, err := artifactInputs(art.Metadata)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(m.n), 0x74756e65))
	for _, d := range decl {
		if err := art.Exec.SetInput(d.Name, randomTensor(rng, d)); err != nil {
			return nil, err
		}
	}
	art.Exec.UseThreads(m.threads)
	// Warm up for at least two runs and tuneWarmup: a freshly loaded
	// candidate's first milliseconds (page faults, the core's clock
	// ramping up) made the first candidate of a workload, the defaults,
	// look up to 2.6x slower than the same settings measured later.
	for i, t0 := 0, time.Now(); i < 2 || time.Since(t0) < tuneWarmup; i++ {
		if err := art.Exec.Run(); err != nil {
			return nil, err
		}
	}
	ok = true
	return art, nil
}

// measureInModel compiles the whole model with knobs k for w (the
// defaults elsewhere), profiles m.runs runs of it and returns the sum of
// the medians of the steps that run w's kernels, in milliseconds.
func (m *tuneMeasurer) measureInModel(w *tuneWorkload, k strategy.Knobs) (float64, error) {
	if len(w.funcs) == 0 {
		return 0, errors.New("the workload's kernels are not known (no function was lowered with it)")
	}
	art, done, err := m.candidate(func(dir string) error {
		_, _, err := compileModel(m.model, compileOptions{Ctx: m.ctx, Place: m.place, Out: dir, ModuleName: m.moduleName,
			Cache: m.objects, Tuning: forcedKnobs{key: w.key, knobs: k}})
		return err
	})
	if err != nil {
		return 0, err
	}
	defer done()
	steps, err := art.Exec.Profile(m.runs)
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	found := false
	for _, st := range steps {
		if w.funcs[st.Func] {
			sum += st.Median
			found = true
		}
	}
	if !found {
		return 0, fmt.Errorf("no step of the model runs the workload's kernels %v", slices.Sorted(maps.Keys(w.funcs)))
	}
	return float64(sum.Nanoseconds()) / 1e6, nil
}
