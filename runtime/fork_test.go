package runtime

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// instancedModule is a Go module that makes instances of itself (an
// Instancer, like a JSON runtime module) and counts, per instance, the
// calls of its one function; a call running while another runs in the
// same instance is an error (the state an instance guards).
type instancedModule struct {
	goModule
	made   *atomic.Int32
	calls  atomic.Int32
	inCall atomic.Bool
}

func newInstancedModule(made *atomic.Int32) *instancedModule {
	m := &instancedModule{made: made}
	neg := negateModule().funcs["negate_f32"]
	m.goModule = goModule{name: "negate", funcs: map[string]PackedFunc{
		"negate_f32": func(args []*NDArray) error {
			if !m.inCall.CompareAndSwap(false, true) {
				return fmt.Errorf("two calls at once in one instance")
			}
			defer m.inCall.Store(false)
			m.calls.Add(1)
			return neg(args)
		},
	}}
	return m
}

func (m *instancedModule) NewInstance() (Module, error) {
	m.made.Add(1)
	return newInstancedModule(m.made), nil
}

// TestFork: forks share the parameter buffer and the compiled code, run
// at the same time as each other and as the executor they came from with
// correct results, call their own instance of an Instancer module, and
// keep running after that executor is closed; shared parameters are
// frozen everywhere.
func TestFork(t *testing.T) {
	testenv.Cgo(t)
	var made atomic.Int32
	inst := newInstancedModule(&made)
	root := loadMain(t)
	root.Import(loadExtra(t))
	root.Import(inst)
	e, err := NewGraphExecutor([]byte(testGraph), root)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Fork([]string{"x"}); err == nil || !strings.Contains(err.Error(), `parameter "w" is not set`) {
		t.Errorf("Fork before the parameter is set: %v", err)
	}
	if _, err := e.Fork([]string{"nope"}); err == nil || !strings.Contains(err.Error(), `no input "nope"`) {
		t.Errorf("Fork with an unknown input: %v", err)
	}
	w := tensor.FromFloat32s(ir.Shape{2, 3}, testW)
	if err := e.SetParams(map[string]*tensor.Tensor{"w": w}); err != nil {
		t.Fatal(err)
	}
	const forks = 3
	var fs []*GraphExecutor
	for range forks {
		f, err := e.Fork([]string{"x"})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fs = append(fs, f)
	}
	if made.Load() != forks {
		t.Errorf("%d instances made for %d forks", made.Load(), forks)
	}
	wSID := e.g.entries[e.g.nodes[e.g.argNodes[1]].first].sid
	xSID := e.g.entries[e.g.nodes[e.g.argNodes[0]].first].sid
	for i, f := range fs {
		if f.owners[wSID] != e.owners[wSID] {
			t.Errorf("fork %d has a copy of the parameter instead of sharing it", i)
		}
		if f.owners[xSID] == e.owners[xSID] {
			t.Errorf("fork %d shares the input's buffer", i)
		}
		if f.steps[0].native != e.steps[0].native {
			t.Errorf("fork %d calls another native function", i)
		}
	}
	for _, ex := range append([]*GraphExecutor{e}, fs...) {
		if err := ex.SetInput("w", w); err == nil || !strings.Contains(err.Error(), "shared with forked executors") {
			t.Errorf("SetInput of a shared parameter: %v", err)
		}
	}
	// Every executor runs in its own goroutines at the same time; the
	// root executor's Execute serialises its own callers.
	var wg sync.WaitGroup
	errs := make(chan error, 2*(forks+1))
	for k, ex := range append([]*GraphExecutor{e}, fs...) {
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 30 {
					x := inputFor(k*2+g, i)
					outs, err := ex.Execute(map[string]*tensor.Tensor{"x": tensor.FromFloat32s(ir.Shape{2, 3}, x)})
					if err == nil {
						err = compareOutputs(outs, expected(x, testW))
					}
					if err != nil {
						errs <- fmt.Errorf("executor %d goroutine %d run %d: %w", k, g, i, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if inst.calls.Load() != 60 {
		t.Errorf("the root's module instance ran %d times, want 60 (the forks must call their own)", inst.calls.Load())
	}
	// The root goes first; the forks keep the shared parameter.
	e.Close()
	x := inputFor(9, 9)
	outs, err := fs[0].Execute(map[string]*tensor.Tensor{"x": tensor.FromFloat32s(ir.Shape{2, 3}, x)})
	if err != nil {
		t.Fatalf("a fork after its root's Close: %v", err)
	}
	if err := compareOutputs(outs, expected(x, testW)); err != nil {
		t.Error(err)
	}
	if _, err := e.Fork([]string{"x"}); err != errClosed {
		t.Errorf("Fork of a closed executor: %v", err)
	}
}

// TestForkParameterStorageIsExclusive: Fork shares a parameter's buffer
// because no kernel writes it. That holds because the graph loader
// refuses a program in which any other tensor lives in an input's
// storage (inputs are live throughout); Fork checks it again.
func TestForkParameterStorageIsExclusive(t *testing.T) {
	testenv.Cgo(t)
	gj := mutateGraph(t, func(g map[string]any) {
		gattr(g, "storage_id")[13] = float64(1) // neg's output reuses w's storage
	})
	if _, err := NewGraphExecutor(gj, testModule(t)); err == nil || !strings.Contains(err.Error(), `storage_id 1 is shared by node 1 ("w")`) {
		t.Errorf("a graph writing into a parameter's storage: %v", err)
	}
}
