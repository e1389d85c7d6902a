/* edgebuild optimized int8 kernels: see eb_kernels_opt.h for the method and the scratch
 * sizes, eb_kernels.h for the numerics contract. The reference kernels (eb_kernels.c) are
 * the definition: these must match them bit for bit. C99, no allocation. */
#include "eb_kernels_opt.h"

#include <string.h>

#if (-1 >> 1) != -1
#error "edgebuild kernels need arithmetic right shifts of negative integers"
#endif

/* ---- dual 16-bit MAC primitives ----------------------------------------------------------
 * Packed values are uint32_t holding two 16-bit halves (or four bytes).
 *   eb_sxtb16(x)      = [sext(byte 0), sext(byte 2)] as two int16 halves (low, high)
 *   eb_sxtb16_ror8(x) = eb_sxtb16(x rotated right by 8) = [sext(byte 1), sext(byte 3)]
 *   eb_smlad(a, b, c) = c + lo16(a) * lo16(b) + hi16(a) * hi16(b) (signed halves), wrapping
 * With the DSP extension these are single instructions (SXTB16, SXTB16 ROR #8, SMLAD);
 * otherwise (or with -DEB_OPT_PORTABLE) portable C with the same results runs the same
 * algorithm, which is how the host tests exercise it. */
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32) && !defined(EB_OPT_PORTABLE)
#include <arm_acle.h>
#define EB_OPT_DSP 1

static inline uint32_t eb_ror(uint32_t x, unsigned n)
{
    return (x >> n) | (x << ((32u - n) & 31u));
}

static inline uint32_t eb_sxtb16(uint32_t x)
{
    return (uint32_t)__sxtb16((int32_t)x);
}

#if defined(__GNUC__)
/* GCC does not fold the rotation into SXTB16's ROR operand: one instruction by hand. */
static inline uint32_t eb_sxtb16_ror8(uint32_t x)
{
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}
#else
static inline uint32_t eb_sxtb16_ror8(uint32_t x)
{
    return (uint32_t)__sxtb16((int32_t)eb_ror(x, 8));
}
#endif

static inline int32_t eb_smlad(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlad((int32_t)a, (int32_t)b, acc);
}
#else
#define EB_OPT_DSP 0

/* Two's-complement reinterpretation without implementation-defined conversions. */
static inline int32_t eb_u32_to_s32(uint32_t u)
{
    return u <= 0x7FFFFFFFu ? (int32_t)u : -(int32_t)(0xFFFFFFFFu - u) - 1;
}

static inline int32_t eb_lo16(uint32_t x)
{
    return (int32_t)(x & 0xFFFFu) - (int32_t)((x & 0x8000u) << 1);
}

static inline int32_t eb_hi16(uint32_t x)
{
    return eb_lo16(x >> 16);
}

static inline uint32_t eb_sxtb16(uint32_t x)
{
    const uint32_t lo = (x & 0xFFu) | ((x & 0x80u) ? 0xFF00u : 0u);
    const uint32_t hi = ((x >> 16) & 0xFFu) | ((x & 0x800000u) ? 0xFF00u : 0u);
    return lo | (hi << 16);
}

static inline uint32_t eb_sxtb16_ror8(uint32_t x)
{
    return eb_sxtb16((x >> 8) | (x << 24));
}

static inline int32_t eb_smlad(uint32_t a, uint32_t b, int32_t acc)
{
    const uint32_t p0 = (uint32_t)(eb_lo16(a) * eb_lo16(b)); /* |product| <= 2^30: no overflow */
    const uint32_t p1 = (uint32_t)(eb_hi16(a) * eb_hi16(b));
    return eb_u32_to_s32((uint32_t)acc + p0 + p1);
}
#endif

/* 32-bit loads: weights are only byte-aligned (an unaligned LDR on the M4), the scratch
 * column is 4-byte aligned. memcpy keeps this free of alignment and aliasing problems. */
