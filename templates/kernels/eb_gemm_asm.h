/* edgebuild optimized kernels, Cortex-M4 only: the im2col/GEMM convolution's row functions
 * in assembly (naked, static), included by eb_kernels_opt.c where EB_GEMM_ASM is defined
 * (GCC, Thumb-2, DSP extension, optimisation on); the portable C of eb_dot_block_q /
 * eb_dot_block_q2 there is their twin. No global symbol. */
#if !defined(EB_GEMM_ASM_H) && defined(EB_GEMM_ASM)
#define EB_GEMM_ASM_H

#include <stdint.h>

/* eb_dot_block_q and eb_dot_block_q2 requantized (EB_Q_NONE / EB_Q_RELU), as hand-written
 * functions per mode and pixel count (4; 1 or 2): the row loop too is in registers (the 13 of
 * the word loop and the job's address; the rest stays in the job, updated in place), so a row
 * costs its words (EB_GEMM_WORD_ASM; 9 instructions per word for two pixels), a tail word
 * (K % 4 weights: the row's last word, shifted right so that only they remain, against
 * zero-padded columns) and about 30 instructions: the bias plus the rounding addend, ASR and
 * USAT #7 / SSAT #8 per pixel, the four bytes in one STR. It stops at a row whose bias
 * exceeds lim (an exact row), the job then saying where the rest starts. k >= 4 (the tail
 * word lies inside the row). */
typedef struct {
    const int8_t *w;
    const int16_t *cols, *cend; /* cend: the end of the whole words' columns */
    const int32_t *bias;
    int8_t *out;
    int32_t stride, n, r, s, tail, tsh, lim, count; /* tsh = 32 - 8 * tail */
    int32_t span; /* cend - cols: 16 (k / 4); not read by the asm (eb_gemm_block's) */
    int32_t skip; /* (4 - (k / 4) % 4) % 4: the word EB_GEMM_PASSES enters its first pass at */
} eb_gemm_job;

#define EB_GEMM4_WORD_ASM(ld)                                                             \
    ld "sxtb16 r2, r1\n\t"                                                                \
       "sxtb16 r1, r1, ror #8\n\t"                                                        \
       "ldmia  r12!, {r3, r4, r5, r6}\n\t"                                                \
       "smlad  r7, r2, r3, r7\n\t"                                                        \
       "smlad  r7, r1, r4, r7\n\t"                                                        \
       "smlad  r8, r2, r5, r8\n\t"                                                        \
       "smlad  r8, r1, r6, r8\n\t"                                                        \
       "ldmia  r12!, {r3, r4, r5, r6}\n\t"                                                \
       "smlad  r9, r2, r3, r9\n\t"                                                        \
       "smlad  r9, r1, r4, r9\n\t"                                                        \
       "smlad  r10, r2, r5, r10\n\t"                                                      \
       "smlad  r10, r1, r6, r10\n\t"
/* One weight word against the first two pixels' chunk (one LDMIA, the other two skipped). */
#define EB_GEMM2_WORD_ASM(ld)                                                             \
    ld "sxtb16 r2, r1\n\t"                                                                \
       "sxtb16 r1, r1, ror #8\n\t"                                                        \
       "ldmia  r12, {r3, r4, r5, r6}\n\t"                                                 \
       "add    r12, r12, #32\n\t"                                                         \
       "smlad  r7, r2, r3, r7\n\t"                                                        \
       "smlad  r7, r1, r4, r7\n\t"                                                        \
       "smlad  r8, r2, r5, r8\n\t"                                                        \
       "smlad  r8, r1, r6, r8\n\t"
#define EB_GEMM_LDW "ldr    r1, [r11], #4\n\t"

/* The shifted sums r7..r10 saturated (sat, bits) and stored from the job's out pointer (r2):
 * four bytes in one STR, or the first one or two (the job's count). */
#define EB_GEMM4_FIN(sat, bits)                                                           \
    "asr    r8, r8, r2\n\t"                                                               \
    "asr    r9, r9, r2\n\t"                                                               \
    "asr    r10, r10, r2\n\t" EB_ASM_SAT4(sat, bits, "r7", "r8", "r9", "r10")             \
    "bfi    r7, r8, #8, #8\n\t"                                                           \
    "bfi    r7, r9, #16, #8\n\t"                                                          \
    "bfi    r7, r10, #24, #8\n\t"                                                         \
    "ldr    r2, [r0, #16]\n\t"                                                            \
    "str    r7, [r2]\n\t"
