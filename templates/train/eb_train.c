/* edgebuild float32 training kernels: plain loops, portable C99, no allocation.
 * See eb_train.h for the layout conventions, the accumulate rule and the max-pool tie rule.
 * Every kernel matches torch up to float32 summation order; where torch's own scalar
 * arithmetic matters (the optimizers) the same operations are done in the same order. */
#include "eb_train.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* acc + w * x: one fused multiply-add on an FPU that has it (the Cortex-M4F's VFMA, one
 * rounding), else a multiply and an add; either is torch's value up to summation order. */
#if defined(__ARM_FEATURE_FMA)
#define EBT_FMA(acc, w, x) __builtin_fmaf((w), (x), (acc))
#else
#define EBT_FMA(acc, w, x) ((acc) + (w) * (x))
#endif

/* The row loops below are small functions so that each says one thing; inlined, their
 * accumulators stay in registers across the taps of a block. */
#if defined(__GNUC__)
#define EBT_INLINE static inline __attribute__((always_inline))
#else
#define EBT_INLINE static inline
#endif

/* A row of a block's sum (rows8): its input row, floats from the block's first input, and
 * its taps. The assembly reads it as two words (a 32-bit target). */
typedef struct {
    int32_t x;
    const float *w;
} ebt_tap_row;

/* The rows a block's 8 outputs sum over, their number of taps each, and how far apart two
 * blocks' starting values are (0: the same 8 for every block, 8: the outputs' own). The
 * assembly reads the fields by offset: rows 0, n_rows 4, taps 8, init_step 12. */
typedef struct {
    const ebt_tap_row *rows;
    int32_t n_rows, taps, init_step;
} ebt_rows8;

/* On the Cortex-M4F the correlation under every convolution pass runs in assembly
 * (eb_train_asm.h; EBT_NO_ASM turns it off): it needs GCC's register constraints, Thumb-2
 * and the FPU's fused multiply-add, and optimisation on for its eight register operands.
 * Its sums are the portable code's, term for term and in the same order. */
#if defined(__GNUC__) && defined(__thumb2__) && defined(__ARM_FEATURE_FMA) && \
    defined(__OPTIMIZE__) && !defined(EBT_NO_ASM)
#define EBT_ASM 1
#include "eb_train_asm.h"
#endif

/* Short copy and clearing loops (a few floats of an edge's zero-padded window) stay loops:
 * GCC would otherwise call memcpy and memset, whose call costs more than the copy. */
#if defined(__GNUC__) && !defined(__clang__)
#define EBT_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define EBT_LOOPS
#endif

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

/* Kernel taps [*lo, *hi) along one axis that read inside the input for output o (rows or
 * columns alike). */
static void taps_inside(int o, int in, int k, int stride, int pad, int dil, int *lo, int *hi)
{
    const int first = o * stride - pad; /* input row of kernel row 0 */
    const int a = first >= 0 ? 0 : (-first + dil - 1) / dil;
    int b = first > in - 1 ? 0 : (in - 1 - first) / dil + 1;
    if (b > k) {
        b = k;
    }
    *lo = a < b ? a : b;
    *hi = b;
}

/* Kernel taps [*lo, *hi) along one axis (padding pad, dilation dil, k taps, out outputs)
 * whose output exists for input i of a stride-1 convolution: tap t reads output
 * i + pad - t * dil, in [0, out). */
static void grad_taps_inside(int i, int pad, int dil, int out, int k, int *lo, int *hi)
{
    const int first = i + pad; /* output of tap 0 */
    const int a = first - (out - 1) <= 0 ? 0 : (first - (out - 1) + dil - 1) / dil;
    int b = first < 0 ? 0 : first / dil + 1;
    if (b > k) {
        b = k;
    }
    *lo = a < b ? a : b;
    *hi = b;
}

/* One output value of one sample (xs = that sample's input): init plus its terms. */
static float conv_dot(const ebt_conv *p, const float *xs, const float *w, int oc, int oy, int ox,
                      float init)
{
    const int in_g = conv_in_per_group(p);
    const float *wo = w + oc * in_g * p->k_h * p->k_w;
    const float *xg = xs + conv_first_in(p, oc) * p->in_h * p->in_w;
    float acc = init;
    int ic, ky, kx, ky0, ky1, kx0, kx1;
    taps_inside(oy, p->in_h, p->k_h, p->stride_h, p->pad_h, p->dil_h, &ky0, &ky1);
    taps_inside(ox, p->in_w, p->k_w, p->stride_w, p->pad_w, p->dil_w, &kx0, &kx1);
    for (ic = 0; ic < in_g; ++ic) {
        const float *plane = xg + ic * p->in_h * p->in_w;
        for (ky = ky0; ky < ky1; ++ky) {
            const float *xr = plane + conv_src(oy, ky, p->stride_h, p->pad_h, p->dil_h) * p->in_w;
            const float *wr = wo + (ic * p->k_h + ky) * p->k_w;
            for (kx = kx0; kx < kx1; ++kx) {
                acc = EBT_FMA(acc, wr[kx], xr[conv_src(ox, kx, p->stride_w, p->pad_w, p->dil_w)]);
            }
        }
    }
    return acc;
}

/* Outputs [*lo, *hi) whose tap k reads inside the input: 0 <= o * stride - pad + k * dil
 * <= in - 1. */
static void tap_range(int out, int in, int k, int stride, int pad, int dil, int *lo, int *hi)
{
    const int first = pad - k * dil, last = in - 1 + pad - k * dil;
    const int a = first <= 0 ? 0 : (first + stride - 1) / stride;
    int b = last < 0 ? 0 : last / stride + 1;
    if (b > out) {
        b = out;
    }
    *lo = a < b ? a : b;
    *hi = b;
}

/* Output columns [*lo, *hi) whose every tap reads inside the input row (or column): from
 * the first where tap 0 does to the last where tap k - 1 does. The others ("edges", within
 * pad of the border) read padding. */
static void conv_inside(int out, int in, int k, int stride, int pad, int dil, int *lo, int *hi)
{
    int unused;
    tap_range(out, in, 0, stride, pad, dil, lo, &unused);
    tap_range(out, in, k - 1, stride, pad, dil, &unused, hi);
    if (*lo > *hi) {
        *lo = *hi;
    }
}

/* A convolution along its rows only (one column wide: in_w == out_w == k_w == 1, how a
 * conv1d lays out its length) is the same convolution along a row: [..][H][1] and [..][1][H]
 * are the same memory, the weights' [k_h][1] and [1][k_h] too. A pointwise one (1x1,
 * stride 1, no padding) is the same convolution of planes flattened to one row. Returned
 * as q so that the row paths' blocks serve it; any other geometry is p itself. */
static const ebt_conv *conv_rowwise(const ebt_conv *p, ebt_conv *q)
{
    if (p->k_h == 1 && p->k_w == 1 && p->stride_h == 1 && p->stride_w == 1 && p->pad_h == 0 &&
        p->pad_w == 0 && p->in_h > 1) {
        /* a pointwise kernel: its planes line up with its outputs' as one row */
        *q = *p;
        q->in_w = q->out_w = p->in_h * p->in_w;
        q->in_h = q->out_h = 1;
        return q;
    }
    if (p->in_w != 1 || p->out_w != 1 || p->k_w != 1 || p->pad_w != 0 || p->in_h == 1) {
        return p;
    }
    *q = *p;
    q->in_h = q->out_h = q->k_h = 1;
    q->stride_h = q->dil_h = 1;
    q->pad_h = 0;
    q->in_w = p->in_h;
    q->out_w = p->out_h;
    q->k_w = p->k_h;
    q->stride_w = p->stride_h;
    q->pad_w = p->pad_h;
    q->dil_w = p->dil_h;
    return q;
}

/* A linear layer: a 1x1 convolution of 1x1 planes, one group (eb_train.h). */
static int conv_is_linear(const ebt_conv *p)
{
    return p->in_h == 1 && p->in_w == 1 && p->out_h == 1 && p->out_w == 1 && p->k_h == 1 &&
           p->k_w == 1 && p->pad_h == 0 && p->pad_w == 0 && p->groups == 1;
}

/* The sums of four consecutive outputs of one row, taps in conv_dot's order (so each is the
 * same sum as conv_dot's): every tap of the row reads inside the input. xr: the input row at
 * the first output's first tap; wr: the row's first tap, the next wstep floats on (-1: the
 * taps backwards, for an input gradient); step: between two outputs' inputs (the stride);
 * dil: between two taps' inputs. Stride and dilation 1 slide a window of inputs along the
 * row: 4 taps of 4 outputs read 7 inputs, not 16. */
EBT_INLINE void conv_row4(const float *xr, const float *wr, int wstep, int k, int step,
                          int dil, float a[4])
{
    float a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    int kx = 0;
    if (step == 1 && dil == 1) {
        for (; kx + 4 <= k; kx += 4, wr += 4 * wstep) {
            const float *xp = xr + kx;
            const float w0 = wr[0], w1 = wr[wstep], w2 = wr[2 * wstep], w3 = wr[3 * wstep];
            const float x0 = xp[0], x1 = xp[1], x2 = xp[2], x3 = xp[3], x4 = xp[4],
                        x5 = xp[5], x6 = xp[6];
            a0 = EBT_FMA(a0, w0, x0);
            a1 = EBT_FMA(a1, w0, x1);
            a2 = EBT_FMA(a2, w0, x2);
            a3 = EBT_FMA(a3, w0, x3);
            a0 = EBT_FMA(a0, w1, x1);
            a1 = EBT_FMA(a1, w1, x2);
            a2 = EBT_FMA(a2, w1, x3);
            a3 = EBT_FMA(a3, w1, x4);
            a0 = EBT_FMA(a0, w2, x2);
            a1 = EBT_FMA(a1, w2, x3);
            a2 = EBT_FMA(a2, w2, x4);
            a3 = EBT_FMA(a3, w2, x5);
            a0 = EBT_FMA(a0, w3, x3);
            a1 = EBT_FMA(a1, w3, x4);
            a2 = EBT_FMA(a2, w3, x5);
            a3 = EBT_FMA(a3, w3, x6);
        }
    }
    for (; kx < k; ++kx, wr += wstep) {
        const float *xp = xr + kx * dil;
        const float wv = wr[0];
        a0 = EBT_FMA(a0, wv, xp[0]);
        a1 = EBT_FMA(a1, wv, xp[step]);
        a2 = EBT_FMA(a2, wv, xp[2 * step]);
        a3 = EBT_FMA(a3, wv, xp[3 * step]);
    }
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
}

/* a[i] += the sum over taps t < k of wr[t * wstep] * xr[t + i], i < 8, t in order: eight
 * consecutive outputs at stride and dilation 1, two taps a pass over 9 inputs. The
 * portable twin of the assembly's correlations (eb_train_asm.h). */
