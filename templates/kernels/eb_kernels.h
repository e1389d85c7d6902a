/* edgebuild int8 kernels — static files copied into every generated project.
 *
 * Numerics (the same contract as edgebuild/numerics.py):
 *  - activations are int8 q meaning q/128, stored channels first: [C][H][W], [C][L], [F];
 *  - a compute layer accumulates acc = sum(w * x) + bias exactly in int32;
 *  - out = saturate(act(round(acc * 2^shift))): a right shift rounds half up
 *    (floor(v + 0.5), as the MAX78000 does) or down (floor), a left shift is exact;
 *    rounding happens before the activation, saturation to [-128, 127] is last;
 *  - a "wide" output is acc itself (int32), no shift, activation or saturation.
 * Right shifts of negative values rely on arithmetic shift (GCC/Clang on every target
 * edgebuild supports); eb_kernels.c refuses to compile where that does not hold.
 */
#ifndef EB_KERNELS_H
#define EB_KERNELS_H

#include <stdint.h>

/* A generated project configures the kernels in eb_config.h: every global symbol gets the
 * model's name, so that several models link into one firmware, and the optional kernel
 * paths its model does not use are left out. Compiled on their own (-DEB_STANDALONE, as
 * edgebuild's tests do) the kernels keep the plain names and every path. */
#ifndef EB_STANDALONE
#include "eb_config.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define EB_ROUND_HALF_UP 0
#define EB_ROUND_FLOOR 1
#define EB_ROUND_TRUNC 2 /* average pooling only: toward zero, as on MAX7800x */
#define EB_ACT_NONE 0
#define EB_ACT_RELU 1
#define EB_ACT_ABS 2
#define EB_POOL_MAX 0
#define EB_POOL_AVG 1

/* One convolution (conv1d is conv2d with height 1; linear is conv2d over 1x1). A transposed
 * convolution uses the same fields: in_* the input, out_* the output (output padding is
 * already in out_h/out_w), pad the rows/columns cropped from the full transposed output. */
typedef struct {
    int16_t in_c, in_h, in_w;
    int16_t out_c, out_h, out_w;
    int16_t k_h, k_w, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups;
    int8_t shift, rounding, act;
} eb_conv_params;

typedef struct {
    int16_t c, in_h, in_w, out_h, out_w, k_h, k_w, stride_h, stride_w;
    int8_t mode, rounding;
} eb_pool_params;

/* acc * 2^shift, rounded, activated, saturated to int8. Computed in int64 so that a left
 * shift is exact (|shift| <= 31; the contract's range is [-22, 15]) and abs(INT32_MIN) does
 * not overflow: a large accumulator saturates instead of wrapping around. */
static inline int8_t eb_requantize(int32_t acc, int shift, int rounding, int act)
{
    int64_t v = acc;
    if (shift >= 0) {
        v *= (int64_t)1 << shift;
    } else {
        if (rounding == EB_ROUND_HALF_UP) {
            v += (int64_t)1 << (-shift - 1);
        }
        v >>= -shift;
    }
    if (act == EB_ACT_RELU && v < 0) {
        v = 0;
    } else if (act == EB_ACT_ABS && v < 0) {
        v = -v;
    }
    if (v > 127) {
        v = 127;
    } else if (v < -128) {
        v = -128;
    }
    return (int8_t)v;
}

/* Reference kernels (eb_kernels.c): the definition every faster variant must match. */
void eb_conv2d(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
               const int32_t *bias, int8_t *out);
void eb_conv2d_wide(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                    const int32_t *bias, int32_t *out);
/* Transposed convolution; weight layout [in_c][out_c/groups][k_h][k_w] (PyTorch's
 * ConvTranspose2d). No optimized variant: every target runs these loops. */
void eb_conv_transpose2d(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                         const int32_t *bias, int8_t *out);
void eb_conv_transpose2d_wide(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                              const int32_t *bias, int32_t *out);
void eb_linear(int in_f, int out_f, const int8_t *in, const int8_t *weight,
               const int32_t *bias, int shift, int rounding, int act, int8_t *out);
void eb_linear_wide(int in_f, int out_f, const int8_t *in, const int8_t *weight,
                    const int32_t *bias, int32_t *out);
void eb_pool2d(const eb_pool_params *p, const int8_t *in, int8_t *out);
void eb_add(int n, int count, const int8_t *const *inputs, int act, int8_t *out);
void eb_copy(int n, const int8_t *src, int8_t *dst);
/* A rolling window of `length` frames: state[c][length] (kept across inferences, oldest
 * first) drops column 0, appends in[c] as the newest column, and is copied to out. */
void eb_buffer_push(int channels, int length, const int8_t *in, int8_t *state, int8_t *out);

#ifdef __cplusplus
}
#endif

#endif
