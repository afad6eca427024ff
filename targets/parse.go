package targets

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/ir"
)

// The classes of parse errors. Every error Parse, ParseList and
// ParseLabelFlag return wraps one of these (test with errors.Is); the
// message also names the input, the option, the kind and the offending
// value as applicable.
var (
	// ErrEmpty: an empty target string, list or list element.
	ErrEmpty = errors.New("empty target")
	// ErrUnknownKind: the first word is neither a kind nor a tag.
	ErrUnknownKind = errors.New("unknown target kind")
	// ErrUnknownOption: an option the kind does not declare.
	ErrUnknownOption = errors.New("unknown option")
	// ErrBadValue: a value of the wrong type for its option.
	ErrBadValue = errors.New("ill-typed option value")
	// ErrRepeated: an option (or JSON key) given twice, or two targets of
	// one kind in a list.
	ErrRepeated = errors.New("repeated")
	// ErrUnterminatedQuote: a quote without its closing quote.
	ErrUnterminatedQuote = errors.New("unterminated quote")
	// ErrBadJSON: malformed JSON, or JSON that is not a target object.
	ErrBadJSON = errors.New("bad JSON target")
	// ErrSyntax: any other malformed target string.
	ErrSyntax = errors.New("target syntax error")
	// ErrNoHost: a target list without a target usable as host.
	ErrNoHost = errors.New("no host target")
)

// maxDepth bounds target nesting (-host="c -host=\"...\"").
const maxDepth = 8

// Parse reads a target in any of its spellings:
//
//   - `kind -name=value ...`: a kind name, then options. Each option is
//     `-name=value` (or `--name=value`); a bool option may be given as
//     just `-name` (true). Values by option kind:
//     string: a bare word without quotes, or one quoted string;
//     int: a decimal integer; bool: true, false, 1 or 0;
//     strings: comma-separated items, each a bare word or a quoted string
//     (`-cflags="-O2 -g",-DX` is ["-O2 -g", "-DX"]; an empty value is the
//     empty list; `""` is a list of one empty string);
//     target (-host and AttrTarget options): a target string, quoted when
//     it has spaces (`-host="c -mcpu=native"`).
//     Quoted strings use "..." with Go escapes (\" \\ \n ...) or '...'
//     taken literally. Words are separated by white space outside quotes.
//   - `tag -name=value ...`: a registered tag instead of the kind name; the
//     tag's configuration with the given options overriding it, and
//     -tag=<name> recorded.
//   - a JSON object: "kind" (a string) and one member per option, typed
//     as JSON (string, integer number, bool, array of strings; a nested
//     target as an object or a string); "host" is a nested target. Without
//     "kind", a "tag" member naming a registered tag supplies the base
//     configuration.
//
// Every option is checked against the kind and defaults are filled. Errors
// wrap one of ErrEmpty, ErrUnknownKind, ErrUnknownOption, ErrBadValue,
// ErrRepeated, ErrUnterminatedQuote, ErrBadJSON or ErrSyntax.
func (r *Registry) Parse(s string) (*Target, error) { return r.parse(s, 0) }

// Parse reads a target against the Default registry (see Registry.Parse).
func Parse(s string) (*Target, error) { return Default.Parse(s) }

func (r *Registry) parse(s string, depth int) (*Target, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("target %q: %w: targets nested more than %d deep", s, ErrSyntax, maxDepth)
	}
	t := strings.TrimSpace(s)
	if t == "" {
		return nil, fmt.Errorf("%w: empty target string", ErrEmpty)
	}
	if t[0] == '{' || t[0] == '[' {
		return r.parseJSON(t, depth)
	}
	return r.parseString(t, depth)
}

// base resolves the first word of a target: a kind (no attributes yet) or
// a tag (its configuration).
func (r *Registry) base(name, input string) (*Kind, ir.Attrs, *Target, error) {
	if k, ok := r.Lookup(name); ok {
		return k, ir.Attrs{}, nil, nil
	}
	if tag, ok := r.Tags().Lookup(name); ok {
		tt := tag.Target()
		return tt.Kind, tt.Attrs, tt.Host, nil
	}
	return nil, nil, nil, r.unknownKind(strconv.Quote(input), name)
}

