package cli

import (
	"context"
	"errors"
	"fmt"
	cgen "github.com/kiln-dev/kiln/codegen/c"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/passconfig"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

// Test outcomes.
const (
	statusPass = "PASS"
	statusFail = "FAIL"
	statusSkip = "SKIP"
)

// TestConfig configures a conformance run.
type TestConfig struct {
	RTol, ATol float64
	Jobs       int
	Timeout    time.Duration
	// Targets, when set, selects the compiled engine: each test is
	// compiled for them into a temporary directory and run from the
	// artifact. Nil runs the reference interpreter.
	Targets *targets.TargetList
	// Passes configures the compiled engine's passes (nil: the default).
	Passes *passconfig.Config
	// Executor is the compiled engine's executor: "graph" (default) or
	// "aot" (the AOT C project's program, built with cc).
	Executor string
	// Tuning gives the compiled engine's tunable operators their recorded
	// knobs (nil: defaults).
	Tuning strategy.Tuning
	// Cache keeps the compiled engine's C objects across tests (nil:
	// none): every test's library shares the thread pool's translation
	// unit.
	Cache *cgen.Cache
	// temps tracks the compiled engine's temporary directories (may be nil).
	temps *tempDirs
}

// TestResult is the outcome of one ONNX backend test.
type TestResult struct {
	Dir    string // the test directory
	Status string // PASS, FAIL or SKIP
	Reason string // why it failed or was skipped
	// Stage durations (load = import, compile = build and artifact load
	// (compiled engine), run = execution, compare = reading expected
	// outputs and comparing), summed over data sets.
	Load, Compile, Run, Compare time.Duration
	Total                       time.Duration
}

// Line prints the result as `STATUS name[ reason]`.
func (r *TestResult) Line() string {
	s := r.Status + " " + filepath.Base(r.Dir)
	if r.Reason != "" {
		s += " " + r.Reason
	}
	return s
}

func runTestONNX(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("test-onnx", "[-t \"TARGETS\"] [--engine ref|compiled] [--executor graph|aot] DIR...", stderr)
	tgts := fs.String("t", "", "comma-separated target strings (used by --engine compiled)")
	engine := fs.String("engine", "ref", "engine: ref (the reference interpreter) or compiled")
	executor := fs.String("executor", "graph", "executor for --engine compiled: graph or aot")
	cfg := TestConfig{}
	fs.Float64Var(&cfg.RTol, "rtol", 1e-3, "relative tolerance")
	fs.Float64Var(&cfg.ATol, "atol", 1e-5, "absolute tolerance")
	fs.IntVar(&cfg.Jobs, "j", runtime.GOMAXPROCS(0), "tests run in parallel")
	fs.DurationVar(&cfg.Timeout, "timeout", 60*time.Second, "per-test time limit")
	verbose := fs.Bool("v", false, "print per-stage timings on each line")
	var passes passFlags
	passes.register(fs)
	var tuning tuningFlag
	tuning.register(fs)
	var cache cacheFlags
	cache.register(fs)
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		fs.Usage()
		return exitUsage
	}
	tun, err := tuning.load()
	if err != nil {
		return fail(stderr, "test-onnx", err)
	}
	cfg.Tuning = tun
	pc, err := passes.resolve()
	if err != nil {
		fmt.Fprintf(stderr, "kiln test-onnx: %v\n", err)
		return exitUsage
	}
	cfg.Passes = pc
	switch *engine {
	case "ref":
		if *tgts != "" || *executor != "graph" {
			fmt.Fprintln(stderr, "kiln test-onnx: note: -t and --executor are ignored by the reference engine")
		}
	case "compiled":
		switch *executor {
		case "graph", "aot":
			cfg.Executor = *executor
		default:
			fmt.Fprintf(stderr, "kiln test-onnx: --executor %q: want graph or aot\n", *executor)
			return exitUsage
		}
		ts := targetsOrDefault(*tgts)
		tl, err := parseTargetList(ts)
		if err != nil {
			return fail(stderr, "test-onnx", err)
		}
		cfg.Targets = tl
		cfg.temps = &tempDirs{}
		cfg.Cache = cache.open(stderr)
	default:
		fmt.Fprintf(stderr, "kiln test-onnx: --engine %q: want ref or compiled\n", *engine)
		return exitUsage
	}
	if cfg.Jobs < 1 {
		cfg.Jobs = 1
	}
	dirs, err := ExpandTestDirs(pos)
	if err != nil {
		fmt.Fprintf(stderr, "kiln test-onnx: %v\n", err)
		return exitUsage
	}
	var passed, failed, skipped int
	var all []*TestResult
	RunTests(dirs, cfg, func(r *TestResult) {
		line := r.Line()
		if *verbose {
			if cfg.Targets != nil {
				line += fmt.Sprintf("  [load %s, compile %s, run %s, compare %s]", roundDur(r.Load), roundDur(r.Compile), roundDur(r.Run), roundDur(r.Compare))
			} else {
				line += fmt.Sprintf("  [load %s, run %s, compare %s]", roundDur(r.Load), roundDur(r.Run), roundDur(r.Compare))
			}
		}
		fmt.Fprintln(stdout, line)
		switch r.Status {
		case statusPass:
			passed++
		case statusFail:
			failed++
		default:
			skipped++
		}
		all = append(all, r)
	})
	cfg.temps.removeAll() // those of tests abandoned at their time limit
	summary := fmt.Sprintf("%d passed, %d failed", passed, failed)
	if skipped > 0 {
		summary += fmt.Sprintf(", %d skipped", skipped)
	}
	fmt.Fprintln(stdout, summary)
	sort.SliceStable(all, func(i, j int) bool { return all[i].Total > all[j].Total })
	if len(all) > 1 {
		fmt.Fprintln(stderr, "slowest tests:")
		for _, r := range all[:min(5, len(all))] {
			fmt.Fprintf(stderr, "  %-10s %s\n", roundDur(r.Total), filepath.Base(r.Dir))
		}
	}
	if failed > 0 {
		return exitFail
	}
	return exitOK
}

