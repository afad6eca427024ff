package tir

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/ir"
)

// The printer writes TVMScript-like pseudo-Python. It is deterministic:
// variables and buffers are named by their hints, made unique in order of
// first appearance (parameters first) by appending _1, _2, ... Operators
// keep Python's meaning: a // b and a % b are floor division and modulo,
// C's truncating integer division is T.truncdiv / T.truncmod. Scoped
// definitions (Allocate, LetStmt, AttrStmt) print as with-blocks so the
// scope is visible. Int32 constants print bare, other constants with their
// type (T.int64(4), T.float32(0.5)).

// String prints the function.
func (f *PrimFunc) String() string {
	var b strings.Builder
	Fprint(&b, f)
	return b.String()
}

// String prints every function, separated by blank lines.
func (m *Module) String() string {
	var b strings.Builder
	for i, f := range m.funcs {
		if i > 0 {
			b.WriteByte('\n')
		}
		Fprint(&b, f)
	}
	return b.String()
}

// Fprint writes the text form of f to w.
func Fprint(w io.Writer, f *PrimFunc) error {
	p := newPrinter()
	p.function(f)
	_, err := io.WriteString(w, p.b.String())
	return err
}

// ExprString prints an expression.
func ExprString(e PrimExpr) string {
	p := newPrinter()
	p.expr(e, 0)
	return p.b.String()
}

// StmtString prints a statement (without a trailing newline after the
// last line).
func StmtString(s Stmt) string {
	p := newPrinter()
	p.stmt(s, 0)
	return strings.TrimSuffix(p.b.String(), "\n")
}

type printer struct {
	b     strings.Builder
	vars  map[*Var]string
	bufs  map[*Buffer]string
	taken map[string]bool
}

func newPrinter() *printer {
	return &printer{vars: map[*Var]string{}, bufs: map[*Buffer]string{}, taken: map[string]bool{"T": true}}
}

func (p *printer) fresh(hint string) string {
	if hint == "" {
		hint = "v"
	}
	name := hint
	for i := 1; p.taken[name]; i++ {
		name = hint + "_" + strconv.Itoa(i)
	}
	p.taken[name] = true
	return name
}

func (p *printer) varName(v *Var) string {
	if n, ok := p.vars[v]; ok {
		return n
	}
	n := p.fresh(v.Name)
	p.vars[v] = n
	return n
}

// defineBuffer names a buffer at its definition (parameter or allocation):
// it shares its name with its data variable when that is still unnamed.
func (p *printer) defineBuffer(b *Buffer) string {
	if n, ok := p.bufs[b]; ok {
		return n
	}
	if _, named := p.vars[b.Data]; !named {
		n := p.fresh(b.Name)
		p.vars[b.Data] = n
		p.bufs[b] = n
		return n
	}
	n := p.fresh(b.Name)
	p.bufs[b] = n
	return n
}

func (p *printer) bufName(b *Buffer) string {
	if n, ok := p.bufs[b]; ok {
		return n
	}
	n := p.fresh(b.Name)
	p.bufs[b] = n
	return n
}

func (p *printer) indent(n int) {
	for i := 0; i < n; i++ {
		p.b.WriteString("    ")
	}
}

func (p *printer) line(ind int, format string, args ...any) {
	p.indent(ind)
	fmt.Fprintf(&p.b, format, args...)
	p.b.WriteByte('\n')
}

func typeString(t Type) string {
	switch {
	case t.Handle && t.DType == ir.Invalid:
		return "T.handle()"
	case t.Handle:
		return fmt.Sprintf("T.handle(%q)", t.DType.String())
	case t.IsVoid():
		return "T.void"
	}
	return "T." + t.DType.String()
}

