//go:build cgo && !kiln_nodnnl

package dnnl

import (
	"fmt"
	"math/rand"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/runtime/jsonrt"
	"github.com/kiln-dev/kiln/tensor"
)

// dnnlModules returns the dnnl JSON modules in m's module tree.
func dnnlModules(m runtime.Module) []*jsonrt.Module {
	var out []*jsonrt.Module
	if jm, ok := m.(*jsonrt.Module); ok && jm.Kind() == ModuleKind {
		out = append(out, jm)
	}
	for _, im := range m.Imports() {
		out = append(out, dnnlModules(im)...)
	}
	return out
}

// TestForkSharesReorderedWeights: forks of an executor over a dnnl
// region run at the same time as the executor, with results equal to
// the reference engine's, and their instances of the region take the
// weights their primitives want from the one reordered copy.
func TestForkSharesReorderedWeights(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	x := fvar("x", 1, 3, 16, 16)
	attrs := ir.Attrs{"strides": []int64{2, 2}, "padding": []int64{1, 1, 1, 1}}
	c1 := call(op.Conv2D, attrs, x, graph.NewConstant(randTensor(rng, 8, 3, 3, 3)))
	r1 := call(op.Relu, nil, call(op.BiasAdd, nil, c1, graph.NewConstant(randTensor(rng, 8))))
	c2 := call(op.Conv2D, ir.Attrs{"padding": []int64{1, 1, 1, 1}}, r1, graph.NewConstant(randTensor(rng, 16, 8, 3, 3)))
	out := call(op.GlobalAvgPool2D, nil, call(op.Relu, nil, c2))
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x}, out, nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	art, err := driver.LoadArtifact(compile(t, mod, "dnnl, c -mcpu=x86-64", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer art.Close()
	run := func(e *runtime.GraphExecutor, seed int64) error {
		in := randTensor(rand.New(rand.NewSource(seed)), 1, 3, 16, 16)
		got, err := e.Execute(map[string]*tensor.Tensor{"x": in})
		if err != nil {
			return err
		}
		want, err := ref.Run(mod, []*tensor.Tensor{in})
		if err != nil {
			return err
		}
		return tensor.AllClose(got[0], want.Flatten()[0], rtol, atol)
	}
	if err := run(art.Exec, 0); err != nil {
		t.Fatal(err)
	}
	mods := dnnlModules(art.Exec.Module())
	if len(mods) != 1 {
		t.Fatalf("%d dnnl modules, want 1", len(mods))
	}
	cache := &mods[0].KernelSet().(*kernelSet).shared.weights
	reorders := cache.reorders
	if reorders < 2 {
		t.Fatalf("%d constants reordered, want the two convolutions' weights at least", reorders)
	}
	live := livePrimitives.Load()
	var forks []*runtime.GraphExecutor
	for range 2 {
		f, err := art.Exec.Fork([]string{"x"})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		forks = append(forks, f)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for k, e := range append([]*runtime.GraphExecutor{art.Exec}, forks...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				if err := run(e, int64(100*k+i+1)); err != nil {
					errs <- fmt.Errorf("executor %d run %d: %w", k, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := mods[0].KernelSet().(*kernelSet).shared.instances.Load(); n != 2 {
		t.Errorf("%d instances of the dnnl module for 2 forks", n)
	}
	if cache.reorders != reorders {
		t.Errorf("the forks reordered %d constants again; they must share the reordered weights", cache.reorders-reorders)
	}
	// Closing the forks destroys their instances' primitives; a new
	// thread count rebuilds the root's kernels and destroys the old ones.
	if livePrimitives.Load() <= live {
		t.Fatalf("the forks created no primitives (%d live, %d before)", livePrimitives.Load(), live)
	}
	for _, f := range forks {
		f.Close()
	}
	if n := livePrimitives.Load(); n != live {
		t.Errorf("%d primitives live after closing the forks, %d before they were made", n, live)
	}
	runtime.SetNumThreads(art.Exec.Module(), 1)
	if err := run(art.Exec, 99); err != nil {
		t.Fatal(err)
	}
	runtime.SetNumThreads(art.Exec.Module(), 0)
	if err := run(art.Exec, 98); err != nil {
		t.Fatal(err)
	}
	if n := livePrimitives.Load(); n != live {
		t.Errorf("%d primitives live after rebuilding the kernels twice, %d before", n, live)
	}
	// A fork dropped without Close releases its instance's primitives
	// once the garbage collector finds it unreachable.
	func() {
		f, err := art.Exec.Fork([]string{"x"})
		if err != nil {
			t.Fatal(err)
		}
		if err := run(f, 7); err != nil {
			t.Fatal(err)
		}
	}()
	if livePrimitives.Load() <= live {
		t.Fatalf("the dropped fork created no primitives")
	}
	for i := 0; i < 100 && livePrimitives.Load() != live; i++ {
		goruntime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := livePrimitives.Load(); n != live {
		t.Errorf("%d primitives live after a dropped fork was collected, %d before", n, live)
	}
}
