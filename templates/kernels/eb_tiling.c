/* edgebuild tiled execution (see eb_tiling.h for the contract: API, L1 layout, tile order).
 *
 * Every byte that moves between L2 (in, weight, bias, out) and L1 goes through eb_dma_copy
 * (one block) or eb_dma_copy2d (equal blocks at a stride: a column tensor's few bytes per
 * channel); the zero padding materialized in L1 is written in place (no L2 traffic). Regions of a
 * slot sit at fixed offsets computed from the full-size tile (rows clamped to out_h, channels
 * to out_c, see conv_oc_step); a smaller last tile uses the start of each region. The slot
 * size is rounded up to a multiple of 4 so that, with double buffering, the second slot (at
 * l1 + slot bytes) is 4-byte aligned too. l1 itself must be 4-byte aligned (bias and wide
 * outputs are int32). No allocation; C99. */
#include "eb_tiling.h"

#include <string.h>

#define EB_ALIGN4(n) (((int32_t)(n) + 3) & ~(int32_t)3)

/* Byte offsets of the regions inside one slot, and the slot size. */
typedef struct {
    int32_t in, weight, bias, out, slot;
} eb_slot_layout;

/* n bytes from src to dst (no overlap), inline: a column tensor's blocks are a few bytes,
 * for which a library call costs more than the copy. Words go through memcpy of 4 bytes
 * (one LDR/STR on the Cortex-M4, which allows unaligned words): 16 bytes per loop step, then
 * the last 0..15 by their bits (8, 4, 2, 1), no loop. */
static inline void copy_small(int8_t *dst, const int8_t *src, int32_t n)
{
    uint32_t a, b, c, d;
    uint16_t h;
    for (; n >= 16; n -= 16, dst += 16, src += 16) {
        memcpy(&a, src, 4u);
        memcpy(&b, src + 4, 4u);
        memcpy(&c, src + 8, 4u);
        memcpy(&d, src + 12, 4u);
        memcpy(dst, &a, 4u);
        memcpy(dst + 4, &b, 4u);
        memcpy(dst + 8, &c, 4u);
        memcpy(dst + 12, &d, 4u);
    }
    if (n & 8) {
        memcpy(&a, src, 4u);
        memcpy(&b, src + 4, 4u);
        memcpy(dst, &a, 4u);
        memcpy(dst + 4, &b, 4u);
        dst += 8;
        src += 8;
    }
    if (n & 4) {
        memcpy(&a, src, 4u);
        memcpy(dst, &a, 4u);
        dst += 4;
        src += 4;
    }
    if (n & 2) {
        memcpy(&h, src, 2u);
        memcpy(dst, &h, 2u);
        dst += 2;
        src += 2;
    }
    if (n & 1) {
        *dst = *src;
    }
}

/* GCC turns zeroing loops into memset calls, which newlib-nano runs a byte at a time after
 * a call: the few bytes of a row's width padding cost about 30 instructions a call. A
 * function with the attribute is not inlined (GCC inlines none across differing
 * optimization attributes; the callers' own code stays as it was). */
#if defined(__GNUC__) && !defined(__clang__)
#define EB_ZERO_FN __attribute__((noinline, optimize("no-tree-loop-distribute-patterns")))
#else
#define EB_ZERO_FN
#endif

/* n bytes at dst zeroed as copy_small copies: words 16 bytes a step, then the last 0..15 by
 * their bits. */
static EB_ZERO_FN void zero_small(int8_t *dst, int32_t n)
{
    const uint32_t z = 0u;
    const uint16_t h = 0u;
    for (; n >= 16; n -= 16, dst += 16) {
        memcpy(dst, &z, 4u);
        memcpy(dst + 4, &z, 4u);
        memcpy(dst + 8, &z, 4u);
        memcpy(dst + 12, &z, 4u);
    }
    if (n & 8) {
        memcpy(dst, &z, 4u);
        memcpy(dst + 4, &z, 4u);
        dst += 8;
    }
    if (n & 4) {
        memcpy(dst, &z, 4u);
        dst += 4;
    }
    if (n & 2) {
        memcpy(dst, &h, 2u);
        dst += 2;
    }
    if (n & 1) {
        *dst = 0;
    }
}

#if defined(__ARM_ARCH_7EM__) && defined(__GNUC__) && !defined(EB_OPT_PORTABLE)
/* Eight words from [s] into registers: LDM when s is word-aligned, else eight LDR (the M4
 * allows unaligned LDR; silicon may add a cycle per load, the cycle model assumes aligned). */
#define EB_LD8_ALIGNED "ldmia %[s]!, {r3, r4, r5, r6, r8, r9, r10, r12}\n\t"
#define EB_LD8_UNALIGNED                                                                   \
    "ldr r3, [%[s]]\n\t"                                                                   \
    "ldr r4, [%[s], #4]\n\t"                                                               \
    "ldr r5, [%[s], #8]\n\t"                                                               \
    "ldr r6, [%[s], #12]\n\t"                                                              \
    "ldr r8, [%[s], #16]\n\t"                                                              \
    "ldr r9, [%[s], #20]\n\t"                                                              \
    "ldr r10, [%[s], #24]\n\t"                                                             \
    "ldr r12, [%[s], #28]\n\t"                                                             \
    "adds %[s], %[s], #32\n\t"
/* ... and to [d]: STM when d is word-aligned, else eight STR (unaligned, as above). */
#define EB_ST8_ALIGNED "stmia %[d]!, {r3, r4, r5, r6, r8, r9, r10, r12}\n\t"
#define EB_ST8_UNALIGNED                                                                   \
    "str r3, [%[d]]\n\t"                                                                   \
    "str r4, [%[d], #4]\n\t"                                                               \
    "str r5, [%[d], #8]\n\t"                                                               \
    "str r6, [%[d], #12]\n\t"                                                              \
    "str r8, [%[d], #16]\n\t"                                                              \
    "str r9, [%[d], #20]\n\t"                                                              \
    "str r10, [%[d], #24]\n\t"                                                             \
    "str r12, [%[d], #28]\n\t"                                                             \
    "adds %[d], %[d], #32\n\t"
#define EB_COPY32_LOOP(ld, st)                                                             \
    __asm__ volatile("1:\n\t" ld st "subs %[n], %[n], #1\n\t"                              \
                     "bne 1b"                                                              \
                     : [s] "+r"(src), [d] "+r"(dst), [n] "+r"(n)                           \
                     :                                                                     \
                     : "r3", "r4", "r5", "r6", "r8", "r9", "r10", "r12", "cc", "memory")

/* Whole 32-byte blocks, eight registers at a time: LDM/STM where src/dst are word-aligned
 * (4 instructions per 32 bytes, where memcpy's unrolled LDR/STR pairs take 16), eight LDR/STR
 * where not (e.g. a channel tile of 7 x 25 bytes); returns the bytes copied. */
