package kiln_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln"
	"github.com/kiln-dev/kiln/backend/dnnl"
	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

var lenet = filepath.Join("examples", "models", "lenet", "model.onnx")

// randomInput returns input in of a model filled from seed.
func randomInput(in kiln.TensorInfo, seed int64) *tensor.Tensor {
	r := rand.New(rand.NewSource(seed))
	vals := make([]float32, in.Shape.NumElements())
	for i := range vals {
		vals[i] = r.Float32()*2 - 1
	}
	t, err := tensor.FromData(in.DType, in.Shape, vals)
	if err != nil {
		panic(err)
	}
	return t
}

// TestSessionConcurrent runs many goroutines through one session, each
// with inputs of its own, and checks every output against the
// reference engine: concurrent inferences share the weights but nothing
// they write.
func TestSessionConcurrent(t *testing.T) {
	testenv.Cgo(t)
	targets := []string{"c"}
	if dnnl.Available {
		targets = append(targets, "dnnl, c")
	}
	model, err := onnx.LoadFile(lenet, onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range targets {
		t.Run(tl, func(t *testing.T) {
			art, err := kiln.Compile(context.Background(), lenet, tl, kiln.Options{Partition: "greedy"})
			if err != nil {
				t.Fatal(err)
			}
			defer art.Close()
			sess, err := art.NewSession(kiln.SessionOptions{Concurrency: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			in, out := art.Inputs()[0], art.Outputs()[0]
			const goroutines, runs = 8, 6
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := range runs {
						x := randomInput(in, int64(g*runs+r))
						got, err := sess.Run(context.Background(), map[string]*tensor.Tensor{in.Name: x})
						if err != nil {
							errs <- err
							return
						}
						want, err := ref.Run(model.Module, []*tensor.Tensor{x})
						if err != nil {
							errs <- err
							return
						}
						if err := tensor.AllClose(got[out.Name], want.Flatten()[0], 1e-3, 1e-4); err != nil {
							errs <- fmt.Errorf("goroutine %d run %d: %w", g, r, err)
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
		})
	}
}

// TestSessionErrors checks the errors a caller meets: a missing or
// unknown input, a wrong shape, a closed session, a cancelled context,
// and an existing output directory.
func TestSessionErrors(t *testing.T) {
	testenv.Cgo(t)
	out := filepath.Join(t.TempDir(), "lenet.kiln")
	art, err := kiln.Compile(context.Background(), lenet, "c", kiln.Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	defer art.Close()
	other := filepath.Join(t.TempDir(), "other.onnx")
	data, err := os.ReadFile(lenet)
	if err != nil {
		t.Fatal(err)
	}
	// Another file, the same model: an unknown field (number 100) appended.
	if err := os.WriteFile(other, append(data, 0xa0, 0x06, 0x01), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := kiln.Compile(context.Background(), other, "c", kiln.Options{Out: out}); err == nil || !strings.Contains(err.Error(), "Force") {
		t.Errorf("compiling another model over an artifact: %v, want an error that mentions Force", err)
	}
	again, err := kiln.Compile(context.Background(), lenet, "c", kiln.Options{Out: filepath.Join(t.TempDir(), "second.kiln")})
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
	if again2, err := kiln.Compile(context.Background(), lenet, "c", kiln.Options{Out: again.Dir()}); err != nil {
		t.Errorf("compiling a model again over its own artifact: %v", err)
	} else {
		again2.Close()
	}
	sess, err := art.NewSession(kiln.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := art.Inputs()[0]
	x := randomInput(in, 1)
	ctx := context.Background()
	cases := []struct {
		inputs map[string]*tensor.Tensor
		want   string
	}{
		{map[string]*tensor.Tensor{}, "is missing"},
		{map[string]*tensor.Tensor{in.Name: x, "extra": x}, `no input "extra"`},
		{map[string]*tensor.Tensor{in.Name: x.Reshape(append(in.Shape.Clone()[:0:0], in.Shape.NumElements()))}, "want float32"},
	}
	for _, c := range cases {
		if _, err := sess.Run(ctx, c.inputs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run(%d inputs): %v, want an error containing %q", len(c.inputs), err, c.want)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := sess.Run(cctx, map[string]*tensor.Tensor{in.Name: x}); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a cancelled context: %v", err)
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Run(ctx, map[string]*tensor.Tensor{in.Name: x}); err == nil {
		t.Error("Run on a closed session succeeded")
	}
	if _, err := art.NewSession(kiln.SessionOptions{Devices: "cpu:7=0"}); err == nil || !strings.Contains(err.Error(), "cpu:7") {
		t.Errorf("a session pinning a device the program does not use: %v", err)
	}
}

// TestArtifactOutlivesClose: sessions keep working after their artifact
// is closed, and a temporary artifact directory goes once the last
// session closes.
func TestArtifactOutlivesClose(t *testing.T) {
	testenv.Cgo(t)
	art, err := kiln.Compile(context.Background(), lenet, "c", kiln.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := art.NewSession(kiln.SessionOptions{Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	dir := art.Dir()
	if err := art.Close(); err != nil {
		t.Fatal(err)
	}
	in := art.Inputs()[0]
	if _, err := sess.Run(context.Background(), map[string]*tensor.Tensor{in.Name: randomInput(in, 2)}); err != nil {
		t.Fatalf("run after the artifact's Close: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the artifact directory went while a session was open: %v", err)
	}
	if _, err := art.NewSession(kiln.SessionOptions{}); err == nil {
		t.Error("NewSession on a closed artifact succeeded")
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the temporary artifact directory %s is still there after the last Close: %v", dir, err)
	}
}
