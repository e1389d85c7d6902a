/* edgebuild global pooling: see eb_global_pool.h for the rule, the overflow bounds and the
 * word-wide method of eb_global_pool_opt. */
#include "eb_global_pool.h"

#include <string.h>

/* ---- the division (shared by both kernels) ------------------------------------------- */

static int32_t eb_gp_floor_div32(int32_t a, int32_t b)
{
    int32_t q = a / b;
    if ((a % b) != 0 && a < 0) {
        q -= 1;
    }
    return q;
}

static int64_t eb_gp_floor_div64(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b) != 0 && a < 0) {
        q -= 1;
    }
    return q;
}

/* The 64-bit division of a sum over more than EB_GLOBAL_POOL_BLOCK values (a library call,
 * once per channel; kept out of line). */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static int8_t eb_gp_divide64(int64_t sum, int32_t n, int rounding)
{
    if (rounding == EB_ROUND_TRUNC) {
        return (int8_t)(sum / n);
    }
    return (int8_t)eb_gp_floor_div64(rounding == EB_ROUND_HALF_UP ? sum + n / 2 : sum, n);
}

/* sum / n with the pooling rule: 32-bit while n <= EB_GLOBAL_POOL_BLOCK (then |sum| <= 2^30
 * and sum + n / 2 fits), 64-bit beyond. */
static inline int8_t eb_gp_divide(int64_t sum, int32_t n, int rounding)
{
    if (n <= EB_GLOBAL_POOL_BLOCK) {
        const int32_t s = (int32_t)sum;
        if (rounding == EB_ROUND_TRUNC) {
            return (int8_t)(s / n);
        }
        return (int8_t)eb_gp_floor_div32(rounding == EB_ROUND_HALF_UP ? s + n / 2 : s, n);
    }
    return eb_gp_divide64(sum, n, rounding);
}

/* ---- reference ------------------------------------------------------------------------ */

static int64_t eb_gp_sum(const int8_t *x, int32_t n)
{
    int64_t total = 0;
    while (n > 0) {
        const int32_t m = n < EB_GLOBAL_POOL_BLOCK ? n : EB_GLOBAL_POOL_BLOCK;
        int32_t block = 0, i;
        for (i = 0; i < m; ++i) {
            block += x[i];
        }
        total += block;
        x += m;
        n -= m;
    }
    return total;
}

static int8_t eb_gp_max(const int8_t *x, int32_t n)
{
    int8_t best = x[0];
    int32_t i;
    for (i = 1; i < n; ++i) {
        best = x[i] > best ? x[i] : best;
    }
    return best;
}

void eb_global_pool(const eb_global_pool_params *p, const int8_t *in, int8_t *out)
{
    int32_t c;
    for (c = 0; c < p->c; ++c, in += p->n) {
        out[c] = p->mode == EB_POOL_MAX ? eb_gp_max(in, p->n)
                                        : eb_gp_divide(eb_gp_sum(in, p->n), p->n, p->rounding);
    }
}

/* ---- optimized: four bytes per word ----------------------------------------------------- */

#if defined(__ARM_FEATURE_SIMD32) && defined(__GNUC__) && defined(__thumb2__) && \
    !defined(EB_OPT_PORTABLE)
#define EB_GP_ASM 1
/* byte-wise signed max of a and b */
static inline uint32_t eb_gp_max8(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("ssub8 %0, %1, %2\n\tsel %0, %1, %2" : "=&r"(r) : "r"(a), "r"(b) : "cc");
    return r;
}

/* acc + the sum of the four unsigned bytes of x */
static inline uint32_t eb_gp_usada8(uint32_t x, uint32_t acc)
{
    uint32_t r;
    __asm__("usada8 %0, %1, %2, %3" : "=r"(r) : "r"(x), "r"(0u), "r"(acc));
    return r;
}
#else
static inline uint32_t eb_gp_max8(uint32_t a, uint32_t b)
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

static inline uint32_t eb_gp_usada8(uint32_t x, uint32_t acc)
{
    return acc + (x & 0xFFu) + ((x >> 8) & 0xFFu) + ((x >> 16) & 0xFFu) + (x >> 24);
}
#endif

#define EB_GP_FLIP 0x80808080u

/* The word at a word-aligned w (memcpy: no aliasing question; one LDR). */
static inline uint32_t eb_gp_word(const uint32_t *w)
{
    uint32_t v;
    memcpy(&v, w, sizeof v);
    return v;
}

#ifdef EB_GP_ASM
/* usum + the flipped-byte sums of 4 x quads words from w: per four words one LDM, four EOR
 * and four USADA8 (11 instructions with the loop's compare and branch). r7 is left alone
 * (the frame pointer of unoptimized Thumb code). */
static uint32_t eb_gp_usum_quads(const uint32_t *w, int32_t quads, uint32_t usum)
{
    const uint32_t *end = w + 4 * quads;
    if (quads > 0) {
        __asm__ volatile("1:\n\t"
                         "ldmia  %[w]!, {r4, r5, r6, r8}\n\t"
                         "eor    r4, r4, #0x80808080\n\t"
                         "eor    r5, r5, #0x80808080\n\t"
                         "eor    r6, r6, #0x80808080\n\t"
                         "eor    r8, r8, #0x80808080\n\t"
                         "usada8 %[s], r4, %[z], %[s]\n\t"
                         "usada8 %[s], r5, %[z], %[s]\n\t"
                         "usada8 %[s], r6, %[z], %[s]\n\t"
                         "usada8 %[s], r8, %[z], %[s]\n\t"
                         "cmp    %[w], %[e]\n\t"
                         "bne    1b\n\t"
                         : [w] "+r"(w), [s] "+r"(usum)
                         : [e] "r"(end), [z] "r"(0u)
                         : "r4", "r5", "r6", "r8", "cc", "memory");
    }
    return usum;
}

