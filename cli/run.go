package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/internal/escape"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/passconfig"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// modelPath accepts MODEL.onnx or a directory holding model.onnx.
func modelPath(arg string) (string, error) {
	st, err := os.Stat(arg)
	isDir := err == nil && st.IsDir()
	if !isDir && !strings.EqualFold(filepath.Ext(arg), ".onnx") {
		return "", errArtifact
	}
	if err != nil {
		return "", err
	}
	if isDir {
		p := filepath.Join(arg, "model.onnx")
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s is a directory without model.onnx", arg)
		}
		return p, nil
	}
	return arg, nil
}

var errArtifact = fmt.Errorf("not an .onnx model")

// readInputFile reads the file of NAME=FILE: a .npz must hold one array,
// or one named NAME.
func readInputFile(name, file string) (*tensor.Tensor, error) {
	if isNpz(file) {
		t, _, err := readNpzArray(file, name)
		return t, err
	}
	t, _, err := ReadTensor(file)
	return t, err
}

// readInputs reads --input values: NAME=FILE binds by name, a bare FILE
// binds to the next model input (in declaration order) not bound by name,
// and a bare FILE.npz binds each of its arrays to the input of its name.
// Every declared input must get a value that fits its declaration.
func readInputs(specs []string, decl []DeclaredInput) (map[string]*tensor.Tensor, error) {
	known := map[string]DeclaredInput{}
	var names []string
	for _, d := range decl {
		known[d.Name] = d
		names = append(names, d.Name)
	}
	vals := map[string]*tensor.Tensor{}
	var bare []string
	for _, s := range specs {
		name, file, ok := strings.Cut(s, "=")
		if !ok {
			bare = append(bare, s)
			continue
		}
		if _, isInput := known[name]; !isInput {
			return nil, fmt.Errorf("the model has no input %q (inputs: %s)", name, strings.Join(names, ", "))
		}
		if _, dup := vals[name]; dup {
			return nil, fmt.Errorf("input %q given twice", name)
		}
		t, err := readInputFile(name, file)
		if err != nil {
			return nil, err
		}
		vals[name] = t
	}
	next := 0
	for _, file := range bare {
		if isNpz(file) {
			// Each array goes to the input of its name.
			arrays, err := tensor.ReadNpzFile(file)
			if err != nil {
				return nil, err
			}
			for _, a := range arrays {
				if _, isInput := known[a.Name]; !isInput {
					return nil, fmt.Errorf("%s: array %q: the model has no input of that name (inputs: %s)", file, a.Name, strings.Join(names, ", "))
				}
				if _, dup := vals[a.Name]; dup {
					return nil, fmt.Errorf("%s: input %q given twice", file, a.Name)
				}
				vals[a.Name] = a.Tensor
			}
			continue
		}
		for next < len(decl) && vals[decl[next].Name] != nil {
			next++
		}
		if next == len(decl) {
			return nil, fmt.Errorf("input file %s: the model has only %d inputs (%s)", file, len(decl), strings.Join(names, ", "))
		}
		t, _, err := ReadTensor(file)
		if err != nil {
			return nil, err
		}
		vals[decl[next].Name] = t
	}
	for _, d := range decl {
		t, ok := vals[d.Name]
		if !ok {
			return nil, fmt.Errorf("missing input %s; give it with --input %s=FILE", d, d.Name)
		}
		if err := d.Check(t); err != nil {
			return nil, err
		}
	}
	return vals, nil
}

// slowReference is the reference engine's run time above which kiln run
// suggests the compiled engine.
const slowReference = time.Second

func runRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("run", "MODEL.onnx|OUT [-t \"TARGETS\"] --input NAME=FILE ... [--output-dir DIR]", stderr)
	targets := fs.String("t", "", "comma-separated target strings, host last (used by --engine compiled)")
	engine := fs.String("engine", "ref", "engine: ref (the reference interpreter) or compiled")
	var inputs listFlag
	fs.Var(&inputs, "input", "an input: NAME=FILE, or FILE for the next input in order (.npy, .pb or .npz; a bare FILE.npz binds each of its arrays to the input of its name; repeatable)")
	outDir := fs.String("output-dir", "", "write each output to DIR/NAME.npy (or .pb)")
	outFormat := fs.String("output-format", "npy", "output file format: npy or pb (a file per output), or npz (all in DIR/outputs.npz)")
	show := fs.Int("show", 8, "values of each output to print")
	asJSON := fs.Bool("json", false, "print one JSON object (engine, times, and each output's name, dtype, shape and values) instead of text")
	var devs deviceFlags
	devs.register(fs)
	var passes passFlags
	passes.register(fs)
	var cache cacheFlags
	cache.register(fs)
	var part partitionFlags
	part.register(fs)
	var cores coresFlag
	cores.register(fs)
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	pc, err := passes.resolve()
	if err != nil {
		fmt.Fprintf(stderr, "kiln run: %v\n", err)
		return exitUsage
	}
	if *outFormat != "npy" && *outFormat != "pb" && *outFormat != "npz" {
		fmt.Fprintf(stderr, "kiln run: --output-format %q: want npy, pb or npz\n", *outFormat)
		return exitUsage
	}
	outs := outputOptions{dir: *outDir, format: *outFormat, show: *show, cores: cores, json: *asJSON}
	engineSet := false
	fs.Visit(func(f *flag.Flag) { engineSet = engineSet || f.Name == "engine" })
	if isArtifact(pos[0]) {
		if engineSet && *engine != "compiled" {
			fmt.Fprintf(stderr, "kiln run: %s is a compiled artifact; it runs only with --engine compiled\n", pos[0])
			return exitUsage
		}
		if *targets != "" || devs.given() {
			fmt.Fprintln(stderr, "kiln run: note: -t and the placement flags are ignored for a compiled artifact")
		}
		return runArtifact(pos[0], inputs, nil, outs, stdout, stderr)
	}
	switch *engine {
	case "ref":
		if *targets != "" || devs.given() {
			fmt.Fprintln(stderr, "kiln run: note: -t and the placement flags are ignored by the reference engine")
		}
	case "compiled":
	default:
		fmt.Fprintf(stderr, "kiln run: --engine %q: want ref or compiled\n", *engine)
		return exitUsage
	}
	path, err := modelPath(pos[0])
	if err == errArtifact {
		return fail(stderr, "run", fmt.Errorf("%s is neither an .onnx model nor a compiled artifact (a directory with metadata.json)", pos[0]))
	}
	if err != nil {
		return fail(stderr, "run", err)
	}
	decl, err := ModelInputs(path)
	if err != nil {
		return fail(stderr, "run", err)
	}
	vals, err := readInputs(inputs, decl)
	if err != nil {
		return fail(stderr, "run", err)
	}
	if *engine == "compiled" {
		ts := targetsOrDefault(*targets)
		if err := part.check(); err != nil {
			fmt.Fprintf(stderr, "kiln run: %v\n", err)
			return exitUsage
		}
		return compileAndRun(path, ts, &devs, pc, cache.open(stderr), part.forThreads(1), vals, outs, stdout, stderr)
	}
	t0 := time.Now()
	model, err := loadWithInputs(path, vals, nil, pc)
	if err != nil {
		return fail(stderr, "run", err)
	}
	tImport := time.Since(t0)
	argv := make([]*tensor.Tensor, len(model.Inputs))
	for i, in := range model.Inputs {
		argv[i] = vals[in.Name]
	}
	t1 := time.Now()
	res, err := ref.Run(model.Module, argv)
	if err != nil {
		return fail(stderr, "run", err)
	}
	tRun := time.Since(t1)
	names := make([]string, len(model.Outputs))
	for i, o := range model.Outputs {
		names[i] = o.Name
	}
	if outs.json {
		if err := writeRunJSON(stdout, "reference", map[string]time.Duration{"import": tImport, "run": tRun}, names, res.Flatten(), outs); err != nil {
			return fail(stderr, "run", err)
		}
		return exitOK
	}
	if err := printOutputs(stdout, names, res.Flatten(), outs); err != nil {
		return fail(stderr, "run", err)
	}
	fmt.Fprintf(stdout, "reference engine: import %s, run %s\n", roundDur(tImport), roundDur(tRun))
	if tRun > slowReference {
		fmt.Fprintf(stderr, "kiln run: note: the reference engine (an interpreter, the default) took %s; --engine compiled -t c compiles the model first and usually runs it many times faster\n", roundDur(tRun))
	}
	return exitOK
}

