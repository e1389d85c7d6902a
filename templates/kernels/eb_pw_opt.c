/* edgebuild optimized pointwise (1x1) convolution: see eb_pw_opt.h for the method, the
 * scratch and the layers it takes, eb_kernels.h for the numerics contract. The reference
 * eb_conv2d(_wide) (eb_kernels.c) is the definition: this must match it bit for bit.
 * C99, no allocation. */
#include "eb_pw_opt.h"

#include <stdint.h>
#include <string.h>

#if (-1 >> 1) != -1
#error "edgebuild kernels need arithmetic right shifts of negative integers"
#endif

/* EB_PW_RARE(c): c, expected false (GCC lays the common path out straight: a taken branch
 * costs 2 cycles more than a fall-through on the M4). */
#if defined(__GNUC__)
#define EB_PW_INLINE inline __attribute__((always_inline))
#define EB_PW_NOINLINE __attribute__((noinline))
#define EB_PW_RARE(c) __builtin_expect(!!(c), 0)
#else
#define EB_PW_INLINE inline
#define EB_PW_NOINLINE
#define EB_PW_RARE(c) (c)
#endif

/* The dual 16-bit MAC primitives (eb_sxtb16, eb_smlad, eb_ssat8, ...), the halfword packing
 * (eb_pack_lo / eb_pack_hi), the column loads (EB_LOAD4X32) and the word helpers (eb_load32,
 * eb_store32, eb_load_tail) are eb_simd.h's, shared with the other optimized kernels.
 * EB_PW_DSP selects this file's own inline-asm paths: the DSP extension under GCC;
 * elsewhere (or with -DEB_OPT_PORTABLE) portable C with the same results, which is how the
 * host tests run it. */
#include "eb_simd.h"

#if EB_OPT_DSP && defined(__GNUC__)
#define EB_PW_DSP 1
#else
#define EB_PW_DSP 0
#endif

/* ---- the layer --------------------------------------------------------------------------- */

typedef struct {
    const int8_t *weight;
    const int32_t *bias;   /* NULL: none */
    int8_t *out8;          /* requantized output, or */
    int32_t *out32;        /* the raw sums (wide) */
    int32_t pixels;        /* in_h * in_w = out_h * out_w */
    int32_t row_bytes;     /* bytes of one output channel's weights */
    int out_c, in_c, bits; /* bits: 0 for int8 weights, else packed 1, 2, 4 */
    int shift, rounding, act;
    int32_t s;             /* -shift: the fast requantization's right shift */
    int32_t round;         /* 2^(s-1) when rounding half up and s > 0, else 0 */
    int fast;              /* whether (acc + round) >> s is exact: see eb_pw_layer_of */
} eb_pw_layer;

/* ---- columns -------------------------------------------------------------------------------
 * The 4 pixels' columns of chunk q from the words t_i = in[4q + i][px .. px + 3] (byte j:
 * pixel j): eb_cols_chunk (eb_simd.h), straight from the input words. */

/* The first `count` (1..4) bytes of a channel plane at pixel px as a word, the rest zero. */
static uint32_t eb_pw_word(const int8_t *at, int count)
{
    uint32_t v = 0;
    int j;
    if (count == 4) {
        return eb_load32(at);
    }
    for (j = 0; j < count; ++j) {
        v |= (uint32_t)(uint8_t)at[j] << (8 * j);
    }
    return v;
}

/* The columns of pixels px .. px + count - 1 (count 1..4; missing pixels zero) from the
 * input `in` ([in_c][pixels]). Integer offsets: no pointer leaves the input array. */
