package c

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"github.com/kiln-dev/kiln/internal/testenv"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/tir/interp"
	"github.com/kiln-dev/kiln/tir/tirtest"
)

// sanitizeFlags are the sanitizers the generated code must run clean
// under. float-cast-overflow is not part of -fsanitize=undefined in GCC;
// it checks that float→int casts go through the UB-free helpers.
var sanitizeFlags = []string{"-fsanitize=address,undefined,float-cast-overflow", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g"}

// sanitizerAvailable compiles and runs a trivial program with the
// sanitizers (the runtimes come with gcc's libasan8 and libubsan1
// packages on Debian).
func sanitizerAvailable(dir string) error { return probeFlags(dir, sanitizeFlags...) }

// probeFlags compiles and runs a trivial program with flags.
func probeFlags(dir string, flags ...string) error {
	src := filepath.Join(dir, "probe.c")
	if err := os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644); err != nil {
		return err
	}
	exe := filepath.Join(dir, "probe")
	cc := compilerCommand("")
	args := append(append(cc[1:], flags...), src, "-o", exe)
	if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	if out, err := exec.Command(exe).CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// TestSanitizers builds the library of all test functions with
// AddressSanitizer and UndefinedBehaviorSanitizer, links a C driver that
// calls every packed function on random inputs held in exactly-sized
// heap blocks, and compares the outputs with the interpreter. Any
// sanitizer report fails the run.
func TestSanitizers(t *testing.T) {
	dir := t.TempDir()
	testenv.Need(t, "the C sanitizer runtimes (apt-get install libasan8 libubsan1)", sanitizerAvailable(dir))
	funcs := testFuncs()
	m := mustModule(t, funcs)
	src, err := Generate(m, HostOptions())
	if err != nil {
		t.Fatal(err)
	}
	lib, err := Build(src, dir, BuildOptions{ExtraFlags: sanitizeFlags, ExtraSources: []File{externC}})
	if err != nil {
		t.Fatal(err)
	}
	// Expected results and the driver.
	rng := rand.New(rand.NewSource(11))
	var drv strings.Builder
	drv.WriteString("#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include \"kiln/c_runtime_api.h\"\n\n")
	drv.WriteString("static void* dup(const unsigned char* p, size_t n) {\n  void* q = malloc(n ? n : 1);\n  if (q == NULL) abort();\n  memcpy(q, p, n);\n  return q;\n}\n\n")
	drv.WriteString("static void dump(const char* fn, int i, const unsigned char* p, size_t n) {\n  size_t k;\n  printf(\"%s %d \", fn, i);\n  for (k = 0; k < n; ++k) printf(\"%02x\", p[k]);\n  printf(\"\\n\");\n}\n\n")
	want := map[string][]byte{}
	var body strings.Builder
	for fi, f := range funcs {
		info := src.Funcs[fi]
		args := tirtest.RandomArgs(f, rng)
		tensors := tensorsData(info, args)
		if err := interp.Run(f, args, &interp.Options{Externs: tirtest.Externs}); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&drv, "int32_t %s(kiln_tensor* args, int32_t num_args);\n", info.Symbol)
		fmt.Fprintf(&body, "  {\n    kiln_tensor a[%d];\n    void* d[%d];\n", max(len(tensors), 1), max(len(tensors), 1))
		for i, data := range tensors {
			p := info.Params[i]
			code, bits := dtypeCodeBits(p.DType)
			fmt.Fprintf(&drv, "static const unsigned char in_%d_%d[%d] = {%s};\n", fi, i, max(len(data), 1), byteList(data))
			shape := "NULL"
			if len(p.Shape) > 0 {
				var dims []string
				for _, d := range p.Shape {
					dims = append(dims, fmt.Sprint(d))
				}
				fmt.Fprintf(&drv, "static const int64_t shape_%d_%d[%d] = {%s};\n", fi, i, len(dims), strings.Join(dims, ", "))
				shape = fmt.Sprintf("shape_%d_%d", fi, i)
			}
			fmt.Fprintf(&body, "    d[%d] = dup(in_%d_%d, %d);\n", i, fi, i, len(data))
			fmt.Fprintf(&body, "    a[%d].data = d[%d]; a[%d].shape = %s; a[%d].ndim = %d; a[%d].dtype_code = %d; a[%d].dtype_bits = %d;\n",
				i, i, i, shape, i, len(p.Shape), i, code, i, bits)
			fmt.Fprintf(&body, "    a[%d].dtype_lanes = 1; a[%d].device_type = KILN_DEVICE_CPU; a[%d].device_id = 0;\n", i, i, i)
			if arr, ok := args[i].(*interp.Array); ok {
				want[fmt.Sprintf("%s %d", info.Symbol, i)] = arr.Data
			}
		}
		fmt.Fprintf(&body, "    if (%s(a, %d) != 0) {\n      fprintf(stderr, \"%%s\\n\", kiln_get_last_error());\n      return 1;\n    }\n", info.Symbol, len(tensors))
		for i := range tensors {
			if _, ok := args[i].(*interp.Array); ok {
				fmt.Fprintf(&body, "    dump(%q, %d, (const unsigned char*)d[%d], %d);\n", info.Symbol, i, i, len(tensors[i]))
			}
			fmt.Fprintf(&body, "    free(d[%d]);\n", i)
		}
		body.WriteString("  }\n")
	}
	drv.WriteString("\nint main(void) {\n")
	drv.WriteString(body.String())
	drv.WriteString("  return 0;\n}\n")
	drvPath := filepath.Join(dir, "driver.c")
	if err := os.WriteFile(drvPath, []byte(drv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "driver")
	cc := compilerCommand("")
	args := append(cc[1:], "-std=c99", "-Wall", "-Wextra", "-Werror")
	args = append(args, sanitizeFlags...)
	args = append(args, "-I", filepath.Join(dir, "include"), drvPath, lib, "-Wl,-rpath,"+dir, "-o", exe, "-lm")
	if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
		t.Fatalf("linking the driver: %v\n%s", err, out)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "ASAN_OPTIONS=detect_leaks=1", "UBSAN_OPTIONS=print_stacktrace=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("driver under sanitizers: %v\n%s", err, stderr.String())
	}
	got := map[string][]byte{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			t.Fatalf("bad driver output line %q", sc.Text())
		}
		b, err := hex.DecodeString(f[2])
		if err != nil {
			t.Fatal(err)
		}
		got[f[0]+" "+f[1]] = b
	}
	if len(got) != len(want) {
		t.Fatalf("driver printed %d buffers, want %d", len(got), len(want))
	}
	for fi, f := range funcs {
		for i, p := range f.Params {
			key := fmt.Sprintf("%s %d", src.Funcs[fi].Symbol, i)
			w, ok := want[key]
			if !ok {
				continue
			}
			arr := &interp.Array{DType: f.BufferMap[p].DType, Data: w}
			if err := compareArrays(f.Name, p.Name, arr, got[key]); err != nil {
				t.Errorf("%s: %v", f.Name, err)
			}
		}
	}
}

// tensorsData is the bytes of each argument (scalars as one element).
func tensorsData(info FuncInfo, args []any) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		switch x := a.(type) {
		case *interp.Array:
			out[i] = append([]byte(nil), x.Data...)
		case int64:
			arr := interp.NewArray(info.Params[i].DType, 1)
			arr.SetFloat(0, float64(x))
			out[i] = arr.Data
		}
	}
	return out
}

func byteList(b []byte) string {
	if len(b) == 0 {
		return "0"
	}
	var s strings.Builder
	for i, c := range b {
		if i > 0 {
			s.WriteByte(',')
		}
		fmt.Fprintf(&s, "%d", c)
	}
	return s.String()
}
