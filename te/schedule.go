package te

import (
	"fmt"

	"github.com/kiln-dev/kiln/tir"
)

// Schedule holds one Stage per non-placeholder operation of a computation,
// in topological order (producers first), and the errors that misuse of
// its primitives recorded. Schedules never modify the tensors they were
// created from, so one computation may be scheduled several ways.
type Schedule struct {
	outputs []*Tensor
	stages  []*Stage
	byOp    map[Operation]*Stage
	errs    []error
}

// attachKind says where a stage is computed.
type attachKind uint8

const (
	attachRoot   attachKind = iota // at the function's top level
	attachInline                   // substituted into its consumers
	attachAt                       // inside a loop of another stage
)

// Stage is the schedule of one operation: its loop nest (leaf iter vars in
// order, with the Split/Fuse relations that derived them from the op's
// axes), loop kinds, and where it is computed. Methods record misuse in
// the schedule; Lower reports it.
type Stage struct {
	sched    *Schedule
	op       Operation // the op as scheduled (a copy op after CacheWrite)
	origin   Operation // the op the stage was created for
	isOutput bool
	bad      bool // a placeholder stage returned for misuse

	leaves []*IterVar
	rels   []relation
	kinds  map[*IterVar]tir.ForKind
	// outlined marks the leaves whose loops Outline asked for.
	outlined map[*IterVar]bool

	attach   attachKind
	parent   *Stage
	attachIV *IterVar
	scope    string

	tensorizeIV *IterVar
	tensorize   TensorIntrin
}

// relation derives leaf iter vars from root ones.
type relation interface{ isRelation() }

type splitRel struct {
	parent, outer, inner *IterVar
	factor               int64
}

type fuseRel struct {
	outer, inner, fused *IterVar
}

func (*splitRel) isRelation() {}
func (*fuseRel) isRelation()  {}

// CreateSchedule returns the default schedule of the computation that
// produces outputs: every stage at root, loops in axis order, serial.
func CreateSchedule(outputs ...*Tensor) *Schedule {
	s := &Schedule{outputs: outputs, byOp: map[Operation]*Stage{}}
	isOut := map[Operation]bool{}
	for _, t := range outputs {
		isOut[t.Op] = true
	}
	visited := map[Operation]bool{}
	var visit func(op Operation)
	visit = func(op Operation) {
		if visited[op] {
			return
		}
		visited[op] = true
		for _, in := range op.InputTensors() {
			visit(in.Op)
		}
		if _, ok := op.(*PlaceholderOp); ok {
			return
		}
		st := &Stage{sched: s, op: op, origin: op, isOutput: isOut[op]}
		st.reset()
		s.stages = append(s.stages, st)
		s.byOp[op] = st
	}
	for _, t := range outputs {
		if t == nil || t.Op == nil {
			s.errorf("CreateSchedule: nil output tensor")
			continue
		}
		if _, ok := t.Op.(*PlaceholderOp); ok {
			s.errorf("CreateSchedule: output %s is a placeholder", t.Name)
			continue
		}
		visit(t.Op)
	}
	return s
}

// reset gives the stage the default loop nest of its op.
func (st *Stage) reset() {
	st.leaves = nil
	st.rels = nil
	st.kinds = map[*IterVar]tir.ForKind{}
	st.outlined = nil
	st.tensorizeIV, st.tensorize = nil, nil
	if c, ok := st.op.(*ComputeOp); ok {
		st.leaves = append(append(st.leaves, c.Axis...), c.ReduceAxis...)
	}
}

func (s *Schedule) errorf(format string, args ...any) {
	s.errs = append(s.errs, fmt.Errorf("te schedule: "+format, args...))
}

// Err returns the first misuse recorded so far, or nil.
func (s *Schedule) Err() error {
	if len(s.errs) == 0 {
		return nil
	}
	if len(s.errs) > 1 {
		return fmt.Errorf("%w (and %d more schedule errors)", s.errs[0], len(s.errs)-1)
	}
	return s.errs[0]
}

// Stages returns the stages in topological order.
func (s *Schedule) Stages() []*Stage { return append([]*Stage(nil), s.stages...) }

