/* edgebuild's dual 16-bit MAC primitives and word loads, shared by the optimized kernels
 * (eb_kernels_opt.c, eb_dw_opt.c): static inline, so each kernel file compiles them into
 * its own loops. Single DSP-extension instructions on the Cortex-M4; portable C with the
 * same results elsewhere (or with -DEB_OPT_PORTABLE), which is how the host tests exercise
 * the same algorithms. */
#ifndef EB_SIMD_H
#define EB_SIMD_H

#include <stdint.h>
#include <string.h>

#if (-1 >> 1) != -1
#error "edgebuild kernels need arithmetic right shifts of negative integers"
#endif

/* ---- dual 16-bit MAC primitives ----------------------------------------------------------
 * Packed values are uint32_t holding two 16-bit halves (or four bytes).
 *   eb_sxtb16(x)      = [sext(byte 0), sext(byte 2)] as two int16 halves (low, high)
 *   eb_sxtb16_ror8(x) = eb_sxtb16(x rotated right by 8) = [sext(byte 1), sext(byte 3)]
 *   eb_smlad(a, b, c) = c + lo16(a) * lo16(b) + hi16(a) * hi16(b) (signed halves), wrapping
 *   eb_smlaxy(a, b, c) = c + x16(a) * y16(b), x and y = b(ottom) or t(op) half, wrapping
 * With the DSP extension these are single instructions (SXTB16, SXTB16 ROR #8, SMLAD,
 * SMLABB/SMLABT/SMLATB/SMLATT);
 * otherwise (or with -DEB_OPT_PORTABLE) portable C with the same results runs the same
 * algorithm, which is how the host tests exercise it. */

/* Two's-complement reinterpretation without implementation-defined conversions, and a word's
 * halves signed (both builds use them). */
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

static inline int32_t eb_smlabb(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlabb((int32_t)a, (int32_t)b, acc);
}

static inline int32_t eb_smlabt(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlabt((int32_t)a, (int32_t)b, acc);
}

static inline int32_t eb_smlatb(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlatb((int32_t)a, (int32_t)b, acc);
}

static inline int32_t eb_smlatt(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlatt((int32_t)a, (int32_t)b, acc);
}
#else
#define EB_OPT_DSP 0


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

static inline int32_t eb_smlabb(uint32_t a, uint32_t b, int32_t acc)
{
    return eb_u32_to_s32((uint32_t)acc + (uint32_t)(eb_lo16(a) * eb_lo16(b)));
}

static inline int32_t eb_smlabt(uint32_t a, uint32_t b, int32_t acc)
{
    return eb_u32_to_s32((uint32_t)acc + (uint32_t)(eb_lo16(a) * eb_hi16(b)));
}

static inline int32_t eb_smlatb(uint32_t a, uint32_t b, int32_t acc)
{
    return eb_u32_to_s32((uint32_t)acc + (uint32_t)(eb_hi16(a) * eb_lo16(b)));
}

static inline int32_t eb_smlatt(uint32_t a, uint32_t b, int32_t acc)
{
    return eb_u32_to_s32((uint32_t)acc + (uint32_t)(eb_hi16(a) * eb_hi16(b)));
}
#endif

/* Saturation to int8 ([-128, 127]) and to [0, 127]: SSAT #8 and USAT #7 on ARM. */
#if defined(__ARM_FEATURE_SAT) && !defined(EB_OPT_PORTABLE)
#if !EB_OPT_DSP
#include <arm_acle.h>
#endif
static inline int32_t eb_ssat8(int32_t v)
{
    return __ssat(v, 8);
}

static inline int32_t eb_usat7(int32_t v)
{
    return (int32_t)__usat(v, 7);
}
#else
static inline int32_t eb_ssat8(int32_t v)
{
    return v < -128 ? -128 : (v > 127 ? 127 : v);
}

static inline int32_t eb_usat7(int32_t v)
{
    return v < 0 ? 0 : (v > 127 ? 127 : v);
}
#endif