#define EB_GEMM2_FIN(sat, bits)                                                           \
    "asr    r8, r8, r2\n\t" sat " r7, " bits ", r7\n\t" sat " r8, " bits ", r8\n\t"       \
    "ldr    r2, [r0, #16]\n\t"                                                            \
    "strb   r7, [r2]\n\t"                                                                 \
    "ldr    r1, [r0, #48]\n\t"                                                            \
    "cmp    r1, #2\n\t"                                                                   \
    "it     eq\n\t"                                                                       \
    "strbeq r8, [r2, #1]\n\t"

/* The two-row loop's (EB_GEMM22_FN's) whole weight words in runs of 4, 2 and 1 (w4, w2, w1
 * unroll them and advance the columns; `left` puts the bytes of columns left into r2;
 * `start` the first count), and both row loops' tail word: at r11 plus the row's length (the
 * job's offset 36), the row's last word shifted right by tsh (offset 40; 32: no tail),
 * `tail` taking it. */
#define EB_GEMM_RUNS(w4, w2, w1, left, start)                                             \
    start "cmp    r2, #128\n\t"                                                            \
               "blt    2f\n"                                                              \
               "1:\n\t" w4 left "cmp    r2, #128\n\t"                                      \
               "bge    1b\n"                                                              \
               "2:\n\t"                                                                   \
               "tst    r2, #64\n\t"                                                       \
               "beq    3f\n\t" w2 left "3:\n\t"                                            \
               "tst    r2, #32\n\t"                                                       \
               "beq    4f\n\t" w1 "4:\n\t"
#define EB_GEMM_TAIL(tail)                                                                \
    "ldr    r2, [r0, #40]\n\t"                                                             \
    "cmp    r2, #32\n\t"                                                                   \
    "beq    5f\n\t"                                                                        \
    "ldr    r1, [r0, #36]\n\t"                                                             \
    "add    r11, r11, r1\n\t" tail "5:\n\t"

/* A row's whole weight words in passes of 4 (WORD one of them, advancing the columns), the
 * first pass entered by a TBB at its word `skip` (the job's offset 56: (4 - words % 4) % 4,
 * so that it does the words % 4 the other passes leave): per row a load and the TBB where
 * runs of 4, 2 and 1 tested the bytes of columns left (7 instructions for a row of 5 words,
 * 3 for 4), and 2 per pass, not 3; one copy of WORD per pass, not seven. Every instruction
 * of WORD has one size (no 16-bit form), so that the assembler works out the table. */
#define EB_GEMM_PASSES(word)                                                              \
    "ldr    r2, [r0, #56]\n\t"                                                            \
    "tbb    [pc, r2]\n"                                                                   \
    "10:\n\t"                                                                              \
    ".byte  (11f - 10b) / 2, (12f - 10b) / 2, (13f - 10b) / 2, (14f - 10b) / 2\n"          \
    "11:\n\t" word "12:\n\t" word "13:\n\t" word "14:\n\t" word                          \
    "cmp    r12, lr\n\t"                                                                  \
    "bne    11b\n\t"

/* r0: the job; r1, r2: weight word halves; r3-r6: column words; r7-r10: the sums (init:
 * r7's copies); r11: w; r12: columns; lr: cend. WORD(ld): one weight word, FIN: the
 * requantization and the store. */
