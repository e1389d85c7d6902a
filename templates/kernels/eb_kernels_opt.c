/* edgebuild optimized int8 kernels: see eb_kernels_opt.h for the method and the scratch
 * sizes, eb_kernels.h for the numerics contract. The reference kernels (eb_kernels.c) are
 * the definition: these must match them bit for bit. C99, no allocation. */
#include "eb_kernels_opt.h"
#include "eb_dw_opt.h"

#include <string.h>

#include "eb_simd.h"

/* -DEB_OPT_NO_DEPTHWISE: depthwise layers take the generic grouped im2col path too (the
 * tests build it to measure what the depthwise path gains). */
#ifdef EB_OPT_NO_DEPTHWISE
#define EB_OPT_DEPTHWISE 0
#else
#define EB_OPT_DEPTHWISE 1
#endif

/* The parts a model's layers take (eb_config.h; edgebuild.ops.conv_path.gemm_paths):
 * EB_OPT_NO_Q_RELU / _NONE / _WIDE leave out the dot blocks that requantize (or store wide)
 * from the registers in that form -- its layers then store through eb_dot_block_acc and
 * eb_store --, EB_OPT_NO_IM2COL the im2col conv (a conv no other optimized path takes then
 * runs the reference loops). The results are the same either way: only the code linked and
 * the speed differ. */
#ifdef EB_OPT_NO_Q_RELU
#define EB_HAS_Q_RELU 0
#else
#define EB_HAS_Q_RELU 1
#endif
#ifdef EB_OPT_NO_Q_NONE
#define EB_HAS_Q_NONE 0
#else
#define EB_HAS_Q_NONE 1
#endif
#ifdef EB_OPT_NO_Q_WIDE
#define EB_HAS_Q_WIDE 0
#else
#define EB_HAS_Q_WIDE 1
#endif
#ifdef EB_OPT_NO_IM2COL
#define EB_HAS_IM2COL 0
#else
#define EB_HAS_IM2COL 1
#endif
#ifdef EB_OPT_NO_IM2COL_S2 /* the strided gathers (eb_taps_row4s2, eb_taps_gather's inside
                              rows; twin ops.conv_path.gathers) */
#define EB_HAS_IM2COL_S2 0
#else
#define EB_HAS_IM2COL_S2 1
#endif
/* the padded band of a padded conv's im2col pass (eb_conv_band); it needs the direct columns */
#if defined(EB_OPT_NO_IM2COL_BAND) || defined(EB_OPT_NO_IM2COL_DIRECT)
#define EB_HAS_IM2COL_BAND 0
#else
#define EB_HAS_IM2COL_BAND 1
#endif
#ifdef EB_OPT_NO_GEMM_2PX /* the asm rows for blocks of 2 pixels, two rows at a time */
#define EB_HAS_GEMM_2PX 0
#else
#define EB_HAS_GEMM_2PX 1
#endif
#ifdef EB_OPT_NO_GEMM_SHORT /* rows of fewer than 4 weights, 4 pixels (eb_dot_short) */
#define EB_HAS_GEMM_SHORT 0
#else
#define EB_HAS_GEMM_SHORT 1
#endif
#ifdef EB_OPT_NO_LINEAR_Q /* linear layers' register-requantizing rows (eb_linear_fast) */
#define EB_HAS_LINEAR_Q 0
#else
#define EB_HAS_LINEAR_Q 1
#endif

/* Two adjacent column words at c + off int16 (c 4-byte aligned: the caller's scratch is, and
 * chunks are 8 bytes). On the M4 one LDRD: GCC does not pair such loads itself for this core. */
#if EB_OPT_DSP && defined(__GNUC__)
#define EB_LOAD2X32(c, off, lo, hi)                                                      \
    __asm__("ldrd %0, %1, [%2, %3]"                                                      \
            : "=r"(lo), "=r"(hi)                                                         \
            : "r"(c), "n"(2 * (off)), "m"(*(const char(*)[8])(const void *)((c) + (off))))
#else
#define EB_LOAD2X32(c, off, lo, hi)     \
    do {                                \
        (lo) = eb_load32((c) + (off));     \
        (hi) = eb_load32((c) + (off) + 2); \
    } while (0)
#endif

/* One group of 4 weights (word wv) against one reordered column group ([a0,a2], [a1,a3]). */
#define EB_MAC4(acc, wlo, whi, c02, c13) \
    (acc) = eb_smlad((whi), (c13), eb_smlad((wlo), (c02), (acc)))


#if defined(__GNUC__)
#define EB_NOINLINE __attribute__((noinline))
#else
#define EB_NOINLINE
#endif

/* ---- columns -----------------------------------------------------------------------------
 * A column holds K input values (an output pixel's receptive field in weight order, or a
 * linear layer's input) as int16, zero-padded to kp = EB_OPT_ROUND4(K), in chunks of 4
 * stored as [a0, a2, a1, a3]: the words [a0, a2], [a1, a3] pair with SXTB16 and SXTB16 ROR 8
 * of the weight word [w0, w1, w2, w3]. The conv kernel works on EB_OPT_PIXELS = 4 output
 * pixels at once and keeps their columns interleaved chunk by chunk,
 * [P0 chunk q][P1 chunk q][P2 chunk q][P3 chunk q] (16 int16 per chunk), so that one pointer
 * walks all four.
 *
 * The conv columns are built in two steps. First the four receptive fields are gathered as
 * int8 into a "tap" array T: one word per k, T[k] = [x_k(P0), x_k(P1), x_k(P2), x_k(P3)].
 * When the four pixels are neighbours in one output row and stride_w is 1, T[k] is simply
 * the input word at the tap's position (one unaligned LDR), otherwise it is filled byte by
 * byte. Then eb_transpose turns each group of 4 words of T into the four pixels' chunks
 * (SXTB16 and halfword packing: 16 instructions for 16 values). T lives in the upper half of
 * the column area: chunk q of the columns is written only after the words it overlaps have
 * been read. */

#define EB_OPT_PIXELS 4
#define EB_OPT_OC_BLOCK 8 /* output channels per eb_dot_block call (stack: 4 * 8 int32) */

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

/* The T word of the tap at column ix of any input row (in_w >= 4; lane j = byte ix + j, zero
 * outside [0, in_w)): the row's word at o shifted, (word >> rs) << ls, or zero (none). Inside
 * the row a plain load; overhanging its left or right end, its first or last word shifted so
 * that zeros come in. */
typedef struct {
    int32_t o;
    unsigned rs, ls;
    int kind;
} eb_tap_word;

enum { EB_TAP_ZERO, EB_TAP_LOAD, EB_TAP_SHIFT };

static eb_tap_word eb_tap_word_of(int ix, int in_w)
{
    eb_tap_word tw;
    tw.o = 0;
    tw.rs = 0;
    tw.ls = 0;
    tw.kind = EB_TAP_SHIFT;
    if (ix <= -4 || ix >= in_w) {
        tw.kind = EB_TAP_ZERO;
    } else if (ix < 0) {
        tw.ls = 8u * (unsigned)-ix;
    } else if (ix > in_w - 4) {
        tw.o = in_w - 4;
        tw.rs = 8u * (unsigned)(ix + 4 - in_w);
    } else {
        tw.o = ix;
        tw.kind = EB_TAP_LOAD;
    }
    return tw;
}

/* For every input channel and tap row in range: the word x at base + o (o = tw.o + ic * plane
 * + row * row_step) as `expr`, to d (tap rows kw4 bytes apart, `skip` more per channel); one
 * flat loop over the channels, two per step, when there is one tap row (1-D layers). */
#define EB_TAP_COLUMN(expr)                                                      \
    if (rows == 1) {                                                             \
        const int8_t *s_ = base + tw.o;                                          \
        const int32_t dstep_ = kw4 + skip;                                       \
        for (ic = 0; ic + 2 <= ipg; ic += 2, s_ += 2 * plane, d += 2 * dstep_) { \
            uint32_t x = eb_load32(s_);                                          \
            eb_store32(d, (expr));                                               \
            x = eb_load32(s_ + plane);                                           \
            eb_store32(d + dstep_, (expr));                                      \
        }                                                                        \
        if (ic < ipg) {                                                          \
            const uint32_t x = eb_load32(s_);                                    \
            eb_store32(d, (expr));                                               \
        }                                                                        \
    } else {                                                                     \
        for (ic = 0; ic < ipg; ++ic, d += skip) {                                \
            int32_t o = tw.o + ic * plane;                                       \
            for (ky = 0; ky < rows; ++ky, o += row_step, d += kw4) {             \
                const uint32_t x = eb_load32(base + o);                          \
                eb_store32(d, (expr));                                           \
            }                                                                    \
        }                                                                        \
    }

/* T for four neighbouring pixels (oy, ox .. ox + 3) of a stride_w == 1 conv, in_w >= 4: tap
 * column by tap column (kx), whose word position in a row (eb_tap_word_of) is the same for
 * every input channel and tap row, one load and store per T word (two shifts more at a row
 * end); tap rows in the padding are zero words. */
static void eb_taps_row4(const eb_conv_params *p, const int8_t *in_g, int ipg, int oy, int ox,
                         int8_t *t)
{
    const int in_h = p->in_h, in_w = p->in_w, k_h = p->k_h, k_w = p->k_w;
    const int dil_h = p->dil_h;
    const int iy0 = oy * p->stride_h - p->pad_h, ix0 = ox - p->pad_w;
    const int32_t plane = (int32_t)in_h * in_w, row_step = (int32_t)dil_h * in_w;
    const int32_t kw4 = 4 * (int32_t)k_w;
    int ky_lo, ky_hi, rows;
    int32_t skip;
    const int8_t *base;
    int ic, ky, kx;

    eb_tap_range(iy0, dil_h, k_h, in_h, &ky_lo, &ky_hi);
    if (ky_lo > 0 || ky_hi < k_h) {
        int8_t *d = t;
        for (ic = 0; ic < ipg; ++ic) {
            for (ky = 0; ky < k_h; ++ky, d += kw4) {
                if (ky < ky_lo || ky >= ky_hi) {
                    memset(d, 0, (size_t)kw4);
                }
            }
        }
    }
    if (ky_lo >= ky_hi) {
        return;
    }
    rows = ky_hi - ky_lo;
    skip = (int32_t)(k_h - rows) * kw4;
    base = in_g + (int32_t)(iy0 + ky_lo * dil_h) * in_w;
    for (kx = 0; kx < k_w; ++kx) {
        const eb_tap_word tw = eb_tap_word_of(ix0 + kx * p->dil_w, in_w);
        int8_t *d = t + (int32_t)ky_lo * kw4 + 4 * kx;
        if (tw.kind == EB_TAP_LOAD) {
            EB_TAP_COLUMN(x)
        } else if (tw.kind == EB_TAP_SHIFT) {
            EB_TAP_COLUMN((x >> tw.rs) << tw.ls)
        } else {
            EB_TAP_COLUMN(0u * x)
        }
    }
}

/* The bytes r[off[0..3]] as one T word (lane j: byte j): four pixels' values of a tap that
 * the gathers (eb_taps_gather, eb_taps_row4s2 at a row end) read one by one. */
static inline uint32_t eb_bytes4(const int8_t *r, const int32_t *off)
{
    return (uint32_t)(uint8_t)r[off[0]] | (uint32_t)(uint8_t)r[off[1]] << 8 |
           (uint32_t)(uint8_t)r[off[2]] << 16 | (uint32_t)(uint8_t)r[off[3]] << 24;
}

/* Bytes 0 and 2 of a, then of b: [a0, a2, b0, b2], the lanes of four pixels two columns
 * apart from the words at x and x + 4: the even bytes as halfwords (an AND), paired by
 * PKHBT / PKHTB, interleaved by an ORR with a shift -- 5 instructions on the M4. */
static inline uint32_t eb_even_bytes(uint32_t a, uint32_t b)
{
    const uint32_t u0 = a & 0x00FF00FFu, u1 = b & 0x00FF00FFu; /* [a0, a2], [b0, b2] */
    return eb_pack_lo(u0, u1) | (eb_pack_hi(u0, u1) << 8);
}

/* T for four neighbouring pixels (oy, ox .. ox + 3) of a stride_w == 2 conv: lane j of a tap
 * column starting at ix is byte ix + 2j of its row. Per tap column, once for every input
 * channel and tap row: inside the row (0 <= ix, ix + 8 <= in_w) two word loads make each
 * T word (eb_even_bytes); at a row end the lanes' offsets and the mask of those inside are
 * worked out and each T word is 4 LDRB merged and masked (as eb_taps_gather does per tap and
 * pixel block, which costs more than the MACs of a conv with few input channels); tap rows
 * in the padding are zero words. */
static void eb_taps_row4s2(const eb_conv_params *p, const int8_t *in_g, int ipg, int oy, int ox,
                           int8_t *t)
{
    const int in_h = p->in_h, in_w = p->in_w, k_h = p->k_h, k_w = p->k_w;
    const int iy0 = oy * p->stride_h - p->pad_h, ix0 = 2 * ox - p->pad_w;
    const int32_t plane = (int32_t)in_h * in_w, row_step = (int32_t)p->dil_h * in_w;
    const int32_t kw4 = 4 * (int32_t)k_w;
    int ky_lo, ky_hi, ic, ky, kx, j;

    eb_tap_range(iy0, p->dil_h, k_h, in_h, &ky_lo, &ky_hi);
    for (ic = 0; ic < ipg; ++ic) {
        int8_t *d = t + (int32_t)ic * k_h * kw4;
        for (ky = 0; ky < k_h; ++ky, d += kw4) {
            if (ky < ky_lo || ky >= ky_hi) {
                memset(d, 0, (size_t)kw4);
            }
        }
    }
    if (ky_lo >= ky_hi) {
        return;
    }
    for (kx = 0; kx < k_w; ++kx) {
        const int ix = ix0 + kx * p->dil_w;
        const int8_t *r0 = in_g + (int32_t)(iy0 + ky_lo * p->dil_h) * in_w;
        int8_t *d0 = t + (int32_t)ky_lo * kw4 + 4 * kx;
        if (ix >= 0 && ix + 8 <= in_w) {
            for (ic = 0; ic < ipg; ++ic, r0 += plane, d0 += (int32_t)k_h * kw4) {
                const int8_t *r = r0 + ix;
                int8_t *d = d0;
                for (ky = ky_lo; ky < ky_hi; ++ky, r += row_step, d += kw4) {
                    eb_store32(d, eb_even_bytes(eb_load32(r), eb_load32(r + 4)));
                }
            }
        } else {
            int32_t off[EB_OPT_PIXELS];
            uint32_t mask = 0;
            for (j = 0; j < EB_OPT_PIXELS; ++j) {
                const int x = ix + 2 * j, in = x >= 0 && x < in_w;
                off[j] = in ? x : 0;
                mask |= in ? 0xFFu << (8 * j) : 0u;
            }
            for (ic = 0; ic < ipg; ++ic, r0 += plane, d0 += (int32_t)k_h * kw4) {
                const int8_t *r = r0;
                int8_t *d = d0;
                for (ky = ky_lo; ky < ky_hi; ++ky, r += row_step, d += kw4) {
                    eb_store32(d, eb_bytes4(r, off) & mask);
                }
            }
        }
    }
}

/* T for four consecutive pixels (px .. px + 3, `left` >= 1 of them in the output) whose
 * block spans output rows, stride_w == 1: per output row, eb_taps_row4 builds the lanes of
 * the pixels in that row (run from lane j0, started j0 pixels to the left so that lane j is
 * pixel ox + j - j0), into t directly for the first row, else into `other` (k words, the
 * column area, not yet in use) merged in by a byte mask. Lanes past the output repeat
 * nothing useful and are not stored. */
