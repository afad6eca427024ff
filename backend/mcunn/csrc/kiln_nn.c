/*
 * kiln_nn: kiln's int8 kernel library for microcontrollers (see
 * kiln_nn.h). Sums wrap in unsigned 32-bit arithmetic, as kiln's int32
 * arithmetic does, so that no input makes the C undefined.
 */
#include "kiln_nn.h"

#include <stddef.h>

/* wrap32 is v modulo 2^32 as a signed value. */
static inline int32_t kiln_nn_wrap32(uint32_t v) {
  return v <= 0x7fffffffu ? (int32_t)v : (int32_t)(v - 0x80000000u) - 0x7fffffff - 1;
}

/* requantize maps an int32 sum to the output range: x * multiplier /
 * 2^shift rounded to nearest, ties to even, plus zp, clamped. */
static inline int8_t kiln_nn_requantize(int32_t x, int32_t multiplier, int32_t shift, int32_t zp,
                                        const kiln_nn_activation *act) {
  int64_t p = (int64_t)x * multiplier;
  /* p >> shift rounding toward minus infinity, without shifting a
   * negative value (implementation-defined in C). */
  uint64_t up = (uint64_t)p;
  uint64_t mask = ((uint64_t)1 << shift) - 1;
  uint64_t r = up & mask;
  int64_t q = p < 0 ? -(int64_t)(((uint64_t)0 - up) >> shift) - ((((uint64_t)0 - up) & mask) != 0)
                    : (int64_t)(up >> shift);
  uint64_t half = (uint64_t)1 << (shift - 1);
  if (r > half || (r == half && (q & 1))) {
    q++;
  }
  q += zp;
  if (q < act->min) q = act->min;
  if (q > act->max) q = act->max;
  return (int8_t)q;
}

static inline int32_t kiln_nn_multiplier(const kiln_nn_quant_params *q, int32_t channel) {
  return q->multiplier[q->per_channel ? channel : 0];
}

int32_t kiln_nn_conv_s8_get_buffer_size(const kiln_nn_dims *filter_dims, int32_t filter_ic_block) {
  int32_t blocks = (filter_dims->c + filter_ic_block - 1) / filter_ic_block;
  return blocks * filter_ic_block * filter_dims->h * filter_dims->w * (int32_t)sizeof(int16_t);
}

void kiln_nn_conv_s8(const kiln_nn_context *ctx, const kiln_nn_conv_params *params,
                     const kiln_nn_quant_params *quant, const kiln_nn_dims *input_dims,
                     const int8_t *input, const kiln_nn_dims *filter_dims, int32_t filter_ic_block,
                     const int8_t *filter, const int32_t *bias, const kiln_nn_dims *output_dims,
                     int8_t *output) {
  const int32_t C = input_dims->c, H = input_dims->h, W = input_dims->w;
  const int32_t O = output_dims->c, OH = output_dims->h, OW = output_dims->w;
  const int32_t KH = filter_dims->h, KW = filter_dims->w, B = filter_ic_block;
  const int32_t G = params->groups, CG = filter_dims->c, OG = O / G;
  const int32_t blocks = (CG + B - 1) / B;
  const int32_t K = blocks * KH * KW * B;
  int16_t *col = (int16_t *)ctx->buf;
  for (int32_t n = 0; n < input_dims->n; n++) {
    for (int32_t g = 0; g < G; g++) {
      const int8_t *in = input + ((size_t)n * C + (size_t)g * CG) * H * W;
      for (int32_t oy = 0; oy < OH; oy++) {
        for (int32_t ox = 0; ox < OW; ox++) {
          /* The column of this output pixel, in the filter's order;
           * padded taps and the block's lanes beyond CG are 0. */
          int32_t k = 0;
          for (int32_t cb = 0; cb < blocks; cb++) {
            for (int32_t ky = 0; ky < KH; ky++) {
              const int32_t iy = oy * params->stride.h - params->padding.h + ky * params->dilation.h;
              for (int32_t kx = 0; kx < KW; kx++) {
                const int32_t ix = ox * params->stride.w - params->padding.w + kx * params->dilation.w;
                const int inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
                for (int32_t ci = 0; ci < B; ci++) {
                  const int32_t c = cb * B + ci;
                  col[k++] = (int16_t)(inside && c < CG
                                           ? in[((size_t)c * H + iy) * W + ix] + params->input_offset
                                           : 0);
                }
              }
            }
          }
          for (int32_t j = 0; j < OG; j++) {
            const int32_t o = g * OG + j;
            const int8_t *w = filter + (size_t)o * K;
            uint32_t acc = 0;
            for (int32_t i = 0; i < K; i++) {
              acc += (uint32_t)((int32_t)col[i] * (w[i] + params->filter_offset));
            }
            if (bias != NULL) {
              acc += (uint32_t)bias[o];
            }
            output[(((size_t)n * O + o) * OH + oy) * OW + ox] =
                kiln_nn_requantize(kiln_nn_wrap32(acc), kiln_nn_multiplier(quant, o), quant->shift,
                                   params->output_offset, &params->activation);
          }
        }
      }
    }
  }
}

