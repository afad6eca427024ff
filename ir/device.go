package ir

import "strconv"

// DeviceType is a kind of device, numbered as DLPack and the C ABI header
// (enum kiln_device_type) number them. It is the one device-type enum of
// kiln: targets declare theirs with it (targets.DeviceType is an alias),
// virtual devices and device planning use it, and the runtime places
// arrays with it (runtime.DeviceType is an alias).
type DeviceType int32

// The device types kiln knows. CPU follows DLPack's numbering; ExtDev is a
// device with memory of its own (simulated by the runtime's ExtDevAPI).
const (
	CPU    DeviceType = 1
	ExtDev DeviceType = 12
)

// String names the device type as device strings, labels and graph.json
// write it ("cpu", "ext_dev").
func (t DeviceType) String() string {
	switch t {
	case CPU:
		return "cpu"
	case ExtDev:
		return "ext_dev"
	}
	return "device_type(" + strconv.Itoa(int(t)) + ")"
}