static void eb_taps_rows(const eb_conv_params *p, const int8_t *in_g, int ipg, int oy, int ox,
                         int32_t left, int8_t *other, int8_t *t, int32_t k)
{
    const int out_w = p->out_w;
    int j0 = out_w - ox; /* lanes of the first row */
    eb_taps_row4(p, in_g, ipg, oy, ox, t);
    while (j0 < EB_OPT_PIXELS && j0 < left && oy + 1 < p->out_h) {
        const uint32_t mask = 0xFFFFFFFFu << (8 * j0);
        int32_t q;
        ++oy;
        eb_taps_row4(p, in_g, ipg, oy, -j0, other);
        for (q = 0; q < k; ++q) {
            const uint32_t a = eb_load32(t + 4 * q), b = eb_load32(other + 4 * q);
            eb_store32(t + 4 * q, (a & ~mask) | (b & mask));
        }
        j0 += out_w;
    }
}

/* A tap's T words of every input channel: the bytes at src + at[0..3] (a plane apart), masked
 * -- the offsets in registers (4 LDRB, 3 ORR, AND, STR a channel). */
static inline void eb_gather_words(const int8_t *src, const int32_t *at, uint32_t mask,
                                   int ipg, int32_t plane, int8_t *d, int32_t step)
{
    const int32_t o0 = at[0], o1 = at[1], o2 = at[2], o3 = at[3];
    int ic;
    for (ic = 0; ic < ipg; ++ic, src += plane, d += step) {
        const uint32_t w = (uint32_t)(uint8_t)src[o0] | (uint32_t)(uint8_t)src[o1] << 8 |
                           (uint32_t)(uint8_t)src[o2] << 16 | (uint32_t)(uint8_t)src[o3] << 24;
        eb_store32(d, w & mask);
    }
}

/* T for pixels px .. px + count - 1 of any conv (other strides, maps narrower than 4, blocks
 * spanning rows of those), gathered byte by byte: per tap (ky, kx) the four pixels' offsets
 * in a channel plane and the mask of the lanes inside the input (lanes past count: none)
 * are worked out once and serve every input channel: 4 LDRB, the lanes merged and masked,
 * one STR per T word. Lanes outside the input read offset 0 and are masked to zero. With
 * the strided gathers linked (EB_HAS_IM2COL_S2; twin ops.conv_path.gathers: stride 2, or
 * more with taps inside), a kernel row whose taps lie inside the input for every lane (the
 * rows [ylo, yhi) and columns worked out once a block; an unpadded conv's every row) reads
 * its lanes' offsets from its row's start, a pointer a column on a tap: the lanes' offsets
 * and bounds worked out per tap cost about 100 instructions, more than 6 input channels'
 * words (seed 11's 48 -> 64 9x9 stride 2 in 8 groups on 24 x 18: 2.021 -> 1.69 insn/MAC). */
static EB_NOINLINE void eb_taps_gather(const eb_conv_params *p, const int8_t *in_g, int ipg,
                                       int32_t px, int count, int8_t *t)
{
    const int in_h = p->in_h, in_w = p->in_w, k_w = p->k_w, out_w = p->out_w;
    const int32_t plane = (int32_t)in_h * in_w, step = 4 * (int32_t)p->k_h * k_w;
    int iy0[EB_OPT_PIXELS], ix0[EB_OPT_PIXELS];
    int j, ky, kx;
#if EB_HAS_IM2COL_S2
    const uint32_t live = 0xFFFFFFFFu >> (8 * (EB_OPT_PIXELS - count)); /* count: 1..4 */
    const int dil_h = p->dil_h;
    int ylo = 0, yhi = p->k_h, xin = 1; /* the kernel rows inside for every lane: [ylo, yhi) */
#endif

    for (j = 0; j < EB_OPT_PIXELS; ++j) {
        const int32_t pj = px + (j < count ? j : 0);
        iy0[j] = (int)(pj / out_w) * p->stride_h - p->pad_h;
        ix0[j] = (int)(pj % out_w) * p->stride_w - p->pad_w;
#if EB_HAS_IM2COL_S2 /* (a lane past count is lane 0) */
        {
            const int lo = iy0[j] < 0 ? (dil_h - 1 - iy0[j]) / dil_h : 0;
            const int hi = iy0[j] < in_h ? (in_h - 1 - iy0[j]) / dil_h + 1 : 0;
            ylo = lo > ylo ? lo : ylo;
            yhi = hi < yhi ? hi : yhi;
            xin &= ix0[j] >= 0 && ix0[j] + (k_w - 1) * p->dil_w < in_w;
        }
#endif
    }
    for (ky = 0; ky < p->k_h; ++ky) {
#if EB_HAS_IM2COL_S2
        if (xin && ky >= ylo && ky < yhi) {
            int32_t row[EB_OPT_PIXELS]; /* a lane's row start plus its first column */
            for (j = 0; j < EB_OPT_PIXELS; ++j) {
                row[j] = (int32_t)(iy0[j] + ky * dil_h) * in_w + ix0[j];
            }
            for (kx = 0; kx < k_w; ++kx) { /* (lanes past count: lane 0's offset) */
                eb_gather_words(in_g + kx * p->dil_w, row, live, ipg, plane,
                                t + 4 * (ky * k_w + kx), step);
            }
            continue;
        }
#endif
        for (kx = 0; kx < k_w; ++kx) {
            int32_t off[EB_OPT_PIXELS];
            uint32_t mask = 0;
            for (j = 0; j < EB_OPT_PIXELS; ++j) {
                const int iy = iy0[j] + ky * p->dil_h, ix = ix0[j] + kx * p->dil_w;
                const int in = j < count && iy >= 0 && iy < in_h && ix >= 0 && ix < in_w;
                off[j] = in ? (int32_t)iy * in_w + ix : 0;
                mask |= in ? 0xFFu << (8 * j) : 0u;
            }
            eb_gather_words(in_g, off, mask, ipg, plane, t + 4 * (ky * k_w + kx), step);
        }
    }
}

/* T (kp words at t, 4-byte aligned: the scratch) -> the four interleaved columns at cols (kp
 * chunks of 16 int16). */
static EB_NOINLINE void eb_transpose(const int8_t *t, int32_t kp, int16_t *cols)
{
    const int16_t *tw = (const int16_t *)(const void *)t; /* 4-byte aligned (scratch) */
    int32_t q;
    for (q = 0; q < kp; q += 4, cols += 16) {
        uint32_t t0, t1, t2, t3; /* T words of taps k0..k3, bytes = pixels 0..3 */
        EB_LOAD4X32(tw, t0, t1, t2, t3); /* one LDMIA on the M4 */
        eb_cols_chunk(t0, t1, t2, t3, cols);
    }
}

/* The tap offsets eb_block_cols keeps for the direct columns: on the stack (the scratch
 * holds the columns and the T words, which overlap), so for at most EB_DIRECT_TAPS taps. */
#define EB_DIRECT_TAPS 128
typedef struct {
    int32_t off[EB_DIRECT_TAPS];
    int row;    /* the output row they are for; -1: none */
    int inside; /* whether that row's taps lie inside the input's rows (no padding row) */
} eb_tap_table;

#if !defined(EB_OPT_NO_IM2COL_DIRECT)
#define EB_IM2COL_DIRECT 1
/* The table for output row oy of a conv of stride_w 1 or 2: whether its tap rows lie inside
 * the input (iy = oy stride_h - pad_h >= 0, iy + (k_h - 1) dil_h < in_h) and then per tap
 * (input channel, kernel row, kernel column; the weights' order) the offset of its input
 * byte from pixel (oy, 0)'s position in the row, so that a block at ox inside the input
 * reads tap t's 4 pixels at in_g + stride_w ox + off[t] (every stride_w-th byte). */
static EB_NOINLINE void eb_tap_row(const eb_conv_params *p, int ipg, int oy, eb_tap_table *t)
{
    const int32_t plane = (int32_t)p->in_h * p->in_w, row = (int32_t)p->dil_h * p->in_w;
    const int iy = oy * p->stride_h - p->pad_h;
    const int32_t first = (int32_t)iy * p->in_w - p->pad_w;
    int32_t *off = t->off;
    int ic, ky, kx;
    t->row = oy;
    t->inside = iy >= 0 && iy + (p->k_h - 1) * p->dil_h < p->in_h;
    if (!t->inside) {
        return;
    }
    for (ic = 0; ic < ipg; ++ic) {
        for (ky = 0; ky < p->k_h; ++ky) {
            const int32_t o = first + (int32_t)ic * plane + (int32_t)ky * row;
            for (kx = 0; kx < p->k_w; ++kx) {
                *off++ = o + (int32_t)kx * p->dil_w;
            }
        }
    }
}

/* The columns of a block inside the input (eb_block_cols) straight from the input: per 4
 * taps 4 word loads at the row's offsets and eb_cols_chunk, where the T words cost a load
 * and a store each (with a row's set-up per tap column) and the transpose a load more; the
 * taps past k (to kp) zero, as eb_conv_core clears them. */
static EB_NOINLINE void eb_cols_direct(const int8_t *at, const int32_t *off, int32_t k,
                                       int16_t *cols)
{
    int32_t q;
    for (q = 0; q + 4 <= k; q += 4, off += 4, cols += 16) {
        eb_cols_chunk(eb_load32(at + off[0]), eb_load32(at + off[1]), eb_load32(at + off[2]),
                      eb_load32(at + off[3]), cols);
    }
    if (q < k) {
        const int32_t n = k - q;
        eb_cols_chunk(eb_load32(at + off[0]), n > 1 ? eb_load32(at + off[1]) : 0u,
                      n > 2 ? eb_load32(at + off[2]) : 0u, 0u, cols);
    }
}

#if EB_HAS_IM2COL_S2
/* eb_cols_chunk for 4 pixels of stride 2 from their taps' sign-extended halfwords: tap i's
 * word at at + off[i] holds pixels 0 and 1 in bytes 0 and 2 (its SXTB16 a_i = [p0, p1]),
 * the word after it pixels 2 and 3 (c_i) -- so the columns are those halfwords repacked:
 * 8 loads, SXTB16, PKH and stores a chunk of 4 taps, 9 instructions a tap where eb_taps_row4s2
 * and eb_transpose spent about 30 (a 2-channel 3x3 stride-2 conv: 560 a block of 4 pixels
 * for its 18 taps). */
static inline void eb_cols_chunk_s2(uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                    uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                    int16_t *cols)
{
    eb_cols_pixel(cols, a0, a1, a2, a3, 0);      /* P0 */
    eb_cols_pixel(cols + 4, a0, a1, a2, a3, 1);  /* P1 */
    eb_cols_pixel(cols + 8, c0, c1, c2, c3, 0);  /* P2 */
    eb_cols_pixel(cols + 12, c0, c1, c2, c3, 1); /* P3 */
}

/* Tap t's pixels 0, 1 (A) and 2, 3 (C) of a stride-2 block at `at`. */
#define EB_S2A(t) eb_sxtb16(eb_load32(at + off[t]))
#define EB_S2C(t) eb_sxtb16(eb_load32(at + off[t] + 4))

/* eb_cols_direct for a stride-2 block (eb_cols_chunk_s2). */
static EB_NOINLINE void eb_cols_direct_s2(const int8_t *at, const int32_t *off, int32_t k,
                                          int16_t *cols)
{
    int32_t q;
    for (q = 0; q + 4 <= k; q += 4, off += 4, cols += 16) {
        eb_cols_chunk_s2(EB_S2A(0), EB_S2A(1), EB_S2A(2), EB_S2A(3), EB_S2C(0), EB_S2C(1),
                         EB_S2C(2), EB_S2C(3), cols);
    }
    if (q < k) {
        const int32_t n = k - q;
        eb_cols_chunk_s2(EB_S2A(0), n > 1 ? EB_S2A(1) : 0u, n > 2 ? EB_S2A(2) : 0u, 0u,
                         EB_S2C(0), n > 1 ? EB_S2C(1) : 0u, n > 2 ? EB_S2C(2) : 0u, 0u, cols);
    }
}
#undef EB_S2A
#undef EB_S2C
#endif
#else
#define EB_IM2COL_DIRECT 0
#endif

/* n int8 values (n a multiple of 4) -> one column at dst (chunk stride 4). */
static void eb_expand(const int8_t *src, int32_t n, int16_t *dst)
{
    int32_t q;
    for (q = 0; q < n; q += 4, src += 4, dst += 4) {
        const uint32_t u = eb_load32(src);
        eb_store32(dst, eb_sxtb16(u));
        eb_store32(dst + 2, eb_sxtb16_ror8(u));
    }
}

/* ---- dot products -------------------------------------------------------------------------
 * k values per weight row (rows byte-aligned int8, k apart in the reference layout). The
 * last k % 4 weights of a row are read as a zero-padded word (never past the row); the
 * columns are zero-padded anyway. eb_dot_block starts from the bias itself, eb_dot_2x1 and
 * eb_dot_1x1 from the acc values passed in. Sums wrap like SMLAD (the reference's int32 sums
 * are the same whenever they do not overflow, which the contract guarantees). */

/* One weight word against the next chunk of the four interleaved columns (advances c). */
#define EB_DOT_1X4_CHUNK(wv)                          \
    do {                                              \
        const uint32_t lo_ = eb_sxtb16(wv);           \
        const uint32_t hi_ = eb_sxtb16_ror8(wv);      \
        uint32_t x0_, x1_, x2_, x3_;                  \
        EB_LOAD4X32(c, x0_, x1_, x2_, x3_);           \
        EB_MAC4(a0, lo_, hi_, x0_, x1_);              \
        EB_MAC4(a1, lo_, hi_, x2_, x3_);              \
        EB_LOAD4X32(c, x0_, x1_, x2_, x3_);           \
        EB_MAC4(a2, lo_, hi_, x0_, x1_);              \
        EB_MAC4(a3, lo_, hi_, x2_, x3_);              \
    } while (0)

/* The M4 loop of eb_dot_block_q by hand, a row's whole weight words: per word one LDR
 * (post-indexed), SXTB16 and SXTB16 ROR 8, two LDMIAs of the four pixels' column words (fixed
 * registers r4, r5, r6, r8: an LDM needs ascending ones) and 8 SMLADs (13 instructions per 16
 * MACs); 4 words per iteration of the loop (SUB, CMP, BGE on the column bytes left), then the
 * last 2 and 1 words under TST of those bytes, so that no row's words go through C (GCC's
 * loop spills). Needs GCC (register operands, Thumb-2) with optimisation (at -O0 r7 is the
 * frame pointer and the 9 operands may not fit); the C loop of eb_dot_block_q is its twin. */
#if EB_OPT_DSP && defined(__GNUC__) && defined(__OPTIMIZE__) && defined(__thumb2__)
#define EB_GEMM_ASM 1
#define EB_GEMM_WORD_ASM                         \
    "ldr    %[wa], [%[w]], #4\n\t"               \
    "sxtb16 %[lo], %[wa]\n\t"                    \
    "sxtb16 %[wa], %[wa], ror #8\n\t"            \
    "ldmia  %[c]!, {r4, r5, r6, r8}\n\t"         \
    "smlad  %[a0], %[lo], r4, %[a0]\n\t"         \
    "smlad  %[a0], %[wa], r5, %[a0]\n\t"         \
    "smlad  %[a1], %[lo], r6, %[a1]\n\t"         \
    "smlad  %[a1], %[wa], r8, %[a1]\n\t"         \
    "ldmia  %[c]!, {r4, r5, r6, r8}\n\t"         \
    "smlad  %[a2], %[lo], r4, %[a2]\n\t"         \
    "smlad  %[a2], %[wa], r5, %[a2]\n\t"         \
    "smlad  %[a3], %[lo], r6, %[a3]\n\t"         \
    "smlad  %[a3], %[wa], r8, %[a3]\n\t"

