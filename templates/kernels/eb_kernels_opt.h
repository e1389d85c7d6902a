/* edgebuild optimized int8 kernels (Cortex-M4 DSP extension; portable C elsewhere).
 *
 * Every function here gives bit-identical results to its reference in eb_kernels.c
 * (eb_conv2d -> eb_conv2d_opt, eb_conv2d_wide -> eb_conv2d_wide_opt, eb_linear ->
 * eb_linear_opt, eb_linear_wide -> eb_linear_wide_opt): same arguments plus a scratch buffer,
 * same weight layout ([out][in / groups][k_h][k_w] int8 as the code generator stores it, only
 * byte-aligned; no repacking), same numerics (eb_kernels.h; requantization is eb_requantize).
 * Packed 1-, 2-, 4-bit weights (p->wbits; eb_linear_packed(_wide)_opt) are read in place by
 * the same dual-MAC loops, one shift-and-mask per 4 weights (eb_kernels_opt.c, "packed
 * weights"); the depthwise path unpacks one channel's taps onto the stack. Same scratch.
 * The transposed convolution has no variant here: Cortex-M4 projects call the reference
 * eb_conv_transpose2d(_wide) loops for it.
 *
 * Method (CMSIS-NN style, im2col + dual 16-bit MACs): the receptive fields of 4 output pixels
 * are copied into int16 columns in scratch, each group of 4 values stored as [a0, a2, a1, a3]
 * and zero-padded to a multiple of 4. The weights are read 4 at a time as one (unaligned)
 * 32-bit word; SXTB16 of the word and of the word rotated by 8 give [w0, w2] and [w1, w3],
 * which SMLAD multiplies against the column pairs: 2 MACs per instruction. The conv inner
 * loop computes 1 output channel x 4 output pixels (4 accumulators; the column words of all
 * four pixels come in with LDM). For 4 neighbouring pixels of a stride_w == 1 conv the
 * columns are built from word loads of the input (one word = the 4 pixels' values for one
 * tap) and a 4x4 byte transpose; other pixels (stride_w > 1, row ends) are gathered byte by
 * byte. This path takes every conv, dense or grouped (K = in_c / groups * k_h * k_w per
 * group).
 *
 * A dense conv with one output pixel whose window is the whole unpadded input (k = in_h x
 * in_w, pad 0) is a linear layer over the input: it runs as eb_linear_opt does.
 *
 * Depthwise convs (groups == in_c, out_c = m * in_c for any channel multiplier m; this
 * includes first layers with one input channel, in_c == groups == 1, m = out_c) take a
 * direct path instead, without im2col: output channel oc reads input channel
 * oc / m only, so each pixel is summed straight from word loads of its input rows, the word
 * x = row[q .. q + 3] giving SXTB16(x) = [x0, x2] and SXTB16(x ROR 8) = [x1, x3] for SMLAD
 * against weight pairs laid out to match (see eb_dw_opt.c):
 *  - 3-tap rows (3x3 and 1-D k = 3; stride_w = dil_w = 1, in_w >= 4, pad_w <= 3): two
 *    pixels per step with the weights in registers, per tap row 1 load, 2 SXTB16 and 4 MACs
 *    (SMLAD for taps 0 and 2, SMLABB/SMLATB-type for tap 1); a 3x3 with stride_h = dil_h = 1
 *    and the usual requantization (act none or relu, a right shift) copies each channel with
 *    its zero padding into the scratch (up to 2 KiB, in bands of rows if need be) and goes by
 *    columns over it, two output rows per step sharing two input rows, no edge cases (on
 *    the M4 a hand-scheduled inline-asm loop: 57 instructions per 36 MACs);
 *  - other shapes (any kernel size, stride, dilation, padding): a per-channel table of
 *    weight pairs per tap row and word offset, pixels in pairs sharing loads when stride_w
 *    is 1 (dil_w 1 or even), else one by one; a kernel needing more than 16 table entries
 *    (k_h * ceil(((k_w - 1) * dil_w + 1) / 4), e.g. 9x9) falls back to the im2col path;
 *  - 1-D layers laid out vertically ([C][L][1]) run as [C][1][L] (the same bytes);
 *  - words overhanging a row end are built from in-row loads shifted so zeros come in, tap
 *    rows in the padding are skipped: nothing is read outside the input.
 * The depthwise path is about 7.5 KiB of Cortex-M4 code (arm-none-eabi-gcc -O2), linked in
 * with eb_conv2d_opt whether or not a model has depthwise layers; compiling with
 * -DEB_OPT_NO_DEPTHWISE leaves it out and sends depthwise convs through the im2col path
 * (the tests also build it so, to measure the difference).
 *
 * With __ARM_FEATURE_DSP the ACLE intrinsics (and a few one-instruction inline asm helpers:
 * SXTB16 ROR #8, PKHBT/PKHTB, LDRD, LDMIA) are used; elsewhere, or with -DEB_OPT_PORTABLE,
 * portable C functions with identical semantics run the same algorithm (host tests).
 *
 * Scratch: the caller passes a 4-BYTE-ALIGNED int16_t buffer of at least
 *   EB_CONV_OPT_SCRATCH(in_c / groups, k_h, k_w)  elements for eb_conv2d(_wide)_opt
 *     = 4 columns of round_up_4(in_per_group * k_h * k_w) int16, and
 *   EB_LINEAR_OPT_SCRATCH(in_f)                   elements for eb_linear(_wide)_opt
 *     = 1 column of round_up_4(in_f) int16.
 * (On the M4 a misaligned scratch faults: LDRD/LDM need word alignment.) A depthwise layer
 * needs the larger of that (what the im2col fallback needs, 4 * round_up_4(k_h * k_w)) and,
 * when its padded path runs, EB_DW_OPT_SCRATCH bytes: its channel copy. The contents are not preserved between calls, so one buffer sized
 * for the largest layer serves every layer. The kernels write nothing outside out[] and
 * scratch; besides, the conv kernels use up to about 1 KiB of stack (the depthwise path,
 * its weight table included; the im2col path about 0.5 KiB;
 * arm-none-eabi-gcc -O2).
 */
