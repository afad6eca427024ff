// Package cli implements the kiln command line: compile, run, bench,
// inspect, targets and test-onnx. cmd/kiln is a thin wrapper around Main,
// so a vendor can build its own kiln binary (with its targets registered
// by importing its packages) by calling Main from its own main package.
//
// Exit status: 0 on success, 1 when the command ran and failed (a bad
// input, a failed test), 2 for usage errors.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/kiln-dev/kiln/internal/budget"

	"github.com/kiln-dev/kiln/codegen/c"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = []command{
	{"compile", "compile a model for targets into a runnable artifact", runCompile},
	{"run", "run a model on input files and print or save its outputs", runRun},
	{"bench", "measure a compiled model's latency", runBench},
	{"quantize", "calibrate a float ONNX model and write it quantized (QDQ, int8)", runQuantize},
	{"tune", "measure schedule candidates of a model's workloads and write tuning records", runTune},
	{"inspect", "print a model's graph IR (text, json, dot or html)", runInspect},
	{"targets", "list the registered targets", runTargets},
	{"test-onnx", "run ONNX backend-test directories and compare outputs", runTestONNX},
	{"export", "export an AOT artifact as a standalone C project", runExport},
	{"new-backend", "scaffold a UMA accelerator backend package", runNewBackend},
	{"version", "print kiln's version, commit, Go version, target kinds and this machine's processor", runVersion},
}

// Main runs the kiln command line on args (without the program name) and
// returns the process exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	// --max-memory holds for this command only.
	defer budget.SetLimit(budget.Limit())
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "kiln: unknown command %q\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: kiln COMMAND [arguments]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'kiln COMMAND -h' for a command's flags.")
}

// newFlags makes a flag set that reports errors to stderr.
func newFlags(name, args string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kiln "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(memoryFlag{}, "max-memory", fmt.Sprintf("the memory budget: no tensor or buffer larger than `SIZE` (bytes, or 512MiB, 4GiB) is allocated; every size from a model or input is checked against it first (default half the available memory, now %s)", budget.Format(budget.Default())))
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: kiln %s %s\n\nflags:\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parseArgs parses flags that may come before, between or after the
// positional arguments (`kiln inspect model.onnx --format json`); after
// "--" everything is positional. It returns the positional arguments, or
// an exit status when parsing ended the command (-h or a bad flag).
func parseArgs(fs *flag.FlagSet, args []string) ([]string, int, bool) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK, false
			}
			return nil, exitUsage, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, 0, true
		}
		// flag.Parse stops at "--" (consuming it) or at the first positional.
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), 0, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// memoryFlag sets the process's memory budget (internal/budget).
type memoryFlag struct{}

func (memoryFlag) String() string { return "" }

// Set parses a size and makes it the budget.
func (memoryFlag) Set(s string) error {
	n, err := budget.Parse(s)
	if err != nil {
		return err
	}
	budget.SetLimit(n)
	return nil
}

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, " ") }

// Set appends one value.
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// fail prints a one-line error and returns exitFail. A C compiler failure
// is followed by the compiler's diagnostics (at most compilerLines lines),
// indented.
func fail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "kiln %s: %s\n", cmd, oneLine(err.Error()))
	printCompilerOutput(stderr, err)
	return exitFail
}

// printCompilerOutput prints the C compiler's diagnostics when err holds
// them, at most compilerLines lines, indented.
func printCompilerOutput(stderr io.Writer, err error) {
	var ce *c.CompileError
	if errors.As(err, &ce) && ce.Output != "" {
		lines := strings.Split(ce.Output, "\n")
		if len(lines) > compilerLines {
			lines = append(lines[:compilerLines], fmt.Sprintf("... (%d more lines)", len(lines)-compilerLines))
		}
		for _, l := range lines {
			fmt.Fprintf(stderr, "    %s\n", l)
		}
	}
}

// compilerLines bounds the C compiler diagnostics fail prints.
const compilerLines = 40

// oneLine keeps the first line of a message (the importer appends stacks
// to internal errors).
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s
}

// parseAssignments splits NAME=VALUE flag values into a map, rejecting
// duplicates and empty names.
func parseAssignments(flagName string, vals []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range vals {
		name, val, ok := strings.Cut(v, "=")
		if !ok || name == "" || val == "" {
			return nil, fmt.Errorf("--%s %q: want NAME=VALUE", flagName, v)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--%s given twice for %q", flagName, name)
		}
		out[name] = val
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
