package driver

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/device"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/transform"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/passconfig"
	"github.com/kiln-dev/kiln/targets"
	tirtransform "github.com/kiln-dev/kiln/tir/transform"
	"github.com/kiln-dev/kiln/topi"
)

// graphPasses is the graph pass list of a compilation: the standard
// passes with partitioning (when part is not nil) after the simplifying
// passes and before the layout changes, and device planning right before
// fusion (fusion must not merge operators of different devices, and
// device_copy is opaque to it). Fusion follows the pass config: its depth
// limit, and no fusion at all when the config disables it or at opt
// level 0. alter_conv_layout keeps Winograd's planes within the L2 of
// the CPU targets that need it (topi.WinogradMaxBytes).
// alter_qconv_layout rewrites what the kernels of the host and of every
// other CPU target of tgts (whose device may get the convolution) all run
// faster in the broadcast form (qconvBroadcastChoice).
func graphPasses(pc *passconfig.Config, part *transform.Pass, host *targets.Target, tgts []*targets.Target) []transform.Pass {
	fuse := transform.FuseOptions{
		MaxDepth: int(pc.Int(passconfig.FuseMaxDepth)),
		Disable:  pc.Bool(passconfig.DisableFusion) || pc.OptLevel() == 0,
	}
	var out []transform.Pass
	for _, p := range transform.Passes(fuse) {
		switch p.Name {
		case "conv1d_as_conv2d":
			// Partitioning sees the model's own operators (an external
			// target may take nn.conv1d); the rewrites after it touch only
			// what stayed on the host.
			if part != nil {
				out = append(out, *part)
			}
		case "fuse_ops":
			out = append(out, transform.Pass{Name: "plan_devices", Run: device.PlanDevices, Required: true})
		case "alter_conv_layout":
			opts := convLayoutOptions(host, tgts)
			p.Run = func(m *graph.Module) (*graph.Module, error) { return transform.AlterConvLayoutWith(m, opts) }
		case "alter_qconv_layout":
			if want := qconvBroadcastChoice(host, tgts); want != nil {
				p.Run = func(m *graph.Module) (*graph.Module, error) { return transform.AlterQConvLayout(m, want) }
			}
		}
		out = append(out, p)
	}
	return out
}

// convLayoutOptions is alter_conv_layout's options for a compilation
// whose host is host and whose other targets are tgts: from the CPU
// targets among them, any of whose devices may get a convolution.
func convLayoutOptions(host *targets.Target, tgts []*targets.Target) transform.ConvLayoutOptions {
	var cpus []*targets.Target
	for _, t := range append([]*targets.Target{host}, tgts...) {
		if t != nil && (t == host || t.Kind.Host) {
			cpus = append(cpus, t)
		}
	}
	var opts transform.ConvLayoutOptions
	if len(cpus) == 0 {
		return opts
	}
	// The smallest positive Winograd limit of the CPU targets.
	var limited []*targets.Target
	for _, t := range cpus {
		if l := topi.WinogradMaxBytes(t); l > 0 {
			limited = append(limited, t)
			if opts.WinogradMaxBytes == 0 || l < opts.WinogradMaxBytes {
				opts.WinogradMaxBytes = l
			}
		}
	}
	if len(limited) > 0 {
		// By row tiles only where every CPU target with a limit runs it
		// so.
		opts.WinogradRowTiles = func(ic, oc, block int64) bool {
			for _, t := range limited {
				if !topi.WinogradRowTiles(t, ic, oc, block) {
					return false
				}
			}
			return true
		}
	}
	// Padded output channels only where every CPU target pads them to
	// the same block.
	opts.PadBlock = func(steps, oc, outputs int64) int64 {
		b := topi.ConvPadBlock(cpus[0], steps, oc, outputs)
		for _, t := range cpus[1:] {
			if topi.ConvPadBlock(t, steps, oc, outputs) != b {
				return 0
			}
		}
		return b
	}
	return opts
}

// qconvBroadcastChoice is the broadcast form's choice for a compilation
// whose host is host and whose CPU targets are tgts: a convolution that
// every one of them would run in that form, or nil where one of them has
// no such form (its device might get the convolution).
func qconvBroadcastChoice(host *targets.Target, tgts []*targets.Target) func(data, weight, out ir.Shape, attrs ir.Attrs) bool {
	if host == nil {
		return nil
	}
	var choices []func(data, weight, out ir.Shape, attrs ir.Attrs) bool
	for _, t := range append([]*targets.Target{host}, tgts...) {
		if t == nil || (t != host && !t.Kind.Host) {
			continue
		}
		c := topi.QConvBroadcastChoice(t)
		if c == nil {
			return nil
		}
		choices = append(choices, c)
	}
	return func(data, weight, out ir.Shape, attrs ir.Attrs) bool {
		for _, c := range choices {
			if !c(data, weight, out, attrs) {
				return false
			}
		}
		return true
	}
}

// skipPass reports whether the pass config skips graph pass p: disabled
// by name, or above the opt level. Required passes always run.
func skipPass(pc *passconfig.Config, p transform.Pass) bool {
	return !p.Required && (pc.Disabled(p.Name) || p.OptLevel > pc.OptLevel())
}

// newTIRPipeline is the TIR pass pipeline configured by pc for functions
// compiled for vectors of vectorBits (0: none or unknown): the built-in
// passes and VectorTails.
func newTIRPipeline(pc *passconfig.Config, vectorBits int) *tirtransform.Pipeline {
	p := tirtransform.NewPipeline()
	p.Config = pc
	// A fresh pipeline has no other pass of this name.
	_ = p.Register(tirtransform.VectorTails(vectorBits))
	return p
}

// vectorBits is the vector width the C of target t's functions is
// compiled for: its processor's for a kind with an mcpu option, else 0
// (accelerators, whose code generators take their own loops).
func vectorBits(t *targets.Target) int {
	if t == nil || t.Kind.Option("mcpu") == nil {
		return 0
	}
	if p := t.Processor(); p != nil {
		return p.VectorBits
	}
	return 0
}

// checkDisabled checks the passes the config disables: each must be a
// graph pass of the list gp or a TIR pass (built in or added by a target
// of the list), and not one later stages need.
func checkDisabled(pc *passconfig.Config, gp []transform.Pass, tgts []*targets.Target) error {
	dis := pc.DisabledPasses()
	if len(dis) == 0 {
		return nil
	}
	var known []string
	required := map[string]bool{}
	for _, p := range gp {
		known = append(known, p.Name)
		required[p.Name] = p.Required
	}
	tp := newTIRPipeline(pc, 0)
	for _, t := range tgts {
		if backend.Of(t.Kind).TIRPasses == nil {
			continue
		}
		for _, ps := range backend.Of(t.Kind).TIRPasses(t, pc) {
			// A registration error surfaces when the TIR stage runs.
			_ = tp.Register(ps)
		}
	}
	known = append(known, tp.Names()...)
	for _, name := range dis {
		switch {
		case !slices.Contains(known, name):
			return fmt.Errorf("build: --disable-pass %s: no such pass in this compilation (passes: %s)", name, strings.Join(known, ", "))
		case required[name]:
			return fmt.Errorf("build: --disable-pass %s: the pass is required (later stages depend on its output)", name)
		}
	}
	return nil
}
