package driver

import (
	"fmt"
	"os"
	"path/filepath"
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

// codegenTargets splits the PrimFuncs by their "target" attribute: the
// functions of a kind with a TIRToRuntime hook go to that hook (once per
// kind, in target-list order), the rest are returned for the default C
// code generation.
func codegenTargets(env *hookEnv, prims *tir.Module) (*tir.Module, []externalModule, error) {
	byKind := map[string]*targets.Target{}
	for _, t := range env.cfg.Primitives {
		byKind[t.Kind.Name] = t
	}
	def := &tir.Module{}
	groups := map[*targets.Target]*tir.Module{}
	for _, f := range prims.Funcs() {
		kind, _ := f.Attrs[tir.AttrTarget].(string)
		t := byKind[kind]
		if kind == "" || t == nil || backend.Of(t.Kind).Hooks.TIRToRuntime == nil {
			if kind != "" && t == nil {
				return nil, nil, fmt.Errorf("PrimFunc %s is for target kind %q, which is not among the compilation's targets %v", f.Name, kind, targetNames(env.cfg))
			}
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
	for _, t := range cfg.Primitives {
		if t != cfg.Host {
			parts = append(parts, t.String())
		}
	}
	return strings.Join(append(parts, cfg.Host.String()), ", ")
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
