package c

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/internal/budget"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/runtime/include"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/transform"
)

// DefaultStackLimit is the largest allocation (in bytes) placed on the
// stack when Options.StackLimit is zero.
const DefaultStackLimit = 16 << 10

// Options configures Generate. The zero value is valid but conservative
// (no OpenMP, no heap allocation); HostOptions returns the settings for a
// host shared library.
type Options struct {
	// Includes are extra headers, emitted after the standard ones in
	// order: "<foo.h>" and "\"foo.h\"" are used as written, a bare name
	// is quoted, and a string starting with '#' is emitted verbatim as a
	// line. Target hooks append to it.
	Includes []string
	// OpenMP makes the library's parallel loops parallel: each becomes a
	// function of a range of its iterations, which kiln_parallel_for runs
	// on OpenMP teams (Build compiles with -fopenmp) or, with ThreadPool,
	// on the library's own threads. Without it, parallel loops are plain
	// loops behind a pragma macro that is empty without _OPENMP.
	OpenMP bool
	// ThreadPool (with OpenMP) runs parallel loops on kiln's own thread
	// pool instead of OpenMP teams: Build then compiles with -pthread and
	// -fopenmp-simd (OpenMP's simd pragmas without its runtime). Leave it
	// off for a library that shares the process with other OpenMP code
	// that runs between its kernels (oneDNN): two pools spinning for the
	// same cores starve each other.
	ThreadPool bool
	// StackLimit is the largest Allocate (in bytes) that becomes a stack
	// array; 0 means DefaultStackLimit.
	StackLimit int64
	// AllowMalloc lets allocations above StackLimit use malloc/free. When
	// false they are an error (the AOT flow plans workspaces instead).
	AllowMalloc bool
	// AllocHook is asked about allocations in storage scopes other than
	// "global" and "local". When it returns ok, code is a C expression
	// giving the address of the buffer's storage (e.g. a scratchpad
	// address); the generator declares `T* name = (T*)(code);` and frees
	// nothing. Otherwise the scope is an error.
	AllocHook func(a *tir.Allocate) (code string, ok bool)
	// ReplaceCallExtern lets a vendor emit custom C for call_extern: it
	// receives the extern name and the C text of each argument and, when
	// it returns ok, its text replaces the call expression (no prototype
	// is then generated for that call).
	ReplaceCallExtern func(name string, args []string) (code string, ok bool)
	// DeclaredExterns names external functions whose prototypes come from
	// Includes; the generator emits `extern` prototypes (inferred from the
	// argument types) only for the other call_extern targets.
	DeclaredExterns []string
	// NoRuntimeDefs omits the definitions of kiln_set_last_error,
	// kiln_get_last_error and kiln_set_num_threads (when another
	// translation unit of the same library provides them).
	NoRuntimeDefs bool
	// ExprHook lets a target's own code generator (a TIRToRuntime hook
	// built on this one) print some expressions its way: it receives each
	// expression and a function printing sub-expressions the normal way,
	// and when it returns ok its text is used.
	ExprHook func(e tir.PrimExpr, sub func(tir.PrimExpr) string) (code string, ok bool)
	// AllowEmpty lets Generate produce a translation unit with no
	// functions (only the runtime definitions), for a library whose
	// functions all come from other translation units.
	AllowEmpty bool
	// Pipeline lowers the module before code generation; nil runs
	// transform.NewPipeline() (the built-in passes). Set NoPipeline for a
	// module that has been through the pipeline already; only
	// FlattenBuffers is then applied (it is a no-op on flat buffers).
	Pipeline   *transform.Pipeline
	NoPipeline bool
}

// pool reports whether the library's parallel loops run on kiln's pool.
func (o Options) pool() bool { return o.OpenMP && o.ThreadPool }

// HostOptions returns the options of a host library: parallel loops on
// kiln's thread pool, heap allocation allowed, the default stack limit.
func HostOptions() Options {
	return Options{OpenMP: true, ThreadPool: true, AllowMalloc: true, StackLimit: DefaultStackLimit}
}

// Source is one generated C translation unit.
type Source struct {
	// Code is the C text.
	Code string
	// Funcs describes the exported functions in module order.
	Funcs []FuncInfo
	// OpenMP is Options.OpenMP: Build compiles with -fopenmp when set
	// (with ThreadPool, -pthread -fopenmp-simd).
	OpenMP bool
	// ThreadPool is Options.ThreadPool (when OpenMP is set).
	ThreadPool bool

	// parts re-assembles Code as several translation units (Units); nil
	// for a Source not made by Generate.
	parts *unitParts
}