static EB_PW_NOINLINE void eb_pw_columns(const eb_pw_layer *L, const int8_t *in, int32_t px,
                                         int count, int16_t *cols)
{
    const int32_t n = L->pixels;
    const int full = L->in_c & ~3;
    int32_t off = px;
    int ic;
    if (count == 4) {
        for (ic = 0; ic < full; ic += 4, off += 4 * n, cols += 16) {
            eb_cols_chunk(eb_load32(in + off), eb_load32(in + off + n),
                        eb_load32(in + off + 2 * n), eb_load32(in + off + 3 * n), cols);
        }
    } else {
        for (ic = 0; ic < full; ic += 4, off += 4 * n, cols += 16) {
            eb_cols_chunk(eb_pw_word(in + off, count), eb_pw_word(in + off + n, count),
                        eb_pw_word(in + off + 2 * n, count),
                        eb_pw_word(in + off + 3 * n, count), cols);
        }
    }
    if (full < L->in_c) { /* the last 1..3 channels, zero-padded */
        const int rest = L->in_c - full;
        const uint32_t t0 = eb_pw_word(in + off, count);
        const uint32_t t1 = rest > 1 ? eb_pw_word(in + off + n, count) : 0u;
        const uint32_t t2 = rest > 2 ? eb_pw_word(in + off + 2 * n, count) : 0u;
        eb_cols_chunk(t0, t1, t2, 0u, cols);
    }
}

/* ---- dot products ---------------------------------------------------------------------------
 * One weight word (4 channels of one output channel) against the next chunk of the four
 * interleaved columns at c (advanced): a0..a3 += 4 MACs each. */
#define EB_PW_CHUNK(wv)                                   \
    do {                                                  \
        const uint32_t lo_ = eb_sxtb16(wv);               \
        const uint32_t hi_ = eb_sxtb16_ror8(wv);          \
        uint32_t x0_, x1_, x2_, x3_;                      \
        EB_LOAD4X32(c, x0_, x1_, x2_, x3_);               \
        a0 = eb_smlad(hi_, x1_, eb_smlad(lo_, x0_, a0));  \
        a1 = eb_smlad(hi_, x3_, eb_smlad(lo_, x2_, a1));  \
        EB_LOAD4X32(c, x0_, x1_, x2_, x3_);               \
        a2 = eb_smlad(hi_, x1_, eb_smlad(lo_, x0_, a2));  \
        a3 = eb_smlad(hi_, x3_, eb_smlad(lo_, x2_, a3));  \
    } while (0)

#ifndef EB_OPT_NO_PACKED
/* Packed weights (eb_kernels.h): field s of a packed word, moved to the top of each byte
 * and masked, is 4 int8 weights times 2^(8 - b) -- the int8 chunk code runs on it, and the
 * sums are shifted back by 8 - b (exact: every product is a multiple of 2^(8 - b)). */
#define EB_PW_MASK(b) ((b) == 4 ? 0xF0F0F0F0u : (b) == 2 ? 0xC0C0C0C0u : 0x80808080u)
#define EB_PW_FIELD(wv, b, s) (((wv) << (8 - (b) * ((s) + 1))) & EB_PW_MASK(b))

/* One output channel's packed row w (b bits) against the columns: acc[j] = row . column j,
 * chunks = ceil(in_c / 4) of them (the columns and the row are zero-padded as far). */
static EB_PW_INLINE void eb_pw_dot_packed(const int b, const int8_t *w, const int16_t *cols,
                                          int32_t chunks, int32_t acc[4])
{
    const int per = 8 / b; /* chunks per word */
    const int16_t *c = cols;
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int32_t done = 0;
    int s;
    for (; done + per <= chunks; done += per, w += 4) {
        const uint32_t wv = eb_load32(w);
        for (s = 0; s < per; ++s) { /* constant per: unrolled */
            const uint32_t x = EB_PW_FIELD(wv, b, s);
            EB_PW_CHUNK(x);
        }
    }
    if (done < chunks) { /* the row's last word: its first chunks - done fields */
        const uint32_t wv = eb_load32(w);
        for (s = 0; done < chunks; ++s, ++done) {
            const uint32_t x = EB_PW_FIELD(wv, b, s);
            EB_PW_CHUNK(x);
        }
    }
    acc[0] = a0 >> (8 - b);
    acc[1] = a1 >> (8 - b);
    acc[2] = a2 >> (8 - b);
    acc[3] = a3 >> (8 - b);
}

