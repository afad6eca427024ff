package c

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/budget"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/tirtest"
)

func generate(t *testing.T, opts Options, fs ...*tir.PrimFunc) *Source {
	t.Helper()
	m, err := tir.NewModule(fs...)
	if err != nil {
		t.Fatal(err)
	}
	src, err := Generate(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestSanitize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"A", "A"},
		{"my-func.v2", "my_func_v2"},
		{"0abc", "v_0abc"},
		{"", "v"},
		{"int", "v_int"},
		{"restrict", "v_restrict"},
		{"expf", "v_expf"},
		{"kiln_oom", "v_kiln_oom"},
		{"__x", "v___x"},
		{"_Foo", "v__Foo"},
		{"données", "donn_es"},
	}
	for _, tc := range tests {
		if got := sanitize(tc.in); got != tc.want {
			t.Errorf("sanitize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestExportedSymbol checks that a fixed global_symbol (a partitioned
// function's kiln_<module>_<compiler>_main_<n>) is kept as the C symbol,
// while names of kiln's runtime, C and libc are still renamed.
func TestExportedSymbol(t *testing.T) {
	for in, want := range map[string]string{
		"kiln_mlp_cblas_main_0": "kiln_mlp_cblas_main_0",
		"my_kernel":             "my_kernel",
		"kiln_oom":              "v_kiln_oom",
		"kiln_set_num_threads":  "v_kiln_set_num_threads",
		"kiln_shape_f_0":        "v_kiln_shape_f_0",
		"KILN_X":                "v_KILN_X",
		"int":                   "v_int",
		"expf":                  "v_expf",
		"__x":                   "v___x",
		"int-arith":             "int_arith",
		"0abc":                  "v_0abc",
	} {
		if got := exportedSymbol(in); got != want {
			t.Errorf("exportedSymbol(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFloatLit(t *testing.T) {
	tests := []struct {
		d    ir.DType
		v    float64
		want string
	}{
		{ir.Float32, 0.125, "0.125f"},
		{ir.Float32, 2, "2.0f"},
		{ir.Float32, -1, "(-1.0f)"},
		{ir.Float32, float64(float32(0.1)), "0.1f"},
		{ir.Float32, 3e38, "3e+38f"},
		{ir.Float32, math.Inf(-1), "(-INFINITY)"},
		{ir.Float32, math.NaN(), "NAN"},
		{ir.Float64, 0.1, "0.1"},
		{ir.Float64, 1e300, "1e+300"},
		{ir.Float64, math.Inf(1), "(double)INFINITY"},
		{ir.Float64, math.Copysign(0, -1), "(-0.0)"},
		{ir.Float16, 1.0009765625, "1.0009766f"},
	}
	for _, tc := range tests {
		if got := floatLit(tc.d, tc.v); got != tc.want {
			t.Errorf("floatLit(%s, %v) = %q, want %q", tc.d, tc.v, got, tc.want)
		}
	}
}

func TestCString(t *testing.T) {
	if got, want := cString("a\"b\\c\n??=\x01é"), `"a\"b\\c\n\?\?=\001\303\251"`; got != want {
		t.Errorf("cString = %s, want %s", got, want)
	}
}

// scoped returns a function allocating a buffer of n float32 in scope.
func scoped(scope string, n int64) *tir.PrimFunc {
	f := tir.NewPrimFunc("scoped")
	a := f.AddBuffer(tir.NewBuffer("A", ir.Float32, ir.Shape{n}, ""))
	tmp := tir.NewBuffer("tmp", ir.Float32, ir.Shape{n}, scope)
	i, j := v32("i"), v32("j")
	f.Body = &tir.Allocate{Buffer: tmp, Body: tir.Seq(
		tir.Loop(i, n, tir.Serial, tir.NewStore(tmp, tir.Mul(tir.NewLoad(a, i), tir.Float32(2)), i)),
		tir.Loop(j, n, tir.Serial, tir.NewStore(a, tir.NewLoad(tmp, tir.Sub(tir.Idx(n-1), j)), j)),
	)}
	return f
}

func TestGenerateErrors(t *testing.T) {
	badName := tir.NewPrimFunc("bad_extern")
	badName.Body = tir.Eval(tir.CallExternOf(tir.Void, "not a name"))
	mismatch := tir.NewPrimFunc("mismatch")
	mismatch.Body = tir.Seq(
		tir.Eval(tir.CallExternOf(tir.Void, "ext", tir.Idx(1))),
		tir.Eval(tir.CallExternOf(tir.Void, "ext", tir.Float32(1))))
	clash1, clash2 := tir.NewPrimFunc("a-b"), tir.NewPrimFunc("a.b")
	tests := []struct {
		name  string
		funcs []*tir.PrimFunc
		opts  Options
		want  string
	}{
		{"stack limit", []*tir.PrimFunc{scoped("global", 100)}, Options{StackLimit: 64},
			"buffer tmp: allocation of 400 bytes exceeds the stack limit (64 bytes)"},
		{"unknown scope", []*tir.PrimFunc{scoped("vendor.sram", 4)}, HostOptions(),
			`buffer tmp has storage scope "vendor.sram"`},
		{"hook declines", []*tir.PrimFunc{scoped("vendor.sram", 4)},
			Options{AllocHook: func(*tir.Allocate) (string, bool) { return "", false }}, `storage scope "vendor.sram"`},
		{"extern name", []*tir.PrimFunc{badName}, HostOptions(), `call_extern name "not a name" is not a valid C identifier`},
		{"extern signature", []*tir.PrimFunc{mismatch}, HostOptions(),
			"call_extern ext is called with different signatures: void(int32_t) and void(float)"},
		{"symbol clash", []*tir.PrimFunc{clash1, clash2}, HostOptions(), "functions a-b and a.b both map to the C symbol a_b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tir.NewModule(tc.funcs...)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Generate(m, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := Generate(&tir.Module{}, HostOptions()); err == nil {
		t.Error("empty module: no error")
	}
}

func TestAllocPlacement(t *testing.T) {
	stack := generate(t, HostOptions(), scoped("local", 100)).Code
	if !strings.Contains(stack, "float tmp[100] KILN_ALIGN64;") || strings.Contains(stack, "malloc(") {
		t.Errorf("small allocation not on the stack:\n%s", stack)
	}
	heap := generate(t, HostOptions(), scoped("global", 5000)).Code
	for _, want := range []string{"float* restrict tmp = (float*)malloc((size_t)20000);", "free(tmp);", "kiln_oom = 1;"} {
		if !strings.Contains(heap, want) {
			t.Errorf("large allocation: missing %q", want)
		}
	}
	// In a parallel loop, the heap buffers heading its body are allocated
	// once per range, before the loop over it.
	par := generate(t, HostOptions(), allocFunc()).Code
	body := par[strings.Index(par, "_body("):]
	loop := strings.Index(body, "for (int32_t i = (int32_t)kiln_lo;")
	for _, want := range []string{"float* restrict big = (float*)malloc((size_t)24000);", "float* restrict big2 = (float*)malloc((size_t)24000);"} {
		if at := strings.Index(body, want); at < 0 || loop < 0 || at > loop {
			t.Errorf("parallel loop: %q not before the loop over the range:\n%s", want, body)
		}
	}
	hook := Options{AllocHook: func(a *tir.Allocate) (string, bool) {
		return "vendor_sram_base + 16", a.Buffer.Scope == "vendor.sram"
	}}
	code := generate(t, hook, scoped("vendor.sram", 4)).Code
	if !strings.Contains(code, "float* restrict tmp = (float*)(vendor_sram_base + 16);") {
		t.Errorf("AllocHook code missing:\n%s", code)
	}
}

// TestOutlineLoop checks that loops annotated tir.AnnOutline become
// functions of their own, called where the loops stood: inside a parallel
// loop's body with its variable (known non-negative) and the local buffer
// as parameters, and at the top with the out-of-memory flag for the heap
// buffer inside. TestDifferential runs the function (outlineFunc).
func TestOutlineLoop(t *testing.T) {
	code := generate(t, HostOptions(), outlineFunc()).Code
	for _, want := range []string{
		"static KILN_NOINLINE void kiln_loop_outline_1(float* restrict acc, float alpha, float* restrict A, int32_t i) {",
		"  KILN_ASSUME(i >= 0);\n  for (int32_t q = 0; q < 8; ++q) {",
		"kiln_loop_outline_1(acc, alpha, A, i);",
		"static KILN_NOINLINE void kiln_loop_outline_2(float* restrict Out, float alpha, float* restrict Sum, int32_t* kiln_oom) {",
		"kiln_loop_outline_2(Out, alpha, Sum, &kiln_oom);",
	} {
		if !strings.Contains(code, want) {
			t.Errorf("generated code lacks %q:\n%s", want, code)
		}
	}
	// The function comes before the parallel body that calls it.
	if d, c := strings.Index(code, "void kiln_loop_outline_1("), strings.Index(code, "void kiln_par_outline_0_body("); d < 0 || c < 0 || d > c {
		t.Errorf("outlined loop not defined before its caller:\n%s", code)
	}
	// Without the annotation the loops stay inline.
	plain := outlineFunc()
	plain.Body = tir.MutateStmt(plain.Body, func(s tir.Stmt) tir.Stmt {
		if f, ok := s.(*tir.For); ok && f.Annotations != nil {
			g := *f
			g.Annotations = nil
			return &g
		}
		return s
	}, nil)
	if code := generate(t, HostOptions(), plain).Code; strings.Contains(code, "kiln_loop_") {
		t.Errorf("loops without the annotation outlined:\n%s", code)
	}
}

func TestHooksText(t *testing.T) {
	var seen []string
	opts := HostOptions()
	opts.Includes = []string{"vendor.h", "<vendor_sys.h>", `"quoted.h"`, "#define VENDOR 1"}
	opts.ReplaceCallExtern = func(name string, args []string) (string, bool) {
		seen = append(seen, name+"("+strings.Join(args, ", ")+")")
		if name != "vadd_f32" {
			return "", false
		}
		return "vendor_vadd(" + strings.Join(args, ", ") + ")", true
	}
	code := generate(t, opts, tirtest.ExternRows()).Code
	for _, want := range []string{
		"#include \"vendor.h\"\n#include <vendor_sys.h>\n#include \"quoted.h\"\n#define VENDOR 1\n",
		"\n    vendor_vadd(&C[r * 4], &A[r * 4], &B[r * 4], 4);\n",
	} {
		if !strings.Contains(code, want) {
			t.Errorf("generated code lacks %q:\n%s", want, code)
		}
	}
	if strings.Contains(code, "extern void vadd_f32") {
		t.Error("a prototype was emitted for a replaced extern call")
	}
	if want := []string{"vadd_f32(&C[r * 4], &A[r * 4], &B[r * 4], 4)"}; !slices.Equal(seen, want) {
		t.Errorf("hook saw %q, want %q", seen, want)
	}

	// Without the hook a prototype is inferred, unless declared by a header.
	code = generate(t, HostOptions(), tirtest.ExternRows()).Code
	if !strings.Contains(code, "extern void vadd_f32(float*, float*, float*, int32_t);") {
		t.Errorf("no inferred prototype:\n%s", code)
	}
	decl := HostOptions()
	decl.DeclaredExterns = []string{"vadd_f32"}
	if code = generate(t, decl, tirtest.ExternRows()).Code; strings.Contains(code, "extern void vadd_f32") {
		t.Error("prototype emitted for a declared extern")
	}
	noDefs := HostOptions()
	noDefs.NoRuntimeDefs = true
	if code = generate(t, noDefs, tirtest.ElementwiseAdd()).Code; strings.Contains(code, "void kiln_set_last_error(const char* msg) {") {
		t.Error("NoRuntimeDefs still defines kiln_set_last_error")
	}
}

func TestLoopPragmas(t *testing.T) {
	code := generate(t, HostOptions(), loopsFunc()).Code
	// Threaded, the parallel loop is outlined and run by kiln_parallel_for.
	counts := map[string]int{"  KILN_PARALLEL_FOR\n": 0, "kiln_parallel_for(kiln_par_loops_0, ": 1,
		"static void kiln_par_loops_0(void* kiln_p, int64_t kiln_lo, int64_t kiln_hi) {": 1,
		"  KILN_VECTORIZE\n": 1, "  KILN_UNROLL(40)\n": 1,
		"/* parallel loop nested in a parallel loop: serial */": 1}
	for s, n := range counts {
		if got := strings.Count(code, s); got != n {
			t.Errorf("%q occurs %d times, want %d", s, got, n)
		}
	}
	// Serial (a microcontroller's library), it stays a loop behind the
	// pragma macro.
	serial := generate(t, Options{AllowMalloc: true}, loopsFunc()).Code
	for s, n := range map[string]int{"  KILN_PARALLEL_FOR\n": 1, "kiln_parallel_for": 0} {
		if got := strings.Count(serial, s); got != n {
			t.Errorf("serial: %q occurs %d times, want %d", s, got, n)
		}
	}
	// The two unrolled copies of the let got distinct names.
	for _, want := range []string{"const int32_t t = n + 5;", "const int32_t t_1 = (n * 2) + 5;"} {
		if !strings.Contains(code, want) {
			t.Errorf("missing %q", want)
		}
	}
}

func TestSourceInfo(t *testing.T) {
	f := tirtest.IntArith()
	f.Attrs[tir.AttrGlobalSymbol] = "int-arith"
	src := generate(t, HostOptions(), f, loopsFunc())
	got := src.Funcs[0]
	if got.Name != "int_arith" || got.Symbol != "int_arith" || got.Unpacked != "int_arith_unpacked" {
		t.Errorf("names: %+v", got)
	}
	if p := got.Params[1]; p.Name != "Out" || p.DType != ir.Int32 || !p.Shape.Equal(ir.Shape{2, 3, 4}) || p.Kind != "buffer" {
		t.Errorf("param 1: %+v (want the logical 2x3x4 shape)", p)
	}
	if p := src.Funcs[1].Params[3]; p.Kind != "scalar" || p.DType != ir.Int32 || len(p.Shape) != 0 {
		t.Errorf("scalar param: %+v", p)
	}
	if !src.OpenMP {
		t.Error("HostOptions source should record OpenMP")
	}
}

// TestIsGCC: GCC's own flags go only to a compiler whose program is
// GCC, found through symbolic links as Debian's cc is (clang also
// defines __GNUC__ but warns about them, and the build uses -Werror).
func TestIsGCC(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"x86_64-linux-gnu-gcc-12", "clang-14", "tcc"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "x86_64-linux-gnu-gcc-12"), filepath.Join(dir, "cc")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "clang-14"), filepath.Join(dir, "cc-clang")); err != nil {
		t.Fatal(err)
	}
	for cc, want := range map[string]bool{
		"x86_64-linux-gnu-gcc-12":     true,
		"cc":                          true,
		"tcc":                         false,
		"clang-14":                    false,
		"cc-clang":                    false,
		"tcc x86_64-linux-gnu-gcc-12": true,
		"missing":                     false,
	} {
		var words []string
		for _, w := range strings.Fields(cc) {
			words = append(words, filepath.Join(dir, w))
		}
		if got := isGCC(strings.Join(words, " ")); got != want {
			t.Errorf("%s: isGCC = %v, want %v", cc, got, want)
		}
	}
}

func TestBuildOptionsForTarget(t *testing.T) {
	tg, err := targets.Default.Parse("c -mcpu=native -opt=2 -cflags=-DX=1,-fno-math-errno")
	if err != nil {
		t.Fatal(err)
	}
	o := BuildOptionsForTarget(tg)
	// The processor's flags: -march=native, plus -mtune=generic on an AMD
	// host (targets.gccTune).
	cpu := tg.Processor().CFlags()
	if len(cpu) == 0 || cpu[0] != "-march=native" || !slices.Equal(o.CPUFlags, cpu) || o.OptLevel != 2 || !slices.Equal(o.ExtraFlags, []string{"-DX=1", "-fno-math-errno"}) {
		t.Errorf("BuildOptionsForTarget = %+v (processor flags %q)", o, cpu)
	}
	flags := CompileFlags(&Source{OpenMP: true}, o)
	want := []string{"-O2", "-std=c99", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off", "-fno-trapping-math"}
	if isGCC(o.CC) {
		want = append(want, "-fno-tree-loop-distribute-patterns")
	}
	want = append(append(want, "-fopenmp"), cpu...)
	if !slices.Equal(flags, want) {
		t.Errorf("CompileFlags = %q, want %q", flags, want)
	}
	// -mattr reaches the compiler; another architecture gets its cross
	// compiler.
	tg, err = targets.Default.Parse("c -mcpu=haswell -mattr=-fma")
	if err != nil {
		t.Fatal(err)
	}
	if o := BuildOptionsForTarget(tg); !slices.Equal(o.CPUFlags, []string{"-march=haswell", "-mno-fma"}) {
		t.Errorf("haswell -fma: %q", o.CPUFlags)
	}
	tg, err = targets.Default.Parse("c -mcpu=cortex-a72")
	if err != nil {
		t.Fatal(err)
	}
	if o := BuildOptionsForTarget(tg); HostArch() != targets.AArch64 && o.CC != "aarch64-linux-gnu-gcc" {
		t.Errorf("cortex-a72 on %s: cc %q", HostArch(), o.CC)
	}
	if f := CompileFlags(&Source{}, BuildOptions{NoWerror: true}); slices.Contains(f, "-Werror") || slices.Contains(f, "-fopenmp") || f[0] != "-O3" {
		t.Errorf("CompileFlags without OpenMP/Werror = %q", f)
	}
}

// A file with its own flags (a second CPU target's functions) is compiled
// with its processor flags instead of the library's, and only it is; the
// extra flags are shared.
func TestBuildOwnFileFlags(t *testing.T) {
	src := generate(t, HostOptions(), tirtest.ElementwiseAdd())
	check := func(want, not string) []byte {
		var b strings.Builder
		for _, m := range strings.Fields(want) {
			fmt.Fprintf(&b, "#ifndef %s\n#error %s is not defined\n#endif\n", m, m)
		}
		for _, m := range strings.Fields(not) {
			fmt.Fprintf(&b, "#ifdef %s\n#error %s is defined\n#endif\n", m, m)
		}
		return []byte(b.String())
	}
	own := File{Name: "other_target.c", Data: append(check("OWN_CPU OWN_FLAG SHARED", "LIB_CPU"), "int other_fn(void) { return 1; }\n"...),
		Own: &FileFlags{CPUFlags: []string{"-DOWN_CPU"}, Flags: []string{"-DOWN_FLAG"}, OptLevel: 1}}
	lib := File{Name: "library.c", Data: append(check("LIB_CPU SHARED", "OWN_CPU OWN_FLAG"), "int lib_fn(void) { return 2; }\n"...)}
	var st BuildStats
	opts := BuildOptions{ExtraSources: []File{own, lib}, CPUFlags: []string{"-DLIB_CPU"}, ExtraFlags: []string{"-DSHARED"}, Stats: &st}
	if _, err := Build(src, t.TempDir(), opts); err != nil {
		t.Fatal(err)
	}
	if st.Objects != 5 {
		t.Errorf("%d objects, want 5 (source, table, threads, two extra files): a file with own flags needs its own compile", st.Objects)
	}
	if _, err := Build(src, t.TempDir(), BuildOptions{ExtraSources: []File{{Name: "x.h", Own: &FileFlags{}}}}); err == nil || !strings.Contains(err.Error(), "not a .c file") {
		t.Errorf("own flags on a header: %v", err)
	}
}

func TestBuildErrors(t *testing.T) {
	dir := t.TempDir()
	src := generate(t, HostOptions(), tirtest.ElementwiseAdd())
	_, err := Build(src, dir, BuildOptions{ExtraSources: []File{{Name: "broken.c", Data: []byte("int broken(void) { return }\n")}}})
	if err == nil {
		t.Fatal("no error for a broken extra source")
	}
	for _, want := range []string{filepath.Join(dir, SourceName), "broken.c", "error"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if _, statErr := os.Stat(filepath.Join(dir, SourceName)); statErr != nil {
		t.Errorf("source not kept for inspection: %v", statErr)
	}
	if _, err := Build(src, dir, BuildOptions{ExtraSources: []File{{Name: "../x.c"}}}); err == nil || !strings.Contains(err.Error(), "invalid extra source name") {
		t.Errorf("bad extra source name: %v", err)
	}
	if _, err := Build(src, dir, BuildOptions{CC: "/nonexistent/cc"}); err == nil || !strings.Contains(err.Error(), "/nonexistent/cc") {
		t.Errorf("missing compiler: %v", err)
	}
}

// TestBuildVariants compiles every test function warning-free (-Werror)
// without OpenMP and heap allocation (the AOT configuration, with a large
// stack limit so the big scratch buffer fits) and with -march=native, and
// checks the header and library are written.
func TestBuildVariants(t *testing.T) {
	variants := []struct {
		name  string
		opts  Options
		bopts BuildOptions
	}{
		{"no_openmp", Options{StackLimit: 1 << 20}, BuildOptions{}},
		{"native_O2", HostOptions(), BuildOptions{CPUFlags: []string{"-march=native"}, OptLevel: 2}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			dir := t.TempDir()
			src := generate(t, v.opts, testFuncs()...)
			v.bopts.ExtraSources = []File{externC}
			lib, err := Build(src, dir, v.bopts)
			if err != nil {
				t.Fatal(err)
			}
			if lib != filepath.Join(dir, "kiln_lib.so") {
				t.Errorf("library path %s", lib)
			}
			h, err := os.ReadFile(filepath.Join(dir, "include", "kiln", "c_runtime_api.h"))
			if err != nil || !strings.Contains(string(h), "kiln_packed_func") {
				t.Errorf("header not written: %v", err)
			}
			// Source.Header declares every function; a caller compiles
			// against it warning-free.
			if err := os.WriteFile(filepath.Join(dir, "kiln_lib.h"), []byte(src.Header()), 0o644); err != nil {
				t.Fatal(err)
			}
			caller := "#include \"kiln_lib.h\"\nint32_t call(float* a, float* b, float* c) { return elementwise_add_unpacked(a, b, c); }\n"
			if err := os.WriteFile(filepath.Join(dir, "caller.c"), []byte(caller), 0o644); err != nil {
				t.Fatal(err)
			}
			cc := compilerCommand("")
			args := append(cc[1:], "-std=c99", "-Wall", "-Wextra", "-Werror", "-c", "-I", filepath.Join(dir, "include"), "-I", dir,
				filepath.Join(dir, "caller.c"), "-o", filepath.Join(dir, "caller.o"))
			if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
				t.Errorf("compiling against Source.Header: %v\n%s\n%s", err, out, src.Header())
			}
		})
	}
}

// externC implements the externs of tirtest.Externs in C.
var externC = File{Name: "test_externs.c", Data: []byte(`#include <stdint.h>
void vadd_f32(float* dst, float* a, float* b, int32_t n) {
  int32_t i;
  for (i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}
`)}

// TestProcessorFlagsCompile: the C compiler accepts the flags of every
// CPU of the table (x86-64 ones with cc, 64-bit Arm ones with the
// aarch64 cross compiler), with and without -mattr changes.
func TestProcessorFlagsCompile(t *testing.T) {
	cc := testenv.CC(t)
	arm := testenv.Tool(t, "aarch64-linux-gnu-gcc")
	dir := t.TempDir()
	src := filepath.Join(dir, "x.c")
	if err := os.WriteFile(src, []byte("int kiln_probe(int x) { return x + 1; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range targets.KnownCPUs() {
		for _, mattr := range [][]string{nil, {"-fma"}, {"+dotprod"}} {
			p, err := targets.ResolveCPU(k[0], mattr)
			if err != nil {
				continue // a feature of the other architecture
			}
			compiler := cc
			if p.Arch == targets.AArch64 {
				compiler = arm
			}
			args := append(p.CFlags(), "-O2", "-c", src, "-o", filepath.Join(dir, "x.o"))
			if out, err := exec.Command(compiler, args...).CombinedOutput(); err != nil {
				t.Errorf("%s %v: %s %v: %v\n%s", k[0], mattr, compiler, args, err, out)
			}
		}
	}
}

// TestScratchWithinBudget: a kernel's heap scratch buffer is sized from
// the model's shapes, so a buffer over the memory budget (--max-memory)
// is a compile error naming the function and the buffer, not a malloc of
// any size at run time.
func TestScratchWithinBudget(t *testing.T) {
	defer budget.SetLimit(budget.SetLimit(16384))
	m, err := tir.NewModule(scoped("global", 5000))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Generate(m, HostOptions())
	if err == nil || !strings.Contains(err.Error(), "scratch buffer tmp needs") || !strings.Contains(err.Error(), "--max-memory") {
		t.Fatalf("error %v, want one saying that scratch buffer tmp is over the memory budget", err)
	}
	budget.SetLimit(20000)
	if _, err := Generate(m, HostOptions()); err != nil {
		t.Errorf("20000 bytes within a budget of 20000: %v", err)
	}
}