func shapeString(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.FormatInt(d, 10)
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func (p *printer) bufferDecl(b *Buffer) string {
	s := fmt.Sprintf("T.Buffer(%s, %q", shapeString(b.Shape), b.DType.String())
	if b.Strides != nil {
		s += ", strides=" + shapeString(b.Strides)
	}
	if b.Scope != ScopeGlobal && b.Scope != "" {
		s += fmt.Sprintf(", scope=%q", b.Scope)
	}
	return s
}

func (p *printer) function(f *PrimFunc) {
	var params []string
	for _, v := range f.Params {
		if b, ok := f.BufferMap[v]; ok {
			n := p.defineBuffer(b)
			if b.Data != v {
				// Malformed (the verifier reports it); keep the text honest.
				n = p.varName(v)
				params = append(params, fmt.Sprintf("%s: %s, data=%s)", n, p.bufferDecl(b), p.varName(b.Data)))
				continue
			}
			params = append(params, fmt.Sprintf("%s: %s)", n, p.bufferDecl(b)))
			continue
		}
		params = append(params, fmt.Sprintf("%s: %s", p.varName(v), typeString(v.T)))
	}
	p.line(0, "@T.prim_func")
	p.line(0, "def %s(%s):", f.Name, strings.Join(params, ", "))
	if len(f.Attrs) > 0 || f.Target != nil {
		attrs := map[string]string{}
		keys := f.Attrs.Keys()
		for _, k := range keys {
			attrs[k] = ir.FormatAttrValue(f.Attrs[k])
		}
		if f.Target != nil {
			if _, ok := attrs[AttrTarget]; !ok {
				keys = append(keys, AttrTarget)
			}
			attrs[AttrTarget] = strconv.Quote(f.Target.Labelled())
		}
		sort.Strings(keys)
		var kv []string
		for _, k := range keys {
			kv = append(kv, fmt.Sprintf("%q: %s", k, attrs[k]))
		}
		p.line(1, "T.func_attr({%s})", strings.Join(kv, ", "))
	}
	// Buffers used in the body that are neither parameters nor allocated
	// (views sharing another buffer's data) are declared up front.
	declared := map[*Buffer]bool{}
	for _, b := range f.BufferMap {
		declared[b] = true
	}
	var views []*Buffer
	note := func(b *Buffer) {
		if !declared[b] {
			declared[b] = true
			views = append(views, b)
		}
	}
	Visit(f.Body, func(n Node) bool {
		switch x := n.(type) {
		case *Allocate:
			declared[x.Buffer] = true
		case *BufferLoad:
			note(x.Buffer)
		case *BufferStore:
			note(x.Buffer)
		}
		return true
	})
	for _, b := range views {
		p.line(1, "%s = %s, data=%s)", p.bufName(b), p.bufferDecl(b), p.varName(b.Data))
	}
	p.stmt(f.Body, 1)
}

func (p *printer) stmt(s Stmt, ind int) {
	switch x := s.(type) {
	case nil:
		p.line(ind, "pass")
	case *SeqStmt:
		if len(x.Seq) == 0 {
			p.line(ind, "pass")
		}
		for _, c := range x.Seq {
			p.stmt(c, ind)
		}
	case *For:
		name := p.varName(x.Var)
		var args string
		if c, ok := x.Min.(*IntImm); ok && c.Value == 0 {
			args = p.exprString(x.Extent)
		} else {
			args = p.exprString(x.Min) + ", extent=" + p.exprString(x.Extent)
		}
		if len(x.Annotations) > 0 {
			var kv []string
			for _, k := range x.Annotations.Keys() {
				kv = append(kv, fmt.Sprintf("%q: %s", k, ir.FormatAttrValue(x.Annotations[k])))
			}
			args += ", annotations={" + strings.Join(kv, ", ") + "}"
		}
		p.line(ind, "for %s in T.%s(%s):", name, x.Kind, args)
		p.stmt(x.Body, ind+1)
	case *BufferStore:
		p.line(ind, "%s[%s] = %s", p.bufName(x.Buffer), p.indices(x.Indices), p.exprString(x.Value))
	case *Allocate:
		b := x.Buffer
		n := p.defineBuffer(b)
		scope := b.Scope
		if scope == "" {
			scope = ScopeGlobal
		}
		extra := ""
		if b.Strides != nil {
			extra = ", strides=" + shapeString(b.Strides)
		}
		p.line(ind, "with T.allocate(%s, %q, %q%s) as %s:", shapeString(b.Shape), b.DType.String(), scope, extra, n)
		p.stmt(x.Body, ind+1)
	case *IfThenElse:
		p.line(ind, "if %s:", p.exprString(x.Cond))
		p.stmt(x.Then, ind+1)
		if x.Else != nil {
			p.line(ind, "else:")
			p.stmt(x.Else, ind+1)
		}
	case *LetStmt:
		v := p.exprString(x.Value)
		p.line(ind, "with T.let(%s) as %s:", v, p.varName(x.Var))
		p.stmt(x.Body, ind+1)
	case *Evaluate:
		p.line(ind, "T.evaluate(%s)", p.exprString(x.Value))
	case *AttrStmt:
		p.line(ind, "with T.attr(%q, %s):", x.Key, p.exprString(x.Value))
		p.stmt(x.Body, ind+1)
	default:
		panic(fmt.Sprintf("tir printer: unknown statement %T", s))
	}
}

func (p *printer) indices(idx []PrimExpr) string {
	if len(idx) == 0 {
		return "()"
	}
	parts := make([]string, len(idx))
	for i, e := range idx {
		parts[i] = p.exprString(e)
	}
	return strings.Join(parts, ", ")
}

func (p *printer) exprString(e PrimExpr) string {
	sub := &printer{vars: p.vars, bufs: p.bufs, taken: p.taken}
	sub.expr(e, 0)
	return sub.b.String()
}

// Python precedence levels.
const (
	precOr = iota + 1
	precAnd
	precNot
	precCmp
	precAdd
	precMul
	precUnary
	precAtom
)

var binarySyntax = map[BinaryOp]struct {
	sym  string
	prec int
}{
	OpAdd: {"+", precAdd}, OpSub: {"-", precAdd}, OpMul: {"*", precMul},
	OpFloorDiv: {"//", precMul}, OpFloorMod: {"%", precMul},
	OpEQ: {"==", precCmp}, OpNE: {"!=", precCmp}, OpLT: {"<", precCmp},
	OpLE: {"<=", precCmp}, OpGT: {">", precCmp}, OpGE: {">=", precCmp},
	OpAnd: {"and", precAnd}, OpOr: {"or", precOr},
}

func (p *printer) args(es []PrimExpr) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = p.exprString(e)
	}
	return strings.Join(parts, ", ")
}

