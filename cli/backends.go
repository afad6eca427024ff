package cli

import (
	"github.com/kiln-dev/kiln/backend/cblas"
	"github.com/kiln-dev/kiln/backend/ccompiler"
	"github.com/kiln-dev/kiln/backend/dnnl"
	"github.com/kiln-dev/kiln/targets"
	ultratrail "github.com/kiln-dev/kiln/uma/examples/ultra_trail"
	vanilla "github.com/kiln-dev/kiln/uma/examples/vanilla_accelerator"
)

// The external backends built into the kiln command are registered in
// targets.Default, the registry -t is parsed against (dnnl's Register also
// registers the runtime loader of its modules, so kiln run finds it). A
// vendor's own command (a main package calling cli.Main) registers its
// kinds the same way before calling Main.
func init() {
	for _, register := range []func(*targets.Registry) error{ccompiler.Register, dnnl.Register, cblas.Register, vanilla.Register, ultratrail.Register} {
		if err := register(targets.Default); err != nil {
			panic(err) // a built-in name registered twice: a programming error
		}
	}
}