// ExpandTestDirs turns arguments into test directories: a directory with a
// model.onnx is a test; any other directory contributes its subdirectories
// that hold a model.onnx, sorted by name. Argument order is kept.
func ExpandTestDirs(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("%s is not a directory", a)
		}
		if isFile(filepath.Join(a, "model.onnx")) {
			out = append(out, a)
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, e := range ents { // ReadDir sorts by name
			d := filepath.Join(a, e.Name())
			if e.IsDir() && isFile(filepath.Join(d, "model.onnx")) {
				out = append(out, d)
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("%s holds no test directories (none has a model.onnx)", a)
		}
	}
	return out, nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// RunTests runs the tests with cfg.Jobs workers and calls report for each
// result in the order of dirs, as soon as it and all before it are done.
func RunTests(dirs []string, cfg TestConfig, report func(*TestResult)) {
	results := make([]*TestResult, len(dirs))
	done := make([]chan struct{}, len(dirs))
	for i := range done {
		done[i] = make(chan struct{})
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < cfg.Jobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				results[i] = runWithLimit(dirs[i], cfg)
				close(done[i])
			}
		}()
	}
	go func() {
		for i := range dirs {
			work <- i
		}
		close(work)
	}()
	for i := range dirs {
		<-done[i]
		report(results[i])
	}
	wg.Wait()
}

// runWithLimit runs one test in its own goroutine, turning a panic into a
// FAIL with the panic's first stack frame. At cfg.Timeout it cancels the
// test's context — the compile stops between stages and kills the C
// compiler, the engines stop before their next node — and waits up to
// timeoutGrace for the test to clean up; a test still running then (one
// kernel that does not return) is abandoned, and test-onnx removes its
// temporary files at exit.
func runWithLimit(dir string, cfg TestConfig) *TestResult {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	ch := make(chan *TestResult, 1)
	go func() {
		r := &TestResult{Dir: dir}
		defer func() {
			if p := recover(); p != nil {
				r.Status, r.Reason = statusFail, "panic: "+oneLine(fmt.Sprint(p))+panicSite()
			}
			ch <- r
		}()
		runTest(ctx, r, cfg)
	}()
	timedOut := func(extra string) *TestResult {
		return &TestResult{Dir: dir, Status: statusFail, Reason: "timeout (" + cfg.Timeout.String() + extra + ")", Total: time.Since(start)}
	}
	select {
	case r := <-ch:
		if ctx.Err() != nil && r.Status != statusPass {
			return timedOut("")
		}
		r.Total = time.Since(start)
		return r
	case <-ctx.Done():
	}
	grace := time.NewTimer(timeoutGrace)
	defer grace.Stop()
	select {
	case <-ch:
		return timedOut("")
	case <-grace.C:
		return timedOut(fmt.Sprintf("; still running %v later, abandoned", timeoutGrace))
	}
}