#ifndef EB_KERNELS_OPT_H
#define EB_KERNELS_OPT_H

#include <stdint.h>

#include "eb_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* im2col length: n values rounded up to a multiple of 4. */
#define EB_OPT_ROUND4(n) ((((int32_t)(n)) + 3) & ~(int32_t)3)

/* int16 elements of scratch needed by eb_conv2d_opt / eb_conv2d_wide_opt. */
#define EB_CONV_OPT_SCRATCH(in_per_group, k_h, k_w) \
    (4 * EB_OPT_ROUND4((int32_t)(in_per_group) * (k_h) * (k_w)))

/* The im2col path's padded band (eb_kernels_opt.c, eb_conv_band): a conv with padding whose
 * group's in_c / groups x k_h input rows, each zero-padded to EB_CONV_BAND_PITCH bytes (8 of
 * slack after the width padding: a block's words read up to 7 past its first pixel), take
 * at most EB_CONV_BAND_BYTES copies them an output row at a time into the scratch after the
 * columns, its taps' offsets after it: EB_CONV_BAND_SCRATCH elements in all (ops.im2col_band
 * claims them). */
#define EB_CONV_BAND_BYTES 1536
#define EB_CONV_BAND_TAPS 512 /* a group's taps: their int32 offsets follow the band */
#define EB_CONV_BAND_PITCH(in_w, pad_w) \
    (((int32_t)(in_w) + 2 * (int32_t)(pad_w) + 8 + 3) & ~(int32_t)3)
#define EB_CONV_BAND_SCRATCH(in_per_group, k_h, k_w, in_w, pad_w)                     \
    (EB_CONV_OPT_SCRATCH(in_per_group, k_h, k_w) +                                     \
     (int32_t)(in_per_group) * (k_h) * EB_CONV_BAND_PITCH(in_w, pad_w) / 2 +           \
     2 * (int32_t)(in_per_group) * (k_h) * (k_w))

/* The column kernels over a copy (eb_dw_opt.c, eb_colc_layer): a padded dense or grouped
 * conv's group copied as int16 channel pairs, one word a pair and padded pixel, at most
 * EB_COL_COPY_BYTES, after EB_CONV_OPT_SCRATCH's table room (the records): `words` a layer
 * (ops.column_copy claims them for an untiled layer that takes the copy). */
#define EB_COL_COPY_BYTES 12288
#define EB_COL_COPY_SCRATCH(in_per_group, k_h, k_w, words) \
    (EB_CONV_OPT_SCRATCH(in_per_group, k_h, k_w) + 2 * (int32_t)(words))

/* The column kernels' rows two at a time (eb_dw_opt.c, eb_col1_rows2_s1 / _s2): their
 * records, 16 bytes a pair of the two rows' union of tap rows -- in_per_group x k_w x
 * (k_h + rows_apart) entries, rows_apart = stride_h / dil_h -- in the scratch
 * (ops.column_rows claims them). */
#define EB_COL_ROWS2_SCRATCH(in_per_group, k_h, k_w, rows_apart) \
    (8 * (((int32_t)(in_per_group) * (k_w) * ((k_h) + (rows_apart)) + 1) / 2))

/* The depthwise path's padded channel copy (eb_dw_opt.c, "3x3, stride 1"), in the caller's
 * scratch: at most EB_DW_PAD_BYTES of padded rows (L = in_w + pad_w bytes apart, and pad_w
 * more), the whole plane (out_h + 2 rows) when it fits, else a band of the most rows an even
 * count of output rows needs (at least 2), and EB_DW_PAD_SLACK bytes its word stores may
 * write past them. EB_DW_OPT_SCRATCH(in_w, pad_w, out_h): the BYTES a layer the padded path
 * takes needs (a depthwise 3x3, stride 1, dilation 1, in_w >= 4, pad_w <= 3, out_h and
 * out_w >= 2, int8 out, act none or relu); 0 when not even a band of 2 rows fits (the path
 * does not take it then). Other depthwise layers need no scratch. */
