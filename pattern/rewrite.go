package pattern

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph"
)

// Callback rewrites the matches of one pattern.
type Callback struct {
	// Pattern is what to look for.
	Pattern Pattern
	// Rewrite returns the replacement of a match's root, built from the
	// expressions the match bound (r.Get), or nil to leave it.
	Rewrite func(r *Result) (graph.Expr, error)
}

// MaxRewriteRounds bounds Rewrite's rounds: callbacks that keep producing
// new matches (a replacement that matches its own pattern) are an error.
const MaxRewriteRounds = 100

// Rewrite replaces, bottom-up, every expression under root that a
// callback's pattern matches by the callback's result; callbacks are
// tried in order and the first match wins. Rounds repeat until one
// changes nothing. Expressions under root must be typed (type patterns
// look at types); replacements are typed as they are built, so a type
// error in a replacement is returned.
func Rewrite(root graph.Expr, callbacks ...Callback) (graph.Expr, error) {
	for round := 0; round < MaxRewriteRounds; round++ {
		uses := Uses(root)
		changed := false
		var err error
		out := graph.Rewrite(root, func(e graph.Expr) graph.Expr {
			if err != nil {
				return e
			}
			if err = typeNew(e); err != nil {
				return e
			}
			for _, cb := range callbacks {
				m := newMatcher(uses)
				if !m.match(cb.Pattern, e) {
					continue
				}
				var repl graph.Expr
				repl, err = cb.Rewrite(m.result(e))
				if err != nil {
					err = fmt.Errorf("rewriting %s (pattern %s): %w", graph.Describe(e), cb.Pattern, err)
					return e
				}
				if repl == nil || repl == e {
					continue
				}
				if err = typeNew(repl); err != nil {
					err = fmt.Errorf("rewriting %s (pattern %s): the replacement: %w", graph.Describe(e), cb.Pattern, err)
					return e
				}
				changed = true
				return repl
			}
			return e
		})
		if err != nil {
			return nil, err
		}
		root = out
		if !changed {
			return root, nil
		}
	}
	return nil, fmt.Errorf("pattern rewrite did not reach a fixed point in %d rounds (a replacement matches a pattern again)", MaxRewriteRounds)
}

// typeNew infers the types of the expressions under e that have none
// (built by a rewrite); typed expressions keep theirs.
func typeNew(e graph.Expr) error {
	var err error
	graph.PostOrder(e, func(x graph.Expr) {
		if err == nil && x.Type() == nil {
			_, err = graph.InferExpr(nil, x)
		}
	})
	return err
}
