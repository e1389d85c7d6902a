/* edgebuild's portable kernels for TFLite's int8 number format (eb_tfl.h): the definition
 * the optimized kernels (eb_tfl_opt.c) must match, written as TensorFlow Lite's reference
 * kernels compute (edgebuild/tflite/reference.py is their numpy twin). C99, no allocation,
 * int32 sums with wrap-around (unsigned arithmetic: no undefined behaviour). */
#include "eb_tfl.h"

#include <stddef.h>

#if (-1 >> 1) != -1
#error "edgebuild kernels need arithmetic right shifts of negative integers"
#endif

/* ---- convolution, linear ----------------------------------------------------------------- */

void eb_tfl_conv2d(const eb_tfl_conv_params *p, const int8_t *in, const int8_t *w,
                   const int32_t *bias, const int32_t *mult, const int32_t *shift, int8_t *out,
                   int16_t *scratch)
{
    const int ipg = p->in_c / p->groups, opg = p->out_c / p->groups;
    const int32_t plane = (int32_t)p->in_h * p->in_w;
    const int32_t taps = (int32_t)ipg * p->k_h * p->k_w;
    const int32_t zp = p->in_zp;
    int o, oy, ox, ic, ky, kx;
    (void)scratch;
    for (o = 0; o < p->out_c; ++o) {
        const int8_t *in_g = in + (int32_t)(o / opg) * ipg * plane;
        const int8_t *w_o = w + (int32_t)o * taps;
        for (oy = 0; oy < p->out_h; ++oy) {
            for (ox = 0; ox < p->out_w; ++ox) {
                uint32_t acc = bias != NULL ? (uint32_t)bias[o] : 0u;
                for (ic = 0; ic < ipg; ++ic) {
                    for (ky = 0; ky < p->k_h; ++ky) {
                        const int iy = oy * p->stride_h - p->pad_top + ky * p->dil_h;
                        if (iy < 0 || iy >= p->in_h) {
                            continue;
                        }
                        for (kx = 0; kx < p->k_w; ++kx) {
                            const int ix = ox * p->stride_w - p->pad_left + kx * p->dil_w;
                            if (ix < 0 || ix >= p->in_w) {
                                continue;
                            }
                            acc += (uint32_t)((in_g[ic * plane + (int32_t)iy * p->in_w + ix] -
                                               zp) *
                                              w_o[(ic * p->k_h + ky) * p->k_w + kx]);
                        }
                    }
                }
                *out++ = eb_tfl_out8(eb_tfl_mbqm(eb_tfl_s32(acc), mult[o], (int)shift[o]),
                                     p->out_zp, p->act_min, p->act_max);
            }
        }
    }
}

void eb_tfl_linear(const eb_tfl_fc_params *p, const int8_t *in, const int8_t *w,
                   const int32_t *bias, const int32_t *mult, const int32_t *shift, int8_t *out,
                   int16_t *scratch)
{
    const int32_t zp = p->in_zp;
    int o, i;
    (void)scratch;
    for (o = 0; o < p->out_f; ++o) {
        const int8_t *row = w + (int32_t)o * p->in_f;
        uint32_t acc = bias != NULL ? (uint32_t)bias[o] : 0u;
        for (i = 0; i < p->in_f; ++i) {
            acc += (uint32_t)((in[i] - zp) * row[i]);
        }
        out[o] = eb_tfl_out8(eb_tfl_mbqm_single(eb_tfl_s32(acc), mult[o], (int)shift[o]),
                             p->out_zp, p->act_min, p->act_max);
    }
}

/* ---- pooling ----------------------------------------------------------------------------- */