static uint32_t copy_blocks32(int8_t *dst, const int8_t *src, uint32_t bytes)
{
    uint32_t n = bytes >> 5;
    const int s_aligned = ((uintptr_t)src & 3u) == 0u, d_aligned = ((uintptr_t)dst & 3u) == 0u;
    if (n == 0u) {
        return 0u;
    }
    if (s_aligned && d_aligned) {
        EB_COPY32_LOOP(EB_LD8_ALIGNED, EB_ST8_ALIGNED);
    } else if (s_aligned) {
        EB_COPY32_LOOP(EB_LD8_ALIGNED, EB_ST8_UNALIGNED);
    } else if (d_aligned) {
        EB_COPY32_LOOP(EB_LD8_UNALIGNED, EB_ST8_ALIGNED);
    } else {
        EB_COPY32_LOOP(EB_LD8_UNALIGNED, EB_ST8_UNALIGNED);
    }
    return bytes & ~(uint32_t)31;
}
#else
static uint32_t copy_blocks32(int8_t *dst, const int8_t *src, uint32_t bytes)
{
    (void)dst;
    (void)src;
    (void)bytes;
    return 0u;
}
#endif

void eb_dma_copy(void *dst, const void *src, uint32_t bytes)
{
    /* The one place a DMA driver would go (start a transfer; a real driver would wait for it
     * before the kernel reads the slot). On the Cortex-M4 the CPU copies: aligned 32-byte
     * blocks by LDM/STM, the rest by words inline (newlib-nano's memcpy copies bytes). */
    const uint32_t done = copy_blocks32((int8_t *)dst, (const int8_t *)src, bytes);
    copy_small((int8_t *)dst + done, (const int8_t *)src + done, (int32_t)(bytes - done));
}

void eb_dma_copy2d(void *dst, int32_t dst_stride, const void *src, int32_t src_stride,
                   int32_t blocks, uint32_t bytes)
{
    /* A 2-D transfer (most DMA engines take one descriptor for it): `blocks` blocks of
     * `bytes`, `src_stride` apart in the source and `dst_stride` apart in the destination. */
    int8_t *d = (int8_t *)dst;
    const int8_t *s = (const int8_t *)src;
    for (; blocks > 0; --blocks, d += dst_stride, s += src_stride) {
        copy_small(d, s, (int32_t)bytes);
    }
}

/* Elements [first, first + n) of weight row `row` (rows of row_n weights) into dst as int8:
 * a copy of int8 weights (bits 0), or packed b-bit weights unpacked on the way (bits 1, 2,
 * 4: the kernels on a tile always get one int8 per weight; L1 holds them so). */
static void stage_weights(int8_t *dst, const int8_t *weight, int bits, int32_t row,
                          int32_t row_n, int32_t first, int32_t n)
{
    if (bits == 0) {
        eb_dma_copy(dst, weight + row * row_n + first, (uint32_t)n);
    } else {
        const int8_t *src = weight + row * EB_PACKED_ROW_BYTES(row_n, bits);
        int32_t i;
        for (i = 0; i < n; ++i) {
            dst[i] = (int8_t)eb_packed_weight(src, bits, first + i);
        }
    }
}

static void make_layout(eb_slot_layout *l, int32_t in_bytes, int32_t weight_bytes,
                        int32_t bias_bytes, int32_t out_bytes)
{
    l->in = 0;
    l->weight = l->in + EB_ALIGN4(in_bytes);
    l->bias = l->weight + EB_ALIGN4(weight_bytes);
    l->out = l->bias + EB_ALIGN4(bias_bytes);
    l->slot = l->out + EB_ALIGN4(out_bytes);
}

/* v clamped to [1, limit] (limit >= 1 for every valid layer). */
static int clamp_step(int v, int limit)
{
    if (v > limit) {
        v = limit;
    }
    return v < 1 ? 1 : v;
}

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

/* Stage rows [top, top + in_rows) of channels [c0, c0 + c_t) of a [C][in_h][in_w] tensor into
 * dst as [c_t][in_rows][in_w + 2*pad_w]; rows outside the image and the pad_w columns on both
 * sides are zero. */
static void stage_rows(const int8_t *src, int in_h, int in_w, int c0, int c_t, int top,
                       int in_rows, int pad_w, int8_t *dst)
{
    const int32_t wp = (int32_t)in_w + 2 * pad_w;
    const int lo = top < 0 ? min_int(-top, in_rows) : 0; /* first row inside the image */
    const int hi = in_h - top < lo ? lo : min_int(in_h - top, in_rows); /* one past the last */
    int c, r;
    if (pad_w == 0 && lo == 0 && hi == in_rows && in_rows == in_h) {
        /* whole planes: one contiguous block for all channels */
        eb_dma_copy(dst, src + (int32_t)c0 * in_h * in_w, (uint32_t)((int32_t)c_t * in_h * in_w));
        return;
    }
    if (in_w == 1 && pad_w == 0) {
        /* a column (1-D layer along time): a few bytes per channel, copied inline */
        int8_t *d = dst;
        for (c = 0; lo > 0 || hi < in_rows ? c < c_t : 0; ++c, d += in_rows) {
            zero_small(d, lo); /* the rows of padding, if any */
            zero_small(d + hi, in_rows - hi);
        }
        eb_dma_copy2d(dst + lo, in_rows, src + (int32_t)c0 * in_h + (top + lo), in_h, c_t,
                      (uint32_t)(hi - lo));
        return;
    }
    for (c = 0; c < c_t; ++c) {
        int8_t *plane = dst + (int32_t)c * in_rows * wp;
        if (lo > 0) {
            zero_small(plane, (int32_t)lo * wp);
        }
        if (hi > lo) {
            const int8_t *rows = src + ((int32_t)(c0 + c) * in_h + (top + lo)) * in_w;
            if (pad_w == 0) {
                eb_dma_copy(plane + (int32_t)lo * wp, rows, (uint32_t)((int32_t)(hi - lo) * in_w));
            } else {
                for (r = lo; r < hi; ++r) {
                    int8_t *row = plane + (int32_t)r * wp;
                    if (pad_w <= 4 && wp >= 4) { /* a word at either end, the row over them */
                        const uint32_t z = 0u;
                        memcpy(row, &z, 4u);
                        memcpy(row + wp - 4, &z, 4u);
                    } else {
                        zero_small(row, pad_w);
                        zero_small(row + pad_w + in_w, pad_w);
                    }
                    eb_dma_copy(row + pad_w, rows + (int32_t)(r - lo) * in_w, (uint32_t)in_w);
                }
            }
        }
        if (hi < in_rows) {
            zero_small(plane + (int32_t)hi * wp, (int32_t)(in_rows - hi) * wp);
        }
    }
}

/* Copy an output tile [c_t][rows][out_w] (elements of esize bytes) from L1 into the L2 tensor
 * [C][out_h][out_w] at channel c0, row y0. */
