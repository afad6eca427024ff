package runtime

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// TestMultiThreadedRunsShareOneThread: the runs of an executor that may
// use several threads run on one OS thread of its own, whichever thread
// calls them (OpenMP keeps a team per calling thread), and a run at one
// thread runs on the caller's thread.
func TestMultiThreadedRunsShareOneThread(t *testing.T) {
	testenv.Cgo(t)
	var mu sync.Mutex
	var tids []int
	mod := &goModule{name: "probe", funcs: map[string]PackedFunc{
		"probe": func(args []*NDArray) error {
			mu.Lock()
			tids = append(tids, syscall.Gettid())
			mu.Unlock()
			return args[1].CopyFromArray(args[0])
		},
	}}
	e, err := NewGraphExecutor([]byte(coresGraph), mod)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.SetInput("x", tensor.FromFloat32s(ir.Shape{2}, []float32{1, 2})); err != nil {
		t.Fatal(err)
	}
	// Each call from a goroutine locked to a thread of its own.
	call := func() (caller int, err error) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			goruntime.LockOSThread()
			defer goruntime.UnlockOSThread()
			caller = syscall.Gettid()
			err = e.Run()
		}()
		<-done
		return caller, err
	}
	var callers []int
	for range 4 {
		c, err := call()
		if err != nil {
			t.Fatal(err)
		}
		callers = append(callers, c)
	}
	if len(tids) != 8 {
		t.Fatalf("%d kernel calls, want 8", len(tids))
	}
	for _, tid := range tids {
		if tid != tids[0] || slices.Contains(callers, tid) {
			t.Fatalf("kernels ran on threads %v (callers %v), want one thread of the executor's own", tids, callers)
		}
	}
	tids = nil
	e.SetThreads(1)
	c, err := call()
	if err != nil {
		t.Fatal(err)
	}
	if len(tids) != 2 || tids[0] != c || tids[1] != c {
		t.Errorf("at one thread the kernels ran on %v, want the caller's thread %d", tids, c)
	}
	if e.home != nil {
		t.Errorf("the home thread outlived the switch to one thread")
	}
}

// TestOpenMPBindingUndoneAtLoad: loading a library that starts the
// OpenMP runtime with OMP_PROC_BIND set (libgomp then binds the loading
// thread to its first place) leaves the loading thread's affinity as it
// was. It runs in a child process, as libgomp reads its environment
// once.
func TestOpenMPBindingUndoneAtLoad(t *testing.T) {
	testenv.Cgo(t)
	if os.Getenv("KILN_TEST_OMP_CHILD") == "1" {
		ompBindingChild(t)
		return
	}
	all, err := allowedCores()
	if err != nil || len(all) < 2 {
		t.Skipf("needs two cores this process may run on (have %v, %v)", all, err)
	}
	cc := testenv.CC(t)
	src := filepath.Join(t.TempDir(), "omp.c")
	so := filepath.Join(t.TempDir(), "libomp_probe.so")
	if err := os.WriteFile(src, []byte("#include <omp.h>\nint omp_probe(void) { int n = 0;\n#pragma omp parallel reduction(+:n)\n  n++;\n  return n; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-fopenmp", "-o", so, src).CombinedOutput(); err != nil {
		t.Fatalf("compiling the probe: %v\n%s", err, out)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenMPBindingUndoneAtLoad$", "-test.v")
	cmd.Env = append(os.Environ(), "KILN_TEST_OMP_CHILD=1", "KILN_TEST_OMP_LIB="+so, "OMP_PROC_BIND=true", "OMP_PLACES=cores")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func ompBindingChild(t *testing.T) {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	before, err := allowedCores()
	if err != nil {
		t.Fatal(err)
	}
	h, err := dlOpen(os.Getenv("KILN_TEST_OMP_LIB"))
	if err != nil {
		t.Fatal(err)
	}
	if dlSym(h, "omp_get_num_places") == nil {
		t.Fatal("the probe library does not bring in the OpenMP runtime")
	}
	after, err := allowedCores()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		t.Errorf("loading an OpenMP library moved the loading thread from cores %v to %v", before, after)
	}
	fmt.Println("cores before and after the load:", before, after)
}
