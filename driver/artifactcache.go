package driver

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	cgen "github.com/kiln-dev/kiln/codegen/c"
)

// ArtifactCache keeps finished artifacts, each under a key that the
// caller computes from everything the artifact depends on (the model's
// bytes, every option, the kiln build, the C compiler, the resolved
// targets: see ArtifactKey), so that a recompile of an unchanged model
// copies the artifact instead of building it again. It lives in the
// directory "artifacts" of kiln's cache ($XDG_CACHE_HOME/kiln).
//
// An entry is a directory named by its key holding the artifact's files
// and a record (the caller's bytes: what the compile printed). Entries
// are written to a temporary directory and renamed into place, so
// concurrent compiles share the cache safely. A restored artifact is
// checked against the content hashes its metadata records before it
// replaces anything; an entry that fails the check, or holds anything but
// directories and regular files, is a miss. The cache removes only what
// it wrote (directories named by a key, least recently used first) when
// it grows above its limit.
type ArtifactCache struct {
	dir      string
	maxBytes int64
}

// DefaultArtifactCacheLimit is the size above which an ArtifactCache
// drops its least recently used entries.
const DefaultArtifactCacheLimit = 2 << 30

// artifactCacheVersion changes when the layout of an entry does.
const artifactCacheVersion = "kiln artifact cache 1"

var entryName = regexp.MustCompile(`^[0-9a-f]{64}$`)

// OpenArtifactCache opens (creating it, mode 0700) the artifact cache in
// the directory "artifacts" of dir, kiln's cache directory. Like the
// object cache, a directory that other users may write, or that belongs
// to another user, is refused: an artifact from it would be loaded and
// run.
func OpenArtifactCache(dir string) (*ArtifactCache, error) {
	root := filepath.Join(dir, "artifacts")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("artifact cache: %w", err)
	}
	for _, d := range []string{dir, root} {
		if err := cgen.CheckPrivateDir(d); err != nil {
			return nil, fmt.Errorf("artifact %w", err)
		}
	}
	return &ArtifactCache{dir: root, maxBytes: DefaultArtifactCacheLimit}, nil
}

// SetLimit sets the size above which the least recently used entries are
// dropped (0 or less: never).
func (c *ArtifactCache) SetLimit(bytes int64) { c.maxBytes = bytes }

// ArtifactKey accumulates what an artifact depends on (Add, from
// cgen.KeyHasher: length-prefixed parts); Sum is the cache key. A new key
// already holds the kiln build (ExecutableID) and the entry layout's
// version.
type ArtifactKey struct{ cgen.KeyHasher }

// NewArtifactKey starts a key with the kiln build's identity.
func NewArtifactKey() *ArtifactKey {
	k := &ArtifactKey{}
	k.Add(artifactCacheVersion, ExecutableID())
	return k
}

// AddFile appends the name and the SHA-256 of the content of the file at
// path.
func (k *ArtifactKey) AddFile(name, path string) error {
	h, err := hashFile(path)
	if err != nil {
		return err
	}
	k.Add("file", name, h)
	return nil
}

// ExecutableID identifies the running build of kiln (its Go build ID):
// caches whose entries depend on kiln's code key them with it.
func ExecutableID() string { return executableID() }

func (c *ArtifactCache) entry(key string) string {
	return filepath.Join(c.dir, key[:2], key)
}

// entryRecord is the file of an entry holding the caller's record.
const entryRecord = "record"

// entryFiles is the directory of an entry holding the artifact.
const entryFiles = "files"

// Record returns the record stored with the entry key, if there is one.
// A caller checks what the record says (e.g. that the files it lists are
// unchanged) before it calls Restore.
func (c *ArtifactCache) Record(key string) ([]byte, bool) {
	if !entryName.MatchString(key) {
		return nil, false
	}
	p := filepath.Join(c.entry(key), entryRecord)
	st, err := os.Lstat(p)
	if err != nil || !st.Mode().IsRegular() || st.Size() > 16<<20 {
		return nil, false
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, false
	}
	return data, true
}

// Restore writes the artifact of entry key to out, as a compile would (a
// temporary sibling renamed into place; an existing out is replaced only
// when it is an artifact, see replaceDir), and returns its metadata.
// ok is false when the entry is missing or damaged (a damaged entry is
// removed): then nothing was written. err is set only when the restored artifact could not be put
// at out (a compile would have failed there too).
func (c *ArtifactCache) Restore(key, out string) (md Metadata, ok bool, err error) {
	if !entryName.MatchString(key) {
		return md, false, nil
	}
	src := filepath.Join(c.entry(key), entryFiles)
	if st, err := os.Lstat(src); err != nil || !st.IsDir() {
		return md, false, nil
	}
	tmp, err := newBuildDir(out)
	if err != nil {
		return md, false, err
	}
	defer removeTemp(tmp)
	// A damaged entry is dropped, so that the compile that follows the
	// miss stores a good one in its place.
	damaged := func() (Metadata, bool, error) {
		c.Drop(key)
		return Metadata{}, false, nil
	}
	if err := copyTree(src, tmp); err != nil {
		return damaged()
	}
	md, err = ReadMetadata(tmp)
	if err != nil || len(md.Files) == 0 {
		return damaged()
	}
	for _, rel := range slices.Sorted(maps.Keys(md.Files)) {
		if _, err := verifyFile(tmp, &md, rel); err != nil {
			return damaged()
		}
	}
	if err := replaceDir(tmp, out); err != nil {
		return md, false, err
	}
	now := time.Now()
	_ = os.Chtimes(c.entry(key), now, now) // recency for pruning
	return md, true, nil
}

