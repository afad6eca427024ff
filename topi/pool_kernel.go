package topi

import (
	"fmt"
	"math"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tir"
)

// maxPoolKernel computes one channel's tile of max pooling's V stage
// (pool_cpu.go): V[j] = the max of the tile's taps T[j + koff[t]] for
// cols columns, with the float max's rules (Go's math.Max, the
// interpreter's: +Inf wins over everything, then NaN, and +0 over -0).
//
// Those rules cost a dozen vector operations per max where a plain max
// costs one, and gcc does not vectorise a loop that nests them (its
// if-conversion gives up), so a max pool paid one pass over V per tap.
// The rules only matter when an operand is NaN, +Inf or -0; the kernel
// first scans its tile for those (one integer test per element), and
// without them takes the max of all taps in registers in one vectorised
// pass — the same values, since for every other pair of floats the plain
// max a > b ? a : b is math.Max. A tile that holds one of them takes the
// exact pass per tap.
type maxPoolKernel struct {
	koff        []int64
	plane, cols int64
	dt          ir.DType // float32, or an 8-bit integer (plain max, no special values)
	symbol, src string
}

func newMaxPoolKernel(koff []int64, plane, cols int64, dt ir.DType) (*maxPoolKernel, error) {
	maxOff, err := maxTapOffset("max pool kernel", koff)
	if err != nil {
		return nil, err
	}
	if len(koff) == 0 || cols <= 0 || maxOff+cols > plane || plane > math.MaxInt32 {
		return nil, fmt.Errorf("max pool kernel: %d taps up to offset %d over %d columns do not fit a %d-element tile", len(koff), maxOff, cols, plane)
	}
	if dt != ir.Float32 && dt != ir.Uint8 && dt != ir.Int8 {
		return nil, fmt.Errorf("max pool kernel: type %s", dt)
	}
	k := &maxPoolKernel{koff: koff, plane: plane, cols: cols, dt: dt}
	k.symbol, k.src = kernelSymbol("kiln_maxpool_", k.source("KILN_SYMBOL"))
	return k, nil
}

// Symbol implements tir.Kernel.
func (k *maxPoolKernel) Symbol() string { return k.symbol }

// Includes implements tir.Kernel.
func (k *maxPoolKernel) Includes() []string { return []string{"<math.h>", "<string.h>"} }

// Source implements tir.Kernel.
func (k *maxPoolKernel) Source() string { return k.src }

func (k *maxPoolKernel) source(sym string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("/* Max pooling, %d taps over %d columns of a %d-element tile. */\n", len(k.koff), k.cols, k.plane)
	if k.dt != ir.Float32 {
		// Integers have no special values: the max of all taps in one
		// vectorised pass.
		t := map[ir.DType]string{ir.Uint8: "uint8_t", ir.Int8: "int8_t"}[k.dt]
		p("static void %s(%s* restrict v, const %s* restrict t) {\n", sym, t, t)
		p("  for (int32_t j = 0; j < %d; ++j) {\n", k.cols)
		p("    %s m = t[j + %d];\n", t, k.koff[0])
		for _, o := range k.koff[1:] {
			p("    m = t[j + %d] > m ? t[j + %d] : m;\n", o, o)
		}
		p("    v[j] = m;\n  }\n}\n")
		return b.String()
	}
	writeExactMax(p, sym)
	p("static void %s(float* restrict v, const float* restrict t) {\n", sym)
	p("  uint32_t odd = 0;\n")
	p("  for (int32_t i = 0; i < %d; ++i) {\n", k.plane)
	p("    uint32_t u;\n    memcpy(&u, t + i, sizeof u);\n")
	p("    odd |= (uint32_t)((u & 0x7fffffffu) > 0x7f800000u) | (uint32_t)(u == 0x7f800000u) | (uint32_t)(u == 0x80000000u);\n  }\n")
	p("  if (odd == 0) {\n")
	p("    for (int32_t j = 0; j < %d; ++j) {\n", k.cols)
	vals := make([]string, len(k.koff))
	for i, o := range k.koff {
		vals[i] = fmt.Sprintf("t[j + %d]", o)
	}
	n := 0
	for len(vals) > 1 {
		var next []string
		for i := 0; i+1 < len(vals); i += 2 {
			m := fmt.Sprintf("m%d", n)
			n++
			p("      const float %s = %s > %s ? %s : %s;\n", m, vals[i], vals[i+1], vals[i], vals[i+1])
			next = append(next, m)
		}
		if len(vals)%2 == 1 {
			next = append(next, vals[len(vals)-1])
		}
		vals = next
	}
	p("      v[j] = %s;\n    }\n    return;\n  }\n", vals[0])
	p("  for (int32_t j = 0; j < %d; ++j) v[j] = t[j + %d];\n", k.cols, k.koff[0])
	for _, o := range k.koff[1:] {
		p("  for (int32_t j = 0; j < %d; ++j) v[j] = %s_max(v[j], t[j + %d]);\n", k.cols, sym, o)
	}
	p("}\n")
	return b.String()
}

// writeExactMax writes SYM_max(a, b), math.Max's rules in C: +Inf wins
// over everything, then NaN, and +0 over -0.
func writeExactMax(p func(string, ...any), sym string) {
	p("static inline float %s_max(float a, float b) {\n", sym)
	p("  float m = a > b ? a : b;\n")
	p("  m = ((a == 0) & (b == 0)) ? a + b : m;\n")
	p("  m = ((a != a) | (b != b)) ? NAN : m;\n")
	p("  return ((a == INFINITY) | (b == INFINITY)) ? INFINITY : m;\n}\n")
}

// Eval implements tir.Kernel: math.Max over the taps, in tap order.
func (k *maxPoolKernel) Eval(args []tir.KernelArg) error {
	if len(args) != 2 {
		return fmt.Errorf("max pool kernel: want 2 pointers, got %d arguments", len(args))
	}
	vm, voff, err := args[0].Ptr(k.cols)
	if err != nil {
		return fmt.Errorf("max pool kernel: output: %v", err)
	}
	tm, toff, err := args[1].Ptr(k.plane)
	if err != nil {
		return fmt.Errorf("max pool kernel: tile: %v", err)
	}
	for j := int64(0); j < k.cols; j++ {
		m := tm.Float(toff + j + k.koff[0])
		for _, o := range k.koff[1:] {
			m = math.Max(m, tm.Float(toff+j+o)) // integers: exact in float64
		}
		if k.dt == ir.Float32 {
			m = tir.RoundFloat(m, ir.Float32)
		}
		vm.SetFloat(voff+j, m)
	}
	return nil
}
