/* edgebuild float32 training kernels, Cortex-M4F only: the loops under the training passes
 * in assembly, included by eb_train.c where EBT_ASM is defined (GCC, Thumb-2, a
 * single-precision FPU with fused multiply-add, optimisation on). Each has a portable twin
 * in eb_train.c that does the same operations in the same order (named at each: conv_row8
 * for the correlations, rows8_c, cols16_c, dots8's loop, relu_clamp_bits...); the host
 * runs the twins, tests/test_train_asm_m4.py holds the two to the same bits. No global
 * symbol.
 *
 * Why assembly: VLDM loads up to 16 consecutive floats in ONE instruction, and GCC never
 * merges float loads into it. A block of 8 sums over 8 steps needs 8 step values and the
 * 15 inputs they slide over: two VLDMs for 64 VFMAs, about 1.08 instructions per
 * multiply-add, where the compiled C loads each float on its own (and moves registers to
 * slide its window), about 1.7. */
#if !defined(EB_TRAIN_ASM_H) && defined(EBT_ASM)
#define EB_TRAIN_ASM_H

/* One step t of the 8 sums: a[i] += S * x[t + i], S the step's value, X0..X7 the registers
 * holding x[t .. t + 8). */
#define EBT_STEP(S, X0, X1, X2, X3, X4, X5, X6, X7)                                      \
    "vfma.f32 %[a0], " S ", " X0 "\n\t"                                                   \
    "vfma.f32 %[a1], " S ", " X1 "\n\t"                                                   \
    "vfma.f32 %[a2], " S ", " X2 "\n\t"                                                   \
    "vfma.f32 %[a3], " S ", " X3 "\n\t"                                                   \
    "vfma.f32 %[a4], " S ", " X4 "\n\t"                                                   \
    "vfma.f32 %[a5], " S ", " X5 "\n\t"                                                   \
    "vfma.f32 %[a6], " S ", " X6 "\n\t"                                                   \
    "vfma.f32 %[a7], " S ", " X7 "\n\t"

/* Four steps (R0..R3: the registers of their values, in step order) over x in s0..s10. */
#define EBT_STEPS4(R0, R1, R2, R3)                                                        \
    EBT_STEP(R0, "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7")                          \
    EBT_STEP(R1, "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8")                          \
    EBT_STEP(R2, "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9")                          \
    EBT_STEP(R3, "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10")

/* Eight steps over x in s0..s14. */
#define EBT_STEPS8(R0, R1, R2, R3, R4, R5, R6, R7)                                        \
    EBT_STEPS4(R0, R1, R2, R3)                                                            \
    EBT_STEP(R4, "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11")                        \
    EBT_STEP(R5, "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12")                       \
    EBT_STEP(R6, "s6", "s7", "s8", "s9", "s10", "s11", "s12", "s13")                      \
    EBT_STEP(R7, "s7", "s8", "s9", "s10", "s11", "s12", "s13", "s14")

/* The whole correlation: steps 8 at a time, then 4, then one by one (n >= 0; after the
 * first SUBS, n's low three bits stay the steps left). LD loads the step values: VLDMIA
 * walks them up, VLDMDB down (the value of step t is then the register loaded t from the
 * top): STEPS8 and STEPS4 name them in step order, R4 the four registers a 4-step loads,
 * ONE the register of a single step, STEP1 that step. X8, X4, X1: the inputs each kind of
 * step loads (8 sums: s0-s14, s0-s10, s0-s7; 4 sums: s0-s10, s0-s6, s0-s3). The sums stay
 * in the registers GCC gives them. */