// Drop removes the entry key (its record no longer holds: a file it
// lists changed), so that the compile that follows stores a new one.
func (c *ArtifactCache) Drop(key string) {
	if entryName.MatchString(key) {
		os.RemoveAll(c.entry(key))
	}
}

// Store keeps the artifact directory dir (a finished compile's) and
// record under key. Failures are ignored: the cache is an optimisation.
func (c *ArtifactCache) Store(key, dir string, record []byte) {
	if !entryName.MatchString(key) {
		return
	}
	final := c.entry(key)
	if _, err := os.Lstat(final); err == nil {
		return // another compile stored it
	}
	parent := filepath.Dir(final)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-")
	if err != nil {
		return
	}
	TrackTemp(tmp)
	defer removeTemp(tmp)
	if err := os.Mkdir(filepath.Join(tmp, entryFiles), 0o700); err != nil {
		return
	}
	if err := copyTree(dir, filepath.Join(tmp, entryFiles)); err != nil {
		return
	}
	if err := os.WriteFile(filepath.Join(tmp, entryRecord), record, 0o600); err != nil {
		return
	}
	if err := os.Rename(tmp, final); err != nil {
		return
	}
	c.prune()
}

// copyTree copies the directories and regular files under src into the
// existing directory dst, except kiln's marker (the build directory
// writes its own). Anything else (a symbolic link, a device) is an
// error.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(to, 0o755)
		case !d.Type().IsRegular():
			return fmt.Errorf("%s: not a regular file", p)
		case rel == MarkerFile || rel == buildPIDFile:
			return nil
		}
		return copyRegular(p, to)
	})
}

// copyRegular copies the regular file src to the new file dst, keeping
// its permission bits (a library stays executable). io.Copy between two
// files lets the kernel copy (copy_file_range), or share the blocks on
// file systems that can.
func copyRegular(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, st.Mode().Perm()&0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// prune drops least recently used entries while the cache is above its
// limit. Only directories named by a key, in directories named by its
// first two digits, are considered.
func (c *ArtifactCache) prune() {
	var all []cgen.CacheEntry
	shards, _ := os.ReadDir(c.dir)
	for _, s := range shards {
		if !s.IsDir() || len(s.Name()) != 2 {
			continue
		}
		keys, _ := os.ReadDir(filepath.Join(c.dir, s.Name()))
		for _, k := range keys {
			if !k.IsDir() || !entryName.MatchString(k.Name()) || !strings.HasPrefix(k.Name(), s.Name()) {
				continue
			}
			info, err := k.Info()
			if err != nil {
				continue
			}
			e := cgen.CacheEntry{Path: filepath.Join(c.dir, s.Name(), k.Name()), Used: info.ModTime()}
			_ = filepath.WalkDir(e.Path, func(_ string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					if fi, err := d.Info(); err == nil {
						e.Size += fi.Size()
					}
				}
				return nil
			})
			all = append(all, e)
		}
	}
	cgen.PruneLRU(all, c.maxBytes, os.RemoveAll)
}

// ArtifactRecord is what kiln compile stores with a cached artifact:
// what it printed, and the files outside the model the artifact depends
// on, checked before the entry is used.
type ArtifactRecord struct {
	// Report is the partition report as compile printed it.
	Report string `json:"report,omitempty"`
	// Warnings are the partition report's warnings.
	Warnings []string `json:"warnings,omitempty"`
	// Files maps files the model refers to (its external data, relative
	// to the model's directory) to their hex SHA-256.
	Files map[string]string `json:"files,omitempty"`
	// Took is how long the compile that stored the entry took.
	Took time.Duration `json:"took"`
}

// Encode is the record as stored.
func (r *ArtifactRecord) Encode() []byte {
	data, _ := json.Marshal(r)
	return data
}

// DecodeArtifactRecord reads a stored record.
func DecodeArtifactRecord(data []byte) (*ArtifactRecord, error) {
	var r ArtifactRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// AddFile records the content hash of the file rel of dir (relative,
// confined to dir as the importer confines external data).
func (r *ArtifactRecord) AddFile(dir, rel string) error {
	h, err := hashInRoot(dir, rel)
	if err != nil {
		return err
	}
	if r.Files == nil {
		r.Files = map[string]string{}
	}
	r.Files[rel] = h
	return nil
}

// Unchanged reports whether every file the record lists still has the
// recorded content (relative to dir).
func (r *ArtifactRecord) Unchanged(dir string) bool {
	for rel, want := range r.Files {
		if h, err := hashInRoot(dir, rel); err != nil || h != want {
			return false
		}
	}
	return true
}

// hashInRoot is the hex SHA-256 of the file rel inside dir; symbolic
// links are followed only while they stay inside dir.
func hashInRoot(dir, rel string) (string, error) {
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%q is not a relative path inside %s", rel, dir)
	}
	f, err := os.OpenInRoot(dir, rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return hashReader(f)
}
