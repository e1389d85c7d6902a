/* edgebuild optimized depthwise convolution (eb_dw_opt.c): the direct path of
 * eb_conv2d_opt / eb_conv2d_wide_opt for groups == in_c, out_c = m * in_c (first layers with
 * one input channel included). See eb_kernels_opt.h, "Depthwise convs", for the method. */
#ifndef EB_DW_OPT_H
#define EB_DW_OPT_H

#include <stdint.h>

#include "eb_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- 3x3 stride-1 layers specialised at generation time ----
 * The padded path's inner loop with the layer's shape folded in: EB_DW3_SPEC(name, pitch,
 * out_w, s, act) (act RELU or NONE; pitch = in_w + pad_w, the padded copy's row bytes; s =
 * -shift in [1, 31]; out_w even) defines `name`, an eb_dw3_spec whose run walks pixel pairs
 * along two output rows at a time, four padded rows feeding them: the rows' offsets, the
 * output row width and the requantization shift are immediates (LDR [p, #L], STRB [dst,
 * #out_w], USAT/SSAT ..., ASR #s), which frees the registers the generic loop reloads from
 * the stack, and the pair count rides in the top half of the register holding w21. 46
 * instructions per 36 MACs (4 LDR, 8 SXTB16, 24 SMLAxx, 4 USAT, 4 STRB, ADDS + BCC). A
 * channel runs it when its requantization is the spec's (mode, s) and the layer's pitch and
 * out_w are the spec's; anything else takes the generic path. Off the M4 (no DSP, or
 * EB_OPT_PORTABLE) run is NULL: the generic path runs. */
typedef struct {
    /* n2 >= 1 row pairs from buffer row 0 at src into dst (out_w wide rows): w as the 3-tap
     * kernels take them, init the sums' start */
    void (*run)(const int8_t *src, int8_t *dst, int32_t n2, const uint32_t *w, int32_t init);
    int16_t pitch, out_w;
    int8_t s, act; /* EB_ACT_RELU or EB_ACT_NONE */
} eb_dw3_spec;

#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32) && defined(__GNUC__) && \
    defined(__OPTIMIZE__) && defined(__thumb2__) && !defined(EB_OPT_PORTABLE)
#define EB_DW3_SPEC_ASM 1
#define EB_DW3_SAT_RELU(r) "usat %[" r "], #7, %[" r "], asr %[S]\n\t"
#define EB_DW3_SAT_NONE(r) "ssat %[" r "], #8, %[" r "], asr %[S]\n\t"
#define EB_DW3_MAC4(x, lo, a, b, w, wc, ta, tb)                                          \
    "smlad %[" a "], %[" w "], %[" lo "], %[" a "]\n\t"                                  \
    "smla" ta "b %[" a "], %[" x "], %[" wc "], %[" a "]\n\t"                            \
    "smlad %[" b "], %[" w "], %[" x "], %[" b "]\n\t"                                   \
    "smlat" tb " %[" b "], %[" lo "], %[" wc "], %[" b "]\n\t"
#define EB_DW3_SPEC(name, pitch, out_w, s, act)                                              \
    static void name##_run(const int8_t *p, int8_t *dst, int32_t n2, const uint32_t *w,      \
                           int32_t init)                                                     \
    {                                                                                        \
        const int8_t *end = p + 2 * (pitch) * n2;                                            \
        uint32_t w0 = w[0], w1 = w[1], w2 = w[2], w01 = w[3], a0, a1, b0, b1, x, lo;         \
        uint32_t w21 = (w[4] & 0xFFFFu) | (uint32_t)(0x10000 - (out_w) / 2) << 16;           \
        __asm__ volatile(                                                                    \
            "1:\n\t"                                                                         \
            "ldr %[x], [%[p], %[L1]]\n\t"                                                    \
            "sxtb16 %[lo], %[x]\n\t"                                                         \
            "sxtb16 %[x], %[x], ror #8\n\t"                                                  \
            "smlad %[a1], %[w1], %[x], %[init]\n\t"                                          \
            "smlatt %[a1], %[lo], %[w01], %[a1]\n\t"                                         \
            "smlad %[b0], %[w0], %[lo], %[init]\n\t"                                         \
            "smlabb %[b0], %[x], %[w01], %[b0]\n\t"                                          \
            "smlad %[b1], %[w0], %[x], %[init]\n\t"                                          \
            "smlatb %[b1], %[lo], %[w01], %[b1]\n\t"                                         \
            "smlad %[a0], %[w1], %[lo], %[init]\n\t"                                         \
            "smlabt %[a0], %[x], %[w01], %[a0]\n\t"                                          \
            "ldr %[x], [%[p]], #2\n\t"                                                       \
            "sxtb16 %[lo], %[x]\n\t"                                                         \
            "sxtb16 %[x], %[x], ror #8\n\t"                                                  \
            EB_DW3_MAC4("x", "lo", "a0", "a1", "w0", "w01", "b", "b")                        \
            "ldr %[x], [%[p], %[L2]]\n\t"                                                    \
            "sxtb16 %[lo], %[x]\n\t"                                                         \
            "sxtb16 %[x], %[x], ror #8\n\t"                                                  \
            EB_DW3_MAC4("x", "lo", "a0", "a1", "w2", "w21", "b", "b")                        \
            "smlad %[b0], %[w1], %[lo], %[b0]\n\t"                                           \
            "smlabt %[b0], %[x], %[w01], %[b0]\n\t"                                          \
            "smlad %[b1], %[w1], %[x], %[b1]\n\t"                                            \
            "smlatt %[b1], %[lo], %[w01], %[b1]\n\t"                                         \
            EB_DW3_SAT_##act("a0") EB_DW3_SAT_##act("a1")                                    \
            "strb %[a1], [%[dst], #1]\n\t"                                                   \
            "strb %[a0], [%[dst]], #2\n\t"                                                   \
            "ldr %[x], [%[p], %[L3]]\n\t"                                                    \
            "sxtb16 %[lo], %[x]\n\t"                                                         \
            "sxtb16 %[x], %[x], ror #8\n\t"                                                  \
            EB_DW3_MAC4("x", "lo", "b0", "b1", "w2", "w21", "b", "b")                        \
            EB_DW3_SAT_##act("b0") EB_DW3_SAT_##act("b1")                                    \
            "strb %[b0], [%[dst], %[O0]]\n\t"                                                \
            "strb %[b1], [%[dst], %[O1]]\n\t"                                                \
            "adds %[w21], %[w21], #0x10000\n\t"                                              \
            "bcc 1b\n\t"                                                                     \
            "add %[p], %[p], %[T]\n\t"                                                       \
            "add %[dst], %[dst], %[OW]\n\t"                                                  \
            "sub %[w21], %[w21], %[N16]\n\t"                                                 \
            "ldr %[x], %[end]\n\t"                                                           \
            "cmp %[p], %[x]\n\t"                                                             \
            "bne 1b\n\t"                                                                     \
            : [p] "+r"(p), [dst] "+r"(dst), [w21] "+r"(w21), [a0] "=&r"(a0), [a1] "=&r"(a1), \
              [b0] "=&r"(b0), [b1] "=&r"(b1), [x] "=&r"(x), [lo] "=&r"(lo)                   \
            : [w0] "r"(w0), [w1] "r"(w1), [w2] "r"(w2), [w01] "r"(w01), [init] "r"(init),    \
              [end] "m"(end), [L1] "i"(pitch), [L2] "i"(2 * (pitch) - 2),                    \
              [L3] "i"(3 * (pitch) - 2), [O0] "i"((out_w) - 2), [O1] "i"((out_w) - 1),       \
              [T] "i"(2 * (pitch) - (out_w)), [OW] "i"(out_w), [S] "i"(s),                   \
              [N16] "i"((out_w) / 2 << 16)                                                   \
            : "cc", "memory");                                                               \
        (void)a0, (void)a1, (void)b0, (void)b1, (void)x, (void)lo;                           \
    }                                                                                        \
    static const eb_dw3_spec name = {name##_run, pitch, out_w, s, EB_ACT_##act};
#else
#define EB_DW3_SPEC_ASM 0
#define EB_DW3_SPEC(name, pitch, out_w, s, act) \
    static const eb_dw3_spec name = {0, pitch, out_w, s, EB_ACT_##act};
#endif

/* eb_dw_conv_opt (int8 out) with the spec k (NULL: none) for the padded path's channels;
 * a layer the depthwise path does not take runs eb_conv2d. */
void eb_dw_conv_spec_opt(const eb_conv_params *p, const eb_dw3_spec *k, const int8_t *in,
                         const int8_t *weight, const int32_t *bias, int8_t *out,
                         int16_t *scratch);
/* eb_dw_pool_conv_opt with the spec k (NULL: none). */
void eb_dw_pool_conv_spec_opt(const eb_pool_params *q, const eb_conv_params *p,
                              const eb_dw3_spec *k, const int8_t *in, int8_t *pooled,
                              const int8_t *weight, const int32_t *bias, int8_t *out,
                              int16_t *scratch);

/* The layer p into out8 (int8: requantized by p->shift, p->rounding, p->act) or, with out8
 * NULL, out32 (the int32 sums); bit-identical to eb_conv2d / eb_conv2d_wide. Returns 0, with
 * nothing written, for a layer the path does not take (groups != in_c, or a kernel needing
 * more than 16 table entries): the caller runs its generic path then. scratch (4-byte
 * aligned, as eb_conv2d_opt's): the padded path's channel copy, EB_DW_OPT_SCRATCH(in_w,
 * pad_w, out_h) bytes for a layer that path takes (eb_kernels_opt.h), untouched otherwise;
 * the same for the entry points below. */
int eb_dw_conv_opt(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                   const int32_t *bias, int8_t *out8, int32_t *out32, int16_t *scratch);
/* eb_pool2d(q, in, pooled) then eb_conv2d(p, pooled, weight, bias, out), bit-identical, for a
 * depthwise p (groups == in_c) whose input is q's output: with a 2x2 stride-2 max pool and
 * a 3x3 stride-1 conv the depthwise path pools each channel straight into its padded copy
 * (pooled is then only written for channels whose requantization that path does not take);
 * other shapes pool into pooled (eb_pool2d), then convolve it. */
void eb_dw_pool_conv_opt(const eb_pool_params *q, const eb_conv_params *p, const int8_t *in,
                         int8_t *pooled, const int8_t *weight, const int32_t *bias, int8_t *out,
                         int16_t *scratch);
/* eb_dw_conv_opt (int8 out) of a layer the L1 tiler runs banded (memory.tiling: the depthwise
 * layout): the padded path's per-channel copy is l1 itself (eb_dw_band_l1_bytes(p, rows)
 * bytes, 4-byte aligned), holding `rows` output rows' padded input rows at a time (the whole
 * plane when rows >= out_h: then copied once for all the output channels that read it; else
 * bands of an even number of rows, refilled per output channel). Input, weights and bias
 * are read in place (L2, flash), each output written once straight from the sums into out.
 * A channel whose requantization the padded path does not take (a bias near the int32
 * limits) reads its plane in place; a layer it does not take at all runs eb_conv2d. */
void eb_dw_conv_banded_opt(const eb_conv_params *p, int rows, const int8_t *in,
                           const int8_t *weight, const int32_t *bias, int8_t *out, int8_t *l1);
int32_t eb_dw_band_l1_bytes(const eb_conv_params *p, int rows);
/* eb_dw_pool_conv_opt banded as eb_dw_conv_banded_opt: each channel's 2x2 max pool rows go
 * straight into l1 (the band's padded rows), so the pooled tensor is not written (but for
 * channels that path does not take; other pools: eb_pool2d into pooled, then banded). */
void eb_dw_pool_conv_banded_opt(const eb_pool_params *q, const eb_conv_params *p, int rows,
                                const int8_t *in, int8_t *pooled, const int8_t *weight,
                                const int32_t *bias, int8_t *out, int8_t *l1);

#ifdef __cplusplus
}
#endif

#endif
