// Package driver is kiln's compilation driver: it runs the graph passes,
// lowers every fused primitive function to TIR (LowerTE), generates and
// compiles C for the host target, and emits the graph executor's program
// and parameters. The result is an artifact directory that package runtime
// loads and runs (LoadArtifact).
//
// Artifact layout (all files written to a temporary directory and moved into
// place only when everything succeeded, so a failed compile leaves nothing):
//
//	OUT/metadata.json   kiln version, target, inputs and outputs with types
//	OUT/graph.json      the graph executor program (see package runtime)
//	OUT/params.bin      weights, in runtime's params format (absent when
//	                    Config.LinkParams put them inside kiln_lib.so)
//	OUT/kiln_lib.so     the compiled operators
//	OUT/kiln_lib.c      the generated C, kept for inspection (with
//	                    kiln_registry.c, and kiln_threads.c: the thread
//	                    pool, in a threaded library)
//	OUT/include/        the ABI header the C was compiled against
package driver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kiln-dev/kiln/aot"
	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/device"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/transform"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/partition"
	"github.com/kiln-dev/kiln/passconfig"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

// Version is written into every artifact's metadata.
const Version = "0.1.0"

// Config describes one compilation.
type Config struct {
	// Host is the host target (kind "c"). Required.
	Host *targets.Target
	// Targets are the compilation's primitive targets in the user's order
	// (the -t list); Host is added when it is not among them. Empty means
	// Host alone.
	Targets []*targets.Target
	// Kinds is where the build finds the kind a function of an already
	// partitioned module names in its Compiler attribute when no target
	// of that kind is in Targets (UMA's partition-then-build with only
	// the host as target): such a kind joins the compilation with its
	// default options, for its hooks only (partitioning does not give it
	// more). nil means targets.Default.
	Kinds *targets.Registry
	// Labels are the compilation's target labels (--target-label and the
	// static ones); nil means none. Placement rules and on_device
	// annotations name devices through them.
	Labels *targets.Labels
	// Placement places ONNX nodes or operators on devices ("label:id")
	// before device planning (device.Place).
	Placement []device.Rule
	// ModuleName names the model in the symbols of partitioned functions
	// (kiln_<module>_<compiler>_main_<n>); empty means "default".
	ModuleName string
	// RequireOffload makes partitioning fail when a call stays on the host
	// while external targets are in the list (full offload).
	RequireOffload bool
	// Report, when set, receives the partition report (when the target
	// list has external code generators).
	Report *partition.Report
	// Decide, when set, chooses among the external targets that take a
	// call (partition.Options.Decide; CompileMeasured sets it); nil is
	// greedy partitioning in list order.
	Decide partition.Decider
	// Out is the artifact directory to create. An existing kiln artifact
	// there is replaced; any other existing non-empty directory is an error.
	Out string
	// PassConfig holds the optimisation level, the passes to skip and the
	// passes' options (package passconfig); nil is the default.
	PassConfig *passconfig.Config
	// LinkParams embeds the weights in the library as read-only data
	// instead of writing them to params.bin next to it.
	LinkParams bool
	// DumpGraph, when set, receives the graph IR after every pass.
	DumpGraph io.Writer
	// Progress, when set, receives one line per finished stage with its time.
	Progress io.Writer
	// Executor is ExecutorGraph (the default when empty: graph.json run by
	// the runtime's graph executor) or ExecutorAOT (a C project with one
	// run function and static memory; see package aot).
	Executor string
	// AOT configures the AOT executor.
	AOT AOTOptions
	// Verify runs the graph and TIR verifiers after every stage (tests and
	// --verify): an error names the stage that broke an invariant.
	Verify bool
	// DumpDir, when set, receives the IR after every stage (or only after
	// DumpAfter) as NN-stage.txt: the graph, then the TIR, then the
	// generated C.
	DumpDir string
	// DumpAfter names the one stage to dump (empty: all).
	DumpAfter string
	// Tuning, when set, gives tunable operator implementations their
	// knobs (package tune's records: kiln compile --tuning).
	Tuning strategy.Tuning
	// Source, when set, records where the model came from in the
	// artifact's metadata (Metadata.Source): kiln compile uses it to
	// tell an artifact of the same model, which it replaces, from
	// another model's, which it keeps unless forced.
	Source *SourceMeta
	// Cache, when set, keeps the objects of the host library's C across
	// compiles (codegen/c.Cache): a recompile of an unchanged model does
	// not run the C compiler on it again.
	Cache *cgen.Cache
}

