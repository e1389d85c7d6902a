/* edgebuild float32 training kernels — static files copied into a generated project that
 * fine-tunes on the device. Portable C99, no allocation; libm use is limited to expf, logf,
 * sqrtf and fabsf. Tensor math is float only (the Adam bias-correction scalars alone are
 * computed in double, as torch computes them in Python).
 *
 * Conventions:
 *  - every buffer is batch-first, channels-first and contiguous: [N][C][H][W];
 *  - conv1d is conv2d with H = 1; linear is conv2d with in_h = in_w = 1 and k_h = k_w = 1,
 *    its weights [out][in];
 *  - conv weights use the torch layout [out_c][in_c / groups][k_h][k_w]; bias is [out_c];
 *  - the reference for every kernel is torch (torch.nn.functional, torch.autograd,
 *    torch.optim); results differ only by float32 summation order.
 *
 * The accumulate rule: every backward kernel ADDS (+=) into its gradient outputs and never
 * clears them. The caller zeroes each gradient buffer exactly once per training step, before
 * the backward pass. This is what makes graphs correct without special cases:
 *  - a tensor with two consumers (a branch, a residual add) receives the sum of both input
 *    gradients, by calling each consumer's backward into the same buffer;
 *  - a weight gradient computed tile by tile (ebt_conv_backward_weight over output-row tiles)
 *    is the sum over the tiles. Zeroing per call would keep only the last contribution.
 * The losses and the activations are the exceptions: they WRITE the gradient of their input.
 * A loss starts the backward pass; an activation's gradient is its input's one
 * contribution: the pre-activation's (`<layer>.pre`, which nothing else reads), or, in
 * place, the layer output's gradient, which it masks after every consumer has added to it.
 *
 * The max-pool tie rule: the whole gradient of a window goes to the FIRST maximum in window
 * scan order (rows, then columns), which is PyTorch's CPU rule. Ties are the normal case here:
 * activations come from int8 data, so equal values in a window are common. (NaN inputs are
 * not supported.)
 */
#ifndef EB_TRAIN_H
#define EB_TRAIN_H

#include <stdint.h>

/* Generated training code configures this library in eb_train_config.h: every global
 * symbol gets the model's name, so that several models link into one firmware. Compiled on
 * its own (-DEB_STANDALONE, as edgebuild's tests do) the library keeps the plain names. */
#ifndef EB_STANDALONE
#include "eb_train_config.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* One convolution over a batch; out_h/out_w follow torch's
 * (in + 2*pad - dil*(k-1) - 1) / stride + 1 and are given by the caller. */
typedef struct {
    int n; /* batch */
    int in_c, in_h, in_w, out_c, out_h, out_w;
    int k_h, k_w, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups;
} ebt_conv;

/* y = conv(x, w) + b; y is written. b may be NULL. */
void ebt_conv_forward(const ebt_conv *p, const float *x, const float *w, const float *b,
                      float *y);
/* dx += conv_transpose(dy, w). */
void ebt_conv_backward_input(const ebt_conv *p, const float *dy, const float *w, float *dx);
/* dw += contribution of output rows [row0, row1) of every sample; a tiled layer calls it once
 * per row tile, the untiled call is row0 = 0, row1 = out_h. Rows are clamped to [0, out_h]. */
void ebt_conv_backward_weight(const ebt_conv *p, const float *dy, const float *x, float *dw,
                              int row0, int row1);
/* db += sum of dy over the batch and every output position. */
void ebt_conv_backward_bias(const ebt_conv *p, const float *dy, float *db);

#define EBT_POOL_MAX 0
#define EBT_POOL_AVG 1

/* Pooling without padding; mode is EBT_POOL_MAX or EBT_POOL_AVG. */
typedef struct {
    int n, c, in_h, in_w, out_h, out_w, k_h, k_w, stride_h, stride_w, mode;
} ebt_pool;

/* y is written: the window maximum, or the window sum divided by k_h * k_w. */
void ebt_pool_forward(const ebt_pool *p, const float *x, float *y);
/* dx += ; max: the whole dy to the FIRST maximum of the window (the tie rule above), found
 * again from the forward input x; avg: dy / (k_h * k_w) to every element of the window.
 * Overlapping windows (stride < k) add up. */
