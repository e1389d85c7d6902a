/* edgebuild tiled execution: layers whose working set does not fit the L1 scratchpad run
 * tile by tile. Tensors and weights live in L2 (the arena and flash); each tile's input
 * (with the halo a window needs, and zero padding materialized), weights, bias and output
 * are staged in L1 through eb_dma_copy and eb_dma_copy2d (equal blocks at a stride) — the
 * one place a DMA driver would go — and the ordinary kernels run on the tile. Results are identical to the untiled kernels.
 *
 * L1 layout of one tile slot (every region starts 4-byte aligned, in this order):
 *   conv:   input  [cin_t][in_rows][in_w + 2*pad_w]      int8, in_rows = (rows-1)*stride_h + dil_h*(k_h-1) + 1
 *           weight [oc_t][in_c/groups][k_h][k_w]         int8
 *           bias   [oc_t]                                int32 (only when bias != NULL)
 *           output [oc_t][rows][out_w]                   int8, or int32 when wide
 *   conv transposed: input [cin_t][n][in_w] int8, n <= min(in_h, (rows-1 + dil_h*(k_h-1)) / stride_h + 1)
 *           (the input rows the tile's output rows read through some tap, unpadded), then
 *           weight [cin_t][oc_t/groups_t][k_h][k_w], bias, output as for conv
 *   pool:   input  [c_t][in_rows][in_w], output [c_t][rows][out_w]   (in_rows = (rows-1)*stride_h + k_h,
 *           in_h for a tile of all out_h rows: whole planes, one block; a column tile,
 *           in_w = k_w = 1, runs as a row like a conv's)
 *   linear: input  [in_f], weight [oc_t][in_f], bias [oc_t], output [oc_t]
 * A conv tile that is a column ([cin_t][in_rows][1], k_w = 1: a 1-D layer, tiled along
 * time) is passed to the kernel as the row it is in memory: in_h = out_h = k_h = 1,
 * in_w = in_rows, out_w = rows, k_w/stride_w/dil_w = the layer's k_h/stride_h/dil_h.
 * Dense conv (groups == 1): any oc_t, cin_t = in_c, the tile is a dense conv.
 * Grouped conv (groups > 1): oc_t is a multiple of out_c/groups (or a divisor of it, so a
 * tile never spans two groups); cin_t = max(1, oc_t / (out_c/groups)) * (in_c/groups).
 * A transposed conv's tile runs with in_h = n and pad_h = y0 + pad_h - first*stride_h (first:
 * the first input row staged), which maps the tile's rows onto the whole layer's.
 * Split layout (eb_conv2d_tiled_cols with groups == 1, eb_linear_tiled_cols): the kernel
 * needs a tile's input only to build its columns (into the caller's workspace, cols->cols),
 * so the input region and the channel slots share the same bytes:
 *   at 0:             input [in_c][in_rows][in_w + 2*pad_w] (a linear layer: [in_f]),
 *                     live while a row tile's columns are built;
 *   at s * slot size: slot s = weight [oc_t][K], bias [oc_t], output [oc_t][rows][out_w]
 *                     (each 4-byte aligned), live while channel tiles run;
 *   L1 bytes = max(align4(input), slots * slot size).
 * Per row tile: stage its input, build its columns, then its channel tiles (the next one's
 * weights staged into the other slot while the current one runs); a linear layer is one
 * row tile. eb_conv_split_l1_bytes / eb_linear_split_l1_bytes give the bytes.
 * Weights and bias are staged only when a slot's channel tile changes; a dense conv's input
 * only when a slot's row tile changes; a linear layer's input once per slot. The linear kernel pointer takes no shift/rounding/activation: the
 * caller binds them in a per-layer wrapper (as it binds an optimized kernel's scratch).
 * Packed weights (1-, 2-, 4-bit: p->wbits, or the `bits` of eb_linear_tiled_packed) are
 * unpacked to int8 as they are staged: the L1 layout above, and the kernel on each tile, are
 * those of int8 weights.
 * With double buffering two slots alternate: the next tile's input is staged before the
 * current tile is computed.
 * A depthwise 3x3 pass on the optimized kernels does not come here: it runs banded
 * (eb_dw_conv_banded_opt, eb_dw_opt.h), its L1 the depthwise kernel's padded channel copy.
 * Tiles: a dense conv (groups == 1) takes output rows outer (rows per tile), output
 * channels inner (oc_t per tile); grouped and transposed convs and pools channels outer,
 * rows inner; the last tile of each may be smaller.
 */
#ifndef EB_TILING_H
#define EB_TILING_H

#include <stdint.h>

#include "eb_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int16_t rows;      /* output rows per tile (>= 1) */
    int16_t channels;  /* output channels per tile (>= 1; grouped: multiple of out_c/groups) */
    int8_t double_buffer;
} eb_tile;

/* The kernel run on every tile (the reference or an optimized one, bound by the caller). */
typedef void (*eb_conv_kernel)(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                               const int32_t *bias, void *out);
typedef void (*eb_pool_kernel)(const eb_pool_params *p, const int8_t *in, int8_t *out);
typedef void (*eb_linear_kernel)(int in_f, int out_f, const int8_t *in, const int8_t *weight,
                                 const int32_t *bias, void *out);

