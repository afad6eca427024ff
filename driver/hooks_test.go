package driver

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln/backend"
	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/device"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/lower"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
)

// The hook test target, after TVM's example_target_hook: its RelayToTIR
// rewrites add into subtract in the functions it owns and lowers them
// with kiln's own lowering; its optional TIRToRuntime is kiln's C code
// generator with subtraction printed as multiplication, so each hook's
// effect shows in the numbers.

// subtractLowering is the RelayToTIR hook; seen records the
// example_attribute each call read from its target.
func subtractLowering(seen *[]int64) func(*backend.HookContext, *graph.Module, *tir.Module) error {
	return func(ctx *backend.HookContext, mod *graph.Module, prims *tir.Module) error {
		v, _ := ctx.Target.Int("example_attribute")
		*seen = append(*seen, v)
		for _, of := range backend.OwnedFunctions(ctx, mod, prims) {
			if err := lowerAsSubtract(ctx, mod, prims, of); err != nil {
				return err
			}
		}
		return nil
	}
}

// lowerAsSubtract lowers an owned function with every add as a subtract
// and installs the PrimFunc in its place.
func lowerAsSubtract(ctx *backend.HookContext, mod *graph.Module, prims *tir.Module, of backend.OwnedFunction) error {
	body := graph.Rewrite(of.Fn.Body, func(e graph.Expr) graph.Expr {
		if c, ok := e.(*graph.Call); ok && c.Op == op.Add {
			return graph.MustCall(op.Subtract, c.Args, nil)
		}
		return e
	})
	fn := graph.NewFunction(of.Fn.Params, body, nil)
	if err := graph.InferFunction(nil, fn); err != nil {
		return err
	}
	pf, err := lower.LowerFunction(of.Symbol, fn, ctx.Target, nil)
	if err != nil {
		return err
	}
	_, err = backend.ReplaceWithPrimFunc(ctx, mod, of, pf, prims)
	return err
}

// multiplyCodegen is the TIRToRuntime hook: C source in which every
// subtraction is a multiplication.
func multiplyCodegen(calls *int) func(*backend.HookContext, *tir.Module) (runtime.Module, error) {
	return func(ctx *backend.HookContext, prims *tir.Module) (runtime.Module, error) {
		*calls++
		src, err := cgen.Generate(prims, cgen.Options{
			NoRuntimeDefs: true, NoPipeline: true,
			ExprHook: func(e tir.PrimExpr, sub func(tir.PrimExpr) string) (string, bool) {
				if b, ok := e.(*tir.Binary); ok && b.Op == tir.OpSub {
					return "(" + sub(b.A) + " * " + sub(b.B) + ")", true
				}
				return "", false
			},
		})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, f := range src.Funcs {
			names = append(names, f.Symbol)
		}
		return &runtime.CSourceModule{Label: "example", Code: "/* example_target_hook codegen */\n" + src.Code, Funcs: names}, nil
	}
}

