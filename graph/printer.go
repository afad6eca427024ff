package graph

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// DefaultInlineConstLimit is the largest constant (in elements) printed with
// its values when PrintOptions.InlineConstLimit is zero.
const DefaultInlineConstLimit = 16

// PrintOptions control the text printer. The zero value is the default.
type PrintOptions struct {
	// InlineConstLimit is the largest number of elements a constant may have
	// to be printed with its values; larger ones print as
	// `constant(float32, [64, 3, 7, 7], ...)`. Zero means
	// DefaultInlineConstLimit; a negative value elides every constant.
	InlineConstLimit int
	// InlineAllConstants prints every constant's values, whatever its size,
	// so that the text parses back into an equivalent module.
	InlineAllConstants bool
	// ShowSpans prints each call's span (its ONNX node name) as a
	// `/* span="..." */` comment, which the parser reads back.
	ShowSpans bool
	// HideTypes omits the `/* type */` comments after bindings.
	HideTypes bool
	// Annotate, when set, is asked for a note on every bound node and the
	// result expression (for example the device planning chose); a
	// non-empty note is printed as a `/* note */` comment, which the
	// parser ignores.
	Annotate func(e Expr) string
}

// String prints the module with default options.
func (m *Module) String() string {
	var b strings.Builder
	if err := Print(&b, m, PrintOptions{}); err != nil {
		return "<print error: " + err.Error() + ">"
	}
	return b.String()
}

// Print writes the module in the graph IR text syntax: one `def @name` per
// function, "main" first then the others sorted by name. The output is
// deterministic and, with InlineAllConstants, parses back with Parse into a
// module that prints identically.
func Print(w io.Writer, m *Module, opts PrintOptions) error {
	bw := bufio.NewWriter(w)
	for i, name := range m.Names() {
		if i > 0 {
			bw.WriteByte('\n')
		}
		p := newPrinter(opts)
		p.def(name, m.Funcs[name])
		bw.WriteString(p.b.String())
	}
	return bw.Flush()
}

// ExprString prints one expression with default options. A function
// literal prints as `fn (...) { ... }`; any other expression prints as the
// bindings it needs followed by its own text, one per line.
func ExprString(e Expr) string {
	p := newPrinter(PrintOptions{})
	if f, ok := e.(*Function); ok {
		p.b.WriteString(p.fnLiteral(f, ""))
		return p.b.String()
	}
	p.b.WriteString(p.block(e, ""))
	return strings.TrimSuffix(p.b.String(), "\n")
}

// printer holds the state of printing one top-level function: the names
// of bound nodes and the next temporary number (shared by nested function
// literals, as in Relay's text format).
type printer struct {
	opts  PrintOptions
	b     strings.Builder
	names map[Expr]string
	next  int
}

func newPrinter(opts PrintOptions) *printer {
	return &printer{opts: opts, names: map[Expr]string{}}
}

// def prints `def @name [attrs] (params) -> T { body }`.
func (p *printer) def(name string, f *Function) {
	p.b.WriteString("def ")
	p.b.WriteString(globalName(name))
	p.signature(f, &p.b)
	p.b.WriteString(" {\n")
	p.b.WriteString(p.block(f.Body, "  "))
	p.b.WriteString("}\n")
}

// signature writes ` [attrs] (params) -> T` (attrs and the return type only
// when present/known; no space before '(' when there are no attrs).
func (p *printer) signature(f *Function, b *strings.Builder) {
	if len(f.Attrs) > 0 {
		b.WriteString(" [")
		b.WriteString(formatFuncAttrs(f.Attrs))
		b.WriteString("] ")
	}
	b.WriteByte('(')
	for i, v := range f.Params {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(varName(v.Name))
		if t := v.Type(); t != nil {
			b.WriteString(": ")
			b.WriteString(t.String())
		}
	}
	b.WriteByte(')')
	ret := f.RetType
	if ret == nil && f.Body != nil {
		ret = f.Body.Type()
	}
	if ret != nil {
		b.WriteString(" -> ")
		b.WriteString(ret.String())
	}
}

