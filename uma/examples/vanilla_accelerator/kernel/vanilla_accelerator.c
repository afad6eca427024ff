/* The vanilla accelerator's convolution kernel (kiln UMA example). It
 * stands for the driver call a real accelerator would make: one call
 * computes a whole convolution. */
#include "vanilla_accelerator.h"

void vanilla_conv2d_nchw(float* out, const float* in, const float* w,
                         int32_t n, int32_t ic, int32_t ih, int32_t iw,
                         int32_t oc, int32_t kh, int32_t kw, int32_t ph, int32_t pw) {
  const int32_t oh = ih + 2 * ph - kh + 1;
  const int32_t ow = iw + 2 * pw - kw + 1;
  for (int32_t b = 0; b < n; ++b) {
    for (int32_t o = 0; o < oc; ++o) {
      for (int32_t y = 0; y < oh; ++y) {
        for (int32_t x = 0; x < ow; ++x) {
          float acc = 0.0f;
          for (int32_t c = 0; c < ic; ++c) {
            for (int32_t ky = 0; ky < kh; ++ky) {
              const int32_t iy = y + ky - ph;
              if (iy < 0 || iy >= ih) continue;
              for (int32_t kx = 0; kx < kw; ++kx) {
                const int32_t ix = x + kx - pw;
                if (ix < 0 || ix >= iw) continue;
                acc += in[((b * ic + c) * ih + iy) * iw + ix] * w[((o * ic + c) * kh + ky) * kw + kx];
              }
            }
          }
          out[((b * oc + o) * oh + y) * ow + x] = acc;
        }
      }
    }
  }
}
