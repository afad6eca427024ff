package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/kiln-dev/kiln/aot"
	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/internal/escape"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
	tirtransform "github.com/kiln-dev/kiln/tir/transform"
)

// Executors Config.Executor accepts.
const (
	ExecutorGraph = "graph"
	ExecutorAOT   = "aot"
)

// AOTOptions configure the ahead-of-time executor.
type AOTOptions struct {
	// UnpackedAPI calls the host's kernels through their unpacked form
	// (raw pointers, no argument checks) instead of the packed one.
	UnpackedAPI bool
	// ConstantsAsCArray writes the weights as a C array; otherwise as a
	// binary file included by the assembler. Nil chooses the C array up
	// to 4 MiB of constants.
	ConstantsAsCArray *bool
}

// AOTMeta is the "aot" section of an AOT artifact's metadata.json.
type AOTMeta struct {
	// Module is the C name of the model: the entry is kiln_<Module>_run.
	Module string `json:"module"`
	// WorkspaceBytes is the planned workspace pool.
	WorkspaceBytes int64 `json:"workspace_bytes"`
	// LowerBound is the largest total size of simultaneously live
	// intermediate tensors: no plan can use less.
	LowerBound int64 `json:"workspace_lower_bound"`
	// Algorithm is the planner whose result was kept.
	Algorithm string `json:"planner"`
	// ConstantsBytes is the constants pool.
	ConstantsBytes int64 `json:"constants_bytes"`
	// Binary is the test program built from the project (main.c).
	Binary string `json:"binary"`
}

// constantsCArrayLimit is the largest constants pool written as a C array
// by default.
const constantsCArrayLimit = 4 << 20

// aotModuleName is the C name of the model.
func aotModuleName(name string) string {
	if name == "" {
		name = "default"
	}
	return aot.Identifier(strings.ToLower(name))
}

// liftWorkspaces applies LiftWorkspaces to every PrimFunc: the AOT
// executor plans their scratch buffers.
func liftWorkspaces(prims *tir.Module) (*tir.Module, error) {
	return tirtransform.LiftWorkspaces().Apply(prims)
}

// aotBuild is what the AOT codegen stage leaves for its link stage.
type aotBuild struct {
	bopts  cgen.BuildOptions
	module string
	calls  int
	gen    *aot.Generated
}