static void write_back(const int8_t *tile, int c0, int c_t, int out_h, int out_w, int y0,
                       int rows, int esize, void *out)
{
    int8_t *dst = (int8_t *)out;
    const int32_t row_bytes = (int32_t)out_w * esize;
    int c;
    if (rows == out_h) {
        eb_dma_copy(dst + (int32_t)c0 * out_h * row_bytes, tile,
                    (uint32_t)((int32_t)c_t * rows * row_bytes));
        return;
    }
    if (out_w == 1) { /* a column: a few bytes per channel, one 2-D transfer */
        eb_dma_copy2d(dst + ((int32_t)c0 * out_h + y0) * row_bytes, (int32_t)out_h * row_bytes,
                      tile, (int32_t)rows * row_bytes, c_t, (uint32_t)((int32_t)rows * row_bytes));
        return;
    }
    for (c = 0; c < c_t; ++c) {
        eb_dma_copy(dst + ((int32_t)(c0 + c) * out_h + y0) * row_bytes,
                    tile + (int32_t)c * rows * row_bytes, (uint32_t)((int32_t)rows * row_bytes));
    }
}

/* ---- conv ---------------------------------------------------------------------------- */

/* Output channels per full tile: t->channels clamped to [1, out_c] and made whole-group safe.
 * The contract asks for a multiple of out_c/groups (a tile covers whole groups: its input
 * channels are those of its groups). Two more cases are accepted so that no tile straddles
 * a group boundary: a dense conv (groups == 1) takes any count — every tile reads all in_c
 * input channels, which is what the planner (edgebuild/tiling.py) assumes; a grouped conv
 * takes a divisor of out_c/groups (the tile lies inside one group and reads its in_c/groups
 * channels). Anything else is rounded down to the nearest such count. */
static int conv_oc_step(const eb_conv_params *p, const eb_tile *t)
{
    const int opg = p->out_c / p->groups;
    int c = clamp_step(t->channels, p->out_c);
    if (c >= opg) {
        return c - c % opg;
    }
    if (p->groups > 1) {
        while (opg % c != 0) {
            --c;
        }
    }
    return c;
}

/* The groups a tile of oc_t output channels covers (1 when inside one group), and the input
 * channels it reads (cin_t). */
static int conv_tile_groups(const eb_conv_params *p, int oc_t)
{
    const int opg = p->out_c / p->groups;
    return oc_t >= opg ? oc_t / opg : 1;
}

static int conv_cin_t(const eb_conv_params *p, int oc_t)
{
    return conv_tile_groups(p, oc_t) * (p->in_c / p->groups);
}

static int conv_in_rows(const eb_conv_params *p, int rows)
{
    return (rows - 1) * p->stride_h + p->dil_h * (p->k_h - 1) + 1;
}

static void conv_layout(const eb_conv_params *p, int oc_t, int rows, int wide, int has_bias,
                        eb_slot_layout *l)
{
    const int32_t ipg = p->in_c / p->groups;
    const int32_t in_row_bytes = (int32_t)p->in_w + 2 * p->pad_w;
    make_layout(l, (int32_t)conv_cin_t(p, oc_t) * conv_in_rows(p, rows) * in_row_bytes,
                (int32_t)oc_t * ipg * p->k_h * p->k_w, has_bias ? 4 * (int32_t)oc_t : 0,
                (int32_t)oc_t * rows * p->out_w * (wide ? 4 : 1));
}

extern int32_t eb_conv_tile_slot_bytes(const eb_conv_params *p, const eb_tile *t, int wide,
                                       int has_bias);
int32_t eb_conv_tile_slot_bytes(const eb_conv_params *p, const eb_tile *t, int wide,
                                int has_bias)
{
    eb_slot_layout l;
    conv_layout(p, conv_oc_step(p, t), clamp_step(t->rows, p->out_h), wide, has_bias, &l);
    return l.slot;
}

/* The geometry shared by the staging and the compute of a conv tile. */
typedef struct {
    const eb_conv_params *p;
    const int8_t *in, *weight;
    const int32_t *bias;
    eb_slot_layout lay;
    int oc_step, row_step, n_rt, ipg, opg;
} eb_conv_run;

typedef struct {
    int ct, rt, oc0, oc_t, y0, rows;
} eb_tile_pos;

/* What a slot holds: its channel tile's weights and bias, its row tile's input (-1: none). */
typedef struct {
    int ct, rt;
} eb_held;

/* Tile i: channel tiles outer and row tiles inner (n_ct == 0), or row tiles outer and channel
 * tiles inner (n_ct: the number of channel tiles). */
static void tile_pos(int32_t i, int n_rt, int n_ct, int c_step, int c_total, int row_step,
                     int out_h, eb_tile_pos *tp)
{
    tp->ct = (int)(n_ct != 0 ? i % n_ct : i / n_rt);
    tp->rt = (int)(n_ct != 0 ? i / n_ct : i % n_rt);
    tp->oc0 = tp->ct * c_step;
    tp->oc_t = min_int(c_step, c_total - tp->oc0);
    tp->y0 = tp->rt * row_step;
    tp->rows = min_int(row_step, out_h - tp->y0);
}

/* Input of tile i into slot unless the slot holds its row tile (a dense conv: every channel
 * tile reads the same input; a grouped conv's input is staged every tile); weights and bias
 * unless the slot holds its channel tile. */
static void conv_stage(const eb_conv_run *r, const eb_tile_pos *tp, int8_t *slot, eb_held *held)
{
    const eb_conv_params *p = r->p;
    if (p->groups != 1 || held->rt != tp->rt) {
        stage_rows(r->in, p->in_h, p->in_w, (tp->oc0 / r->opg) * r->ipg,
                   conv_cin_t(p, tp->oc_t), tp->y0 * p->stride_h - p->pad_h,
                   conv_in_rows(p, tp->rows), p->pad_w, slot + r->lay.in);
        held->rt = tp->rt;
    }
    if (held->ct != tp->ct) {
        const int32_t w_per_oc = (int32_t)r->ipg * p->k_h * p->k_w;
        if (p->wbits == 0) {
            eb_dma_copy(slot + r->lay.weight, r->weight + tp->oc0 * w_per_oc,
                        (uint32_t)(tp->oc_t * w_per_oc));
        } else {
            int c;
            for (c = 0; c < tp->oc_t; ++c) {
                stage_weights(slot + r->lay.weight + c * w_per_oc, r->weight, p->wbits,
                              tp->oc0 + c, w_per_oc, 0, w_per_oc);
            }
        }
        if (r->bias != NULL) {
            eb_dma_copy(slot + r->lay.bias, r->bias + tp->oc0, (uint32_t)(4 * tp->oc_t));
        }
        held->ct = tp->ct;
    }
}

/* A column tile ([C][rows][1]: a 1-D layer tiled along time) goes to the kernel as the row
 * it is in memory ([C][1][rows], the same bytes), the layout the kernels are fastest on
 * (the optimized im2col reads 4 neighbouring pixels with one word). */
static void axis_to_row(int16_t *h, int16_t *w, int16_t unit)
{
    *w = *h;
    *h = unit;
}

/* The window of a column ([c][rows][1]) as the row it is in memory: sizes, kernel and stride
 * along the width, 1 along the height (a conv's pad and dilation: as_row). */
