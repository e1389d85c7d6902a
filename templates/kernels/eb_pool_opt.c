/* edgebuild optimized pooling (Cortex-M4 SIMD; portable C elsewhere): eb_pool2d_opt gives
 * bit-identical results to eb_pool2d (eb_kernels.c), same arguments, no scratch.
 *
 * Max: four bytes at a time, a byte-wise signed max being SSUB8 + SEL (eb_max8). A 2-wide
 * window with stride 2 (the usual max pool) takes one word per window row for two outputs:
 * the rows' word-wise max v, then max8(v, v >> 8) holds the two outputs in bytes 0 and 2.
 * Other windows: per output the window rows' whole words are max-ed into one word, reduced
 * to its byte 0 (max8 with itself >> 8, then >> 16), the rest of a row byte by byte.
 * Average: the sum of a window row's whole words is USADA8 of the words with their sign bits
 * flipped (x ^ 0x80 = x + 128 as an unsigned byte), less 128 per byte; the rest byte by
 * byte; then the reference's rounding of sum / count. Nothing is read outside a window.
 *
 * Element-wise add (eb_add_opt), four elements per word: two inputs by QADD8 (the int8
 * saturation of the exact sum), then relu as a byte-wise max with 0 (SSUB8 + SEL) or abs as
 * the max with the saturated negation (QSUB8); more inputs as halfword sums (SXTB16 then
 * SXTAB16 per input: exact for up to 255 inputs), the activation per halfword and SSAT16 #8
 * / USAT16 #7, the halfwords packed back to bytes. The last n % 4 elements, more than 255
 * inputs and portable builds: the reference arithmetic. */
#include "eb_kernels_opt.h"

#include <string.h>

#if defined(__ARM_FEATURE_SIMD32) && defined(__GNUC__) && !defined(EB_OPT_PORTABLE)
/* max of the four signed bytes of a and b, byte by byte */
static inline uint32_t eb_max8(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("ssub8 %0, %1, %2\n\tsel %0, %1, %2" : "=&r"(r) : "r"(a), "r"(b) : "cc");
    return r;
}

/* acc + the sum of the four unsigned bytes of x */
static inline uint32_t eb_usada8(uint32_t x, uint32_t acc)
{
    uint32_t r;
    __asm__("usada8 %0, %1, %2, %3" : "=r"(r) : "r"(x), "r"(0u), "r"(acc));
    return r;
}
#else
static inline uint32_t eb_max8(uint32_t a, uint32_t b)
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

static inline uint32_t eb_usada8(uint32_t x, uint32_t acc)
{
    return acc + (x & 0xFFu) + ((x >> 8) & 0xFFu) + ((x >> 16) & 0xFFu) + (x >> 24);
}
#endif

static inline uint32_t eb_pool_load32(const int8_t *src)
{
    uint32_t v;
    memcpy(&v, src, sizeof v);
    return v;
}

/* floor(a / b) for b > 0, as eb_kernels.c */
static int32_t eb_pool_floor_div(int32_t a, int32_t b)
{
    int32_t q = a / b;
    if ((a % b) != 0 && a < 0) {
        q -= 1;
    }
    return q;
}

#if defined(__GNUC__)
#define EB_POOL_NOINLINE __attribute__((noinline))
#else
#define EB_POOL_NOINLINE
#endif

/* k for n = 2^k (n > 0). */
static int eb_pool_log2(int32_t n)
{
    int k = 0;
    while (n > 1) {
        n >>= 1;
        ++k;
    }
    return k;
}

/* The int8 of byte 0 of x. */
static inline int32_t eb_byte0(uint32_t x)
{
    return (int32_t)(x & 0xFFu) - (int32_t)((x & 0x80u) << 1);
}

#if defined(__GNUC__)
#define EB_POOL_INLINE static inline __attribute__((always_inline))
#else
#define EB_POOL_INLINE static inline
#endif

/* Byte-wise max of four windows' words a, b, c, d (bytes 0..3 each) reduced to one word
 * holding the four windows' maxima in bytes 0..3: halfword packing pairs bytes 0, 1 with 2, 3
 * (PKHBT / PKHTB), then the even and odd bytes of two such words (masks) meet in a last max. */
static inline uint32_t eb_max4x4(uint32_t a, uint32_t b, uint32_t c, uint32_t d)
{
    const uint32_t m = eb_max8((a & 0xFFFFu) | (c << 16), (a >> 16) | (c & 0xFFFF0000u));
    const uint32_t n = eb_max8((b & 0xFFFFu) | (d << 16), (b >> 16) | (d & 0xFFFF0000u));
    /* m = [a02, a13, c02, c13], n = [b02, b13, d02, d13] (xij: max of bytes i, j of x) */
    return eb_max8((m & 0x00FF00FFu) | ((n & 0x00FF00FFu) << 8),
                   ((m >> 8) & 0x00FF00FFu) | (n & 0xFF00FF00u));
}

