package c

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kiln-dev/kiln/runtime/include"
)

// Cache is a content-addressed store of compiled objects: Build looks up
// each translation unit by the hash of everything that determines its
// object (the C text, the headers beside it, the compiler's identity and
// every flag) and compiles only the units it does not hold. Entries are
// written atomically (a temporary file renamed into place), so concurrent
// compiles share one cache safely, and a damaged entry is only a miss
// (objects are checked to be ELF before use). The cache deletes only the
// entries it wrote (files named by a SHA-256 and ".o" under its objects
// directory), least recently used first, when it grows above its limit.
type Cache struct {
	dir      string
	maxBytes int64

	hits, misses atomic.Int64
	pruneOnce    sync.Once
}

// DefaultCacheLimit is the size above which a cache opened by OpenCache
// drops its least recently used objects.
const DefaultCacheLimit = 1 << 30

// DefaultCacheDir is kiln's cache directory: $XDG_CACHE_HOME/kiln, else
// ~/.cache/kiln (os.UserCacheDir).
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("codegen/c: no cache directory: %w", err)
	}
	return filepath.Join(d, "kiln"), nil
}

// OpenDefaultCache opens the cache in DefaultCacheDir.
func OpenDefaultCache() (*Cache, error) {
	dir, err := DefaultCacheDir()
	if err != nil {
		return nil, err
	}
	return OpenCache(dir)
}

// OpenCache opens (creating it when missing, mode 0700) the cache in
// dir. A directory that other users may write, or that belongs to
// another user, is refused: an object from it would be linked into
// libraries this user loads.
func OpenCache(dir string) (*Cache, error) {
	obj := filepath.Join(dir, "obj")
	if err := os.MkdirAll(obj, 0o700); err != nil {
		return nil, fmt.Errorf("codegen/c: cache: %w", err)
	}
	for _, d := range []string{dir, obj} {
		if err := CheckPrivateDir(d); err != nil {
			return nil, fmt.Errorf("codegen/c: %w", err)
		}
	}
	return &Cache{dir: dir, maxBytes: DefaultCacheLimit}, nil
}

// CheckPrivateDir returns an error saying why the directory d must not
// hold cache entries: it cannot be read, other users may write it, or it
// belongs to another user (what a cache holds is linked into libraries
// or loaded as artifacts, so a stranger must not be able to put it
// there).
func CheckPrivateDir(d string) error {
	st, err := os.Stat(d)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("cache %s: writable by other users (mode %v); refusing to use it", d, st.Mode().Perm())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() {
		return fmt.Errorf("cache %s: owned by another user (uid %d); refusing to use it", d, sys.Uid)
	}
	return nil
}

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// SetLimit sets the size above which the least recently used objects are
// dropped (0 or less: never).
func (c *Cache) SetLimit(bytes int64) { c.maxBytes = bytes }

// Stats returns how many lookups found an object and how many did not.
func (c *Cache) Stats() (hits, misses int64) { return c.hits.Load(), c.misses.Load() }

var objName = regexp.MustCompile(`^[0-9a-f]{64}\.o$`)

func (c *Cache) path(key string) string {
	return filepath.Join(c.dir, "obj", key[:2], key+".o")
}

// get copies the object stored under key to dst and reports whether it
// was there.
func (c *Cache) get(key, dst string) bool {
	p := c.path(key)
	if err := copyFile(p, dst); err != nil || CheckELF(dst, "") != nil {
		c.misses.Add(1)
		return false
	}
	now := time.Now()
	_ = os.Chtimes(p, now, now) // recency for pruning; a read-only cache still works
	c.hits.Add(1)
	return true
}

// put stores the object src under key (atomically); failures are
// ignored: the cache is an optimisation.
func (c *Cache) put(key, src string) {
	p := c.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return
	}
	name := tmp.Name()
	err = tmp.Close()
	if err == nil {
		err = copyFile(src, name)
	}
	if err == nil {
		err = os.Rename(name, p)
	}
	if err != nil {
		os.Remove(name)
	}
}

// prune drops least recently used objects while the cache is above its
// limit. Only files named like the objects put writes are considered.
func (c *Cache) prune() {
	var all []CacheEntry
	root := filepath.Join(c.dir, "obj")
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !objName.MatchString(d.Name()) {
			return nil
		}
		if st, err := d.Info(); err == nil && st.Mode().IsRegular() {
			all = append(all, CacheEntry{Path: p, Size: st.Size(), Used: st.ModTime()})
		}
		return nil
	})
	PruneLRU(all, c.maxBytes, os.Remove)
}

