package targets

import (
	"reflect"
	"strings"
	"testing"
)

func TestResolveCPUTable(t *testing.T) {
	for _, k := range KnownCPUs() {
		c, err := ResolveCPU(k[0], nil)
		if err != nil {
			t.Fatalf("%s: %v", k[0], err)
		}
		if c.VectorBits == 0 || c.VectorRegs == 0 || c.L1D == 0 {
			t.Errorf("%s: %s: no vector shape or caches", k[0], c)
		}
		// Every feature comes with what it needs.
		for _, f := range c.Features {
			for _, d := range featureDeps[f] {
				if !c.Has(d) {
					t.Errorf("%s has %s without %s", k[0], f, d)
				}
			}
		}
	}
}

func TestResolveCPUAttrs(t *testing.T) {
	cases := []struct {
		mcpu  string
		mattr []string
		isa   string
		bits  int
		regs  int
		fma   bool
		flags string
	}{
		{"skylake-avx512", nil, "avx512", 512, 32, true, "-march=skylake-avx512"},
		{"skylake-avx512", []string{"-avx512f"}, "avx2", 256, 16, true,
			"-march=skylake-avx512 -mno-avx512bw -mno-avx512cd -mno-avx512dq -mno-avx512f -mno-avx512vl"},
		{"haswell", []string{"-fma"}, "avx2", 256, 16, false, "-march=haswell -mno-fma"},
		{"haswell", []string{"+avx512f"}, "avx512", 512, 32, true, "-march=haswell -mavx512f"},
		{"x86-64", nil, "sse2", 128, 16, false, "-march=x86-64"},
		{"x86-64", []string{"+fma"}, "avx", 256, 16, true, "-march=x86-64 -mavx -mfma -msse3 -msse4.1 -msse4.2 -mssse3"},
		// gcc 12 has no -march=znver4: Zen 3 plus the AVX-512 features,
		// tuned generically (gccTune).
		{"znver4", nil, "avx512", 512, 32, true, "-march=znver3 -mtune=generic -mavx512bf16 -mavx512bw -mavx512cd -mavx512dq -mavx512f -mavx512vl -mavx512vnni"},
		{"znver4", []string{"-avx2"}, "avx", 256, 16, true, "-march=znver3 -mtune=generic -mno-avx2"},
		{"znver5", nil, "avx512", 512, 32, true, "-march=znver3 -mtune=generic -mavx512bf16 -mavx512bw -mavx512cd -mavx512dq -mavx512f -mavx512vl -mavx512vnni -mavxvnni"},
		{"cortex-a72", nil, "neon", 128, 32, true, "-mcpu=cortex-a72"},
		{"cortex-a53", []string{"+dotprod"}, "neon", 128, 32, true, "-mcpu=cortex-a53+dotprod"},
		{"cortex-a76", []string{"-dotprod"}, "neon", 128, 32, true, "-mcpu=cortex-a76+nodotprod"},
		{"armv8-a", nil, "neon", 128, 32, true, "-march=armv8-a"},
	}
	for _, c := range cases {
		p, err := ResolveCPU(c.mcpu, c.mattr)
		if err != nil {
			t.Errorf("%s %v: %v", c.mcpu, c.mattr, err)
			continue
		}
		if p.ISA() != c.isa || p.VectorBits != c.bits || p.VectorRegs != c.regs || p.FMA() != c.fma {
			t.Errorf("%s %v: %s fma=%v, want %s %d-bit %d regs fma=%v", c.mcpu, c.mattr, p, p.FMA(), c.isa, c.bits, c.regs, c.fma)
		}
		if got := strings.Join(p.CFlags(), " "); got != c.flags {
			t.Errorf("%s %v: flags %q, want %q", c.mcpu, c.mattr, got, c.flags)
		}
		if p.Lanes(32) != c.bits/32 {
			t.Errorf("%s: %d float32 lanes", c.mcpu, p.Lanes(32))
		}
	}
}

func TestResolveCPUErrors(t *testing.T) {
	cases := []struct {
		mcpu  string
		mattr []string
		want  string
	}{
		{"pentium9", nil, `-mcpu="pentium9": unknown CPU (known: native, x86-64`},
		{"haswell", []string{"avx2"}, `"avx2": want +FEATURE or -FEATURE`},
		{"haswell", []string{"+avx1024"}, `unknown feature "avx1024"`},
		{"haswell", []string{"+neon"}, `feature "neon" is not a x86_64 feature`},
		{"cortex-a72", []string{"-avx2"}, `feature "avx2" is not a aarch64 feature`},
	}
	for _, c := range cases {
		_, err := ResolveCPU(c.mcpu, c.mattr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: err %v, want %q", c.mcpu, c.mattr, err, c.want)
		}
	}
	// The target constructor refuses them too.
	if _, err := Default.Parse("c -mcpu=pentium9"); err == nil || !strings.Contains(err.Error(), "unknown CPU") {
		t.Errorf("Parse: %v", err)
	}
	if _, err := Default.Parse("c -mattr=-sse9"); err == nil || !strings.Contains(err.Error(), `unknown feature "sse9"`) {
		t.Errorf("Parse: %v", err)
	}
}

