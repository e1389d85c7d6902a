/* edgebuild optimized int8 kernels (Cortex-M4 DSP extension; portable C elsewhere).
 *
 * Every function here gives bit-identical results to its reference in eb_kernels.c
 * (eb_conv2d -> eb_conv2d_opt, ...): same arguments, same weight layout
 * ([out][in / groups][k_h][k_w] int8, as stored by the code generator; no repacking),
 * same numerics contract (eb_kernels.h; requantization is eb_requantize itself).
 *
 * Method (CMSIS-NN style): the receptive field of an output pixel is copied ("im2col") into
 * an int16 column in scratch, with every group of 4 values stored as [a0, a2, a1, a3] and the
 * column padded with zeros to a multiple of 4. The weights are then read 4 at a time as one
 * (unaligned) 32-bit word; SXTB16 of the word and of the word rotated by 8 bits give
 * [w0, w2] and [w1, w3], which SMLAD multiplies against the column pairs: 2 MACs per
 * instruction. The conv inner loop computes 2 output channels x 2 output pixels at once.
 * With __ARM_FEATURE_DSP (Cortex-M4/M7/M33 with DSP) the ACLE intrinsics are used; elsewhere
 * portable C functions with identical semantics run the same algorithm.
 *
 * Scratch: the caller passes a 4-byte-aligned int16_t buffer of at least
 *   EB_CONV_OPT_SCRATCH(in_c / groups, k_h, k_w)  elements for eb_conv2d(_wide)_opt
 *     (two im2col columns of in_per_group * k_h * k_w values, each rounded up to 4), and
 *   EB_LINEAR_OPT_SCRATCH(in_f)                   elements for eb_linear(_wide)_opt
 *     (one column of in_f values rounded up to 4).
 * The scratch contents are not preserved between calls; one buffer sized for the largest
 * layer can be shared by all layers. The kernels never write outside out[] and scratch.
 */
#ifndef EB_KERNELS_OPT_H
#define EB_KERNELS_OPT_H

#include <stdint.h>

#include "eb_kernels.h"

/* im2col length: n values rounded up to a multiple of 4. */
#define EB_OPT_ROUND4(n) ((((int32_t)(n)) + 3) & ~(int32_t)3)

/* int16 elements of scratch needed by eb_conv2d_opt / eb_conv2d_wide_opt. */
#define EB_CONV_OPT_SCRATCH(in_per_group, k_h, k_w) \
    (4 * EB_OPT_ROUND4((int32_t)(in_per_group) * (k_h) * (k_w)))

/* int16 elements of scratch needed by eb_linear_opt / eb_linear_wide_opt. */
#define EB_LINEAR_OPT_SCRATCH(in_f) EB_OPT_ROUND4(in_f)

void eb_conv2d_opt(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                   const int32_t *bias, int8_t *out, int16_t *scratch);
void eb_conv2d_wide_opt(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                        const int32_t *bias, int32_t *out, int16_t *scratch);
void eb_linear_opt(int in_f, int out_f, const int8_t *in, const int8_t *weight,
                   const int32_t *bias, int shift, int rounding, int act, int8_t *out,
                   int16_t *scratch);
void eb_linear_wide_opt(int in_f, int out_f, const int8_t *in, const int8_t *weight,
                        const int32_t *bias, int32_t *out, int16_t *scratch);

#endif
