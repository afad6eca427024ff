// Package escape turns strings that come from users — names and doc
// strings of a model, values of target options, file paths — into text
// that is safe inside one output language kiln writes: C comments, C
// string literals, C identifiers, Makefiles, shell commands, Markdown,
// DOT and HTML. Every generator in kiln (codegen/c, aot, the BYOC
// backends, the CLI's reports and exported projects) goes through these
// helpers, so that what a string can do in each language is decided in
// one place: nothing from a model ends a comment, a string or a
// statement, expands a Make variable or runs a command. JSON is written
// with encoding/json only.
//
// The package sits beside the whole pipeline: it has no dependencies in
// kiln and every package that emits text may use it.
package escape

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// CComment returns s as text that is safe inside a C block comment
// (/* ... */) under any C standard: printable ASCII stays as it is except
// that "*/", "/*", "??" (trigraphs) and backslashes are broken up, and
// every other byte (newline, carriage return, control and non-ASCII
// bytes, invalid UTF-8) becomes a \xNN escape, so the comment stays on
// one line and can neither end early nor splice lines.
func CComment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		var prev byte
		if i > 0 {
			prev = s[i-1]
		}
		switch {
		case c < 0x20 || c >= 0x7f || c == '\\':
			b.WriteString(`\x`)
			b.WriteString(hex2(c))
		case c == '/' && prev == '*', c == '*' && prev == '/', c == '?' && prev == '?':
			// Break the pair with a visible escape of the second byte.
			b.WriteString(`\x`)
			b.WriteString(hex2(c))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// CString returns s as a C string literal, quotes included: '"' and '\\'
// escaped, '?' as "\?" (no trigraph can form), newline and tab as \n and
// \t, every other control or non-ASCII byte as a three-digit octal escape
// (which cannot absorb a following digit, as a \x escape would). The
// literal holds exactly the bytes of s.
func CString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '?':
			b.WriteString(`\?`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c >= 0x7f:
			b.WriteString(`\` + strconv.FormatInt(int64(c)+0o1000, 8)[1:])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Printable returns s as one line of printable text for messages, logs
// and text reports: valid UTF-8 without control characters; anything
// else is written as Go escapes (strconv.Quote's rules, without the
// quotes). It is not an escape for any programming language.
func Printable(s string) string {
	ok := utf8.ValidString(s)
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&15]})
}