void eb_tfl_pool2d(const eb_tfl_pool_params *p, const int8_t *in, int8_t *out)
{
    const int32_t plane = (int32_t)p->in_h * p->in_w;
    int c, oy, ox, y, x;
    for (c = 0; c < p->c; ++c, in += plane) {
        for (oy = 0; oy < p->out_h; ++oy) {
            const int y0 = oy * p->stride_h - p->pad_top;
            const int ya = y0 < 0 ? 0 : y0, yb = y0 + p->k_h < p->in_h ? y0 + p->k_h : p->in_h;
            for (ox = 0; ox < p->out_w; ++ox) {
                const int x0 = ox * p->stride_w - p->pad_left;
                const int xa = x0 < 0 ? 0 : x0;
                const int xb = x0 + p->k_w < p->in_w ? x0 + p->k_w : p->in_w;
                int64_t v;
                if (p->mode == EB_TFL_POOL_MAX) {
                    int32_t best = -128;
                    for (y = ya; y < yb; ++y) {
                        for (x = xa; x < xb; ++x) {
                            const int32_t value = in[(int32_t)y * p->in_w + x];
                            best = value > best ? value : best;
                        }
                    }
                    v = best;
                } else {
                    const int64_t count = (int64_t)(yb - ya) * (xb - xa);
                    int64_t total = 0;
                    for (y = ya; y < yb; ++y) {
                        for (x = xa; x < xb; ++x) {
                            total += in[(int32_t)y * p->in_w + x];
                        }
                    }
                    /* halves away from zero: (|sum| + count / 2) / count, the sign put back */
                    v = count == 0 ? 0 /* a window of padding only: no valid layer has one */
                        : total > 0 ? (total + count / 2) / count
                                    : -((-total + count / 2) / count);
                }
                v = v < p->act_min ? p->act_min : (v > p->act_max ? p->act_max : v);
                *out++ = (int8_t)v;
            }
        }
    }
}

/* ---- add --------------------------------------------------------------------------------- */

void eb_tfl_add(const eb_tfl_add_params *p, const int8_t *a, const int8_t *b, int8_t *out)
{
    const int ls = p->left_shift;
    int32_t i;
    for (i = 0; i < p->n; ++i) {
        const int32_t xa = eb_tfl_s32((uint32_t)(a[i] - p->in1_zp) << ls);
        const int32_t xb = eb_tfl_s32((uint32_t)(b[i] - p->in2_zp) << ls);
        const int32_t sa = eb_tfl_mbqm(xa, p->mult1, (int)p->shift1);
        const int32_t sb = eb_tfl_mbqm(xb, p->mult2, (int)p->shift2);
        out[i] = eb_tfl_out8(eb_tfl_mbqm(eb_tfl_add32(sa, sb), p->mult_out, (int)p->shift_out),
                             p->out_zp, p->act_min, p->act_max);
    }
}

/* ---- softmax (gemmlowp fixed point, tflite.arith.softmax) -------------------------------- */

/* SaturatingRoundingMultiplyByPOT<e> for e > 0 (e < 0 is eb_tfl_rdbpot). */
static int32_t eb_tfl_sat_pot(int32_t v, int e)
{
    const int32_t threshold = (int32_t)(((int64_t)1 << (31 - e)) - 1);
    if (v > threshold) {
        return INT32_MAX;
    }
    if (v < -threshold) {
        return INT32_MIN;
    }
    return v * ((int32_t)1 << e);
}

/* RoundingDivideByPOT of an int64 value, e in 0..62 (softmax's last division may be 35). */
static int64_t eb_tfl_rdbpot64(int64_t v, int e)
{
    const int64_t mask = ((int64_t)1 << e) - 1;
    const int64_t remainder = v & mask;
    const int64_t threshold = (mask >> 1) + (v < 0 ? 1 : 0);
    return (v >> e) + (remainder > threshold ? 1 : 0);
}

/* exp(x) for x in [-1/4, 0), Q0.31 in and out. */
static int32_t eb_tfl_exp_quarter(int32_t a)
{
    const int32_t constant_term = 1895147668, one_third = 715827883;
    const int32_t x = eb_tfl_add32(a, (int32_t)1 << 28);
    const int32_t x2 = eb_tfl_srdhm(x, x);
    const int32_t x3 = eb_tfl_srdhm(x2, x);
    const int32_t x4 = eb_tfl_srdhm(x2, x2);
    const int32_t x4_over_4 = eb_tfl_rdbpot(x4, 2);
    const int32_t poly = eb_tfl_rdbpot(
        eb_tfl_add32(eb_tfl_srdhm(eb_tfl_add32(x4_over_4, x3), one_third), x2), 1);
    return eb_tfl_add32(constant_term, eb_tfl_srdhm(constant_term, eb_tfl_add32(x, poly)));
}