static void window_as_row(int16_t *in_h, int16_t *in_w, int16_t *out_h, int16_t *out_w,
                          int16_t *k_h, int16_t *k_w, int16_t *stride_h, int16_t *stride_w)
{
    axis_to_row(in_h, in_w, 1);
    axis_to_row(out_h, out_w, 1);
    axis_to_row(k_h, k_w, 1);
    axis_to_row(stride_h, stride_w, 1);
}

static void as_row(eb_conv_params *t)
{
    if (t->in_w == 1 && t->out_w == 1 && t->k_w == 1 && t->pad_w == 0) {
        window_as_row(&t->in_h, &t->in_w, &t->out_h, &t->out_w, &t->k_h, &t->k_w,
                      &t->stride_h, &t->stride_w);
        axis_to_row(&t->pad_h, &t->pad_w, 0);
        axis_to_row(&t->dil_h, &t->dil_w, 1);
    }
}

/* The params of the kernel call on tile tp (its slot's unpadded input, as a row if a column). */
static void conv_tile_params(const eb_conv_params *p, const eb_tile_pos *tp, eb_conv_params *tile)
{
    *tile = *p;
    tile->in_c = (int16_t)conv_cin_t(p, tp->oc_t);
    tile->in_h = (int16_t)conv_in_rows(p, tp->rows);
    tile->in_w = (int16_t)(p->in_w + 2 * p->pad_w);
    tile->out_c = (int16_t)tp->oc_t;
    tile->out_h = (int16_t)tp->rows;
    tile->pad_h = 0;
    tile->pad_w = 0;
    tile->groups = (int16_t)conv_tile_groups(p, tp->oc_t);
    as_row(tile);
    tile->wbits = 0; /* staged into L1 as int8 (stage_weights) */
}

static void conv_tiled(const eb_conv_params *p, const eb_tile *t, eb_conv_kernel kernel, int wide,
                       const int8_t *in, const int8_t *weight, const int32_t *bias, void *out,
                       int8_t *l1)
{
    eb_conv_run r;
    eb_held held[2] = {{-1, -1}, {-1, -1}};
    const int slots = t->double_buffer ? 2 : 1;
    int32_t i, n_tiles;
    int n_ct;
    r.p = p;
    r.in = in;
    r.weight = weight;
    r.bias = bias;
    r.ipg = p->in_c / p->groups;
    r.opg = p->out_c / p->groups;
    r.oc_step = conv_oc_step(p, t);
    r.row_step = clamp_step(t->rows, p->out_h);
    r.n_rt = (p->out_h + r.row_step - 1) / r.row_step;
    n_ct = (p->out_c + r.oc_step - 1) / r.oc_step;
    n_tiles = (int32_t)n_ct * r.n_rt;
    if (p->groups != 1) {
        n_ct = 0; /* grouped: channel tiles outer */
    }
    conv_layout(p, r.oc_step, r.row_step, wide, bias != NULL, &r.lay);

    for (i = 0; i < n_tiles; ++i) {
        const int s = slots == 2 ? (int)(i & 1) : 0;
        int8_t *slot = l1 + s * r.lay.slot;
        const int32_t *b = bias != NULL ? (const int32_t *)(const void *)(slot + r.lay.bias)
                                        : NULL;
        eb_tile_pos tp;
        eb_conv_params tile;
        tile_pos(i, r.n_rt, n_ct, r.oc_step, p->out_c, r.row_step, p->out_h, &tp);
        if (slots == 1 || i == 0) {
            conv_stage(&r, &tp, slot, &held[s]);
        }
        if (slots == 2 && i + 1 < n_tiles) { /* prefetch the next tile into the other slot */
            eb_tile_pos next;
            tile_pos(i + 1, r.n_rt, n_ct, r.oc_step, p->out_c, r.row_step, p->out_h, &next);
            conv_stage(&r, &next, l1 + (1 - s) * r.lay.slot, &held[1 - s]);
        }
        conv_tile_params(p, &tp, &tile);
        kernel(&tile, slot + r.lay.in, slot + r.lay.weight, b, slot + r.lay.out);
        write_back(slot + r.lay.out, tp.oc0, tp.oc_t, p->out_h, p->out_w, tp.y0, tp.rows,
                   wide ? 4 : 1, out);
    }
}

void eb_conv2d_tiled(const eb_conv_params *p, const eb_tile *t, eb_conv_kernel kernel, int wide,
                     const int8_t *in, const int8_t *weight, const int32_t *bias, void *out,
                     int8_t *l1)
{
    conv_tiled(p, t, kernel, wide, in, weight, bias, out, l1);
}

/* ---- split dense conv (columns) ------------------------------------------------------- */

/* The split layout (eb_tiling.h): the row tile's input at offset 0, channel slots of
 * weights, bias and output over the same bytes (l->in = 0, slot-relative weight/bias/out
 * offsets, l->slot the slot size); the L1 bytes are the larger of the two. */
static int32_t split_layout(int32_t in_bytes, int32_t weight_bytes, int32_t bias_bytes,
                            int32_t out_bytes, int slots, eb_slot_layout *l)
{
    const int32_t channels = (int32_t)slots * (EB_ALIGN4(weight_bytes) + EB_ALIGN4(bias_bytes) +
                                                EB_ALIGN4(out_bytes));
    make_layout(l, 0, weight_bytes, bias_bytes, out_bytes);
    return EB_ALIGN4(in_bytes) > channels ? EB_ALIGN4(in_bytes) : channels;
}

/* Input rows a split row tile of `rows` output rows stages (unpadded, clipped to the input). */
static int split_in_rows(const eb_conv_params *p, int rows)
{
    return min_int(conv_in_rows(p, rows), p->in_h);
}

static int32_t conv_split_layout(const eb_conv_params *p, const eb_tile *t, int wide,
                                 int has_bias, eb_slot_layout *l)
{
    const int oc_t = clamp_step(t->channels, p->out_c);
    const int rows = clamp_step(t->rows, p->out_h);
    return split_layout((int32_t)p->in_c * split_in_rows(p, rows) * p->in_w,
                        (int32_t)oc_t * p->in_c * p->k_h * p->k_w,
                        has_bias ? 4 * (int32_t)oc_t : 0,
                        (int32_t)oc_t * rows * p->out_w * (wide ? 4 : 1), t->double_buffer ? 2 : 1,
                        l);
}

extern int32_t eb_conv_split_l1_bytes(const eb_conv_params *p, const eb_tile *t, int wide,
                                      int has_bias);
int32_t eb_conv_split_l1_bytes(const eb_conv_params *p, const eb_tile *t, int wide,
                               int has_bias)
{
    eb_slot_layout l;
    return conv_split_layout(p, t, wide, has_bias, &l);
}

/* Output channels [oc0, oc0 + oc_t)'s weights (unpacked to int8 when packed) and bias into a
 * split channel slot (the input is in columns already: the slot reuses its bytes). */
