package graph_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/frontend/onnx"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// TestParseHandwritten parses text in the looser forms a person writes
// (nested calls, comments, omitted attributes and return types, trailing
// commas) and checks the canonical print.
func TestParseHandwritten(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{
			name: "nested calls and comments",
			src: `// a comment line
def @main(%x: Tensor[(2,), float32]) {
  nn.relu(add(%x, /* inline comment */ constant(float32, [2], [1, -2.5e0])))
}`,
			want: `def @main(%x: Tensor[(2,), float32]) -> Tensor[(2,), float32] {
  %0 = add(%x, constant(float32, [2], [1.0, -2.5])) /* Tensor[(2,), float32] */;
  nn.relu(%0)
}
`,
		},
		{
			name: "attribute defaults filled and ints coerced",
			src: `def @main(%x: Tensor[(1,), float32]) {
  test.attrs(%x, f=2, fs=[], ss=[], dt="uint8", b=0)
}`,
			want: `def @main(%x: Tensor[(1,), float32]) -> Tensor[(1,), float32] {
  test.attrs(%x, b=false, dt=uint8, f=2.0, fs=[], i=-3, is=[1, -2, 3], s="a \"quoted\" string", ss=[])
}
`,
		},
		{
			name: "tuples, projections and a function literal call",
			src: `def @main(%p: (Tensor[(1,), int64], Tensor[(3,), bool],)) {
  %5 = fn (%q: Tensor[(1,), int64]) { add(%q, %q) };
  %9 = (%p.0, %p.1,);
  (%5(%9.0), ((%p)).1, (%p.0,))
}`,
			want: `def @main(%p: (Tensor[(1,), int64], Tensor[(3,), bool])) -> (Tensor[(1,), int64], Tensor[(3,), bool], (Tensor[(1,), int64],)) {
  %0 = %p.0 /* Tensor[(1,), int64] */;
  %1 = %p.1 /* Tensor[(3,), bool] */;
  %2 = (%0, %1) /* (Tensor[(1,), int64], Tensor[(3,), bool]) */;
  %3 = %2.0 /* Tensor[(1,), int64] */;
  %4 = fn (%q: Tensor[(1,), int64]) -> Tensor[(1,), int64] {
    add(%q, %q)
  };
  %5 = %4(%3) /* Tensor[(1,), int64] */;
  %6 = %p.1 /* Tensor[(3,), bool] */;
  %7 = %p.0 /* Tensor[(1,), int64] */;
  %8 = (%7,) /* (Tensor[(1,), int64],) */;
  (%5, %6, %8)
}
`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := graph.Parse(c.src, graph.ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := m.String(); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

func TestParseZeroElided(t *testing.T) {
	src := "def @main() {\n  constant(float32, [2, 3], ...)\n}\n"
	if _, err := graph.Parse(src, graph.ParseOptions{}); err == nil || !strings.HasPrefix(err.Error(), "2:29: constant values are elided") {
		t.Errorf("without ZeroElided: err = %v", err)
	}
	m, err := graph.Parse(src, graph.ParseOptions{ZeroElided: true})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Main().Body.(*graph.Constant).Value
	if !c.Shape.Equal(ir.Shape{2, 3}) || c.DType != ir.Float32 {
		t.Fatalf("constant is %s", c.Type())
	}
	for i, v := range c.Float32s() {
		if v != 0 {
			t.Errorf("element %d = %v, want 0", i, v)
		}
	}
}

// TestParseErrors checks messages and their line:col positions.
func TestParseErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{"", "1:1: no function definitions"},
		{"def @main() {\n  foo(%x)\n}", `2:3: unknown operator "foo"`},
		{"def @main(%x: Tensor[(2,), float32]) {\n  add(%x, %y)\n}", "2:11: undefined variable %y"},
		{"def @main(%x: Tensor[(2,), float32]) {\n  %1\n}", "2:3: undefined temporary %1"},
		{"def @main(%x) {\n  %x\n}", "1:11: parameter %x needs a type annotation"},
		{"def @main(%x: Tensor[(2,), float32], %y: Tensor[(3,), float32]) {\n  add(%x, %y)\n}", "2:3: add: shapes"},
		{"def @main(%x: Tensor[(2,), float32]) {\n  nn.relu(%x, bogus=1)\n}", `2:3: nn.relu: unknown attribute "bogus"`},
		{"def @main(%x: Tensor[(2,), float32]) {\n  test.attrs(%x, i=1.5)\n}", "2:3: test.attrs: attribute i: want int, got float"},
		{"def @main() {\n  constant(float32, [3], [1.0, 2.0])\n}", "2:3: constant of shape [3] needs 3 values, got 2"},
		{"def @main() {\n  constant(int8, [1], [1.5])\n}", "2:24: bad int8 value"},
		{"def @main() {\n  constant(float32, [1], [1.0]\n}", `3:1: expected ")", found "}"`},
		{"def @main() {\n  @other()\n}", "2:3: undefined function @other"},
		{"def @main(%x: Tensor[(2,), float32]) -> Tensor[(3,), float32] {\n  %x\n}", "1:1: function body has type"},
		{"def @main(%x: Tensor[(2,), float32]) {\n  \"unterminated\n}", "2:3: unterminated string"},
		{"def @main(%x: Tensor[(2,), float32]) {\n  %x /* open", "2:6: unterminated comment"},
		{"def @main(%x: Tensor[(2,), float32]) {\n  %x.0\n}", "2:3: tuple item 0 of a non-tuple"},
		{"def @main() {\n  constant(float32, [], [1.0])\n}\ndef @main() {\n  constant(float32, [], [1.0])\n}", "4:1: function @main defined twice"},
		{"def @main() {\n  @main()\n}", "2:3: recursive call of @main is not supported"},
		{"def @main(%x: Tensor[(2,), float32]) {\n  nn.relu(%x) $\n}", `2:15: unexpected character "$"`},
	}
	for _, c := range cases {
		_, err := graph.Parse(c.src, graph.ParseOptions{})
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Parse(%q):\n got  %v\n want %s...", c.src, err, c.want)
			continue
		}
		var pe *graph.ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q): error %T is not a *ParseError", c.src, err)
		}
	}
}