#define EBT_CORR(LD, X8, STEPS8, R4, X4, STEPS4, ONE, X1, STEP1)                          \
    "subs    %[n], %[n], #8\n\t"                                                          \
    "blt     2f\n"                                                                        \
    "1:\n\t" LD " %[s]!, {s16-s23}\n\t"                                                   \
    "vldmia  %[x], {" X8 "}\n\t"                                                          \
    "adds    %[x], %[x], #32\n\t" STEPS8                                                  \
    "subs    %[n], %[n], #8\n\t"                                                          \
    "bge     1b\n"                                                                        \
    "2:\n\t"                                                                              \
    "tst     %[n], #4\n\t"                                                                \
    "beq     3f\n\t" LD " %[s]!, {" R4 "}\n\t"                                            \
    "vldmia  %[x], {" X4 "}\n\t"                                                          \
    "adds    %[x], %[x], #16\n\t" STEPS4                                                  \
    "3:\n\t"                                                                              \
    "ands    %[n], %[n], #3\n\t"                                                          \
    "beq     5f\n"                                                                        \
    "4:\n\t" LD " %[s]!, {" ONE "}\n\t"                                                   \
    "vldmia  %[x], {" X1 "}\n\t"                                                          \
    "adds    %[x], %[x], #4\n\t" STEP1                                                    \
    "subs    %[n], %[n], #1\n\t"                                                          \
    "bne     4b\n"                                                                        \
    "5:\n"

/* The correlation of 8 sums (GCC's registers for them: s15, s24..s31, the rest taken). */
#define EBT_CORR8(LD, STEPS8, R4, STEPS4, ONE)                                            \
    EBT_CORR(LD, "s0-s14", STEPS8, R4, "s0-s10", STEPS4, ONE, "s0-s7",                    \
             EBT_STEP(ONE, "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"))

/* The 8 sums a[0..8) in and out of the variables a0..a7 the assembly names. */
#define EBT_SUMS8_IN(a)                                                                   \
    float a0 = (a)[0], a1 = (a)[1], a2 = (a)[2], a3 = (a)[3], a4 = (a)[4], a5 = (a)[5],   \
          a6 = (a)[6], a7 = (a)[7]
#define EBT_SUMS8_OUT(a)                                                                  \
    ((a)[0] = a0, (a)[1] = a1, (a)[2] = a2, (a)[3] = a3, (a)[4] = a4, (a)[5] = a5,        \
     (a)[6] = a6, (a)[7] = a7)

/* a[i] += sum over t < n of s[t] * x[t + i], i < 8, t in order (one rounding each: VFMA).
 * s walks up. */
EBT_INLINE void ebt_corr8_up(float a[8], const float *s, const float *x, int n)
{
    EBT_SUMS8_IN(a);
    __asm__ volatile(
        EBT_CORR8("vldmia ", EBT_STEPS8("s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23"),
                  "s16-s19", EBT_STEPS4("s16", "s17", "s18", "s19"), "s16")
        : [a0] "+t"(a0), [a1] "+t"(a1), [a2] "+t"(a2), [a3] "+t"(a3), [a4] "+t"(a4),
          [a5] "+t"(a5), [a6] "+t"(a6), [a7] "+t"(a7), [s] "+r"(s), [x] "+r"(x), [n] "+r"(n)
        :
        : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12",
          "s13", "s14", "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23", "cc",
          "memory");
    EBT_SUMS8_OUT(a);
}

/* Blocks of 8 outputs of a row, each the sum over the rows of a table of a correlation
 * (eb_train.c's ebt_rows8 and its portable twin rows8_c): the block loop, the row loop and
 * the 8 sums all stay in registers (s24..s31), so that a block costs its taps and about 10
 * instructions, where a loop in C around ebt_corr8_up spends over a hundred per block on
 * its geometry. A block starts from 8 values at init (init_step floats on per block: 0 or
 * 8) and ends in one VSTM. */
