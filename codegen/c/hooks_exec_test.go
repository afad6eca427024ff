//go:build cgo

package c

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/codegen/c/internal/dl"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/interp"
	"github.com/kiln-dev/kiln/tir/tirtest"
)

// TestHooksRun builds a library whose extern calls are rewritten by
// ReplaceCallExtern into a vendor function declared by an Includes header,
// and whose "vendor.sram" allocation is placed by AllocHook into a vendor
// array, then checks both functions against the interpreter.
func TestHooksRun(t *testing.T) {
	opts := HostOptions()
	opts.Includes = []string{"vendor.h"}
	opts.ReplaceCallExtern = func(name string, args []string) (string, bool) {
		if name != "vadd_f32" {
			return "", false
		}
		return "vendor_vadd(" + strings.Join(args, ", ") + ")", true
	}
	opts.AllocHook = func(a *tir.Allocate) (string, bool) {
		return "vendor_sram", a.Buffer.Scope == "vendor.sram"
	}
	funcs := []*tir.PrimFunc{tirtest.ExternRows(), scoped("vendor.sram", 16)}
	src := generate(t, opts, funcs...)
	vendor := []File{
		{Name: "vendor.h", Data: []byte("#include <stdint.h>\nvoid vendor_vadd(float* dst, const float* a, const float* b, int32_t n);\nextern float vendor_sram[64];\n")},
		{Name: "vendor.c", Data: []byte("#include \"vendor.h\"\nfloat vendor_sram[64];\nvoid vendor_vadd(float* dst, const float* a, const float* b, int32_t n) {\n  int32_t i;\n  for (i = 0; i < n; ++i) dst[i] = a[i] + b[i];\n}\n")},
	}
	lib := openLib(t, src, BuildOptions{ExtraSources: vendor})
	rng := rand.New(rand.NewSource(3))
	for i, f := range funcs {
		args := tirtest.RandomArgs(f, rng)
		tensors := tensorsFor(src.Funcs[i], args)
		if err := interp.Run(f, args, &interp.Options{Externs: tirtest.Externs}); err != nil {
			t.Fatal(err)
		}
		if st, err := lib.Call(src.Funcs[i].Symbol, tensors, -1); err != nil || st != 0 {
			msg, _ := lib.LastError()
			t.Fatalf("%s: status %d, %v, %s", f.Name, st, err, msg)
		}
		for k, a := range args {
			if want, ok := a.(*interp.Array); ok {
				if err := compareArrays(f.Name, f.Params[k].Name, want, tensors[k].Data); err != nil {
					t.Errorf("%s: %v", f.Name, err)
				}
			}
		}
	}
}

// openLib builds src into a shared library in a temporary directory and
// opens it; the library is closed when the test ends.
func openLib(t *testing.T, src *Source, opts BuildOptions) *dl.Lib {
	t.Helper()
	path, err := Build(src, t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	lib, err := dl.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lib.Close() })
	return lib
}
