package driver

import (
	"encoding/json"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/memplan"
	"github.com/kiln-dev/kiln/runtime"
)

// Concatenation in place (graph executor). A concatenation along an axis
// whose leading dimensions are all 1 lays each argument out as one
// contiguous run of its result. When every argument is an intermediate
// written by a kernel and read by the concatenation alone, the planner
// places each argument at its run inside the result's bytes, the kernels
// that produce them write the result directly, and the concatenation's
// node is marked in_place: the executor does not call it (runtime checks
// the layout when it loads the program). squeezenet's and googlenet's
// fire and inception modules end in such concatenations. The AOT
// executor plans its own memory and still calls the function.

// plainConcat reports whether call x computes nothing but the
// concatenation of its arguments, in order, along an axis whose leading
// dimensions are all 1.
func plainConcat(x *graph.Call) bool {
	fn, ok := x.Fn.(*graph.Function)
	if !ok || len(fn.Params) == 0 {
		return false
	}

	body, ok := fn.Body.(*graph.Call)
	if !ok || body.Op != op.Concatenate || len(body.Args) != len(fn.Params) {
		return false
	}
	for i, a := range body.Args {
		if a != graph.Expr(fn.Params[i]) {
			return false
		}
	}
	outs, err := flatTensorTypes(x.Type())
	if err != nil || len(outs) != 1 {
		return false
	}
	shape := outs[0].Shape
	axis := body.Attrs.Int("axis")
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

// inPlaceConcats decides which of the plain concatenations (node ids in
// concats) run in place. For each argument entry it returns the entry
// whose bytes hold it (alias, -1: none) and its byte offset there (rel).
// An argument qualifies when a kernel (kiln_op) writes it, it is not an
// output of the program (pinned), the concatenation is its only reader
// and reads it once, it is on the result's device, it is not itself a
// result computed in place, and its run starts at a multiple of the
// planner's alignment; the result must not be pinned either. A
// concatenation runs in place only when all its arguments qualify.
func (b *graphBuilder) inPlaceConcats(pinned []bool) (alias []int, rel []int64) {
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
	isResult := make([]bool, n)
	for _, ni := range b.concats {
		out := b.rowStart[ni]
		if pinned[out] {
			continue
		}
		dev := b.g.Attrs.DeviceIndex[out]
		var args []int
		var offs []int64
		var off int64
		ok := true
		for _, in := range b.g.Nodes[ni].Inputs {
			k := b.rowStart[in[0]] + int(in[1])
			di := b.g.Attrs.DeviceIndex[k]
			if b.g.Nodes[in[0]].Op != runtime.OpKiln || pinned[k] || readers[k] != 1 || isResult[k] ||
				di[0] != dev[0] || di[1] != dev[1] || off%memplan.Alignment != 0 {
				ok = false
				break
			}
			args, offs = append(args, k), append(offs, off)
			off += b.types[k].NumBytes()
		}
		if !ok || off != b.types[out].NumBytes() {
			continue
		}
		for i, k := range args {
			alias[k], rel[k] = out, offs[i]
		}
		isResult[out] = true
		b.g.Nodes[ni].Attrs["in_place"] = json.RawMessage("1")
	}
	return alias, rel
}