EBT_INLINE void conv_row8(const float *xr, const float *wr, int wstep, int k, float a[8])
{
    float a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], a4 = a[4], a5 = a[5], a6 = a[6],
          a7 = a[7];
    int kx = 0;
    for (; kx + 2 <= k; kx += 2, wr += 2 * wstep) {
        const float *xp = xr + kx;
        const float w0 = wr[0], w1 = wr[wstep];
        const float x0 = xp[0], x1 = xp[1], x2 = xp[2], x3 = xp[3], x4 = xp[4],
                    x5 = xp[5], x6 = xp[6], x7 = xp[7], x8 = xp[8];
        a0 = EBT_FMA(a0, w0, x0);
        a1 = EBT_FMA(a1, w0, x1);
        a2 = EBT_FMA(a2, w0, x2);
        a3 = EBT_FMA(a3, w0, x3);
        a4 = EBT_FMA(a4, w0, x4);
        a5 = EBT_FMA(a5, w0, x5);
        a6 = EBT_FMA(a6, w0, x6);
        a7 = EBT_FMA(a7, w0, x7);
        a0 = EBT_FMA(a0, w1, x1);
        a1 = EBT_FMA(a1, w1, x2);
        a2 = EBT_FMA(a2, w1, x3);
        a3 = EBT_FMA(a3, w1, x4);
        a4 = EBT_FMA(a4, w1, x5);
        a5 = EBT_FMA(a5, w1, x6);
        a6 = EBT_FMA(a6, w1, x7);
        a7 = EBT_FMA(a7, w1, x8);
    }
    for (; kx < k; ++kx, wr += wstep) {
        const float *xp = xr + kx;
        const float wv = wr[0];
        a0 = EBT_FMA(a0, wv, xp[0]);
        a1 = EBT_FMA(a1, wv, xp[1]);
        a2 = EBT_FMA(a2, wv, xp[2]);
        a3 = EBT_FMA(a3, wv, xp[3]);
        a4 = EBT_FMA(a4, wv, xp[4]);
        a5 = EBT_FMA(a5, wv, xp[5]);
        a6 = EBT_FMA(a6, wv, xp[6]);
        a7 = EBT_FMA(a7, wv, xp[7]);
    }
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
    a[4] = a4;
    a[5] = a5;
    a[6] = a6;
    a[7] = a7;
}


/* a[i] += sum over t < n of s[t] * x[t + i], i < 8, t in order: a correlation of 8 sums
 * (conv_row8's, dilation 1), in assembly where there is one. */
EBT_INLINE void corr8(float a[8], const float *s, const float *x, int n)
{
#if defined(EBT_ASM)
    ebt_corr8_up(a, s, x, n);
#else
    conv_row8(x, s, 1, n, a);
#endif
}

#if !defined(EBT_ASM)
/* The portable twin of ebt_rows8_up/down (eb_train_asm.h): for each block b < blocks, the
 * 8 outputs out[8b..] = the 8 values at init (init_step floats on per block), plus for each
 * row of the table in order its taps' correlation with the input row x + 8b + row.x, taps
 * walking up from row.w (up) or down from row.w - 1. */
static void rows8_c(const ebt_rows8 *job, float *out, const float *init, const float *x,
                    int blocks, int up)
{
    int b, r, i;
    for (b = 0; b < blocks; ++b, out += 8, x += 8, init += job->init_step) {
        float a[8];
        for (i = 0; i < 8; ++i) {
            a[i] = init[i];
        }
        for (r = 0; r < job->n_rows; ++r) {
            const ebt_tap_row *row = job->rows + r;
            conv_row8(x + row->x, up ? row->w : row->w - 1, up ? 1 : -1, job->taps, a);
        }
        for (i = 0; i < 8; ++i) {
            out[i] = a[i];
        }
    }
}
#endif

static void rows8(const ebt_rows8 *job, float *out, const float *init, const float *x,
                  int blocks, int up)
{
#if defined(EBT_ASM)
    if (up) {
        ebt_rows8_up(job, out, init, x, blocks);
    } else {
        ebt_rows8_down(job, out, init, x, blocks);
    }
#else
    rows8_c(job, out, init, x, blocks, up);
#endif
}

#if !defined(EBT_ASM)
/* The portable twin of ebt_cols16 (eb_train_asm.h): rows8_c for rows of one tap, in blocks
 * of 16 (init_step 0 or 16). */
static void cols16_c(const ebt_rows8 *job, float *out, const float *init, const float *x,
                     int blocks)
{
    int b, r, i;
    for (b = 0; b < blocks; ++b, out += 16, x += 16, init += job->init_step) {
        float a[16];
        for (i = 0; i < 16; ++i) {
            a[i] = init[i];
        }
        for (r = 0; r < job->n_rows; ++r) {
            const float wv = job->rows[r].w[0];
            const float *xr = x + job->rows[r].x;
            for (i = 0; i < 16; ++i) {
                a[i] = EBT_FMA(a[i], wv, xr[i]);
            }
        }
        for (i = 0; i < 16; ++i) {
            out[i] = a[i];
        }
    }
}
#endif

static void cols16(const ebt_rows8 *job, float *out, const float *init, const float *x,
                   int blocks)
{
#if defined(EBT_ASM)
    ebt_cols16(job, out, init, x, blocks);
#else
    cols16_c(job, out, init, x, blocks);
#endif
}

#define EBT_TABLE_ROWS 32 /* rows a table holds; a longer sum runs in several passes */

/* Rows gathered for a pass of rows8 or cols16: the table and the job over it. */
typedef struct {
    ebt_tap_row rows[EBT_TABLE_ROWS];
    ebt_rows8 job;
} row_table;

EBT_INLINE void table_start(row_table *t, int taps)
{
    t->job.rows = t->rows;
    t->job.n_rows = 0;
    t->job.taps = taps;
}

/* Appends a row; nonzero when the table is full (time for a pass). */
EBT_INLINE int table_add(row_table *t, int x, const float *w)
{
    t->rows[t->job.n_rows].x = x;
    t->rows[t->job.n_rows++].w = w;
    return t->job.n_rows == EBT_TABLE_ROWS;
}

/* A row's blocks of 16 outputs of a convolution one column wide, summed over rows (input
 * channel x kernel row, one weight each) through cols16, the rows gathered EBT_TABLE_ROWS
 * at a time: the first pass starts from init, later ones from out. */
typedef struct {
    row_table t;
    float init[16];
    float *out;
    const float *x;
    int blocks, passes;
} column_sum;

static void column_sum_start(column_sum *r, float *out, const float *x, int blocks)
{
    table_start(&r->t, 1);
    r->out = out;
    r->x = x;
    r->blocks = blocks;
    r->passes = 0;
}

static void column_sum_flush(column_sum *r)
{
    if (r->t.job.n_rows > 0) {
        r->t.job.init_step = r->passes > 0 ? 16 : 0;
        cols16(&r->t.job, r->out, r->passes > 0 ? r->out : r->init, r->x, r->blocks);
        r->passes++;
        r->t.job.n_rows = 0;
    }
}

static void column_sum_add(column_sum *r, int x, const float *w)
{
    if (table_add(&r->t, x, w)) {
        column_sum_flush(r);
    }
}

/* The last pass; with no row at all, every output is init. */
static void column_sum_finish(column_sum *r)
{
    int i;
    column_sum_flush(r);
    for (i = 0; r->passes == 0 && i < r->blocks * 16; ++i) {
        r->out[i] = r->init[i % 16];
    }
}

#define EBT_EDGE_FLOATS 256 /* the stack scratch of an edge block's zero-padded rows */

/* One output row of a stride-1, dilation-1 convolution pass as a correlation: out[o]
 * (o < n_out) is its start (the 8 values at init, or out's own) plus, for every row of the
 * table in order, its taps' correlation with X[o - lead ..], X the len inputs of the row at
 * x + row.x, zero outside them (the padding). The rows come EBT_TABLE_ROWS at a time; each
 * pass runs the outputs whose taps all read inside X in blocks of 8 (rows8), and the rest
 * (the edges, and the last outputs short of a block) as blocks of 8 of their own over
 * zero-padded copies of the inputs they read, keeping the outputs that exist. */
typedef struct {
    row_table t;
    float init[8];
    const float *x;
    float *out;
    int n_out, len, lead, up, from_init, passes;
} corr_row;

static void corr_start(corr_row *c, float *out, int n_out, const float *x, int len, int lead,
                       int taps, int up, int from_init)
{
    table_start(&c->t, taps);
    c->out = out;
    c->n_out = n_out;
    c->x = x;
    c->len = len;
    c->lead = lead;
    c->up = up;
    c->from_init = from_init;
    c->passes = 0;
}

/* The block of 8 from input first of every row of the pass, zero outside [0, len), copied
 * into the scratch as many rows at a time as it holds, into a. */
EBT_LOOPS static void corr_padded(const corr_row *c, int first, float a[8])
{
    const int span = 7 + c->t.job.taps, per = EBT_EDGE_FLOATS / span;
    const int t0 = first < 0 ? -first : 0;
    const int t1 = c->len - first < span ? c->len - first : span;
    float scratch[EBT_EDGE_FLOATS];
    row_table padded;
    int r0, r, t;
    table_start(&padded, c->t.job.taps);
    padded.job.init_step = 0;
    for (r0 = 0; r0 < c->t.job.n_rows; r0 += per) {
        padded.job.n_rows = c->t.job.n_rows - r0 < per ? c->t.job.n_rows - r0 : per;
        for (r = 0; r < padded.job.n_rows; ++r) {
            const float *xr = c->x + c->t.rows[r0 + r].x + first;
            float *into = scratch + r * span;
            for (t = 0; t < span; ++t) {
                into[t] = 0.0f;
            }
            for (t = t0; t < t1; ++t) {
                into[t] = xr[t];
            }
            padded.rows[r].x = r * span;
            padded.rows[r].w = c->t.rows[r0 + r].w;
        }
        rows8(&padded.job, a, a, scratch, 1, c->up);
    }
}

/* Output o of the pass on its own, in C: its start plus every row's taps that read inside
 * X, rows and taps in order (the block's sums without the padding's zero terms). */
static void corr_single(corr_row *c, int o, float start)
{
    int r, t;
    for (r = 0; r < c->t.job.n_rows; ++r) {
        const float *xr = c->x + c->t.rows[r].x + o - c->lead;
        const float *w = c->t.rows[r].w;
        for (t = 0; t < c->t.job.taps; ++t) {
            const int i = o - c->lead + t;
            if (i >= 0 && i < c->len) {
                start = EBT_FMA(start, c->up ? w[t] : w[-1 - t], xr[t]);
            }
        }
    }
    c->out[o] = start;
}

/* Outputs [o0, o0 + count) of the pass, through one block of 8 from output start (start <=
 * o0, o0 + count <= start + 8): over the rows themselves where the block reads inside
 * them, else over zero-padded copies. The block's other outputs are dropped. One or two
 * outputs cost less one by one (corr_single) than a block's 8. */
static void corr_block(corr_row *c, int o0, int count, int start, const float *init)
{
    const int first = start - c->lead;
    float a[8];
    int j;
    if (count <= 2) {
        for (j = o0; j < o0 + count; ++j) {
            corr_single(c, j, init ? init[0] : c->out[j]);
        }
        return;
    }
    for (j = 0; j < 8; ++j) {
        a[j] = init ? init[j] : (start + j < c->n_out ? c->out[start + j] : 0.0f);
    }
    if (first >= 0 && first + 7 + c->t.job.taps <= c->len) {
        c->t.job.init_step = 0;
        rows8(&c->t.job, a, a, c->x + first, 1, c->up);
    } else {
        corr_padded(c, first, a);
    }
    for (j = o0 - start; j < o0 - start + count; ++j) {
        c->out[start + j] = a[j];
    }
}