#define EBT_ROWS8(LD, STEPS8, R4, STEPS4, ONE)                                            \
    "6:\n\t"                                                                              \
    "vldmia  %[init], {s24-s31}\n\t"                                                      \
    "ldr     %[t], [%[job], #12]\n\t"                                                     \
    "add     %[init], %[init], %[t], lsl #2\n\t"                                          \
    "ldr     %[t], [%[job]]\n\t"                                                          \
    "ldr     %[e], [%[job], #4]\n"                                                        \
    "7:\n\t"                                                                              \
    "ldrd    %[x], %[s], [%[t]], #8\n\t"                                                  \
    "add     %[x], %[xb], %[x], lsl #2\n\t"                                               \
    "ldr     %[n], [%[job], #8]\n\t" EBT_CORR8(LD, STEPS8, R4, STEPS4, ONE)                \
    "subs    %[e], %[e], #1\n\t"                                                          \
    "bne     7b\n\t"                                                                      \
    "vstmia  %[out]!, {s24-s31}\n\t"                                                      \
    "adds    %[xb], %[xb], #32\n\t"                                                       \
    "subs    %[nb], %[nb], #1\n\t"                                                        \
    "bne     6b\n"

#define EBT_ROWS8_OPERANDS                                                                \
    : [a0] "=&t"(a0), [a1] "=&t"(a1), [a2] "=&t"(a2), [a3] "=&t"(a3), [a4] "=&t"(a4),     \
      [a5] "=&t"(a5), [a6] "=&t"(a6), [a7] "=&t"(a7), [out] "+r"(out), [init] "+r"(init), \
      [xb] "+r"(x), [nb] "+r"(blocks), [t] "=&r"(t), [e] "=&r"(e), [x] "=&r"(xr),        \
      [s] "=&r"(sr), [n] "=&r"(n)                                                         \
    : [job] "r"(job)                                                                      \
    : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12",    \
      "s13", "s14", "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23", "cc", "memory"

/* The 8 sums pinned to s24..s31, the registers the block's VLDM and VSTM name. */
#define EBT_ROWS8_SUMS                                                                    \
    register float a0 __asm__("s24");                                                     \
    register float a1 __asm__("s25");                                                     \
    register float a2 __asm__("s26");                                                     \
    register float a3 __asm__("s27");                                                     \
    register float a4 __asm__("s28");                                                     \
    register float a5 __asm__("s29");                                                     \
    register float a6 __asm__("s30");                                                     \
    register float a7 __asm__("s31");                                                     \
    const float *xr, *sr;                                                                 \
    int t, e, n

/* blocks >= 1, job->n_rows >= 1: rows8_c's sums with the taps walking up. */
EBT_INLINE void ebt_rows8_up(const ebt_rows8 *job, float *out, const float *init,
                             const float *x, int blocks)
{
    EBT_ROWS8_SUMS;
    __asm__ volatile(
        EBT_ROWS8("vldmia ", EBT_STEPS8("s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23"),
                  "s16-s19", EBT_STEPS4("s16", "s17", "s18", "s19"), "s16")
        EBT_ROWS8_OPERANDS);
    (void)a0, (void)a1, (void)a2, (void)a3, (void)a4, (void)a5, (void)a6, (void)a7;
}

/* The same with each row's taps walking down from its address (one past the first). */
EBT_INLINE void ebt_rows8_down(const ebt_rows8 *job, float *out, const float *init,
                               const float *x, int blocks)
{
    EBT_ROWS8_SUMS;
    __asm__ volatile(
        EBT_ROWS8("vldmdb ", EBT_STEPS8("s23", "s22", "s21", "s20", "s19", "s18", "s17", "s16"),
                  "s20-s23", EBT_STEPS4("s23", "s22", "s21", "s20"), "s23")
        EBT_ROWS8_OPERANDS);
    (void)a0, (void)a1, (void)a2, (void)a3, (void)a4, (void)a5, (void)a6, (void)a7;
}

/* Blocks of 16 outputs of a row, each the sum over the rows of a table of one weight times
 * 16 inputs (ebt_rows8's job with one tap a row: a kernel one column wide, whose rows share
 * no inputs to slide over). The 16 sums are s16..s31; a row costs its two VLDMs, its
 * weight's VLDR (into s8, from row.w), 16 VFMAs and 5 instructions. init_step: 0 or 16. */