/* The weight words from *w against the columns from *c up to end (32 bytes of columns per
 * word; both pointers advanced). */
#define EB_GEMM_ROW_ASM(w, c, cend, a0, a1, a2, a3)                                         \
    do {                                                                                   \
        uint32_t wa_, lo_;                                                                 \
        __asm__ volatile("sub    %[lo], %[end], %[c]\n\t"                                   \
                         "cmp    %[lo], #128\n\t"                                          \
                         "blt    2f\n"                                                     \
                         "1:\n\t" EB_GEMM_WORD_ASM EB_GEMM_WORD_ASM EB_GEMM_WORD_ASM        \
                             EB_GEMM_WORD_ASM "sub    %[lo], %[end], %[c]\n\t"              \
                         "cmp    %[lo], #128\n\t"                                          \
                         "bge    1b\n"                                                     \
                         "2:\n\t"                                                         \
                         "tst    %[lo], #64\n\t"                                           \
                         "beq    3f\n\t" EB_GEMM_WORD_ASM EB_GEMM_WORD_ASM                  \
                         "sub    %[lo], %[end], %[c]\n"                                    \
                         "3:\n\t"                                                         \
                         "tst    %[lo], #32\n\t"                                           \
                         "beq    4f\n\t" EB_GEMM_WORD_ASM "4:"                              \
                         : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3),     \
                           [w] "+r"(w), [c] "+r"(c), [wa] "=&r"(wa_), [lo] "=&r"(lo_)      \
                         : [end] "r"(cend)                                                 \
                         : "r4", "r5", "r6", "r8", "cc", "memory");                        \
    } while (0)
#endif

/* Where a block of rows x pixels goes (eb_dot_block): requantized int8 (out8) with a right
 * shift s, the rounding addend r = 2^(s-1) (half up, s > 0) or 0 folded into the starting sum
 * (mode EB_Q_NONE / EB_Q_RELU: an ASR and SSAT #8 / USAT #7 per output); int32 (EB_Q_WIDE);
 * or the raw sums into acc (EB_Q_ACC) for eb_store (left shifts, abs). A row whose bias exceeds
 * lim (bias + r + the largest sum, K * 2^14, would overflow int32) is stored through
 * eb_requantize instead. out8 / out32 point at the block's first pixel of its first row; rows
 * are `stride` apart, `count` (1..4) pixels are stored. */
enum { EB_Q_ACC, EB_Q_WIDE, EB_Q_NONE, EB_Q_RELU };

typedef struct {
    int8_t *out8;
    int32_t *out32;
    int32_t *acc;
    int32_t stride, r, lim;
    int count, s, shift, rounding, act;
} eb_qdst;

#if defined(__GNUC__)
#define EB_DOT_INLINE static inline __attribute__((always_inline))
#else
#define EB_DOT_INLINE static inline
#endif

/* The count results of one row (a[0..3]) to d8 / d32 as `mode` says. */
EB_DOT_INLINE void eb_q_row(const int mode, const eb_qdst *d, int8_t *d8, int32_t *d32,
                            int32_t *acc, int exact, int32_t a0, int32_t a1, int32_t a2,
                            int32_t a3)
{
    const int count = d->count;
    if (mode == EB_Q_ACC) {
        acc[0] = a0;
        acc[1] = a1;
        acc[2] = a2;
        acc[3] = a3;
    } else if (mode == EB_Q_WIDE) {
        d32[0] = a0;
        if (count > 1) {
            d32[1] = a1;
            if (count > 2) {
                d32[2] = a2;
                if (count > 3) {
                    d32[3] = a3;
                }
            }
        }
    } else if (exact) { /* a bias near the int32 limit: the sums started without r */
        int32_t v[4];
        int j;
        v[0] = a0;
        v[1] = a1;
        v[2] = a2;
        v[3] = a3;
        for (j = 0; j < count; ++j) {
            d8[j] = eb_requantize(v[j], d->shift, d->rounding, d->act);
        }
    } else {
        const int s = d->s;
        if (count == 4) {
            d8[0] = (int8_t)(mode == EB_Q_RELU ? eb_usat7(a0 >> s) : eb_ssat8(a0 >> s));
            d8[1] = (int8_t)(mode == EB_Q_RELU ? eb_usat7(a1 >> s) : eb_ssat8(a1 >> s));
            d8[2] = (int8_t)(mode == EB_Q_RELU ? eb_usat7(a2 >> s) : eb_ssat8(a2 >> s));
            d8[3] = (int8_t)(mode == EB_Q_RELU ? eb_usat7(a3 >> s) : eb_ssat8(a3 >> s));
        } else {
            d8[0] = (int8_t)(mode == EB_Q_RELU ? eb_usat7(a0 >> s) : eb_ssat8(a0 >> s));
            if (count > 1) {
                d8[1] = (int8_t)(mode == EB_Q_RELU ? eb_usat7(a1 >> s) : eb_ssat8(a1 >> s));
                if (count > 2) {
                    d8[2] = (int8_t)(mode == EB_Q_RELU ? eb_usat7(a2 >> s) : eb_ssat8(a2 >> s));
                }
            }
        }
    }
}

/* Row w against the first two of the four interleaved columns at c: *s0 += w . P0,
 * *s1 += w . P1 (half the loads and MACs of the four-pixel loop, for a last partial block). */
EB_DOT_INLINE void eb_dot_1x2(int32_t k, const int8_t *w, const int16_t *c, int32_t *s0,
                              int32_t *s1)
{
    int32_t a0 = *s0, a1 = *s1;
    int32_t n = k >> 2;
    const int32_t tail = k & 3;
    uint32_t x0, x1, x2, x3;
    for (; n > 0; --n, w += 4, c += 16) {
        const uint32_t wv = eb_load32(w);
        const uint32_t lo = eb_sxtb16(wv), hi = eb_sxtb16_ror8(wv);
        EB_LOAD2X32(c, 0, x0, x1);
        EB_LOAD2X32(c, 4, x2, x3);
        EB_MAC4(a0, lo, hi, x0, x1);
        EB_MAC4(a1, lo, hi, x2, x3);
    }
    if (tail != 0) {
        const uint32_t wv = eb_load_tail(w, tail);
        const uint32_t lo = eb_sxtb16(wv), hi = eb_sxtb16_ror8(wv);
        EB_LOAD2X32(c, 0, x0, x1);
        EB_LOAD2X32(c, 4, x2, x3);
        EB_MAC4(a0, lo, hi, x0, x1);
        EB_MAC4(a1, lo, hi, x2, x3);
    }
    *s0 = a0;
    *s1 = a1;
}

/* eb_dot_block_q for a last block of 1 or 2 pixels (d->count): those lanes only (its own
 * function: inlined into the four-pixel ones, it costs their loops registers). */
static EB_NOINLINE void eb_dot_block_q2(const int mode, int32_t k, const int8_t *w,
                                        const int16_t *cols, int n_oc, const int32_t *bias,
                                        const eb_qdst *d)
{
    int8_t *d8 = d->out8;
    int32_t *d32 = d->out32, *acc = d->acc;
    int i;
    for (i = 0; i < n_oc; ++i, acc += EB_OPT_PIXELS, d8 += d->stride, d32 += d->stride, w += k) {
        const int32_t b = bias ? bias[i] : 0;
        const int exact = mode >= EB_Q_NONE && b > d->lim;
        int32_t a0 = mode >= EB_Q_NONE && !exact ? b + d->r : b;
        int32_t a1 = a0;
        eb_dot_1x2(k, w, cols, &a0, &a1);
        eb_q_row(mode, d, d8, d32, acc, exact, a0, a1, a1, a1);
    }
}

/* Rows w, w + k, ... (n_oc of them) against the four interleaved columns at cols, each
 * row's four sums started at its bias (0 without bias) and stored as d says. */
EB_DOT_INLINE void eb_dot_block_q(const int mode, int32_t k, const int8_t *w,
                                  const int16_t *cols, int n_oc, const int32_t *bias,
                                  const eb_qdst *d)
{
    const int32_t tail = k & 3;
    int8_t *d8 = d->out8;
    int32_t *d32 = d->out32, *acc = d->acc;
#ifdef EB_GEMM_ASM
    const int16_t *const cend = cols + 16 * (k >> 2);
#endif
    int i;
    for (i = 0; i < n_oc; ++i, acc += EB_OPT_PIXELS, d8 += d->stride, d32 += d->stride) {
        const int16_t *c = cols;
        const int32_t b = bias ? bias[i] : 0;
        const int exact = mode >= EB_Q_NONE && b > d->lim;
        int32_t a0 = mode >= EB_Q_NONE && !exact ? b + d->r : b;
        int32_t a1 = a0, a2 = a0, a3 = a0;
        int32_t n = k >> 2;
#ifdef EB_GEMM_ASM
        EB_GEMM_ROW_ASM(w, c, cend, a0, a1, a2, a3);
        n = 0;
#endif
        for (; n >= 2; n -= 2, w += 8) { /* two chunks per iteration */
            const uint32_t wv0 = eb_load32(w), wv1 = eb_load32(w + 4);
            EB_DOT_1X4_CHUNK(wv0);
            EB_DOT_1X4_CHUNK(wv1);
        }
        if (n != 0) {
            const uint32_t wv = eb_load32(w);
            EB_DOT_1X4_CHUNK(wv);
            w += 4;
        }
        if (tail != 0) {
            const uint32_t wv = eb_load_tail(w, tail);
            EB_DOT_1X4_CHUNK(wv);
            w += tail;
        }
        eb_q_row(mode, d, d8, d32, acc, exact, a0, a1, a2, a3);
    }
}

/* eb_dot_block_q with the mode an argument: one copy of the C loop for the forms that are
 * not the hot path of any layer -- the raw sums (EB_Q_ACC), wide convs, and on the M4 the
 * rows the assembly rows leave (an exact row, a block of 3 pixels, k < 4) -- instead of one
 * inlined copy each. */
#if defined(__GNUC__)
#define EB_NOCLONE __attribute__((noinline, noclone))
#else
#define EB_NOCLONE
#endif
static EB_NOCLONE void eb_dot_block_mode(int mode, int32_t k, const int8_t *w,
                                         const int16_t *cols, int n_oc, const int32_t *bias,
                                         const eb_qdst *d)
{
    if (d->count <= 2) {
        eb_dot_block_q2(mode, k, w, cols, n_oc, bias, d);
    } else {
        eb_dot_block_q(mode, k, w, cols, n_oc, bias, d);
    }
}

static void eb_dot_block_acc(int32_t k, const int8_t *w, const int16_t *cols, int n_oc,
                             const int32_t *bias, const eb_qdst *d)
{
    eb_dot_block_mode(EB_Q_ACC, k, w, cols, n_oc, bias, d);
}

#if defined(EB_GEMM_ASM) && EB_HAS_GEMM_SHORT
/* The rows of fewer than 4 weights (k < 4: a grouped 1x1 of 2 or 3 inputs a group, many
 * outputs each) against a block of 4 pixels, which the assembly rows leave (they read
 * whole weight words) and eb_dot_block_mode ran at about 29 instructions an output: the
 * pixels' column words read once for every row -- with `pair` (k = 2) joined into one word
 * a pixel, [x0 x1] (PKHBT), against the row's [w0 w1] (one LDRH, two SXTB16 and a PKHBT):
 * one SMLAD an output; else two -- then eb_q_row's stores, in the mode of the caller. A row
 * whose bias needs the exact requantization goes through eb_dot_block_mode alone. */
EB_DOT_INLINE void eb_dot_short_rows(const int mode, const int pair, int32_t k, const int8_t *w,
                                     const int16_t *cols, int n_oc, const int32_t *bias,
                                     const eb_qdst *d)
{
    static const int32_t zero = 0;
    const eb_qdst q = *d; /* a copy: the stores cannot alias it */
    const int32_t bstep = bias != NULL; /* no bias: every row's start 0 */
    int8_t *d8 = q.out8;
    uint32_t x[8], p[4];
    int i;
    memcpy(x, cols, sizeof x); /* pixel j: [x0 x2] [x1 x3] at words 2j, 2j + 1 */
    for (i = 0; i < 4; ++i) {
        p[i] = eb_pack_lo(x[2 * i], x[2 * i + 1]); /* [x0 x1] */
    }
    if (bias == NULL) {
        bias = &zero;
    }
    for (i = 0; i < n_oc; ++i, bias += bstep, w += k, d8 += q.stride) {
        const uint32_t wv = k == 1 ? (uint32_t)(uint8_t)w[0]
                            : pair ? eb_load16(w)
                                   : eb_load16(w) | (uint32_t)(uint8_t)w[2] << 16;
        const uint32_t lo = eb_sxtb16(wv), hi = eb_sxtb16_ror8(wv); /* [w0 w2] [w1 0] */
        const uint32_t wp = eb_pack_lo(lo, hi);                      /* [w0 w1] */
        const int32_t a = *bias + q.r;
        if (*bias > q.lim) {
            eb_qdst one = q;
            one.out8 = d8;
            eb_dot_block_mode(mode, k, w, cols, 1, bias, &one);
        } else if (pair) {
            eb_q_row(mode, &q, d8, NULL, NULL, 0, eb_smlad(wp, p[0], a), eb_smlad(wp, p[1], a),
                     eb_smlad(wp, p[2], a), eb_smlad(wp, p[3], a));
        } else {
            eb_q_row(mode, &q, d8, NULL, NULL, 0, eb_smlad(hi, x[1], eb_smlad(lo, x[0], a)),
                     eb_smlad(hi, x[3], eb_smlad(lo, x[2], a)),
                     eb_smlad(hi, x[5], eb_smlad(lo, x[4], a)),
                     eb_smlad(hi, x[7], eb_smlad(lo, x[6], a)));
        }
    }
}

/* eb_dot_short_rows for a block of 4 pixels (k = 2 its own copy); 0 where it does not
 * apply (k >= 4, or a block of fewer pixels). */
EB_DOT_INLINE int eb_dot_short(const int mode, int32_t k, const int8_t *w, const int16_t *cols,
                               int n_oc, const int32_t *bias, const eb_qdst *d)
{
    if (k >= 4 || d->count != 4) {
        return 0;
    }
    if (k == 2) {
        eb_dot_short_rows(mode, 1, 2, w, cols, n_oc, bias, d);
    } else {
        eb_dot_short_rows(mode, 0, k, w, cols, n_oc, bias, d);
    }
    return 1;
}
#define EB_DOT_SHORT(mode, k, w, cols, n_oc, bias, d) eb_dot_short(mode, k, w, cols, n_oc, bias, d)
#else
#define EB_DOT_SHORT(mode, k, w, cols, n_oc, bias, d) 0
#endif

#ifdef EB_GEMM_ASM
#include "eb_gemm_asm.h" /* eb_gemm_job, eb_gemm4_*, eb_gemm22_*, eb_gemm2_* (relu / none) */

/* The row functions of one output form: 4 pixels, 2 pixels in row pairs (NULL where the
 * project leaves "gemm_2px" out), 1 or 2 pixels a row at a time. */
