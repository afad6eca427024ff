// Package kiln is the Go API of kiln, a compiler for deep-learning models:
// it compiles an ONNX model for a list of targets into an artifact, loads
// artifacts, and runs them from any number of goroutines.
//
// # Compile, load, run
//
// Compile imports an ONNX file, partitions it among the targets (kiln's
// own C code generation for the host, "c", and any external backend such
// as oneDNN, "dnnl"), compiles it, and returns the loaded Artifact:
//
//	art, err := kiln.Compile(ctx, "model.onnx", "dnnl, c", kiln.Options{Out: "model.kiln"})
//
// Load opens an artifact compiled earlier (by Compile or by `kiln compile`).
// An Artifact holds the compiled code and one copy of the weights. Its
// sessions run it:
//
//	sess, err := art.NewSession(kiln.SessionOptions{})
//	outs, err := sess.Run(ctx, map[string]*tensor.Tensor{"input": x})
//	y := outs["output"]
//
// Inputs and outputs are named as in the model (Artifact.Inputs and
// Artifact.Outputs give their dtypes and shapes). Build input tensors
// with tensor.FromData, which checks the data's type and length against
// the dtype and shape.
//
// # Serving
//
// Session.Run is safe for concurrent use by many goroutines. A session
// runs up to SessionOptions.Concurrency inferences at the same time, each
// in memory of its own, all sharing the artifact's weights; more callers
// wait for a free slot. On a machine with C cores, Concurrency C and
// Threads 1 give the most throughput; Concurrency 1 and Threads C the
// lowest latency of a single request.
//
// # Backends
//
// The host target "c" is always there. External backends join by
// importing their package for its side effect, which registers the
// target kind and its runtime:
//
//	import _ "github.com/kiln-dev/kiln/backend/dnnl"
//
// Loading an artifact that needs a backend the program did not import is
// an error that names the module kind and says to import its package.
//
// # Where this sits
//
// The package wraps the compiler's stages, each a package of its own:
// frontend/onnx imports, partition and the backends split the graph,
// driver runs the passes, lowers to TIR and generates C, and runtime runs
// the result; the kiln command (cmd/kiln) is built on the same stages.
package kiln

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/partition"
	"github.com/kiln-dev/kiln/targets"
)

// Version is kiln's version.
const Version = driver.Version

// Options configures Compile. The zero value compiles into a temporary
// directory with measured partitioning and kiln's compile cache.
type Options struct {
	// Out is the artifact directory to write. Empty means a new
	// temporary directory, removed by Artifact.Close.
	Out string
	// Force lets Compile replace an artifact at Out that was compiled
	// from another model. Without it only an artifact of the same model
	// file is replaced; a directory that is not a kiln artifact never is.
	Force bool
	// Partition is "measured" (the default when Targets has an external
	// backend: each region goes where it was measured fastest on this
	// machine) or "greedy" (to the first target in the list that takes
	// it).
	Partition string
	// MeasureThreads is the thread count measured partitioning times
	// regions with (0: 1).
	MeasureThreads int
	// NoCache compiles every C file again instead of reusing the objects
	// and measurements in kiln's cache ($XDG_CACHE_HOME/kiln).
	NoCache bool
	// Progress, when set, receives one line per finished compile stage.
	Progress io.Writer
	// Report, when set, receives the partition report: which nodes went
	// to which target, and why.
	Report *partition.Report
}

// TensorInfo names and types one input or output of an artifact.
type TensorInfo struct {
	Name  string
	DType ir.DType
	Shape ir.Shape
}

// Artifact is a compiled model, loaded: its code and one copy of its
// weights, shared by all its sessions. Its methods are safe for
// concurrent use.
type Artifact struct {
	art     *driver.Artifact
	dir     string
	temp    bool // dir was made by Compile and goes with Close
	inputs  []TensorInfo
	outputs []TensorInfo

	mu       sync.Mutex
	closed   bool
	sessions int
}