// formatFuncAttrs prints function attributes in sorted order. Values that
// are not legal attribute values print as quoted strings.
func formatFuncAttrs(a ir.Attrs) string {
	var b strings.Builder
	for i, k := range a.Keys() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
		b.WriteByte('=')
		v := a[k]
		if ir.KindOf(v) == 0 {
			b.WriteString(strconv.Quote(fmt.Sprint(v)))
		} else {
			b.WriteString(ir.FormatAttrValue(v))
		}
	}
	return b.String()
}

// block returns the lines binding every non-leaf node under root (except
// root itself) followed by root's text, each line indented.
func (p *printer) block(root Expr, indent string) string {
	var b strings.Builder
	PostOrder(root, func(e Expr) {
		if e == root {
			return
		}
		if _, done := p.names[e]; done {
			return
		}
		switch x := e.(type) {
		case *Call, *Tuple, *TupleGetItem:
			p.bindCallee(x, indent, &b)
			text := p.text(e, indent)
			name := "%" + strconv.Itoa(p.next)
			p.next++
			p.names[e] = name
			b.WriteString(indent)
			b.WriteString(name)
			b.WriteString(" = ")
			b.WriteString(text)
			b.WriteString(p.comments(e))
			b.WriteString(";\n")
		case *Function:
			p.bindFunction(x, indent, &b)
		}
	})
	p.bindCallee(root, indent, &b)
	if f, ok := root.(*Function); ok {
		if _, bound := p.names[f]; !bound {
			b.WriteString(indent + p.fnLiteral(f, indent) + "\n")
			return b.String()
		}
	}
	b.WriteString(indent + p.text(root, indent))
	if c, ok := root.(*Call); ok && p.opts.ShowSpans && c.Span != "" {
		b.WriteString(" /* span=" + strconv.Quote(c.Span) + " */")
	}
	b.WriteString(p.note(root))
	b.WriteByte('\n')
	return b.String()
}

// bindCallee binds the function literal a call applies, if any, before the call.
func (p *printer) bindCallee(e Expr, indent string, b *strings.Builder) {
	if c, ok := e.(*Call); ok {
		if f, ok := c.Fn.(*Function); ok {
			if _, done := p.names[f]; !done {
				p.bindFunction(f, indent, b)
			}
		}
	}
}

// bindFunction prints `%N = fn ... { ... };` — the body's temporaries are
// numbered before the function itself (post order).
func (p *printer) bindFunction(f *Function, indent string, b *strings.Builder) {
	lit := p.fnLiteral(f, indent)
	name := "%" + strconv.Itoa(p.next)
	p.next++
	p.names[f] = name
	b.WriteString(indent + name + " = " + lit + ";\n")
}

// fnLiteral prints `fn [attrs] (params) -> T {\n body \n indent}`.
func (p *printer) fnLiteral(f *Function, indent string) string {
	var b strings.Builder
	b.WriteString("fn")
	if len(f.Attrs) == 0 {
		b.WriteByte(' ')
	}
	p.signature(f, &b)
	b.WriteString(" {\n")
	b.WriteString(p.block(f.Body, indent+"  "))
	b.WriteString(indent + "}")
	return b.String()
}

// comments returns the type and span comments of a bound node.
func (p *printer) comments(e Expr) string {
	s := ""
	if t := e.Type(); t != nil && !p.opts.HideTypes {
		s += " /* " + t.String() + " */"
	}
	if c, ok := e.(*Call); ok && p.opts.ShowSpans && c.Span != "" {
		s += " /* span=" + strconv.Quote(c.Span) + " */"
	}
	return s + p.note(e)
}

// note is the Annotate comment of e, or "".
func (p *printer) note(e Expr) string {
	if p.opts.Annotate == nil {
		return ""
	}
	a := p.opts.Annotate(e)
	if a == "" {
		return ""
	}
	return " /* " + strings.ReplaceAll(a, "*/", "* /") + " */"
}

// ref prints a reference to e: its temporary name when bound, else its text.
func (p *printer) ref(e Expr, indent string) string {
	if n, ok := p.names[e]; ok {
		return n
	}
	return p.text(e, indent)
}

