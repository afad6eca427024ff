package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/transform"
	"github.com/kiln-dev/kiln/internal/escape"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/partition"
	"github.com/kiln-dev/kiln/passconfig"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tune"
)

// compileOptions are the build options the commands share.
type compileOptions struct {
	// Ctx stops the compile when done (nil: never).
	Ctx context.Context
	// Place is where the model runs: targets, labels, placement rules.
	Place *placement
	Out   string
	// Source is the model file's name and hash, recorded in the
	// artifact's metadata (nil: not recorded).
	Source *driver.SourceMeta
	// Passes is the pass configuration (nil: the default).
	Passes *passconfig.Config
	// LinkParams puts the weights inside kiln_lib.so instead of params.bin.
	LinkParams bool
	Progress   io.Writer // one line per finished stage, or nil
	Dump       io.Writer // graph IR after every pass, or nil
	// RequireOffload fails the compile when partitioning leaves calls on
	// the host.
	RequireOffload bool
	// Report receives the partition report, or is nil.
	Report *partition.Report
	// ModuleName names the model in partitioned functions' symbols
	// (kiln_<module>_<compiler>_main_<n>); see moduleName.
	ModuleName string
	// Executor is driver.ExecutorGraph (default) or driver.ExecutorAOT.
	Executor string
	// AOT configures the AOT executor.
	AOT driver.AOTOptions
	// Verify, DumpDir and DumpAfter are driver.Config's.
	Verify             bool
	DumpDir, DumpAfter string
	// Cache keeps compiled objects across compiles (nil: none).
	Cache *cgen.Cache
	// Tuning gives tunable operators their knobs (nil: defaults).
	Tuning strategy.Tuning
	// Partition chooses greedy or measured partitioning (nil: greedy).
	Partition *partitionFlags
	// Log receives measured partitioning's lines (nil: none).
	Log io.Writer
	// Warn receives the partition report's warnings (nil: none).
	Warn io.Writer
}

// tuningFlag is --tuning FILE (kiln tune's records), shared by compile
// and bench.
type tuningFlag struct{ path *string }

func (t *tuningFlag) register(fs *flag.FlagSet) {
	t.path = fs.String("tuning", "", "tuning records from kiln tune (`FILE`): tunable operators use the knobs recorded for their workload on this target")
}