void kiln_nn_depthwise_conv_s8(const kiln_nn_conv_params *params, const kiln_nn_quant_params *quant,
                               const kiln_nn_dims *input_dims, const int8_t *input,
                               const kiln_nn_dims *filter_dims, const int8_t *filter,
                               const int32_t *bias, const kiln_nn_dims *output_dims, int8_t *output) {
  const int32_t C = input_dims->c, H = input_dims->h, W = input_dims->w;
  const int32_t O = output_dims->c, OH = output_dims->h, OW = output_dims->w;
  const int32_t KH = filter_dims->h, KW = filter_dims->w, M = O / C;
  for (int32_t n = 0; n < input_dims->n; n++) {
    for (int32_t o = 0; o < O; o++) {
      const int8_t *in = input + ((size_t)n * C + (size_t)(o / M)) * H * W;
      const int8_t *w = filter + (size_t)o * KH * KW;
      int8_t *out = output + ((size_t)n * O + o) * OH * OW;
      const uint32_t b = bias != NULL ? (uint32_t)bias[o] : 0u;
      const int32_t mult = kiln_nn_multiplier(quant, o);
      for (int32_t oy = 0; oy < OH; oy++) {
        for (int32_t ox = 0; ox < OW; ox++) {
          uint32_t acc = 0;
          for (int32_t ky = 0; ky < KH; ky++) {
            const int32_t iy = oy * params->stride.h - params->padding.h + ky * params->dilation.h;
            if (iy < 0 || iy >= H) continue;
            for (int32_t kx = 0; kx < KW; kx++) {
              const int32_t ix = ox * params->stride.w - params->padding.w + kx * params->dilation.w;
              if (ix < 0 || ix >= W) continue;
              acc += (uint32_t)((in[(size_t)iy * W + ix] + params->input_offset) *
                                (w[ky * KW + kx] + params->filter_offset));
            }
          }
          out[(size_t)oy * OW + ox] = kiln_nn_requantize(kiln_nn_wrap32(acc + b), mult, quant->shift,
                                                         params->output_offset, &params->activation);
        }
      }
    }
  }
}

/* fc_sum is one output of a fully connected layer before requantization. */
static inline int32_t kiln_nn_fc_sum(const kiln_nn_fc_params *params, int32_t in_features,
                                     const int8_t *x, const int8_t *w, const int32_t *bias, int32_t j) {
  uint32_t acc = bias != NULL ? (uint32_t)bias[j] : 0u;
  for (int32_t k = 0; k < in_features; k++) {
    acc += (uint32_t)((x[k] + params->input_offset) * (w[k] + params->filter_offset));
  }
  return kiln_nn_wrap32(acc);
}

void kiln_nn_fully_connected_s8(const kiln_nn_fc_params *params, const kiln_nn_quant_params *quant,
                                int32_t batches, int32_t in_features, const int8_t *input,
                                int32_t out_features, const int8_t *filter, const int32_t *bias,
                                int8_t *output) {
  for (int32_t m = 0; m < batches; m++) {
    const int8_t *x = input + (size_t)m * in_features;
    for (int32_t j = 0; j < out_features; j++) {
      const int32_t s = kiln_nn_fc_sum(params, in_features, x, filter + (size_t)j * in_features, bias, j);
      output[(size_t)m * out_features + j] = kiln_nn_requantize(
          s, kiln_nn_multiplier(quant, j), quant->shift, params->output_offset, &params->activation);
    }
  }
}

void kiln_nn_fully_connected_s8_s32(const kiln_nn_fc_params *params, int32_t batches,
                                    int32_t in_features, const int8_t *input, int32_t out_features,
                                    const int8_t *filter, const int32_t *bias, int32_t *output) {
  for (int32_t m = 0; m < batches; m++) {
    const int8_t *x = input + (size_t)m * in_features;
    for (int32_t j = 0; j < out_features; j++) {
      output[(size_t)m * out_features + j] =
          kiln_nn_fc_sum(params, in_features, x, filter + (size_t)j * in_features, bias, j);
    }
  }
}