// unknownKind is the error for a kind name the registry lacks: why it is
// unavailable when a backend said so (RegisterUnavailable), else the
// known names.
func (r *Registry) unknownKind(input, name string) error {
	r.mu.RLock()
	why, ok := r.unavailable[name]
	r.mu.RUnlock()
	if ok {
		return fmt.Errorf("target %s: %w %q: this kiln has no %s target: %s", input, ErrUnknownKind, name, name, why)
	}
	return fmt.Errorf("target %s: %w %q (kinds: %s)", input, ErrUnknownKind, name, r.knownNames())
}

func (r *Registry) knownNames() string {
	var names []string
	for _, k := range r.Kinds() {
		names = append(names, k.Name)
	}
	s := strings.Join(names, ", ")
	var tags []string
	for _, t := range r.Tags().List() {
		tags = append(tags, t.Name)
	}
	if len(tags) > 0 {
		s += "; tags: " + strings.Join(tags, ", ")
	}
	return s
}

func (r *Registry) parseString(s string, depth int) (*Target, error) {
	fields, at, err := splitFields(s)
	if err != nil {
		return nil, fmt.Errorf("target %q: %w", s, err)
	}
	head := fields[0]
	if strings.HasPrefix(head, "-") || strings.ContainsAny(head, `"'`) {
		return nil, fmt.Errorf("target %q: column %d: %w: a target starts with a kind or tag name, got %q", s, at[0]+1, ErrSyntax, head)
	}
	k, attrs, host, err := r.base(head, s)
	if err != nil {
		return nil, err
	}
	given := map[string]bool{}
	for i, f := range fields[1:] {
		col := at[i+1] + 1
		kv, ok := strings.CutPrefix(f, "--")
		if !ok {
			kv, ok = strings.CutPrefix(f, "-")
		}
		if !ok {
			return nil, fmt.Errorf("target %q: column %d: %w: expected -name=value, got %q", s, col, ErrSyntax, f)
		}
		name, val, hasVal := strings.Cut(kv, "=")
		if name == "" || strings.ContainsAny(name, `"'`) {
			return nil, fmt.Errorf("target %q: column %d: %w: bad option name in %q", s, col, ErrSyntax, f)
		}
		o := k.Option(name)
		if o == nil {
			return nil, fmt.Errorf("target %q: column %d: %w -%s for kind %q", s, col, ErrUnknownOption, name, k.Name)
		}
		if given[name] {
			return nil, fmt.Errorf("target %q: column %d: %w option -%s", s, col, ErrRepeated, name)
		}
		given[name] = true
		v, err := r.parseOptionValue(k, o, val, hasVal, depth)
		if err != nil {
			return nil, fmt.Errorf("target %q: column %d: %w", s, col, err)
		}
		if sv, ok := v.(string); ok && !o.allows(sv) {
			return nil, fmt.Errorf("target %q: column %d: %w: option -%s is %q, want one of %s", s, col, ErrBadValue, name, sv, strings.Join(o.Choices, ", "))
		}
		if name == "host" {
			host = v.(*Target)
			continue
		}
		attrs[name] = v
	}
	t, err := New(k, attrs)
	if err != nil {
		return nil, err
	}
	t.Host = host
	return t, nil
}

// badValue formats an ill-typed value error.
func badValue(k *Kind, o *Option, got string) error {
	return fmt.Errorf("%w: option -%s of kind %q wants %s, got %s", ErrBadValue, o.Name, k.Name, kindName(o.Kind), got)
}

func (r *Registry) parseOptionValue(k *Kind, o *Option, val string, hasVal bool, depth int) (any, error) {
	if !hasVal {
		if o.Kind == ir.AttrBool {
			return true, nil
		}
		return nil, badValue(k, o, "no value")
	}
	switch o.Kind {
	case ir.AttrString:
		return singleValue(val)
	case ir.AttrInt:
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return nil, badValue(k, o, strconv.Quote(val))
		}
		return n, nil
	case ir.AttrBool:
		switch val {
		case "true", "1":
			return true, nil
		case "false", "0":
			return false, nil
		}
		return nil, badValue(k, o, strconv.Quote(val))
	case ir.AttrStrings:
		items, err := splitItems(val)
		if err != nil {
			return nil, fmt.Errorf("option -%s: %w", o.Name, err)
		}
		return items, nil
	case AttrTarget:
		text, err := singleValue(val)
		if err != nil {
			return nil, fmt.Errorf("option -%s: %w", o.Name, err)
		}
		t, err := r.parse(text, depth+1)
		if err != nil {
			return nil, fmt.Errorf("option -%s: %w", o.Name, err)
		}
		return t, nil
	}
	return nil, fmt.Errorf("%w: option -%s has unsupported kind %s", ErrBadValue, o.Name, kindName(o.Kind))
}