/* Pairs of bytes of u = [a0..a3] and v = [b0..b3] max-ed: [a01, a23, b01, b23]. */
static inline uint32_t eb_max2x4(uint32_t u, uint32_t v)
{
    const uint32_t lo = (u & 0xFFFFu) | (v << 16), hi = (u >> 16) | (v & 0xFFFF0000u);
    /* lo = [a0, a1, b0, b1], hi = [a2, a3, b2, b3] */
    return eb_max8((lo & 0x00FF00FFu) | ((hi & 0x00FF00FFu) << 8),
                   ((lo >> 8) & 0x00FF00FFu) | (hi & 0xFF00FF00u));
}

/* The word at r max-ed with the words k_h - 1 rows below it (in_w apart). */
static inline uint32_t eb_max_rows(const int8_t *r, int32_t in_w, int k_h)
{
    uint32_t v = eb_pool_load32(r);
    int ky;
    for (ky = 1; ky < k_h; ++ky) {
        r += in_w;
        v = eb_max8(v, eb_pool_load32(r));
    }
    return v;
}

static inline void eb_pool_store32(int8_t *dst, uint32_t v)
{
    memcpy(dst, &v, sizeof v);
}

/* Output rows of a 2-wide, stride-2 max pool: k_h rows from r, in_w apart, out_w outputs;
 * four outputs per step (two words per row), then two, then one. */
EB_POOL_INLINE void eb_max_row_2x(const int8_t *r, int32_t in_w, int k_h, int out_w,
                                  int8_t *out)
{
    int x = 0, ky;
    for (; x + 4 <= out_w; x += 4, r += 8, out += 4) {
        eb_pool_store32(out, eb_max2x4(eb_max_rows(r, in_w, k_h), eb_max_rows(r + 4, in_w, k_h)));
    }
    for (; x + 2 <= out_w; x += 2, r += 4, out += 2) {
        uint32_t v = eb_max_rows(r, in_w, k_h);
        v = eb_max8(v, v >> 8);
        out[0] = (int8_t)eb_byte0(v);
        out[1] = (int8_t)eb_byte0(v >> 16);
    }
    if (x < out_w) {
        int32_t best = -128;
        for (ky = 0; ky < k_h; ++ky) {
            const int32_t a = r[ky * in_w], b = r[ky * in_w + 1];
            best = a > best ? a : best;
            best = b > best ? b : best;
        }
        *out = (int8_t)best;
    }
}

/* The byte-wise max of a window's whole words: k_h rows of `words` words from r. */
static inline uint32_t eb_max_words(const int8_t *r, int32_t in_w, int k_h, int words)
{
    uint32_t v = eb_max_rows(r, in_w, k_h);
    int i;
    for (i = 1; i < words; ++i) {
        v = eb_max8(v, eb_max_rows(r + 4 * i, in_w, k_h));
    }
    return v;
}

/* Output rows of a max pool with k_w >= 4 and stride_w == k_w (windows side by side): four
 * outputs per step, the windows' whole words max-ed (eb_max4x4), then their last k_w % 4
 * bytes as words of the four windows' bytes. Returns the outputs done. */
EB_POOL_INLINE int eb_max_row_4x(const int8_t *r, int32_t in_w, int k_h, int k_w, int out_w,
                                  int8_t *out)
{
    const int words = k_w >> 2;
    int x = 0;
    for (; x + 4 <= out_w; x += 4, r += 4 * k_w, out += 4) {
        uint32_t v = eb_max4x4(eb_max_words(r, in_w, k_h, words),
                               eb_max_words(r + k_w, in_w, k_h, words),
                               eb_max_words(r + 2 * k_w, in_w, k_h, words),
                               eb_max_words(r + 3 * k_w, in_w, k_h, words));
        const int8_t *q = r;
        int ky, i;
        for (ky = 0; ky < k_h; ++ky, q += in_w) {
            for (i = 4 * words; i < k_w; ++i) {
                v = eb_max8(v, (uint32_t)(uint8_t)q[i] | (uint32_t)(uint8_t)q[k_w + i] << 8 |
                                   (uint32_t)(uint8_t)q[2 * k_w + i] << 16 |
                                   (uint32_t)(uint8_t)q[3 * k_w + i] << 24);
            }
        }
        eb_pool_store32(out, v);
    }
    return x;
}

