/* edgebuild reference kernels: plain loops, portable C99, no allocation.
 * They define the arithmetic; see eb_kernels.h for the numerics contract. */
#include "eb_kernels.h"

#include <string.h>

#if (-1 >> 1) != -1
#error "edgebuild kernels need arithmetic right shifts of negative integers"
#endif

/* The loops below take the weight width as an argument: each kernel calls them once with
 * a constant 0 (int8 weights) and once with the layer's packed width, so that, inlined,
 * the int8 path keeps its plain loads (EB_SPECIALISE). */
#if defined(__GNUC__)
#define EB_SPECIALISE static inline __attribute__((always_inline))
#else
#define EB_SPECIALISE static inline
#endif

/* Weight i of a row: int8 (wbits 0) or packed. */
#define EB_WEIGHT(row, wbits, i) ((wbits) ? eb_packed_weight(row, wbits, i) : (int32_t)(row)[i])

/* floor(a / b) for b > 0 (C division truncates toward zero). */
static int32_t eb_floor_div(int32_t a, int32_t b)
{
    int32_t q = a / b;
    if ((a % b) != 0 && a < 0) {
        q -= 1;
    }
    return q;
}

EB_SPECIALISE int32_t conv_acc_w(const eb_conv_params *p, const int8_t *in,
                                const int8_t *weight, const int32_t *bias, int oc, int oy,
                                int ox, int wbits)
{
    const int in_per_group = p->in_c / p->groups;
    const int out_per_group = p->out_c / p->groups;
    const int first_in = (oc / out_per_group) * in_per_group;
    const int32_t row = (int32_t)in_per_group * p->k_h * p->k_w; /* weights per filter */
    const int8_t *w = weight + (int32_t)oc * (wbits ? EB_PACKED_ROW_BYTES(row, wbits) : row);
    int32_t acc = bias ? bias[oc] : 0;
    int ic, ky, kx;
    for (ic = 0; ic < in_per_group; ++ic) {
        const int8_t *plane = in + (int32_t)(first_in + ic) * p->in_h * p->in_w;
        for (ky = 0; ky < p->k_h; ++ky) {
            const int iy = oy * p->stride_h - p->pad_h + ky * p->dil_h;
            for (kx = 0; kx < p->k_w; ++kx) {
                const int ix = ox * p->stride_w - p->pad_w + kx * p->dil_w;
                const int32_t i = (ic * p->k_h + ky) * p->k_w + kx;
                const int32_t wv = EB_WEIGHT(w, wbits, i);
                if (iy >= 0 && iy < p->in_h && ix >= 0 && ix < p->in_w) {
                    acc += (int32_t)wv * plane[iy * p->in_w + ix];
                }
            }
        }
    }
    return acc;
}

static int32_t conv_acc(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                        const int32_t *bias, int oc, int oy, int ox)
{
    return p->wbits ? conv_acc_w(p, in, weight, bias, oc, oy, ox, p->wbits)
                    : conv_acc_w(p, in, weight, bias, oc, oy, ox, 0);
}

void eb_conv2d(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
               const int32_t *bias, int8_t *out)
{
    int oc, oy, ox;
    for (oc = 0; oc < p->out_c; ++oc) {
        for (oy = 0; oy < p->out_h; ++oy) {
            for (ox = 0; ox < p->out_w; ++ox) {
                *out++ = eb_requantize(conv_acc(p, in, weight, bias, oc, oy, ox), p->shift,
                                       p->rounding, p->act);
            }
        }
    }
}

void eb_conv2d_wide(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                    const int32_t *bias, int32_t *out)
{
    int oc, oy, ox;
    for (oc = 0; oc < p->out_c; ++oc) {
        for (oy = 0; oy < p->out_h; ++oy) {
            for (ox = 0; ox < p->out_w; ++ox) {
                *out++ = conv_acc(p, in, weight, bias, oc, oy, ox);
            }
        }
    }
}

/* One output of a transposed convolution, gathered: output (oy, ox) takes input (iy, ix)
 * through tap (ky, kx) when oy + pad_h = iy * stride_h + ky * dil_h (and the same across).
 * The sum is the scatter definition of edgebuild/ops/conv_transpose2d.py, in int32. */