// singleValue reads a value that is one bare word (no quotes) or exactly
// one quoted string.
func singleValue(val string) (string, error) {
	if val != "" && (val[0] == '"' || val[0] == '\'') {
		s, n, err := readQuoted(val)
		if err != nil {
			return "", err
		}
		if n != len(val) {
			return "", fmt.Errorf("%w: text %q after the quoted string in %s", ErrSyntax, val[n:], val)
		}
		return s, nil
	}
	if strings.ContainsAny(val, `"'`) {
		return "", fmt.Errorf("%w: quote inside the unquoted value %s (quote the whole value)", ErrSyntax, val)
	}
	return val, nil
}

// readQuoted reads the quoted string at the start of s (s[0] is ' or ")
// and returns its contents and the number of bytes consumed. "..." takes
// Go escapes; '...' is literal.
func readQuoted(s string) (string, int, error) {
	n, err := quotedLen(s)
	if err != nil {
		return "", 0, err
	}
	if s[0] == '\'' {
		return s[1 : n-1], n, nil
	}
	u, err := strconv.Unquote(s[:n])
	if err != nil {
		return "", 0, fmt.Errorf("%w: bad escape in %s", ErrSyntax, s[:n])
	}
	return u, n, nil
}

// quotedLen returns the length of the quoted string at the start of s,
// quotes included, without interpreting escapes.
func quotedLen(s string) (int, error) {
	q := s[0]
	for i := 1; i < len(s); i++ {
		switch {
		case q == '"' && s[i] == '\\':
			i++
		case s[i] == q:
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("%w: %c opened in %s is not closed", ErrUnterminatedQuote, q, s)
}

// splitItems splits a list value at commas outside quotes. Each item is a
// bare word or one quoted string; an empty value is the empty list.
func splitItems(val string) ([]string, error) {
	out := []string{}
	if val == "" {
		return out, nil
	}
	i := 0
	for {
		if i < len(val) && (val[i] == '"' || val[i] == '\'') {
			s, n, err := readQuoted(val[i:])
			if err != nil {
				return nil, err
			}
			out = append(out, s)
			i += n
			if i < len(val) && val[i] != ',' {
				return nil, fmt.Errorf("%w: text %q after a quoted item in %s", ErrSyntax, val[i:], val)
			}
		} else {
			j := strings.IndexByte(val[i:], ',')
			end := len(val)
			if j >= 0 {
				end = i + j
			}
			item := val[i:end]
			if strings.ContainsAny(item, `"'`) {
				return nil, fmt.Errorf("%w: quote inside the unquoted item %s (quote the whole item)", ErrSyntax, item)
			}
			out = append(out, item)
			i = end
		}
		if i >= len(val) {
			return out, nil
		}
		i++ // the comma
		if i == len(val) {
			return append(out, ""), nil
		}
	}
}

// splitFields splits on white space outside quotes. Inside "..." a
// backslash escapes the next byte. It returns the fields and the byte
// offset in s where each starts.
func splitFields(s string) ([]string, []int, error) {
	var out []string
	var at []int
	var cur strings.Builder
	inField := false
	start := func(i int) {
		if !inField {
			at = append(at, i)
			inField = true
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\'':
			n, err := quotedLen(s[i:])
			if err != nil {
				return nil, nil, fmt.Errorf("column %d: %w", i+1, err)
			}
			start(i)
			cur.WriteString(s[i : i+n])
			i += n - 1
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inField {
				out = append(out, cur.String())
				cur.Reset()
				inField = false
			}
		default:
			start(i)
			cur.WriteByte(c)
		}
	}
	if inField {
		out = append(out, cur.String())
	}
	return out, at, nil
}

// ---- JSON ----

// jsonValue is a decoded JSON value that keeps object members in order and
// repeated keys visible.
type jsonValue struct {
	kind    string // "string", "number", "bool", "null", "array", "object"
	str     string
	num     json.Number
	b       bool
	arr     []jsonValue
	members []jsonMember
}

type jsonMember struct {
	key   string
	value jsonValue
}

func decodeJSON(s string) (jsonValue, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	v, err := readJSONValue(dec)
	if err != nil {
		return v, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return v, fmt.Errorf("text after the JSON object")
	}
	return v, nil
}

func readJSONValue(dec *json.Decoder) (jsonValue, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return jsonValue{}, err
	}
	switch x := tok.(type) {
	case string:
		return jsonValue{kind: "string", str: x}, nil
	case json.Number:
		return jsonValue{kind: "number", num: x}, nil
	case bool:
		return jsonValue{kind: "bool", b: x}, nil
	case nil:
		return jsonValue{kind: "null"}, nil
	case json.Delim:
		switch x {
		case '[':
			v := jsonValue{kind: "array"}
			for dec.More() {
				e, err := readJSONValue(dec)
				if err != nil {
					return v, err
				}
				v.arr = append(v.arr, e)
			}
			_, err := dec.Token()
			return v, err
		case '{':
			v := jsonValue{kind: "object"}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return v, err
				}
				key, _ := kt.(string)
				e, err := readJSONValue(dec)
				if err != nil {
					return v, err
				}
				v.members = append(v.members, jsonMember{key, e})
			}
			_, err := dec.Token()
			return v, err
		}
	}
	return jsonValue{}, fmt.Errorf("unexpected %v", tok)
}

