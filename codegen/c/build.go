package c

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/runtime/include"
	"github.com/kiln-dev/kiln/target"
)

// File is an extra file written next to the generated source: a .c file
// is compiled into the library, anything else (headers) is only written
// (the directory is on the include path).
type File struct {
	Name string
	Data []byte
}

// BuildOptions configures Build.
type BuildOptions struct {
	// CC is the compiler command (it may include arguments, e.g.
	// "ccache gcc"); empty means $CC, else "cc".
	CC string
	// OptLevel is the -O level; 0 means 3 (use ExtraFlags "-O0" to turn
	// optimisation off).
	OptLevel int
	// MCPU is passed as -march=MCPU ("native" tunes for this machine).
	MCPU string
	// NoWerror drops -Werror (generated code is meant to be warning-free;
	// this is for vendor sources that are not).
	NoWerror bool
	// ExtraFlags are appended after kiln's flags (so they can override
	// them, e.g. -ffp-contract=fast).
	ExtraFlags []string
	// ExtraSources are written into the build directory; the .c files are
	// compiled into the library after kiln_lib.c.
	ExtraSources []File
	// LDFlags are linker arguments placed after the sources (libraries:
	// "-lopenblas").
	LDFlags []string
	// Output is the library file name inside dir; empty means
	// "kiln_lib.so".
	Output string
}

// BuildOptionsForTarget reads the options of a `c` target (mcpu, opt,
// cflags, cc) into BuildOptions.
func BuildOptionsForTarget(t *target.Target) BuildOptions {
	var o BuildOptions
	if t == nil {
		return o
	}
	o.MCPU = t.Str("mcpu")
	if n, ok := t.Int("opt"); ok && n > 0 {
		o.OptLevel = int(n)
	}
	o.ExtraFlags = append(o.ExtraFlags, t.Strings("cflags")...)
	o.CC = t.Str("cc")
	return o
}

// SourceName is the name of the generated source inside the build
// directory.
const SourceName = "kiln_lib.c"

// Build writes src to dir/kiln_lib.c (and the extra sources beside it),
// writes the runtime headers to dir/include/kiln/, and compiles a shared
// library dir/kiln_lib.so with
//
//	CC -O3 -std=c99 -fPIC -shared -Wall -Wextra -Werror -ffp-contract=off
//	   [-fopenmp] [-march=MCPU] -I dir/include -I dir EXTRA_FLAGS SOURCES -o LIB -lm
//
// -ffp-contract=off keeps a*b+c from being fused so that results equal
// the TIR interpreter's bit for bit. A compiler failure returns an error
// holding the compiler's (trimmed) output; the sources stay in dir for
// inspection. Build writes nothing time-dependent.
func Build(src *Source, dir string, opts BuildOptions) (string, error) {
	if src == nil {
		return "", fmt.Errorf("codegen/c: Build: nil source")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("codegen/c: %w", err)
	}
	if err := writeHeaders(filepath.Join(dir, "include")); err != nil {
		return "", err
	}
	srcPath := filepath.Join(dir, SourceName)
	if err := os.WriteFile(srcPath, []byte(src.Code), 0o644); err != nil {
		return "", fmt.Errorf("codegen/c: %w", err)
	}
	sources := []string{srcPath}
	for _, f := range opts.ExtraSources {
		if f.Name == "" || filepath.Base(f.Name) != f.Name || f.Name == SourceName {
			return "", fmt.Errorf("codegen/c: invalid extra source name %q (want a plain file name other than %s)", f.Name, SourceName)
		}
		p := filepath.Join(dir, f.Name)
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return "", fmt.Errorf("codegen/c: %w", err)
		}
		if strings.HasSuffix(f.Name, ".c") {
			sources = append(sources, p)
		}
	}
	out := opts.Output
	if out == "" {
		out = "kiln_lib.so"
	}
	libPath := filepath.Join(dir, out)
	args := CompileFlags(src, opts)
	args = append(args, "-I", filepath.Join(dir, "include"), "-I", dir)
	args = append(args, opts.ExtraFlags...)
	args = append(args, sources...)
	args = append(args, opts.LDFlags...)
	args = append(args, "-o", libPath, "-lm")
	if err := RunCompiler(dir, opts.CC, args, srcPath); err != nil {
		return "", err
	}
	return libPath, nil
}

// RunCompiler runs the C compiler (cc: explicit, else $CC, else "cc"; it
// may include arguments) with args in dir. A failure is a *CompileError
// naming source and holding the compiler's output (truncated when very
// long).
func RunCompiler(dir, cc string, args []string, source string) error {
	command := compilerCommand(cc)
	cmd := exec.Command(command[0], append(command[1:], args...)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		const max = 8000
		if len(msg) > max {
			msg = msg[:max] + "\n... (output truncated)"
		}
		return &CompileError{Compiler: command[0], Source: source, Err: err, Output: msg}
	}
	return nil
}

// CompileError is a C compiler failure: which compiler, on which source,
// how it exited, and what it printed (truncated when very long).
type CompileError struct {
	Compiler, Source string
	Err              error
	Output           string
}

// Error is one line saying what failed followed by the compiler's output.
func (e *CompileError) Error() string {
	return fmt.Sprintf("codegen/c: compiling %s with %s failed (%v):\n%s", e.Source, e.Compiler, e.Err, e.Output)
}

// Unwrap returns the compiler process's error.
func (e *CompileError) Unwrap() error { return e.Err }

// compilerCommand splits the compiler command: explicit, $CC, or "cc".
func compilerCommand(cc string) []string {
	if strings.TrimSpace(cc) == "" {
		cc = os.Getenv("CC")
	}
	f := strings.Fields(cc)
	if len(f) == 0 {
		return []string{"cc"}
	}
	return f
}

// CompileFlags are the flags Build passes before the include paths and
// ExtraFlags (exposed so that other build flows, e.g. a sanitizer test or
// an exported project's Makefile, use the same ones).
func CompileFlags(src *Source, opts BuildOptions) []string {
	o := opts.OptLevel
	if o <= 0 {
		o = 3
	}
	flags := []string{"-O" + strconv.Itoa(o), "-std=c99", "-fPIC", "-shared", "-Wall", "-Wextra"}
	if !opts.NoWerror {
		flags = append(flags, "-Werror")
	}
	flags = append(flags, "-ffp-contract=off")
	if src != nil && src.OpenMP {
		flags = append(flags, "-fopenmp")
	}
	if opts.MCPU != "" {
		flags = append(flags, "-march="+opts.MCPU)
	}
	return flags
}

// writeHeaders copies the embedded runtime headers into dir/kiln/.
func writeHeaders(dir string) error {
	return fs.WalkDir(include.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := include.FS.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			return fmt.Errorf("codegen/c: %w", err)
		}
		return nil
	})
}

// WriteHeaders writes kiln's runtime headers under dir (dir/kiln/*.h), for
// flows that compile generated sources themselves.
func WriteHeaders(dir string) error { return writeHeaders(dir) }
