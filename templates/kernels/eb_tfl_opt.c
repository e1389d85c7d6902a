/* edgebuild's Cortex-M4 kernels for TFLite's int8 number format (eb_tfl.h): eb_tfl_conv2d_opt,
 * eb_tfl_linear_opt, eb_tfl_pool2d_opt and eb_tfl_add_opt, bit-identical to their portable
 * twins (eb_tfl.c, and tflite/reference.py). With __ARM_FEATURE_DSP the DSP
 * instructions; elsewhere (or with -DEB_TFL_OPT_PORTABLE) the same algorithm with portable
 * stand-ins for them: a Cortex-M4 project's host build and the host tests run it so. C99,
 * no allocation; the inner loops are
 * hand-written Thumb-2 (GCC inline assembly in naked functions) where GCC optimizes for a
 * Thumb-2 DSP core, with C twins of the same algorithm elsewhere (-O0, the host).
 *
 * Method.
 *  - Zero point: every input value enters as the int16 x - in_zp (SXTAB16 of the int8 word
 *    with [-in_zp, -in_zp] does it for two values in one instruction) and padding as 0, so
 *    taps in the padding add nothing, as TFLite's kernels skip them.
 *  - Dual MACs: SMLAD multiplies two int16 pairs; int8 weights become pairs by SXTB16 (a
 *    word [w0 w1 w2 w3] gives [w0, w2] and, rotated by 8, [w1, w3]), so inputs are stored in
 *    chunks of 4 values as [x0, x2], [x1, x3].
 *  - Requantization in four instructions per output (ADD, SMMLAR, ASR, SSAT), exact: the
 *    accumulator a holds 2 * acc (weights doubled when expanded to int16, the bias too; or
 *    the sum shifted by one), so SMMLAR(a, m, c) = floor((a * m + 2^31) / 2^32) + c =
 *    SRDHM(acc, m) + c (SRDHM's nudge and truncation are floor((a m + 2^30) / 2^31) for
 *    either sign); with c = 2^(e-1) + out_zp * 2^e - [a < 0], (SRDHM + c) >> e is
 *    RDBPOT(SRDHM, e) + out_zp, e = -shift (halves away from zero: the sign of SRDHM(acc, m)
 *    is the sign of acc for m >= 0, or the value is 0 and the -1 changes nothing). SSAT #8
 *    and, for a narrower activation range, SSUB8/SEL on four packed outputs clamp. This
 *    needs |acc| < 2^29 (checked per output channel from the bias and the number of taps:
 *    |x - zp| <= 255, |w| <= 128) and e in 1..22; a shift >= 0 takes SMMLAR(a << shift, m,
 *    out_zp) when |acc| << shift < 2^29 (in C); any other channel (a huge bias, a negative
 *    multiplier, shifts beyond) runs the portable arithmetic on its exact int32 sums: the
 *    fast forms are a speed-up, never an approximation.
 *  - Convolution, dense or grouped: im2col into 4-pixel int16 columns (the 4 pixels' chunks
 *    interleaved, two LDMs walk them) and a GEMM of 1 output channel x 4 pixels: per 4 taps
 *    an LDRD of the weight pairs and 8 SMLAD (11 instructions per 16 MACs), 16 chunks
 *    unrolled with a computed entry. The group's weights are expanded once per call into
 *    int16 records (doubled, zero-padded, with the channel's requantization constants) when
 *    they fit EB_TFL_WEXP_MAX elements, else read as int8 words and extended in the loop
 *    (13 instructions per 16 MACs). On the M4, a group (or tile) whose channels all
 *    requantize by a right shift and come in pairs is expanded into records of channel pairs
 *    instead, and a GEMM of 2 output channels x 4 pixels runs on them: per 4 taps 4 weight
 *    and 8 column words by pipelined LDRs and 16 SMLAD (32 cycles per 32 MACs); there a
 *    1x1 convolution's channels whose weights are all zero (pruned or dead: TensorFlow's
 *    converter keeps them) get no record, their planes filled with their constant, and its
 *    last partial block of pixels is the last 4 pixels again. A 1x1 convolution whose
 *    weights exceed EB_TFL_WEXP_MAX expands them tile by tile (an even number of channels,
 *    at least EB_TFL_TILE_MIN) when it has a block of 4 pixels or more, its columns built
 *    once per tile. Columns: a 1x1 stride-1 unpadded conv reads a tap (an
 *    input channel) of 4 neighbouring pixels as one word; any other conv copies the input
 *    rows of 1, 2 or 4 output rows (a multiple of 4 pixels) into a band padded with in_zp,
 *    where a per-tap offset table serves every block of 4 pixels: neighbours in one output
 *    row take one word per tap (stride 1) or two (stride 2; per chunk an LDM of 4 offsets,
 *    the loads, 8 SXTAB16, 8 PKHBT/PKHTB and two STM), others byte by byte.
 *  - Depthwise (in_c / groups == 1, out_c / groups <= EB_TFL_DW_MAX_MULT): per input channel
 *    the padded plane as int16 (x - zp, zeros around) in scratch, then per output channel
 *    (its multiplier's share) 4 output pixels at a time: 3x3 stride 1 by tap rows of pairs
 *    ([w0, w1], [w2, w1]: SMLAD, SMLABB, SMLATB, SMLADX give 12 MACs from one LDM of 3 pair
 *    words), a row's last column by blocks of 4 output rows, 3x3 stride 2 from LDMs of 5
 *    pair words (3x3 of stride 1 or 2: the assembly's jobs made for the layer's first such
 *    channel, then only their weights, constants and output updated per channel); any other
 *    shape from a table of (offset, weight pair) taps.
 *  - Linear: the input as int16 (x - zp) chunks in scratch, 4 weight rows at a time
 *    against it (an LDRD of input pairs for 4 rows, per row LDR, 2 SXTB16, 2 SMLAD: 21
 *    instructions per 16 MACs); rounded once (eb_tfl_mbqm_single), as the portable kernel.
 *    Word-aligned rows of a multiple of 8 weights: triples of rows (a last pair) against 8
 *    inputs at a time (per row an LDRD, 4 SXTB16, 4 SMLAD; one LDM of the inputs for all),
 *    up to 5 triples per call, requantized in C. One or two outputs: no expanded input
 *    (per 4 inputs LDR, 2 SXTAB16 shared, per row LDR, 2 SXTB16, 2 SMLAD).
 *  - Add and pooling: see their sections below (tables of each input's 256 terms; runs
 *    summed by USADA8, maxima by SSUB8/SEL).
 * benchmarks/tfl_kernels.py measures the instructions per MAC under QEMU.
 *
 * Scratch (int16 elements, 4-byte aligned): eb_tfl_conv_scratch / eb_tfl_linear_scratch, a
 * function of the shape only, not of the padding (tflite/kernels.py computes the same for
 * the code generator): GEMM: 4 int32 per output channel (requantization), an int32 per tap
 * (offsets), the 4 columns, the band, the weight records; depthwise: the padded plane and
 * the tap table. Nothing is written outside out[] and scratch; about 0.7 KiB of stack. */
#include "eb_tfl.h"

#include <stddef.h>
#include <string.h>

#if (-1 >> 1) != -1
#error "edgebuild kernels need arithmetic right shifts of negative integers"
#endif

/* Expanded int16 weights of one group at most (elements); above it the GEMM reads int8. */
#ifndef EB_TFL_WEXP_MAX
#define EB_TFL_WEXP_MAX 4096
#endif
/* Tiles of output channels of at least this many when a group's records exceed
 * EB_TFL_WEXP_MAX (fewer: int8 weights in the loop). */
#define EB_TFL_TILE_MIN 8
/* Depthwise path up to this channel multiplier; larger ones run as grouped GEMMs. */
#define EB_TFL_DW_MAX_MULT 4
/* Depthwise: int16 elements of scratch for the planes and records of a batch of input
 * channels (small maps: several channels per call of the assembly), at most
 * EB_TFL_DW_BATCH_MAX channels (past 8 the calls saved are few, the RAM is not); a
 * record's words. */
#define EB_TFL_DW_BATCH 1536
#define EB_TFL_DW_BATCH_MAX 8
#define EB_TFL_DW_REC 12
/* Requantization modes (eb_tfl_rq.e): 1..22 a right shift, <= 0 a left shift by -e. */
#define EB_TFL_SLOW 64
#define EB_TFL_FAST_BOUND ((int64_t)1 << 29)

#if defined(__ARM_FEATURE_DSP) && !defined(EB_TFL_OPT_PORTABLE)
#define EB_TFL_DSP 1
#include <arm_acle.h>
#else
#define EB_TFL_DSP 0
#endif

/* The hand-written loops: GCC, Thumb-2, the DSP extension and optimization (at -O0 r7 is the
 * frame pointer); elsewhere the C twins of the same algorithm. */
#if EB_TFL_DSP && defined(__GNUC__) && defined(__OPTIMIZE__) && defined(__thumb2__)
#define EB_TFL_ASM 1
#else
#define EB_TFL_ASM 0
#endif

#if defined(__GNUC__)
#define EB_TFL_INLINE inline __attribute__((always_inline))
#define EB_TFL_NOINLINE __attribute__((noinline))
#else
#define EB_TFL_INLINE inline
#define EB_TFL_NOINLINE
#endif

/* ---- the paths a project links ---------------------------------------------------------------
 * A model compiles the paths its layers take (eb_config.h: EB_OPT_NO_TFL_<PATH> for those no
 * layer names; edgebuild/formats/tflite/paths.py mirrors the tests below that choose them).
 * A path left out never changes a result: its layers take the next one, at worst the
 * portable kernel of eb_tfl.c.
 *  - DEPTHWISE: the depthwise path (eb_tfl_dw; else the portable convolution);
 *  - DW3_S1, DW3_S2: the 3x3 assembly of stride 1 / 2 (else the C loops: eb_tfl_dw3x3,
 *    eb_tfl_dw_any); DW3_STRIP: the strip kernel of a stride-1 row's last column (else the
 *    rows kernel's 2-pixel tail);
 *  - GEMM_PAIRS: pair records and the 2-channel GEMM; GEMM4: the 1-channel GEMM on records
 *    (else eb_tfl_rows_x); GEMM8: the GEMM on int8 weights (else eb_tfl_rows_8);
 *  - CLAMP: the assembly's forms that clamp to an activation range narrower than int8 (such
 *    layers then run the C loops, which clamp);
 *  - FC_NARROW: linear layers of 1 or 2 outputs (else the general path); FC_ALIGNED: the
 *    assembly of word-aligned weight rows (row triples, pairs); FC4: that of any rows (else
 *    the C loop);
 *  - POOL_GLOBAL: global average pooling; POOL_MAX, POOL_AVG: the window loops (else
 *    eb_tfl_pool2d). */
#ifdef EB_OPT_NO_TFL_DEPTHWISE
#define EB_TFL_HAS_DEPTHWISE 0
#else
#define EB_TFL_HAS_DEPTHWISE 1
#endif
#ifdef EB_OPT_NO_TFL_DW3_S1
#define EB_TFL_HAS_DW3_S1 0
#else
#define EB_TFL_HAS_DW3_S1 1
#endif
#ifdef EB_OPT_NO_TFL_DW3_S2
#define EB_TFL_HAS_DW3_S2 0
#else
#define EB_TFL_HAS_DW3_S2 1
#endif
#ifdef EB_OPT_NO_TFL_DW3_STRIP
#define EB_TFL_HAS_DW3_STRIP 0
#else
#define EB_TFL_HAS_DW3_STRIP 1
#endif
#ifdef EB_OPT_NO_TFL_GEMM_PAIRS
#define EB_TFL_HAS_GEMM_PAIRS 0
#else
#define EB_TFL_HAS_GEMM_PAIRS 1
#endif
#ifdef EB_OPT_NO_TFL_GEMM4
#define EB_TFL_HAS_GEMM4 0
#else
#define EB_TFL_HAS_GEMM4 1
#endif
#ifdef EB_OPT_NO_TFL_GEMM8
#define EB_TFL_HAS_GEMM8 0
#else
#define EB_TFL_HAS_GEMM8 1
#endif
#ifdef EB_OPT_NO_TFL_CLAMP
#define EB_TFL_HAS_CLAMP 0
#else
#define EB_TFL_HAS_CLAMP 1
#endif
#ifdef EB_OPT_NO_TFL_FC_NARROW
#define EB_TFL_HAS_FC_NARROW 0
#else
#define EB_TFL_HAS_FC_NARROW 1
#endif
#ifdef EB_OPT_NO_TFL_FC_ALIGNED
#define EB_TFL_HAS_FC_ALIGNED 0
#else
#define EB_TFL_HAS_FC_ALIGNED 1
#endif
#ifdef EB_OPT_NO_TFL_FC4
#define EB_TFL_HAS_FC4 0
#else
#define EB_TFL_HAS_FC4 1
#endif
#ifdef EB_OPT_NO_TFL_POOL_GLOBAL
#define EB_TFL_HAS_POOL_GLOBAL 0
#else
#define EB_TFL_HAS_POOL_GLOBAL 1
#endif
#ifdef EB_OPT_NO_TFL_POOL_MAX
#define EB_TFL_HAS_POOL_MAX 0
#else
#define EB_TFL_HAS_POOL_MAX 1
#endif
#ifdef EB_OPT_NO_TFL_POOL_AVG
#define EB_TFL_HAS_POOL_AVG 0
#else
#define EB_TFL_HAS_POOL_AVG 1
#endif

/* ---- DSP instructions ----------------------------------------------------------------------
 * Packed values are uint32_t holding two int16 halves (lo, hi) or four bytes. */
#if EB_TFL_DSP
static EB_TFL_INLINE uint32_t eb_tfl_sxtb16(uint32_t x)
{
    return (uint32_t)__sxtb16((int32_t)x);
}

static EB_TFL_INLINE uint32_t eb_tfl_sxtb16_ror8(uint32_t x)
{
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}

/* [a.lo + sext(x.b0), a.hi + sext(x.b2)] and the same of x rotated by 8 (bytes 1, 3). */
static EB_TFL_INLINE uint32_t eb_tfl_sxtab16(uint32_t a, uint32_t x)
{
    return (uint32_t)__sxtab16((int32_t)a, (int32_t)x);
}

static EB_TFL_INLINE uint32_t eb_tfl_sxtab16_ror8(uint32_t a, uint32_t x)
{
    uint32_t r;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(a), "r"(x));
    return r;
}

static EB_TFL_INLINE int32_t eb_tfl_smlad(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlad((int32_t)a, (int32_t)b, acc);
}

/* acc + a.lo * b.hi + a.hi * b.lo */
static EB_TFL_INLINE int32_t eb_tfl_smladx(uint32_t a, uint32_t b, int32_t acc)
{
    return __smladx((int32_t)a, (int32_t)b, acc);
}

static EB_TFL_INLINE int32_t eb_tfl_smlabb(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlabb((int32_t)a, (int32_t)b, acc);
}

/* acc + a.hi * b.lo */
static EB_TFL_INLINE int32_t eb_tfl_smlatb(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlatb((int32_t)a, (int32_t)b, acc);
}

