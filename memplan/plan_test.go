package memplan

import (
	"math/rand"
	"testing"
)

// checkPlan verifies that no two intervals live at the same time share a
// byte, that offsets are aligned and that the pool holds every buffer.
func checkPlan(t *testing.T, ivs []Interval, p Placement) {
	t.Helper()
	for i, a := range ivs {
		if p.Offsets[i]%Alignment != 0 {
			t.Fatalf("interval %d at unaligned offset %d", i, p.Offsets[i])
		}
		if p.Offsets[i]+a.Size > p.Size {
			t.Fatalf("interval %d [%d, +%d) outside the pool of %d", i, p.Offsets[i], a.Size, p.Size)
		}
		for j := i + 1; j < len(ivs); j++ {
			b := ivs[j]
			if a.Size == 0 || b.Size == 0 || !overlap(a, b) {
				continue
			}
			if p.Offsets[i] < p.Offsets[j]+b.Size && p.Offsets[j] < p.Offsets[i]+a.Size {
				t.Fatalf("intervals %d %+v at %d and %d %+v at %d collide", i, a, p.Offsets[i], j, b, p.Offsets[j])
			}
		}
	}
	if p.Size < p.LowerBound {
		t.Fatalf("pool %d below the lower bound %d", p.Size, p.LowerBound)
	}
}

// TestPlanChain: a chain of tensors each live for two steps needs the two
// largest neighbours at once, which the planner achieves exactly.
func TestPlanChain(t *testing.T) {
	ivs := []Interval{{Size: 640, Start: 0, End: 1}, {Size: 1280, Start: 1, End: 2}, {Size: 640, Start: 2, End: 3}, {Size: 128, Start: 3, End: 4}}
	p, err := Plan(ivs)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, ivs, p)
	if p.LowerBound != 1920 || p.Size != 1920 {
		t.Errorf("pool %d, lower bound %d, want 1920 and 1920 (%v)", p.Size, p.LowerBound, p.Tried)
	}
}

// TestPlanRandom: random lifetimes never collide, no pool is below the
// lower bound, and the kept algorithm is the best tried. (No placement
// algorithm guarantees a ratio to the lower bound on arbitrary inputs;
// the worst ratio seen is logged.)
func TestPlanRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	worst := 1.0
	defer func() { t.Logf("worst pool / lower bound: %.3f", worst) }()
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.Intn(40)
		ivs := make([]Interval, n)
		for i := range ivs {
			s := rng.Intn(30)
			ivs[i] = Interval{Size: int64(rng.Intn(5000)), Start: s, End: s + rng.Intn(6)}
		}
		p, err := Plan(ivs)
		if err != nil {
			t.Fatal(err)
		}
		checkPlan(t, ivs, p)
		for name, size := range p.Tried {
			if size < p.Size {
				t.Fatalf("%s found %d but %s (%d) was kept", name, size, p.Algorithm, p.Size)
			}
		}
		if p.LowerBound > 0 {
			worst = max(worst, float64(p.Size)/float64(p.LowerBound))
		}
	}
}

func TestPlanErrors(t *testing.T) {
	if _, err := Plan([]Interval{{Size: 8, Start: 3, End: 1}}); err == nil {
		t.Error("an interval ending before it starts was accepted")
	}
	p, err := Plan(nil)
	if err != nil || p.Size != 0 || p.LowerBound != 0 {
		t.Errorf("empty plan: %+v, %v", p, err)
	}
}

// TestLiveness: lifetimes run from the first step touching a tensor to the
// last; an untouched tensor lives at step 0; bad references are errors.
func TestLiveness(t *testing.T) {
	ivs, err := Liveness([]int64{4, 8, 16, 2}, [][]int{{0, 1}, {1, 2}, {2}, {0}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Interval{{Size: 4, Start: 0, End: 3}, {Size: 8, Start: 0, End: 1}, {Size: 16, Start: 1, End: 2}, {Size: 2, Start: 0, End: 0}}
	for i := range want {
		if ivs[i] != want[i] {
			t.Errorf("tensor %d: %+v, want %+v", i, ivs[i], want[i])
		}
	}
	if _, err := Liveness([]int64{4}, [][]int{{1}}); err == nil {
		t.Error("a step touching tensor 1 of 1 was accepted")
	}
	if _, err := Liveness([]int64{-1}, nil); err == nil {
		t.Error("a negative size was accepted")
	}
}
