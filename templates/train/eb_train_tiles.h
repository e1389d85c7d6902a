/* edgebuild training passes tiled through L1: a convolution or pooling pass (forward, input
 * gradient, weight gradient) whose working set does not fit the L1 scratchpad runs tile by
 * tile. Tensors, weights and gradients live in L2; each tile's operands are staged into the
 * caller's L1 buffer through ebt_stage (a memcpy: the one place a DMA driver would go), the
 * ordinary kernels of eb_train.h run on the tile, and the tile's outputs are copied back.
 * Passes that fit L1 whole are not tiled and call eb_train.h directly.
 *
 * A tile is one sample, output channels [c0, c0 + channels) and output rows
 * [r0, r0 + rows) (the last of each may be smaller); samples outermost, then channel tiles,
 * then row tiles. Its input window is every input row some tap of the tile's rows reads,
 * clipped to the map: a = max(0, r0*stride_h - pad_h) to
 * b = min(in_h - 1, (r0 + rows - 1)*stride_h - pad_h + dil_h*(k_h - 1)), at full width,
 * for the input channels the tile's output channels read. The kernels run on the tile as a
 * convolution of its own (ebt_conv_tile): n = 1, in_h = b - a + 1, out_h = rows,
 * pad_h = a - (r0*stride_h - pad_h) (the padding above the window; below it the map simply
 * ends), the tile's channels and groups, the rest as the layer's. So each output value is
 * the same sum, in the same order, as in the untiled kernel (the forward pass is bit-exact
 * with it); the gradients are sums over tiles:
 *  - weight gradient: each tile adds its rows' (and sample's) partial sum into dw and db,
 *    as the untiled kernel's row range does;
 *  - input gradient: each tile adds into its input window, which overlaps the next row
 *    tile's when dil_h*(k_h - 1) > stride_h - 1 (those rows get their taps' terms in two
 *    partial sums), and a dense convolution's channel tiles each add into the whole window.
 * They equal the untiled sums up to float32 summation order.
 *
 * Channel tiles of a grouped convolution (groups > 1, out_c/groups = m) are a multiple of m
 * (whole groups) or a divisor of it (a part of one group); a dense one's are any count.
 *
 * L1 layout of a tile (floats, in this order, each region right after the last):
 *   conv forward:         x [cin_t][in_rows][in_w], w [channels][in_c/groups][k_h][k_w],
 *                         b [channels] (when b != NULL), y [channels][rows][out_w]
 *   conv input gradient:  dy [channels][rows][out_w], w (as above),
 *                         dx [cin_t][in_rows][in_w]
 *   conv weight gradient: dy [channels][rows][out_w], then with dw: x [cin_t][in_rows][in_w], dw (as w),
 *                         db [channels] (when db != NULL)
 *   pool forward:         x [channels][in_rows][in_w], y [channels][rows][out_w]
 *   pool backward:        x (max pooling only), dy [channels][rows][out_w],
 *                         dx [channels][in_rows][in_w]
 * cin_t: in_c for a dense convolution; (channels / m) * (in_c / groups) for whole groups;
 * in_c / groups for a part of one. The generated code sizes the buffer to the largest
 * tile it runs (memory.json `l1_buffer`, the plan of edgebuild/ondevice/staging.py). */
#ifndef EB_TRAIN_TILES_H
#define EB_TRAIN_TILES_H

#include "eb_train.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int rows;     /* output rows per tile (>= 1) */
    int channels; /* output channels per tile (>= 1; grouped: see above) */
} ebt_tile;

void ebt_conv_forward_tiled(const ebt_conv *p, const ebt_tile *t, const float *x,
                            const float *w, const float *b, float *y, float *l1);
void ebt_conv_backward_input_tiled(const ebt_conv *p, const ebt_tile *t, const float *dy,
                                   const float *w, float *dx, float *l1);
/* dw and db (either may be NULL) += the pass's gradients. */
void ebt_conv_backward_weight_tiled(const ebt_conv *p, const ebt_tile *t, const float *dy,
                                    const float *x, float *dw, float *db, float *l1);
void ebt_pool_forward_tiled(const ebt_pool *p, const ebt_tile *t, const float *x, float *y,
                            float *l1);
void ebt_pool_backward_tiled(const ebt_pool *p, const ebt_tile *t, const float *x,
                             const float *dy, float *dx, float *l1);

#ifdef __cplusplus
}
#endif

#endif