void kiln_nn_max_pool_s8(const kiln_nn_pool_params *params, const kiln_nn_dims *input_dims,
                         const int8_t *input, const kiln_nn_dims *output_dims, int8_t *output) {
  const int32_t H = input_dims->h, W = input_dims->w, OH = output_dims->h, OW = output_dims->w;
  const int32_t planes = input_dims->n * input_dims->c;
  for (int32_t p = 0; p < planes; p++) {
    const int8_t *in = input + (size_t)p * H * W;
    int8_t *out = output + (size_t)p * OH * OW;
    for (int32_t oy = 0; oy < OH; oy++) {
      for (int32_t ox = 0; ox < OW; ox++) {
        int32_t best = -128;
        for (int32_t ky = 0; ky < params->kernel.h; ky++) {
          const int32_t iy = oy * params->stride.h - params->padding.h + ky * params->dilation.h;
          if (iy < 0 || iy >= H) continue;
          for (int32_t kx = 0; kx < params->kernel.w; kx++) {
            const int32_t ix = ox * params->stride.w - params->padding.w + kx * params->dilation.w;
            if (ix < 0 || ix >= W) continue;
            const int32_t v = in[(size_t)iy * W + ix];
            if (v > best) best = v;
          }
        }
        out[(size_t)oy * OW + ox] = (int8_t)best;
      }
    }
  }
}

void kiln_nn_global_avg_pool_s8(const kiln_nn_avg_params *params, const kiln_nn_quant_params *quant,
                                const kiln_nn_dims *input_dims, const int8_t *input,
                                int8_t *output) {
  const int32_t C = input_dims->c, HW = input_dims->h * input_dims->w;
  for (int32_t n = 0; n < input_dims->n; n++) {
    for (int32_t c = 0; c < C; c++) {
      const int8_t *in = input + ((size_t)n * C + c) * HW;
      uint32_t acc = 0;
      for (int32_t i = 0; i < HW; i++) {
        acc += (uint32_t)(in[i] + params->input_offset);
      }
      output[(size_t)n * C + c] = kiln_nn_requantize(kiln_nn_wrap32(acc), kiln_nn_multiplier(quant, c),
                                                     quant->shift, params->output_offset, &params->activation);
    }
  }
}

void kiln_nn_add_s8(const kiln_nn_add_params *params, const kiln_nn_quant_params *quant,
                    int32_t size, const int8_t *a, const int8_t *b, int8_t *output) {
  const int32_t mult = quant->multiplier[0];
  for (int32_t i = 0; i < size; i++) {
    const uint32_t ta = (uint32_t)(a[i] + params->a_offset) * (uint32_t)params->a_multiplier;
    const uint32_t tb = (uint32_t)(b[i] + params->b_offset) * (uint32_t)params->b_multiplier;
    output[i] = kiln_nn_requantize(kiln_nn_wrap32(ta + tb), mult, quant->shift, params->output_offset,
                                   &params->activation);
  }
}

/* softmax_exp is the clamped table value of input v below the row's
 * maximum m. */
static inline int64_t kiln_nn_softmax_exp(const int32_t *table, int32_t m, int32_t v) {
  int64_t e = table[(m - v) & 255];
  if (e < 0) e = 0;
  if (e > (INT64_C(1) << 30)) e = INT64_C(1) << 30;
  return e;
}

void kiln_nn_softmax_s8(const kiln_nn_softmax_params *params, const int32_t *table, int32_t rows,
                        int32_t cols, const int8_t *input, int8_t *output) {
  for (int32_t r = 0; r < rows; r++) {
    const int8_t *x = input + (size_t)r * cols;
    int8_t *y = output + (size_t)r * cols;
    int32_t m = -128;
    for (int32_t j = 0; j < cols; j++) {
      if (x[j] > m) m = x[j];
    }
    int64_t s = 0;
    for (int32_t j = 0; j < cols; j++) {
      s += kiln_nn_softmax_exp(table, m, x[j]);
    }
    const int64_t den = s * (INT64_C(1) << params->shift);
    for (int32_t j = 0; j < cols; j++) {
      int64_t q = 0;
      if (den > 0) {
        const int64_t num = kiln_nn_softmax_exp(table, m, x[j]) * params->multiplier;
        q = num / den;
        const int64_t rem = num - q * den;
        if (2 * rem > den || (2 * rem == den && (q & 1))) q++;
      }
      q += params->output_offset;
      if (q < params->activation.min) q = params->activation.min;
      if (q > params->activation.max) q = params->activation.max;
      y[j] = (int8_t)q;
    }
  }
}
