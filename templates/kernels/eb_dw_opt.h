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
/* eb_dw_conv_opt (int8 out) of a layer the L1 tiler runs banded (memory.tiling: the depthwise
 * layout): the padded path's per-channel copy is l1 itself (eb_dw_band_l1_bytes(p, rows)
 * bytes, 4-byte aligned), holding `rows` output rows' padded input rows at a time (the whole
 * plane when rows >= out_h: then copied once for all the output channels that read it; else
 * bands of an even number of rows, refilled per output channel). Input, weights and bias
 * are read in place (L2, flash), each output written once straight from the sums into out.
 * A channel whose requantization the padded path does not take (a bias near the int32
 * limits) reads its plane in place; a layer it does not take at all runs eb_conv2d. */
void eb_dw_conv_banded_opt(const eb_conv_params *p, int rows, const int8_t *in,
                           const int8_t *weight, const int32_t *bias, int8_t *out, int8_t *l1);
int32_t eb_dw_band_l1_bytes(const eb_conv_params *p, int rows);
/* eb_dw_pool_conv_opt banded as eb_dw_conv_banded_opt: each channel's 2x2 max pool rows go
 * straight into l1 (the band's padded rows), so the pooled tensor is not written (but for
 * channels that path does not take; other pools: eb_pool2d into pooled, then banded). */
void eb_dw_pool_conv_banded_opt(const eb_pool_params *q, const eb_conv_params *p, int rows,
                                const int8_t *in, int8_t *pooled, const int8_t *weight,
                                const int32_t *bias, int8_t *out, int8_t *l1);

#ifdef __cplusplus
}
#endif

#endif