static EB_PW_NOINLINE void eb_pw_packed(int bits, const int8_t *w, const int16_t *cols,
                                        int32_t chunks, int32_t acc[4])
{
    if (bits == 4) {
        eb_pw_dot_packed(4, w, cols, chunks, acc);
    } else if (bits == 2) {
        eb_pw_dot_packed(2, w, cols, chunks, acc);
    } else {
        eb_pw_dot_packed(1, w, cols, chunks, acc);
    }
}
#define EB_PW_PACKED 1
#else
#define EB_PW_PACKED 0 /* -DEB_OPT_NO_PACKED: a project without packed layers */
#endif

/* a0..a3 += the next `chunks` whole chunks of the weight row w (advanced) against the
 * columns at c (advanced). On the M4 hand-written (GCC spills accumulators of the C loop):
 * one routine per object file, eb_pw_chunks, of 16 chunks written out -- 13 instructions
 * each (LDR, 2 SXTB16, 2 LDM, 8 SMLAD: about 22 cycles for 16 MACs), every one a 32-bit
 * encoding (.w), so 52 bytes a chunk -- called (BLX) at chunk 16 - m for m <= 16 chunks
 * and returning at its end: no loop counter, fixed registers (sums r0-r3, w r11, c r12,
 * r4-r6, r8-r10 scratch; not r7, Thumb's frame pointer at -O0), one copy of the code for
 * every caller. More than 16 chunks go 16 at a time. The label is local to the object:
 * two models' kernels link side by side. */
#if EB_PW_DSP
#define EB_PW_ASM_CHUNK                          \
    "ldr.w    r9, [r11], #4\n\t"                 \
    "ldmia.w  r12!, {r4, r5, r6, r8}\n\t"        \
    "sxtb16   r10, r9, ror #8\n\t"               \
    "sxtb16   r9, r9\n\t"                        \
    "smlad    r0, r9, r4, r0\n\t"                \
    "smlad    r0, r10, r5, r0\n\t"               \
    "smlad    r1, r9, r6, r1\n\t"                \
    "smlad    r1, r10, r8, r1\n\t"               \
    "ldmia.w  r12!, {r4, r5, r6, r8}\n\t"        \
    "smlad    r2, r9, r4, r2\n\t"                \
    "smlad    r2, r10, r5, r2\n\t"               \
    "smlad    r3, r9, r6, r3\n\t"                \
    "smlad    r3, r10, r8, r3\n\t"
#define EB_PW_ASM_CHUNK4 EB_PW_ASM_CHUNK EB_PW_ASM_CHUNK EB_PW_ASM_CHUNK EB_PW_ASM_CHUNK
#define EB_PW_CHUNK_BYTES 52
__asm__(".pushsection .text.eb_pw_chunks, \"ax\", %progbits\n"
        ".syntax unified\n"
        ".thumb\n"
        ".p2align 2\n"
        ".type eb_pw_chunks, %function\n"
        ".thumb_func\n"
        "eb_pw_chunks:\n\t" EB_PW_ASM_CHUNK4 EB_PW_ASM_CHUNK4 EB_PW_ASM_CHUNK4 EB_PW_ASM_CHUNK4
        "\neb_pw_chunks_end:\n\t"
        "bx       lr\n"
        ".size eb_pw_chunks, . - eb_pw_chunks\n"
        ".popsection\n");
/* The address of eb_pw_chunks' chunk 16 - m (m in 0..16; 0: its end), Thumb bit set. */
static inline uint32_t eb_pw_entry(int32_t m)
{
    uint32_t end;
    __asm__("movw     %0, #:lower16:eb_pw_chunks_end\n\t"
            "movt     %0, #:upper16:eb_pw_chunks_end"
            : "=r"(end));
    return (end - (uint32_t)m * EB_PW_CHUNK_BYTES) | 1u;
}