/* One pass: the outputs whose taps all read inside [lo, hi) in blocks of 8, the few short
 * of a block as one block ending at hi, the edges in blocks of their own. */
static void corr_flush(corr_row *c)
{
    const float *init = c->from_init && c->passes == 0 ? c->init : NULL;
    int lo = c->lead > 0 ? c->lead : 0, hi = c->len + c->lead - c->t.job.taps + 1, blocks, o;
    if (c->t.job.n_rows == 0) {
        return;
    }
    lo = lo < c->n_out ? lo : c->n_out;
    hi = hi < c->n_out ? hi : c->n_out;
    hi = hi > lo ? hi : lo;
    blocks = (hi - lo) / 8;
    if (blocks > 0) {
        c->t.job.init_step = init ? 0 : 8;
        rows8(&c->t.job, c->out + lo, init ? init : c->out + lo, c->x + lo - c->lead, blocks,
              c->up);
    }
    if (lo + 8 * blocks < hi) {
        corr_block(c, lo + 8 * blocks, hi - lo - 8 * blocks, hi - 8 > 0 ? hi - 8 : 0, init);
    }
    for (o = 0; o < lo; o += 8) {
        corr_block(c, o, lo - o < 8 ? lo - o : 8, o, init);
    }
    for (o = hi; o < c->n_out; o += 8) {
        corr_block(c, o, c->n_out - o < 8 ? c->n_out - o : 8, o, init);
    }
    c->passes++;
    c->t.job.n_rows = 0;
}

static void corr_add(corr_row *c, int x, const float *w)
{
    if (table_add(&c->t, x, w)) {
        corr_flush(c);
    }
}

/* The last pass; with no row at all, every output is its start. */
static void corr_finish(corr_row *c)
{
    int o;
    corr_flush(c);
    for (o = 0; c->passes == 0 && c->from_init && o < c->n_out; ++o) {
        c->out[o] = c->init[o % 8];
    }
}

/* One output row's geometry, fixed while its blocks run: the group's input planes (xg), the
 * channel's weights (wo), the kernel rows inside the input [ky0, ky1) and the input row of
 * kernel row ky0. */
typedef struct {
    const float *xg, *wo;
    int ky0, ky1, iy0;
} conv_rowset;

/* acc + the taps of one output along a row that every tap reads inside, in conv_dot's
 * order. */
EBT_INLINE float conv_row1(const float *xr, const float *wr, int k, int dil, float acc)
{
    int kx;
    for (kx = 0; kx < k; ++kx) {
        acc = EBT_FMA(acc, wr[kx], xr[kx * dil]);
    }
    return acc;
}

/* Outputs [ox, ox + width) (width 4 or 1) of a row whose taps all read inside the input
 * along the row: init plus conv_dot's terms, a block at a time. */
EBT_INLINE void conv_block(const ebt_conv *p, const conv_rowset *r, int ox, int width,
                           float init, float a[4])
{
    const int in_g = conv_in_per_group(p), in_plane = p->in_h * p->in_w;
    const int rows = r->ky1 - r->ky0, step = p->dil_h * p->in_w;
    const float *xc = r->xg + r->iy0 * p->in_w + ox * p->stride_w - p->pad_w;
    const float *wc = r->wo + r->ky0 * p->k_w;
    int ic, ky;
    a[0] = a[1] = a[2] = a[3] = init;
    for (ic = 0; ic < in_g; ++ic, xc += in_plane, wc += p->k_h * p->k_w) {
        const float *xr = xc, *wr = wc;
        for (ky = 0; ky < rows; ++ky, xr += step, wr += p->k_w) {
            if (width == 4) {
                conv_row4(xr, wr, 1, p->k_w, p->stride_w, p->dil_w, a);
            } else {
                a[0] = conv_row1(xr, wr, p->k_w, p->dil_w, a[0]);
            }
        }
    }
}

/* y[0..width) = a (width 4 or 1). */
EBT_INLINE void conv_put(float *y, const float *a, int width)
{
    y[0] = a[0];
    if (width == 4) {
        y[1] = a[1];
        y[2] = a[2];
        y[3] = a[3];
    }
}

/* out[j] += w0 * a[j * step] + w1 * b[j * step], j < count (b NULL: the first term only):
 * whole rows at once, two terms a pass, for kernels one column wide, whose taps share no
 * inputs along the row for a block to reuse. */
static void row_axpy2(float *out, int count, float w0, const float *a, float w1, const float *b,
                      int step)
{
    int j;
    if (b == NULL) {
        for (j = 0; j < count; ++j) {
            out[j] = EBT_FMA(out[j], w0, a[j * step]);
        }
        return;
    }
    if (step == 1) { /* the common case: plain pointer walks */
        for (j = 0; j < count; ++j) {
            out[j] = EBT_FMA(EBT_FMA(out[j], w0, a[j]), w1, b[j]);
        }
        return;
    }
    for (j = 0; j < count; ++j) {
        out[j] = EBT_FMA(EBT_FMA(out[j], w0, a[j * step]), w1, b[j * step]);
    }
}

/* out[j] += the four terms w[t] * rows[t][j], t < 4, j < count: rows side by side. */
static void row_axpy4(float *out, int count, const float *w, const float *const *rows)
{
    const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
    const float *a = rows[0], *b = rows[1], *c = rows[2], *d = rows[3];
    int j;
    for (j = 0; j < count; ++j) {
        out[j] = EBT_FMA(EBT_FMA(EBT_FMA(EBT_FMA(out[j], w0, a[j]), w1, b[j]), w2, c[j]), w3,
                         d[j]);
    }
}

/* A row's terms, four (stride 1) or two at a time: term t is w[t] times the row at
 * rows[t], read every step floats. */
static void rows_axpy(float *out, int count, const float *w, const float *const *rows, int n,
                      int step)
{
    int t = 0;
    if (step == 1) {
        for (; t + 4 <= n; t += 4) {
            row_axpy4(out, count, w + t, rows + t);
        }
    }
    for (; t + 2 <= n; t += 2) {
        row_axpy2(out, count, w[t], rows[t], w[t + 1], rows[t + 1], step);
    }
    if (t < n) {
        row_axpy2(out, count, w[t], rows[t], 0.0f, NULL, step);
    }
}

#define EBT_COLUMN_TERMS 16 /* terms gathered before a pass over the row */

/* An output row (count floats) summing terms weight x row (read every step floats),
 * gathered and added EBT_COLUMN_TERMS at a time. */
typedef struct {
    float *out;
    int count, step, n;
    float w[EBT_COLUMN_TERMS];
    const float *rows[EBT_COLUMN_TERMS];
} row_sum;

static void row_sum_flush(row_sum *r)
{
    rows_axpy(r->out, r->count, r->w, r->rows, r->n, r->step);
    r->n = 0;
}

static void row_sum_add(row_sum *r, float w, const float *row)
{
    r->w[r->n] = w;
    r->rows[r->n++] = row;
    if (r->n == EBT_COLUMN_TERMS) {
        row_sum_flush(r);
    }
}

/* The forward pass of a convolution one column wide (k_w == 1): each output row is its bias
 * plus, for every input channel of the group and kernel row inside the input, a weight
 * times an input row (at the stride). */
static void conv_forward_columns(const ebt_conv *p, const float *x, const float *w,
                                 const float *b, float *y)
{
    const int in_g = conv_in_per_group(p), out_g = p->out_c / p->groups;
    const int in_plane = p->in_h * p->in_w;
    int lo, hi, s, oc, oy, ic, ky, ky0, ky1, ox, i;
    conv_inside(p->out_w, p->in_w, 1, p->stride_w, p->pad_w, 1, &lo, &hi);
    for (s = 0; s < p->n; ++s) {
        for (oc = 0; oc < p->out_c; ++oc) {
            const float *xg = x + (s * p->in_c + (oc / out_g) * in_g) * in_plane;
            const float *wo = w + oc * in_g * p->k_h;
            const float bias = b ? b[oc] : 0.0f;
            /* at stride 1 the outputs from lo in blocks of 16 (cols16), the rest row_sum */
            const int blocks = p->stride_w == 1 ? (hi - lo) / 16 : 0, rest = lo + 16 * blocks;
            for (oy = 0; oy < p->out_h; ++oy, y += p->out_w) {
                column_sum sum;
                row_sum r;
                column_sum_start(&sum, y + lo, xg + lo - p->pad_w, blocks);
                for (i = 0; i < 16; ++i) {
                    sum.init[i] = bias;
                }
                r.out = y + rest;
                r.count = hi - rest;
                r.step = p->stride_w;
                r.n = 0;
                for (ox = 0; ox < lo; ++ox) { /* the blocks write their own */
                    y[ox] = bias;
                }
                for (ox = rest; ox < p->out_w; ++ox) {
                    y[ox] = bias;
                }
                taps_inside(oy, p->in_h, p->k_h, p->stride_h, p->pad_h, p->dil_h, &ky0, &ky1);
                for (ic = 0; ic < in_g; ++ic) {
                    for (ky = ky0; ky < ky1; ++ky) {
                        const int row = ic * in_plane +
                                        conv_src(oy, ky, p->stride_h, p->pad_h, p->dil_h) * p->in_w;
                        if (blocks > 0) {
                            column_sum_add(&sum, row, wo + ic * p->k_h + ky);
                        }
                        if (r.count > 0) {
                            row_sum_add(&r, wo[ic * p->k_h + ky],
                                        xg + row + rest * p->stride_w - p->pad_w);
                        }
                    }
                }
                if (blocks > 0) {
                    column_sum_finish(&sum);
                }
                row_sum_flush(&r);
            }
        }
    }
}

/* An output row (r: its geometry) at stride and dilation 1 as a correlation (corr_row): the
 * bias, then each input channel's kernel rows in order, every one its taps' correlation
 * with its input row. */
static void conv_forward_corr(const ebt_conv *p, const conv_rowset *r, float bias, float *y)
{
    const int in_g = conv_in_per_group(p), in_plane = p->in_h * p->in_w;
    corr_row c;
    int ic, ky, i;
    corr_start(&c, y, p->out_w, r->xg + r->iy0 * p->in_w, p->in_w, p->pad_w, p->k_w, 1, 1);
    for (i = 0; i < 8; ++i) {
        c.init[i] = bias;
    }
    for (ic = 0; ic < in_g; ++ic) {
        for (ky = r->ky0; ky < r->ky1; ++ky) {
            corr_add(&c, ic * in_plane + (ky - r->ky0) * p->dil_h * p->in_w,
                     r->wo + (ic * p->k_h + ky) * p->k_w);
        }
    }
    corr_finish(&c);
}

/* Outputs [from, to) of output row oy of channel oc of one sample (xs; r: the row's
 * geometry), into y: blocks of 4 where every tap reads inside the input along the row
 * ([lo, hi)), single outputs elsewhere. */