static inline uint32_t eb_load32(const void *src)
{
    uint32_t v;
    memcpy(&v, src, sizeof v);
    return v;
}

/* The last n (1..3) weights of a row as a word, zero-padded (never reads past the row). */
static inline uint32_t eb_load_tail(const int8_t *w, int32_t n)
{
    uint32_t v = (uint8_t)w[0];
    if (n > 1) {
        v |= (uint32_t)(uint8_t)w[1] << 8;
    }
    if (n > 2) {
        v |= (uint32_t)(uint8_t)w[2] << 16;
    }
    return v;
}

/* One group of 4 weights (word wv) against one reordered column group ([a0,a2], [a1,a3]). */
#define EB_MAC4(acc, wlo, whi, c02, c13) \
    (acc) = eb_smlad((whi), (c13), eb_smlad((wlo), (c02), (acc)))

/* ---- im2col ---------------------------------------------------------------------------- */

/* Swap the middle two values of every group of 4: [a0,a1,a2,a3] -> [a0,a2,a1,a3]. */
static void eb_reorder(int16_t *col, int32_t kp)
{
    int32_t q;
    for (q = 0; q < kp; q += 4) {
        const int16_t t = col[q + 1];
        col[q + 1] = col[q + 2];
        col[q + 2] = t;
    }
}

/* The receptive field of output pixel (oy, ox) over in_g's ipg channels, in weight order
 * ([ic][ky][kx]), zero outside the input, zero-padded to kp, reordered for eb_smlad. */
static void eb_im2col(const eb_conv_params *p, const int8_t *in_g, int ipg, int oy, int ox,
                      int16_t *col, int32_t kp)
{
    const int in_h = p->in_h, in_w = p->in_w, k_h = p->k_h, k_w = p->k_w;
    const int dil_h = p->dil_h, dil_w = p->dil_w;
    const int iy0 = oy * p->stride_h - p->pad_h, ix0 = ox * p->stride_w - p->pad_w;
    const int32_t plane = (int32_t)in_h * in_w;
    int16_t *d = col;
    int16_t *const end = col + kp;
    int ic, ky, kx;

    if (iy0 >= 0 && iy0 + (k_h - 1) * dil_h < in_h && ix0 >= 0 &&
        ix0 + (k_w - 1) * dil_w < in_w) {
        /* the whole window is inside the input: no bounds checks */
        const int32_t row_step = (int32_t)dil_h * in_w;
        const int8_t *base = in_g + (int32_t)iy0 * in_w + ix0;
        for (ic = 0; ic < ipg; ++ic, base += plane) {
            const int8_t *row = base;
            for (ky = 0; ky < k_h; ++ky, row += row_step) {
                if (dil_w == 1) {
                    for (kx = 0; kx < k_w; ++kx) {
                        *d++ = row[kx];
                    }
                } else {
                    const int8_t *s = row;
                    for (kx = 0; kx < k_w; ++kx, s += dil_w) {
                        *d++ = *s;
                    }
                }
            }
        }
    } else {
        const int8_t *chan = in_g;
        for (ic = 0; ic < ipg; ++ic, chan += plane) {
            for (ky = 0; ky < k_h; ++ky) {
                const int iy = iy0 + ky * dil_h;
                if (iy < 0 || iy >= in_h) {
                    for (kx = 0; kx < k_w; ++kx) {
                        *d++ = 0;
                    }
                } else {
                    const int8_t *row = chan + (int32_t)iy * in_w;
                    for (kx = 0; kx < k_w; ++kx) {
                        const int ix = ix0 + kx * dil_w;
                        *d++ = (ix >= 0 && ix < in_w) ? row[ix] : 0;
                    }
                }
            }
        }
    }
    while (d < end) {
        *d++ = 0;
    }
    eb_reorder(col, kp);
}

