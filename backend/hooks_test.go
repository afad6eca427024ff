package backend

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
	"github.com/kiln-dev/kiln/tir"
)

// fakeModule is a runtime.Module a hook can return.
type fakeModule struct {
	runtime.ModuleBase
	name string
}

func (m *fakeModule) Name() string                                  { return m.name }
func (m *fakeModule) Kind() string                                  { return "fake" }
func (m *fakeModule) GetFunction(string) (runtime.PackedFunc, bool) { return nil, false }

// externLowering is an example RelayToTIR hook: every function the target
// owns becomes a PrimFunc making one flat call_extern to
// "<kind>_<example_attribute>" with its buffers. seen records the
// attribute each call observed.
func externLowering(seen *[]int64) func(ctx *HookContext, mod *graph.Module, prims *tir.Module) error {
	return func(ctx *HookContext, mod *graph.Module, prims *tir.Module) error {
		attr, _ := ctx.Target.Int("example_attribute")
		*seen = append(*seen, attr)
		for _, of := range OwnedFunctions(ctx, mod, prims) {
			pf := tir.NewPrimFunc(of.Symbol)
			var args []tir.PrimExpr
			for i, p := range of.Fn.Params {
				tt := p.Type().(*ir.TensorType)
				b := pf.AddBuffer(tir.NewBuffer(fmt.Sprintf("in%d", i), tt.DType, tt.Shape, tir.ScopeGlobal))
				args = append(args, b.Data)
			}
			ot := of.Fn.Body.Type().(*ir.TensorType)
			out := pf.AddBuffer(tir.NewBuffer("out", ot.DType, ot.Shape, tir.ScopeGlobal))
			args = append(args, out.Data)
			pf.Body = &tir.Evaluate{Value: tir.CallExternOf(tir.Int32T, fmt.Sprintf("%s_%d", ctx.Target.Kind.Name, attr), args...)}
			if _, err := ReplaceWithPrimFunc(ctx, mod, of, pf, prims); err != nil {
				return err
			}
		}
		return nil
	}
}

func exampleKind(seen *[]int64) *targets.Kind {
	return &targets.Kind{
		Name:       "example",
		DeviceType: targets.ExtDev,
		Keys:       []string{"example"},
		Options:    []targets.Option{{Name: "example_attribute", Kind: ir.AttrInt, Default: int64(0)}},
		Flow: &Flow{Hooks: Hooks{
			RelayToTIR: externLowering(seen),
			TIRToRuntime: func(ctx *HookContext, prims *tir.Module) (runtime.Module, error) {
				var names []string
				for _, f := range prims.Funcs() {
					if f.Target == ctx.Target {
						names = append(names, f.Name)
					}
				}
				return &fakeModule{name: strings.Join(names, "+") + "@" + ctx.ScratchDir}, nil
			},
			RelayToRuntime: func(ctx *HookContext, fn *graph.Function, symbol string) (runtime.Module, error) {
				attr, _ := ctx.Target.Int("example_attribute")
				return &fakeModule{name: fmt.Sprintf("%s/%d/host=%s", symbol, attr, ctx.Host)}, nil
			},
			ConstantUpdater: func(fn *graph.Function, symbol string) (map[string]*tensor.Tensor, error) {
				return map[string]*tensor.Tensor{symbol + "_const0": tensor.Scalar(ir.Float32, 1.5)}, nil
			},
		}},
	}
}

func TestHookNames(t *testing.T) {
	var seen []int64
	k := exampleKind(&seen)
	want := []string{"RelayToTIR", "RelayToRuntime", "ConstantUpdater", "TIRToRuntime"}
	if got := k.HookNames(); !reflect.DeepEqual(got, want) {
		t.Errorf("HookNames = %v, want %v", got, want)
	}
	if got := targets.C.HookNames(); len(got) != 0 {
		t.Errorf("c has hooks %v", got)
	}
	only := &targets.Kind{Name: "x", Flow: &Flow{Hooks: Hooks{TIRToRuntime: Of(k).Hooks.TIRToRuntime}}}
	if got := only.HookNames(); !reflect.DeepEqual(got, []string{"TIRToRuntime"}) {
		t.Errorf("HookNames = %v", got)
	}
}

func TestRegisterDuplicateKind(t *testing.T) {
	var seen []int64
	r := targets.NewRegistry()
	if err := r.Register(exampleKind(&seen)); err != nil {
		t.Fatal(err)
	}
	err := r.Register(exampleKind(&seen))
	if err == nil || !strings.Contains(err.Error(), `"example" is already registered`) {
		t.Errorf("second Register = %v", err)
	}
}

// tt is a float32 tensor type of shape [4].
var tt = ir.NewTensorType(ir.Float32, ir.Shape{4})

