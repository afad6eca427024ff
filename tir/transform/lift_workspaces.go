package transform

import (
	"fmt"

	"github.com/kiln-dev/kiln/tir"
)

// AttrWorkspaces is the PrimFunc attribute LiftWorkspaces sets: how many
// trailing parameters are workspaces (int64).
const AttrWorkspaces = "kiln.workspaces"

// LiftWorkspaces returns the pass that turns every global-scope
// allocation of a function into a trailing buffer parameter (inner ones
// first), and records their number in AttrWorkspaces. The ahead-of-
// time executor plans those buffers with the model's tensors (live only
// while the function runs), so that the generated code needs neither
// malloc nor large stack arrays. Local-scope allocations (small
// per-iteration scratch) stay. Run it last: the lifted buffers keep their
// (flattened) shapes. The function must not run its loops in parallel
// afterwards, since a lifted buffer is shared by all iterations.
func LiftWorkspaces() Pass {
	return Pass{Name: "LiftWorkspaces", Run: liftWorkspaces}
}

func liftWorkspaces(f *tir.PrimFunc) (*tir.PrimFunc, error) {
	var lifted []*tir.Buffer
	body := tir.MutateStmt(f.Body, func(s tir.Stmt) tir.Stmt {
		a, ok := s.(*tir.Allocate)
		if !ok || (a.Buffer.Scope != tir.ScopeGlobal && a.Buffer.Scope != "") {
			return s
		}
		lifted = append(lifted, a.Buffer)
		return a.Body
	}, nil)
	if len(lifted) == 0 {
		return f, nil
	}
	out := *f
	out.Body = body
	out.Params = append([]*tir.Var(nil), f.Params...)
	out.BufferMap = map[*tir.Var]*tir.Buffer{}
	for k, v := range f.BufferMap {
		out.BufferMap[k] = v
	}
	if f.PreflattenedBufferMap != nil {
		out.PreflattenedBufferMap = map[*tir.Var]*tir.Buffer{}
		for k, v := range f.PreflattenedBufferMap {
			out.PreflattenedBufferMap[k] = v
		}
	}
	for _, b := range lifted {
		if _, dup := out.BufferMap[b.Data]; dup {
			return nil, fmt.Errorf("%s: buffer %s is allocated twice", f.Name, b.Name)
		}
		out.Params = append(out.Params, b.Data)
		out.BufferMap[b.Data] = b
		if out.PreflattenedBufferMap != nil {
			out.PreflattenedBufferMap[b.Data] = b
		}
	}
	out.Attrs = f.Attrs.Clone()
	n := int64(len(lifted))
	if prev, ok := f.Attrs[AttrWorkspaces].(int64); ok {
		n += prev
	}
	out.Attrs[AttrWorkspaces] = n
	return &out, nil
}