typedef void (*eb_gemm_fn)(eb_gemm_job *job);
#if EB_HAS_GEMM_2PX
#define EB_GEMM22(form) eb_gemm22_##form
#else
#define EB_GEMM22(form) NULL
#endif

/* The job's rows through one form's functions: g4 for a block of 4 pixels, else a block of 2
 * first in row pairs (g22) and the rows those leave one at a time (g2). Inlined with its
 * functions constant: direct calls. */
EB_DOT_INLINE void eb_gemm_form(eb_gemm_job *job, eb_gemm_fn g4, eb_gemm_fn g22, eb_gemm_fn g2)
{
    if (job->count == 4) {
        g4(job);
        return;
    }
    if (g22 != NULL && job->count == 2) {
        g22(job);
        if (job->n == 0) {
            return;
        }
    }
    g2(job);
}

/* The job's rows in its output form (relu or none); a form left out of the project
 * (EB_OPT_NO_Q_*) does none of them (job->n stays: the callers' C path takes them). */
static void eb_gemm_run(int relu, eb_gemm_job *job)
{
#if EB_HAS_Q_RELU
    if (relu) {
        eb_gemm_form(job, eb_gemm4_relu, EB_GEMM22(relu), eb_gemm2_relu);
    }
#endif
#if EB_HAS_Q_NONE
    if (!relu) {
        eb_gemm_form(job, eb_gemm4_none, EB_GEMM22(none), eb_gemm2_none);
    }
#endif
    (void)relu;
    (void)job;
}

/* A layer's fields of the asm rows' job, the same for every block: k's whole words (span,
 * the int16 of their columns; skip, the word EB_GEMM_PASSES enters at) and tail, rows
 * `stride` outputs apart, the rounding addend r, the right shift s, the overflow limit lim,
 * count pixels. */
static void eb_gemm_layer(eb_gemm_job *g, int32_t k, int32_t stride, int32_t r, int32_t s,
                          int32_t lim, int count)
{
    g->span = 16 * (k >> 2);
    g->skip = (4 - ((k >> 2) & 3)) & 3;
    g->tail = k & 3;
    g->tsh = 32 - 8 * (k & 3);
    g->stride = stride;
    g->r = r;
    g->s = s;
    g->lim = lim;
    g->count = count;
}

/* eb_gemm_run over the rows it takes (k >= 4, count != 3; without a bias, 16 rows per call
 * against zeros): *w, *bias and *out8 then point at the first row left, whose count is
 * returned. */
#if EB_HAS_Q_RELU || EB_HAS_Q_NONE
static int eb_gemm_q(int relu, int32_t k, const int8_t **w, const int16_t *cols, int n_oc,
                     const int32_t **bias, const eb_qdst *d, int8_t **out8)
{
    static const int32_t zeros[16] = {0};
    eb_gemm_job job;
    if (d->count == 3 || k < 4 || n_oc < 1) {
        return n_oc;
    }
    eb_gemm_layer(&job, k, d->stride, d->r, d->s, d->lim, d->count);
    job.w = *w;
    job.cols = cols;
    job.cend = cols + job.span;
    job.out = d->out8;
    if (*bias != NULL) {
        job.bias = *bias;
        job.n = n_oc;
        eb_gemm_run(relu, &job);
        *bias = job.bias;
    } else {
        int left = n_oc;
        do {
            const int n = left < 16 ? left : 16;
            job.bias = zeros;
            job.n = n;
            eb_gemm_run(relu, &job);
            left -= n - job.n;
        } while (job.n == 0 && left > 0);
        n_oc = left;
        job.n = left;
    }
    *w = job.w;
    *out8 = job.out;
    return job.n;
}
#endif

/* n rows (weights w, biases bias) against one block's columns by the asm rows of g (its
 * layer's fields from eb_gemm_layer), the results from out on (rows g->stride apart).
 * Returns the rows left: those from an exact row on, g->w and g->bias pointing at it. */
static int eb_gemm_block(eb_gemm_job *g, int relu, const int8_t *w, const int16_t *cols,
                         const int32_t *bias, int8_t *out, int n)
{
    g->w = w;
    g->cols = cols;
    g->cend = cols + g->span;
    g->bias = bias;
    g->out = out;
    g->n = n;
    eb_gemm_run(relu, g);
    return g->n;
}
#endif

#if EB_HAS_Q_NONE
static EB_NOINLINE void eb_dot_block_none(int32_t k, const int8_t *w, const int16_t *cols,
                                          int n_oc, const int32_t *bias, const eb_qdst *d)
{
#ifdef EB_GEMM_ASM
    eb_qdst rest;
    int8_t *out8 = d->out8;
    const int left = eb_gemm_q(0, k, &w, cols, n_oc, &bias, d, &out8);
    if (left == 0 || EB_DOT_SHORT(EB_Q_NONE, k, w, cols, n_oc, bias, d)) {
        return;
    }
    if (left != n_oc) { /* an exact row: the rest as below */
        rest = *d;
        rest.out8 = out8;
        d = &rest;
        n_oc = left;
    }
    eb_dot_block_mode(EB_Q_NONE, k, w, cols, n_oc, bias, d);
#else
    if (d->count <= 2) {
        eb_dot_block_q2(EB_Q_NONE, k, w, cols, n_oc, bias, d);
    } else {
        eb_dot_block_q(EB_Q_NONE, k, w, cols, n_oc, bias, d);
    }
#endif
}
#endif

#if EB_HAS_Q_RELU
static EB_NOINLINE void eb_dot_block_relu(int32_t k, const int8_t *w, const int16_t *cols,
                                          int n_oc, const int32_t *bias, const eb_qdst *d)
{
#ifdef EB_GEMM_ASM
    eb_qdst rest;
    int8_t *out8 = d->out8;
    const int left = eb_gemm_q(1, k, &w, cols, n_oc, &bias, d, &out8);
    if (left == 0 || EB_DOT_SHORT(EB_Q_RELU, k, w, cols, n_oc, bias, d)) {
        return;
    }
    if (left != n_oc) { /* an exact row: the rest as below */
        rest = *d;
        rest.out8 = out8;
        d = &rest;
        n_oc = left;
    }
    eb_dot_block_mode(EB_Q_RELU, k, w, cols, n_oc, bias, d);
#else
    if (d->count <= 2) {
        eb_dot_block_q2(EB_Q_RELU, k, w, cols, n_oc, bias, d);
    } else {
        eb_dot_block_q(EB_Q_RELU, k, w, cols, n_oc, bias, d);
    }
#endif
}
#endif

/* One word of each of four rows against the column pair (x, xb) = ([c0, c2], [c1, c3]). */
#define EB_DOT_4X1_STEP(wa_, wb_, wc_, wd_)                                   \
    do {                                                                      \
        EB_MAC4(a0, eb_sxtb16(wa_), eb_sxtb16_ror8(wa_), x, xb);              \
        EB_MAC4(a1, eb_sxtb16(wb_), eb_sxtb16_ror8(wb_), x, xb);              \
        EB_MAC4(a2, eb_sxtb16(wc_), eb_sxtb16_ror8(wc_), x, xb);              \
        EB_MAC4(a3, eb_sxtb16(wd_), eb_sxtb16_ror8(wd_), x, xb);              \
    } while (0)

/* Rows w, w + k, w + 2k, w + 3k against one column at c: a[i] += (w + i k) . c. The
 * column words are loaded once for four rows (an LDRD per 16 MACs). `whole`: a row's last
 * 1..3 weights are loaded as a whole word (the bytes past the row meet zeros in the column:
 * where another row follows, so that nothing is read past the weights). */
EB_DOT_INLINE void eb_dot4(int32_t k, const int8_t *w, const int16_t *c, int32_t a[4], int whole)
{
    const int8_t *w2 = w + 2 * k; /* rows 0, 1 at w, w + k; rows 2, 3 at w2, w2 + k */
    const int16_t *const end = c + 4 * (k >> 2);
    const int32_t tail = k & 3;
    int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    uint32_t x, xb;
#if EB_OPT_DSP && defined(__GNUC__)
    /* By hand: GCC spills two accumulators here. 21 instructions per 16 MACs. */
    while (c != end) {
        uint32_t t0, t1, ta;
        __asm__("ldrd   %[x], %[xb], [%[c]], #8\n\t"
                "ldr    %[t0], [%[w], %[k]]\n\t"
                "ldr    %[t1], [%[w]], #4\n\t"
                "sxtb16 %[ta], %[t1]\n\t"
                "smlad  %[a0], %[ta], %[x], %[a0]\n\t"
                "sxtb16 %[t1], %[t1], ror #8\n\t"
                "smlad  %[a0], %[t1], %[xb], %[a0]\n\t"
                "sxtb16 %[ta], %[t0]\n\t"
                "smlad  %[a1], %[ta], %[x], %[a1]\n\t"
                "sxtb16 %[t0], %[t0], ror #8\n\t"
                "smlad  %[a1], %[t0], %[xb], %[a1]\n\t"
                "ldr    %[t0], [%[w2], %[k]]\n\t"
                "ldr    %[t1], [%[w2]], #4\n\t"
                "sxtb16 %[ta], %[t1]\n\t"
                "smlad  %[a2], %[ta], %[x], %[a2]\n\t"
                "sxtb16 %[t1], %[t1], ror #8\n\t"
                "smlad  %[a2], %[t1], %[xb], %[a2]\n\t"
                "sxtb16 %[ta], %[t0]\n\t"
                "smlad  %[a3], %[ta], %[x], %[a3]\n\t"
                "sxtb16 %[t0], %[t0], ror #8\n\t"
                "smlad  %[a3], %[t0], %[xb], %[a3]"
                : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [w] "+r"(w),
                  [w2] "+r"(w2), [c] "+r"(c), [x] "=&r"(x), [xb] "=&r"(xb), [t0] "=&r"(t0),
                  [t1] "=&r"(t1), [ta] "=&r"(ta)
                : [k] "r"(k)
                : "memory");
    }
#else
    for (; c != end; c += 4, w += 4, w2 += 4) {
        uint32_t wv;
        EB_LOAD2X32(c, 0, x, xb);
        wv = eb_load32(w);
        EB_MAC4(a0, eb_sxtb16(wv), eb_sxtb16_ror8(wv), x, xb);
        wv = eb_load32(w + k);
        EB_MAC4(a1, eb_sxtb16(wv), eb_sxtb16_ror8(wv), x, xb);
        wv = eb_load32(w2);
        EB_MAC4(a2, eb_sxtb16(wv), eb_sxtb16_ror8(wv), x, xb);
        wv = eb_load32(w2 + k);
        EB_MAC4(a3, eb_sxtb16(wv), eb_sxtb16_ror8(wv), x, xb);
    }
#endif
    if (tail != 0 && whole) {
        const uint32_t wa = eb_load32(w), wb = eb_load32(w + k);
        const uint32_t wc = eb_load32(w2), wd = eb_load32(w2 + k);
        EB_LOAD2X32(c, 0, x, xb);
        EB_DOT_4X1_STEP(wa, wb, wc, wd);
    } else if (tail != 0) {
        const uint32_t wa = eb_load_tail(w, tail), wb = eb_load_tail(w + k, tail);
        const uint32_t wc = eb_load_tail(w2, tail), wd = eb_load_tail(w2 + k, tail);
        EB_LOAD2X32(c, 0, x, xb);
        EB_DOT_4X1_STEP(wa, wb, wc, wd);
    }
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
}

static EB_NOINLINE void eb_dot_4x1(int32_t k, const int8_t *w, const int16_t *c,
                                   int32_t acc[4], int whole)
{
    eb_dot4(k, w, c, acc, whole);
}

#ifndef EB_LINEAR_ASM /* there eb_linear_asm */
/* `blocks` blocks of 4 rows from w (4 k bytes each) against the column c, each row's sum
 * started at its bias (NULL: 0) and stored to out as USAT #7 (relu) / SSAT #8 of the sum
 * requantized by eb_half (right shift s1 + 1, half up when h), straight from the registers.
 * `more`: a row follows the last block. */
#define EB_LINEAR_Q(a_, h_, s1_, relu_)                                                     \
    (int8_t)((relu_) ? eb_usat7(eb_half((a_) >> (s1_), h_) >> 1)                          \
                     : eb_ssat8(eb_half((a_) >> (s1_), h_) >> 1))
EB_DOT_INLINE void eb_linear_rows4(int32_t k, const int8_t *w, const int16_t *c,
                                   const int32_t *bias, int32_t h, int s1, int blocks,
                                   int more, int8_t *out, const int relu)
{
    int b;
    for (b = 0; b < blocks; ++b, w += 4 * k, out += 4) {
        int32_t a[4];
        if (bias != NULL) {
            a[0] = bias[0];
            a[1] = bias[1];
            a[2] = bias[2];
            a[3] = bias[3];
            bias += 4;
        } else {
            a[0] = a[1] = a[2] = a[3] = 0;
        }
        eb_dot4(k, w, c, a, more || b + 1 < blocks);
        out[0] = EB_LINEAR_Q(a[0], h, s1, relu);
        out[1] = EB_LINEAR_Q(a[1], h, s1, relu);
        out[2] = EB_LINEAR_Q(a[2], h, s1, relu);
        out[3] = EB_LINEAR_Q(a[3], h, s1, relu);
    }
}

static EB_NOINLINE void eb_linear_rows4_relu(int32_t k, const int8_t *w, const int16_t *c,
                                             const int32_t *bias, int32_t h, int s1,
                                             int blocks, int more, int8_t *out)
{
    eb_linear_rows4(k, w, c, bias, h, s1, blocks, more, out, 1);
}

static EB_NOINLINE void eb_linear_rows4_none(int32_t k, const int8_t *w, const int16_t *c,
                                             const int32_t *bias, int32_t h, int s1,
                                             int blocks, int more, int8_t *out)
{
    eb_linear_rows4(k, w, c, bias, h, s1, blocks, more, out, 0);
}
#endif

/* Rows w, w + k against one column at c: acc[0] += w . c, acc[1] += (w + k) . c. */
static EB_NOINLINE void eb_dot_2x1(int32_t k, const int8_t *w, const int16_t *c,
                                   int32_t acc[2])
{
    const int8_t *w1 = w + k;
    int32_t a0 = acc[0], a1 = acc[1];
    int32_t n = k >> 2;
    const int32_t tail = k & 3;
    uint32_t x, xb, wa, wb;
    for (; n > 0; --n, w += 4, w1 += 4, c += 4) {
        wa = eb_load32(w);
        wb = eb_load32(w1);
        EB_LOAD2X32(c, 0, x, xb);
        EB_MAC4(a0, eb_sxtb16(wa), eb_sxtb16_ror8(wa), x, xb);
        EB_MAC4(a1, eb_sxtb16(wb), eb_sxtb16_ror8(wb), x, xb);
    }
    if (tail != 0) {
        wa = eb_load_tail(w, tail);
        wb = eb_load_tail(w1, tail);
        EB_LOAD2X32(c, 0, x, xb);
        EB_MAC4(a0, eb_sxtb16(wa), eb_sxtb16_ror8(wa), x, xb);
        EB_MAC4(a1, eb_sxtb16(wb), eb_sxtb16_ror8(wb), x, xb);
    }
    acc[0] = a0;
    acc[1] = a1;
}

