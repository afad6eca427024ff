package topi

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/strategy"
	"github.com/kiln-dev/kiln/targets"
	"github.com/kiln-dev/kiln/tir"
	"github.com/kiln-dev/kiln/topi/topitest"
)

// rowsGeometries are max pools of every shape the rows form takes apart:
// squeezenet's (3x3 stride 2, ceil mode: a right padding column),
// resnet's (3x3 stride 2, padding 1), googlenet's 3x3 stride 1 padding
// 1, a dilated pool with padding on one side only, a 1x5 window over a
// row 21 wide (a scan of fewer than 16 values), and a 2x2 pool over 40
// columns.
var rowsGeometries = []maxPoolRows{
	{h: 13, w: 13, oh: 6, ow: 6, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1},
	{h: 16, w: 16, oh: 8, ow: 8, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1, ph: 1, pw: 1},
	{h: 9, w: 11, oh: 9, ow: 11, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, ph: 1, pw: 1},
	{h: 7, w: 6, oh: 6, ow: 6, kh: 2, kw: 2, sh: 1, sw: 1, dh: 2, dw: 1, ph: 1, pw: 0},
	{h: 3, w: 21, oh: 3, ow: 17, kh: 1, kw: 5, sh: 1, sw: 1, dh: 1, dw: 1},
	{h: 6, w: 40, oh: 3, ow: 20, kh: 2, kw: 2, sh: 2, sw: 2, dh: 1, dw: 1},
	// The vector forms' (pool_vec.go): googlenet's 3x3 stride 1 on 14x14
	// and 7x7 (flat), a 5x5 window on 13x13 (flat, taps wholly in the
	// padding), a flat plane taller than its output (1x3 window, no
	// padding, dilation 2), googlenet's 28 -> 14 stride 2 in ceil mode and
	// 14 -> 7 by 2x2 (direct), squeezenet's 55 -> 27 (direct, two
	// vectors per row), a plane too large for the flat form (direct,
	// stride 1) and a row stride of 2 with a column stride of 1 (direct).
	{h: 14, w: 14, oh: 14, ow: 14, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, ph: 1, pw: 1},
	{h: 7, w: 7, oh: 7, ow: 7, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, ph: 1, pw: 1},
	{h: 13, w: 13, oh: 13, ow: 13, kh: 5, kw: 5, sh: 1, sw: 1, dh: 1, dw: 1, ph: 2, pw: 2},
	{h: 9, w: 10, oh: 5, ow: 10, kh: 3, kw: 1, sh: 1, sw: 1, dh: 2, dw: 1},
	{h: 28, w: 28, oh: 14, ow: 14, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1},
	{h: 14, w: 14, oh: 7, ow: 7, kh: 2, kw: 2, sh: 2, sw: 2, dh: 1, dw: 1},
	{h: 55, w: 55, oh: 27, ow: 27, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1},
	{h: 120, w: 30, oh: 120, ow: 30, kh: 5, kw: 5, sh: 1, sw: 1, dh: 1, dw: 1, ph: 2, pw: 2},
	{h: 11, w: 9, oh: 5, ow: 9, kh: 3, kw: 3, sh: 2, sw: 1, dh: 1, dw: 1, ph: 0, pw: 1},
}

