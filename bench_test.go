//go:build cgo

package kiln_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-dev/kiln"
	_ "github.com/kiln-dev/kiln/backend/dnnl"
	"github.com/kiln-dev/kiln/internal/shared"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/tensor"
)

// BenchmarkSessionThroughput serves one model from G goroutines through
// one session with Concurrency G and one thread per inference, and
// reports inferences per second: on a machine with C cores, throughput
// should grow with G up to C. The model is LeNet (in the repository) and,
// when ../shared is there, squeezenet1_1 and resnet18; the target list is
// $KILN_BENCH_TARGETS (default "c").
//
//	go test -run '^$' -bench SessionThroughput -benchtime 200x .
func BenchmarkSessionThroughput(b *testing.B) {
	testenv.Cgo(b)
	tl := os.Getenv("KILN_BENCH_TARGETS")
	if tl == "" {
		tl = "c"
	}
	models := map[string]string{"lenet": lenet}
	if dir, err := shared.Dir(); err == nil {
		for _, m := range []string{"squeezenet1_1", "resnet18"} {
			if p := filepath.Join(dir, "models", m, "model.onnx"); fileExists(p) {
				models[m] = p
			}
		}
	}
	for _, name := range []string{"lenet", "squeezenet1_1", "resnet18"} {
		path, ok := models[name]
		if !ok {
			continue
		}
		art, err := kiln.Compile(context.Background(), path, tl, kiln.Options{})
		if err != nil {
			b.Fatal(err)
		}
		in := art.Inputs()[0]
		for _, g := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", name, g), func(b *testing.B) {
				sess, err := art.NewSession(kiln.SessionOptions{Concurrency: g, Threads: 1})
				if err != nil {
					b.Fatal(err)
				}
				defer sess.Close()
				inputs := make([]map[string]*tensor.Tensor, g)
				for i := range inputs {
					inputs[i] = map[string]*tensor.Tensor{in.Name: randomInput(in, int64(i))}
					// Warm up every slot (its memory is made at first use).
					if _, err := sess.Run(context.Background(), inputs[i]); err != nil {
						b.Fatal(err)
					}
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				t0 := time.Now()
				for i := range g {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= int64(b.N) {
							if _, err := sess.Run(context.Background(), inputs[i]); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "inferences/s")
			})
		}
		art.Close()
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