// TensorMeta names and types one model input or output.
type TensorMeta struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
}

// Metadata is metadata.json.
type Metadata struct {
	Kiln     string       `json:"kiln"`
	Executor string       `json:"executor"`
	Target   string       `json:"target"`
	Inputs   []TensorMeta `json:"inputs"`
	Outputs  []TensorMeta `json:"outputs"`
	Kernels  int          `json:"kernels"`
	// Params is "file" (params.bin) or "linked" (inside kiln_lib.so).
	Params string `json:"params"`
	// Devices lists the devices the program uses ("cpu:0", "cpu:1", ...).
	Devices []string `json:"devices,omitempty"`
	// Modules are the runtime modules besides kiln_lib.so that target
	// hooks built, imported by the library when the artifact is loaded.
	Modules []ModuleMeta `json:"modules,omitempty"`
	// Constants names the file holding the constants target modules
	// asked for (ConstantUpdater), or is empty.
	Constants string `json:"constants,omitempty"`
	// AOT describes an AOT artifact (executor "aot"), or is nil.
	AOT *AOTMeta `json:"aot,omitempty"`
	// Source is the model the artifact was compiled from, when the
	// compile recorded it.
	Source *SourceMeta `json:"source,omitempty"`
	// Files maps each file LoadArtifact opens or runs (relative path) to
	// the hex SHA-256 of its content, checked before it is used.
	Files map[string]string `json:"files,omitempty"`
}

// SourceMeta identifies the model an artifact was compiled from.
type SourceMeta struct {
	// Model is the model file's base name.
	Model string `json:"model"`
	// SHA256 is the hex SHA-256 of the model file's content.
	SHA256 string `json:"sha256"`
}

// Same reports whether s and o are both set and name the same model file
// (name and content).
func (s *SourceMeta) Same(o *SourceMeta) bool {
	return s != nil && o != nil && *s == *o
}

