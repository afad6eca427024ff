package topi

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/tir"
)

// cPrelude is the start of a C test program for kernels: the standard
// headers and each kernel's includes.
func cPrelude(ks ...tir.Kernel) string {
	var b strings.Builder
	b.WriteString("#include <stdint.h>\n#include <string.h>\n#include <stdio.h>\n#include <stdlib.h>\n")
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
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "k.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, march := range []string{"-march=haswell", "-march=x86-64"} {
		build := exec.Command(cc, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", march, "k.c", "-o", "k", "-lm")
		build.Dir = dir
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", march, err, out)
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
