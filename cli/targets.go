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
}

func runTargets(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("targets", "[--json]", stderr)
	asJSON := fs.Bool("json", false, "print JSON: {\"kinds\": [...], \"tags\": [...]}")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		fs.Usage()
		return exitUsage
	}
	kinds, tags := targets.Describe(targets.Default), targets.DescribeTags(targets.Default)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(TargetsJSON{Kinds: kinds, Tags: tags}); err != nil {
			return fail(stderr, "targets", err)
		}
		return exitOK
	}
	if err := targets.WriteText(stdout, kinds, tags); err != nil {
		return fail(stderr, "targets", err)
	}
	return exitOK
}
