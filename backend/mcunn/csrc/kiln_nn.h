/*
 * kiln_nn: kiln's int8 kernel library for microcontrollers.
 *
 * Plain C11 with no allocation, no floating point and no global state:
 * every kernel takes its geometry and quantization in argument structs
 * (in the style of CMSIS-NN's API) and, when it needs scratch memory, a
 * context whose buffer the caller sizes with the kernel's
 * _get_buffer_size function. kiln's "mcunn" target calls these kernels
 * from the C it generates, with the scratch buffers placed by its static
 * memory planner; the library is also usable by hand.
 *
 * Tensors are NCHW (a dense tensor of 8-bit integers, batch outermost),
 * like the graphs kiln compiles. Arithmetic follows kiln's quantized
 * operators exactly (bit for bit): products are summed in 32-bit
 * integers that wrap, a bias is added with wrap-around, and
 * requantization multiplies by a 32-bit multiplier in 64 bits, shifts
 * right by `shift` rounding ties to even, adds the output zero point and
 * clamps to the activation range.
 */
#ifndef KILN_NN_H
#define KILN_NN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* kiln_nn_dims is a tensor's NCHW shape; a matrix or a vector uses the
 * trailing fields with the others 1. */
typedef struct {
  int32_t n, c, h, w;
} kiln_nn_dims;

/* kiln_nn_tile is a pair of spatial values: strides, paddings (top and
 * left; the output size implies the rest), dilations, window sizes. */
typedef struct {
  int32_t h, w;
} kiln_nn_tile;

/* kiln_nn_activation is the clamp range of a kernel's output. */
typedef struct {
  int32_t min, max;
} kiln_nn_activation;

/* kiln_nn_context is the scratch buffer of one kernel call: size bytes
 * at buf, at least what the kernel's _get_buffer_size asks for (buf may
 * be NULL when that is 0). */
typedef struct {
  void *buf;
  int32_t size;
} kiln_nn_context;

/* kiln_nn_quant_params is an output requantization: multiplier[i] /
 * 2^shift is the real scale of output channel i (of every channel when
 * per_channel is 0); shift is 1 to 62. */
typedef struct {
  const int32_t *multiplier;
  int32_t per_channel;
  int32_t shift;
} kiln_nn_quant_params;

/* kiln_nn_conv_params describes a convolution. The offsets are added to
 * the stored values: input_offset and filter_offset are minus the input's
 * and the filter's zero points, output_offset is the output's zero
 * point. groups divides the input and output channels. */
typedef struct {
  int32_t input_offset, filter_offset, output_offset;
  kiln_nn_tile stride, padding, dilation;
  int32_t groups;
  kiln_nn_activation activation;
} kiln_nn_conv_params;

/* kiln_nn_fc_params describes a fully connected layer (a matrix product
 * with the weights' rows as output features). */
typedef struct {
  int32_t input_offset, filter_offset, output_offset;
  kiln_nn_activation activation;
} kiln_nn_fc_params;

/* kiln_nn_pool_params describes a pooling window. */
typedef struct {
  kiln_nn_tile kernel, stride, padding, dilation;
} kiln_nn_pool_params;

/* kiln_nn_avg_params describes a global average (a sum over the spatial
 * dimensions whose requantization multiplier includes 1/count). */
typedef struct {
  int32_t input_offset, output_offset;
  kiln_nn_activation activation;
} kiln_nn_avg_params;

/* kiln_nn_add_params describes an elementwise sum of two quantized
 * tensors: ((a + a_offset) * a_multiplier + (b + b_offset) *
 * b_multiplier), then requantized. */
typedef struct {
  int32_t a_offset, a_multiplier, b_offset, b_multiplier, output_offset;
  kiln_nn_activation activation;
} kiln_nn_add_params;

/* kiln_nn_softmax_params describes an integer softmax: output = clamp(
 * round(e * multiplier / (sum of e * 2^shift)) + output_offset), e the
 * exp table's value (clamped to [0, 2^30]) at the row's maximum minus
 * the input. */
typedef struct {
  int32_t multiplier, shift, output_offset;
  kiln_nn_activation activation;
} kiln_nn_softmax_params;

/* kiln_nn_conv_s8_get_buffer_size is the scratch size of kiln_nn_conv_s8
 * in bytes: one int16 column of the filter's length. */
