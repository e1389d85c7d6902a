/* edgebuild kernels for TFLite's int8 number format — static files copied into a generated
 * project whose model was imported from a .tflite file.
 *
 * Numerics: TensorFlow Lite's reference integer kernels (LiteRT's BUILTIN_REF; the
 * specification is edgebuild/tflite/arith.py and edgebuild/tflite/reference.py, and
 * tests/test_tflite_kernels.py compares these kernels with them bit for bit):
 *  - activations int8 with a zero point, stored channels first per sample: [C][H][W], [F];
 *  - conv2d / linear: acc = bias + sum over the taps inside the input of (x - in_zp) * w
 *    (int8 weights, zero point 0; taps in the padding add nothing), in int32 with
 *    wrap-around; out = clamp(MBQM(acc, mult[o], shift[o]) + out_zp, act_min, act_max),
 *    rounded twice by a convolution (eb_tfl_mbqm) and once by a linear layer
 *    (eb_tfl_mbqm_single), as LiteRT's reference kernels do;
 *  - MBQM(x, m, s) (MultiplyByQuantizedMultiplier): x * 2^max(s, 0) (wrapping), then
 *    SRDHM by m (SaturatingRoundingDoublingHighMul: (x * m + 2^30) >> 31 with gemmlowp's
 *    nudge), then RDBPOT by max(-s, 0) (RoundingDivideByPOT, halves away from zero);
 *    rounded once: (x * m + 2^(30 - s)) >> (31 - s) in 64 bits, wrapped to int32.
 *    m in [2^30, 2^31) or 0, s in [-31, 30] (positive: a left shift first);
 *  - pool2d: max, or the exact sum of the window's values inside the input divided by their
 *    number with halves away from zero (padding counts for nothing); then clamped;
 *  - add: (x - zp) * 2^left_shift rescaled by MBQM per input, summed (wrapping), MBQM to the
 *    output, + out_zp, clamped;
 *  - softmax over the channels of each position: gemmlowp's fixed-point exp (Q5.26 in,
 *    Q0.31 out) and reciprocal, int8 out with scale 1/256 and zero point -128.
 * act_min <= act_max, both within [-128, 127]. Right shifts of negative values must be
 * arithmetic (GCC/Clang on every target edgebuild supports; eb_tfl.c checks).
 *
 * Two implementations, the same results:
 *  - eb_tfl.c: portable C99, every op (eb_tfl_conv2d, eb_tfl_linear, eb_tfl_pool2d,
 *    eb_tfl_add, eb_tfl_softmax); the scratch argument of conv2d / linear is unused (NULL
 *    is fine);
 *  - eb_tfl_opt.c: Cortex-M4 (DSP extension): eb_tfl_conv2d_opt and eb_tfl_linear_opt,
 *    the same arguments as their portable twins (a suffix, no dispatch: a Cortex-M4
 *    project calls the _opt names, any other the portable ones), and
 *    eb_tfl_conv_scratch / eb_tfl_linear_scratch. With __ARM_FEATURE_DSP it uses the DSP
 *    instructions; elsewhere (or with -DEB_TFL_OPT_PORTABLE) the same algorithm with
 *    portable stand-ins for them (a Cortex-M4 project's host build, the host tests); its inner
 *    loops are Thumb-2 assembly with GCC's optimizer on (C otherwise, same results).
 *    eb_tfl_pool2d_opt and eb_tfl_add_opt likewise (softmax has the one implementation).
 *    The optimized kernels need a 4-BYTE-ALIGNED int16 scratch of eb_tfl_conv_scratch(p) /
 *    eb_tfl_linear_scratch(p) / eb_tfl_add_scratch(p)
 *    elements (a function of the layer's shape, not of its padding or quantization;
 *    edgebuild/tflite/kernels.py computes the same numbers for the code generator); its
 *    contents are not kept between calls, so one buffer sized for the largest layer serves
 *    all. They write nothing outside out[] and the scratch, read inputs and weights at any
 *    alignment (word-aligned weights with in_f % 4 == 0 take a faster linear loop), use
 *    about 0.7 KiB of stack and 25 KiB of code (arm-none-eabi-gcc 12 -O2). eb_tfl_opt.c
 *    gives the method.
 *
 * Everything else here (the fixed-point primitives) is static inline: no global symbol. */
