package runtime

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// CoreSet is a set of CPU cores (logical CPU numbers as Linux counts
// them), sorted and without repeats.
type CoreSet []int

// String prints the set compactly: "0-3,6".
func (c CoreSet) String() string {
	var parts []string
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(c[i]))
		} else {
			parts = append(parts, strconv.Itoa(c[i])+"-"+strconv.Itoa(c[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// maxCore bounds core numbers (the kernel's CPU_SETSIZE).
const maxCore = 1024

// ParseCoreSet reads "0-3", "4,6", "0-1,4": core numbers and inclusive
// ranges, comma-separated.
func ParseCoreSet(s string) (CoreSet, error) {
	var out CoreSet
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		lo, hi, isRange := strings.Cut(item, "-")
		a, errA := strconv.Atoi(lo)
		b := a
		var errB error
		if isRange {
			b, errB = strconv.Atoi(hi)
		}
		if item == "" || errA != nil || errB != nil || a < 0 || b < a || b >= maxCore {
			return nil, fmt.Errorf("core set %q: %q is not a core number or range lo-hi (cores 0 to %d)", s, item, maxCore-1)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	sort.Ints(out)
	return slices.Compact(out), nil
}

// DeviceCores maps CPU devices to the cores their kernels run on.
type DeviceCores map[Device]CoreSet

// ParseDeviceCores reads a --devices value, "cpu:0=0-3,cpu:1=4-7": each
// device, '=', its core set; a comma followed by a device starts the next
// one. A device given twice, a non-CPU device and a core in two devices'
// sets are errors.
func ParseDeviceCores(s string) (DeviceCores, error) {
	out := DeviceCores{}
	owner := map[int]Device{}
	var items []string
	for _, item := range strings.Split(s, ",") {
		if strings.Contains(item, "=") || len(items) == 0 {
			items = append(items, item)
		} else {
			items[len(items)-1] += "," + item
		}
	}
	for _, item := range items {
		devText, coreText, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("devices %q: %q: want DEVICE=CORES (cpu:1=4-7)", s, item)
		}
		d, err := ParseDevice(devText)
		if err != nil {
			return nil, fmt.Errorf("devices %q: %w", s, err)
		}
		if d.Type != CPU {
			return nil, fmt.Errorf("devices %q: %s: only CPU devices run on cores", s, d)
		}
		if _, dup := out[d]; dup {
			return nil, fmt.Errorf("devices %q: %s is given twice", s, d)
		}
		cores, err := ParseCoreSet(coreText)
		if err != nil {
			return nil, fmt.Errorf("devices %q: %s: %w", s, d, err)
		}
		for _, c := range cores {
			if o, taken := owner[c]; taken {
				return nil, fmt.Errorf("devices %q: core %d is in both %s and %s", s, c, o, d)
			}
			owner[c] = d
		}
		out[d] = cores
	}
	return out, nil
}

// String prints the map in ParseDeviceCores syntax, devices in order.
func (dc DeviceCores) String() string {
	devs := make([]Device, 0, len(dc))
	for d := range dc {
		devs = append(devs, d)
	}
	sort.Slice(devs, func(i, j int) bool {
		if devs[i].Type != devs[j].Type {
			return devs[i].Type < devs[j].Type
		}
		return devs[i].ID < devs[j].ID
	})
	parts := make([]string, len(devs))
	for i, d := range devs {
		parts[i] = d.String() + "=" + dc[d].String()
	}
	return strings.Join(parts, ",")
}

// ErrNoAffinity is returned where threads cannot be pinned to cores (a
// build without cgo, or an OS without sched_setaffinity).
var ErrNoAffinity = errors.New("pinning threads to cores is not supported in this build")

// AvailableCores lists the cores this process may run on (its affinity
// mask), the cores SetDeviceCores accepts.
func AvailableCores() (CoreSet, error) { return allowedCores() }

// coreWorker runs kernels on an OS thread of its own: an executor's home
// thread (multi-threaded runs, see GraphExecutor.run), or one device's
// kernels on a thread pinned to the device's cores, whose pin the pool (or OpenMP)
// threads the kernels start inherit.
type coreWorker struct {
	cores CoreSet
	jobs  chan func() error
	done  chan error
}

// startCoreWorker starts the pinned thread and waits until it is pinned
// (with no cores, a thread of its own that is not pinned).
func startCoreWorker(cores CoreSet) (*coreWorker, error) {
	w := &coreWorker{cores: cores, jobs: make(chan func() error), done: make(chan error)}
	ready := make(chan error)
	go func() {
		// The thread stays locked to this goroutine until it returns,
		// and then exits with it: a pinned thread never goes back to
		// Go's pool.
		goruntime.LockOSThread()
		if len(cores) > 0 {
			if err := pinThread(cores); err != nil {
				ready <- err
				return
			}
		}
		ready <- nil
		// Both sides of a handoff sleep while they wait: polling was
		// measured slower (the unpinned caller's polling thread shares
		// a core with the pinned worker; a polling goroutine holds one
		// of Go's processors, and lenet's runs at 1 thread took 0.2 ms
		// instead of 0.04).
		for job := range w.jobs {
			w.done <- runJob(job)
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return w, nil
}

// runJob runs job, turning a panic (a Go kernel's bug) into an error: on
// the worker's thread nobody above could recover it.
func runJob(job func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error on a kernel thread: %v", r)
		}
	}()
	return job()
}

// run runs job on the worker's thread and returns its error.
func (w *coreWorker) run(job func() error) error {
	w.jobs <- job
	return <-w.done
}

// stop ends the worker's thread. A thread that ran parallel loops takes
// its team of workers (kiln's pool's, or OpenMP's) with it.
func (w *coreWorker) stop() { close(w.jobs) }

// SetDeviceCores runs the kernels of each listed CPU device (and the
// copies into it) on a thread pinned to its cores (the pool or OpenMP threads of those kernels inherit the
// pin, and without a thread count set each kernel uses as many threads as
// its device has cores); devices not listed run on the calling thread as
// before. Every device must be one the program uses, and every core one
// this process may run on. A nil or empty map removes the pinning.
func (e *GraphExecutor) SetDeviceCores(dc DeviceCores) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errClosed
	}
	used := e.g.devices()
	allowed, err := allowedCores()
	if err != nil {
		return err
	}
	for d, cores := range dc {
		if !containsDevice(used, d) {
			return fmt.Errorf("devices: %s is not a device of this program (it uses %v)", d, used)
		}
		if d.Type != CPU {
			return fmt.Errorf("devices: %s: only CPU devices run on cores", d)
		}
		if len(cores) == 0 {
			return fmt.Errorf("devices: %s: no cores", d)
		}
		for _, c := range cores {
			if !slices.Contains(allowed, c) {
				return fmt.Errorf("devices: %s: core %d is not available to this process (cores %s)", d, c, allowed)
			}
		}
	}
	workers := map[Device]*coreWorker{}
	for d, cores := range dc {
		w, err := startCoreWorker(slices.Clone(cores))
		if err != nil {
			for _, w := range workers {
				w.stop()
			}
			return fmt.Errorf("devices: %s: %w", d, err)
		}
		workers[d] = w
	}
	e.stopWorkers()
	e.workers = workers
	if len(workers) > 0 {
		list := make([]*coreWorker, 0, len(workers))
		for _, w := range workers {
			list = append(list, w)
		}
		e.workersCleanup = goruntime.AddCleanup(e, func(ws []*coreWorker) {
			for _, w := range ws {
				w.stop()
			}
		}, list)
	}
	for i := range e.steps {
		e.steps[i].worker = workers[e.stepDevice(i)]
	}
	return nil
}

// stopWorkers ends the pinned threads, if any.
func (e *GraphExecutor) stopWorkers() {
	e.workersCleanup.Stop()
	for _, w := range e.workers {
		w.stop()
	}
	e.workers = nil
	for i := range e.steps {
		e.steps[i].worker = nil
	}
}

// devices lists the devices of the program's entries, in order of first
// use.
func (g *graph) devices() []Device {
	var out []Device
	for _, en := range g.entries {
		if !containsDevice(out, en.dev) {
			out = append(out, en.dev)
		}
	}
	return out
}