func (v jsonValue) describe() string {
	switch v.kind {
	case "string":
		return "string " + strconv.Quote(v.str)
	case "number":
		return "number " + v.num.String()
	case "bool":
		return "bool " + strconv.FormatBool(v.b)
	}
	return v.kind
}

func (r *Registry) parseJSON(s string, depth int) (*Target, error) {
	v, err := decodeJSON(s)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w: %v", s, ErrBadJSON, err)
	}
	return r.fromJSON(v, s, depth)
}

func (r *Registry) fromJSON(v jsonValue, input string, depth int) (*Target, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("target %s: %w: targets nested more than %d deep", input, ErrSyntax, maxDepth)
	}
	if v.kind != "object" {
		return nil, fmt.Errorf("target %s: %w: want an object, got %s", input, ErrBadJSON, v.describe())
	}
	seen := map[string]bool{}
	var kindV, tagV *jsonValue
	for i, m := range v.members {
		if seen[m.key] {
			return nil, fmt.Errorf("target %s: %w key %q", input, ErrRepeated, m.key)
		}
		seen[m.key] = true
		switch m.key {
		case "kind":
			kindV = &v.members[i].value
		case "tag":
			tagV = &v.members[i].value
		}
	}
	var k *Kind
	var attrs ir.Attrs
	var host *Target
	switch {
	case kindV != nil:
		if kindV.kind != "string" {
			return nil, fmt.Errorf("target %s: %w: \"kind\" wants a string, got %s", input, ErrBadJSON, kindV.describe())
		}
		kk, ok := r.Lookup(kindV.str)
		if !ok {
			return nil, r.unknownKind(input, kindV.str)
		}
		k, attrs = kk, ir.Attrs{}
	case tagV != nil && tagV.kind == "string":
		tag, ok := r.Tags().Lookup(tagV.str)
		if !ok {
			return nil, fmt.Errorf("target %s: %w: no \"kind\" and %q is not a registered tag", input, ErrBadJSON, tagV.str)
		}
		tt := tag.Target()
		k, attrs, host = tt.Kind, tt.Attrs, tt.Host
	default:
		return nil, fmt.Errorf("target %s: %w: the object has no \"kind\"", input, ErrBadJSON)
	}
	for _, m := range v.members {
		if m.key == "kind" {
			continue
		}
		o := k.Option(m.key)
		if o == nil {
			return nil, fmt.Errorf("target %s: %w -%s for kind %q", input, ErrUnknownOption, m.key, k.Name)
		}
		val, err := r.jsonOptionValue(k, o, m.value, depth)
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", input, err)
		}
		if m.key == "host" {
			host = val.(*Target)
			continue
		}
		attrs[m.key] = val
	}
	t, err := New(k, attrs)
	if err != nil {
		return nil, err
	}
	t.Host = host
	return t, nil
}