// TestPoolVecForms checks which vector form each of rowsGeometries gets
// with AVX-512's vectors, and the choice by processor.
func TestPoolVecForms(t *testing.T) {
	want := []poolVecForm{poolVecDirect, poolVecDirect, poolVecFlat, poolVecFlat, poolVecDirect, poolVecDirect,
		poolVecFlat, poolVecFlat, poolVecFlat, poolVecFlat, poolVecDirect, poolVecDirect, poolVecDirect, poolVecDirect, poolVecDirect}
	for i, g := range rowsGeometries {
		if got := g.vecForm(16); got != want[i] {
			t.Errorf("geometry %d %+v: %s, want %s", i, g, got, want[i])
		}
	}
	wide := maxPoolRows{h: 112, w: 112, oh: 56, ow: 56, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1, ph: 1, pw: 1, dt: ir.Float32}
	if got := wide.vecForm(16); got != poolVecNone {
		t.Errorf("resnet18's 112 -> 56: %s, want none", got)
	}
	// 40x30 by 3x3: 75 vectors of 16 by 9 taps fit the flat form's
	// loads, 150 of 8 do not (and AVX2 has no direct form).
	big := maxPoolRows{h: 40, w: 30, oh: 40, ow: 30, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, ph: 1, pw: 1, dt: ir.Float32}
	if a, b := big.vecForm(16), big.vecForm(8); a != poolVecFlat || b != poolVecNone {
		t.Errorf("40x30: %s with 16 lanes, %s with 8; want flat, none", a, b)
	}
	// A window 1000 columns wide over 1031: 2 x 1000 loads per row would
	// be straight-line code beyond the bound.
	wideWindow := maxPoolRows{h: 4, w: 1031, oh: 4, ow: 32, kh: 1, kw: 1000, sh: 1, sw: 1, dh: 1, dw: 1, dt: ir.Float32}
	if got := wideWindow.vecForm(16); got != poolVecNone {
		t.Errorf("1x1000 window: %s, want none", got)
	}
	// A window 2^31 - 1 rows tall by 2^12 columns over 2^19 - 1 output rows
	// of 4096: the product of the sizes would overflow int64 (and wrap to
	// a negative count of loads).
	tall := maxPoolRows{h: 1, w: 4096, oh: 1<<19 - 1, ow: 4096, kh: 1<<31 - 1, kw: 1 << 12, sh: 1, sw: 1, dh: 1, dw: 1, ph: 1<<30 - 1, pw: 2047, dt: ir.Float32}
	if got := tall.vecForm(16); got != poolVecNone {
		t.Errorf("2^31 x 2^12 window: %s, want none", got)
	}
	if r := (maxPoolRows{h: 112, w: 112, oh: 56, ow: 56, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1, ph: 1, pw: 1}); !r.bytesFits() || r.bytesVecs() != 2 {
		t.Errorf("112 -> 56: bytes form %v in %d vectors, want two", r.bytesFits(), r.bytesVecs())
	}
	if got := rowsGeometries[10].vecForm(8); got != poolVecNone {
		t.Errorf("28 -> 14 stride 2 with 8 lanes: %s, want none", got)
	}
	// The bytes form: an output row's columns within 4 vectors of 64
	// lanes (resnet18's 112 -> 56 in two).
	for i, want := range []bool{true, true, true, true, true, true, true, true, true, true, true, true, true, true, true} {
		if got := rowsGeometries[i].bytesFits(); got != want {
			t.Errorf("geometry %d: bytes form %v, want %v", i, got, want)
		}
	}
	for _, g := range []maxPoolRows{
		{h: 300, w: 300, oh: 150, ow: 150, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1, ph: 1, pw: 1}, // 299 lanes: 5 vectors
		{h: 9, w: 270, oh: 9, ow: 257, kh: 1, kw: 6, sh: 1, sw: 1, dh: 1, dw: 1},                   // 257 columns
		{h: 9, w: 30, oh: 3, ow: 10, kh: 3, kw: 3, sh: 3, sw: 3, dh: 1, dw: 1},                     // stride 3
		{h: 4, w: 1031, oh: 4, ow: 32, kh: 1, kw: 1000, sh: 1, sw: 1, dh: 1, dw: 1},                // 1000 tap columns
	} {
		if g.bytesFits() {
			t.Errorf("%+v: bytes form, want none", g)
		}
	}
	for _, c := range []struct {
		mcpu  string
		dt    ir.DType
		want  poolVecForm
		lanes int64
	}{
		{"skylake-avx512", ir.Float32, poolVecFlat, 16},
		{"haswell", ir.Float32, poolVecFlat, 8},
		{"sandybridge", ir.Float32, poolVecNone, 0},
		{"x86-64", ir.Float32, poolVecNone, 0},
		{"cortex-a72", ir.Float32, poolVecNone, 0},
		{"skylake-avx512", ir.Uint8, poolVecBytes, 64},
		{"skylake-avx512", ir.Int8, poolVecBytes, 64},
		{"haswell", ir.Uint8, poolVecNone, 0},
		{"cortex-a72", ir.Int8, poolVecNone, 0},
	} {
		p, err := targets.ResolveCPU(c.mcpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		g := rowsGeometries[6]
		g.dt = c.dt
		if got, lanes := poolVecFor(p, &g); got != c.want || lanes != c.lanes {
			t.Errorf("%s, %s: %s with %d lanes, want %s with %d", c.mcpu, c.dt, got, lanes, c.want, c.lanes)
		}
	}
}

// TestMaxPoolRowsMatchesEval compiles the rows kernel for each geometry
// and requires its C to give Eval's bits (math.Max from -Inf over the
// window's taps inside the plane): on plain values (the plain max
// throughout), and with -0 beside +0, NaN, +Inf beside NaN, -Inf, +Inf
// and -Inf in one column (the NaN check's false alarm) and -0 as the max
// of negative values, placed in the first row, a middle row and the
// last row (the plane is pooled again with the exact max), and for int8
// and uint8 planes.
func TestMaxPoolRowsMatchesEval(t *testing.T) {
	cc := testenv.CC(t)
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	negZero := math.Float32frombits(0x80000000)
	specials := map[string]func(x []float32, w, row int){
		"plain": func([]float32, int, int) {},
		"signed_zero": func(x []float32, w, row int) {
			for j := range w {
				x[row*w+j] = negZero
			}
			x[row*w+1], x[row*w+4] = 0, 0
		},
		"nan":     func(x []float32, w, row int) { x[row*w+2] = nan },
		"inf_nan": func(x []float32, w, row int) { x[row*w+1], x[row*w+2] = inf, nan },
		"neg_inf": func(x []float32, w, row int) { x[row*w], x[row*w+1] = float32(math.Inf(-1)), float32(math.Inf(-1)) },
		// +Inf and -Inf in one column: its sum is NaN without a NaN tap.
		"inf_neg_inf": func(x []float32, w, row int) {
			x[row*w+2] = inf
			x[((row+1)%(len(x)/w))*w+2] = float32(math.Inf(-1))
		},
		// Negative values and a row of -0: the exact max is -0 wherever a
		// window reads that row.
		"max_neg_zero": func(x []float32, w, row int) {
			for i := range x {
				x[i] = -float32(math.Abs(float64(x[i])))
			}
			for j := range w {
				x[row*w+j] = negZero
			}
		},
	}
	for gi, g := range rowsGeometries {
		g.dt = ir.Float32
		if !g.fit() {
			t.Fatalf("geometry %d does not fit: %+v", gi, g)
		}
		ks := []*maxPoolRowsKernel{newMaxPoolRowsKernel(&g)}
		for _, lanes := range []int64{16, 8} {
			if vg := g; vg.vecForm(lanes) != poolVecNone {
				vg.vec, vg.vlanes = vg.vecForm(lanes), lanes
				ks = append(ks, newMaxPoolRowsKernel(&vg))
			}
		}
		k := ks[0]
		rng := rand.New(rand.NewSource(int64(gi)))
		// Every case's plane in one program run.
		var in []byte
		var names []string
		var want []float32
		for _, name := range []string{"plain", "signed_zero", "nan", "inf_nan", "neg_inf", "inf_neg_inf", "max_neg_zero"} {
			for _, row := range []int{0, int(g.h) / 2, int(g.h) - 1} {
				x := make(floatMem, g.h*g.w)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				specials[name](x, int(g.w), row)
				y := make(floatMem, g.oh*g.ow)
				if err := k.Eval([]tir.KernelArg{{Mem: x}, {Mem: y}}); err != nil {
					t.Fatal(err)
				}
				for _, v := range x {
					in = binary.LittleEndian.AppendUint32(in, math.Float32bits(v))
				}
				names = append(names, fmt.Sprintf("%s in row %d", name, row))
				want = append(want, y...)
				if name == "plain" {
					break // one placement is enough without a special value
				}
			}
		}
		for _, k := range ks {
			for _, flags := range [][]string{nil, {"-march=native"}} {
				t.Run(fmt.Sprintf("%d_%s%d%v", gi, k.r.vec, k.r.vlanes, flags), func(t *testing.T) {
					if need := map[int64]string{16: "avx512f", 8: "avx2"}[k.r.vlanes]; need != "" && flags != nil && !hostHas(t, need) {
						t.Logf("this machine lacks %s: the vector form is compiled out", need)
					}
					raw := runRowsKernel(t, cc, k, in, len(names), flags)
					per := len(want) / len(names)
					for j := range want {
						g, w := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:])), want[j]
						if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
							t.Errorf("%s: y[%d] = %g (%#x), Eval %g (%#x)", names[j/per], j%per, g, math.Float32bits(g), w, math.Float32bits(w))
						}
					}
				})
			}
		}
		for _, dt := range []ir.DType{ir.Int8, ir.Uint8} {
			g.dt = dt
			if !g.fit() {
				t.Fatalf("geometry %d does not fit for %s", gi, dt)
			}
			k := newMaxPoolRowsKernel(&g)
			ks := []*maxPoolRowsKernel{k}
			if vg := g; vg.bytesFits() {
				vg.vec, vg.vlanes = poolVecBytes, 64
				ks = append(ks, newMaxPoolRowsKernel(&vg))
			}
			in := make([]byte, g.h*g.w)
			rng.Read(in)
			if gi%2 == 1 {
				// The plane's lowest and highest values, so that padding
				// read as anything but the lowest shows.
				for i := range in {
					in[i] = []byte{0x00, 0x80, 0x7f, 0xff}[rng.Intn(4)]
				}
			}
			want := evalBytesPlane(t, k, in)
			for _, k := range ks {
				for _, flags := range [][]string{nil, {"-march=native"}} {
					t.Run(fmt.Sprintf("%d_%s_%s%v", gi, dt, k.r.vec, flags), func(t *testing.T) {
						if k.r.vec == poolVecBytes && flags != nil && !hostHas(t, "avx512bw") {
							t.Logf("this machine lacks avx512bw: the bytes form is compiled out")
						}
						sameBytes(t, runRowsKernel(t, cc, k, in, 1, flags), want)
					})
				}
			}
		}
	}
}

