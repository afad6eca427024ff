package device

import (
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/targets"
)

// Function attributes PlanDevices sets on every function it plans (main
// and every non-primitive module function), recording the devices of the
// parameters and of the result. They print and parse with the module
// text, and PlanDevices reads them back as constraints, so planning its
// own output changes nothing. Device types are DLPack codes.
const (
	AttrParamDeviceTypes = "param_device_types" // ints, one per parameter
	AttrParamDeviceIDs   = "param_device_ids"   // ints, one per parameter
	AttrResultDeviceType = "result_device_type" // int
	AttrResultDeviceID   = "result_device_id"   // int
)

// PlanAttr is the graph.Module.Attrs key of the Plan PlanDevices records.
const PlanAttr = "device_plan"

// Plan is the side table PlanDevices records on its output module: the
// VirtualDevice of every expression of the planned functions (calls,
// tuples, projections, parameters, constants and the inserted copies).
// It is keyed by node identity, so it describes exactly the module
// PlanDevices returned; a pass that rebuilds nodes loses the entries of the
// nodes it rebuilt. It is never modified after PlanDevices returns.
type Plan struct {
	devices map[graph.Expr]VirtualDevice
}

// Lookup returns the planned device of e.
func (p *Plan) Lookup(e graph.Expr) (VirtualDevice, bool) {
	if p == nil {
		return FullyUnconstrained(), false
	}
	vd, ok := p.devices[e]
	if !ok {
		return FullyUnconstrained(), false
	}
	return vd, true
}

// Len is the number of expressions with a planned device.
func (p *Plan) Len() int {
	if p == nil {
		return 0
	}
	return len(p.devices)
}

// PlanOf returns the plan recorded on mod, or nil when it was not planned.
func PlanOf(mod *graph.Module) *Plan {
	p, _ := mod.Attrs[PlanAttr].(*Plan)
	return p
}

// DeviceOf returns the VirtualDevice PlanDevices chose for e in mod (for a
// call: where it runs and the Target it is lowered for; for a device_copy:
// its destination), or FullyUnconstrained when mod was not planned or e is
// not one of its planned nodes (for example a node inside a primitive
// function, which runs on the device of the call that calls it).
//
// LowerTE uses it to pick the target of each primitive call, and the
// executor codegen to set each node's device.
func DeviceOf(mod *graph.Module, e graph.Expr) VirtualDevice {
	vd, _ := PlanOf(mod).Lookup(e)
	return vd
}