// load reads the records (nil without --tuning: an untyped nil, so that
// the driver sees no tuning at all).
func (t *tuningFlag) load() (strategy.Tuning, error) {
	if t.path == nil || *t.path == "" {
		return nil, nil
	}
	recs, err := tune.Load(*t.path)
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// moduleName is the module name of the model given as arg on the command
// line: the directory's or file's base name without ".onnx" (for
// DIR/model.onnx, DIR's name).
func moduleName(arg string) string {
	clean := filepath.Clean(arg)
	if strings.EqualFold(filepath.Base(clean), "model.onnx") {
		clean = filepath.Dir(clean)
	}
	return strings.TrimSuffix(defaultArtifactName(clean), ".kiln")
}

// compileModel compiles an imported model into the artifact directory
// opts.Out and returns the build result and the wall time it took.
func compileModel(m *onnx.Model, opts compileOptions) (*driver.Result, time.Duration, error) {
	names := make([]string, len(m.Outputs))
	for i, o := range m.Outputs {
		names[i] = o.Name
	}
	// driver.Compile needs an absolute path: the C compiler runs in the
	// build directory, where a relative path would not resolve.
	out, err := filepath.Abs(opts.Out)
	if err != nil {
		return nil, 0, err
	}
	ctx := opts.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	t0 := time.Now()
	cfg := driver.Config{
		Host:           opts.Place.list.Host,
		Targets:        opts.Place.list.Targets,
		Labels:         opts.Place.labels,
		Placement:      opts.Place.rules,
		Out:            out,
		PassConfig:     opts.Passes,
		LinkParams:     opts.LinkParams,
		DumpGraph:      opts.Dump,
		Progress:       opts.Progress,
		RequireOffload: opts.RequireOffload,
		Report:         opts.Report,
		ModuleName:     opts.ModuleName,
		Executor:       opts.Executor,
		AOT:            opts.AOT,
		Verify:         opts.Verify,
		DumpDir:        opts.DumpDir,
		DumpAfter:      opts.DumpAfter,
		Cache:          opts.Cache,
		Source:         opts.Source,
		Tuning:         opts.Tuning,
	}
	if cfg.Report == nil && driver.HasExternal(cfg.Targets) {
		// The measurement and the warnings land in the report: keep one
		// to print them.
		cfg.Report = &partition.Report{}
	}
	var res *driver.Result
	if mo, ok := opts.Partition.measure(opts.Place, opts.RequireOffload); ok {
		if opts.Cache != nil {
			mo.CacheDir = opts.Cache.Dir()
		}
		mo.Log = opts.Log
		res, err = driver.CompileMeasured(ctx, m.Module, names, cfg, mo)
		if err == nil && opts.Report == nil && opts.Log != nil && cfg.Report.Measured != nil {
			fmt.Fprintln(opts.Log, cfg.Report.Measured.Summary())
		}
	} else {
		res, err = driver.CompileContext(ctx, m.Module, names, cfg)
	}
	if err == nil && opts.Warn != nil && cfg.Report != nil {
		writeWarnings(opts.Warn, cfg.Report)
	}
	return res, time.Since(t0), err
}

// writeWarnings writes the partition report's warnings to w, one
// "kiln: warning:" line each.
func writeWarnings(w io.Writer, rep *partition.Report) {
	for _, s := range rep.Warnings {
		fmt.Fprintf(w, "kiln: warning: %s\n", escape.Printable(s))
	}
}

// importOptions holds the import flags compile and bench share with
// inspect: --freeze NAME=FILE and --input-shape NAME=D1,D2,...
type importOptions struct {
	shapes, freezes listFlag
}

func (o *importOptions) register(fs *flag.FlagSet) {
	fs.Var(&o.shapes, "input-shape", "NAME=D1,D2,... fixes an input's shape (repeatable)")
	fs.Var(&o.freezes, "freeze", "NAME=FILE gives an input's value for compile-time use (repeatable)")
}

// load imports the model at path with the --freeze values and
// --input-shape shapes; extra holds further input values (bench's --input)
// that fix shapes and may be frozen too.
func (o *importOptions) load(path string, extra map[string]*tensor.Tensor, pc *passconfig.Config) (*onnx.Model, error) {
	shapeMap, err := parseShapes(o.shapes)
	if err != nil {
		return nil, err
	}
	fz, err := parseAssignments("freeze", o.freezes)
	if err != nil {
		return nil, err
	}
	vals := map[string]*tensor.Tensor{}
	for _, n := range sortedKeys(fz) {
		t, _, err := ReadTensor(fz[n])
		if err != nil {
			return nil, err
		}
		vals[n] = t
	}
	for n, t := range extra {
		if _, dup := vals[n]; dup {
			return nil, fmt.Errorf("input %q given with both --freeze and --input", n)
		}
		vals[n] = t
	}
	return loadWithInputs(path, vals, shapeMap, pc)
}

// defaultArtifactName is MODEL's base name without .onnx plus ".kiln" (for
// a test directory holding model.onnx: the directory's name).
func defaultArtifactName(arg string) string {
	base := filepath.Base(filepath.Clean(arg))
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		return base + ".kiln"
	}
	if ext := filepath.Ext(base); strings.EqualFold(ext, ".onnx") {
		base = strings.TrimSuffix(base, ext)
	}
	return base + ".kiln"
}