/* Row w against one column at c. */
static int32_t eb_dot_1x1(int32_t k, const int8_t *w, const int16_t *c, int32_t acc)
{
    int32_t n = k >> 2;
    const int32_t tail = k & 3;
    uint32_t x, xb, wa;
    for (; n > 0; --n, w += 4, c += 4) {
        wa = eb_load32(w);
        EB_LOAD2X32(c, 0, x, xb);
        EB_MAC4(acc, eb_sxtb16(wa), eb_sxtb16_ror8(wa), x, xb);
    }
    if (tail != 0) {
        wa = eb_load_tail(w, tail);
        EB_LOAD2X32(c, 0, x, xb);
        EB_MAC4(acc, eb_sxtb16(wa), eb_sxtb16_ror8(wa), x, xb);
    }
    return acc;
}

/* ---- packed weights ------------------------------------------------------------------------
 * 1-, 2- and 4-bit weights are packed G = 32 / b to a 32-bit word (eb_kernels.h): weights
 * 4s .. 4s + 3 of a word are field s (bits [b s, b s + b)) of its bytes 0..3. Field s moved
 * to the top of each byte and masked, (wv << (8 - b (s + 1))) & M (M: the top b bits of each
 * byte), is the word of 4 int8 weights w * 2^(8-b): one shift-and-mask (a single Thumb-2
 * AND with a shifted operand) replaces the load of an int8 weight word, and the same dual-MAC
 * chunk code runs on it. The sums are 2^(8-b) times the true ones (no overflow where int8
 * weights would not: |w| 2^(8-b) <= 128), so they start at 0 and the bias is added after the
 * exact arithmetic shift back. A row of k weights has ceil(k / 4) chunks; the columns are
 * zero-padded to as many, and so are the rows (whole words), so nothing past either is used.
 * -DEB_OPT_NO_PACKED (a project without packed layers) leaves this out. */
#ifndef EB_OPT_NO_PACKED
#define EB_OPT_PACKED 1

#if defined(__GNUC__)
#define EB_PK_INLINE static inline __attribute__((always_inline))
#else
#define EB_PK_INLINE static inline
#endif

/* The mask of the top b bits of every byte. */
#define EB_PK_MASK(b) ((b) == 4 ? 0xF0F0F0F0u : (b) == 2 ? 0xC0C0C0C0u : 0x80808080u)
/* Field s of the packed word wv as 4 int8 weights times 2^(8-b). */
#define EB_PK_FIELD(wv, b, s) (((wv) << (8 - (b) * ((s) + 1))) & EB_PK_MASK(b))

/* An empty asm that "changes" v once `after` is computed: the fields of a word are then
 * extracted one chunk at a time, not all at once (which runs GCC out of registers). */
#if defined(__GNUC__)
#define EB_PK_BARRIER(v, after) __asm__("" : "+r"(v) : "r"(after))
#define EB_PK_BARRIER2(v, u, after) __asm__("" : "+r"(v), "+r"(u) : "r"(after))
#else
#define EB_PK_BARRIER(v, after) ((void)0)
#define EB_PK_BARRIER2(v, u, after) ((void)0)
#endif

/* Every field of the packed word wv against the next 8 / b chunks of the four interleaved
 * columns at c (EB_DOT_1X4_CHUNK: a0..a3, c), written out so that each shift is a constant. */
#define EB_PK_CHUNK(wv, b, s)                       \
    do {                                            \
        const uint32_t x_ = EB_PK_FIELD(wv, b, s);  \
        EB_DOT_1X4_CHUNK(x_);                       \
        EB_PK_BARRIER(wv, a3);                      \
    } while (0)
#define EB_PK_WORD_1X4(wv, b)                                                          \
    do {                                                                               \
        if ((b) == 4) {                                                                \
            EB_PK_CHUNK(wv, 4, 0); EB_PK_CHUNK(wv, 4, 1);                              \
        } else if ((b) == 2) {                                                         \
            EB_PK_CHUNK(wv, 2, 0); EB_PK_CHUNK(wv, 2, 1);                              \
            EB_PK_CHUNK(wv, 2, 2); EB_PK_CHUNK(wv, 2, 3);                              \
        } else {                                                                       \
            EB_PK_CHUNK(wv, 1, 0); EB_PK_CHUNK(wv, 1, 1);                              \
            EB_PK_CHUNK(wv, 1, 2); EB_PK_CHUNK(wv, 1, 3);                              \
            EB_PK_CHUNK(wv, 1, 4); EB_PK_CHUNK(wv, 1, 5);                              \
            EB_PK_CHUNK(wv, 1, 6); EB_PK_CHUNK(wv, 1, 7);                              \
        }                                                                              \
    } while (0)

/* eb_dot_block over packed rows (row_bytes apart): acc[4 i + j] = bias[i] + row i . col j. */
EB_PK_INLINE void eb_pk_dot_block(const int bits, int32_t k, const int8_t *w,
                                  const int16_t *cols, int n_oc, const int32_t *bias,
                                  int32_t *acc)
{
    const int per = 8 / bits; /* chunks per word */
    const int32_t chunks = (k + 3) >> 2;
    const int32_t words = chunks / per, rest = chunks % per;
    const int32_t row_bytes = EB_PACKED_ROW_BYTES(k, bits);
    const int down = 8 - bits;
    int i, f;
    for (i = 0; i < n_oc; ++i, acc += EB_OPT_PIXELS, w += row_bytes) {
        const int16_t *c = cols;
        const int8_t *q = w;
        const int8_t *const end = w + 4 * words;
        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, b;
        for (; q != end; q += 4) {
            uint32_t wv = eb_load32(q);
            EB_PK_WORD_1X4(wv, bits);
        }
        if (rest != 0) { /* the row's last word: its first `rest` fields */
            uint32_t wv = eb_load32(q);
            for (f = 0; f < rest; ++f) {
                const uint32_t x = (wv << (8 - bits * (f + 1))) & EB_PK_MASK(bits);
                EB_DOT_1X4_CHUNK(x);
            }
        }
        b = bias ? bias[i] : 0;
        acc[0] = b + (a0 >> down);
        acc[1] = b + (a1 >> down);
        acc[2] = b + (a2 >> down);
        acc[3] = b + (a3 >> down);
    }
}

static EB_NOINLINE void eb_pk_dot_block4(int32_t k, const int8_t *w, const int16_t *cols,
                                         int n_oc, const int32_t *bias, int32_t *acc)
{
    eb_pk_dot_block(4, k, w, cols, n_oc, bias, acc);
}

static EB_NOINLINE void eb_pk_dot_block2(int32_t k, const int8_t *w, const int16_t *cols,
                                         int n_oc, const int32_t *bias, int32_t *acc)
{
    eb_pk_dot_block(2, k, w, cols, n_oc, bias, acc);
}

static EB_NOINLINE void eb_pk_dot_block1(int32_t k, const int8_t *w, const int16_t *cols,
                                         int n_oc, const int32_t *bias, int32_t *acc)
{
    eb_pk_dot_block(1, k, w, cols, n_oc, bias, acc);
}

/* Field f of the packed words wa (and wb when n == 2) against the next chunk of one column
 * at cp (advanced): a0 += row a . column, a1 += row b . column (times 2^(8-b)). */
#define EB_PK_ROWS_FIELD(b, f)                                            \
    do {                                                                  \
        uint32_t x_, xb_;                                                 \
        const uint32_t va_ = EB_PK_FIELD(wa, b, f);                       \
        EB_LOAD2X32(cp, 0, x_, xb_);                                      \
        cp += 4;                                                          \
        EB_MAC4(a0, eb_sxtb16(va_), eb_sxtb16_ror8(va_), x_, xb_);        \
        EB_PK_BARRIER2(wa, cp, a0);                                       \
        if (n == 2) {                                                     \
            const uint32_t vb_ = EB_PK_FIELD(wb, b, f);                   \
            EB_MAC4(a1, eb_sxtb16(vb_), eb_sxtb16_ror8(vb_), x_, xb_);    \
            EB_PK_BARRIER2(wb, cp, a1);                                   \
        }                                                                 \
    } while (0)

/* Rows w and w + row_bytes (n: 1 or 2 of them) against one column at cols: acc[r] += row r
 * . column (eb_dot_2x1 / eb_dot_1x1 over packed rows). */
EB_PK_INLINE void eb_pk_dot_rows(const int bits, int32_t k, const int8_t *w, const int n,
                                 const int16_t *cols, int32_t acc[2])
{
    const int per = 8 / bits;
    const int32_t chunks = (k + 3) >> 2;
    const int32_t words = chunks / per, rest = chunks % per;
    const int32_t row_bytes = EB_PACKED_ROW_BYTES(k, bits);
    const int down = 8 - bits;
    const int16_t *cp = cols;
    const int8_t *q = w;
    const int8_t *const end = w + 4 * words;
    int32_t a0 = 0, a1 = 0;
    int f;
    for (; q != end; q += 4) {
        uint32_t wa = eb_load32(q), wb = n == 2 ? eb_load32(q + row_bytes) : 0u;
        if (bits == 4) {
            EB_PK_ROWS_FIELD(4, 0); EB_PK_ROWS_FIELD(4, 1);
        } else if (bits == 2) {
            EB_PK_ROWS_FIELD(2, 0); EB_PK_ROWS_FIELD(2, 1);
            EB_PK_ROWS_FIELD(2, 2); EB_PK_ROWS_FIELD(2, 3);
        } else {
            EB_PK_ROWS_FIELD(1, 0); EB_PK_ROWS_FIELD(1, 1);
            EB_PK_ROWS_FIELD(1, 2); EB_PK_ROWS_FIELD(1, 3);
            EB_PK_ROWS_FIELD(1, 4); EB_PK_ROWS_FIELD(1, 5);
            EB_PK_ROWS_FIELD(1, 6); EB_PK_ROWS_FIELD(1, 7);
        }
    }
    if (rest != 0) { /* the rows' last words: their first `rest` fields */
        uint32_t wa = eb_load32(q), wb = n == 2 ? eb_load32(q + row_bytes) : 0u;
        for (f = 0; f < rest; ++f) {
            EB_PK_ROWS_FIELD(bits, f);
        }
    }
    acc[0] += a0 >> down;
    if (n == 2) {
        acc[1] += a1 >> down;
    }
}

#define EB_PK_ROWS(b)                                                                  \
    static EB_NOINLINE void eb_pk_dot_rows##b(int32_t k, const int8_t *w, int n,       \
                                              const int16_t *cols, int32_t acc[2])     \
    {                                                                                  \
        if (n == 2) {                                                                  \
            eb_pk_dot_rows(b, k, w, 2, cols, acc);                                     \
        } else {                                                                       \
            eb_pk_dot_rows(b, k, w, 1, cols, acc);                                     \
        }                                                                              \
    }
EB_PK_ROWS(4)
EB_PK_ROWS(2)
EB_PK_ROWS(1)
#undef EB_PK_ROWS

/* The packed variant of eb_dot_block for `bits` (1, 2, 4). */
static void eb_pk_dot(int bits, int32_t k, const int8_t *w, const int16_t *cols, int n_oc,
                      const int32_t *bias, int32_t *acc)
{
    if (bits == 4) {
        eb_pk_dot_block4(k, w, cols, n_oc, bias, acc);
    } else if (bits == 2) {
        eb_pk_dot_block2(k, w, cols, n_oc, bias, acc);
    } else {
        eb_pk_dot_block1(k, w, cols, n_oc, bias, acc);
    }
}

/* eb_pk_dot_rows for `bits`. */
static void eb_pk_rows(int bits, int32_t k, const int8_t *w, int n, const int16_t *cols,
                       int32_t acc[2])
{
    if (bits == 4) {
        eb_pk_dot_rows4(k, w, n, cols, acc);
    } else if (bits == 2) {
        eb_pk_dot_rows2(k, w, n, cols, acc);
    } else {
        eb_pk_dot_rows1(k, w, n, cols, acc);
    }
}
#else
#define EB_OPT_PACKED 0
#endif

/* ---- output ---------------------------------------------------------------------------- */

/* Where results go: requantized int8 (out8) or the raw accumulator (out32). */
typedef struct {
    int8_t *out8;
    int32_t *out32;
    int shift, rounding, act;
} eb_sink;

/* The sink of out: int32 accumulators when wide (no requantization), else int8 requantized
 * by shift, rounding and act. */
static eb_sink eb_sink_of(void *out, int wide, int shift, int rounding, int act)
{
    eb_sink s;
    s.out8 = wide ? NULL : (int8_t *)out;
    s.out32 = wide ? (int32_t *)out : NULL;
    s.shift = wide ? 0 : shift;
    s.rounding = wide ? 0 : rounding;
    s.act = wide ? 0 : act;
    return s;
}

/* eb_requantize for a right shift by s = -shift in [0, 31], in 32 bits: with half up (s > 0)
 * floor((acc + 2^(s-1)) / 2^s) = (acc >> s) + bit s - 1 of acc (acc = q * 2^s + r: r + 2^(s-1)
 * carries into q exactly when r >= 2^(s-1)), which cannot overflow; floor (or s == 0) is
 * acc >> s alone (rmask 0). Then SSAT #8 (none), USAT #7 (relu) or both around an abs. */
static inline int32_t eb_rq_shift(int32_t acc, int s, int rbit, int32_t rmask)
{
    return (acc >> s) + ((acc >> rbit) & rmask);
}

static inline int8_t eb_rq_act(int32_t v, int act)
{
    if (act == EB_ACT_RELU) {
        return (int8_t)eb_usat7(v);
    }
    if (act == EB_ACT_ABS) {
        v = eb_ssat8(v);
        return (int8_t)eb_usat7(v < 0 ? -v : v);
    }
    return (int8_t)eb_ssat8(v);
}

/* One inlined copy per constant act: the shift and rounding are in registers. */
#define EB_REQUANTIZE_BLOCK(act_)                                                         \
    for (i = 0; i < rows; ++i, out += row_stride, acc += acc_stride) {                    \
        for (j = 0; j < count; ++j) {                                                     \
            out[j] = eb_rq_act(eb_rq_shift(acc[j], sh, rbit, rmask), (act_));             \
        }                                                                                 \
    }

/* out[index + i * row_stride + j] = result of acc[i * acc_stride + j], i < rows, j < count. */
static void eb_store(const eb_sink *s, int32_t index, int32_t row_stride,
                     const int32_t *acc, int acc_stride, int rows, int count)
{
    int i, j;
    if (s->out8 == NULL) {
        int32_t *const out = s->out32 + index;
        for (i = 0; i < rows; ++i) {
            for (j = 0; j < count; ++j) {
                out[i * row_stride + j] = acc[i * acc_stride + j];
            }
        }
    } else {
        int8_t *out = s->out8 + index;
        const int shift = s->shift, act = s->act;
        if (shift <= 0 && shift >= -31) { /* the usual case: a right shift (or none) */
            const int sh = -shift;
            const int rbit = sh > 0 ? sh - 1 : 0;
            const int32_t rmask = (sh > 0 && s->rounding == EB_ROUND_HALF_UP) ? 1 : 0;
            if (act == EB_ACT_RELU) {
                EB_REQUANTIZE_BLOCK(EB_ACT_RELU)
            } else if (act == EB_ACT_NONE) {
                EB_REQUANTIZE_BLOCK(EB_ACT_NONE)
            } else {
                EB_REQUANTIZE_BLOCK(EB_ACT_ABS)
            }
        } else { /* left shifts, shifts past 31: the reference arithmetic */
            for (i = 0; i < rows; ++i) {
                for (j = 0; j < count; ++j) {
                    out[i * row_stride + j] =
                        eb_requantize(acc[i * acc_stride + j], shift, s->rounding, act);
                }
            }
        }
    }
}

