package driver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"time"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/partition"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tensor"
)

// Measured partitioning (CompileMeasured) chooses where each call runs by
// measuring on this machine instead of taking the first target in the
// list that supports it. It compiles and runs whole-model candidates:
//
//   - "host": everything on the host;
//   - one per external target T: T takes every call it supports (greedy
//     with T alone);
//   - "T refined": from the profiles of those runs (each kernel's time,
//     and each oneDNN primitive's inside a region, attributed to the ONNX
//     nodes it computes), every node T took is kept on T or moved to the
//     host, whichever costs less counting the layout conversions a new
//     region boundary adds (bytes crossing it at a memory copy's speed);
//     nodes that go together (a composite) move together;
//   - "greedy": the list order's greedy partition, when there are two or
//     more external targets, and "combined": per node the refined target
//     that saves the most.
//
// The fastest candidate by median latency is compiled into the artifact,
// so the result is never slower, beyond the noise of the measurement,
// than the host alone or any single external target. The choice is kept
// in kiln's cache keyed by the model's graph, the targets, the resolved
// processor, the thread count and the oneDNN ISA limit: a second compile
// measures nothing.

// MeasureOptions configure measured partitioning.
type MeasureOptions struct {
	// Threads is the thread count of the measured runs (0: 1).
	Threads int
	// Runs is the number of timed runs per candidate (0: 15), after 3
	// warm-up runs; as many again are profiled.
	Runs int
	// CacheDir keeps choices across compiles ("": none).
	CacheDir string
	// Log receives one line per measured candidate (nil: none).
	Log io.Writer
}

// copyBandwidth is the speed (bytes per second) at which measured
// partitioning expects a layout conversion at a new region boundary to
// read and write a tensor: a conservative figure for one core.
const copyBandwidth = 5e9

// CanMeasure reports whether measured partitioning applies to a
// compilation for tgts: one has an external code generator (HasExternal),
// none is backend.Flow.Unmeasured, and this build can run the candidates
// it measures (runtime.CanRun).
func CanMeasure(tgts []*targets.Target) bool {
	for _, t := range tgts {
		if backend.Of(t.Kind).Unmeasured {
			return false
		}
	}
	return HasExternal(tgts) && runtime.CanRun
}

// HasExternal reports whether targets holds a target whose kind takes
// calls by partitioning (an external code generator), the case in which
// CompileMeasured measures.
func HasExternal(tgts []*targets.Target) bool {
	for _, t := range tgts {
		if backend.Of(t.Kind).Supports != nil {
			return true
		}
	}
	return false
}

// candidate is one whole-model assignment: spans maps an ONNX node to the
// target kind that gets it ("host" for the host); calls of nodes it does
// not name go to def (nil: the host) when def takes them.
type candidate struct {
	name  string
	spans map[string]string
	def   *targets.Target
	// greedy gives every call to the first target that takes it.
	greedy bool
	// measured results
	median float64
	rep    partition.Report
	steps  []runtime.StepTime
	runs   int
	// art is the loaded artifact, open until the final timing; err is
	// why a timed run failed.
	art *Artifact
	err error
}

// decider is the partition.Decider of a candidate.
func (c *candidate) decider(byKind map[string]*targets.Target) partition.Decider {
	return func(call *graph.Call, able []*targets.Target) (*targets.Target, string) {
		if c.greedy {
			return able[0], ""
		}
		spans := graph.Sources(nil, call)
		var chosen *targets.Target
		known := false
		for _, s := range spans {
			k, ok := c.spans[s]
			if !ok {
				continue
			}
			known = true
			if k == partition.HostTarget {
				return nil, fmt.Sprintf("measured partitioning: faster on the host (%s)", c.name)
			}
			t := byKind[k]
			if chosen != nil && chosen != t {
				return nil, fmt.Sprintf("measured partitioning: its nodes were chosen for different targets (%s)", c.name)
			}
			chosen = t
		}
		if !known {
			chosen = c.def
		}
		for _, t := range able {
			if t == chosen {
				return t, ""
			}
		}
		if chosen == nil {
			return nil, fmt.Sprintf("measured partitioning: faster on the host (%s)", c.name)
		}
		return nil, fmt.Sprintf("measured partitioning: chosen for %s, which does not take it here (%s)", chosen.Kind.Name, c.name)
	}
}