// PlanDevices decides the device of every expression of the module and
// makes device crossings explicit, with TVM's three phases. It needs the
// module's CompilationConfig (Attach).
//
//  1. Analysis: each expression gets a domain in a union-find of virtual
//     devices. A primitive call (an operator, a call of a Primitive or
//     external (Compiler) function) has its arguments and result in one
//     domain; tuple fields share the tuple's domain and a projection its
//     tuple's; a call of another function unifies each argument with the
//     parameter and the call with the function's result (so constraints
//     flow across calls, one domain per function as in TVM).
//     on_device(e, d) puts e on d (and, with constrain_result, its result
//     too; otherwise the result is a fresh domain); device_copy(e) puts e
//     on its source and its result on its destination; the device
//     attributes of an already planned function constrain its parameters
//     and result. Joining two different devices is an error naming both
//     and the expression. Constants have no domain: each use places the
//     constant on the consumer's device.
//  2. Defaulting: a still unconstrained primitive call takes the
//     configuration's DefaultPrimitive; everything else left takes its
//     HostDevice; every device gets its target from the configuration.
//  3. Rewriting: on_device annotations disappear; wherever a value
//     produced on one device is consumed on another a device_copy is
//     inserted (one per value and destination, shared by all consumers on
//     that device; a copy of a tuple projection is placed after the
//     projection, and a tuple-valued crossing copies field by field);
//     explicit device_copy calls are kept (deduplicated the same way) or
//     dropped when source and destination coincide; an on_device without
//     constrain_body passes its value through where it was produced (one
//     copy, straight to the consumer's device); a constant used on
//     several devices is duplicated, one node per device.
//
// The result records every node's device (DeviceOf) and the planned
// functions' parameter and result devices (AttrParamDeviceTypes ...).
// PlanDevices is idempotent. Fused input is accepted: a call of a
// primitive function whose body is on_device or device_copy of its
// parameter (FuseOps wraps lone opaque ops so) counts as that op.
func PlanDevices(mod *graph.Module) (*graph.Module, error) {
	cfg, err := FromModule(mod)
	if err != nil {
		return nil, fmt.Errorf("PlanDevices: %v", err)
	}
	if mod.Main() == nil {
		return nil, fmt.Errorf("PlanDevices: module has no main function")
	}
	if err := graph.InferTypes(mod); err != nil {
		return nil, fmt.Errorf("PlanDevices: %v", err)
	}
	p := &planner{
		mod: mod, cfg: cfg,
		dom: map[graph.Expr]int{}, side: map[graph.Expr]int{},
		result: map[*graph.Function]int{}, analysed: map[*graph.Function]bool{},
	}
	for _, name := range mod.Names() {
		f := mod.Funcs[name]
		if isPrimitiveFunc(f) {
			continue
		}
		if err := p.analyseFunc(name, f); err != nil {
			return nil, fmt.Errorf("PlanDevices: %v", err)
		}
	}
	if err := p.applyDefaults(); err != nil {
		return nil, fmt.Errorf("PlanDevices: %v", err)
	}
	rw := &rewriter{
		p: p, out: map[graph.Expr]graph.Expr{}, prod: map[graph.Expr]VirtualDevice{},
		copies: map[copyKey]graph.Expr{}, consts: map[copyKey]*graph.Constant{},
		constHome: map[*graph.Constant]VirtualDevice{}, projs: map[projKey]graph.Expr{},
		funcs: map[*graph.Function]*graph.Function{}, devices: map[graph.Expr]VirtualDevice{},
	}
	out := mod.ShallowCopy()
	for _, name := range mod.Names() {
		f := mod.Funcs[name]
		if isPrimitiveFunc(f) {
			continue
		}
		nf, err := rw.function(f)
		if err != nil {
			return nil, fmt.Errorf("PlanDevices: @%s: %v", name, err)
		}
		out.Funcs[name] = nf
	}
	if err := graph.InferTypes(out); err != nil {
		return nil, fmt.Errorf("PlanDevices: result does not type-check: %v", err)
	}
	out.Attrs[PlanAttr] = &Plan{devices: rw.devices}
	return out, nil
}

// isPrimitiveFunc reports whether f is opaque to planning: a fused
// primitive function or a function an external codegen takes. Such a
// function runs wholly on the device of the call that calls it.
func isPrimitiveFunc(f *graph.Function) bool {
	return f.BoolAttr(graph.AttrPrimitive) || f.StrAttr(graph.AttrCompiler) != ""
}

// callKind classifies calls for planning.
type callKind int

const (
	kindPrimitive  callKind = iota // operator or primitive function: args and result on one device
	kindOnDevice                   // on_device annotation
	kindDeviceCopy                 // device_copy
	kindFunction                   // call of a non-primitive function
)

// classify returns a call's kind, the device op's attributes for
// on_device/device_copy (looking through a fused wrapper), and the callee
// of a non-primitive function call.
func (p *planner) classify(c *graph.Call) (callKind, ir.Attrs, *graph.Function, error) {
	if c.Op != nil {
		switch c.Op {
		case op.OnDevice:
			return kindOnDevice, c.Attrs, nil, nil
		case op.DeviceCopy:
			return kindDeviceCopy, c.Attrs, nil, nil
		}
		return kindPrimitive, nil, nil, nil
	}
	var f *graph.Function
	switch fn := c.Fn.(type) {
	case *graph.Function:
		f = fn
	case *graph.GlobalVar:
		var err error
		if f, err = p.mod.Lookup(fn); err != nil {
			return 0, nil, nil, err
		}
	default:
		return 0, nil, nil, fmt.Errorf("%s: unsupported callee %s", graph.Describe(c), graph.Describe(c.Fn))
	}
	if !isPrimitiveFunc(f) {
		return kindFunction, nil, f, nil
	}
	// A fused wrapper of a lone device op: fn (%p) { on_device(%p, ...) }.
	if inner, ok := f.Body.(*graph.Call); ok && len(f.Params) == 1 && len(inner.Args) == 1 && inner.Args[0] == f.Params[0] {
		switch inner.Op {
		case op.OnDevice:
			return kindOnDevice, inner.Attrs, nil, nil
		case op.DeviceCopy:
			return kindDeviceCopy, inner.Attrs, nil, nil
		}
	}
	return kindPrimitive, nil, nil, nil
}

