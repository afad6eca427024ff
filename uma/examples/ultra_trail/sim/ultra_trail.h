/* UltraTrail: a cycle-counting simulator of a small keyword-spotting
 * accelerator (kiln UMA example). Its compute unit is a dimension x
 * dimension weight-stationary systolic array that runs 1-D convolutions
 * with a fused bias and ReLU. */
#ifndef ULTRA_TRAIL_H_
#define ULTRA_TRAIL_H_

#include <stdint.h>
#include "kiln/c_runtime_api.h"

/* ultra_trail_conv1d_bias_relu computes
 *   out[n][o][x] = relu(b[o] + sum over c, k of in[n][c][x+k-pad] * w[o][c][k])
 * (stride 1, zeros outside the input; ol = l + 2*pad - kw + 1) on a
 * dimension x dimension array, and adds the run's cycles to the
 * simulator's counters. */
void ultra_trail_conv1d_bias_relu(float* out, const float* in, const float* w, const float* b,
                                  int32_t n, int32_t c, int32_t l, int32_t oc, int32_t kw,
                                  int32_t pad, int32_t dimension);

/* ultra_trail_sim_stats is a packed function: it writes the counters
 * {calls, multiply-accumulates, cycles, dimension of the last call} into
 * args[0] (an int64 tensor of 4 elements) and resets them. */
int32_t ultra_trail_sim_stats(kiln_tensor* args, int32_t num_args);

#endif /* ULTRA_TRAIL_H_ */
