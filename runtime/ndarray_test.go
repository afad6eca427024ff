package runtime

import (
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// patterned returns a tensor whose bytes are all distinct-ish.
func patterned(dt ir.DType, shape ir.Shape) *tensor.Tensor {
	t := tensor.New(dt, shape)
	for i := range t.Data {
		t.Data[i] = byte(i*7 + 3)
	}
	return t
}

func TestDeviceParseAndString(t *testing.T) {
	cases := []struct {
		in   string
		want Device
		str  string
	}{
		{"cpu", CPUDevice(0), "cpu:0"},
		{"cpu:1", CPUDevice(1), "cpu:1"},
		{"ext_dev:2", ExtDevice(2), "ext_dev:2"},
	}
	for _, c := range cases {
		d, err := ParseDevice(c.in)
		if err != nil || d != c.want || d.String() != c.str {
			t.Errorf("ParseDevice(%q) = %v, %v; want %v (%s)", c.in, d, err, c.want, c.str)
		}
	}
	for _, bad := range []string{"gpu:0", "cpu:-1", "cpu:x"} {
		if _, err := ParseDevice(bad); err == nil {
			t.Errorf("ParseDevice(%q) succeeded", bad)
		}
	}
	if CPU != 1 || ExtDev != 12 {
		t.Errorf("device type numbering differs from the C header: CPU=%d ExtDev=%d", CPU, ExtDev)
	}
}

func TestNDArrayRoundTrip(t *testing.T) {
	devs := []Device{CPUDevice(0), CPUDevice(1), ExtDevice(0), ExtDevice(3)}
	shapes := []ir.Shape{{}, {0}, {5}, {2, 3, 4}}
	for _, dev := range devs {
		for _, dt := range ir.AllDTypes {
			for _, sh := range shapes {
				src := patterned(dt, sh)
				a, err := FromTensor(src, dev)
				if err != nil {
					t.Fatalf("FromTensor(%s%v, %s): %v", dt, sh, dev, err)
				}
				if a.Device() != dev || a.DType() != dt || !a.Shape().Equal(sh) || a.NumBytes() != int64(len(src.Data)) {
					t.Errorf("%v: metadata wrong", a)
				}
				p, err := a.DataPtr()
				if err != nil || uintptr(p)%Alignment != 0 {
					t.Errorf("%v: data %p not %d-aligned (%v)", a, p, Alignment, err)
				}
				got, err := a.ToTensor()
				if err != nil {
					t.Fatal(err)
				}
				if !got.Equal(src) {
					t.Errorf("%v: round trip changed the data", a)
				}
				a.Free()
			}
		}
	}
}

func TestEmptyIsZeroAndErrors(t *testing.T) {
	a, err := Empty(ir.Float32, ir.Shape{3, 5}, CPUDevice(0))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := a.ToTensor()
	for i, v := range got.Float32s() {
		if v != 0 {
			t.Fatalf("element %d = %v, want 0", i, v)
		}
	}
	bad := []struct {
		dt    ir.DType
		shape ir.Shape
		dev   Device
		want  string
	}{
		{ir.Float32, ir.Shape{2, -1}, CPUDevice(0), "negative dimension"},
		{ir.Invalid, ir.Shape{2}, CPUDevice(0), "unsupported dtype"},
		{ir.Float32, ir.Shape{2}, Device{Type: 99}, "no DeviceAPI"},
		{ir.Float32, ir.Shape{2}, CPUDevice(-1), "negative id"},
		{ir.Float64, ir.Shape{1 << 40, 1 << 40}, CPUDevice(0), "more than 2^63 elements"},
	}
	for _, c := range bad {
		if _, err := Empty(c.dt, c.shape, c.dev); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Empty(%s, %v, %v) error = %v, want %q", c.dt, c.shape, c.dev, err, c.want)
		}
	}
	// CopyFrom / CopyTo check dtype and shape.
	if err := a.CopyFrom(tensor.New(ir.Float32, ir.Shape{5, 3})); err == nil || !strings.Contains(err.Error(), "expected float32[3, 5], got float32[5, 3]") {
		t.Errorf("CopyFrom wrong shape: %v", err)
	}
	if err := a.CopyTo(tensor.New(ir.Int32, ir.Shape{3, 5})); err == nil || !strings.Contains(err.Error(), "got int32[3, 5]") {
		t.Errorf("CopyTo wrong dtype: %v", err)
	}
}

