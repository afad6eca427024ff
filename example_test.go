//go:build cgo

package kiln_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"

	"github.com/kiln-dev/kiln"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// Compile a model for the host and run it once. The example model is
// LeNet-5 on one 28x28 image.
func ExampleCompile() {
	art, err := kiln.Compile(context.Background(), "examples/models/lenet/model.onnx", "c", kiln.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer art.Close()
	for _, in := range art.Inputs() {
		fmt.Printf("input %s %s%v\n", in.Name, in.DType, in.Shape)
	}
	sess, err := art.NewSession(kiln.SessionOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()
	x, err := tensor.FromData(ir.Float32, ir.Shape{1, 1, 28, 28}, make([]float32, 28*28))
	if err != nil {
		log.Fatal(err)
	}
	outs, err := sess.Run(context.Background(), map[string]*tensor.Tensor{"input": x})
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range art.Outputs() {
		fmt.Printf("output %s %s%v\n", o.Name, outs[o.Name].DType, outs[o.Name].Shape)
	}
	// Output:
	// input input float32[1, 1, 28, 28]
	// output output float32[1, 10]
}

// Load an artifact compiled earlier (here by Compile; `kiln compile`
// writes the same directories) and run it.
func ExampleLoad() {
	parent, err := os.MkdirTemp("", "kiln-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(parent)
	dir := filepath.Join(parent, "lenet.kiln")
	compiled, err := kiln.Compile(context.Background(), "examples/models/lenet/model.onnx", "c", kiln.Options{Out: dir})
	if err != nil {
		log.Fatal(err)
	}
	compiled.Close()

	art, err := kiln.Load(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer art.Close()
	sess, err := art.NewSession(kiln.SessionOptions{Concurrency: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()
	x, err := tensor.FromData(ir.Float32, ir.Shape{1, 1, 28, 28}, make([]float32, 28*28))
	if err != nil {
		log.Fatal(err)
	}
	outs, err := sess.Run(context.Background(), map[string]*tensor.Tensor{"input": x})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(art.Target(), outs["output"].Shape)
	// Output:
	// c [1, 10]
}

// Serve one model to many goroutines: one session, one copy of the
// weights, two inferences at a time (each on one thread), the other
// callers waiting for a slot.
func ExampleSession_Run() {
	art, err := kiln.Compile(context.Background(), "examples/models/lenet/model.onnx", "c", kiln.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer art.Close()
	sess, err := art.NewSession(kiln.SessionOptions{Concurrency: 2, Threads: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()

	var wg sync.WaitGroup
	results := make([]int, 8)
	for i := range results {
		wg.Add(1)
		go func() { // one request
			defer wg.Done()
			img := make([]float32, 28*28)
			img[i*28+i] = 1
			x, err := tensor.FromData(ir.Float32, ir.Shape{1, 1, 28, 28}, img)
			if err != nil {
				log.Fatal(err)
			}
			outs, err := sess.Run(context.Background(), map[string]*tensor.Tensor{"input": x})
			if err != nil {
				log.Fatal(err)
			}
			results[i] = outs["output"].Len()
		}()
	}
	wg.Wait()
	fmt.Println(results)
	// Output:
	// [10 10 10 10 10 10 10 10]
}