// FuncInfo describes one generated PrimFunc.
type FuncInfo struct {
	// Name is the PrimFunc's name.
	Name string
	// Symbol is the packed function (int32_t Symbol(kiln_tensor*, int32_t)).
	Symbol string
	// Unpacked is the symbol of the function taking raw pointers.
	Unpacked string
	// UnpackedDecl is the C prototype of the unpacked function (without
	// the semicolon), e.g. "int32_t f_unpacked(float* restrict A)".
	UnpackedDecl string
	// Params describes each parameter in order, with its logical
	// (pre-flattening) shape: the shape the packed wrapper checks.
	Params []ParamInfo
}

// AllBuffers reports whether every parameter is a buffer: then the
// unpacked form takes one pointer per tensor and nothing else, which is
// how the AOT executor can call it.
func (fi FuncInfo) AllBuffers() bool {
	for _, p := range fi.Params {
		if p.Kind != "buffer" {
			return false
		}
	}
	return true
}

// ParamInfo describes one parameter of a generated function.
type ParamInfo struct {
	Name  string
	DType ir.DType
	Shape ir.Shape
	// Kind is "buffer", "scalar" (passed as a 0-d tensor of DType in the
	// packed form) or "handle" (an opaque pointer: the tensor's data).
	Kind string
}

// Header returns a C header declaring every generated function (packed
// and unpacked), for code that calls them directly, such as an AOT
// executor's entry function.
func (s *Source) Header() string {
	var b strings.Builder
	b.WriteString("/* Generated by kiln codegen/c. Do not edit. */\n")
	b.WriteString("#ifndef KILN_LIB_H_\n#define KILN_LIB_H_\n\n#include <stdbool.h>\n#include <stdint.h>\n#include \"" + include.RuntimeAPIHeader + "\"\n\n")
	b.WriteString("#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n")
	for _, f := range s.Funcs {
		// restrict on a parameter does not change the function type; it is
		// dropped so the header also compiles as C++.
		fmt.Fprintf(&b, "int32_t %s(kiln_tensor* args, int32_t num_args);\n%s;\n", f.Symbol, strings.ReplaceAll(f.UnpackedDecl, "* restrict ", "* "))
	}
	b.WriteString("\n#ifdef __cplusplus\n}\n#endif\n\n#endif /* KILN_LIB_H_ */\n")
	return b.String()
}

// genError carries a user-facing error out of the emitter.
type genError struct{ err error }

func failf(format string, args ...any) {
	panic(genError{fmt.Errorf(format, args...)})
}

// Generate turns every PrimFunc of m into C: for each function an
// unpacked form `int32_t SYM_unpacked(T0* restrict p0, ...)` and a packed
// wrapper `int32_t SYM(kiln_tensor* args, int32_t num_args)` that checks
// its arguments against the parameters' logical shapes and dtypes. The
// module is first run through the TIR pipeline (see Options.Pipeline).
// Pointer parameters are restrict-qualified unless the function's
// tir.noalias attribute is false (buffers may alias). Output is
// deterministic.
func Generate(m *tir.Module, opts Options) (src *Source, err error) {
	if m == nil {
		m = &tir.Module{}
	}
	if m.Len() == 0 {
		if !opts.AllowEmpty {
			return nil, fmt.Errorf("codegen/c: empty module")
		}
		g := &gen{opts: opts, helpers: map[string]bool{}, externs: map[string]*externDecl{}, declared: map[string]bool{}}
		return &Source{Code: g.assemble(""), OpenMP: opts.OpenMP, ThreadPool: opts.pool()}, nil
	}
	if opts.StackLimit == 0 {
		opts.StackLimit = DefaultStackLimit
	}
	// Logical parameter buffers, before flattening.
	logical := map[string]map[*tir.Var]*tir.Buffer{}
	for _, f := range m.Funcs() {
		lb := map[*tir.Var]*tir.Buffer{}
		src := f.BufferMap
		if f.PreflattenedBufferMap != nil {
			src = f.PreflattenedBufferMap
		}
		for k, b := range src {
			lb[k] = b
		}
		logical[f.Name] = lb
	}
	lowered, err := lowerModule(m, opts)
	if err != nil {
		return nil, err
	}
	if err := tir.VerifyModule(lowered); err != nil {
		return nil, fmt.Errorf("codegen/c: %w", err)
	}
	g := &gen{opts: opts, helpers: map[string]bool{}, externs: map[string]*externDecl{}, declared: map[string]bool{}}
	for _, n := range opts.DeclaredExterns {
		g.declared[n] = true
	}
	defer func() {
		if r := recover(); r != nil {
			ge, ok := r.(genError)
			if !ok {
				panic(r)
			}
			src, err = nil, fmt.Errorf("codegen/c: %w", ge.err)
		}
	}()
	g.reserve(lowered)
	var body strings.Builder
	var infos []FuncInfo
	parts := &unitParts{g: g}
	seen := map[string]string{}
	for _, f := range lowered.Funcs() {
		g.fnKernels = nil
		info := g.funcInfo(f, logical[f.Name])
		if other, dup := seen[info.Symbol]; dup {
			failf("functions %s and %s both map to the C symbol %s", other, f.Name, info.Symbol)
		}
		seen[info.Symbol] = f.Name
		fg := newFuncGen(g, f, info)
		fg.emitUnpacked()
		fg.emitPacked(logical[f.Name])
		code := fg.pre.String() + fg.b.String()
		body.WriteString(code)
		infos = append(infos, fg.info)
		parts.funcs = append(parts.funcs, funcPiece{code: code, kernels: g.fnKernels})
	}
	return &Source{Code: g.assemble(body.String()), Funcs: infos, OpenMP: opts.OpenMP, ThreadPool: opts.pool(), parts: parts}, nil
}