#define EBT_COLS16                                                                        \
    "6:\n\t"                                                                              \
    "vldmia  %[init], {s16-s31}\n\t"                                                      \
    "ldr     %[t], [%[job], #12]\n\t"                                                     \
    "add     %[init], %[init], %[t], lsl #2\n\t"                                          \
    "ldr     %[t], [%[job]]\n\t"                                                          \
    "ldr     %[e], [%[job], #4]\n"                                                        \
    "7:\n\t"                                                                              \
    "ldrd    %[x], %[s], [%[t]], #8\n\t"                                                  \
    "add     %[x], %[xb], %[x], lsl #2\n\t"                                              \
    "vldr    s8, [%[s]]\n\t"                                                              \
    "vldmia  %[x]!, {s0-s7}\n\t"                                                          \
    "vfma.f32 s16, s8, s0\n\t"                                                            \
    "vfma.f32 s17, s8, s1\n\t"                                                            \
    "vfma.f32 s18, s8, s2\n\t"                                                            \
    "vfma.f32 s19, s8, s3\n\t"                                                            \
    "vfma.f32 s20, s8, s4\n\t"                                                            \
    "vfma.f32 s21, s8, s5\n\t"                                                            \
    "vfma.f32 s22, s8, s6\n\t"                                                            \
    "vfma.f32 s23, s8, s7\n\t"                                                            \
    "vldmia  %[x], {s0-s7}\n\t"                                                           \
    "vfma.f32 s24, s8, s0\n\t"                                                            \
    "vfma.f32 s25, s8, s1\n\t"                                                            \
    "vfma.f32 s26, s8, s2\n\t"                                                            \
    "vfma.f32 s27, s8, s3\n\t"                                                            \
    "vfma.f32 s28, s8, s4\n\t"                                                            \
    "vfma.f32 s29, s8, s5\n\t"                                                            \
    "vfma.f32 s30, s8, s6\n\t"                                                            \
    "vfma.f32 s31, s8, s7\n\t"                                                            \
    "subs    %[e], %[e], #1\n\t"                                                          \
    "bne     7b\n\t"                                                                      \
    "vstmia  %[out]!, {s16-s31}\n\t"                                                      \
    "adds    %[xb], %[xb], #64\n\t"                                                       \
    "subs    %[nb], %[nb], #1\n\t"                                                        \
    "bne     6b\n"

#define EBT_COLS16_OPERANDS                                                               \
    : [out] "+r"(out), [init] "+r"(init), [xb] "+r"(x), [nb] "+r"(blocks), [t] "=&r"(t),  \
      [e] "=&r"(e), [x] "=&r"(xr), [s] "=&r"(sr)                                          \
    : [job] "r"(job)                                                                      \
    : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s16", "s17", "s18", "s19",   \
      "s20", "s21", "s22", "s23", "s24", "s25", "s26", "s27", "s28", "s29", "s30", "s31", \
      "cc", "memory"

/* blocks >= 1, job->n_rows >= 1, job->taps == 1: cols16_c's sums. */
EBT_INLINE void ebt_cols16(const ebt_rows8 *job, float *out, const float *init, const float *x,
                           int blocks)
{
    const float *xr, *sr;
    int t, e;
    __asm__ volatile(EBT_COLS16 EBT_COLS16_OPERANDS);
}

/* One input row's 8 products with the 8 values s16..s23 into the sum A. */
#define EBT_DOT8(A)                                                                       \
    "vldmia  %[t], {s0-s7}\n\t"                                                           \
    "add     %[t], %[t], %[step]\n\t"                                                     \
    "vfma.f32 " A ", s16, s0\n\t"                                                         \
    "vfma.f32 " A ", s17, s1\n\t"                                                         \
    "vfma.f32 " A ", s18, s2\n\t"                                                         \
    "vfma.f32 " A ", s19, s3\n\t"                                                         \
    "vfma.f32 " A ", s20, s4\n\t"                                                         \
    "vfma.f32 " A ", s21, s5\n\t"                                                         \
    "vfma.f32 " A ", s22, s6\n\t"                                                         \
    "vfma.f32 " A ", s23, s7\n\t"