static void split_stage_weights(const eb_conv_run *r, int oc0, int oc_t, int8_t *slot)
{
    const eb_conv_params *p = r->p;
    const int32_t w_per_oc = (int32_t)p->in_c * p->k_h * p->k_w;
    if (p->wbits == 0) {
        eb_dma_copy(slot + r->lay.weight, r->weight + oc0 * w_per_oc, (uint32_t)(oc_t * w_per_oc));
    } else {
        int c;
        for (c = 0; c < oc_t; ++c) {
            stage_weights(slot + r->lay.weight + c * w_per_oc, r->weight, p->wbits, oc0 + c,
                          w_per_oc, 0, w_per_oc);
        }
    }
    if (r->bias != NULL) {
        eb_dma_copy(slot + r->lay.bias, r->bias + oc0, (uint32_t)(4 * oc_t));
    }
}

/* Rows [first, first + count) of every channel of a [C][in_h][in_w] tensor into dst as
 * [C][count][in_w]: one block when they are whole planes, else one block per channel. */
static void stage_span(const int8_t *src, int c, int in_h, int in_w, int first, int count,
                       int8_t *dst)
{
    const int32_t block = (int32_t)count * in_w, plane = (int32_t)in_h * in_w;
    int i;
    if (count == in_h) {
        eb_dma_copy(dst, src, (uint32_t)(c * plane));
    } else if (block < 32) { /* a column's few bytes per channel: one 2-D transfer */
        eb_dma_copy2d(dst, block, src + (int32_t)first * in_w, plane, c, (uint32_t)block);
    } else {
        for (i = 0; i < c; ++i) {
            eb_dma_copy(dst + i * block, src + i * plane + (int32_t)first * in_w,
                        (uint32_t)block);
        }
    }
}

/* The params of a split row tile tp: its staged rows [first, first + count) unpadded, the
 * window's padding left to the kernel (pad_h: the rows of padding above the first one). */
static void split_tile_params(const eb_conv_params *p, const eb_tile_pos *tp, int first,
                              int count, eb_conv_params *tile)
{
    *tile = *p;
    tile->in_h = (int16_t)count;
    tile->out_h = (int16_t)tp->rows;
    tile->out_c = (int16_t)tp->oc_t;
    tile->pad_h = (int16_t)(first - (tp->y0 * p->stride_h - p->pad_h));
    as_row(tile);
    tile->wbits = 0; /* staged into L1 as int8 (stage_weights) */
}

/* Channel tile tp of the split row tile `tile` (its columns built) on the weights and bias
 * staged in slot, through cols->run when the kernel has one (job: the row tile's set-up),
 * else cols->dot; its outputs back to L2 (one block when the row tile is whole planes). */
static void split_channel_tile(const eb_conv_run *r, const eb_cols_kernel *cols,
                               const eb_cols_job *job, eb_conv_params *tile, const eb_tile_pos *tp,
                               int wide, const int8_t *slot, void *out)
{
    const eb_conv_params *p = r->p;
    const int32_t *b = r->bias != NULL ? (const int32_t *)(const void *)(slot + r->lay.bias) : NULL;
    const int esize = wide ? 4 : 1;
    int8_t *o = (int8_t *)slot + r->lay.out;
    if (cols->run != NULL) {
        cols->run(job, cols->cols, slot + r->lay.weight, b, tp->oc_t, o);
    } else {
        tile->out_c = (int16_t)tp->oc_t;
        cols->dot(tile, cols->cols, slot + r->lay.weight, b, wide, o);
    }
    if (tp->rows == p->out_h) {
        const int32_t plane = (int32_t)p->out_h * p->out_w * esize;
        eb_dma_copy((int8_t *)out + tp->oc0 * plane, o, (uint32_t)(tp->oc_t * plane));
    } else {
        write_back(o, tp->oc0, tp->oc_t, p->out_h, p->out_w, tp->y0, tp->rows, esize, out);
    }
}

/* Stage channel tile [oc0, oc0 + oc_t)'s weights and bias into slot: int8 weights inline,
 * packed ones through split_stage_weights. */
static void split_stage(const eb_conv_run *r, int32_t w_per_oc, int oc0, int oc_t, int8_t *slot)
{
    if (r->p->wbits != 0) {
        split_stage_weights(r, oc0, oc_t, slot);
        return;
    }
    eb_dma_copy(slot + r->lay.weight, r->weight + oc0 * w_per_oc, (uint32_t)(oc_t * w_per_oc));
    if (r->bias != NULL) {
        eb_dma_copy(slot + r->lay.bias, r->bias + oc0, (uint32_t)(4 * oc_t));
    }
}

/* A dense conv (groups == 1) through cols: per row tile, its input rows staged at l1
 * (unpadded: the kernels skip taps outside them), its columns built once into cols->cols
 * and the dot prepared (cols->prepare, if any); then every channel tile's weights (double
 * buffered: the next one staged while the current one runs) against them. */
static void conv_tiled_split(const eb_conv_params *p, const eb_tile *t, const eb_cols_kernel *cols,
                             int wide, const int8_t *in, const int8_t *weight,
                             const int32_t *bias, void *out, int8_t *l1)
{
    eb_conv_run r;
    eb_cols_job job;
    const int slots = t->double_buffer ? 2 : 1;
    const int32_t w_per_oc = (int32_t)p->in_c * p->k_h * p->k_w;
    int n_ct, rt, ct;
    r.p = p;
    r.in = in;
    r.weight = weight;
    r.bias = bias;
    r.ipg = p->in_c;
    r.opg = p->out_c;
    r.oc_step = clamp_step(t->channels, p->out_c);
    r.row_step = clamp_step(t->rows, p->out_h);
    r.n_rt = (p->out_h + r.row_step - 1) / r.row_step;
    n_ct = (p->out_c + r.oc_step - 1) / r.oc_step;
    (void)conv_split_layout(p, t, wide, bias != NULL, &r.lay);

    for (rt = 0; rt < r.n_rt; ++rt) {
        eb_tile_pos tp;
        eb_conv_params tile;
        const int top = rt * r.row_step * p->stride_h - p->pad_h;
        const int first = top < 0 ? 0 : top;
        const int last = min_int(top + conv_in_rows(p, min_int(r.row_step,
                                                                 p->out_h - rt * r.row_step)),
                                 p->in_h);
        const int count = last > first ? last - first : 0;
        tile_pos((int32_t)rt * n_ct, r.n_rt, n_ct, r.oc_step, p->out_c, r.row_step, p->out_h,
                 &tp);
        stage_span(in, p->in_c, p->in_h, p->in_w, first, count, l1);
        split_tile_params(p, &tp, first, count, &tile);
        cols->build(&tile, l1, cols->cols); /* the input is dead from here: slots reuse it */
        if (cols->run != NULL) {
            tile.out_c = p->out_c; /* the layer's biases: every channel tile's */
            cols->prepare(&tile, bias, wide, &job);
        }
        split_stage(&r, w_per_oc, 0, tp.oc_t, l1);
        for (ct = 0; ct < n_ct; ++ct, tp.oc0 += r.oc_step) {
            int8_t *slot = l1 + (slots == 2 ? (ct & 1) : 0) * r.lay.slot;
            tp.oc_t = min_int(r.oc_step, p->out_c - tp.oc0);
            if (slots == 1 && ct > 0) {
                split_stage(&r, w_per_oc, tp.oc0, tp.oc_t, slot);
            }
            if (slots == 2 && ct + 1 < n_ct) { /* the next channel tile into the other slot */
                const int next = tp.oc0 + r.oc_step;
                split_stage(&r, w_per_oc, next, min_int(r.oc_step, p->out_c - next),
                            l1 + (1 - (ct & 1)) * r.lay.slot);
            }
            split_channel_tile(&r, cols, &job, &tile, &tp, wide, slot, out);
        }
    }
}

