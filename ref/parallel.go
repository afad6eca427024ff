package ref

import (
	"runtime"
	"sync"
)

// minParallelWork is the least work (elements read or written) that
// splitWork spreads over goroutines: below it a goroutine's start costs
// more than it saves.
const minParallelWork = 1 << 18

// splitWork calls fn over [0, n) in up to GOMAXPROCS contiguous pieces
// at once when work (the elements the whole range touches) is at least
// minParallelWork, else once over all of it. fn must touch only what
// its piece owns. Compile-time weight transforms use it: resnet18's
// Winograd weights took a tenth of a cold compile on one core, most of
// it faulting in the new tensors' pages, which cores do side by side.
func splitWork(n int, work int64, fn func(lo, hi int)) {
	p := min(runtime.GOMAXPROCS(0), n)
	if p < 2 || work < minParallelWork {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for i := range p {
		lo, hi := n*i/p, n*(i+1)/p
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}
