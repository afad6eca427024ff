package escape

import (
	"strconv"
	"strings"
)

// cKeywords are the C99/C11 keywords, GNU keywords and the standard
// type, macro and function names generated code relies on; no identifier
// made from a user's string may take them.
var cKeywords = wordSet(`auto break case char const continue default do double else enum extern float for goto
if inline int long register restrict return short signed sizeof static struct switch typedef union unsigned
void volatile while _Bool _Complex _Imaginary _Alignas _Alignof _Atomic _Generic _Noreturn _Static_assert
_Thread_local _Pragma bool true false int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t
size_t ptrdiff_t intptr_t uintptr_t NULL INFINITY NAN INT64_MIN INT64_C UINT64_C main errno
isnan isinf isfinite signbit fpclassify asm typeof alignas alignof stdin stdout stderr FILE EOF
defined __attribute__ __asm__ __typeof__ __restrict`)

func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// CKeyword reports whether s is a C keyword or a standard name the
// generated code uses (int32_t, NULL, main, ...).
func CKeyword(s string) bool { return cKeywords[s] }

// CIdent maps s to a valid C identifier: every character (or invalid UTF-8
// byte) other than an ASCII letter, digit or '_' becomes '_', a leading digit gets a "v_" prefix,
// the empty string becomes "v", and a result that is a C keyword, a name
// reserved by the C standard (leading "__" or "_" and a capital letter)
// or for which reserved (may be nil) reports true gets a "v_" prefix.
// Different strings may map to one identifier; a Namer keeps them apart.
func CIdent(s string, reserved func(string) bool) string {
	var b strings.Builder
	for i, c := range s {
		switch {
		case c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
			b.WriteRune(c)
		case c >= '0' && c <= '9':
			if i == 0 {
				b.WriteString("v_")
			}
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == "" {
		return "v"
	}
	if cKeywords[out] || strings.HasPrefix(out, "__") || (len(out) > 1 && out[0] == '_' && out[1] >= 'A' && out[1] <= 'Z') ||
		(reserved != nil && reserved(out)) {
		return "v_" + out
	}
	return out
}

// A Namer hands out distinct C identifiers for a set of strings: each
// Name is CIdent of its string, or that with the first free suffix _2,
// _3, ... when an earlier string took it. With FoldCase, identifiers
// that differ only in case count as equal (for names that also appear
// upper-cased in macros). Names are handed out in call order, so the
// mapping is deterministic.
type Namer struct {
	// FoldCase makes identifiers unique ignoring ASCII case.
	FoldCase bool
	// Reserved, when not nil, reports names the caller itself uses.
	Reserved func(string) bool
	taken    map[string]bool
}

// Name returns the identifier for s (a new one on every call).
func (n *Namer) Name(s string) string {
	if n.taken == nil {
		n.taken = map[string]bool{}
	}
	base := CIdent(s, n.Reserved)
	name := base
	for k := 2; n.taken[n.key(name)]; k++ {
		name = base + "_" + strconv.Itoa(k)
	}
	n.taken[n.key(name)] = true
	return name
}

func (n *Namer) key(s string) string {
	if n.FoldCase {
		return strings.ToLower(s)
	}
	return s
}

// IsCIdent reports whether s can be used verbatim as a C identifier: ASCII
// letters, digits and '_', not starting with a digit, and no keyword.
func IsCIdent(s string) bool {
	if s == "" || cKeywords[s] {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}