EB_SPECIALISE int32_t conv_transpose_acc_w(const eb_conv_params *p, const int8_t *in,
                                          const int8_t *weight, const int32_t *bias, int oc,
                                          int oy, int ox, int wbits)
{
    const int in_per_group = p->in_c / p->groups;
    const int out_per_group = p->out_c / p->groups;
    const int first_in = (oc / out_per_group) * in_per_group;
    const int taps = p->k_h * p->k_w;
    const int32_t row = (int32_t)out_per_group * taps; /* weights per input channel */
    int32_t acc = bias ? bias[oc] : 0;
    int ic, ky, kx;
    for (ic = 0; ic < in_per_group; ++ic) {
        const int8_t *plane = in + (int32_t)(first_in + ic) * p->in_h * p->in_w;
        const int8_t *w = weight + (int32_t)(first_in + ic) * (wbits ? EB_PACKED_ROW_BYTES(
                                       row, wbits) : row);
        const int32_t w0 = (int32_t)(oc % out_per_group) * taps;
        for (ky = 0; ky < p->k_h; ++ky) {
            const int ty = oy + p->pad_h - ky * p->dil_h;
            int iy;
            if (ty < 0 || ty % p->stride_h != 0) {
                continue;
            }
            iy = ty / p->stride_h;
            if (iy >= p->in_h) {
                continue;
            }
            for (kx = 0; kx < p->k_w; ++kx) {
                const int tx = ox + p->pad_w - kx * p->dil_w;
                int ix;
                if (tx < 0 || tx % p->stride_w != 0) {
                    continue;
                }
                ix = tx / p->stride_w;
                if (ix < p->in_w) {
                    const int32_t i = w0 + ky * p->k_w + kx;
                    acc += EB_WEIGHT(w, wbits, i) * plane[iy * p->in_w + ix];
                }
            }
        }
    }
    return acc;
}

static int32_t conv_transpose_acc(const eb_conv_params *p, const int8_t *in,
                                  const int8_t *weight, const int32_t *bias, int oc, int oy,
                                  int ox)
{
    return p->wbits ? conv_transpose_acc_w(p, in, weight, bias, oc, oy, ox, p->wbits)
                    : conv_transpose_acc_w(p, in, weight, bias, oc, oy, ox, 0);
}

void eb_conv_transpose2d(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                         const int32_t *bias, int8_t *out)
{
    int oc, oy, ox;
    for (oc = 0; oc < p->out_c; ++oc) {
        for (oy = 0; oy < p->out_h; ++oy) {
            for (ox = 0; ox < p->out_w; ++ox) {
                *out++ = eb_requantize(conv_transpose_acc(p, in, weight, bias, oc, oy, ox),
                                       p->shift, p->rounding, p->act);
            }
        }
    }
}

void eb_conv_transpose2d_wide(const eb_conv_params *p, const int8_t *in, const int8_t *weight,
                              const int32_t *bias, int32_t *out)
{
    int oc, oy, ox;
    for (oc = 0; oc < p->out_c; ++oc) {
        for (oy = 0; oy < p->out_h; ++oy) {
            for (ox = 0; ox < p->out_w; ++ox) {
                *out++ = conv_transpose_acc(p, in, weight, bias, oc, oy, ox);
            }
        }
    }
}

static int32_t dot(int n, const int8_t *a, const int8_t *b, int32_t acc)
{
    int i;
    for (i = 0; i < n; ++i) {
        acc += (int32_t)a[i] * b[i];
    }
    return acc;
}

void eb_linear(int in_f, int out_f, const int8_t *in, const int8_t *weight,
               const int32_t *bias, int shift, int rounding, int act, int8_t *out)
{
    int o;
    for (o = 0; o < out_f; ++o) {
        const int32_t acc = dot(in_f, in, weight + (int32_t)o * in_f, bias ? bias[o] : 0);
        out[o] = eb_requantize(acc, shift, rounding, act);
    }
}

void eb_linear_wide(int in_f, int out_f, const int8_t *in, const int8_t *weight,
                    const int32_t *bias, int32_t *out)
{
    int o;
    for (o = 0; o < out_f; ++o) {
        out[o] = dot(in_f, in, weight + (int32_t)o * in_f, bias ? bias[o] : 0);
    }
}

