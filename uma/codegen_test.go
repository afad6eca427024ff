package uma

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/passconfig"
	"github.com/kiln-dev/kiln/pattern"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/te"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
	tirtransform "github.com/kiln-dev/kiln/tir/transform"
)

// vendorAdd is the accelerator's "driver": the C its extern calls become.
const vendorAdd = `#include "acc_cx.h"
void acc_cx_vendor_add(float* out, const float* a, const float* b, int32_t n) {
  for (int32_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
`

// accCX builds a UMA backend whose add strategy calls an extern
// ("acc_cx_add") that its C codegen's ReplaceCallExtern turns into a call
// of the vendor function declared in its header, with a TIR pass that
// records what the pass configuration says.
func accCX(t *testing.T, seen *[]string) *targets.Registry {
	t.Helper()
	b := New("acc_cx", "test: extern calls replaced by the codegen hook")
	compute := func(c *strategy.Call, in []*te.Tensor) ([]*te.Tensor, error) {
		n := c.OutTensor().Shape.NumElements()
		return te.Extern("acc_cx_add", []ir.Shape{c.OutTensor().Shape}, []ir.DType{ir.Float32}, in, func(ins, outs []*tir.Buffer) tir.Stmt {
			return tir.Eval(tir.CallExternOf(tir.Void, "acc_cx_add", outs[0].Data, ins[0].Data, ins[1].Data, tir.Int32(n)))
		}), nil
	}
	noErr(t, "pattern", b.RegisterPattern("add", pattern.IsOp(op.Add, pattern.Wildcard(), pattern.Wildcard()), nil))
	noErr(t, "strategy", b.RegisterOperatorStrategy(op.Add, strategy.Implementation{Name: "acc_cx.add", Compute: compute}))
	noErr(t, "tir pass", b.RegisterTIRPassContext(tirtransform.Phase0, "config", func(ctx PassContext, f *tir.PrimFunc) (*tir.PrimFunc, error) {
		*seen = append(*seen, ctx.Target.Kind.Name+" "+f.Name+" assert-off="+boolText(ctx.Config.Bool(passconfig.DisableAssert))+" vectorize-off="+boolText(ctx.Config.Bool(passconfig.DisableVectorize)))
		return f, nil
	}))
	noErr(t, "codegen", b.RegisterCodegen("c", CodegenOptions{
		Includes: []string{`"acc_cx.h"`},
		ReplaceCallExtern: func(tg *targets.Target, name string, args []string) (string, bool) {
			if name != "acc_cx_add" {
				return "", false
			}
			return "acc_cx_vendor_add(" + strings.Join(args, ", ") + ")", true
		},
		Sources: []SourceFile{
			{Name: "acc_cx.h", Data: []byte("#include <stdint.h>\nvoid acc_cx_vendor_add(float* out, const float* a, const float* b, int32_t n);\n")},
			{Name: "acc_cx.c", Data: []byte(vendorAdd)},
		},
	}))
	wantErr(t, "nil context pass", b.RegisterTIRPassContext(tirtransform.Phase1, "nil", nil), "needs a name and a function")
	r := targets.NewRegistry()
	noErr(t, "c", r.Register(targets.C))
	noErr(t, "Register", b.Register(r))
	return r
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// TestUMACodegenHooksAndPassContext exercises UMA's C codegen hooks and
// pass configuration through the UMA API end to end: the extern call of
// the accelerator's strategy reaches the generated C as the vendor call
// ReplaceCallExtern wrote, the header from Includes declares it, the
// vendor source is compiled in; the TIR pass sees the compilation's pass
// configuration (tir.disable_assert set, tir.disable_vectorize not); with
// the AOT executor and --unpacked-api the run function calls the
// accelerator's kernel through its unpacked form. Outputs match the
// reference on both executors.
func TestUMACodegenHooksAndPassContext(t *testing.T) {
	testenv.Cgo(t)
	var seen []string
	r := accCX(t, &seen)
	mod, err := graph.Parse(`def @main(%x: Tensor[(8), float32], %y: Tensor[(8), float32]) {
  %0 = add(%x, %y);
  %1 = tanh(%0);
  add(%1, %y)
}`, graph.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := r.ParseList("acc_cx, c")
	if err != nil {
		t.Fatal(err)
	}
	pc := passconfig.New()
	noErr(t, "pass config", pc.Set("tir.disable_assert", "true"))
	ins, args := randomInputs(5, ir.Shape{8}, "x", "y")
	want, err := ref.Run(mod, args)
	if err != nil {
		t.Fatal(err)
	}
	for _, aot := range []bool{false, true} {
		seen = nil
		out := filepath.Join(t.TempDir(), "art")
		cfg := driver.Config{Host: l.Host, Targets: l.Targets, Out: out, PassConfig: pc, ModuleName: "cx"}
		if aot {
			cfg.Executor, cfg.AOT = driver.ExecutorAOT, driver.AOTOptions{UnpackedAPI: true}
		}
		if _, err := driver.Compile(mod, nil, cfg); err != nil {
			t.Fatalf("aot=%v: %v", aot, err)
		}
		if len(seen) != 2 || !strings.HasPrefix(seen[0], "acc_cx ") || !strings.HasSuffix(seen[0], " assert-off=true vectorize-off=false") {
			t.Errorf("aot=%v: the TIR pass saw %q, want both adds' functions with the pass configuration", aot, seen)
		}
		// The generated C: kiln_lib.c and the accelerator's C source
		// module beside it.
		var lib []byte
		files, _ := filepath.Glob(filepath.Join(out, "*.c"))
		for _, f := range files {
			if filepath.Base(f) == "acc_cx.c" {
				continue // the vendor's own source, which defines the function
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			lib = append(lib, data...)
		}
		if n := strings.Count(string(lib), "acc_cx_vendor_add("); n != 2 || !strings.Contains(string(lib), `#include "acc_cx.h"`) {
			t.Errorf("aot=%v: %d vendor calls (want 2, one per add) or no include in the generated C", aot, n)
		}
		if aot {
			run, err := os.ReadFile(filepath.Join(out, "kiln_cx.c"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(run), "kiln_cx_acc_cx_main_0_unpacked(") || strings.Contains(string(run), "kiln_tensor args[") {
				t.Errorf("the AOT run function does not call the accelerator's kernel unpacked:\n%s", run)
			}
		}
		art, err := driver.LoadArtifact(out)
		if err != nil {
			t.Fatal(err)
		}
		got, err := art.Run(ins)
		art.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := tensor.AllClose(got[0], want.Flatten()[0], 1e-5, 1e-6); err != nil {
			t.Errorf("aot=%v: %v", aot, err)
		}
	}
}