/* eb_max_row_4x with constants for the usual shapes: 1-D (k_h 1), 4 wide. */
static int eb_max_row_side(const int8_t *r, int32_t in_w, int k_h, int k_w, int out_w,
                           int8_t *out)
{
    if (k_h == 1) {
        return k_w == 4 ? eb_max_row_4x(r, in_w, 1, 4, out_w, out)
                        : eb_max_row_4x(r, in_w, 1, k_w, out_w, out);
    }
    return k_w == 4 ? eb_max_row_4x(r, in_w, k_h, 4, out_w, out)
                    : eb_max_row_4x(r, in_w, k_h, k_w, out_w, out);
}

/* One window: k_h rows of k_w bytes from r, in_w apart; the max or the sum. */
static inline int32_t eb_window(const int8_t *r, int32_t in_w, int k_h, int k_w, int max)
{
    const int words = k_w >> 2;
    uint32_t vmax = 0x80808080u, usum = 0;
    int32_t best = -128, sum = 0;
    int ky, i;
    for (ky = 0; ky < k_h; ++ky, r += in_w) {
        const int8_t *q = r;
        for (i = 0; i < words; ++i, q += 4) {
            const uint32_t x = eb_pool_load32(q);
            if (max) {
                vmax = eb_max8(vmax, x);
            } else {
                usum = eb_usada8(x ^ 0x80808080u, usum);
            }
        }
        for (i = 4 * words; i < k_w; ++i, ++q) {
            const int32_t v = *q;
            if (max) {
                best = v > best ? v : best;
            } else {
                sum += v;
            }
        }
    }
    if (max) {
        if (words > 0) {
            int32_t m;
            vmax = eb_max8(vmax, vmax >> 8);
            m = eb_byte0(eb_max8(vmax, vmax >> 16));
            best = m > best ? m : best;
        }
        return best;
    }
    return sum + (int32_t)usum - 128 * 4 * words * k_h;
}

/* One row of average windows of 1 x k_w (k_w <= 4, a power of two: 1, 2, 4) `stride` apart:
 * the sums and the rounding shift (see eb_pool2d_opt) with the window's shape in registers,
 * not read back from the parameters per output (the generic loop's cost on 1x2 windows). */
static EB_POOL_NOINLINE void eb_avg_row_small(const int8_t *r, int k_w, int stride, int out_w,
                                              int32_t half, int32_t trunc_bias, int log2,
                                              int8_t *out)
{
    int ox, i;
    if (k_w == 2) { /* the usual one, its loop apart */
        for (ox = 0; ox < out_w; ++ox, r += stride) {
            const int32_t v = r[0] + r[1];
            out[ox] = (int8_t)((v + (v < 0 ? trunc_bias : 0) + half) >> log2);
        }
        return;
    }
    for (ox = 0; ox < out_w; ++ox, r += stride) {
        int32_t v = r[0];
        for (i = 1; i < k_w; ++i) {
            v += r[i];
        }
        out[ox] = (int8_t)((v + (v < 0 ? trunc_bias : 0) + half) >> log2);
    }
}

/* The loops of the pools a model has (eb_config.h; edgebuild.ops.c.pool_call):
 * EB_OPT_NO_POOL_MAX / _AVG leave out the max or average ones (such a pool would run the
 * reference loop). */
#ifdef EB_OPT_NO_POOL_MAX
#define EB_POOL_HAS_MAX 0
#else
#define EB_POOL_HAS_MAX 1
#endif
#ifdef EB_OPT_NO_POOL_AVG
#define EB_POOL_HAS_AVG 0
#else
#define EB_POOL_HAS_AVG 1
#endif