/* The right shift by s >= 1 of eb_requantize, with no addend that could overflow int32:
 * (a + h 2^(s-1)) >> s (h = 1: half up; h = 0: floor) equals the halved, rounded
 * eb_half(a >> (s - 1), h) >> 1 for every int32 a -- floor((q + h) / 2), q = a >> (s - 1),
 * is floor((a / 2^(s-1) + h) / 2) since q + h is an integer -- where q + h saturates (QADD:
 * q = INT32_MAX only when s = 1, and its output saturates either way). So a kernel that
 * requantizes this way needs no check of its biases against the overflow limit. The
 * callers saturate `eb_half(...) >> 1`, which GCC folds into SSAT / USAT's ASR #1. */
#if EB_OPT_DSP
static inline int32_t eb_half(int32_t q, int32_t h)
{
    return __qadd(q, h);
}
#else
static inline int32_t eb_half(int32_t q, int32_t h)
{
    return q > INT32_MAX - h ? INT32_MAX : q + h;
}
#endif

/* 32-bit loads of byte-aligned words (weights, input rows: an unaligned LDR on the M4; the
 * scratch columns are 4-byte aligned). memcpy keeps this free of alignment and aliasing
 * problems. */
static inline uint32_t eb_load32(const void *src)
{
    uint32_t v;
    memcpy(&v, src, sizeof v);
    return v;
}

/* The same of a byte-aligned halfword (an unaligned LDRH on the M4). */
static inline uint32_t eb_load16(const void *src)
{
    uint16_t v;
    memcpy(&v, src, sizeof v);
    return v;
}


/* Per-halfword saturation of two int16 lanes: to [0, 127] and to [0, 255] (USAT16 #7 / #8). */
#if EB_OPT_DSP
static inline uint32_t eb_usat16_7(uint32_t x)
{
    return (uint32_t)__usat16((int32_t)x, 7);
}

static inline uint32_t eb_usat16_8(uint32_t x)
{
    return (uint32_t)__usat16((int32_t)x, 8);
}
#else
static inline uint32_t eb_usat16_lane(int32_t v, int32_t top)
{
    return (uint32_t)(v < 0 ? 0 : (v > top ? top : v));
}

static inline uint32_t eb_usat16_7(uint32_t x)
{
    return eb_usat16_lane(eb_lo16(x), 127) | eb_usat16_lane(eb_hi16(x), 127) << 16;
}

static inline uint32_t eb_usat16_8(uint32_t x)
{
    return eb_usat16_lane(eb_lo16(x), 255) | eb_usat16_lane(eb_hi16(x), 255) << 16;
}
#endif

/* ---- column and weight word helpers (eb_kernels_opt.c, eb_pw_opt.c) ---------------------- */

/* Stores of a word into the 4-byte-aligned scratch: memcpy keeps this free of alignment and
 * aliasing problems; GCC makes a single STR of it. */
