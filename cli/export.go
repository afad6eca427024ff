package cli

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-dev/kiln/internal/escape"

	"github.com/kiln-dev/kiln/aot"
	"github.com/kiln-dev/kiln/driver"
)

func runExport(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("export", "OUT --format c-project [-o DIR] [--weights c-array|blob]", stderr)
	format := fs.String("format", "", "export format: c-project")
	out := fs.String("o", "", "directory to create (default: OUT's name without .kiln, plus _c)")
	weights := fs.String("weights", "", "c-array: write the weights as a C array (default: as in the artifact)")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	if *format != "c-project" {
		fmt.Fprintf(stderr, "kiln export: --format %q: want c-project\n", *format)
		return exitUsage
	}
	if *weights != "" && *weights != "c-array" && *weights != "blob" {
		fmt.Fprintf(stderr, "kiln export: --weights %q: want c-array or blob\n", *weights)
		return exitUsage
	}
	src := pos[0]
	art, err := driver.LoadArtifact(src)
	if err != nil {
		return fail(stderr, "export", err)
	}
	art.Close()
	md := art.Metadata
	if md.AOT == nil {
		return fail(stderr, "export", fmt.Errorf("%s was compiled for the graph executor; a C project needs kiln compile --executor aot", src))
	}
	dir := *out
	if dir == "" {
		dir = strings.TrimSuffix(filepath.Base(filepath.Clean(src)), ".kiln") + "_c"
	}
	if _, err := os.Stat(dir); err == nil {
		return fail(stderr, "export", fmt.Errorf("%s already exists; choose another directory with -o", dir))
	}
	files, err := projectFiles(src, md)
	if err != nil {
		return fail(stderr, "export", err)
	}
	blob := aot.BlobName(md.AOT.Module)
	data, hasBlob := files[blob]
	switch {
	case *weights == "c-array" && hasBlob:
		delete(files, blob)
		files[aot.ConstantsName(md.AOT.Module)] = []byte(aot.ConstantsCArray(md.AOT.Module, data))
	case *weights == "blob" && !hasBlob:
		return fail(stderr, "export", fmt.Errorf("%s holds its weights as a C array; compile with --weights blob for a binary pool", src))
	}
	files["README.md"] = []byte(projectReadme(md))
	if err := writeTree(dir, files); err != nil {
		return fail(stderr, "export", err)
	}
	a := md.AOT
	fmt.Fprintf(stdout, "exported %s to %s: %d files, workspace %d bytes, constants %d bytes; build with: make -C %s\n", src, dir, len(files), a.WorkspaceBytes, a.ConstantsBytes, dir)
	return exitOK
}

// projectFiles reads the C project out of an AOT artifact: everything but
// metadata.json and the built program.
func projectFiles(dir string, md driver.Metadata) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			// A symbolic link or device in an artifact is not part of the
			// project kiln wrote: never read what it points to.
			return fmt.Errorf("%s is not a regular file; the artifact was altered", p)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "metadata.json" || rel == md.AOT.Binary || rel == driver.MarkerFile {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	return files, err
}

// writeTree writes files (relative paths) into a new directory dir via a
// temporary directory renamed at the end: no partial project is left.
func writeTree(dir string, files map[string][]byte) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".*")
	if err != nil {
		return err
	}
	for rel, data := range files {
		p := filepath.Join(tmp, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
			err = os.WriteFile(p, data, 0o644)
		}
		if err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, abs); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return nil
}

// projectReadme describes an exported project.
func projectReadme(md driver.Metadata) string {
	a := md.AOT
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: kiln ahead-of-time C project\n\n", a.Module)
	fmt.Fprintf(&b, "Compiled by kiln %s for %s. No malloc, no OpenMP, no runtime library:\n", md.Kiln, escape.Markdown(md.Target))
	fmt.Fprintf(&b, "`kiln_%s_run(&inputs, &outputs)` (see `kiln_%s.h`) runs the model with a\n", a.Module, a.Module)
	fmt.Fprintf(&b, "static workspace of %d bytes (liveness lower bound %d) and %d bytes of constants.\n\n", a.WorkspaceBytes, a.LowerBound, a.ConstantsBytes)
	b.WriteString("| input | dtype | shape |\n| --- | --- | --- |\n")
	for _, in := range md.Inputs {
		fmt.Fprintf(&b, "| %s | %s | %v |\n", escape.Markdown(in.Name), in.DType, in.Shape)
	}
	b.WriteString("\n| output | dtype | shape |\n| --- | --- | --- |\n")
	for _, o := range md.Outputs {
		fmt.Fprintf(&b, "| %s | %s | %v |\n", escape.Markdown(o.Name), o.DType, o.Shape)
	}
	fmt.Fprintf(&b, "\nOn a host: `make`, then `./kiln_%s INPUTS... OUTPUTS...` (raw little-endian\nbinary files, inputs then outputs in the order above).\n\n", a.Module)
	fmt.Fprintf(&b, "For a microcontroller, compile every `.c` file except `main.c` into the firmware,\nfor example for a Cortex-M4:\n\n")
	fmt.Fprintf(&b, "    arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 \\\n        -O2 -std=c11 -ffp-contract=off -DKILN_NO_THREADS -Iinclude -I. -c kiln_*.c\n")
	return b.String()
}
