package targets

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// x86Flags maps /proc/cpuinfo flag names to kiln's feature names.
var x86Flags = map[string]string{
	"sse": "sse", "sse2": "sse2", "pni": "sse3", "ssse3": "ssse3", "sse4_1": "sse4.1", "sse4_2": "sse4.2",
	"popcnt": "popcnt", "avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c", "bmi1": "bmi", "bmi2": "bmi2",
	"avx_vnni": "avxvnni", "avx512f": "avx512f", "avx512dq": "avx512dq", "avx512cd": "avx512cd",
	"avx512bw": "avx512bw", "avx512vl": "avx512vl", "avx512_vnni": "avx512vnni",
	"avx512_bf16": "avx512bf16", "avx512_fp16": "avx512fp16",
}

// armFlags maps /proc/cpuinfo "Features" names of AArch64 to kiln's.
var armFlags = map[string]string{
	"asimd": "neon", "asimddp": "dotprod", "asimdhp": "fp16", "sve": "sve", "i8mm": "i8mm", "bf16": "bf16",
}

// probeHost describes this machine (cached): features from
// /proc/cpuinfo, caches from /sys. Without them it is the portable
// baseline of the architecture Go runs on.
var probeHost = sync.OnceValue(func() *Processor {
	info, _ := os.ReadFile("/proc/cpuinfo")
	c := parseCPUInfo(info, runtime.GOARCH)
	c.L1D, c.L2, c.L3 = probeCaches("/sys/devices/system/cpu/cpu0/cache")
	if c.L1D == 0 {
		if k, ok := lookupCPU(baselineCPU()); ok {
			c.L1D, c.L2, c.L3 = k.l1d, k.l2, k.l3
		}
	}
	c.VectorBits, c.VectorRegs = vectorShape(c)
	return c
})

// parseCPUInfo reads the first processor of a /proc/cpuinfo text.
func parseCPUInfo(info []byte, goarch string) *Processor {
	c := &Processor{Name: "native", Arch: X86_64, Native: true}
	table := x86Flags
	if goarch == "arm64" {
		c.Arch, table = AArch64, armFlags
	}
	set := map[string]bool{}
	var vendor, family string
	sc := bufio.NewScanner(bytes.NewReader(info))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seenFlags := false
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "model name":
			if c.Model == "" {
				c.Model = val
			}
		case "vendor_id":
			if vendor == "" {
				vendor = val
			}
		case "cpu family":
			if family == "" {
				family = val
			}
		case "flags", "Features":
			if seenFlags {
				continue
			}
			seenFlags = true
			for _, f := range strings.Fields(val) {
				if k, ok := table[f]; ok {
					set[k] = true
				}
			}
		}
	}
	if !seenFlags {
		// No description: the architecture's baseline.
		k, _ := lookupCPU(map[Arch]string{X86_64: "x86-64", AArch64: "armv8-a"}[c.Arch])
		for _, f := range k.features {
			set[f] = true
		}
	}
	// A feature counts only with everything it needs (a hypervisor may
	// hide avx while showing fma).
	for changed := true; changed; {
		changed = false
		for f := range set {
			for _, d := range featureDeps[f] {
				if !set[d] {
					delete(set, f)
					changed = true
				}
			}
		}
	}
	for f := range set {
		c.Features = append(c.Features, f)
	}
	sort.Strings(c.Features)
	// AMD family 25 (0x19) is Zen 3 and Zen 4; those with AVX-512 are
	// Zen 4, whose 512-bit operations are split in two.
	c.HalfRate512 = vendor == "AuthenticAMD" && family == "25" && set["avx512f"]
	// AMD family 26 (0x1a) is Zen 5.
	c.FastL2 = vendor == "AuthenticAMD" && family == "26" && set["avx512f"]
	if c.Model == "" {
		c.Model = "this machine"
	}
	return c
}

// probeCaches reads the data and unified caches of one CPU from a
// /sys/devices/system/cpu/cpuN/cache directory.
func probeCaches(dir string) (l1d, l2, l3 int64) {
	entries, _ := filepath.Glob(filepath.Join(dir, "index*"))
	for _, e := range entries {
		read := func(n string) string {
			b, _ := os.ReadFile(filepath.Join(e, n))
			return strings.TrimSpace(string(b))
		}
		if read("type") == "Instruction" {
			continue
		}
		size := parseCacheSize(read("size"))
		switch read("level") {
		case "1":
			l1d = size
		case "2":
			l2 = size
		case "3":
			l3 = size
		}
	}
	return l1d, l2, l3
}

// parseCacheSize parses "32K", "1024K", "32M" (0 when malformed).
func parseCacheSize(s string) int64 {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > 1<<40/mult {
		return 0
	}
	return n * mult
}
