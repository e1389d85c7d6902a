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

/* Column words: the caller's scratch is 4-byte aligned and chunks are 8 bytes, so adjacent
 * word pairs may be fetched with LDRD. */
#if defined(__GNUC__)
#define EB_ALIGNED4(ptr) ((const int16_t *)__builtin_assume_aligned((ptr), 4))
#else
#define EB_ALIGNED4(ptr) (ptr)
#endif

/* Two adjacent column words (one LDRD on the M4). */
static inline void eb_load2x32(const int16_t *src, uint32_t *lo, uint32_t *hi)
{
    uint32_t v[2];
    memcpy(v, EB_ALIGNED4(src), sizeof v);
    *lo = v[0];
    *hi = v[1];
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

#if defined(__GNUC__)
#define EB_NOINLINE __attribute__((noinline))
#else
#define EB_NOINLINE
#endif

/* ---- columns -----------------------------------------------------------------------------
 * A column holds K input values (an output pixel's receptive field in weight order, or a
 * linear layer's input) as int16, zero-padded to kp = EB_OPT_ROUND4(K), in chunks of 4
 * stored as [a0, a2, a1, a3]: the words [a0, a2], [a1, a3] pair with SXTB16 and SXTB16 ROR 8
 * of the weight word [w0, w1, w2, w3]. The conv kernel keeps EB_OPT_PIXELS columns (one per
 * output pixel) interleaved chunk by chunk, [P0 chunk q][P1 chunk q][P2 chunk q][P3 chunk q],
 * so that one pointer walks all of them; the linear kernel has a single column. */

#define EB_OPT_PIXELS 4

/* kp int8 values (4-byte aligned, or at least readable as words) -> reordered int16 chunks at
 * dst, one chunk every `stride` int16. SXTB16 does the reordering: [a0, a2] and [a1, a3]. */
static void eb_expand(const int8_t *src, int32_t kp, int16_t *dst, int32_t stride)
{
    int32_t q;
    for (q = 0; q < kp; q += 4, src += 4, dst += stride) {
        const uint32_t u = eb_load32(src);
        const uint32_t v[2] = {eb_sxtb16(u), eb_sxtb16_ror8(u)};
        memcpy(dst, v, sizeof v);
    }
}

/* The receptive field of output pixel (oy, ox) over in_g's ipg channels, in weight order
 * ([ic][ky][kx]), zero outside the input, zero-padded to kp, as int8 values. */
static void eb_gather(const eb_conv_params *p, const int8_t *in_g, int ipg, int oy, int ox,
                      int8_t *d, int32_t kp)
{
    const int in_h = p->in_h, in_w = p->in_w, k_h = p->k_h, k_w = p->k_w;
    const int dil_h = p->dil_h, dil_w = p->dil_w;
    const int iy0 = oy * p->stride_h - p->pad_h, ix0 = ox * p->stride_w - p->pad_w;
    const int32_t plane = (int32_t)in_h * in_w;
    int8_t *const end = d + kp;
    int kx_lo = 0, kx_hi = k_w; /* the kx in [kx_lo, kx_hi) fall inside an input row */
    int ky_lo = 0, ky_hi = k_h; /* likewise for ky and the input columns */
    int ic, ky, kx;

    if (ix0 < 0) {
        kx_lo = (-ix0 + dil_w - 1) / dil_w;
    }
    if (ix0 + (k_w - 1) * dil_w >= in_w) {
        kx_hi = ix0 >= in_w ? 0 : (in_w - 1 - ix0) / dil_w + 1;
    }
    if (kx_lo > kx_hi) {
        kx_lo = kx_hi;
    }
    if (iy0 < 0) {
        ky_lo = (-iy0 + dil_h - 1) / dil_h;
    }
    if (iy0 + (k_h - 1) * dil_h >= in_h) {
        ky_hi = iy0 >= in_h ? 0 : (in_h - 1 - iy0) / dil_h + 1;
    }
    if (ky_lo > ky_hi) {
        ky_lo = ky_hi;
    }
    if (kx_lo == 0 && kx_hi == k_w && dil_w == 1) {
        /* whole rows inside the input: the common case, copied without per-value checks */
        for (ic = 0; ic < ipg; ++ic, in_g += plane) {
            const int8_t *row = in_g + (int32_t)(iy0 + ky_lo * dil_h) * in_w + ix0;
            for (ky = 0; ky < ky_lo; ++ky) {
                for (kx = 0; kx < k_w; ++kx) {
                    *d++ = 0;
                }
            }
            for (; ky < ky_hi; ++ky, row += (int32_t)dil_h * in_w) {
                for (kx = 0; kx < k_w; ++kx) {
                    *d++ = row[kx];
                }
            }
            for (; ky < k_h; ++ky) {
                for (kx = 0; kx < k_w; ++kx) {
                    *d++ = 0;
                }
            }
        }
    } else {
        for (ic = 0; ic < ipg; ++ic, in_g += plane) {
            for (ky = 0; ky < k_h; ++ky) {
                if (ky < ky_lo || ky >= ky_hi) {
                    for (kx = 0; kx < k_w; ++kx) {
                        *d++ = 0;
                    }
                } else {
                    const int8_t *s =
                        in_g + (int32_t)(iy0 + ky * dil_h) * in_w + ix0 + kx_lo * dil_w;
                    for (kx = 0; kx < kx_lo; ++kx) {
                        *d++ = 0;
                    }
                    for (; kx < kx_hi; ++kx, s += dil_w) {
                        *d++ = *s;
                    }
                    for (; kx < k_w; ++kx) {
                        *d++ = 0;
                    }
                }
            }
        }
    }
    while (d < end) {
        *d++ = 0;
    }
}

/* ---- dot products -------------------------------------------------------------------------
 * k values per weight row (rows byte-aligned int8, k apart in the reference layout); acc[]
 * come in holding the bias. The last k % 4 weights are read as a zero-padded word (never past
 * the row); the columns are zero-padded anyway. */

/* Row w against the EB_OPT_PIXELS interleaved columns at c: acc[j] += w . column j. */
static EB_NOINLINE void eb_dot_1x4(int32_t k, const int8_t *w, const int16_t *c,
                                   int32_t acc[EB_OPT_PIXELS])
{
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    int32_t n = (k + 3) >> 2;
    const int32_t tail = k & 3;
    while (n > 0) {
        const uint32_t wv = (n == 1 && tail != 0) ? eb_load_tail(w, tail) : eb_load32(w);
        const uint32_t lo = eb_sxtb16(wv), hi = eb_sxtb16_ror8(wv);
        uint32_t x, xb;
        eb_load2x32(c, &x, &xb);
        EB_MAC4(a0, lo, hi, x, xb);
        eb_load2x32(c + 4, &x, &xb);
        EB_MAC4(a1, lo, hi, x, xb);
        eb_load2x32(c + 8, &x, &xb);
        EB_MAC4(a2, lo, hi, x, xb);
        eb_load2x32(c + 12, &x, &xb);
        EB_MAC4(a3, lo, hi, x, xb);
        w += 4;
        c += 16;
        --n;
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* Rows w, w + k against one column at c: acc[0] += w . c, acc[1] += (w + k) . c. */
static EB_NOINLINE void eb_dot_2x1(int32_t k, const int8_t *w, const int16_t *c,
                                   int32_t acc[2])
{
    const int8_t *w1 = w + k;
    int32_t a0 = acc[0], a1 = acc[1];
    int32_t n = k >> 2;
    const int32_t tail = k & 3;
    uint32_t x, xb, wa, wb;
    while (n > 0) {
        wa = eb_load32(w);
        wb = eb_load32(w1);
        eb_load2x32(c, &x, &xb);
        EB_MAC4(a0, eb_sxtb16(wa), eb_sxtb16_ror8(wa), x, xb);
        EB_MAC4(a1, eb_sxtb16(wb), eb_sxtb16_ror8(wb), x, xb);
        w += 4;
        w1 += 4;
        c += 4;
        --n;
    }
    if (tail != 0) {
        wa = eb_load_tail(w, tail);
        wb = eb_load_tail(w1, tail);
        eb_load2x32(c, &x, &xb);
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
    while (n > 0) {
        wa = eb_load32(w);
        eb_load2x32(c, &x, &xb);
        EB_MAC4(acc, eb_sxtb16(wa), eb_sxtb16_ror8(wa), x, xb);
        w += 4;
        c += 4;
        --n;
    }
    if (tail != 0) {
        wa = eb_load_tail(w, tail);
        eb_load2x32(c, &x, &xb);
        EB_MAC4(acc, eb_sxtb16(wa), eb_sxtb16_ror8(wa), x, xb);
    }
    return acc;
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
    int16_t *const cols = scratch; /* EB_OPT_PIXELS * kp int16: the interleaved columns */
    int8_t *const bytes = (int8_t *)(scratch + EB_OPT_PIXELS * kp); /* kp int8: one gather */
    int g;

    for (g = 0; g < groups; ++g) {
        const int8_t *in_g = in + (int32_t)g * ipg * in_plane;
        const int oc_begin = g * opg, oc_end = oc_begin + opg;
        int32_t px;
        for (px = 0; px < hw; px += EB_OPT_PIXELS) {
            /* pixels px .. px + 3; past the end, the last pixel is repeated (not stored) */
            const int32_t count = hw - px < EB_OPT_PIXELS ? hw - px : EB_OPT_PIXELS;
            int32_t j;
            int oc;
            for (j = 0; j < EB_OPT_PIXELS; ++j) {
                const int32_t pj = j < count ? px + j : hw - 1;
                eb_gather(p, in_g, ipg, (int)(pj / out_w), (int)(pj % out_w), bytes, kp);
                eb_expand(bytes, kp, cols + 4 * j, 4 * EB_OPT_PIXELS);
            }
            for (oc = oc_begin; oc < oc_end; ++oc) {
                const int32_t b = bias ? bias[oc] : 0;
                const int32_t o = (int32_t)oc * hw + px;
                int32_t acc[EB_OPT_PIXELS];
                acc[0] = acc[1] = acc[2] = acc[3] = b;
                eb_dot_1x4(k, weight + (int32_t)oc * k, cols, acc);
                if (count == EB_OPT_PIXELS) {
                    eb_put(s, o, acc[0]);
                    eb_put(s, o + 1, acc[1]);
                    eb_put(s, o + 2, acc[2]);
                    eb_put(s, o + 3, acc[3]);
                } else {
                    for (j = 0; j < count; ++j) {
                        eb_put(s, o + j, acc[j]);
                    }
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
    const int32_t full = (int32_t)in_f & ~(int32_t)3;
    int o;
    eb_expand(in, full, scratch, 4);
    if (full < in_f) { /* the last 1..3 inputs, zero-padded: never read past in[] */
        const uint32_t u = eb_load_tail(in + full, in_f - full);
        const uint32_t v[2] = {eb_sxtb16(u), eb_sxtb16_ror8(u)};
        memcpy(scratch + full, v, sizeof v);
    }
    for (o = 0; o + 1 < out_f; o += 2) {
        int32_t acc[2];
        acc[0] = bias ? bias[o] : 0;
        acc[1] = bias ? bias[o + 1] : 0;
        eb_dot_2x1(in_f, weight + (int32_t)o * in_f, scratch, acc);
        eb_put(s, o, acc[0]);
        eb_put(s, o + 1, acc[1]);
    }
    if (o < out_f) {
        eb_put(s, o, eb_dot_1x1(in_f, weight + (int32_t)o * in_f, scratch, bias ? bias[o] : 0));
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