#define EB_GEMM_FN(name, init, WORD, FIN)                                                 \
    static __attribute__((naked, noinline)) void name(eb_gemm_job *job                    \
                                                      __attribute__((unused)))            \
    {                                                                                     \
        __asm__ volatile(                                                                 \
            "push   {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                           \
            "ldr    r11, [r0, #0]\n\t"                                                    \
            "ldr    lr, [r0, #8]\n"                                                       \
            "0:\n\t"                                                                      \
            "ldr    r2, [r0, #12]\n\t"                                                    \
            "ldr    r7, [r2], #4\n\t"                                                     \
            "ldr    r1, [r0, #44]\n\t"                                                    \
            "cmp    r7, r1\n\t"                                                           \
            "bgt    9f\n\t"                                                               \
            "str    r2, [r0, #12]\n\t"                                                    \
            "ldr    r2, [r0, #28]\n\t"                                                    \
            "add    r7, r7, r2\n\t" init                                                  \
            "ldr    r12, [r0, #4]\n\t"                                                    \
            EB_GEMM_PASSES(WORD(EB_GEMM_LDW))                                             \
            EB_GEMM_TAIL("ldr    r1, [r11, #-4]\n\tlsr    r1, r1, r2\n\t" WORD(""))      \
            "ldr    r2, [r0, #32]\n\t"                                                    \
            "asr    r7, r7, r2\n\t" FIN                                                   \
            "ldr    r1, [r0, #20]\n\t"                                                    \
            "add    r2, r2, r1\n\t"                                                       \
            "str    r2, [r0, #16]\n\t"                                                    \
            "ldr    r2, [r0, #24]\n\t"                                                    \
            "subs   r2, r2, #1\n\t"                                                       \
            "str    r2, [r0, #24]\n\t"                                                    \
            "bne    0b\n"                                                                 \
            "9:\n\t"                                                                      \
            "str    r11, [r0, #0]\n\t"                                                    \
            "pop    {r4, r5, r6, r7, r8, r9, r10, r11, pc}");                             \
    }
/* Two rows against a block of 2 pixels: one weight word of row A (r11) and row B (lr) against
 * the pixels' chunk at r12 + off (r3-r6), loaded once for both rows by four LDRs, which
 * pipeline behind the weight's (6 cycles for the five, where LDR + LDM take 7): 18
 * instructions and 20 cycles for 16 MACs, where two calls of EB_GEMM2_WORD_ASM take 18 and
 * 28. The callers advance r12 past the words they unroll. */
#define EB_GEMM22_WORD_ASM(lda, ldb, off)                                                 \
    lda "ldr    r3, [r12, #" #off "]\n\t"                                                 \
        "ldr    r4, [r12, #" #off " + 4]\n\t"                                             \
        "ldr    r5, [r12, #" #off " + 8]\n\t"                                             \
        "ldr    r6, [r12, #" #off " + 12]\n\t"                                            \
        "sxtb16 r2, r1\n\t"                                                               \
        "sxtb16 r1, r1, ror #8\n\t"                                                       \
        "smlad  r7, r2, r3, r7\n\t"                                                       \
        "smlad  r7, r1, r4, r7\n\t"                                                       \
        "smlad  r8, r2, r5, r8\n\t"                                                       \
        "smlad  r8, r1, r6, r8\n\t" ldb                                                   \
        "sxtb16 r2, r1\n\t"                                                               \
        "sxtb16 r1, r1, ror #8\n\t"                                                       \
        "smlad  r9, r2, r3, r9\n\t"                                                       \
        "smlad  r9, r1, r4, r9\n\t"                                                       \
        "smlad  r10, r2, r5, r10\n\t"                                                     \
        "smlad  r10, r1, r6, r10\n\t"
#define EB_GEMM22_LEFT "ldr    r2, [sp]\n\tsub    r2, r2, r12\n\t" /* cend on the stack */
#define EB_GEMM22_WORD(off)                                                               \
    EB_GEMM22_WORD_ASM("ldr    r1, [r11], #4\n\t", "ldr    r1, [lr], #4\n\t", off)
/* The tail words (the rows' last, shifted right by tsh = r2; r11 and lr at the rows' ends). */
#define EB_GEMM22_TAIL                                                                    \
    EB_GEMM22_WORD_ASM("ldr    r1, [r11, #-4]\n\tlsr    r1, r1, r2\n\t",                \
                       "ldr    r2, [r0, #40]\n\tldr    r1, [lr, #-4]\n\tlsr    r1, r1, r2\n\t", \
                       0)

/* eb_gemm2_* for a block of exactly 2 pixels, two rows at a time (A, then B = A + k): the
 * sums r7, r8 (A) and r9, r10 (B); the row loop as EB_GEMM_FN's, with cend on the stack (no
 * register left). It stops before a pair with a row whose bias exceeds lim, or with fewer
 * than 2 rows left: eb_gemm2_* then takes the rest. */
#define EB_GEMM22_FN(name, sat, bits)                                                     \
    static __attribute__((naked, noinline)) void name(eb_gemm_job *job                    \
                                                      __attribute__((unused)))            \
    {                                                                                     \
        __asm__ volatile(                                                                 \
            "push   {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                           \
            "sub    sp, sp, #4\n\t"                                                       \
            "ldr    r11, [r0, #0]\n\t"                                                    \
            "ldr    r2, [r0, #8]\n\t"                                                     \
            "str    r2, [sp]\n"                                                           \
            "0:\n\t"                                                                      \
            "ldr    r1, [r0, #24]\n\t"                                                    \
            "cmp    r1, #2\n\t"                                                           \
            "blt    9f\n\t"                                                               \
            "ldr    r2, [r0, #12]\n\t"                                                    \
            "ldr    r7, [r2]\n\t"                                                         \
            "ldr    r9, [r2, #4]\n\t"                                                     \
            "ldr    r1, [r0, #44]\n\t"                                                    \
            "cmp    r7, r1\n\t"                                                           \
            "bgt    9f\n\t"                                                               \
            "cmp    r9, r1\n\t"                                                           \
            "bgt    9f\n\t"                                                               \
            "add    r2, r2, #8\n\t"                                                       \
            "str    r2, [r0, #12]\n\t"                                                    \
            "ldr    r2, [r0, #28]\n\t"                                                    \
            "add    r7, r7, r2\n\t"                                                       \
            "add    r9, r9, r2\n\t"                                                       \
            "mov    r8, r7\n\t"                                                           \
            "mov    r10, r9\n\t"                                                          \
            "ldr    r12, [r0, #4]\n\t"                                                    \
            "ldr    r2, [sp]\n\t"                                                         \
            "sub    r2, r2, r12\n\t"                                                      \
            "ldr    r1, [r0, #36]\n\t"                                                    \
            "add    lr, r11, r1\n\t"                                                      \
            "add    lr, lr, r2, lsr #3\n\t"                                               \
            EB_GEMM_RUNS(EB_GEMM22_WORD(0) EB_GEMM22_WORD(32) EB_GEMM22_WORD(64)            \
                             EB_GEMM22_WORD(96) "add    r12, r12, #128\n\t",              \
                         EB_GEMM22_WORD(0) EB_GEMM22_WORD(32) "add    r12, r12, #64\n\t", \
                         EB_GEMM22_WORD(0) "add    r12, r12, #32\n\t", EB_GEMM22_LEFT, "")  \
            EB_GEMM_TAIL("add    lr, lr, r1\n\t" EB_GEMM22_TAIL)                         \
            "ldr    r2, [r0, #32]\n\t" EB_ASM_ASR4("r7", "r8", "r9", "r10", "r2")         \
                EB_ASM_SAT4(sat, bits, "r7", "r8", "r9", "r10")                             \
            "ldr    r2, [r0, #16]\n\t"                                                    \
            "ldr    r1, [r0, #20]\n\t"                                                    \
            "strb   r7, [r2]\n\t"                                                         \
            "strb   r8, [r2, #1]\n\t"                                                     \
            "add    r2, r2, r1\n\t"                                                       \
            "strb   r9, [r2]\n\t"                                                         \
            "strb   r10, [r2, #1]\n\t"                                                    \
            "add    r2, r2, r1\n\t"                                                       \
            "str    r2, [r0, #16]\n\t"                                                    \
            "ldr    r1, [r0, #24]\n\t"                                                    \
            "sub    r1, r1, #2\n\t"                                                       \
            "str    r1, [r0, #24]\n\t"                                                    \
            "mov    r11, lr\n\t"                                                          \
            "b      0b\n"                                                                 \
            "9:\n\t"                                                                      \
            "str    r11, [r0, #0]\n\t"                                                    \
            "add    sp, sp, #4\n\t"                                                       \
            "pop    {r4, r5, r6, r7, r8, r9, r10, r11, pc}");                             \
    }
#if EB_HAS_GEMM_2PX && EB_HAS_Q_RELU
EB_GEMM22_FN(eb_gemm22_relu, "usat", "#7")
#endif
#if EB_HAS_GEMM_2PX && EB_HAS_Q_NONE
EB_GEMM22_FN(eb_gemm22_none, "ssat", "#8")
#endif

#define EB_GEMM4_INIT "mov    r8, r7\n\tmov    r9, r7\n\tmov    r10, r7\n\t"
#if EB_HAS_Q_RELU
EB_GEMM_FN(eb_gemm4_relu, EB_GEMM4_INIT, EB_GEMM4_WORD_ASM, EB_GEMM4_FIN("usat", "#7"))
EB_GEMM_FN(eb_gemm2_relu, "mov    r8, r7\n\t", EB_GEMM2_WORD_ASM, EB_GEMM2_FIN("usat", "#7"))
#endif
#if EB_HAS_Q_NONE
EB_GEMM_FN(eb_gemm4_none, EB_GEMM4_INIT, EB_GEMM4_WORD_ASM, EB_GEMM4_FIN("ssat", "#8"))
EB_GEMM_FN(eb_gemm2_none, "mov    r8, r7\n\t", EB_GEMM2_WORD_ASM, EB_GEMM2_FIN("ssat", "#8"))
#endif

/* eb_linear_fast's blocks of four rows by hand (int8 weights, k >= 4 inputs): the block
 * loop in registers too, so that a narrow layer's block pays no C around its words. The job
 * is copied to the stack on entry, which leaves 14 registers to the word loop: per word of the
 * four rows 23 instructions for 16 MACs, two words an iteration (entered at the second for an
 * odd count): the column pair by one LDRD, the rows' words by pairs of LDRs (the second row
 * of each pair at k - 4 past the first's advanced pointer; the second LDR pipelines behind
 * the first). A last input goes by LDRSB and SMLABB per row, the last 2 or 3 as one more
 * word (their bytes past the row meet zeros in the column: the caller leaves a last block
 * without a row after it to C). Then per row the C form's requantization (ASR s - 1, QADD of
 * the half-up flag, USAT #7 / SSAT #8 of that ASR #1) and a STRB: about 40 instructions a
 * block around its words. */
typedef struct {
    const int8_t *w;      /* 0: the next block's first row */
    const int16_t *c;     /* 4: the column */
    const int16_t *cend;  /* 8: the end of its whole words */
    const int32_t *bias;  /* 12: the next block's four (no bias: four zeros) */
    int32_t bstep;        /* 16: 16 bytes, or 0 (no bias) */
    int32_t km4, k4;      /* 20, 24: k - 4; 4 k, a block's weights */
    int32_t s1, h;        /* 28, 32: the right shift less one; 1 half up, 0 floor */
    int32_t blocks, tail; /* 36, 40: blocks left; k % 4 */
    int32_t odd;          /* 44: an odd count of whole words */
    int8_t *out;          /* 48 */
} eb_linear_job;

/* One word of the four rows (r8: rows 0, 1; r9: rows 2, 3; r11: k - 4) against the column
 * pair at r10 into r4..r7 (r2, r3, lr scratch). */
#define EB_LINEAR_ROWS2_ASM(w, a, b)                                                      \
    "ldr    r2, [" w "], #4\n\t"                                                          \
    "ldr    lr, [" w ", r11]\n\t"                                                         \
    "sxtb16 r3, r2\n\t"                                                                   \
    "smlad  " a ", r3, r0, " a "\n\t"                                                     \
    "sxtb16 r2, r2, ror #8\n\t"                                                           \
    "smlad  " a ", r2, r1, " a "\n\t"                                                     \
    "sxtb16 r3, lr\n\t"                                                                   \
    "smlad  " b ", r3, r0, " b "\n\t"                                                     \
    "sxtb16 lr, lr, ror #8\n\t"                                                           \
    "smlad  " b ", lr, r1, " b "\n\t"
#define EB_LINEAR_WORD_ASM                                                                \
    "ldrd   r0, r1, [r10], #8\n\t" EB_LINEAR_ROWS2_ASM("r8", "r4", "r5")                  \
        EB_LINEAR_ROWS2_ASM("r9", "r6", "r7")

/* eb_linear4's and the short forms' requantization of four sums (a..d): ASR by the register
 * s1 (the right shift less one), QADD of the half-up flag h, USAT #7 / SSAT #8 of that
 * ASR #1; then their four STRB at o, advancing it a word. */
#define EB_LINEAR_Q4_ASM(sat, bits, a, b, c, d, s1, h)                                     \
    EB_ASM_ASR4(a, b, c, d, s1)                                                            \
    "qadd   " a ", " a ", " h "\n\t"                                                      \
    "qadd   " b ", " b ", " h "\n\t"                                                      \
    "qadd   " c ", " c ", " h "\n\t"                                                      \
    "qadd   " d ", " d ", " h "\n\t" EB_ASM_SAT4_ASR(sat, bits, a, b, c, d, "#1")
#define EB_LINEAR_ST4_ASM(a, b, c, d, o)                                                   \
    "strb   " b ", [" o ", #1]\n\t"                                                       \
    "strb   " c ", [" o ", #2]\n\t"                                                       \
    "strb   " d ", [" o ", #3]\n\t"                                                       \
    "strb   " a ", [" o "], #4\n\t"

#define EB_LINEAR4_FN(name, sat, bits)                                                    \
    static __attribute__((naked, noinline)) void name(eb_linear_job *job                  \
                                                      __attribute__((unused)))            \
    {                                                                                     \
        __asm__ volatile(                                                                 \
            "push   {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                           \
            "sub    sp, sp, #52\n\t"                                                      \
            "ldmia  r0, {r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12, lr}\n\t"      \
            "stmia  sp, {r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12, lr}\n"        \
            "0:\n\t"                                                                      \
            "ldr    r8, [sp, #0]\n\t"                                                     \
            "ldrd   r11, r3, [sp, #20]\n\t"                                               \
            "add    r3, r8, r3\n\t"                                                       \
            "str    r3, [sp, #0]\n\t"                                                     \
            "add    r9, r8, r11, lsl #1\n\t"                                              \
            "add    r9, r9, #8\n\t"                                                       \
            "ldrd   r0, r1, [sp, #12]\n\t"                                                \
            "ldmia  r0, {r4, r5, r6, r7}\n\t"                                             \
            "add    r0, r0, r1\n\t"                                                       \
            "str    r0, [sp, #12]\n\t"                                                    \
            "ldrd   r10, r12, [sp, #4]\n\t"                                               \
            "ldr    r0, [sp, #44]\n\t"                                                    \
            "cbnz   r0, 2f\n"                                                             \
            "1:\n\t" EB_LINEAR_WORD_ASM                                                   \
            "2:\n\t" EB_LINEAR_WORD_ASM                                                   \
            "cmp    r10, r12\n\t"                                                         \
            "bne    1b\n\t"                                                               \
            "ldr    r0, [sp, #40]\n\t"                                                    \
            "cmp    r0, #1\n\t"                                                           \
            "blt    4f\n\t"                                                               \
            "bgt    3f\n\t"                                                               \
            "ldrsh  r0, [r10]\n\t"                                                        \
            "add    r3, r11, #4\n\t"                                                      \
            "ldrsb  r1, [r8]\n\t"                                                         \
            "ldrsb  r2, [r8, r3]\n\t"                                                     \
            "smlabb r4, r1, r0, r4\n\t"                                                   \
            "smlabb r5, r2, r0, r5\n\t"                                                   \
            "ldrsb  r1, [r9]\n\t"                                                         \
            "ldrsb  r2, [r9, r3]\n\t"                                                     \
            "smlabb r6, r1, r0, r6\n\t"                                                   \
            "smlabb r7, r2, r0, r7\n\t"                                                   \
            "b      4f\n"                                                                 \
            "3:\n\t" EB_LINEAR_WORD_ASM                                                   \
            "4:\n\t"                                                                      \
            "ldrd   r0, r1, [sp, #28]\n\t"                                                \
            "ldr    r2, [sp, #48]\n\t"                                                    \
                EB_LINEAR_Q4_ASM(sat, bits, "r4", "r5", "r6", "r7", "r0", "r1")           \
                    EB_LINEAR_ST4_ASM("r4", "r5", "r6", "r7", "r2")                       \
            "str    r2, [sp, #48]\n\t"                                                    \
            "ldr    r0, [sp, #36]\n\t"                                                    \
            "subs   r0, r0, #1\n\t"                                                       \
            "str    r0, [sp, #36]\n\t"                                                    \
            "bne    0b\n\t"                                                               \
            "add    sp, sp, #52\n\t"                                                      \
            "pop    {r4, r5, r6, r7, r8, r9, r10, r11, pc}");                             \
    }
#if EB_HAS_LINEAR_Q
#define EB_LINEAR_ASM 1
#endif
#if EB_HAS_LINEAR_Q && EB_HAS_Q_RELU
EB_LINEAR4_FN(eb_linear4_relu, "usat", "#7")
#endif
#if EB_HAS_LINEAR_Q && EB_HAS_Q_NONE
EB_LINEAR4_FN(eb_linear4_none, "ssat", "#8")
#endif

/* Linear layers of 4..EB_LINEAR_SHORT_MAX inputs by hand, a form per input count K
 * (eb_linear_k<K>_relu / _none; EB_OPT_NO_LINEAR_K<K> leaves K's out): the whole column in
 * registers for the layer (r0..r5: [c0 c2], [c1 c3] of each of its 1..3 words) and each
 * block's 4 rows read at immediate offsets from the block's first (row r's word j at
 * r K + 4 j), so that a block costs its words -- per row and word an LDR, two SXTB16 and two
 * SMLAD -- and 23 instructions beside them: the biases by one LDM, the requantization of
 * eb_linear4 (ASR s - 1, QADD of the half-up flag, USAT #7 / SSAT #8 of that ASR #1), four
 * STRB, the loop. eb_linear4 spent 38 a block beside its words and reloaded the column word
 * by word: 11 -> 1594 ran 26.2 instructions a row there, 20.7 here. A row's last 1 or 2 weights go
 * byte by byte (EB_LS_BYTE, EB_LS_HALF); its last 3 as a word, which reads a byte past the
 * row that meets a zero in the column: the caller leaves a last block without a row after
 * it to C where K % 4 is 3. The job: the weights, biases and their end (4 a block), the output, the
 * right shift less one, the half-up flag, the column. */
typedef struct {
    const int8_t *w;                   /* 0 */
    const int32_t *bias, *bend;        /* 4, 8 */
    int8_t *out;                       /* 12 */
    int32_t s1, h;                     /* 16, 20 */
    const int16_t *c;                  /* 24 */
} eb_lshort_job;

#define EB_LINEAR_SHORT_MAX 12
#define EB_LS_WORD(K, r, j, a, xa, xb)                                                     \
    "ldr    r11, [r10, #(" #r " * " #K " + " #j " * 4)]\n\t"                                \
    "sxtb16 r12, r11\n\t"                                                                  \
    "smlad  " a ", r12, " xa ", " a "\n\t"                                                 \
    "sxtb16 r11, r11, ror #8\n\t"                                                          \
    "smlad  " a ", r11, " xb ", " a "\n\t"
/* A block's first word, row 0's at the block's start: loaded with r10 moved there (pre-index
 * writeback from the block before: r10 starts a block, 4 K bytes, early), so that no ADD
 * steps the rows. */
#define EB_LS_WORD0(K, a)                                                                  \
    "ldr    r11, [r10, #(4 * " #K ")]!\n\t"                                                 \
    "sxtb16 r12, r11\n\t"                                                                  \
    "smlad  " a ", r12, r0, " a "\n\t"                                                     \
    "sxtb16 r11, r11, ror #8\n\t"                                                          \
    "smlad  " a ", r11, r1, " a "\n\t"
/* A row's last 1 or 2 weights (K % 4 of 1, 2) byte by byte: LDRSB and SMLABB against the
 * column lane in the bottom of xa (xb), 2 (4) instructions where a word took 5 -- and no
 * read past the row. */
#define EB_LS_BYTE(K, r, j, a, xa)                                                         \
    "ldrsb  r11, [r10, #(" #r " * " #K " + " #j " * 4)]\n\t"                               \
    "smlabb " a ", r11, " xa ", " a "\n\t"
#define EB_LS_HALF(K, r, j, a, xa, xb)                                                     \
    "ldrsb  r11, [r10, #(" #r " * " #K " + " #j " * 4)]\n\t"                               \
    "ldrsb  r12, [r10, #(" #r " * " #K " + " #j " * 4 + 1)]\n\t"                           \
    "smlabb " a ", r11, " xa ", " a "\n\t"                                                 \
    "smlabb " a ", r12, " xb ", " a "\n\t"
/* A row's words after its first (REST: the form's), and a whole row. */
#define EB_LS_REST1(K, r, a)
#define EB_LS_REST2(K, r, a) EB_LS_WORD(K, r, 1, a, "r2", "r3")
#define EB_LS_REST3(K, r, a) EB_LS_REST2(K, r, a) EB_LS_WORD(K, r, 2, a, "r4", "r5")
#define EB_LS_REST1B(K, r, a) EB_LS_BYTE(K, r, 1, a, "r2")
#define EB_LS_REST1H(K, r, a) EB_LS_HALF(K, r, 1, a, "r2", "r3")
#define EB_LS_REST2B(K, r, a) EB_LS_REST2(K, r, a) EB_LS_BYTE(K, r, 2, a, "r4")
#define EB_LS_REST2H(K, r, a) EB_LS_REST2(K, r, a) EB_LS_HALF(K, r, 2, a, "r4", "r5")
#define EB_LS_ROW(K, r, a, REST) EB_LS_WORD(K, r, 0, a, "r0", "r1") REST(K, r, a)
#define EB_LS_COL1 "ldmia  r12, {r0, r1}\n\t"
#define EB_LS_COL2 "ldmia  r12, {r0, r1, r2, r3}\n\t"
#define EB_LS_COL3 "ldmia  r12, {r0, r1, r2, r3, r4, r5}\n\t"

#define EB_LINEAR_SHORT_FN(name, K, REST, COL, sat, bits)                                   \
    static __attribute__((naked, noinline)) void name(const eb_lshort_job *job             \
                                                      __attribute__((unused)))             \
    {                                                                                      \
        __asm__ volatile(                                                                  \
            "push   {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                            \
            "sub    sp, sp, #16\n\t"                                                       \
            "ldmia  r0, {r1, r2, r3, r4, r5, r6, r7}\n\t"                                  \
            "stmia  sp, {r3, r4, r5, r6}\n\t"                                              \
            "sub    r10, r1, #(4 * " #K ")\n\t"                                             \
            "mov    lr, r2\n\t"                                                            \
            "mov    r12, r7\n\t" COL                                                       \
            "1:\n\t"                                                                       \
            "ldmia  lr!, {r6, r7, r8, r9}\n\t" EB_LS_WORD0(K, "r6") REST(K, 0, "r6")        \
                EB_LS_ROW(K, 1, "r7", REST) EB_LS_ROW(K, 2, "r8", REST)                    \
                    EB_LS_ROW(K, 3, "r9", REST)                                            \
            "ldrd   r11, r12, [sp, #8]\n\t"                                                \
                EB_LINEAR_Q4_ASM(sat, bits, "r6", "r7", "r8", "r9", "r11", "r12")         \
            "ldrd   r11, r12, [sp, #0]\n\t" EB_LINEAR_ST4_ASM("r6", "r7", "r8", "r9", "r12") \
            "str    r12, [sp, #4]\n\t"                                                     \
            "cmp    lr, r11\n\t"                                                           \
            "bne    1b\n\t"                                                                \
            "add    sp, sp, #16\n\t"                                                       \
            "pop    {r4, r5, r6, r7, r8, r9, r10, r11, pc}");                              \
    }
/* The forms of K linked: its gate (EB_LS_K<K>) and the output forms'. */
#if EB_HAS_LINEAR_Q && EB_HAS_Q_RELU
#define EB_LS_R(...) __VA_ARGS__
#else
#define EB_LS_R(...)
#endif
#if EB_HAS_LINEAR_Q && EB_HAS_Q_NONE
#define EB_LS_N(...) __VA_ARGS__
#else
#define EB_LS_N(...)
#endif
#define EB_LS_FORMS(K, REST, COL)                                                          \
    EB_LS_R(EB_LINEAR_SHORT_FN(eb_linear_k##K##_relu, K, REST, COL, "usat", "#7"))          \
    EB_LS_N(EB_LINEAR_SHORT_FN(eb_linear_k##K##_none, K, REST, COL, "ssat", "#8"))
#define EB_LS_PICK(K)                                                                      \
    EB_LS_R(if (k == (K) && relu) { return eb_linear_k##K##_relu; })                        \
    EB_LS_N(if (k == (K) && !relu) { return eb_linear_k##K##_none; })
#ifdef EB_OPT_NO_LINEAR_K4
#define EB_LS_K4(...)
#else
#define EB_LS_K4(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_LINEAR_K5
#define EB_LS_K5(...)
#else
#define EB_LS_K5(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_LINEAR_K6
#define EB_LS_K6(...)
#else
#define EB_LS_K6(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_LINEAR_K7
#define EB_LS_K7(...)
#else
#define EB_LS_K7(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_LINEAR_K8
#define EB_LS_K8(...)
#else
#define EB_LS_K8(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_LINEAR_K9
#define EB_LS_K9(...)
#else
#define EB_LS_K9(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_LINEAR_K10
#define EB_LS_K10(...)
#else
#define EB_LS_K10(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_LINEAR_K11
#define EB_LS_K11(...)
#else
#define EB_LS_K11(...) __VA_ARGS__
#endif
#ifdef EB_OPT_NO_LINEAR_K12
#define EB_LS_K12(...)
#else
#define EB_LS_K12(...) __VA_ARGS__
#endif
EB_LS_K4(EB_LS_FORMS(4, EB_LS_REST1, EB_LS_COL1))
EB_LS_K5(EB_LS_FORMS(5, EB_LS_REST1B, EB_LS_COL2))
EB_LS_K6(EB_LS_FORMS(6, EB_LS_REST1H, EB_LS_COL2))
EB_LS_K7(EB_LS_FORMS(7, EB_LS_REST2, EB_LS_COL2))
EB_LS_K8(EB_LS_FORMS(8, EB_LS_REST2, EB_LS_COL2))
EB_LS_K9(EB_LS_FORMS(9, EB_LS_REST2B, EB_LS_COL3))
EB_LS_K10(EB_LS_FORMS(10, EB_LS_REST2H, EB_LS_COL3))
EB_LS_K11(EB_LS_FORMS(11, EB_LS_REST3, EB_LS_COL3))
EB_LS_K12(EB_LS_FORMS(12, EB_LS_REST3, EB_LS_COL3))
#if EB_HAS_LINEAR_Q /* (eb_linear_asm's condition: EB_LINEAR_ASM) */
typedef void (*eb_lshort_fn)(const eb_lshort_job *);

/* The form for k inputs, relu or none, when linked; NULL otherwise. */
static eb_lshort_fn eb_linear_short_of(int k, int relu)
{
    EB_LS_K4(EB_LS_PICK(4))
    EB_LS_K5(EB_LS_PICK(5))
    EB_LS_K6(EB_LS_PICK(6))
    EB_LS_K7(EB_LS_PICK(7))
    EB_LS_K8(EB_LS_PICK(8))
    EB_LS_K9(EB_LS_PICK(9))
    EB_LS_K10(EB_LS_PICK(10))
    EB_LS_K11(EB_LS_PICK(11))
    EB_LS_K12(EB_LS_PICK(12))
    (void)k;
    (void)relu;
    return NULL;
}
#endif

#endif
