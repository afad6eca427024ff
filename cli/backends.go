package cli

import (
	_ "github.com/kiln-dev/kiln/backend/cblas"     // registers itself
	_ "github.com/kiln-dev/kiln/backend/ccompiler" // registers itself
	_ "github.com/kiln-dev/kiln/backend/dnnl"      // registers itself
	_ "github.com/kiln-dev/kiln/backend/mcunn"     // registers itself
	"github.com/kiln-dev/kiln/targets"
	ultratrail "github.com/kiln-dev/kiln/uma/examples/ultra_trail"
	vanilla "github.com/kiln-dev/kiln/uma/examples/vanilla_accelerator"
)

// The external backends built into the kiln command are in targets.Default,
// the registry -t is parsed against: ccompiler, dnnl, cblas and mcunn register
// themselves when imported (dnnl with the runtime loader of its modules,
// so kiln run finds it); the UMA examples are registered here, as a
// vendor's own command (a main package calling cli.Main) registers its
// kinds before calling Main.
func init() {
	for _, register := range []func(*targets.Registry) error{vanilla.Register, ultratrail.Register} {
		if err := register(targets.Default); err != nil {
			panic(err) // a built-in name registered twice: a programming error
		}
	}
}
