package cli

import (
	"bufio"
	"bytes"
	"embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
)

//go:embed scaffold/*.tmpl
var scaffoldFS embed.FS

// scaffoldFiles maps each template to the file it becomes (NAME and PKG
// are replaced).
var scaffoldFiles = []struct{ tmpl, file string }{
	{"backend.go.tmpl", "PKG.go"},
	{"backend_test.go.tmpl", "PKG_test.go"},
	{"kernel.c.tmpl", "kernel/NAME.c"},
	{"kernel.h.tmpl", "kernel/NAME.h"},
	{"main.go.tmpl", "cmd/kiln-NAME/main.go"},
	{"README.md.tmpl", "README.md"},
}

// backendName is what a scaffolded backend may be called: a target kind
// name that is also a C identifier prefix.
var backendName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// scaffoldData fills the templates.
type scaffoldData struct {
	Name, Pkg, Guard, ImportPath string
}

func runNewBackend(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("new-backend", "NAME [-o DIR] [--import-path PATH]", stderr)
	out := fs.String("o", "", "directory to create (default: ./NAME)")
	importPath := fs.String("import-path", "", "Go import path of the new package (default: from the go.mod above DIR)")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	name := pos[0]
	if !backendName.MatchString(name) || name == "c" {
		fmt.Fprintf(stderr, "kiln new-backend: name %q: want lower-case letters, digits and '_', starting with a letter (and not \"c\")\n", name)
		return exitUsage
	}
	dir := *out
	if dir == "" {
		dir = name
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fail(stderr, "new-backend", err)
	}
	if _, err := os.Stat(abs); err == nil {
		return fail(stderr, "new-backend", fmt.Errorf("%s already exists; choose another directory with -o", dir))
	}
	data := scaffoldData{Name: name, Pkg: strings.ReplaceAll(name, "_", ""), Guard: strings.ToUpper(name), ImportPath: *importPath}
	if data.ImportPath == "" {
		if data.ImportPath, err = modulePathFor(abs); err != nil {
			return fail(stderr, "new-backend", fmt.Errorf("%v; give the package's import path with --import-path", err))
		}
	}
	if !validImportPath(data.ImportPath) {
		return fail(stderr, "new-backend", fmt.Errorf("import path %q: want letters, digits and - . _ ~ / only (it is written into Go source)", data.ImportPath))
	}
	if err := writeScaffold(abs, data); err != nil {
		return fail(stderr, "new-backend", err)
	}
	fmt.Fprintf(stdout, "created %s (package %s, %s): fill in the TODOs, then\n  go test %s/...\n  go run %s/cmd/kiln-%s compile MODEL.onnx -t \"%s, c\"\n",
		dir, data.Pkg, data.ImportPath, data.ImportPath, data.ImportPath, name, name)
	return exitOK
}

// writeScaffold renders the templates and writes them into the new
// directory dir (writeTree: all or nothing).
func writeScaffold(dir string, data scaffoldData) error {
	files := map[string][]byte{}
	for _, f := range scaffoldFiles {
		t, err := template.ParseFS(scaffoldFS, "scaffold/"+f.tmpl)
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return err
		}
		files[strings.NewReplacer("NAME", data.Name, "PKG", data.Pkg).Replace(f.file)] = b.Bytes()
	}
	return writeTree(dir, files)
}

// modulePathFor derives the import path of directory dir from the go.mod
// of the module containing it.
func modulePathFor(dir string) (string, error) {
	for root := filepath.Dir(dir); ; root = filepath.Dir(root) {
		f, err := os.Open(filepath.Join(root, "go.mod"))
		if err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if mod, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
					rel, err := filepath.Rel(root, dir)
					if err != nil {
						return "", err
					}
					return strings.Trim(strings.TrimSpace(mod), `"`) + "/" + filepath.ToSlash(rel), nil
				}
			}
			return "", fmt.Errorf("%s/go.mod has no module line", root)
		}
		if filepath.Dir(root) == root {
			return "", fmt.Errorf("%s is not inside a Go module (no go.mod above it)", dir)
		}
	}
}

// validImportPath reports whether p can be written into an import
// declaration verbatim: non-empty, made of the characters Go module paths
// use, no leading or trailing slash, no empty or dot-only element.
func validImportPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return false
	}
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~/", r)) {
			return false
		}
	}
	for _, el := range strings.Split(p, "/") {
		if el == "" || el == "." || el == ".." {
			return false
		}
	}
	return true
}