// measuredCache is what the cache keeps of a choice.
type measuredCache struct {
	Chosen     string                        `json:"chosen"`
	Default    string                        `json:"default"`
	Spans      map[string]string             `json:"spans"`
	Candidates []partition.MeasuredCandidate `json:"candidates"`
	Costs      map[string]map[string]float64 `json:"costs"`
}

// CompileMeasured is CompileContext with measured partitioning when the
// target list has external targets (otherwise it is CompileContext). The
// returned report (cfg.Report, when set) carries the measurements.
func CompileMeasured(ctx context.Context, mod *graph.Module, outputNames []string, cfg Config, mo MeasureOptions) (*Result, error) {
	if !HasExternal(cfg.Targets) {
		return CompileContext(ctx, mod, outputNames, cfg)
	}
	if mo.Threads < 1 {
		mo.Threads = 1
	}
	if mo.Runs < 1 {
		mo.Runs = 15
	}
	start := time.Now()
	byKind := map[string]*targets.Target{}
	var ext []*targets.Target
	for _, t := range cfg.Targets {
		if backend.Of(t.Kind).Supports != nil {
			byKind[t.Kind.Name] = t
			ext = append(ext, t)
		}
	}
	key := measuredKey(mod, cfg, mo)
	if cached, ok := readMeasuredCache(mo.CacheDir, key); ok {
		c := &candidate{name: cached.Chosen, spans: cached.Spans, def: byKind[cached.Default]}
		cfg.Decide = c.decider(byKind)
		res, err := CompileContext(ctx, mod, outputNames, cfg)
		if err == nil && cfg.Report != nil {
			cfg.Report.Measured = &partition.Measured{Candidates: cached.Candidates, Chosen: cached.Chosen, Cached: true, Threads: mo.Threads}
			cfg.Report.AddCosts(cached.Costs)
			cfg.Report.Warnings = append(cfg.Report.Warnings, cfg.Report.SlowRegions()...)
		}
		return res, err
	}

	var all []*candidate
	var failed []string
	fail := func(c *candidate, err error) {
		failed = append(failed, fmt.Sprintf("measured partitioning left out candidate %q: %v", c.name, err))
		if mo.Log != nil {
			fmt.Fprintf(mo.Log, "measured partitioning: %-24s failed: %v\n", c.name, err)
		}
	}
	scratch, err := os.MkdirTemp("", "kiln-measure-")
	if err != nil {
		return nil, fmt.Errorf("measured partitioning: %w", err)
	}
	TrackTemp(scratch)
	defer removeTemp(scratch)
	defer func() {
		for _, c := range all {
			c.close()
		}
	}()
	// run compiles and loads a candidate, and profiles it when its
	// per-node costs are needed. A candidate that fails to compile or
	// run is left out (with the reason in the report's warnings); only a
	// cancelled compile stops the measurement.
	run := func(c *candidate, profile bool) (bool, error) {
		sub := cfg
		sub.Out = filepath.Join(scratch, fmt.Sprintf("c%d", len(all)+len(failed)))
		sub.Report = &c.rep
		sub.Progress, sub.DumpGraph, sub.DumpDir = nil, nil, ""
		sub.Decide = c.decider(byKind)
		sub.Executor = ExecutorGraph
		_, err := CompileContext(ctx, mod, outputNames, sub)
		if err == nil {
			err = prepareCandidate(ctx, sub.Out, mo, c, profile)
		}
		if ctx.Err() != nil {
			c.close()
			return false, ctx.Err()
		}
		if err != nil {
			c.close()
			fail(c, err)
			return false, nil
		}
		all = append(all, c)
		return true, nil
	}
	host := &candidate{name: partition.HostTarget, spans: map[string]string{}}
	hostOK, err := run(host, true)
	if err != nil {
		return nil, err
	}
	costs := map[string]map[string]float64{}
	var hostCost map[string]float64
	if hostOK {
		hostCost = nodeCosts(host)
		costs[partition.HostTarget] = hostCost
	}
	var refined []*candidate
	for _, t := range ext {
		only := &candidate{name: t.Kind.Name, spans: map[string]string{}, def: t}
		ok, err := run(only, true)
		if err != nil {
			return nil, err
		}
		if !ok || !hostOK {
			continue
		}
		tc := nodeCosts(only)
		costs[t.Kind.Name] = tc
		r := refine(only, t, hostCost, tc)
		if r == nil {
			continue
		}
		if ok, err := run(r, false); err != nil {
			return nil, err
		} else if ok {
			refined = append(refined, r)
		}
	}
	if len(ext) > 1 {
		greedy := &candidate{name: "greedy", spans: map[string]string{}, greedy: true}
		if _, err := run(greedy, false); err != nil {
			return nil, err
		}
		if comb := combine(refined, hostCost, costs); comb != nil {
			if _, err := run(comb, false); err != nil {
				return nil, err
			}
		}
	}
	// Time every candidate in the same rounds, so that a burst of load
	// on a shared machine slows them all alike instead of deciding the
	// choice.
	if err := timeCandidates(ctx, mo, all); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		kept := all[:0]
		for _, c := range all {
			if c.err != nil {
				c.close()
				fail(c, c.err)
				continue
			}
			kept = append(kept, c)
		}
		all = kept
	}
	if mo.Log != nil {
		for _, c := range all {
			fmt.Fprintf(mo.Log, "measured partitioning: %-24s %9.3f ms\n", c.name, c.median)
		}
	}
	if len(all) == 0 {
		// Nothing could be measured: partition greedily, and say so.
		res, err := CompileContext(ctx, mod, outputNames, cfg)
		if err == nil && cfg.Report != nil {
			cfg.Report.Warnings = append(cfg.Report.Warnings, append(failed, "measured partitioning measured nothing: partitioned greedily (the first target in the list that takes a call gets it)")...)
		}
		return res, err
	}
	best := fastest(all)
	m := &partition.Measured{Chosen: best.name, Threads: mo.Threads}
	for _, c := range all {
		m.Candidates = append(m.Candidates, partition.MeasuredCandidate{Name: c.name, MedianMs: c.median})
	}
	final := cfg
	final.Decide = best.decider(byKind)
	res, err := CompileContext(ctx, mod, outputNames, final)
	if err != nil {
		return nil, err
	}
	m.Seconds = time.Since(start).Seconds()
	if cfg.Report != nil {
		cfg.Report.Measured = m
		cfg.Report.AddCosts(costs)
		cfg.Report.Warnings = append(cfg.Report.Warnings, failed...)
		cfg.Report.Warnings = append(cfg.Report.Warnings, cfg.Report.SlowRegions()...)
	}
	if len(failed) > 0 {
		// A choice made without every candidate is not kept.
		return res, nil
	}
	def := ""
	if best.def != nil {
		def = best.def.Kind.Name
	}
	writeMeasuredCache(mo.CacheDir, key, &measuredCache{Chosen: best.name, Default: def, Spans: best.spans, Candidates: m.Candidates, Costs: costs})
	return res, nil
}