/* The chunks from `entry` (eb_pw_entry) on. */
#define EB_PW_CALL(entry)                                                                \
    do {                                                                                 \
        register int32_t r0_ __asm__("r0") = a0;                                         \
        register int32_t r1_ __asm__("r1") = a1;                                         \
        register int32_t r2_ __asm__("r2") = a2;                                         \
        register int32_t r3_ __asm__("r3") = a3;                                         \
        register const int8_t *r11_ __asm__("r11") = w;                                  \
        register const int16_t *r12_ __asm__("r12") = c;                                 \
        register uint32_t r9_ __asm__("r9") = (entry);                                   \
        __asm__ volatile("blx      r9"                                                   \
                         : "+r"(r0_), "+r"(r1_), "+r"(r2_), "+r"(r3_), "+r"(r11_),       \
                           "+r"(r12_), "+r"(r9_)                                         \
                         :                                                               \
                         : "r4", "r5", "r6", "r8", "r10", "lr", "cc", "memory");         \
        a0 = r0_;                                                                        \
        a1 = r1_;                                                                        \
        a2 = r2_;                                                                        \
        a3 = r3_;                                                                        \
        w = r11_;                                                                        \
        c = r12_;                                                                        \
    } while (0)
/* The row's whole chunks: r.entry runs min(whole, 16) of them, any more go 16 at a time. */
#define EB_PW_DOT8(r)                                                                    \
    do {                                                                                 \
        int32_t left_;                                                                   \
        EB_PW_CALL((r).entry);                                                           \
        for (left_ = (r).whole - 16; EB_PW_RARE(left_ > 0); left_ -= 16) {               \
            EB_PW_CALL(eb_pw_entry(left_ > 16 ? 16 : left_));                            \
        }                                                                                \
    } while (0)
#else
#define EB_PW_DOT8(r)                                                                    \
    do {                                                                                 \
        int32_t n_;                                                                      \
        for (n_ = (r).whole; n_ > 0; --n_, w += 4) {                                     \
            const uint32_t wv_ = eb_load32(w);                                           \
            EB_PW_CHUNK(wv_);                                                            \
        }                                                                                \
    } while (0)
#endif

/* ---- output channels ------------------------------------------------------------------------
 * The fast requantization: the sums start at bias + round, so that a right shift by s is
 * eb_requantize's floor((acc + 2^(s-1)) / 2^s) (half up) or floor(acc / 2^s) (floor);
 * then SSAT #8, USAT #7 or both around an abs. It takes 0 <= s <= 31 when no sum plus
 * round can overflow (eb_pw_layer_of checks the bias against the largest possible sum);
 * any other layer (left shifts, huge biases) goes through eb_requantize itself. */
enum { EB_PW_WIDE, EB_PW_RELU, EB_PW_NONE, EB_PW_ABS };

static EB_PW_INLINE int8_t eb_pw_out(int32_t acc, int32_t s, const int mode)
{
    const int32_t v = acc >> s;
    if (mode == EB_PW_RELU) {
        return (int8_t)eb_usat7(v);
    }
    if (mode == EB_PW_NONE) {
        return (int8_t)eb_ssat8(v);
    }
    {
        const int32_t t = eb_ssat8(v);
        return (int8_t)eb_usat7(t < 0 ? -t : t);
    }
}

static const int32_t eb_pw_no_bias = 0;

/* How one output channel's weight row is read: int8 (bits 0; `whole` = in_c / 4 chunks,
 * then `tail` = in_c % 4 channels) or packed (bits 1, 2, 4; `chunks` = ceil(in_c / 4)),
 * `row_bytes` long. Copied out of the layer so that nothing is reloaded per channel. */
typedef struct {
    int32_t whole, tail, bits, chunks, row_bytes;
#if EB_PW_DSP
    uint32_t entry; /* eb_pw_entry(min(whole, 16)) */
#endif
} eb_pw_rowshape;

static eb_pw_rowshape eb_pw_rowshape_of(const eb_pw_layer *L)
{
    eb_pw_rowshape r;
    r.whole = L->in_c >> 2;
    r.tail = L->in_c & 3;
#if EB_PW_DSP
    r.entry = eb_pw_entry(r.whole > 16 ? 16 : r.whole);
#endif
    r.bits = L->bits;
    r.chunks = (L->in_c + 3) >> 2;
    r.row_bytes = L->row_bytes;
    return r;
}