/* Where a layer's blocks go (eb_dot_block), the same for every block but its pixels: int8
 * requantized in the fast form (returns 1: relu or none, a right shift, half-up or floor
 * rounding; d->out8 at index 0), else 0: int32 (d->out32 at index 0) or through eb_store. */
static int eb_qdst_of(const eb_sink *s, int32_t k, int32_t hw, eb_qdst *d)
{
    d->out8 = NULL;
    d->out32 = s->out32;
    d->acc = NULL;
    d->stride = hw;
    d->count = EB_OPT_PIXELS;
    d->s = 0;
    d->r = 0;
    d->lim = INT32_MAX;
    if (s->out8 != NULL && s->shift <= 0 && s->shift >= -31 &&
        ((EB_HAS_Q_NONE && s->act == EB_ACT_NONE) || (EB_HAS_Q_RELU && s->act == EB_ACT_RELU)) &&
        (s->rounding == EB_ROUND_HALF_UP || s->rounding == EB_ROUND_FLOOR)) {
        const int64_t room = (int64_t)INT32_MAX - (int64_t)k * 16384; /* |w x| <= 2^14 */
        d->s = -s->shift;
        d->r = d->s > 0 && s->rounding == EB_ROUND_HALF_UP ? (int32_t)1 << (d->s - 1) : 0;
        d->lim = room - d->r < INT32_MIN ? INT32_MIN : (int32_t)(room - d->r);
        d->shift = s->shift;
        d->rounding = s->rounding;
        d->act = s->act;
        d->out8 = s->out8;
        return 1;
    }
    return 0;
}

/* Rows w, w + k, ... (n_oc of them) against the four interleaved columns at cols, the
 * results of count (1..4) pixels to s's output at index + i * hw + j: requantized or wide
 * straight from the registers (eb_dot_block_*), else (left shifts, abs) through eb_store. */
static void eb_dot_store(const eb_sink *s, int32_t k, const int8_t *w, const int16_t *cols,
                         int n_oc, const int32_t *bias, int32_t index, int32_t hw, int count)
{
    eb_qdst d;
    const int fast = eb_qdst_of(s, k, hw, &d);
    int oc;
    d.count = count;
#if EB_HAS_Q_WIDE
    if (s->out8 == NULL) {
        d.out32 += index;
        eb_dot_block_mode(EB_Q_WIDE, k, w, cols, n_oc, bias, &d);
        return;
    }
#endif
    if (fast) {
        d.out8 += index;
#if EB_HAS_Q_RELU
        if (s->act == EB_ACT_RELU) {
            eb_dot_block_relu(k, w, cols, n_oc, bias, &d);
            return;
        }
#endif
#if EB_HAS_Q_NONE
        eb_dot_block_none(k, w, cols, n_oc, bias, &d);
#endif
        return;
    }
    for (oc = 0; oc < n_oc; oc += EB_OPT_OC_BLOCK) {
        const int n = n_oc - oc < EB_OPT_OC_BLOCK ? n_oc - oc : EB_OPT_OC_BLOCK;
        int32_t acc[EB_OPT_OC_BLOCK * EB_OPT_PIXELS];
        d.acc = acc;
        eb_dot_block_acc(k, w + (int32_t)oc * k, cols, n, bias ? bias + oc : NULL, &d);
        eb_store(s, index + (int32_t)oc * hw, hw, acc, EB_OPT_PIXELS, n, count);
    }
}

/* ---- convolution ----------------------------------------------------------------------- */

#if EB_OPT_PACKED
/* Packed rows oc_begin .. oc_end - 1 against the columns, through eb_store. */
static void eb_pk_store(const eb_sink *s, int bits, int32_t k, const int8_t *weight,
                        const int16_t *cols, int oc_begin, int oc_end, const int32_t *bias,
                        int32_t px, int32_t hw, int count)
{
    int oc;
    for (oc = oc_begin; oc < oc_end; oc += EB_OPT_OC_BLOCK) {
        const int n_oc = oc_end - oc < EB_OPT_OC_BLOCK ? oc_end - oc : EB_OPT_OC_BLOCK;
        int32_t acc[EB_OPT_OC_BLOCK * EB_OPT_PIXELS];
        eb_pk_dot(bits, k, weight + (int32_t)oc * EB_PACKED_ROW_BYTES(k, bits), cols, n_oc,
                  bias ? bias + oc : NULL, acc);
        eb_store(s, (int32_t)oc * hw + px, hw, acc, EB_OPT_PIXELS, n_oc, count);
    }
}
#endif

/* eb_block_cols' view of a layer, worked out once rather than per block of 4 pixels (its
 * set-up cost ~70 instructions a block, as many as a one-channel block's MACs): the window
 * (k taps of a group's ipg channels, kp rounded up to 4), the output's pixels, whether 4
 * neighbouring pixels are 4 neighbouring input bytes (row4), and which stride-1 (or,
 * where linked, stride-2) blocks' taps lie inside the input's columns (ox_lo <= ox <=
 * ox_hi): on a row whose taps lie inside its rows too (eb_tap_row), their T words are the
 * input bytes at fixed offsets from the block's first pixel, the same for every such block
 * of the row (stride 2: two words a tap, the last one whole inside the row). */
typedef struct {
    const eb_conv_params *p;
    int32_t k, kp, hw;
    int ipg, row4, direct, ox_lo, ox_hi; /* direct: the stride of the direct columns, 0 none */
} eb_cols_geom;

static void eb_cols_geom_of(const eb_conv_params *p, int ipg, eb_cols_geom *g)
{
    /* inside: ix = stride_w ox - pad_w >= 0, ix + (k_w - 1) dil_w + 4 stride_w <= in_w (the
     * stride-2 words read a byte past the last lane's), ox + 4 <= out_w */
    const int s2 = EB_HAS_IM2COL_S2 && p->stride_w == 2 && p->in_w >= 8;
    const int last_w = p->in_w - (s2 ? 8 : 4) - (p->k_w - 1) * p->dil_w + p->pad_w;
    g->p = p;
    g->ipg = ipg;
    g->k = (int32_t)ipg * p->k_h * p->k_w;
    g->kp = EB_OPT_ROUND4(g->k);
    g->hw = (int32_t)p->out_h * p->out_w;
    g->row4 = p->stride_w == 1 && p->in_w >= 4;
    g->direct = g->row4 ? 1 : s2 ? 2 : 0;
    g->ox_lo = s2 ? (p->pad_w + 1) >> 1 : p->pad_w;
    g->ox_hi = last_w < 0 ? -1 : s2 ? last_w >> 1 : last_w;
    if (g->ox_hi > p->out_w - EB_OPT_PIXELS) {
        g->ox_hi = p->out_w - EB_OPT_PIXELS;
    }
}

/* The output position of the block after the one at (oy, ox): EB_OPT_PIXELS pixels on. */
static void eb_next_block(int out_w, int *oy, int *ox)
{
    *ox += EB_OPT_PIXELS;
    while (*ox >= out_w) {
        *ox -= out_w;
        ++*oy;
    }
}

/* The interleaved columns of a block that eb_block_cols does not take straight from the
 * input: through the T words in taps (kp words, the upper half of cols). */
static EB_NOINLINE void eb_block_taps(const eb_cols_geom *g, const int8_t *in_g, int oy, int ox,
                                      int32_t px, int32_t count, int16_t *cols, int8_t *taps)
{
    const eb_conv_params *p = g->p;
    const int out_w = p->out_w, ipg = g->ipg, row4 = g->row4;
    const int32_t k = g->k, kp = g->kp;
    if (row4 && ox + count <= out_w) { /* one output row (lanes past it not stored) */
        eb_taps_row4(p, in_g, ipg, oy, ox, taps);
    } else if (row4 && out_w >= 2) {
        eb_taps_rows(p, in_g, ipg, oy, ox, g->hw - px, (int8_t *)cols, taps, k);
    } else if (EB_HAS_IM2COL_S2 && p->stride_w == 2 && p->in_w >= 8 && ox + count <= out_w) {
        eb_taps_row4s2(p, in_g, ipg, oy, ox, taps); /* (narrower: all row ends) */
    } else {
        eb_taps_gather(p, in_g, ipg, px, (int)count, taps);
    }
    if (kp > k) {
        memset(taps + 4 * k, 0, (size_t)(4 * (kp - k)));
    }
    eb_transpose(taps, kp, cols);
}

/* The interleaved columns of the block of pixels px .. px + count - 1 (px at output row oy,
 * column ox) of group input in_g into cols (4 * kp int16): for a block of stride 1 (or 2:
 * eb_cols_direct_s2) inside the input straight from the input at the tap offsets of its row
 * (table, worked out once a row; NULL: a layer of more taps), else through the T words in
 * taps (eb_block_taps). Inlined: a direct block costs its checks and eb_cols_direct. */
EB_DOT_INLINE void eb_block_cols(const eb_cols_geom *g, const int8_t *in_g, int oy, int ox,
                                 int32_t px, int32_t count, int16_t *cols, int8_t *taps,
                                 eb_tap_table *table)
{
#if EB_IM2COL_DIRECT
    if (table != NULL && g->direct && ox >= g->ox_lo && ox <= g->ox_hi) {
        if (table->row != oy) {
            eb_tap_row(g->p, g->ipg, oy, table);
        }
        if (table->inside) {
#if EB_HAS_IM2COL_S2
            if (g->direct == 2) {
                eb_cols_direct_s2(in_g + 2 * ox, table->off, g->k, cols);
                return;
            }
#endif
            eb_cols_direct(in_g + ox, table->off, g->k, cols);
            return;
        }
    }
#else
    (void)table;
#endif
    eb_block_taps(g, in_g, oy, ox, px, count, cols, taps);
}

/* What every block of a layer's im2col pass stores through: its output sink, the window
 * length k, the pixels a channel hw, the asm rows' layer fields and whether they take every
 * block of 4 pixels (fast). */
typedef struct {
    const eb_conv_params *p;
    const eb_sink *s;
    int32_t k, hw;
#ifdef EB_GEMM_ASM
    eb_gemm_job rows;
    int fast;
#endif
} eb_core;

/* The outputs of the block of count pixels from px (columns cols) of the group's opg output
 * channels from oc_begin (weights w_g, biases b_g). */
EB_DOT_INLINE void eb_core_block(eb_core *c, const int16_t *cols, const int8_t *w_g,
                                 const int32_t *b_g, int oc_begin, int opg, int32_t px,
                                 int32_t count)
{
    const int32_t index = (int32_t)oc_begin * c->hw + px;
#if EB_OPT_PACKED
    if (c->p->wbits != 0) {
        /* (it indexes the layer's packed rows and biases by output channel itself) */
        eb_pk_store(c->s, c->p->wbits, c->k, w_g - (int32_t)oc_begin * c->k, cols, oc_begin,
                    oc_begin + opg, b_g != NULL ? b_g - oc_begin : NULL, px, c->hw,
                    (int)count);
        return;
    }
#endif
#ifdef EB_GEMM_ASM
    if (c->fast && count == EB_OPT_PIXELS) {
        const int left = eb_gemm_block(&c->rows, c->p->act == EB_ACT_RELU, w_g, cols, b_g,
                                       c->s->out8 + index, opg);
        if (left != 0) {
            eb_dot_store(c->s, c->k, c->rows.w, cols, left, c->rows.bias,
                         index + (int32_t)(opg - left) * c->hw, c->hw, (int)count);
        }
        return;
    }
#endif
    eb_dot_store(c->s, c->k, w_g, cols, opg, b_g, index, c->hw, (int)count);
}

/* Whether a layer's last block of 3 pixels (of hw, after others) runs as the block of 4
 * ending at the last pixel, one pixel done again: where the asm rows take blocks of 4 (they
 * take none of 3: eb_dot_store's C ran it at about 50 instructions an output of a 20-tap
 * row, where a row of the asm's block costs about 13 a word and 44 beside -- a 2 -> 48 10x1
 * stride-2 conv on 6 x 9, 15 pixels, 2.06 -> 1.88 insn/MAC). Its columns cost one block
 * either way; packed weights' rows (eb_pk_store) take it too, the same sums. */
EB_DOT_INLINE int eb_core_back(const eb_core *c, int32_t hw)
{
#ifdef EB_GEMM_ASM
    return hw > EB_OPT_PIXELS && c->fast;
#else
    (void)c;
    (void)hw;
    return 0;
#endif
}

#if EB_HAS_IM2COL_BAND
/* The padded band of a conv with padding (eb_kernels_opt.h, EB_CONV_BAND_BYTES): its group's
 * ipg x k_h input rows of an output row, each zero-padded to the pitch, in the scratch after
 * the columns -- so that every block of the row takes its columns straight from the band
 * (eb_cols_direct / _s2; a row's last block of 1..3 pixels reads into the slack), where
 * with the padding in the input the blocks at its edges (a 3x3
 * pad-1 conv on a small map: a third of them or more) gathered theirs tap by tap at about
 * three times the cost. Its bytes, 0 for a conv it does not take (the twin:
 * ops.im2col_band): dense or grouped (a depthwise layer's own kernels take it, the
 * plan claims no band for it), some padding, stride_w 1 (2: "im2col_s2"), rows of 4 outputs
 * or more, at most EB_CONV_BAND_TAPS taps (their offsets after the band in the scratch, not
 * on the stack as the direct columns' EB_DIRECT_TAPS). */
static int32_t eb_band_bytes(const eb_conv_params *p, int ipg)
{
    const int32_t bytes = (int32_t)ipg * p->k_h * EB_CONV_BAND_PITCH(p->in_w, p->pad_w);
    return (p->pad_h > 0 || p->pad_w > 0) && p->out_w >= EB_OPT_PIXELS &&
                   (p->groups == 1 || p->in_c != p->groups) && /* not depthwise: its own path */
                   (p->stride_w == 1 || (EB_HAS_IM2COL_S2 && p->stride_w == 2)) &&
                   (int32_t)ipg * p->k_h * p->k_w <= EB_CONV_BAND_TAPS &&
                   bytes <= EB_CONV_BAND_BYTES
               ? bytes
               : 0;
}

/* Whether the band pays for a conv eb_band_bytes takes (g: its geometry): the blocks the
 * input's own rows would leave to the gather (eb_block_taps: rows whose taps reach into the
 * height padding, and the blocks at a row's ends whose taps reach into the width padding),
 * each about 6 instructions a tap dearer than a direct block at stride 1 and 18 at stride 2
 * (eb_taps_row4s2), against the band's set-up (its offsets, about 10 a tap, and zeroing),
 * its copies (about 2 a word and 12 a row of it an output row) and its rows' last blocks:
 * the GEMM's blocks run along the rows (of 1 or 2 pixels, or 4 over 1 done: about a
 * quarter of a block's 5 k instructions an output channel wasted, three quarters for 1)
 * where the input's run through the whole plane. A 32 -> 32 k3 on 6 samples, both its
 * blocks at an edge, lost 10 % to the band; a 3 -> 16 11x11 on 10 x 5 (rows of 5) 14 %. */
static int eb_band_pays(const eb_conv_params *p, const eb_cols_geom *g, int32_t bytes)
{
    static const int8_t waste[4] = {0, 3, 1, 1}; /* quarters of a block, by out_w % 4 */
    const int32_t rows = (int32_t)g->ipg * p->k_h, opg = p->out_c / p->groups;
    int32_t inside = 0, edge, slow, oy;
    for (oy = 0; oy < p->out_h; ++oy) { /* rows whose tap rows lie inside the input */
        const int iy = oy * p->stride_h - p->pad_h;
        inside += iy >= 0 && iy + (p->k_h - 1) * p->dil_h < p->in_h;
    }
    edge = g->direct == 0 || g->ox_hi < g->ox_lo ? (p->out_w + 3) / 4
                                                  : (g->ox_lo + 3) / 4 + (p->out_w - 1 - g->ox_hi + 3) / 4;
    slow = (p->out_h - inside) * ((p->out_w + 3) / 4) + inside * edge;
    return (p->stride_w == 1 ? 6 : 18) * slow * g->k >
           10 * g->k + bytes / 2 + p->out_h * rows * (12 + p->in_w / 2) +
               p->out_h * waste[p->out_w & 3] * 5 * g->k * opg / 4;
}