int32_t kiln_nn_conv_s8_get_buffer_size(const kiln_nn_dims *filter_dims, int32_t filter_ic_block);

/* kiln_nn_conv_s8 is a 2-D convolution with a per-channel bias and
 * requantization (int8 input, filter and output; int32 bias, which may
 * be NULL). filter_dims are the filter's logical OIHW sizes (n output
 * channels, c input channels per group). The filter is stored as
 * [n][ceil(c / filter_ic_block)][h][w][filter_ic_block], zeros beyond c:
 * filter_ic_block 1 is plain OIHW, 4 is kiln's OIHW4i. The output is
 * cropped to output_dims; padding.h and padding.w are the top and left
 * paddings, padded taps read the input's zero point. */
void kiln_nn_conv_s8(const kiln_nn_context *ctx, const kiln_nn_conv_params *params,
                     const kiln_nn_quant_params *quant, const kiln_nn_dims *input_dims,
                     const int8_t *input, const kiln_nn_dims *filter_dims, int32_t filter_ic_block,
                     const int8_t *filter, const int32_t *bias, const kiln_nn_dims *output_dims,
                     int8_t *output);

/* kiln_nn_depthwise_conv_s8 is kiln_nn_conv_s8 with one group per input
 * channel (groups == input channels; output channel o reads input channel
 * o / (output channels / input channels)) and an OIHW filter
 * [n][1][h][w]. It needs no scratch buffer. */
void kiln_nn_depthwise_conv_s8(const kiln_nn_conv_params *params, const kiln_nn_quant_params *quant,
                               const kiln_nn_dims *input_dims, const int8_t *input,
                               const kiln_nn_dims *filter_dims, const int8_t *filter,
                               const int32_t *bias, const kiln_nn_dims *output_dims, int8_t *output);

/* kiln_nn_fully_connected_s8 is out[m][j] = requantize(sum over k of
 * (input[m][k] + input_offset) * (filter[j][k] + filter_offset) +
 * bias[j]) for batches rows m of in_features values and out_features
 * rows j of the filter (bias may be NULL). */
void kiln_nn_fully_connected_s8(const kiln_nn_fc_params *params, const kiln_nn_quant_params *quant,
                                int32_t batches, int32_t in_features, const int8_t *input,
                                int32_t out_features, const int8_t *filter, const int32_t *bias,
                                int8_t *output);

/* kiln_nn_fully_connected_s8_s32 is kiln_nn_fully_connected_s8 without
 * the requantization: the int32 sums (plus bias) are the output. */
void kiln_nn_fully_connected_s8_s32(const kiln_nn_fc_params *params, int32_t batches,
                                    int32_t in_features, const int8_t *input, int32_t out_features,
                                    const int8_t *filter, const int32_t *bias, int32_t *output);

/* kiln_nn_max_pool_s8 is max pooling of an int8 tensor: taps in the
 * padding are skipped, and a window entirely in padding gives -128. */
void kiln_nn_max_pool_s8(const kiln_nn_pool_params *params, const kiln_nn_dims *input_dims,
                         const int8_t *input, const kiln_nn_dims *output_dims, int8_t *output);

/* kiln_nn_global_avg_pool_s8 requantizes, per (n, c), the sum of the
 * h * w input values plus input_offset each. */
void kiln_nn_global_avg_pool_s8(const kiln_nn_avg_params *params, const kiln_nn_quant_params *quant,
                                const kiln_nn_dims *input_dims, const int8_t *input,
                                int8_t *output);

/* kiln_nn_add_s8 adds two int8 tensors of size elements each (see
 * kiln_nn_add_params). */
void kiln_nn_add_s8(const kiln_nn_add_params *params, const kiln_nn_quant_params *quant,
                    int32_t size, const int8_t *a, const int8_t *b, int8_t *output);

/* kiln_nn_softmax_s8 is the softmax of each of rows rows of cols int8
 * values, with exp read from table (256 int32 values: table[d] for a
 * value d below the row's maximum), rounding half to even; a row whose
 * table values sum to 0 gives output_offset. */
void kiln_nn_softmax_s8(const kiln_nn_softmax_params *params, const int32_t *table, int32_t rows,
                        int32_t cols, const int8_t *input, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* KILN_NN_H */
