package driver

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/quantize"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/tensor"
)

// dtypeCode returns the ABI's (code, bits) of a dtype.
func dtypeCode(dt ir.DType) (int, int) {
	switch {
	case dt == ir.Bool:
		return 6, 8
	case dt == ir.BFloat16:
		return 4, 16
	case dt.IsFloat():
		return 2, dt.Size() * 8
	case dt.IsUint():
		return 1, dt.Size() * 8
	}
	return 0, dt.Size() * 8
}

// driverSource writes a C program that executes a graph program the way the
// Go graph executor does, but with every entry in its own exactly-sized
// heap block (instead of the planned storage pools), so AddressSanitizer
// sees any access of a kernel outside the tensor it was given.
// Inputs (graph inputs then parameters, in arg_nodes order) are read from
// one raw file and the outputs written to another.
func driverSource(g *runtime.GraphJSON) (string, error) {
	var b strings.Builder
	b.WriteString("#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include \"kiln/c_runtime_api.h\"\n\n")
	declared := map[string]bool{}
	for _, n := range g.Nodes {
		if n.Op != "kiln_op" {
			continue
		}
		fn := n.StringAttr("func_name")
		if !declared[fn] {
			declared[fn] = true
			fmt.Fprintf(&b, "int32_t %s(kiln_tensor* args, int32_t num_args);\n", fn)
		}
	}
	nent := len(g.Attrs.StorageID)
	b.WriteString("\nint main(int argc, char** argv) {\n  if (argc != 3) return 2;\n")
	fmt.Fprintf(&b, "  void* st[%d];\n", max(nent, 1))
	for e := 0; e < nent; e++ {
		fmt.Fprintf(&b, "  st[%d] = malloc(%d);\n", e, max(entryBytes(g, int64(e)), 1))
	}
	b.WriteString("  FILE* in = fopen(argv[1], \"rb\");\n  if (!in) return 3;\n")
	for _, a := range g.ArgNodes {
		e := g.NodeRowPtr[a]
		fmt.Fprintf(&b, "  if (fread(st[%d], 1, %d, in) != %d) return 4;\n", e, entryBytes(g, e), entryBytes(g, e))
	}
	b.WriteString("  fclose(in);\n")
	for ni, n := range g.Nodes {
		if n.Op != "kiln_op" {
			continue
		}
		var ents []int64
		for _, in := range n.Inputs {
			ents = append(ents, g.NodeRowPtr[in[0]]+in[1])
		}
		for e := g.NodeRowPtr[ni]; e < g.NodeRowPtr[ni+1]; e++ {
			ents = append(ents, e)
		}
		fmt.Fprintf(&b, "  {\n")
		for k, e := range ents {
			shape := g.Attrs.Shape[e]
			dims := make([]string, len(shape))
			for i, d := range shape {
				dims[i] = fmt.Sprint(d)
			}
			if len(dims) == 0 {
				dims = []string{"1"}
			}
			fmt.Fprintf(&b, "    static const int64_t s%d[] = {%s};\n", k, strings.Join(dims, ", "))
		}
		fmt.Fprintf(&b, "    kiln_tensor a[%d];\n", len(ents))
		for k, e := range ents {
			dt, _ := ir.ParseDType(g.Attrs.DLType[e])
			code, bits := dtypeCode(dt)
			fmt.Fprintf(&b, "    a[%d].data = st[%d]; a[%d].shape = s%d; a[%d].ndim = %d; a[%d].dtype_code = %d; a[%d].dtype_bits = %d; a[%d].dtype_lanes = 1; a[%d].device_type = KILN_DEVICE_CPU; a[%d].device_id = 0;\n",
				k, e, k, k, k, len(g.Attrs.Shape[e]), k, code, k, bits, k, k, k)
		}
		fmt.Fprintf(&b, "    if (%s(a, %d) != 0) { fprintf(stderr, \"%s: %%s\\n\", kiln_get_last_error()); return 5; }\n  }\n",
			n.StringAttr("func_name"), len(ents), n.StringAttr("func_name"))
	}
	b.WriteString("  FILE* out = fopen(argv[2], \"wb\");\n  if (!out) return 6;\n")
	for _, h := range g.Heads {
		e := g.NodeRowPtr[h[0]] + h[1]
		fmt.Fprintf(&b, "  fwrite(st[%d], 1, %d, out);\n", e, entryBytes(g, e))
	}
	b.WriteString("  fclose(out);\n")
	for e := 0; e < nent; e++ {
		fmt.Fprintf(&b, "  free(st[%d]);\n", e)
	}
	b.WriteString("  return 0;\n}\n")
	return b.String(), nil
}