void eb_conv2d_tiled_cols(const eb_conv_params *p, const eb_tile *t, eb_conv_kernel kernel,
                          const eb_cols_kernel *cols, int wide, const int8_t *in,
                          const int8_t *weight, const int32_t *bias, void *out, int8_t *l1)
{
    if (p->groups == 1) {
        conv_tiled_split(p, t, cols, wide, in, weight, bias, out, l1);
    } else {
        conv_tiled(p, t, kernel, wide, in, weight, bias, out, l1);
    }
}

/* The split path on the reference kernels: the "columns" are the tile's staged input,
 * copied into the workspace, and the dot is eb_conv2d(_wide) on it. */
void eb_ref_cols_build(const eb_conv_params *p, const int8_t *in, int16_t *cols)
{
    eb_dma_copy(cols, in, (uint32_t)((int32_t)p->in_c * p->in_h * p->in_w));
}

void eb_ref_cols_dot(const eb_conv_params *p, const int16_t *cols, const int8_t *weight,
                     const int32_t *bias, int wide, void *out)
{
    const int8_t *in = (const int8_t *)(const void *)cols;
    if (wide) {
        eb_conv2d_wide(p, in, weight, bias, (int32_t *)out);
    } else {
        eb_conv2d(p, in, weight, bias, (int8_t *)out);
    }
}

/* ---- transposed conv ----------------------------------------------------------------- */

