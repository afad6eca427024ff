package cli

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the progress goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestProgress: a command shorter than progressDelay shows nothing; a
// longer one shows plain lines (not a terminal) or one redrawn line that
// is cleared at the end (a terminal); quiet shows nothing.
func TestProgress(t *testing.T) {
	var quick syncBuffer
	p := startProgress(&quick, "compiling m", false, false)
	p.Write([]byte("  import 1ms\n"))
	p.Close()
	if quick.String() != "" {
		t.Errorf("a quick command printed %q", quick.String())
	}

	for _, tty := range []bool{false, true} {
		var out syncBuffer
		p := startProgress(&out, "compiling m", false, tty)
		p.Write([]byte("  graph-passes   411ms\n  lo"))
		time.Sleep(progressDelay + 400*time.Millisecond)
		p.Write([]byte("wer 13ms\n"))
		p.Set("link\x1b[31m")
		p.Close()
		got := out.String()
		if !tty {
			want := "kiln: compiling m ...\nkiln:   graph-passes 411ms\nkiln:   lower 13ms\nkiln:   link\\x1b[31m\n"
			if got != want {
				t.Errorf("plain lines:\n%q\nwant\n%q", got, want)
			}
			continue
		}
		if !strings.Contains(got, "\r\x1b[Kkiln: compiling m, 1.") || !strings.Contains(got, "(done: graph-passes 411ms)") || !strings.HasSuffix(got, "\r\x1b[K") {
			t.Errorf("terminal: %q", got)
		}
		if strings.Contains(got, "\n") {
			t.Errorf("terminal: a line break in %q", got)
		}
	}

	var quiet syncBuffer
	p = startProgress(&quiet, "compiling m", true, true)
	time.Sleep(progressDelay + 300*time.Millisecond)
	p.Write([]byte("x 1ms\n"))
	p.Close()
	if quiet.String() != "" {
		t.Errorf("quiet printed %q", quiet.String())
	}
}