/* a[0..3] = start + the weight row at *wp against the four interleaved columns at cols;
 * *wp advances past the row. */
static EB_PW_INLINE void eb_pw_sums(const eb_pw_rowshape r, const int8_t **wp,
                                    const int16_t *cols, int32_t start, int32_t a[4])
{
    const int8_t *w = *wp;
    int32_t a0 = start, a1 = start, a2 = start, a3 = start;
#if EB_PW_PACKED
    if (EB_PW_RARE(r.bits != 0)) {
        int32_t acc[4];
        eb_pw_packed(r.bits, w, cols, r.chunks, acc);
        w += r.row_bytes;
        a0 += acc[0];
        a1 += acc[1];
        a2 += acc[2];
        a3 += acc[3];
    } else
#endif
    {
        const int16_t *c = cols;
        EB_PW_DOT8(r);
        if (EB_PW_RARE(r.tail != 0)) { /* the last 1..3 channels */
            const uint32_t wv = eb_load_tail(w, r.tail);
            EB_PW_CHUNK(wv);
            w += r.tail;
        }
    }
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
    *wp = w;
}

/* Every output channel of pixels px .. px + 3 (their columns at cols) with the fast
 * requantization or wide; the mode (EB_PW_*) is a constant in each out-of-line copy. */
static EB_PW_INLINE void eb_pw_rows(const eb_pw_layer *L, const int16_t *cols, int32_t px,
                                    const int mode)
{
    const int8_t *w = L->weight;
    const int8_t *const end = w + (int32_t)L->out_c * L->row_bytes;
    const int32_t *bias = L->bias != NULL ? L->bias : &eb_pw_no_bias;
    const int32_t step = L->bias != NULL ? 1 : 0;
    const int32_t pixels = L->pixels, s = L->s;
    const int32_t round = mode == EB_PW_WIDE ? 0 : L->round;
    const eb_pw_rowshape r = eb_pw_rowshape_of(L);
    int8_t *out8 = mode == EB_PW_WIDE ? NULL : L->out8 + px;
    int32_t *out32 = mode == EB_PW_WIDE ? L->out32 + px : NULL;
    while (w != end) {
        int32_t a[4];
        eb_pw_sums(r, &w, cols, *bias + round, a);
        bias += step;
        if (mode == EB_PW_WIDE) {
            out32[0] = a[0];
            out32[1] = a[1];
            out32[2] = a[2];
            out32[3] = a[3];
            out32 += pixels;
        } else {
            out8[0] = eb_pw_out(a[0], s, mode);
            out8[1] = eb_pw_out(a[1], s, mode);
            out8[2] = eb_pw_out(a[2], s, mode);
            out8[3] = eb_pw_out(a[3], s, mode);
            out8 += pixels;
        }
    }
}

#define EB_PW_ROWS(name, mode)                                                              \
    static EB_PW_NOINLINE void name(const eb_pw_layer *L, const int16_t *cols, int32_t px) \
    {                                                                                       \
        eb_pw_rows(L, cols, px, mode);                                                      \
    }
/* One per output form a layer of the model takes (eb_config.h leaves out the others,
 * EB_OPT_NO_Q_*: ops.conv_path.gemm_paths; their layers would take eb_pw_rows_any). */
#ifndef EB_OPT_NO_Q_WIDE
EB_PW_ROWS(eb_pw_rows_wide, EB_PW_WIDE)
#define EB_PW_ROWS_WIDE eb_pw_rows_wide
#else
#define EB_PW_ROWS_WIDE ((eb_pw_rows_fn)0)
#endif
#ifndef EB_OPT_NO_Q_RELU
EB_PW_ROWS(eb_pw_rows_relu, EB_PW_RELU)
#define EB_PW_ROWS_RELU eb_pw_rows_relu
#else
#define EB_PW_ROWS_RELU ((eb_pw_rows_fn)0)
#endif
#ifndef EB_OPT_NO_Q_NONE
EB_PW_ROWS(eb_pw_rows_none, EB_PW_NONE)
#define EB_PW_ROWS_NONE eb_pw_rows_none
#else
#define EB_PW_ROWS_NONE ((eb_pw_rows_fn)0)
#endif
#ifndef EB_OPT_NO_Q_ABS
EB_PW_ROWS(eb_pw_rows_abs, EB_PW_ABS)
#define EB_PW_ROWS_ABS eb_pw_rows_abs
#else
#define EB_PW_ROWS_ABS ((eb_pw_rows_fn)0)
#endif
#undef EB_PW_ROWS