// Stage returns the stage that computes t. For a tensor that has no stage
// in s (a placeholder, or a tensor of another computation) it records an
// error and returns a stage whose methods do nothing.
func (s *Schedule) Stage(t *Tensor) *Stage {
	if t != nil {
		if st, ok := s.byOp[t.Op]; ok {
			return st
		}
	}
	name := "<nil>"
	if t != nil {
		name = t.Name
	}
	s.errorf("tensor %s has no stage in this schedule (placeholders and tensors of other computations cannot be scheduled)", name)
	return &Stage{sched: s, bad: true, kinds: map[*IterVar]tir.ForKind{}}
}

// Name is the name of the stage's operation.
func (st *Stage) Name() string {
	if st.op == nil {
		return "<invalid>"
	}
	return st.op.OpName()
}

func (st *Stage) errorf(format string, args ...any) {
	st.sched.errorf("stage %s: %s", st.Name(), fmt.Sprintf(format, args...))
}

// Op returns the operation the stage computes (after CacheWrite, the copy
// from the cache).
func (st *Stage) Op() Operation { return st.op }

// Axis returns the data-parallel axes of the stage's op, in order.
func (st *Stage) Axis() []*IterVar {
	if c, ok := st.op.(*ComputeOp); ok {
		return append([]*IterVar(nil), c.Axis...)
	}
	return nil
}

// ReduceAxes returns the reduction axes of the stage's op.
func (st *Stage) ReduceAxes() []*IterVar {
	if c, ok := st.op.(*ComputeOp); ok {
		return append([]*IterVar(nil), c.ReduceAxis...)
	}
	return nil
}

// Leaves returns the current loop nest, outermost first.
func (st *Stage) Leaves() []*IterVar { return append([]*IterVar(nil), st.leaves...) }

func (st *Stage) leafIndex(iv *IterVar) int {
	for i, l := range st.leaves {
		if l == iv {
			return i
		}
	}
	return -1
}

// checkLeaf records an error unless iv is a current leaf of st.
func (st *Stage) checkLeaf(what string, iv *IterVar) bool {
	if st.bad {
		return false
	}
	if iv == nil {
		st.errorf("%s: nil iter var", what)
		return false
	}
	if _, ok := st.op.(*ComputeOp); !ok {
		st.errorf("%s %s: %s stages have no loops to schedule", what, iv.Name, opKind(st.op))
		return false
	}
	if st.leafIndex(iv) < 0 {
		st.errorf("%s: iter var %s is not a leaf of this stage (it belongs to another stage or was already split, fused or replaced)", what, iv.Name)
		return false
	}
	return true
}

