package graph

import (
	"fmt"
	"sort"
)

// Module is a set of named functions; "main" is the entry point. Attrs holds
// module-wide settings that later stages attach (for example the compilation
// configuration with its targets and default devices).
type Module struct {
	Funcs map[string]*Function
	Attrs map[string]any
}

// NewModule makes a module whose "main" is fn.
func NewModule(main *Function) *Module {
	return &Module{Funcs: map[string]*Function{"main": main}, Attrs: map[string]any{}}
}

// Main returns the entry function.
func (m *Module) Main() *Function { return m.Funcs["main"] }

// Names returns the function names: "main" first, then the rest sorted.
func (m *Module) Names() []string {
	names := make([]string, 0, len(m.Funcs))
	for n := range m.Funcs {
		if n != "main" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if _, ok := m.Funcs["main"]; ok {
		names = append([]string{"main"}, names...)
	}
	return names
}

// Add inserts a function under a new name; an existing name is an error.
func (m *Module) Add(name string, f *Function) error {
	if _, dup := m.Funcs[name]; dup {
		return fmt.Errorf("module already has a function @%s", name)
	}
	m.Funcs[name] = f
	return nil
}

// Lookup returns the function a GlobalVar names.
func (m *Module) Lookup(g *GlobalVar) (*Function, error) {
	f, ok := m.Funcs[g.Name]
	if !ok {
		return nil, fmt.Errorf("module has no function @%s", g.Name)
	}
	return f, nil
}

// Callee returns the function a call calls: its function literal, or the
// module function its GlobalVar names (partitioned functions are module
// globals); nil for an operator call or an unknown global.
func (m *Module) Callee(c *Call) *Function {
	switch f := c.Fn.(type) {
	case *Function:
		return f
	case *GlobalVar:
		if m != nil {
			return m.Funcs[f.Name]
		}
	}
	return nil
}

// ShallowCopy returns a module with its own function map and attrs (functions shared).
func (m *Module) ShallowCopy() *Module {
	c := &Module{Funcs: make(map[string]*Function, len(m.Funcs)), Attrs: make(map[string]any, len(m.Attrs))}
	for k, v := range m.Funcs {
		c.Funcs[k] = v
	}
	for k, v := range m.Attrs {
		c.Attrs[k] = v
	}
	return c
}