// tieMargin is how much slower than the fastest candidate a simpler one
// may be and still be chosen: differences below it are the measurement's
// noise on a shared machine, and a choice decided by noise flips from
// one compile to the next.
const tieMargin = 0.03

// fastest chooses among measured candidates, listed simplest first (the
// host, each target alone, refined, greedy, combined): the first whose
// median is within tieMargin of the lowest.
func fastest(cands []*candidate) *candidate {
	low := cands[0].median
	for _, c := range cands[1:] {
		low = min(low, c.median)
	}
	for _, c := range cands {
		if c.median <= low*(1+tieMargin) {
			return c
		}
	}
	return cands[0]
}

// prepareCandidate loads the artifact in dir into c (open until
// c.close), sets seeded random inputs, warms it up with 3 runs and, when
// profile, profiles mo.Runs runs for the per-node costs.
func prepareCandidate(ctx context.Context, dir string, mo MeasureOptions, c *candidate, profile bool) error {
	art, err := LoadArtifact(dir)
	if err != nil {
		return err
	}
	c.art = art
	if art.Exec == nil {
		return fmt.Errorf("not a graph-executor artifact")
	}
	art.Exec.UseThreads(mo.Threads)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, in := range art.Metadata.Inputs {
		dt, err := ir.ParseDType(in.DType)
		if err != nil {
			return err
		}
		if err := art.Exec.SetInput(in.Name, RandomInput(rng, dt, in.Shape)); err != nil {
			return err
		}
	}
	for range 3 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := art.Exec.Run(); err != nil {
			return err
		}
	}
	if profile {
		c.steps, err = art.Exec.Profile(mo.Runs)
		c.runs = mo.Runs
	}
	return err
}