func lowerModule(m *tir.Module, opts Options) (*tir.Module, error) {
	if opts.NoPipeline {
		out, err := transform.FlattenBuffers().Apply(m)
		if err != nil {
			return nil, fmt.Errorf("codegen/c: %w", err)
		}
		return out, nil
	}
	p := opts.Pipeline
	if p == nil {
		p = transform.NewPipeline()
	}
	out, err := p.Run(m)
	if err != nil {
		return nil, fmt.Errorf("codegen/c: %w", err)
	}
	return out, nil
}

// gen is the module-level state of one Generate call.
type gen struct {
	opts     Options
	helpers  map[string]bool
	externs  map[string]*externDecl
	declared map[string]bool
	// reserved holds names no local variable may take: function symbols
	// and extern names of the whole module.
	reserved map[string]bool
	// kernels are the tir.Kernels the module calls, in order of first
	// use, each emitted once.
	kernels []tir.Kernel
	// fnKernels are the kernels the function being generated calls.
	fnKernels []tir.Kernel
}

// useKernel records a kernel the module calls. Two different kernels
// with one symbol are an error.
func (g *gen) useKernel(k tir.Kernel) {
	if !slices.ContainsFunc(g.fnKernels, func(o tir.Kernel) bool { return o.Symbol() == k.Symbol() }) {
		g.fnKernels = append(g.fnKernels, k)
	}
	for _, o := range g.kernels {
		if o.Symbol() == k.Symbol() {
			if o != k && o.Source() != k.Source() {
				failf("two different kernels are named %s", k.Symbol())
			}
			return
		}
	}
	if !isCIdent(k.Symbol()) {
		failf("kernel name %q is not a valid C identifier", k.Symbol())
	}
	g.kernels = append(g.kernels, k)
}

type externDecl struct {
	ret  string
	args []string
}

// reserve collects the module-wide names locals must avoid.
func (g *gen) reserve(m *tir.Module) {
	g.reserved = map[string]bool{"args": true, "num_args": true}
	for _, f := range m.Funcs() {
		sym := symbolOf(f)
		g.reserved[sym] = true
		g.reserved[sym+"_unpacked"] = true
		tir.Visit(f.Body, func(n tir.Node) bool {
			if c, ok := n.(*tir.Call); ok && c.Op == tir.CallExtern {
				g.reserved[c.Extern] = true
			}
			return true
		})
	}
}

// use marks a helper (and its dependencies) as needed.
func (g *gen) use(name string) {
	if g.helpers[name] {
		return
	}
	i, ok := helperIndex[name]
	if !ok {
		panic("codegen/c: unknown helper " + name)
	}
	for _, d := range helperTable[i].deps {
		g.use(d)
	}
	g.helpers[name] = true
}

// symbolOf is the C symbol of f's packed function.
func symbolOf(f *tir.PrimFunc) string {
	if s, ok := f.Attrs[tir.AttrGlobalSymbol].(string); ok && s != "" {
		return exportedSymbol(s)
	}
	return sanitize(f.Name)
}

