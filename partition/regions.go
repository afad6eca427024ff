package partition

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/targets"
)

// Region is a set of calls one external target takes, outlined into one
// function.
type Region struct {
	Target *targets.Target
	// Calls are the region's calls in topological order.
	Calls []*graph.Call
	// Cuts records, for calls of this region, merges refused because they
	// would have created a dependency cycle ("kept apart from ... to avoid
	// a cycle").
	Cuts map[*graph.Call]string
}

// dag is the dependency graph between the calls of a function: an edge
// from producer to consumer, looking through tuples and projections.
type dag struct {
	calls []*graph.Call
	index map[*graph.Call]int
	deps  [][]int // producers of each call
	users [][]int // consumers of each call
}

func newDAG(fn *graph.Function) *dag {
	d := &dag{index: map[*graph.Call]int{}}
	graph.PostOrder(fn.Body, func(e graph.Expr) {
		if c, ok := e.(*graph.Call); ok {
			d.index[c] = len(d.calls)
			d.calls = append(d.calls, c)
		}
	})
	d.deps = make([][]int, len(d.calls))
	d.users = make([][]int, len(d.calls))
	for i, c := range d.calls {
		seen := map[int]bool{}
		var walk func(e graph.Expr)
		walk = func(e graph.Expr) {
			switch x := e.(type) {
			case *graph.Call:
				if j, ok := d.index[x]; ok && !seen[j] {
					seen[j] = true
					d.deps[i] = append(d.deps[i], j)
					d.users[j] = append(d.users[j], i)
				}
			case *graph.Tuple:
				for _, f := range x.Fields {
					walk(f)
				}
			case *graph.TupleGetItem:
				walk(x.Tuple)
			}
		}
		for _, a := range c.Args {
			walk(a)
		}
	}
	return d
}

// reach marks every call reachable from the set along next (deps or
// users), the set itself excluded unless reached again.
func (d *dag) reach(set map[int]bool, next [][]int) map[int]bool {
	out := map[int]bool{}
	var stack []int
	for i := range set {
		stack = append(stack, i)
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, j := range next[i] {
			if !out[j] {
				out[j] = true
				stack = append(stack, j)
			}
		}
	}
	return out
}

// cycleIfMerged reports whether merging the two sets of calls would make
// the outlined function depend on itself: some call outside both is
// reachable from the union and reaches it.
func (d *dag) cycleIfMerged(a, b map[int]bool) bool {
	union := map[int]bool{}
	for i := range a {
		union[i] = true
	}
	for i := range b {
		union[i] = true
	}
	down := d.reach(union, d.users)
	up := d.reach(union, d.deps)
	for i := range down {
		if up[i] && !union[i] {
			return true
		}
	}
	return false
}

// Regions groups the annotated calls of fn. Without merge (nil) every
// call is its own region. With merge (MergeCompilerRegions), a call on a
// target merge accepts joins the region of each producer on that target, greedily in topological
// order, unless the merge would create a dependency cycle through a call
// outside the region; such refusals are recorded as cuts.
func Regions(fn *graph.Function, ann *Annotation, merge func(*targets.Target) bool) []*Region {
	d := newDAG(fn)
	regionOf := make([]int, len(d.calls)) // region id per call, -1: host
	members := map[int]map[int]bool{}
	cuts := map[int]map[*graph.Call]string{}
	for i, c := range d.calls {
		regionOf[i] = -1
		if _, ok := ann.Target[c]; ok {
			regionOf[i] = i
			members[i] = map[int]bool{i: true}
		}
	}
	if merge != nil {
		for i, c := range d.calls {
			t, ok := ann.Target[c]
			if !ok || !merge(t) {
				continue
			}
			for _, j := range d.deps[i] {
				rj, ri := regionOf[j], regionOf[i]
				if rj < 0 || rj == ri || ann.Target[d.calls[j]] != t {
					continue
				}
				if d.cycleIfMerged(members[ri], members[rj]) {
					if cuts[ri] == nil {
						cuts[ri] = map[*graph.Call]string{}
					}
					cuts[ri][c] = fmt.Sprintf("kept apart from the %s region of %s to avoid a dependency cycle", t.Kind.Name, describe(d.calls[j]))
					continue
				}
				// Merge rj into ri.
				for k := range members[rj] {
					members[ri][k] = true
					regionOf[k] = ri
				}
				for c, why := range cuts[rj] {
					if cuts[ri] == nil {
						cuts[ri] = map[*graph.Call]string{}
					}
					cuts[ri][c] = why
				}
				delete(members, rj)
				delete(cuts, rj)
			}
		}
	}
	var out []*Region
	done := map[int]bool{}
	for i := range d.calls {
		r := regionOf[i]
		if r < 0 || done[r] {
			continue
		}
		done[r] = true
		reg := &Region{Target: ann.Target[d.calls[i]], Cuts: cuts[r]}
		for k := range d.calls {
			if members[r][k] {
				reg.Calls = append(reg.Calls, d.calls[k])
			}
		}
		out = append(out, reg)
	}
	return out
}

// describe names a call for reports: its ONNX node (span) or its op.
func describe(c *graph.Call) string {
	if c.Span != "" {
		return fmt.Sprintf("%s (%s)", c.Span, callName(c))
	}
	return callName(c)
}
