// Package memplan is kiln's one memory planner, used by both executors:
// the graph executor's storage (graph.json storage_id and storage_offset)
// and the AOT executor's static workspace pool. It sits at the end of the
// build (package driver), after lowering and the TIR passes, when the
// executor program — kernels in order, the tensors each reads and writes —
// is known:
//
//	steps (the tensors each kernel touches) → Liveness → []Interval
//	    → Plan (greedy by size, by start, by conflicts, perturbed; the best kept)
//	    → one byte offset per tensor in one pool per device
//
// Tensors live from the first step that touches them to the last; two
// tensors whose lifetimes overlap never share a byte.
package memplan

import (
	"fmt"
	"math/rand"
	"sort"
)

// Interval is one buffer to place in the workspace pool: its size in
// bytes and the steps during which it is live (Start..End inclusive).
type Interval struct {
	Size       int64
	Start, End int
}

// Placement is a placement of intervals in one pool.
type Placement struct {
	// Offsets are the byte offsets, in the order of the intervals.
	Offsets []int64
	// Size is the pool's size in bytes.
	Size int64
	// Algorithm names the algorithm whose placement was kept.
	Algorithm string
	// LowerBound is the largest total size of the intervals live at one
	// step (after alignment): no placement can use less.
	LowerBound int64
	// Tried records each algorithm's pool size.
	Tried map[string]int64
}

// Alignment is the byte alignment of every planned buffer.
const Alignment = 64

// perturbRounds is the most perturbed orders Plan tries; perturbWork
// bounds their total cost (a first-fit pass over n intervals costs about
// n² steps), so that large graphs are planned in bounded time.
const (
	perturbRounds = 64
	perturbWork   = 50_000_000
)

// AlignUp rounds n up to a multiple of a.
func AlignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// Plan places the intervals with three greedy first-fit orders — by
// size (largest first), by start step, and by number of conflicts — then
// tries perturbations of the by-size order (a seeded local search), and
// keeps the smallest pool. Intervals whose lifetimes overlap never share
// bytes. Every offset is a multiple of Alignment.
func Plan(ivs []Interval) (Placement, error) {
	for i, iv := range ivs {
		if iv.Size < 0 || iv.End < iv.Start {
			return Placement{}, fmt.Errorf("memplan: interval %d: size %d, live %d..%d", i, iv.Size, iv.Start, iv.End)
		}
	}
	sizes := make([]int64, len(ivs))
	for i, iv := range ivs {
		sizes[i] = AlignUp(iv.Size, Alignment)
	}
	conflicts := make([]int, len(ivs))
	for i := range ivs {
		for j := range ivs {
			if i != j && overlap(ivs[i], ivs[j]) {
				conflicts[i]++
			}
		}
	}
	orders := []struct {
		name string
		less func(a, b int) bool
	}{
		{"greedy-by-size", func(a, b int) bool {
			if sizes[a] != sizes[b] {
				return sizes[a] > sizes[b]
			}
			return ivs[a].Start < ivs[b].Start
		}},
		{"greedy-by-start", func(a, b int) bool {
			if ivs[a].Start != ivs[b].Start {
				return ivs[a].Start < ivs[b].Start
			}
			return sizes[a] > sizes[b]
		}},
		{"greedy-by-conflicts", func(a, b int) bool {
			if conflicts[a] != conflicts[b] {
				return conflicts[a] > conflicts[b]
			}
			return sizes[a] > sizes[b]
		}},
	}
	best := Placement{Size: -1, Tried: map[string]int64{}}
	for _, o := range orders {
		idx := make([]int, len(ivs))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return o.less(idx[a], idx[b]) })
		offs, size := firstFit(ivs, sizes, idx)
		best.Tried[o.name] = size
		if best.Size < 0 || size < best.Size {
			best.Offsets, best.Size, best.Algorithm = offs, size, o.name
		}
	}
	// Perturbed size orders: swap neighbours of the by-size order at
	// random (seeded: plans are deterministic) and keep any improvement.
	if len(ivs) > 1 {
		rng := rand.New(rand.NewSource(1))
		idx := make([]int, len(ivs))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return orders[0].less(idx[a], idx[b]) })
		n := int64(len(ivs))
		rounds := min(int64(perturbRounds), perturbWork/(n*n))
		for round := int64(0); round < rounds; round++ {
			cand := append([]int(nil), idx...)
			for k := 0; k < 1+len(cand)/8; k++ {
				i := rng.Intn(len(cand) - 1)
				cand[i], cand[i+1] = cand[i+1], cand[i]
			}
			offs, size := firstFit(ivs, sizes, cand)
			if size < best.Size {
				best.Offsets, best.Size, best.Algorithm = offs, size, "perturbed-by-size"
				idx = cand
			}
		}
		best.Tried["perturbed-by-size"] = best.Size
	}
	best.LowerBound = LowerBound(ivs)
	if len(ivs) == 0 {
		best.Size = 0
	}
	return best, nil
}

func overlap(a, b Interval) bool { return a.Start <= b.End && b.Start <= a.End }

// firstFit places the intervals in the given order, each at the lowest
// offset that does not collide with an already placed interval whose
// lifetime overlaps its own.
func firstFit(ivs []Interval, sizes []int64, order []int) ([]int64, int64) {
	offs := make([]int64, len(ivs))
	var placed []int
	var top int64
	type span struct{ lo, hi int64 }
	for _, i := range order {
		var busy []span
		for _, j := range placed {
			if overlap(ivs[i], ivs[j]) && sizes[j] > 0 {
				busy = append(busy, span{offs[j], offs[j] + sizes[j]})
			}
		}
		sort.Slice(busy, func(a, b int) bool { return busy[a].lo < busy[b].lo })
		var off int64
		for _, s := range busy {
			if off+sizes[i] <= s.lo {
				break
			}
			if s.hi > off {
				off = s.hi
			}
		}
		offs[i] = off
		placed = append(placed, i)
		if off+sizes[i] > top {
			top = off + sizes[i]
		}
	}
	return offs, top
}

// LowerBound is the largest sum of aligned sizes of intervals live at the
// same step.
func LowerBound(ivs []Interval) int64 {
	type ev struct {
		step  int
		delta int64
	}
	var evs []ev
	for _, iv := range ivs {
		s := AlignUp(iv.Size, Alignment)
		evs = append(evs, ev{iv.Start, s}, ev{iv.End + 1, -s})
	}
	sort.Slice(evs, func(a, b int) bool {
		if evs[a].step != evs[b].step {
			return evs[a].step < evs[b].step
		}
		return evs[a].delta < evs[b].delta // frees before allocations at a step
	})
	var cur, max int64
	for _, e := range evs {
		cur += e.delta
		if cur > max {
			max = cur
		}
	}
	return max
}