// TestRoundTripModels imports every model of ../shared/models and of the
// ONNX test suites (with test_data_set_0's inputs fixing input shapes and
// frozen values), prints with all constants, parses and prints again: the
// two texts must be identical. Models over 2 MB run only without -short.
func TestRoundTripModels(t *testing.T) {
	sharedDir := testenv.Shared(t)
	var dirs []string
	for _, pat := range []string{"models/*", "onnx/*/test_*"} {
		m, _ := filepath.Glob(filepath.Join(sharedDir, pat))
		dirs = append(dirs, m...)
	}
	if len(dirs) == 0 {
		t.Fatalf("no models or ONNX tests under %s", sharedDir)
	}
	imported := 0
	for _, d := range dirs {
		t.Run(filepath.Base(d), func(t *testing.T) {
			path := filepath.Join(d, "model.onnx")
			if st, err := os.Stat(path); err != nil {
				t.Fatal(err)
			} else if testing.Short() && st.Size() > 2<<20 {
				t.Skip("large model; runs without -short")
			}
			m, err := onnx.LoadFile(path, testDataOptions(d))
			if err != nil {
				t.Skipf("the importer cannot load it: %v", err)
			}
			imported++
			opts := graph.PrintOptions{InlineAllConstants: true, ShowSpans: true}
			text := printString(t, m.Module, opts)
			back, err := graph.Parse(text, graph.ParseOptions{})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if again := printString(t, back, opts); again != text {
				t.Errorf("round trip differs at %s", firstDiff(text, again))
			}
		})
	}
	if imported == 0 {
		t.Errorf("no model could be imported")
	}
}

// testDataOptions fixes input shapes and freeze values from the named
// tensors of dir/test_data_set_0/input_*.pb.
func testDataOptions(dir string) onnx.Options {
	opts := onnx.Options{InputShapes: map[string]ir.Shape{}, Freeze: map[string]*tensor.Tensor{}}
	files, _ := filepath.Glob(filepath.Join(dir, "test_data_set_0", "input_*.pb"))
	for _, f := range files {
		if tn, name, err := onnx.ReadTensorFile(f); err == nil && name != "" {
			opts.InputShapes[name] = tn.Shape
			opts.Freeze[name] = tn
		}
	}
	return opts
}

// firstDiff describes where two texts start to differ.
func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range la {
		if i >= len(lb) || la[i] != lb[i] {
			other := "<missing>"
			if i < len(lb) {
				other = lb[i]
			}
			return "line " + strconv.Itoa(i+1) + ":\n  " + trunc(la[i]) + "\n  " + trunc(other)
		}
	}
	return "the end (extra lines)"
}

func trunc(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
