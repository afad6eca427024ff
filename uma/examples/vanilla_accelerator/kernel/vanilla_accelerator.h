/* The vanilla accelerator's kernel interface (kiln UMA example). */
#ifndef VANILLA_ACCELERATOR_H_
#define VANILLA_ACCELERATOR_H_

#include <stdint.h>

/* vanilla_conv2d_nchw computes a 2-D convolution with stride 1, no
 * dilation and one group: out[n][oc][oh][ow] = sum over ic, ky, kx of
 * in[n][ic][oh+ky-ph][ow+kx-pw] * w[oc][ic][ky][kx], reading zeros outside
 * the input. The output is (n, oc, ih+2*ph-kh+1, iw+2*pw-kw+1). */
void vanilla_conv2d_nchw(float* out, const float* in, const float* w,
                         int32_t n, int32_t ic, int32_t ih, int32_t iw,
                         int32_t oc, int32_t kh, int32_t kw, int32_t ph, int32_t pw);

#endif /* VANILLA_ACCELERATOR_H_ */