// Compile compiles the ONNX model at path for the target list targets
// (the syntax of `kiln compile -t`, e.g. "c", "dnnl, c" or "c -mcpu=znver4")
// and loads the result. ctx stops the compile (and measuring) early.
func Compile(ctx context.Context, model, targetList string, opts Options) (art *Artifact, err error) {
	list, err := targets.ParseList(targetList)
	if err != nil {
		return nil, err
	}
	m, err := onnx.LoadFile(model, onnx.Options{})
	if err != nil {
		return nil, err
	}
	source, err := driver.SourceOf(model)
	if err != nil {
		return nil, err
	}
	out, temp, err := outDir(opts, source)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && temp {
			os.RemoveAll(filepath.Dir(out))
		}
	}()
	names := make([]string, len(m.Outputs))
	for i, o := range m.Outputs {
		names[i] = o.Name
	}
	cfg := driver.Config{
		Host: list.Host, Targets: list.Targets, Labels: targets.NewLabels(targets.DefaultLabels),
		Out: out, Progress: opts.Progress, Report: opts.Report,
		ModuleName: "default", Source: source,
	}
	var cacheDir string
	if !opts.NoCache {
		// A cache that cannot be used only makes the compile slower.
		if c, err := cgen.OpenDefaultCache(); err == nil {
			cfg.Cache, cacheDir = c, c.Dir()
		}
	}
	measured := driver.CanMeasure(list.Targets)
	switch opts.Partition {
	case "", "measured":
	case "greedy":
		measured = false
	default:
		return nil, fmt.Errorf("kiln: partition %q: want \"measured\" or \"greedy\"", opts.Partition)
	}
	if measured {
		if cfg.Report == nil {
			cfg.Report = &partition.Report{}
		}
		_, err = driver.CompileMeasured(ctx, m.Module, names, cfg, driver.MeasureOptions{Threads: max(opts.MeasureThreads, 1), CacheDir: cacheDir})
	} else {
		_, err = driver.CompileContext(ctx, m.Module, names, cfg)
	}
	if err != nil {
		return nil, err
	}
	a, err := Load(out)
	if err != nil {
		return nil, err
	}
	a.temp = temp
	return a, nil
}

// outDir returns the absolute artifact directory opts asks for, making
// a temporary one when Out is empty (temp true). An artifact of the same
// model at Out is replaced; another model's only with Force.
func outDir(opts Options, source *driver.SourceMeta) (dir string, temp bool, err error) {
	if opts.Out == "" {
		parent, err := os.MkdirTemp("", "kiln-")
		if err != nil {
			return "", false, err
		}
		return filepath.Join(parent, "model.kiln"), true, nil
	}
	dir, err = filepath.Abs(opts.Out)
	if err != nil {
		return "", false, err
	}
	if _, err := os.Lstat(dir); err == nil && !opts.Force {
		if md, err := driver.ReadMetadata(dir); err != nil || !md.Source.Same(source) {
			return "", false, fmt.Errorf("kiln: %s exists and does not hold an artifact of this model (set Options.Force to replace an artifact there)", opts.Out)
		}
	}
	return dir, false, nil
}

// Load loads the artifact directory at path. Its weights are read once
// and shared by every session.
func Load(path string) (*Artifact, error) {
	da, err := driver.LoadArtifact(path)
	if err != nil {
		return nil, err
	}
	a := &Artifact{art: da, dir: path}
	conv := func(ms []driver.TensorMeta) ([]TensorInfo, error) {
		out := make([]TensorInfo, len(ms))
		for i, m := range ms {
			dt, err := ir.ParseDType(m.DType)
			if err != nil {
				return nil, fmt.Errorf("%s/metadata.json: %q: %w", path, m.Name, err)
			}
			out[i] = TensorInfo{Name: m.Name, DType: dt, Shape: ir.Shape(m.Shape).Clone()}
		}
		return out, nil
	}
	if a.inputs, err = conv(da.Metadata.Inputs); err == nil {
		a.outputs, err = conv(da.Metadata.Outputs)
	}
	if err != nil {
		da.Close()
		return nil, err
	}
	return a, nil
}

// Dir returns the artifact's directory.
func (a *Artifact) Dir() string { return a.dir }

// Target returns the target list the artifact was compiled for.
func (a *Artifact) Target() string { return a.art.Metadata.Target }

// Inputs describes the model's inputs, in order.
func (a *Artifact) Inputs() []TensorInfo { return cloneInfos(a.inputs) }

// Outputs describes the model's outputs, in order.
func (a *Artifact) Outputs() []TensorInfo { return cloneInfos(a.outputs) }

func cloneInfos(in []TensorInfo) []TensorInfo {
	out := make([]TensorInfo, len(in))
	for i, t := range in {
		out[i] = TensorInfo{Name: t.Name, DType: t.DType, Shape: t.Shape.Clone()}
	}
	return out
}

// errClosed is returned by the methods of a closed artifact or session.
var errClosed = errors.New("kiln: use of a closed artifact or session")

// Close releases the artifact once its sessions are closed too (sessions
// keep working until then), and removes the directory Compile made when
// Options.Out was empty. Later NewSession calls fail.
func (a *Artifact) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	return a.releaseLocked()
}

// releaseLocked frees the artifact when it is closed and no session is
// open (a.mu held).
func (a *Artifact) releaseLocked() error {
	if !a.closed || a.sessions > 0 {
		return nil
	}
	a.art.Close()
	if a.temp {
		a.temp = false
		return os.RemoveAll(filepath.Dir(a.dir))
	}
	return nil
}
