/* edgebuild optimized pointwise (1x1) convolution (Cortex-M4 DSP extension; portable C
 * elsewhere), bit-identical to the reference eb_conv2d(_wide) (eb_kernels.c).
 *
 * A pointwise layer -- 1x1 kernel, stride 1, no padding, groups 1 (dilation is irrelevant
 * at 1x1) -- is a plain matrix product over the activations as they lie in memory:
 * out[oc][p] = bias[oc] + sum_ic w[oc][ic] * in[ic][p], p over the in_h * in_w pixels
 * ([C][H][W] storage). There is no receptive field to gather, so the code generator sends
 * such layers here (ops/conv.py) instead of to eb_conv2d(_wide)_opt's im2col path.
 *
 * Method: the pixels go 4 at a time. Their input values are unpacked once into 4 int16
 * columns in scratch, K = in_c values each, zero-padded to a multiple of 4, in chunks of 4
 * channels stored as [x0, x2], [x1, x3] and interleaved chunk by chunk
 * ([P0 chunk q][P1 chunk q][P2 chunk q][P3 chunk q]): per 4 channels x 4 pixels, 4 word
 * loads of the input (one per channel plane), 8 SXTB16 and 8 PKHBT/PKHTB -- no byte
 * gathering. Then every output channel runs over them: per 4 channels one word of weights
 * (as the code generator stores them, [out][in] int8, or packed 1-, 2-, 4-bit rows read in
 * place), SXTB16 and SXTB16 ROR 8 give [w0, w2], [w1, w3], two LDMs bring the 4 pixels'
 * column words and 8 SMLADs accumulate 16 MACs (one asm loop of 16 channels per
 * iteration on the M4: 13 instructions, about 22 estimated cycles per 16 MACs). The 4 sums
 * start at bias + 2^(s-1) (s = -shift, rounding half up; bias alone when rounding down),
 * so that requantizing is an arithmetic shift by s and one SSAT/USAT (two and an abs for
 * `abs`) in registers before each output byte's store. That takes 0 <= s <= 31 and a bias
 * that leaves room for the largest sum, in_c * 2^14, and the rounding term below 2^31
 * (checked once per call); other layers (left shifts, such biases) and the last 1..3
 * pixels of a layer whose pixel count is not a multiple of 4 go through eb_requantize.
 *
 * Scratch: a 4-BYTE-ALIGNED int16_t buffer of EB_PW_OPT_SCRATCH(in_c) elements, the same
 * size eb_conv2d_opt takes for this layer (EB_CONV_OPT_SCRATCH(in_c, 1, 1)); not preserved
 * between calls. Called on a layer that is not pointwise, the functions run the reference
 * kernel instead (correct, slow): the code generator never does that.
 */
#ifndef EB_PW_OPT_H
#define EB_PW_OPT_H

#include <stdint.h>

#include "eb_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* int16 elements of scratch needed by eb_conv2d_pw_opt / eb_conv2d_pw_wide_opt. */
#define EB_PW_OPT_SCRATCH(in_c) (4 * ((((int32_t)(in_c)) + 3) & ~(int32_t)3))

void eb_conv2d_pw_opt(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                      const int32_t *bias, int8_t *out, int16_t *scratch);
void eb_conv2d_pw_wide_opt(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                           const int32_t *bias, int32_t *out, int16_t *scratch);

/* The tiled driver's split pointwise conv (eb_tiling.h, eb_cols_kernel; bound by the code
 * generator for pointwise layers only): eb_pw_cols_build writes the columns of all p's
 * pixels into cols (EB_CONV_COLS_SCRATCH(pixels, in_c, 1, 1) int16: 4-pixel blocks of
 * 4 * round_up_4(in_c)), eb_pw_cols_dot runs p->out_c channels' int8 weights against them
 * (out: int8, or int32 when wide). Bit-identical to eb_conv2d(_wide). */
void eb_pw_cols_build(const eb_conv_params *p, const int8_t *in, int16_t *cols);
void eb_pw_cols_dot(const eb_conv_params *p, const int16_t *cols, const int8_t *weight,
                    const int32_t *bias, int wide, void *out);

#ifdef __cplusplus
}
#endif

#endif
