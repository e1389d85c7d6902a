/* edgebuild optimized kernels: the line kernel's row function. A one-row depthwise frame (a
 * 1xK kernel of multiplier 1, ops.conv_path.line) has per output channel one row of at most
 * 8 tap pairs: held in registers, an output pair costs its 2P loads and SMLADs and 10
 * instructions, where the tile kernel's row function spends about 7 a pair step of 4
 * outputs and 40 a block (about 1.9 instructions a MAC at 15 taps against 1.4). The row is
 * the channel's input widened to int16 (zeros in the padding), the pairs [w(2p), w(2p + 1)]
 * and the start scaled by 2^(c - s) so that one USAT / SSAT with ASR #c requantizes (the
 * tile kernel's eb_dw_tile_init). At dilation 2 the row is widened as its two phases, the
 * even columns EB_DW_LINE_PHASE int16 before the odd ones: outputs 2i and 2i + 1 are the
 * phases' dilation-1 outputs i, so an output pair reads the same words of each phase and
 * steps one int16 along them. At stride 2 the second output's words are the first's next
 * step's, so a pair of outputs loads P + 1 words (3P + 12 instructions). eb_dw_opt.c
 * (eb_dw_line_layer) instantiates the forms a model links: relu or none, the immediate 8 or
 * 16, stride 1 dilation 1 or 2, or stride 2 (EB_DW_LINE_FORMS). */
#ifndef EB_DW_LINE_H
#define EB_DW_LINE_H

#include <stdint.h>

#define EB_DW_LINE_PAIRS 8   /* the most tap pairs a row: 16 taps */
#define EB_DW_LINE_PHASE 256 /* int16 from a dilation-2 row's even phase to its odd one */

/* The kinds of row: stride 1 dilation 1, dilation 2 (the row as its two phases), stride 2. */
enum { EB_DW_LINE_K1 = 1, EB_DW_LINE_K2 = 2, EB_DW_LINE_KS2 = 3 };

/* One row's job: outputs out .. end - 1 (an even count) over P pairs, a pair at a time. The
 * passes enter their 8 steps at `skip` = 8 - P; step j reads the words at x + 4 j bytes
 * against w[j], so x is the row less 2 skip int16 and pair p is w[skip + p]: the first
 * output's words from x, the second's 1 int16 on (K1), EB_DW_LINE_PHASE (K2) or 2 (KS2: the
 * first's next step's words, so each word is loaded once, and w[skip - 1] is 0); the next
 * pair's x 2 int16 on (K1), 1 (K2) or 4 (KS2). */
typedef struct {
    const int16_t *x; /* 0 */
    int8_t *out;      /* 4 */
    const int8_t *end; /* 8 */
    int32_t init;     /* 12: the sums' start (bias and rounding, scaled) */
    int32_t skip;     /* 16 */
    uint32_t w[EB_DW_LINE_PAIRS]; /* 20 */
} eb_dw_line_job;

/* The job's words at x + off (and x + off + `second` bytes) against the pair in w, into sums
 * r0 (the pair's first output) and r1 (its second). */
#define EB_DW_LINE_STEP(off, second, w)                                                     \
    "ldr r2, [r12, #" off "]\n\t"                                                           \
    "smlad r0, r2, " w ", r0\n\t"                                                           \
    "ldr r2, [r12, #(" off " + " second ")]\n\t"                                           \
    "smlad r1, r2, " w ", r1\n\t"

/* The 8 steps, labels 10-17 (the TBB's targets), the second output's words `second` bytes on. */
#define EB_DW_LINE_STEPS(second)                                                            \
    "10:\n\t" EB_DW_LINE_STEP("0", second, "r4") "11:\n\t" EB_DW_LINE_STEP("4", second, "r5") \
    "12:\n\t" EB_DW_LINE_STEP("8", second, "r6") "13:\n\t" EB_DW_LINE_STEP("12", second, "r7") \
    "14:\n\t" EB_DW_LINE_STEP("16", second, "r8") "15:\n\t" EB_DW_LINE_STEP("20", second, "r9") \
    "16:\n\t" EB_DW_LINE_STEP("24", second, "r10")                                         \
    "17:\n\t" EB_DW_LINE_STEP("28", second, "r11")