// timeoutGrace is how long a timed-out test may take to stop.
const timeoutGrace = 10 * time.Second

// panicSite names the function and line that panicked, from within the
// deferred recover: the first frame outside the runtime.
func panicSite() string {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	inPanic := false
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, "runtime.") {
			inPanic = true
		} else if inPanic {
			return fmt.Sprintf(" (at %s %s:%d)", f.Function, filepath.Base(f.File), f.Line)
		}
		if !more {
			return ""
		}
	}
}

// dataSet is one test_data_set_N directory's files.
type dataSet struct {
	dir     string
	inputs  []string
	outputs []string
}

// numbered lists dir/prefixN(.ext) entries ordered by N.
func numbered(dir, prefix, ext string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type item struct {
		n    int
		path string
	}
	var items []item
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, ext) {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, prefix), ext))
		if err != nil {
			continue
		}
		items = append(items, item{n, filepath.Join(dir, name)})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].n < items[j].n })
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.path
	}
	return out, nil
}

func dataSets(dir string) ([]dataSet, error) {
	sets, err := numbered(dir, "test_data_set_", "")
	if err != nil {
		return nil, err
	}
	var out []dataSet
	for _, s := range sets {
		ins, err := numbered(s, "input_", ".pb")
		if err != nil {
			return nil, err
		}
		outs, err := numbered(s, "output_", ".pb")
		if err != nil {
			return nil, err
		}
		out = append(out, dataSet{dir: s, inputs: ins, outputs: outs})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no test_data_set_N directories")
	}
	return out, nil
}

// bindInputs maps a data set's input files to graph inputs: a file whose
// TensorProto names a graph input binds to it, others bind in order to the
// declared inputs not yet bound.
func bindInputs(files []string, decl []DeclaredInput) (map[string]*tensor.Tensor, error) {
	vals := map[string]*tensor.Tensor{}
	isInput := map[string]bool{}
	for _, d := range decl {
		isInput[d.Name] = true
	}
	var unnamed []*tensor.Tensor
	var unnamedFiles []string
	for _, f := range files {
		t, name, err := onnx.ReadTensorFile(f)
		if err != nil {
			return nil, err
		}
		if isInput[name] && vals[name] == nil {
			vals[name] = t
			continue
		}
		unnamed = append(unnamed, t)
		unnamedFiles = append(unnamedFiles, filepath.Base(f))
	}
	k := 0
	for _, d := range decl {
		if k == len(unnamed) {
			break
		}
		if vals[d.Name] == nil {
			vals[d.Name] = unnamed[k]
			k++
		}
	}
	if k < len(unnamed) {
		return nil, fmt.Errorf("%s: more input files than model inputs (%d)", strings.Join(unnamedFiles[k:], ", "), len(decl))
	}
	for _, d := range decl {
		if t := vals[d.Name]; t != nil {
			vals[d.Name] = asBFloat16(t, d.DType)
		}
	}
	return vals, nil
}

// asBFloat16 reinterprets a uint16 tensor as bfloat16 when bfloat16 is
// wanted: the ONNX backend tests (generated with NumPy, which has no
// bfloat16) store bfloat16 test data as uint16 tensors holding the bits.
func asBFloat16(t *tensor.Tensor, want ir.DType) *tensor.Tensor {
	if want == ir.BFloat16 && t.DType == ir.Uint16 {
		return &tensor.Tensor{DType: ir.BFloat16, Shape: t.Shape, Data: t.Data}
	}
	return t
}