func entryBytes(g *runtime.GraphJSON, e int64) int64 {
	dt, _ := ir.ParseDType(g.Attrs.DLType[e])
	n := int64(dt.Size())
	for _, d := range g.Attrs.Shape[e] {
		n *= d
	}
	return n
}

// sanitizerModels are the shared models TestCompiledModelsUnderSanitizers
// runs: the first six always (about two minutes on 2 cores), resnet18
// unless -short, googlenet and mobilenet_v3_large (five more minutes)
// only with KILN_SANITIZE_ALL=1.
var sanitizerModels = []string{"lenet", "mlp", "conv1d_kws", "squeezenet1_1", "tiny_bert", "mobilenet_v2", "resnet18", "googlenet", "mobilenet_v3_large"}

// TestCompiledModelsUnderSanitizers compiles every shared model for the
// host target, rebuilds its generated C with AddressSanitizer and
// UndefinedBehaviorSanitizer together with a C driver that runs the graph
// program (each entry its own exactly-sized heap block), and checks the
// run is clean and its outputs match the reference executor.
func TestCompiledModelsUnderSanitizers(t *testing.T) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	probe := exec.Command(cc, "-fsanitize=address,undefined", "-x", "c", "-o", os.DevNull, "-")
	probe.Stdin = strings.NewReader("int main(void){return 0;}")
	if out, err := probe.CombinedOutput(); err != nil {
		t.Fatalf("the C compiler cannot build with sanitizers (install libasan8 and libubsan1): %v\n%s", err, out)
	}
	ran := 0
	for _, name := range sanitizerModels {
		dir := testenv.SharedPath(t, "models", name)
		if (testing.Short() && name == "resnet18") || (os.Getenv("KILN_SANITIZE_ALL") == "" && (name == "googlenet" || name == "mobilenet_v3_large")) {
			t.Logf("%s skipped (KILN_SANITIZE_ALL=1 runs it)", name)
			continue
		}
		ran++
		t.Run(name, func(t *testing.T) { sanitizeModel(t, cc, dir) })
	}
	if ran == 0 {
		t.Run("mlp", func(t *testing.T) { sanitizeModel(t, cc, filepath.Join("..", "examples", "models", "mlp")) })
	}
}