static void conv_forward_span(const ebt_conv *p, const conv_rowset *r, const float *xs,
                              const float *w, int oc, int oy, int from, int to, float bias,
                              float *y)
{
    int lo, hi, ox;
    conv_inside(p->out_w, p->in_w, p->k_w, p->stride_w, p->pad_w, p->dil_w, &lo, &hi);
    for (ox = from; ox < to;) {
        float a[4];
        if (ox >= lo && ox + 4 <= hi && ox + 4 <= to) {
            conv_block(p, r, ox, 4, bias, a);
            conv_put(y + ox, a, 4);
            ox += 4;
        } else if (ox >= lo && ox < hi) {
            conv_block(p, r, ox, 1, bias, a);
            y[ox] = a[0];
            ++ox;
        } else {
            y[ox] = conv_dot(p, xs, w, oc, oy, ox, bias);
            ++ox;
        }
    }
}

/* Output row oy of channel oc: at stride and dilation 1 a correlation (conv_forward_corr),
 * every other geometry (or a row narrower than a block, or a kernel too wide for an edge
 * block's scratch) by conv_forward_span. */
static void conv_forward_row(const ebt_conv *p, const conv_rowset *r, const float *xs,
                             const float *w, int oc, int oy, float bias, float *y)
{
    if (p->stride_w == 1 && p->dil_w == 1 && p->out_w >= 8 && 7 + p->k_w <= EBT_EDGE_FLOATS) {
        conv_forward_corr(p, r, bias, y);
        return;
    }
    conv_forward_span(p, r, xs, w, oc, oy, 0, p->out_w, bias, y);
}

static void conv_forward(const ebt_conv *p, const float *x, const float *w, const float *b,
                         float *y)
{
    const int in_g = conv_in_per_group(p), out_g = p->out_c / p->groups;
    const int in_plane = p->in_h * p->in_w, out_plane = p->out_h * p->out_w;
    int s, oc, oy;
    if (p->k_w == 1 && p->pad_w == 0 && p->out_w > 1) {
        conv_forward_columns(p, x, w, b, y);
        return;
    }
    for (s = 0; s < p->n; ++s) {
        const float *xs = x + s * p->in_c * in_plane;
        for (oc = 0; oc < p->out_c; ++oc) {
            float *yc = y + (s * p->out_c + oc) * out_plane;
            conv_rowset r;
            r.xg = xs + (oc / out_g) * in_g * in_plane;
            r.wo = w + oc * in_g * p->k_h * p->k_w;
            for (oy = 0; oy < p->out_h; ++oy, yc += p->out_w) {
                taps_inside(oy, p->in_h, p->k_h, p->stride_h, p->pad_h, p->dil_h, &r.ky0,
                            &r.ky1);
                r.iy0 = oy * p->stride_h - p->pad_h + r.ky0 * p->dil_h;
                conv_forward_row(p, &r, xs, w, oc, oy, b ? b[oc] : 0.0f, yc);
            }
        }
    }
}

/* dx (one sample, the channels of oc's group) += g * w[oc] placed at output (oy, ox): over
 * the kernel rows and columns that land inside the input (worked out once), each row of
 * taps a run of multiply-adds. */
static void conv_scatter(const ebt_conv *p, const float *w, float g, int oc, int oy, int ox,
                         float *dxg)
{
    const int in_g = conv_in_per_group(p), kk = p->k_h * p->k_w;
    const int in_plane = p->in_h * p->in_w, step = p->dil_h * p->in_w;
    int ic, ky, kx, ky0, ky1, kx0, kx1, n;
    taps_inside(oy, p->in_h, p->k_h, p->stride_h, p->pad_h, p->dil_h, &ky0, &ky1);
    taps_inside(ox, p->in_w, p->k_w, p->stride_w, p->pad_w, p->dil_w, &kx0, &kx1);
    n = kx1 - kx0;
    for (ic = 0; ic < in_g && n > 0; ++ic) {
        float *row = dxg + ic * in_plane +
                     conv_src(oy, ky0, p->stride_h, p->pad_h, p->dil_h) * p->in_w +
                     conv_src(ox, kx0, p->stride_w, p->pad_w, p->dil_w);
        const float *wr = w + (oc * in_g + ic) * kk + ky0 * p->k_w + kx0;
        for (ky = ky0; ky < ky1; ++ky, row += step, wr += p->k_w) {
            for (kx = 0; kx < n; ++kx) {
                row[kx * p->dil_w] = EBT_FMA(row[kx * p->dil_w], wr[kx], g);
            }
        }
    }
}

/* dx += conv_transpose(dy, w) output by output of dy: each dy value spread over its
 * window. Any stride; the general form, and what strided layers run. */
static void conv_backward_input_scatter(const ebt_conv *p, const float *dy, const float *w,
                                        float *dx)
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

/* The input gradient at (ic, iy, ix) of one sample (dys) of a stride-1 convolution: the sum
 * over the output channels of ic's group and the taps that read it of w * dy. */
static float conv_input_dot(const ebt_conv *p, const float *dys, const float *w, int ic, int iy,
                            int ix, float init)
{
    const int in_g = conv_in_per_group(p), out_g = p->out_c / p->groups;
    const int first = (ic / in_g) * out_g, icg = ic % in_g;
    float acc = init;
    int oc, ky, kx, ky0, ky1, kx0, kx1;
    grad_taps_inside(iy, p->pad_h, p->dil_h, p->out_h, p->k_h, &ky0, &ky1);
    grad_taps_inside(ix, p->pad_w, p->dil_w, p->out_w, p->k_w, &kx0, &kx1);
    for (oc = first; oc < first + out_g; ++oc) {
        const float *wo = w + ((oc * in_g + icg) * p->k_h) * p->k_w;
        const float *dyc = dys + oc * p->out_h * p->out_w;
        for (ky = ky0; ky < ky1; ++ky) {
            const float *dr = dyc + (iy + p->pad_h - ky * p->dil_h) * p->out_w;
            for (kx = kx0; kx < kx1; ++kx) {
                acc = EBT_FMA(acc, wo[ky * p->k_w + kx], dr[ix + p->pad_w - kx * p->dil_w]);
            }
        }
    }
    return acc;
}

/* Input gradients [ix, ix + 4) of row iy of channel ic (r: dy's planes of ic's group, ic's
 * taps of the group's first output channel, the kernel rows whose dy row exists [ky0, ky1)
 * and the dy row of ky0), every tap inside dy's row: a stride-1 convolution's input
 * gradient is a correlation of dy with the taps backwards. a starts from dx. */
EBT_INLINE void conv_input_block(const ebt_conv *p, const conv_rowset *r, int ix,
                                 const float *dx, float a[4])
{
    const int in_g = conv_in_per_group(p), out_g = p->out_c / p->groups;
    const int out_plane = p->out_h * p->out_w, rows = r->ky1 - r->ky0;
    const int step = p->dil_h * p->out_w, kk = p->k_h * p->k_w;
    /* dy column of the last tap; dy rows go down as kernel rows go up */
    const float *dc = r->xg + r->iy0 * p->out_w + ix + p->pad_w - (p->k_w - 1) * p->dil_w;
    const float *wc = r->wo + r->ky0 * p->k_w + p->k_w - 1;
    int oc, ky;
    a[0] = dx[0];
    a[1] = dx[1];
    a[2] = dx[2];
    a[3] = dx[3];
    for (oc = 0; oc < out_g; ++oc, dc += out_plane, wc += in_g * kk) {
        const float *dr = dc, *wr = wc;
        for (ky = 0; ky < rows; ++ky, dr -= step, wr += p->k_w) {
            conv_row4(dr, wr, -1, p->k_w, 1, p->dil_w, a);
        }
    }
}

/* The input gradients of a row (r as conv_input_block) at dilation 1 as a correlation
 * (corr_row): dx plus, for each output channel of the group and kernel row in order, the
 * correlation of its taps backwards with its dy row. */
static void conv_input_corr(const ebt_conv *p, const conv_rowset *r, float *dx)
{
    const int in_g = conv_in_per_group(p), out_g = p->out_c / p->groups;
    const int out_plane = p->out_h * p->out_w, kk = p->k_h * p->k_w;
    corr_row c;
    int oc, ky;
    corr_start(&c, dx, p->in_w, r->xg + r->iy0 * p->out_w, p->out_w, p->k_w - 1 - p->pad_w,
               p->k_w, 0, 0);
    for (oc = 0; oc < out_g; ++oc) {
        for (ky = r->ky0; ky < r->ky1; ++ky) {
            corr_add(&c, oc * out_plane - (ky - r->ky0) * p->dil_h * p->out_w,
                     r->wo + oc * in_g * kk + (ky + 1) * p->k_w);
        }
    }
    corr_finish(&c);
}

/* The input gradient of a stride-1 convolution one column wide without padding along the
 * row (dy rows and dx rows line up): each dx row gains, for every output channel of its
 * group and kernel row whose dy row exists, a weight times that dy row. */
static void conv_input_columns(const ebt_conv *p, const float *dy, const float *w, float *dx)
{
    const int in_g = conv_in_per_group(p), out_g = p->out_c / p->groups;
    const int out_plane = p->out_h * p->out_w;
    /* each dx row in blocks of 16 (cols16, from dx itself), the rest row_sum */
    const int blocks = p->in_w / 16, rest = 16 * blocks;
    int s, ic, iy, oc, ky, k0, k1;
    for (s = 0; s < p->n; ++s) {
        const float *dys = dy + s * p->out_c * out_plane;
        for (ic = 0; ic < p->in_c; ++ic) {
            const int first = (ic / in_g) * out_g, icg = ic % in_g;
            for (iy = 0; iy < p->in_h; ++iy) {
                float *out = dx + ((s * p->in_c + ic) * p->in_h + iy) * p->in_w;
                column_sum sum;
                row_sum r;
                column_sum_start(&sum, out, dys, blocks);
                sum.passes = 1; /* dx is the start */
                r.out = out + rest;
                r.count = p->in_w - rest;
                r.step = 1;
                r.n = 0;
                grad_taps_inside(iy, p->pad_h, p->dil_h, p->out_h, p->k_h, &k0, &k1);
                for (oc = first; oc < first + out_g; ++oc) {
                    for (ky = k0; ky < k1; ++ky) {
                        const int row = oc * out_plane + (iy + p->pad_h - ky * p->dil_h) * p->out_w;
                        const float *wv = w + (oc * in_g + icg) * p->k_h + ky;
                        if (blocks > 0) {
                            column_sum_add(&sum, row, wv);
                        }
                        if (r.count > 0) {
                            row_sum_add(&r, *wv, dys + row + rest);
                        }
                    }
                }
                column_sum_flush(&sum);
                row_sum_flush(&r);
            }
        }
    }
}

/* Input columns [*lo, *hi) of a stride-1 convolution whose every tap reads inside dy's
 * row: ox = ix + pad - kx * dil in [0, out_w) for every kx. */
static void grad_inside(const ebt_conv *p, int *lo, int *hi)
{
    *lo = (p->k_w - 1) * p->dil_w - p->pad_w;
    *hi = p->out_w - p->pad_w < p->in_w ? p->out_w - p->pad_w : p->in_w;
    if (*lo < 0) {
        *lo = 0;
    }
}

/* dx columns [from, to) of row iy of input channel ic (r: its geometry) += their input
 * gradients: blocks of 4 inside, single columns elsewhere. */
