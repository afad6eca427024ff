package transform

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/graph"
)

// Pass is one graph pass: a named function from module to module. A pass
// must not modify its input module (build new nodes and a new module
// instead); it may leave the types of new nodes unset, since the pipeline
// re-infers types after every pass.
type Pass struct {
	// Name identifies the pass in dumps, timings, ordering constraints and
	// Pipeline.Disabled.
	Name string
	// Run transforms the module.
	Run func(*graph.Module) (*graph.Module, error)
	// Required passes always run (later stages depend on their output);
	// the others may be disabled.
	Required bool
	// OptLevel is the lowest optimisation level (passconfig) at which the
	// pass runs; the build skips it below that level. Required passes have
	// level 0.
	OptLevel int
}

// Passes returns the standard graph pass list, in order, with the given
// fusion options.
func Passes(fuse FuseOptions) []Pass {
	return []Pass{
		{Name: "fold_constant", Run: FoldConstant, OptLevel: 1},
		{Name: "simplify_expr", Run: SimplifyExpr, OptLevel: 2},
		{Name: "dead_code_elimination", Run: DeadCodeElimination, OptLevel: 1},
		{Name: "conv1d_as_conv2d", Run: Conv1DAsConv2D, OptLevel: 2},
		{Name: "conv_transpose_as_conv", Run: ConvTransposeAsConv, OptLevel: 2},
		{Name: "alter_conv_layout", Run: AlterConvLayout, OptLevel: 3},
		{Name: "alter_dense_layout", Run: AlterDenseLayout, OptLevel: 3},
		{Name: "alter_recurrent_layout", Run: AlterRecurrentLayout, OptLevel: 3},
		{Name: "qnn_kernel_sums", Run: QNNKernelSums, OptLevel: 1},
		// A no-op here: the driver runs AlterQConvLayout with the host
		// target's choice.
		{Name: "alter_qconv_layout", Run: func(m *graph.Module) (*graph.Module, error) { return m, nil }, OptLevel: 3},
		{Name: "fuse_ops", Run: func(m *graph.Module) (*graph.Module, error) { return FuseOpsWith(m, fuse) }, Required: true},
	}
}

// constraint says pass a must run before pass b (when both are present).
type constraint struct {
	a, b   string
	reason string
}

// passOrder lists the ordering constraints between passes, like the ssa
// package's passOrder. CheckOrder enforces them.
var passOrder = []constraint{
	{"fold_constant", "simplify_expr", "the batch_norm rewrite needs constant parameters, which folding produces"},
	{"fold_constant", "fuse_ops", "fused primitive functions are opaque to folding"},
	{"simplify_expr", "fuse_ops", "fused primitive functions are opaque to simplification"},
	{"dead_code_elimination", "fuse_ops", "fusion should not spend work on unused functions"},
	{"conv1d_as_conv2d", "alter_conv_layout", "the layout rewrite packs the nn.conv2d the 1-D convolutions become"},
	{"conv1d_as_conv2d", "fuse_ops", "fused primitive functions are opaque to the rewrite"},
	{"fold_constant", "conv_transpose_as_conv", "only transposed convolutions with constant weights are rewritten"},
	{"conv_transpose_as_conv", "alter_conv_layout", "the layout rewrite packs the nn.conv2d the transposed convolutions become"},
	{"conv_transpose_as_conv", "fuse_ops", "fused primitive functions are opaque to the rewrite"},
	{"fold_constant", "alter_conv_layout", "only convolutions with constant weights are repacked"},
	{"simplify_expr", "alter_conv_layout", "simplification matches nn.conv2d, not the packed form"},
	{"alter_conv_layout", "fuse_ops", "fused primitive functions are opaque to the layout rewrite"},
	{"fold_constant", "alter_dense_layout", "only dense calls with constant weights are transposed"},
	{"simplify_expr", "alter_dense_layout", "simplification matches nn.dense, not the rewritten matmul"},
	{"alter_dense_layout", "fuse_ops", "fused primitive functions are opaque to the layout rewrite"},
	{"fold_constant", "alter_recurrent_layout", "only recurrent layers with constant weights are packed"},
	{"alter_recurrent_layout", "fuse_ops", "fused primitive functions are opaque to the layout rewrite"},
	{"fold_constant", "qnn_kernel_sums", "only integer products with constant weights get their sums"},
	{"qnn_kernel_sums", "fuse_ops", "fused primitive functions are opaque to the rewrite"},
	{"qnn_kernel_sums", "alter_qconv_layout", "the broadcast form reads the sums the pass computes from a constant weight"},
	{"fold_constant", "alter_qconv_layout", "only convolutions with constant weights are repacked"},
	{"alter_qconv_layout", "fuse_ops", "fused primitive functions are opaque to the layout rewrite"},
}

