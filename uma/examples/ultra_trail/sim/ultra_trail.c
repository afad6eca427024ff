/* UltraTrail simulator (kiln UMA example): functional results plus a
 * cycle model of a weight-stationary systolic array.
 *
 * Cycle model, per output tile of `dimension` output channels and per
 * weight tile of `dimension` (input channel, tap) rows:
 *   dimension cycles to shift the weights in, then
 *   ol + 2*(dimension-1) cycles to stream the ol input columns through
 *   the array (fill and drain of the pipeline);
 * plus, per output tile, ol cycles for the bias/ReLU unit to write the
 * tile back. The array does dimension*dimension multiply-accumulates per
 * cycle at best; the counters let a user compare what it did with that
 * peak and with a scalar CPU's one MAC per cycle. */
#include <string.h>
#include "ultra_trail.h"

static uint64_t ut_calls, ut_macs, ut_cycles, ut_dimension;

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void ultra_trail_conv1d_bias_relu(float* out, const float* in, const float* w, const float* b,
                                  int32_t n, int32_t c, int32_t l, int32_t oc, int32_t kw,
                                  int32_t pad, int32_t dimension) {
  const int64_t ol = (int64_t)l + 2 * pad - kw + 1;
  for (int64_t s = 0; s < n; ++s) {
    for (int64_t o = 0; o < oc; ++o) {
      for (int64_t x = 0; x < ol; ++x) {
        float acc = 0.0f;
        for (int64_t ci = 0; ci < c; ++ci) {
          for (int64_t k = 0; k < kw; ++k) {
            const int64_t ix = x + k - pad;
            if (ix >= 0 && ix < l) {
              acc += in[(s * c + ci) * l + ix] * w[(o * c + ci) * kw + k];
            }
          }
        }
        acc += b[o];
        out[(s * oc + o) * ol + x] = acc > 0.0f ? acc : 0.0f;
      }
    }
  }
  const int64_t d = dimension > 0 ? dimension : 1;
  const int64_t row_tiles = ceil_div((int64_t)c * kw, d);
  const int64_t col_tiles = ceil_div(oc, d);
  ut_calls++;
  ut_macs += (uint64_t)n * (uint64_t)oc * (uint64_t)ol * (uint64_t)c * (uint64_t)kw;
  ut_cycles += (uint64_t)n * (uint64_t)(col_tiles * (row_tiles * (d + ol + 2 * (d - 1)) + ol));
  ut_dimension = (uint64_t)d;
}

int32_t ultra_trail_sim_stats(kiln_tensor* args, int32_t num_args) {
  if (num_args != 1 || args[0].ndim != 1 || args[0].shape[0] != 4 || args[0].dtype_code != KILN_INT || args[0].dtype_bits != 64) {
    kiln_set_last_error("ultra_trail_sim_stats: want one int64 tensor of 4 elements");
    return -1;
  }
  int64_t v[4] = {(int64_t)ut_calls, (int64_t)ut_macs, (int64_t)ut_cycles, (int64_t)ut_dimension};
  memcpy(args[0].data, v, sizeof v);
  ut_calls = ut_macs = ut_cycles = 0;
  return 0;
}