static void conv_input_span(const ebt_conv *p, const conv_rowset *r, const float *dys,
                            const float *w, int ic, int iy, int from, int to, float *dxr)
{
    int lo, hi, ix;
    grad_inside(p, &lo, &hi);
    for (ix = from; ix < to;) {
        if (ix >= lo && ix + 4 <= hi && ix + 4 <= to) {
            float a[4];
            conv_input_block(p, r, ix, dxr + ix, a);
            conv_put(dxr + ix, a, 4);
            ix += 4;
        } else {
            dxr[ix] = conv_input_dot(p, dys, w, ic, iy, ix, dxr[ix]);
            ++ix;
        }
    }
}

/* dx row iy of input channel ic += its input gradients: at dilation 1 a correlation
 * (conv_input_corr), else (or for a row narrower than a block, or a kernel too wide for an
 * edge block's scratch) conv_input_span. */
static void conv_input_row(const ebt_conv *p, const conv_rowset *r, const float *dys,
                           const float *w, int ic, int iy, float *dxr)
{
    if (p->dil_w == 1 && p->in_w >= 8 && 7 + p->k_w <= EBT_EDGE_FLOATS) {
        conv_input_corr(p, r, dxr);
        return;
    }
    conv_input_span(p, r, dys, w, ic, iy, 0, p->in_w, dxr);
}

static void conv_backward_input(const ebt_conv *p, const float *dy, const float *w, float *dx)
{
    const int in_g = conv_in_per_group(p), out_g = p->out_c / p->groups;
    const int out_plane = p->out_h * p->out_w;
    int s, ic, iy;
    if (p->stride_h != 1 || p->stride_w != 1) {
        conv_backward_input_scatter(p, dy, w, dx);
        return;
    }
    if (p->k_w == 1 && p->pad_w == 0) {
        conv_input_columns(p, dy, w, dx);
        return;
    }
    for (s = 0; s < p->n; ++s) {
        const float *dys = dy + s * p->out_c * out_plane;
        for (ic = 0; ic < p->in_c; ++ic) {
            conv_rowset r;
            r.xg = dys + (ic / in_g) * out_g * out_plane;
            r.wo = w + ((ic / in_g) * out_g * in_g + ic % in_g) * p->k_h * p->k_w;
            for (iy = 0; iy < p->in_h; ++iy) {
                float *dxr = dx + ((s * p->in_c + ic) * p->in_h + iy) * p->in_w;
                grad_taps_inside(iy, p->pad_h, p->dil_h, p->out_h, p->k_h, &r.ky0,
                                 &r.ky1);
                r.iy0 = iy + p->pad_h - r.ky0 * p->dil_h;
                conv_input_row(p, &r, dys, w, ic, iy, dxr);
            }
        }
    }
}

static int clamp_int(int v, int lo, int hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}


/* acc + the sum of a[i] * b[i], i < count, in order, four products a loop. */
static float dot(float acc, const float *a, const float *b, int count)
{
    int i = 0;
    for (; i + 4 <= count; i += 4) {
        acc = EBT_FMA(acc, a[i], b[i]);
        acc = EBT_FMA(acc, a[i + 1], b[i + 1]);
        acc = EBT_FMA(acc, a[i + 2], b[i + 2]);
        acc = EBT_FMA(acc, a[i + 3], b[i + 3]);
    }
    for (; i < count; ++i) {
        acc = EBT_FMA(acc, a[i], b[i]);
    }
    return acc;
}

/* sum of dyr[o] * xr[o * stride - pad + k * dil] over outputs [lo, hi). */
static float conv_tap_dot(const ebt_conv *p, const float *dyr, const float *xr, int k, int lo,
                          int hi)
{
    const int st = p->stride_w;
    const float *xp = xr + lo * st - p->pad_w + k * p->dil_w;
    float acc = 0.0f;
    int o = lo;
    if (st == 1) {
        return dot(0.0f, dyr + lo, xp, hi - lo);
    }
    for (; o + 4 <= hi; o += 4, xp += 4 * st) {
        acc = EBT_FMA(acc, dyr[o], xp[0]);
        acc = EBT_FMA(acc, dyr[o + 1], xp[st]);
        acc = EBT_FMA(acc, dyr[o + 2], xp[2 * st]);
        acc = EBT_FMA(acc, dyr[o + 3], xp[3 * st]);
    }
    for (; o < hi; ++o, xp += st) {
        acc = EBT_FMA(acc, dyr[o], *xp);
    }
    return acc;
}

/* a[t] += the weight gradient of taps k0 + t (t < 4) of one row pair: the sum over the
 * outputs of dyr[o] * xr[o * stride - pad + (k0 + t) * dil] where the tap reads inside
 * (tl[t] <= o < th[t]). The outputs all four taps read inside run together (stride 1: a
 * window of 7 inputs for 4 outputs); the few near the edges, per tap. */
EBT_INLINE void conv_weight_row4(const ebt_conv *p, const float *dyr, const float *xr, int k0,
                                 const int tl[4], const int th[4], float a[4])
{
    const int st = p->stride_w, dil = p->dil_w, lo = tl[0], hi = th[3];
    int t, o;
    if (lo >= hi) {
        for (t = 0; t < 4; ++t) {
            a[t] += conv_tap_dot(p, dyr, xr, k0 + t, tl[t], th[t]);
        }
        return;
    }
    for (t = 1; t < 4; ++t) {
        if (tl[t] < lo) {
            a[t] += conv_tap_dot(p, dyr, xr, k0 + t, tl[t], lo);
        }
    }
    for (t = 0; t < 3; ++t) {
        if (hi < th[t]) {
            a[t] += conv_tap_dot(p, dyr, xr, k0 + t, hi, th[t]);
        }
    }
    {
        const float *xp = xr + lo * st - p->pad_w + k0 * dil;
        float a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
        o = lo;
        if (st == 1 && dil == 1) {
            for (; o + 4 <= hi; o += 4, xp += 4) {
                const float g0 = dyr[o], g1 = dyr[o + 1], g2 = dyr[o + 2], g3 = dyr[o + 3];
                const float x0 = xp[0], x1 = xp[1], x2 = xp[2], x3 = xp[3], x4 = xp[4],
                            x5 = xp[5], x6 = xp[6];
                a0 = EBT_FMA(a0, g0, x0);
                a1 = EBT_FMA(a1, g0, x1);
                a2 = EBT_FMA(a2, g0, x2);
                a3 = EBT_FMA(a3, g0, x3);
                a0 = EBT_FMA(a0, g1, x1);
                a1 = EBT_FMA(a1, g1, x2);
                a2 = EBT_FMA(a2, g1, x3);
                a3 = EBT_FMA(a3, g1, x4);
                a0 = EBT_FMA(a0, g2, x2);
                a1 = EBT_FMA(a1, g2, x3);
                a2 = EBT_FMA(a2, g2, x4);
                a3 = EBT_FMA(a3, g2, x5);
                a0 = EBT_FMA(a0, g3, x3);
                a1 = EBT_FMA(a1, g3, x4);
                a2 = EBT_FMA(a2, g3, x5);
                a3 = EBT_FMA(a3, g3, x6);
            }
        }
        for (; o < hi; ++o, xp += st) {
            const float g = dyr[o];
            a0 = EBT_FMA(a0, g, xp[0]);
            a1 = EBT_FMA(a1, g, xp[dil]);
            a2 = EBT_FMA(a2, g, xp[2 * dil]);
            a3 = EBT_FMA(a3, g, xp[3 * dil]);
        }
        a[0] = a0;
        a[1] = a1;
        a[2] = a2;
        a[3] = a3;
    }
}

#define EBT_WEIGHT_EDGE 64 /* outputs one zero-padded window of a weight-gradient edge serves */

/* a[i] += sum over t < n of s[t] * x[t + i], i < width (8, 4 or 1), t in order: a weight
 * gradient's taps at once, in assembly where there is one. */
EBT_INLINE void corr_width(float a[8], const float *s, const float *x, int n, int width)
{
    int t;
    if (width == 8) {
        corr8(a, s, x, n);
        return;
    }
#if defined(EBT_ASM)
    (void)t;
    if (width == 4) {
        ebt_corr4_up(a, s, x, n);
        return;
    }
    a[0] = ebt_dot1(a[0], s, x, n);
#else
    if (width == 4) {
        conv_row4(x, s, 1, n, 1, 1, a);
        return;
    }
    for (t = 0; t < n; ++t) {
        a[0] = EBT_FMA(a[0], s[t], x[t]);
    }
#endif
}

/* a[t] += the sum over outputs [o0, o1) of dyr[o] * X[o - o0 + first + t], t < width, X the
 * in_w inputs at xr and zero outside them: corr_width over zero-padded copies of the
 * inputs, EBT_WEIGHT_EDGE outputs at a time. */
EBT_LOOPS static void weight_edge(const float *dyr, const float *xr, int in_w, int first,
                                  int o0, int o1, int width, float a[8])
{
    float win[EBT_WEIGHT_EDGE + 7];
    int o, t;
    for (o = o0; o < o1; o += EBT_WEIGHT_EDGE) {
        const int n = o1 - o < EBT_WEIGHT_EDGE ? o1 - o : EBT_WEIGHT_EDGE, span = n + width - 1;
        const int f = first + o - o0;
        const int t0 = f < 0 ? (-f < span ? -f : span) : 0;
        const int t1 = in_w - f < span ? (in_w - f > t0 ? in_w - f : t0) : span;
        for (t = 0; t < t0; ++t) {
            win[t] = 0.0f;
        }
        for (; t < t1; ++t) {
            win[t] = xr[f + t];
        }
        for (; t < span; ++t) {
            win[t] = 0.0f;
        }
        corr_width(a, dyr + o, win, n, width);
    }
}

/* a[t] += the weight gradient of taps k0 + t (t < n <= width) of one row pair at stride and
 * dilation 1, as conv_weight_row4: the outputs where all width taps read inside in one
 * correlation (corr_width: dy's values step along the inputs, the taps' sums at once; with
 * n < width, the taps past the kernel's last are summed too, inside the row, and dropped),
 * the outputs where only some of the kernel's taps read inside (the edges) over
 * zero-padded copies (weight_edge). tl, th: the width taps' output ranges. */
EBT_INLINE void conv_weight_row(const ebt_conv *p, const float *dyr, const float *xr, int k0,
                                int n, int width, const int tl[8], const int th[8], float a[8])
{
    const int lo = tl[0], hi = th[width - 1], e0 = tl[n - 1], e1 = th[0];
    const int first = k0 - p->pad_w; /* the input of output 0's tap k0 */
    if (lo >= hi) {
        weight_edge(dyr, xr, p->in_w, first + e0, e0, e1, width, a);
        return;
    }
    if (e0 < lo) {
        weight_edge(dyr, xr, p->in_w, first + e0, e0, lo, width, a);
    }
    if (hi < e1) {
        weight_edge(dyr, xr, p->in_w, first + hi, hi, e1, width, a);
    }
    corr_width(a, dyr + lo, xr + lo + first, hi - lo, width);
}