/* v max-ed byte-wise with 4 x quads words from w: per four words one LDM and four SSUB8 +
 * SEL pairs (11 instructions with the loop). */
static uint32_t eb_gp_max_quads(const uint32_t *w, int32_t quads, uint32_t v)
{
    const uint32_t *end = w + 4 * quads;
    uint32_t t;
    if (quads > 0) {
        __asm__ volatile("1:\n\t"
                         "ldmia  %[w]!, {r4, r5, r6, r8}\n\t"
                         "ssub8  %[t], r4, r5\n\t"
                         "sel    r4, r4, r5\n\t"
                         "ssub8  %[t], r6, r8\n\t"
                         "sel    r6, r6, r8\n\t"
                         "ssub8  %[t], r4, r6\n\t"
                         "sel    r4, r4, r6\n\t"
                         "ssub8  %[t], %[v], r4\n\t"
                         "sel    %[v], %[v], r4\n\t"
                         "cmp    %[w], %[e]\n\t"
                         "bne    1b\n\t"
                         : [w] "+r"(w), [v] "+r"(v), [t] "=&r"(t)
                         : [e] "r"(end)
                         : "r4", "r5", "r6", "r8", "cc", "memory");
    }
    return v;
}
#else
static uint32_t eb_gp_usum_quads(const uint32_t *w, int32_t quads, uint32_t usum)
{
    int32_t i;
    for (i = 0; i < 4 * quads; ++i) {
        usum = eb_gp_usada8(eb_gp_word(w + i) ^ EB_GP_FLIP, usum);
    }
    return usum;
}

static uint32_t eb_gp_max_quads(const uint32_t *w, int32_t quads, uint32_t v)
{
    int32_t i;
    for (i = 0; i < 4 * quads; ++i) {
        v = eb_gp_max8(v, eb_gp_word(w + i));
    }
    return v;
}
#endif

/* Bytes before x's next word boundary (at most m). */
static int32_t eb_gp_head(const int8_t *x, int32_t m)
{
    const int32_t head = (int32_t)((4u - ((uint32_t)(uintptr_t)x & 3u)) & 3u);
    return head < m ? head : m;
}

/* The sum of m <= EB_GLOBAL_POOL_BLOCK values (the unsigned word sums stay below 2^31):
 * the unaligned head and the tail byte by byte, the words between four bytes at a time. */
static int32_t eb_gp_block_sum(const int8_t *x, int32_t m)
{
    const int32_t head = eb_gp_head(x, m), words = (m - head) >> 2;
    const uint32_t *w = (const uint32_t *)(const void *)(x + head);
    uint32_t usum = eb_gp_usum_quads(w, words >> 2, 0u);
    int32_t sum = 0, i;
    for (i = words & ~3; i < words; ++i) {
        usum = eb_gp_usada8(eb_gp_word(w + i) ^ EB_GP_FLIP, usum);
    }
    for (i = 0; i < head; ++i) {
        sum += x[i];
    }
    for (i = head + 4 * words; i < m; ++i) {
        sum += x[i];
    }
    return sum + (int32_t)usum - 128 * 4 * words;
}

static int64_t eb_gp_sum_opt(const int8_t *x, int32_t n)
{
    int64_t total = 0;
    while (n > 0) {
        const int32_t m = n < EB_GLOBAL_POOL_BLOCK ? n : EB_GLOBAL_POOL_BLOCK;
        total += eb_gp_block_sum(x, m);
        x += m;
        n -= m;
    }
    return total;
}

/* The maximum of n >= 1 values: whole words max-ed byte-wise and reduced to byte 0 (max
 * with itself >> 8, then >> 16), the head and the tail byte by byte. */
static int8_t eb_gp_max_opt(const int8_t *x, int32_t n)
{
    const int32_t head = eb_gp_head(x, n), words = (n - head) >> 2;
    const uint32_t *w = (const uint32_t *)(const void *)(x + head);
    uint32_t v = eb_gp_max_quads(w, words >> 2, 0x80808080u); /* -128 in every byte */
    int32_t best, i;
    for (i = words & ~3; i < words; ++i) {
        v = eb_gp_max8(v, eb_gp_word(w + i));
    }
    v = eb_gp_max8(v, v >> 8);
    v = eb_gp_max8(v, v >> 16);
    best = (int32_t)(v & 0xFFu) - (int32_t)((v & 0x80u) << 1);
    for (i = 0; i < head; ++i) {
        best = x[i] > best ? x[i] : best;
    }
    for (i = head + 4 * words; i < n; ++i) {
        best = x[i] > best ? x[i] : best;
    }
    return (int8_t)best;
}

void eb_global_pool_opt(const eb_global_pool_params *p, const int8_t *in, int8_t *out)
{
    int32_t c;
    for (c = 0; c < p->c; ++c, in += p->n) {
        out[c] = p->mode == EB_POOL_MAX ? eb_gp_max_opt(in, p->n)
                                        : eb_gp_divide(eb_gp_sum_opt(in, p->n), p->n,
                                                       p->rounding);
    }
}