func TestCopyBetweenDevices(t *testing.T) {
	src := tensor.FromFloat32s(ir.Shape{2, 4}, []float32{1, -2, 3, -4, 5, -6, 7, -8})
	path := []Device{CPUDevice(0), CPUDevice(1), ExtDevice(0), ExtDevice(1), CPUDevice(0), ExtDevice(0), CPUDevice(2)}
	prev, err := FromTensor(src, path[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, dev := range path[1:] {
		next, err := Empty(ir.Float32, ir.Shape{2, 4}, dev)
		if err != nil {
			t.Fatal(err)
		}
		if err := next.CopyFromArray(prev); err != nil {
			t.Fatalf("%s -> %s: %v", prev.Device(), dev, err)
		}
		pp, _ := prev.DataPtr()
		np, _ := next.DataPtr()
		if pp == np {
			t.Fatalf("%s and %s share memory", prev.Device(), dev)
		}
		got, _ := next.ToTensor()
		if !got.Equal(src) {
			t.Fatalf("%s -> %s: got %v", prev.Device(), dev, got.Float32s())
		}
		// The copy is real: changing the source afterwards leaves it alone.
		if err := prev.CopyFrom(tensor.New(ir.Float32, ir.Shape{2, 4})); err != nil {
			t.Fatal(err)
		}
		got, _ = next.ToTensor()
		if !got.Equal(src) {
			t.Fatalf("%s -> %s: copy aliases its source", prev.Device(), dev)
		}
		prev = next
	}
	other, _ := Empty(ir.Float32, ir.Shape{8}, CPUDevice(0))
	if err := other.CopyFromArray(prev); err == nil || !strings.Contains(err.Error(), "dtype or shape differs") {
		t.Errorf("copy with a different shape: %v", err)
	}
}

func TestViewsAndFree(t *testing.T) {
	base, err := FromTensor(tensor.FromFloat32s(ir.Shape{4}, []float32{1, 2, 3, 4}), CPUDevice(0))
	if err != nil {
		t.Fatal(err)
	}
	v, err := base.View(ir.Float32, ir.Shape{2}, 8)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := v.ToTensor()
	if want := []float32{3, 4}; got.Float32s()[0] != want[0] || got.Float32s()[1] != want[1] {
		t.Errorf("view = %v, want %v", got.Float32s(), want)
	}
	if _, err := base.View(ir.Float32, ir.Shape{3}, 8); err == nil {
		t.Error("a view past the end was allowed")
	}
	v.Free() // no-op on a view
	if _, err := base.ToTensor(); err != nil {
		t.Errorf("freeing a view freed its base: %v", err)
	}
	base.Free()
	base.Free() // idempotent
	if _, err := v.ToTensor(); err != errFreed {
		t.Errorf("view after Free: %v, want %v", err, errFreed)
	}
	if _, err := base.DataPtr(); err != errFreed {
		t.Errorf("DataPtr after Free: %v", err)
	}
	if err := base.CopyFrom(tensor.New(ir.Float32, ir.Shape{4})); err != errFreed {
		t.Errorf("CopyFrom after Free: %v", err)
	}
}

func TestExtDevMemoryIsChecked(t *testing.T) {
	ext := ExtDevMemory()
	dev := ExtDevice(7) // an id no other test uses
	blocks0, bytes0 := ext.Stats(dev.ID)
	a, err := Empty(ir.Int32, ir.Shape{10}, dev)
	if err != nil {
		t.Fatal(err)
	}
	blocks, bytes := ext.Stats(dev.ID)
	if blocks != blocks0+1 || bytes != bytes0+40 {
		t.Errorf("after Alloc: %d blocks, %d bytes; want %d, %d", blocks, bytes, blocks0+1, bytes0+40)
	}
	host, _ := Empty(ir.Int32, ir.Shape{10}, CPUDevice(0))
	hp, _ := host.DataPtr()
	ap, _ := a.DataPtr()
	buf := make([]byte, 40)
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"host pointer as device memory", ext.CopyToDevice(hp, dev, buf), "not memory of this device"},
		{"wrong ext_dev id", ext.CopyFromDevice(buf, ap, ExtDevice(8)), "not memory of this device"},
		{"past the end of a block", ext.CopyFromDevice(make([]byte, 41), ap, dev), "not memory of this device"},
		{"cpu device", ext.CopyToDevice(hp, CPUDevice(0), buf), "used for cpu:0"},
		{"free of a foreign pointer", ext.Free(dev, hp), "not a live block"},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, c.err, c.want)
		}
	}
	a.Free()
	if blocks, bytes := ext.Stats(dev.ID); blocks != blocks0 || bytes != bytes0 {
		t.Errorf("after Free: %d blocks, %d bytes; want %d, %d", blocks, bytes, blocks0, bytes0)
	}
	if err := ext.CopyToDevice(ap, dev, buf); err == nil {
		t.Error("copy into freed ext_dev memory succeeded")
	}
	host.Free()
}

