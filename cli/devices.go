package cli

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/kiln-dev/kiln/device"
	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/partition"
	krt "github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/targets"
)

// deviceFlags are the flags that say where the parts of a model run,
// besides -t: --target-label, --placement and --place.
type deviceFlags struct {
	labels    listFlag
	placement string
	place     listFlag
}

func (f *deviceFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.labels, "target-label", "LABEL=TARGET names a target for placements, e.g. little=\"c -mcpu=cortex-a53\" (repeatable)")
	fs.StringVar(&f.placement, "placement", "", "placement `FILE`: one rule per line, \"node:ONNX_NODE = LABEL[:ID]\" or \"op:OP = LABEL[:ID]\" (# starts a comment)")
	fs.Var(&f.place, "place", "one placement rule, as a line of a placement file (repeatable)")
}

// given reports whether any of the flags was used.
func (f *deviceFlags) given() bool {
	return len(f.labels) > 0 || f.placement != "" || len(f.place) > 0
}

// placement is where a model runs: the -t list, the compilation's labels
// and the placement rules.
type placement struct {
	list   *targets.TargetList
	labels *targets.Labels
	rules  []device.Rule
}

// resolve parses -t (the comma-separated target list, host last) and the
// device flags. Errors name the flag and what is wrong with it.
func (f *deviceFlags) resolve(tgts string) (*placement, error) {
	l, err := parseTargetList(tgts)
	if err != nil {
		return nil, err
	}
	p := &placement{list: l, labels: targets.NewLabels(targets.DefaultLabels)}
	for _, v := range f.labels {
		if err := p.labels.AddFlag(targets.Default, v); err != nil {
			return nil, err
		}
	}
	if f.placement != "" {
		src, err := os.ReadFile(f.placement)
		if err != nil {
			return nil, fmt.Errorf("--placement: %w", err)
		}
		rules, err := device.ParseRulesNamed(f.placement, string(src))
		if err != nil {
			return nil, fmt.Errorf("--placement: %w", err)
		}
		p.rules = append(p.rules, rules...)
	}
	seen := map[string]bool{}
	for _, r := range p.rules {
		seen[ruleKey(r)] = true
	}
	for _, v := range f.place {
		if strings.Contains(v, "\n") {
			return nil, fmt.Errorf("--place %q: one rule per flag", v)
		}
		rules, err := device.ParseRules(v)
		if err != nil {
			return nil, fmt.Errorf("--place %q: %s", v, strings.Replace(err.Error(), "placement line 1, column ", "column ", 1))
		}
		if len(rules) == 0 {
			return nil, fmt.Errorf("--place %q: no rule", v)
		}
		r := rules[0]
		r.Line, r.Column, r.Source = 0, 0, "--place"
		if seen[ruleKey(r)] {
			return nil, fmt.Errorf("--place %q: %s is placed twice", v, ruleKey(r))
		}
		seen[ruleKey(r)] = true
		p.rules = append(p.rules, r)
	}
	return p, nil
}

func ruleKey(r device.Rule) string {
	if r.NodeName != "" {
		return "node:" + r.NodeName
	}
	return "op:" + r.OpType
}

// spec is the placement as device.Prepare takes it.
func (p *placement) spec() device.Spec {
	return device.Spec{Targets: p.list.Targets, Host: p.list.Host, Labels: p.labels, Rules: p.rules}
}

// plan applies the placement to mod and plans devices: the module
// `kiln inspect` shows with each node's device.
func (p *placement) plan(mod *graph.Module) (*graph.Module, error) {
	prepared, _, err := device.Prepare(mod, p.spec())
	if err != nil {
		return nil, err
	}
	return device.PlanDevices(prepared)
}

// deviceNote describes where planning put e ("cpu:1 big=c -mcpu=native"), or
// "" when it was not planned.
func deviceNote(mod *graph.Module, e graph.Expr) string {
	vd, ok := device.PlanOf(mod).Lookup(e)
	if !ok || vd.DeviceType <= 0 {
		return ""
	}
	id := vd.DeviceID
	if id < 0 {
		id = 0
	}
	s := fmt.Sprintf("%s:%d", vd.DeviceType, id)
	if vd.Target != nil {
		s += " " + vd.Target.Labelled()
	}
	return s
}

// partitionView partitions mod for the external targets of the placement
// and returns the report and, per call of mod's main, the target it goes
// to ("ccompiler", or "host"). Without external targets it returns nil.
func partitionView(mod *graph.Module, p *placement) (*partition.Report, func(graph.Expr) string, error) {
	if !driver.HasExternal(p.list.Targets) {
		return nil, nil, nil
	}
	// As the build does: the placement rules first, then partitioning
	// that follows them.
	prepared, ccfg, err := device.Prepare(mod, p.spec())
	if err != nil {
		return nil, nil, err
	}
	_, rep, err := partition.Partition(prepared, p.list.Targets, partition.Options{ResolveDevice: ccfg.ResolveTarget})
	if err != nil {
		return nil, nil, err
	}
	return rep, reportTargets(mod, rep), nil
}

// reportTargets maps the calls of mod's main function to their targets in
// rep ("dnnl #2", "host").
func reportTargets(mod *graph.Module, rep *partition.Report) func(graph.Expr) string {
	// Report entries are matched to the calls by ONNX node and operator
	// (partitioning rebuilds the graph, merging composites, so calls
	// differ), in order for repeated pairs.
	type key struct{ node, op string }
	pending := map[key][]partition.NodeReport{}
	for _, n := range rep.Nodes {
		k := key{n.Node, n.Op}
		pending[k] = append(pending[k], n)
	}
	where := map[graph.Expr]string{}
	graph.PostOrder(mod.Main().Body, func(e graph.Expr) {
		c, ok := e.(*graph.Call)
		if !ok || c.Op == nil {
			return
		}
		k := key{c.Span, c.Op.Name}
		q := pending[k]
		if len(q) == 0 {
			return
		}
		n := q[0]
		pending[k] = q[1:]
		where[e] = n.Target
		if n.Region >= 0 {
			where[e] = fmt.Sprintf("%s #%d", n.Target, n.Region)
		}
	})
	return func(e graph.Expr) string { return where[e] }
}

// coresFlag is --devices: the cores each CPU device of a compiled program
// runs on (runtime.ParseDeviceCores syntax).
type coresFlag struct{ set krt.DeviceCores }

func (f *coresFlag) register(fs *flag.FlagSet) {
	fs.Func("devices", "run each CPU device's kernels on a thread pinned to its cores, e.g. cpu:0=0-3,cpu:1=4-7 (the devices a big.LITTLE split compiles to; kiln inspect and metadata.json list a program's devices)", func(s string) error {
		dc, err := krt.ParseDeviceCores(s)
		if err != nil {
			return err
		}
		f.set = dc
		return nil
	})
}

// apply pins the artifact's devices (nothing without the flag).
func (f *coresFlag) apply(art *driver.Artifact) error {
	if len(f.set) == 0 {
		return nil
	}
	if art.Exec == nil {
		return fmt.Errorf("--devices %s: an AOT artifact runs as one program; pinning devices needs the graph executor", f.set)
	}
	if err := art.Exec.SetDeviceCores(f.set); err != nil {
		return fmt.Errorf("--devices %s: %w", f.set, err)
	}
	return nil
}
