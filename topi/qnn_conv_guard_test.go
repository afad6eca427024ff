package topi

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/targets"
)

// TestQConvGuards: for each CPU, the integer kernels' instruction set
// (qconvISAFor of its features) has a preprocessor guard that the C
// compiler, given the CPU's flags, finds true, so the vector code is
// compiled in and the portable C is only for other builds.
func TestQConvGuards(t *testing.T) {
	for _, c := range []struct {
		mcpu, cc string
		isa      qconvISA
	}{
		{"x86-64", "gcc", qconvScalar},
		{"haswell", "gcc", qconvAVX2},
		{"znver3", "gcc", qconvAVX2},
		{"alderlake", "gcc", qconvAVXVNNI},
		{"cascadelake", "gcc", qconvAVX512VNNI},
		{"znver4", "gcc", qconvAVX512VNNI},
		{"znver5", "gcc", qconvAVX512VNNI},
		{"cortex-a72", "aarch64-linux-gnu-gcc", qconvNEON},
		{"cortex-a76", "aarch64-linux-gnu-gcc", qconvNEONDot},
	} {
		t.Run(c.mcpu, func(t *testing.T) {
			p, err := targets.ResolveCPU(c.mcpu, nil)
			if err != nil {
				t.Fatal(err)
			}
			isa := qconvISAFor(p.Features)
			if isa != c.isa {
				t.Fatalf("instruction set %d, want %d", isa, c.isa)
			}
			if isa == qconvScalar {
				return
			}
			cc := testenv.Tool(t, c.cc)
			dir := t.TempDir()
			src := "#if " + isa.guard() + "\nint kiln_guard_holds;\n#else\n#error the guard is false\n#endif\n"
			if err := os.WriteFile(filepath.Join(dir, "g.c"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(cc, append(p.CFlags(), "-c", "g.c", "-o", "g.o")...)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s %v: %v\n%s", cc, p.CFlags(), err, out)
			}
		})
	}
}

// TestQDWConvBuildsAnywhere: a depthwise kernel generated for one CPU (its
// row form in float32, with x86's fused multiply-add under its own guard)
// compiles warning-free for other CPUs of the same architecture and for
// none in particular, as an exported project may be built: each piece of
// vector code brings the header its guard needs.
func TestQDWConvBuildsAnywhere(t *testing.T) {
	cc := testenv.Tool(t, "gcc")
	epi := &qconvEpi{shift: 36, zp: 3, lo: 0, hi: 255}
	for _, gen := range []qconvISA{qconvAVX512VNNI, qconvAVXVNNI, qconvAVX2, qconvScalar} {
		p := qconvParams{c: 4, h: 9, w: 13, oc: 4, oh: 9, ow: 13, kh: 3, kw: 3, sh: 1, sw: 1, ph: 1, pw: 1, dh: 1, dw: 1, isa: gen}
		for _, k := range []*qdwconvKernel{newQDWConvKernel(p, epi), newQDWConvKernel(p, nil)} {
			src := "#include <stdint.h>\n#include <string.h>\n"
			for _, inc := range k.Includes() {
				if inc[0] == '#' {
					src += inc + "\n"
				} else {
					src += "#include " + inc + "\n"
				}
			}
			src += k.Source() + "void kiln_use(void* f);\nvoid kiln_touch(void) { kiln_use((void*)" + k.Symbol() + "); }\n"
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "k.c"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, flags := range [][]string{{"-march=x86-64"}, {"-march=haswell"}, {"-march=sapphirerapids"}} {
				cmd := exec.Command(cc, append([]string{"-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-c", "k.c", "-o", "k.o"}, flags...)...)
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("kernel for ISA %d, built with %v: %v\n%s", gen, flags, err, out)
				}
			}
		}
	}
}