/* ---- dot products against reordered columns --------------------------------------------
 * k values per row; weight rows w0/w1 are byte-aligned int8, columns c0/c1 hold
 * EB_OPT_ROUND4(k) reordered int16 values. acc[] come in with the bias. */

static void eb_dot_2x2(int32_t k, const int8_t *w0, const int8_t *w1, const int16_t *c0,
                       const int16_t *c1, int32_t acc[4])
{
    int32_t a00 = acc[0], a01 = acc[1], a10 = acc[2], a11 = acc[3];
    int32_t n = k >> 2;
    const int32_t tail = k & 3;
    while (n > 0) {
        const uint32_t wa = eb_load32(w0), wb = eb_load32(w1);
        const uint32_t x0 = eb_load32(c0), x0b = eb_load32(c0 + 2);
        const uint32_t x1 = eb_load32(c1), x1b = eb_load32(c1 + 2);
        const uint32_t wa_lo = eb_sxtb16(wa), wa_hi = eb_sxtb16_ror8(wa);
        const uint32_t wb_lo = eb_sxtb16(wb), wb_hi = eb_sxtb16_ror8(wb);
        EB_MAC4(a00, wa_lo, wa_hi, x0, x0b);
        EB_MAC4(a01, wa_lo, wa_hi, x1, x1b);
        EB_MAC4(a10, wb_lo, wb_hi, x0, x0b);
        EB_MAC4(a11, wb_lo, wb_hi, x1, x1b);
        w0 += 4;
        w1 += 4;
        c0 += 4;
        c1 += 4;
        --n;
    }
    if (tail != 0) {
        const uint32_t wa = eb_load_tail(w0, tail), wb = eb_load_tail(w1, tail);
        const uint32_t x0 = eb_load32(c0), x0b = eb_load32(c0 + 2);
        const uint32_t x1 = eb_load32(c1), x1b = eb_load32(c1 + 2);
        const uint32_t wa_lo = eb_sxtb16(wa), wa_hi = eb_sxtb16_ror8(wa);
        const uint32_t wb_lo = eb_sxtb16(wb), wb_hi = eb_sxtb16_ror8(wb);
        EB_MAC4(a00, wa_lo, wa_hi, x0, x0b);
        EB_MAC4(a01, wa_lo, wa_hi, x1, x1b);
        EB_MAC4(a10, wb_lo, wb_hi, x0, x0b);
        EB_MAC4(a11, wb_lo, wb_hi, x1, x1b);
    }
    acc[0] = a00;
    acc[1] = a01;
    acc[2] = a10;
    acc[3] = a11;
}

/* One weight row against two columns (acc[0], acc[1]); with c1 == NULL, one column. */
static void eb_dot_1x2(int32_t k, const int8_t *w0, const int16_t *c0, const int16_t *c1,
                       int32_t acc[2])
{
    int32_t a0 = acc[0], a1 = acc[1];
    int32_t n = k >> 2;
    const int32_t tail = k & 3;
    while (n > 0) {
        const uint32_t wa = eb_load32(w0);
        const uint32_t wa_lo = eb_sxtb16(wa), wa_hi = eb_sxtb16_ror8(wa);
        EB_MAC4(a0, wa_lo, wa_hi, eb_load32(c0), eb_load32(c0 + 2));
        if (c1 != NULL) {
            EB_MAC4(a1, wa_lo, wa_hi, eb_load32(c1), eb_load32(c1 + 2));
            c1 += 4;
        }
        w0 += 4;
        c0 += 4;
        --n;
    }
    if (tail != 0) {
        const uint32_t wa = eb_load_tail(w0, tail);
        const uint32_t wa_lo = eb_sxtb16(wa), wa_hi = eb_sxtb16_ror8(wa);
        EB_MAC4(a0, wa_lo, wa_hi, eb_load32(c0), eb_load32(c0 + 2));
        if (c1 != NULL) {
            EB_MAC4(a1, wa_lo, wa_hi, eb_load32(c1), eb_load32(c1 + 2));
        }
    }
    acc[0] = a0;
    acc[1] = a1;
}