// TestPackArgs checks the kiln_tensor layout seen by C, through a kernel
// that reports what it received.
func TestPackArgs(t *testing.T) {
	testenv.Cgo(t)
	mod := loadMain(t)
	describe, ok := mod.GetFunction("describe")
	if !ok {
		t.Fatal("describe not found")
	}
	cases := []struct {
		dt        ir.DType
		shape     ir.Shape
		dev       Device
		code, bit int64
	}{
		{ir.Float32, ir.Shape{2, 3, 5}, CPUDevice(0), 2, 32},
		{ir.Float16, ir.Shape{7}, CPUDevice(1), 2, 16},
		{ir.BFloat16, ir.Shape{1, 1}, CPUDevice(0), 4, 16},
		{ir.Int8, ir.Shape{}, ExtDevice(2), 0, 8},
		{ir.Uint64, ir.Shape{4, 0}, CPUDevice(0), 1, 64},
		{ir.Bool, ir.Shape{3}, CPUDevice(0), 6, 8},
	}
	for _, c := range cases {
		x, err := Empty(c.dt, c.shape, c.dev)
		if err != nil {
			t.Fatal(err)
		}
		// describe runs on the host; its output lives on the same device
		// as x (the simulated ext_dev is host addressable).
		o, _ := Empty(ir.Int64, ir.Shape{16}, c.dev)
		if err := describe([]*NDArray{x, o}); err != nil {
			t.Fatal(err)
		}
		got, _ := o.ToTensor()
		v := got.Int64s()
		want := []int64{int64(len(c.shape)), c.code, c.bit, 1, int64(c.dev.Type), int64(c.dev.ID), 0, 2}
		for i, w := range want {
			if v[i] != w {
				t.Errorf("%s%v on %s: field %d = %d, want %d (all %v)", c.dt, c.shape, c.dev, i, v[i], w, v[:8])
			}
		}
		for i, d := range c.shape {
			if v[8+i] != d {
				t.Errorf("%s%v: shape[%d] = %d", c.dt, c.shape, i, v[8+i])
			}
		}
	}
}

// TestUnreachableMemoryIsReleased checks the cleanup path: arrays and
// executors dropped without Free/Close give their device memory back.
func TestUnreachableMemoryIsReleased(t *testing.T) {
	testenv.Cgo(t)
	ext := ExtDevMemory()
	dev := ExtDevice(9) // an id no other test uses
	for range 5 {
		if _, err := Empty(ir.Float32, ir.Shape{100}, dev); err != nil {
			t.Fatal(err)
		}
	}
	g := strings.Replace(testGraph, "[12, 0], [12, 0],", "[12, 9], [12, 9],", 1)
	if _, err := NewGraphExecutor([]byte(g), testModule(t)); err != nil {
		t.Fatal(err)
	}
	if b, _ := ext.Stats(dev.ID); b != 7 {
		t.Fatalf("%d live blocks on %s, want 7", b, dev)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		goruntime.GC()
		b, n := ext.Stats(dev.ID)
		if b == 0 && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d blocks (%d bytes) still live on %s after GC", b, n, dev)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRegisterDeviceAPIRefusesDuplicates: registering a device type twice
// (cpu and ext_dev are built in) or a nil API is an error, and the
// built-in API stays.
func TestRegisterDeviceAPIRefusesDuplicates(t *testing.T) {
	before, err := GetDeviceAPI(CPU)
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterDeviceAPI(CPU, cpuAPI{}); err == nil || !strings.Contains(err.Error(), "already has a DeviceAPI") {
		t.Errorf("RegisterDeviceAPI(cpu) = %v", err)
	}
	if err := RegisterDeviceAPI(DeviceType(99), nil); err == nil {
		t.Error("a nil DeviceAPI was accepted")
	}
	if after, _ := GetDeviceAPI(CPU); after != before {
		t.Error("the cpu DeviceAPI changed")
	}
}
