package driver

import (
	"strings"
	"testing"
)

func TestGoBuildID(t *testing.T) {
	head := []byte("\x7fELF....\xff Go build ID: \"abc/def-123\"\n \xff....")
	if id, ok := goBuildID(head); !ok || id != "abc/def-123" {
		t.Errorf("goBuildID = %q, %v", id, ok)
	}
	for _, bad := range []string{"no id here", "\xff Go build ID: \"unterminated", "\xff Go build ID: \"\""} {
		if id, ok := goBuildID([]byte(bad)); ok {
			t.Errorf("goBuildID(%q) = %q, want none", bad, id)
		}
	}
	note := append([]byte{4, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0}, "Go\x00\x00xyz"...)
	if id, ok := noteBuildID(note); !ok || id != "xyz" {
		t.Errorf("noteBuildID = %q, %v", id, ok)
	}
	if id, ok := noteBuildID(note[:18]); ok {
		t.Errorf("noteBuildID of a truncated note = %q", id)
	}
	// The test binary is a Go executable: its own ID is found, so
	// another build measures again.
	if id := executableID(); !strings.HasPrefix(id, "go build id ") {
		t.Errorf("executableID() = %q, want the Go build ID", id)
	}
}
