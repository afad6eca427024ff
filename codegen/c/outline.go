package c

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/tir"
)

// This file outlines parallel loops. In a threaded library
// (Options.OpenMP) a parallel loop becomes a static function of a range
// of its iterations, kiln_par_<symbol>_<k>, which kiln_parallel_for
// (pool.go) runs on the threads: the loop's body goes into a function
// taking the variables it uses from outside as parameters (so that
// restrict-qualified buffers stay restrict for the C compiler), and a
// thunk unpacks them from a context struct the caller fills in. The
// body's text is the one the loop would have inline: the same C names,
// the same expressions.

// capture is a variable a parallel loop's body uses from outside.
type capture struct {
	v        *tir.Var
	name     string // its C name (the same inside and outside)
	ctype    string // its C type
	restrict bool
}

// varDecl is how a variable in scope was declared: its C type and
// whether it is a restrict-qualified pointer (or a distinct array).
type varDecl struct {
	ctype    string
	restrict bool
}

// captures lists the variables in scope that s uses, in order of first
// use.
func (fg *funcGen) captures(s tir.Stmt) []capture {
	var out []capture
	seen := map[*tir.Var]bool{}
	add := func(v *tir.Var) {
		if seen[v] {
			return
		}
		seen[v] = true
		name, ok := fg.env[v]
		if !ok {
			return // defined inside s
		}
		d, ok := fg.decls[v]
		if !ok {
			failf("function %s: variable %s has no recorded declaration", fg.f.Name, v.Name)
		}
		out = append(out, capture{v: v, name: name, ctype: d.ctype, restrict: d.restrict})
	}
	tir.Visit(s, func(n tir.Node) bool {
		switch x := n.(type) {
		case *tir.Var:
			add(x)
		case *tir.BufferLoad:
			add(x.Buffer.Data)
		case *tir.BufferStore:
			add(x.Buffer.Data)
		}
		return true
	})
	return out
}

// outlineParallel emits parallel loop x over [lo, end) (C expressions
// evaluated here) as a call of kiln_parallel_for on an outlined function.
// Loops nested in the body run serially inside each range.
func (fg *funcGen) outlineParallel(x *tir.For, lo, end string) {
	k := fg.outlined
	fg.outlined++
	fn := fmt.Sprintf("kiln_par_%s_%d", fg.info.Symbol, k)
	caps := fg.captures(x.Body)
	heap, checks := fg.needsHeap(x.Body), checksIndices(x.Body)

	// The body function, written to its own buffer (emitted before the
	// function that calls it).
	outer, outerIndent := fg.b, fg.indent
	body := &strings.Builder{}
	fg.b, fg.indent = body, 0
	params := append(fg.captureParams(caps, heap, checks), "int64_t kiln_lo", "int64_t kiln_hi")
	fg.line("")
	fg.line("static KILN_NOINLINE void %s_body(%s) {", fn, strings.Join(params, ", "))
	fg.indent++
	for _, c := range caps {
		fg.line("(void)%s;", c.name)
	}
	ct := cType(x.Var.T)
	name, restore := fg.bind(x.Var, varDecl{ctype: ct})
	if minC, ok := tir.ConstInt(x.Min); ok && minC >= 0 {
		fg.nonNeg[x.Var] = true
		defer delete(fg.nonNeg, x.Var)
	}
	fg.outlining++
	fg.parallel++
	// The range lies in the loop's: with constant bounds, say so (the C
	// compiler then knows, as it did of the loop, that the variable is not
	// negative, which makes divisions by constants cheaper).
	minC, minConst := tir.ConstInt(x.Min)
	extC, extConst := tir.ConstInt(x.Extent)
	if minConst && extConst {
		fg.line("KILN_ASSUME(kiln_lo >= %d && kiln_hi <= %d);", minC, minC+extC)
	}
	// Heap buffers at the head of the body are allocated once per range,
	// around the loop (each thread's own), instead of once per iteration.
	hoisted, inner := fg.headAllocs(x.Body)
	fg.around(hoisted, func() {
		fg.line("for (%s %s = (%s)kiln_lo; %s < (%s)kiln_hi; ++%s) {", ct, name, ct, name, ct, name)
		fg.block(inner)
		fg.line("}")
	})
	fg.parallel--
	fg.outlining--
	restore()
	fg.indent--
	fg.line("}")

	// The context struct and the thunk kiln_parallel_for calls.
	fields := make([]string, 0, len(caps)+2)
	inits := make([]string, 0, len(caps)+2)
	args := make([]string, 0, len(caps)+4)
	for _, c := range caps {
		fields = append(fields, fmt.Sprintf("  %s %s;", c.ctype, c.name))
		inits = append(inits, c.name)
		args = append(args, "kiln_c->"+c.name)
	}
	if heap {
		fields = append(fields, "  int32_t* kiln_oom;")
		inits = append(inits, fg.oomRef())
		args = append(args, "kiln_c->kiln_oom")
	}
	if checks {
		fields = append(fields, "  kiln_index_error* kiln_ierr;")
		inits = append(inits, fg.ierrRef())
		args = append(args, "kiln_c->kiln_ierr")
	}
	args = append(args, "kiln_lo", "kiln_hi")
	if len(fields) > 0 {
		fg.line("")
		fg.line("typedef struct {")
		for _, f := range fields {
			fg.line("%s", f)
		}
		fg.line("} %s_ctx;", fn)
	}
	fg.line("")
	fg.line("static void %s(void* kiln_p, int64_t kiln_lo, int64_t kiln_hi) {", fn)
	fg.indent++
	if len(fields) > 0 {
		fg.line("const %s_ctx* kiln_c = (const %s_ctx*)kiln_p;", fn, fn)
	} else {
		fg.line("(void)kiln_p;")
	}
	fg.line("%s_body(%s);", fn, strings.Join(args, ", "))
	fg.indent--
	fg.line("}")
	fg.pre.WriteString(body.String())
	fg.b, fg.indent = outer, outerIndent

	// The call.
	ctx := "NULL"
	fg.line("{")
	fg.indent++
	if len(fields) > 0 {
		fg.line("%s_ctx kiln_c = {%s};", fn, strings.Join(inits, ", "))
		ctx = "&kiln_c"
	}
	fg.line("kiln_parallel_for(%s, %s, (int64_t)(%s), (int64_t)(%s));", fn, ctx, lo, end)
	fg.indent--
	fg.line("}")
}

