package c

import (
	"debug/elf"
	"fmt"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
)

// scaleKernel is a micro-kernel for the split tests: it multiplies n
// floats by a constant.
type scaleKernel struct{ by int }

func (k scaleKernel) Symbol() string     { return fmt.Sprintf("kiln_test_scale_%d", k.by) }
func (k scaleKernel) Includes() []string { return nil }
func (k scaleKernel) Source() string {
	return fmt.Sprintf("/* scales by %d */\n#if defined(__GNUC__)\n__attribute__((noinline))\n#endif\n"+
		"static void %s(float* restrict v, int32_t n) {\n  for (int32_t i = 0; i < n; ++i) v[i] *= %d.0f;\n}\n", k.by, k.Symbol(), k.by)
}
func (k scaleKernel) Eval(args []tir.KernelArg) error { return nil }

// kernelFuncs are n functions that each call the kernels ks on their
// buffer.
func kernelFuncs(n int, ks ...tir.Kernel) []*tir.PrimFunc {
	var fs []*tir.PrimFunc
	for i := 0; i < n; i++ {
		f := tir.NewPrimFunc(fmt.Sprintf("scaled_%d", i))
		b := f.AddBuffer(tir.NewBuffer("B", ir.Float32, ir.Shape{8}, ""))
		var body []tir.Stmt
		for _, k := range ks {
			body = append(body, tir.Eval(tir.CallKernel(k, tir.AddressOf(tir.NewLoad(b, tir.Idx(0))), tir.Idx(8))))
		}
		f.Body = tir.Seq(body...)
		fs = append(fs, f)
	}
	return fs
}

// TestUnitsShareKernels: a kernel that functions in several translation
// units call is defined in exactly one of them, with hidden linkage, and
// declared in the others (not copied, static, into each); the split
// library links it once and does not export it.
func TestUnitsShareKernels(t *testing.T) {
	ks := []tir.Kernel{scaleKernel{2}, scaleKernel{3}}
	m, err := tir.NewModule(kernelFuncs(6, ks...)...)
	if err != nil {
		t.Fatal(err)
	}
	src, err := Generate(m, HostOptions())
	if err != nil {
		t.Fatal(err)
	}
	units := src.units(3, 1)
	if len(units) != 3 {
		t.Fatalf("got %d units, want 3", len(units))
	}
	for _, k := range ks {
		sym := k.Symbol()
		defs := 0
		for i, u := range units {
			def := strings.Count(u, "KILN_HIDDEN void "+sym+"(float* restrict v, int32_t n) {")
			decl := strings.Count(u, "KILN_HIDDEN void "+sym+"(float* restrict v, int32_t n);")
			calls := strings.Count(u, sym+"(&")
			defs += def
			if strings.Contains(u, "static void "+sym) {
				t.Errorf("unit %d holds a static copy of %s", i, sym)
			}
			if calls > 0 && def+decl != 1 {
				t.Errorf("unit %d calls %s but defines it %d times and declares it %d times", i, sym, def, decl)
			}
		}
		if defs != 1 {
			t.Errorf("%s is defined %d times across the units, want once", sym, defs)
		}
	}

	cc := testenv.CC(t)
	dir := t.TempDir()
	lib, err := Build(src, dir, BuildOptions{CC: cc, Jobs: 3, unitBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range ks {
		n := 0
		for _, s := range syms {
			if s.Name != k.Symbol() {
				continue
			}
			n++
			if s.Section == elf.SHN_UNDEF || elf.ST_BIND(s.Info) != elf.STB_LOCAL {
				t.Errorf("%s in the library: section %v, binding %v; want defined and local", s.Name, s.Section, elf.ST_BIND(s.Info))
			}
		}
		if n != 1 {
			t.Errorf("%s appears %d times in the library's symbols, want once", k.Symbol(), n)
		}
	}
	dyn, _ := f.DynamicSymbols()
	for _, s := range dyn {
		if strings.HasPrefix(s.Name, "kiln_test_scale_") {
			t.Errorf("%s is exported", s.Name)
		}
	}
}