// compileAndRun imports the model with the input values (as the reference
// engine does), compiles it for targets into a temporary directory, runs
// the artifact and prints the outputs.
func compileAndRun(path, targets string, devs *deviceFlags, pc *passconfig.Config, cache *cgen.Cache, part *partitionFlags, vals map[string]*tensor.Tensor, o outputOptions, stdout, stderr io.Writer) int {
	place, err := devs.resolve(targets)
	if err != nil {
		return fail(stderr, "run", err)
	}
	t0 := time.Now()
	model, err := loadWithInputs(path, vals, nil, pc)
	if err != nil {
		return fail(stderr, "run", err)
	}
	tImport := time.Since(t0)
	tmp, err := driver.TempDir("", "kiln-run-")
	if err != nil {
		return fail(stderr, "run", err)
	}
	defer driver.RemoveTemp(tmp)
	res, tCompile, err := compileModel(model, compileOptions{Place: place, Out: filepath.Join(tmp, "artifact"), ModuleName: moduleName(path), Passes: pc, Cache: cache, Partition: part, Log: stderr, Warn: stderr})
	if err != nil {
		return fail(stderr, "run", err)
	}
	info := stdout
	if o.json {
		info = stderr // stdout holds the one JSON object
	}
	fmt.Fprintf(info, "compiled for %q: import %s, build %s (%d kernels)\n", res.Metadata.Target, roundDur(tImport), roundDur(tCompile), res.Metadata.Kernels)
	return runArtifact(res.Dir, nil, vals, o, stdout, stderr)
}

// runArtifact loads a compiled artifact, binds the input files (or, when
// vals is not nil, uses those values) and runs it, printing and writing
// the outputs like the reference engine does.
func runArtifact(dir string, inputs []string, vals map[string]*tensor.Tensor, o outputOptions, stdout, stderr io.Writer) int {
	t0 := time.Now()
	art, err := driver.LoadArtifact(dir)
	if err != nil {
		return fail(stderr, "run", err)
	}
	defer art.Close()
	tLoad := time.Since(t0)
	if err := o.cores.apply(art); err != nil {
		return fail(stderr, "run", err)
	}
	if vals == nil {
		decl, err := artifactInputs(art.Metadata)
		if err != nil {
			return fail(stderr, "run", err)
		}
		if vals, err = readInputs(inputs, decl); err != nil {
			return fail(stderr, "run", err)
		}
	}
	t1 := time.Now()
	outs, err := art.Run(vals)
	if err != nil {
		return fail(stderr, "run", err)
	}
	tRun := time.Since(t1)
	names := make([]string, len(art.Metadata.Outputs))
	for i, o := range art.Metadata.Outputs {
		names[i] = o.Name
	}
	if o.json {
		if err := writeRunJSON(stdout, "compiled", map[string]time.Duration{"load": tLoad, "run": tRun}, names, outs, o); err != nil {
			return fail(stderr, "run", err)
		}
		return exitOK
	}
	if err := printOutputs(stdout, names, outs, o); err != nil {
		return fail(stderr, "run", err)
	}
	fmt.Fprintf(stdout, "compiled engine: load %s, run %s\n", roundDur(tLoad), roundDur(tRun))
	return exitOK
}

// outputOptions say how run shows and saves outputs.
type outputOptions struct {
	dir    string // write each output to dir/NAME.FORMAT ("": do not)
	format string // npy or pb
	show   int    // values of each output to print
	cores  coresFlag
	json   bool // one JSON object instead of text (writeRunJSON)
}

// printOutputs prints each output's type and a summary and, with o.dir,
// writes it to o.dir/NAME.FORMAT.
func printOutputs(stdout io.Writer, names []string, outs []*tensor.Tensor, o outputOptions) error {
	if len(outs) != len(names) {
		return fmt.Errorf("the model produced %d tensors for %d outputs", len(outs), len(names))
	}
	paths, err := writeOutputFiles(o.dir, names, outs, o.format)
	if err != nil {
		return err
	}
	for i, name := range names {
		fmt.Fprintf(stdout, "%s: %s\n  %s\n", escape.Printable(name), outs[i].Type(), Summary(outs[i], o.show))
		if paths != nil {
			where := paths[i]
			if o.format == "npz" {
				where += fmt.Sprintf(" (array %q)", name)
			}
			fmt.Fprintf(stdout, "  written to %s\n", escape.Printable(where))
		}
	}
	return nil
}