func (r *Registry) jsonOptionValue(k *Kind, o *Option, v jsonValue, depth int) (any, error) {
	switch o.Kind {
	case ir.AttrString:
		if v.kind == "string" {
			return v.str, nil
		}
	case ir.AttrInt:
		if v.kind == "number" {
			if n, err := strconv.ParseInt(v.num.String(), 10, 64); err == nil {
				return n, nil
			}
		}
	case ir.AttrBool:
		if v.kind == "bool" {
			return v.b, nil
		}
	case ir.AttrStrings:
		if v.kind == "array" {
			out := make([]string, len(v.arr))
			for i, e := range v.arr {
				if e.kind != "string" {
					return nil, badValue(k, o, fmt.Sprintf("%s at index %d", e.describe(), i))
				}
				out[i] = e.str
			}
			return out, nil
		}
	case AttrTarget:
		var t *Target
		var err error
		switch v.kind {
		case "object":
			t, err = r.fromJSON(v, "", depth+1)
		case "string":
			t, err = r.parse(v.str, depth+1)
		default:
			return nil, badValue(k, o, v.describe())
		}
		if err != nil {
			return nil, fmt.Errorf("option -%s: %w", o.Name, err)
		}
		return t, nil
	}
	return nil, badValue(k, o, v.describe())
}

// ---- lists ----

// TargetList is the result of ParseList.
type TargetList struct {
	// Targets are all the targets in the order given, the host included
	// (the host also compiles every function no other target takes). Each
	// non-host target without an explicit -host has Host set to the host.
	Targets []*Target
	// Host is the host target (also in Targets).
	Host *Target

	registry *Registry
}

// ByKind returns the list's first target of kind name, or nil.
func (l *TargetList) ByKind(name string) *Target {
	for _, t := range l.Targets {
		if t.Kind.Name == name {
			return t
		}
	}
	return nil
}

// String prints the list in ParseList syntax ("dnnl, c -mcpu=native").
// Hosts that ParseList attached are left out, so the output parses back to
// an equal list.
func (l *TargetList) String() string {
	parts := make([]string, len(l.Targets))
	for i, t := range l.Targets {
		if t != l.Host && t.Host == l.Host {
			t = t.WithHost(nil)
		}
		parts[i] = t.format(l.reserved)
		if t.Label != "" {
			parts[i] = t.Label + "=" + parts[i]
		}
	}
	return strings.Join(parts, ", ")
}

// reserved reports words that must be quoted inside a list: kind and tag
// names of the registry the list was parsed against.
func (l *TargetList) reserved(word string) bool {
	if l.registry == nil {
		return false
	}
	if _, ok := l.registry.Lookup(word); ok {
		return true
	}
	_, ok := l.registry.Tags().Lookup(word)
	return ok
}

// ParseList reads a comma-separated list of targets against the Default
// registry (see Registry.ParseList).
func ParseList(s string) (*TargetList, error) { return Default.ParseList(s) }