// TestInt8ModelUnderSanitizers quantizes mobilenet_v2 with 7-bit weights
// (kiln quantize's --reduce-range), compiles the QDQ model's integer
// operators for the host and runs them as TestCompiledModelsUnderSanitizers
// runs the float models: the integer convolution tiles (vpmaddubsw on
// AVX2), the depthwise rows with their vector tails, the requantizations
// and the residual adds read and write only their own tensors, with no
// undefined behaviour, and give the reference executor's values.
func TestInt8ModelUnderSanitizers(t *testing.T) {
	if testing.Short() {
		t.Skip("quantizes and sanitizes mobilenet_v2 (about a minute)")
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	src := testenv.SharedPath(t, "models", "mobilenet_v2")
	data, err := os.ReadFile(filepath.Join(src, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	fm, err := quantize.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	cal, err := quantize.Generate(fm, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := quantize.Quantize(context.Background(), fm, quantize.RefEngine{}, cal, quantize.Options{ReduceRange: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), res.Model, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(src, "test_data_set_0"), filepath.Join(dir, "test_data_set_0")); err != nil {
		t.Fatal(err)
	}
	sanitizeModel(t, cc, dir)
}

func sanitizeModel(t *testing.T, cc, dir string) {
	model, err := onnx.LoadFile(filepath.Join(dir, "model.onnx"), onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string]*tensor.Tensor{}
	var args []*tensor.Tensor
	for i, in := range model.Inputs {
		v, _, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("input_%d.pb", i)))
		if err != nil {
			t.Fatal(err)
		}
		inputs[in.Name] = v
		args = append(args, v)
	}
	out := filepath.Join(t.TempDir(), "art")
	if _, err := Compile(model.Module, nil, Config{Host: hostTarget(t), Out: out}); err != nil {
		t.Fatal(err)
	}
	gj, err := os.ReadFile(filepath.Join(out, "graph.json"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := runtime.DecodeGraphJSON(gj)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := os.Open(filepath.Join(out, "params.bin"))
	if err != nil {
		t.Fatal(err)
	}
	params, err := runtime.ReadParams(pf)
	pf.Close()
	if err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	for _, a := range g.ArgNodes {
		name := g.Nodes[a].Name
		if v, ok := inputs[name]; ok {
			raw.Write(v.Data)
		} else if p, ok := params[name]; ok {
			raw.Write(p.Data)
		} else {
			t.Fatalf("argument %q is neither an input nor a parameter", name)
		}
	}
	src, err := driverSource(g)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	for name, data := range map[string][]byte{"driver.c": []byte(src), "in.raw": raw.Bytes()} {
		if err := os.WriteFile(filepath.Join(work, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(work, "run")
	// The host target's CPU flags, so that the vector kernels the
	// artifact runs (AVX2 and the like, under #if on the compiler's
	// predefined macros) are the code sanitized, not the portable C
	// beside them: on an AVX2 host they must define __AVX2__.
	proc := hostTarget(t).Processor()
	if slices.Contains(proc.Features, "avx2") {
		macros, err := exec.Command(cc, append(proc.CFlags(), "-dM", "-E", "-x", "c", os.DevNull)...).Output()
		if err != nil || !strings.Contains(string(macros), "__AVX2__") {
			t.Fatalf("the host's C flags %v do not enable AVX2 (%v)", proc.CFlags(), err)
		}
	}
	cargs := append([]string{"-std=c99", "-O1", "-g", "-fno-omit-frame-pointer", "-Wall", "-Wextra", "-Werror",
		"-fsanitize=address,undefined", "-fno-sanitize-recover=all"}, cgen.ThreadFlags(true)...)
	cargs = append(cargs, proc.CFlags()...)
	cargs = append(cargs, "-I", filepath.Join(out, "include"), filepath.Join(out, "kiln_lib.c"), filepath.Join(out, cgen.ThreadsName), filepath.Join(work, "driver.c"), "-o", bin, "-lm")
	if msg, err := exec.Command(cc, cargs...).CombinedOutput(); err != nil {
		t.Fatalf("sanitizer build: %v\n%s", err, msg)
	}
	run := exec.Command(bin, filepath.Join(work, "in.raw"), filepath.Join(work, "out.raw"))
	run.Env = append(os.Environ(), "ASAN_OPTIONS=detect_leaks=1:halt_on_error=1", "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1", "OMP_NUM_THREADS=2")
	if msg, err := run.CombinedOutput(); err != nil || len(msg) > 0 {
		t.Fatalf("sanitized run: %v\n%s", err, msg)
	}
	got, err := os.ReadFile(filepath.Join(work, "out.raw"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Run(model.Module, args)
	if err != nil {
		t.Fatal(err)
	}
	off := 0
	for i, w := range want.Flatten() {
		n := len(w.Data)
		if off+n > len(got) {
			t.Fatalf("the sanitized run wrote %d bytes, output %d needs up to %d", len(got), i, off+n)
		}
		gt, err := tensor.FromBytes(w.DType, w.Shape, got[off:off+n])
		if err != nil {
			t.Fatal(err)
		}
		off += n
		if err := tensor.AllClose(gt, w, 1e-4, 1e-5); err != nil {
			t.Errorf("sanitized run vs reference, output %d: %v", i, err)
		}
	}
}