/* Two weight rows against one column (acc[0] row 0, acc[1] row 1). */
static void eb_dot_2x1(int32_t k, const int8_t *w0, const int8_t *w1, const int16_t *c0,
                       int32_t acc[2])
{
    int32_t a0 = acc[0], a1 = acc[1];
    int32_t n = k >> 2;
    const int32_t tail = k & 3;
    while (n > 0) {
        const uint32_t wa = eb_load32(w0), wb = eb_load32(w1);
        const uint32_t x0 = eb_load32(c0), x0b = eb_load32(c0 + 2);
        EB_MAC4(a0, eb_sxtb16(wa), eb_sxtb16_ror8(wa), x0, x0b);
        EB_MAC4(a1, eb_sxtb16(wb), eb_sxtb16_ror8(wb), x0, x0b);
        w0 += 4;
        w1 += 4;
        c0 += 4;
        --n;
    }
    if (tail != 0) {
        const uint32_t wa = eb_load_tail(w0, tail), wb = eb_load_tail(w1, tail);
        const uint32_t x0 = eb_load32(c0), x0b = eb_load32(c0 + 2);
        EB_MAC4(a0, eb_sxtb16(wa), eb_sxtb16_ror8(wa), x0, x0b);
        EB_MAC4(a1, eb_sxtb16(wb), eb_sxtb16_ror8(wb), x0, x0b);
    }
    acc[0] = a0;
    acc[1] = a1;
}

/* ---- output ---------------------------------------------------------------------------- */

/* Where results go: requantized int8 (out8) or the raw accumulator (out32). */
typedef struct {
    int8_t *out8;
    int32_t *out32;
    int shift, rounding, act;
} eb_sink;

static inline void eb_put(const eb_sink *s, int32_t index, int32_t acc)
{
    if (s->out8 != NULL) {
        s->out8[index] = eb_requantize(acc, s->shift, s->rounding, s->act);
    } else {
        s->out32[index] = acc;
    }
}

/* ---- convolution ----------------------------------------------------------------------- */

static void eb_conv_core(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                         const int32_t *bias, const eb_sink *s, int16_t *scratch)
{
    const int groups = p->groups;
    const int ipg = p->in_c / groups, opg = p->out_c / groups;
    const int out_w = p->out_w;
    const int32_t k = (int32_t)ipg * p->k_h * p->k_w;
    const int32_t kp = EB_OPT_ROUND4(k);
    const int32_t hw = (int32_t)p->out_h * out_w;
    const int32_t in_plane = (int32_t)p->in_h * p->in_w;
    int16_t *const col0 = scratch;
    int16_t *const col1 = scratch + kp;
    int g;

    for (g = 0; g < groups; ++g) {
        const int8_t *in_g = in + (int32_t)g * ipg * in_plane;
        const int oc_begin = g * opg, oc_end = oc_begin + opg;
        int32_t px;
        for (px = 0; px < hw; px += 2) {
            const int pair = px + 1 < hw;
            int oc;
            eb_im2col(p, in_g, ipg, (int)(px / out_w), (int)(px % out_w), col0, kp);
            if (pair) {
                eb_im2col(p, in_g, ipg, (int)((px + 1) / out_w), (int)((px + 1) % out_w), col1,
                          kp);
            }
            for (oc = oc_begin; oc + 1 < oc_end; oc += 2) {
                const int8_t *w0 = weight + (int32_t)oc * k;
                const int32_t b0 = bias ? bias[oc] : 0, b1 = bias ? bias[oc + 1] : 0;
                const int32_t o0 = (int32_t)oc * hw + px;
                if (pair) {
                    int32_t acc[4];
                    acc[0] = b0;
                    acc[1] = b0;
                    acc[2] = b1;
                    acc[3] = b1;
                    eb_dot_2x2(k, w0, w0 + k, col0, col1, acc);
                    eb_put(s, o0, acc[0]);
                    eb_put(s, o0 + 1, acc[1]);
                    eb_put(s, o0 + hw, acc[2]);
                    eb_put(s, o0 + hw + 1, acc[3]);
                } else {
                    int32_t acc[2];
                    acc[0] = b0;
                    acc[1] = b1;
                    eb_dot_2x1(k, w0, w0 + k, col0, acc);
                    eb_put(s, o0, acc[0]);
                    eb_put(s, o0 + hw, acc[1]);
                }
            }
            if (oc < oc_end) {
                int32_t acc[2];
                const int32_t o0 = (int32_t)oc * hw + px;
                acc[0] = acc[1] = bias ? bias[oc] : 0;
                eb_dot_1x2(k, weight + (int32_t)oc * k, col0, pair ? col1 : NULL, acc);
                eb_put(s, o0, acc[0]);
                if (pair) {
                    eb_put(s, o0 + 1, acc[1]);
                }
            }
        }
    }
}