// hookModule builds main(x) = @part_g(f_lit(x), f_other(x)) style module:
//
//	@part_g: a module-level function with Compiler "example"
//	lit:     a function literal with Compiler "example" called from main
//	other:   a function literal with Compiler "other" (left alone)
func hookModule(t *testing.T) (*graph.Module, *graph.Function, *graph.Function) {
	t.Helper()
	mkFn := func(compiler string) *graph.Function {
		a := graph.NewVar("a", tt)
		return graph.NewFunction([]*graph.Var{a}, graph.MustCall(op.Add, []graph.Expr{a, a}, nil),
			ir.Attrs{graph.AttrCompiler: compiler, graph.AttrPrimitive: true})
	}
	lit, other, global := mkFn("example"), mkFn("other"), mkFn("example")
	x := graph.NewVar("x", tt)
	c1 := graph.NewFuncCall(lit, []graph.Expr{x})
	c1.Span = "node1"
	c2 := graph.NewFuncCall(other, []graph.Expr{c1})
	c3 := graph.NewFuncCall(graph.NewGlobalVar("part_g"), []graph.Expr{c2})
	c4 := graph.NewFuncCall(lit, []graph.Expr{c3})
	mod := graph.NewModule(graph.NewFunction([]*graph.Var{x}, c4, nil))
	if err := mod.Add("part_g", global); err != nil {
		t.Fatal(err)
	}
	if err := graph.InferTypes(mod); err != nil {
		t.Fatal(err)
	}
	return mod, lit, other
}

func TestRelayToTIRContract(t *testing.T) {
	var seen []int64
	r := targets.NewRegistry()
	if err := r.Register(exampleKind(&seen)); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(&targets.Kind{Name: "c", DeviceType: targets.CPU, Host: true}); err != nil {
		t.Fatal(err)
	}
	l, err := r.ParseList("example -example_attribute=42, c")
	if err != nil {
		t.Fatal(err)
	}
	tg := l.ByKind("example")
	// The hook is reachable from the parsed target.
	if Of(tg.Kind).Hooks.RelayToTIR == nil {
		t.Fatal("parsed target has no RelayToTIR hook")
	}
	mod, lit, other := hookModule(t)
	prims := &tir.Module{}
	ctx := &HookContext{Target: tg, Host: l.Host, ScratchDir: t.TempDir()}
	if err := Of(tg.Kind).Hooks.RelayToTIR(ctx, mod, prims); err != nil {
		t.Fatal(err)
	}
	// The hook saw the target's attribute.
	if !reflect.DeepEqual(seen, []int64{42}) {
		t.Errorf("hook saw example_attribute %v, want [42]", seen)
	}
	// One PrimFunc per owned function, named by symbol, tagged with the target.
	var names []string
	for _, f := range prims.Funcs() {
		names = append(names, f.Name)
		if f.Attrs[tir.AttrGlobalSymbol] != f.Name || f.Target.Kind.Name != "example" {
			t.Errorf("PrimFunc %s attrs %v", f.Name, f.Attrs)
		}
		ev := f.Body.(*tir.Evaluate).Value.(*tir.Call)
		if ev.Extern != "example_42" || len(ev.Args) != 2 {
			t.Errorf("PrimFunc %s calls %s with %d args", f.Name, ev.Extern, len(ev.Args))
		}
	}
	if want := []string{"part_g", "example_0"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("PrimFuncs %v, want %v", names, want)
	}
	// main now calls @example_0, other-literal, @part_g, @example_0.
	main := mod.Main()
	var callees []string
	graph.PostOrder(main.Body, func(e graph.Expr) {
		c, ok := e.(*graph.Call)
		if !ok {
			return
		}
		switch f := c.Fn.(type) {
		case *graph.GlobalVar:
			callees = append(callees, "@"+f.Name)
			pf, ok := LoweredPrimFunc(c, prims)
			if !ok || pf.Name != f.Name {
				t.Errorf("LoweredPrimFunc(@%s) = %v, %v", f.Name, pf, ok)
			}
			if c.Type() == nil || !ir.TypeEqual(c.Type(), tt) {
				t.Errorf("call of @%s has type %v", f.Name, c.Type())
			}
		case *graph.Function:
			if f == lit {
				t.Error("a call of the lowered literal remains")
			}
			if f == other {
				callees = append(callees, "other")
			}
			if _, ok := LoweredPrimFunc(c, prims); ok {
				t.Error("LoweredPrimFunc of a literal call")
			}
		}
	})
	if want := []string{"@example_0", "other", "@part_g", "@example_0"}; !reflect.DeepEqual(callees, want) {
		t.Errorf("main calls %v, want %v", callees, want)
	}
	// The span of the rewritten call is kept.
	graph.PostOrder(main.Body, func(e graph.Expr) {
		if c, ok := e.(*graph.Call); ok && c.Span == "node1" {
			if g, ok := c.Fn.(*graph.GlobalVar); !ok || g.Name != "example_0" {
				t.Errorf("span node1 is on %s", graph.Describe(c))
			}
		}
	})
	// Stubs keep the signatures and are marked lowered.
	for _, sym := range []string{"example_0", "part_g"} {
		f := mod.Funcs[sym]
		if f == nil || !f.BoolAttr(FuncAttrLowered) || f.StrAttr(graph.AttrGlobalSymbol) != sym {
			t.Errorf("stub @%s = %v", sym, f)
			continue
		}
		if ctx.Owns(f) {
			t.Errorf("lowered @%s is still owned", sym)
		}
	}
	if !ir.TypeEqual(main.Body.Type(), tt) {
		t.Errorf("main body type %v", main.Body.Type())
	}
	// Running the hook again finds nothing left to lower.
	if again := OwnedFunctions(ctx, mod, prims); len(again) != 0 {
		t.Errorf("owned after lowering: %v", again)
	}

	// TIRToRuntime takes the target's PrimFuncs.
	rm, err := Of(tg.Kind).Hooks.TIRToRuntime(ctx, prims)
	if err != nil {
		t.Fatal(err)
	}
	if want := "part_g+example_0@" + ctx.ScratchDir; rm.Name() != want {
		t.Errorf("TIRToRuntime module %q, want %q", rm.Name(), want)
	}
	// RelayToRuntime and ConstantUpdater receive the target and symbol.
	rm, err = Of(tg.Kind).Hooks.RelayToRuntime(ctx, other, "sym")
	if err != nil || rm.Name() != "sym/42/host=c" {
		t.Errorf("RelayToRuntime = %v, %v", rm, err)
	}
	consts, err := Of(tg.Kind).Hooks.ConstantUpdater(other, "sym")
	if err != nil || len(consts) != 1 || consts["sym_const0"].Float(0) != 1.5 {
		t.Errorf("ConstantUpdater = %v, %v", consts, err)
	}
}

