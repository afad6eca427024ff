package driver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/internal/testenv"
)

// TestPipelineStages checks the stage lists of both executors and that
// every stage name is one StageNames knows.
func TestPipelineStages(t *testing.T) {
	for executor, want := range map[string]string{
		ExecutorGraph: "prepare graph-passes plan-devices target-hooks lower tir-passes executor codegen link package",
		ExecutorAOT:   "prepare graph-passes plan-devices target-hooks lower tir-passes lift-workspaces executor codegen link package",
	} {
		p, err := NewPipeline(Config{Host: hostTarget(t), Executor: executor})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, st := range p.Stages {
			names = append(names, st.Name)
			if !slices.Contains(StageNames(), st.Name) {
				t.Errorf("stage %s is not in StageNames", st.Name)
			}
		}
		if got := strings.Join(names, " "); got != want {
			t.Errorf("%s pipeline: %s\nwant %s", executor, got, want)
		}
		if !strings.Contains(p.String(), "fold_constant → simplify_expr") {
			t.Errorf("printed pipeline lacks the graph passes:\n%s", p)
		}
	}
	if _, err := NewPipeline(Config{Host: hostTarget(t), Executor: "jit"}); err == nil {
		t.Error("unknown executor accepted")
	}
}

// TestDumpDir compiles resnet18 (the example MLP without ../shared) with
// --dump-dir and verification on, and checks the dump's file list and
// that each file holds the IR of its stage; then --dump-after.
func TestDumpDir(t *testing.T) {
	dir := testenv.SharedPath(t, "models", "resnet18")
	model, err := onnx.LoadFile(filepath.Join(dir, "model.onnx"), onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(t.TempDir(), "dump")
	res, err := Compile(model.Module, nil, Config{Host: hostTarget(t), Out: filepath.Join(t.TempDir(), "art"), Verify: true, DumpDir: dump})
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dump)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range ents {
		files = append(files, e.Name())
	}
	want := "01-prepare.txt 02-graph-passes.txt 03-plan-devices.txt 04-target-hooks.txt 05-lower.txt 06-tir-passes.txt 07-executor.txt 08-codegen.txt 09-link.txt 10-package.txt"
	if got := strings.Join(files, " "); got != want {
		t.Errorf("dump files:\n%s\nwant\n%s", got, want)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dump, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if s := read("01-prepare.txt"); !strings.Contains(s, "def @main") && !strings.Contains(s, "fn ") {
		t.Errorf("01-prepare.txt is not graph IR:\n%.300s", s)
	}
	if s := read("06-tir-passes.txt"); !strings.Contains(s, "for ") {
		t.Errorf("06-tir-passes.txt is not TIR:\n%.300s", s)
	}
	if s := read("08-codegen.txt"); !strings.Contains(s, "#include") {
		t.Errorf("08-codegen.txt is not C:\n%.300s", s)
	}
	if len(res.Stages) != 10 || res.Stages[1].GraphCalls == 0 || res.Stages[5].PrimFuncs == 0 || res.Stages[7].CBytes == 0 {
		t.Errorf("stage statistics %+v", res.Stages)
	}
	only := filepath.Join(t.TempDir(), "only")
	if _, err := Compile(model.Module, nil, Config{Host: hostTarget(t), Out: filepath.Join(t.TempDir(), "art2"), DumpDir: only, DumpAfter: "lower"}); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(only); len(ents) != 1 || ents[0].Name() != "05-lower.txt" {
		t.Errorf("--dump-after lower wrote %v", ents)
	}
	if _, err := Compile(model.Module, nil, Config{Host: hostTarget(t), Out: filepath.Join(t.TempDir(), "art3"), DumpDir: only, DumpAfter: "nosuch"}); err == nil || !strings.Contains(err.Error(), "no such stage") {
		t.Errorf("unknown --dump-after: %v", err)
	}
}

// TestCompileCancelled: a cancelled context stops the compile between
// stages and leaves no artifact and no build directory.
func TestCompileCancelled(t *testing.T) {
	model, err := onnx.LoadFile(filepath.Join("..", "examples", "models", "mlp", "model.onnx"), onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = CompileContext(ctx, model.Module, nil, Config{Host: hostTarget(t), Out: filepath.Join(root, "art")})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled compile: %v", err)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// TestCompileTimeoutStopsCompiler: a deadline that passes while the C
// compiler runs kills it and the compile returns the context's error
// promptly, leaving no artifact and no build directory.
func TestCompileTimeoutStopsCompiler(t *testing.T) {
	model, err := onnx.LoadFile(filepath.Join("..", "examples", "models", "mlp", "model.onnx"), onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	cc := filepath.Join(t.TempDir(), "slowcc")
	if err := os.WriteFile(cc, []byte("#!/bin/sh\nsleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CC", cc)
	for _, executor := range []string{ExecutorGraph, ExecutorAOT} {
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		start := time.Now()
		_, err = CompileContext(ctx, model.Module, nil, Config{Host: hostTarget(t), Out: filepath.Join(root, "art"), Executor: executor})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v, want the deadline's error", executor, err)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s: returned after %v", executor, d)
		}
		if ents, _ := os.ReadDir(root); len(ents) != 0 {
			t.Errorf("%s: left behind: %v", executor, ents)
		}
	}
}
