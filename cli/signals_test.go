package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInterruptLeavesNothing starts `kiln compile` as a process with a C
// compiler that hangs, interrupts it (SIGINT, then SIGTERM in a second
// run) while it compiles, and checks the exit status and that no
// temporary directory is left beside the output or in $TMPDIR.
func TestInterruptLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the kiln command")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "kiln")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/kiln").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cc := filepath.Join(dir, "slowcc")
	if err := os.WriteFile(cc, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		work := filepath.Join(dir, sig.String())
		tmpdir := filepath.Join(work, "tmp")
		if err := os.MkdirAll(tmpdir, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "compile", mlpDir, "-t", "c", "-o", filepath.Join(work, "out"))
		cmd.Env = append(os.Environ(), "CC="+cc, "TMPDIR="+tmpdir)
		// Its own process group, so the hanging compiler can be killed
		// afterwards; the signal goes to kiln alone.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			if m, _ := filepath.Glob(filepath.Join(work, ".kiln-build-*", "kiln_lib.c")); len(m) > 0 {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatal("the compile never reached the C compiler")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		want := 130
		if sig == syscall.SIGTERM {
			want = 143
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != want {
			t.Errorf("%v: exit %v, want status %d", sig, err, want)
		}
		var left []string
		for _, pat := range []string{filepath.Join(work, ".kiln-*"), filepath.Join(work, "out"), filepath.Join(tmpdir, "*")} {
			m, _ := filepath.Glob(pat)
			left = append(left, m...)
		}
		if len(left) > 0 {
			t.Errorf("%v: left behind %s", sig, strings.Join(left, ", "))
		}
	}
}

// TestCompilerProducesNothing: a C compiler command that exits 0 without
// writing the library (-t "c -cc=true") is an error on both executors.
func TestCompilerProducesNothing(t *testing.T) {
	dir := t.TempDir()
	for _, executor := range []string{"graph", "aot"} {
		out := filepath.Join(dir, executor)
		code, _, stderr := kiln("compile", mlpDir, "-t", "c -cc=true", "--executor", executor, "-o", out)
		if code != 1 || !strings.Contains(stderr, `C compiler "true" exited successfully but produced no`) {
			t.Errorf("%s: exit %d: %s", executor, code, stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: an artifact was published", executor)
		}
	}
}