// outlineLoop emits loop x (annotated tir.AnnOutline) as a call of a
// static function kiln_loop_<symbol>_<k> that holds it, taking the
// variables it uses from outside as parameters as a parallel loop's body
// does. The function is not inlined, so the C compiler allocates its
// registers apart from the code around the call. Integer variables known
// to be non-negative here are declared so inside.
func (fg *funcGen) outlineLoop(x *tir.For) {
	k := fg.outlined
	fg.outlined++
	fn := fmt.Sprintf("kiln_loop_%s_%d", fg.info.Symbol, k)
	caps := fg.captures(x)
	heap, checks := fg.needsHeap(x), checksIndices(x)

	outer, outerIndent := fg.b, fg.indent
	body := &strings.Builder{}
	fg.b, fg.indent = body, 0
	params := fg.captureParams(caps, heap, checks)
	var args []string
	for _, c := range caps {
		args = append(args, c.name)
	}
	if heap {
		args = append(args, fg.oomRef())
	}
	if checks {
		args = append(args, fg.ierrRef())
	}
	if len(params) == 0 {
		params = []string{"void"}
	}
	fg.line("")
	fg.line("static KILN_NOINLINE void %s(%s) {", fn, strings.Join(params, ", "))
	fg.indent++
	for _, c := range caps {
		fg.line("(void)%s;", c.name)
	}
	for _, c := range caps {
		if fg.nonNeg[c.v] {
			fg.line("KILN_ASSUME(%s >= 0);", c.name)
		}
	}
	fg.outlining++
	plain := *x
	plain.Annotations = nil
	fg.forStmt(&plain)
	fg.outlining--
	fg.indent--
	fg.line("}")
	fg.pre.WriteString(body.String())
	fg.b, fg.indent = outer, outerIndent
	fg.line("%s(%s);", fn, strings.Join(args, ", "))
}

// captureParams declares an outlined function's parameters: the captured
// variables (restrict-qualified where they were and the function allows
// it), then the out-of-memory flag and the index-error record when the
// outlined code needs them.
func (fg *funcGen) captureParams(caps []capture, heap, checks bool) []string {
	var params []string
	for _, c := range caps {
		if c.restrict && fg.restrictOK() {
			params = append(params, c.ctype+" restrict "+c.name)
		} else {
			params = append(params, c.ctype+" "+c.name)
		}
	}
	if heap {
		params = append(params, "int32_t* kiln_oom")
	}
	if checks {
		params = append(params, "kiln_index_error* kiln_ierr")
	}
	return params
}

// oomRef is the C expression of a pointer to the function's out-of-memory
// flag (inside an outlined loop, the parameter holding it).
func (fg *funcGen) oomRef() string {
	if fg.outlining > 0 {
		return "kiln_oom"
	}
	return "&kiln_oom"
}

// ierrRef is the C expression of a pointer to the function's index error
// record.
func (fg *funcGen) ierrRef() string {
	if fg.outlining > 0 {
		return "kiln_ierr"
	}
	return "&kiln_ierr"
}

// headAllocs splits a parallel loop's body into the heap allocations
// (above Options.StackLimit, of constant size) that begin it and the
// statement inside them: an allocation heading the first statement of a
// sequence counts as heading the sequence (Seq(Allocate(b, s1), s2) is
// Allocate(b, Seq(s1, s2)): nothing after s1 can name b). outlineParallel
// allocates them once per range of iterations: a tile's scratch of over
// 16 KiB, malloc'd and freed per tile, made glibc return the memory to
// the system and fault it in again at every tile (a Winograd row tile's
// four buffers, 230 KB: 1.09 -> 2.29 ms for resnet18's 64 -> 64 on 56x56
// in a C harness).
func (fg *funcGen) headAllocs(s tir.Stmt) ([]*tir.Allocate, tir.Stmt) {
	var out []*tir.Allocate
	for {
		switch x := s.(type) {
		case *tir.Allocate:
			if !fg.hoistable(x) {
				return out, s
			}
			out = append(out, x)
			s = x.Body
			continue
		case *tir.SeqStmt:
			if len(x.Seq) > 0 {
				if a, ok := x.Seq[0].(*tir.Allocate); ok && fg.hoistable(a) {
					out = append(out, a)
					s = tir.Seq(append([]tir.Stmt{a.Body}, x.Seq[1:]...)...)
					continue
				}
			}
		}
		return out, s
	}
}

// hoistable reports whether allocation a is malloc'd (headAllocs).
func (fg *funcGen) hoistable(a *tir.Allocate) bool {
	return fg.onHeap(a) && fg.g.opts.AllowMalloc
}

// around emits the allocations as allocate does, nested in order, with
// emit's statements innermost.
func (fg *funcGen) around(allocs []*tir.Allocate, emit func()) {
	if len(allocs) == 0 {
		emit()
		return
	}
	fg.allocateWith(allocs[0], func() { fg.around(allocs[1:], emit) })
}