// SourceOf reads the model file at path and returns its SourceMeta.
func SourceOf(path string) (*SourceMeta, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return &SourceMeta{Model: filepath.Base(path), SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// ReadMetadata reads the metadata.json of the artifact directory dir.
func ReadMetadata(dir string) (Metadata, error) {
	var md Metadata
	data, err := os.ReadFile(filepath.Join(dir, "metadata.json"))
	if err != nil {
		return md, fmt.Errorf("%s is not a kiln artifact: %w", dir, err)
	}
	if err := json.Unmarshal(data, &md); err != nil {
		return md, fmt.Errorf("%s/metadata.json: %w", dir, err)
	}
	return md, nil
}

// Result describes a finished compilation.
type Result struct {
	Dir      string
	Metadata Metadata
	// Stages records every stage of the pipeline: time and IR sizes.
	Stages []StageStats
	// GraphPasses records every pass of the graph-passes stage: its time,
	// or that it was skipped.
	GraphPasses []transform.PassStat
	// Impls maps each compiled function to the implementations chosen for its ops.
	Impls map[string]string
	// Memory describes the planned memory pools: per device for the
	// graph executor, the workspace for AOT.
	Memory []MemoryPool
	// Build is what the link stage's C build did: translation units,
	// objects from the cache, compile and link times.
	Build cgen.BuildStats
}

// Compile builds mod (whose main is the model) into an artifact directory
// (CompileContext without a deadline).
func Compile(mod *graph.Module, outputNames []string, cfg Config) (*Result, error) {
	return CompileContext(context.Background(), mod, outputNames, cfg)
}

// CompileContext builds mod (whose main is the model) into an artifact
// directory. outputNames names main's outputs in order (empty: out0,
// out1, ...). It runs the stages of NewPipeline(cfg) in order — placement
// and targets; the graph passes with partitioning and device planning;
// the targets' hooks (RelayToTIR, then RelayToRuntime, then constant
// updating, each kind once, in target-list order); LowerTE for the remaining primitive calls, each
// for the target planning chose; the TIR passes; the executor program;
// per target its TIRToRuntime hook or the default C code generation; the
// link of one library holding the default code and every C source module
// (other modules saved beside it); the package — and stops between
// stages when ctx is done. A failed or cancelled compile leaves nothing.
func CompileContext(ctx context.Context, mod *graph.Module, outputNames []string, cfg Config) (res *Result, err error) {
	defer recoverInternal("compile", &err)
	if cfg.Host == nil || cfg.Host.Kind != targets.C {
		return nil, fmt.Errorf("build: the host target must be of kind \"c\"")
	}
	if cfg.Out == "" {
		return nil, fmt.Errorf("build: no output directory")
	}
	if cfg.DumpAfter != "" && !slices.Contains(StageNames(), cfg.DumpAfter) {
		return nil, fmt.Errorf("build: --dump-after %q: no such stage (stages: %s)", cfg.DumpAfter, strings.Join(StageNames(), ", "))
	}
	p, err := NewPipeline(cfg)
	if err != nil {
		return nil, err
	}
	res = &Result{Dir: cfg.Out}
	scratch, err := os.MkdirTemp("", "kiln-hooks-")
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	TrackTemp(scratch)
	defer removeTemp(scratch)
	tmp, err := newBuildDir(cfg.Out)
	if err != nil {
		return nil, err
	}
	defer removeTemp(tmp)
	s := &state{cfg: cfg, outputNames: outputNames, scratch: scratch, tmp: tmp, res: res, mod: mod}
	if err := p.run(ctx, s); err != nil {
		return nil, err
	}
	return res, nil
}

// encodeParams is runtime.SaveParams into a buffer grown once to the
// encoding's size (growing it by doubling cleared and copied resnet18's
// 45 MB of weights several times: 0.8 s of a 1.5 s cached compile).
func encodeParams(params map[string]*tensor.Tensor) ([]byte, error) {
	var buf bytes.Buffer
	size := 64
	for n, t := range params {
		size += len(n) + len(t.Data) + 64 + 8*len(t.Shape)
	}
	buf.Grow(size)
	if err := runtime.SaveParams(&buf, params); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeHashedParams writes params with runtime.SaveParams to a new file
// at path and returns the file's SHA-256 (hex, as recordHashes records
// it), computed as it is written.
func writeHashedParams(path string, params map[string]*tensor.Tensor) (string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fmt.Errorf("build: %w", err)
	}
	h := sha256.New()
	if err := runtime.SaveParams(io.MultiWriter(f, h), params); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("build: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// stageLink builds the library: the generated C, every C source module
// and (with LinkParams) the weights.
func stageLink(ctx context.Context, s *state) error {
	var err error
	bopts := cgen.BuildOptionsForTarget(s.low.cfg.Host)
	applyCCodegen(s.low.cfg, nil, &bopts)
	bopts.Cache = s.cfg.Cache
	bopts.Stats = &s.res.Build
	mods, err := composeModules(s.tmp, append(s.low.external, s.hookMods...), &bopts)
	if err != nil {
		return err
	}
	if err := addTargetSources(s.low.cfg.Host, s.others, &bopts); err != nil {
		return err
	}
	s.res.Metadata.Modules = mods
	if s.cfg.LinkParams {
		if s.paramsBin, err = encodeParams(s.prog.params); err != nil {
			return err
		}
		// The assembler finds the blob's relative name in its working
		// directory, the build directory: no path (which may hold commas
		// or quotes) goes into a flag or the assembly.
		bopts.ExtraSources = append(bopts.ExtraSources,
			cgen.File{Name: linkedParamsBlob, Data: s.paramsBin},
			cgen.File{Name: "kiln_params.c", Data: []byte(linkedParamsSource(len(s.paramsBin)))})
	}
	// A graph artifact's weights go to params.bin while the C compiler
	// runs: writing and hashing resnet18's 76 MB took 0.2 s of a 3 s
	// cold compile after it, and the compiler leaves a core idle while
	// its last unit finishes. The writer is joined before the stage
	// returns, whatever the compiler did.
	var params chan error
	if s.cfg.Executor != ExecutorAOT && !s.cfg.LinkParams {
		params = make(chan error, 1)
		go func() {
			h, err := writeHashedParams(filepath.Join(s.tmp, "params.bin"), s.prog.params)
			s.paramsHash = h
			params <- err
		}()
	}
	_, err = cgen.BuildContext(ctx, s.src, s.tmp, bopts)
	if params != nil {
		if perr := <-params; err == nil && perr != nil {
			return perr
		}
	}
	if err != nil {
		return fmt.Errorf("C compiler: %w", err)
	}
	if s.cfg.LinkParams {
		// The weights are inside the library now; the blob was only the
		// assembler's input.
		if err := os.Remove(filepath.Join(s.tmp, linkedParamsBlob)); err != nil {
			return err
		}
	}
	return nil
}

// stagePackage writes metadata.json (with the content hashes) and the
// remaining files, and publishes the artifact.
func stagePackage(_ context.Context, s *state) error {
	if s.cfg.Executor != ExecutorAOT {
		if err := s.packageGraph(); err != nil {
			return err
		}
	}
	return replaceDir(s.tmp, s.cfg.Out)
}

// packageGraph writes a graph artifact's files and metadata.json.
func (s *state) packageGraph() error {
	low, md := s.low, &s.res.Metadata
	md.Executor = "graph"
	md.Kernels = low.prims.Len() + len(low.external)
	md.Params = "file"
	if s.cfg.LinkParams {
		md.Params = "linked"
	}
	main := low.mod.Main()
	for _, prm := range main.Params {
		md.Inputs = append(md.Inputs, meta(prm.Name, prm.Type()))
	}
	outTypes, err := flatTensorTypes(main.Body.Type())
	if err != nil {
		return err
	}
	for i, t := range outTypes {
		name := fmt.Sprintf("out%d", i)
		if i < len(s.outputNames) && s.outputNames[i] != "" {
			name = s.outputNames[i]
		}
		md.Outputs = append(md.Outputs, meta(name, t))
	}
	if err := os.WriteFile(filepath.Join(s.tmp, "graph.json"), s.gjText, 0o644); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	hashed := []string{"kiln_lib.so", "graph.json"}
	// written holds the hashes of the files hashed as they were written.
	written := map[string]string{}
	if !s.cfg.LinkParams {
		// The link stage streamed the weights to params.bin beside the C
		// compiler (encoding them in memory first cost a model-sized
		// buffer: 45 MB of fresh pages for resnet18, slow to fault in a
		// VM).
		if s.paramsHash == "" {
			return fmt.Errorf("build: internal error: params.bin was not written before packaging")
		}
		written["params.bin"] = s.paramsHash
	}
	if len(low.consts) > 0 {
		// Streamed to the file: the external modules' weights can be
		// most of the model.
		h, err := writeHashedParams(filepath.Join(s.tmp, constantsFile), low.consts)
		if err != nil {
			return err
		}
		md.Constants = constantsFile
		written[constantsFile] = h
	}
	for _, m := range md.Modules {
		hashed = append(hashed, m.File)
	}
	if err := recordHashes(s.tmp, md, hashed...); err != nil {
		return err
	}
	maps.Copy(md.Files, written)
	mj, err := json.MarshalIndent(md, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.tmp, "metadata.json"), mj, 0o644); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	return nil
}

func meta(name string, t ir.Type) TensorMeta {
	tt := t.(*ir.TensorType)
	return TensorMeta{Name: name, DType: tt.DType.String(), Shape: append([]int64{}, tt.Shape...)}
}

// Artifact is a loaded artifact ready to run.
type Artifact struct {
	Metadata Metadata
	// Exec runs a graph artifact; nil for an AOT artifact, whose Run
	// executes its compiled test program.
	Exec *runtime.GraphExecutor
	dir  string
}

// Close releases the executor (nothing for an AOT artifact).
func (a *Artifact) Close() {
	if a.Exec != nil {
		a.Exec.Close()
	}
}

// LoadArtifact loads an artifact directory: its library, graph program and
// parameters.
func LoadArtifact(dir string) (art *Artifact, err error) {
	defer recoverInternal("loading "+dir, &err)
	md, err := ReadMetadata(dir)
	if err != nil {
		return nil, err
	}
	if md.Executor == ExecutorAOT {
		if md.AOT == nil || md.AOT.Binary == "" || md.AOT.Module == "" || aot.Identifier(md.AOT.Module) != md.AOT.Module {
			return nil, fmt.Errorf("%s/metadata.json: an AOT artifact without a valid \"aot\" section", dir)
		}
		if _, err := verifyFile(dir, &md, md.AOT.Binary); err != nil {
			return nil, err
		}
		return &Artifact{Metadata: md, dir: dir}, nil
	}
	// Every file is checked (confined to dir, content hash) before any is
	// opened.
	need := []string{"kiln_lib.so", "graph.json"}
	if md.Params != "linked" {
		need = append(need, "params.bin")
	}
	if md.Constants != "" {
		need = append(need, md.Constants)
	}
	for _, m := range md.Modules {
		need = append(need, m.File)
	}
	path := map[string]string{}
	for _, rel := range need {
		p, err := verifyFile(dir, &md, rel)
		if err != nil {
			return nil, err
		}
		path[rel] = p
	}
	lib, err := runtime.LoadLibrary(path["kiln_lib.so"])
	if err != nil {
		return nil, err
	}
	if err := loadModules(dir, md, lib, path); err != nil {
		return nil, err
	}
	if md.Constants != "" {
		cf, err := os.Open(path[md.Constants])
		if err != nil {
			return nil, err
		}
		consts, err := runtime.ReadParams(cf)
		cf.Close()
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", dir, md.Constants, err)
		}
		if err := runtime.SetConstants(lib, consts); err != nil {
			return nil, err
		}
	}
	gj, err := os.ReadFile(path["graph.json"])
	if err != nil {
		return nil, err
	}
	ex, err := runtime.NewGraphExecutor(gj, lib)
	if err != nil {
		return nil, fmt.Errorf("%s/graph.json: %w", dir, err)
	}
	if md.Params == "linked" {
		dso, ok := lib.(*runtime.DSOModule)
		if !ok {
			return nil, fmt.Errorf("%s: linked parameters need a shared library module", dir)
		}
		params, found, err := dso.LinkedParams()
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("%s: metadata says the parameters are linked, but kiln_lib.so has none", dir)
		}
		if err := ex.SetParams(params); err != nil {
			return nil, err
		}
		return &Artifact{Metadata: md, Exec: ex}, nil
	}
	pf, err := os.Open(path["params.bin"])
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	if err := ex.LoadParams(pf); err != nil {
		return nil, fmt.Errorf("%s/params.bin: %w", dir, err)
	}
	return &Artifact{Metadata: md, Exec: ex}, nil
}

// Run sets the inputs by name, runs and returns the outputs in order.
func (a *Artifact) Run(inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	return a.RunContext(context.Background(), inputs)
}

// RunContext is Run that stops once ctx is done: the graph executor before
// its next step, the AOT program by being killed. Its temporary files are
// removed either way.
func (a *Artifact) RunContext(ctx context.Context, inputs map[string]*tensor.Tensor) (outs []*tensor.Tensor, err error) {
	defer recoverInternal("run", &err)
	if a.Exec == nil {
		return runAOT(ctx, a.dir, a.Metadata, inputs)
	}
	return a.Exec.ExecuteContext(ctx, inputs)
}

// linkedParamsBlob is the params file the assembler embeds with .incbin.
const linkedParamsBlob = "kiln_params.bin"

// linkedParamsSource is a C file that embeds the params blob read-only in
// the library under runtime.LinkedParamsSymbol, with its size under
// runtime.LinkedParamsSizeSymbol. .incbin reads the blob at build time, so
// the weights never pass through a C array literal (which would make the
// compiler slow and the source huge).
func linkedParamsSource(n int) string {
	return fmt.Sprintf(`/* Weights linked into the library by kiln (see driver.Config.LinkParams). */
#include <stdint.h>

__asm__(
    ".section .rodata\n"
    ".global %[1]s\n"
    ".type %[1]s, @object\n"
    ".balign 64\n"
    "%[1]s:\n"
    ".incbin \"%[2]s\"\n"
    ".previous\n");

const uint64_t %[3]s = %[4]dULL;
`, runtime.LinkedParamsSymbol, linkedParamsBlob, runtime.LinkedParamsSizeSymbol, n)
}

// recoverInternal is the safety net of the package's entry points: a
// panic below them (a bug: no input should cause one) becomes an error
// saying so, and a tensor the memory budget refused an ordinary error,
// instead of a crash of the program that embeds kiln.
func recoverInternal(what string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	if ae, ok := r.(*tensor.AllocError); ok {
		*err = fmt.Errorf("%s: %w", what, ae.Err)
		return
	}
	*err = fmt.Errorf("%s: internal error: %v (please report this with the model)", what, r)
}
