package cli

import (
	"flag"
	"fmt"
	"io"

	cgen "github.com/kiln-dev/kiln/codegen/c"
)

// cacheFlags is --no-cache, shared by the commands that compile a model:
// compiled objects are kept in kiln's cache ($XDG_CACHE_HOME/kiln, else
// ~/.cache/kiln) unless it is given.
type cacheFlags struct {
	off bool
}

func (c *cacheFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&c.off, "no-cache", false, "compile again instead of taking the unchanged artifact (kiln compile) or unchanged C translation units from kiln's cache ($XDG_CACHE_HOME/kiln)")
}

// open returns the cache to compile with, or nil with --no-cache. A
// cache that cannot be used (no home directory, a directory other users
// may write) is a warning on stderr, not an error: the compile goes on
// without it.
func (c *cacheFlags) open(stderr io.Writer) *cgen.Cache {
	if c.off {
		return nil
	}
	cache, err := cgen.OpenDefaultCache()
	if err == nil {
		return cache
	}
	fmt.Fprintf(stderr, "kiln: warning: compiling without a cache: %v\n", err)
	return nil
}