func TestTargetProcessor(t *testing.T) {
	tg, err := Default.Parse("c -mcpu=haswell -mattr=-fma")
	if err != nil {
		t.Fatal(err)
	}
	p := tg.Processor()
	if p.Name != "haswell" || p.FMA() || !p.Has("avx2") {
		t.Errorf("processor %s features %v", p, p.Features)
	}
	var nilT *Target
	if p := nilT.Processor(); p.Native || p.Name != baselineCPU() {
		t.Errorf("nil target: %s", p)
	}
	tag, err := Default.Parse("x86-avx2")
	if err != nil {
		t.Fatal(err)
	}
	if p := tag.Processor(); p.ISA() != "avx2" {
		t.Errorf("x86-avx2 tag: %s", p)
	}
}

func TestParseCPUInfo(t *testing.T) {
	x86 := "processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: fpu sse sse2 pni ssse3 sse4_1 sse4_2 avx avx2 fma f16c avx512f avx512bw avx512_vnni\n" +
		"processor\t: 1\nflags\t\t: sse\n"
	c := parseCPUInfo([]byte(x86), "amd64")
	want := []string{"avx", "avx2", "avx512bw", "avx512f", "avx512vnni", "f16c", "fma", "sse", "sse2", "sse3", "sse4.1", "sse4.2", "ssse3"}
	if !reflect.DeepEqual(c.Features, want) || c.Model != "Test CPU" || c.Arch != X86_64 {
		t.Errorf("x86: %v %q %s", c.Features, c.Model, c.Arch)
	}
	if c.HalfRate512 {
		t.Errorf("x86 without vendor and family: HalfRate512")
	}
	// AMD family 25 with AVX-512 is Zen 4 (512-bit operations in two
	// halves); family 26 (Zen 5), or family 25 without AVX-512 (Zen 3),
	// is not.
	zen := func(family, flags string) bool {
		info := "vendor_id\t: AuthenticAMD\ncpu family\t: " + family + "\nflags\t\t: sse sse2 pni ssse3 sse4_1 sse4_2 avx avx2 fma f16c" + flags + "\n"
		return parseCPUInfo([]byte(info), "amd64").HalfRate512
	}
	if !zen("25", " avx512f") || zen("26", " avx512f") || zen("25", "") {
		t.Errorf("HalfRate512: Zen 4 %v, Zen 5 %v, Zen 3 %v", zen("25", " avx512f"), zen("26", " avx512f"), zen("25", ""))
	}
	if p, err := ResolveCPU("znver4", nil); err != nil || !p.HalfRate512 {
		t.Errorf("znver4: HalfRate512 not set (%v)", err)
	}
	if p, err := ResolveCPU("znver5", nil); err != nil || p.HalfRate512 {
		t.Errorf("znver5: HalfRate512 set (%v)", err)
	}
	// FastL2: AMD family 26 with AVX-512 (Zen 5) and the table's znver5;
	// not Zen 4, not an Intel server core.
	fast := func(vendor, family, flags string) bool {
		info := "vendor_id\t: " + vendor + "\ncpu family\t: " + family + "\nflags\t\t: sse sse2 pni ssse3 sse4_1 sse4_2 avx avx2 fma f16c" + flags + "\n"
		return parseCPUInfo([]byte(info), "amd64").FastL2
	}
	if !fast("AuthenticAMD", "26", " avx512f") || fast("AuthenticAMD", "25", " avx512f") || fast("GenuineIntel", "6", " avx512f") || fast("AuthenticAMD", "26", "") {
		t.Errorf("FastL2: Zen 5 %v, Zen 4 %v, Intel %v, Zen 5 without AVX-512 %v", fast("AuthenticAMD", "26", " avx512f"),
			fast("AuthenticAMD", "25", " avx512f"), fast("GenuineIntel", "6", " avx512f"), fast("AuthenticAMD", "26", ""))
	}
	for _, name := range []string{"znver4", "skylake-avx512", "icelake-server", "sapphirerapids", "x86-64-v4"} {
		if p, err := ResolveCPU(name, nil); err != nil || p.FastL2 {
			t.Errorf("%s: FastL2 set (%v)", name, err)
		}
	}
	if p, err := ResolveCPU("znver5", nil); err != nil || !p.FastL2 {
		t.Errorf("znver5: FastL2 not set (%v)", err)
	}
	// fma without avx (a hypervisor hiding avx) is not usable.
	c = parseCPUInfo([]byte("flags : sse sse2 fma\n"), "amd64")
	if c.Has("fma") || !c.Has("sse2") {
		t.Errorf("fma without avx: %v", c.Features)
	}
	arm := "processor\t: 0\nFeatures\t: fp asimd evtstrm aes crc32 asimddp\nCPU part\t: 0xd0b\n"
	c = parseCPUInfo([]byte(arm), "arm64")
	if !reflect.DeepEqual(c.Features, []string{"dotprod", "neon"}) || c.Arch != AArch64 {
		t.Errorf("arm: %v %s", c.Features, c.Arch)
	}
	// Nothing readable: the baseline.
	if c := parseCPUInfo(nil, "amd64"); !reflect.DeepEqual(c.Features, []string{"sse", "sse2"}) {
		t.Errorf("empty: %v", c.Features)
	}
	for s, want := range map[string]int64{"32K": 32 << 10, "1024K": 1 << 20, "32M": 32 << 20, "x": 0, "-1K": 0, "99999999999999M": 0} {
		if got := parseCacheSize(s); got != want {
			t.Errorf("parseCacheSize(%q) = %d, want %d", s, got, want)
		}
	}
}