/* exp(a) for a <= 0 in Q5.26, Q0.31 out (any int32 a computes as arith.py does). */
static int32_t eb_tfl_exp_neg(int32_t a)
{
    static const int32_t barrel[7] = {1672461947, 1302514674, 790015084, 290630308,
                                      39332535, 720401, 242};
    const int32_t quarter = (int32_t)1 << 24;
    const int32_t a_mod = (a & (quarter - 1)) - quarter;
    const int32_t remainder = eb_tfl_sub32(a_mod, a);
    int32_t result = eb_tfl_exp_quarter(eb_tfl_sat_pot(a_mod, 5));
    int k;
    for (k = 0; k < 7; ++k) { /* exponents -2 .. 4: bits 24 .. 30 of the remainder */
        if (remainder & ((int32_t)1 << (24 + k))) {
            result = eb_tfl_srdhm(result, barrel[k]);
        }
    }
    return a == 0 ? INT32_MAX : result;
}

/* 1 / (1 + a) for a in [0, 1), Q0.31. */
static int32_t eb_tfl_one_over_one_plus_x(int32_t a)
{
    const int64_t total = (int64_t)a + INT32_MAX;
    const int32_t half = (int32_t)(total >= 0 ? (total + 1) / 2 : -((-total + 1) / 2));
    int32_t x = eb_tfl_add32(1515870810, eb_tfl_srdhm(half, -1010580540));
    int i;
    for (i = 0; i < 3; ++i) {
        const int32_t product = eb_tfl_srdhm(half, x);
        x = eb_tfl_add32(x, eb_tfl_sat_pot(eb_tfl_srdhm(x, eb_tfl_sub32((int32_t)1 << 29,
                                                                          product)), 2));
    }
    return eb_tfl_sat_pot(x, 1);
}

/* The diff (x - max) of a channel as exp's input, or 0 when diff < diff_min (outside). */
static int eb_tfl_softmax_exp(const eb_tfl_softmax_params *p, int32_t diff, int32_t *e)
{
    if (diff < p->diff_min) {
        *e = 0;
        return 0;
    }
    *e = eb_tfl_exp_neg(eb_tfl_srdhm(eb_tfl_s32((uint32_t)diff << p->left_shift),
                                     p->multiplier));
    return 1;
}

void eb_tfl_softmax(const eb_tfl_softmax_params *p, const int8_t *in, int8_t *out)
{
    const int32_t n = p->positions;
    int32_t pos;
    int c;
    for (pos = 0; pos < n; ++pos) {
        const int8_t *x = in + pos;
        int32_t top = -128, e, sum = 0, scale;
        uint32_t magnitude, shifted;
        int bits = 0, headroom;
        for (c = 0; c < p->channels; ++c) {
            top = x[(int32_t)c * n] > top ? x[(int32_t)c * n] : top;
        }
        for (c = 0; c < p->channels; ++c) {
            eb_tfl_softmax_exp(p, x[(int32_t)c * n] - top, &e);
            sum = eb_tfl_add32(sum, eb_tfl_rdbpot(e, 12)); /* Q12.19 */
        }
        /* GetReciprocal: headroom from the sum's magnitude (arith.reciprocal's bit_length) */
        magnitude = sum < 0 ? 0u - (uint32_t)sum : (uint32_t)sum;
        while (bits < 32 && (magnitude >> bits) != 0u) {
            ++bits;
        }
        headroom = 32 - bits;
        shifted = headroom >= 32 ? 0u : (uint32_t)sum << headroom;
        scale = eb_tfl_one_over_one_plus_x(eb_tfl_s32(shifted - 0x80000000u));
        for (c = 0; c < p->channels; ++c) {
            int64_t v = -128;
            if (eb_tfl_softmax_exp(p, x[(int32_t)c * n] - top, &e)) {
                /* exponent = (12 - headroom) + 31 - 8 */
                v = eb_tfl_rdbpot64(eb_tfl_srdhm(scale, e), 35 - headroom) - 128;
                v = v < -128 ? -128 : (v > 127 ? 127 : v);
            }
            out[(int32_t)c * n + pos] = (int8_t)v;
        }
    }
}