/* The next group of a kernel row's taps from k on: its first tap k0 (<= k: a last group of
 * 8 ends at the kernel's last tap, repeating taps before k, which are dropped), its n taps
 * and the width its sums run at: at stride and dilation 1 the correlations' 8 (every 8
 * taps, and 7), 4 (4 to 6 taps, and 3) and 1 (the rest); else (or on rows of fewer than
 * 16 outputs, mostly edges) 0, groups of 4 in C. Returns the first tap after the group. */
static int weight_group(const ebt_conv *p, int k, int *k0, int *n, int *width)
{
    const int left = p->k_w - k;
    *k0 = k;
    if (p->stride_w != 1 || p->dil_w != 1 || p->out_w < 16) {
        *width = 0;
        *n = left < 4 ? left : 4;
    } else if (p->k_w >= 8) {
        *width = *n = 8;
        *k0 = left < 8 ? p->k_w - 8 : k;
    } else if (left == 7) {
        *width = 8;
        *n = 7;
    } else if (left >= 3) {
        *width = 4;
        *n = left < 4 ? left : 4;
    } else {
        *width = *n = 1;
    }
    return *k0 + *n;
}

/* Where the taps [k0, k0 + n) (n <= 8) of kernel row ky read inside the input, the same
 * for every channel: their output columns [tl[t], th[t]) (a correlation's group has the
 * ranges of all its width taps from k0, past the kernel's end too) and the output rows
 * [y0, y1) (within the tile's rows) whose input row exists. */
typedef struct {
    int k0, n, width, ky, tl[8], th[8], y0, y1;
} conv_taps;

static void conv_taps_of(const ebt_conv *p, int ky, int k0, int n, int width, int r0, int r1,
                         conv_taps *g)
{
    int t;
    g->k0 = k0;
    g->n = n;
    g->width = width;
    g->ky = ky;
    for (t = 0; t < (width > 0 ? width : n); ++t) {
        tap_range(p->out_w, p->in_w, k0 + t, p->stride_w, p->pad_w, p->dil_w, &g->tl[t],
                  &g->th[t]);
    }
    tap_range(p->out_h, p->in_h, ky, p->stride_h, p->pad_h, p->dil_h, &g->y0, &g->y1);
    g->y0 = g->y0 > r0 ? g->y0 : r0;
    g->y1 = g->y1 < r1 ? g->y1 : r1;
}

/* The weight gradients of the taps g of kernel row (oc, ic) over every sample, into a. */
EBT_LOOPS static void conv_weight_taps(const ebt_conv *p, const float *dy, const float *x, int oc,
                                       int ic, const conv_taps *g, float a[8])
{
    const int in_plane = p->in_h * p->in_w, out_plane = p->out_h * p->out_w;
    const int first_in = conv_first_in(p, oc);
    int s, oy, t;
    for (t = 0; t < 8; ++t) {
        a[t] = 0.0f;
    }
    for (s = 0; s < p->n; ++s) {
        const float *dyc = dy + (s * p->out_c + oc) * out_plane;
        const float *plane = x + (s * p->in_c + first_in + ic) * in_plane;
        for (oy = g->y0; oy < g->y1; ++oy) {
            const int iy = conv_src(oy, g->ky, p->stride_h, p->pad_h, p->dil_h);
            const float *dyr = dyc + oy * p->out_w, *xr = plane + iy * p->in_w;
            if (g->width > 0) {
                conv_weight_row(p, dyr, xr, g->k0, g->n, g->width, g->tl, g->th, a);
                continue;
            }
            if (g->n == 4) {
                conv_weight_row4(p, dyr, xr, g->k0, g->tl, g->th, a);
                continue;
            }
            for (t = 0; t < g->n; ++t) {
                a[t] += conv_tap_dot(p, dyr, xr, g->k0 + t, g->tl[t], g->th[t]);
            }
        }
    }
}

/* a[j] += sum over o < n of s[o] * x[j * step + o], j < 8, o in order: one row's dot
 * products with 8 rows step floats apart, the multiples of 8 in assembly where there is
 * one (ebt_dots8), the rest (or all) in C. */
static void dots8(float a[8], const float *s, const float *x, int step, int n)
{
    int o = 0, j;
#if defined(EBT_ASM)
    o = n & ~7;
    if (o > 0) {
        ebt_dots8(a, s, x, step, o);
    }
#endif
    for (j = 0; j < 8; ++j) {
        const float *xr = x + j * step;
        float acc = a[j];
        int i;
        for (i = o; i < n; ++i) {
            acc = EBT_FMA(acc, s[i], xr[i]);
        }
        a[j] = acc;
    }
}

/* y[q * qstep] plus the dot product of s (n floats) with the row xr + q * step, q < rows:
 * summed on its own and added (onto 0), or summed onto y's value term by term in order
 * (onto 1: as the row paths sum an output, from its start). 8 rows at a time (dots8), the
 * last 8 ending at the last row (the rows the 8 before did are dropped); fewer than 8 one
 * by one. */
EBT_INLINE void row_dots(float *y, int qstep, const float *s, const float *xr, int step, int rows,
                     int n, int onto)
{
    int q, j;
    if (rows < 8) {
        for (q = 0; q < rows; ++q) {
            float *into = y + q * qstep;
            const float *row = xr + q * step;
            *into = onto ? dot(*into, s, row, n) : *into + dot(0.0f, s, row, n);
        }
        return;
    }
    for (q = 0; q < rows; q += 8) {
        const int first = q + 8 > rows ? rows - 8 : q;
        float a[8];
        for (j = 0; j < 8; ++j) {
            a[j] = onto ? y[(first + j) * qstep] : 0.0f;
        }
        dots8(a, s, xr + first * step, step, n);
        for (j = q - first; j < 8; ++j) {
            y[(first + j) * qstep] = onto ? a[j] : y[(first + j) * qstep] + a[j];
        }
    }
}

/* A convolution one column wide at stride 1 without padding along the row (dy and x
 * columns line up): each weight's gradient is a sum of dot products of dy's rows with
 * input rows. A dy row against the input rows of its kernel rows (or, for a pointwise
 * kernel whose planes line up, the rows [r0, r1) as one row against every input channel)
 * runs through row_dots. Returns 0 for any other geometry. */
static int conv_weight_columns(const ebt_conv *p, const float *dy, const float *x, float *dw,
                               int r0, int r1)
{
    const int in_g = conv_in_per_group(p), in_plane = p->in_h * p->in_w;
    const int out_plane = p->out_h * p->out_w;
    const int flat = p->k_h == 1 && p->stride_h == 1 && p->pad_h == 0;
    int oc, ic, s, oy, ky0, ky1;
    if (p->k_w != 1 || p->stride_w != 1 || p->pad_w != 0) {
        return 0;
    }
    for (oc = 0; oc < p->out_c; ++oc) {
        const int first_in = conv_first_in(p, oc);
        float *dwo = dw + oc * in_g * p->k_h;
        for (s = 0; s < p->n; ++s) {
            const float *dyc = dy + (s * p->out_c + oc) * out_plane;
            const float *xs = x + (s * p->in_c + first_in) * in_plane;
            if (flat) {
                row_dots(dwo, 1, dyc + r0 * p->out_w, xs + r0 * p->in_w, in_plane, in_g,
                         (r1 - r0) * p->out_w, 0);
                continue;
            }
            for (ic = 0; ic < in_g; ++ic) {
                for (oy = r0; oy < r1; ++oy) {
                    const int iy0 = oy * p->stride_h - p->pad_h;
                    taps_inside(oy, p->in_h, p->k_h, p->stride_h, p->pad_h, p->dil_h, &ky0,
                                &ky1);
                    row_dots(dwo + ic * p->k_h + ky0, 1, dyc + oy * p->out_w,
                             xs + ic * in_plane + (iy0 + ky0 * p->dil_h) * p->in_w,
                             p->dil_h * p->in_w, ky1 - ky0, p->out_w, 0);
                }
            }
        }
    }
    return 1;
}

static void conv_backward_weight(const ebt_conv *p, const float *dy, const float *x, float *dw,
                                 int row0, int row1)
{
    const int in_g = conv_in_per_group(p);
    const int r0 = clamp_int(row0, 0, p->out_h), r1 = clamp_int(row1, r0, p->out_h);
    int oc, ic, ky, k, t, next;
    if (conv_weight_columns(p, dy, x, dw, r0, r1)) {
        return;
    }
    /* tap groups outermost (weight_group): where they read inside is worked out once for
     * every channel */
    for (ky = 0; ky < p->k_h; ++ky) {
        for (k = 0; k < p->k_w; k = next) {
            int k0, n, width;
            conv_taps g;
            next = weight_group(p, k, &k0, &n, &width);
            conv_taps_of(p, ky, k0, n, width, r0, r1, &g);
            for (oc = 0; oc < p->out_c; ++oc) {
                for (ic = 0; ic < in_g; ++ic) {
                    float *into = dw + ((oc * in_g + ic) * p->k_h + ky) * p->k_w + k0;
                    float a[8];
                    conv_weight_taps(p, dy, x, oc, ic, &g, a);
                    for (t = k - k0; t < g.n; ++t) {
                        into[t] += a[t];
                    }
                }
            }
        }
    }
}

/* acc + a[0] + a[1] + ... in this order (one accumulator: the plain loop's sum), four
 * terms a pass to spare the loop's compare and branch; on the M4F 8 a pass in assembly
 * (ebt_sum8, the same sum). */
static float row_total(float acc, const float *a, int count)
{
    int i = 0;
#if defined(EBT_ASM)
    if (count >= 8) {
        acc = ebt_sum8(acc, a, count / 8);
        i = count & ~7;
    }
#endif
    for (; i + 4 <= count; i += 4) {
        acc += a[i];
        acc += a[i + 1];
        acc += a[i + 2];
        acc += a[i + 3];
    }
    for (; i < count; ++i) {
        acc += a[i];
    }
    return acc;
}

void ebt_conv_backward_bias(const ebt_conv *p, const float *dy, float *db)
{
    const int out_plane = p->out_h * p->out_w;
    int oc, s;
    for (oc = 0; oc < p->out_c; ++oc) {
        float acc = 0.0f;
        for (s = 0; s < p->n; ++s) {
            acc = row_total(acc, dy + (s * p->out_c + oc) * out_plane, out_plane);
        }
        db[oc] += acc;
    }
}

/* out[0..count) += the sum over t < terms of wv[t * wstep] * rows[t * rstep ..]: blocks of
 * 16 through cols16 (from out itself), the rest row_sum. */
static void rows_into(float *out, int count, const float *wv, int wstep, const float *rows,
                      int rstep, int terms)
{
    const int blocks = count / 16, rest = 16 * blocks;
    column_sum sum;
    row_sum r;
    int t;
    column_sum_start(&sum, out, rows, blocks);
    sum.passes = 1; /* out is the start */
    r.out = out + rest;
    r.count = count - rest;
    r.step = 1;
    r.n = 0;
    for (t = 0; t < terms; ++t) {
        if (blocks > 0) {
            column_sum_add(&sum, t * rstep, wv + t * wstep);
        }
        if (r.count > 0) {
            row_sum_add(&r, wv[t * wstep], rows + t * rstep + rest);
        }
    }
    column_sum_flush(&sum);
    row_sum_flush(&r);
}

