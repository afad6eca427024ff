package runtime

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/kiln-dev/kiln/ir"
)

// DeviceType is a device kind: ir.DeviceType, kiln's one device-type
// enum, numbered as in the C ABI header (enum kiln_device_type).
type DeviceType = ir.DeviceType

// The device types the runtime knows (ir.CPU and ir.ExtDev).
const (
	CPU    = ir.CPU
	ExtDev = ir.ExtDev
)

// Device is one device: a type and an id. cpu:0 and cpu:1 share the CPU
// DeviceAPI and the host address space, but they are distinct devices: an
// executor keeps their storage apart and copies between them for real.
type Device struct {
	Type DeviceType
	ID   int
}

// CPUDevice returns cpu:id.
func CPUDevice(id int) Device { return Device{Type: CPU, ID: id} }

// ExtDevice returns ext_dev:id.
func ExtDevice(id int) Device { return Device{Type: ExtDev, ID: id} }

// String prints the device as "cpu:0".
func (d Device) String() string { return d.Type.String() + ":" + strconv.Itoa(d.ID) }

// ParseDevice parses "cpu", "cpu:1", "ext_dev:0" (a missing id means 0).
func ParseDevice(s string) (Device, error) {
	name, idStr, hasID := strings.Cut(strings.TrimSpace(s), ":")
	id := 0
	if hasID {
		v, err := strconv.Atoi(idStr)
		if err != nil || v < 0 {
			return Device{}, fmt.Errorf("device %q: bad id %q", s, idStr)
		}
		id = v
	}
	switch name {
	case "cpu":
		return CPUDevice(id), nil
	case "ext_dev":
		return ExtDevice(id), nil
	}
	return Device{}, fmt.Errorf("unknown device %q (want cpu[:id] or ext_dev[:id])", s)
}

// DeviceAPI manages the memory of one device type. Pointers it returns are
// device addresses: the runtime only ever reads or writes them through the
// API's copy functions (kernels compiled for the device receive them as
// kiln_tensor.data). Implementations must be safe for concurrent use.
type DeviceAPI interface {
	// Alloc returns nbytes of zeroed memory on dev, aligned to Alignment.
	// A zero-byte request returns a valid, distinct block.
	Alloc(dev Device, nbytes int64) (unsafe.Pointer, error)
	// Free releases memory returned by Alloc on the same device.
	Free(dev Device, ptr unsafe.Pointer) error
	// CopyToDevice copies host bytes to device memory at dst.
	CopyToDevice(dst unsafe.Pointer, dev Device, src []byte) error
	// CopyFromDevice copies len(dst) bytes of device memory at src to the host.
	CopyFromDevice(dst []byte, src unsafe.Pointer, dev Device) error
	// CopyDeviceToDevice copies nbytes from src on srcDev to dst on dstDev.
	// The runtime calls it when both devices have this API's type, or when
	// one of them is the CPU and the other has this API's type.
	CopyDeviceToDevice(dst unsafe.Pointer, dstDev Device, src unsafe.Pointer, srcDev Device, nbytes int64) error
}

var (
	deviceAPIsMu sync.RWMutex
	deviceAPIs   = map[DeviceType]DeviceAPI{
		CPU:    cpuAPI{},
		ExtDev: newExtDevAPI(),
	}
)

// RegisterDeviceAPI installs the DeviceAPI of a device type, for devices
// added by later work (accelerator simulators, ...). A type that already
// has one, or a nil API, is an error: nothing is replaced silently.
func RegisterDeviceAPI(t DeviceType, api DeviceAPI) error {
	if api == nil {
		return fmt.Errorf("RegisterDeviceAPI(%s): nil DeviceAPI", t)
	}
	deviceAPIsMu.Lock()
	defer deviceAPIsMu.Unlock()
	if _, dup := deviceAPIs[t]; dup {
		return fmt.Errorf("RegisterDeviceAPI(%s): the device type already has a DeviceAPI", t)
	}
	deviceAPIs[t] = api
	return nil
}

// GetDeviceAPI returns the DeviceAPI of a device type.
func GetDeviceAPI(t DeviceType) (DeviceAPI, error) {
	deviceAPIsMu.RLock()
	defer deviceAPIsMu.RUnlock()
	api, ok := deviceAPIs[t]
	if !ok {
		return nil, fmt.Errorf("no DeviceAPI registered for %s", t)
	}
	return api, nil
}

// checkDevice validates a device and returns its API.
func checkDevice(dev Device) (DeviceAPI, error) {
	if dev.ID < 0 {
		return nil, fmt.Errorf("device %s: negative id", dev)
	}
	return GetDeviceAPI(dev.Type)
}

// copyDeviceMemory copies nbytes between two devices: with the shared API
// when the types match, with the non-CPU side's API when the other side is
// the CPU, and staged through host memory otherwise.
func copyDeviceMemory(dst unsafe.Pointer, dstDev Device, src unsafe.Pointer, srcDev Device, nbytes int64) error {
	if nbytes == 0 {
		return nil
	}
	dstAPI, err := checkDevice(dstDev)
	if err != nil {
		return err
	}
	srcAPI, err := checkDevice(srcDev)
	if err != nil {
		return err
	}
	switch {
	case srcDev.Type == dstDev.Type, srcDev.Type == CPU:
		return dstAPI.CopyDeviceToDevice(dst, dstDev, src, srcDev, nbytes)
	case dstDev.Type == CPU:
		return srcAPI.CopyDeviceToDevice(dst, dstDev, src, srcDev, nbytes)
	}
	host := make([]byte, nbytes)
	if err := srcAPI.CopyFromDevice(host, src, srcDev); err != nil {
		return err
	}
	return dstAPI.CopyToDevice(dst, dstDev, host)
}

