// Command kiln is the kiln deep-learning compiler's command line. All the
// logic lives in package cli so that other binaries can reuse it.
package main

import (
	"os"

	"github.com/kiln-dev/kiln/cli"
)

func main() {
	cli.HandleSignals()
	cli.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
