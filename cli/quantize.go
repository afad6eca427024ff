package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"time"

	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/quantize"
	krt "github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

func runQuantize(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("quantize", "MODEL.onnx -o OUT.onnx [--calibrate DIR | --samples N] [--method minmax|percentile]", stderr)
	out := fs.String("o", "", "the QDQ ONNX model to write (required)")
	calib := fs.String("calibrate", "", "directory of calibration inputs: each .npz (arrays named by input), .npy or .pb file (a one-input model) is a sample, and so is each subdirectory of input_N.pb files (the ONNX test-data layout); default: --samples generated inputs")
	samples := fs.Int("samples", 8, "without --calibrate: how many seeded random inputs to calibrate on (floats uniform in [-1, 1))")
	seed := fs.Uint64("seed", 1, "the seed of the generated calibration inputs")
	method := fs.String("method", "minmax", "activation ranges: minmax (smallest to largest value seen) or percentile")
	pct := fs.Float64("percentile", 99.99, "with --method percentile: the share of values, in percent, each range holds at each end")
	act := fs.String("activation-type", "uint8", "activation type: uint8 (what x86's integer dot products take) or int8 (what microcontroller kernels take); weights are always int8")
	perTensor := fs.Bool("per-tensor", false, "one scale per weight tensor instead of one per output channel")
	reduce := fs.Bool("reduce-range", false, "7-bit weights ([-64, 64]): on x86 without VNNI integer convolutions then use vpmaddubsw without saturating (faster), for one bit of weight precision")
	evalN := fs.Int("eval", 64, "seeded random inputs the accuracy report compares the float and quantized models on (0: no report)")
	evalSeed := fs.Uint64("eval-seed", 2, "the seed of the report's inputs")
	tgt := fs.String("t", "c", "the target the models are compiled for to calibrate and compare")
	var cache cacheFlags
	cache.register(fs)
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 || *out == "" {
		fs.Usage()
		return exitUsage
	}
	opts := quantize.Options{Percentile: *pct}
	switch *method {
	case "minmax":
	case "percentile":
		opts.Method = quantize.Percentile
	default:
		fmt.Fprintf(stderr, "kiln quantize: --method %q: want minmax or percentile\n", *method)
		return exitUsage
	}
	switch *act {
	case "int8":
		opts.Activations = ir.Int8
	case "uint8":
		opts.Activations = ir.Uint8
	default:
		fmt.Fprintf(stderr, "kiln quantize: --activation-type %q: want int8 or uint8\n", *act)
		return exitUsage
	}
	opts.PerTensorWeights, opts.ReduceRange = *perTensor, *reduce
	if *samples < 1 || *evalN < 0 || !(*pct > 50 && *pct <= 100) {
		fmt.Fprintln(stderr, "kiln quantize: --samples must be 1 or more, --eval 0 or more, --percentile in (50, 100]")
		return exitUsage
	}
	tl, err := targets.ParseList(*tgt)
	if err != nil {
		fmt.Fprintf(stderr, "kiln quantize: -t: %v\n", err)
		return exitUsage
	}
	path, err := modelPath(pos[0])
	if err != nil {
		return fail(stderr, "quantize", fmt.Errorf("%s: want an .onnx model", pos[0]))
	}
	if same(path, *out) {
		return fail(stderr, "quantize", fmt.Errorf("-o %s is the model itself; kiln quantize writes a new file", *out))
	}
	t0 := time.Now()
	m, err := quantize.LoadFile(path)
	if err != nil {
		return fail(stderr, "quantize", err)
	}
	var cal []map[string]*tensor.Tensor
	what := fmt.Sprintf("%d generated inputs (seed %d)", *samples, *seed)
	if *calib != "" {
		if cal, err = readSamples(*calib, m.Inputs()); err != nil {
			return fail(stderr, "quantize", err)
		}
		what = fmt.Sprintf("%d samples from %s", len(cal), *calib)
	} else if cal, err = quantize.Generate(m, *samples, *seed); err != nil {
		return fail(stderr, "quantize", err)
	}
	ctx := context.Background()
	var eng quantize.Engine = &compiledQuantEngine{list: tl, cache: cache.open(stderr)}
	if !krt.CanRun {
		fmt.Fprintln(stderr, "kiln quantize: note: this kiln was built without cgo; the reference engine runs the models (slowly)")
		eng = quantize.RefEngine{}
	}
	res, err := quantize.Quantize(ctx, m, eng, cal, opts)
	if err != nil {
		return fail(stderr, "quantize", err)
	}
	if err := writeFileAtomic(*out, func(w io.Writer) error { _, err := w.Write(res.Model); return err }); err != nil {
		return fail(stderr, "quantize", err)
	}
	scales := "one scale per output channel"
	if *perTensor {
		scales = "one scale per tensor"
	}
	fmt.Fprintf(stdout, "quantized %s -> %s in %s: %d weights (int8, %s), %d biases (int32), %d activations (%s, %s over %s)\n",
		path, *out, roundDur(time.Since(t0)), res.Weights, scales, res.Biases, res.Activations, *act, opts.Method, what)
	for _, n := range res.Notes {
		fmt.Fprintf(stdout, "  note: %s\n", n)
	}
	if *evalN == 0 {
		return exitOK
	}
	evalIn, err := quantize.Generate(m, *evalN, *evalSeed)
	if err != nil {
		return fail(stderr, "quantize", err)
	}
	float, err := m.Bytes()
	if err != nil {
		return fail(stderr, "quantize", err)
	}
	rep, err := quantize.Compare(ctx, eng, float, res.Model, evalIn)
	if err != nil {
		return fail(stderr, "quantize", fmt.Errorf("accuracy report: %w", err))
	}
	printQuantReport(stdout, rep, *evalSeed)
	return exitOK
}

