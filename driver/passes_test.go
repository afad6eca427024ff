package driver

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/passconfig"
)

// TestPassConfigDifferential compiles models under pass configurations
// other than the default (each opt level, no vectorization, no unrolling,
// tiny fused functions, disabled passes) and checks every result against
// the reference executor and the stored outputs: skipping a pass may make
// code slower, never wrong.
func TestPassConfigDifferential(t *testing.T) {
	testenv.Cgo(t)
	root := filepath.Join(sharedDir(t), "models")
	configs := []struct {
		name string
		set  func(*passconfig.Config) error
	}{
		{"O0", func(c *passconfig.Config) error { return c.SetOptLevel(0) }},
		{"O1", func(c *passconfig.Config) error { return c.SetOptLevel(1) }},
		{"O2", func(c *passconfig.Config) error { return c.SetOptLevel(2) }},
		{"knobs", func(c *passconfig.Config) error {
			for _, a := range []string{"tir.disable_vectorize=true", "tir.unroll_max_extent=0", "graph.fuse_ops.max_depth=2"} {
				if err := c.SetAssignment(a); err != nil {
					return err
				}
			}
			return nil
		}},
		{"disabled", func(c *passconfig.Config) error {
			for _, p := range []string{"simplify_expr", "alter_conv_layout", "Simplify", "RemoveNoOp"} {
				if err := c.Disable(p); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	models := []string{"lenet", "conv1d_kws", "tiny_bert"}
	if !testing.Short() {
		models = append(models, "squeezenet1_1")
	}
	for _, m := range models {
		for _, c := range configs {
			t.Run(m+"/"+c.name, func(t *testing.T) {
				pc := passconfig.New()
				if err := c.set(pc); err != nil {
					t.Fatal(err)
				}
				res := compileAndCompareWith(t, filepath.Join(root, m), 1e-3, 1e-4, Config{Host: hostTarget(t), PassConfig: pc})
				for _, ps := range res.GraphPasses {
					want := pc.Disabled(ps.Name) ||
						(pc.OptLevel() < 1 && (ps.Name == "fold_constant" || ps.Name == "dead_code_elimination" || ps.Name == "qnn_kernel_sums")) ||
						(pc.OptLevel() < 2 && (ps.Name == "simplify_expr" || ps.Name == "conv1d_as_conv2d" || ps.Name == "conv_transpose_as_conv")) ||
						(pc.OptLevel() < 3 && strings.HasPrefix(ps.Name, "alter_"))
					if ps.Skipped != want {
						t.Errorf("graph pass %s skipped = %v, want %v", ps.Name, ps.Skipped, want)
					}
				}
			})
		}
	}
}

// TestPassConfigErrors checks that the build refuses to disable a pass
// that does not exist or that later stages need, naming the passes.
func TestPassConfigErrors(t *testing.T) {
	for _, tc := range []struct{ pass, want string }{
		{"fold_constants", "--disable-pass fold_constants: no such pass in this compilation (passes: fold_constant, simplify_expr,"},
		{"fuse_ops", "--disable-pass fuse_ops: the pass is required"},
		{"plan_devices", "--disable-pass plan_devices: the pass is required"},
		{"partition", "no such pass"}, // no external target: no partitioning
	} {
		pc := passconfig.New()
		if err := pc.Disable(tc.pass); err != nil {
			t.Fatal(err)
		}
		_, err := NewPipeline(Config{Host: hostTarget(t), PassConfig: pc})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("disable %s: error %v, want it to contain %q", tc.pass, err, tc.want)
		}
	}
	// The pipeline lists what runs: opt level 1 drops simplify_expr, the
	// layout passes and UnrollLoops.
	pc := passconfig.New()
	if err := pc.SetOptLevel(1); err != nil {
		t.Fatal(err)
	}
	p, err := NewPipeline(Config{Host: hostTarget(t), PassConfig: pc})
	if err != nil {
		t.Fatal(err)
	}
	text := p.String()
	for _, gone := range []string{"simplify_expr", "alter_conv_layout", "UnrollLoops"} {
		if strings.Contains(text, gone) {
			t.Errorf("opt level 1 pipeline lists %s:\n%s", gone, text)
		}
	}
	if !strings.Contains(text, "fold_constant → dead_code_elimination → qnn_kernel_sums → plan_devices → fuse_ops") {
		t.Errorf("opt level 1 graph passes:\n%s", text)
	}
}
