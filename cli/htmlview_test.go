package cli

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kiln-dev/kiln/backend/dnnl"
	"github.com/kiln-dev/kiln/internal/testenv"
)

// browser starts headless Chromium (Debian's package) for t, or skips
// (fails under KILN_TEST_STRICT=1) when there is none.
//
// Selectors are chromedp.CSS: a plain string is a search that also
// matches text, such as the page's style sheet.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	testenv.Need(t, "Chromium (Debian package chromium) for the HTML view's browser test", err)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests may run as root, where Chromium's sandbox refuses to start
		chromedp.WindowSize(1400, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// TestHTMLViewInBrowser loads the HTML view of resnet18 (partitioned for
// dnnl and the host) and of tiny_bert in headless Chromium and checks
// what a user does there: the graph renders (a screenshot that is not
// blank), search finds nodes and selects the first, a click on a node
// shows its attributes, shapes and target in the panel, and a link in
// the host-fallback table selects its node. KILN_VIEW_SCREENSHOTS=DIR
// keeps the screenshots (docs/ has the committed ones).
func TestHTMLViewInBrowser(t *testing.T) {
	models := testenv.SharedPath(t, "models")
	ctx := browser(t)
	keep := os.Getenv("KILN_VIEW_SCREENSHOTS")
	// Partitioned for dnnl where this build has it (the screenshots in
	// docs/), else for ccompiler (generated C, in every build).
	tl := "ccompiler, c"
	if dnnl.Available {
		tl = "dnnl, c"
	}
	for _, c := range []struct {
		model, search, wantOp, wantAttr string
	}{
		{"resnet18", "conv", "nn.conv2d", "strides = "},
		{"tiny_bert", "matmul", "nn.", ""},
	} {
		t.Run(c.model, func(t *testing.T) {
			code, page, stderr := kiln("inspect", filepath.Join(models, c.model, "model.onnx"), "-t", tl, "--format", "html")
			if code != 0 {
				t.Fatalf("inspect: exit %d: %s", code, stderr)
			}
			file := filepath.Join(t.TempDir(), c.model+".html")
			if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
				t.Fatal(err)
			}
			step := func(a chromedp.Action[chromedp.Void]) {
				t.Helper()
				if err := chromedp.Do(ctx, a); err != nil {
					t.Fatal(err)
				}
			}
			text := func(sel string) string {
				t.Helper()
				v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			step(chromedp.Navigate("file://" + file))
			step(chromedp.WaitVisible(chromedp.CSS("#graph")))
			shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			if err != nil {
				t.Fatal(err)
			}
			checkScreenshot(t, shot)
			if keep != "" {
				if err := os.WriteFile(filepath.Join(keep, "view-"+c.model+".png"), shot, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// Search: the status counts the matches, the first is
			// selected and its details shown.
			step(chromedp.SendKeys(chromedp.CSS("#search"), c.search))
			status := text("#status")
			var n int
			if _, err := fmt.Sscanf(status, "%d match", &n); err != nil || n == 0 {
				t.Fatalf("search %q: status %q, want a count of matches", c.search, status)
			}
			if title := text("#panel-title"); !strings.Contains(title, c.wantOp) {
				t.Errorf("search %q selected %q, want a %s node", c.search, title, c.wantOp)
			}
			// Close the panel, then click the selected (centred) node.
			step(chromedp.Click(chromedp.CSS("#panel-close")))
			if hidden, err := chromedp.Run(ctx, chromedp.JavascriptAttribute[bool](chromedp.CSS("#panel"), "hidden")); err != nil || !hidden {
				t.Errorf("close did not hide the panel (%v)", err)
			}
			sel, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(".node.match").id`))
			if err != nil {
				t.Fatal(err)
			}
			step(chromedp.Click(chromedp.CSS("#" + sel + " rect")))
			step(chromedp.WaitVisible(chromedp.CSS("#panel")))
			if title := text("#panel-title"); !strings.Contains(title, c.wantOp) {
				t.Errorf("clicked %s: panel title %q", sel, title)
			}
			panel := text("#panel-body")
			for _, want := range []string{"type", "float32", "target", "inputs", c.wantAttr} {
				if !strings.Contains(panel, want) {
					t.Errorf("clicked %s: the panel lacks %q:\n%s", sel, want, panel)
				}
			}
			if keep != "" {
				zoomed, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(keep, "view-"+c.model+"-selected.png"), zoomed, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestHTMLViewLinks: in the MLP partitioned for ccompiler, a link of the
// host-fallback table selects its node; a #node= address opens the page
// on that node.
func TestHTMLViewLinks(t *testing.T) {
	ctx := browser(t)
	code, page, stderr := kiln("inspect", filepath.Join(mlpDir, "model.onnx"), "-t", "ccompiler, c", "--format", "html")
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	file := filepath.Join(t.TempDir(), "mlp.html")
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	get := func(a chromedp.Action[string]) string {
		t.Helper()
		v, err := chromedp.Run(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	do(chromedp.Navigate("file://"+file), chromedp.WaitVisible(chromedp.CSS("#graph")), chromedp.Click(chromedp.CSS(`a[data-node="6"]`)), chromedp.WaitVisible(chromedp.CSS("#panel")))
	title, body := get(chromedp.Text(chromedp.CSS("#panel-title"))), get(chromedp.Text(chromedp.CSS("#panel-body")))
	sel := get(chromedp.Evaluate[string](`document.querySelector(".node.sel").id`))
	if sel != "n6" || !strings.Contains(title, "nn.relu") || !strings.Contains(body, "/3/Relu") || !strings.Contains(body, "nn.relu is not supported") {
		t.Errorf("the link selected %s: %q\n%s", sel, title, body)
	}
	do(chromedp.Navigate("file://"+file+"#node=1"), chromedp.WaitVisible(chromedp.CSS("#panel")))
	if title := get(chromedp.Text(chromedp.CSS("#panel-title"))); !strings.Contains(title, "nn.dense") {
		t.Errorf("#node=1 opened on %q, want the first dense", title)
	}
}

// checkScreenshot fails t unless shot is a PNG with more than a blank
// page in it: many distinct colours (node fills, text, edges).
func checkScreenshot(t *testing.T, shot []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	colours := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, bl, a}] = true
		}
	}
	if len(colours) < 20 {
		t.Errorf("the screenshot (%v) has %d colours: the page did not render", b.Size(), len(colours))
	}
}
