package cli

import (
	"flag"
	"fmt"
	"io"

	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/internal/escape"
	"github.com/kiln-dev/kiln/partition"
)

// Partitioning modes of --partition.
const (
	partitionMeasured = "measured"
	partitionGreedy   = "greedy"
)

// partitionFlags are --partition and --partition-threads (compile, run,
// bench).
type partitionFlags struct {
	mode    string
	threads int
}

func (p *partitionFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.mode, "partition", partitionMeasured, "how external targets in -t get their calls: \"measured\" (compile and run candidates on this machine, keep the fastest; remembered in kiln's cache) or \"greedy\" (the first target in -t that takes a call gets it)")
	fs.IntVar(&p.threads, "partition-threads", 0, "with --partition measured: the thread count of the measured runs (default: bench's and run's --threads, 1 for compile)")
}

// check validates the flags.
func (p *partitionFlags) check() error {
	if p.mode != partitionMeasured && p.mode != partitionGreedy {
		return fmt.Errorf("--partition %q: want measured or greedy", p.mode)
	}
	if p.threads < 0 {
		return fmt.Errorf("--partition-threads %d: want at least 1", p.threads)
	}
	return nil
}

// forThreads returns the flags with the measured runs' thread count
// defaulting to threads (the command's own --threads).
func (p partitionFlags) forThreads(threads int) *partitionFlags {
	if p.threads == 0 {
		p.threads = threads
	}
	return &p
}

// measure returns the measurement options for a compile of place, and
// whether to measure: with --partition measured, external targets in -t,
// no --require-offload (which asks for every call on the external
// targets, however fast) and a kiln that can run what it compiles.
func (p *partitionFlags) measure(place *placement, requireOffload bool) (driver.MeasureOptions, bool) {
	if p == nil || p.mode != partitionMeasured || requireOffload || place == nil || !driver.CanMeasure(place.list.Targets) {
		return driver.MeasureOptions{}, false
	}
	return driver.MeasureOptions{Threads: max(p.threads, 1)}, true
}

// explainNode prints why the calls of ONNX node name landed where they
// did: for each of its report entries the target (and region,
// composite), the reasons, and the measured times. A name the report
// does not know is an error that says so.
func explainNode(w io.Writer, rep *partition.Report, name string) error {
	found := false
	for _, n := range rep.Nodes {
		if n.Node != name {
			continue
		}
		found = true
		fmt.Fprintf(w, "%q (%s): %s\n", n.Node, n.Op, n.Where())
		if c := n.Costs(); c != "" {
			fmt.Fprintf(w, "  measured: %s\n", c)
		}
		for _, why := range n.Why {
			fmt.Fprintf(w, "  because %s\n", escape.Printable(why))
		}
		if n.Target != partition.HostTarget && len(n.Why) == 0 {
			if rep.Measured != nil {
				fmt.Fprintf(w, "  because the measured candidate %q, the fastest, puts it there\n", rep.Measured.Chosen)
			} else {
				fmt.Fprintf(w, "  because %s is the first target in -t that takes it (greedy partitioning)\n", n.Target)
			}
		}
	}
	if !found {
		if rep.Counts == nil {
			return fmt.Errorf("--explain %q: no partition report (no external target in -t)", name)
		}
		return fmt.Errorf("--explain %q: no such ONNX node among the model's operators", name)
	}
	return nil
}
