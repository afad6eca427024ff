package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
)

// TestHeterogeneous runs the example as CI does: the model compiled for the
// accelerator and two labelled CPU devices matches its expected output
// (run checks it), the accelerator takes both convolutions, the dense
// layers run on big (cpu:1), the rest on the host (cpu:0), and values are
// copied between the two.
func TestHeterogeneous(t *testing.T) {
	testenv.Cgo(t)
	var b strings.Builder
	if err := run(filepath.Join("..", "models", "lenet"), &b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log(out)
	plan := kernelsOn(out[strings.Index(out, "device plan"):])
	var accel, dense int
	for _, f := range plan["cpu:0"] {
		if strings.Contains(f, "vanilla_accelerator") {
			accel++
		}
		if strings.Contains(f, "dense") || strings.Contains(f, "matmul") {
			t.Errorf("a dense layer on the host: %s", f)
		}
	}
	for _, f := range plan["cpu:1"] {
		if !strings.Contains(f, "dense") && !strings.Contains(f, "matmul") {
			t.Errorf("%s on big, which only the dense layers were placed on", f)
		}
		dense++
	}
	if accel != 2 || dense == 0 {
		t.Errorf("accelerator kernels %d (want 2), kernels on big %d (want some):\n%s", accel, dense, out)
	}
	for _, want := range []string{"matches the expected output", `"vanilla_accelerator, big=c, little=c`, "device copies", "median of 20 runs"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if strings.Contains(out, "\n0 device copies") {
		t.Error("no device copy between the two CPU devices")
	}
}