static inline void eb_store32(void *dst, uint32_t v)
{
    memcpy(dst, &v, sizeof v);
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

/* Halfword packing: [lo16(a), lo16(b)] and [hi16(a), hi16(b)] (PKHBT / PKHTB; GCC does not
 * emit these by itself). */
#if EB_OPT_DSP && defined(__GNUC__)
static inline uint32_t eb_pack_lo(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

static inline uint32_t eb_pack_hi(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("pkhtb %0, %2, %1, asr #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
#else
static inline uint32_t eb_pack_lo(uint32_t a, uint32_t b)
{
    return (a & 0xFFFFu) | (b << 16);
}

static inline uint32_t eb_pack_hi(uint32_t a, uint32_t b)
{
    return (a >> 16) | (b & 0xFFFF0000u);
}
#endif

/* One pixel's two column words of a chunk of 4 taps, [k0, k2] and [k1, k3], from the low
 * (hi 0) or high halves of u0..u3, tap i's halfword pair holding the pixel. */
static inline void eb_cols_pixel(int16_t *c, uint32_t u0, uint32_t u1, uint32_t u2, uint32_t u3,
                                 const int hi)
{
    eb_store32(c, hi ? eb_pack_hi(u0, u2) : eb_pack_lo(u0, u2));
    eb_store32(c + 2, hi ? eb_pack_hi(u1, u3) : eb_pack_lo(u1, u3));
}

/* Four taps of four pixels -> their interleaved columns (16 int16 at cols): t_i holds tap i
 * of pixels 0..3 (byte j: pixel j); a_i = SXTB16(t_i) = [P0, P2] of tap i, b_i =
 * SXTB16(t_i ROR 8) = [P1, P3]; pixel 0's column words are [k0, k2] = PKHBT(a0, a2), [k1, k3]
 * = PKHBT(a1, a3), and so on: the order the GEMM rows read (a weight word's SXTB16 halves
 * against a pixel's two words). */
static inline void eb_cols_chunk(uint32_t t0, uint32_t t1, uint32_t t2, uint32_t t3,
                                 int16_t *cols)
{
    const uint32_t a0 = eb_sxtb16(t0), b0 = eb_sxtb16_ror8(t0);
    const uint32_t a1 = eb_sxtb16(t1), b1 = eb_sxtb16_ror8(t1);
    const uint32_t a2 = eb_sxtb16(t2), b2 = eb_sxtb16_ror8(t2);
    const uint32_t a3 = eb_sxtb16(t3), b3 = eb_sxtb16_ror8(t3);
    eb_cols_pixel(cols, a0, a1, a2, a3, 0);      /* P0 */
    eb_cols_pixel(cols + 4, b0, b1, b2, b3, 0);  /* P1 */
    eb_cols_pixel(cols + 8, a0, a1, a2, a3, 1);  /* P2 */
    eb_cols_pixel(cols + 12, b0, b1, b2, b3, 1); /* P3 */
}

/* Four consecutive column words at c (4-byte aligned), advancing c by 8 int16. On the M4 one
 * LDMIA into r4, r5, r6, r8 (an LDM needs ascending registers, hence fixed ones; r7 is left
 * alone as it is Thumb's frame pointer at -O0). */
#if EB_OPT_DSP && defined(__GNUC__)
#define EB_LOAD4X32(c, x0, x1, x2, x3)                                                   \
    do {                                                                                 \
        register uint32_t r4_ __asm__("r4");                                             \
        register uint32_t r5_ __asm__("r5");                                             \
        register uint32_t r6_ __asm__("r6");                                             \
        register uint32_t r8_ __asm__("r8");                                             \
        __asm__("ldmia %0!, {%1, %2, %3, %4}"                                            \
                : "+r"(c), "=r"(r4_), "=r"(r5_), "=r"(r6_), "=r"(r8_)                    \
                : "m"(*(const char(*)[16])(const void *)(c)));                           \
        (x0) = r4_;                                                                      \
        (x1) = r5_;                                                                      \
        (x2) = r6_;                                                                      \
        (x3) = r8_;                                                                      \
    } while (0)
#else
#define EB_LOAD4X32(c, x0, x1, x2, x3) \
    do {                               \
        (x0) = eb_load32(c);           \
        (x1) = eb_load32((c) + 2);     \
        (x2) = eb_load32((c) + 4);     \
        (x3) = eb_load32((c) + 6);     \
        (c) += 8;                      \
    } while (0)
#endif

/* Inline-assembly text of the requantizing stores' first steps (the naked row functions of
 * eb_dw_opt.c and eb_gemm_asm.h): four sums (register names) shifted right by the register
 * s, and saturated by `sat` (usat / ssat) to `bits` (#7 / #8). */
#define EB_ASM_ASR4(a, b, c, d, s)                                                          \
    "asr " a ", " a ", " s "\n\tasr " b ", " b ", " s "\n\tasr " c ", " c ", " s "\n\t"      \
    "asr " d ", " d ", " s "\n\t"
#define EB_ASM_SAT4(sat, bits, a, b, c, d)                                                  \
    sat " " a ", " bits ", " a "\n\t" sat " " b ", " bits ", " b "\n\t" sat " " c ", " bits    \
        ", " c "\n\t" sat " " d ", " bits ", " d "\n\t"
/* The same of 4 sums shifted right by the immediate sh ("#8") on the way. */
#define EB_ASM_SAT4_ASR(sat, bits, a, b, c, d, sh)                                          \
    sat " " a ", " bits ", " a ", asr " sh "\n\t" sat " " b ", " bits ", " b ", asr " sh     \
        "\n\t" sat " " c ", " bits ", " c ", asr " sh "\n\t" sat " " d ", " bits ", " d     \
        ", asr " sh "\n\t"

#endif /* EB_SIMD_H */
