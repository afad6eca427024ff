package c

import (
	"os/exec"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
)

// TestThreadCountDefault: a library whose thread count was never set
// uses OMP_NUM_THREADS, else (the pool) the processors the process may
// run on, and kiln_set_num_threads overrides it; on OpenMP teams and on
// kiln's pool.
func TestThreadCountDefault(t *testing.T) {
	testenv.CC(t)
	const main = "int main(void) {\n  printf(\"%d\", (int)kiln_thread_count());\n  kiln_set_num_threads(2);\n  printf(\" %d\\n\", (int)kiln_thread_count());\n  return 0;\n}\n"
	for _, pool := range []bool{false, true} {
		exe := buildThreadsProgram(t, compilerCommand(""), pool, threadsSource(pool)+"#include <stdio.h>\n"+main)
		cases := map[string]string{"1": "1 2", "3": "3 2"}
		if pool {
			cases[""] = strconv.Itoa(goruntime.NumCPU()) + " 2"
		}
		for n, want := range cases {
			cmd := exec.Command(exe)
			cmd.Env = envWithout("OMP_NUM_THREADS=")
			if n != "" {
				cmd.Env = append(cmd.Env, "OMP_NUM_THREADS="+n)
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != want {
				t.Errorf("pool %v, OMP_NUM_THREADS=%q: thread counts %q, want %q", pool, n, got, want)
			}
		}
	}
}
