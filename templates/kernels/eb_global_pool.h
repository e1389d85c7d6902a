/* edgebuild global pooling (ops/global_pool.py): each channel's whole map to one value, the
 * maximum or the average, for maps of any size: [C][n] int8 in (n = L or H * W, one
 * contiguous run per channel), [C] int8 out.
 *
 * The average is the exact sum divided by n with the model's pooling rule, as eb_pool2d and
 * numerics.np_divide_round: half up floor((2 sum + n) / 2n), computed as the equal
 * floor((sum + floor(n / 2)) / n); floor; or trunc (toward zero, MAX7800x). The sum runs in
 * blocks of EB_GLOBAL_POOL_BLOCK values, each an int32 (|block| <= 2^30), into an int64
 * total, and the division is 32-bit while n <= EB_GLOBAL_POOL_BLOCK (|sum + n / 2| < 2^31),
 * 64-bit beyond: no n overflows, and the usual maps pay nothing for it.
 *
 * eb_global_pool is the reference (one value at a time); eb_global_pool_opt gives the same
 * results four bytes at a time: on the Cortex-M4, per word of a channel one EOR and one
 * USADA8 (the sum of the bytes with their sign bits flipped, x ^ 0x80 = x + 128 unsigned,
 * less 128 per byte) or one SSUB8 + SEL (byte-wise max), word-aligned loads of four words
 * at a time, the unaligned head and the tail byte by byte; the same algorithm in portable C
 * elsewhere (the host tests). No scratch, nothing read outside the input. */
#ifndef EB_GLOBAL_POOL_H
#define EB_GLOBAL_POOL_H

#include <stdint.h>

#include "eb_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EB_GLOBAL_POOL_BLOCK 8388608 /* 2^23 values per int32 block sum */

typedef struct {
    int32_t c;             /* channels */
    int32_t n;             /* values per channel (its whole map), n >= 1 */
    int8_t mode, rounding; /* EB_POOL_MAX / EB_POOL_AVG; EB_ROUND_HALF_UP / FLOOR / TRUNC */
} eb_global_pool_params;

void eb_global_pool(const eb_global_pool_params *p, const int8_t *in, int8_t *out);
void eb_global_pool_opt(const eb_global_pool_params *p, const int8_t *in, int8_t *out);

#ifdef __cplusplus
}
#endif

#endif
