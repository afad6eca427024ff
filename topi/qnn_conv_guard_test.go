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
