package te

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
)

// LowerOptions configures Lower.
type LowerOptions struct {
	// Attrs are added to the function's attributes (global_symbol is
	// always the function name).
	Attrs ir.Attrs
}

// Lower turns schedule s into a PrimFunc named name. args lists the
// function's buffer parameters in order: normally the inputs
// (placeholders) and then the outputs. Every placeholder the computation
// reads and every output of the schedule must be among them; an
// intermediate tensor listed there becomes a parameter instead of an
// allocation. Other materialised stages become Allocates: at the top of
// the function for root stages, at the attach point (sized by bound
// inference) for ComputeAt stages. Schedule misuse is reported here.
func Lower(name string, args []*Tensor, s *Schedule, opts LowerOptions) (*tir.PrimFunc, error) {
	if s == nil {
		return nil, fmt.Errorf("te.Lower %s: nil schedule", name)
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("te.Lower %s: %w", name, err)
	}
	l := &lowerer{
		s:          s,
		z:          &analyzer{ranges: map[*tir.Var][2]int64{}},
		args:       map[*Tensor]bool{},
		body:       map[*Stage]tir.PrimExpr{},
		stageOfBuf: map[*tir.Buffer]*Stage{},
		readers:    map[*Stage][]*Stage{},
		place:      map[*tir.Buffer]*placement{},
		children:   map[*Stage][]*Stage{},
	}
	f, err := l.lower(name, args)
	if err != nil {
		return nil, fmt.Errorf("te.Lower %s: %w", name, err)
	}
	for k, v := range opts.Attrs {
		if k != tir.AttrGlobalSymbol {
			f.Attrs[k] = v
		}
	}
	if err := tir.Verify(f); err != nil {
		return nil, fmt.Errorf("te.Lower %s: internal error, lowered function does not verify: %w\n%s", name, err, f)
	}
	return f, nil
}

type lowerer struct {
	s          *Schedule
	z          *analyzer
	args       map[*Tensor]bool
	body       map[*Stage]tir.PrimExpr // compute bodies after inlining
	stageOfBuf map[*tir.Buffer]*Stage
	readers    map[*Stage][]*Stage
	place      map[*tir.Buffer]*placement
	children   map[*Stage][]*Stage // stages computed at each stage, topologically
}

// placement says where a tensor is materialised: buf holds the element at
// index idx - off (off nil: at idx).
type placement struct {
	buf *tir.Buffer
	off []lin
}

// regionDim is the part [off, off+ext) of one dimension a stage computes.
type regionDim struct {
	off lin
	ext int64
}

func (l *lowerer) lower(name string, args []*Tensor) (*tir.PrimFunc, error) {
	f := tir.NewPrimFunc(name)
	for i, t := range args {
		if t == nil {
			return nil, fmt.Errorf("argument %d is nil", i)
		}
		if l.args[t] {
			return nil, fmt.Errorf("tensor %s is listed twice among the arguments", t.Name)
		}
		if _, ok := t.Op.(*PlaceholderOp); !ok && l.s.byOp[t.Op] == nil {
			return nil, fmt.Errorf("argument %s is not computed by this schedule", t.Name)
		}
		l.args[t] = true
		f.AddBuffer(t.buf)
	}
	for _, t := range l.s.outputs {
		if !l.args[t] {
			return nil, fmt.Errorf("output %s is not among the arguments", t.Name)
		}
	}
	for _, st := range l.s.stages {
		for _, t := range st.op.Outputs() {
			l.stageOfBuf[t.buf] = st
		}
	}
	if err := l.checkInline(); err != nil {
		return nil, err
	}
	if err := l.inlineBodies(); err != nil {
		return nil, err
	}
	if err := l.checkStages(); err != nil {
		return nil, err
	}
	// Root placements.
	for _, st := range l.s.stages {
		if st.attach != attachRoot {
			continue
		}
		for _, t := range st.op.Outputs() {
			buf := t.buf
			if !l.args[t] && st.scope != "" && st.scope != buf.Scope {
				buf = tir.NewBuffer(t.Name, t.DType, t.Shape, st.scope)
			}
			l.place[t.buf] = &placement{buf: buf}
		}
	}
	var stmts []tir.Stmt
	for _, st := range l.s.stages {
		if st.attach != attachRoot {
			continue
		}
		s, err := l.emit(st, nil)
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, s)
	}
	body := tir.Seq(stmts...)
	if len(stmts) == 0 {
		body = tir.NoOp()
	}
	for i := len(l.s.stages) - 1; i >= 0; i-- {
		st := l.s.stages[i]
		if st.attach != attachRoot {
			continue
		}
		outs := st.op.Outputs()
		for k := len(outs) - 1; k >= 0; k-- {
			if !l.args[outs[k]] {
				body = &tir.Allocate{Buffer: l.place[outs[k].buf].buf, Body: body}
			}
		}
	}
	f.Body = body
	return f, nil
}

