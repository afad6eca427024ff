// Command heterogeneous compiles one model for a host, two labelled CPU
// devices and an accelerator at once, and runs it: seed 004's multi-target
// compilation end to end through kiln's Go API.
//
// The target list is
//
//	vanilla_accelerator, big=c, little=c -mattr=-avx512f
//
// (on x86-64; elsewhere little is `c -opt=2`): the UMA example accelerator
// takes the convolutions it supports, a placement rule puts the dense
// layers on big (cpu:1), and little, the host (cpu:0), runs the rest.
// Device planning inserts the copies between the two CPU devices. The
// program prints the partition, the device plan (every kernel with its
// device and, on a machine with two cores or more, the core its device is
// pinned to), the copies, the outputs against the expected ones, and the
// median time of 20 runs.
//
// Run it from the repository root:
//
//	go run ./examples/heterogeneous
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/device"
	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/partition"
	krt "github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
	vanilla "github.com/kiln-dev/kiln/uma/examples/vanilla_accelerator"
)

func main() {
	if err := run(filepath.Join("examples", "models", "lenet"), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "heterogeneous:", err)
		os.Exit(1)
	}
}

// targetList is the compilation's -t list for this machine.
func targetList() string {
	little := "little=c -opt=2"
	if cgen.HostArch() == targets.X86_64 {
		little = "little=c -mattr=-avx512f"
	}
	return vanilla.Name + ", big=c, " + little
}

// run compiles the model in dir (model.onnx and test_data_set_0), runs it
// and prints what happened to w.
func run(dir string, w io.Writer) error {
	if err := vanilla.Register(targets.Default); err != nil {
		return err
	}
	model, err := onnx.LoadFile(filepath.Join(dir, "model.onnx"), onnx.Options{})
	if err != nil {
		return err
	}
	input, _, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", "input_0.pb"))
	if err != nil {
		return err
	}
	want, _, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", "output_0.pb"))
	if err != nil {
		return err
	}
	list, err := targets.ParseList(targetList())
	if err != nil {
		return err
	}
	rules, err := device.ParseRules("op:nn.dense = big\n")
	if err != nil {
		return err
	}
	out, err := os.MkdirTemp("", "kiln-heterogeneous-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out)
	var report partition.Report
	t0 := time.Now()
	res, err := driver.Compile(model.Module, nil, driver.Config{
		Host: list.Host, Targets: list.Targets, Placement: rules,
		Report: &report, Out: filepath.Join(out, "artifact"),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "compiled for %q in %s; devices %v\n", res.Metadata.Target, time.Since(t0).Round(time.Millisecond), res.Metadata.Devices)
	if err := report.WriteText(w); err != nil {
		return err
	}

	art, err := driver.LoadArtifact(res.Dir)
	if err != nil {
		return err
	}
	defer art.Close()
	// Each CPU device on a core of its own, when this process has two.
	cores, _ := krt.AvailableCores()
	pinned := len(cores) >= 2
	if pinned {
		if err := art.Exec.SetDeviceCores(krt.DeviceCores{krt.CPUDevice(0): {cores[0]}, krt.CPUDevice(1): {cores[1]}}); err != nil {
			return err
		}
	}
	got, err := art.Run(map[string]*tensor.Tensor{model.Inputs[0].Name: input})
	if err != nil {
		return err
	}
	if err := tensor.AllClose(got[0], want, 1e-3, 1e-4); err != nil {
		return fmt.Errorf("the output differs from the expected one: %w", err)
	}
	fmt.Fprintf(w, "output %v matches the expected output\n", got[0].Shape)

	steps, err := art.Exec.Profile(1)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "device plan (program order):")
	copies := 0
	for _, s := range steps {
		where := s.Device.String()
		if len(s.Cores) > 0 {
			where += " core " + s.Cores.String()
		}
		what := s.Func
		if what == "" {
			what = "device_copy " + s.Node
			copies++
		}
		fmt.Fprintf(w, "  %-16s %s\n", where, what)
	}
	fmt.Fprintf(w, "%d device copies\n", copies)

	times := make([]time.Duration, 20)
	for i := range times {
		t := time.Now()
		if err := art.Exec.Run(); err != nil {
			return err
		}
		times[i] = time.Since(t)
	}
	slices.Sort(times)
	fmt.Fprintf(w, "median of %d runs: %s (pinned: %v)\n", len(times), times[len(times)/2].Round(time.Microsecond), pinned)
	return nil
}

// kernelsOn counts the kernels of a device plan printout by device, for
// the test.
func kernelsOn(plan string) map[string][]string {
	out := map[string][]string{}
	for _, l := range strings.Split(plan, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || !strings.HasPrefix(f[0], "cpu:") || f[len(f)-2] == "device_copy" {
			continue
		}
		out[f[0]] = append(out[f[0]], f[len(f)-1])
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}