void ebt_pool_backward(const ebt_pool *p, const float *x, const float *dy, float *dx);

#define EBT_ACT_NONE 0
#define EBT_ACT_RELU 1
#define EBT_ACT_ABS 2
/* Or'ed into an activation: then clamp to the int8 output range [-1, 127/128] in real
 * units, as the deployed layer saturates and as float training clamps (F.hardtanh). */
#define EBT_ACT_CLAMP 4
#define EBT_ACT_RELU_CLAMP (EBT_ACT_RELU | EBT_ACT_CLAMP)
#define EBT_ACT_ABS_CLAMP (EBT_ACT_ABS | EBT_ACT_CLAMP)
#define EBT_CLAMP_LOW (-1.0f)
#define EBT_CLAMP_HIGH 0.9921875f

/* y = act(x), elementwise; y may be x (in place). */
void ebt_act_forward(int act, int count, const float *x, float *y);
/* dx = dy * act'(x) (written, see the accumulate rule); relu'(0) = 0 and abs'(x) = sign(x)
 * with sign(0) = 0, like torch; the clamp passes dy only strictly inside its range (torch's
 * hardtanh backward). x is the pre-activation, or for relu and the clamps without abs the
 * activation's output, which gives the same mask (0 < y, and y strictly inside the clamp's
 * range, exactly where the input is): the generated code runs those in place. dx may be
 * dy (in place). */
void ebt_act_backward(int act, int count, const float *x, const float *dy, float *dx);
/* dst += src: the backward of an add (once per operand) and of a branch. */
void ebt_accumulate(int count, const float *src, float *dst);
/* dst[0..count) = src[0..count), not overlapping: the tiles' copies between L2 and L1. */
void ebt_copy(float *dst, const float *src, int count);
/* p[0..count) = +0.0f: a training step's clearing of its gradient buffers. */
void ebt_zero(float *p, int count);
/* y = a + b; y may alias a or b. */
void ebt_add_forward(int count, const float *a, const float *b, float *y);
/* Concatenation along channels of `parts` inputs, per sample: input i holds part_elems[i]
 * floats per sample (C_i * H * W), y holds their sum per sample, in order. Backward:
 * dxs[i] += its slice of dy. */
void ebt_concat_forward(int n, int parts, const int *part_elems, const float *const *xs,
                        float *y);
void ebt_concat_backward(int n, int parts, const int *part_elems, const float *dy,
                         float *const *dxs);

/* Losses: the mean over the batch, like torch's default reduction="mean". They return the
 * loss and WRITE (not accumulate) the gradient with respect to their input. */
/* Cross entropy of logits [n][classes] against labels in [0, classes): log-softmax with max
 * subtraction; dlogits = (softmax - onehot) / n. */
float ebt_softmax_cross_entropy(int n, int classes, const float *logits, const int32_t *labels,
                                float *dlogits);
/* Mean squared error over all n * k elements; dy = 2 * (y - target) / (n * k). */
float ebt_mse(int n, int k, const float *y, const float *target, float *dy);

/* Optimizers with torch.optim semantics: SGD with dampening 0, nesterov off, weight_decay 0;
 * Adam with amsgrad off, weight_decay 0. */
/* momentum_buf: NULL when momentum == 0, otherwise zeroed once before the first step (a zero
 * buffer makes the first step buf = g, exactly torch's initialisation). */
void ebt_sgd_step(int count, float *w, const float *g, float *momentum_buf, float lr,
                  float momentum);
/* torch's single-tensor Adam; m and v are zeroed once before the first step; step counts from
 * 1. bias_correction1 = 1 - beta1^step and bias_correction2 = 1 - beta2^step are computed in
 * double and used as float, as torch does (Python floats); then step_size = lr / bc1,
 * denom = sqrt(v) / sqrt(bc2) + eps, w -= step_size * m / denom. */
void ebt_adam_step(int count, float *w, const float *g, float *m, float *v, float lr,
                   float beta1, float beta2, float eps, int step);

#ifdef __cplusplus
}
#endif

#endif
