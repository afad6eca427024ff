package minimal

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/backend/backendtest"
	"github.com/kiln-dev/kiln/internal/testenv"
)

// maxLines is the bound on a backend that offloads conv2d through
// a C kernel: the whole of minimal.go, comments and kernel included.
const maxLines = 60

func TestFitsInSixtyLines(t *testing.T) {
	f, err := os.Open("minimal.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	if n > maxLines {
		t.Errorf("minimal.go has %d lines, want at most %d", n, maxLines)
	}
}

// TestLeNet compiles ../shared/models/lenet with "minimal_conv, c": both
// convolutions go to the kernel and the outputs match the reference.
func TestLeNet(t *testing.T) {
	testenv.Cgo(t)
	r := backendtest.Registry(t, Register)
	c := backendtest.CompileModel(t, r, "minimal_conv, c", "lenet")
	convs := 0
	for _, n := range c.Report.Nodes {
		if n.Op == "nn.conv2d" {
			convs++
			if n.Target != "minimal_conv" {
				t.Errorf("%s stayed on the host: %v", n.Node, n.Why)
			}
		}
	}
	if convs != 2 {
		t.Errorf("%d convolutions in the report, want lenet's 2", convs)
	}
	if src := c.Source(t, "ext0_minimal_conv.c"); strings.Count(src, "\n  minimal_conv2d(") != 2 {
		t.Errorf("want two kernel calls in:\n%s", src)
	}
}
