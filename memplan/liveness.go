package memplan

import "fmt"

// Liveness returns the lifetime of each tensor of a program: sizes[i] is
// tensor i's size in bytes, steps[s] the tensors step s touches (reads or
// writes), in execution order. A tensor lives from the first step that
// touches it to the last, both included, so a step's outputs never share
// bytes with its inputs. A tensor no step touches lives at step 0 only.
func Liveness(sizes []int64, steps [][]int) ([]Interval, error) {
	ivs := make([]Interval, len(sizes))
	seen := make([]bool, len(sizes))
	for i, sz := range sizes {
		if sz < 0 {
			return nil, fmt.Errorf("memplan: tensor %d has size %d", i, sz)
		}
		ivs[i].Size = sz
	}
	for s, touched := range steps {
		for _, t := range touched {
			if t < 0 || t >= len(sizes) {
				return nil, fmt.Errorf("memplan: step %d touches tensor %d of %d", s, t, len(sizes))
			}
			if !seen[t] {
				seen[t] = true
				ivs[t].Start = s
			}
			ivs[t].End = s
		}
	}
	return ivs, nil
}
