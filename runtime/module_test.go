package runtime

import (
	"fmt"
	"github.com/kiln-dev/kiln/internal/testenv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// goModule is a Module implemented in Go, standing in for an external
// codegen's runtime module.
type goModule struct {
	ModuleBase
	name  string
	funcs map[string]PackedFunc
}

func (m *goModule) Name() string { return m.name }
func (m *goModule) Kind() string { return "json" }
func (m *goModule) GetFunction(name string) (PackedFunc, bool) {
	return FindFunction(m, name)
}
func (m *goModule) GetLocalFunction(name string) (PackedFunc, bool) {
	f, ok := m.funcs[name]
	return f, ok
}

// negateModule offers negate_f32(x, out), computed in Go.
func negateModule() *goModule {
	return &goModule{name: "negate", funcs: map[string]PackedFunc{
		"negate_f32": func(args []*NDArray) error {
			if len(args) != 2 {
				return fmt.Errorf("negate_f32: want 2 arguments, got %d", len(args))
			}
			x, err := args[0].ToTensor()
			if err != nil {
				return err
			}
			for i, v := range x.Float32s() {
				x.Float32s()[i] = -v
			}
			return args[1].CopyFrom(x)
		},
	}}
}

// call runs a PackedFunc on host tensors and returns the outputs.
func call(t *testing.T, f PackedFunc, dev Device, ins []*tensor.Tensor, outs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	t.Helper()
	var args []*NDArray
	for _, in := range ins {
		a, err := FromTensor(in, dev)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, a)
	}
	for _, o := range outs {
		a, err := Empty(o.DType, o.Shape, dev)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, a)
	}
	if err := f(args); err != nil {
		return nil, err
	}
	var res []*tensor.Tensor
	for _, a := range args[len(ins):] {
		r, err := a.ToTensor()
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, r)
	}
	return res, nil
}

func f32(vals ...float32) *tensor.Tensor {
	return tensor.FromFloat32s(ir.Shape{int64(len(vals))}, vals)
}

func checkF32(t *testing.T, what string, got *tensor.Tensor, want []float32) {
	t.Helper()
	g := got.Float32s()
	if len(g) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, g, want)
	}
	for i := range want {
		if g[i] != want[i] {
			t.Fatalf("%s: got %v, want %v", what, g, want)
		}
	}
}

func TestLoadLibraryErrors(t *testing.T) {
	dir := t.TempDir()
	notLib := filepath.Join(dir, "junk.so")
	if err := os.WriteFile(notLib, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "missing.so"), notLib} {
		_, err := LoadLibrary(p)
		if err == nil || !strings.Contains(err.Error(), "load library") || !strings.Contains(err.Error(), filepath.Base(p)) {
			t.Errorf("LoadLibrary(%s) error = %v", p, err)
		}
	}
}

func TestDSOFunctions(t *testing.T) {
	testenv.Cgo(t)
	mod := loadMain(t)
	if mod.Kind() != "dso" || mod.Name() != "libkiln_rt_main.so" {
		t.Errorf("module %s (%s)", mod.Name(), mod.Kind())
	}
	get := func(name string) PackedFunc {
		f, ok := mod.GetFunction(name)
		if !ok {
			t.Fatalf("%s not found", name)
		}
		return f
	}
	x := f32(1, -2, 3, -4)
	y := f32(10, 20, 30, 40)
	cases := []struct {
		fn   string
		dev  Device
		ins  []*tensor.Tensor
		want [][]float32
	}{
		{"add_f32", CPUDevice(0), []*tensor.Tensor{x, y}, [][]float32{{11, 18, 33, 36}}},
		{"relu_f32", CPUDevice(1), []*tensor.Tensor{x}, [][]float32{{1, 0, 3, 0}}},
		{"add_sub_f32", CPUDevice(0), []*tensor.Tensor{x, y}, [][]float32{{11, 18, 33, 36}, {-9, -22, -27, -44}}},
		{"add_f32", ExtDevice(0), []*tensor.Tensor{x, y}, [][]float32{{11, 18, 33, 36}}},
	}
	for _, c := range cases {
		outs := make([]*tensor.Tensor, len(c.want))
		for i := range outs {
			outs[i] = tensor.New(ir.Float32, ir.Shape{4})
		}
		got, err := call(t, get(c.fn), c.dev, c.ins, outs)
		if err != nil {
			t.Fatalf("%s: %v", c.fn, err)
		}
		for i, w := range c.want {
			checkF32(t, fmt.Sprintf("%s output %d", c.fn, i), got[i], w)
		}
	}

	for _, name := range []string{"no_such_function", "kiln_get_last_error", "kiln_set_num_threads", ""} {
		if _, ok := mod.GetFunction(name); ok {
			t.Errorf("GetFunction(%q) found something", name)
		}
	}

	errCases := []struct {
		fn   string
		ins  []*tensor.Tensor
		nout int
		want string
	}{
		{"always_fail", nil, 0, "always_fail (in libkiln_rt_main.so): always_fail: the kernel refused (code 7)"},
		{"fail_silently", nil, 0, "fail_silently (in libkiln_rt_main.so): returned code 3 without an error message"},
		{"add_f32", []*tensor.Tensor{x}, 1, "add_f32: expected 3 arguments, got 2"},
		{"relu_f32", []*tensor.Tensor{tensor.FromInt64s(ir.Shape{4}, []int64{1, 2, 3, 4})}, 1, "relu_f32: argument 0 is not float32"},
	}
	for _, c := range errCases {
		outs := make([]*tensor.Tensor, c.nout)
		for i := range outs {
			outs[i] = tensor.New(ir.Float32, ir.Shape{4})
		}
		_, err := call(t, get(c.fn), CPUDevice(0), c.ins, outs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error = %v, want %q", c.fn, err, c.want)
		}
	}
	// A failure must not leak into the next call's message.
	if _, err := call(t, get("fail_silently"), CPUDevice(0), nil, nil); err == nil || strings.Contains(err.Error(), "refused") {
		t.Errorf("stale error message: %v", err)
	}
	if err := get("add_f32")([]*NDArray{nil}); err == nil {
		t.Error("nil argument accepted")
	}
}

