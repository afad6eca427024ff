package opsuite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// peakSource is a C program measuring the float32 multiply-add rate of one
// core: 12 independent vector accumulators (enough to cover the latency
// of two FMA pipes on every current CPU, and few enough for 16 registers)
// updated in a loop whose length doubles until it runs for 0.2 s. It
// prints FLOP/s (a multiply-add counts two).
const peakSource = `#include <stdio.h>
#define REG(v) BARRIER
#include <time.h>
typedef float vf __attribute__((vector_size(LANES * 4)));
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
int main(void) {
  volatile float vb = 0.999999f, vc = 1e-6f;
  vf b, c, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11;
  for (int l = 0; l < LANES; l++) { b[l] = vb; c[l] = vc; }
  a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = a9 = a10 = a11 = c;
  for (long n = 1024;; n *= 2) {
    double t0 = now();
    for (long i = 0; i < n; i++) {
      a0 = a0 * b + c; a1 = a1 * b + c; a2 = a2 * b + c; a3 = a3 * b + c;
      a4 = a4 * b + c; a5 = a5 * b + c; a6 = a6 * b + c; a7 = a7 * b + c;
      a8 = a8 * b + c; a9 = a9 * b + c; a10 = a10 * b + c; a11 = a11 * b + c;
      __asm__ volatile("" : REG(a0), REG(a1), REG(a2), REG(a3), REG(a4), REG(a5));
      __asm__ volatile("" : REG(a6), REG(a7), REG(a8), REG(a9), REG(a10), REG(a11));
    }
    double dt = now() - t0;
    if (dt > 0.2) {
      vf s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
      float sum = 0;
      for (int l = 0; l < LANES; l++) sum += s[l];
      printf("%.6e %g\n", 2.0 * 12 * LANES * (double)n / dt, (double)sum);
      return 0;
    }
  }
}
`

// Peak measures one core's float32 peak FLOP/s for code built with cc
// and cflags (the target's processor flags), with vectors of lanes
// floats: it compiles and runs a small C program of independent
// multiply-adds. It only works for a processor this machine can run.
func Peak(ctx context.Context, cc string, cflags []string, lanes int) (float64, error) {
	if lanes < 1 {
		lanes = 1
	}
	dir, err := os.MkdirTemp("", "kiln-peak-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	// The empty asm statements keep the accumulators in registers (the
	// compiler may not merge or drop the multiply-adds): BARRIER is this
	// machine's register constraint.
	src := strings.ReplaceAll(peakSource, "LANES", strconv.Itoa(lanes))
	src = strings.ReplaceAll(src, "BARRIER", barrierConstraint())
	if err := os.WriteFile(filepath.Join(dir, "peak.c"), []byte(src), 0o644); err != nil {
		return 0, err
	}
	command := strings.Fields(cc)
	if len(command) == 0 {
		command = []string{"cc"}
	}
	args := append(append(command[1:], "-O2", "-ffp-contract=fast"), cflags...)
	args = append(args, "peak.c", "-o", "peak")
	cmd := exec.CommandContext(ctx, command[0], args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("opsuite: building the peak kernel: %v: %s", err, strings.TrimSpace(string(out)))
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "peak")).Output()
	if err != nil {
		return 0, fmt.Errorf("opsuite: running the peak kernel: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return 0, fmt.Errorf("opsuite: the peak kernel printed nothing")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("opsuite: the peak kernel printed %q", f[0])
	}
	return v, nil
}
