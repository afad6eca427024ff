package c

import (
	"slices"
	"strings"

	"github.com/kiln-dev/kiln/tir"
)

// unitParts keeps what Generate emitted per function, so that the module
// can be re-assembled as several translation units compiled in parallel.
type unitParts struct {
	g     *gen
	funcs []funcPiece
}

// funcPiece is the C of one PrimFunc (unpacked and packed forms) and the
// micro-kernels it calls.
type funcPiece struct {
	code    string
	kernels []tir.Kernel
}

// cost estimates the compile time of a piece by the size of its C.
func (p funcPiece) cost() int { return len(p.code) }

// sharedKernel is a kernel's definition with external (hidden) linkage,
// for defining it in one translation unit and declaring it in the others
// that call it: decl is the declaration, def the definition. ok is false
// when the source does not have the one definition line Kernel.Source
// promises ("static ... SYMBOL(...) {"); such a kernel is then copied,
// static, into every unit that calls it.
func sharedKernel(k tir.Kernel) (decl, def string, ok bool) {
	src, sym := k.Source(), k.Symbol()
	lines := strings.SplitAfter(src, "\n")
	at := -1
	for i, l := range lines {
		t := strings.TrimRight(l, "\n")
		if strings.HasPrefix(t, "static ") && strings.Contains(t, " "+sym+"(") && strings.HasSuffix(t, ") {") {
			if at >= 0 {
				return "", "", false
			}
			at = i
		}
	}
	if at < 0 {
		return "", "", false
	}
	sig := strings.TrimSuffix(strings.TrimPrefix(strings.TrimRight(lines[at], "\n"), "static "), " {")
	sig = strings.TrimPrefix(sig, "inline ")
	lines[at] = "KILN_HIDDEN " + sig + " {\n"
	return "KILN_HIDDEN " + sig + ";\n", strings.Join(lines, ""), true
}

// minUnitBytes is the least C per translation unit worth a compiler
// process of its own: below it the cost of starting the compiler and
// parsing the headers again exceeds what parallelism gains.
const minUnitBytes = 24 << 10

// Units splits the source into at most n translation units for
// compiling in parallel: together they define exactly what Code defines
// (the runtime definitions in the first unit, each function in one unit,
// each unit with the helpers, kernels and declarations its functions
// use). Functions and kernels are spread by estimated compile cost,
// largest first onto the least loaded unit; each kernel is defined in one
// unit (hidden linkage) and declared in the others that call it; within
// a unit functions keep module order.
// The split depends only on the source and n. A Source not made by
// Generate, or one too small to be worth splitting, is one unit: Code.
func (s *Source) Units(n int) []string { return s.units(n, minUnitBytes) }

// units is Units with the least C per unit given.
func (s *Source) units(n, minBytes int) []string {
	if s.parts == nil || n <= 1 || len(s.parts.funcs) < 2 {
		return []string{s.Code}
	}
	total := 0
	for _, p := range s.parts.funcs {
		total += p.cost()
	}
	n = min(n, len(s.parts.funcs), max(1, total/max(1, minBytes)))
	if n <= 1 {
		return []string{s.Code}
	}
	// The items to spread: the functions, and each kernel once. A
	// kernel is defined in the unit it falls to and declared in the
	// others that call it (copied static into resnet18's two units, its
	// Winograd and broadcast kernels made them 294 KB of C for a 227 KB
	// module, 3.3 s each to compile instead of about 2).
	g := s.parts.g
	type item struct {
		fn   int // index into funcs, or -1 for a kernel
		k    tir.Kernel
		cost int
	}
	var items []item
	for i, f := range s.parts.funcs {
		items = append(items, item{fn: i, cost: f.cost()})
	}
	// decls and defs hold the kernels with a shared definition; the
	// others are copied, static, into each unit that calls them.
	decls, defs := map[string]string{}, map[string]string{}
	seen := map[string]bool{}
	for _, k := range g.kernels {
		sym := k.Symbol()
		if seen[sym] {
			continue
		}
		seen[sym] = true
		if d, def, ok := sharedKernel(k); ok {
			decls[sym], defs[sym] = d, def
			items = append(items, item{fn: -1, k: k, cost: len(def)})
		}
	}
	slices.SortStableFunc(items, func(a, b item) int { return b.cost - a.cost })
	load := make([]int, n)
	members := make([][]int, n)
	owner := map[string]int{} // the unit defining each shared kernel
	for _, it := range items {
		u := 0
		for j := range load {
			if load[j] < load[u] {
				u = j
			}
		}
		load[u] += it.cost
		if it.fn >= 0 {
			members[u] = append(members[u], it.fn)
		} else {
			owner[it.k.Symbol()] = u
		}
	}
	units := make([]string, 0, n)
	for u, m := range members {
		slices.Sort(m)
		var body strings.Builder
		used := map[string]bool{}
		for _, i := range m {
			body.WriteString(s.parts.funcs[i].code)
			for _, k := range s.parts.funcs[i].kernels {
				used[k.Symbol()] = true
			}
		}
		// Static copies of the kernels that have no shared definition;
		// the unit's own shared definitions and declarations of those
		// defined elsewhere (with their headers, incs), in module order.
		var ks, incs []tir.Kernel
		var shared strings.Builder
		done := map[string]bool{}
		for _, k := range g.kernels {
			sym := k.Symbol()
			if done[sym] {
				continue
			}
			done[sym] = true
			o, isShared := owner[sym]
			switch {
			case !isShared:
				if used[sym] {
					ks = append(ks, k)
				}
			case o == u:
				shared.WriteString("\n" + defs[sym] + "\n")
				incs = append(incs, k)
			case used[sym]:
				shared.WriteString(decls[sym])
				incs = append(incs, k)
			}
		}
		units = append(units, g.assembleUnitShared(ks, incs, shared.String(), u == 0 && !g.opts.NoRuntimeDefs, body.String()))
	}
	return units
}
