package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/kiln-dev/kiln/backend"
	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/device"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tir"
)

// ModuleMeta records one runtime module of an artifact besides
// kiln_lib.so: a module a target hook built that is not C source (C
// source is compiled into kiln_lib.so).
type ModuleMeta struct {
	// Kind is "dso" (a shared library) or the Kind of a Serializable
	// module, read back by the runtime.Loader registered for it.
	Kind string `json:"kind"`
	// File is the module's file, relative to the artifact directory.
	File string `json:"file"`
	// Target is the target whose hook built it.
	Target string `json:"target"`
}

// constantsFile holds the constants ConstantUpdater hooks returned.
const constantsFile = "constants.bin"

// codegenTargets splits the PrimFuncs by their target: the functions of a
// target whose kind has a TIRToRuntime hook go to that hook (once per
// target, in target-list order), the rest are returned for the default C
// code generation.
func codegenTargets(env *hookEnv, prims *tir.Module) (*tir.Module, []externalModule, error) {
	def := &tir.Module{}
	groups := map[*targets.Target]*tir.Module{}
	for _, f := range prims.Funcs() {
		t, err := funcTarget(env.cfg, f)
		if err != nil {
			return nil, nil, err
		}
		if t == nil || backend.Of(t.Kind).Hooks.TIRToRuntime == nil {
			if err := def.Add(f); err != nil {
				return nil, nil, err
			}
			continue
		}
		g := groups[t]
		if g == nil {
			g = &tir.Module{}
			groups[t] = g
		}
		if err := g.Add(f); err != nil {
			return nil, nil, err
		}
	}
	var out []externalModule
	for _, t := range env.cfg.Primitives {
		g := groups[t]
		if g == nil {
			continue
		}
		ctx, err := env.context(t)
		if err != nil {
			return nil, nil, err
		}
		m, err := backend.Of(t.Kind).Hooks.TIRToRuntime(ctx, g)
		if err != nil {
			return nil, nil, fmt.Errorf("target %s: TIRToRuntime: %w", t.Kind.Name, err)
		}
		if m == nil {
			return nil, nil, fmt.Errorf("target %s: TIRToRuntime returned no module", t.Kind.Name)
		}
		out = append(out, externalModule{target: t, module: m})
	}
	return def, out, nil
}

// composeModules puts the modules target hooks built into the artifact
// being written in dir: C source modules join the library build (opts),
// serialisable modules and shared libraries are written under modules/
// and returned for metadata.json. Any other module cannot be saved and is
// an error naming its target.
func composeModules(dir string, mods []externalModule, opts *cgen.BuildOptions) ([]ModuleMeta, error) {
	var metas []ModuleMeta
	for i, em := range mods {
		tname := em.target.Kind.Name
		switch m := em.module.(type) {
		case *runtime.CSourceModule:
			name := fmt.Sprintf("ext%d_%s.c", i, fileSafe(m.Label, tname))
			opts.ExtraSources = append(opts.ExtraSources, cgen.File{Name: name, Data: []byte(m.Code)})
			opts.Exports = append(opts.Exports, m.Funcs...)
			opts.ExtraFlags = append(opts.ExtraFlags, m.CFlags...)
			opts.LDFlags = append(opts.LDFlags, m.LDFlags...)
		case runtime.Serializable:
			data, err := m.SaveBinary()
			if err != nil {
				return nil, fmt.Errorf("target %s: saving its %s module: %w", tname, m.Kind(), err)
			}
			file := filepath.Join("modules", fmt.Sprintf("%02d_%s.%s", i, fileSafe(m.Name(), tname), fileSafe(m.Kind(), "bin")))
			if err := writeFile(dir, file, data); err != nil {
				return nil, err
			}
			metas = append(metas, ModuleMeta{Kind: m.Kind(), File: file, Target: em.target.String()})
		case *runtime.DSOModule:
			data, err := os.ReadFile(m.Path())
			if err != nil {
				return nil, fmt.Errorf("target %s: %w", tname, err)
			}
			file := filepath.Join("modules", fmt.Sprintf("%02d_%s", i, fileSafe(m.Name(), "lib.so")))
			if err := writeFile(dir, file, data); err != nil {
				return nil, err
			}
			metas = append(metas, ModuleMeta{Kind: "dso", File: file, Target: em.target.String()})
		default:
			return nil, fmt.Errorf("target %s: its hook returned a %q module (%T), which cannot be saved into an artifact; return a *runtime.CSourceModule, a runtime.Serializable or a shared library", tname, em.module.Kind(), em.module)
		}
	}
	return metas, nil
}

func writeFile(dir, rel string, data []byte) error {
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	return nil
}

// fileSafe keeps letters, digits, '_', '-' and '.' of s (def when nothing
// is left).
func fileSafe(s, def string) string {
	var b strings.Builder
	for _, c := range s {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' {
			b.WriteRune(c)
		}
	}
	if b.Len() == 0 || strings.Trim(b.String(), ".") == "" {
		return def
	}
	return b.String()
}

// targetListString prints the compilation's targets, host last.
func targetListString(cfg *device.CompilationConfig) string {
	var parts []string
	for _, t := range append(slices.DeleteFunc(slices.Clone(cfg.Primitives), func(t *targets.Target) bool { return t == cfg.Host }), cfg.Host) {
		if t != cfg.Host && t.Host == cfg.Host {
			t = t.WithHost(nil) // attached by the list, as TargetList.String leaves out
		}
		parts = append(parts, t.Labelled())
	}
	return strings.Join(parts, ", ")
}

