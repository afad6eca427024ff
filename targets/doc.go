// Package targets describes what kiln compiles for. It is a leaf: it
// imports only package ir (no IR, no cgo), so every stage can depend on it.
//
// A Kind is a registered family of targets (the host C compiler "c", an
// external library such as "dnnl", an accelerator) with a device type,
// default keys, typed options and optionally its part in the compilation
// flow (Kind.Flow, a *backend.Flow of package backend). A Target is one
// configured instance of a kind. Later stages look up
// everything target-specific (operator strategies, compilation hooks) from
// the Target they were handed, never from ad-hoc maps or by string name.
//
// # Target strings
//
// Parse (see parse.go) accepts three spellings of a target:
//
//	c -mcpu=native -opt=2 -cflags="-O2 -g",-DX   kind, then -name=value options
//	{"kind": "c", "mcpu": "native", "host": {"kind": "c"}}   a JSON object
//	x86-avx512 -opt=2                             a registered tag, then overrides
//
// Target.String prints the first form and Target.JSON the second; both
// parse back to an Equal target. ParseList reads a comma-separated list of
// targets ("dnnl, c -mcpu=native") and picks the host.
//
// # Hooks
//
// A Kind may take over parts of the compilation flow with typed hooks held
// in its Flow (package backend: backend.Flow.Hooks): RelayToRuntime (a
// partitioned function straight to a runtime module), RelayToTIR (a module
// pass turning the target's functions into PrimFuncs), TIRToRuntime (the
// target's PrimFuncs to a runtime module, replacing the default C codegen)
// and ConstantUpdater (the constants a target's module needs). This
// package sees only their names (Flow.HookNames), for `kiln targets`.
//
// # Labels
//
// A LabelRegistry names targets statically ("little" -> c -mcpu=cortex-a53);
// a Labels value adds per-compilation labels (from --target-label flags,
// ParseLabelFlag) on top of one. Labels.Lookup resolves "label" or
// "label:device_id" to a target and a device id.
//
// # Describing
//
// Describe lists the registered kinds (options, hooks) for `kiln targets`;
// WriteText formats that list for people.
package targets
