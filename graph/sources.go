package graph

// Sources returns the model nodes (ONNX node names, the calls' Span)
// that call c computes, in the order its function computes them, each
// once: the spans of the calls in its function's body, looking into
// nested functions (composites) and, for a call of a global function (an
// outlined external region), into mod's function of that name.
func Sources(mod *Module, c *Call) []string {
	var out []string
	seen := map[string]bool{}
	visited := map[*Function]bool{}
	var walkFn func(f *Function)
	add := func(e Expr) {
		call, ok := e.(*Call)
		if !ok {
			return
		}
		if call.Span != "" && !seen[call.Span] {
			seen[call.Span] = true
			out = append(out, call.Span)
		}
		switch fn := call.Fn.(type) {
		case *Function:
			walkFn(fn)
		case *GlobalVar:
			if mod != nil {
				if f := mod.Funcs[fn.Name]; f != nil {
					walkFn(f)
				}
			}
		}
	}
	walkFn = func(f *Function) {
		if f == nil || visited[f] {
			return
		}
		visited[f] = true
		PostOrder(f.Body, add)
	}
	switch fn := c.Fn.(type) {
	case *Function:
		walkFn(fn)
	case *GlobalVar:
		if mod != nil {
			walkFn(mod.Funcs[fn.Name])
		}
	}
	if len(out) == 0 && c.Span != "" {
		out = append(out, c.Span)
	}
	return out
}
