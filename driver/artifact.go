package driver

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// What kiln checks of an artifact directory, before anything in it is
// loaded or replaced:
//
//   - MarkerFile, written only by kiln, marks a directory as a kiln
//     artifact: `compile -o DIR` replaces DIR only when it holds the
//     marker (or is empty), and never when DIR is the working directory,
//     one of its parents, the file system root or $HOME (or a parent).
//   - Every file metadata.json names is a plain relative path inside the
//     artifact (no absolute path, no "..", no symbolic link that leads
//     outside).
//   - metadata.json records the SHA-256 of every file that is loaded or
//     run (the library, graph program, parameters, constants, modules and
//     the AOT program); LoadArtifact compares them before it opens any.
//
// The hashes sit beside the files they check, so they catch corruption
// and mixed-up files (a truncated or swapped kiln_lib.so, another
// model's params.bin), not a stranger's deliberate edit: an artifact
// holds native code, and loading one is running a program — trust it as
// you would an executable. What an edited graph.json can do is bounded
// anyway: the runtime calls only functions of the library's own table
// (runtime.RegistrySymbol).

// MarkerFile marks a directory kiln wrote (an artifact, or a build in
// progress); its content is markerText.
const MarkerFile = ".kiln-artifact"

// markerText is the marker's exact content.
const markerText = "kiln artifact directory; kiln compile -o may replace it\n"

// buildPIDFile, inside a temporary build directory, holds the process ID
// of the kiln that is writing it, so that a later compile can tell a
// stale build (its process gone) from a running one.
const buildPIDFile = ".kiln-build-pid"

// writeMarker writes the marker into dir.
func writeMarker(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, MarkerFile), []byte(markerText), 0o644); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	return nil
}

// hasMarker reports whether dir holds kiln's marker as a regular file
// with the exact content kiln writes.
func hasMarker(dir string) bool {
	p := filepath.Join(dir, MarkerFile)
	st, err := os.Lstat(p)
	if err != nil || !st.Mode().IsRegular() || st.Size() != int64(len(markerText)) {
		return false
	}
	data, err := os.ReadFile(p)
	return err == nil && string(data) == markerText
}

// protectedDir reports why kiln must never replace dir (an absolute,
// symlink-free path): it is the root, the working directory or one of its
// parents, or $HOME or one of its parents. It returns "" otherwise.
func protectedDir(dir string) string {
	if dir == filepath.Dir(dir) {
		return "it is the root of the file system"
	}
	within := func(parent, p string) bool {
		rel, err := filepath.Rel(parent, p)
		return err == nil && (rel == "." || filepath.IsLocal(rel))
	}
	if wd, err := os.Getwd(); err == nil {
		if wd, err = realPath(wd); err == nil && within(dir, wd) {
			return "it is the current directory or one of its parents"
		}
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		if home, err = realPath(home); err == nil && within(dir, home) {
			return "it is your home directory or one of its parents"
		}
	}
	return ""
}

// realPath is the absolute path of p with symbolic links resolved.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// replaceDir moves the finished build tmp (a sibling of out) into place
// as out. An existing out is replaced only when it is an empty directory
// or an artifact kiln wrote (it holds MarkerFile); anything else — a
// file, a symbolic link, a directory without the marker, the working
// directory, a parent of it, $HOME — is refused with an error saying why,
// so that a typo in -o cannot delete a user's files. The old artifact is
// moved aside before the new one takes its place and removed after.
func replaceDir(tmp, out string) error {
	if err := os.Remove(filepath.Join(tmp, buildPIDFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("build: %w", err)
	}
	if err := writeMarker(tmp); err != nil {
		return err
	}
	st, err := os.Lstat(out)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.Rename(tmp, out); err != nil {
			return fmt.Errorf("build: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	refuse := func(why string) error {
		return fmt.Errorf("build: refusing to replace %s: %s (choose another -o directory, or remove it yourself)", out, why)
	}
	switch {
	case st.Mode()&os.ModeSymlink != 0:
		return refuse("it is a symbolic link")
	case !st.IsDir():
		return refuse("it exists and is not a directory")
	}
	real, err := realPath(out)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	if why := protectedDir(real); why != "" {
		return refuse(why)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	if len(entries) == 0 {
		if err := os.Remove(out); err != nil {
			return fmt.Errorf("build: %w", err)
		}
		if err := os.Rename(tmp, out); err != nil {
			return fmt.Errorf("build: %w", err)
		}
		return nil
	}
	if !hasMarker(out) {
		return refuse(fmt.Sprintf("it is not empty and not a kiln artifact (it has no %s file)", MarkerFile))
	}
	old, err := siblingName(out, ".kiln-old-")
	if err != nil {
		return err
	}
	if err := os.Rename(out, old); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		if rerr := os.Rename(old, out); rerr != nil {
			return fmt.Errorf("build: %w (and the previous artifact stays at %s: %v)", err, old, rerr)
		}
		return fmt.Errorf("build: %w", err)
	}
	return os.RemoveAll(old)
}

// siblingName returns an unused name prefix+random in out's directory.
func siblingName(out, prefix string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("build: %w", err)
	}
	return filepath.Join(filepath.Dir(filepath.Clean(out)), prefix+hex.EncodeToString(b[:])), nil
}

// newBuildDir creates the temporary directory a build is written to: a
// sibling of out (so the final rename stays on one file system) named
// .kiln-build-*, holding kiln's marker and the PID of this process. It is
// registered for removal on SIGINT/SIGTERM (see CleanupOnSignal).
func newBuildDir(out string) (string, error) {
	parent := filepath.Dir(filepath.Clean(out))
	removeStaleBuilds(parent)
	tmp, err := os.MkdirTemp(parent, ".kiln-build-")
	if err != nil {
		return "", fmt.Errorf("build: %w", err)
	}
	pid := []byte(fmt.Sprint(os.Getpid()))
	if err := os.WriteFile(filepath.Join(tmp, buildPIDFile), pid, 0o644); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("build: %w", err)
	}
	if err := writeMarker(tmp); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	TrackTemp(tmp)
	return tmp, nil
}

