package c

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
)

// TestThreadCountDefault: a library whose thread count was never set
// uses OpenMP's (OMP_NUM_THREADS here), and kiln_set_num_threads
// overrides it.
func TestThreadCountDefault(t *testing.T) {
	testenv.CC(t)
	dir := t.TempDir()
	src := "#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n" + preambleMacros + runtimeDefs +
		"int main(void) {\n  printf(\"%d\", (int)kiln_thread_count());\n  kiln_set_num_threads(2);\n  printf(\" %d\\n\", (int)kiln_thread_count());\n  return 0;\n}\n"
	file := filepath.Join(dir, "threads.c")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "threads")
	cc := compilerCommand("")
	args := append(cc[1:], "-fopenmp", "-Wall", "-Wextra", "-Werror", file, "-o", exe)
	if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, n := range []string{"1", "3"} {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), "OMP_NUM_THREADS="+n)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if got, want := strings.TrimSpace(string(out)), n+" 2"; got != want {
			t.Errorf("OMP_NUM_THREADS=%s: thread counts %q, want %q", n, got, want)
		}
	}
}
