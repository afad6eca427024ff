package transform

import "github.com/kiln-dev/kiln/tir"

// DisableVectorize returns the pass that turns every vectorized loop into
// a serial one (pass-config key tir.disable_vectorize): code generation
// then emits no vectorization pragma for it. The loops compute the same
// values; only the hint to the C compiler goes.
func DisableVectorize() Pass {
	return Pass{Name: "DisableVectorize", Run: func(f *tir.PrimFunc) (*tir.PrimFunc, error) {
		return f.WithBody(tir.MutateStmt(f.Body, func(s tir.Stmt) tir.Stmt {
			loop, ok := s.(*tir.For)
			if !ok || loop.Kind != tir.Vectorized {
				return s
			}
			c := *loop
			c.Kind = tir.Serial
			return &c
		}, nil)), nil
	}}
}