func (l *lowerer) stageArg(st *Stage) *Tensor {
	for _, t := range st.op.Outputs() {
		if l.args[t] {
			return t
		}
	}
	return nil
}

func (l *lowerer) checkInline() error {
	for _, st := range l.s.stages {
		if st.attach != attachInline {
			continue
		}
		if msg := st.inlineErr(); msg != "" {
			return fmt.Errorf("stage %s: compute_inline: %s", st.Name(), msg)
		}
		if t := l.stageArg(st); t != nil {
			return fmt.Errorf("stage %s: compute_inline: tensor %s is a function argument", st.Name(), t.Name)
		}
	}
	return nil
}

// inlineBodies substitutes inlined stages into their readers (in
// topological order, so chains of inlined stages resolve) and records
// which stages read which.
func (l *lowerer) inlineBodies() error {
	addReader := func(prod, cons *Stage) {
		for _, r := range l.readers[prod] {
			if r == cons {
				return
			}
		}
		l.readers[prod] = append(l.readers[prod], cons)
	}
	checkTensor := func(st *Stage, b *tir.Buffer) error {
		if p := l.stageOfBuf[b]; p != nil {
			addReader(p, st)
			return nil
		}
		t := tensorOfBuffer(b)
		if t == nil {
			return fmt.Errorf("stage %s reads buffer %s, which is not a te tensor", st.Name(), b.Name)
		}
		if _, ok := t.Op.(*PlaceholderOp); !ok {
			return fmt.Errorf("stage %s reads tensor %s, which has no stage in this schedule", st.Name(), t.Name)
		}
		if !l.args[t] {
			return fmt.Errorf("placeholder %s (read by stage %s) is not among the arguments", t.Name, st.Name())
		}
		return nil
	}
	for _, st := range l.s.stages {
		switch op := st.op.(type) {
		case *ComputeOp:
			body := tir.MutateExpr(op.Body, func(e tir.PrimExpr) tir.PrimExpr {
				ld, ok := e.(*tir.BufferLoad)
				if !ok {
					return e
				}
				p := l.stageOfBuf[ld.Buffer]
				if p == nil || p.attach != attachInline {
					return e
				}
				pop := p.op.(*ComputeOp)
				vmap := map[*tir.Var]tir.PrimExpr{}
				for d, ax := range pop.Axis {
					vmap[ax.Var] = ld.Indices[d]
				}
				return tir.SubstituteExpr(l.body[p], vmap)
			})
			l.body[st] = body
			if st.attach == attachInline {
				// Its reads become its consumers' reads.
				continue
			}
			var err error
			tir.Visit(body, func(n tir.Node) bool {
				if ld, ok := n.(*tir.BufferLoad); ok && err == nil {
					err = checkTensor(st, ld.Buffer)
				}
				return err == nil
			})
			if err != nil {
				return err
			}
		case *ExternOp:
			for _, in := range op.Inputs {
				if p := l.stageOfBuf[in.buf]; p != nil && p.attach == attachInline {
					return fmt.Errorf("stage %s is inlined but read by extern stage %s, which cannot inline it", p.Name(), st.Name())
				}
				if err := checkTensor(st, in.buf); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkStages validates compute_at attachments and loop annotations.
func (l *lowerer) checkStages() error {
	for _, st := range l.s.stages {
		for iv, k := range st.kinds {
			p := st.leafIndex(iv)
			if p < 0 {
				return fmt.Errorf("stage %s: iter var %s is marked %s but is no longer a leaf (it was split or fused afterwards)", st.Name(), iv.Name, k)
			}
			if k == tir.Vectorized && p != len(st.leaves)-1 {
				return fmt.Errorf("stage %s: vectorize %s: only the innermost loop can be vectorized (innermost is %s)", st.Name(), iv.Name, st.leaves[len(st.leaves)-1].Name)
			}
		}
		if st.attach != attachAt {
			continue
		}
		par := st.parent
		switch {
		case par.attach == attachInline:
			return fmt.Errorf("stage %s: compute_at: parent stage %s is inlined", st.Name(), par.Name())
		case par.leafIndex(st.attachIV) < 0:
			return fmt.Errorf("stage %s: compute_at: %s is no longer a leaf of stage %s", st.Name(), st.attachIV.Name, par.Name())
		}
		if _, ok := par.op.(*ComputeOp); !ok {
			return fmt.Errorf("stage %s: compute_at: parent %s is not a compute stage", st.Name(), par.Name())
		}
		if t := l.stageArg(st); t != nil {
			return fmt.Errorf("stage %s: compute_at: tensor %s is a function argument and must be computed in full", st.Name(), t.Name)
		}
		rs := l.readers[st]
		readsIt := false
		var others []string
		for _, r := range rs {
			if r == par {
				readsIt = true
			} else {
				others = append(others, r.Name())
			}
		}
		if !readsIt {
			return fmt.Errorf("stage %s: compute_at: stage %s does not read %s (it is not a consumer)", st.Name(), par.Name(), st.Name())
		}
		if len(others) > 0 {
			return fmt.Errorf("stage %s: compute_at %s: the stage is also read by %s", st.Name(), par.Name(), strings.Join(others, ", "))
		}
		// Attachment chains must end at a root stage.
		seen := map[*Stage]bool{st: true}
		for p := par; p.attach == attachAt; p = p.parent {
			if seen[p] {
				return fmt.Errorf("stage %s: compute_at forms a cycle", st.Name())
			}
			seen[p] = true
		}
		l.children[par] = append(l.children[par], st)
	}
	return nil
}

// emit lowers one stage; region is nil for a stage computed in full.
func (l *lowerer) emit(st *Stage, region []regionDim) (s tir.Stmt, err error) {
	switch op := st.op.(type) {
	case *ComputeOp:
		return l.emitCompute(st, op, region)
	case *ExternOp:
		ins := make([]*tir.Buffer, len(op.Inputs))
		for i, t := range op.Inputs {
			ins[i] = t.buf
			if pl := l.place[t.buf]; pl != nil {
				ins[i] = pl.buf
			}
		}
		outs := make([]*tir.Buffer, len(op.Outs))
		for i, t := range op.Outs {
			outs[i] = l.place[t.buf].buf
		}
		defer func() {
			if r := recover(); r != nil {
				s, err = nil, fmt.Errorf("extern stage %s: build panicked: %v", st.Name(), r)
			}
		}()
		if op.Build == nil {
			return nil, fmt.Errorf("extern stage %s has no build function", st.Name())
		}
		body := op.Build(ins, outs)
		if body == nil {
			return nil, fmt.Errorf("extern stage %s: build returned no statement", st.Name())
		}
		return body, nil
	}
	return nil, fmt.Errorf("stage %s: unexpected operation %T", st.Name(), st.op)
}

type attached struct {
	buf  *tir.Buffer
	stmt tir.Stmt
}

func (l *lowerer) emitCompute(st *Stage, op *ComputeOp, region []regionDim) (tir.Stmt, error) {
	z := l.z
	out := op.Output
	pl := l.place[out.buf]

	// Extents of every iter var, from the root extents through the
	// relations.
	ext := map[*IterVar]int64{}
	for d, ax := range op.Axis {
		ext[ax] = out.Shape[d]
		if region != nil {
			ext[ax] = region[d].ext
		}
	}
	for _, r := range op.ReduceAxis {
		ext[r] = r.Extent
	}
	for _, rel := range st.rels {
		switch r := rel.(type) {
		case *splitRel:
			e := ext[r.parent]
			if e <= r.factor {
				ext[r.outer], ext[r.inner] = 1, e
			} else {
				ext[r.outer], ext[r.inner] = ceilDiv(e, r.factor), r.factor
			}
		case *fuseRel:
			ext[r.fused] = ext[r.outer] * ext[r.inner]
		}
	}

	// Loop variables for the leaves (none for extent 1) and the value of
	// every iter var in terms of them.
	vars := map[*IterVar]*tir.Var{}
	val := map[*IterVar]tir.PrimExpr{}
	for _, lf := range st.leaves {
		if ext[lf] == 1 {
			val[lf] = tir.Idx(0)
			continue
		}
		v := tir.NewVar(lf.Name, tir.Int32T)
		vars[lf] = v
		z.ranges[v] = [2]int64{0, ext[lf] - 1}
		val[lf] = v
	}
	for i := len(st.rels) - 1; i >= 0; i-- {
		switch r := st.rels[i].(type) {
		case *splitRel:
			val[r.parent] = z.canon(tir.Add(tir.Mul(val[r.outer], tir.Idx(r.factor)), val[r.inner]))
		case *fuseRel:
			n := tir.Idx(ext[r.inner])
			val[r.outer] = z.canon(tir.FloorDiv(val[r.fused], n))
			val[r.inner] = z.canon(tir.FloorMod(val[r.fused], n))
		}
	}

	// Global index of each axis and the body over the loop variables.
	vmap := map[*tir.Var]tir.PrimExpr{}
	global := make([]tir.PrimExpr, len(op.Axis))
	local := make([]tir.PrimExpr, len(op.Axis))
	for d, ax := range op.Axis {
		local[d] = val[ax]
		global[d] = val[ax]
		if pl.off != nil {
			global[d] = pl.off[d].plus(z.toLin(val[ax]), 1).expr()
		}
		vmap[ax.Var] = global[d]
	}
	for _, r := range op.ReduceAxis {
		vmap[r.Var] = val[r]
	}
	body := tir.SubstituteExpr(l.body[st], vmap)

	// Stages computed at one of our loops: infer the region they must
	// provide for one iteration of that loop and emit them.
	atPos := map[int][]attached{}
	for _, c := range l.children[st] {
		p := st.leafIndex(c.attachIV)
		varying := map[*tir.Var]int64{}
		for _, lf := range st.leaves[p+1:] {
			if v, ok := vars[lf]; ok {
				varying[v] = ext[lf]
			}
		}
		ct := c.op.Outputs()[0]
		var reads [][]tir.PrimExpr
		tir.Visit(body, func(n tir.Node) bool {
			if ld, ok := n.(*tir.BufferLoad); ok && ld.Buffer == ct.buf {
				reads = append(reads, ld.Indices)
			}
			return true
		})
		reg := l.inferRegion(ct, reads, varying)
		shape := make(ir.Shape, len(reg))
		offs := make([]lin, len(reg))
		for d, r := range reg {
			shape[d], offs[d] = r.ext, r.off
		}
		scope := ct.buf.Scope
		if c.scope != "" {
			scope = c.scope
		}
		cbuf := tir.NewBuffer(ct.Name, ct.DType, shape, scope)
		l.place[ct.buf] = &placement{buf: cbuf, off: offs}
		cs, err := l.emit(c, reg)
		if err != nil {
			return nil, err
		}
		atPos[p] = append(atPos[p], attached{buf: cbuf, stmt: cs})
	}
	body = l.rewriteLoads(body)

	// Guards. Constant ranges of every iter var's value are derived from
	// the leaves up; a split whose outer*factor+inner overshoots its
	// parent's extent (a non-dividing factor) guards the parent, which is
	// then known to be in range. A stage computed at a region also guards
	// indices that could fall outside its tensor.
	var dataConds, redConds []tir.PrimExpr
	addCond := func(iv *IterVar, c tir.PrimExpr) {
		if iv.Kind == Reduce {
			redConds = append(redConds, c)
		} else {
			dataConds = append(dataConds, c)
		}
	}
	rng := map[*IterVar][2]int64{}
	for _, lf := range st.leaves {
		rng[lf] = [2]int64{0, ext[lf] - 1}
	}
	for i := len(st.rels) - 1; i >= 0; i-- {
		switch r := st.rels[i].(type) {
		case *splitRel:
			lo := rng[r.outer][0]*r.factor + rng[r.inner][0]
			hi := rng[r.outer][1]*r.factor + rng[r.inner][1]
			if e := ext[r.parent]; hi > e-1 {
				addCond(r.parent, tir.LT(val[r.parent], tir.Idx(e)))
				hi = e - 1
			}
			rng[r.parent] = [2]int64{lo, hi}
		case *fuseRel:
			f, n := rng[r.fused], ext[r.inner]
			rng[r.outer] = [2]int64{floorDiv(f[0], n), floorDiv(f[1], n)}
			rng[r.inner] = [2]int64{0, n - 1}
			if floorDiv(f[0], n) == floorDiv(f[1], n) {
				rng[r.inner] = [2]int64{floorMod(f[0], n), floorMod(f[1], n)}
			}
		}
	}
	for d, ax := range op.Axis {
		lo, hi := rng[ax][0], rng[ax][1]
		if hi > ext[ax]-1 {
			addCond(ax, tir.LT(local[d], tir.Idx(ext[ax])))
			hi = ext[ax] - 1
		}
		if pl.off == nil {
			continue
		}
		olo, ohi, ok := z.linBounds(pl.off[d])
		if !ok || olo+lo < 0 {
			dataConds = append(dataConds, tir.GE(global[d], tir.Idx(0)))
		}
		if !ok || ohi+hi > out.Shape[d]-1 {
			dataConds = append(dataConds, tir.LT(global[d], tir.Idx(out.Shape[d])))
		}
	}
	guard := func(conds []tir.PrimExpr, s tir.Stmt) tir.Stmt {
		if len(conds) == 0 {
			return s
		}
		c := conds[0]
		for _, x := range conds[1:] {
			c = tir.And(c, x)
		}
		return tir.NewIf(c, s, nil)
	}

	var update, init tir.Stmt
	firstRed := len(st.leaves)
	if !op.IsReduce() {
		update = tir.NewStore(pl.buf, body, local...)
	} else {
		acc := tir.NewLoad(pl.buf, local...)
		update = tir.NewStore(pl.buf, op.Reducer.Combine(acc, body), local...)
		for p, lf := range st.leaves {
			if lf.Kind == Reduce {
				firstRed = p
				break
			}
		}
		// The init nest runs over the data-parallel loops inside the
		// outermost reduce loop, with fresh loop variables.
		imap := map[*tir.Var]tir.PrimExpr{}
		var initLoops []*IterVar
		for _, lf := range st.leaves[firstRed:] {
			if v, ok := vars[lf]; ok && lf.Kind == DataPar {
				nv := tir.NewVar(lf.Name+"_init", tir.Int32T)
				z.ranges[nv] = z.ranges[v]
				imap[v] = nv
				initLoops = append(initLoops, lf)
			}
		}
		iconds := make([]tir.PrimExpr, len(dataConds))
		for i, c := range dataConds {
			iconds[i] = tir.SubstituteExpr(c, imap)
		}
		iidx := make([]tir.PrimExpr, len(local))
		for i, e := range local {
			iidx[i] = tir.SubstituteExpr(e, imap)
		}
		init = guard(iconds, tir.NewStore(pl.buf, op.Reducer.Identity(out.DType), iidx...))
		for i := len(initLoops) - 1; i >= 0; i-- {
			lf := initLoops[i]
			init = tir.Loop(imap[vars[lf]].(*tir.Var), ext[lf], st.kinds[lf], init)
		}
		init = z.canonStmt(init)
	}
	stmt := z.canonStmt(guard(append(dataConds, redConds...), update))
	if init != nil && firstRed == len(st.leaves) {
		stmt = tir.Seq(init, stmt)
	}
	top := len(st.leaves)
	if st.tensorize != nil {
		top = st.leafIndex(st.tensorizeIV)
		ts, err := l.tensorized(st, op, top, tensorizeState{vars: vars, ext: ext, local: local, global: global,
			out: pl.buf, atPos: atPos, guarded: len(dataConds)+len(redConds) > 0})
		if err != nil {
			return nil, err
		}
		stmt, init = ts, nil
	}
	for p := top - 1; p >= 0; p-- {
		lf := st.leaves[p]
		as := atPos[p]
		for k := len(as) - 1; k >= 0; k-- {
			stmt = &tir.Allocate{Buffer: as[k].buf, Body: tir.Seq(as[k].stmt, stmt)}
		}
		if v, ok := vars[lf]; ok {
			loop := tir.Loop(v, ext[lf], st.kinds[lf], stmt)
			if st.outlined[lf] {
				loop.Annotations = ir.Attrs{tir.AnnOutline: true}
			}
			stmt = loop
		}
		if init != nil && p == firstRed {
			stmt = tir.Seq(init, stmt)
		}
	}
	return stmt, nil
}

// inferRegion computes, per dimension of t, the range of indices the reads
// cover while the varying loop variables run over their extents. A
// dimension that cannot be analysed (non-affine indices, symbolic extent)
// is computed in full.
func (l *lowerer) inferRegion(t *Tensor, reads [][]tir.PrimExpr, varying map[*tir.Var]int64) []regionDim {
	z := l.z
	out := make([]regionDim, len(t.Shape))
	for d, n := range t.Shape {
		out[d] = regionDim{off: linConst(tir.Int32T, 0), ext: n}
		var lo, hi lin
		ok := len(reads) > 0
		for k, idx := range reads {
			iv, good := z.interval(idx[d], varying)
			if !good {
				ok = false
				break
			}
			if k == 0 {
				lo, hi = iv.lo, iv.hi
				continue
			}
			dl, ok1 := iv.lo.diff(lo)
			dh, ok2 := iv.hi.diff(hi)
			if !ok1 || !ok2 {
				ok = false
				break
			}
			if dl < 0 {
				lo = iv.lo
			}
			if dh > 0 {
				hi = iv.hi
			}
		}
		if !ok {
			continue
		}
		e, good := hi.diff(lo)
		if !good {
			continue
		}
		size := e + 1
		if lo.isConst() {
			l0, h0 := max(lo.c, 0), min(lo.c+e, n-1)
			if h0 < l0 {
				continue
			}
			lo, size = linConst(tir.Int32T, l0), h0-l0+1
		}
		if size <= 0 || size >= n {
			continue
		}
		out[d] = regionDim{off: lo, ext: size}
	}
	return out
}

// rewriteLoads redirects reads of tensors materialised in another buffer
// (a region buffer of a compute_at stage, or a root stage with its own
// scope), subtracting the region offset.
func (l *lowerer) rewriteLoads(e tir.PrimExpr) tir.PrimExpr {
	return tir.MutateExpr(e, func(x tir.PrimExpr) tir.PrimExpr {
		ld, ok := x.(*tir.BufferLoad)
		if !ok {
			return x
		}
		pl := l.place[ld.Buffer]
		if pl == nil || (pl.buf == ld.Buffer && pl.off == nil) {
			return x
		}
		idx := make([]tir.PrimExpr, len(ld.Indices))
		for d, i := range ld.Indices {
			idx[d] = i
			if pl.off != nil {
				idx[d] = l.z.toLin(i).plus(pl.off[d], -1).expr()
			}
		}
		return &tir.BufferLoad{Buffer: pl.buf, Indices: idx}
	})
}