/* [a.lo, b.lo] and [a.hi, b.hi] (PKHBT, PKHTB). */
static EB_TFL_INLINE uint32_t eb_tfl_pack_lo(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

static EB_TFL_INLINE uint32_t eb_tfl_pack_hi(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("pkhtb %0, %2, %1, asr #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

/* (c * 2^32 + a * b + 2^31) >> 32, the low 32 bits (SMMLAR). */
static EB_TFL_INLINE int32_t eb_tfl_smmlar(int32_t a, int32_t b, int32_t c)
{
    int32_t r;
    __asm__("smmlar %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}

static EB_TFL_INLINE int32_t eb_tfl_ssat8(int32_t v)
{
    return __ssat(v, 8);
}

/* Both int16 halves doubled (SADD16 of x with itself; no half overflows here). */
static EB_TFL_INLINE uint32_t eb_tfl_halves_x2(uint32_t x)
{
    return (uint32_t)__sadd16((int16x2_t)x, (int16x2_t)x);
}

/* Per byte (signed): max(v, lo), then min(v, hi) (SSUB8 sets GE, SEL picks). */
static EB_TFL_INLINE uint32_t eb_tfl_clamp4(uint32_t v, uint32_t lo, uint32_t hi)
{
    (void)__ssub8((int8x4_t)v, (int8x4_t)lo);
    v = __sel((uint8x4_t)v, (uint8x4_t)lo);
    (void)__ssub8((int8x4_t)v, (int8x4_t)hi);
    return __sel((uint8x4_t)hi, (uint8x4_t)v);
}

/* Per byte (signed): max(a, b). */
static EB_TFL_INLINE uint32_t eb_tfl_max4(uint32_t a, uint32_t b)
{
    (void)__ssub8((int8x4_t)a, (int8x4_t)b);
    return __sel((uint8x4_t)a, (uint8x4_t)b);
}

/* acc + the sum of the four bytes of x as unsigned values (USADA8 against 0). */
static EB_TFL_INLINE uint32_t eb_tfl_usada8(uint32_t x, uint32_t acc)
{
    return __usada8((uint8x4_t)x, (uint8x4_t)0u, acc);
}
#else
static EB_TFL_INLINE int32_t eb_tfl_lo16(uint32_t x)
{
    return (int32_t)(x & 0xFFFFu) - (int32_t)((x & 0x8000u) << 1);
}

static EB_TFL_INLINE int32_t eb_tfl_hi16(uint32_t x)
{
    return eb_tfl_lo16(x >> 16);
}

static EB_TFL_INLINE int32_t eb_tfl_sb(uint32_t x, int byte)
{
    const int32_t v = (int32_t)((x >> (8 * byte)) & 0xFFu);
    return v - ((v & 0x80) << 1);
}

static EB_TFL_INLINE uint32_t eb_tfl_halves(int32_t lo, int32_t hi)
{
    return ((uint32_t)lo & 0xFFFFu) | (((uint32_t)hi & 0xFFFFu) << 16);
}

static EB_TFL_INLINE uint32_t eb_tfl_sxtb16(uint32_t x)
{
    return eb_tfl_halves(eb_tfl_sb(x, 0), eb_tfl_sb(x, 2));
}

static EB_TFL_INLINE uint32_t eb_tfl_sxtb16_ror8(uint32_t x)
{
    return eb_tfl_halves(eb_tfl_sb(x, 1), eb_tfl_sb(x, 3));
}

static EB_TFL_INLINE uint32_t eb_tfl_sxtab16(uint32_t a, uint32_t x)
{
    return eb_tfl_halves(eb_tfl_lo16(a) + eb_tfl_sb(x, 0), eb_tfl_hi16(a) + eb_tfl_sb(x, 2));
}

static EB_TFL_INLINE uint32_t eb_tfl_sxtab16_ror8(uint32_t a, uint32_t x)
{
    return eb_tfl_halves(eb_tfl_lo16(a) + eb_tfl_sb(x, 1), eb_tfl_hi16(a) + eb_tfl_sb(x, 3));
}

static EB_TFL_INLINE int32_t eb_tfl_smlad(uint32_t a, uint32_t b, int32_t acc)
{
    return eb_tfl_s32((uint32_t)acc + (uint32_t)(eb_tfl_lo16(a) * eb_tfl_lo16(b)) +
                      (uint32_t)(eb_tfl_hi16(a) * eb_tfl_hi16(b)));
}

static EB_TFL_INLINE int32_t eb_tfl_smladx(uint32_t a, uint32_t b, int32_t acc)
{
    return eb_tfl_s32((uint32_t)acc + (uint32_t)(eb_tfl_lo16(a) * eb_tfl_hi16(b)) +
                      (uint32_t)(eb_tfl_hi16(a) * eb_tfl_lo16(b)));
}

static EB_TFL_INLINE int32_t eb_tfl_smlabb(uint32_t a, uint32_t b, int32_t acc)
{
    return eb_tfl_s32((uint32_t)acc + (uint32_t)(eb_tfl_lo16(a) * eb_tfl_lo16(b)));
}

static EB_TFL_INLINE int32_t eb_tfl_smlatb(uint32_t a, uint32_t b, int32_t acc)
{
    return eb_tfl_s32((uint32_t)acc + (uint32_t)(eb_tfl_hi16(a) * eb_tfl_lo16(b)));
}

static EB_TFL_INLINE uint32_t eb_tfl_pack_lo(uint32_t a, uint32_t b)
{
    return (a & 0xFFFFu) | (b << 16);
}

static EB_TFL_INLINE uint32_t eb_tfl_pack_hi(uint32_t a, uint32_t b)
{
    return (a >> 16) | (b & 0xFFFF0000u);
}

static EB_TFL_INLINE int32_t eb_tfl_smmlar(int32_t a, int32_t b, int32_t c)
{
    const uint64_t v = ((uint64_t)(uint32_t)c << 32) + (uint64_t)((int64_t)a * (int64_t)b) +
                       0x80000000u;
    return eb_tfl_s32((uint32_t)(v >> 32));
}

static EB_TFL_INLINE int32_t eb_tfl_ssat8(int32_t v)
{
    return v < -128 ? -128 : (v > 127 ? 127 : v);
}

static EB_TFL_INLINE uint32_t eb_tfl_halves_x2(uint32_t x)
{
    return eb_tfl_halves(2 * eb_tfl_lo16(x), 2 * eb_tfl_hi16(x));
}

static EB_TFL_INLINE uint32_t eb_tfl_clamp4(uint32_t v, uint32_t lo, uint32_t hi)
{
    uint32_t r = 0;
    int i;
    for (i = 0; i < 4; ++i) {
        int32_t x = eb_tfl_sb(v, i);
        x = x < eb_tfl_sb(lo, i) ? eb_tfl_sb(lo, i) : x;
        x = x > eb_tfl_sb(hi, i) ? eb_tfl_sb(hi, i) : x;
        r |= ((uint32_t)x & 0xFFu) << (8 * i);
    }
    return r;
}

static EB_TFL_INLINE uint32_t eb_tfl_max4(uint32_t a, uint32_t b)
{
    uint32_t r = 0;
    int i;
    for (i = 0; i < 4; ++i) {
        const int32_t x = eb_tfl_sb(a, i) > eb_tfl_sb(b, i) ? eb_tfl_sb(a, i) : eb_tfl_sb(b, i);
        r |= ((uint32_t)x & 0xFFu) << (8 * i);
    }
    return r;
}

static EB_TFL_INLINE uint32_t eb_tfl_usada8(uint32_t x, uint32_t acc)
{
    return acc + (x & 0xFFu) + ((x >> 8) & 0xFFu) + ((x >> 16) & 0xFFu) + (x >> 24);
}
#endif

/* Word loads and stores at any address (unaligned LDR/STR on the M4). */
static EB_TFL_INLINE uint32_t eb_tfl_ld(const void *src)
{
    uint32_t v;
    memcpy(&v, src, sizeof v);
    return v;
}

static EB_TFL_INLINE void eb_tfl_st(void *dst, uint32_t v)
{
    memcpy(dst, &v, sizeof v);
}

/* The n (0..4) bytes at src as a word, the rest zero; never reads past src + n. */
static EB_TFL_INLINE uint32_t eb_tfl_ld_n(const int8_t *src, int32_t n)
{
    uint32_t v = 0;
    int32_t i;
    if (n >= 4) {
        return eb_tfl_ld(src);
    }
    for (i = 0; i < n; ++i) {
        v |= (uint32_t)(uint8_t)src[i] << (8 * i);
    }
    return v;
}

/* [lo, hi] as two int16 halves. */
static EB_TFL_INLINE uint32_t eb_tfl_pair(int32_t lo, int32_t hi)
{
    return ((uint32_t)lo & 0xFFFFu) | (((uint32_t)hi & 0xFFFFu) << 16);
}

/* The byte b in all four lanes, and the int16 -zp in both halves. */
static EB_TFL_INLINE uint32_t eb_tfl_splat8(int32_t b)
{
    return ((uint32_t)b & 0xFFu) * 0x01010101u;
}

static EB_TFL_INLINE uint32_t eb_tfl_negzp(int32_t zp)
{
    return ((uint32_t)(-zp) & 0xFFFFu) * 0x00010001u;
}

/* Whether the k int8 weights at w are all zero (a pruned channel); stops at the first that
 * is not. */
static int eb_tfl_row_zero(const int8_t *w, int32_t k)
{
    int32_t i = 0;
    for (; i + 4 <= k; i += 4) {
        if (eb_tfl_ld(w + i) != 0) {
            return 0;
        }
    }
    for (; i < k; ++i) {
        if (w[i] != 0) {
            return 0;
        }
    }
    return 1;
}

/* ---- requantization ------------------------------------------------------------------------
 * Per output channel: the sums' start (the bias, doubled when the weights are), m and the
 * additive constant c (fast right shift: 2^(e-1) + out_zp * 2^e; fast left shift: out_zp),
 * and e (1..22: a right shift by e; <= 0: a left shift by -e; EB_TFL_SLOW: the portable
 * arithmetic on the exact sum, which then starts at the bias undoubled). */
typedef struct {
    int32_t init, m, c, e;
} eb_tfl_rq;

typedef struct {
    int32_t zp, lo, hi;
    uint32_t lo4, hi4; /* act_min / act_max in four bytes */
    int full;          /* the range is [-128, 127]: SSAT alone clamps */
} eb_tfl_act;

static eb_tfl_act eb_tfl_act_of(int32_t zp, int32_t lo, int32_t hi)
{
    eb_tfl_act a;
    a.zp = zp;
    a.lo = lo;
    a.hi = hi;
    a.lo4 = eb_tfl_splat8(lo);
    a.hi4 = eb_tfl_splat8(hi);
    a.full = lo <= -128 && hi >= 127;
    return a;
}

/* The mode of a channel whose sums are bias + `taps` products of its weights `w` (a row of
 * the layer's weights) with |x - zp| <= 255; doubled: the sums are 2 * acc on the fast paths.
 * A channel whose weights are all zero (pruned: TensorFlow's converter leaves such rows with
 * a bias of any size) computes a constant: it takes the fast path with m = 0, its sums 0 and
 * c = 2 * that constant (SMMLAR(0, 0, c) = c, >> 1), so its bias never costs the slow path. */
static eb_tfl_rq eb_tfl_rq_of(int32_t bias, int32_t m, int32_t shift, const int8_t *w,
                              int32_t taps, int32_t zp, int doubled)
{
    const int64_t size = (int64_t)(bias < 0 ? -(int64_t)bias : bias);
    int64_t bound = size + (int64_t)taps * 32640;
    int32_t i, magnitude = 1;
    eb_tfl_rq q;
    if (bound >= EB_TFL_FAST_BOUND) { /* rare: the weights' own bound may still be small */
        magnitude = 0;
        if (!eb_tfl_row_zero(w, taps)) { /* a pruned row (the common case here): no sum */
            for (i = 0; i < taps; ++i) {
                magnitude += w[i] < 0 ? -w[i] : w[i];
            }
        }
        bound = size + (int64_t)magnitude * 255;
    }
    q.m = m;
    q.e = EB_TFL_SLOW;
    q.c = 0;
    if (magnitude == 0) {
        int64_t v = (int64_t)eb_tfl_mbqm(bias, m, (int)shift) + zp; /* as eb_tfl_out8: no wrap */
        v = v > 256 ? 256 : (v < -256 ? -256 : v);
        q.m = 0;
        q.e = 1;
        q.c = 2 * (int32_t)v;
        q.init = 0;
        return q;
    }
    if (m >= 0 && bound < EB_TFL_FAST_BOUND) {
        if (shift <= -1 && shift >= -22) {
            const int e = -shift;
            q.e = e;
            q.c = ((int32_t)1 << (e - 1)) + zp * ((int32_t)1 << e);
        } else if (shift >= 0 && shift <= 29 && (bound << shift) < EB_TFL_FAST_BOUND) {
            q.e = -shift;
            q.c = zp;
        }
    }
    q.init = q.e != EB_TFL_SLOW && doubled ? 2 * bias : bias;
    return q;
}

/* One output of a fast channel from its (doubled) sum a. */
static EB_TFL_INLINE int32_t eb_tfl_rq_fast(const eb_tfl_rq *q, int32_t a)
{
    if (q->e > 0) {
        return eb_tfl_ssat8(eb_tfl_smmlar(a, q->m, q->c + (a >> 31)) >> q->e);
    }
    return eb_tfl_ssat8(eb_tfl_smmlar(a * ((int32_t)1 << -q->e), q->m, q->c));
}

/* Four outputs of a fast channel as one word (lane j = byte j). */
static EB_TFL_INLINE uint32_t eb_tfl_rq_fast4(const eb_tfl_rq *q, const eb_tfl_act *act, int32_t a0,
                                              int32_t a1, int32_t a2, int32_t a3)
{
    uint32_t v;
    if (q->e > 0) {
        const int32_t m = q->m, c = q->c, e = q->e;
        v = (uint32_t)eb_tfl_ssat8(eb_tfl_smmlar(a0, m, c + (a0 >> 31)) >> e) & 0xFFu;
        v |= ((uint32_t)eb_tfl_ssat8(eb_tfl_smmlar(a1, m, c + (a1 >> 31)) >> e) & 0xFFu) << 8;
        v |= ((uint32_t)eb_tfl_ssat8(eb_tfl_smmlar(a2, m, c + (a2 >> 31)) >> e) & 0xFFu) << 16;
        v |= (uint32_t)eb_tfl_ssat8(eb_tfl_smmlar(a3, m, c + (a3 >> 31)) >> e) << 24;
    } else {
        v = (uint32_t)eb_tfl_rq_fast(q, a0) & 0xFFu;
        v |= ((uint32_t)eb_tfl_rq_fast(q, a1) & 0xFFu) << 8;
        v |= ((uint32_t)eb_tfl_rq_fast(q, a2) & 0xFFu) << 16;
        v |= (uint32_t)eb_tfl_rq_fast(q, a3) << 24;
    }
    return act->full ? v : eb_tfl_clamp4(v, act->lo4, act->hi4);
}

/* count (1..4) outputs of acc[] (2 * acc on the fast paths, exact sums on the slow one) to
 * out: one word store for 4. */
static void eb_tfl_store(const eb_tfl_rq *q, const eb_tfl_act *act, int32_t m, int32_t shift,
                         const int32_t acc[4], int count, int8_t *out)
{
    int j;
    if (q->e != EB_TFL_SLOW) {
        const uint32_t v = eb_tfl_rq_fast4(q, act, acc[0], acc[1], acc[2], acc[3]);
        if (count == 4) {
            eb_tfl_st(out, v);
        } else {
            for (j = 0; j < count; ++j) {
                out[j] = (int8_t)(v >> (8 * j));
            }
        }
        return;
    }
    for (j = 0; j < count; ++j) {
        out[j] = eb_tfl_out8(eb_tfl_mbqm(acc[j], m, (int)shift), act->zp, act->lo, act->hi);
    }
}

/* ---- the plan: path and scratch layout of a layer (a function of its shape only) --------- */

enum { EB_TFL_DW, EB_TFL_GEMM_FLAT, EB_TFL_GEMM_BAND };

typedef struct {
    int path;
    int32_t k, kp;     /* GEMM: taps per output, rounded up to 4 */
    int32_t band_w;    /* GEMM band: bytes per band row */
    int32_t band_r;    /* GEMM band: output rows per band (4 / gcd(out_w, 4)) */
    int32_t band_h;    /* GEMM band: input rows per band and channel */
    int32_t wexp;      /* GEMM: the weight records of a tile of channels, int16 elements (0:
                        * int8 weights in the loop) */
    int32_t tile;      /* GEMM: output channels per tile (the group's, or EB_TFL_TILE_MIN.. of
                        * them when the group's records exceed EB_TFL_WEXP_MAX) */
    int32_t dw_w, dw_h; /* depthwise: the padded plane (int16 elements) */
    int32_t dw_taps;   /* depthwise: (offset, weight pair) table entries */
    int32_t dw_batch;  /* depthwise: input channels whose planes are made at a time */
    /* scratch regions, int16 elements from its start (each a multiple of 2) */
    int32_t at_rq, at_off, at_cols, at_aux, at_wx, total;
} eb_tfl_plan;

static int32_t eb_tfl_even(int32_t n)
{
    return (n + 1) & ~(int32_t)1;
}

static int32_t eb_tfl_round4(int32_t n)
{
    return (n + 3) & ~(int32_t)3;
}

static int eb_tfl_is_depthwise(const eb_tfl_conv_params *p)
{
    return p->in_c == p->groups && p->out_c / p->groups <= EB_TFL_DW_MAX_MULT;
}

/* Depthwise: the input channels whose planes (pe int16 each) and records (mult per plane)
 * are made at a time: as many as EB_TFL_DW_BATCH int16 hold, at least 1, at most
 * EB_TFL_DW_BATCH_MAX. */
static int32_t eb_tfl_dw_batch(int32_t pe, int32_t in_c, int32_t mult)
{
    const int32_t room = EB_TFL_DW_BATCH / (pe + EB_TFL_DW_REC * 2 * mult);
    const int32_t most = in_c < EB_TFL_DW_BATCH_MAX ? in_c : EB_TFL_DW_BATCH_MAX;
    return room < 1 ? 1 : (room > most ? most : room);
}

static int32_t eb_tfl_dw_taps(const eb_tfl_conv_params *p)
{
    return (int32_t)p->k_h * (p->dil_w == 1 ? (p->k_w + 1) / 2 : p->k_w);
}

static eb_tfl_plan eb_tfl_plan_of(const eb_tfl_conv_params *p)
{
    eb_tfl_plan s;
    const int32_t ipg = p->in_c / p->groups, opg = p->out_c / p->groups;
    const int32_t r4 = eb_tfl_round4(p->out_w);
    int32_t wexp_room;
    memset(&s, 0, sizeof s);
    if (eb_tfl_is_depthwise(p)) {
        /* rows and columns of every tap of blocks of 4 output rows and of 4 pixels (the
         * last ones whole), and one more int16 for the pair loads of a last odd tap */
        s.path = EB_TFL_DW;
        s.dw_h = (eb_tfl_round4(p->out_h) - 1) * p->stride_h + (int32_t)(p->k_h - 1) * p->dil_h + 1;
        s.dw_w = eb_tfl_even((r4 - 1) * p->stride_w + (int32_t)(p->k_w - 1) * p->dil_w + 2);
        s.dw_taps = eb_tfl_dw_taps(p);
        s.dw_batch = eb_tfl_dw_batch(s.dw_h * s.dw_w, p->in_c, p->out_c / p->in_c);
        s.at_aux = 0;                          /* the padded planes */
        s.at_off = s.dw_batch * s.dw_h * s.dw_w; /* the tap table: 2 int32 per entry */
        s.at_rq = s.at_off + 4 * s.dw_taps;    /* the channels' records (the assembly's) */
        s.total = s.at_rq + EB_TFL_DW_REC * 2 * s.dw_batch * (p->out_c / p->in_c);
        return s;
    }
    s.k = ipg * p->k_h * p->k_w;
    s.kp = eb_tfl_round4(s.k);
    /* A band: the input rows of band_r output rows (a multiple of 4 pixels), every
     * channel, padded with zp: band_w columns, those the taps read and one byte more
     * (stride 2 loads a word at its lane 2); input columns past them are not copied. */
    s.band_r = p->out_w % 4 == 0 ? 1 : (p->out_w % 2 == 0 ? 2 : 4);
    s.band_h = (s.band_r - 1) * p->stride_h + (int32_t)(p->k_h - 1) * p->dil_h + 1;
    s.band_w = eb_tfl_round4((int32_t)(p->out_w - 1) * p->stride_w +
                             (int32_t)(p->k_w - 1) * p->dil_w + 2);
    s.path = p->k_h == 1 && p->k_w == 1 && p->stride_h == 1 && p->stride_w == 1 &&
                     p->pad_top == 0 && p->pad_left == 0 && p->out_h == p->in_h &&
                     p->out_w == p->in_w
                 ? EB_TFL_GEMM_FLAT
                 : EB_TFL_GEMM_BAND;
    /* per output channel a record: [init][kp int16 weights][m][c][e] (kp / 2 + 4 words) */
    s.tile = opg;
    s.wexp = opg * s.kp <= EB_TFL_WEXP_MAX ? opg * (s.kp + 8) : 0;
    wexp_room = s.wexp;
    if (s.wexp == 0 && (EB_TFL_WEXP_MAX / s.kp & ~1) >= EB_TFL_TILE_MIN && p->k_h == 1 &&
        p->k_w == 1 && p->stride_h == 1 && p->stride_w == 1 &&
        (int32_t)p->out_h * p->out_w >= 4) {
        /* a 1x1 conv of a block of pixels or more: room for the records of a tile of an
         * even number of channels; used (the columns built once per tile, the GEMM on int16
         * records) when the layer takes the flat path (no padding) */
        wexp_room = (EB_TFL_WEXP_MAX / s.kp & ~1) * (s.kp + 8);
        if (s.path == EB_TFL_GEMM_FLAT) {
            const int32_t most = EB_TFL_WEXP_MAX / s.kp & ~1;
            const int32_t tiles = (opg + most - 1) / most;
            s.tile = ((opg + tiles - 1) / tiles + 1) & ~1; /* balanced, even */
            s.wexp = wexp_room;
        }
    }
    /* the layout does not depend on the padding (nor on the path): tflite/kernels.py
     * computes the same from the shape alone */
    s.at_rq = 0;
    s.at_off = s.at_rq + 8 * p->out_c;
    s.at_cols = s.at_off + 2 * s.kp;
    s.at_aux = s.at_cols + 4 * s.kp;
    s.at_wx = s.at_aux + eb_tfl_even((ipg * s.band_h * s.band_w + 1) / 2);
    s.total = s.at_wx + wexp_room;
    return s;
}

int32_t eb_tfl_conv_scratch(const eb_tfl_conv_params *p)
{
    return eb_tfl_plan_of(p).total;
}

int32_t eb_tfl_linear_scratch(const eb_tfl_fc_params *p)
{
    return eb_tfl_round4(p->in_f);
}

/* ---- columns ------------------------------------------------------------------------------
 * The columns of 4 pixels: per chunk of 4 taps (k0..k3), 16 int16: pixel 0's [x_k0, x_k2],
 * [x_k1, x_k3], then pixels 1, 2, 3 (x - zp; padding and taps past K: 0). From "tap words"
 * T_k = [x_k(P0), x_k(P1), x_k(P2), x_k(P3)] (int8; padding lanes hold zp): SXTAB16 with
 * [-zp, -zp] gives [P0, P2] and [P1, P3] of a tap, PKHBT / PKHTB pair the taps. */
static EB_TFL_INLINE void eb_tfl_chunk(uint32_t nz, uint32_t t0, uint32_t t1, uint32_t t2,
                                       uint32_t t3, int16_t *cols)
{
    const uint32_t a0 = eb_tfl_sxtab16(nz, t0), b0 = eb_tfl_sxtab16_ror8(nz, t0);
    const uint32_t a1 = eb_tfl_sxtab16(nz, t1), b1 = eb_tfl_sxtab16_ror8(nz, t1);
    const uint32_t a2 = eb_tfl_sxtab16(nz, t2), b2 = eb_tfl_sxtab16_ror8(nz, t2);
    const uint32_t a3 = eb_tfl_sxtab16(nz, t3), b3 = eb_tfl_sxtab16_ror8(nz, t3);
    eb_tfl_st(cols, eb_tfl_pack_lo(a0, a2));
    eb_tfl_st(cols + 2, eb_tfl_pack_lo(a1, a3));
    eb_tfl_st(cols + 4, eb_tfl_pack_lo(b0, b2));
    eb_tfl_st(cols + 6, eb_tfl_pack_lo(b1, b3));
    eb_tfl_st(cols + 8, eb_tfl_pack_hi(a0, a2));
    eb_tfl_st(cols + 10, eb_tfl_pack_hi(a1, a3));
    eb_tfl_st(cols + 12, eb_tfl_pack_hi(b0, b2));
    eb_tfl_st(cols + 14, eb_tfl_pack_hi(b1, b3));
}

/* The same from pixel pairs: c_k = [x_k(P0), x_k(P1)], d_k = [x_k(P2), x_k(P3)] (int16). */
static EB_TFL_INLINE void eb_tfl_chunk_pairs(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                             uint32_t d0, uint32_t d1, uint32_t d2, uint32_t d3,
                                             int16_t *cols)
{
    eb_tfl_st(cols, eb_tfl_pack_lo(c0, c2));
    eb_tfl_st(cols + 2, eb_tfl_pack_lo(c1, c3));
    eb_tfl_st(cols + 4, eb_tfl_pack_hi(c0, c2));
    eb_tfl_st(cols + 6, eb_tfl_pack_hi(c1, c3));
    eb_tfl_st(cols + 8, eb_tfl_pack_lo(d0, d2));
    eb_tfl_st(cols + 10, eb_tfl_pack_lo(d1, d3));
    eb_tfl_st(cols + 12, eb_tfl_pack_hi(d0, d2));
    eb_tfl_st(cols + 14, eb_tfl_pack_hi(d1, d3));
}

/* Line chunks: n chunks of the columns of 4 neighbouring pixels whose tap k's bytes start
 * at b + off[k] (lane j at + j * stride): stride 1 one word per tap, stride 2 two words
 * (SXTAB16 of the word at + 0 gives lanes 0, 1; at + 4 lanes 2, 3). */
#if EB_TFL_ASM
/* By hand: per chunk one LDM of the 4 offsets, the tap words (register-offset LDR), 8
 * SXTAB16 (with [-zp, -zp], in r12), 8 PKHBT/PKHTB into two ascending register sets, two
 * STM: 25 instructions per 16 values (stride 2: 33). nz is the fifth argument (stack). */
#define EB_TFL_LINE_FN(name, load, extend, pack)                                          \
    static __attribute__((naked, noinline)) void name(                                    \
        const int8_t *b __attribute__((unused)), const int32_t *off __attribute__((unused)), \
        int16_t *cols __attribute__((unused)), int32_t n __attribute__((unused)),          \
        uint32_t nz __attribute__((unused)))                                              \
    {                                                                                     \
        __asm__ volatile("ldr    r12, [sp]\n\t"                                           \
                         "push   {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n"                \
                         "1:\n\t"                                                         \
                         "ldmia  r1!, {r8, r9, r10, r11}\n\t" load extend pack            \
                         "subs   r3, r3, #1\n\t"                                          \
                         "bne    1b\n\t"                                                  \
                         "pop    {r4, r5, r6, r7, r8, r9, r10, r11, pc}\n");              \
    }
#define EB_TFL_LINE1_LOAD                                                                 \
    "ldr    r8, [r0, r8]\n\t"                                                             \
    "ldr    r9, [r0, r9]\n\t"                                                             \
    "ldr    r10, [r0, r10]\n\t"                                                           \
    "ldr    r11, [r0, r11]\n\t"
/* a_i = [P0, P2] of tap i in r4..r7, b_i = [P1, P3] in r8..r11 */
#define EB_TFL_LINE1_EXTEND                                                               \
    "sxtab16 r4, r12, r8\n\t"                                                             \
    "sxtab16 r8, r12, r8, ror #8\n\t"                                                     \
    "sxtab16 r5, r12, r9\n\t"                                                             \
    "sxtab16 r9, r12, r9, ror #8\n\t"                                                     \
    "sxtab16 r6, r12, r10\n\t"                                                            \
    "sxtab16 r10, r12, r10, ror #8\n\t"                                                   \
    "sxtab16 r7, r12, r11\n\t"                                                            \
    "sxtab16 r11, r12, r11, ror #8\n\t"
/* P0 = lo(a0, a2), lo(a1, a3); P1 = lo(b0, b2), lo(b1, b3); P2, P3 the same with hi */
#define EB_TFL_LINE1_PACK                                                                 \
    "pkhtb  lr, r11, r9, asr #16\n\t"                                                     \
    "pkhbt  r9, r9, r11, lsl #16\n\t"                                                     \
    "pkhtb  r11, r10, r8, asr #16\n\t"                                                    \
    "pkhbt  r8, r8, r10, lsl #16\n\t"                                                     \
    "pkhtb  r10, r7, r5, asr #16\n\t"                                                     \
    "pkhbt  r5, r5, r7, lsl #16\n\t"                                                      \
    "pkhtb  r7, r6, r4, asr #16\n\t"                                                      \
    "pkhbt  r4, r4, r6, lsl #16\n\t"                                                      \
    "stmia  r2!, {r4, r5, r8, r9}\n\t"                                                    \
    "stmia  r2!, {r7, r10, r11, lr}\n\t"
/* c_i = [P0, P1] of tap i in r4..r7, d_i = [P2, P3] in r8..r11 */
#define EB_TFL_LINE2_LOAD                                                                 \
    "add    r8, r8, r0\n\t"                                                               \
    "ldr    r4, [r8]\n\t"                                                                 \
    "ldr    r8, [r8, #4]\n\t"                                                             \
    "add    r9, r9, r0\n\t"                                                               \
    "ldr    r5, [r9]\n\t"                                                                 \
    "ldr    r9, [r9, #4]\n\t"                                                             \
    "add    r10, r10, r0\n\t"                                                             \
    "ldr    r6, [r10]\n\t"                                                                \
    "ldr    r10, [r10, #4]\n\t"                                                           \
    "add    r11, r11, r0\n\t"                                                             \
    "ldr    r7, [r11]\n\t"                                                                \
    "ldr    r11, [r11, #4]\n\t"
#define EB_TFL_LINE2_EXTEND                                                               \
    "sxtab16 r4, r12, r4\n\t"                                                             \
    "sxtab16 r8, r12, r8\n\t"                                                             \
    "sxtab16 r5, r12, r5\n\t"                                                             \
    "sxtab16 r9, r12, r9\n\t"                                                             \
    "sxtab16 r6, r12, r6\n\t"                                                             \
    "sxtab16 r10, r12, r10\n\t"                                                           \
    "sxtab16 r7, r12, r7\n\t"                                                             \
    "sxtab16 r11, r12, r11\n\t"
/* P0 = lo(c0, c2), lo(c1, c3); P1 = hi(c0, c2), hi(c1, c3); P2, P3 the same of d */
#define EB_TFL_LINE2_PACK                                                                 \
    "pkhtb  lr, r7, r5, asr #16\n\t"                                                      \
    "pkhbt  r5, r5, r7, lsl #16\n\t"                                                      \
    "pkhtb  r7, r6, r4, asr #16\n\t"                                                      \
    "pkhbt  r4, r4, r6, lsl #16\n\t"                                                      \
    "stmia  r2!, {r4, r5, r7, lr}\n\t"                                                    \
    "pkhbt  r6, r8, r10, lsl #16\n\t"                                                     \
    "pkhtb  r10, r10, r8, asr #16\n\t"                                                    \
    "pkhbt  r8, r9, r11, lsl #16\n\t"                                                     \
    "pkhtb  r11, r11, r9, asr #16\n\t"                                                    \
    "stmia  r2!, {r6, r8, r10, r11}\n\t"
EB_TFL_LINE_FN(eb_tfl_line_s1, EB_TFL_LINE1_LOAD, EB_TFL_LINE1_EXTEND, EB_TFL_LINE1_PACK)
EB_TFL_LINE_FN(eb_tfl_line_s2, EB_TFL_LINE2_LOAD, EB_TFL_LINE2_EXTEND, EB_TFL_LINE2_PACK)
#else
static EB_TFL_NOINLINE void eb_tfl_line_s1(const int8_t *b, const int32_t *off, int16_t *cols,
                                           int32_t n, uint32_t nz)
{
    for (; n > 0; --n, off += 4, cols += 16) {
        eb_tfl_chunk(nz, eb_tfl_ld(b + off[0]), eb_tfl_ld(b + off[1]), eb_tfl_ld(b + off[2]),
                     eb_tfl_ld(b + off[3]), cols);
    }
}

static EB_TFL_NOINLINE void eb_tfl_line_s2(const int8_t *b, const int32_t *off, int16_t *cols,
                                           int32_t n, uint32_t nz)
{
    for (; n > 0; --n, off += 4, cols += 16) {
        const int8_t *b0 = b + off[0], *b1 = b + off[1], *b2 = b + off[2], *b3 = b + off[3];
        eb_tfl_chunk_pairs(eb_tfl_sxtab16(nz, eb_tfl_ld(b0)), eb_tfl_sxtab16(nz, eb_tfl_ld(b1)),
                           eb_tfl_sxtab16(nz, eb_tfl_ld(b2)), eb_tfl_sxtab16(nz, eb_tfl_ld(b3)),
                           eb_tfl_sxtab16(nz, eb_tfl_ld(b0 + 4)),
                           eb_tfl_sxtab16(nz, eb_tfl_ld(b1 + 4)),
                           eb_tfl_sxtab16(nz, eb_tfl_ld(b2 + 4)),
                           eb_tfl_sxtab16(nz, eb_tfl_ld(b3 + 4)), cols);
    }
}
#endif

/* A line's columns (stride 1 or 2): its k / 4 whole chunks, then the last k % 4 taps (taps
 * past k: zp words, 0 pairs). */
static void eb_tfl_cols_line(const int8_t *b, const int32_t *off, int32_t k, int sw, int32_t zp,
                             int16_t *cols)
{
    const uint32_t nz = eb_tfl_negzp(zp), zw = eb_tfl_splat8(zp);
    const int32_t full = k & ~(int32_t)3, rest = k - full;
    if (full > 0) {
        (sw == 1 ? eb_tfl_line_s1 : eb_tfl_line_s2)(b, off, cols, full / 4, nz);
    }
    if (rest > 0) {
        const int32_t *o = off + full;
        int16_t *c = cols + 4 * full;
        if (sw == 1) {
            eb_tfl_chunk(nz, eb_tfl_ld(b + o[0]), rest > 1 ? eb_tfl_ld(b + o[1]) : zw,
                         rest > 2 ? eb_tfl_ld(b + o[2]) : zw, zw, c);
        } else {
            eb_tfl_chunk_pairs(eb_tfl_sxtab16(nz, eb_tfl_ld(b + o[0])),
                               rest > 1 ? eb_tfl_sxtab16(nz, eb_tfl_ld(b + o[1])) : 0u,
                               rest > 2 ? eb_tfl_sxtab16(nz, eb_tfl_ld(b + o[2])) : 0u, 0u,
                               eb_tfl_sxtab16(nz, eb_tfl_ld(b + o[0] + 4)),
                               rest > 1 ? eb_tfl_sxtab16(nz, eb_tfl_ld(b + o[1] + 4)) : 0u,
                               rest > 2 ? eb_tfl_sxtab16(nz, eb_tfl_ld(b + o[2] + 4)) : 0u, 0u,
                               c);
        }
    }
}

/* 1x1 stride 1 unpadded: pixels px .. px + 3 of channels 0 .. k - 1, off[k] = k * hw (the
 * planes); a last block of fewer pixels word by word, never past a plane's end. */
static EB_TFL_NOINLINE void eb_tfl_cols_flat(const int8_t *in, const int32_t *off, int32_t k,
                                             int32_t kp, int32_t hw, int32_t px, int32_t zp,
                                             int16_t *cols)
{
    const uint32_t nz = eb_tfl_negzp(zp), zw = eb_tfl_splat8(zp);
    const int32_t n = hw - px < 4 ? hw - px : 4;
    const int8_t *s = in + px;
    int32_t q;
    if (n == 4) {
        eb_tfl_cols_line(s, off, k, 1, zp, cols);
        return;
    }
    for (q = 0; q < kp; q += 4, cols += 16) {
        uint32_t t[4];
        int i;
        for (i = 0; i < 4; ++i, s += hw) {
            t[i] = q + i < k ? eb_tfl_ld_n(s, n) | (zw << (8 * n)) : zw;
        }
        eb_tfl_chunk(nz, t[0], t[1], t[2], t[3], cols);
    }
}

/* Band mode: the taps' offsets in the band (tap k = (ic, ky, kx) at (ic * band_h + ky *
 * dil_h) * band_w + kx * dil_w); the band of output rows oy0 .. oy0 + band_r - 1: for each
 * input channel its input rows from oy0 * stride_h - pad_top on, placed at pad_left, zp
 * around (rows outside the input all zp). */
static EB_TFL_NOINLINE void eb_tfl_band_offsets(const eb_tfl_conv_params *p, const eb_tfl_plan *s,
                                                int32_t *off)
{
    int32_t k = 0;
    int ic, ky, kx;
    for (ic = 0; ic < p->in_c / p->groups; ++ic) {
        for (ky = 0; ky < p->k_h; ++ky) {
            for (kx = 0; kx < p->k_w; ++kx) {
                off[k++] = ((int32_t)ic * s->band_h + (int32_t)ky * p->dil_h) * s->band_w +
                           (int32_t)kx * p->dil_w;
            }
        }
    }
    for (; k < s->kp; ++k) {
        off[k] = 0;
    }
}

static EB_TFL_NOINLINE void eb_tfl_band(const eb_tfl_conv_params *p, const eb_tfl_plan *s,
                                        const int8_t *in_g, int oy0, int8_t *band)
{
    const int32_t plane = (int32_t)p->in_h * p->in_w;
    const int zp = p->in_zp;
    const int32_t pl = p->pad_left < s->band_w ? p->pad_left : s->band_w;
    const int32_t room = s->band_w - pl;
    const int32_t n = p->in_w < room ? p->in_w : room; /* the input columns read */
    int ic, r;
    for (ic = 0; ic < p->in_c / p->groups; ++ic) {
        for (r = 0; r < s->band_h; ++r, band += s->band_w) {
            const int iy = oy0 * p->stride_h - p->pad_top + r;
            if (iy < 0 || iy >= p->in_h) {
                memset(band, zp, (size_t)s->band_w);
            } else {
                memset(band, zp, (size_t)pl);
                memcpy(band + pl, in_g + ic * plane + (int32_t)iy * p->in_w, (size_t)n);
                memset(band + pl + n, zp, (size_t)(room - n));
            }
        }
    }
}

/* The columns of 4 pixels from the band: lane j's taps at band + base[j] + off[k]. With
 * `line` the four are neighbours in one output row (base[j] = base[0] + j * stride_w) and
 * the stride 1 or 2: eb_tfl_cols_line; otherwise byte by byte. */
static EB_TFL_NOINLINE void eb_tfl_cols_band(const eb_tfl_conv_params *p, const eb_tfl_plan *s,
                                             const int8_t *band, const int32_t *off,
                                             const int32_t base[4], int line, int16_t *cols)
{
    const uint32_t nz = eb_tfl_negzp(p->in_zp), zw = eb_tfl_splat8(p->in_zp);
    const int8_t *b0 = band + base[0], *b1 = band + base[1];
    const int8_t *b2 = band + base[2], *b3 = band + base[3];
    const int32_t k = s->k;
    uint32_t t[4];
    int32_t q;
    int i;
    if (line && p->stride_w <= 2) {
        eb_tfl_cols_line(b0, off, k, p->stride_w, p->in_zp, cols);
        return;
    }
    for (q = 0; q < s->kp; q += 4, off += 4, cols += 16) {
        for (i = 0; i < 4; ++i) {
            const int32_t o = off[i];
            t[i] = q + i >= k ? zw
                              : ((uint32_t)(uint8_t)b0[o] | (uint32_t)(uint8_t)b1[o] << 8 |
                                 (uint32_t)(uint8_t)b2[o] << 16 | (uint32_t)(uint8_t)b3[o] << 24);
        }
        eb_tfl_chunk(nz, t[0], t[1], t[2], t[3], cols);
    }
}

/* ---- GEMM rows -----------------------------------------------------------------------------
 * n output channels against the 4 pixels' columns: their sums (1 channel x 4 pixels at a
 * time), requantized, to out (the first channel's first pixel; channels hw apart). */
typedef struct {
    const eb_tfl_rq *rq;
    const int32_t *mult, *shift; /* for slow channels */
    eb_tfl_act act;
    int32_t hw;
    int all_fast; /* every channel requantizes by a right shift (e in 1..22) */
    int pairs;    /* the records are pair records (eb_tfl_expand_pairs, the M4) */
    int records;  /* pairs: the channels that have one (the others' outputs are constants,
                   * written when the records were made) */
} eb_tfl_rows;

/* The expanded weights: per output channel a record of kp / 2 + 4 words, [init] [kp int16:
 * chunks [w0, w2], [w1, w3]] [m] [c] [e] (eb_tfl_rq's fields). */
#define EB_TFL_REC_WORDS(kp) ((kp) / 2 + 4)

static EB_TFL_NOINLINE void eb_tfl_rows_x(const eb_tfl_rows *r, const int32_t *rec, int32_t kp,
                                          const int16_t *cols, int n, int count, int8_t *out)
{
    int o;
    for (o = 0; o < n; ++o, out += r->hw, rec += EB_TFL_REC_WORDS(kp)) {
        const eb_tfl_rq *q = r->rq + o;
        const int16_t *c = cols;
        const int16_t *wx = (const int16_t *)(const void *)(rec + 1);
        int32_t a0 = rec[0], a1 = a0, a2 = a0, a3 = a0, acc[4];
        int32_t i;
        for (i = 0; i < kp; i += 4, wx += 4, c += 16) {
            const uint32_t wl = eb_tfl_ld(wx), wh = eb_tfl_ld(wx + 2);
            a0 = eb_tfl_smlad(wl, eb_tfl_ld(c), eb_tfl_smlad(wh, eb_tfl_ld(c + 2), a0));
            a1 = eb_tfl_smlad(wl, eb_tfl_ld(c + 4), eb_tfl_smlad(wh, eb_tfl_ld(c + 6), a1));
            a2 = eb_tfl_smlad(wl, eb_tfl_ld(c + 8), eb_tfl_smlad(wh, eb_tfl_ld(c + 10), a2));
            a3 = eb_tfl_smlad(wl, eb_tfl_ld(c + 12), eb_tfl_smlad(wh, eb_tfl_ld(c + 14), a3));
        }
        acc[0] = a0;
        acc[1] = a1;
        acc[2] = a2;
        acc[3] = a3;
        eb_tfl_store(q, &r->act, r->mult[o], r->shift[o], acc, count, out);
    }
}

/* On the M4 (GCC, Thumb-2, optimizing): eb_tfl_rows_x for runs of 4-pixel blocks whose
 * channels requantize by a right shift (eb_tfl_rq.e in 1..22), by hand: per 4 taps an LDRD of
 * the weight pairs, two LDMs of the 4 pixels' column words, 8 SMLAD (11 instructions per 16
 * MACs), 16 chunks unrolled with a computed entry (the first pass runs nchunks % 16), then
 * per output ADD, SMMLAR, ASR, SSAT, the four packed by BFI (and clamped by SSUB8/SEL),
 * one STR. r0-r3 the sums, r4-r6/r8 column words, r7/r9 weight pairs, r10 the records,
 * r11 the columns, r12 their end, lr the output; the job's other fields on the stack. */
#if EB_TFL_ASM
typedef struct {
    const int32_t *rec;  /* 0: the first channel's record */
    const int16_t *cols; /* 4 */
    const int16_t *cend; /* 8 */
    int8_t *out;         /* 12: the first channel's output (4 bytes) */
    int32_t hw;          /* 16: output channels apart */
    const int32_t *rend; /* 20: the end of the last channel's record */
    uint32_t lo4, hi4;   /* 24, 28 */
    int32_t nchunks;     /* 32: kp / 4 */
} eb_tfl_gemm_job;

#define EB_TFL_GEMM_CHUNK                      \
    "ldrd   r7, r9, [r10], #8\n\t"             \
    "ldmia.w r11!, {r4, r5, r6, r8}\n\t"       \
    "smlad  r0, r7, r4, r0\n\t"                \
    "smlad  r0, r9, r5, r0\n\t"                \
    "smlad  r1, r7, r6, r1\n\t"                \
    "smlad  r1, r9, r8, r1\n\t"                \
    "ldmia.w r11!, {r4, r5, r6, r8}\n\t"       \
    "smlad  r2, r7, r4, r2\n\t"                \
    "smlad  r2, r9, r5, r2\n\t"                \
    "smlad  r3, r7, r6, r3\n\t"                \
    "smlad  r3, r9, r8, r3\n\t"
#define EB_TFL_GEMM_CHUNK4 EB_TFL_GEMM_CHUNK EB_TFL_GEMM_CHUNK EB_TFL_GEMM_CHUNK EB_TFL_GEMM_CHUNK
/* rX = SSAT8((SMMLAR(rX, m, c + (rX >> 31))) >> e), m, c, e in r4, r5, r6 */
#define EB_TFL_REQ(x)                          \
    "add    r7, r5, " x ", asr #31\n\t"        \
    "smmlar " x ", " x ", r4, r7\n\t"          \
    "asr    " x ", " x ", r6\n\t"              \
    "ssat   " x ", #8, " x "\n\t"
#define EB_TFL_CLAMP                           \
    "ldrd   r4, r5, [sp, #16]\n\t"             \
    "ssub8  r7, r0, r4\n\t"                    \
    "sel    r0, r0, r4\n\t"                    \
    "ssub8  r7, r0, r5\n\t"                    \
    "sel    r0, r5, r0\n\t"

#define EB_TFL_GEMM_FN(name, clamp)                                                       \
    static __attribute__((naked, noinline)) void name(eb_tfl_gemm_job *job                \
                                                      __attribute__((unused)))            \
    {                                                                                     \
        __asm__ volatile(                                                                 \
            "push   {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                           \
            "sub    sp, sp, #32\n\t"                                                      \
            "ldr    r1, [r0, #4]\n\t"                                                     \
            "str    r1, [sp, #0]\n\t"                                                     \
            "ldr    r1, [r0, #16]\n\t"                                                    \
            "str    r1, [sp, #4]\n\t"                                                     \
            "ldr    r1, [r0, #20]\n\t"                                                    \
            "str    r1, [sp, #8]\n\t"                                                     \
            "ldrd   r1, r2, [r0, #24]\n\t"                                                \
            "strd   r1, r2, [sp, #16]\n\t"                                                \
            "ldr    r1, [r0, #32]\n\t"                                                    \
            "and    r1, r1, #15\n\t"                                                      \
            "rsb    r1, r1, #16\n\t"                                                      \
            "and    r1, r1, #15\n\t"                                                      \
            "movs   r2, #44\n\t"                                                          \
            "mul    r1, r1, r2\n\t"                                                       \
            "adr    r2, 1f\n\t"                                                           \
            "add    r1, r1, r2\n\t"                                                       \
            "orr    r1, r1, #1\n\t"                                                       \
            "str    r1, [sp, #12]\n\t"                                                    \
            "ldr    r10, [r0, #0]\n\t"                                                    \
            "ldr    r12, [r0, #8]\n\t"                                                    \
            "ldr    lr, [r0, #12]\n"                                                       \
            "0:\n\t"                                                                       \
            "ldr    r0, [r10], #4\n\t"                                                    \
            "mov    r1, r0\n\t"                                                           \
            "mov    r2, r0\n\t"                                                           \
            "mov    r3, r0\n\t"                                                           \
            "ldr    r11, [sp, #0]\n\t"                                                    \
            "ldr    pc, [sp, #12]\n"                                                       \
            "1:\n\t" EB_TFL_GEMM_CHUNK4 EB_TFL_GEMM_CHUNK4 EB_TFL_GEMM_CHUNK4                \
                EB_TFL_GEMM_CHUNK4                                                        \
            "cmp    r11, r12\n\t"                                                         \
            "bne    1b\n\t"                                                               \
            "ldmia  r10!, {r4, r5, r6}\n\t" EB_TFL_REQ("r0") EB_TFL_REQ("r1")                \
                EB_TFL_REQ("r2") EB_TFL_REQ("r3")                                         \
            "bfi    r0, r1, #8, #8\n\t"                                                   \
            "bfi    r0, r2, #16, #8\n\t"                                                  \
            "bfi    r0, r3, #24, #8\n\t" clamp                                            \
            "str    r0, [lr]\n\t"                                                         \
            "ldr    r7, [sp, #4]\n\t"                                                     \
            "add    lr, lr, r7\n\t"                                                       \
            "ldr    r7, [sp, #8]\n\t"                                                     \
            "cmp    r10, r7\n\t"                                                          \
            "bne    0b\n\t"                                                               \
            "add    sp, sp, #32\n\t"                                                      \
            "pop    {r4, r5, r6, r7, r8, r9, r10, r11, pc}\n");                            \
    }
EB_TFL_GEMM_FN(eb_tfl_gemm4, "")
EB_TFL_GEMM_FN(eb_tfl_gemm4_clamp, EB_TFL_CLAMP)
#endif

#if EB_TFL_ASM
/* A partial block's rows from the assembly's 4-byte rows in tmp: count bytes of each of n
 * channels to out (channels hw apart). */
static void eb_tfl_copy_tmp(const int8_t *tmp, int n, int count, int8_t *out, int32_t hw)
{
    int i, j;
    for (i = 0; i < n; ++i, tmp += 4, out += hw) {
        for (j = 0; j < count; ++j) {
            out[j] = tmp[j];
        }
    }
}
#endif

#if EB_TFL_ASM
/* Two channels x 4 pixels (eb_tfl_gemm4's sums for a pair of right-shift channels at once),
 * on records of channel pairs (eb_tfl_expand_pairs): [init0] [init1], per chunk of 4 taps
 * [ch0 (k1, k3)] [ch1 (k1, k3)] [ch0 (k0, k2)] [ch1 (k0, k2)], then [m0 c0 e0 m1 c1 e1],
 * each e word holding the channel's index i above its shift (e | i << 8: ASR by a register
 * reads its low byte alone); channel i's 4 bytes go to out + i * hw. Per
 * chunk 4 weight and 8 column words by pipelined LDRs and 16 SMLAD (28 instructions, 32
 * cycles per 32 MACs); 8 chunks unrolled with a computed entry. r0-r3 channel 0's sums,
 * r4-r7 channel 1's, r8/r9 weight pairs, r10/r12 column words, r11 the records, lr the
 * columns; the rest on the stack. */
typedef struct {
    const int32_t *rec;  /* 0: the first pair's record */
    const int16_t *cols; /* 4 */
    const int16_t *cend; /* 8 */
    uintptr_t out;       /* 12: channel index 0's output (4 bytes; an address) */
    int32_t hw;          /* 16: output channels apart */
    const int32_t *rend; /* 20: the end of the last pair's record */
    uint32_t lo4, hi4;   /* 24, 28 */
    int32_t nchunks;     /* 32: kp / 4 */
    int32_t clamp;       /* 36: nonzero: clamp to [lo4, hi4] */
} eb_tfl_pair_job;

#define EB_TFL_PAIR_CHUNK                      \
    "ldr.w  r8, [r11], #4\n\t"                 \
    "ldr.w  r9, [r11], #4\n\t"                 \
    "ldr.w  r10, [lr, #4]\n\t"                 \
    "ldr.w  r12, [lr, #12]\n\t"                \
    "smlad  r0, r8, r10, r0\n\t"               \
    "smlad  r4, r9, r10, r4\n\t"               \
    "smlad  r1, r8, r12, r1\n\t"               \
    "smlad  r5, r9, r12, r5\n\t"               \
    "ldr.w  r10, [lr, #20]\n\t"                \
    "ldr.w  r12, [lr, #28]\n\t"                \
    "smlad  r2, r8, r10, r2\n\t"               \
    "smlad  r6, r9, r10, r6\n\t"               \
    "smlad  r3, r8, r12, r3\n\t"               \
    "smlad  r7, r9, r12, r7\n\t"               \
    "ldr.w  r8, [r11], #4\n\t"                 \
    "ldr.w  r9, [r11], #4\n\t"                 \
    "ldr.w  r10, [lr, #16]\n\t"                \
    "ldr.w  r12, [lr, #24]\n\t"                \
    "smlad  r2, r8, r10, r2\n\t"               \
    "smlad  r6, r9, r10, r6\n\t"               \
    "smlad  r3, r8, r12, r3\n\t"               \
    "smlad  r7, r9, r12, r7\n\t"               \
    "ldr.w  r12, [lr, #8]\n\t"                 \
    "ldr.w  r10, [lr], #32\n\t"                \
    "smlad  r0, r8, r10, r0\n\t"               \
    "smlad  r4, r9, r10, r4\n\t"               \
    "smlad  r1, r8, r12, r1\n\t"               \
    "smlad  r5, r9, r12, r5\n\t"
#define EB_TFL_PAIR_CHUNK4 EB_TFL_PAIR_CHUNK EB_TFL_PAIR_CHUNK EB_TFL_PAIR_CHUNK EB_TFL_PAIR_CHUNK
/* x = SSAT8(SMMLAR(x, m, c + (x >> 31)) >> e), m, c, e in r8, r9, r10 */
#define EB_TFL_REQ_P(x)                        \
    "add    r12, r9, " x ", asr #31\n\t"       \
    "smmlar " x ", " x ", r8, r12\n\t"         \
    "asr    " x ", " x ", r10\n\t"             \
    "ssat   " x ", #8, " x "\n\t"

static __attribute__((naked, noinline)) void eb_tfl_gemm_pairs(eb_tfl_pair_job *job
                                                               __attribute__((unused)))
{
    __asm__ volatile(
        "push   {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"
        "sub    sp, sp, #40\n\t"
        "ldr    r1, [r0, #4]\n\t"
        "str    r1, [sp, #0]\n\t"    /* cols */
        "ldr    r1, [r0, #16]\n\t"
        "str    r1, [sp, #4]\n\t"    /* hw */
        "ldr    r1, [r0, #20]\n\t"
        "str    r1, [sp, #8]\n\t"    /* rend */
        "ldrd   r1, r2, [r0, #24]\n\t"
        "strd   r1, r2, [sp, #16]\n\t" /* lo4, hi4 */
        "ldr    r1, [r0, #8]\n\t"
        "str    r1, [sp, #24]\n\t"   /* cend */
        "ldr    r1, [r0, #12]\n\t"
        "str    r1, [sp, #28]\n\t"   /* out */
        "ldr    r1, [r0, #36]\n\t"
        "str    r1, [sp, #32]\n\t"   /* clamp */
        "ldr    r1, [r0, #32]\n\t"
        "and    r1, r1, #7\n\t"
        "rsb    r1, r1, #8\n\t"
        "and    r1, r1, #7\n\t"
        "movs   r2, #112\n\t"
        "mul    r1, r1, r2\n\t"
        "adr    r2, 1f\n\t"
        "add    r1, r1, r2\n\t"
        "orr    r1, r1, #1\n\t"
        "str    r1, [sp, #12]\n\t"   /* entry */
        "ldr    r11, [r0, #0]\n"
        "0:\n\t"
        "ldrd   r0, r4, [r11], #8\n\t"
        "mov    r1, r0\n\t"
        "mov    r2, r0\n\t"
        "mov    r3, r0\n\t"
        "mov    r5, r4\n\t"
        "mov    r6, r4\n\t"
        "mov    r7, r4\n\t"
        "ldr    lr, [sp, #0]\n\t"
        "ldr    pc, [sp, #12]\n\t"
        ".p2align 2\n"
        "1:\n\t" EB_TFL_PAIR_CHUNK4 EB_TFL_PAIR_CHUNK4
        "ldr    r8, [sp, #24]\n\t"
        "cmp    lr, r8\n\t"
        "bne    1b\n\t"
        "ldmia  r11!, {r8, r9, r10}\n\t" EB_TFL_REQ_P("r0") EB_TFL_REQ_P("r1")
            EB_TFL_REQ_P("r2") EB_TFL_REQ_P("r3")
        "lsr    lr, r10, #8\n\t"         /* channel 0's index */
        "ldmia  r11!, {r8, r9, r10}\n\t" EB_TFL_REQ_P("r4") EB_TFL_REQ_P("r5")
            EB_TFL_REQ_P("r6") EB_TFL_REQ_P("r7")
        "lsr    r10, r10, #8\n\t"        /* channel 1's */
        "bfi    r0, r1, #8, #8\n\t"
        "bfi    r0, r2, #16, #8\n\t"
        "bfi    r0, r3, #24, #8\n\t"
        "bfi    r4, r5, #8, #8\n\t"
        "bfi    r4, r6, #16, #8\n\t"
        "bfi    r4, r7, #24, #8\n\t"
        "ldr    r1, [sp, #32]\n\t"
        "cbz    r1, 2f\n\t"
        "ldrd   r1, r2, [sp, #16]\n\t"
        "ssub8  r3, r0, r1\n\t"
        "sel    r0, r0, r1\n\t"
        "ssub8  r3, r0, r2\n\t"
        "sel    r0, r2, r0\n\t"
        "ssub8  r3, r4, r1\n\t"
        "sel    r4, r4, r1\n\t"
        "ssub8  r3, r4, r2\n\t"
        "sel    r4, r2, r4\n"
        "2:\n\t"
        "ldr    r1, [sp, #28]\n\t"     /* out */
        "ldr    r3, [sp, #4]\n\t"      /* hw */
        "mla    r2, lr, r3, r1\n\t"
        "str    r0, [r2]\n\t"
        "mla    r2, r10, r3, r1\n\t"
        "str    r4, [r2]\n\t"
        "ldr    r3, [sp, #8]\n\t"
        "cmp    r11, r3\n\t"
        "bne    0b\n\t"
        "add    sp, sp, #40\n\t"
        "pop    {r4, r5, r6, r7, r8, r9, r10, r11, pc}\n");
}

/* One pair record (eb_tfl_gemm_pairs) of the tile's channels a and b (indices, rows of k
 * int8 weights from w; both fast: weights and bias doubled); returns its end. */
static int32_t *eb_tfl_pair_record(const int8_t *w, int32_t k, int32_t kp, const eb_tfl_rq *rq,
                                   int a, int b, int32_t *rec)
{
    uint32_t *wx = (uint32_t *)(void *)(rec + 2);
    const int ch[2] = {a, b};
    int32_t i;
    int h;
    rec[0] = rq[a].init;
    rec[1] = rq[b].init;
    for (i = 0; i < kp; i += 4, wx += 4) {
        for (h = 0; h < 2; ++h) {
            const int8_t *row = w + (int32_t)ch[h] * k;
            const uint32_t wv = i + 4 <= k ? eb_tfl_ld(row + i) : eb_tfl_ld_n(row + i, k - i);
            wx[h] = eb_tfl_halves_x2(eb_tfl_sxtb16_ror8(wv)); /* (k1, k3) */
            wx[2 + h] = eb_tfl_halves_x2(eb_tfl_sxtb16(wv)); /* (k0, k2) */
        }
    }
    rec += 2 + kp;
    for (h = 0; h < 2; ++h) {
        rec[3 * h] = rq[ch[h]].m;
        rec[3 * h + 1] = rq[ch[h]].c;
        rec[3 * h + 2] = rq[ch[h]].e | (ch[h] << 8);
    }
    return rec + 6;
}

/* Pair records of the group's channels from `from` on, until `cap` (even) channels have one
 * or the group's n channels end; returns the next channel and sets *made (even). With
 * `prune`, a channel whose weights are all zero gets no record: its output plane (hw bytes
 * at out + index * hw) is its constant, written here, and the GEMM skips it (TensorFlow's
 * converter leaves pruned and dead channels so: most of a MobileNet's last layers); *spare
 * keeps one such channel, which pairs with the group's last live channel when the live ones
 * are odd (n is even, so then a pruned one exists). */
static EB_TFL_NOINLINE int eb_tfl_expand_pairs(const int8_t *w, int32_t k, int32_t kp,
                                               const eb_tfl_rq *rq, const eb_tfl_act *act,
                                               int from, int n, int cap, int prune, int8_t *out,
                                               int32_t hw, int *spare, int32_t *rec, int *made)
{
    int o, pending = -1;
    *made = 0;
    for (o = from; o < n && *made < cap; ++o) {
        /* rq_of's constant form (m 0, no bias) is a zero row it has scanned already */
        if (prune && ((rq[o].m == 0 && rq[o].init == 0) ||
                      eb_tfl_row_zero(w + (int32_t)o * k, k))) {
            const int32_t v = eb_tfl_rq_fast(rq + o, rq[o].init); /* the sum is the bias */
            memset(out + (int32_t)o * hw, v < act->lo ? act->lo : (v > act->hi ? act->hi : v),
                   (size_t)hw);
            *spare = o;
            continue;
        }
        if (pending < 0) {
            pending = o;
            continue;
        }
        rec = eb_tfl_pair_record(w, k, kp, rq, pending, o, rec);
        pending = -1;
        *made += 2;
    }
    if (pending >= 0) { /* the group's last live channel, an odd one: with a pruned one */
        (void)eb_tfl_pair_record(w, k, kp, rq, pending, *spare, rec);
        *made += 2;
    }
    return o;
}

/* A 4-pixel block's rows on pair records: n (even) channels, 16 at a time through tmp for
 * a partial block. */
static EB_TFL_NOINLINE void eb_tfl_rows_pairs(const eb_tfl_rows *r, const int32_t *rec,
                                              int32_t kp, const int16_t *cols, int n, int count,
                                              int8_t *out)
{
    eb_tfl_pair_job job;
    int o, last;
    job.cols = cols;
    job.cend = cols + 4 * kp;
    job.lo4 = r->act.lo4;
    job.hi4 = r->act.hi4;
    job.nchunks = kp / 4;
    job.clamp = !r->act.full;
    for (o = 0; o < n; o = last) {
        int8_t tmp[4 * 16];
        /* a partial block's records are of consecutive channels (never pruned): from the
         * first one's index (its e word's bits 8..) on, to tmp + (index - first) * 4 */
        const int32_t first = rec[o * (kp / 2 + 4) + 2 + kp + 2] >> 8;
        last = count == 4 ? n : (n - o < 16 ? n : o + 16);
        job.rec = rec + o * (kp / 2 + 4);
        job.rend = rec + last * (kp / 2 + 4);
        job.out = count == 4 ? (uintptr_t)out : (uintptr_t)tmp - 4u * (uint32_t)first;
        job.hw = count == 4 ? r->hw : 4;
        eb_tfl_gemm_pairs(&job);
        if (count < 4) {
            eb_tfl_copy_tmp(tmp, last - o, count, out + first * r->hw, r->hw);
        }
    }
}
#endif

/* A 4-pixel block's rows: runs of right-shift channels by the assembly where there is one
 * (and the project has it, in the clamping form for a narrower range), the others (and
 * partial blocks) in C. */
static EB_TFL_NOINLINE void eb_tfl_rows_rec(const eb_tfl_rows *r, const int32_t *rec, int32_t kp,
                                            const int16_t *cols, int n, int count, int8_t *out)
{
#if EB_TFL_ASM
    const int32_t words = EB_TFL_REC_WORDS(kp);
    int o = 0, run, last;
    if (EB_TFL_HAS_GEMM4 && (EB_TFL_HAS_CLAMP || r->act.full)) {
        eb_tfl_gemm_job job;
        job.cols = cols;
        job.cend = cols + 4 * kp;
        job.lo4 = r->act.lo4;
        job.hi4 = r->act.hi4;
        job.nchunks = kp / 4;
        while (o < n) {
            run = r->all_fast ? n : o;
            for (; run < n && r->rq[run].e > 0 && r->rq[run].e <= 22; ++run) {
            }
            for (; o < run; o = last) { /* 4 pixels: all; fewer: 16 channels */
                int8_t tmp[4 * 16];
                last = count == 4 ? run : (run - o < 16 ? run : o + 16);
                job.rec = rec + o * words;
                job.rend = rec + last * words;
                job.out = count == 4 ? out + (int32_t)o * r->hw : tmp;
                job.hw = count == 4 ? r->hw : 4;
                (EB_TFL_HAS_CLAMP && !r->act.full ? eb_tfl_gemm4_clamp : eb_tfl_gemm4)(&job);
                if (count < 4) {
                    eb_tfl_copy_tmp(tmp, last - o, count, out + (int32_t)o * r->hw, r->hw);
                }
            }
            if (o < n) { /* one other channel in C */
                eb_tfl_rows r1 = *r;
                r1.rq += o;
                r1.mult += o;
                r1.shift += o;
                eb_tfl_rows_x(&r1, rec + o * words, kp, cols, 1, count,
                              out + (int32_t)o * r->hw);
                ++o;
            }
        }
        return;
    }
#endif
    eb_tfl_rows_x(r, rec, kp, cols, n, count, out);
}

/* int8 weights (rows of k bytes, read as words; the last k % 4 from a word ending at the
 * row's end, shifted down, or byte by byte when k < 4); the sums are undoubled: a fast
 * channel's are doubled before the requantization. */
static EB_TFL_NOINLINE void eb_tfl_rows_8(const eb_tfl_rows *r, const int8_t *w, int32_t k,
                                          const int16_t *cols, int n, int count, int8_t *out)
{
    const int32_t full = k & ~(int32_t)3, tail = k & 3;
    int o, j;
    for (o = 0; o < n; ++o, out += r->hw, w += k) {
        const eb_tfl_rq *q = r->rq + o;
        const int16_t *c = cols;
        int32_t a0 = q->init, a1 = a0, a2 = a0, a3 = a0, acc[4];
        int32_t i;
        for (i = 0; i <= k - 4; i += 4, c += 16) {
            const uint32_t wv = eb_tfl_ld(w + i);
            const uint32_t wl = eb_tfl_sxtb16(wv), wh = eb_tfl_sxtb16_ror8(wv);
            a0 = eb_tfl_smlad(wl, eb_tfl_ld(c), eb_tfl_smlad(wh, eb_tfl_ld(c + 2), a0));
            a1 = eb_tfl_smlad(wl, eb_tfl_ld(c + 4), eb_tfl_smlad(wh, eb_tfl_ld(c + 6), a1));
            a2 = eb_tfl_smlad(wl, eb_tfl_ld(c + 8), eb_tfl_smlad(wh, eb_tfl_ld(c + 10), a2));
            a3 = eb_tfl_smlad(wl, eb_tfl_ld(c + 12), eb_tfl_smlad(wh, eb_tfl_ld(c + 14), a3));
        }
        if (tail != 0) {
            const uint32_t wv = k >= 4 ? eb_tfl_ld(w + k - 4) >> (8 * (4 - tail))
                                       : eb_tfl_ld_n(w + full, tail);
            const uint32_t wl = eb_tfl_sxtb16(wv), wh = eb_tfl_sxtb16_ror8(wv);
            a0 = eb_tfl_smlad(wl, eb_tfl_ld(c), eb_tfl_smlad(wh, eb_tfl_ld(c + 2), a0));
            a1 = eb_tfl_smlad(wl, eb_tfl_ld(c + 4), eb_tfl_smlad(wh, eb_tfl_ld(c + 6), a1));
            a2 = eb_tfl_smlad(wl, eb_tfl_ld(c + 8), eb_tfl_smlad(wh, eb_tfl_ld(c + 10), a2));
            a3 = eb_tfl_smlad(wl, eb_tfl_ld(c + 12), eb_tfl_smlad(wh, eb_tfl_ld(c + 14), a3));
        }
        acc[0] = a0;
        acc[1] = a1;
        acc[2] = a2;
        acc[3] = a3;
        if (q->e != EB_TFL_SLOW) {
            for (j = 0; j < 4; ++j) {
                acc[j] = eb_tfl_s32((uint32_t)acc[j] << 1);
            }
        }
        eb_tfl_store(q, &r->act, r->mult[o], r->shift[o], acc, count, out);
    }
}

/* The group's n rows of k int8 weights -> records [init] [kp int16: chunks [w0, w2],
 * [w1, w3], doubled for the fast channels, zero-padded] [m] [c] [e]. */
static EB_TFL_NOINLINE void eb_tfl_expand_weights(const int8_t *w, int32_t k, int32_t kp,
                                                  const eb_tfl_rq *rq, int n, int32_t *rec)
{
    int o;
    for (o = 0; o < n; ++o, w += k) {
        const int dbl = rq[o].e != EB_TFL_SLOW;
        int16_t *wx = (int16_t *)(void *)(rec + 1);
        int32_t i;
        rec[0] = rq[o].init;
        for (i = 0; i < kp; i += 4, wx += 4) {
            const uint32_t wv = i + 4 <= k ? eb_tfl_ld(w + i) : eb_tfl_ld_n(w + i, k - i);
            uint32_t lo = eb_tfl_sxtb16(wv), hi = eb_tfl_sxtb16_ror8(wv);
            if (dbl) { /* each half doubled: |2w| <= 256, no carry into the other half */
                lo = eb_tfl_halves_x2(lo);
                hi = eb_tfl_halves_x2(hi);
            }
            eb_tfl_st(wx, lo);
            eb_tfl_st(wx + 2, hi);
        }
        rec += EB_TFL_REC_WORDS(kp);
        rec[-3] = rq[o].m;
        rec[-2] = rq[o].c;
        rec[-1] = rq[o].e;
    }
}

/* ---- convolution: GEMM path ----------------------------------------------------------------- */

#if EB_TFL_ASM
/* eb_tfl_rows_8 on the M4 for runs of right-shift channels, k a multiple of 4: the int8
 * weight word of each 4 taps loaded (any alignment) and extended in the loop (SXTB16 and
 * SXTB16 ROR 8), against the columns as in eb_tfl_gemm4 (13 instructions per 16 MACs); the
 * sums doubled (LSL) before the same requantization. The eb_tfl_rq table's entries are
 * read through [sp, #28]. */
typedef struct {
    const int8_t *w;     /* 0: the first channel's weights */
    const int16_t *cols; /* 4 */
    const int16_t *cend; /* 8 */
    int8_t *out;         /* 12 */
    int32_t hw;          /* 16 */
    const eb_tfl_rq *rq; /* 20: the first channel's entry */
    const eb_tfl_rq *rq_end; /* 24 */
    uint32_t lo4, hi4;   /* 28, 32 */
    int32_t nchunks;     /* 36 */
} eb_tfl_gemm8_job;

#define EB_TFL_GEMM8_CHUNK                     \
    "ldr    r9, [r10], #4\n\t"                 \
    "sxtb16 r7, r9\n\t"                        \
    "sxtb16 r9, r9, ror #8\n\t"                \
    "ldmia.w r11!, {r4, r5, r6, r8}\n\t"       \
    "smlad  r0, r7, r4, r0\n\t"                \
    "smlad  r0, r9, r5, r0\n\t"                \
    "smlad  r1, r7, r6, r1\n\t"                \
    "smlad  r1, r9, r8, r1\n\t"                \
    "ldmia.w r11!, {r4, r5, r6, r8}\n\t"       \
    "smlad  r2, r7, r4, r2\n\t"                \
    "smlad  r2, r9, r5, r2\n\t"                \
    "smlad  r3, r7, r6, r3\n\t"                \
    "smlad  r3, r9, r8, r3\n\t"
#define EB_TFL_GEMM8_CHUNK4                                                               \
    EB_TFL_GEMM8_CHUNK EB_TFL_GEMM8_CHUNK EB_TFL_GEMM8_CHUNK EB_TFL_GEMM8_CHUNK
/* frame: [0] cols, [4] hw, [8] the rq entry, [12] entry, [16] lo4, [20] hi4, [28] rq_end */
#define EB_TFL_GEMM8_FN(name, clamp)                                               \
    static __attribute__((naked, noinline)) void name(eb_tfl_gemm8_job *job               \
                                                      __attribute__((unused)))            \
    {                                                                                     \
        __asm__ volatile(                                                                 \
            "push   {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                           \
            "sub    sp, sp, #32\n\t"                                                      \
            "ldr    r1, [r0, #4]\n\t"                                                     \
            "str    r1, [sp, #0]\n\t"                                                     \
            "ldrd   r1, r2, [r0, #16]\n\t"                                                \
            "strd   r1, r2, [sp, #4]\n\t"                                                 \
            "ldr    r1, [r0, #24]\n\t"                                                    \
            "str    r1, [sp, #28]\n\t"                                                    \
            "ldrd   r1, r2, [r0, #28]\n\t"                                                \
            "strd   r1, r2, [sp, #16]\n\t"                                                \
            "ldr    r1, [r0, #36]\n\t"                                                    \
            "and    r1, r1, #15\n\t"                                                      \
            "rsb    r1, r1, #16\n\t"                                                      \
            "and    r1, r1, #15\n\t"                                                      \
            "movs   r2, #52\n\t"                                                          \
            "mul    r1, r1, r2\n\t"                                                       \
            "adr    r2, 1f\n\t"                                                           \
            "add    r1, r1, r2\n\t"                                                       \
            "orr    r1, r1, #1\n\t"                                                       \
            "str    r1, [sp, #12]\n\t"                                                    \
            "ldr    r10, [r0, #0]\n\t"                                                    \
            "ldr    r12, [r0, #8]\n\t"                                                    \
            "ldr    lr, [r0, #12]\n"                                                      \
            "0:\n\t"                                                                      \
            "ldr    r7, [sp, #8]\n\t"                                                     \
            "ldr    r0, [r7]\n\t"                                                         \
            "mov    r1, r0\n\t"                                                           \
            "mov    r2, r0\n\t"                                                           \
            "mov    r3, r0\n\t"                                                           \
            "ldr    r11, [sp, #0]\n\t"                                                    \
            "ldr    pc, [sp, #12]\n"                                                      \
            "1:\n\t" EB_TFL_GEMM8_CHUNK4 EB_TFL_GEMM8_CHUNK4 EB_TFL_GEMM8_CHUNK4             \
                EB_TFL_GEMM8_CHUNK4                                                       \
            "cmp    r11, r12\n\t"                                                         \
            "bne    1b\n\t"                                                               \
            "ldr    r7, [sp, #8]\n\t"                                                     \
            "add    r7, r7, #4\n\t"                                                       \
            "ldmia  r7!, {r4, r5, r6}\n\t"                                                \
            "str    r7, [sp, #8]\n\t"                                                     \
            "lsl    r0, r0, #1\n\t"                                                       \
            "lsl    r1, r1, #1\n\t"                                                       \
            "lsl    r2, r2, #1\n\t"                                                       \
            "lsl    r3, r3, #1\n\t" EB_TFL_REQ("r0") EB_TFL_REQ("r1") EB_TFL_REQ("r2")      \
                EB_TFL_REQ("r3")                                                          \
            "bfi    r0, r1, #8, #8\n\t"                                                   \
            "bfi    r0, r2, #16, #8\n\t"                                                  \
            "bfi    r0, r3, #24, #8\n\t" clamp                                            \
            "str    r0, [lr]\n\t"                                                         \
            "ldr    r7, [sp, #4]\n\t"                                                     \
            "add    lr, lr, r7\n\t"                                                       \
            "ldrd   r7, r8, [sp, #8]\n\t"                                                 \
            "ldr    r8, [sp, #28]\n\t"                                                    \
            "cmp    r7, r8\n\t"                                                           \
            "bne    0b\n\t"                                                               \
            "add    sp, sp, #32\n\t"                                                      \
            "pop    {r4, r5, r6, r7, r8, r9, r10, r11, pc}\n");                           \
    }
EB_TFL_GEMM8_FN(eb_tfl_gemm8, "")
EB_TFL_GEMM8_FN(eb_tfl_gemm8_clamp, EB_TFL_CLAMP)

/* eb_tfl_rows_8 through the assembly for runs of right-shift channels (k % 4 == 0). */
static EB_TFL_NOINLINE void eb_tfl_rows_8_asm(const eb_tfl_rows *r, const int8_t *w, int32_t k,
                                              const int16_t *cols, int n, int count, int8_t *out)
{
    eb_tfl_gemm8_job job;
    int o = 0, run, last;
    job.cols = cols;
    job.cend = cols + 4 * k;
    job.lo4 = r->act.lo4;
    job.hi4 = r->act.hi4;
    job.nchunks = k / 4;
    while (o < n) {
        run = r->all_fast ? n : o;
        for (; run < n && r->rq[run].e > 0 && r->rq[run].e <= 22; ++run) {
        }
        for (; o < run; o = last) { /* 4 pixels: all; fewer: 16 channels at a time */
            int8_t tmp[4 * 16];
            last = count == 4 ? run : (run - o < 16 ? run : o + 16);
            job.w = w + (int32_t)o * k;
            job.rq = r->rq + o;
            job.rq_end = r->rq + last;
            job.out = count == 4 ? out + (int32_t)o * r->hw : tmp;
            job.hw = count == 4 ? r->hw : 4;
            (EB_TFL_HAS_CLAMP && !r->act.full ? eb_tfl_gemm8_clamp : eb_tfl_gemm8)(&job);
            if (count < 4) {
                eb_tfl_copy_tmp(tmp, last - o, count, out + (int32_t)o * r->hw, r->hw);
            }
        }
        if (o < n) { /* one other channel in C */
            eb_tfl_rows r1 = *r;
            r1.rq += o;
            r1.mult += o;
            r1.shift += o;
            eb_tfl_rows_8(&r1, w + (int32_t)o * k, k, cols, 1, count, out + (int32_t)o * r->hw);
            ++o;
        }
    }
}
#endif

static void eb_tfl_rows_run(const eb_tfl_rows *r, const eb_tfl_plan *s, const int8_t *w_g,
                            const int16_t *wx, const int16_t *cols, int n, int count, int8_t *out)
{
    if (s->wexp != 0) {
#if EB_TFL_ASM
        if (EB_TFL_HAS_GEMM_PAIRS && r->pairs) {
            eb_tfl_rows_pairs(r, (const int32_t *)(const void *)wx, s->kp, cols, r->records,
                              count, out);
            return;
        }
#endif
        eb_tfl_rows_rec(r, (const int32_t *)(const void *)wx, s->kp, cols, n, count, out);
    } else {
#if EB_TFL_ASM
        if (EB_TFL_HAS_GEMM8 && (EB_TFL_HAS_CLAMP || r->act.full) && (s->k & 3) == 0) {
            eb_tfl_rows_8_asm(r, w_g, s->k, cols, n, count, out);
            return;
        }
#endif
        eb_tfl_rows_8(r, w_g, s->k, cols, n, count, out);
    }
}

static EB_TFL_NOINLINE void eb_tfl_gemm(const eb_tfl_conv_params *p, const eb_tfl_plan *s,
                                        const int8_t *in, const int8_t *w, const int32_t *bias,
                                        const int32_t *mult, const int32_t *shift, int8_t *out,
                                        int16_t *scratch)
{
    const int ipg = p->in_c / p->groups, opg_all = p->out_c / p->groups;
    const int32_t plane = (int32_t)p->in_h * p->in_w, hw = (int32_t)p->out_h * p->out_w;
    eb_tfl_rq *rq = (eb_tfl_rq *)(void *)(scratch + s->at_rq);
    int32_t *off = (int32_t *)(void *)(scratch + s->at_off);
    int16_t *cols = scratch + s->at_cols;
    int16_t *aux = scratch + s->at_aux, *wx = scratch + s->at_wx;
    eb_tfl_rows r;
    int o, g, oy;
    int32_t px;
    for (o = 0; o < p->out_c; ++o) {
        rq[o] = eb_tfl_rq_of(bias != NULL ? bias[o] : 0, mult[o], shift[o],
                             w + (int32_t)o * ipg * p->k_h * p->k_w, ipg * p->k_h * p->k_w,
                             p->out_zp, s->wexp != 0);
    }
    r.act = eb_tfl_act_of(p->out_zp, p->act_min, p->act_max);
    r.hw = hw;
    if (s->path == EB_TFL_GEMM_BAND) {
        eb_tfl_band_offsets(p, s, off);
    } else { /* flat: tap k (an input channel) a plane further */
        for (o = 0; o < s->kp; ++o) {
            off[o] = (int32_t)o * plane;
        }
    }
    for (g = 0; g < p->groups; ++g) {
        const int8_t *in_g = in + (int32_t)g * ipg * plane;
        const eb_tfl_rq *rq_grp = rq + g * opg_all;
        int t0, t1, opg;
#if EB_TFL_ASM
        int group_pairs, spare = -1;
        /* the M4: pair records for a group of fast channels in pairs, tile after tile */
        group_pairs = EB_TFL_HAS_GEMM_PAIRS && s->wexp != 0 && opg_all % 2 == 0 &&
                      s->tile % 2 == 0;
        for (o = 0; o < opg_all && group_pairs; ++o) {
            group_pairs = rq_grp[o].e > 0 && rq_grp[o].e <= 22;
        }
#endif
        r.mult = mult + g * opg_all;
        r.shift = shift + g * opg_all;
        for (t0 = 0; t0 < opg_all; t0 = t1) {
            const int8_t *w_g = w + (int32_t)g * opg_all * s->k;
            int8_t *out_g = out + (int32_t)g * opg_all * hw;
            r.rq = rq_grp;
            r.all_fast = 1;
            r.pairs = 0;
#if EB_TFL_ASM
            if (group_pairs) { /* records indexed from the group's first channel */
                /* pruned channels skipped where no block is partial (the flat loop) */
                t1 = eb_tfl_expand_pairs(w_g, s->k, s->kp, rq_grp, &r.act, t0, opg_all, s->tile,
                                         s->path == EB_TFL_GEMM_FLAT && hw >= 4, out_g, hw,
                                         &spare, (int32_t *)(void *)wx, &r.records);
                r.pairs = 1;
                opg = r.records;
                if (opg == 0) {
                    continue;
                }
            }
#endif
            if (!r.pairs) { /* a tile of channels t0..t1 */
                t1 = opg_all - t0 < s->tile ? opg_all : t0 + s->tile;
                opg = t1 - t0;
                w_g += (int32_t)t0 * s->k;
                out_g += (int32_t)t0 * hw;
                r.rq = rq_grp + t0;
                r.mult = mult + g * opg_all + t0;
                r.shift = shift + g * opg_all + t0;
                r.records = opg;
                for (o = 0; o < opg; ++o) {
                    r.all_fast &= r.rq[o].e > 0 && r.rq[o].e <= 22;
                }
                if (s->wexp != 0) {
                    eb_tfl_expand_weights(w_g, s->k, s->kp, r.rq, opg, (int32_t *)(void *)wx);
                }
            }
            if (s->path == EB_TFL_GEMM_BAND) {
                for (oy = 0; oy < p->out_h; oy += s->band_r) {
                    const int32_t first = (int32_t)oy * p->out_w;
                    const int32_t end = first + s->band_r * p->out_w;
                    const int32_t last = end < hw ? end : hw;
                    int32_t row = 0, col = 0; /* the block's first pixel in the band */
                    eb_tfl_band(p, s, in_g, oy, (int8_t *)aux);
                    for (px = first; px < last; px += 4) {
                        const int count = last - px < 4 ? (int)(last - px) : 4;
                        const int line = count == 4 && col + 4 <= p->out_w;
                        int32_t base[4];
                        int j;
                        for (j = 0; j < 4; ++j) { /* lanes past count: lane 0 again */
                            int32_t lane_row = row, lane_col = col + (j < count ? j : 0);
                            while (lane_col >= p->out_w) {
                                lane_col -= p->out_w;
                                ++lane_row;
                            }
                            base[j] = lane_row * p->stride_h * s->band_w +
                                      lane_col * p->stride_w;
                        }
                        col += 4;
                        while (col >= p->out_w) {
                            col -= p->out_w;
                            ++row;
                        }
                        eb_tfl_cols_band(p, s, (const int8_t *)aux, off, base, line, cols);
                        eb_tfl_rows_run(&r, s, w_g, wx, cols, opg, count, out_g + px);
                    }
                }
                continue;
            }
            for (px = 0; px < hw; px += 4) {
                int count = hw - px < 4 ? (int)(hw - px) : 4;
                if (r.pairs && count < 4 && hw >= 4) { /* the last 4 pixels again, overlapping */
                    px = hw - 4;
                    count = 4;
                }
                eb_tfl_cols_flat(in_g, off, s->k, s->kp, plane, px, p->in_zp, cols);
                eb_tfl_rows_run(&r, s, w_g, wx, cols, opg, count, out_g + px);
            }
        }
    }
}

/* ---- convolution: depthwise path ------------------------------------------------------------ */

#if EB_TFL_ASM
/* The rows of eb_tfl_dw_plane by hand: per 4 inputs LDR, SXTAB16 x2, PKHBT, PKHTB, two STR
 * (any alignment); a row's last 1..3 from the word ending at its end, shifted down. */
typedef struct {
    const int8_t *src;  /* 0: the first input row read */
    int16_t *dst;       /* 4: its first interior int16 in the plane */
    int32_t rows;       /* 8 */
    int32_t full;       /* 12: n & ~3 (bytes) */
    int32_t rest;       /* 16: n & 3 */
    int32_t src_skip;   /* 20: in_w - full */
    int32_t dst_skip;   /* 24: plane row bytes - 2 * full */
    uint32_t nz;        /* 28 */
} eb_tfl_plane_job;

static __attribute__((naked, noinline)) void eb_tfl_plane_rows(eb_tfl_plane_job *job
                                                               __attribute__((unused)))
{
    __asm__ volatile(
        "push   {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"
        "ldmia  r0, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t" /* src dst rows full rest skips nz */
        "rsb    r9, r5, #4\n\t"
        "lsl    r9, r9, #3\n"                            /* r9: 32 - 8 * rest */
        "0:\n\t"
        "add    lr, r1, r4\n\t"                           /* the end of the whole words */
        "cmp    r1, lr\n\t"
        "beq    2f\n"
        "1:\n\t"
        "ldr    r10, [r1], #4\n\t"
        "sxtab16 r11, r8, r10\n\t"
        "sxtab16 r10, r8, r10, ror #8\n\t"
        "pkhbt  r12, r11, r10, lsl #16\n\t"
        "pkhtb  r11, r10, r11, asr #16\n\t"
        "str    r12, [r2], #4\n\t"
        "str    r11, [r2], #4\n\t"
        "cmp    r1, lr\n\t"
        "bne    1b\n"
        "2:\n\t"
        "cmp    r5, #0\n\t"
        "beq    3f\n\t"
        "sub    r10, r1, #4\n\t"
        "ldr    r10, [r10, r5]\n\t"                       /* the word ending at the row's end */
        "lsr    r10, r10, r9\n\t"
        "sxtab16 r11, r8, r10\n\t"
        "strh   r11, [r2]\n\t"
        "cmp    r5, #2\n\t"
        "blt    3f\n\t"
        "sxtab16 r10, r8, r10, ror #8\n\t"
        "strh   r10, [r2, #2]\n\t"
        "beq    3f\n\t"
        "lsr    r11, r11, #16\n\t"
        "strh   r11, [r2, #4]\n"
        "3:\n\t"
        "add    r1, r1, r6\n\t"
        "add    r2, r2, r7\n\t"
        "subs   r3, r3, #1\n\t"
        "bne    0b\n\t"
        "pop    {r4, r5, r6, r7, r8, r9, r10, r11, pc}\n");
}
#endif

/* Input channel `src` into the padded int16 plane (x - zp), whose padding is already 0: only
 * the input rows and columns the taps read are written (eb_tfl_dw zeroes the plane once).
 * `behind`: the input's bytes before src (a row's last 1..3 values come from the word ending
 * at its end wherever that word is inside the input). */
static EB_TFL_NOINLINE void eb_tfl_dw_plane(const eb_tfl_conv_params *p, const eb_tfl_plan *s,
                                            const int8_t *src, int32_t behind, int16_t *plane)
{
    const int32_t zp = p->in_zp, in_w = p->in_w, dw_w = s->dw_w;
    const uint32_t nz = eb_tfl_negzp(zp);
    const int32_t pl = p->pad_left < dw_w ? p->pad_left : dw_w;
    const int32_t room = dw_w - pl;
    const int32_t n = in_w < room ? in_w : room; /* input columns that are read */
    const int32_t full = n & ~(int32_t)3, rest = n - full;
    const int32_t rows = s->dw_h - p->pad_top < p->in_h ? s->dw_h - p->pad_top : p->in_h;
    int16_t *d = plane + (int32_t)p->pad_top * dw_w + pl;
    int32_t iy;
#if EB_TFL_ASM
    if (rows > 0 && (full > 0 || n >= 4)) {
        eb_tfl_plane_job job;
        job.src = src;
        job.dst = d;
        job.rows = rows;
        job.full = full;
        job.rest = rest;
        job.src_skip = in_w - full;
        job.dst_skip = (dw_w - full) * (int32_t)sizeof *d;
        job.nz = nz;
        eb_tfl_plane_rows(&job);
        return;
    }
#endif
    for (iy = 0; iy < rows; ++iy, d += dw_w, src += in_w) {
        int32_t i;
        for (i = 0; i < full; i += 4) {
            const uint32_t v = eb_tfl_ld(src + i);
            const uint32_t a = eb_tfl_sxtab16(nz, v), b = eb_tfl_sxtab16_ror8(nz, v);
            eb_tfl_st(d + i, eb_tfl_pack_lo(a, b));
            eb_tfl_st(d + i + 2, eb_tfl_pack_hi(a, b));
        }
        if (rest > 0) { /* the last 1..3: one word ending at the row's end (or byte loads) */
            const uint32_t v = n >= 4 || behind + iy * in_w + n >= 4
                                   ? eb_tfl_ld(src + n - 4) >> (8 * (4 - rest))
                                   : eb_tfl_ld_n(src + full, rest);
            const uint32_t a = eb_tfl_sxtab16(nz, v);
            d[full] = (int16_t)a;
            if (rest > 1) {
                d[full + 1] = (int16_t)eb_tfl_sxtab16_ror8(nz, v);
                if (rest > 2) {
                    d[full + 2] = (int16_t)(a >> 16);
                }
            }
        }
    }
}

/* 3x3, stride 1, dilation 1: per tap row the pairs [w0, w1] and [w2, w1]; 4 pixels from the
 * pairs x01, x23, x45 of each input row. */
#if EB_TFL_ASM
/* Depthwise 3x3 channels of right-shift requantization on the M4, by hand: the job below
 * copied to the stack frame ([sp, #offset] = the field; [sp, #92] the row's block end of
 * stride 2), then per channel (the rows kernels: a batch of channels in one call, each
 * record's weights and constants copied into the frame) per output row, blocks of 4
 * pixels:
 *  - stride 1: per tap row one LDM of x0..x5 (int16 pairs x01, x23, x45) and LDRD of the
 *    row's weight pairs [w0, w1], [w2, w1]; SMLAD x01.W01 and SMLABB x23.W21 (pixel 0),
 *    SMLATB x01.W01 and SMLADX x23.W21 (pixel 1), the same from x23, x45 (pixels 2, 3): 8
 *    MAC instructions per 12 MACs; a row's last 1 or 2 pixels as a 2-pixel block;
 *  - stride 2: per tap row one LDM of x0..x9 and SMLAD x(2j, 2j+1).W01, SMLABB x(2j+2).W2;
 * then as the GEMM: ADD, SMMLAR, ASR, SSAT per pixel, BFI, (SSUB8/SEL), STR. A last partial
 * block stores its first `tail` bytes. r0-r3 sums, r4-r8 inputs and weights, r9 the block's
 * first input row, r10 the plane's row bytes, r11 the next rows, r12 the output, lr the
 * row's block end (stride 1) or the weight pairs (stride 2). */
typedef struct {
    const int16_t *row;  /* 0: the plane row of output row 0's first taps; advanced */
    int32_t stride;      /* 4: plane row bytes */
    int8_t *out;         /* 8: output row 0 */
    int32_t out_skip;    /* 12: output bytes from a row's last full block to the next row */
    int32_t rows;        /* 16: output rows left */
    int32_t blk_bytes;   /* 20: full blocks x the input bytes a block advances */
    int32_t tail;        /* 24: out_w % 4 */
    int32_t in_skip;     /* 28: plane bytes from a row's last full block to the next row */
    uint32_t w[6];       /* 32: tap rows 0, 1, 2: [w0, w1], [w2, w1] (s1); [w0, w1], [w2, 0] (s2) */
    int32_t init, m, c, e; /* 56, 60, 64, 68 */
    uint32_t lo4, hi4;   /* 72, 76 */
    const int32_t *chan; /* 80: the rows kernels: per channel a record (EB_TFL_DW_REC words:
                          * w[6], init, m, c, e, its plane's `row`, its `out`); advanced */
    int32_t nchan;       /* 84: records; counted down */
    int32_t rows0;       /* 88: output rows per channel */
} eb_tfl_dw_job;

#define EB_TFL_DW_PROLOGUE                                                                \
    "push   {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                                   \
    "sub    sp, sp, #96\n\t"                                                              \
    "mov    r9, sp\n\t"                                                                   \
    "ldmia  r0!, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                                    \
    "stmia  r9!, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                                    \
    "ldmia  r0!, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                                    \
    "stmia  r9!, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                                    \
    "ldmia  r0!, {r1, r2, r3, r4, r5, r6, r7}\n\t"                                        \
    "stmia  r9!, {r1, r2, r3, r4, r5, r6, r7}\n\t"                                        \
    "ldr    r10, [sp, #4]\n"
#define EB_TFL_DW_EPILOGUE                                                                \
    "add    sp, sp, #96\n\t"                                                              \
    "pop    {r4, r5, r6, r7, r8, r9, r10, r11, pc}\n"
/* the rows kernels: the next channel's record into the frame (weights, constants), r9 its
 * plane row, r12 its output, its rows */
#define EB_TFL_DW_CHANNEL                                                                 \
    "ldr    r0, [sp, #80]\n\t"                                                            \
    "ldmia  r0!, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                                    \
    "add    r9, sp, #32\n\t"                                                              \
    "stmia  r9, {r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                                     \
    "ldmia  r0!, {r1, r2, r9, r12}\n\t"                                                   \
    "strd   r1, r2, [sp, #64]\n\t"                                                        \
    "str    r0, [sp, #80]\n\t"                                                            \
    "ldr    r7, [sp, #88]\n\t"                                                            \
    "str    r7, [sp, #16]\n"
/* after a channel's rows: the next record while any is left */
#define EB_TFL_DW_NEXT_CHANNEL                                                            \
    "ldr    r7, [sp, #84]\n\t"                                                            \
    "subs   r7, r7, #1\n\t"                                                               \
    "str    r7, [sp, #84]\n\t"                                                            \
    "bne    5b\n\t"
/* after a row (r9, r12 past its full blocks): the next input and output rows; loop while
 * rows are left */
#define EB_TFL_DW_NEXT_ROW                                                                \
    "ldr    r7, [sp, #28]\n\t"                                                            \
    "add    r9, r9, r7\n\t"                                                               \
    "ldr    r7, [sp, #12]\n\t"                                                            \
    "add    r12, r12, r7\n\t"                                                             \
    "ldr    r7, [sp, #16]\n\t"                                                            \
    "subs   r7, r7, #1\n\t"                                                               \
    "str    r7, [sp, #16]\n\t"                                                            \
    "bne    0b\n\t"
/* the requantization of r0..r3 (or r0, r1) and their packing into r0 */
#define EB_TFL_DW_REQ4                                                                    \
    "ldrd   r4, r5, [sp, #60]\n\t"                                                        \
    "ldr    r6, [sp, #68]\n\t" EB_TFL_REQ("r0") EB_TFL_REQ("r1") EB_TFL_REQ("r2")           \
        EB_TFL_REQ("r3")                                                                  \
    "bfi    r0, r1, #8, #8\n\t"                                                           \
    "bfi    r0, r2, #16, #8\n\t"                                                          \
    "bfi    r0, r3, #24, #8\n\t"
#define EB_TFL_DW_REQ2                                                                    \
    "ldrd   r4, r5, [sp, #60]\n\t"                                                        \
    "ldr    r6, [sp, #68]\n\t" EB_TFL_REQ("r0") EB_TFL_REQ("r1")                            \
    "bfi    r0, r1, #8, #8\n\t"
#define EB_TFL_DW_CLAMP                                                                   \
    "ldrd   r7, r8, [sp, #72]\n\t"                                                        \
    "ssub8  r11, r0, r7\n\t"                                                              \
    "sel    r0, r0, r7\n\t"                                                               \
    "ssub8  r11, r0, r8\n\t"                                                              \
    "sel    r0, r8, r0\n\t"
/* the first `tail` (1..3) bytes of r0 to r12 */
#define EB_TFL_DW_STORE_TAIL                                                              \
    "ldr    r7, [sp, #24]\n\t"                                                            \
    "strb   r0, [r12]\n\t"                                                                \
    "cmp    r7, #2\n\t"                                                                   \
    "blt    6f\n\t"                                                                       \
    "lsr    r0, r0, #8\n\t"                                                               \
    "strb   r0, [r12, #1]\n\t"                                                            \
    "beq    6f\n\t"                                                                       \
    "lsr    r0, r0, #8\n\t"                                                               \
    "strb   r0, [r12, #2]\n"                                                              \
    "6:\n\t"

/* stride 1: one tap row (input row at `a`, weight pairs at [sp, #woff]) for 4 pixels */
#define EB_TFL_DW1_ROW(a, woff)                                                           \
    "ldmia  " a ", {r4, r5, r6}\n\t"                                                      \
    "ldrd   r7, r8, [sp, #" woff "]\n\t"                                                  \
    "smlad  r0, r4, r7, r0\n\t"                                                           \
    "smlatb r1, r4, r7, r1\n\t"                                                           \
    "smlad  r2, r5, r7, r2\n\t"                                                           \
    "smlatb r3, r5, r7, r3\n\t"                                                           \
    "smlabb r0, r5, r8, r0\n\t"                                                           \
    "smladx r1, r5, r8, r1\n\t"                                                           \
    "smlabb r2, r6, r8, r2\n\t"                                                           \
    "smladx r3, r6, r8, r3\n\t"
#define EB_TFL_DW1_BLOCK4                                                                 \
    "ldr    r3, [sp, #56]\n\t"                                                            \
    "ldmia  r9, {r4, r5, r6}\n\t"                                                         \
    "ldrd   r7, r8, [sp, #32]\n\t"                                                        \
    "smlad  r0, r4, r7, r3\n\t"                                                           \
    "smlatb r1, r4, r7, r3\n\t"                                                           \
    "smlad  r2, r5, r7, r3\n\t"                                                           \
    "smlatb r3, r5, r7, r3\n\t"                                                           \
    "smlabb r0, r5, r8, r0\n\t"                                                           \
    "smladx r1, r5, r8, r1\n\t"                                                           \
    "smlabb r2, r6, r8, r2\n\t"                                                           \
    "smladx r3, r6, r8, r3\n\t"                                                           \
    "add    r11, r9, r10\n\t" EB_TFL_DW1_ROW("r11", "40")                                   \
    "add    r11, r11, r10\n\t" EB_TFL_DW1_ROW("r11", "48") EB_TFL_DW_REQ4
/* stride 1, 2 pixels: x01, x23 per tap row */
#define EB_TFL_DW1_ROW2(a, woff)                                                          \
    "ldrd   r4, r5, [" a "]\n\t"                                                          \
    "ldrd   r7, r8, [sp, #" woff "]\n\t"                                                  \
    "smlad  r0, r4, r7, r0\n\t"                                                           \
    "smlatb r1, r4, r7, r1\n\t"                                                           \
    "smlabb r0, r5, r8, r0\n\t"                                                           \
    "smladx r1, r5, r8, r1\n\t"
#define EB_TFL_DW1_BLOCK2                                                                 \
    "ldr    r1, [sp, #56]\n\t"                                                            \
    "ldrd   r4, r5, [r9]\n\t"                                                             \
    "ldrd   r7, r8, [sp, #32]\n\t"                                                        \
    "smlad  r0, r4, r7, r1\n\t"                                                           \
    "smlatb r1, r4, r7, r1\n\t"                                                           \
    "smlabb r0, r5, r8, r0\n\t"                                                           \
    "smladx r1, r5, r8, r1\n\t"                                                           \
    "add    r11, r9, r10\n\t" EB_TFL_DW1_ROW2("r11", "40")                                  \
    "add    r11, r11, r10\n\t" EB_TFL_DW1_ROW2("r11", "48") EB_TFL_DW_REQ2

#define EB_TFL_DW1_FN(name, clamp)                                                        \
    static __attribute__((naked, noinline)) void name(eb_tfl_dw_job *job                  \
                                                      __attribute__((unused)))            \
    {                                                                                     \
        __asm__ volatile(EB_TFL_DW_PROLOGUE                                               \
                         "5:\n\t" EB_TFL_DW_CHANNEL                                        \
                         "0:\n\t"                                                         \
                         "ldr    lr, [sp, #20]\n\t"                                       \
                         "add    lr, lr, r9\n\t"                                          \
                         "cmp    r9, lr\n\t"                                              \
                         "beq    2f\n"                                                    \
                         "1:\n\t" EB_TFL_DW1_BLOCK4 clamp                                 \
                         "str    r0, [r12], #4\n\t"                                       \
                         "add    r9, r9, #8\n\t"                                          \
                         "cmp    r9, lr\n\t"                                              \
                         "bne    1b\n"                                                    \
                         "2:\n\t"                                                         \
                         "ldr    r7, [sp, #24]\n\t"                                       \
                         "cmp    r7, #0\n\t"                                              \
                         "beq    4f\n\t"                                                  \
                         "cmp    r7, #3\n\t"                                              \
                         "beq    3f\n\t" EB_TFL_DW1_BLOCK2 clamp EB_TFL_DW_STORE_TAIL     \
                         "b      4f\n"                                                    \
                         "3:\n\t" EB_TFL_DW1_BLOCK4 clamp EB_TFL_DW_STORE_TAIL            \
                         "4:\n\t" EB_TFL_DW_NEXT_ROW EB_TFL_DW_NEXT_CHANNEL               \
                             EB_TFL_DW_EPILOGUE);                                         \
    }
EB_TFL_DW1_FN(eb_tfl_dw3_s1, "")
EB_TFL_DW1_FN(eb_tfl_dw3_s1_clamp, EB_TFL_DW_CLAMP)

/* stride 2: one tap row for 4 pixels: x0..x9 in r4-r8 (LDM), the weight pairs in lr */
#define EB_TFL_DW2_ROW(a, woff, woff2, first)                                             \
    "ldmia  " a ", {r4, r5, r6, r7, r8}\n\t"                                              \
    "ldr    lr, [sp, #" woff "]\n\t" first                                                \
    "ldr    lr, [sp, #" woff2 "]\n\t"                                                     \
    "smlabb r0, r5, lr, r0\n\t"                                                           \
    "smlabb r1, r6, lr, r1\n\t"                                                           \
    "smlabb r2, r7, lr, r2\n\t"                                                           \
    "smlabb r3, r8, lr, r3\n\t"
#define EB_TFL_DW2_MAC_FIRST                                                              \
    "smlad  r0, r4, lr, r3\n\t"                                                           \
    "smlad  r1, r5, lr, r3\n\t"                                                           \
    "smlad  r2, r6, lr, r3\n\t"                                                           \
    "smlad  r3, r7, lr, r3\n\t"
#define EB_TFL_DW2_MAC                                                                    \
    "smlad  r0, r4, lr, r0\n\t"                                                           \
    "smlad  r1, r5, lr, r1\n\t"                                                           \
    "smlad  r2, r6, lr, r2\n\t"                                                           \
    "smlad  r3, r7, lr, r3\n\t"
#define EB_TFL_DW2_BLOCK4                                                                 \
    "ldr    r3, [sp, #56]\n\t" EB_TFL_DW2_ROW("r9", "32", "36", EB_TFL_DW2_MAC_FIRST)       \
    "add    r11, r9, r10\n\t" EB_TFL_DW2_ROW("r11", "40", "44", EB_TFL_DW2_MAC)             \
    "add    r11, r11, r10\n\t" EB_TFL_DW2_ROW("r11", "48", "52", EB_TFL_DW2_MAC)            \
        EB_TFL_DW_REQ4

#define EB_TFL_DW2_FN(name, clamp)                                                        \
    static __attribute__((naked, noinline)) void name(eb_tfl_dw_job *job                  \
                                                      __attribute__((unused)))            \
    {                                                                                     \
        __asm__ volatile(EB_TFL_DW_PROLOGUE                                               \
                         "5:\n\t" EB_TFL_DW_CHANNEL                                        \
                         "0:\n\t"                                                         \
                         "ldr    r7, [sp, #20]\n\t"                                       \
                         "add    r7, r7, r9\n\t"                                          \
                         "str    r7, [sp, #92]\n\t"                                       \
                         "cmp    r9, r7\n\t"                                              \
                         "beq    2f\n"                                                    \
                         "1:\n\t" EB_TFL_DW2_BLOCK4 clamp                                 \
                         "str    r0, [r12], #4\n\t"                                       \
                         "add    r9, r9, #16\n\t"                                         \
                         "ldr    r7, [sp, #92]\n\t"                                       \
                         "cmp    r9, r7\n\t"                                              \
                         "bne    1b\n"                                                    \
                         "2:\n\t"                                                         \
                         "ldr    r7, [sp, #24]\n\t"                                       \
                         "cmp    r7, #0\n\t"                                              \
                         "beq    4f\n\t" EB_TFL_DW2_BLOCK4 clamp EB_TFL_DW_STORE_TAIL     \
                         "4:\n\t" EB_TFL_DW_NEXT_ROW EB_TFL_DW_NEXT_CHANNEL               \
                             EB_TFL_DW_EPILOGUE);                                         \
    }
EB_TFL_DW2_FN(eb_tfl_dw3_s2, "")
EB_TFL_DW2_FN(eb_tfl_dw3_s2_clamp, EB_TFL_DW_CLAMP)

/* Stride 1, one output column (a row's last one when out_w % 4 == 1) by blocks of 4 output
 * rows: each of the 6 input rows' [x_c, x_c+1] and x_c+2 (two LDR, any alignment) feed the
 * up to 3 pixels whose windows hold it (SMLAD with [w0, w1], SMLABB with [w2, w1] of the tap
 * row): 24 MAC instructions per 36 MACs, the weights in r6-r9, r11, lr. The job as above but
 * `row` the column's first input row, `out` its first output, `rows` unused, `blk_bytes` the
 * blocks of 4 rows, `tail` the rows of a last partial block (out_h % 4). */
#define EB_TFL_STRIP_LOAD(adv)                 \
    "ldr    r4, [r12]\n\t"                     \
    "ldr    r5, [r12, #4]\n\t" adv
#define EB_TFL_STRIP_ADV "add    r12, r12, r10\n\t"
#define EB_TFL_STRIP_MAC(lane, w01, w21, from) \
    "smlad  " lane ", r4, " w01 ", " from "\n\t" \
    "smlabb " lane ", r5, " w21 ", " lane "\n\t"
#define EB_TFL_STRIP_BLOCK                                                                \
    "add    r4, sp, #32\n\t"                                                              \
    "ldmia  r4, {r6, r7, r8, r9, r11, lr}\n\t"                                            \
    "ldr    r3, [sp, #56]\n\t" EB_TFL_STRIP_LOAD(EB_TFL_STRIP_ADV)                          \
        EB_TFL_STRIP_MAC("r0", "r6", "r7", "r3") EB_TFL_STRIP_LOAD(EB_TFL_STRIP_ADV)        \
            EB_TFL_STRIP_MAC("r1", "r6", "r7", "r3") EB_TFL_STRIP_MAC("r0", "r8", "r9", "r0") \
                EB_TFL_STRIP_LOAD(EB_TFL_STRIP_ADV) EB_TFL_STRIP_MAC("r2", "r6", "r7", "r3")  \
                    EB_TFL_STRIP_MAC("r1", "r8", "r9", "r1")                               \
                        EB_TFL_STRIP_MAC("r0", "r11", "lr", "r0")                          \
                            EB_TFL_STRIP_LOAD(EB_TFL_STRIP_ADV)                            \
                                EB_TFL_STRIP_MAC("r2", "r8", "r9", "r2")                   \
                                    EB_TFL_STRIP_MAC("r1", "r11", "lr", "r1")              \
                                        EB_TFL_STRIP_MAC("r3", "r6", "r7", "r3")           \
                                            EB_TFL_STRIP_LOAD(EB_TFL_STRIP_ADV)            \
                                                EB_TFL_STRIP_MAC("r3", "r8", "r9", "r3")   \
                                                    EB_TFL_STRIP_MAC("r2", "r11", "lr",    \
                                                                     "r2")                 \
                                                        EB_TFL_STRIP_LOAD("")              \
                                                            EB_TFL_STRIP_MAC("r3", "r11",  \
                                                                             "lr", "r3")   \
    "sub    r12, r12, r10\n\t" EB_TFL_DW_REQ4
/* the packed r0 (lanes 0..3) to the column: r7 the output, r8 out_w; `n` lanes */
#define EB_TFL_STRIP_STORE4                                                               \
    "ldrd   r7, r8, [sp, #8]\n\t"                                                         \
    "strb   r0, [r7]\n\t"                                                                 \
    "lsr    r0, r0, #8\n\t"                                                               \
    "strb   r0, [r7, r8]\n\t"                                                             \
    "add    r7, r7, r8, lsl #1\n\t"                                                       \
    "lsr    r0, r0, #8\n\t"                                                               \
    "strb   r0, [r7]\n\t"                                                                 \
    "lsr    r0, r0, #8\n\t"                                                               \
    "strb   r0, [r7, r8]\n\t"                                                             \
    "add    r7, r7, r8, lsl #1\n\t"                                                       \
    "str    r7, [sp, #8]\n\t"
#define EB_TFL_STRIP_STORE_TAIL                                                           \
    "ldrd   r7, r8, [sp, #8]\n\t"                                                         \
    "ldr    r9, [sp, #24]\n\t"                                                            \
    "strb   r0, [r7]\n\t"                                                                 \
    "cmp    r9, #2\n\t"                                                                   \
    "blt    6f\n\t"                                                                       \
    "lsr    r0, r0, #8\n\t"                                                               \
    "strb   r0, [r7, r8]\n\t"                                                             \
    "beq    6f\n\t"                                                                       \
    "add    r7, r7, r8, lsl #1\n\t"                                                       \
    "lsr    r0, r0, #8\n\t"                                                               \
    "strb   r0, [r7]\n"                                                                   \
    "6:\n\t"

#define EB_TFL_STRIP_FN(name, clamp)                                                      \
    static __attribute__((naked, noinline)) void name(eb_tfl_dw_job *job                  \
                                                      __attribute__((unused)))            \
    {                                                                                     \
        __asm__ volatile(EB_TFL_DW_PROLOGUE                                               \
                         "ldr    r12, [sp, #0]\n\t"                                       \
                         "ldr    r7, [sp, #20]\n\t"                                       \
                         "cmp    r7, #0\n\t"                                              \
                         "beq    2f\n"                                                    \
                         "1:\n\t" EB_TFL_STRIP_BLOCK clamp EB_TFL_STRIP_STORE4            \
                         "ldr    r7, [sp, #20]\n\t"                                       \
                         "subs   r7, r7, #1\n\t"                                          \
                         "str    r7, [sp, #20]\n\t"                                       \
                         "bne    1b\n"                                                    \
                         "2:\n\t"                                                         \
                         "ldr    r7, [sp, #24]\n\t"                                       \
                         "cmp    r7, #0\n\t"                                              \
                         "beq    4f\n\t" EB_TFL_STRIP_BLOCK clamp EB_TFL_STRIP_STORE_TAIL \
                         "4:\n\t" EB_TFL_DW_EPILOGUE);                                    \
    }
EB_TFL_STRIP_FN(eb_tfl_dw3_strip, "")
EB_TFL_STRIP_FN(eb_tfl_dw3_strip_clamp, EB_TFL_DW_CLAMP)

#endif

#if EB_TFL_ASM
/* A channel's record for the rows kernels: its weight pairs (doubled), requantization,
 * plane (the first tap row of output row 0) and output. */
static void eb_tfl_dw_record(int32_t *rec, const int8_t *w, const eb_tfl_rq *q, int st,
                             const int16_t *row, int8_t *out)
{
    int ky;
    for (ky = 0; ky < 3; ++ky) {
        rec[2 * ky] = (int32_t)eb_tfl_pair(2 * w[3 * ky], 2 * w[3 * ky + 1]);
        rec[2 * ky + 1] = (int32_t)(st == 1 ? eb_tfl_pair(2 * w[3 * ky + 2], 2 * w[3 * ky + 1])
                                            : eb_tfl_pair(2 * w[3 * ky + 2], 0));
    }
    rec[6] = q->init;
    rec[7] = q->m;
    rec[8] = q->c;
    rec[9] = q->e;
    rec[10] = (int32_t)(uintptr_t)row;
    rec[11] = (int32_t)(uintptr_t)out;
}

/* The rows kernels' job for a layer's 3x3 channels of stride `st` (1 or 2): the geometry
 * (with `column`, a stride-1 row's last column, out_w % 4 == 1, left to the strip kernel;
 * else the rows kernel's tail of 1..3 pixels); the channels come as records. */
static void eb_tfl_dw_rows_job(const eb_tfl_conv_params *p, const eb_tfl_plan *s,
                               const eb_tfl_act *act, int st, int column, eb_tfl_dw_job *job)
{
    memset(job, 0, sizeof *job);
    job->stride = s->dw_w * (int32_t)sizeof(int16_t);
    job->out_skip = p->out_w - 4 * (p->out_w / 4);
    job->blk_bytes = (int32_t)(p->out_w / 4) * 8 * st;
    job->tail = column ? 0 : p->out_w % 4;
    job->in_skip = job->stride * st - job->blk_bytes;
    job->lo4 = act->lo4;
    job->hi4 = act->hi4;
    job->rows0 = p->out_h;
}

/* Stride 1, out_w % 4 == 1: the channel's last column by blocks of 4 rows (its record's
 * plane and output). */
static void eb_tfl_dw3_column(const eb_tfl_conv_params *p, const eb_tfl_plan *s,
                              const int32_t *rec, const eb_tfl_act *act)
{
    eb_tfl_dw_job job;
    memcpy(job.w, rec, sizeof job.w);
    job.init = rec[6];
    job.m = rec[7];
    job.c = rec[8];
    job.e = rec[9];
    job.row = (const int16_t *)(uintptr_t)(uint32_t)rec[10] + p->out_w - 1;
    job.out = (int8_t *)(uintptr_t)(uint32_t)rec[11] + p->out_w - 1;
    job.stride = s->dw_w * (int32_t)sizeof(int16_t);
    job.out_skip = p->out_w;
    job.blk_bytes = p->out_h / 4;
    job.tail = p->out_h % 4;
    job.lo4 = act->lo4;
    job.hi4 = act->hi4;
    job.rows = 0; /* unused by the strip kernel; every field defined (the frame copies all) */
    job.in_skip = 0;
    job.chan = NULL;
    job.nchan = 0;
    job.rows0 = 0;
    (EB_TFL_HAS_CLAMP && !act->full ? eb_tfl_dw3_strip_clamp : eb_tfl_dw3_strip)(&job);
}

/* The stride (1 or 2) of a 3x3 layer the rows kernels take, else 0: dilation 1, the same
 * stride along both axes, its kernel and (for a range narrower than int8) its clamping form
 * in the project. */
static int eb_tfl_dw3_stride(const eb_tfl_conv_params *p, const eb_tfl_act *act)
{
    const int st = p->stride_h;
    if (p->k_h != 3 || p->k_w != 3 || p->dil_h != 1 || p->dil_w != 1 || p->stride_w != st ||
        (!EB_TFL_HAS_CLAMP && !act->full)) {
        return 0;
    }
    return (st == 1 && EB_TFL_HAS_DW3_S1) || (st == 2 && EB_TFL_HAS_DW3_S2) ? st : 0;
}

/* The rows of n channels' records by one call (stride st). */
static void eb_tfl_dw3_rows(eb_tfl_dw_job *job, const eb_tfl_act *act, int st,
                            const int32_t *rec, int n)
{
    job->chan = rec;
    job->nchan = n;
    if (EB_TFL_HAS_DW3_S2 && st == 2) {
        (EB_TFL_HAS_CLAMP && !act->full ? eb_tfl_dw3_s2_clamp : eb_tfl_dw3_s2)(job);
    } else if (EB_TFL_HAS_DW3_S1 && st == 1) {
        (EB_TFL_HAS_CLAMP && !act->full ? eb_tfl_dw3_s1_clamp : eb_tfl_dw3_s1)(job);
    }
}
#endif

/* 3x3, stride 1, dilation 1: per tap row the pairs [w0, w1] and [w2, w1]; 4 pixels from the
 * pairs x01, x23, x45 of each input row. */
static EB_TFL_NOINLINE void eb_tfl_dw3x3(const eb_tfl_conv_params *p, const eb_tfl_plan *s,
                                         const int16_t *plane, const int8_t *w, const eb_tfl_rq *q,
                                         const eb_tfl_act *act, int32_t m, int32_t shift,
                                         int8_t *out)
{
    const int f = q->e != EB_TFL_SLOW ? 2 : 1;
    uint32_t w01[3], w21[3];
    int oy, ox, ky;
    for (ky = 0; ky < 3; ++ky) {
        w01[ky] = eb_tfl_pair(f * w[3 * ky], f * w[3 * ky + 1]);
        w21[ky] = eb_tfl_pair(f * w[3 * ky + 2], f * w[3 * ky + 1]);
    }
    for (oy = 0; oy < p->out_h; ++oy, out += p->out_w) {
        const int16_t *row = plane + (int32_t)oy * s->dw_w;
        for (ox = 0; ox < p->out_w; ox += 4) {
            int32_t a0 = q->init, a1 = a0, a2 = a0, a3 = a0, acc[4];
            const int16_t *x = row + ox;
            for (ky = 0; ky < 3; ++ky, x += s->dw_w) {
                const uint32_t x01 = eb_tfl_ld(x), x23 = eb_tfl_ld(x + 2), x45 = eb_tfl_ld(x + 4);
                a0 = eb_tfl_smlabb(x23, w21[ky], eb_tfl_smlad(x01, w01[ky], a0));
                a1 = eb_tfl_smladx(x23, w21[ky], eb_tfl_smlatb(x01, w01[ky], a1));
                a2 = eb_tfl_smlabb(x45, w21[ky], eb_tfl_smlad(x23, w01[ky], a2));
                a3 = eb_tfl_smladx(x45, w21[ky], eb_tfl_smlatb(x23, w01[ky], a3));
            }
            acc[0] = a0;
            acc[1] = a1;
            acc[2] = a2;
            acc[3] = a3;
            eb_tfl_store(q, act, m, shift, acc, p->out_w - ox < 4 ? p->out_w - ox : 4,
                         out + ox);
        }
    }
}

/* Any kernel: a table of (offset in the plane, weight pair) taps: pairs of neighbouring taps
 * [w_kx, w_kx+1] (dilation 1; a last odd tap paired with 0) or single taps [w, 0]. */
static EB_TFL_NOINLINE void eb_tfl_dw_any(const eb_tfl_conv_params *p, const eb_tfl_plan *s,
                                          const int16_t *plane, const int8_t *w, const eb_tfl_rq *q,
                                          const eb_tfl_act *act, int32_t m, int32_t shift,
                                          int32_t *taps, int8_t *out)
{
    const int f = q->e != EB_TFL_SLOW ? 2 : 1;
    const int step = p->dil_w == 1 ? 2 : 1;
    const int32_t sw = p->stride_w;
    int32_t n = 0, t;
    int oy, ox, ky, kx, j;
    for (ky = 0; ky < p->k_h; ++ky) {
        for (kx = 0; kx < p->k_w; kx += step) {
            const int32_t w1 = step == 2 && kx + 1 < p->k_w ? w[ky * p->k_w + kx + 1] : 0;
            taps[2 * n] = (int32_t)ky * p->dil_h * s->dw_w + (int32_t)kx * p->dil_w;
            taps[2 * n + 1] = (int32_t)eb_tfl_pair(f * w[ky * p->k_w + kx], f * w1);
            ++n;
        }
    }
    for (oy = 0; oy < p->out_h; ++oy, out += p->out_w) {
        const int16_t *row = plane + (int32_t)oy * p->stride_h * s->dw_w;
        for (ox = 0; ox < p->out_w; ox += 4) {
            const int16_t *x = row + (int32_t)ox * sw;
            int32_t acc[4];
            for (j = 0; j < 4; ++j) {
                acc[j] = q->init;
            }
            for (t = 0; t < n; ++t) {
                const int16_t *xt = x + taps[2 * t];
                const uint32_t wp = (uint32_t)taps[2 * t + 1];
                acc[0] = eb_tfl_smlad(eb_tfl_ld(xt), wp, acc[0]);
                acc[1] = eb_tfl_smlad(eb_tfl_ld(xt + sw), wp, acc[1]);
                acc[2] = eb_tfl_smlad(eb_tfl_ld(xt + 2 * sw), wp, acc[2]);
                acc[3] = eb_tfl_smlad(eb_tfl_ld(xt + 3 * sw), wp, acc[3]);
            }
            eb_tfl_store(q, act, m, shift, acc, p->out_w - ox < 4 ? p->out_w - ox : 4,
                         out + ox);
        }
    }
}

static EB_TFL_NOINLINE void eb_tfl_dw(const eb_tfl_conv_params *p, const eb_tfl_plan *s,
                                      const int8_t *in, const int8_t *w, const int32_t *bias,
                                      const int32_t *mult, const int32_t *shift, int8_t *out,
                                      int16_t *scratch)
{
    const int mlt = p->out_c / p->in_c;
    const int32_t taps = (int32_t)p->k_h * p->k_w;
    const int32_t in_plane = (int32_t)p->in_h * p->in_w;
    const int32_t out_plane = (int32_t)p->out_h * p->out_w;
    const int32_t pe = s->dw_h * s->dw_w;
    const int k3 = p->k_h == 3 && p->k_w == 3 && p->stride_h == 1 && p->stride_w == 1 &&
                   p->dil_h == 1 && p->dil_w == 1;
    const eb_tfl_act act = eb_tfl_act_of(p->out_zp, p->act_min, p->act_max);
    int16_t *planes = scratch + s->at_aux;
    int32_t *table = (int32_t *)(void *)(scratch + s->at_off);
    int c0, i, j;
#if EB_TFL_ASM
    /* 3x3, dilation 1, stride 1 or 2 (both axes): the assembly, a batch of channels' records
     * per call, where the project has it (and its clamping form for a narrow range) */
    const int st = eb_tfl_dw3_stride(p, &act);
    /* a last column for the strip kernel */
    const int column = EB_TFL_HAS_DW3_STRIP && st == 1 && p->out_w % 4 == 1;
    int32_t *recs = (int32_t *)(void *)(scratch + s->at_rq);
    eb_tfl_dw_job job;
    if (st != 0) {
        eb_tfl_dw_rows_job(p, s, &act, st, column, &job);
    }
#endif
    memset(planes, 0, (size_t)s->dw_batch * (size_t)pe * sizeof *planes);
    for (c0 = 0; c0 < p->in_c; c0 += s->dw_batch) {
        const int nb = p->in_c - c0 < s->dw_batch ? p->in_c - c0 : s->dw_batch;
#if EB_TFL_ASM
        int n = 0; /* records made */
#endif
        for (i = 0; i < nb; ++i) {
            const int32_t c = c0 + i;
            int16_t *plane = planes + (int32_t)i * pe;
            eb_tfl_dw_plane(p, s, in + c * in_plane, c * in_plane, plane);
            for (j = 0; j < mlt; ++j) {
                const int32_t o = c * mlt + j;
                const eb_tfl_rq q = eb_tfl_rq_of(bias != NULL ? bias[o] : 0, mult[o], shift[o],
                                                 w + o * taps, taps, p->out_zp, 1);
#if EB_TFL_ASM
                if (st != 0 && q.e > 0 && q.e <= 22) {
                    int32_t *rec = recs + (int32_t)n++ * EB_TFL_DW_REC;
                    eb_tfl_dw_record(rec, w + o * taps, &q, st, plane, out + o * out_plane);
                    if (column) {
                        eb_tfl_dw3_column(p, s, rec, &act);
                    }
                    continue;
                }
#endif
                if (k3) {
                    eb_tfl_dw3x3(p, s, plane, w + o * taps, &q, &act, mult[o], shift[o],
                                 out + o * out_plane);
                } else {
                    eb_tfl_dw_any(p, s, plane, w + o * taps, &q, &act, mult[o], shift[o],
                                  table, out + o * out_plane);
                }
            }
        }
#if EB_TFL_ASM
        if (n > 0 && (!column || job.blk_bytes != 0)) {
            eb_tfl_dw3_rows(&job, &act, st, recs, n);
        }
#endif
    }
}

void eb_tfl_conv2d_opt(const eb_tfl_conv_params *p, const int8_t *in, const int8_t *w,
                       const int32_t *bias, const int32_t *mult, const int32_t *shift,
                       int8_t *out, int16_t *scratch)
{
    const eb_tfl_plan s = eb_tfl_plan_of(p);
    if (s.path == EB_TFL_DW && !EB_TFL_HAS_DEPTHWISE) {
        eb_tfl_conv2d(p, in, w, bias, mult, shift, out, NULL); /* not in this project */
    } else if (s.path == EB_TFL_DW) {
        eb_tfl_dw(p, &s, in, w, bias, mult, shift, out, scratch);
    } else {
        eb_tfl_gemm(p, &s, in, w, bias, mult, shift, out, scratch);
    }
}

/* ---- linear --------------------------------------------------------------------------------- */

/* The input as chunks [x0, x2], [x1, x3] of x - zp, zero-padded to a multiple of 4. */
static void eb_tfl_expand_input(const int8_t *in, int32_t n, int32_t zp, int16_t *x)
{
    const uint32_t nz = eb_tfl_negzp(zp);
    int32_t i;
    for (i = 0; i < n; i += 4, x += 4) {
        const uint32_t v = i + 4 <= n ? eb_tfl_ld(in + i)
                                      : eb_tfl_ld_n(in + i, n - i) |
                                            (eb_tfl_splat8(zp) << (8 * (n - i)));
        eb_tfl_st(x, eb_tfl_sxtab16(nz, v));
        eb_tfl_st(x + 2, eb_tfl_sxtab16_ror8(nz, v));
    }
}

/* Word i of a row of k int8 weights (i <= k - 4), or its last k % 4 (i = k & ~3). */
static EB_TFL_INLINE uint32_t eb_tfl_wword(const int8_t *row, int32_t i, int32_t k)
{
    if (i + 4 <= k) {
        return eb_tfl_ld(row + i);
    }
    return k >= 4 ? eb_tfl_ld(row + k - 4) >> (8 * (4 - (k - i))) : eb_tfl_ld_n(row + i, k - i);
}

#if EB_TFL_ASM
/* The dot products of 4 weight rows with the input's chunks, over the whole words of the
 * rows, on the M4 by hand: per 4 inputs an LDRD of the input pairs, and per row an LDR of
 * its weight word (any alignment), SXTB16 of it and of it rotated, two SMLAD: 21
 * instructions per 16 MACs, 4 chunks per loop pass. r0-r3 the sums, r4/r5 input pairs,
 * r6/r7 weight halves, r8-r11 the rows, r12 the input, lr its end. */
typedef struct {
    const int8_t *w[4];     /* 0: the rows (advanced past the whole words) */
    const int16_t *x;       /* 16 */
    const int16_t *x4end;   /* 20: the end of the input's groups of 4 chunks */
    const int16_t *xend;    /* 24: the end of its whole chunks */
    int32_t acc[4];         /* 28: the sums, in and out */
} eb_tfl_fc_job;

#define EB_TFL_FC_ROW(wp, a)                   \
    "ldr    r6, [" wp "], #4\n\t"              \
    "sxtb16 r7, r6\n\t"                        \
    "sxtb16 r6, r6, ror #8\n\t"                \
    "smlad  " a ", r7, r4, " a "\n\t"          \
    "smlad  " a ", r6, r5, " a "\n\t"
#define EB_TFL_FC_CHUNK                                                                   \
    "ldrd   r4, r5, [r12], #8\n\t" EB_TFL_FC_ROW("r8", "r0") EB_TFL_FC_ROW("r9", "r1")      \
        EB_TFL_FC_ROW("r10", "r2") EB_TFL_FC_ROW("r11", "r3")

static __attribute__((naked, noinline)) void eb_tfl_fc4(eb_tfl_fc_job *job
                                                        __attribute__((unused)))
{
    __asm__ volatile("push   {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"
                     "push   {r0}\n\t"
                     "ldmia  r0, {r8, r9, r10, r11, r12}\n\t"
                     "ldr    lr, [r0, #20]\n\t"
                     "add    r0, r0, #28\n\t"
                     "ldmia  r0, {r0, r1, r2, r3}\n\t"
                     "cmp    r12, lr\n\t"
                     "beq    2f\n"
                     "1:\n\t" EB_TFL_FC_CHUNK EB_TFL_FC_CHUNK EB_TFL_FC_CHUNK EB_TFL_FC_CHUNK
                     "cmp    r12, lr\n\t"
                     "bne    1b\n"
                     "2:\n\t"
                     "ldr    lr, [sp]\n\t"
                     "ldr    lr, [lr, #24]\n\t"
                     "cmp    r12, lr\n\t"
                     "beq    4f\n"
                     "3:\n\t" EB_TFL_FC_CHUNK
                     "cmp    r12, lr\n\t"
                     "bne    3b\n"
                     "4:\n\t"
                     "pop    {r4}\n\t"
                     "stmia  r4!, {r8, r9, r10, r11}\n\t"
                     "add    r4, r4, #12\n\t"
                     "stmia  r4, {r0, r1, r2, r3}\n\t"
                     "pop    {r4, r5, r6, r7, r8, r9, r10, r11, pc}\n");
}
#endif

#if EB_TFL_ASM
/* Two weight rows, 4-byte aligned (weights aligned, in_f % 4 == 0), over 8 inputs at a time:
 * one LDM of the input chunks' 4 pair words, per row an LDRD of 8 weights, 4 SXTB16, 4 SMLAD
 * (19 instructions per 16 MACs, two blocks per loop pass). r0/r1 the sums, r4-r7 input
 * pairs, r8/r9 weight words, r10 a weight pair, r11/r12 the rows, lr the input, r2 its end
 * (of the 8-input blocks). */
typedef struct {
    const int8_t *w[2];  /* 0: the rows (advanced) */
    const int16_t *x;    /* 8 */
    const int16_t *xend; /* 12 */
    int32_t acc[2];      /* 16: the sums, in and out */
} eb_tfl_fc2_job;

#define EB_TFL_FC2_ROW(wp, a)                  \
    "ldrd   r8, r9, [" wp "], #8\n\t"          \
    "sxtb16 r10, r8\n\t"                       \
    "smlad  " a ", r10, r4, " a "\n\t"         \
    "sxtb16 r8, r8, ror #8\n\t"                \
    "smlad  " a ", r8, r5, " a "\n\t"          \
    "sxtb16 r10, r9\n\t"                       \
    "smlad  " a ", r10, r6, " a "\n\t"         \
    "sxtb16 r9, r9, ror #8\n\t"                \
    "smlad  " a ", r9, r7, " a "\n\t"
#define EB_TFL_FC2_BLOCK                                                                  \
    "ldmia  lr!, {r4, r5, r6, r7}\n\t" EB_TFL_FC2_ROW("r11", "r0") EB_TFL_FC2_ROW("r12", "r1")

static __attribute__((naked, noinline)) void eb_tfl_fc2(eb_tfl_fc2_job *job
                                                        __attribute__((unused)))
{
    __asm__ volatile("push   {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"
                     "push   {r0}\n\t"
                     "ldrd   r11, r12, [r0]\n\t"
                     "ldrd   lr, r2, [r0, #8]\n\t"
                     "ldrd   r0, r1, [r0, #16]\n\t"
                     "sub    r3, r2, lr\n\t"      /* an odd number of 8-input blocks: one */
                     "tst    r3, #16\n\t"
                     "beq    1f\n\t" EB_TFL_FC2_BLOCK
                     "cmp    lr, r2\n\t"
                     "beq    2f\n"
                     "1:\n\t" EB_TFL_FC2_BLOCK EB_TFL_FC2_BLOCK
                     "cmp    lr, r2\n\t"
                     "bne    1b\n"
                     "2:\n\t"
                     "pop    {r4}\n\t"
                     "strd   r11, r12, [r4]\n\t"
                     "strd   r0, r1, [r4, #16]\n\t"
                     "pop    {r4, r5, r6, r7, r8, r9, r10, r11, pc}\n");
}
#endif

#if EB_TFL_ASM
/* eb_tfl_fc2 over `pairs` consecutive row pairs in one call (rows k bytes apart, k a
 * multiple of 8, word-aligned): sums[] holds the rows' biases in and their sums out. The
 * row pointers run on from one pair to the next (the end of row 1 is the next row 0). */
typedef struct {
    const int8_t *w;     /* 0: row 0 of the first pair */
    int32_t k;           /* 4: bytes per row */
    const int16_t *x;    /* 8 */
    const int16_t *xend; /* 12: x + k */
    int32_t *sums;       /* 16: advanced by the assembly */
    int32_t pairs;       /* 20: counted down by the assembly */
} eb_tfl_fcn_job;

static __attribute__((naked, noinline)) void eb_tfl_fc2n(eb_tfl_fcn_job *job
                                                         __attribute__((unused)))
{
    __asm__ volatile("push   {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"
                     "ldr    r12, [r0]\n\t"
                     "ldr    r3, [r0, #4]\n\t"
                     "ldr    r2, [r0, #12]\n\t"
                     "push   {r0}\n"
                     "0:\n\t"
                     "ldr    r10, [sp]\n\t"
                     "ldr    lr, [r10, #8]\n\t"
                     "ldr    r9, [r10, #16]\n\t"
                     "ldrd   r0, r1, [r9]\n\t"
                     "mov    r11, r12\n\t"
                     "add    r12, r11, r3\n\t"
                     "sub    r10, r2, lr\n\t"     /* an odd number of 8-input blocks: one */
                     "tst    r10, #16\n\t"
                     "beq    1f\n\t" EB_TFL_FC2_BLOCK
                     "cmp    lr, r2\n\t"
                     "beq    2f\n"
                     "1:\n\t" EB_TFL_FC2_BLOCK EB_TFL_FC2_BLOCK
                     "cmp    lr, r2\n\t"
                     "bne    1b\n"
                     "2:\n\t"
                     "ldr    r10, [sp]\n\t"
                     "ldr    r9, [r10, #16]\n\t"
                     "strd   r0, r1, [r9], #8\n\t"
                     "str    r9, [r10, #16]\n\t"
                     "ldr    r9, [r10, #20]\n\t"
                     "subs   r9, r9, #1\n\t"
                     "str    r9, [r10, #20]\n\t"
                     "bne    0b\n\t"
                     "pop    {r0}\n\t"
                     "pop    {r4, r5, r6, r7, r8, r9, r10, r11, pc}\n");
}
#endif

#if EB_TFL_ASM
/* eb_tfl_fc2n for triples of rows (the job's `pairs`: triples): per 8 inputs one LDM and
 * per row an LDRD, 4 SXTB16, 4 SMLAD (38 cycles per 24 MACs). r0-r2 the sums, r3/r11/r12
 * the rows, r4-r7 input pairs, r8/r9 weight words, r10 a weight pair, lr the input. */
#define EB_TFL_FC3_BLOCK                                                                  \
    "ldmia  lr!, {r4, r5, r6, r7}\n\t" EB_TFL_FC2_ROW("r11", "r0") EB_TFL_FC2_ROW("r12", "r1") \
        EB_TFL_FC2_ROW("r3", "r2")

static __attribute__((naked, noinline)) void eb_tfl_fc3n(eb_tfl_fcn_job *job
                                                         __attribute__((unused)))
{
    __asm__ volatile("push   {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"
                     "ldr    r3, [r0]\n\t"
                     "push   {r0}\n"
                     "0:\n\t"
                     "ldr    r10, [sp]\n\t"
                     "ldr    r8, [r10, #4]\n\t"    /* k */
                     "mov    r11, r3\n\t"
                     "add    r12, r11, r8\n\t"
                     "add    r3, r12, r8\n\t"
                     "ldr    lr, [r10, #8]\n\t"
                     "ldr    r9, [r10, #16]\n\t"
                     "ldmia  r9, {r0, r1, r2}\n\t"
                     "ldr    r9, [r10, #12]\n\t"
                     "sub    r9, r9, lr\n\t"       /* an odd number of 8-input blocks: one */
                     "tst    r9, #16\n\t"
                     "beq    1f\n\t" EB_TFL_FC3_BLOCK
                     "ldr    r8, [sp]\n\t"
                     "ldr    r8, [r8, #12]\n\t"
                     "cmp    lr, r8\n\t"
                     "beq    2f\n"
                     "1:\n\t" EB_TFL_FC3_BLOCK EB_TFL_FC3_BLOCK
                     "ldr    r8, [sp]\n\t"
                     "ldr    r8, [r8, #12]\n\t"
                     "cmp    lr, r8\n\t"
                     "bne    1b\n"
                     "2:\n\t"
                     "ldr    r10, [sp]\n\t"
                     "ldr    r9, [r10, #16]\n\t"
                     "stmia  r9!, {r0, r1, r2}\n\t"
                     "str    r9, [r10, #16]\n\t"
                     "ldr    r9, [r10, #20]\n\t"
                     "subs   r9, r9, #1\n\t"
                     "str    r9, [r10, #20]\n\t"
                     "bne    0b\n\t"
                     "pop    {r0}\n\t"
                     "pop    {r4, r5, r6, r7, r8, r9, r10, r11, pc}\n");
}
#endif

/* The sums of rows o .. o + n - 1 (n <= 4; the rest of the 4 lanes repeat row o) from
 * input chunk `from` on, added to acc[]: the last k % 4 weights never read past a row. */
static void eb_tfl_fc_rest(const int8_t *w, int32_t k, int o, int n, const int16_t *x,
                           int32_t from, int32_t acc[4])
{
    const int32_t kp = eb_tfl_round4(k);
    int32_t i;
    int j;
    for (i = from; i < kp; i += 4) {
        const uint32_t x0 = eb_tfl_ld(x + i), x1 = eb_tfl_ld(x + i + 2);
        for (j = 0; j < n; ++j) {
            const uint32_t wv = eb_tfl_wword(w + (int32_t)(o + j) * k, i, k);
            acc[j] = eb_tfl_smlad(eb_tfl_sxtb16(wv), x0,
                                  eb_tfl_smlad(eb_tfl_sxtb16_ror8(wv), x1, acc[j]));
        }
    }
}

/* The sums of rows o .. o + n - 1 (n <= 4), acc[] holding their biases: on the M4 2 rows
 * at a time by eb_tfl_fc2 when the rows are word-aligned, else 4 by eb_tfl_fc4 (each where
 * the project has it); the rest (and everything elsewhere) in C. */
static void eb_tfl_fc_rows(const int8_t *w, int32_t k, int o, int n, const int16_t *x,
                           int32_t acc[4])
{
    int32_t from = 0;
#if EB_TFL_ASM
    int j;
    if (EB_TFL_HAS_FC_ALIGNED && ((uintptr_t)w & 3u) == 0 && (k & 3) == 0 && k >= 8) {
        const int32_t k8 = k & ~(int32_t)7;
        for (j = 0; j < n; j += 2) { /* a last single row: twice, the copy not kept */
            const int two = n - j >= 2;
            eb_tfl_fc2_job job;
            job.w[0] = w + (int32_t)(o + j) * k;
            job.w[1] = two ? job.w[0] + k : job.w[0];
            job.x = x;
            job.xend = x + k8;
            job.acc[0] = acc[j];
            job.acc[1] = two ? acc[j + 1] : 0;
            eb_tfl_fc2(&job);
            acc[j] = job.acc[0];
            if (two) {
                acc[j + 1] = job.acc[1];
            }
            if (k8 < k) {
                eb_tfl_fc_rest(w, k, o + j, two ? 2 : 1, x, k8, acc + j);
            }
        }
        return;
    }
    if (EB_TFL_HAS_FC4 && k >= 4) {
        const int32_t full = k & ~(int32_t)3;
        eb_tfl_fc_job job;
        for (j = 0; j < 4; ++j) { /* rows past n: row o again, not stored */
            job.w[j] = w + (int32_t)(o + (j < n ? j : 0)) * k;
            job.acc[j] = acc[j];
        }
        job.x = x;
        job.x4end = x + (full & ~(int32_t)15);
        job.xend = x + full;
        eb_tfl_fc4(&job);
        for (j = 0; j < 4; ++j) {
            acc[j] = job.acc[j];
        }
        from = full;
    }
#endif
    eb_tfl_fc_rest(w, k, o, n, x, from, acc);
}

/* eb_tfl_mbqm_single, a right shift e = -shift >= 1 in the fewest instructions: the high
 * word of acc * m + 2^(30 + e) (SMLAL), shifted by e - 1 (floor divisions compose; the sum
 * stays below 2^63 and its quotient within int32). */
static EB_TFL_INLINE int32_t eb_tfl_fc_requant(int32_t acc, int32_t m, int32_t shift)
{
    if (shift <= -1) { /* 2^(30 + e) as its high and low words: no 64-bit shift */
        const int e = -shift;
        const uint64_t r = e >= 2 ? (uint64_t)((uint32_t)1 << (e - 2)) << 32 : 0x80000000u;
        const int64_t v = (int64_t)acc * (int64_t)m + (int64_t)r;
        return (int32_t)(v >> 32) >> (e - 1);
    }
    return eb_tfl_mbqm_single(acc, m, (int)shift);
}

/* A layer of one or two outputs (a classifier's last): expanding the input would cost as
 * much as the sums, so per 4 inputs one LDR, two SXTAB16 (x - zp) shared by the rows, and
 * per row LDR, two SXTB16, two SMLAD; the last k % 4 from the words ending at the rows'
 * ends, shifted down (byte loads when k < 4). */
static EB_TFL_NOINLINE void eb_tfl_fc_narrow(const eb_tfl_fc_params *p, const int8_t *in,
                                             const int8_t *w, const int32_t *bias,
                                             const int32_t *mult, const int32_t *shift,
                                             int8_t *out)
{
    const int32_t k = p->in_f, tail = k & 3;
    const uint32_t nz = eb_tfl_negzp(p->in_zp);
    const int8_t *w1 = p->out_f > 1 ? w + k : w;
    int32_t a0 = bias != NULL ? bias[0] : 0, a1 = bias != NULL && p->out_f > 1 ? bias[1] : 0;
    int32_t i = 0;
    for (; i + 4 <= k; i += 4) {
        const uint32_t x = eb_tfl_ld(in + i);
        const uint32_t xa = eb_tfl_sxtab16(nz, x), xb = eb_tfl_sxtab16_ror8(nz, x);
        const uint32_t v0 = eb_tfl_ld(w + i), v1 = eb_tfl_ld(w1 + i);
        a0 = eb_tfl_smlad(xa, eb_tfl_sxtb16(v0), eb_tfl_smlad(xb, eb_tfl_sxtb16_ror8(v0), a0));
        a1 = eb_tfl_smlad(xa, eb_tfl_sxtb16(v1), eb_tfl_smlad(xb, eb_tfl_sxtb16_ror8(v1), a1));
    }
    if (tail != 0) { /* zero weights beyond the row: the padded inputs add nothing */
        const int sh = 8 * (4 - tail);
        const uint32_t x = k >= 4 ? eb_tfl_ld(in + k - 4) >> sh : eb_tfl_ld_n(in + i, tail);
        const uint32_t xa = eb_tfl_sxtab16(nz, x), xb = eb_tfl_sxtab16_ror8(nz, x);
        const uint32_t v0 = k >= 4 ? eb_tfl_ld(w + k - 4) >> sh : eb_tfl_ld_n(w + i, tail);
        const uint32_t v1 = k >= 4 ? eb_tfl_ld(w1 + k - 4) >> sh : eb_tfl_ld_n(w1 + i, tail);
        a0 = eb_tfl_smlad(xa, eb_tfl_sxtb16(v0), eb_tfl_smlad(xb, eb_tfl_sxtb16_ror8(v0), a0));
        a1 = eb_tfl_smlad(xa, eb_tfl_sxtb16(v1), eb_tfl_smlad(xb, eb_tfl_sxtb16_ror8(v1), a1));
    }
    out[0] = eb_tfl_out8(eb_tfl_fc_requant(a0, mult[0], shift[0]), p->out_zp, p->act_min,
                         p->act_max);
    if (p->out_f > 1) {
        out[1] = eb_tfl_out8(eb_tfl_fc_requant(a1, mult[1], shift[1]), p->out_zp, p->act_min,
                             p->act_max);
    }
}

void eb_tfl_linear_opt(const eb_tfl_fc_params *p, const int8_t *in, const int8_t *w,
                       const int32_t *bias, const int32_t *mult, const int32_t *shift,
                       int8_t *out, int16_t *scratch)
{
    const int32_t k = p->in_f;
    int o = 0, j;
    if (EB_TFL_HAS_FC_NARROW && p->out_f <= 2) {
        eb_tfl_fc_narrow(p, in, w, bias, mult, shift, out);
        return;
    }
    eb_tfl_expand_input(in, k, p->in_zp, scratch);
#if EB_TFL_ASM
    if (EB_TFL_HAS_FC_ALIGNED && ((uintptr_t)w & 3u) == 0 && (k & 7) == 0 && k >= 8) {
        /* row triples in batches of up to 15 rows by one call each (a last pair), requantized
         * in C */
        int32_t sums[16];
        eb_tfl_fcn_job job;
        for (; p->out_f - o >= 2; o += j) { /* triples of rows, then a last pair */
            const int left = p->out_f - o;
            const int n = left >= 3 ? (left < 15 ? left : 15) / 3 * 3 : 2;
            for (j = 0; j < n; ++j) {
                sums[j] = bias != NULL ? bias[o + j] : 0;
            }
            job.w = w + (int32_t)o * k;
            job.k = k;
            job.x = scratch;
            job.xend = scratch + k;
            job.sums = sums;
            job.pairs = n == 2 ? 1 : n / 3;
            (n == 2 ? eb_tfl_fc2n : eb_tfl_fc3n)(&job);
            for (j = 0; j < n; ++j) {
                out[o + j] = eb_tfl_out8(eb_tfl_fc_requant(sums[j], mult[o + j], shift[o + j]),
                                         p->out_zp, p->act_min, p->act_max);
            }
        }
    }
#endif
    for (; o < p->out_f; o += 4) {
        const int n = p->out_f - o < 4 ? p->out_f - o : 4;
        int32_t acc[4] = {0, 0, 0, 0};
        for (j = 0; j < n; ++j) {
            acc[j] = bias != NULL ? bias[o + j] : 0;
        }
        eb_tfl_fc_rows(w, k, o, n, scratch, acc);
        for (j = 0; j < n; ++j) {
            out[o + j] = eb_tfl_out8(eb_tfl_fc_requant(acc[j], mult[o + j], shift[o + j]),
                                     p->out_zp, p->act_min, p->act_max);
        }
    }
}


/* ---- add -------------------------------------------------------------------------------------
 * Each input's rescaled term, MBQM((x - zp) * 2^left_shift, m, shift), is a function of its
 * byte alone: two tables of its 256 values (computed by the portable arithmetic, in scratch)
 * leave per element two byte loads, two table loads, an ADD and the output's requantization
 * (SMMLAR, ADD, ASR, SSAT: the convolutions' form, the terms pre-shifted by the output's left
 * shift and doubled) when its bound holds (checked from the tables' largest magnitudes), else
 * the output's portable MBQM on the same exact sum. */
#define EB_TFL_ADD_TABLE_MIN 256

int32_t eb_tfl_add_scratch(const eb_tfl_add_params *p)
{
    return p->n >= EB_TFL_ADD_TABLE_MIN ? 1024 : 0; /* two tables of 256 int32 */
}

/* t[u] = the term of the int8 value whose byte is u; returns the largest |t[u]|. */
static EB_TFL_NOINLINE uint32_t eb_tfl_add_table(int32_t *t, int32_t zp, int ls, int32_t m,
                                                 int32_t shift)
{
    uint32_t most = 0;
    int32_t u;
    for (u = 0; u < 256; ++u) {
        const int32_t x = u < 128 ? u : u - 256;
        const int32_t v = eb_tfl_mbqm(eb_tfl_s32((uint32_t)(x - zp) << ls), m, (int)shift);
        const uint32_t mag = v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
        t[u] = v;
        most = mag > most ? mag : most;
    }
    return most;
}

/* The fast output form applies: m >= 0, a right shift e in 1..30, and |2 * sum * 2^left| +
 * |c| < 2^31 (c = 2^(e-1) + out_zp * 2^e; |SRDHM(x, m)| <= |x|). */
static int eb_tfl_add_fast(const eb_tfl_add_params *p, uint64_t most)
{
    const int left = p->shift_out > 0 ? (int)p->shift_out : 0;
    const int e = p->shift_out > 0 ? 0 : (int)-p->shift_out;
    const int64_t limit = (int64_t)1 << 31;
    int64_t sum, c;
    if (p->mult_out < 0 || e < 1 || e > 30 || left > 30 || most >= (uint64_t)limit) {
        return 0;
    }
    sum = (int64_t)most << (left + 1);
    c = ((int64_t)1 << (e - 1)) + (int64_t)p->out_zp * ((int64_t)1 << e);
    return sum < limit && sum + (c < 0 ? -c : c) < limit;
}

static EB_TFL_INLINE int32_t eb_tfl_add_clamp(int32_t v, int32_t lo, int32_t hi, int full)
{
    v = eb_tfl_ssat8(v);
    if (!full) {
        v = v < lo ? lo : v;
        v = v > hi ? hi : v;
    }
    return v;
}

/* One loop of the fast form; `full` a constant (the activation range is all of int8). */
static EB_TFL_INLINE void eb_tfl_add_run(const int32_t *t1, const int32_t *t2, const uint8_t *a,
                                         const uint8_t *b, int8_t *out, int32_t n, int32_t m,
                                         int32_t c, int e, int32_t lo, int32_t hi, int full)
{
    int32_t i;
    for (i = 0; i < n; ++i) {
        const int32_t x = (int32_t)((uint32_t)t1[a[i]] + (uint32_t)t2[b[i]]);
        out[i] = (int8_t)eb_tfl_add_clamp((eb_tfl_smmlar(x, m, c) + (x >> 31)) >> e, lo, hi,
                                          full);
    }
}

void eb_tfl_add_opt(const eb_tfl_add_params *p, const int8_t *a, const int8_t *b, int8_t *out,
                    int16_t *scratch)
{
    int32_t *t1 = (int32_t *)(void *)scratch, *t2 = t1 + 256;
    const uint8_t *ua = (const uint8_t *)a, *ub = (const uint8_t *)b;
    uint64_t most;
    int32_t i;
    if (scratch == NULL || p->n < EB_TFL_ADD_TABLE_MIN) {
        eb_tfl_add(p, a, b, out);
        return;
    }
    most = eb_tfl_add_table(t1, p->in1_zp, p->left_shift, p->mult1, p->shift1);
    most += eb_tfl_add_table(t2, p->in2_zp, p->left_shift, p->mult2, p->shift2);
    if (eb_tfl_add_fast(p, most)) {
        const int left = p->shift_out > 0 ? (int)p->shift_out : 0;
        const int e = p->shift_out > 0 ? 0 : (int)-p->shift_out;
        const int32_t c = ((int32_t)1 << (e - 1)) + p->out_zp * ((int32_t)1 << e);
        for (i = 0; i < 512; ++i) {
            t1[i] = (int32_t)((uint32_t)t1[i] << (left + 1));
        }
        if (p->act_min == -128 && p->act_max == 127) {
            eb_tfl_add_run(t1, t2, ua, ub, out, p->n, p->mult_out, c, e, -128, 127, 1);
        } else {
            eb_tfl_add_run(t1, t2, ua, ub, out, p->n, p->mult_out, c, e, p->act_min, p->act_max,
                           0);
        }
        return;
    }
    for (i = 0; i < p->n; ++i) {
        const int32_t x = eb_tfl_add32(t1[ua[i]], t2[ub[i]]);
        out[i] = eb_tfl_out8(eb_tfl_mbqm(x, p->mult_out, (int)p->shift_out), p->out_zp,
                             p->act_min, p->act_max);
    }
}

/* ---- pooling ---------------------------------------------------------------------------------
 * A window is k_h runs of k_w bytes, or one run of k_h * k_w when it spans whole rows. A run
 * is reduced a word at a time once aligned: the sum by USADA8 of the bytes offset by 128
 * (EOR 0x80808080), the maximum by SSUB8/SEL; the average divided as TFLite's reference
 * (halves away from zero) in int32 (windows up to 2^23 values). */
static EB_TFL_INLINE int32_t eb_tfl_run_sum_short(const int8_t *x, int32_t n)
{
    int32_t sum = 0;
    for (; n >= 4; n -= 4, x += 4) {
        sum += (x[0] + x[1]) + (x[2] + x[3]);
    }
    for (; n > 0; --n) {
        sum += *x++;
    }
    return sum;
}

static EB_TFL_NOINLINE int32_t eb_tfl_run_sum(const int8_t *x, int32_t n)
{
    uint32_t acc = 0;
    int32_t sum = 0, words = 0;
    for (; n > 0 && ((uintptr_t)x & 3u) != 0; --n) {
        sum += *x++;
    }
    for (; n >= 8; n -= 8, x += 8, words += 2) {
        const uint32_t v0 = eb_tfl_ld(x), v1 = eb_tfl_ld(x + 4);
        acc = eb_tfl_usada8(v1 ^ 0x80808080u, eb_tfl_usada8(v0 ^ 0x80808080u, acc));
    }
    for (; n >= 4; n -= 4, x += 4, ++words) {
        acc = eb_tfl_usada8(eb_tfl_ld(x) ^ 0x80808080u, acc);
    }
    for (; n > 0; --n) {
        sum += *x++;
    }
    return sum + (int32_t)acc - 512 * words;
}

static EB_TFL_NOINLINE int32_t eb_tfl_run_max(const int8_t *x, int32_t n, int32_t best)
{
    uint32_t m4 = 0x80808080u;
    int i;
    for (; n > 0 && ((uintptr_t)x & 3u) != 0; --n, ++x) {
        best = *x > best ? *x : best;
    }
    for (; n >= 4; n -= 4, x += 4) {
        m4 = eb_tfl_max4(eb_tfl_ld(x), m4);
    }
    for (; n > 0; --n, ++x) {
        best = *x > best ? *x : best;
    }
    for (i = 0; i < 4; ++i) {
        const int32_t v = (int32_t)((m4 >> (8 * i)) & 0xFFu);
        const int32_t sv = v < 128 ? v : v - 256;
        best = sv > best ? sv : best;
    }
    return best;
}

/* Global average pooling (a window of the whole plane: the end of most CNNs), one run per
 * channel. */
static EB_TFL_NOINLINE void eb_tfl_avg_global(const int8_t *in, int32_t channels, int32_t plane,
                                              int32_t lo, int32_t hi, int8_t *out)
{
    const int32_t half = plane / 2;
    int32_t c;
    for (c = 0; c < channels; ++c, in += plane) {
        int32_t v = plane < 16 ? eb_tfl_run_sum_short(in, plane) : eb_tfl_run_sum(in, plane);
        v = v > 0 ? (v + half) / plane : (v - half) / plane;
        out[c] = (int8_t)(v < lo ? lo : (v > hi ? hi : v));
    }
}

void eb_tfl_pool2d_opt(const eb_tfl_pool_params *p, const int8_t *in, int8_t *out)
{
    /* the parameters in locals: stores to out[] may alias *p as far as C knows */
    const int32_t in_h = p->in_h, in_w = p->in_w, plane = in_h * in_w;
    const int32_t k_h = p->k_h, k_w = p->k_w, s_h = p->stride_h, s_w = p->stride_w;
    const int32_t pad_top = p->pad_top, pad_left = p->pad_left;
    /* a constant where the project has the loops of one mode only */
    const int max = EB_TFL_HAS_POOL_MAX && (!EB_TFL_HAS_POOL_AVG || p->mode == EB_TFL_POOL_MAX);
    const int32_t lo = p->act_min, hi = p->act_max, out_h = p->out_h, out_w = p->out_w;
    int32_t c, oy, ox, y;
    if (EB_TFL_HAS_POOL_GLOBAL && p->mode != EB_TFL_POOL_MAX && k_h == in_h && k_w == in_w &&
        out_h == 1 && out_w == 1 && pad_top == 0 && pad_left == 0 &&
        k_h * k_w <= ((int32_t)1 << 23)) { /* one window, the whole plane */
        eb_tfl_avg_global(in, p->c, plane, lo, hi, out);
        return;
    }
    if (k_h * k_w > ((int32_t)1 << 23) || !(EB_TFL_HAS_POOL_MAX || EB_TFL_HAS_POOL_AVG) ||
        (p->mode == EB_TFL_POOL_MAX) != max) {
        eb_tfl_pool2d(p, in, out); /* a window past int32 sums, or loops left out */
        return;
    }
    for (c = p->c; c > 0; --c, in += plane) {
        for (oy = 0; oy < out_h; ++oy) {
            const int32_t y0 = oy * s_h - pad_top; /* the window's rows inside the input */
            const int32_t ya = y0 < 0 ? 0 : y0, yb = y0 + k_h < in_h ? y0 + k_h : in_h;
            for (ox = 0; ox < out_w; ++ox) {
                const int32_t x0 = ox * s_w - pad_left;
                const int32_t xa = x0 < 0 ? 0 : x0, xb = x0 + k_w < in_w ? x0 + k_w : in_w;
                const int32_t run = xb - xa, count = (yb - ya) * run;
                /* whole rows: one run over them all */
                const int whole = run == in_w;
                const int32_t runs = whole ? (yb > ya ? 1 : 0) : yb - ya;
                const int32_t length = whole ? count : run;
                const int8_t *win = in + ya * in_w + xa;
                int32_t v = max ? -128 : 0;
                for (y = 0; y < runs; ++y, win += in_w) {
                    v = max ? eb_tfl_run_max(win, length, v)
                            : v + (length < 16 ? eb_tfl_run_sum_short(win, length)
                                               : eb_tfl_run_sum(win, length));
                }
                if (!max) {
                    v = count == 0 ? 0 : v > 0 ? (v + count / 2) / count : (v - count / 2) / count;
                }
                *out++ = (int8_t)(v < lo ? lo : (v > hi ? hi : v));
            }
        }
    }
}