/* a[j] += sum over o < n of s[o] * x[j * step + o], j < 8, o in order (n a positive
 * multiple of 8): eight dot products with one vector, 8 of its values at a time (a kernel
 * one column wide: dy's row against 8 input rows). step in floats. */
EBT_INLINE void ebt_dots8(float a[8], const float *s, const float *x, int step, int n)
{
    EBT_SUMS8_IN(a);
    const float *t;
    const int bytes = step * 4;
    n >>= 3;
    __asm__ volatile(
        "1:\n\t"
        "vldmia  %[s]!, {s16-s23}\n\t"
        "mov     %[t], %[x]\n\t"
        EBT_DOT8("%[a0]") EBT_DOT8("%[a1]") EBT_DOT8("%[a2]") EBT_DOT8("%[a3]")
        EBT_DOT8("%[a4]") EBT_DOT8("%[a5]") EBT_DOT8("%[a6]") EBT_DOT8("%[a7]")
        "adds    %[x], %[x], #32\n\t"
        "subs    %[n], %[n], #1\n\t"
        "bne     1b\n"
        : [a0] "+t"(a0), [a1] "+t"(a1), [a2] "+t"(a2), [a3] "+t"(a3), [a4] "+t"(a4),
          [a5] "+t"(a5), [a6] "+t"(a6), [a7] "+t"(a7), [s] "+r"(s), [x] "+r"(x), [n] "+r"(n),
          [t] "=&r"(t)
        : [step] "r"(bytes)
        : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s16", "s17", "s18", "s19", "s20",
          "s21", "s22", "s23", "cc", "memory");
    EBT_SUMS8_OUT(a);
}

/* R = the smaller of R and h (unsigned); G = 0 where X >= h (unsigned). */
#define EBT_AT_MOST_H(R) "cmp     " R ", %[h]\n\tit      hi\n\tmovhi   " R ", %[h]\n\t"
#define EBT_ZERO_FROM_H(X, G) "cmp     " X ", %[h]\n\tit      cs\n\tmovcs   " G ", #0\n\t"

/* relu then the clamp to 127/128 on float bits (eb_train.c's relu_clamp_bits), 4 floats a
 * pass (n4 > 0 passes): one LDM, per float a BIC of its sign (a negative float or -0 gives
 * +0) and an unsigned minimum with high's bits, one STM. In place is fine. */
EBT_INLINE void ebt_relu_clamp4(const float *x, float *y, int n4, uint32_t high)
{
    __asm__ volatile(
        "1:\n\t"
        "ldmia   %[x]!, {r4, r5, r6, r8}\n\t"
        "bic     r4, r4, r4, asr #31\n\t"
        "bic     r5, r5, r5, asr #31\n\t"
        "bic     r6, r6, r6, asr #31\n\t"
        "bic     r8, r8, r8, asr #31\n\t"
        EBT_AT_MOST_H("r4") EBT_AT_MOST_H("r5") EBT_AT_MOST_H("r6") EBT_AT_MOST_H("r8")
        "stmia   %[y]!, {r4, r5, r6, r8}\n\t"
        "subs    %[n], %[n], #1\n\t"
        "bne     1b\n"
        : [x] "+r"(x), [y] "+r"(y), [n] "+r"(n4)
        : [h] "r"(high)
        : "r4", "r5", "r6", "r8", "cc", "memory");
}

/* Its gradient (eb_train.c's relu_clamp_pass): dy's bits where x's bits less one are below
 * high's less one (0 < x < 127/128), else +0; 4 floats a pass (n4 > 0). dx may be dy. */