// ParseList reads a comma-separated list of targets, e.g.
// "dnnl, c -mcpu=native".
//
// Splitting rule: only a comma outside quotes and outside JSON
// braces/brackets can split, and it does when
//
//	(a) it ends a JSON element or the first word of an element (kind and
//	    tag names contain no commas): "dnnl,c", {"kind":"dnnl"},c;
//	(b) it is followed, after optional white space, by the end of the
//	    string, another comma or '{' (empty elements are then errors);
//	(c) it is followed, after optional white space, by a word (up to
//	    white space or a comma) that is a registered kind or tag name:
//	    "c -mcpu=native,dnnl";
//	(d) it is followed by white space and a word not starting with '-'
//	    (unquoted values cannot contain white space, so that word can only
//	    start a target): "dnnl, cuda" is two elements, the second an
//	    unknown kind.
//
// Any other comma belongs to the current target's option value: in
// "c -libs=a,b, dnnl" the first comma is inside -libs. The ambiguous case
// is a list item that is a kind or tag name: in "c -libs=a,dnnl" the word
// dnnl starts a new target by (c); write -libs=a,"dnnl" to keep it in the
// list (TargetList.String quotes such items).
//
// An element may be labelled, LABEL=TARGET ("big=c -mcpu=cortex-a72"):
// the label names the target in placements and tells apart targets of one
// kind. A kind may appear any number of times, but at most once without a
// label (so a kind name still means one target), and a label once.
//
// The host is the last target whose kind has DeviceType CPU and Host set.
// Device ids are given by device.CompilationConfig.DeviceID.
// Errors: an empty list or element, a malformed element or label, two
// unlabelled targets of one kind or a label given twice (ErrRepeated), no
// host (ErrNoHost).
func (r *Registry) ParseList(s string) (*TargetList, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: empty target list", ErrEmpty)
	}
	parts, starts, err := r.splitList(s)
	if err != nil {
		return nil, fmt.Errorf("target list %q: %w", s, err)
	}
	l := &TargetList{registry: r}
	unlabelled := map[string]int{}
	labels := map[string]int{}
	for i, p := range parts {
		if strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("target list %q: %w: element %d is empty", s, ErrEmpty, i+1)
		}
		// The element's column in the list; the target's own errors
		// count columns within the (trimmed) element.
		col := starts[i] + len(p) - len(strings.TrimLeft(p, " \t\n\r")) + 1
		label, spec := splitLabel(p)
		if label != "" {
			if err := checkLabel(label); err != nil {
				return nil, fmt.Errorf("target list element %d (column %d): %w: %v", i+1, col, ErrSyntax, err)
			}
			if j, dup := labels[label]; dup {
				return nil, fmt.Errorf("target list %q: %w label: elements %d and %d are both labelled %q", s, ErrRepeated, j+1, i+1, label)
			}
			labels[label] = i
			col = starts[i] + len(p) - len(spec) + 1
		}
		t, err := r.Parse(spec)
		if err != nil {
			return nil, fmt.Errorf("target list element %d (column %d): %w", i+1, col, err)
		}
		if label != "" {
			t = t.WithLabel(label)
		} else {
			if j, dup := unlabelled[t.Kind.Name]; dup {
				return nil, fmt.Errorf("target list %q: %w kind: elements %d and %d are both of kind %q; label them to use both (a=%s ..., b=%s ...)", s, ErrRepeated, j+1, i+1, t.Kind.Name, t.Kind.Name, t.Kind.Name)
			}
			unlabelled[t.Kind.Name] = i
		}
		l.Targets = append(l.Targets, t)
		if t.Kind.DeviceType == CPU && t.Kind.Host {
			l.Host = t
		}
	}
	if l.Host == nil {
		var hostKinds []string
		for _, k := range r.Kinds() {
			if k.DeviceType == CPU && k.Host {
				hostKinds = append(hostKinds, k.Name)
			}
		}
		return nil, fmt.Errorf("target list %q: %w: add a target of a host kind (%s), usually last", s, ErrNoHost, strings.Join(hostKinds, ", "))
	}
	for i, t := range l.Targets {
		if t != l.Host && t.Host == nil {
			l.Targets[i] = t.WithHost(l.Host)
		}
	}
	return l, nil
}

// splitLabel cuts a list element "LABEL=TARGET" into its label and
// target; an element without a label is returned whole. A label is a
// word before '=' that starts the element: kind and tag names, JSON and
// options cannot contain '=' there.
func splitLabel(elem string) (label, spec string) {
	trimmed := strings.TrimLeft(elem, " \t\n\r")
	i := strings.IndexAny(trimmed, "= \t\n\r{\"'")
	if i <= 0 || trimmed[i] != '=' {
		return "", elem
	}
	return trimmed[:i], trimmed[i+1:]
}

// splitList cuts s into list elements by the rule of ParseList.
func (r *Registry) splitList(s string) ([]string, []int, error) {
	var parts []string
	starts := []int{0}
	start, depth := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"', '\'':
			n, err := quotedLen(s[i:])
			if err != nil {
				return nil, nil, fmt.Errorf("column %d: %w", i+1, err)
			}
			i += n - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 && r.splitsAt(s[start:i], s[i+1:]) {
				parts = append(parts, s[start:i])
				start = i + 1
				starts = append(starts, start)
			}
		}
	}
	return append(parts, s[start:]), starts, nil
}

// splitsAt reports whether a top-level comma between cur (the current
// element so far) and rest ends the element (rules (a) to (d) of
// ParseList).
func (r *Registry) splitsAt(cur, rest string) bool {
	const space = " \t\n\r"
	head := strings.TrimLeft(cur, space)
	if strings.HasPrefix(head, "{") || !strings.ContainsAny(head, space) {
		return true // (a)
	}
	after := strings.TrimLeft(rest, space)
	spaced := len(after) < len(rest)
	if after == "" || after[0] == ',' || after[0] == '{' {
		return true // (b)
	}
	word := after
	if j := strings.IndexAny(after, space+","); j >= 0 {
		word = after[:j]
	}
	if _, ok := r.Lookup(word); ok {
		return true // (c)
	}
	if _, ok := r.Tags().Lookup(word); ok {
		return true // (c)
	}
	if label, _ := splitLabel(word); label != "" {
		return true // (c): a labelled element, "little=c"
	}
	return spaced && word[0] != '-' // (d)
}