// hookRegistry registers the example kind (with or without the
// TIRToRuntime hook) next to "c" in a registry of the test's own.
func hookRegistry(t *testing.T, dt targets.DeviceType, seen *[]int64, codegenCalls *int) *targets.Registry {
	t.Helper()
	r := targets.NewRegistry()
	hooks := backend.Hooks{RelayToTIR: subtractLowering(seen)}
	if codegenCalls != nil {
		hooks.TIRToRuntime = multiplyCodegen(codegenCalls)
	}
	for _, k := range []*targets.Kind{
		targets.C,
		{Name: "example_target_hook", DeviceType: dt, Keys: []string{"cpu"},
			Options: []targets.Option{{Name: "example_attribute", Kind: ir.AttrInt, Default: int64(0)}},
			Flow:    &backend.Flow{Hooks: hooks}},
	} {
		if err := r.Register(k); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// addModule is main(x, y) = f(x, y) + 0 where f(a, b) = a + b is marked
// for compiler "example_target_hook" (or unmarked when compiler is "").
func addModule(t *testing.T, compiler string) *graph.Module {
	t.Helper()
	tt := ir.NewTensorType(ir.Float32, ir.Shape{8})
	a, b := graph.NewVar("a", tt), graph.NewVar("b", tt)
	attrs := ir.Attrs{}
	if compiler != "" {
		attrs[graph.AttrCompiler] = compiler
		attrs[graph.AttrPrimitive] = true
	}
	f := graph.NewFunction([]*graph.Var{a, b}, graph.MustCall(op.Add, []graph.Expr{a, b}, nil), attrs)
	x, y := graph.NewVar("x", tt), graph.NewVar("y", tt)
	var body graph.Expr = graph.MustCall(op.Add, []graph.Expr{x, y}, nil)
	if compiler != "" {
		body = graph.NewFuncCall(f, []graph.Expr{x, y})
	}
	body = graph.MustCall(op.Relu, []graph.Expr{graph.MustCall(op.Add, []graph.Expr{body, graph.NewConstant(tensor.Scalar(ir.Float32, 100))}, nil)}, nil)
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x, y}, body, nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	return mod
}

func hookInputs() (map[string]*tensor.Tensor, []float32, []float32) {
	x, y := tensor.New(ir.Float32, ir.Shape{8}), tensor.New(ir.Float32, ir.Shape{8})
	for i := range x.Float32s() {
		x.Float32s()[i] = float32(i) + 1.5
		y.Float32s()[i] = float32(2*i) - 3
	}
	return map[string]*tensor.Tensor{"x": x, "y": y}, x.Float32s(), y.Float32s()
}

// compileHooked compiles mod for targets (parsed with r) and runs it.
func compileHooked(t *testing.T, r *targets.Registry, mod *graph.Module, tgts string, rules []device.Rule, labels *targets.Labels) (*Result, []float32) {
	t.Helper()
	l, err := r.ParseList(tgts)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "art")
	res, err := Compile(mod, nil, Config{Host: l.Host, Targets: l.Targets, Out: out, Placement: rules, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	art, err := LoadArtifact(out)
	if err != nil {
		t.Fatal(err)
	}
	ins, _, _ := hookInputs()
	outs, err := art.Run(ins)
	if err != nil {
		t.Fatal(err)
	}
	return res, outs[0].Float32s()
}

func checkValues(t *testing.T, got []float32, want func(x, y float32) float32) {
	t.Helper()
	_, xs, ys := hookInputs()
	for i := range got {
		w := want(xs[i], ys[i]) + 100
		if w < 0 {
			w = 0
		}
		if got[i] != w {
			t.Fatalf("element %d: got %v, want %v (all: %v)", i, got[i], w, got)
		}
	}
}

func TestHookRelayToTIRReplacesAddWithSubtract(t *testing.T) {
	testenv.Cgo(t)
	var seen []int64
	r := hookRegistry(t, targets.CPU, &seen, nil)
	_, got := compileHooked(t, r, addModule(t, "example_target_hook"), "example_target_hook -example_attribute=42, c -mcpu=x86-64", nil, nil)
	checkValues(t, got, func(x, y float32) float32 { return x - y })
	if !reflect.DeepEqual(seen, []int64{42}) {
		t.Errorf("the hook ran %d times and read example_attribute %v, want once, 42", len(seen), seen)
	}
	// The same module without the Compiler attribute stays x+y: only what
	// the target owns goes through its hook.
	seen = nil
	_, got = compileHooked(t, r, addModule(t, ""), "example_target_hook, c -mcpu=x86-64", nil, nil)
	checkValues(t, got, func(x, y float32) float32 { return x + y })
	if !reflect.DeepEqual(seen, []int64{0}) {
		t.Errorf("example_attribute read %v, want the default [0]", seen)
	}
}

func TestHookTIRToRuntimeReplacesCodegen(t *testing.T) {
	testenv.Cgo(t)
	var seen []int64
	calls := 0
	r := hookRegistry(t, targets.CPU, &seen, &calls)
	res, got := compileHooked(t, r, addModule(t, "example_target_hook"), "example_target_hook, c -mcpu=x86-64", nil, nil)
	// RelayToTIR made a-b; the hook's code generator printed it as a*b.
	checkValues(t, got, func(x, y float32) float32 { return x * y })
	if calls != 1 {
		t.Errorf("TIRToRuntime ran %d times, want 1", calls)
	}
	src, err := os.ReadFile(filepath.Join(res.Dir, "ext0_example.c"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "example_target_hook codegen") {
		t.Errorf("the hook's source is not in the artifact")
	}
	lib, err := os.ReadFile(filepath.Join(res.Dir, "kiln_lib.c"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(lib), "kiln_example") || strings.Contains(string(lib), "example_target_hook_0(") {
		t.Errorf("the default codegen compiled the hook's function too")
	}
}

// TestHookOwnsPlacedFunctions places the add on an ext_dev target by an
// operator rule: device planning copies x and y to ext_dev and the result
// back, the kind's RelayToTIR owns the placed function, and the runtime
// executes the copies through ext_dev's memory.
func TestHookOwnsPlacedFunctions(t *testing.T) {
	testenv.Cgo(t)
	var seen []int64
	r := hookRegistry(t, targets.ExtDev, &seen, nil)
	tt := ir.NewTensorType(ir.Float32, ir.Shape{8})
	x, y := graph.NewVar("x", tt), graph.NewVar("y", tt)
	sum := graph.MustCall(op.Add, []graph.Expr{x, y}, nil)
	sum.Span = "sum"
	bias := graph.MustCall(op.Add, []graph.Expr{sum, graph.NewConstant(tensor.Scalar(ir.Float32, 100))}, nil)
	bias.Span = "bias"
	body := graph.MustCall(op.Relu, []graph.Expr{bias}, nil)
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x, y}, body, nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	rules := []device.Rule{{NodeName: "bias", Device: "example_target_hook"}}
	res, got := compileHooked(t, r, mod, "example_target_hook, c -mcpu=x86-64", rules, nil)
	// The bias add runs on the hook target, which turned it into a
	// subtract; the sum and the relu stay on the host.
	_, xs, ys := hookInputs()
	for i := range got {
		w := xs[i] + ys[i] - 100
		if w < 0 {
			w = 0
		}
		if got[i] != w {
			t.Fatalf("element %d: got %v, want %v", i, got[i], w)
		}
	}
	if len(seen) != 1 {
		t.Errorf("RelayToTIR ran %d times", len(seen))
	}
	if want := []string{"cpu:0", "ext_dev:0"}; !reflect.DeepEqual(res.Metadata.Devices, want) {
		t.Errorf("devices %v, want %v", res.Metadata.Devices, want)
	}
	gj := readGraph(t, res.Dir)
	copies := 0
	for _, n := range gj.Nodes {
		if n.Op == "device_copy" {
			copies++
		}
	}
	if copies != 2 {
		t.Errorf("%d device_copy nodes, want 2 (to ext_dev and back)", copies)
	}
}

func readGraph(t *testing.T, dir string) *runtime.GraphJSON {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "graph.json"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := runtime.DecodeGraphJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// scaleModule is what the RelayToRuntime test target builds: a Go module
// computing out = (a + b) * scale, scale being a constant the compiler
// set aside with ConstantUpdater; it saves itself as JSON.
type scaleModule struct {
	runtime.ModuleBase
	Symbol string `json:"symbol"`
	Const  string `json:"const"`
	scale  float32
	set    bool
}

func (m *scaleModule) Name() string                { return m.Symbol }
func (m *scaleModule) Kind() string                { return "kiln_test_scale" }
func (m *scaleModule) SaveBinary() ([]byte, error) { return json.Marshal(m) }
func (m *scaleModule) SetConstants(c map[string]*tensor.Tensor) error {
	v, ok := c[m.Const]
	if !ok {
		return fmt.Errorf("constant %q missing", m.Const)
	}
	m.scale, m.set = v.Float32s()[0], true
	return nil
}
func (m *scaleModule) GetFunction(name string) (runtime.PackedFunc, bool) {
	if name != m.Symbol {
		return nil, false
	}
	return func(args []*runtime.NDArray) error {
		if !m.set {
			return fmt.Errorf("constants not set")
		}
		a, err := args[0].ToTensor()
		if err != nil {
			return err
		}
		b, err := args[1].ToTensor()
		if err != nil {
			return err
		}
		out := tensor.New(ir.Float32, a.Shape)
		for i := range out.Float32s() {
			out.Float32s()[i] = (a.Float32s()[i] + b.Float32s()[i]) * m.scale
		}
		return args[2].CopyFrom(out)
	}, true
}

var registerScaleLoader = sync.OnceValue(func() error {
	return runtime.RegisterLoader(runtime.Loader{Kind: "kiln_test_scale", Load: func(data []byte) (runtime.Module, error) {
		m := &scaleModule{}
		if err := json.Unmarshal(data, m); err != nil {
			return nil, err
		}
		return m, nil
	}})
})

func TestHookRelayToRuntimeWithConstants(t *testing.T) {
	testenv.Cgo(t)
	if err := registerScaleLoader(); err != nil {
		t.Fatal(err)
	}
	r := targets.NewRegistry()
	var owned []string
	for _, k := range []*targets.Kind{
		targets.C,
		{Name: "scaler", DeviceType: targets.CPU, Keys: []string{"cpu"}, Flow: &backend.Flow{Hooks: backend.Hooks{
			RelayToRuntime: func(ctx *backend.HookContext, fn *graph.Function, symbol string) (runtime.Module, error) {
				owned = append(owned, symbol)
				return &scaleModule{Symbol: symbol, Const: symbol + "_scale"}, nil
			},
			ConstantUpdater: func(fn *graph.Function, symbol string) (map[string]*tensor.Tensor, error) {
				return map[string]*tensor.Tensor{symbol + "_scale": tensor.Scalar(ir.Float32, 3)}, nil
			},
		}}},
	} {
		if err := r.Register(k); err != nil {
			t.Fatal(err)
		}
	}
	res, got := compileHooked(t, r, addModule(t, "scaler"), "scaler, c -mcpu=x86-64", nil, nil)
	checkValues(t, got, func(x, y float32) float32 { return (x + y) * 3 })
	if len(owned) != 1 {
		t.Fatalf("RelayToRuntime ran for %v, want one function", owned)
	}
	if len(res.Metadata.Modules) != 1 || res.Metadata.Modules[0].Kind != "kiln_test_scale" || res.Metadata.Constants != constantsFile {
		t.Errorf("metadata modules %+v constants %q", res.Metadata.Modules, res.Metadata.Constants)
	}
}

func TestHookErrors(t *testing.T) {
	var seen []int64
	r := hookRegistry(t, targets.CPU, &seen, nil)
	l, err := r.ParseList("c -mcpu=x86-64")
	if err != nil {
		t.Fatal(err)
	}
	// A function for a compiler with no target in the list.
	_, err = Compile(addModule(t, "example_target_hook"), nil, Config{Host: l.Host, Out: filepath.Join(t.TempDir(), "a")})
	if err == nil || !strings.Contains(err.Error(), `external compiler "example_target_hook"`) {
		t.Errorf("got %v, want an error naming the compiler", err)
	}
	// A RelayToTIR hook that fails: the error names the target and no
	// artifact is left.
	bad := targets.NewRegistry()
	for _, k := range []*targets.Kind{
		targets.C,
		{Name: "broken", DeviceType: targets.CPU, Keys: []string{"cpu"}, Flow: &backend.Flow{Hooks: backend.Hooks{
			RelayToTIR: func(*backend.HookContext, *graph.Module, *tir.Module) error { return fmt.Errorf("unsupported shape") },
		}}},
	} {
		if err := bad.Register(k); err != nil {
			t.Fatal(err)
		}
	}
	l, err = bad.ParseList("broken, c")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "b")
	_, err = Compile(addModule(t, "broken"), nil, Config{Host: l.Host, Targets: l.Targets, Out: out})
	if err == nil || !strings.Contains(err.Error(), "target broken: RelayToTIR: unsupported shape") {
		t.Errorf("got %v", err)
	}
	if _, serr := os.Stat(out); !os.IsNotExist(serr) {
		t.Errorf("a failed compile left %s", out)
	}
}

// TestHookCCodegenKernelSources lowers the owned function to a call_extern
// of a vendor kernel shipped as C source through Flow.CCodegen: the
// kernel is compiled into the library, its header is included, and the
// kind's ReplaceCallExtern maps the TIR extern name onto the kernel.
func TestHookCCodegenKernelSources(t *testing.T) {
	testenv.Cgo(t)
	r := targets.NewRegistry()
	kind := &targets.Kind{
		Name:       "vendor",
		DeviceType: targets.CPU,
		Keys:       []string{"cpu"},
		Flow: &backend.Flow{Hooks: backend.Hooks{RelayToTIR: func(ctx *backend.HookContext, mod *graph.Module, prims *tir.Module) error {
			for _, of := range backend.OwnedFunctions(ctx, mod, prims) {
				pf := tir.NewPrimFunc(of.Symbol)
				var args []tir.PrimExpr
				out := of.Fn.Body.Type().(*ir.TensorType)
				ob := tir.NewBuffer("out", out.DType, out.Shape, tir.ScopeGlobal)
				for i, p := range of.Fn.Params {
					tt := p.Type().(*ir.TensorType)
					args = append(args, pf.AddBuffer(tir.NewBuffer(fmt.Sprintf("in%d", i), tt.DType, tt.Shape, tir.ScopeGlobal)).Data)
				}
				pf.AddBuffer(ob)
				args = append([]tir.PrimExpr{ob.Data}, append(args, tir.IntConst(ir.Int32, out.Shape.NumElements()))...)
				pf.Body = &tir.Evaluate{Value: tir.CallExternOf(tir.Int32T, "vendor_op", args...)}
				if _, err := backend.ReplaceWithPrimFunc(ctx, mod, of, pf, prims); err != nil {
					return err
				}
			}
			return nil
		}}, CCodegen: &backend.CCodegen{
			Includes:        []string{"vendor_kernels.h"},
			DeclaredExterns: []string{"vendor_vsub"},
			ReplaceCallExtern: func(name string, args []string) (string, bool) {
				if name != "vendor_op" {
					return "", false
				}
				return "vendor_vsub(" + strings.Join(args, ", ") + ")", true
			},
			Sources: []backend.SourceFile{
				{Name: "vendor_kernels.h", Data: []byte("#include <stdint.h>\nint32_t vendor_vsub(float* out, const float* a, const float* b, int32_t n);\n")},
				{Name: "vendor_kernels.c", Data: []byte("#include \"vendor_kernels.h\"\nint32_t vendor_vsub(float* out, const float* a, const float* b, int32_t n) {\n  for (int32_t i = 0; i < n; ++i) out[i] = a[i] - b[i];\n  return 0;\n}\n")},
			},
		}},
	}
	for _, k := range []*targets.Kind{targets.C, kind} {
		if err := r.Register(k); err != nil {
			t.Fatal(err)
		}
	}
	res, got := compileHooked(t, r, addModule(t, "vendor"), "vendor, c -mcpu=x86-64", nil, nil)
	checkValues(t, got, func(x, y float32) float32 { return x - y })
	lib, err := os.ReadFile(filepath.Join(res.Dir, "kiln_lib.c"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`#include "vendor_kernels.h"`, "vendor_vsub("} {
		if !strings.Contains(string(lib), want) {
			t.Errorf("kiln_lib.c lacks %q", want)
		}
	}
}

// TestHookOrderWithBothHooks: a kind with RelayToTIR, RelayToRuntime and
// ConstantUpdater has them called in seed 000's order. Its RelayToTIR
// lowers one of its two functions (add as subtract); RelayToRuntime gets
// only the other, and constant updating comes after it. main(x, y) =
// relu(g(f(x, y), y) + 100) with f = x - y (lowered) and g = (a + b) * 3
// (the runtime module) is 3x + 100, clamped at 0.
func TestHookOrderWithBothHooks(t *testing.T) {
	testenv.Cgo(t)
	if err := registerScaleLoader(); err != nil {
		t.Fatal(err)
	}
	var calls []string
	lowerOnly := func(ctx *backend.HookContext, mod *graph.Module, prims *tir.Module) error {
		calls = append(calls, "RelayToTIR")
		for _, of := range backend.OwnedFunctions(ctx, mod, prims) {
			if of.Symbol != "lowered_fn" {
				continue
			}
			if err := lowerAsSubtract(ctx, mod, prims, of); err != nil {
				return err
			}
		}
		return nil
	}
	r := targets.NewRegistry()
	for _, k := range []*targets.Kind{
		targets.C,
		{Name: "both", DeviceType: targets.CPU, Keys: []string{"cpu"}, Flow: &backend.Flow{Hooks: backend.Hooks{
			RelayToTIR: lowerOnly,
			RelayToRuntime: func(ctx *backend.HookContext, fn *graph.Function, symbol string) (runtime.Module, error) {
				calls = append(calls, "RelayToRuntime @"+symbol)
				return &scaleModule{Symbol: symbol, Const: symbol + "_scale"}, nil
			},
			ConstantUpdater: func(fn *graph.Function, symbol string) (map[string]*tensor.Tensor, error) {
				calls = append(calls, "ConstantUpdater @"+symbol)
				return map[string]*tensor.Tensor{symbol + "_scale": tensor.Scalar(ir.Float32, 3)}, nil
			},
		}}},
	} {
		if err := r.Register(k); err != nil {
			t.Fatal(err)
		}
	}
	tt := ir.NewTensorType(ir.Float32, ir.Shape{8})
	owned := func(symbol string) *graph.Function {
		a, b := graph.NewVar("a", tt), graph.NewVar("b", tt)
		return graph.NewFunction([]*graph.Var{a, b}, graph.MustCall(op.Add, []graph.Expr{a, b}, nil),
			ir.Attrs{graph.AttrCompiler: "both", graph.AttrPrimitive: true, graph.AttrGlobalSymbol: symbol})
	}
	x, y := graph.NewVar("x", tt), graph.NewVar("y", tt)
	f := graph.NewFuncCall(owned("lowered_fn"), []graph.Expr{x, y})
	g := graph.NewFuncCall(owned("runtime_fn"), []graph.Expr{f, y})
	body := graph.MustCall(op.Relu, []graph.Expr{graph.MustCall(op.Add, []graph.Expr{g, graph.NewConstant(tensor.Scalar(ir.Float32, 100))}, nil)}, nil)
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x, y}, body, nil))
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	_, got := compileHooked(t, r, mod, "both, c -mcpu=x86-64", nil, nil)
	checkValues(t, got, func(x, y float32) float32 { return 3 * x })
	want := []string{"RelayToTIR", "RelayToRuntime @runtime_fn", "ConstantUpdater @runtime_fn"}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("hook calls %q, want %q", calls, want)
	}
}