// ---- phase 1: analysis ----

// domains is a union-find of virtual devices.
type domains struct {
	parent []int
	vd     []VirtualDevice
}

func (d *domains) fresh() int {
	d.parent = append(d.parent, len(d.parent))
	d.vd = append(d.vd, FullyUnconstrained())
	return len(d.parent) - 1
}

func (d *domains) find(i int) int {
	for d.parent[i] != i {
		d.parent[i] = d.parent[d.parent[i]]
		i = d.parent[i]
	}
	return i
}

// get returns the current device of domain i.
func (d *domains) get(i int) VirtualDevice { return d.vd[d.find(i)] }

// planner holds the analysis state of one PlanDevices run.
type planner struct {
	mod *graph.Module
	cfg *CompilationConfig
	d   domains
	// dom is each expression's (result) domain; Vars' domains are the
	// parameters' domains.
	dom map[graph.Expr]int
	// side is an on_device's body domain or a device_copy's source domain.
	side map[graph.Expr]int
	// result is each planned function's result domain.
	result   map[*graph.Function]int
	analysed map[*graph.Function]bool
	// prims lists primitive calls in visit order (defaulted first).
	prims []graph.Expr
}

// domOf returns e's domain, creating it.
func (p *planner) domOf(e graph.Expr) int {
	if i, ok := p.dom[e]; ok {
		return i
	}
	i := p.d.fresh()
	p.dom[e] = i
	return i
}

// unify joins two domains; ctx names the expression for the error.
func (p *planner) unify(a, b int, ctx graph.Expr) error {
	ra, rb := p.d.find(a), p.d.find(b)
	if ra == rb {
		return nil
	}
	j, ok := Join(p.d.vd[ra], p.d.vd[rb])
	if !ok {
		return fmt.Errorf("%s: conflicting devices %s and %s", graph.Describe(ctx), p.d.vd[ra], p.d.vd[rb])
	}
	p.d.parent[rb] = ra
	p.d.vd[ra] = j
	return nil
}

// constrain joins a domain with a device.
func (p *planner) constrain(a int, vd VirtualDevice, ctx graph.Expr) error {
	r := p.d.find(a)
	j, ok := Join(p.d.vd[r], vd)
	if !ok {
		return fmt.Errorf("%s: conflicting devices %s and %s", graph.Describe(ctx), p.d.vd[r], vd)
	}
	p.d.vd[r] = j
	return nil
}

// use records that child is consumed where domain want is expected.
// Constants adapt to any consumer and are not unified.
func (p *planner) use(child graph.Expr, want int, ctx graph.Expr) error {
	switch child.(type) {
	case *graph.Constant:
		return nil
	case *graph.Function:
		return fmt.Errorf("%s: a function used as a value is not supported by device planning", graph.Describe(ctx))
	}
	return p.unify(p.domOf(child), want, ctx)
}

// analyseFunc collects the constraints of a non-primitive function once.
func (p *planner) analyseFunc(name string, f *graph.Function) error {
	if p.analysed[f] {
		return nil
	}
	p.analysed[f] = true
	for _, v := range f.Params {
		p.domOf(v)
	}
	res := p.d.fresh()
	p.result[f] = res
	if err := p.attrConstraints(name, f); err != nil {
		return err
	}
	var err error
	graph.PostOrder(f.Body, func(e graph.Expr) {
		if err == nil {
			err = p.analyseNode(e)
		}
	})
	if err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	if err := p.use(f.Body, res, f.Body); err != nil {
		return fmt.Errorf("%s: result: %v", name, err)
	}
	return nil
}