void eb_pool2d_opt(const eb_pool_params *p, const int8_t *in, int8_t *out)
{
    const int32_t in_w = p->in_w, plane = (int32_t)p->in_h * in_w;
    const int32_t row_step = (int32_t)p->stride_h * in_w;
    const int32_t count = (int32_t)p->k_h * p->k_w;
    const int max = EB_POOL_HAS_MAX && (!EB_POOL_HAS_AVG || p->mode == EB_POOL_MAX);
    /* A power-of-two count 2^log2 (else log2 = -1): floor(v / 2^k) is v >> k, so half up is
     * (v + 2^(k-1)) >> k and truncation (v + (v < 0 ? 2^k - 1 : 0)) >> k. */
    const int log2 = (count & (count - 1)) == 0 ? eb_pool_log2(count) : -1;
    const int32_t half = p->rounding == EB_ROUND_HALF_UP ? count >> 1 : 0;
    const int32_t trunc_bias = p->rounding == EB_ROUND_TRUNC ? count - 1 : 0;
    int c, oy, ox;
    if ((p->mode == EB_POOL_MAX) != max) {
        eb_pool2d(p, in, out); /* a pool whose loops this project left out */
        return;
    }
    for (c = 0; c < p->c; ++c, in += plane) {
        const int8_t *r = in;
        for (oy = 0; oy < p->out_h; ++oy, r += row_step, out += p->out_w) {
            ox = 0;
            if (max && p->k_w == 2 && p->stride_w == 2) {
                if (p->k_h == 1) {
                    eb_max_row_2x(r, in_w, 1, p->out_w, out);
                } else {
                    eb_max_row_2x(r, in_w, p->k_h, p->out_w, out);
                }
                continue;
            }
            if (!max && p->k_h == 1 && p->k_w <= 4 && log2 >= 0) {
                eb_avg_row_small(r, p->k_w, p->stride_w, p->out_w, half, trunc_bias, log2, out);
                continue;
            }
            if (max && p->k_w >= 4 && p->stride_w == p->k_w) {
                ox = eb_max_row_side(r, in_w, p->k_h, p->k_w, p->out_w, out);
            }
            for (; ox < p->out_w; ++ox) {
                const int8_t *w = r + (int32_t)ox * p->stride_w;
                const int32_t v = max ? eb_window(w, in_w, p->k_h, p->k_w, 1)
                                      : eb_window(w, in_w, p->k_h, p->k_w, 0);
                if (max) {
                    out[ox] = (int8_t)v;
                } else if (log2 >= 0) { /* a power-of-two count: shifts, no division */
                    out[ox] = (int8_t)((v + (v < 0 ? trunc_bias : 0) + half) >> log2);
                } else if (p->rounding == EB_ROUND_TRUNC) {
                    out[ox] = (int8_t)(v / count);
                } else if (p->rounding == EB_ROUND_HALF_UP) {
                    out[ox] = (int8_t)eb_pool_floor_div(2 * v + count, 2 * count);
                } else {
                    out[ox] = (int8_t)eb_pool_floor_div(v, count);
                }
            }
        }
    }
}

/* ---- element-wise add ---------------------------------------------------------------- */

#if defined(__ARM_FEATURE_SIMD32) && defined(__GNUC__) && !defined(EB_OPT_PORTABLE)
#include <arm_acle.h>
#define EB_ADD_SIMD 1

/* act (relu, abs) of four saturated int8 sums r, byte by byte */
static inline uint32_t eb_add_act8(uint32_t r, int act)
{
    uint32_t o = 0;
    if (act == EB_ACT_ABS) {
        o = __qsub8(0u, r); /* -r saturated: -(-128) = 127 */
    }
    if (act != EB_ACT_NONE) { /* max(r, o) */
        __asm__("ssub8 %0, %1, %2\n\tsel %0, %1, %2" : "=&r"(r) : "r"(r), "r"(o) : "cc");
    }
    return r;
}

/* act and the int8 saturation of two halfword sums h */
static inline uint32_t eb_add_act16(uint32_t h, int act)
{
    if (act == EB_ACT_NONE) {
        return (uint32_t)__ssat16((int16x2_t)h, 8);
    }
    if (act == EB_ACT_ABS) {
        const uint32_t o = (uint32_t)__qsub16(0, (int16x2_t)h);
        __asm__("ssub16 %0, %1, %2\n\tsel %0, %1, %2" : "=&r"(h) : "r"(h), "r"(o) : "cc");
    }
    return (uint32_t)__usat16((int16x2_t)h, 7);
}
#endif

void eb_add_opt(int n, int count, const int8_t *const *inputs, int act, int8_t *out)
{
    int i = 0, k;
#ifdef EB_ADD_SIMD
    if (count == 2) {
        const int8_t *a = inputs[0], *b = inputs[1];
        for (; i + 4 <= n; i += 4) {
            const uint32_t r = __qadd8(eb_pool_load32(a + i), eb_pool_load32(b + i));
            const uint32_t v = eb_add_act8(r, act);
            memcpy(out + i, &v, sizeof v);
        }
    } else if (count <= 255) {
        for (; i + 4 <= n; i += 4) {
            uint32_t x = eb_pool_load32(inputs[0] + i);
            uint32_t lo = (uint32_t)__sxtb16(x), hi = (uint32_t)__sxtb16(((x >> 8) | (x << 24)));
            uint32_t v;
            for (k = 1; k < count; ++k) {
                x = eb_pool_load32(inputs[k] + i);
                lo = (uint32_t)__sxtab16((int16x2_t)lo, (int8x4_t)x);
                hi = (uint32_t)__sxtab16((int16x2_t)hi, (int8x4_t)((x >> 8) | (x << 24)));
            }
            lo = eb_add_act16(lo, act);
            hi = eb_add_act16(hi, act);
            v = (lo & 0x00FF00FFu) | ((hi & 0x00FF00FFu) << 8);
            memcpy(out + i, &v, sizeof v);
        }
    }
#endif
    for (; i < n; ++i) {
        int32_t sum = 0;
        for (k = 0; k < count; ++k) {
            sum += inputs[k][i];
        }
        out[i] = eb_requantize(sum, 0, EB_ROUND_FLOOR, act);
    }
}