/* Every output channel of pixels px .. px + count - 1 (count 1..4): the last pixels of a
 * layer whose pixel count is not a multiple of 4, and every pixel of a layer without the
 * fast requantization (eb_requantize, or wide). */
static EB_PW_NOINLINE void eb_pw_rows_any(const eb_pw_layer *L, const int16_t *cols,
                                          int32_t px, int count)
{
    const eb_pw_rowshape r = eb_pw_rowshape_of(L);
    const int8_t *w = L->weight;
    int32_t index = px;
    int o, j;
    for (o = 0; o < L->out_c; ++o, index += L->pixels) {
        int32_t a[4];
        eb_pw_sums(r, &w, cols, L->bias != NULL ? L->bias[o] : 0, a);
        for (j = 0; j < count; ++j) {
            if (L->out32 != NULL) {
                L->out32[index + j] = a[j];
            } else {
                L->out8[index + j] = eb_requantize(a[j], L->shift, L->rounding, L->act);
            }
        }
    }
}

typedef void (*eb_pw_rows_fn)(const eb_pw_layer *L, const int16_t *cols, int32_t px);

/* The fast rows function of the layer, or NULL (eb_pw_rows_any for every block). */
static eb_pw_rows_fn eb_pw_rows_of(const eb_pw_layer *L)
{
    return L->out32 != NULL ? EB_PW_ROWS_WIDE
           : !L->fast ? (eb_pw_rows_fn)0
           : L->act == EB_ACT_RELU ? EB_PW_ROWS_RELU
           : L->act == EB_ACT_NONE ? EB_PW_ROWS_NONE : EB_PW_ROWS_ABS;
}

/* Every output channel of the 4-pixel block at px (fewer at the end), columns at cols. */
static void eb_pw_block(const eb_pw_layer *L, eb_pw_rows_fn rows, const int16_t *cols,
                        int32_t px)
{
    const int count = L->pixels - px < 4 ? (int)(L->pixels - px) : 4;
    if (count == 4 && rows != NULL) {
        rows(L, cols, px);
    } else {
        eb_pw_rows_any(L, cols, px, count);
    }
}

/* The whole layer, 4 pixels at a time: their columns into scratch, then every channel. A
 * count of pixels that is not a multiple of 4 (4 or more) ends with a block overlapping the
 * one before (its first pixels computed and stored twice, the same way): the byte-by-byte
 * columns and eb_pw_rows_any of a partial block cost more than the whole block (48 -> 4 on
 * 35 pixels: 15 % of the layer). */
static void eb_pw_run(const eb_pw_layer *L, const int8_t *in, int16_t *scratch)
{
    const eb_pw_rows_fn rows = eb_pw_rows_of(L);
    int32_t px;
    for (px = 0; px < L->pixels; px += 4) {
        if (px + 4 > L->pixels && L->pixels >= 4) {
            px = L->pixels - 4;
        }
        eb_pw_columns(L, in, px, L->pixels - px < 4 ? (int)(L->pixels - px) : 4, scratch);
        eb_pw_block(L, rows, scratch, px);
    }
}

/* Whether p is a layer this file computes (eb_pw_opt.h). */
static int eb_pw_takes(const eb_conv_params *p)
{
    return p->k_h == 1 && p->k_w == 1 && p->stride_h == 1 && p->stride_w == 1 &&
           p->pad_h == 0 && p->pad_w == 0 && p->groups == 1 && p->out_h == p->in_h &&
           p->out_w == p->in_w;
}