// CacheEntry is one entry of a cache directory for PruneLRU: its path,
// its size in bytes and when it was last used.
type CacheEntry struct {
	Path string
	Size int64
	Used time.Time
}

// PruneLRU removes entries, least recently used first, with remove
// while their total size is above limit, down to three quarters of it
// (limit 0 or less: nothing). The caller lists only entries it wrote.
func PruneLRU(entries []CacheEntry, limit int64, remove func(path string) error) {
	if limit <= 0 {
		return
	}
	var total int64
	for _, e := range entries {
		total += e.Size
	}
	if total <= limit {
		return
	}
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b CacheEntry) int { return a.Used.Compare(b.Used) })
	for _, e := range entries {
		if total <= limit*3/4 {
			break
		}
		if err := remove(e.Path); err == nil || errors.Is(err, os.ErrNotExist) {
			total -= e.Size
		}
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// KeyHasher accumulates the inputs of a cache key (this package's object
// cache, driver's artifact cache); parts are length-prefixed so that no
// two different sequences of parts hash alike.
type KeyHasher struct{ h []byte }

// Add appends parts to the key.
func (h *KeyHasher) Add(parts ...string) {
	for _, p := range parts {
		h.h = fmt.Appendf(h.h, "%d:", len(p))
		h.h = append(h.h, p...)
	}
}

// Sum is the key: the hex SHA-256 of the parts.
func (h *KeyHasher) Sum() string {
	s := sha256.Sum256(h.h)
	return hex.EncodeToString(s[:])
}

var (
	compilerIDs   sync.Map // compiler command -> identity string or error
	headersDigest = sync.OnceValue(func() string {
		var h KeyHasher
		_ = fs.WalkDir(include.FS, ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := fs.ReadFile(include.FS, p)
				h.Add(p, string(b))
			}
			return nil
		})
		return h.Sum()
	})
)

// CompilerStamp identifies the C compiler that the command cc (a
// target's -cc option: empty means $CC, else "cc") runs without running
// it: the command's words, and for each that names a program, its path
// with symbolic links resolved and that file's size and modification
// time (what ccache's default compiler check compares). Caches of whole
// artifacts key their entries with it; it cannot hang on a compiler that
// does not answer.
func CompilerStamp(cc string) string {
	var h KeyHasher
	stampCompiler(&h, compilerCommand(cc))
	return h.Sum()
}

// stampCompiler adds the compiler command cmd to h: its words, and for
// each that names a program, its path with symbolic links resolved and
// that file's size and modification time.
func stampCompiler(h *KeyHasher, cmd []string) {
	h.Add(cmd...)
	for _, w := range cmd {
		p, err := exec.LookPath(w)
		if err != nil {
			continue
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		if st, err := os.Stat(p); err == nil {
			h.Add(p, fmt.Sprint(st.Size(), st.ModTime().UnixNano()))
		}
	}
}

// compilerID identifies the compiler cc runs: its resolved path, the
// size and modification time of that file, and its version and target
// as it prints them. Two compilers that differ in any of these never
// share cache entries.
func compilerID(cc string) (string, error) {
	cmd := compilerCommand(cc)
	key := strings.Join(cmd, "\x00")
	if v, ok := compilerIDs.Load(key); ok {
		if err, isErr := v.(error); isErr {
			return "", err
		}
		return v.(string), nil
	}
	id, err := probeCompiler(cmd)
	if err != nil {
		compilerIDs.Store(key, err)
		return "", err
	}
	compilerIDs.Store(key, id)
	return id, nil
}

// isGCC reports whether cc runs GCC (not clang, which also defines
// __GNUC__ but warns about some of GCC's optimisation flags, and the
// build uses -Werror): whether a word of the command resolves, through
// its symbolic links (cc -> /etc/alternatives/cc -> gcc-12), to a
// program named gcc. It runs nothing, so a hung compiler cannot hang it.
func isGCC(cc string) bool {
	gcc := false
	for _, w := range compilerCommand(cc) {
		p, err := exec.LookPath(w)
		if err != nil {
			continue
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		base := filepath.Base(p)
		if strings.Contains(base, "clang") {
			return false
		}
		if strings.Contains(base, "gcc") {
			gcc = true
		}
	}
	return gcc
}

func probeCompiler(cmd []string) (string, error) {
	var h KeyHasher
	stampCompiler(&h, cmd)
	for _, arg := range []string{"--version", "-dumpmachine"} {
		out, err := exec.Command(cmd[0], append(cmd[1:], arg)...).Output()
		if err != nil {
			return "", errors.New("codegen/c: cache: cannot identify the C compiler " + strings.Join(cmd, " ") + ": " + err.Error())
		}
		h.Add(string(out))
	}
	return h.Sum(), nil
}
