/* edgebuild float32 training kernels: plain loops, portable C99, no allocation.
 * See eb_train.h for the layout conventions, the accumulate rule and the max-pool tie rule.
 * Every kernel matches torch up to float32 summation order; where torch's own scalar
 * arithmetic matters (the optimizers) the same operations are done in the same order. */
#include "eb_train.h"

#include <math.h>
#include <stddef.h>

/* ---- convolution ------------------------------------------------------------------------ */

/* Input row (or column) read by output position o at kernel tap k; may be outside [0, size). */
static int conv_src(int o, int k, int stride, int pad, int dil)
{
    return o * stride - pad + k * dil;
}

static int conv_in_per_group(const ebt_conv *p)
{
    return p->in_c / p->groups;
}

/* First input channel seen by output channel oc. */
static int conv_first_in(const ebt_conv *p, int oc)
{
    return (oc / (p->out_c / p->groups)) * conv_in_per_group(p);
}

/* One output value of one sample (xs = that sample's input), without bias. */
static float conv_dot(const ebt_conv *p, const float *xs, const float *w, int oc, int oy, int ox)
{
    const int in_g = conv_in_per_group(p);
    const float *wo = w + oc * in_g * p->k_h * p->k_w;
    const float *xg = xs + conv_first_in(p, oc) * p->in_h * p->in_w;
    float acc = 0.0f;
    int ic, ky, kx;
    for (ic = 0; ic < in_g; ++ic) {
        const float *plane = xg + ic * p->in_h * p->in_w;
        for (ky = 0; ky < p->k_h; ++ky) {
            const int iy = conv_src(oy, ky, p->stride_h, p->pad_h, p->dil_h);
            if (iy < 0 || iy >= p->in_h) {
                continue;
            }
            for (kx = 0; kx < p->k_w; ++kx) {
                const int ix = conv_src(ox, kx, p->stride_w, p->pad_w, p->dil_w);
                if (ix >= 0 && ix < p->in_w) {
                    acc += wo[(ic * p->k_h + ky) * p->k_w + kx] * plane[iy * p->in_w + ix];
                }
            }
        }
    }
    return acc;
}

void ebt_conv_forward(const ebt_conv *p, const float *x, const float *w, const float *b,
                      float *y)
{
    int s, oc, oy, ox;
    for (s = 0; s < p->n; ++s) {
        const float *xs = x + s * p->in_c * p->in_h * p->in_w;
        for (oc = 0; oc < p->out_c; ++oc) {
            const float bias = b ? b[oc] : 0.0f;
            for (oy = 0; oy < p->out_h; ++oy) {
                for (ox = 0; ox < p->out_w; ++ox) {
                    *y++ = conv_dot(p, xs, w, oc, oy, ox) + bias;
                }
            }
        }
    }
}

/* dx (one sample, the channels of oc's group) += g * w[oc] placed at output (oy, ox). */
static void conv_scatter(const ebt_conv *p, const float *w, float g, int oc, int oy, int ox,
                         float *dxg)
{
    const int in_g = conv_in_per_group(p);
    const float *wo = w + oc * in_g * p->k_h * p->k_w;
    int ic, ky, kx;
    for (ic = 0; ic < in_g; ++ic) {
        float *plane = dxg + ic * p->in_h * p->in_w;
        for (ky = 0; ky < p->k_h; ++ky) {
            const int iy = conv_src(oy, ky, p->stride_h, p->pad_h, p->dil_h);
            if (iy < 0 || iy >= p->in_h) {
                continue;
            }
            for (kx = 0; kx < p->k_w; ++kx) {
                const int ix = conv_src(ox, kx, p->stride_w, p->pad_w, p->dil_w);
                if (ix >= 0 && ix < p->in_w) {
                    plane[iy * p->in_w + ix] += wo[(ic * p->k_h + ky) * p->k_w + kx] * g;
                }
            }
        }
    }
}

void ebt_conv_backward_input(const ebt_conv *p, const float *dy, const float *w, float *dx)
{
    int s, oc, oy, ox;
    for (s = 0; s < p->n; ++s) {
        float *dxs = dx + s * p->in_c * p->in_h * p->in_w;
        for (oc = 0; oc < p->out_c; ++oc) {
            float *dxg = dxs + conv_first_in(p, oc) * p->in_h * p->in_w;
            for (oy = 0; oy < p->out_h; ++oy) {
                for (ox = 0; ox < p->out_w; ++ox) {
                    conv_scatter(p, w, *dy++, oc, oy, ox, dxg);
                }
            }
        }
    }
}

