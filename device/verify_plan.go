package device

import (
	"fmt"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/targets"
)

// VerifyPlan checks that the device plan recorded on mod (PlanDevices)
// still describes it, the VirtualDevice consistency the build's --verify
// checks after every stage from device planning on:
//
//   - every expression of the planned functions outside primitive
//     functions (calls, tuples, projections, parameters, constants) has a
//     planned device — a pass that rebuilt nodes after planning without
//     planning again loses entries of the side table;
//   - each planned device has a device type, an id and a target that the
//     module's CompilationConfig knows;
//   - a primitive call's arguments, a tuple's fields and a projection's
//     tuple are on the device of the expression that uses them (a device
//     crossing needs a device_copy), and a device_copy reads from its
//     source device and writes to its destination device.
//
// A module without a plan passes (it was not planned, or not yet).
func VerifyPlan(mod *graph.Module) error {
	plan := PlanOf(mod)
	if plan == nil {
		return nil
	}
	cfg, err := FromModule(mod)
	if err != nil {
		return fmt.Errorf("device plan: %v", err)
	}
	known := map[string]bool{}
	for _, t := range append(append([]*targets.Target(nil), cfg.Primitives...), cfg.Host) {
		known[t.String()] = true
	}
	v := &planVerifier{mod: mod, plan: plan, known: known}
	for _, name := range mod.Names() {
		f := mod.Funcs[name]
		if isPrimitiveFunc(f) {
			continue
		}
		for _, p := range f.Params {
			if err := v.device(p); err != nil {
				return fmt.Errorf("device plan: @%s: %v", name, err)
			}
		}
		var err error
		graph.PostOrder(f.Body, func(e graph.Expr) {
			if err == nil {
				err = v.node(e)
			}
		})
		if err != nil {
			return fmt.Errorf("device plan: @%s: %v", name, err)
		}
	}
	return nil
}

type planVerifier struct {
	mod   *graph.Module
	plan  *Plan
	known map[string]bool
}

// lookup returns e's planned device, checking it is complete and known.
func (v *planVerifier) lookup(e graph.Expr) (VirtualDevice, error) {
	vd, ok := v.plan.Lookup(e)
	if !ok {
		return vd, fmt.Errorf("%s has no planned device (a pass rebuilt it after device planning?)", graph.Describe(e))
	}
	if vd.DeviceType <= 0 || vd.DeviceID < 0 || vd.Target == nil {
		return vd, fmt.Errorf("%s is planned on the incomplete %s", graph.Describe(e), vd)
	}
	if !v.known[vd.Target.String()] {
		return vd, fmt.Errorf("%s is planned on %s, whose target is not among the compilation's", graph.Describe(e), vd)
	}
	return vd, nil
}

// device checks e's planned device.
func (v *planVerifier) device(e graph.Expr) error {
	_, err := v.lookup(e)
	return err
}

// same checks that arg, used by user on device want, is on that device.
func (v *planVerifier) same(arg, user graph.Expr, want VirtualDevice) error {
	if _, ok := arg.(*graph.GlobalVar); ok {
		return nil
	}
	if _, ok := arg.(*graph.Function); ok {
		return nil
	}
	got, err := v.lookup(arg)
	if err != nil {
		return err
	}
	if !got.SameDevice(want) {
		return fmt.Errorf("%s on %s uses %s on %s without a device_copy", graph.Describe(user), want.DeviceName(), graph.Describe(arg), got.DeviceName())
	}
	return nil
}

func (v *planVerifier) node(e graph.Expr) error {
	switch x := e.(type) {
	case *graph.GlobalVar, *graph.Function:
		return nil // callees: functions are planned on their own
	case *graph.Var, *graph.Constant:
		return v.device(e)
	case *graph.Tuple:
		vd, err := v.lookup(x)
		if err != nil {
			return err
		}
		for _, f := range x.Fields {
			if err := v.same(f, x, vd); err != nil {
				return err
			}
		}
	case *graph.TupleGetItem:
		vd, err := v.lookup(x)
		if err != nil {
			return err
		}
		return v.same(x.Tuple, x, vd)
	case *graph.Call:
		vd, err := v.lookup(x)
		if err != nil {
			return err
		}
		p := &planner{mod: v.mod}
		kind, attrs, _, err := p.classify(x)
		if err != nil {
			return err
		}
		switch kind {
		case kindPrimitive:
			for _, a := range x.Args {
				if err := v.same(a, x, vd); err != nil {
					return err
				}
			}
		case kindDeviceCopy:
			if len(x.Args) != 1 {
				return fmt.Errorf("%s has %d arguments", graph.Describe(x), len(x.Args))
			}
			src, err := v.lookup(x.Args[0])
			if err != nil {
				return err
			}
			if st, sid := deviceType(attrs.Int("src_device_type")), int(attrs.Int("src_device_id")); st != src.DeviceType || sid != src.DeviceID {
				return fmt.Errorf("%s copies from %s:%d but its argument is on %s", graph.Describe(x), st, sid, src.DeviceName())
			}
			if dt, did := deviceType(attrs.Int("dst_device_type")), int(attrs.Int("dst_device_id")); dt != vd.DeviceType || did != vd.DeviceID {
				return fmt.Errorf("%s copies to %s:%d but is planned on %s", graph.Describe(x), dt, did, vd.DeviceName())
			}
		case kindOnDevice:
			return fmt.Errorf("%s: on_device left after device planning", graph.Describe(x))
		}
		// A call of a planned (non-primitive) function: the function's
		// parameters and result are checked with the function.
	}
	return nil
}
