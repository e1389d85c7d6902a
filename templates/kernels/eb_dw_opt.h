/* edgebuild optimized depthwise convolution (eb_dw_opt.c): the direct path of
 * eb_conv2d_opt / eb_conv2d_wide_opt for groups == in_c, out_c = m * in_c (first layers with
 * one input channel included). See eb_kernels_opt.h, "Depthwise convs", for the method. */
#ifndef EB_DW_OPT_H
#define EB_DW_OPT_H

#include <stdint.h>

#include "eb_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The layer p into out8 (int8: requantized by p->shift, p->rounding, p->act) or, with out8
 * NULL, out32 (the int32 sums); bit-identical to eb_conv2d / eb_conv2d_wide. Returns 0, with
 * nothing written, for a layer the path does not take (groups != in_c, or a kernel needing
 * more than 16 table entries): the caller runs its generic path then. */
int eb_dw_conv_opt(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                   const int32_t *bias, int8_t *out8, int32_t *out32);
/* eb_pool2d(q, in, pooled) then eb_conv2d(p, pooled, weight, bias, out), bit-identical, for a
 * depthwise p (groups == in_c) whose input is q's output: with a 2x2 stride-2 max pool and
 * a 3x3 stride-1 conv the depthwise path pools each channel straight into its padded copy
 * (pooled is then only written for channels whose requantization that path does not take);
 * other shapes pool into pooled (eb_pool2d), then convolve it. */
void eb_dw_pool_conv_opt(const eb_pool_params *q, const eb_conv_params *p, const int8_t *in,
                         int8_t *pooled, const int8_t *weight, const int32_t *bias, int8_t *out);

#ifdef __cplusplus
}
#endif

#endif
