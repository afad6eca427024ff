package kiln

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"

	"github.com/kiln-dev/kiln/driver"
	krt "github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/tensor"
)

// SessionOptions configures a session. The zero value runs one inference
// per processor at a time, each on one thread.
type SessionOptions struct {
	// Concurrency is the most inferences the session runs at the same
	// time (0: one per processor this process may use, GOMAXPROCS).
	// Each needs memory for the model's activations, made the first time
	// it is used; the weights are shared.
	Concurrency int
	// Threads is the thread count of each inference (0: 1 when
	// Concurrency allows several inferences at once, else every
	// processor).
	Threads int
	// Devices pins each CPU device of a multi-device artifact to cores,
	// as `kiln run --devices` does: "cpu:0=0-3,cpu:1=4-7". Empty: no
	// pinning.
	Devices string
}

// Session runs an artifact. Run is safe for concurrent use by many
// goroutines; see SessionOptions for how many run at once.
type Session struct {
	art     *Artifact
	opts    SessionOptions
	devices krt.DeviceCores
	slots   chan *slot // idle executors; nil entries are not made yet

	mu     sync.Mutex
	closed bool
	made   []*krt.GraphExecutor
}

// slot is one inference's executor (nil for an AOT artifact or until
// first use).
type slot struct {
	exec *krt.GraphExecutor
}

// NewSession returns a session over the artifact.
func (a *Artifact) NewSession(opts SessionOptions) (*Session, error) {
	if opts.Concurrency < 0 || opts.Threads < 0 {
		return nil, fmt.Errorf("kiln: session: negative Concurrency or Threads")
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = goruntime.GOMAXPROCS(0)
	}
	if opts.Threads == 0 {
		opts.Threads = 1
		if opts.Concurrency == 1 {
			opts.Threads = goruntime.GOMAXPROCS(0)
		}
	}
	s := &Session{art: a, opts: opts, slots: make(chan *slot, opts.Concurrency)}
	if opts.Devices != "" {
		dc, err := krt.ParseDeviceCores(opts.Devices)
		if err != nil {
			return nil, fmt.Errorf("kiln: session: %w", err)
		}
		s.devices = dc
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, errClosed
	}
	// One executor is made now, so that a configuration error (devices
	// the program does not use) shows here rather than at the first Run.
	first, err := s.newSlot()
	if err != nil {
		return nil, err
	}
	s.slots <- first
	for i := 1; i < opts.Concurrency; i++ {
		s.slots <- &slot{}
	}
	a.sessions++
	return s, nil
}

// newSlot makes an inference's executor: a fork of the artifact's, which
// shares the weights.
func (s *Session) newSlot() (*slot, error) {
	exec := s.art.art.Exec
	if exec == nil {
		return &slot{}, nil // AOT: each run is a process of its own
	}
	names := make([]string, len(s.art.inputs))
	for i, in := range s.art.inputs {
		names[i] = in.Name
	}
	f, err := exec.Fork(names)
	if err != nil {
		return nil, fmt.Errorf("kiln: session: %w", err)
	}
	f.SetThreads(s.opts.Threads)
	if s.devices != nil {
		if err := f.SetDeviceCores(s.devices); err != nil {
			f.Close()
			return nil, fmt.Errorf("kiln: session: %w", err)
		}
	}
	s.mu.Lock()
	s.made = append(s.made, f)
	s.mu.Unlock()
	return &slot{exec: f}, nil
}

// Run runs one inference: inputs maps every input name of the model to
// a tensor of its dtype and shape, and the result maps every output name
// to its value. It waits for a free slot when Concurrency inferences are
// running, and stops early, with ctx's error, once ctx is done (between
// kernels, or while waiting).
func (s *Session) Run(ctx context.Context, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	if err := s.checkInputs(inputs); err != nil {
		return nil, err
	}
	var sl *slot
	select {
	case sl = <-s.slots:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { s.slots <- sl }()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	var outs []*tensor.Tensor
	var err error
	if s.art.art.Exec == nil {
		outs, err = s.art.art.RunContext(ctx, inputs)
	} else {
		if sl.exec == nil {
			made, err := s.newSlot()
			if err != nil {
				return nil, err
			}
			sl.exec = made.exec
		}
		outs, err = sl.exec.ExecuteContext(ctx, inputs)
	}
	if err != nil {
		return nil, err
	}
	res := make(map[string]*tensor.Tensor, len(outs))
	for i, o := range outs {
		res[s.art.outputs[i].Name] = o
	}
	return res, nil
}

// checkInputs checks that inputs names every input once, with its dtype
// and shape, and nothing else.
func (s *Session) checkInputs(inputs map[string]*tensor.Tensor) error {
	for _, in := range s.art.inputs {
		t, ok := inputs[in.Name]
		if !ok || t == nil {
			return fmt.Errorf("kiln: run: input %q (%s%v) is missing", in.Name, in.DType, in.Shape)
		}
		if t.DType != in.DType || !t.Shape.Equal(in.Shape) {
			return fmt.Errorf("kiln: run: input %q is %s%v, want %s%v", in.Name, t.DType, t.Shape, in.DType, in.Shape)
		}
	}
	if len(inputs) != len(s.art.inputs) {
		for name := range inputs {
			if !s.art.hasInput(name) {
				return fmt.Errorf("kiln: run: the model has no input %q (inputs: %s)", name, s.art.inputList())
			}
		}
	}
	return nil
}

func (a *Artifact) hasInput(name string) bool {
	for _, in := range a.inputs {
		if in.Name == name {
			return true
		}
	}
	return false
}

func (a *Artifact) inputList() string {
	s := ""
	for i, in := range a.inputs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%q", in.Name)
	}
	return s
}

// Close waits for the session's running inferences, frees its memory,
// and lets a closed artifact go. Later Runs fail.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	// Take every slot back: then no inference is running.
	for range cap(s.slots) {
		<-s.slots
	}
	for _, e := range s.made {
		e.Close()
	}
	s.made = nil
	// The slots go back for Runs that were waiting: they see closed.
	for range cap(s.slots) {
		s.slots <- &slot{}
	}
	a := s.art
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sessions--
	return a.releaseLocked()
}

// Metadata is the artifact's metadata.json, for tools that need more
// than Inputs and Outputs.
func (a *Artifact) Metadata() driver.Metadata { return a.art.Metadata }