// text prints e itself (its children by reference).
func (p *printer) text(e Expr, indent string) string {
	switch x := e.(type) {
	case nil:
		return "<nil>"
	case *Var:
		return varName(x.Name)
	case *GlobalVar:
		return globalName(x.Name)
	case *Constant:
		return p.constant(x.Value)
	case *Function:
		return p.fnLiteral(x, indent)
	case *Tuple:
		parts := make([]string, len(x.Fields))
		for i, f := range x.Fields {
			parts[i] = p.ref(f, indent)
		}
		if len(parts) == 1 {
			return "(" + parts[0] + ",)"
		}
		return "(" + strings.Join(parts, ", ") + ")"
	case *TupleGetItem:
		return p.ref(x.Tuple, indent) + "." + strconv.Itoa(x.Index)
	case *Call:
		var b strings.Builder
		switch {
		case x.Op != nil:
			b.WriteString(x.Op.Name)
		default:
			b.WriteString(p.ref(x.Fn, indent))
		}
		b.WriteByte('(')
		for i, a := range x.Args {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(p.ref(a, indent))
		}
		if x.Op != nil {
			for i, k := range x.Attrs.Keys() {
				if i > 0 || len(x.Args) > 0 {
					b.WriteString(", ")
				}
				b.WriteString(k)
				b.WriteByte('=')
				b.WriteString(ir.FormatAttrValue(x.Attrs[k]))
			}
		}
		b.WriteByte(')')
		return b.String()
	}
	return fmt.Sprintf("<%T>", e)
}

// constant prints `constant(dtype, [shape], [values])`, eliding the values
// of large constants as `...`.
func (p *printer) constant(t *tensor.Tensor) string {
	var b strings.Builder
	b.WriteString("constant(")
	b.WriteString(t.DType.String())
	b.WriteString(", ")
	b.WriteString(t.Shape.String())
	b.WriteString(", ")
	limit := p.opts.InlineConstLimit
	if limit == 0 {
		limit = DefaultInlineConstLimit
	}
	if !p.opts.InlineAllConstants && int64(t.Len()) > int64(limit) {
		b.WriteString("...)")
		return b.String()
	}
	b.Grow(t.Len() * 14)
	b.WriteByte('[')
	for i := 0; i < t.Len(); i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(FormatElement(t, i))
	}
	b.WriteString("])")
	return b.String()
}

// FormatElement prints element i of t the way the text format writes
// constant values: floats with a point (float32, float16 and bfloat16 with
// the shortest text that reads back to the same float32), integers plain,
// bools as true/false.
func FormatElement(t *tensor.Tensor, i int) string {
	switch t.DType {
	case ir.Float64:
		return ir.FormatFloat(t.Float(i))
	case ir.Float32, ir.Float16, ir.BFloat16:
		return formatFloat32(float32(t.Float(i)))
	case ir.Bool:
		return strconv.FormatBool(t.Int(i) != 0)
	case ir.Uint64:
		return strconv.FormatUint(t.Uint(i), 10)
	}
	return strconv.FormatInt(t.Int(i), 10)
}

// formatFloat32 is ir.FormatFloat at float32 precision: the shortest text
// that parses (at 32 bits) to exactly f, always with '.', 'e', inf or nan.
func formatFloat32(f float32) string {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return ir.FormatFloat(float64(f))
	}
	s := strconv.FormatFloat(float64(f), 'g', -1, 32)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// isBareName reports whether a variable or global name prints without
// quotes: dot-separated segments each matching [A-Za-z_][A-Za-z0-9_]*. (A
// segment starting with a digit would read as a tuple projection.)
func isBareName(s string) bool {
	if s == "" {
		return false
	}
	for _, seg := range strings.Split(s, ".") {
		if seg == "" || !isIdentStart(seg[0]) {
			return false
		}
		for i := 1; i < len(seg); i++ {
			if !isIdentStart(seg[i]) && !isDigit(seg[i]) {
				return false
			}
		}
	}
	return true
}

func isIdentStart(c byte) bool { return c == '_' || (c|0x20) >= 'a' && (c|0x20) <= 'z' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func quoteName(s string) string {
	if isBareName(s) {
		return s
	}
	return strconv.Quote(s)
}

// varName prints a variable reference: %name or %"quoted name".
func varName(s string) string { return "%" + quoteName(s) }

// globalName prints a global reference: @name or @"quoted name".
func globalName(s string) string { return "@" + quoteName(s) }