// deviceType converts a device type from an attribute. A value above
// int32 becomes math.MaxInt32, which no configuration knows, rather than
// wrapping onto a real device type (values up to 0 mean "unconstrained").
func deviceType(v int64) targets.DeviceType {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	if v < 0 {
		return 0
	}
	return targets.DeviceType(v)
}

// attrConstraints applies the device attributes of an already planned function.
func (p *planner) attrConstraints(name string, f *graph.Function) error {
	types, hasT := f.Attrs[AttrParamDeviceTypes].([]int64)
	ids, hasI := f.Attrs[AttrParamDeviceIDs].([]int64)
	if hasT || hasI {
		if len(types) != len(f.Params) || len(ids) != len(f.Params) {
			return fmt.Errorf("%s: %s/%s must have one entry per parameter (%d)", name, AttrParamDeviceTypes, AttrParamDeviceIDs, len(f.Params))
		}
		for i, v := range f.Params {
			vd, err := p.cfg.CanonicalVirtualDevice(VirtualDevice{DeviceType: deviceType(types[i]), DeviceID: int(ids[i])})
			if err != nil {
				return fmt.Errorf("%s: parameter %s: %v", name, graph.Describe(v), err)
			}
			if err := p.constrain(p.domOf(v), vd, v); err != nil {
				return fmt.Errorf("%s: %v", name, err)
			}
		}
	}
	rt, hasRT := f.Attrs[AttrResultDeviceType].(int64)
	ri, hasRI := f.Attrs[AttrResultDeviceID].(int64)
	if hasRT || hasRI {
		if !hasRT || !hasRI {
			return fmt.Errorf("%s: %s and %s go together", name, AttrResultDeviceType, AttrResultDeviceID)
		}
		vd, err := p.cfg.CanonicalVirtualDevice(VirtualDevice{DeviceType: deviceType(rt), DeviceID: int(ri)})
		if err != nil {
			return fmt.Errorf("%s: result: %v", name, err)
		}
		if err := p.constrain(p.result[f], vd, f.Body); err != nil {
			return fmt.Errorf("%s: result: %v", name, err)
		}
	}
	return nil
}

// onDeviceTarget resolves an on_device annotation's device.
func (p *planner) onDeviceTarget(attrs ir.Attrs, ctx graph.Expr) (VirtualDevice, error) {
	s, dt, id := attrs.Str("device"), attrs.Int("device_type"), attrs.Int("device_id")
	if s != "" {
		vd, err := p.cfg.ResolveDevice(s)
		if err != nil {
			return vd, fmt.Errorf("%s: %v", graph.Describe(ctx), err)
		}
		if dt > 0 && deviceType(dt) != vd.DeviceType {
			return vd, fmt.Errorf("%s: device %q is a %s device but device_type is %s", graph.Describe(ctx), s, vd.DeviceType, deviceType(dt))
		}
		if id >= 0 && int(id) != vd.DeviceID {
			return vd, fmt.Errorf("%s: device %q has id %d but device_id is %d", graph.Describe(ctx), s, vd.DeviceID, id)
		}
		return vd, nil
	}
	if dt <= 0 {
		return VirtualDevice{}, fmt.Errorf("%s: on_device without a device", graph.Describe(ctx))
	}
	if id < 0 {
		id = 0
	}
	vd, err := p.cfg.CanonicalVirtualDevice(VirtualDevice{DeviceType: deviceType(dt), DeviceID: int(id)})
	if err != nil {
		return vd, fmt.Errorf("%s: %v", graph.Describe(ctx), err)
	}
	return vd, nil
}

