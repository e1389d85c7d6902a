/* edgebuild training passes tiled through L1 (eb_train_tiles.h): the tiles, their staging,
 * and the ordinary kernels of eb_train.c run on each. */
#include "eb_train_tiles.h"

#include <stddef.h>

/* L2 -> L1 or back: the one place a DMA driver would go. On the Cortex-M4F ebt_copy moves
 * 16 floats an instruction pair (VLDM/VSTM); a library memcpy of a size known only at run
 * time takes several times the instructions per float. */
static void ebt_stage(float *dst, const float *src, int count)
{
    ebt_copy(dst, src, count);
}

/* `blocks` blocks of `block` floats, `stride` floats apart in L2, packed in L1. */
static void stage_in(float *l1, const float *l2, int blocks, int block, int stride)
{
    int i;
    for (i = 0; i < blocks; ++i) {
        ebt_stage(l1 + i * block, l2 + i * stride, block);
    }
}

/* The packed L1 blocks back to L2, `stride` floats apart. */
static void stage_out(float *l2, const float *l1, int blocks, int block, int stride)
{
    int i;
    for (i = 0; i < blocks; ++i) {
        ebt_stage(l2 + i * stride, l1 + i * block, block);
    }
}

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

/* Where a tile walk is: sample s, first output channel c0 and row r0; and the tile there. */
typedef struct {
    int s, c0, r0;
    int channels, rows; /* this tile's (the last of each may be smaller) */
    int cin0;           /* first input channel it reads */
    int a;              /* first input row of its window */
    int in_rows;        /* rows of its window */
    int pad_h;          /* padding above its window */
    int groups;
} tile_at;

static void tiles_start(tile_at *it)
{
    it->s = 0;
    it->c0 = 0;
    it->r0 = 0;
}

/* Samples outermost, then channel tiles, then row tiles. */
static void tiles_next(tile_at *it, const ebt_tile *t, int out_c, int out_h)
{
    it->r0 += t->rows;
    if (it->r0 >= out_h) {
        it->r0 = 0;
        it->c0 += t->channels;
        if (it->c0 >= out_c) {
            it->c0 = 0;
            ++it->s;
        }
    }
}

/* The input window of output rows [r0, r0 + rows): the first row `top` of it a tap
 * reaches (may be above the map), `reach` rows on (may run past its end). */
static void window_rows(tile_at *it, int top, int reach, int in_h)
{
    const int a = top < 0 ? 0 : top;
    const int b = min_int(in_h - 1, top + reach - 1);
    it->a = a;
    it->in_rows = b >= a ? b - a + 1 : 0;
    it->pad_h = a - top;
}

/* The tile of a convolution where `it` is; 0 when the walk is over. */
static int conv_tile(const ebt_conv *p, const ebt_tile *t, tile_at *it)
{
    const int m = p->out_c / p->groups, in_g = p->in_c / p->groups;
    if (it->s >= p->n) {
        return 0;
    }
    it->channels = min_int(t->channels, p->out_c - it->c0);
    it->rows = min_int(t->rows, p->out_h - it->r0);
    if (p->groups == 1) {
        it->groups = 1;
        it->cin0 = 0;
    } else {
        it->groups = it->channels % m == 0 ? it->channels / m : 1; /* whole groups, or a part */
        it->cin0 = it->c0 / m * in_g;
    }
    window_rows(it, it->r0 * p->stride_h - p->pad_h,
                (it->rows - 1) * p->stride_h + p->dil_h * (p->k_h - 1) + 1, p->in_h);
    return 1;
}

/* The tile as a convolution of its own (eb_train_tiles.h). */
static ebt_conv conv_sub(const ebt_conv *p, const tile_at *it)
{
    ebt_conv sub = *p;
    sub.n = 1;
    sub.in_c = it->groups * (p->in_c / p->groups);
    sub.in_h = it->in_rows;
    sub.out_c = it->channels;
    sub.out_h = it->rows;
    sub.pad_h = it->pad_h;
    sub.groups = it->groups;
    return sub;
}