/* Stride 2: the word at x + off against the pair in w into r0 and the one before (wp) into
 * r1; the steps, and a ninth word for r1 alone. */
#define EB_DW_LINE_SHARE(off, w, wp)                                                        \
    "ldr r2, [r12, #" off "]\n\t"                                                           \
    "smlad r0, r2, " w ", r0\n\t"                                                           \
    "smlad r1, r2, " wp ", r1\n\t"
#define EB_DW_LINE_STEPS_S2                                                                 \
    "10:\n\tldr r2, [r12, #0]\n\tsmlad r0, r2, r4, r0\n\t"                                   \
    "11:\n\t" EB_DW_LINE_SHARE("4", "r5", "r4") "12:\n\t" EB_DW_LINE_SHARE("8", "r6", "r5")    \
    "13:\n\t" EB_DW_LINE_SHARE("12", "r7", "r6") "14:\n\t" EB_DW_LINE_SHARE("16", "r8", "r7")  \
    "15:\n\t" EB_DW_LINE_SHARE("20", "r9", "r8") "16:\n\t" EB_DW_LINE_SHARE("24", "r10", "r9") \
    "17:\n\t" EB_DW_LINE_SHARE("28", "r11", "r10")                                          \
    "ldr r2, [r12, #32]\n\tsmlad r1, r2, r11, r1\n\t"

#if defined(__GNUC__) && defined(__thumb2__) && defined(__ARM_FEATURE_DSP)
#define EB_DW_LINE_ASM 1
/* Registers: the pairs r4-r11 (LDM), the sums r0, r1, the word r2, skip r3, the row r12,
 * the outputs lr; the end and the start (twice, for one LDRD) on the stack. Every step's
 * instructions are 32-bit (r12 is a high register), so the TBB's table is the assembler's. */
