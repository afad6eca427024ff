//go:build cgo

package c

import (
	"fmt"
	"math/rand"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln/codegen/c/internal/dl"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/tir/interp"
	"github.com/kiln-dev/kiln/tir/tirtest"
)

// testLib is the library holding every test function, built once.
var testLib struct {
	once sync.Once
	lib  *dl.Lib
	src  *Source
	err  error
}

func buildTestLib(t *testing.T) (*dl.Lib, *Source) {
	t.Helper()
	testLib.once.Do(func() {
		m, err := tir.NewModule(testFuncs()...)
		if err != nil {
			testLib.err = err
			return
		}
		src, err := Generate(m, HostOptions())
		if err != nil {
			testLib.err = err
			return
		}
		dir, err := tempDir("kiln-codegen-c-")
		if err != nil {
			testLib.err = err
			return
		}
		// The library is built split into translation units, through a
		// cache, so that every differential test runs that path.
		cache, err := OpenCache(dir + "/cache")
		if err != nil {
			testLib.err = err
			return
		}
		path, err := Build(src, dir, BuildOptions{ExtraSources: []File{externC}, Jobs: 3, unitBytes: 1, Cache: cache})
		if err != nil {
			testLib.err = err
			return
		}
		testLib.src = src
		testLib.lib, testLib.err = dl.Open(path)
	})
	if testLib.err != nil {
		t.Fatal(testLib.err)
	}
	return testLib.lib, testLib.src
}

// tensorsFor converts interpreter arguments to packed-call tensors with
// the parameters' logical shapes (scalars become 0-d tensors).
func tensorsFor(info FuncInfo, args []any) []dl.Tensor {
	out := make([]dl.Tensor, len(args))
	for i, a := range args {
		p := info.Params[i]
		code, bits := dtypeCodeBits(p.DType)
		switch x := a.(type) {
		case *interp.Array:
			out[i] = dl.Tensor{Data: append([]byte(nil), x.Data...), Shape: p.Shape, Code: code, Bits: bits}
		case int64:
			arr := interp.NewArray(p.DType, 1)
			arr.SetFloat(0, float64(x))
			out[i] = dl.Tensor{Data: arr.Data, Shape: []int64{}, Code: code, Bits: bits}
		default:
			panic(fmt.Sprintf("unexpected argument %T", a))
		}
	}
	return out
}

// TestDifferential runs every test function compiled to C on random
// inputs and compares all buffers with the interpreter's results.
func TestDifferential(t *testing.T) {
	lib, src := buildTestLib(t)
	funcs := testFuncs()
	for fi, f := range funcs {
		info := src.Funcs[fi]
		t.Run(f.Name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(fi) + 1))
			for trial := 0; trial < 20; trial++ {
				args := tirtest.RandomArgs(f, rng)
				tensors := tensorsFor(info, args)
				if err := interp.Run(f, args, &interp.Options{Externs: tirtest.Externs}); err != nil {
					t.Fatal(err)
				}
				st, err := lib.Call(info.Symbol, tensors, -1)
				if err != nil {
					t.Fatal(err)
				}
				if st != 0 {
					msg, _ := lib.LastError()
					t.Fatalf("%s returned %d: %s", info.Symbol, st, msg)
				}
				for i, a := range args {
					want, ok := a.(*interp.Array)
					if !ok {
						continue
					}
					if err := compareArrays(f.Name, f.Params[i].Name, want, tensors[i].Data); err != nil {
						t.Fatalf("trial %d: %v", trial, err)
					}
				}
			}
		})
	}
}

// TestThreads runs the parallel function with several thread counts.
func TestThreads(t *testing.T) {
	lib, src := buildTestLib(t)
	f := loopsFunc()
	var info FuncInfo
	for _, fi := range src.Funcs {
		if fi.Name == f.Name {
			info = fi
		}
	}
	defer lib.SetNumThreads(0)
	for _, n := range []int{1, 3, 0} {
		if err := lib.SetNumThreads(n); err != nil {
			t.Fatal(err)
		}
		args := tirtest.RandomArgs(f, rand.New(rand.NewSource(7)))
		tensors := tensorsFor(info, args)
		if err := interp.Run(f, args, nil); err != nil {
			t.Fatal(err)
		}
		if st, err := lib.Call(info.Symbol, tensors, -1); err != nil || st != 0 {
			t.Fatalf("threads=%d: status %d, %v", n, st, err)
		}
		for i, a := range args {
			if want, ok := a.(*interp.Array); ok {
				if err := compareArrays(f.Name, f.Params[i].Name, want, tensors[i].Data); err != nil {
					t.Fatalf("threads=%d: %v", n, err)
				}
			}
		}
	}
}