static int conv_weights(const ebt_conv *p)
{
    return p->in_c / p->groups * p->k_h * p->k_w;
}

/* Rows from `row` on of plane `plane` of sample `s` of a [n][planes][rows][width] tensor in
 * L2: a tile's window (input side) or its block of output rows. */
static float *rows_at(const float *t, int s, int planes, int plane, int rows, int row,
                      int width)
{
    return (float *)t + ((s * planes + plane) * rows + row) * width;
}

/* The tile's input window (or input-gradient window) in L2. */
static float *conv_window(const ebt_conv *p, const tile_at *it, const float *x)
{
    return rows_at(x, it->s, p->in_c, it->cin0, p->in_h, it->a, p->in_w);
}

/* The tile's output (or output-gradient) rows in L2. */
static float *conv_rows(const ebt_conv *p, const tile_at *it, const float *y)
{
    return rows_at(y, it->s, p->out_c, it->c0, p->out_h, it->r0, p->out_w);
}

void ebt_conv_forward_tiled(const ebt_conv *p, const ebt_tile *t, const float *x,
                            const float *w, const float *b, float *y, float *l1)
{
    tile_at it;
    for (tiles_start(&it); conv_tile(p, t, &it); tiles_next(&it, t, p->out_c, p->out_h)) {
        const ebt_conv sub = conv_sub(p, &it);
        const int window = sub.in_h * p->in_w, out = it.rows * p->out_w;
        float *lx = l1, *lw = lx + sub.in_c * window, *lb = lw + it.channels * conv_weights(p);
        float *ly = lb + (b != NULL ? it.channels : 0);
        stage_in(lx, conv_window(p, &it, x), sub.in_c, window, p->in_h * p->in_w);
        ebt_stage(lw, w + it.c0 * conv_weights(p), it.channels * conv_weights(p));
        if (b != NULL) {
            ebt_stage(lb, b + it.c0, it.channels);
        }
        ebt_conv_forward(&sub, lx, lw, b != NULL ? lb : NULL, ly);
        stage_out(conv_rows(p, &it, y), ly, it.channels, out, p->out_h * p->out_w);
    }
}

void ebt_conv_backward_input_tiled(const ebt_conv *p, const ebt_tile *t, const float *dy,
                                   const float *w, float *dx, float *l1)
{
    tile_at it;
    for (tiles_start(&it); conv_tile(p, t, &it); tiles_next(&it, t, p->out_c, p->out_h)) {
        const ebt_conv sub = conv_sub(p, &it);
        const int window = sub.in_h * p->in_w, out = it.rows * p->out_w;
        float *ldy = l1, *lw = ldy + it.channels * out, *ldx = lw + it.channels * conv_weights(p);
        float *into = conv_window(p, &it, dx);
        stage_in(ldy, conv_rows(p, &it, dy), it.channels, out, p->out_h * p->out_w);
        ebt_stage(lw, w + it.c0 * conv_weights(p), it.channels * conv_weights(p));
        stage_in(ldx, into, sub.in_c, window, p->in_h * p->in_w);
        ebt_conv_backward_input(&sub, ldy, lw, ldx);
        stage_out(into, ldx, sub.in_c, window, p->in_h * p->in_w);
    }
}