// runRowsKernel compiles k into a program with the code generator's
// flags that runs it on each of the planes in in, and returns the output
// planes.
func runRowsKernel(t *testing.T, cc string, k *maxPoolRowsKernel, in []byte, planes int, flags []string) []byte {
	t.Helper()
	typ, _ := k.r.cType()
	r := k.r
	size := int64(r.dt.Size())
	src := kernelProgram(k, fmt.Sprintf(`
int main(void) {
  static %s x[%d][%d], y[%d][%d];
  FILE* f = fopen("in.bin", "rb");
  if (!f || fread(x, sizeof x, 1, f) != 1) return 2;
  fclose(f);
  for (int i = 0; i < %d; ++i) %s(x[i], y[i]);
  f = fopen("out.bin", "wb");
  if (!f || fwrite(y, sizeof y, 1, f) != 1) return 3;
  return fclose(f) != 0;
}
`, typ, planes, r.h*r.w, planes, r.oh*r.ow, planes, k.Symbol()))
	raw := runKernelProgram(t, cc, src, in, append([]string{"-O3", "-fno-trapping-math"}, flags...))
	if int64(len(raw)) != int64(planes)*r.oh*r.ow*size {
		t.Fatalf("%d output bytes, want %d", len(raw), int64(planes)*r.oh*r.ow*size)
	}
	return raw
}

