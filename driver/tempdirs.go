package driver

import (
	"errors"
	"os"
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
}

// TrackTemp registers a temporary directory for RemoveTempDirs.
func TrackTemp(dir string) {
	temps.Lock()
	defer temps.Unlock()
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
// or kiln-hooks-* directory behind.
func RemoveTempDirs() {
	temps.Lock()
	defer temps.Unlock()
	for d := range temps.dirs {
		os.RemoveAll(d)
		delete(temps.dirs, d)
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