func (g *gen) funcInfo(f *tir.PrimFunc, logical map[*tir.Var]*tir.Buffer) FuncInfo {
	sym := symbolOf(f)
	info := FuncInfo{Name: f.Name, Symbol: sym, Unpacked: sym + "_unpacked"}
	for _, p := range f.Params {
		pi := ParamInfo{Name: p.Name}
		switch b, ok := logical[p]; {
		case ok:
			pi.Kind, pi.DType, pi.Shape = "buffer", b.DType, b.Shape.Clone()
		case p.T.Handle:
			pi.Kind, pi.DType = "handle", p.T.DType
		default:
			pi.Kind, pi.DType, pi.Shape = "scalar", p.T.DType, ir.Shape{}
		}
		info.Params = append(info.Params, pi)
	}
	return info
}

// assemble puts the pieces of the translation unit together.
func (g *gen) assemble(funcs string) string {
	return g.assembleUnit(g.kernels, !g.opts.NoRuntimeDefs, funcs)
}

// assembleUnit is one translation unit holding funcs: the includes, the
// runtime definitions when defs is set, every helper and extern
// declaration the module uses (static inline, or declarations: unused
// ones cost nothing), the given kernels and the argument checks.
func (g *gen) assembleUnit(kernels []tir.Kernel, defs bool, funcs string) string {
	return g.assembleUnitShared(kernels, nil, "", defs, funcs)
}

// assembleUnitShared is assembleUnit for one of several units: besides
// its static kernels, it takes the headers of the kernels in incs and
// shared, the definitions and declarations of kernels with hidden
// linkage (Source.Units).
func (g *gen) assembleUnitShared(kernels, incs []tir.Kernel, shared string, defs bool, funcs string) string {
	var b strings.Builder
	b.WriteString("/* Generated by kiln codegen/c. Do not edit. */\n")
	for _, h := range []string{"<stdint.h>", "<stdbool.h>", "<stddef.h>", "<stdio.h>", "<stdlib.h>", "<string.h>", "<math.h>", `"` + include.RuntimeAPIHeader + `"`} {
		b.WriteString("#include " + h + "\n")
	}
	headers := append([]string(nil), g.opts.Includes...)
	for _, k := range append(append([]tir.Kernel(nil), kernels...), incs...) {
		for _, inc := range k.Includes() {
			if !slices.Contains(headers, inc) {
				headers = append(headers, inc)
			}
		}
	}
	for _, inc := range headers {
		switch {
		case strings.HasPrefix(inc, "#"):
			b.WriteString(inc + "\n")
		case strings.HasPrefix(inc, "<"), strings.HasPrefix(inc, `"`):
			b.WriteString("#include " + inc + "\n")
		default:
			b.WriteString("#include \"" + inc + "\"\n")
		}
	}
	b.WriteString("\n")
	if g.opts.pool() {
		b.WriteString("#define KILN_THREAD_POOL 1\n")
	}
	b.WriteString(preambleMacros)
	if g.opts.OpenMP {
		b.WriteString(poolDecls)
	}
	if defs {
		b.WriteString("\n")
		b.WriteString(runtimeDefs)
		if !g.opts.OpenMP {
			// A threaded library's are in ThreadsName.
			b.WriteString("\n")
			b.WriteString(threadStubs)
		}
	}
	if len(g.helpers) > 0 {
		b.WriteString("\n")
		for _, h := range helperTable {
			if g.helpers[h.name] {
				b.WriteString(h.code)
				b.WriteString("\n\n")
			}
		}
	}
	for _, k := range kernels {
		b.WriteString("\n")
		b.WriteString(k.Source())
		b.WriteString("\n")
	}
	if shared != "" {
		b.WriteString("\n" + shared)
	}
	if len(g.externs) > 0 {
		names := make([]string, 0, len(g.externs))
		for n := range g.externs {
			names = append(names, n)
		}
		sort.Strings(names)
		b.WriteString("\n")
		for _, n := range names {
			d := g.externs[n]
			args := "void"
			if len(d.args) > 0 {
				args = strings.Join(d.args, ", ")
			}
			fmt.Fprintf(&b, "extern %s %s(%s);\n", d.ret, n, args)
		}
	}
	if funcs != "" {
		b.WriteString("\n")
		b.WriteString(argCheck)
		b.WriteString(funcs)
	}
	return b.String()
}

// storageType is the C type of one stored element of dtype d.
func storageType(d ir.DType) string {
	switch d {
	case ir.Float32:
		return "float"
	case ir.Float64:
		return "double"
	case ir.Float16, ir.BFloat16:
		return "uint16_t"
	case ir.Bool:
		return "uint8_t"
	case ir.Int8, ir.Int16, ir.Int32, ir.Int64, ir.Uint8, ir.Uint16, ir.Uint32, ir.Uint64:
		return d.String() + "_t"
	}
	failf("unsupported dtype %s", d)
	return ""
}

