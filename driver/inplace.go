package driver

import (
	"encoding/json"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/memplan"
	"github.com/kiln-dev/kiln/runtime"
)

// Views in place (graph executor). Some calls move no data once their
// operands sit in the right bytes:
//
//   - a join: a concatenation along an axis whose leading dimensions are
//     all 1 lays each argument out as one contiguous run of its result
//     (squeezenet's fire modules, googlenet's inception modules);
//   - a cut: a reshape's result has its argument's bytes, and a split
//     along such an axis cuts its argument into contiguous runs
//     (ShuffleNet's channel split).
//
// The planner places the operands of a join inside its result's bytes
// (the kernels producing them write the result directly) and the results
// of a cut inside its argument's bytes (their readers read the argument),
// and marks the node in_place: the executor does not call it (runtime
// checks the layout when it loads the program). The AOT executor plans
// its own memory and still calls the function.

// viewKind says how a call's results relate to its arguments' bytes.
type viewKind int

const (
	notView viewKind = iota
	// joinView: the one result is the arguments laid end to end.
	joinView
	// cutView: the results are the one argument's bytes cut in order.
	cutView
)

// viewOf reports whether call x computes nothing but a join or a cut of
// its arguments (see viewKind).
func viewOf(x *graph.Call) viewKind {
	fn, ok := x.Fn.(*graph.Function)
	if !ok || len(fn.Params) == 0 {
		return notView
	}
	body, ok := fn.Body.(*graph.Call)
	if !ok || len(body.Args) != len(fn.Params) {
		return notView
	}
	for i, a := range body.Args {
		if a != graph.Expr(fn.Params[i]) {
			return notView
		}
	}
	switch body.Op {
	case op.Concatenate:
		outs, err := flatTensorTypes(x.Type())
		if err != nil || len(outs) != 1 || !leadingOnes(outs[0].Shape, body.Attrs.Int("axis")) {
			return notView
		}
		if len(fn.Params) == 1 {
			return cutView // one argument: the result is its bytes
		}
		return joinView
	case op.Reshape:
		return cutView
	case op.Split:
		in, ok := fn.Params[0].Type().(*ir.TensorType)
		if !ok || !leadingOnes(in.Shape, body.Attrs.Int("axis")) {
			return notView
		}
		return cutView
	}
	return notView
}

// leadingOnes reports whether the dimensions of shape before axis
// (negative: from the end) are all 1, so that the slices along axis are
// contiguous runs.
func leadingOnes(shape ir.Shape, axis int64) bool {
	if axis < 0 {
		axis += int64(len(shape))
	}
	if axis < 0 || axis >= int64(len(shape)) {
		return false
	}
	for _, d := range shape[:axis] {
		if d != 1 {
			return false
		}
	}
	return true
}

// inPlaceViews decides which of the views (node ids and kinds, in program
// order) run in place. For each entry it returns the entry whose bytes
// hold it (alias, -1: none) and its byte offset there (rel).
//
// The entries placed inside another must be written by a kernel
// (kiln_op) that is not itself a view in place, must not be outputs of
// the program (pinned), must be on the other's device and must start at
// a multiple of the planner's alignment; the entry holding them must not
// be pinned either. A join's operands must be read by the join alone and
// once. A view runs in place only when all its entries qualify.
func (b *graphBuilder) inPlaceViews(pinned []bool) (alias []int, rel []int64) {
	n := len(b.types)
	alias = make([]int, n)
	rel = make([]int64, n)
	for k := range alias {
		alias[k] = -1
	}
	readers := make([]int, n)
	for _, node := range b.g.Nodes {
		for _, in := range node.Inputs {
			readers[b.rowStart[in[0]]+int(in[1])]++
		}
	}
	inPlace := make([]bool, len(b.g.Nodes))
	entry := func(ref []int64) int { return b.rowStart[ref[0]] + int(ref[1]) }
	// kernelOutput reports whether entry k is written by a kernel that
	// runs (not a view in place) and may share bytes with another entry.
	kernelOutput := func(k int) bool {
		p := b.g.Nodes[b.entryNode(k)]
		return p.Op == runtime.OpKiln && !inPlace[b.entryNode(k)] && !pinned[k] && alias[k] < 0
	}
	sameDev := func(a, c int) bool {
		da, dc := b.g.Attrs.DeviceIndex[a], b.g.Attrs.DeviceIndex[c]
		return da[0] == dc[0] && da[1] == dc[1]
	}
	// lay places parts end to end inside whole, or reports that it
	// cannot.
	lay := func(whole int, parts []int) bool {
		var off int64
		for _, k := range parts {
			if off%memplan.Alignment != 0 || !sameDev(k, whole) {
				return false
			}
			off += b.types[k].NumBytes()
		}
		if off != b.types[whole].NumBytes() {
			return false
		}
		off = 0
		for _, k := range parts {
			alias[k], rel[k] = whole, off
			off += b.types[k].NumBytes()
		}
		return true
	}
	for i, ni := range b.views {
		node := &b.g.Nodes[ni]
		var whole int
		var parts []int
		switch b.viewKinds[i] {
		case joinView:
			whole = b.rowStart[ni]
			if pinned[whole] {
				continue
			}
			ok := true
			for _, in := range node.Inputs {
				k := entry(in)
				if !kernelOutput(k) || readers[k] != 1 {
					ok = false
					break
				}
				parts = append(parts, k)
			}
			if !ok {
				continue
			}
		case cutView:
			whole = entry(node.Inputs[0])
			if !kernelOutput(whole) {
				continue
			}
			ok := true
			for k := b.rowStart[ni]; k < b.rowStart[ni]+numOutputs(b, ni); k++ {
				if pinned[k] {
					ok = false
					break
				}
				parts = append(parts, k)
			}
			if !ok {
				continue
			}
		}
		if !lay(whole, parts) {
			continue
		}
		inPlace[ni] = true
		node.Attrs["in_place"] = json.RawMessage("1")
	}
	return alias, rel
}

// entryNode is the node writing entry k.
func (b *graphBuilder) entryNode(k int) int {
	lo, hi := 0, len(b.rowStart)-1
	for lo < hi { // the last node whose first entry is at most k
		mid := (lo + hi + 1) / 2
		if b.rowStart[mid] <= k {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}