func TestModuleImports(t *testing.T) {
	testenv.Cgo(t)
	root := loadMain(t)
	extra := loadExtra(t)
	neg := negateModule()
	root.Import(extra)
	root.Import(neg)
	root.Import(extra) // repeated: ignored
	neg.Import(root)   // a cycle: lookups must still terminate
	if n := len(root.Imports()); n != 2 {
		t.Errorf("root has %d imports, want 2", n)
	}
	x := f32(1, -2, 3)
	y := f32(2, 2, 2)
	cases := []struct {
		fn   string
		ins  []*tensor.Tensor
		want []float32
	}{
		{"mul_f32", []*tensor.Tensor{x, y}, []float32{2, -4, 6}},  // from the imported library
		{"negate_f32", []*tensor.Tensor{x}, []float32{-1, 2, -3}}, // from the Go module
		{"relu_f32", []*tensor.Tensor{x}, []float32{1, 0, 3}},     // the root's own wins over extra's
	}
	for _, c := range cases {
		f, ok := root.GetFunction(c.fn)
		if !ok {
			t.Fatalf("%s not found through imports", c.fn)
		}
		got, err := call(t, f, CPUDevice(0), c.ins, []*tensor.Tensor{tensor.New(ir.Float32, ir.Shape{3})})
		if err != nil {
			t.Fatalf("%s: %v", c.fn, err)
		}
		checkF32(t, c.fn, got[0], c.want)
	}
	// From the Go module, the cycle leads back to the root's functions.
	if _, ok := neg.GetFunction("add_f32"); !ok {
		t.Error("negate module does not see add_f32 through its import")
	}
	if _, ok := root.GetFunction("nowhere"); ok {
		t.Error("found a function that does not exist")
	}
}

func TestSetNumThreads(t *testing.T) {
	testenv.Cgo(t)
	root := loadMain(t)
	root.Import(loadExtra(t)) // exports no kiln_set_num_threads
	q, _ := root.GetFunction("query_threads")
	for _, n := range []int{3, 1, 0} {
		if got := SetNumThreads(root, n); got != 1 {
			t.Errorf("SetNumThreads reached %d libraries, want 1", got)
		}
		o, _ := Empty(ir.Int32, ir.Shape{1}, CPUDevice(0))
		if err := q([]*NDArray{o}); err != nil {
			t.Fatal(err)
		}
		got, _ := o.ToTensor()
		if got.Int32s()[0] != int32(n) {
			t.Errorf("library saw %d threads, want %d", got.Int32s()[0], n)
		}
	}
}

// TestOnlyRegisteredFunctions checks that a library's functions are found
// through its function table only: symbols of the process (system, exit,
// free, dlopen), the library's ABI functions and an exported but unlisted
// function are not functions of the module, and a graph program naming
// one is refused at load; a library without a table does not load.
func TestOnlyRegisteredFunctions(t *testing.T) {
	testenv.Cgo(t)
	mod := loadMain(t)
	for _, name := range []string{"system", "exit", "free", "dlopen", "printf", "kiln_set_last_error", "kiln_get_last_error",
		"kiln_set_num_threads", "hidden_f32", "kiln_func_registry", "", "mul_f32"} {
		if _, ok := mod.GetFunction(name); ok {
			t.Errorf("GetFunction(%q) found a function outside the table", name)
		}
	}
	if got := mod.(*DSOModule).Funcs(); len(got) != 8 || got[0] != "add_f32" {
		t.Errorf("Funcs() = %v", got)
	}
	for _, name := range []string{"system", "exit", "hidden_f32"} {
		gj := strings.Replace(`{"nodes":[{"op":"null","name":"x"},{"op":"kiln_op","name":"f","inputs":[[0,0]],"attrs":{"func_name":"FN","num_inputs":1,"num_outputs":1}}],
"arg_nodes":[0],"heads":[[1,0]],"node_row_ptr":[0,1,2],"attrs":{"shape":[[4],[4]],"dltype":["float32","float32"],"storage_id":[0,1]}}`, "FN", name, 1)
		_, err := NewGraphExecutor([]byte(gj), mod)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("graph.json calling %s: error %v, want one naming it", name, err)
		}
	}
	noTable := buildLib(t, "kiln_rt_notable", "#include <stdint.h>\nint32_t f(void* a, int32_t n) { (void)a; return n; }\n")
	if _, err := LoadLibrary(noTable); err == nil || !strings.Contains(err.Error(), RegistrySymbol) {
		t.Errorf("a library without a function table: error %v", err)
	}
}