// valueType is the C type an expression of scalar dtype d computes in:
// float16/bfloat16 values are floats, bools are C bools.
func valueType(d ir.DType) string {
	switch d {
	case ir.Float16, ir.BFloat16:
		return "float"
	case ir.Bool:
		return "bool"
	}
	return storageType(d)
}

// cType is the C type of a TIR type (handles are pointers to the storage
// type; opaque handles are void*).
func cType(t tir.Type) string {
	switch {
	case t.IsVoid():
		return "void"
	case t.Handle && t.DType == ir.Invalid:
		return "void*"
	case t.Handle:
		return storageType(t.DType) + "*"
	}
	return valueType(t.DType)
}

// dtypeCode is the kiln_dtype_code and bits of d.
func dtypeCode(d ir.DType) (string, int) {
	switch {
	case d == ir.Bool:
		return "KILN_BOOL", 8
	case d == ir.BFloat16:
		return "KILN_BFLOAT", 16
	case d.IsFloat():
		return "KILN_FLOAT", d.Size() * 8
	case d.IsUint():
		return "KILN_UINT", d.Size() * 8
	case d.IsInt():
		return "KILN_INT", d.Size() * 8
	}
	failf("unsupported dtype %s", d)
	return "", 0
}

// funcGen emits one function.
type funcGen struct {
	g    *gen
	f    *tir.PrimFunc
	info FuncInfo
	b    *strings.Builder
	// pre holds the functions of outlined parallel loops, emitted before
	// the function.
	pre    strings.Builder
	indent int
	names  *nameTable
	env    map[*tir.Var]string
	// parallel is the depth of enclosing parallel loops (0 or 1: nested
	// parallel loops become serial).
	parallel int
	// vector is the depth of enclosing vectorized loops; inside one,
	// float32 exp is emitted as kiln_expf, which GCC can vectorise.
	vector int
	heap   bool
	// nonNeg holds the loop variables in scope whose values are never
	// negative (a constant minimum of at least 0).
	nonNeg map[*tir.Var]bool
	// decls records how each variable in scope was declared (for
	// passing it to an outlined parallel loop).
	decls map[*tir.Var]varDecl
	// outlined counts the function's outlined parallel loops; outlining
	// is set while one's body is emitted.
	outlined, outlining int
}

func newFuncGen(g *gen, f *tir.PrimFunc, info FuncInfo) *funcGen {
	return &funcGen{g: g, f: f, info: info, b: &strings.Builder{}, names: newNameTable(g.reserved), env: map[*tir.Var]string{},
		nonNeg: map[*tir.Var]bool{}, decls: map[*tir.Var]varDecl{}}
}

func (fg *funcGen) line(format string, args ...any) {
	fg.b.WriteString(strings.Repeat("  ", fg.indent))
	fmt.Fprintf(fg.b, format, args...)
	fg.b.WriteByte('\n')
}

// bind gives the variable defined here a fresh C name, records its
// declaration d (for passing it to an outlined parallel loop) and returns
// a function restoring the previous binding.
func (fg *funcGen) bind(v *tir.Var, d varDecl) (string, func()) {
	name := fg.names.fresh(v.Name)
	old, had := fg.env[v]
	oldDecl := fg.decls[v]
	fg.env[v], fg.decls[v] = name, d
	return name, func() {
		if had {
			fg.env[v], fg.decls[v] = old, oldDecl
		} else {
			delete(fg.env, v)
			delete(fg.decls, v)
		}
	}
}

func (fg *funcGen) restrictOK() bool {
	if v, ok := fg.f.Attrs[tir.AttrNoAlias].(bool); ok && !v {
		return false
	}
	return true
}

