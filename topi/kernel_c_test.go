package topi

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/tir"
)

// cPrelude is the start of a C test program for kernels: the standard
// headers and each kernel's includes.
func cPrelude(ks ...tir.Kernel) string {
	var b strings.Builder
	b.WriteString("#include <stddef.h>\n#include <stdint.h>\n#include <string.h>\n#include <stdio.h>\n#include <stdlib.h>\n")
	for _, k := range ks {
		for _, inc := range k.Includes() {
			if inc[0] == '#' {
				b.WriteString(inc + "\n")
			} else {
				b.WriteString("#include " + inc + "\n")
			}
		}
	}
	return b.String()
}

// cArray is a C definition of a constant array name of type typ.
func cArray(name, typ string, v []int64) string {
	s := make([]string, len(v))
	for i, e := range v {
		s[i] = fmt.Sprint(e)
	}
	return fmt.Sprintf("static const %s %s[%d] = {%s};\n", typ, name, len(v), strings.Join(s, ", "))
}

// runCVariants builds the C program src warning-free for Haswell (AVX2)
// and for a plain x86-64 (the kernels' portable C), runs each, and
// checks that it prints want, one integer per line.
func runCVariants(t *testing.T, cc, src string, want []int64) {
	t.Helper()
	runCBuilds(t, cc, src, want, "-march=haswell", "-march=x86-64")
}

// avx512VNNIMarch is the -march of runCBuilds' AVX-512 VNNI builds.
const avx512VNNIMarch = "-march=icelake-server"

// avxVNNIMarch is the -march of runCBuilds' AVX-VNNI builds (256-bit
// vpdpbusd, no AVX-512).
const avxVNNIMarch = "-march=alderlake"

// marchNeeds are the processor flags (as /proc/cpuinfo names them) that
// runCBuilds' AVX-512 builds need to run: icelake-server's code may use
// VBMI's byte permutations, Cascade Lake's has none.
var marchNeeds = map[string][]string{
	avx512VNNIMarch:      {"avx512_vnni", "avx512bw", "avx512vl", "avx512vbmi"},
	"-march=cascadelake": {"avx512_vnni", "avx512bw", "avx512vl"},
	avxVNNIMarch:         {"avx_vnni", "avx2"},
}

// runCBuilds builds the C program src warning-free with each -march
// flag, runs each build this machine can run (an AVX-512 build only
// where /proc/cpuinfo lists marchNeeds' flags), and checks that it
// prints want, one integer per line.
func runCBuilds(t *testing.T, cc, src string, want []int64, marchs ...string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "k.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, march := range marchs {
		build := exec.Command(cc, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", march, "k.c", "-o", "k", "-lm")
		build.Dir = dir
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", march, err, out)
		}
		if need := marchNeeds[march]; need != nil && !hostCPUFlags(need...) {
			t.Logf("%s: built; not run (this machine lacks one of %v)", march, need)
			continue
		}
		run := exec.Command("./k")
		run.Dir = dir
		out, err := run.Output()
		if err != nil {
			t.Fatalf("%s: run: %v", march, err)
		}
		got := strings.Fields(string(out))
		if len(got) != len(want) {
			t.Fatalf("%s: %d values, want %d", march, len(got), len(want))
		}
		for i, g := range got {
			if g != fmt.Sprint(want[i]) {
				t.Fatalf("%s: output %d is %s, want %d", march, i, g, want[i])
			}
		}
	}
}

// hostCPUFlags reports whether /proc/cpuinfo lists every flag.
func hostCPUFlags(flags ...string) bool {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, list, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) != "flags" {
			continue
		}
		have := strings.Fields(list)
		for _, f := range flags {
			if !slices.Contains(have, f) {
				return false
			}
		}
		return true
	}
	return false
}