EBT_INLINE void ebt_relu_clamp_pass4(const float *x, const float *dy, float *dx, int n4,
                                     uint32_t high)
{
    const uint32_t h1 = high - 1u;
    __asm__ volatile(
        "1:\n\t"
        "ldmia   %[x]!, {r4, r5, r6, r8}\n\t"
        "ldmia   %[g]!, {r9, r10, r11, r12}\n\t"
        "sub     r4, r4, #1\n\t"
        "sub     r5, r5, #1\n\t"
        "sub     r6, r6, #1\n\t"
        "sub     r8, r8, #1\n\t"
        EBT_ZERO_FROM_H("r4", "r9") EBT_ZERO_FROM_H("r5", "r10") EBT_ZERO_FROM_H("r6", "r11")
        EBT_ZERO_FROM_H("r8", "r12")
        "stmia   %[d]!, {r9, r10, r11, r12}\n\t"
        "subs    %[n], %[n], #1\n\t"
        "bne     1b\n"
        : [x] "+r"(x), [g] "+r"(dy), [d] "+r"(dx), [n] "+r"(n4)
        : [h] "r"(h1)
        : "r4", "r5", "r6", "r8", "r9", "r10", "r11", "r12", "cc", "memory");
}

/* One step of 4 sums: a[i] += S * x[t + i], i < 4. */
#define EBT_Q(S, X0, X1, X2, X3)                                                          \
    "vfma.f32 %[a0], " S ", " X0 "\n\t"                                                   \
    "vfma.f32 %[a1], " S ", " X1 "\n\t"                                                   \
    "vfma.f32 %[a2], " S ", " X2 "\n\t"                                                   \
    "vfma.f32 %[a3], " S ", " X3 "\n\t"

/* a[i] += sum over t < n of s[t] * x[t + i], i < 4, t in order: ebt_corr8_up with 4 sums
 * (a weight gradient of 3 to 6 taps), 8 steps over 11 inputs, then 4, then one by one. */
EBT_INLINE void ebt_corr4_up(float a[4], const float *s, const float *x, int n)
{
    float a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    __asm__ volatile(
        EBT_CORR("vldmia ", "s0-s10",
                 EBT_Q("s16", "s0", "s1", "s2", "s3") EBT_Q("s17", "s1", "s2", "s3", "s4")
                 EBT_Q("s18", "s2", "s3", "s4", "s5") EBT_Q("s19", "s3", "s4", "s5", "s6")
                 EBT_Q("s20", "s4", "s5", "s6", "s7") EBT_Q("s21", "s5", "s6", "s7", "s8")
                 EBT_Q("s22", "s6", "s7", "s8", "s9") EBT_Q("s23", "s7", "s8", "s9", "s10"),
                 "s16-s19", "s0-s6",
                 EBT_Q("s16", "s0", "s1", "s2", "s3") EBT_Q("s17", "s1", "s2", "s3", "s4")
                 EBT_Q("s18", "s2", "s3", "s4", "s5") EBT_Q("s19", "s3", "s4", "s5", "s6"),
                 "s16", "s0-s3", EBT_Q("s16", "s0", "s1", "s2", "s3"))
        : [a0] "+t"(a0), [a1] "+t"(a1), [a2] "+t"(a2), [a3] "+t"(a3), [s] "+r"(s), [x] "+r"(x),
          [n] "+r"(n)
        :
        : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s16", "s17",
          "s18", "s19", "s20", "s21", "s22", "s23", "cc", "memory");
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
}

/* acc + the sum over t < n of s[t] * x[t], t in order: one dot product, 8 products a pass
 * (a weight gradient's single taps). */
