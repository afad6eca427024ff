package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	krt "github.com/kiln-dev/kiln/runtime"
)

// traceRuns is how many runs `kiln bench --trace` records.
const traceRuns = 3

// kernelTimes turns step times into per-run medians and means with their
// share of the total, slowest median first (a few slow runs of a noisy
// machine move a mean, not the median), at most n of them; an external
// region's inner steps (means only) are kept whole, slowest first, with
// their share of the total too.
func kernelTimes(steps []krt.StepTime, runs, n int) []KernelTime {
	var total time.Duration
	for _, s := range steps {
		total += s.Total
	}
	conv := func(s krt.StepTime) KernelTime {
		k := KernelTime{Node: s.Node, Func: s.Func, Sources: s.Sources, MedianMs: float64(s.Median.Nanoseconds()) / 1e6, MeanMs: float64(s.Total.Nanoseconds()) / 1e6 / float64(max(runs, 1))}
		if s.Device != krt.CPUDevice(0) || len(s.Cores) > 0 {
			// Rows say where they ran when that is not the default.
			k.Device, k.Cores = s.Device.String(), s.Cores.String()
		}
		if total > 0 {
			k.Share = float64(s.Total) / float64(total)
		}
		return k
	}
	out := make([]KernelTime, len(steps))
	for i, s := range steps {
		out[i] = conv(s)
		for _, in := range s.Inner {
			out[i].Inner = append(out[i].Inner, conv(in))
		}
		sort.SliceStable(out[i].Inner, func(a, b int) bool { return out[i].Inner[a].MeanMs > out[i].Inner[b].MeanMs })
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].MedianMs != out[j].MedianMs {
			return out[i].MedianMs > out[j].MedianMs
		}
		return out[i].MeanMs > out[j].MeanMs
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// printKernelTimes prints the profile rows, an external region's inner
// steps (at most n) indented under it, each with the model nodes it
// computes.
func printKernelTimes(w io.Writer, ks []KernelTime, n int) {
	for _, k := range ks {
		name := k.Func
		if name == "" {
			name = k.Node
		}
		fmt.Fprintf(w, "  %6.2f%%  %9.4f ms  (mean %.4f)  %s%s%s\n", 100*k.Share, k.MedianMs, k.MeanMs, name, sourcesNote(k.Sources), placeNote(k))
		for i, in := range k.Inner {
			if i == n {
				fmt.Fprintf(w, "      ... %d more inside %s\n", len(k.Inner)-n, name)
				break
			}
			fmt.Fprintf(w, "    %6.2f%%  %9.4f ms  %s%s\n", 100*in.Share, in.MeanMs, in.Node, sourcesNote(in.Sources))
		}
	}
}

// sourcesNote names the model nodes of a profile row: the first, and how
// many more. The names come from the model: %q keeps control characters
// out of the terminal.
func sourcesNote(src []string) string {
	switch len(src) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("  [%q]", src[0])
	}
	return fmt.Sprintf("  [%q +%d]", src[0], len(src)-1)
}

// chromeEvent is one complete event ("ph": "X") of the Chrome trace
// format (times in microseconds).
type chromeEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	Dur  float64        `json:"dur"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// writeTrace writes evs as a Chrome trace to path: kernel calls on one
// track, the kernels inside external regions on a second, each with its
// function, run and model nodes as arguments. The file is written whole
// or not at all (a temporary file renamed into place).
func writeTrace(path string, evs []krt.TraceEvent) error {
	out := struct {
		TraceEvents     []chromeEvent `json:"traceEvents"`
		DisplayTimeUnit string        `json:"displayTimeUnit"`
	}{DisplayTimeUnit: "ms"}
	for _, ev := range evs {
		ce := chromeEvent{Name: ev.Name, Cat: "kernel", Ph: "X", TS: float64(ev.Start.Nanoseconds()) / 1e3, Dur: float64(ev.Dur.Nanoseconds()) / 1e3, PID: 1, TID: 1 + ev.Depth, Args: map[string]any{"run": ev.Run}}
		if ev.Depth > 0 {
			ce.Cat = "inner"
		}
		if ev.Func != "" {
			ce.Args["func"] = ev.Func
		}
		if len(ev.Sources) > 0 {
			ce.Args["sources"] = ev.Sources
		}
		if ev.Depth == 0 {
			ce.Args["device"] = ev.Device.String()
		}
		if len(ev.Cores) > 0 {
			ce.Args["cores"] = ev.Cores.String()
		}
		out.TraceEvents = append(out.TraceEvents, ce)
	}
	if err := writeFileAtomic(path, func(w io.Writer) error { return json.NewEncoder(w).Encode(out) }); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}

// placeNote says where a profile row ran when that is not the default:
// " on cpu:1 (cores 4-7)".
func placeNote(k KernelTime) string {
	switch {
	case k.Cores != "":
		return " on " + k.Device + " (cores " + k.Cores + ")"
	case k.Device != "":
		return " on " + k.Device
	}
	return ""
}