// copyEnds returns a device_copy's source and destination devices.
func (p *planner) copyEnds(attrs ir.Attrs, ctx graph.Expr) (VirtualDevice, VirtualDevice, error) {
	var ends [2]VirtualDevice
	for i, side := range []string{"src", "dst"} {
		vd, err := p.cfg.CanonicalVirtualDevice(VirtualDevice{
			DeviceType: deviceType(attrs.Int(side + "_device_type")),
			DeviceID:   int(attrs.Int(side + "_device_id")),
		})
		if err != nil {
			return ends[0], ends[1], fmt.Errorf("%s: %s device: %v", graph.Describe(ctx), side, err)
		}
		ends[i] = vd
	}
	return ends[0], ends[1], nil
}

// analyseNode adds the constraints of one expression.
func (p *planner) analyseNode(e graph.Expr) error {
	switch x := e.(type) {
	case *graph.Var:
		p.domOf(x)
	case *graph.Constant, *graph.GlobalVar:
	case *graph.Function:
		return fmt.Errorf("%s: a function used as a value is not supported by device planning", graph.Describe(x))
	case *graph.Tuple:
		d := p.domOf(x)
		for _, f := range x.Fields {
			if err := p.use(f, d, x); err != nil {
				return err
			}
		}
	case *graph.TupleGetItem:
		return p.use(x.Tuple, p.domOf(x), x)
	case *graph.Call:
		kind, attrs, fn, err := p.classify(x)
		if err != nil {
			return err
		}
		d := p.domOf(x)
		switch kind {
		case kindOnDevice:
			vd, err := p.onDeviceTarget(attrs, x)
			if err != nil {
				return err
			}
			body := p.d.fresh()
			p.side[x] = body
			if attrs.Bool("constrain_body") {
				if err := p.constrain(body, vd, x); err != nil {
					return err
				}
			}
			if attrs.Bool("constrain_result") {
				if err := p.constrain(d, vd, x); err != nil {
					return err
				}
			}
			return p.use(x.Args[0], body, x)
		case kindDeviceCopy:
			src, dst, err := p.copyEnds(attrs, x)
			if err != nil {
				return err
			}
			s := p.d.fresh()
			p.side[x] = s
			if err := p.constrain(s, src, x); err != nil {
				return err
			}
			if err := p.constrain(d, dst, x); err != nil {
				return err
			}
			return p.use(x.Args[0], s, x)
		case kindPrimitive:
			p.prims = append(p.prims, x)
			for _, a := range x.Args {
				if err := p.use(a, d, x); err != nil {
					return err
				}
			}
		case kindFunction:
			name := "fn"
			if g, ok := x.Fn.(*graph.GlobalVar); ok {
				name = g.Name
			}
			if err := p.analyseFunc(name, fn); err != nil {
				return err
			}
			if len(fn.Params) != len(x.Args) {
				return fmt.Errorf("%s: %d arguments for %d parameters", graph.Describe(x), len(x.Args), len(fn.Params))
			}
			for i, a := range x.Args {
				if err := p.use(a, p.domOf(fn.Params[i]), x); err != nil {
					return fmt.Errorf("argument %d: %v", i, err)
				}
			}
			return p.unify(d, p.result[fn], x)
		}
	}
	return nil
}

// ---- phase 2: defaulting ----

// applyDefaults fills unconstrained domains and completes every device.
func (p *planner) applyDefaults() error {
	for _, e := range p.prims {
		r := p.d.find(p.dom[e])
		if !p.d.vd[r].IsFullyConstrained() {
			p.d.vd[r] = Default(p.d.vd[r], p.cfg.DefaultPrimitive)
		}
	}
	for i := range p.d.parent {
		if p.d.find(i) != i {
			continue
		}
		vd := Default(p.d.vd[i], p.cfg.HostDevice)
		cvd, err := p.cfg.CanonicalVirtualDevice(vd)
		if err != nil {
			return fmt.Errorf("%s: %v", vd, err)
		}
		if cvd.DeviceID < 0 {
			cvd.DeviceID = 0
		}
		if cvd.MemoryScope == "" {
			cvd.MemoryScope = DefaultMemoryScope
		}
		p.d.vd[i] = cvd
	}
	return nil
}
