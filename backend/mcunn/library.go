package mcunn

import (
	"embed"

	"github.com/kiln-dev/kiln/backend"
)

//go:embed csrc/kiln_nn.h csrc/kiln_nn.c
var csrc embed.FS

// Sources returns kiln_nn's C source and header (kiln_nn.c, kiln_nn.h),
// which the build writes next to the generated C and compiles with it:
// into the library, or into the AOT project, whose Makefile also builds
// them for a Cortex-M.
func Sources() []backend.SourceFile {
	var out []backend.SourceFile
	for _, n := range []string{"kiln_nn.h", "kiln_nn.c"} {
		b, err := csrc.ReadFile("csrc/" + n)
		if err != nil {
			panic(err) // embedded at build time: cannot fail
		}
		out = append(out, backend.SourceFile{Name: n, Data: b})
	}
	return out
}