// printQuantReport prints Compare's findings, one line per output.
func printQuantReport(w io.Writer, rep *quantize.Report, seed uint64) {
	fmt.Fprintf(w, "accuracy against the float model on %d random inputs (seed %d):\n", rep.Inputs, seed)
	for _, o := range rep.Outputs {
		top := "no class axis"
		if t := o.Top1(); !math.IsNaN(t) {
			top = fmt.Sprintf("top-1 agreement %d/%d (%.1f %%)", o.Agree, o.Rows, 100*t)
		}
		fmt.Fprintf(w, "  %s: %s, max abs error %.4g (float values up to %.4g)\n", strconv.Quote(o.Name), top, o.MaxAbsErr, o.MaxAbs)
	}
}

// same says whether two paths name one file (false when b does not exist).
func same(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

var inputPB = regexp.MustCompile(`^input_(\d+)\.pb$`)

// readSamples reads a calibration directory: every .npz, .npy or .pb file
// is one sample, and so is every subdirectory of input_N.pb files.
func readSamples(dir string, ins []quantize.Input) ([]map[string]*tensor.Tensor, error) {
	decl := make([]DeclaredInput, len(ins))
	for i, in := range ins {
		decl[i] = DeclaredInput{Name: in.Name, DType: in.DType, Dims: in.Dims}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--calibrate: %w", err)
	}
	var out []map[string]*tensor.Tensor
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		var specs []string
		switch ext := filepath.Ext(e.Name()); {
		case e.IsDir():
			sub, err := os.ReadDir(p)
			if err != nil {
				return nil, fmt.Errorf("--calibrate: %w", err)
			}
			type file struct {
				k    int
				path string
			}
			var files []file
			for _, f := range sub {
				if mt := inputPB.FindStringSubmatch(f.Name()); mt != nil && f.Type().IsRegular() {
					k, _ := strconv.Atoi(mt[1])
					files = append(files, file{k, filepath.Join(p, f.Name())})
				}
			}
			sort.Slice(files, func(i, j int) bool { return files[i].k < files[j].k })
			for _, f := range files {
				specs = append(specs, f.path)
			}
		case e.Type().IsRegular() && (ext == ".npz" || ext == ".npy" || ext == ".pb"):
			specs = []string{p}
		}
		if len(specs) == 0 {
			continue
		}
		vals, err := readInputs(specs, decl)
		if err != nil {
			return nil, fmt.Errorf("--calibrate sample %s: %w", p, err)
		}
		out = append(out, vals)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--calibrate %s: no samples (.npz, .npy or .pb files, or directories of input_N.pb files)", dir)
	}
	return out, nil
}

// compiledQuantEngine compiles the quantizer's models for a target into
// temporary artifacts.
type compiledQuantEngine struct {
	list  *targets.TargetList
	cache *cgen.Cache
}

func (e *compiledQuantEngine) Load(ctx context.Context, data []byte) (quantize.Runner, error) {
	m, err := onnx.Load(data, onnx.Options{})
	if err != nil {
		return nil, err
	}
	tmp, err := driver.TempDir("", "kiln-quantize-")
	if err != nil {
		return nil, err
	}
	res, _, err := compileModel(m, compileOptions{Ctx: ctx, Place: &placement{list: e.list}, Out: filepath.Join(tmp, "artifact"), Cache: e.cache})
	if err != nil {
		driver.RemoveTemp(tmp)
		return nil, err
	}
	art, err := driver.LoadArtifact(res.Dir)
	if err != nil {
		driver.RemoveTemp(tmp)
		return nil, err
	}
	names := make([]string, len(m.Outputs))
	for i, o := range m.Outputs {
		names[i] = o.Name
	}
	return &compiledRunner{art: art, tmp: tmp, names: names}, nil
}

type compiledRunner struct {
	art   *driver.Artifact
	tmp   string
	names []string
}

func (r *compiledRunner) Run(ctx context.Context, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	outs, err := r.art.RunContext(ctx, inputs)
	if err != nil {
		return nil, err
	}
	m := make(map[string]*tensor.Tensor, len(outs))
	for i, o := range outs {
		if i < len(r.names) {
			m[r.names[i]] = o
		}
	}
	return m, nil
}

func (r *compiledRunner) Close() error {
	r.art.Close()
	driver.RemoveTemp(r.tmp)
	return nil
}