func runCompile(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("compile", "MODEL.onnx -t \"TARGETS\" [--executor graph|aot] [-o OUT]", stderr)
	targets := fs.String("t", "", "comma-separated target strings, host last (e.g. \"dnnl, c -mcpu=native\"); an element may be labelled, LABEL=TARGET, to place nodes on it or to list one kind twice (\"big=c, little=c -mattr=-avx512f\")")
	executor := fs.String("executor", "graph", "executor: graph or aot")
	interfaceAPI := fs.String("interface-api", "c", "aot: the entry's interface (c: kiln_<model>_run with input/output structs)")
	unpackedAPI := fs.Bool("unpacked-api", false, "aot: call the host kernels through their unpacked form (raw pointers, no argument checks)")
	weights := fs.String("weights", "auto", "aot: constants as a C array (c-array), an assembler-included binary (blob), or auto (C array up to 4 MiB)")
	out := fs.String("o", "", "output artifact directory (default: MODEL's name + .kiln)")
	force := fs.Bool("force", false, "replace the artifact at -o even when it was compiled from another model (a directory that is not a kiln artifact is never replaced)")
	var passes passFlags
	passes.register(fs)
	var cache cacheFlags
	cache.register(fs)
	var tuning tuningFlag
	tuning.register(fs)
	linkParams := fs.Bool("link-params", false, "link the weights into kiln_lib.so as read-only data instead of writing params.bin")
	dump := fs.String("dump-graph", "", "write the graph IR after every pass to this file")
	verbose := fs.Bool("v", false, "print per-stage timings, graph pass statistics and the full partition report")
	quiet := fs.Bool("quiet", false, "no progress on stderr (shown for compiles longer than a second: one line redrawn on a terminal, plain lines elsewhere)")
	requireOffload := fs.Bool("require-offload", false, "fail when partitioning leaves operators on the host")
	reportJSON := fs.String("report-json", "", "write the partition report as JSON to this file")
	reportHTML := fs.String("report-html", "", "write the graph coloured by target and the partition report as one HTML page to this file")
	printPipeline := fs.Bool("print-pipeline", false, "print the compilation's stages (with the passes and target hooks inside them) and exit")
	verify := fs.Bool("verify", false, "run the graph and TIR verifiers after every stage")
	dumpDir := fs.String("dump-dir", "", "write the IR after every stage to `DIR`/NN-stage.txt (graph, then TIR, then C)")
	dumpAfter := fs.String("dump-after", "", "with --dump-dir: only after this `STAGE`")
	var imp importOptions
	imp.register(fs)
	var devs deviceFlags
	devs.register(fs)
	var part partitionFlags
	part.register(fs)
	var explain listFlag
	fs.Var(&explain, "explain", "print why the ONNX node `NODE` landed where it did (its target, the reasons, and with measured partitioning the times behind the choice; repeatable)")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	if err := part.check(); err != nil {
		fmt.Fprintf(stderr, "kiln compile: %v\n", err)
		return exitUsage
	}
	aotOpts, code, ok := aotFlags(stderr, *executor, *interfaceAPI, *unpackedAPI, *weights, fs)
	if !ok {
		return code
	}
	if *executor == "aot" && *linkParams {
		fmt.Fprintln(stderr, "kiln compile: --link-params is for --executor graph (an AOT project always contains its weights; see --weights)")
		return exitUsage
	}
	if *targets == "" {
		fmt.Fprintln(stderr, "kiln compile: -t is required (e.g. -t c or -t \"c -mcpu=native\")")
		return exitUsage
	}
	if passes.wantsHelp() {
		writePassConfigKeys(stdout)
		return exitOK
	}
	pc, err := passes.resolve()
	if err != nil {
		fmt.Fprintf(stderr, "kiln compile: %v\n", err)
		return exitUsage
	}
	place, err := devs.resolve(*targets)
	if err != nil {
		return fail(stderr, "compile", err)
	}
	if *printPipeline {
		p, err := driver.NewPipeline(driver.Config{Host: place.list.Host, Targets: place.list.Targets, Executor: *executor, PassConfig: pc})
		if err != nil {
			return fail(stderr, "compile", err)
		}
		fmt.Fprint(stdout, p.String())
		return exitOK
	}
	if *dumpAfter != "" && !slices.Contains(driver.StageNames(), *dumpAfter) {
		fmt.Fprintf(stderr, "kiln compile: --dump-after %q: no such stage (stages: %s)\n", *dumpAfter, strings.Join(driver.StageNames(), ", "))
		return exitUsage
	}
	path, err := modelPath(pos[0])
	if err == errArtifact {
		return fail(stderr, "compile", fmt.Errorf("%s: %v", pos[0], err))
	}
	if err != nil {
		return fail(stderr, "compile", err)
	}
	if *out == "" {
		*out = defaultArtifactName(pos[0])
	}
	source, err := driver.SourceOf(path)
	if err != nil {
		return fail(stderr, "compile", err)
	}
	replacing := isArtifact(*out) // said in the summary: never silently
	if replacing && !*force {
		if md, err := driver.ReadMetadata(*out); err != nil || !md.Source.Same(source) {
			return fail(stderr, "compile", fmt.Errorf("%s holds an artifact of another model (%s); choose another -o, or give --force to replace it", *out, describeSource(md.Source)))
		}
	}
	recs, err := tuning.load()
	if err != nil {
		return fail(stderr, "compile", err)
	}
	t0 := time.Now()
	objs := cache.open(stderr)
	arts := openArtifactCache(objs, fs, place, source, moduleName(pos[0]))
	md, rec, hit, err := arts.restore(*out, filepath.Dir(path))
	if err != nil {
		return fail(stderr, "compile", err)
	}
	if hit {
		if rec.Report != "" {
			fmt.Fprint(stdout, rec.Report)
		}
		for _, w := range rec.Warnings {
			fmt.Fprintf(stderr, "kiln: warning: %s\n", escape.Printable(w))
		}
		dir, _ := filepath.Abs(*out)
		printCompiled(stdout, pos[0], md, fmt.Sprintf("%s (from kiln's cache: nothing it depends on changed; the compile took %s; --no-cache compiles again)", roundDur(time.Since(t0)), roundDur(rec.Took)), dir, replacing)
		return exitOK
	}
	model, err := imp.load(path, nil, pc)
	if err != nil {
		return fail(stderr, "compile", err)
	}
	tImport := time.Since(t0)
	var rep partition.Report
	opts := compileOptions{Place: place, Out: *out, Source: source, Passes: pc, LinkParams: *linkParams, RequireOffload: *requireOffload, Report: &rep, ModuleName: moduleName(pos[0]), Executor: *executor, AOT: aotOpts,
		Verify: *verify, DumpDir: *dumpDir, DumpAfter: *dumpAfter, Cache: objs, Tuning: recs, Partition: part.forThreads(1), Warn: stderr}
	var prog *progress
	if *verbose {
		opts.Log = stdout
		fmt.Fprintf(stdout, "  %-22s %v\n", "import", tImport.Round(time.Microsecond))
		opts.Progress = stdout
	}
	if *dump != "" {
		f, err := os.Create(*dump)
		if err != nil {
			return fail(stderr, "compile", err)
		}
		defer f.Close()
		opts.Dump = f
	}
	if !*verbose {
		prog = newProgress(stderr, "compiling "+moduleName(pos[0]), *quiet)
		opts.Progress, opts.Log = prog, prog
	}
	res, tCompile, err := compileModel(model, opts)
	if prog != nil {
		prog.Close()
	}
	if err != nil {
		return fail(stderr, "compile", err)
	}
	if *verbose {
		if err := writeStageStats(stdout, res); err != nil {
			return fail(stderr, "compile", err)
		}
	}
	var report strings.Builder
	if rep.Counts != nil {
		if err := writePartitionReport(&report, &rep, *verbose, *reportJSON); err != nil {
			return fail(stderr, "compile", err)
		}
		fmt.Fprint(stdout, report.String())
	}
	for _, node := range explain {
		if err := explainNode(stdout, &rep, node); err != nil {
			return fail(stderr, "compile", err)
		}
	}
	if *reportHTML != "" {
		var devOf func(graph.Expr) string
		var r *partition.Report
		if rep.Counts != nil {
			r, devOf = &rep, reportTargets(model.Module, &rep)
		}
		err := writeFileAtomic(*reportHTML, func(w io.Writer) error {
			return writeHTML(w, moduleName(pos[0]), describe(model, devOf), r, nil)
		})
		if err != nil {
			return fail(stderr, "compile", fmt.Errorf("--report-html: %v", err))
		}
	}
	arts.store(res.Dir, filepath.Dir(path), model.ExternalFiles, &driver.ArtifactRecord{Report: report.String(), Warnings: rep.Warnings, Took: tImport + tCompile})
	printCompiled(stdout, pos[0], res.Metadata, fmt.Sprintf("%s (import %s, build %s)", roundDur(tImport+tCompile), roundDur(tImport), roundDur(tCompile)), res.Dir, replacing)
	return exitOK
}

