// Package dnnl is kiln's oneDNN external backend (seed 002's "codegen
// for your own representation"): partitioning gives it the convolutions,
// dense and matmul products, pooling, relu, clip, elementwise add / subtract /
// multiply, bias_add and batch_norm calls of a model (float32, NCHW) and
// the composite functions listed in Composites; its RelayToRuntime hook
// serialises each partitioned function as a JSON graph (package
// runtime/jsonrt), its ConstantUpdater hands the weights to the build by
// name, and at load time the JSON runtime runs the graph with kernels
// built from oneDNN primitives (Debian's libdnnl-dev, 2.6) through cgo.
//
//	partition (Supported, composites) → build: RelayToRuntime (Generate) + ConstantUpdater
//	→ artifact modules/NN_<symbol>.dnnl_json + constants.bin
//	→ LoadArtifact: Loader → jsonrt.Module with oneDNN kernels → SetConstants (weights reordered once) → Run
//
// Kernels create their oneDNN primitives once per module load (one CPU
// engine and stream per module). Convolution and inner-product weights
// that are constants are reordered once, when the constants are set,
// into the blocked layout oneDNN picks; activations between oneDNN
// kernels stay in the blocked layouts the primitives prefer and are
// reordered to plain row-major only at the function's outputs (or where
// a kernel needs plain data). Bias, relu and the residual add of the
// composites are fused as the primitive's bias and post-ops (eltwise
// relu, sum).
//
// Threads: oneDNN here runs on OpenMP (libgomp, as kiln's generated C)
// and splits each primitive's work for the thread count at its creation,
// so primitives are created, and run, with the count given to
// runtime.SetNumThreads (0, the default: every processor); a new count
// makes the JSON module build its kernels again before the next run.
package dnnl

import (
	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/runtime/jsonrt"
	"github.com/kiln-dev/kiln/targets"
	"strings"
)

// ModuleKind is the runtime module kind of dnnl's JSON modules (the
// artifact's modules/*.dnnl_json files).
const ModuleKind = "dnnl_json"

// Kind is the "dnnl" target kind.
var Kind = &targets.Kind{
	Name:       "dnnl",
	DeviceType: targets.CPU,
	Keys:       []string{"dnnl", "cpu"},
	Doc:        "oneDNN (libdnnl) external codegen: conv2d, dense/matmul, pooling, relu, clip, add, batch_norm, concatenate as a JSON graph run with oneDNN primitives",
	Options: []targets.Option{{Name: OptionLayout, Kind: ir.AttrString, Choices: []string{LayoutAny, LayoutBlocked},
		Doc: "activation layout of convolutions: any (oneDNN picks per primitive and ISA; also when unset) or blocked (nChw16c with AVX-512, nChw8c with AVX2, when the channels divide)"}},
	Flow: &backend.Flow{
		Hooks:      backend.Hooks{RelayToRuntime: relayToRuntime, ConstantUpdater: constantUpdater},
		Supports:   Supported,
		Patterns:   Patterns,
		KeepRegion: KeepRegion,
		OpenMP:     true,
	},
}

// Register adds Kind to r and registers the runtime loader of dnnl's
// modules (once per process). Where oneDNN is unavailable (Available is
// false: a build without cgo, oneDNN's header or the build tag
// kiln_nodnnl, or a machine without libdnnl) it records why instead, so
// that asking for -t dnnl says so.
func Register(r *targets.Registry) error {
	if !Available {
		r.RegisterUnavailable(Kind.Name, strings.TrimPrefix(Unavailable().Error(), "dnnl: "))
		return nil
	}
	if err := RegisterLoader(); err != nil {
		return err
	}
	return r.Register(Kind)
}

// Importing the package registers Kind in targets.Default (when this
// build has oneDNN), so `import _ "github.com/kiln-dev/kiln/backend/dnnl"`
// is all a program needs for -t "dnnl, c".
func init() {
	if err := Register(targets.Default); err != nil {
		panic(err) // another kind named dnnl: a programming error
	}
}

// The target option that picks the activation layout of convolutions,
// and its values. Which is faster depends on the model, oneDNN's version
// and the ISA: oneDNN 2.6 on AVX-512 picks NHWC brgemm kernels when
// free, and on the Zen 5 machine of docs/performance.md mobilenet_v2 ran
// within noise of that on nChw16c's direct and depthwise kernels.
const (
	OptionLayout  = "layout"
	LayoutAny     = "any"
	LayoutBlocked = "blocked"
)

// relayToRuntime generates the JSON graph of one partitioned function,
// with the target's -layout on each convolution (the kernel attribute
// layout).
func relayToRuntime(ctx *backend.HookContext, fn *graph.Function, symbol string) (runtime.Module, error) {
	g, _, err := Generate(fn, symbol)
	if err != nil {
		return nil, err
	}
	if l := ctx.Target.Str(OptionLayout); l != "" && l != LayoutAny {
		for i := range g.Nodes {
			n := &g.Nodes[i]
			if spec, ok := compositeSpec(n.Name); n.Op == jsonrt.OpKernel && (n.Name == op.Conv2D.Name || ok && spec.Anchor == op.Conv2D) {
				attrs := n.AttrMap()
				attrs[attrLayout] = l
				n.SetAttrs(attrs)
			}
		}
	}
	set, err := newKernelSet()
	if err != nil {
		return nil, err
	}
	return jsonrt.New(ModuleKind, g, set)
}