func TestOwnsByPlacement(t *testing.T) {
	var seen []int64
	r := targets.NewRegistry()
	if err := r.Register(exampleKind(&seen)); err != nil {
		t.Fatal(err)
	}
	a, _ := r.Parse("example -example_attribute=1")
	b, _ := r.Parse("example -example_attribute=2")
	labels := targets.NewLabels(nil)
	if err := labels.Add("acc", a); err != nil {
		t.Fatal(err)
	}
	if err := labels.Add("acc2", b); err != nil {
		t.Fatal(err)
	}
	ctx := &HookContext{Target: a, Labels: labels}
	cases := []struct {
		attrs ir.Attrs
		owned bool
	}{
		{ir.Attrs{graph.AttrCompiler: "example"}, true},
		{ir.Attrs{graph.AttrCompiler: "dnnl"}, false},
		{ir.Attrs{FuncAttrTarget: "acc"}, true},
		{ir.Attrs{FuncAttrTarget: "acc:1"}, true},
		{ir.Attrs{FuncAttrTarget: "acc2"}, false}, // same kind, other attributes
		{ir.Attrs{FuncAttrTarget: "nowhere"}, false},
		{ir.Attrs{graph.AttrCompiler: "example", FuncAttrLowered: true}, false},
		{nil, false},
	}
	for _, c := range cases {
		fn := graph.NewFunction(nil, graph.NewVar("v", tt), c.attrs)
		if got := ctx.Owns(fn); got != c.owned {
			t.Errorf("Owns(%v) = %v, want %v", c.attrs, got, c.owned)
		}
	}
	noLabels := &HookContext{Target: a}
	if noLabels.Owns(graph.NewFunction(nil, graph.NewVar("v", tt), ir.Attrs{FuncAttrTarget: "acc"})) {
		t.Error("placement resolved without labels")
	}
}

func TestReplaceWithPrimFuncErrors(t *testing.T) {
	var seen []int64
	r := targets.NewRegistry()
	if err := r.Register(exampleKind(&seen)); err != nil {
		t.Fatal(err)
	}
	tg, _ := r.Parse("example")
	ctx := &HookContext{Target: tg}
	mod, lit, _ := hookModule(t)
	prims := &tir.Module{}
	if _, err := ReplaceWithPrimFunc(ctx, mod, OwnedFunction{Symbol: "main", Fn: lit}, tir.NewPrimFunc("x"), prims); err == nil {
		t.Error("lowering to main accepted")
	}
	if _, err := ReplaceWithPrimFunc(ctx, mod, OwnedFunction{Symbol: "part_g", Fn: lit}, tir.NewPrimFunc("x"), prims); err == nil || !strings.Contains(err.Error(), "@part_g") {
		t.Errorf("symbol clash: %v", err)
	}
	if err := prims.Add(tir.NewPrimFunc("taken")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReplaceWithPrimFunc(ctx, mod, OwnedFunction{Symbol: "taken", Fn: lit}, tir.NewPrimFunc("x"), prims); err == nil {
		t.Error("PrimFunc clash accepted")
	}
	// OwnedFunctions avoids symbols already taken in prims.
	if err := prims.Add(tir.NewPrimFunc("example_0")); err != nil {
		t.Fatal(err)
	}
	owned := OwnedFunctions(ctx, mod, prims)
	var syms []string
	for _, o := range owned {
		syms = append(syms, o.Symbol)
	}
	if want := []string{"part_g", "example_1"}; !reflect.DeepEqual(syms, want) {
		t.Errorf("symbols %v, want %v", syms, want)
	}
}