// removeStaleBuilds removes the .kiln-build-* and .kiln-old-* directories
// in parent that an interrupted kiln left: only directories holding
// kiln's marker whose recorded process is no longer running (.kiln-old-*
// are artifacts moved aside, removed when they hold the marker and are
// older than a minute). Nothing else is touched.
func removeStaleBuilds(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !(strings.HasPrefix(name, ".kiln-build-") || strings.HasPrefix(name, ".kiln-old-")) {
			continue
		}
		dir := filepath.Join(parent, name)
		if !hasMarker(dir) {
			continue
		}
		if strings.HasPrefix(name, ".kiln-build-") {
			data, err := os.ReadFile(filepath.Join(dir, buildPIDFile))
			if err != nil {
				continue
			}
			var pid int
			if _, err := fmt.Sscan(string(data), &pid); err != nil || processAlive(pid) {
				continue
			}
		} else if info, err := e.Info(); err != nil || timeSince(info.ModTime()) < staleOldAge {
			continue
		}
		os.RemoveAll(dir)
	}
}

// checkRel checks that rel, a path metadata.json names, is a plain
// relative path inside the artifact dir: not absolute, no "..", and,
// after resolving symbolic links, still inside dir. It returns the path
// to open.
func checkRel(dir, rel string) (string, error) {
	if rel == "" || !filepath.IsLocal(rel) || strings.Contains(rel, `\`) {
		return "", fmt.Errorf("metadata.json names %q, which is not a relative path inside the artifact", rel)
	}
	root, err := realPath(dir)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, rel)
	real, err := realPath(p)
	if err != nil {
		return "", fmt.Errorf("%s: %w", rel, err)
	}
	if r, err := filepath.Rel(root, real); err != nil || !filepath.IsLocal(r) {
		return "", fmt.Errorf("%s leads outside the artifact (to %s)", rel, real)
	}
	return p, nil
}

// hashFile is the hex SHA-256 of the file at p.
func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return hashReader(f)
}

// hashReader is the hex SHA-256 of what r holds.
func hashReader(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// recordHashes fills md.Files with the SHA-256 of each named file of the
// build directory dir.
func recordHashes(dir string, md *Metadata, names ...string) error {
	md.Files = map[string]string{}
	for _, n := range names {
		h, err := hashFile(filepath.Join(dir, n))
		if err != nil {
			return fmt.Errorf("build: %w", err)
		}
		md.Files[filepath.ToSlash(n)] = h
	}
	return nil
}

// verifyFile checks rel (confined to dir) against its recorded hash and
// returns the path to open.
func verifyFile(dir string, md *Metadata, rel string) (string, error) {
	p, err := checkRel(dir, rel)
	if err != nil {
		return "", fmt.Errorf("%s: %w", dir, err)
	}
	want, ok := md.Files[filepath.ToSlash(rel)]
	if !ok {
		return "", fmt.Errorf("%s: metadata.json records no content hash for %s (an artifact of an older kiln? compile it again)", dir, rel)
	}
	got, err := hashFile(p)
	if err != nil {
		return "", fmt.Errorf("%s: %w", dir, err)
	}
	if got != want {
		return "", fmt.Errorf("%s: %s: content hash mismatch (the file is corrupt or was replaced; compile the model again)", dir, rel)
	}
	return p, nil
}