/* ---- patches: one output position's input window as a vector ------------------------- */

#define EBT_PATCH 256 /* floats of a patch's stack chunk: whole input channels' windows */

/* Rows whose outputs are few (narrow planes) or strided leave the row paths little to
 * block. A dense or grouped convolution with several output channels a group, a window of
 * 16 or more terms and a kernel at most twice the input (a window of mostly padding is
 * cheaper skipped, tap by tap) then runs position by position: the window an output
 * reads (its patch: input channel, kernel row, kernel column, zero outside the input) is a
 * vector, each output channel's weights another, and the three passes are dot products
 * and weighted sums of rows (row_dots, rows_into) over EBT_PATCH floats at a time. */
static int conv_by_patches(const ebt_conv *p)
{
    const int out_g = p->out_c / p->groups, kk = p->k_h * p->k_w;
    return out_g >= 4 && kk > 1 && kk <= EBT_PATCH && conv_in_per_group(p) * kk >= 16 &&
           p->k_h <= 2 * p->in_h && p->k_w <= 2 * p->in_w &&
           (p->out_w < 32 || p->stride_w != 1);
}

/* The input gradient by patches too where it is strided with several output channels a
 * group: otherwise it scatters each dy value over its window, one multiply-add at a time;
 * by patches it is a weighted sum of weight rows however short. */
static int conv_input_by_patches(const ebt_conv *p)
{
    return conv_by_patches(p) || ((p->stride_h != 1 || p->stride_w != 1) &&
                                  p->out_c >= 4 * p->groups && p->k_h * p->k_w <= EBT_PATCH);
}

/* Input channels per patch chunk, and where output (oy, ox)'s window lies: its kernel rows
 * and columns inside the input [ky0, ky1) x [kx0, kx1), and its first input (row, column). */
typedef struct {
    int channels, ky0, ky1, kx0, kx1, iy, ix;
} patch_at;

static void patch_locate(const ebt_conv *p, int oy, int ox, patch_at *at)
{
    at->channels = EBT_PATCH / (p->k_h * p->k_w);
    taps_inside(oy, p->in_h, p->k_h, p->stride_h, p->pad_h, p->dil_h, &at->ky0, &at->ky1);
    taps_inside(ox, p->in_w, p->k_w, p->stride_w, p->pad_w, p->dil_w, &at->kx0, &at->kx1);
    at->iy = oy * p->stride_h - p->pad_h;
    at->ix = ox * p->stride_w - p->pad_w;
}

/* The patch of channels [c0, c0 + cn) of the group's planes xg, into patch. */
EBT_LOOPS static void patch_gather(const ebt_conv *p, const patch_at *at, const float *xg,
                                   int c0, int cn, float *patch)
{
    const int kk = p->k_h * p->k_w;
    int c, ky, kx;
    for (c = 0; c < cn * kk; ++c) {
        patch[c] = 0.0f;
    }
    for (c = 0; c < cn; ++c) {
        const float *plane = xg + (c0 + c) * p->in_h * p->in_w;
        for (ky = at->ky0; ky < at->ky1; ++ky) {
            const float *row = plane + (at->iy + ky * p->dil_h) * p->in_w + at->ix;
            float *into = patch + c * kk + ky * p->k_w;
            for (kx = at->kx0; kx < at->kx1; ++kx) {
                into[kx] = row[kx * p->dil_w];
            }
        }
    }
}

/* The patch of channels [c0, c0 + cn) added into the group's planes dxg (its terms outside
 * the input are dropped). */
static void patch_scatter(const ebt_conv *p, const patch_at *at, const float *patch, int c0,
                          int cn, float *dxg)
{
    const int kk = p->k_h * p->k_w;
    int c, ky, kx;
    for (c = 0; c < cn; ++c) {
        float *plane = dxg + (c0 + c) * p->in_h * p->in_w;
        for (ky = at->ky0; ky < at->ky1; ++ky) {
            float *row = plane + (at->iy + ky * p->dil_h) * p->in_w + at->ix;
            const float *from = patch + c * kk + ky * p->k_w;
            for (kx = at->kx0; kx < at->kx1; ++kx) {
                row[kx * p->dil_w] += from[kx];
            }
        }
    }
}

/* Forward: each output channel of the group its bias plus its weights' dot product with
 * the patch, term by term in the row paths' order (a tile of fewer channels takes those,
 * and its outputs are these bits), a chunk at a time (row_dots: 8 channels at once). */
static void patches_forward(const ebt_conv *p, const float *x, const float *w, const float *b,
                            float *y)
{
    const int in_g = conv_in_per_group(p), out_g = p->out_c / p->groups;
    const int kk = p->k_h * p->k_w, plane = p->out_h * p->out_w, k = in_g * kk;
    float patch[EBT_PATCH];
    int s, g, oy, ox, oc, c0;
    for (s = 0; s < p->n; ++s) {
        for (g = 0; g < p->groups; ++g) {
            const float *xg = x + (s * p->in_c + g * in_g) * p->in_h * p->in_w;
            float *yg = y + (s * p->out_c + g * out_g) * plane;
            const float *wg = w + g * out_g * k;
            for (oy = 0; oy < p->out_h; ++oy) {
                for (ox = 0; ox < p->out_w; ++ox) {
                    float *yo = yg + oy * p->out_w + ox;
                    patch_at at;
                    patch_locate(p, oy, ox, &at);
                    for (oc = 0; oc < out_g; ++oc) {
                        yo[oc * plane] = b ? b[g * out_g + oc] : 0.0f;
                    }
                    for (c0 = 0; c0 < in_g; c0 += at.channels) {
                        const int cn = in_g - c0 < at.channels ? in_g - c0 : at.channels;
                        patch_gather(p, &at, xg, c0, cn, patch);
                        row_dots(yo, plane, patch, wg + c0 * kk, k, out_g, cn * kk, 1);
                    }
                }
            }
        }
    }
}

/* Input gradient: the patch's gradient is the sum over the group's output channels of
 * their dy times their weights (rows_into), added back where the patch came from. */
static void patches_input(const ebt_conv *p, const float *dy, const float *w, float *dx)
{
    const int in_g = conv_in_per_group(p), out_g = p->out_c / p->groups;
    const int kk = p->k_h * p->k_w, plane = p->out_h * p->out_w, k = in_g * kk;
    float patch[EBT_PATCH];
    int s, g, oy, ox, c0, i;
    for (s = 0; s < p->n; ++s) {
        for (g = 0; g < p->groups; ++g) {
            float *dxg = dx + (s * p->in_c + g * in_g) * p->in_h * p->in_w;
            const float *dyg = dy + (s * p->out_c + g * out_g) * plane;
            const float *wg = w + g * out_g * k;
            for (oy = 0; oy < p->out_h; ++oy) {
                for (ox = 0; ox < p->out_w; ++ox) {
                    patch_at at;
                    patch_locate(p, oy, ox, &at);
                    for (c0 = 0; c0 < in_g && at.ky0 < at.ky1 && at.kx0 < at.kx1;
                         c0 += at.channels) {
                        const int cn = in_g - c0 < at.channels ? in_g - c0 : at.channels;
                        for (i = 0; i < cn * kk; ++i) {
                            patch[i] = 0.0f;
                        }
                        rows_into(patch, cn * kk, dyg + oy * p->out_w + ox, plane, wg + c0 * kk,
                                  k, out_g);
                        patch_scatter(p, &at, patch, c0, cn, dxg);
                    }
                }
            }
        }
    }
}

/* dw[0..n) += g * patch[0..n): in blocks of 16 (rows_into, one row) where there are
 * several, else in C. */
static void weight_onto(float *dw, int n, float g, const float *patch)
{
    int t;
    if (n >= 48) {
        rows_into(dw, n, &g, 0, patch, 0, 1);
        return;
    }
    for (t = 0; t < n; ++t) {
        dw[t] = EBT_FMA(dw[t], g, patch[t]);
    }
}

/* Weight gradient over output rows [r0, r1): each output channel's weights plus its dy
 * times the patch (weight_onto). */
static void patches_weight(const ebt_conv *p, const float *dy, const float *x, float *dw,
                           int r0, int r1)
{
    const int in_g = conv_in_per_group(p), out_g = p->out_c / p->groups;
    const int kk = p->k_h * p->k_w, plane = p->out_h * p->out_w, k = in_g * kk;
    float patch[EBT_PATCH];
    int s, g, oy, ox, oc, c0;
    for (s = 0; s < p->n; ++s) {
        for (g = 0; g < p->groups; ++g) {
            const float *xg = x + (s * p->in_c + g * in_g) * p->in_h * p->in_w;
            const float *dyg = dy + (s * p->out_c + g * out_g) * plane;
            float *dwg = dw + g * out_g * k;
            for (oy = r0; oy < r1; ++oy) {
                for (ox = 0; ox < p->out_w; ++ox) {
                    patch_at at;
                    patch_locate(p, oy, ox, &at);
                    for (c0 = 0; c0 < in_g; c0 += at.channels) {
                        const int cn = in_g - c0 < at.channels ? in_g - c0 : at.channels;
                        patch_gather(p, &at, xg, c0, cn, patch);
                        for (oc = 0; oc < out_g; ++oc) {
                            weight_onto(dwg + oc * k + c0 * kk, cn * kk,
                                        dyg[oc * plane + oy * p->out_w + ox], patch);
                        }
                    }
                }
            }
        }
    }
}

/* A linear layer's passes (conv_is_linear; weights [out][in]): the outputs each a bias plus
 * a dot product with a weight row, 8 at a time (row_dots); the input gradient a sample's dy
 * times the weight rows, the weight gradient each weight row plus the samples' inputs times
 * their dy (rows_into). */
static void linear_forward(const ebt_conv *p, const float *x, const float *w, const float *b,
                           float *y)
{
    int s, o;
    for (s = 0; s < p->n; ++s, x += p->in_c, y += p->out_c) {
        for (o = 0; o < p->out_c; ++o) {
            y[o] = b ? b[o] : 0.0f;
        }
        row_dots(y, 1, x, w, p->in_c, p->out_c, p->in_c, 0);
    }
}

static void linear_input(const ebt_conv *p, const float *dy, const float *w, float *dx)
{
    int s;
    for (s = 0; s < p->n; ++s) {
        rows_into(dx + s * p->in_c, p->in_c, dy + s * p->out_c, 1, w, p->in_c, p->out_c);
    }
}

static void linear_weight(const ebt_conv *p, const float *dy, const float *x, float *dw)
{
    int o;
    for (o = 0; o < p->out_c; ++o) {
        rows_into(dw + o * p->in_c, p->in_c, dy + o, p->out_c, x, p->in_c, p->n);
    }
}

/* The passes: a linear layer by its own, a convolution along its rows only (or pointwise)
 * as one along a row (conv_rowwise; the weight gradient when it covers every output row, as
 * the untiled and the tiled calls do), a narrow or strided one by patches
 * (conv_by_patches). */
void ebt_conv_forward(const ebt_conv *p, const float *x, const float *w, const float *b,
                      float *y)
{
    ebt_conv q;
    const ebt_conv *along = conv_rowwise(p, &q);
    if (conv_is_linear(p)) {
        linear_forward(p, x, w, b, y);
    } else if (conv_by_patches(along)) {
        patches_forward(along, x, w, b, y);
    } else {
        conv_forward(along, x, w, b, y);
    }
}

