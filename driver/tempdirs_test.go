package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestRemoveWhileWritten removes a directory while a goroutine keeps
// creating files in it, as an interrupted build does: nothing may be
// left in its parent, neither the directory nor its renamed copy.
func TestRemoveWhileWritten(t *testing.T) {
	for round := 0; round < 20; round++ {
		parent := t.TempDir()
		dir := filepath.Join(parent, ".kiln-build-x")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 200; i++ {
			os.WriteFile(filepath.Join(dir, fmt.Sprint("old", i)), []byte("x"), 0o644)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				os.WriteFile(filepath.Join(dir, fmt.Sprint("new", i)), []byte("x"), 0o644)
			}
		}()
		removeWhileWritten(dir)
		close(stop)
		wg.Wait()
		left, _ := filepath.Glob(filepath.Join(parent, "*"))
		if len(left) > 0 {
			t.Fatalf("round %d: left behind %v", round, left)
		}
	}
}

// TestTrackTempAfterRemove: once RemoveTempDirs has run (the process is
// ending), a directory registered afterwards is removed at once.
func TestTrackTempAfterRemove(t *testing.T) {
	temps.Lock()
	saved, savedClosed := temps.dirs, temps.closed
	temps.dirs, temps.closed = nil, false
	temps.Unlock()
	t.Cleanup(func() {
		temps.Lock()
		temps.dirs, temps.closed = saved, savedClosed
		temps.Unlock()
	})
	before := filepath.Join(t.TempDir(), "before")
	os.Mkdir(before, 0o755)
	TrackTemp(before)
	RemoveTempDirs()
	after := filepath.Join(t.TempDir(), "after")
	os.Mkdir(after, 0o755)
	TrackTemp(after)
	for _, d := range []string{before, after} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s: still there (%v)", d, err)
		}
	}
}