// describeSource names the model an existing artifact came from.
func describeSource(src *driver.SourceMeta) string {
	if src == nil {
		return "its metadata does not say which"
	}
	return fmt.Sprintf("compiled from %s, sha256 %.12s", escape.Printable(src.Model), src.SHA256)
}

// aotFlags checks the executor flags of compile and returns the AOT
// options (or a usage exit status when ok is false).
func aotFlags(stderr io.Writer, executor, interfaceAPI string, unpacked bool, weights string, fs *flag.FlagSet) (driver.AOTOptions, int, bool) {
	var o driver.AOTOptions
	switch executor {
	case "graph":
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for _, name := range []string{"interface-api", "unpacked-api", "weights"} {
			if set[name] {
				fmt.Fprintf(stderr, "kiln compile: --%s is an option of --executor aot\n", name)
				return o, exitUsage, false
			}
		}
		return o, 0, true
	case "aot":
	default:
		fmt.Fprintf(stderr, "kiln compile: --executor %q: want graph or aot\n", executor)
		return o, exitUsage, false
	}
	if interfaceAPI != "c" {
		fmt.Fprintf(stderr, "kiln compile: --interface-api %q: want c (kiln_<model>_run with input and output structs)\n", interfaceAPI)
		return o, exitUsage, false
	}
	o.UnpackedAPI = unpacked
	switch weights {
	case "auto":
	case "c-array", "blob":
		asArray := weights == "c-array"
		o.ConstantsAsCArray = &asArray
	default:
		fmt.Fprintf(stderr, "kiln compile: --weights %q: want c-array, blob or auto\n", weights)
		return o, exitUsage, false
	}
	return o, 0, true
}