void ebt_conv_backward_input(const ebt_conv *p, const float *dy, const float *w, float *dx)
{
    ebt_conv q;
    const ebt_conv *along = conv_rowwise(p, &q);
    if (conv_is_linear(p)) {
        linear_input(p, dy, w, dx);
    } else if (conv_input_by_patches(along)) {
        patches_input(along, dy, w, dx);
    } else {
        conv_backward_input(along, dy, w, dx);
    }
}

void ebt_conv_backward_weight(const ebt_conv *p, const float *dy, const float *x, float *dw,
                              int row0, int row1)
{
    ebt_conv q;
    const int whole = row0 <= 0 && row1 >= p->out_h;
    /* rows [row0, row1) are p's own: only the whole runs along a row */
    const ebt_conv *along = whole ? conv_rowwise(p, &q) : p;
    const int r0 = whole ? 0 : clamp_int(row0, 0, p->out_h);
    const int r1 = whole ? along->out_h : clamp_int(row1, r0, p->out_h);
    if (conv_is_linear(p)) {
        if (whole) {
            linear_weight(p, dy, x, dw);
        }
    } else if (conv_by_patches(along)) {
        patches_weight(along, dy, x, dw, r0, r1);
    } else {
        conv_backward_weight(along, dy, x, dw, r0, r1);
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

/* Windows two columns wide at stride 2 and one or two rows high (1x2 and 2x2 pools) run a
 * row of outputs at a time without the window loops; the sums are the same. */
static int pool_pairs(const ebt_pool *p)
{
    return p->k_w == 2 && p->stride_w == 2 && p->k_h <= 2;
}

/* An average pool's plane: each window's sum (from 0, rows, then columns) over the area. */
static void pool_avg_plane(const ebt_pool *p, const float *plane, float *y, float area)
{
    int oy, ox, ky, kx;
    for (oy = 0; oy < p->out_h; ++oy) {
        const float *window = plane + oy * p->stride_h * p->in_w;
        const float *below = window + (p->k_h == 2 ? p->in_w : 0);
        if (pool_pairs(p) && p->k_h == 1) {
            for (ox = 0; ox < p->out_w; ++ox) {
                *y++ = (0.0f + window[2 * ox] + window[2 * ox + 1]) / area;
            }
            continue;
        }
        if (pool_pairs(p)) {
            for (ox = 0; ox < p->out_w; ++ox) {
                *y++ = (0.0f + window[2 * ox] + window[2 * ox + 1] + below[2 * ox] +
                        below[2 * ox + 1]) / area;
            }
            continue;
        }
        for (ox = 0; ox < p->out_w; ++ox, window += p->stride_w) {
            const float *row = window;
            float acc = 0.0f;
            for (ky = 0; ky < p->k_h; ++ky, row += p->in_w) {
                for (kx = 0; kx < p->k_w; ++kx) {
                    acc += row[kx];
                }
            }
            *y++ = acc / area;
        }
    }
}

/* Its gradient: each window's dy / area added to every element of the window. */
static void pool_avg_spread(const ebt_pool *p, const float *dy, float *dplane, float area)
{
    int oy, ox, ky, kx;
    for (oy = 0; oy < p->out_h; ++oy) {
        float *window = dplane + oy * p->stride_h * p->in_w;
        if (pool_pairs(p)) {
            float *below = window + p->in_w;
            for (ox = 0; ox < p->out_w; ++ox) {
                const float g = *dy++ / area;
                window[2 * ox] += g;
                window[2 * ox + 1] += g;
                if (p->k_h == 2) {
                    below[2 * ox] += g;
                    below[2 * ox + 1] += g;
                }
            }
            continue;
        }
        for (ox = 0; ox < p->out_w; ++ox, window += p->stride_w) {
            const float g = *dy++ / area;
            float *row = window;
            for (ky = 0; ky < p->k_h; ++ky, row += p->in_w) {
                for (kx = 0; kx < p->k_w; ++kx) {
                    row[kx] += g;
                }
            }
        }
    }
}

static void pool_forward(const ebt_pool *p, const float *x, float *y)
{
    const float area = (float)(p->k_h * p->k_w);
    const int out_plane = p->out_h * p->out_w;
    int plane_i, oy, ox;
    for (plane_i = 0; plane_i < p->n * p->c; ++plane_i) {
        const float *plane = x + plane_i * p->in_h * p->in_w;
        if (p->mode != EBT_POOL_MAX) {
            pool_avg_plane(p, plane, y, area);
            y += out_plane;
            continue;
        }
        for (oy = 0; oy < p->out_h; ++oy) {
            for (ox = 0; ox < p->out_w; ++ox) {
                *y++ = plane[pool_argmax(p, plane, oy, ox)];
            }
        }
    }
}

static void pool_backward(const ebt_pool *p, const float *x, const float *dy, float *dx)
{
    const float area = (float)(p->k_h * p->k_w);
    const int in_plane = p->in_h * p->in_w, out_plane = p->out_h * p->out_w;
    int plane_i, oy, ox;
    for (plane_i = 0; plane_i < p->n * p->c; ++plane_i) {
        const float *plane = x + plane_i * in_plane;
        float *dplane = dx + plane_i * in_plane;
        if (p->mode != EBT_POOL_MAX) {
            pool_avg_spread(p, dy, dplane, area);
            dy += out_plane;
            continue;
        }
        for (oy = 0; oy < p->out_h; ++oy) {
            for (ox = 0; ox < p->out_w; ++ox) {
                dplane[pool_argmax(p, plane, oy, ox)] += *dy++;
            }
        }
    }
}

/* A pool along its rows only (one column wide, as a conv1d's length is laid out) as the
 * same pool along a row: the same memory, and a one-column window scanned down its rows is
 * the one-row window scanned along its columns (the tie rule holds). */
static const ebt_pool *pool_rowwise(const ebt_pool *p, ebt_pool *q)
{
    if (p->in_w != 1 || p->out_w != 1 || p->k_w != 1 || p->in_h == 1) {
        return p;
    }
    *q = *p;
    q->in_h = q->out_h = q->k_h = q->stride_h = 1;
    q->in_w = p->in_h;
    q->out_w = p->out_h;
    q->k_w = p->k_h;
    q->stride_w = p->stride_h;
    return q;
}

void ebt_pool_forward(const ebt_pool *p, const float *x, float *y)
{
    ebt_pool q;
    pool_forward(pool_rowwise(p, &q), x, y);
}

void ebt_pool_backward(const ebt_pool *p, const float *x, const float *dy, float *dx)
{
    ebt_pool q;
    pool_backward(pool_rowwise(p, &q), x, dy, dx);
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

/* 127/128 as float32 bits: a positive float's bits order as the float does. */
#define EBT_CLAMP_HIGH_BITS 0x3F7E0000u

static uint32_t bits_of(const float *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void put_bits(float *p, uint32_t v)
{
    memcpy(p, &v, sizeof v);
}

/* relu then the clamp to 127/128 on a float's bits: a sign bit (or zero) gives +0, a
 * positive value its smaller of itself and 127/128. */
static uint32_t relu_clamp_bits(uint32_t v)
{
    if (v >= 0x80000000u) {
        return 0u;
    }
    return v < EBT_CLAMP_HIGH_BITS ? v : EBT_CLAMP_HIGH_BITS;
}

/* g where x (its bits v) is strictly inside (0, 127/128), else +0. */
static uint32_t relu_clamp_pass(uint32_t v, uint32_t g)
{
    return v - 1u < EBT_CLAMP_HIGH_BITS - 1u ? g : 0u;
}

void ebt_act_forward(int act, int count, const float *x, float *y)
{
    int i;
    if (act == EBT_ACT_RELU_CLAMP) {
        /* the common case, on the bits (EBT_CLAMP_HIGH_BITS): x <= 0 (a zero or the sign
         * bit set) gives 0, a positive x the smaller of itself and 127/128 -- the same
         * values as the float compares, without an FPU compare and flag transfer each */
        i = 0;
#if defined(EBT_ASM)
        if (count >= 4) {
            ebt_relu_clamp4(x, y, count / 4, EBT_CLAMP_HIGH_BITS);
            i = count & ~3;
        }
#endif
        for (; i + 4 <= count; i += 4) {
            put_bits(y + i, relu_clamp_bits(bits_of(x + i)));
            put_bits(y + i + 1, relu_clamp_bits(bits_of(x + i + 1)));
            put_bits(y + i + 2, relu_clamp_bits(bits_of(x + i + 2)));
            put_bits(y + i + 3, relu_clamp_bits(bits_of(x + i + 3)));
        }
        for (; i < count; ++i) {
            put_bits(y + i, relu_clamp_bits(bits_of(x + i)));
        }
        return;
    }
    for (i = 0; i < count; ++i) {
        y[i] = act_apply(act, x[i]);
    }
}

void ebt_act_backward(int act, int count, const float *x, const float *dy, float *dx)
{
    int i;
    if (act == EBT_ACT_RELU_CLAMP) {
        /* dy passes where 0 < x < 127/128, i.e. where x's bits are in [1, HIGH - 1] (a
         * negative x has the sign bit set): integer compares and a select per element, no
         * FPU compare and flag transfer */
        i = 0;
#if defined(EBT_ASM)
        if (count >= 4) {
            ebt_relu_clamp_pass4(x, dy, dx, count / 4, EBT_CLAMP_HIGH_BITS);
            i = count & ~3;
        }
#endif
        for (; i + 4 <= count; i += 4) {
            const uint32_t g0 = bits_of(dy + i), g1 = bits_of(dy + i + 1);
            const uint32_t g2 = bits_of(dy + i + 2), g3 = bits_of(dy + i + 3);
            put_bits(dx + i, relu_clamp_pass(bits_of(x + i), g0));
            put_bits(dx + i + 1, relu_clamp_pass(bits_of(x + i + 1), g1));
            put_bits(dx + i + 2, relu_clamp_pass(bits_of(x + i + 2), g2));
            put_bits(dx + i + 3, relu_clamp_pass(bits_of(x + i + 3), g3));
        }
        for (; i < count; ++i) {
            put_bits(dx + i, relu_clamp_pass(bits_of(x + i), bits_of(dy + i)));
        }
        return;
    }
    for (i = 0; i < count; ++i) {
        dx[i] = act_grad(act, x[i], dy[i]);
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

/* ---- copies ------------------------------------------------------------------------------ */

EBT_LOOPS void ebt_copy(float *dst, const float *src, int count)
{
    int i = 0;
#if defined(EBT_ASM)
    if (count >= 16) {
        ebt_copy16(dst, src, count / 16);
        i = count & ~15;
    }
#endif
    for (; i < count; ++i) {
        dst[i] = src[i];
    }
}

EBT_LOOPS void ebt_zero(float *p, int count)
{
    int i = 0;
#if defined(EBT_ASM)
    if (count >= 16) {
        ebt_zero16(p, count / 16);
        i = count & ~15;
    }
#endif
    for (; i < count; ++i) {
        p[i] = 0.0f;
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