#define EB_DW_PAD_BYTES 2048
#define EB_DW_PAD_SLACK 4
#define EB_DW_PAD_FIT(in_w, pad_w) \
    ((EB_DW_PAD_BYTES - (int32_t)(pad_w)) / ((int32_t)(in_w) + (pad_w)) - 2)
#define EB_DW_PAD_ROWS(in_w, pad_w, out_h)                                          \
    ((int32_t)(out_h) <= EB_DW_PAD_FIT(in_w, pad_w) ? (int32_t)(out_h)                \
                                                    : EB_DW_PAD_FIT(in_w, pad_w) & ~(int32_t)1)
#define EB_DW_OPT_SCRATCH(in_w, pad_w, out_h)                                                 \
    (EB_DW_PAD_ROWS(in_w, pad_w, out_h) < 2                                                   \
         ? 0                                                                                  \
         : (EB_DW_PAD_ROWS(in_w, pad_w, out_h) + 2) * ((int32_t)(in_w) + (pad_w)) + (pad_w) + \
               EB_DW_PAD_SLACK)

/* The depthwise path's tile kernel (eb_dw_opt.c: any kernel the 3-tap kernels do not take)
 * copies a patch of the input channel as int16 into the caller's scratch: at most
 * EB_DW_TILE_SCRATCH elements, which a depthwise layer (one input channel too) the 3-tap
 * kernels do not take claims beside EB_CONV_OPT_SCRATCH. */
#define EB_DW_TILE_SCRATCH ((EB_DW_PAD_BYTES + 1) / 2)
/* Of it, a dense or grouped conv's frame (its group's channels side by side) uses the first
 * EB_DW_GROUP_PATCH: the tile kernel's estimates against the column kernels and the GEMM,
 * which decide whether it takes such a conv, were fitted to tiles of that patch (with all of
 * it, 8 -> 1 8x4 left the column kernels and ran 26 % slower). */
#define EB_DW_GROUP_PATCH 512

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
/* The tiled driver's split dense conv (groups == 1; eb_tiling.h, eb_conv2d_tiled_cols):
 * eb_conv_cols_build writes the im2col columns of all p's output pixels into cols
 * (EB_CONV_COLS_SCRATCH int16), eb_conv_cols_dot runs p->out_c channels' weights against
 * them (out: int8, or int32 when wide). Bit-identical to eb_conv2d(_wide). */
#define EB_CONV_COLS_SCRATCH(pixels, in_c, k_h, k_w) \
    (EB_OPT_ROUND4(pixels) * EB_OPT_ROUND4((int32_t)(in_c) * (k_h) * (k_w)))
void eb_conv_cols_build(const eb_conv_params *p, const int8_t *in, int16_t *cols);
void eb_conv_cols_dot(const eb_conv_params *p, const int16_t *cols, const int8_t *weight,
                      const int32_t *bias, int wide, void *out);
/* eb_conv_cols_dot in two: eb_conv_cols_prepare once per row tile (p as built, bias: the
 * layer's p->out_c biases or NULL; eb_cols_job in eb_kernels.h), then eb_conv_cols_run per
 * channel tile (n_oc rows of weights and bias against the columns). */
void eb_conv_cols_prepare(const eb_conv_params *p, const int32_t *bias, int wide,
                          eb_cols_job *job);
void eb_conv_cols_run(const eb_cols_job *job, const int16_t *cols, const int8_t *weight,
                      const int32_t *bias, int n_oc, void *out);
/* The tiled driver's split linear (eb_tiling.h, eb_linear_tiled_cols): eb_linear_expand
 * writes the input's column (EB_LINEAR_OPT_SCRATCH(in_f) int16), eb_linear_dot runs out_f
 * weight rows against it (out: int8 requantized, or int32 when wide). Bit-identical to
 * eb_linear(_wide). */
void eb_linear_expand(int in_f, const int8_t *in, int16_t *cols);
void eb_linear_dot(int in_f, int out_f, const int16_t *cols, const int8_t *weight,
                   const int32_t *bias, int shift, int rounding, int act, int wide, void *out);
/* eb_pool2d with word-wide max (SSUB8/SEL) and sums (USADA8); eb_pool_opt.c. */
void eb_pool2d_opt(const eb_pool_params *p, const int8_t *in, int8_t *out);
/* eb_add four elements at a time (QADD8 for two inputs, halfword sums for more); eb_pool_opt.c. */
void eb_add_opt(int n, int count, const int8_t *const *inputs, int act, int8_t *out);
/* eb_linear_packed(_wide) (eb_kernels.h): packed 1-, 2-, 4-bit weights; the same scratch. */
void eb_linear_packed_opt(int in_f, int out_f, int bits, const int8_t *in, const int8_t *weight,
                          const int32_t *bias, int shift, int rounding, int act, int8_t *out,
                          int16_t *scratch);
void eb_linear_packed_wide_opt(int in_f, int out_f, int bits, const int8_t *in,
                               const int8_t *weight, const int32_t *bias, int32_t *out,
                               int16_t *scratch);

#ifdef __cplusplus
}
#endif

#endif