// TestMaxPoolRowsSelected checks that float32 and 8-bit max pools take the
// rows form, and that a row too wide for its stack buffer takes the tile
// form instead.
func TestMaxPoolRowsSelected(t *testing.T) {
	for _, c := range []struct {
		dt   ir.DType
		w    int64
		want string
	}{
		{ir.Float32, 112, "nn.max_pool2d.rows.cpu"},
		{ir.Uint8, 112, "nn.max_pool2d.rows.cpu"},
		{ir.Float32, poolRowsMaxBuffer, "nn.max_pool2d.cpu"},
	} {
		attrs, err := op.MaxPool2D.MakeAttrs(ir.Attrs{"pool_size": nnInts(2, 2), "strides": nnInts(2, 2)})
		if err != nil {
			t.Fatal(err)
		}
		call := &strategy.Call{Op: op.MaxPool2D, Attrs: attrs, ArgTypes: []ir.Type{ir.NewTensorType(c.dt, ir.Shape{1, 2, 4, c.w})},
			OutType: ir.NewTensorType(c.dt, ir.Shape{1, 2, 2, c.w / 2}), Target: topitest.HostTarget()}
		impl, err := strategy.Default.Select(call)
		if err != nil {
			t.Fatal(err)
		}
		if impl.Name != c.want {
			t.Errorf("%s, width %d: selected %s, want %s", c.dt, c.w, impl.Name, c.want)
		}
	}
}

