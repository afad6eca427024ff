package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/kiln-dev/kiln/targets"
)

// defaultTargets is the -t value of run, bench and test-onnx when none is
// given.
const defaultTargets = "c"

// targetsOrDefault is the -t value given, or defaultTargets when none was.
func targetsOrDefault(t string) string {
	if t == "" {
		return defaultTargets
	}
	return t
}

// parseTargetList reads a -t value, a comma-separated list of target
// strings (host last by convention), against targets.Default. The host (the
// last CPU target that can host) must be of kind "c", the only host code
// generator so far.
func parseTargetList(s string) (*targets.TargetList, error) {
	return parseTargetListIn(targets.Default, s)
}

// parseTargetListIn is parseTargetList against the kinds and tags of r.
func parseTargetListIn(r *targets.Registry, s string) (*targets.TargetList, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("-t: no target given (e.g. -t c)")
	}
	l, err := r.ParseList(s)
	if err != nil {
		return nil, fmt.Errorf("-t: %w", err)
	}
	if l.Host.Kind != targets.C {
		return nil, fmt.Errorf("-t %q: the host target must be of kind \"c\" (kiln generates host code as C), got %q", s, l.Host.Kind.Name)
	}
	return l, nil
}

// TargetsJSON is what `kiln targets --json` prints.
type TargetsJSON struct {
	Kinds []targets.KindInfo `json:"kinds"`
	Tags  []targets.TagInfo  `json:"tags"`
	// Processors are the resolved processors: of the -t targets when given,
	// else of this machine (-mcpu=native).
	Processors []ProcessorJSON `json:"processors"`
	// CPUs lists the -mcpu values kiln knows (with --cpus).
	CPUs []CPUJSON `json:"cpus,omitempty"`
}

// ProcessorJSON is a target's resolved processor (targets.Processor).
type ProcessorJSON struct {
	Target     string   `json:"target"`
	Name       string   `json:"name"`
	Model      string   `json:"model"`
	Arch       string   `json:"arch"`
	ISA        string   `json:"isa"`
	Features   []string `json:"features"`
	VectorBits int      `json:"vector_bits"`
	VectorRegs int      `json:"vector_registers"`
	L1D        int64    `json:"l1d_bytes"`
	L2         int64    `json:"l2_bytes"`
	L3         int64    `json:"l3_bytes"`
	// HalfRate512 is true when 512-bit operations run as two 256-bit halves.
	HalfRate512 bool `json:"half_rate_512"`
	// FastL2 is true when L2 feeds full-width AVX-512 kernels at their
	// multiply-add rate (targets.Processor.FastL2).
	FastL2 bool     `json:"fast_l2"`
	Native bool     `json:"native"`
	CFlags []string `json:"cflags"`
}

// CPUJSON is one row of the known-CPU table.
type CPUJSON struct {
	Name string `json:"name"`
	Doc  string `json:"doc"`
}

func processorJSON(t *targets.Target) ProcessorJSON {
	p := t.Processor()
	return ProcessorJSON{Target: t.String(), Name: p.Name, Model: p.Model, Arch: string(p.Arch), ISA: p.ISA(),
		Features: p.Features, VectorBits: p.VectorBits, VectorRegs: p.VectorRegs, L1D: p.L1D, L2: p.L2, L3: p.L3,
		HalfRate512: p.HalfRate512, FastL2: p.FastL2, Native: p.Native, CFlags: p.CFlags()}
}

func runTargets(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("targets", "[--json] [--cpus] [-t \"TARGETS\"]", stderr)
	asJSON := fs.Bool("json", false, "print JSON: {\"kinds\": [...], \"tags\": [...], \"processors\": [...]}")
	cpus := fs.Bool("cpus", false, "also list the CPUs -mcpu accepts")
	tgts := fs.String("t", "", "show the resolved processor of these targets (default: c -mcpu=native, this machine)")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		fs.Usage()
		return exitUsage
	}
	list := "c -mcpu=native"
	if *tgts != "" {
		list = *tgts
	}
	l, err := parseTargetList(list)
	if err != nil {
		return fail(stderr, "targets", err)
	}
	out := TargetsJSON{Kinds: targets.Describe(targets.Default), Tags: targets.DescribeTags(targets.Default)}
	for _, t := range l.Targets {
		if t.Kind.Option("mcpu") != nil {
			out.Processors = append(out.Processors, processorJSON(t))
		}
	}
	if *cpus {
		for _, c := range targets.KnownCPUs() {
			out.CPUs = append(out.CPUs, CPUJSON{Name: c[0], Doc: c[1]})
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return fail(stderr, "targets", err)
		}
		return exitOK
	}
	if *tgts == "" {
		if err := targets.WriteText(stdout, out.Kinds, out.Tags); err != nil {
			return fail(stderr, "targets", err)
		}
		fmt.Fprintln(stdout)
	}
	var b strings.Builder
	for _, p := range out.Processors {
		fmt.Fprintf(&b, "processor of %s:\n", p.Target)
		fmt.Fprintf(&b, "    %s: %s, %s, %d-bit vectors, %d vector registers\n", p.Name, p.Model, p.Arch, p.VectorBits, p.VectorRegs)
		fmt.Fprintf(&b, "    isa %s; features %s\n", p.ISA, strings.Join(p.Features, " "))
		if p.HalfRate512 && p.ISA == "avx512" {
			b.WriteString("    512-bit operations run as two 256-bit halves (AVX2's multiply-add throughput)\n")
		}
		if p.FastL2 && p.ISA == "avx512" {
			b.WriteString("    L2 feeds full-width AVX-512 kernels at their multiply-add rate (convolution weights streamed from L2)\n")
		}
		fmt.Fprintf(&b, "    caches: L1d %s, L2 %s, L3 %s\n", cacheSize(p.L1D), cacheSize(p.L2), cacheSize(p.L3))
		fmt.Fprintf(&b, "    C flags: %s\n", strings.Join(p.CFlags, " "))
	}
	if *cpus {
		b.WriteString("\nCPUs for -mcpu (besides native); -mattr=+f,-f adds or removes features:\n")
		for _, c := range out.CPUs {
			fmt.Fprintf(&b, "    %-16s %s\n", c.Name, c.Doc)
		}
		fmt.Fprintf(&b, "features: %s\n", strings.Join(targets.KnownFeatures(), " "))
	}
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return fail(stderr, "targets", err)
	}
	return exitOK
}

// cacheSize prints a cache size ("unknown" for 0).
func cacheSize(n int64) string {
	switch {
	case n == 0:
		return "unknown"
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
