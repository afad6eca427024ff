package targets

import (
	"fmt"
	"sort"
	"sync"
)

// Tag is a name for a complete target configuration, such as "x86-avx512"
// for `c -mcpu=skylake-avx512`. A target string may start with a tag name
// instead of a kind name; the tag's attributes are used, the options that
// follow override them, and the target records the tag in its "tag"
// attribute.
type Tag struct {
	// Name is what target strings use; it must not be a kind name.
	Name string
	// Config is the target the tag stands for, as a target string or a
	// JSON object (anything Registry.Parse accepts, other tags included).
	Config string
	// Doc is a one-line description for `kiln targets`.
	Doc string

	target *Target // Config parsed at registration
}

// Target returns the configuration the tag stands for (a fresh copy, with
// the "tag" attribute set to the tag's name).
func (t *Tag) Target() *Target {
	c := t.target.Clone()
	c.Attrs["tag"] = t.Name
	return c
}

// TagRegistry holds the tags defined over one kind Registry (see
// Registry.Tags).
type TagRegistry struct {
	kinds *Registry
	mu    sync.RWMutex
	tags  map[string]*Tag
}

// Register adds a tag. Its Config is parsed now against the kinds of the
// owning registry; an unparsable config, an empty or ill-formed name, a
// name that is a kind and a repeated name are errors.
func (tr *TagRegistry) Register(t Tag) error {
	if !validName(t.Name) {
		return fmt.Errorf("target tag %q: a tag name is letters, digits, '_', '-' and '.', starting with a letter", t.Name)
	}
	if _, isKind := tr.kinds.Lookup(t.Name); isKind {
		return fmt.Errorf("target tag %q: the name is already a target kind", t.Name)
	}
	tg, err := tr.kinds.Parse(t.Config)
	if err != nil {
		return fmt.Errorf("target tag %q: %w", t.Name, err)
	}
	t.target = tg
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if _, dup := tr.tags[t.Name]; dup {
		return fmt.Errorf("target tag %q is already registered", t.Name)
	}
	tr.tags[t.Name] = &t
	return nil
}

// Lookup finds a tag by name.
func (tr *TagRegistry) Lookup(name string) (*Tag, bool) {
	tr.mu.RLock()
	defer tr.mu.RUnlock()
	t, ok := tr.tags[name]
	return t, ok
}

// List returns the tags sorted by name.
func (tr *TagRegistry) List() []*Tag {
	tr.mu.RLock()
	defer tr.mu.RUnlock()
	out := make([]*Tag, 0, len(tr.tags))
	for _, t := range tr.tags {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