#ifndef EB_TFL_H
#define EB_TFL_H

#include <stdint.h>

#ifndef EB_STANDALONE
#include "eb_config.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* A convolution: dense (groups 1), grouped, or depthwise with any multiplier (groups ==
 * in_c, out_c = in_c * m). Output channel o reads the in_c / groups input channels of group
 * o / (out_c / groups). pad_top / pad_left: padding before the first row / column; the
 * padding after the last is whatever out_h / out_w imply. Weights [out_c][in_c / groups]
 * [k_h][k_w] int8 (byte-aligned is enough), bias int32 per output channel (NULL: none),
 * mult / shift int32 per output channel. */
typedef struct {
    int16_t in_c, in_h, in_w, out_c, out_h, out_w;
    int16_t k_h, k_w, stride_h, stride_w, pad_top, pad_left, dil_h, dil_w, groups;
    int16_t in_zp, out_zp, act_min, act_max;
} eb_tfl_conv_params;

/* A fully connected layer: weights [out_f][in_f] int8, bias (NULL: none), mult and shift
 * per output. */
typedef struct {
    int16_t in_f, out_f, in_zp, out_zp, act_min, act_max;
} eb_tfl_fc_params;

/* Pooling; mode EB_TFL_POOL_MAX or EB_TFL_POOL_AVG. pad_top / pad_left: padding before the
 * first row / column (SAME padding), the padding after is whatever out_h / out_w imply; a
 * window holds the input's values inside it only (the average divides by their number).
 * The zero point needs no handling: max and mean commute with it (TFLite requires input
 * and output to share their quantization). */
typedef struct {
    int16_t c, in_h, in_w, out_h, out_w, k_h, k_w, stride_h, stride_w;
    int8_t mode;
    int16_t act_min, act_max, pad_top, pad_left;
} eb_tfl_pool_params;

#define EB_TFL_POOL_MAX 0
#define EB_TFL_POOL_AVG 1

/* Elementwise add of n values (same shape, no broadcasting). */
typedef struct {
    int32_t n;
    int16_t in1_zp, in2_zp, out_zp, act_min, act_max, left_shift;
    int32_t mult1, shift1, mult2, shift2, mult_out, shift_out;
} eb_tfl_add_params;

/* Softmax over `channels` at each of `positions`: element (c, pos) at c * positions + pos
 * (CHW with positions = H * W; a flat vector is one position). multiplier, left_shift
 * (0..31) and diff_min as tflite.arith.softmax_params derives them. */
typedef struct {
    int16_t channels;
    int32_t positions;
    int32_t multiplier, left_shift, diff_min;
} eb_tfl_softmax_params;

/* ---- portable kernels (eb_tfl.c) ---------------------------------------------------------- */
void eb_tfl_conv2d(const eb_tfl_conv_params *p, const int8_t *in, const int8_t *w,
                   const int32_t *bias, const int32_t *mult, const int32_t *shift, int8_t *out,
                   int16_t *scratch);
void eb_tfl_linear(const eb_tfl_fc_params *p, const int8_t *in, const int8_t *w,
                   const int32_t *bias, const int32_t *mult, const int32_t *shift, int8_t *out,
                   int16_t *scratch);
void eb_tfl_pool2d(const eb_tfl_pool_params *p, const int8_t *in, int8_t *out);
void eb_tfl_add(const eb_tfl_add_params *p, const int8_t *a, const int8_t *b, int8_t *out);
void eb_tfl_softmax(const eb_tfl_softmax_params *p, const int8_t *in, int8_t *out);

/* ---- Cortex-M4 kernels (eb_tfl_opt.c, where it compiles) -----------------------------------
 * The same arguments and results as eb_tfl_conv2d / eb_tfl_linear; scratch: a 4-byte-aligned
 * int16 buffer of at least eb_tfl_conv_scratch(p) / eb_tfl_linear_scratch(p) elements
 * (functions of the layer's shape only). */
void eb_tfl_conv2d_opt(const eb_tfl_conv_params *p, const int8_t *in, const int8_t *w,
                       const int32_t *bias, const int32_t *mult, const int32_t *shift,
                       int8_t *out, int16_t *scratch);
void eb_tfl_linear_opt(const eb_tfl_fc_params *p, const int8_t *in, const int8_t *w,
                       const int32_t *bias, const int32_t *mult, const int32_t *shift,
                       int8_t *out, int16_t *scratch);