// writeStageStats prints the statistics the compile collected (-v): every
// graph pass's time, every stage's time and IR sizes, and the memory pools.
func writeStageStats(w io.Writer, res *driver.Result) error {
	fmt.Fprintln(w, "graph passes:")
	p := transform.Pipeline{Stats: res.GraphPasses}
	if err := p.WriteStats(w); err != nil {
		return err
	}
	fmt.Fprintln(w, "stages (time, graph calls, PrimFuncs, bytes of C after each):")
	for _, st := range res.Stages {
		fmt.Fprintf(w, "  %-16s %10v %6d %6d %9d\n", st.Name, st.Time.Round(time.Microsecond), st.GraphCalls, st.PrimFuncs, st.CBytes)
	}
	if b := res.Build; b.Objects > 0 {
		fmt.Fprintf(w, "C build: %s, %s (%d from the cache), compile %v, link %v\n",
			plural(b.Units, "translation unit"), plural(b.Objects, "object"), b.Cached, b.Compile.Round(time.Millisecond), b.Link.Round(time.Millisecond))
	}
	fmt.Fprintln(w, "memory pools (tensors, bytes, liveness lower bound, placement):")
	for _, m := range res.Memory {
		fmt.Fprintf(w, "  %-16s %6d %12d %12d  %s\n", m.Device, m.Tensors, m.Bytes, m.LowerBound, m.Algorithm)
	}
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// isArtifact reports whether p is a compiled artifact directory.
func isArtifact(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir() && isFile(filepath.Join(p, "metadata.json"))
}

// artifactInputs turns an artifact's input metadata into declarations, so
// that input files are matched and checked exactly as for a model file.
func artifactInputs(md driver.Metadata) ([]DeclaredInput, error) {
	out := make([]DeclaredInput, len(md.Inputs))
	for i, in := range md.Inputs {
		dt, err := ir.ParseDType(in.DType)
		if err != nil {
			return nil, fmt.Errorf("metadata.json: input %q: %v", in.Name, err)
		}
		out[i] = DeclaredInput{Name: in.Name, DType: dt, Dims: append([]int64{}, in.Shape...)}
	}
	return out, nil
}

// writePartitionReport prints the partition summary (with verbose, one
// line per node) and writes the JSON report to jsonPath when set.
func writePartitionReport(w io.Writer, rep *partition.Report, verbose bool, jsonPath string) error {
	if verbose {
		if err := rep.WriteText(w); err != nil {
			return err
		}
	} else {
		var b strings.Builder
		if err := rep.WriteText(&b); err != nil {
			return err
		}
		first, _, _ := strings.Cut(b.String(), "\n")
		fmt.Fprintln(w, first)
		if rep.Measured != nil {
			fmt.Fprintln(w, rep.Measured.Summary())
		}
	}
	if jsonPath == "" {
		return nil
	}
	return writeFileAtomic(jsonPath, rep.WriteJSON)
}