// runTest loads, runs and checks one test directory, filling r; it stops
// early once ctx is done.
func runTest(ctx context.Context, r *TestResult, cfg TestConfig) {
	// Messages name files relative to the test directory.
	short := func(msg string) string {
		return oneLine(strings.ReplaceAll(msg, r.Dir+string(filepath.Separator), ""))
	}
	failf := func(format string, args ...any) {
		r.Status, r.Reason = statusFail, short(fmt.Sprintf(format, args...))
	}
	// classify makes errors about value types kiln does not support
	// (sequences, strings, training ops...) a SKIP and the rest a FAIL.
	classify := func(prefix string, err error) {
		if errors.Is(err, onnx.ErrUnsupportedType) {
			r.Status, r.Reason = statusSkip, short(prefix+err.Error())
			return
		}
		failf("%s%v", prefix, err)
	}
	modelFile := filepath.Join(r.Dir, "model.onnx")
	decl, err := ModelInputs(modelFile)
	if err != nil {
		classify("", err)
		return
	}
	sets, err := dataSets(r.Dir)
	if err != nil {
		failf("%v", err)
		return
	}
	var model *onnx.Model
	var loadedWith map[string]*tensor.Tensor
	var eng engine = refEngine{}
	if cfg.Targets != nil {
		ce := &compiledEngine{cfg: cfg}
		defer ce.close()
		eng = ce
	}
	for _, ds := range sets {
		setName := filepath.Base(ds.dir)
		prefix := ""
		if len(sets) > 1 {
			prefix = setName + ": "
		}
		vals, err := bindInputs(ds.inputs, decl)
		if err != nil {
			classify(prefix, err)
			return
		}
		if model == nil || needsReload(model, loadedWith, vals) {
			t0 := time.Now()
			model, err = loadWithInputs(modelFile, vals, nil, cfg.Passes)
			r.Load += time.Since(t0)
			if err != nil {
				classify("", err)
				return
			}
			loadedWith = vals
			t1 := time.Now()
			err = eng.prepare(ctx, model)
			r.Compile += time.Since(t1)
			if err != nil {
				failf("compile: %v", err)
				return
			}
		}
		argv := make([]*tensor.Tensor, len(model.Inputs))
		for i, in := range model.Inputs {
			if argv[i] = vals[in.Name]; argv[i] == nil {
				failf("%sno data for input %q", prefix, in.Name)
				return
			}
		}
		t1 := time.Now()
		outs, err := eng.run(ctx, model, argv)
		r.Run += time.Since(t1)
		if err != nil {
			classify(prefix, err)
			return
		}
		t2 := time.Now()
		err = checkOutputs(model, outs, ds.outputs, cfg)
		r.Compare += time.Since(t2)
		if err != nil {
			classify(prefix, err)
			return
		}
	}
	r.Status = statusPass
}

// needsReload reports whether a data set's inputs differ from those the
// model was imported with in a way import depends on: an input's type
// (shapes are fixed at import) or a frozen input's value.
func needsReload(m *onnx.Model, loadedWith, vals map[string]*tensor.Tensor) bool {
	for _, in := range m.Inputs {
		if v := vals[in.Name]; v != nil && !v.Type().Shape.Equal(in.Type.Shape) {
			return true
		}
	}
	for _, n := range m.Frozen {
		if a, b := loadedWith[n], vals[n]; b != nil && (a == nil || !a.Equal(b)) {
			return true
		}
	}
	return false
}

// checkOutputs compares results with the expected output files: by name
// when the file's TensorProto names a model output, else by position.
func checkOutputs(m *onnx.Model, got []*tensor.Tensor, files []string, cfg TestConfig) error {
	if len(got) != len(m.Outputs) {
		return fmt.Errorf("the model produced %d tensors for %d outputs", len(got), len(m.Outputs))
	}
	if len(files) == 0 {
		return fmt.Errorf("no output_N.pb files")
	}
	if len(files) > len(got) {
		return fmt.Errorf("the test expects %d outputs, the model has %d", len(files), len(got))
	}
	index := map[string]int{}
	for i, o := range m.Outputs {
		index[o.Name] = i
	}
	for k, f := range files {
		want, name, err := onnx.ReadTensorFile(f)
		if err != nil {
			return err
		}
		i, ok := index[name]
		if !ok {
			i = k
		}
		want = asBFloat16(want, got[i].DType)
		if err := tensor.AllClose(got[i], want, cfg.RTol, cfg.ATol); err != nil {
			return fmt.Errorf("output %d (%s): %v", i, m.Outputs[i].Name, err)
		}
	}
	return nil
}