#define EB_DW_LINE_FN(name, sat, bits, c, steps, adv)                                        \
    static __attribute__((naked, noinline, unused)) void name(const eb_dw_line_job *job     \
                                                              __attribute__((unused)))      \
    {                                                                                        \
        __asm__ volatile("push {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                  \
                         "ldr r1, [r0, #8]\n\t"                                             \
                         "ldr r2, [r0, #12]\n\t"                                            \
                         "mov r3, r2\n\t"                                                   \
                         "push {r1, r2, r3}\n\t"                                            \
                         "ldr r12, [r0, #0]\n\t"                                            \
                         "ldr lr, [r0, #4]\n\t"                                             \
                         "ldr r3, [r0, #16]\n\t"                                            \
                         "add r0, r0, #20\n\t"                                              \
                         "ldmia r0, {r4, r5, r6, r7, r8, r9, r10, r11}\n"                    \
                         "1:\n\t"                                                            \
                         "ldrd r0, r1, [sp, #4]\n\t"                                        \
                         "tbb [pc, r3]\n"                                                    \
                         "2:\n\t"                                                            \
                         ".byte (10f - 2b) / 2, (11f - 2b) / 2, (12f - 2b) / 2\n\t"          \
                         ".byte (13f - 2b) / 2, (14f - 2b) / 2, (15f - 2b) / 2\n\t"          \
                         ".byte (16f - 2b) / 2, (17f - 2b) / 2\n"                            \
                         steps                                                              \
                         sat " r0, " bits ", r0, asr " c "\n\t"                              \
                         sat " r1, " bits ", r1, asr " c "\n\t"                              \
                         "strb r1, [lr, #1]\n\t"                                            \
                         "strb r0, [lr], #2\n\t"                                            \
                         "add r12, r12, #" adv "\n\t"                                        \
                         "ldr r2, [sp]\n\t"                                                 \
                         "cmp lr, r2\n\t"                                                   \
                         "bne 1b\n\t"                                                       \
                         "add sp, sp, #12\n\t"                                              \
                         "pop {r4, r5, r6, r7, r8, r9, r10, r11, pc}");                     \
    }
/* Every form: X(name, relu, c, kind, sat, bits, immediate, steps, step bytes) behind the
 * includer's gates -- EB_DW_LINE_RELU / _NONE, _C8 / _C16, _D2 / _S2 (a dilation-2 or
 * stride-2 form), each expanding to its arguments where its forms are linked and to nothing
 * where not (by default all are). */
#ifndef EB_DW_LINE_RELU
#define EB_DW_LINE_RELU(...) __VA_ARGS__
#define EB_DW_LINE_NONE(...) __VA_ARGS__
#define EB_DW_LINE_C8(...) __VA_ARGS__
#define EB_DW_LINE_C16(...) __VA_ARGS__
#define EB_DW_LINE_D2(...) __VA_ARGS__
#define EB_DW_LINE_S2(...) __VA_ARGS__
#endif
#define EB_DW_LINE_ST1 EB_DW_LINE_STEPS("2")   /* K1: the second output 2 bytes on */
#define EB_DW_LINE_ST2 EB_DW_LINE_STEPS("512") /* K2: EB_DW_LINE_PHASE int16 on */
/* The four forms of a kind of row: relu or none, the immediate 8 or 16 (names ending sfx). */
#define EB_DW_LINE_FOUR(X, sfx, kind, steps, adv)                                            \
    EB_DW_LINE_RELU(EB_DW_LINE_C8(X(eb_dw_line_relu_8##sfx, 1, 8, kind, "usat", "#7", "#8",   \
                                    steps, adv)))                                            \
    EB_DW_LINE_RELU(EB_DW_LINE_C16(X(eb_dw_line_relu_16##sfx, 1, 16, kind, "usat", "#7",      \
                                     "#16", steps, adv)))                                    \
    EB_DW_LINE_NONE(EB_DW_LINE_C8(X(eb_dw_line_none_8##sfx, 0, 8, kind, "ssat", "#8", "#8",   \
                                    steps, adv)))                                            \
    EB_DW_LINE_NONE(EB_DW_LINE_C16(X(eb_dw_line_none_16##sfx, 0, 16, kind, "ssat", "#8",      \
                                     "#16", steps, adv)))
#define EB_DW_LINE_FORMS(X)                                                                  \
    EB_DW_LINE_FOUR(X, , EB_DW_LINE_K1, EB_DW_LINE_ST1, "4")                                 \
    EB_DW_LINE_D2(EB_DW_LINE_FOUR(X, _d2, EB_DW_LINE_K2, EB_DW_LINE_ST2, "2"))               \
    EB_DW_LINE_S2(EB_DW_LINE_FOUR(X, _s2, EB_DW_LINE_KS2, EB_DW_LINE_STEPS_S2, "8"))
#define EB_DW_LINE_DEFINE(name, relu, c, kind, sat, bits, imm, steps, adv)                   \
    EB_DW_LINE_FN(name, sat, bits, imm, steps, adv)
EB_DW_LINE_FORMS(EB_DW_LINE_DEFINE)
#endif

/* The same in C (the twin the host runs): relu or none, the shift c, the kind of row. */
static inline void eb_dw_line_c(const eb_dw_line_job *j, int relu, int c, int kind)
{
    const int16_t *x = j->x;
    const int32_t second = kind == EB_DW_LINE_K1 ? 1 : kind == EB_DW_LINE_K2 ? EB_DW_LINE_PHASE : 2;
    const int32_t step = kind == EB_DW_LINE_K1 ? 2 : kind == EB_DW_LINE_K2 ? 1 : 4;
    int8_t *o;
    for (o = j->out; o != j->end; o += 2, x += step) {
        int32_t a = j->init, b = j->init;
        int32_t p;
        for (p = j->skip; p < EB_DW_LINE_PAIRS; ++p) {
            const int32_t w0 = (int16_t)(j->w[p] & 0xFFFFu), w1 = (int16_t)(j->w[p] >> 16);
            a += x[2 * p] * w0 + x[2 * p + 1] * w1;
            b += x[second + 2 * p] * w0 + x[second + 2 * p + 1] * w1;
        }
        a >>= c;
        b >>= c;
        o[0] = (int8_t)(relu ? (a < 0 ? 0 : a > 127 ? 127 : a) : a < -128 ? -128 : a > 127 ? 127 : a);
        o[1] = (int8_t)(relu ? (b < 0 ? 0 : b > 127 ? 127 : b) : b < -128 ? -128 : b > 127 ? 127 : b);
    }
}

#endif