// emitUnpacked writes `int32_t SYM_unpacked(...) { body; return 0; }`.
func (fg *funcGen) emitUnpacked() {
	var params []string
	for _, p := range fg.f.Params {
		name, _ := fg.bind(p, varDecl{ctype: cType(p.T), restrict: p.T.Handle})
		switch {
		case p.T.Handle && fg.restrictOK():
			params = append(params, cType(p.T)+" restrict "+name)
		default:
			params = append(params, cType(p.T)+" "+name)
		}
	}
	if len(params) == 0 {
		params = []string{"void"}
	}
	fg.info.UnpackedDecl = fmt.Sprintf("int32_t %s(%s)", fg.info.Unpacked, strings.Join(params, ", "))
	fg.line("")
	fg.line("%s {", fg.info.UnpackedDecl)
	fg.indent++
	for _, p := range fg.f.Params {
		if !uses(fg.f.Body, p) {
			fg.line("(void)%s;", fg.env[p])
		}
	}
	fg.heap = fg.needsHeap(fg.f.Body)
	if fg.heap {
		fg.line("int32_t kiln_oom = 0;")
	}
	checks := checksIndices(fg.f.Body)
	if checks {
		// check_index records the first bad index here (shared by the
		// threads of parallel loops) and the function fails after.
		fg.line("kiln_index_error kiln_ierr = {0, 0, 0};")
	}
	fg.stmt(fg.f.Body)
	if checks {
		fg.line("if (kiln_ierr.failed) {")
		fg.line("  char kiln_msg[192];")
		fg.line("  snprintf(kiln_msg, sizeof kiln_msg, %s, (long long)kiln_ierr.index, (long long)-kiln_ierr.n, (long long)kiln_ierr.n);", cString(fg.info.Symbol+": index %lld out of range [%lld, %lld)"))
		fg.line("  kiln_set_last_error(kiln_msg);")
		fg.line("  return -1;")
		fg.line("}")
	}
	if fg.heap {
		fg.line("if (kiln_oom) {")
		fg.line("  kiln_set_last_error(%s);", cString(fg.info.Symbol+": out of memory allocating a scratch buffer"))
		fg.line("  return -1;")
		fg.line("}")
	}
	fg.line("return 0;")
	fg.indent--
	fg.line("}")
}

// checksIndices reports whether s uses check_index.
func checksIndices(s tir.Node) bool {
	found := false
	tir.Visit(s, func(n tir.Node) bool {
		if c, ok := n.(*tir.Call); ok && c.Op == tir.IntrinCheckIndex {
			found = true
		}
		return !found
	})
	return found
}

// onHeap reports whether allocation a is a host buffer over the stack
// limit: malloc'd (or refused without Options.AllowMalloc).
func (fg *funcGen) onHeap(a *tir.Allocate) bool {
	return isHostScope(a.Buffer.Scope) && a.Buffer.NumBytes() > fg.g.opts.StackLimit
}

// needsHeap reports whether some allocation of s goes to the heap.
func (fg *funcGen) needsHeap(s tir.Stmt) bool {
	heap := false
	tir.Visit(s, func(n tir.Node) bool {
		if a, ok := n.(*tir.Allocate); ok && fg.onHeap(a) {
			heap = true
		}
		return !heap
	})
	return heap
}

func isHostScope(s string) bool { return s == "" || s == tir.ScopeGlobal || s == tir.ScopeLocal }

// emitPacked writes the packed wrapper, checking arguments against the
// logical buffers.
func (fg *funcGen) emitPacked(logical map[*tir.Var]*tir.Buffer) {
	sym := fg.info.Symbol
	fnLit := cString(sym)
	for i, pi := range fg.info.Params {
		if pi.Kind != "handle" && len(pi.Shape) > 0 {
			dims := make([]string, len(pi.Shape))
			for k, d := range pi.Shape {
				dims[k] = strconv.FormatInt(d, 10)
			}
			fg.line("static const int64_t kiln_shape_%s_%d[%d] = {%s};", sym, i, len(dims), strings.Join(dims, ", "))
		}
	}
	fg.line("")
	fg.line("int32_t %s(kiln_tensor* args, int32_t num_args) {", sym)
	fg.indent++
	fg.line("if (kiln_check_num_args(args, num_args, %s, %d) != 0) return -1;", fnLit, len(fg.info.Params))
	var call []string
	for i, pi := range fg.info.Params {
		p := fg.f.Params[i]
		if pi.Kind == "handle" {
			call = append(call, fmt.Sprintf("(%s)args[%d].data", cType(p.T), i))
			continue
		}
		code, bits := dtypeCode(pi.DType)
		shape := "NULL"
		if len(pi.Shape) > 0 {
			shape = fmt.Sprintf("kiln_shape_%s_%d", sym, i)
		}
		fg.line("if (kiln_check_arg(&args[%d], %s, %d, %s, %d, %s, %s, %d) != 0) return -1;",
			i, fnLit, i, cString(pi.Name), len(pi.Shape), shape, code, bits)
		if pi.Kind == "buffer" {
			call = append(call, fmt.Sprintf("(%s)args[%d].data", cType(p.T), i))
			continue
		}
		// Scalar: a 0-d tensor holding the value.
		ptr := fmt.Sprintf("*(const %s*)args[%d].data", storageType(pi.DType), i)
		switch pi.DType {
		case ir.Bool:
			call = append(call, "("+ptr+" != 0)")
		case ir.Float16:
			fg.g.use("kiln_f16_to_f32")
			call = append(call, "kiln_f16_to_f32("+ptr+")")
		case ir.BFloat16:
			fg.g.use("kiln_bf16_to_f32")
			call = append(call, "kiln_bf16_to_f32("+ptr+")")
		default:
			call = append(call, ptr)
		}
	}
	fg.line("return %s(%s);", fg.info.Unpacked, strings.Join(call, ", "))
	fg.indent--
	fg.line("}")
}

