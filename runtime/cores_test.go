package runtime

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

func TestParseDeviceCores(t *testing.T) {
	for _, c := range []struct{ in, says string }{
		{"cpu:0=0-3,cpu=4", "cpu:0 is given twice"},
		{"cpu:0=0-3,cpu:1=3", "core 3 is in both cpu:0 and cpu:1"},
		{"ext_dev:0=1", "only CPU devices"},
		{"cpu:0=3-1", `"3-1" is not a core number or range`},
		{"cpu:0=", `"" is not a core number`},
		{"cpu:0=x", `"x" is not a core number`},
		{"cpu:0=99999", "cores 0 to 1023"},
		{"0-3", "want DEVICE=CORES"},
		{"gpu:0=1", "unknown device"},
	} {
		if _, err := ParseDeviceCores(c.in); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("ParseDeviceCores(%q) = %v, want an error saying %q", c.in, err, c.says)
		}
	}
	dc, err := ParseDeviceCores("cpu:1=4-5,7,cpu:0=0-3,6")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := dc.String(), "cpu:0=0-3,6,cpu:1=4-5,7"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if s, _ := ParseCoreSet("3,1-2,2"); !slices.Equal(s, CoreSet{1, 2, 3}) {
		t.Errorf("ParseCoreSet sorts and merges: %v", s)
	}
}

// coresGraph: x on cpu:0 -> probe0 on cpu:0 -> copy to cpu:1 -> probe1 on
// cpu:1 (the output).
const coresGraph = `{
  "nodes": [
    {"op": "null", "name": "x"},
    {"op": "kiln_op", "name": "probe0", "inputs": [[0, 0]], "attrs": {"func_name": "probe", "num_inputs": 1, "num_outputs": 1}},
    {"op": "device_copy", "name": "to_cpu1", "inputs": [[1, 0]]},
    {"op": "kiln_op", "name": "probe1", "inputs": [[2, 0]], "attrs": {"func_name": "probe", "num_inputs": 1, "num_outputs": 1}}
  ],
  "arg_nodes": [0],
  "heads": [[3, 0]],
  "node_row_ptr": [0, 1, 2, 3, 4],
  "attrs": {
    "shape": [[2], [2], [2], [2]],
    "dltype": ["float32", "float32", "float32", "float32"],
    "storage_id": [0, 1, 2, 3],
    "device_index": [[1, 0], [1, 0], [1, 1], [1, 1]]
  }
}`

// TestSetDeviceCores checks that a device's kernels run on a thread
// pinned to its cores (the kernel reads its own thread's affinity), that
// the other device's do not, and that the profile says which cores ran
// what.
func TestSetDeviceCores(t *testing.T) {
	testenv.Cgo(t)
	all, err := allowedCores()
	if err != nil {
		t.Skipf("no thread affinity here: %v", err)
	}
	var mu sync.Mutex
	var seen []CoreSet
	mod := &goModule{name: "probe", funcs: map[string]PackedFunc{
		"probe": func(args []*NDArray) error {
			cores, err := allowedCores()
			if err != nil {
				return err
			}
			mu.Lock()
			seen = append(seen, cores)
			mu.Unlock()
			return args[1].CopyFromArray(args[0])
		},
	}}
	e, err := NewGraphExecutor([]byte(coresGraph), mod)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	last := all[len(all)-1]
	if err := e.SetDeviceCores(DeviceCores{CPUDevice(1): {last}}); err != nil {
		t.Fatal(err)
	}
	x := tensor.FromFloat32s(ir.Shape{2}, []float32{1, 2})
	if _, err := e.Execute(map[string]*tensor.Tensor{"x": x}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || !slices.Equal(seen[0], all) || !slices.Equal(seen[1], CoreSet{last}) {
		t.Errorf("cores seen by the kernels %v, want cpu:0's unpinned %v then cpu:1's [%d]", seen, all, last)
	}
	steps, err := e.Profile(1)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, s := range steps {
		rows = append(rows, s.Node+"@"+s.Device.String()+"/"+s.Cores.String())
	}
	if want := []string{"probe0@cpu:0/", "to_cpu1@cpu:1/" + CoreSet{last}.String(), "probe1@cpu:1/" + CoreSet{last}.String()}; !slices.Equal(rows, want) {
		t.Errorf("profile rows %v, want %v", rows, want)
	}
	// Unpinning puts every kernel back on the calling thread.
	seen = nil
	if err := e.SetDeviceCores(nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || !slices.Equal(seen[1], all) {
		t.Errorf("after unpinning: %v", seen)
	}
	// A Go kernel that panics on the pinned thread is an error, not a
	// crash.
	bad, err := NewGraphExecutor([]byte(coresGraph), &goModule{name: "probe", funcs: map[string]PackedFunc{
		"probe": func([]*NDArray) error { panic("kernel bug") },
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.SetDeviceCores(DeviceCores{CPUDevice(0): {all[0]}}); err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Execute(map[string]*tensor.Tensor{"x": x}); err == nil || !strings.Contains(err.Error(), "kernel bug") {
		t.Errorf("a panicking kernel: %v", err)
	}
	for _, c := range []struct {
		dc   DeviceCores
		says string
	}{
		{DeviceCores{CPUDevice(2): {0}}, "cpu:2 is not a device of this program (it uses [cpu:0 cpu:1])"},
		{DeviceCores{CPUDevice(1): {maxCore - 1}}, "is not available to this process"},
		{DeviceCores{CPUDevice(1): {}}, "no cores"},
	} {
		if err := e.SetDeviceCores(c.dc); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("SetDeviceCores(%v) = %v, want an error saying %q", c.dc, err, c.says)
		}
	}
}
