package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// benchWarmup is the number of untimed runs before the timed ones.
const benchWarmup = 3

// BenchReport is what `kiln bench --json` prints.
type BenchReport struct {
	Model    string  `json:"model"`
	Target   string  `json:"target"`
	Threads  int     `json:"threads"`
	Runs     int     `json:"runs"`
	Warmup   int     `json:"warmup"`
	MedianMs float64 `json:"median_ms"`
	MinMs    float64 `json:"min_ms"`
	MeanMs   float64 `json:"mean_ms"`
	P90Ms    float64 `json:"p90_ms"`
	MaxMs    float64 `json:"max_ms"`
	// CompileS is the compile time in seconds (0 for a prebuilt artifact).
	CompileS float64 `json:"compile_s"`
	Kernels  int     `json:"kernels"`
	// Inputs is "random" (seeded) or "files".
	Inputs string `json:"inputs"`
	// Profile is the per-kernel time of --profile runs, slowest first.
	Profile []KernelTime `json:"profile,omitempty"`
}

// KernelTime is one step of a --profile run: the mean time per run of a
// kernel call (or device copy) and its share of the total, with the model
// nodes it computes and, for an external region, its own steps (each a
// oneDNN kernel, its layout reorders included), slowest first.
type KernelTime struct {
	Node    string   `json:"node"`
	Func    string   `json:"func,omitempty"`
	Sources []string `json:"sources,omitempty"`
	// MedianMs is the median of the kernel's per-run times (0 for the
	// steps inside an external region, timed only summed), MeanMs the
	// mean; Share is its part of the profiled time (the sum over runs).
	MedianMs float64      `json:"median_ms,omitempty"`
	MeanMs   float64      `json:"mean_ms"`
	Share    float64      `json:"share"`
	Inner    []KernelTime `json:"inner,omitempty"`
	// Device and Cores say where the kernel ran, when not on cpu:0
	// unpinned: its device, and the cores of its pinned thread
	// (--devices).
	Device string `json:"device,omitempty"`
	Cores  string `json:"cores,omitempty"`
}

