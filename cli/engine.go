package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// engine runs imported models for test-onnx: prepare is called after each
// (re)import, run for every data set.
type engine interface {
	prepare(ctx context.Context, m *onnx.Model) error
	run(ctx context.Context, m *onnx.Model, argv []*tensor.Tensor) ([]*tensor.Tensor, error)
}

// refEngine is the reference interpreter.
type refEngine struct{}

func (refEngine) prepare(context.Context, *onnx.Model) error { return nil }

func (refEngine) run(ctx context.Context, m *onnx.Model, argv []*tensor.Tensor) ([]*tensor.Tensor, error) {
	res, err := ref.RunContext(ctx, m.Module, argv)
	if err != nil {
		return nil, err
	}
	return res.Flatten(), nil
}

// compiledEngine compiles each imported model into a temporary directory
// and runs the artifact. close removes the directory.
type compiledEngine struct {
	cfg TestConfig
	tmp string
	n   int
	art *driver.Artifact
}

func (c *compiledEngine) prepare(ctx context.Context, m *onnx.Model) error {
	if c.tmp == "" {
		tmp, err := driver.TempDir("", "kiln-test-")
		if err != nil {
			return err
		}
		c.tmp = tmp
		c.cfg.temps.track(tmp, true)
	}
	if c.art != nil {
		c.art.Close()
		c.art = nil
	}
	out := filepath.Join(c.tmp, fmt.Sprintf("artifact%d", c.n))
	c.n++
	res, _, err := compileModel(m, compileOptions{Ctx: ctx, Place: &placement{list: c.cfg.Targets}, Out: out, Passes: c.cfg.Passes, Executor: c.cfg.Executor, Tuning: c.cfg.Tuning, Cache: c.cfg.Cache})
	if err != nil {
		return err
	}
	art, err := driver.LoadArtifact(res.Dir)
	if err != nil {
		return fmt.Errorf("loading the artifact: %w", err)
	}
	c.art = art
	return nil
}

func (c *compiledEngine) run(ctx context.Context, m *onnx.Model, argv []*tensor.Tensor) ([]*tensor.Tensor, error) {
	vals := make(map[string]*tensor.Tensor, len(argv))
	for i, in := range m.Inputs {
		vals[in.Name] = argv[i]
	}
	return c.art.RunContext(ctx, vals)
}

func (c *compiledEngine) close() {
	if c.art != nil {
		c.art.Close()
		c.art = nil
	}
	if c.tmp != "" {
		driver.RemoveTemp(c.tmp)
		c.cfg.temps.track(c.tmp, false)
	}
}

// tempDirs records the temporary directories of compiled tests still
// running. A test abandoned at its time limit keeps running in the
// background, so test-onnx removes what is left when it finishes.
type tempDirs struct{ m sync.Map }

func (t *tempDirs) track(dir string, live bool) {
	if t == nil {
		return
	}
	if live {
		t.m.Store(dir, true)
	} else {
		t.m.Delete(dir)
	}
}

// removeAll removes the directories still tracked.
func (t *tempDirs) removeAll() {
	if t == nil {
		return
	}
	t.m.Range(func(k, _ any) bool {
		driver.RemoveTemp(k.(string))
		t.m.Delete(k)
		return true
	})
}
