/* edgebuild weight-only file (.wof) — reader and writer of the trainable float32 weights a
 * device loads at start and saves back after training. Portable C99: no allocation, no
 * stdio; every field is read and written byte by byte, so the code is the same on little-
 * and big-endian targets. Floats must be IEEE 754 binary32 (checked at compile time).
 *
 * Format version 1 (all little-endian; documented with the reason for each field in
 * edgebuild/wof.py, which reads and writes the same bytes):
 *   offset  size  field
 *   0       4     magic "EBWF" (0x45 0x42 0x57 0x46)
 *   4       2     version (u16) = 1
 *   6       2     reserved (u16) = 0, readers reject non-zero
 *   8       4     tensor count N (u32)
 *   12      4     total file size in bytes (u32)
 *   16      4     layout id (u32): identifies the model's tensor list (names, shapes)
 *   20      4     crc32 (IEEE 802.3, as zlib.crc32) of bytes [24, size)
 *   24      8*N   table: per tensor {u32 offset from file start, u32 element count};
 *                 offset 0xFFFFFFFF with count 0 = tensor absent
 *   ...           data: float32, each tensor at a 4-byte aligned offset, in table order
 */
#ifndef EB_WOF_H
#define EB_WOF_H

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

#define EB_WOF_VERSION 1u
#define EB_WOF_HEADER_BYTES 24u
#define EB_WOF_ENTRY_BYTES 8u
#define EB_WOF_ABSENT 0xFFFFFFFFu /* table offset of an absent tensor */

/* The reader's checks, in the order it makes them (the first failure is returned). */
typedef enum {
    EB_WOF_OK = 0,
    EB_WOF_ERR_SHORT,    /* shorter than the header, or than header + table */
    EB_WOF_ERR_MAGIC,    /* not "EBWF" */
    EB_WOF_ERR_VERSION,  /* not version 1 */
    EB_WOF_ERR_RESERVED, /* reserved field not 0 */
    EB_WOF_ERR_SIZE,     /* size field differs from the buffer length (truncated/padded) */
    EB_WOF_ERR_CRC,      /* table or data corrupted */
    EB_WOF_ERR_LAYOUT,   /* written for another model's tensor list */
    EB_WOF_ERR_COUNT,    /* tensor count differs from the caller's */
    EB_WOF_ERR_TENSOR,   /* a table entry: offset outside/misaligned, wrong element count,
                            data past the end, overlap, or absent marker with a count */
    EB_WOF_ERR_CAPACITY  /* writer: the file does not fit the buffer (or 4 GiB) */
} eb_wof_status;

/* One line of English per status (never NULL). */
const char *eb_wof_message(eb_wof_status s);

/* crc32 IEEE 802.3 (reflected 0xEDB88320, init and final xor 0xFFFFFFFF), the value of
 * zlib.crc32. 4 bits at a time with a 64-byte table. */
uint32_t eb_wof_crc32(const uint8_t *data, uint32_t len);

/* Bytes a file with all `count` tensors present takes (elements[i] floats each), or 0 if
 * that exceeds 4 GiB - 1. Absent tensors make the file smaller by 4 * elements[i]. */
uint32_t eb_wof_size(uint32_t count, const uint32_t *elements);

/* Loads the file buf[0, len) written for layout `layout_id` with `count` tensors of
 * elements[i] floats into tensors[i]. Validates the WHOLE file first; only if everything is
 * valid copies the present tensors. On any error nothing is written: the previous weights
 * are kept. An absent tensor keeps its current value. */
eb_wof_status eb_wof_read(const uint8_t *buf, uint32_t len, uint32_t layout_id,
                          uint32_t count, const uint32_t *elements, float *const *tensors);

/* Writes the file of `count` tensors (tensors[i] NULL = absent) into buf[0, capacity) and
 * sets *written (if not NULL) to its size. If it does not fit, returns EB_WOF_ERR_CAPACITY,
 * leaves buf untouched and sets *written to 0. */
eb_wof_status eb_wof_write(uint8_t *buf, uint32_t capacity, uint32_t layout_id,
                           uint32_t count, const uint32_t *elements,
                           const float *const *tensors, uint32_t *written);

#ifdef __cplusplus
}
#endif

#endif /* EB_WOF_H */