// CheckOrder reports an error when passes violates an ordering constraint
// or names a pass twice.
func CheckOrder(passes []Pass) error {
	idx := map[string]int{}
	for i, p := range passes {
		if p.Name == "" || p.Run == nil {
			return fmt.Errorf("pass %d: missing name or function", i)
		}
		if _, dup := idx[p.Name]; dup {
			return fmt.Errorf("pass %q listed twice", p.Name)
		}
		idx[p.Name] = i
	}
	for _, c := range passOrder {
		ia, okA := idx[c.a]
		ib, okB := idx[c.b]
		if okA && okB && ia >= ib {
			return fmt.Errorf("pass %q must run before %q: %s", c.a, c.b, c.reason)
		}
	}
	return nil
}

// PassStat is the record of one pass of a pipeline run.
type PassStat struct {
	Name     string
	Duration time.Duration // the pass itself, without inference/verification
	Skipped  bool          // disabled
}

// Pipeline runs passes in order. After each pass it re-infers types and,
// as configured, verifies the module and dumps its text.
type Pipeline struct {
	// Passes to run, in order; CheckOrder must accept them.
	Passes []Pass
	// Verify runs Verify on the input and after every pass.
	Verify bool
	// Dump, when set, receives the module text after every pass, each
	// preceded by a `// after NAME` line.
	Dump io.Writer
	// DumpDir, when set, receives one file per pass, NN_NAME.txt, with the
	// module text after that pass (00_input.txt holds the input).
	DumpDir string
	// Disabled names passes to skip; naming a required or unknown pass
	// is an error.
	Disabled map[string]bool
	// Stats is filled by Run: one entry per pass, in order.
	Stats []PassStat
}

// NewPipeline returns a pipeline of the standard passes with default options.
func NewPipeline() *Pipeline { return &Pipeline{Passes: Passes(FuseOptions{})} }

// Run applies the passes to m and returns the result. The input module is
// typed first (InferTypes) if needed.
func (p *Pipeline) Run(m *graph.Module) (*graph.Module, error) {
	if err := CheckOrder(p.Passes); err != nil {
		return nil, err
	}
	byName := map[string]Pass{}
	for _, ps := range p.Passes {
		byName[ps.Name] = ps
	}
	for name, off := range p.Disabled {
		ps, ok := byName[name]
		switch {
		case !off:
		case !ok:
			return nil, fmt.Errorf("cannot disable unknown pass %q", name)
		case ps.Required:
			return nil, fmt.Errorf("pass %q is required and cannot be disabled", name)
		}
	}
	p.Stats = p.Stats[:0]
	if err := graph.InferTypes(m); err != nil {
		return nil, fmt.Errorf("input module: %v", err)
	}
	if err := p.check(m, 0, "input"); err != nil {
		return nil, err
	}
	for i, ps := range p.Passes {
		if p.Disabled[ps.Name] {
			p.Stats = append(p.Stats, PassStat{Name: ps.Name, Skipped: true})
			continue
		}
		start := time.Now()
		out, err := ps.Run(m)
		d := time.Since(start)
		p.Stats = append(p.Stats, PassStat{Name: ps.Name, Duration: d})
		if err != nil {
			return nil, fmt.Errorf("pass %s: %w", ps.Name, err)
		}
		if out == nil {
			return nil, fmt.Errorf("pass %s returned no module", ps.Name)
		}
		if err := graph.InferTypes(out); err != nil {
			return nil, fmt.Errorf("after pass %s: type inference: %v", ps.Name, err)
		}
		if err := p.check(out, i+1, ps.Name); err != nil {
			return nil, err
		}
		m = out
	}
	return m, nil
}

// check verifies and dumps the module after step n (0 = input).
func (p *Pipeline) check(m *graph.Module, n int, name string) error {
	if p.Verify {
		if err := Verify(m); err != nil {
			if n == 0 {
				return fmt.Errorf("input module fails verification: %w", err)
			}
			return fmt.Errorf("after pass %s: %w", name, err)
		}
	}
	if p.Dump == nil && p.DumpDir == "" {
		return nil
	}
	var b strings.Builder
	if err := graph.Print(&b, m, graph.PrintOptions{}); err != nil {
		return err
	}
	if p.Dump != nil {
		if _, err := fmt.Fprintf(p.Dump, "// after %s\n%s\n", name, b.String()); err != nil {
			return err
		}
	}
	if p.DumpDir != "" {
		if err := os.MkdirAll(p.DumpDir, 0o755); err != nil {
			return err
		}
		file := filepath.Join(p.DumpDir, fmt.Sprintf("%02d_%s.txt", n, name))
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// WriteStats prints one line per pass of the last run with its time (the
// `-v` output of the compiler driver).
func (p *Pipeline) WriteStats(w io.Writer) error {
	var total time.Duration
	for _, s := range p.Stats {
		if s.Skipped {
			if _, err := fmt.Fprintf(w, "pass %-24s skipped\n", s.Name); err != nil {
				return err
			}
			continue
		}
		total += s.Duration
		if _, err := fmt.Fprintf(w, "pass %-24s %10.3fms\n", s.Name, float64(s.Duration.Microseconds())/1000); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "graph passes total %22.3fms\n", float64(total.Microseconds())/1000)
	return err
}
