package passconfig

import (
	"fmt"
	"strings"
	"testing"
)

func TestDefaults(t *testing.T) {
	var nilCfg *Config
	for _, c := range []*Config{nil, New()} {
		if c.OptLevel() != DefaultOptLevel || c.Int(UnrollMaxExtent) != 32 || c.Bool(DisableVectorize) || c.Disabled("fold_constant") {
			t.Errorf("defaults wrong: %v", c)
		}
	}
	if got := nilCfg.String(); got != "opt_level=3" {
		t.Errorf("nil String() = %q", got)
	}
	for _, k := range Keys() {
		if k.Doc == "" || !strings.Contains(k.Name, ".") {
			t.Errorf("key %q: needs a doc and an <ir>.<area>.<option> name", k.Name)
		}
		if _, err := k.parse(formatDefault(k)); err != nil {
			t.Errorf("key %s: default does not parse: %v", k.Name, err)
		}
	}
}

func formatDefault(k *Key) string { return fmt.Sprint(k.Default) }

func TestSet(t *testing.T) {
	c := New()
	for _, ok := range []string{"tir.unroll_max_extent=8", "tir.disable_vectorize=true", "graph.fuse_ops.max_depth = 4"} {
		if err := c.SetAssignment(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if c.Int(UnrollMaxExtent) != 8 || !c.Bool(DisableVectorize) || c.Int(FuseMaxDepth) != 4 {
		t.Errorf("values not set: %v", c)
	}
	if err := c.Disable("simplify_expr"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetOptLevel(2); err != nil {
		t.Fatal(err)
	}
	want := "opt_level=2 disable=simplify_expr graph.fuse_ops.max_depth=4 tir.disable_vectorize=true tir.unroll_max_extent=8"
	if got := c.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	d := c.Clone()
	if err := d.Set("tir.unroll_max_extent", "0"); err != nil {
		t.Fatal(err)
	}
	if c.Int(UnrollMaxExtent) != 8 || d.Int(UnrollMaxExtent) != 0 {
		t.Error("Clone shares values")
	}

	for _, tc := range []struct{ in, want string }{
		{"tir.unrol_max_extent=8", "pass-config: unknown key \"tir.unrol_max_extent\" (known keys: graph.fuse_ops.disable, graph.fuse_ops.max_depth, import.fold_qdq, tir.disable_assert, tir.disable_vectorize, tir.unroll_max_extent)"},
		{"tir.unroll_max_extent", "want KEY=VALUE"},
		{"tir.unroll_max_extent=x", "want an integer in [0, 4096]"},
		{"tir.unroll_max_extent=5000", "out of range [0, 4096]"},
		{"graph.fuse_ops.max_depth=0", "out of range [1, 1048576]"},
		{"tir.disable_vectorize=maybe", "want true or false"},
	} {
		err := New().SetAssignment(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.in, err, tc.want)
		}
	}
	if err := New().SetOptLevel(4); err == nil || !strings.Contains(err.Error(), "out of range [0, 3]") {
		t.Errorf("opt level 4: %v", err)
	}
	if err := New().Disable(" "); err == nil {
		t.Error("empty pass name accepted")
	}
}

func TestWrongTypePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("reading an int key as a bool did not panic")
		}
	}()
	New().Bool(UnrollMaxExtent)
}