// stageAOTCodegen writes the AOT C project of the lowered model into the
// build directory: the host C, the C source modules, the memory plan, the
// run function and the Makefile.
func stageAOTCodegen(_ context.Context, s *state) error {
	cfg, low := s.cfg, s.low
	env := &hookEnv{cfg: low.cfg, labels: cfg.Labels, scratch: s.scratch}
	defPrims, hookMods, err := codegenTargets(env, low.prims)
	if err != nil {
		return err
	}
	if _, others, err := splitByTarget(low.cfg, defPrims); err != nil {
		return err
	} else if len(others) > 0 {
		return fmt.Errorf("--executor aot: target %s has functions of its own, but an AOT project is built for one CPU target (the host %s); use --executor graph, or place them on the host", others[0].target.Labelled(), low.cfg.Host.Labelled())
	}
	copts := cgen.Options{StackLimit: cgen.DefaultStackLimit, NoPipeline: true, AllowEmpty: true}
	applyCCodegen(low.cfg, &copts, nil)
	src, err := cgen.Generate(defPrims, copts)
	if err != nil {
		return fmt.Errorf("C codegen: %w", err)
	}
	s.src = src
	bopts := cgen.BuildOptionsForTarget(low.cfg.Host)
	applyCCodegen(low.cfg, nil, &bopts)
	files := map[string][]byte{cgen.SourceName: []byte(src.Code)}
	extUnpacked := map[string]runtime.UnpackedFunc{}
	for i, em := range append(append([]externalModule(nil), low.external...), hookMods...) {
		m, ok := em.module.(*runtime.CSourceModule)
		if !ok {
			return fmt.Errorf("target %s: its %q module cannot be called from the AOT executor's C (only C source modules can); use --executor graph", em.target.Kind.Name, em.module.Kind())
		}
		if strings.Contains(m.Code, "malloc(") {
			return fmt.Errorf("target %s: its generated C allocates with malloc, which the AOT executor's static memory plan does not allow", em.target.Kind.Name)
		}
		files[fmt.Sprintf("ext%d_%s.c", i, fileSafe(m.Label, em.target.Kind.Name))] = []byte(m.Code)
		for fn, u := range m.Unpacked {
			if !escape.IsCIdent(u.Symbol) || !slices.Contains(m.Funcs, fn) {
				return fmt.Errorf("target %s: its C module's unpacked function %q (for %q) is not a C identifier or not one of its functions", em.target.Kind.Name, u.Symbol, fn)
			}
			extUnpacked[fn] = u
		}
		bopts.ExtraFlags = append(bopts.ExtraFlags, m.CFlags...)
		bopts.LDFlags = append(bopts.LDFlags, m.LDFlags...)
	}
	for _, f := range bopts.ExtraSources {
		files[f.Name] = f.Data
	}
	module := aotModuleName(cfg.ModuleName)
	prog, err := aotProgram(module, s.prog, low, src, extUnpacked, cfg.AOT.UnpackedAPI, s.outputNames, s.res)
	if err != nil {
		return err
	}
	asArray := aot.ConstantsBytes(prog.Constants) <= constantsCArrayLimit
	if cfg.AOT.ConstantsAsCArray != nil {
		asArray = *cfg.AOT.ConstantsAsCArray
	}
	gen, err := aot.Generate(prog, aot.Options{ConstantsAsCArray: asArray, LDLibs: bopts.LDFlags, CFlags: append(append([]string(nil), bopts.CPUFlags...), bopts.ExtraFlags...)})
	if err != nil {
		return err
	}
	for n, d := range gen.Files {
		files[n] = d
	}
	for name, data := range files {
		if err := writeFile(s.tmp, name, data); err != nil {
			return err
		}
	}
	if err := cgen.WriteHeaders(filepath.Join(s.tmp, "include")); err != nil {
		return err
	}
	s.aot = &aotBuild{bopts: bopts, module: module, calls: len(prog.Calls), gen: gen}
	s.res.Memory = []MemoryPool{{Device: "workspace", Tensors: len(prog.Temps), Bytes: gen.Plan.Size, LowerBound: gen.Plan.LowerBound, Algorithm: gen.Plan.Algorithm}}
	return nil
}