EBT_INLINE float ebt_dot1(float acc, const float *s, const float *x, int n)
{
    __asm__ volatile(
        "subs    %[n], %[n], #8\n\t"
        "blt     2f\n"
        "1:\n\t"
        "vldmia  %[s]!, {s16-s23}\n\t"
        "vldmia  %[x]!, {s0-s7}\n\t"
        "vfma.f32 %[a0], s16, s0\n\t"
        "vfma.f32 %[a0], s17, s1\n\t"
        "vfma.f32 %[a0], s18, s2\n\t"
        "vfma.f32 %[a0], s19, s3\n\t"
        "vfma.f32 %[a0], s20, s4\n\t"
        "vfma.f32 %[a0], s21, s5\n\t"
        "vfma.f32 %[a0], s22, s6\n\t"
        "vfma.f32 %[a0], s23, s7\n\t"
        "subs    %[n], %[n], #8\n\t"
        "bge     1b\n"
        "2:\n\t"
        "ands    %[n], %[n], #7\n\t"
        "beq     5f\n"
        "4:\n\t"
        "vldmia  %[s]!, {s16}\n\t"
        "vldmia  %[x]!, {s0}\n\t"
        "vfma.f32 %[a0], s16, s0\n\t"
        "subs    %[n], %[n], #1\n\t"
        "bne     4b\n"
        "5:\n"
        : [a0] "+t"(acc), [s] "+r"(s), [x] "+r"(x), [n] "+r"(n)
        :
        : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s16", "s17", "s18", "s19", "s20",
          "s21", "s22", "s23", "cc", "memory");
    return acc;
}

/* dst[0 .. 16 * n16) = src[..] (n16 > 0, no overlap): 16 floats a pass through s0..s15, one
 * VLDM and one VSTM (the tiles' copies between L2 and L1). */
EBT_INLINE void ebt_copy16(float *dst, const float *src, int n16)
{
    __asm__ volatile(
        "1:\n\t"
        "vldmia  %[s]!, {s0-s15}\n\t"
        "vstmia  %[d]!, {s0-s15}\n\t"
        "subs    %[n], %[n], #1\n\t"
        "bne     1b\n"
        : [d] "+r"(dst), [s] "+r"(src), [n] "+r"(n16)
        :
        : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12",
          "s13", "s14", "s15", "cc", "memory");
}

/* p[0 .. 16 * n16) = +0.0f (n16 > 0): 16 zeros a VSTM (the gradients' clearing each step). */
EBT_INLINE void ebt_zero16(float *p, int n16)
{
    static const float zeros[16] = {0.0f};
    __asm__ volatile(
        "vldmia  %[z], {s0-s15}\n"
        "1:\n\t"
        "vstmia  %[p]!, {s0-s15}\n\t"
        "subs    %[n], %[n], #1\n\t"
        "bne     1b\n"
        : [p] "+r"(p), [n] "+r"(n16)
        : [z] "r"(zeros)
        : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12",
          "s13", "s14", "s15", "cc", "memory");
}

/* acc + a[0] + a[1] + ... + a[8 * n8 - 1] in this order (n8 > 0): one VLDM and 8 VADDs a
 * pass (a bias gradient's sum over a plane of dy). */
EBT_INLINE float ebt_sum8(float acc, const float *a, int n8)
{
    __asm__ volatile(
        "1:\n\t"
        "vldmia  %[a]!, {s0-s7}\n\t"
        "vadd.f32 %[acc], %[acc], s0\n\t"
        "vadd.f32 %[acc], %[acc], s1\n\t"
        "vadd.f32 %[acc], %[acc], s2\n\t"
        "vadd.f32 %[acc], %[acc], s3\n\t"
        "vadd.f32 %[acc], %[acc], s4\n\t"
        "vadd.f32 %[acc], %[acc], s5\n\t"
        "vadd.f32 %[acc], %[acc], s6\n\t"
        "vadd.f32 %[acc], %[acc], s7\n\t"
        "subs    %[n], %[n], #1\n\t"
        "bne     1b\n"
        : [acc] "+t"(acc), [a] "+r"(a), [n] "+r"(n8)
        :
        : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "cc", "memory");
    return acc;
}

#endif