// cpuAPI is the host: C-allocated memory shared by every cpu:N device.
type cpuAPI struct{}

func (cpuAPI) Alloc(dev Device, nbytes int64) (unsafe.Pointer, error) { return cAlloc(nbytes) }

func (cpuAPI) Free(dev Device, ptr unsafe.Pointer) error {
	cFree(ptr)
	return nil
}

func (cpuAPI) CopyToDevice(dst unsafe.Pointer, dev Device, src []byte) error {
	copy(bytesAt(dst, int64(len(src))), src)
	return nil
}

func (cpuAPI) CopyFromDevice(dst []byte, src unsafe.Pointer, dev Device) error {
	copy(dst, bytesAt(src, int64(len(dst))))
	return nil
}

func (cpuAPI) CopyDeviceToDevice(dst unsafe.Pointer, dstDev Device, src unsafe.Pointer, srcDev Device, nbytes int64) error {
	if dstDev.Type != CPU || srcDev.Type != CPU {
		return fmt.Errorf("cpu DeviceAPI cannot copy %s to %s", srcDev, dstDev)
	}
	copy(bytesAt(dst, nbytes), bytesAt(src, nbytes))
	return nil
}

// ExtDevAPI simulates a device with memory of its own. Its memory is a pool
// of C blocks registered per device id; every copy checks that the device
// side lies inside a live block of the named ext_dev, so host/device pointer
// mix-ups, copies to the wrong ext_dev id and use after free are caught as
// errors. The blocks are host-addressable, which lets CPU-compiled kernels
// stand in for device kernels in tests; the runtime itself never touches
// them except through this API.
type ExtDevAPI struct {
	mu     sync.Mutex
	blocks map[int]map[uintptr]int64 // device id -> base -> size
	inUse  map[int]int64
}

func newExtDevAPI() *ExtDevAPI {
	return &ExtDevAPI{blocks: map[int]map[uintptr]int64{}, inUse: map[int]int64{}}
}

// ExtDevMemory returns the ext_dev DeviceAPI registered at start-up.
func ExtDevMemory() *ExtDevAPI {
	api, _ := GetDeviceAPI(ExtDev)
	e, _ := api.(*ExtDevAPI)
	return e
}

// Stats reports the number of live blocks and bytes allocated on ext_dev:id.
func (e *ExtDevAPI) Stats(id int) (blocks int, bytes int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.blocks[id]), e.inUse[id]
}

func (e *ExtDevAPI) checkType(dev Device) error {
	if dev.Type != ExtDev {
		return fmt.Errorf("ext_dev DeviceAPI used for %s", dev)
	}
	return nil
}

// Alloc implements DeviceAPI.
func (e *ExtDevAPI) Alloc(dev Device, nbytes int64) (unsafe.Pointer, error) {
	if err := e.checkType(dev); err != nil {
		return nil, err
	}
	p, err := cAlloc(nbytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dev, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.blocks[dev.ID]
	if m == nil {
		m = map[uintptr]int64{}
		e.blocks[dev.ID] = m
	}
	m[uintptr(p)] = nbytes
	e.inUse[dev.ID] += nbytes
	return p, nil
}

// Free implements DeviceAPI.
func (e *ExtDevAPI) Free(dev Device, ptr unsafe.Pointer) error {
	if err := e.checkType(dev); err != nil {
		return err
	}
	e.mu.Lock()
	n, ok := e.blocks[dev.ID][uintptr(ptr)]
	if ok {
		delete(e.blocks[dev.ID], uintptr(ptr))
		e.inUse[dev.ID] -= n
	}
	e.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s: free of %p, which is not a live block of this device", dev, ptr)
	}
	cFree(ptr)
	return nil
}

// check verifies that [p, p+n) lies inside one live block of dev.
func (e *ExtDevAPI) check(dev Device, p unsafe.Pointer, n int64) error {
	if err := e.checkType(dev); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	a := uintptr(p)
	for base, size := range e.blocks[dev.ID] {
		if a >= base && a+uintptr(n) <= base+uintptr(size) {
			return nil
		}
	}
	return fmt.Errorf("%s: %d bytes at %p are not memory of this device", dev, n, p)
}

// CopyToDevice implements DeviceAPI.
func (e *ExtDevAPI) CopyToDevice(dst unsafe.Pointer, dev Device, src []byte) error {
	if err := e.check(dev, dst, int64(len(src))); err != nil {
		return err
	}
	copy(bytesAt(dst, int64(len(src))), src)
	return nil
}

// CopyFromDevice implements DeviceAPI.
func (e *ExtDevAPI) CopyFromDevice(dst []byte, src unsafe.Pointer, dev Device) error {
	if err := e.check(dev, src, int64(len(dst))); err != nil {
		return err
	}
	copy(dst, bytesAt(src, int64(len(dst))))
	return nil
}

// CopyDeviceToDevice implements DeviceAPI for ext_dev to ext_dev and for
// copies between ext_dev and the host.
func (e *ExtDevAPI) CopyDeviceToDevice(dst unsafe.Pointer, dstDev Device, src unsafe.Pointer, srcDev Device, nbytes int64) error {
	for _, side := range []struct {
		dev Device
		p   unsafe.Pointer
	}{{dstDev, dst}, {srcDev, src}} {
		switch side.dev.Type {
		case ExtDev:
			if err := e.check(side.dev, side.p, nbytes); err != nil {
				return err
			}
		case CPU:
		default:
			return fmt.Errorf("ext_dev DeviceAPI cannot copy %s to %s", srcDev, dstDev)
		}
	}
	copy(bytesAt(dst, nbytes), bytesAt(src, nbytes))
	return nil
}