// expr writes e, parenthesized when its precedence is below ctx.
func (p *printer) expr(e PrimExpr, ctx int) {
	w := &p.b
	paren := func(prec int, body func()) {
		if prec < ctx {
			w.WriteByte('(')
		}
		body()
		if prec < ctx {
			w.WriteByte(')')
		}
	}
	switch x := e.(type) {
	case *IntImm:
		switch {
		case x.T.IsBool() && x.Value != 0:
			w.WriteString("True")
		case x.T.IsBool():
			w.WriteString("False")
		case x.T == Int32T && x.Value < 0:
			paren(precUnary, func() { w.WriteString(strconv.FormatInt(x.Value, 10)) })
		case x.T == Int32T:
			w.WriteString(strconv.FormatInt(x.Value, 10))
		case x.T.DType == ir.Uint64:
			fmt.Fprintf(w, "T.uint64(%d)", uint64(x.Value))
		default:
			fmt.Fprintf(w, "T.%s(%d)", x.T.DType, x.Value)
		}
	case *FloatImm:
		fmt.Fprintf(w, "T.%s(%s)", x.T.DType, ir.FormatFloat(x.Value))
	case *StringImm:
		w.WriteString(strconv.Quote(x.Value))
	case *Var:
		w.WriteString(p.varName(x))
	case *Binary:
		if syn, ok := binarySyntax[x.Op]; ok {
			paren(syn.prec, func() {
				p.expr(x.A, syn.prec)
				w.WriteString(" " + syn.sym + " ")
				// Comparisons do not chain in our reading; treat as non-associative.
				p.expr(x.B, syn.prec+1)
			})
			return
		}
		switch x.Op {
		case OpDiv:
			if x.A.Type().IsInteger() {
				fmt.Fprintf(w, "T.truncdiv(%s)", p.args([]PrimExpr{x.A, x.B}))
				return
			}
			paren(precMul, func() {
				p.expr(x.A, precMul)
				w.WriteString(" / ")
				p.expr(x.B, precMul+1)
			})
		case OpMod:
			name := "T.truncmod"
			if x.A.Type().IsFloat() {
				name = "T.fmod"
			}
			fmt.Fprintf(w, "%s(%s)", name, p.args([]PrimExpr{x.A, x.B}))
		default: // min, max
			fmt.Fprintf(w, "T.%s(%s)", x.Op, p.args([]PrimExpr{x.A, x.B}))
		}
	case *Not:
		paren(precNot, func() {
			w.WriteString("not ")
			p.expr(x.A, precNot)
		})
	case *Select:
		fmt.Fprintf(w, "T.Select(%s)", p.args([]PrimExpr{x.Cond, x.True, x.False}))
	case *Cast:
		fmt.Fprintf(w, "T.Cast(%q, %s)", x.T.DType.String(), p.exprString(x.Value))
	case *BufferLoad:
		fmt.Fprintf(w, "%s[%s]", p.bufName(x.Buffer), p.indices(x.Indices))
	case *Call:
		if x.Kernel != nil {
			args := append([]string{strconv.Quote(x.Extern)}, p.args(x.Args))
			fmt.Fprintf(w, "T.call_kernel(%s)", strings.Join(args, ", "))
			return
		}
		if x.Op == CallExtern {
			t := x.T.String()
			args := append([]string{strconv.Quote(t), strconv.Quote(x.Extern)}, p.args(x.Args))
			if len(x.Args) == 0 {
				args = args[:2]
			}
			fmt.Fprintf(w, "T.call_extern(%s)", strings.Join(args, ", "))
			return
		}
		fmt.Fprintf(w, "T.%s(%s)", x.Op, p.args(x.Args))
	default:
		panic(fmt.Sprintf("tir printer: unknown expression %T", e))
	}
}