/* The band's tap offsets (off): tap (ic, ky, kx) at row ic k_h + ky, column kx dil_w of a
 * block's first pixel. */
static void eb_band_taps(const eb_conv_params *p, int ipg, int32_t pitch, int32_t *off)
{
    const int rows = ipg * p->k_h, k_w = p->k_w, dil = p->dil_w;
    int32_t base = 0;
    int r, kx;
    for (r = 0; r < rows; ++r, base += pitch) {
        for (kx = 0; kx < k_w; ++kx) {
            *off++ = base + kx * dil;
        }
    }
}

/* n bytes from src (or zeros, src NULL) to dst, both any alignment: words (the last over
 * up to 3 bytes done again) where n >= 4 -- a newlib memcpy call cost about 45 instructions
 * for a 25-byte row. */
EB_DOT_INLINE void eb_band_row(int8_t *dst, const int8_t *src, int32_t n)
{
    int32_t i;
    if (n < 4) {
        for (i = 0; i < n; ++i) {
            dst[i] = src != NULL ? src[i] : 0;
        }
    } else if (src != NULL) {
        for (i = 0; i + 4 < n; i += 4) {
            eb_store32(dst + i, eb_load32(src + i));
        }
        eb_store32(dst + n - 4, eb_load32(src + n - 4));
    } else {
        for (i = 0; i + 4 < n; i += 4) {
            eb_store32(dst + i, 0u);
        }
        eb_store32(dst + n - 4, 0u);
    }
}

/* The band of output row oy: each row's input row, or zeros where it lies in the height
 * padding, between the width padding and the slack after it (zeroed once, never written):
 * kernel row by kernel row, its input row of every channel. */
static EB_NOINLINE void eb_band_fill(const eb_conv_params *p, const int8_t *in_g, int ipg,
                                     int oy, int32_t pitch, int8_t *band)
{
    const int32_t in_plane = (int32_t)p->in_h * p->in_w, in_w = p->in_w;
    const int32_t step = (int32_t)p->k_h * pitch; /* from a channel's row to the next's */
    int iy = oy * p->stride_h - p->pad_h, ic, ky;
    band += p->pad_w;
    for (ky = 0; ky < p->k_h; ++ky, iy += p->dil_h, band += pitch) {
        const int8_t *src = iy < 0 || iy >= p->in_h ? NULL : in_g + (int32_t)iy * in_w;
        int8_t *dst = band;
        for (ic = 0; ic < ipg; ++ic, dst += step) {
            eb_band_row(dst, src, in_w);
            src = src != NULL ? src + in_plane : NULL;
        }
    }
}

/* The im2col pass from the band (eb_band_bytes: bytes of it, at band): each output row in
 * blocks of 4 pixels, its last of 1 or 2 where out_w is 1 or 2 past a multiple of 4. */
static void eb_conv_band(eb_core *c, const eb_cols_geom *g, const int8_t *in,
                         const int8_t *weight, const int32_t *bias, int8_t *band, int32_t bytes,
                         int16_t *cols)
{
    int32_t *const off = (int32_t *)(void *)(band + bytes); /* bytes: a multiple of 4 */
    const eb_conv_params *p = c->p;
    const int ipg = g->ipg, opg = p->out_c / p->groups, out_w = p->out_w;
    const int32_t pitch = EB_CONV_BAND_PITCH(p->in_w, p->pad_w);
    const int32_t in_plane = (int32_t)p->in_h * p->in_w;
    int gi, oy, ox;
    memset(band, 0, (size_t)bytes);
    eb_band_taps(p, ipg, pitch, off);
    for (gi = 0; gi < p->groups; ++gi) {
        const int oc_begin = gi * opg;
        const int8_t *w_g = weight + (int32_t)oc_begin * g->k;
        for (oy = 0; oy < p->out_h; ++oy) {
            eb_band_fill(p, in + (int32_t)gi * ipg * in_plane, ipg, oy, pitch, band);
            for (ox = 0; ox < out_w; ox += EB_OPT_PIXELS) {
                /* a last block of 3 steps back over one done (the GEMM rows take no block
                 * of 3); of 1 or 2 it stays (their rows) */
                const int x = out_w - ox == 3 ? out_w - EB_OPT_PIXELS : ox;
                const int n = out_w - x < EB_OPT_PIXELS ? out_w - x : EB_OPT_PIXELS;
#if EB_HAS_IM2COL_S2
                if (p->stride_w == 2) {
                    eb_cols_direct_s2(band + 2 * x, off, g->k, cols);
                } else
#endif
                {
                    eb_cols_direct(band + x, off, g->k, cols);
                }
                eb_core_block(c, cols, w_g, bias ? bias + oc_begin : NULL, oc_begin,
                              opg, (int32_t)oy * out_w + x, n);
            }
        }
    }
}
#endif

static void eb_conv_core(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                         const int32_t *bias, const eb_sink *s, int16_t *scratch)
{
    const int groups = p->groups;
    const int ipg = p->in_c / groups, opg = p->out_c / groups;
    const int32_t in_plane = (int32_t)p->in_h * p->in_w;
    int16_t *const cols = scratch; /* 4 * kp int16: the interleaved columns */
    int8_t *taps;                  /* kp words: T, in the upper half */
    eb_cols_geom geom;
    eb_tap_table table;
    eb_core c;
    int g;
#ifdef EB_GEMM_ASM
    eb_qdst d;
#endif
    eb_cols_geom_of(p, ipg, &geom);
    taps = (int8_t *)(scratch + 2 * geom.kp);
    c.p = p;
    c.s = s;
    c.k = geom.k;
    c.hw = geom.hw;
#ifdef EB_GEMM_ASM
    /* the asm rows take every block of 4 pixels (the rows from an exact one on below) */
    c.fast = eb_qdst_of(s, geom.k, geom.hw, &d) && bias != NULL && geom.k >= 4;
    eb_gemm_layer(&c.rows, geom.k, geom.hw, d.r, d.s, d.lim, EB_OPT_PIXELS);
#endif
#if EB_HAS_IM2COL_BAND
    {
        const int32_t band = eb_band_bytes(p, ipg);
        if (band > 0 && eb_band_pays(p, &geom, band)) { /* after the columns (4 kp int16) */
            eb_conv_band(&c, &geom, in, weight, bias, (int8_t *)(scratch + 4 * geom.kp), band,
                         cols);
            return;
        }
    }
#endif
    table.row = -1; /* offsets from a group's input: the same for every group */
    for (g = 0; g < groups; ++g) {
        const int8_t *in_g = in + (int32_t)g * ipg * in_plane;
        const int oc_begin = g * opg;
        const int8_t *w_g = weight + (int32_t)oc_begin * geom.k;
        const int32_t *b_g = bias ? bias + oc_begin : NULL;
        const int32_t hw = geom.hw, k = geom.k;
        int32_t px;
        int oy = 0, ox = 0;
        for (px = 0; px < hw; px += EB_OPT_PIXELS, eb_next_block(p->out_w, &oy, &ox)) {
            /* pixels px .. px + 3; lanes past the end are not stored */
            int32_t count = EB_OPT_PIXELS;
            if (hw - px < EB_OPT_PIXELS) { /* the last block */
                count = hw - px;
                if (count == 3 && eb_core_back(&c, hw)) { /* back over one pixel */
                    --px;
                    ++count;
                    if (--ox < 0) {
                        ox += p->out_w;
                        --oy;
                    }
                }
            }
            eb_block_cols(&geom, in_g, oy, ox, px, count, cols, taps,
                          k <= EB_DIRECT_TAPS ? &table : NULL);
            eb_core_block(&c, cols, w_g, b_g, oc_begin, opg, px, count);
        }
    }
}

/* ---- linear ---------------------------------------------------------------------------- */

#ifndef EB_LINEAR_ASM /* there eb_linear_asm takes every row of a layer of 4 or more inputs */
/* Rows of a layer of at most 4 n inputs (n words), one at a time with the whole column in
 * registers ([c0, c2], [c1, c3] per word): per row n LDR of its weights (the bytes past a
 * row meet zeros in the column, and the row after it exists: the caller leaves the last row
 * out), 2n SXTB16 and 2n SMLAD, its bias, the requantization (ASR, QADD, USAT / SSAT) and a
 * STRB -- about 5n + 8 instructions for up to 4n MACs, where four rows at a time
 * (eb_linear_rows4) reload the column and spill their state per block of a narrow layer. */
EB_DOT_INLINE void eb_linear_short(const int n, int32_t k, const int8_t *w, const int16_t *c,
                                   const int32_t *bias, int32_t h, int s1, int rows,
                                   int8_t *out, const int relu)
{
    uint32_t x0, xb0, x1 = 0, xb1 = 0, x2 = 0, xb2 = 0, x3 = 0, xb3 = 0;
    int i;
    EB_LOAD2X32(c, 0, x0, xb0);
    if (n > 1) {
        EB_LOAD2X32(c, 4, x1, xb1);
    }
    if (n > 2) {
        EB_LOAD2X32(c, 8, x2, xb2);
    }
    if (n > 3) {
        EB_LOAD2X32(c, 12, x3, xb3);
    }
    for (i = 0; i < rows; ++i, w += k) {
        int32_t a = bias[i];
        uint32_t wv = eb_load32(w);
        EB_MAC4(a, eb_sxtb16(wv), eb_sxtb16_ror8(wv), x0, xb0);
        if (n > 1) {
            wv = eb_load32(w + 4);
            EB_MAC4(a, eb_sxtb16(wv), eb_sxtb16_ror8(wv), x1, xb1);
        }
        if (n > 2) {
            wv = eb_load32(w + 8);
            EB_MAC4(a, eb_sxtb16(wv), eb_sxtb16_ror8(wv), x2, xb2);
        }
        if (n > 3) {
            wv = eb_load32(w + 12);
            EB_MAC4(a, eb_sxtb16(wv), eb_sxtb16_ror8(wv), x3, xb3);
        }
        out[i] = EB_LINEAR_Q(a, h, s1, relu);
    }
}

#define EB_LINEAR_SHORT(name, relu_)                                                         \
    static EB_NOINLINE void name(int32_t k, const int8_t *w, const int16_t *c,               \
                                 const int32_t *bias, int32_t h, int s1, int rows,          \
                                 int8_t *out)                                               \
    {                                                                                        \
        switch ((k + 3) >> 2) {                                                              \
        case 1:                                                                              \
            eb_linear_short(1, k, w, c, bias, h, s1, rows, out, relu_);                      \
            break;                                                                           \
        case 2:                                                                              \
            eb_linear_short(2, k, w, c, bias, h, s1, rows, out, relu_);                      \
            break;                                                                           \
        case 3:                                                                              \
            eb_linear_short(3, k, w, c, bias, h, s1, rows, out, relu_);                      \
            break;                                                                           \
        default:                                                                             \
            eb_linear_short(4, k, w, c, bias, h, s1, rows, out, relu_);                      \
        }                                                                                    \
    }
#if EB_HAS_Q_RELU
EB_LINEAR_SHORT(eb_linear_short_relu, 1)
#endif
#if EB_HAS_Q_NONE
EB_LINEAR_SHORT(eb_linear_short_none, 0)
#endif
#undef EB_LINEAR_SHORT
#endif

#ifdef EB_LINEAR_ASM
static const int32_t eb_zero4[4] = {0, 0, 0, 0};

/* eb_linear_fast's blocks by hand (eb_linear4_relu / _none), k >= 4 inputs -- with a bias
 * and at most EB_LINEAR_SHORT_MAX inputs by the form of k when linked (eb_linear_k<k>_relu /
 * _none): a last block whose rows end in 2 or 3 inputs past their whole words (the forms of
 * k: 3) reads a word of each, past the weights where no row follows it, so it is left to the
 * caller. Returns the rows done. */
static int eb_linear_asm(int in_f, int out_f, const int8_t *weight, const int32_t *bias,
                         const eb_sink *s, const int16_t *cols, int32_t h)
{
    const int blocks = out_f >> 2;
    void (*fn)(eb_linear_job *) = NULL;
    const eb_lshort_fn short_fn = bias != NULL && in_f <= EB_LINEAR_SHORT_MAX
                                      ? eb_linear_short_of(in_f, s->act == EB_ACT_RELU)
                                      : NULL;
    eb_linear_job job;
    job.w = weight;
    job.c = cols;
    job.cend = cols + 4 * (in_f >> 2);
    job.bias = bias != NULL ? bias : eb_zero4;
    job.bstep = bias != NULL ? 16 : 0;
    job.out = s->out8;
    job.km4 = in_f - 4;
    job.k4 = 4 * in_f;
    job.s1 = -s->shift - 1;
    job.h = h;
    job.blocks = (in_f & 3) >= 2 && out_f == 4 * blocks ? blocks - 1 : blocks;
    job.tail = in_f & 3;
    job.odd = (in_f >> 2) & 1;
    if (short_fn != NULL) { /* 3 inputs past the words: a row must follow the last block */
        const int nb = (in_f & 3) == 3 && out_f == 4 * blocks ? blocks - 1 : blocks;
        eb_lshort_job sj;
        sj.w = weight;
        sj.bias = bias;
        sj.bend = bias + 4 * nb;
        sj.out = s->out8;
        sj.s1 = job.s1;
        sj.h = h;
        sj.c = cols;
        if (nb > 0) {
            short_fn(&sj);
        }
        return 4 * nb;
    }
#if EB_HAS_Q_RELU
    if (s->act == EB_ACT_RELU) {
        fn = eb_linear4_relu;
    }
#endif
#if EB_HAS_Q_NONE
    if (s->act == EB_ACT_NONE) {
        fn = eb_linear4_none;
    }
#endif
    if (fn == NULL || job.blocks == 0) {
        return 0;
    }
    fn(&job); /* reads the job: its own copy on the stack counts down */
    return 4 * job.blocks;
}
#endif

/* The rows of eb_linear_core (int8 weights) that the fast form takes, four at a time
 * (eb_linear_rows4): int8 out, a right shift 1 <= s <= 31, relu or none, half-up or floor
 * rounding. Requantized by eb_half, no sum can overflow, so no bias needs checking (a check
 * per row cost 10 instructions, 0.4 per MAC at 26 inputs). eb_store's set-up per block cost
 * more than a narrow layer's 4 x in_f MACs (5.5 instructions per MAC at 10 inputs). On the
 * M4 a layer of 4 or more inputs runs by hand (eb_linear_asm); elsewhere one of at most 16
 * inputs with a bias runs a row at a time (eb_linear_short). Returns the rows done: all but
 * the last of a short layer, every block of 4 of another (eb_linear_asm: but a last one it
 * cannot read whole), or none. */