void ebt_conv_backward_weight_tiled(const ebt_conv *p, const ebt_tile *t, const float *dy,
                                    const float *x, float *dw, float *db, float *l1)
{
    tile_at it;
    for (tiles_start(&it); conv_tile(p, t, &it); tiles_next(&it, t, p->out_c, p->out_h)) {
        const ebt_conv sub = conv_sub(p, &it);
        const int window = sub.in_h * p->in_w, out = it.rows * p->out_w;
        const int weights = it.channels * conv_weights(p);
        float *ldy = l1, *lx = ldy + it.channels * out;
        float *ldw = lx + (dw != NULL ? sub.in_c * window : 0);
        float *ldb = ldw + (dw != NULL ? weights : 0);
        stage_in(ldy, conv_rows(p, &it, dy), it.channels, out, p->out_h * p->out_w);
        if (dw != NULL) {
            stage_in(lx, conv_window(p, &it, x), sub.in_c, window, p->in_h * p->in_w);
            ebt_stage(ldw, dw + it.c0 * conv_weights(p), weights);
            ebt_conv_backward_weight(&sub, ldy, lx, ldw, 0, it.rows);
            ebt_stage(dw + it.c0 * conv_weights(p), ldw, weights);
        }
        if (db != NULL) {
            ebt_stage(ldb, db + it.c0, it.channels);
            ebt_conv_backward_bias(&sub, ldy, ldb);
            ebt_stage(db + it.c0, ldb, it.channels);
        }
    }
}

/* The tile of a pooling where `it` is; 0 when the walk is over. */
static int pool_tile(const ebt_pool *p, const ebt_tile *t, tile_at *it)
{
    if (it->s >= p->n) {
        return 0;
    }
    it->channels = min_int(t->channels, p->c - it->c0);
    it->rows = min_int(t->rows, p->out_h - it->r0);
    it->cin0 = it->c0;
    it->groups = it->channels;
    window_rows(it, it->r0 * p->stride_h, (it->rows - 1) * p->stride_h + p->k_h, p->in_h);
    return 1;
}

static ebt_pool pool_sub(const ebt_pool *p, const tile_at *it)
{
    ebt_pool sub = *p;
    sub.n = 1;
    sub.c = it->channels;
    sub.in_h = it->in_rows;
    sub.out_h = it->rows;
    return sub;
}

static float *pool_window(const ebt_pool *p, const tile_at *it, const float *x)
{
    return rows_at(x, it->s, p->c, it->c0, p->in_h, it->a, p->in_w);
}

static float *pool_rows(const ebt_pool *p, const tile_at *it, const float *y)
{
    return rows_at(y, it->s, p->c, it->c0, p->out_h, it->r0, p->out_w);
}

void ebt_pool_forward_tiled(const ebt_pool *p, const ebt_tile *t, const float *x, float *y,
                            float *l1)
{
    tile_at it;
    for (tiles_start(&it); pool_tile(p, t, &it); tiles_next(&it, t, p->c, p->out_h)) {
        const ebt_pool sub = pool_sub(p, &it);
        const int window = sub.in_h * p->in_w, out = it.rows * p->out_w;
        float *lx = l1, *ly = lx + it.channels * window;
        stage_in(lx, pool_window(p, &it, x), it.channels, window, p->in_h * p->in_w);
        ebt_pool_forward(&sub, lx, ly);
        stage_out(pool_rows(p, &it, y), ly, it.channels, out, p->out_h * p->out_w);
    }
}

void ebt_pool_backward_tiled(const ebt_pool *p, const ebt_tile *t, const float *x,
                             const float *dy, float *dx, float *l1)
{
    tile_at it;
    for (tiles_start(&it); pool_tile(p, t, &it); tiles_next(&it, t, p->c, p->out_h)) {
        const ebt_pool sub = pool_sub(p, &it);
        const int window = sub.in_h * p->in_w, out = it.rows * p->out_w;
        const int max = p->mode == EBT_POOL_MAX;
        float *lx = l1, *ldy = lx + (max ? it.channels * window : 0);
        float *ldx = ldy + it.channels * out;
        float *into = pool_window(p, &it, dx);
        if (max) {
            stage_in(lx, pool_window(p, &it, x), it.channels, window, p->in_h * p->in_w);
        }
        stage_in(ldy, pool_rows(p, &it, dy), it.channels, out, p->out_h * p->out_w);
        stage_in(ldx, into, it.channels, window, p->in_h * p->in_w);
        ebt_pool_backward(&sub, lx, ldy, ldx);
        stage_out(into, ldx, it.channels, window, p->in_h * p->in_w);
    }
}
