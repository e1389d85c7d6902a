/* edgebuild optimized depthwise convolution (Cortex-M4 DSP extension; portable C elsewhere):
 * eb_dw_conv_opt, the direct path eb_conv2d(_wide)_opt take for groups == in_c (see
 * eb_kernels_opt.h for the method, eb_kernels.h for the numerics contract). Bit-identical to
 * eb_conv2d / eb_conv2d_wide (eb_kernels.c). C99, no allocation; the padded path's channel
 * copy goes in the caller's scratch (EB_DW_OPT_SCRATCH bytes, eb_kernels_opt.h). */
#include "eb_dw_opt.h"
#include "eb_kernels_opt.h"

#include <string.h>

#include "eb_simd.h"

#if defined(__GNUC__)
#define EB_NOINLINE __attribute__((noinline))
#else
#define EB_NOINLINE
#endif

/* The taps t in [0, k) with 0 <= start + t * dil < size: [*lo, *hi). */
static void eb_tap_range(int start, int dil, int k, int size, int *lo, int *hi)
{
    int l = 0, h = k;
    if (size <= 0 || start >= size) {
        l = h = 0;
    } else {
        if (start < 0) {
            l = (-start + dil - 1) / dil;
        }
        if (start + (k - 1) * dil >= size) {
            h = (size - 1 - start) / dil + 1;
        }
        if (l > h) {
            l = h;
        }
    }
    *lo = l;
    *hi = h;
}

/* Four input bytes row[ix .. ix + 3] as a word, those outside [0, in_w) as zero. */
static uint32_t eb_row_word(const int8_t *row, int ix, int in_w)
{
    uint32_t v = 0;
    int j;
    for (j = 0; j < 4; ++j) {
        if (ix + j >= 0 && ix + j < in_w) {
            v |= (uint32_t)(uint8_t)row[ix + j] << (8 * j);
        }
    }
    return v;
}

/* Where the results go: int8 (out8, requantized by shift, rounding, act) or int32 (out32). */
typedef struct {
    int8_t *out8;
    int32_t *out32;
    int shift, rounding, act;
} eb_dw_sink;

/* ---- depthwise convolution ----------------------------------------------------------------
 * groups == in_c (one input channel per group; 1 too), out_c = m * in_c: output channel oc
 * reads input channel oc / m only, so there is no im2col and no scratch. Each output pixel
 * is summed straight from the input rows of its tap rows with word loads: the word
 * x = row[q .. q + 3] gives the int16 pairs SXTB16(x) = [x0, x2] and SXTB16_ROR8(x) =
 * [x1, x3]. Offsets count from a pixel's first tap (tap kx at offset kx * dil_w).
 *
 * 3-tap rows (k_w == 3, stride_w == dil_w == 1, k_h 1 or 3 -- 3x3 and 1-D k = 3 -- with
 * in_w >= 4 and pad_w <= 3) have their own kernels: two neighbouring pixels at a time, the
 * weights in registers as [w0, w2] per tap row and the w1 of two rows in one word; per tap
 * row one load, two SXTB16 and four MACs:
 *   p0 += [w0, w2].[x0, x2] (SMLAD) + x1 * w1 (SMLABB/SMLABT),
 *   p1 += [w0, w2].[x1, x3] (SMLAD) + x2 * w1 (SMLATB/SMLATT).
 * Pairs start at x = 0, 2, ...; with an odd out_w the last pair is (out_w - 2, out_w - 1),
 * one pixel computed twice. A 3x3 with stride_h == dil_h == 1, pad_h <= 1 and in_h >= 4
 * goes by columns of pixel pairs, two output rows per step (input rows r .. r + 3, the middle
 * two loaded once), the padding rows at both ends in the same call; an odd row out and
 * every other 3-tap layer go row by row (tap rows in the padding: zero weights). A pair
 * overhanging a row end (by 1..3 bytes, as pad_w <= 3) gets its words from the row's first
 * or last word shifted so that zeros come in.
 * Other shapes use a per-channel table of entries (ky * dil_h * in_w + 4i, W1, W2) over the
 * tap rows in range, W1 = [w at offset 4i, w at 4i + 2], W2 = [w at 4i + 1, w at 4i + 3]
 * (zero where no tap lands): one pixel is SMLAD(W1, SXTB16(x)) + SMLAD(W2, SXTB16_ROR8(x))
 * per entry. With stride_w == 1 pixels go in pairs sharing loads: dil_w == 1,
 * p1 += W1.[x1, x3] + W2.[x2, x4] ([x2, x4] = SXTB16 of the word at 4i + 2; in a row's last
 * entry, when k_w % 4 != 0, x2 * w1 by SMLATB); even dil_w (taps at even offsets only),
 * p1 += W1.[x1, x3]. Other strides and odd dilations > 1 go one pixel at a time. Pixels
 * whose words leave the row go one by one, the words shifted as above (byte by byte when
 * in_w < 4; a word wholly outside adds nothing). More than EB_DW_MAX_ENTRIES entries (e.g.
 * 9x9): the generic grouped path.
 * 1-D layers laid out vertically ([C][L][1], k_w == 1, pad_w == 0) are the same bytes as
 * [C][1][L] and run as such.
 * Requantization with a right shift (or none) and act none/relu/abs starts the sums at
 * bias + 2^(s-1) (half up; when no sum can then overflow int32) and is an ASR and an
 * SSAT #8 / USAT #7; the NONE and RELU loops are specialised, every other case (ABS, wide
 * outputs, left shifts, biases near the int32 limits) stores through a call. */

#define EB_DW_MAX_ENTRIES 16 /* table entries on the stack (16 bytes each) */

/* A project compiles the kernels its layers take (eb_config.h; edgebuild.ops.conv_path:
 * depthwise_paths): EB_OPT_NO_DW_THREE_TAP leaves out the 3-tap kernels (3x3 and 1-D k = 3
 * layers then take the others), EB_OPT_NO_DW_TILE the tile kernel, EB_OPT_NO_DW_COLUMN the
 * column kernels, EB_OPT_NO_DW_TABLE the table kernel and the per-channel scale (their
 * layers then take the next of these, or the generic grouped path). Either way every layer
 * stays exact: a kernel left out only sends its layers to the next path. */
#ifdef EB_OPT_NO_DW_THREE_TAP
#define EB_DW_THREE_TAP 0
#else
#define EB_DW_THREE_TAP 1
#endif
/* EB_OPT_NO_DW_THREE_TAP_PAIR leaves out the 3-tap rows' two channels a pass (a multiplier
 * >= 2 on the rows the padded path does not take: ops.dw_rows.three_tap_pair). */
#if defined(EB_OPT_NO_DW_THREE_TAP_PAIR) || !EB_DW_THREE_TAP
#define EB_DW3_PAIRS 0
#else
#define EB_DW3_PAIRS 1
#endif
/* EB_OPT_NO_DW_THREE_TAP_LINE leaves out a lone channel's 1-D rows in quads (eb_dw3_line:
 * ops.dw_rows.three_tap_line); such rows then take the pixel pairs. */
#if defined(EB_OPT_NO_DW_THREE_TAP_LINE) || !EB_DW_THREE_TAP
#define EB_DW3_LINE 0
#else
#define EB_DW3_LINE 1
#endif
#ifdef EB_OPT_NO_DW_TILE
#define EB_DW_TILE 0
#else
#define EB_DW_TILE 1
#endif
/* Within the tile kernel, its loops specialised to a frame (ops.conv_path.tile_paths): one
 * channel with outputs along the rows at stride 1 (EB_OPT_NO_DW_TILE_S1) or 2 (_S2) or in
 * any frame (_ONE), two channels of one input channel along the rows at stride 1 (_PAIR_S1)
 * or 2 (_PAIR_S2) or in any frame (_PAIR). A specialised loop left out sends its layers to
 * the loop of any frame; with no loop for a layer's frame the tile kernel declines it
 * (eb_dw_tile_runs: it then takes the table kernel or im2col). */
#ifdef EB_OPT_NO_DW_TILE_ONE
#define EB_DW_TILE_ONE 0
#else
#define EB_DW_TILE_ONE 1
#endif
#ifdef EB_OPT_NO_DW_TILE_S1
#define EB_DW_TILE_S1 0
#else
#define EB_DW_TILE_S1 1
#endif
#ifdef EB_OPT_NO_DW_TILE_S2
#define EB_DW_TILE_S2 0
#else
#define EB_DW_TILE_S2 1
#endif
/* The one-channel rows at stride 1 unrolled for rows of EB_DW_ROW1_LONG_PAIRS tap pairs or
 * more (EB_OPT_NO_DW_TILE_LONG leaves them out: those rows then loop). */
#ifdef EB_OPT_NO_DW_TILE_LONG
#define EB_DW_ROW1_LONG 0
#else
#define EB_DW_ROW1_LONG 1
#endif
#define EB_DW_ROW1_LONG_PAIRS 5
/* ... and rows of exactly 2, 3 or 4 tap pairs straight, one form per count and stride:
 * EB_DW_FIX<P>_<s>(...) keeps its arguments where the form is linked
 * (EB_OPT_NO_DW_TILE_FIX2 / 3 / 4, _FIX2_S2 / 3_S2 / 4_S2 leave them out: those rows loop). */
#ifdef EB_OPT_NO_DW_TILE_FIX2
#define EB_DW_FIX2_1(...)
#else
#define EB_DW_FIX2_1(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_DW_TILE_FIX2_S2
#define EB_DW_FIX2_2(...)
#else
#define EB_DW_FIX2_2(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_DW_TILE_FIX3
#define EB_DW_FIX3_1(...)
#else
#define EB_DW_FIX3_1(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_DW_TILE_FIX3_S2
#define EB_DW_FIX3_2(...)
#else
#define EB_DW_FIX3_2(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_DW_TILE_FIX4
#define EB_DW_FIX4_1(...)
#else
#define EB_DW_FIX4_1(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_DW_TILE_FIX4_S2
#define EB_DW_FIX4_2(...)
#else
#define EB_DW_FIX4_2(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_DW_TILE_PAIR_S1
#define EB_DW_TILE_PAIR_S1 0
#else
#define EB_DW_TILE_PAIR_S1 1
#endif
#ifdef EB_OPT_NO_DW_TILE_PAIR_S2
#define EB_DW_TILE_PAIR_S2 0
#else
#define EB_DW_TILE_PAIR_S2 1
#endif
#ifdef EB_OPT_NO_DW_TILE_PAIR
#define EB_DW_TILE_PAIR 0
#else
#define EB_DW_TILE_PAIR 1
#endif
/* The one-tap-pair rows (a 1x1 or 1x2 kernel in the frame) along the rows at stride 1 with
 * their shift an immediate (EB_OPT_NO_DW_TILE_TAP1 leaves them out: such rows then shift by
 * a register; ops.conv_path.tile_paths). */
#if defined(EB_OPT_NO_DW_TILE_TAP1) || defined(EB_OPT_NO_DW_TILE)
#define EB_DW_TAP1 0
#else
#define EB_DW_TAP1 1
#endif
/* The fan (EB_OPT_NO_DW_FAN): the many output channels of one input channel (a dense conv
 * of one input channel, a multiplier of 4 or more) over a tap pair or four, the pixels' tap
 * words held while the channels' weights stream (eb_dw_fan_tile). Left out, such a layer
 * takes the tile kernel's other loops. */
#ifdef EB_OPT_NO_DW_FAN
#define EB_DW_FAN 0
#else
#define EB_DW_FAN 1
#endif
/* A turned frame's patch copied two rows at a time (eb_dw_tile_fill_turned): with the loops
 * such a frame runs (of any frame: "dw_tile_one", "dw_tile_pair"; the fan); else
 * eb_dw_tile_fill copies it too, a value at a time. */
#define EB_DW_TURNED (EB_DW_TILE_ONE || EB_DW_TILE_PAIR || EB_DW_FAN)
/* The tile kernel's row functions requantize by an immediate too (eb_dw_tile_init): 8
 * (EB_OPT_NO_DW_TILE8 leaves those out) or 16 (EB_OPT_NO_DW_TILE16); a layer whose form is
 * left out runs its rows in C. */
#if defined(EB_OPT_NO_DW_TILE8) || defined(EB_OPT_NO_DW_TILE)
#define EB_DW_TILE8 0
#else
#define EB_DW_TILE8 1
#endif
#if defined(EB_OPT_NO_DW_TILE16) || defined(EB_OPT_NO_DW_TILE)
#define EB_DW_TILE16 0
#else
#define EB_DW_TILE16 1
#endif
/* A selector's case: fn_ for stride s_, mode mode_ and shift c_. */
#define EB_DW_PICK(fn_, s_, mode_, c_)                                                       \
    if (s == (s_) && mode == (mode_) && c == (c_)) {                                         \
        return fn_;                                                                          \
    }
/* A row function selector's cases for stride s_, the forms linked (functions pre<s_>_relu_8
 * ...). */
#define EB_DW_ROW_PICKS(pre, s_)                                                             \
    EB_DW_R8(EB_DW_PICK(pre##s_##_relu_8, s_, EB_DW_RELU, 8))                                \
    EB_DW_R16(EB_DW_PICK(pre##s_##_relu_16, s_, EB_DW_RELU, 16))                             \
    EB_DW_N8(EB_DW_PICK(pre##s_##_none_8, s_, EB_DW_NONE, 8))                                \
    EB_DW_N16(EB_DW_PICK(pre##s_##_none_16, s_, EB_DW_NONE, 16))
/* Its requantization shifts by an immediate (eb_dw_fan_tile): 8 for a layer's right shift of
 * 0..8 (EB_OPT_NO_DW_FAN8 leaves it out), 16 for 9..16 (EB_OPT_NO_DW_FAN16). */
#if defined(EB_OPT_NO_DW_FAN8) || !EB_DW_FAN
#define EB_DW_FAN8 0
#else
#define EB_DW_FAN8 1
#endif
#if defined(EB_OPT_NO_DW_FAN16) || !EB_DW_FAN
#define EB_DW_FAN16 0
#else
#define EB_DW_FAN16 1
#endif
/* Dense and grouped convs on the tile kernel (EB_OPT_NO_DW_GROUP; eb_dw_group_tile): left
 * out, the kernel's patch holds one channel (EB_DW_CHANS), its loops those of before. */
#ifdef EB_OPT_NO_DW_GROUP
#define EB_DW_GROUP 0
#else
#define EB_DW_GROUP 1
#endif
#define EB_DW_CHANS(t) (EB_DW_GROUP ? (t)->chans : 1)
#ifdef EB_OPT_NO_DW_COLUMN
#define EB_DW_COLUMN 0
#else
#define EB_DW_COLUMN 1
#endif
/* The column kernels at stride 2 along the rows (EB_OPT_NO_DW_COLUMN_S2): left out, such a
 * layer takes the next path. */
#if defined(EB_OPT_NO_DW_COLUMN_S2) || !EB_DW_COLUMN
#define EB_DW_COLUMN_S2 0
#else
#define EB_DW_COLUMN_S2 1
#endif
/* ... and for groups of several input channels (EB_OPT_NO_DW_COLUMN_DENSE): their tap table
 * across channels and kernel columns, width padding's edge outputs, a 1x1 conv's plane as
 * one row. Left out, such a layer takes the next path (a depthwise model does not carry
 * them). */
/* ... one channel's rows two at a time (EB_OPT_NO_DW_COLUMN_ROWS2; "column rows two at a
 * time" below): left out, they run one at a time. */
#if defined(EB_OPT_NO_DW_COLUMN_ROWS2) || !EB_DW_COLUMN
#define EB_DW_COLUMN_ROWS2 0
#else
#define EB_DW_COLUMN_ROWS2 1
#endif
#if defined(EB_OPT_NO_DW_COLUMN_DENSE) || !EB_DW_COLUMN
#define EB_DW_COLUMN_DENSE 0
#else
#define EB_DW_COLUMN_DENSE 1
#endif
/* ... and of them the layers run over an int16 copy of each group's channel pairs
 * (EB_OPT_NO_DW_COLUMN_COPY; "the column kernels over a copy" below): left out, those run
 * by tap pairs from the input. */
#if defined(EB_OPT_NO_DW_COLUMN_COPY) || !EB_DW_COLUMN_DENSE
#define EB_DW_COLUMN_COPY 0
#else
#define EB_DW_COLUMN_COPY 1
#endif
#ifdef EB_OPT_NO_DW_TABLE
#define EB_DW_TABLE 0
#else
#define EB_DW_TABLE 1
#endif
/* The output forms whose stores the kernels specialise (eb_config.h: EB_OPT_NO_Q_RELU,
 * _NONE, _ABS, as for eb_kernels_opt.c): a form no layer of the model has is stored by the
 * generic code (eb_dw_put), its specialised loops left out. */
#ifdef EB_OPT_NO_Q_RELU
#define EB_DW_HAS_RELU 0
#else
#define EB_DW_HAS_RELU 1
#endif
#ifdef EB_OPT_NO_Q_NONE
#define EB_DW_HAS_NONE 0
#else
#define EB_DW_HAS_NONE 1
#endif
#ifdef EB_OPT_NO_Q_ABS
#define EB_DW_HAS_ABS 0
#else
#define EB_DW_HAS_ABS 1
#endif
/* A row function's arguments where the mode (RELU, NONE) and the shift's form (8, 16) are
 * linked, else nothing. */
#if EB_DW_HAS_RELU && EB_DW_TILE8
#define EB_DW_R8(...) __VA_ARGS__
#else
#define EB_DW_R8(...)
#endif
#if EB_DW_HAS_RELU && EB_DW_TILE16
#define EB_DW_R16(...) __VA_ARGS__
#else
#define EB_DW_R16(...)
#endif
#if EB_DW_HAS_NONE && EB_DW_TILE8
#define EB_DW_N8(...) __VA_ARGS__
#else
#define EB_DW_N8(...)
#endif
#if EB_DW_HAS_NONE && EB_DW_TILE16
#define EB_DW_N16(...) __VA_ARGS__
#else
#define EB_DW_N16(...)
#endif

/* Kernels: 3-tap rows; the table kernel with pixel pairs (dil_w 1, even dil_w) or single. */
enum { EB_DW_K3, EB_DW_PAIR_D1, EB_DW_PAIR_EVEN, EB_DW_SINGLE };
/* Outputs: int32; int8 by ASR and SSAT/USAT (act none, relu, abs); int8 by eb_requantize. */
enum { EB_DW_WIDE, EB_DW_NONE, EB_DW_RELU, EB_DW_ABS, EB_DW_GENERIC };

#if defined(__GNUC__)
#define EB_INLINE static inline __attribute__((always_inline))
#else
#define EB_INLINE static inline
#endif

typedef struct {
    int32_t off, row; /* ky * dil_h * in_w + 4i, ky * dil_h * in_w */
    uint32_t w1, w2;  /* weight pairs at offsets [4i, 4i + 2] and [4i + 1, 4i + 3] */
} eb_dw_entry;

typedef struct {
    int in_h, in_w, out_h, out_w, k_h, k_w, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    int kind, odd; /* odd: a tap at an odd offset (W2 used) */
    int nf, nl;    /* table entries per tap row: nf "full" ones, nl (0 or 1) "last" ones */
    int ext;       /* bytes a pixel group reads per tap row, from its first pixel's offset 0 */
    int x0, span;  /* table kernel: the output columns whose groups read inside the rows */
    const eb_pool_params *pool; /* a fused 2x2 max pool before the conv (padded path), or NULL */
} eb_dw_geom;

typedef struct {
    int8_t *out8;
    int32_t *out32;
    int mode, s; /* s: the right shift of the NONE / RELU / ABS modes */
    int shift, rounding, act;
} eb_dw_out;

/* The int8 result of acc in a narrow mode. */
EB_INLINE int8_t eb_dw_q8(const int mode, int32_t acc, int s, int shift, int rounding, int act)
{
    int32_t v;
    switch (mode) {
    case EB_DW_NONE:
        v = eb_ssat8(acc >> s);
        break;
    case EB_DW_RELU:
        v = eb_usat7(acc >> s);
        break;
    case EB_DW_ABS:
        v = eb_ssat8(acc >> s);
        v = eb_usat7(v < 0 ? -v : v);
        break;
    default:
        return eb_requantize(acc, shift, rounding, act);
    }
    return (int8_t)v;
}

static EB_NOINLINE void eb_dw_put(const eb_dw_out *o, int32_t index, int32_t acc)
{
    if (o->mode == EB_DW_WIDE) {
        o->out32[index] = acc;
    } else {
        o->out8[index] = eb_dw_q8(o->mode, acc, o->s, o->shift, o->rounding, o->act);
    }
}

/* ---- 3-tap rows ---- */

/* Requantization modes of the specialised loops: EB_DW_NONE, EB_DW_RELU or, for every other
 * mode (read from the eb_dw_out at run time, stored by a call), EB_DW_ANY. */
#define EB_DW_ANY (-1)

/* One tap row's word x against weights [w0, w2] (w02) and w1 (bottom or top half of w1). */
EB_INLINE void eb_dw3_mac(uint32_t x, uint32_t w02, uint32_t w1, const int top, int32_t *a0,
                          int32_t *a1)
{
    const uint32_t lo = eb_sxtb16(x), hi = eb_sxtb16_ror8(x); /* [x0, x2], [x1, x3] */
    *a0 = eb_smlad(w02, lo, *a0);
    *a1 = eb_smlad(w02, hi, *a1);
    if (top) {
        *a0 = eb_smlabt(hi, w1, *a0);
        *a1 = eb_smlatt(lo, w1, *a1);
    } else {
        *a0 = eb_smlabb(hi, w1, *a0);
        *a1 = eb_smlatb(lo, w1, *a1);
    }
}

static EB_NOINLINE void eb_dw_put2(const eb_dw_out *o, int32_t index, int32_t a0, int32_t a1)
{
    eb_dw_put(o, index, a0);
    eb_dw_put(o, index + 1, a1);
}

/* Results a0, a1 of a pixel pair at index: into d8 (o->out8, shift s) in the NONE and RELU
 * modes, through eb_dw_put2 otherwise. */
EB_INLINE void eb_dw_store2(const int mode, const eb_dw_out *o, int8_t *d8, int s,
                            int32_t index, int32_t a0, int32_t a1)
{
    if (mode == EB_DW_ANY) {
        eb_dw_put2(o, index, a0, a1);
    } else {
        d8[index] = eb_dw_q8(mode, a0, s, 0, 0, 0);
        d8[index + 1] = eb_dw_q8(mode, a1, s, 0, 0, 0);
    }
}

/* Four sums of neighbouring pixels from index: stored in o's mode (its NONE and RELU inline;
 * one test a block, not a pixel). `gated`: the forms the model has no layer of are left to
 * the generic store (EB_DW_HAS_*; the column kernels -- the tile kernel's pair loop keeps
 * both, GCC schedules it worse without them). */
EB_INLINE void eb_col_store4(const eb_dw_out *o, int32_t index, int32_t a0, int32_t a1,
                             int32_t a2, int32_t a3, const int gated)
{
    /* read before the stores: an int8 store may alias *o for the compiler */
    const int mode = o->mode, s = o->s;
    if ((!gated || EB_DW_HAS_RELU) && mode == EB_DW_RELU) {
        int8_t *const d8 = o->out8 + index;
        eb_dw_store2(EB_DW_RELU, o, d8, s, 0, a0, a1);
        eb_dw_store2(EB_DW_RELU, o, d8, s, 2, a2, a3);
    } else if ((!gated || EB_DW_HAS_NONE) && mode == EB_DW_NONE) {
        int8_t *const d8 = o->out8 + index;
        eb_dw_store2(EB_DW_NONE, o, d8, s, 0, a0, a1);
        eb_dw_store2(EB_DW_NONE, o, d8, s, 2, a2, a3);
    } else {
        eb_dw_put2(o, index, a0, a1);
        eb_dw_put2(o, index + 2, a2, a3);
    }
}

/* ---- 3x3, stride 1: columns over a zero-padded copy ----
 * A 3x3 layer with stride_h == stride_w == dil_h == dil_w == 1 and the NONE or RELU
 * requantization copies each input channel, padding included, into the scratch (rows
 * L = in_w + pad_w bytes apart, sharing their pad bytes, eb_dw_fill; up to EB_DW_PAD_BYTES,
 * in bands of output rows when the whole plane does not fit), so that every output pixel pair
 * (x, x + 1) is the word at column x of three buffer rows: no edge cases, no padding rows
 * computed apart. Output pixels go in columns of pairs x = 0, 2, ... (with an odd out_w
 * the last pair is (out_w - 2, out_w - 1), one pixel computed twice), two output rows per
 * step: buffer rows r .. r + 3 feed output rows r (tap rows r .. r + 2) and r + 1 (tap rows
 * r + 1 .. r + 3), the middle two loaded once (4 loads, 8 SXTB16 and 24 MACs for 36 MACs).
 * With an odd out_h the last two rows go as one more step (one row computed twice). */
/* EB_DW_PAD_BYTES, EB_DW_PAD_SLACK (bytes past them eb_dw_fill may write): eb_kernels_opt.h,
 * whose EB_DW_OPT_SCRATCH is the bytes of buf this path uses (eb_dw3_band's rule). */

/* ---- requantization by an immediate (the fan, the tile row functions, the 3-tap
 * band and the 3-tap rows' channel pairs) ----
 * A sum that shifts right by a layer's s of 0..16 may shift by the immediate c = 8 (s <= 8)
 * or 16 instead, once scaled by 2^(c - s) (its init and weights: the sums gain zero bits
 * only): eb_dw_imm gives c, 0 for no such s. The scaled init of a sum of at most 2 n
 * products (n tap pairs, each product under 2^22 in magnitude once scaled) must stay within
 * eb_dw_imm_limit for the sum not to overflow. */
EB_INLINE int eb_dw_imm(int s)
{
    return s < 0 || s > 16 ? 0 : s <= 8 ? 8 : 16;
}

EB_INLINE int32_t eb_dw_imm_limit(int n, int t)
{
    return (INT32_MAX - ((int32_t)2 * n << 22)) >> t;
}

/* Whether a start `init` of such a sum (at most 2 n products, scaled by 2^t) is within
 * eb_dw_imm_limit. */
EB_INLINE int eb_dw_imm_fits(int32_t init, int n, int t)
{
    const int32_t lim = eb_dw_imm_limit(n, t);
    return init <= lim && init >= -lim;
}

/* A word of two int16 lanes, each times 2^t (both stay within int16: the callers' t): for
 * words already built (the 3-tap band's); a pair builds its words scaled (eb_dw3_words). */
EB_INLINE uint32_t eb_dw_scale_lanes(uint32_t w, int t)
{
    return (uint16_t)(int16_t)((int16_t)(w & 0xFFFFu) * (1 << t)) |
           (uint32_t)(uint16_t)((int16_t)(w >> 16) * (1 << t)) << 16;
}

/* The steps of one column: n2 >= 1 steps from p (buffer row 0's word at the column) into
 * index, two output rows (out_w apart) per step. The C twin of eb_dw3_band_asm. */
EB_INLINE void eb_dw3_column(const int8_t *p, int32_t L, int32_t n2, const uint32_t *w,
                             int32_t init, const eb_dw_out *o, int32_t index, int32_t out_w,
                             const int mode)
{
    const uint32_t w0 = w[0], w1 = w[1], w2 = w[2], w01 = w[3], w21 = w[4];
    int8_t *const d8 = o->out8;
    const int s = o->s;
    for (; n2 > 0; --n2, p += 2 * L, index += 2 * out_w) {
        int32_t a0 = init, a1 = init, b0 = init, b1 = init;
        uint32_t x = eb_load32(p + L);
        eb_dw3_mac(x, w1, w01, 1, &a0, &a1);
        eb_dw3_mac(x, w0, w01, 0, &b0, &b1);
        x = eb_load32(p + 2 * L);
        eb_dw3_mac(x, w2, w21, 0, &a0, &a1);
        eb_dw3_mac(x, w1, w01, 1, &b0, &b1);
        eb_dw3_mac(eb_load32(p), w0, w01, 0, &a0, &a1);
        eb_dw_store2(mode, o, d8, s, index, a0, a1);
        eb_dw3_mac(eb_load32(p + 3 * L), w2, w21, 0, &b0, &b1);
        eb_dw_store2(mode, o, d8, s, index + out_w, b0, b1);
    }
}

/* eb_dw3_column over ncols columns 2 bytes apart, on the M4 scheduled by hand (GCC spills
 * its ~19 live values: init, the shift and the loop bounds are reloaded from the stack
 * instead, 14 registers hold the rest). Per step rows 1, 0, 2, 3 (row 1 starting all four
 * sums from init), the first output pair stored after row 2, the second after row 3; at a
 * column's end p and dst step back up and 2 bytes right. Same sums as the C loop (int32
 * wrapping adds in another order), same ASR + SSAT #8 / USAT #7 -- or, c = 8 or 16, the
 * sums of weights and start scaled by 2^(c - s) (eb_dw3_band_imm) and SSAT / USAT with
 * ASR #c: the same outputs. */
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32) && defined(__GNUC__) && \
    defined(__OPTIMIZE__) && defined(__thumb2__) && !defined(EB_OPT_PORTABLE)
#define EB_DW3_ASM 1
#define EB_DW3_BAND_ASM(sat, LOAD, Q)                                                        \
    __asm__ volatile(                                                                        \
        "1:\n\t"                                                                             \
        "ldr %[x], [%[p], %[L]]\n\t"                                                         \
        "ldr %[a0], %[init]\n\t"                                                             \
        "sxtb16 %[lo], %[x]\n\t"                                                             \
        "sxtb16 %[x], %[x], ror #8\n\t"                                                      \
        "smlad %[a1], %[w1], %[x], %[a0]\n\t"                                                \
        "smlatt %[a1], %[lo], %[w01], %[a1]\n\t"                                             \
        "smlad %[b0], %[w0], %[lo], %[a0]\n\t"                                               \
        "smlabb %[b0], %[x], %[w01], %[b0]\n\t"                                              \
        "smlad %[b1], %[w0], %[x], %[a0]\n\t"                                                \
        "smlatb %[b1], %[lo], %[w01], %[b1]\n\t"                                             \
        "smlad %[a0], %[w1], %[lo], %[a0]\n\t"                                               \
        "smlabt %[a0], %[x], %[w01], %[a0]\n\t"                                              \
        "ldr %[x], [%[p]]\n\t"                                                               \
        "add %[p], %[p], %[L], lsl #1\n\t"                                                   \
        "sxtb16 %[lo], %[x]\n\t"                                                             \
        "sxtb16 %[x], %[x], ror #8\n\t"                                                      \
        "smlad %[a0], %[w0], %[lo], %[a0]\n\t"                                               \
        "smlabb %[a0], %[x], %[w01], %[a0]\n\t"                                              \
        "smlad %[a1], %[w0], %[x], %[a1]\n\t"                                                \
        "smlatb %[a1], %[lo], %[w01], %[a1]\n\t"                                             \
        "ldr %[x], [%[p]]\n\t"                                                               \
        "sxtb16 %[lo], %[x]\n\t"                                                             \
        "sxtb16 %[x], %[x], ror #8\n\t"                                                      \
        "smlad %[a0], %[w2], %[lo], %[a0]\n\t"                                               \
        "smlabb %[a0], %[x], %[w21], %[a0]\n\t"                                              \
        "smlad %[a1], %[w2], %[x], %[a1]\n\t"                                                \
        "smlatb %[a1], %[lo], %[w21], %[a1]\n\t"                                             \
        "smlad %[b0], %[w1], %[lo], %[b0]\n\t"                                               \
        "smlabt %[b0], %[x], %[w01], %[b0]\n\t"                                              \
        "smlad %[b1], %[w1], %[x], %[b1]\n\t"                                                \
        "smlatt %[b1], %[lo], %[w01], %[b1]\n\t"                                             \
        LOAD Q(sat, "a0") Q(sat, "a1")                                                       \
        "strb %[a0], [%[dst]]\n\t"                                                           \
        "strb %[a1], [%[dst], #1]\n\t"                                                       \
        "ldr %[x], [%[p], %[L]]\n\t"                                                         \
        "sxtb16 %[a0], %[x]\n\t"                                                             \
        "sxtb16 %[x], %[x], ror #8\n\t"                                                      \
        "smlad %[b0], %[w2], %[a0], %[b0]\n\t"                                               \
        "smlabb %[b0], %[x], %[w21], %[b0]\n\t"                                              \
        "smlad %[b1], %[w2], %[x], %[b1]\n\t"                                                \
        "smlatb %[b1], %[a0], %[w21], %[b1]\n\t"                                             \
        Q(sat, "b0") Q(sat, "b1")                                                            \
        "ldr %[a1], %[ow]\n\t"                                                               \
        "add %[dst], %[dst], %[a1]\n\t"                                                      \
        "strb %[b0], [%[dst]]\n\t"                                                           \
        "strb %[b1], [%[dst], #1]\n\t"                                                       \
        "add %[dst], %[dst], %[a1]\n\t"                                                      \
        "ldr %[a1], %[end]\n\t"                                                              \
        "cmp %[p], %[a1]\n\t"                                                                \
        "bne 1b\n\t"                                                                         \
        "adds %[a1], %[a1], #2\n\t"                                                          \
        "str %[a1], %[end]\n\t"                                                              \
        "ldr %[a1], %[bp]\n\t"                                                               \
        "subs %[p], %[p], %[a1]\n\t"                                                         \
        "ldr %[a1], %[bd]\n\t"                                                               \
        "subs %[dst], %[dst], %[a1]\n\t"                                                     \
        "ldr %[a1], %[cols]\n\t"                                                             \
        "subs %[a1], %[a1], #1\n\t"                                                          \
        "str %[a1], %[cols]\n\t"                                                             \
        "bne 1b\n\t"                                                                         \
        : [p] "+r"(p), [dst] "+r"(dst), [a0] "=&r"(a0), [a1] "=&r"(a1), [b0] "=&r"(b0),      \
          [b1] "=&r"(b1), [x] "=&r"(x), [lo] "=&r"(lo), [end] "+m"(end), [cols] "+m"(ncols)  \
        : [L] "r"(L), [w0] "r"(w0), [w1] "r"(w1), [w2] "r"(w2), [w01] "r"(w01),              \
          [w21] "r"(w21), [init] "m"(init), [s] "m"(s), [ow] "m"(ow), [bp] "m"(bp),          \
          [bd] "m"(bd)                                                                       \
        : "cc", "memory")
#define EB_DW3_SSAT(r, sh) "ssat %[" r "], #8, %[" r "]" sh "\n\t"
#define EB_DW3_USAT(r, sh) "usat %[" r "], #7, %[" r "]" sh "\n\t"
/* The requantization of a sum: by the layer's shift in a register (loaded once a step into
 * lo), or by the immediate 8 or 16 of a band whose weights and start were scaled
 * (eb_dw3_band_imm): then one SSAT / USAT an output. */
#define EB_DW3_LOAD_S "ldr %[lo], %[s]\n\t"
#define EB_DW3_Q_REG(sat, r) "asr %[" r "], %[" r "], %[lo]\n\t" sat(r, "")
#define EB_DW3_Q_8(sat, r) sat(r, ", asr #8")
#define EB_DW3_Q_16(sat, r) sat(r, ", asr #16")

static EB_NOINLINE void eb_dw3_band_asm(const int8_t *p, int32_t L, int32_t n2, int32_t ncols,
                                        const uint32_t *w, int32_t init, int8_t *dst,
                                        int32_t ow, int32_t s, const int mode, int c)
{
    const uint32_t w0 = w[0], w1 = w[1], w2 = w[2], w01 = w[3], w21 = w[4];
    const int8_t *end = p + 2 * L * n2;
    const int32_t bp = 2 * L * n2 - 2, bd = 2 * ow * n2 - 2;
    uint32_t a0, a1, b0, b1, x, lo;
    if (c == 8 && mode == EB_DW_RELU) {
        EB_DW3_BAND_ASM(EB_DW3_USAT, "", EB_DW3_Q_8);
    } else if (c == 8) {
        EB_DW3_BAND_ASM(EB_DW3_SSAT, "", EB_DW3_Q_8);
    } else if (c == 16 && mode == EB_DW_RELU) {
        EB_DW3_BAND_ASM(EB_DW3_USAT, "", EB_DW3_Q_16);
    } else if (c == 16) {
        EB_DW3_BAND_ASM(EB_DW3_SSAT, "", EB_DW3_Q_16);
    } else if (mode == EB_DW_RELU) {
        EB_DW3_BAND_ASM(EB_DW3_USAT, EB_DW3_LOAD_S, EB_DW3_Q_REG);
    } else {
        EB_DW3_BAND_ASM(EB_DW3_SSAT, EB_DW3_LOAD_S, EB_DW3_Q_REG);
    }
    (void)a0, (void)a1, (void)b0, (void)b1, (void)x, (void)lo;
}

/* A band's weights (into ws) and start scaled by 2^(c - s) for the immediate c of o's shift
 * (eb_dw_imm) in the NONE / RELU modes, where the scaled sum of 9 products cannot overflow
 * (eb_dw_imm_limit): returns c; 0, nothing written, otherwise (the shift by a register). */
static int eb_dw3_band_imm(const uint32_t wk[5], int32_t *init, const eb_dw_out *o,
                           uint32_t ws[5])
{
    const int c = eb_dw_imm(o->s), t = c - o->s;
    int i;
    if (!c || (o->mode != EB_DW_NONE && o->mode != EB_DW_RELU) || !eb_dw_imm_fits(*init, 5, t)) {
        return 0;
    }
    for (i = 0; i < 5; ++i) {
        ws[i] = eb_dw_scale_lanes(wk[i], t);
    }
    *init = (int32_t)((uint32_t)*init << t);
    return c;
}
#else
#define EB_DW3_ASM 0
#endif

/* n2 steps of every column of pixel pairs of an output band from index (out_w wide), the
 * buffer rows at src (L apart). */
EB_INLINE void eb_dw3_columns(const int8_t *src, int32_t L, int32_t n2,
                                       const uint32_t *w, int32_t init, const eb_dw_out *o,
                                       int32_t index, int32_t out_w, int c)
{
#if EB_DW3_ASM
    const int mode = o->mode;
    eb_dw3_band_asm(src, L, n2, out_w / 2, w, init, o->out8 + index, out_w, o->s, mode, c);
    if (out_w & 1) { /* the last pair overlaps the one before */
        eb_dw3_band_asm(src + out_w - 2, L, n2, 1, w, init, o->out8 + index + out_w - 2, out_w,
                        o->s, mode, c);
    }
#else
    (void)c; /* 0: the C loop shifts by o's s */
    int x;
    for (x = 0; x < out_w; x += 2) {
        const int xp = x + 1 < out_w ? x : out_w - 2;
        if (o->mode == EB_DW_NONE) {
            eb_dw3_column(src + xp, L, n2, w, init, o, index + xp, out_w, EB_DW_NONE);
        } else {
            eb_dw3_column(src + xp, L, n2, w, init, o, index + xp, out_w, EB_DW_RELU);
        }
    }
#endif
}

/* An empty asm that "changes" v: GCC then keeps a loop storing v a loop of word stores
 * instead of a call to memset or memcpy (newlib-nano's go byte by byte). */
#if defined(__GNUC__)
#define EB_DW_OPAQUE(v) __asm__("" : "+r"(v))
#else
#define EB_DW_OPAQUE(v) ((void)0)
#endif

/* n (>= 0) zero bytes at d, as words (up to 3 more); returns d + n. */
static int8_t *eb_dw_zero(int8_t *d, int32_t n)
{
    const uint32_t z = 0;
    int8_t *q = d;
    for (; q < d + n; q += 4) {
        memcpy(q, &z, 4);
        EB_DW_OPAQUE(q);
    }
    return d + n;
}

/* max of the four signed bytes of a and b, byte by byte (SSUB8 + SEL on the M4) */
#if EB_OPT_DSP && defined(__GNUC__)
static inline uint32_t eb_dw_max8(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("ssub8 %0, %1, %2\n\tsel %0, %1, %2" : "=&r"(r) : "r"(a), "r"(b) : "cc");
    return r;
}
#else
static inline uint32_t eb_dw_max8(uint32_t a, uint32_t b)
{
    uint32_t r = 0;
    int i;
    for (i = 0; i < 32; i += 8) {
        const int32_t x = (int32_t)((a >> i) & 0xFFu) - (int32_t)((a >> i) & 0x80u) * 2;
        const int32_t y = (int32_t)((b >> i) & 0xFFu) - (int32_t)((b >> i) & 0x80u) * 2;
        r |= (uint32_t)((x > y ? x : y) & 0xFF) << i;
    }
    return r;
}
#endif

/* Four outputs of a 2x2 stride-2 max pool from input rows r and r + stride (bytes 0..7 of
 * each), as a word: the rows' byte-wise maxima V0 = [c0 c1 c2 c3] and V1 = [c4 c5 c6 c7]
 * (the column maxima), regrouped into their even bytes E = [c0 c2 c4 c6] and odd ones
 * O = [c1 c3 c5 c7], give max(E, O) = [max(c0, c1) .. max(c6, c7)]. On the M4: 4 loads,
 * SSUB8 + SEL x 3, PKHBT/PKHTB (A = [c0 c1 c4 c5], B = [c2 c3 c6 c7]), UXTB16 x 4 and
 * 2 ORRs (E = uxtb16(A) | uxtb16(B) << 8, O from both rotated by 8): 18 instructions. */
#if EB_OPT_DSP && defined(__GNUC__)
#define EB_DW_MAX4_ASM                   \
    "ssub8 %[t], %[a], %[b]\n\t"          \
    "sel %[a], %[a], %[b]\n\t"            \
    "ssub8 %[t], %[c], %[d]\n\t"          \
    "sel %[c], %[c], %[d]\n\t"            \
    "pkhbt %[b], %[a], %[c], lsl #16\n\t" \
    "pkhtb %[d], %[c], %[a], asr #16\n\t" \
    "uxtb16 %[a], %[b]\n\t"               \
    "uxtb16 %[t], %[d]\n\t"               \
    "orr %[a], %[a], %[t], lsl #8\n\t"    \
    "uxtb16 %[c], %[b], ror #8\n\t"       \
    "uxtb16 %[t], %[d], ror #8\n\t"       \
    "orr %[c], %[c], %[t], lsl #8\n\t"    \
    "ssub8 %[t], %[a], %[c]\n\t"          \
    "sel %[a], %[a], %[c]\n\t"

EB_INLINE uint32_t eb_dw_max4(const int8_t *r, int32_t stride)
{
    uint32_t a = eb_load32(r), b = eb_load32(r + stride), c = eb_load32(r + 4),
             d = eb_load32(r + stride + 4), t;
    __asm__(EB_DW_MAX4_ASM
            : [a] "+&r"(a), [b] "+&r"(b), [c] "+&r"(c), [d] "+&r"(d), [t] "=&r"(t)
            :
            : "cc");
    return a;
}
#else
EB_INLINE uint32_t eb_dw_max4(const int8_t *r, int32_t stride)
{
    const uint32_t v0 = eb_dw_max8(eb_load32(r), eb_load32(r + stride));
    const uint32_t v1 = eb_dw_max8(eb_load32(r + 4), eb_load32(r + stride + 4));
    uint32_t h0 = eb_dw_max8(v0, v0 >> 8) & 0x00FF00FFu, h1 = eb_dw_max8(v1, v1 >> 8) & 0x00FF00FFu;
    h0 |= h0 >> 8;
    h1 |= h1 >> 8;
    return (h0 & 0xFFFFu) | (h1 << 16);
}
#endif

/* k >= 1 groups of four outputs of a 2x2 stride-2 max pool (input rows q and q + stride,
 * 8 bytes per group) into o: on the M4 one asm loop, both rows' words by post-incremented
 * loads (21 instructions per group). */
#if EB_OPT_DSP && defined(__GNUC__)
EB_INLINE void eb_dw_pool_groups(const int8_t *q, int32_t stride, int8_t *o, int32_t k)
{
    const int8_t *q2 = q + stride;
    const int8_t *const end = o + 4 * k;
    uint32_t a, b, c, d, t;
    __asm__ volatile("1:\n\t"
                     "ldr %[c], [%[q], #4]\n\t"
                     "ldr %[a], [%[q]], #8\n\t"
                     "ldr %[d], [%[q2], #4]\n\t"
                     "ldr %[b], [%[q2]], #8\n\t" EB_DW_MAX4_ASM
                     "str %[a], [%[o]], #4\n\t"
                     "cmp %[o], %[end]\n\t"
                     "bne 1b"
                     : [q] "+r"(q), [q2] "+r"(q2), [o] "+r"(o), [a] "=&r"(a), [b] "=&r"(b),
                       [c] "=&r"(c), [d] "=&r"(d), [t] "=&r"(t)
                     : [end] "r"(end)
                     : "cc", "memory");
}
#else
EB_INLINE void eb_dw_pool_groups(const int8_t *q, int32_t stride, int8_t *o, int32_t k)
{
    uint32_t u;
    for (; k > 0; --k, q += 8, o += 4) {
        u = eb_dw_max4(q, stride);
        memcpy(o, &u, 4);
    }
}
#endif

/* n >= 4 outputs of a 2x2 stride-2 max pool (input rows r and r + stride) into d: groups of
 * four, the last group ending at output n - 1 (overlapping the one before); reads input
 * bytes [0, 2 n) of both rows only. */
EB_INLINE void eb_dw_pool_row(const int8_t *r, int32_t stride, int8_t *d, int32_t n)
{
    uint32_t u;
    if ((n & 3) == 0) { /* whole groups only */
        eb_dw_pool_groups(r, stride, d, n >> 2);
        return;
    }
    if (n > 4) {
        eb_dw_pool_groups(r, stride, d, (n - 1) >> 2);
    }
    u = eb_dw_max4(r + 2 * (n - 4), stride);
    memcpy(d + n - 4, &u, 4);
}

/* n rows of in_w bytes (in_w >= 4) from src into d, rows L apart in d, each followed by
 * L - in_w (<= 3) zeros: words only, the row's last word overlapping the one before. */
static void eb_dw_copy_rows(const int8_t *src, int32_t in_w, int n, int8_t *d, int32_t L,
                            int pad)
{
    const int32_t nw = (in_w - 1) >> 2;
    const uint32_t z = 0;
    for (; n > 0; --n, src += in_w, d += L) {
        const int8_t *s = src;
        int8_t *q = d;
        uint32_t u;
        int32_t i;
        for (i = nw; i > 0; --i, s += 4, q += 4) {
            u = eb_load32(s);
            EB_DW_OPAQUE(u);
            memcpy(q, &u, 4);
        }
        u = eb_load32(src + in_w - 4); /* the last word */
        memcpy(d + in_w - 4, &u, 4);
        if (pad) {
            memcpy(d + in_w, &z, 4); /* the right padding */
        }
    }
}

/* eb_dw_copy_rows of n pooled rows: pooled row i (in_w >= 4 bytes) is the 2x2 stride-2 max
 * pool of input rows 2 i and 2 i + 1 (stride bytes apart) from src. */
static void eb_dw_pool_rows(const int8_t *src, int32_t stride, int32_t in_w, int n, int8_t *d,
                            int32_t L)
{
    const uint32_t z = 0;
    for (; n > 0; --n, src += 2 * stride, d += L) {
        eb_dw_pool_row(src, stride, d, in_w);
        memcpy(d + in_w, &z, 4); /* the right padding */
    }
}

/* The padded rows [y, y + n) of a channel (plane: in_h x in_w; padded row y is input row
 * y - pad_h, input column c at padded column pad_w + c) into buf, L = in_w + pad_w bytes
 * apart: a row's right padding is the next row's left padding, so buf is a stream of pad_w
 * zeros, then per row in_w bytes (an input row, or zeros outside the plane) and pad_w
 * zeros: n L + pad_w bytes. Word stores only (pad_w <= 3 and in_w >= 4, as the 3-tap
 * kernels take): each may spill up to 3 bytes past its part of the stream, which the next
 * part then overwrites (buf has EB_DW_PAD_SLACK bytes for the last one); each input row is
 * read as its words before the last byte and the word ending at its last byte, nothing
 * outside it. With g->pool, plane is the unpooled channel and each row is pooled on the way
 * (eb_dw_pool_row). */
static EB_NOINLINE void eb_dw_fill(const eb_dw_geom *g, const int8_t *plane, int y, int n,
                                   int8_t *d)
{
    const int32_t in_w = g->in_w, L = in_w + g->pad_w;
    const int32_t step = g->pool ? 2 * (int32_t)g->pool->in_w : in_w; /* source row bytes */
    const uint32_t z = 0;
    const int iy = y - g->pad_h;
    int top = iy < 0 ? -iy : 0, mid; /* rows above the plane, rows in it */
    top = top < n ? top : n;
    mid = g->in_h - (iy + top);
    mid = mid < n - top ? mid : n - top;
    mid = mid > 0 ? mid : 0;
    memcpy(d, &z, 4); /* the first row's left padding */
    d = eb_dw_zero(d + g->pad_w, (int32_t)top * L);
    plane += (int32_t)(iy + top) * step;
    if (g->pool) {
        eb_dw_pool_rows(plane, g->pool->in_w, in_w, mid, d, L);
    } else {
        eb_dw_copy_rows(plane, in_w, mid, d, L, 1);
    }
    eb_dw_zero(d + (int32_t)mid * L, (int32_t)(n - top - mid) * L); /* rows below the plane */
}

/* The in-plane rows of a channel into buf that holds another channel's whole padded plane
 * (eb_dw_fill of rows [0, out_h + 2)): the zeros of the padding stay, as the copied and the
 * pooled rows write bytes [0, in_w) of their row only. */
static EB_NOINLINE void eb_dw_refill(const eb_dw_geom *g, const int8_t *plane, int8_t *buf)
{
    const int32_t in_w = g->in_w, L = in_w + g->pad_w;
    int8_t *d = buf + g->pad_w + (int32_t)g->pad_h * L;
    int n;
    if (g->pool) {
        const int32_t stride = g->pool->in_w;
        if ((in_w & 3) == 0) { /* whole groups of four (the test hoisted out of the rows) */
            for (n = g->in_h; n > 0; --n, plane += 2 * stride, d += L) {
                eb_dw_pool_groups(plane, stride, d, in_w >> 2);
            }
            return;
        }
        for (n = g->in_h; n > 0; --n, plane += 2 * stride, d += L) {
            eb_dw_pool_row(plane, stride, d, in_w);
        }
    } else {
        eb_dw_copy_rows(plane, in_w, g->in_h, d, L, 0);
    }
}

/* Output rows per band of the padded path in a buffer of `bytes` (+ EB_DW_PAD_SLACK): out_h
 * when the whole plane fits (out_h + 2 padded rows), else even and >= 2; 0 when the path
 * does not take g. */
static int eb_dw3_band(const eb_dw_geom *g, int32_t bytes)
{
    const int32_t L = (int32_t)g->in_w + g->pad_w;
    int32_t band = (bytes - g->pad_w) / L - 2;
    if (band < g->out_h) {
        band &= ~(int32_t)1;
    }
    if (g->k_h != 3 || g->stride_h != 1 || g->dil_h != 1 || g->out_h < 2 || g->out_w < 2 ||
        band < 2) {
        return 0;
    }
    return (int)(band < g->out_h ? band : g->out_h);
}

/* What the padded path's buffer holds: nothing usable (or a band), another channel's whole
 * padded plane (its padding zeros reused), this channel's. */
enum { EB_DW_HELD_NONE, EB_DW_HELD_OTHER, EB_DW_HELD_THIS };

/* One channel of the padded path into out from index (buf: band + 2 padded rows; filled:
 * what it holds, EB_DW_HELD_*). */
EB_INLINE void eb_dw3_padded(const eb_dw_geom *g, int band, const int8_t *plane,
                                      int filled, const uint32_t wk[5], int32_t init,
                                      const eb_dw_out *o, int32_t index, int8_t *buf,
                                      const eb_dw3_spec *k)
{
    const int out_h = g->out_h, whole = out_h <= band;
    const int32_t L = (int32_t)g->in_w + g->pad_w;
    int y0, rows, c = 0;
    const uint32_t *wc = wk; /* the band's weights: scaled for an immediate shift c */
#if EB_DW3_ASM
    uint32_t ws[5];
#endif
    if (whole && filled == EB_DW_HELD_OTHER) {
        eb_dw_refill(g, plane, buf);
    } else if (whole && filled == EB_DW_HELD_NONE) {
        eb_dw_fill(g, plane, 0, out_h + 2, buf);
    }
    if (k != NULL && whole) { /* the generation-time loop (eb_dw_layer checked k fits) */
        k->run(buf, o->out8 + index, out_h >> 1, wk, init);
        if (out_h & 1) { /* the last two rows, one computed twice */
            y0 = out_h - 2;
            k->run(buf + (int32_t)y0 * L, o->out8 + index + (int32_t)y0 * g->out_w, 1, wk, init);
        }
        return;
    }
#if EB_DW3_ASM
    if ((int32_t)out_h * g->out_w >= 48) { /* scaling costs about 12 steps' saving */
        c = eb_dw3_band_imm(wk, &init, o, ws);
        wc = c ? ws : wk;
    }
#endif
    for (y0 = 0; y0 < out_h; y0 += rows) {
        const int8_t *src = buf;
        rows = (out_h - y0 < band ? out_h - y0 : band) & ~1;
        if (rows == 0) { /* an odd out_h: the last two rows, one computed twice */
            y0 = out_h - 2;
            rows = 2;
        }
        if (whole) {
            src += (int32_t)y0 * L;
        } else {
            eb_dw_fill(g, plane, y0, rows + 2, buf);
        }
        eb_dw3_columns(src, L, rows / 2, wc, init, o, index + (int32_t)y0 * g->out_w, g->out_w,
                       c);
    }
}

/* The output channels one pass of the 3-tap rows computes over an input channel: one, or two
 * of it (a multiplier >= 2, both in the same NONE / RELU mode: its row's words loaded and
 * split once for both, and the row's set-up made once) -- their weights (eb_dw3_weights),
 * sums' starts and first outputs. */
typedef struct {
    uint32_t w[2][5];
    int32_t init[2], index[2];
    int c; /* a pair's immediate shift (eb_dw3_second: 8 or 16), words and starts scaled */
} eb_dw3_job;

/* One tap row's word x against channel c's weights of tap row `row` (0..2) into the sums a,
 * b (eb_dw3_mac's halves: [w0, w2] and w1), from the locals of EB_DW3_LOCALS. */
#define EB_DW3_TAP(x, row, c, a, b)                                                          \
    eb_dw3_mac(x, w##c##_##row, (row) < 2 ? w##c##_01 : w##c##_21, (row) == 1, &(a), &(b))
/* Channel c's weights of j as locals (an int8 store may alias *j for the compiler). */
#define EB_DW3_LOCALS(c)                                                                     \
    const uint32_t w##c##_0 = j->w[c][0], w##c##_1 = j->w[c][1], w##c##_2 = j->w[c][2],      \
                   w##c##_01 = j->w[c][3], w##c##_21 = j->w[c][4]

/* The pixel pair k of eb_dw3_row_body's channels from its tap rows' words (w1, w2 read
 * only when rows == 3): the sums and their stores. */
#define EB_DW3_PAIR(w0, w1, w2, k)                                                           \
    do {                                                                                     \
        int32_t a0 = init_a, a1 = a0, b0 = init_b, b1 = b0;                                  \
        const uint32_t x0 = (w0);                                                            \
        EB_DW3_TAP(x0, 0, 0, a0, a1);                                                        \
        if (two) {                                                                           \
            EB_DW3_TAP(x0, 0, 1, b0, b1);                                                    \
        }                                                                                    \
        if (rows == 3) {                                                                     \
            const uint32_t x1 = (w1), x2 = (w2);                                             \
            EB_DW3_TAP(x1, 1, 0, a0, a1);                                                    \
            EB_DW3_TAP(x2, 2, 0, a0, a1);                                                    \
            if (two) {                                                                       \
                EB_DW3_TAP(x1, 1, 1, b0, b1);                                                \
                EB_DW3_TAP(x2, 2, 1, b0, b1);                                                \
            }                                                                                \
        }                                                                                    \
        eb_dw_store2(mode, o, d8, s, ia + (k), a0, a1);                                      \
        if (two) {                                                                           \
            eb_dw_store2(mode, o, d8, s, ib + (k), b0, b1);                                  \
        }                                                                                    \
    } while (0)

/* One output row of a 3-tap layer, each channel of j (`two`: both) into its index plus at:
 * tap row 0 of its pixels in the input row at r, tap rows 1 and 2 (rows == 3) at r + o1 and
 * r + o2 (a row in the padding: zero weights and any row in range). Pixel pairs at x = 0, 2,
 * ...; with an odd out_w the last pair is (out_w - 2, out_w - 1). in_w >= 4, pad_w <= 3: a
 * pair's word overhangs at most one row end and by less than a word, and is then built from
 * shifted in-row loads. */
EB_INLINE void eb_dw3_row_body(const int8_t *r, int32_t o1, int32_t o2, const eb_dw3_job *j,
                               int in_w, int out_w, int pad_w, const eb_dw_out *o,
                               int32_t at, const int rows, const int mode, const int two,
                               const int c)
{
    const int32_t ia = j->index[0] + at, ib = j->index[1] + at;
    const int32_t init_a = j->init[0], init_b = j->init[1];
    EB_DW3_LOCALS(0);
    EB_DW3_LOCALS(1);
    int8_t *const d8 = o->out8;
    const int s = c ? c : o->s; /* an immediate: SSAT / USAT shift as they saturate */
    int x = 0;
    while (x < out_w) {
        const int xp = x + 1 < out_w ? x : out_w - 2;
        const int32_t b = xp - pad_w;
        if (b >= 0 && b <= in_w - 4) { /* a run of pairs inside the row */
            const int8_t *p = r + b;
            int32_t n = (in_w - 4 - b) / 2 + 1, k = xp;
            if (n > (out_w - xp) / 2) {
                n = (out_w - xp) / 2;
            }
            x = xp + 2 * (int)n;
            for (; n > 0; --n, p += 2, k += 2) {
                EB_DW3_PAIR(eb_load32(p), eb_load32(p + o1), eb_load32(p + o2), k);
            }
        } else { /* one pair overhanging a row end */
            const int32_t off = b < 0 ? 0 : in_w - 4;
            const unsigned sl = b < 0 ? (unsigned)(-8 * b) : 0u;
            const unsigned sr = b < 0 ? 0u : (unsigned)(8 * (b - off));
            EB_DW3_PAIR((eb_load32(r + off) << sl) >> sr, (eb_load32(r + o1 + off) << sl) >> sr,
                        (eb_load32(r + o2 + off) << sl) >> sr, xp);
            x = xp + 2;
        }
    }
}

/* The specialisations: NONE and RELU (the usual requantizations) fixed, the rest read at
 * run time. */
#define EB_DW_MODES(call, ...)          \
    switch (o->mode) {                  \
    case EB_DW_NONE:                    \
        call(__VA_ARGS__, EB_DW_NONE);  \
        break;                          \
    case EB_DW_RELU:                    \
        call(__VA_ARGS__, EB_DW_RELU);  \
        break;                          \
    default:                            \
        call(__VA_ARGS__, EB_DW_ANY);   \
        break;                          \
    }

/* eb_dw3_row_body per mode, one channel of j. */
#define EB_DW3_ONE(r, o1, o2, j, g, o, at, rows, mode)                                      \
    eb_dw3_row_body(r, o1, o2, j, (g)->in_w, (g)->out_w, (g)->pad_w, o, at, rows, mode, 0, 0)
/* ... both channels of j (NONE or RELU: the caller's), shifting by j's immediate c. */
#define EB_DW3_TWO_C(r, o1, o2, j, g, o, at, rows, c)                                       \
    do {                                                                                     \
        if ((o)->mode == EB_DW_RELU) {                                                       \
            eb_dw3_row_body(r, o1, o2, j, (g)->in_w, (g)->out_w, (g)->pad_w, o, at, rows,    \
                            EB_DW_RELU, 1, c);                                               \
        } else {                                                                             \
            eb_dw3_row_body(r, o1, o2, j, (g)->in_w, (g)->out_w, (g)->pad_w, o, at, rows,    \
                            EB_DW_NONE, 1, c);                                               \
        }                                                                                    \
    } while (0)
#define EB_DW3_TWO(r, o1, o2, j, g, o, at, rows)                                            \
    do {                                                                                     \
        if ((j)->c == 16) {                                                                  \
            EB_DW3_TWO_C(r, o1, o2, j, g, o, at, rows, 16);                                  \
        } else {                                                                             \
            EB_DW3_TWO_C(r, o1, o2, j, g, o, at, rows, 8);                                   \
        }                                                                                    \
    } while (0)

/* Output row `at` (elements from each channel's index) of j's channels, `two` of them. */
static EB_NOINLINE void eb_dw3_row(const eb_dw_geom *g, const int8_t *r, int32_t o1,
                                   int32_t o2, const eb_dw3_job *j, int two,
                                   const eb_dw_out *o, int32_t at)
{
    if (EB_DW3_PAIRS && two && g->k_h == 3) {
        EB_DW3_TWO(r, o1, o2, j, g, o, at, 3);
    } else if (EB_DW3_PAIRS && two) {
        EB_DW3_TWO(r, 0, 0, j, g, o, at, 1);
    } else if (g->k_h == 3) {
        EB_DW_MODES(EB_DW3_ONE, r, o1, o2, j, g, o, at, 3)
    } else {
        EB_DW_MODES(EB_DW3_ONE, r, 0, 0, j, g, o, at, 1)
    }
}

#if EB_DW3_LINE
/* A lone channel's 1-D row in quads (eb_dw3_line): their form (16: lanes by SXTB16, weights x
 * 2^(16 - s); 8: lanes x 2^8, weights x 2^(8 - s)), words [w0, w2], [w1, 0] and start x
 * 2^(16 - s) (NONE's + 128 x 2^16). */
typedef struct {
    int form;
    uint32_t w02, w1;
    int32_t init;
} eb_dw3_quads;

/* Four outputs of a 1-D 3-tap row (one channel: weights [w0, w2] and w1 in the bottom half,
 * start init) from its inputs' lanes [x0, x2] [x1, x3] (e, f) and [x2, x4] [x3, x5] (g, h),
 * each an int16 lane (SXTB16) or x 2^8 (the bytes in the halves' tops): sums whose top
 * halves are the outputs (init and weights scaled for it, NONE's init + 128 x 2^16), four
 * stored by PKHTB, USAT16 and ORR as eb_dw_scale16_word does. */
EB_INLINE uint32_t eb_dw3_quad(uint32_t e, uint32_t f, uint32_t g, uint32_t h, uint32_t w02,
                               uint32_t w1, int32_t init, const int relu)
{
    const int32_t a0 = eb_smlabb(f, w1, eb_smlad(e, w02, init));
    const int32_t a1 = eb_smlabb(g, w1, eb_smlad(f, w02, init));
    const int32_t a2 = eb_smlatb(f, w1, eb_smlad(g, w02, init));
    const int32_t a3 = eb_smlatb(g, w1, eb_smlad(h, w02, init));
    const uint32_t lo = eb_pack_hi((uint32_t)a0, (uint32_t)a2);
    const uint32_t hi = eb_pack_hi((uint32_t)a1, (uint32_t)a3);
    return relu ? eb_usat16_7(lo) | eb_usat16_7(hi) << 8
                : (eb_usat16_8(lo) | eb_usat16_8(hi) << 8) ^ 0x80808080u;
}

/* A quad's lanes from its input words v = [x0 x1 x2 x3], u = [x2 x3 x4 x5] (SXTB16, or x 2^8
 * by AND against mask), its 4 outputs stored at d. */
EB_INLINE uint32_t eb_dw3_even8(uint32_t v, uint32_t mask) /* (v << 8) & mask: one AND */
{
#if EB_OPT_DSP && defined(__GNUC__)
    uint32_t r;
    __asm__("and %0, %1, %2, lsl #8" : "=r"(r) : "r"(mask), "r"(v));
    return r;
#else
    return (v << 8) & mask;
#endif
}

EB_INLINE void eb_dw3_quad_put(uint32_t v, uint32_t u, uint32_t w02, uint32_t w1, int32_t init,
                               uint32_t mask, int8_t *d, const int relu, const int t16)
{
    const uint32_t e = t16 ? eb_sxtb16(v) : eb_dw3_even8(v, mask);
    const uint32_t f = t16 ? eb_sxtb16_ror8(v) : v & mask;
    const uint32_t g = t16 ? eb_sxtb16(u) : eb_dw3_even8(u, mask);
    const uint32_t h = t16 ? eb_sxtb16_ror8(u) : u & mask;
    eb_store32(d, eb_dw3_quad(e, f, g, h, w02, w1, init, relu));
}

/* The 4 bytes of a row of n from byte b (-3 <= b, b + 4 <= n + 3; n >= 4), those outside it
 * 0 (the padding). */
EB_INLINE uint32_t eb_dw3_clipped(const int8_t *r, int32_t b, int32_t n)
{
    return b < 0            ? eb_load32(r) << (8 * -b)
           : b + 4 > n      ? eb_load32(r + n - 4) >> (8 * (b + 4 - n))
                            : eb_load32(r + b);
}

/* A 1-D row (k_h 1) of j's one channel by quads into d: the first 4 outputs from words with
 * the padding shifted in (pad_w > 0), those whose 6 bytes lie inside the row in the loop,
 * the rest as the first, the last 4 over some done again (alike). out_w >= 4, in_w >= 4,
 * pad_w <= 3: a word from byte -3 .. in_w - 1 overhangs one end at most.
 * (A channel pair keeps eb_dw3_row's pixel pairs: 25 instructions per 4 outputs there, 23
 * in quads of two channels, whose set-up and ends cost more on rows of 60 to 200.) */
EB_INLINE void eb_dw3_line(const eb_dw_geom *g, const int8_t *r, const eb_dw3_quads *q,
                           int8_t *d, const int relu, const int t16)
{
    const int32_t n = g->in_w, pad = g->pad_w, out_w = g->out_w, init = q->init;
    const uint32_t w02 = q->w02, w1 = q->w1, mask = 0xFF00FF00u;
    int32_t x = 0, k;
    if (pad > 0) {
        eb_dw3_quad_put(eb_dw3_clipped(r, -pad, n), eb_dw3_clipped(r, 2 - pad, n), w02, w1,
                        init, mask, d, relu, t16);
        x = 4;
    }
    k = n - 6 - (x - pad) < 0 ? 0 : (n - 6 - (x - pad)) / 4 + 1; /* quads inside the row */
    if (k > (out_w - x) / 4) {
        k = (out_w - x) / 4;
    }
    for (; k > 0; --k, x += 4) {
        const int8_t *p = r + x - pad;
        eb_dw3_quad_put(eb_load32(p), eb_load32(p + 2), w02, w1, init, mask, d + x, relu, t16);
    }
    for (; x < out_w; x += 4) { /* the rest: the last 4 at most over some done */
        x = x > out_w - 4 ? out_w - 4 : x;
        eb_dw3_quad_put(eb_dw3_clipped(r, x - pad, n), eb_dw3_clipped(r, x - pad + 2, n), w02,
                        w1, init, mask, d + x, relu, t16);
    }
}

/* eb_dw3_line's forms: relu, t16. */
static EB_NOINLINE void eb_dw3_line_of(const eb_dw_geom *g, const int8_t *r,
                                       const eb_dw3_quads *q, int8_t *d, int relu)
{
    if (q->form == 16) {
        relu ? eb_dw3_line(g, r, q, d, 1, 1) : eb_dw3_line(g, r, q, d, 0, 1);
    } else {
        relu ? eb_dw3_line(g, r, q, d, 1, 0) : eb_dw3_line(g, r, q, d, 0, 0);
    }
}
#endif

/* The weights of one output channel (wt: k_h rows of 3) as the 3-tap kernels take them:
 * [w00, w02], [w10, w12], [w20, w22], [w01, w11], [w21, 0] (rows past k_h zero), each
 * scaled by 2^t (a channel pair's immediate shift, eb_dw3_second). */
EB_INLINE void eb_dw3_words(const int8_t *wt, int k_h, int t, uint32_t w[5])
{
#define EB_U16(v) ((uint32_t)(uint16_t)(int16_t)((v) * (1 << t)))
    w[0] = EB_U16(wt[0]) | EB_U16(wt[2]) << 16;
    if (k_h == 3) {
        w[1] = EB_U16(wt[3]) | EB_U16(wt[5]) << 16;
        w[2] = EB_U16(wt[6]) | EB_U16(wt[8]) << 16;
        w[3] = EB_U16(wt[1]) | EB_U16(wt[4]) << 16;
        w[4] = EB_U16(wt[7]);
    } else {
        w[1] = w[2] = w[4] = 0;
        w[3] = EB_U16(wt[1]);
    }
#undef EB_U16
}

/* ... unscaled (once a channel: the padded path's and a lone channel's). */
static void eb_dw3_weights(const int8_t *wt, int k_h, uint32_t w[5])
{
    eb_dw3_words(wt, k_h, 0, w);
}



/* Output rows with the same tap rows in range: [oy, oy + n), tap rows [lo, hi). */
typedef struct {
    int oy, n, lo, hi;
} eb_dw_seg;

#define EB_DW_MAX_SEGS 8 /* k_h <= 3: at most 2 * k_h + 1 */

/* One channel of a 3-tap layer the padded path does not take, or `two` of one input channel
 * (plane; j: their weights, starts and outputs): every output row by eb_dw3_row, in segments
 * of equal tap-row ranges (seg, eb_dw_segments). */
static EB_NOINLINE void eb_dw3_channel(const eb_dw_geom *g, const eb_dw_seg *seg,
                                       int n_seg, const int8_t *plane, const eb_dw3_job *jk,
                                       int two, const eb_dw_out *o)
{
    const int in_w = g->in_w, out_w = g->out_w, k_h = g->k_h;
    const int32_t in_step = (int32_t)g->stride_h * in_w;
    eb_dw3_job j;
    if (k_h == 1 && n_seg == 1 && seg->lo < seg->hi) { /* a 1-D row (its rows, tiled) */
        const int8_t *r = plane + (int32_t)(seg->oy * g->stride_h - g->pad_h) * in_w;
        int32_t at = (int32_t)seg->oy * out_w;
        int i;
        for (i = 0; i < seg->n; ++i, r += in_step, at += out_w) {
            eb_dw3_row(g, r, 0, 0, jk, two, o, at);
        }
        return;
    }
    for (; n_seg > 0; --n_seg, ++seg) {
        const int32_t first = (int32_t)seg->oy * out_w;
        const int iy0 = seg->oy * g->stride_h - g->pad_h;
        const eb_dw3_job *use = jk; /* its weights, or with the padding rows' zeroed (j) */
        const int8_t *r[3];
        int ky, i, c;
        if (seg->lo >= seg->hi) { /* every tap row in the padding: the inits */
            eb_dw_out oi = *o;
            oi.s = jk->c ? jk->c : o->s; /* a pair's inits scaled for its immediate */
            for (c = 0; c <= two; ++c) {
                for (i = 0; i < seg->n * out_w; ++i) {
                    eb_dw_put(&oi, jk->index[c] + first + i, jk->init[c]);
                }
            }
            continue;
        }
        if (seg->lo > 0 || seg->hi < k_h) { /* rows of the padding: their weights zeroed */
            j = *jk;
            use = &j;
        }
        for (ky = 0; ky < k_h; ++ky) {
            if (ky >= seg->lo && ky < seg->hi) {
                r[ky] = plane + (int32_t)(iy0 + ky * g->dil_h) * in_w;
                continue;
            }
            /* a row of the padding: zero weights, any row in range */
            r[ky] = plane + (int32_t)(iy0 + seg->lo * g->dil_h) * in_w;
            for (c = 0; c <= two; ++c) {
                j.w[c][ky] = 0;
                j.w[c][3 + ky / 2] &= ky & 1 ? 0x0000FFFFu : 0xFFFF0000u;
            }
        }
        for (i = 0; i < seg->n; ++i) {
            eb_dw3_row(g, r[0] + i * in_step, k_h == 3 ? (int32_t)(r[1] - r[0]) : 0,
                       k_h == 3 ? (int32_t)(r[2] - r[0]) : 0, use, two, o,
                       first + i * out_w);
        }
    }
}

/* The output rows of g in segments of equal tap-row ranges; returns their count. */
static int eb_dw_segments(const eb_dw_geom *g, eb_dw_seg *seg)
{
    int n = 0, oy;
    for (oy = 0; oy < g->out_h; ++oy) {
        int lo, hi;
        eb_tap_range(oy * g->stride_h - g->pad_h, g->dil_h, g->k_h, g->in_h, &lo, &hi);
        if (lo >= hi) {
            lo = hi = 0;
        }
        if (n > 0 && seg[n - 1].lo == lo && seg[n - 1].hi == hi) {
            ++seg[n - 1].n;
        } else {
            seg[n].oy = oy;
            seg[n].n = 1;
            seg[n].lo = lo;
            seg[n].hi = hi;
            ++n;
        }
    }
    return n;
}

#if EB_DW3_LINE
/* The quads of a lone NONE / RELU channel of a 1-D row (k_h 1; its words w3 unscaled, its
 * start init) shifting right by s: the form of s (eb_dw_imm: 16 for 9..16, 8 for 1..8), the
 * words at its scale and the start x 2^(16 - s); 0 (no quads) where a sum of 3 products
 * could then overflow. */
static int eb_dw3_quads_of(const uint32_t w3[5], int32_t init, int s, int relu,
                           eb_dw3_quads *q)
{
    const int form = eb_dw_imm(s), up = form - s;
    int32_t lim;
    if (!form || s < 1) { /* (s = 0: 3 products x 2^16 could overflow alone) */
        return 0;
    }
    lim = (INT32_MAX - ((int32_t)3 << (30 - s)) - ((int32_t)1 << 23)) >> (16 - s);
    if (init > lim || init < -lim) {
        return 0;
    }
    q->w02 = eb_pack_lo((uint32_t)(eb_lo16(w3[0]) * (1 << up)),
                        (uint32_t)(eb_hi16(w3[0]) * (1 << up)));
    q->w1 = (uint32_t)(eb_lo16(w3[3]) * (1 << up)) & 0xFFFFu;
    q->init = (int32_t)((uint32_t)init << (16 - s)) + (relu ? 0 : (int32_t)128 << 16);
    q->form = form;
    return 1;
}

/* A lone channel's 1-D rows (k_h 1: segments of rows wholly in the padding, their outputs
 * the start, or of the one tap row) by quads q, its outputs from index. */
static EB_NOINLINE void eb_dw3_lines(const eb_dw_geom *g, const eb_dw_seg *seg, int n_seg,
                                     const int8_t *plane, const eb_dw3_quads *q,
                                     int32_t init, int32_t index, const eb_dw_out *o)
{
    const int out_w = g->out_w;
    int i;
    for (; n_seg > 0; --n_seg, ++seg) {
        const int32_t first = index + (int32_t)seg->oy * out_w;
        for (i = 0; i < seg->n; ++i) {
            const int iy = (seg->oy + i) * g->stride_h - g->pad_h;
            if (seg->lo >= seg->hi) {
                int x;
                for (x = 0; x < out_w; ++x) {
                    eb_dw_put(o, first + i * out_w + x, init);
                }
            } else {
                eb_dw3_line_of(g, plane + (int32_t)iy * g->in_w, q,
                               o->out8 + first + i * out_w, o->mode == EB_DW_RELU);
            }
        }
    }
}
#endif

/* ---- the table kernel ---- */

/* One pixel whose words may overhang a row end (its first tap at column b of the rows):
 * word i of the tap rows in range, entries f[i], f[i + nf], ... (rows of them; i == nf: the
 * last entries l[0], l[1], ... when nl == 1), is the same part of each row, so its load
 * offset and shifts are worked out once: (load(row + off) << sl) >> sr brings zeros in for
 * the bytes outside [0, in_w) (byte by byte when in_w < 4); a word wholly outside contributes
 * nothing. */
static int32_t eb_dw_edge(const int8_t *plane, int32_t rowidx, int32_t b, int in_w,
                          const eb_dw_entry *f, int nf, const eb_dw_entry *l, int nl, int rows,
                          int32_t a0)
{
    int i, r;
    for (i = 0; i < nf + nl; ++i) {
        const int32_t q = b + 4 * i;
        const eb_dw_entry *t = i < nf ? f + i : l;
        const int step = i < nf ? nf : 1;
        int32_t off = q;
        unsigned sl = 0, sr = 0;
        if (q <= -4 || q >= in_w) {
            continue;
        }
        if (in_w < 4) { /* byte by byte */
            for (r = rows; r > 0; --r, t += step) {
                const uint32_t x = eb_row_word(plane + (rowidx + t->row), (int)q, in_w);
                a0 = eb_smlad(t->w1, eb_sxtb16(x), a0);
                a0 = eb_smlad(t->w2, eb_sxtb16_ror8(x), a0);
            }
            continue;
        }
        if (q < 0) {
            off = 0, sl = (unsigned)(-8 * q);
        } else if (q > in_w - 4) {
            off = in_w - 4, sr = (unsigned)(8 * (q - off));
        }
        for (r = rows; r > 0; --r, t += step) {
            const uint32_t x = (eb_load32(plane + (rowidx + t->row + off)) << sl) >> sr;
            a0 = eb_smlad(t->w1, eb_sxtb16(x), a0);
            a0 = eb_smlad(t->w2, eb_sxtb16_ror8(x), a0);
        }
    }
    return a0;
}

/* count groups (pixel pairs, or pixels for EB_DW_SINGLE) of one output row whose words are
 * all inside the rows: the first group's entries at plane + idx + off, the next group step
 * bytes further (2, or stride_w); n entries at e (for EB_DW_PAIR_D1: n full ones, then
 * n_last last ones at l). Results from out index. */
EB_INLINE void eb_dw_run(const int8_t *plane, int32_t idx, int32_t step, const eb_dw_entry *e,
                         int n, const eb_dw_entry *l, int n_last, int odd, int32_t count,
                         int32_t init, const eb_dw_out *o, int32_t index, const int kind,
                         const int mode)
{
    int8_t *const d8 = o->out8;
    const int s = o->s;
    for (; count > 0; --count, idx += step) {
        const int8_t *q = plane + idx;
        const eb_dw_entry *t = e;
        int32_t a0 = init, a1 = init;
        int i;
        if (kind == EB_DW_PAIR_D1) {
            for (i = n; i > 0; --i, ++t) {
                const uint32_t x = eb_load32(q + t->off), x2 = eb_load32(q + t->off + 2);
                const uint32_t lo = eb_sxtb16(x), hi = eb_sxtb16_ror8(x);
                a0 = eb_smlad(t->w1, lo, a0);
                a0 = eb_smlad(t->w2, hi, a0);
                a1 = eb_smlad(t->w1, hi, a1);
                a1 = eb_smlad(t->w2, eb_sxtb16(x2), a1);
            }
            for (i = n_last, t = l; i > 0; --i, ++t) {
                const uint32_t x = eb_load32(q + t->off);
                const uint32_t lo = eb_sxtb16(x), hi = eb_sxtb16_ror8(x);
                a0 = eb_smlad(t->w1, lo, a0);
                a0 = eb_smlad(t->w2, hi, a0);
                a1 = eb_smlad(t->w1, hi, a1);
                a1 = eb_smlatb(lo, t->w2, a1);
            }
        } else if (kind == EB_DW_PAIR_EVEN) {
            for (i = n; i > 0; --i, ++t) {
                const uint32_t x = eb_load32(q + t->off);
                a0 = eb_smlad(t->w1, eb_sxtb16(x), a0);
                a1 = eb_smlad(t->w1, eb_sxtb16_ror8(x), a1);
            }
        } else {
            for (i = n; i > 0; --i, ++t) {
                const uint32_t x = eb_load32(q + t->off);
                a0 = eb_smlad(t->w1, eb_sxtb16(x), a0);
                if (odd) {
                    a0 = eb_smlad(t->w2, eb_sxtb16_ror8(x), a0);
                }
            }
        }
        if (kind == EB_DW_SINGLE) {
            if (mode == EB_DW_ANY) {
                eb_dw_put(o, index, a0);
            } else {
                d8[index] = eb_dw_q8(mode, a0, s, 0, 0, 0);
            }
            index += 1;
        } else {
            eb_dw_store2(mode, o, d8, s, index, a0, a1);
            index += 2;
        }
    }
}

/* The table kernel's runs: RELU (the usual activation of a depthwise layer) specialised. */
#define EB_DW_RUN(kind_)                                                                     \
    if (o->mode == EB_DW_RELU) {                                                             \
        eb_dw_run(plane, idx, step, e, n, l, n_last, odd, count, init, o, index, kind_,       \
                  EB_DW_RELU);                                                               \
    } else {                                                                                 \
        eb_dw_run(plane, idx, step, e, n, l, n_last, odd, count, init, o, index, kind_,       \
                  EB_DW_ANY);                                                                \
    }

static EB_NOINLINE void eb_dw_runs(const int8_t *plane, int32_t idx, int32_t step,
                                   const eb_dw_entry *e, int n, const eb_dw_entry *l,
                                   int n_last, int odd, int32_t count, int32_t init,
                                   const eb_dw_out *o, int32_t index, int kind)
{
    if (kind == EB_DW_PAIR_D1) {
        EB_DW_RUN(EB_DW_PAIR_D1)
    } else if (kind == EB_DW_PAIR_EVEN) {
        EB_DW_RUN(EB_DW_PAIR_EVEN)
    } else {
        EB_DW_RUN(EB_DW_SINGLE)
    }
}

/* The table of one output channel (w: its k_h x k_w weights): per tap row nf full entries
 * (k_h * nf of them first), then per tap row nl last ones. */
static EB_NOINLINE void eb_dw_entries(const eb_dw_geom *g, const int8_t *w, eb_dw_entry *e)
{
    const int nf = g->nf, per_row = g->nf + g->nl;
    int ky, kx, i;
    memset(e, 0, sizeof *e * (size_t)g->k_h * (size_t)per_row);
    for (ky = 0; ky < g->k_h; ++ky) {
        for (i = 0; i < per_row; ++i) {
            eb_dw_entry *t = i < nf ? e + ky * nf + i : e + g->k_h * nf + ky;
            t->row = (int32_t)ky * g->dil_h * g->in_w;
            t->off = t->row + 4 * i;
        }
        for (kx = 0; kx < g->k_w; ++kx) {
            const int32_t pos = (int32_t)kx * g->dil_w;
            const int i4 = (int)(pos >> 2);
            eb_dw_entry *t = i4 < nf ? e + ky * nf + i4 : e + g->k_h * nf + ky;
            const uint32_t v = (uint32_t)(uint16_t)(int16_t)w[ky * g->k_w + kx]
                               << (16 * ((pos >> 1) & 1));
            if (pos & 1) {
                t->w2 |= v;
            } else {
                t->w1 |= v;
            }
        }
    }
}

/* Output row oy of one channel (plane: its input channel, e: its table) with the table
 * kernel, into out from index: pixels [0, x0) and [x0 + span, out_w) one by one (words
 * possibly overhanging a row end), the span between in groups (eb_dw_run). */
static EB_NOINLINE void eb_dw_row(const eb_dw_geom *g, const int8_t *plane,
                                  const eb_dw_entry *e, int oy, int32_t init, const eb_dw_out *o,
                                  int32_t index)
{
    const int in_w = g->in_w, nf = g->nf, nl = g->nl;
    const int iy0 = oy * g->stride_h - g->pad_h;
    const int32_t rowidx = (int32_t)iy0 * in_w;
    int ky_lo, ky_hi, rows, x;

    eb_tap_range(iy0, g->dil_h, g->k_h, g->in_h, &ky_lo, &ky_hi);
    rows = ky_hi - ky_lo; /* tap rows in range: their entries only */
    for (x = 0; x < g->out_w; ++x) {
        const int32_t b = (int32_t)x * g->stride_w - g->pad_w;
        int32_t acc;
        if (x == g->x0 && g->span > 0) {
            const int pairs = g->kind != EB_DW_SINGLE;
            eb_dw_runs(plane, rowidx + b, pairs ? 2 : g->stride_w, e + ky_lo * nf, rows * nf,
                       e + g->k_h * nf + ky_lo * nl, rows * nl, g->odd,
                       pairs ? g->span / 2 : g->span, init, o, index + x, g->kind);
            x += g->span - 1;
            continue;
        }
        acc = eb_dw_edge(plane, rowidx, b, in_w, e + ky_lo * nf, nf,
                         e + g->k_h * nf + ky_lo * nl, nl, rows, init);
        eb_dw_put(o, index + x, acc);
    }
}

/* ---- the tile kernel ----
 * Any kernel, stride, dilation and multiplier the 3-tap kernels do not take: a tile of the
 * output (R rows x C columns, C a multiple of 4) reads a patch of the input channel, copied
 * as int16 with its zero padding into the scratch (EB_DW_TILE_SCRATCH, rows pw apart), so that
 * every tap pair [x(kx), x(kx + 1)] (dilation 1; one tap [x, 0] otherwise) of 4 neighbouring
 * output pixels is one word load each: per tap pair and block of 4 pixels 4 LDR and 4 SMLAD.
 * The kernel runs in the frame where its taps pair best: a column kernel (k_w == 1, k_h > 1,
 * or generally fewer pairs so) transposed -- the patch copied transposed and the outputs
 * stored down the columns -- so a 9x1 kernel costs 5 pairs a pixel, not 9 single taps.
 * Tap rows wholly in the padding are left out (eb_dw_tile_segments). */
#define EB_DW_TILE_TAPS 128                      /* tap pairs per output channel (stack) */

typedef struct {
    int32_t off; /* int16 elements from a block's first tap to this pair's first value */
    uint32_t w;  /* [w_a, w_b] (w_b = 0: a single tap) */
    uint32_t w2; /* the same of the second output channel of a pair (eb_dw_tile_pair) */
} eb_dw_tap;

/* The output channel(s) a tile kernel run computes: a, and b when ob is not NULL (two output
 * channels of one input channel: the patch words loaded once for both). */
typedef struct {
    int32_t init_a, init_b; /* the sums' start */
    const eb_dw_out *oa, *ob;
    int32_t ia, ib; /* the output channels' first elements */
} eb_dw_job;

typedef struct {
    int in_h, in_w, out_h, out_w, k_h, k_w, s_h, s_w, p_h, p_w, d_h, d_w; /* the frame */
    int32_t src_r, src_c; /* input bytes per frame row / column */
    int32_t dst_r, dst_c; /* output elements per frame row / column */
    int32_t w_r, w_c;     /* weights per frame tap row / column */
    int pairs, ntaps;     /* SMLADs per tap row; k_h * pairs */
    int rows, cols;       /* output rows, columns (a multiple of 4) per tile */
    int32_t pw;           /* patch row pitch (int16, even) */
    /* A dilation D > 1 along the rows at stride 1 runs as D phases (eb_dw_tile_phase): the
     * outputs x = D j + ph read the inputs of one residue mod D only, so each phase is a
     * dilation-1 conv over every D-th input column, whose taps pair for SMLAD (a k11
     * dilation-2 kernel: 6 pairs a pixel, not 11 single taps) -- where each phase has 16
     * outputs or more (a phase's patch, taps and blocks cost per channel: a 7x7 dilation-2
     * layer on 2 x 18 maps ran 43 % slower split). The frame above is then phase 0's; the
     * layer's own row: */
    int phases;
    int32_t in_w0, out_w0, p_w0, src_c0, dst_c0;
    /* A group's input channels (a dense or grouped conv: eb_dw_group_tile) side by side in
     * the patch, csz int16 apart; a tap row of the table is then chans x pairs tap pairs
     * (rowtaps), channel by channel. */
    int chans, rowtaps;
    int32_t csz;
    int32_t reach; /* the patch columns the last tile of a row reads (eb_dw_tile_reach) */
    int turned; /* rows and columns swapped */
} eb_dw_tf;

#define EB_DW_TILE_PHASES 8 /* the largest dilation split into phases */

static int eb_dw_npairs(int k, int d)
{
    return d == 1 ? (k + 1) / 2 : k;
}

/* Patch columns of `cols` output columns: every tap's value and one more (a pair's second
 * value past an odd last tap), even. A block of 4 pixels past the last output column reads
 * on into the next row (values it does not store), and past the last row at most
 * EB_DW_TILE_SLACK(s) int16. */
static int32_t eb_dw_tile_pitch(int32_t cols, int s, int k, int d)
{
    return ((cols - 1) * s + (int32_t)(k - 1) * d + 2 + 1) & ~(int32_t)1;
}
#define EB_DW_TILE_SLACK(s) (3 * (int32_t)(s) + 2)

/* The patch columns the last tile of a row reads: its last output's last tap, and the one
 * past it a pair of taps may hold (with a zero weight); up to the pitch pw. Lanes of a block
 * past the last output read further, but they are not stored: the columns from here on are
 * left as they are, not zeroed a tile (a 98-wide row's last tile zeroed 33 a patch row). */
static int32_t eb_dw_tile_reach(const eb_dw_tf *t)
{
    const int32_t cols = t->out_w - ((int32_t)(t->out_w - 1) / t->cols) * t->cols;
    const int32_t end = (cols - 1) * t->s_w + (int32_t)t->k_w * t->d_w + 1;
    return end < t->pw ? end : t->pw;
}

/* Phase ph of a frame split into t->phases (eb_dw_tf), into f (f may be t): outputs
 * x = D j + ph (D = t->phases) read inputs x - p_w0 + D kx = D (j + kx + a) + q, with
 * ph - p_w0 = D a + q, 0 <= q < D: the columns of residue q, as a row of their own padded by
 * -a, dilation 1, its outputs D apart. Returns the phase's offsets into the layer's input
 * and output planes (q and ph columns of the layer's row). */
static int32_t eb_dw_tile_phase(const eb_dw_tf *t, int ph, eb_dw_tf *f, int32_t *out_off)
{
    const int32_t d = t->phases, c0 = (int32_t)ph - t->p_w0;
    const int32_t a = c0 >= 0 ? c0 / d : -((-c0 + d - 1) / d), q = c0 - a * d;
    if (f != t) {
        *f = *t;
    }
    f->in_w = (int)((t->in_w0 - q + d - 1) / d);
    f->out_w = (int)((t->out_w0 - ph + d - 1) / d);
    f->p_w = (int)-a;
    f->d_w = 1;
    f->src_c = d * t->src_c0;
    f->dst_c = d * t->dst_c0;
    *out_off = ph * t->dst_c0;
    return q * t->src_c0;
}

/* The tile kernel's frame and tile for g (1-D normalized, not a 3-tap kind) over `chans`
 * input channels (1: depthwise), each its share of the scratch; 0 when it does not take the
 * layer (more than EB_DW_TILE_TAPS pairs, or no 1 x 4 tile fits). */
static int eb_dw_tile_plan(const eb_dw_geom *g, int chans, eb_dw_tf *t)
{
    /* SMLADs per output row: tap pairs x pixels computed (blocks of 4) */
    const int32_t as_is = (int32_t)g->k_h * eb_dw_npairs(g->k_w, g->dil_w) *
                          (((int32_t)g->out_w + 3) & ~3) * g->out_h;
    const int32_t turned = (int32_t)g->k_w * eb_dw_npairs(g->k_h, g->dil_h) *
                           (((int32_t)g->out_h + 3) & ~3) * g->out_w;
    const int flip = turned < as_is;
    int32_t band, cols, room;
    if (flip) {
        t->in_h = g->in_w, t->in_w = g->in_h, t->out_h = g->out_w, t->out_w = g->out_h;
        t->k_h = g->k_w, t->k_w = g->k_h, t->s_h = g->stride_w, t->s_w = g->stride_h;
        t->p_h = g->pad_w, t->p_w = g->pad_h, t->d_h = g->dil_w, t->d_w = g->dil_h;
        t->src_r = 1, t->src_c = g->in_w, t->dst_r = 1, t->dst_c = g->out_w;
        t->w_r = 1, t->w_c = g->k_w;
    } else {
        t->in_h = g->in_h, t->in_w = g->in_w, t->out_h = g->out_h, t->out_w = g->out_w;
        t->k_h = g->k_h, t->k_w = g->k_w, t->s_h = g->stride_h, t->s_w = g->stride_w;
        t->p_h = g->pad_h, t->p_w = g->pad_w, t->d_h = g->dil_h, t->d_w = g->dil_w;
        t->src_r = g->in_w, t->src_c = 1, t->dst_r = g->out_w, t->dst_c = 1;
        t->w_r = g->k_w, t->w_c = 1;
    }
    t->turned = flip;
    t->phases = 1;
    t->in_w0 = t->in_w, t->out_w0 = t->out_w, t->p_w0 = t->p_w;
    t->src_c0 = t->src_c, t->dst_c0 = t->dst_c;
    if (t->d_w > 1 && t->d_w <= EB_DW_TILE_PHASES && t->s_w == 1 && t->k_w > 1 &&
        t->out_w >= 16 * t->d_w) {
        int32_t unused;
        t->phases = t->d_w;
        (void)eb_dw_tile_phase(t, 0, t, &unused);
    }
    t->pairs = eb_dw_npairs(t->k_w, t->d_w);
    t->chans = chans;
    t->rowtaps = chans * t->pairs;
    t->ntaps = t->k_h * t->rowtaps;
    band = (int32_t)(t->k_h - 1) * t->d_h + 1; /* patch rows of one output row */
    /* a channel's reads past its patch land in the next one's (lanes not stored) */
    room = ((chans > 1 ? EB_DW_GROUP_PATCH : EB_DW_TILE_SCRATCH) - EB_DW_TILE_SLACK(t->s_w)) /
           (EB_DW_GROUP ? chans : 1);
    cols = ((int32_t)t->out_w + 3) & ~(int32_t)3;
    while (cols > 0 &&
           band * eb_dw_tile_pitch(cols < t->out_w ? cols : t->out_w, t->s_w, t->k_w, t->d_w) >
               room) {
        cols -= 4;
    }
    if (t->ntaps > EB_DW_TILE_TAPS || cols == 0) {
        return 0;
    }
    t->cols = (int)cols;
    t->pw = eb_dw_tile_pitch(cols < t->out_w ? cols : t->out_w, t->s_w, t->k_w, t->d_w);
    t->rows = (int)((room / t->pw - band) / t->s_h + 1);
    if (t->rows > t->out_h) {
        t->rows = t->out_h;
    }
    t->csz = ((int32_t)(t->rows - 1) * t->s_h + band) * t->pw;
    t->reach = eb_dw_tile_reach(t);
    return 1;
}

/* GCC turns the zeroing loops below into memset calls, which cost more than the few
 * columns of padding they zero. */
#if defined(__GNUC__) && !defined(__clang__)
#define EB_NO_MEMSET __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define EB_NO_MEMSET
#endif

/* The int16 pair [a, b] as one word (a in the bottom half). */
static inline uint32_t eb_dw_pair_word(int32_t a, int32_t b)
{
    return (uint32_t)(uint16_t)(int16_t)a | (uint32_t)(uint16_t)(int16_t)b << 16;
}

/* The 4 bytes at q widened to int16 at d (LDR, two SXTB16, PKHBT, PKHTB, two STR). */
EB_INLINE void eb_dw_widen4(int16_t *d, const int8_t *q)
{
    const uint32_t v = eb_load32(q);
    const uint32_t a = eb_sxtb16(v), b = eb_sxtb16_ror8(v); /* [x0 x2] [x1 x3] */
    eb_store32(d, eb_pack_lo(a, b));
    eb_store32(d + 2, eb_pack_hi(a, b));
}

/* Bytes [c, hi) of row widened to int16 into d[c, hi): 4 at a time, then one at a time (a
 * small plane's rows). */
EB_INLINE void eb_dw_widen(int16_t *d, const int8_t *row, int32_t c, int32_t hi)
{
    for (; c + 4 <= hi; c += 4) {
        eb_dw_widen4(d + c, row + c);
    }
    for (; c < hi; ++c) {
        d[c] = row[c];
    }
}

/* Patch elements [c, end) of a row (word-aligned) zeroed, two a store. */
EB_INLINE void eb_dw_tile_zero(int16_t *row, int32_t c, int32_t end)
{
    int16_t *d = row + c, *const e = row + (end & ~(int32_t)1);
    if (c >= end) {
        return;
    }
    if (c & 1) {
        *d++ = 0;
    }
    for (; d < e; d += 2) {
        eb_store32(d, 0);
    }
    if (end & 1) {
        *d = 0;
    }
}

#if EB_DW_TURNED
/* Two rows of a turned frame's patch, `skip` patch rows apart (the frame rows its taps
 * read: each, or every 2nd at stride 2 of a one-row kernel), columns [c, c + 2 n): two input
 * rows at a time (q, q + src_c: the patch's neighbouring columns) -- skip 1: their two
 * values a row by LDRH, joined (ORR) and split into the patch rows' words by SXTB16 and
 * SXTB16 ROR 8; skip 2: a word a row (bytes 0 and 2 the two patch rows' values), SXTB16,
 * paired by PKHBT / PKHTB -- 4 values in 7 or 8 instructions, where a byte at a time cost
 * about 6 a value. */
EB_INLINE void eb_dw_tile_turn2(const int8_t *q, int32_t src_c, int32_t c, int32_t n,
                                int16_t *patch, int32_t pw, const int skip)
{
    int16_t *d = patch + c;
    const int32_t step = skip * pw;
    for (q += c * src_c; n > 0; --n, q += 2 * src_c, d += 2) {
        if (skip == 1) {
            const uint32_t v = eb_load16(q) | eb_load16(q + src_c) << 16;
            eb_store32(d, eb_sxtb16(v));
            eb_store32(d + step, eb_sxtb16_ror8(v));
        } else {
            const uint32_t a = eb_sxtb16(eb_load32(q)), b = eb_sxtb16(eb_load32(q + src_c));
            eb_store32(d, eb_pack_lo(a, b));
            eb_store32(d + step, eb_pack_hi(a, b));
        }
    }
}

/* Four neighbouring rows of a turned frame's patch (skip 1), columns [c, c + 2 n): two input
 * rows at a time (q, q + src_c), a word of each (the four patch rows' values), split by
 * SXTB16 / SXTB16 ROR 8 and paired by PKHBT / PKHTB: 8 values in 14 instructions beside the
 * loop, where two rows at a time took 14 for 4 and the loop twice. */
EB_INLINE void eb_dw_tile_turn4(const int8_t *q, int32_t src_c, int32_t c, int32_t n,
                                int16_t *patch, int32_t pw)
{
    int16_t *d = patch + c;
    for (q += c * src_c; n > 0; --n, q += 2 * src_c, d += 2) {
        const uint32_t a = eb_load32(q), b = eb_load32(q + src_c);
        const uint32_t a02 = eb_sxtb16(a), b02 = eb_sxtb16(b);
        const uint32_t a13 = eb_sxtb16_ror8(a), b13 = eb_sxtb16_ror8(b);
        eb_store32(d, eb_pack_lo(a02, b02));
        eb_store32(d + pw, eb_pack_lo(a13, b13));
        eb_store32(d + 2 * pw, eb_pack_hi(a02, b02));
        eb_store32(d + 3 * pw, eb_pack_hi(a13, b13));
    }
}

/* `rows` rows (1, 2, or 4 at skip 1) of a turned frame's patch, skip patch rows apart, from
 * the plane at q (the first row's column 0): columns [lo, hi) (at least 2) of the input, 0
 * around them up to end (eb_dw_tile_reach); four rows by eb_dw_tile_turn4, two by
 * eb_dw_tile_turn2, one two values a word -- words from column lo, even or odd (the M4
 * stores them unaligned; an odd lo's byte first cost a loop a row), an odd count's last
 * value alone. */
static EB_NOINLINE EB_NO_MEMSET void eb_dw_tile_turned(const int8_t *q, int32_t src_c,
                                                       int32_t lo, int32_t hi, int16_t *patch,
                                                       int32_t pw, int skip, int rows,
                                                       int32_t end)
{
    const int32_t n = (hi - lo) >> 1, c1 = lo + 2 * n;
    int j;
    int32_t c;
    for (j = 0; j < rows; ++j) {
        int16_t *d = patch + (int32_t)j * skip * pw;
        for (c = 0; c < lo; ++c) {
            d[c] = 0;
        }
        if (c1 < hi) { /* an odd count's last */
            d[c1] = q[j * skip + c1 * src_c];
        }
        eb_dw_tile_zero(d, hi, end);
    }
    if (rows == 1) {
        for (c = lo, q += lo * src_c; c < c1; c += 2, q += 2 * src_c) {
            eb_store32(patch + c, eb_dw_pair_word(q[0], q[src_c]));
        }
    } else if (rows == 4) {
        eb_dw_tile_turn4(q, src_c, lo, n, patch, pw);
    } else if (skip == 1) {
        eb_dw_tile_turn2(q, src_c, lo, n, patch, pw, 1);
    } else {
        eb_dw_tile_turn2(q, src_c, lo, n, patch, pw, 2);
    }
}

#endif

/* n patch rows (pw int16 apart) of contiguous input rows (src_r bytes apart from x, the
 * patch's column 0): zeros in columns [0, lo) and [hi, end), the row's columns [lo, hi)
 * (at least 4) widened 4 a word and its last 1..3 by a word stepping back over values
 * done (the same again), where a byte at a time cost about 5 a value: a row of 10 values
 * in padding of 2 about 70 instructions, 100 before -- a tile kernel's narrow maps. */
static EB_NOINLINE EB_NO_MEMSET void eb_dw_tile_rows1(int16_t *patch, int32_t pw,
                                                      const int8_t *x, int32_t src_r,
                                                      int32_t n, int32_t lo, int32_t hi,
                                                      int32_t end)
{
    for (; n > 0; --n, patch += pw, x += src_r) {
        int32_t c;
        /* the zeros two a word first: an odd count's last word writes a column of the row,
         * widened after them */
        for (c = end; c > hi; c -= 2) {
            eb_store32(patch + c - 2, 0);
        }
        for (c = 0; c < lo; c += 2) {
            eb_store32(patch + c, 0);
        }
        for (c = lo; c < hi - 4; c += 4) {
            eb_dw_widen4(patch + c, x + c);
        }
        eb_dw_widen4(patch + hi - 4, x + hi - 4); /* the last (over 0..3 done: the same) */
    }
}

/* The patch of the tile at output (oy0, ox0) of channel `plane`: rows (rows - 1) * s_h +
 * band, pw int16 each, x or 0 outside the input; rows of 4 or more contiguous bytes by
 * eb_dw_tile_rows1, the others a value at a time. Rows wholly in the padding are
 * not written: eb_dw_tile_segments leaves the tap rows that would read them out of the sums
 * (a 7x7 dilation-2 layer on a 2-row map zeroed 12 of its 14 patch rows per channel). Only a
 * block's lanes past the last output column, which are not stored, may read them. A turned
 * frame's: eb_dw_tile_fill_turned. */
static EB_NOINLINE EB_NO_MEMSET void eb_dw_tile_fill(const eb_dw_tf *t, const int8_t *plane,
                                                     int oy0, int ox0, int rows,
                                                     int16_t *patch)
{
    /* the frame's fields as locals: the patch's stores could alias *t for the compiler */
    const int32_t iy0 = (int32_t)oy0 * t->s_h - t->p_h, ix0 = (int32_t)ox0 * t->s_w - t->p_w;
    const int32_t ph = (int32_t)(rows - 1) * t->s_h + (int32_t)(t->k_h - 1) * t->d_h + 1;
    const int32_t pw = t->pw, in_h = t->in_h, src_r = t->src_r, src_c = t->src_c;
    const int32_t end = ox0 + t->cols < t->out_w ? pw : t->reach;
    const int32_t lo = ix0 < 0 ? (-ix0 < end ? -ix0 : end) : 0;
    const int32_t hi = t->in_w - ix0 < end ? t->in_w - ix0 : end; /* columns [lo, hi) */
    int32_t base = iy0 * src_r + ix0 * src_c; /* plane offset of the row's column 0 */
    int32_t r, c;
    const int8_t *q;
    /* only the rows in the input: no tap reads a row in the padding (eb_dw_tile_segments) */
    const int32_t r0 = iy0 < 0 ? -iy0 : 0, r1 = in_h - iy0 < ph ? in_h - iy0 : ph;
    patch += r0 * pw;
    base += r0 * src_r;
    if (src_c == 1 && hi - lo >= 4) {
        eb_dw_tile_rows1(patch, pw, plane + base, src_r, r1 - r0, lo, hi, end);
        return;
    }
    for (r = r0; r < r1; ++r, patch += pw, base += src_r) {
        c = 0;
        if (hi > lo) { /* (else the row all zeros) */
            for (; c < lo; ++c) {
                patch[c] = 0;
            }
            q = plane + (base + c * src_c);
            if (src_c == 2) { /* a dilation-2 phase: one SXTB16 takes two of a word's bytes
                               * (while a third column follows: no read past the row) */
                for (; c + 3 <= hi; c += 2, q += 4) {
                    eb_store32(patch + c, eb_sxtb16(eb_load32(q)));
                }
            }
            for (; c < hi; ++c, q += src_c) { /* (src_c 1: fewer than 4) */
                patch[c] = *q;
            }
        }
        eb_dw_tile_zero(patch, c, end);
    }
}

#if EB_DW_TURNED
/* eb_dw_tile_fill in a turned frame (src_r 1: a patch row is an input column, src_c apart):
 * two patch rows at a time where both lie in the input and skip <= 2, else one, by
 * eb_dw_tile_turned; a row of fewer than 2 input values a value at a time. */
static EB_NOINLINE EB_NO_MEMSET void eb_dw_tile_fill_turned(const eb_dw_tf *t,
                                                            const int8_t *plane, int oy0,
                                                            int ox0, int rows, int16_t *patch)
{
    const int32_t iy0 = (int32_t)oy0 * t->s_h - t->p_h, ix0 = (int32_t)ox0 * t->s_w - t->p_w;
    const int32_t ph = (int32_t)(rows - 1) * t->s_h + (int32_t)(t->k_h - 1) * t->d_h + 1;
    const int32_t pw = t->pw, in_h = t->in_h, src_c = t->src_c;
    const int32_t end = ox0 + t->cols < t->out_w ? pw : t->reach;
    const int32_t lo = ix0 < 0 ? (-ix0 < end ? -ix0 : end) : 0;
    const int32_t hi = t->in_w - ix0 < end ? t->in_w - ix0 : end; /* columns [lo, hi) */
    const int32_t skip = t->k_h == 1 ? t->s_h : 1;             /* the rows the taps read */
    const int8_t *q = plane + iy0 + ix0 * src_c;               /* row r's column 0 */
    int32_t r, c;
    /* only the rows in the input (every skip-th): no tap reads a row in the padding */
    const int32_t r0 = iy0 < 0 ? (-iy0 + skip - 1) / skip * skip : 0;
    const int32_t r1 = in_h - iy0 < ph ? in_h - iy0 : ph;
    patch += r0 * pw;
    q += r0;
    for (r = r0; r < r1; r += skip, patch += skip * pw, q += skip) {
        const int32_t iy = iy0 + r;
        int nr;
        if (hi - lo < 2) {
            for (c = 0; c < end; ++c) {
                patch[c] = (int16_t)(c >= lo && c < hi ? q[c * src_c] : 0);
            }
            continue;
        }
        /* the rows it reads: four at skip 1 where they are in the input, else two, else one */
        nr = skip == 1 && r + 3 < r1                                  ? 4
             : skip <= 2 && r + skip < ph && iy + 2 * skip - 1 < in_h ? 2
                                                                      : 1;
        eb_dw_tile_turned(q, src_c, lo, hi, patch, pw, (int)skip, nr, end);
        r += (nr - 1) * skip, patch += (nr - 1) * skip * pw, q += (nr - 1) * skip;
    }
}
#endif
/* The patch's copy for frame f. */
#if EB_DW_TURNED
#define EB_DW_FILL(f) ((f)->turned ? eb_dw_tile_fill_turned : eb_dw_tile_fill)
#else
#define EB_DW_FILL(f) eb_dw_tile_fill
#endif

/* The offsets of the frame's tap pairs (every tap row): d_w int16 apart (2 a pair with
 * dilation 1), per channel of a group csz apart. The same for every phase, tile and output
 * channel: once per layer. */
static EB_NOINLINE void eb_dw_tile_offsets(const eb_dw_tf *t, eb_dw_tap *tap)
{
    const int32_t step = t->d_w == 1 ? 2 : t->d_w, row = (int32_t)t->d_h * t->pw;
    int ky, c, p;
    for (ky = 0; ky < t->k_h; ++ky) {
        for (c = 0; c < EB_DW_CHANS(t); ++c, tap += t->pairs) {
            int32_t off = (int32_t)ky * row + c * t->csz;
            for (p = 0; p < t->pairs; ++p, off += step) {
                tap[p].off = off;
            }
        }
    }
}

/* The tap pairs' words of one output channel's weights wa, and of a second one's wb (or
 * NULL), scaled by 2^ta, 2^tb (eb_dw_tile_init): once per channel and tile (once per group
 * where one job covers it: eb_dw_tile_layer), a short map's cost, kept to a few
 * instructions a pair: a tap row's pairs of both channels in one pass, where a helper
 * called per channel and row spent about 24 instructions a word on a 3x5 stride-2 layer's
 * turned frame (two pairs a row; 128 -> 512 on 22 x 11: 3.08 -> 3.01 insn/MAC). Only the tap rows [ky_lo, ky_hi) that some output row of the tiles
 * reads inside the input (eb_dw_tile_rows): eb_dw_tile_segments leaves the others out of
 * the sums. */
static EB_NOINLINE void eb_dw_tile_taps(const eb_dw_tf *t, const int8_t *wa, const int8_t *wb,
                                        int ky_lo, int ky_hi, eb_dw_tap *tap, int ta, int tb)
{
    const int32_t w_c = t->w_c, wstep = t->d_w == 1 ? 2 * w_c : w_c;
    const int pairs = t->pairs, full = t->d_w == 1 ? t->k_w / 2 : 0;
    const int32_t cw = (int32_t)t->k_h * t->k_w; /* weights per input channel */
    const int chans = EB_DW_CHANS(t);
    int ky, c, p;
    for (ky = ky_lo, tap += ky_lo * t->rowtaps; ky < ky_hi; ++ky) {
        for (c = 0; c < chans; ++c) { /* a tap row's pairs of both channels in one pass */
            int32_t q = (int32_t)ky * t->w_r + c * cw;
            for (p = 0; p < full; ++p, q += wstep, ++tap) { /* pairs [w(2p), w(2p + 1)] */
                tap->w = eb_dw_pair_word(wa[q] * (1 << ta), wa[q + w_c] * (1 << ta));
                if (wb != NULL) { /* one channel: w2 is not read */
                    tap->w2 = eb_dw_pair_word(wb[q] * (1 << tb), wb[q + w_c] * (1 << tb));
                }
            }
            for (; p < pairs; ++p, q += wstep, ++tap) { /* single taps [w, 0] */
                tap->w = eb_dw_pair_word(wa[q] * (1 << ta), 0);
                if (wb != NULL) {
                    tap->w2 = eb_dw_pair_word(wb[q] * (1 << tb), 0);
                }
            }
        }
    }
}

/* The sums of 4 pixels s int16 apart from x (their first taps), two tap pairs a pass. */
#define EB_DW_TILE_TAP(q_, w_)                                                               \
    a0 = eb_smlad(eb_load32(q_), w_, a0);                                                    \
    a1 = eb_smlad(eb_load32((q_) + s), w_, a1);                                              \
    a2 = eb_smlad(eb_load32((q_) + 2 * s), w_, a2);                                          \
    a3 = eb_smlad(eb_load32((q_) + 3 * s), w_, a3);

/* The first `count` (<= 4) of four sums of pixels dc apart from index, into o: a row's last
 * block, or a block in a mode the loops do not store inline. */
static EB_NOINLINE void eb_dw_tile_put4(const eb_dw_out *o, int32_t index, int32_t dc, int count,
                                        int32_t a0, int32_t a1, int32_t a2, int32_t a3)
{
    const int32_t acc[4] = {a0, a1, a2, a3};
    const int mode = o->mode, s = o->s;
    int8_t *const d = o->out8;
    int j;
    if (mode == EB_DW_WIDE) { /* stored here, not by a call per value: how fast that call
                               * loop ran depended on which other loops were linked */
        for (j = 0; j < count; ++j, index += dc) {
            o->out32[index] = acc[j];
        }
        return;
    }
    for (j = 0; j < count; ++j, index += dc) {
        if (mode == EB_DW_RELU) {
            d[index] = eb_dw_q8(EB_DW_RELU, acc[j], s, 0, 0, 0);
        } else if (mode == EB_DW_NONE) {
            d[index] = eb_dw_q8(EB_DW_NONE, acc[j], s, 0, 0, 0);
        } else {
            eb_dw_put(o, index, acc[j]);
        }
    }
}

/* Four sums of pixels dc apart from d (int8) in the NONE / RELU modes, shift s. */
EB_INLINE void eb_dw_tile_q4(const int mode, int8_t *d, const int32_t dc, int s, int32_t a0,
                             int32_t a1, int32_t a2, int32_t a3)
{
    d[0] = eb_dw_q8(mode, a0, s, 0, 0, 0);
    d[dc] = eb_dw_q8(mode, a1, s, 0, 0, 0);
    d[2 * dc] = eb_dw_q8(mode, a2, s, 0, 0, 0);
    d[3 * dc] = eb_dw_q8(mode, a3, s, 0, 0, 0);
}

/* The inline-assembly loops' operands for the sums of 4 pixels x 2 channels (a0..a3, b0..b3),
 * read and written. */
#define EB_ASM_SUMS8                                                                         \
    [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [b0] "+r"(b0), [b1] "+r"(b1), \
        [b2] "+r"(b2), [b3] "+r"(b3)

/* Two channels' tap pairs [e, end) of 4 pixels s int16 apart from row, on the M4: the 8 sums,
 * the 3 words of a tap and the pointers are all the registers there are, which GCC's C does
 * not manage without spilling (end is read from the stack). Per tap pair 2 loads of the tap,
 * an ADD, 4 LDR and 8 SMLAD: 15 instructions per 16 MACs, and 3 per two pairs for the loop;
 * an odd count enters the loop at its second pair. The asm reads the patch and the taps,
 * which nothing in this function writes (the "memory" clobber would make GCC reload every
 * spilled value after it). At least one pair. */
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__) && defined(__thumb2__) && \
    defined(__OPTIMIZE__) && !defined(EB_OPT_PORTABLE)
#define EB_DW_PAIR_ASM 1
#define EB_DW_PAIR_PX(a, b, at)                                                              \
    "ldr %[v], [%[off], #" at "]\n\t"                                                        \
    "smlad %[" a "], %[v], %[wa], %[" a "]\n\t"                                              \
    "smlad %[" b "], %[v], %[wb], %[" b "]\n\t"
#define EB_DW_PAIR_TAP(s2, s4, s6)                                                           \
    "ldr %[wb], [%[e], #8]\n\t"                                                              \
    "ldrd %[off], %[wa], [%[e]], #12\n\t"                                                    \
    "add %[off], %[row], %[off], lsl #1\n\t"                                                 \
    EB_DW_PAIR_PX("a0", "b0", "0") EB_DW_PAIR_PX("a1", "b1", s2)                             \
    EB_DW_PAIR_PX("a2", "b2", s4) EB_DW_PAIR_PX("a3", "b3", s6)
/* An odd count (bit 2 of 12 x count bytes) enters the loop at its second pair. */
#define EB_DW_PAIR_LOOP(s2, s4, s6)                                                          \
    do {                                                                                     \
        uint32_t off, wa, wb, v;                                                             \
        __asm__ volatile("ldr %[v], %[end]\n\t"                                              \
                         "sub %[v], %[v], %[e]\n\t"                                          \
                         "tst %[v], #4\n\t"                                                  \
                         "bne 2f\n\t"                                                        \
                         "1:\n\t" EB_DW_PAIR_TAP(s2, s4, s6)                                 \
                         "2:\n\t" EB_DW_PAIR_TAP(s2, s4, s6)                                 \
                         "ldr %[v], %[end]\n\t"                                              \
                         "cmp %[e], %[v]\n\t"                                                \
                         "bne 1b\n\t"                                                        \
                         : EB_ASM_SUMS8, [e] "+r"(e), [off] "=&r"(off), [wa] "=&r"(wa),      \
                           [wb] "=&r"(wb), [v] "=&r"(v)                                      \
                         : [row] "r"(row), [end] "m"(end)                                    \
                         : "cc");                                                            \
    } while (0)
#else
#define EB_DW_PAIR_ASM 0
#endif

/* A row's whole blocks of 4 pixels x two channels on the M4, in a NONE / RELU mode both share:
 * the block loop, the tap loop (as EB_DW_PAIR_LOOP) and the stores in one naked function,
 * its state in the 14 registers and its counters and pointers in its own stack frame (a copy
 * of the job). The C block loop around EB_DW_PAIR_LOOP spent about 40 instructions a block on
 * spilled state (GCC has no register left beside the asm's 14): here a block costs about
 * 47 beside its tap pairs (14 instructions per 16 MACs each: the tap by one LDM). Pixels s
 * int16 apart in the patch (s 1 or 2: the loads' immediates), outputs dc apart. */
/* The row functions' walk over a tile (both jobs hold it at offset 24): rows of w >= 4 pixels
 * in blocks of 4, the last overlapping the one before; the patch's rows `pitch` int16 apart,
 * pixels s apart; outputs dc apart along a row and dst_r from row to row. */
typedef struct {
    int32_t dc, nb, n, rows; /* 24, 28, 32, 36: output stride; a row's blocks less one, left
                                after the current one; rows left */
    int32_t back, oback;     /* 40, 44: bytes the patch and the outputs step back before a
                                row's last block (it overlaps the one before) */
    int32_t prow, orow;      /* 48, 52: bytes from a row's end to the next row's start */
} eb_dw_row_walk;

/* Assembly of the walk, for the functions whose two output pointers are r9, r10 (their copy
 * in the frame at sp + 48) and whose input pointer is lr: the step by the pair of words at sp
 * + off (back, oback or prow, orow); and the end of a block, the count at sp + n down by one
 * -- the next block ("again", while any is left after the current one), the row's end
 * ("done"), or else the step back before the last block. */
#define EB_DW_WALK2(off)                                                                     \
    "ldrd r11, r12, [sp, #" off "]\n\t"                                                     \
    "add lr, lr, r11\n\t"                                                                   \
    "add r9, r9, r12\n\t"                                                                   \
    "add r10, r10, r12\n\t"                                                                 \
    "strd r9, r10, [sp, #48]\n\t"
#define EB_DW_NEXT_BLOCK(n, again, done)                                                     \
    "ldr r12, [sp, #" n "]\n\t"                                                             \
    "subs r12, r12, #1\n\t"                                                                 \
    "str r12, [sp, #" n "]\n\t"                                                             \
    "bgt " again "\n\t"                                                                     \
    "bne " done "\n\t"

EB_INLINE void eb_dw_row_walk_of(eb_dw_row_walk *k, int32_t w, int rows, int s, int32_t dc,
                                 int32_t pitch, int32_t dst_r)
{
    const int32_t nb = (w + 3) >> 2, back = w - 4 * nb; /* -3 .. 0 */
    k->dc = dc;
    k->n = k->nb = nb - 1;
    k->rows = rows;
    k->back = 2 * back * s; /* bytes of int16 */
    k->oback = back * dc;
    k->prow = 2 * (pitch - 4 * nb * s - back * s);
    k->orow = dst_r - 4 * nb * dc - back * dc;
}

#if EB_DW_PAIR_ASM && (EB_DW_TILE_PAIR_S1 || EB_DW_TILE_PAIR_S2 || EB_DW_TILE_PAIR)
#define EB_DW_ROW_ASM 1
typedef struct {
    int32_t init_a, init_b;         /* 0, 4: the sums' start */
    const eb_dw_tap *tap, *end;     /* 8, 12: the tap pairs */
    int8_t *da, *db;                /* 16, 20: the next block's outputs (advanced) */
    eb_dw_row_walk k;               /* 24 .. 52 */
    const int16_t *row;             /* 56: the first row's first pixel */
} eb_dw_row_job;

#define EB_DW_ROW_PX(a, b, at)                                                               \
    "ldr r12, [r9, #" at "]\n\t"                                                            \
    "smlad " a ", r12, r10, " a "\n\t"                                                      \
    "smlad " b ", r12, r11, " b "\n\t"
/* A tap (offset, wa, wb) by one LDM: its fixed registers ascend (the C loop's cannot). */
#define EB_DW_ROW_TAP(s2, s4, s6)                                                            \
    "ldmia r8!, {r9, r10, r11}\n\t"                                                         \
    "add r9, lr, r9, lsl #1\n\t" EB_DW_ROW_PX("r0", "r4", "0") EB_DW_ROW_PX("r1", "r5", s2)  \
        EB_DW_ROW_PX("r2", "r6", s4) EB_DW_ROW_PX("r3", "r7", s6)
#define EB_DW_ROW_STORE4(d, x0, x1, x2, x3)                                                  \
    "strb " x0 ", [" d "]\n\t"                                                              \
    "strb " x1 ", [" d ", r11]\n\t"                                                         \
    "add " d ", " d ", r11, lsl #1\n\t"                                                     \
    "strb " x2 ", [" d "]\n\t"                                                              \
    "strb " x3 ", [" d ", r11]\n\t"                                                         \
    "add " d ", " d ", r11, lsl #1\n\t"
#define EB_DW_ROW_Q8(sat, bits, c)                                                           \
    EB_ASM_SAT4_ASR(sat, bits, "r0", "r1", "r2", "r3", c)                                    \
    EB_ASM_SAT4_ASR(sat, bits, "r4", "r5", "r6", "r7", c)
/* The frame: the 8 sums' start at sp (init_a x 4, init_b x 4: one LDM a block), the job's
 * copy above it at sp + 32 (its fields at 32 + their offsets). A tile's rows in one call: a
 * row's blocks 4 pixels apart but its last, which overlaps the one before where the row's
 * width is no multiple of 4 (their pixels stored again, the same), then the next row. */
#define EB_DW_ROW_FN(name, s2, s4, s6, step, sat, bits, c)                                   \
    static __attribute__((naked, noinline)) void name(const eb_dw_row_job *job              \
                                                      __attribute__((unused)))              \
    {                                                                                        \
        __asm__ volatile("push {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                  \
                         "sub sp, sp, #88\n\t"                                              \
                         "ldr lr, [r0, #56]\n\t"                                            \
                         "add r12, sp, #32\n\t"                                             \
                         "ldmia r0!, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                   \
                         "stmia r12!, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                  \
                         "ldmia r0, {r1, r2, r3, r4, r5, r6}\n\t"                            \
                         "stmia r12, {r1, r2, r3, r4, r5, r6}\n\t"                           \
                         "ldrd r1, r5, [sp, #32]\n\t"                                       \
                         "mov r6, r5\n\tmov r7, r5\n\tmov r8, r5\n\t"                        \
                         "mov r2, r1\n\tmov r3, r1\n\tmov r4, r1\n\t"                        \
                         "stmia sp, {r1, r2, r3, r4, r5, r6, r7, r8}\n"                      \
                         "1:\n\t"                                                            \
                         "ldmia sp, {r0, r1, r2, r3, r4, r5, r6, r7}\n\t"                    \
                         "ldrd r8, r12, [sp, #40]\n\t"                                      \
                         "sub r12, r12, r8\n\t"                                             \
                         "tst r12, #4\n\t"                                                  \
                         "bne 3f\n"                                                          \
                         "2:\n\t" EB_DW_ROW_TAP(s2, s4, s6)                                  \
                         "3:\n\t" EB_DW_ROW_TAP(s2, s4, s6)                                  \
                         "ldr r12, [sp, #44]\n\t"                                           \
                         "cmp r8, r12\n\t"                                                  \
                         "bne 2b\n\t"                                                       \
                         EB_DW_ROW_Q8(sat, bits, c)                                         \
                         "ldrd r9, r10, [sp, #48]\n\t"                                      \
                         "ldr r11, [sp, #56]\n\t" EB_DW_ROW_STORE4("r9", "r0", "r1", "r2",  \
                                                                   "r3")                     \
                             EB_DW_ROW_STORE4("r10", "r4", "r5", "r6", "r7")                 \
                         "strd r9, r10, [sp, #48]\n\t"                                      \
                         "add lr, lr, #" step "\n\t"                                        \
                         EB_DW_NEXT_BLOCK("64", "1b", "4f") EB_DW_WALK2("72")                \
                         "b 1b\n"                                                            \
                         "4:\n\t" EB_DW_WALK2("80")                                          \
                         "ldr r12, [sp, #60]\n\t"                                           \
                         "str r12, [sp, #64]\n\t"                                           \
                         "ldr r12, [sp, #68]\n\t"                                           \
                         "subs r12, r12, #1\n\t"                                            \
                         "str r12, [sp, #68]\n\t"                                           \
                         "bne 1b\n\t"                                                       \
                         "add sp, sp, #88\n\t"                                              \
                         "pop {r4, r5, r6, r7, r8, r9, r10, r11, pc}");                       \
    }
/* Per stride s_ (its pixels' offsets, the row's step), the forms linked. */
#define EB_DW_ROW_FNS(s_, s2, s4, s6, step)                                                  \
    EB_DW_R8(EB_DW_ROW_FN(eb_dw_row_s##s_##_relu_8, s2, s4, s6, step, "usat", "#7", "#8"))   \
    EB_DW_R16(EB_DW_ROW_FN(eb_dw_row_s##s_##_relu_16, s2, s4, s6, step, "usat", "#7", "#16")) \
    EB_DW_N8(EB_DW_ROW_FN(eb_dw_row_s##s_##_none_8, s2, s4, s6, step, "ssat", "#8", "#8"))   \
    EB_DW_N16(EB_DW_ROW_FN(eb_dw_row_s##s_##_none_16, s2, s4, s6, step, "ssat", "#8", "#16"))
#if EB_DW_TILE_PAIR_S1 || EB_DW_TILE_PAIR
EB_DW_ROW_FNS(1, "2", "4", "6", "8")
#endif
#if EB_DW_TILE_PAIR_S2 || EB_DW_TILE_PAIR
EB_DW_ROW_FNS(2, "4", "8", "12", "16")
#endif

/* The row function for stride s and mode shifting by c (8, 16; NULL when it is not linked:
 * the C loop runs). */
static void (*eb_dw_row_fn(int s, int mode, int c))(const eb_dw_row_job *)
{
#if EB_DW_TILE_PAIR_S1 || EB_DW_TILE_PAIR
    EB_DW_ROW_PICKS(eb_dw_row_s, 1)
#endif
#if EB_DW_TILE_PAIR_S2 || EB_DW_TILE_PAIR
    EB_DW_ROW_PICKS(eb_dw_row_s, 2)
#endif
    (void)s;
    (void)mode;
    (void)c;
    return NULL;
}
#else
#define EB_DW_ROW_ASM 0
#endif


/* eb_dw_tile_run for two output channels of one input channel (j->ob): each pixel's tap
 * pair loaded once for both; pixels s apart in the patch, outputs dc apart. The NONE and
 * RELU stores (both channels in one of them: `mode`) from their output pointers held here,
 * not read through j each block. */
EB_INLINE void eb_dw_tile_run2(const eb_dw_tf *t, const int16_t *patch, const eb_dw_tap *tap,
                               const eb_dw_job *j, int oy0, int ox0, int rows, const int s,
                               const int32_t dc, const int inner_asm)
{
    const int xend = ox0 + t->cols < t->out_w ? ox0 + t->cols : t->out_w;
    const int32_t pitch = (int32_t)t->s_h * t->pw;
    const eb_dw_tap *const end = tap + t->ntaps;
    const int mode = j->oa->mode == j->ob->mode ? j->oa->mode : EB_DW_ANY;
    const int fast = mode == EB_DW_NONE || mode == EB_DW_RELU, sh = j->oa->s;
    int8_t *const da = fast ? j->oa->out8 + j->ia : NULL;
    int8_t *const db = fast ? j->ob->out8 + j->ib : NULL;
    int r, x;
#if EB_DW_ROW_ASM
    void (*const fn)(const eb_dw_row_job *) = fast ? eb_dw_row_fn(s, mode, sh) : NULL;
    eb_dw_row_job rj;
    (void)inner_asm;
    if (fn != NULL && xend - ox0 >= 4 && rows > 0) { /* every row, the whole blocks */
        const int32_t to = (int32_t)oy0 * t->dst_r + (int32_t)ox0 * dc;
        rj.init_a = j->init_a;
        rj.init_b = j->init_b;
        rj.tap = tap;
        rj.end = end;
        rj.da = da + to;
        rj.db = db + to;
        eb_dw_row_walk_of(&rj.k, xend - ox0, rows, s, dc, pitch, t->dst_r);
        rj.row = patch;
        fn(&rj);
        return;
    }
#else
    (void)inner_asm;
#endif
    for (r = 0; r < rows; ++r) {
        const int16_t *row = patch + (int32_t)r * pitch;
        const int32_t at = (int32_t)(oy0 + r) * t->dst_r;
        x = ox0;
        for (; x + 4 <= xend; x += 4, row += 4 * s) {
        block:
            {
                const eb_dw_tap *e = tap;
                const int32_t to = at + (int32_t)x * dc;
                int32_t a0 = j->init_a, a1 = j->init_a, a2 = j->init_a, a3 = j->init_a;
                int32_t b0 = j->init_b, b1 = j->init_b, b2 = j->init_b, b3 = j->init_b;
#if EB_DW_PAIR_ASM
                if (inner_asm && s == 1) {
                    EB_DW_PAIR_LOOP("2", "4", "6");
                } else if (inner_asm) {
                    EB_DW_PAIR_LOOP("4", "8", "12");
                }
#endif
                for (; e < end; ++e) { /* none left after the asm */
                    const int16_t *q = row + e->off;
                    const uint32_t v0 = eb_load32(q), v1 = eb_load32(q + s);
                    const uint32_t v2 = eb_load32(q + 2 * s), v3 = eb_load32(q + 3 * s);
                    a0 = eb_smlad(v0, e->w, a0);
                    a1 = eb_smlad(v1, e->w, a1);
                    a2 = eb_smlad(v2, e->w, a2);
                    a3 = eb_smlad(v3, e->w, a3);
                    b0 = eb_smlad(v0, e->w2, b0);
                    b1 = eb_smlad(v1, e->w2, b1);
                    b2 = eb_smlad(v2, e->w2, b2);
                    b3 = eb_smlad(v3, e->w2, b3);
                }
                if (xend - x >= 4 && mode == EB_DW_RELU) {
                    eb_dw_tile_q4(EB_DW_RELU, da + to, dc, sh, a0, a1, a2, a3);
                    eb_dw_tile_q4(EB_DW_RELU, db + to, dc, sh, b0, b1, b2, b3);
                } else if (xend - x >= 4 && mode == EB_DW_NONE) {
                    eb_dw_tile_q4(EB_DW_NONE, da + to, dc, sh, a0, a1, a2, a3);
                    eb_dw_tile_q4(EB_DW_NONE, db + to, dc, sh, b0, b1, b2, b3);
                } else {
                    const int count = xend - x < 4 ? xend - x : 4;
                    eb_dw_tile_put4(j->oa, j->ia + to, dc, count, a0, a1, a2, a3);
                    eb_dw_tile_put4(j->ob, j->ib + to, dc, count, b0, b1, b2, b3);
                }
            }
        }
        if (x < xend) { /* a last block of fewer than 4: when the row has 4, overlapping */
            if (xend - ox0 >= 4) { /* the one before (its pixels stored again, the same) */
                row -= (int32_t)(x - (xend - 4)) * s;
                x = xend - 4;
            }
            goto block;
        }
    }
}

/* A tap row's n pairs (weights e[0 .. n).w) of 4 pixels from q, 1 int16 apart: pixel i's
 * pair p is the word at q + i + 2p, so a step loads the 2 words the last one did not (2 LDR,
 * the weight and 4 SMLAD a pair, not 4 LDR). */
EB_INLINE void eb_dw_slide1(const int16_t *q, const eb_dw_tap *e, int n, int32_t *acc)
{
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    uint32_t x0 = eb_load32(q), x1 = eb_load32(q + 1), x2, x3, w;
    for (; n >= 2; n -= 2, e += 2, q += 4) {
        x2 = eb_load32(q + 2), x3 = eb_load32(q + 3), w = e[0].w;
        a0 = eb_smlad(x0, w, a0), a1 = eb_smlad(x1, w, a1);
        a2 = eb_smlad(x2, w, a2), a3 = eb_smlad(x3, w, a3);
        x0 = eb_load32(q + 4), x1 = eb_load32(q + 5), w = e[1].w;
        a0 = eb_smlad(x2, w, a0), a1 = eb_smlad(x3, w, a1);
        a2 = eb_smlad(x0, w, a2), a3 = eb_smlad(x1, w, a3);
    }
    if (n) {
        x2 = eb_load32(q + 2), x3 = eb_load32(q + 3), w = e[0].w;
        a0 = eb_smlad(x0, w, a0), a1 = eb_smlad(x1, w, a1);
        a2 = eb_smlad(x2, w, a2), a3 = eb_smlad(x3, w, a3);
    }
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
}

/* The same with pixels 2 int16 apart (stride 2): pixel i's pair p is the word at
 * q + 2i + 2p, so a step loads one new word (pixel 3's); four steps a pass, the registers
 * renamed instead of moved. */
EB_INLINE void eb_dw_slide2(const int16_t *q, const eb_dw_tap *e, int n, int32_t *acc)
{
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    uint32_t x0 = eb_load32(q), x1 = eb_load32(q + 2), x2 = eb_load32(q + 4), x3, w;
    for (; n >= 4; n -= 4, e += 4, q += 8) {
        x3 = eb_load32(q + 6), w = e[0].w;
        a0 = eb_smlad(x0, w, a0), a1 = eb_smlad(x1, w, a1);
        a2 = eb_smlad(x2, w, a2), a3 = eb_smlad(x3, w, a3);
        x0 = eb_load32(q + 8), w = e[1].w;
        a0 = eb_smlad(x1, w, a0), a1 = eb_smlad(x2, w, a1);
        a2 = eb_smlad(x3, w, a2), a3 = eb_smlad(x0, w, a3);
        x1 = eb_load32(q + 10), w = e[2].w;
        a0 = eb_smlad(x2, w, a0), a1 = eb_smlad(x3, w, a1);
        a2 = eb_smlad(x0, w, a2), a3 = eb_smlad(x1, w, a3);
        x2 = eb_load32(q + 12), w = e[3].w;
        a0 = eb_smlad(x3, w, a0), a1 = eb_smlad(x0, w, a1);
        a2 = eb_smlad(x1, w, a2), a3 = eb_smlad(x2, w, a3);
    }
    for (; n > 0; --n, ++e, q += 2) {
        x3 = eb_load32(q + 6), w = e->w;
        a0 = eb_smlad(x0, w, a0), a1 = eb_smlad(x1, w, a1);
        a2 = eb_smlad(x2, w, a2), a3 = eb_smlad(x3, w, a3);
        x0 = x1, x1 = x2, x2 = x3;
    }
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
}

/* The sums of 4 pixels s int16 apart from x (their first taps), two tap pairs a pass. */
#define EB_DW_TILE_TAP(q_, w_)                                                               \
    a0 = eb_smlad(eb_load32(q_), w_, a0);                                                    \
    a1 = eb_smlad(eb_load32((q_) + s), w_, a1);                                              \
    a2 = eb_smlad(eb_load32((q_) + 2 * s), w_, a2);                                          \
    a3 = eb_smlad(eb_load32((q_) + 3 * s), w_, a3);

/* eb_dw_slide1 / eb_dw_slide2 over every tap row [e, end) (`pairs` a row) of 4 pixels from
 * row, on the M4: 4 sums, 4 words, the weight and 4 pointers and counts are 13 registers,
 * which GCC's C spills around the row loop (end and pairs are read from the stack). Per two
 * pairs at stride 1: 4 LDR, 2 weights, 8 SMLAD and 4 for the loop; per four at stride 2:
 * 4 LDR, 4 weights, 16 SMLAD and 4. The asm reads the patch and the taps, which nothing in
 * this function writes. */
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__) && defined(__thumb2__) && \
    defined(__OPTIMIZE__) && !defined(EB_OPT_PORTABLE)
#define EB_DW_SLIDE_ASM 1
#define EB_DW_MAC4(w, p0, p1, p2, p3)                                                        \
    "smlad %[a0], %[" p0 "], %[" w "], %[a0]\n\t"                                            \
    "smlad %[a1], %[" p1 "], %[" w "], %[a1]\n\t"                                            \
    "smlad %[a2], %[" p2 "], %[" w "], %[a2]\n\t"                                            \
    "smlad %[a3], %[" p3 "], %[" w "], %[a3]\n\t"
#define EB_DW_SLIDE_OPS                                                                      \
    : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [e] "+r"(e),             \
      [x0] "=&r"(x0), [x1] "=&r"(x1), [x2] "=&r"(x2), [x3] "=&r"(x3), [w] "=&r"(w),         \
      [q] "=&r"(q), [n] "=&r"(n)                                                             \
    : [row] "r"(row), [end] "m"(end), [pairs] "m"(pairs)                                     \
    : "cc"
#define EB_DW_SLIDE1_ASM                                                                     \
    __asm__ volatile("0:\n\t"                                                                \
                     "ldr %[q], [%[e]]\n\t"                                                  \
                     "add %[q], %[row], %[q], lsl #1\n\t"                                    \
                     "ldr %[n], %[pairs]\n\t"                                                \
                     "ldr %[x0], [%[q]]\n\t"                                                 \
                     "ldr %[x1], [%[q], #2]\n\t"                                             \
                     "subs %[n], %[n], #2\n\t"                                               \
                     "blt 2f\n\t"                                                            \
                     "1:\n\t"                                                                \
                     "ldr %[x2], [%[q], #4]\n\t"                                             \
                     "ldr %[x3], [%[q], #6]\n\t"                                             \
                     "ldr %[w], [%[e], #4]\n\t" EB_DW_MAC4("w", "x0", "x1", "x2", "x3")      \
                     "ldr %[x0], [%[q], #8]\n\t"                                             \
                     "ldr %[x1], [%[q], #10]\n\t"                                            \
                     "ldr %[w], [%[e], #16]\n\t" EB_DW_MAC4("w", "x2", "x3", "x0", "x1")     \
                     "adds %[q], %[q], #8\n\t"                                               \
                     "adds %[e], %[e], #24\n\t"                                              \
                     "subs %[n], %[n], #2\n\t"                                               \
                     "bge 1b\n\t"                                                            \
                     "2:\n\t"                                                                \
                     "adds %[n], %[n], #2\n\t"                                               \
                     "beq 3f\n\t"                                                            \
                     "ldr %[x2], [%[q], #4]\n\t"                                             \
                     "ldr %[x3], [%[q], #6]\n\t"                                             \
                     "ldr %[w], [%[e], #4]\n\t" EB_DW_MAC4("w", "x0", "x1", "x2", "x3")      \
                     "adds %[e], %[e], #12\n\t"                                              \
                     "3:\n\t"                                                                \
                     "ldr %[n], %[end]\n\t"                                                  \
                     "cmp %[e], %[n]\n\t"                                                    \
                     "bne 0b\n\t" EB_DW_SLIDE_OPS)
#define EB_DW_SLIDE2_ASM                                                                     \
    __asm__ volatile("0:\n\t"                                                                \
                     "ldr %[q], [%[e]]\n\t"                                                  \
                     "add %[q], %[row], %[q], lsl #1\n\t"                                    \
                     "ldr %[n], %[pairs]\n\t"                                                \
                     "ldr %[x0], [%[q]]\n\t"                                                 \
                     "ldr %[x1], [%[q], #4]\n\t"                                             \
                     "ldr %[x2], [%[q], #8]\n\t"                                             \
                     "subs %[n], %[n], #4\n\t"                                               \
                     "blt 2f\n\t"                                                            \
                     "1:\n\t"                                                                \
                     "ldr %[x3], [%[q], #12]\n\t"                                            \
                     "ldr %[w], [%[e], #4]\n\t" EB_DW_MAC4("w", "x0", "x1", "x2", "x3")      \
                     "ldr %[x0], [%[q], #16]\n\t"                                            \
                     "ldr %[w], [%[e], #16]\n\t" EB_DW_MAC4("w", "x1", "x2", "x3", "x0")     \
                     "ldr %[x1], [%[q], #20]\n\t"                                            \
                     "ldr %[w], [%[e], #28]\n\t" EB_DW_MAC4("w", "x2", "x3", "x0", "x1")     \
                     "ldr %[x2], [%[q], #24]\n\t"                                            \
                     "ldr %[w], [%[e], #40]\n\t" EB_DW_MAC4("w", "x3", "x0", "x1", "x2")     \
                     "adds %[q], %[q], #16\n\t"                                              \
                     "adds %[e], %[e], #48\n\t"                                              \
                     "subs %[n], %[n], #4\n\t"                                               \
                     "bge 1b\n\t"                                                            \
                     "2:\n\t"                                                                \
                     "adds %[n], %[n], #4\n\t"                                               \
                     "beq 3f\n\t"                                                            \
                     "4:\n\t"                                                                \
                     "ldr %[x3], [%[q], #12]\n\t"                                            \
                     "ldr %[w], [%[e], #4]\n\t" EB_DW_MAC4("w", "x0", "x1", "x2", "x3")      \
                     "mov %[x0], %[x1]\n\t"                                                  \
                     "mov %[x1], %[x2]\n\t"                                                  \
                     "mov %[x2], %[x3]\n\t"                                                  \
                     "adds %[q], %[q], #4\n\t"                                               \
                     "adds %[e], %[e], #12\n\t"                                              \
                     "subs %[n], %[n], #1\n\t"                                               \
                     "bne 4b\n\t"                                                            \
                     "3:\n\t"                                                                \
                     "ldr %[n], %[end]\n\t"                                                  \
                     "cmp %[e], %[n]\n\t"                                                    \
                     "bne 0b\n\t" EB_DW_SLIDE_OPS)
#else
#define EB_DW_SLIDE_ASM 0
#endif

/* A row's whole blocks of 4 pixels of one channel on the M4, sliding along the tap rows
 * (EB_DW_SLIDE1_ASM / EB_DW_SLIDE2_ASM's loops, the same order), in a NONE / RELU mode: the
 * block loop, the tap rows and the stores in one naked function, its counters and pointers in
 * its own stack frame (a copy of the job), as eb_dw_row_s1_relu ... do for two channels. The
 * C block loop around the slide assembly spent about 35 instructions a block on spilled state
 * and its stores: here about 25. Both strides are linked with the tile kernel, so every frame
 * the one-channel loops run has one, and their C block loops inline no assembly (it cost
 * more code than these functions). Pixels s int16 apart in the patch (s 1 or 2), outputs dc
 * apart. Registers: sums r0-r3, the row's words r4-r7, the weight r8, the tap row's pointer
 * r9, its pair count r10, the tap r11, the block's patch row lr. */
#if EB_DW_SLIDE_ASM && EB_DW_TILE
#define EB_DW_ROW1_ASM 1
typedef struct {
    int32_t init;               /* 0: the sums' start */
    const eb_dw_tap *tap, *end; /* 4, 8: the tap pairs */
    int32_t pairs, s;           /* 12, 16: pairs a tap row; the right shift */
    int8_t *d;                  /* 20: the next block's outputs (advanced) */
    eb_dw_row_walk k;           /* 24 .. 52 */
    const int16_t *row;         /* 56: the first row's first pixel */
} eb_dw_row1_job;

#define EB_DW_R1_MAC4(p0, p1, p2, p3)                                                        \
    "smlad r0, " p0 ", r8, r0\n\t"                                                           \
    "smlad r1, " p1 ", r8, r1\n\t"                                                           \
    "smlad r2, " p2 ", r8, r2\n\t"                                                           \
    "smlad r3, " p3 ", r8, r3\n\t"
#define EB_DW_R1_SLIDE1                                                                      \
    "0:\n\t"                                                                                 \
    "ldr r9, [r11]\n\t"                                                                      \
    "add r9, lr, r9, lsl #1\n\t"                                                             \
    "ldr r10, [sp, #12]\n\t"                                                                 \
    "ldr r4, [r9]\n\t"                                                                       \
    "ldr r5, [r9, #2]\n\t"                                                                   \
    "subs r10, r10, #2\n\t"                                                                  \
    "blt 2f\n"                                                                               \
    "1:\n\t"                                                                                 \
    "ldr r6, [r9, #4]\n\t"                                                                   \
    "ldr r7, [r9, #6]\n\t"                                                                   \
    "ldr r8, [r11, #4]\n\t" EB_DW_R1_MAC4("r4", "r5", "r6", "r7")                             \
    "ldr r4, [r9, #8]\n\t"                                                                   \
    "ldr r5, [r9, #10]\n\t"                                                                  \
    "ldr r8, [r11, #16]\n\t" EB_DW_R1_MAC4("r6", "r7", "r4", "r5")                            \
    "adds r9, r9, #8\n\t"                                                                    \
    "adds r11, r11, #24\n\t"                                                                 \
    "subs r10, r10, #2\n\t"                                                                  \
    "bge 1b\n"                                                                               \
    "2:\n\t"                                                                                 \
    "adds r10, r10, #2\n\t"                                                                  \
    "beq 3f\n\t"                                                                             \
    "ldr r6, [r9, #4]\n\t"                                                                   \
    "ldr r7, [r9, #6]\n\t"                                                                   \
    "ldr r8, [r11, #4]\n\t" EB_DW_R1_MAC4("r4", "r5", "r6", "r7")                             \
    "adds r11, r11, #12\n"                                                                   \
    "3:\n\t"                                                                                 \
    "ldr r10, [sp, #8]\n\t"                                                                  \
    "cmp r11, r10\n\t"                                                                       \
    "bne 0b\n\t"
/* Step `label` of the unrolled rows: the words at x + xo, xo2 (bytes of int16) into n0, n1,
 * the pair at e + wo, the four sums of the pixels' words p0 p1 n0 n1. */
#define EB_DW_R1_USTEP(label, xo, xo2, wo, p0, p1, n0, n1)                                  \
    label ":\n\t"                                                                            \
    "ldr " n0 ", [r9, #" xo "]\n\t"                                                          \
    "ldr " n1 ", [r9, #" xo2 "]\n\t"                                                         \
    "ldr r8, [r11, #" wo "]\n\t" EB_DW_R1_MAC4(p0, p1, n0, n1)
/* EB_DW_R1_SLIDE1 unrolled for rows of 5 or more tap pairs (EB_DW_ROW1_LONG): a tap row's
 * pairs in passes of 8 steps, the first entered by a TBB at step `skip` = -n & 7 (the row's
 * pointers moved back by skip steps), so that no pass counts or tests its pairs -- 7
 * instructions a pair where the loop spent 9, and 18 a row beside them (EB_DW_R1_LONG_PRO
 * leaves skip in r10 and the passes less one in the job copy's pairs). */
#define EB_DW_R1_SLIDE1U                                                                     \
    "0:\n\t"                                                                                 \
    "ldr r9, [r11]\n\t"                                                                      \
    "add r9, lr, r9, lsl #1\n\t"                                                             \
    "ldr r4, [r9]\n\t"                                                                       \
    "ldr r5, [r9, #2]\n\t"                                                                   \
    "mov r6, r4\n\t"                                                                         \
    "mov r7, r5\n\t"                                                                         \
    "ldr r12, [sp, #12]\n\t"                                                                 \
    "sub r9, r9, r10, lsl #2\n\t"                                                            \
    "sub r11, r11, r10, lsl #3\n\t"                                                          \
    "sub r11, r11, r10, lsl #2\n\t"                                                          \
    "tbb [pc, r10]\n"                                                                        \
    "19:\n\t"                                                                                \
    ".byte (20f - 19b) / 2, (21f - 19b) / 2, (22f - 19b) / 2, (23f - 19b) / 2\n\t"           \
    ".byte (24f - 19b) / 2, (25f - 19b) / 2, (26f - 19b) / 2, (27f - 19b) / 2\n"             \
    EB_DW_R1_USTEP("20", "4", "6", "4", "r4", "r5", "r6", "r7")                              \
    EB_DW_R1_USTEP("21", "8", "10", "16", "r6", "r7", "r4", "r5")                            \
    EB_DW_R1_USTEP("22", "12", "14", "28", "r4", "r5", "r6", "r7")                           \
    EB_DW_R1_USTEP("23", "16", "18", "40", "r6", "r7", "r4", "r5")                           \
    EB_DW_R1_USTEP("24", "20", "22", "52", "r4", "r5", "r6", "r7")                           \
    EB_DW_R1_USTEP("25", "24", "26", "64", "r6", "r7", "r4", "r5")                           \
    EB_DW_R1_USTEP("26", "28", "30", "76", "r4", "r5", "r6", "r7")                           \
    EB_DW_R1_USTEP("27", "32", "34", "88", "r6", "r7", "r4", "r5")                           \
    "subs r12, r12, #1\n\t"                                                                  \
    "add r11, r11, #96\n\t"                                                                  \
    "add r9, r9, #32\n\t"                                                                    \
    "bge 20b\n\t"                                                                            \
    "ldr r8, [sp, #8]\n\t"                                                                   \
    "cmp r11, r8\n\t"                                                                        \
    "bne 0b\n\t"
/* EB_DW_R1_SLIDE1 for rows of exactly P tap pairs (2, 3, 4: EB_DW_FIX2_1 ...): a row is its
 * P steps straight -- 7 instructions a row beside them, where the loop spent 12 and the
 * unrolled passes 18 -- with the taps' end in r10 for the whole call (EB_DW_R1_FIX_PRO). */
#define EB_DW_R1_FIX_ROW(pre, steps, adv)                                                    \
    "0:\n\t"                                                                                 \
    "ldr r9, [r11]\n\t"                                                                      \
    "add r9, lr, r9, lsl #1\n\t"                                                             \
    "ldr r4, [r9]\n\t" pre steps                                                            \
    "add r11, r11, #" adv "\n\t"                                                             \
    "cmp r11, r10\n\t"                                                                       \
    "bne 0b\n\t"
#define EB_DW_R1_PRE "ldr r5, [r9, #2]\n\t" /* stride 1: the first pair's second word */
#define EB_DW_R1_FIX2                                                                        \
    EB_DW_R1_FIX_ROW(EB_DW_R1_PRE, EB_DW_R1_USTEP("20", "4", "6", "4", "r4", "r5", "r6", "r7")              \
                         EB_DW_R1_USTEP("21", "8", "10", "16", "r6", "r7", "r4", "r5"),       \
                     "24")
#define EB_DW_R1_FIX3                                                                        \
    EB_DW_R1_FIX_ROW(EB_DW_R1_PRE, EB_DW_R1_USTEP("20", "4", "6", "4", "r4", "r5", "r6", "r7")              \
                         EB_DW_R1_USTEP("21", "8", "10", "16", "r6", "r7", "r4", "r5")        \
                             EB_DW_R1_USTEP("22", "12", "14", "28", "r4", "r5", "r6", "r7"),  \
                     "36")
#define EB_DW_R1_FIX4                                                                        \
    EB_DW_R1_FIX_ROW(EB_DW_R1_PRE, EB_DW_R1_USTEP("20", "4", "6", "4", "r4", "r5", "r6", "r7")              \
                         EB_DW_R1_USTEP("21", "8", "10", "16", "r6", "r7", "r4", "r5")        \
                             EB_DW_R1_USTEP("22", "12", "14", "28", "r4", "r5", "r6", "r7")   \
                                 EB_DW_R1_USTEP("23", "16", "18", "40", "r6", "r7", "r4",     \
                                                "r5"),                                       \
                     "48")
#define EB_DW_R1_FIX_PRO "ldr r10, [sp, #8]\n\t"
/* The same at stride 2 (EB_DW_R1_SLIDE2's steps: a pair one new word, pixels 2 words
 * apart; the row preloads 3 words, EB_DW_R2_PRE): 8 instructions a row beside its steps, where the loop spent 14 and 7 a step more
 * for a row of fewer than 4 pairs. */
#define EB_DW_R2_STEP(xo, wo, p0, p1, p2, n)                                                  \
    "ldr " n ", [r9, #" xo "]\n\t"                                                            \
    "ldr r8, [r11, #" wo "]\n\t" EB_DW_R1_MAC4(p0, p1, p2, n)
#define EB_DW_R2_PRE "ldr r5, [r9, #4]\n\tldr r6, [r9, #8]\n\t" /* its first 3 words */
#define EB_DW_R2_S1 EB_DW_R2_STEP("12", "4", "r4", "r5", "r6", "r7")
#define EB_DW_R2_S2 EB_DW_R2_STEP("16", "16", "r5", "r6", "r7", "r4")
#define EB_DW_R2_S3 EB_DW_R2_STEP("20", "28", "r6", "r7", "r4", "r5")
#define EB_DW_R2_S4 EB_DW_R2_STEP("24", "40", "r7", "r4", "r5", "r6")
#define EB_DW_R2_FIX2 EB_DW_R1_FIX_ROW(EB_DW_R2_PRE, EB_DW_R2_S1 EB_DW_R2_S2, "24")
#define EB_DW_R2_FIX3 EB_DW_R1_FIX_ROW(EB_DW_R2_PRE, EB_DW_R2_S1 EB_DW_R2_S2 EB_DW_R2_S3, "36")
#define EB_DW_R2_FIX4 EB_DW_R1_FIX_ROW(EB_DW_R2_PRE, EB_DW_R2_S1 EB_DW_R2_S2 EB_DW_R2_S3 EB_DW_R2_S4, "48")
#define EB_DW_R1_LONG_PRO                                                                    \
    "ldr r10, [sp, #12]\n\t"                                                                 \
    "add r12, r10, #7\n\t"                                                                   \
    "lsr r12, r12, #3\n\t"                                                                   \
    "sub r12, r12, #1\n\t"                                                                   \
    "str r12, [sp, #12]\n\t"                                                                 \
    "rsb r10, r10, #0\n\t"                                                                   \
    "and r10, r10, #7\n\t"
#define EB_DW_R1_SLIDE2                                                                      \
    "0:\n\t"                                                                                 \
    "ldr r9, [r11]\n\t"                                                                      \
    "add r9, lr, r9, lsl #1\n\t"                                                             \
    "ldr r10, [sp, #12]\n\t"                                                                 \
    "ldr r4, [r9]\n\t"                                                                       \
    "ldr r5, [r9, #4]\n\t"                                                                   \
    "ldr r6, [r9, #8]\n\t"                                                                   \
    "subs r10, r10, #4\n\t"                                                                  \
    "blt 2f\n"                                                                               \
    "1:\n\t"                                                                                 \
    "ldr r7, [r9, #12]\n\t"                                                                  \
    "ldr r8, [r11, #4]\n\t" EB_DW_R1_MAC4("r4", "r5", "r6", "r7")                             \
    "ldr r4, [r9, #16]\n\t"                                                                  \
    "ldr r8, [r11, #16]\n\t" EB_DW_R1_MAC4("r5", "r6", "r7", "r4")                            \
    "ldr r5, [r9, #20]\n\t"                                                                  \
    "ldr r8, [r11, #28]\n\t" EB_DW_R1_MAC4("r6", "r7", "r4", "r5")                            \
    "ldr r6, [r9, #24]\n\t"                                                                  \
    "ldr r8, [r11, #40]\n\t" EB_DW_R1_MAC4("r7", "r4", "r5", "r6")                            \
    "adds r9, r9, #16\n\t"                                                                   \
    "adds r11, r11, #48\n\t"                                                                 \
    "subs r10, r10, #4\n\t"                                                                  \
    "bge 1b\n"                                                                               \
    "2:\n\t"                                                                                 \
    "adds r10, r10, #4\n\t"                                                                  \
    "beq 3f\n"                                                                               \
    "4:\n\t"                                                                                 \
    "ldr r7, [r9, #12]\n\t"                                                                  \
    "ldr r8, [r11, #4]\n\t" EB_DW_R1_MAC4("r4", "r5", "r6", "r7")                             \
    "mov r4, r5\n\t"                                                                         \
    "mov r5, r6\n\t"                                                                         \
    "mov r6, r7\n\t"                                                                         \
    "adds r9, r9, #4\n\t"                                                                    \
    "adds r11, r11, #12\n\t"                                                                 \
    "subs r10, r10, #1\n\t"                                                                  \
    "bne 4b\n"                                                                               \
    "3:\n\t"                                                                                 \
    "ldr r10, [sp, #8]\n\t"                                                                  \
    "cmp r11, r10\n\t"                                                                       \
    "bne 0b\n\t"
#define EB_DW_ROW1_FN(name, SLIDE, PRO, step, sat, bits, c)                                  \
    static __attribute__((naked, noinline)) void name(const eb_dw_row1_job *job             \
                                                      __attribute__((unused)))              \
    {                                                                                        \
        __asm__ volatile("push {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                  \
                         "sub sp, sp, #56\n\t"                                              \
                         "ldr lr, [r0, #56]\n\t"                                            \
                         "mov r12, sp\n\t"                                                  \
                         "ldmia r0!, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                   \
                         "stmia r12!, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                  \
                         "ldmia r0, {r1, r2, r3, r4, r5, r6}\n\t"                            \
                         "stmia r12, {r1, r2, r3, r4, r5, r6}\n\t" PRO                       \
                         "5:\n\t"                                                            \
                         "ldr r0, [sp]\n\t"                                                 \
                         "mov r1, r0\n\t"                                                   \
                         "mov r2, r0\n\t"                                                   \
                         "mov r3, r0\n\t"                                                   \
                         "ldr r11, [sp, #4]\n\t" SLIDE                                      \
                         EB_ASM_SAT4_ASR(sat, bits, "r0", "r1", "r2", "r3", c)              \
                         "ldr r9, [sp, #20]\n\t"                                            \
                         "ldr r12, [sp, #24]\n\t"                                           \
                         "strb r0, [r9]\n\t"                                                \
                         "strb r1, [r9, r12]\n\t"                                           \
                         "add r9, r9, r12, lsl #1\n\t"                                      \
                         "strb r2, [r9]\n\t"                                                \
                         "strb r3, [r9, r12]\n\t"                                           \
                         "add r9, r9, r12, lsl #1\n\t"                                      \
                         "str r9, [sp, #20]\n\t"                                            \
                         "add lr, lr, #" step "\n\t"                                        \
                         EB_DW_NEXT_BLOCK("32", "5b", "6f")                                 \
                         "ldrd r11, r12, [sp, #40]\n\t"                                     \
                         "add lr, lr, r11\n\t"                                              \
                         "add r9, r9, r12\n\t"                                              \
                         "str r9, [sp, #20]\n\t"                                            \
                         "b 5b\n"                                                            \
                         "6:\n\t"                                                            \
                         "ldrd r11, r12, [sp, #48]\n\t"                                     \
                         "add lr, lr, r11\n\t"                                              \
                         "add r9, r9, r12\n\t"                                              \
                         "str r9, [sp, #20]\n\t"                                            \
                         "ldr r12, [sp, #28]\n\t"                                           \
                         "str r12, [sp, #32]\n\t"                                           \
                         "ldr r12, [sp, #36]\n\t"                                           \
                         "subs r12, r12, #1\n\t"                                            \
                         "str r12, [sp, #36]\n\t"                                           \
                         "bne 5b\n\t"                                                       \
                         "add sp, sp, #56\n\t"                                              \
                         "pop {r4, r5, r6, r7, r8, r9, r10, r11, pc}");                     \
    }
#define EB_DW_ROW1_FNS(pre, SLIDE, PRO, step)                                                 \
    EB_DW_R8(EB_DW_ROW1_FN(pre##_relu_8, SLIDE, PRO, step, "usat", "#7", "#8"))              \
    EB_DW_R16(EB_DW_ROW1_FN(pre##_relu_16, SLIDE, PRO, step, "usat", "#7", "#16"))           \
    EB_DW_N8(EB_DW_ROW1_FN(pre##_none_8, SLIDE, PRO, step, "ssat", "#8", "#8"))              \
    EB_DW_N16(EB_DW_ROW1_FN(pre##_none_16, SLIDE, PRO, step, "ssat", "#8", "#16"))
EB_DW_ROW1_FNS(eb_dw_row1_s1, EB_DW_R1_SLIDE1, "", "8")
EB_DW_ROW1_FNS(eb_dw_row1_s2, EB_DW_R1_SLIDE2, "", "16")
#if EB_DW_ROW1_LONG
EB_DW_ROW1_FNS(eb_dw_row1_long1, EB_DW_R1_SLIDE1U, EB_DW_R1_LONG_PRO, "8")
#endif
EB_DW_FIX2_1(EB_DW_ROW1_FNS(eb_dw_row1_fix2_1, EB_DW_R1_FIX2, EB_DW_R1_FIX_PRO, "8"))
EB_DW_FIX3_1(EB_DW_ROW1_FNS(eb_dw_row1_fix3_1, EB_DW_R1_FIX3, EB_DW_R1_FIX_PRO, "8"))
EB_DW_FIX4_1(EB_DW_ROW1_FNS(eb_dw_row1_fix4_1, EB_DW_R1_FIX4, EB_DW_R1_FIX_PRO, "8"))
EB_DW_FIX2_2(EB_DW_ROW1_FNS(eb_dw_row1_fix2_2, EB_DW_R2_FIX2, EB_DW_R1_FIX_PRO, "16"))
EB_DW_FIX3_2(EB_DW_ROW1_FNS(eb_dw_row1_fix3_2, EB_DW_R2_FIX3, EB_DW_R1_FIX_PRO, "16"))
EB_DW_FIX4_2(EB_DW_ROW1_FNS(eb_dw_row1_fix4_2, EB_DW_R2_FIX4, EB_DW_R1_FIX_PRO, "16"))
/* eb_dw_row1_fn's case for the straight rows of P pairs at stride s_. */
#define EB_DW_ROW1_FIX_PICK(P, s_)                                                           \
    if (pairs == (P)) {                                                                      \
        EB_DW_ROW_PICKS(eb_dw_row1_fix##P##_, s_)                                            \
    }

/* The one-channel row function for stride s, mode shifting by c and rows of `pairs` tap
 * pairs (at stride 1 from EB_DW_ROW1_LONG_PAIRS the unrolled one, of 2, 3 or 4 at stride 1
 * or 2 the straight one, where linked); NULL when none is linked. */
static void (*eb_dw_row1_fn(int s, int mode, int c, int pairs))(const eb_dw_row1_job *)
{
#if EB_DW_ROW1_LONG
    if (pairs >= EB_DW_ROW1_LONG_PAIRS) {
        EB_DW_ROW_PICKS(eb_dw_row1_long, 1)
    }
#endif
    EB_DW_FIX2_1(EB_DW_ROW1_FIX_PICK(2, 1))
    EB_DW_FIX2_2(EB_DW_ROW1_FIX_PICK(2, 2))
    EB_DW_FIX3_1(EB_DW_ROW1_FIX_PICK(3, 1))
    EB_DW_FIX3_2(EB_DW_ROW1_FIX_PICK(3, 2))
    EB_DW_FIX4_1(EB_DW_ROW1_FIX_PICK(4, 1))
    EB_DW_FIX4_2(EB_DW_ROW1_FIX_PICK(4, 2))
    EB_DW_ROW_PICKS(eb_dw_row1_s, 1)
    EB_DW_ROW_PICKS(eb_dw_row1_s, 2)
    (void)s;
    (void)mode;
    (void)c;
    (void)pairs;
    return NULL;
}
#else
#define EB_DW_ROW1_ASM 0
#endif

/* The taps [tap, end) of 4 pixels s int16 apart from row, into acc: by tap rows sliding along
 * them (`slide`: a row's pairs 2 int16 apart -- dilation 1 or 2 -- and s 1 or 2), else each
 * pixel's pair loaded apart, two pairs a pass. */
EB_INLINE void eb_dw_tile_sums(const int16_t *row, const eb_dw_tap *tap, const eb_dw_tap *end,
                               int pairs, const int slide, const int s, int32_t *acc,
                               const int inner_asm)
{
    const eb_dw_tap *e = tap;
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    (void)inner_asm;
    if (slide) {
#if EB_DW_SLIDE_ASM
        if (inner_asm) {
            uint32_t x0, x1, x2, x3, w, n;
            const int16_t *q;
            if (s == 1) {
                EB_DW_SLIDE1_ASM;
            } else {
                EB_DW_SLIDE2_ASM;
            }
            acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
            return;
        }
#endif
        for (; e < end; e += pairs) {
            if (s == 1) {
                eb_dw_slide1(row + e->off, e, pairs, acc);
            } else {
                eb_dw_slide2(row + e->off, e, pairs, acc);
            }
        }
        return;
    }
    for (; end - e >= 2; e += 2) {
        const int16_t *q0 = row + e[0].off, *q1 = row + e[1].off;
        const uint32_t w0 = e[0].w, w1 = e[1].w;
        EB_DW_TILE_TAP(q0, w0)
        EB_DW_TILE_TAP(q1, w1)
    }
    if (e < end) {
        const int16_t *q0 = row + e[0].off;
        const uint32_t w0 = e[0].w;
        EB_DW_TILE_TAP(q0, w0)
    }
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
}

/* One output row of n pixels (s apart in the patch from q, dc apart from d) of a single tap
 * pair (a 1x1 or 1x2 kernel in the frame), w, in a NONE / RELU mode: per 4 pixels 4 LDR,
 * 4 SMLAD and the stores, the loop's state in registers. */
EB_INLINE void eb_dw_tile_tap1(const int16_t *q, int32_t n, const int s, const int32_t dc,
                               uint32_t w, int32_t init, int8_t *d, int sh, const int mode)
{
    for (; n >= 4; n -= 4, q += 4 * s, d += 4 * dc) {
        eb_dw_tile_q4(mode, d, dc, sh, eb_smlad(eb_load32(q), w, init),
                      eb_smlad(eb_load32(q + s), w, init), eb_smlad(eb_load32(q + 2 * s), w, init),
                      eb_smlad(eb_load32(q + 3 * s), w, init));
    }
    for (; n > 0; --n, q += s, d += dc) {
        *d = eb_dw_q8(mode, eb_smlad(eb_load32(q), w, init), sh, 0, 0, 0);
    }
}

/* eb_dw_tile_tap1 over `rows` tile rows (pitch int16 apart in the patch, dst_r outputs apart):
 * a loop of its own, out of the tile loop's, so that GCC keeps its state in registers (inside
 * the tile loop's it cost about 60 instructions a row: a 1x2 kernel's row of 23 outputs has
 * 46 MACs). */
EB_INLINE void eb_dw_tile_tap1_mode(const int16_t *q, int rows, int32_t pitch, int32_t n,
                                    const int s, const int32_t dc, uint32_t w, int32_t init,
                                    int8_t *d, int32_t dst_r, int sh, const int mode)
{
    int r;
    for (r = 0; r < rows; ++r, q += pitch, d += dst_r) {
        eb_dw_tile_tap1(q, n, s, dc, w, init, d, sh, mode);
    }
}

/* ... at stride 1 into neighbouring outputs with the shift the tile's scaled sums take
 * (eb_dw_tile_init: 16 or 8) a constant, each its own function (inlined together GCC spilled
 * the sums' start): USAT / SSAT shift by the immediate on the way, an instruction an output
 * less (a 1x2 depthwise of multiplier 4 went 4.82 -> 4.18 insn/MAC). */
#define EB_TAP1_FN(name, sh_, mode_)                                                         \
    static EB_NOINLINE void name(const int16_t *q, int rows, int32_t pitch, int32_t n,        \
                                 uint32_t w, int32_t init, int8_t *d, int32_t dst_r)         \
    {                                                                                        \
        eb_dw_tile_tap1_mode(q, rows, pitch, n, 1, 1, w, init, d, dst_r, sh_, mode_);       \
    }
#if EB_DW_TAP1
EB_DW_R16(EB_TAP1_FN(eb_dw_tap1_relu_16, 16, EB_DW_RELU))
EB_DW_R8(EB_TAP1_FN(eb_dw_tap1_relu_8, 8, EB_DW_RELU))
EB_DW_N16(EB_TAP1_FN(eb_dw_tap1_none_16, 16, EB_DW_NONE))
EB_DW_N8(EB_TAP1_FN(eb_dw_tap1_none_8, 8, EB_DW_NONE))
#endif
#undef EB_TAP1_FN
typedef void (*eb_dw_tap1_fn)(const int16_t *, int, int32_t, int32_t, uint32_t, int32_t, int8_t *,
                              int32_t);

/* The one-tap-pair rows' function for mode and shift c (NULL: none linked). */
static eb_dw_tap1_fn eb_dw_tap1_of(int mode, int c)
{
#if EB_DW_TAP1
    const int s = 1;
    EB_DW_R8(EB_DW_PICK(eb_dw_tap1_relu_8, 1, EB_DW_RELU, 8))
    EB_DW_R16(EB_DW_PICK(eb_dw_tap1_relu_16, 1, EB_DW_RELU, 16))
    EB_DW_N8(EB_DW_PICK(eb_dw_tap1_none_8, 1, EB_DW_NONE, 8))
    EB_DW_N16(EB_DW_PICK(eb_dw_tap1_none_16, 1, EB_DW_NONE, 16))
    (void)s;
#endif
    (void)mode;
    (void)c;
    return NULL;
}

/* ... per mode and shift. */
EB_INLINE void eb_dw_tile_tap1_rows(const int16_t *q, int rows, int32_t pitch, int32_t n,
                                    const int s, const int32_t dc, uint32_t w, int32_t init,
                                    int8_t *d, int32_t dst_r, int sh, const int mode)
{
    const eb_dw_tap1_fn fn = s == 1 && dc == 1 ? eb_dw_tap1_of(mode, sh) : NULL;
    if (fn != NULL) {
        fn(q, rows, pitch, n, w, init, d, dst_r);
    } else if (mode == EB_DW_RELU) {
        eb_dw_tile_tap1_mode(q, rows, pitch, n, s, dc, w, init, d, dst_r, sh, EB_DW_RELU);
    } else {
        eb_dw_tile_tap1_mode(q, rows, pitch, n, s, dc, w, init, d, dst_r, sh, EB_DW_NONE);
    }
}

/* One tile (its patch filled) of one output channel (j->oa): `rows` output rows from oy0,
 * columns from ox0; pixels s apart in the patch, outputs dc apart; NONE / RELU stored inline
 * (4 at a time). */
EB_INLINE void eb_dw_tile_run1(const eb_dw_tf *t, const int16_t *patch, const eb_dw_tap *tap,
                               const eb_dw_job *j, int oy0, int ox0, int rows, const int s,
                               const int32_t dc, const int inner_asm)
{
    const int xend = ox0 + t->cols < t->out_w ? ox0 + t->cols : t->out_w;
    const int32_t pitch = (int32_t)t->s_h * t->pw, init = j->init_a;
    const eb_dw_tap *const end = tap + t->ntaps;
    const int pairs = t->pairs, mode = j->oa->mode, sh = j->oa->s;
    const int slidable = pairs >= 2 && (t->d_w == 1 || t->d_w == 2) && (s == 1 || s == 2);
    /* the C block loop slides too unless a row function runs the sliding rows (it then takes
     * only rows of fewer than 4 pixels and the rare modes, plainly: smaller code) */
    const int slide = slidable && (inner_asm || !EB_DW_ROW1_ASM);
    int8_t *const da =
        mode == EB_DW_NONE || mode == EB_DW_RELU ? j->oa->out8 + j->ia : NULL;
    int r, x;
#if EB_DW_ROW1_ASM
    void (*const fn)(const eb_dw_row1_job *) =
        slidable && da != NULL && t->ntaps > 1 ? eb_dw_row1_fn(s, mode, sh, pairs) : NULL;
    if (fn != NULL && xend - ox0 >= 4 && rows > 0) { /* every row, the whole blocks */
        eb_dw_row1_job rj;
        rj.init = init;
        rj.tap = tap;
        rj.end = end;
        rj.pairs = pairs;
        rj.s = sh;
        rj.d = da + (int32_t)oy0 * t->dst_r + (int32_t)ox0 * dc;
        eb_dw_row_walk_of(&rj.k, xend - ox0, rows, s, dc, pitch, t->dst_r);
        rj.row = patch;
        fn(&rj);
        return;
    }
#endif
    for (r = 0; r < rows; ++r) {
        const int16_t *row = patch + (int32_t)r * pitch;
        const int32_t at = (int32_t)(oy0 + r) * t->dst_r;
        if (t->ntaps == 1 && da != NULL) { /* every row of the tile at once */
            eb_dw_tile_tap1_rows(row + tap->off, rows - r, pitch, xend - ox0, s, dc, tap->w,
                                 init, da + at + (int32_t)ox0 * dc, t->dst_r, sh, mode);
            break;
        }
        for (x = ox0; x + 4 <= xend; x += 4, row += 4 * s) {
        block:
            {
                const int32_t to = at + (int32_t)x * dc;
                int32_t acc[4];
                acc[0] = acc[1] = acc[2] = acc[3] = init;
                eb_dw_tile_sums(row, tap, end, pairs, slide, s, acc, inner_asm);
                if (xend - x >= 4 && mode == EB_DW_RELU) {
                    eb_dw_tile_q4(EB_DW_RELU, da + to, dc, sh, acc[0], acc[1], acc[2], acc[3]);
                } else if (xend - x >= 4 && mode == EB_DW_NONE) {
                    eb_dw_tile_q4(EB_DW_NONE, da + to, dc, sh, acc[0], acc[1], acc[2], acc[3]);
                } else {
                    eb_dw_tile_put4(j->oa, j->ia + to, dc, xend - x < 4 ? xend - x : 4, acc[0],
                                    acc[1], acc[2], acc[3]);
                }
            }
        }
        if (x < xend) { /* a last block of fewer than 4: when the row has 4, overlapping */
            if (xend - ox0 >= 4) { /* the one before (its pixels stored again, the same) */
                row -= (int32_t)(x - (xend - 4)) * s;
                x = xend - 4;
            }
            goto block;
        }
    }
}

/* The tile kernel's loops, each its own function (GCC allocates registers per function: one
 * function of them all ran the stride-1 loops up to 15 % slower), each linked when a layer
 * of the model runs it (EB_DW_TILE_S1 ...). asm_: whether its C block loop inlines the
 * assembly tap loops -- not where the naked row functions run every whole block (the C loop
 * then takes only rows of fewer than 4 pixels and the rare modes: smaller code). */
#define EB_DW_TILE_LOOP(name_, run_, s_, dc_, asm_)                                         \
    static EB_NOINLINE void name_(const eb_dw_tf *t, const int16_t *patch, const eb_dw_tap *tap, \
                                  const eb_dw_job *j, int oy0, int ox0, int rows)            \
    {                                                                                        \
        run_(t, patch, tap, j, oy0, ox0, rows, s_, dc_, asm_);                               \
    }
typedef void (*eb_dw_tile_fn)(const eb_dw_tf *t, const int16_t *patch, const eb_dw_tap *tap,
                              const eb_dw_job *j, int oy0, int ox0, int rows);
#if EB_DW_TILE_ONE
EB_DW_TILE_LOOP(eb_dw_tile_one_any, eb_dw_tile_run1, t->s_w, t->dst_c, !EB_DW_ROW1_ASM)
#define EB_DW_ONE_ANY eb_dw_tile_one_any
#else
#define EB_DW_ONE_ANY NULL
#endif
#if EB_DW_TILE_S1
EB_DW_TILE_LOOP(eb_dw_tile_one_s1, eb_dw_tile_run1, 1, 1, !EB_DW_ROW1_ASM)
#define EB_DW_ONE_S1 eb_dw_tile_one_s1
#else
#define EB_DW_ONE_S1 NULL
#endif
#if EB_DW_TILE_S2
EB_DW_TILE_LOOP(eb_dw_tile_one_s2, eb_dw_tile_run1, 2, 1, !EB_DW_ROW1_ASM)
#define EB_DW_ONE_S2 eb_dw_tile_one_s2
#else
#define EB_DW_ONE_S2 NULL
#endif
#if EB_DW_TILE_PAIR_S1
EB_DW_TILE_LOOP(eb_dw_tile_two_s1, eb_dw_tile_run2, 1, 1, !EB_DW_ROW_ASM)
#define EB_DW_TWO_S1 eb_dw_tile_two_s1
#else
#define EB_DW_TWO_S1 NULL
#endif
#if EB_DW_TILE_PAIR_S2
EB_DW_TILE_LOOP(eb_dw_tile_two_s2, eb_dw_tile_run2, 2, 1, !EB_DW_ROW_ASM)
#define EB_DW_TWO_S2 eb_dw_tile_two_s2
#else
#define EB_DW_TWO_S2 NULL
#endif
#if EB_DW_TILE_PAIR
EB_DW_TILE_LOOP(eb_dw_tile_two_any, eb_dw_tile_run2, t->s_w, t->dst_c, !EB_DW_ROW_ASM)
#define EB_DW_TWO_ANY eb_dw_tile_two_any
#else
#define EB_DW_TWO_ANY NULL
#endif

/* The loop of one channel (two = 0) or two for the frame: the one specialised to its
 * stride along the rows when linked, else the one of any frame; NULL when none is linked
 * for it. */
static eb_dw_tile_fn eb_dw_tile_loop(const eb_dw_tf *t, int two)
{
    static const eb_dw_tile_fn one[3] = {EB_DW_ONE_ANY, EB_DW_ONE_S1, EB_DW_ONE_S2};
    static const eb_dw_tile_fn pair[3] = {EB_DW_TWO_ANY, EB_DW_TWO_S1, EB_DW_TWO_S2};
    const eb_dw_tile_fn *const fn = two ? pair : one;
    const int s = t->dst_c == 1 && (t->s_w == 1 || t->s_w == 2) ? t->s_w : 0; /* 0: any */
    return fn[s] != NULL ? fn[s] : fn[0];
}

/* Whether the tile kernel runs a layer's output channels two at a time: with at least two
 * tap pairs (fewer: the stores, not the loads, are the cost), stride 1 or 2 along the
 * frame's rows (the pair loop's forms), and a pair loop linked for the frame. */
static int eb_dw_tile_pairs(const eb_dw_tf *t)
{
    return t->ntaps >= 2 && (t->s_w == 1 || t->s_w == 2) && eb_dw_tile_loop(t, 1) != NULL;
}

/* Whether the tile kernel has the loops a layer of multiplier m needs in frame t: the pair
 * loop for its channel pairs (eb_dw_tile_pairs) and, for a lone channel (m odd, or no
 * pairs), a loop of one channel. */
static int eb_dw_tile_runs(const eb_dw_tf *t, int m)
{
    const int pairs = m >= 2 && eb_dw_tile_pairs(t);
    return (pairs && !(m & 1)) || eb_dw_tile_loop(t, 0) != NULL;
}

/* The tile's rows from oy0 for the job j with no taps (every tap row in the padding,
 * eb_dw_tile_segments): each output its channel's bias, requantized. */
static EB_NOINLINE void eb_dw_tile_bias(const eb_dw_tf *t, const eb_dw_job *j, int oy0,
                                        int ox0, int rows)
{
    const int xend = ox0 + t->cols < t->out_w ? ox0 + t->cols : t->out_w;
    int r, x;
    for (r = oy0; r < oy0 + rows; ++r) {
        for (x = ox0; x < xend; ++x) {
            const int32_t at = (int32_t)r * t->dst_r + (int32_t)x * t->dst_c;
            eb_dw_put(j->oa, j->ia + at, j->init_a);
            if (j->ob != NULL) {
                eb_dw_put(j->ob, j->ib + at, j->init_b);
            }
        }
    }
}

/* The tile's rows from oy0 for the job j: one channel or two (when eb_dw_tile_pairs), on the
 * loop specialised to the frame when it is linked (they take at least one tap pair). */
static void eb_dw_tile_block(const eb_dw_tf *t, const int16_t *patch, const eb_dw_tap *tap,
                             const eb_dw_job *j, int oy0, int ox0, int rows)
{
    if (t->ntaps == 0) {
        eb_dw_tile_bias(t, j, oy0, ox0, rows);
        return;
    }
    eb_dw_tile_loop(t, j->ob != NULL)(t, patch, tap, j, oy0, ox0, rows);
}

/* A 1x1 kernel, stride 1, no padding (a per-channel scale): n outputs init + w * x, four
 * inputs a word (SXTB16 twice, four SMLAxB), NONE / RELU stored inline. */
EB_INLINE void eb_dw_scale_run(const int8_t *x, int32_t n, uint32_t w, int32_t init, int8_t *d,
                               int s, const int mode)
{
    int32_t i;
    for (i = 0; i + 4 <= n; i += 4) {
        const uint32_t v = eb_load32(x + i);
        const uint32_t a = eb_sxtb16(v), b = eb_sxtb16_ror8(v); /* [x0 x2] [x1 x3] */
        d[i] = eb_dw_q8(mode, eb_smlabb(a, w, init), s, 0, 0, 0);
        d[i + 1] = eb_dw_q8(mode, eb_smlabb(b, w, init), s, 0, 0, 0);
        d[i + 2] = eb_dw_q8(mode, eb_smlatb(a, w, init), s, 0, 0, 0);
        d[i + 3] = eb_dw_q8(mode, eb_smlatb(b, w, init), s, 0, 0, 0);
    }
    for (; i < n; ++i) {
        d[i] = eb_dw_q8(mode, init + (int32_t)x[i] * (int16_t)w, s, 0, 0, 0);
    }
}

/* The same with its sums scaled to a shift of 16 (init and w by 2^(16 - s), exact: the sums
 * gain zero bits only), so that an output is its sum's top half: PKHTB joins two of them,
 * USAT16 saturates both and an ORR packs four into the word stored -- 16 instructions per 4
 * inputs with the loop's (an LDRSB and a 32-bit MLA each: w x 2^(16 - s) needs more than 16
 * bits) where the loop above spends 22 (an ASR, a saturation and a STRB each). RELU saturates to [0, 127];
 * NONE's init carries + 128 x 2^16, so that its [0, 255] lanes are the int8 outputs + 128,
 * whose top bits one EOR flips back. */
EB_INLINE uint32_t eb_dw_scale16_word(const int8_t *x, int32_t w, int32_t init, const int relu)
{
    const uint32_t e = eb_pack_hi((uint32_t)(init + x[0] * w), (uint32_t)(init + x[2] * w));
    const uint32_t f = eb_pack_hi((uint32_t)(init + x[1] * w), (uint32_t)(init + x[3] * w));
    return relu ? eb_usat16_7(e) | eb_usat16_7(f) << 8 /* [y0 y2] | [y1 y3] << 8 */
                : (eb_usat16_8(e) | eb_usat16_8(f) << 8) ^ 0x80808080u;
}

EB_INLINE void eb_dw_scale16_run(const int8_t *x, int32_t n, int32_t w, int32_t init,
                                 int8_t *d, const int relu)
{
    int32_t i;
    for (i = 0; i + 8 <= n; i += 8) { /* two words a pass: the loop's end test per 8 */
        eb_store32(d + i, eb_dw_scale16_word(x + i, w, init, relu));
        eb_store32(d + i + 4, eb_dw_scale16_word(x + i + 4, w, init, relu));
    }
    if (i + 4 <= n) {
        eb_store32(d + i, eb_dw_scale16_word(x + i, w, init, relu));
        i += 4;
    }
    for (; i < n; ++i) {
        const int32_t y = (init + x[i] * w) >> 16;
        d[i] = (int8_t)(relu ? eb_usat7(y) : eb_ssat8(y - 128));
    }
}

/* Whether eb_dw_scale16_run takes a channel: a right shift s of 0..16 and an init that,
 * scaled by 2^(16 - s), leaves room for a product (|x w| 2^(16 - s) <= 2^30) and the offset
 * (2^23) in an int32. */
static int eb_dw_scale16_takes(int s, int32_t init)
{
    const int32_t room = ((int32_t)1 << 30) - ((int32_t)1 << 24);
    return s >= 0 && s <= 16 && init <= room >> (16 - s) && init >= -(room >> (16 - s));
}

/* A per-channel scale two pixels a multiply: y = sat(floor((init + x w) / 2^s)) for a right
 * shift s of 0..8, where |w| 2^(8 - s) = B <= 256. The inputs as unsigned bytes u' = x ^ 0x80
 * (w >= 0) or x ^ 0x7F (w < 0: u' = 127 - x), two a register (UXTB16), so that the sum is
 * C + u' B with B >= 0 and one 32-bit multiply forms both halves: lane = (init + x w)
 * 2^(8 - s) + 2^15 = C + u' B, whose top byte is the output + 128 (2^15 / 2^8) once the
 * lane is held in [0, 65535]. Three forms hold it there: "mla" where no input can leave it
 * (C >= 0, C + 255 B <= 65535: MLA adds C to both halves), "add" where only the top can (C
 * >= 0: UQADD16) and "sub" where only the bottom can (C < 0: UQSUB16 by -C); a RELU layer's
 * channel that can leave it only at the bottom moves its lanes up by whole bytes into "mla"
 * and takes them off again with the bytes' offset k (UQSUB8 by 128 + m clamps at 0 too). The
 * halves' top bytes join by UXTB16 and SEL; NONE flips the offset off by EOR 0x80, RELU
 * clamps by UQSUB8 -- about 10 instructions per 4 outputs against the 16 of
 * eb_dw_scale16_run. */
enum { EB_LANES_MLA, EB_LANES_ADD, EB_LANES_SUB };

typedef struct {
    uint32_t flip; /* u' = x ^ flip: 0x80808080 for w >= 0, 0x7F7F7F7F for w < 0 */
    uint32_t b;    /* B = |w| 2^(8 - s) */
    uint32_t c;    /* both halves: C (mla, add: clamped to 65535) or -C (sub, clamped) */
    uint32_t k;    /* both bytes' offset: RELU subtracts it (UQSUB8), NONE flips it (EOR) */
    int form, relu;
} eb_dw_lanes;

/* The lanes of a channel (weight w, start init, mode RELU or NONE, right shift s); 0 for a
 * channel they do not take (s past 0..8, B past 256). */
EB_INLINE int eb_dw_lanes_of(int32_t w, int32_t init, int s, int relu, eb_dw_lanes *l)
{
    const int32_t aw = w < 0 ? -w : w, t = 8 - s;
    int32_t c, top;
    if (s < 0 || s > 8 || (aw << t) > 256) {
        return 0;
    }
    /* a start past 2^22 saturates every output (|x w| <= 2^14, s <= 8) as 2^22 does: the
     * sums below stay within an int32 */
    init = init > ((int32_t)1 << 22) ? (int32_t)1 << 22
           : init < -((int32_t)1 << 22) ? -((int32_t)1 << 22) : init;
    l->b = (uint32_t)(aw << t);
    l->flip = w < 0 ? 0x7F7F7F7Fu : 0x80808080u;
    /* the sum at u' = 0 (x = -128, or 127 for w < 0), scaled, and the frame's 2^15 */
    c = (init + (w < 0 ? 127 * w : -128 * w)) * ((int32_t)1 << t) + 32768;
    top = c + 255 * (int32_t)l->b;
    l->relu = relu;
    l->k = 0x80808080u;
    if (c >= 0 && top <= 65535) {
        l->form = EB_LANES_MLA;
    } else if (c >= 0) {
        l->form = EB_LANES_ADD;
        c = c > 65535 ? 65535 : c;
    } else if (relu) { /* up by m whole bytes: top + 256 m <= 255 + 255 B <= 65535 */
        const int32_t m = (-c + 255) >> 8;
        l->form = EB_LANES_MLA;
        c += m << 8;
        l->k = (uint32_t)(m > 127 ? 255 : 128 + m) * 0x01010101u; /* m > 127: every output 0 */
    } else {
        l->form = EB_LANES_SUB;
        c = -c > 65535 ? 65535 : -c;
    }
    l->c = (uint32_t)c * 0x00010001u;
    return 1;
}

/* One output of the lanes (the last 1..3 of a run, and the host's every one). */
EB_INLINE int8_t eb_dw_lanes_one(const eb_dw_lanes *l, int8_t x)
{
    const int32_t u = (int32_t)(((uint32_t)(uint8_t)x ^ l->flip) & 0xFF);
    const int32_t c = (int32_t)(l->c & 0xFFFF);
    int32_t lane = l->form == EB_LANES_SUB ? u * (int32_t)l->b - c : c + u * (int32_t)l->b;
    int32_t t;
    lane = lane < 0 ? 0 : lane > 65535 ? 65535 : lane;
    t = lane >> 8;
    if (l->relu) {
        t -= (int32_t)(l->k & 0xFF);
        return (int8_t)(t < 0 ? 0 : t);
    }
    return (int8_t)(t ^ 0x80);
}

#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32) && defined(__GNUC__) && \
    defined(__OPTIMIZE__) && defined(__thumb2__) && !defined(EB_OPT_PORTABLE)
#define EB_LANES_ASM 1
/* One word of 4 inputs from x to 4 outputs at d (both unaligned: LDR / STR), the lanes'
 * form SUM and the bytes' OUT (GE 0b1010 set before: SEL takes bytes 1 and 3 of f). */
#define EB_LANES_MLA_SUM                                                                     \
    "mla %[e], %[e], %[b], %[c]\n\tmla %[f], %[f], %[b], %[c]\n\t"
#define EB_LANES_ADD_SUM                                                                     \
    "mul %[e], %[e], %[b]\n\tmul %[f], %[f], %[b]\n\t"                                        \
    "uqadd16 %[e], %[c], %[e]\n\tuqadd16 %[f], %[c], %[f]\n\t"
#define EB_LANES_SUB_SUM                                                                     \
    "mul %[e], %[e], %[b]\n\tmul %[f], %[f], %[b]\n\t"                                        \
    "uqsub16 %[e], %[e], %[c]\n\tuqsub16 %[f], %[f], %[c]\n\t"
#define EB_LANES_WORD(SUM, OUT)                                                              \
    "ldr %[e], [%[x]], #4\n\t"                                                               \
    "eor %[e], %[e], %[flip]\n\t"                                                            \
    "uxtb16 %[f], %[e], ror #8\n\t"                                                          \
    "uxtb16 %[e], %[e]\n\t" SUM "uxtb16 %[e], %[e], ror #8\n\t"                               \
    "sel %[e], %[f], %[e]\n\t" OUT " %[e], %[e], %[k]\n\t"                                   \
    "str %[e], [%[d]], #4\n\t"
/* n (>= 4) inputs: four words a pass, then one at a time, then the last 1..3 as the
 * last word of the run (its first outputs stored again, the same). */
#define EB_LANES_RUN(name, SUM, OUT)                                                         \
    static EB_NOINLINE void name(const int8_t *x, int8_t *d, int32_t n, const eb_dw_lanes *l) \
    {                                                                                        \
        uint32_t e, f;                                                                       \
        const uint32_t flip = l->flip, b = l->b, c = l->c, k = l->k;                        \
        int32_t quads = n >> 4, ones = (n >> 2) & 3, rest = n & 3;                           \
        __asm__ volatile("mov %[e], #0\n\tmov %[f], #1\n\torr %[f], %[f], %[f], lsl #16\n\t" \
                         "usub8 %[e], %[e], %[f]\n\t" /* GE = 0b1010 */                      \
                         "cmp %[quads], #0\n\t"                                              \
                         "beq 2f\n"                                                          \
                         "1:\n\t" EB_LANES_WORD(SUM, OUT) EB_LANES_WORD(SUM, OUT)             \
                             EB_LANES_WORD(SUM, OUT) EB_LANES_WORD(SUM, OUT)                 \
                         "subs %[quads], %[quads], #1\n\t"                                    \
                         "bne 1b\n"                                                          \
                         "2:\n\t"                                                            \
                         "cbz %[ones], 4f\n"                                                 \
                         "3:\n\t" EB_LANES_WORD(SUM, OUT)                                    \
                         "subs %[ones], %[ones], #1\n\t"                                      \
                         "bne 3b\n"                                                          \
                         "4:\n\t"                                                            \
                         "cbz %[rest], 5f\n\t"                                               \
                         "subs %[rest], %[rest], #4\n\t"                                      \
                         "add %[x], %[x], %[rest]\n\t"                                       \
                         "add %[d], %[d], %[rest]\n\t" EB_LANES_WORD(SUM, OUT)               \
                         "5:\n"                                                              \
                         : [e] "=&r"(e), [f] "=&r"(f), [x] "+r"(x), [d] "+r"(d),             \
                           [quads] "+r"(quads), [ones] "+l"(ones), [rest] "+l"(rest)         \
                         : [flip] "r"(flip), [b] "r"(b), [c] "r"(c), [k] "r"(k)              \
                         : "cc", "memory");                                                  \
    }
EB_LANES_RUN(eb_dw_lanes_mla_relu, EB_LANES_MLA_SUM, "uqsub8")
EB_LANES_RUN(eb_dw_lanes_mla_none, EB_LANES_MLA_SUM, "eor")
EB_LANES_RUN(eb_dw_lanes_add_relu, EB_LANES_ADD_SUM, "uqsub8")
EB_LANES_RUN(eb_dw_lanes_add_none, EB_LANES_ADD_SUM, "eor")
EB_LANES_RUN(eb_dw_lanes_sub_none, EB_LANES_SUB_SUM, "eor")
#endif

/* n outputs of a channel by its lanes: words by the loops above on the M4 (a run of fewer
 * than 4, and the host's every one, an output at a time by the same sums). */
static EB_NOINLINE void eb_dw_lanes_run(const int8_t *x, int32_t n, const eb_dw_lanes *l,
                                        int8_t *d)
{
    int32_t i = 0;
#ifdef EB_LANES_ASM
    if (n >= 4) {
        if (l->form == EB_LANES_MLA) {
            (l->relu ? eb_dw_lanes_mla_relu : eb_dw_lanes_mla_none)(x, d, n, l);
        } else if (l->form == EB_LANES_ADD) {
            (l->relu ? eb_dw_lanes_add_relu : eb_dw_lanes_add_none)(x, d, n, l);
        } else {
            eb_dw_lanes_sub_none(x, d, n, l); /* (RELU's channels have no "sub") */
        }
        return;
    }
#endif
    for (; i < n; ++i) {
        d[i] = eb_dw_lanes_one(l, x[i]);
    }
}

static EB_NOINLINE void eb_dw_scale(const int8_t *x, int32_t n, int32_t w, int32_t init,
                                    const eb_dw_out *o, int32_t index)
{
    const uint32_t wv = (uint32_t)(uint16_t)(int16_t)w;
    int32_t i;
    eb_dw_lanes l;
    if ((o->mode == EB_DW_RELU || o->mode == EB_DW_NONE) &&
        eb_dw_lanes_of(w, init, o->s, o->mode == EB_DW_RELU, &l)) {
        eb_dw_lanes_run(x, n, &l, o->out8 + index);
    } else if ((o->mode == EB_DW_RELU || o->mode == EB_DW_NONE) &&
               eb_dw_scale16_takes(o->s, init)) {
        const int t = 16 - o->s;
        const int32_t w16 = w * ((int32_t)1 << t);
        const int32_t i16 = (int32_t)((uint32_t)init << t);
        if (o->mode == EB_DW_RELU) {
            eb_dw_scale16_run(x, n, w16, i16, o->out8 + index, 1);
        } else {
            eb_dw_scale16_run(x, n, w16, i16 + ((int32_t)128 << 16), o->out8 + index, 0);
        }
    } else if (o->mode == EB_DW_RELU) {
        eb_dw_scale_run(x, n, wv, init, o->out8 + index, o->s, EB_DW_RELU);
    } else if (o->mode == EB_DW_NONE) {
        eb_dw_scale_run(x, n, wv, init, o->out8 + index, o->s, EB_DW_NONE);
    } else {
        for (i = 0; i < n; ++i) {
            eb_dw_put(o, index + i, init + (int32_t)x[i] * w);
        }
    }
}

/* Whether every tap row of output rows oy0 .. oy0 + rows - 1 lies inside the input. */
EB_INLINE int eb_dw_tile_inside(const eb_dw_tf *t, int oy0, int rows)
{
    return oy0 * t->s_h >= t->p_h &&
           (oy0 + rows - 1) * t->s_h - t->p_h + (t->k_h - 1) * t->d_h < t->in_h;
}

/* eb_dw_tile_block over the tile's rows in runs whose tap rows inside the input are the
 * same: a run's tap rows wholly in the padding (zeros in the patch) are left out of its
 * sums (a 7x7 stride-2 layer on a 3-row map reads 3 of its 7). */
static void eb_dw_tile_segments(const eb_dw_tf *t, const int16_t *patch, const eb_dw_tap *tap,
                                const eb_dw_job *j, int oy0, int ox0, int rows)
{
    eb_dw_tf part;
    int r = 0;
    if (eb_dw_tile_inside(t, oy0, rows)) {
        eb_dw_tile_block(t, patch, tap, j, oy0, ox0, rows);
        return;
    }
    part = *t;
    while (r < rows) {
        int lo, hi, next = r + 1, lo2, hi2;
        eb_tap_range((oy0 + r) * t->s_h - t->p_h, t->d_h, t->k_h, t->in_h, &lo, &hi);
        for (; next < rows; ++next) {
            eb_tap_range((oy0 + next) * t->s_h - t->p_h, t->d_h, t->k_h, t->in_h, &lo2, &hi2);
            if (lo2 != lo || hi2 != hi) {
                break;
            }
        }
        part.ntaps = (hi - lo) * t->rowtaps;
        eb_dw_tile_block(&part, patch + (int32_t)r * t->s_h * t->pw, tap + lo * t->rowtaps, j,
                         oy0 + r, ox0, next - r);
        r = next;
    }
}

/* The requantization of the tile kernel's layer: the fast mode (EB_DW_NONE, _RELU, _ABS;
 * 0: none) for biases in [b_lo, b_hi], its rounding term, and the mode of the rest. */
typedef struct {
    int fast, other;
    int32_t half, b_lo, b_hi;
} eb_dw_rq;

/* The outputs o and requantization rq of sums of `taps` products (|w * x| <= 2^14 each) into
 * s. The fast requantization (acc >> s, SSAT/USAT) starts from bias + 2^(s-1) (half up): for
 * a bias in [b_lo, b_hi] no sum can overflow with it. */
static void eb_dw_setup(const eb_dw_sink *s, int32_t taps, eb_dw_out *o, eb_dw_rq *rq)
{
    o->out8 = s->out8;
    o->out32 = s->out32;
    o->shift = s->shift;
    o->rounding = s->rounding;
    o->act = s->act;
    o->s = -s->shift;
    o->mode = 0;
    rq->fast = 0;
    rq->other = s->out8 == NULL ? EB_DW_WIDE : EB_DW_GENERIC;
    rq->half = rq->b_lo = rq->b_hi = 0;
    if (s->out8 != NULL && s->shift <= 0 && s->shift >= -31 &&
        ((EB_DW_HAS_NONE && s->act == EB_ACT_NONE) || (EB_DW_HAS_RELU && s->act == EB_ACT_RELU) ||
         (EB_DW_HAS_ABS && s->act == EB_ACT_ABS))) {
        const int64_t bound = (int64_t)taps << 14;
        const int32_t half = s->rounding == EB_ROUND_HALF_UP && s->shift < 0
                                 ? (int32_t)1 << (-s->shift - 1)
                                 : 0;
        const int64_t lo = (int64_t)INT32_MIN + bound, hi = (int64_t)INT32_MAX - bound - half;
        if (lo <= hi) { /* else no bias qualifies */
            rq->fast = s->act == EB_ACT_RELU  ? EB_DW_RELU
                       : s->act == EB_ACT_ABS ? EB_DW_ABS
                                              : EB_DW_NONE;
            rq->half = half;
            rq->b_lo = (int32_t)lo;
            rq->b_hi = (int32_t)hi;
        }
    }
}

/* Output channel oc's sums' start (its bias, with the rounding term in the fast mode) and
 * its mode, into o->mode. */
static int32_t eb_dw_init(const eb_dw_rq *rq, const int32_t *bias, int32_t oc, eb_dw_out *o)
{
    const int32_t b = bias ? bias[oc] : 0;
    if (rq->fast && b >= rq->b_lo && b <= rq->b_hi) {
        o->mode = rq->fast;
        return b + rq->half;
    }
    o->mode = rq->other;
    return b;
}

/* Output channel oc's `taps` weights as int8: in place, or unpacked into `unpacked`. */
static const int8_t *eb_dw_weights(const eb_conv_params *p, const int8_t *weight, int32_t oc,
                                   int32_t taps, int8_t *unpacked)
{
    if (p->wbits == 0) {
        return weight + oc * taps;
    }
    eb_unpack_weights(1, taps, p->wbits, weight + oc * EB_PACKED_ROW_BYTES(taps, p->wbits),
                      unpacked);
    return unpacked;
}

/* ---- the fan: many output channels of one input channel ----
 * A layer of the tile kernel with a multiplier of EB_DW_FAN_MIN or more (a dense conv of one
 * input channel: a first layer's 1 -> 32) and at most EB_DW_FAN_TAPS tap pairs a pixel: the
 * tap words of two neighbouring pixels (2 x ntaps) are loaded once, into registers, and each
 * output channel's record [init, w0 .. w(n-1)] streams past them: per channel one or two LDM,
 * 2 SMLAD a pair, per pixel ASR, SSAT / USAT and STRB. The pair loop (two channels x 4
 * pixels) reloads each tap's weights and offset per block and spends about 6 instructions an
 * output on its block's start and stores: at 3 tap pairs it costs about 13 instructions an
 * output, the fan 9.5 (19 a channel and pixel pair; a 1 -> 32 k5 layer went 2.93 -> 2.0
 * insn/MAC). Tiles whose tap rows all lie inside the input, channels in the fast NONE / RELU
 * requantization, EB_DW_FAN_CHUNK channels' records at a time (on the stack); a channel
 * that is not (a bias near the int32 limits) and the rest after it take the other loops. */
#define EB_DW_FAN_MIN 4
#define EB_DW_FAN_TAPS 6 /* 1..4 tap pairs: two pixels at a time; 5, 6: one */
#define EB_DW_FAN_CHUNK 16
/* Words of a channel's record over n tap pairs: its init and tap words, and for n = 3 a flag
 * after them, whether another record follows -- that fan's registers are all taken: the flag
 * comes by an LDRD with its last tap word and ends the loop in place of its end in r7, which
 * then holds pixel 2's output offset, loaded from the stack once a channel before (a 1 -> 8
 * 5x1 conv 2.06 -> 1.96 insn/MAC). */
#define EB_DW_FAN_WORDS(n) ((n) == 3 ? 5 : (n) + 1)

/* Whether a layer of multiplier m and n tap pairs a pixel runs by the fan (when linked): up
 * to 4 pairs from 4 channels (one pair from 8: below, the pair loop costs less), 5 or 6 (one
 * pixel at a time) from 12 (1 -> 8 k11 took 8 % fewer instructions than the pair loop but
 * 7 % more cycles: two LDM and an LDRD an output). The Python twin is ops.conv_path.fan. */
static int eb_dw_fan_takes(int m, int n)
{
    return EB_DW_FAN && n > 0 && n <= EB_DW_FAN_TAPS && m >= EB_DW_FAN_MIN &&
           m * (n > 4 ? 1 : n) >= (n > 4 ? 3 : 2) * EB_DW_FAN_MIN;
}

typedef struct {
    int32_t sh, dc, plane;   /* 0, 4, 8: right shift; pixel 2's output; the next channel's */
    const uint32_t *wend;    /* 12: the records' end */
    const uint32_t *w;       /* 16: the records, n + 1 words each */
    int8_t *out;             /* 20: the first pixel's output of the first channel (advanced) */
    const uint8_t *q;        /* 24: the first pixel's first tap in the patch (advanced) */
    int32_t sb, qstep, ostep; /* 28, 32, 36: bytes to pixel 2; to the next pair, its output */
    int32_t npx;             /* 40: pixel pairs (n > 4: pixels) */
    int32_t off[6];          /* 44: the tap pairs' byte offsets */
    int32_t odd;             /* 68: an odd count of records (the loop entered at its second) */
    int32_t rows;            /* 72: the rows after this one (counted down) */
    int32_t qskip, oskip;    /* 76, 80: from a row's end to the next row's start: q, out */
    int32_t npx0;            /* 84: a row's pixel pairs (pixels) */
} eb_dw_fan_job;

typedef void (*eb_dw_fan_fn)(eb_dw_fan_job *);

/* The portable twin of the assembly: npx pixel pairs, each with its 2 x n tap words against
 * the records. */
EB_INLINE void eb_dw_fan_row(eb_dw_fan_job *j, int n, const int mode)
{
    for (; j->npx > 0; --j->npx, j->q += j->qstep, j->out += j->ostep) {
        const uint32_t *w = j->w;
        int8_t *o = j->out;
        for (; w < j->wend; w += EB_DW_FAN_WORDS(n), o += j->plane) {
            int32_t a = (int32_t)w[0], b = a;
            int p;
            for (p = 0; p < n; ++p) {
                a = eb_smlad(eb_load32(j->q + j->off[p]), w[1 + p], a);
                b = eb_smlad(eb_load32(j->q + j->sb + j->off[p]), w[1 + p], b);
            }
            o[0] = eb_dw_q8(mode, a, j->sh, 0, 0, 0);
            o[j->dc] = eb_dw_q8(mode, b, j->sh, 0, 0, 0);
        }
    }
}

/* ... its rows: the row, then rows more, each qskip / oskip on from the last one's end. */
EB_INLINE void eb_dw_fan_run(eb_dw_fan_job *j, int n, const int mode)
{
    for (;;) {
        eb_dw_fan_row(j, n, mode);
        if (j->rows-- <= 0) {
            return;
        }
        j->q += j->qskip;
        j->out += j->oskip;
        j->npx = j->npx0;
    }
}

#if EB_DW_FAN && EB_DW_PAIR_ASM
/* On the M4, per mode and n (1..4), naked, the pixel loop too (a C loop around a call per
 * pixel pair cost 69 instructions a pair). In the channel loop r0-r7 hold the tap words
 * (c0, d0, c1, d1, ..), r8 and r9 the two pixels' sums (from the record's init), r10 / r11
 * the weights, r12 the records, lr the output; for n <= 3 r6 the plane, r7 the end (n = 3:
 * pixel 2's output offset, which n <= 2 keep in r4). The job's copy on the stack holds the
 * rest. */
#define EB_FAN_FIRST "smlad r9, r1, r10, r8\n\tsmlad r8, r0, r10, r8\n\t"
#define EB_FAN_PAIR(c, d, w) "smlad r9, " d ", " w ", r9\n\tsmlad r8, " c ", " w ", r8\n\t"
#define EB_FAN_BODY1 "ldmia r12!, {r8, r10}\n\t" EB_FAN_FIRST
#define EB_FAN_BODY2 "ldmia r12!, {r8, r10, r11}\n\t" EB_FAN_FIRST EB_FAN_PAIR("r2", "r3", "r11")
#define EB_FAN_BODY3 EB_FAN_BODY2 "ldrd r10, r11, [r12], #8\n\t" EB_FAN_PAIR("r4", "r5", "r10")
#define EB_FAN_BODY4                                                                         \
    EB_FAN_BODY2 "ldmia r12!, {r10, r11}\n\t" EB_FAN_PAIR("r4", "r5", "r10")                 \
        EB_FAN_PAIR("r6", "r7", "r11")
/* A pixel pair's tap words: pixel 1 at r8, pixel 2 at r9 (r8 + sb), offsets r10-r12, lr. */
#define EB_FAN_LD(c, d, o) "ldr " c ", [r8, " o "]\n\tldr " d ", [r9, " o "]\n\t"
#define EB_FAN_COL1 EB_FAN_LD("r0", "r1", "r10")
#define EB_FAN_COL2 EB_FAN_COL1 EB_FAN_LD("r2", "r3", "r11")
#define EB_FAN_COL3 EB_FAN_COL2 EB_FAN_LD("r4", "r5", "r12")
#define EB_FAN_COL4 EB_FAN_COL3 EB_FAN_LD("r6", "r7", "lr")
/* A channel's two outputs: pixel 2's at lr + dc (dc in the register d: n = 1, 2 keep it in r4,
 * n = 3 in r7, n = 4 loads it with the plane, r10, from the stack). */
#define EB_FAN_Q(sat, bits, c, d)                                                            \
    sat " r8, " bits ", r8, asr " c "\n\t" sat " r9, " bits ", r9, asr " c "\n\t"          \
    "strb r8, [lr]\n\t"                                                                      \
    "strb r9, [lr, " d "]\n\t"
#define EB_FAN_KEEP "ldrd r6, r7, [sp, #8]\n\t"
#define EB_FAN_KEEP_DC EB_FAN_KEEP "ldr r4, [sp, #4]\n\t"
#define EB_FAN_KEEP3 "ldrd r7, r6, [sp, #4]\n\t"
#define EB_FAN_NEXT3 "add lr, lr, r6\n\tcmp r11, #0\n\tbne 1b\n\t"
#define EB_FAN_NEXT_REG "add lr, lr, r6\n\tcmp r12, r7\n\tbne 1b\n\t"
#define EB_FAN_NEXT_STACK "add lr, lr, r10\n\tldr r11, [sp, #12]\n\tcmp r12, r11\n\tbne 1b\n\t"
/* The first channel of a loop pass: the next channel's output, no test. */
#define EB_FAN_HALF_REG "add lr, lr, r6\n\t"
#define EB_FAN_HALF_STACK "add lr, lr, r10\n\t"
#define EB_FAN_Q4(sat, bits, c) "ldrd r11, r10, [sp, #4]\n\t" EB_FAN_Q(sat, bits, c, "r11")
/* Both forms' entry: the job copied to the stack (22 words), and their exit: the next pixel
 * (pair) -- q and out advanced, the count down --, at a row's end the next row (q and out
 * on by the skips, the count anew: a call a tile, where a call a row cost about 70
 * instructions a row), and the return. The channel loop does two channels a pass (one test
 * for both), entered at the second for an odd count (job.odd). */
#define EB_FAN_ENTER                                                                         \
    "push {r0, r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                                    \
    "sub sp, sp, #88\n\t"                                                                    \
    "ldmia r0!, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                                        \
    "stmia sp, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                                         \
    "ldmia r0!, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                                        \
    "add r9, sp, #32\n\t"                                                                    \
    "stmia r9, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                                         \
    "ldmia r0, {r1, r2, r3, r4, r5, r6}\n\t"                                                 \
    "add r9, sp, #64\n\t"                                                                    \
    "stmia r9, {r1, r2, r3, r4, r5, r6}\n"
#define EB_FAN_LEAVE                                                                         \
    "ldrd r8, r9, [sp, #20]\n\t"                                                             \
    "ldrd r10, r11, [sp, #32]\n\t"                                                           \
    "add r9, r9, r10\n\t"                                                                    \
    "add r8, r8, r11\n\t"                                                                    \
    "strd r8, r9, [sp, #20]\n\t"                                                             \
    "ldr r10, [sp, #40]\n\t"                                                                 \
    "subs r10, r10, #1\n\t"                                                                  \
    "str r10, [sp, #40]\n\t"                                                                 \
    "bne 2b\n\t"                                                                             \
    "ldr r10, [sp, #72]\n\t" /* the next row */                                            \
    "subs r10, r10, #1\n\t"                                                                  \
    "bmi 4f\n\t"                                                                             \
    "str r10, [sp, #72]\n\t"                                                                 \
    "ldrd r10, r11, [sp, #76]\n\t"                                                           \
    "add r9, r9, r10\n\t"                                                                    \
    "add r8, r8, r11\n\t"                                                                    \
    "strd r8, r9, [sp, #20]\n\t"                                                             \
    "ldr r10, [sp, #84]\n\t"                                                                 \
    "str r10, [sp, #40]\n\t"                                                                 \
    "b 2b\n"                                                                                 \
    "4:\n\t"                                                                                 \
    "add sp, sp, #88\n\t"                                                                    \
    "pop {r0, r4, r5, r6, r7, r8, r9, r10, r11, pc}"
#define EB_FAN_FN(name, col, keep, body, q, half, next)                                       \
    static __attribute__((naked, noinline)) void name(eb_dw_fan_job *job                    \
                                                      __attribute__((unused)))              \
    {                                                                                        \
        __asm__ volatile(EB_FAN_ENTER "2:\n\t"                                               \
                         "ldrd r8, r9, [sp, #24]\n\t"                                       \
                         "add r9, r8, r9\n\t"                                               \
                         "add r10, sp, #44\n\t"                                             \
                         "ldmia r10, {r10, r11, r12, lr}\n\t" col keep                      \
                         "ldrd r12, lr, [sp, #16]\n\t"                                     \
                         "ldr r8, [sp, #68]\n\t"                                            \
                         "cmp r8, #0\n\t"                                                   \
                         "bne 3f\n"                                                          \
                         "1:\n\t" body q half                                                \
                         "3:\n\t" body q next EB_FAN_LEAVE);                                 \
    }
#define EB_FAN_FNS(mode, sat, bits, c)                                                       \
    EB_FAN_FN(eb_dw_fan1_##mode, EB_FAN_COL1, EB_FAN_KEEP_DC, EB_FAN_BODY1,                  \
              EB_FAN_Q(sat, bits, c, "r4"), EB_FAN_HALF_REG, EB_FAN_NEXT_REG)                \
    EB_FAN_FN(eb_dw_fan2_##mode, EB_FAN_COL2, EB_FAN_KEEP_DC, EB_FAN_BODY2,                  \
              EB_FAN_Q(sat, bits, c, "r4"), EB_FAN_HALF_REG, EB_FAN_NEXT_REG)                \
    EB_FAN_FN(eb_dw_fan3_##mode, EB_FAN_COL3, EB_FAN_KEEP3, EB_FAN_BODY3,                    \
              EB_FAN_Q(sat, bits, c, "r7"), EB_FAN_HALF_REG, EB_FAN_NEXT3)                   \
    EB_FAN_FN(eb_dw_fan4_##mode, EB_FAN_COL4, "", EB_FAN_BODY4, EB_FAN_Q4(sat, bits, c),    \
              EB_FAN_HALF_STACK, EB_FAN_NEXT_STACK)                                          \
    EB_FAN1_FN(eb_dw_fan5_##mode,                                                            \
               EB_FAN1_BODY5 "ldr r7, [r12], #4\n\tsmlad r6, r4, r7, r6\n\t", sat, bits, c)  \
    EB_FAN1_FN(eb_dw_fan6_##mode, EB_FAN1_BODY6, sat, bits, c)
/* Five or six tap pairs, one pixel at a time: r0-r5 its tap words, r6 the sum, r7-r10 the
 * weights, r11 the plane, r12 the records, lr the output. */
#define EB_FAN1_BODY5                                                                        \
    "ldmia r12!, {r6, r7, r8, r9, r10}\n\t"                                                  \
    "smlad r6, r0, r7, r6\n\tsmlad r6, r1, r8, r6\n\t"                                       \
    "smlad r6, r2, r9, r6\n\tsmlad r6, r3, r10, r6\n\t"
#define EB_FAN1_BODY6 EB_FAN1_BODY5 "ldmia r12!, {r7, r8}\n\tsmlad r6, r4, r7, r6\n\t"      \
                                    "smlad r6, r5, r8, r6\n\t"
#define EB_FAN1_FN(name, body, sat, bits, c)                                                 \
    static __attribute__((naked, noinline)) void name(eb_dw_fan_job *job                    \
                                                      __attribute__((unused)))              \
    {                                                                                        \
        __asm__ volatile(EB_FAN_ENTER "2:\n\t"                                               \
                         "ldr r8, [sp, #24]\n\t"                                            \
                         "add r9, sp, #44\n\t"                                              \
                         "ldmia r9, {r6, r7, r9, r10, r11, r12}\n\t"                        \
                         "ldr r0, [r8, r6]\n\tldr r1, [r8, r7]\n\tldr r2, [r8, r9]\n\t"     \
                         "ldr r3, [r8, r10]\n\tldr r4, [r8, r11]\n\tldr r5, [r8, r12]\n\t"  \
                         "ldrd r12, lr, [sp, #16]\n\t"                                     \
                         "ldr r11, [sp, #8]\n\t"                                            \
                         "ldr r6, [sp, #68]\n\t"                                            \
                         "cbnz r6, 3f\n"                                                     \
                         "1:\n\t" body sat " r6, " bits ", r6, asr " c "\n\t"               \
                         "strb r6, [lr]\n\t"                                                \
                         "add lr, lr, r11\n"                                                 \
                         "3:\n\t" body sat " r6, " bits ", r6, asr " c "\n\t"               \
                         "strb r6, [lr]\n\t"                                                \
                         "ldr r8, [sp, #12]\n\t"                                            \
                         "add lr, lr, r11\n\t"                                              \
                         "cmp r12, r8\n\t"                                                  \
                         "bne 1b\n\t" EB_FAN_LEAVE);                                         \
    }
#if EB_DW_HAS_RELU && EB_DW_FAN8
EB_FAN_FNS(relu_8, "usat", "#7", "#8")
#endif
#if EB_DW_HAS_RELU && EB_DW_FAN16
EB_FAN_FNS(relu_16, "usat", "#7", "#16")
#endif
#if EB_DW_HAS_NONE && EB_DW_FAN8
EB_FAN_FNS(none_8, "ssat", "#8", "#8")
#endif
#if EB_DW_HAS_NONE && EB_DW_FAN16
EB_FAN_FNS(none_16, "ssat", "#8", "#16")
#endif
#define EB_DW_FAN_ASM 1
#else
#define EB_DW_FAN_ASM 0
#endif

#if EB_DW_FAN
#if !EB_DW_FAN_ASM
#define EB_FAN_C(name, n, mode)                                                              \
    static EB_NOINLINE void name(eb_dw_fan_job *j)                                           \
    {                                                                                        \
        eb_dw_fan_run(j, n, mode);                                                           \
    }
#define EB_FAN_CS(mode, MODE)                                                                \
    EB_FAN_C(eb_dw_fan1_##mode, 1, MODE)                                                     \
    EB_FAN_C(eb_dw_fan2_##mode, 2, MODE)                                                     \
    EB_FAN_C(eb_dw_fan3_##mode, 3, MODE)                                                     \
    EB_FAN_C(eb_dw_fan4_##mode, 4, MODE)                                                     \
    EB_FAN_C(eb_dw_fan5_##mode, 5, MODE)                                                     \
    EB_FAN_C(eb_dw_fan6_##mode, 6, MODE)
#if EB_DW_HAS_RELU && EB_DW_FAN8
EB_FAN_CS(relu_8, EB_DW_RELU)
#endif
#if EB_DW_HAS_RELU && EB_DW_FAN16
EB_FAN_CS(relu_16, EB_DW_RELU)
#endif
#if EB_DW_HAS_NONE && EB_DW_FAN8
EB_FAN_CS(none_8, EB_DW_NONE)
#endif
#if EB_DW_HAS_NONE && EB_DW_FAN16
EB_FAN_CS(none_16, EB_DW_NONE)
#endif
#endif

/* The fan of n tap pairs (1..EB_DW_FAN_TAPS) in mode shifting by c (8, 16; NULL: not
 * linked). */
#define EB_FAN_TABLE(mode)                                                                   \
    {eb_dw_fan1_##mode, eb_dw_fan2_##mode, eb_dw_fan3_##mode,                                \
     eb_dw_fan4_##mode, eb_dw_fan5_##mode, eb_dw_fan6_##mode}
#define EB_FAN_PICK(mode, MODE, c_)                                                          \
    do {                                                                                     \
        static const eb_dw_fan_fn fns[EB_DW_FAN_TAPS] = EB_FAN_TABLE(mode);                  \
        if (mode_ == (MODE) && c == (c_)) {                                                  \
            return fns[n - 1];                                                               \
        }                                                                                    \
    } while (0)
static eb_dw_fan_fn eb_dw_fan_of(int n, int mode_, int c)
{
#if EB_DW_HAS_RELU && EB_DW_FAN8
    EB_FAN_PICK(relu_8, EB_DW_RELU, 8);
#endif
#if EB_DW_HAS_RELU && EB_DW_FAN16
    EB_FAN_PICK(relu_16, EB_DW_RELU, 16);
#endif
#if EB_DW_HAS_NONE && EB_DW_FAN8
    EB_FAN_PICK(none_8, EB_DW_NONE, 8);
#endif
#if EB_DW_HAS_NONE && EB_DW_FAN16
    EB_FAN_PICK(none_16, EB_DW_NONE, 16);
#endif
    (void)n;
    (void)mode_;
    (void)c;
    return NULL;
}
#undef EB_FAN_PICK

/* Records of `count` output channels from oc (their init and tap words, in the frame's
 * order of eb_dw_tile_taps) into rec, scaled by 2^t (0 <= t <= 8: the weights still int16;
 * the sums shift right by t more, eb_dw_fan_tile); the number built: fewer when a channel's
 * requantization is not the fast mode `mode`, or its init scaled could overflow a sum
 * (eb_dw_imm_limit). The words' weights (a pair's two, or one and a zero) are found once a
 * call; the records' starts come first, then with the weights in place (unpacked) each
 * word of every record in turn, a flat loop of 11 instructions a word (1 -> 256 5x1: 69
 * instructions a record of 5 words with its call's share, 98 a record at a time). */
static int eb_dw_fan_records(const eb_dw_tf *f, const eb_conv_params *p, const int8_t *weight,
                             const int32_t *bias, const eb_dw_rq *rq, int32_t oc, int count,
                             int mode, int t, uint32_t *rec)
{
    const int32_t lim = eb_dw_imm_limit(EB_DW_FAN_TAPS, t);
    int8_t unpacked[2 * EB_DW_FAN_TAPS]; /* chans * k_h * k_w <= 2 * ntaps */
    const int32_t cw = (int32_t)p->k_h * p->k_w, taps = EB_DW_CHANS(f) * cw, w_c = f->w_c;
    const int32_t wstep = f->d_w == 1 ? 2 * w_c : w_c;
    const int pairs = f->pairs, full = f->d_w == 1 ? f->k_w / 2 : 0;
    const int flagged = EB_DW_FAN_WORDS(f->ntaps) > f->ntaps + 1; /* n = 3's flag word */
    const int32_t size = EB_DW_FAN_WORDS(f->ntaps); /* words a record */
    /* rq's fields as locals: the records' stores could alias them for the compiler */
    const int32_t half = rq->half, b_lo = rq->b_lo, b_hi = rq->b_hi;
    int16_t ia[EB_DW_FAN_TAPS], ib[EB_DW_FAN_TAPS]; /* a word's weights (ib = ia: no second) */
    int32_t fb[EB_DW_FAN_TAPS];                     /* the second's scale: 2^t, or 0 */
    int c, ky, ic, k, nw = 0;
    for (ky = 0; ky < f->k_h; ++ky) { /* eb_dw_tile_taps' words, in its order */
        for (ic = 0; ic < EB_DW_CHANS(f); ++ic) {
            int32_t q = (int32_t)ky * f->w_r + ic * cw;
            for (k = 0; k < pairs; ++k, q += wstep, ++nw) {
                ia[nw] = (int16_t)q;
                ib[nw] = (int16_t)(k < full ? q + w_c : q);
                fb[nw] = k < full ? (int32_t)1 << t : 0;
            }
        }
    }
    if (mode != rq->fast) {
        return 0;
    }
    for (c = 0; c < count; ++c, rec += size) { /* the starts (eb_dw_init's) and flags */
        const int32_t b = bias ? bias[oc + c] : 0, init = b + half;
        if (b < b_lo || b > b_hi || init > lim || init < -lim) {
            break;
        }
        rec[0] = (uint32_t)init << t;
        if (flagged) {
            rec[size - 1] = 1; /* another record follows (the last's: 0, below) */
        }
    }
    rec -= c * size;
    count = c;
    if (p->wbits == 0) { /* a word of every record at a time: the weights in place */
        for (k = 0; k < nw; ++k) {
            const int8_t *w = weight + oc * taps;
            const int32_t a = ia[k], b = ib[k], sb = fb[k];
            uint32_t *r = rec + 1 + k, *const end = r + count * size;
            for (; r != end; w += taps, r += size) {
                *r = eb_pack_lo((uint32_t)(w[a] << t), (uint32_t)(w[b] * sb));
            }
        }
    } else {
        for (c = 0; c < count; ++c) {
            const int8_t *w = eb_dw_weights(p, weight, oc + c, taps, unpacked);
            for (k = 0; k < nw; ++k) {
                rec[c * size + 1 + k] = eb_dw_pair_word(w[ia[k]] * (1 << t), w[ib[k]] * fb[k]);
            }
        }
    }
    if (count > 0 && flagged) {
        rec[count * size - 1] = 0;
    }
    return count;
}

/* The fan's records of the group from output channel oc, where its channels fit
 * EB_DW_FAN_HELD chunks: its first `made` chunks (count[k] records made in chunk k,
 * eb_dw_fan_records), kept from tile to tile -- made once a group, not once a tile (a 3x3
 * stride-2 first layer of 12 channels in 3 tiles spent a tenth of its instructions on them,
 * a 2x1 conv 3 -> 32 a seventh). oc < 0: none. */
#define EB_DW_FAN_HELD 2
#define EB_DW_FAN_REC (EB_DW_FAN_CHUNK * (EB_DW_FAN_TAPS + 1)) /* words of a chunk */
typedef struct {
    uint32_t rec[EB_DW_FAN_HELD * EB_DW_FAN_REC];
    int32_t oc;
    int made, count[EB_DW_FAN_HELD];
} eb_dw_fan_held;

/* The records of chunk k (from output channel oc0 + k * EB_DW_FAN_CHUNK, `want` of them) of
 * a group of m, made or held (h); their count into *count. */
static uint32_t *eb_dw_fan_chunk(const eb_dw_tf *f, const eb_conv_params *p,
                                 const int8_t *weight, const int32_t *bias, const eb_dw_rq *rq,
                                 int32_t oc0, int m, int k, int want, int mode, int t,
                                 eb_dw_fan_held *h, int *count)
{
    const int32_t oc = oc0 + (int32_t)k * EB_DW_FAN_CHUNK;
    uint32_t *rec;
    if (m > EB_DW_FAN_HELD * EB_DW_FAN_CHUNK) { /* made a tile, in the first chunk's room */
        *count = eb_dw_fan_records(f, p, weight, bias, rq, oc, want, mode, t, h->rec);
        return h->rec;
    }
    if (h->oc != oc0) { /* another group's */
        h->oc = oc0;
        h->made = 0;
    }
    rec = h->rec + k * EB_DW_FAN_REC;
    if (k >= h->made) { /* chunks are made in turn */
        h->count[k] = eb_dw_fan_records(f, p, weight, bias, rq, oc, want, mode, t, rec);
        h->made = k + 1;
    }
    *count = h->count[k];
    return rec;
}

/* fn over `rows` rows of npx pixel pairs (pixels) from the patch at q (pitch int16 from a row
 * to the next) into d (dst_r bytes a row): qstep / ostep bytes to the next pair, sb / dc to
 * its second pixel. None for npx 0. */
static void eb_dw_fan_block(eb_dw_fan_fn fn, eb_dw_fan_job *job, const int16_t *q, int8_t *d,
                           int32_t pitch, int32_t dst_r, int32_t qstep, int32_t ostep,
                           int32_t sb, int32_t dc, int npx, int rows)
{
    if (npx <= 0) {
        return;
    }
    job->q = (const uint8_t *)q;
    job->out = d;
    job->qstep = qstep;
    job->ostep = ostep;
    job->sb = sb;
    job->dc = dc;
    job->npx = job->npx0 = npx;
    job->rows = rows - 1;
    job->qskip = 2 * pitch - npx * qstep;
    job->oskip = dst_r - npx * ostep;
    fn(job);
}

/* Output channels oc0 .. oc0 + m - 1 (of one input channel) of the tile at (oy0, ox0) by the
 * fan, `rows` rows all of whose tap rows lie inside the input; returns how many it computed
 * (from oc0; the rest: the other loops). out: the layer's output at the phase's offset; tap:
 * a table of the frame's every tap row, of which only the offsets are read. The sums shift
 * right by an immediate c, 8 or 16 (a right shift sh of 0..8 or 9..16; none other), their
 * records scaled by 2^(c - sh): one USAT / SSAT with ASR #c an output, where a shift by a
 * register took an ASR and its operand (the fan's registers are all taken) from the stack. */
static EB_NOINLINE int eb_dw_fan_tile(const eb_dw_tf *f, const eb_conv_params *p,
                                      const int8_t *weight, const int32_t *bias,
                                      const eb_dw_rq *rq, int8_t *out, int32_t out_plane,
                                      const int16_t *patch, const eb_dw_tap *tap, int32_t oc0,
                                      int m, int oy0, int ox0, int rows, int sh,
                                      eb_dw_fan_held *h)
{
    const int n = f->ntaps, mode = rq->fast, c = eb_dw_imm(sh);
    const eb_dw_fan_fn fn = c ? eb_dw_fan_of(n, mode, c) : NULL;
    const int cols = (ox0 + f->cols < f->out_w ? ox0 + f->cols : f->out_w) - ox0;
    const int32_t pitch = (int32_t)f->s_h * f->pw, dc = f->dst_c;
    eb_dw_fan_job job;
    int8_t *d;
    int j0, count, k;
    if (fn == NULL) {
        return 0;
    }
    for (k = 0; k < EB_DW_FAN_TAPS; ++k) {
        job.off[k] = k < n ? 2 * tap[k].off : 0; /* bytes */
    }
    job.sh = c;
    job.plane = out_plane;
    for (j0 = 0; j0 < m; j0 += count) {
        const int want = m - j0 < EB_DW_FAN_CHUNK ? m - j0 : EB_DW_FAN_CHUNK;
        const uint32_t *const rec = eb_dw_fan_chunk(f, p, weight, bias, rq, oc0, m,
                                                    j0 / EB_DW_FAN_CHUNK, want, mode, c - sh,
                                                    h, &count);
        if (count == 0) {
            break;
        }
        job.w = rec;
        job.wend = rec + count * EB_DW_FAN_WORDS(n);
        job.odd = count & 1;
        d = out + (oc0 + j0) * out_plane + (int32_t)oy0 * f->dst_r + (int32_t)ox0 * dc;
        if (n > 4) { /* one pixel at a time (its "pixel 2" for the portable twin) */
            eb_dw_fan_block(fn, &job, patch, d, pitch, f->dst_r, 2 * f->s_w, dc, 0, 0, cols,
                           rows);
        } else {
            eb_dw_fan_block(fn, &job, patch, d, pitch, f->dst_r, 4 * f->s_w, 2 * dc,
                           2 * f->s_w, dc, cols >> 1, rows);
            if (cols & 1) { /* the last pixel alone: its pixel 2 is itself, stored again */
                eb_dw_fan_block(fn, &job, patch + (int32_t)(cols - 1) * f->s_w,
                               d + (int32_t)(cols - 1) * dc, pitch, f->dst_r, 0, 0, 0, 0, 1,
                               rows);
            }
        }
        if (count < want) {
            return j0 + count;
        }
    }
    return j0;
}
#endif

/* The tap rows [*lo, *hi) that output rows oy0 .. oy0 + rows - 1 read inside the input (the
 * union of eb_dw_tile_segments' runs: the first row's range reaches lowest, the last's
 * starts highest; every row if none does). */
static EB_NOINLINE void eb_dw_tile_rows(const eb_dw_tf *t, int oy0, int rows, int *lo, int *hi)
{
    int lo0, hi0, lo1, hi1;
    *lo = 0;
    *hi = t->k_h;
    if (eb_dw_tile_inside(t, oy0, rows)) {
        return;
    }
    eb_tap_range(oy0 * t->s_h - t->p_h, t->d_h, t->k_h, t->in_h, &lo0, &hi0);
    eb_tap_range((oy0 + rows - 1) * t->s_h - t->p_h, t->d_h, t->k_h, t->in_h, &lo1, &hi1);
    if ((lo1 < lo0 ? lo1 : lo0) < (hi1 > hi0 ? hi1 : hi0)) {
        *lo = lo1 < lo0 ? lo1 : lo0;
        *hi = hi1 > hi0 ? hi1 : hi0;
    }
}

/* Output channel oc's sums' start (eb_dw_init) into *init and its mode into o, readied in
 * the fast NONE / RELU mode for the row functions, which shift by an immediate c: 8 for the
 * layer's right shift s of 0..8, 16 for 9..16 (where that form is linked). Its sums are
 * scaled by 2^(c - s) -- init here, its tap words by eb_dw_tile_taps -- and shift by c
 * (o->s): exact, the sums only gain zero bits. Returns c - s; 0 leaves the channel as
 * eb_dw_init made it, and one whose scaled init could overflow a sum (eb_dw_imm_limit)
 * takes the generic store (its init the bias). */
static EB_NOINLINE int eb_dw_tile_init(const eb_dw_tf *t, const eb_dw_rq *rq,
                                       const int32_t *bias, int32_t oc, int s, eb_dw_out *o,
                                       int32_t *init)
{
    const int c = eb_dw_imm(s);
    const int32_t b = eb_dw_init(rq, bias, oc, o);
    o->s = s;
    *init = b;
    if ((o->mode != EB_DW_NONE && o->mode != EB_DW_RELU) || !c ||
        !(c == 8 ? EB_DW_TILE8 : EB_DW_TILE16)) {
        return 0;
    }
    if (!eb_dw_imm_fits(b, t->ntaps, c - s)) {
        o->mode = rq->other;
        *init = b - rq->half;
        return 0;
    }
    *init = (int32_t)((uint32_t)b << (c - s));
    o->s = c;
    return c - s;
}

/* The scratch of a layer's jobs: the tap table and one channel's unpacked weights (at most
 * 2 a pair) per channel of a pair. */
typedef struct {
    eb_dw_tap tap[EB_DW_TILE_TAPS];
    int8_t wa[2 * EB_DW_TILE_TAPS], wb[2 * EB_DW_TILE_TAPS];
} eb_dw_table;

/* The job of output channel oc (and oc + 1 when `two`) in frame f: the sums' starts and
 * modes (oa, ob: eb_dw_tile_init), where its outputs go (from `first`, the next channel a
 * plane on), and its tap words for the tap rows [ky_lo, ky_hi) in the table. */
EB_INLINE void eb_dw_tile_job(const eb_dw_tf *f, const eb_conv_params *p,
                              const int8_t *weight, const int32_t *bias, const eb_dw_rq *rq,
                              int32_t oc, int two, int s, eb_dw_out *oa, eb_dw_out *ob,
                              int32_t first, int ky_lo, int ky_hi, eb_dw_table *tb,
                              eb_dw_job *job)
{
    const int32_t taps = (int32_t)EB_DW_CHANS(f) * p->k_h * p->k_w;
    const int sa = eb_dw_tile_init(f, rq, bias, oc, s, oa, &job->init_a);
    const int sb = two ? eb_dw_tile_init(f, rq, bias, oc + 1, s, ob, &job->init_b)
                       : (job->init_b = 0);
    job->oa = oa;
    job->ob = two ? ob : NULL;
    job->ia = first;
    job->ib = first + (int32_t)f->out_h * f->out_w0;
    eb_dw_tile_taps(f, eb_dw_weights(p, weight, oc, taps, tb->wa),
                    two ? eb_dw_weights(p, weight, oc + 1, taps, tb->wb) : NULL, ky_lo,
                    ky_hi, tb->tap, sa, sb);
}

/* The layer by tiles: per group (a depthwise layer's input channel) and tile the patch of
 * its input channels once, then each of its m output channels (weights, packed or not;
 * bias; mode) over it -- per phase of a frame split by its dilation (eb_dw_tile_phase), the
 * phase's columns. Where one job covers a group's output channels (a multiplier of 1, or 2
 * in pairs), its start and tap words are made once a group, for the tap rows any of its
 * tiles reads, not once a tile for that tile's: a 7x7 stride-2 layer on 98-wide rows, 4
 * tiles a channel, built 12 tap rows a channel where 5 serve. */
static EB_NOINLINE void eb_dw_tile_layer(const eb_dw_tf *t, const eb_conv_params *p,
                                         const int8_t *in, int32_t in_plane,
                                         const int8_t *weight, const int32_t *bias,
                                         const eb_dw_rq *rq, const eb_dw_out *o,
                                         int16_t *patch)
{
    eb_dw_table tb;
    eb_dw_out oa = *o, ob = *o;
    eb_dw_tf f = *t;
    eb_dw_job job;
#if EB_DW_FAN
    eb_dw_fan_held fh;
#endif
    const int m = p->out_c / p->groups, pairs = eb_dw_tile_pairs(t); /* per group */
    const int one = m <= (pairs ? 2 : 1), two = pairs && m >= 2; /* one job a group */
    const int32_t out_plane = (int32_t)t->out_h * t->out_w0;
    int32_t in_off = 0, out_off = 0;
    int ph, ic, c, j, oy0, ox0, ky_lo, ky_hi;
    eb_dw_tile_offsets(t, tb.tap); /* the loops' and the fan's */
#if EB_DW_FAN
    fh.oc = -1; /* no records yet (a phase's are its frame's: the same) */
#endif
    for (ph = 0; ph < t->phases; ++ph) {
        if (t->phases > 1) {
            in_off = eb_dw_tile_phase(t, ph, &f, &out_off);
            f.reach = eb_dw_tile_reach(&f); /* the phase's columns */
        }
        if (one) { /* the tap rows any tile reads: the same for every group */
            eb_dw_tile_rows(&f, 0, f.out_h, &ky_lo, &ky_hi);
        }
        for (ic = 0; ic < p->groups; ++ic) { /* a group: its input channels, m outputs */
            if (one) {
                eb_dw_tile_job(&f, p, weight, bias, rq, ic * m, two, o->s, &oa, &ob,
                               ic * m * out_plane + out_off, ky_lo, ky_hi, &tb, &job);
            }
            for (oy0 = 0; oy0 < f.out_h; oy0 += f.rows) {
                const int rows = f.out_h - oy0 < f.rows ? f.out_h - oy0 : f.rows;
                if (!one) {
                    eb_dw_tile_rows(&f, oy0, rows, &ky_lo, &ky_hi);
                }
                for (ox0 = 0; ox0 < f.out_w; ox0 += f.cols) {
                    for (c = 0; c < EB_DW_CHANS(&f); ++c) {
                        EB_DW_FILL(&f)(&f,
                                        in + ((int32_t)ic * EB_DW_CHANS(&f) + c) * in_plane +
                                            in_off,
                                        oy0, ox0, rows, patch + c * f.csz);
                    }
                    j = 0;
#if EB_DW_FAN
                    if (eb_dw_fan_takes(m, f.ntaps) &&
                        o->out8 != NULL && eb_dw_tile_inside(&f, oy0, rows)) {
                        j = eb_dw_fan_tile(&f, p, weight, bias, rq, o->out8 + out_off,
                                           out_plane, patch, tb.tap, (int32_t)ic * m, m, oy0,
                                           ox0, rows, o->s, &fh);
                    }
#endif
                    for (; j < m; j += pairs ? 2 : 1) {
                        const int32_t oc = (int32_t)ic * m + j;
                        if (!one) {
                            eb_dw_tile_job(&f, p, weight, bias, rq, oc, pairs && j + 1 < m,
                                           o->s, &oa, &ob, oc * out_plane + out_off, ky_lo,
                                           ky_hi, &tb, &job);
                        }
                        eb_dw_tile_segments(&f, patch, tb.tap, &job, oy0, ox0, rows);
                    }
                }
            }
        }
    }
}

/* Whether output channel oc goes in one pass with the one before it (its weights w0, its
 * start j->init[0]): both in the same NONE / RELU mode (o: the first's), shifting by the
 * immediate c of eb_dw_imm (8 for s <= 8, 16 for 9..16) instead of the layer's s, so that one
 * SSAT / USAT shifts and saturates an output where an ASR by s came before it (29 -> 25
 * instructions a pass of 2 pixels of 2 channels at 3 taps). Then both channels' weight words
 * and starts go into j scaled by 2^(c - s) (the sums gain zero bits; a lane stays within
 * int16: |w| <= 128, c - s <= 8) and j->c = c. Not for an s outside 0..16 or a start whose
 * scaled sum of 3 k_h products could overflow (eb_dw_imm_limit): the channels then go one at
 * a time. w0 is read before channel oc's weights are unpacked (into the same buffer). */
#if EB_DW3_PAIRS
static int eb_dw3_second(const eb_conv_params *p, const eb_dw_geom *g, const int8_t *weight,
                         const int32_t *bias, const eb_dw_rq *rq, const eb_dw_out *o,
                         int32_t oc, const int8_t *w0, int8_t *unpacked, eb_dw3_job *j)
{
    eb_dw_out ob; /* (only its mode is set) */
    const int c = eb_dw_imm(o->s), t = c - o->s;
    int32_t b;
    if ((o->mode != EB_DW_NONE && o->mode != EB_DW_RELU) || !c) {
        return 0;
    }
    b = eb_dw_init(rq, bias, oc, &ob);
    if (ob.mode != o->mode || /* 3 k_h products: at most 2 k_h pairs */
        !eb_dw_imm_fits(b, 2 * g->k_h, t) || !eb_dw_imm_fits(j->init[0], 2 * g->k_h, t)) {
        return 0;
    }
    eb_dw3_words(w0, g->k_h, t, j->w[0]);
    eb_dw3_words(eb_dw_weights(p, weight, oc, (int32_t)g->k_h * g->k_w, unpacked), g->k_h, t,
                 j->w[1]);
    j->init[0] = (int32_t)((uint32_t)j->init[0] << t);
    j->init[1] = (int32_t)((uint32_t)b << t);
    j->c = c;
    return 1;
}
#else
#define eb_dw3_second(p, g, weight, bias, rq, o, oc, w0, unpacked, j) 0
#endif

/* The depthwise path; 0 (nothing written) when the layer is not one it takes. */
/* One channel (src) of the pool q into dst; returns dst. The reference loops: only a
 * channel whose requantization the padded path does not take comes here. */
static const int8_t *eb_dw_pool_channel(const eb_pool_params *q, const int8_t *src, int8_t *dst)
{
    eb_pool_params one = *q;
    one.c = 1;
    eb_pool2d(&one, src, dst);
    return dst;
}

/* The depthwise path's geometry of p: a 1-D layer laid as a column ([C][L][1]: the same bytes
 * as [C][1][L]) turned into the row it is, so that it runs horizontally. */
static void eb_dw_geom_of(const eb_conv_params *p, eb_dw_geom *g)
{
    if (p->in_w == 1 && p->k_w == 1 && p->pad_w == 0) {
        g->in_h = p->in_w, g->in_w = p->in_h, g->out_h = p->out_w, g->out_w = p->out_h;
        g->k_h = p->k_w, g->k_w = p->k_h, g->stride_h = p->stride_w, g->stride_w = p->stride_h;
        g->pad_h = p->pad_w, g->pad_w = p->pad_h, g->dil_h = p->dil_w, g->dil_w = p->dil_h;
    } else {
        g->in_h = p->in_h, g->in_w = p->in_w, g->out_h = p->out_h, g->out_w = p->out_w;
        g->k_h = p->k_h, g->k_w = p->k_w, g->stride_h = p->stride_h, g->stride_w = p->stride_w;
        g->pad_h = p->pad_h, g->pad_w = p->pad_w, g->dil_h = p->dil_h, g->dil_w = p->dil_w;
    }
}

/* Whether the 3-tap kernels have the shape of a depthwise layer of geometry g (its row-major
 * view, eb_dw_geom_of): a 3x3 or 1-D k3, stride and dilation 1 along the row, rows of at
 * least 4, at most 3 of padding (ops.dw_rows.three_tap). */
EB_INLINE int eb_dw_k3_shape(const eb_dw_geom *g)
{
    return g->k_w == 3 && g->stride_w == 1 && g->dil_w == 1 && (g->k_h == 1 || g->k_h == 3) &&
           g->in_w >= 4 && g->pad_w <= 3;
}

/* The fan against the column kernels on short rows: a depthwise layer of a multiplier of
 * EB_DW_FAN_BETTER_M or more over rows of at most EB_DW_FAN_BETTER_W outputs that the fan
 * takes goes to the tile kernel where its outputs are in the fan's requantization (int8,
 * relu or none, a right shift of 0..16: eb_col_layer asks eb_dw_tile_better with `fan`) --
 * the column kernels set up each output channel's every row (about 160 instructions, and
 * 30 a block of 4 outputs of a 5-tap kernel), the fan loads each pixel pair's taps once for
 * all the channels (1 -> 256 5x1 pad 2x0 on 3 x 12 4.16 -> 2.96 insn/MAC, 1 -> 32 on 6 x 16
 * 3.58 -> 2.02, 4 -> 64 on 6 x 10 5.04 -> 4.63; rows of 20 or more stay: 2 -> 32 5x1 on
 * 6 x 20 3.61 there, 3.69 by the fan; 1 -> 32 on 2 x 64 1.98 and 2.44). Its int32 outputs (a
 * wide layer) the fan does not store: the tile's other loops ran such a layer slower than
 * the column kernels. */
#define EB_DW_FAN_BETTER_M 16
#define EB_DW_FAN_BETTER_W 16

/* Whether the tile kernel runs a depthwise layer the column kernels also take in under 3/4 of
 * their multiply instructions: theirs one SMLAxy per tap, pixel and channel (rows in blocks of
 * 4) -- with multiplier 1 over rows of at least 16 one SMLAD per tap pair (eb_col1_pairs_s1 /
 * _s2; a channel pair's rows count as a tap each: their instructions a tap are about the
 * tile's a pair; a shorter row's set-up costs more than the pairs save) -- the
 * tile's one SMLAD per tap pair (k_h x 14 rows of 11: 5 x 12 against 3 x 12; a Kx1 kernel
 * turned, its taps pair along the frame's rows); with `fan` (outputs in the fan's
 * requantization) only whether the fan runs it on short rows (above): eb_col_layer asks
 * that of a layer eb_col_fits took (the multiplies' rule already 0), and no tile plan is
 * made for a layer whose multiplier or rows rule the fan out (a plan costs about 300
 * instructions a layer). The Python twin is ops.conv_path.tile_better (`forms`: both
 * rules). */
static int eb_dw_tile_better(const eb_conv_params *p, int fan)
{
    eb_dw_geom g;
    eb_dw_tf t;
    int32_t col, tile;
    const int m = p->out_c / p->in_c;
    if (!EB_DW_TILE || p->in_c != p->groups ||
        (fan && !(EB_DW_FAN && m >= EB_DW_FAN_BETTER_M && p->out_w <= EB_DW_FAN_BETTER_W))) {
        return 0; /* (the fan's rule: no plan for the layers it cannot take) */
    }
    eb_dw_geom_of(p, &g);
    if (!eb_dw_tile_plan(&g, 1, &t) || !eb_dw_tile_runs(&t, m)) {
        return 0;
    }
    if (fan) {
        return eb_dw_fan_takes(m, t.ntaps);
    }
    col = (int32_t)(p->out_c == p->in_c && p->out_w >= 16 ? (p->k_h + 1) >> 1 : p->k_h) *
          ((p->out_w + 3) & ~3) * p->out_h;
    tile = (int32_t)t.ntaps * t.phases * ((t.out_w + 3) & ~3) * t.out_h;
    return 4 * (int64_t)tile < 3 * (int64_t)col;
}

/* The line kernel (eb_dw_line.h): a depthwise conv of multiplier 1 whose frame is one row of
 * 4..16 taps at stride 1 (dilation 1 or 2) or 2 (ops.conv_path.line), each output channel's
 * tap pairs in registers over its input row widened once; EB_OPT_NO_DW_LINE leaves it out
 * (and EB_OPT_NO_DW_LINE8 / 16, _D2, _S2 the forms of the immediate 8 / 16, dilation 2,
 * stride 2: the gates of eb_dw_line.h's EB_DW_LINE_FORMS, with those of the output forms). */
#if !defined(EB_OPT_NO_DW_LINE)
#define EB_DW_LINE 1
#ifdef EB_OPT_NO_DW_LINE8
#define EB_DW_LINE_C8(...)
#else
#define EB_DW_LINE_C8(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_DW_LINE16
#define EB_DW_LINE_C16(...)
#else
#define EB_DW_LINE_C16(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_DW_LINE_D2
#define EB_DW_LINE_D2(...)
#else
#define EB_DW_LINE_D2(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_DW_LINE_S2
#define EB_DW_LINE_S2(...)
#else
#define EB_DW_LINE_S2(...) __VA_ARGS__
#endif
#if EB_DW_HAS_RELU
#define EB_DW_LINE_RELU(...) __VA_ARGS__
#else
#define EB_DW_LINE_RELU(...)
#endif
#if EB_DW_HAS_NONE
#define EB_DW_LINE_NONE(...) __VA_ARGS__
#else
#define EB_DW_LINE_NONE(...)
#endif
#include "eb_dw_line.h"

/* The kind of row (eb_dw_line.h) the line kernel runs a layer in frame g in, and the int16
 * its widened row takes (at dilation 2 each phase); 0 for a layer it does not take: one tap
 * row of 4..16 taps (a 3-tap row is the 3-tap kernels') at stride 1 dilation 1 or 2, or at
 * stride 2 dilation 1, rows of at least 2 outputs whose widened row fits
 * EB_DW_TILE_SCRATCH int16 (the plan's twin: ops.conv_path.line). The caller takes
 * multiplier 1 only: with more output channels an input row feeds, the tile kernel's pair
 * loops and fan share its loads (seed 11's 32 -> 128 1x6 ran 3.20 insn/MAC there, 6.10
 * here). */
static int eb_dw_line_kind(const eb_dw_geom *g, int32_t *len)
{
    const int32_t pairs = (g->k_w + 1) >> 1, n = g->out_w;
    int kind = 0;
    if (g->k_h != 1 || g->k_w < 4 || g->k_w > 2 * EB_DW_LINE_PAIRS || n < 2) {
        return 0;
    }
    if (g->stride_w == 1 && g->dil_w == 1) {
        kind = EB_DW_LINE_K1;
        *len = n + 2 * pairs;
    } else if (g->stride_w == 1 && g->dil_w == 2) {
        kind = EB_DW_LINE_K2;
        *len = 2 * (((n + 1) >> 1) + 2 * pairs);
    } else if (g->stride_w == 2 && g->dil_w == 1) {
        kind = EB_DW_LINE_KS2;
        *len = 2 * n + 2 * pairs;
    }
    if (kind == EB_DW_LINE_K2) {
        return *len <= 2 * EB_DW_LINE_PHASE ? kind : 0;
    }
    return kind && *len + 2 <= EB_DW_TILE_SCRATCH ? kind : 0;
}

/* Input row iy of a plane: its columns [lo, hi) of the padded row (from column -pad_w) inside
 * it, row[j] column j; lo = hi = len for a row in the padding. */
static const int8_t *eb_dw_line_span(const eb_dw_geom *g, const int8_t *plane, int iy,
                                     int32_t len, int32_t *lo, int32_t *hi)
{
    const int inside = iy >= 0 && iy < g->in_h;
    *lo = inside ? (g->pad_w < len ? g->pad_w : len) : len;
    *hi = inside && (int32_t)g->pad_w + g->in_w < len ? g->pad_w + g->in_w : len;
    return plane + (int32_t)iy * g->in_w - g->pad_w;
}

/* Input row iy widened to int16 into x (4-byte aligned: the scratch): len values from column
 * -pad_w, 0 outside the row; the row's bytes as eb_dw_tile_fill copies them (4 or more by
 * eb_dw_tile_rows1, fewer a value at a time). */
static EB_NOINLINE EB_NO_MEMSET void eb_dw_line_widen(const eb_dw_geom *g, const int8_t *plane,
                                                      int iy, int32_t len, int16_t *x)
{
    int32_t lo, hi, c;
    const int8_t *row = eb_dw_line_span(g, plane, iy, len, &lo, &hi);
    if (hi - lo >= 4) {
        eb_dw_tile_rows1(x, 0, row, 0, 1, lo, hi, len);
        return;
    }
    for (c = 0; c < len; ++c) {
        x[c] = (int16_t)(c >= lo && c < hi ? row[c] : 0);
    }
}

/* The same at dilation 2 (len even): the padded row's even columns into x, its odd ones into
 * x + EB_DW_LINE_PHASE -- SXTB16 of a word of the row gives the two phases' words. */
static EB_NOINLINE EB_NO_MEMSET void eb_dw_line_widen2(const eb_dw_geom *g,
                                                       const int8_t *plane, int iy,
                                                       int32_t len, int16_t *x)
{
    int16_t *const odd = x + EB_DW_LINE_PHASE;
    int32_t lo, hi, c;
    const int8_t *row = eb_dw_line_span(g, plane, iy, len, &lo, &hi);
    eb_dw_tile_zero(x, 0, (lo + 1) >> 1); /* the columns c < lo: even ones, then odd */
    eb_dw_tile_zero(odd, 0, lo >> 1);
    for (c = lo; (c & 3) && c < hi; ++c) { /* up to a word of each phase */
        (c & 1 ? odd : x)[c >> 1] = row[c];
    }
    for (; c + 4 <= hi; c += 4) {
        const uint32_t v = eb_load32(row + c);
        eb_store32(x + (c >> 1), eb_sxtb16(v));
        eb_store32(odd + (c >> 1), eb_sxtb16_ror8(v));
    }
    for (; c < hi; ++c) {
        (c & 1 ? odd : x)[c >> 1] = row[c];
    }
    eb_dw_tile_zero(x, (c + 1) >> 1, len >> 1); /* the columns c >= hi */
    eb_dw_tile_zero(odd, c >> 1, len >> 1);
}

/* The tap pairs [w(2p), w(2p + 1)] of k <= 16 weights, each times 2^t, into pairs[0 ..
 * (k + 1) / 2) (an odd k's last pair has a 0 second weight). */
static EB_NOINLINE void eb_dw_line_pairs(const int8_t *w, int k, int t, uint32_t *pairs)
{
    int i;
    for (i = 0; 2 * i + 1 < k; ++i) {
        pairs[i] = eb_dw_pair_word(w[2 * i] * (1 << t), w[2 * i + 1] * (1 << t));
    }
    if (k & 1) {
        pairs[i] = eb_dw_pair_word(w[k - 1] * (1 << t), 0);
    }
}

/* The linked form for relu or none, the immediate c, the kind of row; NULL when it is left
 * out. */
typedef void (*eb_dw_line_fn)(const eb_dw_line_job *);
static eb_dw_line_fn eb_dw_line_form(int relu, int c, int kind)
{
#ifdef EB_DW_LINE_ASM
#define EB_DW_LINE_ENTRY(name, relu, c, kind, ...) {relu, c, kind, name},
    static const struct {
        int relu, c, kind;
        eb_dw_line_fn fn;
    } forms[] = {EB_DW_LINE_FORMS(EB_DW_LINE_ENTRY)
        {-1, 0, 0, NULL}};
    int i;
    for (i = 0; forms[i].fn != NULL; ++i) {
        if (forms[i].relu == relu && forms[i].c == c && forms[i].kind == kind) {
            return forms[i].fn;
        }
    }
    return NULL;
#else
    (void)relu;
    (void)c;
    (void)kind;
    return NULL;
#endif
}

/* Outputs [from, end) of a widened row (even end - from; `at` the first's x), by fn or, with
 * none (the host), by the C twin. */
static void eb_dw_line_run(eb_dw_line_job *j, eb_dw_line_fn fn, const int16_t *at,
                           int8_t *from, int8_t *end, int relu, int c, int kind)
{
    j->x = at - 2 * j->skip;
    j->out = from;
    j->end = end;
    if (fn != NULL) {
        fn(j);
    } else {
        eb_dw_line_c(j, relu, c, kind);
    }
}

/* One widened row's n >= 2 outputs into out: at stride 1 dilation 1 (and stride 2) an odd
 * count's last pair overlapping the one before; at dilation 2 output 2i the even phase's
 * i, 2i + 1 the odd one's, and an odd count's last output a pair of its own into a spare
 * word. */
static void eb_dw_line_row(eb_dw_line_job *j, eb_dw_line_fn fn, const int16_t *x, int8_t *out,
                           int32_t n, int relu, int c, int kind)
{
    const int32_t even = n & ~(int32_t)1;
    int8_t spare[2];
    eb_dw_line_run(j, fn, x, out, out + even, relu, c, kind);
    if (even == n) {
        return;
    }
    if (kind != EB_DW_LINE_K2) {
        eb_dw_line_run(j, fn, x + (kind == EB_DW_LINE_K1 ? 1 : 2) * (n - 2), out + n - 2, out + n,
                       relu, c, kind);
    } else {
        eb_dw_line_run(j, fn, x + (n >> 1), spare, spare + 2, relu, c, kind);
        out[n - 1] = spare[0];
    }
}

/* The layer by the line kernel when every output channel requantizes by an immediate (NONE
 * or RELU, eb_dw_imm, a start within eb_dw_imm_limit) and its form is linked; 0, nothing
 * written, otherwise (the plan's twin: ops.conv_path.line_requantizes). Per output channel
 * its pairs and start scaled once, per output row its input row widened into x. */
static int eb_dw_line_layer(const eb_conv_params *p, const eb_dw_geom *g, int kind, int32_t len,
                            const int8_t *in, int32_t in_plane, const int8_t *weight,
                            const int32_t *bias, const eb_dw_rq *rq, const eb_dw_out *o,
                            int16_t *x)
{
    const int pairs = (g->k_w + 1) >> 1, c = eb_dw_imm(o->s);
    const int relu = rq->fast == EB_DW_RELU;
    const int32_t out_plane = (int32_t)g->out_h * g->out_w;
    const eb_dw_line_fn fn = eb_dw_line_form(relu, c, kind);
    eb_dw_line_job j;
    eb_dw_out oo = *o;
    int32_t oc;
    int oy;
    if (!c) {
        return 0;
    }
#ifdef EB_DW_LINE_ASM
    if (fn == NULL) { /* its form left out: the tile kernel's, or the table's */
        return 0;
    }
#endif
    for (oc = 0; oc < p->out_c; ++oc) {
        const int32_t init = eb_dw_init(rq, bias, oc, &oo);
        if ((oo.mode != EB_DW_NONE && oo.mode != EB_DW_RELU) ||
            !eb_dw_imm_fits(init, pairs, c - o->s)) {
            return 0;
        }
    }
    j.skip = EB_DW_LINE_PAIRS - pairs;
    memset(j.w, 0, sizeof j.w); /* w[skip - 1]: 0 (the stride-2 form's first step) */
    for (oc = 0; oc < p->out_c; ++oc) {
        const int t = c - o->s;
        j.init = (int32_t)((uint32_t)eb_dw_init(rq, bias, oc, &oo) << t);
        eb_dw_line_pairs(weight + oc * g->k_w, g->k_w, t, j.w + j.skip);
        for (oy = 0; oy < g->out_h; ++oy) {
            (kind == EB_DW_LINE_K2 ? eb_dw_line_widen2 : eb_dw_line_widen)(
                g, in + oc * in_plane, oy * g->stride_h - g->pad_h, len, x);
            eb_dw_line_row(&j, fn, x, o->out8 + oc * out_plane + (int32_t)oy * g->out_w,
                           g->out_w, relu, c, kind);
        }
    }
    return 1;
}
#else
#define EB_DW_LINE 0
#endif

/* eb_dw_conv_opt, or with q (eb_dw_fusable) on the input of a 2x2 stride-2 max pool: its
 * channels pooled into the padded path's buffer on the way, or into pooled (the pool's
 * output) for a channel that path does not take; 0 (nothing written) when it takes neither
 * the layer nor, with q, the layer through the padded path. */
static int eb_dw_layer(const eb_conv_params *p, const eb_pool_params *q, const int8_t *in,
                       int8_t *pooled, const int8_t *weight, const int32_t *bias, int8_t *out8,
                       int32_t *out32, int8_t *buf, int32_t buf_bytes, const eb_dw3_spec *k)
{
    const eb_dw_sink sink = {out8, out32, out8 ? p->shift : 0, out8 ? p->rounding : 0,
                             out8 ? p->act : 0};
    const eb_dw_sink *const s = &sink;
    eb_dw_entry table[EB_DW_MAX_ENTRIES];
#if EB_DW3_LINE
    eb_dw3_quads quads;
#endif
    int8_t unpacked[4 * EB_DW_MAX_ENTRIES]; /* one channel's taps, when packed */
    eb_dw_seg seg[EB_DW_MAX_SEGS];
    uint32_t w3[5];
    eb_dw_geom g;
    eb_dw_out o;
    int32_t in_plane, out_plane, taps;
    int nw, m, oc, oy, n_seg = 0, band = 0, held = -1;
    int fast;     /* the fast mode (EB_DW_NONE, _RELU or _ABS), 0 if none */
    int tiled;    /* the tile kernel takes the layer (not a 3-tap kind) */
    int k3_shape; /* a layer of the 3-tap kernels' shape */
    eb_dw_tf tf;
    eb_dw_rq rq;

    if (p->in_c != p->groups) { /* in_c == groups == 1 too: a first layer, m = out_c */
        return 0;
    }
    eb_dw_geom_of(p, &g);
    nw = (int)(((int32_t)(g.k_w - 1) * g.dil_w + 4) >> 2); /* words per tap row */
    g.odd = g.k_w > 1 && (g.dil_w & 1);
    g.nf = nw;
    g.nl = 0;
    g.ext = 4 * nw;
    /* a 3-tap layer whose kernels are left out takes the table kernel: the plan claims no
     * tile patch for it (ops.conv_path.dw_tile) */
    k3_shape = eb_dw_k3_shape(&g);
    if (EB_DW_THREE_TAP && k3_shape) {
        g.kind = EB_DW_K3;
    } else if (g.stride_w == 1 && g.dil_w == 1) {
        g.kind = EB_DW_PAIR_D1;
        if (g.k_w & 3) { /* the last entry has no tap at 4i + 3 */
            g.nf = nw - 1;
            g.nl = 1;
        } else {
            g.ext = 4 * nw + 2;
        }
    } else {
        g.kind = g.stride_w == 1 && !g.odd ? EB_DW_PAIR_EVEN : EB_DW_SINGLE;
    }
    tiled = EB_DW_TILE && !k3_shape && q == NULL && buf_bytes >= 2 * EB_DW_TILE_SCRATCH &&
            eb_dw_tile_plan(&g, 1, &tf) && eb_dw_tile_runs(&tf, p->out_c / p->in_c);
#if EB_DW_LINE
    /* the line kernel first: a layer it declines (its biases, its form left out) goes on */
    if (q == NULL && k == NULL && out8 != NULL && p->wbits == 0 && p->out_c == p->in_c &&
        buf_bytes >= 2 * EB_DW_TILE_SCRATCH) {
        int32_t len;
        const int kind = eb_dw_line_kind(&g, &len);
        if (kind) {
            eb_dw_setup(s, (int32_t)g.k_h * g.k_w, &o, &rq);
        }
        if (kind && eb_dw_line_layer(p, &g, kind, len, in, (int32_t)g.in_h * g.in_w, weight,
                                     bias, &rq, &o, (int16_t *)(void *)buf)) {
            return 1;
        }
    }
#endif
    if (g.kind != EB_DW_K3 && !tiled) {
        if (!EB_DW_TABLE) {
            return 0; /* the table kernel is not in this project */
        }
        /* groups (pairs or pixels) that read inside the rows: first tap b = x * stride_w -
         * pad_w with 0 <= b and b + ext <= in_w; a pair's second pixel reads within ext */
        const int32_t last = (int32_t)g.in_w - g.ext + g.pad_w; /* stride_w * x <= last */
        if ((int32_t)g.k_h * nw > EB_DW_MAX_ENTRIES) {
            return 0;
        }
        g.x0 = (g.pad_w + g.stride_w - 1) / g.stride_w;
        if (g.kind != EB_DW_SINGLE) { /* stride_w == 1; pairs (x, x + 1), x <= out_w - 2 */
            const int32_t xmax = last < g.out_w - 2 ? last : g.out_w - 2;
            g.span = xmax >= g.x0 ? 2 * (int)((xmax - g.x0) / 2 + 1) : 0;
        } else {
            const int32_t xmax = last < 0 ? -1 : last / g.stride_w;
            g.span = (int)((xmax < g.out_w - 1 ? xmax : g.out_w - 1) - g.x0 + 1);
            if (g.span < 0) {
                g.span = 0;
            }
        }
    }
    if (EB_DW_THREE_TAP && g.kind == EB_DW_K3) {
        band = eb_dw3_band(&g, buf_bytes);
        n_seg = eb_dw_segments(&g, seg);
    }
    g.pool = q;
    if (q != NULL && (g.kind != EB_DW_K3 || band == 0 || p->in_w == 1)) {
        return 0; /* the fused pool runs on the padded path only */
    }
    in_plane = (int32_t)g.in_h * g.in_w;
    out_plane = (int32_t)g.out_h * g.out_w;
    taps = (int32_t)g.k_h * g.k_w;

    eb_dw_setup(s, taps, &o, &rq);
    fast = rq.fast;
    if (k != NULL && (k->run == NULL || g.kind != EB_DW_K3 || band < g.out_h || !fast ||
                      (int32_t)g.in_w + g.pad_w != k->pitch || g.out_w != k->out_w ||
                      -s->shift != k->s || s->act != k->act)) {
        k = NULL; /* not the layer the spec was made for */
    }
    if (p->wbits != 0 && taps > (int32_t)sizeof unpacked) {
        return 0; /* the im2col path reads packed rows of any length */
    }
    m = p->out_c / p->in_c;
    if (EB_DW_TABLE && g.k_h == 1 && g.k_w == 1 && g.stride_h == 1 && g.stride_w == 1 &&
        g.pad_h == 0 && g.pad_w == 0 && q == NULL) { /* a per-channel scale */
        for (oc = 0; oc < p->out_c; ++oc) {
            const int32_t init = eb_dw_init(&rq, bias, oc, &o);
            eb_dw_scale(in + (int32_t)(oc / m) * in_plane, in_plane,
                        *eb_dw_weights(p, weight, oc, 1, unpacked), init, &o,
                        (int32_t)oc * out_plane);
        }
        return 1;
    }
    if (tiled) {
        eb_dw_tile_layer(&tf, p, in, in_plane, weight, bias, &rq, &o, (int16_t *)(void *)buf);
        return 1;
    }
    for (oc = 0; oc < p->out_c; ++oc) {
        const int8_t *plane = in + (int32_t)(oc / m) * (q ? (int32_t)q->in_h * q->in_w : in_plane);
        const int32_t init = eb_dw_init(&rq, bias, oc, &o);
        const int8_t *w = eb_dw_weights(p, weight, oc, taps, unpacked);
        if (EB_DW_THREE_TAP && g.kind == EB_DW_K3) {
            eb_dw3_weights(w, g.k_h, w3);
            if (band && (o.mode == EB_DW_NONE || o.mode == EB_DW_RELU)) {
                eb_dw3_padded(&g, band, plane,
                              held == oc / m ? EB_DW_HELD_THIS
                              : held >= 0    ? EB_DW_HELD_OTHER
                                             : EB_DW_HELD_NONE,
                              w3, init, &o, (int32_t)oc * out_plane, buf,
                              o.mode == fast ? k : NULL);
                held = g.out_h <= band ? oc / m : -1; /* buf holds its whole plane */
            } else {
                eb_dw3_job j;
                int two = 0;
                j.init[0] = init;
                j.c = 0;
                if (q != NULL) { /* this channel pooled on its own */
                    plane = eb_dw_pool_channel(q, plane, pooled + (int32_t)(oc / m) * in_plane);
                } else if (EB_DW3_PAIRS && oc % m + 1 < m) { /* the same input, next */
                    two = eb_dw3_second(p, &g, weight, bias, &rq, &o, oc + 1, w, unpacked, &j);
                }
                if (!two) {
                    memcpy(j.w[0], w3, sizeof w3);
                }
#if EB_DW3_LINE
                if (!two && g.k_h == 1 && g.out_w >= 4 &&
                    (o.mode == EB_DW_NONE || o.mode == EB_DW_RELU) &&
                    eb_dw3_quads_of(w3, init, o.s, o.mode == EB_DW_RELU, &quads)) {
                    eb_dw3_lines(&g, seg, n_seg, plane, &quads, init, (int32_t)oc * out_plane,
                                 &o);
                    continue;
                }
#endif
                j.index[0] = (int32_t)oc * out_plane;
                j.index[1] = j.index[0] + out_plane;
                eb_dw3_channel(&g, seg, n_seg, plane, &j, two, &o);
                oc += two;
            }
        } else if (EB_DW_TABLE) {
            eb_dw_entries(&g, w, table);
            for (oy = 0; oy < g.out_h; ++oy) {
                eb_dw_row(&g, plane, table, oy, init, &o,
                          (int32_t)oc * out_plane + (int32_t)oy * g.out_w);
            }
        }
    }
    return 1;
}

/* ---- column kernels ----
 * A conv with no width padding (pad_w == 0, stride_w 1 or 2; any k_h, stride_h, dil_h,
 * pad_h) with few outputs per group: depthwise with any multiplier and a kernel one column
 * wide (k_w == 1), or grouped or dense with at most EB_COL_MAX_OUT output channels a group
 * and any kernel width (dil_w: a 1-D conv's row kernel too). An output row is then a
 * weighted sum of whole input rows at offsets -- tap (c, ky, kx) adds w * row(c, oy *
 * stride_h - pad_h + ky * dil_h) from kx * dil_w on -- so there is nothing to copy: 4 neighbouring pixels of a tap row are one word
 * (SXTB16 and SXTB16_ROR8 give [x0, x2] and [x1, x3]; at stride 2, the SXTB16 of the word
 * at x0 and the SXTB16_ROR8 of the word at x3 are the pixels [x0, x2], [x4, x6], never a
 * byte past x6) and each pixel one SMLAxy per output channel, two
 * output channels' weights in one word [w_a, w_b] (SMLAxB, SMLAxT): 7 instructions per 4
 * MACs for one channel, 11 per 8 for two. A per-pixel im2col (the generic path) costs more
 * than the few dot products a dense layer with one or two outputs makes of it, and the tile
 * kernel's patch turns such a kernel on its side. The taps (row offset, weight word) are a
 * table in the caller's scratch (8 bytes a tap: EB_CONV_OPT_SCRATCH holds cin_g * k_h * k_w of
 * them), rebuilt for output rows whose tap rows reach into the padding (those taps are left
 * out). A row whose width is not a multiple of 4 ends with a block overlapping the one
 * before it (its pixels computed twice, the same way): no pixel goes alone. */
#define EB_COL_MAX_OUT 4

typedef struct {
    int32_t off; /* bytes from the block's first pixel in the first tap row in range */
    uint32_t w;  /* [w_a, w_b]: the channel pair's weights (w_b = 0 for one channel) */
} eb_col_tap;

/* A walk over the taps of input channels [0, cin_g) rows [lo, hi) (each k_w columns) of
 * output channels wa (and wb: `two`, a constant where it is inlined) in the weights'
 * order: off (from row lo of input channel 0) steps along a tap row, from a row's end to
 * the next row (ends[0]), from a channel's last row to the next channel's first (ends[1]);
 * the weights skip the rows [0, lo) and [hi, k_h) of each channel (ends[2]). Building the
 * taps by nested loops with a second pass for the second channel's weights, then folding
 * them into pairs, cost about 24 instructions a tap: a 96 -> 1 k5's table took a fifth of
 * its layer. */
typedef struct {
    int32_t off, x, y, k_w, dil_w, rows, ends[3];
    const int8_t *a, *b;
} eb_col_walk;

EB_INLINE int32_t eb_col_walk_of(eb_col_walk *k, const eb_conv_params *p, int cin_g,
                                 const int8_t *wa, const int8_t *wb, int lo, int hi,
                                 int32_t in_plane)
{
    const int32_t row_pitch = (int32_t)p->dil_h * p->in_w;
    k->k_w = k->x = p->k_w;
    k->dil_w = p->dil_w;
    k->rows = k->y = hi - lo;
    k->ends[0] = row_pitch - k->k_w * k->dil_w;
    k->ends[1] = in_plane - k->rows * row_pitch;
    k->ends[2] = (int32_t)(p->k_h - k->rows) * k->k_w;
    k->a = wa + (int32_t)lo * k->k_w;
    k->b = wb ? wb + (int32_t)lo * k->k_w : k->a;
    k->off = 0;
    return (int32_t)cin_g * k->rows * k->k_w;
}

/* The walk's next tap: its offset; its weights into *va (and *vb with `two`). */
EB_INLINE int32_t eb_col_walk_next(eb_col_walk *k, const int two, int32_t *va, int32_t *vb)
{
    const int32_t o = k->off;
    *va = *k->a++;
    if (two) {
        *vb = *k->b++;
    }
    k->off += k->dil_w;
    if (--k->x == 0) {
        k->x = k->k_w;
        k->off += k->ends[0];
        if (--k->y == 0) {
            k->y = k->rows;
            k->off += k->ends[1];
            k->a += k->ends[2];
            k->b += k->ends[2];
        }
    }
    return o;
}

/* eb_col_table's taps (`two`: the second channel's weights beside): input channel 0's by
 * tap row and column, every other channel's a flat loop over its taps, each offset the one
 * a channel before plus the plane (a walk's state in registers cost about 18 instructions
 * a tap, GCC moving it about; a loop per tap row about 18 too on a 3-wide kernel; these
 * about 13). */
EB_INLINE int32_t eb_col_taps_flat(const eb_conv_params *p, int cin_g, const int8_t *wa,
                                   const int8_t *wb, int lo, int hi, int32_t in_plane,
                                   eb_col_tap *t, const int two)
{
    const int32_t k_w = p->k_w, dil_w = p->dil_w, row_pitch = (int32_t)p->dil_h * p->in_w;
    const int32_t khw = (int32_t)p->k_h * k_w, nc = (int32_t)(hi - lo) * k_w;
    const int8_t *a = wa + (int32_t)lo * k_w, *b = two ? wb + (int32_t)lo * k_w : a;
    int32_t c, r, kx, j, row = 0;
    for (r = 0; r < nc; r += k_w, row += row_pitch) {
        int32_t off = row;
        for (kx = 0; kx < k_w; ++kx, ++t, off += dil_w) {
            t->off = off;
            t->w = eb_dw_pair_word(a[r + kx], two ? b[r + kx] : 0);
        }
    }
    for (c = 1; EB_DW_COLUMN_DENSE && c < cin_g; ++c) {
        a += khw;
        b += khw;
        for (j = 0; j < nc; ++j, ++t) {
            t->off = t[-nc].off + in_plane;
            t->w = eb_dw_pair_word(a[j], two ? b[j] : 0);
        }
    }
    return (int32_t)cin_g * nc;
}

/* The taps of input channels [0, cin_g) rows [lo, hi) (each k_w columns) of output
 * channels wa (and wb, or NULL: one channel), offsets from row lo of input channel 0, in
 * the weights' order. Returns their count. */
static EB_NOINLINE int32_t eb_col_table(const eb_conv_params *p, int cin_g, const int8_t *wa,
                                        const int8_t *wb, int lo, int hi, int32_t in_plane,
                                        eb_col_tap *t)
{
    return eb_col_taps_flat(p, cin_g, wa, wb, lo, hi, in_plane, t, wb != NULL);
}

/* eb_col_pair_table of one input channel (a depthwise layer's, rebuilt for each output row
 * its padding trims): a pair a pass. */
static EB_NOINLINE int eb_col_pairs_one(const eb_conv_params *p, const int8_t *wa,
                                        const int8_t *wb, int lo, int hi, uint32_t *t)
{
    const int32_t step = (int32_t)p->dil_h * p->in_w, size = wb ? 4 : 3, o = size - 2;
    uint32_t *e = t;
    int32_t off = 0;
    int k;
    for (k = lo; k < hi; k += 2, e += size, off += 2 * step) {
        const int last = k + 1 == hi; /* the last tap alone: weight 0 its second */
        e[0] = eb_dw_pair_word(wa[k], last ? 0 : wa[k + 1]);
        if (wb) {
            e[1] = eb_dw_pair_word(wb[k], last ? 0 : wb[k + 1]);
        }
        e[o] = (uint32_t)off;
        e[o + 1] = (uint32_t)(last ? off : off + step);
    }
    return (int)((e - t) / size);
}

/* eb_col_pair_table's records of several input channels in one pass over the taps
 * (eb_col_walk; `two`: a constant, the second channel's words beside). */
EB_INLINE int32_t eb_col_pairs_walked(const eb_conv_params *p, int cin_g, const int8_t *wa,
                                      const int8_t *wb, int lo, int hi, int32_t in_plane,
                                      uint32_t *t, const int two)
{
    const int32_t size = two ? 4 : 3;
    eb_col_walk k;
    const int32_t n = eb_col_walk_of(&k, p, cin_g, wa, wb, lo, hi, in_plane);
    int32_t j, o0, o1, a0, a1, b0 = 0, b1 = 0;
    for (j = 0; j + 2 <= n; j += 2, t += size) {
        o0 = eb_col_walk_next(&k, two, &a0, &b0);
        o1 = eb_col_walk_next(&k, two, &a1, &b1);
        t[0] = eb_dw_pair_word(a0, a1);
        if (two) {
            t[1] = eb_dw_pair_word(b0, b1);
        }
        t[size - 2] = (uint32_t)o0;
        t[size - 1] = (uint32_t)o1;
    }
    if (n & 1) { /* the last tap alone: twice, weight 0 the second time */
        o0 = eb_col_walk_next(&k, two, &a0, &b0);
        t[0] = eb_dw_pair_word(a0, 0);
        if (two) {
            t[1] = eb_dw_pair_word(b0, 0);
        }
        t[size - 2] = t[size - 1] = (uint32_t)o0;
    }
    return (n + 1) >> 1;
}

/* ... where every row of the kernel is inside (the weights in turn, channel after channel):
 * the first two channels walked, the records after them the weights' next pairs and the
 * offsets of the records two channels before on by two planes (about 7 instructions a tap
 * where the walk takes 10). */
EB_INLINE int32_t eb_col_pairs_walk(const eb_conv_params *p, int cin_g, const int8_t *wa,
                                    const int8_t *wb, int lo, int hi, int32_t in_plane,
                                    uint32_t *t, const int two)
{
    const int32_t size = two ? 4 : 3, nc = (int32_t)p->k_h * p->k_w, n = cin_g * nc;
    const int32_t back = nc * size, step = 2 * in_plane;
    const int8_t *a = wa + 2 * nc, *b = two ? wb + 2 * nc : a;
    int32_t j;
    if (lo != 0 || hi != p->k_h || cin_g <= 2) {
        return eb_col_pairs_walked(p, cin_g, wa, wb, lo, hi, in_plane, t, two);
    }
    t += size * eb_col_pairs_walked(p, 2, wa, wb, lo, hi, in_plane, t, two);
    for (j = 2 * nc; j + 2 <= n; j += 2, t += size, a += 2, b += 2) {
        t[0] = eb_dw_pair_word(a[0], a[1]);
        if (two) {
            t[1] = eb_dw_pair_word(b[0], b[1]);
        }
        t[size - 2] = t[size - 2 - back] + (uint32_t)step;
        t[size - 1] = t[size - 1 - back] + (uint32_t)step;
    }
    if (n & 1) { /* the last tap alone: twice, weight 0 the second time */
        t[0] = eb_dw_pair_word(a[0], 0);
        if (two) {
            t[1] = eb_dw_pair_word(b[0], 0);
        }
        t[size - 2] = t[size - 1] = t[size - 2 - back] + (uint32_t)step;
    }
    return (n + 1) >> 1;
}

/* eb_col_table's taps in pairs, in its order, for the rows by hand (eb_col1_pairs_s1 / _s2,
 * eb_col2_pairs_s1): a record of the pair's weight words -- [wa(t0), wa(t1)] and, with a second
 * channel, [wb(t0), wb(t1)] -- and the two taps' offsets (an odd count's last pair: the last
 * tap twice, weight 0 the second time). Returns the pairs' count. */
static EB_NOINLINE int eb_col_pair_table(const eb_conv_params *p, int cin_g,
                                         const int8_t *wa, const int8_t *wb, int lo, int hi,
                                         int32_t in_plane, uint32_t *t)
{
    if (cin_g == 1 || !EB_DW_COLUMN_DENSE) { /* (k_w 1) */
        return eb_col_pairs_one(p, wa, wb, lo, hi, t);
    }
    return (int)(wb ? eb_col_pairs_walk(p, cin_g, wa, wb, lo, hi, in_plane, t, 1)
                    : eb_col_pairs_walk(p, cin_g, wa, wb, lo, hi, in_plane, t, 0));
}

/* A pair table's weight words (`size` words a record: 3, one channel; 4, two) rewritten for
 * output channels wa (wb) whose n taps are their whole kernel, in the weights' order: the
 * offsets, the same for every channel (relative to its group's input), are kept. Four
 * weights a load, split into two pairs by SXTB16 and packing, where building the table
 * takes about 20 instructions a tap -- over again for each channel pair of a layer whose
 * rows use it once or a few times (a 1-D conv's one row). */
static EB_NOINLINE void eb_col_pair_weights(const int8_t *wa, const int8_t *wb, int32_t n,
                                            uint32_t *t)
{
    const int32_t size = wb ? 4 : 3;
    int32_t j;
    for (j = 0; j + 4 <= n; j += 4, t += 2 * size) {
        const uint32_t v = eb_load32(wa + j), lo = eb_sxtb16(v), hi = eb_sxtb16_ror8(v);
        t[0] = eb_pack_lo(lo, hi);    /* [w0, w1] */
        t[size] = eb_pack_hi(lo, hi); /* [w2, w3] */
        if (wb) {
            const uint32_t u = eb_load32(wb + j), ulo = eb_sxtb16(u), uhi = eb_sxtb16_ror8(u);
            t[1] = eb_pack_lo(ulo, uhi);
            t[size + 1] = eb_pack_hi(ulo, uhi);
        }
    }
    for (; j < n; j += 2, t += size) { /* the last 1..3 (weight 0 past the end) */
        t[0] = eb_dw_pair_word(wa[j], j + 1 < n ? wa[j + 1] : 0);
        if (wb) {
            t[1] = eb_dw_pair_word(wb[j], j + 1 < n ? wb[j + 1] : 0);
        }
    }
}

/* A tap's offset and weight word: one LDRD on the M4 (GCC does not pair the loads itself for
 * this core). */
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__) && defined(__thumb2__)
#define EB_COL_LOAD_TAP(e, off, w) \
    __asm__("ldrd %0, %1, [%2]" : "=r"(off), "=r"(w) : "r"(e), "m"(*(const eb_col_tap *)(e)))
#else
#define EB_COL_LOAD_TAP(e, off, w) ((off) = (e)->off, (w) = (e)->w)
#endif

/* One tap e of 4 pixels from q into the sums of channel a (w's bottom half) and, with two,
 * channel b (top half): stride 1, one word [x0 x1 x2 x3]; stride 2, two ([x0 . x2 .] and
 * [. x4 . x6] from x3). */
#define EB_COL_TAP(e)                                                                        \
    do {                                                                                     \
        int32_t off;                                                                         \
        uint32_t w, lo, hi;                                                                  \
        EB_COL_LOAD_TAP(e, off, w);                                                          \
        if (s == 1) {                                                                        \
            const uint32_t v = eb_load32(q + off);                                           \
            lo = eb_sxtb16(v);      /* [x0, x2] */                                           \
            hi = eb_sxtb16_ror8(v); /* [x1, x3] */                                           \
        } else {                                                                             \
            lo = eb_sxtb16(eb_load32(q + off));           /* [x0, x2]: pixels 0, 1 */        \
            hi = eb_sxtb16_ror8(eb_load32(q + off + 3)); /* [x4, x6]: pixels 2, 3 */        \
        }                                                                                    \
        a0 = eb_smlabb(lo, w, a0);                                                           \
        a1 = s == 1 ? eb_smlabb(hi, w, a1) : eb_smlatb(lo, w, a1);                           \
        a2 = s == 1 ? eb_smlatb(lo, w, a2) : eb_smlabb(hi, w, a2);                           \
        a3 = eb_smlatb(hi, w, a3);                                                           \
        if (two) {                                                                           \
            b0 = eb_smlabt(lo, w, b0);                                                       \
            b1 = s == 1 ? eb_smlabt(hi, w, b1) : eb_smlatt(lo, w, b1);                       \
            b2 = s == 1 ? eb_smlatt(lo, w, b2) : eb_smlabt(hi, w, b2);                       \
            b3 = eb_smlatt(hi, w, b3);                                                       \
        }                                                                                    \
    } while (0)

/* Two channels' taps [e, end) (a whole number of pairs, at least one) of 4 pixels from q on
 * the M4: GCC keeps the 8 sums, the 2 pointers and the tap's 3 words in registers only when
 * told (its C spills two sums a tap); end is read from the stack. Per tap pair 24 + 3
 * instructions at stride 1 (LDRD, LDR, 2 SXTB16, 8 SMLAxy a tap), 28 + 3 at stride 2 (an
 * ADD and a second LDR a tap). */
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__) && defined(__thumb2__) && \
    defined(__OPTIMIZE__) && !defined(EB_OPT_PORTABLE)
#define EB_COL2_ASM 1
#define EB_COL2_MACS                                                                         \
    "smlabb %[a0], %[lo], %[w], %[a0]\n\t"                                                   \
    "smlabt %[b0], %[lo], %[w], %[b0]\n\t"
/* A tap's 4 pixels at stride 1 (one word) or 2 (the words at x0 and x3) into lo, hi. */
#define EB_COL_LD_S1                                                                         \
    "ldrd %[lo], %[w], [%[e]], #8\n\t"                                                       \
    "ldr %[lo], [%[q], %[lo]]\n\t"                                                           \
    "sxtb16 %[hi], %[lo], ror #8\n\t"                                                        \
    "sxtb16 %[lo], %[lo]\n\t"
#define EB_COL_LD_S2                                                                         \
    "ldrd %[lo], %[w], [%[e]], #8\n\t"                                                       \
    "add %[lo], %[q], %[lo]\n\t"                                                             \
    "ldr %[hi], [%[lo], #3]\n\t"                                                             \
    "ldr %[lo], [%[lo]]\n\t"                                                                 \
    "sxtb16 %[hi], %[hi], ror #8\n\t"                                                        \
    "sxtb16 %[lo], %[lo]\n\t"
#define EB_COL2_S1                                                                           \
    EB_COL_LD_S1 EB_COL2_MACS                                                                \
    "smlabb %[a1], %[hi], %[w], %[a1]\n\t"                                                   \
    "smlatb %[a2], %[lo], %[w], %[a2]\n\t"                                                   \
    "smlatb %[a3], %[hi], %[w], %[a3]\n\t"                                                   \
    "smlabt %[b1], %[hi], %[w], %[b1]\n\t"                                                   \
    "smlatt %[b2], %[lo], %[w], %[b2]\n\t"                                                   \
    "smlatt %[b3], %[hi], %[w], %[b3]\n\t"
#define EB_COL2_S2                                                                           \
    EB_COL_LD_S2 EB_COL2_MACS                                                                \
    "smlatb %[a1], %[lo], %[w], %[a1]\n\t"                                                   \
    "smlabb %[a2], %[hi], %[w], %[a2]\n\t"                                                   \
    "smlatb %[a3], %[hi], %[w], %[a3]\n\t"                                                   \
    "smlatt %[b1], %[lo], %[w], %[b1]\n\t"                                                   \
    "smlabt %[b2], %[hi], %[w], %[b2]\n\t"                                                   \
    "smlatt %[b3], %[hi], %[w], %[b3]\n\t"
#define EB_COL2_LOOP(body)                                                                   \
    do {                                                                                     \
        uint32_t lo, hi, w;                                                                  \
        __asm__ volatile("1:\n\t" body body "ldr %[w], %[end]\n\t"                          \
                         "cmp %[e], %[w]\n\t"                                                \
                         "bne 1b\n\t"                                                        \
                         : EB_ASM_SUMS8,                                                      \
                           [e] "+r"(e), [lo] "=&r"(lo), [hi] "=&r"(hi), [w] "=&r"(w)         \
                         : [q] "r"(q), [end] "m"(end2)                                       \
                         : "cc", "memory");                                                  \
    } while (0)
/* One channel's, from 4 sums, with the end in a register: per tap 8 instructions at stride
 * 1 (LDRD, LDR, 2 SXTB16, 4 SMLAxB), 10 at stride 2, where GCC's C took 10 and 12.5. */
#define EB_COL1_S1                                                                           \
    EB_COL_LD_S1                                                                             \
    "smlabb %[a0], %[lo], %[w], %[a0]\n\t"                                                   \
    "smlabb %[a1], %[hi], %[w], %[a1]\n\t"                                                   \
    "smlatb %[a2], %[lo], %[w], %[a2]\n\t"                                                   \
    "smlatb %[a3], %[hi], %[w], %[a3]\n\t"
#define EB_COL1_S2                                                                           \
    EB_COL_LD_S2                                                                             \
    "smlabb %[a0], %[lo], %[w], %[a0]\n\t"                                                   \
    "smlatb %[a1], %[lo], %[w], %[a1]\n\t"                                                   \
    "smlabb %[a2], %[hi], %[w], %[a2]\n\t"                                                   \
    "smlatb %[a3], %[hi], %[w], %[a3]\n\t"
#define EB_COL1_LOOP(body)                                                                   \
    do {                                                                                     \
        uint32_t lo, hi, w;                                                                  \
        __asm__ volatile("1:\n\t" body body "cmp %[e], %[end]\n\t"                          \
                         "bne 1b\n\t"                                                        \
                         : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3),       \
                           [e] "+r"(e), [lo] "=&r"(lo), [hi] "=&r"(hi), [w] "=&r"(w)         \
                         : [q] "r"(q), [end] "r"(end2)                                       \
                         : "cc", "memory");                                                  \
    } while (0)
#else
#define EB_COL2_ASM 0
#endif

/* Two channels' whole output row on the M4 (eb_col_row's NONE / RELU modes): the block loop,
 * the tap loop and the stores in one naked function, the 8 sums in r0-r7 (their start by one
 * LDM from an 8-word block of the frame), the tap pointer r8, the block's input lr, a tap's
 * (or a pair's) words r9-r11 (r9-r12), the end r12; the job's copy on the stack above the
 * sums' block. The C block loop around EB_COL2_LOOP spent about 87 instructions a block
 * beside its taps (spilled sums and pointers, the stores' set-up); here about 40. Blocks of
 * 4 pixels along the row, the last overlapping the one before where out_w is no multiple of
 * 4 (the block count kept less one: one SUBS tells the next block, the step back and the
 * row's end apart). At least one tap: an odd count enters the tap loop at its second. */
#if EB_COL2_ASM && EB_DW_COLUMN && (EB_DW_HAS_RELU || EB_DW_HAS_NONE)
#define EB_COL_ROW_ASM 1
typedef struct {
    int32_t init_a, init_b;     /* 0, 4: the sums' start */
    const eb_col_tap *tap, *end; /* 8, 12: the taps */
    int8_t *da, *db;            /* 16, 20: the next block's outputs (advanced) */
    int32_t s, flags;           /* 24, 28: the right shift; bit 0: relu (USAT #7), else none;
                                   bit 1: an odd count of tap pairs (the one-channel
                                   functions'; the two channels' tell it from their tap
                                   pointers, r7 being a sum); bit 2: the one-channel
                                   functions' last block of a row is 2 pixels (back and
                                   oback then step back to it) */
    int32_t n;                  /* 32: the row's blocks left after the current one */
    int32_t back, oback;        /* 36, 40: bytes the input and the outputs step back before the
                                   last block (it overlaps the one before) */
    const int8_t *row;          /* 44: the first block's first pixel of the first tap row */
    int32_t rows, nb, rstep;    /* 48, 52, 56: rows left after the current one (all their
                                   taps inside the input: the same table), a row's blocks
                                   less one (n's start), bytes from a row's input to the
                                   next's; the outputs of a row follow the last's */
    int32_t ostep;              /* 60: the two-row functions' outputs from a row pair to
                                   the next (eb_col_rows2); the others' do not read it (a
                                   16-word job: two LDM / STM copy it) */
} eb_col_job;

/* One tap of 4 pixels at stride 2 (the words at x0 and x3) into r9 [x0, x2] and r10 [x4, x6],
 * the tap's weight word r11: the two channels' rows at stride 2 (eb_col2_row_s2). */
#define EB_COL_TAP_LD2                                                                       \
    "ldrd r9, r11, [r8], #8\n\t"                                                             \
    "add r9, lr, r9\n\t"                                                                     \
    "ldr r10, [r9, #3]\n\t"                                                                  \
    "ldr r9, [r9]\n\t"                                                                       \
    "sxtb16 r10, r10, ror #8\n\t"                                                            \
    "sxtb16 r9, r9\n\t"
#define EB_COL_TAP2                                                                          \
    EB_COL_TAP_LD2                                                                           \
    "smlabb r0, r9, r11, r0\n\tsmlabt r4, r9, r11, r4\n\t"                                   \
    "smlatb r1, r9, r11, r1\n\tsmlabb r2, r10, r11, r2\n\t"                                  \
    "smlatb r3, r10, r11, r3\n\tsmlatt r5, r9, r11, r5\n\t"                                  \
    "smlabt r6, r10, r11, r6\n\tsmlatt r7, r10, r11, r7\n\t"
/* Two taps of the channel pair at stride 1 (eb_col_pair_table's records [wa, wb, off0,
 * off1]): the taps' words at x0 (2 LDR), joined row by row (PKHBT / PKHTB: bytes [t0 t0 t1
 * t1]) and split by SXTB16 into each pixel's [x(t0), x(t1)], one SMLAD a pixel and channel:
 * 20 instructions per 2 taps of 4 pixels where a tap at a time took 12 a tap. r9-r12 are the
 * pair's words (the end is then reloaded from the stack). */
#define EB_COL_PAIR1                                                                         \
    "ldrd r9, r10, [r8, #8]\n\t"                                                             \
    "ldr r9, [lr, r9]\n\t"                                                                   \
    "ldr r10, [lr, r10]\n\t"                                                                 \
    "pkhbt r11, r9, r10, lsl #16\n\t"                                                        \
    "pkhtb r10, r10, r9, asr #16\n\t"                                                        \
    "sxtb16 r9, r11\n\t"                                                                     \
    "sxtb16 r11, r11, ror #8\n\t"                                                            \
    "ldr r12, [r8]\n\t"                                                                      \
    "smlad r0, r9, r12, r0\n\tsmlad r1, r11, r12, r1\n\t"                                    \
    "ldr r12, [r8, #4]\n\t"                                                                  \
    "smlad r4, r9, r12, r4\n\tsmlad r5, r11, r12, r5\n\t"                                    \
    "sxtb16 r9, r10\n\t"                                                                     \
    "sxtb16 r10, r10, ror #8\n\t"                                                            \
    "smlad r6, r9, r12, r6\n\tsmlad r7, r10, r12, r7\n\t"                                    \
    "ldr r12, [r8], #16\n\t"                                                                 \
    "smlad r2, r9, r12, r2\n\tsmlad r3, r10, r12, r3\n\t"
/* The column functions' step to the next row at a row's end: rows left (the job's copy at
 * sp + rows; r0, a sum's register, is free there) down by one, else `done`; n (at sp + n)
 * back to the row's blocks less one, the input pointer lr from the row's start (at sp +
 * row) on by rstep; the outputs go on from where the row left them. EB_COL_NEXT_ROW_R11
 * leaves n in r11 (the stride-1 one-channel rows keep their block count there). */
#define EB_COL_NEXT_ROW_R11(rows, row, done)                                                 \
    "ldr r0, [sp, #" rows "]\n\t"                                                            \
    "cbz r0, " done "\n\t"                                                                   \
    "subs r0, r0, #1\n\t"                                                                    \
    "str r0, [sp, #" rows "]\n\t"                                                            \
    "ldrd r11, r12, [sp, #" rows " + 4]\n\t"                                                 \
    "ldr lr, [sp, #" row "]\n\t"                                                             \
    "add lr, lr, r12\n\t"                                                                    \
    "str lr, [sp, #" row "]\n\t"
#define EB_COL_NEXT_ROW(rows, n, row, done)                                                  \
    EB_COL_NEXT_ROW_R11(rows, row, done) "str r11, [sp, #" n "]\n\t"
/* The two channels' function: an odd count of taps (pairs: `odd` the bit of a record's
 * size) enters the loop at its second; `end` reloads the end where the taps take r12. */
#define EB_COL_ROW_FN(name, TAP, step, odd, end)                                             \
    static __attribute__((naked, noinline)) void name(const eb_col_job *job                 \
                                                      __attribute__((unused)))              \
    {                                                                                        \
        __asm__ volatile("push {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                  \
                         "sub sp, sp, #96\n\t"                                              \
                         "ldr lr, [r0, #44]\n\t"                                            \
                         "add r12, sp, #32\n\t"                                             \
                         "ldmia r0!, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                   \
                         "stmia r12!, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                  \
                         "ldmia r0, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                    \
                         "stmia r12, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                   \
                         "ldrd r1, r5, [sp, #32]\n\t"                                       \
                         "mov r2, r1\n\tmov r3, r1\n\tmov r4, r1\n\t"                        \
                         "mov r6, r5\n\tmov r7, r5\n\tmov r8, r5\n\t"                        \
                         "stmia sp, {r1, r2, r3, r4, r5, r6, r7, r8}\n"                      \
                         "1:\n\t"                                                            \
                         "ldmia sp, {r0, r1, r2, r3, r4, r5, r6, r7}\n\t"                    \
                         "ldrd r8, r12, [sp, #40]\n\t"                                      \
                         "sub r9, r12, r8\n\t"                                              \
                         "tst r9, " odd "\n\t"                                              \
                         "bne 3f\n"                                                          \
                         "2:\n\t" TAP                                                        \
                         "3:\n\t" TAP end                                                    \
                         "cmp r8, r12\n\t"                                                  \
                         "bne 2b\n\t"                                                       \
                         "ldrd r8, r12, [sp, #56]\n\t" EB_ASM_ASR4("r0", "r1", "r2", "r3",   \
                                                                   "r8")                     \
                             EB_ASM_ASR4("r4", "r5", "r6", "r7", "r8")                       \
                         "tst r12, #1\n\t"                                                  \
                         "beq 4f\n\t" EB_ASM_SAT4("usat", "#7", "r0", "r1", "r2", "r3")     \
                             EB_ASM_SAT4("usat", "#7", "r4", "r5", "r6", "r7")               \
                         "b 5f\n"                                                            \
                         "4:\n\t" EB_ASM_SAT4("ssat", "#8", "r0", "r1", "r2", "r3")         \
                             EB_ASM_SAT4("ssat", "#8", "r4", "r5", "r6", "r7")               \
                         "5:\n\t"                                                            \
                         "ldrd r9, r10, [sp, #48]\n\t"                                      \
                         "strb r1, [r9, #1]\n\tstrb r2, [r9, #2]\n\tstrb r3, [r9, #3]\n\t"   \
                         "strb r0, [r9], #4\n\t"                                            \
                         "strb r5, [r10, #1]\n\tstrb r6, [r10, #2]\n\tstrb r7, [r10, #3]\n\t" \
                         "strb r4, [r10], #4\n\t"                                           \
                         "add lr, lr, #" step "\n\t"                                        \
                         "strd r9, r10, [sp, #48]\n\t"                                      \
                         EB_DW_NEXT_BLOCK("64", "1b", "6f") EB_DW_WALK2("68")                \
                         "b 1b\n"                                                            \
                         "6:\n\t" EB_COL_NEXT_ROW("80", "64", "76", "7f")                     \
                         "b 1b\n"                                                            \
                         "7:\n\t"                                                            \
                         "add sp, sp, #96\n\t"                                              \
                         "pop {r4, r5, r6, r7, r8, r9, r10, r11, pc}");                     \
    }
EB_COL_ROW_FN(eb_col2_pairs_s1, EB_COL_PAIR1, "4", "#16", "ldr r12, [sp, #44]\n\t")
#if EB_DW_COLUMN_S2
EB_COL_ROW_FN(eb_col2_row_s2, EB_COL_TAP2, "8", "#8", "")
#endif

/* One channel's row by tap pairs (eb_col_pair_table's records [w, off0, off1]): the two taps'
 * words joined row by row (PKHBT / PKHTB: [t0 t0 t1 t1] bytes) and split by SXTB16 into each
 * pixel's [x(t0), x(t1)], one SMLAD a pixel against the pair's weight word. Stride 1: the
 * words at x0, 13 instructions per 2 taps of 4 pixels; stride 2: at x0 and x3 (r10: the
 * block's input at x3; SXTB16 ROR 8 from there), 17 -- where a tap at a time took 8 and 10
 * a tap. The 14 registers hold the sums (r0-r3), the pair and its words (r4-r7, r9, r11),
 * the pairs' pointer and end (r8, r12), the block's input (lr; at stride 2 r10 at x3, `x3`
 * sets it a block); the job's copy on the stack, above the sums' start. An odd count of
 * pairs enters the loop at its second. */
#define EB_COL1_PAIR1                                                                        \
    "ldmia r8!, {r4, r5, r6}\n\t"                                                            \
    "ldr r5, [lr, r5]\n\t"                                                                   \
    "ldr r6, [lr, r6]\n\t"                                                                   \
    "pkhbt r7, r5, r6, lsl #16\n\t"                                                          \
    "pkhtb r6, r6, r5, asr #16\n\t"                                                          \
    "sxtb16 r5, r7\n\t"                                                                      \
    "sxtb16 r7, r7, ror #8\n\t"                                                              \
    "smlad r0, r5, r4, r0\n\tsmlad r1, r7, r4, r1\n\t"                                       \
    "sxtb16 r5, r6\n\t"                                                                      \
    "sxtb16 r6, r6, ror #8\n\t"                                                              \
    "smlad r2, r5, r4, r2\n\tsmlad r3, r6, r4, r3\n\t"
#define EB_COL1_PAIR2                                                                        \
    "ldmia r8!, {r4, r5, r6}\n\t"                                                            \
    "ldr r7, [lr, r5]\n\t"                                                                   \
    "ldr r9, [lr, r6]\n\t"                                                                   \
    "ldr r5, [r10, r5]\n\t"                                                                  \
    "ldr r6, [r10, r6]\n\t"                                                                  \
    "pkhbt r11, r7, r9, lsl #16\n\t"                                                         \
    "pkhtb r9, r9, r7, asr #16\n\t"                                                          \
    "sxtb16 r11, r11\n\t"                                                                    \
    "sxtb16 r9, r9\n\t"                                                                      \
    "smlad r0, r11, r4, r0\n\tsmlad r1, r9, r4, r1\n\t"                                      \
    "pkhbt r11, r5, r6, lsl #16\n\t"                                                         \
    "pkhtb r6, r6, r5, asr #16\n\t"                                                          \
    "sxtb16 r11, r11, ror #8\n\t"                                                            \
    "sxtb16 r6, r6, ror #8\n\t"                                                              \
    "smlad r2, r11, r4, r2\n\tsmlad r3, r6, r4, r3\n\t"
/* A last block of 2 pixels (job flag 4: a row of 4 n + 1 or 4 n + 2 outputs, where the
 * last block of 4 would step back over 3 or 2 done): the tap pair's two words read from r10,
 * the block's first byte less 2 (stride 1: bytes 2, 3 of each its pixels') or less 1 (stride
 * 2: bytes 1, 3), so that no byte past the pixels' last tap is read. */
#define EB_COL1_TWO                                                                          \
    "ldmia r8!, {r4, r5, r6}\n\t"                                                            \
    "ldr r5, [r10, r5]\n\t"                                                                  \
    "ldr r6, [r10, r6]\n\t"                                                                  \
    "pkhtb r7, r6, r5, asr #16\n\t"                                                          \
    "sxtb16 r5, r7\n\t"                                                                      \
    "sxtb16 r7, r7, ror #8\n\t"                                                              \
    "smlad r0, r5, r4, r0\n\tsmlad r1, r7, r4, r1\n\t"
#define EB_COL1_TWO_S2                                                                       \
    "ldmia r8!, {r4, r5, r6}\n\t"                                                            \
    "ldr r5, [r10, r5]\n\t"                                                                  \
    "ldr r6, [r10, r6]\n\t"                                                                  \
    "pkhbt r7, r5, r6, lsl #16\n\t"                                                          \
    "pkhtb r6, r6, r5, asr #16\n\t"                                                          \
    "sxtb16 r7, r7, ror #8\n\t"                                                              \
    "sxtb16 r6, r6, ror #8\n\t"                                                              \
    "smlad r0, r7, r4, r0\n\tsmlad r1, r6, r4, r1\n\t"
/* The one-channel functions' entry: the job's 16 words copied to sp + 16, the sums' start
 * 4 times below them, the first row's input in lr. */
#define EB_COL1_ENTER                                                                        \
    "push {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                                        \
    "sub sp, sp, #80\n\t"                                                                    \
    "add r12, sp, #16\n\t"                                                                   \
    "ldmia r0!, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                                         \
    "stmia r12!, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                                        \
    "ldmia r0, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                                          \
    "stmia r12, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                                         \
    "ldr r1, [sp, #16]\n\t"                                                                  \
    "mov r2, r1\n\tmov r3, r1\n\tmov r4, r1\n\t"                                              \
    "stmia sp, {r1, r2, r3, r4}\n\t"                                                         \
    "ldr lr, [sp, #60]\n"
/* A block's start: the 4 sums from their start, the records' pointer r8 and end r12 (then
 * `x3`); an odd record count enters the loop at its second (`second`). */
#define EB_COL1_BLOCK(x3, second)                                                            \
    "ldmia sp, {r0, r1, r2, r3}\n\t"                                                         \
    "ldrd r8, r12, [sp, #24]\n\t" x3 "ldr r9, [sp, #44]\n\t"                                  \
    "tst r9, #2\n\t"                                                                         \
    "bne " second "\n"
/* The 4 sums shifted right by s and saturated (flag bit 0, relu: USAT 7; else SSAT 8), at
 * local labels `ssat` and `done`. */
#define EB_COL1_REQUANT(ssat, done)                                                          \
    "ldrd r4, r5, [sp, #40]\n\t" EB_ASM_ASR4("r0", "r1", "r2", "r3", "r4")                   \
    "tst r5, #1\n\t"                                                                         \
    "beq " ssat "f\n\t" EB_ASM_SAT4("usat", "#7", "r0", "r1", "r2", "r3")                    \
    "b " done "f\n" ssat ":\n\t" EB_ASM_SAT4("ssat", "#8", "r0", "r1", "r2", "r3")          \
    done ":\n\t"
/* A row's last block of 2 pixels (the one-channel functions'): its tap pairs by TWO (an odd
 * count entered at the second), the 2 sums shifted by s (`load` puts it in r4) and
 * saturated by `flags` (bit 0, relu: USAT 7; else SSAT 8), stored at r9 on. */
#define EB_COL1_LAST2(TWO, load, flags)                                                      \
    "8:\n\t" TWO "9:\n\t" TWO                                                                \
    "cmp r8, r12\n\t"                                                                        \
    "bne 8b\n\t" load                                                                        \
    "asr r0, r0, r4\n\tasr r1, r1, r4\n\t"                                                   \
    "tst " flags ", #1\n\t"                                                                  \
    "beq 10f\n\t"                                                                            \
    "usat r0, #7, r0\n\tusat r1, #7, r1\n\t"                                                 \
    "b 11f\n"                                                                                \
    "10:\n\t"                                                                                \
    "ssat r0, #8, r0\n\tssat r1, #8, r1\n"                                                   \
    "11:\n\t"                                                                                \
    "strb r1, [r9, #1]\n\t"                                                                  \
    "strb r0, [r9], #2\n\t"
#define EB_COL1_PAIRS_FN(name, PAIR, step, x3, TWO, back2)                                   \
    static __attribute__((naked, noinline)) void name(const eb_col_job *job                 \
                                                      __attribute__((unused)))              \
    {                                                                                        \
        __asm__ volatile(EB_COL1_ENTER                                                       \
                         "1:\n\t"                                                            \
                         EB_COL1_BLOCK(x3, "3f")                                             \
                         "2:\n\t" PAIR                                                       \
                         "3:\n\t" PAIR                                                       \
                         "cmp r8, r12\n\t"                                                  \
                         "bne 2b\n\t"                                                       \
                         EB_COL1_REQUANT("4", "5")                                           \
                         "ldr r9, [sp, #32]\n\t"                                            \
                         "strb r1, [r9, #1]\n\tstrb r2, [r9, #2]\n\tstrb r3, [r9, #3]\n\t"   \
                         "strb r0, [r9], #4\n\t"                                            \
                         "add lr, lr, #" step "\n\t"                                        \
                         "str r9, [sp, #32]\n\t" EB_DW_NEXT_BLOCK("48", "1b", "6f")          \
                         "ldrd r11, r12, [sp, #52]\n\t"                                     \
                         "add lr, lr, r11\n\t"                                              \
                         "add r9, r9, r12\n\t"                                              \
                         "str r9, [sp, #32]\n\t"                                            \
                         "ldr r11, [sp, #44]\n\t"                                           \
                         "tst r11, #4\n\t"                                                  \
                         "beq 1b\n\t"                                                        \
                         /* the last block, of 2 pixels */                                   \
                         "ldmia sp, {r0, r1}\n\t"                                           \
                         "ldrd r8, r12, [sp, #24]\n\t"                                      \
                         "sub r10, lr, #" back2 "\n\t"                                      \
                         "tst r11, #2\n\t"                                                  \
                         "bne 9f\n"                                                          \
                         EB_COL1_LAST2(TWO, "ldr r4, [sp, #40]\n\t", "r11")                  \
                         "str r9, [sp, #32]\n"                                               \
                         "6:\n\t" EB_COL_NEXT_ROW("64", "48", "60", "7f")                     \
                         "b 1b\n"                                                            \
                         "7:\n\t"                                                            \
                         "add sp, sp, #80\n\t"                                              \
                         "pop {r4, r5, r6, r7, r8, r9, r10, r11, pc}");                     \
    }
/* eb_col1_pairs_s1 as EB_COL1_PAIRS_FN's, with the outputs' pointer (r9) and the blocks
 * left (r11) in registers, not the job's copy (the stride-1 pairs leave r9-r11 free):
 * 4 instructions fewer a block of 4 outputs, a twentieth of a short kernel's block
 * (seed 7's 6x1 depthwise: 3 pairs a block). */
static __attribute__((naked, noinline)) void eb_col1_pairs_s1(const eb_col_job *job
                                                              __attribute__((unused)))
{
    __asm__ volatile(EB_COL1_ENTER
                     "ldr r9, [sp, #32]\n\t"
                     "ldr r11, [sp, #48]\n"
                     "1:\n\t"
                     "ldmia sp, {r0, r1, r2, r3}\n\t"
                     "ldrd r8, r12, [sp, #24]\n\t"
                     "ldr r10, [sp, #44]\n\t"
                     "tst r10, #2\n\t"
                     "bne 3f\n"
                     "2:\n\t" EB_COL1_PAIR1
                     "3:\n\t" EB_COL1_PAIR1
                     "cmp r8, r12\n\t"
                     "bne 2b\n\t"
                     EB_COL1_REQUANT("4", "5")
                     "strb r1, [r9, #1]\n\tstrb r2, [r9, #2]\n\tstrb r3, [r9, #3]\n\t"
                     "strb r0, [r9], #4\n\t"
                     "add lr, lr, #4\n\t"
                     "subs r11, r11, #1\n\t"
                     "bgt 1b\n\t"
                     "bne 6f\n\t"
                     "ldrd r10, r12, [sp, #52]\n\t"
                     "add lr, lr, r10\n\t"
                     "add r9, r9, r12\n\t"
                     "ldr r10, [sp, #44]\n\t"
                     "tst r10, #4\n\t"
                     "beq 1b\n\t"
                     /* the last block, of 2 pixels (r10: 2 bytes before it) */
                     "ldmia sp, {r0, r1}\n\t"
                     "tst r10, #2\n\t"
                     "sub r10, lr, #2\n\t"
                     "ldrd r8, r12, [sp, #24]\n\t"
                     "bne 9f\n"
                     EB_COL1_LAST2(EB_COL1_TWO, "ldrd r4, r5, [sp, #40]\n\t", "r5")
                     "6:\n\t" EB_COL_NEXT_ROW_R11("64", "60", "7f") /* the next row */
                     "b 1b\n"
                     "7:\n\t"
                     "add sp, sp, #80\n\t"
                     "pop {r4, r5, r6, r7, r8, r9, r10, r11, pc}");
}
#if EB_DW_COLUMN_S2
EB_COL1_PAIRS_FN(eb_col1_pairs_s2, EB_COL1_PAIR2, "8", "add r10, lr, #3\n\t", EB_COL1_TWO_S2,
                 "1")
#endif
#endif

/* ---- one channel's rows two at a time ----
 * Two output rows oy and oy + 1 of one channel read the same input rows where the kernel is
 * taller than its stride down the columns (stride_h a multiple of dil_h, s' = stride_h /
 * dil_h kernel rows apart): row oy + 1's tap ky is row oy's tap ky + s'. Over the union of
 * their tap rows -- k_h + s' a kernel column, each with the pair's two weights (row oy's,
 * 0 past its k_h; row oy + 1's, 0 before s') -- a block of 2 pixels of both rows loads each
 * input word once for 4 sums: a pair of union entries is a record [wa(e0), wa(e1)],
 * [wb(e0), wb(e1)], off0, off1 (LDM), the entries' words at the block's first pixel (2
 * LDR) joined row by row (PKHBT / PKHTB) and split by SXTB16 into each pixel's pair, 4
 * SMLAD: 11 instructions per 8 multiplies at stride 2 (10 at 1), where one row's tap pairs
 * take 17 (13) per 8 -- seed 32's 8 -> 1 11x1 stride 2 and 3 -> 3 12x1 stride 2 depthwise
 * spend three quarters of their time there. Taken where the union's records cost less in
 * instructions and in estimated cycles (eb_col_rows2_gains; twin ops.column_rows.gains), on
 * rows with no width padding: each pair's union cut to the rows inside the input (a table
 * for each run of pairs whose cut is the same: the padding's pairs, then the rest; an odd
 * count's last row runs alone). The table is 16 bytes a record from the scratch's start:
 * what the plan claims for it (ops.column_rows.elements). A block's words: the first of a
 * row reads from its first pixel (bytes 0 and 2 at stride 2, 0 and 1 at 1), the others
 * from 1 (2) bytes before it (bytes 1 and 3; 2 and 3), so that no read passes the row's
 * last pixel or precedes its first; a row of odd width ends with a block stepping back
 * over one pixel done. */
#if EB_COL_ROW_ASM && EB_DW_COLUMN_ROWS2
#define EB_COL_ROWS2 1

/* A record's two entries' words from `base` at its offsets (the record's weight words in
 * r4, r5), joined row by row and split into each pixel's pair, 4 SMLAD: sums r0, r1 (row
 * oy's two pixels), r2, r3 (row oy + 1's). At stride 2 (EB_COL_R2_S2) bytes 0 and 2 of
 * each word are the pixels x0, x2 where base is the block's first pixel (a row's first
 * block), bytes 1 and 3 where it is 1 byte before (`ror`: ", ror #8"; the later blocks,
 * base r10); at stride 1 (EB_COL_R2_S1) bytes 0 and 1, by `pkh` PKHBT, or 2 and 3 from 2
 * bytes before, by PKHTB. */
#define EB_COL_R2_LOAD(base)                                                                 \
    "ldmia r8!, {r4, r5, r6, r7}\n\t"                                                        \
    "ldr r6, [" base ", r6]\n\t"                                                             \
    "ldr r7, [" base ", r7]\n\t"
#define EB_COL_R2_MACS                                                                       \
    "smlad r0, r9, r4, r0\n\tsmlad r1, r7, r4, r1\n\t"                                       \
    "smlad r2, r9, r5, r2\n\tsmlad r3, r7, r5, r3\n\t"
#define EB_COL_R2_S2(base, ror)                                                              \
    EB_COL_R2_LOAD(base)                                                                     \
    "pkhbt r9, r6, r7, lsl #16\n\t"                                                          \
    "pkhtb r7, r7, r6, asr #16\n\t"                                                          \
    "sxtb16 r9, r9" ror "\n\t"                                                               \
    "sxtb16 r7, r7" ror "\n\t" EB_COL_R2_MACS
#define EB_COL_R2_S1(base, pkh)                                                              \
    EB_COL_R2_LOAD(base)                                                                     \
    pkh "sxtb16 r7, r9, ror #8\n\t"                                                          \
    "sxtb16 r9, r9\n\t" EB_COL_R2_MACS
#define EB_COL_R2_HEAD2 EB_COL_R2_S2("lr", "")
#define EB_COL_R2_BODY2 EB_COL_R2_S2("r10", ", ror #8")
#define EB_COL_R2_HEAD1 EB_COL_R2_S1("lr", "pkhbt r9, r6, r7, lsl #16\n\t")
#define EB_COL_R2_BODY1 EB_COL_R2_S1("r10", "pkhtb r9, r7, r6, asr #16\n\t")

/* The rows of a job (eb_col_job: init_a, the records tap .. end, da / db the two rows'
 * outputs, s, flags bit 0 relu and bit 1 an odd record count, n the blocks after a row's
 * first, back / oback the last block's step back, row the first row's input, rows the row
 * pairs after the first, nb n's start, rstep the input from a pair to the next, ostep the
 * outputs'): the job's copy on the stack above the sums' start (4 words). */
#define EB_COL_ROWS2_FN(name, HEAD, BODY, step, before)                                      \
    static __attribute__((naked, noinline)) void name(const eb_col_job *job                 \
                                                      __attribute__((unused)))              \
    {                                                                                        \
        __asm__ volatile(EB_COL1_ENTER                                                       \
                         "1:\n\t" /* a row's first block */                                 \
                         EB_COL1_BLOCK("", "3f")                                             \
                         "2:\n\t" HEAD                                                       \
                         "3:\n\t" HEAD                                                       \
                         "cmp r8, r12\n\t"                                                  \
                         "bne 2b\n"                                                          \
                         "4:\n\t" /* the block's 4 outputs */                               \
                         EB_COL1_REQUANT("5", "6")                                           \
                         "ldrd r6, r7, [sp, #32]\n\t"                                       \
                         "strb r1, [r6, #1]\n\tstrb r0, [r6], #2\n\t"                        \
                         "strb r3, [r7, #1]\n\tstrb r2, [r7], #2\n\t"                        \
                         "add lr, lr, #" step "\n\t"                                        \
                         "strd r6, r7, [sp, #32]\n\t" EB_DW_NEXT_BLOCK("48", "11f", "9f")    \
                         "ldrd r11, r12, [sp, #52]\n\t" /* the last: step back */          \
                         "add lr, lr, r11\n\t"                                              \
                         "add r6, r6, r12\n\t"                                              \
                         "add r7, r7, r12\n\t"                                              \
                         "strd r6, r7, [sp, #32]\n"                                          \
                         "11:\n\t" /* a later block */                                      \
                         EB_COL1_BLOCK("sub r10, lr, #" before "\n\t", "8f")                 \
                         "7:\n\t" BODY                                                       \
                         "8:\n\t" BODY                                                       \
                         "cmp r8, r12\n\t"                                                  \
                         "bne 7b\n\t"                                                       \
                         "b 4b\n"                                                            \
                         "9:\n\t" /* the row pair's end: the next pair */                   \
                         "ldr r0, [sp, #64]\n\t"                                            \
                         "cbz r0, 10f\n\t"                                                  \
                         "subs r0, r0, #1\n\t"                                              \
                         "str r0, [sp, #64]\n\t"                                            \
                         "ldrd r11, r12, [sp, #68]\n\t"                                     \
                         "str r11, [sp, #48]\n\t"                                           \
                         "ldr lr, [sp, #60]\n\t"                                            \
                         "add lr, lr, r12\n\t"                                              \
                         "str lr, [sp, #60]\n\t"                                            \
                         "ldr r11, [sp, #76]\n\t"                                           \
                         "ldrd r6, r7, [sp, #32]\n\t"                                       \
                         "add r6, r6, r11\n\t"                                              \
                         "add r7, r7, r11\n\t"                                              \
                         "strd r6, r7, [sp, #32]\n\t"                                       \
                         "b 1b\n"                                                            \
                         "10:\n\t"                                                           \
                         "add sp, sp, #80\n\t"                                              \
                         "pop {r4, r5, r6, r7, r8, r9, r10, r11, pc}");                     \
    }
EB_COL_ROWS2_FN(eb_col1_rows2_s1, EB_COL_R2_HEAD1, EB_COL_R2_BODY1, "2", "2")
#if EB_DW_COLUMN_S2
EB_COL_ROWS2_FN(eb_col1_rows2_s2, EB_COL_R2_HEAD2, EB_COL_R2_BODY2, "4", "1")
#endif

/* One row's instructions by tap pairs (eb_col1_pairs_s1 / _s2): its blocks of 4 pixels
 * (13 or 17 a pair, about 30 more a block; a row of 4 n + 3 ends with one stepping back)
 * and a last block of 2 pixels where 1 or 2 are left (8 or 9 a pair, about 25 more). */
static int32_t eb_col_row_cost(int32_t pairs, int32_t out_w, int s)
{
    const int32_t left = out_w & 3, full = (out_w >> 2) + (left == 3);
    return full * (pairs * (s == 1 ? 13 : 17) + 30) +
           (left == 1 || left == 2 ? pairs * (s == 1 ? 8 : 9) + 25 : 0);
}

/* Whether one channel's rows of p run two at a time: stride_h a multiple of dil_h, a row
 * pair's blocks of 2 pixels by the union's records (10 or 11 instructions each, about 30
 * more a block) under 9/10 of its two rows by tap pairs (eb_col_row_cost: rows of 6
 * outputs, one block of 4 and one of 2, gain where rows of 4 n do not), and the records'
 * estimated cycles (15 or 16: the LDM of 4 words takes 5) at most 94 % of the pairs' (17
 * or 21) -- a record saves fewer cycles than instructions: an 8 -> 1 7x1 stride 2 ran 10 %
 * fewer instructions two rows at a time but 3.7 % more cycles, 9x1 16 % and -2.8 %, 11x1
 * 21 % and -8 %. Twin: ops.column_rows.gains. */
static int eb_col_rows2_gains(const eb_conv_params *p)
{
    const int s1 = p->stride_w == 1;
    const int32_t e = (int32_t)(p->in_c / p->groups) * p->k_w;
    const int32_t records = (e * (p->k_h + p->stride_h / p->dil_h) + 1) >> 1;
    const int32_t pairs = (e * p->k_h + 1) >> 1;
    const int32_t two = ((p->out_w + 1) >> 1) * (records * (s1 ? 10 : 11) + 30);
    const int32_t one = 2 * eb_col_row_cost(pairs, p->out_w, p->stride_w);
    return p->stride_h % p->dil_h == 0 && 10 * two < 9 * one &&
           100 * records * (s1 ? 15 : 16) <= 94 * pairs * (s1 ? 17 : 21) &&
           (s1 || EB_DW_COLUMN_S2);
}

/* The records of output channel w's union rows [lo, hi) (see above; offsets from union row
 * lo of input channel 0) into t; their count. Entries in the order (input channel, union
 * row, kernel column), paired in turn (an odd count's last with itself, weights 0 the
 * second time). */
static EB_NOINLINE int32_t eb_col_rows2_table(const eb_conv_params *p, const int8_t *w,
                                              int32_t in_plane, int lo, int hi, uint32_t *t)
{
    const int cin_g = p->in_c / p->groups, k_h = p->k_h, k_w = p->k_w;
    const int sh = p->stride_h / p->dil_h, dil_w = p->dil_w;
    const int32_t row_pitch = (int32_t)p->dil_h * p->in_w;
    /* an entry's weights as int16 halves of its record's words (h[0], h[2]: the low halves
     * for a pair's first entry, the high for its second), its offset the record's word 2 or
     * 3: the pointers step 1, 7 (halves) and 1, 3 (words) in turn -- no branch an entry,
     * where testing which of the pair it is cost about 50 instructions an entry */
    int16_t *h = (int16_t *)(void *)t;
    int32_t *o = (int32_t *)(void *)t + 2, hs = 1, os = 1, n = 0, c, r, kx;
#define EB_COL_R2_ENTRY(a, b, off)                                                           \
    do {                                                                                     \
        h[0] = (int16_t)(a);                                                                 \
        h[2] = (int16_t)(b);                                                                 \
        *o = (off);                                                                          \
        h += hs;                                                                             \
        hs ^= 6;                                                                             \
        o += os;                                                                             \
        os ^= 2;                                                                             \
    } while (0)
    for (c = 0; c < cin_g; ++c) {
        const int8_t *const wc = w + (int32_t)c * k_h * k_w;
        int32_t off = c * in_plane;
        if (k_w == 1) { /* row oy's weights alone, both rows', row oy + 1's alone */
            for (r = lo; r < hi && r < sh; ++r, off += row_pitch) {
                EB_COL_R2_ENTRY(wc[r], 0, off);
            }
            for (; r < hi && r < k_h; ++r, off += row_pitch) {
                EB_COL_R2_ENTRY(wc[r], wc[r - sh], off);
            }
            for (; r < hi; ++r, off += row_pitch) {
                EB_COL_R2_ENTRY(0, wc[r - sh], off);
            }
            n += hi - lo;
            continue;
        }
        for (r = lo; r < hi; ++r, off += row_pitch) {
            for (kx = 0; kx < k_w; ++kx) {
                EB_COL_R2_ENTRY(r < k_h ? wc[r * k_w + kx] : 0,
                                r >= sh ? wc[(r - sh) * k_w + kx] : 0, off + kx * dil_w);
            }
        }
        n += (int32_t)(hi - lo) * k_w;
    }
#undef EB_COL_R2_ENTRY
    if (n & 1) { /* the last record's second entry: its first again, weights 0 */
        h[0] = h[2] = 0;
        o[0] = o[-1];
    }
    return (n + 1) >> 1;
}

/* The union rows [*lo, returned) of output rows oy, oy + 1 that lie inside the input (rows
 * of the kernel's grid from row oy's first tap row: dil_h apart). */
static int eb_col_rows2_range(const eb_conv_params *p, int oy, int *lo)
{
    const int d = p->dil_h, u = p->k_h + p->stride_h / d;
    const int iy0 = oy * p->stride_h - p->pad_h, last = p->in_h - 1 - iy0;
    const int hi = last < 0 ? 0 : last / d + 1;
    *lo = iy0 < 0 ? (-iy0 + d - 1) / d : 0;
    return hi < u ? hi : u;
}

/* Output rows from oy of one channel (weights w) two at a time, from job (set for the
 * channel by eb_col_asm_of; plane: the channel's group's input, x0 its first column, da row
 * oy's outputs): the pairs whose union rows inside the input are oy's (one table), the rows
 * it ran -- 0 where that union has no row (the caller's one-row path gives the biases). The
 * table overwrites the scratch's taps. */
static EB_NOINLINE int eb_col_rows2(const eb_conv_params *p, const int8_t *w, int32_t in_plane,
                                    uint32_t *t, const eb_col_job *j, const int8_t *plane,
                                    int32_t x0, int8_t *da, int oy)
{
    const int32_t nb = (p->out_w + 1) >> 1;
    eb_col_job job = *j;
    int lo, lo2, pairs = 1, np;
    const int hi = eb_col_rows2_range(p, oy, &lo);
    if (hi <= lo) {
        return 0;
    }
    while (oy + 2 * pairs + 1 < p->out_h && eb_col_rows2_range(p, oy + 2 * pairs, &lo2) == hi &&
           lo2 == lo) {
        ++pairs;
    }
    np = (int)eb_col_rows2_table(p, w, in_plane, lo, hi, t);
    job.tap = (const eb_col_tap *)(const void *)t;
    job.end = (const eb_col_tap *)(const void *)(t + 4 * np);
    job.flags = (j->flags & 1) | (np & 1) << 1;
    job.n = job.nb = nb - 1;
    job.oback = p->out_w - 2 * nb;
    job.back = job.oback * p->stride_w;
    job.da = da;
    job.db = da + p->out_w;
    job.row = plane + (int32_t)(oy * p->stride_h - p->pad_h + lo * p->dil_h) * p->in_w + x0;
    job.rows = pairs - 1;
    job.rstep = 2 * (int32_t)p->stride_h * p->in_w;
    job.ostep = p->out_w;
#if EB_DW_COLUMN_S2
    if (p->stride_w != 1) {
        eb_col1_rows2_s2(&job);
        return 2 * pairs;
    }
#endif
    eb_col1_rows2_s1(&job);
    return 2 * pairs;
}
#else
#define EB_COL_ROWS2 0
#endif

/* One output row of one channel (a) or two (a, b): sums from init_a / init_b over the n taps
 * from row, two taps a loop pass; stored at ia / ib of oa / ob. */
EB_INLINE void eb_col_run(const int8_t *row, const eb_col_tap *tap, int n, int out_w,
                          int32_t init_a, int32_t init_b, const eb_dw_out *oa,
                          const eb_dw_out *ob, int32_t ia, int32_t ib, const int s,
                          const int two)
{
    const eb_col_tap *const end2 = tap + (n & ~1);
    int x;
    for (x = 0; x < out_w; x += 4) {
        const eb_col_tap *e = tap;
        const int8_t *q;
        int32_t a0 = init_a, a1 = init_a, a2 = init_a, a3 = init_a;
        int32_t b0 = init_b, b1 = init_b, b2 = init_b, b3 = init_b;
        if (x > out_w - 4) { /* the last block overlaps the one before (out_w >= 4) */
            x = out_w - 4;
        }
        q = row + s * x;
#if EB_COL2_ASM && !EB_COL_ROW_ASM /* else the naked rows take NONE / RELU: here the rest */
        if (two && e < end2) {
            if (s == 1) {
                EB_COL2_LOOP(EB_COL2_S1);
            } else {
                EB_COL2_LOOP(EB_COL2_S2);
            }
        } else if (!two && e < end2) {
            if (s == 1) {
                EB_COL1_LOOP(EB_COL1_S1);
            } else {
                EB_COL1_LOOP(EB_COL1_S2);
            }
        }
#endif
        for (; e < end2; e += 2) {
            EB_COL_TAP(e);
            EB_COL_TAP(e + 1);
        }
        if (n & 1) {
            EB_COL_TAP(e);
        }
        eb_col_store4(oa, ia + x, a0, a1, a2, a3, 1);
        if (two) {
            eb_col_store4(ob, ib + x, b0, b1, b2, b3, 1);
        }
    }
}

#if EB_COL_ROW_ASM
typedef void (*eb_col_fn)(const eb_col_job *);

/* The output rows [*lo, returned) whose tap rows all lie inside the input; none (0, 0)
 * where a row has outputs whose taps reach into the width padding (eb_col_edge's, a row at
 * a time). */
static int eb_col_inside_rows(const eb_conv_params *p, int width, int *lo)
{
    const int32_t last = (int32_t)p->in_h - 1 - (int32_t)(p->k_h - 1) * p->dil_h + p->pad_h;
    int32_t end = last < 0 ? 0 : last / p->stride_h + 1; /* rows whose last tap row is inside */
    *lo = (p->pad_h + p->stride_h - 1) / p->stride_h;    /* whose first is */
    if (end > p->out_h) {
        end = p->out_h;
    }
    return width == p->out_w && end > *lo ? (int)end : (*lo = 0);
}

/* The function that runs the rows of a channel pair (ob) or of one channel by hand, the job's
 * fields that hold for all of them set: the NONE and RELU modes (both channels in one);
 * else NULL (eb_col_row). */
static eb_col_fn eb_col_asm_of(eb_col_job *job, const eb_conv_params *p, int width,
                               const eb_dw_out *oa, const eb_dw_out *ob, int32_t init_a,
                               int32_t init_b)
{
    const int mode = oa->mode;
    const int32_t nb = (width + 3) >> 2, back = width - 4 * nb; /* -3 .. 0 */
    if (!((EB_DW_HAS_RELU && mode == EB_DW_RELU) || (EB_DW_HAS_NONE && mode == EB_DW_NONE)) ||
        (ob != NULL && ob->mode != mode)) {
        return NULL;
    }
    job->init_a = init_a;
    job->init_b = init_b;
    job->s = oa->s;
    job->flags = mode == EB_DW_RELU;
    job->n = nb - 1;
    job->back = back * p->stride_w;
    job->oback = back;
    job->rows = 0; /* one row a call (eb_col_asm_rows sets more) */

    if (ob == NULL && back <= -2) { /* one channel's last block: 2 pixels, not 4 */
        job->flags |= 4;
        job->back = (back + 2) * p->stride_w;
        job->oback = back + 2;
    }
#if EB_DW_COLUMN_S2
    if (p->stride_w != 1) {
        return ob != NULL ? eb_col2_row_s2 : eb_col1_pairs_s2;
    }
#endif
    return ob != NULL ? eb_col2_pairs_s1 : eb_col1_pairs_s1;
}
#endif

/* eb_col_run with the stride (1, 2: linked with "dw_column_s2") and channel count (1, 2)
 * specialised -- but on the M4, where only the rare modes come here (the naked rows take
 * NONE / RELU), one form of either channel count, compiled for size (motions_speechnet's
 * kernels 300 bytes smaller). */
#if EB_COL_ROW_ASM && defined(__GNUC__) && !defined(__clang__)
#define EB_COL_ROW_ATTR __attribute__((optimize("Os")))
#else
#define EB_COL_ROW_ATTR
#endif
static EB_NOINLINE EB_COL_ROW_ATTR void eb_col_row(const int8_t *row, const eb_col_tap *tap,
                                                   int n, int out_w, int s, int32_t init_a,
                                                   int32_t init_b, const eb_dw_out *oa,
                                                   const eb_dw_out *ob, int32_t ia, int32_t ib)
{
#if EB_COL_ROW_ASM
    eb_col_run(row, tap, n, out_w, init_a, ob ? init_b : 0, oa, ob ? ob : oa, ia, ob ? ib : 0,
               EB_DW_COLUMN_S2 ? s : 1, ob != NULL);
#else
#if EB_DW_COLUMN_S2
    if (s != 1 && ob == NULL) {
        eb_col_run(row, tap, n, out_w, init_a, 0, oa, oa, ia, 0, 2, 0);
        return;
    }
    if (s != 1) {
        eb_col_run(row, tap, n, out_w, init_a, init_b, oa, ob, ia, ib, 2, 1);
        return;
    }
#else
    (void)s;
#endif
    if (ob == NULL) {
        eb_col_run(row, tap, n, out_w, init_a, 0, oa, oa, ia, 0, 1, 0);
    } else {
        eb_col_run(row, tap, n, out_w, init_a, init_b, oa, ob, ia, ib, 1, 1);
    }
#endif
}

/* The outputs of a row whose taps all lie inside the input's width: [*first, returned) --
 * all of them without width padding; with it, the few at either end whose taps reach into
 * it (eb_col_edge's) are left out. */
static int eb_col_inside(const eb_conv_params *p, int *first)
{
    const int s = p->stride_w, last = p->in_w - 1 + p->pad_w - (p->k_w - 1) * p->dil_w;
    const int end = last < 0 ? 0 : last / s + 1;
    *first = (p->pad_w + s - 1) / s;
    return end < p->out_w ? end : p->out_w;
}

/* The im2col/GEMM path's estimated instructions x10 an output and channel (twin:
 * column_edge.gemm_cost): columns of k values, rows of m outputs a group. */
static int32_t eb_dw_gemm_cost(int32_t k, int m)
{
    return 9 * k + 160 + 45 * k / m;
}

/* Whether the tap pairs and eb_col_edge beat the GEMM on a conv of one output a group and
 * several inputs whose rows lie too much in the width padding for the share below (outputs
 * [first, end) inside): estimates x10 a row -- an inside output's multiply 17 at stride 1,
 * 22 at 2, an edge output's tap inside the input 45 (eb_col_edge's loops), the tables 200 a
 * tap over the rows -- against eb_dw_gemm_cost an output, by a third: the GEMM's columns
 * then serve one dot product a pixel (32 -> 1 15x15 stride 2 pad 7 on 27 x 27 rows, 8 of
 * 14 outside, ran 6.27 insn/MAC on the GEMM, 2.56 here). Twin: column_edge.beats_gemm. */
static int eb_col_edge_beats_gemm(const eb_conv_params *p, int first, int end)
{
    const int64_t cin_g = p->in_c / p->groups, k = cin_g * p->k_h * p->k_w;
    int64_t edge = 0, col;
    int x, lo, hi;
    for (x = 0; x < p->out_w; ++x) {
        if (x < first || x >= end) {
            eb_tap_range(x * p->stride_w - p->pad_w, p->dil_w, p->k_w, p->in_w, &lo, &hi);
            edge += hi - lo;
        }
    }
    col = (int64_t)(end - first) * k * (p->stride_w == 1 ? 17 : 22) +
          45 * edge * cin_g * p->k_h + 200 * k / p->out_h;
    return 3 * col < 2 * (int64_t)p->out_w * eb_dw_gemm_cost((int32_t)k, 1);
}

/* Whether the tap pairs from the input take a row of `width` outputs inside (eb_col_inside):
 * at least 4, and at most a quarter of the row outside with one output a group, a sixth
 * with more (eb_col_edge costs about three times as much an output; twin:
 * column_edge.edges_fit) -- or more outside where they beat the GEMM (above). */
static int eb_col_edges_fit(const eb_conv_params *p, int width)
{
    int first, end;
    if (width < 4) {
        return 0;
    }
    if ((p->out_c / p->groups == 1 ? 4 : 6) * (p->out_w - width) <= p->out_w) {
        return 1;
    }
    /* (a model that links neither kernel of several inputs a group runs no such conv on the
     * column kernels: eb_col_takes, eb_dw_group_tile -- the rule left out with them) */
    if (!(EB_DW_COLUMN_DENSE || EB_DW_GROUP) || p->out_c != p->groups || p->in_c == p->groups) {
        return 0;
    }
    end = eb_col_inside(p, &first);
    return eb_col_edge_beats_gemm(p, first, end);
}

/* The copy's rows and columns (padded pixels) of layer p, and its words (one a channel pair
 * and pixel); the records follow EB_CONV_OPT_SCRATCH's table room (eb_kernels_opt.h). */
static int32_t eb_colc_size(const eb_conv_params *p, int32_t *rows, int32_t *cols)
{
    *rows = (int32_t)(p->out_h - 1) * p->stride_h + (int32_t)(p->k_h - 1) * p->dil_h + 1;
    *cols = (int32_t)(p->out_w - 1) * p->stride_w + (int32_t)(p->k_w - 1) * p->dil_w + 1;
    return (int32_t)((p->in_c / p->groups + 1) / 2) * *rows * *cols;
}


/* Whether the column kernels over a copy run p, a conv whose rows lie too much in the width
 * padding for the tap pairs (eb_col_edges_fit), in fewer estimated instructions and cycles
 * than the GEMM would (twin: conv_path.copy_beats_gemm): several inputs a group, padded, the
 * copy within EB_COL_COPY_BYTES (so k <= 2 words: every sum below fits int32), and an
 * output's estimates x10 -- over the copy a multiply 10 (cycles 20), its share of the words
 * copied 65 (95) and of the records written 250 (350) an output channel; on the GEMM
 * eb_dw_gemm_cost, about 1.4 cycles an instruction -- lower: 32 -> 2 1x9 pad 4 on 19-wide
 * rows, 8 outside, ran 2.26 insn/MAC on the GEMM, 1.46 over the copy; 96 -> 4 k9 pad 4 on
 * 9 samples, its 432 records an output channel written for 9 outputs, 15 % more there. */
static int eb_colc_beats_gemm(const eb_conv_params *p)
{
    const int cin_g = p->in_c / p->groups, cout_g = p->out_c / p->groups;
    const int32_t k = (int32_t)cin_g * p->k_h * p->k_w;
    const int32_t outputs = (int32_t)p->out_h * p->out_w * cout_g;
    int32_t rows, cols, words, records, gemm;
    if (cin_g < 2 || (p->pad_h == 0 && p->pad_w == 0)) {
        return 0;
    }
    words = eb_colc_size(p, &rows, &cols);
    if (4 * words > EB_COL_COPY_BYTES) {
        return 0;
    }
    records = ((cin_g + 1) / 2 * p->k_h * p->k_w + 1) / 2 * 2;
    gemm = eb_dw_gemm_cost(k, cout_g);
    return 10 * k + (65 * words + 250 * records * cout_g) / outputs < gemm &&
           10 * (20 * k + (95 * words + 350 * records * cout_g) / outputs) < 14 * gemm;
}

/* Whether the column kernels' shapes cover p, whatever this model links (see above; a
 * depthwise layer the tile kernel runs with fewer multiplies goes there:
 * eb_dw_tile_better): what the other paths' estimates weigh themselves against, as their
 * Python twins do, so that a path is never declined for one that is not linked. Width
 * padding only with several input channels a group, and rows the tap pairs take
 * (eb_col_edges_fit) or rows of 4 outputs or more over the copy where it beats the GEMM (a
 * row mostly in the padding: 32 -> 2 1x9 pad 4 on 19-wide rows, 8 outside, ran im2col) --
 * a rule only the dense column kernels and the group tile's estimate ask of such a conv (a
 * model that links neither leaves it out: the same answers to what it asks). */
static int eb_col_fits(const eb_conv_params *p)
{
    const int cin_g = p->in_c / p->groups, cout_g = p->out_c / p->groups;
    int first;
    const int width = eb_col_inside(p, &first) - first;
    const int fits = cin_g > 1 ? cout_g <= EB_COL_MAX_OUT
                               : p->k_w == 1 && p->pad_w == 0 && /* not a per-channel scale */
                                     !(p->k_h == 1 && p->stride_h == 1 && p->stride_w == 1 &&
                                       p->pad_h == 0);
    const int copied = (EB_DW_COLUMN_DENSE || EB_DW_GROUP) && p->out_w >= 4;
    return fits && (eb_col_edges_fit(p, width) || (copied && eb_colc_beats_gemm(p))) &&
           (p->stride_w == 1 || p->stride_w == 2) && p->wbits == 0 && !eb_dw_tile_better(p, 0);
}

/* Whether the column kernels take p: they cover it and its form is linked. */
static int eb_col_takes(const eb_conv_params *p)
{
    return EB_DW_COLUMN && eb_col_fits(p) &&
           (p->in_c == p->groups || EB_DW_COLUMN_DENSE) &&
           (p->stride_w == 1 || EB_DW_COLUMN_S2);
}

/* A 1x1, stride-1, unpadded conv's planes are contiguous rows: as one row of in_h * in_w
 * (when that fits the parameters' int16), no row's set-up or overlapped last block but
 * the plane's. Returns p itself otherwise. */
static const eb_conv_params *eb_col_flat(const eb_conv_params *p, eb_conv_params *flat)
{
    const int32_t n = (int32_t)p->in_h * p->in_w;
    if (!EB_DW_COLUMN_DENSE || p->k_h != 1 || p->k_w != 1 || p->stride_h != 1 ||
        p->stride_w != 1 || p->pad_h != 0 || p->pad_w != 0 || p->in_h == 1 || n > 32767) {
        return p;
    }
    *flat = *p;
    flat->in_h = flat->out_h = 1;
    flat->in_w = flat->out_w = (int16_t)n;
    return flat;
}

/* The outputs of output row oy of one channel (weights w, sums from init, stored from at in
 * o) outside [first, end) -- those whose taps reach into the width padding -- over the taps
 * inside the input. */
/* acc plus the n >= 4 products x[i] w[i] of two int8 runs: 4 a word (SXTB16 and its ROR 8
 * of both, two SMLAD), the last 1..3 from the words ending at the runs' ends shifted down
 * (no byte read past either run). */
static int32_t eb_col_edge_dot(const int8_t *x, const int8_t *w, int32_t n, int32_t acc)
{
    const int32_t rest = n & 3;
    int32_t i;
    for (i = 0; i + 4 <= n; i += 4) {
        const uint32_t a = eb_load32(x + i), b = eb_load32(w + i);
        acc = eb_smlad(eb_sxtb16(a), eb_sxtb16(b), acc);
        acc = eb_smlad(eb_sxtb16_ror8(a), eb_sxtb16_ror8(b), acc);
    }
    if (rest != 0) {
        const int sh = 8 * (4 - rest);
        const uint32_t a = eb_load32(x + n - 4) >> sh, b = eb_load32(w + n - 4) >> sh;
        acc = eb_smlad(eb_sxtb16(a), eb_sxtb16(b), acc);
        acc = eb_smlad(eb_sxtb16_ror8(a), eb_sxtb16_ror8(b), acc);
    }
    return acc;
}

static EB_NOINLINE void eb_col_edge(const eb_conv_params *p, const int8_t *plane,
                                    const int8_t *w, int32_t init, const eb_dw_out *o,
                                    int32_t at, int oy, int first, int end)
{
    const int cin_g = p->in_c / p->groups, iy0 = oy * p->stride_h - p->pad_h;
    const int32_t in_plane = (int32_t)p->in_h * p->in_w, khw = (int32_t)p->k_h * p->k_w;
    int lo, hi, x, c, ky, kx;
    eb_tap_range(iy0, p->dil_h, p->k_h, p->in_h, &lo, &hi);
    for (x = first > 0 ? 0 : end; x < p->out_w; x = x + 1 == first ? end : x + 1) {
        const int ix0 = x * p->stride_w - p->pad_w;
        int32_t acc = init;
        int klo, khi;
        eb_tap_range(ix0, p->dil_w, p->k_w, p->in_w, &klo, &khi);
        if (EB_DW_COLUMN_DENSE && p->dil_w == 1 && khi - klo >= 4) { /* a kernel row's taps
            * inside: one run of bytes, by words (fewer than 4: 4 channels a pass cost less,
            * seed 11's 96 -> 1 k5 pad 2 on 40 samples 8.5 % more a byte at a time) */
            for (ky = lo; ky < hi; ++ky) {
                const int8_t *r = plane + (int32_t)(iy0 + ky * p->dil_h) * p->in_w + ix0 + klo;
                const int8_t *wr = w + (int32_t)ky * p->k_w + klo;
                for (c = 0; c < cin_g; ++c, r += in_plane, wr += khw) {
                    acc = eb_col_edge_dot(r, wr, khi - klo, acc);
                }
            }
            eb_dw_put(o, at + x, acc);
            continue;
        }
        for (ky = lo; ky < hi; ++ky) {
            for (kx = klo; kx < khi; ++kx) { /* a tap of every input channel: the long loop */
                const int8_t *r =
                    plane + (int32_t)(iy0 + ky * p->dil_h) * p->in_w + ix0 + kx * p->dil_w;
                const int8_t *wr = w + (int32_t)ky * p->k_w + kx;
                for (c = 0; c + 4 <= cin_g; c += 4, r += 4 * in_plane, wr += 4 * khw) {
                    /* 4 channels a pass: their loads at offsets, one loop test (7
                     * instructions a multiply a channel at a time, about 4 here) */
                    acc += (int32_t)r[0] * wr[0] + (int32_t)r[in_plane] * wr[khw] +
                           (int32_t)r[2 * in_plane] * wr[2 * khw] +
                           (int32_t)r[3 * in_plane] * wr[3 * khw];
                }
                for (; c < cin_g; ++c, r += in_plane, wr += khw) {
                    acc += (int32_t)*r * *wr;
                }
            }
        }
        eb_dw_put(o, at + x, acc);
    }
}

#if EB_COL_ROW_ASM
/* fn on the job of output row oy and the rows after it up to `inside` in one call (their
 * taps all inside the input: the same table, no edge outputs); the rows it ran after oy,
 * job->rows left 0. (A function of its own: in eb_col_layer's row loop the batch's fields
 * cost about 80 instructions a call by its register allocation.) */
static EB_NOINLINE int eb_col_asm_rows(eb_col_fn fn, eb_col_job *job, const eb_conv_params *p,
                                       int oy, int inside)
{
    const int rows = inside - oy - 1;
    job->rows = rows;
    job->nb = job->n;
    job->rstep = (int32_t)p->stride_h * p->in_w;
    fn(job);
    job->rows = 0;
    return rows;
}
#endif

#if EB_COL_ROW_ASM && EB_DW_COLUMN_COPY
/* ---- the column kernels over a copy ----
 * A dense or grouped conv of at most EB_COL_MAX_OUT outputs a group reads each input value
 * in k_h k_w taps of each output; by tap pairs from the input (eb_col1_pairs_s1) a tap pair
 * of 4 pixels costs 13 instructions -- 2 LDR, PKHBT / PKHTB, 4 SXTB16 beside its 4 SMLAD --
 * and an output whose taps reach into the width padding about three times an inside one
 * (eb_col_edge). A group's input copied once into the scratch as int16 channel pairs -- word
 * [x(2q), x(2q + 1)] a pixel, the padding zeros, at stride 2 each row's even pixels before
 * its odd ones, so that 4 outputs' pixels of a tap are 4 words in a row -- a tap of a channel
 * pair is a record [weights, offset] (LDRD), an ADD, an LDM of 4 words and 4 SMLAD: 8
 * instructions per 8 multiplies, every output inside, one table a layer; the copy costs
 * about 2 instructions a value (eb_colc_fill). Taken where that estimate is below the tap
 * pairs' with their edges (eb_colc_gains; twin ops.column_copy) and the copy fits
 * EB_COL_COPY_BYTES. */
typedef struct {
    int32_t init;                /* 0: the sums' start */
    const uint32_t *rec, *end;   /* 4, 8: the records, an even count */
    int8_t *out;                 /* 12: the next block's outputs */
    int32_t n;                   /* 16: blocks left after the current one, a row's (nb - 1) */
    int32_t back, oback;         /* 20, 24: bytes the input and outputs step back before the
                                    last block (it overlaps the one before) */
    const uint32_t *base;        /* 28: the first block's first pixel word */
    int32_t s, flags;            /* 32, 36: the right shift; bit 0: relu (USAT #7) */
    int32_t rows, rstep;         /* 40, 44: rows left after the current one; bytes from a
                                    row's last block's end to the next row's first pixel */
    int32_t nb;                  /* 48: n's start */
} eb_colc_job;

/* Whether the copy gains (twin: ops.column_copy.gains): a padded layer (a tiled pass's
 * tiles come unpadded: none takes the copy, and no tiled layer claims it), in estimated
 * instructions and cycles x10 of a group: over the copy a multiply 10 (cycles 20), a word copied 65 (95), a
 * record written 250 (350) an output channel; by the tap pairs from the input a multiply of
 * an output channel run alone 18 (21 at stride 2), of a channel pair 13 (15), an edge output
 * 3 times an inside one and 3000 more (eb_col_edge's loops), a block of 4 outputs of a
 * channel pair 300 -- about 1.4 cycles an instruction. */
static int eb_colc_gains(const eb_conv_params *p, int width)
{
    const int cin_g = p->in_c / p->groups, cout_g = p->out_c / p->groups;
    int32_t rows, cols;
    const int64_t words = eb_colc_size(p, &rows, &cols);
    const int64_t macs = (int64_t)cout_g * cin_g * p->k_h * p->k_w * p->out_h * p->out_w;
    const int64_t records = ((int64_t)(cin_g + 1) / 2 * p->k_h * p->k_w + 1) / 2 * 2;
    const int64_t blocks = (int64_t)p->out_h * ((p->out_w + 3) / 4) * ((cout_g + 1) / 2);
    const int64_t edges = (int64_t)(p->out_w - width) * p->out_h * cout_g;
    const int64_t scale = (int64_t)p->out_w * cout_g; /* the tap pairs' per-channel mix */
    const int per = ((cout_g & 1) * (p->stride_w == 1 ? 18 : 21) +
                     (cout_g & ~1) * (p->stride_w == 1 ? 13 : 15));
    const int64_t old =
        per * macs * (3 * p->out_w - 2 * width) + (300 * blocks + 3000 * edges) * scale;
    return cin_g >= 2 && (p->pad_h > 0 || p->pad_w > 0) && 4 * words <= EB_COL_COPY_BYTES &&
           (10 * macs + 65 * words + 250 * records * cout_g) * scale < old &&
           10 * (20 * macs + 95 * words + 350 * records * cout_g) * scale < 14 * old;
}

/* 4 pixels of a channel pair a pass (q passes) from x (the other channel's at x + db,
 * masked by mb) into the words [x_i y_i] of pixels 0..3, stored by STORE (two STRD): at
 * stride 1 the four in a row at a, at stride 2 pixels 0 and 2 at a, 1 and 3 at b -- 15
 * instructions a pass where GCC's C took 19. */
/* (EB_COL_ROW_ASM's conditions hold: the M4's assembly) */
#define EB_COLC_QUADS(X, DB, MB, Q, PA, PB, STORE)                                             \
    do {                                                                                     \
        uint32_t u_, v_, t0_, t1_, t2_;                                                      \
        __asm__ volatile("1:\n\t"                                                            \
                         "ldr %[v], [%[x], %[db]]\n\t"                                        \
                         "ldr %[u], [%[x]], #4\n\t"                                          \
                         "and %[v], %[v], %[mb]\n\t"                                         \
                         "sxtb16 %[t0], %[u]\n\t"                                            \
                         "sxtb16 %[t1], %[v]\n\t"                                            \
                         "sxtb16 %[u], %[u], ror #8\n\t"                                     \
                         "sxtb16 %[v], %[v], ror #8\n\t"                                     \
                         "pkhbt %[t2], %[t0], %[t1], lsl #16\n\t"                            \
                         "pkhtb %[t1], %[t1], %[t0], asr #16\n\t"                            \
                         "pkhbt %[t0], %[u], %[v], lsl #16\n\t"                              \
                         "pkhtb %[v], %[v], %[u], asr #16\n\t" STORE                         \
                         "subs %[q], %[q], #1\n\t"                                           \
                         "bne 1b\n\t"                                                        \
                         : [u] "=&r"(u_), [v] "=&r"(v_), [t0] "=&r"(t0_), [t1] "=&r"(t1_),   \
                           [t2] "=&r"(t2_), [x] "+r"(X), [q] "+r"(Q), [a] "+r"(PA),           \
                           [b] "+r"(PB)                                                       \
                         : [db] "r"(DB), [mb] "r"(MB)                                        \
                         : "cc", "memory");                                                  \
    } while (0)
/* stride 1: words p0 p1 p2 p3 in a row at a (b unused) */
#define EB_COLC_STORE_S1                                                                     \
    "strd %[t2], %[t0], [%[a]], #16\n\tstrd %[t1], %[v], [%[a], #-8]\n\t"
/* stride 2: p0 p2 to the even phase (a), p1 p3 to the odd one (b) */
#define EB_COLC_STORE_S2 "strd %[t2], %[t1], [%[a]], #8\n\tstrd %[t0], %[v], [%[b]], #8\n\t"

/* One pixel's word of a channel pair (the other channel's at x + db, masked by mb). */
EB_INLINE uint32_t eb_colc_word(const int8_t *x, int32_t db, uint32_t mb)
{
    return eb_pack_lo((uint32_t)(int32_t)x[0], (uint32_t)(int32_t)x[db] & mb);
}

/* One row's n pixels inside the input from x on as words to d on, stride 1. */
static void eb_colc_row_s1(const int8_t *x, int32_t db, uint32_t mb, int32_t n, uint32_t *d)
{
    int32_t q = n >> 2;
    if (q > 0) {
        uint32_t *unused = d;
        EB_COLC_QUADS(x, db, mb, q, d, unused, EB_COLC_STORE_S1);
    }
    for (n &= 3; n > 0; --n, ++x) {
        *d++ = eb_colc_word(x, db, mb);
    }
}

/* The same at stride 2: pixel j (from the row's padded start) to word j / 2 of its phase,
 * the even one at e, the odd one at o; the first pixel's j is `j`. */
static void eb_colc_row_s2(const int8_t *x, int32_t db, uint32_t mb, int32_t n, int32_t j,
                           uint32_t *e, uint32_t *o)
{
    int32_t q;
    if (j & 1) { /* the first pixel odd: start the pairs at the next */
        o[j >> 1] = eb_colc_word(x, db, mb);
        ++x;
        ++j;
        --n;
    }
    e += j >> 1;
    o += j >> 1;
    q = n >> 2;
    if (q > 0) {
        EB_COLC_QUADS(x, db, mb, q, e, o, EB_COLC_STORE_S2);
    }
    for (j = 0, n &= 3; j < n; ++j) { /* pixels alternate: the even one first */
        if (j & 1) {
            o[j >> 1] = eb_colc_word(x + j, db, mb);
        } else {
            e[j >> 1] = eb_colc_word(x + j, db, mb);
        }
    }
}

/* A group's cin_g channels (planes in_plane apart from `plane` on) into the copy as channel
 * pairs (an odd count's last with zeros): a pair's `rows` padded rows of `cols` words after
 * the pair before's, zeros outside the input. */
static EB_NOINLINE EB_NO_MEMSET void eb_colc_fill(const eb_conv_params *p,
                                                       const int8_t *plane, int32_t in_plane,
                                                       int cin_g, int32_t rows, int32_t cols,
                                                       uint32_t *dst)
{
    const int s2 = p->stride_w == 2;
    const int32_t half = s2 ? (cols + 1) >> 1 : cols; /* the even pixels' words */
    const int32_t lo = p->pad_w < cols ? p->pad_w : cols;
    const int32_t hi = p->pad_w + p->in_w < cols ? p->pad_w + p->in_w : cols;
    const int32_t r0 = p->pad_h < rows ? p->pad_h : rows; /* the rows inside: [r0, r1) */
    const int32_t r1 = hi <= lo ? r0 : p->pad_h + p->in_h < rows ? p->pad_h + p->in_h : rows;
    const int32_t pairs = (cin_g + 1) >> 1;
    int32_t c, r, j;
    uint32_t *d = dst;
    /* the zeros first: rows in the height padding whole, the others' width padding (at
     * stride 2 the padding's even pixels' words and odd pixels' ones) */
    const int32_t elo = s2 ? (lo + 1) >> 1 : lo, olo = s2 ? half + (lo >> 1) : 0;
    const int32_t ehi = s2 ? (hi + 1) >> 1 : hi, ohi = s2 ? half + (hi >> 1) : cols;
    for (c = 0; c < pairs; ++c) {
        for (r = 0; r < rows; ++r, d += cols) {
            if (r < r0 || r >= r1) {
                for (j = 0; j < cols; ++j) {
                    d[j] = 0;
                }
                continue;
            }
            for (j = 0; j < elo; ++j) { /* the even phase's (stride 1: all) before */
                d[j] = 0;
            }
            for (j = ehi; j < half; ++j) { /* ... and after */
                d[j] = 0;
            }
            for (j = half; j < olo; ++j) { /* the odd phase's */
                d[j] = 0;
            }
            for (j = ohi; j < cols; ++j) {
                d[j] = 0;
            }
        }
    }
    /* then each pair's rows inside */
    for (c = 0; c < cin_g; c += 2, plane += 2 * in_plane) {
        const int32_t db = c + 1 < cin_g ? in_plane : 0;
        const uint32_t mb = c + 1 < cin_g ? 0xFFFFFFFFu : 0;
        const int8_t *x = plane;
        for (r = r0, d = dst + (c >> 1) * rows * cols + r0 * cols; r < r1;
             ++r, d += cols, x += p->in_w) {
            if (s2) {
                eb_colc_row_s2(x, db, mb, hi - lo, lo, d, d + half);
            } else {
                eb_colc_row_s1(x, db, mb, hi - lo, d + lo);
            }
        }
    }
}

/* Output channel w's records: [weights of channels 2q, 2q + 1 at tap (ky, kx), byte offset
 * of the tap's first pixel word from a block's] (offsets written only with `offsets`; a
 * zero record after an odd count). Returns the records' count, even. */
static EB_NOINLINE int32_t eb_colc_records(const eb_conv_params *p, const int8_t *w,
                                           int32_t rows, int32_t cols, uint32_t *rec,
                                           int offsets)
{
    const int cin_g = p->in_c / p->groups;
    const int32_t khw = (int32_t)p->k_h * p->k_w;
    const int32_t half = p->stride_w == 2 ? (cols + 1) >> 1 : cols;
    uint32_t *r = rec;
    int32_t q, t, ky, kx;
    for (q = 0; q < cin_g; q += 2, w += 2 * khw) {
        const uint32_t mb = q + 1 < cin_g ? 0xFFFFFFFFu : 0;
        const int8_t *wb = q + 1 < cin_g ? w + khw : w;
        for (t = 0; t < khw; ++t, r += 2) {
            r[0] = eb_pack_lo((uint32_t)(int32_t)w[t], (uint32_t)(int32_t)wb[t] & mb);
        }
    }
    for (q = 0, r = rec; offsets && q < cin_g; q += 2) {
        for (ky = 0; ky < p->k_h; ++ky) {
            const int32_t row = (((q >> 1) * rows + ky * p->dil_h) * cols);
            for (kx = 0; kx < p->k_w; ++kx, r += 2) {
                const int32_t x = kx * p->dil_w;
                r[1] = (uint32_t)(4 * (row + (p->stride_w == 2 ? (x & 1 ? half : 0) + (x >> 1)
                                                               : x)));
            }
        }
    }
    t = (int32_t)((cin_g + 1) >> 1) * khw;
    if (t & 1) {
        rec[2 * t] = 0;
        rec[2 * t + 1] = 0;
        ++t;
    }
    return t;
}

/* One output channel's rows over the copy: blocks of 4 pixels (the last overlapping the one
 * before), the 4 sums in r0-r3, a record in r4 / r5 (then its words' address), its 4 pixel
 * words r6-r9, the records r10 to r11, the block's first word r12, the outputs lr; the job
 * on the stack. Two records a pass. */
static __attribute__((naked, noinline)) void eb_colc_rows(eb_colc_job *job
                                                          __attribute__((unused)))
{
    __asm__ volatile(
        "push {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"
        "sub sp, sp, #4\n\t"
        "str r0, [sp]\n\t"
        "ldr r12, [r0, #28]\n\t"
        "ldr lr, [r0, #12]\n"
        "1:\n\t"
        "ldr r4, [sp]\n\t"
        "ldmia r4, {r0, r10, r11}\n\t"
        "mov r1, r0\n\tmov r2, r0\n\tmov r3, r0\n"
        "2:\n\t"
        "ldrd r4, r5, [r10], #8\n\t"
        "add r5, r5, r12\n\t"
        "ldmia r5, {r6, r7, r8, r9}\n\t"
        "smlad r0, r6, r4, r0\n\tsmlad r1, r7, r4, r1\n\t"
        "smlad r2, r8, r4, r2\n\tsmlad r3, r9, r4, r3\n\t"
        "ldrd r4, r5, [r10], #8\n\t"
        "add r5, r5, r12\n\t"
        "ldmia r5, {r6, r7, r8, r9}\n\t"
        "smlad r0, r6, r4, r0\n\tsmlad r1, r7, r4, r1\n\t"
        "smlad r2, r8, r4, r2\n\tsmlad r3, r9, r4, r3\n\t"
        "cmp r10, r11\n\t"
        "bne 2b\n\t"
        "ldr r4, [sp]\n\t"
        "ldrd r5, r6, [r4, #32]\n\t" EB_ASM_ASR4("r0", "r1", "r2", "r3", "r5")
        "tst r6, #1\n\t"
        "beq 3f\n\t" EB_ASM_SAT4("usat", "#7", "r0", "r1", "r2", "r3")
        "b 4f\n"
        "3:\n\t" EB_ASM_SAT4("ssat", "#8", "r0", "r1", "r2", "r3")
        "4:\n\t"
        "strb r1, [lr, #1]\n\tstrb r2, [lr, #2]\n\tstrb r3, [lr, #3]\n\t"
        "strb r0, [lr], #4\n\t"
        "add r12, r12, #16\n\t"
        "ldr r5, [r4, #16]\n\t"
        "subs r5, r5, #1\n\t"
        "str r5, [r4, #16]\n\t"
        "bgt 1b\n\t"
        "bne 5f\n\t"
        "ldrd r5, r6, [r4, #20]\n\t" /* the last block: back */
        "add r12, r12, r5\n\t"
        "add lr, lr, r6\n\t"
        "b 1b\n"
        "5:\n\t"
        "ldr r5, [r4, #40]\n\t" /* the next row */
        "subs r5, r5, #1\n\t"
        "blt 6f\n\t"
        "str r5, [r4, #40]\n\t"
        "ldr r5, [r4, #44]\n\t"
        "add r12, r12, r5\n\t"
        "ldr r5, [r4, #48]\n\t"
        "str r5, [r4, #16]\n\t"
        "b 1b\n"
        "6:\n\t"
        "add sp, sp, #4\n\t"
        "pop {r4, r5, r6, r7, r8, r9, r10, r11, pc}");
}

/* Whether the copy takes layer p (its outputs `width` of a row inside the input): every
 * output channel in the NONE or RELU mode (their sums' start in range) and a gain over the
 * tap pairs where they take its rows. */
static int eb_colc_takes(const eb_conv_params *p, const eb_dw_rq *rq, const int32_t *bias,
                         int width, const eb_dw_out *o)
{
    eb_dw_out t = *o;
    int32_t oc;
    if (eb_col_edges_fit(p, width) && !eb_colc_gains(p, width)) {
        return 0; /* (a row the tap pairs do not take runs over the copy: eb_col_fits) */
    }
    for (oc = 0; oc < p->out_c; ++oc) {
        (void)eb_dw_init(rq, bias, oc, &t);
        if (!((EB_DW_HAS_RELU && t.mode == EB_DW_RELU) ||
              (EB_DW_HAS_NONE && t.mode == EB_DW_NONE))) {
            return 0;
        }
    }
    return 1;
}

/* The layer over the copy (scratch: the records from its start, the copy after
 * EB_CONV_OPT_SCRATCH's table room), a group at a time. */
static EB_NOINLINE void eb_colc_layer(const eb_conv_params *p, const int8_t *in,
                                      const int8_t *weight, const int32_t *bias,
                                      const eb_dw_rq *rq, eb_dw_out *o, int16_t *scratch)
{
    const int cin_g = p->in_c / p->groups, cout_g = p->out_c / p->groups;
    const int32_t taps = (int32_t)cin_g * p->k_h * p->k_w, in_plane = (int32_t)p->in_h * p->in_w;
    const int32_t out_plane = (int32_t)p->out_h * p->out_w;
    const int32_t nb = (p->out_w + 3) >> 2, back = p->out_w - 4 * nb; /* -3 .. 0 */
    uint32_t *const rec = (uint32_t *)(void *)scratch;
    uint32_t *const copy = (uint32_t *)(void *)(scratch + EB_CONV_OPT_SCRATCH(cin_g, p->k_h,
                                                                                p->k_w));
    int32_t rows, cols, n = 0, oc;
    int gi;
    eb_colc_job job;
    (void)eb_colc_size(p, &rows, &cols);
    for (gi = 0; gi < p->groups; ++gi) {
        eb_colc_fill(p, in + (int32_t)gi * cin_g * in_plane, in_plane, cin_g, rows, cols, copy);
        for (oc = (int32_t)gi * cout_g; oc < (int32_t)(gi + 1) * cout_g; ++oc) {
            n = eb_colc_records(p, weight + oc * taps, rows, cols, rec, gi == 0 && n == 0);
            job.init = eb_dw_init(rq, bias, oc, o);
            job.rec = rec;
            job.end = rec + 2 * n;
            job.out = o->out8 + oc * out_plane;
            job.n = job.nb = nb - 1;
            job.back = 4 * back; /* a block's pixels are 4 words at either stride */
            job.oback = back;
            job.base = copy;
            job.s = o->s;
            job.flags = o->mode == EB_DW_RELU;
            job.rows = p->out_h - 1;
            job.rstep = 4 * ((int32_t)p->stride_h * cols - 4 * nb - back);
            eb_colc_rows(&job);
        }
    }
}
#endif

/* The layer p by the column kernels (table: the scratch); 0, nothing written, for a layer
 * they do not take. Not inlined: GCC's code for its row loop was 45 % worse inlined into
 * eb_dw_conv_opt (as it is when a model leaves the other depthwise kernels out). */
static EB_NOINLINE int eb_col_layer(const eb_conv_params *p_, const int8_t *in,
                                    const int8_t *weight, const int32_t *bias, int8_t *out8,
                                    int32_t *out32, eb_col_tap *table)
{
    eb_conv_params flat;
    const eb_conv_params *const p = eb_col_flat(p_, &flat);
    const eb_dw_sink sink = {out8, out32, out8 ? p->shift : 0, out8 ? p->rounding : 0,
                             out8 ? p->act : 0};
    const int cin_g = p->in_c / p->groups, cout_g = p->out_c / p->groups;
    const int32_t taps = (int32_t)cin_g * p->k_h * p->k_w, in_plane = (int32_t)p->in_h * p->in_w;
    const int32_t out_plane = (int32_t)p->out_h * p->out_w;
    eb_dw_out oa, ob;
    eb_dw_rq rq;
    /* the table's rows [tlo, thi), its channels' weights (tw) and record size (tsize: 0 for
     * the taps, eb_col_table) */
    int tlo = -1, thi = -1, np = 0, tsize = -1;
    const int8_t *tw = NULL;
    int gi, j, oy, first;
    const int end = eb_col_inside(p, &first), width = end - first; /* the outputs inside */
#if EB_COL_ROW_ASM
    int first_inside;
    const int inside = eb_col_inside_rows(p, width, &first_inside); /* rows [first_inside, inside) */
#endif
#if EB_COL_ROWS2
    const int rows2 = width == p->out_w && eb_col_rows2_gains(p); /* no width padding */
#endif

    const int32_t x0 = first * p->stride_w - p->pad_w; /* the input column of the first */
    if (!eb_col_takes(p)) {
        return 0;
    }
    eb_dw_setup(&sink, taps, &oa, &rq);
    if (out8 != NULL && (rq.fast == EB_DW_RELU || rq.fast == EB_DW_NONE) && eb_dw_imm(oa.s) &&
        EB_DW_FAN && eb_dw_tile_better(p_, 1)) {
        return 0; /* the fan's short rows (eb_dw_tile_better): the tile kernel next */
    }
#if EB_COL_ROW_ASM && EB_DW_COLUMN_COPY
    if (p->wbits == 0 && eb_colc_takes(p, &rq, bias, width, &oa)) {
        eb_colc_layer(p, in, weight, bias, &rq, &oa, (int16_t *)(void *)table);
        return 1;
    }
#endif
    if (!eb_col_edges_fit(p, width)) {
        return 0; /* a layer only the copy takes (eb_col_fits), not over it here: the next path */
    }
    ob = oa;
    for (gi = 0; gi < p->groups; ++gi) {
        const int8_t *plane = in + (int32_t)gi * cin_g * in_plane;
        for (j = 0; j < cout_g; j += 2) {
            const int32_t oc = (int32_t)gi * cout_g + j;
            const int two = j + 1 < cout_g;
            const int8_t *wa = weight + oc * taps;
            const int32_t init_a = eb_dw_init(&rq, bias, oc, &oa);
            const int32_t init_b = two ? eb_dw_init(&rq, bias, oc + 1, &ob) : 0;
            uint32_t *const words = (uint32_t *)(void *)table; /* the table as pairs */
#if EB_COL_ROW_ASM
            eb_col_job job;
            const eb_col_fn fn =
                eb_col_asm_of(&job, p, width, &oa, two ? &ob : NULL, init_a, init_b);
#if EB_DW_COLUMN_S2
            const int pairs = fn != NULL && fn != eb_col2_row_s2;
#else
            const int pairs = fn != NULL;
#endif
            const int32_t size = two ? 4 : 3; /* words of a pair */
#else
            const int pairs = 0;
            const int32_t size = 0;
            (void)np; /* the pairs' count: the hand-written rows' */
#endif
            for (oy = 0; oy < p->out_h; ++oy) {
                const int iy0 = oy * p->stride_h - p->pad_h;
                int32_t at = oc * out_plane + (int32_t)oy * p->out_w;
                int lo, hi, n;
                const int8_t *row;
#if EB_COL_ROWS2
                if (rows2 && !two && fn != NULL && oy + 1 < p->out_h) {
                    const int ran = eb_col_rows2(p, wa, in_plane, words, &job, plane, x0,
                                                 oa.out8 + at + first, oy);
                    if (ran > 0) {
                        oy += ran - 1;
                        tlo = -1; /* the scratch holds the records now */
                        continue;
                    }
                }
#endif
                eb_tap_range(iy0, p->dil_h, p->k_h, p->in_h, &lo, &hi);
                if (lo != tlo || hi != thi || tw != wa) {
                    if (pairs && lo == tlo && hi == thi && size == tsize && lo == 0 &&
                        hi == p->k_h) { /* the same taps: only the weights differ */
                        eb_col_pair_weights(wa, two ? wa + taps : NULL, taps, words);
                    } else if (pairs) {
                        np = eb_col_pair_table(p, cin_g, wa, two ? wa + taps : NULL, lo, hi,
                                               in_plane, words);
                    } else {
                        eb_col_table(p, cin_g, wa, two ? wa + taps : NULL, lo, hi, in_plane,
                                     table);
                    }
                    tlo = lo;
                    thi = hi;
                    tw = wa;
                    tsize = pairs ? size : 0;
                }
                n = (hi - lo) * cin_g * p->k_w;
                row = (hi > lo ? plane + (int32_t)(iy0 + lo * p->dil_h) * p->in_w : plane) + x0;
                if (EB_DW_COLUMN_DENSE && width < p->out_w) { /* taps in the width padding */
                    eb_col_edge(p, plane, wa, init_a, &oa, at, oy, first, end);
                    if (two) {
                        eb_col_edge(p, plane, wa + taps, init_b, &ob, at + out_plane, oy, first,
                                    end);
                    }
                }
                at += first;
#if EB_COL_ROW_ASM
                if (fn != NULL && n > 0) { /* the row by hand: its taps, outputs and input */
                    /* and the rows after it whose taps lie inside too, with no edge outputs:
                     * one call (a row's set-up here cost about 100 instructions) */

                    job.tap = table;
                    job.end = pairs ? (const eb_col_tap *)(const void *)(words + np * size)
                                    : table + n;
                    job.flags = (job.flags & 5) | ((pairs ? np : n) & 1) << 1;
                    job.da = oa.out8 + at;
                    job.db = two ? ob.out8 + at + out_plane : NULL;
                    job.row = row;
                    if (oy >= first_inside && oy < inside) {
                        oy += eb_col_asm_rows(fn, &job, p, oy, inside);
                    } else {
                        fn(&job); /* (job.rows 0: one row) */
                    }
                    continue;
                }
#endif
                eb_col_row(row, table, n, width, p->stride_w, init_a, init_b, &oa,
                           two ? &ob : NULL, at, at + out_plane);
            }
        }
    }
    return 1;
}

/* ---- dense and grouped convs by the tile kernel ----
 * A conv whose groups have at most EB_DW_GROUP_CHANS input channels runs on the tile kernel
 * when its loops cost less: the patch holds the group's input channels side by side and the
 * tap table spans them (eb_dw_tf.chans), so an output is the same SMLAD sum over tap pairs
 * -- an 8 -> 1 5x1 kernel turned is 24 pairs, one LDR and one SMLAD each along a sliding
 * row, where the column kernels spend 4-5 instructions a tap and the im2col/GEMM path builds
 * 40-value columns for one dot product; 3 -> 32 2x1 turned is 3 pairs a pixel, the fan's.
 * Estimated instructions an output (x10; fitted to the shape benchmark's profiles): the
 * tile's loops by tap pairs n (the fan 10 n + 85, the pair loop 28 n + 60, one channel
 * 30 n + 100; per tile and output channel 12 n + 100 more, its tap table and blocks' set-up,
 * shared by the tile's outputs) and its patch, per input value (ipg s_h s_w an output --
 * the rows between a one-row kernel's at stride 2 not copied -- shared by m outputs;
 * eb_dw_tile_fill_cost) 15 copied along the rows, 30 turned two rows at a time, 45 one; the GEMM by the K values of a column
 * (9 K + 160 + 45 K / m: rows of m outputs), the column kernels by taps (30 a tap at stride
 * 1, 35 at 2). The tile kernel takes a conv at under 4/5 of the path it would otherwise
 * take. The patch is the depthwise layers' EB_DW_TILE_SCRATCH, which a conv claims
 * (eb_dw_group_claims; ops.conv_path.group_claims) when some frame of its channels and
 * kernel could take it, so every tile of it a tiled pass runs is covered. */
#define EB_DW_GROUP_CHANS 8

static int32_t eb_dw_tile_cost(const eb_conv_params *p, int n, int turned, int32_t per_value)
{
    const int m = p->out_c / p->groups;
    /* the frame's tap rows, its stride from row to row and along them */
    const int k_r = turned ? p->k_w : p->k_h, s_r = turned ? p->stride_w : p->stride_h;
    const int s_c = turned ? p->stride_h : p->stride_w;
    const int32_t fill = per_value * (int32_t)(p->in_c / p->groups) *
                         (turned && k_r == 1 ? 1 : s_r) * s_c / m; /* turned: rows read */
    return fill + (eb_dw_fan_takes(m, n) ? 10 * n + 85 : m >= 2 ? 28 * n + 60 : 30 * n + 100);
}

/* The patch's copy per value (x10) in frame t: 15 along the rows (eb_dw_tile_fill); turned
 * (eb_dw_tile_fill_turned), 30 where it copies two patch rows at a time, else 45 (two values
 * a word). */
static int32_t eb_dw_tile_fill_cost(const eb_dw_tf *t)
{
    const int skip = t->k_h == 1 ? t->s_h : 1;
    const int32_t read = t->k_h > 1 ? 2 : t->rows; /* patch rows a tile reads (at least) */
    return !t->turned ? 15 : read >= 2 && skip <= 2 ? 30 : 45;
}

/* The tile's cost per output channel and tile (its tap table, the blocks' set-up: 12 n + 100
 * instructions, x10) spread over the tile's outputs. */
static int32_t eb_dw_tile_fixed(const eb_dw_tf *t)
{
    const int32_t plane = (int32_t)t->out_h * t->out_w, tile = (int32_t)t->rows * t->cols;
    return (120 * (int32_t)t->ntaps + 1000) / (plane < tile ? plane : tile);
}

static int32_t eb_dw_col_cost(int32_t k, int s)
{
    return k * (s == 1 ? 30 : 35);
}

/* Whether the conv claims the tile kernel's patch: not depthwise, at most
 * EB_DW_GROUP_CHANS input channels a group, a kernel of more than one tap, and in the frame of fewer tap pairs (turned or
 * not) under 4/5 of the costlier of the paths it could otherwise take. */
static int eb_dw_group_claims(const eb_conv_params *p)
{
    const int ipg = p->in_c / p->groups, m = p->out_c / p->groups;
    const int32_t k = (int32_t)ipg * p->k_h * p->k_w;
    const int across = p->k_h * eb_dw_npairs(p->k_w, p->dil_w);
    const int down = p->k_w * eb_dw_npairs(p->k_h, p->dil_h);
    const int n = ipg * (across < down ? across : down);
    int32_t other = eb_dw_gemm_cost(k, m);
    if (!EB_DW_TILE || p->groups == p->in_c || ipg > EB_DW_GROUP_CHANS ||
        n > EB_DW_TILE_TAPS || k == ipg) { /* a 1x1 kernel: a tap a pair, half of it 0 */
        return 0;
    }
    if (p->pad_w == 0 && (p->stride_w == 1 || p->stride_w == 2) && m <= EB_COL_MAX_OUT &&
        eb_dw_col_cost(k, p->stride_w) > other) { /* (ipg > 1: any kernel width) */
        other = eb_dw_col_cost(k, p->stride_w);
    }
    return 5 * eb_dw_tile_cost(p, n, 0, 15) < 4 * other;
}

/* The conv p by the tile kernel when it claims it and its frame's loops cost under 4/5 of
 * the column kernels' (where they take it) or the GEMM's; 0, nothing written, otherwise. */
static EB_NOINLINE int eb_dw_group_tile(const eb_conv_params *p, const int8_t *in,
                                        const int8_t *weight, const int32_t *bias,
                                        int8_t *out8, int32_t *out32, int16_t *patch)
{
    const eb_dw_sink sink = {out8, out32, out8 ? p->shift : 0, out8 ? p->rounding : 0,
                             out8 ? p->act : 0};
    const int ipg = p->in_c / p->groups, m = p->out_c / p->groups;
    const int32_t k = (int32_t)ipg * p->k_h * p->k_w;
    eb_dw_geom g;
    eb_dw_tf t;
    eb_dw_out o;
    eb_dw_rq rq;
    int32_t other;
    if (!EB_DW_GROUP || !eb_dw_group_claims(p)) { /* k <= 2 EB_DW_TILE_TAPS then: packed
                                                    * weights unpack into eb_dw_tile_layer's */
        return 0;
    }
    eb_dw_geom_of(p, &g);
    if (!eb_dw_tile_plan(&g, ipg, &t) || !eb_dw_tile_runs(&t, m)) {
        return 0;
    }
    other = eb_col_fits(p) ? eb_dw_col_cost(k, p->stride_w) : eb_dw_gemm_cost(k, m);
    if (5 * (eb_dw_tile_cost(p, t.ntaps, t.turned, eb_dw_tile_fill_cost(&t)) +
              eb_dw_tile_fixed(&t)) >=
        4 * other) {
        return 0;
    }
    eb_dw_setup(&sink, k, &o, &rq);
    eb_dw_tile_layer(&t, p, in, (int32_t)g.in_h * g.in_w, weight, bias, &rq, &o, patch);
    return 1;
}

/* ---- convs of few terms an output ----
 * A stride-1, unpadded conv of 2..EB_DW_FEW_IN terms an output (inputs a group times taps),
 * any outputs a group: a 1x1 of 2..4 inputs a group (3 -> 1, a grouped 4 -> 192, a dense
 * 3 -> 4), a 2x1, 1x2, 1x3 or 2x2 depthwise of any multiplier -- a dot product of at most 4
 * terms at fixed offsets from the output's pixel, which the GEMM pads to 4 and the column
 * and tile kernels run with their per-row and per-tap set-up for a few MACs. Per 4 pixels a
 * term's word split into its lanes [x0 x2], [x1 x3], and each channel's weights; the sums
 * scaled by 2^(16 - s) for a right shift s of 0..16, so that the outputs are their top
 * halves: two PKHTB, two USAT16 and an ORR (NONE: an offset of 128 in the start, an EOR)
 * make the word stored. For s of 9..16 (form 16) the weights carry the scale (SXTB16
 * lanes); for 0..8 (form 8) the weights 2^(8 - s) and the lanes 2^8 -- the bytes in their
 * halves' tops by an AND, where byte stores (an SSAT / USAT and a STRB an output) cost 2
 * instructions more per 4 outputs. One output a group: an output channel at a time, one
 * SMLAxB a MAC (eb_dw_few_one: 3 -> 1 1x1 on 87 x 33 8.6 instructions an output, a 2x1
 * depthwise 6.5). Several: per 4 pixels the terms' lanes paired by PKHBT / PKHTB into
 * [x_a x_b] per pixel once, and each output channel's record [w01 w23 init at] streams past
 * them, one SMLAD per two terms and pixel (eb_dw_few_many: per 4 outputs of a 2-input 1x1
 * group 16 instructions in its loop, 18 in all, where the GEMM's padded rows spent 38 and
 * an output at a time re-split each pixel per output). A kernel one column wide runs each
 * plane as one row (its rows' pixels contiguous), a wider one row by row (at least 4
 * pixels a row); the last block of a row overlaps the one before. One term (a per-channel
 * scale) stays on the table kernel: an output at a time here ran 4.5 instructions an
 * output where it runs 4.2. ops.dw_few.few is the Python twin of eb_dw_few_takes. */
#define EB_DW_FEW_IN 4
#define EB_DW_FEW_CH 32 /* output channels a pass over a group's pixels (records: 512 B of stack) */
/* The stride-2 kernel of 3-wide kernel rows (EB_OPT_NO_DW_S2 leaves it out: such a layer
 * takes the next path). */
#ifdef EB_OPT_NO_DW_S2
#define EB_DW_S2 0
#else
#define EB_DW_S2 1
#endif
/* The small-plane depthwise kernel (EB_OPT_NO_DW_SMALL leaves it out: such a layer takes
 * the next path). */
#ifdef EB_OPT_NO_DW_SMALL
#define EB_DW_SMALL 0
#else
#define EB_DW_SMALL 1
#endif
#ifdef EB_OPT_NO_DW_FEW
#define EB_DW_FEW 0
#else
#define EB_DW_FEW 1
#endif
#if defined(EB_OPT_NO_DW_FEW8) || !EB_DW_FEW
#define EB_DW_FEW8 0
#else
#define EB_DW_FEW8 1
#endif
#if defined(EB_OPT_NO_DW_FEW16) || !EB_DW_FEW
#define EB_DW_FEW16 0
#else
#define EB_DW_FEW16 1
#endif

/* The few-input kernel's view of a conv: its terms in the weights' order (input channel,
 * tap row, tap column) as offsets from an output's first input (off: channel plane, rows
 * and columns; the offset of row dy and column dx apart), and the outputs whose terms all
 * lie inside the input, [y0, y1) x [x0, x1) (stride 1: a pad's rows and columns from each
 * edge); flat: one column wide and no column padding, the rows [y0, y1) one run. */
typedef struct {
    int32_t off[EB_DW_FEW_IN];
    int dy[EB_DW_FEW_IN], dx[EB_DW_FEW_IN];
    int k, y0, y1, x0, x1, flat;
} eb_dw_few_geom;

/* The lesser of a and b, at least lo. */
static int eb_dw_few_clamp(int a, int b, int lo)
{
    const int v = a < b ? a : b;
    return v < lo ? lo : v;
}

static void eb_dw_few_geom_of(const eb_conv_params *p, eb_dw_few_geom *f)
{
    const int ipg = p->in_c / p->groups;
    const int32_t plane = (int32_t)p->in_h * p->in_w;
    int ic, ky, kx, n = 0;
    for (ic = 0; ic < ipg && n + p->k_h * p->k_w <= EB_DW_FEW_IN; ++ic) {
        for (ky = 0; ky < p->k_h; ++ky) {
            for (kx = 0; kx < p->k_w; ++kx, ++n) {
                f->dy[n] = ky * p->dil_h;
                f->dx[n] = kx * p->dil_w;
                f->off[n] = ic * plane + (int32_t)f->dy[n] * p->in_w + f->dx[n];
            }
        }
    }
    for (; n < EB_DW_FEW_IN; ++n) {
        f->off[n] = 0;
        f->dy[n] = f->dx[n] = 0;
    }
    f->k = ipg * p->k_h * p->k_w;
    f->y0 = p->pad_h < p->out_h ? p->pad_h : p->out_h;
    f->y1 = eb_dw_few_clamp(p->in_h + p->pad_h - (p->k_h - 1) * p->dil_h, p->out_h, f->y0);
    f->x0 = p->pad_w < p->out_w ? p->pad_w : p->out_w;
    f->x1 = eb_dw_few_clamp(p->in_w + p->pad_w - (p->k_w - 1) * p->dil_w, p->out_w, f->x0);
    f->flat = p->k_w == 1 && p->pad_w == 0;
}

/* Whether the 3-tap kernels' channel pairs take p (a depthwise of their shape, eb_dw_k3_shape,
 * with a multiplier of 2 or more), which run a 1-D k3 of multiplier 3 faster than the few
 * terms' records (3.31 insn/MAC against 3.42 on 97 samples, tiled). */
/* The shortest 1-D row (or row of a 1x3 kernel) of one channel a group that the 3-tap
 * kernels' quads (eb_dw3_line: about 5.9 instructions an output) take from this kernel
 * (about 8.3): their set-up a row and a channel costs more (a 1x3 on 9x9 6.0 -> 8.8 insn/MAC
 * there, 1-D k3 on 12 samples 9.6 -> 14.0; on 1,000 samples 2.82 -> 2.04). Twin:
 * ops.dw_rows.DW3_LINE_MIN. */
#define EB_DW3_LINE_MIN 64

static int eb_dw_few_three_tap(const eb_conv_params *p)
{
    eb_dw_geom g;
    eb_dw_geom_of(p, &g);
    return p->groups == p->in_c &&
           (p->out_c >= 2 * p->in_c || (g.k_h == 1 && g.out_w >= EB_DW3_LINE_MIN)) &&
           eb_dw_k3_shape(&g);
}

/* Whether the kernel takes p: stride 1, 2..EB_DW_FEW_IN terms, unpacked weights, padding
 * only along a flat conv's columns (its padding's rows run as rows with the terms there
 * weighed 0: eb_dw_few_region; a row's padded ends would run a pixel a pass, which cost a
 * 1-D k3 depthwise with padding 1 more than the 3-tap kernel's whole rows), and its blocks'
 * run (the inside rows' pixels where flat, else an inside row's) at least 4 pixels (a 1x1's
 * any); not a layer of the 3-tap kernels' channel pairs. */
static int eb_dw_few_takes(const eb_conv_params *p, const eb_dw_few_geom *f)
{
    const int32_t run = f->flat ? (int32_t)(f->y1 - f->y0) * p->out_w : f->x1 - f->x0;
    return p->stride_h == 1 && p->stride_w == 1 && p->wbits == 0 && f->k >= 2 &&
           f->k <= EB_DW_FEW_IN && (p->pad_h == 0 || f->flat) && p->pad_w == 0 &&
           f->y1 > f->y0 && run > 0 && (run >= 4 || p->k_h * p->k_w == 1) &&
           !eb_dw_few_three_tap(p);
}

/* An output channel of the few-input kernel: its weights scaled (eb_dw_imm), as int16 pairs
 * [w0 w1], [w2 w3]; its scaled start (NONE's carries 128 x 2^16: the lanes are the outputs
 * + 128, flipped back); its outputs' index in the layer's output. */
typedef struct {
    uint32_t w01, w23;
    int32_t init, at, src; /* src: its group's first input from the layer's input */
} eb_dw_few_ch;

/* Four sums of neighbouring pixels, scaled so that their outputs are their top halves,
 * stored at d in mode: two PKHTB, two USAT16 and an ORR (NONE: the lanes are the outputs +
 * 128, flipped back by an EOR); eb_dw_few_store from the packed [y0 y2], [y1 y3]. */
EB_INLINE void eb_dw_few_store(int8_t *d, const int mode, uint32_t e, uint32_t f)
{
    eb_store32(d, mode == EB_DW_RELU ? eb_usat16_7(e) | eb_usat16_7(f) << 8
                                     : (eb_usat16_8(e) | eb_usat16_8(f) << 8) ^ 0x80808080u);
}

EB_INLINE void eb_dw_few_put4(int8_t *d, const int mode, int32_t a0, int32_t a1, int32_t a2,
                              int32_t a3)
{
    eb_dw_few_store(d, mode, eb_pack_hi((uint32_t)a0, (uint32_t)a2), /* [y0 y2] */
                    eb_pack_hi((uint32_t)a1, (uint32_t)a3));         /* [y1 y3] */
}

/* A word's four int8 lanes as [x0 x2], [x1 x3] int16 pairs times 2^u: SXTB16 (u = 0), or
 * the bytes in the top of their halves by an AND (u = 8). */
EB_INLINE void eb_dw_few_lanes(uint32_t v, const int u, uint32_t *lo, uint32_t *hi)
{
    if (u == 8) {
        const uint32_t mask = 0xFF00FF00u;
#if EB_OPT_DSP && defined(__GNUC__)
        /* one AND with the shifted operand against the mask in a register (GCC's own
         * choice, the mask as an immediate, spends an LSL more) */
        __asm__("and %0, %1, %2, lsl #8" : "=r"(*lo) : "r"(mask), "r"(v));
#else
        *lo = (v << 8) & mask;
#endif
        *hi = v & mask;
    } else {
        *lo = eb_sxtb16(v);
        *hi = eb_sxtb16_ror8(v);
    }
}

/* The output of a scaled sum a (its output its top half; NONE's + 128) in mode. */
EB_INLINE int8_t eb_dw_few_q(const int mode, int32_t a)
{
    return (int8_t)(mode == EB_DW_NONE ? eb_ssat8((a >> 16) - 128) : eb_usat7(a >> 16));
}

/* The output of one pixel x (its k terms' inputs at offsets off[0], off[1], ...) of channel
 * e, inputs times 2^u. */
EB_INLINE int8_t eb_dw_few_pixel(const int k, const int8_t *x, const int32_t *off,
                                 const eb_dw_few_ch *e, const int u, const int mode)
{
    int32_t a = x[off[0]] * (int16_t)e->w01;
    if (k > 1) {
        a += x[off[1]] * (int16_t)(e->w01 >> 16);
    }
    if (k > 2) {
        a += x[off[2]] * (int16_t)e->w23;
    }
    if (k > 3) {
        a += x[off[3]] * (int16_t)(e->w23 >> 16);
    }
    return eb_dw_few_q(mode, e->init + a * (1 << u));
}

/* An input's word of 4 pixels at x (lanes times 2^u) into the sums against the bottom (BB /
 * TB) or top (BT / TT) half of w. */
#define EB_DW_FEW_MAC(x, w, b, t)                                                            \
    do {                                                                                     \
        uint32_t lo_, hi_;                                                                   \
        eb_dw_few_lanes(eb_load32(x), u, &lo_, &hi_);                                        \
        a0 = eb_smla##b(lo_, w, a0);                                                         \
        a2 = eb_smla##t(lo_, w, a2);                                                         \
        a1 = eb_smla##b(hi_, w, a1);                                                         \
        a3 = eb_smla##t(hi_, w, a3);                                                         \
    } while (0)

/* A channel's 4 pixels from x (its k terms' inputs at offsets o0 .. o3 from them, lanes
 * times 2^u) by its record's fields (in registers: a record read through a pointer is read
 * again after each store), stored at d. */
EB_INLINE void eb_dw_few_block(const int k, const int8_t *x, int32_t o0, int32_t o1,
                               int32_t o2, int32_t o3, uint32_t w01, uint32_t w23,
                               int32_t init, int8_t *d, const int u, const int mode)
{
    int32_t a0 = init, a1 = init, a2 = init, a3 = init;
    EB_DW_FEW_MAC(x + o0, w01, bb, tb);
    if (k > 1) {
        EB_DW_FEW_MAC(x + o1, w01, bt, tt);
    }
    if (k > 2) {
        EB_DW_FEW_MAC(x + o2, w23, bb, tb);
    }
    if (k > 3) {
        EB_DW_FEW_MAC(x + o3, w23, bt, tt);
    }
    eb_dw_few_put4(d, mode, a0, a1, a2, a3);
}

/* Channel e's n pixels from x (its terms at offsets off), stored from d: blocks of 4 from
 * the end back, then one at 0 over the first n % 4 (overlapping the next). */
EB_INLINE void eb_dw_few_one(const int k, const int8_t *x, const int32_t *off, int32_t n,
                             const eb_dw_few_ch *e, int8_t *d, const int u, const int mode)
{
    const uint32_t w01 = e->w01, w23 = e->w23;
    /* the first term's offset in x: one register fewer in the loop */
    const int32_t init = e->init, o0 = 0, o1 = off[1] - off[0], o2 = off[2] - off[0];
    const int32_t o3 = off[3] - off[0];
    int32_t i;
    if (n < 4) {
        for (i = 0; i < n; ++i) {
            d[i] = eb_dw_few_pixel(k, x + i, off, e, u, mode);
        }
        return;
    }
    x += off[0];
    for (i = n - 4; i >= 0; i -= 4) {
        eb_dw_few_block(k, x + i, o0, o1, o2, o3, w01, w23, init, d + i, u, mode);
    }
    if ((n & 3) != 0) {
        eb_dw_few_block(k, x, o0, o1, o2, o3, w01, w23, init, d, u, mode);
    }
}

/* The nch channels ch's 4 pixels from x (the k >= 2 terms' inputs at offsets o0 .. o3
 * from them, lanes times 2^u), outputs from d: the input words' lanes paired, [x_0 x_1] (p)
 * and [x_2 x_3] (q; k = 3: the third term's [x0 x2], [x1 x3], against w2 by SMLAxB) per
 * pixel, then per channel one SMLAD a pair and pixel and the stores. */
EB_INLINE void eb_dw_few_blocks(const int k, const int8_t *x, int32_t o0, int32_t o1,
                                int32_t o2, int32_t o3, const eb_dw_few_ch *ch,
                                const eb_dw_few_ch *end, int8_t *d, const int u, const int mode)
{
    uint32_t l0, h0, l1, h1, p0, p1, p2, p3, q0 = 0, q1 = 0, q2 = 0, q3 = 0;
    const eb_dw_few_ch *e;
    eb_dw_few_lanes(eb_load32(x + o0), u, &l0, &h0);
    eb_dw_few_lanes(eb_load32(x + o1), u, &l1, &h1);
    p0 = eb_pack_lo(l0, l1);
    p2 = eb_pack_hi(l0, l1);
    p1 = eb_pack_lo(h0, h1);
    p3 = eb_pack_hi(h0, h1);
    if (k > 2) { /* k = 3: [x0 x2] and [x1 x3] of the third input */
        eb_dw_few_lanes(eb_load32(x + o2), u, &q0, &q1);
        if (k > 3) {
            uint32_t l3, h3;
            eb_dw_few_lanes(eb_load32(x + o3), u, &l3, &h3);
            q2 = eb_pack_hi(q0, l3);
            q3 = eb_pack_hi(q1, h3);
            q0 = eb_pack_lo(q0, l3);
            q1 = eb_pack_lo(q1, h3);
        }
    }
    for (e = ch; e != end; ++e) { /* pixels 0 and 2 packed before 1 and 3 are summed: two
                                    * registers fewer live (a 3-term loop spilled); written
                                    * out, as a helper for a pixel pair ran the 2-term loop
                                    * 6 % slower and the 3-term one 8 % with GCC's choices */
        const uint32_t w01 = e->w01, w23 = e->w23;
        int32_t a0 = eb_smlad(p0, w01, e->init), a2 = eb_smlad(p2, w01, e->init), a1, a3;
        uint32_t y02;
        if (k == 3) {
            a0 = eb_smlabb(q0, w23, a0);
            a2 = eb_smlatb(q0, w23, a2);
        } else if (k == 4) {
            a0 = eb_smlad(q0, w23, a0);
            a2 = eb_smlad(q2, w23, a2);
        }
        y02 = eb_pack_hi((uint32_t)a0, (uint32_t)a2);
        a1 = eb_smlad(p1, w01, e->init);
        a3 = eb_smlad(p3, w01, e->init);
        if (k == 3) {
            a1 = eb_smlabb(q1, w23, a1);
            a3 = eb_smlatb(q1, w23, a3);
        } else if (k == 4) {
            a1 = eb_smlad(q1, w23, a1);
            a3 = eb_smlad(q3, w23, a3);
        }
        eb_dw_few_store(d + e->at, mode, y02, eb_pack_hi((uint32_t)a1, (uint32_t)a3));
    }
}

/* The nch channels ch over n pixels from x (its k >= 2 terms at offsets off), outputs from
 * d, 4 pixels a pass (eb_dw_few_blocks): from the end back, then one at 0 over the first
 * n % 4 (overlapping the next). */
EB_INLINE void eb_dw_few_many(const int k, const int8_t *x, const int32_t *off, int32_t n,
                              const eb_dw_few_ch *ch, int nch, int8_t *d, const int u,
                              const int mode)
{
    const eb_dw_few_ch *const end = ch + nch;
    /* the first term's offset in x: one register fewer in the loop */
    const int32_t o0 = 0, o1 = off[1] - off[0], o2 = off[2] - off[0], o3 = off[3] - off[0];
    int32_t i;
    if (n < 4) {
        const eb_dw_few_ch *e;
        for (e = ch; e != end; ++e) {
            for (i = 0; i < n; ++i) {
                d[e->at + i] = eb_dw_few_pixel(k, x + i, off, e, u, mode);
            }
        }
        return;
    }
    x += off[0];
    for (i = n - 4; i >= 0; i -= 4) {
        eb_dw_few_blocks(k, x + i, o0, o1, o2, o3, ch, end, d + i, u, mode);
    }
    if ((n & 3) != 0) {
        eb_dw_few_blocks(k, x, o0, o1, o2, o3, ch, end, d, u, mode);
    }
}

/* The few-input kernel's pass over `rows` rows of n pixels from each record's group input
 * (x: the layer's input; its k terms at offsets off; rows xs input bytes and ds outputs
 * apart) for channels ch, outputs from d (the layer's output), per term count k, for the
 * linked forms of mode and immediate c: `one`, a channel at a time (records of one output
 * a group, of several groups), else the records of one group together. The row loop here,
 * where a call a row cost a 1x2 depthwise on 23-pixel rows 0.5 instructions an output. */
#define EB_DW_FEW_FN(name, mode_, u_)                                                        \
    static EB_NOINLINE void name(int k, const int8_t *x, const int32_t *off, int32_t n,      \
                                 int rows, int32_t xs, const eb_dw_few_ch *ch, int nch,      \
                                 int8_t *d, int32_t ds, int one)                             \
    {                                                                                        \
        const eb_dw_few_ch *e, *const end = ch + nch;                                        \
        if (one) {                                                                           \
            for (e = ch; e != end; ++e) {                                                    \
                const int8_t *xe = x + e->src;                                               \
                int8_t *de = d + e->at;                                                      \
                int r;                                                                       \
                for (r = rows; r > 0; --r, xe += xs, de += ds) {                             \
                    if (k == 2) {                                                            \
                        eb_dw_few_one(2, xe, off, n, e, de, u_, mode_);                      \
                    } else if (k == 3) {                                                     \
                        eb_dw_few_one(3, xe, off, n, e, de, u_, mode_);                      \
                    } else {                                                                 \
                        eb_dw_few_one(4, xe, off, n, e, de, u_, mode_);                      \
                    }                                                                        \
                }                                                                            \
            }                                                                                \
            return;                                                                          \
        }                                                                                    \
        for (x += ch->src; rows > 0; --rows, x += xs, d += ds) {                             \
            if (k == 2) {                                                                    \
                eb_dw_few_many(2, x, off, n, ch, nch, d, u_, mode_);                         \
            } else if (k == 3) {                                                             \
                eb_dw_few_many(3, x, off, n, ch, nch, d, u_, mode_);                         \
            } else {                                                                         \
                eb_dw_few_many(4, x, off, n, ch, nch, d, u_, mode_);                         \
            }                                                                                \
        }                                                                                    \
    }
/* The forms linked: mode (RELU, NONE) and immediate (8, 16) each. */
#if EB_DW_FEW8 && EB_DW_HAS_RELU
#define EB_DW_FEW_R8(...) __VA_ARGS__
#else
#define EB_DW_FEW_R8(...)
#endif
#if EB_DW_FEW16 && EB_DW_HAS_RELU
#define EB_DW_FEW_R16(...) __VA_ARGS__
#else
#define EB_DW_FEW_R16(...)
#endif
#if EB_DW_FEW8 && EB_DW_HAS_NONE
#define EB_DW_FEW_N8(...) __VA_ARGS__
#else
#define EB_DW_FEW_N8(...)
#endif
#if EB_DW_FEW16 && EB_DW_HAS_NONE
#define EB_DW_FEW_N16(...) __VA_ARGS__
#else
#define EB_DW_FEW_N16(...)
#endif
EB_DW_FEW_R8(EB_DW_FEW_FN(eb_dw_few_relu_8, EB_DW_RELU, 8))
EB_DW_FEW_R16(EB_DW_FEW_FN(eb_dw_few_relu_16, EB_DW_RELU, 0))
EB_DW_FEW_N8(EB_DW_FEW_FN(eb_dw_few_none_8, EB_DW_NONE, 8))
EB_DW_FEW_N16(EB_DW_FEW_FN(eb_dw_few_none_16, EB_DW_NONE, 0))
#undef EB_DW_FEW_FN
typedef void (*eb_dw_few_fn)(int, const int8_t *, const int32_t *, int32_t, int, int32_t,
                             const eb_dw_few_ch *, int, int8_t *, int32_t, int);

/* The linked form for mode and immediate c (NULL: none). */
static eb_dw_few_fn eb_dw_few_of(int mode, int c)
{
    const int s = 1; /* (EB_DW_PICK's stride) */
    EB_DW_FEW_R8(EB_DW_PICK(eb_dw_few_relu_8, 1, EB_DW_RELU, 8))
    EB_DW_FEW_R16(EB_DW_PICK(eb_dw_few_relu_16, 1, EB_DW_RELU, 16))
    EB_DW_FEW_N8(EB_DW_PICK(eb_dw_few_none_8, 1, EB_DW_NONE, 8))
    EB_DW_FEW_N16(EB_DW_PICK(eb_dw_few_none_16, 1, EB_DW_NONE, 16))
    (void)s;
    (void)mode;
    (void)c;
    return NULL;
}

/* The sum of output (oy, ox)'s terms that lie inside the input, weights w (x: the group's
 * first input plane). */
static int32_t eb_dw_few_sum(const eb_conv_params *p, const eb_dw_few_geom *f,
                             const int8_t *x, int oy, int ox, const int16_t *w)
{
    int32_t a = 0;
    int t;
    for (t = 0; t < f->k; ++t) {
        const int iy = oy - p->pad_h + f->dy[t], ix = ox - p->pad_w + f->dx[t];
        if (iy >= 0 && iy < p->in_h && ix >= 0 && ix < p->in_w) {
            a += x[f->off[t] - (int32_t)f->dy[t] * p->in_w - f->dx[t] +
                   (int32_t)iy * p->in_w + ix] * w[t];
        }
    }
    return a;
}

/* Output channel oc's outputs (index on: out_h rows of out_w) a pixel at a time
 * (eb_dw_put), weights w, its start init: a channel whose mode is not the form's or whose
 * start, scaled, does not fit. */
static EB_NOINLINE void eb_dw_few_slow(const eb_conv_params *p, const eb_dw_few_geom *f,
                                       const int8_t *x, const int8_t *w, int32_t init,
                                       const eb_dw_out *o, int32_t index)
{
    int16_t w16[EB_DW_FEW_IN];
    int oy, ox, t;
    for (t = 0; t < f->k; ++t) {
        w16[t] = w[t];
    }
    for (oy = 0; oy < p->out_h; ++oy) {
        for (ox = 0; ox < p->out_w; ++ox) {
            eb_dw_put(o, index++, init + eb_dw_few_sum(p, f, x, oy, ox, w16));
        }
    }
}

/* The outputs [ya, yb) x [xa, xb) of records ch (at d + at; inputs from x + src) by the
 * form fn (`one`: eb_dw_few_fn's): a region in which each term lies inside the input for every
 * output or for none (eb_dw_few_pass), those for none weighed 0 in a copy of the records
 * and read where an inside term reads. All terms outside (a padding past the kernel's
 * reach): the outputs are their starts', a pixel at a time. */
static EB_NOINLINE void eb_dw_few_region(const eb_conv_params *p, const eb_dw_few_geom *f,
                                         eb_dw_few_fn fn, const int8_t *x,
                                         const eb_dw_few_ch *ch, int nch, int8_t *d, int one,
                                         int ya, int yb, int xa, int xb, int mode)
{
    eb_dw_few_ch zeroed[EB_DW_FEW_CH];
    const eb_dw_few_ch *rec = ch;
    int32_t rel[EB_DW_FEW_IN];
    uint32_t keep01 = 0, keep23 = 0;
    int t, c, any = -1, inside = 0, in[EB_DW_FEW_IN] = {0, 0, 0, 0};
    for (t = 0; t < f->k; ++t) {
        const int iy = ya - p->pad_h + f->dy[t], ix = xa - p->pad_w + f->dx[t];
        rel[t] = f->off[t] + (int32_t)(ya - p->pad_h) * p->in_w + (xa - p->pad_w);
        in[t] = iy >= 0 && iy < p->in_h && ix >= 0 && ix < p->in_w;
        if (in[t]) {
            *(t < 2 ? &keep01 : &keep23) |= 0xFFFFu << (16 * (t & 1));
            any = t;
            ++inside;
        }
    }
    if (any < 0) {
        for (c = 0; c < nch; ++c) {
            int y, xo;
            for (y = ya; y < yb; ++y) {
                for (xo = xa; xo < xb; ++xo) {
                    d[ch[c].at + (int32_t)y * p->out_w + xo] = eb_dw_few_q(mode, ch[c].init);
                }
            }
        }
        return;
    }
    for (t = 0; t < EB_DW_FEW_IN; ++t) { /* an outside term reads where `any` does */
        if (!in[t]) {
            rel[t] = rel[any];
        }
    }
    if (inside < f->k) {
        for (c = 0; c < nch; ++c) {
            zeroed[c] = ch[c];
            zeroed[c].w01 &= keep01;
            zeroed[c].w23 &= keep23;
        }
        rec = zeroed;
    }
    if (f->flat && xa == 0 && xb == p->out_w) { /* its rows one run */
        fn(f->k, x, rel, (int32_t)(yb - ya) * p->out_w, 1, 0, rec, nch,
           d + (int32_t)ya * p->out_w, 0, one);
    } else {
        fn(f->k, x, rel, xb - xa, yb - ya, p->in_w, rec, nch, d + (int32_t)ya * p->out_w + xa,
           p->out_w, one);
    }
}

/* The outputs of records ch (x, d: the layer's input and output; `one`: eb_dw_few_fn's) by
 * the form fn, region by region (eb_dw_few_region): the inside [y0, y1) x [x0, x1), and each row and
 * column of the padding's edges apart, in which the same terms lie outside. */
static void eb_dw_few_pass(const eb_conv_params *p, const eb_dw_few_geom *f, eb_dw_few_fn fn,
                           const int8_t *x, const eb_dw_few_ch *ch, int nch, int8_t *d, int one,
                           int mode)
{
    int ya, xa;
    if (f->y0 == 0 && f->y1 == p->out_h && f->x0 == 0 && f->x1 == p->out_w) { /* unpadded */
        if (f->flat) {
            fn(f->k, x, f->off, (int32_t)p->out_h * p->out_w, 1, 0, ch, nch, d, 0, one);
        } else {
            fn(f->k, x, f->off, p->out_w, p->out_h, p->in_w, ch, nch, d, p->out_w, one);
        }
        return;
    }
    for (ya = 0; ya < p->out_h;) {
        const int yb = ya >= f->y0 && ya < f->y1 ? f->y1 : ya + 1;
        for (xa = 0; xa < p->out_w;) {
            const int xb = xa >= f->x0 && xa < f->x1 ? f->x1 : xa + 1;
            eb_dw_few_region(p, f, fn, x, ch, nch, d, one, ya, yb, xa, xb, mode);
            xa = xb;
        }
        ya = yb;
    }
}

/* The int16 pair [a b] of weights a, b scaled by 2^t. */
EB_INLINE uint32_t eb_dw_few_pair(int32_t a, int32_t b, int t)
{
    return (uint32_t)(uint16_t)(a << t) | (uint32_t)(b << t) << 16;
}

/* The conv p by the few-input kernel when it takes it (eb_dw_few_takes); 0, nothing
 * written, otherwise. A group's output channels in passes of up to EB_DW_FEW_CH records:
 * a channel's record where its mode is the form's and its start, scaled by 2^t, fits (at 16
 * with NONE's offset: one more pair's room), else its outputs by eb_dw_few_slow. */
static int eb_dw_few(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                     const int32_t *bias, int8_t *out8, int32_t *out32)
{
    const eb_dw_sink sink = {out8, out32, out8 ? p->shift : 0, out8 ? p->rounding : 0,
                             out8 ? p->act : 0};
    const int ipg = p->in_c / p->groups, m = p->out_c / p->groups;
    const int32_t plane = (int32_t)p->in_h * p->in_w, oplane = (int32_t)p->out_h * p->out_w;
    eb_dw_few_geom f;
    eb_dw_out o;
    eb_dw_rq rq;
    eb_dw_few_ch ch[EB_DW_FEW_CH];
    eb_dw_few_fn fn;
    int64_t room;
    int32_t lim, bump, sat;
    int32_t oc;
    int c, t, sh, k, nch;
    if (!EB_DW_FEW) {
        return 0;
    }
    eb_dw_few_geom_of(p, &f);
    if (!eb_dw_few_takes(p, &f)) {
        return 0;
    }
    k = f.k;
    eb_dw_setup(&sink, k, &o, &rq);
    c = eb_dw_imm(o.s);
    fn = c && (rq.fast == EB_DW_RELU || rq.fast == EB_DW_NONE) ? eb_dw_few_of(rq.fast, c)
                                                                 : NULL;
    if (fn == NULL) { /* another mode (wide, abs, a shift past 16): the next kernels */
        return 0;
    }
    t = c - o.s; /* the weights' scale; the inputs' 2^(16 - c): the sums' 2^sh */
    sh = 16 - o.s;
    bump = rq.fast == EB_DW_NONE ? (int32_t)128 << 16 : 0; /* NONE's offset */
    room = (int64_t)INT32_MAX - ((int64_t)k << (14 + sh)) - bump; /* |w x| <= 2^14 */
    lim = room >= 0 ? (int32_t)(room >> sh) : -1;
    /* a start beyond sat (the sums' reach k 2^14 and 129 outputs' worth) gives every output
     * the same bound as sat itself */
    sat = ((int32_t)k << 14) + ((int32_t)129 << o.s);
    /* one output a group: a pass's records span groups, a channel at a time; else a
     * group's records together */
    for (oc = 0, nch = 0; oc < p->out_c; ++oc) {
        const int32_t src = oc / m * ipg * plane; /* its group's first input */
        const int8_t *w = weight + oc * k;
        int32_t init = eb_dw_init(&rq, bias, oc, &o);
        const int form = o.mode == rq.fast; /* else a bias past the fast sums' limit */
        if (form) { /* a start past every sum's reach saturates alike */
            init = init > sat ? sat : init < -sat ? -sat : init;
        }
        if (form && init <= lim && init >= -lim) {
            eb_dw_few_ch *e = &ch[nch++];
            e->w01 = eb_dw_few_pair(w[0], k > 1 ? w[1] : 0, t);
            e->w23 = k > 2 ? eb_dw_few_pair(w[2], k > 3 ? w[3] : 0, t) : 0u;
            e->init = (int32_t)((uint32_t)init << sh) + bump;
            e->at = oc * oplane;
            e->src = src;
        } else {
            eb_dw_few_slow(p, &f, in + src, w, init, &o, oc * oplane);
        }
        if (nch > 0 && (nch == EB_DW_FEW_CH || oc == p->out_c - 1 ||
                        (m > 1 && (oc + 1) % m == 0))) {
            eb_dw_few_pass(p, &f, fn, in, ch, nch, out8, m == 1 || nch == 1, rq.fast);
            nch = 0;
        }
    }
    return 1;
}

/* ---- small planes ----
 * A depthwise conv (any multiplier) of at most EB_DW_SMALL_OUT outputs a channel, a kernel
 * row of 2 or more taps and at most EB_DW_SMALL_TAPS taps (in its row-major view) -- the 3x3
 * layers at the end of a MobileNet (256 channels of 3x3, stride 1 or 2), a 1-D k5 on 18
 * samples of multiplier 4 -- where the tile kernel's and the rows' set-up a channel and a
 * row cost more than the outputs: 24.8 insn/MAC on 256 x 3x3 (about 2,000 instructions a
 * channel of 9 outputs). Here an input channel's plane is widened once into a zero-padded
 * int16 copy in the scratch (its padding and a column past it: an odd kernel width's last
 * pair reads a 0 against a 0 weight), and each output is k_h x ceil(k_w / 2) LDR + SMLAD of
 * neighbouring taps from it against its channel's weight pairs, at any stride and height
 * dilation: no table, no tiles, no edge cases. Its row-major view (eb_dw_geom_of): a 1-D layer laid
 * as a column runs as its row. Rows of fewer than 4 outputs take it at any height (the copy
 * fitting): the tile kernel's blocks of 4 pixels leave such rows to its C loops (256 x 24x4
 * 1x6 stride 2 of multiplier 3, 2 outputs a row: 6.09 insn/MAC there, 2.47 here) -- but the
 * line kernel's (one kernel row, multiplier 1). Twin: ops.conv_path.small. */
#define EB_DW_SMALL_OUT 36    /* outputs a channel at most */
#define EB_DW_SMALL_TAPS 25   /* taps an output at most (a 7x7 on 7x7: 2.65 insn/MAC on the
                               * tile kernel, 6.06 here; a 1-D k7 on 60: 2.80, 8.68) */
#define EB_DW_SMALL_PLANE 512 /* int16 of the padded copy (the scratch: at most its claim) */
typedef char eb_dw_small_fits[EB_DW_SMALL_PLANE <= EB_DW_TILE_SCRATCH ? 1 : -1];
#define EB_DW_SMALL_KH 7      /* kernel rows at most */
#define EB_DW_SMALL_PAIRS 4   /* tap pairs a kernel row at most (k_w <= 8) */

/* The padded copy's row length: the padded row and one column past it, even (words). */
EB_INLINE int32_t eb_dw_small_pitch(const eb_dw_geom *g)
{
    return ((int32_t)g->in_w + 2 * g->pad_w + 2) & ~(int32_t)1;
}

static int eb_dw_small_takes(const eb_conv_params *p, const eb_dw_geom *g)
{
    const int32_t rows = (int32_t)g->in_h + 2 * g->pad_h;
    return EB_DW_SMALL && p->groups == p->in_c && p->wbits == 0 && g->dil_w == 1 &&
           !eb_dw_k3_shape(g) && /* (the 3-tap kernels' rows, and the padded path's spec) */
           g->stride_h <= 2 && g->stride_w <= 2 && g->k_h <= EB_DW_SMALL_KH &&
           (g->k_w + 1) / 2 <= EB_DW_SMALL_PAIRS && g->k_w >= 2 && /* (Kx1: a pair a tap) */
           g->k_h * g->k_w <= EB_DW_SMALL_TAPS &&
           ((int32_t)g->out_h * g->out_w <= EB_DW_SMALL_OUT ||
            (g->out_w < 4 && (p->out_c != p->in_c || g->k_h > 1))) &&
           rows * eb_dw_small_pitch(g) + 2 <= EB_DW_SMALL_PLANE;
}

/* The padded copy's every element zero (its padding stays so: a channel's copy writes
 * only the plane's own elements). */
static void eb_dw_small_zero(const eb_dw_geom *g, int16_t *buf, int32_t pitch)
{
    const int32_t words = ((int32_t)g->in_h + 2 * g->pad_h) * pitch / 2 + 1;
    uint32_t *const z = (uint32_t *)(void *)buf; /* (4-byte aligned: the caller's) */
    int32_t i;
    for (i = 0; i < words; ++i) {
        z[i] = 0;
    }
}

/* Input plane x widened into the padded copy buf (pitch int16 a row; its padding zero). */
static EB_NOINLINE void eb_dw_small_plane(const eb_dw_geom *g, const int8_t *x, int16_t *buf,
                                          int32_t pitch)
{
    const int in_w = g->in_w, in_h = g->in_h;
    int16_t *d = buf + (int32_t)g->pad_h * pitch + g->pad_w;
    int y;
    for (y = 0; y < in_h; ++y, x += in_w, d += pitch) {
        eb_dw_widen(d, x, 0, in_w);
    }
}

/* One output's sum from init: kh rows (rstep int16 apart) of np tap pairs at q, weight
 * pairs w (np a row; constant kh and np: GCC unrolls both loops and keeps w in registers). */
EB_INLINE int32_t eb_dw_small_sum(const int16_t *q, const uint32_t *w, const int kh,
                                  const int np, int32_t rstep, int32_t acc)
{
    int ky, j;
#ifdef __GNUC__
#pragma GCC unroll 8
#endif
    for (ky = 0; ky < kh; ++ky, q += rstep, w += np) {
#ifdef __GNUC__
#pragma GCC unroll 4
#endif
        for (j = 0; j < np; ++j) {
            acc = eb_smlad(eb_load32(q + 2 * j), w[j], acc);
        }
    }
    return acc;
}

/* An output channel's outputs (its padded input buf, weights wt: k_h rows of k_w, start
 * init) into o from index: NONE / RELU stored inline (shift s), other modes by eb_dw_put.
 * kh and np constant where the caller specialises them: the weight pairs built unrolled and
 * held in locals (an int8 store may alias an array for the compiler). */
EB_INLINE void eb_dw_small_run(const eb_dw_geom *g, const int16_t *buf, int32_t pitch,
                               const int8_t *wt, const int kh, const int np, int32_t init,
                               const eb_dw_out *o, int32_t index, const int mode)
{
    uint32_t w[EB_DW_SMALL_KH * EB_DW_SMALL_PAIRS];
    const int32_t rstep = (int32_t)g->dil_h * pitch, ystep = (int32_t)g->stride_h * pitch;
    const int sw = g->stride_w, s = o->s, out_h = g->out_h, out_w = g->out_w, k_w = g->k_w;
    int8_t *d = o->out8 != NULL ? o->out8 + index : NULL;
    const int16_t *row = buf;
    int32_t at = index;
    int y, x, ky, j;
#ifdef __GNUC__
#pragma GCC unroll 8
#endif
    for (ky = 0; ky < kh; ++ky, wt += k_w) {
#ifdef __GNUC__
#pragma GCC unroll 4
#endif
        for (j = 0; j < np; ++j) { /* [w(2j), w(2j + 1)], past k_w a 0 */
            const int32_t b = 2 * j + 1 < k_w ? wt[2 * j + 1] : 0;
            w[ky * np + j] = eb_pack_lo((uint32_t)(int32_t)wt[2 * j], (uint32_t)b);
        }
    }
    for (y = 0; y < out_h; ++y, row += ystep) {
        const int16_t *q = row;
        for (x = 0; x < out_w; ++x, q += sw, ++at) {
            const int32_t acc = eb_dw_small_sum(q, w, kh, np, rstep, init);
            if (mode == EB_DW_RELU || mode == EB_DW_NONE) {
                *d++ = eb_dw_q8(mode, acc, s, 0, 0, 0);
            } else {
                eb_dw_put(o, at, acc);
            }
        }
    }
}

/* One output channel (weights wt): the kernels of MobileNets and 1-D layers with constant
 * loops, the rest with the layer's. */
static EB_NOINLINE void eb_dw_small_channel(const eb_dw_geom *g, const int16_t *buf,
                                            int32_t pitch, const int8_t *wt, int32_t init,
                                            const eb_dw_out *o, int32_t index)
{
    const int np = (g->k_w + 1) / 2, kh = g->k_h;
    if (kh == 3 && np == 2) {
        EB_DW_MODES(eb_dw_small_run, g, buf, pitch, wt, 3, 2, init, o, index)
    } else if (kh == 1 && np == 2) {
        EB_DW_MODES(eb_dw_small_run, g, buf, pitch, wt, 1, 2, init, o, index)
    } else if (kh == 1 && np == 3) {
        EB_DW_MODES(eb_dw_small_run, g, buf, pitch, wt, 1, 3, init, o, index)
    } else if (kh == 1 && np == 4) {
        EB_DW_MODES(eb_dw_small_run, g, buf, pitch, wt, 1, 4, init, o, index)
    } else if (kh == 5 && np == 3) {
        EB_DW_MODES(eb_dw_small_run, g, buf, pitch, wt, 5, 3, init, o, index)
    } else {
        EB_DW_MODES(eb_dw_small_run, g, buf, pitch, wt, kh, np, init, o, index)
    }
}

/* The layer p by the small-plane kernel, its padded copy in the scratch (buf: the tile
 * kernel's patch, EB_DW_TILE_SCRATCH int16, which the plan claims for every depthwise conv
 * the 3-tap kernels do not take: ops.conv_path.dw_tile); 0, nothing written, for one it
 * does not take. */
static EB_NOINLINE int eb_dw_small(const eb_conv_params *p, const int8_t *in,
                                   const int8_t *weight, const int32_t *bias, int8_t *out8,
                                   int32_t *out32, int16_t *buf)
{
    eb_dw_geom g;
    eb_dw_out o;
    eb_dw_rq rq;
    const eb_dw_sink sink = {out8, out32, out8 ? p->shift : 0, out8 ? p->rounding : 0,
                             out8 ? p->act : 0};
    int32_t ic, oc, pitch;
    int m, j;
    eb_dw_geom_of(p, &g);
    if (!eb_dw_small_takes(p, &g)) {
        return 0;
    }
    pitch = eb_dw_small_pitch(&g);
    m = p->out_c / p->in_c;
    eb_dw_setup(&sink, (int32_t)g.k_h * g.k_w, &o, &rq);
    eb_dw_small_zero(&g, buf, pitch);
    for (ic = 0, oc = 0; ic < p->in_c; ++ic) {
        eb_dw_small_plane(&g, in + ic * (int32_t)g.in_h * g.in_w, buf, pitch);
        for (j = 0; j < m; ++j, ++oc) {
            const int32_t init = eb_dw_init(&rq, bias, oc, &o);
            eb_dw_small_channel(&g, buf, pitch, weight + oc * (int32_t)g.k_h * g.k_w, init, &o,
                                oc * (int32_t)g.out_h * g.out_w);
        }
    }
    return 1;
}

/* ---- stride 2, kernel rows of 3 ----
 * A depthwise conv of multiplier 1 whose kernel rows are 3 wide at stride 2 along them (in
 * its row-major view; a 3x3 stride-2 layer of a MobileNet) -- which the 3-tap kernels leave
 * (stride 1 only) and the tile kernel ran at 5 to 7 instructions a multiply on 16x16 to
 * 64x64 maps, its int16 patch and tables a channel costing more than the sums. Here a band
 * of an input channel's rows is copied, int8, into the scratch (a word loop a row; the
 * padding columns zeroed once a layer, rows outside the input whole), and 4 outputs of a
 * row read their 9 input bytes of a kernel row as two words and a byte: SXTB16 gives
 * [x0, x2] [x1, x3] [x4, x6] [x5, x7], and with the weights as [w0, w2] and w1
 *   p0 = [w0 w2].[x0 x2] + x1 w1        p1 = x2 w0 + x4 w2 + x3 w1
 *   p2 = [w0 w2].[x4 x6] + x5 w1        p3 = x6 w0 + x8 w2 + x7 w1
 * (SMLAD, SMLAxy): 17 instructions per 12 multiplies, no edge case (the padding is in the
 * copy), the last block of a row overlapping the one before. NONE and RELU outputs (a
 * layer with a channel in another mode goes on). 16 x 16 x 16 7.24 -> 4.62 insn/MAC,
 * 16 x 32 x 32 5.04 -> 3.77, 32 x 48 x 48 5.44 -> 4.83, 24 x 64 x 64 4.92 -> 4.36, a 1-D
 * 32 x 200 k3 7.41 -> 5.48: the
 * blocks' C (about 26 instructions an output where the sums take 13) and the copy are
 * what is left. Twin: ops.dw_s2. */
#define EB_DW_S2_KH 7 /* kernel rows at most */

/* A padded row's bytes: the 2 out_w + 1 a row's outputs read, rounded up to a word. */
EB_INLINE int32_t eb_dw_s2_pitch(const eb_dw_geom *g)
{
    return ((int32_t)2 * g->out_w + 1 + 3) & ~(int32_t)3;
}

/* Output rows a band holds: those whose input rows fit the scratch's bytes; 0 for none. */
static int32_t eb_dw_s2_band(const eb_dw_geom *g, int32_t bytes)
{
    const int32_t rows = bytes / eb_dw_s2_pitch(g) - ((int32_t)(g->k_h - 1) * g->dil_h + 1);
    return rows < 0 ? 0 : rows / g->stride_h + 1;
}

/* Input rows [iy0, iy0 + n) of channel x as rows of `pitch` bytes from d on, pad_w bytes
 * from their start: a row outside the input all zeros, the others' padding columns left as
 * they are (zeroed once a layer, eb_dw_s2: no row writes them). */
static EB_NOINLINE EB_NO_MEMSET void eb_dw_s2_fill(const eb_dw_geom *g, const int8_t *x,
                                                    int32_t iy0, int32_t n, int32_t pitch,
                                                    int8_t *d)
{
    const int32_t lo = g->pad_w < pitch ? g->pad_w : pitch;
    const int32_t len = (g->pad_w + g->in_w < pitch ? g->pad_w + g->in_w : pitch) - lo;
    int32_t r, j;
    x += iy0 * g->in_w;
    for (r = 0; r < n; ++r, d += pitch, x += g->in_w) {
        if (iy0 + r < 0 || iy0 + r >= g->in_h) {
            for (j = 0; j < pitch; j += 4) {
                eb_store32(d + j, 0);
            }
            continue;
        }
        for (j = 0; j + 4 <= len; j += 4) { /* (unaligned words) */
            eb_store32(d + lo + j, eb_load32(x + j));
        }
        for (; j < len; ++j) {
            d[lo + j] = x[j];
        }
    }
}

/* Outputs x .. x + 3 of one output row, r: its first kernel row's bytes at the block's
 * first input column, `kh` kernel rows rstep bytes apart (weights wp, w1 a row). */
EB_INLINE void eb_dw_s2_block(const int8_t *r, int kh, int32_t rstep, const uint32_t *wp,
                              const int32_t *w1, int32_t init, int s, const int mode, int8_t *d)
{
    int32_t p0 = init, p1 = init, p2 = init, p3 = init;
    int ky;
#ifdef __GNUC__
#pragma GCC unroll 3
#endif
    for (ky = 0; ky < kh; ++ky, r += rstep) {
        const uint32_t a = eb_load32(r), b = eb_load32(r + 4);
        const uint32_t c = (uint32_t)(int32_t)r[8];
        const uint32_t a02 = eb_sxtb16(a), a13 = eb_sxtb16_ror8(a);
        const uint32_t b02 = eb_sxtb16(b), b13 = eb_sxtb16_ror8(b);
        const uint32_t p = wp[ky], q = (uint32_t)w1[ky];
        p0 = eb_smlabb(a13, q, eb_smlad(a02, p, p0));
        p1 = eb_smlatb(a13, q, eb_smlabt(b02, p, eb_smlatb(a02, p, p1)));
        p2 = eb_smlabb(b13, q, eb_smlad(b02, p, p2));
        p3 = eb_smlatb(b13, q, eb_smlabt(c, p, eb_smlatb(b02, p, p3)));
    }
    d[0] = eb_dw_q8(mode, p0, s, 0, 0, 0);
    d[1] = eb_dw_q8(mode, p1, s, 0, 0, 0);
    d[2] = eb_dw_q8(mode, p2, s, 0, 0, 0);
    d[3] = eb_dw_q8(mode, p3, s, 0, 0, 0);
}

/* Output rows [oy0, oy1) of one output channel (weights wt) from the band at buf (its first
 * row the input row of oy0's first kernel row). */
EB_INLINE void eb_dw_s2_rows(const eb_dw_geom *g, const int8_t *buf, int32_t pitch,
                             const int8_t *wt, int32_t init, const eb_dw_out *o, int8_t *d,
                             int32_t oy0, int32_t oy1, const int kh, const int mode)
{
    uint32_t wp[EB_DW_S2_KH];
    int32_t w1[EB_DW_S2_KH];
    const int32_t rstep = (int32_t)g->dil_h * pitch, ystep = (int32_t)g->stride_h * pitch;
    const int32_t last = g->out_w - 4;
    int32_t oy, x;
    int ky;
    for (ky = 0; ky < kh; ++ky, wt += 3) {
        wp[ky] = eb_pack_lo((uint32_t)(int32_t)wt[0], (uint32_t)(int32_t)wt[2]);
        w1[ky] = wt[1];
    }
    for (oy = oy0; oy < oy1; ++oy, buf += ystep) {
        for (x = 0;; x += 4) {
            if (x > last) {
                x = last; /* the last block overlaps the one before */
            }
            eb_dw_s2_block(buf + 2 * x, kh, rstep, wp, w1, init, o->s, mode,
                           d + oy * g->out_w + x);
            if (x == last) {
                break;
            }
        }
    }
}

/* One output channel's rows of a band: 3x3 and 1-D kernels with constant loops (the
 * weights in registers), the rest with the layer's kernel rows. */
static EB_NOINLINE void eb_dw_s2_channel(const eb_dw_geom *g, const int8_t *buf, int32_t pitch,
                                         const int8_t *wt, int32_t init, const eb_dw_out *o,
                                         int8_t *d, int32_t oy0, int32_t oy1)
{
    const int relu = o->mode == EB_DW_RELU;
    if (g->k_h == 3) {
        if (relu) {
            eb_dw_s2_rows(g, buf, pitch, wt, init, o, d, oy0, oy1, 3, EB_DW_RELU);
        } else {
            eb_dw_s2_rows(g, buf, pitch, wt, init, o, d, oy0, oy1, 3, EB_DW_NONE);
        }
    } else if (g->k_h == 1) {
        if (relu) {
            eb_dw_s2_rows(g, buf, pitch, wt, init, o, d, oy0, oy1, 1, EB_DW_RELU);
        } else {
            eb_dw_s2_rows(g, buf, pitch, wt, init, o, d, oy0, oy1, 1, EB_DW_NONE);
        }
    } else if (relu) {
        eb_dw_s2_rows(g, buf, pitch, wt, init, o, d, oy0, oy1, g->k_h, EB_DW_RELU);
    } else {
        eb_dw_s2_rows(g, buf, pitch, wt, init, o, d, oy0, oy1, g->k_h, EB_DW_NONE);
    }
}

/* Whether the kernel takes layer p (geometry g, its row-major view): depthwise of
 * multiplier 1, unpacked weights, kernel rows of 3 at stride 2 and dilation 1 along them,
 * at most EB_DW_S2_KH of them, rows of 8 outputs or more, and a band of one output row
 * fitting the scratch. Where its blocks' and bands' set-up outweigh the sums it goes on: a
 * multiplier of 2 (16 -> 32 on 20 x 20 4.11 -> 4.20 insn/MAC; 1-D 24 -> 48 k3 on 60 5.96 ->
 * 6.59), rows of 4 to 7 outputs (128 x 10 x 10 6.14 -> 7.71, 32 x 12 x 12 5.53 -> 6.11). */
static int eb_dw_s2_takes(const eb_conv_params *p, const eb_dw_geom *g)
{
    return EB_DW_S2 && p->groups == p->in_c && p->out_c == p->in_c && p->wbits == 0 &&
           g->k_w == 3 && g->stride_w == 2 && g->dil_w == 1 && g->k_h <= EB_DW_S2_KH &&
           g->out_w >= 8 && eb_dw_s2_band(g, 2 * EB_DW_TILE_SCRATCH) > 0;
}

/* The layer p by the stride-2 kernel, a band of rows at a time in the scratch (the tile
 * kernel's patch, which the plan claims for every depthwise conv the 3-tap kernels do not
 * take: ops.conv_path.dw_tile); 0, nothing written, for one it does not take. */
static EB_NOINLINE EB_NO_MEMSET int eb_dw_s2(const eb_conv_params *p, const int8_t *in,
                                             const int8_t *weight,
                                const int32_t *bias, int8_t *out8, int32_t *out32,
                                int16_t *scratch)
{
    eb_dw_geom g;
    eb_dw_out o;
    eb_dw_rq rq;
    const eb_dw_sink sink = {out8, out32, out8 ? p->shift : 0, out8 ? p->rounding : 0,
                             out8 ? p->act : 0};
    int8_t *const buf = (int8_t *)(void *)scratch;
    int32_t pitch, band, rows, c, oy0, j;
    eb_dw_geom_of(p, &g);
    if (!eb_dw_s2_takes(p, &g) || out8 == NULL) {
        return 0;
    }
    eb_dw_setup(&sink, (int32_t)g.k_h * 3, &o, &rq);
    for (c = 0; c < p->out_c; ++c) { /* every channel in the NONE or RELU mode */
        (void)eb_dw_init(&rq, bias, c, &o);
        if (o.mode != EB_DW_NONE && o.mode != EB_DW_RELU) {
            return 0;
        }
    }
    pitch = eb_dw_s2_pitch(&g);
    band = eb_dw_s2_band(&g, 2 * EB_DW_TILE_SCRATCH);
    rows = ((band - 1) * g.stride_h + (int32_t)(g.k_h - 1) * g.dil_h + 1) * pitch;
    for (j = 0; j < rows; j += 4) { /* the padding columns' zeros */
        eb_store32(buf + j, 0);
    }
    for (c = 0; c < p->in_c; ++c) { /* (multiplier 1: output channel c reads input c) */
        const int8_t *x = in + c * (int32_t)g.in_h * g.in_w;
        const int8_t *wt = weight + c * (int32_t)g.k_h * 3;
        int8_t *d = out8 + c * (int32_t)g.out_h * g.out_w;
        const int32_t init = eb_dw_init(&rq, bias, c, &o);
        for (oy0 = 0; oy0 < g.out_h; oy0 += band) {
            const int32_t oy1 = oy0 + band < g.out_h ? oy0 + band : g.out_h;
            eb_dw_s2_fill(&g, x, oy0 * g.stride_h - g.pad_h,
                          (oy1 - 1 - oy0) * g.stride_h + (int32_t)(g.k_h - 1) * g.dil_h + 1,
                          pitch, buf);
            eb_dw_s2_channel(&g, buf, pitch, wt, init, &o, d, oy0, oy1);
        }
    }
    return 1;
}

int eb_dw_conv_opt(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                   const int32_t *bias, int8_t *out8, int32_t *out32, int16_t *scratch)
{
    if (EB_DW_FEW && eb_dw_few(p, in, weight, bias, out8, out32)) {
        return 1;
    }
    if (EB_DW_SMALL && eb_dw_small(p, in, weight, bias, out8, out32, scratch)) {
        return 1;
    }
    if (EB_DW_S2 && eb_dw_s2(p, in, weight, bias, out8, out32, scratch)) {
        return 1;
    }
    if (EB_DW_TILE && EB_DW_GROUP &&
        eb_dw_group_tile(p, in, weight, bias, out8, out32, scratch)) {
        return 1;
    }
    if (EB_DW_COLUMN &&
        eb_col_layer(p, in, weight, bias, out8, out32, (eb_col_tap *)(void *)scratch)) {
        return 1;
    }
    return eb_dw_layer(p, NULL, in, NULL, weight, bias, out8, out32, (int8_t *)scratch,
                       EB_DW_PAD_BYTES, NULL);
}

/* The padded rows of a band of `rows` output rows (the whole plane when rows >= out_h; else
 * even, at least 2): out rows + 2, L = in_w + pad_w bytes apart, and pad_w bytes. */
static int32_t eb_dw_band_bytes(const eb_conv_params *p, int rows_)
{
    int32_t rows = p->out_h;
    if (rows_ < p->out_h) {
        rows = rows_ < 2 ? 2 : rows_ & ~1;
    }
    return (rows + 2) * ((int32_t)p->in_w + p->pad_w) + p->pad_w;
}

int32_t eb_dw_band_l1_bytes(const eb_conv_params *p, int rows)
{
    return (eb_dw_band_bytes(p, rows) + EB_DW_PAD_SLACK + 3) & ~(int32_t)3;
}

void eb_dw_conv_banded_opt(const eb_conv_params *p, int rows, const int8_t *in,
                           const int8_t *weight, const int32_t *bias, int8_t *out, int8_t *l1)
{
    if (!eb_dw_layer(p, NULL, in, NULL, weight, bias, out, NULL, l1,
                     eb_dw_band_bytes(p, rows), NULL)) {
        eb_conv2d(p, in, weight, bias, out); /* a shape the padded path does not take */
    }
}

/* q and p as the fused path takes them: a 2x2 stride-2 max pool whose output is p's input. */
static int eb_dw_fusable(const eb_pool_params *q, const eb_conv_params *p)
{
    return q->mode == EB_POOL_MAX && q->k_h == 2 && q->k_w == 2 && q->stride_h == 2 &&
           q->stride_w == 2 && q->c == p->in_c && q->out_h == p->in_h && q->out_w == p->in_w;
}

void eb_dw_pool_conv_opt(const eb_pool_params *q, const eb_conv_params *p, const int8_t *in,
                         int8_t *pooled, const int8_t *weight, const int32_t *bias, int8_t *out,
                         int16_t *scratch)
{
    eb_dw_pool_conv_spec_opt(q, p, NULL, in, pooled, weight, bias, out, scratch);
}

void eb_dw_conv_spec_opt(const eb_conv_params *p, const eb_dw3_spec *k, const int8_t *in,
                         const int8_t *weight, const int32_t *bias, int8_t *out,
                         int16_t *scratch)
{
    int8_t *const buf = (int8_t *)scratch; /* the padded path's channel copy */
    if (!eb_dw_layer(p, NULL, in, NULL, weight, bias, out, NULL, buf, EB_DW_PAD_BYTES, k)) {
        eb_conv2d(p, in, weight, bias, out); /* a shape the depthwise path does not take */
    }
}

void eb_dw_pool_conv_spec_opt(const eb_pool_params *q, const eb_conv_params *p,
                              const eb_dw3_spec *k, const int8_t *in, int8_t *pooled,
                              const int8_t *weight, const int32_t *bias, int8_t *out,
                              int16_t *scratch)
{
    int8_t *const buf = (int8_t *)scratch; /* the padded path's channel copy */
    if (eb_dw_fusable(q, p) &&
        eb_dw_layer(p, q, in, pooled, weight, bias, out, NULL, buf, EB_DW_PAD_BYTES, k)) {
        return;
    }
    eb_pool2d(q, in, pooled); /* (rows too long for the buffer, other pools) */
    if (!eb_dw_layer(p, NULL, pooled, NULL, weight, bias, out, NULL, buf, EB_DW_PAD_BYTES, k)) {
        eb_conv2d(p, pooled, weight, bias, out); /* a shape the depthwise path does not take */
    }
}

void eb_dw_pool_conv_banded_opt(const eb_pool_params *q, const eb_conv_params *p, int rows,
                                const int8_t *in, int8_t *pooled, const int8_t *weight,
                                const int32_t *bias, int8_t *out, int8_t *l1)
{
    if (eb_dw_fusable(q, p) &&
        eb_dw_layer(p, q, in, pooled, weight, bias, out, NULL, l1, eb_dw_band_bytes(p, rows),
                    NULL)) {
        return;
    }
    eb_pool2d(q, in, pooled);
    eb_dw_conv_banded_opt(p, rows, pooled, weight, bias, out, l1);
}