// uses reports whether s refers to v (as a value or as a buffer's data).
func uses(s tir.Node, v *tir.Var) bool {
	found := false
	tir.Visit(s, func(n tir.Node) bool {
		switch x := n.(type) {
		case *tir.Var:
			found = found || x == v
		case *tir.BufferLoad:
			found = found || x.Buffer.Data == v
		case *tir.BufferStore:
			found = found || x.Buffer.Data == v
		}
		return !found
	})
	return found
}

func (fg *funcGen) stmt(s tir.Stmt) {
	switch x := s.(type) {
	case *tir.SeqStmt:
		for _, c := range x.Seq {
			fg.stmt(c)
		}
	case *tir.For:
		fg.forStmt(x)
	case *tir.BufferStore:
		fg.line("%s = %s;", fg.access(x.Buffer, x.Indices), fg.storeValue(x.Buffer.DType, x.Value))
	case *tir.Allocate:
		fg.allocate(x)
	case *tir.IfThenElse:
		fg.line("if (%s) {", strip(fg.expr(x.Cond)))
		fg.block(x.Then)
		if x.Else != nil && !tir.IsNoOp(x.Else) {
			fg.line("} else {")
			fg.block(x.Else)
		}
		fg.line("}")
	case *tir.LetStmt:
		val := strip(fg.expr(x.Value))
		name, restore := fg.bind(x.Var, varDecl{ctype: cType(x.Var.T)})
		if x.Var.T.Handle {
			fg.line("%s %s = %s;", cType(x.Var.T), name, val)
		} else {
			fg.line("const %s %s = %s;", cType(x.Var.T), name, val)
		}
		if !uses(x.Body, x.Var) {
			fg.line("(void)%s;", name)
		}
		fg.stmt(x.Body)
		restore()
	case *tir.Evaluate:
		if tir.IsNoOp(x) {
			return
		}
		if c, ok := x.Value.(*tir.Call); ok && c.Op == tir.CallExtern {
			fg.line("%s;", strip(fg.expr(c)))
			return
		}
		fg.line("(void)%s;", fg.expr(x.Value))
	case *tir.AttrStmt:
		fg.line("/* attr %s */", commentSafe(x.Key))
		fg.stmt(x.Body)
	default:
		failf("function %s: unsupported statement %T", fg.f.Name, s)
	}
}

// block emits s indented (the caller writes the braces).
func (fg *funcGen) block(s tir.Stmt) {
	fg.indent++
	fg.stmt(s)
	fg.indent--
}

func (fg *funcGen) forStmt(x *tir.For) {
	t := x.Var.T
	ct := cType(t)
	if n, ok := tir.ConstInt(x.Extent); ok && n <= 0 {
		return
	}
	if on, _ := x.Annotations[tir.AnnOutline].(bool); on && (x.Kind == tir.Serial || x.Kind == tir.Unrolled) {
		fg.outlineLoop(x)
		return
	}
	// Bounds are evaluated once, before the loop (as in the interpreter);
	// non-trivial ones are hoisted into constants.
	trivial := func(e tir.PrimExpr) bool {
		switch e.(type) {
		case *tir.IntImm, *tir.Var:
			return true
		}
		return false
	}
	lo := strip(fg.expr(x.Min))
	var end string
	minC, minConst := tir.ConstInt(x.Min)
	extC, extConst := tir.ConstInt(x.Extent)
	switch {
	case minConst && extConst:
		end = fg.intLit(t.DType, minC+extC)
	case minConst && minC == 0 && trivial(x.Extent):
		end = strip(fg.expr(x.Extent))
	default:
		if !trivial(x.Min) {
			name := fg.names.fresh(x.Var.Name + "_min")
			fg.line("const %s %s = %s;", ct, name, lo)
			lo = name
		}
		name := fg.names.fresh(x.Var.Name + "_end")
		fg.line("const %s %s = %s + %s;", ct, name, lo, fg.expr(x.Extent))
		end = name
	}
	kind := x.Kind
	if kind == tir.Parallel && fg.parallel > 0 {
		fg.line("/* parallel loop nested in a parallel loop: serial */")
		kind = tir.Serial
	}
	if kind == tir.Parallel && fg.g.opts.OpenMP {
		fg.outlineParallel(x, lo, end)
		return
	}
	switch kind {
	case tir.Parallel:
		fg.line("KILN_PARALLEL_FOR")
		fg.parallel++
		defer func() { fg.parallel-- }()
	case tir.Vectorized:
		fg.line("KILN_VECTORIZE")
		fg.vector++
		defer func() { fg.vector-- }()
	case tir.Unrolled:
		n := int64(8)
		if extConst && extC <= 256 {
			n = extC
		}
		fg.line("KILN_UNROLL(%d)", n)
	}
	name, restore := fg.bind(x.Var, varDecl{ctype: ct})
	if minConst && minC >= 0 {
		fg.nonNeg[x.Var] = true
		defer delete(fg.nonNeg, x.Var)
	}
	fg.line("for (%s %s = %s; %s < %s; ++%s) {", ct, name, lo, name, end, name)
	fg.block(x.Body)
	fg.line("}")
	restore()
}