// stageAOTLink builds the project's test program and writes metadata.json.
func stageAOTLink(ctx context.Context, s *state) error {
	a := s.aot
	bin := "kiln_" + a.module
	if err := buildAOTBinary(ctx, s.tmp, bin, a.bopts); err != nil {
		return err
	}
	md := &s.res.Metadata
	md.Executor = ExecutorAOT
	md.Kernels = a.calls
	md.Params = "linked"
	md.AOT = &AOTMeta{Module: a.module, WorkspaceBytes: a.gen.Plan.Size, LowerBound: a.gen.Plan.LowerBound, Algorithm: a.gen.Plan.Algorithm, ConstantsBytes: a.gen.ConstantsBytes, Binary: bin}
	if err := recordHashes(s.tmp, md, bin); err != nil {
		return err
	}
	mj, err := json.MarshalIndent(md, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(s.tmp, "metadata.json", mj)
}

// buildAOTBinary compiles every .c file of dir into the test program with
// the flags of the project's Makefile plus -Werror: the generated C must
// compile warning-free.
func buildAOTBinary(ctx context.Context, dir, bin string, bopts cgen.BuildOptions) error {
	srcs, err := filepath.Glob(filepath.Join(dir, "*.c"))
	if err != nil {
		return err
	}
	sort.Strings(srcs)
	args := append(append([]string(nil), aot.CFlags...), "-Werror", "-Iinclude", "-I.")
	args = append(args, bopts.CPUFlags...)
	args = append(args, bopts.ExtraFlags...)
	for _, s := range srcs {
		args = append(args, filepath.Base(s))
	}
	args = append(args, "-o", bin, "-lm")
	args = append(args, bopts.LDFlags...)
	if err := cgen.RunCompilerContext(ctx, dir, bopts.CC, args, "the AOT project"); err != nil {
		return fmt.Errorf("C compiler: %w", err)
	}
	return cgen.CheckELF(filepath.Join(dir, bin), bopts.CC)
}

// aotProgram turns the executor program into the AOT executor's program:
// inputs and constants from its "null" nodes, one call per kernel node
// (with the workspaces LiftWorkspaces gave the PrimFunc as extra
// temporaries), outputs written in place by the kernels that produce them.
func aotProgram(module string, ep *execProgram, low *lowered, src *cgen.Source, extUnpacked map[string]runtime.UnpackedFunc, unpacked bool, outputNames []string, res *Result) (*aot.Program, error) {
	main := low.mod.Main()
	p := &aot.Program{Module: module}
	inputIndex := map[string]int{}
	for i, prm := range main.Params {
		tt, ok := prm.Type().(*ir.TensorType)
		if !ok {
			return nil, fmt.Errorf("aot: input %s is not a tensor", prm.Name)
		}
		inputIndex[prm.Name] = i
		p.Inputs = append(p.Inputs, aot.Tensor{Name: prm.Name, DType: tt.DType, Shape: tt.Shape})
		res.Metadata.Inputs = append(res.Metadata.Inputs, meta(prm.Name, tt))
	}
	gj, params := ep.graph, ep.params
	entryType := func(e int) aot.Tensor {
		return aot.Tensor{DType: ep.types[e].DType, Shape: ep.types[e].Shape.Clone()}
	}
	entryID := func(node, index int64) int { return int(gj.NodeRowPtr[node] + index) }
	// Outputs: the first head naming an entry gets it; later ones copy.
	headOf := map[int]int{}
	for k, h := range gj.Heads {
		e := entryID(h[0], h[1])
		t := entryType(e)
		name := fmt.Sprintf("out%d", k)
		if k < len(outputNames) && outputNames[k] != "" {
			name = outputNames[k]
		}
		t.Name = name
		p.Outputs = append(p.Outputs, t)
		res.Metadata.Outputs = append(res.Metadata.Outputs, TensorMeta{Name: name, DType: t.DType.String(), Shape: append([]int64{}, t.Shape...)})
		if _, dup := headOf[e]; !dup {
			headOf[e] = k
		}
	}
	refOf := map[int]aot.Ref{}
	funcInfo := map[string]cgen.FuncInfo{}
	for _, f := range src.Funcs {
		funcInfo[f.Symbol] = f
	}
	for n, node := range gj.Nodes {
		switch node.Op {
		case runtime.OpNull:
			if v, ok := params[node.Name]; ok {
				refOf[entryID(int64(n), 0)] = aot.Ref{Kind: aot.RefConstant, Index: len(p.Constants)}
				p.Constants = append(p.Constants, v)
				continue
			}
			i, ok := inputIndex[node.Name]
			if !ok {
				return nil, fmt.Errorf("aot: graph input %q is neither an input nor a parameter", node.Name)
			}
			refOf[entryID(int64(n), 0)] = aot.Ref{Kind: aot.RefInput, Index: i}
		case runtime.OpKiln:
			fn := ep.funcs[n]
			c := aot.Call{Func: fn}
			for _, in := range node.Inputs {
				r, ok := refOf[entryID(in[0], in[1])]
				if !ok {
					return nil, fmt.Errorf("aot: %s reads an entry computed later", fn)
				}
				c.Args = append(c.Args, r)
			}
			nout := gj.NodeRowPtr[n+1] - gj.NodeRowPtr[n]
			for i := int64(0); i < nout; i++ {
				e := entryID(int64(n), i)
				if k, ok := headOf[e]; ok {
					refOf[e] = aot.Ref{Kind: aot.RefOutput, Index: k}
				} else {
					t := entryType(e)
					t.Name = fmt.Sprintf("%s_out%d", fn, i)
					refOf[e] = aot.Ref{Kind: aot.RefTemp, Index: len(p.Temps)}
					p.Temps = append(p.Temps, t)
				}
				c.Args = append(c.Args, refOf[e])
			}
			if pf := low.prims.Lookup(fn); pf != nil {
				nws, _ := pf.Attrs[tirtransform.AttrWorkspaces].(int64)
				for _, v := range pf.Params[len(pf.Params)-int(nws):] {
					b := pf.BufferMap[v]
					c.Args = append(c.Args, aot.Ref{Kind: aot.RefTemp, Index: len(p.Temps)})
					p.Temps = append(p.Temps, aot.Tensor{Name: fn + "_" + b.Name, DType: b.DType, Shape: b.Shape})
				}
				if len(c.Args) != len(pf.Params) {
					return nil, fmt.Errorf("aot: %s takes %d arguments, the program passes %d", fn, len(pf.Params), len(c.Args))
				}
			}
			if fi, ok := funcInfo[fn]; ok && unpacked && fi.AllBuffers() {
				c.UnpackedDecl, c.Unpacked = fi.UnpackedDecl, fi.Unpacked
			} else if u, ok := extUnpacked[fn]; ok && unpacked {
				c.UnpackedDecl, c.Unpacked = u.Decl, u.Symbol
			}
			p.Calls = append(p.Calls, c)
		default:
			return nil, fmt.Errorf("aot: node %s (%s): the AOT executor runs on one device; device copies need the graph executor", node.Name, node.Op)
		}
	}
	for k, h := range gj.Heads {
		e := entryID(h[0], h[1])
		if r := refOf[e]; r.Kind != aot.RefOutput || r.Index != k {
			p.Copies = append(p.Copies, aot.Copy{From: r, Output: k})
		}
	}
	return p, nil
}

// runAOT runs an AOT artifact's test program on inputs (by name): each
// input is written to a raw file, the program writes each output to a
// raw file, which is read back.
func runAOT(ctx context.Context, dir string, md Metadata, inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	work, err := TempDir("", "kiln-aot-run-")
	if err != nil {
		return nil, err
	}
	defer RemoveTemp(work)
	var args []string
	for i, in := range md.Inputs {
		t, ok := inputs[in.Name]
		if !ok {
			return nil, fmt.Errorf("missing input %q", in.Name)
		}
		if t.DType.String() != in.DType || !t.Shape.Equal(ir.Shape(in.Shape)) {
			return nil, fmt.Errorf("input %q: got %s %v, want %s %v", in.Name, t.DType, t.Shape, in.DType, in.Shape)
		}
		p := filepath.Join(work, fmt.Sprintf("in%d.bin", i))
		if err := os.WriteFile(p, t.Data, 0o644); err != nil {
			return nil, err
		}
		args = append(args, p)
	}
	if len(inputs) != len(md.Inputs) {
		return nil, fmt.Errorf("got %d inputs, the model takes %d", len(inputs), len(md.Inputs))
	}
	for i := range md.Outputs {
		args = append(args, filepath.Join(work, fmt.Sprintf("out%d.bin", i)))
	}
	// An absolute path: exec must never search $PATH for the name.
	bin, err := filepath.Abs(filepath.Join(dir, md.AOT.Binary))
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: stopped: %w", md.AOT.Binary, ctx.Err())
		}
		return nil, fmt.Errorf("%s: %v: %s", md.AOT.Binary, err, strings.TrimSpace(out.String()))
	}
	var outs []*tensor.Tensor
	for i, o := range md.Outputs {
		raw, err := os.ReadFile(filepath.Join(work, fmt.Sprintf("out%d.bin", i)))
		if err != nil {
			return nil, err
		}
		dt, err := ir.ParseDType(o.DType)
		if err != nil {
			return nil, err
		}
		t, err := tensor.FromBytes(dt, ir.Shape(o.Shape), raw)
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", o.Name, err)
		}
		outs = append(outs, t)
	}
	return outs, nil
}
