package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/device"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/targets"
)

// TestDocsCommands runs every `$ kiln ...` command that the documentation
// of targets, labels and placement shows (README.md and docs/targets.md),
// in order, on lenet: model.onnx is the model, out and out2 artifacts in
// a temporary directory, x.npy lenet's input, place.txt the README's
// placement file. Each must exit 0. The README's placement file must
// parse.
func TestDocsCommands(t *testing.T) {
	testenv.Cgo(t)
	if cgen.HostArch() != targets.X86_64 {
		t.Skip("the documented commands name x86-64 features")
	}
	lenet := filepath.Join(sharedRoot(t), "models", "lenet")
	for _, doc := range []string{"README.md", filepath.Join("docs", "targets.md")} {
		t.Run(filepath.Base(doc), func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join("..", doc))
			if err != nil {
				t.Fatal(err)
			}
			tmp := t.TempDir()
			if block := placementFile(string(text)); block != "" {
				if _, err := device.ParseRules(block); err != nil {
					t.Errorf("%s: the placement file does not parse: %v", doc, err)
				}
				if err := os.WriteFile(filepath.Join(tmp, "place.txt"), []byte(block), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmds := docCommands(string(text))
			if len(cmds) == 0 {
				t.Fatalf("%s shows no $ kiln command", doc)
			}
			subst := map[string]string{
				"model.onnx":  filepath.Join(lenet, "model.onnx"),
				"out":         filepath.Join(tmp, "out"),
				"out2":        filepath.Join(tmp, "out2"),
				"place.txt":   filepath.Join(tmp, "place.txt"),
				"input=x.npy": "input=" + filepath.Join(lenet, "test_data_set_0", "input_0.pb"),
			}
			for _, cmd := range cmds {
				args, err := shellWords(cmd)
				if err != nil {
					t.Fatalf("%s: %q: %v", doc, cmd, err)
				}
				if len(args) < 2 || args[0] != "kiln" {
					t.Fatalf("%s: %q is not a kiln command", doc, cmd)
				}
				for i, a := range args {
					if s, ok := subst[a]; ok {
						args[i] = s
					}
				}
				if code, _, stderr := kiln(args[1:]...); code != 0 {
					t.Errorf("%s: %s: exit %d: %s", doc, cmd, code, stderr)
				}
			}
		})
	}
}

// docCommands returns the `$ kiln` lines of a document (indented or not,
// with backslash continuations joined).
func docCommands(text string) []string {
	var out []string
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "$ kiln ") {
			continue
		}
		cmd := strings.TrimPrefix(l, "$ ")
		for strings.HasSuffix(cmd, "\\") && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(cmd, "\\") + " " + strings.TrimSpace(lines[i])
		}
		out = append(out, cmd)
	}
	return out
}

// placementFile returns the fenced block that starts with
// "# placement file", or "".
func placementFile(text string) string {
	m := regexp.MustCompile("(?s)```\\s*\n\\s*(# placement file[^`]*)```").FindStringSubmatch(text)
	if m == nil {
		return ""
	}
	var b strings.Builder
	for _, l := range strings.Split(m[1], "\n") {
		fmt.Fprintln(&b, strings.TrimSpace(l))
	}
	return b.String()
}

// shellWords splits a command line as a POSIX shell would for the
// documentation's commands: words separated by spaces, '...' and "..."
// quoting (backslash escapes inside double quotes).
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated '")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated \"")
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// TestREADMESynopsisFlags: every flag the README's command synopsis shows
// is a flag of that command (kiln CMD -h lists it), so the synopsis
// cannot drift from the command line.
func TestREADMESynopsisFlags(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(text), "## The command line\n\n```\n")
	if !ok {
		t.Fatal("README.md has no command synopsis block")
	}
	block, _, _ := strings.Cut(after, "```")
	flagRE := regexp.MustCompile(`(?:^|[\s\[])--?([a-z][a-z0-9-]*)`)
	checked := 0
	for _, line := range strings.Split(block, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "kiln" {
			continue
		}
		cmd := f[1]
		_, _, help := kiln(cmd, "-h")
		// A synopsis may point at another command's flag: "(then compile --tuning ...)".
		line, _, _ = strings.Cut(line, "(then ")
		for _, m := range flagRE.FindAllStringSubmatch(line, -1) {
			if !strings.Contains(help, "\n  -"+m[1]+" ") && !strings.Contains(help, "\n  -"+m[1]+"\n") {
				t.Errorf("README: kiln %s shows --%s, which kiln %s -h does not list", cmd, m[1], cmd)
			}
			checked++
		}
	}
	if checked < 20 {
		t.Errorf("checked %d flags of the synopsis; the block was not found whole", checked)
	}
}