// hostHas reports whether this machine is x86-64 with CPU feature f.
func hostHas(t *testing.T, f string) bool {
	t.Helper()
	host, err := targets.ResolveCPU("native", nil)
	if err != nil {
		t.Fatal(err)
	}
	return host.Arch == targets.X86_64 && host.Has(f)
}

// TestMaxPoolBytesWide runs the bytes form (pool_vec.go) on 8-bit planes
// whose output rows take several vectors (resnet18's 112 -> 56 in two,
// stride 1 over 100 and 200 columns, dilation and right padding) against
// Eval, built for this machine and without AVX-512BW (the rows form).
func TestMaxPoolBytesWide(t *testing.T) {
	cc := testenv.CC(t)
	for gi, g := range []maxPoolRows{
		{h: 112, w: 112, oh: 56, ow: 56, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1, ph: 1, pw: 1},
		{h: 7, w: 100, oh: 7, ow: 100, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, ph: 1, pw: 1},
		{h: 9, w: 200, oh: 5, ow: 196, kh: 3, kw: 3, sh: 2, sw: 1, dh: 1, dw: 2},
		{h: 10, w: 130, oh: 5, ow: 65, kh: 2, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1, pw: 1},
	} {
		for _, dt := range []ir.DType{ir.Int8, ir.Uint8} {
			g.dt = dt
			if !g.fit() || !g.bytesFits() {
				t.Fatalf("geometry %d: fits %v, bytes form %v", gi, g.fit(), g.bytesFits())
			}
			g.vec, g.vlanes = poolVecBytes, 64
			k := newMaxPoolRowsKernel(&g)
			rng := rand.New(rand.NewSource(int64(gi)))
			in := make([]byte, g.h*g.w)
			for i := range in {
				in[i] = []byte{0x00, 0x80, 0x7f, 0xff, byte(rng.Intn(256))}[rng.Intn(5)]
			}
			want := evalBytesPlane(t, k, in)
			for _, flags := range [][]string{nil, {"-march=native"}} {
				t.Run(fmt.Sprintf("%d_%s%v", gi, dt, flags), func(t *testing.T) {
					if flags != nil && !hostHas(t, "avx512bw") {
						t.Logf("this machine lacks avx512bw: the bytes form is compiled out")
					}
					sameBytes(t, runRowsKernel(t, cc, k, in, 1, flags), want)
				})
			}
		}
	}
}

// evalBytesPlane is Eval's output for the 8-bit plane in (int8 or uint8,
// k's type), as bytes.
func evalBytesPlane(t *testing.T, k *maxPoolRowsKernel, in []byte) []byte {
	t.Helper()
	n := k.r.oh * k.r.ow
	if k.r.dt == ir.Uint8 {
		want := make(uint8Mem, n)
		if err := k.Eval([]tir.KernelArg{{Mem: uint8Mem(in)}, {Mem: want}}); err != nil {
			t.Fatal(err)
		}
		return want
	}
	x, want := make(int8Mem, len(in)), make(int8Mem, n)
	for i, b := range in {
		x[i] = int8(b)
	}
	if err := k.Eval([]tir.KernelArg{{Mem: x}, {Mem: want}}); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, n)
	for i, v := range want {
		out[i] = byte(v)
	}
	return out
}

// sameBytes requires the kernel's output raw to be want, byte for byte.
func sameBytes(t *testing.T, raw, want []byte) {
	t.Helper()
	if len(raw) != len(want) {
		t.Fatalf("%d output bytes, want %d", len(raw), len(want))
	}
	for j := range raw {
		if raw[j] != want[j] {
			t.Fatalf("y[%d] = %d, Eval %d", j, raw[j], want[j])
		}
	}
}