// TestThreadsHere: a count set for one OS thread comes before the
// library's on that thread only (the graph executor's SetThreads gives
// each fork its own count through it).
func TestThreadsHere(t *testing.T) {
	lib, _ := buildTestLib(t)
	defer lib.SetNumThreads(0)
	if err := lib.SetNumThreads(3); err != nil {
		t.Fatal(err)
	}
	count := func(here int) int {
		done := make(chan int)
		go func() {
			goruntime.LockOSThread()
			defer goruntime.UnlockOSThread()
			if err := lib.SetNumThreadsHere(here); err != nil {
				t.Error(err)
			}
			n, err := lib.ThreadCount()
			if err != nil {
				t.Error(err)
			}
			// Leave the thread as it was found.
			_ = lib.SetNumThreadsHere(0)
			done <- n
		}()
		return <-done
	}
	for _, c := range []struct{ here, want int }{{2, 2}, {0, 3}, {5, 5}, {-1, 3}} {
		if got := count(c.here); got != c.want {
			t.Errorf("library count 3, this thread's %d: kiln_thread_count() = %d, want %d", c.here, got, c.want)
		}
	}
}

// TestPackedChecks calls a packed wrapper with wrong arguments and checks
// the status and the last error message.
func TestPackedChecks(t *testing.T) {
	lib, _ := buildTestLib(t)
	good := func() []dl.Tensor {
		mk := func() dl.Tensor { return dl.Tensor{Data: make([]byte, 4*8*4), Shape: []int64{4, 8}, Code: 2, Bits: 32} }
		return []dl.Tensor{mk(), mk(), mk()}
	}
	tests := []struct {
		name   string
		mutate func([]dl.Tensor) []dl.Tensor
		num    int
		want   string
	}{
		{"ok", func(a []dl.Tensor) []dl.Tensor { return a }, -1, ""},
		{"num_args", func(a []dl.Tensor) []dl.Tensor { return a[:2] }, -1, "elementwise_add: expected 3 arguments, got 2"},
		{"num_args_override", func(a []dl.Tensor) []dl.Tensor { return a }, 4, "elementwise_add: expected 3 arguments, got 4"},
		{"dtype", func(a []dl.Tensor) []dl.Tensor { a[1].Code = 0; return a }, -1,
			"elementwise_add: argument 1 (B): expected dtype float32, got int32"},
		{"bits", func(a []dl.Tensor) []dl.Tensor { a[2].Bits = 64; return a }, -1,
			"elementwise_add: argument 2 (C): expected dtype float32, got float64"},
		{"lanes", func(a []dl.Tensor) []dl.Tensor { a[0].Lanes = 4; return a }, -1, "lanes 4"},
		{"ndim", func(a []dl.Tensor) []dl.Tensor { a[0].Shape = []int64{32}; return a }, -1,
			"elementwise_add: argument 0 (A): expected ndim 2, got 1"},
		{"shape", func(a []dl.Tensor) []dl.Tensor { a[2].Shape = []int64{4, 7}; return a }, -1,
			"elementwise_add: argument 2 (C): dimension 1 has extent 7, expected 8"},
		{"null", func(a []dl.Tensor) []dl.Tensor { a[1].Data = nil; return a }, -1,
			"elementwise_add: argument 1 (B): data is NULL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := lib.Call("elementwise_add", tc.mutate(good()), tc.num)
			if err != nil {
				t.Fatal(err)
			}
			msg, err := lib.LastError()
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if st != 0 {
					t.Fatalf("status %d, error %q", st, msg)
				}
				return
			}
			if st != -1 {
				t.Fatalf("status %d, want -1", st)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("last error %q does not contain %q", msg, tc.want)
			}
		})
	}
	// A scalar parameter is a 0-d tensor of its dtype.
	st, _ := lib.Call("loops", []dl.Tensor{
		{Data: make([]byte, 4*6*40*4), Shape: []int64{4, 6, 40}, Code: 2, Bits: 32},
		{Data: make([]byte, 4*6*40*4), Shape: []int64{4, 6, 40}, Code: 2, Bits: 32},
		{Data: make([]byte, 16), Shape: []int64{4}, Code: 0, Bits: 32},
		{Data: make([]byte, 8), Shape: []int64{}, Code: 0, Bits: 64},
	}, -1)
	msg, _ := lib.LastError()
	if st != -1 || !strings.Contains(msg, "loops: argument 3 (n): expected dtype int32, got int64") {
		t.Errorf("scalar dtype mismatch: status %d, error %q", st, msg)
	}
}
