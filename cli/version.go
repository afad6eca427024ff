package cli

import (
	"fmt"
	"io"
	goruntime "runtime"
	"runtime/debug"
	"strings"

	"github.com/kiln-dev/kiln/backend/dnnl"
	"github.com/kiln-dev/kiln/driver"
	krt "github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/targets"
)

// runVersion prints what this kiln is: its version and commit, the Go
// version and platform, whether it can run artifacts (cgo), the target
// kinds registered (backends), and this machine's processor as the `c`
// target resolves it.
func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version", "", stderr)
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		fs.Usage()
		return exitUsage
	}
	commit := "commit unknown: built without VCS stamping"
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			commit = "commit " + rev[:min(len(rev), 12)]
			if modified == "true" {
				commit += " (modified)"
			}
		}
	}
	fmt.Fprintf(stdout, "kiln %s (%s), %s %s/%s\n", driver.Version, commit, goruntime.Version(), goruntime.GOOS, goruntime.GOARCH)
	if krt.CanRun {
		fmt.Fprintln(stdout, "runs artifacts: yes (built with cgo)")
	} else {
		fmt.Fprintln(stdout, "runs artifacts: no (built without cgo: compiles and runs the reference engine only)")
	}
	var kinds []string
	for _, k := range targets.Default.Kinds() {
		kinds = append(kinds, k.Name)
	}
	fmt.Fprintf(stdout, "target kinds: %s\n", strings.Join(kinds, ", "))
	if !dnnl.Available {
		fmt.Fprintf(stdout, "oneDNN: unavailable, so no dnnl target (%v)\n", dnnl.Unavailable())
	}
	host, err := targets.New(targets.C, nil)
	if err != nil {
		return fail(stderr, "version", err)
	}
	fmt.Fprintf(stdout, "this machine: %s\n", host.Processor())
	return exitOK
}