// devicesOf lists the devices of the program's entries, sorted.
func devicesOf(g *runtime.GraphJSON) []string {
	seen := map[string]bool{}
	for _, di := range g.Attrs.DeviceIndex {
		seen[runtime.Device{Type: runtime.DeviceType(di[0]), ID: int(di[1])}.String()] = true
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// loadModules loads the artifact's extra modules (from the verified paths
// of their files) and imports them into lib.
func loadModules(dir string, md Metadata, lib runtime.Module, path map[string]string) error {
	for _, mm := range md.Modules {
		p := path[mm.File]
		var m runtime.Module
		var err error
		if mm.Kind == "dso" {
			m, err = runtime.LoadLibrary(p)
		} else {
			var data []byte
			if data, err = os.ReadFile(p); err == nil {
				m, err = runtime.LoadModule(mm.Kind, data)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: module %s (target %s): %w", dir, mm.File, mm.Target, err)
		}
		lib.Import(m)
	}
	return nil
}

// applyCCodegen merges the CCodegen customisations of the compilation's
// target kinds, in target-list order, into the C generation options
// and/or the library build options (either may be nil).
func applyCCodegen(cfg *device.CompilationConfig, gen *cgen.Options, bld *cgen.BuildOptions) {
	var replacers []func(string, []string) (string, bool)
	for _, t := range cfg.Primitives {
		cc := backend.Of(t.Kind).CCodegen
		if cc == nil {
			continue
		}
		if gen != nil {
			gen.Includes = append(gen.Includes, cc.Includes...)
			gen.DeclaredExterns = append(gen.DeclaredExterns, cc.DeclaredExterns...)
			if cc.ReplaceCallExtern != nil {
				replacers = append(replacers, cc.ReplaceCallExtern)
			}
		}
		if bld != nil {
			for _, f := range cc.Sources {
				bld.ExtraSources = append(bld.ExtraSources, cgen.File{Name: f.Name, Data: f.Data})
			}
			bld.ExtraFlags = append(bld.ExtraFlags, cc.CFlags...)
			bld.LDFlags = append(bld.LDFlags, cc.LDFlags...)
			bld.Exports = append(bld.Exports, cc.Funcs...)
		}
	}
	if gen != nil && len(replacers) > 0 {
		prev := gen.ReplaceCallExtern
		gen.ReplaceCallExtern = func(name string, args []string) (string, bool) {
			if prev != nil {
				if code, ok := prev(name, args); ok {
					return code, true
				}
			}
			for _, r := range replacers {
				if code, ok := r(name, args); ok {
					return code, true
				}
			}
			return "", false
		}
	}
}

// targetSource is the C of one code-generating CPU target other than the
// host (the big core of a big.LITTLE compilation): its PrimFuncs, compiled
// into the same library in a translation unit of their own, with that
// target's processor flags.
type targetSource struct {
	target *targets.Target
	prims  *tir.Module
	src    *cgen.Source
}

// splitByTarget splits the PrimFuncs the default C code generation
// compiles into the host's and one group per other target of a host kind
// (one that generates code for its own processor, such as a second `c`),
// in target-list order. The functions of other kinds (an external
// target's lowered PrimFuncs) are compiled with the host's.
func splitByTarget(cfg *device.CompilationConfig, prims *tir.Module) (*tir.Module, []targetSource, error) {
	host := &tir.Module{}
	groups := map[*targets.Target]*tir.Module{}
	for _, f := range prims.Funcs() {
		t, err := funcTarget(cfg, f)
		if err != nil {
			return nil, nil, err
		}
		g := host
		if t != nil && t != cfg.Host && t.Kind.Host {
			if g = groups[t]; g == nil {
				g = &tir.Module{}
				groups[t] = g
			}
		}
		if err := g.Add(f); err != nil {
			return nil, nil, err
		}
	}
	var out []targetSource
	for _, t := range cfg.Primitives {
		if g := groups[t]; g != nil {
			out = append(out, targetSource{target: t, prims: g})
		}
	}
	return host, out, nil
}

// addTargetSources adds the C of the other CPU targets to the library
// build: each file compiled with its own target's processor, optimisation
// level and -cflags. They share the library's compiler, so their
// processors must be of the host's architecture and their -cc the host's.
func addTargetSources(host *targets.Target, others []targetSource, bopts *cgen.BuildOptions) error {
	hostArch := host.Processor().Arch
	for i, o := range others {
		t := o.target
		tb := cgen.BuildOptionsForTarget(t)
		if arch := t.Processor().Arch; arch != hostArch {
			return fmt.Errorf("target %s is for %s and the host %s for %s: one library is built for one architecture (give both targets processors of one architecture)", t.Labelled(), arch, host.Labelled(), hostArch)
		}
		if tb.CC != bopts.CC {
			return fmt.Errorf("target %s compiles with -cc=%q and the host %s with %q: one library is built with one compiler", t.Labelled(), tb.CC, host.Labelled(), bopts.CC)
		}
		name := fmt.Sprintf("kiln_target%d_%s.c", i, fileSafe(t.Name(), "target"))
		bopts.ExtraSources = append(bopts.ExtraSources, cgen.File{Name: name, Data: []byte(o.src.Code),
			Own: &cgen.FileFlags{CPUFlags: append([]string{}, tb.CPUFlags...), OptLevel: tb.OptLevel, Flags: tb.ExtraFlags}})
		for _, f := range o.src.Funcs {
			bopts.Exports = append(bopts.Exports, f.Symbol)
		}
	}
	return nil
}