static int clamp_int(int v, int lo, int hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* Sum over output rows [row0, row1) of one sample of dy[oc] * (the input tap (ic, ky, kx)). */
static float conv_weight_tap(const ebt_conv *p, const float *dyc, const float *plane, int ky,
                             int kx, int row0, int row1)
{
    float acc = 0.0f;
    int oy, ox;
    for (oy = row0; oy < row1; ++oy) {
        const int iy = conv_src(oy, ky, p->stride_h, p->pad_h, p->dil_h);
        if (iy < 0 || iy >= p->in_h) {
            continue;
        }
        for (ox = 0; ox < p->out_w; ++ox) {
            const int ix = conv_src(ox, kx, p->stride_w, p->pad_w, p->dil_w);
            if (ix >= 0 && ix < p->in_w) {
                acc += dyc[oy * p->out_w + ox] * plane[iy * p->in_w + ix];
            }
        }
    }
    return acc;
}

void ebt_conv_backward_weight(const ebt_conv *p, const float *dy, const float *x, float *dw,
                              int row0, int row1)
{
    const int in_g = conv_in_per_group(p);
    const int in_plane = p->in_h * p->in_w, out_plane = p->out_h * p->out_w;
    const int r0 = clamp_int(row0, 0, p->out_h), r1 = clamp_int(row1, r0, p->out_h);
    int oc, ic, ky, kx, s;
    for (oc = 0; oc < p->out_c; ++oc) {
        const int first_in = conv_first_in(p, oc);
        for (ic = 0; ic < in_g; ++ic) {
            for (ky = 0; ky < p->k_h; ++ky) {
                for (kx = 0; kx < p->k_w; ++kx) {
                    float acc = 0.0f;
                    for (s = 0; s < p->n; ++s) {
                        const float *dyc = dy + (s * p->out_c + oc) * out_plane;
                        const float *plane = x + (s * p->in_c + first_in + ic) * in_plane;
                        acc += conv_weight_tap(p, dyc, plane, ky, kx, r0, r1);
                    }
                    *dw++ += acc;
                }
            }
        }
    }
}

void ebt_conv_backward_bias(const ebt_conv *p, const float *dy, float *db)
{
    const int out_plane = p->out_h * p->out_w;
    int oc, s, i;
    for (oc = 0; oc < p->out_c; ++oc) {
        float acc = 0.0f;
        for (s = 0; s < p->n; ++s) {
            const float *dyc = dy + (s * p->out_c + oc) * out_plane;
            for (i = 0; i < out_plane; ++i) {
                acc += dyc[i];
            }
        }
        db[oc] += acc;
    }
}

/* ---- pooling ---------------------------------------------------------------------------- */

/* Index in the plane of the first maximum of window (oy, ox), scanning rows then columns:
 * only a strictly greater value replaces the current one (PyTorch's CPU tie rule). */
static int pool_argmax(const ebt_pool *p, const float *plane, int oy, int ox)
{
    const int y0 = oy * p->stride_h, x0 = ox * p->stride_w;
    int best = y0 * p->in_w + x0;
    int ky, kx;
    for (ky = 0; ky < p->k_h; ++ky) {
        for (kx = 0; kx < p->k_w; ++kx) {
            const int i = (y0 + ky) * p->in_w + x0 + kx;
            if (plane[i] > plane[best]) {
                best = i;
            }
        }
    }
    return best;
}

static float pool_sum(const ebt_pool *p, const float *plane, int oy, int ox)
{
    const int y0 = oy * p->stride_h, x0 = ox * p->stride_w;
    float acc = 0.0f;
    int ky, kx;
    for (ky = 0; ky < p->k_h; ++ky) {
        for (kx = 0; kx < p->k_w; ++kx) {
            acc += plane[(y0 + ky) * p->in_w + x0 + kx];
        }
    }
    return acc;
}

void ebt_pool_forward(const ebt_pool *p, const float *x, float *y)
{
    const float area = (float)(p->k_h * p->k_w);
    int plane_i, oy, ox;
    for (plane_i = 0; plane_i < p->n * p->c; ++plane_i) {
        const float *plane = x + plane_i * p->in_h * p->in_w;
        for (oy = 0; oy < p->out_h; ++oy) {
            for (ox = 0; ox < p->out_w; ++ox) {
                *y++ = p->mode == EBT_POOL_MAX ? plane[pool_argmax(p, plane, oy, ox)]
                                               : pool_sum(p, plane, oy, ox) / area;
            }
        }
    }
}

/* Every element of window (oy, ox) += g. */
static void pool_spread(const ebt_pool *p, float g, int oy, int ox, float *dplane)
{
    const int y0 = oy * p->stride_h, x0 = ox * p->stride_w;
    int ky, kx;
    for (ky = 0; ky < p->k_h; ++ky) {
        for (kx = 0; kx < p->k_w; ++kx) {
            dplane[(y0 + ky) * p->in_w + x0 + kx] += g;
        }
    }
}

void ebt_pool_backward(const ebt_pool *p, const float *x, const float *dy, float *dx)
{
    const float area = (float)(p->k_h * p->k_w);
    const int in_plane = p->in_h * p->in_w;
    int plane_i, oy, ox;
    for (plane_i = 0; plane_i < p->n * p->c; ++plane_i) {
        const float *plane = x + plane_i * in_plane;
        float *dplane = dx + plane_i * in_plane;
        for (oy = 0; oy < p->out_h; ++oy) {
            for (ox = 0; ox < p->out_w; ++ox) {
                const float g = *dy++;
                if (p->mode == EBT_POOL_MAX) {
                    dplane[pool_argmax(p, plane, oy, ox)] += g;
                } else {
                    pool_spread(p, g / area, oy, ox, dplane);
                }
            }
        }
    }
}

/* ---- elementwise ------------------------------------------------------------------------ */

static float act_base(int act, float v)
{
    if (act == EBT_ACT_RELU) {
        return v > 0.0f ? v : 0.0f;
    }
    if (act == EBT_ACT_ABS) {
        return fabsf(v);
    }
    return v;
}

static float act_apply(int act, float v)
{
    const float r = act_base(act & ~EBT_ACT_CLAMP, v);
    if (act & EBT_ACT_CLAMP) {
        return r < EBT_CLAMP_LOW ? EBT_CLAMP_LOW : (r > EBT_CLAMP_HIGH ? EBT_CLAMP_HIGH : r);
    }
    return r;
}

/* act'(v) * g with relu'(0) = 0 and sign(0) = 0, as torch's threshold/sgn backward; the
 * clamp's gradient is 1 strictly inside its range and 0 on and beyond its ends (hardtanh). */
static float act_grad(int act, float v, float g)
{
    const int base = act & ~EBT_ACT_CLAMP;
    if (act & EBT_ACT_CLAMP) {
        const float r = act_base(base, v);
        if (!(r > EBT_CLAMP_LOW && r < EBT_CLAMP_HIGH)) {
            return 0.0f;
        }
    }
    if (base == EBT_ACT_RELU) {
        return v > 0.0f ? g : 0.0f;
    }
    if (base == EBT_ACT_ABS) {
        return v > 0.0f ? g : (v < 0.0f ? -g : 0.0f);
    }
    return g;
}

void ebt_act_forward(int act, int count, const float *x, float *y)
{
    int i;
    for (i = 0; i < count; ++i) {
        y[i] = act_apply(act, x[i]);
    }
}

void ebt_act_backward(int act, int count, const float *x, const float *dy, float *dx)
{
    int i;
    for (i = 0; i < count; ++i) {
        dx[i] += act_grad(act, x[i], dy[i]);
    }
}

void ebt_accumulate(int count, const float *src, float *dst)
{
    int i;
    for (i = 0; i < count; ++i) {
        dst[i] += src[i];
    }
}

void ebt_add_forward(int count, const float *a, const float *b, float *y)
{
    int i;
    for (i = 0; i < count; ++i) {
        y[i] = a[i] + b[i];
    }
}

void ebt_concat_forward(int n, int parts, const int *part_elems, const float *const *xs,
                        float *y)
{
    int s, i, j;
    for (s = 0; s < n; ++s) {
        for (i = 0; i < parts; ++i) {
            const float *src = xs[i] + s * part_elems[i];
            for (j = 0; j < part_elems[i]; ++j) {
                *y++ = src[j];
            }
        }
    }
}

void ebt_concat_backward(int n, int parts, const int *part_elems, const float *dy,
                         float *const *dxs)
{
    int s, i, j;
    for (s = 0; s < n; ++s) {
        for (i = 0; i < parts; ++i) {
            float *dst = dxs[i] + s * part_elems[i];
            for (j = 0; j < part_elems[i]; ++j) {
                dst[j] += *dy++;
            }
        }
    }
}

/* ---- losses ----------------------------------------------------------------------------- */

/* -log_softmax(row)[label] of one sample; d receives softmax(row) - onehot(label), scaled by
 * 1/n. Reads row[label] first, so d may alias row. */
static float cross_entropy_row(int classes, const float *row, int label, float n, float *d)
{
    float top = row[0], sum = 0.0f, picked, log_sum;
    int j;
    for (j = 1; j < classes; ++j) {
        top = row[j] > top ? row[j] : top;
    }
    picked = row[label] - top;
    for (j = 0; j < classes; ++j) {
        d[j] = expf(row[j] - top);
        sum += d[j];
    }
    log_sum = logf(sum);
    for (j = 0; j < classes; ++j) {
        d[j] = (d[j] / sum - (j == label ? 1.0f : 0.0f)) / n;
    }
    return log_sum - picked;
}

float ebt_softmax_cross_entropy(int n, int classes, const float *logits, const int32_t *labels,
                                float *dlogits)
{
    float total = 0.0f;
    int s;
    for (s = 0; s < n; ++s) {
        total += cross_entropy_row(classes, logits + s * classes, (int)labels[s], (float)n,
                                   dlogits + s * classes);
    }
    return total / (float)n;
}

float ebt_mse(int n, int k, const float *y, const float *target, float *dy)
{
    const int count = n * k;
    const float scale = 2.0f / (float)count;
    float total = 0.0f;
    int i;
    for (i = 0; i < count; ++i) {
        const float diff = y[i] - target[i];
        total += diff * diff;
        dy[i] = scale * diff;
    }
    return total / (float)count;
}

/* ---- optimizers ------------------------------------------------------------------------- */

void ebt_sgd_step(int count, float *w, const float *g, float *momentum_buf, float lr,
                  float momentum)
{
    int i;
    if (momentum_buf == NULL || momentum == 0.0f) {
        for (i = 0; i < count; ++i) {
            w[i] -= lr * g[i];
        }
        return;
    }
    for (i = 0; i < count; ++i) {
        momentum_buf[i] = momentum_buf[i] * momentum + g[i];
        w[i] -= lr * momentum_buf[i];
    }
}

/* base^e for e >= 0 by squaring, in double: a Python float ** int to within a few double ulp,
 * far below the float the result is rounded to. */
static double pow_int(double base, int e)
{
    double r = 1.0;
    while (e > 0) {
        if (e & 1) {
            r *= base;
        }
        base *= base;
        e >>= 1;
    }
    return r;
}

/* (float)sqrt(v) for v >= 0 without libm's double sqrt: sqrtf gives a float-accurate start and
 * two Newton steps in double make it double-accurate before the final rounding to float. */
static float sqrt_to_float(double v)
{
    double r = (double)sqrtf((float)v);
    if (r > 0.0) {
        r = 0.5 * (r + v / r);
        r = 0.5 * (r + v / r);
    }
    return (float)r;
}

/* torch.lerp: start + weight * (end - start), or the form that is exact at weight 1. */
static float lerp_float(float start, float end, float weight)
{
    return fabsf(weight) < 0.5f ? start + weight * (end - start)
                                : end - (end - start) * (1.0f - weight);
}

/* The per-step scalars are computed as torch computes them: in double (Python floats), from
 * the float hyper-parameters, then rounded to float where they meet the float tensors. */
void ebt_adam_step(int count, float *w, const float *g, float *m, float *v, float lr,
                   float beta1, float beta2, float eps, int step)
{
    const double bc1 = 1.0 - pow_int((double)beta1, step);
    const double bc2 = 1.0 - pow_int((double)beta2, step);
    const float neg_step_size = (float)(-((double)lr / bc1));
    const float bc2_sqrt = sqrt_to_float(bc2);
    const float one_minus_beta1 = (float)(1.0 - (double)beta1);
    const float one_minus_beta2 = (float)(1.0 - (double)beta2);
    int i;
    for (i = 0; i < count; ++i) {
        float denom;
        m[i] = lerp_float(m[i], g[i], one_minus_beta1);
        v[i] = v[i] * beta2 + one_minus_beta2 * g[i] * g[i];
        denom = sqrtf(v[i]) / bc2_sqrt + eps;
        w[i] += neg_step_size * m[i] / denom;
    }
}
