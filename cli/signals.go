package cli

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/kiln-dev/kiln/driver"
)

// HandleSignals makes SIGINT and SIGTERM remove the temporary directories
// of every build in progress (driver.RemoveTempDirs: .kiln-build-* beside
// the output, kiln-hooks-*, kiln-run-* ...) before the process exits with
// 128 plus the signal number, as a shell reports it. The kiln command
// calls it first; a program that embeds the CLI may too, and then ends
// the process with Exit.
func HandleSignals() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-ch
		close(interrupted)
		driver.RemoveTempDirs()
		code := 130
		if s == syscall.SIGTERM {
			code = 143
		}
		os.Exit(code)
	}()
}

// interrupted is closed when HandleSignals' handler starts.
var interrupted = make(chan struct{})

// Exit ends the process with code, unless a signal is being handled:
// then the build it interrupted may fail on its removed directories and
// return, and Exit waits for the handler, which exits with the signal's
// status once the directories are gone.
func Exit(code int) {
	select {
	case <-interrupted:
		select {}
	default:
		os.Exit(code)
	}
}
