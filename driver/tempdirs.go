package driver

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Temporary directories of the builds running in this process, removed
// by RemoveTempDirs when the process is interrupted (a deferred
// os.RemoveAll does not run when a signal ends the process).
var temps struct {
	sync.Mutex
	dirs map[string]bool
	// closed is set by RemoveTempDirs: the process is ending, and a
	// directory registered afterwards is removed at once.
	closed bool
}

// TrackTemp registers a temporary directory for RemoveTempDirs. After
// RemoveTempDirs has run (the process is being interrupted) it removes
// dir instead.
func TrackTemp(dir string) {
	temps.Lock()
	defer temps.Unlock()
	if temps.closed {
		removeWhileWritten(dir)
		return
	}
	if temps.dirs == nil {
		temps.dirs = map[string]bool{}
	}
	temps.dirs[dir] = true
}

// UntrackTemp forgets a directory TrackTemp registered (it was removed
// or published).
func UntrackTemp(dir string) {
	temps.Lock()
	defer temps.Unlock()
	delete(temps.dirs, dir)
}

// RemoveTempDirs removes every registered temporary directory: what a
// signal handler calls before the process exits (the CLI does on SIGINT
// and SIGTERM), so that an interrupted compile leaves no .kiln-build-*
// or kiln-hooks-* directory behind. The build goroutines keep running
// while it does, so each directory is first renamed (files they create
// afterwards under the old path fail instead of refilling it); a
// directory registered later is removed when it is registered.
func RemoveTempDirs() {
	temps.Lock()
	defer temps.Unlock()
	temps.closed = true
	for d := range temps.dirs {
		removeWhileWritten(d)
		delete(temps.dirs, d)
	}
}

// removeWhileWritten removes dir, which another goroutine or a compiler
// process may still be writing into: it renames dir to a fresh sibling
// name first, so that entries created under the old path fail, then
// removes the renamed tree, retrying a few times in case an entry was
// created through a descriptor opened before the rename (os.RemoveAll
// fails with ENOTEMPTY when its directory gains an entry meanwhile).
func removeWhileWritten(dir string) {
	if moved, err := siblingName(dir, filepath.Base(dir)+".rm-"); err == nil && os.Rename(dir, moved) == nil {
		dir = moved
	}
	for i := 0; i < 20; i++ {
		if os.RemoveAll(dir) == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TempDir creates a temporary directory (os.MkdirTemp) registered for
// RemoveTempDirs; remove it with RemoveTemp.
func TempDir(parent, pattern string) (string, error) {
	dir, err := os.MkdirTemp(parent, pattern)
	if err != nil {
		return "", err
	}
	TrackTemp(dir)
	return dir, nil
}

// RemoveTemp removes a temporary directory TempDir made and forgets it.
func RemoveTemp(dir string) {
	os.RemoveAll(dir)
	UntrackTemp(dir)
}

// removeTemp is RemoveTemp.
func removeTemp(dir string) { RemoveTemp(dir) }

// staleOldAge is how old a .kiln-old-* directory (an artifact moved aside
// while its replacement was renamed into place) must be before a later
// compile removes it.
const staleOldAge = time.Minute

// timeSince is time.Since (a variable for tests).
var timeSince = time.Since

// processAlive reports whether a process with this ID exists (or might:
// pids that cannot be checked count as alive, so nothing of theirs is
// removed).
func processAlive(pid int) bool {
	if pid <= 0 {
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