void eb_conv2d_opt(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                   const int32_t *bias, int8_t *out, int16_t *scratch)
{
    eb_sink s;
    s.out8 = out;
    s.out32 = NULL;
    s.shift = p->shift;
    s.rounding = p->rounding;
    s.act = p->act;
    eb_conv_core(p, in, weight, bias, &s, scratch);
}

void eb_conv2d_wide_opt(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                        const int32_t *bias, int32_t *out, int16_t *scratch)
{
    eb_sink s;
    s.out8 = NULL;
    s.out32 = out;
    s.shift = 0;
    s.rounding = 0;
    s.act = 0;
    eb_conv_core(p, in, weight, bias, &s, scratch);
}

/* ---- linear ---------------------------------------------------------------------------- */

static void eb_linear_core(int in_f, int out_f, const int8_t *in, const int8_t *weight,
                           const int32_t *bias, const eb_sink *s, int16_t *scratch)
{
    const int32_t kp = EB_OPT_ROUND4(in_f);
    int32_t i;
    int o;
    for (i = 0; i < in_f; ++i) {
        scratch[i] = in[i];
    }
    for (; i < kp; ++i) {
        scratch[i] = 0;
    }
    eb_reorder(scratch, kp);
    for (o = 0; o + 1 < out_f; o += 2) {
        const int8_t *w0 = weight + (int32_t)o * in_f;
        int32_t acc[2];
        acc[0] = bias ? bias[o] : 0;
        acc[1] = bias ? bias[o + 1] : 0;
        eb_dot_2x1(in_f, w0, w0 + in_f, scratch, acc);
        eb_put(s, o, acc[0]);
        eb_put(s, o + 1, acc[1]);
    }
    if (o < out_f) {
        int32_t acc[2];
        acc[0] = bias ? bias[o] : 0;
        acc[1] = 0;
        eb_dot_1x2(in_f, weight + (int32_t)o * in_f, scratch, NULL, acc);
        eb_put(s, o, acc[0]);
    }
}

void eb_linear_opt(int in_f, int out_f, const int8_t *in, const int8_t *weight,
                   const int32_t *bias, int shift, int rounding, int act, int8_t *out,
                   int16_t *scratch)
{
    eb_sink s;
    s.out8 = out;
    s.out32 = NULL;
    s.shift = shift;
    s.rounding = rounding;
    s.act = act;
    eb_linear_core(in_f, out_f, in, weight, bias, &s, scratch);
}

void eb_linear_wide_opt(int in_f, int out_f, const int8_t *in, const int8_t *weight,
                        const int32_t *bias, int32_t *out, int16_t *scratch)
{
    eb_sink s;
    s.out8 = NULL;
    s.out32 = out;
    s.shift = 0;
    s.rounding = 0;
    s.act = 0;
    eb_linear_core(in_f, out_f, in, weight, bias, &s, scratch);
}