/* The layer of p. The fast requantization needs |bias + sum + round| < 2^31 for every
 * output: |sum| <= in_c * 2^14 (|x|, |w| <= 2^7; packed weights are smaller). */
static void eb_pw_layer_of(eb_pw_layer *L, const eb_conv_params *p, const int8_t *weight,
                           const int32_t *bias)
{
    const int32_t s = -(int32_t)p->shift;
    int o;
    L->weight = weight;
    L->bias = bias;
    L->pixels = (int32_t)p->in_h * p->in_w;
    L->out_c = p->out_c;
    L->in_c = p->in_c;
    L->bits = p->wbits;
    L->row_bytes = p->wbits ? EB_PACKED_ROW_BYTES(p->in_c, p->wbits) : p->in_c;
    L->shift = p->shift;
    L->rounding = p->rounding;
    L->act = p->act;
    L->s = s;
    L->round = s > 0 && s <= 31 && p->rounding == EB_ROUND_HALF_UP ? (int32_t)1 << (s - 1) : 0;
    L->fast = s >= 0 && s <= 31 && (p->act == EB_ACT_RELU || p->act == EB_ACT_NONE ||
                                     p->act == EB_ACT_ABS);
    if (L->fast) {
        const int32_t room = INT32_MAX - L->round - (int32_t)p->in_c * 16384;
        L->fast = room >= 0;
        for (o = 0; L->fast && bias != NULL && o < p->out_c; ++o) {
            L->fast = bias[o] >= -room && bias[o] <= room;
        }
    }
}

void eb_conv2d_pw_opt(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                      const int32_t *bias, int8_t *out, int16_t *scratch)
{
    eb_pw_layer L;
    if (!eb_pw_takes(p)) {
        eb_conv2d(p, in, weight, bias, out);
        return;
    }
    eb_pw_layer_of(&L, p, weight, bias);
    L.out8 = out;
    L.out32 = NULL;
    eb_pw_run(&L, in, scratch);
}

void eb_conv2d_pw_wide_opt(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                           const int32_t *bias, int32_t *out, int16_t *scratch)
{
    eb_pw_layer L;
    if (!eb_pw_takes(p)) {
        eb_conv2d_wide(p, in, weight, bias, out);
        return;
    }
    eb_pw_layer_of(&L, p, weight, bias);
    L.out8 = NULL;
    L.out32 = out;
    eb_pw_run(&L, in, scratch);
}

/* ---- column blocks for the tiled driver (eb_tiling.c, eb_conv2d_tiled_cols) ---------------
 * A pointwise layer tiled through L1: eb_pw_cols_build writes the columns of every 4-pixel
 * block of a row tile (block b at cols + b * 4 * round_up_4(in_c)), eb_pw_cols_dot runs a
 * channel tile's weights against them. The same arithmetic as eb_conv2d_pw(_wide)_opt. */

void eb_pw_cols_build(const eb_conv_params *p, const int8_t *in, int16_t *cols)
{
    eb_pw_layer L;
    const int32_t block = 4 * (((int32_t)p->in_c + 3) & ~(int32_t)3);
    int32_t px;
    eb_pw_layer_of(&L, p, NULL, NULL);
    for (px = 0; px < L.pixels; px += 4, cols += block) {
        eb_pw_columns(&L, in, px, L.pixels - px < 4 ? (int)(L.pixels - px) : 4, cols);
    }
}

void eb_pw_cols_dot(const eb_conv_params *p, const int16_t *cols, const int8_t *weight,
                    const int32_t *bias, int wide, void *out)
{
    eb_pw_layer L;
    const int32_t block = 4 * (((int32_t)p->in_c + 3) & ~(int32_t)3);
    eb_pw_rows_fn rows;
    int32_t px;
    eb_pw_layer_of(&L, p, weight, bias);
    L.out8 = wide ? NULL : (int8_t *)out;
    L.out32 = wide ? (int32_t *)out : NULL;
    rows = eb_pw_rows_of(&L);
    for (px = 0; px < L.pixels; px += 4, cols += block) {
        eb_pw_block(&L, rows, cols, px);
    }
}
