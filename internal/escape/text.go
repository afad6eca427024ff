package escape

import (
	"fmt"
	"html"
	"strings"
	"unicode/utf8"
)

// Shell returns s as one word of a POSIX shell command: in single
// quotes, with each single quote written as '\” (close, escaped quote,
// reopen). Nothing inside expands.
func Shell(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// MakeWord returns s as one word of a shell command inside a Makefile
// recipe or variable: shell-quoted (Shell), then with '$' doubled so
// that make expands nothing, and '#' escaped so that it starts no
// comment. A newline or NUL cannot be part of a Make word: they are an
// error.
func MakeWord(s string) (string, error) {
	if strings.ContainsAny(s, "\n\r\x00") {
		return "", fmt.Errorf("%q: a newline or NUL byte cannot be passed through a Makefile", s)
	}
	q := Shell(s)
	q = strings.ReplaceAll(q, "$", "$$")
	q = strings.ReplaceAll(q, "#", `\#`)
	return q, nil
}

// MakeComment returns s as the text of one Makefile comment line: no
// newline (which would end the comment), no trailing backslash (which
// would continue it) and only printable ASCII; other bytes are written
// as \xNN.
func MakeComment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '\\' {
			b.WriteString(`\x`)
			b.WriteString(hex2(c))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Markdown returns s as inline text of a Markdown document (a table cell
// or a paragraph): one line of printable text in which Markdown and HTML
// syntax characters are backslash-escaped or written as entities, so
// that it renders as the literal string and opens no tag, link or code
// span.
func Markdown(s string) string {
	var b strings.Builder
	for _, r := range Printable(s) {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '\\', '`', '*', '_', '[', ']', '(', ')', '#', '|', '{', '}', '~':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// DOT returns s as a quoted Graphviz DOT string (quotes included): one
// line of printable text with '"' and '\\' escaped; a newline in s
// becomes DOT's centred line break \n.
func DOT(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteString(`\n`)
		}
		for _, r := range Printable(line) {
			if r == '"' || r == '\\' {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// ValidText returns s with invalid UTF-8 and control characters other
// than tab, newline and carriage return replaced by U+FFFD, so that any
// HTML or XML parser accepts it as text; markup is left as it is (for
// text that a contextual escaper such as html/template produced).
func ValidText(s string) string {
	return strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// HTML returns s escaped as HTML text or a quoted attribute value
// (html.EscapeString: < > & ' " become entities), with invalid UTF-8 and
// control characters written as Go escapes first.
func HTML(s string) string { return html.EscapeString(Printable(s)) }
