package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/escape"
)

// progressDelay is how long a command runs before it shows progress:
// quick commands stay quiet.
const progressDelay = time.Second

// progress tells the user what a long command (a compile, tuning) is
// doing. On a terminal it is one line redrawn in place — the command, the
// step it is at and the time so far — shown once the command has run
// progressDelay. Elsewhere (a pipe, a file, a CI log) it prints plain
// lines: each finished step, with its time, once the command has run
// progressDelay. With quiet it prints nothing.
//
// A progress is an io.Writer: the driver's stage lines
// (driver.Config.Progress) and measured partitioning's candidate lines
// are written to it, one step per line; Set replaces the status.
type progress struct {
	w     io.Writer
	tty   bool
	quiet bool
	what  string
	start time.Time

	mu      sync.Mutex
	status  string   // the last step
	pending []string // plain lines held back until progressDelay
	flushed bool     // plain lines: the delay has passed
	drawn   bool     // terminal: a line is on screen
	partial []byte   // an unfinished line written so far
	stop    chan struct{}
	done    chan struct{}
	closing sync.Once
}

// newProgress starts reporting on w what the command does (e.g.
// "compiling resnet18"); Close ends it.
func newProgress(w io.Writer, what string, quiet bool) *progress {
	return startProgress(w, what, quiet, isTerminal(w))
}

// startProgress is newProgress with the terminal test done.
func startProgress(w io.Writer, what string, quiet, tty bool) *progress {
	p := &progress{w: w, tty: tty, quiet: quiet, what: what, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	if quiet {
		close(p.done)
		return p
	}
	go p.loop()
	return p
}

// isTerminal reports whether w is a character device (and TERM is not
// "dumb"), where a line can be redrawn with a carriage return.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// loop redraws the terminal line, or flushes the held-back plain lines,
// until Close.
func (p *progress) loop() {
	defer close(p.done)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
			p.mu.Lock()
			if time.Since(p.start) >= progressDelay {
				if p.tty {
					p.draw()
				} else {
					p.flush()
				}
			}
			p.mu.Unlock()
		}
	}
}

// draw redraws the terminal line (p.mu held).
func (p *progress) draw() {
	line := fmt.Sprintf("kiln: %s, %.1fs", p.what, time.Since(p.start).Seconds())
	if p.status != "" {
		line += " (done: " + p.status + ")"
	}
	if len(line) > 100 {
		line = line[:97] + "..."
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s", line)
	p.drawn = true
}

// flush prints the held-back plain lines (p.mu held).
func (p *progress) flush() {
	if !p.flushed {
		fmt.Fprintf(p.w, "kiln: %s ...\n", p.what)
		p.flushed = true
	}
	for _, l := range p.pending {
		fmt.Fprintf(p.w, "kiln:   %s\n", l)
	}
	p.pending = nil
}

// Write takes step lines: each complete line becomes the status (and a
// plain line).
func (p *progress) Write(b []byte) (int, error) {
	if p.quiet {
		return len(b), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		line := strings.Join(strings.Fields(string(p.partial[:i])), " ")
		p.partial = p.partial[i+1:]
		if line != "" {
			p.step(escape.Printable(line))
		}
	}
	return len(b), nil
}

// Set makes status the current step.
func (p *progress) Set(status string) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.step(escape.Printable(status))
}

// Status shows s on the terminal line only: a step too small for a line
// of its own elsewhere.
func (p *progress) Status(s string) {
	if p.quiet || !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status = escape.Printable(s)
}

func (p *progress) step(s string) {
	p.status = s
	if p.tty {
		return
	}
	p.pending = append(p.pending, s)
	if p.flushed {
		p.flush()
	}
}

// Close stops the reporting and clears the terminal line, so that what
// the command prints next starts on a clean line. Later calls do nothing.
func (p *progress) Close() {
	if p.quiet {
		return
	}
	p.closing.Do(p.close)
}

func (p *progress) close() {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	if p.flushed {
		p.flush()
	}
}