func runBench(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bench", "MODEL.onnx|OUT [-t \"TARGETS\"] [--threads N] [--runs N] [--profile N] [--json] | --ops [--save DIR] [--filter S]", stderr)
	targets := fs.String("t", "", "comma-separated target strings, host last (default \"c\"; for a model file)")
	threads := fs.Int("threads", 1, "threads the compiled operators use")
	runs := fs.Int("runs", 20, "timed runs (after 3 warm-up runs)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	profile := fs.Int("profile", 0, "after the timed runs, time every kernel call (and every kernel inside external regions) over the same number of runs and list the N slowest with the model nodes each computes (0: no profile)")
	traceFile := fs.String("trace", "", "after the timed runs, write a Chrome trace (JSON; opens in Perfetto or chrome://tracing) of 3 more runs to `FILE`, every kernel call and every kernel inside external regions")
	seed := fs.Uint64("seed", 1, "seed of the random inputs")
	var cores coresFlag
	cores.register(fs)
	var passes passFlags
	passes.register(fs)
	var cache cacheFlags
	cache.register(fs)
	var tuning tuningFlag
	tuning.register(fs)
	var inputs listFlag
	fs.Var(&inputs, "input", "an input: NAME=FILE or FILE (.npy, .pb or .npz; a bare FILE.npz binds each array by name; default: random values; repeatable)")
	var imp importOptions
	imp.register(fs)
	var devs deviceFlags
	devs.register(fs)
	var part partitionFlags
	part.register(fs)
	ops := fs.Bool("ops", false, "run the operator micro-benchmark suite (single conv, depthwise, grouped, 1x1, max and global pooling, dense, batched matmul, transpose, shuffle, split/concat, softmax, layernorm, GELU workloads) instead of a model, with GFLOP/s and the fraction of the measured peak")
	save := fs.String("save", "", "with --ops: keep each workload's model in `DIR`/NAME (model.onnx, test_data_set_0/input_0.pb) for other engines")
	filter := fs.String("filter", "", "with --ops: only workloads whose name contains this string or whose kind equals it")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if *runs < 1 || *threads < 1 {
		fmt.Fprintln(stderr, "kiln bench: --runs and --threads must be at least 1")
		return exitUsage
	}
	if err := part.check(); err != nil {
		fmt.Fprintf(stderr, "kiln bench: %v\n", err)
		return exitUsage
	}
	if *ops {
		if len(pos) != 0 || len(inputs) > 0 {
			fmt.Fprintln(stderr, "kiln bench: --ops takes no model and no --input (it runs its own workloads)")
			return exitUsage
		}
		ts := targetsOrDefault(*targets)
		return benchOps(benchOpsOptions{targets: ts, save: *save, filter: *filter, threads: *threads, runs: *runs, asJSON: *asJSON, devs: &devs, cache: &cache}, stdout, stderr)
	}
	if *save != "" || *filter != "" {
		fmt.Fprintln(stderr, "kiln bench: --save and --filter are for --ops")
		return exitUsage
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	pc, err := passes.resolve()
	if err != nil {
		fmt.Fprintf(stderr, "kiln bench: %v\n", err)
		return exitUsage
	}
	if *threads > 1 && !*asJSON && os.Getenv("OMP_WAIT_POLICY") == "" {
		fmt.Fprintln(stderr, "kiln bench: note: OMP_WAIT_POLICY is not set: the workers of kiln's thread pool sleep after 2 ms without work (OpenMP's, which run the kernels of a model with dnnl regions, sooner), and multi-thread timings vary from run to run; OMP_WAIT_POLICY=active keeps them spinning, as ONNX Runtime's thread pool does (scripts/bench.sh sets it)")
	}
	if *threads > 1 && !*asJSON && os.Getenv("OMP_PROC_BIND") == "" {
		fmt.Fprintln(stderr, "kiln bench: note: OMP_PROC_BIND is not set: OpenMP's threads (a model with dnnl regions runs its kernels on them) may move between cores; OMP_PROC_BIND=true keeps one OpenMP thread per core, a few per cent faster here (scripts/bench.sh sets it)")
	}
	rep := BenchReport{Model: pos[0], Threads: *threads, Runs: *runs, Warmup: benchWarmup, Inputs: "random"}
	dir := pos[0]
	var given map[string]*tensor.Tensor
	if isArtifact(dir) {
		if *targets != "" {
			fmt.Fprintln(stderr, "kiln bench: note: -t is ignored for a compiled artifact")
		}
	} else {
		path, err := modelPath(pos[0])
		if err == errArtifact {
			return fail(stderr, "bench", fmt.Errorf("%s is neither an .onnx model nor a compiled artifact (a directory with metadata.json)", pos[0]))
		}
		if err != nil {
			return fail(stderr, "bench", err)
		}
		ts := targetsOrDefault(*targets)
		place, err := devs.resolve(ts)
		if err != nil {
			return fail(stderr, "bench", err)
		}
		if len(inputs) > 0 {
			decl, err := ModelInputs(path)
			if err != nil {
				return fail(stderr, "bench", err)
			}
			if given, err = readInputs(inputs, decl); err != nil {
				return fail(stderr, "bench", err)
			}
		}
		tmp, err := driver.TempDir("", "kiln-bench-")
		if err != nil {
			return fail(stderr, "bench", err)
		}
		defer driver.RemoveTemp(tmp)
		dir = filepath.Join(tmp, "artifact")
		var progress io.Writer
		if !*asJSON {
			fmt.Fprintf(stderr, "compiling %s for %q ...\n", pos[0], place.list.String())
			progress = stderr
		}
		recs, err := tuning.load()
		if err != nil {
			return fail(stderr, "bench", err)
		}
		t0 := time.Now()
		model, err := imp.load(path, given, pc)
		if err != nil {
			return fail(stderr, "bench", err)
		}
		if progress != nil {
			fmt.Fprintf(progress, "  %-22s %v\n", "import", time.Since(t0).Round(time.Microsecond))
		}
		if _, _, err := compileModel(model, compileOptions{Place: place, Out: dir, Passes: pc, Progress: progress, ModuleName: moduleName(pos[0]), Cache: cache.open(stderr), Tuning: recs, Partition: part.forThreads(*threads), Log: progress, Warn: stderr}); err != nil {
			return fail(stderr, "bench", err)
		}
		rep.CompileS = time.Since(t0).Seconds()
	}
	art, err := driver.LoadArtifact(dir)
	if err != nil {
		return fail(stderr, "bench", err)
	}
	defer art.Close()
	if art.Exec == nil {
		return fail(stderr, "bench", fmt.Errorf("%s is an AOT artifact: kiln bench measures the graph executor; time the project's program (make && ./kiln_MODEL ...) instead", dir))
	}
	rep.Target, rep.Kernels = art.Metadata.Target, art.Metadata.Kernels
	decl, err := artifactInputs(art.Metadata)
	if err != nil {
		return fail(stderr, "bench", err)
	}
	if given == nil && len(inputs) > 0 {
		if given, err = readInputs(inputs, decl); err != nil {
			return fail(stderr, "bench", err)
		}
	}
	if given != nil {
		rep.Inputs = "files"
	} else {
		rng := rand.New(rand.NewPCG(*seed, 0x6b696c6e))
		given = map[string]*tensor.Tensor{}
		for _, d := range decl {
			given[d.Name] = randomTensor(rng, d)
		}
	}
	if err := cores.apply(art); err != nil {
		return fail(stderr, "bench", err)
	}
	if n := art.Exec.UseThreads(*threads); n == 0 && *threads > 1 {
		fmt.Fprintf(stderr, "kiln bench: note: the library has no thread control; --threads %d has no effect\n", *threads)
	}
	for _, d := range decl {
		if err := art.Exec.SetInput(d.Name, given[d.Name]); err != nil {
			return fail(stderr, "bench", err)
		}
	}
	times := make([]float64, 0, *runs)
	for i := 0; i < benchWarmup+*runs; i++ {
		t0 := time.Now()
		if err := art.Exec.Run(); err != nil {
			return fail(stderr, "bench", err)
		}
		if i >= benchWarmup {
			times = append(times, float64(time.Since(t0).Nanoseconds())/1e6)
		}
	}
	rep.MedianMs, rep.MinMs, rep.MeanMs, rep.P90Ms, rep.MaxMs = latencyStats(times)
	if *profile < 0 {
		fmt.Fprintf(stderr, "kiln bench: --profile %d: want a count of kernels (0: no profile)\n", *profile)
		return exitUsage
	}
	if *profile > 0 {
		steps, err := art.Exec.Profile(*runs)
		if err != nil {
			return fail(stderr, "bench", err)
		}
		rep.Profile = kernelTimes(steps, *runs, *profile)
	}
	if *traceFile != "" {
		evs, err := art.Exec.Trace(traceRuns)
		if err != nil {
			return fail(stderr, "bench", err)
		}
		if err := writeTrace(*traceFile, evs); err != nil {
			return fail(stderr, "bench", err)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(rep); err != nil {
			return fail(stderr, "bench", err)
		}
		return exitOK
	}
	fmt.Fprintf(stdout, "%s on %q, %d threads, %d runs (%s inputs): median %.3f ms, min %.3f ms, mean %.3f ms, p90 %.3f ms\n",
		pos[0], rep.Target, rep.Threads, rep.Runs, rep.Inputs, rep.MedianMs, rep.MinMs, rep.MeanMs, rep.P90Ms)
	if rep.CompileS > 0 {
		fmt.Fprintf(stdout, "compile: %.2f s, %d kernels\n", rep.CompileS, rep.Kernels)
	}
	if len(rep.Profile) > 0 {
		fmt.Fprintf(stdout, "slowest kernels (share of the time, median and mean per run over %d profiled runs):\n", rep.Runs)
		printKernelTimes(stdout, rep.Profile, *profile)
	}
	if *traceFile != "" {
		fmt.Fprintf(stdout, "trace of %d runs: %s\n", traceRuns, *traceFile)
	}
	return exitOK
}

// latencyStats returns median, min, mean, 90th percentile (nearest rank)
// and max of the times (at least one).
func latencyStats(ms []float64) (median, lo, mean, p90, hi float64) {
	s := append([]float64{}, ms...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		median = s[n/2]
	} else {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	for _, v := range s {
		mean += v
	}
	mean /= float64(n)
	rank := int(math.Ceil(0.9*float64(n))) - 1
	return median, s[0], mean, s[max(rank, 0)], s[n-1]
}

// randomTensor makes a value for an input (driver.RandomInput: floats
// uniform in [-1, 1), integers in [0, 2), small enough to be valid
// indices).
func randomTensor(rng *rand.Rand, d DeclaredInput) *tensor.Tensor {
	return driver.RandomInput(rng, d.DType, ir.Shape(d.Dims))
}