/* floor(a / b) for b > 0 (C division truncates toward zero). */
static int floor_div(int a, int b)
{
    const int q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* The input rows [*first, *first + *count) that output rows [y0, y0 + rows) read: output row
 * y takes input row i through tap k when y + pad_h = i * stride_h + k * dil_h. */
static void convt_span(const eb_conv_params *p, int y0, int rows, int *first, int *count)
{
    const int lo = -floor_div(p->dil_h * (p->k_h - 1) - y0 - p->pad_h, p->stride_h);
    const int hi = floor_div(y0 + rows - 1 + p->pad_h, p->stride_h);
    *first = lo < 0 ? 0 : lo;
    *count = min_int(hi, p->in_h - 1) - *first + 1;
    if (*count < 0) {
        *count = 0;
    }
}

static int convt_in_rows(const eb_conv_params *p, int rows)
{
    return min_int(p->in_h, (rows - 1 + p->dil_h * (p->k_h - 1)) / p->stride_h + 1);
}

static void convt_layout(const eb_conv_params *p, int oc_t, int rows, int wide, int has_bias,
                         eb_slot_layout *l)
{
    const int32_t ipg = p->in_c / p->groups;
    make_layout(l, (int32_t)conv_cin_t(p, oc_t) * convt_in_rows(p, rows) * p->in_w,
                (int32_t)oc_t * ipg * p->k_h * p->k_w, has_bias ? 4 * (int32_t)oc_t : 0,
                (int32_t)oc_t * rows * p->out_w * (wide ? 4 : 1));
}

extern int32_t eb_conv_transpose_tile_slot_bytes(const eb_conv_params *p, const eb_tile *t,
                                                 int wide, int has_bias);
int32_t eb_conv_transpose_tile_slot_bytes(const eb_conv_params *p, const eb_tile *t, int wide,
                                          int has_bias)
{
    eb_slot_layout l;
    convt_layout(p, conv_oc_step(p, t), clamp_step(t->rows, p->out_h), wide, has_bias, &l);
    return l.slot;
}

/* Input rows of tile i into slot; weights ([in][out/groups][k_h][k_w]: the tile's output
 * channels of each of its input channels) and bias too unless the slot already holds them. */
static void convt_stage(const eb_conv_run *r, const eb_tile_pos *tp, int8_t *slot, int *held_ct)
{
    const eb_conv_params *p = r->p;
    const int cin_t = conv_cin_t(p, tp->oc_t);
    const int c_first = (tp->oc0 / r->opg) * r->ipg;
    int first, count;
    convt_span(p, tp->y0, tp->rows, &first, &count);
    stage_rows(r->in, p->in_h, p->in_w, c_first, cin_t, first, count, 0, slot + r->lay.in);
    if (*held_ct != tp->ct) {
        const int32_t taps = (int32_t)p->k_h * p->k_w;
        const int per = min_int(tp->oc_t, r->opg); /* output channels of each group */
        if (per == r->opg && p->wbits == 0) { /* whole groups: one block */
            eb_dma_copy(slot + r->lay.weight, r->weight + (int32_t)c_first * r->opg * taps,
                        (uint32_t)((int32_t)cin_t * per * taps));
        } else {
            int c;
            for (c = 0; c < cin_t; ++c) {
                stage_weights(slot + r->lay.weight + (int32_t)c * per * taps, r->weight,
                              p->wbits, c_first + c, (int32_t)r->opg * taps,
                              (int32_t)(tp->oc0 % r->opg) * taps, (int32_t)per * taps);
            }
        }
        if (r->bias != NULL) {
            eb_dma_copy(slot + r->lay.bias, r->bias + tp->oc0, (uint32_t)(4 * tp->oc_t));
        }
        *held_ct = tp->ct;
    }
}

void eb_conv_transpose2d_tiled(const eb_conv_params *p, const eb_tile *t, eb_conv_kernel kernel,
                               int wide, const int8_t *in, const int8_t *weight,
                               const int32_t *bias, void *out, int8_t *l1)
{
    eb_conv_run r;
    int held_ct[2] = {-1, -1};
    const int slots = t->double_buffer ? 2 : 1;
    int32_t i, n_tiles;
    r.p = p;
    r.in = in;
    r.weight = weight;
    r.bias = bias;
    r.ipg = p->in_c / p->groups;
    r.opg = p->out_c / p->groups;
    r.oc_step = conv_oc_step(p, t);
    r.row_step = clamp_step(t->rows, p->out_h);
    r.n_rt = (p->out_h + r.row_step - 1) / r.row_step;
    n_tiles = (int32_t)((p->out_c + r.oc_step - 1) / r.oc_step) * r.n_rt;
    convt_layout(p, r.oc_step, r.row_step, wide, bias != NULL, &r.lay);

    for (i = 0; i < n_tiles; ++i) {
        const int s = slots == 2 ? (int)(i & 1) : 0;
        int8_t *slot = l1 + s * r.lay.slot;
        eb_tile_pos tp;
        eb_conv_params tile;
        int first, count;
        tile_pos(i, r.n_rt, 0, r.oc_step, p->out_c, r.row_step, p->out_h, &tp);
        if (slots == 1 || i == 0) {
            convt_stage(&r, &tp, slot, &held_ct[s]);
        }
        if (slots == 2 && i + 1 < n_tiles) { /* prefetch the next tile into the other slot */
            eb_tile_pos next;
            tile_pos(i + 1, r.n_rt, 0, r.oc_step, p->out_c, r.row_step, p->out_h, &next);
            convt_stage(&r, &next, l1 + (1 - s) * r.lay.slot, &held_ct[1 - s]);
        }
        convt_span(p, tp.y0, tp.rows, &first, &count);
        tile = *p;
        tile.in_c = (int16_t)conv_cin_t(p, tp.oc_t);
        tile.in_h = (int16_t)count;
        tile.out_c = (int16_t)tp.oc_t;
        tile.out_h = (int16_t)tp.rows;
        tile.pad_h = (int16_t)(tp.y0 + p->pad_h - first * p->stride_h);
        tile.groups = (int16_t)conv_tile_groups(p, tp.oc_t);
        tile.wbits = 0; /* staged as int8 */
        kernel(&tile, slot + r.lay.in, slot + r.lay.weight,
               bias != NULL ? (const int32_t *)(const void *)(slot + r.lay.bias) : NULL,
               slot + r.lay.out);
        write_back(slot + r.lay.out, tp.oc0, tp.oc_t, p->out_h, p->out_w, tp.y0, tp.rows,
                   wide ? 4 : 1, out);
    }
}

/* ---- pool ---------------------------------------------------------------------------- */

/* Input rows of a pool tile slot: the windows' span, or the whole planes for a tile of all
 * the output rows (its channels then lie in one block of L2: one copy, the rows a
 * floor-mode stride leaves unread included). */
static int pool_in_rows(const eb_pool_params *p, int rows)
{
    const int span = (rows - 1) * p->stride_h + p->k_h;
    return rows >= p->out_h && p->in_h > span ? p->in_h : span;
}

static void pool_layout(const eb_pool_params *p, int c_t, int rows, eb_slot_layout *l)
{
    make_layout(l, (int32_t)c_t * pool_in_rows(p, rows) * p->in_w, 0, 0,
                (int32_t)c_t * rows * p->out_w);
}

extern int32_t eb_pool_tile_slot_bytes(const eb_pool_params *p, const eb_tile *t);
int32_t eb_pool_tile_slot_bytes(const eb_pool_params *p, const eb_tile *t)
{
    eb_slot_layout l;
    pool_layout(p, clamp_step(t->channels, p->c), clamp_step(t->rows, p->out_h), &l);
    return l.slot;
}

static void pool_stage(const eb_pool_params *p, const eb_tile_pos *tp, const int8_t *in,
                       int8_t *slot_in)
{
    stage_rows(in, p->in_h, p->in_w, tp->oc0, tp->oc_t, tp->y0 * p->stride_h,
               pool_in_rows(p, tp->rows), 0, slot_in);
}

/* A column pool tile ([c][rows][1]: a 1-D pool along time) as the row it is in memory. */
static void pool_as_row(eb_pool_params *t)
{
    if (t->in_w == 1 && t->out_w == 1 && t->k_w == 1) {
        window_as_row(&t->in_h, &t->in_w, &t->out_h, &t->out_w, &t->k_h, &t->k_w,
                      &t->stride_h, &t->stride_w);
    }
}

void eb_pool2d_tiled(const eb_pool_params *p, const eb_tile *t, const int8_t *in, int8_t *out,
                     int8_t *l1)
{
    eb_pool2d_tiled_k(p, t, eb_pool2d, in, out, l1);
}

void eb_pool2d_tiled_k(const eb_pool_params *p, const eb_tile *t, eb_pool_kernel kernel,
                       const int8_t *in, int8_t *out, int8_t *l1)
{
    eb_slot_layout lay;
    const int slots = t->double_buffer ? 2 : 1;
    const int c_step = clamp_step(t->channels, p->c);
    const int row_step = clamp_step(t->rows, p->out_h);
    const int n_rt = (p->out_h + row_step - 1) / row_step;
    const int32_t n_tiles = (int32_t)((p->c + c_step - 1) / c_step) * n_rt;
    int32_t i;
    pool_layout(p, c_step, row_step, &lay);

    for (i = 0; i < n_tiles; ++i) {
        const int s = slots == 2 ? (int)(i & 1) : 0;
        int8_t *slot = l1 + s * lay.slot;
        eb_tile_pos tp;
        eb_pool_params tile;
        tile_pos(i, n_rt, 0, c_step, p->c, row_step, p->out_h, &tp);
        if (slots == 1 || i == 0) {
            pool_stage(p, &tp, in, slot + lay.in);
        }
        if (slots == 2 && i + 1 < n_tiles) {
            eb_tile_pos next;
            tile_pos(i + 1, n_rt, 0, c_step, p->c, row_step, p->out_h, &next);
            pool_stage(p, &next, in, l1 + (1 - s) * lay.slot + lay.in);
        }
        tile = *p;
        tile.c = (int16_t)tp.oc_t;
        tile.in_h = (int16_t)pool_in_rows(p, tp.rows);
        tile.out_h = (int16_t)tp.rows;
        pool_as_row(&tile);
        kernel(&tile, slot + lay.in, slot + lay.out);
        write_back(slot + lay.out, tp.oc0, tp.oc_t, p->out_h, p->out_w, tp.y0, tp.rows, 1, out);
    }
}

/* ---- linear -------------------------------------------------------------------------- */

static void linear_layout(int in_f, int oc_t, int wide, int has_bias, eb_slot_layout *l)
{
    make_layout(l, in_f, (int32_t)oc_t * in_f, has_bias ? 4 * (int32_t)oc_t : 0,
                (int32_t)oc_t * (wide ? 4 : 1));
}

extern int32_t eb_linear_tile_slot_bytes(int in_f, const eb_tile *t, int wide, int has_bias);
int32_t eb_linear_tile_slot_bytes(int in_f, const eb_tile *t, int wide, int has_bias)
{
    /* out_f is not an argument: the tile is taken as given (channels >= 1). */
    eb_slot_layout l;
    linear_layout(in_f, t->channels < 1 ? 1 : t->channels, wide, has_bias, &l);
    return l.slot;
}

static void linear_stage(int in_f, int o0, int oc_t, int bits, const int8_t *in,
                         const int8_t *weight, const int32_t *bias, const eb_slot_layout *lay,
                         int8_t *slot, int *has_input)
{
    if (!*has_input) { /* the whole input, once per slot */
        eb_dma_copy(slot + lay->in, in, (uint32_t)in_f);
        *has_input = 1;
    }
    if (bits == 0) {
        eb_dma_copy(slot + lay->weight, weight + (int32_t)o0 * in_f,
                    (uint32_t)((int32_t)oc_t * in_f));
    } else {
        int c;
        for (c = 0; c < oc_t; ++c) {
            stage_weights(slot + lay->weight + (int32_t)c * in_f, weight, bits, o0 + c, in_f, 0,
                          in_f);
        }
    }
    if (bias != NULL) {
        eb_dma_copy(slot + lay->bias, bias + o0, (uint32_t)(4 * oc_t));
    }
}

/* Tiles of output channels: the whole input staged once per slot, each tile's weight rows
 * (unpacked to int8 on the way when `bits` is 1, 2 or 4) and biases staged, then the
 * kernel on the slot. */
static void linear_tiled(int in_f, int out_f, int bits, const eb_tile *t,
                         eb_linear_kernel kernel, int wide, const int8_t *in,
                         const int8_t *weight, const int32_t *bias, void *out, int8_t *l1)
{
    eb_slot_layout lay;
    int has_input[2] = {0, 0};
    const int slots = t->double_buffer ? 2 : 1;
    const int esize = wide ? 4 : 1;
    const int step = clamp_step(t->channels, out_f);
    const int n_tiles = (out_f + step - 1) / step;
    int i;
    linear_layout(in_f, step, wide, bias != NULL, &lay);

    for (i = 0; i < n_tiles; ++i) {
        const int s = slots == 2 ? (i & 1) : 0;
        int8_t *slot = l1 + s * lay.slot;
        const int o0 = i * step, oc_t = min_int(step, out_f - o0);
        const int32_t *b = bias != NULL ? (const int32_t *)(const void *)(slot + lay.bias) : NULL;
        if (slots == 1 || i == 0) {
            linear_stage(in_f, o0, oc_t, bits, in, weight, bias, &lay, slot, &has_input[s]);
        }
        if (slots == 2 && i + 1 < n_tiles) {
            const int n0 = o0 + step;
            linear_stage(in_f, n0, min_int(step, out_f - n0), bits, in, weight, bias, &lay,
                         l1 + (1 - s) * lay.slot, &has_input[1 - s]);
        }
        kernel(in_f, oc_t, slot + lay.in, slot + lay.weight, b, slot + lay.out);
        eb_dma_copy((int8_t *)out + (int32_t)o0 * esize, slot + lay.out,
                    (uint32_t)((int32_t)oc_t * esize));
    }
}

static int32_t linear_split_layout(int in_f, const eb_tile *t, int wide, int has_bias,
                                   eb_slot_layout *l)
{
    const int32_t oc_t = t->channels < 1 ? 1 : t->channels;
    return split_layout(in_f, oc_t * in_f, has_bias ? 4 * oc_t : 0, oc_t * (wide ? 4 : 1),
                        t->double_buffer ? 2 : 1, l);
}

extern int32_t eb_linear_split_l1_bytes(int in_f, const eb_tile *t, int wide, int has_bias);
int32_t eb_linear_split_l1_bytes(int in_f, const eb_tile *t, int wide, int has_bias)
{
    /* out_f is not an argument: the tile is taken as given (channels >= 1). */
    eb_slot_layout l;
    return linear_split_layout(in_f, t, wide, has_bias, &l);
}

/* The split layout's weight rows and biases of outputs [o0, o0 + oc_t) into slot. */
static void linear_stage_rows(int in_f, int o0, int oc_t, int bits, const int8_t *weight,
                              const int32_t *bias, const eb_slot_layout *lay, int8_t *slot)
{
    int has_input = 1;
    linear_stage(in_f, o0, oc_t, bits, NULL, weight, bias, lay, slot, &has_input);
}

/* Split: the input staged at l1 once and expanded into cols->cols, then the weight rows
 * stream through the slots over the same bytes (double buffered: the next tile's rows
 * staged while the current ones run). */
static void linear_tiled_split(int in_f, int out_f, int bits, const eb_tile *t,
                               const eb_linear_cols *cols, int wide, const int8_t *in,
                               const int8_t *weight, const int32_t *bias, void *out,
                               int8_t *l1)
{
    eb_slot_layout lay;
    const int slots = t->double_buffer ? 2 : 1;
    const int esize = wide ? 4 : 1;
    const int step = clamp_step(t->channels, out_f);
    const int n_tiles = (out_f + step - 1) / step;
    eb_tile full = *t;
    int i;
    full.channels = (int16_t)step;
    (void)linear_split_layout(in_f, &full, wide, bias != NULL, &lay);
    eb_dma_copy(l1, in, (uint32_t)in_f);
    cols->expand(in_f, l1, cols->cols); /* the input is dead from here: slots reuse it */
    linear_stage_rows(in_f, 0, min_int(step, out_f), bits, weight, bias, &lay, l1);
    for (i = 0; i < n_tiles; ++i) {
        int8_t *slot = l1 + (slots == 2 ? (i & 1) : 0) * lay.slot;
        const int o0 = i * step, oc_t = min_int(step, out_f - o0);
        if (slots == 1 && i > 0) {
            linear_stage_rows(in_f, o0, oc_t, bits, weight, bias, &lay, slot);
        }
        if (slots == 2 && i + 1 < n_tiles) {
            const int n0 = o0 + step;
            linear_stage_rows(in_f, n0, min_int(step, out_f - n0), bits, weight, bias, &lay,
                              l1 + (1 - (i & 1)) * lay.slot);
        }
        cols->dot(in_f, oc_t, cols->cols, slot + lay.weight,
                  bias != NULL ? (const int32_t *)(const void *)(slot + lay.bias) : NULL,
                  slot + lay.out);
        eb_dma_copy((int8_t *)out + (int32_t)o0 * esize, slot + lay.out,
                    (uint32_t)((int32_t)oc_t * esize));
    }
}

void eb_linear_tiled(int in_f, int out_f, const eb_tile *t, eb_linear_kernel kernel, int wide,
                     const int8_t *in, const int8_t *weight, const int32_t *bias, void *out,
                     int8_t *l1)
{
    linear_tiled(in_f, out_f, 0, t, kernel, wide, in, weight, bias, out, l1);
}

void eb_linear_tiled_packed(int in_f, int out_f, int bits, const eb_tile *t,
                            eb_linear_kernel kernel, int wide, const int8_t *in,
                            const int8_t *weight, const int32_t *bias, void *out, int8_t *l1)
{
    linear_tiled(in_f, out_f, bits, t, kernel, wide, in, weight, bias, out, l1);
}

void eb_linear_tiled_cols(int in_f, int out_f, int bits, const eb_tile *t,
                          const eb_linear_cols *cols, int wide, const int8_t *in,
                          const int8_t *weight, const int32_t *bias, void *out, int8_t *l1)
{
    linear_tiled_split(in_f, out_f, bits, t, cols, wide, in, weight, bias, out, l1);
}

/* The split linear on the reference kernels: the "column" is the input copied into the
 * workspace, the dot eb_linear(_wide) on it. */
void eb_ref_linear_expand(int in_f, const int8_t *in, int16_t *cols)
{
    eb_dma_copy(cols, in, (uint32_t)in_f);
}

void eb_ref_linear_dot(int in_f, int out_f, const int16_t *cols, const int8_t *weight,
                       const int32_t *bias, int shift, int rounding, int act, int wide,
                       void *out)
{
    const int8_t *in = (const int8_t *)(const void *)cols;
    if (wide) {
        eb_linear_wide(in_f, out_f, in, weight, bias, (int32_t *)out);
    } else {
        eb_linear(in_f, out_f, in, weight, bias, shift, rounding, act, (int8_t *)out);
    }
}