int32_t eb_tfl_conv_scratch(const eb_tfl_conv_params *p);
int32_t eb_tfl_linear_scratch(const eb_tfl_fc_params *p);
/* pool2d and add, the same arguments as their portable twins (add: a scratch of
 * eb_tfl_add_scratch(p) elements, NULL when that is 0). */
void eb_tfl_pool2d_opt(const eb_tfl_pool_params *p, const int8_t *in, int8_t *out);
void eb_tfl_add_opt(const eb_tfl_add_params *p, const int8_t *a, const int8_t *b, int8_t *out,
                    int16_t *scratch);
int32_t eb_tfl_add_scratch(const eb_tfl_add_params *p);

/* ---- fixed-point primitives (tflite/arith.py), static inline ------------------------------ */

/* Two's complement reinterpretation without implementation-defined conversions (GCC folds
 * it to nothing). */
static inline int32_t eb_tfl_s32(uint32_t u)
{
    return u <= 0x7FFFFFFFu ? (int32_t)u : -(int32_t)(0xFFFFFFFFu - u) - 1;
}

/* a + b and a - b with int32 wrap-around. */
static inline int32_t eb_tfl_add32(int32_t a, int32_t b)
{
    return eb_tfl_s32((uint32_t)a + (uint32_t)b);
}

static inline int32_t eb_tfl_sub32(int32_t a, int32_t b)
{
    return eb_tfl_s32((uint32_t)a - (uint32_t)b);
}

/* SaturatingRoundingDoublingHighMul: (a * b + nudge) / 2^31 truncated toward zero, the nudge
 * 2^30 for a non-negative product and 1 - 2^30 otherwise; INT32_MIN * INT32_MIN saturates.
 * Computed as floor((a * b + 2^30) / 2^31), the same for either sign (a negative product:
 * -floor((|ab| + 2^30 - 1) / 2^31) = floor((ab - 2^30 + 1 + 2^31 - 1) / 2^31)), a 64-bit
 * add and shift instead of a division (the quotient fits int32 once the saturating case is
 * out). */
static inline int32_t eb_tfl_srdhm(int32_t a, int32_t b)
{
    if (a == INT32_MIN && b == INT32_MIN) {
        return INT32_MAX;
    }
    return (int32_t)(((int64_t)a * (int64_t)b + ((int64_t)1 << 30)) >> 31);
}

/* RoundingDivideByPOT: x / 2^e rounded half away from zero, e in 0..31. */
static inline int32_t eb_tfl_rdbpot(int32_t x, int e)
{
    const int32_t mask = (int32_t)(((int64_t)1 << e) - 1);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> e) + (remainder > threshold ? 1 : 0);
}

/* MultiplyByQuantizedMultiplier, double rounding: shift in [-31, 30]. */
static inline int32_t eb_tfl_mbqm(int32_t x, int32_t m, int shift)
{
    const int left = shift > 0 ? shift : 0;
    const int right = shift > 0 ? 0 : -shift;
    return eb_tfl_rdbpot(eb_tfl_srdhm(eb_tfl_s32((uint32_t)x << left), m), right);
}

/* MultiplyByQuantizedMultiplier rounded once (TFLITE_SINGLE_ROUNDING's form, LiteRT's
 * reference FULLY_CONNECTED): (x * m + 2^(30 - s)) >> (31 - s) in 64 bits, wrapped to int32;
 * shift in [-31, 30]. */
static inline int32_t eb_tfl_mbqm_single(int32_t x, int32_t m, int shift)
{
    const int total = 31 - shift;
    const int64_t v = ((int64_t)x * (int64_t)m + ((int64_t)1 << (total - 1))) >> total;
    return eb_tfl_s32((uint32_t)(uint64_t)v);
}

/* clamp(v + zp, lo, hi) without overflowing int32 (v may be any int32): v is clamped to
 * [lo - zp, hi - zp] first. */
static inline int8_t eb_tfl_out8(int32_t v, int32_t zp, int32_t lo, int32_t hi)
{
    if (v < lo - zp) {
        v = lo - zp;
    } else if (v > hi - zp) {
        v = hi - zp;
    }
    return (int8_t)(v + zp);
}

#ifdef __cplusplus
}
#endif

#endif
