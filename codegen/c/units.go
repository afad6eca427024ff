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

// cost estimates the compile time of a piece by the size of its C and
// of the kernels it calls (kernels are counted per piece: every unit
// that calls one compiles its own static copy).
func (p funcPiece) cost() int {
	n := len(p.code)
	for _, k := range p.kernels {
		n += len(k.Source())
	}
	return n
}

// minUnitBytes is the least C per translation unit worth a compiler
// process of its own: below it the cost of starting the compiler and
// parsing the headers again exceeds what parallelism gains.
const minUnitBytes = 24 << 10

// Units splits the source into at most n translation units for
// compiling in parallel: together they define exactly what Code defines
// (the runtime definitions in the first unit, each function in one unit,
// each unit with the helpers, kernels and declarations its functions
// use). Functions are spread by estimated compile cost, largest first
// onto the least loaded unit; within a unit they keep module order.
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
	order := make([]int, len(s.parts.funcs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return s.parts.funcs[b].cost() - s.parts.funcs[a].cost() })
	load := make([]int, n)
	members := make([][]int, n)
	for _, i := range order {
		u := 0
		for j := range load {
			if load[j] < load[u] {
				u = j
			}
		}
		load[u] += s.parts.funcs[i].cost()
		members[u] = append(members[u], i)
	}
	g := s.parts.g
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
		var ks []tir.Kernel
		for _, k := range g.kernels {
			if used[k.Symbol()] {
				ks = append(ks, k)
			}
		}
		units = append(units, g.assembleUnit(ks, u == 0 && !g.opts.NoRuntimeDefs, body.String()))
	}
	return units
}
