package targets

import (
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Arch is a CPU architecture a host target generates code for.
type Arch string

// The architectures kiln's C targets know.
const (
	X86_64  Arch = "x86_64"
	AArch64 Arch = "aarch64"
)

// Processor is the processor a target generates code for, resolved once from the
// target's -mcpu (a row of the known-CPU table, or "native": this machine,
// probed) and -mattr (features added or removed: "+avx2,-avx512f"). The
// schedules read only this description — never the machine that compiles —
// so an artifact compiled for one CPU is tuned for that CPU wherever it
// is compiled.
type Processor struct {
	// Name is the -mcpu value it was resolved from ("znver4",
	// "cortex-a72", "native").
	Name string
	// Model is the processor's name when probed ("AMD EPYC"), else the
	// table's description.
	Model string
	// Arch is the architecture.
	Arch Arch
	// Features is the sorted set of instruction-set features ("avx2",
	// "fma", "avx512f", "neon", "dotprod").
	Features []string
	// VectorBits is the width of the widest float vector register the
	// features allow (128, 256, 512), 0 for none.
	VectorBits int
	// VectorRegs is the number of architectural vector registers at that
	// width (16 for SSE/AVX2, 32 for AVX-512 and AArch64).
	VectorRegs int
	// L1D, L2 and L3 are the data-cache sizes in bytes seen by one core
	// (L3 is the whole shared cache); 0 when unknown.
	L1D, L2, L3 int64
	// HalfRate512 reports that the CPU executes a 512-bit vector
	// operation as two 256-bit halves (AMD Zen 4), so that AVX-512 has
	// the multiply-add throughput of AVX2 and schedules are bound by
	// arithmetic rather than by loads (topi's choice of convolution
	// micro-kernel reads it). Known CPUs set it from the table; a probed
	// one from its vendor and family (AMD family 25 with AVX-512).
	HalfRate512 bool
	// FastL2 reports that the core refills L1 from L2 fast enough for a
	// full-width AVX-512 micro-kernel to stream its operands from L2 at
	// its multiply-add rate (AMD Zen 5). topi's broadcast convolution
	// kernel then takes all input channels in one pass, its weights
	// streamed from L2, and the columns kernel keeps convolutions of
	// fewer than 1024 multiply-adds per output. Without it (Intel's
	// server cores) the broadcast kernel takes its weights in L1-sized
	// passes and is chosen from 512 multiply-adds per output: on an
	// Emerald Rapids core the one-pass kernel ran resnet18's stride-2
	// 256 -> 512 3x3 convolution in 1.30 ms and L1-sized passes in 0.82
	// ms. topi also keeps Winograd's planes within L2 without it
	// (WinogradMaxBytes) and keeps the depthwise lanes form for wide
	// stride-2 outputs only with it (dwRowsFor). Known CPUs set it from
	// the table; a probed one from its vendor and family (AMD family 26
	// with AVX-512).
	FastL2 bool
	// Native reports that the description was probed from this machine.
	Native bool
}

// Has reports whether the CPU has feature f.
func (c *Processor) Has(f string) bool {
	_, ok := slices.BinarySearch(c.Features, f)
	return ok
}

// FMA reports whether the CPU has fused multiply-add on its vectors (x86
// fma; every AArch64 CPU).
func (c *Processor) FMA() bool { return c.Has("fma") || c.Arch == AArch64 && c.Has("neon") }

// Lanes is the number of elements of bits bits (32 for float32) in one
// vector register, at least 1.
func (c *Processor) Lanes(bits int) int {
	if bits <= 0 || c.VectorBits < bits {
		return 1
	}
	return c.VectorBits / bits
}

// ISA names the vector instruction set the schedules target: "avx512",
// "avx2", "avx", "sse2", "neon" or "scalar".
func (c *Processor) ISA() string {
	switch {
	case c.Has("avx512f"):
		return "avx512"
	case c.Has("avx2"):
		return "avx2"
	case c.Has("avx"):
		return "avx"
	case c.Has("sse2"):
		return "sse2"
	case c.Has("neon"):
		return "neon"
	}
	return "scalar"
}

// CFlags returns the C compiler flags that generate code for the CPU: on
// x86-64 -march=NAME followed by -mFEAT/-mno-FEAT for the features -mattr
// changed; on AArch64 -mcpu=NAME+feat+nofeat.
func (c *Processor) CFlags() []string {
	base, ok := lookupCPU(c.Name)
	march := c.Name
	if ok && base.march != "" {
		march = base.march
		base, _ = lookupCPU(base.march)
	}
	// Flags state what -mattr added to or removed from the features the
	// compiler assumes for -march: the table's, or for native the
	// machine's own (the compiler probes it too).
	var ref []string
	switch {
	case c.Name == "native":
		ref = probeHost().Features
	case ok:
		ref = base.features
	}
	var added, removed []string
	if c.Name == "native" || ok {
		for _, f := range c.Features {
			if !slices.Contains(ref, f) {
				added = append(added, f)
			}
		}
		for _, f := range ref {
			if !c.Has(f) {
				removed = append(removed, f)
			}
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	if c.Arch == AArch64 {
		s := "-mcpu=" + march
		if strings.HasPrefix(march, "armv") {
			s = "-march=" + march
		}
		for _, f := range added {
			s += "+" + gccArmFeature(f)
		}
		for _, f := range removed {
			s += "+no" + gccArmFeature(f)
		}
		return []string{s}
	}
	flags := []string{"-march=" + march}
	if t := gccTune(c); t != "" {
		flags = append(flags, "-mtune="+t)
	}
	for _, f := range added {
		flags = append(flags, "-m"+f)
	}
	for _, f := range removed {
		flags = append(flags, "-mno-"+f)
	}
	return flags
}

func gccArmFeature(f string) string {
	if f == "neon" {
		return "simd"
	}
	return f
}

// String is a one-line summary: "znver4 (x86_64, avx512: 512-bit vectors,
// 32 registers; L1d 32 KiB, L2 1 MiB, L3 32 MiB)".
func (c *Processor) String() string {
	var caches []string
	for _, x := range []struct {
		n string
		v int64
	}{{"L1d", c.L1D}, {"L2", c.L2}, {"L3", c.L3}} {
		if x.v > 0 {
			caches = append(caches, x.n+" "+formatBytes(x.v))
		}
	}
	s := fmt.Sprintf("%s (%s, %s: %d-bit vectors, %d registers", c.Name, c.Arch, c.ISA(), c.VectorBits, c.VectorRegs)
	if len(caches) > 0 {
		s += "; " + strings.Join(caches, ", ")
	}
	return s + ")"
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// knownCPU is a row of the CPU table.
type knownCPU struct {
	name, doc   string
	arch        Arch
	features    []string
	l1d, l2, l3 int64
	// march is the C compiler's name for the CPU when it is not name
	// (a CPU newer than Debian's gcc: the closest older one, the
	// missing features given as -m flags).
	march string
}

// gccTune is the -mtune value for processor c, or "" for the compiler's
// default (the -march CPU's own tuning). On AMD Zen processors gcc 12's
// znver tuning folds the vector loads of register-blocked loops into
// every multiply-add (a matrix-product tile then issues 12 loads for 8
// multiply-adds instead of 6) and takes them from 105 to 55 GFLOP/s on a
// Zen 4 core with AVX2 (docs/performance.md); generic tuning keeps the
// loads in registers and is as fast or faster on every operator of
// `kiln bench --ops` there, so Zen processors, named or probed, are
// tuned generically.
func gccTune(c *Processor) string {
	if strings.HasPrefix(c.Name, "znver") || c.Name == "native" && c.Arch == X86_64 && strings.HasPrefix(c.Model, "AMD") {
		return "generic"
	}
	return ""
}

const kib, mib = 1 << 10, 1 << 20

// x86 feature levels, each a superset of the one before.
var (
	x86v1 = []string{"sse", "sse2"}
	x86v2 = append(slices.Clone(x86v1), "sse3", "ssse3", "sse4.1", "sse4.2", "popcnt")
	x86av = append(slices.Clone(x86v2), "avx")
	x86v3 = append(slices.Clone(x86av), "avx2", "fma", "f16c", "bmi", "bmi2")
	x86v4 = append(slices.Clone(x86v3), "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl")
	x86vn = append(slices.Clone(x86v4), "avx512vnni")
	armv8 = []string{"neon"}
	armdp = []string{"neon", "dotprod", "fp16"}
)

func with(base []string, more ...string) []string { return append(slices.Clone(base), more...) }

// cpuTable lists the CPUs -mcpu accepts (besides "native"), with the
// features gcc's -march/-mcpu of the same name enables and typical
// per-core cache sizes.
var cpuTable = []knownCPU{
	{"x86-64", "portable x86-64 (SSE2)", X86_64, x86v1, 32 * kib, 256 * kib, 8 * mib, ""},
	{"x86-64-v2", "x86-64 with SSE4.2", X86_64, x86v2, 32 * kib, 256 * kib, 8 * mib, ""},
	{"x86-64-v3", "x86-64 with AVX2 and FMA", X86_64, x86v3, 32 * kib, 256 * kib, 8 * mib, ""},
	{"x86-64-v4", "x86-64 with AVX-512", X86_64, x86v4, 32 * kib, 1 * mib, 16 * mib, ""},
	{"sandybridge", "Intel Sandy Bridge", X86_64, x86av, 32 * kib, 256 * kib, 8 * mib, ""},
	{"ivybridge", "Intel Ivy Bridge", X86_64, with(x86av, "f16c"), 32 * kib, 256 * kib, 8 * mib, ""},
	{"haswell", "Intel Haswell", X86_64, x86v3, 32 * kib, 256 * kib, 8 * mib, ""},
	{"broadwell", "Intel Broadwell", X86_64, x86v3, 32 * kib, 256 * kib, 8 * mib, ""},
	{"skylake", "Intel Skylake (client)", X86_64, x86v3, 32 * kib, 256 * kib, 8 * mib, ""},
	{"alderlake", "Intel Alder Lake", X86_64, with(x86v3, "avxvnni"), 48 * kib, 1280 * kib, 30 * mib, ""},
	{"skylake-avx512", "Intel Skylake-SP", X86_64, x86v4, 32 * kib, 1 * mib, 32 * mib, ""},
	{"cascadelake", "Intel Cascade Lake", X86_64, x86vn, 32 * kib, 1 * mib, 32 * mib, ""},
	{"cooperlake", "Intel Cooper Lake", X86_64, with(x86vn, "avx512bf16"), 32 * kib, 1 * mib, 32 * mib, ""},
	{"icelake-client", "Intel Ice Lake (client)", X86_64, x86vn, 48 * kib, 512 * kib, 8 * mib, ""},
	{"icelake-server", "Intel Ice Lake-SP", X86_64, x86vn, 48 * kib, 1280 * kib, 48 * mib, ""},
	{"tigerlake", "Intel Tiger Lake", X86_64, x86vn, 48 * kib, 1280 * kib, 12 * mib, ""},
	{"sapphirerapids", "Intel Sapphire Rapids", X86_64, with(x86vn, "avx512bf16", "avx512fp16", "avxvnni"), 48 * kib, 2 * mib, 105 * mib, ""},
	{"znver1", "AMD Zen", X86_64, x86v3, 32 * kib, 512 * kib, 8 * mib, ""},
	{"znver2", "AMD Zen 2", X86_64, x86v3, 32 * kib, 512 * kib, 16 * mib, ""},
	{"znver3", "AMD Zen 3", X86_64, x86v3, 32 * kib, 512 * kib, 32 * mib, ""},
	{"znver4", "AMD Zen 4", X86_64, with(x86vn, "avx512bf16"), 32 * kib, 1 * mib, 32 * mib, "znver3"},
	{"znver5", "AMD Zen 5", X86_64, with(x86vn, "avx512bf16", "avxvnni"), 48 * kib, 1 * mib, 32 * mib, "znver3"},
	{"armv8-a", "portable 64-bit Arm (NEON)", AArch64, armv8, 32 * kib, 512 * kib, 0, ""},
	{"cortex-a53", "Arm Cortex-A53", AArch64, armv8, 32 * kib, 512 * kib, 0, ""},
	{"cortex-a55", "Arm Cortex-A55", AArch64, armdp, 32 * kib, 256 * kib, 2 * mib, ""},
	{"cortex-a57", "Arm Cortex-A57", AArch64, armv8, 32 * kib, 2 * mib, 0, ""},
	{"cortex-a72", "Arm Cortex-A72", AArch64, armv8, 32 * kib, 1 * mib, 0, ""},
	{"cortex-a73", "Arm Cortex-A73", AArch64, armv8, 64 * kib, 1 * mib, 0, ""},
	{"cortex-a76", "Arm Cortex-A76", AArch64, armdp, 64 * kib, 512 * kib, 4 * mib, ""},
	{"cortex-a78", "Arm Cortex-A78", AArch64, armdp, 64 * kib, 512 * kib, 4 * mib, ""},
	{"neoverse-n1", "Arm Neoverse N1", AArch64, armdp, 64 * kib, 1 * mib, 32 * mib, ""},
	{"neoverse-v1", "Arm Neoverse V1", AArch64, with(armdp, "sve", "i8mm", "bf16"), 64 * kib, 1 * mib, 32 * mib, ""},
	{"neoverse-n2", "Arm Neoverse N2", AArch64, with(armdp, "sve", "i8mm", "bf16"), 64 * kib, 1 * mib, 32 * mib, ""},
}

// halfRate512CPUs are the known CPUs whose 512-bit operations run as two
// 256-bit halves (Processor.HalfRate512).
var halfRate512CPUs = map[string]bool{"znver4": true}

// fastL2CPUs are the known CPUs whose L2 feeds full-width AVX-512
// kernels at their multiply-add rate (Processor.FastL2).
var fastL2CPUs = map[string]bool{"znver5": true}

// featureDeps says which features each feature needs: adding a feature
// adds what it needs, removing one removes what needs it (as gcc's -m and
// -mno- flags do).
var featureDeps = map[string][]string{
	"sse2": {"sse"}, "sse3": {"sse2"}, "ssse3": {"sse3"}, "sse4.1": {"ssse3"}, "sse4.2": {"sse4.1"},
	"popcnt": nil, "bmi": nil, "bmi2": nil,
	"avx": {"sse4.2"}, "avx2": {"avx"}, "fma": {"avx"}, "f16c": {"avx"}, "avxvnni": {"avx2"},
	"avx512f": {"avx2", "fma", "f16c"}, "avx512dq": {"avx512f"}, "avx512cd": {"avx512f"},
	"avx512bw": {"avx512f"}, "avx512vl": {"avx512f"}, "avx512vnni": {"avx512f"},
	"avx512bf16": {"avx512bw"}, "avx512fp16": {"avx512bw"},
	"sse": nil, "neon": nil, "dotprod": {"neon"}, "fp16": {"neon"}, "sve": {"neon"},
	"i8mm": {"neon"}, "bf16": {"neon"},
}

// featureArch is the architecture each feature belongs to.
func featureArch(f string) Arch {
	switch f {
	case "neon", "dotprod", "fp16", "sve", "i8mm", "bf16":
		return AArch64
	}
	return X86_64
}

func lookupCPU(name string) (knownCPU, bool) {
	for _, k := range cpuTable {
		if k.name == name {
			return k, true
		}
	}
	return knownCPU{}, false
}

// KnownCPUs lists the -mcpu values of the CPU table (without "native"),
// each with a short description.
func KnownCPUs() [][2]string {
	out := make([][2]string, len(cpuTable))
	for i, k := range cpuTable {
		out[i] = [2]string{k.name, k.doc}
	}
	return out
}

// KnownFeatures lists the feature names -mattr accepts.
func KnownFeatures() []string {
	out := make([]string, 0, len(featureDeps))
	for f := range featureDeps {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

var cpuCache sync.Map // key mcpu+"\x00"+mattr -> *Processor

// ResolveCPU resolves -mcpu and -mattr into a CPU description. mcpu is a
// name of the CPU table or "native" (probe this machine); mattr lists
// features, each "+name" (add, with what it needs) or "-name" (remove, with
// what needs it), applied in order. Unknown CPUs, unknown features and
// features of another architecture are errors. Results are cached.
func ResolveCPU(mcpu string, mattr []string) (*Processor, error) {
	key := mcpu + "\x00" + strings.Join(mattr, ",")
	if c, ok := cpuCache.Load(key); ok {
		return c.(*Processor), nil
	}
	var c Processor
	if mcpu == "native" {
		p := probeHost()
		c = *p
		c.Features = slices.Clone(p.Features)
	} else {
		k, ok := lookupCPU(mcpu)
		if !ok {
			names := make([]string, len(cpuTable))
			for i, k := range cpuTable {
				names[i] = k.name
			}
			return nil, fmt.Errorf("-mcpu=%q: unknown CPU (known: native, %s)", mcpu, strings.Join(names, ", "))
		}
		c = Processor{Name: k.name, Model: k.doc, Arch: k.arch, Features: slices.Clone(k.features), L1D: k.l1d, L2: k.l2, L3: k.l3,
			HalfRate512: halfRate512CPUs[k.name], FastL2: fastL2CPUs[k.name]}
	}
	set := map[string]bool{}
	for _, f := range c.Features {
		set[f] = true
	}
	for _, a := range mattr {
		a = strings.TrimSpace(a)
		if len(a) < 2 || (a[0] != '+' && a[0] != '-') {
			return nil, fmt.Errorf("-mattr: %q: want +FEATURE or -FEATURE", a)
		}
		f := a[1:]
		if _, ok := featureDeps[f]; !ok {
			return nil, fmt.Errorf("-mattr: unknown feature %q (known: %s)", f, strings.Join(KnownFeatures(), ", "))
		}
		if featureArch(f) != c.Arch {
			return nil, fmt.Errorf("-mattr: feature %q is not a %s feature (-mcpu=%s)", f, c.Arch, mcpu)
		}
		if a[0] == '+' {
			addFeature(set, f)
		} else {
			removeFeature(set, f)
		}
	}
	c.Features = c.Features[:0]
	for f := range set {
		c.Features = append(c.Features, f)
	}
	sort.Strings(c.Features)
	c.VectorBits, c.VectorRegs = vectorShape(&c)
	cp := &c
	v, _ := cpuCache.LoadOrStore(key, cp)
	return v.(*Processor), nil
}

func addFeature(set map[string]bool, f string) {
	if set[f] {
		return
	}
	set[f] = true
	for _, d := range featureDeps[f] {
		addFeature(set, d)
	}
}

func removeFeature(set map[string]bool, f string) {
	if !set[f] {
		return
	}
	delete(set, f)
	for g, deps := range featureDeps {
		if slices.Contains(deps, f) {
			removeFeature(set, g)
		}
	}
}

func vectorShape(c *Processor) (bits, regs int) {
	switch {
	case c.Arch == AArch64 && c.Has("neon"):
		return 128, 32
	case c.Has("avx512f"):
		return 512, 32
	case c.Has("avx"):
		return 256, 16
	case c.Has("sse2"):
		return 128, 16
	}
	if c.Arch == AArch64 {
		return 0, 32
	}
	return 0, 16
}

// Processor returns the target's resolved CPU description: from its -mcpu and
// -mattr options, or, for a kind without them, its host's CPU, else this
// machine's. A nil target, or options that do not resolve (New refuses
// them, so only hand-built targets can have them), give the portable
// baseline of this machine's architecture.
func (t *Target) Processor() *Processor {
	for u := t; u != nil; u = u.Host {
		if u.Kind.Option("mcpu") == nil {
			continue
		}
		mcpu := u.Str("mcpu")
		if mcpu == "" {
			mcpu = "native"
		}
		if c, err := ResolveCPU(mcpu, u.Strings("mattr")); err == nil {
			return c
		}
		break
	}
	if t != nil && t.Host == nil && t.Kind.Option("mcpu") == nil {
		c, _ := ResolveCPU("native", nil)
		return c
	}
	c, _ := ResolveCPU(baselineCPU(), nil)
	return c
}

// baselineCPU is the portable CPU of this machine's architecture.
func baselineCPU() string {
	if runtime.GOARCH == "arm64" {
		return "armv8-a"
	}
	return "x86-64"
}

// checkCPU validates a target's -mcpu and -mattr (New calls it for kinds
// that have an mcpu option).
func checkCPU(t *Target) error {
	if t.Kind.Option("mcpu") == nil {
		return nil
	}
	mcpu := t.Str("mcpu")
	if mcpu == "" {
		mcpu = "native"
	}
	_, err := ResolveCPU(mcpu, t.Strings("mattr"))
	return err
}
