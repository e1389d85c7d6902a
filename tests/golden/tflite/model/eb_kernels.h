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
 *
 * Weights are int8, one per byte, or -- for 1-, 2- and 4-bit layers -- packed (weights.h of
 * a generated project says which): the weight array is read as rows (its first axis:
 * a convolution's output channels, a transposed convolution's input channels, a linear
 * layer's outputs), each row of n weights in ceil(n / G) 32-bit little-endian words,
 * G = 32 / b. Weight i = j * G + 4 * s + t of a row (word j, t in 0..3) is byte t of word j,
 * bits [b * s, b * s + b), a b-bit two's complement value; a row's padding is zero. So
 * masking the word to one b-bit field per byte, moved to the top of the byte, gives 4
 * consecutive weights as int8 values times 2^(8 - b) (edgebuild/core/packing.py).
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
    int8_t wbits; /* 0: int8 weights, one per byte; 1, 2, 4: packed b-bit weights */
} eb_conv_params;

typedef struct {
    int16_t c, in_h, in_w, out_h, out_w, k_h, k_w, stride_h, stride_w;
    int8_t mode, rounding;
} eb_pool_params;

/* The set-up of a split dense conv's dot (the tiled driver's eb_cols_kernel, eb_tiling.h),
 * derived once per row tile from its params and the layer's biases (eb_conv_cols_prepare)
 * and read by every channel tile's dot (eb_conv_cols_run): the window length k, rounded up
 * to 4 (kp), the tile's pixels (hw), the requantization (right shift s, rounding addend r)
 * and whether every row takes the requantizing assembly rows (fast: int8 out, a bias, no
 * bias above the overflow limit). Here because the driver holds it and both kernel sets'
 * headers see this one. */
typedef struct {
    const eb_conv_params *p;
    int32_t k, kp, hw, r, s, lim;
    int8_t wide, fast;
} eb_cols_job;

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

/* Packed weights: bytes of a row of n b-bit weights (b = 1, 2, 4), and weight i of the
 * row starting at `row`. */
#define EB_PACKED_ROW_BYTES(n, b) (4 * ((((int32_t)(n)) * (b) + 31) / 32))

static inline int32_t eb_packed_weight(const int8_t *row, int bits, int32_t i)
{
    const int32_t group = 32 / bits; /* weights per word */
    const int32_t field = (i % group) >> 2;
    const int32_t byte = (uint8_t)row[(i / group) * 4 + (i & 3)];
    const int32_t v = (byte >> (bits * field)) & ((1 << bits) - 1);
    return v >= (1 << (bits - 1)) ? v - (1 << bits) : v;
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
/* A linear layer with packed `bits`-bit weights (rows of in_f weights; bits 1, 2 or 4). */
void eb_linear_packed(int in_f, int out_f, int bits, const int8_t *in, const int8_t *weight,
                      const int32_t *bias, int shift, int rounding, int act, int8_t *out);
void eb_linear_packed_wide(int in_f, int out_f, int bits, const int8_t *in,
                           const int8_t *weight, const int32_t *bias, int32_t *out);
/* rows x n weights of `bits` bits (packed rows as above) -> int8, rows x n (one per byte). */
void eb_unpack_weights(int32_t rows, int32_t n, int bits, const int8_t *packed, int8_t *out);
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