// writeOutputFiles writes the outputs to dir ("": nowhere, nil paths) in
// format npy or pb (one file per output, named by outputFileNames) or npz
// (all in dir/outputs.npz, each array named as its output), and returns
// where each went.
func writeOutputFiles(dir string, names []string, outs []*tensor.Tensor, format string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	paths := make([]string, len(names))
	if format == "npz" {
		p := filepath.Join(dir, "outputs.npz")
		arrays := make([]tensor.Named, len(names))
		for i := range names {
			arrays[i] = tensor.Named{Name: names[i], Tensor: outs[i]}
			paths[i] = p
		}
		return paths, tensor.WriteNpzFile(p, arrays)
	}
	files := outputFileNames(names)
	for i, name := range names {
		p, err := writeTensorAs(dir, files[i], name, outs[i], format)
		if err != nil {
			return nil, err
		}
		paths[i] = p
	}
	return paths, nil
}

// Summary prints the first n values of t and, for numbers, min, max and mean.
func Summary(t *tensor.Tensor, n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < t.Len() && i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		if t.DType.IsFloat() {
			b.WriteString(strconv.FormatFloat(t.Float(i), 'g', 6, 64))
		} else {
			b.WriteString(graph.FormatElement(t, i))
		}
	}
	if t.Len() > n {
		fmt.Fprintf(&b, ", ... (%d values)", t.Len())
	}
	b.WriteByte(']')
	if t.Len() > 0 && t.DType != ir.Bool {
		lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
		for i := 0; i < t.Len(); i++ {
			v := t.Float(i)
			lo, hi, sum = math.Min(lo, v), math.Max(hi, v), sum+v
		}
		fmt.Fprintf(&b, "  min %.6g max %.6g mean %.6g", lo, hi, sum/float64(t.Len()))
	}
	return b.String()
}

// roundDur prints a duration with a sensible precision.
func roundDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// RunJSON is what kiln run --json prints.
type RunJSON struct {
	// Engine is "reference" or "compiled".
	Engine string `json:"engine"`
	// TimesMs are the stages' wall times in milliseconds (import and run
	// for the reference engine; load and run for a compiled artifact).
	TimesMs map[string]float64 `json:"times_ms"`
	Outputs []OutputJSON       `json:"outputs"`
}

// OutputJSON is one output of kiln run --json: its values flattened in
// row-major order, as numbers (non-finite ones as the strings "NaN",
// "Infinity" and "-Infinity"), and the file it was written to, if any.
type OutputJSON struct {
	Name   string  `json:"name"`
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	Values []any   `json:"values"`
	File   string  `json:"file,omitempty"`
	// Array names the output's array in File when File is a .npz.
	Array string `json:"array,omitempty"`
}

// writeRunJSON writes the outputs (and the files of --output-dir) as one
// RunJSON object.
func writeRunJSON(stdout io.Writer, engine string, times map[string]time.Duration, names []string, outs []*tensor.Tensor, o outputOptions) error {
	if len(outs) != len(names) {
		return fmt.Errorf("the model produced %d tensors for %d outputs", len(outs), len(names))
	}
	rep := RunJSON{Engine: engine, TimesMs: map[string]float64{}}
	for k, d := range times {
		rep.TimesMs[k] = float64(d.Nanoseconds()) / 1e6
	}
	paths, err := writeOutputFiles(o.dir, names, outs, o.format)
	if err != nil {
		return err
	}
	for i, t := range outs {
		oj := OutputJSON{Name: names[i], DType: t.DType.String(), Shape: append([]int64{}, t.Shape...), Values: make([]any, 0, t.Len())}
		for _, v := range t.AsFloat64s() {
			switch {
			case math.IsNaN(v):
				oj.Values = append(oj.Values, "NaN")
			case math.IsInf(v, 1):
				oj.Values = append(oj.Values, "Infinity")
			case math.IsInf(v, -1):
				oj.Values = append(oj.Values, "-Infinity")
			default:
				oj.Values = append(oj.Values, v)
			}
		}
		if paths != nil {
			oj.File = paths[i]
			if o.format == "npz" {
				oj.Array = names[i]
			}
		}
		rep.Outputs = append(rep.Outputs, oj)
	}
	return json.NewEncoder(stdout).Encode(rep)
}
