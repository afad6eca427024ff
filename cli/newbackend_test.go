package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
)

// TestNewBackend scaffolds a backend inside this module and checks that
// the generated package vets, passes its own test (offloading a conv2d
// and matching the host) and that its kiln command builds and lists the
// new target; then the error cases.
func TestNewBackend(t *testing.T) {
	testenv.Cgo(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	parent, err := os.MkdirTemp(filepath.Join(root, "internal"), "scaffoldtest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	dir := filepath.Join(parent, "acme_npu")
	code, stdout, stderr := kiln("new-backend", "acme_npu", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rel := "./internal/" + filepath.Base(parent) + "/acme_npu"
	if !strings.Contains(stdout, "github.com/kiln-dev/kiln/internal/"+filepath.Base(parent)+"/acme_npu") {
		t.Errorf("output does not name the import path:\n%s", stdout)
	}
	for _, f := range []string{"acmenpu.go", "acmenpu_test.go", "kernel/acme_npu.c", "kernel/acme_npu.h", "cmd/kiln-acme_npu/main.go", "README.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	gocmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	gocmd("vet", rel+"/...")
	gocmd("test", "-count=1", rel+"/...")
	bin := filepath.Join(t.TempDir(), "kiln-acme_npu")
	gocmd("build", "-o", bin, rel+"/cmd/kiln-acme_npu")
	out, err := exec.Command(bin, "targets").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "acme_npu") {
		t.Errorf("kiln-acme_npu targets: %v\n%s", err, out)
	}

	if code, _, stderr := kiln("new-backend", "acme_npu", "-o", dir); code != 1 || !strings.Contains(stderr, "already exists") {
		t.Errorf("existing directory: exit %d, %q", code, stderr)
	}
	for _, bad := range []string{"Acme", "9x", "a-b", "c"} {
		if code, _, stderr := kiln("new-backend", bad, "-o", filepath.Join(parent, "x")); code != 2 || !strings.Contains(stderr, "name") {
			t.Errorf("name %q: exit %d, %q", bad, code, stderr)
		}
	}
	if code, _, stderr := kiln("new-backend", "npu", "-o", filepath.Join(t.TempDir(), "npu")); code != 1 || !strings.Contains(stderr, "--import-path") {
		t.Errorf("outside a module: exit %d, %q", code, stderr)
	}
}

// TestNewBackendImportPathChecked: the import path is written into Go
// source, so one that could end the string literal is refused.
func TestNewBackendImportPathChecked(t *testing.T) {
	for _, p := range []string{`x"; import "os`, "a b", "../x", "/abs", "ok/..//x"} {
		code, _, stderr := kiln("new-backend", "acc", "-o", filepath.Join(t.TempDir(), "acc"), "--import-path", p)
		if code != 1 || !strings.Contains(stderr, "import path") {
			t.Errorf("--import-path %q: exit %d: %s", p, code, stderr)
		}
	}
}
