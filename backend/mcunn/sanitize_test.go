package mcunn

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
)

// sanitizeMain calls every kiln_nn kernel on values at the ends of their
// ranges (-128 inputs with the largest offsets, extreme multipliers and
// shifts, a hostile softmax table, padded and dilated windows), each
// buffer exactly as large as the kernel may touch, so that
// AddressSanitizer sees any read or write past it and
// UndefinedBehaviorSanitizer any overflow or bad shift.
const sanitizeMain = `#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kiln_nn.h"

static void *xalloc(size_t n) { void *p = malloc(n ? n : 1); if (!p) exit(3); return p; }
static int8_t *bytes(size_t n, int v) { int8_t *p = xalloc(n); for (size_t i = 0; i < n; i++) p[i] = (int8_t)(i % 2 ? v : -v - 1); return p; }
static int32_t *words(size_t n, int32_t v) { int32_t *p = xalloc(n * 4); for (size_t i = 0; i < n; i++) p[i] = i % 2 ? v : -v - 1; return p; }

int main(void) {
  const kiln_nn_activation act = {-128, 127};
  const int32_t mult[8] = {INT32_MAX, INT32_MIN, 1, -1, 1 << 30, 3, INT32_MAX, 7};
  kiln_nn_quant_params q = {mult, 1, 62};
  /* Convolution: grouped, packed weight (block 4), padding, stride, dilation. */
  {
    kiln_nn_dims in = {2, 6, 7, 5}, fd = {8, 3, 3, 2}, out = {2, 8, 4, 3};
    kiln_nn_conv_params p = {128, 128, 127, {2, 2}, {2, 1}, {2, 1}, 2, act};
    int32_t size = kiln_nn_conv_s8_get_buffer_size(&fd, 4);
    kiln_nn_context ctx = {xalloc((size_t)size), size};
    int8_t *x = bytes(2 * 6 * 7 * 5, 127), *w = bytes(8 * 1 * 3 * 2 * 4, 127), *y = xalloc(2 * 8 * 4 * 3);
    int32_t *b = words(8, INT32_MAX);
    kiln_nn_conv_s8(&ctx, &p, &q, &in, x, &fd, 4, w, b, &out, y);
    kiln_nn_conv_s8(&ctx, &p, &q, &in, x, &fd, 4, w, NULL, &out, y);
    free(ctx.buf); free(x); free(w); free(y); free(b);
  }
  /* Depthwise, channel multiplier 2. */
  {
    kiln_nn_dims in = {1, 4, 5, 6}, fd = {8, 1, 3, 3}, out = {1, 8, 3, 3};
    kiln_nn_conv_params p = {-127, 128, -128, {2, 2}, {1, 1}, {1, 1}, 4, act};
    int8_t *x = bytes(4 * 5 * 6, 127), *w = bytes(8 * 9, 127), *y = xalloc(8 * 9);
    int32_t *b = words(8, INT32_MIN + 1);
    kiln_nn_depthwise_conv_s8(&p, &q, &in, x, &fd, w, b, &out, y);
    free(x); free(w); free(y); free(b);
  }
  /* Fully connected, both forms. */
  {
    kiln_nn_fc_params p = {128, -127, 5, act};
    int8_t *x = bytes(3 * 9, 127), *w = bytes(8 * 9, 127), *y = xalloc(3 * 8);
    int32_t *b = words(8, INT32_MAX), *y32 = xalloc(3 * 8 * 4);
    kiln_nn_fully_connected_s8(&p, &q, 3, 9, x, 8, w, b, y);
    kiln_nn_fully_connected_s8_s32(&p, 3, 9, x, 8, w, NULL, y32);
    free(x); free(w); free(y); free(b); free(y32);
  }
  /* Pooling: a window entirely in the padding. */
  {
    kiln_nn_dims in = {1, 2, 3, 3}, out = {1, 2, 3, 3};
    kiln_nn_pool_params p = {{3, 3}, {2, 2}, {3, 3}, {1, 1}};
    int8_t *x = bytes(2 * 9, 127), *y = xalloc(2 * 9);
    kiln_nn_max_pool_s8(&p, &in, x, &out, y);
    free(x); free(y);
  }
  /* Global average, add, softmax with a hostile table. */
  {
    kiln_nn_dims in = {2, 3, 4, 5};
    kiln_nn_avg_params pa = {128, -128, act};
    kiln_nn_quant_params q1 = {mult, 0, 1};
    int8_t *x = bytes(2 * 3 * 20, 127), *x2 = bytes(2 * 3 * 20, 100), *y = xalloc(2 * 3 * 20);
    kiln_nn_global_avg_pool_s8(&pa, &q1, &in, x, y);
    kiln_nn_add_params pd = {128, INT32_MAX, -127, INT32_MIN, 0, act};
    kiln_nn_add_s8(&pd, &q, 120, x, x2, y);
    int32_t *table = words(256, INT32_MAX);
    kiln_nn_softmax_params ps = {INT32_MAX, 16, -128, act};
    kiln_nn_softmax_s8(&ps, table, 6, 20, x, y);
    memset(table, 0, 256 * 4);
    kiln_nn_softmax_s8(&ps, table, 6, 20, x, y);
    free(x); free(x2); free(y); free(table);
  }
  return 0;
}
`

// TestKernelsSanitized builds kiln_nn with AddressSanitizer and
// UndefinedBehaviorSanitizer (no recovery) and runs every kernel at the
// ends of its value ranges: no out-of-bounds access, no overflow, no bad
// shift.
func TestKernelsSanitized(t *testing.T) {
	cc := testenv.Tool(t, "cc")
	dir := t.TempDir()
	for _, f := range Sources() {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "main.c"), []byte(sanitizeMain), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(cc, "-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
		"-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-I.", "kiln_nn.c", "main.c", "-o", "k")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	run := exec.Command("./k")
	run.Dir = dir
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
}