static int eb_linear_fast(int in_f, int out_f, const int8_t *weight, const int32_t *bias,
                          const eb_sink *s, const int16_t *cols)
{
    const int sh = -s->shift;
    const int blocks = out_f >> 2;
    int32_t h;
    if (!EB_HAS_LINEAR_Q || s->out8 == NULL || sh < 1 || sh > 31 || in_f > 65535 ||
        blocks == 0 || (s->act != EB_ACT_RELU && s->act != EB_ACT_NONE) ||
        (s->rounding != EB_ROUND_HALF_UP && s->rounding != EB_ROUND_FLOOR)) {
        return 0;
    }
    h = s->rounding == EB_ROUND_HALF_UP;
#ifdef EB_LINEAR_ASM
    /* fewer than 4 inputs: the generic loop of eb_linear_core */
    return in_f >= 4 ? eb_linear_asm(in_f, out_f, weight, bias, s, cols, h) : 0;
#else
    if (in_f <= 16 && bias != NULL) {
        /* a row reads 4 ceil(in_f / 4) bytes: the last `last` rows are left to the caller,
         * so that no read passes the weights' end */
        const int last = (4 * ((in_f + 3) >> 2) + in_f - 1) / in_f - 1;
        const int rows = out_f - last;
#if EB_HAS_Q_RELU
        if (s->act == EB_ACT_RELU) {
            eb_linear_short_relu(in_f, weight, cols, bias, h, sh - 1, rows, s->out8);
            return rows;
        }
#endif
#if EB_HAS_Q_NONE
        if (s->act == EB_ACT_NONE) {
            eb_linear_short_none(in_f, weight, cols, bias, h, sh - 1, rows, s->out8);
            return rows;
        }
#endif
        (void)rows;
    }
    if (EB_HAS_Q_RELU && s->act == EB_ACT_RELU) {
        eb_linear_rows4_relu(in_f, weight, cols, bias, h, sh - 1, blocks, out_f > 4 * blocks,
                             s->out8);
    } else if (EB_HAS_Q_NONE && s->act == EB_ACT_NONE) {
        eb_linear_rows4_none(in_f, weight, cols, bias, h, sh - 1, blocks, out_f > 4 * blocks,
                             s->out8);
    } else {
        return 0;
    }
    return 4 * blocks;
#endif
}

/* bits: 0 for int8 weights, else packed 1-, 2- or 4-bit ones. */
static void eb_linear_core(int in_f, int out_f, int bits, const int8_t *in,
                           const int8_t *weight, const int32_t *bias, const eb_sink *s,
                           int16_t *scratch)
{
    const int32_t full = (int32_t)in_f & ~(int32_t)3;
    int o;
    eb_expand(in, full, scratch);
    if (full < in_f) { /* the last 1..3 inputs, zero-padded: never read past in[] */
        const uint32_t u = eb_load_tail(in + full, in_f - full);
        eb_store32(scratch + full, eb_sxtb16(u));
        eb_store32(scratch + full + 2, eb_sxtb16_ror8(u));
    }
#if EB_OPT_PACKED
    if (bits != 0) {
        const int32_t row_bytes = EB_PACKED_ROW_BYTES(in_f, bits);
        for (o = 0; o < out_f; o += 2) {
            const int n = out_f - o < 2 ? 1 : 2;
            int32_t acc[2];
            acc[0] = bias ? bias[o] : 0;
            acc[1] = n == 2 && bias ? bias[o + 1] : 0;
            eb_pk_rows(bits, in_f, weight + (int32_t)o * row_bytes, n, scratch, acc);
            eb_store(s, o, 0, acc, 0, 1, n);
        }
        return;
    }
#else
    (void)bits;
#endif
    o = eb_linear_fast(in_f, out_f, weight, bias, s, scratch);
    for (; o + 3 < out_f; o += 4) {
        int32_t acc[4];
        int j;
        for (j = 0; j < 4; ++j) {
            acc[j] = bias ? bias[o + j] : 0;
        }
        eb_dot_4x1(in_f, weight + (int32_t)o * in_f, scratch, acc, o + 4 < out_f);
        eb_store(s, o, 0, acc, 0, 1, 4);
    }
    for (; o + 1 < out_f; o += 2) {
        int32_t acc[2];
        acc[0] = bias ? bias[o] : 0;
        acc[1] = bias ? bias[o + 1] : 0;
        eb_dot_2x1(in_f, weight + (int32_t)o * in_f, scratch, acc);
        eb_store(s, o, 0, acc, 0, 1, 2);
    }
    if (o < out_f) {
        const int32_t acc =
            eb_dot_1x1(in_f, weight + (int32_t)o * in_f, scratch, bias ? bias[o] : 0);
        eb_store(s, o, 0, &acc, 0, 1, 1);
    }
}

/* A dense conv with one output pixel whose window is the whole unpadded input: the weight
 * rows [oc][ic][k_h][k_w] line up with the input [ic][in_h][in_w], so it is a linear layer
 * over in_c * in_h * in_w values (its scratch, round_up_4 of that, fits the conv's). */
static int eb_conv_as_linear(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                             const int32_t *bias, const eb_sink *s, int16_t *scratch)
{
    if (p->groups != 1 || p->out_h != 1 || p->out_w != 1 || p->k_h != p->in_h ||
        p->k_w != p->in_w || p->pad_h != 0 || p->pad_w != 0 || (p->k_h > 1 && p->dil_h != 1) ||
        (p->k_w > 1 && p->dil_w != 1)) {
        return 0;
    }
    eb_linear_core((int)((int32_t)p->in_c * p->in_h * p->in_w), p->out_c, p->wbits, in, weight,
                   bias, s, scratch);  /* packed rows line up the same way */
    return 1;
}

void eb_conv2d_opt(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                   const int32_t *bias, int8_t *out, int16_t *scratch)
{
    const eb_sink s = eb_sink_of(out, 0, p->shift, p->rounding, p->act);
    if (eb_conv_as_linear(p, in, weight, bias, &s, scratch) ||
        (EB_OPT_DEPTHWISE && eb_dw_conv_opt(p, in, weight, bias, s.out8, s.out32, scratch))) {
        return;
    }
    if (EB_HAS_IM2COL) {
        eb_conv_core(p, in, weight, bias, &s, scratch);
    } else {
        eb_conv2d(p, in, weight, bias, out);
    }
}

void eb_conv2d_wide_opt(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                        const int32_t *bias, int32_t *out, int16_t *scratch)
{
    const eb_sink s = eb_sink_of(out, 1, 0, 0, 0);
    if (eb_conv_as_linear(p, in, weight, bias, &s, scratch) ||
        (EB_OPT_DEPTHWISE && eb_dw_conv_opt(p, in, weight, bias, s.out8, s.out32, scratch))) {
        return;
    }
    if (EB_HAS_IM2COL) {
        eb_conv_core(p, in, weight, bias, &s, scratch);
    } else {
        eb_conv2d_wide(p, in, weight, bias, out);
    }
}

void eb_linear_opt(int in_f, int out_f, const int8_t *in, const int8_t *weight,
                   const int32_t *bias, int shift, int rounding, int act, int8_t *out,
                   int16_t *scratch)
{
    const eb_sink s = eb_sink_of(out, 0, shift, rounding, act);
    eb_linear_core(in_f, out_f, 0, in, weight, bias, &s, scratch);
}

void eb_linear_wide_opt(int in_f, int out_f, const int8_t *in, const int8_t *weight,
                        const int32_t *bias, int32_t *out, int16_t *scratch)
{
    const eb_sink s = eb_sink_of(out, 1, 0, 0, 0);
    eb_linear_core(in_f, out_f, 0, in, weight, bias, &s, scratch);
}

#if EB_OPT_PACKED
void eb_linear_packed_opt(int in_f, int out_f, int bits, const int8_t *in, const int8_t *weight,
                          const int32_t *bias, int shift, int rounding, int act, int8_t *out,
                          int16_t *scratch)
{
    const eb_sink s = eb_sink_of(out, 0, shift, rounding, act);
    eb_linear_core(in_f, out_f, bits, in, weight, bias, &s, scratch);
}

void eb_linear_packed_wide_opt(int in_f, int out_f, int bits, const int8_t *in,
                               const int8_t *weight, const int32_t *bias, int32_t *out,
                               int16_t *scratch)
{
    const eb_sink s = eb_sink_of(out, 1, 0, 0, 0);
    eb_linear_core(in_f, out_f, bits, in, weight, bias, &s, scratch);
}
#endif

/* ---- column blocks for the tiled driver (eb_tiling.c, eb_conv2d_tiled_cols) ---------------
 * eb_conv_core split in two for a dense conv (groups == 1) whose weights stream through L1 in
 * channel tiles: eb_conv_cols_build writes the interleaved columns of every 4-pixel block of
 * the output (block b at cols + b * 4 * kp), eb_conv_cols_dot runs any channels' weights
 * against them. Same arithmetic as eb_conv_core, so the same results. */

void eb_conv_cols_build(const eb_conv_params *p, const int8_t *in, int16_t *cols)
{
    eb_cols_geom geom;
    eb_tap_table table;
    int32_t px;
    int oy = 0, ox = 0;
    eb_cols_geom_of(p, p->in_c, &geom);
    table.row = -1;
    for (px = 0; px < geom.hw;
         px += EB_OPT_PIXELS, cols += 4 * geom.kp, eb_next_block(p->out_w, &oy, &ox)) {
        const int32_t count = geom.hw - px < EB_OPT_PIXELS ? geom.hw - px : EB_OPT_PIXELS;
        eb_block_cols(&geom, in, oy, ox, px, count, cols, (int8_t *)(cols + 2 * geom.kp),
                      geom.k <= EB_DIRECT_TAPS ? &table : NULL);
    }
}

/* The set-up of eb_conv_cols_run's blocks, once per row tile where eb_dot_store sets one up
 * per block: fast when the asm rows can take them (int8 out, a bias, a right shift, relu or
 * none, half-up or floor rounding, k >= 4); a row whose bias exceeds lim (an exact row) stops
 * them, and eb_dot_store takes the block's rest. */
void eb_conv_cols_prepare(const eb_conv_params *p, const int32_t *bias, int wide,
                          eb_cols_job *job)
{
    const int s = -p->shift;
    int64_t room;
    job->p = p;
    job->k = (int32_t)p->in_c * p->k_h * p->k_w;
    job->kp = EB_OPT_ROUND4(job->k);
    job->hw = (int32_t)p->out_h * p->out_w;
    job->wide = (int8_t)(wide != 0);
    job->s = s;
    job->r = s > 0 && s <= 31 && p->rounding == EB_ROUND_HALF_UP ? (int32_t)1 << (s - 1) : 0;
    room = (int64_t)INT32_MAX - (int64_t)job->k * 16384 - job->r; /* as eb_dot_store's lim */
    job->lim = room < INT32_MIN ? INT32_MIN : (int32_t)room;
#ifdef EB_GEMM_ASM
    job->fast = (int8_t)(!wide && bias != NULL && job->k >= 4 && s >= 0 && s <= 31 &&
                         ((EB_HAS_Q_NONE && p->act == EB_ACT_NONE) ||
                          (EB_HAS_Q_RELU && p->act == EB_ACT_RELU)) &&
                         (p->rounding == EB_ROUND_HALF_UP || p->rounding == EB_ROUND_FLOOR));
#else
    (void)bias;
    job->fast = 0;
#endif
}

#ifdef EB_GEMM_ASM
/* The job's blocks through the asm rows (eb_gemm4_*, a last block of 1 or 2 pixels
 * eb_gemm2_*) from the first: returns the first pixel of the block it stopped at (an exact
 * row, or 3 pixels left, which the asm rows do not take), hw when it did them all. */
static EB_NOINLINE int32_t eb_cols_fast(const eb_cols_job *job, const int16_t *cols,
                                        const int8_t *weight, const int32_t *bias, int n_oc,
                                        int8_t *out)
{
    const int relu = job->p->act == EB_ACT_RELU;
    const int32_t hw = job->hw, block = 4 * job->kp;
    eb_gemm_job g;
    int32_t px;
    eb_gemm_layer(&g, job->k, hw, job->r, job->s, job->lim, EB_OPT_PIXELS);
    for (px = 0; px + EB_OPT_PIXELS <= hw; px += EB_OPT_PIXELS, cols += block) {
        if (eb_gemm_block(&g, relu, weight, cols, bias, out + px, n_oc) != 0) {
            return px;
        }
    }
    if (px == hw || hw - px == 3) {
        return px;
    }
    g.count = hw - px;
    return eb_gemm_block(&g, relu, weight, cols, bias, out + px, n_oc) != 0 ? px : hw;
}
#endif

/* n_oc rows of weights (and bias, NULL: none) against the columns the job was prepared
 * for, the results to out (its first row; rows hw apart): the asm rows as far as they go,
 * the rest (from the block they stopped at, again whole) through eb_dot_store. */
void eb_conv_cols_run(const eb_cols_job *job, const int16_t *cols, const int8_t *weight,
                      const int32_t *bias, int n_oc, void *out)
{
    const eb_conv_params *p = job->p;
    const int32_t hw = job->hw, block = 4 * job->kp;
    eb_sink s;
    int32_t px = 0;
#ifdef EB_GEMM_ASM
    if (job->fast) {
        px = eb_cols_fast(job, cols, weight, bias, n_oc, (int8_t *)out);
        if (px == hw) {
            return;
        }
        cols += (px / EB_OPT_PIXELS) * block;
    }
#endif
    s = eb_sink_of(out, job->wide, p->shift, p->rounding, p->act);
    for (; px < hw; px += EB_OPT_PIXELS, cols += block) {
        const int32_t count = hw - px < EB_OPT_PIXELS ? hw - px : EB_OPT_PIXELS;
        eb_dot_store(&s, job->k, weight, cols, n_oc, bias, px, hw, (int)count);
    }
}

void eb_conv_cols_dot(const eb_conv_params *p, const int16_t *cols, const int8_t *weight,
                      const int32_t *bias, int wide, void *out)
{
    eb_cols_job job;
    eb_conv_cols_prepare(p, bias, wide, &job);
    eb_conv_cols_run(&job, cols, weight, bias, p->out_c, out);
}

/* eb_linear_core split in two for the tiled driver (eb_linear_tiled_cols): the input's
 * column once (eb_linear_expand, EB_LINEAR_OPT_SCRATCH int16), then any output rows' weights
 * against it (eb_linear_dot). Same arithmetic as eb_linear_core. */
void eb_linear_expand(int in_f, const int8_t *in, int16_t *cols)
{
    const int32_t full = (int32_t)in_f & ~(int32_t)3;
    eb_expand(in, full, cols);
    if (full < in_f) { /* the last 1..3 inputs, zero-padded: never read past in[] */
        const uint32_t u = eb_load_tail(in + full, in_f - full);
        eb_store32(cols + full, eb_sxtb16(u));
        eb_store32(cols + full + 2, eb_sxtb16_ror8(u));
    }
}

void eb_linear_dot(int in_f, int out_f, const int16_t *cols, const int8_t *weight,
                   const int32_t *bias, int shift, int rounding, int act, int wide, void *out)
{
    const eb_sink s = eb_sink_of(out, wide, shift, rounding, act);
    int o;
    for (o = 0; o + 1 < out_f; o += 2) {
        int32_t acc[2];
        acc[0] = bias ? bias[o] : 0;
        acc[1] = bias ? bias[o + 1] : 0;
        eb_dot_2x1(in_f, weight + (int32_t)o * in_f, cols, acc);
        eb_store(&s, o, 0, acc, 0, 1, 2);
    }
    if (o < out_f) {
        const int32_t acc =
            eb_dot_1x1(in_f, weight + (int32_t)o * in_f, cols, bias ? bias[o] : 0);
        eb_store(&s, o, 0, &acc, 0, 1, 1);
    }
}
