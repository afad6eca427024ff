package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	cgen "github.com/kiln-dev/kiln/codegen/c"
	"github.com/kiln-dev/kiln/driver"
	"github.com/kiln-dev/kiln/targets"
)

// How each of compile's flags bears on the artifact cache (kiln compile
// restores a whole artifact from kiln's cache when nothing it depends on
// changed). A flag missing from compileFlagRoles disables the cache, so
// that a new flag never yields a stale artifact; TestCompileFlagRoles
// checks that every flag is listed.
type flagRole int

const (
	// roleOutput flags do not change the artifact (where it goes, what
	// is printed while compiling).
	roleOutput flagRole = iota
	// roleValue flags' values are part of the key.
	roleValue
	// roleFile flags name a file whose content is part of the key.
	roleFile
	// roleAssignFile flags are NAME=FILE; the name and the file's
	// content are part of the key.
	roleAssignFile
	// roleCompile flags ask for what only a compile does or prints (IR
	// dumps, verifiers, stage statistics, reports): the compile runs.
	roleCompile
)

var compileFlagRoles = map[string]flagRole{
	"o": roleOutput, "force": roleOutput, "quiet": roleOutput,

	"t": roleValue, "executor": roleValue, "interface-api": roleValue, "unpacked-api": roleValue,
	"weights": roleValue, "opt-level": roleValue, "disable-pass": roleValue, "pass-config": roleValue,
	"no-fuse": roleValue, "link-params": roleValue, "require-offload": roleValue, "input-shape": roleValue,
	"target-label": roleValue, "place": roleValue, "partition": roleValue, "partition-threads": roleValue,
	// A hit imports nothing, so -max-memory bounds nothing then; it is
	// part of the key all the same, so that a compile that would fail
	// under a lower budget is not answered from the cache.
	"max-memory": roleValue,

	"tuning": roleFile, "placement": roleFile, "freeze": roleAssignFile,

	"no-cache": roleCompile, "v": roleCompile, "dump-graph": roleCompile, "dump-dir": roleCompile,
	"dump-after": roleCompile, "verify": roleCompile, "report-json": roleCompile, "report-html": roleCompile,
	"print-pipeline": roleCompile, "explain": roleCompile,
}

// artifactKey computes the artifact cache key of a compile from its
// flags, the model (path, its recorded source, the module name) and the
// resolved targets. ok is false when the compile cannot come from the
// cache (a flag asks for the compile itself, a file cannot be read).
func artifactKey(fs *flag.FlagSet, place *placement, source *driver.SourceMeta, module string) (key string, ok bool) {
	k := driver.NewArtifactKey()
	k.Add("model", source.Model, source.SHA256, "module", module)
	ok = true
	fs.Visit(func(f *flag.Flag) {
		role, known := compileFlagRoles[f.Name]
		if !known {
			ok = false
			return
		}
		vals := []string{f.Value.String()}
		if l, isList := f.Value.(*listFlag); isList {
			vals = *l
		}
		switch role {
		case roleValue:
			k.Add("flag", f.Name)
			k.Add(vals...)
		case roleFile:
			if k.AddFile(f.Name, f.Value.String()) != nil {
				ok = false
			}
		case roleAssignFile:
			for _, v := range vals {
				name, file, _ := strings.Cut(v, "=")
				k.Add("assign", f.Name, name)
				if k.AddFile(f.Name, file) != nil {
					ok = false
				}
			}
		case roleCompile:
			ok = false
		}
	})
	if !ok {
		return "", false
	}
	// The resolved targets: -mcpu=native (or none) is this machine's
	// processor, and each C compiler's identity.
	ccs := map[string]bool{"": true}
	all := append([]*targets.Target{place.list.Host}, place.list.Targets...)
	for _, t := range all {
		for u := t; u != nil; u = u.Host {
			k.Add("target", u.String(), fmt.Sprint(u.Processor()))
			if u.Kind.Option("cc") != nil {
				ccs[u.Str("cc")] = true
			}
		}
	}
	for _, cc := range sortedKeys(ccs) {
		k.Add("cc", cc, cgen.CompilerStamp(cc))
	}
	for _, v := range []string{"ONEDNN_MAX_CPU_ISA", "KILN_TIR_VERIFY"} {
		k.Add("env", v, os.Getenv(v))
	}
	return k.Sum(), true
}

// artifactCache is the compile's use of kiln's artifact cache: its key,
// or nothing when the compile cannot use it.
type artifactCache struct {
	cache *driver.ArtifactCache
	key   string
}

// openArtifactCache opens the artifact cache beside the object cache
// objs (nil: --no-cache, or no cache) for a compile; it returns nil when
// the compile cannot use it.
func openArtifactCache(objs *cgen.Cache, fs *flag.FlagSet, place *placement, source *driver.SourceMeta, module string) *artifactCache {
	if objs == nil {
		return nil
	}
	key, ok := artifactKey(fs, place, source, module)
	if !ok {
		return nil
	}
	c, err := driver.OpenArtifactCache(objs.Dir())
	if err != nil {
		return nil // the object cache opened, so this is rare; compile
	}
	return &artifactCache{cache: c, key: key}
}

// restore puts the cached artifact at out when the cache holds one whose
// external files are unchanged (relative to modelDir). It returns the
// metadata and record, or ok false (nothing written) when the compile
// must run.
func (a *artifactCache) restore(out, modelDir string) (driver.Metadata, *driver.ArtifactRecord, bool, error) {
	var md driver.Metadata
	if a == nil {
		return md, nil, false, nil
	}
	data, ok := a.cache.Record(a.key)
	if !ok {
		return md, nil, false, nil
	}
	rec, err := driver.DecodeArtifactRecord(data)
	if err != nil || !rec.Unchanged(modelDir) {
		a.cache.Drop(a.key) // stale: the compile stores its artifact instead
		return md, nil, false, nil
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return md, nil, false, err
	}
	md, ok, err = a.cache.Restore(a.key, abs)
	return md, rec, ok, err
}

// store keeps a finished compile's artifact with its record; the
// external files are hashed relative to modelDir.
func (a *artifactCache) store(dir, modelDir string, external []string, rec *driver.ArtifactRecord) {
	if a == nil {
		return
	}
	for _, rel := range external {
		if rec.AddFile(modelDir, rel) != nil {
			return
		}
	}
	a.cache.Store(a.key, dir, rec.Encode())
}

// printCompiled prints compile's summary of the artifact it wrote.
func printCompiled(stdout io.Writer, model string, md driver.Metadata, how, dir string, replacing bool) {
	fmt.Fprintf(stdout, "compiled %s for %q in %s\n", model, md.Target, how)
	fmt.Fprintf(stdout, "  %d kernels, executor %s, %s, %s\n", md.Kernels, md.Executor, plural(len(md.Inputs), "input"), plural(len(md.Outputs), "output"))
	if a := md.AOT; a != nil {
		ratio := 1.0
		if a.LowerBound > 0 {
			ratio = float64(a.WorkspaceBytes) / float64(a.LowerBound)
		}
		fmt.Fprintf(stdout, "  AOT: workspace %d bytes (%s; liveness lower bound %d bytes, %.3fx), constants %d bytes, entry kiln_%s_run in kiln_%s.h\n",
			a.WorkspaceBytes, a.Algorithm, a.LowerBound, ratio, a.ConstantsBytes, a.Module, a.Module)
	}
	if replacing {
		fmt.Fprintf(stdout, "  artifact: %s (replaced the artifact that was there)\n", dir)
	} else {
		fmt.Fprintf(stdout, "  artifact: %s\n", dir)
	}
}
