//go:build cgo && !kiln_nodnnl

package dnnl

import (
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"

	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/runtime"
)

// TestOpenMPBindingUndoneAtStart: a process that links the OpenMP
// runtime (this package does, for oneDNN) started with OMP_PROC_BIND set
// has its first thread bound to one core by libgomp before Go starts;
// kiln's runtime gives every thread the process's cores back and the Go
// runtime sizes itself for them (before, every Go thread shared one core
// and GOMAXPROCS was 1: mobilenet_v2 at 1 thread ran 40 % slower), and
// the C build runs a compiler per core. Runs
// in a child process, as libgomp reads its environment once.
func TestOpenMPBindingUndoneAtStart(t *testing.T) {
	if want := os.Getenv("KILN_TEST_OMP_CORES"); want != "" {
		if n := goruntime.GOMAXPROCS(0); strconv.Itoa(n) != os.Getenv("KILN_TEST_OMP_NCORES") {
			t.Errorf("GOMAXPROCS is %d with cores %s", n, want)
		}
		// The C build runs a compiler per core (NumCPU, fixed while the
		// thread was bound, said 1: one unit at a time).
		if n := cgen.DefaultJobs(); strconv.Itoa(n) != os.Getenv("KILN_TEST_OMP_NCORES") {
			t.Errorf("the C build runs %d compilers at once with cores %s", n, want)
		}
		tasks, err := filepath.Glob("/proc/self/task/*/status")
		if err != nil || len(tasks) == 0 {
			t.Fatalf("no threads listed: %v", err)
		}
		for _, f := range tasks {
			data, err := os.ReadFile(f)
			if err != nil {
				continue // the thread has exited
			}
			for _, line := range strings.Split(string(data), "\n") {
				if got, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok && strings.TrimSpace(got) != want {
					t.Errorf("%s: cores %s, want the process's %s", f, strings.TrimSpace(got), want)
				}
			}
		}
		return
	}
	all, err := runtime.AvailableCores()
	if err != nil || len(all) < 2 {
		t.Skipf("needs two cores this process may run on (have %v, %v)", all, err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenMPBindingUndoneAtStart$", "-test.v")
	cmd.Env = append(os.Environ(), "KILN_TEST_OMP_CORES="+all.String(), "KILN_TEST_OMP_NCORES="+strconv.Itoa(len(all)), "OMP_PROC_BIND=true", "OMP_PLACES=cores")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