func opKind(op Operation) string {
	switch op.(type) {
	case *ExternOp:
		return "extern"
	case *PlaceholderOp:
		return "placeholder"
	}
	return "compute"
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// Split splits leaf iv into outer and inner loops with inner extent
// factor: iv = outer*factor + inner. When factor does not divide the
// extent, lowering guards the body with iv < extent.
func (st *Stage) Split(iv *IterVar, factor int64) (outer, inner *IterVar) {
	name := "?"
	if iv != nil {
		name = iv.Name
	}
	outer, inner = newIterVar(name+"_outer", 1, DataPar), newIterVar(name+"_inner", 1, DataPar)
	if !st.checkLeaf("split", iv) {
		return outer, inner
	}
	if factor <= 0 {
		st.errorf("split %s: factor %d must be positive", iv.Name, factor)
		return outer, inner
	}
	outer.Kind, inner.Kind = iv.Kind, iv.Kind
	outer.Extent, inner.Extent = ceilDiv(iv.Extent, factor), factor
	st.rels = append(st.rels, &splitRel{parent: iv, outer: outer, inner: inner, factor: factor})
	p := st.leafIndex(iv)
	st.leaves = append(st.leaves[:p], append([]*IterVar{outer, inner}, st.leaves[p+1:]...)...)
	return outer, inner
}

// Fuse fuses two adjacent leaves (a immediately outside b) of the same
// kind into one loop over extent(a)*extent(b): a = f / extent(b),
// b = f % extent(b).
func (st *Stage) Fuse(a, b *IterVar) *IterVar {
	fused := newIterVar("fused", 1, DataPar)
	if !st.checkLeaf("fuse", a) || !st.checkLeaf("fuse", b) {
		return fused
	}
	fused.Name = a.Name + "_" + b.Name + "_fused"
	fused.Var.Name = fused.Name
	pa, pb := st.leafIndex(a), st.leafIndex(b)
	if pb != pa+1 {
		st.errorf("fuse %s, %s: the iter vars must be adjacent leaves with %s immediately outside %s", a.Name, b.Name, a.Name, b.Name)
		return fused
	}
	if a.Kind != b.Kind {
		st.errorf("fuse %s, %s: cannot fuse a %s and a %s iter var", a.Name, b.Name, a.Kind, b.Kind)
		return fused
	}
	fused.Kind = a.Kind
	fused.Extent = a.Extent * b.Extent
	st.rels = append(st.rels, &fuseRel{outer: a, inner: b, fused: fused})
	st.leaves = append(st.leaves[:pa], append([]*IterVar{fused}, st.leaves[pb+1:]...)...)
	return fused
}

// Reorder puts the given leaves in the given order, using the positions
// they occupy now (other leaves keep their places).
func (st *Stage) Reorder(ivs ...*IterVar) {
	seen := map[*IterVar]bool{}
	var pos []int
	for _, iv := range ivs {
		if !st.checkLeaf("reorder", iv) {
			return
		}
		if seen[iv] {
			st.errorf("reorder: iter var %s appears twice", iv.Name)
			return
		}
		seen[iv] = true
		pos = append(pos, st.leafIndex(iv))
	}
	// Sort the positions; the k-th smallest receives ivs[k].
	for i := 1; i < len(pos); i++ {
		for j := i; j > 0 && pos[j] < pos[j-1]; j-- {
			pos[j], pos[j-1] = pos[j-1], pos[j]
		}
	}
	for k, p := range pos {
		st.leaves[p] = ivs[k]
	}
}

func (st *Stage) setKind(what string, iv *IterVar, kind tir.ForKind) {
	if !st.checkLeaf(what, iv) {
		return
	}
	if iv.Kind == Reduce && (kind == tir.Parallel || kind == tir.Vectorized) {
		st.errorf("%s: %s is a reduce axis and cannot be %s", what, iv.Name, kind)
		return
	}
	st.kinds[iv] = kind
}

// Parallel marks leaf iv as a parallel loop (normally the outermost).
// Reduce axes cannot be parallel.
func (st *Stage) Parallel(iv *IterVar) { st.setKind("parallel", iv, tir.Parallel) }

// Vectorize marks leaf iv as a vectorized loop. It must be the innermost
// loop at lowering time; reduce axes cannot be vectorized.
func (st *Stage) Vectorize(iv *IterVar) { st.setKind("vectorize", iv, tir.Vectorized) }

// Unroll marks leaf iv as an unrolled loop.
func (st *Stage) Unroll(iv *IterVar) { st.setKind("unroll", iv, tir.Unrolled) }

// Outline asks for leaf iv's loop, with everything nested in it, to be
// emitted as a function of its own that the C compiler does not inline
// (tir.AnnOutline on the loop): its registers are then allocated apart
// from the code around it. A matrix product's reduction loop fused with
// a long epilogue (GELU's tanh) had its weight pointer spilled to the
// stack in every step when both shared one function. The loop must be
// serial or unrolled; its semantics are unchanged.
func (st *Stage) Outline(iv *IterVar) {
	if !st.checkLeaf("outline", iv) {
		return
	}
	if k := st.kinds[iv]; k == tir.Parallel || k == tir.Vectorized {
		st.errorf("outline: %s is a %s loop", iv.Name, k)
		return
	}
	if st.outlined == nil {
		st.outlined = map[*IterVar]bool{}
	}
	st.outlined[iv] = true
}

// ComputeInline substitutes the stage's body into every read of its
// tensor. Only non-reduce compute stages that are not outputs can be
// inlined.
func (st *Stage) ComputeInline() {
	if st.bad {
		return
	}
	if err := st.inlineErr(); err != "" {
		st.errorf("compute_inline: %s", err)
		return
	}
	st.attach, st.parent, st.attachIV = attachInline, nil, nil
}

func (st *Stage) inlineErr() string {
	c, ok := st.op.(*ComputeOp)
	switch {
	case !ok:
		return fmt.Sprintf("%s stages cannot be inlined", opKind(st.op))
	case c.IsReduce():
		return "reductions cannot be inlined"
	case st.isOutput:
		return "the stage is an output of the schedule"
	}
	return ""
}

// ComputeAt computes the stage inside the loop iv of parent, which must
// read this stage's tensor (after inlining). Bound inference sizes the
// stage's buffer to the region parent reads in one iteration of iv.
func (st *Stage) ComputeAt(parent *Stage, iv *IterVar) {
	if st.bad || parent == nil || parent.bad {
		if !st.bad {
			st.errorf("compute_at: invalid parent stage")
		}
		return
	}
	switch {
	case parent.sched != st.sched:
		st.errorf("compute_at: parent stage %s belongs to another schedule", parent.Name())
		return
	case parent == st:
		st.errorf("compute_at: a stage cannot be computed at itself")
		return
	case st.isOutput:
		st.errorf("compute_at: the stage is an output of the schedule")
		return
	}
	if _, ok := st.op.(*ComputeOp); !ok {
		st.errorf("compute_at: %s stages cannot be computed at another stage", opKind(st.op))
		return
	}
	if !parent.checkLeaf("compute_at", iv) {
		return
	}
	st.attach, st.parent, st.attachIV = attachAt, parent, iv
}

// ComputeRoot computes the stage at the top level of the function (the
// default).
func (st *Stage) ComputeRoot() {
	if st.bad {
		return
	}
	st.attach, st.parent, st.attachIV = attachRoot, nil, nil
}

// SetScope sets the storage scope of the stage's buffer when it is not a
// function argument (default "global").
func (st *Stage) SetScope(scope string) {
	if st.bad {
		return
	}
	st.scope = scope
}

// CacheWrite creates a stage that computes t's body (including its
// reduction) into a buffer of the given scope and turns t's stage into a
// copy from that buffer, as TVM's cache_write does. It returns the cache
// tensor; schedule it (typically ComputeAt t's stage) through
// s.Stage(cache). t's stage loses its previous loop transformations (its
// axes are new iter vars; use Stage(t).Axis() again).
func (s *Schedule) CacheWrite(t *Tensor, scope string) *Tensor {
	st := s.Stage(t)
	if st.bad {
		return t
	}
	c, ok := st.op.(*ComputeOp)
	if !ok {
		st.errorf("cache_write: %s stages cannot be cached", opKind(st.op))
		return t
	}
	if scope == "" {
		st.errorf("cache_write: empty scope")
		return t
	}
	// The cache computes the original body over fresh axes.
	vmap := map[*tir.Var]tir.PrimExpr{}
	axes := make([]*IterVar, len(c.Axis))
	for i, a := range c.Axis {
		axes[i] = newIterVar(a.Name, a.Extent, DataPar)
		vmap[a.Var] = axes[i].Var
	}
	raxes := make([]*IterVar, len(c.ReduceAxis))
	for i, a := range c.ReduceAxis {
		raxes[i] = newIterVar(a.Name, a.Extent, Reduce)
		vmap[a.Var] = raxes[i].Var
	}
	name := t.Name + "_" + scope
	cop := &ComputeOp{Name: name, Axis: axes, ReduceAxis: raxes, Reducer: c.Reducer, Tag: c.Tag,
		Body: tir.SubstituteExpr(c.Body, vmap), inputs: c.inputs}
	cop.Output = newTensor(name, t.DType, t.Shape, cop, 0, scope)
	cst := &Stage{sched: s, op: cop, origin: cop, scope: scope}
	cst.reset()

	// t's stage becomes a copy.
	caxes := make([]*IterVar, len(c.Axis))
	for i, a := range c.Axis {
		caxes[i] = newIterVar(a.Name, a.Extent, DataPar)
	}
	copyOp := &ComputeOp{Name: c.Name, Axis: caxes, Tag: c.Tag, Output: c.Output,
		Body: cop.Output.At(axisVars(caxes)...), inputs: []*Tensor{cop.Output}}
	st.op = copyOp
	st.reset()

	for i, x := range s.stages {
		if x == st {
			s.stages = append(s.stages[:i], append([]*Stage{cst}, s.stages[i:]...)...)
			break
		}
	}
	s.byOp[cop] = cst
	return cop.Output
}

// AutoInlineInjective inlines every compute stage that is not an output
// and not a reduction (extern stages stay, and so do the stages extern
// stages read, since an extern stage needs its inputs in buffers).
func (s *Schedule) AutoInlineInjective() {
	externIn := map[Operation]bool{}
	for _, st := range s.stages {
		if ex, ok := st.op.(*ExternOp); ok {
			for _, t := range ex.Inputs {
				externIn[t.Op] = true
			}
		}
	}
	for _, st := range s.stages {
		if st.inlineErr() == "" && !externIn[st.origin] {
			st.ComputeInline()
		}
	}
}