/* A dense conv split in two (the optimized kernels' eb_conv_cols_build / eb_conv_cols_dot):
 * build writes the columns of a tile's output pixels into cols (scratch), dot runs a channel
 * tile's weights (in L1) against them. A kernel whose dot has set-up of its own may give
 * prepare and run as well (eb_conv_cols_prepare / eb_conv_cols_run; NULL: none): the driver
 * then prepares once per row tile (its params; the layer's bias) and runs each channel
 * tile, so a channel tile costs its blocks, not the set-up too. */
typedef struct {
    void (*build)(const eb_conv_params *p, const int8_t *in, int16_t *cols);
    void (*dot)(const eb_conv_params *p, const int16_t *cols, const int8_t *weight,
                const int32_t *bias, int wide, void *out);
    int16_t *cols;
    void (*prepare)(const eb_conv_params *p, const int32_t *bias, int wide, eb_cols_job *job);
    void (*run)(const eb_cols_job *job, const int16_t *cols, const int8_t *weight,
                const int32_t *bias, int n_oc, void *out);
} eb_cols_kernel;

/* A linear layer split in two (the optimized kernels' eb_linear_expand and a per-layer
 * wrapper of eb_linear_dot binding shift, rounding, act and width): the input's column once
 * into cols (scratch), then each tile's weight rows (in L1) against it. */
typedef struct {
    void (*expand)(int in_f, const int8_t *in, int16_t *cols);
    void (*dot)(int in_f, int out_f, const int16_t *cols, const int8_t *weight,
                const int32_t *bias, void *out);
    int16_t *cols;
} eb_linear_cols;

void eb_dma_copy(void *dst, const void *src, uint32_t bytes);
void eb_dma_copy2d(void *dst, int32_t dst_stride, const void *src, int32_t src_stride,
                   int32_t blocks, uint32_t bytes);

void eb_conv2d_tiled(const eb_conv_params *p, const eb_tile *t, eb_conv_kernel kernel, int wide,
                     const int8_t *in, const int8_t *weight, const int32_t *bias, void *out,
                     int8_t *l1);
/* eb_conv2d_tiled whose dense (groups == 1) tiles run through cols in the split layout:
 * each row tile's columns are built once and every channel tile's weights run against
 * them (a grouped conv's tiles run through kernel, in the layout above). */
void eb_conv2d_tiled_cols(const eb_conv_params *p, const eb_tile *t, eb_conv_kernel kernel,
                          const eb_cols_kernel *cols, int wide, const int8_t *in,
                          const int8_t *weight, const int32_t *bias, void *out, int8_t *l1);
void eb_conv_transpose2d_tiled(const eb_conv_params *p, const eb_tile *t, eb_conv_kernel kernel,
                               int wide, const int8_t *in, const int8_t *weight,
                               const int32_t *bias, void *out, int8_t *l1);
void eb_pool2d_tiled(const eb_pool_params *p, const eb_tile *t, const int8_t *in, int8_t *out,
                     int8_t *l1);
/* eb_pool2d_tiled on a given pool kernel (eb_pool2d or eb_pool2d_opt). */
void eb_pool2d_tiled_k(const eb_pool_params *p, const eb_tile *t, eb_pool_kernel kernel,
                       const int8_t *in, int8_t *out, int8_t *l1);
void eb_linear_tiled(int in_f, int out_f, const eb_tile *t, eb_linear_kernel kernel, int wide,
                     const int8_t *in, const int8_t *weight, const int32_t *bias, void *out,
                     int8_t *l1);
/* eb_linear_tiled with packed `bits`-bit weights (bits 1, 2, 4; 0: int8). */
void eb_linear_tiled_packed(int in_f, int out_f, int bits, const eb_tile *t,
                            eb_linear_kernel kernel, int wide, const int8_t *in,
                            const int8_t *weight, const int32_t *bias, void *out, int8_t *l1);
/* eb_linear_tiled in the split layout: the input expanded once and every tile's weight rows
 * (`bits`-bit packed ones unpacked to int8 as they are staged; 0: int8) run through
 * cols->dot. */
void eb_linear_tiled_cols(int in_f, int out_f, int bits, const eb_tile *t,
                          const eb_linear_cols *cols, int wide, const int8_t *in,
                          const int8_t *weight, const int32_t *bias, void *out, int8_t *l1);

/* The split paths on the reference kernels (the -DEB_REFERENCE_KERNELS build of a project
 * whose plan chose the split layout): the "columns" are the staged input copied into the
 * workspace (in_c * in_h * in_w bytes of the tile's params; in_f bytes), the dot the
 * reference kernel on them. Workspace: EB_REF_COLS_SCRATCH int16. */
#define EB_REF_COLS_SCRATCH(bytes) (((int32_t)(bytes) + 1) / 2)
void eb_ref_cols_build(const eb_conv_params *p, const int8_t *in, int16_t *cols);
void eb_ref_cols_dot(const eb_conv_params *p, const int16_t *cols, const int8_t *weight,
                     const int32_t *bias, int wide, void *out);
void eb_ref_linear_expand(int in_f, const int8_t *in, int16_t *cols);
void eb_ref_linear_dot(int in_f, int out_f, const int16_t *cols, const int8_t *weight,
                       const int32_t *bias, int shift, int rounding, int act, int wide,
                       void *out);

#ifdef __cplusplus
}
#endif

#endif