func (fg *funcGen) allocate(a *tir.Allocate) {
	fg.allocateWith(a, func() { fg.stmt(a.Body) })
}

// allocateWith is allocate with body's statements in place of a.Body's.
func (fg *funcGen) allocateWith(a *tir.Allocate, body func()) {
	b := a.Buffer
	st := storageType(b.DType)
	n := b.Span()
	bytes := b.NumBytes()
	if !isHostScope(b.Scope) {
		var code string
		ok := false
		if fg.g.opts.AllocHook != nil {
			code, ok = fg.g.opts.AllocHook(a)
		}
		if !ok {
			failf("function %s: buffer %s has storage scope %q, which the C code generator does not support (no AllocHook handled it)", fg.f.Name, b.Name, b.Scope)
		}
		name, restore := fg.bind(b.Data, varDecl{ctype: st + "*", restrict: true})
		fg.line("%s* restrict %s = (%s*)(%s);", st, name, st, code)
		fg.allocBody(a, name, body)
		restore()
		return
	}
	if bytes <= fg.g.opts.StackLimit {
		name, restore := fg.bind(b.Data, varDecl{ctype: st + "*", restrict: true})
		fg.line("%s %s[%d] KILN_ALIGN64;", st, name, n)
		fg.allocBody(a, name, body)
		restore()
		return
	}
	if !fg.g.opts.AllowMalloc {
		failf("function %s: buffer %s: allocation of %d bytes exceeds the stack limit (%d bytes) and heap allocation is disabled", fg.f.Name, b.Name, bytes, fg.g.opts.StackLimit)
	}
	// Its size comes from the model's shapes: within the memory budget
	// (--max-memory) as every tensor is, or no artifact.
	if err := budget.Check(fmt.Sprintf("function %s: scratch buffer %s", fg.f.Name, b.Name), bytes); err != nil {
		failf("%v", err)
	}
	name, restore := fg.bind(b.Data, varDecl{ctype: st + "*", restrict: true})
	fg.line("%s* restrict %s = (%s*)malloc((size_t)%d);", st, name, st, bytes)
	fg.line("if (%s == NULL) {", name)
	switch {
	case fg.outlining > 0:
		fg.line("  __atomic_store_n(kiln_oom, 1, __ATOMIC_RELAXED);")
	case fg.parallel > 0:
		fg.line("  KILN_ATOMIC_WRITE")
		fg.line("  kiln_oom = 1;")
	default:
		fg.line("  kiln_oom = 1;")
	}
	fg.line("} else {")
	fg.indent++
	fg.allocBody(a, name, body)
	fg.line("free(%s);", name)
	fg.indent--
	fg.line("}")
	restore()
}

func (fg *funcGen) allocBody(a *tir.Allocate, name string, body func()) {
	if !uses(a.Body, a.Buffer.Data) {
		fg.line("(void)%s;", name)
	}
	body()
}

// strip removes one pair of parentheses enclosing all of s.
func strip(s string) string {
	if len(s) < 2 || s[0] != '(' || s[len(s)-1] != ')' {
		return s
	}
	depth := 0
	inStr := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr:
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 && i != len(s)-1 {
				return s
			}
		}
	}
	return s[1 : len(s)-1]
}
