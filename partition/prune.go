package partition

import (
	"fmt"

	"github.com/kiln-dev/kiln/backend"
	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/targets"
)

// pruneRegions forms the regions of main (Regions) and asks each kind
// with a KeepRegion hook about each of its regions. A refused region's
// calls go back to the host: its composites are inlined to their
// operators, main is annotated again with every call of a refused region
// (by ONNX node and operator) forced to the host with the refusal as its
// reason, and the regions are formed again, until every region is kept.
// It returns main (new when composites were inlined), its annotation and
// the regions.
func pruneRegions(main *graph.Function, tgts []*targets.Target, ann *Annotation, merge func(*targets.Target) bool, decide Decider) (*graph.Function, *Annotation, []*Region, error) {
	host := map[refusalKey]string{} // calls forced to the host, with why
	for round := 0; ; round++ {
		regions := Regions(main, ann, merge)
		refusedAny := false
		for _, r := range regions {
			keep := backend.Of(r.Target.Kind).KeepRegion
			if keep == nil {
				continue
			}
			err := keep(r.Calls)
			if err == nil {
				continue
			}
			refusedAny = true
			why := fmt.Sprintf("%s: region of %d call(s) left to the host: %v", r.Target.Kind.Name, len(r.Calls), err)
			for _, c := range r.Calls {
				host[refusalOf(c)] = why
				if f, ok := c.Fn.(*graph.Function); ok {
					graph.PostOrder(f.Body, func(e graph.Expr) {
						if inner, ok := e.(*graph.Call); ok && inner.Op != nil && inner.Span != "" {
							host[refusalKey{span: inner.Span, op: inner.Op.Name}] = why
						}
					})
				}
			}
		}
		if !refusedAny {
			return main, ann, regions, nil
		}
		if round > 2*len(ann.Target)+1 {
			// Every round moves at least one call to the host for good.
			return nil, nil, nil, fmt.Errorf("partition: region pruning does not settle")
		}
		forced := func(c *graph.Call) bool { _, ok := host[refusalOf(c)]; return ok }
		// Every composite left is taken by a target (the others were
		// inlined before); inline the forced ones. (The predicate sees
		// calls rebuilt by the rewrite, so it must not look them up by
		// pointer in ann.)
		inlined, err := inlineComposites(main, func(c *graph.Call) bool { return !forced(c) })
		if err != nil {
			return nil, nil, nil, fmt.Errorf("partition: %w", err)
		}
		main = inlined
		ann = annotate(main, tgts, decide)
		// The refusal comes first among the reasons: the operators of an
		// inlined composite may also be refused one by one.
		graph.PostOrder(main.Body, func(e graph.Expr) {
			c, ok := e.(*graph.Call)
			if !ok {
				return
			}
			if why, ok := host[refusalOf(c)]; ok {
				delete(ann.Target, c)
				ann.Why[c] = append([]string{why}, ann.Why[c]...)
			}
		})
	}
}