/* Row `row` of a packed weight array (rows of n bits-bit weights) against in. */
static int32_t dot_packed(int32_t n, int bits, const int8_t *in, const int8_t *weight,
                          int32_t row, int32_t acc)
{
    const int8_t *w = weight + row * EB_PACKED_ROW_BYTES(n, bits);
    int32_t i;
    for (i = 0; i < n; ++i) {
        acc += eb_packed_weight(w, bits, i) * in[i];
    }
    return acc;
}

void eb_linear_packed(int in_f, int out_f, int bits, const int8_t *in, const int8_t *weight,
                      const int32_t *bias, int shift, int rounding, int act, int8_t *out)
{
    int o;
    for (o = 0; o < out_f; ++o) {
        const int32_t acc = dot_packed(in_f, bits, in, weight, o, bias ? bias[o] : 0);
        out[o] = eb_requantize(acc, shift, rounding, act);
    }
}

void eb_linear_packed_wide(int in_f, int out_f, int bits, const int8_t *in,
                           const int8_t *weight, const int32_t *bias, int32_t *out)
{
    int o;
    for (o = 0; o < out_f; ++o) {
        out[o] = dot_packed(in_f, bits, in, weight, o, bias ? bias[o] : 0);
    }
}

void eb_unpack_weights(int32_t rows, int32_t n, int bits, const int8_t *packed, int8_t *out)
{
    const int32_t row_bytes = EB_PACKED_ROW_BYTES(n, bits);
    int32_t r, i;
    for (r = 0; r < rows; ++r, packed += row_bytes) {
        for (i = 0; i < n; ++i) {
            *out++ = (int8_t)eb_packed_weight(packed, bits, i);
        }
    }
}

static int8_t pool_window(const eb_pool_params *p, const int8_t *plane, int oy, int ox)
{
    int32_t best = -128, sum = 0;
    int ky, kx;
    for (ky = 0; ky < p->k_h; ++ky) {
        for (kx = 0; kx < p->k_w; ++kx) {
            const int8_t v = plane[(oy * p->stride_h + ky) * p->in_w + ox * p->stride_w + kx];
            sum += v;
            if (v > best) {
                best = v;
            }
        }
    }
    if (p->mode == EB_POOL_MAX) {
        return (int8_t)best;
    }
    {
        const int32_t count = (int32_t)p->k_h * p->k_w;
        /* half up: floor((2 sum + n) / 2n); floor: floor(sum / n); trunc: C's sum / n */
        if (p->rounding == EB_ROUND_TRUNC) {
            return (int8_t)(sum / count);
        }
        return (int8_t)(p->rounding == EB_ROUND_HALF_UP ? eb_floor_div(2 * sum + count, 2 * count)
                                                        : eb_floor_div(sum, count));
    }
}

void eb_pool2d(const eb_pool_params *p, const int8_t *in, int8_t *out)
{
    int c, oy, ox;
    for (c = 0; c < p->c; ++c) {
        const int8_t *plane = in + (int32_t)c * p->in_h * p->in_w;
        for (oy = 0; oy < p->out_h; ++oy) {
            for (ox = 0; ox < p->out_w; ++ox) {
                *out++ = pool_window(p, plane, oy, ox);
            }
        }
    }
}

void eb_add(int n, int count, const int8_t *const *inputs, int act, int8_t *out)
{
    int i, k;
    for (i = 0; i < n; ++i) {
        int32_t sum = 0;
        for (k = 0; k < count; ++k) {
            sum += inputs[k][i];
        }
        out[i] = eb_requantize(sum, 0, EB_ROUND_FLOOR, act);
    }
}

void eb_copy(int n, const int8_t *src, int8_t *dst)
{
    memmove(dst, src, (size_t)n);
}

void eb_buffer_push(int channels, int length, const int8_t *in, int8_t *state, int8_t *out)
{
    int c;
    for (c = 0; c < channels; ++c) {
        int8_t *row = state + (int32_t)c * length;
        memmove(row, row + 1, (size_t)(length - 1));
        row[length - 1] = in[c];
    }
    memcpy(out, state, (size_t)channels * (size_t)length);
}