// close releases the candidate's artifact.
func (c *candidate) close() {
	if c.art != nil {
		c.art.Close()
		c.art = nil
	}
}

// timeCandidates times mo.Runs rounds, each running every candidate once
// (in an order that rotates from round to round), and sets each
// candidate's median. Rounds go on past mo.Runs until they have taken
// minMeasureTime (at most maxRoundsFactor times mo.Runs): 15 rounds of a
// model that runs in half a millisecond (tiny_bert) last some 25 ms, one
// slow spell of a shared machine's. A candidate whose run fails gets the
// error in c.err and drops out of later rounds; the returned error says
// that some failed (or that ctx ended).
func timeCandidates(ctx context.Context, mo MeasureOptions, cands []*candidate) error {
	// Every candidate's runs on one OS thread (a run at one thread runs
	// on the caller's), so that none is timed on another core than the
	// others (a shared machine's vCPUs slow down independently).
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	times := make([][]float64, len(cands))
	var failed error
	start := time.Now()
	for r := 0; r < mo.Runs || (time.Since(start) < minMeasureTime && r < maxRoundsFactor*mo.Runs); r++ {
		for j := range cands {
			i := (j + r) % len(cands)
			c := cands[i]
			if c.err != nil {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			t0 := time.Now()
			if err := c.art.Exec.Run(); err != nil {
				c.err, failed = err, err
				continue
			}
			times[i] = append(times[i], float64(time.Since(t0).Nanoseconds())/1e6)
		}
	}
	for i, c := range cands {
		if c.err == nil {
			c.median = median(times[i])
		}
	}
	return failed
}

// minMeasureTime and maxRoundsFactor bound timeCandidates' rounds.
const (
	minMeasureTime  = 500 * time.Millisecond
	maxRoundsFactor = 40
)

// median is the median of v (not empty); it sorts v.
func median(v []float64) float64 {
	sort.Float64s(v)
	if len(v)%2 == 0 {
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return v[len(v)/2]
}

// RandomInput makes a seeded random value for a model input of dtype dt
// and shape: floats uniform in [-1, 1), integers (and booleans) 0 or 1,
// small enough to be valid indices. kiln bench, kiln tune and measured
// partitioning run models on such inputs.
func RandomInput(rng *rand.Rand, dt ir.DType, shape ir.Shape) *tensor.Tensor {
	t := tensor.New(dt, append(ir.Shape(nil), shape...))
	for i := 0; i < t.Len(); i++ {
		if dt.IsFloat() {
			t.SetFloat(i, rng.Float64()*2-1)
		} else {
			t.SetInt(i, int64(rng.IntN(2)))
		}
	}
	return t
}

// nodeCosts attributes a candidate's profile to ONNX nodes: milliseconds
// per run, each kernel's time (each inner step's, inside an external
// region) shared by the nodes it computes in proportion to their weight
// (sourceWeight: an elementwise tail fused into a convolution costs the
// convolution's kernel little, so it gets little of its time).
func nodeCosts(c *candidate) map[string]float64 {
	ops := map[string][]string{}
	for _, n := range c.rep.Nodes {
		ops[n.Node] = append(ops[n.Node], n.Op)
	}
	out := map[string]float64{}
	add := func(total time.Duration, sources []string) {
		if len(sources) == 0 {
			return
		}
		ms := float64(total.Nanoseconds()) / 1e6 / float64(max(c.runs, 1))
		sum := 0.0
		for _, s := range sources {
			sum += sourceWeight(ops[s])
		}
		for _, s := range sources {
			out[s] += ms * sourceWeight(ops[s]) / sum
		}
	}
	for _, st := range c.steps {
		if len(st.Inner) == 0 {
			add(st.Total, st.Sources)
			continue
		}
		for _, in := range st.Inner {
			add(in.Total, in.Sources)
		}
	}
	return out
}

// lightOps are operators that cost little next to a convolution or a
// matrix product they are fused with: elementwise arithmetic and
// activations, layout-free reshapes.
var lightOps = map[string]bool{
	"nn.relu": true, "clip": true, "add": true, "subtract": true, "multiply": true, "divide": true,
	"nn.bias_add": true, "sigmoid": true, "tanh": true, "exp": true, "erf": true, "sqrt": true,
	"negative": true, "maximum": true, "minimum": true, "power": true, "cast": true,
	"reshape": true, "squeeze": true, "expand_dims": true, "nn.batch_flatten": true,
}

// sourceWeight is an ONNX node's share weight in a kernel's time: 1 when
// one of its operators is heavy (or unknown), 0.1 when all are light.
func sourceWeight(ops []string) float64 {
	if len(ops) == 0 {
		return 1
	}
	for _, o := range ops {
		if !lightOps[o] {
			return 1
		}
	}
	return 0.1
}

// refine is the "T refined" candidate from the T-only candidate's report
// and the two cost tables (nil when it would not differ from the T-only
// or the host candidate): each group of report entries T took (a
// composite's operators, else one operator) stays on T or moves to the
// host, whichever costs less with the conversions at the boundaries it
// creates or removes, until no move gains (iterated conditional modes).
func refine(only *candidate, t *targets.Target, hostCost, tCost map[string]float64) *candidate {
	nodes := only.rep.Nodes
	kind := t.Kind.Name
	nAll, nT := map[string]int{}, map[string]int{}
	for _, n := range nodes {
		nAll[n.Node]++
		if n.Target == kind {
			nT[n.Node]++
		}
	}
	group := make([]int, len(nodes)) // -1: fixed on the host
	var members [][]int
	for i, n := range nodes {
		group[i] = -1
		if n.Target != kind {
			continue
		}
		if i > 0 && n.Composite != "" && nodes[i-1].Composite == n.Composite && nodes[i-1].Region == n.Region && group[i-1] >= 0 && consumesPrevious(nodes, i) {
			group[i] = group[i-1]
		} else {
			group[i] = len(members)
			members = append(members, nil)
		}
		members[group[i]] = append(members[group[i]], i)
	}
	if len(members) == 0 {
		return nil
	}
	users := make([][]int, len(nodes))
	for i, n := range nodes {
		for _, j := range n.Inputs {
			if j >= 0 && j < len(nodes) {
				users[j] = append(users[j], i)
			}
		}
	}
	onT := make([]bool, len(members))
	cost := func(g int, onTarget bool) float64 {
		sum := 0.0
		for _, i := range members[g] {
			s := nodes[i].Node
			if s == "" {
				continue
			}
			if onTarget {
				sum += tCost[s] / float64(max(nT[s], 1))
			} else {
				sum += hostCost[s] / float64(max(nAll[s], 1))
			}
		}
		return sum
	}
	side := func(i int) bool { return group[i] >= 0 && onT[group[i]] }
	penalty := func(bytes int64) float64 { return float64(bytes) / copyBandwidth * 1e3 }
	// boundary is the conversion cost of the edges of group g's members
	// with g on side onTarget.
	boundary := func(g int, onTarget bool) float64 {
		sum := 0.0
		for _, i := range members[g] {
			for _, j := range nodes[i].Inputs {
				if j >= 0 && j < len(nodes) && group[j] != g && side(j) != onTarget {
					sum += penalty(nodes[j].Bytes)
				}
			}
			for _, u := range users[i] {
				if group[u] != g && side(u) != onTarget {
					sum += penalty(nodes[i].Bytes)
				}
			}
		}
		return sum
	}
	for g := range members {
		onT[g] = cost(g, true) <= cost(g, false)
	}
	for iter := 0; iter < 50; iter++ {
		changed := false
		for g := range members {
			here := cost(g, onT[g]) + boundary(g, onT[g])
			there := cost(g, !onT[g]) + boundary(g, !onT[g])
			if there < here-1e-6 {
				onT[g] = !onT[g]
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	r := &candidate{name: kind + " refined", spans: map[string]string{}, def: t}
	moved, kept := 0, 0
	for i, n := range nodes {
		if group[i] < 0 || n.Node == "" {
			continue
		}
		if onT[group[i]] {
			kept++
			if r.spans[n.Node] != partition.HostTarget {
				r.spans[n.Node] = kind
			}
		} else {
			moved++
			r.spans[n.Node] = partition.HostTarget
		}
	}
	if moved == 0 || kept == 0 {
		return nil
	}
	return r
}

// consumesPrevious reports whether report entry i reads entry i-1 (the
// operators of one composite call form a chain; the first operator of
// the next call reads neither).
func consumesPrevious(nodes []partition.NodeReport, i int) bool {
	for _, j := range nodes[i].Inputs {
		if j == i-1 {
			return true
		}
	}
	return false
}

// combine is the "combined" candidate: each node the refined candidates
// keep on a target goes to the one that saves the most over the host (nil
// when there is no choice to make).
func combine(refined []*candidate, hostCost map[string]float64, costs map[string]map[string]float64) *candidate {
	if len(refined) < 2 {
		return nil
	}
	c := &candidate{name: "combined", spans: map[string]string{}, greedy: false}
	gain := map[string]float64{}
	for _, r := range refined {
		for s, k := range r.spans {
			if k == partition.HostTarget {
				if _, ok := c.spans[s]; !ok {
					c.spans[s] = partition.HostTarget
				}
				continue
			}
			g := hostCost[s] - costs[k][s]
			if cur, ok := gain[s]; !ok || g > cur {
				gain[s] = g
				c.spans[s] = k
			}
		}
	}
	c.def = refined[0].def
	return c
}

// measuredKey identifies a measured choice: the kiln build that measured
// it, the model's graph, the targets and the processor they resolve to,
// the pass configuration, the thread count and oneDNN's ISA limit.
func measuredKey(mod *graph.Module, cfg Config, mo MeasureOptions) string {
	h := sha256.New()
	fmt.Fprintf(h, "kiln %s measured-partition v1\nbuild %s\n", Version, executableID())
	for _, t := range cfg.Targets {
		fmt.Fprintf(h, "target %s\n", t)
	}
	fmt.Fprintf(h, "host %s\nprocessor %+v\n", cfg.Host, *cfg.Host.Processor())
	if cfg.PassConfig != nil {
		fmt.Fprintf(h, "passes %+v\n", *cfg.PassConfig)
	}
	fmt.Fprintf(h, "threads %d runs %d isa %q\n", mo.Threads, mo.Runs, os.Getenv("ONEDNN_MAX_CPU_ISA"))
	io.WriteString(h, mod.String())
	return hex.EncodeToString(h.Sum(nil))
}

func measuredCachePath(dir, key string) string {
	return filepath.Join(dir, "partition", key+".json")
}

// readMeasuredCache reads a kept choice; anything missing or malformed is
// a miss.
func readMeasuredCache(dir, key string) (*measuredCache, bool) {
	if dir == "" {
		return nil, false
	}
	data, err := os.ReadFile(measuredCachePath(dir, key))
	if err != nil {
		return nil, false
	}
	var c measuredCache
	if json.Unmarshal(data, &c) != nil || c.Chosen == "" || c.Spans == nil {
		return nil, false
	}
	return &c, true
}

// writeMeasuredCache keeps a choice (best effort: a cache that cannot be
// written only costs a measurement next time). The file is written
// beside its place and renamed into it.
func writeMeasuredCache(dir, key string, c *measuredCache) {
	if dir == "" {
		return
	}
	data, err := json.Marshal(c)
	if err != nil {
		return
	}
	path := measuredCachePath(dir, key)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+key+".*")
	if err != nil {
		return
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		os.Remove(f.Name())
	}
}
